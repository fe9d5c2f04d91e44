"""Bounds on what a model's tool calls may make the package do, and echo back.

Its one reason to change: the bounds on what untrusted tool calls may cost.

A tool call is untrusted text: arguments nested thousands deep would raise
``RecursionError`` in ``json.loads``, ``repr`` or ``json.dumps``; a megabyte-long
name, pattern or list of categories would be fuzzy-matched, compiled and
echoed back whole. These helpers bound nesting, length and echo, so such a call
gets a short error message instead.

Key Components:
    - :func:`too_deep`: are these arguments nested deeper than :data:`MAX_ARG_DEPTH`?
    - :func:`loads_bounded`: ``json.loads`` that refuses too-deep text with ``ValueError``.
    - :func:`clip`, :func:`clip_names`, :func:`safe_repr`: bounded echoes of
      what the model sent, for error messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

__all__ = [
    "JSON_STRING",
    "MAX_ARG_DEPTH",
    "MAX_ECHO_CHARS",
    "MAX_ECHO_ITEMS",
    "MAX_NAME_CHARS",
    "MAX_PATTERN_CHARS",
    "TOO_DEEP_ERROR",
    "clip",
    "clip_names",
    "containers",
    "loads_bounded",
    "safe_repr",
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

TOO_DEEP_ERROR = (
    "Error: the arguments of your call to {tool!r} are nested deeper than {depth} levels, "
    "so it was not run. Call it again with flat arguments (a JSON object of plain values)."
)

JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
"""A JSON string, or one never closed: then it runs to the end (so the match never fails,
and a scan with it stays linear whatever the text)."""
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_AS_PARENTHESES = str.maketrans("[{]}", "(())")


def too_deep(value: Any, limit: int = MAX_ARG_DEPTH) -> bool:
    """True when ``value`` has lists, tuples or dicts nested deeper than ``limit``.

    Iterative, and it stops at the first path past the limit, so any input is cheap.

    >>> too_deep({"a": [[1]]}, limit=2)
    True
    >>> too_deep({"a": [1]}, limit=2)
    False
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


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
    shown = ", ".join(clip(str(n)) for n in items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"


def safe_repr(value: Any, limit: int = MAX_ECHO_CHARS) -> str:
    """A bounded ``repr`` that never raises (deep values are described, not printed)."""
    if too_deep(value):
        return f"<{type(value).__name__} nested deeper than {MAX_ARG_DEPTH} levels>"
    try:
        return clip(repr(value), limit)
    except Exception as exc:  # noqa: BLE001 - a repr that fails must not fail the answer
        return f"<{type(value).__name__}: repr failed with {type(exc).__name__}>"
