"""Worst-case ``search_tools`` patterns over 1,000 tools: how long one ``regex_search`` takes.

The catalog holds 1,000 real tools whose descriptions carry long runs of ``a``
or ``x`` (200-249 characters), built to trip backtracking regex engines. Two
sets of patterns:

- catastrophic: nested or alternated repetitions (``(a+)+$``, ``(.*a){20}``,
  ...) that take exponential time in a backtracking engine; RE2 runs them in
  linear time;
- long, no match: very long patterns that match nothing, so the fuzzy fallback
  runs on them too.

Each pattern is searched ``--repeats`` times after one warm-up search; the best
and median times are reported. Target: every pattern within 100 ms (best of the
repeats) on 1,000 tools. ``tests/test_search.py`` checks the same patterns give
the right result; the timing lives here, away from the unit tests.

Run: ``python benchmarks/search_worst_case.py [--tools 1000] [--repeats 5]``.
Writes ``benchmarks/results/search_worst_case.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from langgraph_toolbudget import ToolCatalog  # noqa: E402

TARGET_MS = 100.0

CATASTROPHIC = ["(a+)+$", "(.*a){20}", "(x|x|x)*y", "(a|aa)+b$", "(x+x+)+y"]
LONG_NO_MATCH = {
    "300 repeated words": " ".join(["zulu"] * 300),
    "200 distinct words": " ".join(f"w{i}ord" for i in range(200)),
    "5000 chars": "x" * 5000,
    "long sentence": (
        "please find me a tool that converts currencies between euros and dollars "
        "for the quarterly finance report of the whole company"
    ),
    "many groups": "(?i)" + "(a|b)*" * 50 + "z",
}

# NATO words without a "y" in them.
_WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
]


class _SensorArgs(BaseModel):
    sensor: str


def _read_sensor(sensor: str) -> str:
    return f"reading of {sensor}: 0"


def build_catalog(n_tools: int) -> ToolCatalog:
    """``n_tools`` real tools whose descriptions hold long runs built to trip backtracking."""
    tools = []
    for i in range(n_tools):
        run = "a" * (200 + i % 50) + "b" if i % 2 == 0 else "x" * (200 + i % 50)
        words = " ".join(_WORDS[(i + j) % len(_WORDS)] for j in range(8))
        tools.append(
            StructuredTool(
                name=f"sensor_{i:04d}",
                description=f"Sensor {i} reading of the {words} plant: {run}\n" + "a" * 30 + "b",
                args_schema=_SensorArgs,
                func=_read_sensor,
                metadata={"server": f"plant{i % 10}"},
            )
        )
    return ToolCatalog.from_tools(tools)


def main(argv: Sequence[str] | None = None) -> int:
    """Time every pattern, print the table, write the JSON results.

    Returns:
        0 when every pattern meets the 100 ms target, else 1.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5, help="timed searches per pattern")
    args = parser.parse_args(argv)

    index = build_catalog(args.tools).index
    index.regex_search("warm up")  # first-use costs are not what this measures
    patterns = [("catastrophic", p, p) for p in CATASTROPHIC]
    patterns += [("long, no match", label, p) for label, p in LONG_NO_MATCH.items()]
    rows, results = [], []
    for kind, label, pattern in patterns:
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = index.regex_search(pattern)
            seconds.append(time.perf_counter() - start)
        best_ms, median_ms = min(seconds) * 1000, statistics.median(seconds) * 1000
        met = best_ms <= TARGET_MS
        rows.append((kind, label, result.found, result.error or "", best_ms, median_ms, met))
        results.append(
            {
                "kind": kind,
                "pattern": label,
                "found": result.found,
                "fuzzy": result.fuzzy,
                "error": result.error,
                "best_ms": best_ms,
                "median_ms": median_ms,
                "meets_target": met,
            }
        )

    print(f"regex_search over {args.tools} tools, best and median of {args.repeats}")
    print_table(["kind", "pattern", "found", "error", "best ms", "median ms", "<= 100 ms"], rows)
    worst = max(r["best_ms"] for r in results)
    met_all = all(r["meets_target"] for r in results)
    verdict = "met" if met_all else "MISSED"
    print(f"\nworst pattern: {worst:.1f} ms (target <= {TARGET_MS:.0f} ms): {verdict}")
    path = write_results(
        "search_worst_case",
        {
            "tools": args.tools,
            "repeats": args.repeats,
            "target_ms": TARGET_MS,
            "patterns": results,
            "worst_best_ms": worst,
            "meets_target": met_all,
        },
    )
    print(f"wrote {path}")
    return 0 if met_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
