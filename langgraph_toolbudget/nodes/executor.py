"""The tools node: a drop-in replacement for LangGraph's ``ToolNode`` that knows the budget.

Its one reason to change: the tools node's behaviour as a ``ToolNode`` replacement.

Key Components:
    - :class:`ToolExecutor`: a ``ToolNode`` subclass (so ``create_react_agent``
      and every ``isinstance(..., ToolNode)`` check accept it) that runs the tool
      calls of its input through
      :class:`~langgraph_toolbudget.execution.batch.BatchRunner` (meta-calls
      first, enforcement, the per-call pipeline, the scheduler) and returns the
      tool messages and the visible-set update. It takes ``ToolNode``'s input
      and output shapes and its constructor arguments with their meaning;
      :meth:`ToolExecutor.from_tools` is the one-line swap for ``ToolNode(tools)``.

Typical Usage:
    ```python
    from langgraph.prebuilt import tools_condition
    graph.add_node("tools", ToolExecutor(catalog, config=config))
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    ```

The differences from ``ToolNode`` that remain, with their reasons, are listed in
docs/execution.md ("Differences from ToolNode").
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Self

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    InvalidToolCall,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as create_tool
from langgraph.prebuilt import ToolNode
from typing_extensions import Unpack

from langgraph_toolbudget._compat import DEFAULT_HANDLE_TOOL_ERRORS, toolnode_input
from langgraph_toolbudget.config import BudgetConfig, BudgetOptions, check_node_options
from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.core.coercion import complete_tool_calls, unrun_calls
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.working_set import WorkingSet, state_get
from langgraph_toolbudget.execution.batch import BatchRunner
from langgraph_toolbudget.execution.errors import HandleToolErrors
from langgraph_toolbudget.execution.outcome import TurnOutcome, node_output
from langgraph_toolbudget.execution.pipeline import AsyncToolCallWrapper, ToolCallWrapper
from langgraph_toolbudget.nodes._node import emit_changes
from langgraph_toolbudget.nodes.usage import (
    arecord_batch,
    check_usage_catalog,
    record_batch,
    records_usage,
)

__all__ = ["ToolExecutor"]

FROM_TOOLS_HINT = (
    " To swap ToolNode(tools) for this node in one line, ToolExecutor.from_tools(tools) builds "
    "the catalog itself."
)
NO_AI_MESSAGE_ERROR = (
    "ToolExecutor found no AI message in the state's messages; route to it only when "
    "the last AI message has tool calls (e.g. with tools_condition)."
)
NO_VISIBLE_SET_ERROR = (
    "ToolExecutor cannot answer the model's call to {tools}: it runs only the tools the model "
    "was shown (enforce_visibility=True), read from the state's 'selected_tools', and this "
    "graph's state has no 'selected_tools' channel, so no tool is ever loaded (telling the "
    "model to load it with add_tool would not help). Either give the graph the budget's state "
    "(StateGraph(ToolBudgetState, input_schema=ToolBudgetInput) or a subclass, with "
    "SelectTools and CallModel, or create_toolbudget_agent, choosing the tools), or, where the "
    "model is given every tool (create_react_agent, a ToolNode graph), build this node with "
    "ToolExecutor.from_tools(tools) or ToolExecutor(catalog, enforce_visibility=False)."
)
FROM_TOOLS_CATALOG_ERROR = (
    "ToolExecutor.from_tools takes a list of tools (BaseTools or functions), as ToolNode(tools) "
    "does; got a {kind}. For a ToolCatalog use ToolExecutor(catalog) (add "
    "enforce_visibility=False where the model is given every tool, as in create_react_agent)."
)
FROM_TOOLS_TYPE_ERROR = (
    "ToolExecutor.from_tools takes a list of tools (BaseTools or functions), as ToolNode(tools) "
    "does; got {kind}."
)
_ABSENT = object()
_SHARED_ON_COPY = frozenset({"config", "runner", "_tools_by_name"})
"""What a deep copy of a :class:`ToolExecutor` shares or rebuilds instead of copying."""

Hooks = ToolCallWrapper | Sequence[ToolCallWrapper] | None
AsyncHooks = AsyncToolCallWrapper | Sequence[AsyncToolCallWrapper] | None


_TOOLNODE_DEFAULTS: dict[str, Any] = {"enforce_visibility": False, "offload_over_chars": None}
"""What :meth:`ToolExecutor.from_tools` changes from ``ToolExecutor``'s defaults, as
``ToolNode`` behaves: every tool visible, no offloading. A ``config`` that sets either keeps
its value."""


class ToolExecutor(ToolNode):
    """A drop-in replacement for LangGraph's ``ToolNode`` that knows the tool budget.

    Input (as ``ToolNode``): a state whose last AI message (under ``messages_key``)
    has tool calls, a list of messages, a list of tool calls, or a ``Send``
    payload (``{"__type": "tool_call_with_context", "tool_call": ..., "state": ...}``).
    Output (as ``ToolNode``): ``{"messages": [ToolMessage, ...]}`` (a list of tool
    messages for a list-of-messages input), or a list of updates and ``Command``s
    when tools return ``Command``s; plus the budget fields ``selected_tools``,
    ``discovered_tools`` and ``tool_last_used`` when they change. One tool message
    per call, in call order, then one per entry of the reply's ``invalid_tool_calls`` that
    nothing answers yet (the "not valid JSON" error: never run); each answered under its
    call's id as ``ToolNode`` answers it (``""`` included, calls sharing an id each under
    it), a call without an id under a new ``call_...`` id; the node never rewrites the
    reply (it cannot know the graph's messages reducer; give calls distinct ids in your
    model node, see docs/execution.md); meta-calls change the visible set; calls to tools
    that are unknown, filtered, disabled, drafts outside debug mode or not visible are
    refused with an error message naming the closest tools and what to do; results of
    deprecated tools carry a note saying so.

    Args:
        catalog: the tool catalog.
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`);
            pass the one ``SelectTools`` got, so ``request_more_tools`` loads
            under the same budget.
        wrap_tool_call: hooks ``(request, execute) -> result`` around each call,
            as ``ToolNode(wrap_tool_call=...)`` (a callable or a list, outermost first).
        awrap_tool_call: async hooks, as ``ToolNode(awrap_tool_call=...)``.
        name: node name.
        tags: tags of the node's runs, as ``ToolNode(tags=...)``.
        handle_tool_errors: ``None`` (the default): every failure of a tool becomes
            an error message that explains it (the expected schema for invalid
            arguments, the timeout, the exception); or any of ``ToolNode``'s forms
            with its meaning: ``True``, a message string, a callable taking the
            exception, an exception type or a tuple of them, ``False`` (raise).
        messages_key: the state key of the messages, as ``ToolNode(messages_key=...)``.
        **options: any ``BudgetConfig`` option, over ``config``'s value. Those the
            executor reads: ``mode``, ``max_parallel`` and ``group_limits`` (the
            scheduling), ``max_tools``/``model_size``/``min_per_category`` (the budget
            of ``request_more_tools``), ``max_meta_calls``, ``pinned``,
            ``max_visible``, ``enforce_visibility``, ``runtime_mode``,
            ``enabled_builtins``, the ``offload_*`` options and ``usage`` (each
            regular tool that ran successfully is recorded against the latest user
            message; a run opts out with ``configurable={"toolbudget_record_usage": False}``).

    Raises:
        TypeError: ``catalog`` is not a ``ToolCatalog`` (the message shows
            :meth:`from_tools`, the swap for ``ToolNode(tools)``), or ``config`` not a
            ``BudgetConfig``;
            an unknown option (the message names the node and the closest of its own
            keywords and the ``BudgetConfig`` options); an option of the wrong type, named
            with the node (``messages_key=1``, ``tags="a"``, ``handle_tool_errors=1``,
            ``wrap_tool_call=1``, ``max_parallel="4"``).
        ValueError: when built: an option out of range, named with the node (``mode="x"``,
            ``messages_key=""``, ``name=""``); an ``enabled_builtins`` name that is a near
            miss of a built-in's (``"serch_tools"``: the message names the built-in and
            the corrected value); a catalog tool with the name of an enabled built-in; a
            ``pinned`` name that is not a tool of the catalog in its ``runtime_mode``;
            ``max_visible`` below the number of tools visible without budget; a ``usage``
            built with ``catalog=`` a catalog that lacks this one's tools. When run:
            enforcing the visible set (``enforce_visibility=True``, the default) in
            a graph whose state has no ``selected_tools`` channel (``create_react_agent``'s,
            ``MessagesState``), with no ``pinned`` tools, when the model calls a tool that is
            not visible (before any call runs): there, use :meth:`from_tools` or
            ``enforce_visibility=False``. With ``pinned`` tools (a whitelist), such a call is
            refused to the model.

    Example:
        ```python
        from langgraph.prebuilt import tools_condition
        graph.add_node("tools", ToolExecutor(catalog, config=config))
        graph.add_conditional_edges("agent", tools_condition)
        graph.add_edge("tools", "agent")
        ```
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        wrap_tool_call: Hooks = None,
        awrap_tool_call: AsyncHooks = None,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: HandleToolErrors = None,
        messages_key: str = "messages",
        **options: Unpack[BudgetOptions],
    ) -> None:
        catalog = require_catalog(catalog, "ToolExecutor", extra=FROM_TOOLS_HINT)
        check_node_options(
            ToolExecutor,
            name=name,
            tags=tags,
            handle_tool_errors=handle_tool_errors,
            messages_key=messages_key,
            wrap_tool_call=wrap_tool_call,
            awrap_tool_call=awrap_tool_call,
        )
        super().__init__(
            [],
            name=name,
            tags=tags,
            # ToolNode's reading of ours (None: every error answered); the runner applies it.
            handle_tool_errors=True if handle_tool_errors is None else handle_tool_errors,
            messages_key=messages_key,
        )
        self.node_name: str = name
        self.config = BudgetConfig.resolve(config, options, owner=ToolExecutor)
        self._runner_options: dict[str, Any] = {
            "wrap_tool_call": wrap_tool_call,
            "awrap_tool_call": awrap_tool_call,
            "handle_tool_errors": handle_tool_errors,
            "messages_key": messages_key,
        }
        self.runner = BatchRunner(catalog, self.config, **self._runner_options)
        check_usage_catalog(self.config.usage, self.runner.catalog, "ToolExecutor")
        # ToolNode's view of the tools (create_react_agent binds these to the model).
        self._tools_by_name = {spec.name: spec.tool for spec in self.runner.catalog.specs}
        self._wrap_tool_call = wrap_tool_call  # type: ignore[assignment]
        self._awrap_tool_call = awrap_tool_call  # type: ignore[assignment]
        self._track_use = True  # write tool_last_used (the LRU order of the visible set)

    def __deepcopy__(self, memo: dict[int, Any]) -> ToolExecutor:
        """A copy with a runner of its own (its thread pool, scheduler and calls in flight),
        over the same catalog and config: both are immutable, so they are shared, as are the
        objects they hold (``usage``, ``database_toolbox``, embeddings); the rest (name,
        tags, hooks) is copied, as ``ToolNode`` copies its own."""
        clone = copy.copy(self)
        memo[id(self)] = clone
        own = {k: v for k, v in vars(self).items() if k not in _SHARED_ON_COPY}
        vars(clone).update(copy.deepcopy(own, memo))
        catalog, wording = self.runner.catalog, self.runner.policy.toolnode_wording
        clone.runner = BatchRunner(
            catalog, self.config, toolnode_wording=wording, **clone._runner_options
        )
        clone._tools_by_name = dict(self._tools_by_name)
        return clone

    def __repr__(self) -> str:
        """A line, as the catalog's (``ToolNode``'s lists every tool: ~1 MB for 5,000)."""
        options = f"name={self.node_name!r}, mode={self.config.mode!r}"
        if not self.config.enforce_visibility:
            options += ", enforce_visibility=False"
        return f"ToolExecutor({self.runner.catalog!r}, {options})"

    @classmethod
    def from_tools(
        cls,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: HandleToolErrors = DEFAULT_HANDLE_TOOL_ERRORS,
        messages_key: str = "messages",
        wrap_tool_call: Hooks = None,
        awrap_tool_call: AsyncHooks = None,
        config: BudgetConfig | None = None,
        **options: Unpack[BudgetOptions],
    ) -> Self:
        """The one-line swap for ``ToolNode(tools, ...)``: same arguments, same meaning.

        Every tool is visible (no budget: ``enforce_visibility=False``), plain
        functions are turned into tools as ``ToolNode`` turns them, errors are
        handled as ``ToolNode`` handles them by default, unknown names are refused
        in ``ToolNode``'s words, and the output carries no budget fields unless a
        meta-call changed the visible set, and large results are not offloaded
        (pass ``offload_over_chars=20_000`` to turn that on). The scheduling
        (``mode``, ``max_parallel``, ``group_limits``), argument repair and per-tool
        timeouts stay.

        Args:
            tools: ``BaseTool``s and plain functions, as ``ToolNode(tools)``.
            name: node name.
            tags: tags of the node's runs.
            handle_tool_errors: as ``ToolNode``'s (its default: invalid arguments are
                answered, other exceptions raised); ``None`` for explained errors.
            messages_key: the state key of the messages.
            wrap_tool_call: hooks around each call, as ``ToolNode``'s.
            awrap_tool_call: async hooks, as ``ToolNode``'s.
            config: shared options, as for :class:`ToolExecutor`; the values it sets
                (``config.model_fields_set``) come over the defaults above.
            **options: any ``BudgetConfig`` option (``mode``, ``max_parallel``,
                ``group_limits``...), over ``config``'s value and the defaults above.

        Returns:
            A ``ToolExecutor`` over a catalog of ``tools``.

        Example:
            ```python
            def add(a: int, b: int) -> int:
                \"\"\"Add two numbers.\"\"\"
                return a + b

            node = ToolExecutor.from_tools([add])  # was: ToolNode([add])
            ```
        """
        node = cls.__new__(cls)
        node._init_from_tools(
            tools,
            name=name,
            tags=tags,
            handle_tool_errors=handle_tool_errors,
            messages_key=messages_key,
            wrap_tool_call=wrap_tool_call,
            awrap_tool_call=awrap_tool_call,
            config=config,
            **options,
        )
        return node

    def _init_from_tools(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        handle_tool_errors: HandleToolErrors = DEFAULT_HANDLE_TOOL_ERRORS,
        **options: Any,
    ) -> None:
        """Initialise as :meth:`from_tools` describes (for subclasses taking ``tools``)."""
        if isinstance(tools, ToolCatalog):
            raise TypeError(FROM_TOOLS_CATALOG_ERROR.format(kind=type(tools).__name__))
        if isinstance(tools, str | bytes) or not isinstance(tools, Iterable):
            raise TypeError(FROM_TOOLS_TYPE_ERROR.format(kind=repr(tools)[:80]))
        as_tools = [t if isinstance(t, BaseTool) else create_tool(t) for t in tools]
        config = options.get("config")
        chosen = config.model_fields_set if isinstance(config, BudgetConfig) else set()
        defaults = {k: v for k, v in _TOOLNODE_DEFAULTS.items() if k not in chosen}
        ToolExecutor.__init__(
            self,
            ToolCatalog.from_tools(as_tools),
            **{**defaults, **options},
            handle_tool_errors=handle_tool_errors,
        )
        self.runner.policy.toolnode_wording = True
        self._track_use = False

    # --- ToolNode's entry points ------------------------------------------------------------

    def _read(self, value: Any, config: RunnableConfig) -> tuple[list[ToolCall], str, Any]:
        """The calls to answer, ``ToolNode``'s input type and the state.

        The calls are the reply's, then its ``invalid_tool_calls`` that nothing answers yet
        (answered with an error, never run). The reply itself is never changed: under
        ``operator.add`` a rewritten copy would be appended, not replaced.
        """
        try:
            calls, input_type, state = toolnode_input(self, value, config)
        except ValueError as exc:
            raise ValueError(f"{exc}: {NO_AI_MESSAGE_ERROR}") from None
        reply, later = _reply(value, input_type, self._messages_key)
        if reply is not None and reply.invalid_tool_calls:
            calls = [*calls, *unrun_calls(_unanswered(reply, later))]
        return complete_tool_calls(calls), input_type, state

    def _working(self, state: Any, calls: Sequence[ToolCall]) -> tuple[WorkingSet, SessionContext]:
        # A list of messages, or of tool calls outside a graph ({}), carries no state to check.
        stateful = not isinstance(state, list) and bool(state)
        state = state if stateful else {}
        context = self.runner.context_of(state)  # read once: the batch needs it too
        working = self.runner.working_set(state, context)
        # With pinned tools the executor has a visible set of its own (a whitelist graph): a
        # call outside it is refused to the model as in any graph.
        enforced = self.config.enforce_visibility and not self.config.pinned
        if enforced and stateful and state_get(state, "selected_tools", _ABSENT) is _ABSENT:
            self._refuse_without_visible_set(calls, working, context)
        return working, context

    def _refuse_without_visible_set(
        self, calls: Sequence[ToolCall], working: WorkingSet, context: SessionContext
    ) -> None:
        """Raise, before any call runs, when a call would be refused as not loaded in a graph
        whose state has no ``selected_tools`` channel (a reducer channel of ``ToolBudgetState``
        is in every node's input, so its absence is the graph's): the model was bound tools
        it can never call (``create_react_agent`` binds ``tools_by_name``), and telling it to
        call ``add_tool`` would loop. Pinned, ``always`` and included tools run as before;
        an executor given ``pinned`` tools refuses other calls to the model instead."""
        catalog = self.runner.catalog
        hidden = [
            call["name"]
            for call in calls
            if call["name"] in catalog
            and call["name"] not in working
            and context.refusal(catalog, call["name"]) is None
        ]
        if hidden:
            raise ValueError(NO_VISIBLE_SET_ERROR.format(tools=", ".join(dict.fromkeys(hidden))))

    def _output(self, outcome: TurnOutcome, working: WorkingSet, input_type: str) -> Any:
        if working.changes:
            emit_changes(working, self.node_name)
        working.discover(outcome.discovered)
        update = {**outcome.update, **working.update()}
        if not self._track_use:
            update.pop("tool_last_used", None)
        return node_output(
            outcome.outputs, update, messages_key=self._messages_key, as_list=input_type == "list"
        )

    def _func(self, input: Any, config: RunnableConfig) -> Any:  # type: ignore[override]  # noqa: A002
        calls, input_type, state = self._read(input, config)
        if self.config.usage is not None:
            records_usage(config)  # a bad opt-out value raises before any call runs
        working, context = self._working(state, calls)
        outcome = self.runner.run(calls, state, config, working, context=context)
        key = self._messages_key
        record_batch(
            self.config.usage, state, calls, outcome.outputs, config, self.runner.catalog, key
        )
        return self._output(outcome, working, input_type)

    async def _afunc(self, input: Any, config: RunnableConfig) -> Any:  # type: ignore[override]  # noqa: A002
        calls, input_type, state = self._read(input, config)
        if self.config.usage is not None:
            records_usage(config)  # a bad opt-out value raises before any call runs
        working, context = self._working(state, calls)
        outcome = await self.runner.arun(calls, state, config, working, context=context)
        key = self._messages_key
        await arecord_batch(
            self.config.usage, state, calls, outcome.outputs, config, self.runner.catalog, key
        )
        return self._output(outcome, working, input_type)


def _reply(value: Any, input_type: str, key: str) -> tuple[AIMessage | None, list[BaseMessage]]:
    """The AI message whose calls ``ToolNode`` reads from ``value`` (its latest) and the
    messages after it; None for a list of tool calls or a ``Send`` payload, which carry
    the calls alone."""
    if input_type == "tool_calls":
        return None, []
    messages = value if input_type == "list" else state_get(value, key, None) or []
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            return messages[i], list(messages[i + 1 :])
    return None, []


def _unanswered(reply: AIMessage, later: Sequence[BaseMessage]) -> list[InvalidToolCall]:
    """The ``invalid_tool_calls`` of ``reply`` to answer: those whose id neither a tool
    message after it (answered already) nor one of its tool calls has (the user repaired
    the reply)."""
    taken = {c.get("id") for c in reply.tool_calls}
    taken |= {m.tool_call_id for m in later if isinstance(m, ToolMessage)}
    return [bad for bad in reply.invalid_tool_calls if not bad.get("id") or bad["id"] not in taken]
