"""The catalog of MCP tools: a ToolCatalog that owns the sessions its tools call through.

Its one reason to change: what an MCP catalog is beyond a ``ToolCatalog`` (its runtime, its
load errors, closing, the names its tools get). How one is loaded is
:mod:`~langgraph_toolbudget.mcp.loader`'s.

Key Components:
    - :class:`MCPToolCatalog`: the catalog; owns its :class:`MCPRuntime`.
    - :func:`mcp_tool_name` (from :mod:`~langgraph_toolbudget.mcp.names`): the prefixed
      catalog name of an MCP tool.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from langgraph_toolbudget.core.catalog import RuntimeMode, ToolCatalog, ToolSpec
from langgraph_toolbudget.mcp.errors import MCPLoadWarning
from langgraph_toolbudget.mcp.names import mcp_tool_name, server_prefix
from langgraph_toolbudget.mcp.runtime import MCPRuntime

__all__ = ["MCPToolCatalog", "mcp_tool_name"]


class MCPToolCatalog(ToolCatalog):
    """A :class:`ToolCatalog` of MCP tools that owns their :class:`MCPRuntime`.

    Build it with ``await load_mcp_catalog(...)`` (see
    :func:`~langgraph_toolbudget.mcp.load_mcp_catalog`). The nodes use it like
    any catalog; on top it has the runtime (:attr:`mcp`: servers, sessions),
    the servers that failed to load (:attr:`load_errors`), and closing: ``await
    catalog.aclose()``, ``catalog.close()`` or ``async with catalog:``. Copies
    from :meth:`with_metadata` and :meth:`in_runtime_mode` share the runtime:
    closing one closes them all.

    Args:
        specs: the tools, as for :class:`ToolCatalog`.
        runtime: the runtime whose sessions the tools call through; the catalog
            closes it.
        category_descriptions: category -> description.
        filtered: names of tools the catalog's filters removed.
        runtime_mode: ``production`` or ``debug`` (see :class:`ToolCatalog`).
        untrusted_descriptions: the categories described by their server's own
            instructions (see :attr:`ToolCatalog.untrusted_descriptions`).

    Example:
        ```python
        async with await load_mcp_catalog(connections) as catalog:
            print(catalog.load_errors, catalog.mcp.servers["math"].tools)
            graph = create_toolbudget_agent(model, catalog).compile()
        ```
    """

    load_warning = MCPLoadWarning

    def __init__(
        self,
        specs: Sequence[ToolSpec],
        *,
        runtime: MCPRuntime,
        category_descriptions: Mapping[str, str] | None = None,
        filtered: Iterable[str] = (),
        runtime_mode: RuntimeMode = "production",
        untrusted_descriptions: Collection[str] = (),
    ) -> None:
        filtered = tuple(filtered)
        super().__init__(
            specs,
            category_descriptions=category_descriptions,
            filtered=filtered,
            runtime_mode=runtime_mode,
        )
        self._runtime = runtime
        self._given = (dict(category_descriptions or {}), filtered)
        self._untrusted = frozenset(untrusted_descriptions)

    @property
    def untrusted_descriptions(self) -> frozenset[str]:
        """The categories described by their MCP server's own ``initialize`` instructions."""
        return self._untrusted & set(self.category_descriptions)

    @property
    def mcp(self) -> MCPRuntime:
        """The :class:`MCPRuntime`: loaded servers (``servers``), sessions, calls."""
        return self._runtime

    @property
    def load_errors(self) -> dict[str, str]:
        """MCP server -> why it failed to load ({} when every server loaded)."""
        return dict(self._runtime.load_errors)

    @property
    def failed_servers(self) -> tuple[str, ...]:
        """The servers of :attr:`load_errors`."""
        return tuple(self._runtime.load_errors)

    def failed_server_of(self, name: str) -> str | None:
        """The server of :attr:`load_errors` whose ``<server>__`` prefix ``name`` carries
        (the longest, should two failed servers' prefixes start alike), or None."""
        prefixes = [(server_prefix(s), s) for s in self._runtime.load_errors]
        carried = [(len(p), s) for p, s in prefixes if name.startswith(p)]
        return max(carried)[1] if carried else None

    def _copy_with(self, specs: Sequence[ToolSpec], runtime_mode: RuntimeMode) -> MCPToolCatalog:
        descriptions, filtered = self._given
        return type(self)(
            specs,
            runtime=self._runtime,
            category_descriptions=descriptions,
            filtered=filtered,
            runtime_mode=runtime_mode,
            untrusted_descriptions=self._untrusted,
        )

    async def aclose(self) -> None:
        """Close the MCP sessions (stopping stdio server processes). Idempotent."""
        await self._runtime.aclose()

    def close(self) -> None:
        """Sync :meth:`aclose`, for code without an event loop. Idempotent."""
        self._runtime.close()
