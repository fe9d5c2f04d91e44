"""Per-thread locks for the middleware's ``sequential`` mode.

One middleware instance usually serves every thread of a compiled ``create_agent``
graph (a module-level graph on LangGraph server, say). A lock per instance would run
the tool calls of all threads one at a time; ``sequential`` means one at a time within
a thread's batch, so the lock is keyed by the run's ``thread_id``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig

from langgraph_toolbudget._forks import reset_in_forked_children

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
        reset_in_forked_children(self)

    def _after_fork(self) -> None:
        # A lock a thread of the parent held is held for ever in a forked child.
        self._guard, self._sync, self._async = threading.Lock(), {}, {}

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
