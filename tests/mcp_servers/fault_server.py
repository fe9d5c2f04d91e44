"""A FastMCP server for the fault matrix: echo, hanging and blocking tools, a huge answer, an error;
resources that hang or block the same way (for the prompt/resource tools).

Run: ``python fault_server.py`` (stdio) or ``--transport streamable-http --port N``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

# The example servers' shared command line (examples/mcp_servers/_run.py), by path.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "mcp_servers"))
from _run import run  # noqa: E402

mcp = FastMCP("fault-server", instructions="Tools that misbehave on purpose.")


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Answer with the text."""
    return text


@mcp.tool()
async def hang(seconds: float, marker: str = "") -> str:
    """Write ``marker`` (a file path) once started, then wait ``seconds``; then write
    ``marker.done`` (absent when the call was cancelled)."""
    if marker:
        Path(marker).write_text(str(os.getpid()))
    await asyncio.sleep(seconds)
    if marker:
        Path(marker + ".done").write_text("1")
    return "woke up"


@mcp.tool()
def block(seconds: float) -> str:
    """Block the whole server ``seconds`` (a sync tool runs on FastMCP's event loop)."""
    time.sleep(seconds)
    return "unblocked"


@mcp.tool()
def big(megabytes: int) -> str:
    """An answer of ``megabytes`` MB of text."""
    return "x" * (megabytes * 1_000_000)


@mcp.tool()
def fail(message: str = "boom") -> str:
    """Always fails."""
    raise RuntimeError(message)


@mcp.tool()
def noise(text: str) -> str:
    """Write a line that is not JSON-RPC to stdout (a stray print of a setting), then answer."""
    sys.stdout.write("Using API key: not-json-rpc-1234\n")
    sys.stdout.flush()
    return text


@mcp.tool()
def process_info(variable: str) -> dict[str, str]:
    """This server's working directory and the value of an environment variable."""
    return {"cwd": os.getcwd(), "value": os.environ.get(variable, "")}


@mcp.tool()
def server_pid() -> int:
    """This server's process id."""
    return os.getpid()


@mcp.resource("hang://{seconds}", mime_type="text/plain")
async def hang_resource(seconds: str) -> str:
    """A resource whose read waits ``seconds``."""
    await asyncio.sleep(float(seconds))
    return "woke up"


@mcp.resource("block://{seconds}", mime_type="text/plain")
def block_resource(seconds: str) -> str:
    """A resource whose read blocks the whole server ``seconds``."""
    time.sleep(float(seconds))
    return "unblocked"


if __name__ == "__main__":
    run(mcp)
