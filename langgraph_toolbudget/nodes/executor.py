"""The tools node: a drop-in replacement for LangGraph's ``ToolNode`` that knows the budget.

Key Components:
    - :class:`ToolExecutor`: runs the tool calls of the last AI message through
      :class:`~langgraph_toolbudget.execution.batch.BatchRunner` (meta-calls
      first, enforcement, the per-call pipeline, the scheduler) and returns the
      tool messages and the visible-set update.

Typical Usage:
    ```python
    from langgraph.prebuilt import tools_condition
    graph.add_node("tools", ToolExecutor(catalog, config=config))
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    ```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolCall
from langchain_core.runnables import RunnableConfig

from langgraph_toolbudget.config import BudgetConfig, ExecutionMode, RuntimeMode, resolve_config
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import complete_tool_calls
from langgraph_toolbudget.core.working_set import state_messages
from langgraph_toolbudget.execution.batch import BatchRunner, TurnOutcome, node_output
from langgraph_toolbudget.execution.pipeline import AsyncToolCallWrapper, ToolCallWrapper
from langgraph_toolbudget.nodes._node import BudgetNode, emit_changes

__all__ = ["ToolExecutor"]

NO_AI_MESSAGE_ERROR = (
    "ToolExecutor found no AI message in the state's messages; route to it only when "
    "the last AI message has tool calls (e.g. with tools_condition)."
)


class ToolExecutor(BudgetNode):
    """A drop-in replacement for LangGraph's ``ToolNode`` that knows the tool budget.

    Input: a state whose last AI message has tool calls (and ``selected_tools``).
    Output: ``{"messages": [ToolMessage, ...], "selected_tools": {...},
    "discovered_tools": [...], "tool_last_used": {...}}`` (the budget fields
    only when they change): one tool message per call, in call order;
    meta-calls change the visible set; calls to tools that are unknown,
    filtered, disabled, drafts outside debug mode or not visible are refused
    with an error message naming the closest tools and what to do; results of
    deprecated tools carry a note saying so.

    Args:
        catalog: the tool catalog.
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`);
            pass the one ``SelectTools`` got, so ``request_more_tools`` loads
            under the same budget. The keyword arguments below override single
            options; ``None`` keeps the config's value.
        mode: ``sequential`` or ``parallel_safe``.
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
            (drafts too): which tools run and which the meta-tools list, search and load.
        wrap_tool_call: hooks ``(request, execute) -> result`` around each call,
            as ``ToolNode(wrap_tool_call=...)`` (a callable or a list, outermost first).
        awrap_tool_call: async hooks, as ``ToolNode(awrap_tool_call=...)``.
        name: node name.

    Example:
        ```python
        from langgraph.prebuilt import tools_condition
        graph.add_node("tools", ToolExecutor(catalog, mode="parallel_safe"))
        graph.add_conditional_edges("agent", tools_condition)
        graph.add_edge("tools", "agent")
        ```
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        mode: ExecutionMode | None = None,
        max_tools: int | None = None,
        min_per_category: int | None = None,
        pinned: Sequence[str] | None = None,
        max_visible: int | None = None,
        max_meta_calls: int | None = None,
        enforce_visibility: bool | None = None,
        max_parallel: int | None = None,
        group_limits: Mapping[str, int] | None = None,
        runtime_mode: RuntimeMode | None = None,
        wrap_tool_call: ToolCallWrapper | Sequence[ToolCallWrapper] | None = None,
        awrap_tool_call: AsyncToolCallWrapper | Sequence[AsyncToolCallWrapper] | None = None,
        name: str = "tools",
    ) -> None:
        super().__init__(name)
        self.config = resolve_config(
            config,
            mode=mode,
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
        self.runner = BatchRunner(
            catalog, self.config, wrap_tool_call=wrap_tool_call, awrap_tool_call=awrap_tool_call
        )

    @staticmethod
    def _calls(state: Any) -> list[ToolCall]:
        for message in reversed(state_messages(state)):
            if isinstance(message, AIMessage):
                return complete_tool_calls(message.tool_calls)
        raise ValueError(NO_AI_MESSAGE_ERROR)

    def _output(self, outcome: TurnOutcome, working: Any) -> Any:
        emit_changes(working, self.node_name)
        update = working.update()
        if outcome.discovered:
            update["discovered_tools"] = outcome.discovered
        return node_output(outcome.outputs, update)

    def run(self, state: Any, config: RunnableConfig) -> Any:
        working = self.runner.working_set(state)
        outcome = self.runner.run(self._calls(state), state, config, working)
        return self._output(outcome, working)

    async def arun(self, state: Any, config: RunnableConfig) -> Any:
        working = self.runner.working_set(state)
        outcome = await self.runner.arun(self._calls(state), state, config, working)
        return self._output(outcome, working)
