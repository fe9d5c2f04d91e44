"""Offloading into a real PostgreSQL: ``PostgresStore`` (sync) and ``AsyncPostgresStore``.

Uses a ``postgres_dsn`` fixture when the suite has one; otherwise starts its own
PostgreSQL 15 from the binaries in ``/usr/lib/postgresql/15/bin`` (run as the
``postgres`` user when the tests run as root) on a Unix socket, and stops it.
Skipped when neither PostgreSQL nor the ``psycopg`` driver is available.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph

from langgraph_toolbudget import BudgetConfig, ToolBudgetState, ToolCatalog, ToolExecutor
from langgraph_toolbudget.execution.offload import NAMESPACE

psycopg = pytest.importorskip("psycopg")
postgres_store = pytest.importorskip("langgraph.store.postgres")

PG_BIN = Path("/usr/lib/postgresql/15/bin")
BIG = json.dumps({"rows": [{"id": i, "name": f"row {i}"} for i in range(3000)]})


def big_rows() -> str:
    """Rows as JSON (large)."""
    return BIG


def _as_postgres() -> dict[str, Any]:
    return {"user": "postgres"} if os.geteuid() == 0 else {}


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[str]:
    """A throwaway PostgreSQL server on a Unix socket; yields its DSN."""
    if not (PG_BIN / "initdb").exists() or (os.geteuid() == 0 and not _has_postgres_user()):
        pytest.skip("no PostgreSQL binaries in /usr/lib/postgresql/15/bin")
    root = Path(tempfile.mkdtemp(prefix="toolbudget-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        for path in (root, sock):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    run = {"check": True, "capture_output": True, "timeout": 120, **_as_postgres()}
    subprocess.run(
        [PG_BIN / "initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"], **run
    )
    port = 54000 + os.getpid() % 1000
    options = f"-k {sock} -p {port} -c listen_addresses='' -c fsync=off"
    start = [PG_BIN / "pg_ctl", "-D", data, "-o", options, "-l", root / "log", "-w", "start"]
    subprocess.run(start, **run)
    try:
        yield f"postgresql://postgres@/postgres?host={sock}&port={port}"
    finally:
        stop = [PG_BIN / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"]
        subprocess.run(stop, **{**run, "check": False})
        shutil.rmtree(root, ignore_errors=True)


def _has_postgres_user() -> bool:
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return False
    return True


@pytest.fixture
def dsn(request: pytest.FixtureRequest) -> str:
    """The suite's ``postgres_dsn`` if it has one, else :func:`own_postgres`."""
    try:
        return str(request.getfixturevalue("postgres_dsn"))
    except pytest.FixtureLookupError:
        return str(request.getfixturevalue("own_postgres"))


def _app(store: Any, config: BudgetConfig) -> Any:
    catalog = ToolCatalog.from_tools([big_rows], tool_metadata={"big_rows": {"include": "always"}})
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog, config=config))
    graph.add_edge(START, "tools")
    return graph.compile(store=store)


def _state(name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {"name": name, "args": args, "id": "c"}
    return {"messages": [HumanMessage("go"), AIMessage("", tool_calls=[call])]}


def _tool_message(out: dict[str, Any]) -> ToolMessage:
    return next(m for m in out["messages"] if isinstance(m, ToolMessage))


async def test_postgres_stores_offloaded_outputs_with_ttl_and_eviction(dsn: str) -> None:
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

    config = BudgetConfig(offload_ttl_minutes=15, offload_thread_cap_chars=2 * len(BIG) + 1)
    thread = {"configurable": {"thread_id": "pg"}}
    with PostgresStore.from_conn_string(dsn) as store:
        store.setup()
        app = _app(store, config)
        handles = [
            _tool_message(app.invoke(_state("big_rows", {}), thread)).artifact["offloaded"][
                "handle"
            ]
            for _ in range(3)
        ]
        ns = (*NAMESPACE, "_", "pg")
        assert store.get(ns, handles[0]) is None  # evicted at the cap, oldest first
        item = store.get(ns, handles[2])
        assert item is not None and item.value["text"] == BIG
        read = _tool_message(
            await app.ainvoke(
                _state("read_large_output", {"handle": handles[2], "length": 20}), thread
            )
        )  # a sync store under ainvoke
        assert read.status == "success" and read.content.endswith(BIG[:20])
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT ttl_minutes, expires_at > NOW() FROM store WHERE key = %s", (handles[2],)
        ).fetchone()
    assert row == (15, True)

    async with AsyncPostgresStore.from_conn_string(dsn) as astore:
        app = _app(astore, config)
        query = {"handle": handles[2], "jq_expression": ".rows | length"}
        answer = _tool_message(await app.ainvoke(_state("query_large_output", query), thread))
        assert answer.content == "3000"
        other = {"configurable": {"thread_id": "someone-else"}}
        refused = _tool_message(await app.ainvoke(_state("query_large_output", query), other))
        assert refused.status == "error" and "another conversation" in refused.content
