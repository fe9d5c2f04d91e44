"""ToolUsage: workers sharing one store, caught at the worst moment of each other's work.

Each test runs two workers (two ``ToolUsage`` on one real store: ``InMemoryStore``,
``SqliteStore``, ``PostgresStore``) in two threads. The store is real; the only thing added
is a pause: the next call of one of its methods stops (after a search has read, before a
batch writes) until the test has let the other worker do its part, so the race happens
every time instead of once in a while.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore
from langgraph.store.sqlite import SqliteStore
from psycopg.rows import dict_row

from langgraph_toolbudget import ToolUsage
from langgraph_toolbudget.nodes.usage import PAGE

STORES = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.slow)]


class Pausing:
    """A store whose next search (once it has read) or next batch of writes (before it
    writes) stops until :meth:`go`: the moment another worker acts in."""

    _armed: str | None = None

    def pause(self, method: str) -> None:
        """Stop the next ``"search"`` or ``"write"`` of any thread."""
        self.reached, self.resume = threading.Event(), threading.Event()
        self._armed = method

    def go(self) -> None:
        self.resume.set()

    def _stop(self, method: str) -> None:
        if self._armed == method:
            self._armed = None
            self.reached.set()
            assert self.resume.wait(30), "the test never let the paused store call go on"

    def search(self, *args: Any, **kwargs: Any) -> Any:
        found = super().search(*args, **kwargs)  # type: ignore[misc]
        self._stop("search")
        return found

    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        if any(isinstance(op, PutOp) for op in ops):
            self._stop("write")
        return super().batch(ops)  # type: ignore[misc]

    # The async methods stop the event loop's thread: the other worker runs in the test's.
    async def asearch(self, *args: Any, **kwargs: Any) -> Any:
        found = await super().asearch(*args, **kwargs)  # type: ignore[misc]
        self._stop("search")
        return found

    async def abatch(self, ops: Any) -> Any:
        ops = list(ops)
        if any(isinstance(op, PutOp) for op in ops):
            self._stop("write")
        return await super().abatch(ops)  # type: ignore[misc]


class PausingMemory(Pausing, InMemoryStore):
    pass


class PausingSqlite(Pausing, SqliteStore):
    pass


class PausingPostgres(Pausing, PostgresStore):
    pass


@pytest.fixture
def make_store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Callable[[], Any]]:
    """A factory of the parametrized kind of store (``request.param``), all on one database."""
    kind = request.param
    closing: list[Any] = []
    memory = PausingMemory()  # one process's store: every worker of the test shares it

    def make() -> Any:
        if kind == "memory":
            return memory
        if kind == "sqlite":
            conn = sqlite3.connect(
                str(tmp_path / "usage.db"), check_same_thread=False, isolation_level=None
            )
            closing.append(conn)
            store: BaseStore = PausingSqlite(conn)
        else:
            url = request.getfixturevalue("pg_url")
            pg = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
            closing.append(pg)
            store = PausingPostgres(pg)
        store.setup()  # type: ignore[attr-defined]
        return store

    yield make
    for conn in closing:
        conn.close()


def in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def while_paused(
    store: Pausing, method: str, work: Callable[[], object], meanwhile: Callable[[], object]
) -> None:
    """Run ``work`` in a thread until its store's next ``method`` stops, run ``meanwhile``
    (another worker, in this thread), then let ``work`` finish."""
    store.pause(method)
    thread, errors = in_thread(work)
    assert store.reached.wait(30), f"the work made no {method}"
    try:
        meanwhile()
    finally:
        store.go()
        thread.join(30)
    assert errors == []


def stored(store: BaseStore) -> dict[str, float]:
    """query -> ts of every usage row in the store, as a third worker reads it."""
    return {r["query"]: r["ts"] for r in ToolUsage(store=store).export()}


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("make_store", STORES, indirect=True)
def test_a_refresh_deletes_no_row_another_worker_recorded_again_while_it_read(make_store, api):
    a = ToolUsage(store=make_store(), max_queries_per_tool=2)
    b = ToolUsage(store=make_store(), max_queries_per_tool=2)
    a.record("is it going to rain in Oslo", ["weather_forecast"])
    b.attach()
    a.record("is it going to rain in Lima", ["weather_forecast"])
    b.record("is it going to rain in Rome", ["weather_forecast"])  # one over the bound
    assert len(stored(a.store)) == 3

    # a's refresh reads the three and drops the oldest, Oslo; b records Oslo again meanwhile
    def b_records_oslo_again() -> None:
        b.record("is it going to rain in Oslo", ["weather_forecast"])

    refresh = a.refresh if api == "sync" else lambda: asyncio.run(a.arefresh())
    while_paused(a.store, "search", refresh, b_records_oslo_again)
    assert "is it going to rain in Oslo" in stored(a.store)  # the newest record is kept


@pytest.mark.parametrize("make_store", STORES, indirect=True)
def test_forget_deletes_every_row_of_its_tools_while_another_worker_deletes_rows(make_store):
    room = {"max_queries_per_tool": 5 * PAGE, "max_records": 10 * PAGE}
    rows = [
        *({"tool": "count_rows", "query": f"tally the orders of shop {i}"} for i in range(PAGE)),
        *({"tool": "weather_forecast", "query": f"rain in town {i}"} for i in range(3 * PAGE // 2)),
        *({"tool": "count_rows", "query": f"tally the refunds of shop {i}"} for i in range(PAGE)),
    ]
    ToolUsage(store=make_store(), **room).import_(
        [{**row, "ts": 1.0 + i} for i, row in enumerate(rows)]
    )
    a = ToolUsage(store=make_store(), **room)
    b = ToolUsage(store=make_store(), **room)
    a.attach()
    b.attach()

    # a's forget has read its first page when b's forget takes a thousand rows out before it
    def b_forgets_count_rows() -> None:
        b.forget(["count_rows"])

    while_paused(a.store, "search", lambda: a.forget(["weather_forecast"]), b_forgets_count_rows)
    assert stored(a.store) == {}


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("make_store", STORES, indirect=True)
def test_a_forget_while_a_run_writes_its_record_leaves_no_row_to_come_back(make_store, api):
    usage = ToolUsage(store=make_store())
    config = {"configurable": {"thread_id": "t1"}}
    usage.attach(config)

    def run_records() -> None:
        query, names = "is it going to rain in Oslo", ["weather_forecast"]
        if api == "sync":
            usage.record_run(query, names, config)
        else:
            asyncio.run(usage.arecord_run(query, names, config))

    # the run has added its record in memory, not yet in the store, when the forget comes
    while_paused(usage.store, "write", run_records, lambda: usage.forget(["weather_forecast"]))
    assert stored(usage.store) == {}
    usage.refresh()
    assert len(usage) == 0  # it does not come back


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("make_store", STORES, indirect=True)
def test_a_record_made_after_a_forget_stays_though_an_earlier_write_of_it_ends_later(
    make_store, api
):
    usage = ToolUsage(store=make_store())
    first = {"configurable": {"thread_id": "t1"}}
    second = {"configurable": {"thread_id": "t2"}}
    usage.attach(first)
    query, names = "is it going to rain in Oslo", ["weather_forecast"]

    def record(config: dict[str, Any]) -> None:
        if api == "sync":
            usage.record_run(query, names, config)
        else:
            asyncio.run(usage.arecord_run(query, names, config))

    def forget_then_record_again() -> None:
        usage.forget(["weather_forecast"])
        record(second)  # the same message: the same row as the paused write's

    # the first run's record is in memory, not yet in the store, when the tool is forgotten
    # and recorded again; the first run's write (of the older record) ends last
    while_paused(usage.store, "write", lambda: record(first), forget_then_record_again)
    rows = ToolUsage(store=usage.store).export()
    assert [(r["query"], r["thread"]) for r in rows] == [(query, "t2")]  # the newer record
    usage.refresh()
    assert len(usage) == 1


@pytest.mark.parametrize("make_store", STORES, indirect=True)
def test_an_import_keeps_what_it_adds_after_a_forget_that_came_while_it_ran(make_store):
    usage = ToolUsage(store=make_store())
    usage.attach()
    rows = [
        {"tool": "weather_forecast", "query": "is it going to rain in Oslo"},
        {"tool": "weather_forecast", "query": "is it going to rain in Lima", "scope": "default"},
    ]

    # the shared row is added in memory; the forget comes while the import loads the scope
    while_paused(
        usage.store,
        "search",
        lambda: usage.import_(rows),
        lambda: usage.forget(["weather_forecast"]),
    )
    assert list(stored(usage.store)) == ["is it going to rain in Lima"]  # added after it
    usage.refresh()
    assert len(usage) == 1
