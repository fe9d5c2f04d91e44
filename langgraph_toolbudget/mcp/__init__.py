"""MCP servers as a tool catalog, over persistent sessions on one background loop.

Its one reason to change: what the MCP layer exports.

Key Components:
    - :func:`load_mcp_catalog` (also ``from langgraph_toolbudget import
      load_mcp_catalog``): load the tools of several MCP servers into one
      :class:`MCPToolCatalog`. Each tool is tagged with its server; its category
      is the server name; the server's ``initialize`` instructions become the
      category description. Its options are :class:`MCPLoadOptions`.
    - :class:`MCPToolCatalog`: a ``ToolCatalog`` that owns its
      :class:`MCPRuntime` (``catalog.mcp``), lists the servers that failed to
      load (``catalog.load_errors``) and closes the sessions (``aclose()``,
      ``close()``, ``async with``).
    - :class:`MCPRuntime`: owns one persistent MCP session per server, all on
      one background event-loop thread. Tools call through it from any thread
      or event loop: sync ``invoke`` blocks on the background loop, async
      ``ainvoke`` awaits it without blocking. A dead session is re-opened on the
      next call.
    - :class:`MCPCatalogTool`: the LangChain tool of one MCP tool. Its args
      schema is the MCP input JSON schema; its metadata holds the server, the
      MCP name and the MCP annotations.
    - :class:`MCPServerError`: a call failed because of the server or the
      connection (down, crashed, timed out); the message names the server.
    - :class:`MCPLoadError`: ``strict=True`` and a server failed to load.

Naming rule:
    A tool keeps its MCP name unless another loaded server has a tool of the
    same name; then *every* tool of that name becomes ``<server>__<name>``
    (server name with characters outside ``[A-Za-z0-9_-]`` replaced by ``_``; a name
    with no ASCII letter or digit is ``_`` and 8 hex digits of its hash).
    ``tool_name_prefix=True`` applies the prefix to every tool. The call always
    uses the server's own name (``tool.mcp_name``). A server's names are untrusted
    (:mod:`~langgraph_toolbudget.mcp.names`): one that is not provider-safe is
    mapped to a safe one; one that is a built-in's, a local tool's or imitates
    another server's (``<other>__...``) gets its own server's prefix.

Typical Usage:
    ```python
    catalog = await load_mcp_catalog(
        {"math": {"transport": "stdio", "command": "python", "args": ["math_server.py"]}}
    )
    async with catalog:
        graph = create_toolbudget_agent(model, catalog).compile()
        await graph.ainvoke({"messages": [("user", "add 2 and 3")]})
    ```
"""

from langgraph_toolbudget.mcp.catalog import MCPToolCatalog, mcp_tool_name
from langgraph_toolbudget.mcp.errors import MCPLoadError, MCPLoadWarning, MCPServerError
from langgraph_toolbudget.mcp.loader import MCPLoadOptions, load_mcp_catalog, load_mcp_catalog_sync
from langgraph_toolbudget.mcp.runtime import MCPRuntime, MCPServerInfo
from langgraph_toolbudget.mcp.tool import MCPCatalogTool

__all__ = [
    "MCPCatalogTool",
    "MCPLoadError",
    "MCPLoadOptions",
    "MCPLoadWarning",
    "MCPRuntime",
    "MCPServerError",
    "MCPServerInfo",
    "MCPToolCatalog",
    "load_mcp_catalog",
    "load_mcp_catalog_sync",
    "mcp_tool_name",
]
