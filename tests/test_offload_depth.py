"""Tool outputs nested too deep for a checkpointer: cut, never a crash of the graph.

LangGraph's checkpointers serialise the state with ``ormsgpack``, which refuses a value
nested 255 levels deep (``TypeError: Type is not msgpack serializable: ToolMessage``), and
Python's JSON encoder recurses (past about 900 levels it raises ``RecursionError``). Every
graph here is real and compiled with a real checkpointer (in memory, SQLite); the tools are
real ``@tool`` functions; only the chat model of the middleware test is scripted.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.store.memory import InMemoryStore

from langgraph_toolbudget import ToolBudgetMiddleware, ToolBudgetState, ToolCatalog, ToolExecutor
from langgraph_toolbudget.core.limits import cut_deep, too_deep
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
MARK = '"[nested deeper than 100 levels: cut]"'
DROPPED = {"artifact_dropped": "nested deeper than 100 levels"}
PAD = "p" * 30_000  # over the 20,000 characters at which offloading starts


def _nested(depth: int) -> dict[str, Any]:
    """``depth`` dicts, one in another: ``{"x": {"x": ... {"leaf": 1}}}``."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"x": value}
    return value


def _kept(dicts: int) -> str:
    """The JSON of the first ``dicts`` dicts of a :func:`_nested` chain, then the cut."""
    return '{"x": ' * dicts + MARK + "}" * dicts


def _deep_tools(depth: int) -> list[BaseTool]:
    @tool(response_format="content_and_artifact")
    def report() -> tuple[str, dict[str, Any]]:
        """A short report with a deep artifact."""
        return "short", _nested(depth)

    @tool(response_format="content_and_artifact")
    def long_report() -> tuple[str, dict[str, Any]]:
        """A long report with a deep artifact."""
        return PAD, _nested(depth)

    @tool
    def tree() -> list[dict[str, Any]]:
        """A small tree as a JSON content block."""
        return [{"type": "json", "json": _nested(depth)}]

    @tool
    def forest() -> list[dict[str, Any]]:
        """A large tree as a JSON content block."""
        return [{"type": "json", "json": {"pad": PAD, "tree": _nested(depth)}}]

    @tool
    def traced(tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        """A message of the tool's own, with deep metadata."""
        trace = {"trace": _nested(depth)}
        return ToolMessage(
            "traced", tool_call_id=tool_call_id, additional_kwargs=trace, response_metadata=trace
        )

    return [report, long_report, tree, forest, traced]


def _calls(turn: str) -> dict[str, Any]:
    names = ["report", "long_report", "tree", "forest", "traced"]
    calls = [{"name": n, "args": {}, "id": f"{turn}{n}"} for n in names]
    return {"messages": [HumanMessage("go"), AIMessage("", tool_calls=calls)]}


@asynccontextmanager
async def _saver(kind: str, api: str, tmp_path: Path) -> AsyncIterator[BaseCheckpointSaver]:
    """A real checkpointer: in memory, or SQLite (its async class under ``ainvoke``)."""
    if kind == "memory":
        yield InMemorySaver()
    elif api == "invoke":
        conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver:
            yield saver


async def _run(app: Any, payload: Any, api: str, config: Any) -> dict[str, Any]:
    return app.invoke(payload, config) if api == "invoke" else await app.ainvoke(payload, config)


def _check_cut(messages: list[Any], turn: str, *, offloaded: bool) -> None:
    """The five tool messages of ``turn``: each cut at 100 levels or its artifact dropped."""
    by_id = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    report, long_report, tree, forest, traced = (
        by_id[f"{turn}{n}"] for n in ("report", "long_report", "tree", "forest", "traced")
    )
    assert {m.status for m in (report, long_report, tree, forest, traced)} == {"success"}
    assert report.content == "short" and report.artifact == DROPPED
    # content list (level 0), block (1): the tree's dicts at levels 2-99 are kept
    assert json.dumps(tree.content) == '[{"type": "json", "json": ' + _kept(98) + "}]"
    assert not too_deep(tree.content, 100)
    # the message's own dicts (level 0): the trace's at levels 1-99 are kept
    for metadata in (traced.additional_kwargs, traced.response_metadata):
        assert json.dumps(metadata) == '{"trace": ' + _kept(99) + "}"
    if offloaded:
        assert forest.artifact["offloaded"]["kind"] == "json"
        assert "Large output offloaded" in forest.content
        assert long_report.artifact["offloaded"]["artifact_dropped"] == DROPPED["artifact_dropped"]
        assert "artifact" not in long_report.artifact
        note = "(Its artifact was dropped: it is nested deeper than 100 levels.)"
        assert note in long_report.content
    else:
        assert json.dumps(forest.content).endswith(_kept(97) + "}}]")
        assert long_report.content == PAD and long_report.artifact == DROPPED


@pytest.mark.parametrize("depth", [300, 600, 5000])
@pytest.mark.parametrize("saver", ["memory", "sqlite"])
@pytest.mark.parametrize("offload", [True, False], ids=["offload", "no-offload"])
@pytest.mark.parametrize("api", APIS)
async def test_outputs_nested_too_deep_are_cut_and_the_checkpointed_graph_keeps_working(
    depth: int, saver: str, offload: bool, api: str, tmp_path: Path
) -> None:
    """Content blocks, an artifact (next to small content) or a message's own metadata nested
    300-5,000 levels deep made the checkpointer raise ``TypeError`` out of the graph (and
    past about 900 levels ``RecursionError``). Now content and metadata are cut at 100 levels,
    each cut marked, the artifact dropped with the reason, offloading on or off; the state is
    saved, read back equal, and the thread takes the next turn."""
    tools = _deep_tools(depth)
    catalog = ToolCatalog.from_tools(
        tools, tool_metadata={t.name: {"include": "always"} for t in tools}
    )
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog, offload_over_chars=20_000 if offload else None))
    graph.add_edge(START, "tools")
    config: Any = {"configurable": {"thread_id": f"deep-{depth}"}}
    async with _saver(saver, api, tmp_path) as checkpointer:
        app = graph.compile(checkpointer=checkpointer, store=InMemoryStore())
        out = await _run(app, _calls("a"), api, config)
        _check_cut(out["messages"], "a", offloaded=offload)
        saved = await app.aget_state(config) if api == "ainvoke" else app.get_state(config)
        assert saved.values["messages"] == out["messages"]
        again = await _run(app, _calls("b"), api, config)
        _check_cut(again["messages"], "b", offloaded=offload)
        assert len(again["messages"]) == len(out["messages"]) + 7
        if offload:  # the stored output is the content's JSON, cut
            forest = next(m for m in out["messages"] if getattr(m, "tool_call_id", "") == "aforest")
            facts = forest.artifact["offloaded"]
            args = {"handle": facts["handle"], "start": facts["chars"] - 2_000, "length": 2_000}
            read = {"name": "read_large_output", "args": args, "id": "r"}
            state = {"messages": [HumanMessage("read"), AIMessage("", tool_calls=[read])]}
            tail = (await _run(app, state, api, config))["messages"][-1].content
            assert _kept(97) + "}}]" in tail


@pytest.mark.parametrize("api", APIS)
async def test_a_toolnode_swap_and_the_middleware_cut_deep_outputs_too(
    api: str, tmp_path: Path
) -> None:
    """``ToolExecutor.from_tools`` (the ``ToolNode`` swap, offloading off) and
    ``ToolBudgetMiddleware`` under ``create_agent`` (whose own tool node runs the calls)
    cut a deep tool output in the normalise stage too: the checkpointed graph keeps working."""
    tools = _deep_tools(600)
    catalog = ToolCatalog.from_tools(
        tools, tool_metadata={t.name: {"include": "always"} for t in tools}
    )
    node_graph = StateGraph(ToolBudgetState)
    node_graph.add_node("tools", ToolExecutor.from_tools(tools))
    node_graph.add_edge(START, "tools")
    config: Any = {"configurable": {"thread_id": "swap"}}
    async with _saver("sqlite", api, tmp_path) as checkpointer:
        out = await _run(node_graph.compile(checkpointer=checkpointer), _calls("a"), api, config)
    _check_cut(out["messages"], "a", offloaded=False)

    model = ScriptedChatModel(
        responses=[_calls("m")["messages"][-1], AIMessage("done")], cycle=False
    )
    agent = create_agent(
        model, middleware=[ToolBudgetMiddleware(catalog)], checkpointer=InMemorySaver()
    )
    out = await _run(agent, {"messages": [HumanMessage("go")]}, api, config)
    _check_cut(out["messages"], "m", offloaded=False)
    assert out["messages"][-1].content == "done"


@pytest.mark.timeout(60)  # it never ended: the walk doubled at each of 100 levels
@pytest.mark.parametrize("api", APIS)
async def test_outputs_that_share_or_contain_their_own_parts_are_answered_at_once(
    api: str, tmp_path: Path
) -> None:
    """A Python value may hold one list or dict twice, or itself: an object graph as an
    artifact, a content block that refers to itself. The depth check walked every path, so
    a node listed twice in itself hung the call (2 paths per level, 100 levels); a value
    containing itself is now too deep (the artifact dropped, the content cut, a part met
    again marked), and the checkpointed graph keeps working."""

    @tool(response_format="content_and_artifact")
    def graph_of_nodes() -> tuple[str, dict[str, Any]]:
        """A small object graph: a node listed twice in its own edges."""
        node: dict[str, Any] = {"id": 1, "edges": []}
        node["edges"] += [node, node]
        return "ok", node

    @tool
    def own_block() -> list[dict[str, Any]]:
        """A content block that refers to itself."""
        block: dict[str, Any] = {"type": "json", "json": {"n": 1}}
        block["json"]["back"] = block
        return [block]

    tools = [graph_of_nodes, own_block]
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(ToolCatalog.from_tools(tools)))
    graph.add_edge(START, "tools")
    calls = [{"name": t.name, "args": {}, "id": t.name} for t in tools]
    state = {
        "messages": [HumanMessage("go"), AIMessage("", tool_calls=calls)],
        "selected_tools": [t.name for t in tools],
    }
    config: Any = {"configurable": {"thread_id": "shared"}}
    async with _saver("sqlite", api, tmp_path) as checkpointer:
        app = graph.compile(checkpointer=checkpointer, store=InMemoryStore())
        out = await asyncio.wait_for(_run(app, state, api, config), 30)
    by_id = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert by_id["graph_of_nodes"].artifact == DROPPED  # it contains itself: too deep
    block = by_id["own_block"].content[0]  # cut where the block comes round again
    assert block["json"]["n"] == 1 and not too_deep(block, 100)
    assert '"[shown earlier in this value: cut]"' in json.dumps(block)


@pytest.mark.timeout(60)
def test_the_depth_check_and_the_cut_walk_a_shared_part_once_a_level() -> None:
    """Each level holds the next one twice: 2**150 paths, 151 objects. Walking every path
    never ended; each object is walked once a level, and the cut keeps the first path."""
    level: dict[str, Any] = {"leaf": 1}
    for _ in range(150):
        level = {"a": level, "b": level}
    assert too_deep(level, 100)
    assert not too_deep(level["a"]["a"]["a"]["a"]["a"]["a"], 145)
    cut = cut_deep(level)
    assert cut["b"] == "[shown earlier in this value: cut]"
    assert json.dumps(cut).count('"a"') == 100  # one path, cut at 100 levels
