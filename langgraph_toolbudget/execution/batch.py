"""One batch of the model's tool calls: meta-calls first, then the regular calls.

Key Components:
    - :class:`BatchRunner`: the execution core shared by ``ToolExecutor`` and
      ``ToolAgent``. Given the model's tool calls and the visible set, it
      answers meta-calls first (in order, bounded per turn), then hands the
      regular calls to the :class:`~langgraph_toolbudget.execution.scheduler.CallScheduler`,
      each run through the :class:`~langgraph_toolbudget.execution.pipeline.ToolCallPipeline`,
      and returns exactly one result per call, in the order of the calls.
    - :class:`TurnOutcome`: what a batch produced.
    - :func:`node_output`: a node's return value for a batch (tool messages,
      ``Command``s from tools, and the visible-set update).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.intent import latest_user_text
from langgraph_toolbudget.core.meta import META_TOOL_NAMES, MetaToolHandler, check_meta_name_clash
from langgraph_toolbudget.core.selection import free_tools
from langgraph_toolbudget.core.working_set import WorkingSet, state_messages
from langgraph_toolbudget.execution.pipeline import (
    AsyncToolCallWrapper,
    CallCheck,
    ToolCallPipeline,
    ToolCallWrapper,
)
from langgraph_toolbudget.execution.policy import VisibilityPolicy
from langgraph_toolbudget.execution.scheduler import CallScheduler

__all__ = [
    "META_LIMIT_ERROR",
    "BatchRunner",
    "TurnOutcome",
    "flatten_outputs",
    "meta_calls_this_turn",
    "node_output",
]

META_LIMIT_ERROR = (
    "Error: meta-tool limit reached ({limit} calls to search_tools/add_tool/request_more_tools/"
    "show_all_tools this turn). Use the tools you have, or answer the user."
)


@dataclass
class TurnOutcome:
    """What one batch of tool calls produced.

    Attributes:
        outputs: one entry per call, in call order: a ``ToolMessage``, or a
            ``Command`` (or a list of them) returned by a tool.
        discovered: tools found by ``search_tools`` (not visible yet).
        meta_calls: how many meta-calls this batch answered.
    """

    outputs: list[Any] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)
    meta_calls: int = 0

    @property
    def messages(self) -> list[ToolMessage]:
        """The tool messages, including those carried inside Commands."""
        out: list[ToolMessage] = []
        for item in flatten_outputs(self.outputs):
            if isinstance(item, ToolMessage):
                out.append(item)
            elif isinstance(item, Command) and isinstance(item.update, dict):
                out.extend(m for m in item.update.get("messages", []) if isinstance(m, ToolMessage))
        return out


def flatten_outputs(outputs: Sequence[Any]) -> list[Any]:
    """Outputs in call order, with a tool's list of messages/Commands spread out."""
    flat: list[Any] = []
    for output in outputs:
        flat.extend(output if isinstance(output, list) else [output])
    return flat


def meta_calls_this_turn(messages: Sequence[Any]) -> int:
    """Meta-calls answered since the latest human message."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, ToolMessage) and message.name in META_TOOL_NAMES:
            count += 1
    return count


class BatchRunner:
    """Answers one batch of tool calls: meta-calls, enforcement, the regular calls.

    Args:
        catalog: the tool catalog; the runner uses its view in
            ``config.runtime_mode`` (``catalog.in_runtime_mode``), so drafts run
            only in debug mode.
        config: the shared options (budget, cap, mode, runtime mode, meta-call bound...).
        wrap_tool_call: hooks around each regular call (LangGraph's shape).
        awrap_tool_call: async hooks around each regular call.
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        config: BudgetConfig,
        *,
        wrap_tool_call: ToolCallWrapper | Sequence[ToolCallWrapper] | None = None,
        awrap_tool_call: AsyncToolCallWrapper | Sequence[AsyncToolCallWrapper] | None = None,
    ) -> None:
        check_meta_name_clash(catalog)
        catalog = catalog.in_runtime_mode(config.runtime_mode)
        self.catalog = catalog
        self.config = config
        self.free = free_tools(catalog, config.pinned)
        self.meta = MetaToolHandler(
            catalog, max_tools=config.budget, min_per_category=config.min_per_category
        )
        self.policy = VisibilityPolicy(catalog, enforce_visibility=config.enforce_visibility)
        self.pipeline = ToolCallPipeline(
            catalog,
            wrap_tool_call=wrap_tool_call,
            awrap_tool_call=awrap_tool_call,
            max_workers=config.max_parallel,
        )
        self.scheduler = CallScheduler(
            catalog,
            config.mode,
            max_parallel=config.max_parallel,
            group_limits=config.group_limits,
            to_thread=self.pipeline.to_thread,
        )

    def working_set(self, state: Any) -> WorkingSet:
        """The visible set of a state (plus pinned and ``always`` tools), under the cap."""
        return WorkingSet.from_state(
            state,
            base=self.free,
            pinned=self.free,
            cap=self.config.max_visible,
            catalog=self.catalog,
        )

    # --- meta-calls -------------------------------------------------------------------------

    def _answer_meta(
        self, calls: Sequence[ToolCall], working: WorkingSet, messages: Sequence[Any]
    ) -> tuple[dict[int, ToolMessage], TurnOutcome]:
        """Answer the meta-calls among ``calls``, in order; returns index -> message."""
        outcome = TurnOutcome()
        query = latest_user_text(messages)
        used = meta_calls_this_turn(messages)
        limit = self.config.max_meta_calls
        answers: dict[int, ToolMessage] = {}
        for i, call in enumerate(calls):
            if call["name"] not in META_TOOL_NAMES:
                continue
            if used + outcome.meta_calls >= limit:
                content, error = META_LIMIT_ERROR.format(limit=limit), True
            else:
                outcome.meta_calls += 1
                result = self.meta.handle(call["name"], call.get("args", {}), working, query)
                outcome.discovered.extend(result.discovered)
                content, error = result.content, result.error
            answers[i] = ToolMessage(
                content,
                name=call["name"],
                tool_call_id=call["id"],
                status="error" if error else "success",
            )
        return answers, outcome

    # --- a whole batch ----------------------------------------------------------------------

    def _plan(
        self, calls: Sequence[ToolCall], state: Any, working: WorkingSet
    ) -> tuple[TurnOutcome, dict[int, Any], list[tuple[int, ToolCall]], CallCheck]:
        # Tools the model saw when it made these calls stay callable in this batch, and
        # count as just used, so a meta-call's eviction picks other tools first.
        shown = set(working.names)
        for call in calls:
            if call["name"] in shown:
                working.touch(call["name"])
        done, outcome = self._answer_meta(calls, working, state_messages(state))

        def check(name: str) -> str | None:
            if name in shown and name in self.catalog:
                return None
            return self.policy.unavailable(name, working)

        hooked = bool(self.pipeline.wrappers or self.pipeline.awrappers)
        regular: list[tuple[int, ToolCall]] = []
        for i, call in enumerate(calls):
            if i in done:
                continue
            problem = check(call["name"])
            if problem is None:
                working.touch(call["name"])
            elif not hooked:  # hooks may answer a refused call themselves: let them see it
                done[i] = ToolMessage(
                    problem, name=call["name"], tool_call_id=call["id"], status="error"
                )
                continue
            regular.append((i, call))
        return outcome, done, regular, check

    def _runners(
        self, state: Any, config: RunnableConfig, check: CallCheck
    ) -> tuple[Callable[[ToolCall], Any], Callable[[ToolCall], Awaitable[Any]]]:
        """The sync and async ways to run one regular call through the pipeline."""
        pipeline = self.pipeline

        def run_one(call: ToolCall) -> Any:
            return pipeline.run(call, state, config, check)

        async def arun_one(call: ToolCall) -> Any:
            return await pipeline.arun(call, state, config, check)

        return run_one, arun_one

    def run(
        self, calls: Sequence[ToolCall], state: Any, config: RunnableConfig, working: WorkingSet
    ) -> TurnOutcome:
        """Answer a batch of tool calls (sync). ``working`` is updated in place."""
        outcome, done, regular, check = self._plan(calls, state, working)
        done.update(self.scheduler.run(regular, *self._runners(state, config, check)))
        outcome.outputs = [done[i] for i in range(len(calls))]
        return outcome

    async def arun(
        self, calls: Sequence[ToolCall], state: Any, config: RunnableConfig, working: WorkingSet
    ) -> TurnOutcome:
        """Answer a batch of tool calls (async). ``working`` is updated in place."""
        if any(c["name"] in META_TOOL_NAMES or c["name"] not in self.catalog for c in calls):
            # Search and fuzzy matching of unknown names: bounded, but off the event loop.
            planned = await self.pipeline.to_thread(self._plan, calls, state, working)
        else:
            planned = self._plan(calls, state, working)
        outcome, done, regular, check = planned
        run_one, arun_one = self._runners(state, config, check)
        batch_sync = not self.pipeline.awrappers  # async hooks must wrap every call
        done.update(await self.scheduler.arun(regular, run_one, arun_one, batch_sync=batch_sync))
        outcome.outputs = [done[i] for i in range(len(calls))]
        return outcome


def node_output(outputs: Sequence[Any], update: dict[str, Any]) -> Any:
    """A node return value: one dict, or a list of Commands and dicts when tools returned Commands.

    With Commands, each output becomes its own update, in call order (as ``ToolNode``
    does), so the tool messages stay in the order of the model's calls.
    """
    flat = flatten_outputs(outputs)
    if not any(isinstance(o, Command) for o in flat):
        return {"messages": flat, **update}
    combined: list[Any] = [o if isinstance(o, Command) else {"messages": [o]} for o in flat]
    return [*combined, update] if update else combined
