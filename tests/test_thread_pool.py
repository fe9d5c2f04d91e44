"""The executor's own thread pool: bounds, outcomes, context, cancellation, fork."""

from __future__ import annotations

import asyncio
import contextvars
import os
import sys
import threading
import time

import pytest

from langgraph_toolbudget.execution.thread_pool import THREAD_NAME, ToolThreadPool

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


class Gauge:
    """Records how many calls run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def work(self, value: int) -> int:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.02)
        with self.lock:
            self.now -= 1
        return value * 2


def test_async_calls_run_at_once_up_to_max_workers_and_keep_item_order() -> None:
    pool, gauge = ToolThreadPool(3), Gauge()
    results = asyncio.run(pool.arun_each(gauge.work, list(range(10))))
    assert results == [v * 2 for v in range(10)]
    assert gauge.peak == 3
    assert pool._threads == 3  # never more threads than max_workers


def test_sync_calls_run_at_once_up_to_max_workers() -> None:
    pool, gauge = ToolThreadPool(2), Gauge()
    assert pool.run_each(gauge.work, [1, 2, 3, 4, 5]) == [2, 4, 6, 8, 10]
    assert gauge.peak == 2


def test_threads_start_only_as_work_arrives_and_are_reused() -> None:
    pool = ToolThreadPool(8)
    assert pool._threads == 0
    name = lambda: threading.current_thread().name  # noqa: E731
    names = {asyncio.run(pool.to_thread(name)) for _ in range(20)}
    assert pool._threads == 1 and len(names) == 1  # one call at a time: one thread
    assert next(iter(names)).startswith(THREAD_NAME)


def test_errors_reach_the_caller_and_the_pool_goes_on() -> None:
    pool = ToolThreadPool(2)

    def fail() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        asyncio.run(pool.to_thread(fail))
    with pytest.raises(KeyError, match="boom"):
        pool.submit(fail).result(timeout=5)
    with pytest.raises(KeyError, match="boom"):
        pool.run_each(lambda x: fail() if x == 2 else x, [1, 2, 3])
    assert asyncio.run(pool.to_thread(lambda: 42)) == 42


def test_calls_see_a_copy_of_the_callers_context() -> None:
    pool = ToolThreadPool(2)

    async def main() -> tuple[str, str, str]:
        VAR.set("caller")
        inside = await pool.to_thread(VAR.get)
        changed = await pool.to_thread(lambda: (VAR.set("worker"), VAR.get())[1])
        return inside, changed, VAR.get()

    assert asyncio.run(main()) == ("caller", "worker", "caller")
    token = VAR.set("sync caller")
    try:
        assert pool.submit(VAR.get).result(timeout=5) == "sync caller"
    finally:
        VAR.reset(token)


def test_a_cancelled_wait_drops_work_that_has_not_started() -> None:
    pool, started, release = ToolThreadPool(1), [], threading.Event()

    async def main() -> None:
        busy = asyncio.ensure_future(pool.to_thread(release.wait, 5))
        queued = asyncio.ensure_future(pool.to_thread(started.append, "queued"))
        await asyncio.sleep(0.05)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        release.set()
        assert await busy is True
        await pool.to_thread(time.sleep, 0)  # the worker has passed the dropped job

    asyncio.run(main())
    assert started == []


def test_a_result_after_the_loop_closed_is_dropped_quietly() -> None:
    pool, release = ToolThreadPool(1), threading.Event()

    async def main() -> None:
        asyncio.ensure_future(pool.to_thread(release.wait, 5))
        await asyncio.sleep(0.02)

    asyncio.run(main())  # the loop closes while the call still runs
    release.set()
    assert pool.submit(lambda: "still serving").result(timeout=5) == "still serving"


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX only")
def test_a_forked_child_gets_fresh_workers() -> None:
    pool = ToolThreadPool(2)
    assert pool.submit(lambda: 1).result(timeout=5) == 1  # a worker exists in the parent
    pid = os.fork()
    if pid == 0:  # the child: the parent's worker did not survive the fork
        try:
            ok = pool.submit(lambda: 2).result(timeout=5) == 2
        except BaseException:  # noqa: BLE001 - the exit code tells the parent
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_max_workers_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_workers must be at least 1"):
        ToolThreadPool(0)
