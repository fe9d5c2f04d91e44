"""Learned selection: past requests and the tools that served them, as a ranking signal. Pure.

A deployed agent sees the same intents again and again, worded in ways no tool
description is. When a tool ran successfully for a user's message, that message
says something about the tool. :class:`UsageIndex` keeps those messages (bounded
per tool and per thread, de-duplicated) and ranks tools by them with BM25, each
tool's recorded messages forming its "usage document". :func:`fuse_usage` adds
that ranking to the lexical (or hybrid) scores the nodes already compute.

Key Components:
    - :class:`UsageIndex`: the history and its incremental index: recording one
      message updates the postings of its own terms, nothing is rebuilt.
    - :func:`fuse_usage`: lexical scores + usage scores; with no history (or no
      recorded term in the query) the lexical array is returned unchanged.
    - :class:`UsageRecord`: one recorded (tool, message) pair, the export format;
      :func:`normalize_query`, how a message is stored; :func:`check_record_args`,
      the checks of ``record``; :func:`record_terms`, the terms a record gives its tool.

Its one reason to change: what the usage history keeps and how it ranks tools by it.

The store-backed ``ToolUsage`` over this is in :mod:`langgraph_toolbudget.nodes.usage`.

Typical Usage:
    >>> history = UsageIndex()
    >>> _ = history.add("is it going to rain tomorrow?", ["get_forecast"])
    >>> [name for name, _ in history.rank("will it rain in Oslo")]
    ['get_forecast']
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from langgraph_toolbudget.core.terms import clauses, tokenize

if TYPE_CHECKING:
    from langgraph_toolbudget.core.search import ToolIndex

__all__ = [
    "MAX_QUERY_CHARS",
    "check_record_args",
    "DEFAULT_MAX_QUERIES_PER_TOOL",
    "DEFAULT_USAGE_WEIGHT",
    "UsageIndex",
    "UsageRecord",
    "fuse_usage",
    "normalize_query",
    "record_terms",
]

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


DEFAULT_MAX_QUERIES_PER_TOOL = 200
"""Recent distinct messages kept per tool."""

DEFAULT_USAGE_WEIGHT = 0.35
"""Weight of a tool's usage BM25 beside its lexical score; see :func:`fuse_usage`. Measured
(``benchmarks/selection_quality.py --usage``): 0.5 and up lowers Seal-Tools recall (long
queries share many words with the history of wrong tools), 0.25 gives MetaTool < 0.90."""

MAX_USAGE_HITS = 30
"""Tools whose usage score is fused, at most: the best ones (see
:meth:`UsageIndex.catalog_scores`). Measured: 30 ranks as well as 100 or all."""


class UsageIndex:
    """Recorded messages per tool, and a BM25 index over them, updated incrementally.

    Bounds: at most ``max_queries_per_tool`` distinct messages per tool (the
    oldest dropped first); at most ``max_queries_per_thread`` of them from one
    conversation (its oldest dropped first), so one long thread cannot fill a
    tool's history. Re-recording a message refreshes it instead of adding a copy.
    Memory is therefore bounded by ``max_queries_per_tool`` x tools x
    :data:`MAX_QUERY_CHARS`.

    Thread-safe: one lock around every change and every ranking.

    Args:
        max_queries_per_tool: distinct messages kept per tool.
        max_queries_per_thread: of those, at most this many from one thread
            (default: a tenth of ``max_queries_per_tool``, at least 1).
        k1, b: the BM25 parameters; a tool's document length is its number of messages.
    """

    def __init__(
        self,
        max_queries_per_tool: int = DEFAULT_MAX_QUERIES_PER_TOOL,
        max_queries_per_thread: int | None = None,
        *,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        for label, value in (
            ("max_queries_per_tool", max_queries_per_tool),
            ("max_queries_per_thread", max_queries_per_thread),
        ):
            if value is None and label == "max_queries_per_thread":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be an integer >= 1, got {value!r}")
        self.max_queries_per_tool = max_queries_per_tool
        self.max_queries_per_thread = max_queries_per_thread or max(1, max_queries_per_tool // 10)
        self.k1, self.b = k1, b
        self._lock = threading.RLock()
        self._entries: dict[str, OrderedDict[str, UsageRecord]] = {}
        self._threads: dict[str, Counter[str]] = {}
        self._ids: dict[str, int] = {}
        self._names: list[str] = []
        self._lengths = np.zeros(16, dtype=np.float64)  # messages per tool id
        self._n_records = 0
        self._n_tools_with_history = 0
        # term -> {tool id: how many of the tool's messages hold the term}, and its arrays.
        self._postings: dict[str, dict[int, int]] = {}
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._positions: dict[int, tuple[weakref.ref[Any], np.ndarray]] = {}
        # Per version: each tool's BM25 length norm, and each queried term's saturated tfs.
        self._saturated: tuple[int, np.ndarray, dict[str, np.ndarray]] = (-1, np.zeros(0), {})
        self.version = 0

    def __len__(self) -> int:
        """How many (tool, message) pairs are recorded."""
        return sum(len(e) for e in self._entries.values())

    @property
    def tools(self) -> list[str]:
        """Tools with a recorded message."""
        return [t for t, e in self._entries.items() if e]

    # --- changes ------------------------------------------------------------------------------

    def add(
        self,
        query: str,
        tool_names: Sequence[str],
        *,
        thread: str | None = None,
        ts: float | None = None,
    ) -> tuple[list[UsageRecord], list[UsageRecord]]:
        """Record ``query`` for each tool; returns (records kept, records evicted by the bounds).

        A message with no search term (``"?"``, ``"ok"``) is not recorded.
        """
        names = check_record_args(query, tool_names)
        text = normalize_query(query)
        if not text or not tokenize(text):
            return [], []
        stamp = time.time() if ts is None else float(ts)
        added: list[UsageRecord] = []
        evicted: list[UsageRecord] = []
        with self._lock:
            for name in names:
                record = UsageRecord(name, text, thread, stamp)
                evicted.extend(self._add_one(record))
                added.append(record)
            if added:
                self.version += 1
        return added, evicted

    def _add_one(self, record: UsageRecord) -> list[UsageRecord]:
        entries = self._entries.setdefault(record.tool, OrderedDict())
        threads = self._threads.setdefault(record.tool, Counter())
        old = entries.pop(record.query, None)
        if old is not None:  # refreshed: same terms, new place and thread
            self._count_thread(threads, old.thread, -1)
            entries[record.query] = record
            self._count_thread(threads, record.thread, 1)
            return []
        entries[record.query] = record
        self._count_thread(threads, record.thread, 1)
        self._index(record, +1)
        evicted = []
        if record.thread is not None and threads[record.thread] > self.max_queries_per_thread:
            oldest = next(r for r in entries.values() if r.thread == record.thread)
            evicted.append(self._remove(oldest))
        while len(entries) > self.max_queries_per_tool:
            evicted.append(self._remove(next(iter(entries.values()))))
        return evicted

    @staticmethod
    def _count_thread(threads: Counter[str], thread: str | None, step: int) -> None:
        if thread is None:
            return
        threads[thread] += step
        if threads[thread] <= 0:
            del threads[thread]

    def _remove(self, record: UsageRecord) -> UsageRecord:
        del self._entries[record.tool][record.query]
        self._count_thread(self._threads[record.tool], record.thread, -1)
        self._index(record, -1)
        return record

    def _index(self, record: UsageRecord, step: int) -> None:
        tool = self._ids.get(record.tool)
        if tool is None:
            tool = self._ids[record.tool] = len(self._names)
            self._names.append(record.tool)
            if tool >= self._lengths.size:
                self._lengths = np.concatenate([self._lengths, np.zeros(self._lengths.size)])
        self._lengths[tool] += step
        self._n_records += step
        if self._lengths[tool] == (1 if step > 0 else 0):
            self._n_tools_with_history += step
        for term in record_terms(record):  # the parts of the message that asked for this tool
            posting = self._postings.setdefault(term, {})
            count = posting.get(tool, 0) + step
            if count > 0:
                posting[tool] = count
            else:
                posting.pop(tool, None)
                if not posting:
                    del self._postings[term]
            self._arrays.pop(term, None)  # only this term's arrays are rebuilt, on next use

    def forget(self, tool_names: Iterable[str] | None = None) -> list[UsageRecord]:
        """Drop the history of these tools (``None``: of every tool); returns what was dropped."""
        with self._lock:
            names = list(self._entries) if tool_names is None else list(tool_names)
            dropped = []
            for name in names:
                for record in list(self._entries.get(name, {}).values()):
                    dropped.append(self._remove(record))
            if dropped:
                self.version += 1
            return dropped

    def records(self) -> list[UsageRecord]:
        """Every record, oldest first."""
        with self._lock:
            rows = [r for entries in self._entries.values() for r in entries.values()]
        return sorted(rows, key=lambda r: (r.ts, r.tool, r.query))

    # --- ranking ------------------------------------------------------------------------------

    def _term_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        arrays = self._arrays.get(term)
        if arrays is None:
            posting = self._postings.get(term)
            if not posting:
                return None
            ids = np.fromiter(posting.keys(), dtype=np.int64, count=len(posting))
            tfs = np.fromiter(posting.values(), dtype=np.float64, count=len(posting))
            arrays = self._arrays[term] = (ids, tfs)
        return arrays

    def scores(self, query: str) -> np.ndarray | None:
        """BM25 of every tool (by internal id) over its recorded messages taken as one document.

        The term frequency of a tool is how many of its messages hold the term,
        its length how many messages it has. None when no recorded term matches.
        """
        terms = Counter(tokenize(query))
        with self._lock:
            found = []
            for term, qtf in terms.items():
                arrays = self._term_arrays(term)
                if arrays is not None:
                    found.append((term, arrays, qtf))
            n_tools = len(self._names)
            lengths = self._lengths[:n_tools]
            n = self._n_tools_with_history
            if not found or n == 0:
                return None
            if self._saturated[0] != self.version:  # any change moves the average length
                norm = self.k1 * (1 - self.b + self.b * lengths / (self._n_records / n))
                self._saturated = (self.version, norm, {})
            _, norm, saturated = self._saturated
            out = np.zeros(n_tools, dtype=np.float64)
            for term, (ids, tfs), qtf in found:
                part = saturated.get(term)
                if part is None:  # the term's BM25 saturation, kept until the next change
                    part = saturated[term] = tfs * (self.k1 + 1) / (tfs + norm[ids])
                out[ids] += part * (qtf * math.log(1 + (n - ids.size + 0.5) / (ids.size + 0.5)))
        return out

    def rank(self, query: str, limit: int | None = None) -> list[tuple[str, float]]:
        """Tools by usage relevance to ``query``, best first (score > 0 only)."""
        scores = self.scores(query)
        if scores is None:
            return []
        ids = np.flatnonzero(scores > 0)
        order = ids[np.lexsort((ids, -scores[ids]))][:limit]
        return [(self._names[i], float(scores[i])) for i in order]

    def popular(self, limit: int | None = None) -> list[str]:
        """Tools with the most recorded messages, most first (recency breaks ties)."""
        with self._lock:
            entries = self._entries
            latest = {t: max((r.ts for r in e.values()), default=0.0) for t, e in entries.items()}
            ranked = sorted(
                (t for t, e in self._entries.items() if e),
                key=lambda t: (-len(self._entries[t]), -latest[t], t),
            )
        return ranked[:limit]

    def positions(self, index: ToolIndex) -> np.ndarray:
        """Catalog position of every internal tool id (-1: absent); cached, extended on growth."""
        key = id(index)
        with self._lock:
            cached = self._positions.get(key)
            if cached is not None and cached[0]() is index and cached[1].size == len(self._names):
                return cached[1]
            start = cached[1] if cached is not None and cached[0]() is index else np.zeros(0)
            extra = [_position(index, n) for n in self._names[start.size :]]
            out = np.concatenate([start.astype(np.int64), np.asarray(extra, dtype=np.int64)])
            if len(self._positions) >= 8:  # a few catalogs at most; drop the oldest
                self._positions.pop(next(iter(self._positions)))
            self._positions[key] = (weakref.ref(index), out)
            return out

    def catalog_scores(self, index: ToolIndex, query: str) -> np.ndarray | None:
        """Usage scores aligned with ``index.names``, or None when no recorded term matches.

        Only the :data:`MAX_USAGE_HITS` best tools keep their score: a word
        common to many recorded messages would otherwise give thousands of tools
        a sliver of score, which changes no ranking but slows every node after.
        """
        scores = self.scores(query)
        if scores is None:
            return None
        positions = self.positions(index)[: scores.size]
        keep = np.flatnonzero((positions >= 0) & (scores > 0))
        if keep.size == 0:
            return None
        if keep.size > MAX_USAGE_HITS:
            part = np.argpartition(-scores[keep], MAX_USAGE_HITS - 1)[:MAX_USAGE_HITS]
            keep = keep[part]
        out = np.zeros(len(index), dtype=np.float64)
        out[positions[keep]] = scores[keep]
        return out


def _position(index: ToolIndex, name: str) -> int:
    try:
        return index.position(name)
    except KeyError:
        return -1


def fuse_usage(
    index: ToolIndex,
    history: UsageIndex,
    query: str,
    base: np.ndarray | None = None,
    *,
    weight: float = DEFAULT_USAGE_WEIGHT,
) -> np.ndarray:
    """Relevance of every tool: ``base`` plus ``weight`` times its usage score.

    The usage score (:meth:`UsageIndex.scores`) is the BM25 score of the tool's
    recorded messages, taken as one more document field of the tool: past
    requests expand the tool's searchable text, in the lexical score's units.
    With no usage match the ``base`` array itself is returned: an empty
    history changes nothing.

    Args:
        index: the catalog's tool index (``catalog.index``).
        history: the usage history.
        query: the user's message.
        base: the lexical or hybrid scores (default ``index.scores(query)``).
        weight: the usage share, see above.
    """
    if base is None:
        base = index.scores(query)
    usage = history.catalog_scores(index, query) if query else None
    if usage is None:
        return base
    out = base + usage * weight
    out.setflags(write=False)
    return out
