"""Node plumbing shared by every node: one object that runs under invoke and ainvoke.

Its one reason to change: what every node shares (sync/async, stream events, the agent's
routing edge, how a graph's node is known as one of the package's).
"""

# No `from __future__ import annotations` here: LangGraph reads the `config`
# annotation at runtime to decide whether to pass the RunnableConfig.
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph import END
from langgraph.prebuilt import tools_condition

from langgraph_toolbudget._compat import RunnableCallable
from langgraph_toolbudget.config import check_node_options
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.working_set import WorkingSet, state_get
from langgraph_toolbudget.execution.offload import holds_shortened_output

__all__ = [
    "VISIBLE_SET_EVENT",
    "BudgetNode",
    "emit_changes",
    "emit_event",
    "route_after_tools",
    "route_tools",
]

VISIBLE_SET_EVENT = "toolbudget.visible_tools"


class BudgetNode(RunnableCallable):
    """Base of the package's nodes: subclasses implement ``run`` and may override ``arun``.

    The node is a LangGraph runnable, so ``graph.add_node("name", node)`` works and
    the node also runs on its own with ``node.invoke(state)`` / ``await node.ainvoke(state)``.
    """

    def __init__(self, name: str) -> None:
        check_node_options(type(self).__name__, name=name)
        super().__init__(self._sync, self._async, name=name, trace=False)
        self.node_name: str = name

    def _sync(self, state: Any, config: RunnableConfig) -> Any:
        return self.run(state, config)

    async def _async(self, state: Any, config: RunnableConfig) -> Any:
        return await self.arun(state, config)

    def run(self, state: Any, config: RunnableConfig) -> Any:
        raise NotImplementedError

    async def arun(self, state: Any, config: RunnableConfig) -> Any:
        return self.run(state, config)


async def _atools_condition(state: Any) -> str:
    return tools_condition(state)


route_tools = RunnableCallable(
    tools_condition, _atools_condition, name="tools_condition", trace=False
)
"""LangGraph's ``tools_condition`` (to ``"tools"`` when the last AI message has tool calls, else
``END``) with an async form: under ``ainvoke`` a sync-only edge runs in a worker thread, a
thread hop after every model call for a one-line check."""


def route_after_tools(catalog: ToolCatalog, *, back: str = "agent") -> RunnableCallable:
    """The edge after the tools node: ``END`` when every call of the last model reply named a
    ``return_direct`` tool of ``catalog`` and each answer succeeded and is whole (the tool's
    answer is the turn's answer, as under ``create_agent``), else ``back`` to the model. A
    failed call goes back, so the model can read its error and try again; so does an answer
    offloaded for its size, which the model reads with its output tools, or cut because the
    store could not keep it."""

    def route(state: Any) -> str:
        messages = state_get(state, "messages", None) or []
        answers: list[ToolMessage] = []
        for message in reversed(messages):
            if isinstance(message, ToolMessage):
                answers.append(message)
                continue
            if not isinstance(message, AIMessage) or not message.tool_calls:
                return back
            calls = message.tool_calls
            answered = {a.tool_call_id for a in answers}
            direct = all(
                (tool := catalog.tools([c["name"]])) and tool[0].return_direct for c in calls
            )
            whole = not holds_shortened_output(answers)
            whole = whole and all(a.status != "error" for a in answers)
            if direct and whole and all(c.get("id") in answered for c in calls):
                return END
            return back
        return back

    async def aroute(state: Any) -> str:
        return route(state)

    return RunnableCallable(route, aroute, name="route_after_tools", trace=False)


def emit_event(payload: dict[str, Any]) -> None:
    """Send a custom stream event (``stream_mode="custom"``) when inside a graph run.

    Outside a run (a node called directly) there is no stream to write to and
    the event is dropped.
    """
    try:
        writer = get_stream_writer()
    except RuntimeError:  # not inside a runnable context: nobody is streaming
        return
    writer({"event": VISIBLE_SET_EVENT, **payload})


def emit_changes(working: WorkingSet, node: str) -> None:
    """Emit one event per visible-set change recorded in ``working``, then forget them.

    Payload: ``{"event", "node", "added", "removed", "reason", "reasons"}``, plus
    ``"args"`` for a change made by a meta-call (its arguments). ``reasons``: added
    tool -> why it is visible (see :mod:`langgraph_toolbudget.core.reasons`).
    """
    for change in working.changes:
        payload: dict[str, Any] = {
            "node": node,
            "added": list(change.added),
            "removed": list(change.removed),
            "reason": change.reason or node,
            "reasons": dict(change.details or {}),
        }
        if change.args is not None:
            payload["args"] = change.args
        emit_event(payload)
    working.changes.clear()


def node_catalogs(node: Any) -> list[ToolCatalog]:
    """The catalogs of the package's objects a graph's node runs: a node of a builder or of
    a compiled graph that is one (``SelectTools``, ``ToolAgent``..., or a subclass), or runs
    a bound method of one (``ToolBudgetMiddleware``'s hooks under ``create_agent``)."""
    found: list[ToolCatalog] = []
    for runnable in (getattr(node, "runnable", None), getattr(node, "bound", None)):
        for owner in _owners(runnable):
            catalog = getattr(owner, "catalog", None)
            if (
                isinstance(catalog, ToolCatalog)
                and _of_the_package(owner)
                and all(catalog is not c for c in found)
            ):
                found.append(catalog)
    return found


def _of_the_package(owner: Any) -> bool:
    """Is ``owner`` one of the package's objects (or of a subclass of one)? A node of your
    own that merely holds a catalog neither reads nor writes the budget's fields."""
    return any(c.__module__.startswith("langgraph_toolbudget.") for c in type(owner).__mro__)


def _owners(runnable: Any) -> list[Any]:
    """A node's runnable and the objects whose bound methods it runs (a middleware's hook)."""
    if runnable is None:
        return []
    hooks = (getattr(runnable, "func", None), getattr(runnable, "afunc", None))
    return [runnable, *(getattr(fn, "__self__", None) for fn in hooks if fn is not None)]
