"""Text helpers shared by the formats: cutting out reasoning, bounding a reply, cutting out
call segments.

Its one reason to change: how the formats cut a reply into reasoning and segments.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from langgraph_toolbudget.formats._json import (
    FENCE,
    ParseBudget,
    ParseFailure,
    envelope_calls,
    read_json_values,
    unfence,
)
from langgraph_toolbudget.formats._lenient import STRING
from langgraph_toolbudget.formats.base import (
    MAX_CALL_CHARS,
    MAX_CALLS,
    MAX_REPLY_CHARS,
    ParsedReply,
)

__all__ = [
    "LLAMA_LEADING",
    "LLAMA_TOKENS",
    "CallFinder",
    "Reply",
    "Segment",
    "join_text",
    "json_end",
    "json_value_span",
    "untagged",
    "parse_reply",
    "parse_segments",
    "split_reasoning",
    "whole_reply",
    "whole_reply_calls",
]

THINK_START = "<think>"
THINK_END = "</think>"
REASONING_CUT_OFF = (
    "the reply ends inside <think> (was it cut off?), so all of it is reasoning and the call "
    "in it was not run; keep your reasoning short, close it with </think> and write the call "
    "after it"
)
_CALL_KEY = re.compile(r"""["']?\b(?:name|arguments|parameters|tool_calls|function)["']?\s*:""")

S = TypeVar("S")

CallFinder = Callable[[str, int, ParseBudget], tuple[int, int] | None]
"""A format's calls in a reply: ``(reply, pos, budget)`` -> the span ``(start, end)`` of the
first call at or after ``pos`` (to the end of the reply when it never closes), or None;
raises :class:`ParseFailure` when reading it would spend more than ``budget``. A span is
skipped whole when reasoning is looked for: a ``<think>`` or ``</think>`` inside a call's
string is the argument's text."""

LLAMA_TOKENS = (
    "<|python_tag|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_start|>",
    "<|python_end|>",
)
"""The special tokens Llama 3.1-4 write around their calls (left out outside strings)."""
_LLAMA = re.compile("|".join(re.escape(token) for token in LLAMA_TOKENS))
LLAMA_LEADING = re.compile(rf"\s*(?:(?:{_LLAMA.pattern})\s*)*")
"""Whitespace and Llama special tokens (matches the empty text)."""
_BETWEEN = re.compile(
    rf"[\s;]*(?:(?:{_LLAMA.pattern})[\s;]*)*"
)  # what may stand between JSON calls
_JSON_TOKEN = re.compile(f"{STRING}|[\\[\\]{{}}]", re.DOTALL)


class Segment(NamedTuple):
    """A call's text cut out of a reply, and whether a closing marker (a tag) followed it."""

    text: str
    closed: bool


class Reply(NamedTuple):
    """A reply cut into its reasoning and the rest (see :func:`split_reasoning`).

    Attributes:
        text: the whole reply.
        reasoning: its reasoning blocks, tags included, one after another.
        body: the reply outside reasoning, where calls are read.
        open_block: what follows the ``<think>`` of a block the reply ends inside, else None.
    """

    text: str
    reasoning: str
    body: str
    open_block: str | None = None


def json_end(text: str, start: int, budget: ParseBudget) -> int:
    """The index after the JSON object or array opening at ``text[start]``, its strings read
    as the lenient reader reads them (double or single quotes); the end of ``text`` when it
    is never closed (or not within :data:`MAX_CALL_CHARS`).

    Raises:
        ParseFailure: it opens more objects and arrays than ``budget`` has left.
    """
    depth = 0
    for match in _JSON_TOKEN.finditer(text, start, start + MAX_CALL_CHARS + 1):
        token = match.group()
        if token in "[{":
            depth += 1
            budget.spend_containers(token)
        elif token in "]}":
            depth -= 1
            if depth <= 0:
                return match.end()
    return len(text)


def json_value_span(text: str, pos: int, budget: ParseBudget) -> tuple[int, int] | None:
    """The span of a JSON object or array (optionally in a code fence) starting at ``pos``
    after whitespace and Llama's special tokens, or None when something else starts there
    (a :data:`CallFinder`)."""
    start = LLAMA_LEADING.match(text, pos).end()  # type: ignore[union-attr]  # matches ""
    if text.startswith(FENCE, start):
        inner = text.find("\n", start)
        value = _skip_space(text, inner) if inner >= 0 else len(text)
        after = json_end(text, value, budget) if text.startswith(("{", "["), value) else value
        close = text.find(FENCE, after)
        return start, len(text) if close < 0 else close + len(FENCE)
    if text.startswith(("{", "["), start):
        return start, json_end(text, start, budget)
    return None


def untagged(text: str) -> str:
    """``text`` without Llama's special tokens (prose around calls, or a call's text shown in
    an error; never a call's strings)."""
    return _LLAMA.sub("", text) if "<|" in text else text


def _without_llama_tokens(text: str) -> str:
    """``text`` stripped of whitespace and Llama's special tokens at its start, and of a few
    at its end (around a code fence; after JSON, :func:`_values` skips any number)."""
    text = text[LLAMA_LEADING.match(text).end() :].rstrip()  # type: ignore[union-attr]
    for _ in range(len(LLAMA_TOKENS)):
        if not text.endswith(LLAMA_TOKENS):
            break
        text = text[: text.rfind("<|")].rstrip()
    return text


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def split_reasoning(text: str, next_call: CallFinder) -> Reply:
    """Cut ``text`` into its reasoning blocks and the rest.

    A block opens where reasoning opens: at the start of the reply (with ``<think>``, or
    without it, as a reply Qwen 3's templates open inside reasoning: then the block ends at
    the first ``</think>`` outside calls), right after a block or right after a call; it
    ends at the first ``</think>`` after its ``<think>``. A ``<think>`` or ``</think>``
    anywhere else (in prose, in a call's arguments) is text. Calls (``next_call``) are
    skipped whole, so a tag inside a call's string never cuts the reply. Calls are looked
    for only while a tag is left after them, within one reply's parse budget (past it, the
    rest is read as calls, and its parse meets the same bound).
    """
    last_tag = max(text.rfind(THINK_START), text.rfind(THINK_END))
    blocks: list[tuple[int, int]] = []
    open_block = None
    budget = ParseBudget()
    pos = 0
    implicit = True  # no block yet: the reply may have begun inside reasoning
    while pos <= last_tag:
        lead = _skip_space(text, pos)
        if text.startswith(THINK_START, lead):
            close = text.find(THINK_END, lead + len(THINK_START))
            if close < 0:
                open_block = text[lead + len(THINK_START) :]
                blocks.append((lead, len(text)))
                break
            blocks.append((lead, close + len(THINK_END)))
            pos, implicit = close + len(THINK_END), False
            continue
        try:
            span = next_call(text, pos, budget)
        except ParseFailure:
            break
        if implicit:
            close = text.find(THINK_END, pos, span[0] if span else len(text))
            if close >= 0:
                blocks.append((0, close + len(THINK_END)))
                pos, implicit = close + len(THINK_END), False
                continue
        if span is None:
            break
        pos = max(span[1], pos + 1)
    if not blocks:
        return Reply(text, "", text)
    reasoning = "\n".join(text[start:end] for start, end in blocks)
    starts, ends = [0, *(end for _, end in blocks)], [*(start for start, _ in blocks), len(text)]
    gaps = zip(starts, ends, strict=True)
    body = "\n".join(text[start:end] for start, end in gaps if start < end)
    return Reply(text, reasoning, body, open_block)


def parse_reply(
    text: str, next_call: CallFinder, parse_body: Callable[[Reply], ParsedReply]
) -> ParsedReply:
    """Read a reply's calls outside its reasoning (:func:`split_reasoning`).

    A reply that ends inside a reasoning block (cut off while thinking) runs the calls it
    wrote outside reasoning; when there are none, a call drafted in the open block
    (``parse_body`` reads one, or fails to) is an error the model hears, like a call cut
    off, and a reply without one is text.

    Args:
        text: the reply.
        next_call: the format's calls (:data:`CallFinder`).
        parse_body: the format's parser of a reply cut into reasoning and the rest.
    """
    reply = split_reasoning(text, next_call)
    parsed = parse_body(reply)
    if reply.open_block is None or parsed.calls or parsed.error is not None:
        return parsed
    draft = reply.open_block.replace(THINK_START, "")
    drafted = parse_body(Reply(draft, "", draft))
    if drafted.calls or drafted.error is not None:
        return ParsedReply(text=text, error=REASONING_CUT_OFF)
    return ParsedReply(text=text)


def join_text(*parts: str) -> str:
    """The prose parts of a reply, joined and stripped."""
    return "\n".join(p.strip() for p in parts if p and p.strip())


def parse_segments(
    reply: Reply,
    find: Callable[[str, ParseBudget], tuple[Sequence[S], list[str]]],
    read: Callable[[S, ParseBudget], list[dict[str, Any]]],
) -> ParsedReply:
    """Parse a reply whose calls sit in marked segments.

    Args:
        reply: the reply, its reasoning cut out (:func:`split_reasoning`).
        find: reply (bounded, reasoning removed), the reply's parse budget ->
            (call segments, prose pieces).
        read: one segment, the budget -> its calls; raises :class:`ParseFailure`.

    Returns:
        The calls of every segment, or an error naming the first bad segment.
    """
    budget = ParseBudget()
    text, reasoning = reply.text, reply.reasoning
    body, overflow = reply.body[:MAX_REPLY_CHARS], reply.body[MAX_REPLY_CHARS:]
    try:
        segments, prose = find(body, budget)
    except ParseFailure as exc:
        return ParsedReply(text=text, error=str(exc))
    remaining = join_text(reasoning, *prose, overflow)
    if not segments:
        return ParsedReply(text=remaining)
    calls: list[dict[str, Any]] = []
    for number, segment in enumerate(segments, 1):
        try:
            calls.extend(read(segment, budget))
        except ParseFailure as exc:
            where = f"tool call {number}: " if len(segments) > 1 else ""
            return ParsedReply(text=text, error=f"{where}{exc}")
        if len(calls) > MAX_CALLS:
            return ParsedReply(text=text, error=f"more than {MAX_CALLS} tool calls in one reply")
    return ParsedReply(calls=calls, text=remaining)


def _values(inner: str, budget: ParseBudget, closed: bool) -> list[Any] | None:
    """The JSON values ``inner`` is made of (whitespace, ``;`` or Llama's special tokens
    between them), or None when something else follows one."""
    values, pos = read_json_values(inner, budget, between=_BETWEEN, closed=closed)
    return values if pos == len(inner) else None


def whole_reply_calls(body: str, budget: ParseBudget) -> list[dict[str, Any]] | None:
    """The calls of a reply that is nothing but call envelopes, else None.

    The reply (reasoning removed) must be one JSON value, or several separated by
    whitespace or ``;`` (Llama 3.1), each a call envelope (see :func:`envelope_calls`),
    optionally in one surrounding code fence, with Llama's special tokens around them
    (``<|python_tag|>``, ``<|python_start|>...<|python_end|>``, ``<|eom_id|>``). JSON in
    prose, or JSON that is not an envelope (a record with a ``name``, a tool result
    quoted back) is not a call: None.

    Raises:
        ParseFailure: the reply is JSON with a call's keys that cannot be read,
            or that the end of the reply cuts off.
    """
    inner, closed = unfence(_without_llama_tokens(body))
    if not inner.startswith(("{", "[")):
        return None
    try:
        budget.spend_containers(inner)
        values = _values(inner, budget, closed)
        if values is None:
            return None
        calls: list[dict[str, Any]] = []
        for number, value in enumerate(values):
            found = envelope_calls(value, budget)
            if found is None:
                if number == 0:
                    return None
                raise ParseFailure(f"JSON value {number + 1} of the reply is not a tool call")
            calls.extend(found)
    except ParseFailure:
        if _CALL_KEY.search(inner[:500]):  # it was meant as a call: the model hears why not
            raise
        return None
    if len(calls) > MAX_CALLS:
        raise ParseFailure(f"more than {MAX_CALLS} tool calls in one reply")
    return calls


def whole_reply(reply: Reply) -> ParsedReply | None:
    """A reply that is nothing but call envelopes (:func:`whole_reply_calls`), parsed: its
    calls, or the error of calls that cannot be read; None when it is not such a reply."""
    try:
        calls = whole_reply_calls(reply.body, ParseBudget())
    except ParseFailure as exc:
        return ParsedReply(text=reply.text, error=str(exc))
    return None if calls is None else ParsedReply(calls=calls, text=join_text(reply.reasoning))
