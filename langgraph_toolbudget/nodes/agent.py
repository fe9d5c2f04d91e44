"""The agent nodes: call the model with the meta-tools and the visible tools.

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

from langgraph_toolbudget.config import BudgetConfig, ExecutionMode, RuntimeMode, resolve_config
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.selection import free_tools
from langgraph_toolbudget.core.working_set import WorkingSet, state_messages
from langgraph_toolbudget.execution.batch import BatchRunner, TurnOutcome, flatten_outputs
from langgraph_toolbudget.execution.pipeline import AsyncToolCallWrapper, ToolCallWrapper
from langgraph_toolbudget.nodes._node import BudgetNode, emit_changes
from langgraph_toolbudget.nodes.prompt import ModelCaller, SystemPrompt, ai_calls_this_turn

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
        model: a chat model with native tool calling (``bind_tools``), or a
            ``"provider:model"`` string for LangChain's ``init_chat_model``.
        catalog: the tool catalog.
        config: the shared options; the keyword arguments below override it.
        system_prompt: a string, a ``SystemMessage``, or a callable
            ``(state) -> messages`` / ``(state, config) -> messages``.
        pinned: tools always visible.
        max_iterations: model calls allowed per user turn.
        runtime_mode: ``production`` (published and deprecated tools) or ``debug``
            (drafts too): which tools are bound and listed in the prompt.
        name: node name.

    Raises:
        TypeError: ``model`` is not a chat model or a model string.
        ValueError: the model cannot call tools natively.
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
    ) -> None:
        super().__init__(name)
        self.config = resolve_config(
            config, pinned=pinned, max_iterations=max_iterations, runtime_mode=runtime_mode
        )
        catalog = catalog.in_runtime_mode(self.config.runtime_mode)
        self.caller = ModelCaller(model, catalog, system_prompt)
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
        working = WorkingSet.from_state(state, base=self.free, catalog=self.caller.catalog)
        return {"messages": [self.caller.invoke(state, working, config)]}

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        if (stop := self._limit_hit(state_messages(state))) is not None:
            return stop
        working = WorkingSet.from_state(state, base=self.free, catalog=self.caller.catalog)
        return {"messages": [await self.caller.ainvoke(state, working, config)]}


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
        model: a chat model with native tool calling, or a ``"provider:model"`` string.
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
        wrap_tool_call: hooks around each tool call (LangGraph's shape).
        awrap_tool_call: async hooks around each tool call.
        name: node name.

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
        system_prompt: SystemPrompt = None,
        wrap_tool_call: ToolCallWrapper | Sequence[ToolCallWrapper] | None = None,
        awrap_tool_call: AsyncToolCallWrapper | Sequence[AsyncToolCallWrapper] | None = None,
        name: str = "agent",
    ) -> None:
        super().__init__(name)
        self.config = resolve_config(
            config,
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
        )
        catalog = catalog.in_runtime_mode(self.config.runtime_mode)
        self.caller = ModelCaller(model, catalog, system_prompt)
        self.runner = BatchRunner(
            catalog, self.config, wrap_tool_call=wrap_tool_call, awrap_tool_call=awrap_tool_call
        )

    @property
    def max_iterations(self) -> int:
        """Model calls per user turn."""
        return self.config.max_iterations

    @staticmethod
    def _loop_state(state: Any, new: list[BaseMessage], working: WorkingSet) -> Any:
        base = dict(state) if isinstance(state, dict) else {}
        messages = [*state_messages(state), *new]
        return {**base, "messages": messages, "selected_tools": list(working.names)}

    @staticmethod
    def _absorb(outcome: TurnOutcome, new: list[BaseMessage], commands: list[Command]) -> None:
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
        discovered: list[str],
        finished: bool,
    ) -> Any:
        if not finished:
            new.append(AIMessage(ITERATION_LIMIT_MESSAGE.format(n=self.max_iterations)))
        emit_changes(working, self.node_name)
        update = {"messages": new, **working.update()}
        if discovered:
            update["discovered_tools"] = discovered
        return [*commands, update] if commands else update

    def run(self, state: Any, config: RunnableConfig) -> Any:
        working = self.runner.working_set(state)
        new: list[BaseMessage] = []
        commands: list[Command] = []
        discovered: list[str] = []
        for _ in range(self.max_iterations):
            ai = self.caller.invoke(self._loop_state(state, new, working), working, config)
            new.append(ai)
            if not ai.tool_calls:
                return self._finish(new, commands, working, discovered, True)
            loop_state = self._loop_state(state, new, working)
            outcome = self.runner.run(ai.tool_calls, loop_state, config, working)
            emit_changes(working, self.node_name)
            discovered.extend(outcome.discovered)
            self._absorb(outcome, new, commands)
        return self._finish(new, commands, working, discovered, False)

    async def arun(self, state: Any, config: RunnableConfig) -> Any:
        working = self.runner.working_set(state)
        new: list[BaseMessage] = []
        commands: list[Command] = []
        discovered: list[str] = []
        for _ in range(self.max_iterations):
            loop_state = self._loop_state(state, new, working)
            ai = await self.caller.ainvoke(loop_state, working, config)
            new.append(ai)
            if not ai.tool_calls:
                return self._finish(new, commands, working, discovered, True)
            loop_state = self._loop_state(state, new, working)
            outcome = await self.runner.arun(ai.tool_calls, loop_state, config, working)
            emit_changes(working, self.node_name)
            discovered.extend(outcome.discovered)
            self._absorb(outcome, new, commands)
        return self._finish(new, commands, working, discovered, False)
