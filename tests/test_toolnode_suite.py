"""LangGraph's own ToolNode tests pass on ToolExecutor.from_tools as they pass on ToolNode.

The test files of the installed ``langgraph-prebuilt`` are downloaded from the
registry (its sdist, cached; see ``tests/toolnode_suite.py``) and run twice at
once in subprocesses: on ``ToolNode`` and with ``ToolNode`` swapped for
``ToolExecutor.from_tools``, memory checkpointer only. Over the tests that build
a ``ToolNode``, ToolExecutor must pass at least 95% of what ToolNode passes. The
test skips, saying why, when the registry cannot be reached.
"""

from __future__ import annotations

import pytest
from toolnode_suite import RegistryUnreachable, SuiteReport, fetch_suite, run_suite

MIN_RATIO = 0.95


@pytest.fixture(scope="module")
def report() -> SuiteReport:
    try:
        root = fetch_suite()
    except RegistryUnreachable as exc:
        pytest.skip(f"ToolNode suite not run: the package registry is unreachable ({exc})")
    result = run_suite(root)
    print(result.table())
    return result


def test_toolexecutor_passes_at_least_95_percent_of_what_toolnode_passes(report):
    assert report.total("toolnode") >= 100, report.table()  # the suite really ran
    assert report.ratio >= MIN_RATIO, (
        f"ToolExecutor.from_tools passes {report.ratio:.1%} of ToolNode's passes "
        f"(needs {MIN_RATIO:.0%}):\n{report.table()}\nfailing only on ToolExecutor:\n"
        + "\n".join(report.failures)
    )


def test_every_suite_file_ran_on_both(report):
    for name, counts in report.files.items():
        assert counts["all_tests"] > 0, name
        assert counts["all_toolnode"] > 0, f"{name}: nothing passed on ToolNode itself"
