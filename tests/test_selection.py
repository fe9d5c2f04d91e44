"""selection: select_tools (the per-category budget), SelectTools, ToolSearch and the graph."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph

from langgraph_toolbudget import (
    ClassifyIntent,
    SelectTools,
    ToolBudgetState,
    ToolCatalog,
    ToolSearch,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.intent import classify_lexical
from langgraph_toolbudget.core.selection import (
    distinctive_terms,
    search_hits,
    select_tools,
    words_match,
)
from langgraph_toolbudget.nodes._node import VISIBLE_SET_EVENT
from langgraph_toolbudget.state import merge_names
from langgraph_toolbudget.testing import ScriptedChatModel


def _named_tool(name: str, description: str) -> StructuredTool:
    return StructuredTool.from_function(func=lambda: "ok", name=name, description=description)


MODES = ["sync", "async"]
META_TOOLS = {"search_tools", "add_tool", "show_all_tools", "request_more_tools"}


async def run(node, state, mode):
    if mode == "sync":
        return node.invoke(state)
    return await node.ainvoke(state)


async def visible(node, state, mode) -> list[str]:
    """The visible set after the node's update went through the state's reducer."""
    out = await run(node, state, mode)
    update = out.get("selected_tools")
    assert update is None or set(update) <= {"add", "remove"}  # the one update shape
    return merge_names(state.get("selected_tools"), update)


def ask(text: str, **state) -> dict:
    return {"messages": [HumanMessage(text)], **state}


def in_category(catalog: ToolCatalog, names: list[str], category: str) -> list[str]:
    members = set(catalog.tools_in(category))
    return [n for n in names if n in members]


# --- select_tools: the examples and gotchas ----------------------------------


def test_select_tools_two_categories_split_budget_evenly(catalog):
    query = "Create an issue in GitHub for project apollo"
    out = select_tools(catalog, query, ["projects", "github"], max_tools=8)
    assert len(out) == 8
    assert len(in_category(catalog, out, "projects")) == 4
    assert len(in_category(catalog, out, "github")) == 4


def test_select_tools_one_category_gets_all_eight_slots(catalog):
    out = select_tools(catalog, "Create an issue in GitHub", ["github"], max_tools=8)
    assert len(out) == 8
    assert set(out) <= set(catalog.tools_in("github"))


def test_select_tools_five_categories_two_each_capped_at_max_tools(catalog):
    cats = ["github", "slack", "projects", "weather", "database"]  # disjoint categories
    out = select_tools(catalog, "post an update", cats, max_tools=8)
    assert len(out) == 8
    for cat in cats[:4]:
        assert len(in_category(catalog, out, cat)) == 2
    assert in_category(catalog, out, "database") == []  # the cap cuts the fifth category


def test_select_tools_min_per_category_floor_is_configurable(catalog):
    cats = ["github", "slack", "projects", "weather", "database"]
    out = select_tools(catalog, "post an update", cats, max_tools=8, min_per_category=1)
    assert len(out) == 8
    assert all(in_category(catalog, out, c) for c in cats)


def test_select_tools_unknown_category_adds_nothing_without_crash(catalog):
    assert select_tools(catalog, "horoscope for leo", ["astrology"], max_tools=8) == []
    assert select_tools(catalog, "anything", [], max_tools=8) == []


def test_select_tools_unknown_category_does_not_take_a_share(catalog):
    out = select_tools(catalog, "Create an issue in GitHub", ["astrology", "github"], max_tools=8)
    assert len(out) == 8
    assert set(out) <= set(catalog.tools_in("github"))


def test_select_tools_tool_in_two_categories_counted_once(catalog):
    query = "read the file contents of README in the repo"
    out = select_tools(catalog, query, ["files", "github"], max_tools=8)
    assert len(out) == len(set(out)) == 8
    assert out.count("get_file_contents") <= 1
    everything = select_tools(catalog, query, ["files", "github"], max_tools=100)
    union = set(catalog.tools_in("files")) | set(catalog.tools_in("github"))
    assert len(everything) == len(union) == 15
    assert set(everything) == union


def test_select_tools_repeated_category_counted_once(catalog):
    assert select_tools(catalog, "weather", ["weather", "weather"], max_tools=8) == select_tools(
        catalog, "weather", ["weather"], max_tools=8
    )


def test_select_tools_small_category_leftover_goes_to_other_category(catalog):
    out = select_tools(catalog, "weather and github issues", ["weather", "github"], max_tools=8)
    assert len(out) == 8
    assert set(catalog.tools_in("weather")) <= set(out)  # all 3, share was 4
    assert len(in_category(catalog, out, "github")) == 5  # 4 + the leftover slot


def test_select_tools_leftover_slots_redistributed_by_relevance(catalog):
    # share = 12 // 3 = 4. database has 3 tools and leaves one slot. github comes before
    # projects in priority, but nothing in github is relevant to the query, while the
    # fifth projects tool is: the spare slot goes to projects.
    query = "project tasks database"
    out = select_tools(catalog, query, ["database", "github", "projects"], max_tools=12)
    assert len(out) == 12
    assert set(catalog.tools_in("database")) <= set(out)
    assert set(catalog.tools_in("projects")) <= set(out)
    assert len(in_category(catalog, out, "github")) == 4


def test_select_tools_ranks_inside_category_by_relevance_not_catalog_order(catalog):
    out = select_tools(catalog, "merge the pull request", ["github"], max_tools=3)
    assert "merge_pull_request" in out
    assert out[0] == "merge_pull_request"
    # create_issue and list_issues come first in the catalog, and are not relevant.
    assert "create_issue" not in out
    assert "list_issues" not in out


def test_select_tools_without_query_falls_back_to_catalog_order(catalog):
    assert select_tools(catalog, "", ["github"], max_tools=2) == ["create_issue", "list_issues"]


def test_select_tools_is_deterministic(catalog, make_catalog):
    query = "Create an issue in GitHub for project apollo and tell slack"
    cats = ["projects", "github", "slack"]
    first = select_tools(catalog, query, cats, max_tools=8)
    assert all(select_tools(catalog, query, cats, max_tools=8) == first for _ in range(5))
    assert select_tools(make_catalog(), query, cats, max_tools=8) == first


def test_select_tools_respects_max_tools_and_zero_budget(catalog):
    for budget in range(0, 12):
        out = select_tools(catalog, "github issue", ["github", "files"], max_tools=budget)
        assert len(out) == min(budget, 15)
        assert len(out) == len(set(out))


def test_select_tools_excluded_tools_are_not_chosen(catalog):
    out = select_tools(catalog, "weather", ["weather"], max_tools=8, exclude=["get_weather"])
    assert out and "get_weather" not in out


def test_select_tools_skips_always_and_manual_tools(make_catalog):
    catalog = make_catalog(
        tool_metadata={
            "get_weather": {"include": "always"},
            "weather_forecast": {"include": "manual"},
        }
    )
    out = select_tools(catalog, "weather forecast", ["weather"], max_tools=8)
    assert out == ["get_air_quality"]


# --- search_hits -------------------------------------------------------------------------


def test_search_hits_weather_query_finds_weather_tools_first(catalog):
    hits = search_hits(catalog, "what is the weather in Paris", limit=3)
    assert hits[0] in {"get_weather", "weather_forecast"}
    assert "send_message" not in hits


def test_search_hits_respects_limit_exclude_and_empty_query(catalog):
    assert len(search_hits(catalog, "list the github issues and pull requests", limit=2)) == 2
    hits = search_hits(catalog, "weather", limit=5, exclude=["get_weather"])
    assert "get_weather" not in hits and hits
    assert search_hits(catalog, "", limit=5) == []
    assert search_hits(catalog, "weather", limit=0) == []


def test_search_hits_look_past_many_off_topic_candidates():
    # 200 tools of 40 other categories match "report" better than the 6 on-topic ones,
    # whose category ("ledger") the query names only by a word the others share.
    tools, categories = [], {}
    for i in range(200):
        tools.append(_named_tool(f"report_{i}", "Report report report on the quarter."))
        categories.setdefault(f"team{i % 40}", []).append(f"report_{i}")
    for i in range(6):
        tools.append(_named_tool(f"ledger_{i}", f"Ledger entry {i}: a report line."))
        categories.setdefault("ledger", []).append(f"ledger_{i}")
    catalog = ToolCatalog.from_tools(tools, categories=categories)
    hits = search_hits(catalog, "report", limit=5, focus=["ledger"])
    assert hits == [f"ledger_{i}" for i in range(5)]
    assert search_hits(catalog, "report", limit=5)[0].startswith("report_")


def test_search_hits_min_relative_score_drops_weak_hits(catalog):
    query = "merge the pull request"
    assert len(search_hits(catalog, query, limit=10, min_relative_score=0.99)) < len(
        search_hits(catalog, query, limit=10)
    )


# --- SelectTools node --------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_select_tools_node_reads_categories_from_state(catalog, mode):
    node = SelectTools(catalog, max_tools=8)
    state = ask("Create an issue in GitHub for project apollo", categories=["projects", "github"])
    budgeted = [n for n in await visible(node, state, mode) if n not in catalog.always_visible]
    assert len(budgeted) == 8
    assert len(in_category(catalog, budgeted, "projects")) == 4
    assert len(in_category(catalog, budgeted, "github")) == 4


@pytest.mark.parametrize("mode", MODES)
async def test_select_tools_node_free_tools_spend_no_budget(make_catalog, mode):
    catalog = make_catalog(tool_metadata={"get_weather": {"include": "always"}})
    node = SelectTools(catalog, max_tools=2, pinned=["list_files"])
    selected = await visible(node, ask("github issues", categories=["github"]), mode)
    # ask_human (special category), get_weather (always), list_files (pinned): free.
    assert {"ask_human", "get_weather", "list_files"} <= set(selected)
    assert len(in_category(catalog, selected, "github")) == 2
    assert len(selected) == 5
    assert node.free_tools == ["get_weather", "ask_human", "list_files"]


@pytest.mark.parametrize("mode", MODES)
async def test_select_tools_node_with_max_tools_zero_chooses_only_free_tools(catalog, mode):
    node = SelectTools(catalog, max_tools=0, pinned=["list_files"])
    by_category = ask("github issues and the weather", categories=["github", "weather"])
    assert await visible(node, by_category, mode) == ["ask_human", "list_files"]
    by_relevance = ask("what is the weather in Paris")
    assert await visible(node, by_relevance, mode) == ["ask_human", "list_files"]


@pytest.mark.parametrize("mode", MODES)
async def test_select_tools_node_never_auto_selects_manual_tools(make_catalog, mode):
    catalog = make_catalog(server_defaults={"weather": {"include": "manual"}})
    node = SelectTools(catalog, max_tools=8)
    selected = await visible(node, ask("weather forecast in Paris", categories=["weather"]), mode)
    assert selected and not set(selected) & set(catalog.tools_in("weather"))
    selected = await visible(node, ask("weather forecast in Paris"), mode)  # relevance strategy
    assert selected and not set(selected) & set(catalog.tools_in("weather"))


@pytest.mark.parametrize("mode", MODES)
async def test_select_tools_node_pinned_manual_tool_is_visible(make_catalog, mode):
    catalog = make_catalog(tool_metadata={"delete_file": {"include": "manual"}})
    assert "delete_file" in await visible(
        SelectTools(catalog, pinned=["delete_file"]), ask("hello"), mode
    )


@pytest.mark.parametrize("mode", MODES)
async def test_select_tools_node_without_categories_uses_relevance(catalog, mode):
    selected = await visible(
        SelectTools(catalog, max_tools=3), ask("what is the weather in Paris"), mode
    )
    budgeted = [n for n in selected if n != "ask_human"]
    assert 0 < len(budgeted) <= 3
    assert budgeted[0] in {"get_weather", "weather_forecast"}


@pytest.mark.parametrize("mode", MODES)
async def test_select_tools_node_unknown_category_in_state_adds_no_budget_tools(catalog, mode):
    selected = await visible(SelectTools(catalog), ask("horoscope", categories=["astrology"]), mode)
    assert selected == ["ask_human"]


@pytest.mark.parametrize(
    ("model_size", "budget"),
    [("qwen3:8b", 5), ("llama3.2:3b", 2), ("llama-3.1-70b", 10), (8, 5), (70e9, 10)],
)
def test_select_tools_node_budget_preset_from_model_size(catalog, model_size, budget):
    node = SelectTools(catalog, model_size=model_size)
    assert node.max_tools == budget
    chosen = node.choose("github issues and pull requests", ["github"])
    assert len([n for n in chosen if n != "ask_human"]) == budget


def test_select_tools_node_explicit_max_tools_wins_over_model_size(catalog):
    assert SelectTools(catalog, max_tools=7, model_size="qwen3:8b").max_tools == 7
    assert SelectTools(catalog).max_tools == 8


def test_select_tools_node_unknown_model_size_raises_naming_the_fix(catalog):
    with pytest.raises(ValueError, match="max_tools="):
        SelectTools(catalog, model_size="gpt-4o")


def test_select_tools_node_rejects_bad_arguments(catalog):
    with pytest.raises(ValueError, match="not_a_tool"):
        SelectTools(catalog, pinned=["not_a_tool"])
    with pytest.raises(ValueError, match="max_tools"):
        SelectTools(catalog, max_tools=-1)
    with pytest.raises(ValueError, match="strategy"):
        SelectTools(catalog, strategy="random")


def test_select_tools_node_pinned_filtered_tool_raises(make_catalog):
    catalog = make_catalog(allowed_servers=["github"])
    with pytest.raises(ValueError, match="send_message"):
        SelectTools(catalog, pinned=["send_message"])


# --- ToolSearch node ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_tool_search_first_turn_adds_best_hits(catalog, mode):
    selected = await visible(
        ToolSearch(catalog, search_limit=2), ask("what is the weather in Paris"), mode
    )
    assert len(selected) == 2
    assert set(selected) <= set(catalog.tools_in("weather"))


@pytest.mark.parametrize("mode", MODES)
async def test_tool_search_later_turn_adds_nothing(catalog, mode):
    state = {
        "messages": [
            HumanMessage("what is the weather in Paris"),
            AIMessage("18C, cloudy."),
            HumanMessage("merge the pull request"),
        ]
    }
    assert await run(ToolSearch(catalog), state, mode) == {}


@pytest.mark.parametrize("mode", MODES)
async def test_tool_search_every_turn_searches_later_turns(catalog, mode):
    state = {
        "messages": [
            HumanMessage("what is the weather in Paris"),
            AIMessage("18C, cloudy."),
            HumanMessage("merge the pull request"),
        ]
    }
    out = await run(ToolSearch(catalog, search_limit=1, every_turn=True), state, mode)
    assert out["selected_tools"] == {"add": ["merge_pull_request"], "remove": []}


@pytest.mark.parametrize("mode", MODES)
async def test_tool_search_skips_tools_already_visible(catalog, mode):
    state = ask("what is the weather in Paris", selected_tools=["get_weather"])
    out = await run(ToolSearch(catalog, search_limit=5), state, mode)
    assert out["selected_tools"]["remove"] == []
    assert out["selected_tools"]["add"] and "get_weather" not in out["selected_tools"]["add"]


@pytest.mark.parametrize("mode", MODES)
async def test_tool_search_no_hit_returns_empty_update(catalog, mode):
    assert await run(ToolSearch(catalog), ask("zqxjvk"), mode) == {}
    assert await run(ToolSearch(catalog, search_limit=0), ask("weather"), mode) == {}


def test_tool_search_rejects_negative_limit(catalog):
    with pytest.raises(ValueError, match="limit"):
        ToolSearch(catalog, search_limit=-1)


# --- the public contract graph -----------------------------------------------------------


def build_contract_graph(catalog: ToolCatalog, **compile_kwargs):
    g = StateGraph(ToolBudgetState)
    g.add_node("classify_intent", ClassifyIntent(catalog))
    g.add_node("select_tools", SelectTools(catalog, max_tools=8))
    g.add_node("tool_search", ToolSearch(catalog, search_limit=5))
    g.add_edge(START, "classify_intent")
    g.add_edge("classify_intent", "select_tools")
    g.add_edge("select_tools", "tool_search")
    g.add_edge("tool_search", END)
    return g.compile(**compile_kwargs)


async def invoke(graph, state, mode, **kwargs):
    if mode == "sync":
        return graph.invoke(state, **kwargs)
    return await graph.ainvoke(state, **kwargs)


@pytest.mark.parametrize("mode", MODES)
async def test_graph_public_contract_weather_query(catalog, mode):
    graph = build_contract_graph(catalog)
    out = await invoke(graph, {"messages": [HumanMessage("What's the weather in Paris?")]}, mode)
    assert out["categories"][0] == "weather"
    assert "get_weather" in out["selected_tools"]
    assert not META_TOOLS & set(out["selected_tools"])
    assert all(n in catalog for n in out["selected_tools"])
    assert len(out["selected_tools"]) == len(set(out["selected_tools"]))
    json.dumps({"categories": out["categories"], "selected_tools": out["selected_tools"]})


@pytest.mark.parametrize("mode", MODES)
async def test_graph_public_contract_two_categories(catalog, mode):
    graph = build_contract_graph(catalog)
    query = "Create an issue in GitHub for project apollo"
    out = await invoke(graph, {"messages": [HumanMessage(query)]}, mode)
    assert {"github", "projects"} <= set(out["categories"])
    selected = out["selected_tools"]
    assert "create_issue" in selected
    assert "create_project" in selected
    assert not META_TOOLS & set(selected)
    # 8 budget slots + ask_human (free) + at most 5 search hits
    assert len(selected) <= 8 + 1 + 5


@pytest.mark.parametrize("mode", MODES)
async def test_graph_public_contract_unrelated_query_does_not_crash(catalog, mode):
    graph = build_contract_graph(catalog)
    out = await invoke(graph, {"messages": [HumanMessage("zqxjvk")]}, mode)
    assert out["categories"] == []
    assert out["selected_tools"] == ["ask_human"]


@pytest.mark.parametrize("mode", MODES)
async def test_graph_streams_visible_set_events(catalog, mode):
    graph = build_contract_graph(catalog)
    state = {"messages": [HumanMessage("What's the weather in Paris?")]}
    if mode == "sync":
        events = list(graph.stream(state, stream_mode="custom"))
    else:
        events = [e async for e in graph.astream(state, stream_mode="custom")]
    assert events
    assert all(e["event"] == VISIBLE_SET_EVENT for e in events)
    assert events[0]["node"] == "select_tools"
    assert "get_weather" in [n for e in events for n in e["added"]]


def test_graph_public_contract_with_filtered_catalog_never_shows_filtered_tools(make_catalog):
    catalog = make_catalog(allowed_servers=["github", "projects"])
    graph = build_contract_graph(catalog)
    out = graph.invoke({"messages": [HumanMessage("send a slack message about the weather")]})
    assert not set(out["selected_tools"]) & {"send_message", "get_weather", "weather_forecast"}
    assert all(n in catalog for n in out["selected_tools"])


def test_select_tools_rejects_a_bare_category_string_naming_the_fix(catalog):
    with pytest.raises(TypeError, match=r"\['github'\]"):
        select_tools(catalog, "open an issue", "github")


# --- max_visible: a hard cap on the working set across turns ----------------------------------


def turn_two(first_visible: list[str], text: str) -> dict:
    """A second user turn whose visible set came from the first turn, which called each of
    those tools (so they stay: the thread is using them)."""
    used = {name: i + 1 for i, name in enumerate(first_visible)}
    calls = [{"name": n, "args": {}, "id": f"t1-{n}"} for n in first_visible]
    answers = [ToolMessage("ok", name=n, tool_call_id=f"t1-{n}") for n in first_visible]
    return {
        "messages": [
            HumanMessage("first question"),
            AIMessage("", tool_calls=calls),
            *answers,
            AIMessage("answer"),
            HumanMessage(text),
        ],
        "categories": [],
        "selected_tools": list(first_visible),
        "tool_last_used": used,
    }


@pytest.mark.parametrize("mode", MODES)
async def test_select_tools_without_a_cap_only_appends(catalog, mode):
    first = catalog.tools_in("github")[:4]
    state = {**turn_two(first, "weather in Paris"), "categories": ["weather"]}
    out = await run(SelectTools(catalog, max_tools=3), state, mode)
    assert out["selected_tools"]["remove"] == []  # without a cap nothing is evicted
    added = set(out["selected_tools"]["add"]) - {"ask_human"}  # ask_human: free, always added
    assert len(added) == 3 and added <= set(catalog.tools_in("weather"))
    assert merge_names(first, out["selected_tools"])[:4] == first


@pytest.mark.parametrize("mode", MODES)
async def test_select_tools_cap_evicts_least_recently_used_tools_of_earlier_turns(catalog, mode):
    first = ["ask_human", *catalog.tools_in("github")[:4]]  # ask_human: always visible
    state = {**turn_two(first, "weather in Paris"), "categories": ["weather"]}
    out = await run(SelectTools(catalog, max_tools=3, max_visible=5), state, mode)
    update = out["selected_tools"]
    result = merge_names(first, update)
    assert len(result) == 5
    assert "ask_human" in result  # pinned by its include mode / category, never evicted
    new = [n for n in result if n not in first]
    assert len(new) == 3 and set(new) <= set(catalog.tools_in("weather"))
    # the three oldest github tools went first, the most recently used one stayed
    assert update["remove"] == first[1:4]
    assert result[: len(first) - 3] == ["ask_human", first[4]]
    assert set(out["tool_last_used"]) >= set(new)


@pytest.mark.parametrize("mode", MODES)
async def test_select_tools_cap_keeps_tools_chosen_again_this_turn(catalog, mode):
    weather = catalog.tools_in("weather")
    first = [*catalog.tools_in("github")[:3], weather[0]]
    state = {**turn_two(first, "weather in Paris"), "categories": ["weather"]}
    out = await run(SelectTools(catalog, max_tools=3, max_visible=4), state, mode)
    result = merge_names(first, out["selected_tools"])
    assert weather[0] in result  # oldest by position, but relevant again: touched, not evicted
    assert len(result) == 4


@pytest.mark.parametrize("mode", MODES)
async def test_tool_search_cap_evicts_and_streams_the_removed_tools(catalog, mode):
    first = catalog.tools_in("github")[:4]
    state = {"messages": [HumanMessage("what is the weather in Paris")], "selected_tools": first}
    events: list[dict] = []
    g = StateGraph(ToolBudgetState)
    g.add_node("tool_search", ToolSearch(catalog, search_limit=2, max_visible=4))
    g.add_edge(START, "tool_search")
    g.add_edge("tool_search", END)
    app = g.compile()
    if mode == "sync":
        chunks = list(app.stream(state, stream_mode=["custom", "values"]))
    else:
        chunks = [c async for c in app.astream(state, stream_mode=["custom", "values"])]
    events = [c for kind, c in chunks if kind == "custom"]
    final = [c for kind, c in chunks if kind == "values"][-1]
    assert len(final["selected_tools"]) == 4
    assert set(final["selected_tools"][-2:]) <= set(catalog.tools_in("weather"))
    (event,) = events
    assert event["event"] == VISIBLE_SET_EVENT and event["removed"] == first[:2]


ISSUE_AND_SLACK = "Create a GitHub issue for the login bug and tell the team in Slack"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("max_visible", [6, 8])
async def test_tool_search_under_a_cap_fills_the_room_select_tools_left(mode, max_visible):
    """docs/selection.md's own numbers: the search completes the budget's choice. It used to
    evict all four budget picks (create_issue, send_message...) for weaker hits at 6, and
    create_issue at 8."""
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog

    catalog = build_example_catalog()
    options = {"max_tools": 4, "max_visible": max_visible}
    g = StateGraph(ToolBudgetState)
    g.add_node("classify_intent", ClassifyIntent(catalog, **options))
    g.add_node("select_tools", SelectTools(catalog, **options))
    g.add_node("tool_search", ToolSearch(catalog, **options))
    g.add_edge(START, "classify_intent")
    g.add_edge("classify_intent", "select_tools")
    g.add_edge("select_tools", "tool_search")
    g.add_edge("tool_search", END)
    app = g.compile()
    state = ask(ISSUE_AND_SLACK)
    picked = await visible(
        SelectTools(catalog, **options), {**state, **ClassifyIntent(catalog).invoke(state)}, mode
    )
    assert {"create_issue", "send_message"} <= set(picked) and len(picked) == 5
    out = app.invoke(state) if mode == "sync" else await app.ainvoke(state)
    assert out["selected_tools"][:5] == picked  # all of the budget's picks stay, in order
    hits = search_hits(catalog, ISSUE_AND_SLACK, exclude=picked, focus=out["categories"])
    assert out["selected_tools"][5:] == hits[: max_visible - 5]  # the best hits, while room is
    searched = [n for n, r in out["tool_reasons"].items() if r["why"] == "search"]
    assert searched == hits[: max_visible - 5]

    model = ScriptedChatModel(responses=[AIMessage("ok")])
    agent = create_toolbudget_agent(model, catalog, **options).compile()
    if mode == "sync":
        agent.invoke(ask(ISSUE_AND_SLACK))
    else:
        await agent.ainvoke(ask(ISSUE_AND_SLACK))
    assert set(picked) <= set(model.bound_tools[0])  # what the model is bound on its first call


@pytest.mark.parametrize("mode", MODES)
async def test_a_later_search_never_evicts_a_tool_select_tools_chose_again(mode):
    """weather_forecast came by the search in turn 1; turn 2's budget chooses it again, so an
    every-turn search under a full cap must not take its slot."""
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog

    catalog = build_example_catalog()
    state = {
        "messages": [
            HumanMessage("forecast please"),
            AIMessage("Which city?"),
            HumanMessage("the weather forecast, air quality and temperature in Lima this week"),
        ],
        "categories": ["weather"],
        "selected_tools": ["ask_human", "weather_forecast"],
        "tool_last_used": {"ask_human": 1, "weather_forecast": 2},
        "tool_reasons": {"ask_human": {"why": "always"}, "weather_forecast": {"why": "search"}},
    }
    select = SelectTools(catalog, max_tools=2, max_visible=4)
    chosen = await run(select, state, mode)
    state = {
        **state,
        "selected_tools": merge_names(state["selected_tools"], chosen["selected_tools"]),
        "tool_reasons": {**state["tool_reasons"], **chosen["tool_reasons"]},
    }
    assert state["tool_reasons"]["weather_forecast"]["why"] == "budget"  # this turn's reason
    assert len(state["selected_tools"]) == 3
    search = ToolSearch(catalog, max_visible=4, search_limit=3, every_turn=True)
    query = state["messages"][-1].content
    hits = search_hits(catalog, query, exclude=state["selected_tools"], focus=["weather"])
    assert len(hits) >= 2  # more hits than room
    out = await run(search, state, mode)
    assert out["selected_tools"] == {"add": hits[:1], "remove": []}  # the one slot left


def test_words_match_reads_the_tools_the_budget_may_choose_and_the_categories(make_catalog):
    """The evidence that a request has a topic, whatever similarity adds to its ranking."""
    catalog = make_catalog()
    assert words_match(catalog, "what is the weather in Paris")
    assert not words_match(catalog, "And in Lima?")
    assert not words_match(catalog, "thanks!")
    assert not words_match(catalog, "")
    two = ToolCatalog.from_tools(
        [
            _named_tool("get_forecast", "Weather forecast for a city."),
            _named_tool("drop_table", "Delete a database table."),
        ],
        tool_metadata={"drop_table": {"include": "manual"}},
    )
    assert words_match(two, "the forecast for Lima")
    assert not words_match(two, "drop that table")  # only a tool the budget may not choose
    described = ToolCatalog.from_tools(
        [_named_tool("get_forecast", "Weather forecast for a city.")],
        categories={"weather": ["get_forecast"]},
        category_descriptions={"weather": "Meteorology and climate."},
    )
    assert words_match(described, "some climate data")  # the category's description says it


def test_selection_nodes_reject_a_cap_below_one(catalog):
    with pytest.raises(ValueError, match="max_visible"):
        SelectTools(catalog, max_visible=0)
    with pytest.raises(ValueError, match="max_visible"):
        ToolSearch(catalog, max_visible=0)


# --- the automatic search stays on topic ----------------------------------------------------


@pytest.mark.parametrize(
    ("query", "off_topic"),
    [
        (  # "create" is shared by five categories: it said nothing about the topic
            "create a github issue for the login crash",
            {"create_project", "create_channel", "create_event", "write_file"},
        ),
        ("list open pull requests and post a summary to slack", {"list_events", "list_tasks"}),
        (  # "report" only resembles "repo": a close spelling is no evidence either
            "delete the old report file",
            {"close_issue", "create_issue", "comment_on_issue", "list_pull_requests"},
        ),
    ],
)
def test_the_automatic_search_needs_a_distinctive_term_outside_the_chosen_categories(
    query, off_topic
):
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog

    catalog = build_example_catalog()
    app = create_toolbudget_agent(ScriptedChatModel(responses=["ok"]), catalog).compile()
    out = app.invoke({"messages": [HumanMessage(query)]})
    searched = {n for n, r in out["tool_reasons"].items() if r["why"] == "search"}
    assert not searched & off_topic, (searched, out["categories"])
    assert not set(out["selected_tools"]) & off_topic


def test_a_distinctive_term_still_brings_a_tool_of_another_category():
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog

    catalog = build_example_catalog()
    query = "schedule a meeting with Ana on Friday and email her the agenda"
    assert "create" not in distinctive_terms(catalog, "create a meeting")
    assert "meet" in distinctive_terms(catalog, query)  # only the calendar's tools say it
    hits = search_hits(catalog, query, limit=5, focus=["email"])
    assert {"create_event", "find_free_slot"} <= set(hits)
    assert not {h for h in hits if "weather" in catalog.get(h).categories}


def test_in_a_request_of_several_clauses_another_category_must_lead_one_or_score_half(
    monkeypatch,
):
    from langgraph_toolbudget.core import selection
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog

    catalog = build_example_catalog()
    calendar = {"create_event", "find_free_slot", "list_events"}
    # "meeting" is distinctive (only the calendar says it). In one clause, that is enough:
    one = "read the unread email in my inbox from Ana, the one about the meeting"
    assert "meet" in distinctive_terms(catalog, one)
    assert "create_event" in search_hits(catalog, one, limit=5, focus=["email"])
    # In two, where each is most about an email tool, the word alone brings no calendar tool
    # that scores low over the whole request...
    two = f"{one}. Then search my email for the invoice she sent."
    assert {catalog.index.names[p] for p in catalog.index.clause_leaders(two)} == {
        "read_email",
        "search_email",
    }
    assert not calendar & set(search_hits(catalog, two, limit=5, focus=["email"]))
    # ... unless it scores OFF_FOCUS_MIN_SHARE of the best tool's score (create_event: 0.19).
    monkeypatch.setattr(selection, "OFF_FOCUS_MIN_SHARE", 0.15)
    assert "create_event" in search_hits(catalog, two, limit=5, focus=["email"])
    monkeypatch.undo()
    # A step the calendar leads brings it, although the calendar is not a chosen category.
    step = "Read the unread email from Ana. Then schedule a meeting with her on Friday."
    assert "calendar" not in [c for c, _ in classify_lexical(catalog, step)]
    assert {"create_event", "find_free_slot"} <= set(
        search_hits(catalog, step, limit=5, focus=["email"])
    )


def test_in_a_one_clause_request_a_distinctive_term_is_enough():
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog

    catalog = build_example_catalog()
    # One clause, two tasks: "save" brings write_file, though search_email leads the request.
    query = "Search my mail for the contract and save it to /docs/contract.txt"
    assert catalog.index.clause_leaders(query) is None
    assert "write_file" in search_hits(catalog, query, limit=5, focus=["email"])
