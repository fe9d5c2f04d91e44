"""Large tool outputs: what they are, and reading, searching and querying them (pure logic).

Its one reason to change: how a large output is described, read, searched and queried.

A tool result too large for the conversation is stored whole and the model gets
a short stub instead (see :mod:`langgraph_toolbudget.execution.offload`). This
module is the part that needs no LangGraph: describing an output (text or JSON,
its top-level keys or length, a preview), and the three ways the model reads
it back, each bounded and each answering bad input with an :class:`OutputError`
whose message tells the model what to do.

Key Components:
    - :func:`output_text`: the text of a tool message's content as one string;
      :func:`media_blocks`, the image, audio, video and file blocks it leaves out.
    - :func:`describe_output`: an :class:`OutputInfo` (kind, size, shape, preview), in calls
      of bounded length; an output over :data:`DESCRIBE_CHARS` is described from its start,
      and says so.
    - :func:`read_range`: a character range; :func:`read_limit`, the most one read returns
      under an answer limit.
    - :func:`search_output`: regex matches (RE2, linear time) with context lines,
      the pattern capped and the scan stopped at a deadline; with ``max_chars``, cut to
      fit one answer (:func:`search_answer`).
    - :func:`query_json`: a jq expression over a JSON output (the ``jq`` package), run
      in a worker process without environment or files, under a time and memory limit
      (:mod:`langgraph_toolbudget.core.jq_sandbox`).
"""

from __future__ import annotations

import functools
import json
import re
import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import re2

try:  # a dependency of langsmith, so nearly always there; json is the fallback
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None  # type: ignore[assignment]

from langgraph_toolbudget.core.jq_sandbox import (
    JQ_MEMORY_MB,
    JQ_TIMEOUT_S,
    MAX_JQ_WORKERS,
    MAX_RESULT_CHARS,
    JqFailed,
    JqStopped,
    run_jq,
)
from langgraph_toolbudget.core.limits import MAX_PATTERN_CHARS, clip, safe_repr
from langgraph_toolbudget.core.media import is_media
from langgraph_toolbudget.core.search import INVALID_PATTERN_ERROR, _compile_pattern, _reason
from langgraph_toolbudget.core.tokens import CHARS_PER_TOKEN

__all__ = [
    "CUT_VALUE",
    "DESCRIBE_CHARS",
    "JQ_MISSING_ERROR",
    "MAX_MATCHES",
    "PARSE_CHARS",
    "OutputError",
    "OutputInfo",
    "describe_output",
    "estimate_tokens",
    "jq_available",
    "media_blocks",
    "output_text",
    "query_json",
    "read_limit",
    "read_range",
    "search_answer",
    "search_output",
]

READ_TOOL, SEARCH_TOOL = "read_large_output", "search_large_output"
"""The output tools the answers' advice names (only while on: the ``tools`` arguments)."""
MAX_MATCHES = 20
"""``search_large_output`` reports at most this many matches."""
MAX_CONTEXT_LINES = 10
"""``context_lines`` is clipped to this."""
LINE_CLIP = 240
"""Characters of one line shown in a preview or around a match."""
PREVIEW_LINES = 8
PREVIEW_CHARS = 800
PARSE_CHARS = 100_000
"""An output up to this long is parsed in one call (orjson), which no other thread can
interrupt: about 12 ms a MB, but the many arrays and objects a MB can hold (up to 300,000)
start Python's full cycle collection in the call (measured: 1 MB of small records held an
event loop in another thread 110-145 ms, 0.5 MB of empty arrays 160-185 ms). No call that
reads a longer one reads more than this many characters (:func:`_read_head`)."""
DESCRIBE_CHARS = 2_000_000
"""An output longer than :data:`PARSE_CHARS` and up to this long is read value by value to
the same description (:func:`_read_head`); a longer one is described from its first this
many characters (its JSON read as far as they go; a text's lines are still all counted)."""
SCAN_CHARS = 1 << 20
"""A long output is scanned (its lines counted, its end checked) this many characters a call,
so a thread that describes it lets the others run between calls."""
SKELETON_DEPTH, SKELETON_KEYS, SKELETON_ITEMS = 4, 10, 2
""":func:`_skeleton` shows a container's content above this depth (below, its size), its first
this many keys of an object and items of an array."""
SKELETON_CHARS = 80
""":func:`_skeleton` shows a string's first this many characters."""
READ_HEADER_ROOM = 200
"""Characters of a ``read_large_output`` answer kept for its header (the handle, the range,
where the next read starts: about 150 at most), so header and characters fit the limit."""
MIN_READ_CHARS = 100
"""``read_large_output`` returns at least this many characters a call, however low the limit."""
MAX_JQ_RESULTS = 1000
"""``query_large_output`` stops after this many jq results."""
SEARCH_SECONDS = 5.0
"""``search_large_output`` stops scanning after this long and says how far it got. RE2 is
linear in the text, but its cost per character grows with the compiled pattern (``a{1000}b``
over 5 MB of ``a``: 55 s unbounded), so the scan goes in slices checked against this deadline."""
SLICE_WORK = 20_000_000
"""Characters x pattern instructions searched in one RE2 call: a line longer than
``SLICE_WORK / program size`` (at least :data:`MIN_SLICE`) is searched in slices. Measured:
one call takes at most about 0.2 s (``a{1000}b``: 19,900 characters a slice; the largest
program RE2 accepts here, ``.{1000}`` x 12, 96,005 instructions: 3,072 characters, 0.1 s)."""
MIN_SLICE = 1_024
SLICE_OVERLAP = 2_048
"""Slices of a long line overlap by this much, so a match across a slice edge is still found
(a match longer than this across an edge is missed)."""

JQ_MISSING_ERROR = (
    "query_large_output needs the `jq` package: pip install 'langgraph-toolbudget[offload]' "
    "(or pip install jq), or turn the tool off with enabled_builtins={'deny': "
    "['query_large_output']}."
)
BAD_RANGE_ERROR = (
    "Error: bad range start={start}, length={length} for output {handle!r} of {chars} "
    "characters. start must be an integer from 0 to {last}; length a positive integer "
    "(at most {limit} per call)."
)
NOT_JSON_ERROR = "Error: output {handle!r} is text, not JSON, so jq cannot query it. {how}"
NOT_JSON_WAYS = {
    SEARCH_TOOL: "search_large_output(handle, pattern)",
    READ_TOOL: "read_large_output(handle, start, length)",
}
"""How :data:`NOT_JSON_ERROR` says to read a text output, by tool (the enabled ones only)."""
NOT_JSON_NO_WAY = (
    "No tool of this app reads a text output: if you need more of it, call the tool that made "
    "it again asking for less."
)
JQ_ERROR = (
    "Error: jq expression {expression} failed: {reason}. Check the expression against the "
    "output's shape (e.g. 'keys', '.items | length', '.items[0]', '.items[] | select(.id == 3)')."
)
JQ_TIMEOUT_ERROR = (
    "Error: jq stopped after {seconds:g} s, the time one query may take, without finishing "
    "{expression}. Ask for less: select before you map, take a part with limit(n; ...), "
    "first(...) or '.items[:100]', and give every recursion an end."
)
JQ_MEMORY_ERROR = (
    "Error: jq ran out of its {mb:,} MB of memory on {expression} (jq holds a JSON output in "
    "about 15 times its size; this one is {size}). Build smaller values: count with 'length' "
    "instead of collecting arrays, select or slice first (e.g. '.items[:100]')."
)
JQ_TOO_LARGE_ERROR = (
    "Error: the result of {expression} is {chars:,} characters, over the {limit:,} a query may "
    "return. Select a smaller part (e.g. '.items[:100]', 'keys', '.items | length'){read}."
)
JQ_OVER_LIMIT_ERROR = (
    "Error: the result of {expression} is {chars:,} characters ({shape}), over the {limit:,} "
    "one answer may hold, so it is not shown. Ask for a part of it: slice an array "
    "('.items[:50]', '.items[50:100]'), pick fields ('.items[] | {{id, name}}'), list 'keys' "
    "or count with 'length'{read}."
)
READ_WHOLE = "read the output with read_large_output(handle, start, length)"
"""The jq errors' last way out (:data:`JQ_TOO_LARGE_ERROR`, :data:`JQ_OVER_LIMIT_ERROR`), named
while ``read_large_output`` is on."""
JQ_CUT_NOTE = "\n[stopped after the first {results} results]"
JQ_BUSY_ERROR = (
    "Error: jq is busy ({workers} queries are running), so {expression} did not run. Call "
    "query_large_output again."
)
JQ_CRASH_ERROR = (
    "Error: jq stopped unexpectedly on {expression} ({detail}). Try a simpler expression{search}."
)
SEARCH_INSTEAD = ", or search_large_output(handle, pattern) instead"
EMPTY_PATTERN_ERROR = "Error: empty pattern. Pass a word or a regex, e.g. 'error|warning'."
PATTERN_ERROR = "Error: " + INVALID_PATTERN_ERROR
LONG_PATTERN_ERROR = (
    "Error: the pattern is {chars:,} characters long; at most {limit} are searched. Search for "
    "a shorter pattern: one distinctive word or phrase (e.g. 'timeout|refused')."
)
SEARCH_CUT_NOTE = (
    "{shown} of the {total:,} matching lines fit in one answer ({limit:,} characters){how}. "
    "A narrower pattern {fewer}shows the others{read}."
)
READ_AROUND = "; read_large_output(handle, start=<offset>) reads around a match"
SEARCH_STOPPED_NOTE = (
    "The search stopped after {seconds:g} s at character {at:,} of {chars:,} (line {line:,}): "
    "matches after it are not counted. A simpler pattern (fewer repetitions such as x{{1000}}) "
    "searches faster{read}."
)
READ_ON = "; read_large_output(handle, start={at}) reads on from there"


def _named(tools: Collection[str] | None, tool: str, clause: str) -> str:
    """``clause``, which advises ``tool``, if the model has that tool (``tools`` None: it has
    every output tool); else nothing, so no advice sends it to a tool it lacks."""
    return clause if tools is None or tool in tools else ""


class OutputError(ValueError):
    """A bad request for an offloaded output; the message is for the model."""


@dataclass(frozen=True)
class OutputInfo:
    """What an output is.

    Attributes:
        kind: ``"json"`` or ``"text"``.
        chars: its size in characters.
        shape: for JSON, ``"object with keys [...]"`` or ``"array of N items"``;
            for text, ``"N lines"``.
        preview: its first lines (each clipped), at most :data:`PREVIEW_CHARS`;
            for JSON its structure (:func:`_skeleton`).
        jq_examples: jq expressions that fit a JSON output's shape.
    """

    kind: str
    chars: int
    shape: str
    preview: str
    jq_examples: tuple[str, ...] = ()


def estimate_tokens(chars: int) -> int:
    """Estimated tokens of ``chars`` characters (the package's chars-per-token estimate)."""
    return round(chars / CHARS_PER_TOKEN)


def media_blocks(content: Any) -> list[dict[str, Any]]:
    """The media blocks (:func:`~langgraph_toolbudget.core.media.is_media`) of a tool
    message's content, in order."""
    if isinstance(content, str) or not isinstance(content, Sequence):
        return []
    return [b for b in content if is_media(b)]


def output_text(content: Any) -> str:
    """The text of a tool message's content as one string.

    A string stays as it is. Of a list of content blocks, media blocks (images, audio,
    video, files: :func:`~langgraph_toolbudget.core.media.is_media`) are left out, as they
    reach the model as blocks, not text; the rest, if all text, becomes their texts joined
    by newlines, anything else its JSON, so no text is lost.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        content = [b for b in content if not is_media(b)]
        if all(
            isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text") for b in content
        ):
            return "\n".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content)
    return json.dumps(content, ensure_ascii=False, default=str)


def _parse_json(text: str) -> Any:
    """The JSON object or array ``text`` holds.

    Raises:
        ValueError: ``text`` is not a JSON object or array, or nests deeper than
            the parser's stack allows (a tool's output is untrusted).
    """
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "[{":
        raise ValueError("not a JSON object or array")
    if _orjson is not None:
        try:  # several times faster than json; strict, so json.loads decides on a failure
            return _orjson.loads(text)
        except ValueError:
            pass
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise ValueError("JSON nested too deep") from exc


def _clip(line: str, limit: int = LINE_CLIP) -> str:
    return line if len(line) <= limit else line[:limit] + f"... [{len(line) - limit} more chars]"


def describe_output(text: str) -> OutputInfo:
    """The kind, size, shape and preview of an output (JSON nested too deep to parse is
    described as text).

    An output of up to :data:`PARSE_CHARS` characters is parsed in one call; one of up to
    :data:`DESCRIBE_CHARS` is read value by value (:func:`_read_head`), in calls short
    enough for other threads to run between them, to the same description. A longer one is
    described from its first :data:`DESCRIBE_CHARS` characters, so read: its JSON is what
    they hold of it, and its shape says so ("array of at least N items", keys "..." with
    more to come, "described from its first ... characters"); JSON whose last character
    does not close its first, or whose start is broken, is text (a cut or broken output).
    """
    if len(text) <= PARSE_CHARS:
        try:
            value = _parse_json(text)
        except ValueError:
            value = None
        return _described(text, value)
    try:
        value, cut = _read_head(text)
    except ValueError:
        value, cut = None, set()
    return _described(text, value, cut)


def _described(text: str, value: Any, cut: Collection[int] = ()) -> OutputInfo:
    """The :class:`OutputInfo` of ``text``, whose JSON value is ``value`` (None: text);
    ``cut``: the ids of ``value``'s containers read only in part (:func:`_read_head`)."""
    partial = id(value) in cut
    if isinstance(value, dict):
        keys = list(value)
        shown = ", ".join(json.dumps(k) for k in keys[:20])
        at_least = "at least " if partial else ""
        more = f"... ({at_least}{len(keys)} keys)" if len(keys) > 20 else ""
        more = more or ("..." if partial else "")  # more keys may follow
        listed = ", ".join(part for part in (shown, more) if part)
        kind, shape = "json", f"object with keys [{listed}]"
    elif isinstance(value, list):
        kind, shape = "json", f"array of {'at least ' if partial else ''}{len(value)} items"
    else:
        kind, shape = "text", f"{_count_lines(text)} lines"
    if partial:
        shape += f" (described from its first {DESCRIBE_CHARS:,} characters)"
    if kind == "json":  # its structure, the first items of each array: readable on one screen
        head = json.dumps(_skeleton(value, cut=cut), ensure_ascii=False, indent=1)
    else:
        head = text[: PREVIEW_CHARS * 4]
    lines = head.splitlines()[: PREVIEW_LINES * (3 if kind == "json" else 1)]
    preview = "\n".join(_clip(line) for line in lines)[:PREVIEW_CHARS]
    return OutputInfo(kind, len(text), shape, preview, _jq_examples(value))


def _count_lines(text: str) -> int:
    """The lines of ``text``, counted :data:`SCAN_CHARS` characters a call."""
    if len(text) <= SCAN_CHARS:
        return text.count("\n") + 1
    return sum(text.count("\n", at, at + SCAN_CHARS) for at in range(0, len(text), SCAN_CHARS)) + 1


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*+")
_NOT_SPACE = re.compile(r"[^ \t\n\r]")
_CLOSER = {"{": "}", "[": "]"}
_MARKED = {
    "": _SPACE,
    ",": re.compile(r"[ \t\n\r]*+(,?)[ \t\n\r]*+"),
    ":": re.compile(r"[ \t\n\r]*+(:?)[ \t\n\r]*+"),
}
_DIGITS = frozenset("0123456789")
_NUMBER_START = frozenset("-0123456789")
CUT_VALUE = "<cut: the characters described end inside this value>"
"""Stands in, in a long JSON output's description, for the value of a key that the described
characters end inside: a string, a number, or a container the skeleton does not show (one it
shows is kept as far as read)."""
_END_SLACK = 16
"""A JSON error this close to the end of the head, or an unterminated string, is the head's
end cutting a value (a number, a literal or an escape cut short), not a fault of the JSON."""
_STRING_HEAD = 2_048
"""Of a shown string longer than :data:`PARSE_CHARS`, this many of its characters are decoded:
more than the skeleton shows (:data:`SKELETON_CHARS`), as an escape is at most 12 characters
(a surrogate pair)."""


_STAND_IN: dict[str, Any] = {"[": [], "{": {}}
"""What a long output's description keeps of a value it does not show, by its first character:
an array or an object as an empty one (shared, never changed: :func:`_jq_examples` looks at
its kind), anything else as None. Keeping the values themselves would keep the head's every
object alive, and Python's cycle collector then goes over them all again and again as they
pile up."""

_SKIM_DEPTH = 4
"""A value not shown that nests at most this deep and fits :data:`PARSE_CHARS` characters is
skipped by one regex call (:func:`_skim_patterns`); a longer or deeper container is opened.
Each level makes the pattern twice as long (this one: about 9,000 characters, compiled once
in about 20 ms)."""
_WS = r"[ \t\n\r]*+"
_STRING = r'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"'
"""A JSON string as ``json`` reads it (strict: no control characters; any other character,
a lone surrogate too)."""
_STRING_BODY = re.compile(_STRING[1:-1])
_LITERAL = r"null|true|false|NaN|-?Infinity"


@functools.cache
def _skim_patterns(
    int_digits: int,
) -> tuple[re.Pattern[str], dict[str, re.Pattern[str]], re.Pattern[str]]:
    """Patterns that skip JSON without building it, as strict as ``json``. Possessive and
    atomic, they never backtrack: linear in what they read.

    Args:
        int_digits: the most digits ``json`` reads an integer of
            (``sys.get_int_max_str_digits()``; 0: no limit).

    Returns:
        A value nested at most :data:`_SKIM_DEPTH` deep; by the closer of the container
        they are in, a run of items each followed by a comma; one array item and its comma.
    """
    whole = r"(?:0|[1-9][0-9]*+)"
    fraction = r"(?:\.[0-9]++(?:[eE][-+]?[0-9]++)?|[eE][-+]?[0-9]++)"
    integer = rf"(?:0|[1-9][0-9]{{0,{int_digits - 1}}}+)(?![0-9])" if int_digits else whole
    scalar = rf"{_STRING}|-?(?:{whole}{fraction}|{integer})|{_LITERAL}"
    value = f"(?>{scalar})"
    for _ in range(_SKIM_DEPTH):
        # Each item followed by a comma and another item, or by the closer (no trailing comma).
        array = rf"\[{_WS}(?:{value}{_WS}(?:,{_WS}(?!\])|(?=\])))*+\]"
        pair = rf"{_STRING}{_WS}:{_WS}{value}"
        members = rf"\{{{_WS}(?:{pair}{_WS}(?:,{_WS}(?!\}})|(?=\}})))*+\}}"
        value = f"(?>{scalar}|{array}|{members})"
    runs = {
        "]": re.compile(rf"(?:{value}{_WS},{_WS})*+"),
        "}": re.compile(rf"(?:{_STRING}{_WS}:{_WS}{value}{_WS},{_WS})*+"),
    }
    return re.compile(value), runs, re.compile(rf"{value}{_WS},{_WS}")


class _HeadEnd(Exception):
    """The head ends inside the value being read; ``value`` is what of it was read (a
    container), or None."""

    def __init__(self, value: Any = None) -> None:
        super().__init__()
        self.value = value


def _read_head(text: str) -> tuple[Any, set[int]]:
    """The JSON object or array of ``text``, read from its first :data:`DESCRIBE_CHARS`
    characters (all of a text no longer) as far as they go, and the ids of its containers
    read only in part (none when read whole).

    No call reads more than :data:`PARSE_CHARS` characters, but the one that decodes a key
    or a number longer than that: one object, a few ms a MB. The containers
    :func:`_skeleton` shows (the first items and keys, to its depth) are read item by item:
    a shown key that comes again, to its last value (as ``json`` keeps it); a long shown
    string, to the characters shown. Every other value is skipped, checked as strictly as ``json``
    checks it but not built (:meth:`_HeadReader.skip`): whole in one call if it fits, else
    (a container too long or too deep) item by item, the items that fit a call in one run,
    a long string in pieces; it is kept as its kind only (:data:`_STAND_IN`), and counted
    only where a count is shown. So the work is linear in the head and the values left
    alive are the few the skeleton shows (JSON nested deeper than :data:`_SKIM_DEPTH` all
    through is read container by container: up to about 0.4 s a MB). Of a value the
    head's end cuts short, a container is kept as far as read, a key's other value is
    :data:`CUT_VALUE`, an array's other item is left out; the containers around it are
    marked cut.

    Raises:
        ValueError: ``text`` is not a JSON object or array: its head is no JSON's start,
            it nests deeper than ``json`` reads (``sys.getrecursionlimit()`` levels), its
            last character does not close its first (a cut or broken output), its value
            ends and more than spaces follow, or, read whole, it ends inside its value.
    """
    head = text[:DESCRIBE_CHARS]
    start = _spaced(head, 0)[1]
    first = head[start : start + 1]
    if first not in _CLOSER or _last_char(text) != _CLOSER[first]:
        raise ValueError("not a JSON object or array")
    reader = _HeadReader(head)
    try:
        value, end = reader.value(start, 0)
    except _HeadEnd as stop:
        if len(head) == len(text):
            raise ValueError("the JSON ends inside its value") from None
        return stop.value, reader.cut
    if any(
        _NOT_SPACE.search(text, at, at + SCAN_CHARS) for at in range(end, len(text), SCAN_CHARS)
    ):
        raise ValueError("more than a JSON value")
    return value, reader.cut


def _last_char(text: str) -> str:
    """The last character of ``text`` that is not a JSON space ("" for none), looked for
    from the end, at most :data:`SCAN_CHARS` characters a call."""
    end, size = len(text), 4096
    while end > 0:
        tail = text[max(0, end - size) : end].rstrip(" \t\n\r")
        if tail:
            return tail[-1]
        end, size = end - size, SCAN_CHARS
    return ""


def _matched_end(pattern: re.Pattern[str], text: str, pos: int, endpos: int) -> int:
    """Where ``pattern``, whose every part may be empty, ends its match at ``pos``."""
    found = pattern.match(text, pos, endpos)
    assert found is not None  # every part of the pattern may be empty
    return found.end()


def _spaced(text: str, pos: int, mark: str = "") -> tuple[bool, int]:
    """Whether ``mark`` ("", "," or ":") follows ``pos`` after JSON spaces, and the position
    after it and the spaces after it (after the spaces, when it does not follow). Spaces
    are skipped :data:`PARSE_CHARS` characters a call."""
    stop = pos + PARSE_CHARS
    found = _MARKED[mark].match(text, pos, stop)
    assert found is not None  # every part of the pattern may be empty
    if found.end() < stop:  # ended before ``stop``: not cut by it
        return bool(mark and found.group(1)), found.end()
    pos = _after_spaces(text, pos)
    if not mark or text[pos : pos + 1] != mark:
        return False, pos
    return True, _after_spaces(text, pos + 1)


def _after_spaces(text: str, pos: int) -> int:
    """The position after the JSON spaces at ``pos``, skipped :data:`PARSE_CHARS` a call."""
    while True:
        stop = pos + PARSE_CHARS
        pos = _matched_end(_SPACE, text, pos, stop)
        if pos < stop:
            return pos


class _HeadReader:
    """One :func:`_read_head`: the head, and the containers its end cut (by id)."""

    def __init__(self, head: str) -> None:
        self.head = head
        self.cut: set[int] = set()
        self.skim, self.runs, self.counted = _skim_patterns(sys.get_int_max_str_digits())
        self.max_depth = sys.getrecursionlimit()
        # A copy of PARSE_CHARS characters of the head, from ``window_at``, that json parses
        # containers in (:meth:`parsed`), and the characters it parsed in vain.
        self.window, self.window_at, self.wasted = "", 0, 0

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        """The value at ``pos`` (no space before it) in a place the skeleton shows, ``depth``
        deep, and where it ends."""
        if self.head[pos : pos + 1] in _CLOSER:
            return self.container(pos, depth)
        return self.scalar(pos)

    def container(self, pos: int, depth: int) -> tuple[Any, int]:
        """The object or array at ``pos``; :class:`_HeadEnd` with what was read of it (and
        of the item being read, if a container) when the head ends inside it.

        Only the items the skeleton shows are kept; of the others, an object keeps each
        key and the kind of its value (:data:`_STAND_IN`), an array their count (None each).
        """
        head = self.head
        is_object = head[pos] == "{"
        out: Any = {} if is_object else []
        closer = _CLOSER[head[pos]]
        shows = depth < SKELETON_DEPTH  # its first items; deeper, only its size
        first_keys: set[str] = set()  # the keys shown
        key: Any = None  # the key, or the index, whose value is being read
        pos = _spaced(head, pos + 1)[1]
        try:
            if head[pos : pos + 1] == closer:
                return out, pos + 1
            while True:
                if is_object:
                    name, pos = self.key(pos)
                    colon, pos = _spaced(head, pos, ":")
                    if not colon:
                        raise self._unexpected(pos, "':'")
                    key = name
                    if shows and (len(out) < SKELETON_KEYS or key in first_keys):
                        first_keys.add(key)  # a shown key repeated: its last value, as json
                        out[key], pos = self.value(pos, depth + 1)
                    else:
                        kind = head[pos : pos + 1]
                        pos = self.skip(pos, depth + 1)
                        out[key] = _STAND_IN.get(kind)
                else:
                    key = len(out)
                    if shows and len(out) < SKELETON_ITEMS:
                        item, pos = self.value(pos, depth + 1)
                    else:
                        pos = self.count_run(pos, out)
                        key = len(out)
                        item, pos = None, self.skip(pos, depth + 1)
                    out.append(item)
                key = None
                comma, pos = _spaced(head, pos, ",")
                if not comma:
                    if head[pos : pos + 1] == closer:
                        return out, pos + 1
                    raise self._unexpected(pos, f"',' or {closer!r}")
        except _HeadEnd as stop:
            # The item cut short: a container as far as read; a key's other value, marked.
            if is_object and key is not None:
                out[key] = CUT_VALUE if stop.value is None else stop.value
            elif stop.value is not None and key is not None:
                out.append(stop.value)
            self.cut.add(id(out))
            raise _HeadEnd(out) from None

    def count_run(self, pos: int, out: list[Any]) -> int:
        """Past the items from ``pos``, each followed by a comma, that fit the next
        :data:`PARSE_CHARS` characters of an array whose items are not shown (``out``),
        each counted (a None in ``out``) by a call of its own, the loop's only call."""
        head, stop, count = self.head, pos + PARSE_CHARS, 0
        match = self.counted.match
        while (found := match(head, pos, stop)) is not None:
            count, pos = count + 1, found.end()
        out.extend([None] * count)
        return _after_spaces(head, pos)  # spaces ``stop`` cut

    def scalar(self, pos: int) -> tuple[Any, int]:
        """The string, number or literal at ``pos`` in a place the skeleton shows, and where
        it ends. Of a string longer than :data:`PARSE_CHARS`, only its first characters
        (:data:`_STRING_HEAD`): all the skeleton shows of it."""
        head = self.head
        if head[pos : pos + 1] != '"':
            return self.decode(pos)
        end = self.string_end(pos)
        if end - pos <= PARSE_CHARS:
            return self.decode(pos)
        # Its escapes whole (the pattern takes none in part), so the piece decodes; a
        # surrogate pair it cuts is past the characters shown.
        first = _matched_end(_STRING_BODY, head, pos + 1, pos + 1 + _STRING_HEAD)
        return _DECODER.decode(f'"{head[pos + 1 : first]}"'), end

    def key(self, pos: int) -> tuple[str, int]:
        """The key at ``pos``, and where it ends: checked :data:`PARSE_CHARS` characters a
        call, then decoded in one."""
        if self.head[pos : pos + 1] != '"':
            raise self._unexpected(pos, "a key")
        self.string_end(pos)
        name, end = self.decode(pos)
        return name, end

    def decode(self, pos: int) -> tuple[Any, int]:
        """The value at ``pos``, parsed whole by ``json``, and where it ends."""
        try:
            value, end = _DECODER.raw_decode(self.head, pos)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(self.head) - _END_SLACK or exc.msg.startswith("Unterminated"):
                raise _HeadEnd from None
            raise ValueError(str(exc)) from None
        if end == len(self.head) and self.head[end - 1] in _DIGITS:  # its digits may go on
            raise _HeadEnd
        return value, end

    def skip(self, pos: int, depth: int) -> int:
        """Where the value at ``pos`` (``depth`` deep), not shown, ends: checked, not built.

        A value that fits one call (:meth:`whole`) is matched whole; a container that does
        not is opened and its items skipped the same way (a run of those that fit a call in
        one), with a stack, not by recursion, so a deep one costs no Python frames.
        """
        end = self.whole(pos)
        if end is not None:
            return end
        head = self.head
        closers: list[str] = []  # of the containers opened around ``pos``, innermost last
        while True:
            if end is None:  # a container too long or too deep for one call: open it
                if depth + len(closers) >= self.max_depth:
                    raise ValueError("JSON nested too deep")
                closer = _CLOSER[head[pos]]
                pos = _spaced(head, pos + 1)[1]
                if head[pos : pos + 1] != closer:
                    closers.append(closer)
                    pos = self.member(pos) if closer == "}" else pos
                    end = self.whole(pos)
                    continue
                end = pos + 1
            pos = end
            while closers:  # after an item: the next one, or its container's end
                comma, pos = _spaced(head, pos, ",")
                if comma:
                    pos = self.items(pos, closers[-1])
                    break
                if head[pos : pos + 1] != closers[-1]:
                    raise self._unexpected(pos, f"',' or {closers[-1]!r}")
                closers.pop()
                pos += 1
            if not closers:
                return pos
            end = self.whole(pos)

    def whole(self, pos: int) -> int | None:
        """Where the value at ``pos`` ends, if one call reads it: a string (in pieces), a
        number, a literal, or a container within :data:`PARSE_CHARS` characters, matched if
        it nests at most :data:`_SKIM_DEPTH` deep, else parsed (:meth:`parsed`). None for a
        container longer, broken, or that :meth:`parsed` does not try."""
        head = self.head
        stop = min(pos + PARSE_CHARS, len(head))
        found = self.skim.match(head, pos, stop)
        first = head[pos : pos + 1]
        # A number that ends near ``stop`` may go on past it ("12" of "12.5", "12e3").
        if found is not None and (first not in _NUMBER_START or found.end() < stop - 2):
            return found.end()
        if first in _CLOSER:
            return self.parsed(pos)
        if first == '"':
            return self.string_end(pos)
        return self.decode(pos)[1]

    def parsed(self, pos: int) -> int | None:
        """Where the container at ``pos`` ends, parsed by ``json`` in a window of the head
        (:data:`PARSE_CHARS` characters, copied once for the containers that follow), its
        values dropped at once; None if it goes on past the window, or is broken.

        It is not tried while the characters parsed in vain (to a window's end, by the
        containers that went on past it) outnumber those passed: so the work stays linear
        even where containers nest in one that goes on past the window, each of which would
        be parsed to the window's end again.
        """
        if self.wasted > pos:
            return None
        window_end = self.window_at + len(self.window)
        if window_end < len(self.head) and pos + PARSE_CHARS // 2 > window_end:  # little left
            self.window, self.window_at = self.head[pos : pos + PARSE_CHARS], pos
            window_end = pos + len(self.window)
        try:
            return self.window_at + _DECODER.raw_decode(self.window, pos - self.window_at)[1]
        except (ValueError, RecursionError):  # it goes on past the window, or is broken
            self.wasted += window_end - pos
            return None

    def items(self, pos: int, closer: str) -> int:
        """Where the next value starts in a container that ``closer`` closes, from ``pos``
        after a comma: past the items, each followed by a comma, that one call matches,
        then, in an object, past the next key and its colon."""
        pos = _matched_end(self.runs[closer], self.head, pos, pos + PARSE_CHARS)
        pos = _after_spaces(self.head, pos)  # (spaces the run's end cut)
        return self.member(pos) if closer == "}" else pos

    def member(self, pos: int) -> int:
        """Where the value of the key at ``pos`` starts (past the key and its colon)."""
        if self.head[pos : pos + 1] != '"':
            raise self._unexpected(pos, "a key")
        colon, pos = _spaced(self.head, self.string_end(pos), ":")
        if not colon:
            raise self._unexpected(pos, "':'")
        return pos

    def string_end(self, pos: int) -> int:
        """Where the string at ``pos`` ends, its characters checked :data:`PARSE_CHARS` a
        call."""
        head, at = self.head, pos + 1
        while True:
            stop = min(at + PARSE_CHARS, len(head))
            at = _matched_end(_STRING_BODY, head, at, stop)
            if head[at : at + 1] == '"':
                return at + 1
            if stop == len(head) or at < stop - 5:  # not an escape (6 at most) cut by ``stop``
                break
        if at >= len(head) - _END_SLACK:
            raise _HeadEnd
        raise ValueError(f"invalid character in a JSON string at character {at}")

    def _unexpected(self, pos: int, expected: str) -> Exception:
        """The head's end (:class:`_HeadEnd`) near its end (:data:`_END_SLACK`: "1." is a
        number cut short), else bad JSON."""
        if pos >= len(self.head) - _END_SLACK:
            return _HeadEnd()
        return ValueError(f"expected {expected} at character {pos}")


def _jq_examples(value: Any) -> tuple[str, ...]:
    if isinstance(value, list):
        return (".[0]", "length", ".[:5]")
    if not isinstance(value, dict):
        return ()
    array = next((k for k, v in value.items() if isinstance(v, list)), None)
    if array is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", array):
        return ("keys",)
    return ("keys", f".{array} | length", f".{array}[0]")


def _skeleton(value: Any, depth: int = 0, *, cut: Collection[int] = ()) -> Any:
    """A small copy of a JSON value: 2 items per array, 10 keys per object, short strings.

    ``cut``: the ids of containers read only in part (:func:`_read_head`): their counts are
    "at least", and one whose every read item is shown says more may follow.
    """
    at_least = "at least " if id(value) in cut else ""
    if isinstance(value, dict):
        if depth >= SKELETON_DEPTH:
            return f"{{... {at_least}{len(value)} keys}}"
        items = list(value.items())
        out = {k: _skeleton(v, depth + 1, cut=cut) for k, v in items[:SKELETON_KEYS]}
        if len(items) > SKELETON_KEYS:
            out["..."] = f"{at_least}{len(items) - SKELETON_KEYS} more keys"
        elif at_least:
            out["..."] = "more keys may follow"
        return out
    if isinstance(value, list):
        if depth >= SKELETON_DEPTH:
            return f"[... {at_least}{len(value)} items]"
        shown = [_skeleton(v, depth + 1, cut=cut) for v in value[:SKELETON_ITEMS]]
        if len(value) > SKELETON_ITEMS:
            return [*shown, f"... {at_least}{len(value) - SKELETON_ITEMS} more items"]
        return shown + (["... more items may follow"] if at_least else [])
    if isinstance(value, str) and len(value) > SKELETON_CHARS:
        return value[:SKELETON_CHARS] + "..."
    return value


def read_range(text: str, handle: str, start: Any, length: Any, limit: int) -> tuple[str, int]:
    """Characters ``[start, start + length)`` of ``text``, ``length`` clipped to ``limit``.

    Returns:
        The characters, and where the next read starts (``len(text)`` at the end).

    Raises:
        OutputError: ``start`` or ``length`` not integers in range.
    """
    ok = (
        isinstance(start, int)
        and not isinstance(start, bool)
        and isinstance(length, int)
        and not isinstance(length, bool)
        and 0 <= start < max(len(text), 1)
        and length > 0
    )
    if not ok:
        raise OutputError(
            BAD_RANGE_ERROR.format(
                start=safe_repr(start),
                length=safe_repr(length),
                handle=handle,
                chars=len(text),
                last=max(len(text) - 1, 0),
                limit=limit,
            )
        )
    end = min(start + min(length, limit), len(text))
    return text[start:end], end


def read_limit(limit: int) -> int:
    """The most characters one ``read_large_output`` call returns when an answer may hold
    ``limit`` characters: the limit less :data:`READ_HEADER_ROOM` for the answer's header, and
    at least :data:`MIN_READ_CHARS`."""
    return max(limit - READ_HEADER_ROOM, MIN_READ_CHARS)


def _line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def search_output(
    text: str,
    pattern: Any,
    context_lines: Any = 2,
    *,
    seconds: float = SEARCH_SECONDS,
    max_chars: int | None = None,
    tools: Collection[str] | None = None,
) -> dict[str, Any]:
    """Regex matches in ``text`` with ``context_lines`` lines around each, bounded.

    The pattern is RE2 (linear time: no pattern can make the search blow up), with
    the smart case of ``search_tools``, at most
    :data:`~langgraph_toolbudget.core.limits.MAX_PATTERN_CHARS` characters. At most
    :data:`MAX_MATCHES` matches are reported (``total`` counts every matching line); long
    lines are clipped around the match. The scan stops after ``seconds``: then
    ``complete`` is false and ``note`` says how far it got. With ``max_chars``, the
    answer (:func:`search_answer`) is cut to fit it: fewer matches, then only each
    matching line, then only line numbers and offsets, and ``note`` says so. ``tools``:
    the output tools the model has; ``note`` advises ``read_large_output`` only if among
    them (None: it is).

    Raises:
        OutputError: an empty, too long, invalid or unsupported pattern.
    """
    if not isinstance(pattern, str) or not pattern.strip():
        raise OutputError(EMPTY_PATTERN_ERROR)
    if len(pattern) > MAX_PATTERN_CHARS:
        raise OutputError(LONG_PATTERN_ERROR.format(chars=len(pattern), limit=MAX_PATTERN_CHARS))
    try:
        compiled = _compile_pattern(pattern)
    except re2.error as exc:
        raise OutputError(PATTERN_ERROR.format(pattern=pattern, reason=_reason(exc))) from None
    if isinstance(context_lines, bool) or not isinstance(context_lines, int):
        context_lines = 2
    context = max(0, min(context_lines, MAX_CONTEXT_LINES))
    slice_chars = max(MIN_SLICE, SLICE_WORK // max(int(compiled.programsize), 1))
    deadline = time.monotonic() + seconds
    starts = _line_starts(text)
    hits: list[tuple[int, int]] = []  # (line index, offset in the line) of the shown matches
    total = 0
    stopped: tuple[int, int] | None = None  # (character, line) where the deadline stopped it
    for number, begin in enumerate(starts):
        end = starts[number + 1] - 1 if number + 1 < len(starts) else len(text)
        if time.monotonic() > deadline:
            stopped = (begin, number + 1)
            break
        offset, cut_at = _search_line(compiled, text, begin, end, slice_chars, deadline)
        if cut_at is not None:
            stopped = (cut_at, number + 1)
            break
        if offset is None:
            continue
        total += 1
        if len(hits) < MAX_MATCHES:
            hits.append((number, offset - begin))
    note = ""
    if stopped is not None:
        at, line = stopped
        read = _named(tools, READ_TOOL, READ_ON.format(at=at))
        note = SEARCH_STOPPED_NOTE.format(
            seconds=seconds, at=at, chars=len(text), line=line, read=read
        )
    matches = [_match(text, starts, number, at, context) for number, at in hits]
    found = _found(pattern, total, matches, stopped is not None, note)
    if max_chars is None or len(search_answer(found)) <= max_chars:
        return found
    # Too long for one answer: the most matches that fit, with less and less around them.
    levels = [
        (matches, ""),
        ([_match(text, starts, n, at, 0) for n, at in hits], ", each with its line only"),
        ([{"line": n + 1, "offset": starts[n] + at} for n, at in hits], ", without context"),
    ]
    fewer = "or fewer context_lines " if context else ""
    read = _named(tools, READ_TOOL, READ_AROUND)
    # Every match with less around it first (each offset lets the model read there), then
    # the first matches with the most around them that fit.
    tries = [(shown, how, len(shown)) for shown, how in levels]
    tries += [(shown, how, n) for shown, how in levels for n in range(len(shown) - 1, 0, -1)]
    for shown, how, count in tries:
        cut = SEARCH_CUT_NOTE.format(
            shown=count, total=total, limit=max_chars, how=how, fewer=fewer, read=read
        )
        fit = _found(pattern, total, shown[:count], stopped is not None, _join(note, cut))
        if len(search_answer(fit)) <= max_chars:
            return fit
    cut = SEARCH_CUT_NOTE.format(
        shown=0, total=total, limit=max_chars, how="", fewer=fewer, read=read
    )
    return _found(pattern, total, [], stopped is not None, _join(note, cut))


def search_answer(found: dict[str, Any]) -> str:
    """The text of a :func:`search_output` result, as ``search_large_output`` answers it."""
    return json.dumps(found, ensure_ascii=False, indent=1)


def _join(*notes: str) -> str:
    return " ".join(n for n in notes if n)


def _found(
    pattern: str, total: int, matches: list[dict[str, Any]], stopped: bool, note: str
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "pattern": pattern,
        "total": total,
        "shown": len(matches),
        "matches": matches,
    }
    if stopped:
        found["complete"] = False
    if note:
        found["note"] = note
    return found


def _search_line(
    compiled: Any, text: str, begin: int, end: int, slice_chars: int, deadline: float
) -> tuple[int | None, int | None]:
    """The offset in ``text`` of the first match in the line ``[begin, end)`` (None: none),
    and where the deadline stopped the line's search (None: searched whole).

    A line longer than ``slice_chars`` is searched in overlapping slices, the deadline
    checked between them, so no single RE2 call runs long.
    """
    if end - begin <= slice_chars:
        found = compiled.search(text[begin:end])
        return (None if found is None else begin + found.start()), None
    pos = begin
    while pos < end:
        if pos > begin and time.monotonic() > deadline:
            return None, pos
        found_at = _search_slice(compiled, text, begin, end, pos, slice_chars + SLICE_OVERLAP)
        if found_at is not None:
            return found_at, None
        pos += slice_chars
    return None, None


def _search_slice(
    compiled: Any, text: str, begin: int, end: int, pos: int, chars: int
) -> int | None:
    """The offset in ``text`` of the first match in ``chars`` characters from ``pos`` of the
    line ``[begin, end)``, as if the whole line were searched.

    RE2 is given one more character on each side inside the line, before ``pos`` and after
    the slice, and told to match only between them, so ``^``, ``$`` and ``\b`` see the
    line's characters at the slice's edges, not the start or end of a string. (Searching the
    whole line with ``pos``/``endpos`` would do the same, but the ``re2`` module encodes the
    whole string on every call.)
    """
    stop = min(end, pos + chars)
    lo, hi = max(begin, pos - 1), min(end, stop + 1)
    found = compiled.search(text[lo:hi], pos - lo, stop - lo)
    return None if found is None else lo + found.start()


def _match(text: str, starts: list[int], number: int, at: int, context: int) -> dict[str, Any]:
    """One reported match: line ``number`` (0-based) matching at ``at``, with its context."""
    lo, hi = max(0, number - context), min(len(starts) - 1, number + context)
    shown = []
    for other in range(lo, hi + 1):
        o_begin = starts[other]
        o_end = starts[other + 1] - 1 if other + 1 < len(starts) else len(text)
        o_line = text[o_begin:o_end]
        if other == number and len(o_line) > LINE_CLIP:
            left = max(0, at - LINE_CLIP // 2)
            o_line = ("..." if left else "") + o_line[left : left + LINE_CLIP] + "..."
        shown.append(_clip(o_line, LINE_CLIP + 10))
    begin = starts[number]
    return {"line": number + 1, "offset": begin + at, "context": "\n".join(shown)}


def jq_available() -> bool:
    """Whether the ``jq`` package can be imported."""
    try:
        import jq  # noqa: F401
    except ImportError:
        return False
    return True


_JSON_START = re.compile(r"\s*[\[{]")


def query_json(
    text: str,
    handle: str,
    expression: Any,
    *,
    kind: str | None = None,
    timeout_s: float = JQ_TIMEOUT_S,
    memory_mb: int = JQ_MEMORY_MB,
    max_chars: int | None = None,
    tools: Collection[str] | None = None,
) -> tuple[str, bool]:
    """The results of a jq expression over a JSON output, as JSON text.

    One result is given as itself; several as a JSON array. Evaluation stops
    after :data:`MAX_JQ_RESULTS` results (then the answer ends with :data:`JQ_CUT_NOTE`).
    jq runs in a worker process with no environment (``$ENV`` is ``{}``), no files,
    ``timeout_s`` seconds and ``memory_mb`` MB
    (:func:`~langgraph_toolbudget.core.jq_sandbox.run_jq`).

    Args:
        text: the output.
        handle: its handle (named in errors).
        expression: the model's jq expression.
        kind: ``"json"`` or ``"text"`` when known (as stored); else the text's first
            character decides, and jq itself reports JSON it cannot parse.
        timeout_s: the query's time limit.
        memory_mb: the query's memory limit.
        max_chars: the most characters the answer may hold (None: no bound but the
            worker's :data:`~langgraph_toolbudget.core.jq_sandbox.MAX_RESULT_CHARS`).
        tools: the output tools the model has: an error advises ``read_large_output`` or
            ``search_large_output`` only if among them (None: both are).

    Returns:
        The answer (the JSON text, with :data:`JQ_CUT_NOTE` when results were cut), and
        whether results were cut at :data:`MAX_JQ_RESULTS`.

    Raises:
        OutputError: the output is not JSON, or the expression is empty, fails, was
            stopped by a limit, or gave more than ``max_chars`` characters (the message
            says which and what to do).
        ImportError: the ``jq`` package is missing (names the extra to install).
    """
    if not jq_available():
        raise ImportError(JQ_MISSING_ERROR)
    if kind == "text" or (kind is None and not _JSON_START.match(text)):
        ways = [w for tool, w in NOT_JSON_WAYS.items() if tools is None or tool in tools]
        how = f"Use {' or '.join(ways)}." if ways else NOT_JSON_NO_WAY
        raise OutputError(NOT_JSON_ERROR.format(handle=handle, how=how))
    shown = safe_repr(expression)
    if not isinstance(expression, str) or not expression.strip():
        reason = "empty expression" if isinstance(expression, str | None) else "not a string"
        raise OutputError(JQ_ERROR.format(expression=shown, reason=reason))
    try:
        result = run_jq(
            text, expression, timeout_s=timeout_s, memory_mb=memory_mb, max_results=MAX_JQ_RESULTS
        )
    except JqFailed as exc:
        raise OutputError(JQ_ERROR.format(expression=shown, reason=clip(str(exc), 500))) from None
    except JqStopped as exc:
        raise OutputError(_stopped(exc, shown, len(text), timeout_s, memory_mb, tools)) from None
    answer = result.text + (JQ_CUT_NOTE.format(results=MAX_JQ_RESULTS) if result.cut else "")
    if max_chars is not None and len(answer) > max_chars:
        info = describe_output(result.text)
        shape = f"JSON, {info.shape}" if info.kind == "json" else "JSON"
        raise OutputError(
            JQ_OVER_LIMIT_ERROR.format(
                expression=shown,
                chars=len(answer),
                shape=shape,
                limit=max_chars,
                read=_named(tools, READ_TOOL, f"; or {READ_WHOLE}"),
            )
        )
    return answer, result.cut


def _stopped(
    exc: JqStopped,
    expression: str,
    chars: int,
    timeout_s: float,
    mb: int,
    tools: Collection[str] | None = None,
) -> str:
    """The model's message for a query its limits stopped (advising only ``tools``)."""
    if exc.why == "timeout":
        return JQ_TIMEOUT_ERROR.format(seconds=timeout_s, expression=expression)
    if exc.why == "memory":
        size = f"{chars / 1e6:.1f} MB" if chars >= 100_000 else f"{chars:,} characters"
        return JQ_MEMORY_ERROR.format(mb=mb, expression=expression, size=size)
    if exc.why == "too_large":
        chars_out = int(exc.detail) if exc.detail.isdigit() else MAX_RESULT_CHARS + 1
        return JQ_TOO_LARGE_ERROR.format(
            expression=expression,
            chars=chars_out,
            limit=MAX_RESULT_CHARS,
            read=_named(tools, READ_TOOL, f", or {READ_WHOLE}"),
        )
    if exc.why == "busy":
        return JQ_BUSY_ERROR.format(workers=MAX_JQ_WORKERS, expression=expression)
    search = _named(tools, SEARCH_TOOL, SEARCH_INSTEAD)
    return JQ_CRASH_ERROR.format(expression=expression, detail=exc.detail, search=search)
