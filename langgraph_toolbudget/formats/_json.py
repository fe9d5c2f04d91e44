"""JSON helpers shared by the JSON-based formats (Hermes, Mistral, pure JSON).

Its one reason to change: how the formats read lenient, bounded JSON.

Strict ``json.loads`` first (fast, C); on failure ``json_repair`` fixes what
models get wrong (single quotes, trailing commas, truncated objects, comments).
Every input is bounded in size and depth before it is parsed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from json_repair import repair_json

from langgraph_toolbudget.formats.base import (
    MAX_CALL_CHARS,
    MAX_CALLS,
    MAX_DEPTH,
    MAX_REPAIR_CHARS,
)

__all__ = ["ParseFailure", "calls_from_value", "load_json", "strip_fence"]

_FENCE = re.compile(r"^\s*```[\w-]*[ \t]*\n?(.*?)\n?[ \t]*(?:```\s*)?$", re.DOTALL)
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input", "kwargs")


class ParseFailure(ValueError):
    """A tool call that cannot be read; the message is shown to the model."""


def strip_fence(text: str) -> str:
    """``text`` without a surrounding Markdown code fence (```json ... ```)."""
    match = _FENCE.match(text)
    return match.group(1) if match else text


def code_chars(text: str, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, str]]:
    """``(index, char)`` of the characters of ``text[start:stop]`` outside string literals
    (single or double quoted, backslash escapes honoured); the quotes themselves are left out."""
    quote = ""
    escaped = False
    for i in range(start, len(text) if stop is None else min(len(text), stop)):
        char = text[i]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        else:
            yield i, char


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """True when brackets nest deeper than ``limit`` outside string literals."""
    depth = 0
    for _, char in code_chars(text):
        if char in "[{(":
            depth += 1
            if depth > limit:
                return True
        elif char in "]})":
            depth -= 1
    return False


def value_too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when a parsed value nests deeper than ``limit`` (checked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def load_json(text: str) -> Any:
    """Parse JSON as models write it; raise :class:`ParseFailure` naming the problem.

    Raises:
        ParseFailure: too long, nested too deep, or not JSON even after repair.
    """
    text = strip_fence(text.strip())
    if not text:
        raise ParseFailure("the tool call is empty")
    if len(text) > MAX_CALL_CHARS:
        raise ParseFailure(f"the tool call is {len(text)} characters, over {MAX_CALL_CHARS}")
    if too_deep(text):
        raise ParseFailure(f"the arguments nest deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        return _bounded(value)
    if len(text) > MAX_REPAIR_CHARS:
        raise ParseFailure(
            f"the tool call is not valid JSON and too long to repair ({len(text)} characters, "
            f"over {MAX_REPAIR_CHARS}); send valid JSON"
        )
    try:
        value = repair_json(text, return_objects=True, skip_json_loads=True)
    except (ValueError, RecursionError, IndexError, TypeError) as exc:
        raise ParseFailure(f"invalid JSON: {exc}") from None
    if value == "" or value is None:
        raise ParseFailure(f"not JSON: {text[:80]!r}")
    return _bounded(value)


def _arguments(obj: dict[str, Any]) -> dict[str, Any]:
    for key in _ARGUMENT_KEYS:
        if key in obj:
            args = obj[key]
            break
    else:
        return {}
    if isinstance(args, str):  # arguments given as a JSON string, as the OpenAI API does
        args = load_json(args) if args.strip() else {}
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise ParseFailure(f"the arguments must be a JSON object, got {type(args).__name__}")
    return args


def _call(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ParseFailure(f"each tool call must be a JSON object, got {type(obj).__name__}")
    if isinstance(obj.get("function"), dict):  # OpenAI's {"type": "function", "function": {...}}
        obj = {**obj, **obj["function"]}
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ParseFailure('a tool call has no "name"')
    return {"name": name.strip(), "args": _arguments(obj)}


def calls_from_value(value: Any) -> list[dict[str, Any]]:
    """Calls from parsed JSON: one call object, a list of them, or ``{"tool_calls": [...]}``.

    Unknown extra keys are ignored; ``arguments`` may also be ``parameters``
    (Llama 3.1), ``args`` or a JSON string.

    Raises:
        ParseFailure: the value is not call-shaped.
    """
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ParseFailure("the list of tool calls is empty")
    if len(items) > MAX_CALLS:
        raise ParseFailure(f"{len(items)} tool calls in one reply, over {MAX_CALLS}")
    return [_call(item) for item in items]


def decode_prefix(text: str, start: int = 0) -> tuple[Any, int]:
    """The JSON value at ``text[start:]`` (after whitespace) and the index after it.

    Strict first (the value may be followed by prose); when that fails the rest
    of the text is repaired as one value (a truncated call has nothing after it).

    Raises:
        ParseFailure: see :func:`load_json`.
    """
    while start < len(text) and text[start].isspace():
        start += 1
    try:
        value, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return load_json(text[start : start + MAX_CALL_CHARS + 1]), len(text)
    if end - start > MAX_CALL_CHARS:
        raise ParseFailure(f"the tool call is {end - start} characters, over {MAX_CALL_CHARS}")
    return _bounded(value), end


def _bounded(value: Any) -> Any:
    if value_too_deep(value):
        raise ParseFailure(f"the arguments nest deeper than {MAX_DEPTH} levels")
    return value


_DECODER = json.JSONDecoder()
