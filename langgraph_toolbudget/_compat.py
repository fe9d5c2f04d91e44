"""Every private upstream name this package uses, in one place.

Its one reason to change: an upgrade that moves a private LangGraph or LangChain name it uses.

Each import says what it replaces and the versions it was checked against, so an
upgrade that breaks one shows up here first. Nothing else in the package imports
a private name of LangGraph, LangChain, the MCP adapters or the MCP SDK.

The MCP adapters' and MCP SDK's private names are in the sibling
:mod:`langgraph_toolbudget._compat_mcp`: this module is imported by the core, and
importing the core must not load the MCP SDK, so the MCP part is imported only by
:mod:`langgraph_toolbudget.mcp`. The two modules are that one place:

- here: LangGraph's ``RunnableCallable``, ``InMemoryStore``'s ``_data`` and ``_vectors``,
  ``Pregel._infer_as_node`` (the node an update is written as), the task scratchpad's ``step``
  and ``stop`` (the steps a run has left), ``StreamMessagesHandler`` and
  ``StreamToolCallHandler`` (the ``messages`` and ``tools`` streams, kept out of a
  ``graph_tool`` child's callbacks);
- ``_compat_mcp``: ``_MCPCallbacks``, ``_build_interceptor_chain``,
  ``_convert_call_tool_result``, ``_handle_mcp_tool_error``, ``_list_all_tools``
  (langchain-mcp-adapters), ``next_request_id`` and ``transport_closed`` (read the
  MCP SDK's ``BaseSession._request_id`` and ``BaseSession._read_stream``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# LangGraph's node runnable: runs a sync and an async function under invoke/ainvoke and
# passes `config` (and `runtime`) by signature, as LangGraph's own nodes and ToolNode do.
# The public alternative, RunnableLambda, adds a tracing span per node and no `runtime`.
# Checked: langgraph 1.0.x - 1.2.22.
from langgraph._internal._runnable import RunnableCallable

__all__ = [
    "DEFAULT_HANDLE_TOOL_ERRORS",
    "RunnableCallable",
    "drop_empty_namespace",
    "handled_error_types",
    "has_injected_args",
    "inferred_update_node",
    "injector_for",
    "invocation_error",
    "is_invalid_resume",
    "memory_store_keys",
    "runtime_of",
    "steps_left",
    "toolnode_error_content",
    "toolnode_input",
    "toolnode_output",
    "without_stream_handlers",
]


# --- LangGraph prebuilt: argument injection for tools (InjectedState, InjectedStore,
# ToolRuntime, InjectedToolCallId), so every call, injected or not, runs through our own
# pipeline and behaves as under ToolNode. `_get_all_injected_args` finds a tool's injected
# parameters; `ToolNode._inject_tool_args` fills them (strips model-forged values, raises
# on a missing store or state key). The runtime travels in the config under
# CONFIG_KEY_RUNTIME. Checked: langgraph 1.0.x - 1.2.22, langgraph-prebuilt 1.0.x - 1.1.2.
from langgraph._internal._constants import CONF, CONFIG_KEY_RUNTIME  # noqa: E402
from langgraph.prebuilt.tool_node import ToolNode, _get_all_injected_args  # noqa: E402


def has_injected_args(tool: Any) -> bool:
    """Does LangGraph inject any of this tool's arguments?"""
    return bool(_get_all_injected_args(tool).all_injected_keys)


def injector_for(tool: Any, messages_key: str = "messages") -> Callable[[Any, Any], Any]:
    """A function ``(tool_call, tool_runtime) -> tool_call`` with the injected arguments filled.

    It raises as ``ToolNode`` does: ``ValueError`` for a missing store, ``KeyError`` /
    ``AttributeError`` for a missing state key.
    """
    node = ToolNode([tool], messages_key=messages_key)

    def inject(call: Any, runtime: Any) -> Any:
        return node._inject_tool_args(call, runtime, tool)

    return inject


def runtime_of(config: Any) -> Any:
    """LangGraph's ``Runtime`` of the running graph (context, store, stream writer), or None."""
    return (config or {}).get(CONF, {}).get(CONFIG_KEY_RUNTIME)


# --- LangGraph's task scratchpad (CONFIG_KEY_SCRATCHPAD): `step` and `stop` of the running
# graph, from which LangGraph's `RemainingSteps` managed value counts the steps left. No public
# name gives a node the steps left without a state field. Checked: langgraph 1.2.0 - 1.2.24.
from langgraph._internal._constants import CONFIG_KEY_SCRATCHPAD  # noqa: E402


def steps_left(config: Any) -> int | None:
    """The graph steps the running graph may still take after this one, as LangGraph's
    ``RemainingSteps`` counts them (``stop - step``: a step past ``stop`` raises
    ``GraphRecursionError``); None outside a graph run.

    ``config["metadata"]["langgraph_step"]`` alone does not tell it: it counts the thread's
    steps since its first run, while ``recursion_limit`` counts this run's.
    """
    scratchpad = (config or {}).get(CONF, {}).get(CONFIG_KEY_SCRATCHPAD)
    step, stop = getattr(scratchpad, "step", None), getattr(scratchpad, "stop", None)
    if not isinstance(step, int) or not isinstance(stop, int):
        return None
    return stop - step


# --- LangGraph's InMemoryStore keeps its items in `_data` (namespace -> key -> Item) and
# `_vectors`, defaultdicts: every read or delete in a namespace leaves an entry behind, even an
# empty one. The bounded fallback store of offloading (execution/offload.py) reads the keys of a
# namespace and drops the empty entries, so a finished thread leaves nothing. Their names are
# marked "do not change" in langgraph-checkpoint. Checked: langgraph-checkpoint 2.x - 4.3.
def memory_store_keys(store: Any, namespace: tuple[str, ...]) -> list[str]:
    """The keys stored in ``namespace`` of an ``InMemoryStore`` (no entry is created)."""
    return list(store._data.get(namespace, ()))


def drop_empty_namespace(store: Any, namespace: tuple[str, ...]) -> None:
    """Forget ``namespace`` in an ``InMemoryStore`` if it holds no item."""
    if not store._data.get(namespace):
        store._data.pop(namespace, None)
        store._vectors.pop(namespace, None)


try:  # langgraph >= 1.1 marks a resume value that fails an interrupt's schema
    from langgraph.errors import is_invalid_resume
except ImportError:  # pragma: no cover - older langgraph never marks it

    def is_invalid_resume(error: BaseException) -> bool:
        return False


# --- LangGraph prebuilt: ToolNode's own rules, reused so that ToolExecutor answers exactly as
# ToolNode does: `handle_tool_errors` (which errors are handled, with what content; the default
# handles only invalid arguments), the invalid-arguments error with injected arguments filtered
# out, the input shapes (`_parse_input`, `_extract_state`: a state, a list of messages, a list
# of tool calls read with the graph's state, a Send payload) and the validation of what a tool
# returns (`_normalize_tool_response`: Commands and lists of them).
# Checked: langgraph-prebuilt 1.0.13 - 1.1.2.
from langgraph.prebuilt.tool_node import (  # noqa: E402
    ToolInvocationError,
    _default_handle_tool_errors,
    _filter_validation_errors,
    _handle_tool_error,
    _infer_handled_types,
)

DEFAULT_HANDLE_TOOL_ERRORS: Callable[..., str] = _default_handle_tool_errors
"""``ToolNode``'s default ``handle_tool_errors``: invalid arguments answered, the rest raised."""


def handled_error_types(flag: Any) -> tuple[type[Exception], ...]:
    """The exception types a ``handle_tool_errors`` value handles, as ``ToolNode`` reads it."""
    if isinstance(flag, type) and issubclass(flag, Exception):
        return (flag,)
    if isinstance(flag, tuple):
        return flag
    if callable(flag) and not isinstance(flag, type):
        return _infer_handled_types(flag)
    return (Exception,) if flag else ()


def toolnode_error_content(error: Exception, flag: Any) -> str:
    """The error message content ``ToolNode`` writes for ``error`` under ``flag`` (may raise)."""
    content: str = _handle_tool_error(error, flag=flag)
    return content


def invocation_error(tool: Any, error: Exception, args: Any) -> ToolInvocationError:
    """``ToolNode``'s error for invalid arguments: the model's arguments, injected ones left out."""
    filtered = _filter_validation_errors(error, _get_all_injected_args(tool))  # type: ignore[arg-type]
    return ToolInvocationError(tool.name, error, args, filtered)  # type: ignore[arg-type]


def toolnode_input(node: Any, value: Any, config: Any) -> tuple[list[Any], str, Any]:
    """``(tool_calls, input_type, state)`` of a ``ToolNode`` input, as ``ToolNode`` reads it.

    ``input_type`` is ``"dict"`` (a state), ``"list"`` (a list of messages) or
    ``"tool_calls"`` (a list of tool calls, or a ``Send`` payload with its state).
    """
    calls, input_type = node._parse_input(value)
    return calls, input_type, node._extract_state(value, config)


def toolnode_output(node: Any, response: Any, call: Any, input_type: str) -> Any:
    """A tool's ``Command`` / ``ToolMessage`` / list of them, validated as ``ToolNode`` does."""
    return node._normalize_tool_response(response, call, input_type)


# --- LangGraph's choice of the node a state update is written as when `update_state` gets no
# `as_node` (`Pregel._infer_as_node`, read from the checkpoint's `versions_seen`): the graph's
# input node (START) on a thread where no node has run yet, else the node that ran last, None
# when several ran last. Written as START, an update goes through the graph's input schema,
# which leaves the tool-context fields out; `threads.update_context` names another node then.
# Recent LangGraph has it as a method (reading `versions_seen` without its snapshot bumps);
# older versions (1.2.0, the lowest supported, and 1.1.5) have the same rule inline in
# `update_state`, without bumps: that rule is repeated here for them. Checked: 1.1.5 (source),
# 1.2.0 (tests/test_update_context.py) and 1.2.24.
def inferred_update_node(graph: Any, versions_seen: Any) -> str | None:
    """The node ``graph.update_state(config, values)`` writes as (None: it is ambiguous)."""
    infer = getattr(graph, "_infer_as_node", None)
    if infer is not None:
        node: str | None = infer(versions_seen)
        return node
    if len(graph.nodes) == 1:
        return str(next(iter(graph.nodes)))
    if not any(v for seen in versions_seen.values() for v in seen.values()):
        channels = graph.input_channels
        return channels if isinstance(channels, str) and channels in graph.nodes else None
    last = sorted(
        (v, n) for n, seen in versions_seen.items() if n in graph.nodes for v in seen.values()
    )
    if len(last) == 1 or (last and last[-1][0] != last[-2][0]):
        return str(last[-1][1])
    return None


# --- LangGraph's handlers of stream_mode="messages" and "tools": callback handlers that stream
# every chat model (every tool) of a run under them, placing it by the run's
# `langgraph_checkpoint_ns`. A graph called from a tool (`graph_tool`) runs on a thread of its
# own with the parent's callbacks, so they would stream the child's tokens, messages and tool
# calls as the parent's root graph's. No public way to leave one handler out. Checked:
# langgraph 1.1.5 (source; no "tools" mode yet) - 1.2.24.
from langgraph.pregel._messages import StreamMessagesHandler  # noqa: E402

_STREAM_HANDLERS: tuple[type, ...] = (StreamMessagesHandler,)
try:
    from langgraph.pregel._tools import StreamToolCallHandler
except ImportError:  # pragma: no cover - langgraph before stream_mode="tools"
    pass
else:
    _STREAM_HANDLERS = (StreamMessagesHandler, StreamToolCallHandler)


def without_stream_handlers(callbacks: Any) -> Any:
    """``callbacks`` (a list of handlers or a callback manager) without LangGraph's
    ``messages`` and ``tools`` stream handlers; the same object when it holds none."""
    if callbacks is None:
        return None
    if isinstance(callbacks, list):
        return [h for h in callbacks if not isinstance(h, _STREAM_HANDLERS)]
    found = [
        h
        for h in (*callbacks.handlers, *callbacks.inheritable_handlers)
        if isinstance(h, _STREAM_HANDLERS)
    ]
    if not found:
        return callbacks
    kept = callbacks.copy()
    for handler in dict.fromkeys(found):
        kept.remove_handler(handler)
    return kept
