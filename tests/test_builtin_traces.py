"""Built-in calls (the meta-tools, CodeMode's ``python_execution``) get a tool run each, as
``ToolNode`` gives every call to a bound tool: callbacks, ``astream_events(version="v2")`` and
``stream_mode="tools"`` see them start and end, under ``create_toolbudget_agent`` and
``ToolBudgetMiddleware``, sync and async."""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph

from langgraph_toolbudget import (
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    create_toolbudget_agent,
)
from langgraph_toolbudget.execution.batch import BUILTIN_FAILED_ERROR
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
SHAPES = ["prebuilt", "middleware"]
NODE = {"prebuilt": "tools", "middleware": "ToolBudgetMiddleware.after_model"}
CALLS = [
    {"name": "search_tools", "args": {"query": "time"}, "id": "s1"},
    {"name": "add_tool", "args": {"tool_names": ["get_time"]}, "id": "a1"},
    {"name": "show_all_tools", "args": {}, "id": "x1"},
    {"name": "request_more_tools", "args": {"query": "weather"}, "id": "r1"},
]


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"sunny in {city}"


@tool
async def get_time(city: str) -> str:
    """Get the local time in a city."""
    await asyncio.sleep(0)
    return f"noon in {city}"


class Runs(BaseCallbackHandler):
    """Every chain and tool run: its name, parent, tags, metadata, inputs and how it ended."""

    def __init__(self) -> None:
        self.starts: dict[UUID, dict[str, Any]] = {}
        self.ends: dict[UUID, list[tuple[str, Any]]] = {}
        self.order: list[UUID] = []
        self.lock = threading.Lock()

    def _start(self, run_id: UUID, parent: UUID | None, name: str, **seen: Any) -> None:
        with self.lock:
            self.starts[run_id] = {"name": name, "parent": parent, **seen}
            self.order.append(run_id)

    def _end(self, run_id: UUID, kind: str, value: Any) -> None:
        with self.lock:
            self.ends.setdefault(run_id, []).append((kind, value))

    def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:
        name = kw.get("name") or (serialized or {}).get("name")
        self._start(kw["run_id"], kw.get("parent_run_id"), name, kind="chain")

    def on_tool_start(self, serialized: Any, input_str: str, **kw: Any) -> None:
        name = kw.get("name") or (serialized or {}).get("name")
        self._start(
            kw["run_id"],
            kw.get("parent_run_id"),
            name,
            kind="tool",
            inputs=kw.get("inputs"),
            input_str=input_str,
            tool_call_id=kw.get("tool_call_id"),
            tags=kw.get("tags") or [],
            metadata=kw.get("metadata") or {},
        )

    def on_tool_end(self, output: Any, **kw: Any) -> None:
        self._end(kw["run_id"], "end", output)

    def on_tool_error(self, error: BaseException, **kw: Any) -> None:
        self._end(kw["run_id"], "error", error)

    def tools(self) -> list[tuple[UUID, dict[str, Any]]]:
        return [(r, self.starts[r]) for r in self.order if self.starts[r]["kind"] == "tool"]

    def parent_name(self, run_id: UUID) -> str | None:
        parent = self.starts[run_id]["parent"]
        return None if parent is None else self.starts[parent]["name"]


def build(shape: str, responses: list[AIMessage], **options: Any) -> Any:
    """A fresh agent of ``shape`` on a fresh script (a compiled graph)."""
    return build_with_runner(shape, responses, **options)[0]


def build_with_runner(shape: str, responses: list[AIMessage], **options: Any) -> tuple[Any, Any]:
    """A fresh agent of ``shape`` and the runner that answers its built-in calls."""
    catalog = ToolCatalog.from_tools([get_weather, get_time])
    model = ScriptedChatModel(responses=responses)
    if shape == "prebuilt":
        graph = create_toolbudget_agent(model, catalog, **options).compile()
        return graph, graph.nodes["tools"].bound.runner
    budget = ToolBudgetMiddleware(catalog, **options)
    return create_agent(model, middleware=[budget]), budget.runner


def meta_script() -> list[AIMessage]:
    return [AIMessage("", tool_calls=CALLS), AIMessage("done")]


async def run(
    graph: Any, api: str, config: dict[str, Any], inputs: dict[str, Any] | None = None
) -> dict[str, Any]:
    inputs = inputs or {"messages": [("user", "what time is it in Rome")]}
    if api == "invoke":
        return graph.invoke(inputs, config)
    return await graph.ainvoke(inputs, config)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("api", APIS)
async def test_builtin_calls_get_a_tool_run_each_under_the_node(shape: str, api: str) -> None:
    runs = Runs()
    config = {"callbacks": [runs], "tags": ["T"], "metadata": {"m": 1}}
    out = await run(build(shape, meta_script()), api, config)
    traced = runs.tools()
    assert [s["name"] for _, s in traced] == [c["name"] for c in CALLS]
    messages = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    for (run_id, start), call in zip(traced, CALLS, strict=True):
        assert start["inputs"] == call["args"]
        assert start["input_str"] == str(call["args"])
        assert start["tool_call_id"] == call["id"]
        assert runs.parent_name(run_id) == NODE[shape]
        assert "T" in start["tags"] and start["metadata"].get("m") == 1
        [(kind, output)] = runs.ends[run_id]
        assert kind == "end"
        assert isinstance(output, ToolMessage) and output.tool_call_id == call["id"]
        assert output.content == messages[call["id"]].content  # the answer the model gets


@pytest.mark.parametrize("shape", SHAPES)
async def test_builtin_calls_appear_in_astream_events(shape: str) -> None:
    graph = build(shape, meta_script())
    inputs = {"messages": [("user", "what time is it in Rome")]}
    events = [e async for e in graph.astream_events(inputs, version="v2")]
    starts = [e for e in events if e["event"] == "on_tool_start"]
    ends = [e for e in events if e["event"] == "on_tool_end"]
    assert [e["name"] for e in starts] == [c["name"] for c in CALLS]
    assert [e["data"]["input"] for e in starts] == [c["args"] for c in CALLS]
    assert [e["run_id"] for e in ends] == [e["run_id"] for e in starts]
    assert [e["data"]["output"].tool_call_id for e in ends] == [c["id"] for c in CALLS]
    node_runs = {e["run_id"] for e in events if e["name"] == NODE[shape]}
    assert all(e["parent_ids"][-1] in node_runs for e in starts)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("api", ["stream", "astream"])
async def test_builtin_calls_appear_in_the_tools_stream_mode(shape: str, api: str) -> None:
    graph = build(shape, meta_script())
    inputs = {"messages": [("user", "what time is it in Rome")]}
    if api == "stream":
        chunks = list(graph.stream(inputs, stream_mode="tools"))
    else:
        chunks = [c async for c in graph.astream(inputs, stream_mode="tools")]
    started = [
        (c["tool_call_id"], c["tool_name"], c["input"])
        for c in chunks
        if c["event"] == "tool-started"
    ]
    finished = [
        (c["tool_call_id"], c["output"].content) for c in chunks if c["event"] == "tool-finished"
    ]
    assert started == [(c["id"], c["name"], c["args"]) for c in CALLS]
    assert [i for i, _ in finished] == [c["id"] for c in CALLS]
    assert all(content for _, content in finished)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("api", APIS)
async def test_a_meta_call_over_the_turn_limit_still_gets_a_tool_run(shape: str, api: str) -> None:
    runs = Runs()
    out = await run(build(shape, meta_script(), max_meta_calls=2), api, {"callbacks": [runs]})
    refused = {
        m.tool_call_id
        for m in out["messages"]
        if isinstance(m, ToolMessage) and m.status == "error"
    }
    assert refused == {"x1", "r1"}
    traced = runs.tools()
    assert [s["tool_call_id"] for _, s in traced] == [c["id"] for c in CALLS]
    for run_id, start in traced:
        [(kind, output)] = runs.ends[run_id]
        assert kind == "end"
        assert output.status == ("error" if start["tool_call_id"] in refused else "success")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("api", APIS)
async def test_a_builtin_answer_that_raises_ends_its_run_with_an_error(
    shape: str, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, runner = build_with_runner(shape, meta_script())
    family = runner.builtins.family("add_tool")  # the meta-tools' real family
    handle = family.handle

    def broken(call: Any, ctx: Any) -> Any:
        if call["name"] == "add_tool":
            raise RuntimeError("family bug")
        return handle(call, ctx)

    monkeypatch.setattr(family, "handle", broken)  # ahandle runs handle in a thread
    runs = Runs()
    out = await run(graph, api, {"callbacks": [runs]})
    ends = {s["tool_call_id"]: runs.ends[r] for r, s in runs.tools()}
    [(kind, error)] = ends["a1"]
    assert kind == "error" and str(error) == "family bug"
    assert [k for c in ("s1", "x1", "r1") for k, _ in ends[c]] == ["end", "end", "end"]
    [answer] = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "a1"]
    assert answer.status == "error"
    assert answer.content == BUILTIN_FAILED_ERROR.format(
        tool="add_tool", error="RuntimeError: family bug"
    )


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("api", APIS)
async def test_a_codemode_program_and_its_builtin_calls_get_tool_runs(shape: str, api: str) -> None:
    program = 'found = search_tools(query="time")\nprint(get_weather(city="Paris"), found)\n'
    script = [
        AIMessage(
            "", tool_calls=[{"name": "python_execution", "args": {"code": program}, "id": "p1"}]
        ),
        AIMessage("done"),
    ]
    options = {
        "enabled_builtins": ["python_execution", "search_tools"],
        "tool_call_formats": {"enabled": ["native", "codemode"], "primary": "codemode"},
        "pinned": ["get_weather"],
    }
    runs = Runs()
    out = await run(build(shape, script, **options), api, {"callbacks": [runs]})
    [answer] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "success", answer.content
    traced = [(s["name"], s["tool_call_id"], runs.parent_name(r)) for r, s in runs.tools()]
    assert traced == [
        ("python_execution", "p1", NODE[shape]),
        ("search_tools", "p1.1", NODE[shape]),  # the program's calls, as its regular ones
        ("get_weather", "p1.2", NODE[shape]),
    ]
    program_run = runs.tools()[0][0]
    [(kind, output)] = runs.ends[program_run]
    assert kind == "end" and output.content == answer.content


@tool
async def slow_lookup(city: str) -> str:
    """Look a city up, slowly."""
    await asyncio.sleep(5)
    return f"found {city}"


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_cancelled_runs_builtin_call_ends_its_tool_run(shape: str) -> None:
    """Review 38a: a run cancelled while a ``python_execution`` program ran (a client gone,
    a server's cancel, a timeout around ``ainvoke``) left the program's tool run started and
    never ended (pending for ever in a trace); ``BaseTool.arun`` ends a cancelled tool's run
    with ``on_tool_error``, and so does a built-in call now."""
    program = 'print(slow_lookup(city="Rome"))\n'
    call = {"name": "python_execution", "args": {"code": program}, "id": "p1"}
    script = [AIMessage("", tool_calls=[call]), AIMessage("done")]
    options = {
        "enabled_builtins": ["python_execution"],
        "tool_call_formats": {"enabled": ["native", "codemode"], "primary": "codemode"},
        "pinned": ["slow_lookup"],
    }
    catalog = ToolCatalog.from_tools([slow_lookup])
    model = ScriptedChatModel(responses=script)
    if shape == "prebuilt":
        graph = create_toolbudget_agent(model, catalog, **options).compile()
    else:
        graph = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, **options)])
    runs = Runs()
    inputs = {"messages": [("user", "look Rome up")]}
    task = asyncio.ensure_future(graph.ainvoke(inputs, {"callbacks": [runs]}))
    for _ in range(200):  # until the program's own call has started
        if any(s["name"] == "slow_lookup" for _, s in runs.tools()):
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [program_run] = [r for r, s in runs.tools() if s["name"] == "python_execution"]
    [(kind, error)] = runs.ends[program_run]
    assert kind == "error" and isinstance(error, asyncio.CancelledError)


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("query", [_nested(5000), 2**20000], ids=["deep", "long-int"])
async def test_a_builtin_call_with_hostile_arguments_gets_a_described_tool_run(
    api: str, query: Any
) -> None:
    # The executor under the application's own model node: the reply's arguments reach it
    # as the model sent them (str() of them recurses, or raises on the long int).
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(ToolCatalog.from_tools([get_weather, get_time])))
    graph.add_edge(START, "tools")
    call = {"name": "search_tools", "args": {"query": query}, "id": "s1"}
    state = {"messages": [HumanMessage("go"), AIMessage("", tool_calls=[call])]}
    runs = Runs()
    out = await run(graph.compile(), api, {"callbacks": [runs]}, state)
    [(run_id, start)] = runs.tools()
    assert start["name"] == "search_tools" and start["tool_call_id"] == "s1"
    assert start["inputs"] is None and len(start["input_str"]) < 300  # described, bounded
    [(kind, output)] = runs.ends[run_id]
    [answer] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert kind == "end" and output.content == answer.content and answer.status == "error"
