"""The layers stay layers: what each folder of the package may import.

``core/`` is pure logic (no LangGraph, no adapters); ``execution/`` knows tool calls but
not nodes; private upstream names are imported only in ``_compat*.py``; importing the
package does not load the MCP SDK.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "langgraph_toolbudget"


def imports_of(path: Path) -> list[tuple[str, list[str], bool]]:
    """(module, imported names, at module level) for every import in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, [], id(node) in top) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [a.name for a in node.names], id(node) in top))
    return out


def modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("path", modules("core"), ids=lambda p: p.name)
def test_core_imports_neither_langgraph_nor_the_adapters(path):
    bad = [
        m
        for m, _, top in imports_of(path)
        if m.split(".")[0] == "langgraph"
        or (
            top
            and m.startswith("langgraph_toolbudget.")
            and not m.startswith(("langgraph_toolbudget.core", "langgraph_toolbudget._compat"))
        )
    ]
    assert not bad, f"{path.name} imports {bad}: core/ is pure logic"


@pytest.mark.parametrize("path", modules("execution"), ids=lambda p: p.name)
def test_execution_does_not_import_the_nodes(path):
    bad = [m for m, _, _ in imports_of(path) if m.startswith("langgraph_toolbudget.nodes")]
    assert not bad, f"{path.name} imports {bad}: execution/ sits below nodes/"


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if not p.name.startswith("_compat")],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_private_upstream_names_are_imported_only_in_compat(path):
    private = [
        f"{m}:{n}"
        for m, names, _ in imports_of(path)
        if not m.startswith("langgraph_toolbudget")
        for n in [*names, *m.split(".")]
        if n.startswith("_") and n != "__future__"
    ]
    assert not private, f"{path.relative_to(PACKAGE)} imports private names {private}"


def test_importing_the_package_loads_no_mcp_sdk():
    code = (
        "import sys, langgraph_toolbudget\n"
        "print(sorted(m for m in ('mcp', 'langchain_mcp_adapters') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "path",
    [p for folder in ("core", "execution", "nodes", "mcp") for p in modules(folder)],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_only_the_middleware_adapter_imports_langchain_agents(path):
    bad = [
        m
        for m, _, _ in imports_of(path)
        if m.startswith(("langchain.agents", "langgraph_toolbudget.middleware"))
    ]
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: the middleware is its own adapter"


def test_importing_the_package_loads_no_langchain_agents():
    code = (
        "import sys, langgraph_toolbudget\n"
        "langgraph_toolbudget.ToolBudgetState\n"
        "print(sorted(m for m in ('langchain', 'langchain.agents') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
