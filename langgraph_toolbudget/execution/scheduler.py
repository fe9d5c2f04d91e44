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
    - :class:`GroupSlots`: a group's limit is the executor's, not a batch's: the
      calls of a limited group running now in any batch (any thread, any event
      loop) and its abandoned calls that still run count toward it, in both modes.
    - :class:`GroupGates`: the same rules for calls that come one by one while
      another tool node runs their batch (``ToolBudgetMiddleware``), without the
      call order.

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
import concurrent.futures
import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, Protocol

from langchain_core.messages import ToolCall

from langgraph_toolbudget._forks import reset_in_forked_children
from langgraph_toolbudget._runner import run_sync
from langgraph_toolbudget.config import ExecutionMode
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.spec import ToolSpec
from langgraph_toolbudget.execution.lingering import LingeringCalls

__all__ = ["CallScheduler", "GroupGates", "GroupSlots", "group_limits_of"]

RunOne = Callable[[ToolCall, float], Any]
"""Runs one call; the float is the seconds it waited for other runs' calls of its group
(room the executor's limit gave them), which is not its batch's time."""
ARunOne = Callable[[ToolCall, float], Awaitable[Any]]

DEFAULT_GROUP = "default"
"""The concurrency group of a call whose tool is unknown."""


def _group_of(spec: ToolSpec | None) -> str:
    return spec.concurrency_group if spec is not None else DEFAULT_GROUP


class _Waiter:
    """One call waiting for its turn. Whoever makes room for it admits it (counts it as
    started, with the slots' lock held) and then wakes it, once, through ``future``."""

    __slots__ = ("admitted", "future", "idle_at", "pure", "seq", "ticket", "waited_on_others")

    def __init__(self, seq: int, pure: bool, ticket: int | None, idle_at: float) -> None:
        self.seq = seq  # arrival order: the oldest call that may start, starts first
        self.pure = pure
        self.ticket = ticket
        self.idle_at = idle_at  # its gate's idle clock when it began to wait
        self.admitted = False
        self.waited_on_others = 0.0
        self.future: concurrent.futures.Future[None] | None = None  # set once it must wait


def _wake(waiter: _Waiter) -> None:
    if waiter.future is not None:  # None: admitted as it arrived, it never waited
        with contextlib.suppress(concurrent.futures.InvalidStateError):  # its wait was cancelled
            waiter.future.set_result(None)


class _Party(Protocol):
    """Calls of one group that wait in one queue: a batch's gate, or :class:`_RoomQueue`."""

    group: str

    def candidate(self) -> _Waiter | None:
        """The waiting call its own rules let start now, room in the group aside."""

    def admit(self, waiter: _Waiter) -> None:
        """Count ``waiter`` (its :meth:`candidate`) as started and take it off the queue."""

    def withdraw(self, waiter: _Waiter) -> None:
        """``waiter`` stops waiting (cancelled): off the queue, or its turn given back if it
        was admitted meanwhile."""

    @property
    def waiting(self) -> bool:
        """Whether a call waits in the queue."""


class _RoomQueue:
    """The calls waiting for room in a limited group outside any gate (:meth:`GroupSlots.held`)."""

    def __init__(self, slots: GroupSlots, group: str) -> None:
        self.slots = slots
        self.group = group
        self._queue: deque[_Waiter] = deque()

    @property
    def waiting(self) -> bool:
        return bool(self._queue)

    def add(self) -> _Waiter:
        waiter = _Waiter(next(self.slots.arrivals), False, None, 0.0)
        self._queue.append(waiter)
        return waiter

    def candidate(self) -> _Waiter | None:
        return self._queue[0] if self._queue else None

    def admit(self, waiter: _Waiter) -> None:
        self._queue.popleft()
        self.slots.take(self.group)
        waiter.admitted = True

    def withdraw(self, waiter: _Waiter) -> None:
        if waiter.admitted:
            self.slots.give_back(self.group)
        else:
            self._queue.remove(waiter)
        self.slots.pump(self.group)


class GroupSlots:
    """The calls of each limited concurrency group running now, in every batch of one
    executor (thread-safe, any event loop), and the waits for room in such a group.

    One executor's batches share it, so a group's limit (``max_concurrency``,
    ``group_limits``) holds across concurrent runs of the executor (threads under
    ``invoke``, tasks under ``ainvoke``, runs on LangGraph server), not per batch. The
    group's abandoned calls that still run (``lingering``) count toward the limit, and the
    end of one wakes the calls waiting for room.

    A call that must wait queues once and is woken once: whoever makes room (a call that
    ends, or one that starts and lets the next ticket in) admits the oldest waiting calls
    that may start now, for them (:meth:`pump`), so a change costs the calls it starts, not
    every call waiting.

    Args:
        lingering: the pipeline's abandoned calls; its ``limits`` are the groups' limits.
    """

    def __init__(self, lingering: LingeringCalls) -> None:
        self.lingering = lingering
        self.limits = lingering.limits
        self._reset()
        lingering.on_end(self.wake)
        reset_in_forked_children(self)

    def _reset(self) -> None:
        self.lock = threading.Lock()
        self.arrivals = itertools.count()  # the waiting calls' order (read with the lock held)
        self._running: dict[str, int] = {}
        # limited group -> the queues where a call of it waits (an ordered set)
        self._parties: dict[str, dict[_Party, None]] = {}
        self._room = {group: _RoomQueue(self, group) for group in self.limits}

    def _after_fork(self) -> None:
        # The parent's running calls have no thread in a forked child: counted, they would
        # keep their groups full there for ever.
        self._reset()

    def has_room(self, group: str) -> bool:
        """Whether one more call of ``group`` may start now (call with :attr:`lock` held)."""
        limit = self.limits.get(group)
        if limit is None:
            return True
        timed_out, cancelled = self.lingering.running(group)
        running = self._running.get(group, 0) + cancelled  # a cancelled run's call runs on
        if running == 0:
            # Waiting for timed-out calls alone is the pipeline's (bounded, then refused):
            # here a call waits only for running calls, which end.
            return True
        return running + timed_out < limit

    def take(self, group: str) -> None:
        """Count one more running call of ``group`` (with :attr:`lock` held)."""
        if group in self.limits:
            self._running[group] = self._running.get(group, 0) + 1

    def give_back(self, group: str) -> None:
        """Count one running call of ``group`` fewer (with :attr:`lock` held)."""
        if group in self.limits:
            self._running[group] -= 1

    def waiter(self, group: str) -> concurrent.futures.Future[None]:
        """The future a call of ``group`` that must wait waits on: done once it has been
        admitted (with :attr:`lock` held). One per call that waits."""
        return concurrent.futures.Future()

    def queued(self, group: str, party: _Party, waiter: _Waiter) -> None:
        """``waiter`` was queued at ``party``: start what may start now; if ``waiter`` must
        wait, give it its future (with :attr:`lock` held)."""
        if group in self.limits:
            self._parties.setdefault(group, {})[party] = None
            self.pump(group)
        else:
            _pump_alone(party)
        if not waiter.admitted:
            waiter.future = self.waiter(group)

    def pump(self, group: str) -> None:
        """Admit and wake the waiting calls of limited ``group`` that may start now, the
        oldest first, while it has room (with :attr:`lock` held). Called after every change
        a waiting call of the group may wait for, so none is left waiting that may start."""
        parties = self._parties.get(group)
        while parties and self.has_room(group):
            oldest: tuple[_Waiter, _Party] | None = None
            for party in parties:
                waiter = party.candidate()
                if waiter is not None and (oldest is None or waiter.seq < oldest[0].seq):
                    oldest = (waiter, party)
            if oldest is None:
                return
            waiter, party = oldest
            party.admit(waiter)
            self._forget_if_idle(group, party)
            _wake(waiter)

    def _forget_if_idle(self, group: str, party: _Party) -> None:
        parties = self._parties.get(group)
        if parties is not None and not party.waiting:
            parties.pop(party, None)
            if not parties:
                del self._parties[group]

    def withdraw(self, party: _Party, waiter: _Waiter) -> None:
        """``waiter`` stops waiting at ``party`` (its wait was cancelled); whatever may start
        now starts (with :attr:`lock` held)."""
        party.withdraw(waiter)  # and starts what may start now
        self._forget_if_idle(party.group, party)

    def wake(self, group: str) -> None:
        """:meth:`pump`, taking the lock (an abandoned call of ``group`` ended)."""
        with self.lock:
            self.pump(group)

    def _arrive(self, group: str) -> _Waiter | None:
        """A call outside any gate takes a place in ``group`` (None: a group without a
        limit, where it takes none), or queues for one."""
        with self.lock:
            if group not in self.limits:
                return None
            queue = self._room[group]
            waiter = queue.add()
            self.queued(group, queue, waiter)
            return waiter

    @contextlib.contextmanager
    def held(self, group: str) -> Iterator[float]:
        """A place in ``group`` for the duration, waited for in this thread. Yields the
        seconds waited: for other runs' calls, as the caller holds no place meanwhile."""
        began = time.monotonic()
        waiter = self._arrive(group)
        if waiter is not None:
            self.block(self._room[group], waiter)
        try:
            yield time.monotonic() - began
        finally:
            self.leave(group)

    @contextlib.asynccontextmanager
    async def aheld(self, group: str) -> AsyncIterator[float]:
        """:meth:`held`, waited for without blocking the event loop."""
        began = time.monotonic()
        waiter = self._arrive(group)
        if waiter is not None:
            await self.await_turn(self._room[group], waiter)
        try:
            yield time.monotonic() - began
        finally:
            self.leave(group)

    def block(self, party: _Party, waiter: _Waiter) -> None:
        """Wait in this thread until ``waiter``, queued at ``party``, is admitted."""
        if waiter.future is None:  # admitted as it came
            return
        try:
            waiter.future.result()
        except BaseException:
            with self.lock:
                self.withdraw(party, waiter)
            raise

    async def await_turn(self, party: _Party, waiter: _Waiter) -> None:
        """:meth:`block` on the event loop; cancelled, the call takes no place (a place it
        was given meanwhile goes to the next call)."""
        if waiter.future is None:
            return
        try:
            await asyncio.wrap_future(waiter.future)
        except BaseException:
            with self.lock:
                self.withdraw(party, waiter)
            raise

    def leave(self, group: str) -> None:
        """A running call of ``group`` ended (or was abandoned): the next may start."""
        with self.lock:
            self.give_back(group)
            self.pump(group)


def _pump_alone(party: _Party) -> None:
    """Admit and wake the calls a gate of a group without a limit may start now (its rules
    alone decide; with the slots' lock held)."""
    while (waiter := party.candidate()) is not None:
        party.admit(waiter)
        _wake(waiter)


class _GroupGate:
    """Admission control of one concurrency group in one batch (``parallel_safe``).

    A pure call never runs beside an impure call of its group in the batch, nor an
    impure call beside a pure one. Pure calls run side by side, impure calls one at a
    time; when the group has a limit, either kind runs side by side while the executor's
    :class:`GroupSlots` has room. Calls with tickets enter in ticket (call) order; calls
    without one (:class:`GroupGates`), of one kind, in the order they come.
    """

    def __init__(self, group: str, slots: GroupSlots) -> None:
        self.group = group
        self.slots = slots
        self.limited = group in slots.limits
        self.pure = 0
        self.impure = 0
        self.next_ticket = 0
        # The last ticket whose task resumed past its turn (read and written on the batch's
        # event loop only, where every call with a ticket arrives and resumes).
        self.resumed_ticket = -1
        self._tickets: dict[int, _Waiter] = {}  # the waiting calls with a ticket
        self._queues: dict[bool, deque[_Waiter]] = {True: deque(), False: deque()}  # by purity
        # Seconds the batch ran no call of the group: the clock's value when it last had one
        # running, and since when it has none (None while it has).
        self._idle = 0.0
        self._idle_since: float | None = time.monotonic()

    def _idle_clock(self) -> float:
        if self._idle_since is None:
            return self._idle
        return self._idle + time.monotonic() - self._idle_since

    @property
    def waiting(self) -> bool:
        return bool(self._tickets or self._queues[True] or self._queues[False])

    def _fits(self, pure: bool) -> bool:
        """Whether a call of this kind may run beside the batch's running calls of the group
        (room in a limited group aside)."""
        if self.impure if pure else self.pure:
            return False
        return self.limited or pure or self.impure == 0

    def candidate(self) -> _Waiter | None:
        """The oldest waiting call that may start now (room aside): the next ticket's, or
        the first of its kind in the order they came."""
        found: list[_Waiter] = []
        ticketed = self._tickets.get(self.next_ticket)
        if ticketed is not None and self._fits(ticketed.pure):
            found.append(ticketed)
        for pure, queue in self._queues.items():
            if queue and self._fits(pure):
                found.append(queue[0])
        return min(found, key=lambda waiter: waiter.seq, default=None)

    def admit(self, waiter: _Waiter) -> None:
        """Count ``waiter`` (the :meth:`candidate`) as started (with the slots' lock held)."""
        if waiter.ticket is not None:
            del self._tickets[waiter.ticket]
            self.next_ticket += 1  # the next ticket may enter now
        else:
            self._queues[waiter.pure].popleft()
        if self.limited:  # the seconds the batch ran no call of the group: other runs' calls
            waiter.waited_on_others = self._idle_clock() - waiter.idle_at
        self._count(waiter.pure, 1)
        self.slots.take(self.group)
        waiter.admitted = True

    def _count(self, pure: bool, change: int) -> None:
        idle = self.pure + self.impure == 0
        if pure:
            self.pure += change
        else:
            self.impure += change
        if idle and self.pure + self.impure:
            self._idle, self._idle_since = self._idle_clock(), None
        elif not idle and not self.pure + self.impure:
            self._idle_since = time.monotonic()

    def _changed(self) -> None:
        """Start the waiting calls that may start now (with the slots' lock held)."""
        if self.limited:
            self.slots.pump(self.group)
        else:
            _pump_alone(self)

    def _arrive(self, ticket: int | None, pure: bool) -> _Waiter:
        with self.slots.lock:
            waiter = _Waiter(next(self.slots.arrivals), pure, ticket, self._idle_clock())
            if ticket is None:
                self._queues[pure].append(waiter)
            else:
                self._tickets[ticket] = waiter
            self.slots.queued(self.group, self, waiter)
            if waiter.future is None and ticket is not None and ticket - 1 > self.resumed_ticket:
                # Admitted as it came, but an earlier ticket admitted for its task (by a
                # call that made room, in any thread) has not resumed yet: started now, this
                # call would run first. It resumes behind it instead, through the same queue
                # of the event loop (call_soon_threadsafe, first in, first out).
                waiter.future = self.slots.waiter(self.group)
                waiter.future.set_result(None)
            return waiter

    async def enter(self, ticket: int | None, pure: bool) -> float:
        """Wait for the call's turn; return the seconds it waited while the batch ran no
        call of the group: for other runs' calls, which is not the batch's time. A cancelled
        wait takes no turn."""
        waiter = self._arrive(ticket, pure)
        await self.slots.await_turn(self, waiter)
        if ticket is not None:
            self.resumed_ticket = ticket
        return waiter.waited_on_others

    def enter_blocking(self, pure: bool) -> None:
        """Wait in this thread for the call's turn (a call without a ticket)."""
        self.slots.block(self, self._arrive(None, pure))

    def withdraw(self, waiter: _Waiter) -> None:
        """``waiter`` stops waiting (with the slots' lock held); one admitted meanwhile
        gives its turn back."""
        if waiter.admitted:
            self.leave(waiter.pure)
            return
        if waiter.ticket is not None:
            del self._tickets[waiter.ticket]
        else:
            self._queues[waiter.pure].remove(waiter)
        self._changed()

    def leave(self, pure: bool) -> None:
        """The call ended (with the slots' lock held): the next may start."""
        self._count(pure, -1)
        self.slots.give_back(self.group)
        self._changed()


class GroupGates:
    """The ``parallel_safe`` rules for calls that reach the scheduler one by one, while
    another tool node runs their batch (``ToolBudgetMiddleware`` under ``create_agent``,
    whose tool node runs each call of a reply as its own task).

    A call waits at its batch's gate for its group (:class:`_GroupGate`, the rule of
    :class:`CallScheduler`'s batches): impure calls of a group one at a time in the batch
    (or up to the group's limit), never beside its pure calls; and a limited group's
    places are :class:`GroupSlots`'s, shared with every other batch. Without tickets: the
    calls of a group start in the order they come, not in call order (a pure call may pass
    an impure one that waits for the batch's pure calls to end, as the rule allows).
    Thread-safe, any event loop; a call may wait in a thread (:meth:`held`) or a task
    (:meth:`aheld`), and is woken once, when its turn has been taken for it.

    Args:
        slots: the places of the limited groups (the executor's or middleware's).
    """

    def __init__(self, slots: GroupSlots) -> None:
        self.slots = slots
        # (batch, group) -> its gate and how many calls are in it or waiting at it; dropped
        # when none is, so a batch's gates live as long as its calls.
        self._gates: dict[tuple[Hashable, str], tuple[_GroupGate, list[int]]] = {}
        reset_in_forked_children(self)

    def _after_fork(self) -> None:
        # A gate a call of the parent held stays held in a forked child, where that call
        # never ends: the batch's other calls of its group would wait for ever.
        self._gates = {}

    def _gate(self, key: tuple[Hashable, str]) -> _GroupGate:
        with self.slots.lock:
            entry = self._gates.get(key)
            if entry is None:
                entry = self._gates[key] = (_GroupGate(key[1], self.slots), [0])
            entry[1][0] += 1
            return entry[0]

    def _leave(self, key: tuple[Hashable, str], pure: bool, entered: bool) -> None:
        with self.slots.lock:
            gate, users = self._gates[key]
            if entered:
                gate.leave(pure)
            users[0] -= 1
            if not users[0]:
                del self._gates[key]

    @contextlib.contextmanager
    def held(self, batch: Hashable, group: str, pure: bool) -> Iterator[None]:
        """The call's turn in ``group`` of ``batch`` for the duration, waited for in this
        thread; given back however the call ends."""
        key = (batch, group)
        gate, entered = self._gate(key), False
        try:
            gate.enter_blocking(pure)
            entered = True
            yield
        finally:
            self._leave(key, pure, entered)

    @contextlib.asynccontextmanager
    async def aheld(self, batch: Hashable, group: str, pure: bool) -> AsyncIterator[None]:
        """:meth:`held`, waited for without blocking the event loop; a cancelled wait takes
        no turn."""
        key = (batch, group)
        gate, entered = self._gate(key), False
        try:
            await gate.enter(None, pure)
            entered = True
            yield
        finally:
            self._leave(key, pure, entered)


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
        lingering: the pipeline's abandoned calls (they count toward their group's
            limit) and the groups' limits (``group_limits_of``); without it, the tools'
            ``max_concurrency`` and no abandoned calls.
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        mode: ExecutionMode,
        *,
        max_parallel: int = 16,
        lingering: LingeringCalls | None = None,
    ) -> None:
        self.catalog = catalog
        self.mode = mode
        self.max_parallel = max_parallel
        self.slots = GroupSlots(lingering or LingeringCalls(group_limits_of(catalog)))
        self.group_limits = self.slots.limits

    def run(self, calls: Sequence[ToolCall], run_one: RunOne, arun_one: ARunOne) -> list[Any]:
        """Run the calls from sync code: ``run_one`` in a loop, or ``arun_one`` gathered on
        the background event loop."""
        if self.one_at_a_time(calls):
            return [self._alone(call, run_one) for call in calls]
        return run_sync(self._gather(calls, arun_one))

    async def arun(self, calls: Sequence[ToolCall], arun_one: ARunOne) -> list[Any]:
        """Run the calls on the running event loop."""
        if self.one_at_a_time(calls):
            return [await self._aalone(call, arun_one) for call in calls]
        return await self._gather(calls, arun_one)

    def group_of(self, call: ToolCall) -> str:
        """The concurrency group of ``call`` (``"default"`` for a tool outside the catalog)."""
        return _group_of(self.catalog.get(call["name"]))

    def _alone(self, call: ToolCall, run_one: RunOne) -> Any:
        """``run_one(call)``, once its group's limit leaves room in the executor."""
        with self.slots.held(self.group_of(call)) as waited:
            return run_one(call, waited)

    async def _aalone(self, call: ToolCall, arun_one: ARunOne) -> Any:
        """The async :meth:`_alone`."""
        async with self.slots.aheld(self.group_of(call)) as waited:
            return await arun_one(call, waited)

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
        groups = {_group_of(spec) for spec in specs}
        if len(groups) != 1:
            return False
        limit = self.group_limits.get(groups.pop())
        if limit is not None:
            return limit == 1
        return not any(spec is not None and spec.is_pure for spec in specs)

    async def _gather(self, calls: Sequence[ToolCall], arun_one: ARunOne) -> list[Any]:
        """Every call at once, each behind its group's gate with its ticket (its place
        in the group). A call that raises is raised (the first in call order) once every
        call ended, as ``ToolNode`` does: a retry of the node never runs beside the calls
        of the attempt it retries."""
        gates: dict[str, _GroupGate] = {}
        tickets: dict[str, int] = {}
        gated: list[Awaitable[Any]] = []
        for call in calls:
            spec = self.catalog.get(call["name"])
            group = _group_of(spec)
            if group not in gates:
                gates[group] = _GroupGate(group, self.slots)
            ticket = tickets[group] = tickets.get(group, -1) + 1
            pure = spec is not None and spec.is_pure
            gated.append(_behind(gates[group], ticket, pure, arun_one, call))
        results = await asyncio.gather(*gated, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return list(results)


async def _behind(
    gate: _GroupGate, ticket: int, pure: bool, arun_one: ARunOne, call: ToolCall
) -> Any:
    """``arun_one(call)`` once ``gate`` admits it."""
    waited = await gate.enter(ticket, pure)
    try:
        return await arun_one(call, waited)
    finally:
        with gate.slots.lock:
            gate.leave(pure)
