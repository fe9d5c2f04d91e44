"""Which calls may run: the check stage's policy, and the errors a refused call gets.

Key Components:
    - :class:`VisibilityPolicy`: a call to a tool that is unknown, filtered,
      disabled or (with ``enforce_visibility``) not visible is not run; the
      model gets an error naming the closest real tools and how to load one.
"""

from __future__ import annotations

from collections.abc import Container

from rapidfuzz import fuzz, process

from langgraph_toolbudget.core.catalog import ToolCatalog

__all__ = ["HOW_TO_LOAD", "UNAVAILABLE_TOOL_ERROR", "VisibilityPolicy"]

UNAVAILABLE_TOOL_ERROR = "Error: {tool!r} {problem}. {closest}{how}"
HOW_TO_LOAD = (
    "To load a tool: call add_tool(tool_names=[...]) with its exact name, search_tools(query=...) "
    "to find one, or request_more_tools(categories=[...]) for a whole category."
)
NOT_LOADED = "exists but is not loaded, so it was not run"
LOAD_IT_FIRST = "Load it first with add_tool(tool_names=[{tool!r}]), then call it again."
FILTERED = "is filtered out by this app's configuration and cannot be used"
DISABLED = "is disabled and cannot be used"
UNKNOWN = "is not a tool of this app, so it was not run"


class VisibilityPolicy:
    """Decides whether a call may run, and words the refusal for the model.

    Args:
        catalog: the tool catalog.
        enforce_visibility: refuse calls to tools that exist but are not visible.
    """

    def __init__(self, catalog: ToolCatalog, *, enforce_visibility: bool = True) -> None:
        self.catalog = catalog
        self.enforce_visibility = enforce_visibility

    def closest_tools(self, name: str, limit: int = 3) -> list[str]:
        """Real tool names closest to ``name`` (spelling, then meaning)."""
        names = self.catalog.tool_names
        spelled = [
            n
            for n, score, _ in process.extract(name, names, scorer=fuzz.WRatio, limit=limit)
            if score >= 70
        ]
        related = [n for n, _ in self.catalog.index.rank_names(name.replace("_", " "), limit=limit)]
        closest = list(dict.fromkeys([*spelled, *related]))[:limit]
        if not closest:  # nothing close: still name the nearest spellings
            closest = [
                n for n, _, _ in process.extract(name, names, scorer=fuzz.WRatio, limit=limit)
            ]
        return closest

    def unavailable(self, name: str, visible: Container[str]) -> str | None:
        """Why a call to ``name`` may not run (an error for the model), or None."""
        catalog = self.catalog
        if name in catalog:
            if not self.enforce_visibility or name in visible:
                return None
            return UNAVAILABLE_TOOL_ERROR.format(
                tool=name, problem=NOT_LOADED, closest="", how=LOAD_IT_FIRST.format(tool=name)
            )
        if catalog.is_filtered(name):
            problem = FILTERED
        elif catalog.is_disabled(name):
            problem = DISABLED
        else:
            problem = UNKNOWN
        closest = self.closest_tools(name)
        hint = f"Closest tools: {', '.join(closest)}. " if closest else ""
        return UNAVAILABLE_TOOL_ERROR.format(
            tool=name, problem=problem, closest=hint, how=HOW_TO_LOAD
        )
