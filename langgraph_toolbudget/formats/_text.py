"""Text helpers shared by the formats: bounding a reply, cutting out call segments.

Its one reason to change: how the formats cut a reply into segments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph_toolbudget.formats._json import ParseFailure, calls_from_value, load_json
from langgraph_toolbudget.formats.base import MAX_CALLS, MAX_REPLY_CHARS, ParsedReply

__all__ = ["bare_json_calls", "join_text", "parse_segments", "split_reasoning"]

THINK_END = "</think>"


def split_reasoning(text: str) -> tuple[str, str]:
    """``(reasoning, rest)``: calls are searched after a closing ``</think>`` only."""
    cut = text.rfind(THINK_END)
    if cut < 0:
        return "", text
    cut += len(THINK_END)
    return text[:cut], text[cut:]


def join_text(*parts: str) -> str:
    """The prose parts of a reply, joined and stripped."""
    return "\n".join(p.strip() for p in parts if p and p.strip())


def parse_segments(
    text: str,
    find: Callable[[str], tuple[list[str], list[str]]],
    read: Callable[[str], list[dict[str, Any]]],
) -> ParsedReply:
    """Parse a reply whose calls sit in marked segments.

    Args:
        text: the reply.
        find: reply (bounded, reasoning removed) -> (call segments, prose pieces).
        read: one segment -> its calls; raises :class:`ParseFailure`.

    Returns:
        The calls of every segment, or an error naming the first bad segment.
    """
    reasoning, body = split_reasoning(text)
    body, overflow = body[:MAX_REPLY_CHARS], body[MAX_REPLY_CHARS:]
    segments, prose = find(body)
    remaining = join_text(reasoning, *prose, overflow)
    if not segments:
        return ParsedReply(text=remaining)
    calls: list[dict[str, Any]] = []
    for number, segment in enumerate(segments, 1):
        try:
            calls.extend(read(segment))
        except ParseFailure as exc:
            where = f"tool call {number}: " if len(segments) > 1 else ""
            return ParsedReply(text=text, error=f"{where}{exc}")
        if len(calls) > MAX_CALLS:
            return ParsedReply(text=text, error=f"more than {MAX_CALLS} tool calls in one reply")
    return ParsedReply(calls=calls, text=remaining)


def bare_json_calls(text: str) -> list[dict[str, Any]] | None:
    """Calls when the whole reply is call-shaped JSON (a model that forgot its tags), else None."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[", "```")) or '"name"' not in stripped[:MAX_REPLY_CHARS]:
        return None
    try:
        return calls_from_value(load_json(stripped))
    except ParseFailure:
        return None
