"""The in-memory data the example tools act on: issues, messages, events, files, SQL, mail.

Its one reason to change: the example tools' in-memory data.

Key Components:
    - :class:`Workspace`: one per example catalog (a SQLite database in memory).
    - :data:`KEEP`: how many records of each kind a workspace keeps, the most recent.
    - :func:`evaluate`: the safe arithmetic evaluator behind the ``calculate`` tool.
    - :data:`CLIMATE`: the fixed weather of a few cities.
"""

from __future__ import annotations

import ast
import math
import operator
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLIMATE", "KEEP", "Workspace", "evaluate"]

KEEP = 1_000
"""Records of each kind a workspace keeps (issues, pull requests, the messages of a channel,
channels, events, files, projects, tasks, mails): the most recent. A demo server that runs
for days stays bounded; what the tools did last is still there to read."""

CLIMATE = {
    "paris": (14, "cloudy", 62),
    "tokyo": (18, "sunny", 55),
    "london": (11, "rain", 80),
    "new york": (16, "windy", 58),
    "madrid": (22, "sunny", 35),
    "berlin": (12, "overcast", 70),
}


@dataclass
class Workspace:
    """The in-memory data the example tools work on (one per catalog).

    Each kind of record is bounded by :data:`KEEP`: adding one more drops the oldest.
    """

    issues: list[dict[str, Any]] = field(default_factory=list)
    pulls: list[dict[str, Any]] = field(default_factory=list)
    messages: dict[str, list[str]] = field(default_factory=lambda: {"general": [], "dev": []})
    events: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, str] = field(
        default_factory=lambda: {"/notes/todo.md": "- ship v1\n", "/notes/ideas.md": "- budgets\n"}
    )
    tasks: list[dict[str, Any]] = field(default_factory=list)
    projects: list[str] = field(default_factory=list)
    outbox: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    db: sqlite3.Connection = field(init=False)

    def __post_init__(self) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.executescript(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);"
            "INSERT INTO customers (name, city) VALUES ('Ada', 'London'), ('Grace', 'New York'),"
            " ('Linus', 'Helsinki');"
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, total REAL);"
            "INSERT INTO orders (customer_id, total) VALUES (1, 30.5), (1, 12.0), (2, 99.9);"
        )

    def add(self, records: list[Any], record: Any) -> None:
        """Append ``record`` to one of the workspace's lists, dropping the oldest beyond KEEP."""
        records.append(record)
        del records[:-KEEP]

    def put(self, table: dict[str, Any], key: str, value: Any) -> None:
        """Set ``table[key]`` (files, channels), dropping the oldest keys beyond KEEP."""
        table[key] = value
        while len(table) > KEEP:
            del table[next(iter(table))]

    def channel(self, name: str) -> list[str]:
        """The messages of a Slack channel, created empty if it does not exist."""
        name = channel_name(name)
        if name not in self.messages:
            self.put(self.messages, name, [])
        return self.messages[name]


def channel_name(name: str) -> str:
    """A Slack channel's name as the workspace keeps it: ``#general`` and ``general`` are one."""
    return name.strip().lstrip("#")


def next_number(records: list[dict[str, Any]]) -> int:
    """The number of the next issue or pull request: one more than the newest one kept."""
    return records[-1]["number"] + 1 if records else 1


_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


MAX_EXPRESSION_CHARS = 200
"""The longest expression ``calculate`` evaluates."""


def calculate_expression(expression: str) -> float:
    """The value of an arithmetic expression, in floats, bounded in size and time.

    Floats overflow at once where integers would grow without bound (``9**9**9``), so
    every evaluation ends in microseconds.

    Raises:
        ValueError: too long, not arithmetic, or a result too large for a float.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        return evaluate(ast.parse(expression, mode="eval"))
    except OverflowError:
        raise ValueError("the result is too large") from None
    except (SyntaxError, RecursionError) as exc:
        raise ValueError(f"not an arithmetic expression: {exc}") from None


def evaluate(node: ast.AST) -> float:
    """The value of an arithmetic expression tree (+ - * / ** %, unary -, sqrt); else ValueError."""
    if isinstance(node, ast.Expression):
        return evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return float(_BINOPS[type(node.op)](evaluate(node.left), evaluate(node.right)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "sqrt":
        return math.sqrt(evaluate(node.args[0]))
    raise ValueError(f"unsupported expression: {ast.dump(node)[:60]}")
