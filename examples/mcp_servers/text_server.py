"""A small FastMCP server: text utilities (category ``text``).

Run: ``python text_server.py`` (stdio) or
``python text_server.py --transport streamable-http --port 8125``.
"""

from __future__ import annotations

from _run import run  # beside this script (its folder is on sys.path)
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True)

mcp = FastMCP("text-server")


@mcp.tool(annotations=READ_ONLY)
def upper(text: str) -> str:
    """Return the text in upper case."""
    return text.upper()


@mcp.tool(annotations=READ_ONLY)
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


if __name__ == "__main__":
    run(mcp)
