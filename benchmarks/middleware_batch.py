"""ToolBudgetMiddleware's cost per tool call against the size of the model's reply.

One ``langchain.agents.create_agent`` agent with ``ToolBudgetMiddleware`` over a
synthetic catalog (200 tools, noop bodies), and a scripted model that answers a
user turn with one reply of ``n`` tool calls, half built-in (``search_tools`` and
``add_tool``, alternating) and half regular (calls to pinned, visible catalog
tools), built-in and regular calls interleaved, then answers "done" once the
tool messages are in. ``max_meta_calls`` is raised so every built-in call is
really answered, none refused by the per-turn bound.

Measured per round, interleaved in a rotated order: a turn with a reply of 0
calls (the model answers at once: the turn's fixed cost), of 4 calls (2 built-in,
2 regular) and of 40 calls (20 built-in, 20 regular), under ``invoke`` and
``ainvoke``. Reported: the median ms per turn, the ms per call
``(turn(n) - turn(0)) / n`` (what each call adds to the turn) and the plain
``turn(n) / n``; the ratio of the per-call figures at 40 to those at 4.
Target: per-call time at 40 within 2x that at 4 (linear in the reply's size).

Run: ``python benchmarks/middleware_batch.py [--rounds 30] [--sizes 4 40]``.
Writes ``benchmarks/results/middleware_batch.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import median_ms, print_table, synthetic_world, write_results  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402

from langgraph_toolbudget import BudgetConfig, ToolBudgetMiddleware  # noqa: E402
from langgraph_toolbudget.testing import ScriptedChatModel  # noqa: E402

TOOLS = 200
PINNED = 4  # the regular calls go to these (visible whatever the selection chose)
BUILTIN_NAMES = ("search_tools", "add_tool")


def reply(n: int, tools: list[str], pinned: list[str]) -> AIMessage:
    """A reply of ``n`` calls: built-in and regular alternating, built-in first."""
    calls = []
    for i in range(n):
        k = i // 2
        if i % 2 == 0 and k % 2 == 0:
            name, args = "search_tools", {"query": tools[(7 * k) % len(tools)].split("_")[1]}
        elif i % 2 == 0:
            name, args = "add_tool", {"tool_names": [tools[(11 * k) % len(tools)]]}
        else:
            tool = pinned[k % len(pinned)]
            name, args = tool, {f"{tool.split('_')[1]}_id": f"id-{i}", "limit": "3"}
        calls.append({"name": name, "args": args, "id": f"c{i}", "type": "tool_call"})
    return AIMessage("", tool_calls=calls)


def scripted(tools: list[str], pinned: list[str]) -> ScriptedChatModel:
    """Answers a user message "calls N" with a reply of N calls, then "done"."""

    def answer(messages: list[BaseMessage], _tools: list[str]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and last.text.startswith("calls "):
            n = int(last.text.split()[1])
            return reply(n, tools, pinned) if n else AIMessage("done")
        return AIMessage("done")

    return ScriptedChatModel(responses=[answer], cycle=True)


def build() -> tuple[Any, list[str]]:
    """The agent, and the names of its pinned tools."""
    world = synthetic_world(TOOLS, 10)
    catalog = world.catalog()
    names = catalog.tool_names
    pinned = names[:PINNED]
    config = BudgetConfig(pinned=pinned, max_meta_calls=1_000, max_iterations=50)
    agent = create_agent(
        scripted(names, pinned), middleware=[ToolBudgetMiddleware(catalog, config=config)]
    )
    return agent, pinned


def check(out: dict[str, Any], n: int) -> None:
    """Every call of the reply got one successful answer, and the turn ended with "done"."""
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    if len(answers) != n or len({m.tool_call_id for m in answers}) != n:
        raise RuntimeError(f"reply of {n}: {len(answers)} tool messages")
    failed = [m for m in answers if m.status == "error"]
    if failed:
        raise RuntimeError(f"reply of {n}: {failed[0].name} failed: {failed[0].content}")
    if out["messages"][-1].content != "done":
        raise RuntimeError(f"reply of {n}: unexpected end {out['messages'][-1]!r}")


def measure(api: str, sizes: list[int], rounds: int) -> dict[str, Any]:
    agent, _ = build()
    loop = asyncio.new_event_loop()

    def turn(n: int) -> Callable[[], dict[str, Any]]:
        payload = {"messages": [HumanMessage(f"calls {n}")]}
        if api == "invoke":
            return lambda: agent.invoke(payload)
        return lambda: loop.run_until_complete(agent.ainvoke(payload))

    cells = [0, *sizes]
    for n in cells:  # warm up; check each really ran
        for _ in range(2):
            check(turn(n)(), n)
    times: dict[int, list[float]] = {n: [] for n in cells}
    for r in range(rounds):
        for n in cells[r % len(cells) :] + cells[: r % len(cells)]:
            run = turn(n)
            gc.collect()
            start = time.perf_counter()
            run()
            times[n].append(time.perf_counter() - start)
    loop.close()
    fixed = median_ms(times[0])
    per_turn = {n: median_ms(times[n]) for n in cells}
    # per round, so a slow stretch of the machine weighs on both terms
    marginal = {
        n: statistics.median(
            (t - t0) * 1000.0 / n for t, t0 in zip(times[n], times[0], strict=True)
        )
        for n in sizes
    }
    plain = {n: per_turn[n] / n for n in sizes}
    small, large = min(sizes), max(sizes)
    return {
        "api": api,
        "rounds": rounds,
        "median_ms_per_turn": {str(n): per_turn[n] for n in cells},
        "fixed_ms_per_turn": fixed,
        "ms_per_call": {str(n): marginal[n] for n in sizes},
        "ms_per_call_plain": {str(n): plain[n] for n in sizes},
        "ratio_per_call": marginal[large] / marginal[small],
        "ratio_per_call_plain": plain[large] / plain[small],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--sizes", type=int, nargs=2, default=[4, 40])
    parser.add_argument("--out", default="middleware_batch", help="results file name")
    args = parser.parse_args()
    results = []
    small, large = sorted(args.sizes)
    for api in ("invoke", "ainvoke"):
        result = measure(api, [small, large], args.rounds)
        results.append(result)
        t, c, p = result["median_ms_per_turn"], result["ms_per_call"], result["ms_per_call_plain"]
        print(f"\n{api} ({args.rounds} rounds)")
        print_table(
            ["calls in the reply", "ms / turn", "ms / call (turn - turn(0)) / n", "turn / n"],
            [["0", t["0"], "", ""]]
            + [[str(n), t[str(n)], c[str(n)], p[str(n)]] for n in (small, large)],
        )
        print(
            f"per call, {large} vs {small}: {result['ratio_per_call']:.2f}x "
            f"(plain turn / n: {result['ratio_per_call_plain']:.2f}x); target <= 2x"
        )
    path = write_results(
        args.out,
        {
            "langchain": version("langchain"),
            "catalog": f"synthetic, {TOOLS} tools, {PINNED} pinned",
            "reply": "half built-in (search_tools / add_tool), half regular, interleaved",
            "results": results,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
