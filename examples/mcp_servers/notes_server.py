"""A small FastMCP server: notes, a slow tool and a failing tool (category ``notes``).

Run: ``python notes_server.py`` (stdio) or
``python notes_server.py --transport streamable-http --port 8124``.
"""

from __future__ import annotations

import asyncio
import os

from _run import run  # beside this script (its folder is on sys.path)
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True)

mcp = FastMCP(
    "notes-server",
    instructions="Keep short text notes: add, list and search notes.",
)

NOTES: list[str] = []
SLOW: dict[str, str] = {}


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def add_note(text: str) -> str:
    """Add a text note and return its number."""
    NOTES.append(text)
    return f"note {len(NOTES)} saved"


@mcp.tool(annotations=READ_ONLY)
def list_notes() -> list[str]:
    """List every saved note."""
    return list(NOTES)


@mcp.tool(annotations=READ_ONLY)
def search(query: str) -> list[str]:
    """Search saved notes that contain the query text."""
    return [n for n in NOTES if query.lower() in n.lower()]


@mcp.tool(annotations=READ_ONLY)
async def slow(seconds: float, tag: str = "slow") -> str:
    """Wait the given number of seconds, then answer (a slow tool)."""
    SLOW[tag] = "started"
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        SLOW[tag] = "cancelled"
        raise
    SLOW[tag] = "finished"
    return f"waited {seconds} s"


@mcp.tool(annotations=READ_ONLY)
def slow_status(tag: str = "slow") -> str:
    """What became of a slow call: started, finished, cancelled or unknown."""
    return SLOW.get(tag, "unknown")


@mcp.tool()
def fail(message: str = "boom") -> str:
    """A tool that always fails with the given message."""
    raise RuntimeError(message)


@mcp.tool()
def server_pid() -> int:
    """The process id of this server process."""
    return os.getpid()


if __name__ == "__main__":
    run(mcp)
