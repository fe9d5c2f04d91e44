"""The demo: the example catalog, the demo chat models and the offline demo.

``python -m langgraph_toolbudget.demo`` runs the offline demo. The example catalog
(:mod:`~langgraph_toolbudget.demo.example_catalog`) and the rule-based models
(:mod:`~langgraph_toolbudget.demo.model`, :mod:`~langgraph_toolbudget.demo.text_model`) are
also what the docs, the notebooks and the LangGraph server graphs (``examples/server.py``,
outside the package) run. Nothing else in the package imports this one. Its one reason to
change: what the demo shows.
"""
