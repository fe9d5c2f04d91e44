"""What a built-in family is: the interface every family of built-in tools implements.

Built-in tools are the tools the executor answers itself instead of running them. A family
(the meta-tools, the tool-context tools, the output tools...) gives their definitions and
their answers; :mod:`langgraph_toolbudget.execution.builtins` registers the families. Its one
reason to change: the contract between a family and the executor (what an answer reads and
gives back).

Key Components:
    - :class:`BuiltinTools`: one family: its tool definitions and its answers.
    - :class:`BuiltinContext` / :class:`BuiltinResult`: what an answer sees and gives.
    - :class:`ToolAccess`: how an answer calls other tools through the executor's own
      checks and group limits (CodeMode's program calls the visible tools with it).
    - :func:`merge_update`: how the answers' state updates merge over a batch.
    - :func:`call_arguments`: a call's arguments, as an object.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from langgraph_toolbudget.core.context import CONTEXT_FIELDS, NO_CONTEXT, SessionContext
from langgraph_toolbudget.core.limits import loads_bounded
from langgraph_toolbudget.core.working_set import WorkingSet

if TYPE_CHECKING:
    from langgraph_toolbudget.execution.scheduler import GroupSlots

__all__ = [
    "BuiltinContext",
    "BuiltinResult",
    "BuiltinTools",
    "ToolAccess",
    "call_arguments",
    "merge_update",
]


@dataclass(frozen=True)
class ToolAccess:
    """How a built-in's answer calls other tools, as the executor would run them.

    Given by the executor to every answer of a batch (``BuiltinContext.tools``): a call
    (:meth:`call`, :meth:`acall`) goes through the same check (hidden, excluded, filtered,
    disabled and unknown tools are refused with the executor's own message), coercion,
    hooks, timeout and normalisation as a call the model made directly, and counts toward
    its concurrency group's limit (``max_concurrency``, ``group_limits``) with every call
    of the executor's runs; its result is not offloaded.

    Attributes:
        check: tool name -> why a call to it may not run (the executor's message), or
            None; the visible set and the tool context it reads are the live ones, so
            a tool an earlier built-in answer loaded is callable and one it excluded
            is refused.
        run: the pipeline's run of one regular call (sync): a ``ToolMessage``, a
            ``Command`` or a list; it takes no place in the call's group, :meth:`call` does.
        arun: the same from async code (on the caller's event loop).
        builtins: the enabled built-in tools, in binding order.
        answer: answer a call to another enabled built-in (sync), on the same context.
        slots: the executor's places in its limited groups (None: no limits).
        group: a call's concurrency group (read when ``slots`` is set).
    """

    check: Callable[[str], str | None]
    run: Callable[[ToolCall], Any]
    arun: Callable[[ToolCall], Coroutine[Any, Any, Any]]
    builtins: tuple[BaseTool, ...] = ()
    answer: Callable[[ToolCall], BuiltinResult] | None = None
    slots: GroupSlots | None = None
    group: Callable[[ToolCall], str] | None = None

    def call(self, tool_call: ToolCall) -> Any:
        """Run one regular call once its group has room in the executor (waits in this
        thread), holding its place while it runs."""
        if self.slots is None or self.group is None:
            return self.run(tool_call)
        with self.slots.held(self.group(tool_call)):
            return self.run(tool_call)

    async def acall(self, tool_call: ToolCall) -> Any:
        """:meth:`call` from async code: the wait for room does not block the event loop."""
        if self.slots is None or self.group is None:
            return await self.arun(tool_call)
        async with self.slots.aheld(self.group(tool_call)):
            return await self.arun(tool_call)


@dataclass
class BuiltinContext:
    """What a built-in's answer may read.

    Attributes:
        state: the graph state the batch runs in (messages, budget fields, ...), as it
            was before the batch.
        config: the run's ``RunnableConfig`` (thread id, store, ...).
        working: the visible set, changed in place by answers that load tools.
        query: the latest user message.
        tools: how the answer may call other tools through the executor (None when
            the caller runs no regular calls, e.g. a family answered on its own).
        context: the thread's tool context with the changes of the batch's earlier
            answers applied (:meth:`follow`); read it, not the context fields of
            ``state``, which miss those changes.
        outside_tools: the agent may have tools outside the catalog (another middleware's,
            under ``ToolBudgetMiddleware``), bound whatever the budget chose.
        closes_loading: the call being answered takes the turn's last meta-call
            (``max_meta_calls``): the meta-tools are refused after it in this turn, so its
            answer must not send the model to another one.
    """

    state: Any
    config: RunnableConfig
    working: WorkingSet
    query: str = ""
    tools: ToolAccess | None = None
    context: SessionContext = NO_CONTEXT
    outside_tools: bool = False
    closes_loading: bool = False

    def follow(self, update: Mapping[str, Any]) -> None:
        """Apply an answer's state update to :attr:`context`, for the answers after it."""
        if any(name in update for name in CONTEXT_FIELDS):
            self.context = self.context.merged(update)

    @property
    def builtin_names(self) -> frozenset[str] | None:
        """The names of the node's enabled built-ins (``tools.builtins``): an answer's advice
        names only these, never one ``enabled_builtins`` turned off. None without ``tools``
        (a family answered on its own): then nothing is known to be off."""
        return None if self.tools is None else frozenset(t.name for t in self.tools.builtins)


@dataclass
class BuiltinResult:
    """A built-in's answer.

    Attributes:
        content: the tool message's content for the model.
        error: whether the tool message has ``status="error"``.
        artifact: the tool message's artifact (data for UIs and tests, not the model).
        update: extra state update (fields other than the budget fields, which
            the working set carries); merged over the batch with :func:`merge_update`.
        discovered: tools found but not made visible (``discovered_tools``).
        offload_over: the executor offloads this answer, as it offloads a large tool
            result, when its content is longer than this many characters (and
            offloading is on); None: never offloaded.
    """

    content: str | list[str | dict[Any, Any]]
    error: bool = False
    artifact: Any = None
    update: dict[str, Any] = field(default_factory=dict)
    discovered: list[str] = field(default_factory=list)
    offload_over: int | None = None


def call_arguments(call: ToolCall) -> dict[str, Any]:
    """A built-in call's arguments, as an object: a text holding a JSON object is read; none
    when they are no object (a list, a number, other text): the answer then names what the
    tool needs."""
    args = call.get("args")
    if isinstance(args, str) and args.strip().startswith("{"):
        try:
            args = loads_bounded(args)
        except ValueError:
            return {}
    return args if isinstance(args, dict) else {}


def merge_update(into: dict[str, Any], update: dict[str, Any]) -> None:
    """Merge one answer's state update into a batch's: lists extend, dicts merge, else replace."""
    for key, value in update.items():
        old = into.get(key)
        if isinstance(old, list) and isinstance(value, list):
            into[key] = [*old, *value]
        elif isinstance(old, dict) and isinstance(value, dict):
            into[key] = {**old, **value}
        else:
            into[key] = value


class BuiltinTools(ABC):
    """A family of built-in tools.

    Subclasses set the class attributes and implement :meth:`definitions` and
    :meth:`handle`; :meth:`ahandle` runs :meth:`handle` in a worker thread
    unless overridden, so a slow answer never blocks the event loop.

    Attributes:
        default_enabled: on when ``enabled_builtins`` does not name the family's tools.
        counts_as_meta: calls count against ``max_meta_calls`` per user turn.
        coerces_args: a call's arguments are repaired against its definition's schema
            before :meth:`handle`, as a catalog tool's are (``"5"`` for an integer, a field
            name in another case, an allowed value spelt another way); False for a family
            that reads them more leniently itself.
    """

    default_enabled: ClassVar[bool] = True
    counts_as_meta: ClassVar[bool] = False
    coerces_args: ClassVar[bool] = True

    @abstractmethod
    def definitions(self) -> list[BaseTool]:
        """The family's tools as the model sees them (their bodies never run)."""

    @abstractmethod
    def handle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        """Answer one call. Bad arguments are answered with ``error=True``, never raised."""

    async def ahandle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        """Answer one call from async code (by default :meth:`handle` in a thread)."""
        return await asyncio.to_thread(self.handle, call, ctx)
