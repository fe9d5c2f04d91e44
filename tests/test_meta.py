"""Meta-tools: definitions, and what each answer says and does to the visible set."""

from __future__ import annotations

import json

import pytest
from agent_tools import CATEGORIES, recording_catalog, recording_fixtures
from langchain_core.messages import AIMessage, HumanMessage

from langgraph_toolbudget import ToolExecutor
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.limits import MAX_ECHO_ITEMS
from langgraph_toolbudget.core.meta import (
    META_TOOL_NAMES,
    MetaToolHandler,
    closest_tools,
    meta_tool_definitions,
)
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.demo.example_catalog import build_example_catalog

rec, catalog = recording_fixtures()


@pytest.fixture
def handler(catalog) -> MetaToolHandler:
    return MetaToolHandler(catalog, max_tools=8)


def visible(*names: str, cap: int | None = None, pinned=()) -> WorkingSet:
    return WorkingSet(list(names), pinned=frozenset(pinned), cap=cap)


# --- definitions ----------------------------------------------------------------------------


def test_definitions_come_in_binding_order_with_seed_schemas():
    tools = meta_tool_definitions(["b", "a"])
    assert [t.name for t in tools] == list(META_TOOL_NAMES)
    args = {t.name: t.tool_call_schema.model_json_schema() for t in tools}
    assert args["request_more_tools"]["required"] == ["categories"]
    assert set(args["request_more_tools"]["properties"]) == {"categories", "reason"}
    assert args["search_tools"]["required"] == ["query"]
    assert args["add_tool"]["properties"]["tool_names"]["type"] == "array"
    assert args["show_all_tools"].get("properties", {}) == {}


def test_request_more_tools_description_lists_categories_sorted(catalog):
    (request, *_) = meta_tool_definitions(catalog.categories)
    assert catalog.categories != sorted(catalog.categories)  # the test would be moot otherwise
    listed = request.description.split("Available categories: ")[1].rstrip(".")
    assert listed.split(", ") == sorted(catalog.categories)


def test_meta_tool_bodies_refuse_to_run():
    for t in meta_tool_definitions(["a"]):
        with pytest.raises(RuntimeError, match="intercepted"):
            t.invoke({"query": "x", "categories": ["a"], "tool_names": ["a"]})


def test_handler_rejects_a_name_that_is_not_a_meta_tool(handler):
    with pytest.raises(ValueError, match="not a meta-tool"):
        handler.handle("get_weather", {}, visible())


# --- request_more_tools ---------------------------------------------------------------------


def test_request_more_tools_loads_a_category(handler, rec):
    ws = visible("create_project")
    out = handler.handle("request_more_tools", {"categories": ["github"]}, ws, "open an issue")
    assert out.content.startswith("Loaded 3 tools: ")
    assert set(out.added) == {"create_issue", "list_issues", "merge_pull_request"}
    for name in out.added:
        assert name in out.content
    assert ws.names == ["create_project", *out.added]
    assert not out.error
    assert rec.runs == []  # loading runs nothing


def test_request_more_tools_ranks_by_the_user_query_within_the_budget(catalog):
    handler = MetaToolHandler(catalog, max_tools=1)
    out = handler.handle(
        "request_more_tools", {"categories": ["github"]}, visible(), "merge the PR"
    )
    assert out.added == ["merge_pull_request"]


def test_request_more_tools_unknown_category_adds_nothing_and_lists_categories(handler, catalog):
    ws = visible("create_project")
    out = handler.handle("request_more_tools", {"categories": ["astrology"]}, ws)
    assert out.content.startswith("No new tools added")
    assert "Unknown categories: astrology" in out.content
    assert ", ".join(sorted(catalog.categories)) in out.content
    assert out.added == [] and ws.names == ["create_project"]


def test_request_more_tools_already_loaded_category_adds_nothing(handler):
    ws = visible("get_weather", "weather_forecast")
    out = handler.handle("request_more_tools", {"categories": ["weather"]}, ws)
    assert out.content.startswith("No new tools added")
    assert ws.names == ["get_weather", "weather_forecast"]


def test_request_more_tools_deduplicates_categories_and_tools(handler):
    ws = visible("get_weather")
    out = handler.handle(
        "request_more_tools", {"categories": ["weather", "weather", "github"]}, ws, ""
    )
    assert len(out.added) == len(set(out.added))
    assert "get_weather" not in out.added
    assert "weather_forecast" in out.added and "create_issue" in out.added
    assert len(ws.names) == len(set(ws.names))


def test_request_more_tools_never_loads_filtered_or_disabled_tools(handler):
    ws = visible()
    handler.handle("request_more_tools", {"categories": ["admin", "database"]}, ws)
    assert ws.names == []


@pytest.mark.parametrize("categories", ["github", '["github"]'])
def test_request_more_tools_forgives_a_string_category(handler, categories):
    out = handler.handle("request_more_tools", {"categories": categories}, visible())
    assert "create_issue" in out.added


def test_request_more_tools_with_bad_arguments_answers_an_error(handler):
    out = handler.handle("request_more_tools", {"categories": 7}, visible())
    assert out.error
    assert "expects" in out.content and "categories" in out.content


def test_request_more_tools_under_a_cap_reports_what_was_unloaded(catalog):
    handler = MetaToolHandler(catalog, max_tools=8)
    ws = visible("ask_human", "create_project", "list_projects", cap=4, pinned=["ask_human"])
    ws.touch("list_projects")
    out = handler.handle("request_more_tools", {"categories": ["github"]}, ws)
    assert out.evicted == ["create_project", "list_projects"]
    assert "unloaded: create_project, list_projects" in out.content
    assert "ask_human" in ws and len(ws.names) == 4


# --- search_tools ---------------------------------------------------------------------------


def test_search_tools_answers_found_tools_and_message(handler):
    ws = visible()
    out = handler.handle("search_tools", {"query": "weather"}, ws)
    body = json.loads(out.content)
    assert set(body) == {"found", "tools", "message"}
    names = [t["name"] for t in body["tools"]]
    assert {"get_weather", "weather_forecast"} <= set(names)
    assert body["found"] == len(body["tools"])
    for entry in body["tools"]:
        assert set(entry) == {"name", "description"}
        assert entry["description"]
    assert "add_tool" in body["message"]
    assert out.discovered == names
    assert ws.names == []  # found tools are not visible yet
    assert out.added == []


def test_search_tools_regex_alternation(handler):
    body = json.loads(
        handler.handle("search_tools", {"query": "issue|forecast"}, visible()).content
    )
    assert {t["name"] for t in body["tools"]} == {"create_issue", "list_issues", "weather_forecast"}


def test_search_tools_bad_regex_answers_an_error(handler):
    out = handler.handle("search_tools", {"query": "create_(issue"}, visible())
    body = json.loads(out.content)
    assert set(body) == {"error"}
    assert "create_(issue" in body["error"]
    assert out.error


def test_search_tools_fuzzy_fallback_finds_a_misspelled_tool(handler):
    body = json.loads(handler.handle("search_tools", {"query": "wether"}, visible()).content)
    assert body["found"] >= 1
    assert "get_weather" in [t["name"] for t in body["tools"]]
    assert body["found"] <= 5


def test_search_tools_no_match_answers_found_zero(handler):
    body = json.loads(handler.handle("search_tools", {"query": "zzqxv"}, visible()).content)
    assert body == {"found": 0, "tools": [], "message": body["message"]}
    assert body["message"]


def test_search_tools_never_finds_filtered_or_disabled_tools(handler):
    for query in ["shutdown", "admin", "purge", "database"]:
        body = json.loads(handler.handle("search_tools", {"query": query}, visible()).content)
        names = {t["name"] for t in body["tools"]}
        assert not names & {"admin_shutdown", "purge_database"}, query


def test_search_tools_accepts_a_differently_named_argument(handler):
    body = json.loads(handler.handle("search_tools", {"pattern": "forecast"}, visible()).content)
    assert [t["name"] for t in body["tools"]] == ["weather_forecast"]


def test_search_tools_without_a_query_answers_an_error(handler):
    out = handler.handle("search_tools", {"query": 3, "other": 1}, visible())
    assert out.error and "query" in out.content


# --- add_tool -------------------------------------------------------------------------------


def test_add_tool_makes_named_tools_visible(handler):
    ws = visible("get_weather")
    out = handler.handle("add_tool", {"tool_names": ["create_issue", "list_issues"]}, ws)
    assert out.added == ["create_issue", "list_issues"]
    assert ws.names == ["get_weather", "create_issue", "list_issues"]
    assert out.content.startswith("Added 2 tools: create_issue, list_issues.")
    assert not out.error


def test_add_tool_reports_unknown_names_and_adds_nothing_for_them(handler):
    ws = visible()
    out = handler.handle("add_tool", {"tool_names": ["teleport"]}, ws)
    assert out.added == [] and ws.names == []
    assert "teleport" in out.content and "not tools of this app" in out.content
    assert out.error


def test_add_tool_reports_filtered_and_disabled_names(handler):
    ws = visible()
    out = handler.handle(
        "add_tool", {"tool_names": ["admin_shutdown", "purge_database", "get_weather"]}, ws
    )
    assert ws.names == ["get_weather"]
    assert "Not added (filtered out by this app's configuration" in out.content
    assert "admin_shutdown" in out.content
    assert "Not added (disabled): purge_database" in out.content
    assert not out.error  # something was added


@pytest.mark.parametrize("typo", ["get_wether", "Get_Weather", "getweather"])
def test_add_tool_of_a_misspelled_name_names_the_closest_tools(handler, catalog, typo):
    out = handler.handle("add_tool", {"tool_names": [typo]}, visible())
    assert out.error and out.added == []
    hint = out.content.split(f"Closest tools to {typo!r}: ")[1]
    assert hint.split(", ")[0] == "get_weather"
    assert hint.rstrip(".").split(", ") == closest_tools(catalog, typo)  # the direct call's rule


def test_add_tool_names_the_closest_tools_for_filtered_disabled_and_draft_names(rec):
    catalog = recording_catalog(rec, tool_metadata={"search_docs": {"status": "draft"}})
    handler = MetaToolHandler(catalog)
    names = ["admin_shutdown", "purge_database", "search_docs"]
    out = handler.handle("add_tool", {"tool_names": names}, visible())
    for name in names:
        hint = out.content.split(f"Closest tools to {name!r}: ")[1].split(".")[0].split(", ")
        assert hint and set(hint) <= set(catalog.tool_names)
        assert not set(hint) & set(names)  # never a tool that could not be added either


def test_add_tool_hints_never_name_a_tool_the_thread_excluded(handler):
    context = SessionContext(tools={"get_weather": "exclude"})
    names = ["get_wether", "get_weather"]
    out = handler.handle("add_tool", {"tool_names": names}, visible(), context=context)
    hint = out.content.split("Closest tools to 'get_wether': ")[1].split(".")[0].split(", ")
    assert hint and "get_weather" not in hint
    assert "Closest tools to 'get_weather'" not in out.content  # excluded: says so, no hint


def test_add_tool_names_no_tool_when_the_thread_excluded_every_one(handler):
    context = SessionContext(servers={"app": "exclude"})  # every listed tool's server
    out = handler.handle("add_tool", {"tool_names": ["get_wether"]}, visible(), context=context)
    assert "Not added (not tools of this app" in out.content
    assert "Closest tools" not in out.content


def test_add_tool_hints_are_bounded_to_the_first_names(handler):
    names = [f"ghost_tool_{i}" for i in range(MAX_ECHO_ITEMS + 30)]
    out = handler.handle("add_tool", {"tool_names": names}, visible())
    assert out.content.count("Closest tools to ") == MAX_ECHO_ITEMS


def test_closest_tools_leave_out_hidden_tools_and_still_fill_the_limit(catalog):
    everything = closest_tools(catalog, "get_wether", limit=3)
    assert everything[0] == "get_weather"
    hidden = closest_tools(catalog, "get_wether", hidden={"get_weather"}, limit=3)
    assert "get_weather" not in hidden
    assert set(everything) - {"get_weather"} <= set(hidden)  # no other tool pushed out
    assert closest_tools(catalog, "x", hidden=catalog.tool_names) == []


def test_add_tool_already_visible(handler):
    ws = visible("get_weather")
    out = handler.handle("add_tool", {"tool_names": ["get_weather"]}, ws)
    assert out.content == "Already available: get_weather."
    assert ws.names == ["get_weather"]


def test_add_tool_accepts_a_json_list_string(handler):
    ws = visible()
    handler.handle("add_tool", {"tool_names": '["get_weather", "create_issue"]'}, ws)
    assert ws.names == ["get_weather", "create_issue"]


def test_add_tool_with_bad_arguments_answers_an_error(handler):
    out = handler.handle("add_tool", {"tool_names": [1, 2]}, visible())
    assert out.error and "tool_names" in out.content


def test_add_tool_can_load_a_manual_tool(rec):
    catalog = recording_catalog(rec, tool_metadata={"tag_items": {"include": "manual"}})
    handler = MetaToolHandler(catalog)
    ws = visible()
    handler.handle("request_more_tools", {"categories": ["docs"]}, ws)
    assert "tag_items" not in ws  # never chosen automatically
    handler.handle("add_tool", {"tool_names": ["tag_items"]}, ws)
    assert "tag_items" in ws


def test_add_tool_under_a_cap_evicts_and_says_so(handler):
    ws = visible("get_weather", "weather_forecast", cap=2)
    ws.touch("weather_forecast")
    out = handler.handle("add_tool", {"tool_names": ["create_issue"]}, ws)
    assert out.evicted == ["get_weather"]
    assert "unloaded: get_weather" in out.content
    assert ws.names == ["weather_forecast", "create_issue"]


def test_add_tool_when_the_cap_is_full_of_pinned_tools(handler):
    ws = visible("ask_human", cap=1, pinned=["ask_human"])
    out = handler.handle("add_tool", {"tool_names": ["get_weather"]}, ws)
    assert ws.names == ["ask_human"]
    assert "at most 1 tools can be visible at once here" in out.content
    assert (
        "each of them is always visible" in out.content and "use the tools you have" in out.content
    )
    assert out.error


def test_add_tool_of_more_tools_than_the_cap_says_why_and_what_to_do(handler):
    # It said "the working set is full of pinned tools" with nothing pinned: the room had
    # gone to the tools the same call added.
    ws = visible("get_weather", cap=3)
    names = ["create_issue", "list_issues", "create_project", "fetch_page"]
    out = handler.handle("add_tool", {"tool_names": names}, ws)
    assert out.added == names[:3] and out.evicted == ["get_weather"]
    assert "pinned" not in out.content and "(not added:" not in out.content
    assert "Not added (no room: at most 3 tools can be visible at once here" in out.content
    assert "add fewer tools at a time): fetch_page." in out.content
    assert "Closest tools" not in out.content  # the tool exists: no other name to suggest


def test_request_more_tools_with_no_room_says_so(handler):
    # It answered "No new tools added.", as if the categories had nothing more.
    ws = visible("ask_human", cap=1, pinned=["ask_human"])
    out = handler.handle("request_more_tools", {"categories": ["weather"]}, ws)
    assert ws.names == ["ask_human"] and out.error
    assert out.content.startswith("No tools loaded (no room: at most 1 tools can be visible")


# --- show_all_tools -------------------------------------------------------------------------


def test_show_all_tools_lists_names_only(handler, catalog):
    body = json.loads(handler.handle("show_all_tools", {}, visible()).content)
    assert set(body) == {"total", "tools"}
    assert body["tools"] == sorted(catalog.tool_names)
    assert body["total"] == len(catalog) == len(body["tools"])
    assert all(isinstance(n, str) for n in body["tools"])
    assert "admin_shutdown" not in body["tools"]
    assert "purge_database" not in body["tools"]


def test_request_more_tools_under_a_cap_below_its_picks_keeps_each_categorys_best():
    """With max_visible=5 and a budget of 8, asking for GitHub and Slack loaded 4 GitHub tools
    and no Slack one: the picks came category by category and the cap cut the last."""
    catalog = build_example_catalog()
    node = ToolExecutor(catalog, max_tools=8, max_visible=5)
    args = {"categories": ["github", "slack"], "reason": "issues and messages"}
    call = {"name": "request_more_tools", "args": args, "id": "r1"}
    messages = [HumanMessage("open an issue and tell the team"), AIMessage("", tool_calls=[call])]
    out = node.invoke({"messages": messages, "selected_tools": []})
    visible = out["selected_tools"]["add"]
    assert len(visible) <= 5
    loaded = [n for n in visible if n != "ask_human"]
    assert len(loaded) == 4
    assert {*loaded} & {*catalog.tools_in("github")} and {*loaded} & {*catalog.tools_in("slack")}


def test_request_more_tools_takes_a_small_budget_in_turn_across_the_categories(catalog):
    # With a budget of 2 and three categories the first category took both places and the
    # answer said nothing of the other two: the model believed them loaded.
    handler = MetaToolHandler(catalog, max_tools=2)
    ws = visible()
    out = handler.handle("request_more_tools", {"categories": ["github", "weather", "docs"]}, ws)
    github, weather = set(CATEGORIES["github"]), set(CATEGORIES["weather"])
    assert len(out.added) == 2
    assert {*out.added} & github and {*out.added} & weather
    assert "Nothing was loaded from docs: one call loads at most 2 tools here." in out.content
    # a budget that covers every category's share loads as before, and says nothing more
    wide = MetaToolHandler(catalog, max_tools=8).handle(
        "request_more_tools", {"categories": ["github", "weather"]}, visible()
    )
    assert len(wide.added) == 5 and "Nothing was loaded" not in wide.content


@pytest.mark.parametrize("spelled", ["Weather", "WEATHER", " weather "])
def test_request_more_tools_takes_a_category_spelled_in_another_case(handler, spelled):
    out = handler.handle("request_more_tools", {"categories": [spelled]}, visible())
    assert set(out.added) == set(CATEGORIES["weather"]) and not out.error


def test_request_more_tools_of_unknown_categories_only_is_an_error(handler):
    # It answered "No new tools added." with status success.
    out = handler.handle("request_more_tools", {"categories": ["forecasts"]}, visible())
    assert out.error and not out.added
    assert "Unknown categories: forecasts. Available categories:" in out.content


@pytest.mark.parametrize("reason", ["I need list_issues.", "list_issues...", "'list_issues'"])
def test_a_reason_naming_a_manual_tool_in_a_sentence_loads_it(make_catalog, reason):
    # A `manual` tool loads only by its exact name: the word "list_issues." kept its period.
    catalog = make_catalog(tool_metadata={"list_issues": {"include": "manual"}})
    handler = MetaToolHandler(catalog, max_tools=1)
    args = {"categories": ["github"], "reason": reason}
    assert handler.handle("request_more_tools", args, visible()).added == ["list_issues"]


def test_request_more_tools_names_the_left_out_categories_with_no_floor_and_none_at_zero(catalog):
    asked = {"categories": ["github", "weather", "docs"]}
    no_floor = MetaToolHandler(catalog, max_tools=2, min_per_category=0)
    out = no_floor.handle("request_more_tools", asked, visible())
    assert len(out.added) == 2 and "Nothing was loaded from docs" in out.content
    # a budget of 0 loads nothing by design: no advice to request them on their own
    zero = MetaToolHandler(catalog, max_tools=0).handle("request_more_tools", asked, visible())
    assert not zero.added and "Nothing was loaded from" not in zero.content
    # nor when the reason names a tool, which loads even so
    named = {**asked, "reason": "create_issue"}
    out = MetaToolHandler(catalog, max_tools=0).handle("request_more_tools", named, visible())
    assert out.added == ["create_issue"] and "Nothing was loaded from" not in out.content
