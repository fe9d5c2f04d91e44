"""One recorded use: a user's message and a tool that served it, and the checks of ``record``.

Key Components:
    - :class:`UsageRecord`: one (tool, message) pair, the row of ``ToolUsage.export``.
    - :func:`normalize_query`: how a message is stored and de-duplicated.
    - :func:`check_record_args`: the checks of ``record``'s arguments, naming the fix.

:class:`~langgraph_toolbudget.core.usage.UsageIndex` keeps these. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_QUERY_CHARS", "UsageRecord", "check_record_args", "normalize_query"]

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
