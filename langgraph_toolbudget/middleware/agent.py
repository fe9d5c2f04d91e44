"""``ToolBudgetMiddleware``: the hooks (see the package docstring)."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
import warnings
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Container, Hashable, Iterator
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import INVALID_TOOL_NAME_ERROR_TEMPLATE, ToolCallRequest
from langgraph.types import Command
from typing_extensions import Unpack

from langgraph_toolbudget.config import BudgetConfig, BudgetOptions, check_node_options
from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.core.coercion import distinct_call_ids, repair_tool_calls
from langgraph_toolbudget.core.intent import starts_turn
from langgraph_toolbudget.core.limits import echo
from langgraph_toolbudget.core.working_set import WorkingSet, state_get, state_messages
from langgraph_toolbudget.execution.batch import BatchRunner, TurnOutcome, agent_path, stamped
from langgraph_toolbudget.execution.errors import HandleToolErrors
from langgraph_toolbudget.execution.pipeline import CallCheck
from langgraph_toolbudget.execution.policy import add_note
from langgraph_toolbudget.execution.prepare import NOT_A_TOOL_ERROR, error_message
from langgraph_toolbudget.execution.scheduler import GroupGates
from langgraph_toolbudget.formats import get_format
from langgraph_toolbudget.formats.base import ToolCallFormat
from langgraph_toolbudget.formats.history import parse_error_of
from langgraph_toolbudget.middleware.locks import KeyedLocks, thread_key
from langgraph_toolbudget.middleware.state import STILL_CALLABLE, TURN, ToolBudgetAgentState
from langgraph_toolbudget.nodes._node import emit_changes
from langgraph_toolbudget.nodes.agent import ITERATION_LIMIT_MESSAGE
from langgraph_toolbudget.nodes.choose import ChooseTools
from langgraph_toolbudget.nodes.models import ChatModelSpec, resolve_chat_model
from langgraph_toolbudget.nodes.prompt import ai_calls_this_turn, read_text_reply, with_section
from langgraph_toolbudget.nodes.thread_prompt import ThreadPrompt
from langgraph_toolbudget.nodes.usage import arecord_call, check_usage_catalog, record_call
from langgraph_toolbudget.state import MAX_STEP

__all__ = ["ToolBudgetMiddleware"]

MIDDLEWARE_PROMPT_ERROR = (
    "ToolBudgetMiddleware has no option {name}: the system prompt is create_agent's, "
    "create_agent(model, middleware=[budget], system_prompt=...); the middleware adds the "
    "tool-search guidance to it"
)
NAME_CLASH_WARNING = (
    "ToolBudgetMiddleware: the agent has another tool named {name!r} (other arguments) beside "
    "the budget's own: the budget's is bound, and answers the model's calls of that name. "
    "Rename one of them."
)

NO_TEXT_FORMAT_ERROR = (
    "ToolBudgetMiddleware does not take {option}: create_agent binds the tools to the model "
    "natively (bind_tools) and reads its native tool calls, and the middleware reads no "
    "text tool-call format (only CodeMode's ```python block), so {what}. For a model "
    "without native tool calling, use create_toolbudget_agent(model, catalog, {option}) or "
    "the nodes (add_toolbudget_nodes, CallModel, ToolAgent), which write the tools into the "
    "prompt and read the calls back. With the middleware, {fix}."
)
"""Raised at construction for the options of a text tool-call format, which only the nodes
read (:func:`_refuse_text_formats`)."""
NO_FALLBACK_FORMAT_ERROR = (
    "ToolBudgetMiddleware: tool_call_formats makes CodeMode the primary format, but "
    "python_execution is off (enabled_builtins), so the nodes would fall back to {fallback!r}, "
    "a text tool-call format, which the middleware does not read (create_agent binds the tools "
    "natively): calls written in it would never run. Enable python_execution, or list 'native' "
    "before {fallback!r} in tool_call_formats' enabled formats."
)


def _refuse_text_formats(config: BudgetConfig, codemode: bool) -> None:
    """Raise :data:`NO_TEXT_FORMAT_ERROR` when ``config`` asks for a text tool-call format:
    ``model_supports_tools=False``, or a text format (not native, not CodeMode) as the format
    the nodes would use: ``tool_call_formats``' primary, or, when the primary is CodeMode
    but ``python_execution`` is off (``codemode`` False), the first other enabled format."""
    if config.model_supports_tools is False:
        raise ValueError(
            NO_TEXT_FORMAT_ERROR.format(
                option="model_supports_tools=False",
                what="the model would be bound its tools all the same",
                fix="leave model_supports_tools unset (or True)",
            )
        )
    formats = config.tool_call_formats
    primary = None if formats is None else get_format(formats.primary)
    if formats is not None and primary is not None and primary.binds and not codemode:
        # CodeMode unavailable: the nodes would fall back to the first other enabled format
        others = [get_format(n) for n in formats.enabled if n != formats.primary]
        fallback = next(iter(others), None)
        if fallback is not None and not fallback.native and not fallback.binds:
            raise ValueError(NO_FALLBACK_FORMAT_ERROR.format(fallback=fallback.name))
        return
    if primary is not None and not primary.native and not primary.binds:  # CodeMode binds
        raise ValueError(
            NO_TEXT_FORMAT_ERROR.format(
                option=f"tool_call_formats={{'primary': {primary.name!r}, ...}}",
                what=f"calls written in {primary.name!r} would never run",
                fix="make 'native' or 'codemode' the primary format",
            )
        )


_WORDING = frozenset({"description", "title", "examples"})
_NAMED = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def _arguments(args: Any) -> dict[str, Any]:
    """A tool's arguments (name -> schema) without their wording: what a call must send,
    which a version of the tool keeps."""
    return {name: _shape(schema) for name, schema in dict(args).items()}


def _shape(schema: Any) -> Any:
    """A JSON schema without its wording (descriptions, titles, examples); the names under
    ``properties`` (an argument may be called ``title``) are kept."""
    if isinstance(schema, dict):
        return {
            k: _arguments(v) if k in _NAMED and isinstance(v, dict) else _shape(v)
            for k, v in schema.items()
            if k not in _WORDING
        }
    if isinstance(schema, list):
        return [_shape(v) for v in schema]
    return schema


def _in_call_order(messages: list[Any], builtins: Container[str]) -> list[Any]:
    """``messages`` with the answers of each reply that made built-in calls in the order of
    its calls (the list itself when they already are).

    ``after_model`` answers a reply's built-in calls before the tool node answers the
    others, so the state holds them first; the model is shown them in call order, as
    the nodes store them (some providers pair calls and answers by position).
    """
    out, i, n = messages, 0, len(messages)
    while i < n:
        reply = messages[i]
        i += 1
        calls = reply.tool_calls if isinstance(reply, AIMessage) else ()
        if len(calls) < 2 or not any(c["name"] in builtins for c in calls):
            continue
        end = i
        while end < n and isinstance(messages[end], ToolMessage):
            end += 1
        place = {c.get("id"): k for k, c in enumerate(calls)}
        ranked = sorted(messages[i:end], key=lambda m: place.get(m.tool_call_id, len(place)))
        if any(a is not b for a, b in zip(ranked, messages[i:end], strict=True)):
            out = list(messages) if out is messages else out
            out[i:end] = ranked
        i = end
    return out


def _errors_told(messages: list[Any], fmt: ToolCallFormat) -> list[Any]:
    """``messages`` with the error each rejected reply earned after it (a ```` ```python ````
    block that could not be read), as the nodes show the model its history
    (:func:`~langgraph_toolbudget.formats.history.render_history`); the list itself when
    there is none."""
    if not any(parse_error_of(m) is not None for m in messages):
        return messages
    out: list[Any] = []
    for message in messages:
        out.append(message)
        if (error := parse_error_of(message)) is not None:
            out.append(HumanMessage(fmt.error_message(error)))
    return out


def _codemode_primary(config: BudgetConfig, builtins: Container[str]) -> ToolCallFormat | None:
    """The CodeMode format when it is the primary tool-call format and ``python_execution``
    is enabled (the middleware binds natively otherwise: ``create_agent`` reads native calls)."""
    formats = config.tool_call_formats
    if formats is None:
        return None
    chosen = get_format(formats.primary)
    if chosen.native or not chosen.binds or not all(n in builtins for n in chosen.binds):
        return None
    return chosen


def _current_config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # outside a graph run (a hook called directly)
        return {}


# Typed over AgentState, not ToolBudgetAgentState (its state_schema, which create_agent reads):
# the state parameter is invariant, so a list of middleware mixing ours with LangChain's own
# type-checks only when they all name the same state type.
class ToolBudgetMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Agent middleware: a small, relevant tool set per turn, meta-tools, enforcement.

    ``create_agent(model, tools=[], middleware=[ToolBudgetMiddleware(catalog)])``
    runs the same budget as :func:`~langgraph_toolbudget.create_toolbudget_agent`:

    - ``before_agent``: each time the agent is entered (not on an interrupt's resume),
      records where its turn starts: the user message, or its entry when later (an agent
      entered after a supervisor's or another agent's replies in the same user turn selects
      for the request and counts its own model calls; see docs/middleware.md).
    - ``before_model``: at the first model call of each user turn, classifies the
      query, selects tools under the budget and (on the thread's first turn)
      adds the tool search's hits, by running the nodes ``ClassifyIntent``,
      ``SelectTools`` and ``ToolSearch``; the result lands in the state. At the
      turn's other model calls, it takes out of the state the visible tools the
      catalog no longer lists (the app rebuilt while the turn was paused) or the
      thread's context excludes, with their reasons.
    - ``wrap_model_call``: binds the meta-tools and the visible tools, in the
      thread's tool context as ``CallModel`` binds them (``always`` and included
      tools in, ``manual`` ones only once included, excluded ones never; other
      tools of the agent, not in the catalog, stay bound; of its own, only those
      still in ``request.tools``: a tool a middleware listed before it took out
      stays unbound), and appends the
      categories section to the system prompt; shows the model each reply's
      tool messages in call order. After ``max_iterations`` model calls in one
      turn it answers with a final message instead.
    - ``after_model``: answers the reply's calls to meta-tools and the other
      enabled built-ins, such as the tool-context tools, once and in call order
      (``BatchRunner``'s answers): their tool messages and one update of the
      visible set and the thread's context. ``create_agent`` sends only the
      reply's other calls to its tool node, and goes back to the model when none
      is left.
    - ``wrap_tool_call``: checks each other call against that state, refusing
      excluded, hidden, filtered, disabled, draft or unknown tools with the same
      errors as ``ToolExecutor`` (a tool the model was shown with the reply stays
      callable in it even if a built-in call of the reply evicted it); coerces
      arguments, notes deprecated tools, turns a tool's exception into an error
      message (or raises it: ``handle_tool_errors``); while the state still lists
      visible tools that left (see ``before_model``), the answer takes them out of it
      too (a ``Command``). A catalog tool's call runs in
      its turn, by the executor's concurrency-group rules (``GroupGates``): impure
      calls of a group one at a time in their reply, never beside its pure calls; a group's limit
      (``max_concurrency``, ``group_limits``) shared by every run of this
      middleware. Calls of tools that are not in the catalog pass, unknown names
      included (a middleware listed after this one may supply the tool); one nobody
      supplied gets the executor's unknown-tool error (the closest tools).

    Args:
        catalog: the tool catalog; its tools (in ``runtime_mode``) and the
            meta-tools are registered with the agent.
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`).
        classifier_model: optional chat model for the classification.
        handle_tool_errors: what a catalog tool's exception becomes, as for
            :class:`~langgraph_toolbudget.ToolExecutor`: ``None`` (the default) answers it
            with an explained error message; any of ``ToolNode``'s forms (``False``, an
            exception type, ``TOOLNODE_DEFAULT``...) answers or raises it as ``ToolNode``
            does, so a raised one reaches the middleware listed before this one
            (``ToolRetryMiddleware`` retries it).
        **options: any ``BudgetConfig`` option, over ``config``'s value: the budget
            (``max_tools``, ``model_size``, ``min_per_category``, ...), the selection
            (``max_categories``, ``search_limit``, ``embeddings``, ``retriever``,
            ``usage``), the visible set (``pinned``, ``max_visible``), the loop
            (``max_iterations``, ``max_meta_calls``), enforcement
            (``enforce_visibility``, ``runtime_mode``, ``enabled_builtins``) and the
            calls (``mode``: ``parallel_safe``, where the agent's tool node runs a
            reply's calls concurrently within the group rules above, or
            ``sequential``, one call at a time per thread; ``group_limits``).
            ``max_parallel`` sizes only the pool of the calls the middleware runs
            itself (a CodeMode program's; under ``ainvoke`` a sync tool's with a
            ``timeout_s``, whose thread then counts toward its group until it ends):
            the tool node runs the others in LangGraph's pool, bounded by the run's
            ``max_concurrency``. ``usage``:
            the selection ranks with it, and each catalog tool that ran
            successfully is recorded against the latest user message (a run opts
            out with ``configurable={"toolbudget_record_usage": False}``).

    Raises:
        TypeError: an unknown option (the message names the closest one) or one of the
            wrong type.
        ValueError: an option out of range; a catalog tool named like a meta-tool;
            ``model_supports_tools=False`` or a text format as ``tool_call_formats``' primary
            (``create_agent`` binds the tools natively; for a model without tool calling use
            :func:`~langgraph_toolbudget.create_toolbudget_agent` or the nodes).

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
        classifier_model: ChatModelSpec | None = None,
        handle_tool_errors: HandleToolErrors = None,
        **options: Unpack[BudgetOptions],
    ) -> None:
        super().__init__()
        if prompt := next((k for k in ("system_prompt", "prompt") if k in options), None):
            raise TypeError(MIDDLEWARE_PROMPT_ERROR.format(name=prompt))
        catalog = require_catalog(catalog, "ToolBudgetMiddleware")
        self.config = shared = BudgetConfig.resolve(config, options, owner=ToolBudgetMiddleware)
        check_node_options(ToolBudgetMiddleware, handle_tool_errors=handle_tool_errors)
        if classifier_model is not None:
            what = "ToolBudgetMiddleware: option classifier_model"
            classifier_model = resolve_chat_model(classifier_model, what=what)
        # The agent's own tool node runs the calls, so results are not offloaded here:
        # no output tools to bind (see docs/middleware.md).
        shared = shared.override(offload_over_chars=None, offload_over_tokens=None)
        self.runner = BatchRunner(
            catalog, shared, handle_tool_errors=handle_tool_errors, turn_entry=_entry
        )
        self.catalog = catalog = self.runner.catalog  # in the runtime mode
        check_usage_catalog(shared.usage, catalog, "ToolBudgetMiddleware")
        self.selection = ChooseTools(catalog, config=shared, classifier_model=classifier_model)
        self.thread_prompt = ThreadPrompt(catalog, self.runner.builtins)
        self.codemode = _codemode_primary(shared, self.runner.builtins.names)
        _refuse_text_formats(shared, self.codemode is not None)
        self.builtin_tools = self.thread_prompt.tools
        self.section = self.thread_prompt.section
        self.tools = [*self.builtin_tools, *(spec.tool for spec in catalog.specs)]
        self._ours = frozenset(t.name for t in self.tools)
        self._own_ids = frozenset(id(t) for t in self.tools)
        self._seen: (
            tuple[list[Any], tuple[int, ...], list[Any], frozenset[str] | None, dict[str, Any]]
            | None
        ) = None
        self._by_name = {t.name: t for t in self.tools}
        self._clashes: set[str] = set()
        self._locks = KeyedLocks()
        # The executor's group rules (shared by every run of this instance, and with the
        # tool calls of its CodeMode programs): the tool node runs each call as its own task.
        self._gates = GroupGates(self.runner.scheduler.slots)

    # --- the turn's selection ----------------------------------------------------------------

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record where the agent's turn starts (:data:`TURN`): each time the agent is entered
        (not on an interrupt's resume), its first model call is its turn's first, and
        ``max_iterations`` counts its model calls from here. Under a supervisor (the agent a
        node of a graph sharing ``messages``), an agent entered after others in a user turn
        selects its tools and makes its own model calls, as it would alone."""
        return _entered(state)

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The async :meth:`before_agent`."""
        return _entered(state)

    def _turn_start(self, state: Any) -> dict[str, Any] | None:
        """The state to select from at the first model call of the agent's turn (since the
        turn's user message or, when later, the agent's entry), else None.

        Raises:
            RuntimeError: a built-in call of this turn (or, at a turn's first model call, of
                the turn before) has two answers (see :data:`ANSWERED_TWICE_ERROR`).
        """
        messages = state_messages(state)
        first = _calls_this_turn(state) == 0
        _refuse_two_answers(messages, self.runner.builtins, turns=2 if first else 1)
        return dict(state) if first else None

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """At a user turn's first model call: classify, select, search (the nodes' own code);
        at its other model calls, take out of the state the visible tools that left the
        working set (:meth:`_gone`)."""
        start = self._turn_start(state)
        if start is None:
            return self._gone(state) or None
        return self.selection.run(start, _current_config()) or None

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The async :meth:`before_model` (async embeddings and classifier model)."""
        start = self._turn_start(state)
        if start is None:
            return self._gone(state) or None
        return await self.selection.arun(start, _current_config()) or None

    def _gone(self, state: Any) -> dict[str, Any]:
        """The update taking out of the state the visible tools its working set no longer
        has, with their reasons (a catalog that no longer lists them: the app was rebuilt
        while a turn was paused; a thread's exclusion written between its steps), as the
        nodes' next step writes it; ``{}`` when none left.

        Mid-turn the selection does not run, and only a reply's built-in calls write the
        working set: without this, such tools stayed in ``selected_tools`` and
        ``tool_reasons`` until the next turn (though neither bound nor run).
        """
        update = self.runner.working_set(state).update()
        removed = (update.get("selected_tools") or {}).get("remove")
        reasons = update.get("tool_reasons") or {}
        return update if removed or any(v is None for v in reasons.values()) else {}

    # --- the model call ----------------------------------------------------------------------

    def _limit(self, request: ModelRequest) -> ModelResponse | None:
        n = self.config.max_iterations
        if _calls_this_turn(request.state) >= n:
            final = AIMessage(ITERATION_LIMIT_MESSAGE.format(n=n))
            return ModelResponse(result=[stamped(final, agent_path(_current_config()))])
        return None

    def _request(self, request: ModelRequest) -> ModelRequest:
        """Meta-tools + visible tools (+ the agent's other tools), and the tools section.

        The visible set is ``CallModel``'s: the thread's ``SessionContext`` working set.
        """
        visible = self.runner.working_set(request.state).names
        others, kept, versions = self._split(request.tools)
        section, builtins = self.thread_prompt.for_state(request.state)
        ours = [*builtins, *self.catalog.tools(visible)]
        if kept is not None:  # a middleware listed before this one took some of ours out
            ours = [t for t in ours if t.name in kept]
        if versions:  # ... or rewrote some (ProviderToolSearchMiddleware's deferral): bind theirs
            ours = [versions.get(t.name, t) for t in ours]
        tools = [*ours, *others]
        messages = _in_call_order(request.messages, self.runner.builtins)
        if self.codemode is not None:  # tools as functions in the prompt, python_execution bound
            schemas = [self.thread_prompt.schema(t) for t in ours]
            section += "\n\n" + self.codemode.render_tools(schemas)
            tools = [*(t for t in ours if t.name in self.codemode.binds), *others]
            messages = _errors_told(messages, self.codemode)
        return request.override(
            tools=tools,
            system_message=with_section(
                [request.system_message] if request.system_message else [], section
            ),
            messages=messages,
        )

    def _split(self, tools: list[Any]) -> tuple[list[Any], frozenset[str] | None, dict[str, Any]]:
        """The agent's tools that are not ours (provider tools, other middleware's); the
        names of ours still in ``tools`` (None: all of them; fewer when a middleware listed
        before this one narrowed the request's tools, a restriction kept when binding); and
        the versions of ours such a middleware put in their place (by name: the same
        arguments), bound instead."""
        # create_agent hands every call the same list: split it once, not 5,000 names a call
        # (the items' ids too: a middleware may swap one in place)
        seen, ids = self._seen, tuple(map(id, tools))
        if seen is not None and seen[0] is tools and seen[1] == ids:
            return seen[2], seen[3], seen[4]
        own, ours = self._own_ids, self._ours
        others: list[Any] = []
        kept: set[str] = set()
        versions: dict[str, Any] = {}
        for t in tools:
            if isinstance(t, dict) or (id(t) not in own and t.name not in ours):
                others.append(t)
                continue
            kept.add(t.name)
            if id(t) not in own and self._is_version(t):
                versions[t.name] = t
        narrowed = frozenset(kept) if len(kept) < len(ours) else None
        self._seen = (tools, ids, others, narrowed, versions)
        return others, narrowed, versions

    def _is_version(self, tool: Any) -> bool:
        """Whether ``tool``, named as one of ours, is a version of it (the same arguments:
        another description, provider extras); else another tool under the same name, which
        the model must not be shown in place of the one that answers its calls (warned of)."""
        mine = self._by_name[tool.name]
        try:
            same = _arguments(tool.args) == _arguments(mine.args)
        except Exception:  # noqa: BLE001 - a tool whose schema cannot be read is not ours
            same = False
        if not same and tool.name not in self._clashes:
            self._clashes.add(tool.name)
            warnings.warn(NAME_CLASH_WARNING.format(name=tool.name), UserWarning, stacklevel=2)
        return same

    def _repaired(self, response: Any) -> Any:
        """The reply's calls repaired, with distinct ids; under CodeMode, a reply without
        calls that ends with a ```` ```python ```` block gets it as a ``python_execution``
        call (a fresh id, the block taken out of its text), read as ``CallModel`` reads it
        (:func:`read_text_reply`), so the tool node runs it like a native call. Each reply
        records the agent that made it (:func:`~langgraph_toolbudget.execution.batch.stamped`),
        so the nodes of another agent sharing the messages do not count it as theirs."""
        if isinstance(response, ModelResponse):
            agent = agent_path(_current_config())
            result = [
                stamped(distinct_call_ids(repair_tool_calls(m)), agent)
                if isinstance(m, AIMessage)
                else m
                for m in response.result
            ]
            last = result[-1] if result else None
            if self.codemode is not None and isinstance(last, AIMessage) and not last.tool_calls:
                result[-1] = read_text_reply(last, self.codemode)
            response.result = result
        return response

    def _retry(
        self, request: ModelRequest, response: Any, rejected: list[AIMessage]
    ) -> ModelRequest | None:
        """The request to make again when the reply's ```` ```python ```` block could not be
        read (left open: cut off; empty; too long) and the turn has model calls left, as
        ``CallModel`` asks again: with the rejected replies, each followed by its error (the
        reply is added to ``rejected``); else None."""
        fmt = self.codemode
        last = response.result[-1] if isinstance(response, ModelResponse) else None
        if fmt is None or not isinstance(last, AIMessage) or parse_error_of(last) is None:
            return None
        if _calls_this_turn(request.state) + len(rejected) + 1 >= self.config.max_iterations:
            return None
        rejected.append(last)
        return request.override(messages=[*request.messages, *_errors_told(rejected, fmt)])

    @staticmethod
    def _with_rejected(response: ModelResponse, rejected: list[AIMessage]) -> ModelResponse:
        """``response`` after the replies rejected before it (the state keeps them, as the
        nodes keep theirs: each counts as a model call of the turn)."""
        if rejected:
            response.result = [*rejected, *response.result]
        return response

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        """Bind the meta-tools and the visible tools; add the tools section to the prompt;
        read a CodeMode reply's ```` ```python ```` block as a ``python_execution`` call."""
        if (stop := self._limit(request)) is not None:
            return stop
        request, rejected = self._request(request), list[AIMessage]()
        response = self._repaired(handler(request))
        while (again := self._retry(request, response, rejected)) is not None:
            response = self._repaired(handler(again))
        return self._with_rejected(response, rejected)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """The async :meth:`wrap_model_call`."""
        if (stop := self._limit(request)) is not None:
            return stop
        request, rejected = self._request(request), list[AIMessage]()
        response = self._repaired(await handler(request))
        while (again := self._retry(request, response, rejected)) is not None:
            response = self._repaired(await handler(again))
        return self._with_rejected(response, rejected)

    # --- the built-in calls of a reply: answered once, after the model ------------------------

    def _pending_builtins(self, state: Any) -> tuple[AIMessage, list[ToolCall]] | None:
        """The model's latest reply and its built-in calls no tool message answers yet."""
        messages = state_get(state, "messages") or []
        for at in range(len(messages) - 1, -1, -1):
            if isinstance(messages[at], AIMessage):
                break
        else:
            return None
        reply, builtins = messages[at], self.runner.builtins
        edits = _reviewer_edits(state)
        calls = [c for c in (_edited(c, edits) for c in reply.tool_calls) if c["name"] in builtins]
        if calls and at < len(messages) - 1:  # another after_model answered some (a reviewer)
            answered = {m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ToolMessage)}
            calls = [c for c in calls if c.get("id") not in answered]
        return (reply, calls) if calls else None

    def _shown(self, state: Any, reply: AIMessage) -> tuple[WorkingSet, list[str]]:
        """The visible set the model made ``reply`` with, its names; the tools the reply
        calls count as used, so a built-in call's eviction picks other tools first."""
        working = self.runner.working_set(state)
        shown = list(working.names)
        visible = set(shown)
        for call in reply.tool_calls:
            if call["name"] in visible:
                working.touch(call["name"])
        return working, shown

    def _answered(
        self,
        answers: dict[int, ToolMessage],
        outcome: TurnOutcome,
        working: WorkingSet,
        made_with: tuple[AIMessage, list[str]] | None = None,
    ) -> dict[str, Any]:
        """The update of a reply's answered built-in calls, shaped as ``ToolExecutor``'s:
        their tool messages in call order, the visible set, ``discovered_tools`` and the
        tool-context fields; the visible-set changes are streamed.

        ``made_with``: the reply and the tools it was made with; those its built-in calls
        took out of the visible set stay callable in the rest of the reply.
        """
        if working.changes:
            emit_changes(working, self.name)
        working.discover(outcome.discovered)
        update = {**outcome.update, **working.update()}
        if made_with is not None:
            reply, shown = made_with
            visible = set(working.names)
            update[STILL_CALLABLE] = _reply_note(reply, [n for n in shown if n not in visible])
        update["messages"] = [answers[i] for i in range(len(answers))]
        return update

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Answer the built-in calls of the model's reply, once and in call order.

        ``create_agent`` then sends only the reply's other calls to its tool node (a reply
        of built-in calls alone goes back to the model).
        """
        pending = self._pending_builtins(state)
        if pending is None:
            return {**(_noted(state) or {}), **_counted(state)}
        reply, calls = pending
        working, shown = self._shown(state, reply)
        answers, outcome = self.runner.answer_builtins(
            calls, state, _current_config(), working, outside_tools=True
        )
        answers = _edits_noted(answers, calls, reply)
        return {**self._answered(answers, outcome, working, (reply, shown)), **_counted(state)}

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The async :meth:`after_model` (the answers run off the event loop)."""
        pending = self._pending_builtins(state)
        if pending is None:
            return {**(_noted(state) or {}), **_counted(state)}
        reply, calls = pending
        working, shown = self._shown(state, reply)
        config = _current_config()
        answers, outcome = await self.runner.aanswer_builtins(
            calls, state, config, working, outside_tools=True
        )
        answers = _edits_noted(answers, calls, reply)
        return {**self._answered(answers, outcome, working, (reply, shown)), **_counted(state)}

    # --- the other tool calls: checked, and run each in its turn ------------------------------

    def _reviewed(self, request: ToolCallRequest) -> tuple[ToolCallRequest, str | None]:
        """The call as a reviewer edited it (a batched ``HumanInTheLoopMiddleware`` listed
        after this one swaps its edit in inside this hook, unchecked), with the note for its
        answer; else ``request`` and None.

        The edit, to one of our tools or built-ins, is checked and coerced as the model's
        own call would be, and taken out of the state handed on, so the reviewer does not
        swap its raw arguments back in. An edit to a tool that is not ours (another
        middleware's) makes the call not ours: handed on as the reviewer's, unchecked.
        """
        call = request.tool_call
        edits = _reviewer_edits(request.state)
        edited = _edited(call, edits)
        name = edited["name"]
        if edited is call:
            return request, None
        if not (name in self.runner.builtins or self._owns_name(name)):
            runtime_tools = getattr(request.runtime, "tools", None) or ()
            theirs = next((t for t in runtime_tools if getattr(t, "name", None) == name), None)
            if theirs is None:  # nobody supplies it: the reviewer's own error
                return request, None
            return dataclasses.replace(request, tool_call=edited, tool=theirs), None
        spec = self.catalog.get(name)  # None for a name the check refuses (filtered...)
        tool = None if spec is None else spec.tool
        reviewed = dataclasses.replace(request, tool_call=edited, tool=tool)
        if isinstance(request.state, dict):
            rest = {k: v for k, v in edits.items() if k != call.get("id")}
            reviewed = reviewed.override(state={**request.state, HITL_EDITS: rest})
        return reviewed, _edit_notice(edited)

    def _owns(self, request: ToolCallRequest) -> bool:
        """Is this call ours to judge: a catalog tool in any status (listed, excluded, hidden,
        filtered, disabled, draft...)? Any other name is passed on, so a middleware listed
        after this one may supply its tool (LangChain's tools registered at runtime)."""
        return self._owns_name(request.tool_call["name"])

    def _owns_name(self, name: str) -> bool:
        catalog = self.catalog
        return name in catalog or catalog.status(name) is not None or catalog.is_filtered(name)

    @staticmethod
    def _nobody_supplied(request: ToolCallRequest, out: Any) -> bool:
        """Is ``out`` the tool node's answer to a name no middleware supplied a tool for
        (LangGraph's ``INVALID_TOOL_NAME_ERROR_TEMPLATE``, which lists every registered tool)?"""
        if request.tool is not None or not isinstance(out, ToolMessage) or out.status != "error":
            return False
        before, after = INVALID_TOOL_NAME_ERROR_TEMPLATE.split("{available_tools}")
        content = out.content
        return (
            isinstance(content, str)
            and content.startswith(before.format(requested_tool=request.tool_call["name"]))
            and content.endswith(after)
        )

    def _unknown(self, request: ToolCallRequest) -> ToolMessage:
        """The package's refusal of an unknown name (the closest tools, how to load one)."""
        call = request.tool_call
        refusal = self._check(request.state)(call["name"])
        return error_message(call, refusal or NOT_A_TOOL_ERROR.format(tool=call["name"]))

    def _check(self, state: Any) -> CallCheck:
        """The check ``ToolExecutor`` gives the regular calls of a reply, after its built-in
        calls: refusing tools excluded in the thread's context, hidden (neither visible nor
        shown with the reply), filtered, disabled, drafts, unknown names."""
        runner = self.runner
        context = runner.context_of(state)  # the reply's built-in answers are in the state
        working = runner.working_set(state, context)
        shown = set(working.names)
        shown.update(_still_callable(state))
        closed = runner.loading_closed(state)
        # The tool node checks each call of a reply on its own, in threads of its own: the
        # closest tools are matched for a bounded number of names of the whole reply.
        reply = _latest_reply(state)
        key = None if reply is None or reply.id is None else _batch_key(state, _current_config())
        return runner.policy.check(working, shown, context, loading_closed=closed, reply=key)

    def _builtin(self, request: ToolCallRequest) -> Command:
        """A built-in call that reached the tool node (another middleware added it to the
        reply after :meth:`after_model`): answered on its own, on the stored visible set."""
        state, working = request.state, self.runner.working_set(request.state)
        calls = [request.tool_call]
        answers, outcome = self.runner.answer_builtins(
            calls, state, _current_config(), working, outside_tools=True
        )
        return Command(update=self._answered(answers, outcome, working))

    async def _abuiltin(self, request: ToolCallRequest) -> Command:
        state, working = request.state, self.runner.working_set(request.state)
        calls, config = [request.tool_call], _current_config()
        answers, outcome = await self.runner.aanswer_builtins(
            calls, state, config, working, outside_tools=True
        )
        return Command(update=self._answered(answers, outcome, working))

    @contextlib.contextmanager
    def _turn(self, request: ToolCallRequest, config: RunnableConfig) -> Iterator[None]:
        """The call's turn to run: its thread's lock in ``sequential`` mode, then its group's
        turn in its batch (impure calls one at a time, a limit shared by every run)."""
        spec = self.catalog.get(request.tool_call["name"])
        with contextlib.ExitStack() as stack:
            if self.config.mode == "sequential":
                stack.enter_context(self._locks.hold(thread_key(config)))
            if spec is not None:
                batch = _batch_key(request.state, config)
                stack.enter_context(self._gates.held(batch, spec.concurrency_group, spec.is_pure))
            yield

    @contextlib.asynccontextmanager
    async def _aturn(self, request: ToolCallRequest, config: RunnableConfig) -> AsyncIterator[None]:
        """The async :meth:`_turn` (a cancelled wait takes no turn)."""
        spec = self.catalog.get(request.tool_call["name"])
        async with contextlib.AsyncExitStack() as stack:
            if self.config.mode == "sequential":
                await stack.enter_async_context(self._locks.ahold(thread_key(config)))
            if spec is not None:
                batch = _batch_key(request.state, config)
                group, pure = spec.concurrency_group, spec.is_pure
                await stack.enter_async_context(self._gates.aheld(batch, group, pure))
            yield

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command],
    ) -> ToolMessage | Command:
        """Refuse hidden tools; coerce and run the rest through ``handler``, each in its turn
        (its concurrency group's rules)."""
        request, note = self._reviewed(request)
        out = self._wrapped(request, handler)
        out = out if note is None else add_note(out, request.tool_call.get("id"), note)
        return self._cleaned(request, out)

    def _cleaned(
        self, request: ToolCallRequest, out: ToolMessage | Command
    ) -> ToolMessage | Command:
        """``out`` with :meth:`_gone`'s update when the state lists visible tools that left
        it (a ``ToolMessage`` becomes a ``Command``): a reply resumed on a rebuilt app runs
        its calls before any model call, and the run may end after them (a
        ``return_direct`` tool). A built-in call's answer writes the working set already;
        a ``Command`` to another graph, or with an update that is no mapping, is kept."""
        if request.tool_call["name"] in self.runner.builtins:
            return out
        gone = self._gone(request.state)
        if not gone:
            return out
        if isinstance(out, ToolMessage):
            return Command(update={**gone, "messages": [out]})
        if isinstance(out, Command) and out.graph is None and isinstance(out.update, dict):
            return dataclasses.replace(out, update={**gone, **out.update})
        return out

    def _wrapped(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command],
    ) -> ToolMessage | Command:
        if request.tool_call["name"] in self.runner.builtins:
            return self._builtin(request)
        if not self._owns(request):
            out = handler(request)
            return self._unknown(request) if self._nobody_supplied(request, out) else out
        check, config = self._check(request.state), _current_config()
        with self._turn(request, config):
            out = self.runner.pipeline.delegate(request, check, handler)
        record_call(self.config.usage, request.state, request.tool_call, out, config, self.catalog)
        return out

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
    ) -> ToolMessage | Command:
        """The async :meth:`wrap_tool_call` (with the tools' ``timeout_s``, counted from the
        call's turn; a sync tool's from the start of its thread in the pool)."""
        request, note = self._reviewed(request)
        out = await self._awrapped(request, handler)
        out = out if note is None else add_note(out, request.tool_call.get("id"), note)
        return self._cleaned(request, out)

    async def _awrapped(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
    ) -> ToolMessage | Command:
        if request.tool_call["name"] in self.runner.builtins:
            return await self._abuiltin(request)
        if not self._owns(request):
            out = await handler(request)
            if not self._nobody_supplied(request, out):
                return out
            # the closest names to an unknown one: fuzzy matching, off the event loop
            return await self.runner.pipeline.hook_threads.run(self._unknown, request)
        check, config = self._check(request.state), _current_config()
        async with self._aturn(request, config):
            out = await self.runner.pipeline.adelegate(request, check, handler)
        await arecord_call(
            self.config.usage, request.state, request.tool_call, out, config, self.catalog
        )
        return out


ANSWERED_TWICE_ERROR = (
    "The model's call {tool!r} (id {id!r}) has {count} answers: ToolBudgetMiddleware answered "
    "this built-in call (and applied it) in after_model, then a middleware listed before it in "
    "create_agent(middleware=[...]) answered it again (HumanInTheLoopMiddleware rejecting it, "
    "ToolCallLimitMiddleware(exit_behavior='end'), or another that answers calls in "
    "after_model: create_agent runs after_model hooks from the last middleware to the first). "
    "List that middleware after the budget, e.g. middleware=[budget, review]: it then sees the "
    "built-in calls before they are answered, and its answer is the only one."
)
"""Raised at the next model call (the next turn's first when the run ended): two answers
to one call contradict each other, and providers refuse a thread that holds them."""


def _refuse_two_answers(messages: list[Any], builtins: Container[str], turns: int) -> None:
    """Raise :data:`ANSWERED_TWICE_ERROR` when a built-in call of a reply of the latest
    ``turns`` turns has more tool messages than the reply has calls with its id."""
    answers: Counter[str] = Counter()
    humans = 0
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answers[message.tool_call_id] += 1
            continue
        if isinstance(message, AIMessage) and answers:
            made = Counter(str(c.get("id")) for c in message.tool_calls)
            for c in message.tool_calls:
                call_id = str(c.get("id"))
                if c["name"] in builtins and answers[call_id] > made[call_id]:
                    count = answers[call_id]
                    raise RuntimeError(
                        ANSWERED_TWICE_ERROR.format(tool=c["name"], id=call_id, count=count)
                    )
        elif starts_turn(message):
            humans += 1
            if humans >= turns:
                return
        answers.clear()


HITL_EDITS = "hitl_edited_tool_calls"
"""``HumanInTheLoopMiddleware``'s private field (LangChain >= 1.5, batched reviews): the
reviewer's call (``{"name", "args"}``) for each call id it edited; the reviewer's own
``wrap_tool_call`` swaps it in for the model's call when the call runs."""


def _reviewer_edits(state: Any) -> dict[str, Any]:
    """The reviewer's edits, by call id: of the latest reply's calls when the reviewer is
    listed after the budget (its ``after_model`` runs first and rewrites them, or clears them
    for a reply it does not review). Listed before the budget, it has not reviewed the reply
    yet when the budget's ``after_model`` reads them: they are the earlier reply's (see
    docs/middleware.md)."""
    edits = state_get(state, HITL_EDITS)
    return edits if isinstance(edits, dict) else {}


def _edited(call: ToolCall, edits: dict[str, Any]) -> ToolCall:
    """``call`` with a reviewer's edit of its name and arguments, if there is one (arguments
    that are not a dict, e.g. JSON text, are kept for the checks to read or refuse)."""
    edit = edits.get(call.get("id") or "")
    if not isinstance(edit, dict) or not isinstance(edit.get("name"), str):
        return call
    name, args = edit["name"], {} if edit.get("args") is None else edit["args"]
    if name == call["name"] and args == call.get("args"):
        return call  # approved as it was
    return {**call, "name": name, "args": args}


EDIT_NOTICE = (
    "Note: a human reviewer replaced this call before it ran: the call made was {name} with "
    "arguments {args}, not the call in your message. This was intentional; do not repeat "
    "your call."
)
"""Put after the answer of a call a reviewer edited, which the budget answered or checked
itself (the reviewer's own notice is not added then)."""


def _edit_notice(call: ToolCall) -> str:
    return EDIT_NOTICE.format(name=call["name"], args=echo(call["args"]))


def _edits_noted(
    answers: dict[int, ToolMessage], calls: list[ToolCall], reply: AIMessage
) -> dict[int, ToolMessage]:
    """``answers`` (of ``calls``, in order) with :data:`EDIT_NOTICE` after those of calls a
    reviewer edited (they differ from the reply's call of their id)."""
    made = {c.get("id"): c for c in reply.tool_calls}
    for i, call in enumerate(calls):
        own = made.get(call.get("id"))
        if own is not None and own is not call and i in answers:
            answers[i] = add_note(answers[i], call.get("id"), _edit_notice(call))
    return answers


def _turn_user(messages: list[Any]) -> str | None:
    """The id of the message that started the latest turn (None: there is none, a summary
    replaced it)."""
    return next((m.id for m in reversed(messages) if starts_turn(m)), None)


def _stored_calls(state: Any, user: str | None) -> tuple[str | None, int]:
    """The turn ``after_model`` last counted (:data:`TURN`) and its model calls, when it is
    the turn of ``user`` (or ``user`` is None: a summary replaced the turn's start); else
    ``user``'s turn, with none counted."""
    stored = state_get(state, TURN)
    if not isinstance(stored, dict):
        return user, 0
    # Private, yet a client's update_state may write it: a count that is no integer counts
    # as 0, one past MAX_STEP as MAX_STEP (its +1 still fits every checkpointer's integers).
    stored_user = stored.get("user")
    if user not in (None, stored_user) or not isinstance(stored_user, str | None):
        return user, 0
    calls = stored.get("model_calls")
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 0:
        return stored_user, 0
    return stored_user, min(calls, MAX_STEP)


def _entry(state: Any) -> str | None:
    """The id of the last message when the agent was entered, as ``before_agent`` recorded it
    in :data:`TURN` (None: not recorded, or not a string: a client's ``update_state`` may
    write the field)."""
    stored = state_get(state, TURN)
    entry = stored.get("entry") if isinstance(stored, dict) else None
    return entry if isinstance(entry, str) else None


def _ai_calls(state: Any, messages: list[Any]) -> int:
    """The agent's AI messages of the turn: since its user message or, when later, its entry
    (another agent's replies before it do not count; after it, every reply is this agent's,
    named by ``create_agent`` or not)."""
    return ai_calls_this_turn(messages, entry=_entry(state))


def _calls_this_turn(state: Any) -> int:
    """The model calls of the agent's turn (since its user message or, when later, the agent's
    entry): its AI messages, or the count ``after_model`` kept when larger (a summary replaced
    some of the turn's messages)."""
    messages = state_messages(state)
    _, stored = _stored_calls(state, _turn_user(messages))
    return max(_ai_calls(state, messages), stored)


def _entered(state: Any) -> dict[str, Any]:
    """``before_agent``'s update of :data:`TURN`: the agent's turn starts here, with no model
    call counted, at the last message (LangGraph's ``add_messages`` gave each an id)."""
    messages = state_messages(state)
    last = getattr(messages[-1], "id", None) if messages else None
    entry = last if isinstance(last, str) else None
    return {TURN: {"user": _turn_user(messages), "model_calls": 0, "entry": entry}}


def _counted(state: Any) -> dict[str, Any]:
    """``after_model``'s update of :data:`TURN`: the reply just made counted in its turn."""
    messages = state_messages(state)
    user, stored = _stored_calls(state, _turn_user(messages))
    calls = max(_ai_calls(state, messages), stored + 1)
    return {TURN: {"user": user, "model_calls": calls, "entry": _entry(state)}}


def _latest_reply(state: Any) -> AIMessage | None:
    messages = state_get(state, "messages") or []
    return next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)


def _reply_note(reply: AIMessage, hidden: list[str]) -> dict[str, Any]:
    """What ``after_model`` tells ``wrap_tool_call`` about ``reply`` (:data:`STILL_CALLABLE`):
    the tools it may still call though its built-in calls hid them, and its batch, a key
    made for this reply in this run (two runs' replies may share an id: a model's own
    ids, an LLM cache's replies)."""
    return {"reply": reply.id, "tools": hidden, "batch": uuid.uuid4().hex}


def _noted(state: Any) -> dict[str, Any] | None:
    """The note of the latest reply when it calls tools (``after_model`` of a reply with no
    built-in call to answer), else None."""
    reply = _latest_reply(state)
    if reply is None or not reply.tool_calls:
        return None
    return {STILL_CALLABLE: _reply_note(reply, [])}


def _note_of(state: Any, reply: AIMessage | None) -> dict[str, Any] | None:
    """The note ``after_model`` wrote for ``reply`` (:data:`STILL_CALLABLE`), else None; a
    note that is no mapping (a client's ``update_state`` may write the field) is ignored."""
    note = state_get(state, STILL_CALLABLE)
    if not isinstance(note, dict) or reply is None or note.get("reply") != reply.id:
        return None
    return note


def _batch_key(state: Any, config: RunnableConfig) -> Hashable:
    """The batch a call belongs to: the reply that made it (the latest model reply in the
    state the tool node hands each call), by the key ``after_model`` made for it in this
    run; else by its run's thread and the reply's id."""
    reply = _latest_reply(state)
    note = _note_of(state, reply)
    if note is not None and isinstance(note.get("batch"), str):
        return str(note["batch"])
    return thread_key(config), None if reply is None else reply.id


def _still_callable(state: Any) -> list[str]:
    """Tools the model was shown with its latest reply that the reply's own built-in calls
    took out of the visible set (recorded by ``after_model`` for that reply only)."""
    note = _note_of(state, _latest_reply(state))
    tools = note.get("tools") if note is not None else None
    if isinstance(tools, str) or not isinstance(tools, list | tuple):
        return []
    return [t for t in tools if isinstance(t, str)]
