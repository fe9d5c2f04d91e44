"""Run coroutines from sync code on long-lived background event loops.

Its one reason to change: how sync code runs a coroutine, whatever loop is running.

Sync ``graph.invoke`` may run our nodes in a thread that has a running event loop
(Jupyter) or none; async-only tools and timeouts need a loop, and MCP sessions must
stay on the one loop that opened them. Both hand their coroutines to a
:class:`BackgroundLoop`: an event loop running forever on a daemon thread.

Key Components:
    - :class:`BackgroundLoop`: one loop on one thread. :meth:`~BackgroundLoop.run_sync`
      blocks a sync caller until a coroutine finishes (a timeout cancels it);
      :meth:`~BackgroundLoop.run_async` awaits it from any other loop (cancelling
      the awaiting task cancels it). The coroutine runs as a task in a copy of
      the caller's context (LangGraph's config and stream writer live there).
    - :func:`background_loop`: the process-wide loop of a name, started on first
      use: ``"sync"`` for the executor's sync path, ``"mcp"`` for every MCP
      session. Two loops, so a nested call on one (below) never stalls the other.
    - :func:`run_sync`: ``background_loop("sync").run_sync``.

Nested calls:
    ``run_sync`` called from its loop's own thread (an async tool that calls sync
    code that runs a coroutine) cannot wait on that loop: it would wait forever.
    It runs the coroutine on a fresh loop in a helper thread instead, with the
    same timeout, while the calling loop is blocked. The coroutine therefore must
    not need the calling loop: MCP calls do (their sessions live on the ``"mcp"``
    loop), so :class:`~langgraph_toolbudget.mcp.MCPRuntime` refuses sync calls
    from that loop's thread with an error that says to await instead.

Typical Usage:
    >>> async def answer() -> int:
    ...     return 42
    >>> run_sync(answer(), timeout=5)
    42
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundLoop", "SyncTimeoutError", "background_loop", "run_sync"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

CANCEL_GRACE_S = 2.0
"""How long ``run_sync`` waits, after a timeout, for the cancelled coroutine to finish."""


class SyncTimeoutError(TimeoutError):
    """``run_sync`` gave up waiting; the coroutine was cancelled.

    A subclass, so callers can tell the runner's timeout from a ``TimeoutError``
    the coroutine raised itself.
    """


def _run_forever(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        while True:
            try:
                loop.run_forever()
                break  # stopped by BackgroundLoop.stop()
            except (SystemExit, KeyboardInterrupt) as exc:
                # A task raised it (a tool called sys.exit()); asyncio lets it out of
                # run_forever before the task's callbacks run. Keep serving: the task's
                # waiter gets the exception, and every other task keeps its loop.
                logger.warning("a task on %s raised %r; the loop goes on", loop, exc)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def _start_loop(name: str) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=_run_forever, args=(loop,), name=name, daemon=True)
    thread.start()
    return loop, thread


class BackgroundLoop:
    """An event loop that runs forever on its own daemon thread, started on first use.

    Args:
        name: the thread's name.

    Example:
        ```python
        loop = BackgroundLoop("my-loop")
        result = loop.run_sync(fetch(), timeout=10)  # from sync code, any thread
        result = await loop.run_async(fetch())  # from another event loop
        loop.stop()
        ```
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[Any]] = set()  # strong references until done

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop, started (or restarted after :meth:`stop` or a fork) if needed."""
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                # In an empty context: the loop's own handles (its self-pipe reader) keep a
                # copy of the context it is made in for the life of the process, and the first
                # use is often inside a graph run, whose context reaches the run's graph and
                # every catalog it uses (a catalog dropped after the run would never be
                # collected). A thread may copy it too (Python 3.14's thread_inherit_context).
                self._loop, self._thread = contextvars.Context().run(_start_loop, self.name)
            return self._loop

    def in_loop_thread(self) -> bool:
        """True when called from the loop's own thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def _start(
        self, coro: Coroutine[Any, Any, T]
    ) -> tuple[concurrent.futures.Future[T], threading.Event]:
        """Start ``coro`` as a task on the loop, in a copy of the caller's context.

        Returns:
            A future that mirrors the task (cancelling it cancels the task) and an
            event set once the task has finished, whatever its outcome.
        """
        loop = self.loop
        result: concurrent.futures.Future[T] = concurrent.futures.Future()
        finished = threading.Event()

        def settle(task: asyncio.Task[T]) -> None:
            finished.set()
            try:
                exc = task.exception()  # retrieved, in every case
            except asyncio.CancelledError as cancelled:
                # Unless the caller cancelled it (the return below), the coroutine raised
                # CancelledError itself (a library's inner task cancelled). Passed on as an
                # error, as awaiting the task raises it: result.cancel() would wake no
                # concurrent.futures.wait, and run_sync would wait forever.
                exc = cancelled
            if result.cancelled():
                return
            try:
                if exc is not None:
                    result.set_exception(exc)
                else:
                    result.set_result(task.result())
            except concurrent.futures.InvalidStateError:  # cancelled meanwhile by the caller
                pass

        def start() -> None:
            if result.cancelled():
                coro.close()
                finished.set()
                return
            task = loop.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(settle)

            def cancel_task(fut: concurrent.futures.Future[T]) -> None:
                if fut.cancelled() and not task.done():
                    # RuntimeError: the loop was stopped and closed meanwhile.
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(task.cancel)

            result.add_done_callback(cancel_task)

        # call_soon_threadsafe runs `start` in a copy of this thread's context.
        loop.call_soon_threadsafe(start)
        return result, finished

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop and return a future of its result.

        Cancelling the future cancels the coroutine.
        """
        return self._start(coro)[0]

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block until it finishes.

        Called from the loop's own thread, the coroutine runs on a fresh loop in
        a helper thread instead (see the module docstring).

        Args:
            coro: the coroutine.
            timeout: seconds to wait; on expiry the coroutine is cancelled (and
                given up to ``CANCEL_GRACE_S`` seconds to finish cancelling).

        Returns:
            The coroutine's result.

        Raises:
            SyncTimeoutError: ``timeout`` expired.
            BaseException: whatever the coroutine raised.
        """
        if self.in_loop_thread():
            helper = BackgroundLoop(f"{self.name}-nested")
            try:
                return helper.run_sync(coro, timeout)
            finally:
                helper.stop()
        result, finished = self._start(coro)
        try:
            done, _ = concurrent.futures.wait([result], timeout)
        except BaseException:  # KeyboardInterrupt while waiting: stop the coroutine too
            result.cancel()
            raise
        if not done:
            result.cancel()
            finished.wait(CANCEL_GRACE_S)
            raise SyncTimeoutError(f"no result within {timeout} s; the coroutine was cancelled")
        return result.result()

    async def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and await it from the caller's loop (or this one).

        Cancelling the awaiting task cancels the coroutine.
        """
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and wait (up to ``timeout`` s) for its thread to exit.

        Tasks still running are abandoned. The next use starts a new loop.
        """
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(timeout)

    def __repr__(self) -> str:
        state = "running" if self._thread is not None and self._thread.is_alive() else "idle"
        return f"BackgroundLoop({self.name!r}, {state})"


_loops: dict[str, BackgroundLoop] = {}
_loops_lock = threading.Lock()


def background_loop(name: str = "sync") -> BackgroundLoop:
    """The process-wide background loop of this name (thread ``toolbudget-<name>``).

    Args:
        name: ``"sync"`` (the executor's sync path) or ``"mcp"`` (MCP sessions);
            any other name gets its own loop.

    Returns:
        The loop, created on first use and kept for the life of the process.
    """
    with _loops_lock:
        if name not in _loops:
            _loops[name] = BackgroundLoop(f"toolbudget-{name}")
        return _loops[name]


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the ``"sync"`` background loop and block until it finishes.

    See :meth:`BackgroundLoop.run_sync`.
    """
    return background_loop("sync").run_sync(coro, timeout)
