"""The per-call pipeline every tool call goes through: check -> coerce -> invoke -> normalise.

Key Components:
    - :class:`ToolCallPipeline`: runs one tool call. Hooks in the shape of
      LangGraph's ``wrap_tool_call`` / ``awrap_tool_call`` (``(request,
      execute) -> result``, where ``execute`` may be called again, e.g. to
      retry) wrap the four stages, so middleware and runtime guards plug in
      without touching them. The request is LangGraph's own
      ``ToolCallRequest``, so a ``ToolNode`` wrapper works here unchanged.
    - Stages, in order: **check** (is the call allowed: the caller's policy
      names the problem, e.g. a hidden tool), **coerce** (repair the model's
      arguments against the tool's schema), **invoke** (inject LangGraph
      arguments, run the tool with its timeout), **normalise** (any tool
      output becomes a ``ToolMessage``, a ``Command`` or a list of them; the
      result of a deprecated tool, success or failure, gets a note saying so).

The check and coerce stages are :class:`~langgraph_toolbudget.execution.prepare.CallPreparer`'s,
normalising is :class:`~langgraph_toolbudget.execution.outputs.OutputNormaliser`'s; sync
tools run in the pipeline's own thread pool
(:class:`~langgraph_toolbudget.execution.thread_pool.ToolThreadPool`).

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
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolRuntime
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from langgraph_toolbudget._compat import runtime_of
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.spec import ToolSpec
from langgraph_toolbudget.execution.errors import HandleToolErrors, ToolErrorPolicy
from langgraph_toolbudget.execution.hooks import (
    AsyncToolCallWrapper,
    ToolCallWrapper,
    achain,
    as_hooks,
    chain,
)
from langgraph_toolbudget.execution.lingering import LingeringCalls, within
from langgraph_toolbudget.execution.outputs import OutputNormaliser
from langgraph_toolbudget.execution.prepare import CallCheck, CallPreparer, error_message
from langgraph_toolbudget.execution.thread_pool import ToolThreadPool

__all__ = [
    "AsyncToolCallWrapper",
    "CallCheck",
    "ToolCallPipeline",
    "ToolCallWrapper",
    "ToolOutput",
]

ToolOutput = ToolMessage | Command | list[Any]
"""What one call produces: a tool message, a ``Command``, or a list of them."""
Invoke = Callable[[BaseTool, ToolCall], Callable[[], Any]]
"""The invoke stage: ``(tool, coerced call) -> run``; ``run()`` gives the tool's output."""
Started = Awaitable[Any] | Future[Any]
"""Work an async invoke stage started: an awaitable, or a thread's ``Future``."""
AInvoke = Callable[[BaseTool, ToolCall], Callable[[], Started]]
"""The async invoke stage: ``(tool, coerced call) -> run``; ``run()`` starts the work."""
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


class ToolCallPipeline:
    """Runs one tool call through check -> coerce -> invoke -> normalise.

    Args:
        catalog: the tool catalog (tools, their schemas and timeouts), in the
            runtime mode of the calls: only its listed tools run.
        wrap_tool_call: hooks around the stages, outermost first (a callable or
            a sequence), as LangGraph's ``ToolNode(wrap_tool_call=...)``.
        awrap_tool_call: async hooks for async runs; without them, async runs
            use ``wrap_tool_call`` in a worker thread.
        max_workers: size of the pipeline's own thread pool, where sync tools
            (and sync hooks) run under ``ainvoke``; the interpreter's default
            pool is never used, so its size does not cap ``parallel_safe``.
        handle_tool_errors: ``None`` (explained error messages for every
            failure) or any of ``ToolNode``'s forms, with its meaning.
        messages_key: the state key of the messages (``Command`` updates a tool
            returns are checked for their tool message under this key).

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
    ) -> None:
        self.catalog = catalog
        self.errors = ToolErrorPolicy(handle_tool_errors)
        self.messages_key = messages_key
        self.threads = ToolThreadPool(max_workers)
        self.wrappers = as_hooks(wrap_tool_call, "wrap_tool_call")
        self.awrappers = as_hooks(awrap_tool_call, "awrap_tool_call")
        self.preparer = CallPreparer(catalog, messages_key)
        self.outputs = OutputNormaliser(catalog, self.errors, messages_key)
        self._tools = [s.tool for s in catalog.specs]  # ToolRuntime.tools, as ToolNode gives
        self.lingering = LingeringCalls()

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

    # --- running, with the hooks ------------------------------------------------------------

    def run(self, call: ToolCall, state: Any, config: RunnableConfig, check: CallCheck) -> Any:
        """Run one call (sync) through the hooks and the stages."""
        if not self.wrappers:  # no hook to show a request to: skip building one
            return self.prepared(call, state, config, check)()

        def execute(req: ToolCallRequest) -> Any:
            return self.execute(req, config, check)

        try:
            return chain(self.wrappers, execute)(self.request(call, state, config))
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - the policy answers or re-raises it
            return self.errors.hook_failed(call, exc)

    async def arun(
        self, call: ToolCall, state: Any, config: RunnableConfig, check: CallCheck
    ) -> Any:
        """Run one call (async) through the hooks and the stages, with its timeout."""
        if self.awrappers:

            async def aexecute(req: ToolCallRequest) -> Any:
                return await self.aexecute(req, config, check)

            try:
                return await achain(self.awrappers, aexecute)(self.request(call, state, config))
            except GraphBubbleUp:
                raise
            except Exception as exc:  # noqa: BLE001 - the policy answers or re-raises it
                return self.errors.hook_failed(call, exc)
        if self.wrappers:  # sync hooks: run them (and the call) off the event loop
            return await self.threads.to_thread(self.run, call, state, config, check)
        return await self._aexecute(call, self._tool(call), state, None, config, check)

    # --- the stages -------------------------------------------------------------------------

    def execute(self, request: ToolCallRequest, config: RunnableConfig, check: CallCheck) -> Any:
        """The four stages for a hook's request, sync (timed calls run async)."""
        return self._execute(
            request.tool_call, request.tool, request.state, request.runtime, config, check
        )

    async def aexecute(
        self, request: ToolCallRequest, config: RunnableConfig, check: CallCheck
    ) -> Any:
        """The four stages for a hook's request, async, bounded by the tool's ``timeout_s``."""
        return await self._aexecute(
            request.tool_call, request.tool, request.state, request.runtime, config, check
        )

    def _execute(
        self,
        call: ToolCall,
        tool: BaseTool | None,
        state: Any,
        runtime: ToolRuntime | None,
        config: RunnableConfig,
        check: CallCheck,
    ) -> Any:
        return self._split(call, tool, check, self._invoker(state, runtime, config), state)()

    def prepared(
        self, call: ToolCall, state: Any, config: RunnableConfig, check: CallCheck
    ) -> Callable[[], Any]:
        """One call (sync, no hooks) checked, coerced and its input built now; what is
        left (the wait for its group's abandoned calls, the tool, the output) is returned,
        to run in a worker thread. Under ``ainvoke`` the first part runs on the event
        loop, as it does for async tools, and the worker thread starts on the tool.

        Raises:
            Exception: what argument injection raises, as ``ToolNode`` does.
        """
        invoke = self._invoker(state, None, config)
        return self._split(call, self._tool(call), check, invoke, state)

    def _invoker(self, state: Any, runtime: ToolRuntime | None, config: RunnableConfig) -> Invoke:
        def invoke(tool: BaseTool, call: ToolCall) -> Callable[[], Any]:
            tool_input = self._tool_input(tool, call, state, runtime, config)
            return lambda: tool.invoke(tool_input, config)

        return invoke

    async def _aexecute(
        self,
        call: ToolCall,
        tool: BaseTool | None,
        state: Any,
        runtime: ToolRuntime | None,
        config: RunnableConfig,
        check: CallCheck,
    ) -> Any:
        def ainvoke(tool: BaseTool, call: ToolCall) -> Callable[[], Started]:
            tool_input = self._tool_input(tool, call, state, runtime, config)
            if runs_in_thread(tool):  # as BaseTool.ainvoke would, but in our own pool
                return lambda: self.threads.submit(tool.invoke, tool_input, config)
            return lambda: tool.ainvoke(tool_input, config)

        return await self._astaged(call, tool, check, ainvoke, state)

    def delegate(
        self, request: ToolCallRequest, check: CallCheck, invoke: Callable[[Any], Any]
    ) -> Any:
        """The stages around another tool node's invoke stage, ``invoke(request)`` (sync)."""
        call, tool, state = request.tool_call, request.tool, request.state
        return self._split(call, tool, check, _around(request, invoke), state)()

    async def adelegate(
        self, request: ToolCallRequest, check: CallCheck, ainvoke: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        """The async :meth:`delegate`, bounded by the tool's ``timeout_s``."""
        call, tool, state = request.tool_call, request.tool, request.state
        return await self._astaged(call, tool, check, _around(request, ainvoke), state)

    def _split(
        self, call: ToolCall, tool: BaseTool | None, check: CallCheck, invoke: Invoke, state: Any
    ) -> Callable[[], Any]:
        """Check and coerce now; return the rest: wait for the group's abandoned calls,
        invoke, normalise and note; failures as messages.

        ``invoke(tool, call)`` prepares the tool's input (raising now, as ``ToolNode``
        does, what argument injection raises) and returns the call to run.
        """
        prepared = self.preparer.prepare(call, tool, check)
        if isinstance(prepared, ToolMessage):
            return lambda: prepared
        tool, call = prepared
        run = invoke(tool, call)
        spec, lingering, outputs = self.catalog.get(tool.name), self.lingering, self.outputs

        def rest() -> Any:
            if spec is not None and lingering and (refusal := lingering.wait(spec)):
                return error_message(call, refusal)
            try:
                output = outputs.normalise(call, tool, run(), state)
            except GraphBubbleUp:
                raise
            except Exception as exc:  # noqa: BLE001 - the error policy answers or re-raises it
                return outputs.noted(call, outputs.failure(call, tool, exc))
            return outputs.noted(call, output)

        return rest

    async def _astaged(
        self, call: ToolCall, tool: BaseTool | None, check: CallCheck, ainvoke: AInvoke, state: Any
    ) -> Any:
        """The async :meth:`_split` (run at once), bounded by the tool's ``timeout_s``."""
        prepared = self.preparer.prepare(call, tool, check)
        if isinstance(prepared, ToolMessage):
            return prepared
        tool, call = prepared
        spec = self.catalog.get(tool.name)
        lingering = self.lingering
        if spec is not None and lingering and (refusal := await lingering.await_clear(spec)):
            return error_message(call, refusal)
        run = ainvoke(tool, call)
        outputs = self.outputs
        try:
            started = run()
            if spec is None or not spec.timeout_s:
                work = started if not isinstance(started, Future) else asyncio.wrap_future(started)
                response = await work
            else:  # answered at the deadline; what still runs keeps its group busy
                response = await self._timed(spec, started)
            output = outputs.normalise(call, tool, response, state)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - the error policy answers or re-raises it
            return outputs.noted(call, outputs.failure(call, tool, exc))
        return outputs.noted(call, output)

    async def _timed(self, spec: ToolSpec, started: Started) -> Any:
        """Await ``started`` within ``spec.timeout_s``; past it, raise ``TimeoutError`` and
        abandon the work (a thread's work keeps its group busy until it really ends)."""
        thread = started if isinstance(started, Future) else None
        work: asyncio.Future[Any] = (
            asyncio.wrap_future(thread) if thread is not None else asyncio.ensure_future(started)  # type: ignore[arg-type]
        )
        abandon = partial(self.lingering.add, spec, thread or work)
        return await within(work, spec.timeout_s or 0.0, abandon)

    def schema(self, tool: BaseTool) -> dict[str, Any] | None:
        """The tool's argument JSON schema, computed once per catalog tool (None if it has none)."""
        return self.preparer.schema(tool)

    def _tool_input(
        self,
        tool: BaseTool,
        call: ToolCall,
        state: Any,
        runtime: ToolRuntime | None,
        config: RunnableConfig,
    ) -> Any:
        inject = self.preparer.injector(tool)
        if inject is not None:
            call = inject(call, runtime or self._runtime(call, state, config))
        return {**call, "type": "tool_call"}


def _around(request: ToolCallRequest, invoke: Callable[[Any], Any]) -> Any:
    """An invoke stage (sync or async) that hands the coerced call to another tool node."""
    return lambda _, call: lambda: invoke(request.override(tool_call=call))
