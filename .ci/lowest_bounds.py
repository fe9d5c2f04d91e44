"""Check that the lowest-direct install holds each direct dependency at its declared bound.

Run with the lowest-direct environment's Python, from the repository's root. A dependency that
another one lifts above its ``>=`` bound (``langchain>=1.3`` takes ``langgraph>=1.2.0``) would
be published with a bound no test runs: raise the bound to the version installed here.
"""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


def main() -> int:
    project = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))["project"]
    texts = [*project["dependencies"], *sum(project["optional-dependencies"].values(), [])]
    own, wrong = canonicalize_name(project["name"]), []
    for requirement in map(Requirement, texts):
        if canonicalize_name(requirement.name) == own:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": "dev"}):
            continue
        bounds = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        try:
            installed = Version(version(requirement.name))
        except PackageNotFoundError:
            wrong.append(f"{requirement}: not installed")
            continue
        if bounds and installed != max(bounds):
            wrong.append(f"{requirement}: {installed} installed")
    for line in sorted(set(wrong)):
        print(f"lowest bound not installed: {line}")
    if wrong:
        print("raise each bound to the version installed (or find what lifts it)")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
