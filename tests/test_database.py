"""The database toolbox: ``search_schemas`` and read-only ``execute_sql``, on SQLite files and a
real PostgreSQL server (``tests/pg.py``), through the prebuilt agent, the nodes and the
middleware. Only the chat model is scripted.

Every refused statement is tried against the live database, which must stay unchanged: the
SQLite file byte for byte (and no file created beside it), the PostgreSQL rows and tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.store.memory import InMemoryStore

from langgraph_toolbudget import (
    BudgetConfig,
    CallModel,
    DatabaseToolbox,
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.hashing import HashingEmbeddings
from langgraph_toolbudget.database import QueryStop, ReadOnlyCheck, SqlError, check_read_only
from langgraph_toolbudget.database import toolbox as toolbox_module
from langgraph_toolbudget.database.toolbox import _sqlite_connect, _SqliteProgress
from langgraph_toolbudget.execution.builtins import Builtins
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
SHOP_SQL = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT, city TEXT);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    total_eur NUMERIC(10, 2) NOT NULL,
    created_at TIMESTAMP
);
CREATE TABLE products (id INTEGER PRIMARY KEY, title TEXT, stock INTEGER);
CREATE TABLE support_tickets (
    id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), subject TEXT
);
CREATE TABLE audit_log (id INTEGER PRIMARY KEY, actor TEXT, action TEXT);
"""
CUSTOMERS = [
    (i, f"customer {i}", f"c{i}@shop.test", "Paris" if i % 2 else "Lyon") for i in range(1, 11)
]
ORDERS = [
    (i, 1 + i % 10, round(10 + i * 1.25, 2), f"2024-01-{1 + i % 28:02d}") for i in range(1, 501)
]
SPENT = {c: sum(t for _, who, t, _ in ORDERS if who == c) for c, *_ in CUSTOMERS}
TOP = sorted(SPENT, key=lambda c: -SPENT[c])


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


CATALOG = ToolCatalog.from_tools([get_weather])


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A SQLite shop database: 10 customers, 500 orders, products, tickets."""
    path = tmp_path / "shop.db"
    conn = sqlite3.connect(path)
    conn.executescript(SHOP_SQL)
    conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", CUSTOMERS)
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", ORDERS)
    conn.commit()
    conn.close()
    return path


def digest(path: Path) -> tuple[str, list[str]]:
    """The file's SHA-256 and the names in its folder (nothing may be created beside it)."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), sorted(
        p.name for p in path.parent.iterdir()
    )


@pytest.fixture
def crm(pg_url: str) -> str:
    """A PostgreSQL database with the shop's tables, comments and a second schema."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            SHOP_SQL.replace("INTEGER PRIMARY KEY", "INTEGER PRIMARY KEY").replace(
                "TIMESTAMP", "TIMESTAMP"
            )
        )
        conn.execute("COMMENT ON TABLE orders IS 'Purchases: what each customer paid'")
        conn.execute("COMMENT ON COLUMN orders.total_eur IS 'Amount paid, in euros'")
        conn.execute("CREATE SCHEMA sales")
        conn.execute("CREATE TABLE sales.quotas (region TEXT, target_eur NUMERIC)")
        conn.execute("CREATE SEQUENCE ticket_numbers")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO customers VALUES (%s, %s, %s, %s)", CUSTOMERS)
            cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s)", ORDERS)
    return pg_url


def pg_state(url: str) -> tuple[Any, ...]:
    """What must not change: every table's rows (as a digest), the tables, the sequence."""
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
        ).fetchall()
        rows = [
            conn.execute(
                f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {name} t"
            ).fetchone()
            for (name,) in tables
        ]
        sequence = conn.execute("SELECT last_value, is_called FROM ticket_numbers").fetchone()
        settings = conn.execute(
            "SELECT count(*) FROM pg_settings WHERE source = 'session'"
        ).fetchone()
    return tuple(tables), tuple(rows), sequence, settings


def ask(name: str, call_id: str = "q1", **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


async def run(app: Any, payload: Any, api: str, config: dict | None = None) -> dict[str, Any]:
    if api == "invoke":
        return app.invoke(payload, config)
    return await app.ainvoke(payload, config)


def answers(out: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


# --- search by meaning -------------------------------------------------------------------------


def test_search_finds_the_orders_table_for_money_spent_by_customers(shop: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    best = toolbox.search("money spent by customers on purchases", limit=3)
    assert best[0].name == "orders"
    described = best[0].as_dict()
    assert {c["name"] for c in described["columns"]} >= {"total_eur", "customer_id"}
    assert described["foreign_keys"] == [
        {"columns": ["customer_id"], "references": "customers(id)"}
    ]
    assert toolbox.search("products in stock")[0].name == "products"
    # With embeddings, fused with the lexical ranking as for tools.
    fused = toolbox.search("money spent by customers", embeddings=HashingEmbeddings())
    assert fused[0].name == "orders"


def test_schemas_are_read_once_and_refreshed_on_demand(shop: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    assert "refunds" not in {t.name for t in toolbox.tables()}
    conn = sqlite3.connect(shop)
    conn.execute("CREATE TABLE refunds (id INTEGER, order_id INTEGER, amount_eur NUMERIC)")
    conn.commit()
    conn.close()
    assert "refunds" not in {t.name for t in toolbox.tables()}  # cached
    toolbox.refresh("shop")
    assert "refunds" in {t.name for t in toolbox.tables()}


# --- queries: joins, aggregates, the row cap ---------------------------------------------------


def test_joins_and_aggregates_on_sqlite(shop: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    result = toolbox.execute(
        "shop",
        "SELECT c.city, count(*) AS orders, round(sum(o.total_eur), 2) AS spent "
        "FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.city ORDER BY c.city",
    )
    expected = {}
    for _, customer, total, _ in ORDERS:
        city = CUSTOMERS[customer - 1][3]
        n, spent = expected.get(city, (0, 0.0))
        expected[city] = (n + 1, spent + total)
    assert result.rows == [
        {"city": city, "orders": n, "spent": round(spent, 2)}
        for city, (n, spent) in sorted(expected.items())
    ]
    assert result.total_rows == 2


def test_rows_are_capped_with_the_total_count(shop: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"}, max_rows=50)
    answer = toolbox.execute("shop", "SELECT * FROM orders ORDER BY id").as_dict()
    assert answer["row_count"] == 50 and answer["total_rows"] == 500
    assert answer["rows"][0] == {
        "id": 1,
        "customer_id": 2,
        "total_eur": 11.25,
        "created_at": "2024-01-02",
    }
    assert "showing the first 50 of 500 rows" in answer["note"]


def test_a_repeated_column_name_keeps_every_value(shop: Path):
    """Rows are objects keyed by column name: SELECT o.id, c.id kept only one of the two."""
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    result = toolbox.execute(
        "shop",
        "SELECT o.id, c.id, o.total_eur AS id_2, c.id, c.name FROM orders o "
        "JOIN customers c ON c.id = o.customer_id WHERE o.id = 7",
    )
    assert result.columns == ["id", "id_3", "id_2", "id_4", "name"]
    assert result.rows == [{"id": 7, "id_3": 8, "id_2": 18.75, "id_4": 8, "name": "customer 8"}]


def peak_memory(run: Any) -> tuple[Any, int]:
    """``run()``'s result and the most memory Python held while it ran, in bytes."""
    tracemalloc.start()
    try:
        return run(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_long_values_are_cut_as_they_are_read_on_sqlite(shop: Path):
    """Texts were cut only after max_rows + 1 whole rows were held: rows x columns x the
    longest string (10 MB each, before the 100,000-byte cap), and the answer had no cap."""
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    sql = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 300), "
        "s(x) AS (SELECT replace(hex(zeroblob(45000)), '0', 'a')) "
        "SELECT i, x AS a, x AS b, x AS c FROM n, s"
    )
    result, peak = peak_memory(lambda: toolbox.execute("shop", sql))
    assert peak < 10_000_000  # was 60 MB: 201 rows x 3 x 90,000 characters, and more
    answer = result.as_dict()
    assert len(json.dumps(answer)) < 1_001_000 and result.total_rows == 300
    assert 0 < len(result.rows) < 200 and "at most 1,000,000 characters" in answer["note"]
    assert result.rows[0]["a"].endswith("a... [90,000 characters]")
    assert len(result.rows[0]["a"]) == 10_000


# --- refusals: every write kind, the database unchanged ----------------------------------------

SQLITE_REFUSED = {
    "DELETE FROM orders": "DELETE writes rows",
    "UPDATE orders SET total_eur = 0": "UPDATE writes rows",
    "INSERT INTO orders VALUES (9999, 1, 1, NULL)": "INSERT writes rows",
    "REPLACE INTO orders VALUES (1, 1, 1, NULL)": "REPLACE",
    "INSERT INTO audit_log SELECT 1, 'x', 'y'": "INSERT writes rows",
    "WITH x AS (SELECT 1) INSERT INTO audit_log SELECT 2, 'a', 'b' FROM x": "INSERT writes rows",
    "CREATE TABLE evil (a)": "CREATE changes the schema",
    "CREATE INDEX i ON orders (total_eur)": "CREATE changes the schema",
    "DROP TABLE orders": "DROP changes the schema",
    "ALTER TABLE orders ADD COLUMN x INTEGER": "ALTER changes the schema",
    "PRAGMA table_info(orders)": "PRAGMA",
    "PRAGMA journal_mode = WAL": "PRAGMA",
    "PRAGMA user_version = 7": "PRAGMA",
    "ATTACH DATABASE '{dir}/evil.db' AS evil": "ATTACH opens another database file",
    "DETACH DATABASE main": "DETACH",
    "SELECT 1; DELETE FROM orders": "2 statements",
    "SELECT * FROM orders; DROP TABLE orders": "2 statements",
    "BEGIN": "transaction",
    "VACUUM": "VACUUM",
    "VACUUM INTO '{dir}/copy.db'": "VACUUM",
    "SELECT load_extension('/tmp/x.so')": "load_extension",
    "REINDEX": "REINDEX rewrites indexes",
    "/* a comment */ -- and another\n  DELETE FROM orders": "DELETE writes rows",
    "ANALYZE": "ANALYZE writes statistics",
}


@pytest.mark.parametrize("sql", list(SQLITE_REFUSED))
def test_each_write_kind_is_refused_on_sqlite_and_the_file_is_unchanged(shop: Path, sql: str):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    before = digest(shop)
    with pytest.raises(SqlError) as refused:
        toolbox.execute("shop", sql.format(dir=shop.parent))
    assert refused.value.refused
    assert str(refused.value).startswith("Refused: execute_sql only reads")
    assert SQLITE_REFUSED[sql] in str(refused.value)
    assert digest(shop) == before


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM orders",
        "UPDATE orders SET total_eur = 0",
        "CREATE TABLE evil (a)",
        "DROP TABLE orders",
        "PRAGMA journal_mode = WAL",
        "PRAGMA user_version = 7",
        "ATTACH DATABASE '{dir}/evil.db' AS evil",
        "SELECT load_extension('/tmp/x.so')",
    ],
)
def test_the_sqlite_connection_refuses_writes_on_its_own(shop: Path, sql: str):
    """The second wall: the model's connection (read-only, with the authorizer) refuses
    what the check would have refused, if a statement ever got past the check."""
    before = digest(shop)
    conn = _sqlite_connect(shop, _SqliteProgress(float("inf")), timeout_s=1)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="not authorized|readonly|prohibited"):
            conn.execute(sql.format(dir=shop.parent))
    finally:
        conn.close()
    assert digest(shop) == before


def test_a_syntax_error_is_the_databases_message(shop: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    with pytest.raises(SqlError, match='near "SELEC": syntax error') as failed:
        toolbox.execute("shop", "SELEC * FROM orders")
    assert not failed.value.refused
    with pytest.raises(SqlError, match="no such column: totl"):
        toolbox.execute("shop", "SELECT totl FROM orders")


def test_a_slow_query_is_stopped_by_the_timeout_on_sqlite(shop: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"}, timeout_s=0.5)
    endless = (
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    )
    with pytest.raises(SqlError, match=r"ran longer than 0.5 s and was stopped"):
        toolbox.execute("shop", endless)


_CTRL_C_RUN = """
import json, os, signal, sys, threading, time
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph_toolbudget import DatabaseToolbox, ToolCatalog, create_toolbudget_agent
from langgraph_toolbudget.testing import ScriptedChatModel

shop, sql = sys.argv[1], sys.argv[2]


@tool
def get_weather(city: str) -> str:
    '''Current weather for a city.'''
    return "sunny"


def interrupt_in_query():
    # Ctrl-C (SIGINT) once the main thread is in the toolbox's SQLite query (within 20 s).
    main, query = threading.main_thread().ident, DatabaseToolbox._sqlite.__code__
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(main)
        if frame is not None and frame.f_code is query:
            time.sleep(0.2)  # well into the query (it runs for ever)
            os.kill(os.getpid(), signal.SIGINT)
            return
        time.sleep(0.01)


call = {"name": "execute_sql", "args": {"source": "shop", "sql": sql}, "id": "q1"}
model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("again")])
toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"}, timeout_s=30, max_rows=1)
catalog = ToolCatalog.from_tools([get_weather])
graph = create_toolbudget_agent(model, catalog, database_toolbox=toolbox).compile()
threading.Thread(target=interrupt_in_query, daemon=True).start()
try:
    graph.invoke({"messages": [HumanMessage("count")]})
    raised = None
except KeyboardInterrupt:
    raised = "KeyboardInterrupt"
after = toolbox.execute("shop", "SELECT count(*) AS n FROM orders").rows
print(json.dumps({"raised": raised, "model_calls": len(model.calls), "after": after}))
"""


@pytest.mark.parametrize("stopped_in", ["query", "count"])
def test_ctrl_c_during_an_sqlite_query_raises_keyboard_interrupt_out_of_invoke(
    shop: Path, stopped_in: str
):
    """SQLite discards an exception raised in its progress handler: Ctrl-C was reported to the
    model as the timeout (or, while counting the rows, as a total not counted in time), and
    the run went on to call the model again. (In a process of its own: the test sends SIGINT
    to the process it runs in.)"""
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT "
    # Counting, a row every 100,000 steps: Ctrl-C lands in the progress handler, not between rows
    rare = "x FROM n WHERE x % 100000 = 0"
    sql = endless + ("count(*) FROM n" if stopped_in == "query" else rare)
    done = subprocess.run(
        [sys.executable, "-c", _CTRL_C_RUN, str(shop), sql],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["raised"] == "KeyboardInterrupt"
    assert result["model_calls"] == 1  # not called again with a made-up timeout
    assert result["after"] == [{"n": 500}]


class _TimedToolbox(DatabaseToolbox):
    """A toolbox that notes when each query started and ended (in any thread)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started, self.ended = threading.Event(), threading.Event()

    def execute(self, source: str, sql: str, *, stop: QueryStop | None = None) -> Any:
        self.started.set()
        try:
            return super().execute(source, sql, stop=stop)
        finally:
            self.ended.set()


async def _cancel_a_query_under_ainvoke(toolbox: _TimedToolbox, sql: str) -> float:
    """Cancel an `ainvoke` while its `execute_sql` runs; the seconds the query then ran on."""
    call = {"name": "execute_sql", "args": {"source": next(iter(toolbox.source_names)), "sql": sql}}
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[{**call, "id": "q1"}])])
    graph = create_toolbudget_agent(model, CATALOG, database_toolbox=toolbox).compile()
    run = asyncio.create_task(graph.ainvoke({"messages": [HumanMessage("count")]}))
    assert await asyncio.to_thread(toolbox.started.wait, 10)
    await asyncio.sleep(0.3)  # well into the query
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    cancelled = time.monotonic()
    assert await asyncio.to_thread(toolbox.ended.wait, 15)
    return time.monotonic() - cancelled


async def test_a_cancelled_async_run_stops_its_sqlite_query(shop: Path):
    """Under `ainvoke` the query runs in a worker thread, which the cancellation does not
    stop: it ran on until `timeout_s`, holding a thread and the file."""
    toolbox = _TimedToolbox({"shop": f"sqlite:///{shop}"}, timeout_s=12)
    endless = (
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    )
    assert await _cancel_a_query_under_ainvoke(toolbox, endless) < 2


async def test_a_cancelled_async_run_stops_its_postgres_query(crm: str):
    toolbox = _TimedToolbox({"crm": crm}, timeout_s=12)
    assert await _cancel_a_query_under_ainvoke(toolbox, "SELECT pg_sleep(11)") < 2
    assert _sleeping_queries(crm) == 0  # the server cancelled it too
    assert toolbox.execute("crm", "SELECT 1 AS one").rows == [{"one": 1}]  # the pool is fine


def test_a_query_stop_set_before_the_query_stops_it_at_once(shop: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"}, timeout_s=12)
    stop = QueryStop()
    stop.set()
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) "
    start = time.monotonic()
    with pytest.raises(SqlError, match=r"the query was stopped \(its run was cancelled\)"):
        toolbox.execute("shop", endless + "FROM n", stop=stop)
    assert time.monotonic() - start < 2
    assert toolbox.execute("shop", "SELECT count(*) AS n FROM orders").rows == [{"n": 500}]


STOPPED = r"the query was stopped \(its run was cancelled\)"


def _sleeping_queries(url: str) -> int:
    """How many queries of ``url``'s database sleep in ``pg_sleep`` now (the text the server
    shows is the FETCH, not the query of the cursor it runs)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
            "AND datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def _wait_for_sleeping_queries(url: str, count: int) -> None:
    for _ in range(250):
        if _sleeping_queries(url) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{count} queries never started")


class _SlowToReach:
    """A TCP relay to a PostgreSQL server that, once :attr:`slow` is set, holds each new
    connection ``delay`` seconds before it reaches the server (a remote database, a network
    that has just failed); connections made before go on unhindered."""

    def __init__(self, url: str, delay: float) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.delay, self.slow = delay, threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = url.replace(f":{parts.port}/", f":{self.listener.getsockname()[1]}/")
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        if self.slow.is_set():
            time.sleep(self.delay)
        server = socket.create_connection(self.upstream)
        for a, b in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


@pytest.mark.skipif(
    psycopg.pq.version() < 170000,
    reason="before libpq 17 psycopg sends the cancel request without a timeout (PQcancel), "
    "and it does not end through the test's delaying relay",
)
async def test_a_postgres_cancel_request_never_holds_the_event_loop(crm: str):
    """The cancel request is a new connection to the server (psycopg waited up to 30 s for
    it): sent from the event loop's thread, a slow network froze every run on the loop."""
    relay = _SlowToReach(crm, delay=1.0)
    toolbox = DatabaseToolbox({"crm": relay.url}, timeout_s=12)
    stop = QueryStop()
    query = asyncio.create_task(
        asyncio.to_thread(toolbox.execute, "crm", "SELECT pg_sleep(10.5)", stop=stop)
    )
    await asyncio.to_thread(_wait_for_sleeping_queries, crm, 1)
    relay.slow.set()
    start = time.monotonic()
    stop.set()
    assert time.monotonic() - start < 0.5  # the request went to a thread of its own
    with pytest.raises(SqlError, match=STOPPED):  # ... and still stopped the query
        await asyncio.wait_for(query, 8)
    relay.listener.close()


@pytest.mark.parametrize("between", ["declare_and_fetch", "fetch_and_count"])
def test_a_postgres_stop_between_two_statements_stops_the_next_one(
    crm: str, between: str, monkeypatch: pytest.MonkeyPatch
):
    """A cancel request reaching the server between two statements is ignored (the session
    is idle): the next statement (the FETCH, or the MOVE counting the rest) ran to its end
    and the stopped query returned its rows."""
    toolbox = DatabaseToolbox({"crm": crm}, timeout_s=12, max_rows=2)
    stop = QueryStop()
    if between == "declare_and_fetch":
        load_cut = toolbox_module._load_cut

        def stop_then_load_cut(cursor: Any) -> None:
            threading.Thread(target=stop.set).start()
            time.sleep(0.2)  # the cancel request reached the idle session
            load_cut(cursor)

        monkeypatch.setattr(toolbox_module, "_load_cut", stop_then_load_cut)
        sql = "SELECT pg_sleep(10) AS slept"
    else:
        count_rest = DatabaseToolbox._postgres_count_rest

        def stop_then_count(*args: Any) -> int | None:
            threading.Thread(target=stop.set).start()
            time.sleep(0.2)
            return count_rest(*args)

        monkeypatch.setattr(DatabaseToolbox, "_postgres_count_rest", staticmethod(stop_then_count))
        sql = "SELECT g, pg_sleep(CASE WHEN g > 3 THEN 1 ELSE 0 END) FROM generate_series(1, 20) g"
    start = time.monotonic()
    with pytest.raises(SqlError, match=STOPPED):
        toolbox.execute("crm", sql, stop=stop)
    assert time.monotonic() - start < 3
    assert _sleeping_queries(crm) == 0
    monkeypatch.undo()
    assert toolbox.execute("crm", "SELECT 1 AS one").rows == [{"one": 1}]  # the pool is fine


def test_one_query_stop_stops_every_postgres_query_it_was_given(crm: str):
    """Like a threading.Event, one stop may be passed to several queries at once: it kept
    one query's cancel, and the others ran on to their end."""
    toolbox = DatabaseToolbox({"crm": crm}, timeout_s=12)
    stop = QueryStop()
    outcomes: dict[int, str] = {}

    def run(i: int) -> None:
        try:
            outcomes[i] = repr(toolbox.execute("crm", f"SELECT pg_sleep(10) AS q{i}", stop=stop))
        except SqlError as exc:
            outcomes[i] = str(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    _wait_for_sleeping_queries(crm, 3)
    start = time.monotonic()
    stop.set()
    for thread in threads:
        thread.join(8)
    assert time.monotonic() - start < 3
    assert outcomes == dict.fromkeys(
        range(3), "Error: the query was stopped (its run was cancelled)."
    )
    assert _sleeping_queries(crm) == 0


def test_one_long_sqlite_function_call_cannot_outrun_the_timeout(shop: Path):
    """The progress handler stops a query between steps, never inside one call, and trim(),
    instr(), LIKE... take time in the square of their arguments' length: with strings of up
    to 10 MB one call ran for seconds to hours past timeout_s."""
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"}, timeout_s=0.5)

    def text(n: int, char: str) -> str:  # n times char, built by SQLite
        return f"replace(hex(zeroblob({n // 2})), '0', '{char}')"

    slow = f"SELECT trim({text(120_000, 'a')} || 'x', {text(10_000, 'b')} || 'a')"
    start = time.monotonic()
    with pytest.raises(SqlError, match=r"a string or blob \(bytes\) longer than .* \(100,000\)"):
        toolbox.execute("shop", slow)
    assert time.monotonic() - start < 2  # refused at once (the trim ran for seconds past 0.5)
    pattern = f"SELECT {text(90_000, 'a')} LIKE ('%' || {text(20_000, 'a')} || 'b')"
    with pytest.raises(SqlError, match=r"a LIKE or GLOB pattern \(characters\) longer"):
        toolbox.execute("shop", pattern)
    shorter = f"SELECT length({text(90_000, 'a')}) AS n"
    assert toolbox.execute("shop", shorter).rows == [{"n": 90000}]


def test_sqlite_blobs_are_capped_like_texts_and_answered_as_their_size(shop: Path):
    """The length cap bounds blobs as it bounds texts: a longer stored blob is not read (its
    length is), and each blob read is answered as its size, one row at a time."""
    conn = sqlite3.connect(shop)
    conn.execute("CREATE TABLE files (id INTEGER, body BLOB)")
    conn.execute("INSERT INTO files VALUES (1, zeroblob(5000000)), (2, x'00ff10')")
    conn.commit()
    conn.close()
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    with pytest.raises(SqlError, match=r"a string or blob \(bytes\) longer than .* \(100,000\)"):
        toolbox.execute("shop", "SELECT body FROM files WHERE id = 1")
    assert toolbox.execute("shop", "SELECT length(body) AS n FROM files").rows == [
        {"n": 5_000_000},
        {"n": 3},
    ]
    assert toolbox.execute("shop", "SELECT body FROM files WHERE id = 2").rows == [
        {"body": "base64:AP8Q"}
    ]
    many = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 300) "
        "SELECT i, zeroblob(99000) AS a, randomblob(99000) AS b FROM n"
    )
    result, peak = peak_memory(lambda: toolbox.execute("shop", many))
    assert result.rows[0] == {"i": 1, "a": "<99,000 bytes>", "b": "<99,000 bytes>"}
    assert result.total_rows == 300 and peak < 5_000_000  # 300 rows of 198,000 bytes: 59 MB


def test_an_unknown_source_names_the_known_ones(shop: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}", "old": f"sqlite:///{shop}"})
    with pytest.raises(
        SqlError, match=r"no database source 'shopp'. The sources are: 'shop', 'old'"
    ):
        toolbox.execute("shopp", "SELECT 1")


def test_a_source_that_is_down(shop: Path, tmp_path: Path):
    toolbox = DatabaseToolbox(
        {
            "shop": f"sqlite:///{shop}",
            "gone": f"sqlite:///{tmp_path / 'missing.db'}",
            "crm": "postgresql://nobody@127.0.0.1:9/crm",
        },
        connect_timeout_s=1,
    )
    assert toolbox.available_sources() == ["shop"]
    assert set(toolbox.down_sources()) == {"gone", "crm"}
    with pytest.raises(SqlError, match=r"source 'crm' cannot be reached .*Connection refused"):
        toolbox.execute("crm", "SELECT 1")
    with pytest.raises(SqlError, match=r"source 'gone' cannot be reached .*no such file"):
        toolbox.execute("gone", "SELECT 1")
    assert not (tmp_path / "missing.db").exists()  # read-only: never created
    # With one source up the tools are offered; with none, they are not.
    config = BudgetConfig(database_toolbox=toolbox)
    assert {"search_schemas", "execute_sql"} <= set(Builtins(CATALOG, config).names)
    down = DatabaseToolbox({"crm": "postgresql://nobody@127.0.0.1:9/crm"}, connect_timeout_s=1)
    assert "execute_sql" not in Builtins(CATALOG, config.override(database_toolbox=down)).names


def add_a_table_sqlalchemy_cannot_read(path: Path) -> None:
    """A column type with a 5,000-digit length: SQLite keeps it, SQLAlchemy's reflection
    raises ValueError on it (Python's int() refuses 4,300 digits by default)."""
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE legacy_notes (body VARCHAR({'9' * 5000}))")
    conn.commit()
    conn.close()


def test_a_schema_that_cannot_be_read_leaves_the_other_sources_searchable(
    shop: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """Reading the schemas caught only the database driver's errors: the ValueError here
    went out of search_schemas and the graph (a source broken after toolbox.refresh()),
    and out of create_toolbudget_agent (broken from the start)."""
    archive = tmp_path / "archive.db"
    shutil.copy(shop, archive)
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}", "archive": f"sqlite:///{archive}"})
    model = ScriptedChatModel(
        responses=[
            ask("search_schemas", "s1", query="money spent by customers"),
            ask("search_schemas", "s2", query="legacy notes", source="archive"),
            AIMessage("done"),
        ],
        cycle=False,
    )
    graph = create_toolbudget_agent(model, CATALOG, database_toolbox=toolbox).compile()
    add_a_table_sqlalchemy_cannot_read(archive)
    toolbox.refresh()  # the archive's schemas are read again at the next search
    found, nothing = answers(graph.invoke({"messages": [HumanMessage("who spent most?")]}))
    answer = json.loads(found.content)
    assert {t["source"] for t in answer["tables"]} == {"shop"}
    assert answer["tables"][0]["table"] == "orders"
    assert answer["unavailable_sources"]["archive"].startswith(
        "ValueError: Exceeds the limit (4300 digits) for integer string conversion"
    )
    assert nothing.status != "error" and "'archive' (ValueError: Exceeds the limit" in (
        nothing.content
    )
    assert "reading the schemas of database source 'archive' raised" in caplog.text
    # Broken from the start: the agent is built, without the tools when no source is read.
    broken = DatabaseToolbox({"archive": f"sqlite:///{archive}"})
    config = BudgetConfig(database_toolbox=broken)
    assert "search_schemas" not in Builtins(CATALOG, config).names
    assert broken.execute("archive", "SELECT count(*) AS n FROM orders").rows == [{"n": 500}]


def test_a_failing_embedding_model_leaves_the_lexical_schema_search(shop: Path):
    """An embeddings= model that failed (a server down) made search_schemas raise; the
    tool search falls back to the lexical ranking, and so does the schema search now."""

    class UnreachableEmbeddings(HashingEmbeddings):
        def embed_query(self, text: str) -> list[float]:
            raise ConnectionError("embedding server unreachable")

    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    best = toolbox.search("money spent by customers", embeddings=UnreachableEmbeddings())
    assert best[0].name == "orders"


def test_bad_sources_are_clear_errors(tmp_path: Path):
    with pytest.raises(ValueError, match="in-memory SQLite database"):
        DatabaseToolbox({"mem": "sqlite://"})
    with pytest.raises(
        ValueError, match="is a mysql database; the toolbox reads SQLite and PostgreSQL"
    ):
        DatabaseToolbox({"m": "mysql://u@h/db"})
    with pytest.raises(ValueError, match=r"use postgresql\+psycopg://"):
        DatabaseToolbox({"p": "postgresql+asyncpg://u@h/db"})
    with pytest.raises(TypeError, match="mapping of source name -> SQLAlchemy URL"):
        DatabaseToolbox(["sqlite:///x.db"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a DatabaseToolbox"):
        BudgetConfig(database_toolbox="sqlite:///x.db")


# --- PostgreSQL: the same, on a real server ----------------------------------------------------


def test_postgres_search_uses_comments_and_schemas(crm: str):
    toolbox = DatabaseToolbox({"crm": crm})
    best = toolbox.search("what each customer paid", limit=2)
    assert best[0].name == "orders" and best[0].comment == "Purchases: what each customer paid"
    column = next(c for c in best[0].columns if c["name"] == "total_eur")
    assert column == {
        "name": "total_eur",
        "type": "NUMERIC(10, 2)",
        "nullable": False,
        "comment": "Amount paid, in euros",
    }
    assert "sales.quotas" in {t.name for t in toolbox.tables()}


def test_postgres_joins_aggregates_and_row_cap(crm: str):
    toolbox = DatabaseToolbox({"crm": crm}, max_rows=20)
    result = toolbox.execute(
        "crm",
        "WITH spent AS (SELECT customer_id, sum(total_eur) AS eur FROM orders GROUP BY 1) "
        "SELECT c.name, s.eur FROM spent s JOIN customers c ON c.id = s.customer_id "
        "ORDER BY s.eur DESC LIMIT 3",
    )
    assert [r["name"] for r in result.rows] == [f"customer {c}" for c in TOP[:3]]
    assert isinstance(result.rows[0]["eur"], float)
    many = toolbox.execute("crm", "SELECT * FROM orders")
    assert len(many.rows) == 20 and many.total_rows == 500
    plan = toolbox.execute("crm", "EXPLAIN SELECT * FROM orders WHERE id = 1")
    assert "QUERY PLAN" in plan.columns


PG_REFUSED = {
    "DELETE FROM orders": "DELETE writes rows",
    "UPDATE orders SET total_eur = 0": "UPDATE writes rows",
    "INSERT INTO audit_log VALUES (1, 'x', 'y')": "INSERT writes rows",
    "WITH d AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM d": "DELETE writes rows",
    "EXPLAIN ANALYZE DELETE FROM orders": "DELETE writes rows",
    "SELECT * INTO orders_copy FROM orders": "SELECT ... INTO creates a table",
    "SELECT * FROM orders FOR UPDATE": "locks rows",
    "MERGE INTO orders o USING customers c ON o.id = c.id WHEN MATCHED THEN DELETE": "MERGE",
    "TRUNCATE orders": "TRUNCATE deletes rows",
    "CREATE TABLE evil (a int)": "CREATE changes the schema",
    "DROP TABLE orders": "DROP changes the schema",
    "ALTER TABLE orders DROP COLUMN created_at": "ALTER changes the schema",
    "COPY orders TO '/tmp/toolbudget-orders.csv'": "COPY reads or writes files",
    "SET search_path = sales": "SET changes the session",
    "SELECT set_config('search_path', 'sales', false)": "set_config()",
    "SELECT nextval('ticket_numbers')": "nextval()",
    "SELECT pg_read_file('/etc/passwd')": "pg_read_file()",
    "SELECT lo_export(1, '/tmp/x')": "lo_export()",
    "SELECT query_to_xml('DELETE FROM orders', true, true, '')": "query_to_xml()",
    "SELECT pg_terminate_backend(1)": "pg_terminate_backend()",
    "SELECT 1; DELETE FROM orders": "2 statements",
    "COMMIT": "it controls the transaction",
    "LOCK TABLE orders": "LOCK",
    "DO $$ BEGIN DELETE FROM orders; END $$": "DO",
    "GRANT ALL ON orders TO PUBLIC": "GRANT changes permissions",
    "LISTEN x": "LISTEN changes the session",
    "SELECT 1 UNION SELECT 2 FOR UPDATE": "locks rows",
    "VALUES (1) ; COMMIT": "2 statements",
    "VACUUM orders": "VACUUM",
    "CALL some_procedure()": "CALL",
    "PREPARE p AS DELETE FROM orders": "PREPARE",
}


def test_each_write_kind_is_refused_on_postgres_and_the_rows_are_unchanged(crm: str):
    toolbox = DatabaseToolbox({"crm": crm})
    before = pg_state(crm)
    for sql, why in PG_REFUSED.items():
        with pytest.raises(SqlError) as refused:
            toolbox.execute("crm", sql)
        assert refused.value.refused, sql
        assert why in str(refused.value), (sql, str(refused.value))
    assert pg_state(crm) == before
    assert not Path("/tmp/toolbudget-orders.csv").exists()


def advisory_locks(url: str) -> list[Any]:
    """The advisory locks held in the database of ``url``, by any session."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT objid FROM pg_locks WHERE locktype = 'advisory' "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchall()


@pytest.mark.parametrize(
    "sql",
    [
        'SELECT U&"pg\\005fadvisory\\005flock"(42)',
        'SELECT u&"pg_advisory_lock"(42)',
        "SELECT * FROM U&\"pg\\005fls_dir\"('.')",
        "SELECT U&'!0041' UESCAPE '!' AS a",
        "SELECT count(*) FROM ts_stat('SELECT to_tsvector(pg_advisory_lock(43)::text)')",
        "SELECT ts_rewrite('a'::tsquery, "
        "'SELECT ''a''::tsquery, to_tsquery(pg_advisory_lock(44)::text)')",
    ],
)
def test_a_denied_function_cannot_be_spelled_past_the_check(crm: str, sql: str):
    """sqlglot keeps a U&"..." name's escapes, and ts_stat()/ts_rewrite() run SQL given as a
    string: both ran a denied function, whose advisory lock outlived the rollback."""
    toolbox = DatabaseToolbox({"crm": crm})
    with pytest.raises(SqlError, match="Refused: execute_sql only reads") as refused:
        toolbox.execute("crm", sql)
    assert refused.value.refused
    assert "Unicode escapes" in str(refused.value) or "ts_" in str(refused.value)
    assert advisory_locks(crm) == []
    toolbox.close()


def test_index_maintenance_and_session_functions_are_refused(crm: str):
    """brin_summarize_new_values() and gin_clean_pending_list() wrote index pages through a
    READ ONLY transaction, and the rollback did not undo them; setseed() outlived it too."""
    with psycopg.connect(crm, autocommit=True) as conn:
        conn.execute("CREATE TABLE events (id INTEGER, tags TEXT[])")
        conn.execute(
            "CREATE INDEX events_brin ON events USING brin (id) "
            "WITH (pages_per_range = 1, autosummarize = off)"
        )
        conn.execute("CREATE INDEX events_gin ON events USING gin (tags) WITH (fastupdate = on)")
        conn.execute("INSERT INTO events SELECT i, ARRAY['t' || i] FROM generate_series(1, 2000) i")
    toolbox = DatabaseToolbox({"crm": crm})
    for sql in [
        "SELECT brin_summarize_new_values('events_brin')",
        "SELECT brin_summarize_range('events_brin', 0)",
        "SELECT brin_desummarize_range('events_brin', 0)",
        "SELECT gin_clean_pending_list('events_gin')",
        "SELECT setseed(0.5)",
        "SELECT pg_stat_reset()",
        "SELECT pg_stat_reset_single_table_counters('events'::regclass)",
    ]:
        name = sql.split()[1].split("(")[0]
        with pytest.raises(SqlError, match=rf"it calls {name}\(\), which execute_sql does not"):
            toolbox.execute("crm", sql)
    with psycopg.connect(crm, autocommit=True) as conn:  # still to do: nothing was written
        assert conn.execute("SELECT brin_summarize_new_values('events_brin')").fetchone()[0] > 0
        assert conn.execute("SELECT gin_clean_pending_list('events_gin')").fetchone()[0] > 0


@pytest.mark.parametrize(
    ("sql", "explain"),
    [
        ("DELETE FROM orders", False),
        ("CREATE TABLE evil (a int)", False),
        ("SELECT nextval('ticket_numbers')", False),
        ("SELECT set_config('transaction_read_only', 'off', false)", False),
        ("SELECT 1; DELETE FROM orders", False),
        ("COMMIT; DELETE FROM orders", False),
        ("EXPLAIN ANALYZE DELETE FROM orders", True),
        ("EXPLAIN ANALYZE SELECT nextval('ticket_numbers')", True),
        ("EXPLAIN SELECT 1; DELETE FROM orders", True),
        ("COPY orders TO '/tmp/toolbudget-orders.csv'", True),
    ],
)
def test_the_postgres_connection_refuses_writes_on_its_own(crm: str, sql: str, explain: bool):
    """The second wall: a statement that got past the check still runs in a READ ONLY
    transaction, one statement per message (a query through a cursor: SELECT only)."""
    toolbox = DatabaseToolbox({"crm": crm})
    before = pg_state(crm)
    source = toolbox._sources["crm"]
    with pytest.raises(SqlError):
        toolbox._postgres(source, sql, ReadOnlyCheck(True, explain=explain))  # the check skipped
    assert pg_state(crm) == before
    assert not Path("/tmp/toolbudget-orders.csv").exists()


def test_every_postgres_query_is_rolled_back(crm: str):
    """The third wall: PostgreSQL lets EXPLAIN ANALYZE CREATE TABLE AS through a READ ONLY
    transaction (the check refuses it); the transaction is always rolled back."""
    toolbox = DatabaseToolbox({"crm": crm})
    before = pg_state(crm)
    sql = "EXPLAIN ANALYZE CREATE TABLE evil AS SELECT 1"
    with pytest.raises(SqlError, match="CREATE changes the schema"):
        toolbox.execute("crm", sql)
    plan = toolbox._postgres(toolbox._sources["crm"], sql, ReadOnlyCheck(True, explain=True))
    assert plan.rows  # it ran, inside the transaction...
    assert pg_state(crm) == before  # ...which was rolled back: no table


def test_a_slow_query_is_stopped_by_the_statement_timeout(crm: str):
    toolbox = DatabaseToolbox({"crm": crm}, timeout_s=0.5)
    with pytest.raises(SqlError, match=r"ran longer than 0.5 s and was stopped"):
        toolbox.execute("crm", "SELECT pg_sleep(5)")
    assert toolbox.execute("crm", "SELECT 1 AS one").rows == [{"one": 1}]  # the pool is fine


def test_a_postgres_count_out_of_time_keeps_the_rows_within_the_timeout(crm: str):
    """Counting the rest (MOVE FORWARD ALL) had a statement_timeout of its own: the query ran
    up to twice timeout_s, and a count cut short threw the rows away for a timeout error."""
    toolbox = DatabaseToolbox({"crm": crm}, timeout_s=0.8, max_rows=5)
    toolbox.execute("crm", "SELECT 1")  # the imports and the first connection, not timed
    start = time.monotonic()
    result = toolbox.execute(
        "crm", "SELECT g, pg_sleep(0.05) IS NULL AS slept FROM generate_series(1, 100) g"
    )
    elapsed = time.monotonic() - start
    assert [r["g"] for r in result.rows] == [1, 2, 3, 4, 5] and result.total_rows is None
    assert "showing the first 5 of more rows" in result.as_dict()["note"]
    assert elapsed < 0.8 + 0.7  # within the timeout, with room for a loaded machine (was ~2x)
    assert toolbox.execute("crm", "SELECT 1 AS one").rows == [{"one": 1}]  # the pool is fine


def test_a_postgres_query_has_one_deadline_from_planning_to_the_last_row(crm: str):
    """DECLARE (which plans the query) and the FETCH each had a statement_timeout of their
    own: a query that took most of timeout_s to plan then had timeout_s again to run (3.2 s
    at timeout_s=2 here, its rows answered)."""
    with psycopg.connect(crm, autocommit=True) as conn:  # folded while planning: 1.4 s
        conn.execute(
            "CREATE FUNCTION slow_constant(seconds float) RETURNS int IMMUTABLE LANGUAGE plpgsql "
            "AS $$ BEGIN PERFORM pg_sleep(seconds); RETURN 1; END $$"
        )
    toolbox = DatabaseToolbox({"crm": crm}, timeout_s=2, max_rows=5)
    toolbox.execute("crm", "SELECT 1")  # the imports and the first connection, not timed
    sql = (  # then 6 rows of 0.3 s: 1.8 s
        "SELECT g, pg_sleep(0.3) IS NULL AS slept FROM generate_series(1, 6) g "
        "WHERE slow_constant(1.4) = 1"
    )
    start = time.monotonic()
    with pytest.raises(SqlError, match=r"ran longer than 2 s and was stopped"):
        toolbox.execute("crm", sql)
    assert time.monotonic() - start < 2 + 0.7
    assert toolbox.execute("crm", "SELECT 1 AS one").rows == [{"one": 1}]  # the pool is fine


def test_a_postgres_query_is_stopped_at_its_deadline_while_its_rows_are_sent(crm: str):
    """PostgreSQL gathers a FETCH's rows, then sends them whatever statement_timeout says:
    51 rows of a 20 MB bytea (280 KB on disk, compressed) took 9 s at timeout_s=1.5."""
    with psycopg.connect(crm, autocommit=True) as conn:
        conn.execute("CREATE TABLE scans (body bytea)")
        conn.execute("INSERT INTO scans SELECT decode(repeat('00', 20000000), 'hex')")
    toolbox = DatabaseToolbox({"crm": crm}, timeout_s=1.5, max_rows=50)
    toolbox.execute("crm", "SELECT 1")  # the imports and the first connection, not timed
    start = time.monotonic()
    with pytest.raises(SqlError, match=r"ran longer than 1.5 s and was stopped"):
        toolbox.execute("crm", "SELECT g, body FROM generate_series(1, 51) g, scans")
    assert time.monotonic() - start < 1.5 + 0.7
    assert toolbox.execute("crm", "SELECT 1 AS one").rows == [{"one": 1}]  # the pool is fine


def test_long_values_are_cut_as_they_are_read_on_postgres(crm: str):
    """The first max_rows + 1 rows were fetched whole, then converted: rows x columns x the
    longest value in memory (a text may be 1 GB), and the answer had no cap."""
    toolbox = DatabaseToolbox({"crm": crm})
    sql = (
        "SELECT g, repeat('x', 200000) AS a, repeat('y', 200000) AS b, "
        "ARRAY[repeat('z', 20000)] AS c, '\"json\"'::jsonb AS d FROM generate_series(1, 250) g"
    )
    result, peak = peak_memory(lambda: toolbox.execute("crm", sql))
    assert peak < 20_000_000  # was 160 MB: 201 rows x 400,000 characters, twice
    answer = result.as_dict()
    assert len(json.dumps(answer)) < 1_001_000 and result.total_rows == 250
    assert 0 < len(result.rows) < 200 and "at most 1,000,000 characters" in answer["note"]
    row = result.rows[0]
    assert row["a"].endswith("x... [200,000 characters]") and len(row["a"]) == 10_000
    assert row["c"][0].endswith("z... [20,000 characters]") and len(row["c"][0]) == 10_000
    assert row["d"] == "json"


def test_postgres_syntax_errors_are_the_servers_message(crm: str):
    toolbox = DatabaseToolbox({"crm": crm})
    with pytest.raises(SqlError, match='syntax error at or near "SELEC"'):
        toolbox.execute("crm", "SELEC * FROM orders")
    with pytest.raises(SqlError, match='column "totl" does not exist'):
        toolbox.execute("crm", "SELECT totl FROM orders")
    assert check_read_only("SELEC * FROM orders", "postgres").ask_database


def _message(toolbox: DatabaseToolbox, source: str, sql: str) -> str:
    with pytest.raises(SqlError) as caught:
        toolbox.execute(source, sql)
    return str(caught.value)


def test_the_models_own_bad_sql_on_postgres_is_not_a_source_down(crm: str):
    # psycopg raises OperationalError for both; was: "cannot be reached ... unavailable".
    toolbox = DatabaseToolbox({"crm": crm})
    columns = ", ".join(f"id AS c{i}" for i in range(1700))
    for sql, said in [
        ("SELECT * FROM orders WHERE id = $1", "execute_sql takes no parameters"),  # 08P01
        (f"SELECT {columns} FROM orders", "at most 1664 entries"),  # 54011
    ]:
        message = _message(toolbox, "crm", sql)
        assert "rejected the query" in message and said in message and "Fix the SQL" in message
        assert "cannot be reached" not in message and "unavailable" not in message
        assert toolbox.execute("crm", "SELECT count(*) AS n FROM orders").rows == [{"n": 500}]


def test_a_postgres_connection_lost_mid_query_is_a_source_down(crm: str):
    import threading

    toolbox = DatabaseToolbox({"crm": crm, "other": crm}, timeout_s=10)
    answer: list[str] = []
    worker = threading.Thread(
        target=lambda: answer.append(_message(toolbox, "crm", "SELECT pg_sleep(8) AS s"))
    )
    worker.start()
    with psycopg.connect(crm, autocommit=True) as admin:
        for _ in range(100):  # until the query runs (its FETCH), then end its backend: 57P01
            ended = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE state = 'active' "
                "AND datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
            if ended:
                break
            time.sleep(0.05)
    worker.join(10)
    (message,) = answer
    assert "source 'crm' cannot be reached" in message and "'other'" in message
    assert "Fix the SQL" not in message
    assert toolbox.execute("crm", "SELECT 1 AS one").rows == [{"one": 1}]  # a new connection


@pytest.mark.parametrize(
    ("sqlstate", "broken", "fault"),
    [
        ("08P01", False, "sql"),  # protocol violation: `$1` without parameters
        ("54011", False, "sql"),  # too many columns
        ("42601", False, "sql"),  # syntax error
        ("22012", False, "sql"),  # division by zero
        ("55000", False, "sql"),  # object not in prerequisite state (currval before nextval)
        ("08006", False, "down"),  # connection failure
        ("57P01", False, "down"),  # admin shutdown: the backend was ended
        ("58030", False, "down"),  # I/O error
        (None, False, "down"),  # psycopg's own: the server went away mid-query
        ("42601", True, "down"),  # whatever the state, a broken connection is a source down
        ("53300", False, "busy"),  # too many connections
        ("53200", False, "busy"),  # out of memory
        ("55P03", False, "busy"),  # lock not available
        ("40P01", False, "busy"),  # deadlock detected
        ("57P03", False, "busy"),  # the server is starting up
    ],
)
def test_postgres_errors_are_classified_by_sqlstate_not_by_class(
    sqlstate: str | None, broken: bool, fault: str
):
    from langgraph_toolbudget.database.toolbox import _pg_fault

    cls = psycopg.OperationalError if sqlstate is None else psycopg.errors.lookup(sqlstate)
    assert _pg_fault(cls("message"), broken=broken) == fault


def test_a_sqlite_database_locked_by_a_writer_is_busy_not_bad_sql(shop: Path):
    # Was: "rejected the query: database is locked. Fix the SQL".
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"}, timeout_s=0.5)
    writer = sqlite3.connect(shop, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")
        message = _message(toolbox, "shop", "SELECT count(*) AS n FROM orders")
        writer.execute("COMMIT")
    finally:
        writer.close()
    assert "source 'shop' could not run the query now (database is locked)" in message
    assert "Call execute_sql again in a moment" in message and "Fix the SQL" not in message
    assert toolbox.execute("shop", "SELECT count(*) AS n FROM orders").rows == [{"n": 500}]


def test_a_sqlite_source_locked_when_its_schemas_are_first_read_is_busy_not_down(
    shop: Path, monkeypatch: pytest.MonkeyPatch
):
    """Was: a writer's lock at the first schema read marked the source down until
    refresh(), and a graph built then had no database tools at all."""
    monkeypatch.setattr(toolbox_module, "BUSY_RECHECK_S", 0.0)
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"}, timeout_s=0.3)
    writer = sqlite3.connect(shop, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")
        assert toolbox.available_sources() == []
        assert toolbox.down_sources()["shop"].startswith("busy: database is locked")
        assert toolbox.reachable_sources() == ["shop"]
        builtins = Builtins(CATALOG, BudgetConfig(database_toolbox=toolbox))
        assert {"search_schemas", "execute_sql"} <= set(builtins.names)
        assert all("Sources: shop (sqlite)." in t.description for t in builtins.tools[-2:])
        writer.execute("COMMIT")
    finally:
        writer.close()
    assert toolbox.available_sources() == ["shop"] and toolbox.down_sources() == {}
    assert toolbox.search("money spent by customers")[0].name == "orders"


def test_a_schema_read_failure_is_classified_by_the_drivers_error_sqlalchemy_wraps():
    from sqlalchemy.exc import OperationalError

    from langgraph_toolbudget.database.toolbox import _schema_fault

    def wrapped(orig: BaseException) -> OperationalError:
        return OperationalError("SELECT ...", {}, orig)

    assert _schema_fault(wrapped(psycopg.errors.LockNotAvailable("lock"))) == "busy"
    assert _schema_fault(wrapped(psycopg.errors.AdminShutdown("shut down"))) == "down"
    assert _schema_fault(wrapped(psycopg.OperationalError("refused"))) == "down"
    assert _schema_fault(wrapped(sqlite3.OperationalError("database is locked"))) == "busy"
    assert _schema_fault(ValueError("a column type SQLAlchemy cannot read")) == "down"


def test_a_sqlite_file_that_is_no_database_is_a_source_down(shop: Path, tmp_path: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}", "other": f"sqlite:///{shop}"})
    assert toolbox.available_sources() == ["shop", "other"]
    shop.write_bytes(b"not a database, " * 200)  # replaced after the schemas were read
    message = _message(toolbox, "shop", "SELECT count(*) AS n FROM orders")
    assert "source 'shop' cannot be reached (file is not a database)" in message
    assert "Fix the SQL" not in message


def test_unusual_postgres_values_are_answered_as_json(crm: str):
    """A numeric of 5,001 digits made int() then json.dumps raise; a deeply nested jsonb made
    psycopg's loader raise RecursionError. Both, and their kind, are answered."""
    toolbox = DatabaseToolbox({"crm": crm})
    result = toolbox.execute(
        "crm",
        "SELECT 1e5000::numeric AS big, 1e-5000::numeric AS tiny, 'NaN'::numeric AS nan, "
        "12.5::numeric AS usual, 10::numeric AS whole, "
        "(repeat('[', 3000) || repeat(']', 3000))::jsonb AS deep, "
        "('[' || repeat('7', 5000) || ']')::json AS long_number, "
        "'{\"a\": [1, 2]}'::jsonb AS doc, ARRAY['[[1]]'::json] AS docs",
    )
    (row,) = result.rows
    assert row["big"] == "1" + "0" * 5000 and row["tiny"] == "1E-5000"
    assert row["nan"] == "NaN" and row["usual"] == 12.5 and row["whole"] == 10
    assert row["deep"] == "[" * 3000 + "]" * 3000  # its text: too deep to load
    assert row["long_number"] == "[" + "7" * 5000 + "]"
    assert row["doc"] == {"a": [1, 2]} and row["docs"] == [[[1]]]
    assert json.loads(json.dumps(result.as_dict()))["rows"] == [row]


def test_dates_python_cannot_hold_are_shown_as_postgres_writes_them(crm: str):
    """psycopg raised DataError for each of these values, answered as "the database rejected
    the query", in an array or a range too; its C loader read 178 million years as 1.49
    million. Dates Python holds are still ISO strings, intervals seconds."""
    toolbox = DatabaseToolbox({"crm": crm})
    shown = {
        "'infinity'::date": "infinity",
        "'-infinity'::date": "-infinity",
        "'infinity'::timestamp": "infinity",
        "'-infinity'::timestamptz": "-infinity",
        "'10000-01-01'::date": "10000-01-01",
        "'0044-03-15 BC'::date": "0044-03-15 BC",
        "'10000-01-01 10:30'::timestamp": "10000-01-01 10:30:00",
        "'0001-01-01 BC'::timestamptz": "0001-01-01 00:00:00+00 BC",
        "'24:00:00'::time": "24:00:00",
        "'24:00:00+02'::timetz": "24:00:00+02",
        "'2147483647 days'::interval": "2147483647 days",
        "'178000000 years'::interval": "178000000 years",
        "ARRAY['infinity'::date, '2024-05-01']": ["infinity", "2024-05-01"],
        "daterange('2024-05-01', 'infinity')": "[2024-05-01, infinity)",
        "'2024-05-01 10:30'::timestamp": "2024-05-01T10:30:00",
        "'1 day 2 hours'::interval": 93600.0,
    }
    with psycopg.connect(crm, autocommit=True) as conn:  # the BC timestamptz's offset
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET TimeZone = 'UTC'")
    sql = "SELECT " + ", ".join(f"{value} AS v{i}" for i, value in enumerate(shown))
    (row,) = toolbox.execute("crm", sql).rows
    assert list(row.values()) == list(shown.values())


@pytest.mark.parametrize(
    ("setting", "shown"),
    [
        ("IntervalStyle = 'iso_8601'", ["P1DT2H", "2024-05-01T10:30:00+00:00"]),
        ("IntervalStyle = 'sql_standard'", ["1 2:00:00", "2024-05-01T10:30:00+00:00"]),
        ("IntervalStyle = 'postgres_verbose'", ["@ 1 day 2 hours", "2024-05-01T10:30:00+00:00"]),
        ("DateStyle = 'SQL, DMY'", [93600.0, "01/05/2024 10:30:00 UTC"]),
    ],
    ids=["iso_8601", "sql_standard", "postgres_verbose", "datestyle-sql"],
)
def test_values_in_a_style_psycopg_cannot_read_are_shown_as_postgres_writes_them(
    crm: str, setting: str, shown: list[Any]
):
    """With IntervalStyle other than postgres (or DateStyle other than ISO for timestamptz),
    set for the database or the role, psycopg's loader raised NotImplementedError for every
    such value, out of DatabaseToolbox.execute (not a SqlError); the model got "execute_sql
    failed"."""
    with psycopg.connect(crm, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET {setting}")
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET TimeZone = 'UTC'")
    toolbox = DatabaseToolbox({"crm": crm})
    sql = "SELECT '1 day 2 hours'::interval AS i, '2024-05-01 10:30+00'::timestamptz AS t"
    (row,) = toolbox.execute("crm", sql).rows
    assert list(row.values()) == shown


def test_sql_that_is_not_text_is_refused_before_it_runs(shop: Path, crm: str):
    """A lone surrogate made the SQL's encoding raise UnicodeEncodeError out of the graph; a
    NUL cut the text PostgreSQL read."""
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}", "crm": crm})
    for source in ("shop", "crm"):
        with pytest.raises(SqlError, match=r"'\\ud800' \(a lone surrogate\) at character 41"):
            toolbox.execute(source, "SELECT name FROM customers WHERE name = '\ud800'")
        with pytest.raises(SqlError, match="a NUL character at character 8"):
            toolbox.execute(source, "SELECT 1\x00; DELETE FROM orders")


@pytest.mark.parametrize(
    ("method", "call", "answer", "logged"),
    [
        (
            "execute",
            ask("execute_sql", source="shop", sql="SELECT 1"),
            "Error: execute_sql failed on source 'shop' (RecursionError: maximum recursion",
            "execute_sql on source 'shop' raised",
        ),
        (
            "search",
            ask("search_schemas", query="money spent"),
            "Error: search_schemas failed (RecursionError: maximum recursion",
            "search_schemas raised",
        ),
    ],
    ids=["execute_sql", "search_schemas"],
)
def test_an_unforeseen_failure_of_a_database_tool_is_an_error_message(
    shop: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    method: str,
    call: AIMessage,
    answer: str,
    logged: str,
):
    """Whatever else a query or a search raises (here a RecursionError, as psycopg's JSON
    loader did) is logged and answered; the run goes on. search_schemas had no such net:
    the exception went out of the graph."""
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")

    monkeypatch.setattr(toolbox, method, fails)
    model = ScriptedChatModel(responses=[call, AIMessage("sorry")], cycle=False)
    graph = create_toolbudget_agent(model, CATALOG, database_toolbox=toolbox).compile()
    out = graph.invoke({"messages": [HumanMessage("read it")]})
    (failed,) = answers(out)
    assert failed.status == "error" and failed.content.startswith(answer)
    assert out["messages"][-1].content == "sorry"
    assert logged in caplog.text


def test_the_answers_name_the_other_sources(shop: Path, tmp_path: Path):
    """Every answer that sends the model to another source lists them, quoted."""
    gone = f"sqlite:///{tmp_path / 'missing.db'}"
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}", "gone": gone}, connect_timeout_s=1)
    calls = [
        {"name": "search_schemas", "args": {"query": "x", "source": "nope"}, "id": "a"},
        {"name": "execute_sql", "args": {"source": 1}, "id": "b"},
        {"name": "execute_sql", "args": {"source": "gone", "sql": "SELECT 1"}, "id": "c"},
    ]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), AIMessage("ok")])
    graph = create_toolbudget_agent(model, CATALOG, database_toolbox=toolbox).compile()
    unknown, bad, down = answers(graph.invoke({"messages": [HumanMessage("read it")]}))
    assert unknown.content.endswith("the sources are: 'shop', 'gone'.")
    assert "needs 'source' (one of 'shop', 'gone')" in bad.content
    assert "source 'gone' cannot be reached" in down.content
    assert "Try another source ('shop')" in down.content


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_the_database_tools_read_their_arguments_as_catalog_tools_do(shop: Path, api: str):
    # Were: a limit sent as text silently 5 tables; the statement under "query" (as many SQL
    # tools name it) refused; a misspelt key missed.
    calls = [
        {"name": "search_schemas", "args": {"Query": "orders customers", "limit": "1"}, "id": "a"},
        {"name": "execute_sql", "args": {"source": "shop", "query": "SELECT 2 AS n"}, "id": "b"},
    ]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), AIMessage("ok")])
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    graph = create_toolbudget_agent(model, CATALOG, database_toolbox=toolbox).compile()
    found, ran = answers(await run(graph, {"messages": [HumanMessage("read it")]}, api))
    assert found.status == "success" and len(json.loads(found.content)["tables"]) == 1
    assert ran.status == "success" and json.loads(ran.content)["rows"] == [{"n": 2}], ran.content


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_what_the_model_sent_is_echoed_bounded(shop: Path, api: str):
    """At most 200 characters of one value come back (and how long it was), whatever its
    size or type: an unknown source, a query nothing matches, a name the database quotes in
    its error; an int Python will not write in decimal is answered too (in hex), never raised."""
    long, huge = "Z" * 100_000, 2**20000
    calls = [
        {"name": "execute_sql", "args": {"source": long, "sql": "SELECT 1"}, "id": "a"},
        {"name": "search_schemas", "args": {"query": "x", "source": long}, "id": "b"},
        {"name": "search_schemas", "args": {"query": long}, "id": "c"},
        {
            "name": "execute_sql",
            "args": {"source": "shop", "sql": f"SELECT {long[:20_000]}"},
            "id": "d",
        },
        {"name": "search_schemas", "args": {"query": "orders", "source": huge}, "id": "e"},
        {"name": "search_schemas", "args": {"query": "orders", "source": ["shop"]}, "id": "f"},
    ]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), AIMessage("ok")])
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    graph = create_toolbudget_agent(model, CATALOG, database_toolbox=toolbox).compile()
    out = await run(graph, {"messages": [HumanMessage("read it")]}, api)
    by_id = {m.tool_call_id: m for m in answers(out)}
    assert list(by_id) == ["a", "b", "c", "d", "e", "f"] and out["messages"][-1].content == "ok"
    for message in by_id.values():
        assert message.status == "error" or message.tool_call_id == "c"
        assert message.content.count("Z") <= 300 and len(message.content) < 1_000
    for i in "abc":
        assert "'" + "Z" * 199 + "... (100002 characters)" in by_id[i].content  # its repr
    assert "no such column: " + "Z" * 200 in by_id["d"].content
    assert "no database source '0x1000000000" in by_id["e"].content  # the reply's int as hex text
    assert "no database source ['shop']; the sources are: 'shop'." in by_id["f"].content
    # The int itself, as a model node of your own hands it to the executor: echoed in hex.
    executor = ToolExecutor(CATALOG, database_toolbox=toolbox)
    state = {"messages": [HumanMessage("read it"), AIMessage("", tool_calls=[calls[4]])]}
    (own,) = (await run(executor, {**state, "selected_tools": []}, api))["messages"]
    assert own.status == "error" and "no database source 0x1000000000" in own.content
    with pytest.raises(SqlError, match=r"no database source 12. The sources are: 'shop'"):
        toolbox.execute(12, "SELECT 1")  # type: ignore[arg-type]  # as a program may call it


# --- through the agent: the prebuilt graph, the nodes, the middleware --------------------------


def database_script(source: str) -> list[Any]:
    return [
        ask("search_schemas", "s1", query="money spent by customers on purchases"),
        ask(
            "execute_sql",
            "q1",
            source=source,
            sql="SELECT customer_id, sum(total_eur) AS spent FROM orders GROUP BY 1 "
            "ORDER BY spent DESC LIMIT 1",
        ),
        ask("execute_sql", "q2", source=source, sql="DROP TABLE orders"),
        AIMessage("Customer 1 spent the most."),
    ]


def check_turn(out: dict[str, Any]) -> None:
    search, best, drop = answers(out)
    assert json.loads(search.content)["tables"][0]["table"] == "orders"
    assert json.loads(best.content)["rows"] == [
        {"customer_id": TOP[0], "spent": pytest.approx(SPENT[TOP[0]])}
    ]
    assert drop.status == "error" and drop.content.startswith("Refused: execute_sql only reads")
    assert out["messages"][-1].content == "Customer 1 spent the most."


@pytest.mark.parametrize("api", APIS)
async def test_the_prebuilt_agent_searches_and_queries_sqlite(shop: Path, api: str):
    before = digest(shop)
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    model = ScriptedChatModel(responses=database_script("shop"), cycle=False)
    graph = create_toolbudget_agent(model, CATALOG, database_toolbox=toolbox).compile()
    out = await run(graph, {"messages": [HumanMessage("who spent the most?")]}, api)
    check_turn(out)
    assert {"search_schemas", "execute_sql"} <= set(model.bound_tools[0])
    assert digest(shop) == before


@pytest.mark.parametrize("api", APIS)
async def test_the_nodes_query_postgres(crm: str, api: str):
    before = pg_state(crm)
    config = BudgetConfig(database_toolbox=DatabaseToolbox({"crm": crm}))
    model = ScriptedChatModel(responses=database_script("crm"), cycle=False)
    graph = StateGraph(ToolBudgetState)
    graph.add_node("agent", CallModel(model, CATALOG, config=config))
    graph.add_node("tools", ToolExecutor(CATALOG, config=config))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    check_turn(await run(graph.compile(), {"messages": [HumanMessage("who spent most?")]}, api))
    assert pg_state(crm) == before


@pytest.mark.parametrize("api", APIS)
async def test_the_middleware_searches_and_queries(shop: Path, api: str):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    model = ScriptedChatModel(responses=database_script("shop"), cycle=False)
    agent = create_agent(
        model, middleware=[ToolBudgetMiddleware(CATALOG, database_toolbox=toolbox)]
    )
    check_turn(await run(agent, {"messages": [HumanMessage("who spent the most?")]}, api))


def test_a_large_result_is_offloaded_through_the_executor(shop: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    model = ScriptedChatModel(
        responses=[ask("execute_sql", source="shop", sql="SELECT * FROM orders"), AIMessage("ok")],
        cycle=False,
    )
    graph = create_toolbudget_agent(
        model, CATALOG, database_toolbox=toolbox, offload_over_chars=5_000
    ).compile(store=InMemoryStore())
    out = graph.invoke(
        {"messages": [HumanMessage("all orders")]}, {"configurable": {"thread_id": "t"}}
    )
    (stub,) = answers(out)
    assert (
        stub.artifact["offloaded"]["kind"] == "json" and stub.artifact["offloaded"]["chars"] > 5_000
    )
    assert "[Large output offloaded" in stub.content


def test_gating_the_database_tools(shop: Path):
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    on = BudgetConfig(database_toolbox=toolbox)
    off = Builtins(CATALOG, BudgetConfig()).names
    assert Builtins(CATALOG, on).names == (*off, "search_schemas", "execute_sql")
    only_search = on.override(enabled_builtins={"deny": ["execute_sql"]})
    assert "execute_sql" not in Builtins(CATALOG, only_search).names
    model = ScriptedChatModel(
        responses=[ask("execute_sql", source="shop", sql="SELECT 1"), AIMessage("ok")], cycle=False
    )
    graph = create_toolbudget_agent(model, CATALOG, config=only_search).compile()
    (refused,) = answers(graph.invoke({"messages": [HumanMessage("orders")]}))
    assert "execute_sql" not in model.bound_tools[0] and "search_schemas" in model.bound_tools[0]
    assert (
        refused.status == "error" and "'execute_sql' is not a tool of this app" in refused.content
    )


def test_sql_from_a_codemode_program(shop: Path):
    code = (
        "sql = 'SELECT city, count(*) AS n FROM customers GROUP BY city'\n"
        "rows = execute_sql(source='shop', sql=sql)['rows']\n"
        "print({r['city']: r['n'] for r in rows})\n"
        "try:\n    execute_sql(source='shop', sql='DELETE FROM orders')\n"
        "except RuntimeError as e:\n    print(str(e)[:40])"
    )
    before = digest(shop)
    model = ScriptedChatModel(
        responses=[ask("python_execution", code=code), AIMessage("ok")], cycle=False
    )
    graph = create_toolbudget_agent(
        model,
        CATALOG,
        database_toolbox=DatabaseToolbox({"shop": f"sqlite:///{shop}"}),
        tool_call_formats={"enabled": ["native", "codemode"], "primary": "codemode"},
    ).compile()
    (answer,) = answers(graph.invoke({"messages": [HumanMessage("customers per city")]}))
    assert answer.content == "{'Lyon': 5, 'Paris': 5}\nRefused: execute_sql only reads, and DEL"
    assert digest(shop) == before


@pytest.mark.parametrize("api", APIS)
async def test_execute_sql_advises_search_schemas_only_while_it_is_on(shop: Path, api: str):
    """Was: a rejected query and an unknown source said "(search_schemas shows the tables and
    columns)" with search_schemas denied, so the model called a tool it does not have."""
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    calls = [
        {"name": "execute_sql", "args": {"source": "shop", "sql": "SELECT nope FROM orderz"}},
        {"name": "execute_sql", "args": {"source": "shopp", "sql": "SELECT 1"}},
    ]
    for denied, named in (([], True), (["search_schemas"], False)):
        script = [
            AIMessage("", tool_calls=[{**c, "id": f"c{i}"} for i, c in enumerate(calls)]),
            ask("execute_sql", "fixed", source="shop", sql="SELECT count(*) AS n FROM orders"),
            AIMessage("500 orders"),
        ]
        model = ScriptedChatModel(responses=script, cycle=False)
        graph = create_toolbudget_agent(
            model, CATALOG, database_toolbox=toolbox, enabled_builtins={"deny": denied}
        ).compile()
        out = await run(graph, {"messages": [HumanMessage("how many orders?")]}, api)
        rejected, unknown, fixed = answers(out)
        assert rejected.status == unknown.status == "error"
        assert "no such table: orderz\nFix the SQL and call execute_sql again" in rejected.content
        assert "Call execute_sql again with one of them" in unknown.content
        for message in (rejected, unknown):
            assert ("search_schemas" in message.content) is named, message.content
        (description,) = [
            s["function"]["description"]
            for s in model.tools_schema
            if s["function"]["name"] == "execute_sql"
        ]
        assert ("search_schemas" in description) is named, description
        assert json.loads(fixed.content)["rows"] == [{"n": 500}]


def test_search_schemas_advises_execute_sql_only_while_it_is_on(
    shop: Path, monkeypatch: pytest.MonkeyPatch
):
    """The search's "next" step and its failure's way out name execute_sql only if it is on."""
    toolbox = DatabaseToolbox({"shop": f"sqlite:///{shop}"})
    real_search = toolbox.search
    fail = [False]

    def search(*args: Any, **kwargs: Any) -> Any:
        if fail[0]:
            raise RecursionError("maximum recursion depth exceeded")
        return real_search(*args, **kwargs)

    monkeypatch.setattr(toolbox, "search", search)
    for denied, named in (([], True), (["execute_sql"], False)):
        answered = []
        for failing in (False, True):
            fail[0] = failing
            model = ScriptedChatModel(
                responses=[ask("search_schemas", query="orders"), AIMessage("ok")], cycle=False
            )
            graph = create_toolbudget_agent(
                model, CATALOG, database_toolbox=toolbox, enabled_builtins={"deny": denied}
            ).compile()
            (answer,) = answers(graph.invoke({"messages": [HumanMessage("orders?")]}))
            answered.append(answer)
        found, failed = answered
        assert json.loads(found.content)["tables"][0]["table"] == "orders"
        assert failed.status == "error" and "tell the user" in failed.content.lower()
        for message in (found, failed):
            assert ("execute_sql" in message.content) is named, message.content
