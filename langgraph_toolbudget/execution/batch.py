"""One batch of the model's tool calls: meta-calls first, then the regular calls.

Key Components:
    - :class:`BatchRunner`: the execution core shared by ``ToolExecutor`` and
      ``ToolAgent``. Given the model's tool calls and the visible set, it
      answers meta-calls first (in order, bounded per turn), then hands the
      regular calls to the :class:`~langgraph_toolbudget.execution.scheduler.CallScheduler`,
      each run through the :class:`~langgraph_toolbudget.execution.pipeline.ToolCallPipeline`,
      and returns exactly one result per call, in the order of the calls.
    - :func:`meta_calls_this_turn`: the meta-calls of an agent's turn, which bound the
      batch's; :func:`stamped` / :func:`by_author`: which replies of a shared ``messages``
      list an agent made (another agent's do not count against its limits).

What a batch produced (:class:`~langgraph_toolbudget.execution.outcome.TurnOutcome`) and
how a node returns it (:func:`~langgraph_toolbudget.execution.outcome.node_output`) are in
:mod:`~langgraph_toolbudget.execution.outcome`, re-exported here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForToolRun,
    CallbackManager,
    CallbackManagerForToolRun,
)
from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.intent import latest_user_text, starts_turn
from langgraph_toolbudget.core.limits import clip, holds_long_int, safe_repr, too_deep
from langgraph_toolbudget.core.meta import META_TOOL_NAMES
from langgraph_toolbudget.core.working_set import WorkingSet, state_messages
from langgraph_toolbudget.execution.builtin_family import (
    BuiltinContext,
    BuiltinResult,
    BuiltinTools,
    ToolAccess,
    merge_update,
)
from langgraph_toolbudget.execution.builtins import Builtins
from langgraph_toolbudget.execution.errors import HandleToolErrors
from langgraph_toolbudget.execution.offload import Offloader
from langgraph_toolbudget.execution.outcome import TurnOutcome, flatten_outputs, node_output
from langgraph_toolbudget.execution.output_store import app_key
from langgraph_toolbudget.execution.pipeline import (
    AsyncToolCallWrapper,
    CallCheck,
    ToolCallPipeline,
    ToolCallWrapper,
)
from langgraph_toolbudget.execution.policy import LOADERS, VisibilityPolicy
from langgraph_toolbudget.execution.scheduler import CallScheduler

T = TypeVar("T")
logger = logging.getLogger(__name__)

__all__ = [
    "AGENT_KEY",
    "BUILTIN_FAILED_ERROR",
    "META_LIMIT_ERROR",
    "Author",
    "BatchRunner",
    "TurnOutcome",
    "agent_key",
    "agent_path",
    "author_of",
    "by_author",
    "flatten_outputs",
    "meta_calls_this_turn",
    "node_output",
    "stamped",
]

META_LIMIT_ERROR = (
    "Error: meta-tool limit reached ({limit} calls to {names} this turn). "
    "Use the tools you have, or answer the user."
)
BUILTIN_FAILED_ERROR = (
    "Error: {tool} could not answer this call ({error}). Call it again with other "
    "arguments, or go on without it."
)
"""What a built-in call gets when its answer raises (a bug: each family answers bad
arguments itself; the exception is logged), so no exception escapes the batch."""


AGENT_KEY = "toolbudget_agent"
"""The ``response_metadata`` key in which the package's nodes and middleware record the agent
that made a reply (:func:`agent_path`, e.g. ``"weather|agent"``), so that another agent
sharing the ``messages`` does not count it as its own (:func:`by_author`)."""

Author = tuple[str | None, str | None]
"""Who made an AI message, as far as the thread tells (:func:`author_of`): its ``name`` and the
agent recorded under :data:`AGENT_KEY`."""


def agent_key(catalog: ToolCatalog) -> str:
    """A short digest of ``catalog``'s tool names: which agent made a reply, beside its place
    in the graph (:func:`agent_path`); the same tools give the same key in every process."""
    return app_key(catalog.tool_names)[:8]


def agent_path(config: RunnableConfig | None, key: str | None = None) -> str | None:
    """The agent of the node running under ``config``: its place in the graph, the
    ``checkpoint_ns`` without the task ids (``"agent"``; ``"weather|agent"`` in an agent
    compiled as the node ``weather`` of a parent graph), and ``key`` (:func:`agent_key`: two
    agents of other tools run from one node of yours, a graph called inside a node function,
    share a place, not a key) after a ``#``; None outside a graph run. The same for every
    step and every entry of one agent, on any process (the server's workers, a resumed
    run), as long as its tools stay the same: a turn resumed on an app whose agent lists
    other tools (a redeploy, an MCP server back up) counts its model calls and meta-calls
    afresh, at most once more per such change."""
    configurable = (config or {}).get("configurable") or {}
    ns = configurable.get("checkpoint_ns")
    if not isinstance(ns, str):
        return None
    path = "|".join(p.split(":")[0] for p in ns.split("|") if p and not p.isdigit()) or None
    return path if path is None or key is None else f"{path}#{key}"


def stamped(message: T, agent: str | None) -> T:
    """``message`` (an AI message) with ``agent`` recorded under :data:`AGENT_KEY` (a copy;
    the message itself when there is no agent or nothing to record)."""
    if agent is None or not isinstance(message, AIMessage):
        return message
    meta = {**message.response_metadata, AGENT_KEY: agent}
    return message.model_copy(update={"response_metadata": meta})


def author_of(message: AIMessage) -> Author:
    """Who made ``message``: its ``name`` (LangGraph's ``create_react_agent``, LangChain's
    ``create_agent`` and the supervisor libraries name a named agent's replies; the package's
    nodes never name theirs) and the agent recorded under :data:`AGENT_KEY` (None: none)."""
    agent = message.response_metadata.get(AGENT_KEY)
    return message.name, agent if isinstance(agent, str) else None


def by_author(message: AIMessage, author: Author | None) -> bool:
    """Does ``message`` count as a reply of ``author``: made by the same agent, or by one that
    did not record itself (a reply from before the package recorded it, a node of yours) under
    the same name? Every reply does when ``author`` is None. A reply this agent recorded
    counts whatever its name (a model or a wrapper may name replies: they must not escape the
    agent's own limits)."""
    if author is None:
        return True
    name, agent = author_of(message)
    if agent is not None and author[1] is not None:
        # a stamp without a key (the place alone) counts for the agent at that place
        return agent == (author[1] if "#" in agent else author[1].split("#")[0])
    return name == author[0] and agent in (None, author[1])


def meta_calls_this_turn(
    messages: Sequence[Any],
    names: Sequence[str] = META_TOOL_NAMES,
    *,
    author: Author | None = None,
    entry: str | None = None,
) -> int:
    """Meta-calls (calls to ``names``) answered in this agent's turn: since the latest human
    message that starts a turn (:func:`~langgraph_toolbudget.core.intent.starts_turn`), or
    since the message of id ``entry`` when that one comes later (``ToolBudgetMiddleware``
    records the last message when the agent was entered).

    ``author``: the answers of calls made by another agent's replies (:func:`by_author`) are
    left out; those that follow no AI message of the turn count.
    """
    count = answers = 0  # answers: those after the AI message the scan has not reached yet
    for message in reversed(messages):
        if starts_turn(message) or (entry is not None and getattr(message, "id", None) == entry):
            break
        if isinstance(message, ToolMessage) and message.name in names:
            answers += 1
        elif isinstance(message, AIMessage):
            count += answers if by_author(message, author) else 0
            answers = 0
    return count + answers


class BatchRunner:
    """Answers one batch of tool calls: meta-calls, enforcement, the regular calls.

    Args:
        catalog: the tool catalog; the runner uses its view in
            ``config.runtime_mode`` (``catalog.in_runtime_mode``), so drafts run
            only in debug mode.
        config: the shared options (budget, cap, mode, runtime mode, meta-call bound...).
        wrap_tool_call: hooks around each regular call (LangGraph's shape).
        awrap_tool_call: async hooks around each regular call.
        builtins: the built-in families to answer (default: every family of
            :func:`~langgraph_toolbudget.execution.builtins.builtin_families`),
            gated by ``config.enabled_builtins``.
        handle_tool_errors: ``None`` (explained error messages) or one of
            ``ToolNode``'s forms (:class:`~langgraph_toolbudget.execution.errors.ToolErrorPolicy`).
        messages_key: the state key of the messages.
        toolnode_wording: refuse unknown tool names in ``ToolNode``'s words.
        turn_entry: how the agent finds in a state the id of the last message when it was
            entered (``ToolBudgetMiddleware``'s record): ``max_meta_calls`` counts every
            meta-call since. ``None`` (the nodes): those since the turn's user message made by
            the author of the reply being answered, not another agent's
            (:func:`meta_calls_this_turn`).
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        config: BudgetConfig,
        *,
        wrap_tool_call: ToolCallWrapper | Sequence[ToolCallWrapper] | None = None,
        awrap_tool_call: AsyncToolCallWrapper | Sequence[AsyncToolCallWrapper] | None = None,
        builtins: Sequence[BuiltinTools] | None = None,
        handle_tool_errors: HandleToolErrors = None,
        messages_key: str = "messages",
        toolnode_wording: bool = False,
        turn_entry: Callable[[Any], str | None] | None = None,
    ) -> None:
        catalog = catalog.in_runtime_mode(config.runtime_mode)
        self.catalog = catalog
        self.config = config
        self.builtins = Builtins(catalog, config, builtins)
        self._builtin_tools: dict[str, BaseTool] = {t.name: t for t in self.builtins.tools}
        self.meta_names = tuple(n for n in self.builtins.names if self.builtins.counts_as_meta(n))
        self.free = config.free_tools_within_cap(catalog)  # refuses a max_visible below them
        self._cap = config.visible_cap(len(self.free))
        self.messages_key = messages_key
        self.turn_entry = turn_entry
        self.policy = VisibilityPolicy(
            catalog,
            enforce_visibility=config.enforce_visibility,
            toolnode_wording=toolnode_wording,
            loaders=[n for n in LOADERS if n in self.builtins.names],
            includes="include_tool" in self.builtins.names,
        )
        self.pipeline = ToolCallPipeline(
            catalog,
            wrap_tool_call=wrap_tool_call,
            awrap_tool_call=awrap_tool_call,
            max_workers=config.max_parallel,
            handle_tool_errors=handle_tool_errors,
            messages_key=messages_key,
            group_limits=config.group_limits,
            searches="search_tools" in self.builtins.names,
        )
        self.offloader = (
            Offloader(config, self.builtins.names, app=app_key(catalog.tool_names), catalog=catalog)
            if config.offloading
            else None
        )
        self._answer_offloaders: dict[int, Offloader] = {}
        self.scheduler = CallScheduler(
            catalog,
            config.mode,
            max_parallel=config.max_parallel,
            lingering=self.pipeline.lingering,
        )

    def working_set(self, state: Any, context: SessionContext | None = None) -> WorkingSet:
        """The visible set of a state (plus pinned and ``always`` tools), under the cap,
        in the thread's tool context (included tools in, excluded tools out).

        ``context``: the state's tool context, if the caller already read it.
        """
        if context is None:
            context = self.context_of(state)
        return context.working_set(state, self.catalog, self.free, cap=self._cap)

    def loading_closed(self, state: Any) -> bool:
        """Have the meta-calls answered in this turn of ``state`` reached ``max_meta_calls``
        (the meta-tools are refused for the rest of it)?"""
        return self.meta_calls_used(state) >= self.config.max_meta_calls

    def meta_calls_used(self, state: Any) -> int:
        """The meta-calls answered in this agent's turn of ``state`` (:func:`meta_calls_this_turn`):
        since its entry (``turn_entry``), else those of the agent whose reply is answered."""
        messages = state_messages(state, self.messages_key)
        if self.turn_entry is not None:
            entry = self.turn_entry(state)
            return meta_calls_this_turn(messages, self.meta_names, entry=entry)
        reply = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        author = None if reply is None else author_of(reply)
        return meta_calls_this_turn(messages, self.meta_names, author=author)

    @staticmethod
    def context_of(state: Any) -> SessionContext:
        """The state's tool context (``SessionContext.from_state``)."""
        return SessionContext.from_state(state)

    # --- built-in calls -----------------------------------------------------------------------

    def _tool_access(
        self, state: Any, config: RunnableConfig, working: WorkingSet
    ) -> tuple[ToolAccess, list[BuiltinContext]]:
        """How the batch's built-in answers call other tools: the regular calls' check (the
        tools the model was shown, and those loaded since, in the tool context as the
        batch's answers left it), the pipeline, the built-ins."""
        shown = set(working.names)
        holder: list[BuiltinContext] = []  # the context, once made (answers use the same one)

        def check(name: str) -> str | None:
            return self.policy.check(working, shown, holder[0].context)(name)

        def answer(call: ToolCall) -> BuiltinResult:
            run = _start_run(self._builtin_tools[call["name"]], call, config)
            try:
                result = self.builtins.family(call["name"]).handle(
                    self.builtins.coerced(call), holder[0]
                )
            except BaseException as exc:
                run.on_tool_error(exc, tool_call_id=call["id"])
                raise
            run.on_tool_end(_message(call, result), name=call["name"])
            holder[0].follow(result.update)
            return result

        access = ToolAccess(
            check=check,
            run=partial(self.pipeline.run, state=state, config=config, check=check),
            arun=partial(self.pipeline.arun, state=state, config=config, check=check),
            builtins=tuple(self.builtins.tools),
            answer=answer,
            slots=self.scheduler.slots,
            group=self.scheduler.group_of,
        )
        return access, holder

    def _builtin_calls(
        self,
        calls: Sequence[ToolCall],
        state: Any,
        config: RunnableConfig,
        working: WorkingSet,
        context: SessionContext,
        outside_tools: bool = False,
    ) -> tuple[list[tuple[int, ToolCall, BuiltinResult | None, bool]], BuiltinContext, TurnOutcome]:
        """The built-in calls to answer, each with its refusal when it is over the meta-call
        bound (else None) and whether it takes the bound's last meta-call, and the context."""
        messages = state_messages(state, self.messages_key)
        access, holder = self._tool_access(state, config, working)
        query = latest_user_text(messages)
        ctx = BuiltinContext(state, config, working, query, access, context, outside_tools)
        holder.append(ctx)
        outcome = TurnOutcome(context=context)
        used = self.meta_calls_used(state)
        limit = self.config.max_meta_calls
        todo: list[tuple[int, ToolCall, BuiltinResult | None, bool]] = []
        for i, call in enumerate(calls):
            if call["name"] not in self.builtins:
                continue
            if self.builtins.counts_as_meta(call["name"]):
                if used + outcome.meta_calls >= limit:
                    names = "/".join(self.meta_names)
                    refusal = BuiltinResult(META_LIMIT_ERROR.format(limit=limit, names=names), True)
                    todo.append((i, call, refusal, False))
                    continue
                outcome.meta_calls += 1
                todo.append((i, call, None, used + outcome.meta_calls == limit))
                continue
            todo.append((i, call, None, False))
        outcome.loading_closed = used + outcome.meta_calls >= limit
        return todo, ctx, outcome

    @staticmethod
    def _absorb(outcome: TurnOutcome, result: BuiltinResult, ctx: BuiltinContext) -> None:
        """Add an answer to the batch's outcome; the answers after it see its context change."""
        outcome.discovered.extend(result.discovered)
        merge_update(outcome.update, result.update)
        ctx.follow(result.update)
        outcome.context = ctx.context

    def answer_builtins(
        self,
        calls: Sequence[ToolCall],
        state: Any,
        config: RunnableConfig,
        working: WorkingSet,
        *,
        context: SessionContext | None = None,
        outside_tools: bool = False,
    ) -> tuple[dict[int, ToolMessage], TurnOutcome]:
        """Answer the built-in calls among ``calls`` in order, bounded per turn; index -> message.

        ``working`` changes in place; the outcome's ``context`` is the thread's tool context
        as the answers left it. ``context``: the state's, if the caller already read it.
        ``outside_tools``: the agent may have tools outside the catalog
        (:class:`BuiltinContext`). Used by
        ``ToolBudgetMiddleware`` too.
        """
        context = self.context_of(state) if context is None else context
        if not any(call["name"] in self.builtins for call in calls):
            return {}, TurnOutcome(context=context, loading_closed=self.loading_closed(state))
        todo, ctx, outcome = self._builtin_calls(
            calls, state, config, working, context, outside_tools
        )
        answers: dict[int, ToolMessage] = {}
        large: dict[int, int] = {}
        for i, call, refusal, closes in todo:
            ctx.closes_loading = closes
            result, answers[i] = self._answer(call, ctx, config, refusal)
            self._absorb(outcome, result, ctx)
            self._note_large(i, result, large)
        for limit, indexes in _by_limit(large).items():
            offloader, some = self._answer_offloader(limit), {i: answers[i] for i in indexes}
            answers.update(offloader.apply(some, config, outcome.store_failed))
        return answers, outcome

    async def aanswer_builtins(
        self,
        calls: Sequence[ToolCall],
        state: Any,
        config: RunnableConfig,
        working: WorkingSet,
        *,
        context: SessionContext | None = None,
        outside_tools: bool = False,
    ) -> tuple[dict[int, ToolMessage], TurnOutcome]:
        """The async :meth:`answer_builtins`."""
        context = self.context_of(state) if context is None else context
        if not any(call["name"] in self.builtins for call in calls):
            return {}, TurnOutcome(context=context, loading_closed=self.loading_closed(state))
        todo, ctx, outcome = self._builtin_calls(
            calls, state, config, working, context, outside_tools
        )
        answers: dict[int, ToolMessage] = {}
        large: dict[int, int] = {}
        for i, call, refusal, closes in todo:
            ctx.closes_loading = closes
            result, answers[i] = await self._aanswer(call, ctx, config, refusal)
            self._absorb(outcome, result, ctx)
            self._note_large(i, result, large)
        for limit, indexes in _by_limit(large).items():
            offloader, some = self._answer_offloader(limit), {i: answers[i] for i in indexes}
            answers.update(await offloader.aapply(some, config, outcome.store_failed))
        return answers, outcome

    def _answer(
        self,
        call: ToolCall,
        ctx: BuiltinContext,
        config: RunnableConfig,
        refusal: BuiltinResult | None,
    ) -> tuple[BuiltinResult, ToolMessage]:
        """One built-in call's answer (``refusal``, if given) and its tool message, in a tool
        run of its own, as ``ToolNode`` runs a tool: its callbacks, ``astream_events`` and
        ``stream_mode="tools"`` see the call start and end (or fail)."""
        run = _start_run(self._builtin_tools[call["name"]], call, config)
        if refusal is not None:
            result = refusal
        else:
            try:
                result = self.builtins.family(call["name"]).handle(self.builtins.coerced(call), ctx)
            except GraphBubbleUp as exc:  # an interrupt (a program's tool asks a human): the run's
                run.on_tool_error(exc, tool_call_id=call["id"])
                raise
            except Exception as exc:  # noqa: BLE001 - one call's answer, never the batch
                run.on_tool_error(exc, tool_call_id=call["id"])
                result = _failed(call, exc)
                return result, _message(call, result)
            except BaseException as exc:  # KeyboardInterrupt: the run ends, as BaseTool's does
                run.on_tool_error(exc, tool_call_id=call["id"])
                raise
        message = _message(call, result)
        run.on_tool_end(message, name=call["name"])
        return result, message

    async def _aanswer(
        self,
        call: ToolCall,
        ctx: BuiltinContext,
        config: RunnableConfig,
        refusal: BuiltinResult | None,
    ) -> tuple[BuiltinResult, ToolMessage]:
        """The async :meth:`_answer`."""
        run = await _astart_run(self._builtin_tools[call["name"]], call, config)
        if refusal is not None:
            result = refusal
        else:
            try:
                result = await self.builtins.family(call["name"]).ahandle(
                    self.builtins.coerced(call), ctx
                )
            except GraphBubbleUp as exc:
                await run.on_tool_error(exc, tool_call_id=call["id"])
                raise
            except Exception as exc:  # noqa: BLE001 - as in _answer
                await run.on_tool_error(exc, tool_call_id=call["id"])
                result = _failed(call, exc)
                return result, _message(call, result)
            except BaseException as exc:  # a cancelled run (CancelledError): as in _answer
                await run.on_tool_error(exc, tool_call_id=call["id"])
                raise
        message = _message(call, result)
        await run.on_tool_end(message, name=call["name"])
        return result, message

    def _note_large(self, i: int, result: BuiltinResult, large: dict[int, int]) -> None:
        """Note answer ``i`` for offloading when it asks for it and offloading is on."""
        if result.offload_over is not None and self.offloader is not None and not result.error:
            large[i] = min(result.offload_over, self.offloader.limit)

    def _answer_offloader(self, limit: int) -> Offloader:
        """The offloader of built-in answers longer than ``limit`` characters (the regular
        calls' offloader when the limits agree)."""
        if self.offloader is not None and limit == self.offloader.limit:
            return self.offloader
        offloader = self._answer_offloaders.get(limit)
        if offloader is None:
            shared = self.config.override(offload_over_chars=limit, offload_over_tokens=None)
            offloader = self._answer_offloaders[limit] = Offloader(
                shared, self.builtins.names, app=app_key(self.catalog.tool_names)
            )
        return offloader

    # --- a whole batch ----------------------------------------------------------------------

    @staticmethod
    def _shown(calls: Sequence[ToolCall], working: WorkingSet) -> set[str]:
        # Tools the model saw when it made these calls stay callable in this batch, and
        # count as just used, so a meta-call's eviction picks other tools first.
        shown = set(working.names)
        for call in calls:
            if call["name"] in shown:
                working.touch(call["name"])
        return shown

    def _plan(
        self,
        calls: Sequence[ToolCall],
        working: WorkingSet,
        shown: set[str],
        done: dict[int, Any],
        context: SessionContext,
        loading_closed: bool = False,
    ) -> tuple[list[tuple[int, ToolCall]], CallCheck]:
        check = self.policy.check(working, shown, context, loading_closed=loading_closed)
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
        return regular, check

    def run(
        self,
        calls: Sequence[ToolCall],
        state: Any,
        config: RunnableConfig,
        working: WorkingSet,
        *,
        context: SessionContext | None = None,
    ) -> TurnOutcome:
        """Answer a batch of tool calls (sync). ``working`` is updated in place.

        ``context``: the state's tool context, if the caller already read it.
        """
        shown = self._shown(calls, working)
        done, outcome = self.answer_builtins(calls, state, config, working, context=context)
        plan = (calls, working, shown, done, outcome.context, outcome.loading_closed)
        regular, check = self._plan(*plan)
        started = time.monotonic()  # the batch's one deadline: each timeout_s counts from here
        run_one = _on_deadline(self.pipeline.run, started, state=state, config=config, check=check)
        arun_one = _on_deadline(  # the sync hooks, also when calls run on the background loop
            self.pipeline.arun, started, state=state, config=config, check=check, async_hooks=False
        )
        outputs = self.scheduler.run([call for _, call in regular], run_one, arun_one)
        results = dict(zip([i for i, _ in regular], outputs, strict=True))
        if self.offloader is not None:
            results = self.offloader.apply(results, config, outcome.store_failed)
        done.update(results)
        outcome.outputs = [done[i] for i in range(len(calls))]
        return outcome

    async def arun(
        self,
        calls: Sequence[ToolCall],
        state: Any,
        config: RunnableConfig,
        working: WorkingSet,
        *,
        context: SessionContext | None = None,
    ) -> TurnOutcome:
        """Answer a batch of tool calls (async); as :meth:`run`."""
        shown = self._shown(calls, working)
        done, outcome = await self.aanswer_builtins(calls, state, config, working, context=context)
        plan = (calls, working, shown, done, outcome.context, outcome.loading_closed)
        if any(i not in done and c["name"] not in self.catalog for i, c in enumerate(calls)):
            # The closest names to an unknown one: fuzzy matching, bounded, off the event loop.
            regular, check = await self.pipeline.hook_threads.run(self._plan, *plan)
        else:
            regular, check = self._plan(*plan)
        started = time.monotonic()  # the batch's one deadline: each timeout_s counts from here
        arun_one = _on_deadline(
            self.pipeline.arun, started, state=state, config=config, check=check
        )
        outputs = await self.scheduler.arun([call for _, call in regular], arun_one)
        results = dict(zip([i for i, _ in regular], outputs, strict=True))
        if self.offloader is not None:
            results = await self.offloader.aapply(results, config, outcome.store_failed)
        done.update(results)
        outcome.outputs = [done[i] for i in range(len(calls))]
        return outcome


def _on_deadline(
    run: Callable[..., T], started: float, **kwargs: Any
) -> Callable[[ToolCall, float], T]:
    """``run(call, **kwargs)`` for the scheduler, on the batch's deadline (``started``) moved
    on by the time the call waited for other runs' calls of its group: that wait is theirs,
    not the batch's."""
    return lambda call, waited: run(call, started=started + waited, **kwargs)


def _configure(tool: BaseTool, config: RunnableConfig) -> dict[str, Any]:
    """``configure``'s arguments for a tool run of the built-in ``tool``, read from the
    node's ``config`` as ``BaseTool.invoke`` reads them (callbacks, tags, metadata)."""
    return {
        "inheritable_callbacks": config.get("callbacks"),
        "local_callbacks": tool.callbacks,
        "verbose": bool(tool.verbose),
        "inheritable_tags": config.get("tags"),
        "local_tags": tool.tags,
        "inheritable_metadata": config.get("metadata"),
        "local_metadata": tool.metadata,
    }


def _start(tool: BaseTool, call: ToolCall, config: RunnableConfig, seen: bool) -> dict[str, Any]:
    """``on_tool_start``'s arguments for ``call``, as ``BaseTool.run`` gives them; ``seen``:
    a handler reads them (else the arguments are not written out)."""
    args = call.get("args")
    if not seen:
        input_str, inputs = "", None
    elif too_deep(args) or holds_long_int(args):  # str() would recurse or raise: described
        input_str, inputs = safe_repr(args), None
    else:
        input_str, inputs = str(args), args if isinstance(args, dict) else None
    return {
        "serialized": {"name": tool.name, "description": tool.description},
        "input_str": input_str,
        "name": config.get("run_name"),
        "inputs": inputs,
        "tool_call_id": call["id"],
    }


def _start_run(tool: BaseTool, call: ToolCall, config: RunnableConfig) -> CallbackManagerForToolRun:
    """Start the tool run of a built-in call (sync)."""
    manager = CallbackManager.configure(**_configure(tool, config))
    return manager.on_tool_start(**_start(tool, call, config, bool(manager.handlers)))


async def _astart_run(
    tool: BaseTool, call: ToolCall, config: RunnableConfig
) -> AsyncCallbackManagerForToolRun:
    """Start the tool run of a built-in call (async)."""
    manager = AsyncCallbackManager.configure(**_configure(tool, config))
    return await manager.on_tool_start(**_start(tool, call, config, bool(manager.handlers)))


def _by_limit(large: dict[int, int]) -> dict[int, list[int]]:
    """Answer index -> its offload limit, as limit -> the indexes (one offload each)."""
    grouped: dict[int, list[int]] = {}
    for i, limit in large.items():
        grouped.setdefault(limit, []).append(i)
    return grouped


def _failed(call: ToolCall, exc: Exception) -> BuiltinResult:
    """The answer of a built-in call whose family raised: an error, logged."""
    logger.exception("built-in %s raised on a call", call["name"])
    try:
        error = clip(f"{type(exc).__name__}: {exc}")
    except Exception:  # noqa: BLE001 - its text fails too (an int of 5,000 digits in it)
        error = type(exc).__name__
    return BuiltinResult(BUILTIN_FAILED_ERROR.format(tool=call["name"], error=error), error=True)


def _message(call: ToolCall, result: BuiltinResult) -> ToolMessage:
    return ToolMessage(
        result.content,
        name=call["name"],
        tool_call_id=call["id"],
        status="error" if result.error else "success",
        artifact=result.artifact,
    )
