"""One PostgreSQL server for the test session, for every test that needs a real one.

``pg_server`` starts it (the machine's ``initdb``/``pg_ctl``, in a temporary
directory on a free port; as the ``postgres`` user when run as root, since
``initdb`` refuses root) and ``pg_url`` gives each test a fresh database through
``pytest-postgresql``'s ``DatabaseJanitor``. ``conftest.py`` registers both, so
``tests/test_postgres.py``, ``tests/test_offload_postgres.py`` and
``tests/test_usage_postgres.py`` share one server and one way of starting it.

Without PostgreSQL server binaries the tests fail (never skip) with what to install.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_postgresql.janitor import DatabaseJanitor

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
