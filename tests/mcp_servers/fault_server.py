"""A FastMCP server for the fault matrix: echo, a hanging tool, a huge answer, an error.

Run: ``python fault_server.py`` (stdio) or ``--transport streamable-http --port N``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

from langgraph_toolbudget.demo.mcp_servers._run import run

mcp = FastMCP("fault-server", instructions="Tools that misbehave on purpose.")


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Answer with the text."""
    return text


@mcp.tool()
async def hang(seconds: float, marker: str = "") -> str:
    """Write ``marker`` (a file path) once started, then wait ``seconds``."""
    if marker:
        Path(marker).write_text(str(os.getpid()))
    await asyncio.sleep(seconds)
    return "woke up"


@mcp.tool()
def big(megabytes: int) -> str:
    """An answer of ``megabytes`` MB of text."""
    return "x" * (megabytes * 1_000_000)


@mcp.tool()
def fail(message: str = "boom") -> str:
    """Always fails."""
    raise RuntimeError(message)


@mcp.tool()
def server_pid() -> int:
    """This server's process id."""
    return os.getpid()


if __name__ == "__main__":
    run(mcp)
