"""JSON helpers shared by the JSON-based formats (Hermes, Mistral, pure JSON).

Its one reason to change: how the formats read lenient, bounded JSON.

Strict ``json`` first (fast, C); on failure the text is read as models write JSON
(:func:`~langgraph_toolbudget.formats._lenient.read_lenient`: single quotes,
trailing commas, Python literals, comments, unquoted words), which fixes syntax
and never decides a value: a call the reply cuts off (it ends inside a string,
an object or an array, with no closing tag, end token or code fence after it)
is an error saying so, never completed.

Every input is bounded in size and depth, and the work of a reply
(:class:`ParseBudget`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from langgraph_toolbudget.core.limits import containers, text_too_deep
from langgraph_toolbudget.formats._lenient import call_int, read_lenient
from langgraph_toolbudget.formats.base import (
    MAX_CALL_CHARS,
    MAX_CALLS,
    MAX_CODE_CHARS_PER_REPLY,
    MAX_CONTAINERS_PER_REPLY,
    MAX_DEPTH,
    MAX_REPAIR_CHARS,
    MAX_REPAIR_CHARS_PER_REPLY,
    ParseFailure,
)

__all__ = [
    "CALL_ARGUMENT_KEYS",
    "ParseBudget",
    "ParseFailure",
    "calls_from_value",
    "cut_off",
    "envelope_calls",
    "load_json",
    "load_json_values",
    "read_json",
    "read_json_values",
    "unfence",
]

FENCE = "```"
_FENCE_INFO = re.compile(r"[\w-]*[ \t]*\n|json\b|JSON\b")
# whitespace, and closing brackets a model wrote too many, around one comma at most
_LEFT_OVER = re.compile(r"[\s}\]]*(?:,[\s}\]]*)?")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input", "kwargs")
CALL_ARGUMENT_KEYS = ("arguments", "parameters")
"""The keys that make a JSON object standing alone a call envelope (with ``name``)."""

# A closed string (taken out), or one never closed: its quote is kept. Linear: a string
# that never closes is matched to the end.
_STRINGS = re.compile(
    r""""[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*'|(["'])[\s\S]*""", re.DOTALL
)


@dataclass
class ParseBudget:
    """The parse work one reply may still ask for: one budget per reply, spent by its calls.

    Attributes:
        repair_chars: characters of JSON that is not strict that may still be read
            (:data:`~langgraph_toolbudget.formats.base.MAX_REPAIR_CHARS_PER_REPLY`).
        containers: JSON objects and arrays that may still be decoded
            (:data:`~langgraph_toolbudget.formats.base.MAX_CONTAINERS_PER_REPLY`).
        code_chars: characters of Pythonic code outside strings that may still be read
            (:data:`~langgraph_toolbudget.formats.base.MAX_CODE_CHARS_PER_REPLY`).
    """

    repair_chars: int = MAX_REPAIR_CHARS_PER_REPLY
    containers: int = MAX_CONTAINERS_PER_REPLY
    code_chars: int = MAX_CODE_CHARS_PER_REPLY

    def spend_repair(self, chars: int) -> None:
        """Take ``chars`` characters of repair; raise :class:`ParseFailure` past the bound."""
        if chars > self.repair_chars:
            raise ParseFailure(
                "the tool calls of this reply are not valid JSON and too long to repair "
                f"together (over {MAX_REPAIR_CHARS_PER_REPLY} characters); send valid JSON"
            )
        self.repair_chars -= chars

    def spend_containers(self, text: str) -> None:
        """Take the objects and arrays of JSON ``text``, before it is decoded; raise
        :class:`ParseFailure` past the bound."""
        count = containers(text)
        if count > self.containers:
            raise ParseFailure(
                f"the tool calls of this reply hold over {MAX_CONTAINERS_PER_REPLY} JSON "
                "objects and arrays; send fewer"
            )
        self.containers -= count

    def spend_code(self, chars: int) -> None:
        """Take ``chars`` characters of code; raise :class:`ParseFailure` past the bound."""
        if chars > self.code_chars:
            raise ParseFailure(
                f"the tool calls of this reply hold over {MAX_CODE_CHARS_PER_REPLY} characters "
                "of code outside strings; send fewer values (a long text as one string)"
            )
        self.code_chars -= chars


def cut_off(tool: str | None, where: str) -> ParseFailure:
    """The error of a call the end of the reply cut off (``where``: what it ends inside)."""
    call = f"your call to {tool!r}" if tool else "your tool call"
    return ParseFailure(
        f"{call} was cut off: the reply ends {where}; send the whole call again, shorter if needed"
    )


def unfence(text: str) -> tuple[str, bool]:
    """``text`` (stripped) without a surrounding Markdown code fence, and whether the fence
    was closed (False when there is no fence)."""
    if not text.startswith(FENCE):
        return text, False
    closed = len(text) >= 2 * len(FENCE) and text.endswith(FENCE)
    inner = text[len(FENCE) : -len(FENCE) if closed else None]
    info = _FENCE_INFO.match(inner)  # the language tag: ```json
    return inner[info.end() if info else 0 :].strip(), closed


def _bounded(value: Any, text: str) -> Any:
    """``value``, parsed strictly from ``text``, unless it nests deeper than allowed."""
    if text_too_deep(text, MAX_DEPTH):
        raise ParseFailure(f"the arguments nest deeper than {MAX_DEPTH} levels")
    return value


def _ends_inside(text: str) -> str:
    """What a text too long to scan token by token ends inside, roughly ("" if nothing)."""
    rest = _STRINGS.sub(r"\1", text)
    if '"' in rest or "'" in rest:
        return "inside a string"
    if rest.count("{") + rest.count("[") > rest.count("}") + rest.count("]"):
        return "inside an object or array"
    return ""


def _repair(window: str, budget: ParseBudget, closed: bool, tool: str | None) -> tuple[Any, int]:
    """The value at the start of ``window`` (not strict JSON), read leniently, and its length."""
    if budget.repair_chars <= 0:
        budget.spend_repair(1)  # raises: the reply's repair budget is spent
    limit = min(MAX_REPAIR_CHARS, budget.repair_chars)
    head = window[:limit]
    read = read_lenient(head, close_open=closed and len(head) == len(window))
    if read.unfinished and len(head) < len(window):
        # Longer than may be repaired: only tell a cut-off call from a broken one.
        where = _ends_inside(window)
        if len(window) > MAX_CALL_CHARS:
            raise ParseFailure(f"the tool call is over {MAX_CALL_CHARS} characters")
        if where and not closed:
            raise cut_off(tool or read.tool, where)
        if limit < MAX_REPAIR_CHARS:
            budget.spend_repair(MAX_REPAIR_CHARS)  # raises: the reply's repair budget is spent
        raise ParseFailure(
            f"the tool call is not valid JSON and too long to repair (over {MAX_REPAIR_CHARS} "
            "characters); send valid JSON"
        )
    budget.spend_repair(read.end)
    if read.unfinished and not closed:
        raise cut_off(tool or read.tool, read.unfinished)
    if read.unfinished:  # a string never closed, though the call was
        raise ParseFailure(f"a string in the tool call is never closed: {window[:80]!r}")
    return read.value, read.end


def read_json(
    text: str,
    budget: ParseBudget,
    *,
    start: int = 0,
    closed: bool,
    tool: str | None = None,
) -> tuple[Any, int]:
    """The JSON value at ``text[start:]`` (after whitespace) and the index after it.

    Strict first (the value may be followed by prose); else the value is repaired,
    within ``budget``. The caller has charged the containers of ``text`` to ``budget``
    (:meth:`ParseBudget.spend_containers`).

    Args:
        text: the text the value starts in.
        budget: the reply's parse budget.
        start: where to start.
        closed: the text is followed by a closing marker (a tag, an end token, a
            closing code fence); without one, a value the text ends inside is a
            call cut off by the end of the reply.
        tool: the call's name when known before the JSON (for the error).

    Raises:
        ParseFailure: empty, cut off, too long, nested too deep, or not JSON even
            after repair.
    """
    while start < len(text) and text[start].isspace():
        start += 1
    if start == len(text):
        if not closed:
            raise cut_off(tool, "before the call's JSON")
        raise ParseFailure("the tool call is empty")
    try:
        value, end = _DECODER.raw_decode(text, start)
        # An integer outside 64 bits has at least 19 digits: only then is the value read again
        # with each number through `call_int` (the plain decoder reads numbers in C, several
        # times faster). One of over 4,300 digits fails both, and the repair refuses it.
        if _has_long_number(text[start:end]):
            value, end = _INT_CHECKING_DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    else:
        if end - start > MAX_CALL_CHARS:
            raise ParseFailure(f"the tool call is {end - start} characters, over {MAX_CALL_CHARS}")
        return _bounded(value, text[start:end]), end
    value, length = _repair(text[start : start + MAX_CALL_CHARS + 1], budget, closed, tool)
    return value, start + length  # its depth was checked as it was read


def load_json(
    text: str, budget: ParseBudget, *, closed: bool = True, tool: str | None = None
) -> Any:
    """The JSON value ``text`` holds (a surrounding code fence taken off); see :func:`read_json`.

    Raises:
        ParseFailure: see :func:`load_json_values`; or ``text`` holds several values.
    """
    values = load_json_values(text, budget, closed=closed, tool=tool)
    if len(values) > 1:
        raise ParseFailure(f"{len(values)} JSON values where one goes; send one")
    return values[0]


def read_json_values(
    text: str,
    budget: ParseBudget,
    *,
    between: re.Pattern[str],
    closed: bool,
    tool: str | None = None,
) -> tuple[list[Any], int]:
    """The JSON values at the start of ``text``, one after another with ``between`` (which
    matches the empty text too) separating them, and the index of what follows them: the
    end of ``text``, or text that does not open another value (the caller decides what it
    is). At most :data:`MAX_CALLS` values.

    Raises:
        ParseFailure: see :func:`read_json`; or more than :data:`MAX_CALLS` values.
    """
    values: list[Any] = []
    pos = 0
    while True:
        if len(values) == MAX_CALLS:
            raise ParseFailure(f"more than {MAX_CALLS} tool calls in one reply")
        value, pos = read_json(text, budget, start=pos, closed=closed, tool=tool)
        values.append(value)
        pos = between.match(text, pos).end()  # type: ignore[union-attr]  # matches ""
        if pos == len(text) or text[pos] not in "{[":
            return values, pos


def load_json_values(
    text: str, budget: ParseBudget, *, closed: bool = True, tool: str | None = None
) -> list[Any]:
    """The JSON values ``text`` holds (a surrounding code fence taken off), one after
    another, separated by whitespace or a comma (at most :data:`MAX_CALLS`). Closing
    brackets left over after a value (``{...}}``) are syntax and skipped; any other text
    after a value is an error, never dropped.

    Raises:
        ParseFailure: see :func:`read_json`; or text after a value that is not another one.
    """
    inner, fence_closed = unfence(text.strip())
    if len(inner) > MAX_CALL_CHARS:
        raise ParseFailure(f"the tool call is {len(inner)} characters, over {MAX_CALL_CHARS}")
    budget.spend_containers(inner)
    values, pos = read_json_values(
        inner, budget, between=_LEFT_OVER, closed=closed or fence_closed, tool=tool
    )
    if pos < len(inner):
        raise ParseFailure(
            f"the tool call has text after its JSON ({inner[pos : pos + 60]!r}); write "
            "only JSON calls, one object per call"
        )
    return values


def _arguments(obj: dict[str, Any], name: str, budget: ParseBudget) -> dict[str, Any]:
    for key in _ARGUMENT_KEYS:
        if key in obj:
            args = obj[key]
            break
    else:
        return {}
    if isinstance(args, str):  # arguments given as a JSON string, as the OpenAI API does
        args = load_json(args, budget, tool=name) if args.strip() else {}
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise ParseFailure(f"the arguments must be a JSON object, got {type(args).__name__}")
    return args


def _call(obj: Any, budget: ParseBudget) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ParseFailure(f"each tool call must be a JSON object, got {type(obj).__name__}")
    if isinstance(obj.get("function"), dict):  # OpenAI's {"type": "function", "function": {...}}
        obj = {**obj, **obj["function"]}
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ParseFailure('a tool call has no "name"')
    return {"name": name.strip(), "args": _arguments(obj, name.strip(), budget)}


def calls_from_value(value: Any, budget: ParseBudget) -> list[dict[str, Any]]:
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
    return [_call(item, budget) for item in items]


def _is_envelope(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    if isinstance(obj.get("tool_calls"), list):
        return True
    inner = obj["function"] if isinstance(obj.get("function"), dict) else obj
    return "name" in inner and any(key in inner for key in CALL_ARGUMENT_KEYS)


def envelope_calls(value: Any, budget: ParseBudget) -> list[dict[str, Any]] | None:
    """The calls of a JSON value standing alone as a reply, or None when it is not a call.

    A call envelope is an object with ``name`` and ``arguments`` (or ``parameters``),
    OpenAI's ``{"type": "function", "function": {...}}``, or ``{"tool_calls": [...]}``;
    a reply is a call when it is one, or a list holding one. Any other JSON (a record
    with a ``name``, a result quoted back) is data: None.

    Raises:
        ParseFailure: an envelope that is not a valid call (no name, arguments not an object).
    """
    items = value if isinstance(value, list) else [value]
    if not any(_is_envelope(item) for item in items):
        return None
    return calls_from_value(value, budget)


_DECODER = json.JSONDecoder()
_INT_CHECKING_DECODER = json.JSONDecoder(parse_int=call_int)
_ALL_DIGITS_ZERO = str.maketrans("123456789", "000000000")


def _has_long_number(text: str) -> bool:
    """Does ``text`` hold 19 digits in a row? (A substring search after a translation, several
    times faster than a regex over a reply that is mostly numbers.)"""
    return "0" * 19 in text.translate(_ALL_DIGITS_ZERO)
