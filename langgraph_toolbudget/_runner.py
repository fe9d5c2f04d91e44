"""Run a coroutine to completion from sync code, whatever loop is (or is not) running.

Sync ``graph.invoke`` may run our nodes in a thread that has a running event loop
(Jupyter) or none. Async-only tools (MCP) and timeouts need a loop, so sync callers
hand the coroutine to one private background loop, with the caller's context
variables (LangGraph's config and stream writer live there).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="toolbudget-sync-runner", daemon=True
            )
            thread.start()
            _loop, _thread = loop, thread
        return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and block until it finishes.

    The coroutine runs in a copy of the caller's context. Exceptions propagate.
    Called from the background loop's own thread (a tool that runs a graph
    synchronously), it runs the coroutine on a fresh loop in a new thread
    instead of waiting on itself.
    """
    if threading.current_thread() is _thread:
        ctx = contextvars.copy_context()
        box: dict[str, Any] = {}

        def run_nested() -> None:
            try:
                box["result"] = ctx.run(asyncio.run, coro)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller below
                box["error"] = exc

        nested = threading.Thread(target=run_nested, name="toolbudget-nested-runner")
        nested.start()
        nested.join()
        if "error" in box:
            raise box["error"]
        return box["result"]
    loop = _background_loop()
    ctx = contextvars.copy_context()
    result: Future[T] = Future()

    def start() -> None:
        task = ctx.run(loop.create_task, coro)

        def done(t: asyncio.Task[T]) -> None:
            if t.cancelled():
                result.cancel()
            elif t.exception() is not None:
                result.set_exception(t.exception())  # type: ignore[arg-type]
            else:
                result.set_result(t.result())

        task.add_done_callback(done)

    loop.call_soon_threadsafe(start)
    return result.result()
