"""core/compact.py: the compact result of a child run, JSON-safe and bounded (no graph needed)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import BaseModel

from langgraph_toolbudget.core.compact import (
    MAX_FIELD_CHARS,
    bounded,
    error_result,
    interrupted_result,
    json_schema_problem,
    last_ai_text,
    run_result,
)

HEADER = {"mode": "graph", "graph": "g", "run_id": "r", "thread_id": "t"}


@dataclass
class Pending:  # shaped like LangGraph's Interrupt
    value: object
    id: str = "i"


class Point(BaseModel):
    x: int
    y: int


def test_run_result_with_messages_gives_the_last_ai_text_and_the_other_keys():
    final = {"messages": [HumanMessage("q"), AIMessage("a1"), AIMessage("a2")], "n": 2}
    assert run_result(HEADER, final) == {
        **HEADER,
        "status": "success",
        "output": "a2",
        "context": {"n": 2},
    }


def test_run_result_reads_message_dicts_as_a_remote_graph_returns_them():
    final = {"messages": [{"type": "human", "content": "q"}, {"type": "ai", "content": "a"}]}
    assert run_result(HEADER, final)["output"] == "a"
    assert "context" not in run_result(HEADER, final)


def test_run_result_without_messages_is_the_whole_state_made_json_safe():
    final = {"point": Point(x=1, y=2), "tags": {"a"}, "when": object}
    result = run_result(HEADER, final)
    assert result["output"]["point"] == {"x": 1, "y": 2}
    assert result["output"]["tags"] == ["a"]
    assert isinstance(result["output"]["when"], str)
    json.dumps(result)  # serialisable as is
    assert run_result(HEADER, 42)["output"] == 42  # a functional-API graph may return anything


def test_run_result_with_a_pending_interrupt_is_interrupted():
    final = {"messages": [HumanMessage("q")], "__interrupt__": [Pending({"ask": "city?"})]}
    result = run_result(HEADER, final)
    assert result["status"] == "interrupted"
    assert result["interrupts"] == [{"ask": "city?"}]
    assert "'t'" in result["error"]["message"] and "output" not in result


def test_interrupted_and_error_results():
    assert interrupted_result(HEADER, [Pending(1)])["interrupts"] == [1]
    failed = error_result(HEADER, KeyError("x"))
    assert failed["status"] == "error" and failed["error"] == {"type": "KeyError", "message": "'x'"}
    assert error_result(HEADER, TimeoutError("late"), status="timeout")["status"] == "timeout"


def test_bounded_cuts_long_values_and_says_so():
    assert bounded("x" * 10) == "x" * 10
    cut = bounded({"text": "x" * (MAX_FIELD_CHARS * 2)})
    assert isinstance(cut, str) and len(cut) < MAX_FIELD_CHARS + 100
    assert cut.endswith(f"[truncated, {MAX_FIELD_CHARS * 2 + 12} characters in all]")


def test_bounded_survives_deep_nesting():
    deep: list = []
    node = deep
    for _ in range(100):
        node.append([])
        node = node[0]
    json.dumps(bounded(deep))


def test_last_ai_text_is_none_without_an_ai_message():
    assert last_ai_text([HumanMessage("q"), {"role": "weird"}]) is None


def test_json_schema_problem_names_the_field():
    schema = {"type": "object", "properties": {"days": {"type": "integer"}}, "required": ["days"]}
    assert json_schema_problem(schema) is None
    assert json_schema_problem(schema, {"days": 2}) is None
    assert json_schema_problem(schema, {"days": "many"}) == "days: 'many' is not of type 'integer'"
    assert "required" in (json_schema_problem(schema, {}) or "")
    assert json_schema_problem({"type": 5}) is not None  # not a valid schema


EVIL, EVIL_TEXT = r"^([a-z]+)+$", "a" * 40 + "!"  # Python's `re`: hours, holding the GIL


def _in_a_child(code: str) -> list[str]:
    """The lines ``code`` prints in a child interpreter, which is killed if frozen after 60 s."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the child was frozen for 60 s (a backtracking regex)")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_a_subschema_naming_its_dialect_is_still_matched_in_linear_time():
    """jsonschema gives a subschema with its own `$schema` (and a `$ref` back to a root naming
    one, as zod-to-json-schema writes) its stock validator class, whose `pattern` runs on
    Python's `re`: a FastMCP `Field(pattern=..., json_schema_extra={"$schema": ...})` froze
    the process again."""
    code = f"""
    from langgraph_toolbudget.core.compact import json_schema_problem as problem
    draft7 = "http://json-schema.org/draft-07/schema#"
    evil, text = {EVIL!r}, {EVIL_TEXT!r}
    nested = {{"type": "object", "properties": {{"code": {{
        "$schema": draft7, "type": "string", "pattern": evil}}}}}}
    print(problem(nested, {{"code": text}}))
    looped = {{"$schema": draft7, "type": "object", "properties": {{
        "code": {{"type": "string", "pattern": evil}}, "next": {{"$ref": "#"}}}}}}
    print(problem(looped, {{"next": {{"code": text}}}}))
    named = {{"type": "object", "properties": {{"$schema": {{"type": "integer"}}}},
              "additionalProperties": False}}
    print(problem(named, {{"$schema": 1}}))
    """
    assert _in_a_child(code) == [
        f"code: {EVIL_TEXT!r} does not match {EVIL!r}",
        f"next.code: {EVIL_TEXT!r} does not match {EVIL!r}",
        "None",  # a property named "$schema" is a property, not a dialect
    ]


def test_a_pattern_with_unicode_classes_accepts_what_the_server_accepts():
    """RE2 reads `\\w`, `\\d`, `\\s`, `\\b` as ASCII; pydantic on the server (and Python's `re`)
    as Unicode: "São Paulo" was refused as not matching `^[\\w\\s-]+$` and the tool never ran."""
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "pattern": r"^[\w\s-]+$"}},
    }
    for city in ("São Paulo", "München", "東京", "Saint-Denis"):
        assert json_schema_problem(schema, {"city": city}) is None
    assert json_schema_problem(schema, {"city": "Paris!"}) == (
        r"city: 'Paris!' does not match '^[\\w\\s-]+$'"
    )
    ascii_only = {"type": "string", "pattern": "^[a-z]+$"}  # no such class: RE2 decides
    assert json_schema_problem(ascii_only, "münchen") is not None


def test_a_pattern_reached_through_a_metaschemas_dynamic_ref_is_matched_in_linear_time():
    """A schema with `$dynamicAnchor: meta` that `$ref`s its dialect's metaschema is reached
    back by the metaschema's `$dynamicRef`, under the metaschema's stock validator class: its
    `pattern` ran on Python's `re` (review 31a)."""
    code = f"""
    from langgraph_toolbudget.core.compact import json_schema_problem as problem
    evil, text = {EVIL!r}, {EVIL_TEXT!r}
    schema = {{"$id": "urn:t", "$dynamicAnchor": "meta", "type": ["object", "string"],
               "pattern": evil,
               "properties": {{"x": {{"$ref": "https://json-schema.org/draft/2020-12/schema"}}}}}}
    print(problem(schema, {{"x": {{"properties": {{"y": text}}}}}}))
    """
    (line,) = _in_a_child(code)
    assert line.endswith(f"{EVIL_TEXT!r} does not match {EVIL!r}")


def test_a_schema_naming_dialects_keeps_its_data_whole():
    """`$schema` strings inside `const`, `enum` or `default` values are data, not dialects."""
    doc = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    schema = {
        "type": "object",
        "properties": {
            "doc": {"const": doc},
            "kind": {"enum": [doc, {"$schema": "x"}]},
            "inner": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"},
        },
    }
    assert json_schema_problem(schema, {"doc": doc, "kind": {"$schema": "x"}, "inner": "a"}) is None
    assert json_schema_problem(schema, {"inner": 3}) == "inner: 3 is not of type 'string'"


def test_a_ref_that_loops_on_itself_raises_recursion_error_for_the_callers_to_catch():
    looped = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}
    with pytest.raises(RecursionError):
        json_schema_problem(looped, {"x": 1})
