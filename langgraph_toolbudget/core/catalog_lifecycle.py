"""The catalog's lifecycle: the MCP entry point, and closing what a catalog holds.

Key Components:
    - :class:`CatalogLifecycle`: the base of ``ToolCatalog``. Its ``from_mcp``
      imports the MCP layer on first use (the one place where core reaches up a
      layer, and only inside the method); ``aclose``/``close``/``async with``
      are no-ops here, overridden by ``MCPToolCatalog`` to close its sessions.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import Self

from langgraph_toolbudget.core.spec import IncludeMode

if TYPE_CHECKING:  # the MCP layer builds on the catalog; imported only for the type
    from langgraph_toolbudget.mcp.catalog import MCPToolCatalog

__all__ = ["CatalogLifecycle"]


class CatalogLifecycle:
    """How a catalog is loaded from MCP servers and closed."""

    @classmethod
    async def from_mcp(
        cls,
        connections_or_client: Any,
        *,
        server_descriptions: Mapping[str, str] | None = None,
        server_defaults: Mapping[str, Mapping[str, Any]] | None = None,
        tool_metadata: Mapping[str, Mapping[str, Any]] | None = None,
        categories: Mapping[str, Sequence[str]] | None = None,
        allowed_servers: Sequence[str] | None = None,
        allowed_tools: Sequence[str] | None = None,
        strict: bool = False,
        category_descriptions: Mapping[str, str] | None = None,
        default_include: IncludeMode = "agent",
        tool_name_prefix: bool | None = None,
        handle_tool_errors: bool | None = None,
        connect_timeout_s: float = 30.0,
        heartbeat_s: float | None = 1.0,
        default_timeout_s: float | None = 60.0,
    ) -> MCPToolCatalog:
        """Load MCP servers' tools into a catalog that owns one persistent session per server.

        Each tool is tagged with its server, sits in the server's category (described
        by the server's ``initialize`` instructions) and calls through the session.
        Close with ``await catalog.aclose()`` or ``async with catalog:``. The MCP
        layer (:mod:`langgraph_toolbudget.mcp`) is imported here, on first use.

        Args:
            connections_or_client: server -> connection dict, as for
                ``MultiServerMCPClient``, or a ``MultiServerMCPClient``.
            server_descriptions: server -> category description override.
            server_defaults: server -> metadata for all its tools.
            tool_metadata: tool (catalog name or ``server:mcp_name``) -> overrides.
            categories: category -> tools; unlisted tools sit in their server's category.
            allowed_servers: keep only these servers' tools.
            allowed_tools: keep only these tools (``name``, ``server:name``, ``server:*``).
            strict: raise if any server fails to load, instead of warning and
                listing it in ``load_errors``.
            category_descriptions: category -> description, over the servers'.
            default_include: include mode of a tool that sets none.
            tool_name_prefix: prefix every tool name with its server
                (``server__name``); by default only colliding names are prefixed.
            handle_tool_errors: MCP ``isError`` results as error tool messages
                (True) or raised; ``None`` takes the client's setting.
            connect_timeout_s: seconds to open a server's session.
            heartbeat_s: ping interval for busy servers, to notice a server that
                died mid-call; ``None`` disables it.
            default_timeout_s: ``timeout_s`` of every tool that sets none
                (``None``: unbounded calls).

        See :func:`langgraph_toolbudget.mcp.load_mcp_catalog` for the details.

        Returns:
            A :class:`~langgraph_toolbudget.mcp.MCPToolCatalog` (of ``cls`` when
            ``cls`` is one): a catalog that also has ``mcp`` (its
            :class:`~langgraph_toolbudget.mcp.MCPRuntime`) and ``load_errors``.
        """
        # The MCP SDK reads files while it imports: do that off the event loop (LangGraph
        # server flags blocking calls in async graph factories).
        await asyncio.to_thread(importlib.import_module, "langgraph_toolbudget.mcp.loader")
        from langgraph_toolbudget.mcp.catalog import MCPToolCatalog
        from langgraph_toolbudget.mcp.loader import load_mcp_catalog

        return await load_mcp_catalog(
            connections_or_client,
            server_descriptions=server_descriptions,
            server_defaults=server_defaults,
            tool_metadata=tool_metadata,
            categories=categories,
            allowed_servers=allowed_servers,
            allowed_tools=allowed_tools,
            strict=strict,
            category_descriptions=category_descriptions,
            default_include=default_include,
            tool_name_prefix=tool_name_prefix,
            handle_tool_errors=handle_tool_errors,
            connect_timeout_s=connect_timeout_s,
            heartbeat_s=heartbeat_s,
            default_timeout_s=default_timeout_s,
            catalog_cls=cls if issubclass(cls, MCPToolCatalog) else MCPToolCatalog,
        )

    async def aclose(self) -> None:
        """Release what the catalog holds: nothing here; an MCP catalog closes its sessions.

        Every catalog has ``aclose()``, ``close()`` and ``async with``, so code can
        close whatever catalog it was given.
        """

    def close(self) -> None:
        """Sync :meth:`aclose`, for code without an event loop."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
