"""An MCP server that manages the tool context of one thread of a LangGraph server.

Its one reason to change: what the context MCP server offers over a thread's tool context.

Any MCP client (an IDE, another agent, the ``mcp`` package) gets the eleven
tool-context operations of seed 001 (``list_tools``, ``get_tool``,
``list_context_tools``, ``include_tool``, ``exclude_tool``,
``set_tool_include_mode``, ``list_tool_servers``, ``get_tool_server``,
``set_server_include_mode``, ``include_tool_server``, ``exclude_tool_server``)
for the thread named on the command line; each reads the thread's state through
``langgraph_sdk`` and writes its update with ``threads.update_state``, through
the same :func:`~langgraph_toolbudget.core.context_commands.run_command` as the
model's tools and the CLI.

Typical Usage:
    ```bash
    python -m langgraph_toolbudget.context_server --url http://127.0.0.1:2024 \\
        --thread "$THREAD" --catalog myapp.tools:catalog                  # stdio
    python -m langgraph_toolbudget.context_server --url ... --thread ... --catalog ... \\
        --transport streamable-http --host 127.0.0.1 --port 8765          # http://.../mcp
    ```

A local ``SqliteSaver`` thread works too: ``--sqlite PATH --graph module:attribute``
instead of ``--url``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Sequence
from typing import Any

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.context_commands import COMMANDS, CommandError, arguments
from langgraph_toolbudget.threads import Thread, ThreadError, execute, open_thread

__all__ = ["build_server", "main"]

INSTRUCTIONS = (
    "Manage the tool context of one conversation (thread) of a LangGraph agent: list its "
    "tools and servers, include or exclude tools and whole servers, set include modes "
    "(always, manual, agent)."
)


def _operation(thread: Thread, catalog: ToolCatalog, command: str) -> Any:
    """An async MCP tool function for one operation, with its arguments as parameters;
    it answers with the operation's data as one JSON text."""
    import anyio
    from mcp.server.fastmcp.exceptions import ToolError

    async def operation(**kwargs: Any) -> Any:
        args = {k: v for k, v in kwargs.items() if v is not None}
        try:
            result = await anyio.to_thread.run_sync(execute, thread, catalog, command, args)
        except (ThreadError, CommandError) as exc:
            raise ToolError(str(exc)) from None
        return json.dumps(result.data)

    params = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if required else None,
            annotation=str if required else (str | None),
        )
        for name, required in arguments(command).items()
    ]
    operation.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    operation.__annotations__ = {p.name: p.annotation for p in params}
    operation.__name__ = command
    return operation


def build_server(
    thread: Thread, catalog: ToolCatalog, *, host: str = "127.0.0.1", port: int = 8000
) -> Any:
    """The FastMCP server of one thread's tool context (not started).

    Args:
        thread: the thread (:class:`~langgraph_toolbudget.threads.ServerThread` or
            :class:`~langgraph_toolbudget.threads.SqliteThread`).
        catalog: the catalog of the thread's agent.
        host, port: where the streamable HTTP transport listens.
    """
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("toolbudget-context", instructions=INSTRUCTIONS, host=host, port=port)
    for command, (description, _) in COMMANDS.items():
        server.add_tool(
            _operation(thread, catalog, command),
            name=command,
            description=description,
            structured_output=False,
        )
    return server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m langgraph_toolbudget.context_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--url", help="The LangGraph server's URL.")
    parser.add_argument("--thread", required=True, help="The thread id.")
    parser.add_argument("--catalog", help="The agent's ToolCatalog, module:attribute.")
    parser.add_argument("--sqlite", help="Instead of --url: a SqliteSaver file.")
    parser.add_argument("--graph", help="With --sqlite: the app's StateGraph, module:attribute.")
    parser.add_argument(
        "--graph-id", help="With --url: the agent's graph, for a thread that never ran."
    )
    parser.add_argument(
        "--transport", choices=("stdio", "streamable-http"), default="stdio", help="MCP transport."
    )
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http: host.")
    parser.add_argument("--port", type=int, default=8000, help="streamable-http: port.")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Run the server until its client disconnects (stdio) or it is stopped (HTTP)."""
    args = _parser().parse_args(argv)
    try:
        thread, catalog = open_thread(
            url=args.url,
            thread_id=args.thread,
            sqlite=args.sqlite,
            graph=args.graph,
            graph_id=args.graph_id,
            catalog=args.catalog,
        )
    except ThreadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    build_server(thread, catalog, host=args.host, port=args.port).run(transport=args.transport)


if __name__ == "__main__":
    main()
