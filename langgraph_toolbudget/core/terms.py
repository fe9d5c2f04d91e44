"""Search terms: how a text (a tool's name and description, a user's request) is split.

Key Components:
    - :func:`tokenize`: text -> stemmed, lower-case search terms, stop words dropped.
    - :func:`clauses`: a request -> the parts that ask for separate things.

Both the BM25 index (:mod:`langgraph_toolbudget.core.search`) and the hashing
embedding read text through these, so a word means the same to both.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["MAX_CACHED_TEXT", "MIN_CLAUSE_TERMS", "SPLIT_CACHE_SIZE", "clauses", "tokenize"]

_STOPWORDS_TEXT = """
a an and are as at be by can could do does for from get give has have how i in is it its me my
of on or please should so some that the their them then there these this to us want was we what
when where which who will with would you your
s t d m ll re ve not
"""
# The second line: what is left of contractions ("what's", "don't", "we'll") once the
# apostrophe splits them, and "not": a word many tool descriptions hold, no request's intent.
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
# A camelCase boundary: after the letter or digit ending a word (kept through `\1\2 `).
# Matching that character, rather than looking behind for it, is ~1.5x faster on long texts.
_CAMEL = re.compile(r"([a-z0-9])(?=[A-Z])|([A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[a-z0-9]+")
# Where a request moves on to another task: sentence ends, and sequencing words.
_CLAUSE_BREAK = re.compile(
    r"(?<=[.!?;])\s+|\b(?:and then|then|also|additionally|afterwards|after that|finally|"
    r"lastly|next)\b,?",
    re.IGNORECASE,
)
MIN_CLAUSE_TERMS = 2
"""A clause needs this many search terms to be ranked on its own."""


def _stem(word: str) -> str:
    # A light suffix stemmer: enough to join "issues"/"issue", "sending"/"send".
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


MAX_CACHED_TEXT = 64
"""Texts up to this many characters (tool names, words) have their word split cached."""

SPLIT_CACHE_SIZE = 8192
"""Word splits cached (least recently used dropped first). With keys of at most
:data:`MAX_CACHED_TEXT` characters an entry takes at most ~2 KiB (a key of
two-letter words), so the cache stays under ~16 MiB, and near 2 MiB for tool
names. Longer texts (user messages, descriptions) are split uncached: they rarely
repeat, and each would pin its whole text."""


def _split_words_uncached(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(_CAMEL.sub(r"\1\2 ", text).lower()))


_split_short_words = lru_cache(maxsize=SPLIT_CACHE_SIZE)(_split_words_uncached)


def _split_words(text: str) -> tuple[str, ...]:
    """The lower-case words of a text, camelCase split.

    Texts up to :data:`MAX_CACHED_TEXT` characters are cached (at most
    :data:`SPLIT_CACHE_SIZE` of them); longer ones are split each time.
    """
    if len(text) <= MAX_CACHED_TEXT:
        return _split_short_words(text)
    return _split_words_uncached(text)


def clauses(text: str) -> list[str]:
    """The parts of a request that ask for separate things, each with enough terms to rank.

    Splits at sentence ends and sequencing words (``then``, ``also``,
    ``lastly``...). A one-task query gives at most one clause.

    >>> clauses("Find flights to Rome. Then book a hotel near the station, lastly rent a car")
    ['Find flights to Rome', 'book a hotel near the station', 'rent a car']
    """
    parts = (p.strip(" ,.;") for p in _CLAUSE_BREAK.split(text) if p)
    return [p for p in parts if p and len(tokenize(p)) >= MIN_CLAUSE_TERMS]


def tokenize(text: str) -> list[str]:
    """Split text into stemmed, lower-case search terms.

    camelCase and snake_case are split into words and common stop words are
    dropped, so ``getWeather`` and ``get_weather`` both give ``["weather"]``.
    """
    return [_stem(w) for w in _split_words(text) if w not in _STOPWORDS]
