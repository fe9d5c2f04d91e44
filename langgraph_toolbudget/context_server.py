"""An MCP server that manages the tool context of one thread of a LangGraph server.

Its one reason to change: what the context MCP server offers over a thread's tool context.

Any MCP client (an IDE, another agent, the ``mcp`` package) gets the eleven
tool-context operations (``list_tools``, ``get_tool``,
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
    export TOOLBUDGET_CONTEXT_TOKEN="$(python -c 'import secrets; print(secrets.token_urlsafe())')"
    python -m langgraph_toolbudget.context_server --url ... --thread ... --catalog ... \\
        --transport streamable-http --host 127.0.0.1 --port 8765          # http://.../mcp
    ```

Over HTTP every request needs ``Authorization: Bearer <token>`` (the token from
``$TOOLBUDGET_CONTEXT_TOKEN`` or ``--token``; on a loopback address without one, the server
makes one and prints it), the server refuses to listen beyond loopback without a token, and
requests whose ``Host`` or ``Origin`` header is not an allowed address are refused whatever
the address it listens on (``--allow-host`` adds one).

A local ``SqliteSaver`` thread works too: ``--sqlite PATH --graph module:attribute``
instead of ``--url``.
"""

from __future__ import annotations

import argparse
import functools
import hmac
import inspect
import ipaddress
import json
import os
import re
import secrets
import sys
from collections.abc import Sequence
from typing import Any

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.context_commands import COMMANDS, CommandError, arguments
from langgraph_toolbudget.core.meta import MAX_LISTING_CHARS
from langgraph_toolbudget.threads import Thread, ThreadError, execute, open_thread

__all__ = ["TOKEN_ENV", "build_server", "main"]

TOKEN_ENV = "TOOLBUDGET_CONTEXT_TOKEN"
"""The environment variable the HTTP transport's bearer token is read from."""

NO_TOKEN_ERROR = (
    "refusing to listen on {host} over HTTP without a token: any client that reaches it could "
    "change every thread's tool context. Set ${env} (or pass --token) to a secret, e.g. "
    "python -c 'import secrets; print(secrets.token_urlsafe())', and send it as "
    "'Authorization: Bearer <token>'."
)

PORT_ERROR = "{name} must be a TCP port, 1 to 65535, got {port}"
"""A port the HTTP transport cannot listen on (``build_server``'s ``port``, ``--port``)."""
MIN_ANSWER_CHARS = 1_000
"""The smallest answer bound: room for a cut answer's note and a few rows."""
MAX_ANSWER_ERROR = (
    "{name} must be a number of characters, at least {least:,}, got {value} (0 on the command "
    "line, None in Python: every answer whole)"
)
"""A bound too small for a cut answer (``build_server``'s ``max_answer_chars``,
``--max-answer-chars``)."""

INSTRUCTIONS = (
    "Manage the tool context of one conversation (thread) of a LangGraph agent: list its "
    "tools and servers, include or exclude tools and whole servers, set include modes "
    "(always, manual, agent)."
)


def _operation(thread: Thread, catalog: ToolCatalog, command: str, max_chars: int | None) -> Any:
    """An async MCP tool function for one operation, with its arguments as parameters;
    it answers with the operation's data as one JSON text."""
    import anyio
    from mcp.server.fastmcp.exceptions import ToolError

    run = functools.partial(execute, max_chars=max_chars)

    async def operation(**kwargs: Any) -> Any:
        args = {k: v for k, v in kwargs.items() if v is not None}
        try:
            result = await anyio.to_thread.run_sync(run, thread, catalog, command, args)
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


class _BearerToken:
    """The MCP SDK's token verifier for one shared secret (compared in constant time)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id="toolbudget-context", scopes=[])
        return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


WILDCARD_ADDRESSES = ("0.0.0.0", "::")


def _url_host(host: str) -> str:
    """``host`` as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def _allowed_hosts(host: str, port: int, extra: Sequence[str]) -> list[str]:
    """``Host`` header values the server answers: the loopback names, ``host`` (unless a
    wildcard address) and ``extra`` (``name`` or ``name:port``), on ``port`` by default."""
    names = {"127.0.0.1", "localhost", "[::1]", *extra}
    if host not in WILDCARD_ADDRESSES:
        names.add(_url_host(host))
    return sorted(n if re.search(r":(\d+|\*)$", n) else f"{n}:{port}" for n in names)


def build_server(
    thread: Thread,
    catalog: ToolCatalog,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
    max_answer_chars: int | None = MAX_LISTING_CHARS,
) -> Any:
    """The FastMCP server of one thread's tool context (not started).

    Args:
        thread: the thread (:class:`~langgraph_toolbudget.threads.ServerThread` or
            :class:`~langgraph_toolbudget.threads.SqliteThread`).
        catalog: the catalog of the thread's agent.
        host, port: where the streamable HTTP transport listens.
        token: the bearer token every HTTP request must carry (``None``: none, for the
            stdio transport only).
        allowed_hosts: more host names clients may reach the server by (its ``Host`` and
            ``Origin`` headers); the loopback names and ``host`` itself always are.
        max_answer_chars: cut a longer answer as the model's own context tools do (an MCP
            client's model keeps it in its context): the rows that fit, the totals and the
            operations that show the rest. None: every answer whole.

    Raises:
        ValueError: ``port`` is not a TCP port (1 to 65535), or ``max_answer_chars`` is not
            a number of characters of at least :data:`MIN_ANSWER_CHARS` (1,000).
    """
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.fastmcp import FastMCP
    from mcp.server.transport_security import TransportSecuritySettings
    from pydantic import AnyHttpUrl

    if not _is_port(port):
        raise ValueError(PORT_ERROR.format(name="port", port=port))
    if max_answer_chars is not None and not _is_answer_bound(max_answer_chars):
        raise ValueError(
            MAX_ANSWER_ERROR.format(
                name="max_answer_chars", least=MIN_ANSWER_CHARS, value=max_answer_chars
            )
        )
    hosts = _allowed_hosts(host, port, allowed_hosts)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")],
    )
    auth: dict[str, Any] = {}
    if token is not None:
        # Where it listens (loopback for a wildcard address), never an allowed host: one of
        # those may have a wildcard port ("10.0.0.5:*"), which is no URL.
        listening = "127.0.0.1" if host in WILDCARD_ADDRESSES else _url_host(host)
        url = f"http://{listening}:{port}"
        auth = {
            "token_verifier": _BearerToken(token),
            "auth": AuthSettings(
                issuer_url=AnyHttpUrl(url),
                resource_server_url=AnyHttpUrl(f"{url}/mcp"),
                # The secret is this server's alone, so the verifier's check is the audience
                # check (an SDK without the option ignores it; left unset, newer ones warn).
                validate_token_resource=False,
            ),
        }
    server = FastMCP(
        "toolbudget-context",
        instructions=INSTRUCTIONS,
        host=host,
        port=port,
        transport_security=security,
        **auth,
    )
    for command, (description, _) in COMMANDS.items():
        server.add_tool(
            _operation(thread, catalog, command, max_answer_chars),
            name=command,
            description=description,
            structured_output=False,
        )
    return server


def _is_port(port: object) -> bool:
    return isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535


def _is_answer_bound(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= MIN_ANSWER_CHARS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m langgraph_toolbudget.context_server",
        # Not the module docstring, which `python -OO` strips.
        description=(
            "An MCP server that manages the tool context of one thread of a LangGraph server."
        ),
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
    parser.add_argument(
        "--token",
        help=f"streamable-http: the bearer token clients must send (default: ${TOKEN_ENV}; "
        "prefer the variable: a command line is visible to other local users).",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        help="streamable-http: another host name clients reach the server by (repeatable).",
    )
    parser.add_argument(
        "--max-answer-chars",
        type=int,
        default=MAX_LISTING_CHARS,
        help=f"Cut a longer answer to what fits, saying how to see the rest (default: "
        f"{MAX_LISTING_CHARS}, as the model's own context tools; 0: every answer whole).",
    )
    return parser


def _token(args: argparse.Namespace) -> str | None:
    """The HTTP transport's token: given, from the environment, or made for loopback."""
    if args.transport != "streamable-http":
        return None
    token = args.token or os.environ.get(TOKEN_ENV)
    if token:
        return str(token)
    if not is_loopback(args.host):
        print(f"error: {NO_TOKEN_ERROR.format(host=args.host, env=TOKEN_ENV)}", file=sys.stderr)
        raise SystemExit(2)
    token = secrets.token_urlsafe(32)
    print(
        f"{TOKEN_ENV} was not set: clients must send 'Authorization: Bearer {token}'",
        file=sys.stderr,
    )
    return token


def main(argv: Sequence[str] | None = None) -> None:
    """Run the server until its client disconnects (stdio) or it is stopped (HTTP)."""
    args = _parser().parse_args(argv)
    if not _is_port(args.port):  # one line, not the URL traceback of FastMCP's settings
        print(f"error: {PORT_ERROR.format(name='--port', port=args.port)}", file=sys.stderr)
        raise SystemExit(2)
    if args.max_answer_chars and not _is_answer_bound(args.max_answer_chars):
        problem = MAX_ANSWER_ERROR.format(
            name="--max-answer-chars", least=MIN_ANSWER_CHARS, value=args.max_answer_chars
        )
        print(f"error: {problem}", file=sys.stderr)
        raise SystemExit(2)
    token = _token(args)
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
    server = build_server(
        thread,
        catalog,
        host=args.host,
        port=args.port,
        token=token,
        allowed_hosts=args.allow_host,
        max_answer_chars=args.max_answer_chars or None,
    )
    server.run(transport=args.transport)


if __name__ == "__main__":
    main()
