"""The native format: the chat model's own tool calling (``bind_tools``).

Its one reason to change: how native tool calling is presented as a format.

Nothing is rendered into the prompt and nothing is parsed: the tools are bound
to the model and its provider returns ``AIMessage.tool_calls``. Available only
when the model really supports tool calling (see
:func:`langgraph_toolbudget.nodes.models.native_tool_calling`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage

from langgraph_toolbudget.formats.base import ParsedReply, ToolCallFormat, result_text

__all__ = ["Native"]


class Native(ToolCallFormat):
    """Native tool calling: tools bound with ``bind_tools``, calls read by the provider."""

    name = "native"
    native = True

    def render_tools(self, tools: Sequence[dict[str, Any]]) -> str:
        """The JSON schemas as the provider sends them (for token accounting only)."""
        return "".join(json.dumps(t, separators=(",", ":")) for t in tools)

    def render_calls(self, calls: Sequence[ToolCall], text: str = "") -> str:
        return text

    def render_result(self, message: ToolMessage, call: ToolCall | None) -> str:
        return result_text(message)

    def parse(self, text: str) -> ParsedReply:
        return ParsedReply(text=text)

    @property
    def example(self) -> str:
        return "(a native tool call)"
