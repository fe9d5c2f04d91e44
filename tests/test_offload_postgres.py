"""Offloading into a real PostgreSQL: ``PostgresStore`` (sync) and ``AsyncPostgresStore``.

A fresh database on the session's own PostgreSQL server (``pg_url``, started by
``tests/pg.py``; without PostgreSQL server binaries the test fails and says what to install).
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph

from langgraph_toolbudget import BudgetConfig, ToolBudgetState, ToolCatalog, ToolExecutor
from langgraph_toolbudget.execution.output_store import NAMESPACE, app_key

BIG = json.dumps({"rows": [{"id": i, "name": f"row {i}"} for i in range(3000)]})


def big_rows() -> str:
    """Rows as JSON (large)."""
    return BIG


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


async def test_postgres_stores_offloaded_outputs_with_ttl_and_eviction(pg_url: str) -> None:
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

    config = BudgetConfig(offload_ttl_minutes=15, offload_thread_cap_chars=2 * len(BIG) + 1)
    thread = {"configurable": {"thread_id": "pg"}}
    with PostgresStore.from_conn_string(pg_url) as store:
        store.setup()
        app = _app(store, config)
        handles = [
            _tool_message(app.invoke(_state("big_rows", {}), thread)).artifact["offloaded"][
                "handle"
            ]
            for _ in range(3)
        ]
        ns = (*NAMESPACE, "tools", app_key(["big_rows"]), "thread", "pg")
        assert store.get(ns, handles[0]) is None  # evicted at the cap, oldest first
        item = store.get(ns, handles[2])
        assert item is not None and item.value["text"] == BIG
        read = _tool_message(
            await app.ainvoke(
                _state("read_large_output", {"handle": handles[2], "length": 20}), thread
            )
        )  # a sync store under ainvoke
        assert read.status == "success" and read.content.endswith(BIG[:20])
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT ttl_minutes, expires_at > NOW() FROM store WHERE key = %s", (handles[2],)
        ).fetchone()
    assert row == (15, True)

    async with AsyncPostgresStore.from_conn_string(pg_url) as astore:
        app = _app(astore, config)
        query = {"handle": handles[2], "jq_expression": ".rows | length"}
        answer = _tool_message(await app.ainvoke(_state("query_large_output", query), thread))
        assert answer.content == "3000"
        other = {"configurable": {"thread_id": "someone-else"}}
        refused = _tool_message(await app.ainvoke(_state("query_large_output", query), other))
        assert refused.status == "error" and "another conversation" in refused.content


def binary_dump() -> str:
    """A binary file read as text (a NUL, a lone surrogate)."""
    return "head\x00er \udcff\n" + BIG


async def test_postgres_keeps_an_output_holding_a_nul_or_a_lone_surrogate(pg_url: str) -> None:
    # PostgresStore refuses both in a text: the run ended with the store's error after the
    # tool had run. Each is stored as U+FFFD and the turn goes on.
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

    catalog = ToolCatalog.from_tools(
        [binary_dump], tool_metadata={"binary_dump": {"include": "always"}}
    )
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog))
    graph.add_edge(START, "tools")
    ns = (*NAMESPACE, "tools", app_key(["binary_dump"]), "thread", "bin")
    thread = {"configurable": {"thread_id": "bin"}}
    stored = "head\ufffder \ufffd\n" + BIG
    with PostgresStore.from_conn_string(pg_url) as store:
        store.setup()
        stub = _tool_message(graph.compile(store=store).invoke(_state("binary_dump", {}), thread))
        item = store.get(ns, stub.artifact["offloaded"]["handle"])
        assert item is not None and item.value["text"] == stored
    async with AsyncPostgresStore.from_conn_string(pg_url) as astore:
        app = graph.compile(store=astore)
        stub = _tool_message(await app.ainvoke(_state("binary_dump", {}), thread))
        item = await astore.aget(ns, stub.artifact["offloaded"]["handle"])
        assert item is not None and item.value["text"] == stored
