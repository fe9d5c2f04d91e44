"""The MCP part of :mod:`langgraph_toolbudget._compat`: private names of the MCP adapters and SDK.

Its one reason to change: an upgrade that moves a private MCP adapters or SDK name it uses.

Split off from ``_compat.py`` only because importing these loads the MCP SDK, and
``_compat.py`` is imported by the core, which must not. Only
:mod:`langgraph_toolbudget.mcp` imports this module. Together the two modules
are the one place where the package touches private upstream names.

Each entry says what it replaces and the versions it was checked against: the adapters'
helpers below, and of the SDK's ``ClientSession`` the request counter
(:func:`next_request_id`), the read stream (:func:`transport_closed`) and the output-schema
check of ``call_tool`` (:func:`check_output_in_linear_time`).
"""

from __future__ import annotations

import logging
from typing import Any

import jsonschema
import referencing.exceptions

# langchain-mcp-adapters keeps these helpers private: its public API converts MCP tools
# into StructuredTools that open a session per call (or use one session the caller
# manages), while the catalog calls raw `mcp.types.Tool`s over its own persistent
# sessions. Using the adapters' own helpers keeps results, errors, pagination,
# interceptors and callbacks exactly as the adapters' tools have them.
# Checked: langchain-mcp-adapters 0.3.2.
from langchain_mcp_adapters.callbacks import (
    # The type `Callbacks.to_mcp_format()` returns; built empty when no callbacks are given.
    _MCPCallbacks,
)

# The adapters' stdio sessions expand `${VAR}` in `env` values; the catalog's own stdio
# transport (mcp/stdio.py) starts servers from the same connection dicts, so it expands
# them the same way. Checked: langchain-mcp-adapters 0.3.0 - 0.3.2.
from langchain_mcp_adapters.sessions import _expand_env_vars
from langchain_mcp_adapters.tools import (
    # Composes `tool_interceptors` around the call, as the adapters' tools do.
    _build_interceptor_chain,
    # CallToolResult -> (content blocks, artifact); raises on isError, as the adapters' tools.
    _convert_call_tool_result,
    # The adapters' tools' `handle_tool_error`: an isError result becomes an error message.
    _handle_mcp_tool_error,
    # tools/list with pagination (the public `load_mcp_tools` also wraps them as tools).
    _list_all_tools,
)
from mcp import ClientSession, types

from langgraph_toolbudget.core.compact import json_schema_problem

logger = logging.getLogger(__name__)

__all__ = [
    "_MCPCallbacks",
    "_build_interceptor_chain",
    "_convert_call_tool_result",
    "_expand_env_vars",
    "_handle_mcp_tool_error",
    "_list_all_tools",
    "check_output_in_linear_time",
    "next_request_id",
    "transport_closed",
]


def next_request_id(session: ClientSession) -> int | None:
    """The JSON-RPC id the session's next request will get, or None if unknown.

    Replaces: nothing public. A ``notifications/cancelled`` must name the request
    id, and ``ClientSession.call_tool`` never reveals it; ``BaseSession.send_request``
    takes the id from the private counter ``_request_id`` (and increments it) before
    its first ``await``, so reading the counter right before ``call_tool`` gives the
    call's id. Checked: mcp 1.30.0.
    """
    value = getattr(session, "_request_id", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def transport_closed(session: ClientSession) -> bool:
    """True if the transport has closed its end of the session's read stream.

    Replaces: nothing public. The transport closes the stream it writes the server's
    messages to when the server goes away (stdio: the process exited), and a call on
    that session would fail at once; the SDK keeps the stream in the private
    ``BaseSession._read_stream`` (an anyio memory stream whose ``statistics()`` count
    its open senders). False when that cannot be read. Checked: mcp 1.30.0.
    """
    stats = getattr(getattr(session, "_read_stream", None), "statistics", None)
    return callable(stats) and getattr(stats(), "open_send_streams", None) == 0


def check_output_in_linear_time(session: ClientSession) -> None:
    """Make ``session.call_tool`` check a result against the tool's output schema in linear time.

    Replaces: the SDK's ``ClientSession._validate_tool_result``, which ``call_tool`` awaits on
    every result that is not ``isError`` and which checks ``structuredContent`` against the
    tool's ``outputSchema`` with ``jsonschema.validate``: Python's ``re`` on the schema's
    ``pattern``s, so a server declaring ``^([a-z]+)+$`` and answering 40 letters and a ``!``
    froze the process, holding the GIL (no timeout fires). This one does what the SDK's does
    (the schemas ``tools/list`` cached in the private ``_tool_output_schemas``, listed again
    for a tool not in it; the same ``RuntimeError`` texts, which
    :func:`langgraph_toolbudget.mcp.errors.is_unreadable_output` recognises) with
    :func:`~langgraph_toolbudget.core.compact.json_schema_problem`, which matches the
    patterns with RE2. Checked: mcp 1.26.0 - 1.30.0 (the same method and texts; 1.30 also
    turns an unresolvable ``$ref`` into "Invalid schema for tool", as this does).
    """

    async def validate_tool_result(name: str, result: types.CallToolResult) -> None:
        if name not in session._tool_output_schemas:
            await session.list_tools()  # refreshes the cache, as the SDK's does
        schemas: dict[str, dict[str, Any] | None] = session._tool_output_schemas
        if name not in schemas:
            logger.warning(
                "Tool %s not listed by server, cannot validate its structured content", name
            )
            return
        schema = schemas[name]
        if schema is None:
            return
        if result.structuredContent is None:
            raise RuntimeError(
                f"Tool {name} has an output schema but did not return structured content"
            )
        try:
            problem = json_schema_problem(schema)
            if problem is not None:
                raise RuntimeError(f"Invalid schema for tool {name}: {problem}")
            problem = json_schema_problem(schema, result.structuredContent)
        except (jsonschema.exceptions.SchemaError, referencing.exceptions.Unresolvable) as exc:
            raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from exc
        except RecursionError:  # the tool ran: its answer is not told as a call that did not
            raise RuntimeError(f"Invalid schema for tool {name}: a $ref loops on itself") from None
        if problem is not None:
            problem = problem.removeprefix("(arguments): ")
            raise RuntimeError(f"Invalid structured content returned by tool {name}: {problem}")

    session._validate_tool_result = validate_tool_result  # type: ignore[method-assign]
