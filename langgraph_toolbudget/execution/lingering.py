"""Calls answered at their deadline that still run, and the deadline itself.

Its one reason to change: what happens to a call answered at its timeout that still runs.

A sync tool past its ``timeout_s`` cannot be stopped (Python cannot kill a
thread), and an async tool may catch its ``CancelledError`` and carry on. The
caller is answered at the deadline either way (:func:`within`), and the work is
*abandoned*: logged, its late result dropped. Until it really ends it still
counts against its concurrency group (:class:`LingeringCalls`), so an impure
call of that group never overlaps it, and the group's limit counts it.

Key Components:
    - :func:`within`: await a future for at most ``timeout`` seconds; on expiry
      cancel it, hand it to ``abandon`` and raise :class:`ToolTimeoutError` at once.
    - :class:`LingeringCalls`: abandoned calls per concurrency group, and the
      wait a later call of that group makes for them (bounded: one more
      ``timeout_s`` of the abandoned call, and no longer than the later call's
      batch leaves it; then the later call is refused). Those still running count
      toward their group's limit (``max_concurrency``, ``group_limits``), and the
      end of one is announced (:meth:`LingeringCalls.on_end`), so a call waiting for
      room in the group starts then.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph_toolbudget._forks import reset_in_forked_children
from langgraph_toolbudget.core.spec import ToolSpec

__all__ = [
    "LIMIT_TAKEN_ERROR",
    "STILL_RUNNING_ERROR",
    "LingeringCalls",
    "ToolTimeoutError",
    "within",
]

logger = logging.getLogger(__name__)

STILL_RUNNING_ERROR = (
    "Error: tool {tool!r} was not run: an earlier call to {other!r} timed out and is still "
    "running, and it may not run beside it (concurrency group {group!r}). "
    "Try again later, or use another tool."
)
LIMIT_TAKEN_ERROR = (
    "Error: tool {tool!r} was not run: {count} earlier calls of concurrency group {group!r} "
    "timed out and are still running, and the group runs at most {limit} calls at once. "
    "Try again later, or use another tool."
)


class ToolTimeoutError(TimeoutError):
    """A call ran past its ``timeout_s``: the executor's own timeout.

    A subclass, so the executor tells its timeout from a ``TimeoutError`` the tool
    raised itself (an HTTP client's, ``socket.timeout``), which is an ordinary failure.
    ``thread_started``: the call had started in a thread, which cannot be stopped.
    """

    thread_started: bool = False


async def within(
    work: asyncio.Future[Any], timeout: float | None, abandon: Callable[[bool], None]
) -> Any:
    """The result of ``work`` if it comes within ``timeout`` seconds (None: no limit).

    Unlike ``asyncio.wait_for``, never waits past the deadline for the work to
    acknowledge its cancellation (a coroutine may swallow it and carry on).

    Raises:
        ToolTimeoutError: at the deadline; ``work`` was cancelled and ``abandon(False)``
            called.
        asyncio.CancelledError: the caller was cancelled; so was ``work``, and
            ``abandon(True)`` called, since a thread cannot be stopped and a coroutine may
            carry on.
    """
    try:
        done, _ = await asyncio.wait({work}, timeout=timeout)
    except asyncio.CancelledError:
        work.cancel()
        abandon(True)
        raise
    if not done:
        work.cancel()
        abandon(False)
        raise ToolTimeoutError(f"no result within {timeout:g} s")
    return work.result()


@dataclass
class _Abandoned:
    tool: str
    group: str
    pure: bool
    until: float  # monotonic time after which later calls stop waiting for it
    cancelled: bool  # its run was cancelled: it counts toward the group's limit alone
    ended: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)


def _ended(work: Any, entry: _Abandoned, drop: Callable[[_Abandoned], None]) -> None:
    if not (work.cancelled() if hasattr(work, "cancelled") else False):
        error = work.exception()  # retrieved, so asyncio does not log it as never retrieved
        logger.info("abandoned call to %s ended (late; dropped): %r", entry.tool, error)
    drop(entry)
    entry.ended.set_result(None)


class LingeringCalls:
    """Abandoned calls that still run, by concurrency group (thread-safe, any event loop).

    Args:
        limits: group -> calls at once (``max_concurrency``, ``group_limits``); the
            abandoned calls of a group that still run count toward its limit.
    """

    def __init__(self, limits: Mapping[str, int] | None = None) -> None:
        self._lock = threading.Lock()
        self._groups: dict[str, list[_Abandoned]] = {}
        reset_in_forked_children(self)
        self._listeners: list[Callable[[str], None]] = []
        self.limits = dict(limits or {})

    def _after_fork(self) -> None:
        # In a forked child the parent's calls have no threads or tasks: they would block
        # their groups for ever.
        self._lock, self._groups = threading.Lock(), {}

    def on_end(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(group)`` each time an abandoned call of ``group`` really ends (in
        the thread or on the loop where it ended), once it no longer counts as running."""
        self._listeners.append(listener)

    def add(self, spec: ToolSpec, work: Any, *, cancelled: bool = False) -> None:
        """Count ``work`` (a thread's or a task's future) against ``spec``'s group until it
        ends: a call past its timeout, or one whose run was cancelled (``cancelled``), which
        counts toward the group's limit only, as the running call it still is."""
        if work.done():
            return
        timeout = spec.timeout_s or 0.0
        group = spec.concurrency_group
        entry = _Abandoned(spec.name, group, spec.is_pure, time.monotonic() + timeout, cancelled)
        why = "was cancelled with its run" if cancelled else f"passed its {timeout:g} s timeout"
        logger.warning("tool %s %s; abandoned, running on", spec.name, why)
        with self._lock:
            self._groups.setdefault(group, []).append(entry)
        work.add_done_callback(lambda w: _ended(w, entry, self._drop))

    def _drop(self, entry: _Abandoned) -> None:
        with self._lock:
            entries = self._groups.get(entry.group, [])
            if entry in entries:
                entries.remove(entry)
                if not entries:
                    del self._groups[entry.group]
        for listener in self._listeners:
            listener(entry.group)

    def running(self, group: str) -> tuple[int, int]:
        """The abandoned calls of ``group`` that still run: (timed out, cancelled)."""
        with self._lock:
            entries = self._groups.get(group, ())
            cancelled = sum(e.cancelled for e in entries)
            return len(entries) - cancelled, cancelled

    def _blocking(self, spec: ToolSpec) -> list[_Abandoned]:
        """Timed-out calls ``spec`` waits for: any for an impure call; the impure ones for a
        pure call, and all of them while they fill its group's limit (until one ends). (The
        calls of cancelled runs are waited for as running calls, by the group's limit.)"""
        with self._lock:
            entries = [e for e in self._groups.get(spec.concurrency_group, ()) if not e.cancelled]
        limit = self.limits.get(spec.concurrency_group)
        if not spec.is_pure or (limit is not None and len(entries) >= limit):
            return entries
        return [e for e in entries if not e.pure]

    def _refusal(self, spec: ToolSpec, entries: list[_Abandoned]) -> str:
        group = spec.concurrency_group
        impure = [e for e in entries if not e.pure]
        if spec.is_pure and not impure:
            return LIMIT_TAKEN_ERROR.format(
                tool=spec.name, count=len(entries), group=group, limit=self.limits[group]
            )
        return STILL_RUNNING_ERROR.format(
            tool=spec.name, other=(impure or entries)[0].tool, group=group
        )

    def wait(self, spec: ToolSpec, batch_left: float | None = None) -> str | None:
        """Block until ``spec`` may run, at most ``batch_left`` seconds (its batch's time left;
        None: no limit of its own); the refusal for the model if waiting ran out, else None."""
        deadline = None if batch_left is None else time.monotonic() + batch_left
        while entries := self._blocking(spec):
            patience = _patience(entries, deadline)
            if patience <= 0:
                return self._refusal(spec, entries)
            ended = [e.ended for e in entries]
            concurrent.futures.wait(ended, patience, concurrent.futures.FIRST_COMPLETED)
        return None

    async def await_clear(self, spec: ToolSpec, batch_left: float | None = None) -> str | None:
        """:meth:`wait`, without blocking the event loop."""
        deadline = None if batch_left is None else time.monotonic() + batch_left
        while entries := self._blocking(spec):
            patience = _patience(entries, deadline)
            if patience <= 0:
                return self._refusal(spec, entries)
            await _one_done([e.ended for e in entries], patience)
        return None


def _patience(entries: list[_Abandoned], deadline: float | None) -> float:
    """Seconds left to wait for ``entries``: until the last grace ends, never past ``deadline``."""
    until = max(e.until for e in entries)
    if deadline is not None:
        until = min(until, deadline)
    return until - time.monotonic()


async def _one_done(futures: list[concurrent.futures.Future[None]], timeout: float) -> None:
    """Wait until one of the futures is done, or ``timeout`` seconds (they finish on other
    threads)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not waiter.done():
            waiter.set_result(None)

    def one_done(_: object) -> None:
        with contextlib.suppress(RuntimeError):  # the waiting loop has closed meanwhile
            loop.call_soon_threadsafe(wake)

    for future in futures:
        future.add_done_callback(one_done)
    with contextlib.suppress(asyncio.TimeoutError):  # TimeoutError itself from Python 3.11 on
        await asyncio.wait_for(waiter, timeout)
