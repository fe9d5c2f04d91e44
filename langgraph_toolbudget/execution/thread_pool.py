"""The executor's own thread pool: where sync tools (and sync hooks) run.

Key Components:
    - :class:`ToolThreadPool`: ``max_workers`` threads, started as work arrives,
      that run each function in a copy of the caller's context variables
      (LangGraph's config and stream writer live there). The interpreter's default
      pool is never used, so its size does not cap ``parallel_safe``, and
      ``max_workers`` bounds the sync calls running at once.

An awaited call (:meth:`ToolThreadPool.to_thread`, :meth:`ToolThreadPool.arun_each`)
goes from the event loop to a worker and back with no ``concurrent.futures.Future``
in between: the worker hands the outcome straight to the loop. On a small virtual
machine that round trip costs about a third less than ``loop.run_in_executor``'s,
which is most of what a trivial tool call costs beyond the tool itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from queue import SimpleQueue
from typing import Any, Generic, TypeVar

__all__ = ["ToolThreadPool"]

T = TypeVar("T")

THREAD_NAME = "toolbudget-tool"


class _Job(Generic[T]):
    """``func()`` for a ``concurrent.futures.Future`` (sync callers, timed calls)."""

    __slots__ = ("func", "future")

    def __init__(self, func: Callable[[], T], future: Any) -> None:
        self.func = func
        self.future = future

    def run(self, idle: threading.Semaphore) -> None:
        """Run ``func`` unless dropped; count the worker idle before the waiter wakes, so the
        waiter's next call finds it idle."""
        if self._dropped():
            idle.release()
            return
        try:
            result: Any = self.func()
            ok = True
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter, as a pool does
            result, ok = exc, False
        idle.release()
        self._settle(ok, result)

    def _dropped(self) -> bool:
        return not self.future.set_running_or_notify_cancel()  # cancelled before it started

    def _settle(self, ok: bool, result: Any) -> None:
        if ok:
            self.future.set_result(result)
        else:
            self.future.set_exception(result)


class _LoopJob(_Job[T]):
    """``func()`` for an asyncio future of ``loop``: the outcome goes straight to the loop."""

    __slots__ = ("loop",)

    def __init__(
        self, func: Callable[[], T], loop: asyncio.AbstractEventLoop, future: asyncio.Future[T]
    ) -> None:
        super().__init__(func, future)
        self.loop = loop

    def _dropped(self) -> bool:
        return bool(self.future.done())  # its waiter stopped waiting before it started

    def _settle(self, ok: bool, result: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            self.loop.call_soon_threadsafe(_settle, self.future, ok, result)


def _settle(future: asyncio.Future[Any], ok: bool, result: Any) -> None:
    if future.done():  # cancelled by its waiter
        return
    if ok:
        future.set_result(result)
    else:
        future.set_exception(result)


class ToolThreadPool:
    """A bounded thread pool for sync tools; threads start as work arrives.

    Args:
        max_workers: threads in the pool: sync calls running at once, at most.
    """

    def __init__(self, max_workers: int = 16) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.max_workers = max_workers
        self._reset()
        _POOLS.add(self)

    def _put(self, job: _Job[Any]) -> None:
        self._jobs.put(job)
        if self._idle.acquire(blocking=False):
            return  # an idle worker takes it
        with self._lock:
            if self._threads < self.max_workers:
                self._threads += 1
                name = f"{THREAD_NAME}_{self._threads}"
                threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        jobs, idle = self._jobs, self._idle
        while True:
            jobs.get().run(idle)

    def _reset(self) -> None:
        """No worker and no job: a new pool, or a forked child (whose workers are gone)."""
        self._jobs: SimpleQueue[_Job[Any]] = SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads = 0
        self._lock = threading.Lock()

    def submit(self, func: Callable[..., T], /, *args: Any) -> Future[T]:
        """Start ``func(*args)`` in the pool, in a copy of the caller's context."""
        future: Future[T] = Future()
        context = contextvars.copy_context()
        self._put(_Job(lambda: context.run(func, *args), future))
        return future

    def start(self, func: Callable[..., T], /, *args: Any) -> asyncio.Future[T]:
        """Start ``func(*args)`` in the pool, in a copy of the caller's context; the future
        of the running event loop that gets its outcome. Cancelling the future before
        the work starts drops the work (as with ``run_in_executor``)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()
        self._put(_LoopJob(lambda: context.run(func, *args), loop, future))
        return future

    async def to_thread(self, func: Callable[..., T], /, *args: Any) -> T:
        """Await ``func(*args)`` run in the pool (:meth:`start`)."""
        return await self.start(func, *args)

    def run_each(self, func: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
        """``[func(item) for item in items]``, each in the pool, at once (sync caller).

        Raises:
            Exception: the first call that raises (the others run on), as ``gather``.
        """
        futures = [self.submit(func, item) for item in items]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:
            if future in done and future.exception() is not None:
                future.result()  # raises it
        return [future.result() for future in futures]

    async def arun_each(self, func: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
        """The async :meth:`run_each`: the calls start at once, in item order."""
        works = [self.start(func, item) for item in items]
        try:
            return list(await asyncio.gather(*works))
        except asyncio.CancelledError:
            for work in works:
                work.cancel()
            raise


_POOLS: weakref.WeakSet[ToolThreadPool] = weakref.WeakSet()


def _reset_after_fork() -> None:
    for pool in list(_POOLS):
        pool._reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
