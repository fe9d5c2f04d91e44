"""state.py: the name reducers and the state's round trip through real checkpointers."""

from __future__ import annotations

import json
import sqlite3
from typing import get_type_hints

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import MemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from langgraph_toolbudget import (
    ClassifyIntent,
    SelectTools,
    ToolBudgetInput,
    ToolBudgetState,
    ToolCatalog,
    ToolSearch,
)
from langgraph_toolbudget.state import (
    input_schema_of,
    merge_counts,
    merge_names,
    state_get,
    state_messages,
)
from langgraph_toolbudget.testing import ScriptedChatModel

TURN_1 = "What's the weather in Paris tomorrow?"
TURN_2 = "Now create a GitHub issue in acme/app about the pull request"

# --- merge_names -------------------------------------------------------------------------


def test_merge_names_keeps_existing_first_and_appends_new():
    assert merge_names(["a", "b"], ["c", "d"]) == ["a", "b", "c", "d"]


def test_merge_names_existing_names_keep_their_position():
    assert merge_names(["a", "b", "c"], ["c", "a", "d"]) == ["a", "b", "c", "d"]


def test_merge_names_drops_duplicates_on_both_sides():
    assert merge_names(["a", "a", "b"], ["b", "c", "c"]) == ["a", "b", "c"]


def test_merge_names_empty_and_none_sides():
    assert merge_names(None, ["a"]) == ["a"]
    assert merge_names([], []) == []
    assert merge_names(["a"], None) == ["a"]
    assert merge_names(["a"], []) == ["a"]


def test_merge_names_remove_mapping():
    assert merge_names(["a", "b", "c"], {"remove": ["b", "zzz"]}) == ["a", "c"]


def test_merge_names_add_mapping():
    assert merge_names(["a"], {"add": ["b", "a"]}) == ["a", "b"]


def test_merge_names_remove_and_add_mapping():
    assert merge_names(["a", "b", "c"], {"remove": ["b"], "add": ["d"]}) == ["a", "c", "d"]
    # a name removed and added in one update ends up at the end
    assert merge_names(["a", "b", "c"], {"remove": ["a"], "add": ["a"]}) == ["b", "c", "a"]


def test_merge_names_replace_mapping():
    assert merge_names(["a", "b"], {"replace": ["c", "c", "d"]}) == ["c", "d"]
    assert merge_names(["a", "b"], {"replace": []}) == []
    assert merge_names(["a"], {"replace": ["x", "y"], "remove": ["y"], "add": ["z"]}) == [
        "x",
        "z",
    ]


def test_merge_names_unknown_mapping_key_raises_naming_it():
    with pytest.raises(ValueError, match="discard"):
        merge_names(["a"], {"discard": ["a"]})


def test_merge_names_plain_string_raises_instead_of_adding_letters():
    with pytest.raises(TypeError, match="get_weather"):
        merge_names(["a"], "get_weather")


def test_merge_names_does_not_mutate_its_inputs():
    left, right = ["a", "b"], ["c"]
    merge_names(left, right)
    assert left == ["a", "b"]
    assert right == ["c"]


def test_merge_counts_right_side_wins_per_key():
    assert merge_counts({"a": 1, "b": 2}, {"b": 5, "c": 1}) == {"a": 1, "b": 5, "c": 1}
    assert merge_counts(None, None) == {}


def test_state_helpers_read_dicts_and_objects():
    class Obj:
        messages = [HumanMessage("hi")]
        categories = ["github"]

    assert state_messages({"messages": [HumanMessage("hi")]})[0].content == "hi"
    assert state_messages(Obj())[0].content == "hi"
    assert state_get(Obj(), "categories") == ["github"]
    assert state_get({}, "categories", []) == []


# --- the reducer inside a real graph -----------------------------------------------------


def test_selected_tools_reducer_applies_between_nodes():
    g = StateGraph(ToolBudgetState)
    g.add_node("first", lambda s: {"selected_tools": ["get_weather", "send_message"]})
    g.add_node("second", lambda s: {"selected_tools": ["send_message", "read_file"]})
    g.add_node("third", lambda s: {"selected_tools": {"remove": ["get_weather"]}})
    g.add_edge(START, "first")
    g.add_edge("first", "second")
    g.add_edge("second", "third")
    g.add_edge("third", END)
    graph = g.compile()
    out = graph.invoke({"messages": [HumanMessage("hi")], "selected_tools": ["ask_human"]})
    assert out["selected_tools"] == ["ask_human", "send_message", "read_file"]


def test_discovered_tools_reducer_merges_names_too():
    g = StateGraph(ToolBudgetState)
    g.add_node("a", lambda s: {"discovered_tools": ["x", "y"]})
    g.add_node("b", lambda s: {"discovered_tools": ["y", "z"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    assert g.compile().invoke({"messages": []})["discovered_tools"] == ["x", "y", "z"]


# --- checkpoint round trips --------------------------------------------------------------


def build_agent_graph(catalog: ToolCatalog, model: ScriptedChatModel, checkpointer):
    """classify -> select -> search -> agent, with a scripted model bound to the visible tools."""

    def agent(state):
        bound = model.bind_tools(catalog.tools(state["selected_tools"]))
        return {"messages": [bound.invoke(state["messages"])]}

    async def aagent(state):
        bound = model.bind_tools(catalog.tools(state["selected_tools"]))
        return {"messages": [await bound.ainvoke(state["messages"])]}

    g = StateGraph(ToolBudgetState)
    g.add_node("classify_intent", ClassifyIntent(catalog))
    g.add_node("select_tools", SelectTools(catalog, max_tools=4))
    g.add_node("tool_search", ToolSearch(catalog, search_limit=2))
    g.add_node("agent", RunnableLambda(agent, afunc=aagent))
    g.add_edge(START, "classify_intent")
    g.add_edge("classify_intent", "select_tools")
    g.add_edge("select_tools", "tool_search")
    g.add_edge("tool_search", "agent")
    g.add_edge("agent", END)
    return g.compile(checkpointer=checkpointer)


def scripted_model() -> ScriptedChatModel:
    return ScriptedChatModel(responses=[AIMessage("18C and cloudy."), AIMessage("Done.")])


def check_two_turns(catalog, model, first, second, stored) -> None:
    """What must survive two turns of one thread, whatever the checkpointer."""
    s1 = first["selected_tools"]
    assert first["categories"][0] == "weather"
    assert "get_weather" in s1
    assert second["categories"][0] == "github"
    s2 = second["selected_tools"]
    # turn 2 left the weather topic without using its tools: they went; github's came
    assert "create_issue" in s2 and "get_weather" not in s2
    assert [n for n in s2 if n in s1] == [n for n in s1 if n in s2]  # the kept ones in order
    assert len(s2) == len(set(s2))
    assert [m.content for m in second["messages"]] == [TURN_1, "18C and cloudy.", TURN_2, "Done."]
    # what the checkpointer stored equals what the graph returned, names only
    assert stored["categories"] == second["categories"]
    assert stored["selected_tools"] == s2
    json.dumps({k: stored[k] for k in ("categories", "category_scores", "selected_tools")})
    # the model saw exactly the visible tools, each turn
    assert model.bound_tools == [s1, s2]


def test_state_round_trip_memory_saver_two_turns_sync(catalog):
    model = scripted_model()
    graph = build_agent_graph(catalog, model, MemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    first = graph.invoke({"messages": [HumanMessage(TURN_1)]}, config)
    second = graph.invoke({"messages": [HumanMessage(TURN_2)]}, config)
    check_two_turns(catalog, model, first, second, graph.get_state(config).values)
    other = graph.get_state({"configurable": {"thread_id": "t2"}}).values
    assert "selected_tools" not in other  # threads do not share state


async def test_state_round_trip_memory_saver_two_turns_async(catalog):
    model = scripted_model()
    graph = build_agent_graph(catalog, model, MemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    first = await graph.ainvoke({"messages": [HumanMessage(TURN_1)]}, config)
    second = await graph.ainvoke({"messages": [HumanMessage(TURN_2)]}, config)
    check_two_turns(catalog, model, first, second, (await graph.aget_state(config)).values)


def test_state_round_trip_sqlite_saver_two_turns_across_connections(catalog, tmp_path):
    db = tmp_path / "checkpoints.sqlite"
    config = {"configurable": {"thread_id": "thread-42"}}
    model = scripted_model()

    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        graph = build_agent_graph(catalog, model, SqliteSaver(conn))
        first = graph.invoke({"messages": [HumanMessage(TURN_1)]}, config)
    finally:
        conn.close()

    # Turn 2 runs on a fresh connection: everything it knows came from the database.
    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        graph = build_agent_graph(catalog, model, SqliteSaver(conn))
        restored = graph.get_state(config).values
        assert restored["selected_tools"] == first["selected_tools"]
        assert restored["categories"] == first["categories"]
        second = graph.invoke({"messages": [HumanMessage(TURN_2)]}, config)
        check_two_turns(catalog, model, first, second, graph.get_state(config).values)
    finally:
        conn.close()


async def test_state_round_trip_async_sqlite_saver_two_turns_across_connections(catalog, tmp_path):
    db = str(tmp_path / "checkpoints.sqlite")
    config = {"configurable": {"thread_id": "thread-42"}}
    model = scripted_model()

    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        graph = build_agent_graph(catalog, model, saver)
        first = await graph.ainvoke({"messages": [HumanMessage(TURN_1)]}, config)

    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        graph = build_agent_graph(catalog, model, saver)
        restored = (await graph.aget_state(config)).values
        assert restored["selected_tools"] == first["selected_tools"]
        assert restored["categories"] == first["categories"]
        second = await graph.ainvoke({"messages": [HumanMessage(TURN_2)]}, config)
        check_two_turns(catalog, model, first, second, (await graph.aget_state(config)).values)


def test_state_tool_search_does_not_run_again_on_the_second_turn(catalog):
    graph = build_agent_graph(catalog, scripted_model(), MemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"messages": [HumanMessage(TURN_1)]}, config)
    updates = list(
        graph.stream({"messages": [HumanMessage(TURN_2)]}, config, stream_mode="updates")
    )
    by_node = {node: update for chunk in updates for node, update in chunk.items()}
    assert "tool_search" in by_node
    assert not by_node["tool_search"]  # no update on a later turn
    assert by_node["select_tools"]["selected_tools"]


# --- the input schema ---------------------------------------------------------------------------


def test_tool_budget_input_is_a_declared_class_equal_to_input_schema_of_the_state():
    built = input_schema_of(ToolBudgetState)
    assert isinstance(ToolBudgetInput, type) and ToolBudgetInput.__name__ == "ToolBudgetInput"
    assert ToolBudgetInput.__module__ == "langgraph_toolbudget.state"  # declared, not built
    hints = get_type_hints(ToolBudgetInput, include_extras=True)
    assert hints == get_type_hints(built, include_extras=True)
    assert ToolBudgetInput.__required_keys__ == built.__required_keys__
    assert ToolBudgetInput.__optional_keys__ == built.__optional_keys__
