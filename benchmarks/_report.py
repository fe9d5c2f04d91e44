"""Small helpers shared by the executor benchmarks: environment, tables, JSON results."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def environment() -> dict[str, Any]:
    """Where the numbers were measured."""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "langgraph": version("langgraph"),
        "langchain-core": version("langchain-core"),
    }


def median_ms(seconds: Sequence[float]) -> float:
    return statistics.median(seconds) * 1000.0


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print an aligned text table."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in cells:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def write_results(name: str, payload: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/<name>.json`` and return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    body = {"benchmark": name, "environment": environment(), **payload}
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return path
