"""Benchmark: one MCP tool call through the catalog vs. the adapters' default tool.

Same stdio FastMCP server (``examples/mcp_servers/math_server.py``), same run:

- ``catalog (ainvoke)`` / ``catalog (invoke)``: a tool of
  ``await load_mcp_catalog(...)``: one persistent session per server on
  the catalog's background loop.
- ``adapters get_tools()``: a tool of ``MultiServerMCPClient.get_tools()``,
  which opens a new session (a new server process over stdio) for every call.
- ``adapters persistent session``: ``load_mcp_tools(session)`` inside ``async
  with client.session(...)``, for reference (the caller must keep that
  session open in its own event loop).

Also the time to load a catalog of 3 servers (math, notes, text over stdio),
against ``client.get_tools()`` for the same 3 servers.

Target: the catalog call is >= 50x faster than the ``get_tools()`` call.

Run: ``python benchmarks/mcp_calls.py`` (writes ``benchmarks/results/mcp_calls.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from langchain_mcp_adapters.client import MultiServerMCPClient  # noqa: E402
from langchain_mcp_adapters.tools import load_mcp_tools  # noqa: E402

from langgraph_toolbudget import load_mcp_catalog  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ROOT / "examples" / "mcp_servers"
TARGET_SPEEDUP = 50.0
ARGS = {"a": 2, "b": 3}


def stdio(script: str) -> dict[str, Any]:
    """A stdio connection to one of the example servers."""
    return {"transport": "stdio", "command": sys.executable, "args": [str(SERVERS / script)]}


def summary(seconds: Sequence[float]) -> dict[str, float]:
    """Mean, median, min and max of timings, in milliseconds."""
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "mean_ms": statistics.fmean(ms),
        "median_ms": statistics.median(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
    }


async def time_async(fn: Callable[[], Awaitable[Any]], n: int, warmup: int = 3) -> list[float]:
    """Time ``n`` awaited calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        await fn()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - start)
    return out


def time_sync(fn: Callable[[], Any], n: int, warmup: int = 3) -> list[float]:
    """Time ``n`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def check(result: Any) -> None:
    """Every timed call must really have added 2 and 3."""
    text = result if isinstance(result, str) else result[0]["text"]
    if float(text) != 5.0:
        raise AssertionError(f"unexpected tool result {result!r}")


async def bench_calls(calls: int, default_calls: int) -> dict[str, dict[str, float]]:
    connections = {"math": stdio("math_server.py")}
    results: dict[str, dict[str, float]] = {}

    catalog = await load_mcp_catalog(connections)
    async with catalog:
        add = catalog.get("add").tool
        check(await add.ainvoke(ARGS))

        async def ours() -> None:
            check(await add.ainvoke(ARGS))

        results["catalog (ainvoke)"] = summary(await time_async(ours, calls))
        timings = await asyncio.to_thread(time_sync, lambda: check(add.invoke(ARGS)), calls)
        results["catalog (invoke)"] = summary(timings)

    client = MultiServerMCPClient(connections)
    default_add = next(t for t in await client.get_tools() if t.name == "add")

    async def default() -> None:
        check(await default_add.ainvoke(ARGS))

    results["adapters get_tools()"] = summary(await time_async(default, default_calls, warmup=1))

    async with client.session("math") as session:
        persistent_add = next(t for t in await load_mcp_tools(session) if t.name == "add")

        async def persistent() -> None:
            check(await persistent_add.ainvoke(ARGS))

        results["adapters persistent session"] = summary(await time_async(persistent, calls))
    return results


async def bench_loads(loads: int) -> dict[str, dict[str, float]]:
    connections = {
        "math": stdio("math_server.py"),
        "notes": stdio("notes_server.py"),
        "text": stdio("text_server.py"),
    }
    ours, theirs = [], []
    for _ in range(loads):
        start = time.perf_counter()
        catalog = await load_mcp_catalog(connections, strict=True)
        ours.append(time.perf_counter() - start)
        if len(catalog) != 14:
            raise AssertionError(f"expected 14 tools from 3 servers, got {len(catalog)}")
        await catalog.aclose()
        start = time.perf_counter()
        tools = await MultiServerMCPClient(connections).get_tools()
        theirs.append(time.perf_counter() - start)
        if len(tools) != 14:
            raise AssertionError(f"expected 14 tools from 3 servers, got {len(tools)}")
    return {
        "catalog load_mcp_catalog (3 servers, sessions kept open)": summary(ours),
        "adapters get_tools() (3 servers)": summary(theirs),
    }


def summary_table(rows: Sequence[tuple[str, dict[str, float]]]) -> None:
    """Print timing summaries, one row each, in milliseconds with 2 decimals."""
    keys = ("mean_ms", "median_ms", "min_ms", "max_ms")
    print_table(
        ("", "n", "mean ms", "median ms", "min ms", "max ms"),
        [(name, int(s["n"]), *(f"{s[k]:.2f}" for k in keys)) for name, s in rows],
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the tables, write the JSON results.

    Args:
        argv: command-line arguments (``--calls``, ``--default-calls``, ``--loads``).

    Returns:
        0 when the catalog meets the 50x target, else 1.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per persistent path")
    parser.add_argument("--default-calls", type=int, default=10, help="timed get_tools() calls")
    parser.add_argument("--loads", type=int, default=5, help="timed loads of 3 servers")
    args = parser.parse_args(argv)

    calls = asyncio.run(bench_calls(args.calls, args.default_calls))
    loads = asyncio.run(bench_loads(args.loads))
    baseline = calls["adapters get_tools()"]["mean_ms"]
    speedup = {
        name: baseline / s["mean_ms"] for name, s in calls.items() if name.startswith("catalog")
    }

    print("One MCP tool call (stdio FastMCP server, same run)")
    summary_table(list(calls.items()))
    print()
    for name, x in speedup.items():
        verdict = "meets" if x >= TARGET_SPEEDUP else "MISSES"
        print(
            f"{name}: {x:.0f}x faster than get_tools() ({verdict} the {TARGET_SPEEDUP:.0f}x target)"
        )
    print()
    print("Loading 3 servers (math, notes, text over stdio)")
    summary_table(list(loads.items()))

    payload = {
        "server": "examples/mcp_servers/math_server.py over stdio; tool add(a=2, b=3)",
        "calls": calls,
        "speedup_vs_get_tools": speedup,
        "target_speedup": TARGET_SPEEDUP,
        "meets_target": all(x >= TARGET_SPEEDUP for x in speedup.values()),
        "load_3_servers": loads,
    }
    path = write_results("mcp_calls", payload)
    print(f"\nwrote {path.relative_to(ROOT)}")
    return 0 if payload["meets_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
