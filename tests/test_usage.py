"""ToolUsage: learned selection. Recording (by hand and through a scripted agent run), the
bounds, forget/export/import, persistence in real LangGraph stores, and the ranking with it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.store.base import PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from langgraph_toolbudget import (
    ChooseTools,
    ClassifyIntent,
    SelectTools,
    ToolAgent,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    ToolSearch,
    ToolUsage,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.usage import UsageIndex, UsageRecord, fuse_usage
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.nodes.usage import MAX_SCOPES_HELD, OPT_OUT_KEY, records_usage
from langgraph_toolbudget.testing import ScriptedChatModel

QUERIES = [
    "What's the weather in Tokyo?",
    "open an issue about the login crash in acme/app",
    "how many orders are there",
    "Wie ist das Wetter in Tokio?",
    "tell the team in slack that the build is green",
    "schedule a meeting with Ada on Friday",
]


@pytest.fixture
def catalog():
    return build_example_catalog()


def sqlite_store(path) -> SqliteStore:
    store = SqliteStore(sqlite3.connect(str(path), check_same_thread=False, isolation_level=None))
    store.setup()
    return store


# --- the history and its bounds ------------------------------------------------------------


def test_usage_record_ranks_the_recorded_tool_for_a_paraphrase():
    history = UsageIndex()
    history.add("is it going to rain tomorrow?", ["weather_forecast"])
    history.add("post the release notes to the team", ["send_message"])
    assert [n for n, _ in history.rank("will it rain on Sunday")] == ["weather_forecast"]
    assert history.rank("something unrelated entirely") == []


def test_usage_credits_each_tool_of_a_multi_task_message_with_the_whole_message():
    history = UsageIndex()
    message = "Find cheap flights to Rome for May. Then book a hotel near the station"
    history.add(message, ["search_flights", "book_hotel"])
    # Both tools served the message: a request for any part of it finds both.
    assert {n for n, _ in history.rank("a hotel close to the station")} == {
        "search_flights",
        "book_hotel",
    }
    assert {n for n, _ in history.rank("cheap tickets to Rome")} == {"search_flights", "book_hotel"}
    assert history.rank("rent a bike") == []
    history.forget(["book_hotel"])  # removal takes back exactly the terms the record added
    assert [n for n, _ in history.rank("a hotel close to the station")] == ["search_flights"]
    history.forget(["search_flights"])
    assert history.rank("a hotel close to the station") == []


def test_usage_deduplicates_and_keeps_recent_queries_per_tool():
    usage = ToolUsage(max_queries_per_tool=3)
    for i in range(5):
        usage.record(f"query number {i} about invoices", ["read_email"])
    usage.record("  query   number 4 about invoices ", ["read_email"])  # same after normalising
    queries = [r["query"] for r in usage.export()]
    assert queries == [f"query number {i} about invoices" for i in (2, 3, 4)]


@pytest.mark.parametrize("reply", ["ok", "Okay!", "yes", "yeah, thanks", "?"])
def test_a_reply_without_a_search_term_is_not_recorded_nor_moves_a_later_one(catalog, reply):
    """ "ok" was a search term: recorded with the tools its turn ran, it moved the next "ok" of
    any thread (a weather one) to those tools (Slack's)."""
    usage = ToolUsage()
    usage.record(reply, ["send_message"])
    assert usage.export() == []
    graph = StateGraph(ToolBudgetState)
    graph.add_node("choose", ChooseTools(catalog, usage=usage))
    graph.add_edge(START, "choose")
    app = graph.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    before = app.invoke({"messages": [HumanMessage("weather forecast for Paris")]}, thread)
    after = app.invoke(
        {"messages": [AIMessage("Sunny. Anything else?"), HumanMessage(reply)]}, thread
    )
    assert before["categories"] == ["weather"]
    assert after["selected_tools"] == before["selected_tools"]  # the turn keeps its tools


def test_usage_flood_from_one_thread_is_bounded_by_its_share():
    usage = ToolUsage(max_queries_per_tool=50, max_queries_per_thread=5)
    for i in range(10):
        usage.record(f"other people ask about topic {i}", ["send_email"], thread_id=f"t{i}")
    for i in range(500):
        usage.record(f"spam spam {i}", ["send_email"], thread_id="flood")
    rows = usage.export()
    assert sum(r["thread"] == "flood" for r in rows) == 5
    assert sum(r["thread"] != "flood" for r in rows) == 10  # nobody else was pushed out
    assert [r["query"] for r in rows if r["thread"] == "flood"][-1] == "spam spam 499"


def test_usage_forget_one_tool_or_all(catalog):
    store = InMemoryStore()
    usage = ToolUsage(store=store)
    usage.record("weather in Oslo please", ["get_weather", "air_quality"])
    assert usage.forget(["air_quality"]) == 1
    assert {r["tool"] for r in ToolUsage(store=store).export()} == {"get_weather"}
    usage.forget()
    assert len(usage) == 0
    assert ToolUsage(store=store).export() == []
    assert store.search(("toolbudget", "usage")) == []


def test_a_forget_in_one_worker_is_not_undone_by_another_workers_refresh(catalog):
    store = InMemoryStore()
    a, b = ToolUsage(store=store), ToolUsage(store=store)  # two workers, one store
    a.record("weather in Oslo please", ["get_weather", "air_quality"])
    b.refresh()
    assert len(b) == 2
    a.forget(["air_quality"])
    b.refresh()  # b still held the record in memory: it must not write it back
    assert {r["tool"] for r in ToolUsage(store=store).export()} == {"get_weather"}
    assert len(b) == 1
    a.refresh()
    assert len(a) == 1


def test_refresh_with_the_graphs_store_reloads_from_it_and_export_keeps_the_history(catalog):
    store = InMemoryStore()
    usage = ToolUsage()  # no store of its own: the graph's, known after the first run
    usage.refresh()  # nothing to reload yet: a no-op, not an error
    model = ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[_call("get_weather", {"city": "Paris"}, 1)]),
            AIMessage("Sunny."),
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(model, catalog, usage=usage).compile(store=store)
    app.invoke({"messages": [HumanMessage("What is the weather in Paris today?")]})
    assert len(usage) == 1  # observed, in the graph's scope
    ToolUsage(store=store).record("tally the purchases", ["count_rows"])  # another worker
    usage.refresh()
    assert len(usage) == 2  # the shared record of the other worker, and its own scope's
    fused = usage.scores(catalog, "tally the purchases")
    assert fused is not None
    assert catalog.index.names[int(np.argmax(fused))] == "count_rows"
    assert {r["tool"] for r in usage.export()} == {"get_weather", "count_rows"}
    assert len(usage) == 2  # export reads the store, and leaves the history in memory whole


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_arefresh_reloads_what_other_workers_recorded_and_forgot(tmp_path, kind):
    # InMemoryStore has async methods; SqliteStore is sync only, so its calls run in a thread
    store = InMemoryStore() if kind == "memory" else sqlite_store(tmp_path / "u.db")
    a, b = ToolUsage(store=store), ToolUsage(store=store)  # two workers, one store
    a.record("weather in Oslo please", ["get_weather", "air_quality"])
    asyncio.run(b.arefresh())
    assert len(b) == 2
    a.forget(["air_quality"])
    asyncio.run(b.arefresh())  # b held the record in memory: it must not write it back
    assert len(b) == 1
    assert {r["tool"] for r in ToolUsage(store=store).export()} == {"get_weather"}


def test_a_run_ranking_during_a_refresh_never_sees_an_empty_history(catalog):
    store = InMemoryStore()
    usage = ToolUsage(store=store)
    usage.record("tally the purchases we have", ["count_rows"])
    errors: list[BaseException] = []

    def refresh_often() -> None:
        try:
            for _ in range(300):
                usage.refresh()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    worker = threading.Thread(target=refresh_often)
    worker.start()
    empty = 0
    while worker.is_alive():
        empty += usage.scores(catalog, "tally the purchases") is None
    worker.join()
    assert errors == []
    assert empty == 0  # the new history is built aside, then swapped in


class HookedStore(InMemoryStore):
    """A real in-memory store that runs ``hook`` once, right after its next search: another
    thread's change lands exactly while a refresh reads the store."""

    hook: Callable[[], object] | None = None

    def search(self, *args: Any, **kwargs: Any) -> Any:
        found = super().search(*args, **kwargs)
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return found


@pytest.mark.parametrize("change", ["record", "forget"])
def test_what_a_worker_records_or_forgets_during_its_refresh_holds_in_memory(catalog, change):
    store = HookedStore()
    usage = ToolUsage(store=store)
    usage.record("is it going to rain tomorrow", ["weather_forecast"])
    if change == "record":
        store.hook = lambda: usage.record("how many orders are there", ["count_rows"])
        expected = {"weather_forecast", "count_rows"}
    else:
        store.hook = lambda: usage.forget(["weather_forecast"])
        expected = set()
    usage.refresh()
    assert {r.tool for r in usage.history.records()} == expected
    assert {r["tool"] for r in ToolUsage(store=store).export()} == expected


class SlowStore(InMemoryStore):
    """A real in-memory store whose reads of one namespace take a second, as a remote store's
    may."""

    slow: tuple[str, ...] = ()

    def search(self, namespace_prefix: tuple[str, ...], /, **kwargs: Any) -> Any:
        if namespace_prefix == self.slow:
            time.sleep(1.0)
        return super().search(namespace_prefix, **kwargs)


@pytest.mark.slow  # a store read of a second
def test_a_run_ranks_while_another_scope_is_loaded_from_a_slow_store(catalog):
    store = SlowStore()
    usage = ToolUsage(store=store, scope="user")
    ada = {"configurable": {"langgraph_auth_user_id": "ada"}}
    usage.attach(ada)
    store.slow = usage._namespace("bob")
    loading = threading.Thread(target=usage.attach, args=({"configurable": {"user_id": "bob"}},))
    loading.start()
    time.sleep(0.2)
    start = time.monotonic()
    usage.scores(catalog, "will it rain", config=ada)
    took = time.monotonic() - start
    loading.join()
    assert took < 0.5, took  # was: waited for bob's load (1 s)


def test_one_bad_stored_row_is_skipped_not_fatal_to_every_run(catalog, caplog):
    store = InMemoryStore()
    store.put(("toolbudget", "usage", "shared"), "bad", {"tool": "x" * 500, "query": "rain"})
    store.put(("toolbudget", "usage", "shared"), "odd", {"tool": "weather_forecast", "ts": "?"})
    ToolUsage(store=store).record("is it going to rain tomorrow", ["weather_forecast"])
    node = SelectTools(catalog, max_tools=2, usage=ToolUsage(store=store))
    state = {"messages": [HumanMessage("will it rain on Sunday?")], "categories": ["weather"]}
    assert "weather_forecast" in node.invoke(state)["selected_tools"]["add"]
    assert "skipped 2 stored usage rows" in caplog.text


@pytest.mark.parametrize("name", ["", "x" * 129, "line\nbreak", None])
def test_a_record_whose_tool_is_no_tool_name_cannot_be_made(name):
    # One check, where a record is made: add, a stored row and an imported one all make one.
    with pytest.raises(ValueError, match="not tool names"):
        UsageRecord(name, "is it going to rain")  # type: ignore[arg-type]
    assert UsageRecord("weather_forecast", "rain").tool == "weather_forecast"


def test_record_takes_any_list_of_names_and_forget_refuses_a_bare_string():
    usage = ToolUsage(store=InMemoryStore())
    usage.record("is it going to rain", (n for n in ["weather_forecast", "get_weather"]))
    assert len(usage) == 2  # was: the generator was used up by the check, nothing recorded
    with pytest.raises(TypeError, match="list of tool names"):
        usage.forget("weather_forecast")  # type: ignore[arg-type]  # was: 0 forgotten, quietly
    assert len(usage) == 2


def test_the_scopes_held_in_memory_stay_within_max_records_as_they_load():
    store = InMemoryStore()
    writer = ToolUsage(store=store, scope="user", max_records=10, max_queries_per_thread=100)
    for user in ("ada", "bob", "cy"):
        config = {"configurable": {"langgraph_auth_user_id": user, "thread_id": "t"}}
        for i in range(10):
            writer.record_run(f"request {i} about the weather{i}", [f"tool_{i}"], config)
    reader = ToolUsage(store=store, scope="user", max_records=10)
    for user in ("ada", "bob", "cy"):
        reader.attach({"configurable": {"langgraph_auth_user_id": user}})
        assert len(reader) == 10  # was: 20 once a second scope loaded


def test_the_scopes_held_in_memory_are_bounded_however_many_users_come(catalog):
    # A client can send a new user_id with every request (a server without auth). Was: every
    # scope ever loaded stayed in memory (one history of ~2 KB each, recorded nothing or not),
    # and each new one summed the records of all held before it.
    store = InMemoryStore()
    usage = ToolUsage(store=store, scope="user")
    for thread in ("t1", "t2", "t3"):  # Ada's corroborated history
        config = {"configurable": {"thread_id": thread, "langgraph_auth_user_id": "ada"}}
        usage.record_run("do I need an umbrella this weekend", ["weather_forecast"], config)
    node = ClassifyIntent(catalog, usage=usage)
    state = {"messages": [HumanMessage("Do I need an umbrella in Lima on Saturday?")]}
    for i in range(MAX_SCOPES_HELD + 200):
        node.invoke(state, {"configurable": {"user_id": f"user-{i}"}})
    assert len(usage._scopes) == MAX_SCOPES_HELD  # was: 1,201
    assert not any(len(history) for history in usage._scopes.values())
    ada = {"configurable": {"langgraph_auth_user_id": "ada"}}
    assert "ada" not in usage._scopes  # the least recently used: out of memory, not the store
    assert node.invoke(state, ada)["categories"] == ["weather"]  # read again, and ranks
    assert len(usage) == 1 and len(usage._scopes) == MAX_SCOPES_HELD


def test_the_records_held_across_scopes_are_counted_as_they_change():
    # The scopes' records are counted as they change (not summed for each new scope): a
    # forget frees room, a record, an import and a refresh take it.
    store = InMemoryStore()
    usage = ToolUsage(store=store, scope="user", max_records=10, max_queries_per_thread=100)

    def user(name: str) -> dict[str, Any]:
        return {"configurable": {"langgraph_auth_user_id": name, "thread_id": "t"}}

    def counted() -> bool:
        return usage._held == sum(len(h) for h in usage._scopes.values())

    for i in range(6):
        usage.record_run(f"request {i} about the weather", ["weather_forecast"], user("ada"))
    assert usage.forget(["weather_forecast"]) == 6 and counted()
    for i in range(6):
        usage.record_run(f"request {i} about the orders", ["count_rows"], user("bob"))
    assert "ada" in usage._scopes and counted()  # 6 held: the forget freed Ada's room
    usage.import_([{"tool": "count_rows", "query": "the rows of cy", "scope": "cy"}])
    for i in range(5):
        usage.record_run(f"request {i} about the mail", ["send_email"], user("dee"))
    assert list(usage._scopes) == ["cy", "dee"] and counted()  # 12 > 10: Ada, then Bob left
    ToolUsage(store=store, scope="user").import_(
        [{"tool": "send_email", "query": f"mail {i}", "scope": "dee"} for i in range(3)]
    )
    usage.refresh()
    assert len(usage) == 9 and counted()


def _read_counting(kind: str, tmp_path: Any) -> Any:
    """A real store of ``kind`` that counts the rows its searches return (``.read``)."""
    base: Any = InMemoryStore if kind == "memory" else SqliteStore

    class ReadCounting(base):  # type: ignore[misc, valid-type]
        read = 0

        def batch(self, ops: Any) -> list[Any]:
            ops = list(ops)
            results = super().batch(ops)
            found = zip(ops, results, strict=True)
            self.read += sum(len(r) for op, r in found if isinstance(op, SearchOp))
            return results

        async def abatch(self, ops: Any) -> list[Any]:
            return await asyncio.to_thread(self.batch, ops)

    if kind == "memory":
        return ReadCounting()
    path = str(tmp_path / "usage.db")
    store = ReadCounting(sqlite3.connect(path, check_same_thread=False, isolation_level=None))
    store.setup()
    return store


async def _attach(usage: ToolUsage, api: str, config: Any) -> None:
    if api == "aattach":
        await usage.aattach(config)
    else:
        await asyncio.to_thread(usage.attach, config)


NEWCOMER = {"configurable": {"user_id": "newcomer", "thread_id": "x"}}


@pytest.mark.parametrize("api", ["attach", "aattach"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_newcomers_first_load_reads_no_other_scopes_rows(kind, api, tmp_path):
    # The first load looked for rows stored before scopes existed by reading every row under
    # ("toolbudget", "usage"): every user's, page by page (about 19 s at 60,000 rows).
    store = _read_counting(kind, tmp_path)
    store.batch(
        PutOp(("toolbudget", "usage", "scope", f"u{i // 10}"), f"k{i}",
              {"tool": "get_weather", "query": f"umbrella weather {i}", "ts": float(i)},
              index=False)
        for i in range(3000)
    )  # fmt: skip
    store.read = 0
    usage = ToolUsage(store=store, scope="user")
    await _attach(usage, api, NEWCOMER)
    assert store.read == 0 and len(usage) == 0


@pytest.mark.parametrize("api", ["attach", "aattach"])
async def test_rows_stored_before_scopes_are_found_and_moved_once(api, tmp_path):
    store = _read_counting("sqlite", tmp_path)
    store.put(("toolbudget", "usage", "scope", "ada"), "k", {"tool": "get_weather", "query": "sun"})
    store.put(("toolbudget", "usage"), "old", {"tool": "get_weather", "query": "a brolly?"})
    usage = ToolUsage(store=store, scope="user")
    await _attach(usage, api, NEWCOMER)
    assert [r.query for r in usage.history.records()] == ["a brolly?"]
    assert [i.namespace for i in store.search(("toolbudget", "usage", "shared"))] == [
        ("toolbudget", "usage", "shared")
    ] * 2  # the row, and the item that says it moved
    store.read = 0
    await _attach(ToolUsage(store=store, scope="user"), api, NEWCOMER)
    assert store.read == 2  # the shared ones: nothing is left to move, no scope is read


@pytest.mark.parametrize("api", ["attach", "aattach"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_once_the_rows_before_scopes_moved_no_first_load_reads_other_scopes(
    kind, api, tmp_path
):
    # InMemoryStore (and langgraph dev's store) keeps listing a namespace whose rows were
    # deleted: every first load after the move read every scope's rows again.
    store = _read_counting(kind, tmp_path)
    store.batch(
        PutOp(("toolbudget", "usage", "scope", f"u{i // 10}"), f"k{i}",
              {"tool": "get_weather", "query": f"umbrella weather {i}", "ts": float(i)},
              index=False)
        for i in range(300)
    )  # fmt: skip
    store.put(("toolbudget", "usage"), "old", {"tool": "get_weather", "query": "a brolly?"})
    await _attach(ToolUsage(store=store, scope="user"), api, NEWCOMER)  # moves it
    store.read = 0
    later = ToolUsage(store=store, scope="user")
    await _attach(later, api, {"configurable": {"user_id": "other", "thread_id": "y"}})
    assert store.read == 2  # the shared ones only: the moved row, and the item saying so
    rows = later.export()  # the marker is no row
    assert len(rows) == 301 and [r["query"] for r in rows if r["scope"] is None] == ["a brolly?"]
    later.forget()  # every record, not the marker
    store.read = 0
    await _attach(ToolUsage(store=store, scope="user"), api, NEWCOMER)
    assert store.read == 1  # the item saying the rows moved
    # a row a 0.1.0 worker writes after the move waits until that item is deleted
    store.put(("toolbudget", "usage"), "late", {"tool": "get_weather", "query": "rain?"})
    store.delete(("toolbudget", "usage", "shared"), "legacy_rows_moved")
    moved = ToolUsage(store=store, scope="user")
    await _attach(moved, api, NEWCOMER)
    assert [r.query for r in moved.history.records()] == ["rain?"]


def test_a_usage_shared_by_graphs_of_two_stores_copies_no_record_between_them(catalog):
    first, second = InMemoryStore(), InMemoryStore()
    usage = ToolUsage()
    weather = [
        AIMessage("", tool_calls=[_call("get_weather", {"city": "Paris"}, 1)]),
        AIMessage("Sunny."),
    ]
    for store, script in ((first, weather), (second, [AIMessage("Hello.")])):
        model = ScriptedChatModel(responses=script, cycle=False)
        graph = create_toolbudget_agent(model, catalog, usage=usage)
        graph.compile(store=store).invoke({"messages": [HumanMessage("Weather in Paris?")]})

    def tools(store: InMemoryStore) -> list[str]:
        return [i.value["tool"] for i in store.search(("toolbudget", "usage"))]

    assert tools(first) == ["get_weather"]
    assert tools(second) == []  # was: the first store's record, merged into the second
    assert len(usage) == 0  # the second store's history


def test_usage_export_import_moves_history_between_stores():
    usage = ToolUsage(store=InMemoryStore())
    usage.record("is it going to rain", ["weather_forecast"], thread_id="a")
    usage.record("count the orders", ["count_rows"])
    rows = json.loads(json.dumps(usage.export()))
    other_store = InMemoryStore()
    assert ToolUsage(store=other_store).import_(rows) == 2
    again = ToolUsage(store=other_store).export()
    assert [(r["tool"], r["query"], r["thread"]) for r in again] == [
        (r["tool"], r["query"], r["thread"]) for r in rows
    ]


def test_usage_bad_input_names_the_fix():
    usage = ToolUsage()
    with pytest.raises(TypeError, match="list of tool names"):
        usage.record("hello there", "get_weather")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="string"):
        usage.record(None, ["get_weather"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="row 1"):
        usage.import_([{"tool": "a", "query": "b"}, {"tool": "a"}])
    assert len(usage) == 0  # nothing imported from a bad batch
    with pytest.raises(TypeError, match="BaseStore"):
        ToolUsage(store={})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"weight": float("nan")},
            ValueError,
            r"ToolUsage: option weight must be a finite number >= 0, got nan",
        ),
        ({"weight": float("inf")}, ValueError, r"weight must be a finite number >= 0, got inf"),
        ({"weight": True}, TypeError, r"weight must be a finite number >= 0, got True \(bool\)"),
        ({"min_threads": 0}, ValueError, r"ToolUsage: option min_threads must be an integer >= 1"),
    ],
)
def test_usage_weight_and_min_threads_are_checked_by_their_own_names(kwargs, error, message):
    """Was: a NaN or infinite weight accepted (every usage score NaN), True taken for 1.0,
    and a bad min_threads named ``min_sources``, a keyword ToolUsage does not have. A bool
    weight is a wrong type: a TypeError since review 50c (a ValueError before)."""
    with pytest.raises(error, match=message):
        ToolUsage(**kwargs)


def test_usage_never_stores_arguments_or_results():
    store = InMemoryStore()
    ToolUsage(store=store).record("weather in Oslo", ["get_weather"], thread_id="t")
    (item,) = store.search(("toolbudget", "usage"))
    assert set(item.value) == {"tool", "query", "thread", "ts", "trusted"}


# --- persistence ---------------------------------------------------------------------------


@pytest.mark.slow  # a process restart or a deadline of seconds
def test_usage_persists_in_sqlite_store_across_processes(tmp_path):
    path = tmp_path / "usage.db"
    code = textwrap.dedent(
        f"""
        import sqlite3
        from langgraph.store.sqlite import SqliteStore
        from langgraph_toolbudget import ToolUsage
        store = SqliteStore(sqlite3.connect({str(path)!r}, isolation_level=None))
        store.setup()
        ToolUsage(store=store).record("is it going to rain in Oslo", ["weather_forecast"])
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    usage = ToolUsage(store=sqlite_store(path))
    assert [(r["tool"], r["query"]) for r in usage.export()] == [
        ("weather_forecast", "is it going to rain in Oslo")
    ]
    catalog = build_example_catalog()
    node = SelectTools(catalog, usage=usage)
    state = {"messages": [HumanMessage("will it rain on Sunday?")], "categories": ["weather"]}
    assert "weather_forecast" in node.invoke(state)["selected_tools"]["add"]


def test_usage_async_records_through_a_sync_only_sqlite_store(tmp_path):
    store = sqlite_store(tmp_path / "u.db")
    usage = ToolUsage(store=store)
    asyncio.run(usage.arecord("count the orders", ["count_rows"]))
    assert [r["tool"] for r in ToolUsage(store=store).export()] == ["count_rows"]


async def test_aexport_aforget_aimport_work_with_the_graphs_async_store(tmp_path):
    catalog, _ = _counted_catalog()
    model = ScriptedChatModel(responses=_count_script(), cycle=False)
    usage = ToolUsage()  # the graph's store: an AsyncSqliteStore
    question = "how many orders are there?"
    async with (
        AsyncSqliteStore.from_conn_string(str(tmp_path / "a.db")) as store,
        AsyncSqliteStore.from_conn_string(str(tmp_path / "b.db")) as other_store,
    ):
        await store.setup()
        await other_store.setup()
        graph = create_toolbudget_agent(model, catalog, pinned=["count_rows"], usage=usage)
        await graph.compile(store=store).ainvoke({"messages": [HumanMessage(question)]})
        rows = await usage.aexport()
        assert [(r["tool"], r["query"], r["scope"]) for r in rows] == [
            ("count_rows", question, "default")
        ]
        copy = ToolUsage(store=other_store)
        assert await copy.aimport_(json.loads(json.dumps(rows))) == 1
        assert [(r["tool"], r["query"]) for r in await copy.aexport()] == [("count_rows", question)]
        assert len(await other_store.asearch(("toolbudget", "usage", "scope"))) == 1
        assert await usage.aforget(["count_rows"]) == 1
        assert await usage.aexport() == [] and len(usage) == 0
        assert await store.asearch(("toolbudget", "usage")) == []  # gone from the store too
        assert await copy.aforget() == 1
        assert await other_store.asearch(("toolbudget", "usage")) == []


@pytest.mark.parametrize(
    ("call", "amethod"),
    [
        (lambda u: u.export(), "aexport"),
        (lambda u: u.forget(["count_rows"]), "aforget"),
        (lambda u: u.import_([{"tool": "count_rows", "query": "count orders"}]), "aimport_"),
        (lambda u: u.record("count the orders", ["count_rows"]), "arecord"),
        (lambda u: u.refresh(), "arefresh"),
    ],
)
async def test_a_sync_call_in_an_async_stores_loop_names_the_async_method(tmp_path, call, amethod):
    async with AsyncSqliteStore.from_conn_string(str(tmp_path / "a.db")) as store:
        await store.setup()
        usage = ToolUsage(store=store)
        await usage.arecord("how many orders are there", ["count_rows"])
        before = await usage.aexport()
        with pytest.raises(asyncio.InvalidStateError, match=rf"await usage\.{amethod}\(") as error:
            call(usage)
        assert "ToolUsage." in str(error.value) and "AsyncSqliteStore" in str(error.value)
        assert (await usage.aexport(), len(usage)) == (before, 1)  # nothing changed
        await asyncio.to_thread(call, usage)  # off the store's loop the sync form works


async def test_a_sync_run_in_the_graphs_async_store_loop_names_that_store(tmp_path):
    # ToolUsage() records into the graph's store, which the error must name (not None's type)
    catalog, ran = _counted_catalog()
    async with AsyncSqliteStore.from_conn_string(str(tmp_path / "g.db")) as store:
        await store.setup()
        model = ScriptedChatModel(responses=_count_script(), cycle=False)
        graph = create_toolbudget_agent(model, catalog, pinned=["count_rows"], usage=ToolUsage())
        with pytest.raises(asyncio.InvalidStateError) as error:
            graph.compile(store=store).invoke({"messages": [HumanMessage("count the orders")]})
        message = str(error.value)
        assert "AsyncSqliteStore" in message and "NoneType" not in message
        assert "ainvoke" in message and ran == []


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_async_forms_agree_with_the_sync_ones(tmp_path, kind):
    # InMemoryStore has async methods; SqliteStore is sync only, so its calls run in a thread
    store = InMemoryStore() if kind == "memory" else sqlite_store(tmp_path / "u.db")
    rows = [
        {"tool": "count_rows", "query": "count the orders", "ts": 1.0},
        {"tool": "get_weather", "query": "weather in Oslo", "ts": 2.0, "scope": "helpdesk"},
        {"tool": "get_weather", "query": "rain in Lima", "ts": 3.0, "scope": None},
    ]
    sync, async_ = ToolUsage(store=InMemoryStore()), ToolUsage(store=store)
    assert sync.import_(rows) == await async_.aimport_(rows) == 3
    assert sync.export() == await async_.aexport()
    assert sync.forget(["get_weather"]) == await async_.aforget(["get_weather"]) == 2
    assert sync.export() == await async_.aexport() == await asyncio.to_thread(async_.export)
    with pytest.raises(ValueError, match="row 1"):
        await async_.aimport_([{"tool": "a", "query": "b"}, {"tool": "a"}])
    assert [r["tool"] for r in await async_.aexport()] == ["count_rows"]  # nothing imported


# --- ranking -------------------------------------------------------------------------------


def test_empty_history_gives_exactly_todays_results(catalog):
    usage = ToolUsage()
    for query in QUERIES:
        state = {"messages": [HumanMessage(query)]}
        plain = ClassifyIntent(catalog).invoke(state)
        learned = ClassifyIntent(catalog, usage=usage).invoke(state)
        assert learned == plain
        state = {**state, "categories": plain["categories"]}
        assert SelectTools(catalog, usage=usage).invoke(state) == SelectTools(catalog).invoke(state)
        assert ToolSearch(catalog, usage=usage).invoke(state) == ToolSearch(catalog).invoke(state)
        base = catalog.index.scores(query)
        assert fuse_usage(catalog.index, usage.history, query, base) is base


def test_recorded_paraphrase_moves_the_right_tool_into_the_visible_set(catalog):
    query = "Do I need an umbrella in Lima on Saturday?"
    state = {"messages": [HumanMessage(query)]}

    def visible(usage):
        cats = ClassifyIntent(catalog, usage=usage).invoke(state)["categories"]
        s = {**state, "categories": cats}
        out = SelectTools(catalog, max_tools=2, usage=usage).invoke(s)
        return cats, out.get("selected_tools", {}).get("add", [])

    before_cats, before = visible(None)
    assert "weather_forecast" not in before
    usage = ToolUsage()
    usage.record("do I need an umbrella this weekend", ["weather_forecast"])
    cats, after = visible(usage)
    assert cats[0] == "weather"
    assert "weather_forecast" in after


def test_recording_updates_the_history_without_rebuilding_the_catalog_index(catalog):
    usage = ToolUsage()
    usage.record("do I need an umbrella", ["weather_forecast"])
    index = catalog.index
    scores = usage.scores(catalog, "umbrella tomorrow")
    assert scores is not None
    history = usage.history
    arrays_before = dict(history._arrays)
    usage.record("post it to the team channel", ["send_message"])
    assert catalog.index is index  # the catalog's index is not rebuilt
    # Only the new message's terms lose their cached postings arrays.
    kept = [t for t in arrays_before if t in history._arrays]
    assert "umbrella" in kept
    after = usage.scores(catalog, "umbrella tomorrow")
    assert after is not None
    assert int(np.argmax(after)) == catalog.index.position("weather_forecast")


def test_no_match_falls_back_to_learned_tools_and_logs(catalog, caplog):
    usage = ToolUsage()
    usage.record("weather in Tokyo", ["get_weather"])
    usage.record("weather in Paris", ["get_weather"])
    usage.record("mail Ada", ["send_email"])
    state = {"messages": [HumanMessage("東京の天気は？")]}
    with caplog.at_level("INFO"):
        cats = ClassifyIntent(catalog, usage=usage).invoke(state)
        out = SelectTools(catalog, usage=usage).invoke({**state, **cats})
    assert cats["categories"] == []
    assert "no category matches" in caplog.text
    assert out["selected_tools"]["add"][-2:] == ["get_weather", "send_email"]


# --- recording while the agent runs --------------------------------------------------------


def _call(name, args, i):
    return {"name": name, "args": args, "id": f"c{i}", "type": "tool_call"}


def test_agent_run_records_executed_tools_not_refused_or_failed(catalog):
    store = InMemoryStore()
    usage = ToolUsage()  # no store of its own: the graph's
    model = ScriptedChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    _call("get_weather", {"city": "Paris"}, 1),
                    _call("delete_file", {"path": "/nope"}, 2),  # not visible: refused
                    _call("read_file", {"path": "/missing/file"}, 3),  # raises: failed
                ],
            ),
            AIMessage("Sunny."),
        ],
        cycle=False,
    )
    graph = create_toolbudget_agent(model, catalog, usage=usage, pinned=["read_file"])
    app = graph.compile(store=store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    out = app.invoke({"messages": [HumanMessage("What is the weather in Paris today?")]}, config)
    statuses = {m.name: m.status for m in out["messages"] if m.type == "tool"}
    assert statuses == {"get_weather": "success", "delete_file": "error", "read_file": "error"}
    rows = [(r["tool"], r["query"], r["thread"]) for r in usage.export()]
    assert rows == [("get_weather", "What is the weather in Paris today?", "t1")]
    stored = [i.value["tool"] for i in store.search(("toolbudget", "usage"))]
    assert stored == ["get_weather"]  # in the graph's store


def test_tool_loaded_by_meta_tool_then_called_is_recorded_and_opt_out_is_honoured(catalog):
    def script():
        return [
            AIMessage("", tool_calls=[_call("add_tool", {"tool_names": ["count_rows"]}, 1)]),
            AIMessage("", tool_calls=[_call("count_rows", {"table": "orders"}, 2)]),
            AIMessage("There are 3."),
        ]

    usage = ToolUsage()
    agent = ToolAgent(ScriptedChatModel(responses=script(), cycle=False), catalog, usage=usage)
    graph_state = {"messages": [HumanMessage("tally the purchases we have")]}
    asyncio.run(agent.ainvoke(graph_state, {"configurable": {"thread_id": "x"}}))
    assert [(r["tool"], r["thread"]) for r in usage.export()] == [("count_rows", "x")]

    quiet = ToolUsage()
    agent = ToolAgent(ScriptedChatModel(responses=script(), cycle=False), catalog, usage=quiet)
    config = {"configurable": {"thread_id": "y", "toolbudget_record_usage": False}}
    agent.invoke(graph_state, config)
    assert quiet.export() == []


BAD_OPT_OUTS = ["false", 0, "no", None, "False", 1]


def _counted_catalog() -> tuple[ToolCatalog, list[str]]:
    ran: list[str] = []

    def count_rows(table: str) -> int:
        """Count the rows of a database table."""
        ran.append(table)
        return 42

    return ToolCatalog.from_tools([count_rows]), ran


def _count_script() -> list[AIMessage]:
    return [AIMessage("", tool_calls=[_call("count_rows", {"table": "orders"}, 1)]), "42 rows."]


def _count_app(kind: str, usage: ToolUsage) -> tuple[Any, list[str], ScriptedChatModel]:
    """The prebuilt agent (with a checkpointer) or a ``ToolAgent`` over ``count_rows``, its
    model scripted to call it once; the list of the tables it ran on; the model."""
    catalog, ran = _counted_catalog()
    model = ScriptedChatModel(responses=_count_script(), cycle=False)
    if kind == "prebuilt":
        graph = create_toolbudget_agent(model, catalog, pinned=["count_rows"], usage=usage)
        return graph.compile(checkpointer=InMemorySaver()), ran, model
    return ToolAgent(model, catalog, pinned=["count_rows"], usage=usage), ran, model


@pytest.mark.parametrize("value", BAD_OPT_OUTS)
@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
@pytest.mark.parametrize("kind", ["prebuilt", "ToolAgent"])
async def test_opt_out_that_is_not_a_bool_raises_before_the_model_or_a_tool_runs(
    kind: str, api: str, value: Any
):
    usage = ToolUsage()
    app, ran, model = _count_app(kind, usage)
    config = {"configurable": {"thread_id": "t", "toolbudget_record_usage": value}}
    payload = {"messages": [HumanMessage("how many orders are there?")]}
    with pytest.raises(TypeError, match=r"toolbudget_record_usage'\] takes True .* or False"):
        if api == "invoke":
            app.invoke(payload, config)
        else:
            await app.ainvoke(payload, config)
    assert (ran, model.calls, usage.export()) == ([], [], [])


@pytest.mark.parametrize("value", BAD_OPT_OUTS)
async def test_opt_out_that_is_not_a_bool_raises_before_a_lone_executor_runs_a_tool(value: Any):
    # An executor of your own graph (CallModel + ToolExecutor(usage=...)) checks the value
    # before any call runs: a tool's side effect is never lost with the exception.
    catalog, ran = _counted_catalog()
    usage = ToolUsage()
    executor = ToolExecutor(catalog, pinned=["count_rows"], usage=usage)
    state = {
        "messages": [
            HumanMessage("how many orders are there?"),
            AIMessage("", tool_calls=[_call("count_rows", {"table": "orders"}, 1)]),
        ]
    }
    config = {"configurable": {"thread_id": "t", "toolbudget_record_usage": value}}
    with pytest.raises(TypeError, match="toolbudget_record_usage"):
        executor.invoke(state, config)
    with pytest.raises(TypeError, match="toolbudget_record_usage"):
        await executor.ainvoke(state, config)
    with pytest.raises(TypeError, match=r"got 'false' \(str\)"):
        usage.record_run(
            "how many orders?", ["count_rows"], {"configurable": {OPT_OUT_KEY: "false"}}
        )
    assert (ran, usage.export()) == ([], [])


def test_opt_out_bools_and_unset_are_honoured():
    usage = ToolUsage()
    for value in (False, True):
        config = {"configurable": {"thread_id": "t", OPT_OUT_KEY: value}}
        usage.record_run(f"how many orders are there? {value}", ["count_rows"], config)
    usage.record_run("how many orders are there? unset", ["count_rows"], {"configurable": {}})
    assert [r["query"] for r in usage.export()] == [
        "how many orders are there? True",
        "how many orders are there? unset",
    ]
    assert (
        records_usage(None)
        and records_usage({})
        and not records_usage({"configurable": {OPT_OUT_KEY: False}})
    )


def test_toolbudget_state_is_unchanged_by_usage():
    assert "usage" not in ToolBudgetState.__annotations__


# --- what every store keeps, and a store that fails ---------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_message_or_id_a_store_refuses_is_recorded_in_a_form_every_store_keeps(tmp_path, kind):
    # A NUL (PostgreSQL refuses it: tests/test_usage_postgres.py) and lone surrogates (no store
    # encodes them; was: UnicodeEncodeError even in memory) in what a client sends: the message
    # keeps U+FFFD in their place, an id becomes its hash (two ids stay two), all stored.
    store = InMemoryStore() if kind == "memory" else sqlite_store(tmp_path / "usage.db")
    usage = ToolUsage(store=store, scope="user")
    for user in ("ada\x00", "ada\ud800", "ada\ufffd"):
        config = {"configurable": {"thread_id": "t\x00\udfff", "user_id": user}}
        usage.record_run("pay the rent\x00 to the landlord \ud83d", ["count_rows"], config)
    usage.import_([{"tool": "count_rows", "query": "rows\x00", "thread": "\ud800"}])
    rows = ToolUsage(store=store, scope="user").export()  # read back from the store
    assert sorted(r["query"] for r in rows) == [
        "pay the rent\ufffd to the landlord \ufffd",
        "pay the rent\ufffd to the landlord \ufffd",
        "pay the rent\ufffd to the landlord \ufffd",
        "rows\ufffd",
    ]
    scopes = sorted(r["scope"] or "" for r in rows)
    assert scopes[:2] == ["", "ada\ufffd"] and len(set(scopes)) == 4  # ada\x00, ada\ud800 hashed
    kept = [r.get(field) or "" for r in rows for field in ("query", "thread", "scope", "user")]
    assert not any(c == "\x00" or "\ud800" <= c <= "\udfff" for text in kept for c in text)
    record = UsageRecord("count_rows", "a\x00b", thread="t\ud800", sources=("t\ud800",))
    assert (record.query, record.sources) == ("a\ufffdb", (record.thread,))


def _closed_store(path, usage_config: dict[str, Any] | None = None, **options: Any) -> ToolUsage:
    """A ToolUsage on a real SqliteStore whose connection is closed once the history was
    loaded (``usage_config``: the run whose scope is loaded too): its database went away."""
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    usage = ToolUsage(store=store, **options)
    usage.record("do I need an umbrella this weekend", ["weather_forecast"])
    usage.attach(usage_config)
    conn.close()
    return usage


def _run(app: Any, payload: Any, config: Any, api: str) -> Any:
    """``app.invoke`` or ``app.ainvoke`` (in its own event loop: a sync run in a running
    loop would first probe the store for an async one, see ``ToolUsage._probe``)."""
    return (
        app.invoke(payload, config)
        if api == "invoke"
        else asyncio.run(app.ainvoke(payload, config))
    )


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
@pytest.mark.parametrize("kind", ["prebuilt", "ToolAgent"])
def test_a_usage_store_that_cannot_be_written_ends_no_turn_and_runs_no_tool_twice(
    tmp_path, kind, api, caplog
):
    # Was: the record, written after the tools ran, raised; the turn failed, and resuming the
    # thread ran the tool again (and failed again).
    usage = _closed_store(tmp_path / "usage.db", {"configurable": {}})  # "default" loaded
    app, ran, _ = _count_app(kind, usage)
    payload = {"messages": [HumanMessage("how many orders are there?")]}
    config = {"configurable": {"thread_id": "t"}}
    out = _run(app, payload, config, api)
    assert (out["messages"][-1].content, ran) == ("42 rows.", ["orders"])
    assert "usage history: recording count_rows failed" in caplog.text
    assert "the store could not be read (" not in caplog.text  # it was loaded before
    assert len(usage) == 2  # the record is kept in this worker's memory
    stored = ToolUsage(store=sqlite_store(tmp_path / "usage.db")).export()
    assert [r["tool"] for r in stored] == ["weather_forecast"]  # count_rows: not in the store


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
def test_a_usage_store_that_cannot_be_read_ranks_without_usage_and_ends_no_turn(
    tmp_path, api, caplog
):
    ada = {"configurable": {"user_id": "ada", "thread_id": "a"}}
    usage = _closed_store(tmp_path / "usage.db", ada, scope="user")  # Bob's scope: not loaded
    catalog = build_example_catalog()
    state = {"messages": [HumanMessage("Do I need an umbrella in Lima on Saturday?")]}
    bob = {"configurable": {"user_id": "bob", "thread_id": "b"}}
    node = ClassifyIntent(catalog, usage=usage)
    assert _run(node, state, ada, api)["categories"] == ["weather"]  # Ada's: loaded, ranks
    assert "the store could not be read" not in caplog.text
    # Bob's history cannot be read: he ranks without usage (was: ProgrammingError)
    assert _run(node, state, bob, api) == ClassifyIntent(catalog).invoke(state)
    assert _run(node, state, bob, api)["categories"] == []
    assert "usage history: the store could not be read" in caplog.text

    counted, ran = _counted_catalog()
    model = ScriptedChatModel(responses=_count_script(), cycle=False)
    app = create_toolbudget_agent(model, counted, pinned=["count_rows"], usage=usage).compile()
    payload = {"messages": [HumanMessage("how many orders are there?")]}
    out = _run(app, payload, bob, api)
    assert (out["messages"][-1].content, ran) == ("42 rows.", ["orders"])
    assert "usage history: recording count_rows failed" in caplog.text


def test_an_import_the_store_refuses_says_so_and_importing_again_stores_every_row(tmp_path):
    path = tmp_path / "usage.db"
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=0)
    store = SqliteStore(conn)
    store.setup()
    usage = ToolUsage(store=store)
    usage.attach()
    rows = [
        {"tool": f"tool_{i % 7}", "query": f"question {i} about topic {i}", "ts": float(i + 1)}
        for i in range(350)
    ]
    other_writer = sqlite3.connect(str(path), isolation_level=None)
    other_writer.execute("BEGIN IMMEDIATE")  # holds the database: every write of ours fails
    with pytest.raises(RuntimeError, match=r"import_ could not write its rows to the Sqlit") as e:
        usage.import_(rows)  # was: sqlite3.OperationalError, "database is locked"
    assert "The 350 rows it added are in this ToolUsage's memory" in str(e.value)
    assert "Call import_(rows) again once the store works" in str(e.value)
    other_writer.execute("ROLLBACK")
    assert (len(usage), len(ToolUsage(store=sqlite_store(path)).export())) == (350, 0)
    usage.import_(rows)  # again: was nothing written, the rows being in memory already
    assert len(usage) == len(ToolUsage(store=sqlite_store(path)).export()) == 350
