"""``update_context``: a tool-context update lands on a thread, whether it ran or not.

``graph.update_state(config, exclude_tools(...))`` on a thread that never ran is written as
the graph's input, whose schema leaves the context fields out: the exclusion is lost and the
excluded tool runs. ``update_context`` / ``aupdate_context`` write it as the node after
``START`` there, on the package's agent, a graph of your own with ``add_toolbudget_nodes``,
and ``create_agent`` with ``ToolBudgetMiddleware``, under real checkpointers.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_tools import weather_and_secret_op
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_toolbudget import (
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    add_toolbudget_nodes,
    aupdate_context,
    create_toolbudget_agent,
    exclude_tools,
    include_tools,
    set_include_mode,
    update_context,
)
from langgraph_toolbudget.state import input_schema_of
from langgraph_toolbudget.testing import ScriptedChatModel
from langgraph_toolbudget.threads import SqliteThread, ThreadError

RAN: list[str] = []
CONFIG: Any = {"configurable": {"thread_id": "t"}}


def catalog() -> ToolCatalog:
    return weather_and_secret_op(RAN)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


class AppState(ToolBudgetState):
    greeted: bool


def _greet(state: AppState) -> dict[str, Any]:
    return {"greeted": True}


def build(agent: str, model: ScriptedChatModel, saver: BaseCheckpointSaver, **compile: Any) -> Any:
    """A compiled agent of each kind the helper serves, over the same catalog."""
    if agent == "nodes":
        return create_toolbudget_agent(model, catalog()).compile(checkpointer=saver, **compile)
    if agent == "middleware":
        middleware = [ToolBudgetMiddleware(catalog())]
        return create_agent(model, middleware=middleware, checkpointer=saver, **compile)
    graph = StateGraph(AppState, input_schema=input_schema_of(AppState))
    graph.add_node("greet", _greet)  # the user's own node comes first: the update is its
    add_toolbudget_nodes(graph, model, catalog(), after="greet")
    graph.add_edge(START, "greet")
    return graph.compile(checkpointer=saver, **compile)


def weather_script(ran: bool) -> ScriptedChatModel:
    call = {"name": "get_weather", "args": {"city": "Oslo"}, "id": "c1", "type": "tool_call"}
    script = [AIMessage("", tool_calls=[call]), AIMessage("ok")]
    return ScriptedChatModel(responses=[AIMessage("hello"), *script] if ran else script)


def assert_excluded(model: ScriptedChatModel, shown_from: int, out: dict[str, Any]) -> None:
    """get_weather was never shown to the model after the update, and its call did not run."""
    shown = model.bound_tools[shown_from:]
    assert shown and all("get_weather" not in names for names in shown)
    assert RAN == []
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "excluded" in str(answer.content)
    assert out["context_tools"] == {"get_weather": "exclude"}
    assert "get_weather" not in out["selected_tools"]


@contextlib.contextmanager
def sync_saver(kind: str, tmp_path: Path) -> Iterator[BaseCheckpointSaver]:
    if kind == "memory":
        yield InMemorySaver()
    else:
        with SqliteSaver.from_conn_string(str(tmp_path / "threads.sqlite")) as saver:
            yield saver


@contextlib.asynccontextmanager
async def async_saver(kind: str, tmp_path: Path) -> AsyncIterator[BaseCheckpointSaver]:
    if kind == "memory":
        yield InMemorySaver()
    else:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "threads.sqlite")) as saver:
            yield saver


AGENTS = ["nodes", "middleware", "own_graph"]
THREADS = pytest.mark.parametrize("ran", [False, True], ids=["never-ran", "ran"])


@THREADS
@pytest.mark.parametrize("saver_kind", ["memory", "sqlite"])
@pytest.mark.parametrize("agent", AGENTS)
def test_an_exclusion_hides_the_tool_and_stops_its_call_on_any_thread(
    agent: str, saver_kind: str, ran: bool, tmp_path: Path
) -> None:
    model = weather_script(ran)
    with sync_saver(saver_kind, tmp_path) as saver:
        app = build(agent, model, saver)
        if ran:
            app.invoke({"messages": [HumanMessage("hi")]}, CONFIG)
        update_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
        assert app.get_state(CONFIG).values["context_tools"] == {"get_weather": "exclude"}
        shown_from = len(model.bound_tools)
        out = app.invoke({"messages": [HumanMessage("weather in Oslo?")]}, CONFIG)
    assert_excluded(model, shown_from, out)


@THREADS
@pytest.mark.parametrize("saver_kind", ["memory", "aiosqlite"])
@pytest.mark.parametrize("agent", AGENTS)
async def test_an_exclusion_hides_the_tool_and_stops_its_call_on_any_thread_async(
    agent: str, saver_kind: str, ran: bool, tmp_path: Path
) -> None:
    model = weather_script(ran)
    async with async_saver(saver_kind, tmp_path) as saver:
        app = build(agent, model, saver)
        if ran:
            await app.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
        await aupdate_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
        assert (await app.aget_state(CONFIG)).values["context_tools"] == {"get_weather": "exclude"}
        shown_from = len(model.bound_tools)
        out = await app.ainvoke({"messages": [HumanMessage("weather in Oslo?")]}, CONFIG)
    assert_excluded(model, shown_from, out)


@pytest.mark.parametrize("agent", ["nodes", "middleware"])
def test_an_exclusion_on_a_thread_that_never_ran_in_postgres(agent: str, pg_url: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    model = weather_script(ran=False)
    with PostgresSaver.from_conn_string(pg_url) as saver:
        saver.setup()
        app = build(agent, model, saver)
        update_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
        out = app.invoke({"messages": [HumanMessage("weather in Oslo?")]}, CONFIG)
    assert_excluded(model, 0, out)


@pytest.mark.parametrize("agent", ["nodes", "middleware"])
async def test_an_exclusion_on_a_thread_that_never_ran_in_postgres_async(
    agent: str, pg_url: str
) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    model = weather_script(ran=False)
    async with AsyncPostgresSaver.from_conn_string(pg_url) as saver:
        await saver.setup()
        app = build(agent, model, saver)
        await aupdate_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
        out = await app.ainvoke({"messages": [HumanMessage("weather in Oslo?")]}, CONFIG)
    assert_excluded(model, 0, out)


@pytest.mark.parametrize("agent", AGENTS)
def test_every_update_before_the_first_run_lands_and_the_thread_waits_at_its_first_node(
    agent: str,
) -> None:
    call = {"name": "secret_op", "args": {"target": "db"}, "id": "c1", "type": "tool_call"}
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("ok")])
    app = build(agent, model, InMemorySaver())
    first = next(target for source, target in app.builder.edges if source == START)
    update_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
    update_context(app, CONFIG, include_tools(tools=["secret_op"]))  # a manual tool
    update_context(app, CONFIG, set_include_mode("manual", servers=["weather"]))
    state = app.get_state(CONFIG)
    assert state.next == (first,)  # where update_state leaves a thread that never ran
    assert state.values["context_tools"] == {"get_weather": "exclude", "secret_op": "include"}
    assert state.values["context_server_modes"] == {"weather": "manual"}
    out = app.invoke({"messages": [HumanMessage("run maintenance on db")]}, CONFIG)
    assert RAN == ["secret_op:db"]
    assert "secret_op" in model.bound_tools[0] and "get_weather" not in model.bound_tools[0]
    assert "secret_op" in out["selected_tools"]


def test_a_thread_paused_before_its_first_node_resumes_there_with_the_exclusion() -> None:
    model = weather_script(ran=False)
    app = build("nodes", model, InMemorySaver(), interrupt_before=["choose_tools"])
    app.invoke({"messages": [HumanMessage("weather in Oslo?")]}, CONFIG)
    assert app.get_state(CONFIG).next == ("choose_tools",)
    update_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
    assert app.get_state(CONFIG).next == ("choose_tools",)  # still to run, not skipped
    out = app.invoke(None, CONFIG)
    assert_excluded(model, 0, out)
    assert out["categories"], "choose_tools ran on resume"


@pytest.mark.parametrize("agent", ["nodes", "middleware"])
def test_a_thread_paused_before_a_tool_call_keeps_its_step_and_refuses_the_call(
    agent: str,
) -> None:
    model = weather_script(ran=False)
    app = build(agent, model, InMemorySaver(), interrupt_before=["tools"])
    app.invoke({"messages": [HumanMessage("weather in Oslo?")]}, CONFIG)
    assert app.get_state(CONFIG).next == ("tools",)
    update_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
    assert app.get_state(CONFIG).next == ("tools",)  # as update_state leaves it
    out = app.invoke(None, CONFIG)
    assert RAN == []
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "excluded" in str(answer.content)


BAD_UPDATES = [
    ({"messages": [("user", "hi")]}, ValueError, "tool-context fields only"),
    ({**exclude_tools(tools=["x"]), "selected_tools": ["x"]}, ValueError, "'selected_tools'"),
    ("exclude get_weather", TypeError, "must be a mapping"),
    ({"context_tools": ["get_weather"]}, TypeError, "exclude_tools(tools=[...])"),
    ({"context_tools": {"get_weather": "hide"}}, ValueError, "('include', 'exclude')"),
    ({"context_tool_modes": {"get_weather": "sometimes"}}, ValueError, "set_include_mode"),
    ({"context_tools": {}}, ValueError, "names no tool or server"),
]


@pytest.mark.parametrize(("update", "error", "words"), BAD_UPDATES)
def test_a_bad_update_is_refused_with_the_fix_and_writes_nothing(
    update: Any, error: type[Exception], words: str
) -> None:
    app = build("nodes", weather_script(ran=False), InMemorySaver())
    with pytest.raises(error) as raised:
        update_context(app, CONFIG, update)
    assert words in str(raised.value)
    assert app.get_state(CONFIG).created_at is None


def test_a_graph_without_checkpointer_or_a_config_without_thread_is_refused() -> None:
    graph = create_toolbudget_agent(weather_script(ran=False), catalog())
    with pytest.raises(ValueError, match=r"compiled with a checkpointer"):
        update_context(graph.compile(), CONFIG, exclude_tools(tools=["get_weather"]))
    with pytest.raises(ValueError, match=r"'thread_id'") as caught:
        update_context(graph.compile(checkpointer=InMemorySaver()), {}, exclude_tools(tools=["a"]))
    assert "pass {'configurable': {'thread_id': ...}}, as for graph.invoke" in str(caught.value)


def _two_way_graph(conditional: bool) -> Any:
    model = weather_script(ran=False)
    graph = StateGraph(AppState, input_schema=input_schema_of(AppState))
    graph.add_node("greet", _greet)
    first = add_toolbudget_nodes(graph, model, catalog(), prefix="tb_")
    graph.add_edge("greet", END)
    if conditional:
        graph.add_conditional_edges(START, lambda state: first, [first, "greet"])
    else:
        graph.add_edge(START, "greet")
    return graph.compile(checkpointer=InMemorySaver()), first


@pytest.mark.parametrize("conditional", [False, True], ids=["fan-out", "conditional"])
def test_a_start_of_several_nodes_asks_for_as_node_on_a_thread_that_never_ran(
    conditional: bool,
) -> None:
    app, first = _two_way_graph(conditional)
    with pytest.raises(ValueError, match=r"has never run") as raised:
        update_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
    message = str(raised.value)
    assert "pass as_node=" in message and first in message and "greet" in message
    assert app.get_state(CONFIG).created_at is None
    update_context(app, CONFIG, exclude_tools(tools=["get_weather"]), as_node="greet")
    state = app.get_state(CONFIG)
    assert state.values["context_tools"] == {"get_weather": "exclude"}
    assert set(state.next) == ({first} if conditional else {first, "greet"})


def test_a_sqlite_thread_that_never_ran_takes_every_update_of_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        saver.setup()
    graph = create_toolbudget_agent(weather_script(ran=False), catalog())
    with SqliteThread(db, "t", graph) as thread:
        thread.update(exclude_tools(tools=["get_weather"]))
        thread.update(include_tools(tools=["secret_op"]))
        assert thread.values()["context_tools"] == {
            "get_weather": "exclude",
            "secret_op": "include",
        }


# --- the agent compiled as a subgraph node of a parent graph -----------------------------
# A parent with MessagesState has no tool-context channel: LangGraph drops an update of those
# keys without a word (the excluded tool ran on the next turn). The context lives in the
# subgraph's state; update_context writes it there when the config names its namespace.

SUB: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": "assistant"}}


def in_parent(model: ScriptedChatModel, persistent: bool = True, **compile: Any) -> Any:
    """``create_toolbudget_agent`` compiled as the node ``assistant`` of a MessagesState graph."""
    checkpointer = True if persistent else None
    agent = create_toolbudget_agent(model, catalog()).compile(checkpointer=checkpointer, **compile)
    parent = StateGraph(MessagesState)
    parent.add_node("assistant", agent)
    parent.add_edge(START, "assistant")
    return parent.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("persistent", [True, False], ids=["checkpointer=True", "per-run"])
def test_a_parent_without_the_context_fields_refuses_the_update_and_names_the_subgraph(
    persistent: bool,
) -> None:
    app = in_parent(weather_script(ran=True), persistent)
    app.invoke({"messages": [HumanMessage("hi")]}, CONFIG)
    before = app.get_state(CONFIG).config
    with pytest.raises(ValueError) as raised:
        update_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
    message = str(raised.value)
    assert "has no context_tools channel" in message and "dropped" in message
    assert "update_context(graph, {'configurable': {'thread_id': 't', 'checkpoint_ns': " in message
    assert ("compile it with .compile(checkpointer=True)" in message) is not persistent
    assert app.get_state(CONFIG).config == before, "nothing written"


async def test_a_parent_without_the_context_fields_refuses_the_update_async() -> None:
    app = in_parent(weather_script(ran=True))
    await app.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
    with pytest.raises(ValueError, match=r"no context_tools channel.*'checkpoint_ns': 'assistant'"):
        await aupdate_context(app, CONFIG, exclude_tools(tools=["get_weather"]))


def test_a_graph_whose_state_lacks_the_fields_and_has_no_agent_subgraph_is_told_to_add_them() -> (
    None
):
    graph = StateGraph(MessagesState)
    graph.add_node("echo", lambda state: {})
    graph.add_edge(START, "echo")
    app = graph.compile(checkpointer=InMemorySaver())
    with pytest.raises(ValueError) as raised:
        update_context(app, CONFIG, exclude_tools(tools=["get_weather"], servers=["weather"]))
    message = str(raised.value)
    assert "no context_tools or context_servers channel" in message
    assert "StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)" in message
    assert app.get_state(CONFIG).created_at is None


@THREADS
def test_an_update_under_the_subgraph_namespace_hides_the_tool_on_the_next_turn(
    ran: bool,
) -> None:
    model = weather_script(ran)
    app = in_parent(model)
    if ran:
        app.invoke({"messages": [HumanMessage("hi")]}, CONFIG)
    update_context(app, SUB, exclude_tools(tools=["get_weather"]))
    assert app.get_state(SUB).values["context_tools"] == {"get_weather": "exclude"}
    shown_from = len(model.bound_tools)
    app.invoke({"messages": [HumanMessage("weather in Oslo?")]}, CONFIG)
    assert_excluded(model, shown_from, app.get_state(SUB).values)


@THREADS
async def test_an_update_under_the_subgraph_namespace_hides_the_tool_on_the_next_turn_async(
    ran: bool,
) -> None:
    model = weather_script(ran)
    app = in_parent(model)
    if ran:
        await app.ainvoke({"messages": [HumanMessage("hi")]}, CONFIG)
    await aupdate_context(app, SUB, exclude_tools(tools=["get_weather"]))
    shown_from = len(model.bound_tools)
    await app.ainvoke({"messages": [HumanMessage("weather in Oslo?")]}, CONFIG)
    assert_excluded(model, shown_from, (await app.aget_state(SUB)).values)


def test_a_run_paused_in_a_per_run_subgraph_takes_the_update_through_its_task_config() -> None:
    model = weather_script(ran=False)
    app = in_parent(model, persistent=False, interrupt_before=["tools"])
    app.invoke({"messages": [HumanMessage("weather in Oslo?")]}, CONFIG)
    (task,) = app.get_state(CONFIG, subgraphs=True).tasks
    update_context(app, task.state.config, exclude_tools(tools=["get_weather"]))
    out = app.invoke(None, CONFIG)
    assert RAN == []
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "excluded" in str(answer.content)


def test_a_namespace_of_no_subgraph_or_of_one_that_keeps_no_state_is_refused() -> None:
    app = in_parent(weather_script(ran=False), persistent=False)
    nowhere = {"configurable": {"thread_id": "t", "checkpoint_ns": "agent"}}
    with pytest.raises(ValueError, match=r"no subgraph 'agent' \(its subgraphs: \['assistant'\]"):
        update_context(app, nowhere, exclude_tools(tools=["get_weather"]))
    with pytest.raises(ValueError, match=r"'assistant' keeps no state between runs"):
        update_context(app, SUB, exclude_tools(tools=["get_weather"]))
    assert app.get_state(CONFIG).created_at is None


def test_a_sqlite_thread_of_a_parent_graph_reports_the_missing_fields_to_the_cli(
    tmp_path: Path,
) -> None:
    db = tmp_path / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        saver.setup()
    agent = create_toolbudget_agent(weather_script(ran=False), catalog()).compile(checkpointer=True)
    parent = StateGraph(MessagesState)
    parent.add_node("assistant", agent)
    parent.add_edge(START, "assistant")
    with SqliteThread(db, "t", parent) as thread:
        with pytest.raises(ThreadError) as raised:
            thread.update(exclude_tools(tools=["get_weather"]))
        assert thread.app.get_state(thread.config).created_at is None
    message = str(raised.value)
    assert "no context_tools channel" in message and "--graph" in message
    assert "as_node" not in message and "\n" not in message


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_misspelt_name_is_refused_with_the_closest_and_nothing_is_written(agent):
    """The README's way (no ``catalog=``): a typo in an exclusion would be written as given
    and change nothing, the tool running on; refused instead, naming the tool meant, under
    the three ways in, sync and async. ``allow_unknown=True`` writes a name not listed now."""
    model = weather_script(ran=False)
    app = build(agent, model, InMemorySaver())
    typo = r"has no tool 'get_wether'.*'get_wether' -> 'get_weather'.*allow_unknown=True"
    with pytest.raises(ValueError, match=typo):
        update_context(app, CONFIG, exclude_tools(tools=["get_wether"]))
    with pytest.raises(ValueError, match=r"has no server 'wether'.*allow_unknown=True"):
        await aupdate_context(app, CONFIG, exclude_tools(servers=["wether"]))
    with pytest.raises(ValueError, match=r"to set the mode of a tool"):
        update_context(app, CONFIG, set_include_mode("manual", tools=["get_wether"]))
    assert app.get_state(CONFIG).values == {}  # nothing written
    update_context(
        app, CONFIG, exclude_tools(tools=["get_weather", "mcp__later"]), allow_unknown=True
    )
    await aupdate_context(app, CONFIG, {"context_tools": {"mcp__later": None}})  # always allowed
    out = app.invoke({"messages": [HumanMessage("weather in Oslo?")]}, CONFIG)
    assert_excluded(model, 0, out)


def test_a_draft_tool_is_excluded_with_or_without_the_catalog_given() -> None:
    """A draft tool (it runs in the ``debug`` runtime mode) may be excluded for a thread:
    ``update_context`` took it, ``exclude_tools(..., catalog=catalog)`` refused it as "not
    tools of this catalog", suggesting another tool."""
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    @tool
    def new_search(query: str) -> str:
        """Search the web (a draft)."""
        return "found"

    catalog = ToolCatalog.from_tools(
        [get_weather, new_search],
        {"web": ["get_weather", "new_search"]},
        tool_metadata={"new_search": {"status": "draft"}},
    )
    app = create_toolbudget_agent(ScriptedChatModel(responses=[]), catalog)
    app = app.compile(checkpointer=InMemorySaver())
    update = exclude_tools(tools=["new_search"], catalog=catalog)
    assert update == {"context_tools": {"new_search": "exclude"}}
    update_context(app, CONFIG, update)
    assert app.get_state(CONFIG).values["context_tools"] == {"new_search": "exclude"}
    with pytest.raises(ValueError, match=r"'get_wether' -> 'get_weather'"):
        exclude_tools(tools=["get_wether"], catalog=catalog)
