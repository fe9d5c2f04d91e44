"""Two local MCP servers as one tool catalog, and one agent turn over it.

Starts the ``math`` and ``notes`` example FastMCP servers (``mcp_servers/`` beside
this file) over stdio, loads them with
``load_mcp_catalog`` (one persistent session per server), prints the catalog
grouped by server with how many tools the agent sees ("N of M tools visible"),
and runs one turn of the tool-budget agent with a scripted chat model (no API
key, no network).

Run: ``python examples/mcp_catalog.py``
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_mcp_adapters.sessions import StdioConnection

from langgraph_toolbudget import create_toolbudget_agent, load_mcp_catalog
from langgraph_toolbudget.mcp import MCPToolCatalog
from langgraph_toolbudget.testing import ScriptedChatModel

QUESTION = "Multiply 6 by 7, please."
SERVERS = Path(__file__).resolve().parent / "mcp_servers"


def stdio(script: str) -> StdioConnection:
    """A stdio connection dict (``MultiServerMCPClient`` format): this Python runs the script."""
    return {"transport": "stdio", "command": sys.executable, "args": [str(SERVERS / script)]}


def scripted_step(messages: list[BaseMessage], tools: list[str]) -> AIMessage:
    """What a tool-calling model would do this step, given the tools it was shown.

    Calls ``multiply`` if it is visible; otherwise finds and loads it with the
    meta-tools; answers from the tool result.
    """
    last = messages[-1]
    if isinstance(last, ToolMessage) and last.name == "multiply":
        text = last.text if last.status == "success" else f"unknown ({last.text})"
        return AIMessage(f"6 times 7 is {text}.")
    if "multiply" in tools:
        return AIMessage("", tool_calls=[_call("multiply", {"a": 6, "b": 7})])
    if isinstance(last, ToolMessage) and last.name == "search_tools":
        return AIMessage("", tool_calls=[_call("add_tool", {"tool_names": ["multiply"]})])
    return AIMessage("", tool_calls=[_call("search_tools", {"query": "multiply numbers"})])


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{name}"}


def print_catalog(catalog: MCPToolCatalog, visible: list[str]) -> None:
    """The catalog grouped by server, with "N of M tools visible" per server."""
    for server, info in catalog.mcp.servers.items():
        names = [n for n in info.tools if n in catalog]
        shown = [n for n in names if n in visible]
        print(f"\n{server}: {len(shown)} of {len(names)} tools visible  ({info.description})")
        for name in names:
            spec = catalog.get(name)
            assert spec is not None  # listed by its server and in the catalog
            mark = "x" if name in shown else " "
            mcp_name = f" (MCP name {info.tools[name]!r})" if info.tools[name] != name else ""
            pure = "read-only" if spec.is_pure else "writes"
            print(f"  [{mark}] {name}{mcp_name}: {spec.description}  [{pure}]")


async def main() -> None:
    started = time.perf_counter()
    catalog = await load_mcp_catalog(
        {"math": stdio("math_server.py"), "notes": stdio("notes_server.py")},
        tool_metadata={"slow": {"timeout_s": 2}, "fail": {"enabled": False}},
    )
    async with catalog:
        print(
            f"Loaded {len(catalog)} tools from {len(catalog.mcp.servers)} MCP servers "
            f"in {time.perf_counter() - started:.1f} s: {', '.join(catalog.categories)}"
        )
        model = ScriptedChatModel(responses=[scripted_step])  # repeats the step function
        graph = create_toolbudget_agent(model, catalog, max_tools=4).compile()
        out = await graph.ainvoke({"messages": [HumanMessage(QUESTION)]})

        print(f"\nUser: {QUESTION}")
        print(f"Categories chosen: {out['categories']}")
        print_catalog(catalog, out["selected_tools"])
        print("\nTool calls:")
        for msg in out["messages"]:
            if isinstance(msg, AIMessage):
                for call in msg.tool_calls:
                    print(f"  {call['name']}({json.dumps(call['args'])})", end="")
            if isinstance(msg, ToolMessage):
                print(f" -> {msg.text} [{msg.status}]")
        print(f"\nAssistant: {out['messages'][-1].text}")


if __name__ == "__main__":
    asyncio.run(main())
