"""The conversation as a text-format model reads it.

Its one reason to change: how a conversation is rewritten for a text-format model.

The state keeps standard messages (``AIMessage.tool_calls``, ``ToolMessage``),
whatever format produced them, so a thread can switch model and format
mid-conversation. Only the prompt of a text-format model is rewritten: calls
become the format's call text, tool results the format's result text (sent
as a user message: a model without tool calling may have no tool role), and a
reply that failed to parse is followed by the error it earned.

Rewriting never raises for a value a call or a result holds: an int Python will not write
in decimal (over 4,300 digits: a Pythonic call may write ``0xfff...`` of any length, a native
model any number) is written as its hex literal (a string in the JSON formats).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage

from langgraph_toolbudget.core.limits import spell_long_ints
from langgraph_toolbudget.formats.base import PARSE_ERROR_KEY, ToolCallFormat

__all__ = ["parse_error_of", "render_history"]


def parse_error_of(message: BaseMessage) -> str | None:
    """The parse error recorded on a rejected text reply (see ``reply_message``), else None."""
    if not isinstance(message, AIMessage) or message.tool_calls:
        return None
    error = message.response_metadata.get(PARSE_ERROR_KEY)
    return str(error) if error else None


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.text, str) else str(message.content)


def _calls_text(fmt: ToolCallFormat, message: AIMessage) -> str:
    try:
        return fmt.render_calls(message.tool_calls, _text(message))
    except ValueError:  # an int too long to write in decimal (repr, json.dumps raise)
        calls = [ToolCall(**{**c, "args": spell_long_ints(c["args"])}) for c in message.tool_calls]
        return fmt.render_calls(calls, _text(message))


def _result_text(fmt: ToolCallFormat, message: ToolMessage, call: ToolCall | None) -> str:
    try:
        return fmt.render_result(message, call)
    except ValueError:  # as in _calls_text: content blocks written as JSON
        spelled = message.model_copy(update={"content": spell_long_ints(message.content)})
        return fmt.render_result(spelled, call)


def render_history(messages: Sequence[BaseMessage], fmt: ToolCallFormat) -> list[BaseMessage]:
    """``messages`` with tool calls and results written in ``fmt``; others unchanged."""
    out: list[BaseMessage] = []
    calls: dict[str, ToolCall] = {}
    results: list[str] = []

    def flush() -> None:
        if results:
            out.append(HumanMessage("\n".join(results)))
            results.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            results.append(_result_text(fmt, message, calls.get(message.tool_call_id)))
            continue
        flush()
        if isinstance(message, AIMessage) and message.tool_calls:
            calls.update((str(c["id"]), c) for c in message.tool_calls if c.get("id"))
            out.append(AIMessage(_calls_text(fmt, message)))
        elif (error := parse_error_of(message)) is not None:
            out.append(AIMessage(_text(message)))
            out.append(HumanMessage(fmt.error_message(error)))
        else:
            out.append(message)
    flush()
    return out
