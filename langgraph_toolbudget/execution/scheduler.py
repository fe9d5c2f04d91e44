"""The scheduler: in what order, and how concurrently, a batch of tool calls runs.

Key Components:
    - :class:`CallScheduler`: runs the regular (non-meta) calls of a batch in
      one of two modes and returns one result per call, keyed by its position:
        - ``sequential``: one call after another, in call order.
        - ``parallel_safe``: calls run concurrently where their metadata
          allows: a tool with ``is_pure=False`` never overlaps another call of
          its ``concurrency_group``; a group runs at most ``max_concurrency``
          calls at once (the smallest value among the group's tools); calls
          start in call order within a group.
    Either way a tool's ``timeout_s`` bounds its call (the pipeline enforces it
    on the async path, so timed calls always take that path).

The scheduler decides *when* a call runs; *how* one call runs is the
:class:`~langgraph_toolbudget.execution.pipeline.ToolCallPipeline`'s job, handed
in as two callables (sync and async).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import ToolCall

from langgraph_toolbudget._runner import run_sync
from langgraph_toolbudget.config import ExecutionMode
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.execution.pipeline import is_async_only

__all__ = ["CallScheduler"]

Job = tuple[int, ToolCall]
RunSync = Callable[[ToolCall], Any]
RunAsync = Callable[[ToolCall], Awaitable[Any]]


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


class CallScheduler:
    """Runs a batch's regular calls in ``sequential`` or ``parallel_safe`` mode.

    Args:
        catalog: the tool catalog (execution metadata of every tool).
        mode: ``sequential`` or ``parallel_safe``.
    """

    def __init__(self, catalog: ToolCatalog, mode: ExecutionMode) -> None:
        self.catalog = catalog
        self.mode = mode
        self._async_only = {s.name for s in catalog.specs if is_async_only(s.tool)}
        self._group_limits: dict[str, int] = {}
        for spec in catalog.specs:
            current = self._group_limits.get(spec.concurrency_group, spec.max_concurrency)
            self._group_limits[spec.concurrency_group] = min(current, spec.max_concurrency)

    # --- entry points -----------------------------------------------------------------------

    def run(self, jobs: Sequence[Job], run_one: RunSync, arun_one: RunAsync) -> dict[int, Any]:
        """Run the jobs from sync code; async-only tools and timeouts work too."""
        if self._sync_fast_path(jobs):
            return {i: run_one(call) for i, call in jobs}
        return run_sync(self.arun(jobs, run_one, arun_one))

    async def arun(
        self,
        jobs: Sequence[Job],
        run_one: RunSync,
        arun_one: RunAsync,
        *,
        batch_sync: bool = True,
    ) -> dict[int, Any]:
        """Run the jobs on the running event loop; sync tools run in worker threads.

        ``batch_sync``: in serial runs, hand consecutive plain sync calls to
        ``run_one`` in one worker-thread trip; False sends every call through
        ``arun_one`` (async hooks must see every call).
        """
        jobs = list(jobs)
        if self._serial(jobs):
            return await self._arun_serial(jobs, run_one, arun_one, batch_sync)
        if self._unbounded(jobs):  # every call may start at once: no gates needed
            results = await asyncio.gather(*(arun_one(call) for _, call in jobs))
            return {i: r for (i, _), r in zip(jobs, results, strict=True)}
        gates: dict[str, _GroupGate] = {}
        tickets: dict[str, int] = {}
        coros = []
        for _, call in jobs:
            spec = self.catalog.get(call["name"])
            group = spec.concurrency_group if spec else "default"
            gate = gates.setdefault(group, _GroupGate(self._group_limits.get(group, 1)))
            ticket = tickets.get(group, 0)
            tickets[group] = ticket + 1
            coros.append(self._run_gated(call, gate, ticket, arun_one))
        results = await asyncio.gather(*coros)
        return {i: r for (i, _), r in zip(jobs, results, strict=True)}

    # --- internals --------------------------------------------------------------------------

    async def _run_gated(
        self, call: ToolCall, gate: _GroupGate, ticket: int, arun_one: RunAsync
    ) -> Any:
        spec = self.catalog.get(call["name"])
        await gate.enter(ticket, pure=bool(spec and spec.is_pure))
        try:
            return await arun_one(call)
        finally:
            await gate.leave()

    async def _arun_serial(
        self, jobs: list[Job], run_one: RunSync, arun_one: RunAsync, batch_sync: bool
    ) -> dict[int, Any]:
        """Run jobs one at a time, in order.

        Consecutive sync tools without a timeout run in one worker-thread trip
        (``BaseTool.ainvoke`` would make one trip per call, as ``ToolNode`` does);
        they run in a thread either way, so the event loop never blocks.
        """
        out: dict[int, Any] = {}
        batch: list[Job] = []

        def run_batch(items: list[Job]) -> list[Any]:
            return [run_one(call) for _, call in items]

        async def flush() -> None:
            if batch:
                loop = asyncio.get_running_loop()
                ctx = contextvars.copy_context()
                results = await loop.run_in_executor(None, ctx.run, run_batch, list(batch))
                out.update({i: r for (i, _), r in zip(batch, results, strict=True)})
                batch.clear()

        for i, call in jobs:
            if batch_sync and self._plain_sync(call):
                batch.append((i, call))
                continue
            await flush()
            out[i] = await arun_one(call)
        await flush()
        return out

    def _serial(self, jobs: Sequence[Job]) -> bool:
        """True when the jobs run one at a time in call order anyway.

        Always in ``sequential`` mode; in ``parallel_safe`` when every call is
        in one concurrency group that admits one call at a time (its limit is
        1, or none of the calls is pure), so the group gates can be skipped.
        """
        if self.mode == "sequential" or len(jobs) <= 1:
            return True
        specs = [self.catalog.get(call["name"]) for _, call in jobs]
        groups = {spec.concurrency_group if spec else "default" for spec in specs}
        if len(groups) != 1:
            return False
        (group,) = groups
        return self._group_limits.get(group, 1) == 1 or not any(s and s.is_pure for s in specs)

    def _unbounded(self, jobs: Sequence[Job]) -> bool:
        """True when every call is pure and no group has more calls than its limit."""
        per_group: dict[str, int] = {}
        for _, call in jobs:
            spec = self.catalog.get(call["name"])
            if spec is None or not spec.is_pure:
                return False
            per_group[spec.concurrency_group] = per_group.get(spec.concurrency_group, 0) + 1
        return all(n <= self._group_limits.get(g, 1) for g, n in per_group.items())

    def _plain_sync(self, call: ToolCall) -> bool:
        """A sync tool without a timeout: it can run in the calling thread."""
        spec = self.catalog.get(call["name"])
        return spec is not None and not spec.timeout_s and call["name"] not in self._async_only

    def _sync_fast_path(self, jobs: Sequence[Job]) -> bool:
        return self._serial(jobs) and all(self._plain_sync(call) for _, call in jobs)
