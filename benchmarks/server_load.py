"""Benchmark: a loaded ``langgraph dev`` server, driven by ``langgraph_sdk`` clients.

Starts ``langgraph dev`` (the repository's ``langgraph.json`` plus one graph, the offline
demo model, user defaults) on a free 127.0.0.1 port, then runs 50 threads x 5 turns at
once on ``bind_all``: the alternative, LangChain's ``create_agent`` with the example
catalog's 40 tools all bound (``benchmarks/_bind_all.py``), then on the ``toolbudget``
graph with the same requests, then on the ``toolbudget_mcp`` graph (its default local
MCP servers over stdio). Each graph runs on a fresh server (the dev server's in-memory
storage grows with every run and slows the runs after it: measured on one server, the
graph measured second paid up to 50% more CPU per run) and first serves a few warm-up
runs, not counted.
Per graph: errors (target 0), p50/p95 seconds per run, runs per
second, the server's CPU time per run (its process and children: a figure that a busy
machine inflates less than the wall-clock ones), and the server's resident memory (with its
child processes) before and after. Bounded: every thread runs its turns and stops.

The figure that counts is a ratio within a round (a shared machine's load moves the absolute
ones between rounds): per round, ``toolbudget``'s runs per second and server CPU per run
divided by ``bind_all``'s, and the median of the rounds (issue 28's target: runs per second
>= 0.8). ``toolbudget`` is the example graph of ``langgraph.json`` (``examples/server.py``, a
graph factory: the server calls it for every run and state read); ``--graphs`` adds
``toolbudget_static`` (``benchmarks/_prebuilt.py``: the same prebuilt graph compiled once, as
``bind_all`` is) and ``toolbudget_3steps`` (``benchmarks/_three_steps.py``: the prebuilt graph
with its selection as three nodes, as it was before ``choose_tools``).
(Issue 14's absolute reference, on another host: p50 1.3 s, 32 runs/s, RSS 151 -> 181 MB.)

``--baseline-rev REV`` also serves the ``toolbudget`` graph of an earlier git revision (its
own code, checked out in a temporary git worktree and imported first), as one more graph of the
rotation: for example ``b49f380``, the code issue 14's reference was measured on, to tell a slower
host from a slower graph.

Run: ``python benchmarks/server_load.py [--threads 50 --turns 5 --repeat 3 --baseline-rev REV
--graphs bind_all,toolbudget,toolbudget_static,toolbudget_3steps,toolbudget_mcp]``
(writes ``benchmarks/results/server_load.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from _common import print_table, write_results  # noqa: E402
from langgraph_server import (  # noqa: E402
    _descendants,
    drive,
    free_port,
    langgraph_dev,
    rss_mb,
    served_config,
    server_env,
)

EXAMPLE_QUERIES = [
    "What's the weather in Tokyo today?",
    "Now post 'umbrella not needed' to the #general Slack channel",
    "Open a GitHub issue in acme/app titled 'Crash on start'",
    "Read the file README.md",
    "What's the forecast for Paris this week?",
]
QUERIES = {
    "bind_all": EXAMPLE_QUERIES,
    "toolbudget": EXAMPLE_QUERIES,
    "toolbudget_static": EXAMPLE_QUERIES,
    "toolbudget_3steps": EXAMPLE_QUERIES,
    "toolbudget_mcp": [
        "What is 2 plus 3?",
        "Add a note: buy milk",
        "List my notes",
        "Multiply 6 by 7",
        "Search my notes for milk",
    ],
}


EXTRA_GRAPHS = {
    name: f"{ROOT / 'benchmarks' / module}:graph"
    for name, module in (
        ("bind_all", "_bind_all.py"),
        ("toolbudget_static", "_prebuilt.py"),
        ("toolbudget_3steps", "_three_steps.py"),
    )
}
"""Graphs served beside ``langgraph.json``'s: the alternative, and two forms of ours."""
DEFAULT_GRAPHS = "bind_all,toolbudget,toolbudget_mcp"
WARM_UP_THREADS = 5


def rotated(queries: list[str], threads: int) -> list[list[str]]:
    """Thread i starts at query i, so the threads ask different things at once."""
    return [queries[i % len(queries) :] + queries[: i % len(queries)] for i in range(threads)]


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process and its live descendants."""
    total = 0
    for p in [pid, *_descendants(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


@contextmanager
def checked_out(rev: str) -> Iterator[Path]:
    """A temporary git worktree of this repository at ``rev``, removed afterwards."""
    with tempfile.TemporaryDirectory() as parent:
        tree = Path(parent) / "src"
        git = ["git", "-C", str(ROOT), "worktree"]
        subprocess.run([*git, "add", "--detach", str(tree), rev], check=True, capture_output=True)
        try:
            yield tree
        finally:
            subprocess.run([*git, "remove", "--force", str(tree)], check=True)


async def measure(url: str, pid: int, graph: str, threads: int, turns: int) -> dict[str, Any]:
    """Warm ``graph`` up, then drive it with ``threads`` x ``turns`` runs and measure."""
    queries = QUERIES[graph]
    warm = await drive(url, graph, WARM_UP_THREADS, 1, rotated(queries, WARM_UP_THREADS))
    if warm.errors:
        raise RuntimeError(f"{graph}: warm-up failed: {warm.errors[0]}")
    before, cpu_before = rss_mb(pid), cpu_s(pid)
    result = await drive(url, graph, threads, turns, rotated(queries, threads))
    out: dict[str, Any] = {
        **result.summary(),
        "server_cpu_ms_per_run": (cpu_s(pid) - cpu_before) * 1000 / max(result.runs, 1),
        "rss_before_mb": before,
        "rss_after_mb": rss_mb(pid),
    }
    if result.errors:
        out["first_error"] = result.errors[0]
    return out


def serve_and_measure(graph: str, threads: int, turns: int, source: Path = ROOT) -> dict[str, Any]:
    """One graph on a fresh ``langgraph dev``: its in-memory storage grows with every run
    and slows later runs, so a graph measured after another would pay for the other's.

    ``source``: the checkout whose code and ``langgraph.json`` serve the graph (another
    one's package is imported ahead of the installed one).
    """
    env = server_env()
    if source != ROOT:
        env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory() as workdir:
        config = served_config(Path(workdir), source, EXTRA_GRAPHS if source == ROOT else None)
        with langgraph_dev(Path(workdir), env, free_port(), config) as (url, proc):
            return asyncio.run(measure(url, proc.pid, graph, threads, turns))


FIGURES = ("p50_s", "p95_s", "runs_per_s", "server_cpu_ms_per_run", "rss_before_mb", "rss_after_mb")


def median_of(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """A graph's figures over its repetitions: the median of each, errors and runs summed."""
    out: dict[str, Any] = {k: statistics.median(r[k] for r in reps) for k in FIGURES}
    out["runs"] = sum(r["runs"] for r in reps)
    out["errors"] = sum(r["errors"] for r in reps)
    errors = [r["first_error"] for r in reps if "first_error" in r]
    if errors:
        out["first_error"] = errors[0]
    return out


def round_ratios(
    reps: dict[str, list[dict[str, Any]]], ours: str, other: str
) -> list[dict[str, float]]:
    """Per round: ``ours``' runs per second and CPU per run divided by ``other``'s."""
    return [
        {
            "runs_per_s": a["runs_per_s"] / b["runs_per_s"],
            "cpu_per_run": a["server_cpu_ms_per_run"] / b["server_cpu_ms_per_run"],
        }
        for a, b in zip(reps[ours], reps[other], strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument(
        "--repeat", type=int, default=3, help="rounds over the graphs (a fresh server each)"
    )
    parser.add_argument(
        "--baseline-rev",
        help="also serve the toolbudget graph of this git revision (e.g. b49f380)",
    )
    parser.add_argument(
        "--graphs",
        default=DEFAULT_GRAPHS,
        help=f"comma-separated, of {', '.join(QUERIES)} (default {DEFAULT_GRAPHS})",
    )
    args = parser.parse_args()
    chosen = [g.strip() for g in args.graphs.split(",") if g.strip()]
    unknown = sorted(set(chosen) - set(QUERIES))
    if unknown or "bind_all" not in chosen or "toolbudget" not in chosen:
        parser.error(f"--graphs: unknown {unknown}; bind_all and toolbudget are needed")
    with contextlib.ExitStack() as stack:
        sources = {g: ROOT for g in chosen}
        if args.baseline_rev:
            sources[f"toolbudget@{args.baseline_rev}"] = stack.enter_context(
                checked_out(args.baseline_rev)
            )
        reps: dict[str, list[dict[str, Any]]] = {graph: [] for graph in sources}
        graphs = list(sources)
        for r in range(args.repeat):  # rotated, so no graph always runs first
            for graph in graphs[r % len(graphs) :] + graphs[: r % len(graphs)]:
                served = graph.split("@")[0]
                rep = serve_and_measure(served, args.threads, args.turns, sources[graph])
                reps[graph].append(rep)
    results = {graph: median_of(rows) for graph, rows in reps.items()}
    print(
        f"{args.threads} threads x {args.turns} turns per graph, all threads at once; "
        f"median of {args.repeat} rounds, each graph on a fresh server\n"
    )
    print_table(
        ["graph", "runs", "errors", "p50 s", "p95 s", "runs/s", "CPU ms/run", "RSS before MB",
         "RSS after MB"],
        [
            [g, r["runs"], r["errors"], r["p50_s"], r["p95_s"], r["runs_per_s"],
             r["server_cpu_ms_per_run"], r["rss_before_mb"], r["rss_after_mb"]]
            for g, r in results.items()
        ],
    )  # fmt: skip
    ours, alone = results["toolbudget"], results["bind_all"]
    ratios: dict[str, Any] = {
        "p50": ours["p50_s"] / alone["p50_s"],
        "runs_per_s": ours["runs_per_s"] / alone["runs_per_s"],
        "server_cpu_ms_per_run": ours["server_cpu_ms_per_run"] / alone["server_cpu_ms_per_run"],
    }
    per_round = round_ratios(reps, "toolbudget", "bind_all")
    ratios["rounds"] = per_round
    ratios["median_of_rounds"] = {
        k: statistics.median(r[k] for r in per_round) for k in ("runs_per_s", "cpu_per_run")
    }
    print("\ntoolbudget / bind_all per round (same requests, one round = both on fresh servers):")
    for i, r in enumerate(per_round):
        print(f"  round {i + 1}: runs/s {r['runs_per_s']:.2f}x, CPU/run {r['cpu_per_run']:.2f}x")
    print(
        f"  median of rounds: runs/s {ratios['median_of_rounds']['runs_per_s']:.2f}x, "
        f"CPU per run {ratios['median_of_rounds']['cpu_per_run']:.2f}x (target: runs/s >= 0.8)"
    )
    for ours_, other, what in (
        ("toolbudget_static", "bind_all", "both compiled graphs, no factory"),
        ("toolbudget_static", "toolbudget_3steps", "selection as one step vs three"),
        ("toolbudget", "toolbudget_static", "the example's graph factory vs a compiled graph"),
    ):
        if ours_ in results and other in results:
            pair = round_ratios(reps, ours_, other)
            ratios[f"{ours_}_vs_{other}"] = pair
            print(f"{ours_} / {other} ({what}), per round: "
                  + ", ".join(f"runs/s {r['runs_per_s']:.2f}x CPU {r['cpu_per_run']:.2f}x"
                              for r in pair))  # fmt: skip
    if args.baseline_rev:
        old = results[f"toolbudget@{args.baseline_rev}"]
        ratios["runs_per_s_vs_baseline_rev"] = ours["runs_per_s"] / old["runs_per_s"]
        print(
            f"toolbudget / toolbudget@{args.baseline_rev}: runs/s "
            f"{ratios['runs_per_s_vs_baseline_rev']:.2f}x"
        )
    path = write_results(
        "server_load",
        {
            "threads": args.threads,
            "turns": args.turns,
            "repeat": args.repeat,
            "warm_up_runs_per_graph": WARM_UP_THREADS,
            "graphs": results,
            "rounds": reps,
            "toolbudget_vs_bind_all": ratios,
            "baseline_rev": args.baseline_rev,
        },
    )
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
