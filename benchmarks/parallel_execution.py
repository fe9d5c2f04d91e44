"""Wall time of a batch of 20 tool calls that each sleep 50 ms: parallel_safe vs sequential.

Twenty real tools, declared ``is_pure=True`` with ``max_concurrency=20`` in one
concurrency group, each sleeping 50 ms: ``asyncio.sleep`` (async tools) or
``time.sleep`` (sync tools, which run in worker threads). One AI message calls
all twenty, in a real graph (``agent -> tools -> END``, ``agent`` a plain node
emitting that message); the ``tools`` node is a ``ToolExecutor`` in
``parallel_safe`` or ``sequential`` mode, or LangGraph's ``ToolNode`` (for
reference). Wall time is the whole graph run, under ``invoke`` and ``ainvoke``.

Target: ``parallel_safe`` with the async tools, wall <= 1.2 x 50 ms = 60 ms.

Run: ``python benchmarks/parallel_execution.py [--repeats 25]`` (interleaved repetitions).
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

from langgraph_toolbudget import ToolBudgetState, ToolCatalog, ToolExecutor  # noqa: E402

N_TOOLS = 20
SLEEP_S = 0.05
TARGET_S = 1.2 * SLEEP_S
NA = "n/a (ToolNode cannot run async-only tools under invoke)"


def sleeping_tools(kind: str) -> list[BaseTool]:
    tools: list[BaseTool] = []
    for i in range(N_TOOLS):
        name = f"{kind}_fetch_{i:02d}"

        def work(item: str = "x", _name: str = name) -> str:
            time.sleep(SLEEP_S)
            return f"{_name}: {item}"

        async def awork(item: str = "x", _name: str = name) -> str:
            await asyncio.sleep(SLEEP_S)
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
    if len(answers) != N_TOOLS or any(m.status == "error" for m in answers):
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
    parser.add_argument("--repeats", type=int, default=25)
    args = parser.parse_args()

    rows: list[list[Any]] = []
    results: list[dict[str, Any]] = []
    for kind in ("async", "sync"):
        tools = sleeping_tools(kind)
        names = [t.name for t in tools]
        meta = {
            n: {"is_pure": True, "max_concurrency": N_TOOLS, "concurrency_group": "io"}
            for n in names
        }
        catalog = ToolCatalog.from_tools(tools, categories={"io": names}, tool_metadata=meta)
        payload = {"messages": [HumanMessage("fetch everything")], "selected_tools": names}
        nodes = {
            "ToolExecutor[parallel_safe]": ToolExecutor(catalog, mode="parallel_safe"),
            "ToolExecutor[sequential]": ToolExecutor(catalog, mode="sequential"),
            "ToolNode (reference)": ToolNode(tools),
        }
        for api in ("ainvoke", "invoke"):
            runnable = {
                name: build_app(tools, node)
                for name, node in nodes.items()
                # ToolNode raises NotImplementedError on async-only tools under invoke
                if not (kind == "async" and api == "invoke" and isinstance(node, ToolNode))
            }
            measured = measure(runnable, payload, api, args.repeats)
            for name in nodes:
                if name not in measured:
                    results.append({"tools": kind, "api": api, "variant": name, "error": NA})
                    rows.append([kind, api, name, NA, "", "", ""])
                    continue
                samples = measured[name]
                median = statistics.median(samples)
                entry = {
                    "tools": kind,
                    "api": api,
                    "variant": name,
                    "median_wall_ms": round(median * 1000, 2),
                    "min_wall_ms": round(min(samples) * 1000, 2),
                    "max_wall_ms": round(max(samples) * 1000, 2),
                    "x_single_call": round(median / SLEEP_S, 2),
                }
                results.append(entry)
                rows.append(
                    [
                        kind,
                        api,
                        name,
                        entry["median_wall_ms"],
                        entry["min_wall_ms"],
                        entry["max_wall_ms"],
                        entry["x_single_call"],
                    ]
                )
    print(f"{N_TOOLS} calls, each sleeping {SLEEP_S * 1000:.0f} ms; {os.cpu_count()} CPUs\n")
    print_table(["tools", "api", "variant", "median ms", "min ms", "max ms", "x 50 ms"], rows)
    target_rows = [
        r
        for r in results
        if r["tools"] == "async" and r["variant"] == "ToolExecutor[parallel_safe]"
    ]
    worst = max(r["median_wall_ms"] for r in target_rows)
    verdict = "met" if worst <= TARGET_S * 1000 else "MISSED"
    print(
        f"\nparallel_safe, async tools: worst median {worst:.1f} ms "
        f"(target <= {TARGET_S * 1000:.0f} ms): {verdict}"
    )
    path = write_results(
        "parallel_execution",
        {
            "calls": N_TOOLS,
            "sleep_ms": SLEEP_S * 1000,
            "repeats": args.repeats,
            "target": f"parallel_safe async wall <= {TARGET_S * 1000:.0f} ms",
            "worst_parallel_safe_async_median_ms": worst,
            "target_met": worst <= TARGET_S * 1000,
            "results": results,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
