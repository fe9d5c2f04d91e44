"""The visible set during a turn: stable order, hard cap, least-recently-used eviction."""

from __future__ import annotations

from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.state import merge_names


def test_from_state_keeps_state_order_and_appends_base_names_not_yet_there():
    ws = WorkingSet.from_state({"selected_tools": ["b", "a"]}, base=["a", "pin"])
    assert ws.names == ["b", "a", "pin"]


def test_from_state_restores_last_used_and_continues_the_step_counter():
    ws = WorkingSet.from_state({"selected_tools": ["a", "b"], "tool_last_used": {"a": 7, "b": 3}})
    ws.touch("b")
    assert ws.last_used == {"a": 7, "b": 8}


def test_from_state_with_missing_fields_is_empty():
    assert WorkingSet.from_state({}).names == []


def test_add_appends_new_names_in_order_without_duplicates():
    ws = WorkingSet(["a", "b"])
    added, evicted = ws.add(["c", "a", "d", "c"])
    assert (added, evicted) == (["c", "d"], [])
    assert ws.names == ["a", "b", "c", "d"]


def test_existing_names_keep_their_position():
    ws = WorkingSet(["a", "b", "c"])
    ws.add(["b", "z"])
    assert ws.names[:3] == ["a", "b", "c"]


def test_cap_evicts_least_recently_used_first():
    ws = WorkingSet(["a", "b", "c"], cap=3)
    ws.touch("a")  # b and c were never used; a is the most recent
    added, evicted = ws.add(["d", "e"])
    assert added == ["d", "e"]
    assert evicted == ["b", "c"]
    assert ws.names == ["a", "d", "e"]


def test_recent_use_protects_a_tool_from_eviction():
    ws = WorkingSet(["a", "b"], cap=2)
    ws.touch("a")
    ws.touch("b")
    ws.touch("a")  # b is now the least recently used
    _, evicted = ws.add(["c"])
    assert evicted == ["b"]
    assert "a" in ws


def test_ties_in_last_use_evict_the_earliest_position():
    ws = WorkingSet(["x", "y", "z"], cap=3)
    _, evicted = ws.add(["w"])
    assert evicted == ["x"]


def test_pinned_tools_are_never_evicted():
    ws = WorkingSet(["pin", "a", "b"], pinned=frozenset({"pin"}), cap=3)
    ws.touch("a")
    ws.touch("b")
    _, evicted = ws.add(["c", "d"])
    assert "pin" not in evicted
    assert ws.names[0] == "pin"
    assert evicted == ["a", "b"]


def test_names_being_added_never_evict_each_other_and_excess_is_dropped():
    ws = WorkingSet(["pin"], pinned=frozenset({"pin"}), cap=2)
    added, evicted = ws.add(["a", "b", "c"])
    assert added == ["a"]
    assert evicted == []
    assert ws.names == ["pin", "a"]


def test_cap_full_of_pinned_tools_adds_nothing():
    ws = WorkingSet(["p1", "p2"], pinned=frozenset({"p1", "p2"}), cap=2)
    assert ws.add(["a"]) == ([], [])
    assert ws.names == ["p1", "p2"]


def test_added_tools_count_as_used():
    ws = WorkingSet(["old"], cap=2)
    ws.add(["new"])
    _, evicted = ws.add(["newer"])
    assert evicted == ["old"]


def test_no_cap_never_evicts():
    ws = WorkingSet([f"t{i}" for i in range(50)])
    _, evicted = ws.add([f"n{i}" for i in range(50)])
    assert evicted == []
    assert len(ws.names) == 100


def test_diff_round_trips_through_the_state_reducer():
    before = ["a", "b", "c"]
    ws = WorkingSet(list(before), cap=3)
    ws.touch("b")
    ws.touch("c")
    ws.add(["d"])
    diff = ws.diff(before)
    assert diff == {"remove": ["a"], "add": ["d"]}
    assert merge_names(before, diff) == ws.names


def test_a_set_above_the_cap_is_brought_down_to_it_when_tools_are_added():
    ws = WorkingSet(["a", "b", "c", "d", "e"], pinned=frozenset({"a"}), cap=3)
    added, evicted = ws.add(["f"])
    assert added == ["f"]
    assert evicted == ["b", "c", "d"]
    assert ws.names == ["a", "e", "f"]


def test_names_to_keep_are_not_evicted_and_the_new_names_take_the_room_left():
    ws = WorkingSet(["old", "a", "b"], cap=4)
    ws.touch("a")
    ws.touch("b")  # without keep, a (the least recently used after old) would go for z
    added, evicted = ws.add(["x", "y", "z"], keep=["a", "b"])
    assert (added, evicted) == (["x", "y"], ["old"])  # z does not fit: a and b stay
    assert ws.names == ["a", "b", "x", "y"]


def test_a_name_chosen_again_takes_the_reason_of_this_choice():
    ws = WorkingSet.from_state(
        {"selected_tools": ["a", "b"], "tool_reasons": {"a": {"why": "search"}, "b": {"why": "x"}}}
    )
    ws.refresh(["a", "c"], reason="select_tools", details={"a": {"why": "budget"}})
    assert ws.reasons == {"a": {"why": "budget"}, "b": {"why": "x"}, "c": {"why": "select_tools"}}
    assert ws.update()["tool_reasons"] == {"a": {"why": "budget"}, "c": {"why": "select_tools"}}


def test_the_steps_of_tools_that_left_are_removed_from_the_state():
    """Only visible tools need a step: without this a long thread's ``tool_last_used`` kept
    an entry for every tool it ever loaded (review 50a: 330 of 351 entries stale at turn 120
    over 1,000 tools)."""
    from langgraph_toolbudget.state import merge_counts

    state = {"selected_tools": ["a", "b", "c"], "tool_last_used": {"a": 1, "b": 2, "c": 3}}
    working = WorkingSet.from_state(state, cap=3)
    working.add(["d"])  # evicts "a", the least recently used
    update = working.update()
    assert update["tool_last_used"] == {"d": 4, "a": None}
    stored = merge_counts(state["tool_last_used"], update["tool_last_used"])
    assert stored == {"b": 2, "c": 3, "d": 4}
    assert set(stored) == set(merge_names(state["selected_tools"], update["selected_tools"]))


async def test_a_long_thread_keeps_steps_for_its_visible_tools_only():
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_toolbudget import ToolBudgetMiddleware, create_toolbudget_agent
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog
    from langgraph_toolbudget.testing import ScriptedChatModel

    requests = [
        "weather in Paris",
        "open a GitHub issue for the crash",
        "post a message to the team channel on Slack",
        "how many rows does the orders table have",
        "forecast for Rome tomorrow",
    ] * 3
    catalog = build_example_catalog()
    apps = {
        "nodes": create_toolbudget_agent(
            ScriptedChatModel(responses=["ok"]), catalog, max_tools=3
        ).compile(checkpointer=InMemorySaver()),
        "middleware": create_agent(
            ScriptedChatModel(responses=["ok"]),
            middleware=[ToolBudgetMiddleware(catalog, max_tools=3)],
            checkpointer=InMemorySaver(),
        ),
    }
    for face, app in apps.items():
        config = {"configurable": {"thread_id": face}}
        seen: set[str] = set()
        for text in requests:
            values = await app.ainvoke({"messages": [HumanMessage(text)]}, config)
            seen.update(values["selected_tools"])
            assert set(values["tool_last_used"]) <= set(values["selected_tools"]), face
        assert len(seen) > len(values["selected_tools"])  # tools did come and go


def test_a_step_of_a_tool_that_was_not_visible_here_is_not_removed():
    """Review 52a: two branches of one step (``Send``) read the same state; one loads ``x``
    (a ``manual`` tool: its step says a node added it), the other must not remove ``x``'s
    step for being absent from what it read, or ``x`` is dropped at the next node."""
    from langgraph_toolbudget.state import merge_counts

    state = {"selected_tools": ["a", "b"], "tool_last_used": {"a": 1, "b": 2, "x": 3}}
    loads = WorkingSet.from_state(state, cap=3)
    loads.add(["x"])
    other = WorkingSet.from_state(state, cap=3)
    other.touch("b")
    theirs = other.update()
    assert "x" not in theirs.get("tool_last_used", {})
    for order in ([loads.update(), theirs], [theirs, loads.update()]):
        steps = state["tool_last_used"]
        for update in order:
            steps = merge_counts(steps, update.get("tool_last_used"))
        assert "x" in steps


def test_a_tool_used_without_being_visible_gets_no_step():
    """Review 53a: with ``enforce_visibility=False`` a call to a tool that is not visible
    touches it; its step must not be written, or the field grows toward the whole catalog."""
    working = WorkingSet.from_state({"selected_tools": ["a"], "tool_last_used": {"a": 1}})
    working.touch("z")
    working.touch("a")
    assert working.update() == {"tool_last_used": {"a": 3}}


def test_a_tool_called_without_being_visible_keeps_the_step_another_node_wrote():
    """Only a step out of range is removed for a tool not visible: a call to it (with
    ``enforce_visibility=False``) must not remove a step a sibling branch may hold for it."""
    state = {"selected_tools": ["a"], "tool_last_used": {"a": 1, "x": 2}}
    working = WorkingSet.from_state(state)
    working.touch("x")
    assert "x" not in working.update().get("tool_last_used", {})
