"""Selection latency on a large catalog: a synthetic 10,000-tool catalog in 100 categories.

Reports:

- build: ``ToolCatalog.from_tools`` + the first ``catalog.index`` + the
  per-catalog precomputation the nodes do (category index, category scorer,
  selectable members per category),
  i.e. everything between having the LangChain tools and answering a query;
- turn: p50 / p95 / mean of one classify_intent + select_tools + tool_search
  turn (each node's ``invoke``, as in a graph), over generated queries: the first
  pass over the queries is the turn; beside it each query's best over
  ``BEST_OF`` separate passes of the whole list. A query is never timed right
  after itself: ``ToolIndex`` keeps the last query's scores (and ``ToolUsage``
  its last fusion), so a back-to-back repeat would skip the scoring a user's new
  message always pays.

Run:  python benchmarks/selection_latency.py [--tools 10000] [--categories 100] [--queries 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    SEED,
    Pipeline,
    latency_summary_ms,
    print_table,
    synthetic_world,
    write_results,
)

from langgraph_toolbudget import ToolCatalog  # noqa: E402
from langgraph_toolbudget.core.intent import _scorer  # noqa: E402
from langgraph_toolbudget.core.selection import _selectable_members  # noqa: E402

TARGETS = {"build_s": 2.0, "turn_p50_ms": 1.0, "turn_p50_ms_issue27": 2.0}
BEST_OF = 5
"""Passes over the whole query list: the first pass is reported as the turn, and each query's
best over the passes beside it (a shared machine's load inflates single runs by several
times). Passes, not repeats of one query in a row: a repeat of the text just run would be
served from the last-query caches of ``ToolIndex`` and ``ToolUsage``, not scored."""


def build(tools, categories) -> tuple[ToolCatalog, dict[str, float]]:
    t0 = time.perf_counter()
    catalog = ToolCatalog.from_tools(tools, categories=categories)
    t1 = time.perf_counter()
    _ = catalog.index
    t2 = time.perf_counter()
    _ = catalog.category_index
    _scorer(catalog)
    _selectable_members(catalog)
    t3 = time.perf_counter()
    return catalog, {
        "from_tools_s": t1 - t0,
        "index_s": t2 - t1,
        "category_precompute_s": t3 - t2,
        "build_s": t3 - t0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--categories", type=int, default=100)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3, help="catalog builds; best is reported")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    world = synthetic_world(args.tools, args.categories, n_queries=args.queries)
    make_tools_s = time.perf_counter() - start

    builds = [build(world.tools, world.categories) for _ in range(args.repeats)]
    catalog = builds[-1][0]
    timings = min((b[1] for b in builds), key=lambda t: t["build_s"])

    pipe = Pipeline.build(catalog)
    queries = [q["query"] for q in world.queries]
    # Warm-up: first-call costs are part of build, not of a turn. Not on queries[0], which the
    # first pass opens with: it would be timed from the last-query cache.
    pipe.run("warm-up request, not one of the timed queries")
    passes = []
    for _ in range(BEST_OF):
        times = []
        for text in queries:
            t0 = time.perf_counter()
            pipe.run(text)
            times.append(time.perf_counter() - t0)
        passes.append(times)
    turn = latency_summary_ms(passes[0])
    best = latency_summary_ms([min(runs) for runs in zip(*passes, strict=True)])

    print(
        f"synthetic catalog: {len(catalog)} tools, {len(catalog.categories)} categories, "
        f"{len(queries)} queries, seed {SEED} (tool objects made in {make_tools_s:.2f} s)"
    )
    ok_build = timings["build_s"] <= TARGETS["build_s"]
    ok_p50 = turn["p50_ms"] <= TARGETS["turn_p50_ms"]
    ok_p50_issue27 = turn["p50_ms"] <= TARGETS["turn_p50_ms_issue27"]
    ok_best_p50 = best["p50_ms"] <= TARGETS["turn_p50_ms"]
    print_table(
        ["measure", "value", "target", ""],
        [
            ["from_tools (s)", timings["from_tools_s"], "", ""],
            ["first catalog.index (s)", timings["index_s"], "", ""],
            ["category precomputation (s)", timings["category_precompute_s"], "", ""],
            ["build total (s)", timings["build_s"], "<= 2.0", "meets" if ok_build else "MISSES"],
            ["turn p50 (ms)", turn["p50_ms"], "<= 1.0", "meets" if ok_p50 else "MISSES"],
            [
                "turn p50, issue 27's target (ms)",
                turn["p50_ms"],
                "<= 2.0",
                "meets" if ok_p50_issue27 else "MISSES",
            ],
            ["turn p95 (ms)", turn["p95_ms"], "", ""],
            ["turn mean (ms)", turn["mean_ms"], "", ""],
            [
                f"turn p50, best of {BEST_OF} passes (ms)",
                best["p50_ms"],
                "<= 1.0",
                "meets" if ok_best_p50 else "MISSES",
            ],
            [f"turn p95, best of {BEST_OF} passes (ms)", best["p95_ms"], "", ""],
        ],
    )
    if not args.no_write:
        path = write_results(
            "selection_latency",
            {
                "tools": len(catalog),
                "categories": len(catalog.categories),
                "queries": len(queries),
                "seed": SEED,
                "build_repeats": args.repeats,
                "build": timings,
                "turn": turn,
                "turn_best_of": {"passes": BEST_OF, **best},
                "targets": TARGETS,
                "meets": {
                    "build_s": ok_build,
                    "turn_p50_ms": ok_p50,
                    "turn_p50_ms_issue27": ok_p50_issue27,
                    "turn_best_of_p50_ms": ok_best_p50,
                },
            },
        )
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
