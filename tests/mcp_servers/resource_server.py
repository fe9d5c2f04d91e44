"""A lowlevel MCP server whose prompts and resources misbehave on purpose: the prompt/resource
(virtual) tools' tests' server.

Run: ``python resource_server.py <scenario> [seconds]`` (stdio). Each scenario has the tool
``echo``.

The scenarios:
    - ``silent_prompts``: has prompts, but never answers ``prompts/list``.
    - ``endless_prompts``: every ``prompts/list`` page has a prompt and a ``nextCursor``.
    - ``resources``: the resource ``docs://a``; the template ``file:///docs/{name}``, whose
      read answers with the URI it was asked for; the resource ``slow://forever``, whose read
      never answers; the prompt ``review``.
    - ``slow_lists``: answers ``tools/list`` and ``prompts/list`` (the prompt ``review``) each
      after ``seconds`` (default 2).
    - ``templates``: no resources, the resource templates of :data:`TEMPLATES` (twelve
      adjacent ``{+x}``, which a backtracking matcher takes hours over; RFC 6570's path and
      query forms, as GitHub's server lists them; one of 2,000 characters); a read answers
      with the URI it was asked for.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import AnyUrl

ECHO = types.Tool(
    name="echo",
    description="Answer with the text.",
    inputSchema={"type": "object", "properties": {"text": {"type": "string"}}},
)


TEMPLATES = [
    "r://" + "".join(f"{{+p{i}}}" for i in range(12)) + "/end{x}",
    "repo://{owner}/{repo}/contents{/path*}",
    "search://docs{?q}",
    "list://{/a,b}",
    "page://site/{name}{.ext}{#section}",
    "api://items{?q,limit}{&page}",
    "map://{;x,y}",
    "long://" + "a" * 2_000 + "/{name}",
]


def build(scenario: str, seconds: float = 2.0) -> Server[Any, Any]:
    """The lowlevel server of ``scenario``."""
    server: Server[Any, Any] = Server(f"resource-{scenario}")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        if scenario == "slow_lists":
            await asyncio.sleep(seconds)
        return [ECHO]

    @server.call_tool()
    async def call_tool(tool: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        return [types.TextContent(type="text", text=str(arguments.get("text", "")))]

    if scenario == "silent_prompts":

        @server.list_prompts()
        async def silent() -> list[types.Prompt]:
            await asyncio.Event().wait()
            return []

    elif scenario == "endless_prompts":

        @server.list_prompts()
        async def endless(request: types.ListPromptsRequest) -> types.ListPromptsResult:
            page = int(request.params.cursor) if request.params and request.params.cursor else 0
            return types.ListPromptsResult(
                prompts=[types.Prompt(name=f"prompt_{page}")], nextCursor=str(page + 1)
            )

    elif scenario == "resources":

        @server.list_prompts()
        async def list_prompts() -> list[types.Prompt]:
            return [types.Prompt(name="review", description="Review a topic.")]

        @server.list_resources()
        async def list_resources() -> list[types.Resource]:
            return [
                types.Resource(uri=AnyUrl("docs://a"), name="a"),
                types.Resource(uri=AnyUrl("slow://forever"), name="slow"),
            ]

        @server.list_resource_templates()
        async def list_resource_templates() -> list[types.ResourceTemplate]:
            return [types.ResourceTemplate(uriTemplate="file:///docs/{name}", name="doc")]

        @server.read_resource()
        async def read_resource(uri: AnyUrl) -> str:
            if str(uri) == "slow://forever":
                await asyncio.Event().wait()
            if str(uri) == "docs://a":
                return "resource a"
            return f"asked for {str(uri)!r}"

    elif scenario == "templates":

        @server.list_resources()
        async def no_resources() -> list[types.Resource]:
            return []  # the handler gives the server the resources capability

        @server.list_resource_templates()
        async def templates() -> list[types.ResourceTemplate]:
            return [
                types.ResourceTemplate(uriTemplate=t, name=f"t{i}") for i, t in enumerate(TEMPLATES)
            ]

        @server.read_resource()
        async def read_templated(uri: AnyUrl) -> str:
            return f"asked for {str(uri)!r}"

    elif scenario == "slow_lists":

        @server.list_prompts()
        async def slow_prompts() -> list[types.Prompt]:
            await asyncio.sleep(seconds)
            return [types.Prompt(name="review", description="Review a topic.")]

    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    return server


async def main(scenario: str, seconds: str = "2") -> None:
    server = build(scenario, float(seconds))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
