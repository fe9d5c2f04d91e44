"""The fuzzy fallback of ``search_tools``: what a pattern that matched nothing was near.

Its one reason to change: how a pattern that matched nothing is matched approximately.

Key Components:
    - :class:`FuzzyMatcher`: a word index over tools' names and descriptions,
      answering in three tiers (substring, words, characters) with bounded work.

:meth:`ToolIndex.regex_search <langgraph_toolbudget.core.search.ToolIndex.regex_search>`
falls back to it when a regular expression matches no tool.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache, partial

import numpy as np
from rapidfuzz import fuzz, process

from langgraph_toolbudget.core.terms import MAX_CACHED_TEXT, _split_words

__all__ = ["MAX_FUZZY_WORDS", "WORD_SCORES_CACHE_SIZE", "FuzzyMatcher"]

MAX_FUZZY_WORDS = 16
"""The fuzzy fallback considers at most this many distinct words of a pattern."""

WORD_SCORES_CACHE_SIZE = 256
"""Pattern words whose per-tool scores each matcher caches (least recently used
dropped first): one float per tool each, so at most 2 MiB for 1,000 tools.
Words over :data:`~langgraph_toolbudget.core.terms.MAX_CACHED_TEXT` characters
are scored uncached."""


class FuzzyMatcher:
    """Fuzzy matches of a free-text pattern against tools, best first.

    Args:
        names: the tool names, in index order.
        descriptions: the tool descriptions, in the same order.
    """

    def __init__(self, names: Sequence[str], descriptions: Sequence[str]) -> None:
        self._size = len(names)
        self._name_words = [" ".join(_split_words(name)) for name in names]
        self._haystacks = [
            f"{name_words} {' '.join(_split_words(description))}"
            for name_words, description in zip(self._name_words, descriptions, strict=True)
        ]
        postings: dict[str, list[int]] = {}
        for i, haystack in enumerate(self._haystacks):
            for word in dict.fromkeys(haystack.split()):
                postings.setdefault(word, []).append(i)
        by_initial: dict[str, list[str]] = {}
        for word in postings:
            by_initial.setdefault(word[0], []).append(word)
        self._postings = {w: np.asarray(ids, dtype=np.int64) for w, ids in postings.items()}
        self._vocab = list(postings)
        self._by_initial = by_initial
        # Over the word index, not `self`: no reference cycle, freed with the matcher.
        self._word_scores_cached = lru_cache(maxsize=WORD_SCORES_CACHE_SIZE)(
            partial(_score_word, self._postings, self._vocab, self._by_initial, self._size)
        )

    def search(self, query: str, *, limit: int) -> list[int]:
        """Positions of the tools closest to ``query``, best first, at most ``limit``.

        Tiers, each outranking the next: the query as a substring of the name
        or description; the query's words matching the tool's words (exactly,
        by prefix or abbreviation, or by spelling); the whole query's character
        similarity to the name.

        The work is bounded: each distinct query word is scored once against
        the vocabulary (not against every tool), at most
        :data:`MAX_FUZZY_WORDS` distinct words are considered, and character
        similarity runs in rapidfuzz, so a long pattern from a model cannot
        stall the graph.
        """
        plain = " ".join(_split_words(query))
        if not plain or not self._size:
            return []
        counts = Counter(plain.split())
        considered = list(counts)[:MAX_FUZZY_WORDS]
        weight = sum(counts[w] for w in considered)
        word_score = np.zeros(self._size, dtype=np.float64)
        for w in considered:
            word_score += self._word_scores(w) * counts[w]
        word_score /= weight
        ratio = process.cdist(
            [plain], self._name_words, scorer=fuzz.ratio, score_cutoff=60, dtype=np.float64
        )[0]
        substring = len(plain) >= 3
        scored: list[tuple[float, int]] = []
        for i, name_words in enumerate(self._name_words):
            if substring and plain in self._haystacks[i]:
                score = 3.0 + (1.0 if plain in name_words else 0.0)
            elif word_score[i] >= 0.5:
                score = 1.0 + float(word_score[i])
            elif ratio[i] >= 60:
                score = float(ratio[i]) / 100.0
            else:
                continue
            scored.append((score, i))
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [i for _, i in scored[:limit]]

    def _word_scores(self, word: str) -> np.ndarray:
        """How well ``word`` matches each tool's words, for all tools at once (cached if short)."""
        if len(word) <= MAX_CACHED_TEXT:
            return self._word_scores_cached(word)
        return _score_word(self._postings, self._vocab, self._by_initial, self._size, word)


def _score_word(
    postings: Mapping[str, np.ndarray],
    vocab: list[str],
    by_initial: Mapping[str, list[str]],
    size: int,
    word: str,
) -> np.ndarray:
    """Each tool's best match of ``word``, as a read-only array.

    1 for the word itself, 0.8 for a word it prefixes or abbreviates, 0.7 for a
    spelling at least 80% alike (rapidfuzz ratio), else 0.
    """
    matches: dict[str, float] = {}
    if len(word) >= 4:
        for tw, _, _ in process.extract(
            word, vocab, scorer=fuzz.ratio, score_cutoff=80, limit=None
        ):
            matches[tw] = 0.7
    if len(word) >= 3:
        for tw in by_initial.get(word[0], ()):
            if tw.startswith(word) or _is_abbreviation(word, tw):
                matches[tw] = 0.8
    if word in postings:
        matches[word] = 1.0
    best = np.zeros(size, dtype=np.float64)
    for tw, score in matches.items():
        ids = postings[tw]
        best[ids] = np.maximum(best[ids], score)
    best.setflags(write=False)
    return best


def _is_abbreviation(short: str, word: str) -> bool:
    """``msg`` abbreviates ``message``: same first letter, letters in order."""
    if not short or short[0] != word[0] or len(short) >= len(word):
        return False
    it = iter(word)
    return all(ch in it for ch in short)
