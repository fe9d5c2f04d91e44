"""The Hermes format (Hermes 2/3, Qwen 2.5/3 chat templates): ``<tool_call>`` tags.

Its one reason to change: the Hermes syntax.

Tools go into the system prompt inside ``<tools></tools>``, one JSON schema
per line; the model answers with one ``<tool_call>{"name": ..., "arguments":
{...}}</tool_call>`` block per call; results come back inside
``<tool_response></tool_response>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage

from langgraph_toolbudget.formats._json import (
    ParseBudget,
    calls_from_value,
    load_json_values,
)
from langgraph_toolbudget.formats._lenient import STRING
from langgraph_toolbudget.formats._text import (
    Reply,
    Segment,
    join_text,
    json_value_span,
    parse_reply,
    parse_segments,
    whole_reply,
)
from langgraph_toolbudget.formats.base import (
    MAX_CALLS,
    ParsedReply,
    ToolCallFormat,
    result_text,
    tool_name,
)

__all__ = ["Hermes"]

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_STRING_OR_TAG = re.compile(f"{STRING}|{re.escape(OPEN)}|{re.escape(CLOSE)}", re.DOTALL)

INSTRUCTIONS = """# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>
When you have the answer, reply in plain text without tags."""


def _find(body: str, budget: ParseBudget) -> tuple[list[Segment], list[str]]:
    """Segments between ``<tool_call>`` and ``</tool_call>`` (or the next tag, or the end:
    then not closed, and JSON the segment ends inside is a call cut off). A tag inside a
    string of the call is the argument's text; each call is scanned once: linear."""
    segments: list[Segment] = []
    prose: list[str] = []
    pos = 0
    while len(segments) <= MAX_CALLS and (start := body.find(OPEN, pos)) >= 0:
        prose.append(body[pos:start])
        inner = start + len(OPEN)
        end = _next_tag(body, inner)
        closed = body.startswith(CLOSE, end)
        segments.append(Segment(body[inner:end], closed))
        pos = end + len(CLOSE) if closed else end
    prose.append(body[pos:].replace(CLOSE, ""))
    return segments, prose


def _next_tag(body: str, start: int) -> int:
    """Where the first tag outside strings is, from ``start``; the end of ``body`` if none
    (truncated: the call runs to the end)."""
    for match in _STRING_OR_TAG.finditer(body, start):
        if match.group() in (OPEN, CLOSE):
            return match.start()
    return len(body)


def _next_call(text: str, pos: int, budget: ParseBudget) -> tuple[int, int] | None:
    """The first ``<tool_call>`` block from ``pos`` (to its closing tag, the next tag or the
    end), or a call written without tags: JSON right at ``pos``."""
    if (bare := json_value_span(text, pos, budget)) is not None:
        return bare
    start = text.find(OPEN, pos)
    if start < 0:
        return None
    end = _next_tag(text, start + len(OPEN))
    return start, end + len(CLOSE) if text.startswith(CLOSE, end) else end


def _read(segment: Segment, budget: ParseBudget) -> list[dict[str, Any]]:
    """The calls of one block: every JSON value in it (Qwen 3 writes several, one per line
    or with commas between); other text after a value is an error."""
    values = load_json_values(segment.text, budget, closed=segment.closed)
    return [call for value in values for call in calls_from_value(value, budget)]


def _parse_body(reply: Reply) -> ParsedReply:
    if OPEN not in reply.body and (whole := whole_reply(reply)) is not None:
        return whole  # a model that forgot its tags: the whole reply is the call
    return parse_segments(reply, _find, _read)


class Hermes(ToolCallFormat):
    """Hermes / Qwen tool calling in text: ``<tool_call>{...}</tool_call>``."""

    name = "hermes"

    def render_tools(self, tools: Sequence[dict[str, Any]]) -> str:
        return INSTRUCTIONS.format(tools="\n".join(json.dumps(t) for t in tools))

    def render_calls(self, calls: Sequence[ToolCall], text: str = "") -> str:
        blocks = [
            f"{OPEN}\n{json.dumps({'name': c['name'], 'arguments': c['args']})}\n{CLOSE}"
            for c in calls
        ]
        return join_text(text, *blocks)

    def render_result(self, message: ToolMessage, call: ToolCall | None) -> str:
        content = {
            "name": tool_name(message, call),
            "content": result_text(message),
        }
        return f"<tool_response>\n{json.dumps(content)}\n</tool_response>"

    def parse(self, text: str) -> ParsedReply:
        return parse_reply(text, _next_call, _parse_body)

    @property
    def example(self) -> str:
        return f'{OPEN}\n{{"name": "tool_name", "arguments": {{"param": "value"}}}}\n{CLOSE}'
