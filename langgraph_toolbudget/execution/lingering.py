"""Calls answered at their deadline that still run, and the deadline itself.

Its one reason to change: what happens to a call answered at its timeout that still runs.

A sync tool past its ``timeout_s`` cannot be stopped (Python cannot kill a
thread), and an async tool may catch its ``CancelledError`` and carry on. The
caller is answered at the deadline either way (:func:`within`), and the work is
*abandoned*: logged, its late result dropped. Until it really ends it still
counts against its concurrency group (:class:`LingeringCalls`), so an impure
call of that group never overlaps it.

Key Components:
    - :func:`within`: await a future for at most ``timeout`` seconds; on expiry
      cancel it, hand it to ``abandon`` and raise :class:`ToolTimeoutError` at once.
    - :class:`LingeringCalls`: abandoned calls per concurrency group, and the
      wait a later call of that group makes for them (bounded: one more
      ``timeout_s`` of the abandoned call, and no longer than the later call's
      batch leaves it; then the later call is refused).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph_toolbudget.core.spec import ToolSpec

__all__ = ["STILL_RUNNING_ERROR", "LingeringCalls", "ToolTimeoutError", "within"]

logger = logging.getLogger(__name__)

STILL_RUNNING_ERROR = (
    "Error: tool {tool!r} was not run: an earlier call to {other!r} timed out and is still "
    "running, and it may not run beside it (concurrency group {group!r}). "
    "Try again later, or use another tool."
)


class ToolTimeoutError(TimeoutError):
    """A call ran past its ``timeout_s``: the executor's own timeout.

    A subclass, so the executor tells its timeout from a ``TimeoutError`` the tool
    raised itself (an HTTP client's, ``socket.timeout``), which is an ordinary failure.
    """


async def within(work: asyncio.Future[Any], timeout: float, abandon: Callable[[], None]) -> Any:
    """The result of ``work`` if it comes within ``timeout`` seconds.

    Unlike ``asyncio.wait_for``, never waits past the deadline for the work to
    acknowledge its cancellation (a coroutine may swallow it and carry on).

    Raises:
        ToolTimeoutError: at the deadline; ``work`` was cancelled and ``abandon`` called.
    """
    try:
        done, _ = await asyncio.wait({work}, timeout=timeout)
    except asyncio.CancelledError:  # the caller gave up: so does the work
        work.cancel()
        raise
    if not done:
        work.cancel()
        abandon()
        raise ToolTimeoutError(f"no result within {timeout:g} s")
    return work.result()


@dataclass
class _Abandoned:
    tool: str
    pure: bool
    until: float  # monotonic time after which later calls stop waiting for it
    ended: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)


def _ended(work: Any, entry: _Abandoned, drop: Callable[[_Abandoned], None]) -> None:
    if not (work.cancelled() if hasattr(work, "cancelled") else False):
        error = work.exception()  # retrieved, so asyncio does not log it as never retrieved
        logger.info("abandoned call to %s ended (late; dropped): %r", entry.tool, error)
    drop(entry)
    entry.ended.set_result(None)


class LingeringCalls:
    """Abandoned calls that still run, by concurrency group (thread-safe, any event loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[str, list[_Abandoned]] = {}

    def add(self, spec: ToolSpec, work: Any) -> None:
        """Count ``work`` (a thread's or a task's future) against ``spec``'s group until it ends."""
        timeout = spec.timeout_s or 0.0
        entry = _Abandoned(spec.name, spec.is_pure, time.monotonic() + timeout)
        logger.warning("tool %s passed its %g s timeout; abandoned, running on", spec.name, timeout)
        with self._lock:
            self._groups.setdefault(spec.concurrency_group, []).append(entry)
        work.add_done_callback(lambda w: _ended(w, entry, self._drop))

    def _drop(self, entry: _Abandoned) -> None:
        with self._lock:
            for group, entries in list(self._groups.items()):
                if entry in entries:
                    entries.remove(entry)
                    if not entries:
                        del self._groups[group]

    def _blocking(self, spec: ToolSpec) -> list[_Abandoned]:
        """Abandoned calls ``spec`` may not run beside: impure ones, or any for an impure call."""
        with self._lock:
            entries = list(self._groups.get(spec.concurrency_group, ()))
        return [e for e in entries if not (spec.is_pure and e.pure)]

    def _refusal(self, spec: ToolSpec, entries: list[_Abandoned]) -> str | None:
        running = [e for e in entries if not e.ended.done()]
        if not running:
            return None
        return STILL_RUNNING_ERROR.format(
            tool=spec.name, other=running[0].tool, group=spec.concurrency_group
        )

    def wait(self, spec: ToolSpec, limit: float | None = None) -> str | None:
        """Block until ``spec`` may run, at most ``limit`` seconds (its batch's time left;
        None: no limit of its own); the refusal for the model if waiting ran out, else None."""
        entries = self._blocking(spec)
        if not entries:
            return None
        concurrent.futures.wait([e.ended for e in entries], timeout=_patience(entries, limit))
        return self._refusal(spec, entries)

    async def await_clear(self, spec: ToolSpec, limit: float | None = None) -> str | None:
        """:meth:`wait`, without blocking the event loop."""
        entries = self._blocking(spec)
        if not entries:
            return None
        await _all_done([e.ended for e in entries], _patience(entries, limit))
        return self._refusal(spec, entries)


def _patience(entries: list[_Abandoned], limit: float | None) -> float:
    """Seconds to wait for ``entries`` to end: until the last grace ends, at most ``limit``."""
    remaining = max(e.until for e in entries) - time.monotonic()
    if limit is not None:
        remaining = min(remaining, limit)
    return max(remaining, 0.0)


async def _all_done(futures: list[concurrent.futures.Future[None]], timeout: float) -> None:
    """Wait until every future is done, or ``timeout`` seconds (they finish on other threads)."""
    pending = [f for f in futures if not f.done()]
    if not pending:
        return
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    left = [len(pending)]

    def count() -> None:
        left[0] -= 1
        if left[0] == 0 and not waiter.done():
            waiter.set_result(None)

    def one_done(_: object) -> None:
        with contextlib.suppress(RuntimeError):  # the waiting loop has closed meanwhile
            loop.call_soon_threadsafe(count)

    for future in pending:
        future.add_done_callback(one_done)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(waiter, timeout)
