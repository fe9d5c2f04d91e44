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

Every failure becomes an error ``ToolMessage`` that names the tool and the
problem (and the expected schema for bad arguments), except LangGraph's own
control flow (interrupts, and an invalid answer to an interrupt), which is raised.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolRuntime
from langgraph.prebuilt.tool_node import ToolCallRequest, msg_content_output
from langgraph.types import Command
from pydantic import PydanticUserError, ValidationError

from langgraph_toolbudget._compat import (
    has_injected_args,
    injector_for,
    is_invalid_resume,
    runtime_of,
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
    ) -> None:
        self.catalog = catalog
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
        return ToolRuntime(
            state=state,
            context=getattr(runtime, "context", None),
            config=config,
            stream_writer=getattr(runtime, "stream_writer", None) or (lambda _: None),
            tool_call_id=call["id"],
            store=getattr(runtime, "store", None),
            tools=self._tools,
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

        return chain(self.wrappers, execute)(self.request(call, state, config))

    async def arun(
        self, call: ToolCall, state: Any, config: RunnableConfig, check: CallCheck
    ) -> Any:
        """Run one call (async) through the hooks and the stages, with its timeout."""
        if self.awrappers:

            async def aexecute(req: ToolCallRequest) -> Any:
                return await self.aexecute(req, config, check)

            return await achain(self.awrappers, aexecute)(self.request(call, state, config))
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
        prepared = self._prepare(call, tool, check)
        if isinstance(prepared, ToolMessage):
            return prepared
        tool, call = prepared
        spec = self.catalog.get(tool.name)
        if spec is not None and (refusal := self.lingering.wait(spec)):
            return _error(call, refusal)
        try:
            response = tool.invoke(self._tool_input(tool, call, state, runtime, config), config)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - any tool failure becomes a message to the model
            return self._noted(call, self._failure(call, tool, exc))
        return self._noted(call, self._normalise(call, tool, response))

    async def _aexecute(
        self,
        call: ToolCall,
        tool: BaseTool | None,
        state: Any,
        runtime: ToolRuntime | None,
        config: RunnableConfig,
        check: CallCheck,
    ) -> Any:
        prepared = self._prepare(call, tool, check)
        if isinstance(prepared, ToolMessage):
            return prepared
        tool, call = prepared
        spec = self.catalog.get(tool.name)
        if spec is not None and (refusal := await self.lingering.await_clear(spec)):
            return _error(call, refusal)
        try:
            tool_input = self._tool_input(tool, call, state, runtime, config)
            if spec is None or not spec.timeout_s:
                if runs_in_thread(tool):  # as BaseTool.ainvoke would, but in our own pool
                    response = await self.to_thread(tool.invoke, tool_input, config)
                else:
                    response = await tool.ainvoke(tool_input, config)
            else:  # answered at the deadline; what still runs keeps its group busy
                response = await self._timed(spec, tool, tool_input, config)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - any tool failure becomes a message to the model
            return self._noted(call, self._failure(call, tool, exc))
        return self._noted(call, self._normalise(call, tool, response))

    async def _timed(
        self, spec: ToolSpec, tool: BaseTool, tool_input: Any, config: RunnableConfig
    ) -> Any:
        """Invoke within ``spec.timeout_s``; past it, raise ``TimeoutError``, abandon the work."""
        thread: Future[Any] | None = None
        if runs_in_thread(tool):
            ctx = contextvars.copy_context()
            thread = self.pool.submit(ctx.run, tool.invoke, tool_input, config)
            work: asyncio.Future[Any] = asyncio.wrap_future(thread)
        else:
            work = asyncio.ensure_future(tool.ainvoke(tool_input, config))
        abandon = partial(self.lingering.add, spec, thread or work)
        return await within(work, spec.timeout_s or 0.0, abandon)

    def _prepare(
        self, call: ToolCall, tool: BaseTool | None, check: CallCheck
    ) -> tuple[BaseTool, ToolCall] | ToolMessage:
        """Check and coerce: the tool and the call to invoke, or the error to answer with."""
        problem = check(call["name"])
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

    def schema(self, tool: BaseTool) -> dict[str, Any] | None:
        """The tool's argument JSON schema, computed once per tool (None if it has none)."""
        if tool.name not in self._schemas:
            try:
                self._schemas[tool.name] = tool_json_schema(tool)
            except (TypeError, ValueError, PydanticUserError):
                self._schemas[tool.name] = None
        return self._schemas[tool.name]

    def _tool_input(
        self,
        tool: BaseTool,
        call: ToolCall,
        state: Any,
        runtime: ToolRuntime | None,
        config: RunnableConfig,
    ) -> Any:
        if tool.name not in self._injectors:
            self._injectors[tool.name] = injector_for(tool) if has_injected_args(tool) else None
        inject = self._injectors[tool.name]
        if inject is not None:
            call = inject(call, runtime or self._runtime(call, state, config))
        return {**call, "type": "tool_call"}

    def _normalise(self, call: ToolCall, tool: BaseTool, response: Any) -> Any:
        if isinstance(response, Command):
            return response
        if isinstance(response, ToolMessage):
            response.content = _content(response.content)
            return response
        if (
            isinstance(response, list)
            and response
            and all(isinstance(r, ToolMessage | Command) for r in response)
        ):
            return response
        return ToolMessage(_content(response), name=tool.name, tool_call_id=call["id"])

    def _noted(self, call: ToolCall, output: Any) -> Any:
        """``output`` with the deprecation note, if the tool is deprecated."""
        note = deprecation_note(self.catalog, call["name"])
        return output if note is None else add_note(output, call["id"], note)

    def _failure(self, call: ToolCall, tool: BaseTool, error: Exception) -> ToolMessage:
        if is_invalid_resume(error):
            raise error  # a human's answer to an interrupt failed its schema: never swallow it
        args = call.get("args", {})
        if isinstance(error, ValidationError):
            content = schema_error_message(tool, error, args)
        elif isinstance(error, TimeoutError | asyncio.TimeoutError):
            spec = self.catalog.get(tool.name)
            content = TIMEOUT_ERROR.format(tool=tool.name, timeout=spec.timeout_s if spec else 0)
        else:
            content = TOOL_ERROR.format(tool=tool.name, error=f"{type(error).__name__}: {error}")
        logger.info("tool %s failed: %r", tool.name, error)
        return _error(call, content)


def _content(output: Any) -> str | list[str | dict[Any, Any]]:
    """Tool output as message content, as ``ToolNode`` converts it."""
    content: str | list[Any] = msg_content_output(output)
    return content
