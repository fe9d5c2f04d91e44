"""Per-thread locks for the middleware's ``sequential`` mode, and its replies' shared starts.

One middleware instance usually serves every thread of a compiled ``create_agent``
graph (a module-level graph on LangGraph server, say). A lock per instance would run
the tool calls of all threads one at a time; ``sequential`` means one at a time within
a thread's batch, so the lock is keyed by the run's ``thread_id``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig

L = TypeVar("L", threading.Lock, asyncio.Lock)


def thread_key(config: RunnableConfig) -> Hashable:
    """The run's ``thread_id``; None (one shared lock) for runs without one."""
    configurable: dict[str, Any] = config.get("configurable") or {}
    return configurable.get("thread_id")


class KeyedLocks:
    """Locks made on first use for a key and dropped when nobody holds or awaits them."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._sync: dict[Hashable, tuple[threading.Lock, list[int]]] = {}
        self._async: dict[tuple[int, Hashable], tuple[asyncio.Lock, list[int]]] = {}

    @contextlib.contextmanager
    def hold(self, key: Hashable) -> Iterator[None]:
        """Hold ``key``'s thread lock."""
        lock = self._enter(self._sync, key, threading.Lock)
        try:
            with lock:
                yield
        finally:
            self._leave(self._sync, key)

    @contextlib.asynccontextmanager
    async def ahold(self, key: Hashable) -> AsyncIterator[None]:
        """Hold ``key``'s lock on the running loop (an ``asyncio.Lock`` must not cross loops)."""
        slot = (id(asyncio.get_running_loop()), key)
        lock = self._enter(self._async, slot, asyncio.Lock)
        try:
            async with lock:
                yield
        finally:
            self._leave(self._async, slot)

    def _enter(
        self, table: dict[Any, tuple[L, list[int]]], key: Hashable, make: Callable[[], L]
    ) -> L:
        """``key``'s lock in ``table`` (made if missing), counted as used once more."""
        with self._guard:
            lock, users = table.setdefault(key, (make(), [0]))
            users[0] += 1
        return lock

    def _leave(self, table: dict[Any, tuple[Any, list[int]]], key: Hashable) -> None:
        """One use of ``key``'s lock ended; the lock is dropped when nobody uses it."""
        with self._guard:
            users = table[key][1]
            users[0] -= 1
            if not users[0]:
                del table[key]


class ReplyStarts:
    """When the calls of each reply (batch) began to arrive, so calls that arrive together
    share one start and their equal timeouts end together.

    ``create_agent``'s tool node hands the middleware a reply's calls one at a time, a few
    loop steps apart; counted from each call's own arrival, a call waiting for a pool thread
    would get the place an equal-timeout sibling gives back at its deadline, and start a
    moment before its own. Only calls that arrive before any call of their reply has ended
    share its start: a later one may have waited for that end (the run's
    ``max_concurrency``), or be an outer middleware's retry, and such a wait must not
    shorten its timeout.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # batch -> [its first arrival, calls inside, whether one of them has ended]
        self._batches: dict[Hashable, list[Any]] = {}

    @contextlib.contextmanager
    def arrived(self, batch: Hashable) -> Iterator[float]:
        """A call of ``batch`` inside; yields how many seconds earlier its reply's shared
        start was: 0.0 for the first call, and for one arriving after a call ended."""
        now = time.monotonic()
        with self._lock:
            entry = self._batches.setdefault(batch, [now, 0, False])
            entry[1] += 1
            lag = 0.0 if entry[2] else now - entry[0]
        try:
            yield lag
        finally:
            with self._lock:
                entry[1] -= 1
                entry[2] = True
                if not entry[1]:
                    del self._batches[batch]
