"""Bounds on what a model's tool calls may make the package do, and echo back.

Its one reason to change: the bounds on what untrusted tool calls (and outputs) may cost.

A tool call is untrusted text: arguments nested thousands deep would raise
``RecursionError`` in ``json.loads``, ``repr`` or ``json.dumps``; a megabyte-long
name, pattern or list of categories would be fuzzy-matched, compiled and
echoed back whole. These helpers bound nesting, length and echo, so such a call
gets a short error message instead. A tool's output is untrusted too: nested
deeper than :data:`MAX_OUTPUT_DEPTH` it is cut there (:func:`cut_deep`).

Key Components:
    - :func:`too_deep`: are these arguments nested deeper than :data:`MAX_ARG_DEPTH`?
    - :func:`cut_deep`: a value with what lies deeper than a limit replaced by a mark.
    - :func:`loads_bounded`: ``json.loads`` that refuses too-deep text with ``ValueError``.
    - :func:`clip`, :func:`clip_names`, :func:`safe_repr`, :func:`echo`: bounded echoes of
      what the model sent, for error messages (never raising, whatever it sent).
    - :func:`int_too_long`, :func:`spell_long_ints`: the ints Python refuses to write in
      decimal (``str``, ``repr``, ``json.dumps`` raise ``ValueError``), written in hex.
    - :data:`STATE_INTS`: the ints a message in the graph's state may hold; :func:`state_int`,
      :func:`state_ints`: an int outside them (in a value) as its text.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "JSON_STRING",
    "CUT_MARK",
    "REPEAT_MARK",
    "STATE_INTS",
    "MAX_ARG_DEPTH",
    "MAX_ECHO_CHARS",
    "MAX_ECHO_ITEMS",
    "MAX_NAME_CHARS",
    "MAX_OUTPUT_DEPTH",
    "MAX_PATTERN_CHARS",
    "MAX_STATE_DEPTH",
    "LONG_INT_ERROR",
    "TOO_DEEP_ERROR",
    "clip",
    "clip_names",
    "containers",
    "cut_deep",
    "echo",
    "holds_long_int",
    "int_too_long",
    "loads_bounded",
    "safe_repr",
    "spell_long_ints",
    "state_int",
    "state_ints",
    "text_too_deep",
    "too_deep",
]

MAX_ARG_DEPTH = 32
"""Arguments nested deeper than this (lists and objects in lists and objects) are refused."""
MAX_ECHO_CHARS = 200
"""An error message quotes at most this many characters of one value the model sent."""
MAX_ECHO_ITEMS = 20
"""An error message names at most this many of the names the model sent."""
MAX_NAME_CHARS = 128
"""Tool names longer than this are not fuzzy-matched against the catalog (no tool is that long)."""
MAX_PATTERN_CHARS = 500
"""``search_tools`` patterns longer than this are refused (regex work grows with the length)."""
MAX_OUTPUT_DEPTH = 100
"""A tool message's content blocks, artifact or metadata nested deeper than this are cut here
(the artifact is dropped): LangGraph's checkpointer (``ormsgpack``) refuses a value nested 255
levels deep, and Python's JSON encoder recurses (past about 900 levels it raises
``RecursionError``)."""
STATE_INTS = range(-(2**63), 2**64)
"""The integers a message in the graph's state may hold: LangGraph's checkpointer (msgpack)
stores no others ("Integer exceeds 64-bit range": the run fails when it saves the message).
A call's number outside them is kept as the text the model wrote (:func:`state_int`)."""
MAX_STATE_DEPTH = 255
"""LangGraph's checkpointer (``ormsgpack``) stores no value nested this deep, so
:func:`state_ints` looks no deeper."""
CUT_MARK = "[nested deeper than {depth} levels: cut]"
"""What stands in for each list or dict :func:`cut_deep` cuts."""
REPEAT_MARK = "[shown earlier in this value: cut]"
"""What stands in for a list or dict :func:`cut_deep` meets a second time."""

TOO_DEEP_ERROR = (
    "Error: the arguments of your call to {tool!r} are nested deeper than {depth} levels, "
    "so it was not run. Call it again with flat arguments (a JSON object of plain values)."
)

LONG_INT_ERROR = (
    "Error: the arguments of your call to {tool!r} hold an integer of over {digits:,} digits "
    "({sent}), too long for a tool to read, so it was not run. Call it again with a smaller "
    "number, or the number as text where the tool takes text."
)

JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
"""A JSON string, or one never closed: then it runs to the end (so the match never fails,
and a scan with it stays linear whatever the text)."""
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_AS_PARENTHESES = str.maketrans("[{]}", "(())")


def too_deep(
    value: Any,
    limit: int = MAX_ARG_DEPTH,
    *,
    parts: Callable[[Any], Iterable[Any] | None] | None = None,
) -> bool:
    """True when ``value`` has lists, tuples or dicts nested deeper than ``limit``.

    Iterative, one level at a time, and it stops at the first level past the limit, so any
    input is cheap: a value within the limit costs about what ``json.dumps`` of it costs
    (3.5 MB of JSON-like data: 40-70 ms). A list or dict held twice in one level (a Python
    value may share them) is walked once there, so sharing costs nothing and a value that
    contains itself is too deep.

    Args:
        value: the value.
        limit: the levels allowed.
        parts: the parts of a value of another kind that nests (an object's attributes), or
            None for one that does not; such a value counts as a level too.

    >>> too_deep({"a": [[1]]}, limit=2)
    True
    >>> too_deep({"a": [1]}, limit=2)
    False
    """
    nests = (dict, list, tuple)

    def children(item: Any) -> Iterable[Any] | None:
        if isinstance(item, dict):
            return item.values()
        if isinstance(item, nests):
            return item
        return parts(item) if parts is not None else None

    level = [value] if children(value) is not None else []
    depth = 0
    while level:
        if depth >= limit:
            return True
        below: dict[int, Any] = {}
        for item in level:
            for child in children(item) or ():
                if isinstance(child, nests) or (parts is not None and parts(child) is not None):
                    below[id(child)] = child
        level, depth = list(below.values()), depth + 1
    return False


def cut_deep(value: Any, limit: int = MAX_OUTPUT_DEPTH) -> Any:
    """``value`` with each list, tuple or dict ``limit`` levels down replaced by
    :data:`CUT_MARK` (tuples become lists): what :func:`too_deep` finds too deep, cut.

    Recursion at most ``limit`` deep, whatever the value. A list, tuple or dict met a
    second time (shared, or the value containing itself) is replaced by
    :data:`REPEAT_MARK`, so the result is a tree no larger than the value.

    >>> cut_deep({"a": [[1]], "b": 2}, limit=2)
    {'a': ['[nested deeper than 2 levels: cut]'], 'b': 2}
    """
    mark = CUT_MARK.format(depth=limit)
    seen: set[int] = set()

    def cut(item: Any, depth: int) -> Any:
        if not isinstance(item, dict | list | tuple):
            return item
        if depth >= limit:
            return mark
        if id(item) in seen:
            return REPEAT_MARK
        seen.add(id(item))
        if isinstance(item, dict):
            return {k: cut(v, depth + 1) for k, v in item.items()}
        return [cut(v, depth + 1) for v in item]

    return cut(value, 0)


def containers(text: str) -> int:
    """The objects and arrays JSON ``text`` opens: its ``[`` and ``{`` outside strings.

    >>> containers('{"a": [1, {"b": "[{"}]}')
    3
    """
    code = JSON_STRING.sub("", text) if '"' in text else text
    return code.count("[") + code.count("{")


def text_too_deep(text: str, limit: int = MAX_ARG_DEPTH) -> bool:
    """True when JSON text nests brackets deeper than ``limit`` (string contents ignored).

    At C speed whatever the text: strings and other characters are taken out with
    regular expressions, then the innermost pairs of brackets are peeled off, ``limit``
    times at most; a pair left after that is nested deeper.

    >>> text_too_deep('{"a": [[1]], "b": "[[[["}', limit=2), text_too_deep('[[1]]', limit=2)
    (True, False)
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKETS.sub("", JSON_STRING.sub("", text)).translate(_AS_PARENTHESES)
    for _ in range(limit):
        peeled = brackets.replace("()", "")  # one pass: no new pair is peeled in the same pass
        if len(peeled) == len(brackets):
            return False  # no pair left (what is left never closes: not JSON)
        brackets = peeled
    return "()" in brackets


def loads_bounded(text: str, limit: int = MAX_ARG_DEPTH) -> Any:
    """``json.loads``, refusing text nested deeper than ``limit``.

    Raises:
        ValueError: not JSON, or nested too deep (``json.JSONDecodeError`` is one).
    """
    if text_too_deep(text, limit):
        raise ValueError(f"JSON nested deeper than {limit} levels")
    try:
        return json.loads(text)
    except RecursionError as exc:  # a deep value the bracket count missed: still refuse it
        raise ValueError("JSON nested too deep") from exc


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was.

    >>> clip("abcdef", 3)
    'abc... (6 characters)'
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def clip_names(names: Iterable[str], limit: int = MAX_ECHO_ITEMS) -> str:
    """Names joined with commas: at most ``limit`` of them, each clipped.

    >>> clip_names(["a", "b", "c"], 2)
    'a, b and 1 more'
    """
    items = list(names)
    shown = ", ".join(echo(n) for n in items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"


def safe_repr(value: Any, limit: int = MAX_ECHO_CHARS) -> str:
    """A bounded ``repr`` that never raises (deep values are described, not printed; an int
    too long for decimal is written in hex, :func:`spell_long_ints`).

    >>> safe_repr({"n": 2**20000}, 20)
    "{'n': 0x100000000000... (5010 characters)"
    """
    if too_deep(value):
        return f"<{type(value).__name__} nested deeper than {MAX_ARG_DEPTH} levels>"
    try:
        try:
            return clip(repr(value), limit)
        except ValueError:  # an int too long to write in decimal, somewhere in it
            return clip(repr(spell_long_ints(value)), limit)
    except Exception as exc:  # noqa: BLE001 - a repr that fails must not fail the answer
        return f"<{type(value).__name__}: repr failed with {type(exc).__name__}>"


def echo(value: Any, limit: int = MAX_ECHO_CHARS) -> str:
    """What the model sent, for a message: a string as it is, anything else as its
    :func:`safe_repr`; at most ``limit`` characters, and never raising (``str`` of an int of
    over 4,300 digits does).

    >>> echo("abc"), echo(["abc"]), echo(2**20000, 10)
    ('abc', "['abc']", '0x10000000... (5003 characters)')
    """
    return clip(value, limit) if isinstance(value, str) else safe_repr(value, limit)


def int_too_long(value: Any) -> bool:
    """True for an int Python refuses to write in decimal: over
    ``sys.get_int_max_str_digits()`` digits (4,300 by default), so ``str``, ``repr``, an
    f-string and ``json.dumps`` of it, or of a value holding it, raise ``ValueError``.

    A model makes one easily: a CodeMode program computes ``2**20000``, a Pythonic call
    writes a hex literal of 5,000 digits (Python reads any size of hex).

    >>> int_too_long(2**20000), int_too_long(10**100), int_too_long("1" * 5000)
    (True, False, False)
    """
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    digits = sys.get_int_max_str_digits()
    if digits == 0 or value.bit_length() <= 3 * digits:  # under 8**digits: fewer digits
        return False
    try:
        int.__repr__(value)
    except ValueError:
        return True
    return False


def holds_long_int(value: Any, limit: int = MAX_ARG_DEPTH) -> bool:
    """True when ``value``, or an item, key or value of a list, tuple, set or dict in it
    (``limit`` levels deep), is an int Python will not write in decimal
    (:func:`int_too_long`): a tool's run writes its input out (``str``, callbacks) and would
    raise.

    >>> holds_long_int({"n": [1, 2**20000]}), holds_long_int({"n": 10**100})
    (True, False)
    """
    level, depth = [value], 0
    while level and depth <= limit:
        below: list[Any] = []
        for item in level:
            if int_too_long(item):
                return True
            if isinstance(item, dict):
                below.extend(item.keys())
                below.extend(item.values())
            elif isinstance(item, list | tuple | set | frozenset):
                below.extend(item)
        level, depth = below, depth + 1
    return False


class _Spelled(str):
    """A value's text that is its own ``repr`` (an int's hex literal, written bare)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__str__(self)


def spell_long_ints(value: Any, limit: int = MAX_OUTPUT_DEPTH) -> Any:
    """``value`` with each int too long to write in decimal (:func:`int_too_long`) replaced by
    its hex literal: exact, and Python writes hex of any size. The literal is a ``str`` whose
    ``repr`` is itself, so ``repr`` shows ``0x1f...`` as Python would read it back and
    ``json.dumps`` a string ``"0x1f..."`` (JSON has no hex). Lists, tuples, sets and dicts
    (their keys too) are walked ``limit`` levels deep; what lies deeper is kept as it is.

    >>> spell_long_ints([1, 2**20000])[1][:8], json.dumps(spell_long_ints({"n": 2**20000}))[:12]
    ('0x100000', '{"n": "0x100')
    """

    def spell(item: Any, depth: int) -> Any:
        if int_too_long(item):
            return _Spelled(hex(item))
        if depth >= limit:
            return item
        if isinstance(item, dict):
            return {spell(k, depth + 1): spell(v, depth + 1) for k, v in item.items()}
        if isinstance(item, list):
            return [spell(v, depth + 1) for v in item]
        if isinstance(item, tuple | set | frozenset):
            kind = tuple if isinstance(item, tuple) else set
            return kind(spell(v, depth + 1) for v in item)
        return item

    return spell(value, 0)


def state_int(value: int) -> int | str:
    """``value`` as a message in the graph's state may hold it: the int itself within
    :data:`STATE_INTS`, else its text (decimal, or its hex literal when Python will not write
    it in decimal, :func:`int_too_long`). Argument coercion turns the text back into the
    number for a tool's integer field.

    >>> state_int(7), state_int(2**64), state_int(2**20000)[:8]
    (7, '18446744073709551616', '0x100000')
    """
    if value in STATE_INTS:
        return value
    return hex(value) if int_too_long(value) else str(value)


def state_ints(value: Any, limit: int = MAX_STATE_DEPTH) -> Any:
    """``value`` with each int outside :data:`STATE_INTS` in it (in lists, tuples and dict
    values, ``limit`` levels deep) as its :func:`state_int` text. Only the lists, tuples and
    dicts on the way to such an int are copied; ``value`` itself, the same object, comes back
    when it holds none (the usual case: one cheap walk, nothing copied).

    >>> state_ints({"n": 5, "m": [2**64]})
    {'n': 5, 'm': ['18446744073709551616']}
    >>> plain = {"n": 5, "m": [7]}
    >>> state_ints(plain) is plain
    True
    """
    return _rewrite(value, limit) if _holds_wide_int(value, limit) else value


_NESTS = (dict, list, tuple)


def _holds_wide_int(value: Any, limit: int) -> bool:
    """True when ``value`` holds an int outside :data:`STATE_INTS` within ``limit`` levels.

    Iterative, one level at a time; a list or dict met twice (a Python value may share them,
    or hold itself) is walked once.
    """
    level, seen = [value], set()
    for _ in range(limit + 1):
        below: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is str:  # most values: skipped first
                continue
            if kind is int:
                if item not in STATE_INTS:
                    return True
            elif isinstance(item, _NESTS) and id(item) not in seen:
                seen.add(id(item))
                below.extend(item.values() if isinstance(item, dict) else item)
        if not below:
            return False
        level = below
    return False


def _rewrite(value: Any, limit: int) -> Any:
    """``value`` with each int outside :data:`STATE_INTS` as its text, copying only the lists,
    tuples and dicts that change; one met twice is rewritten once (one that holds itself
    keeps itself there)."""
    done: dict[int, Any] = {}

    def keep(item: Any, depth: int) -> Any:
        if type(item) is int:
            return state_int(item)
        if depth >= limit or not isinstance(item, _NESTS):
            return item
        if id(item) in done:
            return done[id(item)]
        done[id(item)] = item
        if isinstance(item, dict):
            pairs = [(k, v, keep(v, depth + 1)) for k, v in item.items()]
            if any(new is not v for _, v, new in pairs):
                done[id(item)] = {k: new for k, _, new in pairs}
        else:
            items = [keep(v, depth + 1) for v in item]
            if any(new is not v for new, v in zip(items, item, strict=True)):
                done[id(item)] = tuple(items) if isinstance(item, tuple) else items
        return done[id(item)]

    return keep(value, 0)
