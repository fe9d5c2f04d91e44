"""A low-level MCP server (stdio) that does not validate its input and breaks its own output
schema: ``book``, ``order`` and ``lookup`` answer with the raw arguments they got (``order``'s
schema is FastMCP's shape for a model argument, ``lookup``'s refers to a URL and a file);
``stats`` writes ``$RAW_MARKER`` when it runs and answers structured content its
``outputSchema`` refuses.

Run: ``python raw_server.py`` (stdio).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

server: Server = Server("raw")
BOOK = {
    "type": "object",
    "properties": {"count": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["count", "name"],
    "additionalProperties": False,
}
STATS_OUTPUT = {"type": "object", "properties": {"count": {"type": "integer"}}}
ORDER = {  # FastMCP's shape for a pydantic model argument, and a list of integers
    "type": "object",
    "$defs": {"Item": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
    "properties": {
        "item": {"$ref": "#/$defs/Item"},
        "ids": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["item"],
}
LOOKUP = {  # a reference no client may follow: $RAW_REF_URL, a file
    "type": "object",
    "properties": {
        "q": {"$ref": os.environ.get("RAW_REF_URL", "http://127.0.0.1:9/q.json")},
        "r": {"$ref": "file:///etc/hostname"},
    },
}


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(name="book", description="Book seats under a name.", inputSchema=BOOK),
        types.Tool(name="order", description="Order items.", inputSchema=ORDER),
        types.Tool(name="lookup", description="Look something up.", inputSchema=LOOKUP),
        types.Tool(
            name="tally",
            description="Count things, without structured content.",
            inputSchema={"type": "object", "properties": {}},
            outputSchema=STATS_OUTPUT,
        ),
        types.Tool(
            name="stats",
            description="Count things.",
            inputSchema={"type": "object", "properties": {}},
            outputSchema=STATS_OUTPUT,
        ),
    ]


@server.call_tool(validate_input=False)
async def call_tool(name: str, arguments: dict) -> types.CallToolResult | list[types.TextContent]:
    if name == "tally":  # a CallToolResult is sent as it is: no server-side output check
        Path(os.environ["RAW_MARKER"]).write_text("ran")
        return types.CallToolResult(content=[types.TextContent(type="text", text="counted")])
    if name == "stats":
        Path(os.environ["RAW_MARKER"]).write_text("ran")
        text = [types.TextContent(type="text", text="counted")]
        return types.CallToolResult(content=text, structuredContent={"count": "many"})
    return [types.TextContent(type="text", text="RAW " + json.dumps(arguments, sort_keys=True))]


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
