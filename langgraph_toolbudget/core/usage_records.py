"""One recorded use: a user's message and a tool that served it, and the checks of ``record``.

Key Components:
    - :class:`UsageRecord`: one (tool, message) pair, the row of ``ToolUsage.export``.
    - :func:`normalize_query`: how a message is stored and de-duplicated.
    - :func:`check_record_args`: the checks of ``record``'s arguments, naming the fix.
    - :func:`record_terms`: the search terms a record gives its tool's usage document.

:class:`~langgraph_toolbudget.core.usage.UsageIndex` keeps these. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from langgraph_toolbudget.core.terms import clauses, tokenize

__all__ = ["MAX_QUERY_CHARS", "UsageRecord", "check_record_args", "normalize_query", "record_terms"]

MAX_QUERY_CHARS = 2000
"""Recorded messages are cut to this many characters (a pasted document is not an intent)."""

BAD_QUERY_ERROR = "query must be the user's message as a string, got {kind}."
BAD_TOOLS_ERROR = (
    "tool_names must be a list of tool names (strings), got {value!r}; e.g. ['get_weather']."
)


def normalize_query(query: str) -> str:
    """The form a message is stored and de-duplicated in: trimmed, whitespace collapsed, cut."""
    return " ".join(query.split())[:MAX_QUERY_CHARS]


@dataclass(frozen=True)
class UsageRecord:
    """One recorded pair: a user's message and a tool that ran successfully for it.

    Attributes:
        tool: the tool's name.
        query: the message (normalised, see :func:`normalize_query`).
        thread: the conversation it came from (``None`` outside a graph).
        ts: when it was recorded (seconds since the epoch); orders the history.
    """

    tool: str
    query: str
    thread: str | None = None
    ts: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready row of :meth:`ToolUsage.export`."""
        return {"tool": self.tool, "query": self.query, "thread": self.thread, "ts": self.ts}


def check_record_args(query: Any, tool_names: Any) -> list[str]:
    """The tool names of a ``record`` call, checked (duplicates dropped).

    Raises:
        TypeError: ``query`` is not a string, or ``tool_names`` not a list of strings.
    """
    if not isinstance(query, str):
        raise TypeError(BAD_QUERY_ERROR.format(kind=type(query).__name__))
    if isinstance(tool_names, str) or not isinstance(tool_names, Iterable):
        raise TypeError(BAD_TOOLS_ERROR.format(value=tool_names))
    names = list(tool_names)
    if not all(isinstance(n, str) and n for n in names):
        raise TypeError(BAD_TOOLS_ERROR.format(value=names))
    return list(dict.fromkeys(names))


def record_terms(record: UsageRecord) -> set[str]:
    """The search terms a recorded message adds to its tool's usage document.

    A message asking for several things is recorded for each tool that served
    it, but each tool served one part of it. Of a message with several clauses
    (:func:`~langgraph_toolbudget.core.terms.clauses`), a tool gets the clauses
    sharing the most terms with its name (``book_hotel``: "book a hotel near the
    station", not "find flights to Rome"); the whole message when no clause
    shares a term with the name, or when the message asks for one thing.
    Measured (``benchmarks/selection_quality.py --usage``, medium preset): Seal-Tools
    (76% of its requests need several tools) 37.8 -> 35.3 gold tools lost of 1,526
    test requests; MetaTool recall with usage 0.9369 -> 0.9380.
    """
    parts = clauses(record.query)
    if len(parts) < 2:
        return set(tokenize(record.query))
    name = set(tokenize(record.tool))
    part_terms = [set(tokenize(part)) for part in parts]
    shared = [len(name & terms) for terms in part_terms]
    best = max(shared)
    if best == 0:
        return set(tokenize(record.query))
    return set().union(*(terms for terms, n in zip(part_terms, shared, strict=True) if n == best))
