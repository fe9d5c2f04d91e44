"""Which tools the model sees: the per-category budget and free-text hits. Pure functions.

Its one reason to change: how the visible set is chosen from scores (budget and hits).

Key Components:
    - :func:`select_tools`: the proportional per-category budget, tools ranked
      by relevance to the query inside each category.
    - :func:`search_hits`: the best free-text hits for a query.
    - :func:`free_tools`: tools visible without spending budget.
    - :func:`words_match`: does a word of a request match a tool or a category (the lexical
      evidence that a request brings a topic)?

The nodes over these are in :mod:`langgraph_toolbudget.nodes.selection`.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Collection, Iterable, Sequence

import numpy as np

from langgraph_toolbudget.core.budget import allocate
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.catalog_checks import closest_names
from langgraph_toolbudget.core.search import rank_scores
from langgraph_toolbudget.core.token_budget import allocate_tokens, tool_tokens

__all__ = ["free_tools", "search_hits", "select_tools", "words_match"]

UNKNOWN_PINNED_ERROR = (
    "pinned tools {names} are not tools that run in {mode} mode (unknown, filtered, disabled, "
    "or drafts, which run only with runtime_mode='debug'). Closest tools: {closest}."
)
FAILED_SERVERS_NOTE = " MCP server(s) {failed} failed to load (see catalog.load_errors)."
PINNED_SERVER_DOWN_WARNING = (
    "pinned tools {names} are left out: the catalog does not list them, and MCP server(s) "
    "{failed} failed to load (see catalog.load_errors), so they may be tools of theirs. A "
    "server's tool is pinned again once the catalog is loaded with that server up; a name "
    "that is no tool of theirs is a typo to fix.{hints}"
)
PINNED_RENAMED_HINT = (
    " {name!r} is listed as {now} while they are down (its prefix came with a tool of the same "
    "name on one of them): with tool_name_prefix=True its name would not change."
)


def select_tools(
    catalog: ToolCatalog,
    query: str,
    categories: Sequence[str],
    *,
    max_tools: int = 8,
    min_per_category: int = 2,
    exclude: Iterable[str] = (),
    scores: np.ndarray | None = None,
    max_schema_tokens: int | None = None,
    also_selectable: Collection[str] = (),
) -> list[str]:
    """Tools for ``categories`` under a proportional budget.

    ``per_cat = max(min_per_category, max_tools // len(categories))``; inside
    each category tools are ranked by relevance to ``query`` (catalog order
    breaks ties); slots a small category leaves unused go to the most relevant
    remaining tools; the result is capped at ``max_tools``, de-duplicated and
    deterministic. Unknown categories add nothing. Only tools with include
    mode ``agent`` are chosen.

    Args:
        catalog: the tool catalog.
        query: the user's text, for ranking inside categories.
        categories: categories in priority order.
        max_tools: the budget.
        min_per_category: the floor of each category's share.
        exclude: tools already visible outside the budget (not chosen again).
        scores: relevance of every tool, aligned with ``catalog.index.names``
            (e.g. :meth:`HybridScorer.scores`); default ``catalog.index.scores(query)``.
        max_schema_tokens: a budget in schema tokens instead: each category's
            share is a share of tokens (``core.token_budget.allocate_tokens``);
            ``max_tools`` then caps the number of tools too.
        also_selectable: listed tools that may be chosen although their catalog
            include mode is not ``agent`` (a thread set them to ``agent``:
            :meth:`SessionContext.selectable`).
    """
    if isinstance(categories, str):
        raise TypeError(
            f"categories must be a list of category names, got the string {categories!r}; "
            f"pass [{categories!r}]."
        )
    members = _selectable_members(catalog)
    if also_selectable:
        members = _with_also(catalog, members, also_selectable)
    known = [c for c in dict.fromkeys(categories) if c in members]
    if not known or max_tools <= 0:
        return []
    exclude = list(exclude)
    index = catalog.index
    if scores is None:
        scores = index.scores(query) if query else None
    else:
        _check_scores(catalog, scores)
    # No category can place more than max_tools tools (plus the excluded ones it skips),
    # so each category's ranking is cut there: the result is the same, the work bounded.
    cap = max_tools + len(exclude) if max_schema_tokens is None else len(index)
    ranked = []
    for cat in known:
        positions = members[cat]
        if scores is None:
            top = positions[:cap]
            sub = np.zeros(top.size)
        else:
            sub = scores[positions]
            order = np.argsort(-sub, kind="stable")[:cap]  # stable: catalog order breaks ties
            top, sub = positions[order], sub[order]
        ranked.append((cat, [(index.names[p], float(v)) for p, v in zip(top, sub, strict=True)]))
    if max_schema_tokens is not None:
        cost = tool_tokens(catalog)
        return allocate_tokens(
            ranked, cost, max_tokens=max_schema_tokens, max_tools=max_tools, exclude=exclude
        )
    return allocate(ranked, max_tools=max_tools, min_per_category=min_per_category, exclude=exclude)


def _selectable_members(catalog: ToolCatalog) -> dict[str, np.ndarray]:
    """Category -> index positions of its selectable tools, in catalog order.

    Built once per catalog: the ``catalog.derived`` entry ``selectable_members``
    (one array per category, one int per member).
    """
    return catalog.derived.get("selectable_members", lambda: _build_selectable_members(catalog))


def _build_selectable_members(catalog: ToolCatalog) -> dict[str, np.ndarray]:
    index = catalog.index
    members = {}
    for cat in catalog.categories:
        positions = [index.position(n) for n in catalog.tools_in(cat) if catalog.selectable(n)]
        members[cat] = np.array(positions, dtype=np.int64)
        members[cat].setflags(write=False)
    return members


def _with_also(
    catalog: ToolCatalog, members: dict[str, np.ndarray], also: Collection[str]
) -> dict[str, np.ndarray]:
    """``members`` with the listed tools of ``also`` added to their categories (catalog order)."""
    specs = [spec for n in also if n in catalog and (spec := catalog.get(n)) is not None]
    also = {spec.name for spec in specs}
    touched = {c for spec in specs for c in spec.categories if c in members}
    if not touched:
        return members
    index, out = catalog.index, dict(members)
    for cat in touched:
        names = [n for n in catalog.tools_in(cat) if n in also or catalog.selectable(n)]
        out[cat] = np.array([index.position(n) for n in names], dtype=np.int64)
    return out


def search_hits(
    catalog: ToolCatalog,
    query: str,
    *,
    limit: int = 5,
    exclude: Iterable[str] = (),
    min_relative_score: float = 0.0,
    scores: np.ndarray | None = None,
    also_selectable: Collection[str] = (),
    focus: Collection[str] | None = None,
) -> list[str]:
    """The ``limit`` most relevant selectable tools for free text, best first.

    Args:
        catalog: the tool catalog.
        query: free text.
        limit: how many at most.
        exclude: names to skip (already visible).
        min_relative_score: drop hits scoring below this fraction of the best.
        scores: relevance of every tool, aligned with ``catalog.index.names``
            (e.g. :meth:`HybridScorer.scores`); default ``catalog.index.scores(query)``.
        also_selectable: tools that may be hit although their catalog include mode
            is not ``agent`` (see :func:`select_tools`).
        focus: the categories chosen for the query. A tool outside them is hit only when
            it holds a term of the query that is distinctive in the catalog
            (:func:`distinctive_terms`), not only a verb every category shares
            ("create", "list"), and, in a request of several clauses, that is the best
            tool of one of them or scores at least :data:`OFF_FOCUS_MIN_SHARE` of the best
            score. ``None`` (or no category chosen): no such rule.
    """
    if limit <= 0 or not query:
        return []
    if scores is None:
        rank = functools.partial(catalog.index.rank, query)
    else:
        _check_scores(catalog, scores)
        rank = functools.partial(rank_scores, scores)
    skip = set(exclude)
    ok = functools.partial(_selectable, catalog, frozenset(also_selectable))
    if focus:
        ok = functools.partial(_on_topic, catalog, frozenset(focus), _evidence(catalog, query), ok)
    out: list[str] = []
    best = None
    # Enough candidates for ``limit`` hits unless many are skipped or off topic; then a
    # window four times as long (whose first candidates are the same, in the same order),
    # until it holds ``limit`` hits or every candidate.
    window, read = limit + len(skip) + 16, 0
    while True:
        ranked = rank(limit=window)
        for pos, score in ranked[read:]:
            if best is None:
                best = score
            if score < best * min_relative_score:
                return out
            name = catalog.index.names[pos]
            if name in skip or not ok(pos):
                continue
            out.append(name)
            if len(out) >= limit:
                return out
        if len(ranked) < window:
            return out
        read, window = len(ranked), window * 4


def words_match(catalog: ToolCatalog, query: str) -> bool:
    """Whether a word of ``query`` is in the text of a tool the budget may choose, or of a
    category (its name or description), as the catalog's lexical indexes read them.

    That is the evidence that a request brings a topic of its own. Embedding similarity and a
    retrieval function's answer are relative (min-max rescaled over the catalog, divided by
    the best score): some tool always scores high, so they rank a request's tools but cannot
    tell "And in Lima?" or "thanks!" (no topic: the request before it still holds) from a
    request about something.
    """
    if not query:
        return False
    index = catalog.index
    if any(catalog.selectable(index.names[p]) for p in np.flatnonzero(index.scores(query) > 0)):
        return True
    return bool(np.any(catalog.category_index.scores(query) > 0))


DISTINCTIVE_SHARE = 0.1
"""A query term is distinctive when the tools holding it sit in at most this share of the
catalog's categories (at least :data:`DISTINCTIVE_MIN_CATEGORIES`)."""
DISTINCTIVE_MIN_CATEGORIES = 1
OFF_FOCUS_MIN_SHARE = 0.5
"""In a request of several clauses, a tool outside the chosen categories that leads none of
them is hit when it scores at least this share of the best tool's score: the floor at which
the classifier keeps a category (``min_relative_score``). See :func:`_evidence`."""


def distinctive_terms(catalog: ToolCatalog, query: str) -> dict[str, np.ndarray]:
    """The query's terms that point at few categories, with the tools holding each.

    "create" in a catalog where GitHub, Slack, the calendar and the projects all create
    something says little about the topic; "issue" or "forecast" says a lot.
    """
    limit = max(DISTINCTIVE_MIN_CATEGORIES, math.ceil(DISTINCTIVE_SHARE * len(catalog.categories)))
    spread = catalog.derived.get("tool_categories", lambda: _ToolCategories(catalog))
    return {
        term: docs
        for term, docs in catalog.index.term_docs(query).items()
        if spread.of_term(term, docs) <= limit
    }


class _ToolCategories:
    """Each tool's categories as flat arrays, so the categories of many tools are counted in
    a few numpy passes (a common term of a 10,000-tool catalog sits in thousands of tools)."""

    def __init__(self, catalog: ToolCatalog) -> None:
        ids = {c: i for i, c in enumerate(catalog.categories)}
        per_tool = [
            [ids[c] for c in _categories(catalog, name) if c in ids] for name in catalog.index.names
        ]
        self.lengths = np.fromiter((len(c) for c in per_tool), dtype=np.int64, count=len(per_tool))
        self.starts = np.cumsum(self.lengths) - self.lengths
        self.flat = np.fromiter(
            (c for cats in per_tool for c in cats), dtype=np.int64, count=int(self.lengths.sum())
        )
        self._terms: dict[str, int] = {}  # at most one entry per term of the index

    def of_term(self, term: str, positions: np.ndarray) -> int:
        """:meth:`count` for the tools holding an index term (``positions``), kept per term."""
        found = self._terms.get(term)
        if found is None:
            found = self._terms[term] = self.count(positions)
        return found

    def count(self, positions: np.ndarray) -> int:
        """How many distinct categories the tools at ``positions`` sit in."""
        lengths = self.lengths[positions]
        total = int(lengths.sum())
        if total == 0:
            return 0
        # a ragged gather: each tool's slice of ``flat``, all in one index array
        offsets = np.repeat(self.starts[positions] - (np.cumsum(lengths) - lengths), lengths)
        # bincount, not unique: unique imports numpy.ma on its first call (20 ms in a turn)
        return int(np.count_nonzero(np.bincount(self.flat[offsets + np.arange(total)])))


def _evidence(catalog: ToolCatalog, query: str) -> frozenset[int]:
    """Positions of the tools outside the chosen categories that a search may still hit: those
    holding a distinctive term of the query and, in a request of several clauses, either the
    best tool of one of them (:meth:`ToolIndex.clause_leaders`) or scoring at least
    :data:`OFF_FOCUS_MIN_SHARE` of the best tool's score. "Read Ana's email. Then schedule a
    meeting with her" asks for the calendar even when the calendar is not chosen; a paragraph
    holds many words the catalog's tools rarely use ("real", "together", "project"), and a
    tool that shares one with a sentence of small talk, but is neither what a sentence is most
    about nor near the top overall, is no task of the request. Both are lexical evidence: the
    catalog index's scores, whatever embeddings or a usage history add to the ranking."""
    index = catalog.index
    docs = distinctive_terms(catalog, query).values()
    leaders = index.clause_leaders(query)
    if leaders is None:
        return frozenset(int(pos) for ids in docs for pos in ids)
    scores = index.scores(query)
    floor = OFF_FOCUS_MIN_SHARE * float(scores.max())
    return frozenset(
        int(pos) for ids in docs for pos in ids if pos in leaders or scores[pos] >= floor
    )


def _on_topic(
    catalog: ToolCatalog,
    focus: frozenset[str],
    evidence: frozenset[int],
    ok: Callable[[int], bool],
    pos: int,
) -> bool:
    """A hit in the chosen categories, or one the query names by a distinctive term."""
    if not ok(pos):
        return False
    return pos in evidence or not focus.isdisjoint(_categories(catalog, catalog.index.names[pos]))


def _categories(catalog: ToolCatalog, name: str) -> tuple[str, ...]:
    spec = catalog.get(name)
    return spec.categories if spec is not None else ()


def _check_scores(catalog: ToolCatalog, scores: np.ndarray) -> None:
    if np.shape(scores) != (len(catalog.index),):
        raise ValueError(
            f"scores must hold one value per tool of catalog.index ({len(catalog.index)}), "
            f"got shape {np.shape(scores)}"
        )


def _selectable(catalog: ToolCatalog, also: frozenset[str], pos: int) -> bool:
    name = catalog.index.names[pos]
    return catalog.selectable(name) or (name in also and name in catalog)


def _check_pinned(catalog: ToolCatalog, pinned: Sequence[str]) -> list[str]:
    """``pinned`` once each; a name the catalog does not list is refused, except, while some
    of its servers failed to load (``catalog.failed_servers``), one it knows nothing of: that may
    be a failed server's tool, left out with a warning, so the others' tools still run."""
    once = list(dict.fromkeys(pinned))
    missing = [n for n in once if n not in catalog]
    failed = ", ".join(map(repr, sorted(catalog.failed_servers)))
    # a name the catalog knows (filtered, disabled, a draft) is no failed server's tool
    absent = [n for n in missing if failed and _unheard_of(catalog, n)]
    refused = [n for n in missing if n not in absent]
    if refused:
        closest = closest_names(refused, catalog.tool_names)
        error = UNKNOWN_PINNED_ERROR.format(
            names=refused, mode=catalog.runtime_mode, closest=closest
        )
        raise ValueError(error + (FAILED_SERVERS_NOTE.format(failed=failed) if failed else ""))
    if absent:
        # attributed to free_tools' line, whichever node asked: the default filter shows it once
        warning = _pinned_server_down(catalog, absent, failed)
        warnings.warn(warning, catalog.load_warning, stacklevel=2)
    return [n for n in once if n not in absent]


def _unheard_of(catalog: ToolCatalog, name: str) -> bool:
    return catalog.status(name) is None and not catalog.is_filtered(name)


def _pinned_server_down(catalog: ToolCatalog, absent: list[str], failed: str) -> str:
    hints = []
    guessed = []
    for name in absent:
        if now := catalog.aliased(name):
            hints.append(PINNED_RENAMED_HINT.format(name=name, now=", ".join(map(repr, now))))
        elif catalog.failed_server_of(name) is None:
            guessed.append(name)
    if guessed:
        hints.append(f" Closest tools: {closest_names(guessed, catalog.tool_names)}.")
    return PINNED_SERVER_DOWN_WARNING.format(names=absent, failed=failed, hints="".join(hints))


def free_tools(catalog: ToolCatalog, pinned: Sequence[str] = ()) -> list[str]:
    """Tools visible without spending budget: ``always`` tools, special categories, ``pinned``.

    While some of the catalog's servers failed to load (``catalog.failed_servers``), a pinned
    name it knows nothing of may be one of their tools: it is left out, with a
    ``catalog.load_warning`` (``MCPLoadWarning``) naming them, so the app runs without it.

    Raises:
        ValueError: a pinned name is not a tool the catalog lists in its runtime mode (and is
            not left out as above); the message names the servers that failed to load.
    """
    return list(dict.fromkeys([*catalog.always_visible, *_check_pinned(catalog, pinned)]))
