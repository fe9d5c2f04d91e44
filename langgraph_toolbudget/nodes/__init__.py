"""LangGraph adapters: the nodes, the agent nodes and the prebuilt graphs.

Its one reason to change: what the LangGraph adapter layer holds (each module below says its own).
"""
