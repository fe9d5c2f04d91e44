"""The agent nodes: call the model with the meta-tools and the visible tools.

Its one reason to change: how the agent loop calls the model and runs its calls.

Key Components:
    - :class:`CallModel`: calls the model once (graph-level loop with
      :class:`~langgraph_toolbudget.nodes.executor.ToolExecutor`).
    - :class:`ToolAgent`: one node that loops model -> tools inside itself.

Typical Usage:
    ```python
    config = BudgetConfig(max_tools=6)
    graph.add_node("agent", CallModel(model, catalog, config=config))
    graph.add_node("tools", ToolExecutor(catalog, config=config))
    ```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from langgraph_toolbudget.config import (
    KEEP,
    BudgetConfig,
    ExecutionMode,
    Keep,
    RuntimeMode,
    resolve_config,
    resolve_offload,
)
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.intent import latest_user_text
from langgraph_toolbudget.core.selection import free_tools
from langgraph_toolbudget.core.working_set import WorkingSet, state_messages
from langgraph_toolbudget.execution.batch import BatchRunner, TurnOutcome, flatten_outputs
from langgraph_toolbudget.execution.builtin_family import merge_update
from langgraph_toolbudget.execution.builtins import Builtins
from langgraph_toolbudget.execution.pipeline import AsyncToolCallWrapper, ToolCallWrapper
from langgraph_toolbudget.formats.settings import ToolCallFormatsSpec
from langgraph_toolbudget.nodes._node import BudgetNode, emit_changes
from langgraph_toolbudget.nodes.prompt import ModelCaller, SystemPrompt, ai_calls_this_turn
from langgraph_toolbudget.nodes.usage import ToolUsage, succeeded_tools

__all__ = ["ITERATION_LIMIT_MESSAGE", "CallModel", "ToolAgent"]

ITERATION_LIMIT_MESSAGE = (
    "I stopped after {n} model calls in this turn (max_iterations={n}) without finishing. "
    "Here is where things stand; ask me to continue if you want me to go on."
)


class CallModel(BudgetNode):
    """Node: call the model once with the meta-tools first, then the visible tools.

    The visible tools keep their order across calls (new ones are appended), so
    the prompt prefix stays cacheable. A system-prompt section lists the
    categories and how to widen the tool set; your own system prompt (and a
    system message already at the start of ``messages``) is kept, ahead of it.

    After ``max_iterations`` model calls in one user turn the node answers with
    a final message instead of calling the model again.

    Args:
        model: a chat model (native tool calling or a text format, see
            ``tool_call_formats``), or a ``"provider:model"`` string for
            LangChain's ``init_chat_model``.
        catalog: the tool catalog.
        config: the shared options; the keyword arguments below override it.
        system_prompt: a string, a ``SystemMessage``, or a callable
            ``(state) -> messages`` / ``(state, config) -> messages``.
        pinned: tools always visible.
        max_iterations: model calls allowed per user turn.
        runtime_mode: ``production`` (published and deprecated tools) or ``debug``
            (drafts too): which tools are bound and listed in the prompt.
        name: node name.
        tool_call_formats: how tools are shown to the model and its calls read:
            ``{"enabled": [...], "primary": ...}`` with ``native``, ``hermes``,
            ``mistral``, ``pythonic``, ``json`` (see ``docs/formats.md``);
            ``None``: native, else the text format the model's name suggests.
        model_supports_tools: override the check of native tool calling.

    Raises:
        TypeError: ``model`` is not a chat model or a model string.
        ValueError: the model cannot call tools natively and no text format is enabled.
    """

    def __init__(
        self,
        model: BaseChatModel | str,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        system_prompt: SystemPrompt = None,
        pinned: Sequence[str] | None = None,
        max_iterations: int | None = None,
        runtime_mode: RuntimeMode | None = None,
        name: str = "agent",
        tool_call_formats: ToolCallFormatsSpec = None,
        model_supports_tools: bool | None = None,
    ) -> None:
        super().__init__(name)
        self.config = resolve_config(
            config,
            pinned=pinned,
            max_iterations=max_iterations,
            runtime_mode=runtime_mode,
            tool_call_formats=tool_call_formats,
            model_supports_tools=model_supports_tools,
        )
        self.catalog = catalog = catalog.in_runtime_mode(self.config.runtime_mode)
        self.caller = ModelCaller(
            model, catalog, system_prompt, Builtins(catalog, self.config), self.config, name
        )
        self.free = free_tools(catalog, self.config.pinned)

    @property
    def max_iterations(self) -> int:
        """Model calls allowed per user turn."""
        return self.config.max_iterations

    def _limit_hit(self, messages: Sequence[BaseMessage]) -> dict[str, Any] | None:
        if ai_calls_this_turn(messages) >= self.max_iterations:
            final = ITERATION_LIMIT_MESSAGE.format(n=self.max_iterations)
            return {"messages": [AIMessage(final)]}
        return None

    def run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        if (stop := self._limit_hit(state_messages(state))) is not None:
            return stop
        working = SessionContext.from_state(state).working_set(state, self.catalog, self.free)
        return {"messages": self.caller.invoke(state, working, config)}

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        if (stop := self._limit_hit(state_messages(state))) is not None:
            return stop
        working = SessionContext.from_state(state).working_set(state, self.catalog, self.free)
        return {"messages": await self.caller.ainvoke(state, working, config)}


class ToolAgent(BudgetNode):
    """One node that loops model -> tools until the model answers.

    Each iteration binds the meta-tools and the visible tools, calls the model,
    and runs its tool calls through the same core as
    :class:`~langgraph_toolbudget.nodes.executor.ToolExecutor` (meta-calls first,
    enforcement, coercion, ``sequential``/``parallel_safe``). Meta-calls
    widen the visible set for the next iteration.

    Input: ``messages``, ``selected_tools`` (from the selection nodes).
    Output: the new messages (AI and tool messages, and a final message if
    ``max_iterations`` is hit), the working-set update, ``discovered_tools``;
    plus any ``Command`` a tool returned.

    Args:
        model: a chat model (native tool calling or a text format), or a
            ``"provider:model"`` string.
        catalog: the tool catalog.
        config: the shared options; the keyword arguments below override it.
        mode: ``sequential`` or ``parallel_safe``.
        max_iterations: model calls per turn (default 5).
        max_tools: budget for ``request_more_tools``.
        min_per_category: floor of each category's share.
        pinned: tools always visible.
        max_visible: hard cap on visible tools (LRU eviction).
        max_meta_calls: meta-calls allowed per user turn.
        enforce_visibility: refuse calls to loaded-but-invisible tools.
        max_parallel: size of the executor's own thread pool for sync tools
            (default 16): sync calls at once, at most.
        group_limits: concurrency group -> calls at once (e.g. ``{"github": 4}``).
        runtime_mode: ``production`` (published and deprecated tools) or ``debug``
            (drafts too): which tools are bound and run, and which the meta-tools
            list, search and load.
        system_prompt: a string, a ``SystemMessage``, or a callable of the state.
        offload_over_chars: results longer than this many characters are
            stored out of the conversation (default 20,000; ``None`` turns
            offloading off); see ``docs/offloading.md``.
        offload_over_tokens: the same limit in estimated tokens (default: unused).
        wrap_tool_call: hooks around each tool call (LangGraph's shape).
        awrap_tool_call: async hooks around each tool call.
        name: node name.
        tool_call_formats: how tools are shown to the model and its calls read:
            ``{"enabled": [...], "primary": ...}`` with ``native``, ``hermes``,
            ``mistral``, ``pythonic``, ``json`` (see ``docs/formats.md``);
            ``None``: native, else the text format the model's name suggests.
        model_supports_tools: override the check of native tool calling.
        usage: a :class:`~langgraph_toolbudget.nodes.usage.ToolUsage`: each
            regular tool that ran successfully is recorded against the latest
            user message (see :class:`~langgraph_toolbudget.nodes.executor.ToolExecutor`).

    Example:
        ```python
        graph.add_node("agent", ToolAgent(model, catalog, mode="sequential", max_iterations=5))
        ```
    """

    def __init__(
        self,
        model: BaseChatModel | str,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        mode: ExecutionMode | None = None,
        max_iterations: int | None = None,
        max_tools: int | None = None,
        min_per_category: int | None = None,
        pinned: Sequence[str] | None = None,
        max_visible: int | None = None,
        max_meta_calls: int | None = None,
        enforce_visibility: bool | None = None,
        max_parallel: int | None = None,
        group_limits: Mapping[str, int] | None = None,
        runtime_mode: RuntimeMode | None = None,
        offload_over_chars: int | None | Keep = KEEP,
        offload_over_tokens: int | None = None,
        system_prompt: SystemPrompt = None,
        wrap_tool_call: ToolCallWrapper | Sequence[ToolCallWrapper] | None = None,
        awrap_tool_call: AsyncToolCallWrapper | Sequence[AsyncToolCallWrapper] | None = None,
        name: str = "agent",
        tool_call_formats: ToolCallFormatsSpec = None,
        model_supports_tools: bool | None = None,
        usage: ToolUsage | None = None,
    ) -> None:
        super().__init__(name)
        self.config = resolve_config(
            config,
            usage=usage,
            mode=mode,
            max_iterations=max_iterations,
            max_tools=max_tools,
            min_per_category=min_per_category,
            pinned=pinned,
            max_visible=max_visible,
            max_meta_calls=max_meta_calls,
            enforce_visibility=enforce_visibility,
            max_parallel=max_parallel,
            group_limits=group_limits,
            runtime_mode=runtime_mode,
            tool_call_formats=tool_call_formats,
            model_supports_tools=model_supports_tools,
            offload_over_tokens=offload_over_tokens,
        )
        self.config = resolve_offload(self.config, offload_over_chars)
        catalog = catalog.in_runtime_mode(self.config.runtime_mode)
        self.runner = BatchRunner(
            catalog, self.config, wrap_tool_call=wrap_tool_call, awrap_tool_call=awrap_tool_call
        )
        self.caller = ModelCaller(
            model, catalog, system_prompt, self.runner.builtins, self.config, name
        )

    @property
    def max_iterations(self) -> int:
        """Model calls per user turn."""
        return self.config.max_iterations

    @staticmethod
    def _loop_state(
        state: Any, new: list[BaseMessage], working: WorkingSet, extra: dict[str, Any]
    ) -> Any:
        """The state the next iteration sees: the node's input plus what this turn changed."""
        base = dict(state) if isinstance(state, dict) else {}
        merge_update(base, extra)
        messages = [*state_messages(state), *new]
        return {**base, "messages": messages, "selected_tools": list(working.names)}

    @staticmethod
    def _absorb(
        outcome: TurnOutcome, new: list[BaseMessage], commands: list[Command], turn: TurnOutcome
    ) -> None:
        """Add one batch's results to the turn: messages, Commands, discoveries, updates."""
        turn.discovered.extend(outcome.discovered)
        merge_update(turn.update, outcome.update)
        for output in flatten_outputs(outcome.outputs):
            if isinstance(output, ToolMessage):
                new.append(output)
                continue
            update = output.update if isinstance(output.update, dict) else {}
            new.extend(m for m in update.get("messages", []) if isinstance(m, BaseMessage))
            rest = {k: v for k, v in update.items() if k != "messages"}
            if rest or output.goto or output.graph or output.resume is not None:
                commands.append(dataclasses.replace(output, update=rest or None))

    def _finish(
        self,
        new: list[BaseMessage],
        commands: list[Command],
        working: WorkingSet,
        turn: TurnOutcome,
        finished: bool,
    ) -> Any:
        if not finished:
            new.append(AIMessage(ITERATION_LIMIT_MESSAGE.format(n=self.max_iterations)))
        emit_changes(working, self.node_name)
        update = {**turn.update, "messages": new, **working.update()}
        if turn.discovered:
            update["discovered_tools"] = turn.discovered
        return [*commands, update] if commands else update

    def run(self, state: Any, config: RunnableConfig) -> Any:
        working = self.runner.working_set(state)
        new: list[BaseMessage] = []
        commands: list[Command] = []
        turn = TurnOutcome()
        while sum(isinstance(m, AIMessage) for m in new) < self.max_iterations:
            loop_state = self._loop_state(state, new, working, turn.update)
            replies = self.caller.invoke(loop_state, working, config)
            new.extend(replies)
            ai = replies[-1]
            if not ai.tool_calls:
                return self._finish(new, commands, working, turn, True)
            loop_state = self._loop_state(state, new, working, turn.update)
            outcome = self.runner.run(ai.tool_calls, loop_state, config, working)
            if (usage := self.config.usage) is not None:
                names = succeeded_tools(ai.tool_calls, outcome.outputs)
                usage.record_run(latest_user_text(loop_state["messages"]), names, config)
            emit_changes(working, self.node_name)
            self._absorb(outcome, new, commands, turn)
        return self._finish(new, commands, working, turn, False)

    async def arun(self, state: Any, config: RunnableConfig) -> Any:
        working = self.runner.working_set(state)
        new: list[BaseMessage] = []
        commands: list[Command] = []
        turn = TurnOutcome()
        while sum(isinstance(m, AIMessage) for m in new) < self.max_iterations:
            loop_state = self._loop_state(state, new, working, turn.update)
            replies = await self.caller.ainvoke(loop_state, working, config)
            new.extend(replies)
            ai = replies[-1]
            if not ai.tool_calls:
                return self._finish(new, commands, working, turn, True)
            loop_state = self._loop_state(state, new, working, turn.update)
            outcome = await self.runner.arun(ai.tool_calls, loop_state, config, working)
            if (usage := self.config.usage) is not None:
                names = succeeded_tools(ai.tool_calls, outcome.outputs)
                await usage.arecord_run(latest_user_text(loop_state["messages"]), names, config)
            emit_changes(working, self.node_name)
            self._absorb(outcome, new, commands, turn)
        return self._finish(new, commands, working, turn, False)
