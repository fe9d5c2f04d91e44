"""ToolBudgetMiddleware keeps the executor's concurrency-group rules under ``create_agent``.

The agent's tool node runs each call of a reply as its own task (threads under
``invoke``, tasks under ``ainvoke``); the middleware makes a call wait for its turn:
impure calls of a group one at a time in their batch, a group's limit
(``max_concurrency``, ``group_limits``) shared by every run of the middleware.

The tools are real sync tools whose calls stay running until the test lets them go
(:class:`HeldCalls`), so "at most N at once" is read from the calls themselves, not from
timings: the test waits for the calls it expects to run, leaves a moment for a call beyond
the limit to start (it must not; passing never depends on that moment), and lets them go.
Only the chat model is scripted.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agent_tools import call, tool_messages
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ToolRetryMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt

from langgraph_toolbudget import ToolBudgetMiddleware, ToolCatalog, ToolExecutor
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
HANG = 20.0
"""Seconds: a hang guard only; nothing here waits for it when the code is right."""
SETTLE = 0.2
"""Seconds left for a call beyond the limit to start before the running ones are let go."""


class HeldCalls:
    """Sync tools whose calls stay running until the test lets them go; the calls of each
    concurrency group running at once, and the most seen."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.running: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.started = 0  # held calls (the raising tools' are not held)
        self.ended = 0
        self.let_go = 0  # calls numbered (by start) below it may end

    def _enter(self, group: str, *, held: bool = True) -> int:
        with self.cond:
            number = self.started
            self.started += held
            self.running[group] = self.running.get(group, 0) + 1
            self.most[group] = max(self.most.get(group, 0), self.running[group])
            self.cond.notify_all()
            return number

    def _exit(self, group: str, *, held: bool = True) -> None:
        with self.cond:
            self.running[group] -= 1
            self.ended += held
            self.cond.notify_all()

    def tool(self, name: str, group: str) -> BaseTool:
        """A tool of ``group`` whose call runs until it is let go, then answers ``name x``."""

        def body(x: int = 0) -> str:
            number = self._enter(group)
            try:
                with self.cond:
                    if not self.cond.wait_for(lambda: self.let_go > number, HANG):
                        raise TimeoutError(f"{name} call {number} was never let go")
            finally:
                self._exit(group)
            return f"{name} {x}"

        return StructuredTool.from_function(func=body, name=name, description=f"Held {name}.")

    def raising_tool(self, name: str, group: str, raise_: Callable[[], Any]) -> BaseTool:
        """A tool of ``group`` that counts as running while it calls ``raise_``."""

        def body(x: int = 0) -> str:
            self._enter(group, held=False)
            try:
                raise_()
            finally:
                self._exit(group, held=False)
            return "not reached"

        return StructuredTool.from_function(func=body, name=name, description=f"Raising {name}.")

    def let_go_in_waves(self, total: int, limit: int) -> None:
        """Let the held calls go, ``total`` of them, in waves: wait until ``limit`` run (or
        all that are left), leave :data:`SETTLE` for one more to start, let them all go."""
        while True:
            with self.cond:
                if not self.cond.wait_for(
                    lambda: self.started - self.ended >= min(limit, total - self.ended), HANG
                ):
                    raise AssertionError(f"{self.started - self.ended} calls run, not {limit}")
                if self.ended >= total:
                    return
            time.sleep(SETTLE)  # room for a call beyond the limit to start: it must not
            with self.cond:
                self.let_go = self.started
                self.cond.notify_all()
                if not self.cond.wait_for(lambda: self.ended >= self.let_go, HANG):
                    raise AssertionError("the calls let go did not end")


def answer_by_turn(replies: dict[str, AIMessage]) -> Callable[..., AIMessage]:
    """A scripted answer: the reply for the user's message while the turn has no tool
    message yet (several runs at once may share the model), then ``done``."""

    def answer(messages: list[BaseMessage], _tools: list[str]) -> AIMessage:
        if messages[-1].type == "human":
            return replies[messages[-1].text]
        return AIMessage("done")

    return answer


def agent_of(
    tools: list[BaseTool],
    metadata: dict[str, dict[str, Any]],
    replies: dict[str, AIMessage],
    *,
    checkpointer: bool = True,
    before: tuple[AgentMiddleware, ...] = (),
    after: tuple[AgentMiddleware, ...] = (),
    **options: Any,
) -> tuple[Any, ScriptedChatModel, ToolBudgetMiddleware]:
    """The agent, its model and its budget; ``before`` / ``after``: middleware listed
    before the budget (outer) or after it (inner)."""
    names = [t.name for t in tools]
    catalog = ToolCatalog.from_tools(tools, categories={"work": names}, tool_metadata=metadata)
    model = ScriptedChatModel(responses=[answer_by_turn(replies)], cycle=True)
    budget = ToolBudgetMiddleware(catalog, pinned=names, **options)
    saver = InMemorySaver() if checkpointer else None
    agent = create_agent(model, middleware=[*before, budget, *after], checkpointer=saver)
    return agent, model, budget


def timed_tools(
    bodies: dict[str, Callable[..., str]], timeouts: dict[str, float]
) -> tuple[list[BaseTool], dict[str, dict[str, Any]]]:
    """A sync tool per body, each in a concurrency group of its own with its ``timeout_s``."""
    tools: list[BaseTool] = [
        StructuredTool.from_function(func=body, name=name, description=f"{name.title()}.")
        for name, body in bodies.items()
    ]
    metadata = {n: {"concurrency_group": n, "timeout_s": t} for n, t in timeouts.items()}
    return tools, metadata


async def run(agent: Any, text: str, api: str, thread: str | None) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}} if thread is not None else {}
    payload = {"messages": [HumanMessage(text)]}
    if api == "invoke":  # in a thread of its own, as a server's worker would
        return await asyncio.wait_for(asyncio.to_thread(agent.invoke, payload, config), HANG)
    return await asyncio.wait_for(agent.ainvoke(payload, config), HANG)


def contents(out: dict[str, Any]) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in tool_messages(out["messages"])}


# --- one reply's batch ---------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_impure_calls_of_a_group_run_one_at_a_time_while_pure_calls_run_together(api):
    """A reply of 3 impure calls of group ``db`` and 3 pure calls of group ``search``: the
    writes run one at a time, the reads (meeting at a barrier of 3) all at once."""
    held = HeldCalls()
    meet = threading.Barrier(3, timeout=HANG)

    def read(x: int = 0) -> str:
        meet.wait()  # every read running at once, or the barrier breaks (an error answer)
        return f"read {x}"

    tools = [
        held.tool("write", "db"),
        StructuredTool.from_function(func=read, name="read", description="Read."),
    ]
    metadata = {
        "write": {"concurrency_group": "db", "is_pure": False},
        "read": {"concurrency_group": "search", "is_pure": True},
    }
    batch = [call(name, f"{name}{i}", x=i) for i in range(3) for name in ("write", "read")]
    agent, *_ = agent_of(tools, metadata, {"go": AIMessage("", tool_calls=batch)})
    out, _ = await asyncio.gather(
        run(agent, "go", api, "t"), asyncio.to_thread(held.let_go_in_waves, 3, 1)
    )
    assert contents(out) == {
        **{f"write{i}": f"write {i}" for i in range(3)},
        **{f"read{i}": f"read {i}" for i in range(3)},
    }
    assert held.most["db"] == 1
    assert out["messages"][-1].content == "done"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("pure", "option"),
    [(True, "max_concurrency"), (False, "group_limits")],
    ids=["pure-max_concurrency", "impure-group_limits"],
)
async def test_a_groups_limit_caps_its_calls_of_one_reply(api, pure, option):
    """4 calls of group ``api`` limited to 2 (in tool metadata, or the middleware's
    ``group_limits`` over a metadata limit of 1): 2 run at once, never more."""
    held = HeldCalls()
    if option == "max_concurrency":
        meta, options = {"max_concurrency": 2}, {}
    else:
        meta, options = {"max_concurrency": 1}, {"group_limits": {"api": 2}}
    metadata = {"fetch": {"concurrency_group": "api", "is_pure": pure, **meta}}
    batch = AIMessage("", tool_calls=[call("fetch", f"f{i}", x=i) for i in range(4)])
    agent, *_ = agent_of([held.tool("fetch", "api")], metadata, {"go": batch}, **options)
    out, _ = await asyncio.gather(
        run(agent, "go", api, "t"), asyncio.to_thread(held.let_go_in_waves, 4, 2)
    )
    assert contents(out) == {f"f{i}": f"fetch {i}" for i in range(4)}
    assert held.most["api"] == 2


# --- several runs of one middleware --------------------------------------------------------


@pytest.mark.parametrize(
    "apis",
    [("invoke", "invoke"), ("ainvoke", "ainvoke"), ("invoke", "ainvoke")],
    ids=["threads", "tasks", "thread-and-task"],
)
@pytest.mark.parametrize(("mode", "limit"), [("parallel_safe", 2), ("sequential", 1)])
async def test_a_groups_limit_holds_across_runs_on_two_threads(apis, mode, limit):
    """Two runs of one compiled agent (one middleware) on two thread_ids at once, each with
    a reply of 2 calls of a group limited to ``limit``: the limit is the middleware's, not
    a run's (``sequential`` runs one call at a time per thread, and keeps the limit too)."""
    held = HeldCalls()
    metadata = {"fetch": {"concurrency_group": "api", "is_pure": True, "max_concurrency": limit}}
    batch = AIMessage("", tool_calls=[call("fetch", f"f{i}", x=i) for i in range(2)])
    agent, *_ = agent_of([held.tool("fetch", "api")], metadata, {"go": batch}, mode=mode)
    *outs, _ = await asyncio.gather(
        *(run(agent, "go", api, f"thread-{k}") for k, api in enumerate(apis)),
        asyncio.to_thread(held.let_go_in_waves, 4, limit),
    )
    for out in outs:
        assert contents(out) == {"f0": "fetch 0", "f1": "fetch 1"}
    assert held.most["api"] == limit


async def test_a_waiting_call_ends_with_its_cancelled_run_and_takes_no_place():
    """Run A's call holds the one place of group ``api``; run B's call waits for it. B is
    cancelled (a server's stop): it ends at once, its tool never started, and after A a
    third run's call gets the place."""
    held = HeldCalls()
    metadata = {"fetch": {"concurrency_group": "api", "is_pure": False, "max_concurrency": 1}}
    batch = AIMessage("", tool_calls=[call("fetch", "f0")])
    agent, model, _ = agent_of([held.tool("fetch", "api")], metadata, {"go": batch})
    first = asyncio.create_task(run(agent, "go", "ainvoke", "a"))
    second = asyncio.create_task(run(agent, "go", "ainvoke", "b"))
    deadline = time.monotonic() + HANG
    while (held.started < 1 or len(model.calls) < 2) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await asyncio.sleep(SETTLE)  # B's call reaches its wait (or, wrongly, its tool)
    assert held.started == 1, "B's call ran beside A's in a group of one place"
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(second, HANG)
    third = asyncio.create_task(run(agent, "go", "ainvoke", "c"))
    await asyncio.to_thread(held.let_go_in_waves, 2, 1)
    outs = await asyncio.wait_for(asyncio.gather(first, third), HANG)
    assert [contents(o) for o in outs] == [{"f0": "fetch 0"}] * 2
    assert held.started == 2 and held.most["api"] == 1


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("how", ["error", "interrupt"])
async def test_a_call_that_raises_gives_its_place_back(api, how):
    """A call of a group of one place that raises (an error, answered to the model; or an
    interrupt, which pauses the run) gives the place back: its batch's other calls and
    another run's call then run, one at a time."""
    held = HeldCalls()

    def fail() -> None:
        if how == "error":
            raise ValueError("disk full")
        interrupt("approve?")

    tools = [held.tool("fetch", "api"), held.raising_tool("boom", "api", fail)]
    limited = {"concurrency_group": "api", "is_pure": False, "max_concurrency": 1}
    metadata = {"fetch": limited, "boom": limited}
    replies = {
        "first": AIMessage(
            "", tool_calls=[call("boom", "b0"), *(call("fetch", f"f{i}", x=i) for i in range(2))]
        ),
        "second": AIMessage("", tool_calls=[call("fetch", "f9", x=9)]),
    }
    agent, *_ = agent_of(tools, metadata, replies)
    waves = asyncio.create_task(asyncio.to_thread(held.let_go_in_waves, 3, 1))
    out = await run(agent, "first", api, "one")
    later = await run(agent, "second", api, "two")
    await asyncio.wait_for(waves, HANG)
    answers = contents(out)
    assert {k: answers[k] for k in ("f0", "f1")} == {"f0": "fetch 0", "f1": "fetch 1"}
    if how == "error":
        assert "disk full" in answers["b0"]
    else:
        assert "b0" not in answers and out["__interrupt__"][0].value == "approve?"
    assert contents(later) == {"f9": "fetch 9"}
    assert held.most["api"] == 1


# --- a sync call abandoned at its timeout (or with its cancelled run) ----------------------


class SlowCall:
    """A sync tool whose call runs until the test lets it go (past its ``timeout_s``), and
    tools that note, when they start, whether that call still runs."""

    def __init__(self) -> None:
        self.running = threading.Event()
        self.let_go = threading.Event()
        self.beside: list[bool] = []  # one per other call that started: was the slow one running?

    def slow(self, name: str = "slow") -> BaseTool:
        def body(x: int = 0) -> str:
            self.running.set()
            try:
                if not self.let_go.wait(HANG):
                    raise TimeoutError(f"{name} was never let go")
            finally:
                self.running.clear()
            return f"{name} {x}"

        return StructuredTool.from_function(func=body, name=name, description="Slow.")

    def other(self, name: str) -> BaseTool:
        def body(x: int = 0) -> str:
            self.beside.append(self.running.is_set())
            return f"{name} {x}"

        return StructuredTool.from_function(func=body, name=name, description=f"{name}.")

    async def end(self, budget: ToolBudgetMiddleware, group: str) -> None:
        """Let the slow call go and wait until the middleware saw its thread end."""
        self.let_go.set()
        await self.wait_lingering(budget, group)

    @staticmethod
    async def wait_lingering(budget: ToolBudgetMiddleware, group: str) -> None:
        """Wait until the middleware saw the abandoned calls of ``group`` end."""
        lingering = budget.runner.pipeline.lingering
        deadline = time.monotonic() + HANG
        while lingering.running(group) != (0, 0):
            assert time.monotonic() < deadline, "the abandoned call never ended"
            await asyncio.sleep(0.01)


async def test_a_sync_call_past_its_timeout_keeps_its_group_until_its_thread_ends():
    """Under ``ainvoke`` an impure sync call of group ``db`` passes its ``timeout_s``: it is
    answered with the timeout, its thread runs on, and the reply's next impure call of the
    group never starts beside it (it waits one more ``timeout_s`` for it, then is refused,
    as under the executor). Once the thread ends, the group is free again."""
    calls = SlowCall()
    tools = [calls.slow(), calls.other("write")]
    impure = {"concurrency_group": "db", "is_pure": False}
    metadata = {"slow": {**impure, "timeout_s": 0.2}, "write": impure}
    replies = {
        "go": AIMessage("", tool_calls=[call("slow", "s0"), call("write", "w0")]),
        "again": AIMessage("", tool_calls=[call("write", "w1", x=1)]),
    }
    agent, _, budget = agent_of(tools, metadata, replies)
    answers = contents(await run(agent, "go", "ainvoke", "t"))
    assert "timed out after 0.2 s" in answers["s0"]
    assert "may have taken effect, or may still" in answers["s0"]  # a thread: not cancelled
    assert "an earlier call to 'slow' timed out and is still running" in answers["w0"]
    assert calls.running.is_set() and calls.beside == []
    await calls.end(budget, "db")
    assert contents(await run(agent, "again", "ainvoke", "u")) == {"w1": "write 1"}
    assert calls.beside == [False]


async def test_a_sync_call_past_its_timeout_counts_toward_its_groups_limit_until_it_ends():
    """Group ``api`` runs one call at a time. Run A's sync call passes its ``timeout_s`` and
    its thread runs on: run B's call of the group is refused rather than run beside it;
    once the thread ends, run C's call runs."""
    calls = SlowCall()
    tools = [calls.slow(), calls.other("fetch")]
    limited = {"concurrency_group": "api", "is_pure": True, "max_concurrency": 1}
    metadata = {"slow": {**limited, "timeout_s": 0.2}, "fetch": {**limited, "timeout_s": HANG}}
    replies = {
        "slow": AIMessage("", tool_calls=[call("slow", "s0")]),
        "fetch": AIMessage("", tool_calls=[call("fetch", "f0")]),
    }
    agent, _, budget = agent_of(tools, metadata, replies)
    assert "timed out after 0.2 s" in contents(await run(agent, "slow", "ainvoke", "a"))["s0"]
    refused = contents(await run(agent, "fetch", "ainvoke", "b"))["f0"]
    assert "timed out and are still running" in refused and "at most 1 calls" in refused
    assert calls.running.is_set() and calls.beside == []
    await calls.end(budget, "api")
    assert contents(await run(agent, "fetch", "ainvoke", "c")) == {"f0": "fetch 0"}
    assert calls.beside == [False]


async def test_a_sync_call_with_a_timeout_keeps_its_place_after_its_run_is_cancelled():
    """Run A's sync call (with a ``timeout_s`` it does not reach) holds the one place of
    group ``api``; A is cancelled while the call's thread runs on. Run B's call of the group
    waits for that thread to end, then runs: never beside it."""
    calls = SlowCall()
    tools = [calls.slow(), calls.other("fetch")]
    limited = {"concurrency_group": "api", "is_pure": True, "max_concurrency": 1}
    metadata = {"slow": {**limited, "timeout_s": HANG}, "fetch": limited}
    replies = {
        "slow": AIMessage("", tool_calls=[call("slow", "s0")]),
        "fetch": AIMessage("", tool_calls=[call("fetch", "f0")]),
    }
    agent, *_ = agent_of(tools, metadata, replies)
    first = asyncio.create_task(run(agent, "slow", "ainvoke", "a"))
    assert await asyncio.to_thread(calls.running.wait, HANG)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = asyncio.create_task(run(agent, "fetch", "ainvoke", "b"))
    await asyncio.sleep(SETTLE)  # room for B's call to start: it must not
    assert calls.beside == [] and not second.done()
    calls.let_go.set()
    assert contents(await second) == {"f0": "fetch 0"}
    assert calls.beside == [False]


async def test_a_call_that_waited_for_a_pool_thread_gets_its_whole_timeout_once_started():
    """Review 34a: 4 impure sync calls in 4 groups, equal ``timeout_s``, 2 pool threads
    (``max_parallel=2``). The tool node hands the middleware one call at a time, a little
    apart, and each call's timeout counted from its own arrival: a waiting call started in
    the place the calls holding the threads gave back at their deadline, with a moment of
    its own left, and was answered "timed out" while it ran. Under the middleware a call's
    ``timeout_s`` now counts from its thread's start: a call that starts gets all of it (it
    is answered no sooner), and one that gets no thread within it is not run."""
    started: dict[str, float] = {}
    let_go = threading.Event()
    timeout = 0.3

    def sender(name: str) -> BaseTool:
        def body(x: int = 0) -> str:
            started[f"{name} {x}"] = time.monotonic()
            let_go.wait(HANG)
            return "sent"

        return StructuredTool.from_function(func=body, name=name, description="Send.")

    names = [f"send_{i}" for i in range(4)]
    tools = [sender(n) for n in names]
    impure = {"concurrency_group": "", "is_pure": False, "timeout_s": timeout}
    metadata = {n: {**impure, "concurrency_group": n} for n in names}
    rounds = 4  # the late start needed the calls' arrivals to be apart: most rounds showed it
    replies = {
        f"r{r}": AIMessage("", tool_calls=[call(n, f"r{r}-{i}", x=r) for i, n in enumerate(names)])
        for r in range(rounds)
    }
    agent, _, budget = agent_of(tools, metadata, replies, max_parallel=2)
    try:
        for r in range(rounds):
            answers = contents(await run(agent, f"r{r}", "ainvoke", f"t{r}"))
            answered = time.monotonic()
            mine = {k.split()[0]: t for k, t in started.items() if k.endswith(f" {r}")}
            assert len(mine) >= 2, mine
            for name, start in mine.items():  # each answered at its own deadline, or later
                assert answered - start >= 0.8 * timeout, f"round {r}: {name} was cut early"
            for i, name in enumerate(names):
                expected = "timed out after 0.3 s" if name in mine else f"{name!r} was not run"
                assert expected in answers[f"r{r}-{i}"], answers[f"r{r}-{i}"]
            let_go.set()
            for name in names:  # the abandoned threads end: their groups are free again
                await SlowCall.wait_lingering(budget, name)
            let_go.clear()
    finally:
        let_go.set()


async def test_a_call_that_gets_no_pool_thread_within_its_timeout_is_not_run():
    """Run A's call holds the only thread (``max_parallel=1``; ``timeout_s`` 20 s); run B's
    call, ``timeout_s`` 0.3 s, waits for it: B is answered that it was not run, and never
    starts, even once A's thread is free."""
    calls = SlowCall()
    tools = [calls.slow(), calls.other("fetch")]
    metadata = {
        "slow": {"concurrency_group": "slow", "timeout_s": HANG},
        "fetch": {"concurrency_group": "fetch", "timeout_s": 0.3},
    }
    replies = {
        "slow": AIMessage("", tool_calls=[call("slow", "s0")]),
        "fetch": AIMessage("", tool_calls=[call("fetch", "f0")]),
    }
    agent, *_ = agent_of(tools, metadata, replies, max_parallel=1)
    first = asyncio.create_task(run(agent, "slow", "ainvoke", "a"))
    try:
        assert await asyncio.to_thread(calls.running.wait, HANG)
        refused = contents(await run(agent, "fetch", "ainvoke", "b"))["f0"]
        assert "Error: tool 'fetch' was not run: its timeout_s (0.3 s) ran out" in refused
    finally:
        calls.let_go.set()
    assert contents(await first) == {"s0": "slow 0"}
    await asyncio.sleep(SETTLE)  # the thread is free: a call left waiting would start now
    assert calls.beside == []


async def test_a_call_held_back_by_the_runs_max_concurrency_keeps_its_whole_timeout():
    """Under the run's ``max_concurrency=2`` the tool node starts the reply's third call only
    when the first has ended (0.6 s in), while the second still runs: that wait is not the
    third call's, so its ``timeout_s`` counts from its own start (a start shared with the
    first call would leave it 0.4 s of its 1 s)."""

    def worker(name: str, seconds: float) -> Callable[..., str]:
        def body(x: int = 0) -> str:
            time.sleep(seconds)
            return f"{name} {x}"

        return body

    bodies = {"first": worker("first", 0.6), "second": worker("second", 1.3)}
    bodies["third"] = worker("third", 0.6)
    tools, metadata = timed_tools(bodies, {"first": 1.0, "second": 3.0, "third": 1.0})
    reply = AIMessage("", tool_calls=[call("first", "a"), call("second", "b"), call("third", "c")])
    agent, *_ = agent_of(tools, metadata, {"go": reply})
    config = {"configurable": {"thread_id": "t"}, "max_concurrency": 2}
    payload = {"messages": [HumanMessage("go")]}
    out = await asyncio.wait_for(agent.ainvoke(payload, config), HANG)
    assert contents(out) == {"a": "first 0", "b": "second 0", "c": "third 0"}


async def test_a_call_retried_by_an_outer_middleware_gets_its_whole_timeout_again():
    """``ToolRetryMiddleware`` listed before the budget retries a failed call while another
    call of its reply still runs: the retry reaches the middleware 0.7 s after the reply's
    first call, and its ``timeout_s`` (1 s) counts from that arrival, not from the reply's."""
    attempts: list[float] = []

    def flaky(x: int = 0) -> str:
        attempts.append(time.monotonic())
        time.sleep(0.6)
        if len(attempts) == 1:
            raise ConnectionError("dropped")
        return f"flaky {x}"

    def long(x: int = 0) -> str:
        time.sleep(1.5)
        return f"long {x}"

    tools, metadata = timed_tools({"flaky": flaky, "long": long}, {"flaky": 1.0, "long": 5.0})
    reply = AIMessage("", tool_calls=[call("flaky", "f"), call("long", "l")])
    retry = ToolRetryMiddleware(max_retries=1, initial_delay=0.1, jitter=False)
    agent, *_ = agent_of(tools, metadata, {"go": reply}, before=(retry,), handle_tool_errors=False)
    out = await run(agent, "go", "ainvoke", "t")
    assert len(attempts) == 2
    assert contents(out) == {"f": "flaky 0", "l": "long 0"}


async def test_an_inner_middlewares_retry_of_a_call_that_waited_for_a_thread_runs():
    """Review 36a: ``ToolRetryMiddleware`` listed after the budget retries a sync call that
    had waited 0.5 s for the only pool thread (``max_parallel=1``). The retry's thread was
    still held to the call's arrival plus ``timeout_s``: cancelled by the pool, it raised
    ``CancelledError`` inside the tool node and the whole run failed. The retry runs within
    the time the call's start left it (0.4 s of 1 s)."""
    attempts: list[float] = []

    def hold(x: int = 0) -> str:
        time.sleep(0.5)
        return "held"

    def flaky(x: int = 0) -> str:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            time.sleep(0.6)
            raise ConnectionError("dropped")
        return "ok"

    tools, metadata = timed_tools({"hold": hold, "flaky": flaky}, {"hold": 5.0, "flaky": 1.0})
    reply = AIMessage("", tool_calls=[call("hold", "h"), call("flaky", "f")])
    retry = ToolRetryMiddleware(max_retries=1, initial_delay=0.0, backoff_factor=0.0, jitter=False)
    agent, *_ = agent_of(tools, metadata, {"go": reply}, after=(retry,), max_parallel=1)
    out = await run(agent, "go", "ainvoke", "t")
    assert contents(out) == {"h": "held", "f": "ok"}
    assert len(attempts) == 2


class AttemptTimeout(AgentMiddleware):
    """A per-attempt timeout, as users write one (listed after the budget)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
    ) -> ToolMessage | Command:
        try:
            return await asyncio.wait_for(handler(request), self.seconds)
        except TimeoutError:
            call_id = request.tool_call["id"]
            return ToolMessage(f"over {self.seconds} s", status="error", tool_call_id=call_id)


async def test_a_thread_an_inner_middleware_stopped_awaiting_keeps_its_group_busy():
    """Review 37a: an inner middleware's own timeout answered a pooled sync call without
    waiting for its thread; the budget did not count the thread, so the reply's next impure
    call of the group ran beside it. The thread now counts until it ends: the next call
    waits for it, as after the budget's own timeout."""
    probe = SlowCall()
    tools = [probe.slow("write"), probe.other("write_more")]
    impure = {"concurrency_group": "db", "is_pure": False, "timeout_s": HANG}
    metadata = {"write": impure, "write_more": impure}
    reply = AIMessage("", tool_calls=[call("write", "w1"), call("write_more", "w2")])
    agent, _, budget = agent_of(tools, metadata, {"go": reply}, after=(AttemptTimeout(0.2),))
    running = asyncio.create_task(run(agent, "go", "ainvoke", "t"))
    assert await asyncio.to_thread(probe.running.wait, HANG)
    await asyncio.sleep(SETTLE + 0.2)  # past the inner timeout: room for w2 to start beside it
    assert probe.beside == []
    await probe.end(budget, "db")
    answers = contents(await running)
    assert answers["w1"] == "over 0.2 s"
    assert probe.beside == [False] or "still running" in answers["w2"], answers


async def test_under_invoke_a_sync_call_runs_to_its_end_in_its_turn():
    """Under ``invoke`` the middleware does not cut a sync call at its ``timeout_s`` (the
    tool node runs it in the run's thread): it answers when it ends, holding its turn
    meanwhile, so the reply's next impure call of the group runs after it."""
    calls = SlowCall()
    tools = [calls.slow(), calls.other("write")]
    impure = {"concurrency_group": "db", "is_pure": False}
    metadata = {"slow": {**impure, "timeout_s": 0.05}, "write": impure}
    reply = AIMessage("", tool_calls=[call("slow", "s0"), call("write", "w0")])
    agent, *_ = agent_of(tools, metadata, {"go": reply})
    running = asyncio.create_task(run(agent, "go", "invoke", "t"))
    assert await asyncio.to_thread(calls.running.wait, HANG)
    await asyncio.sleep(SETTLE)  # past the timeout, and room for the write to start: it must not
    # The tool node may hand the write over first (docs/middleware.md): it then ran before
    # the slow call started ([False]). What must not happen is a start beside it ([True]).
    assert calls.beside in ([], [False])
    calls.let_go.set()
    assert contents(await running) == {"s0": "slow 0", "w0": "write 0"}
    assert calls.beside == [False]


# --- the batch of a reply --------------------------------------------------------------------


@pytest.mark.parametrize("checkpointer", [False, True], ids=["no-thread", "two-threads"])
async def test_runs_whose_replies_share_an_id_keep_their_own_turns(checkpointer):
    """Two runs at once (one under ``invoke``, one under ``ainvoke``) whose replies have the
    same id (a model that sets its own ids, or replies from an LLM cache), each with one
    impure call of group ``db``: the calls are of two batches, so they run side by side
    (they meet at a barrier), without a ``thread_id`` (no checkpointer) as well."""
    meet = threading.Barrier(2, timeout=HANG / 2)  # broken before the runs' hang guard

    def write(x: int = 0) -> str:
        meet.wait()  # both calls running at once, or the barrier breaks (an error answer)
        return f"write {x}"

    tools = [StructuredTool.from_function(func=write, name="write", description="Write.")]
    metadata = {"write": {"concurrency_group": "db", "is_pure": False}}
    reply = AIMessage("", id="reply-1", tool_calls=[call("write", "w0")])
    agent, *_ = agent_of(tools, metadata, {"go": reply}, checkpointer=checkpointer)
    threads = ("a", "b") if checkpointer else (None, None)
    outs = await asyncio.gather(
        run(agent, "go", "invoke", threads[0]), run(agent, "go", "ainvoke", threads[1])
    )
    assert [contents(out) for out in outs] == [{"w0": "write 0"}] * 2


@pytest.mark.parametrize(
    ("value", "error"),
    [({"api": 0}, ValueError), ([("api", 2)], TypeError), ({1: 2}, TypeError)],
    ids=["below-1", "not-a-mapping", "key-not-a-group-name"],
)
def test_a_bad_group_limits_gets_the_nodes_error(value, error):
    catalog = ToolCatalog.from_tools([HeldCalls().tool("fetch", "api")])
    with pytest.raises(error) as nodes:
        ToolExecutor(catalog, group_limits=value)
    with pytest.raises(error) as ours:
        ToolBudgetMiddleware(catalog, group_limits=value)
    assert str(nodes.value).startswith("ToolExecutor: option group_limits")  # who took it
    assert str(ours.value) == str(nodes.value).replace("ToolExecutor", "ToolBudgetMiddleware")
