"""Wall time of one batch of sleeping pure tools: ToolExecutor parallel_safe vs ToolNode, same run.

Two cases, with the tools' metadata left at its defaults apart from ``is_pure=True``
(what a user who marks tools pure gets):

- ``sync``: 8 sync tools, each ``time.sleep(0.3)``;
- ``async``: 20 async tools, each ``asyncio.sleep(0.05)``.

One AI message calls all of them, in a real graph (``agent -> tools -> END``,
``agent`` a plain node emitting that message); the ``tools`` node is a
``ToolExecutor`` in ``parallel_safe`` or ``sequential`` mode, or LangGraph's
``ToolNode``. Wall time is the whole graph run, under ``invoke`` and ``ainvoke``,
repetitions interleaved. Reported: medians and the ratio to ``ToolNode`` in the
same run. Targets: sync ``parallel_safe`` <= 0.6 x ToolNode (our pool is not
capped at the interpreter's default pool size); async <= 1.05 x ToolNode. The sync
ratio depends on the machine: ToolNode runs sync tools in the interpreter's default
pool, ``min(32, CPUs + 4)`` threads, so from 4 CPUs on it runs the 8 calls at once too
and the two take the same time (the script says so); the executor's pool is never
smaller (``default_max_parallel``).

Run: ``python benchmarks/parallel_execution.py [--repeats 15]``.
Writes ``benchmarks/results/parallel_execution.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402

from langgraph_toolbudget import (  # noqa: E402
    BudgetConfig,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
)

CASES = {"sync": (8, 0.3), "async": (20, 0.05)}
"""kind -> (number of tools, seconds each sleeps)."""
TARGET_RATIO = {"sync": 0.6, "async": 1.05}
"""parallel_safe wall / ToolNode wall, at most."""
NA = "n/a (ToolNode cannot run async-only tools under invoke)"


def sleeping_tools(kind: str) -> list[BaseTool]:
    n_tools, sleep_s = CASES[kind]
    tools: list[BaseTool] = []
    for i in range(n_tools):
        name = f"{kind}_fetch_{i:02d}"

        def work(item: str = "x", _name: str = name, _s: float = sleep_s) -> str:
            time.sleep(_s)
            return f"{_name}: {item}"

        async def awork(item: str = "x", _name: str = name, _s: float = sleep_s) -> str:
            await asyncio.sleep(_s)
            return f"{_name}: {item}"

        description = f"Fetch record {i} from a slow remote service."
        if kind == "sync":
            tools.append(
                StructuredTool.from_function(func=work, name=name, description=description)
            )
        else:
            tools.append(
                StructuredTool.from_function(coroutine=awork, name=name, description=description)
            )
    return tools


def build_app(tools: list[BaseTool], tools_node: Any) -> Any:
    calls = [
        {"name": t.name, "args": {"item": str(i)}, "id": f"call_{i}"} for i, t in enumerate(tools)
    ]

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage("", tool_calls=calls)]}

    graph = StateGraph(ToolBudgetState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools_node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "tools")
    graph.add_edge("tools", END)
    return graph.compile()


def check(out: dict[str, Any]) -> None:
    answers = [m for m in out["messages"] if m.type == "tool"]
    ai = next(m for m in out["messages"] if m.type == "ai")
    if len(answers) != len(ai.tool_calls) or any(m.status == "error" for m in answers):
        raise RuntimeError(f"bad answers: {[m.content for m in answers][:3]}")


def measure(
    apps: dict[str, Any], payload: dict[str, Any], api: str, repeats: int
) -> dict[str, list[float]]:
    """Interleaved repetitions: each round runs every variant once, in a rotated order."""
    names = list(apps)
    samples: dict[str, list[float]] = {n: [] for n in names}

    def order(r: int) -> list[str]:
        return names[r % len(names) :] + names[: r % len(names)]

    async def arun() -> None:
        for r in range(repeats + 1):
            for name in order(r):
                start = time.perf_counter()
                out = await apps[name].ainvoke(payload)
                samples[name].append(time.perf_counter() - start)
                check(out)

    if api == "ainvoke":
        asyncio.run(arun())
    else:
        for r in range(repeats + 1):
            for name in order(r):
                start = time.perf_counter()
                out = apps[name].invoke(payload)
                samples[name].append(time.perf_counter() - start)
                check(out)
    return {n: v[1:] for n, v in samples.items()}  # round 0 warms up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    rows: list[list[Any]] = []
    results: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    for kind in ("sync", "async"):
        tools = sleeping_tools(kind)
        names = [t.name for t in tools]
        meta = {n: {"is_pure": True} for n in names}  # nothing else: the defaults a user gets
        catalog = ToolCatalog.from_tools(tools, categories={"io": names}, tool_metadata=meta)
        payload = {"messages": [HumanMessage("fetch everything")], "selected_tools": names}
        nodes = {
            "ToolExecutor[parallel_safe]": ToolExecutor(catalog, mode="parallel_safe"),
            "ToolExecutor[sequential]": ToolExecutor(catalog, mode="sequential"),
            "ToolNode": ToolNode(tools),
        }
        for api in ("ainvoke", "invoke"):
            runnable = {
                name: build_app(tools, node)
                for name, node in nodes.items()
                # ToolNode raises NotImplementedError on async-only tools under invoke
                # (ToolExecutor, a ToolNode subclass, runs them: `type`, not isinstance)
                if not (kind == "async" and api == "invoke" and type(node) is ToolNode)
            }
            measured = measure(runnable, payload, api, args.repeats)
            base = statistics.median(measured["ToolNode"]) if "ToolNode" in measured else None
            for name in nodes:
                if name not in measured:
                    results.append({"tools": kind, "api": api, "variant": name, "error": NA})
                    rows.append([kind, api, name, NA, "", ""])
                    continue
                median = statistics.median(measured[name])
                ratio = round(median / base, 3) if base else None
                entry = {
                    "tools": kind,
                    "calls": len(tools),
                    "sleep_ms": CASES[kind][1] * 1000,
                    "api": api,
                    "variant": name,
                    "median_wall_ms": round(median * 1000, 1),
                    "min_wall_ms": round(min(measured[name]) * 1000, 1),
                    "ratio_to_toolnode": ratio,
                }
                results.append(entry)
                rows.append([kind, api, name, entry["median_wall_ms"], entry["min_wall_ms"], ratio])
                if name == "ToolExecutor[parallel_safe]" and ratio is not None:
                    target = TARGET_RATIO[kind]
                    verdicts.append(
                        {
                            "tools": kind,
                            "api": api,
                            "ratio": ratio,
                            "target": target,
                            "met": ratio <= target,
                        }  # fmt: skip
                    )
    toolnode_pool = min(32, (os.cpu_count() or 1) + 4)  # the interpreter's default pool
    executor_pool = BudgetConfig().max_parallel
    print(
        f"sync: 8 calls x 300 ms; async: 20 calls x 50 ms; {os.cpu_count()} CPUs: ToolNode's "
        f"pool {toolnode_pool} threads, the executor's {executor_pool}\n"
    )
    if toolnode_pool >= CASES["sync"][0]:
        print(
            f"note: ToolNode's pool runs all {CASES['sync'][0]} sync calls at once on this "
            "machine, as the executor does: expect a sync ratio near 1, not the target's 0.6\n"
        )
    print_table(["tools", "api", "variant", "median ms", "min ms", "/ ToolNode"], rows)
    print()
    for v in verdicts:
        verdict = "met" if v["met"] else "MISSED"
        print(
            f"parallel_safe, {v['tools']} tools, {v['api']}: {v['ratio']:.3f} x ToolNode "
            f"(target <= {v['target']}): {verdict}"
        )
    path = write_results(
        "parallel_execution",
        {
            "repeats": args.repeats,
            "metadata": "is_pure=True only (defaults otherwise)",
            "toolnode_pool_threads": toolnode_pool,
            "executor_pool_threads": executor_pool,
            "targets": {
                k: f"parallel_safe wall <= {v} x ToolNode" for k, v in TARGET_RATIO.items()
            },
            "verdicts": verdicts,
            "results": results,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
