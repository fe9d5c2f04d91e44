"""The text tool-call formats: parsing real-world replies, rendering, the registry, the option."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from langgraph_toolbudget import BudgetConfig, formats
from langgraph_toolbudget.core.budget import format_for_model
from langgraph_toolbudget.formats import (
    ToolCallFormat,
    UnknownFormatError,
    _json,
    format_names,
    get_format,
    register_format,
)
from langgraph_toolbudget.formats.base import (
    MAX_CALL_CHARS,
    MAX_CALLS,
    MAX_REPAIR_CHARS,
    MAX_REPAIR_CHARS_PER_REPLY,
    ParsedReply,
    reply_message,
)
from langgraph_toolbudget.formats.history import parse_error_of, render_history
from langgraph_toolbudget.formats.settings import (
    NoFormatAvailableError,
    ToolCallFormats,
    choose_format,
)

FIXTURES = json.loads((Path(__file__).parent / "data" / "format_replies.json").read_text())
TEXT_FORMATS = ["hermes", "mistral", "pythonic", "json"]
CASES = [
    pytest.param(fmt, case, id=f"{fmt}-{case['id']}")
    for fmt in TEXT_FORMATS
    for case in FIXTURES[fmt]
]


def calls_of(parsed: ParsedReply) -> list[list[Any]]:
    return [[c["name"], c["args"]] for c in parsed.calls]


def test_every_text_format_has_at_least_eight_fixtures_with_malformed_ones():
    for fmt in TEXT_FORMATS:
        cases = FIXTURES[fmt]
        assert len(cases) >= 8, fmt
        assert sum(bool(c.get("error")) for c in cases) >= 2, fmt


@pytest.mark.parametrize(("fmt", "case"), CASES)
def test_real_world_replies_parse_into_the_expected_calls(fmt, case):
    parsed = get_format(fmt).parse(case["reply"])
    if case.get("error"):
        assert parsed.error and not parsed.calls, parsed
        assert parsed.text == case["reply"]  # nothing the model wrote is lost
        return
    assert parsed.error is None, parsed.error
    assert calls_of(parsed) == case["calls"]
    if "text" in case:
        assert parsed.text == case["text"]


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_rendered_call_parses_back_to_the_same_call(fmt):
    f = get_format(fmt)
    calls = [
        {
            "name": "get_weather",
            "args": {"city": "Paris", "days": 3},
            "id": "a1",
            "type": "tool_call",
        },
        {"name": "tag_items", "args": {"items": ["x", "y"], "flag": True, "n": None}, "id": "b2"},
    ]
    parsed = f.parse(f.render_calls(calls, "Checking two things."))  # type: ignore[arg-type]
    assert calls_of(parsed) == [[c["name"], c["args"]] for c in calls]
    # In the json format a reply with prose is an answer: the calls are rendered alone.
    assert parsed.text == ("" if fmt == "json" else "Checking two things.")


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_rendered_tools_list_every_tool_with_its_parameters_and_the_call_syntax(fmt):
    @tool
    def get_weather(city: str) -> str:
        """Get current weather conditions for a city."""
        return city

    text = get_format(fmt).render_tools([convert_to_openai_tool(get_weather)])
    assert "get_weather" in text and "Get current weather conditions" in text and "city" in text
    example = get_format(fmt).example
    assert example.split("tool_name")[0].strip()[:5] in text  # the call syntax is explained


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_tool_result_is_rendered_with_its_content_and_the_format_markers(fmt):
    message = ToolMessage("18C, cloudy", tool_call_id="a1", name="get_weather")
    text = get_format(fmt).render_result(message, None)
    assert "18C, cloudy" in text
    marker = {"hermes": "<tool_response>", "mistral": "[TOOL_RESULTS]", "pythonic": "get_weather"}
    assert marker.get(fmt, "tool_result") in text


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_huge_and_deeply_nested_replies_are_errors_or_text_never_exceptions(fmt):
    f = get_format(fmt)
    deep = "[" * 50_000 + "]" * 50_000
    replies = [
        "word " * 200_000,  # 1 MB of prose
        f.render_calls([{"name": "x", "args": {"a": "y" * 1_000_000}, "id": "1"}]),
        f.render_calls([{"name": "x", "args": {}, "id": "1"}])
        .replace("{}", deep)
        .replace("()", f"(a={deep})"),
        f.example * 5_000,
        f.example[: len(f.example) // 2] * 20_000,
    ]
    for reply in replies:
        parsed = f.parse(reply)
        assert isinstance(parsed, ParsedReply)
        assert len(parsed.calls) <= 32
    big = f.parse(replies[1])
    assert big.error and str(MAX_CALL_CHARS) in big.error


def test_pythonic_never_evaluates_code():
    parsed = get_format("pythonic").parse("[f(a=__import__('os').getcwd())]")
    assert parsed.error and "not a literal" in parsed.error


def test_a_parsed_reply_becomes_a_standard_ai_message_with_generated_ids():
    f = get_format("hermes")
    reply = AIMessage(
        'Checking.\n<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>', id="r1"
    )
    message = reply_message(reply, f.parse(reply.text), f)
    (call,) = message.tool_calls
    assert call["name"] == "add" and call["args"] == {"a": 1} and call["id"]
    assert message.content == "Checking."
    assert message.response_metadata["toolbudget_raw"] == reply.text
    assert message.id == "r1-parsed"  # not the streamed reply's id: the messages stream sends it
    bad = AIMessage("<tool_call>not json at all</tool_call>", id="b1")
    rejected = reply_message(bad, f.parse(bad.text), f)
    assert rejected.tool_calls == [] and rejected.content == bad.content
    assert rejected.id == "b1"  # the text as streamed: its id stays
    plain = AIMessage("No call here.", id="p1")
    assert reply_message(plain, f.parse(plain.text), f).id == "p1"
    assert parse_error_of(rejected) and parse_error_of(message) is None


REASONING = "The user wants Paris; call add."
HERMES_CALL = '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'
REASONING_REPLIES = {
    # output_version="v1" (ChatOllama(reasoning=True), the Responses API): a reasoning block
    "v1-reasoning": [{"type": "reasoning", "reasoning": REASONING, "id": "rs_1"}],
    # Anthropic (or Bedrock) extended thinking: a thinking block with its signature
    "anthropic-thinking": [{"type": "thinking", "thinking": REASONING, "signature": "sig=="}],
    # ChatDeepSeek, ChatOllama without v1: only additional_kwargs["reasoning_content"]
    "kwargs-only": [],
}


@pytest.mark.parametrize("shape", list(REASONING_REPLIES))
def test_a_parsed_reply_keeps_what_the_model_sent_beside_its_text(shape):
    f = get_format("hermes")
    before = REASONING_REPLIES[shape]
    text = {"type": "text", "text": f"Checking.\n{HERMES_CALL}"}
    reply = AIMessage(
        [*before, text, {"type": "text", "text": " More."}] if before else f"{text['text']} More.",
        id="r1",
        additional_kwargs={"reasoning_content": REASONING},
        response_metadata={"model_provider": "ollama", "model_name": "qwen3"},
        usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    )
    message = reply_message(reply, f.parse(reply.text), f)
    assert [c["name"] for c in message.tool_calls] == ["add"]
    # only the text changed: its blocks became the text left, where the first one was
    left = f.parse(reply.text).text
    assert left.startswith("Checking.") and left.endswith("More.") and "tool_call" not in left
    expected = [*before, {"type": "text", "text": left}] if before else left
    assert message.content == expected  # was "Checking." alone: the reasoning block dropped
    assert message.additional_kwargs == {"reasoning_content": REASONING}  # was {}
    assert message.usage_metadata == reply.usage_metadata and message.id == "r1-parsed"
    assert message.response_metadata == {
        **reply.response_metadata,
        "toolbudget_format": "hermes",
        "toolbudget_raw": reply.text,
    }
    # a reply of calls alone keeps no empty text block (a provider refuses one)
    alone = reply.model_copy(update={"content": [*before, {"type": "text", "text": HERMES_CALL}]})
    assert reply_message(alone, f.parse(alone.text), f).content == (before or "")
    # a reply that could not be read keeps all it had too, with no call
    bad = reply.model_copy(update={"content": [*before, {"type": "text", "text": "<tool_call>x"}]})
    rejected = reply_message(bad, f.parse(bad.text), f)
    assert rejected.content == bad.content and rejected.tool_calls == []
    assert rejected.additional_kwargs == bad.additional_kwargs and rejected.id == "r1"
    assert parse_error_of(rejected) and rejected.usage_metadata == bad.usage_metadata


def test_mistral_ids_are_nine_letters_and_digits():
    ids = {get_format("mistral").new_id() for _ in range(50)}
    assert all(len(i) == 9 and i.isalnum() for i in ids) and len(ids) == 50


def test_history_is_rewritten_in_the_format_and_errors_follow_rejected_replies():
    f = get_format("hermes")
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
    rejected = reply_message(
        AIMessage("<tool_call>oops</tool_call>"), f.parse("<tool_call>oops</tool_call>"), f
    )
    history = [
        HumanMessage("weather?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("18C", tool_call_id="c1"),
        rejected,
    ]
    out = render_history(history, f)
    assert [type(m).__name__ for m in out] == [
        "HumanMessage", "AIMessage", "HumanMessage", "AIMessage", "HumanMessage"
    ]  # fmt: skip
    assert f.parse(out[1].text).calls == [{"name": "get_weather", "args": {"city": "Paris"}}]
    assert "<tool_response>" in out[2].text and '"get_weather"' in out[2].text
    assert "could not be read" in out[4].text and "<tool_call>" in out[4].text


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_history_holding_an_integer_python_will_not_write_in_decimal_is_rewritten(fmt):
    """A native model's call, or a tool's content block, may hold an int of over 4,300
    digits (repr and json.dumps raise ValueError on it): the history shows its hex literal
    (a string in the JSON formats), and the calls around it as they were."""
    big = 2**20000
    call = {"name": "count", "args": {"n": big, "more": [1, big]}, "id": "c1", "type": "tool_call"}
    history = [
        HumanMessage("count"),
        AIMessage("", tool_calls=[call]),
        ToolMessage([{"type": "data", "total": big}], tool_call_id="c1"),
    ]
    out = render_history(history, get_format(fmt))
    assert [type(m).__name__ for m in out] == ["HumanMessage", "AIMessage", "HumanMessage"]
    written = hex(big) if fmt == "pythonic" else json.dumps(hex(big))
    assert out[1].text.count(written) == 2 and hex(big) in out[2].text
    (parsed,) = get_format(fmt).parse(out[1].text).calls
    assert parsed == {"name": "count", "args": {"n": hex(big), "more": [1, hex(big)]}}


# --- the registry and the option ------------------------------------------------------------


def test_the_registry_knows_the_six_formats_and_names_them_on_a_typo():
    names = format_names()
    assert names[0] == "native"
    assert {"hermes", "json", "mistral", "pythonic", "codemode"} <= set(names)
    with pytest.raises(
        UnknownFormatError, match="'hermez'; the formats are: 'native', 'codemode', 'hermes'"
    ):
        get_format("hermez")


def test_each_format_is_registered_under_its_own_name():
    assert {name: fmt.name for name, fmt in formats.FORMATS.items()} == {
        name: name for name in formats.FORMATS
    }


def test_a_new_format_is_one_class_registered_by_name():
    class Shouty(ToolCallFormat):
        name: ClassVar[str] = "shouty"

        def render_tools(self, tools):
            return "TOOLS: " + ", ".join(t["function"]["name"] for t in tools)

        def render_calls(self, calls, text=""):
            return " ".join(f"CALL {c['name']}" for c in calls)

        def render_result(self, message, call):
            return f"RESULT {message.content}"

        def parse(self, text):
            names = [w for w in text.split() if w.isupper() and w != "CALL"]
            return ParsedReply(calls=[{"name": n.lower(), "args": {}} for n in names])

        @property
        def example(self):
            return "CALL TOOL_NAME"

    register_format(Shouty)
    try:
        config = BudgetConfig(tool_call_formats=["shouty"])
        assert config.tool_call_formats == ToolCallFormats(("shouty",), "shouty")
        assert get_format("shouty").parse("CALL PING").calls == [{"name": "ping", "args": {}}]
    finally:
        formats.FORMATS.pop("shouty")
    with pytest.raises(TypeError, match="concrete ToolCallFormat"):
        register_format(dict)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"enabled": ["native", "hermes"], "primary": "hermes"}, (("native", "hermes"), "hermes")),
        (["pythonic", "json"], (("pythonic", "json"), "pythonic")),
        ("mistral", (("mistral",), "mistral")),
        ({"primary": "json"}, (("json",), "json")),
    ],
)
def test_tool_call_formats_accepts_a_mapping_a_list_or_a_name(spec, expected):
    formats = BudgetConfig(tool_call_formats=spec).tool_call_formats
    assert (formats.enabled, formats.primary) == expected


@pytest.mark.parametrize(
    ("spec", "error", "match"),
    [
        ({"enabled": ["native", "harmony"]}, ValueError, "unknown tool-call format 'harmony'"),
        ({"enabled": []}, ValueError, "is empty: enable at least one"),
        ({"enabled": ["native"], "primary": "json"}, ValueError, "add it to 'enabled'"),
        ({"enable": ["native"]}, ValueError, "has no key 'enable'"),
        ({"enabled": "hermes"}, TypeError, "must be"),
        (3, TypeError, "must be"),
    ],
)
def test_a_bad_tool_call_formats_names_the_problem_and_the_fix(spec, error, match):
    with pytest.raises(error, match=match):
        BudgetConfig(tool_call_formats=spec)


def test_model_supports_tools_must_be_a_bool():
    with pytest.raises(TypeError, match="model_supports_tools must be True or False or None"):
        BudgetConfig(model_supports_tools="yes")


def test_choose_format_follows_the_decision_tree():
    both = ToolCallFormats(("native", "hermes"), "native")
    chosen = choose_format(both, native_available=True, native_why="it binds")
    assert chosen.name == "native" and "primary format 'native' is available" in chosen.reason
    fallback = choose_format(both, native_available=False, native_why="no bind_tools")
    assert fallback.name == "hermes"
    assert "not available (no bind_tools); 'hermes' is the first enabled" in fallback.reason
    text_first = ToolCallFormats(("native", "hermes"), "hermes")
    assert choose_format(text_first, native_available=True, native_why="").name == "hermes"
    only_native = ToolCallFormats(("native",), "native")
    with pytest.raises(NoFormatAvailableError, match="cannot call tools natively"):
        choose_format(only_native, native_available=False, native_why="no bind_tools")


@pytest.mark.parametrize(
    ("model", "fmt"),
    [
        ("qwen2.5:7b-instruct", "hermes"),
        ("Qwen/Qwen3-8B", "hermes"),
        ("NousResearch/Hermes-3-Llama-3.1-8B", "hermes"),
        ("mistral-7b-instruct-v0.3", "mistral"),
        ("mixtral:8x7b", "mistral"),
        ("llama3.2:3b", "pythonic"),
        ("meta-llama/Llama-3.2-3B-Instruct", "pythonic"),
        ("llama-4-scout", "pythonic"),
        ("llama3.1:8b", "json"),
        ("gpt-4o-mini", None),
        (7, None),
    ],
)
def test_the_model_name_presets_a_text_format(model, fmt):
    assert format_for_model(model) == fmt


# --- calls the model writes: cut off, quoted, hostile, costly (issue 25, part A) -------------

DELETE = '"name": "delete_path", "arguments": {"path": "/home/user/proj'
CUT_OFF = [
    pytest.param("hermes", f"<tool_call>{{{DELETE}", id="hermes-tag"),
    pytest.param("hermes", f"{{{DELETE}", id="hermes-no-tags"),
    pytest.param("hermes", f"<tool_call>\n```json\n{{{DELETE}", id="hermes-open-fence"),
    pytest.param("mistral", f"[TOOL_CALLS] [{{{DELETE}", id="mistral-list"),
    pytest.param("mistral", '[TOOL_CALLS]delete_path[ARGS]{"path": "/home/u', id="mistral-args"),
    pytest.param("json", f"{{{DELETE}", id="json"),
    pytest.param("json", f"```json\n[{{{DELETE}", id="json-open-fence"),
    pytest.param("pythonic", '[delete_path(path="/home/user/proj', id="pythonic-list"),
    pytest.param("pythonic", 'delete_path(path="/home/user/proj', id="pythonic-bare"),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "reply"), CUT_OFF)
def test_a_call_cut_off_mid_argument_is_never_run(fmt, reply):
    f = get_format(fmt)
    parsed = f.parse(reply)
    assert parsed.calls == [] and parsed.text == reply
    assert parsed.error and "'delete_path' was cut off" in parsed.error
    message = f.error_message(parsed.error)
    assert "Nothing was run" in message
    assert "send the whole call again, shorter if needed" in message


@pytest.mark.parametrize(
    ("fmt", "reply", "where"),
    [
        ("hermes", '<tool_call>{"name": "tag_items", "arguments": {"items": ["a", "b"', "array"),
        ("hermes", '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 22', "object"),
        ("mistral", '[TOOL_CALLS] [{"name": "a", "arguments": {"a": 1}}, {"name": "a"', "object"),
        ("json", '[{"name": "a", "arguments": {"a": 1}}, {"name": "b", "arguments": {', "object"),
        ("json", '{"name": "a", "arguments": {}}\n{"name": "b", "arguments": {"a": 1', "object"),
        ("pythonic", "[add(a=1), sub(a=[1, 2", "closed"),
        ("hermes", "<tool_call>", "JSON"),
        ("mistral", "[TOOL_CALLS]", "[TOOL_CALLS]"),
    ],
)  # fmt: skip
def test_a_reply_ending_inside_any_value_of_a_call_runs_none_of_its_calls(fmt, reply, where):
    parsed = get_format(fmt).parse(reply)
    assert parsed.calls == [] and parsed.error and "cut off" in parsed.error
    assert where in parsed.error


def test_mistral_end_tokens_inside_a_string_are_part_of_the_value():
    mistral = get_format("mistral")
    content = "<s>old price</s> new price [/TOOL_CALLS]"
    reply = f'[TOOL_CALLS] [{{"name": "write_file", "arguments": {{"content": "{content}"}}}}]'
    assert calls_of(mistral.parse(reply)) == [["write_file", {"content": content}]]
    # cut off after a string holding one: not closed by it, so never run
    cut = '[TOOL_CALLS] [{"name": "delete_path", "arguments": {"note": "a </s> tag", "path": "/h"'
    parsed = mistral.parse(cut)
    assert parsed.calls == [] and parsed.error and "'delete_path' was cut off" in parsed.error


DRAFT = '{"name": "delete_path", "arguments": {"path": "/var/log"}}'


@pytest.mark.parametrize(
    ("fmt", "reply"),
    [
        ("hermes", f"<think>\nI could call\n<tool_call>\n{DRAFT}\n</tool_call>\nbut first I"),
        ("hermes", f"<think>{DRAFT}"),
        ("hermes", f"<think>a</think>\n<think>and then <tool_call>{DRAFT}</tool_call>"),
        ("mistral", f"<think>Maybe [TOOL_CALLS] [{DRAFT}] or"),
        ("json", f"<think>\n{DRAFT}"),
        ("pythonic", '<think>Maybe [delete_path(path="/var/log")] or'),
        ("codemode", "<think>\nA first idea:\n```python\ndelete_path(path='/var/log')\n```"),
    ],
)  # fmt: skip
def test_a_reply_cut_off_inside_think_runs_no_call_drafted_in_it(fmt, reply):
    f = get_format(fmt)
    parsed = f.parse(reply)
    assert parsed.calls == [] and parsed.text == reply
    assert parsed.error and "ends inside <think>" in parsed.error
    assert "Nothing was run" in f.error_message(parsed.error)


@pytest.mark.parametrize(
    ("fmt", "reply"),
    [
        ("hermes", '<tool_call>{"name": "note", "arguments": {"text": "use <think> tags"}}'
                   "</tool_call>"),
        ("pythonic", '[note(text="the <think> tag")]'),
        ("hermes", '<think>ok</think>\n<tool_call>{"name": "note", "arguments": {"text": "x"}}'
                   "</tool_call>\nI wrote <think> above."),
    ],
)  # fmt: skip
def test_a_think_tag_inside_a_call_or_after_it_opens_no_reasoning(fmt, reply):
    # A reasoning block opens at the start of the reply or right after a closed one; the tag
    # written elsewhere (an argument, prose) is text, and the call runs.
    parsed = get_format(fmt).parse(reply)
    assert parsed.error is None and [c["name"] for c in parsed.calls] == ["note"]


CODE_WITH_THINK = 'answer = raw.split("</think>")[-1].strip()  # or "<think>"'


@pytest.mark.parametrize("fmt", [*TEXT_FORMATS, "codemode"])
@pytest.mark.parametrize(
    "before", ["", "<think>I write the helper.</think>\n", "Plan.\n</think>\n"]
)
def test_a_think_tag_inside_a_calls_argument_is_the_arguments_text(fmt, before):
    # The reply was cut at the last </think>, the one inside the argument: the call was
    # dropped silently, its markup became the answer.
    f = get_format(fmt)
    call = {"name": "write_file", "args": {"path": "strip.py", "content": CODE_WITH_THINK}}
    if fmt == "codemode":
        call = {"name": "python_execution", "args": {"code": f"{CODE_WITH_THINK}\n"}}
    parsed = f.parse(before + f.render_calls([{**call, "id": "1"}]))  # type: ignore[list-item]
    assert parsed.error is None and calls_of(parsed) == [[call["name"], call["args"]]]
    assert parsed.text == before.strip()


REASONED = {
    "hermes": lambda name: f'<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>',
    "json": lambda name: f'{{"name": "{name}", "arguments": {{}}}}',
    "mistral": lambda name: f'[TOOL_CALLS] [{{"name": "{name}", "arguments": {{}}}}]',
    "pythonic": lambda name: f"[{name}()]",
}


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_interleaved_reasoning_runs_every_call_outside_it_and_none_inside(fmt):
    # Only the calls after the last </think> were read: "a" was dropped (and a call drafted
    # in a block after a call ran).
    call = REASONED[fmt]
    reply = (
        f"<think>first {call('draft_one')}</think>\n{call('a')}\n"
        f"<think>then {call('draft_two')}</think>\n{call('b')}"
    )
    parsed = get_format(fmt).parse(reply)
    assert parsed.error is None and [c["name"] for c in parsed.calls] == ["a", "b"]
    assert "draft_one" in parsed.text and "draft_two" in parsed.text


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_reply_begun_inside_reasoning_ends_it_at_the_first_close_tag_outside_calls(fmt):
    # No <think>: the reply opens inside reasoning (Qwen 3's templates); its draft never
    # runs, and a </think> inside the call after it is that call's text.
    f = get_format(fmt)
    draft = REASONED[fmt]("draft")
    written = f.render_calls(
        [{"name": "write_file", "args": {"content": CODE_WITH_THINK}, "id": "1"}]
    )
    parsed = f.parse(f"I could call {draft}, but no.\n</think>\n{written}")
    assert parsed.error is None
    assert calls_of(parsed) == [["write_file", {"content": CODE_WITH_THINK}]]


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_reply_cut_off_in_reasoning_after_a_call_runs_that_call_only(fmt):
    call = REASONED[fmt]
    parsed = get_format(fmt).parse(f"<think>ok</think>\n{call('a')}\n<think>now {call('b')}")
    assert parsed.error is None and [c["name"] for c in parsed.calls] == ["a"]


@pytest.mark.parametrize("fmt", [*TEXT_FORMATS, "codemode"])
def test_a_reply_cut_off_inside_think_without_a_call_is_its_text(fmt):
    reply = "<think>\nThe user wants the weather, so I"
    assert get_format(fmt).parse(reply) == ParsedReply(text=reply)


@pytest.mark.parametrize(
    ("fmt", "reply", "calls"),
    [
        ("hermes", "<tool_call>{'name': 'add', 'arguments': {'a': 1, 'b': 'it\\'s',},}</tool_call>",
         [["add", {"a": 1, "b": "it's"}]]),
        ("hermes", '<tool_call>{"name": "add", /* sum */ "arguments": {"a": True, "b": None}}',
         [["add", {"a": True, "b": None}]]),  # no closing tag after complete JSON: accepted
        ("hermes", '<tool_call>{"name": "add", "arguments": {"a": 1}\n</tool_call>',
         [["add", {"a": 1}]]),  # a brace missing before the closing tag: syntax, not a value
        ("mistral", "[TOOL_CALLS] [{'name': 'add', 'arguments': {'a': 'x\\ny'}}] # done",
         [["add", {"a": "x\ny"}]]),
        ("mistral", '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1}}</s>',
         [["add", {"a": 1}]]),
        ("json", '```json\n{"name": "add", "arguments": {"a": 1, // one\n "b": False}}\n```',
         [["add", {"a": 1, "b": False}]]),
        ("json", "{'name': 'add', 'arguments': {'a': 'caf\\u00e9'}}", [["add", {"a": "café"}]]),
        ("json", '{"name": "add", "arguments": {"a": 1,, "b": 2,}}', [["add", {"a": 1, "b": 2}]]),
        ("json", '{name: "rm", arguments: {path: /home/user, n: 12., m: -1}}',
         [["rm", {"path": "/home/user", "n": 12.0, "m": -1}]]),  # unquoted: taken as written
        ("hermes", '<tool_call>{"name": "rm", "arguments": {"path": /data//old, "n": 1 // one\n}}',
         [["rm", {"path": "/data//old", "n": 1}]]),  # a comment starts only between tokens
        ("hermes", '<tool_call>{"name": "tag", "arguments": {"tags": [red\n blue "green"]}}',
         [["tag", {"tags": ["red", "blue", "green"]}]]),  # commas missing between lines
    ],
)  # fmt: skip
def test_repair_fixes_the_syntax_of_a_call_written_whole(fmt, reply, calls):
    parsed = get_format(fmt).parse(reply)
    assert parsed.error is None, parsed.error
    assert calls_of(parsed) == calls


@pytest.mark.parametrize(
    "arguments",
    [
        '{"a": }',  # json_repair (used before) sent "" for a
        '{"a": , "b": 2}',
        '{"a": 1 2}',  # two values for one key
        '{"a": "x" "y"}',  # "y" dropped
        '{"a": 1, "b"}',  # b dropped
        '{"path": "/home/user" "/etc"}',  # json_repair drops "/etc"
        '{"a": [1, 2}, "b": 3}',  # a bracket closed by the wrong one: "b" would move
        '{"a": -}',
        '{"a": 1e}',  # 1 for a
        '{"a": "/home/user/proj}',  # a string never closed, before the closing tag
        '{"path": /data/*.tmp}',  # read as /data and a comment
        '{"query": C#}',  # read as C and a comment
        '{"path": /data /*.tmp}',  # a comment over the closing brackets: they were closed
        '{"a": 1 // one}',
        '{"people": [John Smith, Jane Doe]}',  # 4 people
        '{"amounts": [1 000, 250]}',  # [1, 0, 250]
    ],
)
def test_repair_never_fills_in_changes_or_drops_a_value(arguments):
    reply = f'<tool_call>{{"name": "delete_path", "arguments": {arguments}}}</tool_call>'
    parsed = get_format("hermes").parse(reply)
    assert parsed.calls == [] and parsed.error, parsed


WEATHER = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
TIME = '{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}'


@pytest.mark.parametrize("between", ["\n", ", ", ",\n", " ", "}\n"])
def test_every_call_object_in_one_hermes_block_runs(between):
    # Qwen 3 writes several objects in one block (vLLM #17790): only the first ran, the
    # others were dropped silently (not run, not in the text, no error).
    reply = f"<tool_call>\n{WEATHER}{between}{TIME}\n</tool_call>"
    parsed = get_format("hermes").parse(reply)
    assert parsed.error is None
    assert calls_of(parsed) == [
        ["get_weather", {"city": "Paris"}],
        ["get_time", {"tz": "Europe/Paris"}],
    ]


@pytest.mark.parametrize("between", [" ", "\n", ", ", ",\n"])
def test_every_call_list_after_a_mistral_marker_runs(between):
    # "[TOOL_CALLS] [A] [B]": only the first list ran, the second was dropped silently.
    reply = f"[TOOL_CALLS] [{WEATHER}]{between}[{TIME}] # both"
    parsed = get_format("mistral").parse(reply)
    assert parsed.error is None
    assert calls_of(parsed) == [
        ["get_weather", {"city": "Paris"}],
        ["get_time", {"tz": "Europe/Paris"}],
    ]


@pytest.mark.parametrize(
    "after",
    [
        "and then I will call get_time",
        ', "units": "metric"}',  # a key written after the object closed
        '; {"name": "get_time", "arguments": {}}',
        "<br/>",
    ],
)
def test_text_after_the_json_of_a_hermes_block_is_an_error_not_dropped(after):
    reply = f"<tool_call>\n{WEATHER} {after}\n</tool_call>"
    parsed = get_format("hermes").parse(reply)
    assert parsed.calls == [] and parsed.text == reply
    assert parsed.error and "text after its JSON" in parsed.error


def test_text_after_arguments_given_as_a_json_string_is_an_error_not_dropped():
    arguments = json.dumps('{"path": "/tmp/a"} {"path": "/home"}')
    reply = f'<tool_call>{{"name": "delete_path", "arguments": {arguments}}}</tool_call>'
    parsed = get_format("hermes").parse(reply)
    assert parsed.calls == [] and parsed.error and "one goes" in parsed.error


PROSE_JSON = [
    'Here is what I found: {"tool_result": {"name": "weather_forecast", "content": "sunny"}}',
    'The user record is {"name": "Alice", "email": "alice@example.com"}.',
    '{"name": "Alice", "age": 30}',  # a record standing alone: no arguments, not a call
    '{"tool_result": {"name": "weather_forecast", "content": "sunny"}}',
    '[{"name": "Alice"}, {"name": "Bob"}]',
    'To call it, send {"name": "get_weather", "arguments": {"city": "Paris"}}.',
    'Use this:\n```json\n{"name": "delete_path", "arguments": {"path": "/"}}\n```',
    '{"name": "get_weather", "arguments": {"city": "Paris"}} is how you would call it.',
    '{"user": {"name": "get_weather", "arguments": {}}}',  # nested under another key
]


@pytest.mark.parametrize("reply", PROSE_JSON)
def test_the_json_format_takes_json_in_prose_or_under_other_keys_as_the_answer(reply):
    parsed = get_format("json").parse(reply)
    assert parsed == ParsedReply(text=reply.strip())


@pytest.mark.parametrize("reply", ['{"name": "Alice", "age": 30}', '[{"name": "Bob"}]'])
def test_the_hermes_format_takes_a_record_without_arguments_as_the_answer(reply):
    assert get_format("hermes").parse(reply) == ParsedReply(text=reply)


@pytest.mark.parametrize(
    ("reply", "names"),
    [
        ('{"name": "a", "arguments": {}}', ["a"]),
        ('[{"name": "a", "arguments": {}}, {"name": "b", "parameters": {"x": 1}}]', ["a", "b"]),
        ('{"name": "a", "arguments": {}}\n{"name": "b", "arguments": {}}', ["a", "b"]),
        ('```\n{"name": "a", "arguments": {}}\n```', ["a"]),
        ('<think>I need a.</think>\n{"name": "a", "arguments": {}}', ["a"]),
        ('{"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}}', ["a"]),
        ('{"tool_calls": [{"name": "a", "arguments": {}}]}', ["a"]),
    ],
)
def test_the_json_format_reads_a_reply_that_is_only_call_envelopes(reply, names):
    parsed = get_format("json").parse(reply)
    assert parsed.error is None and [c["name"] for c in parsed.calls] == names


LLAMA_WEATHER = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
LLAMA_TIME = '{"name": "get_time", "parameters": {"tz": "UTC"}}'


@pytest.mark.parametrize(
    ("reply", "names"),
    [
        (f"<|python_tag|>{LLAMA_WEATHER}", ["get_weather"]),
        (f"<|python_tag|>{LLAMA_WEATHER}<|eom_id|>", ["get_weather"]),
        (f"{LLAMA_WEATHER}; {LLAMA_TIME}", ["get_weather", "get_time"]),
        (f"<|python_tag|>{LLAMA_WEATHER};{LLAMA_TIME};<|eom_id|>", ["get_weather", "get_time"]),
        (f"<|python_start|>{LLAMA_WEATHER}<|python_end|>", ["get_weather"]),
        (f"<|python_start|>```json\n{LLAMA_WEATHER}\n```<|python_end|><|eot_id|>", ["get_weather"]),
    ],
)
def test_the_json_format_reads_llamas_own_call_shapes(reply, names):
    # The preset for llama3.1 took these as the answer: nothing ran, the user saw raw JSON.
    parsed = get_format("json").parse(reply)
    assert parsed.error is None and [c["name"] for c in parsed.calls] == names
    assert parsed.text == ""


def test_llama_tokens_and_semicolons_inside_a_json_calls_string_are_its_text():
    text = "end with <|eom_id|>; then <|python_tag|>"
    reply = f'<|python_tag|>{{"name": "note", "parameters": {{"text": "{text}"}}}}<|eom_id|>'
    assert calls_of(get_format("json").parse(reply)) == [["note", {"text": text}]]


HOSTILE_PYTHONIC = [
    "[add(x={(1, 2): 3})]",  # a valid tuple key: unhashable once a list
    "[add(x={[1]: 3})]",
    "[add(x={{1}: 2})]",
    "[add(x={frozenset(): 2})]",
    "[add(x=b'bytes')]",
    "[add(x=1j)]",
    "[add(x=...)]",
    "[add(x=" + "-" * 5_000 + "1)]",
    "[add(x=" + "not " * 5_000 + "1)]",
    "[" + "a." * 20_000 + "add(x=1)]",
    "[add(x=" + "1" * 5_000 + ")]",
    "[add(x=f'{1}')]",
    "[add(x=lambda: 1)]",
    "[add(x=1)(y=2)]",
    "[add(**{'x': 1})]",
]


@pytest.mark.parametrize("reply", HOSTILE_PYTHONIC, ids=lambda r: r[:30])
def test_pythonic_replies_that_are_not_json_values_get_an_error_never_an_exception(reply):
    parsed = get_format("pythonic").parse(reply)
    assert parsed.calls == [] and parsed.error, parsed


@pytest.mark.parametrize(
    "reply",
    [
        "The first crewed landing was [Apollo (11)](https://en.wikipedia.org/wiki/Apollo_11).",
        "The closest planet is [Mercury (planet)](https://en.wikipedia.org/wiki/Mercury_(planet)).",
        "The closest planet is [Mercury (planet)], then Venus.",
    ],
)
def test_pythonic_links_and_brackets_in_prose_are_text(reply):
    assert get_format("pythonic").parse(reply) == ParsedReply(text=reply)


def test_pythonic_calls_beside_a_link_run_and_a_bad_call_alone_is_an_error():
    pythonic = get_format("pythonic")
    parsed = pythonic.parse("See [Apollo (11)](https://x.org).\n[get_weather(city='Paris')]")
    assert calls_of(parsed) == [["get_weather", {"city": "Paris"}]]
    assert parsed.text == "See [Apollo (11)](https://x.org)."
    assert pythonic.parse("[get_weather(city=Paris)]").error == (
        "argument 'Paris' is not a literal value"
    )
    # After prose too: brackets that open arguments are a call, and a bad one is an error the
    # model hears (it was read as prose, and the turn ended on it as an answer)
    for reply in ("I will check.\n[get_weather(city=Paris)]", "Now: [f(x=1, when=today)]"):
        assert pythonic.parse(reply).error is not None, reply


LLAMA_TOKENS = ["<|python_tag|>", "<|eom_id|>", "<|eot_id|>", "<|python_start|>", "<|python_end|>"]


@pytest.mark.parametrize("token", LLAMA_TOKENS)
def test_pythonic_special_tokens_around_calls_are_dropped_and_inside_strings_kept(token):
    pythonic = get_format("pythonic")
    # Around the calls (and in the code between them) a token is the format's markup.
    wrapped = f"Checking.{token}[get_weather(city='Paris'){token}, add(x=1)]{token}"
    parsed = pythonic.parse(wrapped)
    assert calls_of(parsed) == [["get_weather", {"city": "Paris"}], ["add", {"x": 1}]]
    assert parsed.text == "Checking."
    bare = pythonic.parse(f"{token}get_weather(city='Paris'){token}")
    assert calls_of(bare) == [["get_weather", {"city": "Paris"}]]
    # Inside a string it is the argument's text (it was dropped: note='' ran).
    for reply in (f"[note(text='a{token}b')]", f'{token}note(text="{token}"){token}'):
        expected = "a" + token + "b" if reply.startswith("[") else token
        assert calls_of(pythonic.parse(reply)) == [["note", {"text": expected}]], reply
    rendered = pythonic.render_calls([{"name": "a", "args": {"a": token}, "id": "1"}])
    assert calls_of(pythonic.parse(rendered)) == [["a", {"a": token}]]


@pytest.mark.parametrize(
    ("fmt", "markup"),
    [
        *(("hermes", m) for m in ("<tool_call>", "</tool_call>", "a</tool_call><tool_call>b")),
        *(("mistral", m) for m in ("[TOOL_CALLS]", "x [TOOL_CALLS] [1]", "</s>")),
    ],
)
def test_a_formats_markup_inside_an_argument_string_is_the_arguments_text(fmt, markup):
    # It split the call there (hermes: the call ended at the tag inside the string; mistral:
    # a second call began at the marker inside it) and the call failed or lost its text.
    f = get_format(fmt)
    calls = [
        {"name": "note", "args": {"text": markup}, "id": "1"},
        {"name": "add", "args": {"x": 1}, "id": "2"},
    ]
    parsed = f.parse(f.render_calls(calls, "Saving it."))
    assert calls_of(parsed) == [["note", {"text": markup}], ["add", {"x": 1}]]
    assert parsed.text == "Saving it."


def test_pythonic_number_and_literal_keys_become_json_keys():
    parsed = get_format("pythonic").parse("[add(x={1: 'a', 2.5: 'b', None: 'c', True: 'd'})]")
    assert calls_of(parsed) == [["add", {"x": {"1": "a", "2.5": "b", "null": "c", "true": "d"}}]]


def _repair_heavy(fmt: str, calls: int = MAX_CALLS + 1) -> str:
    """``calls`` calls of just under 16 KB that each need repair (single quotes)."""
    call = "{'name': 'x', 'arguments': {'a': '" + "y" * (MAX_REPAIR_CHARS - 60) + "'}}"
    wrap = {"hermes": "<tool_call>{}</tool_call>\n", "mistral": "[TOOL_CALLS] [{}]\n"}
    return wrap[fmt].format(call) * calls


@pytest.mark.parametrize("fmt", ["hermes", "mistral"])
def test_the_repair_work_of_one_reply_is_bounded(fmt, monkeypatch):
    repaired: list[int] = []
    real = _json.read_lenient

    def counting(text: str, **kwargs: Any) -> Any:
        read = real(text, **kwargs)
        repaired.append(read.end)  # the characters read leniently (token by token)
        return read

    monkeypatch.setattr(_json, "read_lenient", counting)
    two = get_format(fmt).parse(_repair_heavy(fmt, calls=2))
    assert two.error is None and len(two.calls) == 2  # two sloppy 16 KB calls: both read
    repaired.clear()
    parsed = get_format(fmt).parse(_repair_heavy(fmt))
    assert sum(repaired) <= MAX_REPAIR_CHARS_PER_REPLY
    assert parsed.error and "too long to repair together" in parsed.error
    arguments = '{"name": "x", "arguments": "' + "{'a': 1}" * 4_000 + '"}'
    repaired.clear()
    get_format("hermes").parse(f"<tool_call>{arguments}</tool_call>" * (MAX_CALLS + 1))
    assert sum(repaired) <= MAX_REPAIR_CHARS_PER_REPLY  # arguments given as JSON strings too


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_any_reply_is_read_in_well_under_a_second(fmt):
    numbers = "1," * 14_000
    reply = {
        "pythonic": f"[f(a=[{numbers}1])]\n" * (MAX_CALLS + 1),
        "json": f'```json\n{{"name": "x", "arguments": {{"a": [{numbers}1]}}}}\n```\n' * 33,
    }.get(fmt) or _repair_heavy(fmt)
    start = time.perf_counter()
    parsed = get_format(fmt).parse(reply)
    assert time.perf_counter() - start < 0.5  # 1-3 s before the bounds, ~10-60 ms after
    assert not parsed.calls
    pythonic = get_format("pythonic").parse(f"[f(a=[{numbers}1])]")
    assert pythonic.error and "characters of code outside strings" in pythonic.error
