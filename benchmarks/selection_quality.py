"""Selection quality: do the gold tools end up in ``selected_tools``?

For each bench data set (``../shared/bench``: Seal-Tools with its categories,
MetaTool without), every query runs through the product pipeline
classify_intent -> select_tools -> tool_search (each node's ``invoke``, the
state merged as the graph's reducer does) and we report:

- recall: the fraction of a query's gold tools in ``selected_tools``, averaged
  over queries;
- visible: the mean size of ``selected_tools``;
- latency per query (mean, p50, p95) of the three nodes together.

The baseline in the same run is plain BM25 top-5 / top-10 of the package's own
index (``catalog.index.rank``). Without the data folder a synthetic catalog with
generated queries is used instead, and the output says so.

Run:  python benchmarks/selection_quality.py [--limit N] [--bench-dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    SEED,
    Dataset,
    Pipeline,
    bench_dir,
    latency_summary_ms,
    load_dataset,
    print_table,
    recall,
    subsample,
    synthetic_world,
    write_results,
)

from langgraph_toolbudget import ToolCatalog  # noqa: E402

TARGETS = {
    "sealtools": {"recall": 0.92, "visible": 10.0},
    "metatool": {"recall": 0.80, "visible": 10.0},
}

# Pipelines measured. "medium model" is what a user gets with the medium-size
# preset (qwen3:8b -> 5 budgeted tools) and tool_search's default 5 hits: at most
# 10 visible. "defaults" is every node with its default arguments.
PIPELINES: dict[str, dict[str, dict[str, Any]]] = {
    "pipeline, medium model (5 + search 5)": {
        "select_kwargs": {"model_size": "qwen3:8b"},
    },
    "pipeline, defaults (8 + search 5)": {},
}


def bm25_baseline(catalog: ToolCatalog, queries: list[dict[str, Any]], k: int) -> dict[str, float]:
    index = catalog.index
    recalls, sizes, times = [], [], []
    for q in queries:
        start = time.perf_counter()
        scores = index.bm25_scores(q["query"])
        top = np.lexsort((np.arange(scores.size), -scores))[:k]
        hits = [index.names[i] for i in top if scores[i] > 0]
        times.append(time.perf_counter() - start)
        recalls.append(recall(hits, q["gold"]))
        sizes.append(len(hits))
    return {
        "recall": statistics.fmean(recalls),
        "visible": statistics.fmean(sizes),
        **latency_summary_ms(times),
    }


def run_pipeline(
    catalog: ToolCatalog, queries: list[dict[str, Any]], config: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    pipe = Pipeline.build(catalog, **config)
    pipe.run("warm up the caches")
    recalls, sizes, times, n_categories = [], [], [], []
    for q in queries:
        start = time.perf_counter()
        state = pipe.run(q["query"])
        times.append(time.perf_counter() - start)
        selected = state["selected_tools"]
        recalls.append(recall(selected, q["gold"]))
        sizes.append(len(selected))
        n_categories.append(len(state.get("categories", [])))
    return {
        "recall": statistics.fmean(recalls),
        "visible": statistics.fmean(sizes),
        "max_visible": max(sizes) if sizes else 0,
        "mean_categories": statistics.fmean(n_categories),
        **latency_summary_ms(times),
        "config": {k: v for k, v in config.items()},
    }


def evaluate(ds: Dataset, limit: int | None) -> dict[str, Any]:
    start = time.perf_counter()
    catalog = ds.catalog()
    _ = catalog.index
    build_s = time.perf_counter() - start
    queries = subsample(ds.queries, limit)
    rows: dict[str, dict[str, Any]] = {}
    for k in (5, 10):
        rows[f"BM25 top-{k} (baseline)"] = bm25_baseline(catalog, queries, k)
    for label, config in PIPELINES.items():
        rows[label] = run_pipeline(catalog, queries, config)
    return {
        "source": ds.source,
        "synthetic": ds.synthetic,
        "tools": len(catalog),
        "categories": len(catalog.categories),
        "queries": len(queries),
        "queries_total": len(ds.queries),
        "catalog_build_s": build_s,
        "target": TARGETS.get(ds.name),
        "results": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench-dir", help="folder with sealtools/ and metatool/")
    parser.add_argument("--limit", type=int, default=None, help="queries per data set (sampled)")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON results")
    args = parser.parse_args(argv)

    folder = bench_dir(args.bench_dir)
    datasets: list[Dataset] = []
    notes: list[str] = []
    for name in ("sealtools", "metatool"):
        if (folder / name / "catalog.jsonl").is_file():
            datasets.append(load_dataset(folder / name, name))
        else:
            notes.append(f"{folder / name} not found")
    if not datasets:
        notes.append(
            "NO BENCH DATA: using a SYNTHETIC catalog with generated queries; "
            "these figures say nothing about real catalogs"
        )
        datasets.append(synthetic_world(2000, 40, n_queries=1000))
    for note in notes:
        print(f"note: {note}")

    out: dict[str, Any] = {"bench_dir": str(folder), "seed": SEED, "limit": args.limit}
    out["notes"] = notes
    out["datasets"] = {}
    for ds in datasets:
        res = evaluate(ds, args.limit)
        out["datasets"][ds.name] = res
        target = res["target"]
        head = f"\n== {ds.name}{' (SYNTHETIC)' if ds.synthetic else ''}: {res['tools']} tools, "
        head += f"{res['categories']} categories, {res['queries']} queries"
        if res["queries"] < res["queries_total"]:
            head += f" (sampled from {res['queries_total']}, seed {SEED})"
        print(head)
        if target:
            print(f"target: recall >= {target['recall']} with mean visible <= {target['visible']}")
        table = []
        for label, r in res["results"].items():
            status = ""
            if target and label.startswith("pipeline"):
                ok = r["recall"] >= target["recall"] and r["visible"] <= target["visible"]
                status = "meets target" if ok else "misses target"
            table.append(
                [label, r["recall"], r["visible"], r["mean_ms"], r["p50_ms"], r["p95_ms"], status]
            )
        print_table(["method", "recall", "visible", "mean ms", "p50 ms", "p95 ms", ""], table)
    if not args.no_write:
        path = write_results("selection_quality", out)
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
