"""Learned selection: past requests and the tools that served them, as a ranking signal. Pure.

A deployed agent sees the same intents again and again, worded in ways no tool
description is. When a tool ran successfully for a user's message, that message
says something about the tool. :class:`UsageIndex` keeps those messages (bounded
per tool, per thread and in total, de-duplicated) and ranks tools by them with BM25,
each tool's recorded messages forming its "usage document". :func:`fuse_usage` adds
that ranking to the lexical (or hybrid) scores the nodes already compute.

Who wrote a record decides whether it ranks (the trust boundary between users of
one app): a *trusted* record (the operator's ``record``/``import_``) ranks at once;
an *observed* one (recorded while a conversation ran) ranks only once its tool has
observed records from ``min_sources`` distinct sources (threads, or users when the
runs carry one), and never when the model loaded the tool itself outside the
categories chosen for the request (``loaded``). A message's credit is bounded
however many terms it stuffs (:data:`MAX_CREDITED_TERMS`).

Key Components:
    - :class:`UsageIndex`: the history and its incremental index: recording one
      message updates the postings of its own terms, nothing is rebuilt.
    - :func:`fuse_usage`: lexical scores + usage scores; with no history (or no
      recorded term in the query) the lexical array is returned unchanged.
    - :func:`promotable`: the tools usage may promote (not manual, draft or destructive).
    - :class:`UsageRecord`: one recorded (tool, message) pair, the export format;
      :func:`normalize_query`, how a message is stored; :func:`check_record_args`,
      the checks of ``record``; :func:`record_terms`, the terms a record gives its tool;
      :func:`storable`, a text as every store keeps it.

Its one reason to change: what the usage history keeps and how it ranks tools by it.

The store-backed ``ToolUsage`` over this is in :mod:`langgraph_toolbudget.nodes.usage`.

Typical Usage:
    >>> history = UsageIndex()
    >>> _ = history.add("is it going to rain tomorrow?", ["get_forecast"])
    >>> [name for name, _ in history.rank("will it rain in Oslo")]
    ['get_forecast']
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import threading
import time
import weakref
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from langgraph_toolbudget.core.limits import MAX_NAME_CHARS
from langgraph_toolbudget.core.terms import ranked_text, tokenize

if TYPE_CHECKING:
    from langgraph_toolbudget.core.catalog import ToolCatalog
    from langgraph_toolbudget.core.search import ToolIndex

__all__ = [
    "DEFAULT_MAX_QUERIES_PER_TOOL",
    "DEFAULT_MAX_RECORDS",
    "DEFAULT_MIN_SOURCES",
    "DEFAULT_USAGE_WEIGHT",
    "DESTRUCTIVE_KEY",
    "MAX_CREDITED_TERMS",
    "MAX_ID_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_SOURCES_KEPT",
    "MAX_TOOL_NAME_CHARS",
    "MOVED_SOURCE",
    "UsageIndex",
    "UsageRecord",
    "bounded_id",
    "check_record_args",
    "fuse_usage",
    "hashed_id",
    "kept_id",
    "normalize_query",
    "promotable",
    "record_terms",
    "storable",
]

MAX_QUERY_CHARS = 2000
"""Recorded messages are cut to this many characters (a pasted document is not an intent)."""

MAX_TOOL_NAME_CHARS = MAX_NAME_CHARS
"""A recorded tool name is at most this long (128: no tool's name is longer), and printable
(no newline or control character)."""

MAX_ID_CHARS = 128
"""A thread or user id is kept as it is up to this many characters, else as a hash of it
(:func:`bounded_id`): a client may send any id, and a record keeps several."""
_HASHED = re.compile(r"h-[0-9a-f]{32}")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""What some LangGraph store refuses in a text: NUL (PostgreSQL's ``jsonb`` and ``text``) and
lone surrogates (no UTF-8 form: orjson, SQLite and psycopg refuse them)."""

BAD_QUERY_ERROR = "query must be the user's message as a string, got {kind}."
BAD_TOOLS_ERROR = (
    "tool_names must be a list of tool names (strings), got {value!r}; e.g. ['get_weather']."
)
BAD_NAME_ERROR = (
    "tool_names holds {names}, which are not tool names: a tool name is 1 to "
    f"{MAX_TOOL_NAME_CHARS} printable characters (no newline or control character). "
    "Pass catalog= to ToolUsage to accept only the catalog's tools."
)


def normalize_query(query: str) -> str:
    """The form a message is stored and de-duplicated in: trimmed, whitespace collapsed, cut
    (and made :func:`storable` by the record that holds it)."""
    return " ".join(query.split())[:MAX_QUERY_CHARS]


def storable(text: str) -> str:
    """``text`` as every LangGraph store can keep it: each NUL and each lone surrogate
    replaced by U+FFFD. A user's message may hold them (``PostgresSaver`` keeps it), but
    ``PostgresStore`` refuses a NUL and no store encodes a lone surrogate."""
    if text.isascii():  # no surrogate: only a NUL to look for, many times faster than the regex
        return text.replace("\x00", "\ufffd") if "\x00" in text else text
    return _UNSTORABLE.sub("\ufffd", text) if _UNSTORABLE.search(text) else text


@dataclass(frozen=True)
class UsageRecord:
    """One recorded pair: a user's message and a tool that ran successfully for it.

    Attributes:
        tool: the tool's name.
        query: the message (normalised, see :func:`normalize_query`).
        thread: the conversation it came from (``None`` outside a graph).
        ts: when it was recorded (seconds since the epoch); orders the history.
        trusted: written by the operator (``record``, ``import_``): ranks at once.
            An observed record (recorded while a conversation ran) ranks once its
            tool is corroborated (see :class:`UsageIndex`).
        user: the user of the run that recorded it, when the run carried one.
        loaded: an observed record of a tool the model loaded itself, outside the
            categories chosen for the request: kept, never ranked.
        sources: the distinct sources that recorded this message (an observed record:
            the same message from several threads or users corroborates it), the latest
            last, at most :data:`MAX_SOURCES_KEPT`; empty for a trusted one.
    """

    tool: str
    query: str
    thread: str | None = None
    ts: float = 0.0
    trusted: bool = True
    user: str | None = None
    loaded: bool = False
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # The one check of a record's tool name, whoever makes it (add, a stored or imported
        # row): a history holds no record whose tool is no tool name (a tool name holds no
        # NUL or lone surrogate: they are not printable).
        if not isinstance(self.tool, str) or not is_tool_name(self.tool):
            raise ValueError(BAD_NAME_ERROR.format(names=_shown(self.tool)))
        # And the one place its texts are made storable, in every store: a NUL or a lone
        # surrogate in the message becomes U+FFFD, an id holding one its hash (ids stay apart).
        if isinstance(self.query, str) and _UNSTORABLE.search(self.query):
            object.__setattr__(self, "query", storable(self.query))
        for field in ("thread", "user"):
            value = getattr(self, field)
            if isinstance(value, str) and _UNSTORABLE.search(value):
                object.__setattr__(self, field, hashed_id(value))
        if any(_UNSTORABLE.search(s) for s in self.sources):
            sources = (hashed_id(s) if _UNSTORABLE.search(s) else s for s in self.sources)
            object.__setattr__(self, "sources", tuple(dict.fromkeys(sources)))

    @property
    def source(self) -> str:
        """Who corroborates an observed record: its user when known, else its thread."""
        return self.user or self.thread or ""

    @property
    def observed(self) -> bool:
        """An observed record that may count once corroborated (not trusted, not loaded)."""
        return not self.trusted and not self.loaded

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready row of :meth:`ToolUsage.export`."""
        row: dict[str, Any] = {
            "tool": self.tool,
            "query": self.query,
            "thread": self.thread,
            "ts": self.ts,
            "trusted": self.trusted,
        }
        if self.user is not None:
            row["user"] = self.user
        if self.loaded:
            row["loaded"] = True
        if self.sources:
            row["sources"] = list(self.sources)
        return row


def bounded_id(value: str) -> str:
    """An id a client sent (a thread's, a user's, a scope's) as kept: itself when it is at
    most :data:`MAX_ID_CHARS` characters and storable (no NUL, no lone surrogate), else
    ``"h-"`` and 32 hex digits of its SHA-1. An id that already looks like such a hash is
    hashed too, so no id can pass for another's hash. Only for ids as they arrive: a kept id
    passes through :func:`kept_id` unchanged."""
    if len(value) <= MAX_ID_CHARS and not _HASHED.fullmatch(value) and _kept_as_is(value):
        return value
    return hashed_id(value)


def kept_id(value: str) -> str:
    """An id read back (from a store, an export) as kept: itself up to :data:`MAX_ID_CHARS`
    characters and storable, else its hash. Unlike :func:`bounded_id`, it keeps a hashed id
    as it is, so a record reloaded any number of times keeps its ids."""
    return value if len(value) <= MAX_ID_CHARS and _kept_as_is(value) else hashed_id(value)


def _kept_as_is(value: str) -> bool:
    return not _UNSTORABLE.search(value)


def hashed_id(value: str) -> str:
    """``"h-"`` and 32 hex digits of ``value``'s SHA-1: a short stand-in for any string."""
    return "h-" + hashlib.sha1(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _counted(record: UsageRecord) -> tuple[str, ...]:
    """The sources an observed record counts toward its tool's corroboration."""
    sources = tuple(s for s in record.sources if s != MOVED_SOURCE)
    return sources or (record.source,)


def _bounded(record: UsageRecord) -> UsageRecord:
    """``record`` with its message normalised and its ids bounded (a row read from a store
    may come from any writer)."""
    ids = (record.thread, record.user, record.sources)
    thread, user = (None if i is None else kept_id(i) for i in ids[:2])
    sources = tuple(dict.fromkeys(kept_id(s) for s in record.sources))
    if (thread, user, sources) == ids and len(record.query) <= MAX_QUERY_CHARS:
        return record
    query = normalize_query(record.query)
    return replace(record, query=query, thread=thread, user=user, sources=sources)


def check_record_args(query: Any, tool_names: Any) -> list[str]:
    """The tool names of a ``record`` call, checked (duplicates dropped).

    Raises:
        TypeError: ``query`` is not a string, or ``tool_names`` not a list of strings.
        ValueError: a name that is no tool name (see :func:`is_tool_name`).
    """
    if not isinstance(query, str):
        raise TypeError(BAD_QUERY_ERROR.format(kind=type(query).__name__))
    if isinstance(tool_names, str) or not isinstance(tool_names, Iterable):
        raise TypeError(BAD_TOOLS_ERROR.format(value=tool_names))
    names = list(tool_names)
    if not all(isinstance(n, str) and n for n in names):
        raise TypeError(BAD_TOOLS_ERROR.format(value=names[:20]))
    bad = [n for n in names if not is_tool_name(n)]
    if bad:
        shown = ", ".join(_shown(n) for n in bad[:5])
        raise ValueError(BAD_NAME_ERROR.format(names=shown + (" ..." if len(bad) > 5 else "")))
    return list(dict.fromkeys(names))


def _shown(name: Any) -> str:
    return repr(name if not isinstance(name, str) or len(name) <= 80 else name[:77] + "...")


def is_tool_name(name: str) -> bool:
    """Can ``name`` be a tool's: 1 to 128 printable characters?"""
    return 0 < len(name) <= MAX_TOOL_NAME_CHARS and name.isprintable()


def record_terms(record: UsageRecord) -> set[str]:
    """The search terms a recorded message adds to its tool's usage document: all of its
    terms, also when the message asked for several things and several tools served it."""
    return set(tokenize(record.query))


DEFAULT_MAX_QUERIES_PER_TOOL = 200
"""Recent distinct messages kept per tool."""

DEFAULT_MAX_RECORDS = 20_000
"""Records kept in all, across tools (the oldest dropped first): memory stays within about
this many x :data:`MAX_QUERY_CHARS`, however many tool names a writer invents."""

DEFAULT_MIN_SOURCES = 3
"""Distinct sources (threads, or users) an observed tool needs before its records rank."""

MAX_SOURCES_KEPT = 16
"""An observed record keeps at most this many of the sources that recorded it."""

MOVED_SOURCE = "toolbudget-moved"
"""A label among a record's sources, not a source: the record is a row moved from the
layout before scopes (``ToolUsage`` marks them), not vouched for yet. It travels and merges
with the record (store, export, import) and counts toward no corroboration."""

MAX_CREDITED_TERMS = 32
"""A recorded message's terms share this much credit: each term of a message of n terms
counts ``min(1, 32 / n)``, so a message stuffed with every keyword of the catalog buys no
more than a long real request (Seal-Tools' median is 32 distinct terms, MetaTool's 9)."""

DEFAULT_USAGE_WEIGHT = 0.35
"""Weight of a tool's usage BM25 beside its lexical score; see :func:`fuse_usage`. Measured
(``benchmarks/selection_quality.py --usage``): 0.5 and up lowers Seal-Tools recall (long
queries share many words with the history of wrong tools), 0.25 gives MetaTool < 0.90."""

_VERSIONS = itertools.count(1)
"""Every history's versions, from one counter: a version names one state of one history, so a
cache keyed on it cannot mistake a new history for an old one."""

MAX_USAGE_HITS = 30
"""Tools whose usage score is fused, at most: the best ones (see
:meth:`UsageIndex.catalog_scores`). Measured: 30 ranks as well as 100 or all."""


class UsageIndex:
    """Recorded messages per tool, and a BM25 index over the ones that rank, updated
    incrementally.

    Bounds: at most ``max_queries_per_tool`` distinct messages per tool (the
    oldest dropped first); at most ``max_queries_per_thread`` of them from one
    conversation (its oldest dropped first), so one long thread cannot fill a
    tool's history; at most ``max_records`` in all (the oldest dropped first).
    Re-recording a message refreshes it instead of adding a copy. Memory is
    therefore bounded by ``max_records`` x :data:`MAX_QUERY_CHARS`.

    What ranks: a trusted record at once; an observed record once its tool has
    observed records from ``min_sources`` distinct sources (:attr:`UsageRecord.source`:
    threads, or users when known); a ``loaded`` record never. A message's terms each
    get the credit ``min(1, MAX_CREDITED_TERMS / its number of terms)``.

    Thread-safe: one lock around every change and every ranking.

    Args:
        max_queries_per_tool: distinct messages kept per tool.
        max_queries_per_thread: of those, at most this many from one thread
            (default: a tenth of ``max_queries_per_tool``, at least 1).
        min_sources: distinct sources an observed tool needs before its records rank.
        max_records: records kept in all.
        k1, b: the BM25 parameters; a tool's document length is its number of messages.
    """

    def __init__(
        self,
        max_queries_per_tool: int = DEFAULT_MAX_QUERIES_PER_TOOL,
        max_queries_per_thread: int | None = None,
        *,
        min_sources: int = DEFAULT_MIN_SOURCES,
        max_records: int = DEFAULT_MAX_RECORDS,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        for label, value in (
            ("max_queries_per_tool", max_queries_per_tool),
            ("max_queries_per_thread", max_queries_per_thread),
            ("min_sources", min_sources),
            ("max_records", max_records),
        ):
            if value is None and label == "max_queries_per_thread":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be an integer >= 1, got {value!r}")
        self.max_queries_per_tool = max_queries_per_tool
        self.max_queries_per_thread = max_queries_per_thread or max(1, max_queries_per_tool // 10)
        self.min_sources = min_sources
        self.max_records = max_records
        self.k1, self.b = k1, b
        self._lock = threading.RLock()
        self._entries: dict[str, OrderedDict[str, UsageRecord]] = {}
        self._threads: dict[str, Counter[str]] = {}
        self._sources: dict[str, Counter[str]] = {}  # tool -> source -> its observed records
        self._order: OrderedDict[tuple[str, str], None] = (
            OrderedDict()
        )  # every record, oldest first
        self._ranked: set[tuple[str, str]] = set()  # the records in the index
        self._ids: dict[str, int] = {}
        self._names: list[str] = []
        self._lengths = np.zeros(16, dtype=np.float64)  # ranked messages per tool id
        self._n_records = 0
        self._n_tools_with_history = 0
        # term -> {tool id: the credit of the tool's ranked messages holding the term}.
        self._postings: dict[str, dict[int, float]] = {}
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._positions: dict[int, tuple[weakref.ref[Any], np.ndarray]] = {}
        # Per version: each tool's BM25 length norm, and each queried term's saturated tfs.
        self._saturated: tuple[int, np.ndarray, dict[str, np.ndarray]] = (-1, np.zeros(0), {})
        self.version = next(_VERSIONS)

    def __deepcopy__(self, memo: dict[int, Any]) -> UsageIndex:
        """This same object: a history is shared by its :class:`ToolUsage` by design, and its
        lock cannot be copied."""
        return self

    def __len__(self) -> int:
        """How many (tool, message) pairs are recorded (ranked or not)."""
        return len(self._order)

    @property
    def tools(self) -> list[str]:
        """Tools with a recorded message."""
        return [t for t, e in self._entries.items() if e]

    def ranks(self, record: UsageRecord) -> bool:
        """Does ``record`` rank now (trusted, or observed and its tool corroborated)?"""
        if record.trusted:
            return True
        return not record.loaded and len(self._sources.get(record.tool, ())) >= self.min_sources

    # --- changes ------------------------------------------------------------------------------

    def add(
        self,
        query: str,
        tool_names: Sequence[str],
        *,
        thread: str | None = None,
        ts: float | None = None,
        trusted: bool = True,
        user: str | None = None,
        loaded: Iterable[str] = (),
    ) -> tuple[list[UsageRecord], list[UsageRecord]]:
        """Record ``query`` for each tool; returns (records kept, records evicted by the bounds).

        ``trusted``: the operator's record (ranks at once), else an observed one;
        ``user``: the run's user; ``loaded``: tools the model loaded itself outside the
        categories chosen for the request (recorded, never ranked).
        A message with no search term (``"?"``, ``"ok"``) is not recorded.
        """
        names = check_record_args(query, tool_names)
        text = normalize_query(query)
        if not text:
            return [], []
        stamp = time.time() if ts is None else float(ts)
        self_loaded = set(loaded)
        source = () if trusted else (user or thread or "",)
        records = [
            UsageRecord(
                name,
                text,
                thread,
                stamp,
                trusted,
                user,
                name in self_loaded and not trusted,
                source,
            )
            for name in names
        ]
        return self.insert(records)

    def insert(self, records: Iterable[UsageRecord]) -> tuple[list[UsageRecord], list[UsageRecord]]:
        """Add whole records (as :meth:`add` makes them, or read back from a store); returns
        (records kept, records evicted by the bounds). Records without a search term are
        skipped (a record's tool name was checked when it was made)."""
        added: list[UsageRecord] = []
        evicted: list[UsageRecord] = []
        with self._lock:
            for record in map(_bounded, records):
                terms = record_terms(record) if record.query else set()
                if not terms:
                    continue
                kept, dropped = self._add_one(record, terms)
                added.append(kept)
                evicted.extend(dropped)
            while len(self._order) > self.max_records:
                tool, query = next(iter(self._order))
                evicted.append(self._remove(self._entries[tool][query]))
            if added or evicted:
                self.version = next(_VERSIONS)
            if len(self._names) > max(1024, 4 * len(self._entries)):
                self._compact()
        gone = {(r.tool, r.query, r.ts) for r in evicted}
        return [r for r in added if (r.tool, r.query, r.ts) not in gone], evicted

    def _add_one(
        self, record: UsageRecord, terms: set[str]
    ) -> tuple[UsageRecord, list[UsageRecord]]:
        entries = self._entries.setdefault(record.tool, OrderedDict())
        old = entries.get(record.query)
        if old is not None:  # refreshed: same terms, new place and thread; the stronger trust
            self._remove(old)
            trusted = record.trusted or old.trusted
            sources = tuple(dict.fromkeys([*old.sources, *record.sources]))[-MAX_SOURCES_KEPT:]
            record = UsageRecord(
                record.tool,
                record.query,
                record.thread,
                record.ts,
                trusted,
                record.user,
                record.loaded and old.loaded,
                () if trusted else sources,
            )
        self._put(record, terms)
        evicted = []
        entries = self._entries[record.tool]  # a new one if removing ``old`` emptied it
        threads = self._threads[record.tool]
        if record.thread is not None and threads[record.thread] > self.max_queries_per_thread:
            oldest = next(r for r in entries.values() if r.thread == record.thread)
            evicted.append(self._remove(oldest))
        while len(entries) > self.max_queries_per_tool:
            evicted.append(self._remove(next(iter(entries.values()))))
        return record, evicted

    def _put(self, record: UsageRecord, terms: set[str] | None = None) -> None:
        self._entries.setdefault(record.tool, OrderedDict())[record.query] = record
        self._order[(record.tool, record.query)] = None
        self._count(self._threads, record.tool, record.thread, 1)
        if not record.observed:
            if self.ranks(record):
                self._rank(record, +1, terms)
            return
        before = len(self._sources.get(record.tool, ()))
        for source in _counted(record):
            self._count(self._sources, record.tool, source, 1)
        if before < self.min_sources <= len(self._sources[record.tool]):
            for other in self._entries[record.tool].values():  # corroborated: all of them rank
                if other.observed and (other.tool, other.query) not in self._ranked:
                    self._rank(other, +1)
        elif self.ranks(record):
            self._rank(record, +1, terms)

    def _remove(self, record: UsageRecord) -> UsageRecord:
        entries = self._entries[record.tool]
        del entries[record.query]
        del self._order[(record.tool, record.query)]
        self._count(self._threads, record.tool, record.thread, -1)
        if (record.tool, record.query) in self._ranked:
            self._rank(record, -1)
        if record.observed:
            before = len(self._sources.get(record.tool, ()))
            for source in _counted(record):
                self._count(self._sources, record.tool, source, -1)
            if len(self._sources.get(record.tool, ())) < self.min_sources <= before:
                for other in entries.values():  # no longer corroborated
                    if other.observed and (other.tool, other.query) in self._ranked:
                        self._rank(other, -1)
        if not entries:
            for table in (self._entries, self._threads, self._sources):
                table.pop(record.tool, None)
        return record

    def _compact(self) -> None:
        """Renumber the tools that still have ranked messages (the others' ids are dropped):
        a history that saw many distinct names keeps only the live ones' slots."""
        live = [n for n in self._names if self._lengths[self._ids[n]] > 0]
        remap = {self._ids[n]: i for i, n in enumerate(live)}
        lengths = np.zeros(max(16, len(live)), dtype=np.float64)
        for old, new in remap.items():
            lengths[new] = self._lengths[old]
        self._postings = {
            term: {remap[t]: v for t, v in posting.items()}
            for term, posting in self._postings.items()
        }
        self._names, self._ids, self._lengths = live, {n: i for i, n in enumerate(live)}, lengths
        self._arrays.clear()
        self._positions.clear()
        self.version = next(_VERSIONS)

    @staticmethod
    def _count(counters: dict[str, Counter[str]], tool: str, key: str | None, step: int) -> None:
        counter = counters.setdefault(tool, Counter())
        if key is None:
            return
        counter[key] += step
        if counter[key] <= 0:
            del counter[key]

    def _rank(self, record: UsageRecord, step: int, terms: set[str] | None = None) -> None:
        """Add (``step`` 1) or take back (-1) a record's terms (``record_terms``) in the index."""
        key = (record.tool, record.query)
        if step > 0:
            self._ranked.add(key)
        else:
            self._ranked.discard(key)
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
        if terms is None:
            terms = record_terms(record)  # the parts of the message that asked for this tool
        credit = min(1.0, MAX_CREDITED_TERMS / len(terms)) if terms else 0.0
        for term in terms:
            posting = self._postings.setdefault(term, {})
            value = posting.get(tool, 0.0) + step * credit
            if value > 1e-9:
                posting[tool] = value
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
                self.version = next(_VERSIONS)
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
        terms = Counter(tokenize(ranked_text(query)))
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
        with self._lock:  # ids and names of one numbering: a change may renumber (_compact)
            scores = self.scores(query)
            if scores is None:
                return []
            ids = np.flatnonzero(scores > 0)
            order = ids[np.lexsort((ids, -scores[ids]))][:limit]
            return [(self._names[i], float(scores[i])) for i in order]

    def popular(self, limit: int | None = None) -> list[str]:
        """Tools with the most ranked messages (trusted or corroborated), most first
        (recency breaks ties): an uncorroborated observed record never counts here."""
        with self._lock:
            count: Counter[str] = Counter()
            latest: dict[str, float] = {}
            for tool, query in self._ranked:
                count[tool] += 1
                latest[tool] = max(latest.get(tool, 0.0), self._entries[tool][query].ts)
            ranked = sorted(count, key=lambda t: (-count[t], -latest[t], t))
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

    def catalog_scores(
        self, index: ToolIndex, query: str, allowed: np.ndarray | None = None
    ) -> np.ndarray | None:
        """Usage scores aligned with ``index.names``, or None when no recorded term matches.

        Only the :data:`MAX_USAGE_HITS` best tools keep their score: a word
        common to many recorded messages would otherwise give thousands of tools
        a sliver of score, which changes no ranking but slows every node after.
        ``allowed``: a boolean per catalog position; the others never get a score
        (the tools usage never promotes).
        """
        with self._lock:  # ids and positions of one numbering: a change may renumber them
            scores = self.scores(query)
            if scores is None:
                return None
            positions = self.positions(index)[: scores.size]
        ok = positions >= 0
        if allowed is not None:
            ok &= allowed[np.maximum(positions, 0)]
        keep = np.flatnonzero(ok & (scores > 0))
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
    history: UsageIndex | Sequence[UsageIndex],
    query: str,
    base: np.ndarray | None = None,
    *,
    weight: float = DEFAULT_USAGE_WEIGHT,
    allowed: np.ndarray | None = None,
) -> np.ndarray:
    """Relevance of every tool: ``base`` plus ``weight`` times its usage score.

    The usage score (:meth:`UsageIndex.scores`) is the BM25 score of the tool's
    recorded messages, taken as one more document field of the tool: past
    requests expand the tool's searchable text, in the lexical score's units.
    With no usage match the ``base`` array itself is returned: an empty
    history changes nothing.

    Args:
        index: the catalog's tool index (``catalog.index``).
        history: the usage history, or several (the operator's and a scope's): their
            scores add up.
        query: the user's message.
        base: the lexical or hybrid scores (default ``index.scores(query)``).
        weight: the usage share, see above.
        allowed: a boolean per catalog position: the tools usage may promote.
    """
    if base is None:
        base = index.scores(query)
    histories = [history] if isinstance(history, UsageIndex) else list(history)
    usage = None
    for one in histories if query else ():
        scores = one.catalog_scores(index, query, allowed)
        if scores is not None:
            usage = scores if usage is None else usage + scores
    if usage is None:
        return base
    out = base + usage * weight
    out.setflags(write=False)
    return out


DESTRUCTIVE_KEY = "destructiveHint"
"""A tool whose ``metadata`` sets this to True is never promoted by usage (the MCP annotation
the loader copies into an MCP tool's metadata, or the same key in your tool's own)."""


def promotable(catalog: ToolCatalog) -> np.ndarray:
    """A boolean per catalog position: may usage raise this tool's score (or pick it when
    nothing matches)? Not for manual tools, drafts (listed in debug mode) or tools marked
    ``destructiveHint`` (the MCP annotation the loader copies into a tool's metadata, or
    the same key in your tool's own ``metadata``). Cached in ``catalog.derived``."""

    def build() -> np.ndarray:
        out = np.ones(len(catalog.index), dtype=bool)
        for name in catalog.index.names:
            spec = catalog.get(name)
            metadata = (spec.tool.metadata or {}) if spec is not None else {}
            out[catalog.index.position(name)] = spec is not None and not (
                spec.include == "manual"
                or spec.status == "draft"
                or metadata.get(DESTRUCTIVE_KEY) is True
            )
        out.setflags(write=False)
        return out

    return catalog.derived.get("usage_promotable", build)
