"""The Mistral format (Mistral v3 tokenizer / chat template): ``[TOOL_CALLS]``.

Its one reason to change: the Mistral syntax.

Tools go into the prompt as ``[AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS]``; the
model answers ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]`` (the
newer ``[TOOL_CALLS]name[ARGS]{...}`` form is read too); results come back as
``[TOOL_RESULTS] {"content": ..., "call_id": ...}[/TOOL_RESULTS]``.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage

from langgraph_toolbudget.formats._json import (
    ParseBudget,
    ParseFailure,
    calls_from_value,
    cut_off,
    read_json,
    read_json_values,
)
from langgraph_toolbudget.formats._lenient import STRING
from langgraph_toolbudget.formats._text import (
    Reply,
    join_text,
    json_value_span,
    parse_reply,
    parse_segments,
)
from langgraph_toolbudget.formats.base import MAX_CALLS, ParsedReply, ToolCallFormat, result_text

__all__ = ["Mistral"]

MARKER = "[TOOL_CALLS]"
ARGS = "[ARGS]"
_END_TOKENS = ("</s>", "[/TOOL_CALLS]")
# A string as the lenient reader takes it, or an end token outside strings: the model ending
# its calls (inside a string it is part of a value).
_STRING_OR_END = re.compile(STRING + r"|</s>|\[/TOOL_CALLS\]", re.DOTALL)
_STRING_OR_MARKER = re.compile(STRING + "|" + re.escape(MARKER), re.DOTALL)
_BETWEEN_VALUES = re.compile(r"\s*,?\s*")
_NAME_ARGS = re.compile(r"\s*[\w.-]+\s*" + re.escape(ARGS))
_ID_CHARS = string.ascii_letters + string.digits

INSTRUCTIONS = """[AVAILABLE_TOOLS] {tools}[/AVAILABLE_TOOLS]
To call tools, reply with [TOOL_CALLS] followed by a JSON list of calls:
[TOOL_CALLS] [{{"name": "<function-name>", "arguments": {{<args-json-object>}}}}]
When you have the answer, reply in plain text without [TOOL_CALLS]."""


def _find(body: str, budget: ParseBudget) -> tuple[list[str], list[str]]:
    """The text before the first marker, and the calls after each marker; a marker inside a
    string of the calls is the argument's text (up to :data:`MAX_CALLS` + 1 segments, the
    last holding the rest)."""
    first = body.find(MARKER)
    if first < 0:
        return [], [body]
    segments: list[str] = []
    start = first + len(MARKER)
    for match in _STRING_OR_MARKER.finditer(body, start):
        if len(segments) == MAX_CALLS:
            break
        if match.group() == MARKER:
            segments.append(body[start : match.start()])
            start = match.end()
    segments.append(body[start:])
    return segments, [body[:first]]


def _next_call(text: str, pos: int, budget: ParseBudget) -> tuple[int, int] | None:
    """From the first marker at or after ``pos`` to the end of the JSON after it (after
    ``name[ARGS]`` in the newer form); the marker alone when no JSON follows."""
    start = text.find(MARKER, pos)
    if start < 0:
        return None
    after = start + len(MARKER)
    if (named := _NAME_ARGS.match(text, after)) is not None:
        after = named.end()
    span = json_value_span(text, after, budget)
    return start, span[1] if span else after


def _calls_end(segment: str) -> int | None:
    """Where the model ended its calls: the first end token outside strings, or None."""
    for match in _STRING_OR_END.finditer(segment):
        if match.group() in _END_TOKENS:
            return match.start()
    return None


def _read(segment: str, budget: ParseBudget) -> list[dict[str, Any]]:
    end = _calls_end(segment)
    closed = end is not None
    head = segment[:end].lstrip()
    budget.spend_containers(head)
    if not head and not closed:
        raise cut_off(None, f"right after {MARKER}")
    if head.startswith(("[", "{", "```")):
        fenced = head.removeprefix("```json").removeprefix("```")
        return _read_lists(fenced, budget, closed=closed or "```" in fenced)
    name, sep, args = head.partition(ARGS)  # [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}
    if not sep or not name.strip().isidentifier():
        raise ParseFailure(f"{MARKER} must be followed by a JSON list of calls")
    value, _end = read_json(args, budget, closed=closed, tool=name.strip())
    return calls_from_value({"name": name.strip(), "arguments": value}, budget)


def _read_lists(text: str, budget: ParseBudget, *, closed: bool) -> list[dict[str, Any]]:
    """The calls of the JSON lists (or objects) at the start of ``text``, one after another
    (``[TOOL_CALLS] [A] [B]``, a comma between allowed); other text after them (a comment)
    is not a call."""
    values, _rest = read_json_values(text, budget, between=_BETWEEN_VALUES, closed=closed)
    calls = [call for value in values for call in calls_from_value(value, budget)]
    if len(calls) > MAX_CALLS:
        raise ParseFailure(f"more than {MAX_CALLS} tool calls in one reply")
    return calls


def _parse_body(reply: Reply) -> ParsedReply:
    return parse_segments(reply, _find, _read)


class Mistral(ToolCallFormat):
    """Mistral tool calling in text: ``[TOOL_CALLS] [{"name": ..., "arguments": ...}]``."""

    name = "mistral"

    def render_tools(self, tools: Sequence[dict[str, Any]]) -> str:
        return INSTRUCTIONS.format(tools=json.dumps(list(tools)))

    def render_calls(self, calls: Sequence[ToolCall], text: str = "") -> str:
        payload = [{"name": c["name"], "arguments": c["args"], "id": c.get("id")} for c in calls]
        return join_text(text, f"{MARKER} {json.dumps(payload)}")

    def render_result(self, message: ToolMessage, call: ToolCall | None) -> str:
        payload = {"content": result_text(message), "call_id": message.tool_call_id}
        return f"[TOOL_RESULTS] {json.dumps(payload)}[/TOOL_RESULTS]"

    def parse(self, text: str) -> ParsedReply:
        return parse_reply(text, _next_call, _parse_body)

    def new_id(self) -> str:
        return "".join(random.choices(_ID_CHARS, k=9))  # Mistral's ids: 9 letters and digits

    @property
    def example(self) -> str:
        return f'{MARKER} [{{"name": "tool_name", "arguments": {{"param": "value"}}}}]'
