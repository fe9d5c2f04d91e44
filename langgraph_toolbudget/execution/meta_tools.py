"""The meta-tools as a built-in family: the executor answers them through ``MetaToolHandler``.

Its one reason to change: how the executor answers the four meta-tools (their definitions
and answers are :mod:`langgraph_toolbudget.core.meta`'s).

Key Components:
    - :class:`MetaTools`: ``request_more_tools``, ``search_tools``, ``add_tool``,
      ``show_all_tools``, on by default; their calls count against ``max_meta_calls``.
"""

from __future__ import annotations

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.meta import (
    META_TOOL_NAMES,
    MetaToolHandler,
    meta_tool_definitions,
)
from langgraph_toolbudget.core.working_set import LOADED
from langgraph_toolbudget.execution.builtin_family import (
    BuiltinContext,
    BuiltinResult,
    BuiltinTools,
)

__all__ = ["MetaTools"]


class MetaTools(BuiltinTools):
    """The meta-tools (``request_more_tools``, ``search_tools``, ``add_tool``,
    ``show_all_tools``) as a built-in family.

    Args:
        catalog: the catalog, in the node's runtime mode.
        config: the shared options (budget and floor of ``request_more_tools``).
    """

    counts_as_meta = True
    coerces_args = False  # read leniently by MetaToolHandler: "a, b" is two names, not one

    def __init__(self, catalog: ToolCatalog, config: BudgetConfig) -> None:
        self.catalog = catalog
        gate = config.builtin_filter
        self.enabled = [n for n in META_TOOL_NAMES if gate.allows(n, default=self.default_enabled)]
        self.handler = MetaToolHandler(
            catalog,
            max_tools=config.budget,
            min_per_category=config.min_per_category,
            enabled=self.enabled,
        )

    def definitions(self) -> list[BaseTool]:
        return meta_tool_definitions(self.catalog.categories, enabled=self.enabled)

    def handle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        outcome = self.handler.handle(
            call["name"],
            call.get("args", {}),
            ctx.working,
            ctx.query,
            context=ctx.context,
            outside_tools=ctx.outside_tools,
            closes_loading=ctx.closes_loading,
        )
        loaded = {LOADED: list(outcome.added)} if outcome.added else None
        return BuiltinResult(
            outcome.content, error=outcome.error, discovered=outcome.discovered, artifact=loaded
        )
