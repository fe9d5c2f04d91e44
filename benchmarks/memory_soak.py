"""Benchmark: memory over time. Is the prebuilt agent flat after warm-up?

10,000 turns of the prebuilt agent (``create_toolbudget_agent`` over the example
catalog, the offline demo model, user defaults, no checkpointer), each with a query
never seen before: first all on one thread, then spread over 1,000 threads. Every
1,000 turns: resident memory (RSS) and the ``tracemalloc`` lines that grew most since
the previous sample. Target: flat after warm-up (no per-query or per-thread cache
without a bound); growth per 1,000 turns after the first 2,000, and over the second
half of the run (after the bounded caches have filled), is reported.

Reference (issue 14, before the caches were bounded): RSS 118.1 MB after 500 unique
queries, 121.6 MB after 4,000 (about 1 KB per unique query, never released).

Run: ``python benchmarks/memory_soak.py [--turns 10000] [--only one|many]``
(writes ``benchmarks/results/memory_soak.json``, or ``memory_soak_<phase>.json`` for one phase).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import sys
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402

from langgraph_toolbudget import create_toolbudget_agent  # noqa: E402
from langgraph_toolbudget.demo.example_catalog import build_example_catalog  # noqa: E402
from langgraph_toolbudget.demo.model import DemoChatModel  # noqa: E402

SAMPLE_EVERY = 1_000
TEMPLATES = [
    "What's the weather in {w} today?",
    "Post '{w}' to the #general Slack channel",
    "Open a GitHub issue in acme/{w} titled 'Crash in {w}'",
    "Read the file {w}.md and summarise it",
    "Search my {w} notes for the {w2} meeting",
]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def query(rng: random.Random, i: int) -> str:
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8)) + str(i)
    return rng.choice(TEMPLATES).format(w=word, w2=word[::-1])


def soak(app: Any, turns: int, threads: int, label: str) -> list[dict[str, Any]]:
    rng = random.Random(14)
    samples: list[dict[str, Any]] = []
    previous = tracemalloc.take_snapshot()
    for i in range(1, turns + 1):
        config = {"configurable": {"thread_id": f"{label}-{i % threads}"}}
        app.invoke({"messages": [HumanMessage(query(rng, i))]}, config)
        if i % SAMPLE_EVERY == 0:
            gc.collect()
            snapshot = tracemalloc.take_snapshot()
            top = snapshot.compare_to(previous, "lineno")[:3]
            previous = snapshot
            traced, _ = tracemalloc.get_traced_memory()
            samples.append({
                "turns": i,
                "rss_mb": rss_mb(),
                "traced_mb": traced / 2**20,
                "load_1m": round(os.getloadavg()[0], 2),
                "top_growth": [f"{s.traceback[0].filename.rsplit('/', 2)[-1]}:"
                               f"{s.traceback[0].lineno} {s.size_diff / 1024:+.1f} KiB"
                               for s in top],
            })  # fmt: skip
            print(
                f"{label}: {i} turns, RSS {samples[-1]['rss_mb']:.1f} MB, traced "
                f"{samples[-1]['traced_mb']:.2f} MB; {'; '.join(samples[-1]['top_growth'])}",
                file=sys.stderr,
            )
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument(
        "--only", choices=["one", "many"], help="run one phase: one thread, or 1,000 threads"
    )
    args = parser.parse_args()
    app = create_toolbudget_agent(DemoChatModel(), build_example_catalog()).compile()
    tracemalloc.start(1)
    runs = {}
    if args.only != "many":
        runs["one thread"] = soak(app, args.turns, 1, "one")
    if args.only != "one":
        runs["1,000 threads"] = soak(app, args.turns, 1_000, "many")
    rows = []
    for label, samples in runs.items():
        for s in samples:
            rows.append(
                [label, s["turns"], s["rss_mb"], s["traced_mb"], "; ".join(s["top_growth"])]
            )
    print_table(["run", "turns", "RSS MB", "traced MB", "top growth since last sample"], rows)
    growth = {}
    for label, samples in runs.items():
        later = [s for s in samples if s["turns"] >= 2 * SAMPLE_EVERY]
        if len(later) >= 2:
            per_k = (later[-1]["traced_mb"] - later[0]["traced_mb"]) / (len(later) - 1)
            half = samples[len(samples) // 2 - 1 :]
            per_k_half = (half[-1]["traced_mb"] - half[0]["traced_mb"]) / max(len(half) - 1, 1)
            growth[label] = {"traced_mb_per_1000_turns_after_warmup": per_k,
                             "traced_mb_per_1000_turns_second_half": per_k_half,
                             "rss_first_mb": samples[0]["rss_mb"],
                             "rss_last_mb": samples[-1]["rss_mb"]}  # fmt: skip
            print(f"{label}: traced memory {per_k * 1024:+.1f} KiB per 1,000 turns after "
                  f"warm-up, {per_k_half * 1024:+.1f} over the second half")  # fmt: skip
    name = "memory_soak" if args.only is None else f"memory_soak_{args.only}"
    path = write_results(name, {"turns": args.turns, "runs": runs, "growth": growth})
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
