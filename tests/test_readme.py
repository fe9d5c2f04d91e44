"""The README's Python examples run as written.

Every fenced block whose info string is exactly ``python`` is executed, each in a
fresh namespace, from a scratch directory laid out like the repository root
(``tests/`` linked in, for the local MCP servers), so files an example writes
never land in the repository. Blocks marked ``python no-run`` are fragments
(they need a running server, say) and are only compiled.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)
RUNNABLE, FRAGMENT = "python", "python no-run"


def _python_blocks() -> list[tuple[str, str, int]]:
    """(info string, code, line number) of every Python block of the README."""
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        info = match.group(1).strip()
        if info.split(" ")[0] in ("python", "py", "python3"):
            line = text.count("\n", 0, match.start()) + 1
            blocks.append((info, match.group(2), line))
    return blocks


BLOCKS = _python_blocks()
RUN = [(code, line) for info, code, line in BLOCKS if info == RUNNABLE]


def test_readme_python_blocks_are_runnable_or_marked_as_fragments() -> None:
    unknown = [(line, info) for info, _, line in BLOCKS if info not in (RUNNABLE, FRAGMENT)]
    assert not unknown, f"use ```{RUNNABLE} or ```{FRAGMENT}; found {unknown}"
    assert len(RUN) >= 6, "the README's examples should run"
    top_code, _ = RUN[0]
    assert "StateGraph(ToolBudgetState)" in top_code and len(top_code.splitlines()) <= 20


@pytest.mark.parametrize("info, code, line", [b for b in BLOCKS if b[0] == FRAGMENT])
def test_readme_fragment_compiles(info: str, code: str, line: int) -> None:
    compile(code, f"README.md:{line}", "exec")


@pytest.mark.parametrize("code, line", RUN, ids=[f"line{line}" for _, line in RUN])
def test_readme_example_runs(
    code: str, line: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tests").symlink_to(REPO / "tests", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLBUDGET_MODEL", raising=False)
    namespace = {"__name__": f"readme_line{line}"}
    exec(compile(code, f"README.md:{line}", "exec"), namespace)  # noqa: S102 - the README's own code


def test_readme_configuration_reference_names_every_parameter() -> None:
    """Each public node's and factory's parameters appear in the configuration reference."""
    import inspect

    from langgraph_toolbudget import (
        CallModel,
        ClassifyIntent,
        SelectTools,
        ToolAgent,
        ToolCatalog,
        ToolExecutor,
        ToolSearch,
        add_toolbudget_nodes,
        create_toolbudget_agent,
    )

    text = README.read_text(encoding="utf-8")
    start = text.index("## Configuration reference")
    section = text[start : text.index("\n## ", start + 1)]
    documented = set(re.findall(r"\w+", section))
    missing = {}
    for api in (
        ToolCatalog.from_tools,
        ToolCatalog.from_mcp,
        ClassifyIntent,
        SelectTools,
        ToolSearch,
        CallModel,
        ToolAgent,
        ToolExecutor,
        add_toolbudget_nodes,
        create_toolbudget_agent,
    ):
        params = inspect.signature(api).parameters.values()
        names = {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        undocumented = sorted(names - documented - {"self", "name"})
        if undocumented:
            missing[api.__qualname__] = undocumented
    assert not missing, (
        f"document these parameters in the README's configuration reference: {missing}"
    )
