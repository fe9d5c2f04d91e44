"""The scheduler's concurrency rules, proven by what the tools saw, not by wall-clock time.

Overlap is proven with barriers: N tools that each wait for the other N-1 to
arrive can only finish if N calls really run at once (a call that waits in a
queue breaks the barrier after its timeout, and the tool fails). Limits and
exclusivity are read from the live counts every call records.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import Any

import pytest
from agent_tools import ConcurrencyProbe, ai_calls, call, fetch_tool
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool, StructuredTool

from langgraph_toolbudget import BudgetConfig, ToolCatalog, ToolExecutor

APIS = ["invoke", "ainvoke"]
BARRIER_TIMEOUT_S = 10.0  # generous: a slow machine must not break a barrier that should hold


async def run_node(node: Any, names: list[str], api: str) -> Any:
    calls = [call(n, f"c{i}", x=i) for i, n in enumerate(names)]
    state = {"messages": [HumanMessage("go"), ai_calls(*calls)], "selected_tools": list(names)}
    if api == "invoke":
        return await asyncio.to_thread(node.invoke, state)
    return await node.ainvoke(state)


def barrier_tools(
    names: list[str], barrier: threading.Barrier, probe: ConcurrencyProbe, *, sync: bool
) -> list[BaseTool]:
    """Tools that record themselves in ``probe`` and wait at ``barrier`` for the others."""

    def make(name: str) -> BaseTool:
        def body(x: int = 0) -> str:
            start = probe.enter(name, True)
            try:
                barrier.wait(BARRIER_TIMEOUT_S)
            finally:
                probe.exit(name, True, start)
            return f"{name} {x}"

        async def abody(x: int = 0) -> str:
            return await asyncio.to_thread(body, x)

        if sync:
            return StructuredTool.from_function(func=body, name=name, description=f"Tool {name}.")
        return StructuredTool.from_function(coroutine=abody, name=name, description=f"Tool {name}.")

    return [make(n) for n in names]


@pytest.mark.parametrize("api", APIS)
async def test_eight_sync_pure_tools_all_run_at_once_with_only_is_pure_set(api):
    """Eight at once: more than the interpreter's default pool gives on a 2-core machine (6)."""
    names = [f"s{i}" for i in range(8)]
    probe = ConcurrencyProbe()
    tools = barrier_tools(names, threading.Barrier(8), probe, sync=True)
    catalog = ToolCatalog.from_tools(tools, tool_metadata={n: {"is_pure": True} for n in names})
    out = await run_node(ToolExecutor(catalog, mode="parallel_safe"), names, api)
    assert [m.status for m in out["messages"]] == ["success"] * 8
    assert [m.tool_call_id for m in out["messages"]] == [f"c{i}" for i in range(8)]
    assert probe.max_live == 8


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("config", "metadata", "expected"),
    [
        (BudgetConfig(max_parallel=3), {}, 3),
        (BudgetConfig(group_limits={"api": 2}), {"concurrency_group": "api"}, 2),
        (BudgetConfig(), {"concurrency_group": "api", "max_concurrency": 2}, 2),
        (
            BudgetConfig(group_limits={"api": 3}),
            {"concurrency_group": "api", "max_concurrency": 2},
            3,
        ),
    ],
    ids=["max_parallel", "group_limits", "tool-metadata", "group_limits-over-metadata"],
)
async def test_pure_calls_are_bounded_by_the_limit_in_force(api, config, metadata, expected):
    names = [f"p{i}" for i in range(6)]
    probe = ConcurrencyProbe()
    tools = barrier_tools(names, threading.Barrier(expected), probe, sync=True)
    meta = {n: {"is_pure": True, **metadata} for n in names}
    catalog = ToolCatalog.from_tools(tools, tool_metadata=meta)
    out = await run_node(ToolExecutor(catalog, config=config), names, api)
    assert [m.status for m in out["messages"]] == ["success"] * 6  # every barrier filled
    assert probe.max_live == expected  # and never more at once


@pytest.mark.parametrize(
    ("apis", "per_batch", "limit"),
    [
        (("invoke", "invoke"), 2, 2),
        (("ainvoke", "ainvoke"), 2, 2),
        (("invoke", "ainvoke"), 2, 2),
        (("invoke", "invoke"), 1, 1),
        (("ainvoke", "ainvoke"), 1, 1),
    ],
    ids=["threads", "tasks", "thread-and-task", "threads-one-call-each", "tasks-one-call-each"],
)
async def test_a_groups_limit_holds_across_batches_running_at_once(apis, per_batch, limit):
    """Two runs sharing one executor (two threads, LangGraph server) share a group's limit:
    a rate-limited API gets ``max_concurrency`` calls at once, not that many per run."""
    probe = ConcurrencyProbe()
    node = fetch_executor(probe, 0.3, max_concurrency=limit)
    names = ["fetch"] * per_batch
    outs = await asyncio.gather(*(run_node(node, names, api) for api in apis))
    for out in outs:
        assert [m.content for m in out["messages"]] == [f"fetched {i}" for i in range(per_batch)]
    assert probe.max_by_group["api"] == limit


def fetch_executor(probe: ConcurrencyProbe, seconds: float, **meta: Any) -> ToolExecutor:
    """An executor of one sync tool ``fetch`` of group ``api`` that takes ``seconds``."""
    metadata = {"fetch": {"concurrency_group": "api", "is_pure": True, **meta}}
    return ToolExecutor(
        ToolCatalog.from_tools([fetch_tool(probe, seconds)], tool_metadata=metadata)
    )


async def cancel_a_run(node: ToolExecutor) -> None:
    """Start a run of ``node`` calling ``fetch``; cancel it 0.2 s in, while its tool runs."""
    run = asyncio.create_task(run_node(node, ["fetch"], "ainvoke"))
    await asyncio.sleep(0.2)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("per_batch", "limit"), [(1, 1), (2, 2)], ids=["alone", "gathered"])
async def test_waiting_for_other_runs_calls_of_the_group_leaves_a_call_its_whole_timeout(
    api, per_batch, limit
):
    """The batch's deadline is the batch's: the time a call waits for room another run's
    calls hold is not taken from its ``timeout_s`` (0.8 s calls, 1.3 s timeout: the second
    run's calls wait 0.8 s, then have 1.3 s, not 0.5 s)."""
    probe = ConcurrencyProbe()
    node = fetch_executor(probe, 0.8, max_concurrency=limit, timeout_s=1.3)
    names = ["fetch"] * per_batch
    outs = await asyncio.gather(*(run_node(node, names, api) for _ in range(2)))
    for out in outs:
        assert [m.content for m in out["messages"]] == [f"fetched {i}" for i in range(per_batch)]
    assert probe.max_by_group["api"] == limit


@pytest.mark.parametrize("timeout_s", [None, 5.0], ids=["no-timeout", "timeout"])
async def test_a_cancelled_runs_call_keeps_its_place_in_the_group_until_its_tool_ends(timeout_s):
    """A run cancelled (LangGraph server's stop) while its sync tool runs: the thread runs
    on, so it still counts toward the group's limit; the next run's call waits for it."""
    probe = ConcurrencyProbe()
    meta = {} if timeout_s is None else {"timeout_s": timeout_s}
    node = fetch_executor(probe, 0.6, max_concurrency=1, **meta)
    await cancel_a_run(node)
    out = await run_node(node, ["fetch"], "ainvoke")
    assert out["messages"][0].content == "fetched 0"
    assert probe.max_by_group["api"] == 1


async def test_a_cancelled_runs_call_holds_up_no_call_of_a_group_without_a_limit():
    """Without a limit, runs' impure calls of one group run side by side (the exclusion is
    the batch's), a cancelled run's too: the next run's call neither waits nor is refused."""
    probe = ConcurrencyProbe()
    node = fetch_executor(probe, 0.6, is_pure=False)
    await cancel_a_run(node)
    out = await run_node(node, ["fetch"], "ainvoke")
    assert out["messages"][0].content == "fetched 0"
    assert probe.max_by_group["api"] == 2  # it ran beside the cancelled run's call


def sleeping_catalog(probe: ConcurrencyProbe, specs: dict[str, dict[str, Any]]) -> ToolCatalog:
    from agent_tools import probe_tool

    tools = []
    for name, meta in specs.items():
        probe.group_of[name] = meta.get("concurrency_group", "default")
        tools.append(
            probe_tool(name, probe, pure=meta.get("is_pure", False), seconds=0.02, sync=True)
        )
    return ToolCatalog.from_tools(tools, tool_metadata=specs)


@pytest.mark.parametrize("api", APIS)
async def test_impure_calls_of_one_group_never_overlap_and_groups_run_side_by_side(api):
    probe = ConcurrencyProbe()
    specs = {
        "write_a": {"concurrency_group": "db"},
        "write_b": {"concurrency_group": "db"},
        "read": {"concurrency_group": "db", "is_pure": True},
        "send": {"concurrency_group": "mail"},
    }
    catalog = sleeping_catalog(probe, specs)
    names = ["write_a", "read", "write_b", "send", "write_a", "send", "read"]
    out = await run_node(ToolExecutor(catalog), names, api)
    assert [m.tool_call_id for m in out["messages"]] == [f"c{i}" for i in range(7)]
    assert probe.violations == []
    assert probe.max_by_group["db"] == 1 and probe.max_by_group["mail"] == 1
    db = sorted((s, e) for n, s, e in probe.intervals if probe.group_of[n] == "db")
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(db, db[1:], strict=False))


@pytest.mark.parametrize("api", APIS)
async def test_impure_calls_of_different_groups_overlap(api):
    names = ["to_db", "to_mail"]
    probe = ConcurrencyProbe()
    tools = barrier_tools(names, threading.Barrier(2), probe, sync=True)
    meta = {"to_db": {"concurrency_group": "db"}, "to_mail": {"concurrency_group": "mail"}}
    catalog = ToolCatalog.from_tools(tools, tool_metadata=meta)
    out = await run_node(ToolExecutor(catalog), names, api)
    assert [m.status for m in out["messages"]] == ["success", "success"]


@pytest.mark.parametrize("api", APIS)
async def test_calls_of_a_group_start_in_call_order(api):
    probe = ConcurrencyProbe()
    specs = {f"w{i}": {"concurrency_group": "db"} for i in range(5)}
    catalog = sleeping_catalog(probe, specs)
    names = ["w3", "w0", "w4", "w1", "w2"]
    await run_node(ToolExecutor(catalog), names, api)
    started = [n for n, _, _ in sorted(probe.intervals, key=lambda i: i[1])]
    assert started == names


@pytest.mark.parametrize("api", APIS)
async def test_sequential_runs_one_call_at_a_time_even_for_pure_tools(api):
    probe = ConcurrencyProbe()
    specs = {f"p{i}": {"is_pure": True} for i in range(4)}
    catalog = sleeping_catalog(probe, specs)
    out = await run_node(ToolExecutor(catalog, mode="sequential"), list(specs), api)
    assert len(out["messages"]) == 4 and probe.max_live == 1


@pytest.mark.parametrize("api", APIS)
async def test_async_pure_tools_overlap_too(api):
    names = [f"a{i}" for i in range(5)]
    probe = ConcurrencyProbe()
    tools = barrier_tools(names, threading.Barrier(5), probe, sync=False)
    catalog = ToolCatalog.from_tools(tools, tool_metadata={n: {"is_pure": True} for n in names})
    out = await run_node(ToolExecutor(catalog), names, api)
    assert [m.status for m in out["messages"]] == ["success"] * 5


def test_sync_tools_run_in_the_executors_own_pool():
    seen: list[str] = []

    def where(x: int = 0) -> str:
        seen.append(threading.current_thread().name)
        return "ok"

    tool = StructuredTool.from_function(func=where, name="where", description="Thread name.")
    catalog = ToolCatalog.from_tools([tool], tool_metadata={"where": {"timeout_s": 5}})
    node = ToolExecutor(catalog)
    asyncio.run(run_node(node, ["where"], "ainvoke"))
    assert seen and seen[0].startswith("toolbudget-tool")


def test_sync_hooks_never_hold_the_threads_their_tools_need():
    """Sync hooks run in a pool of their own under ``ainvoke``: with ``max_parallel=2``,
    two hooked calls to timed sync tools still run side by side (each tool needs a thread
    of the tool pool while its hook waits for it)."""
    names = ["t0", "t1"]
    probe = ConcurrencyProbe()
    tools = barrier_tools(names, threading.Barrier(2), probe, sync=True)
    meta = {n: {"is_pure": True, "timeout_s": BARRIER_TIMEOUT_S} for n in names}
    catalog = ToolCatalog.from_tools(tools, tool_metadata=meta)

    def passthrough(request: Any, execute: Any) -> Any:
        return execute(request)

    node = ToolExecutor(catalog, max_parallel=2, wrap_tool_call=passthrough)
    out = asyncio.run(run_node(node, names, "ainvoke"))
    assert [m.status for m in out["messages"]] == ["success", "success"]
    assert probe.max_live == 2


def test_a_cancelled_run_never_starts_its_queued_sync_calls():
    started: list[str] = []
    release = threading.Event()

    def make(name: str) -> BaseTool:
        def body(x: int = 0) -> str:
            started.append(name)
            release.wait(5)
            return name

        return StructuredTool.from_function(func=body, name=name, description=f"Tool {name}.")

    names = ["first", "queued"]
    catalog = ToolCatalog.from_tools(
        [make(n) for n in names], tool_metadata={n: {"is_pure": True} for n in names}
    )
    node = ToolExecutor(catalog, max_parallel=1)  # one thread: `queued` waits for `first`

    async def main() -> None:
        run = asyncio.ensure_future(run_node(node, names, "ainvoke"))
        while not started:
            await asyncio.sleep(0.01)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    try:
        asyncio.run(main())
    finally:
        release.set()
    # The pool's one thread is free again once `first` ends; `queued` was dropped.
    assert asyncio.run(run_node(node, ["first"], "ainvoke"))["messages"][0].content == "first"
    assert started == ["first", "first"]


def _tool_threads() -> int:
    return sum(t.name.startswith("toolbudget-tool") for t in threading.enumerate())


@pytest.mark.parametrize("api", APIS)
async def test_a_call_abandoned_at_its_timeout_gives_its_place_in_the_pool_to_later_calls(api):
    release = threading.Event()
    started: list[str] = []

    def stuck(x: int = 0) -> str:
        started.append("stuck")
        release.wait(10)
        return "late"

    def quick(x: int = 0) -> str:
        return "quick"

    tools = [
        StructuredTool.from_function(func=f, name=f.__name__, description="A tool.")
        for f in (stuck, quick)
    ]
    catalog = ToolCatalog.from_tools(
        tools,
        tool_metadata={"stuck": {"timeout_s": 0.2, "concurrency_group": "slow", "is_pure": True}},
    )
    node = ToolExecutor(catalog, max_parallel=1)
    before = _tool_threads()
    try:
        assert "timed out" in (await run_node(node, ["stuck"], api))["messages"][0].content
        # `stuck`'s thread runs on, and a later sync call of another group still gets a place.
        out = await asyncio.wait_for(run_node(node, ["quick"], api), 5)
        assert out["messages"][0].content == "quick"
        # The pool keeps max_parallel spare threads, no more: a second abandoned call takes
        # the last one, and a third call waits for a thread, then times out without running
        # (and its message says it was not run).
        assert "timed out" in (await run_node(node, ["stuck"], api))["messages"][0].content
        third = (await run_node(node, ["stuck"], api))["messages"][0].content
        assert "was not run" in third
        assert started == ["stuck", "stuck"]
        assert _tool_threads() - before <= 2
    finally:
        release.set()


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX only")
@pytest.mark.parametrize("api", APIS)
def test_a_forked_child_runs_sync_tools_in_fresh_threads(api):
    """A pre-forking server may fork after the executor has run: the child's copy of
    the pool has no workers, and must not wait for them."""
    names = [f"s{i}" for i in range(3)]
    probe = ConcurrencyProbe()
    tools = barrier_tools(names, threading.Barrier(3), probe, sync=True)
    meta = {n: {"is_pure": True, "timeout_s": 20} for n in names}
    node = ToolExecutor(ToolCatalog.from_tools(tools, tool_metadata=meta))
    assert len(asyncio.run(run_node(node, names, "ainvoke"))["messages"]) == 3  # threads exist
    pid = os.fork()
    if pid == 0:  # the child: run the batch again, report through the exit code
        try:
            out = asyncio.run(run_node(node, names, api))
            ok = [m.status for m in out["messages"]] == ["success"] * 3
        except BaseException:  # noqa: BLE001 - the exit code tells the parent
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("api", APIS)
async def test_a_raising_call_is_raised_once_every_call_of_its_batch_ended(api):
    """Under `handle_tool_errors=False` a raising call ended the node at once while the batch's
    other calls ran on: a `RetryPolicy` on the node then ran an impure call again beside its
    first run, and the caller got the error while a tool was still writing. As `ToolNode`, the
    node waits for the batch, then raises the first error in call order."""
    failed, written = threading.Event(), threading.Event()

    def write_row(x: int = 0) -> str:
        failed.wait(BARRIER_TIMEOUT_S)
        threading.Event().wait(0.2)  # still writing when the other call has failed
        written.set()
        return "written"

    def fetch(x: int = 0) -> str:
        failed.set()
        raise ConnectionError("fetch failed")

    tools = [
        StructuredTool.from_function(func=write_row, name="write_row", description="Write."),
        StructuredTool.from_function(func=fetch, name="fetch", description="Fetch."),
    ]
    meta = {"write_row": {"concurrency_group": "db"}, "fetch": {"concurrency_group": "net"}}
    catalog = ToolCatalog.from_tools(tools, tool_metadata=meta)
    node = ToolExecutor(catalog, handle_tool_errors=False, mode="parallel_safe")
    with pytest.raises(ConnectionError, match="fetch failed"):
        await run_node(node, ["write_row", "fetch"], api)
    assert written.is_set()


def outcome_within(run: Any, seconds: float = 10.0) -> Any:
    """``run()`` in a daemon thread: what it returned or raised; fails the test if it has not
    ended in ``seconds`` (a hang: the thread is left behind, without blocking the exit)."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(run())
        except BaseException as exc:  # noqa: BLE001 - the outcome under test, CancelledError too
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still running after {seconds} s"
    return outcome[0]


@pytest.mark.parametrize("api", APIS)
async def test_a_tools_own_cancelled_error_in_a_gathered_batch_is_raised_under_both_apis(api):
    """An async tool raising its own ``CancelledError`` (a library's inner task cancelled)
    ended the batch's task on the background loop as cancelled, which never woke sync
    ``invoke``: it hung. Both APIs now raise it, once the batch's other call ended."""
    ended = threading.Event()

    async def flaky(x: int = 0) -> str:
        raise asyncio.CancelledError("the client's task was cancelled")

    async def other(x: int = 0) -> str:
        await asyncio.sleep(0.1)
        ended.set()
        return "ok"

    tools = [
        StructuredTool.from_function(coroutine=flaky, name="flaky", description="Flaky fetch."),
        StructuredTool.from_function(coroutine=other, name="other", description="Other."),
    ]
    meta = {"flaky": {"concurrency_group": "a"}, "other": {"concurrency_group": "b"}}
    node = ToolExecutor(ToolCatalog.from_tools(tools, tool_metadata=meta), mode="parallel_safe")
    calls = [call("flaky", "c0"), call("other", "c1")]
    state = {
        "messages": [HumanMessage("go"), ai_calls(*calls)],
        "selected_tools": ["flaky", "other"],
    }
    if api == "invoke":
        assert isinstance(outcome_within(lambda: node.invoke(state)), asyncio.CancelledError)
    else:
        with pytest.raises(asyncio.CancelledError):
            await node.ainvoke(state)
    assert ended.is_set()
