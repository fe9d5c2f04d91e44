"""Every lower bound ``pyproject.toml`` declares is the one CI's lowest-direct pass installs.

That pass installs ``.[dev]``, which takes every extra: a package named in more than one place
(the dependencies, an extra, ``dev``) resolves to the highest of its lower bounds there, so a
lower one would be published but never tested. ``langgraph-checkpoint-sqlite>=2.0.8`` in the
``cli`` extra was: 2.0.x installs beside langgraph-checkpoint 4 and fails on its first write,
while ``dev``'s own ``>=3.0.3`` was what the tests ran. And every module the package imports
is declared, not only brought by another dependency (whose next release may drop it).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections import defaultdict
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _project() -> dict[str, Any]:
    """``pyproject.toml``'s ``[project]`` table."""
    project: dict[str, Any] = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    return project


def _requirements() -> dict[str, list[Requirement]]:
    """Where each requirement is declared (``dependencies`` or the extra's name) -> them,
    the package's own extras (``dev`` takes the others) left out."""
    project = _project()
    declared = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    own = canonicalize_name(project["name"])
    return {
        where: [r for r in map(Requirement, texts) if canonicalize_name(r.name) != own]
        for where, texts in declared.items()
    }


def test_dev_takes_every_extra():
    project = _project()
    extras = set(project["optional-dependencies"]) - {"dev"}
    (own,) = [
        Requirement(r)
        for r in project["optional-dependencies"]["dev"]
        if canonicalize_name(Requirement(r).name) == canonicalize_name(project["name"])
    ]
    assert own.extras == extras


def test_a_package_named_twice_has_one_lower_bound():
    bounds: dict[str, set[str]] = defaultdict(set)
    places: dict[str, list[str]] = defaultdict(list)
    for where, requirements in _requirements().items():
        for requirement in requirements:
            name = canonicalize_name(requirement.name)
            bounds[name].add(str(requirement.specifier))
            places[name].append(where)
    differing = {name: (sorted(b), places[name]) for name, b in bounds.items() if len(b) > 1}
    assert not differing, (
        f"declared with different bounds (the lower ones are never tested): {differing}; "
        "give each package one bound, in one place where you can"
    )


OPTIONAL_IMPORTS = {
    # Imported when present (a dependency of langsmith, so nearly always): json is the fallback.
    "orjson": "core/large_output.py",
    # The driver of a PostgreSQL source, the user's to install (the database extra says so).
    "psycopg": "database/toolbox.py",
}
"""Third-party modules the package imports without declaring them -> where, each with why."""

SHIPPED_BY = {"pydantic-monty-client": "pydantic-monty"}
"""A distribution holding a module the package imports -> the declared one that installs it."""


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level modules the package imports (absolute imports, the standard library and the
    package itself left out) -> the files importing them."""
    package = PYPROJECT.parent / "langgraph_toolbudget"
    found: dict[str, set[str]] = defaultdict(set)
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top != package.name:
                    found[top].add(path.relative_to(package).as_posix())
    return found


def test_every_module_the_package_imports_is_declared():
    declared = {canonicalize_name(r.name) for rs in _requirements().values() for r in rs}
    distributions = packages_distributions()
    undeclared = {}
    for module, files in _third_party_imports().items():
        names = {canonicalize_name(d) for d in distributions.get(module, [])}
        names |= {SHIPPED_BY[n] for n in names if n in SHIPPED_BY}
        if not names & declared and module not in OPTIONAL_IMPORTS:
            undeclared[module] = sorted(files)
    assert not undeclared, (
        f"imported but declared nowhere in pyproject.toml: {undeclared}; declare each (at the "
        "bound of the dependency that brings it today), or list it in OPTIONAL_IMPORTS with why"
    )
    assert set(OPTIONAL_IMPORTS) <= set(_third_party_imports())  # no stale entry
