"""LangGraph's own ToolNode tests, run against ToolNode and against ToolExecutor.from_tools.

Nothing is vendored: :func:`fetch_suite` downloads the sdist of the installed
``langgraph-prebuilt`` (``pip download --no-binary :all: --no-deps``) once into a
cache directory, extracts the test files of :data:`SUITE_FILES` and their helpers,
and replaces the checkpointer/store fixtures' modules with memory-only ones (the
others need Postgres). :func:`run_suite` runs them twice at once, in two
subprocesses: on the real ``ToolNode`` and with ``ToolNode`` swapped for
``ToolExecutor.from_tools`` (the plugin :mod:`toolnode_swap`), and compares the
pass counts per file.

Used by ``tests/test_toolnode_suite.py`` (fails below 95% of ToolNode's passes)
and ``benchmarks/toolnode_suite.py`` (saves the per-file figures).
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

__all__ = ["SUITE_FILES", "RegistryUnreachable", "SuiteReport", "fetch_suite", "run_suite"]

SUITE_FILES = (
    "test_tool_node.py",
    "test_on_tool_call.py",
    "test_tool_node_interceptor_unregistered.py",
    "test_tool_node_validation_error_filtering.py",
    "test_tool_call_transformer.py",
    "test_injected_state_not_required.py",
    "test_react_agent.py",
)
HELPERS = (
    "__init__.py",
    "conftest.py",
    "model.py",
    "any_str.py",
    "memory_assert.py",
    "messages.py",
)
HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# Memory-only replacements of the suite's fixture modules (the originals import Postgres).
CHECKPOINTERS = """from contextlib import contextmanager

from tests.memory_assert import MemorySaverAssertImmutable


@contextmanager
def _checkpointer_memory():
    yield MemorySaverAssertImmutable()


def _unavailable(*args, **kwargs):
    raise NotImplementedError("only the memory checkpointer runs here")


_checkpointer_sqlite = _checkpointer_postgres = _checkpointer_postgres_pipe = _unavailable
_checkpointer_postgres_pool = _checkpointer_sqlite_aio = _checkpointer_postgres_aio = _unavailable
_checkpointer_postgres_aio_pipe = _checkpointer_postgres_aio_pool = _unavailable
"""
STORES = """from contextlib import contextmanager

from langgraph.store.memory import InMemoryStore


@contextmanager
def _store_memory():
    yield InMemoryStore()


def _unavailable(*args, **kwargs):
    raise NotImplementedError("only the in-memory store runs here")


_store_postgres = _store_postgres_pipe = _store_postgres_pool = _unavailable
_store_postgres_aio = _store_postgres_aio_pipe = _store_postgres_aio_pool = _unavailable
"""
PYTEST_INI = "[pytest]\nasyncio_mode = auto\n"


class RegistryUnreachable(RuntimeError):
    """The sdist could not be downloaded (no network, or the registry lacks it)."""


def cache_dir() -> Path:
    """Where the sdist and the extracted suite are kept (``TOOLBUDGET_CACHE`` or the tmp dir)."""
    root = os.environ.get("TOOLBUDGET_CACHE") or Path(tempfile.gettempdir()) / "toolbudget-cache"
    return Path(root) / f"langgraph-prebuilt-{version('langgraph-prebuilt')}"


def fetch_suite(cache: Path | None = None) -> Path:
    """Download (once) and extract the suite; returns its root (holding ``tests/``).

    Raises:
        RegistryUnreachable: ``pip download`` failed (its output says why).
    """
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    root = cache / "suite"
    with open(cache / ".lock", "w") as lock:  # two runs at once download once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "tests" / "conftest_store.py").exists():
            return root
        wanted = version("langgraph-prebuilt")
        sdists = list(cache.glob("langgraph_prebuilt-*.tar.gz"))
        if not sdists:
            cmd = [*_pip(), "download", "--no-binary", ":all:", "--no-deps"]
            cmd += [f"langgraph-prebuilt=={wanted}", "-d", str(cache), "-q"]
            cmd += ["--timeout", "20", "--retries", "1"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
            sdists = list(cache.glob("langgraph_prebuilt-*.tar.gz"))
            if done.returncode != 0 or not sdists:
                raise RegistryUnreachable(
                    f"pip download of langgraph-prebuilt=={wanted} failed: "
                    f"{(done.stderr or done.stdout).strip()[-500:]}"
                )
        _extract(sdists[0], root / "tests")
        return root


def _pip() -> list[str]:
    """A pip to download with: this interpreter's, else the one on PATH (a uv venv has none;
    downloading an sdist does not depend on the interpreter)."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    found = shutil.which("pip3") or shutil.which("pip")
    if found is None:
        raise RegistryUnreachable("no pip to download the sdist with (install pip)")
    return [found]


def _extract(sdist: Path, tests: Path) -> None:
    tests.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            parts = Path(member.name).parts
            if len(parts) == 3 and parts[1] == "tests" and parts[2] in SUITE_FILES + HELPERS:
                data = archive.extractfile(member)
                assert data is not None, member.name
                (tests / parts[2]).write_bytes(data.read())
    conftest = tests / "conftest.py"
    text = conftest.read_text().replace(
        "from pytest_mock import MockerFixture", "MockerFixture = object  # pytest-mock: unused"
    )
    conftest.write_text(text)
    (tests.parent / "pytest.ini").write_text(PYTEST_INI)
    (tests / "conftest_checkpointer.py").write_text(CHECKPOINTERS)
    (tests / "conftest_store.py").write_text(STORES)  # written last: marks the suite complete


@dataclass
class SuiteReport:
    """Passes per file on ToolNode and on ToolExecutor.from_tools.

    Attributes:
        files: file -> ``{"tests", "toolnode", "toolexecutor"}`` over the tests
            that build a ``ToolNode`` (on ToolNode's run), and the same over all
            tests under ``all_*`` keys.
        failures: test ids that pass on ToolNode and fail on ToolExecutor.
    """

    files: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def total(self, key: str) -> int:
        """The sum of ``key`` over the files."""
        return sum(f[key] for f in self.files.values())

    @property
    def ratio(self) -> float:
        """ToolExecutor's passes / ToolNode's, over the tests that build a ToolNode."""
        return self.total("toolexecutor") / max(1, self.total("toolnode"))

    def table(self) -> str:
        """The per-file counts, one line per file, for humans."""
        lines = [f"{'file':48} {'tests':>5} {'ToolNode':>8} {'ToolExecutor':>12}"]
        for name, f in self.files.items():
            lines.append(f"{name:48} {f['tests']:5} {f['toolnode']:8} {f['toolexecutor']:12}")
        lines.append(
            f"{'total (tests that build a ToolNode)':48} {self.total('tests'):5} "
            f"{self.total('toolnode'):8} {self.total('toolexecutor'):12}  ratio {self.ratio:.3f}"
        )
        return "\n".join(lines)


def _start(root: Path, swap: bool, out: Path) -> subprocess.Popen[str]:
    paths = [str(root), str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "TOOLNODE_SWAP": "1" if swap else "0",
        "TOOLNODE_SUITE_RESULTS": str(out),
        "LANGGRAPH_TEST_FAST": "true",
    }
    present = [f"tests/{f}" for f in SUITE_FILES if (root / "tests" / f).exists()]
    cmd = [sys.executable, "-m", "pytest", *present]
    cmd += ["-q", "-p", "toolnode_swap", "-p", "no:cacheprovider", "--timeout", "60"]
    return subprocess.Popen(
        cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def run_suite(root: Path, timeout: float = 170.0) -> SuiteReport:
    """Run the suite on ToolNode and on ToolExecutor.from_tools (two subprocesses at once)."""
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = {name: Path(tmp) / f"{name}.json" for name in ("toolnode", "toolexecutor")}
        procs = {name: _start(root, name == "toolexecutor", out) for name, out in runs.items()}
        for name, proc in procs.items():
            output, _ = proc.communicate(timeout=timeout)
            if not runs[name].exists():
                raise RuntimeError(
                    f"the {name} run of the suite reported nothing:\n{output[-3000:]}"
                )
            results[name] = json.loads(runs[name].read_text())
    return _compare(results["toolnode"], results["toolexecutor"])


def _compare(base: dict[str, Any], swapped: dict[str, Any]) -> SuiteReport:
    report = SuiteReport()
    for test_id, entry in base.items():
        name = test_id.split("::")[0].removeprefix("tests/")
        counts = report.files.setdefault(
            name,
            dict.fromkeys(("tests", "toolnode", "toolexecutor", "all_tests", "all_toolnode"), 0)
            | {"all_toolexecutor": 0},
        )
        passed = entry["outcome"] == "passed"
        swap_passed = swapped.get(test_id, {}).get("outcome") == "passed"
        counts["all_tests"] += 1
        counts["all_toolnode"] += passed
        counts["all_toolexecutor"] += swap_passed
        if entry["builds_toolnode"]:
            counts["tests"] += 1
            counts["toolnode"] += passed
            counts["toolexecutor"] += swap_passed
        if passed and not swap_passed:
            report.failures.append(test_id)
    return report
