"""The per-call pipeline every tool call goes through: check -> coerce -> invoke -> normalise.

Key Components:
    - :class:`ToolCallPipeline`: runs one tool call (:meth:`~ToolCallPipeline.run`
      under ``invoke``, :meth:`~ToolCallPipeline.arun` under ``ainvoke``). Hooks
      in the shape of LangGraph's ``wrap_tool_call`` / ``awrap_tool_call``
      (``(request, execute) -> result``, where ``execute`` may be called again,
      e.g. to retry) wrap the four stages. The request is LangGraph's own
      ``ToolCallRequest``, so a ``ToolNode`` wrapper works here unchanged.
    - Stages, in order: **check** (is the call allowed: the caller's policy
      names the problem, e.g. a hidden tool), **coerce** (repair the model's
      arguments against the tool's schema), **invoke** (inject LangGraph
      arguments, run the tool within its ``timeout_s``), **normalise** (any tool
      output becomes a ``ToolMessage``, a ``Command`` or a list of them; the
      result of a deprecated tool, success or failure, gets a note saying so).

The check and coerce stages are :class:`~langgraph_toolbudget.execution.prepare.CallPreparer`'s,
normalising is :class:`~langgraph_toolbudget.execution.outputs.OutputNormaliser`'s.

Where a tool runs: under ``ainvoke``, an async tool on the event loop and a sync tool
in the pipeline's own thread pool (:class:`ToolThreads`: a standard ``ThreadPoolExecutor``
running ``max_workers`` calls at once, where a call abandoned at its timeout gives its
place to the next; never the interpreter's default pool). Under ``invoke``, a
sync tool in the calling thread; a tool with a ``timeout_s``, or one that has only
an async implementation (MCP tools), through the async invoke stage on the
package's background event loop (:func:`~langgraph_toolbudget._runner.run_sync`),
so the timeout is the same either way. Sync hooks under ``ainvoke`` run in a second
pool of the same size, so a hook waiting for its tool never holds a tool's thread.

By default every failure becomes an error ``ToolMessage`` that names the tool and
the problem (and the expected schema for bad arguments); ``handle_tool_errors``
in one of ``ToolNode``'s forms answers or raises as ``ToolNode`` does
(:mod:`~langgraph_toolbudget.execution.errors`). Raised whatever the setting, as
by ``ToolNode``: LangGraph's control flow (interrupts, and an invalid answer to an
interrupt), a missing store for ``InjectedStore`` and a missing state key for
``InjectedState`` (the graph is built wrong: no model can fix it).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from contextvars import copy_context
from functools import partial
from typing import Any, TypeVar, cast

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolRuntime
from langgraph.prebuilt.tool_node import ToolCallRequest

from langgraph_toolbudget._compat import runtime_of
from langgraph_toolbudget._forks import reset_in_forked_children
from langgraph_toolbudget._runner import run_sync
from langgraph_toolbudget.core.catalog import ToolCatalog, ToolSpec
from langgraph_toolbudget.execution.errors import HandleToolErrors, ToolErrorPolicy
from langgraph_toolbudget.execution.hooks import (
    AsyncToolCallWrapper,
    ToolCallWrapper,
    achain,
    as_hooks,
    chain,
)
from langgraph_toolbudget.execution.lingering import LingeringCalls, ToolTimeoutError, within
from langgraph_toolbudget.execution.outputs import OutputNormaliser
from langgraph_toolbudget.execution.prepare import CallCheck, CallPreparer, Refused, error_message
from langgraph_toolbudget.execution.returned import keeping
from langgraph_toolbudget.execution.scheduler import group_limits_of

__all__ = [
    "AsyncToolCallWrapper",
    "CallCheck",
    "ToolCallPipeline",
    "ToolCallWrapper",
    "ToolThreads",
]

T = TypeVar("T")

TOOL_THREAD_NAME = "toolbudget-tool"
HOOK_THREAD_NAME = "toolbudget-hook"
# Fields of LangGraph's Runtime that newer ToolRuntimes carry too (langgraph-prebuilt >= 1.1).
_RUNTIME_EXTRAS = tuple(
    k for k in ("execution_info", "server_info") if k in ToolRuntime.__dataclass_fields__
)


def is_async_only(tool: BaseTool) -> bool:
    """A tool with a coroutine and no sync function (MCP tools, ``async def`` tools)."""
    return isinstance(tool, StructuredTool) and tool.func is None and tool.coroutine is not None


def runs_in_thread(tool: BaseTool) -> bool:
    """A sync-only tool: ``ainvoke`` would run its ``invoke`` in a worker thread."""
    if isinstance(tool, StructuredTool):
        return tool.coroutine is None and tool.func is not None
    return type(tool)._arun is BaseTool._arun


class _InPool:
    """``tool`` as another tool node calls it (``await tool.ainvoke(input, config)``), with
    its ``invoke`` run in the pipeline's pool, as ``ToolExecutor`` runs a sync tool, rather
    than in the event loop's default pool; each thread's future is kept, so a call abandoned
    at its timeout counts against its group until its thread really ends. Any other
    attribute is the tool's (a hook inside the caller reads the tool through it).
    """

    def __init__(self, tool: BaseTool, threads: ToolThreads) -> None:
        self.tool = tool
        self.threads = threads
        self.futures: list[Future[Any]] = []
        self.began: Future[float] = Future()  # set when its first thread starts (monotonic)
        self._lock = threading.Lock()
        self._started_at: float | None = None
        self._refused = False  # no thread started while the call waited: none may now

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "tool":  # copy/pickle protocols; before __init__
            raise AttributeError(name)
        return getattr(self.tool, name)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """``tool.invoke(input, config, **kwargs)`` in the pool, awaited."""
        invoke = partial(self.tool.invoke, input, config, **kwargs)
        future = self.threads.submit(invoke, on_start=self._start)
        self.futures.append(future)
        return await asyncio.wrap_future(future)

    def _start(self) -> bool:
        """In the pool's thread, before the tool runs: may it start? Not once the call's wait
        for a thread has ended without one (:meth:`stop_waiting`)."""
        with self._lock:
            if self._refused:
                return False
            if self._started_at is None:
                self._started_at = time.monotonic()
                with contextlib.suppress(InvalidStateError):  # the waiter is gone
                    self.began.set_result(self._started_at)
            return True

    def stop_waiting(self) -> float | None:
        """The call's wait for a thread has ended: when its first thread started, else None,
        and then no thread of it will start."""
        with self._lock:
            if self._started_at is None:
                self._refused = True
            return self._started_at

    def running(self) -> list[Future[Any]]:
        """The futures of the threads still running (or waiting for a place)."""
        return [f for f in self.futures if not f.done()]

    def never_ran(self) -> bool:
        """The tool was called, and no call of it started: each was cancelled while it
        waited for a place in the pool."""
        return bool(self.futures) and all(f.cancelled() for f in self.futures)


class _Places:
    """``size`` places, given first come, first served: a ``threading.Semaphore`` lets the
    thread that just gave a place back take it again, for its next call, before a thread
    that waits for one wakes, so a call could wait past its deadline while later ones ran."""

    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._free = size
        self._waiting: deque[threading.Event] = deque()

    def acquire(self) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # the place is handed over by release()

    def release(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1


class ToolThreads:
    """A standard ``ThreadPoolExecutor`` that runs at most ``size`` calls at once and carries
    the caller's context variables into each call (LangGraph's config and stream writer live
    there).

    A call abandoned at its timeout gives its place to the next call (:meth:`release`) while
    its thread runs on (Python cannot stop it). Places go to the calls in the order they
    asked for one. A call whose ``deadline`` passed while it waited for a place never
    starts: its future is cancelled (as is the future of a call its caller cancels while
    it waits, or one its ``on_start`` refuses). The pool has ``size`` spare threads for such
    calls: at most ``2 * size`` threads are alive, and only abandoned calls beyond ``size``
    still running take places from later calls.

    Made on first use (once, whichever thread or event loop comes first), and forgotten at
    a fork, in the child: the parent's workers do not survive a fork, and the copied pool
    would wait for them forever.

    Args:
        size: calls running at once, at most.
        name: the threads' name prefix.
    """

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self._pool: ThreadPoolExecutor | None = None
        self._places = _Places(size)
        self._running: dict[Future[Any], _Places] = {}  # calls holding a place
        self._lock = threading.Lock()
        self._making = threading.Lock()  # held while the pool is made
        reset_in_forked_children(self)

    def _after_fork(self) -> None:
        # A thread of the parent holding these locks is not in the child.
        self._pool, self._lock, self._making = None, threading.Lock(), threading.Lock()

    def submit(
        self,
        func: Callable[..., T],
        /,
        *args: Any,
        deadline: float | None = None,
        on_start: Callable[[], bool] | None = None,
    ) -> Future[T]:
        """Start ``func(*args)`` in the pool once one of the ``size`` places is free, unless
        ``deadline`` (a ``time.monotonic()`` time) has passed by then, or ``on_start()``,
        asked in the pool's thread at that moment, says no: the future is then cancelled,
        and ``func`` never runs."""
        pool, places = self._made()
        future: Future[T] = Future()
        run = partial(self._run, places, future, deadline, on_start)
        pool.submit(copy_context().run, run, func, *args)
        return future

    def _made(self) -> tuple[ThreadPoolExecutor, _Places]:
        """The pool and its places, made on first use (two event loops' first calls at once
        get one pool: two would each run ``size`` calls)."""
        with self._making:
            if self._pool is None:
                self._places, self._running = _Places(self.size), {}
                self._pool = ThreadPoolExecutor(2 * self.size, thread_name_prefix=self.name)
            return self._pool, self._places

    def _run(
        self,
        places: _Places,
        future: Future[T],
        deadline: float | None,
        on_start: Callable[[], bool] | None,
        func: Callable[..., T],
        *args: Any,
    ) -> None:
        places.acquire()
        with self._lock:
            self._running[future] = places
        try:
            # The place may come from a call abandoned at the same deadline, before the
            # caller's own timeout has cancelled this future: it must not start then.
            late = deadline is not None and time.monotonic() >= deadline
            # on_start is asked only when nothing else stops the call: its yes claims the start
            if late or (on_start is not None and not future.cancelled() and not on_start()):
                future.cancel()
            if future.set_running_or_notify_cancel():  # False: cancelled while it waited
                try:
                    result = _no_stop_iteration(func, *args)
                except BaseException as exc:  # noqa: BLE001 - the caller gets it, as from the pool
                    future.set_exception(exc)
                else:
                    future.set_result(result)
        finally:
            self.release(future)

    def release(self, future: Future[Any]) -> None:
        """Give the place of ``future``'s call to the next call: when the call ends, or when
        it is abandoned at its timeout and its thread runs on (once, whichever comes first)."""
        with self._lock:
            places = self._running.pop(future, None)
        if places is not None:
            places.release()

    async def run(self, func: Callable[..., T], /, *args: Any) -> T:
        """Await ``func(*args)`` run in the pool."""
        return await asyncio.wrap_future(self.submit(func, *args))


BATCH_TIME_ERROR = (
    "Error: tool {tool!r} was not run: its timeout_s ({timeout:g} s) counts from the start of "
    "its batch, and the calls before it in concurrency group {group!r} used all of it. Call "
    "it again, in a batch of its own or with fewer calls to that group."
)
"""A batch has one deadline: each call's ``timeout_s`` counts from the moment the model's
calls arrive, not from the moment the call's turn comes, so a batch of calls that wait for
each other (impure calls of one group, say one MCP server) takes at most its longest
``timeout_s``, not the sum of them (6 calls to a hanging tool at 2 s took 12 s)."""


POOL_TIME_ERROR = (
    "Error: tool {tool!r} was not run: its timeout_s ({timeout:g} s) ran out before a thread "
    "started it (tools run {size} at once; other calls held the threads, or the time was too "
    "short to start one). Call it again, in a batch of its own or with fewer calls."
)
"""A call whose time ran out before a thread of the pool was free for it: it never started
(see :class:`ToolThreads`)."""


class _NotRun(Exception):
    """The refusal of a call that never started (its message is the answer to the model)."""


def time_left(spec: ToolSpec | None, started: float | None) -> float | None:
    """The seconds ``spec``'s ``timeout_s`` leaves a call of a batch that began at ``started``
    (``None``: no timeout; the whole ``timeout_s`` without a batch start)."""
    if spec is None or not spec.timeout_s:
        return None
    if started is None:
        return spec.timeout_s
    return spec.timeout_s - (time.monotonic() - started)


def deadline_of(spec: ToolSpec | None, started: float | None) -> float | None:
    """The ``time.monotonic()`` time ``spec``'s ``timeout_s`` ends for a call of a batch that
    began at ``started`` (``None``: no timeout; the whole ``timeout_s`` from now without a
    batch start): never later than the deadline the call's caller is answered at."""
    if spec is None or not spec.timeout_s:
        return None
    return (time.monotonic() if started is None else started) + spec.timeout_s


def _out_of_time(spec: ToolSpec, started: float | None) -> str | None:
    """The refusal of a call whose batch used up its ``timeout_s`` before its turn came."""
    left = time_left(spec, started)
    if left is None or left > 0:
        return None
    return BATCH_TIME_ERROR.format(
        tool=spec.name, timeout=spec.timeout_s, group=spec.concurrency_group
    )


def _cancelling() -> bool:
    """The current task is being cancelled (by its caller, not by the work it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _no_stop_iteration(func: Callable[..., T], *args: Any) -> T:
    try:
        return func(*args)
    except StopIteration as exc:  # an asyncio future cannot hold it: it would never settle
        raise RuntimeError(f"{func!r} raised StopIteration") from exc


class ToolCallPipeline:
    """Runs one tool call through check -> coerce -> invoke -> normalise.

    Args:
        catalog: the tool catalog (tools, their schemas and timeouts), in the
            runtime mode of the calls: only its listed tools run.
        wrap_tool_call: hooks around the stages, outermost first (a callable or
            a sequence), as LangGraph's ``ToolNode(wrap_tool_call=...)``.
        awrap_tool_call: async hooks for async runs; without them, async runs
            use ``wrap_tool_call`` in a worker thread.
        max_workers: calls at once in the pipeline's own thread pool, where sync tools
            run under ``ainvoke`` (and in a second pool, ``hook_threads``, for sync
            hooks and other work kept off the event loop); the interpreter's
            default pool is never used, so its size does not cap ``parallel_safe``.
        handle_tool_errors: ``None`` (explained error messages for every
            failure) or any of ``ToolNode``'s forms, with its meaning.
        messages_key: the state key of the messages (``Command`` updates a tool
            returns are checked for their tool message under this key).
        group_limits: group -> calls at once, over the tools' ``max_concurrency``:
            a group's abandoned calls that still run count toward its limit.
        searches: the model has ``search_tools`` (a deprecation note points to it).

    Example:
        ```python
        def retry_once(request, execute):
            result = execute(request)
            return execute(request) if getattr(result, "status", "") == "error" else result

        pipeline = ToolCallPipeline(catalog, wrap_tool_call=retry_once)
        ```
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        wrap_tool_call: ToolCallWrapper | Sequence[ToolCallWrapper] | None = None,
        awrap_tool_call: AsyncToolCallWrapper | Sequence[AsyncToolCallWrapper] | None = None,
        max_workers: int = 16,
        handle_tool_errors: HandleToolErrors = None,
        messages_key: str = "messages",
        group_limits: Mapping[str, int] | None = None,
        searches: bool = True,
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.catalog = catalog
        self.errors = ToolErrorPolicy(handle_tool_errors)
        self.messages_key = messages_key
        self.threads = ToolThreads(max_workers, TOOL_THREAD_NAME)
        self.hook_threads = ToolThreads(max_workers, HOOK_THREAD_NAME)
        self.wrappers = as_hooks(wrap_tool_call, "wrap_tool_call")
        self.awrappers = as_hooks(awrap_tool_call, "awrap_tool_call")
        self.preparer = CallPreparer(catalog, messages_key)
        self.outputs = OutputNormaliser(catalog, self.errors, messages_key, searches=searches)
        self._tools = [s.tool for s in catalog.specs]  # ToolRuntime.tools, as ToolNode gives
        self.lingering = LingeringCalls(group_limits_of(catalog, group_limits))

    # --- the request ------------------------------------------------------------------------

    def _tool(self, call: ToolCall) -> BaseTool | None:
        spec = self.catalog.get(call["name"])
        return spec.tool if spec is not None and spec.name in self.catalog else None

    def _runtime(self, call: ToolCall, state: Any, config: RunnableConfig) -> ToolRuntime:
        runtime = runtime_of(config)
        extra = {k: getattr(runtime, k, None) for k in _RUNTIME_EXTRAS}
        return ToolRuntime(
            state=state,
            context=getattr(runtime, "context", None),
            config=config,
            stream_writer=getattr(runtime, "stream_writer", None) or (lambda _: None),
            tool_call_id=call["id"],
            store=getattr(runtime, "store", None),
            tools=self._tools,
            **extra,
        )

    def request(self, call: ToolCall, state: Any, config: RunnableConfig) -> ToolCallRequest:
        """The ``ToolCallRequest`` the hooks see for ``call`` (tool None if not in the catalog)."""
        runtime = self._runtime(call, state, config)
        return ToolCallRequest(tool_call=call, tool=self._tool(call), state=state, runtime=runtime)

    # --- one call, with the hooks -----------------------------------------------------------

    def run(
        self,
        call: ToolCall,
        state: Any,
        config: RunnableConfig,
        check: CallCheck,
        *,
        started: float | None = None,
    ) -> Any:
        """Run one call (sync) through the hooks and the stages.

        ``started``: when the call's batch started (``time.monotonic()``); the tool's
        ``timeout_s`` then counts from it (see :data:`BATCH_TIME_ERROR`), else from the
        moment the tool starts.
        """
        request = self.request(call, state, config)
        execute = partial(self.execute, config=config, check=check, started=started)
        if not self.wrappers:
            return execute(request)
        try:
            return chain(self.wrappers, execute)(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - the policy answers or re-raises it
            return self.errors.hook_failed(call, exc)

    async def arun(
        self,
        call: ToolCall,
        state: Any,
        config: RunnableConfig,
        check: CallCheck,
        *,
        async_hooks: bool = True,
        started: float | None = None,
    ) -> Any:
        """Run one call (async) through the hooks and the stages.

        ``async_hooks=False``: the sync hooks even when async ones are given (a
        sync ``invoke`` whose calls run concurrently on the background loop).
        ``started``: as for :meth:`run`.
        """
        if async_hooks and self.awrappers:
            request = self.request(call, state, config)
            aexecute = partial(self.aexecute, config=config, check=check, started=started)
            try:
                return await achain(self.awrappers, aexecute)(request)
            except GraphBubbleUp:
                raise
            except Exception as exc:  # noqa: BLE001 - the policy answers or re-raises it
                return self.errors.hook_failed(call, exc)
        if self.wrappers:  # sync hooks may block: run them (and the call) off the event loop
            run = partial(self.run, started=started)
            return await self.hook_threads.run(run, call, state, config, check)
        return await self.aexecute(self.request(call, state, config), config, check, started)

    # --- the stages -------------------------------------------------------------------------

    def execute(
        self,
        request: ToolCallRequest,
        config: RunnableConfig,
        check: CallCheck,
        started: float | None = None,
    ) -> Any:
        """The four stages for a request, sync (``started``: see :meth:`run`)."""
        prepared = self.preparer.prepare(request.tool_call, request.tool, check)
        if isinstance(prepared, ToolMessage):
            return prepared
        if isinstance(prepared, Refused):
            return self.outputs.failure(prepared.call, prepared.tool, prepared.error)
        tool, call = prepared
        tool_input = self._tool_input(tool, call, request)  # raises as ToolNode does
        invoke = partial(self._invoke, started=started)
        runner = keeping(tool, call.get("id"))  # the tool itself unless a caller keeps the value
        return self._invoked(
            call, tool, request.state, invoke, runner, tool_input, config, started=started
        )

    async def aexecute(
        self,
        request: ToolCallRequest,
        config: RunnableConfig,
        check: CallCheck,
        started: float | None = None,
    ) -> Any:
        """The four stages for a request, async (``started``: see :meth:`run`)."""
        prepared = self.preparer.prepare(request.tool_call, request.tool, check)
        if isinstance(prepared, ToolMessage):
            return prepared
        if isinstance(prepared, Refused):
            return self.outputs.failure(prepared.call, prepared.tool, prepared.error)
        tool, call = prepared
        tool_input = self._tool_input(tool, call, request)  # raises as ToolNode does
        runner = keeping(tool, call.get("id"))
        start = partial(self._start, started=started)
        return await self._ainvoked(
            call, tool, request.state, start, runner, tool_input, config, started=started
        )

    def delegate(
        self, request: ToolCallRequest, check: CallCheck, invoke: Callable[[Any], Any]
    ) -> Any:
        """The stages around another tool node's invoke stage, ``invoke(request)`` (sync)."""
        prepared = self.preparer.prepare(request.tool_call, request.tool, check)
        if isinstance(prepared, ToolMessage):
            return prepared
        if isinstance(prepared, Refused):
            return self.outputs.failure(prepared.call, prepared.tool, prepared.error)
        tool, call = prepared
        return self._invoked(call, tool, request.state, invoke, request.override(tool_call=call))

    async def adelegate(
        self, request: ToolCallRequest, check: CallCheck, ainvoke: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        """The async :meth:`delegate`, bounded by the tool's ``timeout_s``.

        A sync tool with a timeout runs in the pipeline's pool (the tool node is handed it
        through :class:`_InPool`), so a call abandoned at its timeout, or with its cancelled
        run, keeps its group busy until its thread ends, as under ``ToolExecutor``; in the
        loop's default pool its thread would run on uncounted once the tool node's task
        ended.
        """
        prepared = self.preparer.prepare(request.tool_call, request.tool, check)
        if isinstance(prepared, ToolMessage):
            return prepared
        if isinstance(prepared, Refused):
            return self.outputs.failure(prepared.call, prepared.tool, prepared.error)
        tool, call = prepared
        request = request.override(tool_call=call)
        spec = self.catalog.get(tool.name)
        if spec is None or not spec.timeout_s or not runs_in_thread(tool):
            return await self._ainvoked(call, tool, request.state, ainvoke, request)
        pooled = _InPool(tool, self.threads)
        request = request.override(tool=cast("BaseTool", pooled))
        return await self._ainvoked(call, tool, request.state, ainvoke, request, pooled=pooled)

    def _invoked(
        self,
        call: ToolCall,
        tool: BaseTool,
        state: Any,
        invoke: Callable[..., Any],
        *args: Any,
        started: float | None = None,
    ) -> Any:
        """``invoke(*args)`` once the group's abandoned calls let it run (and while its batch
        leaves it time); its result normalised and noted, a failure answered by the error
        policy."""
        spec = self.catalog.get(tool.name)
        if spec is not None and (refusal := self._refusal(spec, started)):
            return error_message(call, refusal)
        try:
            output = self.outputs.normalise(call, tool, invoke(*args), state)
        except GraphBubbleUp:
            raise
        except _NotRun as refusal:
            return error_message(call, str(refusal))
        except Exception as exc:  # noqa: BLE001 - the error policy answers or re-raises it
            output = self.outputs.failure(call, tool, exc)
        return self.outputs.noted(call, output)

    async def _ainvoked(
        self,
        call: ToolCall,
        tool: BaseTool,
        state: Any,
        start: Callable[..., Awaitable[Any] | Future[Any]],
        *args: Any,
        started: float | None = None,
        pooled: _InPool | None = None,
    ) -> Any:
        """The async :meth:`_invoked`; ``start(*args)`` starts the work (a coroutine, or a
        thread's future), which gets the time its ``timeout_s`` leaves it (``pooled``: the
        threads the coroutine runs the tool in)."""
        spec = self.catalog.get(tool.name)
        if spec is not None and (refusal := await self._arefusal(spec, started)):
            return error_message(call, refusal)
        try:
            response = await self._timed(tool, start(*args), started, pooled)
            output = self.outputs.normalise(call, tool, response, state)
        except GraphBubbleUp:
            raise
        except _NotRun as refusal:
            return error_message(call, str(refusal))
        except Exception as exc:  # noqa: BLE001 - the error policy answers or re-raises it
            output = self.outputs.failure(call, tool, exc)
        return self.outputs.noted(call, output)

    def _refusal(self, spec: ToolSpec, started: float | None) -> str | None:
        """Why a call of ``spec`` may not run now, after waiting for the abandoned calls of its
        group while its batch (begun at ``started``) leaves it time; None if it may run."""
        if refusal := _out_of_time(spec, started):
            return refusal
        batch_left = time_left(spec, started) if started is not None else None
        return self.lingering.wait(spec, batch_left) or _out_of_time(spec, started)

    async def _arefusal(self, spec: ToolSpec, started: float | None) -> str | None:
        """The async :meth:`_refusal`."""
        if refusal := _out_of_time(spec, started):
            return refusal
        batch_left = time_left(spec, started) if started is not None else None
        return await self.lingering.await_clear(spec, batch_left) or _out_of_time(spec, started)

    def _invoke(
        self,
        tool: BaseTool,
        tool_input: Any,
        config: RunnableConfig,
        started: float | None = None,
    ) -> Any:
        """Run the tool (sync): in this thread, or on the background loop when it has a
        timeout or only an async implementation."""
        spec = self.catalog.get(tool.name)
        if (spec is None or not spec.timeout_s) and not is_async_only(tool):
            return tool.invoke(tool_input, config)
        work = self._start(tool, tool_input, config, started)
        return run_sync(self._timed(tool, work, started))

    def _start(
        self,
        tool: BaseTool,
        tool_input: Any,
        config: RunnableConfig,
        started: float | None = None,
    ) -> Awaitable[Any] | Future[Any]:
        """Start the tool: a sync one in the pool (its thread's future; it never starts once
        the time its ``timeout_s`` leaves it has run out), an async one as a coroutine."""
        if runs_in_thread(tool):  # as BaseTool.ainvoke would, but in our own pool
            deadline = deadline_of(self.catalog.get(tool.name), started)
            return self.threads.submit(tool.invoke, tool_input, config, deadline=deadline)
        return tool.ainvoke(tool_input, config)

    async def _timed(
        self,
        tool: BaseTool,
        work_started: Awaitable[Any] | Future[Any],
        started: float | None,
        pooled: _InPool | None = None,
    ) -> Any:
        """The result of ``work_started`` within the time the tool's ``timeout_s`` leaves it
        (counted from ``started``, its batch's start, when given). Past it, raise
        ``TimeoutError`` and abandon the work: logged, its result dropped, and (a
        thread's work as much as a task's) keeping its group busy until it really ends. The
        work of a cancelled caller is abandoned too: it counts toward its group's limit
        until it ends. ``pooled``: the threads a coroutine's tool runs in, abandoned in its
        stead (the coroutine itself ends at once).

        A thread's work whose time ran out while it waited for a place in the pool never
        starts: raise :class:`_NotRun` (:data:`POOL_TIME_ERROR`) instead, and nothing lingers.
        """
        spec = self.catalog.get(tool.name)
        timeout = time_left(spec, started)
        lingers: Any  # a thread's work lingers until the thread ends, a task's until the task
        if isinstance(work_started, Future):
            work, lingers = asyncio.wrap_future(work_started), work_started
        elif spec is None or timeout is None:
            return await work_started  # a coroutine with no timeout runs in this task
        else:
            work = lingers = asyncio.ensure_future(work_started)
        if spec is None:  # a tool outside the catalog (a hook's own): nothing to count
            return await work
        limit = None if timeout is None else max(timeout, 0.0)
        try:
            if pooled is not None and limit is not None:
                return await self._within_pooled(spec, work, pooled, limit)
            return await within(work, limit, partial(self._abandon, spec, lingers))
        except (ToolTimeoutError, asyncio.CancelledError) as exc:
            # A thread's work cancelled while it waited for a place never ran: say so (unless
            # the caller itself was cancelled: that goes on up).
            if pooled is not None:
                never_ran, in_thread = pooled.never_ran(), pooled.stop_waiting() is not None
            else:
                never_ran = isinstance(lingers, Future) and lingers.cancelled()
                in_thread = isinstance(lingers, Future) and not never_ran
            if not never_ran or _cancelling():
                if isinstance(exc, ToolTimeoutError):
                    exc.thread_started = in_thread
                raise
            raise _NotRun(
                POOL_TIME_ERROR.format(
                    tool=spec.name, timeout=spec.timeout_s, size=self.threads.size
                )
            ) from None

    async def _within_pooled(
        self, spec: ToolSpec, task: asyncio.Future[Any], pooled: _InPool, limit: float
    ) -> Any:
        """The result of another tool node's call of a sync tool run in the pool
        (``ToolBudgetMiddleware``'s): its time, ``limit``, counts from the moment its thread
        starts, as its wait for its group's turn does not shorten it either; it waits at
        most ``limit`` for a thread, and then never starts (:meth:`_InPool.stop_waiting`
        decides, under the lock the thread takes to start). A second thread of the call (an
        inner middleware's retry) waits for a place within the call's time."""
        abandon = partial(self._abandon_pooled, spec, task, pooled)
        began = asyncio.wrap_future(pooled.began)
        try:
            await asyncio.wait({task, began}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            abandon(True)
            raise
        finally:
            began.cancel()  # done, or no longer awaited
        if not task.done():
            started_at = pooled.stop_waiting()
            if started_at is None:
                task.cancel()
                abandon(False)
                raise ToolTimeoutError(f"no thread within {limit:g} s")
            await within(task, max(started_at + limit - time.monotonic(), 0.0), abandon)
        # An inner middleware may answer without awaiting the tool's thread (its own
        # timeout): the thread runs on, and counts against its group until it ends.
        for lingers in pooled.running():
            self._abandon(spec, lingers, False)
        return task.result()

    def _abandon(self, spec: ToolSpec, lingers: Any, cancelled: bool) -> None:
        """Count abandoned work (timed out, or its run ``cancelled``) against its group until
        it ends; a thread's gives its place in the pool to the next call meanwhile. A thread's
        work still waiting for a place is cancelled instead: it never starts, nothing lingers.
        """
        # At once: the cancel of its asyncio wrapper reaches it only a loop iteration later,
        # when the place given back below may already have started it.
        if isinstance(lingers, Future) and lingers.cancel():
            return
        self.lingering.add(spec, lingers, cancelled=cancelled)
        if isinstance(lingers, Future):
            if cancelled:
                # A cancelled run cancels its calls' tasks one after another, all in this loop
                # step: its calls still waiting for a place must be cancelled (above, in
                # their own tasks) before this place frees, or one of them would start.
                asyncio.get_running_loop().call_soon(self.threads.release, lingers)
            else:
                self.threads.release(lingers)

    def _abandon_pooled(
        self, spec: ToolSpec, task: asyncio.Future[Any], pooled: _InPool, cancelled: bool
    ) -> None:
        """:meth:`_abandon` for another tool node's call of a sync tool: the tool's threads
        that still run (the task awaiting them ends at once), else the task itself (it had
        not started the tool)."""
        running: list[Any] = pooled.running()
        for lingers in running or [task]:
            self._abandon(spec, lingers, cancelled)

    def _tool_input(self, tool: BaseTool, call: ToolCall, request: ToolCallRequest) -> Any:
        inject = self.preparer.injector(tool)
        if inject is not None:
            call = inject(call, request.runtime)
        return {**call, "type": "tool_call"}
