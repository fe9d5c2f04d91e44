"""Tool status lifecycle and runtime modes: what is listed, chosen and run in each mode.

``published`` tools run everywhere; ``deprecated`` ones run with a note on their results;
``draft`` ones run only with ``runtime_mode="debug"`` (in production they are listed nowhere
and a call is refused); ``disabled`` ones (or ``enabled=False``) are listed nowhere and never
run. Only the chat model is fake (``ScriptedChatModel``); the tools are real ``@tool``
functions that record their calls, and the graphs are real LangGraph graphs.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition

from langgraph_toolbudget import (
    BudgetConfig,
    CallModel,
    ClassifyIntent,
    SelectTools,
    ToolAgent,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    ToolSearch,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.meta import MetaToolHandler
from langgraph_toolbudget.core.selection import free_tools, search_hits, select_tools
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.execution.policy import DEPRECATED_NOTE
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
RUNTIME_MODES = ["production", "debug"]
NODES = ["executor", "agent"]

# tool -> how its status is given (tool_metadata of the catalog below)
STATUS_OF = {
    "get_weather": {},  # published by default
    "weather_radar": {"status": "deprecated"},
    "weather_beta": {"status": "draft"},
    "delete_forecast": {"status": "disabled"},
    "purge_forecasts": {"enabled": False},
}
RUNS = {  # tool -> the modes it runs in
    "get_weather": {"production", "debug"},
    "weather_radar": {"production", "debug"},
    "weather_beta": {"debug"},
    "delete_forecast": set(),
    "purge_forecasts": set(),
}


def make_tools(calls: list[str]) -> list[BaseTool]:
    """Fresh tools recording every execution in ``calls``."""

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        calls.append("get_weather")
        return f"sunny in {city}"

    @tool
    def weather_radar(city: str) -> str:
        """Weather radar image description for a city (old API)."""
        calls.append("weather_radar")
        return f"radar over {city}: clear"

    @tool
    def weather_beta(city: str) -> str:
        """Weather nowcast for a city, minute by minute (beta)."""
        calls.append("weather_beta")
        return f"nowcast for {city}: dry"

    @tool
    def delete_forecast(city: str) -> str:
        """Delete the stored weather forecast of a city."""
        calls.append("delete_forecast")
        return f"deleted {city}"

    @tool
    def purge_forecasts() -> str:
        """Purge every stored weather forecast."""
        calls.append("purge_forecasts")
        return "purged"

    @tool
    def lab_experiment(topic: str) -> str:
        """Run a laboratory experiment on a topic."""
        calls.append("lab_experiment")
        return f"experiment on {topic}"

    @tool
    def archive_report(name: str) -> str:
        """Archive a quarterly report."""
        calls.append("archive_report")
        return f"archived {name}"

    @tool
    def legacy_convert(amount: float) -> list[dict[str, str]]:
        """Convert currency with the legacy converter; fails on negative amounts."""
        calls.append("legacy_convert")
        if amount < 0:
            raise ValueError("negative amount")
        return [{"type": "text", "text": f"converted {amount}"}]

    return [
        get_weather,
        weather_radar,
        weather_beta,
        delete_forecast,
        purge_forecasts,
        lab_experiment,
        archive_report,
        legacy_convert,
    ]


CATEGORIES = {
    "weather": [
        "get_weather",
        "weather_radar",
        "weather_beta",
        "delete_forecast",
        "purge_forecasts",
    ],
    "lab": ["lab_experiment"],  # only a draft
    "archive": ["archive_report"],  # only a disabled tool
    "money": ["legacy_convert"],
}


def make_catalog(calls: list[str] | None = None, **changes: dict[str, Any]) -> ToolCatalog:
    metadata = {
        **STATUS_OF,
        "lab_experiment": {"status": "draft"},
        "archive_report": {"enabled": False},
        "legacy_convert": {"status": "deprecated"},
        **changes,
    }
    return ToolCatalog.from_tools(
        make_tools([] if calls is None else calls),
        categories=CATEGORIES,
        category_descriptions={"lab": "Laboratory experiments", "archive": "Report archive"},
        tool_metadata=metadata,
    )


def ask(*calls: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=list(calls))


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


async def run(runnable: Any, state: Any, api: str) -> Any:
    if api == "invoke":
        return await asyncio.to_thread(runnable.invoke, state)
    return await runnable.ainvoke(state)


def tool_messages(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def graph_with(node: str, model: ScriptedChatModel, catalog: ToolCatalog, mode: str) -> Any:
    """A real graph: CallModel <-> ToolExecutor, or one ToolAgent node."""
    graph = StateGraph(ToolBudgetState)
    if node == "executor":
        graph.add_node("agent", CallModel(model, catalog, runtime_mode=mode))
        graph.add_node("tools", ToolExecutor(catalog, runtime_mode=mode))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition)
        graph.add_edge("tools", "agent")
    else:
        graph.add_node("agent", ToolAgent(model, catalog, runtime_mode=mode))
        graph.add_edge(START, "agent")
    return graph.compile()


# --- each status in each runtime mode, through a real graph ---------------------------------


@pytest.mark.parametrize("node", NODES)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", RUNTIME_MODES)
@pytest.mark.parametrize("name", list(STATUS_OF))
async def test_status_decides_whether_a_call_runs_in_each_runtime_mode(name, mode, api, node):
    calls: list[str] = []
    catalog = make_catalog(calls)
    model = ScriptedChatModel(responses=[ask(call(name, "c1", city="Paris")), "done"])
    app = graph_with(node, model, catalog, mode)
    state = {"messages": [HumanMessage("weather in Paris")], "selected_tools": [name]}
    out = await run(app, state, api)
    [message] = tool_messages(out["messages"])
    assert out["messages"][-1].content == "done"
    if mode in RUNS[name]:
        assert calls == [name]
        assert message.status == "success"
        assert name in model.bound_tools[0]  # a runnable visible tool is bound
    else:
        assert calls == []  # refused at the check stage: never run
        assert message.status == "error"
        assert name not in model.bound_tools[0]  # nor bound to the model
        assert message.content.startswith(f"Error: {name!r}")
    if name == "weather_radar":
        assert message.content == f"radar over Paris: clear\n\n{DEPRECATED_NOTE.format(tool=name)}"
    elif name == "weather_beta" and mode == "production":
        assert "is a draft tool, which runs only in debug mode (runtime_mode='debug')" in (
            message.content
        )
        assert "this app runs in production mode, so it was not run" in message.content
        assert "publish the tool (metadata status='published')" in message.content
        assert "weather_beta" not in message.content.split("Closest tools:")[1].split(".")[0]
    elif name in ("delete_forecast", "purge_forecasts"):
        assert "is disabled and cannot be used" in message.content
    else:
        assert "Note:" not in message.content


@pytest.mark.parametrize("api", APIS)
async def test_draft_call_is_refused_in_production_even_when_the_state_shows_it(api):
    """A visible set carried over from a debug session does not make a draft runnable."""
    calls: list[str] = []
    node = ToolExecutor(make_catalog(calls))
    state = {
        "messages": [HumanMessage("nowcast"), ask(call("weather_beta", "c1", city="Oslo"))],
        "selected_tools": ["weather_beta"],
    }
    out = await run(node, state, api)
    assert calls == []
    assert out["messages"][0].status == "error"
    assert "runtime_mode='debug'" in out["messages"][0].content


@pytest.mark.parametrize("api", APIS)
async def test_hooks_see_the_draft_refusal_of_the_check_stage(api):
    seen: list[tuple[Any, str]] = []

    def hook(request: Any, execute: Any) -> Any:
        result = execute(request)
        seen.append((request.tool, result.content))
        return result

    calls: list[str] = []
    node = ToolExecutor(make_catalog(calls), wrap_tool_call=hook)
    state = {
        "messages": [HumanMessage("x"), ask(call("weather_beta", "c1", city="Oslo"))],
        "selected_tools": ["weather_beta"],
    }
    out = await run(node, state, api)
    assert calls == []
    [(tool_seen, content)] = seen
    assert tool_seen is None  # not a tool that runs in production
    assert "is a draft tool" in content and out["messages"][0].content == content


# --- the deprecation note --------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", RUNTIME_MODES)
async def test_deprecated_note_follows_content_blocks_and_failures(mode, api):
    calls: list[str] = []
    node = ToolExecutor(make_catalog(calls), runtime_mode=mode)
    state = {
        "messages": [
            HumanMessage("convert"),
            ask(call("legacy_convert", "ok", amount=5), call("legacy_convert", "bad", amount=-1)),
        ],
        "selected_tools": ["legacy_convert"],
    }
    out = await run(node, state, api)
    ok, bad = out["messages"]
    note = DEPRECATED_NOTE.format(tool="legacy_convert")
    assert ok.status == "success"
    assert ok.content == [
        {"type": "text", "text": "converted 5.0"},
        {"type": "text", "text": note},
    ]
    assert bad.status == "error"
    assert "negative amount" in bad.content and bad.content.endswith("\n\n" + note)
    assert calls == ["legacy_convert", "legacy_convert"]


def test_deprecated_note_says_what_to_do():
    note = DEPRECATED_NOTE.format(tool="weather_radar")
    assert note.startswith("Note: tool 'weather_radar' is deprecated")
    assert "search_tools" in note


@pytest.mark.parametrize("offloaded", [False, True])
def test_deprecated_note_points_to_search_tools_only_when_the_model_has_it(offloaded):
    """With search_tools turned off, the note asks for another tool without naming one the
    model does not have (the offloaded stub's note too)."""
    options: dict[str, Any] = {"enabled_builtins": {"deny": ["search_tools"]}}
    if offloaded:
        options["offload_over_chars"] = 5
    node = ToolExecutor(make_catalog([]), **options)
    state = {
        "messages": [HumanMessage("convert"), ask(call("legacy_convert", "ok", amount=5))],
        "selected_tools": ["legacy_convert"],
    }
    (message,) = node.invoke(state)["messages"]
    text = message.content if isinstance(message.content, str) else json.dumps(message.content)
    assert "'legacy_convert' is deprecated and may be removed; prefer another tool" in text
    assert "search_tools" not in text


def test_published_and_draft_results_carry_no_note():
    node = ToolExecutor(make_catalog(), runtime_mode="debug")
    state = {
        "messages": [
            HumanMessage("x"),
            ask(call("get_weather", "a", city="Rome"), call("weather_beta", "b", city="Rome")),
        ],
        "selected_tools": ["get_weather", "weather_beta"],
    }
    out = node.invoke(state)
    assert [m.content for m in out["messages"]] == ["sunny in Rome", "nowcast for Rome: dry"]


# --- what is listed, searched and selected in each mode ---------------------------------------

HIDDEN_EVERYWHERE = {"delete_forecast", "purge_forecasts", "archive_report"}
DRAFTS = {"weather_beta", "lab_experiment"}


def meta(catalog: ToolCatalog, name: str, args: Any, working: WorkingSet | None = None) -> Any:
    return MetaToolHandler(catalog).handle(name, args, working or WorkingSet())


@pytest.mark.parametrize("mode", RUNTIME_MODES)
def test_show_all_tools_lists_what_runs_in_the_mode(mode):
    catalog = make_catalog().in_runtime_mode(mode)
    listed = set(json.loads(meta(catalog, "show_all_tools", {}).content)["tools"])
    assert not listed & HIDDEN_EVERYWHERE
    assert {"get_weather", "weather_radar", "legacy_convert"} <= listed
    assert bool(DRAFTS & listed) == (mode == "debug")
    assert listed.issuperset(DRAFTS) == (mode == "debug")


@pytest.mark.parametrize("mode", RUNTIME_MODES)
@pytest.mark.parametrize(
    "query", ["forecast", "purge", "delete_.*", "archive", "nowcast", "experiment", "weather"]
)
def test_search_tools_finds_no_disabled_tool_and_drafts_only_in_debug(mode, query):
    catalog = make_catalog().in_runtime_mode(mode)
    found = {
        t["name"]
        for t in json.loads(meta(catalog, "search_tools", {"query": query}).content)["tools"]
    }
    assert not found & HIDDEN_EVERYWHERE
    if mode == "production":
        assert not found & DRAFTS
    if query in ("nowcast", "experiment"):
        assert bool(found & DRAFTS) == (mode == "debug")


@pytest.mark.parametrize("mode", RUNTIME_MODES)
def test_select_tools_and_search_hits_never_choose_disabled_tools(mode):
    catalog = make_catalog().in_runtime_mode(mode)
    chosen = select_tools(catalog, "weather forecast", ["weather", "lab", "archive"], max_tools=10)
    hits = search_hits(catalog, "delete purge archive forecast report nowcast", limit=10)
    for names in (chosen, hits):
        assert not set(names) & HIDDEN_EVERYWHERE
        assert bool(set(names) & DRAFTS) == (mode == "debug"), names
    assert "weather_radar" in chosen  # deprecated tools are still chosen


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", RUNTIME_MODES)
async def test_selection_nodes_follow_the_runtime_mode(mode, api):
    catalog = make_catalog()
    state = {
        "messages": [
            HumanMessage("weather nowcast minute by minute, lab experiment, archive report")
        ]
    }
    classified = await run(ClassifyIntent(catalog, runtime_mode=mode, max_categories=4), state, api)
    assert "archive" not in classified["category_scores"]  # only a disabled tool: never
    assert ("lab" in classified["category_scores"]) == (mode == "debug")
    select = SelectTools(catalog, runtime_mode=mode, strategy="categories")
    chosen = await run(select, {**state, "categories": ["weather", "lab", "archive"]}, api)
    searched = await run(ToolSearch(catalog, runtime_mode=mode, search_limit=10), state, api)
    for update in (chosen, searched):
        added = set(update["selected_tools"]["add"])
        assert added and not added & HIDDEN_EVERYWHERE
        assert bool(added & DRAFTS) == (mode == "debug"), added


@pytest.mark.parametrize("mode", RUNTIME_MODES)
def test_categories_and_prompt_list_only_what_the_mode_runs(mode):
    catalog = make_catalog()
    view = catalog.in_runtime_mode(mode)
    assert "archive" not in view.categories
    assert ("lab" in view.categories) == (mode == "debug")
    model = ScriptedChatModel(responses=["hi"])
    agent = CallModel(model, catalog, runtime_mode=mode)
    assert ("lab" in agent.caller.section) == (mode == "debug")
    if mode == "debug":
        assert view.category_descriptions["lab"] == "Laboratory experiments"


@pytest.mark.parametrize("mode", RUNTIME_MODES)
def test_add_tool_says_why_a_tool_is_not_added(mode):
    catalog = make_catalog().in_runtime_mode(mode)
    working = WorkingSet()
    outcome = meta(
        catalog, "add_tool", {"tool_names": ["weather_beta", "purge_forecasts"]}, working
    )
    assert "Not added (disabled): purge_forecasts." in outcome.content
    if mode == "production":
        assert outcome.added == [] and outcome.error
        assert "Not added (draft tools, which run only in debug mode (runtime_mode='debug')" in (
            outcome.content
        )
    else:
        assert outcome.added == ["weather_beta"]


def test_request_more_tools_loads_no_draft_in_production():
    catalog = make_catalog()
    outcome = meta(catalog, "request_more_tools", {"categories": ["weather", "lab"]})
    assert set(outcome.added) == {"get_weather", "weather_radar"}
    assert "Unknown categories: lab." in outcome.content
    debug = meta(catalog.in_runtime_mode("debug"), "request_more_tools", {"categories": ["lab"]})
    assert debug.added == ["lab_experiment"]


def test_an_always_draft_is_free_only_in_debug_and_a_pinned_draft_needs_debug():
    catalog = make_catalog(weather_beta={"status": "draft", "include": "always"})
    assert "weather_beta" not in free_tools(catalog)
    assert "weather_beta" in free_tools(catalog.in_runtime_mode("debug"))
    with pytest.raises(ValueError, match=r"runtime_mode='debug'"):
        SelectTools(catalog, pinned=["lab_experiment"])
    with pytest.raises(ValueError, match="run in production mode"):
        ToolExecutor(catalog, pinned=["purge_forecasts"])
    assert (
        "lab_experiment"
        in SelectTools(catalog, pinned=["lab_experiment"], runtime_mode="debug").free_tools
    )


# --- the prebuilt graph ---------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", RUNTIME_MODES)
async def test_prebuilt_agent_finds_and_runs_a_draft_only_in_debug(mode, api):
    calls: list[str] = []
    catalog = make_catalog(calls)
    model = ScriptedChatModel(
        responses=[ask(call("weather_beta", "c1", city="Oslo")), "done"], cycle=True
    )
    app = create_toolbudget_agent(model, catalog, runtime_mode=mode).compile()
    out = await run(app, {"messages": [HumanMessage("minute by minute nowcast")]}, api)
    assert ("weather_beta" in out["selected_tools"]) == (mode == "debug")
    assert calls == (["weather_beta"] if mode == "debug" else [])


# --- metadata: status, its synonym enabled, conflicts ---------------------------------------


def test_status_defaults_to_published_and_enabled_follows_status():
    catalog = make_catalog()
    expected = {
        "get_weather": ("published", True),
        "weather_radar": ("deprecated", True),
        "weather_beta": ("draft", True),
        "delete_forecast": ("disabled", False),
        "purge_forecasts": ("disabled", False),  # enabled=False is a synonym of disabled
    }
    for name, (status, enabled) in expected.items():
        spec = catalog.get(name)
        assert spec is not None and (spec.status, spec.enabled) == (status, enabled), name
        assert catalog.status(name) == status
    assert catalog.status("no_such_tool") is None


def test_runnable_per_mode():
    catalog = make_catalog()
    assert catalog.runtime_mode == "production"
    assert catalog.runnable("weather_radar") and not catalog.runnable("weather_beta")
    assert catalog.runnable("weather_beta", "debug")
    assert not catalog.runnable("purge_forecasts", "debug")
    assert "weather_beta" not in catalog and "weather_beta" in catalog.in_runtime_mode("debug")
    with pytest.raises(ValueError, match="runtime_mode must be 'production'"):
        catalog.runnable("get_weather", "staging")  # type: ignore[arg-type]


def test_in_runtime_mode_is_made_once_and_shares_derived_data_without_drafts():
    catalog = make_catalog()
    debug = catalog.in_runtime_mode("debug")
    assert (
        catalog.in_runtime_mode("debug") is debug
        and catalog.in_runtime_mode("production") is catalog
    )
    assert debug.in_runtime_mode("debug") is debug and debug.runtime_mode == "debug"
    assert debug.derived is not catalog.derived  # drafts listed: its own index
    plain = make_catalog(weather_beta={}, lab_experiment={})
    assert plain.in_runtime_mode("debug").derived is plain.derived  # same tools: shared
    with pytest.raises(ValueError, match="runtime_mode"):
        catalog.in_runtime_mode("prod")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "where",
    ["tool_metadata", "server_defaults", "own", "with_metadata"],
)
@pytest.mark.parametrize(
    "meta_dict", [{"enabled": False, "status": "draft"}, {"enabled": True, "status": "disabled"}]
)
def test_conflicting_enabled_and_status_raise_naming_the_tool(where, meta_dict):
    tools = make_tools([])
    get_weather = tools[0]
    if where == "tool_metadata":
        build = lambda: ToolCatalog.from_tools(tools, tool_metadata={"get_weather": meta_dict})  # noqa: E731
    elif where == "server_defaults":
        get_weather.metadata = {"server": "wx"}
        build = lambda: ToolCatalog.from_tools(tools, server_defaults={"wx": meta_dict})  # noqa: E731
    elif where == "own":
        get_weather.metadata = dict(meta_dict)
        build = lambda: ToolCatalog.from_tools(tools)  # noqa: E731
    else:
        catalog = ToolCatalog.from_tools(tools)
        build = lambda: catalog.with_metadata(get_weather=meta_dict)  # noqa: E731
    with pytest.raises(ValueError) as info:
        build()
    message = str(info.value)
    assert message.startswith("tool 'get_weather':")
    assert "enabled=" in message and "status=" in message and "disagree" in message


def test_agreeing_enabled_and_status_are_accepted():
    catalog = make_catalog(
        get_weather={"enabled": True, "status": "deprecated"},
        delete_forecast={"enabled": False, "status": "disabled"},
    )
    assert catalog.status("get_weather") == "deprecated"
    assert catalog.status("delete_forecast") == "disabled"


def test_later_metadata_layers_override_status_whichever_key_they_use():
    tools = make_tools([])
    for t in tools:
        t.metadata = {"server": "wx"}
    tools[1].metadata = {"server": "wx", "status": "published"}  # own metadata over the server's
    catalog = ToolCatalog.from_tools(
        tools,
        server_defaults={"wx": {"enabled": False}},
        tool_metadata={"weather_beta": {"status": "draft"}, "lab_experiment": {"enabled": True}},
    )
    assert catalog.status("get_weather") == "disabled"  # the server's default
    assert catalog.status("weather_radar") == "published"
    assert catalog.status("weather_beta") == "draft"
    assert catalog.status("lab_experiment") == "published"  # enabled=True undoes disabled


@pytest.mark.parametrize(
    "value, error, match",
    [
        (
            "active",
            ValueError,
            r"must be one of \('draft', 'published', 'deprecated', 'disabled'\)",
        ),
        (True, TypeError, "must be str"),
    ],
)
def test_unknown_status_value_raises(value, error, match):
    with pytest.raises(error, match=match):
        make_catalog(get_weather={"status": value})


def test_with_metadata_changes_status():
    catalog = make_catalog()
    drafted = catalog.with_metadata(get_weather={"status": "draft"})
    assert "get_weather" not in drafted and drafted.runnable("get_weather", "debug")
    assert drafted.with_metadata(get_weather={"status": "deprecated"}).status("get_weather") == (
        "deprecated"
    )
    off = catalog.with_metadata(get_weather={"status": "disabled"})
    assert off.is_disabled("get_weather") and "get_weather" not in off.in_runtime_mode("debug")
    back = off.with_metadata(get_weather={"enabled": True})
    assert back.status("get_weather") == "published" and "get_weather" in back
    published = catalog.with_metadata(weather_beta={"status": "published"})
    assert "weather_beta" in published and published.status("weather_beta") == "published"
    assert catalog.status("get_weather") == "published"  # the original is unchanged
    debug = catalog.in_runtime_mode("debug").with_metadata(get_weather={"status": "draft"})
    assert debug.runtime_mode == "debug" and "get_weather" in debug  # the copy keeps its mode


# --- BudgetConfig.runtime_mode ----------------------------------------------------------------


def test_budget_config_runtime_mode_defaults_to_production_and_is_validated():
    assert BudgetConfig().runtime_mode == "production"
    assert BudgetConfig(runtime_mode="debug").runtime_mode == "debug"
    assert BudgetConfig().override(runtime_mode="debug").runtime_mode == "debug"
    assert BudgetConfig(runtime_mode="debug").mode == "parallel_safe"  # the execution mode stays
    with pytest.raises(ValueError, match=r"BudgetConfig: option runtime_mode must be 'production'"):
        BudgetConfig(runtime_mode="prod")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="runtime_mode"):
        BudgetConfig(runtime_mode=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="runtime_mode"):
        ToolExecutor(make_catalog(), runtime_mode="staging")  # type: ignore[arg-type]


def test_nodes_take_runtime_mode_from_the_config_or_their_keyword():
    catalog = make_catalog()
    config = BudgetConfig(runtime_mode="debug")
    assert ToolExecutor(catalog, config=config).runner.catalog.runtime_mode == "debug"
    assert SelectTools(catalog, config=config).catalog.runtime_mode == "debug"
    node = ToolSearch(catalog, config=config, runtime_mode="production")
    assert node.config.runtime_mode == "production" and node.catalog is catalog
