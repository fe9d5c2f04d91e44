"""ToolNode-suite pass rate, per file: LangGraph's ToolNode tests on ToolNode and on ToolExecutor.

The test files of the installed ``langgraph-prebuilt`` (its sdist, downloaded
once into a cache; nothing vendored) run twice at once in subprocesses: on
``ToolNode``, and with ``ToolNode`` swapped for ``ToolExecutor.from_tools``
(memory checkpointer only). Counted per file: the tests that build a ``ToolNode``
and how many of them pass on each (and the same over all tests). Target: passes
on ToolExecutor >= 95% of passes on ToolNode (``tests/test_toolnode_suite.py``
checks the same in the test run).

Run: ``python benchmarks/toolnode_suite.py``.
Writes ``benchmarks/results/toolnode_suite.json``.
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _common import write_results  # noqa: E402
from toolnode_suite import SUITE_FILES, fetch_suite, run_suite  # noqa: E402

TARGET = 0.95


def main() -> None:
    report = run_suite(fetch_suite())
    print(f"langgraph-prebuilt {version('langgraph-prebuilt')}: {len(SUITE_FILES)} test files\n")
    print(report.table())
    met = report.ratio >= TARGET
    print(f"\nToolExecutor / ToolNode passes: {report.ratio:.3f} (target >= {TARGET}): "
          f"{'met' if met else 'MISSED'}")  # fmt: skip
    if report.failures:
        print("failing only on ToolExecutor:", *report.failures, sep="\n  ")
    path = write_results(
        "toolnode_suite",
        {
            "langgraph_prebuilt": version("langgraph-prebuilt"),
            "target": f"ToolExecutor passes >= {TARGET} x ToolNode passes",
            "ratio": round(report.ratio, 4),
            "met": met,
            "files": report.files,
            "failures": report.failures,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
