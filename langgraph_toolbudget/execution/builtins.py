"""Built-in tools: tools the executor answers itself instead of running them.

The meta-tools are the first family; every feature that gives the model tools
of its own (reading offloaded outputs, managing the thread's tool context)
adds a family here, and the executor, the agent and the model call pick it up:
the model is bound to the enabled built-ins of every family, a call to one is
intercepted and answered before the regular calls of its batch, and
``enabled_builtins`` (see :mod:`langgraph_toolbudget.core.gating`) chooses
which ones are on.

Key Components:
    - :class:`BuiltinTools`: one family: its tool definitions and its answers.
    - :class:`BuiltinContext` / :class:`BuiltinResult`: what an answer sees and gives.
    - :class:`MetaTools`: the four meta-tools as a family.
    - :class:`Builtins`: the enabled built-ins of a node, by name.
    - :func:`builtin_families`: every family a configuration turns on (the
      one place a new family is registered).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.gating import BuiltinFilter
from langgraph_toolbudget.core.meta import MetaToolHandler, meta_tool_definitions
from langgraph_toolbudget.core.working_set import WorkingSet

__all__ = [
    "BUILTIN_NAME_ERROR",
    "BuiltinContext",
    "BuiltinResult",
    "BuiltinTools",
    "Builtins",
    "MetaTools",
    "builtin_families",
    "merge_update",
]

BUILTIN_NAME_ERROR = (
    "catalog tools {names} have the names of built-in tools, which the agent binds itself; "
    "rename those tools (e.g. with a server prefix) or turn those built-ins off with "
    "enabled_builtins={{'deny': [...]}}."
)


@dataclass
class BuiltinContext:
    """What a built-in's answer may read.

    Attributes:
        state: the graph state the batch runs in (messages, budget fields, ...).
        config: the run's ``RunnableConfig`` (thread id, store, ...).
        working: the visible set, changed in place by answers that load tools.
        query: the latest user message.
    """

    state: Any
    config: RunnableConfig
    working: WorkingSet
    query: str = ""


@dataclass
class BuiltinResult:
    """A built-in's answer.

    Attributes:
        content: the tool message's content for the model.
        error: whether the tool message has ``status="error"``.
        artifact: the tool message's artifact (data for UIs and tests, not the model).
        update: extra state update (fields other than the budget fields, which
            the working set carries); merged over the batch with :func:`merge_update`.
        discovered: tools found but not made visible (``discovered_tools``).
    """

    content: str | list[str | dict[Any, Any]]
    error: bool = False
    artifact: Any = None
    update: dict[str, Any] = field(default_factory=dict)
    discovered: list[str] = field(default_factory=list)


def merge_update(into: dict[str, Any], update: dict[str, Any]) -> None:
    """Merge one answer's state update into a batch's: lists extend, dicts merge, else replace."""
    for key, value in update.items():
        old = into.get(key)
        if isinstance(old, list) and isinstance(value, list):
            into[key] = [*old, *value]
        elif isinstance(old, dict) and isinstance(value, dict):
            into[key] = {**old, **value}
        else:
            into[key] = value


class BuiltinTools(ABC):
    """A family of built-in tools.

    Subclasses set the class attributes and implement :meth:`definitions` and
    :meth:`handle`; :meth:`ahandle` runs :meth:`handle` in a worker thread
    unless overridden, so a slow answer never blocks the event loop.

    Attributes:
        default_enabled: on when ``enabled_builtins`` does not name the family's tools.
        counts_as_meta: calls count against ``max_meta_calls`` per user turn.
    """

    default_enabled: ClassVar[bool] = True
    counts_as_meta: ClassVar[bool] = False

    @abstractmethod
    def definitions(self) -> list[BaseTool]:
        """The family's tools as the model sees them (their bodies never run)."""

    @abstractmethod
    def handle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        """Answer one call. Bad arguments are answered with ``error=True``, never raised."""

    async def ahandle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        """Answer one call from async code (by default :meth:`handle` in a thread)."""
        return await asyncio.to_thread(self.handle, call, ctx)


class MetaTools(BuiltinTools):
    """The meta-tools (``request_more_tools``, ``search_tools``, ``add_tool``,
    ``show_all_tools``) as a built-in family.

    Args:
        catalog: the catalog, in the node's runtime mode.
        config: the shared options (budget and floor of ``request_more_tools``).
    """

    counts_as_meta = True

    def __init__(self, catalog: ToolCatalog, config: BudgetConfig) -> None:
        self.catalog = catalog
        self.handler = MetaToolHandler(
            catalog, max_tools=config.budget, min_per_category=config.min_per_category
        )

    def definitions(self) -> list[BaseTool]:
        return meta_tool_definitions(self.catalog.categories)

    def handle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        context = SessionContext.from_state(ctx.state)
        outcome = self.handler.handle(
            call["name"], call.get("args", {}), ctx.working, ctx.query, context=context
        )
        return BuiltinResult(outcome.content, error=outcome.error, discovered=outcome.discovered)


def builtin_families(catalog: ToolCatalog, config: BudgetConfig) -> list[BuiltinTools]:
    """Every built-in family for ``catalog`` under ``config``, enabled or not.

    New families are registered here, so every node binds and answers the same set.
    """
    from langgraph_toolbudget.execution.context_tools import ContextTools  # imports this module

    families: list[BuiltinTools] = [MetaTools(catalog, config), ContextTools(catalog)]
    if config.offloading:
        from langgraph_toolbudget.execution.output_tools import OutputTools  # imports this module

        families.append(OutputTools(config))
    return families


class Builtins:
    """The enabled built-in tools of one node, by name.

    Args:
        catalog: the catalog (its tool names must not shadow an enabled built-in).
        config: the shared options; ``config.enabled_builtins`` is the gate.
        families: the families to choose from (default: :func:`builtin_families`).

    Raises:
        ValueError: a catalog tool has the name of an enabled built-in.
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        config: BudgetConfig,
        families: Sequence[BuiltinTools] | None = None,
    ) -> None:
        if families is None:
            families = builtin_families(catalog, config)
        gate: BuiltinFilter = config.builtin_filter
        self.tools: list[BaseTool] = []
        self._family: dict[str, BuiltinTools] = {}
        for family in families:
            for tool in family.definitions():
                if gate.allows(tool.name, default=family.default_enabled):
                    self.tools.append(tool)
                    self._family[tool.name] = family
        clash = sorted(n for n in self._family if catalog.get(n) is not None)
        if clash:
            raise ValueError(BUILTIN_NAME_ERROR.format(names=clash))

    @property
    def names(self) -> tuple[str, ...]:
        """The enabled built-ins' names, in binding order."""
        return tuple(t.name for t in self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self._family

    def family(self, name: str) -> BuiltinTools:
        """The family that answers ``name`` (an enabled built-in)."""
        return self._family[name]

    def counts_as_meta(self, name: str) -> bool:
        """Whether a call to ``name`` spends the per-turn meta-call allowance."""
        family = self._family.get(name)
        return family is not None and family.counts_as_meta
