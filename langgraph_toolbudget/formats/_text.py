"""Text helpers shared by the formats: bounding a reply, cutting out call segments.

Its one reason to change: how the formats cut a reply into segments.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from langgraph_toolbudget.formats._json import (
    ParseBudget,
    ParseFailure,
    envelope_calls,
    read_json,
    unfence,
)
from langgraph_toolbudget.formats.base import MAX_CALLS, MAX_REPLY_CHARS, ParsedReply

__all__ = [
    "Segment",
    "cut_off_in_reasoning",
    "join_text",
    "parse_segments",
    "split_reasoning",
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


class Segment(NamedTuple):
    """A call's text cut out of a reply, and whether a closing marker (a tag) followed it."""

    text: str
    closed: bool


def split_reasoning(text: str) -> tuple[str, str]:
    """``(reasoning, rest)``: calls are searched after a closing ``</think>`` only."""
    cut = text.rfind(THINK_END)
    if cut < 0:
        return "", text
    cut += len(THINK_END)
    return text[:cut], text[cut:]


def cut_off_in_reasoning(text: str, parse: Callable[[str], ParsedReply]) -> ParsedReply | None:
    """A reply that ends inside ``<think>`` (a reasoning block opened, where one opens: at the
    start of the reply or right after a closed one, and never closed), else None. A
    ``<think>`` elsewhere, in a call's arguments or in prose, opens nothing.

    All of such a reply is reasoning, so none of its calls runs: a call drafted in it
    (``parse`` reads one, or fails to) is an error the model hears, like a call cut off;
    a reply without one is text.

    Args:
        text: the reply.
        parse: the format's own parser, given the reply without its ``<think>`` tags.
    """
    if not split_reasoning(text)[1].lstrip().startswith(THINK_START):
        return None
    drafted = parse(text.replace(THINK_START, ""))
    if drafted.calls or drafted.error is not None:
        return ParsedReply(text=text, error=REASONING_CUT_OFF)
    return ParsedReply(text=text)


def join_text(*parts: str) -> str:
    """The prose parts of a reply, joined and stripped."""
    return "\n".join(p.strip() for p in parts if p and p.strip())


def parse_segments(
    text: str,
    find: Callable[[str, ParseBudget], tuple[Sequence[S], list[str]]],
    read: Callable[[S, ParseBudget], list[dict[str, Any]]],
) -> ParsedReply:
    """Parse a reply whose calls sit in marked segments.

    Args:
        text: the reply.
        find: reply (bounded, reasoning removed), the reply's parse budget ->
            (call segments, prose pieces).
        read: one segment, the budget -> its calls; raises :class:`ParseFailure`.

    Returns:
        The calls of every segment, or an error naming the first bad segment.
    """
    budget = ParseBudget()
    reasoning, body = split_reasoning(text)
    body, overflow = body[:MAX_REPLY_CHARS], body[MAX_REPLY_CHARS:]
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
    """The JSON values ``inner`` is made of (whitespace between them), or None when
    something else follows one."""
    values: list[Any] = []
    pos = 0
    while pos < len(inner):
        if len(values) == MAX_CALLS:
            raise ParseFailure(f"more than {MAX_CALLS} tool calls in one reply")
        value, pos = read_json(inner, budget, start=pos, closed=closed)
        values.append(value)
        while pos < len(inner) and inner[pos].isspace():
            pos += 1
        if pos < len(inner) and inner[pos] not in "{[":
            return None
    return values


def whole_reply_calls(body: str, budget: ParseBudget) -> list[dict[str, Any]] | None:
    """The calls of a reply that is nothing but call envelopes, else None.

    The reply (reasoning removed) must be one JSON value, or several separated by
    whitespace, each a call envelope (see :func:`envelope_calls`), optionally in
    one surrounding code fence. JSON in prose, or JSON that is not an envelope
    (a record with a ``name``, a tool result quoted back) is not a call: None.

    Raises:
        ParseFailure: the reply is JSON with a call's keys that cannot be read,
            or that the end of the reply cuts off.
    """
    inner, closed = unfence(body.strip())
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
