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
import contextvars
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode, ToolRuntime
from langgraph.prebuilt.tool_node import ToolCallRequest, msg_content_output
from langgraph.types import Command
from pydantic import PydanticUserError, ValidationError

from langgraph_toolbudget._compat import (
    has_injected_args,
    injector_for,
    runtime_of,
    toolnode_output,
)
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import (
    RAW_ARGUMENTS_KEY,
    coerce_args,
    schema_error_message,
    tool_json_schema,
)
from langgraph_toolbudget.core.limits import MAX_ARG_DEPTH, TOO_DEEP_ERROR, clip, too_deep
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
from langgraph_toolbudget.execution.policy import add_note, deprecation_note

__all__ = [
    "AsyncToolCallWrapper",
    "CallCheck",
    "ToolCallPipeline",
    "ToolCallWrapper",
    "ToolOutput",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

ToolOutput = ToolMessage | Command | list[Any]
"""What one call produces: a tool message, a ``Command``, or a list of them."""
Invoke = Callable[[BaseTool, ToolCall], Callable[[], Any]]
"""The invoke stage: ``(tool, coerced call) -> run``; ``run()`` gives the tool's output."""
Started = Awaitable[Any] | Future[Any]
"""Work an async invoke stage started: an awaitable, or a thread's ``Future``."""
AInvoke = Callable[[BaseTool, ToolCall], Callable[[], Started]]
"""The async invoke stage: ``(tool, coerced call) -> run``; ``run()`` starts the work."""
CallCheck = Callable[[str], str | None]
"""Policy of the check stage: tool name -> why the call may not run (for the model), or None."""

TOOL_ERROR = "Error: tool {tool!r} failed: {error}\nFix the arguments or try another tool."
TIMEOUT_ERROR = (
    "Error: tool {tool!r} timed out after {timeout:g} s and was cancelled. "
    "Try a smaller request, or another tool."
)
RAW_ARGUMENTS_ERROR = (
    "Error: the arguments of your call to {tool!r} are not valid JSON, so it was not run: "
    "{raw}\nExpected arguments (JSON schema): {schema}\nCall it again with a JSON object."
)
NOT_A_TOOL_ERROR = "Error: {tool!r} is not a tool of this app, so it was not run."

# Fields of LangGraph's Runtime that newer ToolRuntimes carry too (langgraph-prebuilt >= 1.1).
_RUNTIME_EXTRAS = tuple(
    k for k in ("execution_info", "server_info") if k in ToolRuntime.__dataclass_fields__
)


def _error(call: ToolCall, content: str) -> ToolMessage:
    return ToolMessage(content, name=call["name"], tool_call_id=call["id"], status="error")


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
        self._rules = ToolNode([], messages_key=messages_key)  # ToolNode's output checks
        self.max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self.wrappers = as_hooks(wrap_tool_call, "wrap_tool_call")
        self.awrappers = as_hooks(awrap_tool_call, "awrap_tool_call")
        # Per tool, on first call: reading schemas up front would cost ~0.4 ms a tool.
        self._schemas: dict[str, dict[str, Any] | None] = {}
        self._injectors: dict[str, Callable[[Any, Any], Any] | None] = {}
        self._tools = [s.tool for s in catalog.specs]  # ToolRuntime.tools, as ToolNode gives
        self.lingering = LingeringCalls()

    # --- threads ----------------------------------------------------------------------------

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The pipeline's own thread pool, created on first use."""
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        max_workers=self.max_workers, thread_name_prefix="toolbudget-tool"
                    )
        return self._pool

    async def to_thread(self, func: Callable[..., T], /, *args: Any) -> T:
        """Run ``func(*args)`` in the pipeline's pool, with the caller's context variables."""
        ctx = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self.pool, ctx.run, func, *args)

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
            return self._execute(call, self._tool(call), state, None, config, check)

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
            return await self.to_thread(self.run, call, state, config, check)
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
        def invoke(tool: BaseTool, call: ToolCall) -> Callable[[], Any]:
            tool_input = self._tool_input(tool, call, state, runtime, config)
            return lambda: tool.invoke(tool_input, config)

        return self._staged(call, tool, check, invoke, state)

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
                ctx = contextvars.copy_context()
                return lambda: self.pool.submit(ctx.run, tool.invoke, tool_input, config)
            return lambda: tool.ainvoke(tool_input, config)

        return await self._astaged(call, tool, check, ainvoke, state)

    def delegate(
        self, request: ToolCallRequest, check: CallCheck, invoke: Callable[[Any], Any]
    ) -> Any:
        """The stages around another tool node's invoke stage, ``invoke(request)`` (sync)."""
        call, tool, state = request.tool_call, request.tool, request.state
        return self._staged(call, tool, check, _around(request, invoke), state)

    async def adelegate(
        self, request: ToolCallRequest, check: CallCheck, ainvoke: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        """The async :meth:`delegate`, bounded by the tool's ``timeout_s``."""
        call, tool, state = request.tool_call, request.tool, request.state
        return await self._astaged(call, tool, check, _around(request, ainvoke), state)

    def _staged(
        self, call: ToolCall, tool: BaseTool | None, check: CallCheck, invoke: Invoke, state: Any
    ) -> Any:
        """Check and coerce, invoke, normalise and note; failures as messages.

        ``invoke(tool, call)`` prepares the tool's input (raising, as ``ToolNode``
        does, what argument injection raises) and returns the call to run.
        """
        prepared = self._prepare(call, tool, check)
        if isinstance(prepared, ToolMessage):
            return prepared
        tool, call = prepared
        spec = self.catalog.get(tool.name)
        if spec is not None and (refusal := self.lingering.wait(spec)):
            return _error(call, refusal)
        run = invoke(tool, call)
        try:
            output = self._normalise(call, tool, run(), state)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - the error policy answers or re-raises it
            return self._noted(call, self._failure(call, tool, exc))
        return self._noted(call, output)

    async def _astaged(
        self, call: ToolCall, tool: BaseTool | None, check: CallCheck, ainvoke: AInvoke, state: Any
    ) -> Any:
        """The async :meth:`_staged`, bounded by the tool's ``timeout_s``."""
        prepared = self._prepare(call, tool, check)
        if isinstance(prepared, ToolMessage):
            return prepared
        tool, call = prepared
        spec = self.catalog.get(tool.name)
        if spec is not None and (refusal := await self.lingering.await_clear(spec)):
            return _error(call, refusal)
        run = ainvoke(tool, call)
        try:
            started = run()
            if spec is None or not spec.timeout_s:
                work = started if not isinstance(started, Future) else asyncio.wrap_future(started)
                response = await work
            else:  # answered at the deadline; what still runs keeps its group busy
                response = await self._timed(spec, started)
            output = self._normalise(call, tool, response, state)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - the error policy answers or re-raises it
            return self._noted(call, self._failure(call, tool, exc))
        return self._noted(call, output)

    async def _timed(self, spec: ToolSpec, started: Started) -> Any:
        """Await ``started`` within ``spec.timeout_s``; past it, raise ``TimeoutError`` and
        abandon the work (a thread's work keeps its group busy until it really ends)."""
        thread = started if isinstance(started, Future) else None
        work: asyncio.Future[Any] = (
            asyncio.wrap_future(thread) if thread is not None else asyncio.ensure_future(started)  # type: ignore[arg-type]
        )
        abandon = partial(self.lingering.add, spec, thread or work)
        return await within(work, spec.timeout_s or 0.0, abandon)

    def _prepare(
        self, call: ToolCall, tool: BaseTool | None, check: CallCheck
    ) -> tuple[BaseTool, ToolCall] | ToolMessage:
        """Check and coerce: the tool and the call to invoke, or the error to answer with.

        A tool a hook put in the request (``request.override(tool=...)``) is the
        application's choice: it runs unchecked, as under ``ToolNode``.
        """
        problem = None if tool is not None and not self._known(tool) else check(call["name"])
        if problem is not None:
            return _error(call, problem)
        if tool is None:
            return _error(call, NOT_A_TOOL_ERROR.format(tool=call["name"]))
        args = call.get("args", {})
        if too_deep(args):  # json.dumps, repr and validation would raise RecursionError
            return _error(call, TOO_DEEP_ERROR.format(tool=tool.name, depth=MAX_ARG_DEPTH))
        schema = self.schema(tool)
        if isinstance(args, dict) and RAW_ARGUMENTS_KEY in args:
            raw = RAW_ARGUMENTS_ERROR.format(
                tool=tool.name, raw=clip(str(args[RAW_ARGUMENTS_KEY])), schema=json.dumps(schema)
            )
            return _error(call, raw)
        if schema is not None:
            args = coerce_args(args, schema)
        return tool, {**call, "args": args}

    def _known(self, tool: BaseTool) -> bool:
        """Is ``tool`` the catalog's tool of its name (not one a hook supplied)?"""
        spec = self.catalog.get(tool.name)
        return spec is not None and spec.tool is tool

    def schema(self, tool: BaseTool) -> dict[str, Any] | None:
        """The tool's argument JSON schema, computed once per catalog tool (None if it has none)."""
        if tool.name in self._schemas and self._known(tool):
            return self._schemas[tool.name]
        try:
            schema = tool_json_schema(tool)
        except (TypeError, ValueError, PydanticUserError):
            schema = None
        if self._known(tool):  # cache only the catalog's tools: the cache stays bounded
            self._schemas[tool.name] = schema
        return schema

    def _tool_input(
        self,
        tool: BaseTool,
        call: ToolCall,
        state: Any,
        runtime: ToolRuntime | None,
        config: RunnableConfig,
    ) -> Any:
        if tool.name in self._injectors and self._known(tool):
            inject = self._injectors[tool.name]
        else:
            inject = injector_for(tool, self.messages_key) if has_injected_args(tool) else None
            if self._known(tool):
                self._injectors[tool.name] = inject
        if inject is not None:
            call = inject(call, runtime or self._runtime(call, state, config))
        return {**call, "type": "tool_call"}

    def _normalise(self, call: ToolCall, tool: BaseTool, response: Any, state: Any) -> Any:
        """A tool's result as ``ToolNode`` checks it (``Command``s, lists); other values wrapped.

        Raises (into the error policy) what ``ToolNode`` raises: a ``Command`` without
        the call's tool message, a list without exactly one, a list of other types.
        """
        if isinstance(response, ToolMessage):  # the usual result: what ToolNode does, inline
            response.content = _content(response.content)
            return response
        if isinstance(response, Command | list):
            input_type = "list" if isinstance(state, list) else "dict"
            return toolnode_output(self._rules, response, call, input_type)
        return ToolMessage(_content(response), name=tool.name, tool_call_id=call["id"])

    def _noted(self, call: ToolCall, output: Any) -> Any:
        """``output`` with the deprecation note, if the tool is deprecated."""
        note = deprecation_note(self.catalog, call["name"])
        return output if note is None else add_note(output, call["id"], note)

    def _failure(self, call: ToolCall, tool: BaseTool, error: Exception) -> ToolMessage:
        return self.errors.tool_failed(call, tool, error, lambda: self._explain(call, tool, error))

    def _explain(self, call: ToolCall, tool: BaseTool, error: Exception) -> str:
        """The explained error message of a failed call (the default policy, and timeouts)."""
        args = call.get("args", {})
        if isinstance(error, ValidationError):
            content = schema_error_message(tool, error, args)
        elif isinstance(error, TimeoutError | asyncio.TimeoutError):
            spec = self.catalog.get(tool.name)
            content = TIMEOUT_ERROR.format(tool=tool.name, timeout=spec.timeout_s if spec else 0)
        else:
            content = TOOL_ERROR.format(tool=tool.name, error=f"{type(error).__name__}: {error}")
        logger.info("tool %s failed: %r", tool.name, error)
        return content


def _around(request: ToolCallRequest, invoke: Callable[[Any], Any]) -> Any:
    """An invoke stage (sync or async) that hands the coerced call to another tool node."""
    return lambda _, call: lambda: invoke(request.override(tool_call=call))


def _content(output: Any) -> str | list[str | dict[Any, Any]]:
    """Tool output as message content, as ``ToolNode`` converts it."""
    content: str | list[Any] = msg_content_output(output)
    return content
