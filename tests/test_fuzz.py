"""Property-based tests: random batches of tool calls through the executor.

Batches mix visible, hidden, filtered, disabled, unknown and meta-tool names,
random JSON arguments (wrong types, huge strings, deep nesting, unicode and
control characters) and duplicate call ids, under ``sequential`` and
``parallel_safe``, ``invoke`` and ``ainvoke``. Invariants checked on every batch:

- no exception escapes the executor;
- exactly one ``ToolMessage`` per call, in call order (by id, duplicates included);
- no tool outside the visible set (after the batch's meta-calls) ever runs;
- ``selected_tools`` only ever holds catalog names;
- a catastrophic or 100,000-character ``search_tools`` pattern gets a short answer.

The default run tries a few hundred batches; ``pytest -m fuzz`` runs the same
properties on over 10,000 (see ``FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_tools import Recorder, recording_catalog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_toolbudget import ToolExecutor
from langgraph_toolbudget.core.meta import META_TOOL_NAMES
from langgraph_toolbudget.state import merge_names

MODES = ["sequential", "parallel_safe"]
APIS = ["invoke", "ainvoke"]
DEFAULT_EXAMPLES = 50  # per mode x api: 200 random batches, plus the large and pattern ones
FUZZ_EXAMPLES = 2_600  # per mode x api under `pytest -m fuzz`: 10,400 random batches

PURE = ["get_weather", "weather_forecast", "list_projects", "list_issues", "search_docs"]
CATALOG_OPTIONS: dict[str, Any] = {"tool_metadata": {n: {"is_pure": True} for n in PURE}}
CATALOG = recording_catalog(Recorder(), **CATALOG_OPTIONS)
LISTED = sorted(CATALOG.tool_names)
FILTERED, DISABLED = "admin_shutdown", "purge_database"

HUGE = "y" * 200_000


class _Deep(dict):  # type: ignore[type-arg]
    """A deeply nested value whose repr is short (Hypothesis prints the values it draws)."""

    def __repr__(self) -> str:
        return f"<nested {self['depth']} deep>"


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return _Deep(k=value, depth=depth)


SPECIAL_VALUES = [HUGE, _deep(50), _deep(3000), "{" * 3000, "\x00\x1b[31m\u202e\ud7ff", 10**30]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    # Indices, not the values: Hypothesis describes its strategies with repr().
    | st.integers(0, len(SPECIAL_VALUES) - 1).map(SPECIAL_VALUES.__getitem__)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=6,
)
arg_names = st.sampled_from(
    ["city", "days", "repo", "title", "number", "project", "name", "query", "tool_names",
     "categories", "reason", "items", "url", "__arg1", "Q"]
) | st.text(max_size=10)  # fmt: skip
arguments = st.dictionaries(arg_names, json_values, max_size=3) | json_values

names = st.one_of(
    st.sampled_from(LISTED),
    st.sampled_from([FILTERED, DISABLED, *META_TOOL_NAMES]),
    st.text(max_size=20),
    st.integers(5_000, 5_001).map(lambda n: "x" * n),
)
ids = st.sampled_from(["dup", "dup2"]) | st.uuids().map(str)


@st.composite
def batches(draw: st.DrawFn, max_calls: int = 8) -> tuple[list[dict[str, Any]], list[str]]:
    calls = [
        {"name": draw(names), "args": draw(arguments), "id": draw(ids), "type": "tool_call"}
        for _ in range(draw(st.integers(1, max_calls)))
    ]
    visible = draw(st.lists(st.sampled_from(LISTED), max_size=6, unique=True))
    return calls, visible


_NODES: dict[str, ToolExecutor] = {}


def _node(mode: str) -> ToolExecutor:
    if mode not in _NODES:
        _NODES[mode] = ToolExecutor(CATALOG, mode=mode, max_meta_calls=1_000)
    return _NODES[mode]


def _message(calls: list[dict[str, Any]]) -> AIMessage:
    # model_construct: a model's raw output, not re-validated (ints as names stay as sent)
    return AIMessage.model_construct(content="", tool_calls=calls, invalid_tool_calls=[])


def check_batch(mode: str, api: str, calls: list[dict[str, Any]], visible: list[str]) -> None:
    """Run one batch and check every invariant of the module docstring."""
    rec = Recorder()
    recording_catalog(rec, **CATALOG_OPTIONS)  # the tools record into `rec` from now on
    state = {"messages": [HumanMessage("help me"), _message(calls)], "selected_tools": visible}
    node = _node(mode)
    out = node.invoke(state) if api == "invoke" else asyncio.run(node.ainvoke(state))
    messages = out["messages"]
    assert all(isinstance(m, ToolMessage) for m in messages)
    assert [m.tool_call_id for m in messages] == [c["id"] for c in calls]
    after = merge_names(visible, out.get("selected_tools"))
    assert set(after) <= set(LISTED)
    assert set(rec.names) <= set(visible) | set(after)


FUZZ_SETTINGS = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=DEFAULT_EXAMPLES, **FUZZ_SETTINGS)
@given(batch=batches())
def test_random_batches_keep_the_invariants(mode, api, batch):
    check_batch(mode, api, *batch)


@pytest.mark.fuzz
@pytest.mark.timeout(3_600)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=FUZZ_EXAMPLES, **FUZZ_SETTINGS)
@given(batch=batches())
def test_random_batches_keep_the_invariants_at_length(mode, api, batch):
    check_batch(mode, api, *batch)


large_batches = st.tuples(
    st.lists(
        st.builds(
            lambda name, call_id, city: {
                "name": name, "args": {"city": city}, "id": call_id, "type": "tool_call"
            },
            st.sampled_from([*LISTED, FILTERED, DISABLED, "ghost", "add_tool"]),
            ids,
            st.text(max_size=10),
        ),
        min_size=200,
        max_size=1_000,
    ),
    st.lists(st.sampled_from(LISTED), max_size=8, unique=True),
)  # fmt: skip


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=3, **FUZZ_SETTINGS)
@given(batch=large_batches)
def test_batches_of_up_to_1000_calls_keep_the_invariants(mode, api, batch):
    check_batch(mode, api, *batch)


patterns = st.one_of(
    st.integers(1, 20_000).map(lambda n: "(a*)*" * n),
    st.integers(1, 100).map(lambda n: ".{0,1000}" * n),
    st.integers(100_000, 100_001).map(lambda n: "x" * n),
    st.text(min_size=1, max_size=600),
    st.lists(st.sampled_from(["(", ")", "*", "+", "?", "|", "a", ".", "{2,}", "\\", "["])).map(
        "".join
    ),
)


@settings(max_examples=40, **FUZZ_SETTINGS)
@given(pattern=patterns)
def test_any_search_pattern_gets_a_short_answer(pattern):
    call = {"name": "search_tools", "args": {"query": pattern}, "id": "s", "type": "tool_call"}
    state = {"messages": [HumanMessage("find"), _message([call])], "selected_tools": []}
    (message,) = _node("sequential").invoke(state)["messages"]
    assert message.tool_call_id == "s" and len(message.content) < 5_000
