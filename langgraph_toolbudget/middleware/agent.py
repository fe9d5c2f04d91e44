"""``ToolBudgetMiddleware``: the hooks (see the package docstring)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from langgraph_toolbudget.config import BudgetConfig, ExecutionMode, RuntimeMode, resolve_config
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import repair_tool_calls
from langgraph_toolbudget.core.gating import EnabledBuiltins
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.core.working_set import WorkingSet, state_messages
from langgraph_toolbudget.execution.batch import BatchRunner
from langgraph_toolbudget.execution.pipeline import CallCheck
from langgraph_toolbudget.middleware.locks import KeyedLocks, thread_key
from langgraph_toolbudget.middleware.state import (
    ToolBudgetAgentState,
    apply_update,
    batch_of,
    state_delta,
    update_delta,
)
from langgraph_toolbudget.nodes._node import emit_changes
from langgraph_toolbudget.nodes.agent import ITERATION_LIMIT_MESSAGE
from langgraph_toolbudget.nodes.intent import ClassifyIntent
from langgraph_toolbudget.nodes.prompt import ai_calls_this_turn
from langgraph_toolbudget.nodes.retrieval import Retriever
from langgraph_toolbudget.nodes.selection import SelectTools, ToolSearch
from langgraph_toolbudget.nodes.thread_prompt import ThreadPrompt
from langgraph_toolbudget.nodes.usage import ToolUsage, arecord_call, record_call

__all__ = ["ToolBudgetMiddleware"]


def _with_section(system: SystemMessage | None, section: str) -> SystemMessage:
    """The agent's system message (kept first) followed by the tools section."""
    if system is None:
        return SystemMessage(section)
    if isinstance(system.content, str):
        return SystemMessage("\n\n".join(p for p in (system.content, section) if p))
    return SystemMessage([*system.content, {"type": "text", "text": section}])


def _current_config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # outside a graph run (a hook called directly)
        return {}


class ToolBudgetMiddleware(AgentMiddleware[ToolBudgetAgentState, Any, Any]):
    """Agent middleware: a small, relevant tool set per turn, meta-tools, enforcement.

    ``create_agent(model, tools=[], middleware=[ToolBudgetMiddleware(catalog)])``
    runs the same budget as :func:`~langgraph_toolbudget.create_toolbudget_agent`:

    - ``before_model``: at the first model call of each user turn, classifies the
      query, selects tools under the budget and (on the thread's first turn)
      adds the tool search's hits, by running the nodes ``ClassifyIntent``,
      ``SelectTools`` and ``ToolSearch``; the result lands in the state.
    - ``wrap_model_call``: binds the meta-tools and the visible tools, in the
      thread's tool context as ``CallModel`` binds them (``always`` and included
      tools in, ``manual`` ones only once included, excluded ones never; other
      tools of the agent, not in the catalog, stay bound), and appends the
      categories section to the system prompt. After ``max_iterations`` model
      calls in one turn it answers with a final message instead.
    - ``wrap_tool_call``: answers meta-calls and the other enabled built-ins
      such as the tool-context tools (a ``ToolMessage`` plus a ``Command``
      updating the visible set and the thread's context); refuses calls to
      excluded, hidden, filtered, disabled, draft or unknown tools with the
      same errors as ``ToolExecutor``;
      coerces arguments, notes deprecated tools, turns a tool's exception into
      an error message. Tools of the agent that are not in the catalog pass.

    Args:
        catalog: the tool catalog; its tools (in ``runtime_mode``) and the
            meta-tools are registered with the agent.
        config: the shared options; the keyword arguments below override it
            (``None`` keeps the config's value).
        max_tools: the budget (default 8, or the preset of ``model_size``).
        model_size: model name or size for the budget presets.
        min_per_category: floor of each category's share.
        max_categories: categories the classifier returns at most.
        classifier_model: optional chat model for the classification.
        search_limit: tools the automatic tool search adds.
        embeddings: optional LangChain ``Embeddings`` (or a ``HybridScorer``).
        mode: ``parallel_safe`` (the agent's tool node runs a batch's calls
            concurrently) or ``sequential`` (this middleware lets one call run
            at a time).
        pinned: tools always visible.
        max_visible: hard cap on visible tools (LRU eviction).
        max_iterations: model calls per user turn.
        max_meta_calls: meta-calls per user turn.
        enforce_visibility: refuse calls to tools that exist but are not visible.
        runtime_mode: ``production`` or ``debug`` (drafts too).
        enabled_builtins: the built-in tools to enable (see ``BudgetConfig``).
        usage: a :class:`~langgraph_toolbudget.nodes.usage.ToolUsage`: the
            selection ranks with it, and each catalog tool that ran successfully
            is recorded against the latest user message (refused or failed calls
            are not; a run opts out with ``configurable={"toolbudget_record_usage":
            False}``). Off by default.
        retriever: your own tool search for the selection (see ``BudgetConfig``).

    Raises:
        TypeError: an option of the wrong type.
        ValueError: an option out of range; a catalog tool named like a meta-tool.

    Example:
        ```python
        budget = ToolBudgetMiddleware(catalog, max_tools=6, max_visible=12)
        agent = create_agent(model, middleware=[budget], checkpointer=InMemorySaver())
        ```
    """

    state_schema = ToolBudgetAgentState

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        max_tools: int | None = None,
        model_size: str | float | None = None,
        min_per_category: int | None = None,
        max_categories: int | None = None,
        classifier_model: BaseChatModel | str | None = None,
        search_limit: int | None = None,
        embeddings: Embeddings | HybridScorer | None = None,
        mode: ExecutionMode | None = None,
        pinned: Sequence[str] | None = None,
        max_visible: int | None = None,
        max_iterations: int | None = None,
        max_meta_calls: int | None = None,
        enforce_visibility: bool | None = None,
        runtime_mode: RuntimeMode | None = None,
        enabled_builtins: EnabledBuiltins = None,
        usage: ToolUsage | None = None,
        retriever: Retriever | None = None,
    ) -> None:
        super().__init__()
        self.config = shared = resolve_config(
            config,
            max_tools=max_tools,
            model_size=model_size,
            min_per_category=min_per_category,
            max_categories=max_categories,
            search_limit=search_limit,
            embeddings=embeddings,
            mode=mode,
            pinned=pinned,
            max_visible=max_visible,
            max_iterations=max_iterations,
            max_meta_calls=max_meta_calls,
            enforce_visibility=enforce_visibility,
            runtime_mode=runtime_mode,
            enabled_builtins=enabled_builtins,
            usage=usage,
            retriever=retriever,
        )
        # The agent's own tool node runs the calls, so results are not offloaded here:
        # no output tools to bind (see docs/middleware.md).
        shared = dataclasses.replace(shared, offload_over_chars=None, offload_over_tokens=None)
        self.runner = BatchRunner(catalog, shared)
        self.catalog = catalog = self.runner.catalog  # in the runtime mode
        self.selectors = (
            ClassifyIntent(catalog, config=shared, model=classifier_model),
            SelectTools(catalog, config=shared),
            ToolSearch(catalog, config=shared),
        )
        self.thread_prompt = ThreadPrompt(catalog, self.runner.builtins)
        self.builtin_tools = self.thread_prompt.tools
        self.section = self.thread_prompt.section
        self.tools = [*self.builtin_tools, *(spec.tool for spec in catalog.specs)]
        self._ours = frozenset(t.name for t in self.tools)
        self._own_ids = frozenset(id(t) for t in self.tools)
        self._seen: tuple[list[Any], int, list[Any]] | None = None
        self._locks = KeyedLocks()

    # --- the turn's selection ----------------------------------------------------------------

    def _turn_start(self, state: Any) -> dict[str, Any] | None:
        """The state to select from at a turn's first model call, else None."""
        if ai_calls_this_turn(state_messages(state)) > 0:
            return None
        return dict(state)

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """At a user turn's first model call: classify, select, search (the nodes' own code)."""
        start = self._turn_start(state)
        if start is None:
            return None
        config, chosen = _current_config(), start
        for node in self.selectors:
            chosen = apply_update(chosen, node.run(chosen, config))
        return state_delta(start, chosen, ("categories", "category_scores")) or None

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The async :meth:`before_model` (async embeddings and classifier model)."""
        start = self._turn_start(state)
        if start is None:
            return None
        config, chosen = _current_config(), start
        for node in self.selectors:
            chosen = apply_update(chosen, await node.arun(chosen, config))
        return state_delta(start, chosen, ("categories", "category_scores")) or None

    # --- the model call ----------------------------------------------------------------------

    def _limit(self, request: ModelRequest) -> ModelResponse | None:
        n = self.config.max_iterations
        if ai_calls_this_turn(state_messages(request.state)) >= n:
            return ModelResponse(result=[AIMessage(ITERATION_LIMIT_MESSAGE.format(n=n))])
        return None

    def _request(self, request: ModelRequest) -> ModelRequest:
        """Meta-tools + visible tools (+ the agent's other tools), and the tools section.

        The visible set is ``CallModel``'s: the thread's ``SessionContext`` working set.
        """
        visible = self.runner.working_set(request.state).names
        others = self._others(request.tools)
        section, builtins = self.thread_prompt.for_state(request.state)
        tools = [*builtins, *self.catalog.tools(visible), *others]
        return request.override(
            tools=tools, system_message=_with_section(request.system_message, section)
        )

    def _others(self, tools: list[Any]) -> list[Any]:
        """The agent's tools that are not ours (provider tools, other middleware's)."""
        # create_agent hands every call the same list: filter it once, not 5,000 names a call
        seen = self._seen
        if seen is not None and seen[0] is tools and seen[1] == len(tools):
            return seen[2]
        own, ours = self._own_ids, self._ours
        others = [
            t for t in tools if id(t) not in own and (isinstance(t, dict) or t.name not in ours)
        ]
        self._seen = (tools, len(tools), others)
        return others

    @staticmethod
    def _repaired(response: Any) -> Any:
        if isinstance(response, ModelResponse):
            response.result = [
                repair_tool_calls(m) if isinstance(m, AIMessage) else m for m in response.result
            ]
        return response

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        """Bind the meta-tools and the visible tools; add the tools section to the prompt."""
        if (stop := self._limit(request)) is not None:
            return stop
        return self._repaired(handler(self._request(request)))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """The async :meth:`wrap_model_call`."""
        if (stop := self._limit(request)) is not None:
            return stop
        return self._repaired(await handler(self._request(request)))

    # --- the tool calls ----------------------------------------------------------------------

    def _owns(self, request: ToolCallRequest) -> bool:
        """Is this call ours to judge (a catalog tool of any status, or no tool at all)?"""
        name = request.tool_call["name"]
        catalog = self.catalog
        return (
            request.tool is None
            or name in catalog
            or catalog.status(name) is not None
            or catalog.is_filtered(name)
        )

    def _check(self, request: ToolCallRequest) -> CallCheck:
        """The check stage ``ToolExecutor`` gives the call's batch: after its built-in calls,
        refusing tools excluded in the thread's context, hidden, filtered, disabled..."""
        state = request.state
        batch, working = batch_of(state, request.tool_call), self.runner.working_set(state)
        return self.runner.regular_check(batch, state, _current_config(), working)

    async def _acheck(self, request: ToolCallRequest) -> CallCheck:
        """The async :meth:`_check` (built-in answers run off the event loop)."""
        state = request.state
        batch, working = batch_of(state, request.tool_call), self.runner.working_set(state)
        return await self.runner.aregular_check(batch, state, _current_config(), working)

    def _shown(self, batch: list[Any], state: Any) -> WorkingSet:
        """The stored visible set; the tools the model saw when it made ``batch`` count as used."""
        working = self.runner.working_set(state)
        shown = set(working.names)
        for call in batch:
            if call["name"] in shown:
                working.touch(call["name"])
        return working

    def _answer(self, request: ToolCallRequest) -> tuple[list[Any], int, WorkingSet, WorkingSet]:
        """The call's batch, its index there, and two fresh visible sets to replay on."""
        batch = batch_of(request.state, request.tool_call)
        i = next(k for k, c in enumerate(batch) if c.get("id") == request.tool_call.get("id"))
        return batch, i, self._shown(batch, request.state), self._shown(batch, request.state)

    def _builtin_command(
        self, request: ToolCallRequest, i: int, runs: tuple[Any, Any], sets: tuple[Any, Any]
    ) -> Command:
        """A built-in call's answer and its share of the batch's state update.

        The agent's tool node runs each call on its own; replaying the batch's
        earlier built-in calls gives each one the visible set ``BatchRunner``
        would, and the per-call updates, applied in call order, add up to its result.
        """
        (_, before_out), (answers, after_out) = runs
        before, after = sets
        stored = {**request.state, "selected_tools": before.names, "tool_reasons": before.reasons}
        now = {
            "selected_tools": after.names,
            "tool_last_used": after.last_used,
            "tool_reasons": after.reasons,
        }
        update = {**update_delta(before_out.update, after_out.update)}
        update.update(state_delta(stored, now, ()))
        if after_out.discovered:
            update["discovered_tools"] = after_out.discovered
        del after.changes[: len(before.changes)]
        emit_changes(after, self.name)
        return Command(update={"messages": [answers[i]], **update})

    def _builtin(self, request: ToolCallRequest) -> Command:
        batch, i, before, after = self._answer(request)
        state, config = request.state, _current_config()
        first = self.runner.answer_builtins(batch[:i], state, config, before)
        upto = self.runner.answer_builtins(batch[: i + 1], state, config, after)
        return self._builtin_command(request, i, (first, upto), (before, after))

    async def _abuiltin(self, request: ToolCallRequest) -> Command:
        batch, i, before, after = self._answer(request)
        state, config = request.state, _current_config()
        first = await self.runner.aanswer_builtins(batch[:i], state, config, before)
        upto = await self.runner.aanswer_builtins(batch[: i + 1], state, config, after)
        return self._builtin_command(request, i, (first, upto), (before, after))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command],
    ) -> ToolMessage | Command:
        """Answer meta-calls; refuse hidden tools; run the rest through ``handler``."""
        if request.tool_call["name"] in self.runner.builtins:
            return self._builtin(request)
        if not self._owns(request):
            return handler(request)
        check, config = self._check(request), _current_config()
        sequential = self.config.mode == "sequential"
        with self._locks.hold(thread_key(config)) if sequential else contextlib.nullcontext():
            out = self.runner.pipeline.delegate(request, check, handler)
        record_call(self.config.usage, request.state, request.tool_call, out, config)
        return out

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
    ) -> ToolMessage | Command:
        """The async :meth:`wrap_tool_call` (with the tools' ``timeout_s``)."""
        if request.tool_call["name"] in self.runner.builtins:
            return await self._abuiltin(request)
        if not self._owns(request):
            return await handler(request)
        check, config = await self._acheck(request), _current_config()
        sequential = self.config.mode == "sequential"
        lock = self._locks.ahold(thread_key(config)) if sequential else contextlib.nullcontext()
        async with lock:
            out = await self.runner.pipeline.adelegate(request, check, handler)
        await arecord_call(self.config.usage, request.state, request.tool_call, out, config)
        return out
