"""ToolBudgetMiddleware on a turn resumed after the app was rebuilt with another catalog.

A ``HumanInTheLoopMiddleware`` review pauses a reply that calls a tool the model loaded;
the app is rebuilt with a catalog that no longer lists it, on the same SQLite checkpoint,
and the review is answered. The call is refused (tested elsewhere); here, the state: the
gone tool must leave ``selected_tools`` and ``tool_reasons`` in the resumed run, as the
nodes drop it in the same step, whether the run goes on through the tool node and the
model, ends right after the tool node (a ``return_direct`` tool), or skips the tool node
(every call rejected). Only the chat model is fake (``ScriptedChatModel``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from langgraph_toolbudget import ToolBudgetMiddleware, ToolCatalog
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
GONE = "search_notes"


@tool
def search_notes(query: str) -> str:
    """Search the user's notes for a text."""
    return f"1 note about {query}"


@tool
def find_notes(query: str) -> str:
    """Find the user's notes that mention a text (replaces search_notes)."""
    return f"1 note about {query}"


@tool
def delete_note(index: int) -> str:
    """Delete one of the user's notes by its index."""
    return f"note {index} deleted"


@tool(return_direct=True)
def close_notebook(reason: str) -> str:
    """Close the notebook and end the conversation."""
    return f"closed: {reason}"


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _catalog(*notes: BaseTool) -> ToolCatalog:
    """Notes tools (``notes``) beside a math tool, so the first selection picks math."""
    return ToolCatalog.from_tools(
        [*notes, multiply],
        categories={"notes": [t.name for t in notes], "math": ["multiply"]},
    )


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


def _app(model: Any, catalog: ToolCatalog, gated: list[str], saver: Any) -> Any:
    review = HumanInTheLoopMiddleware(interrupt_on={name: True for name in gated})
    budget = ToolBudgetMiddleware(catalog, max_tools=2)
    return create_agent(model, middleware=[review, budget], checkpointer=saver)


async def _run(app: Any, payload: Any, config: Any, api: str) -> dict[str, Any]:
    return app.invoke(payload, config) if api == "invoke" else await app.ainvoke(payload, config)


async def _snapshot(app: Any, config: Any, api: str) -> Any:
    return app.get_state(config) if api == "invoke" else await app.aget_state(config)


async def _state(app: Any, config: Any, api: str) -> dict[str, Any]:
    return (await _snapshot(app, config, api)).values


@asynccontextmanager
async def _saver(path: Path, api: str) -> AsyncIterator[Any]:
    """A SQLite checkpointer on ``path``: a fresh connection each time (an app restarted)."""
    if api == "invoke":
        with SqliteSaver.from_conn_string(str(path)) as saver:
            yield saver
    else:
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            yield saver


def _assert_clean(values: dict[str, Any], catalog: ToolCatalog) -> None:
    listed = set(catalog.tool_names)
    assert GONE not in values["selected_tools"]
    assert GONE not in values["tool_reasons"]
    assert set(values["tool_reasons"]) == set(values["selected_tools"])
    assert set(values["selected_tools"]) <= listed


async def _paused_on_old_catalog(
    path: Path, config: Any, api: str, reply: AIMessage, gated: list[str]
) -> None:
    """Turn 1 on the first catalog: the model loads the notes tools, then makes ``reply``;
    the review pauses it. The gone tool is visible, by ``add_tool``, in the checkpoint."""
    load = _call("add_tool", {"tool_names": [GONE, "delete_note", "close_notebook"]}, "load")
    model = ScriptedChatModel(
        responses=[AIMessage("", tool_calls=[load]), reply, "unused"], cycle=False
    )
    async with _saver(path, api) as saver:
        app = _app(model, _catalog(search_notes, delete_note, close_notebook), gated, saver)
        await _run(app, {"messages": [HumanMessage("multiply 3 by 4")]}, config, api)
        paused = await _snapshot(app, config, api)
    assert paused.next, "the review did not pause the reply"
    assert paused.values["tool_reasons"][GONE] == {"why": "add_tool"}


@pytest.mark.parametrize("api", APIS)
async def test_middleware_resumed_turn_drops_a_tool_the_new_catalog_lacks(
    api: str, tmp_path: Path
) -> None:
    """Approved after the rebuild: the tool node refuses the gone tool's call and the model
    answers; neither the run's output nor the checkpoint names the gone tool (was: both kept
    it, ``{'why': 'add_tool'}``, until the next user turn)."""
    path, config = tmp_path / "t.sqlite", {"configurable": {"thread_id": "t"}}
    reply = AIMessage(
        "",
        tool_calls=[_call(GONE, {"query": "milk"}, "s"), _call("delete_note", {"index": 1}, "d")],
    )
    await _paused_on_old_catalog(path, config, api, reply, ["delete_note"])
    catalog = _catalog(find_notes, delete_note, close_notebook)
    model = ScriptedChatModel(responses=["done"], cycle=False)
    async with _saver(path, api) as saver:
        app = _app(model, catalog, ["delete_note"], saver)
        out = await _run(app, Command(resume={"decisions": [{"type": "approve"}]}), config, api)
        stored = await _state(app, config, api)
    answers = {m.tool_call_id: m for m in out["messages"] if m.type == "tool"}
    assert answers["s"].status == "error" and "not a tool of this app" in answers["s"].content
    assert answers["d"].content == "note 1 deleted"
    assert out["messages"][-1].content == "done"
    _assert_clean(out, catalog)
    _assert_clean(stored, catalog)


@pytest.mark.parametrize("api", APIS)
async def test_middleware_resumed_turn_ending_at_the_tool_node_drops_the_gone_tool(
    api: str, tmp_path: Path
) -> None:
    """The reply's other call is a ``return_direct`` tool: the resumed run ends after the
    tool node, with no model call, and its state is already clean."""
    path, config = tmp_path / "t.sqlite", {"configurable": {"thread_id": "t"}}
    reply = AIMessage(
        "",
        tool_calls=[
            _call(GONE, {"query": "milk"}, "s"),
            _call("close_notebook", {"reason": "x"}, "c"),
        ],
    )
    await _paused_on_old_catalog(path, config, api, reply, ["close_notebook"])
    catalog = _catalog(find_notes, delete_note, close_notebook)
    model = ScriptedChatModel(responses=[], cycle=False)  # the resumed run calls no model
    async with _saver(path, api) as saver:
        app = _app(model, catalog, ["close_notebook"], saver)
        out = await _run(app, Command(resume={"decisions": [{"type": "approve"}]}), config, api)
        stored = await _state(app, config, api)
    assert model.calls == []
    assert out["messages"][-1].content == "closed: x"
    _assert_clean(out, catalog)
    _assert_clean(stored, catalog)


@pytest.mark.parametrize("api", APIS)
async def test_middleware_resumed_turn_with_every_call_rejected_drops_the_gone_tool(
    api: str, tmp_path: Path
) -> None:
    """Every call rejected: the tool node does not run, the model answers the rejections
    without calling a tool, and the state is clean at the end of the run."""
    path, config = tmp_path / "t.sqlite", {"configurable": {"thread_id": "t"}}
    reply = AIMessage(
        "",
        tool_calls=[_call(GONE, {"query": "milk"}, "s"), _call("delete_note", {"index": 1}, "d")],
    )
    gated = [GONE, "delete_note"]
    await _paused_on_old_catalog(path, config, api, reply, gated)
    catalog = _catalog(find_notes, delete_note, close_notebook)
    model = ScriptedChatModel(responses=["nothing was run"], cycle=False)
    async with _saver(path, api) as saver:
        app = _app(model, catalog, gated, saver)
        rejected = {"decisions": [{"type": "reject"}, {"type": "reject"}]}
        out = await _run(app, Command(resume=rejected), config, api)
        stored = await _state(app, config, api)
    assert out["messages"][-1].content == "nothing was run"
    _assert_clean(out, catalog)
    _assert_clean(stored, catalog)
