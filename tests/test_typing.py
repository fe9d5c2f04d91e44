"""The public API under a type checker: ``mypy --strict`` over a user's code.

The options are typed once (``BudgetOptions``), so a misspelt option, a wrong type or a bad
literal is caught by ``mypy`` wherever options are taken, ``BudgetConfig`` included; and
``ToolBudgetInput`` is a type a user can write in annotations.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

USER_CODE = """\
from langchain_core.messages import HumanMessage
from langgraph.graph import StateGraph
from langgraph_toolbudget import BudgetConfig, ToolBudgetInput, ToolBudgetState

config = BudgetConfig(max_tools=3, mode="sequential", pinned=["get_weather"])
smaller = config.override(max_visible=None, max_tools=2)
BudgetConfig(max_tool=3)  # line 7
BudgetConfig(mode="bogus")  # line 8
BudgetConfig(max_tools="8")  # line 9
config.override(max_visble=3)  # line 10
config.override(mode="turbo")  # line 11


def first_input(text: str) -> ToolBudgetInput:
    return {"messages": [HumanMessage(text)]}


graph: StateGraph[ToolBudgetState, None, ToolBudgetInput, ToolBudgetState] = StateGraph(
    ToolBudgetState, input_schema=ToolBudgetInput
)
"""


def _mypy_errors(tmp_path: Path, cache: Path, code: str) -> dict[int, str]:
    """Line -> mypy's errors there, for ``code`` checked as a user's module."""
    path = tmp_path / "user_code.py"
    path.write_text(code)
    command = [sys.executable, "-m", "mypy", "--strict", "--no-error-summary"]
    command += ["--follow-imports=silent", "--cache-dir", str(cache), str(path)]
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    out = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    ).stdout
    errors: dict[int, str] = {}
    for line in out.splitlines():
        found = re.match(r"(?:.*[/\\])?user_code\.py:(\d+): error: (.*)", line)
        if found:
            errors[int(found[1])] = errors.get(int(found[1]), "") + found[2]
    return errors


def test_mypy_checks_budget_config_options_and_takes_tool_budget_input_as_a_type(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = getattr(request.config, "cache", None)
    cache = store.mkdir("mypy") if store is not None else tmp_path / "cache"
    errors = _mypy_errors(tmp_path, cache, USER_CODE)
    assert set(errors) == {7, 8, 9, 10, 11}, errors
    assert 'Unexpected keyword argument "max_tool"' in errors[7]
    assert "Literal['sequential', 'parallel_safe']" in errors[8]
    assert '"max_tools"' in errors[9] and '"str"' in errors[9]
    assert 'Unexpected keyword argument "max_visble"' in errors[10]
    assert '"mode"' in errors[11]
