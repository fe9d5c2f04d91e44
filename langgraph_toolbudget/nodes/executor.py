"""Tool execution: meta-tool interception, enforcement, coercion, sequential or parallel_safe runs.

Key Components:
    - :class:`ToolExecution`: the core shared by :class:`ToolExecutor` and
      ``ToolAgent``. Given the model's tool calls and the visible set, it
      answers meta-calls first (sequentially), then runs the regular calls and
      returns exactly one result per call, in the order of the calls.
    - :class:`ToolExecutor`: a node, a drop-in replacement for LangGraph's
      ``ToolNode`` in a graph-level loop with ``tools_condition``.

Execution modes:
    - ``sequential``: one call after another, in call order.
    - ``parallel_safe``: calls run concurrently where their metadata allows: a
      tool with ``is_pure=False`` never overlaps another call of its
      ``concurrency_group``; a group runs at most ``max_concurrency`` calls at
      once (the smallest value among the group's tools); calls start in call
      order within a group.
    Either way ``timeout_s`` bounds a call: it is cancelled (an async tool) or
    abandoned (a sync tool's thread cannot be killed) and answered with an error.

Tools that use LangGraph injection (``InjectedState``, ``InjectedStore``,
``ToolRuntime``) run through a ``ToolNode``, so they behave exactly as under
it; other tools are invoked directly. Tools may return ``Command``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import msg_content_output
from langgraph.types import Command
from pydantic import PydanticUserError, ValidationError
from rapidfuzz import fuzz, process

from langgraph_toolbudget._runner import run_sync
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import (
    RAW_ARGUMENTS_KEY,
    coerce_args,
    schema_error_message,
    tool_json_schema,
)
from langgraph_toolbudget.core.intent import latest_user_text
from langgraph_toolbudget.core.meta import META_TOOL_NAMES, MetaToolHandler, check_meta_name_clash
from langgraph_toolbudget.core.selection import free_tools
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.nodes._node import BudgetNode, emit_event
from langgraph_toolbudget.state import state_messages

__all__ = ["ExecutionMode", "ToolExecution", "ToolExecutor", "TurnOutcome"]

logger = logging.getLogger(__name__)

ExecutionMode = Literal["sequential", "parallel_safe"]

UNAVAILABLE_TOOL_ERROR = "Error: {tool!r} {problem}. {closest}{how}"
HOW_TO_LOAD = (
    "To load a tool: call add_tool(tool_names=[...]) with its exact name, search_tools(query=...) "
    "to find one, or request_more_tools(categories=[...]) for a whole category."
)
TOOL_ERROR = "Error: tool {tool!r} failed: {error}\nFix the arguments or try another tool."
TIMEOUT_ERROR = (
    "Error: tool {tool!r} timed out after {timeout:g} s and was cancelled. "
    "Try a smaller request, or another tool."
)
RAW_ARGUMENTS_ERROR = (
    "Error: the arguments of your call to {tool!r} are not valid JSON, so it was not run: "
    "{raw}\nExpected arguments (JSON schema): {schema}\nCall it again with a JSON object."
)
META_LIMIT_ERROR = (
    "Error: meta-tool limit reached ({limit} calls to search_tools/add_tool/request_more_tools/"
    "show_all_tools this turn). Use the tools you have, or answer the user."
)


@dataclass
class TurnOutcome:
    """What one batch of tool calls produced.

    Attributes:
        outputs: one entry per call, in call order: a ``ToolMessage``, or a
            ``Command`` returned by a tool.
        added: tools made visible by meta-calls.
        evicted: tools removed from the visible set under the working-set cap.
        discovered: tools found by ``search_tools`` (not visible yet).
        meta_calls: how many meta-calls this batch answered.
    """

    outputs: list[ToolMessage | Command] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)
    meta_calls: int = 0

    @property
    def messages(self) -> list[ToolMessage]:
        """The tool messages, including those carried inside Commands."""
        out: list[ToolMessage] = []
        for item in self.outputs:
            if isinstance(item, ToolMessage):
                out.append(item)
            elif isinstance(item.update, dict):
                out.extend(m for m in item.update.get("messages", []) if isinstance(m, ToolMessage))
        return out


def _async_only(tool: BaseTool) -> bool:
    return isinstance(tool, StructuredTool) and tool.func is None and tool.coroutine is not None


def _has_injected_args(tool: BaseTool) -> bool:
    if isinstance(tool.args_schema, dict) or tool.args_schema is None:
        return False
    # Compare field names, not JSON schemas: an injected ``ToolRuntime`` has no JSON schema.
    declared = getattr(tool.get_input_schema(), "model_fields", None)
    visible = getattr(tool.tool_call_schema, "model_fields", None)
    if not isinstance(declared, dict) or not isinstance(visible, dict):
        return False
    return bool(set(declared) - set(visible))


class _GroupGate:
    """Admission control of one concurrency group (parallel_safe mode)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.running = 0
        self.exclusive = False
        self.next_ticket = 0
        self.cond = asyncio.Condition()

    async def enter(self, ticket: int, pure: bool) -> None:
        async with self.cond:
            await self.cond.wait_for(
                lambda: (
                    ticket == self.next_ticket
                    and not self.exclusive
                    and (self.running < self.limit if pure else self.running == 0)
                )
            )
            self.next_ticket += 1
            self.running += 1
            self.exclusive = not pure
            self.cond.notify_all()

    async def leave(self) -> None:
        async with self.cond:
            self.running -= 1
            self.exclusive = False
            self.cond.notify_all()


class ToolExecution:
    """The execution core: meta-calls, enforcement, coercion, running tools.

    Args:
        catalog: the tool catalog.
        mode: ``sequential`` or ``parallel_safe``.
        max_tools: the budget ``request_more_tools`` loads categories with.
        min_per_category: floor of a category's share in that budget.
        pinned: tools always visible (never evicted).
        max_visible: hard cap on visible tools; adding beyond it evicts the
            least recently used unpinned tools (``None``: no cap).
        max_meta_calls: meta-calls allowed per user turn.
        enforce_visibility: refuse calls to tools that exist but are not visible.
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        mode: ExecutionMode = "parallel_safe",
        max_tools: int = 8,
        min_per_category: int = 2,
        pinned: Sequence[str] = (),
        max_visible: int | None = None,
        max_meta_calls: int = 8,
        enforce_visibility: bool = True,
    ) -> None:
        if mode not in ("sequential", "parallel_safe"):
            raise ValueError(f"mode must be 'sequential' or 'parallel_safe', got {mode!r}")
        if max_visible is not None and max_visible < 1:
            raise ValueError(f"max_visible must be >= 1 or None, got {max_visible}")
        if max_meta_calls < 0:
            raise ValueError(f"max_meta_calls must be >= 0, got {max_meta_calls}")
        check_meta_name_clash(catalog)
        self.catalog = catalog
        self.mode = mode
        self.pinned = free_tools(catalog, pinned)
        self.max_visible = max_visible
        self.max_meta_calls = max_meta_calls
        self.enforce_visibility = enforce_visibility
        self.meta = MetaToolHandler(catalog, max_tools=max_tools, min_per_category=min_per_category)
        self._async_only = {s.name for s in catalog.specs if _async_only(s.tool)}
        # Per tool, on first call: reading schemas up front would cost ~0.4 ms a tool.
        self._injected: dict[str, bool] = {}
        self._tool_nodes: dict[str, ToolNode] = {}
        self._schemas: dict[str, dict[str, Any] | None] = {}
        self._group_limits: dict[str, int] = {}
        for spec in catalog.specs:
            current = self._group_limits.get(spec.concurrency_group, spec.max_concurrency)
            self._group_limits[spec.concurrency_group] = min(current, spec.max_concurrency)

    # --- state ------------------------------------------------------------------------------

    def working_set(self, state: Any) -> WorkingSet:
        """The visible set of a state (plus pinned and ``always`` tools)."""
        return WorkingSet.from_state(
            state, base=self.pinned, pinned=self.pinned, cap=self.max_visible
        )

    @staticmethod
    def meta_calls_this_turn(messages: Sequence[Any]) -> int:
        """Meta-calls answered since the latest human message."""
        count = 0
        for message in reversed(messages):
            if isinstance(message, HumanMessage):
                break
            if isinstance(message, ToolMessage) and message.name in META_TOOL_NAMES:
                count += 1
        return count

    # --- checks -----------------------------------------------------------------------------

    def closest_tools(self, name: str, limit: int = 3) -> list[str]:
        """Real tool names closest to ``name`` (spelling, then meaning)."""
        names = self.catalog.tool_names
        spelled = [
            n
            for n, score, _ in process.extract(name, names, scorer=fuzz.WRatio, limit=limit)
            if score >= 70
        ]
        related = [n for n, _ in self.catalog.index.rank_names(name.replace("_", " "), limit=limit)]
        closest = list(dict.fromkeys([*spelled, *related]))[:limit]
        if not closest:  # nothing close: still name the nearest spellings
            closest = [
                n for n, _, _ in process.extract(name, names, scorer=fuzz.WRatio, limit=limit)
            ]
        return closest

    def unavailable(self, name: str, visible: WorkingSet) -> str | None:
        """Why a call to ``name`` may not run (an error for the model), or None."""
        catalog = self.catalog
        if name in catalog:
            if not self.enforce_visibility or name in visible:
                return None
            return UNAVAILABLE_TOOL_ERROR.format(
                tool=name,
                problem="exists but is not loaded, so it was not run",
                closest="",
                how=f"Load it first with add_tool(tool_names=[{name!r}]), then call it again.",
            )
        if catalog.is_filtered(name):
            problem = "is filtered out by this app's configuration and cannot be used"
        elif catalog.is_disabled(name):
            problem = "is disabled and cannot be used"
        else:
            problem = "is not a tool of this app, so it was not run"
        closest = self.closest_tools(name)
        hint = f"Closest tools: {', '.join(closest)}. " if closest else ""
        return UNAVAILABLE_TOOL_ERROR.format(
            tool=name, problem=problem, closest=hint, how=HOW_TO_LOAD
        )

    # --- meta-calls -------------------------------------------------------------------------

    def handle_meta(
        self,
        calls: Sequence[ToolCall],
        working: WorkingSet,
        *,
        query: str,
        meta_used: int,
        outcome: TurnOutcome,
        source: str,
    ) -> dict[int, ToolMessage]:
        """Answer the meta-calls among ``calls``, in order; returns index -> message."""
        answers: dict[int, ToolMessage] = {}
        for i, call in enumerate(calls):
            if call["name"] not in META_TOOL_NAMES:
                continue
            if meta_used + outcome.meta_calls >= self.max_meta_calls:
                answers[i] = ToolMessage(
                    META_LIMIT_ERROR.format(limit=self.max_meta_calls),
                    name=call["name"],
                    tool_call_id=call["id"],
                    status="error",
                )
                continue
            outcome.meta_calls += 1
            result = self.meta.handle(call["name"], call.get("args", {}), working, query)
            outcome.added.extend(result.added)
            outcome.evicted.extend(result.evicted)
            outcome.discovered.extend(result.discovered)
            if result.added or result.evicted:
                emit_event(
                    {
                        "node": source,
                        "added": result.added,
                        "removed": result.evicted,
                        "reason": call["name"],
                        "args": call.get("args", {}),
                    }
                )
            answers[i] = ToolMessage(
                result.content,
                name=call["name"],
                tool_call_id=call["id"],
                status="error" if result.error else "success",
            )
        return answers

    # --- regular calls ----------------------------------------------------------------------

    def _prepare(self, call: ToolCall) -> tuple[BaseTool, dict[str, Any]] | ToolMessage:
        spec = self.catalog.get(call["name"])
        assert spec is not None  # checked by `unavailable` before
        tool = spec.tool
        args = call.get("args", {})
        if isinstance(args, dict) and RAW_ARGUMENTS_KEY in args:
            return ToolMessage(
                RAW_ARGUMENTS_ERROR.format(
                    tool=tool.name,
                    raw=args[RAW_ARGUMENTS_KEY],
                    schema=json.dumps(self._schema(tool)),
                ),
                name=tool.name,
                tool_call_id=call["id"],
                status="error",
            )
        schema = self._schema(tool)
        return tool, args if schema is None else coerce_args(args, schema)

    def _schema(self, tool: BaseTool) -> dict[str, Any] | None:
        """The tool's argument JSON schema, computed once per tool (None if it has none)."""
        if tool.name not in self._schemas:
            try:
                self._schemas[tool.name] = tool_json_schema(tool)
            except (TypeError, ValueError, PydanticUserError):
                self._schemas[tool.name] = None
        return self._schemas[tool.name]

    def _uses_injection(self, name: str) -> bool:
        """Does the tool take LangGraph-injected arguments (then it runs through a ToolNode)?"""
        if name not in self._injected:
            spec = self.catalog.get(name)
            self._injected[name] = spec is not None and _has_injected_args(spec.tool)
        return self._injected[name]

    def _node(self, name: str) -> ToolNode:
        if name not in self._tool_nodes:
            self._tool_nodes[name] = ToolNode(
                self.catalog.tools([name]), handle_tool_errors=self._error_text
            )
        return self._tool_nodes[name]

    def _error_text(self, error: Exception) -> str:
        return TOOL_ERROR.format(tool="(tool)", error=f"{type(error).__name__}: {error}")

    def _result(
        self, call: ToolCall, tool: BaseTool, args: dict[str, Any], response: Any
    ) -> ToolMessage | Command:
        if isinstance(response, dict) and "messages" in response:  # from the ToolNode
            messages = response["messages"]
            return messages[0] if len(messages) == 1 else Command(update={"messages": messages})
        if isinstance(response, list):  # ToolNode with Commands
            commands = [r for r in response if isinstance(r, Command)]
            if len(commands) == 1 and len(response) == 1:
                return commands[0]
            merged: list[Any] = []
            for r in response:
                merged.extend(
                    r.update.get("messages", [])
                    if isinstance(r, Command)
                    else r.get("messages", [])
                )
            return Command(update={"messages": merged})
        if isinstance(response, Command):
            return response
        if isinstance(response, ToolMessage):
            response.content = msg_content_output(response.content)
            return response
        return ToolMessage(msg_content_output(response), name=tool.name, tool_call_id=call["id"])

    def _failure(self, call: ToolCall, tool: BaseTool, args: Any, error: Exception) -> ToolMessage:
        if isinstance(error, ValidationError):
            content = schema_error_message(tool, error, args)
        elif isinstance(error, (TimeoutError, asyncio.TimeoutError)):
            spec = self.catalog.get(tool.name)
            content = TIMEOUT_ERROR.format(tool=tool.name, timeout=spec.timeout_s if spec else 0)
        else:
            content = TOOL_ERROR.format(tool=tool.name, error=f"{type(error).__name__}: {error}")
        logger.info("tool %s failed: %r", tool.name, error)
        return ToolMessage(content, name=tool.name, tool_call_id=call["id"], status="error")

    def _tool_input(self, call: ToolCall, args: dict[str, Any], state: Any) -> Any:
        if self._uses_injection(call["name"]):
            fixed = {**call, "args": args}
            return {"__type": "tool_call_with_context", "tool_call": fixed, "state": state}
        return {"name": call["name"], "args": args, "id": call["id"], "type": "tool_call"}

    def _run_one_sync(self, call: ToolCall, state: Any, config: RunnableConfig) -> Any:
        prepared = self._prepare(call)
        if isinstance(prepared, ToolMessage):
            return prepared
        tool, args = prepared
        runner = self._node(call["name"]) if self._uses_injection(call["name"]) else tool
        try:
            response = runner.invoke(self._tool_input(call, args, state), config)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - any tool failure becomes a message to the model
            return self._failure(call, tool, args, exc)
        return self._result(call, tool, args, response)

    async def _run_one(self, call: ToolCall, state: Any, config: RunnableConfig) -> Any:
        prepared = self._prepare(call)
        if isinstance(prepared, ToolMessage):
            return prepared
        tool, args = prepared
        runner = self._node(call["name"]) if self._uses_injection(call["name"]) else tool
        spec = self.catalog.get(call["name"])
        timeout = spec.timeout_s if spec else None
        try:
            coro = runner.ainvoke(self._tool_input(call, args, state), config)
            response = await (asyncio.wait_for(coro, timeout) if timeout else coro)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - any tool failure becomes a message to the model
            return self._failure(call, tool, args, exc)
        return self._result(call, tool, args, response)

    async def _run_gated(
        self, call: ToolCall, gate: _GroupGate, ticket: int, state: Any, config: RunnableConfig
    ) -> Any:
        spec = self.catalog.get(call["name"])
        await gate.enter(ticket, pure=bool(spec and spec.is_pure))
        try:
            return await self._run_one(call, state, config)
        finally:
            await gate.leave()

    async def _arun_regular(
        self, calls: list[tuple[int, ToolCall]], state: Any, config: RunnableConfig
    ) -> dict[int, Any]:
        if self._serial(calls):
            return await self._arun_serial(calls, state, config)
        if self._unbounded(calls):  # every call may start at once: no gates needed
            results = await asyncio.gather(*(self._run_one(c, state, config) for _, c in calls))
            return {i: r for (i, _), r in zip(calls, results, strict=True)}
        gates: dict[str, _GroupGate] = {}
        tickets: dict[str, int] = {}
        coros = []
        for _, call in calls:
            spec = self.catalog.get(call["name"])
            group = spec.concurrency_group if spec else "default"
            gate = gates.setdefault(group, _GroupGate(self._group_limits.get(group, 1)))
            ticket = tickets.get(group, 0)
            tickets[group] = ticket + 1
            coros.append(self._run_gated(call, gate, ticket, state, config))
        results = await asyncio.gather(*coros)
        return {i: r for (i, _), r in zip(calls, results, strict=True)}

    async def _arun_serial(
        self, calls: list[tuple[int, ToolCall]], state: Any, config: RunnableConfig
    ) -> dict[int, Any]:
        """Run calls one at a time, in order.

        Consecutive sync tools without a timeout run in one worker-thread trip
        (``BaseTool.ainvoke`` would make one trip per call, as ``ToolNode`` does);
        they run in a thread either way, so the event loop never blocks.
        """
        out: dict[int, Any] = {}
        batch: list[tuple[int, ToolCall]] = []

        def run_batch(items: list[tuple[int, ToolCall]]) -> list[Any]:
            return [self._run_one_sync(c, state, config) for _, c in items]

        async def flush() -> None:
            if batch:
                loop = asyncio.get_running_loop()
                ctx = contextvars.copy_context()
                results = await loop.run_in_executor(None, ctx.run, run_batch, list(batch))
                out.update({i: r for (i, _), r in zip(batch, results, strict=True)})
                batch.clear()

        for i, call in calls:
            if self._sync_fast_path([(i, call)]):
                batch.append((i, call))
                continue
            await flush()
            out[i] = await self._run_one(call, state, config)
        await flush()
        return out

    def _serial(self, calls: list[tuple[int, ToolCall]]) -> bool:
        """True when the calls run one at a time in call order anyway.

        Always in ``sequential`` mode; in ``parallel_safe`` when every call is
        in one concurrency group that admits one call at a time (its limit is
        1, or none of the calls is pure), so the group gates can be skipped.
        """
        if self.mode == "sequential" or len(calls) <= 1:
            return True
        specs = [self.catalog.get(call["name"]) for _, call in calls]
        groups = {spec.concurrency_group if spec else "default" for spec in specs}
        if len(groups) != 1:
            return False
        (group,) = groups
        return self._group_limits.get(group, 1) == 1 or not any(s and s.is_pure for s in specs)

    def _unbounded(self, calls: list[tuple[int, ToolCall]]) -> bool:
        """True when every call is pure and no group has more calls than its limit."""
        per_group: dict[str, int] = {}
        for _, call in calls:
            spec = self.catalog.get(call["name"])
            if spec is None or not spec.is_pure:
                return False
            per_group[spec.concurrency_group] = per_group.get(spec.concurrency_group, 0) + 1
        return all(n <= self._group_limits.get(g, 1) for g, n in per_group.items())

    def _sync_fast_path(self, calls: list[tuple[int, ToolCall]]) -> bool:
        if not self._serial(calls):
            return False
        for _, call in calls:
            spec = self.catalog.get(call["name"])
            if spec is None or spec.timeout_s or call["name"] in self._async_only:
                return False
        return True

    # --- a whole batch ----------------------------------------------------------------------

    def _plan(
        self, calls: Sequence[ToolCall], state: Any, working: WorkingSet, source: str
    ) -> tuple[TurnOutcome, dict[int, Any], list[tuple[int, ToolCall]]]:
        messages = state_messages(state)
        outcome = TurnOutcome()
        # Tools the model saw when it made these calls stay callable in this batch, and
        # count as just used, so a meta-call's eviction picks other tools first.
        shown = set(working.names)
        for call in calls:
            if call["name"] in shown:
                working.touch(call["name"])
        done: dict[int, Any] = dict(
            self.handle_meta(
                calls,
                working,
                query=latest_user_text(messages),
                meta_used=self.meta_calls_this_turn(messages),
                outcome=outcome,
                source=source,
            )
        )
        regular: list[tuple[int, ToolCall]] = []
        for i, call in enumerate(calls):
            if i in done:
                continue
            name = call["name"]
            problem = (
                None if name in shown and name in self.catalog else self.unavailable(name, working)
            )
            if problem is not None:
                done[i] = ToolMessage(
                    problem, name=call["name"], tool_call_id=call["id"], status="error"
                )
                continue
            working.touch(call["name"])
            regular.append((i, call))
        return outcome, done, regular

    async def arun(
        self,
        calls: Sequence[ToolCall],
        state: Any,
        config: RunnableConfig,
        working: WorkingSet,
        *,
        source: str = "tools",
    ) -> TurnOutcome:
        """Answer a batch of tool calls (async). ``working`` is updated in place."""
        outcome, done, regular = self._plan(calls, state, working, source)
        done.update(await self._arun_regular(regular, state, config))
        outcome.outputs = [done[i] for i in range(len(calls))]
        return outcome

    def run(
        self,
        calls: Sequence[ToolCall],
        state: Any,
        config: RunnableConfig,
        working: WorkingSet,
        *,
        source: str = "tools",
    ) -> TurnOutcome:
        """Answer a batch of tool calls (sync). Async-only tools and timeouts work too."""
        outcome, done, regular = self._plan(calls, state, working, source)
        if self._sync_fast_path(regular):
            for i, call in regular:
                done[i] = self._run_one_sync(call, state, config)
        else:
            done.update(run_sync(self._arun_regular(regular, state, config)))
        outcome.outputs = [done[i] for i in range(len(calls))]
        return outcome


def outcome_update(
    outcome: TurnOutcome, working: WorkingSet, before: Sequence[str]
) -> dict[str, Any]:
    """The state update (without messages) for a batch's visible-set changes."""
    update: dict[str, Any] = {}
    diff = working.diff(before)
    if diff["add"] or diff["remove"]:
        update["selected_tools"] = diff
    if outcome.discovered:
        update["discovered_tools"] = outcome.discovered
    update["tool_last_used"] = dict(working.last_used)
    return update


def combine_outputs(outcome: TurnOutcome, update: dict[str, Any]) -> Any:
    """A node return value: one dict, or a list of Commands and dicts when tools returned Commands.

    With Commands, each output becomes its own update, in call order (as ``ToolNode``
    does), so the tool messages stay in the order of the model's calls.
    """
    if not any(isinstance(o, Command) for o in outcome.outputs):
        return {"messages": list(outcome.outputs), **update}
    combined: list[Any] = [
        o if isinstance(o, Command) else {"messages": [o]} for o in outcome.outputs
    ]
    return [*combined, update] if update else combined


class ToolExecutor(BudgetNode):
    """A drop-in replacement for LangGraph's ``ToolNode`` that knows the tool budget.

    Input: a state whose last AI message has tool calls (and ``selected_tools``).
    Output: ``{"messages": [ToolMessage, ...], "selected_tools": {...},
    "discovered_tools": [...], "tool_last_used": {...}}``: one tool message per
    call, in call order; meta-calls change the visible set; calls to tools that
    are unknown, filtered, disabled or not visible are refused with an error
    message naming the closest tools and how to load one.

    Args:
        catalog: the tool catalog.
        mode: ``sequential`` or ``parallel_safe`` (see the module docstring).
        max_tools: budget for ``request_more_tools``.
        min_per_category: floor of each category's share.
        pinned: tools always visible.
        max_visible: hard cap on visible tools (LRU eviction), or None.
        max_meta_calls: meta-calls allowed per user turn.
        enforce_visibility: refuse calls to loaded-but-invisible tools.
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
        mode: ExecutionMode = "parallel_safe",
        max_tools: int = 8,
        min_per_category: int = 2,
        pinned: Sequence[str] = (),
        max_visible: int | None = None,
        max_meta_calls: int = 8,
        enforce_visibility: bool = True,
        name: str = "tools",
    ) -> None:
        super().__init__(name)
        self.execution = ToolExecution(
            catalog,
            mode=mode,
            max_tools=max_tools,
            min_per_category=min_per_category,
            pinned=pinned,
            max_visible=max_visible,
            max_meta_calls=max_meta_calls,
            enforce_visibility=enforce_visibility,
        )

    @staticmethod
    def _calls(state: Any) -> list[ToolCall]:
        for message in reversed(state_messages(state)):
            if isinstance(message, AIMessage):
                return list(message.tool_calls)
        raise ValueError(
            "ToolExecutor found no AI message in the state's messages; route to it only when "
            "the last AI message has tool calls (e.g. with tools_condition)."
        )

    def _begin(self, state: Any) -> tuple[list[ToolCall], WorkingSet, list[str]]:
        working = self.execution.working_set(state)
        before = (
            list(state.get("selected_tools") or [])
            if isinstance(state, dict)
            else list(getattr(state, "selected_tools", None) or [])
        )
        return self._calls(state), working, before

    def run(self, state: Any, config: RunnableConfig) -> Any:
        calls, working, before = self._begin(state)
        outcome = self.execution.run(calls, state, config, working, source=self.name)
        return combine_outputs(outcome, outcome_update(outcome, working, before))

    async def arun(self, state: Any, config: RunnableConfig) -> Any:
        calls, working, before = self._begin(state)
        outcome = await self.execution.arun(calls, state, config, working, source=self.name)
        return combine_outputs(outcome, outcome_update(outcome, working, before))
