"""The pure JSON format: a JSON object (or a list of them) ``{"name", "arguments"}``.

Its one reason to change: the pure JSON syntax.

The most generic format, for a model with no tool-calling convention of its
own. A reply is a call only when the reply itself is the call: one call
envelope, a list of them, or several separated by whitespace or ``;``, optionally
in a Markdown code fence; Llama 3.1's shapes are read (``parameters`` like
``arguments``, ``<|python_tag|>`` and the other special tokens around the
calls). JSON inside prose, or JSON that is not an envelope (a record with a
``name``, a result quoted back), is text: the model's answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage

from langgraph_toolbudget.formats._text import (
    Reply,
    join_text,
    json_value_span,
    parse_reply,
    whole_reply,
)
from langgraph_toolbudget.formats.base import ParsedReply, ToolCallFormat, result_text, tool_name

__all__ = ["PureJson"]

INSTRUCTIONS = """You can call these tools (JSON schemas):
{tools}

To call tools, reply with only a JSON object, or a JSON list of objects for several calls:
{{"name": "<tool-name>", "arguments": {{<args-json-object>}}}}
When you have the answer, reply in plain text, not JSON."""


def _parse_body(reply: Reply) -> ParsedReply:
    return whole_reply(reply) or ParsedReply(text=join_text(reply.reasoning, reply.body))


class PureJson(ToolCallFormat):
    """Tool calls as plain JSON: ``{"name": "get_weather", "arguments": {"city": "Paris"}}``."""

    name = "json"

    def render_tools(self, tools: Sequence[dict[str, Any]]) -> str:
        return INSTRUCTIONS.format(tools="\n".join(json.dumps(t.get("function", t)) for t in tools))

    def render_calls(self, calls: Sequence[ToolCall], text: str = "") -> str:
        """The calls alone: a reply with prose is an answer in this format, so ``text``
        cannot be shown with them (the model would learn to write replies never run)."""
        payload = [{"name": c["name"], "arguments": c["args"]} for c in calls]
        return json.dumps(payload[0] if len(payload) == 1 else payload)

    def render_result(self, message: ToolMessage, call: ToolCall | None) -> str:
        name = tool_name(message, call)
        return json.dumps({"tool_result": {"name": name, "content": result_text(message)}})

    def parse(self, text: str) -> ParsedReply:
        return parse_reply(text, json_value_span, _parse_body)

    @property
    def example(self) -> str:
        return '{"name": "tool_name", "arguments": {"param": "value"}}'
