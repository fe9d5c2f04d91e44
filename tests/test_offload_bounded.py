"""Offloading a long output: described from its first characters, scanned off the event loop.

An output over ``DESCRIBE_CHARS`` is described from its start (its JSON read as far as that
goes, and the description says so), and under ``ainvoke`` its description and its scan for
what a store refuses run in a worker thread, in calls short enough for the loop to run between
(review 47c: a 36 MB JSON answer held the event loop 0.6 s, parsed whole to describe it).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph
from langgraph.store.memory import InMemoryStore

from langgraph_toolbudget import ToolBudgetState, ToolCatalog, ToolExecutor
from langgraph_toolbudget.core import large_output
from langgraph_toolbudget.core.large_output import (
    CUT_VALUE,
    DESCRIBE_CHARS,
    PARSE_CHARS,
    describe_output,
)
from langgraph_toolbudget.core.usage import storable
from langgraph_toolbudget.execution import offload, output_store
from langgraph_toolbudget.execution.output_store import (
    NAMESPACE,
    STORABLE_CHUNK,
    _storable,
    app_key,
)

FROM_HEAD = f" (described from its first {DESCRIBE_CHARS:,} characters)"


def _orders(n: int) -> str:
    rows = [{"id": i, "customer": f"c{i % 7}", "total": i * 1.5} for i in range(n)]
    return json.dumps({"orders": rows, "count": n})


def _rows_in_head(text: str) -> int:
    """The orders whose JSON ends within the first DESCRIBE_CHARS characters of ``text``."""
    head = text[:DESCRIBE_CHARS]
    return head[: head.rindex("}") + 1].count('{"id": ')


def test_an_output_up_to_the_bound_is_described_whole() -> None:
    items = list(range(100_000))
    text = json.dumps(items)
    assert len(text) < DESCRIBE_CHARS
    text += " " * (DESCRIBE_CHARS - len(text))  # exactly at the bound
    info = describe_output(text)
    assert (info.kind, info.shape) == ("json", f"array of {len(items)} items")
    assert json.loads(info.preview) == [0, 1, f"... {len(items) - 2} more items"]


def _padded(text: str) -> str:
    """``text`` with spaces after it to over PARSE_CHARS (still JSON, if it was)."""
    return text + " " * max(0, PARSE_CHARS + 1 - len(text))


def _many_keys() -> str:
    values = {f"k{i:02d}": "v" * 40_000 for i in range(30)}
    values["k25"] = list(range(10_000))  # the first array: past the keys shown
    return json.dumps(values)


def _records(n: int) -> str:
    rows = [{"id": i, "name": f"n{i}", "tags": ["a", "b"], "ok": True} for i in range(n)]
    return json.dumps(rows)


def _past_the_keys_shown(value: str) -> str:
    """An object whose 11th key, past the 10 the preview shows, holds ``value``."""
    return "{" + "".join(f'"k{i}": {i}, ' for i in range(10)) + f'"data": {value}}}'


def _below(keys: str, value: str) -> str:
    """``value`` in objects nested one in the other, one for each of ``keys``."""
    for key in reversed(keys.split()):
        value = f'{{"{key}": {value}}}'
    return value


def _repeated_shown_key() -> str:
    keys = "".join(f'"k{i}": {i}, ' for i in range(1, 11))
    return f'{{"status": "pending", {keys}"status": "paid", "rows": {_records(3_000)}}}'


_DEEP_RECORDS = [_below("a b c d e f", f'[{i}, "x"]') for i in range(25_000)]

# The data past what the preview shows (review 48a): under the 11th key, as an array's 3rd
# item, 5 objects deep (GraphQL-like), each once read by one parse of all of it.
PAST_THE_PREVIEW = {
    "past-the-keys-shown": _past_the_keys_shown(_records(30_000)),
    "past-the-items-shown": f"[1, 2, {_records(30_000)}]",
    "below-the-depth-shown": _below("data org repo issues nodes", _records(30_000)),
    "deep-records-past-the-items-shown": "[1, 2, [" + ", ".join(_DEEP_RECORDS) + "]]",
}

BETWEEN_BOUNDS = {
    **PAST_THE_PREVIEW,
    "repeated-shown-key": _repeated_shown_key(),
    "long-shown-string": json.dumps({"s": "\U0001f600" * 40_000, "t": "\\\n" * 40_000}),
    "long-strings-not-shown": _past_the_keys_shown(json.dumps(["\u00e9" * 60_000] * 3)),
    "long-spaces": "[1, 2, [3," + " \n" * 60_000 + '"x" ]\t]',
    "too-long-int-not-shown": _past_the_keys_shown("9" * 5_000 + ", " + _records(2_000)),
    "records": _orders(20_000),
    "nested": json.dumps([{"a": {"b": {"c": {"d": {"e": [i, [i]]}}}}} for i in range(20_000)]),
    "dense": json.dumps([{"d": [i, []]} for i in range(80_000)]),
    "many-keys": _many_keys(),
    "duplicate-keys": '{"a": 1, "b": 2, "a": ' + json.dumps(list(range(200_000))) + "}",
    "odd-values": _padded(json.dumps([float("nan"), 10**30, "\u00e9\ud83d\ude00", -1.5e-7])),
    "lone-surrogate": _padded('["\\ud800", 1]'),
    "empty": _padded("\n {}"),
    "spaces-after": _padded('{"a": [1, 2]}'),
    "cut": _orders(20_000)[:-2],
    "unclosed-string": _padded('{"a": "') + '"x}',
    "trailing-comma": _orders(20_000).replace("}, {", "}, , {", 1),
    "more-after": _padded("[1]") + "[2]",
    "too-deep": _padded("[" * 5_000 + "]" * 5_000),
    "text": "not json\n" * 120_000,
}


@pytest.mark.parametrize("name", list(BETWEEN_BOUNDS))
def test_an_output_between_the_bounds_is_read_to_the_description_of_one_parse(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = BETWEEN_BOUNDS[name]
    assert PARSE_CHARS < len(text) <= DESCRIBE_CHARS
    read = describe_output(text)  # value by value
    monkeypatch.setattr(large_output, "PARSE_CHARS", DESCRIBE_CHARS)
    assert read == describe_output(text)  # parsed in one call, as every output was before
    assert FROM_HEAD not in read.shape


class _Reach:
    """The characters each call of the JSON decoder, or of a pattern, reads (at most)."""

    def __init__(self) -> None:
        self.decoded: list[int] = []
        self.matched: list[int] = []

    def decoder(self, real: json.JSONDecoder) -> Any:
        reach = self

        class Decoder:
            def raw_decode(self, text: str, idx: int = 0) -> tuple[Any, int]:
                try:
                    value, end = real.raw_decode(text, idx)
                except json.JSONDecodeError as exc:
                    reach.decoded.append(exc.pos - idx)
                    raise
                except RecursionError:
                    reach.decoded.append(len(text) - idx)
                    raise
                reach.decoded.append(end - idx)
                return value, end

            def decode(self, text: str) -> Any:
                reach.decoded.append(len(text))
                return real.decode(text)

        return Decoder()

    def pattern(self, real: re.Pattern[str]) -> Any:
        reach = self

        class Pattern:
            def match(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
                reach.matched.append(min(endpos, len(text)) - pos)
                return real.match(text, pos, endpos)

        return Pattern()


@pytest.fixture
def decoder_reach(monkeypatch: pytest.MonkeyPatch) -> _Reach:
    """The reach of each call of the JSON decoder that describes an output."""
    reach = _Reach()
    monkeypatch.setattr(large_output, "_DECODER", reach.decoder(large_output._DECODER))
    return reach


@pytest.fixture
def reach(decoder_reach: _Reach, monkeypatch: pytest.MonkeyPatch) -> _Reach:
    """The reach of each call that reads an output's JSON: the decoder's and the patterns'."""
    real_patterns = large_output._skim_patterns

    def patterns(int_digits: int) -> Any:
        value, runs, counted = real_patterns(int_digits)
        wrap = decoder_reach.pattern
        return wrap(value), {k: wrap(p) for k, p in runs.items()}, wrap(counted)

    monkeypatch.setattr(large_output, "_skim_patterns", patterns)
    for name in ("_SPACE", "_STRING_BODY"):
        monkeypatch.setattr(large_output, name, decoder_reach.pattern(getattr(large_output, name)))
    marked = {mark: decoder_reach.pattern(p) for mark, p in large_output._MARKED.items()}
    monkeypatch.setattr(large_output, "_MARKED", marked)
    return decoder_reach


@pytest.mark.parametrize("name", list(PAST_THE_PREVIEW))
def test_data_past_the_preview_is_not_parsed_in_one_long_call(
    name: str, decoder_reach: _Reach
) -> None:
    # Before, a value the preview does not show was parsed whole: 1,927,780 characters in one
    # call that held an event loop in another thread 85-224 ms (review 48a).
    text = PAST_THE_PREVIEW[name]
    assert describe_output(text).kind == "json"
    assert max(decoder_reach.decoded) <= PARSE_CHARS


LONG_OUTPUTS = {
    **PAST_THE_PREVIEW,
    "long-strings": json.dumps({"s": "\u00e9\n" * 200_000, "t": ["x" * 300_000] * 3}),
    "long-spaces": "[1, 2, [3," + " " * 1_500_000 + "4]]",
    "nested-deep": "[1, 2, " + "[" * 500 + _records(20_000) + "]" * 500 + "]",
    "cut": _orders(80_000),
}


@pytest.mark.parametrize("name", list(LONG_OUTPUTS))
def test_every_call_that_reads_a_long_output_reads_at_most_parse_chars(
    name: str, reach: _Reach
) -> None:
    info = describe_output(LONG_OUTPUTS[name])
    assert info.kind == "json"
    assert reach.matched and max(reach.matched) <= PARSE_CHARS
    assert max(reach.decoded) <= PARSE_CHARS


def test_containers_nested_in_a_long_one_are_not_parsed_again_and_again(
    decoder_reach: _Reach,
) -> None:
    # Each of the 900 arrays around the records runs past one parse's window: parsed to the
    # window's end each, they would be read 900 times over (about 90 M characters).
    text = "[1, 2, " + "[" * 900 + _records(20_000) + "]" * 900 + "]"
    assert describe_output(text).shape == "array of 3 items"
    assert sum(decoder_reach.decoded) <= 2 * len(text)


def _edge_cases() -> str:
    """JSON whose tokens a small window cuts anywhere: numbers, escapes, spaces, literals."""
    values = [
        "1234567.5", "12345678.5", "1234567e5", "12345678E+5", "-1234567.25", "0", "-0.5e-3",
        "NaN", "-Infinity", "true", "null", '"a\\u00e9\\n"', '"\\ud83d\\ude00"',
        '"x,y]}"', "[ ]", "{ }", '{"a" : [1 , {"b":[[],{}]}]}', '"' + "z" * 40 + '"',
    ]  # fmt: skip
    items = ", \n ".join(values)
    nested = f'{{"k": [{items}], "d": {_below("e f g h", f"[{items}]")}}}'
    return f"[1, 2, {nested}, {items}, [{nested}]]"


@pytest.mark.parametrize("window", [8, 9, 13, 21, 64])
def test_windows_that_cut_any_token_read_to_the_description_of_one_parse(
    window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _edge_cases()
    for cut in ("", "1.5", "\\u12"):  # whole, and broken where a window may end
        broken = text.replace("12345678.5", cut + "12345678.5", 1) if cut else text
        monkeypatch.setattr(large_output, "PARSE_CHARS", window)
        read = describe_output(broken)
        monkeypatch.setattr(large_output, "PARSE_CHARS", DESCRIBE_CHARS)
        assert read == describe_output(broken)
    assert read.kind == "text" and describe_output(text).kind == "json"


def test_a_long_json_output_is_described_from_its_first_characters_and_says_so() -> None:
    # Two outputs alike in their first DESCRIBE_CHARS characters get the same description:
    # nothing past them is read (the whole was parsed before: other counts, the "count" key).
    short, long = _orders(40_000), _orders(80_000)
    assert len(short) > DESCRIBE_CHARS and short[:DESCRIBE_CHARS] == long[:DESCRIBE_CHARS]
    one, two = describe_output(short), describe_output(long)
    assert (one.kind, one.chars, two.chars) == ("json", len(short), len(long))
    assert one.shape == two.shape == f'object with keys ["orders", ...]{FROM_HEAD}'
    assert one.preview == two.preview
    seen = _rows_in_head(short)
    rows = json.loads(short)["orders"][:2]
    assert json.loads(one.preview) == {
        "orders": [*rows, f"... at least {seen - 2} more items"],
        "...": "more keys may follow",
    }
    assert one.jq_examples == ("keys", ".orders | length", ".orders[0]")


def test_a_long_array_counts_at_least_the_items_its_first_characters_hold() -> None:
    text = json.dumps([{"id": i, "name": f"item {i}"} for i in range(100_000)])
    info = describe_output(text)
    head = text[:DESCRIBE_CHARS]
    seen = head[: head.rindex("}") + 1].count('{"id": ')
    assert info.shape == f"array of at least {seen} items{FROM_HEAD}"
    assert info.jq_examples == (".[0]", "length", ".[:5]")


def test_a_key_whose_value_the_described_characters_end_inside_is_named() -> None:
    text = json.dumps({"blob": "x" * (2 * DESCRIBE_CHARS), "n": 1})
    info = describe_output(text)
    assert info.shape == f'object with keys ["blob", ...]{FROM_HEAD}'
    assert json.loads(info.preview) == {"blob": CUT_VALUE, "...": "more keys may follow"}
    # A container the described characters end inside is shown as far as they go (below
    # the skeleton's depth, by its size).
    nested = json.dumps({"a": {"b": [{"c": list(range(400_000))}]}})
    head = nested[:DESCRIBE_CHARS]
    seen = head[: head.rindex(",")].count(",") + 1  # the numbers written whole
    assert json.loads(describe_output(nested).preview) == {
        "a": {
            "b": [
                {"c": f"[... at least {seen} items]", "...": "more keys may follow"},
                "... more items may follow",
            ],
            "...": "more keys may follow",
        },
        "...": "more keys may follow",
    }


@pytest.mark.parametrize(
    "text",
    [
        _orders(40_000)[:-1],  # cut short: its end does not close it
        _orders(40_000)[:500_000] + "?" + _orders(40_000)[500_001:],  # broken in its head
        _orders(40_000) + " and more text",
        "[" * DESCRIBE_CHARS + "]" * DESCRIBE_CHARS,  # nested too deep to parse
    ],
    ids=["cut", "broken", "more-after", "too-deep"],
)
def test_a_long_output_that_is_not_one_json_value_is_text(text: str) -> None:
    info = describe_output(text)
    assert (info.kind, info.shape) == ("text", f"{text.count(chr(10)) + 1} lines")
    assert info.jq_examples == ()


def test_a_long_json_value_whose_rest_is_spaces_is_described_exactly() -> None:
    text = json.dumps({"a": [1, 2, 3]}) + " " * (2 * DESCRIBE_CHARS) + "\n"
    info = describe_output(text)
    assert (info.kind, info.shape) == ("json", 'object with keys ["a"]')


def test_a_long_text_has_all_its_lines_counted() -> None:
    text = "a log line\n" * 300_000
    assert len(text) > DESCRIBE_CHARS
    info = describe_output(text)
    assert (info.kind, info.shape) == ("text", "300001 lines")
    assert info.preview.startswith("a log line\na log line")


def test_a_long_output_is_made_storable_in_chunks_as_whole() -> None:
    edge = STORABLE_CHUNK
    text = "é" * (edge - 1) + "\x00\ud800" + "b" * edge + "\udfff"  # at a chunk's edge
    assert (
        _storable(text)
        == storable(text)
        == "é" * (edge - 1) + "\ufffd\ufffd" + "b" * edge + "\ufffd"
    )
    clean = "é" * (3 * edge)
    assert _storable(clean) is clean
    ascii_text = "a" * (2 * edge) + "\x00"
    assert _storable(ascii_text) == storable(ascii_text) == "a" * (2 * edge) + "\ufffd"
    assert storable("plain") == "plain" and storable("a\x00b") == "a\ufffdb"


def _graph(text: str) -> tuple[Any, ToolCatalog]:
    def long_answer() -> str:
        """A long JSON answer."""
        return text

    catalog = ToolCatalog.from_tools(
        [long_answer], tool_metadata={"long_answer": {"include": "always"}}
    )
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog))
    graph.add_edge(START, "tools")
    return graph, catalog


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_a_long_output_is_stored_whole_and_its_stub_says_what_was_described(how: str) -> None:
    text = _orders(40_000)
    graph, catalog = _graph(text)
    store = InMemoryStore()
    app = graph.compile(store=store)
    state = {
        "messages": [
            HumanMessage("go"),
            AIMessage("", tool_calls=[{"name": "long_answer", "args": {}, "id": "c1"}]),
        ]
    }
    config = {"configurable": {"thread_id": how}}
    out = app.invoke(state, config) if how == "invoke" else asyncio.run(app.ainvoke(state, config))
    (stub,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    facts = stub.artifact["offloaded"]
    assert facts["shape"] == f'object with keys ["orders", ...]{FROM_HEAD}'
    assert FROM_HEAD in stub.content and f"{len(text):,} characters" in stub.content
    namespace = (*NAMESPACE, "tools", app_key(catalog.tool_names), "thread", how)
    item = store.get(namespace, facts["handle"])
    assert item is not None and item.value["text"] == text and item.value["kind"] == "json"


def test_under_ainvoke_the_description_and_the_scan_run_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real functions, each call's thread noted: before, both ran in the loop's thread.
    threads: dict[str, set[int]] = {"describe": set(), "storable": set()}

    def noted(name: str, real: Any) -> Any:
        def call(*args: Any) -> Any:
            threads[name].add(threading.get_ident())
            return real(*args)

        return call

    monkeypatch.setattr(offload, "describe_output", noted("describe", describe_output))
    monkeypatch.setattr(output_store, "storable", noted("storable", storable))
    text = _orders(40_000)
    graph, _ = _graph(text)
    app = graph.compile(store=InMemoryStore())
    state = {
        "messages": [
            HumanMessage("go"),
            AIMessage("", tool_calls=[{"name": "long_answer", "args": {}, "id": "c1"}]),
        ]
    }

    async def run() -> tuple[int, Any]:
        out = await app.ainvoke(state, {"configurable": {"thread_id": "t"}})
        return threading.get_ident(), out

    loop_thread, out = asyncio.run(run())
    (stub,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert stub.artifact["offloaded"]["chars"] == len(text)
    assert threads["describe"] and loop_thread not in threads["describe"]
    assert threads["storable"] and loop_thread not in threads["storable"]
