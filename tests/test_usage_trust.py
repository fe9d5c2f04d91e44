"""Trust boundaries, usage side: learning from many users is the feature, letting one user
write it is the bug (issue 29, part A).

Several threads, several users, one store: the attacks run through the real prebuilt graph
(only the chat model is scripted) on a catalog without categories (every tool ranked by
relevance, as MetaTool's or a one-server MCP catalog's), where a usage boost decides the
visible set directly.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph.store.memory import InMemoryStore

from langgraph_toolbudget import (
    SelectTools,
    ToolAgent,
    ToolBudgetInput,
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    ToolSearch,
    ToolUsage,
    add_toolbudget_nodes,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.usage import (
    MAX_CREDITED_TERMS,
    MAX_ID_CHARS,
    MAX_SOURCES_KEPT,
    UsageIndex,
    record_terms,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.workspace import Workspace
from langgraph_toolbudget.mcp import load_mcp_catalog
from langgraph_toolbudget.nodes.usage import scope_key
from langgraph_toolbudget.testing import ScriptedChatModel

WEATHER = "What's the weather in Tokyo tomorrow?"
STUFFED = (
    "weather github issue slack message channel email table rows files tokyo tomorrow "
    "forecast pull request calendar meeting"
)
B_REQUESTS = [
    WEATHER,
    "open an issue about the login crash in acme/app",
    "tell the team in slack that the build is green",
    "东京明天天气怎么样",  # matches nothing: the fallback
    "¿Qué tiempo hará mañana en Sevilla?",  # matches nothing: the fallback
]


def flat_catalog(workspace: Workspace | None = None) -> ToolCatalog:
    """The example tools without categories: every tool is chosen by relevance alone."""
    example = build_example_catalog(workspace)
    return ToolCatalog.from_tools(
        example.tools([n for n in example.tool_names if n != "ask_human"])
    )


def call(name: str, i: int, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"c{i}", "type": "tool_call"}


class Deployment:
    """One app: a catalog, one store, one ``ToolUsage``; each run a fresh graph (its model's
    script) compiled over that store, as LangGraph server runs one graph for many users."""

    def __init__(self, **usage: Any) -> None:
        self.workspace = Workspace()
        self.catalog = flat_catalog(self.workspace)
        self.store = InMemoryStore()
        self.usage = ToolUsage(**usage)

    def run(self, text: str, script: list[Any], **configurable: Any) -> dict[str, Any]:
        model = ScriptedChatModel(responses=script, cycle=False)
        graph = create_toolbudget_agent(model, self.catalog, usage=self.usage)
        app = graph.compile(store=self.store, checkpointer=InMemorySaver())
        return app.invoke({"messages": [HumanMessage(text)]}, {"configurable": configurable})

    def attack(self, text: str, **configurable: Any) -> None:
        """The model loads ``delete_file`` itself and calls it, successfully."""
        self.workspace.files["/notes/todo.md"] = "- ship v1\n"
        script = [
            AIMessage("", tool_calls=[call("add_tool", 1, tool_names=["delete_file"])]),
            AIMessage("", tool_calls=[call("delete_file", 2, path="/notes/todo.md")]),
            AIMessage("done"),
        ]
        out = self.run(text, script, **configurable)
        statuses = [m.status for m in out["messages"] if isinstance(m, ToolMessage)]
        assert statuses == ["success", "success"]  # the attack itself works

    def first_turn(self, text: str, **configurable: Any) -> list[str]:
        """The visible set of a thread's first turn."""
        return self.run(text, [AIMessage("ok")], **configurable)["selected_tools"]


# --- scope, trusted and observed ---------------------------------------------------------------


def test_one_users_turn_does_not_put_a_tool_in_another_users_first_turn():
    app = Deployment()
    assert "delete_file" not in app.first_turn(WEATHER, thread_id="b0", user_id="B")
    app.attack(WEATHER, thread_id="a1", user_id="A")
    assert "delete_file" not in app.first_turn(WEATHER, thread_id="b1", user_id="B")
    # It was recorded (the operator can review it), as loaded by the model itself.
    (row,) = app.usage.export()
    assert row["tool"] == "delete_file" and row["loaded"] and not row["trusted"]


def test_one_stuffed_message_reaches_none_of_another_users_requests():
    app = Deployment()
    app.attack(STUFFED, thread_id="a1", user_id="A")
    for i, text in enumerate(B_REQUESTS):
        assert "delete_file" not in app.first_turn(text, thread_id=f"b{i}", user_id="B"), text


def test_a_tool_the_model_loaded_itself_is_never_promoted_however_many_users_do_it():
    app = Deployment()
    for i in range(5):  # five users, five threads: corroborated, but loaded by the model
        app.attack(WEATHER, thread_id=f"a{i}", user_id=f"user{i}")
    assert "delete_file" not in app.first_turn(WEATHER, thread_id="b", user_id="B")


def _served(usage: ToolUsage, thread: str, **configurable: Any) -> None:
    """A run in which the app showed ``weather_forecast`` and the model called it."""
    config = {"configurable": {"thread_id": thread, **configurable}}
    usage.record_run("should I pack a brolly for the weekend", ["weather_forecast"], config)


def _picked(usage: ToolUsage, catalog: ToolCatalog, **configurable: Any) -> list[str]:
    node = SelectTools(catalog, max_tools=2, usage=usage)
    state = {"messages": [HumanMessage("do I need a brolly tomorrow")]}
    update = node.invoke(state, {"configurable": configurable})
    return update.get("selected_tools", {}).get("add", [])


def test_observed_usage_ranks_for_other_threads_once_three_threads_corroborate_it():
    catalog, usage = flat_catalog(), ToolUsage()
    assert "weather_forecast" not in _picked(usage, catalog)  # no text says "brolly"
    for i in range(2):
        _served(usage, f"t{i}")
        assert "weather_forecast" not in _picked(usage, catalog)
    _served(usage, "t2")
    assert "weather_forecast" in _picked(usage, catalog)


def test_one_user_with_many_threads_corroborates_nothing():
    catalog, usage = flat_catalog(), ToolUsage()
    for i in range(5):
        _served(usage, f"t{i}", langgraph_auth_user_id="mallory")
    assert "weather_forecast" not in _picked(usage, catalog)
    for user in ("ada", "grace"):
        _served(usage, f"t-{user}", langgraph_auth_user_id=user)
    assert "weather_forecast" in _picked(usage, catalog)  # three users now


def test_your_own_records_are_trusted_and_rank_at_once_in_every_scope():
    catalog, usage = flat_catalog(), ToolUsage(scope="user")
    usage.record("should I pack a brolly for the weekend", ["weather_forecast"])
    assert "weather_forecast" in _picked(usage, catalog, langgraph_auth_user_id="ada")
    assert "weather_forecast" in _picked(usage, catalog)  # a run without a user: yours only


def test_the_assistant_scope_keeps_each_assistants_history_apart():
    catalog, store = flat_catalog(), InMemoryStore()
    usage = ToolUsage(store=store)  # scope="assistant" is the default
    for i in range(3):
        _served(usage, f"t{i}", assistant_id="weather-bot")
    assert "weather_forecast" in _picked(usage, catalog, assistant_id="weather-bot")
    assert "weather_forecast" not in _picked(usage, catalog, assistant_id="mail-bot")
    # Another worker on the same store reads the same scopes.
    again = ToolUsage(store=store)
    assert "weather_forecast" in _picked(again, catalog, assistant_id="weather-bot")
    assert "weather_forecast" not in _picked(again, catalog, assistant_id="mail-bot")
    scopes = {r["scope"] for r in again.export()}
    assert scopes == {"weather-bot"}


def test_the_user_scope_keeps_each_users_history_to_themselves():
    catalog, usage = flat_catalog(), ToolUsage(scope="user")
    for i in range(3):
        _served(usage, f"ada-{i}", langgraph_auth_user_id="ada")
    assert "weather_forecast" in _picked(usage, catalog, langgraph_auth_user_id="ada")
    assert "weather_forecast" not in _picked(usage, catalog, langgraph_auth_user_id="bob")
    _served(usage, "anonymous")  # no user: nothing recorded
    assert {r["scope"] for r in usage.export()} == {"ada"}


def test_the_global_scope_is_one_history_when_asked_for():
    catalog, usage = flat_catalog(), ToolUsage(scope="global")
    for i in range(3):
        _served(usage, f"t{i}", assistant_id="weather-bot")
    assert "weather_forecast" in _picked(usage, catalog, assistant_id="mail-bot")


def test_a_stuffed_message_earns_no_more_credit_than_a_long_request():
    history = UsageIndex()
    words = " ".join(f"word{i}" for i in range(300))
    (stuffed,), _ = history.add(f"weather {words}", ["stuffed_tool"])
    history.add("weather in Paris please", ["weather_tool"])
    scores = dict(history.rank("weather"))
    assert scores["weather_tool"] > 3 * scores["stuffed_tool"]
    # Each term of a message of n terms is credited min(1, 32 / n).
    n_terms = len(record_terms(stuffed))
    assert n_terms > 250
    assert history._postings["weather"][history._ids["stuffed_tool"]] == pytest.approx(
        MAX_CREDITED_TERMS / n_terms
    )


# --- never promoted -------------------------------------------------------------------------


def _tools() -> list[Any]:
    @tool
    def wipe_disk(path: str) -> str:
        """Remove everything under a path."""
        return path

    @tool
    def clear_cache(path: str) -> str:
        """Clear a cache."""
        return path

    @tool
    def export_data(path: str) -> str:
        """Export data."""
        return path

    @tool
    def beta_cleanup(path: str) -> str:
        """Clean up, the new way."""
        return path

    wipe_disk.metadata = {"destructiveHint": True}
    return [wipe_disk, clear_cache, export_data, beta_cleanup]


def test_destructive_manual_and_draft_tools_are_never_promoted_by_usage():
    catalog = ToolCatalog.from_tools(
        _tools(),
        tool_metadata={"export_data": {"include": "manual"}, "beta_cleanup": {"status": "draft"}},
    ).in_runtime_mode("debug")
    usage = ToolUsage()
    query = "make some room on the box"
    for name in ("wipe_disk", "export_data", "beta_cleanup", "clear_cache"):
        usage.record(query, [name])
    scores = usage.scores(catalog, query)
    assert scores is not None
    boosted = {n for n in catalog.index.names if scores[catalog.index.position(n)] > 0}
    assert boosted == {"clear_cache"}
    fallback = SelectTools(catalog, usage=usage).invoke({"messages": [HumanMessage("ząb")]})
    assert fallback["selected_tools"]["add"] == ["clear_cache"]


async def test_an_mcp_tool_annotated_destructive_is_never_promoted():
    server = Path(__file__).resolve().parent / "mcp_servers" / "hostile_server.py"
    connection = {"transport": "stdio", "command": sys.executable, "args": [str(server), "good"]}
    async with await load_mcp_catalog({"good": connection}) as catalog:
        usage = ToolUsage()
        usage.record("get rid of everything I have here", ["delete_account", "send_email"])
        scores = usage.scores(catalog, "get rid of everything")
        assert scores is not None
        assert scores[catalog.index.position("delete_account")] == 0
        assert scores[catalog.index.position("send_email")] > 0


def test_built_in_tools_are_never_recorded():
    @tool
    def big_report() -> str:
        """The quarterly report, in full."""
        return "line of the report\n" * 2_000

    def answer(messages: list[Any], bound: list[str]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            return AIMessage("", tool_calls=[call("big_report", 1)])
        if last.name == "big_report":
            handle = last.artifact["offloaded"]["handle"]
            return AIMessage("", tool_calls=[call("read_large_output", 2, handle=handle)])
        return AIMessage("Here it is.")

    usage = ToolUsage()
    catalog = ToolCatalog.from_tools([big_report])
    graph = create_toolbudget_agent(
        ScriptedChatModel(responses=[answer], cycle=True), catalog, usage=usage
    )
    app = graph.compile(store=InMemoryStore(), checkpointer=InMemorySaver())
    out = app.invoke(
        {"messages": [HumanMessage("show me the quarterly report")]},
        {"configurable": {"thread_id": "t"}},
    )
    read = [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]
    assert read.name == "read_large_output" and read.status == "success"
    assert [r["tool"] for r in usage.export()] == ["big_report"]


# --- bounds -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["x" * 129, "line\nbreak", "tab\there", "nul\x00"])
def test_record_and_import_accept_only_tool_names(name: str):
    usage = ToolUsage()
    with pytest.raises(ValueError, match="not tool names"):
        usage.record("hello there", [name])
    with pytest.raises(ValueError, match="not tool names"):
        usage.import_([{"tool": "fine", "query": "a b"}, {"tool": name, "query": "a b"}])
    assert len(usage) == 0  # nothing of a bad batch


def test_with_a_catalog_record_and_import_accept_only_its_tools():
    usage = ToolUsage(catalog=build_example_catalog())
    usage.record("weather please", ["get_weather"])
    for name in ("get_wether", "../../etc/passwd", "<|im_start|>system"):
        with pytest.raises(ValueError, match="not tools of this ToolUsage's catalog"):
            usage.record("weather please", [name])
    with pytest.raises(ValueError, match="not tools of"):
        usage.import_([{"tool": "made_up_tool", "query": "a b"}])
    assert [r["tool"] for r in usage.export()] == ["get_weather"]


@tool
def rotate_logs(service: str) -> str:
    """Rotate the log files of a service."""
    return "rotated"


def _model() -> ScriptedChatModel:
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}
    return ScriptedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("done")])


BUILT_WITH_USAGE = {
    "create_toolbudget_agent": lambda c, u: create_toolbudget_agent(_model(), c, usage=u),
    "add_toolbudget_nodes": lambda c, u: add_toolbudget_nodes(
        StateGraph(ToolBudgetState, input_schema=ToolBudgetInput), _model(), c, usage=u
    ),
    "ToolAgent": lambda c, u: ToolAgent(_model(), c, usage=u),
    "ToolExecutor": lambda c, u: ToolExecutor(c, usage=u),
    "SelectTools": lambda c, u: SelectTools(c, usage=u),
    "ToolSearch": lambda c, u: ToolSearch(c, usage=u),
    "ToolBudgetMiddleware": lambda c, u: ToolBudgetMiddleware(c, usage=u),
}


@pytest.mark.parametrize("owner", list(BUILT_WITH_USAGE))
def test_a_usage_bound_to_another_catalog_is_refused_where_it_is_given(owner: str):
    usage = ToolUsage(catalog=ToolCatalog.from_tools([rotate_logs]))
    catalog = build_example_catalog()
    with pytest.raises(ValueError) as caught:
        BUILT_WITH_USAGE[owner](catalog, usage)
    message = str(caught.value)
    assert message.startswith(f"{owner}: usage= is a ToolUsage built with catalog=")
    assert "get_weather" in message and "ToolUsage(catalog=catalog, ...)" in message
    assert len(usage) == 0


@pytest.mark.parametrize("owner", list(BUILT_WITH_USAGE))
def test_a_usage_of_the_same_tools_is_taken_in_another_mode_copy_or_superset(owner: str):
    catalog = build_example_catalog()
    larger = ToolCatalog.from_tools([*catalog.tools(catalog.tool_names), rotate_logs])
    for own in (
        catalog,
        catalog.in_runtime_mode("debug"),
        catalog.with_metadata(get_weather={"status": "draft"}),
        larger,
    ):
        BUILT_WITH_USAGE[owner](catalog, ToolUsage(catalog=own))  # no raise
        BUILT_WITH_USAGE[owner](catalog.in_runtime_mode("debug"), ToolUsage(catalog=own))


def test_the_prebuilt_agent_records_with_a_usage_of_its_catalog():
    catalog = build_example_catalog()
    usage = ToolUsage(catalog=catalog.with_metadata(get_weather={"is_pure": True}))
    app = create_toolbudget_agent(_model(), catalog, usage=usage).compile()
    app.invoke({"messages": [HumanMessage("weather in Paris")]})
    assert [r["tool"] for r in usage.export()] == ["get_weather"]


@pytest.mark.slow  # 100,000 names imported: seconds of work
def test_the_rows_kept_are_capped_across_tools_and_a_flood_of_names_is_quick():
    usage = ToolUsage(store=InMemoryStore())
    rows = [
        {"tool": f"tool_{i}", "query": f"request number {i} about some thing", "ts": float(i)}
        for i in range(100_000)
    ]
    start = time.monotonic()
    assert usage.import_(rows) == 100_000
    took = time.monotonic() - start
    assert len(usage) == 20_000 and took < 20, took  # was: all 100,000 kept
    kept = [r["tool"] for r in usage.export()]
    assert len(kept) == 20_000 and kept[0] == "tool_80000"  # the newest are kept
    assert len(usage.history._names) <= 20_000  # the dropped names' slots are freed too


def test_the_no_match_fallback_uses_no_uncorroborated_usage():
    catalog, usage = flat_catalog(), ToolUsage()
    usage.record("weather in Tokyo", ["get_weather"])  # yours: trusted
    for i in range(2):  # observed in two threads: not corroborated
        config = {"configurable": {"thread_id": f"t{i}"}}
        usage.record_run("mail Ada", ["send_email"], config)
        usage.record_run("mail Bob", ["send_email"], config)
    state = {"messages": [HumanMessage("东京の天気は？")]}
    out = SelectTools(catalog, usage=usage).invoke(state, {"configurable": {"thread_id": "x"}})
    assert out["selected_tools"]["add"] == ["get_weather"]


def test_rows_stored_before_scopes_are_moved_to_the_shared_history_as_observed(caplog):
    store = InMemoryStore()
    row = {"tool": "weather_forecast", "query": "do I need a brolly", "thread": "t1", "ts": 1.0}
    store.put(("toolbudget", "usage"), "old-row", row)  # the layout before scopes
    usage = ToolUsage(store=store)
    with caplog.at_level("WARNING", logger="langgraph_toolbudget.nodes.usage"):
        (exported,) = usage.export()
    # the move is said, with the way to vouch for the rows again (was: silent, and rows that
    # ranked at once before the upgrade stopped ranking)
    (said,) = [r.getMessage() for r in caplog.records if "before scopes" in r.getMessage()]
    assert said.startswith("moved 1 tool usage rows") and "usage.import_(" in said
    assert exported["trusted"] is False and exported["scope"] is None  # counts once corroborated
    # moved, not copied; and an item says so (no record: export gave only the moved row)
    stored = store.search(("toolbudget", "usage"))
    assert {i.namespace for i in stored} == {("toolbudget", "usage", "shared")}
    assert len(stored) == 2 and "legacy_rows_moved" in {i.key for i in stored}
    assert "weather_forecast" not in _picked(usage, flat_catalog())
    assert exported["moved"] is True  # what the warning's recipe selects


def test_the_recipe_of_the_move_warning_vouches_for_the_moved_rows_only():
    """Followed as written, the warning's recipe makes the moved rows rank at once again, kept
    once with their thread and time; an observed row of a scope and a shared row imported as
    untrusted stay untrusted (was: the recipe's filter, every untrusted shared row, vouched
    for the latter too)."""
    store = InMemoryStore()
    row = {"tool": "weather_forecast", "query": "do I need a brolly", "thread": "t1", "ts": 5.0}
    store.put(("toolbudget", "usage"), "old-row", row)  # the layout before scopes
    usage = ToolUsage(store=store)
    usage.import_([{"tool": "send_email", "query": "mail the team", "trusted": False}])
    observed = ToolUsage(store=store, scope="global")
    observed.record_run(
        "brolly for today?", ["weather_forecast"], {"configurable": {"thread_id": "x"}}
    )
    assert "weather_forecast" not in _picked(usage, flat_catalog())
    rows = usage.export()
    usage.import_(
        [{k: r[k] for k in ("tool", "query", "thread", "ts")} for r in rows if r.get("moved")]
    )
    assert "weather_forecast" in _picked(usage, flat_catalog())
    after = {(r["query"], r["scope"], r["trusted"], r["thread"]) for r in usage.export()}
    assert after == {
        ("do I need a brolly", None, True, "t1"),
        ("mail the team", None, False, None),
        ("brolly for today?", "global", False, "x"),
    }
    kept = next(r for r in usage.export() if r["query"] == "do I need a brolly")
    assert kept["ts"] == 5.0 and "moved" not in kept


def test_a_moved_row_keeps_its_mark_through_export_and_import_until_vouched_for():
    """A backup (export, then import into another store) before vouching dropped the mark, so
    the warning's recipe, logged once, then found nothing."""
    store, other = InMemoryStore(), InMemoryStore()
    row = {"tool": "weather_forecast", "query": "do I need a brolly", "thread": "t1", "ts": 5.0}
    store.put(("toolbudget", "usage"), "old-row", row)
    rows = ToolUsage(store=store).export()
    ToolUsage(store=store).import_(rows)  # the same store, as a restore does
    copy = ToolUsage(store=other)
    copy.import_(ToolUsage(store=store).export())
    for usage in (ToolUsage(store=store), ToolUsage(store=other)):
        (moved,) = [r for r in usage.export() if r.get("moved")]
        assert (moved["query"], moved["trusted"], moved["thread"]) == (
            "do I need a brolly",
            False,
            "t1",
        )
    copy.import_(
        [
            {k: r[k] for k in ("tool", "query", "thread", "ts")}
            for r in copy.export()
            if r.get("moved")
        ]
    )
    assert [(r["trusted"], r.get("moved")) for r in ToolUsage(store=other).export()] == [
        (True, None)
    ]


def test_the_moved_mark_lasts_until_the_row_is_vouched_for_whatever_writes_it():
    """The mark was a key of the stored row only: a later untrusted import of the same tool
    and message, or an import before the store was known, dropped it; an old row whose
    message an import normalises stayed behind, still untrusted, beside the vouched one. It
    is a source of the record now, which travels and merges with it."""
    store = InMemoryStore()
    row = {"tool": "weather_forecast", "query": "do I  need a brolly", "thread": "t1", "ts": 5.0}
    store.put(("toolbudget", "usage"), "old-row", row)
    usage = ToolUsage(store=store)
    backup = usage.export()
    assert [(r["query"], r.get("moved")) for r in backup] == [("do I need a brolly", True)]
    usage.import_([{"tool": "weather_forecast", "query": "do I need a brolly", "trusted": False}])
    usage.import_([{**backup[0], "scope": "ada"}])  # a scope's row: never marked
    stored = {r["scope"]: r.get("moved") for r in ToolUsage(store=store).export()}
    assert stored == {None: True, "ada": None}  # as another worker, or a restart, reads them
    early = ToolUsage()  # its store is the graph's, known at the first run
    early.import_(backup)
    assert [r.get("moved") for r in early.export()] == [True]
    other = InMemoryStore()
    app = create_toolbudget_agent(ScriptedChatModel(responses=["ok"]), flat_catalog(), usage=early)
    app.compile(store=other).invoke({"messages": [HumanMessage("hi")]})
    assert [r.get("moved") for r in ToolUsage(store=other).export()] == [True]
    recipe = [
        {k: r[k] for k in ("tool", "query", "thread", "ts")}
        for r in usage.export()
        if r.get("moved")
    ]
    usage.import_(recipe)
    after = {(r["scope"], r["trusted"], r.get("moved")) for r in usage.export()}
    assert after == {(None, True, None), ("ada", False, None)}


@pytest.mark.parametrize(("threads", "ranks"), [(2, False), (3, True)])
def test_moved_rows_corroborate_by_their_own_threads_as_before(threads, ranks):
    """The mark is a label among a moved row's sources, not a source: rows from three threads
    still corroborate their tool (two do not), as before the mark."""
    store = InMemoryStore()
    for i in range(threads):
        row = {"tool": "weather_forecast", "query": f"do I need a brolly {i}", "thread": f"t{i}"}
        store.put(("toolbudget", "usage"), f"old{i}", {**row, "ts": float(i)})
    usage = ToolUsage(store=store)
    assert ("weather_forecast" in _picked(usage, flat_catalog())) is ranks
    assert all(r["moved"] for r in usage.export())


def test_a_record_made_before_the_store_stays_yours_when_an_old_row_says_the_same():
    """The move wrote the old (observed) row over your trusted record of the same tool and
    message, made before the store was attached: after a restart it no longer ranked."""
    store = InMemoryStore()
    row = {"tool": "weather_forecast", "query": "do I need a brolly", "thread": "t1", "ts": 1.0}
    store.put(("toolbudget", "usage"), "old-row", row)
    usage = ToolUsage()  # the graph's store, once a run brings one
    usage.record("do I need a brolly", ["weather_forecast"])  # at start-up, in memory
    app = create_toolbudget_agent(ScriptedChatModel(responses=["ok"]), flat_catalog(), usage=usage)
    app.compile(store=store).invoke({"messages": [HumanMessage("hi")]})  # the old row moves
    (stored,) = ToolUsage(store=store).export()  # as a restarted process reads it
    assert stored["trusted"] is True and "moved" not in stored
    assert "weather_forecast" in _picked(ToolUsage(store=store), flat_catalog())


def test_no_user_id_can_name_another_users_store_namespace():
    # An odd id is kept under a hash of it; an id that looks like such a hash is hashed again,
    # so "h-<the hash of ada's id>" is not ada, in memory or in the store.
    store = InMemoryStore()
    ada = "ada@example.com"
    mimic = "h-" + hashlib.sha1(ada.encode()).hexdigest()[:32]
    writer = ToolUsage(store=store, scope="user")
    for i in range(3):  # corroborated in mimic's scope
        config = {"configurable": {"thread_id": f"t{i}", "langgraph_auth_user_id": mimic}}
        writer.record_run("do I need an umbrella", ["delete_file"], config)
    reader = ToolUsage(store=store, scope="user")  # a fresh worker loads ada's scope
    config = {"configurable": {"langgraph_auth_user_id": ada}}
    reader.attach(config)
    assert reader.scores(flat_catalog(), "umbrella", config=config) is None
    assert len(reader) == 0
    assert {r["scope"] for r in reader.export()} == {
        scope_key("user", {"configurable": {"langgraph_auth_user_id": mimic}})
    }


def test_thread_and_user_ids_are_kept_bounded_whatever_a_client_sends():
    usage = ToolUsage(store=InMemoryStore(), max_records=10)
    for i in range(16):  # a client without auth sets user_id freely
        user = f"u{i}-" + "x" * 100_000
        config = {"configurable": {"thread_id": "t" * 100_000 + str(i), "user_id": user}}
        usage.record_run("weather in oslo", ["get_forecast"], config)
    (row,) = usage.export()
    assert len(row["thread"]) <= MAX_ID_CHARS and len(row["user"]) <= MAX_ID_CHARS
    assert len(row["sources"]) == MAX_SOURCES_KEPT
    assert all(len(s) <= MAX_ID_CHARS for s in row["sources"])
    assert len(set(row["sources"])) == MAX_SOURCES_KEPT  # still distinct sources


def test_a_long_user_id_stays_one_source_through_reloads_and_export():
    # A hashed id is kept as it is when read back: re-hashing it at every reload made one user
    # with a long id three "distinct" sources, and moved an exported scope on import.
    long_id = "u" * 200
    usage = ToolUsage(store=InMemoryStore())  # the assistant's scope: users corroborate
    for i in range(3):
        config = {"configurable": {"user_id": long_id, "thread_id": f"t{i}"}}
        usage.record_run("mail Ada the report", ["send_email"], config)
        usage.refresh()
    (row,) = usage.export()
    assert len(row["sources"]) == 1  # was: 3, one per reload
    assert usage.scores(flat_catalog(), "mail Bob", config=config) is None  # one user alone
    mine = ToolUsage(store=InMemoryStore(), scope="user")
    mine.record_run("mail Ada the report", ["send_email"], config)
    copy = ToolUsage(store=InMemoryStore(), scope="user")
    copy.import_(mine.export())
    assert [r["scope"] for r in copy.export()] == [scope_key("user", config)]


def test_a_row_written_into_a_scope_or_the_legacy_namespace_is_observed_whatever_it_says():
    # Anyone who can write the store (LangGraph server's store API, without an
    # @auth.on.store handler) could plant a row saying "trusted": it ranked at once.
    store = InMemoryStore()
    planted = {"tool": "weather_forecast", "query": "do I need a brolly", "ts": 1e12}
    store.put(("toolbudget", "usage", "scope", "ada"), "p1", {**planted, "trusted": True})
    store.put(("toolbudget", "usage"), "p2", {**planted, "query": "a brolly?", "trusted": True})
    usage = ToolUsage(store=store, scope="user")
    assert "weather_forecast" not in _picked(usage, flat_catalog(), user_id="ada")
    assert [(r["trusted"], r["scope"]) for r in usage.export()] == [(False, None), (False, "ada")]
    # the operator's records are the shared ones: an import into a scope is observed there too
    usage.import_([{"tool": "weather_forecast", "query": "my brolly", "scope": "bob"}])
    assert "weather_forecast" not in _picked(usage, flat_catalog(), user_id="bob")
    usage.import_([{"tool": "weather_forecast", "query": "need a brolly"}])
    assert "weather_forecast" in _picked(usage, flat_catalog(), user_id="bob")
