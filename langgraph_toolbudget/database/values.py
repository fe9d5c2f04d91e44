"""How the values a query returns become the JSON the model reads.

Its one reason to change: what a database value looks like in ``execute_sql``'s answer.

Whatever a database returns becomes JSON data that ``json.dumps`` always writes: texts over
:data:`MAX_CELL_CHARS` are cut, decimals are numbers unless a number would be wrong (then
their text), dates are ISO strings, bytes are base64 (or their size), and JSON documents
are loaded with bounded nesting (or kept as their text). Rows are converted one at a time
as they are fetched, and texts cut as they are decoded where the driver lets us (SQLite's
``text_factory``, psycopg's loaders), so a query's memory is one raw row plus the answer,
itself capped at :data:`MAX_ANSWER_CHARS`.

Key Components:
    - :class:`AnswerRows`: the rows of an answer, converted and capped as they come.
    - :func:`json_value`: one database value as JSON data.
    - :func:`cut_text`, :func:`sqlite_text`: a text cut to :data:`MAX_CELL_CHARS`.
    - :func:`json_document`: a JSON column's text as a document, bounded.
    - :func:`unique_names`: the columns' names as the rows' keys, a repeated name suffixed.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import uuid
from collections.abc import Sequence
from typing import Any

from langgraph_toolbudget.core.limits import loads_bounded

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_CELL_CHARS",
    "AnswerRows",
    "cut_text",
    "json_document",
    "json_value",
    "sqlite_text",
    "unique_names",
]

MAX_CELL_CHARS = 10_000
"""A longer text value is cut to this many characters, its length noted at the end."""
MAX_ANSWER_CHARS = 1_000_000
"""The rows of one answer, as JSON, stop before this many characters (``max_rows`` of many
long columns would be hundreds of MB: 200 rows x 2,000 columns x 10,000 characters)."""
FLOAT_EXPONENT = 307
"""A decimal whose exponent is within this (``1e-307`` to ``9.9e307``) is a JSON number:
a float keeps it, and a whole number has at most 308 digits (``str(int)`` refuses 4,300)."""


class AnswerRows:
    """The rows of one answer, converted to JSON data one by one as they are fetched.

    The first ``max_rows`` rows are kept while their JSON stays under
    :data:`MAX_ANSWER_CHARS`; the rows after are only counted.

    Args:
        columns: the column names, as the database gives them.
        max_rows: rows kept at most.

    Attributes:
        columns: the rows' keys (:func:`unique_names`).
        rows: the rows kept, as ``{column: value}``.
        seen: the rows added, kept or not.
        full: a row was left out (the rest of the result only needs counting).
    """

    def __init__(self, columns: list[str], max_rows: int) -> None:
        self.columns = unique_names(columns)
        self.max_rows = max_rows
        self.rows: list[dict[str, Any]] = []
        self.seen = 0
        self.full = False
        self._chars = 0

    def add(self, row: Sequence[Any]) -> None:
        """Keep ``row`` (as JSON data) if it fits, else only count it."""
        self.seen += 1
        self.full = self.full or len(self.rows) == self.max_rows
        if self.full:
            return
        item = {k: json_value(v) for k, v in zip(self.columns, row, strict=False)}
        chars = len(json.dumps(item, ensure_ascii=False))
        if self._chars + chars > MAX_ANSWER_CHARS:
            self.full = True
            return
        self.rows.append(item)
        self._chars += chars


def cut_text(text: str) -> str:
    """``text``, or its start with its length when longer than :data:`MAX_CELL_CHARS` (the
    result is never longer, so a text cut once is not cut again).

    >>> cut = cut_text("x" * 10_001)
    >>> len(cut), cut[-26:]
    (10000, 'xxx... [10,001 characters]')
    """
    if len(text) <= MAX_CELL_CHARS:
        return text
    note = f"... [{len(text):,} characters]"
    return text[: MAX_CELL_CHARS - len(note)] + note


def sqlite_text(data: bytes) -> str:
    """SQLite's ``text_factory`` for the model's queries: each text decoded (bytes that are
    not UTF-8 replaced, where the default raised) and cut as it is read."""
    return cut_text(data.decode("utf-8", "replace"))


def json_value(value: Any) -> Any:
    """A database value as JSON data."""
    if value is None or isinstance(value, bool | int | str):
        return cut_text(value) if isinstance(value, str) else value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        if value.is_finite() and (value.is_zero() or abs(value.adjusted()) <= FLOAT_EXPONENT):
            return int(value) if value == value.to_integral_value() else float(value)
        return str(value)  # NaN, Infinity, 1E+5000: a number would fail or be wrong
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        if len(data) <= 64:
            return "base64:" + base64.b64encode(data).decode()
        return f"<{len(data):,} bytes>"
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    return str(value)


def json_document(data: bytes | str) -> Any:
    """A JSON column's value (PostgreSQL ``json``/``jsonb``, as psycopg receives it): the
    document, or its text when it is longer than :data:`MAX_CELL_CHARS` or cannot be loaded
    safely (nested deeper than 32 levels, a number of thousands of digits)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if len(text) > MAX_CELL_CHARS:
        return text
    try:
        return loads_bounded(text)
    except ValueError:
        return text


def unique_names(names: list[str]) -> list[str]:
    """The columns' names as the keys of a row: a name that repeats gets the first free
    suffix (``id``, ``id_2``), never a name another column has (a repeated key would keep one
    value of the two).

    >>> unique_names(["id", "name", "id", "id_2", "id"])
    ['id', 'name', 'id_3', 'id_2', 'id_4']
    """
    taken, seen = set(names), set()
    unique = []
    for name in names:
        key = name
        if name in seen:
            n = 2
            while f"{name}_{n}" in taken:
                n += 1
            key = f"{name}_{n}"
            taken.add(key)
        seen.add(name)
        unique.append(key)
    return unique
