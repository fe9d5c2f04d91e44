"""A pytest plugin for LangGraph's own ToolNode tests: swaps ToolNode for ToolExecutor.from_tools.

Loaded with ``-p toolnode_swap`` by :mod:`toolnode_suite` in a subprocess. With
``TOOLNODE_SWAP=1`` every name the tests (and ``create_react_agent``) use for
``ToolNode`` is replaced by :class:`SwappedToolNode`, a ``ToolExecutor`` built
as ``ToolExecutor.from_tools(tools, **kwargs)``; with ``TOOLNODE_SWAP=0`` the
real ``ToolNode`` runs. Either way, each test's outcome, and whether it built a
``ToolNode`` (or its swap), is written as JSON to ``TOOLNODE_SUITE_RESULTS``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_built: list[bool] = [False]  # did the running test build a ToolNode?
_results: dict[str, dict[str, Any]] = {}


def _swap() -> None:
    import langgraph.prebuilt as prebuilt
    import langgraph.prebuilt.chat_agent_executor as agent_module
    import langgraph.prebuilt.tool_node as tool_node_module

    from langgraph_toolbudget.nodes.executor import ToolExecutor  # before the patch below

    class SwappedToolNode(ToolExecutor):
        """``ToolNode(tools, **kwargs)`` built as ``ToolExecutor.from_tools(tools, **kwargs)``."""

        def __init__(self, tools: Any, **kwargs: Any) -> None:
            _built[0] = True
            self._init_from_tools(tools, **kwargs)

    for module in (prebuilt, tool_node_module, agent_module):
        module.ToolNode = SwappedToolNode  # type: ignore[attr-defined, misc]


def _count_real() -> None:
    from langgraph.prebuilt import ToolNode

    init = ToolNode.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        _built[0] = True
        init(self, *args, **kwargs)

    ToolNode.__init__ = counted  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("TOOLNODE_SWAP") == "1":
        _swap()
    else:
        _count_real()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    _built[0] = False
    _results[item.nodeid] = {"outcome": "passed", "builds_toolnode": False}
    yield
    _results[item.nodeid]["builds_toolnode"] = _built[0]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "builds_toolnode": False})
    if report.failed:
        entry["outcome"] = "failed"
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("TOOLNODE_SUITE_RESULTS")
    if path:
        Path(path).write_text(json.dumps(_results, indent=1))
