"""A call waiting for its concurrency group's turn is woken once, not at every change.

Review 47c: every start or end of a call woke every call waiting in its group, and each
re-checked and queued again, so one reply of N impure calls of a group cost O(N^2) wakes on
the event loop (under ``ToolBudgetMiddleware`` each call of a reply waits as its own task).
Now whoever makes room admits the next calls that may start, for them, and wakes only those.

The wakes are counted where a wait begins (:meth:`GroupSlots.waiter`, one future per wait),
not timed. The rules the waits keep (impure calls one at a time in their batch, never beside
its pure calls; a group's limit shared by every batch; a cancelled wait takes no place and
loses no one's turn) are checked on the live counts of the real gates, over seeded random
schedules too.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from agent_tools import ConcurrencyProbe, ai_calls, call, probe_tool, tool_messages
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_toolbudget import ToolBudgetMiddleware, ToolCatalog, ToolExecutor
from langgraph_toolbudget.execution.lingering import LingeringCalls
from langgraph_toolbudget.execution.scheduler import (
    CallScheduler,
    GroupGates,
    GroupSlots,
    _GroupGate,
)
from langgraph_toolbudget.testing import ScriptedChatModel

HANG = 20.0
"""Seconds: a hang guard only; nothing here waits for it when the code is right."""


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The waits begun (futures made by :meth:`GroupSlots.waiter`), counted."""
    count = [0]
    original = GroupSlots.waiter

    def counting(self: GroupSlots, group: str) -> Any:
        count[0] += 1
        return original(self, group)

    monkeypatch.setattr(GroupSlots, "waiter", counting)
    yield count


def probe_catalog(
    probe: ConcurrencyProbe, names: dict[str, dict[str, Any]], *, seconds: float = 0.002
) -> ToolCatalog:
    tools = []
    for name, meta in names.items():
        probe.group_of[name] = meta.get("concurrency_group", "default")
        tools.append(probe_tool(name, probe, pure=meta.get("is_pure", False), seconds=seconds))
    return ToolCatalog.from_tools(tools, tool_metadata=names)


# --- one reply of many calls of one group ----------------------------------------------------


@pytest.mark.parametrize("limit", [None, 2], ids=["impure-no-limit", "pure-limit-2"])
async def test_a_middleware_replys_calls_of_one_group_each_wait_at_most_once(waits, limit):
    """One reply of 120 calls of group ``db`` under ``create_agent``: each call starts after
    at most one wait (it was woken ~40 times on average before), and the rules hold."""
    n = 120
    probe = ConcurrencyProbe()
    meta: dict[str, Any] = {"concurrency_group": "db", "is_pure": limit is not None}
    if limit is not None:
        meta["max_concurrency"] = limit
    catalog = probe_catalog(probe, {"write": meta})
    batch = AIMessage("", tool_calls=[call("write", f"w{i}", x=i) for i in range(n)])

    def reply(messages: list[Any], _tools: list[str]) -> AIMessage:
        return AIMessage("done") if isinstance(messages[-1], ToolMessage) else batch

    model = ScriptedChatModel(responses=[reply], cycle=True)
    budget = ToolBudgetMiddleware(catalog, pinned=["write"])
    agent = create_agent(model, middleware=[budget], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 10}
    payload = {"messages": [HumanMessage("go")]}
    out = await asyncio.wait_for(agent.ainvoke(payload, config), HANG)
    answers = {m.tool_call_id: m.content for m in tool_messages(out["messages"])}
    assert answers == {f"w{i}": f"write {i}" for i in range(n)}
    assert probe.violations == []
    assert probe.max_by_group["db"] <= (limit or 1)
    assert waits[0] <= n, f"{waits[0] / n:.1f} waits per call"


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_a_gathered_batchs_calls_of_one_group_each_wait_at_most_once_in_call_order(
    waits, api
):
    """The executor's own batch (tickets, call order): 100 impure calls of ``db`` and one
    call of ``mail`` (so the batch is gathered): one wait per call at most, call order kept."""
    n = 100
    probe = ConcurrencyProbe()
    names = {f"w{i}": {"concurrency_group": "db"} for i in range(5)}
    names["send"] = {"concurrency_group": "mail"}
    node = ToolExecutor(probe_catalog(probe, names, seconds=0.0))
    order = [f"w{(i * 3) % 5}" for i in range(n)]
    calls = [call(name, f"c{i}", x=i) for i, name in enumerate([*order, "send"])]
    state = {"messages": [HumanMessage("go"), ai_calls(*calls)], "selected_tools": list(names)}
    if api == "invoke":
        out = await asyncio.wait_for(asyncio.to_thread(node.invoke, state), HANG)
    else:
        out = await asyncio.wait_for(node.ainvoke(state), HANG)
    assert [m.status for m in out["messages"]] == ["success"] * (n + 1)
    started = [name for name, _, _ in sorted(probe.intervals, key=lambda i: i[1])]
    assert [name for name in started if name != "send"] == order
    assert probe.violations == []
    assert waits[0] <= n + 1, f"{waits[0] / n:.1f} waits per call"


# --- call order when another run makes room -----------------------------------------------------


@pytest.mark.parametrize("api", ["run", "arun"])
@pytest.mark.parametrize("limit", [2, 3])
async def test_a_batchs_calls_start_in_call_order_when_another_runs_calls_make_room(
    monkeypatch, api, limit
):
    """Another run holds every place of group ``L`` (limit 2 or 3) in its threads; they end
    just after the batch's first call began to wait. Their ends admit that call for its task
    and wake it through the event loop; the batch's next calls, arriving before it resumed,
    find room but start behind it: the calls start in call order (review 49a: the second
    started first)."""
    tools = [probe_tool("b", ConcurrencyProbe(), pure=True, seconds=0.0)]
    meta = {"b": {"concurrency_group": "L", "max_concurrency": limit}}
    scheduler = CallScheduler(ToolCatalog.from_tools(tools, tool_metadata=meta), "parallel_safe")
    release = [threading.Event() for _ in range(limit)]
    inside = [threading.Event() for _ in range(limit)]

    def other_run(k: int) -> None:
        with scheduler.slots.held("L"):
            inside[k].set()
            release[k].wait(HANG)

    holders = [threading.Thread(target=other_run, args=(k,), daemon=True) for k in range(limit)]
    original = _GroupGate._arrive

    def arrive(self: _GroupGate, ticket: int | None, pure: bool) -> Any:
        waiter = original(self, ticket, pure)
        if ticket == 0:  # the other run's calls end now, in their threads
            for k, holder in enumerate(holders):
                release[k].set()
                holder.join(HANG)
        return waiter

    monkeypatch.setattr(_GroupGate, "_arrive", arrive)
    started_ids: list[str] = []

    async def arun_one(one: Any, _waited: float) -> str:
        started_ids.append(one["id"])
        await asyncio.sleep(0)
        return one["id"]

    def run_one(one: Any, _waited: float) -> str:
        raise AssertionError("a gathered batch runs its calls with arun_one")

    ids = [f"b{i}" for i in range(limit)]
    calls = [call("b", id_) for id_ in ids]
    try:
        for holder, entered in zip(holders, inside, strict=True):
            holder.start()
            assert entered.wait(HANG)
        if api == "run":
            ran = await asyncio.to_thread(scheduler.run, calls, run_one, arun_one)
        else:
            ran = await asyncio.wait_for(scheduler.arun(calls, arun_one), HANG)
    finally:
        for event in release:
            event.set()
    assert ran == ids
    assert started_ids == ids


# --- a cancelled wait loses no one's turn ------------------------------------------------------


def gates_of(limits: dict[str, int] | None = None) -> GroupGates:
    return GroupGates(GroupSlots(LingeringCalls(limits or {})))


async def started(events: list[str], name: str, count: int = 1) -> None:
    for _ in range(1000):
        if events.count(name) >= count:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{name} never started: {events}")


@pytest.mark.parametrize("limited", [False, True], ids=["no-limit", "limit-1"])
@pytest.mark.parametrize("when", ["waiting", "just-admitted"])
async def test_a_cancelled_waiter_passes_its_turn_to_the_next(limited, when):
    """A holds the turn of group ``g``; B, then C, wait for it. B is cancelled while it waits
    (``waiting``), or in the very step A's end gave it the turn, before it resumed
    (``just-admitted``): C starts after A, and B never does."""
    gates = gates_of({"g": 1} if limited else None)
    events: list[str] = []
    release = {name: asyncio.Event() for name in "ABC"}
    tasks: dict[str, asyncio.Task[None]] = {}

    async def one(name: str) -> None:
        async with gates.aheld("batch", "g", False):
            events.append(name)
            await release[name].wait()
        events.append(f"/{name}")
        if name == "A" and when == "just-admitted":
            tasks["B"].cancel()  # no await since A's turn went to B: B has not resumed

    tasks["A"] = asyncio.create_task(one("A"))
    await started(events, "A")
    tasks["B"] = asyncio.create_task(one("B"))
    await asyncio.sleep(0.01)
    tasks["C"] = asyncio.create_task(one("C"))
    await asyncio.sleep(0.01)
    assert events == ["A"]
    if when == "waiting":
        tasks["B"].cancel()
        await asyncio.sleep(0.01)
    release["A"].set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(tasks["B"], HANG)
    await asyncio.wait_for(tasks["A"], HANG)
    await started(events, "C")
    release["C"].set()
    await asyncio.wait_for(tasks["C"], HANG)
    assert events == ["A", "/A", "C", "/C"]
    # Nothing is left counted: a new call of the group starts at once, without waiting.
    assert gates.slots._running.get("g", 0) == 0
    async with gates.aheld("batch", "g", False):
        pass


def test_a_thread_waiting_at_a_gate_is_woken_by_a_task_leaving_it():
    """Waits in threads (``invoke``) and tasks (``ainvoke``) share the gates: a task's end
    wakes the thread waiting behind it, once."""
    gates = gates_of({"g": 1})
    inside, entered = threading.Event(), threading.Event()

    async def holder() -> None:
        async with gates.aheld("batch", "g", False):
            inside.set()
            await asyncio.sleep(0.05)

    def waiter() -> None:
        inside.wait(HANG)
        with gates.held("other", "g", True):  # another batch: only the limit holds it back
            entered.set()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    asyncio.run(holder())
    thread.join(HANG)
    assert entered.is_set()


# --- random schedules -----------------------------------------------------------------------


class Rules:
    """The live counts of the calls inside their turn, and the broken rules seen."""

    def __init__(self, limits: dict[str, int]) -> None:
        self.limits = limits
        self.inside: dict[tuple[str, str], list[int]] = {}  # (batch, group) -> [pure, impure]
        self.by_group: dict[str, int] = {}
        self.broken: list[str] = []

    def enter(self, batch: str, group: str, pure: bool) -> None:
        pure_n, impure_n = self.inside.setdefault((batch, group), [0, 0])
        if (impure_n if pure else pure_n) or (not pure and impure_n and group not in self.limits):
            self.broken.append(f"{batch}/{group}: pure={pure} beside {pure_n}+{impure_n}")
        self.inside[batch, group][0 if pure else 1] += 1
        self.by_group[group] = self.by_group.get(group, 0) + 1
        if self.by_group[group] > self.limits.get(group, 10**9):
            self.broken.append(f"{group}: {self.by_group[group]} calls at once")

    def exit(self, batch: str, group: str, pure: bool) -> None:
        self.inside[batch, group][0 if pure else 1] -= 1
        self.by_group[group] -= 1


@pytest.mark.parametrize("seed", range(40))
async def test_random_schedules_keep_the_group_rules_and_wake_each_call_at_most_once(waits, seed):
    """Calls of 3 batches in 2 groups (``lim`` limited to 2), pure and impure, arriving at
    random, running for a random number of loop steps, some cancelled at random (waiting or
    running), plus calls outside any batch (``GroupSlots.aheld``): every rule holds at every
    start, every call not cancelled runs, each waits at most once, and nothing stays counted."""
    rng = random.Random(seed)
    limits = {"lim": 2}
    gates = gates_of(limits)
    rules = Rules(limits)
    ran: list[int] = []

    async def one(i: int, batch: str | None, group: str, pure: bool, steps: int) -> None:
        for _ in range(rng.randrange(3)):
            await asyncio.sleep(0)
        if batch is None:
            async with gates.slots.aheld(group):
                rules.enter(f"alone{i}", group, pure)
                try:
                    for _ in range(steps):
                        await asyncio.sleep(0)
                finally:
                    rules.exit(f"alone{i}", group, pure)
        else:
            async with gates.aheld(batch, group, pure):
                rules.enter(batch, group, pure)
                try:
                    for _ in range(steps):
                        await asyncio.sleep(0)
                finally:
                    rules.exit(batch, group, pure)
        ran.append(i)

    n = 60
    tasks = []
    for i in range(n):
        batch = rng.choice(["a", "b", "c", None])
        group = rng.choice(["lim", "free"])
        pure = rng.random() < 0.4 or batch is None
        tasks.append(asyncio.create_task(one(i, batch, group, pure, rng.randrange(6))))
    cancelled = set(rng.sample(range(n), 8))
    for i in sorted(cancelled, key=lambda _: rng.random()):
        for _ in range(rng.randrange(4)):
            await asyncio.sleep(0)
        tasks[i].cancel()
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), HANG)
    assert rules.broken == []
    not_cancelled = [i for i, t in enumerate(tasks) if not t.cancelled()]
    assert sorted(ran) == not_cancelled
    assert waits[0] <= n
    assert all(count == 0 for count in gates.slots._running.values())
    assert gates._gates == {}
