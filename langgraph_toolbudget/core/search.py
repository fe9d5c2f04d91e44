"""Search over a tool catalog: one index, two engines.

Its one reason to change: how the catalog is searched (BM25 ranking, the regex engine).

Key Components:
    - :class:`ToolIndex`: built once per catalog. Holds a BM25 ranker over each
      tool's name words, description and argument names (typo tolerant through
      rapidfuzz), and the texts the regex engine scans.
    - :meth:`ToolIndex.rank`: free-text relevance ranking, used by
      classify_intent, select_tools and tool_search.
    - :meth:`ToolIndex.regex_search`: the ``search_tools`` meta-tool: a regular
      expression over name, description and argument names, with a fuzzy
      fallback (substring, then word, then character similarity) when nothing
      matches.

Typical Usage:
    >>> index = ToolIndex([("get_weather", "Get current weather", ["city"])])
    >>> index.regex_search("weather").found
    1
    >>> [name for name, _ in index.rank_names("what's the wether in Paris")]
    ['get_weather']
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial

import numpy as np
import re2
from rapidfuzz import fuzz, process

from langgraph_toolbudget.core.fuzzy import FuzzyMatcher
from langgraph_toolbudget.core.limits import MAX_PATTERN_CHARS, clip
from langgraph_toolbudget.core.terms import (
    MAX_CACHED_TEXT,
    clauses,
    ranked_text,
    stop_word_pairs,
    tokenize,
)

__all__ = [
    "MAX_EXPANDED_TERMS",
    "MAX_FUZZY_RESULTS",
    "MAX_RANKED_CLAUSES",
    "MAX_SEARCH_DESCRIPTION_CHARS",
    "SearchResult",
    "ToolIndex",
    "clauses",
    "lead_sentence",
    "tokenize",
]

QUERY_PAIR_REACH = 3
"""How many words apart a request's stop word and another word may stand to make a pair
that tells apart tools whose names differ only in that stop word ("log me out" finds
``log_out``, "zoom the map out" ``zoom_out``;
:func:`~langgraph_toolbudget.core.terms.stop_word_pairs`)."""

MIN_SENTENCE_TERMS = 3
"""A ``search_tools`` pattern that no regex matched and that holds at least this many search
terms (stop words left out) is ranked as a request before the fuzzy match
(:meth:`ToolIndex.regex_search`)."""

MAX_SENTENCE_SPELLINGS = 8
"""A ``search_tools`` sentence's unknown words whose close spellings count (the first ones)."""

MAX_FUZZY_RESULTS = 5
"""The fuzzy fallback of ``search_tools`` returns at most this many tools."""

FOUND_MESSAGE = "Found matching tools. Use 'add_tool' to load the ones you need."
MORE_MATCHED = " These are the first {shown} of {found}: a narrower pattern lists the others."
FUZZY_MESSAGE = (
    "No tool matched the pattern exactly; these are the closest matches. "
    "Use 'add_tool' to load the ones you need."
)
NOT_FOUND_MESSAGE = (
    "No tools found matching the pattern. Try a shorter pattern, another word, "
    "or call 'show_all_tools' to list every tool name."
)
EXCLUDED_MESSAGE = (
    "Every tool matching the pattern is excluded from this conversation ({names}), so none "
    "can be loaded here. Use the tools you have, try another pattern, or ask the user to "
    "include the tool."
)
INVALID_PATTERN_ERROR = (
    "invalid regex pattern {pattern!r}: {reason}. Use a plain word such as 'weather' "
    "or a simple pattern such as 'get_.*'."
)

MAX_SEARCH_DESCRIPTION_CHARS = 500
"""A ``search_tools`` answer quotes at most this many characters of each tool's description
(the tool's schema carries its description once it is loaded), so an answer stays within
about ``search_limit`` x 600 characters whatever the tools' descriptions."""

MAX_FUZZY_QUERY_CHARS = 2000
"""A pattern too long for the regex engine is fuzzy-matched on this many of its first characters."""
REGEX_MAX_MEM = 2 << 20
"""Memory RE2 may use for one compiled pattern (bytes). Counted repetitions such as
``.{0,1000}`` repeated 30 times compile for seconds under RE2's default of 8 MiB;
under this bound they are refused at once, and ordinary patterns fit easily."""

FULL_QUERY_WEIGHT = 0.5
"""Weight of the whole query's normalised score beside the best clause's."""

CLAUSE_STRENGTH_POWER = 0.5
"""A clause of a multi-part request counts by its best tool's BM25 score relative to the best
clause's, to this power: a clause that matches nothing well ("I'm a bit swamped, so thanks
in advance") no longer hands its best tool the same place as a clause that names a task.
0 counted every clause alike; chosen on MCP-Bench's dev split (0.25 / 0.5 / 0.75 / 1, see
``docs/benchmarks.md``)."""

ARG_TEXT_WEIGHT = 0.5
"""The weight of each distinct term of a tool's argument descriptions (and declared output
fields) in its BM25 document, counted once however often the term is repeated: a description
is the tool's own claim about what it does, argument text only supports it, so a schema
stuffed with keywords ("weather github issue slack ... table" in every argument) cannot buy
a place over the tools that are about those things. Measured
(``benchmarks/selection_quality.py``): see ``docs/benchmarks.md``."""

EXPAND_CACHE_SIZE = 1024
"""Unknown query terms whose close spellings each index caches (tuples of at most two
words; terms over :data:`MAX_CACHED_TEXT` characters are not cached). Terms of the
index's vocabulary need no cache. The cache serves the repeats of a turn (three nodes,
each clause) and of common misspellings; new words fill it, so it is kept small."""

MIN_EXPANDED_TERM_CHARS = 4
"""Unknown query terms shorter than this get no close spellings (too many words are 80%
alike a three-letter word)."""

MAX_EXPANDED_TERMS = 256
"""A query (its whole text and its clauses together) looks up close spellings for at most
this many distinct terms the index does not hold, the first ones in the text; later unknown
terms count only when spelled as in the catalog. Each lookup compares the term with the
whole vocabulary (~1 ms for 13,000 words), so a pasted log or document of 100,000
characters, thousands of unknown words, took seconds a turn in the event loop. Requests of
the benchmarks hold at most 120 unknown terms (MCP-Bench's 2,200-character tasks, against
the category index; 64 against the tool index): they rank as without the cap."""

MAX_RANKED_CLAUSES = 100
"""A request is ranked clause by clause (:meth:`ToolIndex.scores`) on at most this many of
its first clauses; the whole text is ranked too. Each clause costs a pass over the catalog,
and a pasted document of 100,000 characters holds thousands of sentences, none a task of its
own. Requests of the benchmarks hold at most 19 clauses (MCP-Bench's tasks)."""


@dataclass(frozen=True)
class SearchResult:
    """What ``search_tools`` answers: ``{found, tools, message}``, or ``{error}``.

    Attributes:
        found: how many tools matched.
        tools: ``{"name": ..., "description": ...}`` for each match, best first.
        message: what to do next.
        error: set when the pattern was rejected; then ``tools`` is empty.
        fuzzy: True when the regex matched nothing and these are fuzzy matches.
    """

    found: int
    tools: list[dict[str, str]] = field(default_factory=list)
    message: str = ""
    error: str | None = None
    fuzzy: bool = False

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready result given to the model."""
        if self.error is not None:
            return {"error": self.error}
        return {"found": self.found, "tools": self.tools, "message": self.message}


def more_matched(shown: int, found: int) -> str:
    """What a ``search_tools`` answer adds when it lists only the first ``shown`` of the
    ``found`` tools that matched ("" when it lists them all)."""
    return MORE_MATCHED.format(shown=shown, found=found) if found > shown else ""


def _compile_pattern(pattern: str) -> re2._Regexp:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = REGEX_MAX_MEM  # a larger program is refused ("pattern too large")
    # Smart case: an all-lower-case pattern matches regardless of case, as in ripgrep.
    letters = re.sub(r"\(\?[a-zA-Z]+\)|\\[A-Za-z]", "", pattern)  # flags and escapes like \W
    options.case_sensitive = any(c.isupper() for c in letters)
    # Multi-line: a tool's text is its name, description and argument names on lines of
    # their own, so `^get_weather$` and `_issue$` match a name.
    return re2.compile(f"(?m){pattern}", options=options)


def _reason(exc: re2.error) -> str:
    """Why RE2 rejected a pattern, for the model."""
    reason = exc.args[0] if exc.args else str(exc)
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    reason = reason.replace("(?m)", "", 1)  # the flag _compile_pattern put before the pattern
    if "invalid perl operator" in reason or "invalid escape" in reason:
        reason += " (look-around and back-references are not supported)"
    return str(reason)


def rank_scores(
    scores: np.ndarray, *, limit: int | None = None, among: Iterable[int] | None = None
) -> list[tuple[int, float]]:
    """Positions scoring > 0, best first, position order breaking ties (deterministic).

    Args:
        scores: one score per tool position.
        limit: at most this many results.
        among: restrict to these positions.
    """
    if among is not None:
        ids = np.fromiter(among, dtype=np.int64)
        if ids.size == 0:
            return []
        sub = scores[ids]
        keep = sub > 0
        ids, sub = ids[keep], sub[keep]
    else:
        ids = np.flatnonzero(scores > 0)
        sub = scores[ids]
    if limit is not None and limit < ids.size:
        if limit <= 0:
            return []
        # Only the candidates scoring at least the limit-th best need sorting.
        kth = np.partition(sub, sub.size - limit)[sub.size - limit]
        keep = sub >= kth
        ids, sub = ids[keep], sub[keep]
    order = np.lexsort((ids, -sub))
    if limit is not None:
        order = order[:limit]
    return [(int(ids[i]), float(sub[i])) for i in order]


_FUZZY_BUILD = threading.Lock()
"""Held while an index builds its fuzzy fallback (rare, once per index): one lock for every
index, as a lock in the index would make it impossible to copy."""


class ToolIndex:
    """A search index over a list of tools, built once.

    Args:
        docs: ``(name, description, argument_names)`` for each tool, in catalog order,
            optionally with a fourth item: the argument descriptions (and declared
            output fields), ranked (BM25) but not matched by the regex engine.
        name_weight: how many times the name's words count against the
            description's.
        k1, b: the BM25 parameters.

    Regex search uses RE2 (``google-re2``), a linear-time engine: a
    catastrophic pattern such as ``(a+)+$`` costs the same as a plain one, so a
    pattern written by a model cannot stall the graph. RE2 has no
    back-references or look-around; such patterns are answered with an error
    result that says so.

    Caches, each owned by the index (freed with it) and bounded: the last
    query's scores (one array); close spellings of query terms
    (:data:`EXPAND_CACHE_SIZE` terms; terms longer than
    :data:`~langgraph_toolbudget.core.terms.MAX_CACHED_TEXT` characters are
    not cached); the fuzzy fallback's word index, built on its first use, with
    its own bounded cache (:class:`~langgraph_toolbudget.core.fuzzy.FuzzyMatcher`).
    """

    def __init__(
        self,
        docs: Sequence[
            tuple[str, str, Sequence[str]] | tuple[str, str, Sequence[str], Sequence[str]]
        ],
        *,
        name_weight: int = 2,
        k1: float = 1.2,
        b: float = 0.75,
        split_clauses: bool = True,
    ) -> None:
        self.split_clauses = split_clauses
        self._fuzzy_matcher: FuzzyMatcher | None = None
        self._last: tuple[str, np.ndarray, frozenset[int] | None] | None = None
        self.names = [d[0] for d in docs]
        self.descriptions = [d[1] for d in docs]
        self._position = {name: i for i, name in enumerate(self.names)}
        self._texts = [f"{d[0]}\n{d[1]}\n{' '.join(d[2])}" for d in docs]
        documents = [_document(d, name_weight) for d in docs]
        lengths = [sum(terms.values()) for terms in documents]
        told_apart = _names_told_apart(self.names)
        for position, pairs in told_apart.items():
            # The pairs are no more words: the tool's length, and so every score, stays put.
            documents[position].update(pairs * name_weight)
        self._pair_terms = frozenset(p for pairs in told_apart.values() for p in pairs)
        self._pair_words = frozenset(w for p in self._pair_terms for w in p.split(" "))
        self._build_bm25(documents, lengths, k1, b)

    def _build_bm25(
        self, documents: list[Counter[str]], doc_lengths: Sequence[float], k1: float, b: float
    ) -> None:
        n = len(documents)
        lengths = np.array(doc_lengths, dtype=np.float64)
        avg = float(lengths.mean()) if n else 0.0
        # The postings as flat (term, tool, tf) arrays grouped by term with numpy, not a list
        # per term: at 10,000 tools those were ~90,000 containers alive through the build,
        # enough to set off full garbage collections (~150 ms each, every thread stopped,
        # the event loop too while a worker thread builds the index: core/warm.py).
        term_ids: dict[str, int] = {}
        terms_at: list[int] = []
        docs_at: list[int] = []
        tfs_at: list[float] = []
        for doc_id, terms in enumerate(documents):
            for term, tf in terms.items():
                terms_at.append(term_ids.setdefault(term, len(term_ids)))
                docs_at.append(doc_id)
                tfs_at.append(tf)
        term_of = np.asarray(terms_at, dtype=np.int64)
        order = np.argsort(term_of, kind="stable")  # each term's tools in catalog order
        ids = np.asarray(docs_at, dtype=np.int64)[order]
        tfs = np.asarray(tfs_at, dtype=np.float64)[order]
        df = np.bincount(term_of, minlength=len(term_ids))
        norm = k1 * (1 - b + b * lengths / avg) if n and avg else np.ones(n)
        idf = np.array([math.log(1 + (n - k + 0.5) / (k + 0.5)) for k in df.tolist()])
        contrib = np.repeat(idf, df) * tfs * (k1 + 1) / (tfs + norm[ids])
        bounds = np.cumsum(df)[:-1]
        pieces = zip(np.split(ids, bounds), np.split(contrib, bounds), strict=True)
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = (
            dict(zip(term_ids, pieces, strict=True)) if term_ids else {}
        )
        self._vocab = list(self._postings)
        self._size = n
        # Per index, not per class: the cache goes when the index goes (it refers to the
        # index's vocabulary, not to the index).
        self._expand_cached = lru_cache(maxsize=EXPAND_CACHE_SIZE)(
            partial(_expand_term, self._postings, self._vocab)
        )

    def __len__(self) -> int:
        return self._size

    def _expand(self, term: str) -> tuple[tuple[str, float], ...]:
        """Vocabulary terms for a query term: itself, else close spellings (cached if short)."""
        if term in self._postings:
            return ((term, 1.0),)
        if len(term) <= MAX_CACHED_TEXT:
            return self._expand_cached(term)
        return _expand_term(self._postings, self._vocab, term)

    def scores(self, query: str) -> np.ndarray:
        """Relevance of every tool to a free-text query (read-only array).

        The BM25 score of the whole query (:meth:`bm25_scores`) when the query
        asks for one thing. A request for several things ("find X. Then do Y,
        lastly Z") is also ranked clause by clause (:func:`clauses`): a tool
        scores its best clause's BM25 score relative to that clause's best
        tool, plus :data:`FULL_QUERY_WEIGHT` times its relative score for the
        whole query, scaled back to the whole query's BM25 range. So every task
        of the request gets its own top tools instead of the longest clause (or
        tools matching a little of every clause) taking all the top places. The
        last query's scores are cached, since the three nodes of a turn score the
        same message.

        The work is bounded whatever the text's length: a text over
        :data:`~langgraph_toolbudget.core.terms.MAX_REQUEST_CHARS` characters is ranked on
        its first and last halves (:func:`~langgraph_toolbudget.core.terms.ranked_text`),
        close spellings are looked up for at most :data:`MAX_EXPANDED_TERMS` unknown terms
        (the whole text's and its clauses' together) and at most :data:`MAX_RANKED_CLAUSES`
        clauses are ranked on their own.
        """
        return self._scored(query)[0]

    def clause_leaders(self, query: str) -> frozenset[int] | None:
        """The positions of the best tools of each clause of a request of several clauses
        (:func:`clauses`; ties included): the tools some part of the request is most about.
        ``None`` for a request of one clause, or when the index does not split clauses."""
        return self._scored(query)[1]

    def _scored(self, query: str) -> tuple[np.ndarray, frozenset[int] | None]:
        """:meth:`scores` and :meth:`clause_leaders` of ``query``; the last query's are cached."""
        query = ranked_text(query)
        last = self._last
        if last is not None and last[0] == query:
            return last[1], last[2]
        terms = self._query_terms(query)
        fuzzy = self._expandable(terms)
        out = self._bm25(terms, fuzzy)
        parts = clauses(query)[:MAX_RANKED_CLAUSES] if self.split_clauses and out.size else []
        leaders = None
        if len(parts) > 1:
            # A clause's terms are the whole query's: it expands no term the query did not.
            scored = [self._bm25(self._query_terms(part), fuzzy) for part in parts]
            tops = [float(s.max()) for s in scored]
            leaders = frozenset(
                int(i)
                for s, top in zip(scored, tops, strict=True)
                if top > 0
                for i in np.flatnonzero(s == top)
            )
            out = self._clause_scores(out, scored, tops)
        out.setflags(write=False)
        self._last = (query, out, leaders)
        return out, leaders

    def _clause_scores(
        self, full: np.ndarray, scored: list[np.ndarray], tops: list[float]
    ) -> np.ndarray:
        top = float(full.max())
        if top <= 0:
            return full
        strongest = max(tops)
        best = np.zeros_like(full)
        for part_scores, part_top in zip(scored, tops, strict=True):
            if part_top > 0:
                weight = (part_top / strongest) ** CLAUSE_STRENGTH_POWER
                np.maximum(best, part_scores * (weight / part_top), out=best)
        best += full * (FULL_QUERY_WEIGHT / top)
        best *= top / (1.0 + FULL_QUERY_WEIGHT)
        return best

    def term_docs(self, query: str) -> dict[str, np.ndarray]:
        """The positions of the tools holding each term of ``query``, spelled as written
        (a close spelling the ranking tolerates is no evidence of what the query is about)."""
        terms = dict.fromkeys(tokenize(ranked_text(query)))
        return {t: self._postings[t][0] for t in terms if t in self._postings}

    def bm25_scores(self, query: str) -> np.ndarray:
        """Plain BM25 score of every tool for the whole query (typos tolerated: close
        spellings of its first :data:`MAX_EXPANDED_TERMS` unknown terms count too)."""
        terms = self._query_terms(ranked_text(query))
        return self._bm25(terms, self._expandable(terms))

    def _query_terms(self, query: str) -> Counter[str]:
        """A query's search terms (term -> count), with the pairs around its stop words that
        tell apart tools whose names differ only in them ("zoom out", :func:`_names_told_apart`)."""
        terms = Counter(tokenize(query))
        # A pair can match only where its word that is no stop word is one of the terms.
        if not self._pair_words.isdisjoint(terms):
            pairs = stop_word_pairs(query, reach=QUERY_PAIR_REACH)
            terms.update(p for p in pairs if p in self._pair_terms)
        return terms

    def _expandable(self, terms: Iterable[str]) -> frozenset[str]:
        """The terms, not in the index, whose close spellings are looked up: the first
        :data:`MAX_EXPANDED_TERMS` long enough to have any."""
        unknown = (
            t for t in terms if t not in self._postings and len(t) >= MIN_EXPANDED_TERM_CHARS
        )
        return frozenset(itertools.islice(unknown, MAX_EXPANDED_TERMS))

    def _bm25(self, terms: Counter[str], expandable: Collection[str]) -> np.ndarray:
        """BM25 of every tool for query terms (term -> count); only the ``expandable``
        unknown terms are matched by close spellings."""
        out = np.zeros(self._size, dtype=np.float64)
        for term, qtf in terms.items():
            if term not in self._postings and term not in expandable:
                continue
            for word, weight in self._expand(term):
                ids, contrib = self._postings[word]
                out[ids] += contrib * (weight * qtf)
        return out

    def rank(
        self, query: str, *, limit: int | None = None, among: Iterable[int] | None = None
    ) -> list[tuple[int, float]]:
        """Tools by relevance to ``query``, best first, score > 0 only.

        Args:
            query: free text (a user message).
            limit: at most this many results.
            among: restrict to these tool positions.

        Ties are broken by catalog order, so the result is deterministic.
        """
        return rank_scores(self.scores(query), limit=limit, among=among)

    def rank_names(self, query: str, *, limit: int | None = None) -> list[tuple[str, float]]:
        """Like :meth:`rank`, with tool names instead of positions."""
        return [(self.names[i], s) for i, s in self.rank(query, limit=limit)]

    def position(self, name: str) -> int:
        """The position of a tool in the index. Raises ``KeyError`` if absent."""
        return self._position[name]

    def _describe(self, ids: Iterable[int]) -> list[dict[str, str]]:
        return [
            {
                "name": self.names[i],
                "description": clip(self.descriptions[i], MAX_SEARCH_DESCRIPTION_CHARS),
            }
            for i in ids
        ]

    def regex_search(
        self, pattern: str, *, limit: int | None = None, exclude: Collection[str] = ()
    ) -> SearchResult:
        """The ``search_tools`` engine: regex, then fuzzy fallback.

        Args:
            pattern: a regular expression (RE2 syntax) over each tool's name,
                description and argument names. An all-lower-case pattern is
                matched regardless of case; ``(?i)`` is accepted too.
            limit: cap on regex matches returned (the fuzzy fallback returns at
                most :data:`MAX_FUZZY_RESULTS`).
            exclude: tools never returned (excluded in the thread); when they are all
                that matched, the answer says so instead of "not found".

        A pattern over :data:`~langgraph_toolbudget.core.limits.MAX_PATTERN_CHARS`
        characters skips the regex engine (its work grows with the length) and
        gets the fuzzy fallback on its first :data:`MAX_FUZZY_QUERY_CHARS` characters.

        Returns:
            A :class:`SearchResult`. An invalid or unsupported pattern gives a
            result with ``error`` set; no exception escapes.
        """
        if not isinstance(pattern, str) or not pattern.strip():
            return SearchResult(
                0, error=INVALID_PATTERN_ERROR.format(pattern=pattern, reason="empty pattern")
            )
        if len(pattern) > MAX_PATTERN_CHARS:  # regex work grows with the pattern's length
            return self._fuzzy_result(pattern[:MAX_FUZZY_QUERY_CHARS], exclude)
        try:
            compiled = _compile_pattern(pattern)
        except re2.error as exc:
            return SearchResult(
                0, error=INVALID_PATTERN_ERROR.format(pattern=clip(pattern), reason=_reason(exc))
            )
        matched = [i for i, text in enumerate(self._texts) if compiled.search(text)]
        hits = [i for i in matched if self.names[i] not in exclude]
        if hits:
            hits.sort(key=lambda i: (compiled.search(self.names[i]) is None, i))
            shown = hits[:limit] if limit is not None else hits
            message = FOUND_MESSAGE + more_matched(len(shown), len(hits))
            return SearchResult(len(hits), self._describe(shown), message)
        if matched:
            return self._all_excluded(matched)
        return self._fuzzy_result(pattern, exclude)

    def _fuzzy_result(self, pattern: str, exclude: Collection[str] = ()) -> SearchResult:
        # the fuzzy match's best, cut after the excluded tools are left out
        limit = MAX_FUZZY_RESULTS + len(exclude)
        matched = self._ranked_hits(pattern, exclude) or self.fuzzy_search(pattern, limit=limit)
        fuzzy = [i for i in matched if self.names[i] not in exclude][:MAX_FUZZY_RESULTS]
        if fuzzy:
            return SearchResult(len(fuzzy), self._describe(fuzzy), FUZZY_MESSAGE, fuzzy=True)
        if matched:
            return self._all_excluded(matched)
        return SearchResult(0, [], NOT_FOUND_MESSAGE)

    def _ranked_hits(self, pattern: str, exclude: Collection[str]) -> list[int]:
        """For a pattern written as a sentence ("I need a tool that converts celsius to
        fahrenheit": at least :data:`MIN_SENTENCE_TERMS` search terms), the tools not in
        ``exclude`` that BM25 puts first (at most :data:`MAX_FUZZY_RESULTS`); else none.
        Small models search in sentences, and the fuzzy match averages over every word,
        filler included: the right tool fell under its bar while long descriptions passed
        it. Close spellings count for its first :data:`MAX_SENTENCE_SPELLINGS` unknown words
        ("isues", "tempreture"), not all: each lookup scans the vocabulary, and a long
        invented pattern took a tenth of a second on a large one."""
        terms = self._query_terms(ranked_text(pattern))
        if len(terms) < MIN_SENTENCE_TERMS:
            return []
        among = [i for i, name in enumerate(self.names) if name not in exclude] if exclude else None
        unknown = (
            t for t in terms if t not in self._postings and len(t) >= MIN_EXPANDED_TERM_CHARS
        )
        scores = self._bm25(terms, frozenset(itertools.islice(unknown, MAX_SENTENCE_SPELLINGS)))
        ranked = rank_scores(scores, limit=MAX_FUZZY_RESULTS, among=among)
        return [position for position, score in ranked if score > 0]

    def _all_excluded(self, positions: list[int]) -> SearchResult:
        names = [self.names[i] for i in positions[:MAX_FUZZY_RESULTS]]
        more = f" and {len(positions) - len(names)} more" if len(positions) > len(names) else ""
        return SearchResult(0, [], EXCLUDED_MESSAGE.format(names=", ".join(names) + more))

    def fuzzy_search(self, query: str, *, limit: int = MAX_FUZZY_RESULTS) -> list[int]:
        """Fuzzy matches for a query that no regex matched, best first (positions).

        See :meth:`FuzzyMatcher.search <langgraph_toolbudget.core.fuzzy.FuzzyMatcher.search>`:
        the query as a substring, then its words, then its characters; bounded work.
        """
        return self._fuzzy.search(query, limit=limit)

    @property
    def _fuzzy(self) -> FuzzyMatcher:
        """The fuzzy fallback's word index, built on its first use, once when several threads
        ask at the same time (``functools.cached_property`` takes no lock from Python 3.12)."""
        matcher = self._fuzzy_matcher
        if matcher is None:
            with _FUZZY_BUILD:
                if self._fuzzy_matcher is None:
                    self._fuzzy_matcher = FuzzyMatcher(self.names, self.descriptions)
                matcher = self._fuzzy_matcher
        return matcher


def _document(
    doc: tuple[str, str, Sequence[str]] | tuple[str, str, Sequence[str], Sequence[str]],
    name_weight: int,
) -> Counter[str]:
    """A tool's BM25 document: term -> weight. The name's words count ``name_weight`` times,
    the description's first sentence's and the argument names' once each; the rest of the
    description and the argument descriptions :data:`ARG_TEXT_WEIGHT` once per distinct term
    (ranked, never regex-matched: they often say what a query asks for in other words, "the
    ID of the post"). The first sentence says what the tool does; what follows is usage
    notes, examples and, in many MCP servers, instructions to the model ("IMPORTANT: use this
    tool FIRST for ANY research task"), whose words would otherwise match every request."""
    lead, rest = lead_sentence(doc[1])
    terms: Counter[str] = Counter(tokenize(doc[0]) * name_weight)
    terms.update(tokenize(lead))
    terms.update(tokenize(" ".join(doc[2])))
    support = " ".join([rest, *(doc[3] if len(doc) > 3 else ())])
    for term in dict.fromkeys(tokenize(support)):  # text order, not hash order
        terms[term] += ARG_TEXT_WEIGHT  # type: ignore[assignment]
    return terms


def _names_told_apart(names: Sequence[str]) -> dict[int, list[str]]:
    """The stop-word pairs (:func:`stop_word_pairs`) of the tools whose names differ only in
    stop words, by position: ``zoom_in`` and ``zoom_out`` both index as "zoom", so a request
    to "zoom out" would tie them, and ``sign_in``/``sign_out``, ``scroll_up``/``scroll``
    alike. Other names get none: "get weather" would credit every ``get_*`` tool a little for
    each "get" in a request, and the stop list is there because such words say little."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for position, name in enumerate(names):
        groups.setdefault(tuple(tokenize(name)), []).append(position)
    return {
        position: pairs
        for positions in groups.values()
        if len(positions) > 1
        for position in positions
        if (pairs := stop_word_pairs(names[position]))
    }


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
_INITIALISM = re.compile(r"\b(?:[A-Za-z]\.){2,}$")  # "e.g.", "i.e.", "U.S.": no sentence end


def lead_sentence(description: str) -> tuple[str, str]:
    """A description's first sentence (up to a sentence end or a blank line), and the rest.

    A period after an initialism ("e.g.", "i.e.", "U.S.") ends no sentence."""
    text = description.strip()
    for end in _SENTENCE_END.finditer(text):
        at = end.start()
        blank_line = end.group().count("\n") > 1
        if blank_line or not _INITIALISM.search(text, max(0, at - 16), at):
            return text[:at], text[end.end() :]
    return text, ""


def _expand_term(
    postings: Mapping[str, object], vocab: list[str], term: str
) -> tuple[tuple[str, float], ...]:
    """Vocabulary terms for a query term: itself, else up to two spellings 80% alike.

    Of equally close spellings the first in the vocabulary are kept; its order is the
    catalog's (its terms as they come in the tools' texts, never a set's hash order), so the
    choice is the same in every process."""
    if term in postings:
        return ((term, 1.0),)
    if len(term) < MIN_EXPANDED_TERM_CHARS:
        return ()
    hits = process.extract(term, vocab, scorer=fuzz.ratio, score_cutoff=80, limit=2)
    return tuple((word, score / 100.0) for word, score, _ in hits)
