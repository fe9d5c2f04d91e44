"""LangGraph adapters: the nodes, the agent nodes and the prebuilt graphs."""
