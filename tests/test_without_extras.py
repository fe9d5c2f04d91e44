"""What a core install (no extras) gets: modules of an extra hidden from a child process, as
if not installed, by a finder that refuses them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

HIDE = """
import sys
from importlib.abc import MetaPathFinder

class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == m or name.startswith(m + ".") for m in {hidden!r}):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
"""


def run_without(
    hidden: list[str], code: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    script = HIDE.format(hidden=hidden) + textwrap.dedent(code)
    root = str(Path(__file__).resolve().parents[1])  # the package under test, first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def test_a_star_import_works_without_the_middleware_extra() -> None:
    # ToolBudgetMiddleware was in __all__, so `import *` raised its ImportError and imported
    # nothing, though every other name works without langchain.
    done = run_without(
        ["langchain"],
        """
        from langgraph_toolbudget import *
        print(create_toolbudget_agent.__name__, ToolCatalog.__name__)
        print("ToolBudgetMiddleware" in dir())
        try:
            from langgraph_toolbudget import ToolBudgetMiddleware
        except ImportError as exc:
            print(exc)
        """,
    )
    assert done.returncode == 0, done.stderr
    names, star, error = done.stdout.splitlines()[:3]
    assert names == "create_toolbudget_agent ToolCatalog" and star == "False"
    assert "[middleware]" in error  # asked for by name, it names the extra


def test_the_middleware_is_in_a_star_import_when_langchain_is_installed() -> None:
    done = run_without([], "from langgraph_toolbudget import *\nprint(ToolBudgetMiddleware)")
    assert done.returncode == 0 and "ToolBudgetMiddleware" in done.stdout, done.stderr


def test_the_cli_names_the_extra_a_sqlite_thread_needs(tmp_path: Path) -> None:
    # It printed a bare "ModuleNotFoundError: No module named 'langgraph.checkpoint.sqlite'".
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            """
            from langgraph_toolbudget import create_toolbudget_agent
            from langgraph_toolbudget.demo.example_catalog import build_example_catalog
            from langgraph_toolbudget.demo.model import DemoChatModel
            catalog = build_example_catalog()
            graph = create_toolbudget_agent(DemoChatModel(), catalog)
            """
        )
    )
    (tmp_path / "t.sqlite").write_bytes(b"")
    args = ["tools", "--sqlite", "t.sqlite", "--thread", "t1"]
    args += ["--catalog", "app:catalog", "--graph", "app:graph"]
    done = run_without(
        ["langgraph.checkpoint.sqlite"],
        f"""
        sys.path.insert(0, ".")
        sys.argv = ["toolbudget", *{args!r}]
        from langgraph_toolbudget.cli import main
        main()
        """,
        cwd=tmp_path,
    )
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "ModuleNotFoundError" not in said, said
    assert "langgraph-checkpoint-sqlite" in said and "'.[cli]'" in said, said
