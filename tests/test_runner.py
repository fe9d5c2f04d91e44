"""_runner: sync code runs coroutines on long-lived background loops, even when nested."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import time
import weakref

import pytest

from langgraph_toolbudget._runner import (
    BackgroundLoop,
    SyncTimeoutError,
    background_loop,
    run_sync,
)

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


def test_run_sync_returns_the_result_and_keeps_the_callers_context():
    async def read() -> str:
        await asyncio.sleep(0)
        return request_id.get()

    token = request_id.set("r-42")
    try:
        assert run_sync(read()) == "r-42"
    finally:
        request_id.reset(token)


def test_run_sync_propagates_exceptions():
    async def fail() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        run_sync(fail())


def test_run_sync_called_from_the_background_loop_does_not_deadlock():
    async def inner() -> int:
        await asyncio.sleep(0.01)
        return 20

    async def outer() -> int:
        # A tool running on the background loop that calls sync code which runs a coroutine.
        return run_sync(inner()) + 1

    assert run_sync(outer()) == 21


async def test_run_sync_works_while_the_calling_thread_has_a_running_loop():
    async def value() -> str:
        return "ok"

    assert run_sync(value()) == "ok"


def _cancellable(events: list[str]):
    async def wait_forever() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    return wait_forever()


@pytest.mark.parametrize("nested", [False, True])
def test_run_sync_timeout_cancels_the_coroutine(nested: bool):
    events: list[str] = []

    async def outer() -> None:
        run_sync(_cancellable(events), timeout=0.2)

    started = time.perf_counter()
    with pytest.raises(SyncTimeoutError, match="no result within 0.2 s"):
        run_sync(outer()) if nested else run_sync(_cancellable(events), timeout=0.2)
    assert time.perf_counter() - started < 5
    assert events == ["cancelled"]  # cancelled, and finished cancelling, before the raise


def test_run_sync_tells_its_timeout_from_the_coroutines_own():
    async def own_timeout() -> None:
        raise TimeoutError("the tool's own")

    with pytest.raises(TimeoutError, match="the tool's own") as caught:
        run_sync(own_timeout(), timeout=5)
    assert not isinstance(caught.value, SyncTimeoutError)


async def test_run_async_cancelling_the_caller_cancels_the_coroutine():
    events: list[str] = []
    waiter = asyncio.ensure_future(background_loop("sync").run_async(_cancellable(events)))
    await asyncio.sleep(0.1)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    for _ in range(100):
        if events:
            break
        await asyncio.sleep(0.02)
    assert events == ["cancelled"]


def test_named_loops_are_process_wide_and_separate():
    sync_loop, mcp_loop = background_loop("sync"), background_loop("mcp")
    assert background_loop("sync") is sync_loop and background_loop() is sync_loop
    assert sync_loop.loop is not mcp_loop.loop

    async def thread_name() -> str:
        return threading.current_thread().name

    assert sync_loop.run_sync(thread_name()) == "toolbudget-sync"
    assert mcp_loop.run_sync(thread_name()) == "toolbudget-mcp"


def test_a_stopped_loop_starts_again_on_next_use():
    runner = BackgroundLoop("toolbudget-test")

    async def current_loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    # Compare the loops themselves, holding the first: an id() of a freed loop can be reused.
    first = runner.run_sync(current_loop())
    thread = runner._thread
    runner.stop()
    assert thread is not None and not thread.is_alive() and first.is_closed()
    second = runner.run_sync(current_loop())
    assert second is not first and not second.is_closed()
    runner.stop()


def test_a_loop_first_used_inside_a_run_keeps_nothing_of_the_runs_context():
    # The loop's self-pipe handle kept a copy of the context it was made in for the life of
    # the process: made in a graph run, that held the run's graph and its catalog forever.
    class RunConfig:
        pass

    run_config: contextvars.ContextVar[RunConfig] = contextvars.ContextVar("run_config")
    config = RunConfig()
    collected = weakref.ref(config)
    runner = BackgroundLoop("toolbudget-test")

    def first_use_in_a_run(config: RunConfig) -> None:
        run_config.set(config)
        assert runner.run_sync(asyncio.sleep(0, "ran"), timeout=5) == "ran"

    contextvars.copy_context().run(first_use_in_a_run, config)
    try:
        del config
        deadline = time.monotonic() + 5  # the loop's last callback may still hold it a moment
        while collected() is not None and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.01)
        assert collected() is None
    finally:
        runner.stop()


def test_mcp_runtime_sessions_live_on_the_mcp_loop_and_refuse_nested_sync_calls():
    from langgraph_toolbudget.mcp import MCPRuntime

    runtime = MCPRuntime({})
    try:
        assert runtime.loop is background_loop("mcp").loop

        async def nested_sync_call() -> None:
            runtime.run_sync(asyncio.sleep(0))  # e.g. an interceptor calling tool.invoke

        with pytest.raises(RuntimeError, match="await tool.ainvoke"):
            runtime.run_sync(nested_sync_call())
    finally:
        runtime.close()
    assert background_loop("mcp").run_sync(asyncio.sleep(0, "still up")) == "still up"
