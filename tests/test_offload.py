"""Offloading large tool outputs: the stub, the store, the output tools and their errors."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.types import Command

from langgraph_toolbudget import (
    BudgetConfig,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.large_output import (
    MAX_MATCHES,
    MIN_SLICE,
    SLICE_OVERLAP,
    SLICE_WORK,
    OutputError,
    describe_output,
    media_blocks,
    output_text,
    query_json,
    read_range,
    search_answer,
    search_output,
)
from langgraph_toolbudget.core.search import _compile_pattern
from langgraph_toolbudget.execution.output_store import (
    NAMESPACE,
    OffloadStore,
    app_key,
    fallback_store,
)
from langgraph_toolbudget.execution.output_tools import OUTPUT_TOOL_NAMES
from langgraph_toolbudget.execution.policy import DEPRECATED_NOTE
from langgraph_toolbudget.nodes.agent import ToolAgent
from langgraph_toolbudget.testing import ScriptedChatModel

ORDERS = {
    "orders": [{"id": i, "customer": f"c{i % 7}", "total": i * 1.5} for i in range(3000)],
    "count": 3000,
}
BIG_JSON = json.dumps(ORDERS)
BIG_TEXT = "\n".join(
    f"line {i}: {'error' if i % 500 == 0 else 'ok'} {'x' * 40}" for i in range(3000)
)


def list_orders() -> str:
    """List every order as JSON."""
    return BIG_JSON


def server_log() -> str:
    """The server's log as text."""
    return BIG_TEXT


def small() -> str:
    """A small answer."""
    return "tiny"


def _catalog() -> ToolCatalog:
    tools = [list_orders, server_log, small]
    return ToolCatalog.from_tools(
        tools, tool_metadata={t.__name__: {"include": "always"} for t in tools}
    )


def _call(name: str, args: dict[str, Any] | None = None, i: str = "c1") -> dict[str, Any]:
    return {"name": name, "args": args or {}, "id": i}


def _state(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [HumanMessage("go"), AIMessage("", tool_calls=list(calls))]}


def _run(
    executor: ToolExecutor,
    store: BaseStore,
    thread: str,
    *calls: dict[str, Any],
    api: str = "invoke",
) -> list[ToolMessage]:
    """Run the executor as a graph node (so it sees the graph's store and thread), under
    ``invoke`` or ``ainvoke`` (the built-in families' sync or async answers)."""
    return _run_state(executor, store, thread, _state(*calls), api)


def _run_state(
    executor: ToolExecutor, store: BaseStore, thread: str, state: dict[str, Any], api: str
) -> list[ToolMessage]:
    """:func:`_run` from a state of your own."""
    from langgraph.graph import START, StateGraph

    from langgraph_toolbudget import ToolBudgetState

    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", executor)
    graph.add_edge(START, "tools")
    app, config = graph.compile(store=store), {"configurable": {"thread_id": thread}}
    out = app.invoke(state, config) if api == "invoke" else asyncio.run(app.ainvoke(state, config))
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def _handle(message: ToolMessage) -> str:
    return str(message.artifact["offloaded"]["handle"])


def _ns(thread: str, catalog: ToolCatalog | None = None) -> tuple[str, ...]:
    """The namespace of a thread's outputs for the app of ``catalog`` (default: ``_catalog()``)."""
    app = app_key((catalog or _catalog()).tool_names)
    return (*NAMESPACE, "tools", app, "thread", thread)


# --- the pure part ----------------------------------------------------------------------


def test_describe_output_names_kind_shape_and_preview() -> None:
    info = describe_output(BIG_JSON)
    assert (info.kind, info.chars) == ("json", len(BIG_JSON))
    assert info.shape == 'object with keys ["orders", "count"]'
    structure = {"orders": [*ORDERS["orders"][:2], "... 2998 more items"], "count": 3000}
    assert json.loads(info.preview) == structure  # two items of each array
    assert describe_output("[1, 2, 3]").shape == "array of 3 items"
    text = describe_output(BIG_TEXT)
    assert (text.kind, text.shape) == ("text", "3000 lines")
    assert text.preview.splitlines()[0].startswith("line 0: error")
    assert len(text.preview) <= 800


def test_read_range_clips_length_and_rejects_bad_ranges() -> None:
    chunk, end = read_range(BIG_TEXT, "h", 10, 50_000, 100)
    assert chunk == BIG_TEXT[10:110] and end == 110
    for start, length in [(-1, 5), (len(BIG_TEXT), 5), (0, 0), ("a", 5), (0, True), (1.5, 3)]:
        with pytest.raises(OutputError, match="bad range"):
            read_range(BIG_TEXT, "h", start, length, 100)


def test_search_is_bounded_and_gives_offsets_and_context() -> None:
    found = search_output(BIG_TEXT, "error", 1)
    assert found["total"] == 6 and found["shown"] == 6
    first = found["matches"][1]
    assert first["line"] == 501
    assert BIG_TEXT[first["offset"] :].startswith("error")
    assert first["context"].splitlines()[0].startswith("line 499: ok")
    many = search_output(BIG_TEXT, "ok", 0)
    assert many["total"] == 2994 and many["shown"] == MAX_MATCHES


def test_search_in_one_long_line_clips_around_the_match() -> None:
    found = search_output(BIG_JSON, r'"id": 2999,', 2)
    (match,) = found["matches"]
    assert '"id": 2999' in match["context"] and len(match["context"]) < 400
    assert BIG_JSON[match["offset"] :].startswith('"id": 2999')


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("", "empty pattern"),
        ("(unclosed", "missing \\)"),
        ("(a)\\1", "invalid escape"),  # back-references are not RE2
        ("(?=a)b", "invalid perl operator"),  # nor look-around
        ("(a{1000}){1000}", "repetition"),  # a pattern too large for RE2
    ],
)
def test_bad_and_unsupported_patterns_are_output_errors(pattern: str, reason: str) -> None:
    with pytest.raises(OutputError, match=reason):
        search_output(BIG_TEXT, pattern)


@pytest.mark.timeout(20)
def test_a_catastrophic_backtracking_pattern_runs_in_linear_time() -> None:
    # (a+)+$ against "aaa...!" takes exponential time in a backtracking engine.
    text = "a" * 200_000 + "!"
    found = search_output(text, r"(a+)+$")
    assert found["total"] == 0


def test_query_json_runs_jq_and_reports_errors() -> None:
    result, cut = query_json(BIG_JSON, "h", '[.orders[] | select(.customer == "c3")] | length')
    assert json.loads(result) == 429 and not cut
    assert json.loads(query_json(BIG_JSON, "h", ".orders[0]")[0]) == ORDERS["orders"][0]
    assert json.loads(query_json(BIG_JSON, "h", ".orders[:2][] | .id")[0]) == [0, 1]
    _, cut = query_json(BIG_JSON, "h", "range(5000)")
    assert cut
    with pytest.raises(OutputError, match="syntax error"):
        query_json(BIG_JSON, "h", ".orders[")
    with pytest.raises(OutputError, match="Cannot index"):
        query_json(BIG_JSON, "h", ".count.x")
    with pytest.raises(OutputError, match="is text, not JSON"):
        query_json(BIG_TEXT, "h", ".")


# --- the executor with a store ----------------------------------------------------------


def test_a_large_result_is_offloaded_with_a_stub_and_artifact() -> None:
    store = InMemoryStore()
    (msg,) = _run(ToolExecutor(_catalog()), store, "t1", _call("list_orders"))
    assert len(msg.content) < 2_000
    facts = msg.artifact["offloaded"]
    assert facts["chars"] == len(BIG_JSON) and facts["kind"] == "json"
    assert f"handle {facts['handle']!r}" in msg.content
    assert 'object with keys ["orders", "count"]' in msg.content
    assert "'.orders | length', '.orders[0]'" in msg.content  # jq examples that fit
    for name in OUTPUT_TOOL_NAMES:
        assert name in msg.content
    item = store.get(_ns("t1"), facts["handle"])
    assert item is not None and item.value["text"] == BIG_JSON


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
def test_json_nested_too_deep_to_parse_is_offloaded_as_text(api: str) -> None:
    deep = "[" * 50_000 + "]" * 50_000  # a tool's output: parsing it would exhaust the stack

    def fetch() -> str:
        """Fetch a document."""
        return deep

    catalog = ToolCatalog.from_tools([fetch], tool_metadata={"fetch": {"include": "always"}})
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog))
    graph.add_edge(START, "tools")
    app = graph.compile(store=InMemoryStore())
    config: Any = {"configurable": {"thread_id": "t1"}}
    state = _state(_call("fetch"))
    out = app.invoke(state, config) if api == "invoke" else asyncio.run(app.ainvoke(state, config))
    stub = out["messages"][-1]
    assert stub.artifact["offloaded"]["kind"] == "text"
    assert "100,000 characters (~25,000 tokens) of text" in stub.content
    read = _call("read_large_output", {"handle": _handle(stub), "length": 5}, "c2")
    assert app.invoke(_state(read), config)["messages"][-1].content.endswith("[[[[[")


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
def test_the_stub_of_a_deprecated_tools_result_ends_with_the_note(api: str) -> None:
    catalog = ToolCatalog.from_tools(
        [server_log], tool_metadata={"server_log": {"status": "deprecated", "include": "always"}}
    )
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog))
    graph.add_edge(START, "tools")
    app = graph.compile(store=InMemoryStore())
    config: Any = {"configurable": {"thread_id": "t1"}}
    state = _state(_call("server_log"))
    out = app.invoke(state, config) if api == "invoke" else asyncio.run(app.ainvoke(state, config))
    stub = out["messages"][-1]
    assert stub.content.startswith("[Large output offloaded")
    assert stub.content.endswith(f"\n\n{DEPRECATED_NOTE.format(tool='server_log')}")


def test_media_blocks_are_not_counted_as_text_and_stay_beside_a_stub() -> None:
    picture = "iVBORw0KGgo" + "A" * 60_000  # an image's base64 is no text the model reads
    blocks = [
        {"type": "text", "text": "chart of sales"},
        {"type": "image", "base64": picture, "mime_type": "image/png"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{picture}"}},
    ]
    assert output_text(blocks) == "chart of sales" and media_blocks(blocks) == blocks[1:]
    assert output_text([blocks[1]]) == ""

    @tool(response_format="content_and_artifact")
    def chart(big: bool) -> tuple[list[dict[str, Any]], None]:
        """A chart, with the data behind it when asked."""
        return ([{**blocks[0], "text": BIG_TEXT} if big else blocks[0], *blocks[1:]], None)

    catalog = ToolCatalog.from_tools([chart], tool_metadata={"chart": {"include": "always"}})
    store, executor = InMemoryStore(), ToolExecutor(catalog)
    small_one, big_one = _run(
        executor,
        store,
        "t1",
        _call("chart", {"big": False}, "a"),
        _call("chart", {"big": True}, "b"),
    )
    assert small_one.content == blocks and small_one.artifact is None  # as the tool gave it
    stub, *media = big_one.content
    assert media == blocks[1:] and stub["text"].startswith(
        f"[Large output offloaded: {len(BIG_TEXT):,} characters"
    )
    item = store.get(_ns("t1", catalog), big_one.artifact["offloaded"]["handle"])
    assert item is not None and item.value["text"] == BIG_TEXT


def test_small_results_and_offloading_off_leave_the_content_alone() -> None:
    store = InMemoryStore()
    (msg,) = _run(ToolExecutor(_catalog()), store, "t1", _call("small"))
    assert msg.content == "tiny" and msg.artifact is None
    off = ToolExecutor(_catalog(), offload_over_chars=None)
    assert not set(OUTPUT_TOOL_NAMES) & set(off.runner.builtins.names)
    (msg,) = _run(off, store, "t1", _call("list_orders"))
    assert msg.content == BIG_JSON
    (msg,) = _run(ToolExecutor(_catalog(), offload_over_chars=None), store, "t1", _call("small"))
    assert store.search(_ns("t1")) == []


def test_the_token_limit_offloads_too() -> None:
    executor = ToolExecutor(_catalog(), offload_over_chars=None, offload_over_tokens=1_000)
    assert set(OUTPUT_TOOL_NAMES) <= set(executor.runner.builtins.names)
    (msg,) = _run(executor, InMemoryStore(), "t1", _call("server_log"))
    assert msg.artifact["offloaded"]["kind"] == "text"
    assert "search_large_output" in msg.content and "query_large_output" not in msg.content


def test_output_tools_read_search_and_query_a_handle() -> None:
    store, executor = InMemoryStore(), ToolExecutor(_catalog())
    handle = _handle(_run(executor, store, "t1", _call("list_orders"))[0])
    read, search, query = _run(
        executor,
        store,
        "t1",
        _call("read_large_output", {"handle": handle, "start": 0, "length": 30}, "a"),
        _call("search_large_output", {"handle": handle, "pattern": '"id": 42,'}, "b"),
        _call("query_large_output", {"handle": handle, "jq_expression": ".count"}, "c"),
    )
    assert read.status == "success" and read.content.endswith(BIG_JSON[:30])
    assert "next: start=30" in read.content
    assert json.loads(search.content)["total"] == 1
    assert query.content == "3000"


def test_a_large_jq_result_is_answered_with_its_size_and_shape_not_offloaded() -> None:
    # Was: offloaded in turn, a new stub (and a new stored copy: '.' copied the whole output).
    store, executor = InMemoryStore(), ToolExecutor(_catalog())
    handle = _handle(_run(executor, store, "t1", _call("list_orders"))[0])
    (query,) = _run(
        executor,
        store,
        "t1",
        _call("query_large_output", {"handle": handle, "jq_expression": ".orders"}),
    )
    assert query.status == "error" and query.artifact is None
    assert "array of 3000 items" in query.content and "over the 20,000" in query.content
    assert "'.items[:50]'" in query.content
    assert [i.key for i in store.search(_ns("t1")) if i.key.startswith("out_")] == [handle]
    (part,) = _run(
        executor,
        store,
        "t1",
        _call("query_large_output", {"handle": handle, "jq_expression": ".orders[:50]"}),
    )
    assert json.loads(part.content) == ORDERS["orders"][:50]


LOG = "\n".join(f"line {i}: " + "x" * 60 for i in range(2000))  # ~140k characters


def server_log_big() -> str:
    """The server's log as text."""
    return LOG


@pytest.mark.parametrize(
    "limit",
    [{"offload_over_chars": 20_000}, {"offload_over_chars": 2_000}, {"offload_over_chars": 500}]
    + [{"offload_over_chars": None, "offload_over_tokens": 250}],
)
def test_the_output_tools_answers_fit_the_limit_and_are_never_offloaded_again(
    limit: dict[str, Any],
) -> None:
    catalog = ToolCatalog.from_tools(
        [server_log_big], tool_metadata={"server_log_big": {"include": "always"}}
    )
    executor = ToolExecutor(catalog, **limit)
    most = executor.runner.offloader.limit
    store = InMemoryStore()
    (stub,) = _run(executor, store, "t1", _call("server_log_big"))
    handle = _handle(stub)
    suggested = int(re.search(r"length=(\d+)", stub.content).group(1))
    family = executor.runner.builtins.family("read_large_output")
    (read_def,) = [d for d in family.definitions() if d.name == "read_large_output"]
    offered = int(re.search(r"up to ([\d,]+) char", read_def.description)[1].replace(",", ""))
    assert suggested <= offered < most
    # What the description offers, more, and the default: text, header and all within the limit.
    for length in (offered, most, 10 * most, 4000):
        (read,) = _run(
            executor,
            store,
            "t1",
            _call("read_large_output", {"handle": handle, "start": 0, "length": length}),
        )
        assert read.status == "success" and read.artifact is None, read.content[:200]
        header, chunk = read.content.split("\n", 1)
        assert len(read.content) <= most and chunk == LOG[: min(length, offered)]
        if length > offered:
            assert f"one read returns at most {offered:,} characters" in header
    # Following the stub's advice and each header's "next" reads the whole output back.
    got, start = "", 0
    while True:
        (read,) = _run(
            executor,
            store,
            "t1",
            _call("read_large_output", {"handle": handle, "start": start, "length": suggested}),
        )
        header, chunk = read.content.split("\n", 1)
        got += chunk
        found = re.search(r"next: start=(\d+)", header)
        if found is None:
            assert "end of output" in header
            break
        start = int(found.group(1))
    assert got == LOG
    # A search with much context shows what fits, says so, and its offsets still land.
    (search,) = _run(
        executor,
        store,
        "t1",
        _call("search_large_output", {"handle": handle, "pattern": "line 1", "context_lines": 10}),
    )
    found = json.loads(search.content)
    assert len(search.content) <= most and found["total"] == 1111
    assert found["shown"] >= 1 and "fit in one answer" in found["note"]
    for match in found["matches"]:
        assert LOG[match["offset"] :].startswith("line 1")
    assert [i.key for i in store.search(_ns("t1", catalog)) if i.key.startswith("out_")] == [handle]


def test_a_search_cut_to_fit_shows_every_match_with_less_context_first() -> None:
    full = search_output(BIG_TEXT, "ok", 10)
    assert full["shown"] == MAX_MATCHES and "note" not in full
    offsets = [m["offset"] for m in full["matches"]]
    lines_only = search_output(BIG_TEXT, "ok", 10, max_chars=6_000)
    assert len(search_answer(lines_only)) <= 6_000 and lines_only["shown"] == MAX_MATCHES
    assert all("\n" not in m["context"] for m in lines_only["matches"])
    assert "each with its line only" in lines_only["note"]
    bare = search_output(BIG_TEXT, "ok", 10, max_chars=1_200)
    assert [m["offset"] for m in bare["matches"]] == offsets and "context" not in bare["matches"][0]
    assert "without context" in bare["note"]
    few = search_output(BIG_TEXT, "ok", 10, max_chars=700)
    assert len(search_answer(few)) <= 700 and 0 < few["shown"] < MAX_MATCHES
    assert [m["offset"] for m in few["matches"]] == offsets[: few["shown"]]
    assert few["total"] == full["total"] == 2994


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        (
            "read_large_output",
            {"handle": "out_000000000000"},
            "no offloaded output 'out_000000000000'",
        ),
        ("read_large_output", {"handle": None}, "no offloaded output None"),
        ("read_large_output", {"start": 10**9}, "bad range"),
        ("read_large_output", {"start": 0, "length": -5}, "bad range"),
        ("search_large_output", {"pattern": "(a"}, "invalid regex pattern"),
        ("search_large_output", {"pattern": "(a{1000}){1000}"}, "invalid repetition"),
        ("query_large_output", {"jq_expression": ".orders["}, "jq expression"),
        ("query_large_output", {"jq_expression": ".count | keys"}, "has no keys"),
        ("query_large_output", {"jq_expression": 5}, "jq expression 5 failed: not a string"),
        ("query_large_output", {"jq_expression": " "}, "failed: empty expression"),
    ],
)
def test_bad_requests_are_error_tool_messages(
    name: str, args: dict[str, Any], expected: str
) -> None:
    store, executor = InMemoryStore(), ToolExecutor(_catalog())
    handle = _handle(_run(executor, store, "t1", _call("list_orders"))[0])
    (msg,) = _run(executor, store, "t1", _call(name, {"handle": handle, **args}))
    assert msg.status == "error"
    assert expected in msg.content


@pytest.mark.parametrize("name", ["read_large_output", "search_large_output", "query_large_output"])
def test_a_call_without_a_handle_is_told_the_argument_it_missed(name: str) -> None:
    # Was "no offloaded output None": the model had named the argument otherwise.
    store, executor = InMemoryStore(), ToolExecutor(_catalog())
    handle = _handle(_run(executor, store, "t1", _call("list_orders"))[0])
    (msg,) = _run(executor, store, "t1", _call(name, {"ref": handle}))
    assert msg.status == "error"
    assert msg.content.startswith(f"Error: {name} needs the argument 'handle'"), msg.content
    assert f"(its latest: {handle}); got {{'ref': '{handle}'}}" in msg.content


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
@pytest.mark.parametrize("name", ["read_large_output", "search_large_output", "query_large_output"])
def test_arguments_that_are_no_object_are_told_the_handle_is_missing(name: str, api: str) -> None:
    # A list or a number raised inside the answer ("could not answer this call (TypeError:
    # argument of type 'int' is not iterable)"), as did a text for the tools needing two.
    store, executor = InMemoryStore(), ToolExecutor(_catalog())
    handle = _handle(_run(executor, store, "t1", _call("list_orders"))[0])
    for sent in (5, True, 0, [], [handle], handle):
        state = _state(_call(name))
        state["messages"][-1].tool_calls[0]["args"] = sent  # as a model node of your own may
        (msg,) = _run_state(executor, store, "t1", state, api)
        if (
            sent == handle and name == "read_large_output"
        ):  # a text for its one required argument: the handle
            assert msg.status != "error" and msg.content.startswith(f"[{handle}: characters 0-")
            continue
        assert msg.status == "error"
        assert msg.content.startswith(f"Error: {name} needs the argument 'handle'"), msg.content
        assert f"got {sent!r}" in msg.content


def test_output_tools_read_numbers_sent_as_text_and_a_misspelt_key_as_catalog_tools_do() -> None:
    # Was refused ("bad range start=0, length='100'"): small models send numbers as strings.
    store, executor = InMemoryStore(), ToolExecutor(_catalog())
    handle = _handle(_run(executor, store, "t1", _call("list_orders"))[0])
    args = {"Handle": handle, "start": "10", "length": "100"}
    (read,) = _run(executor, store, "t1", _call("read_large_output", args))
    assert read.status != "error", read.content
    assert read.content.startswith(f"[{handle}: characters 10-110 of ")
    args = {"handle": handle, "pattern": "order", "context_lines": "0"}
    (found,) = _run(executor, store, "t1", _call("search_large_output", args))
    assert found.status != "error" and json.loads(found.content)["total"] > 0, found.content
    (bad,) = _run(
        executor, store, "t1", _call("read_large_output", {"handle": handle, "start": "x"})
    )
    assert bad.status == "error" and "bad range start='x'" in bad.content


@pytest.mark.parametrize(
    ("name", "needed"),
    [
        ("search_large_output", "'pattern', a regular"),
        ("query_large_output", "'jq_expression', a jq"),
    ],
)
def test_a_call_without_its_pattern_or_expression_is_told_the_argument_it_missed(
    name: str, needed: str
) -> None:
    # Was "jq expression None failed: empty expression" for {"handle": ..., "query": ...}.
    store, executor = InMemoryStore(), ToolExecutor(_catalog())
    handle = _handle(_run(executor, store, "t1", _call("list_orders"))[0])
    (msg,) = _run(executor, store, "t1", _call(name, {"handle": handle, "query": ".x"}))
    assert msg.status == "error"
    assert msg.content.startswith(f"Error: {name} needs the argument {needed}"), msg.content
    assert "got {'handle': " in msg.content and "'query': '.x'}" in msg.content


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("read_large_output", {"handle": "h" * 1_000_000}, "(1000002 characters)"),
        ("read_large_output", {"handle": _nested(5000)}, "nested deeper than 32 levels"),
        ("read_large_output", {"start": "s" * 1_000_000}, "bad range start='sss"),
        ("read_large_output", {"length": list(range(300_000))}, "length=[0, 1, 2"),
        ("query_large_output", {"jq_expression": list(range(300_000))}, "expression [0, 1, 2"),
        ("query_large_output", {"jq_expression": _nested(5000)}, "nested deeper than 32"),
    ],
    ids=["huge-handle", "deep-handle", "huge-start", "huge-length", "huge-jq", "deep-jq"],
)
def test_the_output_tools_echo_what_the_model_sent_bounded(
    name: str, args: dict[str, Any], expected: str
) -> None:
    store, executor = InMemoryStore(), ToolExecutor(_catalog())
    handle = _handle(_run(executor, store, "t1", _call("list_orders"))[0])
    (msg,) = _run(executor, store, "t1", _call(name, {"handle": handle, **args}))
    assert msg.status == "error" and expected in msg.content
    assert len(msg.content) < 1_000


def test_a_handle_from_another_thread_is_an_error_naming_the_rule() -> None:
    store, executor = InMemoryStore(), ToolExecutor(_catalog())
    handle = _handle(_run(executor, store, "alice", _call("list_orders"))[0])
    (msg,) = _run(executor, store, "bob", _call("read_large_output", {"handle": handle}))
    assert msg.status == "error"
    assert "another conversation" in msg.content and handle in msg.content


def test_the_tools_artifact_is_kept_when_small_and_dropped_when_large() -> None:
    @tool(response_format="content_and_artifact")
    def report(size: int) -> tuple[str, dict[str, Any]]:
        """A report with an artifact."""
        return BIG_TEXT, {"rows": "r" * size}

    catalog = ToolCatalog.from_tools([report], tool_metadata={"report": {"include": "always"}})
    store, executor = InMemoryStore(), ToolExecutor(catalog)
    kept, dropped = _run(
        executor,
        store,
        "t",
        _call("report", {"size": 10}, "a"),
        _call("report", {"size": 50_000}, "b"),
    )
    assert kept.artifact["artifact"] == {"rows": "r" * 10}
    assert "dropped" not in kept.content
    assert "artifact" not in dropped.artifact
    assert dropped.artifact["offloaded"]["artifact_dropped_chars"] > 50_000
    assert "artifact of" in dropped.content and "was dropped" in dropped.content


def test_eviction_at_the_cap_is_oldest_first() -> None:
    config = BudgetConfig(offload_thread_cap_chars=2 * len(BIG_TEXT) + 10)
    store, executor = InMemoryStore(), ToolExecutor(_catalog(), config=config)
    handles = [_handle(_run(executor, store, "t", _call("server_log"))[0]) for _ in range(3)]
    ns = _ns("t")
    assert store.get(ns, handles[0]) is None
    assert all(store.get(ns, h) is not None for h in handles[1:])
    assert OffloadStore(store, ns, cap_chars=1, ttl_minutes=None).handles() == handles[1:]
    (msg,) = _run(executor, store, "t", _call("read_large_output", {"handle": handles[0]}))
    assert msg.status == "error" and handles[2] in msg.content  # lists the latest handles


def test_a_graph_without_a_store_uses_the_fallback_store() -> None:
    model = ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[_call("list_orders")]),
            lambda messages, tools: AIMessage(
                "",
                tool_calls=[
                    _call(
                        "query_large_output",
                        {"handle": _handle(messages[-1]), "jq_expression": ".orders | length"},
                        "q",
                    )
                ],
            ),
            "done",
        ]
    )
    app = create_toolbudget_agent(model, _catalog()).compile(checkpointer=MemorySaver())
    out = app.invoke({"messages": [HumanMessage("orders")]}, {"configurable": {"thread_id": "x"}})
    assert out["messages"][-2].content == "3000"


# --- sync and async, InMemoryStore and SqliteStore ---------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    with SqliteStore.from_conn_string(str(tmp_path / "store.db")) as sqlite_store:
        sqlite_store.setup()
        yield sqlite_store


def _agent_script() -> ScriptedChatModel:
    def query(messages: list[Any], tools: list[str]) -> AIMessage:
        handle = _handle(messages[-1])
        return AIMessage(
            "",
            tool_calls=[
                _call("read_large_output", {"handle": handle, "start": 2, "length": 8}, "r"),
                _call("search_large_output", {"handle": handle, "pattern": '"id": 7,'}, "s"),
                _call(
                    "query_large_output",
                    {"handle": handle, "jq_expression": ".orders[7].customer"},
                    "q",
                ),
            ],
        )

    return ScriptedChatModel(
        responses=[AIMessage("", tool_calls=[_call("list_orders")]), query, "done"]
    )


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_tool_agent_reads_searches_and_queries_in_each_store(
    store: BaseStore, how: str
) -> None:
    graph_cls = ToolAgent(_agent_script(), _catalog())
    from langgraph.graph import START, StateGraph

    from langgraph_toolbudget import ToolBudgetState

    graph = StateGraph(ToolBudgetState)
    graph.add_node("agent", graph_cls)
    graph.add_edge(START, "agent")
    app = graph.compile(store=store)
    config = {"configurable": {"thread_id": f"t-{how}"}}
    inputs = {"messages": [HumanMessage("orders")]}
    out = app.invoke(inputs, config) if how == "invoke" else await app.ainvoke(inputs, config)
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    stub, read, search, query = tool_messages
    assert stub.artifact["offloaded"]["chars"] == len(BIG_JSON)
    assert read.content.endswith(BIG_JSON[2:10])
    assert json.loads(search.content)["total"] == 1
    assert json.loads(query.content) == "c0"
    assert out["messages"][-1].content == "done"


def _binary_log() -> str:
    """A log read from a binary file as text (a NUL, a lone surrogate)."""
    return "head\x00er \udcff\n" + BIG_TEXT


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_an_output_holding_what_a_store_refuses_is_offloaded_with_it_replaced(
    store: BaseStore, how: str
) -> None:
    # SqliteStore refuses a lone surrogate (PostgresStore a NUL too: test_offload_postgres.py):
    # the turn ended with the store's error after the tool had run.
    catalog = ToolCatalog.from_tools(
        [_binary_log], tool_metadata={"_binary_log": {"include": "always"}}
    )
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog))
    graph.add_edge(START, "tools")
    app = graph.compile(store=store)
    config = {"configurable": {"thread_id": how}}
    state = _state(_call("_binary_log"))
    out = app.invoke(state, config) if how == "invoke" else await app.ainvoke(state, config)
    stub = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    item = store.get(_ns(how, catalog), _handle(stub))
    assert item is not None
    assert item.value["text"] == "head\ufffder \ufffd\n" + BIG_TEXT
    assert item.value["chars"] == len(_binary_log())


class _CountingEmbeddings(Embeddings):
    """Counts what a store with a semantic index sends its embedding model."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


@pytest.mark.parametrize("fields", [None, ["text"]])
@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_a_store_with_a_semantic_index_never_embeds_offloaded_outputs(
    how: str, fields: list[str] | None
) -> None:
    # LangGraph server's store with `index` in langgraph.json embeds every put by default: each
    # offloaded output went to the embedding model whole (a network call, the tool's data to a
    # provider, over its input limit for a large output).
    embeddings = _CountingEmbeddings()
    index: dict[str, Any] = {"embed": embeddings, "dims": 2}
    if fields is not None:
        index["fields"] = fields
    store = InMemoryStore(index=index)  # type: ignore[arg-type]
    app = create_toolbudget_agent(_agent_script(), _catalog()).compile(store=store)
    config = {"configurable": {"thread_id": how}}
    inputs = {"messages": [HumanMessage("orders")]}
    out = app.invoke(inputs, config) if how == "invoke" else await app.ainvoke(inputs, config)
    stub, read, *_ = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert store.get(_ns(how), _handle(stub)) is not None
    assert read.content.endswith(BIG_JSON[2:10])
    assert embeddings.texts == []


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_an_output_the_store_cannot_keep_is_cut_with_a_note_and_the_turn_goes_on(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A store that fails (here a real SqliteStore whose connection closed) ended the turn
    # after the tools had run, so a retry ran them again; the model now reads what fits.
    with SqliteStore.from_conn_string(str(tmp_path / "gone.db")) as gone:
        gone.setup()
    app = StateGraph(ToolBudgetState)
    app.add_node("tools", ToolExecutor(_catalog(), config=BudgetConfig(offload_over_chars=5000)))
    app.add_edge(START, "tools")
    graph = app.compile(store=gone)
    state = _state(_call("server_log", i="a"), _call("small", i="b"), _call("list_orders", i="c"))
    config = {"configurable": {"thread_id": "t"}}
    out = graph.invoke(state, config) if how == "invoke" else await graph.ainvoke(state, config)
    cut, tiny, orders = (m for m in out["messages"] if isinstance(m, ToolMessage))
    assert tiny.content == "tiny"
    assert cut.status == "success" and cut.content.startswith(BIG_TEXT[:5000] + "\n[Output cut")
    assert f"the first 5,000 of {len(BIG_TEXT):,} characters are shown" in cut.content
    assert "(ProgrammingError)" in cut.content and "call the tool again" in cut.content
    assert "closed database" not in cut.content  # the store's own text is the operator's
    facts = cut.artifact["not_offloaded"]
    assert facts == {"chars": len(BIG_TEXT), "shown": 5000, "error": "ProgrammingError"}
    assert orders.content.startswith(BIG_JSON[:5000] + "\n[Output cut")
    # The store is asked once a batch: a store that is down costs one of its timeouts.
    (record,) = [r for r in caplog.records if "could not keep" in r.getMessage()]
    assert "(of server_log, list_orders)" in record.getMessage()
    assert "closed database" in str(record.exc_info[1])


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_a_failing_store_is_asked_once_a_batch_for_built_in_answers_too(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Each large built-in answer (python_execution) was offloaded on its own: a store that is
    # down was asked, and warned of, once per answer, besides the regular outputs' once.
    with SqliteStore.from_conn_string(str(tmp_path / "gone.db")) as gone:
        gone.setup()

    def program(i: int) -> dict[str, Any]:
        return _call("python_execution", {"code": f"print('p{i}' * 10000)"}, f"p{i}")

    model = ScriptedChatModel(
        responses=[AIMessage("", tool_calls=[program(1), program(2), _call("server_log")]), "ok"],
        cycle=False,
    )
    app = create_toolbudget_agent(
        model,
        _catalog(),
        enabled_builtins=["python_execution"],
        tool_call_formats=["native", "codemode"],
        offload_over_chars=5000,
    ).compile(store=gone)
    payload = {"messages": [HumanMessage("go")]}
    out = app.invoke(payload) if how == "invoke" else await app.ainvoke(payload)
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == 3 and all("not_offloaded" in m.artifact for m in answers)
    assert len([r for r in caplog.records if "could not keep" in r.getMessage()]) == 1


def test_sqlite_store_items_get_the_ttl(tmp_path: Path) -> None:
    path = tmp_path / "ttl.db"
    with SqliteStore.from_conn_string(str(path)) as sqlite_store:
        sqlite_store.setup()
        config = BudgetConfig(offload_ttl_minutes=30)
        (msg,) = _run(
            ToolExecutor(_catalog(), config=config), sqlite_store, "t", _call("server_log")
        )
    with sqlite3.connect(path) as conn:
        ttl = conn.execute(
            "SELECT ttl_minutes FROM store WHERE key = ?", (_handle(msg),)
        ).fetchone()
    assert ttl == (30.0,)


PROCESS = textwrap.dedent(
    """
    import json, sys
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore
    from langgraph_toolbudget import ToolCatalog, create_toolbudget_agent
    from langgraph_toolbudget.testing import ScriptedChatModel

    def server_log() -> str:
        '''The server's log as text.'''
        return "\\n".join(f"line {i}: {'error' if i % 500 == 0 else 'ok'}" for i in range(5000))

    step, db = sys.argv[1], sys.argv[2]
    always = {"server_log": {"include": "always"}}
    catalog = ToolCatalog.from_tools([server_log], tool_metadata=always)
    def read(messages, tools):
        stub = next(m for m in reversed(messages) if m.type == "tool")
        handle = stub.artifact["offloaded"]["handle"]
        return AIMessage("", tool_calls=[{"name": "search_large_output",
            "args": {"handle": handle, "pattern": "line 4500"}, "id": "s"}])
    first = AIMessage("", tool_calls=[{"name": "server_log", "args": {}, "id": "l"}])
    model = ScriptedChatModel(responses=[first, "stored"] if step == "1" else [read, "found"])
    with SqliteSaver.from_conn_string(db) as saver, SqliteStore.from_conn_string(db) as store:
        store.setup()
        app = create_toolbudget_agent(model, catalog).compile(checkpointer=saver, store=store)
        out = app.invoke({"messages": [HumanMessage("log")]}, {"configurable": {"thread_id": "p"}})
    rows = [[m.type, getattr(m, "status", None), str(m.content)] for m in out["messages"]]
    print(json.dumps(rows))
    """
)


@pytest.mark.slow  # a process restart or a deadline of seconds
def test_handles_survive_a_process_restart_with_sqlite(tmp_path: Path) -> None:
    script, db = tmp_path / "agent.py", str(tmp_path / "state.db")
    script.write_text(PROCESS)

    def run(step: str) -> list[list[Any]]:
        done = subprocess.run(
            [sys.executable, str(script), step, db], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = run("1")
    assert first[-1][2] == "stored" and "Large output offloaded" in first[-2][2]
    second = run("2")
    assert second[-1][2] == "found"
    found = json.loads(second[-2][2])
    assert second[-2][1] == "success" and found["total"] == 1
    assert found["matches"][0]["line"] == 4501


def test_bad_offload_options_raise_naming_them() -> None:
    with pytest.raises(ValueError, match="offload_over_chars"):
        BudgetConfig(offload_over_chars=0)
    with pytest.raises(TypeError, match="offload_ttl_minutes"):
        BudgetConfig(offload_ttl_minutes="1h")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="offload_ttl_minutes"):
        BudgetConfig(offload_ttl_minutes=-1)
    with pytest.raises(TypeError, match="offload_over_chars"):
        ToolExecutor(_catalog(), offload_over_chars="big")  # type: ignore[arg-type]


def test_the_namespace_is_per_assistant_and_thread() -> None:
    on_server = {"configurable": {"thread_id": "t", "assistant_id": "a1"}}
    store = OffloadStore.of(on_server, BudgetConfig(), "app")  # type: ignore[arg-type]
    assert store.namespace == (*NAMESPACE, "assistant", "a1", "thread", "t")
    assert store.store is fallback_store()
    other = OffloadStore.of(
        {"configurable": {"thread_id": "t", "assistant_id": "a2"}},  # type: ignore[arg-type]
        BudgetConfig(),
        "app",
    )
    handle = store.put("x" * 10, "text")
    assert store.get(handle) is not None and other.get(handle) is None
    assert store.get("__index__") is None  # the index is not an output


def test_tool_messages_inside_a_command_are_offloaded_too() -> None:
    @tool
    def load_log(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Load the log into the conversation."""
        message = ToolMessage(BIG_TEXT, tool_call_id=tool_call_id, name="load_log")
        return Command(update={"messages": [message]})

    catalog = ToolCatalog.from_tools([load_log], tool_metadata={"load_log": {"include": "always"}})
    (msg,) = _run(ToolExecutor(catalog), InMemoryStore(), "t", _call("load_log"))
    assert msg.artifact["offloaded"]["chars"] == len(BIG_TEXT)
    assert msg.tool_call_id == "c1" and len(msg.content) < 2_000


def test_without_jq_the_query_tool_is_left_out_unless_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins as py_builtins

    real_import = py_builtins.__import__

    def no_jq(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "jq":
            raise ImportError("No module named 'jq'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(py_builtins, "__import__", no_jq)
    names = ToolExecutor(_catalog()).runner.builtins.names
    assert "read_large_output" in names and "query_large_output" not in names
    patterns = BudgetConfig(enabled_builtins=["*_large_output"])
    assert "query_large_output" not in ToolExecutor(_catalog(), config=patterns).runner.builtins
    asked = BudgetConfig(enabled_builtins=["read_large_output", "query_large_output"])
    with pytest.raises(ImportError, match=r"langgraph-toolbudget\[offload\]"):
        ToolExecutor(_catalog(), config=asked)
    with pytest.raises(ImportError, match=r"pip install jq"):
        query_json(BIG_JSON, "h", ".count")


def test_under_ainvoke_every_shape_of_large_result_is_offloaded_and_small_ones_kept() -> None:
    # Text, text blocks and a Command's message must all be found under ainvoke too.
    import asyncio

    from langgraph.graph import START, StateGraph

    from langgraph_toolbudget import ToolBudgetState

    def blocks() -> list[dict[str, str]]:
        """The log as text blocks."""
        return [{"type": "text", "text": BIG_TEXT}]

    @tool
    def load_log(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Load the log into the conversation."""
        return Command(update={"messages": [ToolMessage(BIG_TEXT, tool_call_id=tool_call_id)]})

    tools: list[Any] = [list_orders, small, blocks, load_log]
    names = ["list_orders", "small", "blocks", "load_log"]
    catalog = ToolCatalog.from_tools(tools, tool_metadata={n: {"include": "always"} for n in names})
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog))
    graph.add_edge(START, "tools")
    app = graph.compile(store=InMemoryStore())
    for name in names:
        state = _state(_call(name))
        out = asyncio.run(app.ainvoke(state, {"configurable": {"thread_id": name}}))
        (msg,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
        if name == "small":
            assert msg.content == "tiny" and msg.artifact is None
        else:
            assert msg.artifact["offloaded"]["chars"] > 20_000, name
            assert len(msg.content) < 2_000, name


# --- whose outputs: a handle is read only by the run that made it (issue 25, item 7) -------

PAYROLL = json.dumps(
    {"salaries": [{"name": f"employee {i}", "eur": 50_000 + i} for i in range(2000)]}
)


def payroll() -> str:
    """The company's payroll as JSON."""
    return PAYROLL


def _payroll_catalog() -> ToolCatalog:
    return ToolCatalog.from_tools([payroll], tool_metadata={"payroll": {"include": "always"}})


def _reader(handle: str) -> ScriptedChatModel:
    """A model that loads its own output, then reads ``handle`` (someone else's)."""

    def read(messages: list[Any], tools: list[str]) -> AIMessage:
        args = {"handle": handle, "jq_expression": ".salaries[0]"}
        return AIMessage("", tool_calls=[_call("query_large_output", args, "steal")])

    return ScriptedChatModel(
        responses=[AIMessage("", tool_calls=[_call("server_log", {}, "own")]), read, "done"]
    )


def _stolen(out: dict[str, Any]) -> ToolMessage:
    return next(
        m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "steal"
    )


def test_a_run_without_a_thread_id_reads_only_its_own_outputs() -> None:
    victim_model = ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[_call("payroll", {}, "p"), _call("server_log", {}, "l")]),
            lambda messages, tools: AIMessage(
                "",
                tool_calls=[
                    _call(
                        "query_large_output",
                        {"handle": _handle(messages[-2]), "jq_expression": ".salaries | length"},
                        "q",
                    )
                ],
            ),
            "done",
        ]
    )
    catalog = ToolCatalog.from_tools(
        [payroll, server_log],
        tool_metadata={"payroll": {"include": "always"}, "server_log": {"include": "always"}},
    )
    victim = create_toolbudget_agent(victim_model, catalog).compile()  # no store, no thread
    out = victim.invoke({"messages": [HumanMessage("payroll")]})
    stubs = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert stubs[-1].content == "2000"  # the run reads its own outputs
    salaries, log = _handle(stubs[0]), _handle(stubs[1])

    thief = create_toolbudget_agent(_reader(salaries), catalog).compile()
    out = thief.invoke({"messages": [HumanMessage("read it")]})
    own = _handle(next(m for m in out["messages"] if isinstance(m, ToolMessage)))
    refused = _stolen(out)
    assert refused.status == "error" and "no offloaded output" in refused.content
    assert "employee" not in refused.content and log not in refused.content
    assert own in refused.content  # the error names the caller's own handles, only those


@pytest.mark.parametrize("shared_store", [False, True], ids=["fallback", "one-store"])
def test_two_apps_with_the_same_thread_id_do_not_share_outputs(shared_store: bool) -> None:
    store = InMemoryStore() if shared_store else None
    thread = {"configurable": {"thread_id": "42"}}
    first = AIMessage("", tool_calls=[_call("payroll", {}, "p")])
    victim = create_toolbudget_agent(
        ScriptedChatModel(responses=[first, "done"]), _payroll_catalog()
    ).compile(checkpointer=MemorySaver(), store=store)
    out = victim.invoke({"messages": [HumanMessage("payroll")]}, thread)
    handle = _handle(next(m for m in out["messages"] if isinstance(m, ToolMessage)))

    other = create_toolbudget_agent(_reader(handle), _catalog()).compile(
        checkpointer=MemorySaver(), store=store
    )
    refused = _stolen(other.invoke({"messages": [HumanMessage("read it")]}, thread))
    assert refused.status == "error" and "employee" not in refused.content
    assert "no offloaded output" in refused.content
    # To the model, this is also a redeploy with other tools: it is told why, not only "not yours".
    assert "an app whose tools changed may no longer reach the outputs" in refused.content


def test_the_same_tools_in_another_graph_read_the_threads_outputs() -> None:
    # Another worker (or a restart) of the same app: a new executor, the same tool set.
    store = InMemoryStore()
    handle = _handle(_run(ToolExecutor(_catalog()), store, "t", _call("list_orders"))[0])
    (read,) = _run(
        ToolExecutor(_catalog()), store, "t", _call("read_large_output", {"handle": handle})
    )
    assert read.status == "success" and read.content.endswith(BIG_JSON[:4000])


def test_offload_app_id_names_the_app_instead_of_its_tools() -> None:
    store = InMemoryStore()
    payroll_app = BudgetConfig(offload_app_id="payroll")
    handle = _handle(
        _run(ToolExecutor(_payroll_catalog(), config=payroll_app), store, "t", _call("payroll"))[0]
    )
    query = _call("query_large_output", {"handle": handle, "jq_expression": ".salaries | length"})
    same_name = ToolExecutor(_catalog(), config=payroll_app)  # other tools, same app id
    assert _run(same_name, store, "t", query)[0].content == "2000"
    other_name = BudgetConfig(offload_app_id="chatbot")  # same tools, another app
    (refused,) = _run(ToolExecutor(_payroll_catalog(), config=other_name), store, "t", query)
    assert refused.status == "error" and "no offloaded output" in refused.content


def test_handles_are_random_and_a_thread_id_may_hold_periods() -> None:
    store, executor = InMemoryStore(), ToolExecutor(_catalog())
    handles = {_handle(_run(executor, store, "user.42", _call("server_log"))[0]) for _ in range(5)}
    assert len(handles) == 5
    assert all(re.fullmatch(r"out_[0-9a-f]{24}", h) for h in handles)  # 96 random bits
    (read,) = _run(executor, store, "user.42", _call("read_large_output", {"handle": min(handles)}))
    assert read.status == "success"


# --- search bounds (issue 25, item 8) ---------------------------------------------------


def test_a_pattern_over_500_characters_is_refused_at_once() -> None:
    def letters() -> str:
        """Half a million a's."""
        return "a" * 500_000

    catalog = ToolCatalog.from_tools([letters], tool_metadata={"letters": {"include": "always"}})
    store, executor = InMemoryStore(), ToolExecutor(catalog)
    handle = _handle(_run(executor, store, "t", _call("letters"))[0])
    pattern = "a?" * 375 + "a" * 749 + "b"  # 1,500 characters: 6.9 s to search unbounded
    started = time.monotonic()
    args = {"handle": handle, "pattern": pattern}
    (msg,) = _run(executor, store, "t", _call("search_large_output", args))
    assert time.monotonic() - started < 3
    assert msg.status == "error" and "1,500 characters long" in msg.content
    assert "at most 500" in msg.content


@pytest.mark.timeout(60)
@pytest.mark.slow  # a process restart or a deadline of seconds
def test_a_costly_pattern_stops_at_the_deadline_and_says_how_far_it_got() -> None:
    def letters() -> str:
        """Five million a's."""
        return "a" * 5_000_000

    catalog = ToolCatalog.from_tools([letters], tool_metadata={"letters": {"include": "always"}})
    store, executor = InMemoryStore(), ToolExecutor(catalog)
    handle = _handle(_run(executor, store, "t", _call("letters"))[0])
    started = time.monotonic()
    (msg,) = _run(
        executor,
        store,
        "t",
        _call("search_large_output", {"handle": handle, "pattern": "a{1000}b"}),
    )
    took = time.monotonic() - started
    found = json.loads(msg.content)
    assert found["complete"] is False and found["total"] == 0
    assert "stopped after 5 s at character" in found["note"]
    assert 4.5 < took < 15  # 55 s unbounded


def test_a_long_line_is_searched_in_slices_without_losing_matches() -> None:
    pattern = "needle|q{1000}r{300}"  # a large program: its lines are searched in short slices
    piece = max(MIN_SLICE, SLICE_WORK // _compile_pattern(pattern).programsize)
    assert piece < 20_000
    for at in (10, piece - 3, 50_000, 99_990):  # first slice, across a slice edge, later
        line = "x" * at + "needle" + "x" * (100_000 - at)
        found = search_output("head\n" + line + "\ntail", pattern, 0)
        assert found["total"] == 1 and "complete" not in found
        assert found["matches"][0]["line"] == 2 and found["matches"][0]["offset"] == 5 + at
        assert "needle" in found["matches"][0]["context"]


def test_anchors_and_word_boundaries_see_a_long_lines_edges_not_its_slices() -> None:
    pattern = r"^id|id$|\bid\b|q{1000}r{300}"
    piece = max(MIN_SLICE, SLICE_WORK // _compile_pattern(pattern).programsize)
    lines = [
        "x" * piece + "id" + "x" * piece,  # "id" starts the second slice, inside a word
        "x" * (piece + SLICE_OVERLAP - 2) + "id" + "x" * piece,  # "id" ends the first slice
        "id" + "x" * 2 * piece,
        "x" * 2 * piece + "id",
        "x" * (piece - 1) + " id " + "x" * piece,  # a word at the second slice's start
    ]
    found = search_output("\n".join(lines), pattern, 0)
    assert [m["line"] for m in found["matches"]] == [3, 4, 5]


# --- the fallback store is bounded (issue 25, item 9) --------------------------------------


def _stored_bytes(store: BaseStore) -> int:
    items = store.search(NAMESPACE, limit=1_000_000)
    return sum(sys.getsizeof(i.value["text"]) for i in items if "text" in i.value)


def test_the_fallback_store_keeps_256_mib_for_24_hours() -> None:
    assert fallback_store().max_bytes == 256 * 2**20
    assert fallback_store().max_age_s == 24 * 60 * 60


def test_the_fallback_store_stays_under_its_byte_bound_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fallback = fallback_store()
    monkeypatch.setattr(fallback, "max_bytes", 4 * 2**20)

    def dump(n: int) -> str:
        """One megabyte of text."""
        return f"dump {n}\n" + "x" * 1_000_000

    catalog = ToolCatalog.from_tools([dump], tool_metadata={"dump": {"include": "always"}})
    executor = ToolExecutor(catalog)
    app = StateGraph(ToolBudgetState).add_node("tools", executor).add_edge(START, "tools").compile()
    handles = []
    for n in range(30):  # 30 threads, 1 MB each, no store: the process-wide fallback
        out = app.invoke(_state(_call("dump", {"n": n})), {"configurable": {"thread_id": f"d{n}"}})
        handles.append(_handle(out["messages"][-1]))
        assert _stored_bytes(fallback) == fallback.stored_bytes <= 4 * 2**20
    assert len(fallback.list_namespaces(prefix=NAMESPACE, limit=1000)) <= 4  # the rest are gone
    oldest = app.invoke(
        _state(_call("read_large_output", {"handle": handles[0]})),
        {"configurable": {"thread_id": "d0"}},
    )["messages"][-1]
    assert oldest.status == "error" and "no offloaded output" in oldest.content
    newest = app.invoke(
        _state(_call("read_large_output", {"handle": handles[-1], "length": 7})),
        {"configurable": {"thread_id": "d29"}},
    )["messages"][-1]
    assert newest.status == "success" and newest.content.endswith("dump 29")


def test_the_fallback_store_drops_outputs_older_than_its_age_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langgraph_toolbudget.execution import output_store

    store = output_store.BoundedMemoryStore(max_bytes=2**30, max_age_s=3600)
    clock = [1_000.0]
    monkeypatch.setattr(output_store, "_now", lambda: clock[0])
    old = OffloadStore(store, (*NAMESPACE, "a", "thread", "1"), cap_chars=10**9, ttl_minutes=None)
    new = OffloadStore(store, (*NAMESPACE, "a", "thread", "2"), cap_chars=10**9, ttl_minutes=None)
    stale = old.put("o" * 50_000, "text")
    clock[0] += 1800
    kept = new.put("n" * 50_000, "text")
    clock[0] += 1801  # the first is 3,601 s old, the second 1,801 s
    assert old.get(stale) is None and old.handles() == []
    assert new.get(kept) is not None and store.stored_bytes == sys.getsizeof("n" * 50_000)
    assert store.list_namespaces(prefix=NAMESPACE) == [(*NAMESPACE, "a", "thread", "2")]


# --- the thread's index, as another writer may have left it (review 27a) --------------------


@pytest.mark.parametrize(
    "bad",
    [{"items": "zzz"}, {"items": [["h", "x"]]}, {"items": [1, 2]}, {"items": None},
     {"items": {"a": 1}}, {"items": [["out_a", True], ["out_b", -1], [None, 3]]}, {}],
    ids=["text", "bad-size", "numbers", "none", "mapping", "bad-entries", "no-items"],
)  # fmt: skip
@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_a_malformed_index_is_read_as_empty_and_rewritten_at_the_next_put(
    bad: dict[str, Any], how: str
) -> None:
    # Written through LangGraph server's store API, or by any other writer: it made every put
    # and every unknown-handle answer raise, so the thread's large outputs were cut for good.
    store = InMemoryStore()
    store.put(_ns(how), "__index__", bad)
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(_catalog()))
    graph.add_edge(START, "tools")
    app = graph.compile(store=store)

    async def run(*calls: dict[str, Any]) -> ToolMessage:
        config = {"configurable": {"thread_id": how}}
        state = _state(*calls)
        out = app.invoke(state, config) if how == "invoke" else await app.ainvoke(state, config)
        return out["messages"][-1]

    first = _handle(await run(_call("server_log")))
    unknown = await run(_call("read_large_output", {"handle": "out_" + "0" * 24}))
    assert unknown.status == "error" and "no offloaded output" in unknown.content
    assert f"(its latest: {first})" in unknown.content
    second = _handle(await run(_call("server_log")))
    listed = store.get(_ns(how), "__index__")
    assert listed is not None and listed.value["items"] == [
        [first, len(BIG_TEXT)],
        [second, len(BIG_TEXT)],
    ]


def test_an_index_is_read_up_to_its_bound_and_kept_there() -> None:
    from langgraph_toolbudget.execution.output_store import MAX_INDEX_ENTRIES

    store, ns = InMemoryStore(), (*NAMESPACE, "a", "thread", "t")
    old = [[f"out_{i}", 1] for i in range(3 * MAX_INDEX_ENTRIES)]
    store.put(ns, "__index__", {"items": [*old, "junk"]})
    offload = OffloadStore(store, ns, cap_chars=10**9, ttl_minutes=None)
    handle = offload.put("x" * 100, "text")
    handles = offload.handles()
    assert len(handles) == MAX_INDEX_ENTRIES and handles[-1] == handle
    assert handles[0] == f"out_{3 * MAX_INDEX_ENTRIES - MAX_INDEX_ENTRIES + 1}"  # the newest


def test_an_expired_output_is_never_offered_and_leaves_the_index_at_the_next_put(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The index item is renewed at every put, so it outlived the outputs it listed: the
    # answer for an expired handle offered that very handle ("its latest: out_A, ..."), and
    # expired outputs stayed in the index (and counted toward the cap) for ever.
    from langgraph_toolbudget.execution import output_store

    clock = [time.time()]
    monkeypatch.setattr(output_store, "_wall", lambda: clock[0])
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn, ttl={"refresh_on_read": True})
    store.setup()
    executor = ToolExecutor(_catalog(), config=BudgetConfig(offload_ttl_minutes=10))
    first = _handle(_run(executor, store, "t", _call("server_log"))[0])
    clock[0] += 300
    second = _handle(_run(executor, store, "t", _call("server_log"))[0])
    clock[0] += 301  # the first is past its 10 minutes: the store's sweep deletes it
    store.delete(_ns("t"), first)
    (missing,) = _run(executor, store, "t", _call("read_large_output", {"handle": first}))
    assert missing.status == "error" and f"(its latest: {second})" in missing.content
    assert "expire" in missing.content
    third = _handle(_run(executor, store, "t", _call("server_log"))[0])
    offload = OffloadStore(store, _ns("t"), cap_chars=10**9, ttl_minutes=10)
    assert offload.handles() == [second, third]
    clock[0] += 601  # the second is past its TTL too, but a read renewed it: it stays
    (read,) = _run(executor, store, "t", _call("read_large_output", {"handle": second}))
    assert read.status == "success"
    _run(executor, store, "t", _call("server_log"))
    assert offload.handles()[:2] == [second, third]


# --- the answers advise only the output tools the app left on ------------------------------


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
@pytest.mark.parametrize(
    ("denied", "way", "args"),
    [
        (["read_large_output"], "search_large_output", {"pattern": "error"}),
        (["search_large_output"], "read_large_output", {"start": 0, "length": 100}),
        (["read_large_output", "search_large_output"], None, None),
    ],
)
def test_jq_on_a_text_output_advises_only_the_output_tools_left_on(
    api: str, denied: list[str], way: str | None, args: dict[str, Any] | None
) -> None:
    # Was: "Use search_large_output(handle, pattern) or read_large_output(handle, start,
    # length)" whatever enabled_builtins turned off; followed: "not a tool of this app".
    executor = ToolExecutor(_catalog(), enabled_builtins={"deny": denied})
    store = InMemoryStore()
    handle = _handle(_run(executor, store, "t", _call("server_log"), api=api)[0])
    query = _call("query_large_output", {"handle": handle, "jq_expression": "."})
    (answer,) = _run(executor, store, "t", query, api=api)
    assert answer.status == "error" and "is text, not JSON" in answer.content
    assert not [name for name in denied if name in answer.content], answer.content
    if way is None:
        assert "No tool of this app reads a text output" in answer.content
        assert "call the tool that made it again asking for less" in answer.content
        return
    assert f"Use {way}(handle, " in answer.content
    (followed,) = _run(executor, store, "t", _call(way, {"handle": handle, **args}), api=api)
    assert followed.status == "success" and "line 0: error" in followed.content


def test_cut_searches_and_large_jq_results_advise_reading_only_while_it_is_on() -> None:
    # Was: the cut search's note and the jq error said read_large_output(handle, ...) with
    # read_large_output denied; the other advice stays, and still works.
    catalog = ToolCatalog.from_tools(
        [server_log_big, list_orders],
        tool_metadata={n: {"include": "always"} for n in ("server_log_big", "list_orders")},
    )
    for denied, reads in (([], True), (["read_large_output"], False)):
        executor = ToolExecutor(
            catalog, offload_over_chars=2_000, enabled_builtins={"deny": denied}
        )
        store = InMemoryStore()
        log, orders = (_handle(m) for m in _run(
            executor, store, "t", _call("server_log_big", i="a"), _call("list_orders", i="b")
        ))  # fmt: skip
        search, query = _run(
            executor,
            store,
            "t",
            _call("search_large_output", {"handle": log, "pattern": "line 1", "context_lines": 5}),
            _call("query_large_output", {"handle": orders, "jq_expression": ".orders"}, "q"),
        )
        note = json.loads(search.content)["note"]
        assert ("read_large_output(handle, start=<offset>)" in note) is reads, note
        assert "narrower pattern or fewer context_lines shows the others" in note
        assert query.status == "error" and "'.items[:50]'" in query.content
        assert ("read_large_output" in query.content) is reads, query.content
        (part,) = _run(
            executor,
            store,
            "t",
            _call("query_large_output", {"handle": orders, "jq_expression": ".orders[:5]"}),
        )
        assert json.loads(part.content) == ORDERS["orders"][:5]


def test_the_other_jq_and_search_notes_name_only_the_tools_given() -> None:
    from langgraph_toolbudget.core.jq_sandbox import JqStopped
    from langgraph_toolbudget.core.large_output import _stopped

    # A deadline already past: the search stops at once, and its note says how to go on.
    stopped = search_output(BIG_TEXT, "ok", seconds=-1.0, tools=["search_large_output"])
    assert "stopped after" in stopped["note"] and "read_large_output" not in stopped["note"]
    every = search_output(BIG_TEXT, "ok", seconds=-1.0)  # tools=None: every output tool is on
    assert "read_large_output(handle, start=0) reads on from there" in every["note"]
    for why, named in (("too_large", "read_large_output"), ("crash", "search_large_output")):
        full = _stopped(JqStopped(why, "9"), "'.'", 10, 1.0, 64)
        others = [t for t in OUTPUT_TOOL_NAMES if t != named]
        without = _stopped(JqStopped(why, "9"), "'.'", 10, 1.0, 64, others)
        assert named in full and named not in without and without.startswith("Error: ")
