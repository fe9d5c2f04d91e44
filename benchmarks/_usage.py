"""The ``--usage`` part of ``selection_quality.py``: what learning from use buys, and what it costs.

Quality: each data set's queries are split per gold tool 50/50 by a stable
hash (sha1 of the query text) into a history half and a test half. The history
is recorded through ``ToolUsage.record`` (the query with its gold tools, as the
automatic recording would after those tools ran); the test half runs through the
product pipeline with and without ``usage=`` (lexical, and with MiniLM embeddings
when that model is installed). An empty ``ToolUsage`` must give exactly the
figures of the pipeline without usage (checked, not assumed).

The test half is reported per dev/test split too (``_common.split_of``: Seal-Tools'
own, MetaTool's by hash), with the paired-bootstrap interval of what the history
adds (``usage_gain``): a rule of the usage ranking is tuned on the test half's dev
queries and reported on its test queries. The history is recorded from the
history half of both splits, as a deployment records whatever it sees; only the
queries a figure is read on are split.

Cost: a synthetic catalog of 10,000 tools with 100,000 recorded queries: the
latency of ``ToolUsage.record`` (p50), and the pipeline's p50 with and without
usage on the same queries.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections import defaultdict
from typing import Any

from _common import (
    SEED,
    Dataset,
    Pipeline,
    add_splits,
    latency_summary_ms,
    paired_by_split,
    recall,
    split_groups,
    synthetic_world,
)

from langgraph_toolbudget import ToolCatalog, ToolUsage

MEDIUM = {"select_kwargs": {"model_size": "qwen3:8b"}}  # 5 budgeted + 5 searched: <= 10 visible
USAGE_TARGETS = {"metatool": 0.90, "sealtools": 0.98}
COST_TOOLS = 10_000
COST_QUERIES = 100_000
COST_TARGET_MS = 2.0


def split_history(queries: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """History and test halves: per gold tool, sorted by sha1, the first half is history.

    A query needing several tools is grouped under the first of them (sorted by
    name), so each query is in one half only.
    """
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        groups[min(q["gold"])].append(q)
    history, test = [], []
    for rows in groups.values():
        rows.sort(key=lambda q: hashlib.sha1(q["query"].encode()).hexdigest())
        half = len(rows) // 2
        history += rows[:half]
        test += rows[half:]
    return history, test


def _with(config: dict[str, dict[str, Any]], **extra: Any) -> dict[str, dict[str, Any]]:
    return {
        key: {**config.get(key, {}), **extra}
        for key in ("classify_kwargs", "select_kwargs", "search_kwargs")
    }


def _run(catalog: ToolCatalog, queries: list[dict], config: dict) -> dict[str, Any]:
    pipe = Pipeline.build(catalog, **config)
    recalls, sizes, times, selections = [], [], [], []
    for q in queries:
        start = time.perf_counter()
        state = pipe.run(q["query"])
        times.append(time.perf_counter() - start)
        recalls.append(recall(state["selected_tools"], q["gold"]))
        sizes.append(len(state["selected_tools"]))
        selections.append(state["selected_tools"])
    return {
        "recall": statistics.fmean(recalls) if recalls else float("nan"),
        "visible": statistics.fmean(sizes) if sizes else float("nan"),
        "max_visible": max(sizes, default=0),
        **latency_summary_ms(times),
        "_selections": selections,
        "_recalls": recalls,
        "_sizes": sizes,
    }


def evaluate_usage(ds: Dataset, embeddings: Any = None) -> dict[str, Any]:
    """Recall and mean visible on the test half, without and with the recorded history."""
    catalog = ds.catalog()
    history, test = split_history(ds.queries)
    usage = ToolUsage()
    start = time.perf_counter()
    for q in history:
        usage.record(q["query"], q["gold"])
    record_s = time.perf_counter() - start
    rows: dict[str, dict[str, Any]] = {}
    variants: list[tuple[str, dict[str, Any]]] = [("lexical", {})]
    if embeddings is not None:
        variants.append(("hybrid MiniLM", {"embeddings": embeddings}))
    identical = None
    groups = split_groups(test)
    usage_gain = {}
    for label, extra in variants:
        plain = _run(catalog, test, _with(MEDIUM, **extra))
        empty = _run(catalog, test, _with(MEDIUM, usage=ToolUsage(), **extra))
        learned = _run(catalog, test, _with(MEDIUM, usage=usage, **extra))
        same = plain.pop("_selections") == empty.pop("_selections")
        learned.pop("_selections")
        identical = same if identical is None else identical and same
        add_splits(empty, groups)
        usage_gain[label] = paired_by_split(
            add_splits(plain, groups), add_splits(learned, groups), groups
        )
        rows[f"{label}, medium model (5 + search 5), no usage"] = plain
        rows[f"{label}, medium model, empty ToolUsage"] = empty
        rows[f"{label}, medium model, with usage"] = learned
    return {
        "tools": len(catalog),
        "history_queries": len(history),
        "test_queries": len(test),
        "recorded_pairs": len(usage),
        "record_ms_per_query": record_s * 1000.0 / max(len(history), 1),
        "empty_history_identical": identical,
        "target_recall_with_usage": USAGE_TARGETS.get(ds.name),
        "results": rows,
        "usage_gain": usage_gain,
    }


def usage_cost(n_tools: int = COST_TOOLS, n_recorded: int = COST_QUERIES) -> dict[str, Any]:
    """Record latency and pipeline latency at ``n_tools`` tools with ``n_recorded`` queries."""
    world = synthetic_world(n_tools, max(1, n_tools // 50), n_queries=n_recorded + 1000)
    catalog = world.catalog()
    _ = catalog.index
    # The whole history, as before the 20,000-row default cap: the cost at the same size.
    usage = ToolUsage(max_records=n_recorded)
    recorded, probe = world.queries[:n_recorded], world.queries[n_recorded:]
    times = []
    for q in recorded:
        start = time.perf_counter()
        usage.record(q["query"], q["gold"], thread_id=q["id"])
        times.append(time.perf_counter() - start)
    record = latency_summary_ms(times)
    out: dict[str, Any] = {
        "tools": n_tools,
        "recorded_queries": len(recorded),
        "recorded_pairs": len(usage),
        "record": record,
        "seed": SEED,
    }
    for label, config in (("without usage", MEDIUM), ("with usage", _with(MEDIUM, usage=usage))):
        pipe = Pipeline.build(catalog, **config)
        pipe.run(probe[0]["query"])
        lat = []
        for q in probe:
            start = time.perf_counter()
            pipe.run(q["query"])
            lat.append(time.perf_counter() - start)
        out[label] = latency_summary_ms(lat)
    usage_only = []
    for q in probe:
        start = time.perf_counter()
        usage.scores(catalog, q["query"], catalog.index.scores(q["query"]))
        usage_only.append(time.perf_counter() - start)
    out["usage_fusion_only"] = latency_summary_ms(usage_only)
    out["target_ms"] = COST_TARGET_MS
    return out
