"""ChooseTools: the three selection nodes as one graph step give what the three give as nodes.

Over a conversation of several turns (new topics, a topic kept because its tool was used,
a model that loads a tool itself, a request nothing matches), a graph with ``choose_tools``
and a graph with ``classify_intent -> select_tools -> tool_search`` end in the same state
(categories, scores, the visible set in its order, why each tool is visible, last use) and
stream the same visible-set events, under ``invoke`` and ``ainvoke``. The prebuilt graph runs
the selection in one step.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from langgraph_toolbudget import (
    ChooseTools,
    ClassifyIntent,
    SelectTools,
    ToolBudgetInput,
    ToolBudgetState,
    ToolSearch,
    create_toolbudget_agent,
)
from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.state import apply_update, merge_names, state_delta
from langgraph_toolbudget.testing import ScriptedChatModel

FIELDS = ("categories", "category_scores", "selected_tools", "tool_reasons", "tool_last_used")
TURNS = [
    "Create a GitHub issue for the login bug and tell the team in Slack",
    "What's the weather in Tokyo this week?",
    "zqxjvk",
    "How many orders are in the database?",
]


def _graphs(catalog: Any, config: BudgetConfig) -> dict[str, Any]:
    one = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    one.add_node("choose_tools", ChooseTools(catalog, config=config))
    one.add_edge(START, "choose_tools")
    one.add_edge("choose_tools", END)
    three = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    three.add_node("classify_intent", ClassifyIntent(catalog, config=config))
    three.add_node("select_tools", SelectTools(catalog, config=config))
    three.add_node("tool_search", ToolSearch(catalog, config=config))
    three.add_edge(START, "classify_intent")
    three.add_edge("classify_intent", "select_tools")
    three.add_edge("select_tools", "tool_search")
    three.add_edge("tool_search", END)
    return {
        name: graph.compile(checkpointer=InMemorySaver())
        for name, graph in (("one", one), ("three", three))
    }


async def _conversation(app: Any, api: str) -> tuple[list[dict[str, Any]], list[Any]]:
    config = {"configurable": {"thread_id": "t"}}
    states, events = [], []
    for i, text in enumerate(TURNS):
        inputs = {"messages": [HumanMessage(text)]}
        if api == "ainvoke":
            events += [e async for e in app.astream(inputs, config, stream_mode="custom")]
            values = (await app.aget_state(config)).values
        else:
            events += list(app.stream(inputs, config, stream_mode="custom"))
            values = app.get_state(config).values
        states.append({k: values.get(k) for k in FIELDS})
        if i == 0:  # the model used a tool of this turn and one it loaded itself
            used = [values["selected_tools"][1], "list_tables"]
            calls = [{"name": n, "args": {}, "id": f"c{j}", "type": "tool_call"}
                     for j, n in enumerate(used)]  # fmt: skip
            answers = [ToolMessage("ok", tool_call_id=c["id"], name=c["name"]) for c in calls]
            update = {
                "messages": [AIMessage("", tool_calls=calls), *answers],
                "selected_tools": ["list_tables"],
                "tool_last_used": {"list_tables": 3},
            }
            app.update_state(config, update, as_node=next(iter(app.builder.nodes)))
    return states, events


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
@pytest.mark.parametrize("options", [{"max_tools": 4}, {"max_tools": 2, "max_visible": 5}])
async def test_choose_tools_ends_where_the_three_nodes_end(api, options):
    catalog = build_example_catalog()
    graphs = _graphs(catalog, BudgetConfig(**options))
    one_states, one_events = await _conversation(graphs["one"], api)
    three_states, three_events = await _conversation(graphs["three"], api)
    assert one_states == three_states
    assert one_events == three_events
    assert {e["node"] for e in one_events} >= {"select_tools", "tool_search"}
    assert one_states[0]["categories"][:2] == ["github", "slack"]
    assert "list_tables" in one_states[1]["selected_tools"]  # used in turn 1: kept


def test_the_prebuilt_graph_chooses_in_one_step_and_keeps_the_nodes_names_in_its_events():
    model = ScriptedChatModel(responses=[AIMessage("ok")])
    graph = create_toolbudget_agent(model, build_example_catalog(), max_tools=4)
    assert set(graph.nodes) == {"choose_tools", "agent", "tools"}
    app = graph.compile()
    inputs = {"messages": [HumanMessage(TURNS[0])]}
    steps = list(app.stream(inputs, stream_mode="updates"))
    assert [next(iter(s)) for s in steps] == ["choose_tools", "agent"]
    update = steps[0]["choose_tools"]
    assert update["categories"][:2] == ["github", "slack"]
    assert "create_issue" in update["selected_tools"]["add"]
    events = [e for e in app.stream(inputs, stream_mode="custom") if e.get("added")]
    assert {e["node"] for e in events} == {"select_tools", "tool_search"}
    assert (
        model.bound_tools[-1][-len(update["selected_tools"]["add"]) :]
        == (update["selected_tools"]["add"])
    )


def test_state_delta_replaces_the_visible_set_when_only_that_keeps_its_order():
    before = {"selected_tools": ["a", "b", "c"]}
    removed = apply_update(before, {"selected_tools": {"remove": ["b"], "add": ["d"]}})
    after = apply_update(removed, {"selected_tools": ["b"]})  # b back, now last
    assert after["selected_tools"] == ["a", "c", "d", "b"]
    delta = state_delta(before, after, ())
    assert delta["selected_tools"] == {"replace": ["a", "c", "d", "b"]}
    plain = state_delta(before, removed, ())
    assert plain["selected_tools"] == {"remove": ["b"], "add": ["d"]}
    for update, end in ((delta, after), (plain, removed)):
        merged = merge_names(before["selected_tools"], update["selected_tools"])
        assert merged == end["selected_tools"]
