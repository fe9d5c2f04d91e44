"""Search terms: how a text (a tool's name and description, a user's request) is split.

Its one reason to change: how text is split into search terms.

Key Components:
    - :func:`tokenize`: text -> stemmed, lower-case search terms, stop words dropped.
    - :func:`clauses`: a request -> the parts that ask for separate things.
    - :func:`ranked_text`: the part of a very long request that is ranked.
    - :func:`stop_word_pairs`: the word pairs a stop word stands in, which tell
      ``zoom_in`` from ``zoom_out``.

Both the BM25 index (:mod:`langgraph_toolbudget.core.search`) and the hashing
embedding read text through these, so a word means the same to both.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = [
    "MAX_CACHED_TEXT",
    "MAX_REQUEST_CHARS",
    "MIN_CLAUSE_TERMS",
    "SPLIT_CACHE_SIZE",
    "clauses",
    "ranked_text",
    "stop_word_pairs",
    "tokenize",
]

_STOPWORDS_TEXT = """
a an and are as at be by can could do does for from get give has have how i in is it its me my
of on or please should so some that the their them then there these this to us want was we what
when where which who will with would you your
s t d m ll re ve not
hey hi hello thank thanks really just maybe lot bit sure able know let like love great quick
ok okay yes yeah yep alright
need needs help trying try working going look looking something thing things stuff way well
all any each one many more much very about into out up also next
"""
# The second line: what is left of contractions ("what's", "don't", "we'll") once the
# apostrophe splits them, and "not": a word many tool descriptions hold, no request's intent.
# The last four: how people frame a request in conversation (greetings, hedges, "I need
# help with", quantifiers, "next"). A long request holds many of them; a tool that holds them
# too (a description written as instructions to the model: "you need to use this first for
# any task, one step at a time") matched every such request on them alone. Chosen on
# MCP-Bench's dev split (benchmarks/mcp_bench.py, see docs/benchmarks.md). The fourth line,
# confirmations: "ok" after the model asks names no tool, and once recorded with the tools
# that turn ran (ToolUsage) it moved the next "ok" of any thread to those tools.
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
# A camelCase boundary: after the letter or digit ending a word (kept through `\1\2 `).
# Matching that character, rather than looking behind for it, is ~1.5x faster on long texts.
_CAMEL = re.compile(r"([a-z0-9])(?=[A-Z])|([A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[a-z0-9]+")
# Any script: letters, digits and the marks some scripts write their vowels with (Devanagari,
# Thai...), which ``\w`` alone would split words at.
_MARKS = "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0900-\u0dff"
_SPACELESS = (  # scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, CJK
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
)
# Unicode's format characters (category Cf): invisible, and inside a word ("fore\u00adcast"
# with a soft hyphen from a hyphenated web page, a zero-width space, a word joiner, a BOM) they
# would split it in two. All of them up to Unicode 15.1 but the zero-width joiner and
# non-joiner (U+200D, U+200C), which some scripts (Persian, Indic, emoji sequences) need.
_FORMAT_CHARS = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]+"
)
_WORD_ANY = re.compile(f"(?:[^\\W_]|[{_MARKS}{_SPACELESS}])+")
# A run of those is one "word" to ``\w``: it is split into overlapping character pairs instead.
_SPACELESS_RUN = re.compile(f"([{_SPACELESS}]+)")
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
    if len(word) > 4 and word.endswith("ie"):
        # "movie" joins "movies" (stemmed "movy" above), as "query" joins "queries".
        return word[:-2] + "y"
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


MAX_CACHED_TEXT = 64
"""Texts up to this many characters (tool names, words) have their word split cached."""

SPLIT_CACHE_SIZE = 8192
"""Identifier splits cached (least recently used dropped first): tool, argument and
category names, ASCII, at most :data:`MAX_CACHED_TEXT` characters and no space, so an entry
takes a few hundred bytes and the cache stays near 2 MiB when full. Texts with spaces
(user messages, descriptions) are not kept here: they repeat within a turn, not across
turns, and each would stay in the cache until 8,192 newer ones pushed it out (see
:data:`RECENT_TEXTS`)."""

RECENT_TEXTS = 16
"""Longer texts (a request, its clauses, tool descriptions) up to :data:`MAX_REQUEST_CHARS`
characters, and the line :func:`ranked_text` puts between a long request's halves: the last
this many split are kept (about 5 MB at most, for texts of two-letter words). One turn splits
its request several times (intent, selection, search, stop-word pairs, each clause); each time
after the first is a lookup (a quarter off a turn on MCP-Bench's paragraph-long requests)."""


def _split_words_uncached(text: str) -> tuple[str, ...]:
    if not text.isascii():
        text = _FORMAT_CHARS.sub("", text)
    text = _CAMEL.sub(r"\1\2 ", text)
    if text.isascii():
        return tuple(_WORD.findall(text.lower()))
    return tuple(_unicode_words(text))


def _unicode_words(text: str) -> list[str]:
    """Words of any script: case-folded, accents stripped, space-less scripts as bigrams."""
    words: list[str] = []
    for word in _WORD_ANY.findall(unicodedata.normalize("NFKC", text).casefold()):
        if word.isascii():
            words.append(word)
            continue
        for i, part in enumerate(_SPACELESS_RUN.split(word)):
            if not part:
                continue
            if i % 2:  # a space-less run: its character pairs ("東京の" -> 東京, 京の)
                words += [part[j : j + 2] for j in range(max(1, len(part) - 1))]
            else:  # "Qué" -> "que": requests are often typed without their accents
                words.append(_strip_accents(part))
    return words


def _strip_accents(word: str) -> str:
    """Latin, Greek and Cyrillic letters without their accents; other scripts' marks kept."""
    if word.isascii():
        return word
    kept: list[str] = []
    for c in unicodedata.normalize("NFKD", word):
        if not (kept and kept[-1] < "\u0530" and unicodedata.combining(c)):
            kept.append(c)
    return unicodedata.normalize("NFC", "".join(kept))


_split_short_words = lru_cache(maxsize=SPLIT_CACHE_SIZE)(_split_words_uncached)
_split_recent_texts = lru_cache(maxsize=RECENT_TEXTS)(_split_words_uncached)


def _split_words(text: str) -> tuple[str, ...]:
    """The words of a text: camelCase split, case-folded, accents stripped (any script).

    Identifiers are cached (ASCII texts of at most :data:`MAX_CACHED_TEXT`
    characters without a space: tool, argument and category names, single
    words), at most :data:`SPLIT_CACHE_SIZE` of them; their number is bounded
    by the catalogs. Other texts (user messages, descriptions, a request in a
    script written without spaces) are kept only while recent, the last
    :data:`RECENT_TEXTS` of them: each distinct message would otherwise stay in
    the cache until :data:`SPLIT_CACHE_SIZE` newer ones pushed it out. A text
    longer than any request is ranked on is split each time.
    """
    if len(text) <= MAX_CACHED_TEXT and " " not in text and text.isascii():
        return _split_short_words(text)
    if len(text) <= MAX_REQUEST_CHARS + 1:  # + 1: the line between a cut request's halves
        return _split_recent_texts(text)
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


MAX_REQUEST_CHARS = 20_000
"""A request is ranked on at most this many of its characters (:func:`ranked_text`). Reading
a text into terms is linear in its length, ~0.5 microseconds a character: a client's 8 MB
message held the event loop for 6 s in one turn. Requests of the benchmarks hold at most
2,200 characters (MCP-Bench's tasks): they rank as without the cap."""


def ranked_text(text: str) -> str:
    """The part of a request that is ranked: all of it up to :data:`MAX_REQUEST_CHARS`
    characters, else its first and last halves (people write what they ask before or after
    what they paste: "why does this fail?" and a log, or a document and "summarise this").

    >>> ranked_text("Find flights to Rome") == "Find flights to Rome"
    True
    """
    if len(text) <= MAX_REQUEST_CHARS:
        return text
    half = MAX_REQUEST_CHARS // 2
    return f"{text[:half]}\n{text[-half:]}"


def tokenize(text: str) -> list[str]:
    """Split text into stemmed, lower-case search terms.

    camelCase and snake_case are split into words and common stop words are
    dropped, so ``getWeather`` and ``get_weather`` both give ``["weather"]``.
    """
    return [_stem(w) for w in _split_words(text) if w not in _STOPWORDS]


def stop_word_pairs(text: str, *, reach: int = 1) -> list[str]:
    """The pairs of a stop word and a word that is not one, at most ``reach`` words apart in
    a text, each one term (the two words in text order).

    :func:`tokenize` drops stop words, so ``zoom_in`` and ``zoom_out`` both give
    ``["zoom"]``; their pairs tell them apart. The index adds them only to tools whose
    names differ in nothing else (:class:`~langgraph_toolbudget.core.search.ToolIndex`), with
    ``reach`` 1; a request is read with a longer one, since words may come between a verb
    and its particle ("log me out", "zoom the map out"). Two stop words make no pair: "look
    up" or "get help" would bring back the framing the stop list leaves out.

    >>> stop_word_pairs("browser_zoom_out")
    ['zoom out']
    >>> stop_word_pairs("Please zoom out of the map")
    ['please zoom', 'zoom out', 'the map']
    >>> stop_word_pairs("log me out", reach=3)
    ['log me', 'log out']
    """
    words = _split_words(text)
    stems = [_stem(w) for w in words]
    stop = [w in _STOPWORDS for w in words]
    return [
        f"{stems[i]} {stems[j]}"
        for i in range(len(words))
        for j in range(i + 1, min(len(words), i + reach + 1))
        if stop[i] != stop[j]
    ]
