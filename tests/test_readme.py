"""The README's and the docs' Python examples run as written.

Every fenced block of ``README.md`` and ``docs/*.md`` whose info string is
exactly ``python`` is executed, each in a fresh namespace, from a scratch
directory laid out like the repository root (``tests/`` and ``examples/`` linked
in, for the local MCP servers), so files an example writes never land in the repository.
Blocks marked ``python slow`` (an embedding model) run too, as slow tests; blocks marked
``python sdk`` talk to a LangGraph server at ``http://127.0.0.1:2024`` and run against a
real ``langgraph dev`` in ``tests/test_server.py``. Blocks marked ``python postgres`` run
against a fresh database of the tests' PostgreSQL (``$DATABASE_URI``), as slow tests. Blocks
marked ``python no-run`` need a provider's API key and the network, so they are only compiled.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)
RUNNABLE, FRAGMENT, SLOW, SDK = "python", "python no-run", "python slow", "python sdk"
POSTGRES = "python postgres"


def _where(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def _python_blocks(page: Path) -> list[tuple[str, str, str]]:
    """(info string, code, "page:line") of every Python block of ``page``."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        info = match.group(1).strip()
        if info.split(" ")[0] in ("python", "py", "python3"):
            line = text.count("\n", 0, match.start()) + 1
            blocks.append((info, match.group(2), f"{_where(page)}:{line}"))
    return blocks


BLOCKS = [block for page in PAGES for block in _python_blocks(page)]
RUN = [(code, where) for info, code, where in BLOCKS if info == RUNNABLE]
FRAGMENTS = [(code, where) for info, code, where in BLOCKS if info == FRAGMENT]
SLOW_RUN = [(code, where) for info, code, where in BLOCKS if info == SLOW]
SDK_RUN = [(code, where) for info, code, where in BLOCKS if info == SDK]
POSTGRES_RUN = [(code, where) for info, code, where in BLOCKS if info == POSTGRES]
SERVER_URL = "http://127.0.0.1:2024"
"""The URL the ``python sdk`` blocks name; the test replaces it with its server's."""


def test_python_blocks_are_runnable_or_marked_as_fragments() -> None:
    kinds = (RUNNABLE, FRAGMENT, SLOW, SDK, POSTGRES)
    unknown = [(where, info) for info, _, where in BLOCKS if info not in kinds]
    assert not unknown, f"use one of {[f'```{k}' for k in kinds]}; found {unknown}"
    assert all(SERVER_URL in code for code, _ in SDK_RUN), "a sdk block names the server URL"
    for code, where in FRAGMENTS:  # only what cannot run offline stays a fragment
        assert "API_KEY" in code or "openai:" in code, f"{where}: make it run"


def test_readme_opens_with_a_short_runnable_example() -> None:
    readme = [code for code, where in RUN if where.startswith("README.md:")]
    assert len(readme) >= 3, "the README's examples should run"
    top_code = readme[0]
    assert "StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)" in top_code
    assert len(top_code.splitlines()) <= 20


@pytest.mark.parametrize(
    "code, where", [*FRAGMENTS, *SDK_RUN], ids=[w for _, w in [*FRAGMENTS, *SDK_RUN]]
)
def test_fragment_and_sdk_example_compile(code: str, where: str) -> None:
    compile(code, where, "exec")


def run_example(code: str, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run one example as written, from a scratch copy of the repository's layout."""
    (tmp_path / "tests").symlink_to(REPO / "tests", target_is_directory=True)
    (tmp_path / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLBUDGET_MODEL", raising=False)
    namespace = {"__name__": "example_" + re.sub(r"\W", "_", where)}
    exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the docs' own code


@pytest.mark.parametrize("code, where", RUN, ids=[w for _, w in RUN])
def test_example_runs(
    code: str, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_example(code, where, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("code, where", SLOW_RUN, ids=[w for _, w in SLOW_RUN])
def test_slow_example_runs(
    code: str, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_example(code, where, tmp_path, monkeypatch)


@pytest.mark.parametrize("code, where", POSTGRES_RUN, ids=[w for _, w in POSTGRES_RUN])
def test_postgres_example_runs(
    code: str, where: str, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python postgres`` blocks run against a fresh database of the tests' PostgreSQL."""
    monkeypatch.setenv("DATABASE_URI", pg_url)
    run_example(code, where, tmp_path, monkeypatch)


def test_configuration_reference_names_every_parameter() -> None:
    """The parameters of every public node and factory, and of BudgetConfig, are documented."""
    import inspect

    from langgraph_toolbudget import (
        BudgetConfig,
        CallModel,
        ChooseTools,
        ClassifyIntent,
        SelectTools,
        ToolAgent,
        ToolBudgetMiddleware,
        ToolCatalog,
        ToolExecutor,
        ToolSearch,
        ToolUsage,
        add_toolbudget_nodes,
        create_toolbudget_agent,
    )
    from langgraph_toolbudget.mcp import MCPLoadOptions, load_mcp_catalog
    from langgraph_toolbudget.nodes.tool_index import StoreToolIndex

    documented = set(re.findall(r"\w+", (DOCS / "configuration.md").read_text(encoding="utf-8")))
    missing = {}
    for api in (
        BudgetConfig,
        ToolCatalog.from_tools,
        load_mcp_catalog,
        ClassifyIntent,
        SelectTools,
        ToolSearch,
        ChooseTools,
        CallModel,
        ToolAgent,
        ToolExecutor,
        add_toolbudget_nodes,
        create_toolbudget_agent,
        ToolBudgetMiddleware,
        ToolUsage,
        StoreToolIndex,
    ):
        params = inspect.signature(api).parameters.values()
        names = {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        undocumented = sorted(names - documented - {"self", "name"})
        if undocumented:
            missing[api.__qualname__] = undocumented
    undocumented = sorted(set(MCPLoadOptions.__annotations__) - documented)
    if undocumented:
        missing["MCPLoadOptions"] = undocumented
    assert not missing, f"document these parameters in docs/configuration.md: {missing}"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)


def _prose(text: str) -> str:
    """``text`` without fenced blocks and inline code (no links or headings in there)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.sub(r"`[^`\n]*`", "", text)


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a Markdown page's headings."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL | re.M)
    anchors = set()
    for heading in HEADING.findall(text):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower())
        anchors.add(slug.replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=_where)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists() or (
            anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved)
        ):
            broken.append(target)
    assert not broken, f"{_where(page)}: links to nothing: {broken}"
