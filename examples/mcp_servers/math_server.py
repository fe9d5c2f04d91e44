"""A small FastMCP server: arithmetic tools (category ``math`` in the tests).

Run: ``python math_server.py`` (stdio) or
``python math_server.py --transport streamable-http --port 8123``.
"""

from __future__ import annotations

import os

from _run import run  # beside this script (its folder is on sys.path)
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True)

mcp = FastMCP(
    "math-server",
    instructions="Arithmetic on numbers: add, multiply and divide, and look up math formulas.",
)

FORMULAS = {
    "circle area": "pi * r**2",
    "circle circumference": "2 * pi * r",
    "pythagoras": "a**2 + b**2 = c**2",
}


@mcp.tool(annotations=READ_ONLY)
def add(a: float, b: float) -> float:
    """Add two numbers and return the sum."""
    return a + b


@mcp.tool(annotations=READ_ONLY)
def multiply(a: float, b: float) -> float:
    """Multiply two numbers and return the product."""
    return a * b


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
def divide(a: float, b: float) -> float:
    """Divide a by b. Fails when b is zero."""
    if b == 0:
        raise ZeroDivisionError("cannot divide by zero")
    return a / b


@mcp.tool(annotations=READ_ONLY)
def search(query: str) -> list[str]:
    """Search math formulas whose name contains the query."""
    return [f"{k}: {v}" for k, v in FORMULAS.items() if query.lower() in k]


@mcp.tool()
def server_pid() -> int:
    """The process id of this server process."""
    return os.getpid()


if __name__ == "__main__":
    run(mcp)
