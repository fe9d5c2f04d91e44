"""The agent: the model call, and the one agent loop (model <-> tools) as a node.

Its one reason to change: how the agent calls the model and loops over the tools.

Key Components:
    - :class:`CallModel`: calls the model once (graph-level loop with
      :class:`~langgraph_toolbudget.nodes.executor.ToolExecutor`).
    - :class:`ToolAgent`: that loop, ``CallModel`` <-> ``ToolExecutor``, compiled as a
      subgraph and added to your graph as one node.

Typical Usage:
    ```python
    config = BudgetConfig(max_tools=6)
    graph.add_node("agent", CallModel(model, catalog, config=config))
    graph.add_node("tools", ToolExecutor(catalog, config=config))
    ```
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, get_type_hints

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import push_message
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import Unpack

from langgraph_toolbudget._compat import steps_left
from langgraph_toolbudget.config import BudgetConfig, BudgetOptions, check_node_options
from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.core.context import CONTEXT_FIELDS, SessionContext
from langgraph_toolbudget.core.selection import free_tools
from langgraph_toolbudget.core.working_set import state_fields, state_get, state_messages
from langgraph_toolbudget.execution.batch import agent_path, stamped
from langgraph_toolbudget.execution.builtins import Builtins
from langgraph_toolbudget.execution.hooks import AsyncToolCallWrapper, ToolCallWrapper
from langgraph_toolbudget.nodes._node import BudgetNode, route_after_tools, route_tools
from langgraph_toolbudget.nodes.executor import ToolExecutor
from langgraph_toolbudget.nodes.models import ChatModelSpec, resolve_chat_model
from langgraph_toolbudget.nodes.prompt import (
    ModelCaller,
    SystemPrompt,
    ai_calls_this_turn,
    check_system_prompt,
)
from langgraph_toolbudget.nodes.usage import check_usage_catalog, records_usage
from langgraph_toolbudget.state import (
    ToolBudgetState,
    budget_declarations,
    check_budget_reducers,
    clean_budget_fields,
    state_update,
)

__all__ = ["ITERATION_LIMIT_MESSAGE", "RECURSION_LIMIT_MESSAGE", "CallModel", "ToolAgent"]

STATE_SCHEMA_ERROR = (
    "ToolAgent: option state_schema {schema} has no {missing} field(s): the loop keeps the "
    "visible set in them. Extend ToolBudgetState: `class MyState(ToolBudgetState): ...` and "
    "pass state_schema=MyState; a pydantic or dataclass state declares them itself, with "
    "empty defaults: {declarations}"
)
NO_MESSAGES_ERROR = (
    "CallModel reads the conversation from the state's 'messages' key, which this state does "
    "not have (its keys: {keys}): the model would be called without it. Keep the messages "
    "under 'messages' (MessagesState, ToolBudgetState), as LangGraph's prebuilt agents do."
)
_NO = object()
ITERATION_LIMIT_MESSAGE = (
    "I stopped after {n} model calls in this turn (max_iterations={n}) without finishing. "
    "The tool results so far are above; ask me to continue if you want me to go on."
)
RECURSION_LIMIT_MESSAGE = (
    "I stopped before my next tool call: this run's recursion_limit={limit} leaves too few "
    "graph steps to make it and answer after it. The tool results so far are above; ask me "
    "to continue if you want me to go on."
)
_RAW_CALL_KEYS = ("tool_calls", "function_call")
"""A reply's provider-shaped calls in ``additional_kwargs``, which some integrations send back
when the message has no ``tool_calls``."""
_LOOP_STEPS = 3
"""Graph steps a reply calling tools needs left after its own: the tools step, the model step
that reads the answers, and one more, as LangGraph raises ``GraphRecursionError`` after a step
taken with none left even when the graph is done (``create_react_agent`` asks for 2, so it
still raises at some limits)."""


class CallModel(BudgetNode):
    """Node: call the model once with the meta-tools first, then the visible tools.

    The visible tools keep their order across calls (new ones are appended), so
    the prompt prefix stays cacheable. A system-prompt section lists the
    categories and how to widen the tool set; your own system prompt (and a
    system message already at the start of ``messages``) is kept, ahead of it.

    After ``max_iterations`` model calls in one user turn the node answers with
    a final message instead of calling the model again. The calls are its agent's own: in a
    multi-agent graph (agents as nodes of a parent sharing ``messages``), another agent's
    replies do not count: those another framework named (``create_react_agent``,
    ``create_agent``, supervisor libraries name a named agent's replies; this node never names
    its own), and those another of the package's agents made (each reply records its agent's
    place in the graph, ``response_metadata["toolbudget_agent"]``). An unnamed reply
    recording no agent, such as a node of yours writes, counts for every agent.

    A reply calling tools when the run's ``recursion_limit`` leaves too few graph steps to
    run them and call the model again is replaced by a final message too, so the run ends
    with every tool call answered, not on a ``GraphRecursionError`` mid-loop (as
    ``create_react_agent`` with its ``remaining_steps``).

    Args:
        model: a chat model (native tool calling or a text format, see
            ``tool_call_formats``), also wrapped by ``.bind()``, ``.with_config()``,
            ``.with_retry()`` or ``.with_fallbacks()``, or a ``"provider:model"`` string for
            LangChain's ``init_chat_model``.
        catalog: the tool catalog.
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`).
        system_prompt: a string, a ``SystemMessage``, or a callable
            ``(state) -> messages`` / ``(state, config) -> messages``.
        name: node name.
        **options: any ``BudgetConfig`` option, over ``config``'s value. Those this
            node reads: ``max_iterations``, ``pinned``, ``runtime_mode`` (which tools
            are bound and listed in the prompt), ``tool_call_formats`` and
            ``model_supports_tools`` (how tools are shown to the model, see
            ``docs/formats.md``), ``enabled_builtins`` and the offload options (which
            built-in tools are bound).

    Raises:
        TypeError: ``model`` is not a chat model or a model string (or is a class);
            ``system_prompt`` of another type; ``catalog`` is not a ``ToolCatalog``, or
            ``config`` not a ``BudgetConfig``; an unknown option (the message names the
            node and the closest of its own keywords and the ``BudgetConfig`` options); an
            option of the wrong type, named with the node (``max_tools="3"``).
        ValueError: the model cannot call tools natively and no text format is enabled
            (a ``NoFormatAvailableError``); an option out of range, named with the node
            (``max_iterations=0``); an ``enabled_builtins`` name that is a near miss of a
            built-in's (``"serch_tools"``: the message names the built-in and the
            corrected value); a catalog tool with the name of an enabled built-in; a
            ``pinned`` name that is not a tool of the catalog in its ``runtime_mode``;
            ``max_visible`` below the number of tools visible without budget; a model
            string ``init_chat_model`` does not know.
        ModelUnavailableError: a model string whose provider package is not installed.
    """

    def __init__(
        self,
        model: ChatModelSpec,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        system_prompt: SystemPrompt = None,
        name: str = "agent",
        **options: Unpack[BudgetOptions],
    ) -> None:
        super().__init__(name)
        model = resolve_chat_model(model, what="CallModel: option model")
        check_system_prompt(system_prompt, "CallModel")
        self.config = BudgetConfig.resolve(config, options, owner=CallModel)
        catalog = require_catalog(catalog, "CallModel")
        self.catalog = catalog = catalog.in_runtime_mode(self.config.runtime_mode)
        self.caller = ModelCaller(
            model, catalog, system_prompt, Builtins(catalog, self.config), self.config, name
        )
        self.free = free_tools(catalog, self.config.pinned)
        self.steps_after = 0
        """Graph steps your graph takes after this node answers (a node of yours after the
        agent): kept free, with the loop's own, when the run's ``recursion_limit`` is near
        (``add_toolbudget_nodes(then=...)`` sets 1)."""

    @property
    def max_iterations(self) -> int:
        """Model calls allowed per user turn."""
        return self.config.max_iterations

    def _limit_hit(
        self, messages: Sequence[BaseMessage], agent: str | None
    ) -> dict[str, Any] | None:
        """The final message when the agent's own model calls of the turn reached
        ``max_iterations`` (another agent's replies in the thread do not count:
        :func:`ai_calls_this_turn`), else None."""
        if ai_calls_this_turn(messages, (None, agent)) >= self.max_iterations:
            final = ITERATION_LIMIT_MESSAGE.format(n=self.max_iterations)
            return {"messages": [stamped(AIMessage(final), agent)]}
        return None

    def _stop(self, state: Any, config: RunnableConfig) -> dict[str, Any] | None:
        """The answer when this turn must end before the model call; raises on a run's bad
        usage opt-out value, before the model or a tool runs (:func:`records_usage`)."""
        if self.config.usage is not None:
            records_usage(config)
        if not isinstance(state, list) and state_get(state, "messages", _NO) is _NO:
            raise ValueError(NO_MESSAGES_ERROR.format(keys=sorted(state_fields(state))))
        return self._limit_hit(state_messages(state), agent_path(config, self.caller.agent_key))

    def run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        if (stop := self._stop(state, config)) is not None:
            return stop
        working = SessionContext.from_state(state).working_set(state, self.catalog, self.free)
        replies = self.caller.invoke(state, working, config)
        return {"messages": _within_steps(replies, config, _LOOP_STEPS + self.steps_after)}

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        if (stop := self._stop(state, config)) is not None:
            return stop
        working = SessionContext.from_state(state).working_set(state, self.catalog, self.free)
        replies = await self.caller.ainvoke(state, working, config)
        return {"messages": _within_steps(replies, config, _LOOP_STEPS + self.steps_after)}


class ToolAgent(BudgetNode):
    """The agent loop as one node: ``CallModel`` <-> ``ToolExecutor``, compiled as a subgraph.

    Add it anywhere in your graph; it runs model calls and tool batches until the
    model answers (or ``max_iterations`` model calls were made this turn), exactly as
    the prebuilt graph's ``agent`` and ``tools`` nodes do, because it *is* those two
    nodes: each step is a step of the subgraph, so it is checkpointed (under your
    graph's checkpointer), can be interrupted and resumed, and streams as a subgraph does
    (its custom events, tokens and own updates with ``subgraphs=True``). LangGraph sees
    it as a subgraph: ``get_state(config, subgraphs=True)`` shows the loop's pending call,
    ``update_state(task.state.config, ...)`` edits it, ``get_graph(xray=True)`` draws it.

    Input: ``messages``, ``selected_tools`` (from the selection nodes) and the rest of
    your state. Output: the update from your state to the loop's final state: the new
    messages and those a tool replaced by id (as LangGraph's ``create_react_agent`` added
    as a node gives; a message a tool removed inside the loop stays in your state), the
    visible set (tools added and removed), ``discovered_tools``, ``tool_last_used``, the
    tool context, and any key of your state a tool changed with a ``Command`` (keys with
    a reducer of their own get the items a list gained, or the final value).

    Args:
        model: a chat model (native tool calling or a text format), also wrapped (as
            :class:`CallModel` takes it), or a ``"provider:model"`` string.
        catalog: the tool catalog.
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`).
        system_prompt: a string, a ``SystemMessage``, or a callable of the state.
        state_schema: the loop's state: your graph's state schema when its tools read
            or write keys of their own (``InjectedState``, ``Command`` updates); it must
            extend :class:`~langgraph_toolbudget.state.ToolBudgetState`.
        wrap_tool_call: hooks around each tool call (LangGraph's shape).
        awrap_tool_call: async hooks around each tool call.
        name: node name.
        **options: any ``BudgetConfig`` option, over ``config``'s value (those of
            :class:`CallModel` and :class:`~langgraph_toolbudget.nodes.executor.ToolExecutor`).

    Raises:
        TypeError: ``model`` is not a chat model or a model string; ``system_prompt`` of
            another type; ``state_schema`` is not a class, lacks the budget fields of
            :class:`~langgraph_toolbudget.state.ToolBudgetState` (the message lists the
            declarations to add) or declares one with another reducer; a
            ``wrap_tool_call`` / ``awrap_tool_call`` that is not a callable or a list of
            them; ``catalog`` is not a ``ToolCatalog``, or ``config`` not a
            ``BudgetConfig``; an unknown option (the message names the node and the
            closest of its own keywords and the ``BudgetConfig`` options); an option of
            the wrong type, named with the node (``max_tools="3"``).
        ValueError: what :class:`CallModel` and
            :class:`~langgraph_toolbudget.nodes.executor.ToolExecutor` refuse: the model
            cannot call tools natively and no text format is enabled; an option out of
            range, named with the node (``mode="x"``); an ``enabled_builtins`` name that
            is a near miss of a built-in's (``"serch_tools"``); a catalog tool with the
            name of an enabled built-in; an unknown ``pinned`` name; ``max_visible`` below
            the tools visible without budget; a ``usage`` built with ``catalog=`` a
            catalog that lacks this one's tools.
        ModelUnavailableError: a model string whose provider package is not installed.

    Example:
        ```python
        graph.add_node("agent", ToolAgent(model, catalog, mode="sequential", max_iterations=5))
        ```
    """

    def __init__(
        self,
        model: ChatModelSpec,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        system_prompt: SystemPrompt = None,
        state_schema: type[Any] = ToolBudgetState,
        wrap_tool_call: ToolCallWrapper | Sequence[ToolCallWrapper] | None = None,
        awrap_tool_call: AsyncToolCallWrapper | Sequence[AsyncToolCallWrapper] | None = None,
        name: str = "agent",
        **options: Unpack[BudgetOptions],
    ) -> None:
        super().__init__(name)
        model = resolve_chat_model(model, what="ToolAgent: option model")
        check_system_prompt(system_prompt, "ToolAgent")
        check_node_options(
            ToolAgent,
            state_schema=state_schema,
            wrap_tool_call=wrap_tool_call,
            awrap_tool_call=awrap_tool_call,
        )
        catalog = require_catalog(catalog, "ToolAgent")
        self.config = BudgetConfig.resolve(config, options, owner=ToolAgent)
        check_usage_catalog(
            self.config.usage, catalog.in_runtime_mode(self.config.runtime_mode), "ToolAgent"
        )
        self.call_model = CallModel(model, catalog, config=self.config, system_prompt=system_prompt)
        """The loop's model node."""
        self.executor = ToolExecutor(
            catalog,
            config=self.config,
            wrap_tool_call=wrap_tool_call,
            awrap_tool_call=awrap_tool_call,
        )
        """The loop's tools node."""
        self.catalog = catalog.in_runtime_mode(self.config.runtime_mode)
        """The catalog in the runtime mode (as ``CallModel``'s: the threads CLI finds it)."""
        self._loop_args = (state_schema, catalog, name)
        self._compile_loop()

    def _compile_loop(self) -> None:
        state_schema, catalog, name = self._loop_args
        loop = StateGraph(state_schema)
        missing = sorted(set(get_type_hints(ToolBudgetState)) - set(loop.channels))
        if missing:
            raise TypeError(
                STATE_SCHEMA_ERROR.format(
                    schema=state_schema.__name__,
                    missing=", ".join(missing),
                    declarations=budget_declarations(m for m in missing if m != "messages"),
                )
            )
        check_budget_reducers(loop.channels)
        loop.add_node("agent", self.call_model)
        loop.add_node("tools", self.executor)
        loop.add_edge(START, "agent")
        loop.add_conditional_edges("agent", route_tools, {"tools": "tools", END: END})
        loop.add_conditional_edges(
            "tools", route_after_tools(catalog), {"agent": "agent", END: END}
        )
        self.graph = loop.compile(name=name)
        """The loop, compiled without a checkpointer: it runs under your graph's."""
        self._reducers = _reducers(self.graph.channels)
        # LangGraph finds a node's subgraph among the values the node's function closes over
        # (find_subgraph_pregel), never behind `self`: the node runs through functions closing
        # over the loop, so that get_state(subgraphs=True), update_state on the loop's
        # namespace and get_graph(xray=True) see it, as for a compiled graph added as a node.
        self._run_loop, self._arun_loop = _loop_runners(self.graph, self._reducers, self._steps())
        if type(self).run is ToolAgent.run and type(self).arun is ToolAgent.arun:
            self.func, self.afunc = self._run_loop, self._arun_loop
        else:  # a subclass's own run/arun, still through functions that show the loop
            self.func, self.afunc = _own_runners(self.graph, self)

    def __deepcopy__(self, memo: dict[int, Any]) -> ToolAgent:
        """A copy with its own nodes (their own pools) and its loop compiled anew over them:
        a compiled graph copied as it is does not run (LangGraph's sentinels are copied)."""
        clone = copy.copy(self)
        memo[id(self)] = clone
        own = {k: v for k, v in vars(self).items() if k not in _COMPILED}
        vars(clone).update(copy.deepcopy(own, memo))
        clone._compile_loop()
        return clone

    def __repr__(self) -> str:
        """A line, as the catalog's (the loop's nodes and graph would list every tool)."""
        model = type(self.call_model.caller.model).__name__
        catalog = self.executor.runner.catalog
        return f"ToolAgent({model}, {catalog!r}, name={self.node_name!r})"

    @property
    def max_iterations(self) -> int:
        """Model calls per user turn."""
        return self.config.max_iterations

    def _steps(self) -> int:
        """The loop's own recursion limit at least: a model call and a tool batch per
        iteration, plus the final answer."""
        return 2 * self.max_iterations + 2

    def run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return self._run_loop(state, config)

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return await self._arun_loop(state, config)


_COMPILED = ("graph", "_reducers", "_run_loop", "_arun_loop", "func", "afunc")
"""A ``ToolAgent``'s attributes built by ``_compile_loop``: a copy builds its own."""


def _loop_runners(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    reducers: Mapping[str, Callable[..., Any] | None],
    steps: int,
) -> tuple[
    Callable[[Any, RunnableConfig], dict[str, Any]],
    Callable[[Any, RunnableConfig], Awaitable[dict[str, Any]]],
]:
    """A ``ToolAgent``'s node functions (sync, async): run ``graph`` on the state, return the
    update to the state. They close over ``graph`` (where LangGraph looks for a subgraph) and
    not over the ``ToolAgent``, which LangGraph would walk again."""

    def loop_config(config: RunnableConfig) -> RunnableConfig:
        return {**config, "recursion_limit": max(config.get("recursion_limit", 25), steps)}

    def update(state: Any, final: Any) -> dict[str, Any]:
        return state_update(state if isinstance(state, Mapping) else {}, final, reducers)

    def run_loop(state: Any, config: RunnableConfig) -> dict[str, Any]:
        return update(state, graph.invoke(_loop_input(state), loop_config(config)))

    async def arun_loop(state: Any, config: RunnableConfig) -> dict[str, Any]:
        return update(state, await graph.ainvoke(_loop_input(state), loop_config(config)))

    return run_loop, arun_loop


def _own_runners(
    graph: CompiledStateGraph[Any, Any, Any, Any], agent: ToolAgent
) -> tuple[
    Callable[[Any, RunnableConfig], dict[str, Any]],
    Callable[[Any, RunnableConfig], Awaitable[dict[str, Any]]],
]:
    """Node functions running a ``ToolAgent`` subclass's own ``run``/``arun``; they name the
    loop too, so LangGraph finds it among their values before it walks ``agent`` again."""

    def run_own(state: Any, config: RunnableConfig) -> dict[str, Any]:
        _ = graph
        return agent.run(state, config)

    async def arun_own(state: Any, config: RunnableConfig) -> dict[str, Any]:
        _ = graph
        return await agent.arun(state, config)

    return run_own, arun_own


def _within_steps(
    replies: list[AIMessage], config: RunnableConfig, reserve: int = _LOOP_STEPS
) -> list[BaseMessage]:
    """``replies`` (the last one the answer), or with the answer's calls replaced by the final
    message when the run's ``recursion_limit`` leaves fewer than ``reserve`` steps to run them
    and read their answers: the turn ends with every call answered, never on a
    ``GraphRecursionError`` with the calls left unanswered in the thread."""
    left = steps_left(config) if replies and replies[-1].tool_calls else None
    if left is None or left >= reserve:
        return list(replies)
    reply = replies[-1]
    note = RECURSION_LIMIT_MESSAGE.format(limit=config.get("recursion_limit"))
    text = str(reply.text).strip()
    kept = {k: v for k, v in reply.additional_kwargs.items() if k not in _RAW_CALL_KEYS}
    # The reply under its own id (a client merging the streamed reply by id sees it replaced,
    # no call left hanging), with what the model wrote and its usage; its calls dropped.
    final = reply.model_copy(
        update={
            "content": f"{text}\n\n{note}" if text else note,
            "tool_calls": [],
            "invalid_tool_calls": [],
            "additional_kwargs": kept,
        }
    )
    _stream_in_place(final)
    return [*replies[:-1], final]


def _stream_in_place(message: AIMessage) -> None:
    """Send ``message`` to the run's ``messages`` stream, where the reply it replaces went
    under the same id: the stream sends an id once, so a client would keep the streamed reply
    and its call, never answered."""
    try:
        callbacks = get_config().get("callbacks")
    except RuntimeError:  # not inside a run: there is no stream
        return
    if isinstance(callbacks, BaseCallbackManager | list):  # push_message reads no other shape
        push_message(message, state_key=None)


def _loop_input(state: Any) -> Any:
    """``state`` with its tool context as the nodes read it: a malformed value a checkpoint
    kept from before the context reducers refused them is left out, so the loop's reducers
    (which refuse it in an update) accept the state as input; the parent's copy is then
    cleaned by the update."""
    if not isinstance(state, Mapping):
        return state
    state = clean_budget_fields(state)
    if not any(f in state for f in CONTEXT_FIELDS):
        return state
    clean = SessionContext.from_state(state).state_values()
    return {**state, **{f: clean[f] for f in CONTEXT_FIELDS if f in state}}


def _reducers(channels: Mapping[str, Any]) -> dict[str, Callable[..., Any] | None]:
    """A compiled graph's fields -> their reducers (a ``BinaryOperatorAggregate``'s operator)."""
    return {
        key: channel.operator if isinstance(channel, BinaryOperatorAggregate) else None
        for key, channel in channels.items()
    }
