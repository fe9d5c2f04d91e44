"""The docs' Python examples type-check as a user would paste them: ``mypy --strict``.

Every fenced Python block of ``README.md``, ``docs/*.md`` and the examples' READMEs (the blocks
``tests/test_readme.py`` runs, or compiles) is a whole program, imports included, so each is written
as a module of its own and all are checked together in one ``mypy --strict`` run, as
``tests/test_typing.py`` checks its programs (the package on ``MYPYPATH``, imports followed
silently, mypy's cache in pytest's cache directory, shared with it: about 5 s warm, 50 s cold). What
a user pasting the blocks met before: a ``{"configurable": ...}`` dict passed where a
``RunnableConfig`` is expected, an unannotated helper, a graph re-bound to its compiled form.

A block keeps an error only through :data:`ALLOWED`, for an error that comes from a third-party
library's own types: its page, a marker (a text of the block) and the errors allowed there, each
with its reason. An entry that no longer matches a block or an error fails too.
"""

from __future__ import annotations

import re

import pytest

from tests.test_readme import BLOCKS
from tests.test_typing import mypy_run

DOC_BLOCKS = {where: code for _, code, where in BLOCKS}
"""``"page:line"`` of the opening fence -> the code, for every Python block of the pages."""

ALLOWED: dict[tuple[str, str], tuple[str, ...]] = {
    # langgraph_sdk types a thread state's "values" as ``list[dict] | dict[str, Any]`` (a graph's
    # state may be a list), so reading a key of it is an error for every user of the SDK.
    ("docs/context.md", 'client.threads.get_state(thread_id)["values"]'): (
        'No overload variant of "__getitem__" of "list" matches argument type "str"',
    ),
    # The same ``values``; and langgraph_sdk's ``Json`` input type takes a list of dicts only as
    # ``list[Mapping[str, Any]]``, which mypy does not infer for the run's messages (a list of
    # role/content dicts, the SDK's documented input) inside that union.
    ("docs/server.md", "async for part in client.runs.stream("): (
        'Dict entry 0 has incompatible type "str": "list[dict[str, str]]"',
        'No overload variant of "__getitem__" of "list" matches argument type "str"',
    ),
}
"""(page, marker) -> the texts of the errors allowed in the page's block containing the marker."""

CANARY = """\
from langgraph_toolbudget import create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

app = create_toolbudget_agent(DemoChatModel(), build_example_catalog()).compile()
thread = {"configurable": {"thread_id": "1"}}
app.invoke({"messages": [("user", "hi")]}, thread)
"""
"""A block as the docs had it (a plain dict for a config): checked in the same run, it must be
refused, or the run checks nothing (a wrong path, a mypy that did not start)."""


def _module(where: str) -> str:
    """The module name of the block at ``where`` ("docs/agent.md:30" -> "doc_agent_30")."""
    page, line = where.rsplit(":", 1)
    stem = page.rsplit("/", 1)[-1].removesuffix(".md")
    return re.sub(r"\W", "_", f"doc_{stem}_{line}").lower()


def _each(errors: str) -> list[str]:
    """The errors of one line, which ``_mypy_errors`` joins: each ends with ``  [its-code]``."""
    return re.findall(r".+?  \[[\w-]+\]", errors) or [errors]


def _allowed(where: str) -> tuple[str, ...]:
    """The errors :data:`ALLOWED` allows in the block at ``where``."""
    page = where.rsplit(":", 1)[0]
    code = DOC_BLOCKS[where]
    return tuple(
        text
        for (allowed_page, marker), texts in ALLOWED.items()
        if allowed_page == page and marker in code
        for text in texts
    )


@pytest.fixture(scope="module")
def mypy_errors(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, dict[int, str]]:
    """Module -> line -> mypy's errors there, for every block and the canary, in one run."""
    programs = {_module(where): code for where, code in DOC_BLOCKS.items()}
    assert len(programs) == len(DOC_BLOCKS), "two blocks got one module name"
    return mypy_run(request, tmp_path_factory, "docs_typing", {**programs, "doc_canary": CANARY})


def test_the_docs_python_blocks_type_check_under_mypy_strict(
    mypy_errors: dict[str, dict[int, str]],
) -> None:
    assert len(DOC_BLOCKS) >= 40, "the README's and the docs' blocks were not found"
    wrong = []
    for where, code in DOC_BLOCKS.items():
        page, fence = where.rsplit(":", 1)
        allowed = _allowed(where)
        for number, errors in sorted(mypy_errors[_module(where)].items()):
            line = f"{page}:{int(fence) + number}: {code.splitlines()[number - 1]}"
            wrong += [
                f"{line}\n    {error}"
                for error in _each(errors)
                if not any(text in error for text in allowed)
            ]
    assert not wrong, (
        "a documented block does not type-check as a user would paste it (annotate the config "
        "`config: RunnableConfig = {...}`, the helper's arguments and return; or, for an error "
        "of a third-party library's own types, add it to ALLOWED with why):\n" + "\n".join(wrong)
    )


def test_every_allowed_error_names_a_block_and_still_occurs(
    mypy_errors: dict[str, dict[int, str]],
) -> None:
    stale = []
    for (page, marker), texts in ALLOWED.items():
        blocks = [
            w for w, code in DOC_BLOCKS.items() if w.startswith(f"{page}:") and marker in code
        ]
        if len(blocks) != 1:
            stale.append(f"{page} {marker!r}: {len(blocks)} blocks hold the marker, not 1")
            continue
        errors = " ".join(mypy_errors[_module(blocks[0])].values())
        stale += [f"{blocks[0]}: no longer has {text!r}" for text in texts if text not in errors]
    assert not stale, "fix ALLOWED (remove what the docs no longer need):\n" + "\n".join(stale)


def test_a_block_passing_a_plain_dict_as_its_config_is_refused(
    mypy_errors: dict[str, dict[int, str]],
) -> None:
    errors = mypy_errors["doc_canary"]
    assert set(errors) == {7}, errors
    assert '"invoke" of "Pregel"' in errors[7]
