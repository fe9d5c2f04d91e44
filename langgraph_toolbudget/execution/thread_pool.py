"""The executor's own thread pool: where sync tools (and sync hooks) run.

Key Components:
    - :class:`ToolThreadPool`: a ``ThreadPoolExecutor`` of ``max_workers`` threads,
      created on first use, that runs each function in a copy of the caller's
      context variables (LangGraph's config and stream writer live there). The
      interpreter's default pool is never used, so its size does not cap
      ``parallel_safe``, and ``max_workers`` bounds the sync calls running at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

__all__ = ["ToolThreadPool"]

T = TypeVar("T")


class ToolThreadPool:
    """A bounded thread pool for sync tools, created on first use.

    Args:
        max_workers: threads in the pool: sync calls running at once, at most.
    """

    def __init__(self, max_workers: int = 16) -> None:
        self.max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The pool, created on first use."""
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        max_workers=self.max_workers, thread_name_prefix="toolbudget-tool"
                    )
        return self._pool

    def submit(self, func: Callable[..., T], /, *args: Any) -> Future[T]:
        """Start ``func(*args)`` in the pool, in a copy of the caller's context."""
        return self.pool.submit(contextvars.copy_context().run, func, *args)

    async def to_thread(self, func: Callable[..., T], /, *args: Any) -> T:
        """Await ``func(*args)`` run in the pool, in a copy of the caller's context."""
        work = self.submit(func, *args)
        try:
            return await _settled(asyncio.get_running_loop(), work)
        except asyncio.CancelledError:
            work.cancel()  # as run_in_executor: the work is dropped if it has not started
            raise

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
        loop = asyncio.get_running_loop()
        works = [self.submit(func, item) for item in items]
        try:
            return list(await asyncio.gather(*(_settled(loop, work) for work in works)))
        except asyncio.CancelledError:
            for work in works:
                work.cancel()
            raise


def _settled(loop: asyncio.AbstractEventLoop, work: Future[T]) -> asyncio.Future[T]:
    """An asyncio future of ``loop`` that gets ``work``'s outcome once it ends.

    Leaner than ``asyncio.wrap_future`` (one callback, from the worker thread, and no
    link back: the caller cancels ``work`` itself when it stops waiting).
    """
    future: asyncio.Future[T] = loop.create_future()

    def ended(work: Future[T]) -> None:  # in the worker thread
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(_copy_outcome, work, future)

    work.add_done_callback(ended)
    return future


def _copy_outcome(work: Future[T], future: asyncio.Future[T]) -> None:
    if future.done():  # cancelled by its waiter
        return
    if work.cancelled():
        future.cancel()
    elif (error := work.exception()) is not None:
        future.set_exception(error)
    else:
        future.set_result(work.result())
