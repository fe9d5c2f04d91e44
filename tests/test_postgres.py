"""Postgres for real: a thread killed with SIGKILL between two tool calls resumes intact.

The tests start their own PostgreSQL server (the machine's ``initdb``/``pg_ctl``,
in a temporary directory on a free port; as the ``postgres`` user when run as
root, since ``initdb`` refuses root) and give each test a fresh database through
``pytest-postgresql``'s ``DatabaseJanitor``. The run under test
(``tests/durable_run.py``) goes through the prebuilt agent with ``PostgresSaver``
and ``PostgresStore`` (or ``AsyncPostgresSaver``/``AsyncPostgresStore``, or
``SqliteSaver``) in a child process: it is killed with SIGKILL after the first tool
call was checkpointed and before the second ran, then resumed in the test's process.
Checked: the messages and budget fields are intact, and the completed tool call
did not run again (once in the log, once in the store).

Without PostgreSQL server binaries the tests fail (never skip) with what to install.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import durable_run
import pytest
from pytest_postgresql.janitor import DatabaseJanitor

TESTS = Path(__file__).parent
INSTALL_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) were not found. Install them: "
    "`apt-get install postgresql` (Debian/Ubuntu), `brew install postgresql@15` (macOS), "
    "or set PG_BINDIR to the directory that holds initdb and pg_ctl."
)


def _bindir() -> Path:
    candidates = [os.environ.get("PG_BINDIR", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    candidates += [str(Path(p).parent) for p in [shutil.which("initdb") or ""] if p]
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    pytest.fail(INSTALL_HINT)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(args: list[str]) -> list[str]:
    """``args`` run as the ``postgres`` user when we are root (initdb refuses root)."""
    if os.geteuid() != 0:
        return args
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", "postgres", "--", *args]
    return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(args)]


def _run(args: list[str]) -> None:
    done = subprocess.run(_as_server_user(args), capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"{Path(args[0]).name} failed: {done.stderr or done.stdout}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[dict[str, Any]]:
    """A PostgreSQL server for this test session: host, port, user."""
    bindir = _bindir()
    # Not under pytest's base temp dir: that one is private to us, and the server's user
    # (``postgres`` when we are root) must reach its data directory.
    root = Path(tempfile.mkdtemp(prefix="toolbudget-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    _run([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"])
    port = _free_port()
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w"]
    _run([*pg_ctl, "-o", options, "start"])
    try:
        yield {"host": "127.0.0.1", "port": port, "user": "postgres"}
    finally:
        subprocess.run(_as_server_user([*pg_ctl, "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: dict[str, Any]) -> Iterator[str]:
    """A fresh database (created and dropped by pytest-postgresql's janitor)."""
    dbname = f"t_{uuid.uuid4().hex[:12]}"
    with DatabaseJanitor(dbname=dbname, **pg_server):
        yield f"postgresql://postgres@127.0.0.1:{pg_server['port']}/{dbname}?sslmode=disable"


def _env() -> dict[str, str]:
    paths = [str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _killed_then_resumed(backend: str, conn: str, log: Path) -> dict[str, Any]:
    """Run the thread in a child process, SIGKILL it between its two tool calls, resume it."""
    thread = f"thread-{uuid.uuid4().hex[:8]}"
    script = [sys.executable, str(TESTS / "durable_run.py"), backend, conn, thread, str(log)]
    child = subprocess.Popen(
        [*script, "kill"], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while "waiting" not in (log.read_text() if log.exists() else ""):
            if child.poll() is not None or time.monotonic() > deadline:
                _, err = child.communicate(timeout=5)
                pytest.fail(f"the run ended before the kill point: {err.decode()[-2000:]}")
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    # Resumed here: a process that never saw the thread (nothing of the run is in memory).
    return durable_run.run(backend, conn, thread, str(log), "resume")


def _check_resumed(out: dict[str, Any], log: Path) -> None:
    assert log.read_text().split("\n") == ["ran 1", "waiting", "ran 2", ""]
    kinds = [kind for kind, _ in out["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "ToolMessage",
                     "AIMessage"]  # fmt: skip
    contents = [content for _, content in out["messages"]]
    assert contents[0] == "record the steps" and contents[-1] == "both steps done"
    assert contents[2] == "step 1 done" and contents[4] == "step 2 done"
    assert "record_step" in out["selected_tools"]
    assert set(out["selected_tools"]) <= {"record_step", "unrelated_tool"}
    assert out["tool_last_used"]["record_step"] >= 1
    assert out["categories"] and out["categories"][0] == "steps"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["postgres", "apostgres"])
def test_a_thread_killed_between_tool_calls_resumes_from_postgres(pg_url, tmp_path, backend):
    log = tmp_path / "steps.log"
    out = _killed_then_resumed(backend, pg_url, log)
    _check_resumed(out, log)
    assert out["store_steps"] == [1, 2]  # the store saw each completed step once


@pytest.mark.timeout(300)
def test_a_thread_killed_between_tool_calls_resumes_from_sqlite(tmp_path):
    log = tmp_path / "steps.log"
    out = _killed_then_resumed("sqlite", str(tmp_path / "checkpoints.db"), log)
    _check_resumed(out, log)
