"""The scheduler: in what order, and how concurrently, a batch of tool calls runs.

Key Components:
    - :class:`CallScheduler`: runs the regular (non-meta) calls of a batch in
      one of two modes and returns one result per call, keyed by its position.

The modes (the table with the reasons is in docs/execution.md):
    - ``sequential``: every call one at a time, in call order.
    - ``parallel_safe``: pure calls (``is_pure=True``) run concurrently, up to
      their group's limit when one was set (``group_limits``, or
      ``max_concurrency`` in tool metadata or ``server_defaults``); sync tools
      run in the executor's pool of ``max_parallel`` threads, async calls all
      start (as under ``ToolNode``); impure calls run one at a time within their
      ``concurrency_group`` (or up to the group's limit when one was set), never
      beside a pure call of their group; groups run side by side.

Within a group, calls start in call order. ``max_parallel`` is the size of the
executor's own thread pool for sync tools (the interpreter's default pool is never
used), so at most that many sync calls run at once. A tool's ``timeout_s`` bounds
its call either way.

The scheduler decides *when* a call runs; *how* one call runs is the
:class:`~langgraph_toolbudget.execution.pipeline.ToolCallPipeline`'s job, handed
in as two callables (sync and async).
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
from langgraph_toolbudget.execution.pipeline import is_async_only
from langgraph_toolbudget.execution.thread_pool import ToolThreadPool

__all__ = ["CallScheduler"]

Job = tuple[int, ToolCall]
RunSync = Callable[[ToolCall], Any]
RunAsync = Callable[[ToolCall], Awaitable[Any]]
Prepare = Callable[[ToolCall], Callable[[], Any]]
"""A call's stages before the tool, done at once; returns the rest, for a worker thread."""

DEFAULT_GROUP = "default"
"""The concurrency group of a call whose tool is unknown."""


class _GroupGate:
    """Admission control of one concurrency group (``parallel_safe``).

    Calls enter in ticket (call) order. A pure call never runs beside an impure
    call of its group, nor an impure call beside a pure one. Pure calls run side
    by side, up to ``limit`` when the group has one; impure calls run one at a
    time, or up to ``limit`` side by side when the group has one.
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.pure = 0
        self.impure = 0
        self.next_ticket = 0
        self.cond = asyncio.Condition()

    def _admits(self, ticket: int, pure: bool) -> bool:
        if ticket != self.next_ticket:
            return False
        if pure:
            return self.impure == 0 and (self.limit is None or self.pure < self.limit)
        return self.pure == 0 and self.impure < (self.limit or 1)

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


class CallScheduler:
    """Runs a batch's regular calls in ``sequential`` or ``parallel_safe`` mode.

    Args:
        catalog: the tool catalog (execution metadata of every tool).
        mode: ``sequential`` or ``parallel_safe``.
        max_parallel: sync calls running at once (the pool's size); 1 makes
            every batch serial.
        group_limits: group -> calls at once, over the tools' ``max_concurrency``.
        threads: the thread pool sync calls run in (the pipeline's own; default:
            a new one of ``max_parallel`` threads).
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        mode: ExecutionMode,
        *,
        max_parallel: int = 16,
        group_limits: Mapping[str, int] | None = None,
        threads: ToolThreadPool | None = None,
    ) -> None:
        self.catalog = catalog
        self.threads = threads or ToolThreadPool(max_parallel)
        self.mode = mode
        self.max_parallel = max_parallel
        self._async_only = {s.name for s in catalog.specs if is_async_only(s.tool)}
        limits: dict[str, int] = {}
        for spec in catalog.specs:  # a group's limit: the smallest one its tools set
            if spec.max_concurrency is not None:
                group = spec.concurrency_group
                limits[group] = min(limits.get(group, spec.max_concurrency), spec.max_concurrency)
        limits.update(group_limits or {})
        self.group_limits = limits

    # --- entry points -----------------------------------------------------------------------

    def run(self, jobs: Sequence[Job], run_one: RunSync, arun_one: RunAsync) -> dict[int, Any]:
        """Run the jobs from sync code; async-only tools and timeouts work too."""
        if all(self._plain_sync(call) for _, call in jobs):
            if self._serial(jobs):
                return {i: run_one(call) for i, call in jobs}
            if self._ungated(jobs):  # no event loop needed: straight into the pool
                results = self.threads.run_each(run_one, [call for _, call in jobs])
                return {i: r for (i, _), r in zip(jobs, results, strict=True)}
        return run_sync(self.arun(jobs, run_one, arun_one))

    async def arun(
        self,
        jobs: Sequence[Job],
        run_one: RunSync,
        arun_one: RunAsync,
        *,
        batch_sync: bool = True,
        prepare_one: Prepare | None = None,
    ) -> dict[int, Any]:
        """Run the jobs on the running event loop; sync tools run in worker threads.

        ``batch_sync``: hand plain sync calls to ``run_one`` in worker threads
        (consecutive ones of a serial run in one trip); False sends every call
        through ``arun_one`` (async hooks must see every call).
        ``prepare_one``: for those plain sync calls, the stages before the tool, done on
        the event loop (as for async tools), so the worker thread starts on the tool.
        """
        jobs = list(jobs)
        if len(jobs) == 1 and batch_sync and prepare_one is not None:  # the usual batch
            ((i, call),) = jobs
            if self._plain_sync(call):
                (thunk,) = _thunks([call], run_one, prepare_one)
                return {i: await self.threads.start(thunk)}
        if self._serial(jobs):
            return await self._arun_serial(jobs, run_one, arun_one, batch_sync, prepare_one)
        calls = [call for _, call in jobs]
        if not self._ungated(jobs):
            results = await asyncio.gather(*self._gated(calls, arun_one))
        elif batch_sync and all(self._plain_sync(call) for call in calls):
            results = await self.threads.arun_each(_run, _thunks(calls, run_one, prepare_one))
        else:
            results = await asyncio.gather(*(arun_one(call) for call in calls))
        return {i: r for (i, _), r in zip(jobs, results, strict=True)}

    # --- internals --------------------------------------------------------------------------

    def _group(self, call: ToolCall) -> str:
        spec = self.catalog.get(call["name"])
        return spec.concurrency_group if spec is not None else DEFAULT_GROUP

    def _gated(self, calls: list[ToolCall], arun_one: RunAsync) -> list[Awaitable[Any]]:
        """Each call behind its group's gate, with its ticket (its place in the group)."""
        gates: dict[str, _GroupGate] = {}
        tickets: dict[str, int] = {}
        coros: list[Awaitable[Any]] = []
        for call in calls:
            group = self._group(call)
            gate = gates.setdefault(group, _GroupGate(self.group_limits.get(group)))
            ticket = tickets.get(group, 0)
            tickets[group] = ticket + 1
            coros.append(self._run_gated(call, gate, ticket, arun_one))
        return coros

    async def _run_gated(
        self,
        call: ToolCall,
        gate: _GroupGate,
        ticket: int,
        arun_one: RunAsync,
    ) -> Any:
        spec = self.catalog.get(call["name"])
        pure = bool(spec and spec.is_pure)
        await gate.enter(ticket, pure)
        try:
            return await arun_one(call)
        finally:
            await gate.leave(pure)

    async def _arun_serial(
        self,
        jobs: list[Job],
        run_one: RunSync,
        arun_one: RunAsync,
        batch_sync: bool,
        prepare_one: Prepare | None,
    ) -> dict[int, Any]:
        """Run jobs one at a time, in order.

        Consecutive sync tools without a timeout run in one worker-thread trip
        (they run one at a time anyway); the event loop never blocks.
        """
        out: dict[int, Any] = {}
        batch: list[Job] = []
        for i, call in jobs:
            if batch_sync and self._plain_sync(call):
                batch.append((i, call))
                continue
            if batch:
                out.update(await self._one_trip(batch, run_one, prepare_one))
                batch = []
            out[i] = await arun_one(call)
        if batch:
            out.update(await self._one_trip(batch, run_one, prepare_one))
        return out

    async def _one_trip(
        self, batch: list[Job], run_one: RunSync, prepare_one: Prepare | None
    ) -> dict[int, Any]:
        """Run ``batch`` one after the other in one worker thread."""
        thunks = _thunks([call for _, call in batch], run_one, prepare_one)
        results = await self.threads.to_thread(_run_all, thunks)
        return {i: r for (i, _), r in zip(batch, results, strict=True)}

    def _serial(self, jobs: Sequence[Job]) -> bool:
        """True when the jobs run one at a time in call order anyway.

        Always in ``sequential`` mode; in ``parallel_safe`` when the batch is
        one call, or every call is an impure call of one group with no limit
        set (each such call runs alone), or ``max_parallel`` is 1.
        """
        if self.mode == "sequential" or len(jobs) <= 1 or self.max_parallel == 1:
            return True
        groups = {self._group(call) for _, call in jobs}
        if len(groups) != 1:
            return False
        (group,) = groups
        limit = self.group_limits.get(group)
        if limit is not None:
            return limit == 1
        specs = [self.catalog.get(call["name"]) for _, call in jobs]
        return not any(s is not None and s.is_pure for s in specs)

    def _ungated(self, jobs: Sequence[Job]) -> bool:
        """True when no gate would hold a call back (``parallel_safe``): every call is to
        a pure tool, and no group has more calls than its limit. The calls then all start
        at once, in call order, as the gates would let them."""
        per_group: dict[str, int] = {}
        for _, call in jobs:
            spec = self.catalog.get(call["name"])
            if spec is None or not spec.is_pure:
                return False
            group = spec.concurrency_group
            per_group[group] = per_group.get(group, 0) + 1
        limits = self.group_limits
        return all(limits.get(g) is None or n <= limits[g] for g, n in per_group.items())

    def _plain_sync(self, call: ToolCall) -> bool:
        """A sync tool without a timeout: it can run in the calling thread."""
        spec = self.catalog.get(call["name"])
        return spec is not None and not spec.timeout_s and call["name"] not in self._async_only


def _run_all(thunks: list[Callable[[], Any]]) -> list[Any]:
    return [thunk() for thunk in thunks]


def _run(thunk: Callable[[], Any]) -> Any:
    return thunk()


def _thunks(
    calls: list[ToolCall], run_one: RunSync, prepare_one: Prepare | None
) -> list[Callable[[], Any]]:
    """Each call as a function for a worker thread: prepared now when ``prepare_one`` is
    given, else run whole by ``run_one`` there."""
    if prepare_one is None:
        return [partial(run_one, call) for call in calls]
    thunks: list[Callable[[], Any]] = []
    for call in calls:
        try:
            thunks.append(prepare_one(call))
        except Exception:  # noqa: BLE001 - raised again in its turn, after the calls before it ran
            thunks.append(partial(run_one, call))
    return thunks
