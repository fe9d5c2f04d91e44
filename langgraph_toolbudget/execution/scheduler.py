"""The scheduler: in what order, and how concurrently, a batch of tool calls runs.

Key Components:
    - :class:`CallScheduler`: runs the regular (non-meta) calls of a batch in
      one of two modes and returns one result per call, in call order.

The modes (the table with the reasons is in docs/execution.md):
    - ``sequential``: a loop: every call one at a time, in call order.
    - ``parallel_safe``: ``asyncio.gather`` of the calls, each behind its
      concurrency group's gate: pure calls (``is_pure=True``) run side by side,
      up to their group's limit when one was set (``group_limits``, or
      ``max_concurrency`` in tool metadata or ``server_defaults``); impure
      calls run one at a time within their ``concurrency_group`` (or up to the
      group's limit when one was set), never beside a pure call of their group;
      groups run side by side. Within a group, calls start in call order. Sync
      tools run in the pipeline's pool of ``max_parallel`` threads, so at most
      that many run at once.

A batch whose calls would run one at a time anyway (one call, or impure calls
of one group) runs as the loop, under ``invoke`` in the calling thread.
Otherwise a sync ``invoke`` runs the gathered calls on the package's background
event loop (:func:`~langgraph_toolbudget._runner.run_sync`).

The scheduler decides *when* a call runs; *how* one call runs is the
:class:`~langgraph_toolbudget.execution.pipeline.ToolCallPipeline`'s job, handed
in as callables.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

from langchain_core.messages import ToolCall

from langgraph_toolbudget._runner import run_sync
from langgraph_toolbudget.config import ExecutionMode
from langgraph_toolbudget.core.catalog import ToolCatalog

__all__ = ["CallScheduler", "group_limits_of"]

RunOne = Callable[[ToolCall], Any]
ARunOne = Callable[[ToolCall], Awaitable[Any]]

DEFAULT_GROUP = "default"
"""The concurrency group of a call whose tool is unknown."""


class _GroupGate:
    """Admission control of one concurrency group (``parallel_safe``).

    Calls enter in ticket (call) order. A pure call never runs beside an impure
    call of its group, nor an impure call beside a pure one. Pure calls run side
    by side, up to ``limit`` when the group has one; impure calls run one at a
    time, or up to ``limit`` side by side when the group has one. The group's
    abandoned calls that still run (``abandoned()``) count toward ``limit`` too.
    """

    def __init__(self, limit: int | None, abandoned: Callable[[], int]) -> None:
        self.limit = limit
        self.abandoned = abandoned
        self.pure = 0
        self.impure = 0
        self.next_ticket = 0
        self.cond = asyncio.Condition()

    def _admits(self, ticket: int, pure: bool) -> bool:
        if ticket != self.next_ticket or (self.impure if pure else self.pure):
            return False
        running = self.pure if pure else self.impure
        limit = self.limit if pure else (self.limit or 1)
        if limit is None or running == 0:
            # Waiting for abandoned calls alone is the pipeline's (bounded, then refused):
            # the gate waits only for the batch's own calls, which all end.
            return True
        return running + self.abandoned() < limit

    async def enter(self, ticket: int, pure: bool) -> None:
        async with self.cond:
            await self.cond.wait_for(lambda: self._admits(ticket, pure))
            self.next_ticket += 1
            if pure:
                self.pure += 1
            else:
                self.impure += 1
            self.cond.notify_all()

    async def leave(self, pure: bool) -> None:
        async with self.cond:
            if pure:
                self.pure -= 1
            else:
                self.impure -= 1
            self.cond.notify_all()


def group_limits_of(
    catalog: ToolCatalog, overrides: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Group -> calls at once: the smallest ``max_concurrency`` its tools set, unless
    ``overrides`` (the ``group_limits`` option) sets the group's."""
    limits: dict[str, int] = {}
    for spec in catalog.specs:
        if spec.max_concurrency is not None:
            group = spec.concurrency_group
            limits[group] = min(limits.get(group, spec.max_concurrency), spec.max_concurrency)
    limits.update(overrides or {})
    return limits


class CallScheduler:
    """Runs a batch's regular calls in ``sequential`` or ``parallel_safe`` mode.

    Args:
        catalog: the tool catalog (execution metadata of every tool).
        mode: ``sequential`` or ``parallel_safe``.
        max_parallel: sync calls running at once (the pipeline's pool's size); 1
            makes every batch run one call at a time.
        group_limits: group -> calls at once, over the tools' ``max_concurrency``.
        abandoned: group -> its abandoned calls that still run (the pipeline's
            ``LingeringCalls.running``), counted toward its limit.
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        mode: ExecutionMode,
        *,
        max_parallel: int = 16,
        group_limits: Mapping[str, int] | None = None,
        abandoned: Callable[[str], int] | None = None,
    ) -> None:
        self.catalog = catalog
        self.mode = mode
        self.max_parallel = max_parallel
        self.group_limits = group_limits_of(catalog, group_limits)
        self.abandoned = abandoned or (lambda group: 0)

    def run(self, calls: Sequence[ToolCall], run_one: RunOne, arun_one: ARunOne) -> list[Any]:
        """Run the calls from sync code: ``run_one`` in a loop, or ``arun_one`` gathered on
        the background event loop."""
        if self.one_at_a_time(calls):
            return [run_one(call) for call in calls]
        return run_sync(self._gather(calls, arun_one))

    async def arun(self, calls: Sequence[ToolCall], arun_one: ARunOne) -> list[Any]:
        """Run the calls on the running event loop."""
        if self.one_at_a_time(calls):
            return [await arun_one(call) for call in calls]
        return await self._gather(calls, arun_one)

    def one_at_a_time(self, calls: Sequence[ToolCall]) -> bool:
        """True when the calls run one at a time in call order anyway.

        Always in ``sequential`` mode or with ``max_parallel=1``; in
        ``parallel_safe`` when the batch is one call, or every call is to an
        impure tool of one group with no limit set (each such call runs alone),
        or that group's limit is 1.
        """
        if self.mode == "sequential" or len(calls) <= 1 or self.max_parallel == 1:
            return True
        specs = [self.catalog.get(call["name"]) for call in calls]
        groups = {spec.concurrency_group if spec else DEFAULT_GROUP for spec in specs}
        if len(groups) != 1:
            return False
        limit = self.group_limits.get(groups.pop())
        if limit is not None:
            return limit == 1
        return not any(spec is not None and spec.is_pure for spec in specs)

    async def _gather(self, calls: Sequence[ToolCall], arun_one: ARunOne) -> list[Any]:
        """Every call at once, each behind its group's gate with its ticket (its place
        in the group)."""
        gates: dict[str, _GroupGate] = {}
        tickets: dict[str, int] = {}
        gated: list[Awaitable[Any]] = []
        for call in calls:
            spec = self.catalog.get(call["name"])
            group = spec.concurrency_group if spec is not None else DEFAULT_GROUP
            if group not in gates:
                abandoned = partial(self.abandoned, group)
                gates[group] = _GroupGate(self.group_limits.get(group), abandoned)
            ticket = tickets[group] = tickets.get(group, -1) + 1
            pure = spec is not None and spec.is_pure
            gated.append(_behind(gates[group], ticket, pure, arun_one, call))
        return list(await asyncio.gather(*gated))


async def _behind(
    gate: _GroupGate, ticket: int, pure: bool, arun_one: ARunOne, call: ToolCall
) -> Any:
    """``arun_one(call)`` once ``gate`` admits it."""
    await gate.enter(ticket, pure)
    try:
        return await arun_one(call)
    finally:
        await gate.leave(pure)
