"""Client-written budget fields: ``graph.update_state`` (client input on LangGraph server, a
fork) writes ``categories``, ``category_scores``, ``tool_last_used`` and ``tool_reasons`` too.

Their reducers refuse a value of the wrong shape with an error naming the field and the
shape (``StateFieldError``: a ``ValueError``, so the server answers 400), and what gets past
a reducer (an ``Overwrite``, a checkpoint written before the reducers checked) is read
defensively: a turn whose tool ran is never lost, and a step near the 64-bit edge is
renumbered instead of bricking the thread at the checkpoint write.

Real checkpointers (``InMemorySaver``, ``SqliteSaver``), real tools and stores; only the chat
model is scripted.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.types import Overwrite

from langgraph_toolbudget import (
    ToolAgent,
    ToolBudgetInput,
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.working_set import STEP_LIMIT, WorkingSet, state_names
from langgraph_toolbudget.mcp import MCPRuntime, MCPToolCatalog
from langgraph_toolbudget.nodes.usage import ToolUsage
from langgraph_toolbudget.state import (
    MAX_STEP,
    StateFieldError,
    clean_budget_fields,
    merge_counts,
    merge_names,
    merge_reasons,
    replace_categories,
    replace_scores,
)
from langgraph_toolbudget.testing import ScriptedChatModel

RAN: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    RAN.append("get_weather")
    return f"sunny in {city}"


@tool
def send_message(channel: str, text: str) -> str:
    """Send a chat message to a Slack channel."""
    RAN.append("send_message")
    return f"sent to {channel}"


@tool
def list_channels() -> str:
    """List the Slack channels."""
    RAN.append("list_channels")
    return "general, random"


TOOLS = [get_weather, send_message, list_channels]
CATEGORIES = {"weather": ["get_weather"], "slack": ["send_message", "list_channels"]}
DESCRIPTIONS = {"weather": "weather forecasts", "slack": "Slack chat messages"}


def catalog() -> ToolCatalog:
    return ToolCatalog.from_tools(TOOLS, categories=CATEGORIES, category_descriptions=DESCRIPTIONS)


def mcp_described_catalog() -> MCPToolCatalog:
    """The same tools, their categories described by a server's own instructions (untrusted
    text the prompt shows only for the categories in play)."""
    local = catalog()
    return MCPToolCatalog(
        local.specs,
        runtime=MCPRuntime({}),
        category_descriptions=DESCRIPTIONS,
        untrusted_descriptions=["weather", "slack"],
    )


@contextmanager
def memory_saver() -> Iterator[BaseCheckpointSaver]:
    yield InMemorySaver()


@contextmanager
def sqlite_saver(tmp: Path) -> Iterator[BaseCheckpointSaver]:
    with SqliteSaver.from_conn_string(str(tmp / "checkpoints.sqlite")) as saver:
        yield saver


SaverFactory = Callable[[Path], AbstractContextManager[BaseCheckpointSaver]]
SAVERS: dict[str, SaverFactory] = {
    "memory": lambda tmp: memory_saver(),
    "sqlite": sqlite_saver,
}


def weather_call(cid: str = "w1") -> AIMessage:
    call = {"name": "get_weather", "args": {"city": "Rome"}, "id": cid, "type": "tool_call"}
    return AIMessage("", tool_calls=[call])


def build(
    face: str, saver: BaseCheckpointSaver, model: ScriptedChatModel, **options: Any
) -> tuple[Any, str]:
    """The compiled agent of ``face`` and the node a client's edit is written as."""
    if face == "prebuilt":
        graph = create_toolbudget_agent(model, options.pop("catalog", catalog()), **options)
        return graph.compile(checkpointer=saver), "agent"
    middleware = ToolBudgetMiddleware(options.pop("catalog", catalog()), **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_agent(model, middleware=[middleware], checkpointer=saver), "model"


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


# --- the reducers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("update", "named"),
    [
        ({"get_weather": 2**64 - 1}, "18446744073709551615"),
        ({"get_weather": MAX_STEP + 1}, str(MAX_STEP + 1)),
        ({"get_weather": -1}, "-1"),
        ({"get_weather": True}, "True"),
        ({"get_weather": 1.5}, "1.5"),
        ({"get_weather": "3"}, "'3'"),
        ({5: 1}, "the key 5"),
        (5, "is 5"),
        (["get_weather"], "is ['get_weather']"),
    ],
)
def test_merge_counts_refuses_a_step_that_is_no_integer_from_0_to_2_53(update, named):
    with pytest.raises(StateFieldError) as caught:
        merge_counts({"send_message": 1}, update)
    message = str(caught.value)
    assert "'tool_last_used'" in message and named in message
    assert "integer step from 0 to 2**53" in message and "update_state" in message
    # LangGraph server answers a ValueError with 400 (a plain TypeError is a 500).
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)


def test_merge_counts_takes_steps_in_range_and_none():
    assert merge_counts({"a": 1, "b": 2}, {"b": MAX_STEP, "c": 0}) == {
        "a": 1,
        "b": MAX_STEP,
        "c": 0,
    }
    assert merge_counts({"a": 1}, None) == {"a": 1}
    assert merge_counts(None, {}) == {}


@pytest.mark.parametrize("update", [5, "weather", [["x"]], ["weather", 3], {"weather": 1.0}])
def test_replace_categories_refuses_what_is_no_list_of_names(update):
    with pytest.raises(StateFieldError, match="'categories' must be a list of category names"):
        replace_categories(["slack"], update)


def test_replace_categories_replaces_the_list():
    assert replace_categories(["slack"], ["weather"]) == ["weather"]
    assert replace_categories(["slack"], ("weather",)) == ["weather"]
    assert replace_categories(["slack"], None) == []


@pytest.mark.parametrize(
    "update", [5, ["weather"], {"weather": "high"}, {"weather": True}, {1: 1.0}, {"w": None}]
)
def test_replace_scores_refuses_what_is_no_mapping_of_name_to_number(update):
    with pytest.raises(StateFieldError, match="'category_scores' must be a mapping"):
        replace_scores({"slack": 1.0}, update)


def test_replace_scores_replaces_the_mapping():
    assert replace_scores({"slack": 1.0}, {"weather": 2, "x": 0.5}) == {"weather": 2, "x": 0.5}
    assert replace_scores({"slack": 1.0}, None) == {}


@pytest.mark.parametrize(
    "update", [5, {"get_weather": "budget"}, {"get_weather": {"why": ["x"]}}, {3: {"why": "x"}}]
)
def test_merge_reasons_refuses_what_is_no_reason(update):
    with pytest.raises(StateFieldError, match="'tool_reasons' must be a mapping"):
        merge_reasons({"send_message": {"why": "budget"}}, update)


def test_merge_reasons_merges_like_the_context_fields():
    left = {"a": {"why": "budget"}, "b": {"why": "search"}}
    assert merge_reasons(left, {"a": None, "c": {"why": "pinned"}}) == {
        "b": {"why": "search"},
        "c": {"why": "pinned"},
    }


# --- reading what got past a reducer ------------------------------------------------------------


def test_state_names_keeps_only_the_strings_of_a_list():
    assert state_names({"categories": ["slack", ["x"], 5, "weather"]}, "categories") == [
        "slack",
        "weather",
    ]
    for value in (5, "weather", {"weather": 1}, None, 1.5):
        assert state_names({"categories": value}, "categories") == []


def test_working_set_renumbers_steps_out_of_range_in_their_order_and_stores_them():
    state = {
        "selected_tools": ["a", "b", "c"],
        "tool_last_used": {"a": 2**64 - 1, "b": 7, "c": 7, "d": -3, 5: 1, "e": True},
    }
    working = WorkingSet.from_state(state, cap=3)
    assert working.last_used == {"d": 1, "b": 2, "c": 2, "a": 3}
    assert working.step == 3
    working.touch("b")
    assert working.last_used["b"] == 4
    # Every renumbered step is written back, so the state holds none out of range.
    stored = merge_counts(state["tool_last_used"], working.update()["tool_last_used"])
    assert {k: stored[k] for k in "abc"} == {"a": 3, "b": 4, "c": 2}
    assert "d" not in stored  # not visible, its step out of range: removed, not rewritten
    # The order is kept: "c" (oldest visible) is evicted before "a".
    working.add(["x"])
    assert working.names == ["a", "b", "x"]


def test_working_set_keeps_steps_in_range_as_they_are():
    working = WorkingSet.from_state({"selected_tools": ["a"], "tool_last_used": {"a": STEP_LIMIT}})
    assert working.last_used == {"a": STEP_LIMIT} and working.update() == {}


def test_working_set_reads_a_malformed_state_as_empty_and_drops_malformed_reasons():
    state = {
        "selected_tools": 5,
        "discovered_tools": "abc",
        "tool_last_used": [("a", 1)],
        "tool_reasons": {"a": ["x"], "b": {"why": ["y"]}, "c": {"why": "pinned"}},
    }
    working = WorkingSet.from_state(state)
    assert working.names == [] and working.discovered == [] and working.last_used == {}
    assert working.reasons == {"c": {"why": "pinned"}}
    # The malformed reasons leave the state with the next update ("c" too: it is not visible).
    assert working.update()["tool_reasons"] == {"a": None, "b": None, "c": None}


# --- update_state through real checkpointers ----------------------------------------------------

FACES = ["prebuilt", "middleware"]


@pytest.mark.parametrize("saver_kind", list(SAVERS))
@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("categories", 5),
        ("categories", [["x"]]),
        ("category_scores", {"weather": "high"}),
        ("tool_last_used", {"get_weather": 2**64 - 1}),
        ("tool_last_used", {5: 1}),
        ("tool_last_used", {"get_weather": True}),
        ("tool_reasons", {"get_weather": "budget"}),
    ],
)
def test_update_state_refuses_a_malformed_budget_field_and_the_thread_goes_on(
    tmp_path, saver_kind, face, field, value
):
    model = ScriptedChatModel(responses=[AIMessage("hi"), weather_call(), AIMessage("done")])
    with SAVERS[saver_kind](tmp_path) as saver:
        app, as_node = build(face, saver, model, max_tools=2)
        cfg = config(f"{face}-{field}")
        app.invoke({"messages": [HumanMessage("weather in Paris")]}, cfg)
        before = app.get_state(cfg).values.get(field)
        with pytest.raises(StateFieldError, match=f"the state field '{field}' must be"):
            app.update_state(cfg, {field: value}, as_node=as_node)
        assert app.get_state(cfg).values.get(field) == before
        RAN.clear()
        out = app.invoke({"messages": [HumanMessage("weather in Rome")]}, cfg)
        assert RAN == ["get_weather"] and out["messages"][-1].content == "done"


@pytest.mark.parametrize("saver_kind", list(SAVERS))
@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(
    "written", [Overwrite(5), Overwrite([["x"]]), {"__overwrite__": 5}], ids=repr
)
def test_categories_written_past_the_reducer_never_lose_a_turn_whose_tool_ran(
    tmp_path, caplog, saver_kind, face, written
):
    """With ``usage=``, the record of a batch reads ``categories``: a value an ``Overwrite``
    (or an old checkpoint) put past the reducer is read as no categories, and the tool runs
    once, its result kept (and its use recorded: not lost to the failure guard)."""
    model = ScriptedChatModel(responses=[AIMessage("hi"), AIMessage("done")])
    usage = ToolUsage(store=InMemoryStore())
    with SAVERS[saver_kind](tmp_path) as saver:
        app, as_node = build(face, saver, model, max_tools=2, usage=usage)
        cfg = config(face)
        app.invoke({"messages": [HumanMessage("weather in Paris")]}, cfg)
        edit = {
            "categories": written,
            "messages": [HumanMessage("weather in Rome"), weather_call()],
        }
        resume = app.update_state(cfg, edit, as_node=as_node)
        RAN.clear()
        out = app.invoke(None, resume)
        assert RAN == ["get_weather"]
        answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
        assert answers[-1].content == "sunny in Rome" and answers[-1].status == "success"
        assert out["messages"][-1].content == "done"
        assert "usage history: recording" not in caplog.text


@pytest.mark.parametrize("saver_kind", list(SAVERS))
@pytest.mark.parametrize("face", FACES)
def test_the_prompt_reads_malformed_categories_as_none_with_server_described_categories(
    tmp_path, saver_kind, face
):
    """The prompt shows a server's own description only for the categories in play, read from
    ``categories`` and ``selected_tools``: malformed values there are read as none, and the
    model is called."""
    model = ScriptedChatModel(responses=[AIMessage("hi"), AIMessage("still here")])
    with SAVERS[saver_kind](tmp_path) as saver:
        app, as_node = build(face, saver, model, max_tools=2, catalog=mcp_described_catalog())
        cfg = config(face)
        app.invoke({"messages": [HumanMessage("weather in Paris")]}, cfg)
        edit = {
            "categories": Overwrite([["x"], 5]),
            "selected_tools": Overwrite([["get_weather"]]),
            "messages": [HumanMessage("and in Rome?")],
        }
        # Written as the tools' step, so the model is called next, without choosing first.
        resume = app.update_state(cfg, edit, as_node="tools")
        out = app.invoke(None, resume)
        assert out["messages"][-1].content == "still here"


@pytest.mark.parametrize("saver_kind", list(SAVERS))
@pytest.mark.parametrize("face", FACES)
def test_a_thread_holding_a_step_at_the_64_bit_edge_is_renumbered_and_goes_on(
    tmp_path, saver_kind, face
):
    """A step the checkpoint holds from before the reducer checked (here put there by an
    ``Overwrite``): the next node renumbers the steps instead of writing 2**64, which no
    checkpointer stores."""
    model = ScriptedChatModel(responses=[AIMessage("hi")])
    with SAVERS[saver_kind](tmp_path) as saver:
        app, as_node = build(face, saver, model, max_tools=2)
        cfg = config(face)
        app.invoke({"messages": [HumanMessage("weather in Paris")]}, cfg)
        held = {"get_weather": 2**64 - 1, "send_message": 2**64 - 2}
        app.update_state(cfg, {"tool_last_used": Overwrite(held)}, as_node=as_node)
        RAN.clear()
        for text in ("weather in Rome", "weather in Oslo"):
            model.responses, model.i = [weather_call(), AIMessage("ok")], 0
            out = app.invoke({"messages": [HumanMessage(text)]}, cfg)
            assert out["messages"][-1].content == "ok"
        assert RAN == ["get_weather", "get_weather"]
        values = app.get_state(cfg).values
        steps = values["tool_last_used"]
        assert steps and max(steps.values()) <= STEP_LIMIT
        assert steps["get_weather"] == max(steps.values())  # the last used, after renumbering
        assert set(steps) <= set(values["selected_tools"])  # send_message's step removed


def test_clean_budget_fields_gives_what_the_reducers_accept():
    held = {
        "messages": [],
        "categories": [["x"], "weather"],
        "category_scores": {"weather": 1.0, "slack": "high", 3: 1.0},
        "selected_tools": ["get_weather", 5],
        "tool_last_used": {"get_weather": 2**64 - 1, "send_message": 4, 5: 1},
        "tool_reasons": {"get_weather": {"why": "budget"}, "send_message": "x"},
    }
    clean = clean_budget_fields(held)
    assert clean == {
        "messages": [],
        "categories": ["weather"],
        "category_scores": {"weather": 1.0},
        "selected_tools": ["get_weather"],
        "tool_last_used": {"send_message": 1, "get_weather": 2},
        "tool_reasons": {"get_weather": {"why": "budget"}},
    }
    reducers = {
        "categories": replace_categories,
        "category_scores": replace_scores,
        "tool_last_used": merge_counts,
        "tool_reasons": merge_reasons,
    }
    for field, reducer in reducers.items():
        reducer(None, clean[field])  # accepted: no raise
    assert "discovered_tools" not in clean  # only the fields the state has


@pytest.mark.parametrize(
    "held",
    [
        {"tool_last_used": Overwrite({"get_weather": 2**64 - 1})},
        {"tool_last_used": Overwrite({5: 1})},
        {"categories": Overwrite(5)},
        {"tool_reasons": Overwrite({5: {"why": "budget"}})},
        {"selected_tools": Overwrite([5])},
        {"discovered_tools": Overwrite([5])},
    ],
    ids=[
        "step-at-64-bit-edge",
        "non-string-key",
        "categories-not-a-list",
        "reason-under-a-non-string-key",
        "a-non-name-visible",
        "a-non-name-discovered",
    ],
)
def test_tool_agent_takes_a_state_holding_what_the_reducers_refuse(held):
    model = ScriptedChatModel(responses=[AIMessage("hi")])
    graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    graph.add_node("agent", ToolAgent(model, catalog(), max_tools=2))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    app = graph.compile(checkpointer=InMemorySaver())
    cfg = config("tool-agent")
    app.invoke({"messages": [HumanMessage("weather in Paris")]}, cfg)
    app.update_state(cfg, held, as_node="agent")
    add = {"name": "add_tool", "args": {"tool_names": ["get_weather"]}, "id": "a1"}
    loading = AIMessage("", tool_calls=[{**add, "type": "tool_call"}])
    model.responses, model.i = [loading, weather_call(), AIMessage("ok")], 0
    RAN.clear()
    out = app.invoke({"messages": [HumanMessage("weather in Rome")]}, cfg)
    assert RAN == ["get_weather"] and out["messages"][-1].content == "ok"


# --- the tool-name fields -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("update", "named"),
    [
        ("get_weather", "the update is 'get_weather'"),
        (5, "the update is 5"),
        ({"discard": ["get_weather"]}, "the unknown keys ['discard']"),
        ({"add": [1]}, "'add' holds non-names [1]"),
        ({"replace": "get_weather"}, "'replace' is 'get_weather'"),
    ],
)
def test_merge_names_refuses_what_is_no_name_update_naming_the_fields(update, named):
    with pytest.raises(StateFieldError) as caught:
        merge_names(["send_message"], update)
    message = str(caught.value)
    assert "'selected_tools' or 'discovered_tools'" in message and named in message
    assert "update_state" in message
    # LangGraph server answers a ValueError with 400 (a plain TypeError is a 500).
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("field", ["selected_tools", "discovered_tools"])
def test_update_state_refuses_a_malformed_tool_name_field_with_a_state_field_error(face, field):
    model = ScriptedChatModel(responses=[AIMessage("hi"), weather_call(), AIMessage("done")])
    app, as_node = build(face, InMemorySaver(), model, max_tools=2)
    cfg = config(f"{face}-{field}")
    app.invoke({"messages": [HumanMessage("weather in Paris")]}, cfg)
    with pytest.raises(StateFieldError, match=f"'{field}'"):
        app.update_state(cfg, {field: "get_weather"}, as_node=as_node)
    RAN.clear()
    out = app.invoke({"messages": [HumanMessage("weather in Rome")]}, cfg)
    assert RAN == ["get_weather"] and out["messages"][-1].content == "done"


# --- the middleware's private fields ------------------------------------------------------------


def _note(reply_id: str | None, **fields: Any) -> dict[str, Any]:
    return {"reply": reply_id, **fields}


def _paused_before_tools(
    saver: BaseCheckpointSaver, thread: str
) -> tuple[Any, Any, ScriptedChatModel]:
    """``create_agent`` with the budget, run on ``thread`` until before its tools (the model
    called ``get_weather``): the app, the thread's config and the scripted model."""
    model = ScriptedChatModel(responses=[weather_call(), AIMessage("done")])
    middleware = ToolBudgetMiddleware(catalog())
    app = create_agent(
        model, middleware=[middleware], checkpointer=saver, interrupt_before=["tools"]
    )
    cfg = config(thread)
    RAN.clear()
    app.invoke({"messages": [HumanMessage("weather in Rome")]}, cfg)
    return app, cfg, model


@pytest.mark.parametrize("saver_kind", list(SAVERS))
@pytest.mark.parametrize(
    "note",
    [
        lambda reply: "not a note",
        lambda reply: ["get_weather"],
        lambda reply: _note(reply, tools=5),
        lambda reply: _note(reply, batch=["unhashable"]),
    ],
    ids=["a-string", "a-list", "tools-an-int", "batch-unhashable"],
)
def test_middleware_ignores_a_client_written_note_of_the_wrong_shape(tmp_path, saver_kind, note):
    with SAVERS[saver_kind](tmp_path) as saver, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app, cfg, _ = _paused_before_tools(saver, f"private-{saver_kind}")
        reply = app.get_state(cfg).values["messages"][-1].id
        app.update_state(cfg, {"toolbudget_still_callable": note(reply)})
        out = app.invoke(None, cfg)
    assert RAN == ["get_weather"] and out["messages"][-1].content == "done"


@pytest.mark.parametrize("saver_kind", list(SAVERS))
def test_middleware_turn_count_at_the_64_bit_edge_ends_the_turn_instead_of_overflowing(
    tmp_path, saver_kind
):
    with SAVERS[saver_kind](tmp_path) as saver, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app, cfg, model = _paused_before_tools(saver, f"edge-{saver_kind}")
        user = app.get_state(cfg).values["toolbudget_turn"]["user"]
        app.update_state(cfg, {"toolbudget_turn": {"user": user, "model_calls": 2**64 - 1}})
        out = app.invoke(None, cfg)  # the count is clamped: its +1 is no 65-bit integer
        assert RAN == ["get_weather"]
        assert "max_iterations" in out["messages"][-1].content  # the turn counts as over
        assert app.get_state(cfg).values["toolbudget_turn"]["model_calls"] <= MAX_STEP + 1
        model.responses, model.i = [AIMessage("next turn")], 0
        out = app.invoke({"messages": [HumanMessage("hello")]}, cfg)
        assert out["messages"][-1].content == "next turn"
