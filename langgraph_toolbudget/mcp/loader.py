"""Loading MCP servers' tools into a catalog: connecting, listing, load errors.

The catalog itself (names, metadata, categories, filters) is built by ``building.py``.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_mcp_adapters.callbacks import Callbacks
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.sessions import Connection

from langgraph_toolbudget.core.catalog import TOOL_METADATA_KEYS, IncludeMode
from langgraph_toolbudget.mcp.building import build_catalog
from langgraph_toolbudget.mcp.catalog import MCPToolCatalog
from langgraph_toolbudget.mcp.errors import MCPLoadError, MCPLoadWarning
from langgraph_toolbudget.mcp.runtime import MCPRuntime

DEFAULT_MCP_TIMEOUT_S = 60.0
"""``timeout_s`` of an MCP tool that sets none: a call to a frozen server is answered
with a timeout error after this long instead of staying pending forever."""
SERVER_DEFAULT_KEYS = tuple(k for k in TOOL_METADATA_KEYS if k != "server")


async def load_mcp_catalog(
    connections_or_client: Mapping[str, Connection] | MultiServerMCPClient,
    *,
    server_descriptions: Mapping[str, str] | None = None,
    server_defaults: Mapping[str, Mapping[str, Any]] | None = None,
    tool_metadata: Mapping[str, Mapping[str, Any]] | None = None,
    categories: Mapping[str, Sequence[str]] | None = None,
    category_descriptions: Mapping[str, str] | None = None,
    allowed_servers: Sequence[str] | None = None,
    allowed_tools: Sequence[str] | None = None,
    default_include: IncludeMode = "agent",
    tool_name_prefix: bool | None = None,
    handle_tool_errors: bool | None = None,
    strict: bool = False,
    connect_timeout_s: float = 30.0,
    heartbeat_s: float | None = 1.0,
    catalog_cls: type[MCPToolCatalog] = MCPToolCatalog,
    default_timeout_s: float | None = DEFAULT_MCP_TIMEOUT_S,
) -> MCPToolCatalog:
    """Load the tools of MCP servers into a catalog that owns persistent sessions.

    Each server's session is opened here (concurrently) and kept open; every
    tool call goes through it. Close the sessions with ``await
    catalog.aclose()``, ``catalog.close()`` or ``async with catalog:``.

    Metadata precedence for a tool (lowest first): ``include=default_include``,
    ``concurrency_group=<server>`` and ``is_pure`` from the MCP
    ``readOnlyHint`` annotation; then ``server_defaults[server]``; then
    ``tool_metadata[tool]``.

    Args:
        connections_or_client: server name -> connection dict, as for
            ``MultiServerMCPClient`` (``transport`` ``stdio``,
            ``streamable_http``, ``sse`` or ``websocket``), or a
            ``MultiServerMCPClient`` (its connections, callbacks, interceptors,
            ``tool_name_prefix`` and ``handle_tool_errors`` are used).
        server_descriptions: server -> category description, overriding the
            server's ``initialize`` instructions (or ``serverInfo`` title).
        server_defaults: server -> metadata for all its tools (``include``,
            ``status``, ``enabled``, ``is_pure``, ``concurrency_group``,
            ``max_concurrency``, ``timeout_s``).
        tool_metadata: tool -> metadata overrides. A key is a catalog name or
            ``server:mcp_name``.
        categories: category -> tools (catalog names or ``server:mcp_name``);
            a tool in none of them falls in its server's category.
        category_descriptions: descriptions of the extra categories of
            ``categories`` (server categories use ``server_descriptions``).
        allowed_servers: keep only these servers' tools (with
            ``allowed_tools``, a tool passes if either admits it).
        allowed_tools: keep only these tools: ``name``, ``server:name`` or
            ``server:*``; a name pattern matches the catalog or the MCP name.
        default_include: include mode of a tool that sets none.
        tool_name_prefix: prefix every tool name with its server
            (``server__name``); by default only colliding names are prefixed.
            ``None`` takes the client's setting (False for connection dicts).
        handle_tool_errors: return MCP ``isError`` results as error tool
            messages (True) or raise them; ``None`` takes the client's setting
            (True for connection dicts).
        strict: raise :class:`MCPLoadError` if any server fails to load
            (closing the others). Otherwise the failure is recorded in
            ``catalog.load_errors``, a :class:`MCPLoadWarning` is emitted and
            the other servers load.
        connect_timeout_s: seconds a server may take to start and answer
            ``initialize`` / ``tools/list``.
        heartbeat_s: ping interval for busy servers, to notice a server that
            died mid-call; ``None`` disables it.
        catalog_cls: the catalog class to build (an :class:`MCPToolCatalog` subclass).
        default_timeout_s: ``timeout_s`` of every tool that sets none (in
            ``server_defaults`` or ``tool_metadata``), so a frozen server never
            leaves a call pending; ``None`` for no bound.

    Returns:
        The catalog; ``catalog.mcp`` is its :class:`MCPRuntime`.

    Raises:
        MCPLoadError: ``strict`` and a server failed; names the servers.
        ValueError: unknown servers in ``server_defaults`` /
            ``server_descriptions``, unknown tools in ``tool_metadata`` /
            ``categories`` (while every server loaded), or an invalid metadata
            value (as :meth:`ToolCatalog.from_tools`).
    """
    if isinstance(connections_or_client, MultiServerMCPClient):
        client = connections_or_client
        connections: Mapping[str, Connection] = client.connections
        callbacks: Callbacks | None = client.callbacks
        interceptors = client.tool_interceptors
        prefix = client.tool_name_prefix if tool_name_prefix is None else tool_name_prefix
        handle = client.handle_tool_errors if handle_tool_errors is None else handle_tool_errors
    else:
        connections, callbacks, interceptors = dict(connections_or_client), None, []
        prefix = bool(tool_name_prefix)
        handle = True if handle_tool_errors is None else handle_tool_errors
    for label, mapping in (
        ("server_defaults", server_defaults),
        ("server_descriptions", server_descriptions),
    ):
        unknown = sorted(set(mapping or {}) - set(connections))
        if unknown:
            raise ValueError(
                f"{label} names {unknown}, which are not servers of this catalog. "
                f"Servers: {sorted(connections)}."
            )
    for server, defaults in (server_defaults or {}).items():
        bad = sorted(set(defaults) - set(SERVER_DEFAULT_KEYS))
        if bad:
            raise ValueError(
                f"server_defaults[{server!r}]: unknown keys {bad}. "
                f"Allowed keys: {', '.join(SERVER_DEFAULT_KEYS)}."
            )

    runtime = MCPRuntime(
        connections,
        callbacks=callbacks,
        tool_interceptors=interceptors,
        connect_timeout_s=connect_timeout_s,
        heartbeat_s=heartbeat_s,
    )
    try:
        loaded = await runtime.aload()
        if runtime.load_errors and strict:
            raise MCPLoadError(runtime.load_errors)
        catalog = build_catalog(
            runtime,
            loaded,
            catalog_cls=catalog_cls,
            server_descriptions=server_descriptions or {},
            server_defaults=server_defaults or {},
            tool_metadata=tool_metadata or {},
            categories=categories,
            category_descriptions=category_descriptions or {},
            allowed_servers=allowed_servers,
            allowed_tools=allowed_tools,
            default_include=default_include,
            prefix=prefix,
            handle_tool_errors=handle,
            default_timeout_s=default_timeout_s,
        )
        from langgraph_toolbudget.mcp.virtual import add_virtual_tools, server_features

        features = await server_features(runtime, list(loaded))
        catalog = add_virtual_tools(
            catalog, features, allowed_servers=allowed_servers, allowed_tools=allowed_tools
        )
    except BaseException:
        await runtime.aclose()
        raise
    if runtime.load_errors:
        detail = "; ".join(f"{n!r}: {why}" for n, why in runtime.load_errors.items())
        warnings.warn(
            f"{len(runtime.load_errors)} of {len(connections)} MCP server(s) failed to load "
            f"and are left out of the catalog: {detail}. See catalog.load_errors; "
            "pass strict=True to make this an error.",
            MCPLoadWarning,
            stacklevel=3,
        )
    return catalog


def load_mcp_catalog_sync(
    connections_or_client: Mapping[str, Connection] | MultiServerMCPClient, **kwargs: Any
) -> MCPToolCatalog:
    """:func:`load_mcp_catalog` for code without an event loop (scripts, graph modules).

    Args:
        connections_or_client: as for :func:`load_mcp_catalog`.
        **kwargs: the keyword arguments of :func:`load_mcp_catalog`.

    Returns:
        The catalog.

    Raises:
        RuntimeError: called from a running event loop (use ``await
            ToolCatalog.from_mcp(...)`` there).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(load_mcp_catalog(connections_or_client, **kwargs))
    raise RuntimeError(
        "load_mcp_catalog_sync() was called from a running event loop; "
        "use `await ToolCatalog.from_mcp(...)` instead"
    )
