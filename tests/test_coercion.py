"""Argument coercion against a tool's schema, and the error the model gets when it still fails."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, Literal

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState
from pydantic import BaseModel, ValidationError

from langgraph_toolbudget.core.coercion import (
    MISSING_NAME,
    RAW_ARGUMENTS_KEY,
    coerce_args,
    complete_tool_calls,
    distinct_call_ids,
    repair_tool_calls,
    schema_error_message,
    spelt_as,
    tool_json_schema,
    unrun_calls,
)


@tool
def search_docs(query: str, max_results: int = 3, exact: bool = False) -> str:
    """Search the documentation."""
    return query


@tool
def lookup(query: str) -> str:
    """Look something up (one field)."""
    return query


@tool
def tag_items(items: list[str], label: str, weights: list[float] | None = None) -> str:
    """Label items."""
    return label


@tool
def configure(options: dict, ratio: float = 1.0) -> str:
    """Configure with an options object."""
    return "ok"


@tool
def send(message: str, channel_name: str = "general") -> str:
    """Send a message."""
    return message


@tool
def injected(
    query: str,
    state: Annotated[dict, InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> str:
    """Has injected arguments."""
    return query


def schema(t) -> dict:
    return tool_json_schema(t)


# --- whole-argument shapes ------------------------------------------------------------------


def test_property_schemas_that_are_no_objects_constrain_nothing():
    schema = {"properties": {"a": True, "b": 5, "n": {"type": "integer"}}, "required": 3}
    assert coerce_args({"a": "1", "b": "2", "n": "3"}, schema) == {"a": "1", "b": "2", "n": 3}
    assert coerce_args("7", {"properties": {"a": True}}) == {"a": 7}  # the lone field, as JSON
    odd = {"properties": {"n": {"type": {"x": 1}, "anyOf": {"type": "integer"}}}}
    assert coerce_args({"n": "5"}, odd) == {"n": "5"}
    assert coerce_args({"n": "5"}, True) == {"n": "5"}  # a schema that is no object


def test_json_string_of_all_arguments_is_parsed():
    out = coerce_args('{"query": "cats", "max_results": 2}', schema(search_docs))
    assert out == {"query": "cats", "max_results": 2}


def test_json_string_wrapped_in_arg1_is_unwrapped_and_coerced():
    out = coerce_args({"__arg1": '{"q": "cats", "max_results": "5"}'}, schema(search_docs))
    assert out == {"query": "cats", "max_results": 5}


@pytest.mark.parametrize(
    ("tool", "key", "field"),
    [
        (send, "__arg1", "message"),  # Pythonic's send('{"status": "ok"}')
        (send, "text", "message"),  # an alias
        (send, "Message", "message"),
        (lookup, "__arg1", "query"),
        (lookup, "note", "query"),  # a lone key of a one-field tool
    ],
)
def test_json_text_for_a_string_field_is_kept_whole(tool, key, field):
    text = '{"status": "ok"}'
    assert coerce_args({key: text}, schema(tool)) == {field: text}


def test_scalar_for_single_required_field_tool_is_wrapped():
    assert coerce_args("cats", schema(search_docs)) == {"query": "cats"}
    assert coerce_args("cats", schema(lookup)) == {"query": "cats"}


def test_scalar_under_arg1_key_for_single_required_field_tool_is_wrapped():
    # What LangChain produces when a model sends a bare value instead of an object.
    assert coerce_args({"__arg1": "cats"}, schema(search_docs)) == {"query": "cats"}


def test_unknown_key_is_not_guessed_into_the_required_field_of_a_multi_field_tool():
    # A typo of an optional field must not silently become the query.
    assert coerce_args({"max_reslts": "4"}, schema(search_docs)) == {"max_reslts": "4"}


def test_lone_unknown_key_goes_to_the_only_field():
    assert coerce_args({"term_to_find": "cats"}, schema(lookup)) == {"query": "cats"}


def test_empty_string_arguments_become_empty_dict():
    assert coerce_args("", schema(search_docs)) == {}


def test_correct_arguments_come_back_equal():
    args = {"query": "cats", "max_results": 2, "exact": True}
    assert coerce_args(args, schema(search_docs)) == args


# --- field names ----------------------------------------------------------------------------


@pytest.mark.parametrize("alias", ["q", "search", "text", "search_query", "keywords"])
def test_query_aliases_map_to_query(alias):
    assert coerce_args({alias: "cats"}, schema(search_docs)) == {"query": "cats"}


def test_alias_does_not_override_a_real_query_argument():
    out = coerce_args({"query": "cats", "q": "dogs"}, schema(search_docs))
    assert out["query"] == "cats"
    assert out["q"] == "dogs"  # left for validation to report


@pytest.mark.parametrize("key", ["Query", "QUERY", "qUeRy"])
def test_case_variants_of_a_field_name_match(key):
    out = coerce_args({key: "cats", "MAX_RESULTS": 1}, schema(search_docs))
    assert out == {"query": "cats", "max_results": 1}


@pytest.mark.parametrize("key", ["max-results", "Max-Results", "max results"])
def test_dash_and_space_variants_of_a_field_name_match(key):
    out = coerce_args({"query": "x", key: 4}, schema(search_docs))
    assert out == {"query": "x", "max_results": 4}


def test_message_aliases_map_to_message():
    out = coerce_args({"msg": "hi", "channel-name": "dev"}, schema(send))
    assert out == {"message": "hi", "channel_name": "dev"}


# --- values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [("5", 5), (" 7 ", 7), ("5.0", 5), ("-2", -2)])
def test_integer_strings_become_integers(raw, expected):
    out = coerce_args({"query": "x", "max_results": raw}, schema(search_docs))
    assert out["max_results"] == expected
    assert type(out["max_results"]) is int


def test_non_integral_string_for_integer_field_is_left_for_validation():
    out = coerce_args({"query": "x", "max_results": "5.5"}, schema(search_docs))
    assert out["max_results"] == "5.5"


def test_number_strings_become_floats():
    out = coerce_args({"options": {}, "ratio": "0.25"}, schema(configure))
    assert out["ratio"] == 0.25


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("True", True), ("false", False), ("yes", True), ("no", False), ("1", True)],
)
def test_boolean_strings_become_booleans(raw, expected):
    out = coerce_args({"query": "x", "exact": raw}, schema(search_docs))
    assert out["exact"] is expected


def test_string_field_keeps_numeric_strings():
    out = coerce_args({"query": "5"}, schema(search_docs))
    assert out == {"query": "5"}


def test_json_list_string_becomes_a_list():
    out = coerce_args({"items": '["a", "b"]', "label": "x"}, schema(tag_items))
    assert out == {"items": ["a", "b"], "label": "x"}


def test_json_list_string_for_an_optional_list_field():
    out = coerce_args({"items": ["a"], "label": "x", "weights": "[0.5, 1]"}, schema(tag_items))
    assert out["weights"] == [0.5, 1]


def test_lone_value_for_a_list_field_is_wrapped():
    assert coerce_args({"items": "a", "label": "x"}, schema(tag_items))["items"] == ["a"]


@tool
def get_pages(page: int | list[int], filters: dict | list[dict] | None = None) -> str:
    """Fetch one page or several."""
    return "ok"


def test_a_value_of_another_type_of_a_union_with_a_list_is_not_wrapped():
    args = {"page": 3, "filters": {"lang": "en"}}
    assert coerce_args(args, schema(get_pages)) == args
    assert coerce_args({"page": [3]}, schema(get_pages)) == {"page": [3]}
    wrapped = coerce_args({"items": ["a"], "label": "x", "weights": 0.5}, schema(tag_items))
    assert wrapped["weights"] == [0.5]  # list[float] | None: only the list takes a number


def test_json_object_string_becomes_an_object():
    out = coerce_args({"options": '{"depth": 2}'}, schema(configure))
    assert out == {"options": {"depth": 2}}


class Unit(StrEnum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Settings(BaseModel):
    depth: int


@tool
def forecast(
    city: str,
    unit: Unit = Unit.CELSIUS,
    status: Literal["in_progress", "done"] | None = None,
    fmt: Literal["json"] = "json",
    settings: Settings | None = None,
) -> str:
    """Forecast with an enum class, a literal, a constant and a nested model."""
    return f"{city} {unit.value} {status} {fmt} {settings.depth if settings else None}"


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ({"unit": "Celsius"}, {"unit": "celsius"}),  # an enum class: a $ref to $defs
        ({"unit": " FAHRENHEIT "}, {"unit": "fahrenheit"}),
        ({"status": "In Progress"}, {"status": "in_progress"}),  # Optional[Literal]: anyOf
        ({"status": "in-progress"}, {"status": "in_progress"}),
        ({"fmt": "JSON"}, {"fmt": "json"}),  # a one-value Literal: const
    ],
)
def test_an_allowed_value_spelt_another_way_becomes_that_value(sent, expected):
    # Was sent on as it was ("Celsius"), and the tool refused it: not one of its values.
    out = coerce_args({"city": "Oslo", **sent}, schema(forecast))
    assert out == {"city": "Oslo", **expected}
    forecast.invoke(out)  # and the tool takes it


@tool
def schedule(days: list[Unit], tags: list[Literal["urgent", "follow_up"]] | None = None) -> str:
    """Schedule on some days, with tags: lists of allowed values."""
    return " ".join([d.value for d in days] + (tags or []))


def test_a_list_of_allowed_values_spelt_another_way_becomes_those_values():
    sent = {"days": ["Celsius", "FAHRENHEIT", 3], "tags": '["Urgent", "follow-up"]'}
    out = coerce_args(sent, schema(schedule))
    assert out == {"days": ["celsius", "fahrenheit", 3], "tags": ["urgent", "follow_up"]}
    assert coerce_args({"days": "Celsius"}, schema(schedule)) == {"days": ["celsius"]}
    assert schedule.invoke({**out, "days": ["celsius"]}) == "celsius urgent follow_up"


def test_null_for_an_optional_argument_that_takes_none_is_as_if_not_sent():
    # Was refused ("Input should be 'celsius' or 'fahrenheit'"): models trained on strict
    # structured outputs send every argument, null for those they do not use.
    sent = {"city": "Oslo", "unit": None, "status": None, "fmt": None, "settings": None}
    out = coerce_args(sent, schema(forecast))
    assert out == {"city": "Oslo", "status": None, "settings": None}  # Optional: null is valid
    assert forecast.invoke(out) == "Oslo celsius None json None"
    required = coerce_args({"city": None}, schema(forecast))
    assert required == {"city": None}  # no default to fall back on: validation says so
    untyped = {"properties": {"x": {}, "y": {"enum": ["a"]}, "z": {"enum": ["a", None]}}}
    assert coerce_args({"x": None, "y": None, "z": None}, untyped) == {"x": None, "z": None}


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ({"Unit": "F", "unit": None}, {"unit": "f"}),
        ({"unit": None, "Unit": "F"}, {"unit": "f"}),
        ({"N": "5", "n": "6"}, {"n": 6, "N": "5"}),
        ({"n": "6", "N": "5"}, {"n": 6, "N": "5"}),
    ],
)
def test_a_fields_own_name_wins_over_its_other_spellings_whatever_their_order(sent, expected):
    # Was the order's: {"N": "5", "n": "6"} gave {"n": "6"} (uncoerced), the reverse {"n": 6}.
    unit = {"type": "string", "enum": ["c", "f"]}
    schema = {"properties": {"unit": unit, "n": {"type": "integer"}}}
    assert coerce_args(sent, schema) == expected


def test_a_value_that_is_no_spelling_of_an_allowed_one_is_left_for_validation():
    out = coerce_args({"city": "Oslo", "unit": "kelvin"}, schema(forecast))
    assert out["unit"] == "kelvin"
    with pytest.raises(ValidationError):
        forecast.invoke(out)


def test_a_spelling_of_two_allowed_values_or_beside_a_free_string_is_left_as_it_is():
    two = {"properties": {"mode": {"enum": ["Fast", "FAST"]}}}
    assert coerce_args({"mode": "fast"}, two) == {"mode": "fast"}
    free = {"properties": {"unit": {"anyOf": [{"enum": ["celsius"]}, {"type": "string"}]}}}
    assert coerce_args({"unit": "Celsius"}, free) == {"unit": "Celsius"}  # valid as it is


def test_a_field_given_by_a_reference_is_coerced_through_it():
    # The nested model's schema is a $ref: its JSON text becomes the object it asks for.
    out = coerce_args({"city": "Oslo", "settings": '{"depth": 2}'}, schema(forecast))
    assert out["settings"] == {"depth": 2}
    assert forecast.invoke(out) == "Oslo celsius None json 2"


def test_references_are_followed_through_a_lone_allof_and_a_chain_but_not_round_a_loop():
    import pydantic.v1 as v1

    class Old(v1.BaseModel):  # pydantic.v1 writes a described enum field as allOf: [$ref]
        unit: Unit = v1.Field(Unit.CELSIUS, description="The unit.")

    assert "allOf" in Old.schema()["properties"]["unit"]
    assert coerce_args({"unit": "Fahrenheit"}, Old.schema()) == {"unit": "fahrenheit"}
    defs = {"A": {"$ref": "#/$defs/B"}, "B": {"enum": ["bee"]}, "L": {"$ref": "#/$defs/L"}}
    chain = {"properties": {"a": {"$ref": "#/$defs/A"}, "l": {"$ref": "#/$defs/L"}}, "$defs": defs}
    assert coerce_args({"a": "BEE", "l": "X"}, chain) == {"a": "bee", "l": "X"}


def test_a_list_beside_a_list_of_free_strings_is_left_as_it_is_but_not_beside_numbers():
    allowed, free = {"enum": ["a"]}, {"type": "string"}
    either = {"anyOf": [{"type": "array", "items": allowed}, {"type": "array", "items": free}]}
    assert coerce_args({"xs": ["A"]}, {"properties": {"xs": either}}) == {"xs": ["A"]}
    numbers = {"type": "integer"}
    either = {"anyOf": [{"type": "array", "items": allowed}, {"type": "array", "items": numbers}]}
    assert coerce_args({"xs": ["A"]}, {"properties": {"xs": either}}) == {"xs": ["a"]}


def test_spelt_as_skips_names_that_are_no_text_and_answers_none_for_two():
    assert spelt_as("a", ["A", None, 5]) == "A"
    assert spelt_as("a", ["A", "a_"]) == "A"
    assert spelt_as("a-b", ["A_B", "a b"]) is None  # two it could be
    assert spelt_as("ab", []) is None


def test_a_reference_that_cannot_be_followed_constrains_nothing():
    for ref in ("#/$defs/Missing", "https://example.com/unit.json", 5):
        odd = {"properties": {"unit": {"$ref": ref}}, "$defs": {"Other": {"enum": ["a"]}}}
        assert coerce_args({"unit": "A"}, odd) == {"unit": "A"}


# --- schemas and errors ---------------------------------------------------------------------


def test_tool_json_schema_leaves_out_injected_arguments():
    props = tool_json_schema(injected)["properties"]
    assert list(props) == ["query"]


def test_still_invalid_arguments_give_the_validation_error_and_the_expected_schema():
    args = coerce_args({"query": "x", "max_results": "many"}, schema(search_docs))
    with pytest.raises(ValidationError) as info:
        search_docs.args_schema.model_validate(args)
    text = schema_error_message(search_docs, info.value, args)
    assert "invalid arguments for tool 'search_docs'" in text
    assert "max_results" in text and "valid integer" in text
    assert '"many"' in text  # what the model sent
    expected_schema = json.dumps(tool_json_schema(search_docs))
    assert expected_schema in text
    assert "again" in text  # tells the model to retry


def test_missing_required_field_error_names_the_field():
    with pytest.raises(ValidationError) as info:
        search_docs.args_schema.model_validate({})
    text = schema_error_message(search_docs, info.value, {})
    assert "query: Field required" in text


# --- invalid native calls: any raw arguments (issue 25, part A) -----------------------------

BAD_RAW = [
    "{[1]: 2}", "{(1, 2): 3}", '{"a": {(1, 2): 3}}', "{'a': {1, 2}}", "{'a': b'x'}",
    "{'a': 1j}", "{'a': ...}", "{" * 200 + "}" * 200, "{'a': [" + "1, " * 6_000 + "]}",
]  # fmt: skip


def _invalid(raw: Any, name: str = "get_weather") -> AIMessage:
    return AIMessage(
        "",
        invalid_tool_calls=[
            {"name": name, "args": raw, "id": "c1", "error": None, "type": "invalid_tool_call"}
        ],
    )


@pytest.mark.parametrize("raw", BAD_RAW, ids=lambda r: r[:20])
def test_invalid_raw_arguments_that_are_no_json_object_keep_their_text(raw):
    (call,) = repair_tool_calls(_invalid(raw)).tool_calls
    assert call["args"] == {RAW_ARGUMENTS_KEY: raw}


@pytest.mark.parametrize(
    ("raw", "args"),
    [
        ("{'city': 'Paris', 'days': (1, 2)}", {"city": "Paris", "days": [1, 2]}),
        (
            "{'city': 'Paris', 'exact': True, 'n': None}",
            {"city": "Paris", "exact": True, "n": None},
        ),  # noqa: E501
        ("{1: 'a', 'm': {2.5: 'b'}}", {"1": "a", "m": {"2.5": "b"}}),
    ],
)
def test_python_literal_raw_arguments_are_repaired_into_json(raw, args):
    (call,) = repair_tool_calls(_invalid(raw)).tool_calls
    assert call["args"] == args


@pytest.mark.parametrize(
    ("raw", "city"),
    [
        ('{"city": 18446744073709551616}', "18446744073709551616"),
        ("{'city': 0xffffffffffffffffffffffff}", str(0xFFFFFFFFFFFFFFFFFFFFFFFF)),
        ("{'city': [0x" + "f" * 5000 + "]}", [hex(16**5000 - 1)]),
    ],
    ids=["json-2**64", "literal-96-bits", "literal-5000-hex-digits"],
)
def test_an_invalid_native_calls_integer_the_checkpointer_cannot_store_is_kept_as_text(raw, city):
    """LangGraph's checkpointer stores no int outside 64 bits: a repaired call kept one and
    the checkpointed run failed saving the reply (TypeError: not msgpack serializable)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_toolbudget import create_toolbudget_agent
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog
    from langgraph_toolbudget.testing import ScriptedChatModel

    (repaired,) = repair_tool_calls(_invalid(raw)).tool_calls
    assert repaired["args"] == {"city": city}
    model = ScriptedChatModel(responses=[_invalid(raw), AIMessage("done")], cycle=False)
    graph = create_toolbudget_agent(model, build_example_catalog(), pinned=["get_weather"])
    app = graph.compile(checkpointer=InMemorySaver())
    out = app.invoke({"messages": [HumanMessage("weather?")]}, {"configurable": {"thread_id": "t"}})
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answer.tool_call_id == "c1" and out["messages"][-1].content == "done"


def test_a_valid_native_calls_integers_outside_64_bits_become_their_text_wherever_they_are():
    """A native model's valid JSON ``{"n": 18446744073709551616}`` is a Python int once the
    provider parsed it: the reply kept it and a checkpointed run failed saving it. It becomes
    its text (hex past 4,300 digits), nested too, and in a ``tool_use`` content block."""
    plain = {"name": "lookup", "args": {"query": "x", "n": 2**63 - 1}, "id": "c0"}
    wide = {
        "name": "lookup",
        "args": {"n": 2**64, "deep": {"xs": [1, -(2**63) - 1, [2**20000]]}, "ok": -(2**63)},
        "id": "c1",
    }
    block = {"type": "tool_use", "id": "c1", "name": "lookup", "input": wide["args"]}
    message = AIMessage([{"type": "text", "text": "hm"}, block], tool_calls=[plain, wide])
    repaired = repair_tool_calls(message)
    args = {
        "n": "18446744073709551616",
        "deep": {"xs": [1, "-9223372036854775809", [hex(2**20000)]]},
        "ok": -(2**63),
    }
    assert repaired.tool_calls[1]["args"] == args and repaired.content[1]["input"] == args
    assert repaired.tool_calls[0] is message.tool_calls[0]  # nothing to change: not copied
    assert repaired.content[0] is message.content[0]
    assert message.tool_calls[1]["args"]["n"] == 2**64  # the model's reply is not changed
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()
    assert serde.loads_typed(serde.dumps_typed(repaired)).tool_calls == repaired.tool_calls
    with pytest.raises(TypeError, match="not msgpack serializable"):  # why: what it was
        serde.dumps_typed(message)


def test_an_ordinary_native_reply_is_returned_as_it_is():
    """The hot path: a reply with no invalid call, no missing id and no wide int is the same
    object (nothing walked twice, nothing copied)."""
    calls = [
        {"name": "search_docs", "args": {"query": "q", "max_results": 5, "tags": ["a", 2**63]},
         "id": f"c{i}"}
        for i in range(5)
    ]  # fmt: skip
    for content in ("", [{"type": "text", "text": "hi", "index": 0}]):
        message = AIMessage(content, tool_calls=calls)
        assert repair_tool_calls(message) is message


def test_state_ints_walks_shared_and_self_holding_values_once():
    from langgraph_toolbudget.core.limits import MAX_STATE_DEPTH, state_ints

    shared: list[Any] = [2**64]
    for _ in range(200):  # 2**200 paths through 200 shared lists: walked once each
        shared = [shared, shared]
    out = state_ints(shared)
    assert out[0] is out[1]  # rewritten once, still shared
    inner = out
    for _ in range(200):
        inner = inner[0]
    assert inner == ["18446744073709551616"]
    loop: list[Any] = [1]
    loop.append(loop)
    assert state_ints(loop) is loop  # a value that holds itself: no int to change, no hang
    loop.append(2**64)
    assert state_ints(loop)[2] == "18446744073709551616"
    deep: Any = 2**64
    for _ in range(MAX_STATE_DEPTH + 10):  # deeper than the checkpointer stores: left as is
        deep = [deep]
    assert state_ints(deep) is deep


@pytest.mark.parametrize("raw", ["{[1]: 2}", "{(1,2): 3}", "{1: 2}", '{"a": {(1, 2): 3}}'])
def test_invalid_native_calls_never_raise_out_of_the_graph(raw):
    from langgraph_toolbudget import create_toolbudget_agent
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog
    from langgraph_toolbudget.testing import ScriptedChatModel

    model = ScriptedChatModel(responses=[_invalid(raw), AIMessage("done")], cycle=False)
    graph = create_toolbudget_agent(model, build_example_catalog(), pinned=["get_weather"])
    out = graph.compile().invoke({"messages": [HumanMessage("weather?")]})
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answer.tool_call_id == "c1" and answer.status == "error"
    assert out["messages"][-1].content == "done"


def test_calls_that_share_an_id_get_their_own_and_a_reply_without_any_is_the_same_object():
    calls = [
        {"name": "add_tool", "args": {}, "id": "call_0"},
        {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_0"},
        {"name": "read_inbox", "args": {}, "id": "call_1"},
        {"name": "get_weather", "args": {"city": "Rome"}, "id": "call_0"},
    ]
    reply = AIMessage("", tool_calls=calls)
    fixed = distinct_call_ids(reply)
    ids = [c["id"] for c in fixed.tool_calls]
    assert ids[0] == "call_0" and ids[2] == "call_1" and len(set(ids)) == 4
    assert [(c["name"], c["args"]) for c in fixed.tool_calls] == [
        (c["name"], c["args"]) for c in calls
    ]
    assert reply.tool_calls[1]["id"] == "call_0"  # the model's reply is not changed in place
    distinct = AIMessage("", tool_calls=calls[1:3])
    assert distinct_call_ids(distinct) is distinct


def test_a_repaired_reply_is_a_message_of_its_own():
    """A repaired reply gets its own id, so the messages stream sends it after the raw one."""
    whole = AIMessage("", id="r", tool_calls=[{"name": "t", "args": {}, "id": "c1"}])
    assert repair_tool_calls(whole) is whole and distinct_call_ids(whole) is whole
    no_id = AIMessage("", id="r", tool_calls=[{"name": "t", "args": {}, "id": None}])
    repaired = repair_tool_calls(no_id)
    assert repaired.id == "r-repaired" and repaired.tool_calls[0]["id"]
    shared = AIMessage("", id="r", tool_calls=[{"name": "t", "args": {}, "id": "c"}] * 2)
    renamed = distinct_call_ids(shared)
    assert renamed.id == "r-repaired" and len({c["id"] for c in renamed.tool_calls}) == 2
    assert distinct_call_ids(repair_tool_calls(shared)).id == "r-repaired"  # not "-repaired" twice
    assert repair_tool_calls(AIMessage("", tool_calls=no_id.tool_calls)).id is None


def test_complete_tool_calls_keeps_an_empty_id_and_makes_up_only_what_is_missing():
    """``""`` and a shared id are ids (ToolNode answers under them); None gets a new one."""
    calls: list[Any] = [
        {"name": "t", "args": {}, "id": ""},
        {"name": "t", "args": {}, "id": None},
        {"name": None, "args": {}, "id": "c"},
        {"name": "t", "args": {}, "id": "c"},
        {"name": "t", "args": {}, "id": ""},
    ]
    done = complete_tool_calls(calls)
    assert done[0] is calls[0] and done[3] is calls[3] and done[4] is calls[4]  # was missing_id_0
    assert done[1] == {**calls[1], "id": done[1]["id"]} and done[1]["id"].startswith("call_")
    assert done[2] == {**calls[2], "name": MISSING_NAME}
    assert [c["id"] for c in done] == ["", done[1]["id"], "c", "c", ""]
    assert calls[1]["id"] is None  # the model's calls are not changed in place


def test_unrun_calls_carry_the_raw_arguments_so_they_get_the_not_valid_json_error():
    invalid: list[Any] = [
        {"name": "lookup", "args": "{'query': 'x'}", "id": "b1", "error": None},  # a literal
        {"name": None, "args": None, "id": None, "error": None},
    ]
    assert unrun_calls(invalid) == [
        {"name": "lookup", "args": {RAW_ARGUMENTS_KEY: "{'query': 'x'}"}, "id": "b1",
         "type": "tool_call"},
        {"name": MISSING_NAME, "args": {RAW_ARGUMENTS_KEY: "None"}, "id": None,
         "type": "tool_call"},
    ]  # fmt: skip
