"""The in-memory data the example tools act on: issues, messages, events, files, SQL, mail.

Key Components:
    - :class:`Workspace`: one per example catalog (a SQLite database in memory).
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

__all__ = ["CLIMATE", "Workspace", "evaluate"]

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
    """The in-memory data the example tools work on (one per catalog)."""

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


_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


def evaluate(node: ast.AST) -> float:
    """The value of an arithmetic expression tree (+ - * / ** %, unary -, sqrt); else ValueError."""
    if isinstance(node, ast.Expression):
        return evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](evaluate(node.left), evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "sqrt":
        return math.sqrt(evaluate(node.args[0]))
    raise ValueError(f"unsupported expression: {ast.dump(node)[:60]}")
