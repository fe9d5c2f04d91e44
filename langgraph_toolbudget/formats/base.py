"""The interface every tool-call format implements, and what a parsed reply is.

Its one reason to change: the contract between a format and the model call.

Key Components:
    - :class:`ToolCallFormat`: one way of showing tools to a model and reading
      its calls back: render the tool specs into the prompt, render a call and
      a tool result the way the model expects them, parse a reply into calls
      plus the remaining text.
    - :class:`ParsedReply`: the calls (``{"name", "args"}``), the remaining
      text, and an error when the reply looks like a tool call but cannot be read.
    - :func:`reply_message`: the standard ``AIMessage`` (ids generated) of a
      parsed reply, so the executor and the state never see the format.

A format is pure logic: no LangGraph, no model calls. Inputs are bounded
(:data:`MAX_REPLY_CHARS`, :data:`MAX_CALL_CHARS`, :data:`MAX_DEPTH`), so a huge
or deeply nested reply is an error for the model, never a stall or a
``RecursionError``; so is the work one reply may ask for
(:data:`MAX_REPAIR_CHARS_PER_REPLY`, :data:`MAX_CONTAINERS_PER_REPLY`,
:data:`MAX_CODE_CHARS_PER_REPLY`): any reply is read in well under 100 ms
(``benchmarks/parse_formats.py``).
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from langchain_core.messages import AIMessage, ToolCall, ToolMessage

from langgraph_toolbudget.core.intent import content_parts
from langgraph_toolbudget.core.media import is_media, media_placeholder

__all__ = [
    "MAX_CALLS",
    "MAX_CALL_CHARS",
    "MAX_CODE_CHARS_PER_REPLY",
    "MAX_CONTAINERS_PER_REPLY",
    "MAX_DEPTH",
    "MAX_REPAIR_CHARS",
    "MAX_REPAIR_CHARS_PER_REPLY",
    "MAX_REPLY_CHARS",
    "PARSED_ID_SUFFIX",
    "PARSE_ERROR_KEY",
    "PARSE_ERROR_MESSAGE",
    "ParseFailure",
    "ParsedReply",
    "ToolCallFormat",
    "parsed_id",
    "reply_message",
    "result_text",
    "tool_name",
]

MAX_REPLY_CHARS = 1_000_000
"""Characters of a reply searched for tool calls; the rest is kept as text only."""
MAX_CALL_CHARS = 100_000
"""Characters one tool call may take; a longer one is an error for the model."""
MAX_REPAIR_CHARS = 16_000
"""Characters of a call that is not valid JSON that are repaired at most (repair reads
token by token in Python: up to about 1 microsecond a character)."""
MAX_REPAIR_CHARS_PER_REPLY = 32_000
"""Characters repaired in one reply at most, over all its calls (and their arguments given
as JSON strings): at most ~30 ms of repair however many calls a reply holds; past the
bound the model is asked to send valid JSON."""
MAX_CONTAINERS_PER_REPLY = 20_000
"""JSON objects and arrays in the calls of one reply at most (brackets outside strings,
counted before decoding). Decoding is fast, but every container is an object the garbage
collector then walks again and again: 1 MB of ``[],[],...`` takes ~300 ms in a process
with LangChain loaded, 20,000 containers ~15 ms."""
MAX_CODE_CHARS_PER_REPLY = 20_000
"""Characters of Pythonic calls outside string literals read in one reply at most. Each
may become a node that :mod:`ast` builds (about 1 microsecond each, more for
:func:`ast.parse` than for the rest), while a string literal of any length is one:
long text arguments stay free, a list of 100,000 numbers is an error."""
MAX_DEPTH = 64
"""Nesting depth of a call's arguments; deeper is an error (never a ``RecursionError``)."""
MAX_CALLS = 32
"""Tool calls read from one reply at most."""

PARSE_ERROR_KEY = "toolbudget_parse_error"
"""``response_metadata`` key of a reply that looked like a tool call but could not be read."""

PARSE_ERROR_MESSAGE = (
    "Error: your last reply looks like a tool call but it could not be read ({error}). "
    "Nothing was run. To call a tool, write exactly:\n{example}\n"
    "To answer the user instead, reply in plain text without tool-call markup."
)
"""What the model reads after a reply that looks like a call but cannot be parsed."""


class ParseFailure(ValueError):
    """A tool call that cannot be read; the message is shown to the model."""


@dataclass
class ParsedReply:
    """A model reply read by a format.

    Attributes:
        calls: ``{"name": str, "args": dict}`` per call, in the reply's order.
        text: the reply without its tool calls (prose before and after).
        error: set when the reply looks like a tool call that cannot be read;
            then ``calls`` is empty and the model is asked to try again.
    """

    calls: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""
    error: str | None = None


class ToolCallFormat(ABC):
    """One tool-call format: how tools, calls and results are written as text.

    Subclasses set :attr:`name` and implement the four methods; registering
    the class (:func:`langgraph_toolbudget.formats.register_format`) makes the
    name usable in ``tool_call_formats``.

    Tools are given as OpenAI tool schemas
    (``{"type": "function", "function": {"name", "description", "parameters"}}``).
    """

    name: ClassVar[str]
    native: ClassVar[bool] = False
    """True only for the native format: tools are bound, nothing is parsed."""
    binds: ClassVar[tuple[str, ...]] = ()
    """Tools a text format still binds natively when the model can call tools (CodeMode
    binds ``python_execution``; the model may call it, or write its call as text)."""

    @abstractmethod
    def render_tools(self, tools: Sequence[dict[str, Any]]) -> str:
        """The system-prompt text that lists ``tools`` and says how to call them."""

    @abstractmethod
    def render_calls(self, calls: Sequence[ToolCall], text: str = "") -> str:
        """An assistant message with tool calls, written as the model would write it."""

    @abstractmethod
    def render_result(self, message: ToolMessage, call: ToolCall | None) -> str:
        """A tool result as the model expects to read it (``call``: the call it answers)."""

    @abstractmethod
    def parse(self, text: str) -> ParsedReply:
        """Read a reply: its tool calls and the remaining text. Never raises."""

    @property
    @abstractmethod
    def example(self) -> str:
        """One well-formed call, shown in the error a malformed reply gets."""

    def new_id(self) -> str:
        """A fresh tool-call id for a parsed call."""
        return f"call_{uuid.uuid4().hex[:24]}"

    def error_message(self, error: str) -> str:
        """What the model reads after a reply that looks like a call but cannot be read."""
        return PARSE_ERROR_MESSAGE.format(error=error, example=self.example)


def tool_name(message: ToolMessage, call: ToolCall | None) -> str:
    """The name of the tool that answered: the message's, else the call's."""
    return message.name or (call["name"] if call else "") or "tool"


def result_text(message: ToolMessage) -> str:
    """A tool message's content as text: content blocks joined, media blocks (an image, a
    file) as a short note (:func:`~langgraph_toolbudget.core.media.media_placeholder`:
    a text prompt cannot show them, and their base64 would fill it), other blocks as JSON."""
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(
        media_placeholder(b) if is_media(b) else "\n".join(content_parts([b], keep_other=True))
        for b in content
    )


def reply_message(reply: AIMessage, parsed: ParsedReply, fmt: ToolCallFormat) -> AIMessage:
    """The standard ``AIMessage`` of a text reply: parsed calls as ``tool_calls``.

    Only the reply's text changes: its text blocks become the text left once the calls are
    taken out (one block, where the first one was; a reply of text alone keeps a string), and
    the calls are set. Everything else the model sent is kept as it came: its other content
    blocks (``reasoning``, ``thinking``...), ``additional_kwargs`` (where ChatOllama and
    ChatDeepSeek put ``reasoning_content``), ``response_metadata`` and ``usage_metadata``. The
    raw text is kept in ``response_metadata["toolbudget_raw"]`` when calls were taken out of
    it (nothing the model wrote is lost), and the message gets its own id (:func:`parsed_id`),
    so LangGraph's messages stream sends it. A reply that failed to parse keeps its content,
    no calls, and the error in ``response_metadata["toolbudget_parse_error"]`` (metadata, so
    a provider given this history later never sees a call to answer).
    """
    meta = {**reply.response_metadata, "toolbudget_format": fmt.name}
    if parsed.error is not None:
        meta[PARSE_ERROR_KEY] = parsed.error
        update: dict[str, Any] = {"tool_calls": [], "invalid_tool_calls": []}
        return reply.model_copy(update={**update, "response_metadata": meta})
    if not parsed.calls:
        return reply.model_copy(update={"response_metadata": meta})
    calls: list[ToolCall] = [
        {"name": c["name"], "args": c["args"], "id": fmt.new_id(), "type": "tool_call"}
        for c in parsed.calls
    ]
    raw = reply.text if isinstance(reply.text, str) else str(reply.content)
    return reply.model_copy(
        update={
            "content": _with_text(reply.content, parsed.text),
            "tool_calls": calls,
            "invalid_tool_calls": [],
            "response_metadata": {**meta, "toolbudget_raw": raw},
            "id": parsed_id(reply.id),
        }
    )


def _with_text(content: str | list[Any], text: str) -> str | list[Any]:
    """``content`` with its text replaced by ``text``: a string (also when every block is
    text), or the blocks that are not text, ``text`` as one block where the first text block
    was (none when it is empty: a provider refuses an empty text block)."""
    if isinstance(content, str):
        return text
    blocks: list[Any] = []
    placed = False
    for block in content:
        if not (isinstance(block, str) or block.get("type") == "text"):
            blocks.append(block)
        elif not placed:
            placed = True
            if text:
                blocks.append({"type": "text", "text": text})
    if all(isinstance(b, dict) and b.get("type") == "text" for b in blocks):
        return text
    return blocks


PARSED_ID_SUFFIX = "-parsed"
"""The end of the id of a reply whose calls were parsed out of its text (:func:`parsed_id`)."""


def parsed_id(reply_id: str | None) -> str | None:
    """The id of the message a text reply with calls becomes: the reply's own id plus
    :data:`PARSED_ID_SUFFIX`.

    A new id, because the message differs from the one the model streamed under the reply's
    id (the markup taken out, the calls added): LangGraph's messages stream sends each id once,
    so under the reply's id the parsed message would never be sent. The stream shows the
    model's text as it was written, then this message with its calls at the node's end; the
    state holds this one only.
    """
    return f"{reply_id}{PARSED_ID_SUFFIX}" if reply_id else None
