"""The execution core and the ToolExecutor node: ordering, enforcement, errors, timeouts,
concurrency, coercion, injection and Commands, under invoke and ainvoke."""

from __future__ import annotations

import asyncio
import json
import operator
import threading
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from agent_tools import (
    ConcurrencyProbe,
    NotesState,
    ai_calls,
    call,
    injection_tools,
    needs_aliased_fields,
    probe_tool,
    recording_catalog,
    recording_fixtures,
    recording_tools,
    tool_messages,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool, tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.prebuilt.tool_node import ToolInvocationError
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from langgraph_toolbudget import ToolBudgetState, ToolCatalog, ToolExecutor
from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.coercion import tool_json_schema
from langgraph_toolbudget.core.meta import closest_tools
from langgraph_toolbudget.execution.batch import BatchRunner
from langgraph_toolbudget.execution.errors import TOOLNODE_DEFAULT
from langgraph_toolbudget.testing import ScriptedChatModel

MODES = ["sequential", "parallel_safe"]
APIS = ["invoke", "ainvoke"]


rec, catalog = recording_fixtures()


def state_for(calls: list[dict[str, Any]], visible: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "messages": [HumanMessage("please help"), ai_calls(*calls)],
        "selected_tools": list(visible),
        **extra,
    }


async def run_node(node: Any, state: dict[str, Any], api: str) -> Any:
    if api == "invoke":
        return await asyncio.to_thread(node.invoke, state)
    return await node.ainvoke(state)


# --- one message per call, in call order ----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", APIS)
async def test_every_call_gets_exactly_one_message_in_call_order(catalog, rec, mode, api):
    calls = [
        call("get_weather", "c1", city="Paris"),
        call("ghost_tool", "c2"),
        call("explode", "c3", reason="test"),
        call("create_issue", "c4", repo="acme/app", title="Crash"),
        call("merge_pull_request", "c5", repo="acme/app", number=1),  # not visible
        call("weather_forecast", "c6", city="Lima", days=2),
    ]
    visible = ["get_weather", "explode", "create_issue", "weather_forecast"]
    out = await run_node(ToolExecutor(catalog, mode=mode), state_for(calls, visible), api)
    messages = out["messages"]
    assert [m.tool_call_id for m in messages] == ["c1", "c2", "c3", "c4", "c5", "c6"]
    assert all(isinstance(m, ToolMessage) for m in messages)
    assert [m.status for m in messages] == [
        "success",
        "error",
        "error",
        "success",
        "error",
        "success",
    ]
    assert [m.name for m in messages] == [c["name"] for c in calls]
    assert rec.names == ["get_weather", "explode", "create_issue", "weather_forecast"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", APIS)
async def test_meta_call_mixed_with_regular_calls_keeps_call_order(catalog, rec, mode, api):
    calls = [
        call("get_weather", "r1", city="Paris"),
        call("request_more_tools", "m1", categories=["github"], reason="need issues"),
        call("create_issue", "r2", repo="acme/app", title="Bug"),
        call("search_tools", "m2", query="forecast"),
    ]
    node = ToolExecutor(catalog, mode=mode)
    out = await run_node(node, state_for(calls, ["get_weather", "ask_human"]), api)
    messages = out["messages"]
    assert [m.tool_call_id for m in messages] == ["r1", "m1", "r2", "m2"]
    assert messages[1].content.startswith("Loaded 3 tools: ")
    # meta-calls are answered first, so a tool loaded in this batch may already run
    assert messages[2].status == "success"
    assert messages[2].content == "issue 'Bug' opened in acme/app"
    assert rec.names == ["get_weather", "create_issue"]
    assert set(out["selected_tools"]["add"]) == {
        "create_issue",
        "list_issues",
        "merge_pull_request",
    }
    assert out["discovered_tools"] == {"remove": [], "add": ["weather_forecast"]}


async def test_meta_tools_are_never_executed_as_tools(catalog):
    calls = [call(n, f"m{i}", query="x") for i, n in enumerate(["search_tools", "show_all_tools"])]
    out = await ToolExecutor(catalog).ainvoke(state_for(calls, []))
    assert all("intercepted" not in m.content for m in out["messages"])
    assert json.loads(out["messages"][1].content)["total"] == len(catalog)


# --- enforcement ----------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_hidden_tool_is_not_run_and_the_error_says_how_to_load_it(catalog, rec, api):
    calls = [call("create_issue", "c1", repo="acme/app", title="Bug")]
    out = await run_node(ToolExecutor(catalog), state_for(calls, ["get_weather"]), api)
    (message,) = out["messages"]
    assert rec.runs == []
    assert message.status == "error"
    assert "'create_issue' exists but is not loaded" in message.content
    assert "add_tool(tool_names=['create_issue'])" in message.content


@pytest.mark.parametrize(
    ("name", "problem", "closest"),
    [
        ("create_isue", "is not a tool of this app", "create_issue"),
        ("get_wether", "is not a tool of this app", "get_weather"),
        ("admin_shutdown", "is filtered out", None),
        ("purge_database", "is disabled", None),
    ],
)
@pytest.mark.parametrize("api", APIS)
async def test_unknown_filtered_or_disabled_tool_is_not_run(
    catalog, rec, name, problem, closest, api
):
    calls = [call(name, "c1", reason="x", confirm=True)]
    everything = [*catalog.tool_names, "admin_shutdown", "purge_database"]
    out = await run_node(ToolExecutor(catalog), state_for(calls, everything), api)
    (message,) = out["messages"]
    assert rec.runs == []
    assert message.status == "error"
    assert problem in message.content
    assert "Closest tools: " in message.content
    if closest:
        assert closest in message.content.split("Closest tools: ")[1].split(".")[0]
    for how in ("add_tool", "search_tools", "request_more_tools"):
        assert how in message.content
    assert "admin_shutdown" not in message.content.split("Closest tools: ")[1]


def test_closest_tools_never_suggest_filtered_or_disabled_tools(catalog):
    for name in ["admin_shutdown", "purge_database", "shutdown", "purge"]:
        suggestions = closest_tools(catalog, name)
        assert not set(suggestions) & {"admin_shutdown", "purge_database"}
        assert set(suggestions) <= set(catalog.tool_names)


@pytest.mark.parametrize("api", APIS)
async def test_a_refusal_names_no_tool_the_thread_excluded(catalog, rec, api):
    calls = [call("get_wether", "c1", city="Rome"), call("weather_forecast", "c2", city="Rome")]
    excluded = {"context_tools": {"get_weather": "exclude"}}
    out = await run_node(ToolExecutor(catalog), state_for(calls, [], **excluded), api)
    closest = out["messages"][0].content.split("Closest tools: ")[1].split(".")[0].split(", ")
    assert "weather_forecast" in closest and "get_weather" not in closest
    assert rec.runs == []


@pytest.mark.parametrize("api", APIS)
async def test_a_toolnode_style_refusal_lists_no_tool_the_thread_excluded(rec, api):
    tools = [t for t in recording_tools(rec) if t.name in ("get_weather", "weather_forecast")]
    node = ToolExecutor.from_tools(tools)
    state = state_for([call("get_wether", "c1", city="Rome")], [])
    (message,) = (await run_node(node, state, api))["messages"]
    assert "get_weather, weather_forecast" in message.content  # ToolNode's wording
    state["context_tools"] = {"get_weather": "exclude"}
    (message,) = (await run_node(node, state, api))["messages"]
    assert "weather_forecast" in message.content and "get_weather," not in message.content
    assert "'get_weather'" not in message.content and rec.runs == []


async def test_enforcement_can_be_relaxed_for_loaded_but_invisible_tools(catalog, rec):
    calls = [call("create_issue", "c1", repo="r", title="t"), call("ghost", "c2")]
    node = ToolExecutor(catalog, enforce_visibility=False)
    out = await node.ainvoke(state_for(calls, []))
    assert [m.status for m in out["messages"]] == ["success", "error"]
    assert rec.names == ["create_issue"]


async def test_pinned_and_always_tools_are_callable_without_being_selected(rec):
    catalog = recording_catalog(rec, tool_metadata={"get_weather": {"include": "always"}})
    calls = [
        call("get_weather", "c1", city="Oslo"),
        call("ask_human", "c2", question="ok?"),  # special category "human"
        call("list_issues", "c3", repo="r"),
    ]
    node = ToolExecutor(catalog, pinned=["list_issues"])
    out = await node.ainvoke(state_for(calls, []))
    assert [m.status for m in out["messages"]] == ["success"] * 3
    assert rec.names == ["get_weather", "ask_human", "list_issues"]


# --- errors and results ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", APIS)
async def test_tool_that_raises_becomes_an_error_message(catalog, rec, mode, api):
    calls = [call("explode", "c1", reason="disk full"), call("get_weather", "c2", city="Rome")]
    out = await run_node(
        ToolExecutor(catalog, mode=mode), state_for(calls, ["explode", "get_weather"]), api
    )
    failed, ok = out["messages"]
    assert failed.status == "error"
    assert "ValueError: kaboom: disk full" in failed.content
    assert failed.tool_call_id == "c1"
    assert ok.status == "success" and ok.content == "Rome: 18C, cloudy"
    assert rec.names == ["explode", "get_weather"]


@pytest.mark.parametrize("api", APIS)
async def test_non_string_results_become_json(catalog, api):
    calls = [
        call("weather_forecast", "c1", city="Lima", days=2),
        call("list_issues", "c2", repo="r", limit=2),
    ]
    out = await run_node(
        ToolExecutor(catalog), state_for(calls, ["weather_forecast", "list_issues"]), api
    )
    forecast, issues = out["messages"]
    assert isinstance(forecast.content, str) and isinstance(issues.content, str)
    assert json.loads(forecast.content) == {
        "city": "Lima",
        "days": ["day 1: sunny", "day 2: sunny"],
    }
    assert json.loads(issues.content) == ["r#1", "r#2"]


async def test_executor_without_an_ai_message_raises_a_clear_error(catalog):
    with pytest.raises(ValueError, match="no AI message"):
        await ToolExecutor(catalog).ainvoke({"messages": [HumanMessage("hi")]})


def test_bad_constructor_arguments_are_rejected(catalog):
    with pytest.raises(ValueError, match="mode"):
        ToolExecutor(catalog, mode="turbo")
    with pytest.raises(ValueError, match="pinned"):
        ToolExecutor(catalog, pinned=["admin_shutdown"])
    with pytest.raises(ValueError, match="max_visible"):
        ToolExecutor(catalog, max_visible=0)
    with pytest.raises(ValueError, match="max_tools"):
        ToolExecutor(catalog, max_tools=-1)
    with pytest.raises(TypeError, match="pinned"):
        ToolExecutor(catalog, pinned="ab")


# --- coercion in the executor ---------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_malformed_arguments_are_coerced_before_the_tool_runs(catalog, rec, api):
    calls = [
        call("search_docs", "c1", __arg1='{"q": "install", "max_results": "2", "exact": "true"}'),
        call("search_docs", "c2", __arg1="upgrade"),
        call("tag_items", "c3", Items='["a", "b"]', LABEL="x"),
        call("list_issues", "c4", repo="r", limit="3"),
    ]
    visible = ["search_docs", "tag_items", "list_issues"]
    out = await run_node(ToolExecutor(catalog), state_for(calls, visible), api)
    assert [m.status for m in out["messages"]] == ["success"] * 4
    assert rec.runs == [
        ("search_docs", {"query": "install", "max_results": 2, "exact": True}),
        ("search_docs", {"query": "upgrade", "max_results": 3, "exact": False}),
        ("tag_items", {"items": ["a", "b"], "label": "x"}),
        ("list_issues", {"repo": "r", "limit": 3}),
    ]


class _RouteArgs(BaseModel):
    from_: str = Field(alias="from", description="Where the trip starts.")  # a Python keyword
    to: str
    max_stops: int = Field(0, alias="maxStops")


ROUTES: list[dict[str, Any]] = []


def _plan_route(from_: str, to: str, max_stops: int = 0) -> str:
    ROUTES.append({"from_": from_, "to": to, "max_stops": max_stops})
    return f"{from_} -> {to} ({max_stops} stops)"


plan_route = StructuredTool.from_function(
    _plan_route, name="plan_route", description="Plan a trip.", args_schema=_RouteArgs
)


@needs_aliased_fields
@pytest.mark.parametrize("api", APIS)
async def test_an_aliased_field_is_taken_under_the_name_the_model_reads_or_its_alias(api):
    # The schema bound to the model names the field 'from_' (langchain's tool_call_schema);
    # the tool validates 'from' (pydantic, by alias): a call that followed the schema failed
    # with "from: Field required".
    assert set(tool_json_schema(plan_route)["properties"]) == {"from_", "to", "max_stops"}
    ROUTES.clear()
    calls = [
        call("plan_route", "c1", from_="Oslo", to="Rome", max_stops="2"),
        {"name": "plan_route", "args": {"from": "Oslo", "to": "Rome", "maxStops": 1}, "id": "c2"},
    ]
    node = ToolExecutor(ToolCatalog.from_tools([plan_route]))
    out = await run_node(node, state_for(calls, ["plan_route"]), api)
    assert [m.status for m in out["messages"]] == ["success", "success"], out["messages"]
    direct = plan_route.invoke({"from": "Oslo", "to": "Rome", "maxStops": 2})
    assert out["messages"][0].content == direct == "Oslo -> Rome (2 stops)"
    assert ROUTES[:2] == [
        {"from_": "Oslo", "to": "Rome", "max_stops": 2},
        {"from_": "Oslo", "to": "Rome", "max_stops": 1},
    ]
    missing = [call("plan_route", "c3", to="Rome")]
    (error,) = (await run_node(node, state_for(missing, ["plan_route"]), api))["messages"]
    assert error.status == "error" and "Field required" in error.content


@pytest.mark.parametrize("api", APIS)
async def test_still_invalid_arguments_answer_the_error_and_expected_schema(catalog, rec, api):
    calls = [call("list_issues", "c1", repo="r", limit="lots")]
    out = await run_node(ToolExecutor(catalog), state_for(calls, ["list_issues"]), api)
    (message,) = out["messages"]
    assert rec.runs == []
    assert message.status == "error"
    assert "invalid arguments for tool 'list_issues'" in message.content
    assert "limit" in message.content and "valid integer" in message.content
    assert "Expected arguments (JSON schema)" in message.content
    assert '"repo"' in message.content and '"required": ["repo"]' in message.content


# --- timeouts -------------------------------------------------------------------------------


@dataclass
class Hang:
    """What became of a call that hangs: each event is set from the tool's own thread."""

    started: threading.Event = field(default_factory=threading.Event)
    cancelled: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)


def hanging_catalog(hang: Hang, timeout: float = 0.05) -> ToolCatalog:
    @tool
    async def slow_lookup(key: str) -> str:
        """Look a key up in a slow remote service."""
        hang.started.set()
        try:
            await asyncio.sleep(60)  # far past its timeout: only a cancellation ends it early
        except asyncio.CancelledError:
            hang.cancelled.set()
            raise
        hang.finished.set()
        return "late"

    @tool
    def quick(key: str) -> str:
        """Answer at once."""
        return f"quick {key}"

    return ToolCatalog.from_tools(
        [slow_lookup, quick],
        categories={"svc": ["slow_lookup", "quick"]},
        tool_metadata={"slow_lookup": {"timeout_s": timeout}},
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", APIS)
async def test_async_tool_over_its_timeout_is_cancelled(mode, api):
    hang = Hang()
    catalog = hanging_catalog(hang)
    calls = [call("slow_lookup", "c1", key="k1"), call("quick", "c2", key="k2")]
    out = await run_node(
        ToolExecutor(catalog, mode=mode), state_for(calls, catalog.tool_names), api
    )
    timed_out, ok = out["messages"]
    assert timed_out.status == "error"
    assert "timed out after 0.05 s and was cancelled" in timed_out.content
    assert ok.content == "quick k2"
    # The node answered while the tool was still in its 60 s wait: it did not wait it out.
    assert hang.started.is_set() and not hang.finished.is_set()
    # The tool was cancelled (under invoke the cancellation lands on the background loop).
    assert await asyncio.to_thread(hang.cancelled.wait, 10)
    assert not hang.finished.is_set()


def test_sync_tool_over_its_timeout_answers_an_error():
    hang, release = Hang(), threading.Event()

    @tool
    def blocking(seconds: float) -> str:
        """Block the thread."""
        hang.started.set()
        release.wait(seconds)
        hang.finished.set()
        return "done"

    catalog = ToolCatalog.from_tools(
        [blocking], categories={"c": ["blocking"]}, tool_metadata={"blocking": {"timeout_s": 0.05}}
    )
    try:
        out = ToolExecutor(catalog).invoke(
            state_for([call("blocking", "c1", seconds=60)], ["blocking"])
        )
        # The node answered while the tool's thread was still blocked: it did not wait for it.
        assert hang.started.is_set() and not hang.finished.is_set()
    finally:
        release.set()  # let the worker thread go
    (message,) = out["messages"]
    # Review 36b: not "was cancelled" (a thread cannot be): the call may still take effect.
    assert message.status == "error" and "timed out after 0.05 s." in message.content
    assert "may have taken effect, or may still" in message.content
    assert "cancelled" not in message.content
    assert hang.finished.wait(10)


def in_a_graph(node: Any) -> Any:
    """``node`` as the one node of a compiled graph."""
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    return graph.compile()


@pytest.mark.parametrize("timeout_s", [None, 5.0])
@pytest.mark.parametrize("api", APIS)
async def test_a_timeout_error_the_tool_raises_itself_is_an_ordinary_failure(timeout_s, api):
    @tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        raise TimeoutError("upstream did not answer within 30 s")  # its HTTP client's

    metadata = {"fetch": {"timeout_s": timeout_s}} if timeout_s else {}
    catalog = ToolCatalog.from_tools([fetch], tool_metadata=metadata)
    state = state_for([call("fetch", "c1", url="http://x")], ["fetch"])

    explained = (await run_node(in_a_graph(ToolExecutor(catalog)), state, api))["messages"][-1]
    assert explained.status == "error"
    assert "failed: TimeoutError: upstream did not answer within 30 s" in explained.content
    assert "timed out after" not in explained.content
    # ToolNode's forms answer it, or raise it, as ToolNode does.
    answering = in_a_graph(ToolExecutor(catalog, handle_tool_errors=True))
    answered = (await run_node(answering, state, api))["messages"][-1]
    toolnode = in_a_graph(ToolNode([fetch], handle_tool_errors=True))
    expected = (await run_node(toolnode, state, api))["messages"][-1]
    assert (answered.status, answered.content) == (expected.status, expected.content)
    raising = in_a_graph(ToolExecutor(catalog, handle_tool_errors=TOOLNODE_DEFAULT))
    with pytest.raises(TimeoutError, match="upstream did not answer"):
        await run_node(raising, state, api)


# --- concurrency ----------------------------------------------------------------------------


def probe_catalog(
    probe: ConcurrencyProbe,
    specs: dict[str, dict[str, Any]],
    *,
    sync: bool = False,
    seconds: float = 0.05,
    meet: threading.Barrier | None = None,
) -> ToolCatalog:
    tools = []
    for name, meta in specs.items():
        probe.group_of[name] = meta.get("concurrency_group", "default")
        pure = meta.get("is_pure", False)
        tools.append(probe_tool(name, probe, pure=pure, seconds=seconds, sync=sync, meet=meet))
    return ToolCatalog.from_tools(tools, categories={"probe": list(specs)}, tool_metadata=specs)


def probe_calls(names: list[str]) -> list[dict[str, Any]]:
    return [call(n, f"c{i}", x=i) for i, n in enumerate(names)]


@pytest.mark.parametrize("api", APIS)
async def test_pure_tools_really_overlap_in_parallel_safe(api):
    probe = ConcurrencyProbe()
    specs = {f"p{i}": {"is_pure": True, "max_concurrency": 10} for i in range(5)}
    catalog = probe_catalog(probe, specs)
    out = await run_node(
        ToolExecutor(catalog, mode="parallel_safe"),
        state_for(probe_calls(list(specs)), list(specs)),
        api,
    )
    assert [m.content for m in out["messages"]] == [f"p{i} {i}" for i in range(5)]
    assert probe.max_live == 5
    assert probe.violations == []


@pytest.mark.parametrize("api", APIS)
async def test_sync_pure_tools_overlap_in_threads(api):
    # Each call waits inside the probe until all four run at once (a barrier, not a sleep
    # that a loaded machine may outlast before the last thread starts); calls that do not
    # overlap break the barrier at its timeout and fail.
    probe = ConcurrencyProbe()
    specs = {f"s{i}": {"is_pure": True, "max_concurrency": 4} for i in range(4)}
    catalog = probe_catalog(probe, specs, sync=True, meet=threading.Barrier(4, timeout=20))
    out = await run_node(
        ToolExecutor(catalog, mode="parallel_safe"),
        state_for(probe_calls(list(specs)), list(specs)),
        api,
    )
    assert [m.status for m in out["messages"]] == ["success"] * 4
    assert probe.max_live == 4


@pytest.mark.parametrize("api", APIS)
async def test_max_concurrency_of_a_group_is_respected(api):
    probe = ConcurrencyProbe()
    specs = {
        f"g{i}": {"is_pure": True, "max_concurrency": 2, "concurrency_group": "api"}
        for i in range(6)
    }
    catalog = probe_catalog(probe, specs, seconds=0.03)
    await run_node(
        ToolExecutor(catalog, mode="parallel_safe"),
        state_for(probe_calls(list(specs)), list(specs)),
        api,
    )
    assert probe.max_by_group["api"] == 2
    assert len(probe.intervals) == 6


async def test_smallest_max_concurrency_in_a_group_wins():
    probe = ConcurrencyProbe()
    specs = {
        f"g{i}": {"is_pure": True, "max_concurrency": 8, "concurrency_group": "db"}
        for i in range(4)
    }
    specs["g3"]["max_concurrency"] = 3
    catalog = probe_catalog(probe, specs, seconds=0.03)
    await ToolExecutor(catalog).ainvoke(
        state_for(probe_calls(["g0", "g1", "g2", "g0", "g1"]), list(specs))
    )
    assert probe.max_by_group["db"] == 3


@pytest.mark.parametrize("api", APIS)
async def test_impure_tool_never_overlaps_another_call_of_its_group(api):
    probe = ConcurrencyProbe()
    specs = {
        "read_a": {"is_pure": True, "max_concurrency": 4, "concurrency_group": "db"},
        "read_b": {"is_pure": True, "max_concurrency": 4, "concurrency_group": "db"},
        "write": {"is_pure": False, "max_concurrency": 4, "concurrency_group": "db"},
        "other": {"is_pure": True, "max_concurrency": 4, "concurrency_group": "net"},
    }
    catalog = probe_catalog(probe, specs, seconds=0.03)
    names = ["read_a", "read_b", "write", "read_a", "other", "write", "read_b", "other"]
    out = await run_node(
        ToolExecutor(catalog, mode="parallel_safe"), state_for(probe_calls(names), list(specs)), api
    )
    assert len(out["messages"]) == len(names)
    assert probe.violations == []
    writes = [iv for iv in probe.intervals if iv[0] == "write"]
    others_in_db = [iv for iv in probe.intervals if iv[0] != "write" and iv[0] != "other"]
    for _, w_start, w_end in writes:
        for _, start, end in others_in_db + [iv for iv in writes if iv[1] != w_start]:
            assert end <= w_start or start >= w_end
    # the pure reads before the first write did overlap, and "other" ran beside the db calls
    assert probe.max_by_group["db"] == 2
    assert probe.max_live >= 2


@pytest.mark.parametrize("api", APIS)
async def test_impure_tools_of_different_groups_may_overlap(api):
    probe = ConcurrencyProbe()
    specs = {
        "write_a": {"concurrency_group": "a"},
        "write_b": {"concurrency_group": "b"},
    }
    catalog = probe_catalog(probe, specs)
    await run_node(ToolExecutor(catalog), state_for(probe_calls(list(specs)), list(specs)), api)
    assert probe.max_live == 2
    assert probe.violations == []


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("sync", [False, True])
async def test_sequential_mode_never_overlaps(api, sync):
    probe = ConcurrencyProbe()
    specs = {f"p{i}": {"is_pure": True, "max_concurrency": 10} for i in range(4)}
    catalog = probe_catalog(probe, specs, sync=sync, seconds=0.02)
    out = await run_node(
        ToolExecutor(catalog, mode="sequential"),
        state_for(probe_calls(list(specs)), list(specs)),
        api,
    )
    assert probe.max_live == 1
    assert [name for name, _, _ in probe.intervals] == list(specs)  # in call order
    assert [m.tool_call_id for m in out["messages"]] == ["c0", "c1", "c2", "c3"]


async def test_default_metadata_runs_calls_one_at_a_time_in_call_order():
    probe = ConcurrencyProbe()
    specs: dict[str, dict[str, Any]] = {"a": {}, "b": {}, "c": {}}
    catalog = probe_catalog(probe, specs, seconds=0.02)
    await ToolExecutor(catalog, mode="parallel_safe").ainvoke(
        state_for(probe_calls(["c", "a", "b"]), list(specs))
    )
    assert probe.max_live == 1
    assert [name for name, _, _ in probe.intervals] == ["c", "a", "b"]


# --- async-only tools -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_async_only_tool_works_under_sync_invoke(catalog, rec, mode):
    calls = [call("fetch_page", "c1", url="https://x.test"), call("get_weather", "c2", city="Oslo")]
    out = ToolExecutor(catalog, mode=mode).invoke(state_for(calls, ["fetch_page", "get_weather"]))
    assert [m.content for m in out["messages"]] == [
        "<html>https://x.test</html>",
        "Oslo: 18C, cloudy",
    ]
    assert rec.names == ["fetch_page", "get_weather"]


def test_async_only_tool_works_when_invoke_is_called_inside_a_running_loop(catalog, rec):
    async def inside_loop() -> Any:
        # e.g. a Jupyter cell calling the sync API: the loop is running in this thread
        return ToolExecutor(catalog).invoke(
            state_for([call("fetch_page", "c1", url="u")], ["fetch_page"])
        )

    out = asyncio.run(inside_loop())
    assert out["messages"][0].content == "<html>u</html>"


# --- the meta-call budget and the working-set cap -------------------------------------------


async def test_meta_calls_beyond_the_turn_limit_are_refused(catalog):
    calls = [
        call("search_tools", "m1", query="issue"),
        call("add_tool", "m2", tool_names=["create_issue"]),
        call("add_tool", "m3", tool_names=["get_weather"]),
    ]
    out = await ToolExecutor(catalog, max_meta_calls=2).ainvoke(state_for(calls, ["ask_human"]))
    first, second, third = out["messages"]
    assert first.status == second.status == "success"
    assert third.status == "error" and "meta-tool limit reached (2" in third.content
    assert out["selected_tools"] == {"remove": [], "add": ["create_issue"]}


async def test_meta_call_limit_counts_earlier_meta_calls_of_the_same_turn(catalog):
    earlier = [
        HumanMessage("hi"),
        ai_calls(call("search_tools", "m0", query="x")),
        ToolMessage("{}", name="search_tools", tool_call_id="m0"),
    ]
    state = {
        "messages": [*earlier, ai_calls(call("add_tool", "m1", tool_names=["get_weather"]))],
        "selected_tools": [],
    }
    out = await ToolExecutor(catalog, max_meta_calls=1).ainvoke(state)
    assert out["messages"][0].status == "error"
    # a new human message starts a new turn with a fresh budget
    state["messages"].insert(3, HumanMessage("again"))
    out = await ToolExecutor(catalog, max_meta_calls=1).ainvoke(state)
    assert out["messages"][0].status == "success"


@pytest.mark.parametrize("where", ["same reply", "earlier reply"])
async def test_a_hidden_tool_is_not_sent_to_add_tool_once_the_turns_meta_calls_are_spent(
    catalog, where
):
    # "Load it first with add_tool(...)", which the limit then refused: the model spent its
    # remaining iterations on advice that could not work.
    meta = call("search_tools", "m1", query="issue")
    hidden = call("create_issue", "c1", title="x")
    if where == "same reply":
        state = state_for([meta, hidden], ["ask_human"])
    else:
        earlier = [
            HumanMessage("hi"),
            ai_calls(meta),
            ToolMessage("{}", name="search_tools", tool_call_id="m1"),
        ]
        state = {"messages": [*earlier, ai_calls(hidden)], "selected_tools": ["ask_human"]}
    out = await ToolExecutor(catalog, max_meta_calls=1).ainvoke(state)
    refusal = out["messages"][-1]
    assert refusal.status == "error" and "is not loaded" in refusal.content
    assert "add_tool" not in refusal.content
    assert "Calls to the meta-tools are refused for the rest of this turn" in refusal.content
    # under the limit, the refusal says how to load it
    out = await ToolExecutor(catalog, max_meta_calls=2).ainvoke(state)
    assert "Load it first with add_tool(tool_names=['create_issue'])" in out["messages"][-1].content


@pytest.mark.parametrize(
    ("meta", "advice"),
    [
        (call("search_tools", "m1", query="issue"), "Use 'add_tool'"),
        (call("search_tools", "m1", query="zzqqxx"), "show_all_tools"),
    ],
)
async def test_the_turns_last_meta_call_does_not_advise_another(catalog, meta, advice):
    # Its answer sent the model to add_tool or show_all_tools, which the limit then refused.
    out = await ToolExecutor(catalog, max_meta_calls=2).ainvoke(state_for([meta], ["ask_human"]))
    assert advice in json.loads(out["messages"][0].content)["message"]  # under the limit
    out = await ToolExecutor(catalog, max_meta_calls=1).ainvoke(state_for([meta], ["ask_human"]))
    answer = json.loads(out["messages"][0].content)
    assert advice not in answer["message"]
    assert answer["message"].startswith("That was this turn's last meta-tool call")
    assert answer["found"] == json.loads(out["messages"][0].content)["found"]


async def test_without_a_loading_meta_tool_a_hidden_tool_is_not_loadable_at_all(catalog):
    # With only show_all_tools, spent, the refusal said loading would work in a later turn.
    calls = [call("show_all_tools", "m1"), call("create_issue", "c1", title="x")]
    node = ToolExecutor(catalog, max_meta_calls=1, enabled_builtins=["show_all_tools"])
    out = await node.ainvoke(state_for(calls, ["ask_human"]))
    assert "This conversation cannot load other tools" in out["messages"][1].content


async def test_working_set_cap_evicts_lru_tells_the_model_and_keeps_pinned(catalog, rec):
    node = ToolExecutor(catalog, max_visible=7, pinned=["list_projects"])
    visible = [
        "list_projects",  # pinned
        "ask_human",  # always visible (human category)
        "get_weather",  # called in this very batch
        "weather_forecast",
        "search_docs",
        "tag_items",
        "create_project",
    ]
    state = state_for(
        [
            call("get_weather", "c1", city="Oslo"),
            call("request_more_tools", "m1", categories=["github"]),
        ],
        visible,
        tool_last_used={
            "weather_forecast": 1,
            "search_docs": 2,
            "tag_items": 3,
            "create_project": 4,
        },
    )
    out = await node.ainvoke(state)
    weather, loaded = out["messages"]
    assert weather.status == "success"  # visible when the model called it: it runs
    assert rec.names == ["get_weather"]
    assert out["selected_tools"]["remove"] == ["weather_forecast", "search_docs", "tag_items"]
    assert loaded.content.endswith(
        "To stay within the tool limit these were unloaded: "
        "weather_forecast, search_docs, tag_items."
    )
    after = [n for n in visible if n not in out["selected_tools"]["remove"]]
    after += out["selected_tools"]["add"]
    assert len(after) == 7
    assert {"list_projects", "ask_human", "get_weather", "create_project"} <= set(after)


async def test_a_tool_evicted_by_a_meta_call_in_the_same_batch_still_runs(catalog, rec):
    node = ToolExecutor(catalog, max_visible=2)
    calls = [
        call("add_tool", "m1", tool_names=["create_issue", "list_issues"]),
        call("get_weather", "c1", city="Oslo"),
    ]
    out = await node.ainvoke(state_for(calls, ["get_weather", "weather_forecast"]))
    assert [m.status for m in out["messages"]] == ["success", "success"]
    assert rec.names == ["get_weather"]


# --- LangGraph injection and Commands -------------------------------------------------------


INJECTION_CALLS = [
    call("plain", "k1", text="a"),
    call("save_note", "k2", note="remember"),
    call("count_messages", "k3"),
    call("echo_call_id", "k4", text="hi"),
    call("runtime_info", "k5", text="rt"),
]


def graph_level_app(tools_node: Any) -> Any:
    model = ScriptedChatModel(responses=[ai_calls(*INJECTION_CALLS), AIMessage("all done")])

    def agent(state: NotesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(NotesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools_node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def tool_outcome(out: dict[str, Any]) -> list[tuple[str, Any, str]]:
    return [(m.tool_call_id, m.content, m.status) for m in tool_messages(out["messages"])]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", APIS)
async def test_injection_and_commands_work_as_under_tool_node(mode, api):
    seen: list[Any] = []
    tools = injection_tools(seen)
    names = [t.name for t in tools]
    catalog = ToolCatalog.from_tools(tools, categories={"notes": names})
    start = {"messages": [HumanMessage("take a note")], "selected_tools": names, "note": "old"}

    reference_app = graph_level_app(ToolNode(tools))
    ours_app = graph_level_app(ToolExecutor(catalog, mode=mode))
    if api == "invoke":
        reference, ours = reference_app.invoke(start), ours_app.invoke(start)
    else:
        reference, ours = await reference_app.ainvoke(start), await ours_app.ainvoke(start)

    assert tool_outcome(ours) == tool_outcome(reference)
    assert [m[0] for m in tool_outcome(ours)] == ["k1", "k2", "k3", "k4", "k5"]
    assert ours["note"] == reference["note"] == "remember"
    assert ours["messages"][-1].content == "all done"
    contents = dict((i, c) for i, c, _ in tool_outcome(ours))
    assert contents["k4"] == "hi from k4"
    assert contents["k3"] == "2 messages"
    assert contents["k5"].startswith("rt: call k5")
    # the injected state and runtime the tools saw are the same as under ToolNode
    assert len(seen) == 4
    assert sorted(seen[:2]) == sorted(seen[2:])
    assert ("runtime", "k5", "old") in seen[2:]


# --- the core on its own --------------------------------------------------------------------


async def test_execution_core_updates_the_working_set_in_place(catalog):
    from langgraph_toolbudget.core.working_set import WorkingSet

    execution = BatchRunner(catalog, BudgetConfig())
    working = WorkingSet.from_state({"selected_tools": ["get_weather"]})
    outcome = await execution.arun(
        [
            call("add_tool", "m1", tool_names=["create_issue"]),
            call("create_issue", "c1", repo="r", title="t"),
        ],
        {"messages": [HumanMessage("x")]},
        {},
        working,
    )
    assert working.names == ["get_weather", "create_issue"]
    assert [c.added for c in working.changes] == [("create_issue",)]
    assert working.update()["selected_tools"] == {"add": ["create_issue"], "remove": []}
    assert outcome.meta_calls == 1
    assert [m.tool_call_id for m in outcome.messages] == ["m1", "c1"]


def test_tool_defined_from_a_dict_schema_runs(rec):
    def lookup(**kwargs: Any) -> str:
        rec.record("lookup", **kwargs)
        return f"found {kwargs['term']}"

    dict_tool = StructuredTool.from_function(
        func=lookup,
        name="lookup",
        description="Look a term up.",
        args_schema={
            "type": "object",
            "properties": {"term": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["term"],
        },
    )
    catalog = ToolCatalog.from_tools([dict_tool], categories={"c": ["lookup"]})
    out = ToolExecutor(catalog).invoke(
        state_for([call("lookup", "c1", Term="cats", limit="2")], ["lookup"])
    )
    assert out["messages"][0].content == "found cats"
    assert rec.runs == [("lookup", {"term": "cats", "limit": 2})]


@pytest.mark.parametrize("api", APIS)
async def test_a_command_returning_tool_keeps_the_messages_in_call_order(api):
    tools = injection_tools([])
    names = [t.name for t in tools]
    catalog = ToolCatalog.from_tools(tools, categories={"notes": names})
    calls = [
        call("plain", "k1", text="a"),
        call("save_note", "k2", note="n"),
        call("plain", "k3", text="b"),
    ]
    app_calls = ScriptedChatModel(responses=[ai_calls(*calls), AIMessage("done")])

    def agent(state: NotesState) -> dict[str, Any]:
        return {"messages": [app_calls.invoke(state["messages"])]}

    graph = StateGraph(NotesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolExecutor(catalog))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile()
    start = {"messages": [HumanMessage("go")], "selected_tools": names, "note": ""}
    out = app.invoke(start) if api == "invoke" else await app.ainvoke(start)
    assert [m.tool_call_id for m in tool_messages(out["messages"])] == ["k1", "k2", "k3"]
    assert out["note"] == "n"


# --- sequential sync tools under ainvoke never block the event loop ---------------------------


async def test_sequential_sync_tools_under_ainvoke_leave_the_event_loop_free():
    probe = ConcurrencyProbe()
    specs: dict[str, dict[str, Any]] = {"a": {}, "b": {}, "c": {}}
    catalog = probe_catalog(probe, specs, sync=True, seconds=0.05)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        out = await ToolExecutor(catalog, mode="sequential").ainvoke(
            state_for(probe_calls(["a", "b", "c"]), list(specs))
        )
    finally:
        task.cancel()
    assert [m.tool_call_id for m in out["messages"]] == ["c0", "c1", "c2"]
    assert [name for name, _, _ in probe.intervals] == ["a", "b", "c"]
    assert probe.max_live == 1
    # 150 ms of blocking sleeps ran in a worker thread: the loop kept ticking meanwhile.
    assert ticks >= 10


# --- calls whose arguments were not JSON, and tools named like meta-tools ---------------------


@pytest.mark.parametrize("api", APIS)
async def test_unparseable_arguments_are_answered_with_the_schema_not_run(catalog, rec, api):
    from langgraph_toolbudget.core.coercion import RAW_ARGUMENTS_KEY

    calls = [call("get_weather", "c1", **{RAW_ARGUMENTS_KEY: "{city: Paris"})]
    out = await run_node(ToolExecutor(catalog), state_for(calls, ["get_weather"]), api)
    (message,) = out["messages"]
    assert message.status == "error"
    assert "not valid JSON" in message.content and "{city: Paris" in message.content
    assert '"city"' in message.content  # the expected schema
    assert rec.names == []


def test_a_catalog_tool_named_like_a_meta_tool_is_rejected_naming_it():
    @tool
    def search_tools(query: str) -> str:
        """A user tool that shadows the meta-tool."""
        return query

    catalog = ToolCatalog.from_tools([search_tools])
    with pytest.raises(ValueError, match=r"\['search_tools'\].*rename"):
        BatchRunner(catalog, BudgetConfig())


@pytest.mark.parametrize("api", APIS)
async def test_a_json_schema_whose_ref_loops_leaves_the_check_to_the_tool(api):
    """A `$ref` that loops on itself raised `RecursionError` out of the node: the run ended
    and the batch's other calls went unanswered (review 31a). The check is left to the
    tool, as for a schema it cannot resolve."""
    looped = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}
    tools = [
        StructuredTool(
            name="loop", description="Loop.", args_schema=looped, func=lambda **kw: "ran"
        ),
        StructuredTool(
            name="echo", description="Echo.", args_schema={"type": "object"}, func=lambda **kw: "ok"
        ),
    ]
    node = ToolExecutor.from_tools(tools, handle_tool_errors=None)
    calls = [call("loop", "c1", x=1), call("echo", "c2")]
    out = await run_node(node, state_for(calls, ["loop", "echo"]), api)
    assert [(m.tool_call_id, m.content) for m in out["messages"]] == [("c1", "ran"), ("c2", "ok")]


@pytest.mark.parametrize("api", APIS)
async def test_a_json_schema_tool_gets_its_arguments_checked_like_a_pydantic_one(api):
    """A tool whose args schema is a JSON schema (as MCP tools are) is not validated by
    langchain: the executor checks it after coercion; a schema it cannot resolve (a remote
    ``$ref``, never fetched) is left to the tool."""
    ran: list[dict[str, Any]] = []

    def record(**kwargs: Any) -> str:
        ran.append(kwargs)
        return "ok"

    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city"],
        "additionalProperties": False,
    }
    remote = {"type": "object", "properties": {"q": {"$ref": "http://127.0.0.1:9/q.json"}}}
    tools = [
        StructuredTool(name="forecast", description="Forecast.", args_schema=schema, func=record),
        StructuredTool(name="lookup", description="Look up.", args_schema=remote, func=record),
    ]
    node = ToolExecutor.from_tools(tools, handle_tool_errors=None)  # the explained answers
    calls = [
        call("forecast", "c1", city="Rome", days=0),
        call("forecast", "c2", days=2),
        call("forecast", "c3", city="Rome", hours=3),
        call("forecast", "c4", city="Rome", days="2"),  # coerced, then valid
        call("lookup", "c5", q=[1, {"x": None}]),
    ]
    out = await run_node(node, state_for(calls, ["forecast", "lookup"]), api)
    answers = {m.tool_call_id: m for m in out["messages"]}
    assert "days: 0 is less than the minimum of 1" in answers["c1"].content
    assert "(arguments): 'city' is a required property" in answers["c2"].content
    assert "'hours' was unexpected" in answers["c3"].content
    for bad in ("c1", "c2", "c3"):
        assert answers[bad].status == "error"
        expected = answers[bad].content.split("Expected arguments (JSON schema): ")[1]
        assert json.loads(expected.split("\n")[0]).items() >= schema.items()
    assert ran == [{"city": "Rome", "days": 2}, {"q": [1, {"x": None}]}]


@pytest.mark.parametrize("api", APIS)
async def test_a_json_schema_tools_bad_arguments_follow_handle_tool_errors_like_a_pydantic_ones(
    api,
):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tool = StructuredTool(name="forecast", description="Forecast.", args_schema=schema, func=str)
    state = state_for([call("forecast", "c1")], ["forecast"])

    def handler(error: ToolInvocationError) -> str:
        return f"handled: {error.tool_name}"

    out = await run_node(ToolExecutor.from_tools([tool], handle_tool_errors=handler), state, api)
    assert out["messages"][0].content == "handled: forecast"
    with pytest.raises(ToolInvocationError, match="'city' is a required property"):
        await run_node(ToolExecutor.from_tools([tool], handle_tool_errors=False), state, api)


# --- call ids and invalid calls as providers send them ---------------------------------------


def messages_app(node: Any, key: str = "messages") -> Any:
    """``node`` as the one node of a graph whose messages (under ``key``) use add_messages."""
    from typing import Annotated

    from langgraph.graph.message import add_messages
    from typing_extensions import TypedDict

    state = TypedDict("KeyedMessages", {key: Annotated[list, add_messages]})  # type: ignore[misc]
    graph = StateGraph(state)
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    return graph.compile()


async def run_app(app: Any, payload: Any, api: str) -> Any:
    return await (
        asyncio.to_thread(app.invoke, payload) if api == "invoke" else app.ainvoke(payload)
    )


def answers_pair_with_calls(messages: list[Any]) -> bool:
    """Every call (valid or invalid) of each AI message answered once, right after it, by id:
    what OpenAI and Anthropic require of the next request."""
    for i, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        ids = [c["id"] for c in (*message.tool_calls, *message.invalid_tool_calls)]
        after = []
        for later in messages[i + 1 :]:
            if not isinstance(later, ToolMessage):
                break
            after.append(later.tool_call_id)
        if sorted(map(str, ids)) != sorted(map(str, after)):
            return False
    return True


@pytest.mark.parametrize("api", APIS)
async def test_an_empty_call_id_is_answered_under_it_as_toolnode_answers_it(catalog, rec, api):
    # OpenAI-compatible servers (Gemini's, LM Studio) send "id": ""; langchain-openai keeps it.
    reply = AIMessage("", id="r1", tool_calls=[call("get_weather", "", city="Paris")])
    payload = {"messages": [HumanMessage("weather?"), reply]}
    answered = {}
    for node in (ToolNode(recording_tools(rec)), ToolExecutor(catalog, enforce_visibility=False)):
        out = await run_app(messages_app(node), payload, api)
        assert out["messages"][1] == reply  # the reply in the state is left as it is
        answered[type(node).__name__] = [m.tool_call_id for m in tool_messages(out["messages"])]
    assert answered == {"ToolNode": [""], "ToolExecutor": [""]}  # was 'missing_id_0'
    # The drop-in swap under create_react_agent finishes, as with ToolNode (it raised).
    from langgraph.prebuilt import create_react_agent

    for tools in ([recording_tools(rec)[6]], ToolExecutor.from_tools([recording_tools(rec)[6]])):
        model = ScriptedChatModel(responses=[reply, AIMessage("Sunny.")], cycle=False)
        out = await run_app(
            create_react_agent(model, tools), {"messages": [HumanMessage("w?")]}, api
        )
        assert out["messages"][-1].content == "Sunny." and answers_pair_with_calls(out["messages"])


class AddedMessages(TypedDict):
    """Messages under ``operator.add`` (LangGraph's older tutorials; ``ToolNode`` works
    there): a message with an id already in the state is appended again, never replaced."""

    messages: Annotated[list, operator.add]


def operator_add_app(node: Any) -> Any:
    """``node`` as the one node of a graph whose messages use ``operator.add``."""
    graph = StateGraph(AddedMessages)
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    return graph.compile()


def shapes(messages: list[Any]) -> list[tuple[str, Any]]:
    """Each message's type with its call ids (an AI message) or the id it answers."""
    return [
        (type(m).__name__, [c["id"] for c in m.tool_calls] if isinstance(m, AIMessage) else None)
        if not isinstance(m, ToolMessage)
        else ("ToolMessage", m.tool_call_id)
        for m in messages
    ]


@pytest.mark.parametrize("api", APIS)
async def test_a_state_whose_messages_reducer_is_operator_add_holds_the_reply_once(
    catalog, rec, api
):
    # The node cannot see its graph's reducer: a reply rewritten with new call ids in its
    # update was appended a second time, leaving the first reply's calls without answers.
    empty = AIMessage(
        "",
        id="r1",
        tool_calls=[call("get_weather", "", city="Paris"), call("get_weather", "", city="Oslo")],
    )
    payload = {"messages": [HumanMessage("weather?"), empty]}
    ours = await run_app(
        operator_add_app(ToolExecutor.from_tools(recording_tools(rec))), payload, api
    )
    theirs = await run_app(operator_add_app(ToolNode(recording_tools(rec))), payload, api)
    assert (
        shapes(ours["messages"])
        == shapes(theirs["messages"])
        == [
            ("HumanMessage", None),
            ("AIMessage", ["", ""]),
            ("ToolMessage", ""),
            ("ToolMessage", ""),
        ]
    )
    # A call without an id (ToolNode cannot answer it) gets a made-up id for its answer.
    calls = [*empty.tool_calls, {**call("get_weather", "", city="Rome"), "id": None}]
    missing = empty.model_copy(update={"tool_calls": calls})
    node = ToolExecutor(catalog, enforce_visibility=False)
    out = await run_app(operator_add_app(node), {"messages": [HumanMessage("w?"), missing]}, api)
    human, stored, *answers = out["messages"]
    assert stored == missing and all(isinstance(m, ToolMessage) for m in answers)
    assert [m.tool_call_id for m in answers][:2] == ["", ""]
    assert answers[2].tool_call_id.startswith("call_") and answers[2].content.startswith("Rome")


@pytest.mark.parametrize("key", ["messages", "history"])
@pytest.mark.parametrize("api", APIS)
async def test_calls_are_answered_under_their_own_ids_and_the_reply_is_left_as_it_is(
    catalog, key, api
):
    # "" and shared ids as ToolNode answers them; a missing id under a made-up one. The
    # update holds the answers only, so it is the same under any messages reducer.
    reply = AIMessage(
        "Checking.",
        id="r1",
        tool_calls=[
            call("get_weather", "", city="Paris"),
            {"name": "get_weather", "args": {"city": "Rome"}, "id": None, "type": "tool_call"},
            call("get_weather", "c1", city="Oslo"),
            call("get_weather", "c1", city="Lima"),
            call("get_weather", "", city="Kyiv"),
        ],
    )
    node = ToolExecutor(catalog, enforce_visibility=False, messages_key=key)
    update = await run_node(node, {key: [HumanMessage("weather?"), reply]}, api)
    assert all(isinstance(m, ToolMessage) for m in update[key])  # never the reply
    out = await run_app(messages_app(node, key), {key: [HumanMessage("weather?"), reply]}, api)
    human, stored, *answers = out[key]
    assert stored == reply and len(answers) == 5
    ids = [m.tool_call_id for m in answers]
    assert ids[0] == "" and ids[2:] == ["c1", "c1", ""] and ids[1].startswith("call_")
    assert [m.content.split(":")[0] for m in answers] == ["Paris", "Rome", "Oslo", "Lima", "Kyiv"]


@pytest.mark.parametrize("api", APIS)
async def test_your_own_model_node_gets_distinct_ids_with_the_coercion_helpers(catalog, api):
    # docs/execution.md's recipe: repair_tool_calls and distinct_call_ids on the model's reply
    # put distinct ids into the state, so every call pairs with its answer by id.
    from langgraph_toolbudget.core.coercion import distinct_call_ids, repair_tool_calls

    reply = AIMessage(
        "",
        id="r1",
        tool_calls=[
            call("get_weather", "", city="Paris"),
            call("get_weather", "", city="Oslo"),
            {"name": "get_weather", "args": {"city": "Rome"}, "id": None, "type": "tool_call"},
        ],
    )
    model = ScriptedChatModel(responses=[reply, AIMessage("Sunny.")], cycle=False)

    def agent(state: ToolBudgetState) -> dict[str, Any]:
        return {"messages": [distinct_call_ids(repair_tool_calls(model.invoke(state["messages"])))]}

    graph = StateGraph(ToolBudgetState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolExecutor(catalog, pinned=["get_weather"]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    out = await run_app(graph.compile(), {"messages": [HumanMessage("w?")]}, api)
    stored = out["messages"][1]
    assert len({c["id"] for c in stored.tool_calls}) == 3
    assert answers_pair_with_calls(out["messages"]) and out["messages"][-1].content == "Sunny."


@pytest.mark.parametrize("api", APIS)
async def test_a_list_or_tool_call_input_keeps_the_ids_it_was_given(catalog, api):
    # Shared ids are answered under the id they share (as ToolNode answers them), a missing
    # one gets a made-up id (ToolNode raises), whatever holds the reply.
    calls = [
        call("get_weather", "c1", city="Oslo"),
        call("get_weather", "c1", city="Lima"),
        {"name": "get_weather", "args": {"city": "Rome"}, "id": None, "type": "tool_call"},
    ]
    node = ToolExecutor(catalog, enforce_visibility=False)
    as_list = await run_node(
        node, [HumanMessage("w?"), AIMessage("", id="r1", tool_calls=calls)], api
    )
    as_calls = (await run_node(node, calls, api))["messages"]
    for answers in (as_list, as_calls):
        assert all(isinstance(m, ToolMessage) for m in answers)
        assert [m.tool_call_id for m in answers][:2] == ["c1", "c1"]
        assert answers[2].tool_call_id.startswith("call_")


def invalid_reply() -> AIMessage:
    """A reply as langchain-openai reads one valid call and two whose arguments are not JSON
    (one of them a Python literal, which repair_tool_calls would run)."""
    return AIMessage(
        "",
        id="r1",
        tool_calls=[call("get_weather", "ok", city="Paris")],
        invalid_tool_calls=[
            {"name": "get_weather", "args": '{"city": ', "id": "bad1", "error": None,
             "type": "invalid_tool_call"},
            {"name": "get_weather", "args": "{'city': 'Rome'}", "id": "bad2", "error": None,
             "type": "invalid_tool_call"},
        ],
        response_metadata={"model_provider": "openai"},
    )  # fmt: skip


@pytest.mark.parametrize("api", APIS)
async def test_invalid_tool_calls_under_your_own_model_node_are_answered_never_run(
    catalog, rec, api
):
    # The README's own-model-node recipe: tools_condition sends the reply to the executor,
    # which answered the valid call only; the provider then refused the next request.
    model = ScriptedChatModel(responses=[invalid_reply(), AIMessage("Sunny.")], cycle=False)

    def agent(state: ToolBudgetState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(ToolBudgetState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolExecutor(catalog, pinned=["get_weather"]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    out = await run_app(graph.compile(), {"messages": [HumanMessage("w?")]}, api)
    answers = {m.tool_call_id: m for m in tool_messages(out["messages"])}
    assert list(answers) == ["ok", "bad1", "bad2"]
    assert rec.runs == [("get_weather", {"city": "Paris"})]  # never the invalid ones
    for bad in ("bad1", "bad2"):
        assert answers[bad].status == "error" and "not valid JSON" in answers[bad].content
    assert answers_pair_with_calls(out["messages"]) and out["messages"][-1].content == "Sunny."


@pytest.mark.parametrize("api", APIS)
async def test_an_invalid_call_already_repaired_or_answered_is_not_answered_again(catalog, api):
    from langgraph_toolbudget.core.coercion import repair_tool_calls

    node = ToolExecutor(catalog, pinned=["get_weather"])
    repaired = repair_tool_calls(invalid_reply())  # the user repaired it: one answer per call
    out = await run_node(node, {"messages": [HumanMessage("w?"), repaired]}, api)
    assert [m.tool_call_id for m in out["messages"]] == ["ok", "bad1", "bad2"]
    # bad2 answered already (as create_agent answers invalid calls), bad1 moved to tool_calls
    reply = invalid_reply()
    answered = ToolMessage("Error: not run", tool_call_id="bad2", status="error")
    moved = reply.model_copy(
        update={"tool_calls": [*reply.tool_calls, call("get_weather", "bad1")]}
    )
    for message, later, expected in (
        (reply, [answered], ["ok", "bad1"]),
        (moved, [], ["ok", "bad1", "bad2"]),  # bad1 answered once, as the tool call it became
    ):
        state = {"messages": [HumanMessage("w?"), message, *later]}
        out = await run_node(node, state, api)
        assert [m.tool_call_id for m in out["messages"]] == expected


@pytest.mark.parametrize("api", APIS)
async def test_an_invalid_call_without_an_id_is_answered_under_a_new_id(catalog, rec, api):
    reply = invalid_reply()
    bads = [{**reply.invalid_tool_calls[0], "id": None}, reply.invalid_tool_calls[1]]
    reply = reply.model_copy(update={"invalid_tool_calls": bads})
    node = ToolExecutor(catalog, enforce_visibility=False)
    out = await run_app(operator_add_app(node), {"messages": [HumanMessage("w?"), reply]}, api)
    human, stored, *answers = out["messages"]
    assert stored == reply and all(isinstance(m, ToolMessage) for m in answers)
    ok, unread, literal = answers
    assert (ok.tool_call_id, literal.tool_call_id) == ("ok", "bad2")
    assert unread.tool_call_id.startswith("call_") and "not valid JSON" in unread.content
    assert rec.names == ["get_weather"]


# --- from_tools given a catalog; a short repr -----------------------------------------------


def test_from_tools_given_a_catalog_names_toolexecutor_catalog(catalog):
    with pytest.raises(TypeError, match=r"ToolExecutor\(catalog\)") as err:
        ToolExecutor.from_tools(catalog)  # was: 'ToolCatalog' object is not iterable
    assert "list of tools" in str(err.value)
    with pytest.raises(TypeError, match="takes a list of tools"):
        ToolExecutor.from_tools(None)  # type: ignore[arg-type]


def test_the_repr_of_an_executor_or_agent_over_many_tools_is_one_short_line():
    from langgraph_toolbudget import ToolAgent

    def make(i: int) -> StructuredTool:
        return StructuredTool.from_function(lambda x: x, name=f"t{i}", description=f"Tool {i}.")

    big = ToolCatalog.from_tools([make(i) for i in range(2000)])
    executor = ToolExecutor(big, mode="sequential")
    agent = ToolAgent(ScriptedChatModel(responses=["x"]), big)
    assert repr(executor) == f"ToolExecutor({big!r}, name='tools', mode='sequential')"
    assert repr(agent) == f"ToolAgent(ScriptedChatModel, {big!r}, name='agent')"
    assert len(repr(big)) < 50  # was ~370 KB each: ToolNode's repr lists every tool
    assert "enforce_visibility=False" in repr(ToolExecutor.from_tools([make(0)]))


async def test_a_drafts_refusal_sends_the_model_to_no_meta_tool_once_they_are_spent():
    @tool
    def old_report() -> str:
        """A draft report."""
        return "draft"

    @tool
    def report() -> str:
        """The report."""
        return "report"

    catalog = ToolCatalog.from_tools(
        [old_report, report], tool_metadata={"old_report": {"status": "draft"}}
    )
    calls = [call("search_tools", "m1", query="report"), call("old_report", "d1")]
    for limit, sent in ((2, True), (1, False)):
        out = await ToolExecutor(catalog, max_meta_calls=limit).ainvoke(state_for(calls, []))
        refusal = out["messages"][1].content
        assert "draft" in refusal and ("search_tools" in refusal) is sent


def test_from_tools_keeps_what_a_shared_config_sets():
    # It forced enforce_visibility=False and offload_over_chars=None over config=, while the
    # same options as keywords were taken: a shared config's offloading was dropped.
    @tool
    def big() -> str:
        """A big result."""
        return "x" * 2_000

    state = {"messages": [HumanMessage("go"), ai_calls(call("big", "b1"))]}
    shared = ToolExecutor.from_tools([big], config=BudgetConfig(offload_over_chars=500))
    assert shared.config.offload_over_chars == 500
    assert len(shared.invoke(state)["messages"][0].content) < 2_000  # offloaded
    strict = ToolExecutor.from_tools([big], config=BudgetConfig(enforce_visibility=True))
    assert strict.config.enforce_visibility is True
    # a config that sets neither keeps ToolNode's ways: every tool visible, no offloading
    # (one made by override() too: it set every field, so from_tools took the defaults as set)
    for config in (BudgetConfig(max_parallel=2), BudgetConfig().override(max_parallel=2)):
        plain = ToolExecutor.from_tools([big], config=config)
        assert plain.config.enforce_visibility is False
        assert plain.config.offload_over_chars is None
        assert plain.invoke(state)["messages"][0].content == "x" * 2_000
    assert BudgetConfig(max_tools=3).override(max_parallel=2).model_fields_set == {
        "max_tools",
        "max_parallel",
    }
