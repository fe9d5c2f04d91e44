"""The tool budget as LangChain v1 agent middleware: :class:`ToolBudgetMiddleware`.

Key Components:
    - :class:`ToolBudgetMiddleware`: for ``langchain.agents.create_agent``. It
      registers the catalog's tools and the meta-tools with the agent, chooses
      the visible tools at the start of each user turn (the nodes
      ``ClassifyIntent``, ``SelectTools`` and ``ToolSearch``, run as they are),
      binds only the meta-tools and the visible tools to each model call (with
      the categories section in the system prompt), answers a reply's meta-calls
      once after the model and refuses calls to tools the model was not shown or
      the thread excluded (``BatchRunner``'s built-in answers, ``VisibilityPolicy``'s
      checks and errors, ``ToolCallPipeline``'s coercion and failure messages), all
      in the thread's tool context (``SessionContext``) as under the nodes.
    - :class:`ToolBudgetAgentState`: the agent state plus the budget's and the
      tool context's fields (tool names only), so threads persist through any
      checkpointer.

A thin adapter, like ``nodes/``: selection, meta-tools and enforcement are the
shared core's; only the hooks are here. Needs ``langchain>=1.3``
(the ``middleware`` extra: ``pip install -e ".[middleware]"`` from a clone).

Typical Usage:
    ```python
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, max_tools=6)])
    out = agent.invoke({"messages": [{"role": "user", "content": "weather in Paris?"}]})
    out["selected_tools"]  # the tools the model was shown
    ```
"""

try:
    import langchain.agents.middleware  # noqa: F401 - checked first, for a clear error
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "ToolBudgetMiddleware needs LangChain v1 agents (langchain>=1.3): "
        'pip install -e ".[middleware]" in a clone of langgraph-toolbudget '
        "(or pip install langchain)"
    ) from exc

from langgraph_toolbudget.middleware.agent import ToolBudgetMiddleware
from langgraph_toolbudget.middleware.state import ToolBudgetAgentState

__all__ = ["ToolBudgetAgentState", "ToolBudgetMiddleware"]
