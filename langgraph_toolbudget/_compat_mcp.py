"""The MCP part of :mod:`langgraph_toolbudget._compat`: private names of the MCP adapters and SDK.

Its one reason to change: an upgrade that moves a private MCP adapters or SDK name it uses.

Split off from ``_compat.py`` only because importing these loads the MCP SDK, and
``_compat.py`` is imported by the core, which must not. Only
:mod:`langgraph_toolbudget.mcp` imports this module. Together the two modules
are the one place where the package touches private upstream names.

Each entry says what it replaces and the versions it was checked against.
"""

from __future__ import annotations

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
from mcp import ClientSession

__all__ = [
    "_MCPCallbacks",
    "_build_interceptor_chain",
    "_convert_call_tool_result",
    "_expand_env_vars",
    "_handle_mcp_tool_error",
    "_list_all_tools",
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
