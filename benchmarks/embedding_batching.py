"""Embedding a catalog: tool texts in catalog order against batches sorted by length.

An encoder pads every text of a batch to the batch's longest text. In catalog
order, one long description per batch makes the whole batch pay for it; sorted
by length (what ``ToolVectors`` does), each batch holds texts of similar length.
This runs the real all-MiniLM-L6-v2 (``_minilm.py``, numpy) over the tool texts
of the bench catalogs, both ways, with the product's batch size (64), and checks
that both give the same vectors.

Run:  python benchmarks/embedding_batching.py [--tools N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _minilm  # noqa: E402
from _common import bench_dir, load_dataset, print_table, synthetic_world, write_results  # noqa: E402

from langgraph_toolbudget.core.vectors import ToolVectors, tool_text  # noqa: E402

BATCH = 64


def catalog_order(model: Any, texts: list[str]) -> np.ndarray:
    """The old way: batches of 64 in catalog order."""
    out = []
    for i in range(0, len(texts), BATCH):
        out.extend(model.embed_documents(texts[i : i + BATCH]))
    return np.asarray(out, dtype=np.float32)


def by_length(model: Any, texts: list[str]) -> np.ndarray:
    """The product's way: ToolVectors.embed_tools (batches sorted by length)."""
    return ToolVectors(texts).embed_tools(model, BATCH)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=600, help="tool texts per catalog at most")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    missing = _minilm.available()
    if missing is not None:
        print(f"SKIPPED: the MiniLM model is not available: {missing}")
        return 0
    model = _minilm.MiniLMEmbeddings()
    folder = bench_dir()
    sets = {}
    for name in ("metatool", "sealtools"):
        if (folder / name / "catalog.jsonl").is_file():
            ds = load_dataset(folder / name, name)
            sets[name] = [tool_text(t.name, t.description) for t in ds.tools][: args.tools]
    if not sets:
        ds = synthetic_world(args.tools, 20)
        sets["synthetic"] = [tool_text(t.name, t.description) for t in ds.tools]
    out: dict[str, Any] = {"batch_size": BATCH, "model": "all-MiniLM-L6-v2 (numpy)", "sets": {}}
    rows = []
    for name, texts in sets.items():
        start = time.perf_counter()
        before = catalog_order(model, texts)
        before_s = time.perf_counter() - start
        start = time.perf_counter()
        after = by_length(model, texts)
        after_s = time.perf_counter() - start
        norms = np.linalg.norm(before, axis=1, keepdims=True)
        diff = float(np.abs(before / norms - after).max())
        out["sets"][name] = {
            "texts": len(texts),
            "catalog_order_s": before_s,
            "by_length_s": after_s,
            "speedup": before_s / after_s,
            "max_abs_diff": diff,
        }
        rows.append([name, len(texts), before_s, after_s, before_s / after_s, diff])
    print_table(
        ["catalog", "texts", "catalog order s", "by length s", "speed-up", "max diff"], rows
    )
    if not args.no_write:
        print(f"wrote {write_results('embedding_batching', out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
