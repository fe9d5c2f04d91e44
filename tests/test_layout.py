"""The layers stay layers: what each folder of the package may import.

``core/`` is pure logic (no LangGraph, no adapters, at any level of a module); ``execution/``
knows tool calls but not nodes; the package's modules import each other without a circle
(function-level imports included); nothing but ``demo/`` itself imports the demo; private
upstream names are imported only in ``_compat*.py``; importing the package does not load the
MCP SDK.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "langgraph_toolbudget"
NAME = PACKAGE.name


def imports_of(path: Path) -> list[tuple[str, list[str], bool]]:
    """(module, imported names, at module level) for every import in a file.

    Function-level imports count (``at module level`` False), and so does
    ``importlib.import_module("...")`` with a literal name.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    here = module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, [], id(node) in top) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.append((module, [a.name for a in node.names], id(node) in top))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append((node.args[0].value, [], False))
    return out


def module_name(path: Path) -> str:
    """``langgraph_toolbudget.core.catalog`` for ``.../core/catalog.py``."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports, at any level of the file.

    ``from langgraph_toolbudget.x import y`` is an edge to module ``x.y`` when that is a
    module, else to ``x``. The package's own ``__init__`` (the public face, whose lazy
    exports sit above every layer) is left out, as a module and as a target.
    """
    paths = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        if name == NAME:
            continue
        edges = set()
        for module, names, _ in imports_of(path):
            if module != NAME and not module.startswith(NAME + "."):
                continue
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in paths]
            if len(targets) < len(names) or not names:
                targets.append(module)
            edges.update(t for t in targets if t in paths and t not in (NAME, name))
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in order, the first repeated), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_package_has_no_import_circle():
    """No module reaches itself through imports, function-level ones included."""
    graph = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if "demo" not in p.relative_to(PACKAGE).parts],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_nothing_outside_the_demo_imports_it(path):
    bad = [m for m, _, _ in imports_of(path) if m.startswith(f"{NAME}.demo")]
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: the demo sits above the package"


CORE_MAY_IMPORT = (f"{NAME}.core", f"{NAME}._compat", f"{NAME}.formats")


@pytest.mark.parametrize("path", modules("core"), ids=lambda p: p.name)
def test_core_imports_neither_langgraph_nor_the_adapters(path):
    """At any level of the file: a function-level import is a dependency too."""
    bad = [
        m
        for m, _, _ in imports_of(path)
        if m.split(".")[0] == "langgraph"
        or ((m == NAME or m.startswith(NAME + ".")) and not m.startswith(CORE_MAY_IMPORT))
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


def test_the_architecture_page_lists_every_module():
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [
        str(p.relative_to(PACKAGE))
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name != "__init__.py" and f"`{p.name}`" not in page
    ]
    assert not missing, f"docs/architecture.md does not list {missing}"


def test_the_public_names_are_what_the_three_ways_in_need():
    """The prebuilt agent, nodes in your own graph, the middleware, the tool context: no
    algorithm internal (a scorer, a spec, a token counter) at the top level."""
    import langgraph_toolbudget as package

    prebuilt = {"create_toolbudget_agent", "ToolCatalog", "load_mcp_catalog", "MCPLoadError",
                "MCPServerError", "BudgetConfig", "BudgetOptions", "ToolUsage",
                "DatabaseToolbox"}  # fmt: skip
    nodes = {"ClassifyIntent", "SelectTools", "ToolSearch", "ChooseTools", "CallModel",
             "ToolExecutor", "ToolAgent", "add_toolbudget_nodes", "ToolBudgetState",
             "ToolBudgetInput", "tools_prompt_section", "tools_to_bind"}  # fmt: skip
    context = {"include_tools", "exclude_tools", "set_include_mode", "context_summary",
               "update_context", "aupdate_context"}  # fmt: skip
    assert set(package.__all__) == prebuilt | nodes | {"ToolBudgetMiddleware"} | context
    assert len(package.__all__) == len(set(package.__all__))
    for name in package.__all__:
        assert getattr(package, name) is not None
    with pytest.raises(AttributeError, match="HybridScorer"):
        package.HybridScorer  # noqa: B018 - importable from core.semantic, not the top level
