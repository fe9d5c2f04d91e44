"""Postgres for real: a thread killed with SIGKILL between two tool calls resumes intact.

Each test gets a fresh database on the session's own PostgreSQL server (``pg_url``,
started by ``tests/pg.py``). The run under test
(``tests/durable_run.py``) goes through the prebuilt agent with ``PostgresSaver``
and ``PostgresStore`` (or ``AsyncPostgresSaver``/``AsyncPostgresStore``, or
``SqliteSaver``) in a child process: it is killed with SIGKILL after the first tool
call was checkpointed and before the second ran, then resumed in the test's process.
Checked: the messages and budget fields are intact, and the completed tool call
did not run again (once in the log, once in the store).

Without PostgreSQL server binaries the tests fail (never skip) with what to install.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import durable_run
import pytest

TESTS = Path(__file__).parent


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
@pytest.mark.slow  # a worker process killed and resumed
def test_a_thread_killed_between_tool_calls_resumes_from_sqlite(tmp_path):
    log = tmp_path / "steps.log"
    out = _killed_then_resumed("sqlite", str(tmp_path / "checkpoints.db"), log)
    _check_resumed(out, log)
