"""JSON as models write it, read without guessing: the repair of the JSON-based formats.

A model's JSON is often not strict: single quotes, trailing or doubled commas, a
missing comma, Python's ``True``/``None``, comments, unquoted keys and words,
closing brackets missing at the end before a closing tag. :func:`read_lenient` reads those
token by token, in time linear in the text, and fixes syntax only:

- it never invents, changes, moves or drops a value: a key without a value, a
  value without its key's colon, two words where one value goes, a bracket
  closed by the wrong one, a comment left open over the closing brackets, are
  errors; a comment starts only between tokens (``/data//old`` is one word);
- a text that ends inside a string, an object or an array is reported
  (:attr:`Lenient.unfinished`), for the caller to answer as a call cut off by
  the end of the reply; only when the caller knows a closing marker followed
  (a tag, an end token, a code fence) are the brackets still open closed; a
  string left open never is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from langgraph_toolbudget.core.limits import STATE_INTS
from langgraph_toolbudget.formats.base import MAX_DEPTH, ParseFailure

__all__ = ["STRING", "Lenient", "call_int", "read_lenient", "unescape"]

STRING = (
    r""""(?P<dq>[^"\\]*(?:\\.[^"\\]*)*)(?P<dq_end>"|\\?\Z)"""
    r"""|'(?P<sq>[^'\\]*(?:\\.[^'\\]*)*)(?P<sq_end>'|\\?\Z)"""
)
"""A string as the lenient reader takes it (a pattern): either quote, running to its closing
quote or to the end of the text (then it is unclosed: the match never fails, so a scan stays
linear). Groups: ``dq``/``sq`` its text, ``dq_end``/``sq_end`` its closing quote or ""."""

# One token of JSON as models write it: a string, or a word: anything unquoted between the
# punctuation (a literal, a number, an unquoted string). A comment starts only where a token
# may start: inside a word, // /* and # are part of it (/data//old, /data/*.tmp, C#).
_TOKEN = re.compile(
    STRING
    + r"""
    |(?P<comment>//[^\n]*|/\*(?:.*?\*/|.*\Z)|\#[^\n]*)
    |(?P<open>[\[{])
    |(?P<close>[\]}])
    |(?P<punct>[:,])
    |(?P<word>(?:[^\s\[\]{}:,"'/\#]|/(?![/*]))[^\s\[\]{}:,"']*)
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\"}
_ESCAPES.update({'"': '"', "'": "'"})
_LITERALS = {"true": True, "false": False, "null": None, "True": True, "False": False}
_LITERALS["None"] = None
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_UNQUOTED = re.compile(r"[A-Za-z_/][\w./@+-]*")
_CLOSERS = {"{": "}", "[": "]"}


@dataclass
class Lenient:
    """What :func:`read_lenient` read."""

    value: Any = None
    """The object or array (None when the text ends inside it)."""
    end: int = 0
    """The index after the value, or the text's length when it ends inside it."""
    unfinished: str = ""
    """What the text ends inside ("inside a string", ...), or "" when the value ended."""
    names: list[tuple[int, str]] = field(default_factory=list)

    @property
    def tool(self) -> str | None:
        """The name of the call the text ends in, when written whole (the outermost)."""
        if not self.names:
            return None
        top = min(depth for depth, _ in self.names)
        return [name for depth, name in self.names if depth == top][-1][:128]


def unescape(raw: str) -> str:
    """A quoted string's text with JSON's escapes (and ``\\'``) read; others kept as written."""

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        return chr(int(code[1:], 16)) if len(code) == 5 else _ESCAPES.get(code, match.group())

    text = _ESCAPE.sub(one, raw) if "\\" in raw else raw
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")  # join surrogate pairs
    except UnicodeError:
        return text


def call_int(text: str) -> int | str:
    """The integer a call's number ``text`` writes; ``text`` itself when the state cannot
    hold it (outside :data:`~langgraph_toolbudget.core.limits.STATE_INTS`: coercion turns it
    back into a number for a tool's integer field).

    Raises:
        ParseFailure: over 4,300 digits (``sys.get_int_max_str_digits()``), which Python
            does not read.
    """
    try:
        number = int(text)
    except ValueError:  # an integer of thousands of digits
        raise ParseFailure(f"the number {text[:40]!r}... is too long") from None
    return number if number in STATE_INTS else text


def _word(word: str) -> Any:
    """A word's value: a literal, a number, or an unquoted string (a name, a path)."""
    if word in _LITERALS:
        return _LITERALS[word]
    if _NUMBER.fullmatch(word):
        if any(c in word for c in ".eE"):
            return float(word)
        return call_int(word)
    if _UNQUOTED.fullmatch(word):
        return word
    raise ParseFailure(f"{word[:40]!r} is not a JSON value")


class _Reader:
    """The state of one :func:`read_lenient`: open containers, the pending keys, what comes next."""

    def __init__(self) -> None:
        self.stack: list[Any] = []
        self.closers: list[str] = []
        self.keys: list[Any] = []
        self.expect = "value"  # "key", "colon", "value" or "comma"
        self.read = Lenient()

    def _missing_comma(self) -> None:
        if self.expect == "comma":  # two values side by side: the comma between is syntax
            self.expect = "key" if isinstance(self.stack[-1], dict) else "value"

    def _in_object_without_value(self) -> bool:
        return isinstance(self.stack[-1], dict) and self.expect in ("colon", "value")

    def _missing_value(self) -> ParseFailure:
        key = self.keys[-1]
        if self.expect == "colon":
            return ParseFailure(f"the colon after the key {key!r} is missing")
        return ParseFailure(f"the value of {key!r} is missing")

    def place(self, value: Any, *, is_name: bool = False) -> None:
        """Put ``value`` where the next value goes (a key of an object, too)."""
        self._missing_comma()
        top = self.stack[-1]
        if isinstance(top, list):
            top.append(value)
        elif self.expect == "key":
            if isinstance(value, dict | list):
                raise ParseFailure("an object key must be a string")
            self.keys[-1] = value if isinstance(value, str) else json.dumps(value)
            self.expect = "colon"
            return
        elif self.expect == "colon":
            raise self._missing_value()
        else:
            top[self.keys[-1]] = value
            if is_name and self.keys[-1] == "name":
                self.read.names.append((len(self.stack), value))
        self.expect = "comma"

    def open(self, bracket: str) -> None:
        container: Any = {} if bracket == "{" else []
        if self.stack:
            self.place(container)
        else:
            self.read.value = container
        self.stack.append(container)
        self.closers.append(_CLOSERS[bracket])
        self.keys.append(None)
        self.expect = "key" if bracket == "{" else "value"
        if len(self.stack) > MAX_DEPTH:
            raise ParseFailure(f"the arguments nest deeper than {MAX_DEPTH} levels")

    def close(self, bracket: str) -> bool:
        """Close the innermost container; True when it was the outermost."""
        if bracket != self.closers[-1]:  # which values go where would be a guess
            raise ParseFailure(f"a {self.closers[-1]!r} is missing before a {bracket!r}")
        if self._in_object_without_value():
            raise self._missing_value()
        self.closers.pop()
        self.stack.pop()
        self.keys.pop()
        self.expect = "comma"
        return not self.stack

    def punct(self, char: str) -> None:
        if char == ":":
            if not (isinstance(self.stack[-1], dict) and self.expect == "colon"):
                raise ParseFailure("a colon out of place")
            self.expect = "value"
        elif self.expect == "comma":
            self.expect = "key" if isinstance(self.stack[-1], dict) else "value"
        elif self._in_object_without_value():
            raise self._missing_value()
        # else: a comma too many (leading, trailing or doubled): syntax, skipped


def read_lenient(text: str, *, close_open: bool) -> Lenient:
    """Read the object or array ``text`` starts with, as models write JSON.

    Args:
        text: the text (a call's JSON, then maybe more).
        close_open: a closing marker followed ``text``: brackets still open at its end
            are closed (else the text is unfinished: a call cut off).

    Returns:
        The value and its end; or, when the text ends inside it, what it ends inside
        (and the call's name if it was written whole).

    Raises:
        ParseFailure: not an object or an array, a value missing, a colon out of place,
            a word that is no value, nested deeper than ``MAX_DEPTH``.
    """
    reader = _Reader()
    read = reader.read
    comment: re.Match[str] | None = None  # the last token, when it is a comment
    word: re.Match[str] | None = None  # the last token but comments, when it is a word
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        comment = match if kind == "comment" else None
        if comment is not None:
            continue
        if not reader.stack and kind != "open":
            raise ParseFailure(f"not a JSON object or list: {text[:80]!r}")
        if kind == "open":
            reader.open(match.group())
        elif kind == "close":
            if reader.close(match.group()):
                read.end = match.end()
                return read
        elif kind == "punct":
            reader.punct(match.group())
        elif kind == "word":
            if word and isinstance(reader.stack[-1], list) and _spaces_between(word, match, text):
                raise ParseFailure(
                    f"{word.group()[:40]!r} and {match.group()[:40]!r} stand side by side in a "
                    'list: quote a value with spaces ("John Smith"), or put a comma between values'
                )
            reader.place(_word(match.group()))
        else:  # a string: dq_end or sq_end
            quote = str(kind)
            if match.group(quote) not in ('"', "'"):
                read.value, read.end, read.unfinished = None, len(text), "inside a string"
                return read
            reader.place(unescape(match.group(quote[:2])), is_name=True)
        word = match if kind == "word" else None
    if not reader.stack:
        raise ParseFailure(f"not a JSON object or list: {text[:80]!r}")
    if not close_open:
        read.value, read.end = None, len(text)
        read.unfinished = "inside an object" if reader.closers[-1] == "}" else "inside an array"
        return read
    if comment is not None and _swallows_brackets(comment, text):
        # Its brackets may close the call, or be text: closing the open ones would guess.
        raise ParseFailure(
            f"a comment runs to the end of the tool call over its closing brackets: "
            f"{comment.group()[:40]!r}; close the brackets before a comment, or leave it out"
        )
    if reader._in_object_without_value():
        raise reader._missing_value()
    read.end = len(text)
    return read


def _spaces_between(first: re.Match[str], second: re.Match[str], text: str) -> bool:
    """Whether only spaces (no line break, no comment) stand between two tokens: one value
    with spaces, not two values with the comma between them missing."""
    return not text[first.end() : second.start()].strip(" \t")


def _swallows_brackets(comment: re.Match[str], text: str) -> bool:
    """Whether a comment left open at the end of ``text`` holds a closing bracket."""
    body = comment.group()
    closed = body.startswith("/*") and len(body) >= 4 and body.endswith("*/")
    return comment.end() == len(text) and not closed and any(c in body for c in "]}")
