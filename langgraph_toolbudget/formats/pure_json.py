"""The pure JSON format: a JSON object (or a list of them) ``{"name", "arguments"}``.

Its one reason to change: the pure JSON syntax.

The most generic format, for a model with no tool-calling convention of its
own. The call may stand alone, sit in a Markdown code fence, or follow prose;
``parameters`` (Llama 3.1's key) is read like ``arguments``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage

from langgraph_toolbudget.formats._json import calls_from_value, decode_prefix
from langgraph_toolbudget.formats._text import join_text, parse_segments
from langgraph_toolbudget.formats.base import (
    MAX_CALLS,
    ParsedReply,
    ToolCallFormat,
    result_text,
    tool_name,
)

__all__ = ["PureJson"]

INSTRUCTIONS = """You can call these tools (JSON schemas):
{tools}

To call tools, reply with only a JSON object, or a JSON list of objects for several calls:
{{"name": "<tool-name>", "arguments": {{<args-json-object>}}}}
When you have the answer, reply in plain text, not JSON."""

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CALL_START = re.compile(
    r"""[\[{]\s*(?:\{\s*)?["']?(?:name|arguments|parameters|tool_calls|function)["']?\s*:"""
)


def _find(body: str) -> tuple[list[str], list[str]]:
    """Fenced calls if there are any, else each call-shaped JSON value in the prose."""
    segments: list[str] = []
    prose: list[str] = []
    pos = 0
    fenced = [m for m in _FENCE.finditer(body) if _CALL_START.search(m.group(1)[:200])]
    if fenced:
        for match in fenced[: MAX_CALLS + 1]:
            prose.append(body[pos : match.start()])
            segments.append(match.group(1))
            pos = match.end()
        prose.append(body[pos:])
        return segments, prose
    while len(segments) <= MAX_CALLS and (found := _CALL_START.search(body, pos)) is not None:
        prose.append(body[pos : found.start()])
        try:
            _value, pos = decode_prefix(body, found.start())
        except ValueError:  # broken: the segment runs to the end and the parser reports it
            segments.append(body[found.start() :])
            return segments, prose
        segments.append(body[found.start() : pos])
    prose.append(body[pos:])
    return segments, prose


def _read(segment: str) -> list[dict[str, Any]]:
    value, _end = decode_prefix(segment)
    return calls_from_value(value)


class PureJson(ToolCallFormat):
    """Tool calls as plain JSON: ``{"name": "get_weather", "arguments": {"city": "Paris"}}``."""

    name = "json"

    def render_tools(self, tools: Sequence[dict[str, Any]]) -> str:
        return INSTRUCTIONS.format(tools="\n".join(json.dumps(t.get("function", t)) for t in tools))

    def render_calls(self, calls: Sequence[ToolCall], text: str = "") -> str:
        payload = [{"name": c["name"], "arguments": c["args"]} for c in calls]
        return join_text(text, json.dumps(payload[0] if len(payload) == 1 else payload))

    def render_result(self, message: ToolMessage, call: ToolCall | None) -> str:
        name = tool_name(message, call)
        return json.dumps({"tool_result": {"name": name, "content": result_text(message)}})

    def parse(self, text: str) -> ParsedReply:
        return parse_segments(text, _find, _read)

    @property
    def example(self) -> str:
        return '{"name": "tool_name", "arguments": {"param": "value"}}'
