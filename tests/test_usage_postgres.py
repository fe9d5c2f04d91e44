"""ToolUsage in a real PostgreSQL (``PostgresStore`` and ``AsyncPostgresStore``).

A fresh database per test on the session's own server (``pg_url``, ``tests/pg.py``).
Checked: what one store instance records, a second instance (its own connection,
as another worker or a restart would have) loads and ranks with; ``forget`` deletes
the rows in the database; the per-thread flood bound holds in the database too; a message
holding a NUL is recorded, a store whose connection is lost ends no turn, and a full
history (17,000 rows) imports.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

from langgraph_toolbudget import (
    SelectTools,
    ToolCatalog,
    ToolUsage,
    create_toolbudget_agent,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.testing import ScriptedChatModel

NAMESPACE = ("toolbudget", "usage")
CONFIG = {"configurable": {"thread_id": "t1"}}


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


def _pay_rent() -> tuple[ToolCatalog, ScriptedChatModel, list[int]]:
    """A catalog of one tool that moves money (it must never run twice), and a model that
    calls it once, then answers."""
    runs: list[int] = []

    @tool
    def transfer_money(amount: int) -> str:
        """Transfer money to the landlord (pay the rent)."""
        runs.append(amount)
        return f"sent {amount}"

    catalog = ToolCatalog.from_tools([transfer_money], categories={"bank": ["transfer_money"]})
    call = {"name": "transfer_money", "args": {"amount": 100}, "id": "c1", "type": "tool_call"}
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[call]), "done"], cycle=False)
    return catalog, model, runs


def test_a_message_holding_a_nul_is_recorded_and_its_tool_runs_once(pg_url: str) -> None:
    # PostgresSaver keeps the message; PostgresStore's jsonb refused it in the usage record,
    # written after the tool ran: every attempt of the thread raised and paid the rent again.
    catalog, model, runs = _pay_rent()
    with (
        PostgresStore.from_conn_string(pg_url) as store,
        PostgresSaver.from_conn_string(pg_url) as saver,
    ):
        store.setup()
        saver.setup()
        graph = create_toolbudget_agent(model, catalog, usage=ToolUsage())
        app = graph.compile(checkpointer=saver, store=store)
        inputs = {"messages": [("user", "pay the rent to the landlord\x00")]}
        out = app.invoke(inputs, {"configurable": {"thread_id": "t1", "user_id": "ada\x00"}})
    assert (out["messages"][-1].content, runs) == ("done", [100])
    assert _rows(pg_url) == [("transfer_money", "t1")]
    with PostgresStore.from_conn_string(pg_url) as store:
        [row] = ToolUsage(store=store).export()
    assert row["query"] == "pay the rent to the landlord\ufffd"
    assert row["user"].startswith("h-")  # an id holding a NUL is kept as its hash


def test_a_lost_store_connection_ends_no_turn_and_runs_no_tool_twice(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The store's database goes away (a failover, a restart) while the checkpointer's stays.
    # Was: the record raised after the tool ran; the turn failed, its resume paid again.
    catalog, model, runs = _pay_rent()
    with PostgresStore.from_conn_string(pg_url) as store:
        store.setup()
        usage = ToolUsage(store=store)
        app = create_toolbudget_agent(model, catalog, usage=usage).compile(
            checkpointer=InMemorySaver(), store=store
        )
        usage.attach({"configurable": {}})  # the history, loaded while the store is up
        store.conn.close()
        out = app.invoke({"messages": [("user", "pay the rent to the landlord")]}, CONFIG)
    assert (out["messages"][-1].content, runs) == ("done", [100])
    assert "usage history: recording transfer_money failed" in caplog.text
    assert len(usage) == 1  # kept in this worker's memory, not in the store
    assert _rows(pg_url) == []


def test_a_full_history_imports_into_postgres(pg_url: str) -> None:
    # One history keeps up to 20,000 rows. Was: one INSERT of 4 parameters a row, past
    # PostgreSQL's 65,535: 17,000 rows in memory, none stored, psycopg's error.
    rows = [
        {"tool": f"tool_{i % 400}", "query": f"question {i} about topic {i % 97}", "ts": i + 1.0}
        for i in range(17_000)
    ]
    with PostgresStore.from_conn_string(pg_url) as store:
        store.setup()
        usage = ToolUsage(store=store)
        assert usage.import_(rows) == 17_000
        assert len(usage) == 17_000
    assert len(_rows(pg_url)) == 17_000
