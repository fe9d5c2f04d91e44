"""Regressions of the reliability probes (issue 14, "Found today"): hostile or careless
tool calls, tools that misbehave under timeouts, graph input from a client, caches.

Each test names the probe it guards. No test asserts a duration: a bounded answer is
shown by what the answer is (short, an error, given while the tool still runs).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
import time
import weakref
from typing import Any

import pytest
from agent_tools import ConcurrencyProbe, Recorder, ai_calls, call, recording_catalog
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import MemorySaver

from langgraph_toolbudget import ToolCatalog, ToolExecutor, create_toolbudget_agent
from langgraph_toolbudget.core import meta as meta_module
from langgraph_toolbudget.core import terms
from langgraph_toolbudget.core.coercion import MISSING_NAME, repair_tool_calls
from langgraph_toolbudget.core.limits import MAX_ARG_DEPTH, MAX_PATTERN_CHARS
from langgraph_toolbudget.core.search import ToolIndex
from langgraph_toolbudget.demo.example_catalog import build_example_catalog, example_tools
from langgraph_toolbudget.demo.workspace import KEEP, Workspace
from langgraph_toolbudget.execution import pipeline as pipeline_module
from langgraph_toolbudget.execution import policy as policy_module
from langgraph_toolbudget.execution.pipeline import ToolThreads, _InPool
from langgraph_toolbudget.testing import ScriptedChatModel

MODES = ["sequential", "parallel_safe"]
APIS = ["invoke", "ainvoke"]
SHORT = 2_000  # every error answer below fits in this many characters


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def catalog(rec) -> ToolCatalog:
    return recording_catalog(rec)


async def answer(node: Any, calls: list[dict[str, Any]], visible: list[str], api: str) -> Any:
    state = {"messages": [HumanMessage("help"), ai_calls(*calls)], "selected_tools": visible}
    if api == "invoke":
        return await asyncio.to_thread(node.invoke, state)
    return await node.ainvoke(state)


def nested_dict(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


# --- 1. deep nesting: an error message, never a RecursionError ------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("name", "args"),
    [
        pytest.param("add_tool", {"tool_names": "[" * 2000}, id="add_tool-json-2000-brackets"),
        pytest.param("add_tool", {"tool_names": nested_dict(5000)}, id="add_tool-dict-5000-deep"),
        pytest.param("search_tools", {"query": nested_dict(5000)}, id="search-dict-5000-deep"),
        pytest.param("request_more_tools", {"categories": "{" * 5000}, id="categories-braces"),
        pytest.param("get_weather", {"__arg1": "{" * 2000}, id="tool-__arg1-braces"),
        pytest.param("get_weather", {"city": nested_dict(5000)}, id="tool-dict-5000-deep"),
        pytest.param("add_task", {"project": "a", "title": "[" * 3000}, id="tool-string-arg"),
    ],
)
async def test_deeply_nested_arguments_get_one_short_answer(catalog, name, args, api):
    calls = [call(name, "deep", **args)]
    visible = ["get_weather", "add_task"]
    out = await answer(ToolExecutor(catalog), calls, visible, api)
    (message,) = out["messages"]
    assert message.tool_call_id == "deep"
    if message.status == "error":  # a tool that ran may echo its (string) argument itself
        assert len(message.content) < SHORT
    if isinstance(next(iter(args.values())), dict):
        assert f"nested deeper than {MAX_ARG_DEPTH} levels" in message.content
        assert message.status == "error"


def test_deep_arguments_in_a_tool_call_are_refused_before_the_tool_runs(catalog, rec):
    deep: Any = ["leaf"]
    for _ in range(MAX_ARG_DEPTH + 5):
        deep = [deep]
    calls = [call("add_task", "c1", project="apollo", title=deep)]
    out = ToolExecutor(catalog).invoke(
        {"messages": [HumanMessage("x"), ai_calls(*calls)], "selected_tools": ["add_task"]}
    )
    assert out["messages"][0].status == "error"
    assert rec.names == []


# --- 2. regex stalls and unbounded echoes ---------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param("(a*)*" * 2000, id="nested-stars-10KB"),
        pytest.param("(a*)*" * 20000, id="nested-stars-100KB"),
        pytest.param(".{0,1000}" * 30, id="counted-repetitions"),
        pytest.param("x" * 10_000_000, id="10MB"),
    ],
)
async def test_search_tools_answers_hostile_patterns_briefly(catalog, pattern, api):
    out = await answer(ToolExecutor(catalog), [call("search_tools", "s", query=pattern)], [], api)
    (message,) = out["messages"]
    assert message.tool_call_id == "s"
    assert len(message.content) < SHORT


def test_a_pattern_over_the_limit_skips_the_regex_engine(catalog):
    # As a regex, "(get|weather)" plus padding would match by alternation; over the limit
    # it is fuzzy-matched as text, so the answer is the fuzzy one.
    long = "weather " + "z" * MAX_PATTERN_CHARS
    result = catalog.index.regex_search(long)
    assert result.error is None and result.fuzzy
    short = catalog.index.regex_search("weather")
    assert short.found and not short.fuzzy


def test_counted_repetitions_are_refused_by_the_regex_engine(catalog):
    result = catalog.index.regex_search(".{0,1000}" * 30)
    assert result.error is not None and "too large" in result.error
    assert len(result.error) < SHORT


@pytest.mark.parametrize("api", APIS)
async def test_unknown_names_are_echoed_bounded(catalog, api):
    huge = "x" * 1_000_000
    calls = [
        call(huge, "u1"),
        call("add_tool", "u2", tool_names=[huge, "y" * 300]),
        call("request_more_tools", "u3", categories=[f"c{i}" for i in range(100_000)]),
    ]
    out = await answer(ToolExecutor(catalog, max_meta_calls=5), calls, [], api)
    by_id = {m.tool_call_id: m for m in out["messages"]}
    assert set(by_id) == {"u1", "u2", "u3"}
    for message in by_id.values():
        assert len(message.content) < SHORT
    assert "(1000000 characters)" in by_id["u1"].content
    assert "and 99980 more" in by_id["u3"].content


async def test_meta_calls_run_off_the_event_loop_under_ainvoke(catalog, monkeypatch):
    threads: list[threading.Thread] = []
    handle = meta_module.MetaToolHandler.handle

    def recording_handle(self: Any, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return handle(self, *args, **kwargs)

    monkeypatch.setattr(meta_module.MetaToolHandler, "handle", recording_handle)
    await answer(ToolExecutor(catalog), [call("search_tools", "s", query="weather")], [], "ainvoke")
    assert threads and threading.current_thread() not in threads


async def test_unknown_names_are_matched_off_the_event_loop_under_ainvoke(catalog, monkeypatch):
    """The closest names to a call's unknown tool name: fuzzy matching, in a worker thread."""
    threads: list[threading.Thread] = []
    closest = policy_module.closest_tools

    def recording_closest(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return closest(*args, **kwargs)

    monkeypatch.setattr(policy_module, "closest_tools", recording_closest)
    out = await answer(ToolExecutor(catalog), [call("get_wether", "u", city="Lima")], [], "ainvoke")
    assert "Closest tools: get_weather" in out["messages"][0].content
    assert threads and threading.current_thread() not in threads


HUGE = 2**20000  # str, repr, f-strings and json.dumps of it raise ValueError (4,300 digits)


@pytest.mark.parametrize("api", APIS)
async def test_an_integer_python_will_not_write_gets_an_answer_from_every_call(catalog, rec, api):
    """A model's int of over 4,300 digits (native, or a CodeMode or Pythonic value) in any
    argument: every call is answered, what it sent echoed bounded (in hex), nothing raised."""
    calls = [
        call("request_more_tools", "r1", categories=["weather"], reason=HUGE),
        call("request_more_tools", "r2", categories=["weather"], reason=["rain", HUGE]),
        call("request_more_tools", "r3", __raw_arguments__=HUGE),
        call("add_tool", "a1", tool_names=[HUGE]),
        call("search_tools", "s1", query=HUGE),
        call("get_weather", "t1", __raw_arguments__=HUGE),
        call("get_weather", "t2", city=HUGE),
        call("get_weather", "t3", city={HUGE: "key"}),
        call(str(HUGE % 10**50), "u1", q=HUGE),
    ]
    out = await answer(ToolExecutor(catalog), calls, ["get_weather"], api)
    by_id = {m.tool_call_id: m for m in out["messages"]}
    assert list(by_id) == [c["id"] for c in calls]
    assert all(m.status == "error" and len(m.content) < SHORT for m in by_id.values())
    assert rec.runs == []
    for i in ("r1", "r2", "r3", "t1", "t2", "t3"):
        assert "0x1000000000" in by_id[i].content, by_id[i].content  # what it sent, in hex
    for i in ("t2", "t3"):
        assert "so it was not run" in by_id[i].content  # not "the tool failed": it never ran
    assert by_id["r1"].content.startswith(
        "Error: request_more_tools takes 'reason' as text (why you need more tools); got int 0x1"
    )


@pytest.mark.parametrize("api", APIS)
async def test_a_built_in_that_raises_is_one_error_message_not_the_batchs_end(
    catalog, api, monkeypatch, caplog
):
    """A family must answer bad arguments itself; if one raises all the same (a bug), its
    call gets an error message (logged) and the batch's other calls are answered."""
    search = meta_module.MetaToolHandler._search_tools

    def broken(self: Any, args: Any, context: Any) -> Any:
        if args.get("query") == "boom":
            raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")
        return search(self, args, context)

    monkeypatch.setattr(meta_module.MetaToolHandler, "_search_tools", broken)
    calls = [call("search_tools", "s1", query="boom"), call("search_tools", "s2", query="weather")]
    calls.append(call("get_weather", "t1", city="Oslo"))
    out = await answer(ToolExecutor(catalog), calls, ["get_weather"], api)
    first, second, weather = out["messages"]
    assert first.status == "error" and first.content == (
        "Error: search_tools could not answer this call (ValueError: Exceeds the limit (4300 "
        "digits) for integer string conversion). Call it again with other arguments, or go on "
        "without it."
    )
    assert second.status == "success" and "weather" in second.content
    assert weather.content.startswith("Oslo")
    assert "built-in search_tools raised" in caplog.text


def test_request_more_tools_answers_a_huge_reason_under_the_middleware():
    """It raised out of the executor. A native reply's int outside 64 bits is now its text
    before it reaches the state (hex past 4,300 digits, as a Pythonic hex literal is kept), so
    the meta-tool reads it as the reason's text, and a checkpointed thread stores the reply."""
    from langchain.agents import create_agent

    from langgraph_toolbudget import ToolBudgetMiddleware

    reply = ai_calls(call("request_more_tools", "r1", categories=["weather"], reason=HUGE))
    model = ScriptedChatModel(responses=[reply, AIMessage("done")], cycle=False)
    middleware = [ToolBudgetMiddleware(build_example_catalog())]
    agent = create_agent(model, middleware=middleware, checkpointer=MemorySaver())
    out = agent.invoke(
        {"messages": [HumanMessage("weather in Oslo?")]}, {"configurable": {"thread_id": "t"}}
    )
    (message,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "success" and message.content == "No new tools added."
    (stored,) = [c for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert stored["args"] == {"categories": ["weather"], "reason": hex(HUGE)}
    assert out["messages"][-1].content == "done"


# --- 3. SystemExit / KeyboardInterrupt in a tool: no hang -----------------------------------


def _exiting_catalog(error: type[BaseException]) -> ToolCatalog:
    def boom(x: int = 0) -> str:
        raise error(3)

    def fine(x: int = 0) -> str:
        return f"fine {x}"

    tools = [
        StructuredTool.from_function(func=boom, name="boom", description="Raises."),
        StructuredTool.from_function(func=fine, name="fine", description="Answers."),
    ]
    pure = {"is_pure": True}
    return ToolCatalog.from_tools(
        tools,
        categories={"misc": ["boom", "fine"]},
        tool_metadata={"boom": pure, "fine": {**pure, "timeout_s": 5}},
    )


def _invoke_in_thread(node: Any, state: dict[str, Any]) -> tuple[bool, Any]:
    """(finished within 20 s, result or exception): a hang shows as not finished."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(node.invoke(state))
        except BaseException as exc:  # noqa: BLE001 - the test inspects what was raised
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    return not thread.is_alive(), (box[0] if box else None)


@pytest.mark.parametrize("error", [SystemExit, KeyboardInterrupt])
def test_a_tool_raising_system_exit_in_parallel_does_not_hang_later_calls(error):
    node = ToolExecutor(_exiting_catalog(error), mode="parallel_safe")
    calls = [call("boom", "b1"), call("fine", "f1", x=1)]
    state = {"messages": [HumanMessage("x"), ai_calls(*calls)], "selected_tools": ["boom", "fine"]}
    finished, result = _invoke_in_thread(node, state)
    assert finished, "invoke hung after a tool raised " + error.__name__
    assert isinstance(result, error)  # raised to the caller, as a plain sync call would
    # A later call with a timeout (through the background loop) still works.
    later = {"messages": [HumanMessage("x"), ai_calls(call("fine", "f2", x=2))]}
    finished, result = _invoke_in_thread(node, {**later, "selected_tools": ["fine"]})
    assert finished
    assert [m.content for m in result["messages"]] == ["fine 2"]


# --- 4./5. timeouts: answered at the deadline, late results dropped, groups kept ------------


def _timed_catalog(body: Any, *, is_async: bool, timeout: float, **extra: Any) -> ToolCatalog:
    kind = {"coroutine": body} if is_async else {"func": body}
    slow = StructuredTool.from_function(name="slow", description="Slow.", **kind)
    return ToolCatalog.from_tools(
        [slow, *extra.pop("tools", [])],
        tool_metadata={"slow": {"timeout_s": timeout}, **extra.pop("tool_metadata", {})},
    )


@pytest.mark.parametrize("api", APIS)
async def test_an_async_tool_swallowing_its_cancellation_is_answered_at_the_deadline(api):
    finished = threading.Event()

    async def stubborn(x: int = 0) -> str:
        for _ in range(40):
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue  # swallows the cancellation and carries on
        finished.set()
        return "late result"

    catalog = _timed_catalog(stubborn, is_async=True, timeout=0.3)
    out = await answer(ToolExecutor(catalog), [call("slow", "t1")], ["slow"], api)
    (message,) = out["messages"]
    assert not finished.is_set(), "the caller waited for the late result"
    assert message.status == "error" and "timed out after 0.3 s" in message.content
    assert "late result" not in message.content


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", MODES)
async def test_a_sync_tool_past_its_timeout_is_answered_while_its_thread_runs(api, mode):
    release = threading.Event()
    ended = threading.Event()

    def stuck(x: int = 0) -> str:
        release.wait(10)
        ended.set()
        return "late result"

    catalog = _timed_catalog(stuck, is_async=False, timeout=0.2)
    try:
        out = await answer(ToolExecutor(catalog, mode=mode), [call("slow", "t1")], ["slow"], api)
        assert not ended.is_set()
        (message,) = out["messages"]
        assert message.status == "error" and "timed out" in message.content
    finally:
        release.set()


def _group_catalog(probe: ConcurrencyProbe, release: threading.Event) -> ToolCatalog:
    def slow(x: int = 0) -> str:
        start = probe.enter("slow", False)
        try:
            release.wait(10)
        finally:
            probe.exit("slow", False, start)
        return "slow done"

    def other(x: int = 0) -> str:
        start = probe.enter("other", False)
        probe.exit("other", False, start)
        return "other done"

    group = {"concurrency_group": "db"}
    probe.group_of.update({"slow": "db", "other": "db"})
    other_tool = StructuredTool.from_function(func=other, name="other", description="Other.")
    return _timed_catalog(
        slow,
        is_async=False,
        timeout=0.2,
        tools=[other_tool],
        tool_metadata={"slow": {"timeout_s": 0.2, **group}, "other": group},
    )


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", MODES)
async def test_a_group_stays_exclusive_until_an_abandoned_call_really_ends(api, mode):
    probe, release = ConcurrencyProbe(), threading.Event()
    node = ToolExecutor(_group_catalog(probe, release), mode=mode)
    try:
        calls = [call("slow", "a"), call("other", "b")]
        out = await answer(node, calls, ["slow", "other"], api)
        first, second = out["messages"]
        assert "timed out" in first.content
        # `slow` still runs (it waits for `release`): `other` of its group must not start.
        assert second.status == "error" and "still running" in second.content
        assert probe.violations == []
        # The next batch too, until the thread ends; then the group is free again.
        out = await answer(node, [call("other", "c")], ["other"], api)
        assert "still running" in out["messages"][0].content
        release.set()
        for _ in range(100):
            if any(name == "slow" for name, _, _ in probe.intervals):
                break
            await asyncio.sleep(0.05)
        out = await answer(node, [call("other", "d")], ["other"], api)
        assert out["messages"][0].content == "other done"
        assert probe.violations == []
    finally:
        release.set()


async def test_a_group_call_waiting_for_an_abandoned_call_runs_after_it():
    probe, release = ConcurrencyProbe(), threading.Event()
    node = ToolExecutor(_group_catalog(probe, release), mode="parallel_safe")
    threading.Timer(0.25, release.set).start()  # ends after the deadline, within the grace
    out = await answer(node, [call("slow", "a"), call("other", "b")], ["slow", "other"], "ainvoke")
    release.set()
    second = out["messages"][1]
    assert probe.violations == []
    if second.content == "other done":  # ran: only once `slow` had ended
        (slow_end,) = [end for name, _, end in probe.intervals if name == "slow"]
        (other_start,) = [start for name, start, _ in probe.intervals if name == "other"]
        assert other_start >= slow_end
    else:  # a loaded machine: `slow` outlived the grace, and `other` was refused
        assert "still running" in second.content


@pytest.mark.parametrize("api", APIS)
async def test_a_call_waits_for_an_abandoned_call_only_while_its_batch_has_time(api):
    release, ended = threading.Event(), threading.Event()

    def stuck(x: int = 0) -> str:
        release.wait(10)
        ended.set()
        return "late result"

    def answer_now(x: int = 0) -> str:
        return "done"

    group = {"concurrency_group": "db"}
    catalog = _timed_catalog(
        stuck,
        is_async=False,
        timeout=1.0,
        tools=[
            StructuredTool.from_function(func=answer_now, name=name, description="Answers.")
            for name in ("quick", "patient")
        ],
        tool_metadata={
            "slow": {"timeout_s": 1.0, **group},
            "quick": {"timeout_s": 0.1, **group},
            "patient": {"timeout_s": 1.3, **group},
        },
    )
    # `slow` is abandoned at 1 s and ends at 1.65 s, within its grace (until 2 s) but after
    # the deadlines of `quick` (0.1 s: gone when its turn comes) and `patient` (1.3 s).
    threading.Timer(1.65, release.set).start()
    calls = [call("slow", "a"), call("quick", "b"), call("patient", "c")]
    try:
        out = await answer(ToolExecutor(catalog), calls, ["slow", "quick", "patient"], api)
        assert not ended.is_set()  # no call waited for `slow` past its own deadline
    finally:
        release.set()
    slow, quick, patient = out["messages"]
    assert "timed out" in slow.content
    assert quick.status == "error" and "counts from the start of its batch" in quick.content
    assert patient.status == "error" and "still running" in patient.content


@pytest.mark.parametrize("api", APIS)
async def test_abandoned_calls_that_still_run_count_toward_their_groups_limit(api):
    probe, release = ConcurrencyProbe(), threading.Event()
    probe.group_of.update({"slow": "api", "fetch": "api"})

    def stuck(x: int = 0) -> str:
        start = probe.enter("slow", True)
        try:
            release.wait(10)
        finally:
            probe.exit("slow", True, start)
        return "late result"

    def fetch(x: int = 0) -> str:
        start = probe.enter("fetch", True)
        time.sleep(0.2)
        probe.exit("fetch", True, start)
        return "fetched"

    # Each `slow` must start in a thread before its timeout to linger (one that never
    # started is refused and nothing lingers): 0.5 s leaves a loaded machine room for it.
    api_group = {"concurrency_group": "api", "is_pure": True, "max_concurrency": 2}
    catalog = _timed_catalog(
        stuck,
        is_async=False,
        timeout=0.5,
        tools=[StructuredTool.from_function(func=fetch, name="fetch", description="Fetch.")],
        tool_metadata={"slow": {"timeout_s": 0.5, **api_group}, "fetch": api_group},
    )
    node, visible = ToolExecutor(catalog), ["slow", "fetch"]
    try:
        # `slow` is abandoned at 0.5 s and runs on: beside it, one `fetch` at a time.
        batch = [call("slow", "a"), call("fetch", "b"), call("fetch", "c"), call("fetch", "d")]
        out = await answer(node, batch, visible, api)
        assert "timed out after 0.5 s" in out["messages"][0].content
        assert [m.content for m in out["messages"][1:]] == ["fetched"] * 3
        assert probe.max_by_group["api"] == 2
        out = await answer(node, [call("fetch", "e"), call("fetch", "f")], visible, api)
        assert [m.content for m in out["messages"]] == ["fetched"] * 2
        # Two abandoned calls fill the limit: a call of the group waits out their grace,
        # then is refused.
        out = await answer(node, [call("slow", "g"), call("fetch", "h")], visible, api)
        assert "timed out after 0.5 s" in out["messages"][0].content
        assert out["messages"][1].status == "error"
        assert "the group runs at most 2 calls at once" in out["messages"][1].content
        assert probe.max_by_group["api"] == 2
    finally:
        release.set()


@pytest.mark.parametrize("api", APIS)
async def test_a_call_waiting_for_room_in_its_group_starts_when_an_abandoned_call_ends(api):
    """The end of an abandoned call frees its place in the group's limit at once: the call
    waiting for room starts then, not when some other call of the group ends."""
    release, waiting_started = threading.Event(), threading.Event()
    order: list[str] = []

    def slow(x: int = 0) -> str:
        release.wait(10)
        return "late result"

    def long_fetch(x: int = 0) -> str:
        waiting_started.wait(10)  # ends only when `fetch` starts (or after 10 s)
        order.append("long_fetch ended")
        return "long"

    def fetch(x: int = 0) -> str:
        order.append("fetch started")
        waiting_started.set()
        return "fetched"

    api_group = {"concurrency_group": "api", "is_pure": True, "max_concurrency": 2}
    tools = [
        StructuredTool.from_function(func=f, name=f.__name__, description="Fetch.")
        for f in (long_fetch, fetch)
    ]
    catalog = _timed_catalog(
        slow,
        is_async=False,
        timeout=0.1,
        tools=tools,
        tool_metadata={
            "slow": {"timeout_s": 0.1, **api_group},
            "long_fetch": api_group,
            "fetch": api_group,
        },
    )
    # `slow` and `long_fetch` fill the limit; `slow` is abandoned at 0.1 s and still counts
    # until it ends at 0.5 s: then `fetch` has room, while `long_fetch` still runs.
    threading.Timer(0.5, release.set).start()
    calls = [call("slow", "a"), call("long_fetch", "b"), call("fetch", "c")]
    try:
        out = await answer(ToolExecutor(catalog), calls, ["slow", "long_fetch", "fetch"], api)
    finally:
        release.set()
    assert [m.content for m in out["messages"][1:]] == ["long", "fetched"]
    assert order == ["fetch started", "long_fetch ended"]


class _Sends:
    """Impure tools ``send_<i>``, each in a concurrency group of its own (they may run side
    by side), that record each start; a call with ``hold=True`` waits for ``release``."""

    def __init__(self, timeouts: dict[str, float]) -> None:
        self.release = threading.Event()
        self.started: list[str] = []
        self.lock = threading.Lock()
        self.names = list(timeouts)
        tools = [self._tool(name) for name in self.names]
        metadata = {n: {"concurrency_group": n, "timeout_s": t} for n, t in timeouts.items()}
        self.catalog = ToolCatalog.from_tools(tools, tool_metadata=metadata)

    def _tool(self, name: str) -> StructuredTool:
        def send(text: str, hold: bool = True) -> str:
            with self.lock:
                self.started.append(name)
            if hold:
                self.release.wait(10)
            return "sent"

        return StructuredTool.from_function(
            func=send, name=name, description="Send (a side effect)."
        )

    def ran(self) -> list[str]:
        with self.lock:
            return list(self.started)


@pytest.mark.parametrize("api", APIS)
async def test_a_call_whose_time_ran_out_waiting_for_a_pool_place_never_runs(api):
    """Review 32c: calls 0 and 1 hang in the two places of the pool, calls 2 and 3 wait for
    one. At the deadline the places of the abandoned calls are given back: the waiting calls
    must not start then (their callers are answered at that deadline), and their answer says
    they were not run, not "timed out and was cancelled" (an invitation to retry a side
    effect that may then run twice)."""
    sends = _Sends({f"send_{i}": 0.5 for i in range(4)})
    node = ToolExecutor(sends.catalog, max_parallel=2)
    calls = [call(name, str(i), text="hi") for i, name in enumerate(sends.names)]
    try:
        out = await answer(node, calls, sends.names, api)
        await asyncio.sleep(1.0)  # well past the deadline: a late start would show by now
        ran = sends.ran()
        messages = {m.tool_call_id: m for m in out["messages"]}
        assert len(ran) <= 2, f"calls started after their deadline: {ran}"
        for i, name in enumerate(sends.names):
            message = messages[str(i)]
            assert message.status == "error"
            if name in ran:
                assert "timed out" in message.content
            else:
                assert f"Error: tool {name!r} was not run" in message.content, message.content
        # A call that never ran does not hold its group: the same tool runs again at once,
        # while the abandoned calls still run.
        not_run = next(name for name in sends.names if name not in ran)
        again = await answer(node, [call(not_run, "again", text="hi", hold=False)], [not_run], api)
        assert again["messages"][0].content == "sent"
    finally:
        sends.release.set()


async def test_a_cancelled_runs_calls_waiting_for_a_place_never_start():
    """Review 34a: a run stopped (its task cancelled, as LangGraph server's stop does) while
    6 of its 8 calls waited for the pool's 2 places: the running calls gave their places back
    as they took the cancel, before the waiting calls' own tasks had cancelled them, and a
    waiting call of the stopped run started."""
    sends = _Sends({f"send_{i}": 5.0 for i in range(8)})
    node = ToolExecutor(sends.catalog, max_parallel=2)
    calls = [call(name, str(i), text="hi") for i, name in enumerate(sends.names)]
    try:
        for _ in range(5):
            sends.release.clear()
            sends.started.clear()
            run = asyncio.ensure_future(answer(node, calls, sends.names, "ainvoke"))
            for _ in range(100):  # both places taken
                if len(sends.ran()) == 2:
                    break
                await asyncio.sleep(0.02)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            await asyncio.sleep(0.3)  # a late start would show by now
            assert len(sends.ran()) == 2, f"calls of a cancelled run started: {sends.ran()}"
            sends.release.set()
            await asyncio.sleep(0.3)  # the abandoned calls end: their places come back
    finally:
        sends.release.set()


@pytest.mark.parametrize("api", APIS)
async def test_a_call_waiting_for_a_place_held_by_another_run_is_not_run_past_its_time(api):
    """Two runs share the executor's pool: one run's calls hold both places (they answer in
    time); the other run's calls run out of time waiting, are answered as not run, and never
    start once the places are free."""
    sends = _Sends({"hold_0": 30.0, "hold_1": 30.0, "send_2": 0.5, "send_3": 0.5})
    node = ToolExecutor(sends.catalog, max_parallel=2)
    holding = [call(name, name, text="hi") for name in ("hold_0", "hold_1")]
    first = asyncio.ensure_future(answer(node, holding, sends.names, api))
    try:
        for _ in range(200):  # both places taken
            if len(sends.ran()) == 2:
                break
            await asyncio.sleep(0.05)
        assert sorted(sends.ran()) == ["hold_0", "hold_1"]
        waiting = [call(name, name, text="hi") for name in ("send_2", "send_3")]
        out = await answer(node, waiting, sends.names, api)
        for message in out["messages"]:
            assert message.status == "error"
            assert f"Error: tool {message.name!r} was not run" in message.content, message.content
    finally:
        sends.release.set()
    held = await first
    assert [m.content for m in held["messages"]] == ["sent", "sent"]
    await asyncio.sleep(0.5)  # the places are free now: a waiting call left behind would start
    assert sorted(sends.ran()) == ["hold_0", "hold_1"]


def test_the_pools_threads_go_to_calls_in_the_order_they_asked():
    """Review 35a: the pool's places were a ``threading.Semaphore``, so the thread that gave
    one back took it again for the next queued call before a waiting thread woke: a call
    that asked first waited past its deadline while calls submitted after it ran. Here B
    asks right after A; 1.5 s of short calls are submitted after B."""
    pool = ToolThreads(1, "order")
    order: list[str] = []

    def work(name: str, seconds: float) -> str:
        order.append(name)
        time.sleep(seconds)
        return name

    first = pool.submit(work, "A", 0.1)
    time.sleep(0.02)
    second = pool.submit(work, "B", 0.0, deadline=time.monotonic() + 1.0)
    later = []
    stop = time.monotonic() + 1.5
    while time.monotonic() < stop:
        later.append(pool.submit(work, f"C{len(later)}", 0.02))
        time.sleep(0.005)
    assert first.result(20) == "A"
    assert second.result(20) == "B"  # not cancelled at its deadline
    for future in later:
        future.result(20)
    assert order.index("B") == 1, order[:5]


def test_a_pooled_call_starts_only_if_its_wait_has_not_ended():
    """Review 36a: the thread's start and the end of the call's wait for a thread were two
    decisions (the thread started, then told the event loop, which meanwhile had answered
    "timed out" for a call that then ran with none of its time). One lock decides now:
    once the wait has ended without a thread, none starts; once a thread started, the wait's
    end reads its start time."""
    threads = ToolThreads(1, "claim")
    let_go = threading.Event()
    ran: list[str] = []
    holder = threads.submit(let_go.wait, 20)
    try:
        late = _InPool(
            StructuredTool.from_function(lambda: "late", name="late", description="Late."), threads
        )
        future = threads.submit(lambda: ran.append("late"), on_start=late._start)
        assert late.stop_waiting() is None  # the wait ends while the only place is taken
    finally:
        let_go.set()
    holder.result(20)
    with pytest.raises(concurrent.futures.CancelledError):
        future.result(20)
    assert ran == []

    prompt = _InPool(
        StructuredTool.from_function(lambda: "prompt", name="prompt", description="Prompt."),
        threads,
    )
    assert threads.submit(lambda: "ran", on_start=prompt._start).result(20) == "ran"
    started = prompt.stop_waiting()
    assert started is not None and started == prompt.began.result(0)


def test_two_first_calls_at_once_get_one_pool(monkeypatch):
    """Review 37a: ``ToolThreads`` made its pool on first use without a lock: two event
    loops' first calls at once could each make one, and ``max_parallel=1`` ran 2 calls at
    once. (Making the pool is slowed down so that both first calls meet there.)"""

    class SlowToMake(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            time.sleep(0.2)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(pipeline_module, "ThreadPoolExecutor", SlowToMake)
    threads = ToolThreads(1, "first")
    lock, now, most = threading.Lock(), [0], [0]

    def work() -> None:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.2)
        with lock:
            now[0] -= 1

    futures: list[concurrent.futures.Future[None]] = []
    starters = [threading.Thread(target=lambda: futures.append(threads.submit(work)))]
    starters.append(threading.Thread(target=lambda: futures.append(threads.submit(work))))
    for starter in starters:
        starter.start()
    for starter in starters:
        starter.join()
    for future in futures:
        future.result(20)
    assert most[0] == 1


# --- 6. selected_tools from a graph's input -------------------------------------------------


def _agent(catalog: ToolCatalog, *responses: AIMessage) -> Any:
    model = ScriptedChatModel(responses=[*responses, AIMessage("done")], cycle=False)
    return create_toolbudget_agent(model, catalog, max_tools=4).compile()


@pytest.mark.parametrize("bad", [{"add": "x"}, [1, 2], "get_weather", {"replace": [None]}])
def test_selected_tools_of_the_wrong_shape_is_dropped_from_input_and_refused_by_update_state(
    catalog, bad
):
    app = create_toolbudget_agent(
        ScriptedChatModel(responses=[AIMessage("done")]), catalog, max_tools=4
    ).compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "shape"}}
    out = app.invoke({"messages": [HumanMessage("hi")], "selected_tools": bad}, config)
    assert out["messages"][-1].content == "done"  # run input never writes selected_tools
    with pytest.raises(Exception, match="must be a list of tool names") as info:
        app.update_state(config, {"selected_tools": bad})
    assert "selected_tools" in str(info.value)


@pytest.mark.parametrize("api", APIS)
async def test_unknown_and_manual_names_from_the_input_do_not_stay_or_run(rec, api):
    catalog = recording_catalog(rec, tool_metadata={"list_projects": {"include": "manual"}})
    calls = ai_calls(call("list_projects", "m1"), call("ghost", "g1"))
    app = _agent(catalog, calls)
    inputs = {
        "messages": [HumanMessage("list my projects")],
        "selected_tools": ["ghost", "list_projects", "purge_database", "admin_shutdown"],
    }
    out = await (app.ainvoke(inputs) if api == "ainvoke" else asyncio.to_thread(app.invoke, inputs))
    assert rec.names == []
    assert set(out["selected_tools"]) <= set(catalog.tool_names)
    assert not {"ghost", "list_projects", "purge_database", "admin_shutdown"} & set(
        out["selected_tools"]
    )
    refused = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in refused] == ["error", "error"]


# --- 7. caches stay bounded ------------------------------------------------------------------


def test_long_messages_are_not_cached_by_the_word_splitter():
    before = terms._split_short_words.cache_info().currsize
    for i in range(200):
        terms.tokenize(f"message {i} " + "lorem ipsum dolor " * 1200)  # ~20 KB each
    assert terms._split_short_words.cache_info().currsize - before <= 2


def test_a_discarded_tool_index_is_freed(catalog):
    refs = []
    for _ in range(20):
        index = ToolIndex([(s.name, s.description, ["arg"]) for s in catalog.specs])
        index.rank("weather in Paris")
        index.regex_search("zzz unknown words")  # builds the fuzzy matcher
        refs.append(weakref.ref(index))
    del index
    gc.collect()
    assert [r for r in refs if r() is not None] == []


def test_the_demo_workspace_keeps_only_the_most_recent_records():
    # The memory soak's last residual: every message posted and issue created was kept.
    ws = Workspace()
    tools = {t.name: t for t in example_tools(ws)[0]}
    for i in range(KEEP + 5):
        tools["send_message"].invoke({"channel": "general", "text": f"hello {i}"})
        tools["create_issue"].invoke({"repo": "acme/app", "title": f"bug {i}"})
        tools["write_file"].invoke({"path": f"/new/{i}.md", "content": "x"})
    assert len(ws.messages["general"]) == KEEP and ws.messages["general"][0] == "hello 5"
    assert len(ws.issues) == KEEP and ws.issues[0]["title"] == "bug 5"
    closed = tools["close_issue"].invoke({"repo": "acme/app", "number": KEEP + 5})
    assert closed == f"Closed issue #{KEEP + 5} in acme/app."
    created = tools["create_issue"].invoke({"repo": "acme/app", "title": "one more"})
    assert created == f"Created issue #{KEEP + 6} in acme/app: one more"  # numbers never repeat
    assert len(ws.files) == KEEP and "/notes/todo.md" not in ws.files
    assert tools["read_file"].invoke({"path": f"/new/{KEEP + 4}.md"}) == "x"
    for i in range(KEEP):
        tools["create_channel"].invoke({"name": f"team-{i}"})
    assert len(ws.messages) == KEEP and "general" not in ws.messages  # the oldest channels go
    assert list(ws.messages)[-1] == f"team-{KEEP - 1}"


def test_the_demo_slack_tools_take_a_channel_with_or_without_its_hash():
    # Their docstrings say "such as #general", so a model passes "#general": it is the
    # channel "general", not a second one, and the answers do not double the "#".
    ws = Workspace()
    tools = {t.name: t for t in example_tools(ws)[0]}
    assert tools["send_message"].invoke({"channel": "#general", "text": "a"}) == (
        "Sent to #general: a"
    )
    tools["send_message"].invoke({"channel": "general", "text": "b"})
    assert list(ws.messages) == ["general", "dev"] and ws.messages["general"] == ["a", "b"]
    assert tools["read_channel_history"].invoke({"channel": "#general"}) == "a\nb"
    assert tools["create_channel"].invoke({"name": " #random"}) == "Created #random"
    assert tools["list_channels"].invoke({}) == ["dev", "general", "random"]
    assert tools["add_reaction"].invoke({"channel": "#random", "emoji": "tada"}) == (
        "Reacted :tada: in #random"
    )
    assert tools["read_channel_history"].invoke({"channel": "random"}) == "#random has no messages."


# --- 8. invalid calls without an id or a name; add_tool with non-JSON arguments -------------


@pytest.mark.parametrize("api", APIS)
async def test_invalid_calls_without_id_or_name_are_answered(catalog, api):
    bad = AIMessage(
        "",
        tool_calls=[{"name": "get_weather", "args": {"city": "Lima"}, "id": None}],
        invalid_tool_calls=[
            {"name": None, "args": "{x", "id": "n1", "error": None, "type": "invalid_tool_call"},
            {"name": "get_weather", "args": "{x", "id": None, "error": None,
             "type": "invalid_tool_call"},
        ],
    )  # fmt: skip
    repaired = repair_tool_calls(bad)
    assert repaired.invalid_tool_calls == []
    ids = [c["id"] for c in repaired.tool_calls]
    assert len(set(ids)) == 3 and all(ids)
    state = {"messages": [HumanMessage("x"), repaired], "selected_tools": ["get_weather"]}
    node = ToolExecutor(catalog)
    out = await (node.ainvoke(state) if api == "ainvoke" else asyncio.to_thread(node.invoke, state))
    assert [m.tool_call_id for m in out["messages"]] == ids
    nameless = out["messages"][1]
    assert nameless.name == MISSING_NAME and "no tool name" in nameless.content
    # Calls that never went through repair_tool_calls (another agent node) are answered too,
    # under new ids for the answers alone: the reply in the state is never rewritten.
    reply = bad.model_copy(update={"id": "r1"})
    raw = {"messages": [HumanMessage("x"), reply], "selected_tools": ["get_weather"]}
    lima, nameless, unread = ToolExecutor(catalog).invoke(raw)["messages"]
    assert lima.tool_call_id.startswith("call_") and lima.content.startswith("Lima")
    assert unread.tool_call_id not in (lima.tool_call_id, None)
    assert nameless.tool_call_id == "n1" and "no tool name" in nameless.content
    assert unread.tool_call_id.startswith("call_") and "not valid JSON" in unread.content


def test_add_tool_with_non_json_arguments_says_not_valid_json(catalog):
    bad = AIMessage(
        "",
        invalid_tool_calls=[{"name": "add_tool", "args": "{tool_names: [get_weather", "id": "a1",
                             "error": None, "type": "invalid_tool_call"}],
    )  # fmt: skip
    state = {"messages": [HumanMessage("x"), repair_tool_calls(bad)], "selected_tools": []}
    (message,) = ToolExecutor(catalog).invoke(state)["messages"]
    assert message.status == "error"
    assert "not valid JSON" in message.content and '{"tool_names"' in message.content
    assert "Not added" not in message.content


@pytest.mark.timeout(20)  # a hang guard: before the bound, 9**9**9 never returned
@pytest.mark.parametrize("expression", ["9**9**9", "10**10**10", "2**99999999", "1+" * 500 + "1"])
def test_the_demo_calculator_answers_huge_or_long_expressions_with_an_error(expression):
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog

    calculate = build_example_catalog().get("calculate").tool
    with pytest.raises(ValueError, match="too large|longer than 200"):
        calculate.invoke({"expression": expression})
    assert calculate.invoke({"expression": "2 * (3 + 4) - sqrt(16)"}) == 10.0
