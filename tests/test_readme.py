"""The README's and the docs' Python examples run as written.

Every fenced block of ``README.md``, ``docs/*.md`` and the examples' READMEs whose info string is
exactly ``python`` is executed, each in a fresh namespace, from a scratch
directory laid out like the repository root (``tests/`` and ``examples/`` linked
in, for the local MCP servers), so files an example writes never land in the repository.
Blocks marked ``python slow`` (an embedding model) run too, as slow tests; blocks marked
``python sdk`` talk to a LangGraph server at ``http://127.0.0.1:2024`` and run against a
real ``langgraph dev`` in ``tests/test_server.py``. Blocks marked ``python postgres`` run
against a fresh database of the tests' PostgreSQL (``$DATABASE_URI``), as slow tests. Blocks
marked ``python no-run`` need a provider's API key and the network, so they are only compiled.

What an example prints is checked against its comments (:func:`check_printed`):

- ``print(...)  # <expected>``: the comment after a ``print`` statement is what it prints;
  a ``print`` statement without one, directly followed by comment-only lines: those lines
  are what it prints (one comment line per line of output).
- ``...`` in the expected text stands for any text (line breaks included), and any run of
  whitespace (line breaks included) equals one space.
- The expected text may end in a gloss after ``": "`` (``# 5 3: the preset, then 3``): the
  comment also matches when the part before one of its ``": "`` does.
- Every time the statement runs it must print a matching text; one that never prints fails.
- A block whose comments describe rather than show the output opts out with the line
  ``<!-- output not checked: <why> -->`` right above its fence (keep these rare).
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import sys
import tokenize
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md")), *sorted((REPO / "examples").rglob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)
RUNNABLE, FRAGMENT, SLOW, SDK = "python", "python no-run", "python slow", "python sdk"
POSTGRES = "python postgres"
OUTPUT_NOT_CHECKED = re.compile(r"<!-- output not checked: [^>]+ -->\n$")


def _where(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


OUTPUT_UNCHECKED: set[str] = set()
"""The blocks ("page:line") whose printed output is not compared with their comments."""


def _python_blocks(page: Path) -> list[tuple[str, str, str]]:
    """(info string, code, "page:line") of every Python block of ``page``."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        info = match.group(1).strip()
        if info.split(" ")[0] in ("python", "py", "python3"):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{_where(page)}:{line}"
            blocks.append((info, match.group(2), where))
            if OUTPUT_NOT_CHECKED.search(text, max(0, match.start() - 300), match.start()):
                OUTPUT_UNCHECKED.add(where)
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


def expected_prints(code: str) -> dict[tuple[int, int], str]:
    """(first line, last line) of each ``print`` statement of ``code`` -> what its comments
    say it prints (see the module's docstring)."""
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    comments = {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}
    lines = code.splitlines()
    expected = {}
    for node in ast.walk(ast.parse(code)):
        call = node.value if isinstance(node, ast.Expr) else None
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "print"):
            continue
        last = node.end_lineno or node.lineno
        if last in comments:
            expected[node.lineno, last] = comments[last].removeprefix("#").strip()
            continue
        below = []
        while last < len(lines) and lines[last].strip().startswith("#"):
            below.append(lines[last].strip().removeprefix("#").strip())
            last += 1
        if below:
            expected[node.lineno, node.end_lineno or node.lineno] = "\n".join(below)
    return expected


def _spaced(text: str) -> str:
    return " ".join(text.split())


def output_matches(expected: str, printed: str) -> bool:
    """Does ``printed`` match the ``expected`` comment (``...`` any text; whitespace runs equal;
    a gloss after one of its ``": "`` ignored)?"""
    readings = [expected]
    readings += [expected[: m.start()] for m in re.finditer(r": ", expected)]
    for reading in readings:
        parts = [re.escape(part.strip()) for part in _spaced(reading).split("...")]
        if re.fullmatch(".*".join(parts), _spaced(printed), re.DOTALL):
            return True
    return False


class PrintRecorder:
    """A ``print`` for an example's namespace: prints as usual and keeps what each line of
    the example (``where``) printed to standard output."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.printed: dict[int, list[str]] = {}

    def __call__(
        self, *values: Any, sep: str | None = " ", end: str | None = "\n", **kw: Any
    ) -> None:
        builtins.print(*values, sep=sep, end=end, **kw)
        frame = sys._getframe(1)
        if kw.get("file") is None and frame.f_code.co_filename == self.where:
            text = io.StringIO()
            builtins.print(*values, sep=sep, end="", file=text)
            self.printed.setdefault(frame.f_lineno, []).append(text.getvalue())


def check_printed(code: str, where: str, recorder: PrintRecorder) -> None:
    """Fail, naming each, where a ``print`` printed other than its comment says."""
    start = int(where.rpartition(":")[2])
    page = where.rpartition(":")[0]
    wrong = []
    for (first, last), expected in sorted(expected_prints(code).items()):
        printed = [t for n in range(first, last + 1) for t in recorder.printed.get(n, [])]
        if not printed:
            wrong.append(f"{page}:{start + first}: never printed; the comment says {expected!r}")
        for text in printed:
            if not output_matches(expected, text):
                wrong.append(
                    f"{page}:{start + first}: printed {text!r}; the comment says {expected!r}"
                )
    if wrong:
        raise AssertionError("fix the comment (or the example):\n" + "\n".join(wrong))


def run_example(code: str, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run one example as written, from a scratch copy of the repository's layout, and check
    what it prints against its comments (unless its block opted out)."""
    (tmp_path / "tests").symlink_to(REPO / "tests", target_is_directory=True)
    (tmp_path / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLBUDGET_MODEL", raising=False)
    recorder = PrintRecorder(where)
    namespace = {"__name__": "example_" + re.sub(r"\W", "_", where), "print": recorder}
    exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the docs' own code
    if where not in OUTPUT_UNCHECKED:
        check_printed(code, where, recorder)


@pytest.mark.parametrize(
    "expected, printed, matches",
    [
        ("['a', 'b']", "['a', 'b']", True),
        ("['a', 'b']", "['a', 'c']", False),
        ("['a', ...]", "['a', 'b', 'c']", True),
        ("['a', ...]", "['b', 'a']", False),
        ("{'github': ..., 'slack': ...}", "{'github': 18.1, 'slack': 12.9}", True),
        ("5 3: the preset, then 3", "5 3", True),
        ("5 3: the preset, then 3", "5 4", False),
        ("warm: ['Tokyo']", "warm: ['Tokyo']", True),
        ("warm: ['Tokyo']", "warm: ['Paris']", False),
        ("warm: ['Tokyo']\n2", "warm:  ['Tokyo']\n2", True),
        ("a ... d", "a b\nc d", True),
        ("must be an integer, got '8'", "must be an integer or None, got '8'", False),
    ],
)
def test_printed_output_is_compared_with_its_comment_by_these_rules(
    expected: str, printed: str, matches: bool
) -> None:
    assert output_matches(expected, printed) is matches


EXAMPLE = """\
for n in (1, 2):
    print(n * 3)  # 3
print("a",
      "b")  # a b
print("warm:", ["Tokyo"])
# warm: ['Tokyo']
if False:
    print("never")  # never
print("no comment")
"""


def test_an_example_printing_other_than_its_comments_fails_naming_each_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(AssertionError) as caught:
        run_example(EXAMPLE, "docs/x.md:10", tmp_path, monkeypatch)
    wrong = [line for line in str(caught.value).splitlines() if line.startswith("docs/x.md:")]
    assert wrong == [
        "docs/x.md:12: printed '6'; the comment says '3'",
        "docs/x.md:18: never printed; the comment says 'never'",
    ]


def test_a_block_may_opt_out_of_the_output_check_with_a_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- output not checked: the numbers differ per machine -->\n"
        "```python\nprint(1)  # 2\n```\n"
        "```python\nprint(1)  # 2\n```\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)  # pages are named from REPO
    monkeypatch.setattr(sys.modules[__name__], "OUTPUT_UNCHECKED", set())
    marked, plain = (where for _, _, where in _python_blocks(page))
    assert {marked} == OUTPUT_UNCHECKED and marked != plain


def test_few_blocks_opt_out_of_the_output_check() -> None:
    assert set() == OUTPUT_UNCHECKED, "a comment should show what the example prints"


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
