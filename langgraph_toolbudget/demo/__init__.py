"""Examples: the offline demo (``python -m langgraph_toolbudget.demo``) and server graphs."""
