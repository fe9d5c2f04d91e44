"""How the values a query returns become the JSON the model reads.

Its one reason to change: what a database value looks like in ``execute_sql``'s answer.

Whatever a database returns becomes JSON data that ``json.dumps`` always writes: texts over
:data:`MAX_CELL_CHARS` are cut, decimals are numbers unless a number would be wrong (then
their text), dates are ISO strings, bytes are base64 (or their size), and JSON documents
are loaded with bounded nesting (or kept as their text).

Key Components:
    - :func:`json_value`: one database value as JSON data.
    - :func:`json_document`: a JSON column's text as a document, bounded.
    - :func:`unique_names`: the columns' names as the rows' keys, a repeated name suffixed.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import math
import uuid
from typing import Any

from langgraph_toolbudget.core.limits import loads_bounded

__all__ = ["MAX_CELL_CHARS", "json_document", "json_value", "unique_names"]

MAX_CELL_CHARS = 10_000
"""A longer text value is cut (its length noted)."""
FLOAT_EXPONENT = 307
"""A decimal whose exponent is within this (``1e-307`` to ``9.9e307``) is a JSON number:
a float keeps it, and a whole number has at most 308 digits (``str(int)`` refuses 4,300)."""


def json_value(value: Any) -> Any:
    """A database value as JSON data."""
    if value is None or isinstance(value, bool | int | str):
        if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
            return f"{value[:MAX_CELL_CHARS]}... [{len(value):,} characters]"
        return value
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
