"""A compiled LangGraph graph as a LangChain tool (an agent calling another agent).

Its one reason to change: how a graph is called as a tool.

Key Components:
    - :func:`graph_tool`: wraps a compiled graph or a ``RemoteGraph`` as a tool for a
      ``ToolCatalog``. Each call is a child run on its own thread; the answer is a compact
      JSON result, and a child that fails, hangs or stops at an interrupt never raises
      into the parent: the model reads ``status`` and ``error`` and can act on it.
    - :func:`child_thread_id`: the thread a call's child run gets.

Typical Usage:
    ```python
    research = graph_tool(research_graph, name="research", description="...", timeout_s=60)
    catalog = ToolCatalog.from_tools([research, *other_tools])
    ```
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import uuid
from functools import partial
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.messages import BaseMessage, HumanMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool, ToolException
from langgraph.errors import GraphInterrupt
from langgraph.pregel import Pregel
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from langgraph_toolbudget._compat import runtime_of, without_stream_handlers
from langgraph_toolbudget._runner import run_sync
from langgraph_toolbudget.core.compact import (
    error_result,
    interrupted_result,
    json_schema_problem,
    run_result,
)

__all__ = ["GraphTool", "GraphToolInput", "child_thread_id", "graph_tool"]

TIMEOUT_GRACE_S = 1.0
"""The catalog's ``timeout_s`` (the executor's backstop) is the tool's plus this, so the
tool's own bound fires first and the model gets the compact ``timeout`` result."""
_CANCEL_WAIT_S = 5.0  # how long a timed-out child may take to wind down after cancellation
_PARENT_ONLY_KEYS = {"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"}
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "langgraph-toolbudget/graph_tool")

GRAPH_ERROR = (
    "graph_tool(graph=...) needs a compiled graph with invoke and ainvoke (a compiled "
    "StateGraph or a RemoteGraph), got {kind}. Call .compile() on a StateGraph first."
)
TEXT_ARG_ERROR = "graph_tool({arg}=...) must be a non-empty string ({role}), got {value!r}."
TIMEOUT_S_ERROR = (
    "graph_tool(timeout_s=...) must be a positive, finite number of seconds or None, got {value!r}."
)
INPUT_SCHEMA_ERROR = (
    "graph_tool(input_schema=...) must be a pydantic model class or a JSON schema dict, "
    "got {value!r}."
)
NO_INPUT_ERROR = (
    "graph tool {tool!r} got nothing to send: give `input` (the request, in plain words), "
    "`messages` or `context`."
)
MESSAGES_ERROR = (
    "graph tool {tool!r}: `messages` must be a list of strings or {{'role', 'content'}} "
    "dicts: {error}"
)
ARGUMENTS_ERROR = (
    "invalid arguments for graph tool {tool!r}: {error}\nExpected arguments (JSON schema): {schema}"
)
TIMED_OUT = "the graph did not finish within {timeout:g} s and was cancelled"


class GraphToolInput(BaseModel):
    """The default arguments. The model sees ``input`` and ``context``; callers may also send
    ``text`` or ``query`` for ``input``, and ``messages`` (strings or role/content dicts)."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(description="The request for the graph, in plain words.")
    context: dict[str, Any] = Field(
        default_factory=dict, description="Optional extra state for the graph (key -> value)."
    )
    messages: SkipJsonSchema[list[Any] | None] = None
    # Aliases of ``input``, declared (and hidden from the model) rather than renamed in a
    # validator: some langchain-core versions pass a tool only the keys the caller sent.
    text: SkipJsonSchema[str | None] = None
    query: SkipJsonSchema[str | None] = None

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict) and "input" not in data:
            data = dict(data)
            alias = next((a for a in ("text", "query") if a in data), None)
            if alias is not None:
                data["input"] = data[alias]
            elif data.get("messages") or data.get("context"):
                data["input"] = ""  # the messages or the context carry the request
        return data


def child_thread_id(
    parent_thread_id: str | None, name: str, call_id: str, *, checkpoint_ns: str = ""
) -> str:
    """A UUID (``RemoteGraph`` servers want UUIDs) from the parent's thread, the checkpoint
    namespace of the parent task the call runs in, the tool and the call; a fresh one when
    the parent has no thread.

    The namespace (``configurable["checkpoint_ns"]`` of the node running the tool, e.g.
    ``"tools:<task id>"``) names the task as LangGraph's own subgraphs are named: a resumed
    task keeps it, a fork (``update_state``, a replay from a past checkpoint) and a later
    turn get a new one, so the child follows the parent's branch as a subgraph does. Empty
    (the tool called outside a graph), the id is the one of thread, tool and call alone.

    Args:
        parent_thread_id: the parent run's ``thread_id``, or None.
        name: the graph tool's name.
        call_id: the tool call's id.
        checkpoint_ns: the parent task's ``checkpoint_ns``.

    Returns:
        The child's thread id.

    >>> child_thread_id("t1", "research", "call_1") == child_thread_id("t1", "research", "call_1")
    True
    >>> a = child_thread_id("t1", "research", "call_1", checkpoint_ns="tools:1")
    >>> a == child_thread_id("t1", "research", "call_1", checkpoint_ns="tools:2")
    False
    """
    if parent_thread_id is None:
        return str(uuid.uuid4())
    if not checkpoint_ns:
        return str(uuid.uuid5(_NAMESPACE, f"{parent_thread_id}:{name}:{call_id}"))
    key = json.dumps([parent_thread_id, checkpoint_ns, name, call_id])
    return str(uuid.uuid5(_NAMESPACE, key))


class GraphTool(BaseTool):
    """A compiled graph run as a child run per call; build one with :func:`graph_tool`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    graph: Any = Field(exclude=True, repr=False)
    timeout_s: float | None = None
    json_schema: dict[str, Any] | None = None  # a JSON-schema input_schema, validated here
    custom_schema: bool = False
    handle_tool_error: bool = True  # a non-success result becomes an error tool message

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # Pack the arguments, so no schema field can collide with `config` or `run_manager`,
        # and keep the tool call id, which names the child's thread.
        args, kwargs = super()._to_args_and_kwargs(tool_input, tool_call_id)
        if args:  # a plain string: the first field of the schema
            kwargs = {next(iter(self.args)): args[0]}
        return (), {"arguments": kwargs, "call_id": tool_call_id}

    def _run(
        self,
        arguments: dict[str, Any],
        call_id: str | None,
        config: RunnableConfig,
        run_manager: CallbackManagerForToolRun | None = None,
    ) -> str:
        state, child, info = self._prepare(arguments, call_id, config, run_manager)
        options = self._options(config)
        if self.timeout_s is not None:
            return run_sync(self._arun_child(state, child, info, options))
        try:
            final = _detached().run(partial(self.graph.invoke, state, child, **options))
        except Exception as exc:  # noqa: BLE001 - the model hears about it in the result
            return _answer(_failed(info, exc))
        return _answer(run_result(info, final))

    async def _arun(
        self,
        arguments: dict[str, Any],
        call_id: str | None,
        config: RunnableConfig,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
    ) -> str:
        state, child, info = self._prepare(arguments, call_id, config, run_manager)
        return await self._arun_child(state, child, info, self._options(config))

    async def _arun_child(
        self, state: Any, child: RunnableConfig, info: dict[str, Any], options: dict[str, Any]
    ) -> str:
        coroutine = self.graph.ainvoke(state, child, **options)
        task = _detached().run(asyncio.ensure_future, coroutine)
        try:
            done, _ = await asyncio.wait({task}, timeout=self.timeout_s)
        except BaseException:  # we were cancelled: take the child down with us
            task.cancel()
            raise
        if task not in done:
            task.cancel()
            await asyncio.wait({task}, timeout=_CANCEL_WAIT_S)
            timed_out = TimeoutError(TIMED_OUT.format(timeout=self.timeout_s))
            return _answer(error_result(info, timed_out, status="timeout"))
        try:
            final = task.result()
        except Exception as exc:  # noqa: BLE001 - the model hears about it in the result
            return _answer(_failed(info, exc))
        return _answer(run_result(info, final))

    # --- the child's input and config ---------------------------------------------------------

    def _options(self, config: RunnableConfig) -> dict[str, Any]:
        """The child run's keyword arguments: the calling run's runtime context, which a
        LangGraph subgraph gets too (a ``RemoteGraph`` child gets none: it would go over
        HTTP, and as a node of your graph it gets none either)."""
        runtime = runtime_of(config)
        context = getattr(runtime, "context", None)
        if context is None or not isinstance(self.graph, Pregel):
            return {}
        return {"context": context}

    def _prepare(
        self, arguments: dict[str, Any], call_id: str | None, config: RunnableConfig, manager: Any
    ) -> tuple[Any, RunnableConfig, dict[str, Any]]:
        callbacks = manager.get_child() if manager else config.get("callbacks")
        # The child runs on a thread of its own, not as a subgraph: LangGraph's `messages` and
        # `tools` streams would show its tokens and tool calls as the parent's root graph's
        # (its `custom` stream writer is the parent's own, left out with the internal keys).
        callbacks = without_stream_handlers(callbacks)
        return self._child_input(arguments), *self._child_config(config, call_id, callbacks)

    def _child_input(self, arguments: dict[str, Any]) -> Any:
        if self.json_schema is not None:
            problem = json_schema_problem(self.json_schema, arguments)
            if problem is not None:
                schema = json.dumps(self.json_schema)
                raise ValueError(
                    ARGUMENTS_ERROR.format(tool=self.name, error=problem, schema=schema)
                )
            return dict(arguments)
        if self.custom_schema:
            return dict(arguments)
        state: dict[str, Any] = dict(arguments.get("context") or {})
        messages: list[BaseMessage] = []
        if arguments.get("messages"):
            try:
                messages = convert_to_messages(arguments["messages"])
            except (ValueError, TypeError, NotImplementedError) as exc:
                raise ValueError(MESSAGES_ERROR.format(tool=self.name, error=exc)) from exc
        text = arguments.get("input") or arguments.get("text") or arguments.get("query")
        if text:
            messages.append(HumanMessage(text))
        if messages:
            state["messages"] = messages
        if not state:
            raise ValueError(NO_INPUT_ERROR.format(tool=self.name))
        return state

    def _child_config(
        self, config: RunnableConfig, call_id: str | None, callbacks: Any
    ) -> tuple[RunnableConfig, dict[str, Any]]:
        """The child's own thread and run id; the parent's callbacks, tags, limits and
        configurable keys, but not its thread, checkpoint or LangGraph-internal keys."""
        parent = config.get("configurable") or {}
        parent_thread = parent.get("thread_id")
        run_id = uuid.uuid4()
        # the parent task's namespace: a fork of the parent gets a fresh child, a resume the same
        namespace = parent.get("checkpoint_ns") or ""
        thread_id = child_thread_id(
            parent_thread, self.name, call_id or str(run_id), checkpoint_ns=str(namespace)
        )
        configurable = {
            k: v for k, v in parent.items() if not k.startswith("__") and k not in _PARENT_ONLY_KEYS
        }
        metadata = {
            k: v
            for k, v in (config.get("metadata") or {}).items()
            if not k.startswith(("langgraph_", "checkpoint")) and k not in _PARENT_ONLY_KEYS
        }
        metadata["graph_tool"] = self.name  # never empty: an empty one would inherit the parent's
        if parent_thread is not None:
            metadata["parent_thread_id"] = parent_thread
        child = RunnableConfig(
            configurable={**configurable, "thread_id": thread_id},
            metadata=metadata,
            run_id=run_id,
            callbacks=callbacks,
        )
        for key in ("tags", "recursion_limit", "max_concurrency"):
            if key in config:
                child[key] = config[key]
        info = {"mode": "graph", "graph": self.name, "run_id": str(run_id), "thread_id": thread_id}
        return child, info


def _detached() -> contextvars.Context:
    """A copy of the current context without the calling run's config, to run the child in.

    LangGraph merges the config of the run a graph is called from (its callbacks, metadata)
    into the graph's own, as for a subgraph; a child on a thread of its own takes only what
    :meth:`GraphTool._child_config` gives it: else LangGraph's ``messages`` and ``tools``
    streams show the child's tokens and tool calls as the parent's root graph's."""
    context = contextvars.copy_context()
    context.run(var_child_runnable_config.set, None)
    return context


def _failed(info: dict[str, Any], exc: Exception) -> dict[str, Any]:
    if isinstance(exc, GraphInterrupt):  # raised, not returned, where a graph runs nested
        return interrupted_result(info, exc.args[0] if exc.args else [])
    return error_result(info, exc)


def _answer(result: dict[str, Any]) -> str:
    text = json.dumps(result, ensure_ascii=False)
    if result["status"] != "success":
        raise ToolException(text)  # handled by BaseTool: an error tool message with this text
    return text


def graph_tool(
    graph: Any,
    *,
    name: str,
    description: str,
    input_schema: type[BaseModel] | dict[str, Any] | None = None,
    timeout_s: float | None = None,
) -> BaseTool:
    """Wrap a compiled graph as a tool the model can call.

    Each call runs ``graph`` as a child run on its own thread (:func:`child_thread_id`), so
    a child compiled with a checkpointer keeps its own history. The thread follows the
    parent's branch as a LangGraph subgraph does: a resumed parent task runs its calls on
    the same threads, a fork or a replay of the parent on new ones. The parent's callbacks,
    tags, recursion limit and configurable keys flow through; its thread, checkpoint and
    LangGraph-internal keys do not.

    Input: by default ``input`` (text, sent as a human message; ``text`` and ``query`` are
    aliases), ``messages`` (strings or role/content dicts, before ``input``) and ``context``
    (merged into the child's input state). With ``input_schema``, the validated arguments
    are the child's input state.

    Output (JSON text): ``mode`` ("graph"), ``graph`` (the tool name), ``run_id``,
    ``thread_id``, ``status`` (``success``, ``error``, ``timeout`` or ``interrupted``), then
    ``output`` (the last AI message's text when the child's state has messages, else the
    final state), ``context`` (the state's other keys), ``interrupts`` (their values) and
    ``error`` (``type``, ``message``), each present only when it applies, JSON-safe and
    bounded (:mod:`~langgraph_toolbudget.core.compact`). Any status but ``success`` makes
    an error tool message.

    Args:
        graph: a compiled graph (``StateGraph(...).compile()``) or a ``RemoteGraph``.
        name: the tool's name.
        description: what the graph does, for the model.
        input_schema: a pydantic model class or a JSON schema dict for the arguments.
        timeout_s: seconds a call may take; a slower child is cancelled and the call
            answers ``status: "timeout"``. With it, sync calls run the child's ``ainvoke``.

    Returns:
        The tool, with catalog metadata ``is_pure=False`` and, given ``timeout_s``, that
        bound plus :data:`TIMEOUT_GRACE_S` as the executor's own ``timeout_s``.

    Raises:
        TypeError: a graph without ``invoke``/``ainvoke``, or an argument of the wrong type.
        ValueError: an empty name or description, a ``timeout_s`` that is not positive and
            finite, an invalid JSON schema.

    Example:
        ```python
        echo = graph_tool(child_graph, name="echo", description="Repeat the request.")
        json.loads(echo.invoke({"input": "hello"}))["output"]
        ```
    """
    if not (callable(getattr(graph, "invoke", None)) and callable(getattr(graph, "ainvoke", None))):
        raise TypeError(GRAPH_ERROR.format(kind=type(graph).__name__))
    for arg, value, role in (
        ("name", name, "the tool's name"),
        ("description", description, "the model reads it to choose the tool"),
    ):
        if not isinstance(value, str) or not value.strip():
            error = TEXT_ARG_ERROR.format(arg=arg, role=role, value=value)
            raise TypeError(error) if not isinstance(value, str) else ValueError(error)
    if timeout_s is not None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float):
            raise TypeError(TIMEOUT_S_ERROR.format(value=timeout_s))
        if not math.isfinite(timeout_s) or timeout_s <= 0:
            raise ValueError(TIMEOUT_S_ERROR.format(value=timeout_s))
    custom = isinstance(input_schema, dict) or (
        isinstance(input_schema, type) and issubclass(input_schema, BaseModel)
    )
    if input_schema is not None and not custom:
        raise TypeError(INPUT_SCHEMA_ERROR.format(value=input_schema))
    if isinstance(input_schema, dict) and (problem := json_schema_problem(input_schema)):
        raise ValueError(f"{INPUT_SCHEMA_ERROR.format(value=input_schema)} Problem: {problem}")
    metadata: dict[str, Any] = {"is_pure": False}
    if timeout_s is not None:
        metadata["timeout_s"] = float(timeout_s) + TIMEOUT_GRACE_S
    return GraphTool(
        name=name,
        description=description,
        args_schema=GraphToolInput if input_schema is None else input_schema,
        graph=graph,
        timeout_s=None if timeout_s is None else float(timeout_s),
        json_schema=input_schema if isinstance(input_schema, dict) else None,
        custom_schema=custom,
        metadata=metadata,
    )
