"""ToolUsage in a real PostgreSQL (``PostgresStore`` and ``AsyncPostgresStore``).

A fresh database per test on the session's own server (``pg_url``, ``tests/pg.py``).
Checked: what one store instance records, a second instance (its own connection,
as another worker or a restart would have) loads and ranks with; ``forget`` deletes
the rows in the database; the per-thread flood bound holds in the database too.
"""

from __future__ import annotations

import asyncio

import psycopg
from langchain_core.messages import HumanMessage
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

from langgraph_toolbudget import SelectTools, ToolUsage
from langgraph_toolbudget.demo.example_catalog import build_example_catalog

NAMESPACE = ("toolbudget", "usage")


def _rows(pg_url: str) -> list[tuple[str, str | None]]:
    """(tool, thread) of every usage row in the database (every scope), read with plain SQL."""
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT value->>'tool', value->>'thread' FROM store "
            "WHERE prefix = %s OR prefix LIKE %s ORDER BY key",
            (".".join(NAMESPACE), ".".join(NAMESPACE) + ".%"),
        ).fetchall()
    return [(str(tool), thread) for tool, thread in rows]


def test_usage_persists_across_postgres_store_instances_and_forgets(pg_url: str) -> None:
    with PostgresStore.from_conn_string(pg_url) as store:
        store.setup()
        usage = ToolUsage(store=store)
        usage.record("do I need an umbrella this weekend", ["weather_forecast"], thread_id="a")
        usage.record("tally the purchases we have", ["count_rows"], thread_id="b")
    assert sorted(_rows(pg_url)) == [("count_rows", "b"), ("weather_forecast", "a")]

    with PostgresStore.from_conn_string(pg_url) as store:  # a restart: a new connection
        usage = ToolUsage(store=store)
        rows = [(r["tool"], r["query"], r["thread"]) for r in usage.export()]
        assert rows == [
            ("weather_forecast", "do I need an umbrella this weekend", "a"),
            ("count_rows", "tally the purchases we have", "b"),
        ]
        node = SelectTools(build_example_catalog(), max_tools=2, usage=usage)
        state = {"messages": [HumanMessage("Do I need an umbrella in Lima on Saturday?")]}
        picked = node.invoke({**state, "categories": ["weather"]})["selected_tools"]["add"]
        assert "weather_forecast" in picked
        assert usage.forget(["count_rows"]) == 1
    assert _rows(pg_url) == [("weather_forecast", "a")]

    with PostgresStore.from_conn_string(pg_url) as store:
        assert [r["tool"] for r in ToolUsage(store=store).export()] == ["weather_forecast"]
        ToolUsage(store=store).forget()
    assert _rows(pg_url) == []


def test_usage_flood_bound_holds_in_postgres(pg_url: str) -> None:
    with PostgresStore.from_conn_string(pg_url) as store:
        store.setup()
        usage = ToolUsage(store=store, max_queries_per_tool=20, max_queries_per_thread=3)
        for i in range(5):
            usage.record(f"people ask about topic {i}", ["send_email"], thread_id=f"t{i}")
        for i in range(60):
            usage.record(f"spam spam {i}", ["send_email"], thread_id="flood")
    rows = _rows(pg_url)
    assert sum(thread == "flood" for _, thread in rows) == 3  # evicted rows are deleted
    assert sum(thread != "flood" for _, thread in rows) == 5  # nobody else was pushed out
    with PostgresStore.from_conn_string(pg_url) as store:
        queries = [r["query"] for r in ToolUsage(store=store).export() if r["thread"] == "flood"]
    assert queries == ["spam spam 57", "spam spam 58", "spam spam 59"]


def test_usage_records_through_async_postgres_store(pg_url: str) -> None:
    async def record_then_reload() -> list[str]:
        async with AsyncPostgresStore.from_conn_string(pg_url) as store:
            await store.setup()
            await ToolUsage(store=store).arecord("count the orders", ["count_rows"])
        async with AsyncPostgresStore.from_conn_string(pg_url) as store:
            usage = ToolUsage(store=store)
            await usage.aattach()
            return [r.tool for r in usage.history.records()]

    assert asyncio.run(record_then_reload()) == ["count_rows"]
    assert _rows(pg_url) == [("count_rows", None)]
