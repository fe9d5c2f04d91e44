"""The LangChain tool of one MCP tool, calling through the catalog's :class:`MCPRuntime`.

Its one reason to change: how one MCP tool is called as a LangChain tool.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.tools import BaseTool
from pydantic import ConfigDict, Field

from langgraph_toolbudget.mcp.runtime import MCPRuntime


class MCPCatalogTool(BaseTool):
    """A LangChain tool that calls one MCP tool through the catalog's :class:`MCPRuntime`.

    Works under ``invoke`` (blocks on the runtime's loop) and ``ainvoke``
    (awaits it without blocking), from any thread or event loop. The args
    schema is the MCP input JSON schema; results are converted like the
    adapters' tools (``content_and_artifact``); an MCP ``isError`` result
    becomes an error tool message, a server or connection failure raises
    :class:`MCPServerError`.

    Attributes:
        server: the MCP server's name in the catalog.
        mcp_name: the tool's name on the server (what the call uses).
        timeout_s: bound on a call, sync or async, wherever it runs (``ToolNode``, a
            direct ``invoke``); under the executor its own timeout, the same, applies too.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    server: str
    mcp_name: str
    timeout_s: float | None = None
    mcp_runtime: MCPRuntime = Field(exclude=True, repr=False)
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    # No run_manager/config parameters: BaseTool then passes only the tool's own
    # arguments, whatever their names.
    def _run(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return self.mcp_runtime.call(
            self.server, self.name, self.mcp_name, kwargs, timeout_s=self.timeout_s
        )

    async def _arun(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return await self.mcp_runtime.acall(
            self.server, self.name, self.mcp_name, kwargs, timeout_s=self.timeout_s
        )
