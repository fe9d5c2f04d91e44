"""_runner.run_sync: sync code runs coroutines on one background loop, even when nested."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from langgraph_toolbudget._runner import run_sync

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
