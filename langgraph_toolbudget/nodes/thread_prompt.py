"""The tools section and built-ins one thread's model call is given.

Its one reason to change: what one thread's model call is told about its tools.

A thread that excluded every tool of a category (a whole server, say) must not
be told that the category exists: neither the system prompt's tools section nor
``request_more_tools``' description lists it. Threads without exclusions share
the node's section and built-ins, so the prompt prefix stays the same for them
(and a provider's prompt cache keeps working).

A category description an MCP server wrote (its ``initialize`` instructions,
``catalog.untrusted_descriptions``) is third-party text: the section shows it only
while the category is in play (chosen for the request, or one of its tools visible),
never in every thread; the loader has cut it to 1,000 characters.

Key Components:
    - :func:`tools_prompt_section`: the system-prompt section that lists the
      categories and how to widen the tool set (re-exported by ``nodes.prompt``).
    - :class:`ThreadPrompt`: the section and the built-in tools for a state.
    - :func:`tools_to_bind`: every tool the model may call this turn, for your own model node.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from typing_extensions import Unpack

from langgraph_toolbudget.config import BudgetConfig, BudgetOptions
from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.meta import (
    ADD_TOOL,
    META_TOOL_NAMES,
    REQUEST_MORE_TOOLS,
    SEARCH_TOOLS,
    SHOW_ALL_TOOLS,
    meta_tool_definitions,
)
from langgraph_toolbudget.core.selection import free_tools
from langgraph_toolbudget.core.working_set import WorkingSet, state_messages, state_names
from langgraph_toolbudget.execution.builtins import Builtins
from langgraph_toolbudget.execution.offload import holds_offloaded_output
from langgraph_toolbudget.execution.output_tools import OUTPUT_TOOL_NAMES

__all__ = ["ThreadPrompt", "tools_prompt_section", "tools_to_bind"]

MAX_VARIANTS = 64
"""Per-thread variants kept (keyed by the hidden categories); the cache is emptied when full."""


def tools_prompt_section(
    catalog: ToolCatalog,
    builtins: Collection[str] = META_TOOL_NAMES,
    categories: Collection[str] | None = None,
    *,
    in_play: Collection[str] = (),
) -> str:
    """The system-prompt section: categories (sorted) and how to widen the tool set.

    Args:
        catalog: the tool catalog.
        builtins: the built-in tools the model is given (default: the four
            meta-tools); only those are explained.
        categories: the categories to list (default: all of the catalog's), e.g.
            without those a thread excluded.
        in_play: the categories whose server-written description
            (``catalog.untrusted_descriptions``) is shown: those chosen for the
            request or with a visible tool. Other categories' descriptions are the
            app's and always shown.

    Returns:
        The section's Markdown text: a ``## Tools`` heading, one line per category (with
        its description where shown), then a line for each of ``builtins``' meta-tools
        that widen the tool set (none when ``builtins`` has none of them).

    Raises:
        TypeError: ``catalog`` is not a ``ToolCatalog``.
    """
    catalog = require_catalog(catalog, "tools_prompt_section")
    descriptions = catalog.category_descriptions
    untrusted = catalog.untrusted_descriptions
    lines = [
        "## Tools",
        "You see a small set of tools chosen for this request. Only the tools you see can be "
        "called. More tools exist in these categories:",
    ]
    for cat in sorted(catalog.categories if categories is None else categories):
        shown = descriptions.get(cat) and (cat not in untrusted or cat in in_play)
        lines.append(f"- {cat}: {descriptions[cat]}" if shown else f"- {cat}")
    how = []
    if REQUEST_MORE_TOOLS in builtins:
        how.append("- request_more_tools(categories=[...]) loads the tools of whole categories;")
    if SEARCH_TOOLS in builtins and ADD_TOOL in builtins:
        how.append(
            '- search_tools(query="regex") finds tools by name or description, then '
            "add_tool(tool_names=[...]) loads the ones you need;"
        )
    elif SEARCH_TOOLS in builtins:
        how.append('- search_tools(query="regex") finds tools by name or description;')
    elif ADD_TOOL in builtins:
        how.append("- add_tool(tool_names=[...]) loads tools by name;")
    if SHOW_ALL_TOOLS in builtins:
        how.append("- show_all_tools() lists every tool name.")
    if how:
        lines += ["If your tools cannot do the task:", *how]
    return "\n".join(lines)


class ThreadPrompt:
    """The tools section and the built-in tools the model sees, per thread.

    Args:
        catalog: the catalog, in the node's runtime mode.
        builtins: the node's enabled built-ins.

    Attributes:
        section: the section of a thread without exclusions (all categories).
        tools: the built-in tools of a thread without exclusions.
    """

    def __init__(self, catalog: ToolCatalog, builtins: Builtins) -> None:
        self.catalog = catalog
        self.names = builtins.names
        self.section = tools_prompt_section(catalog, self.names)
        self.tools: list[BaseTool] = list(builtins.tools)
        self._variants: dict[Any, tuple[str, list[BaseTool]]] = {}
        self._schemas: dict[tuple[str, str], dict[str, Any]] = {}
        # Room for every catalog tool and the built-ins of each variant kept (their
        # descriptions differ per thread context): emptied when full, as the variants are.
        self._max_schemas = len(catalog) + len(self.tools) * (MAX_VARIANTS + 1)

    def schema(self, tool: BaseTool) -> dict[str, Any]:
        """The OpenAI schema of ``tool``, kept per name and description in a bounded cache
        (a middleware listed before the budget may rewrite descriptions on every call)."""
        key = (tool.name, tool.description)
        found = self._schemas.get(key)
        if found is None:
            if len(self._schemas) >= self._max_schemas:
                self._schemas.clear()
            found = self._schemas[key] = convert_to_openai_tool(tool)
        return found

    def in_play(self, state: Any) -> tuple[str, ...]:
        """The categories with a server-written description that the thread of ``state``
        has in play: chosen for its request (``categories``) or with a visible tool."""
        untrusted = self.catalog.untrusted_descriptions
        if not untrusted:
            return ()
        chosen = set(state_names(state, "categories"))
        for name in state_names(state, "selected_tools"):
            spec = self.catalog.get(name)
            if spec is not None:
                chosen.update(spec.categories)
        return tuple(sorted(untrusted & chosen))

    def for_state(self, state: Any) -> tuple[str, list[BaseTool]]:
        """The section and built-in tools for the thread whose state this is.

        The output tools come only once the conversation holds an offloaded output: before
        that there is nothing for them to read, and their schemas would cost every call.
        """
        hidden = tuple(SessionContext.from_state(state).hidden_categories(self.catalog))
        in_play = self.in_play(state)
        if not hidden and not in_play:
            section, tools = self.section, self.tools
        else:
            key = (hidden, in_play)
            variant = self._variants.get(key)
            if variant is None:
                if len(self._variants) >= MAX_VARIANTS:
                    self._variants.clear()
                variant = self._variants[key] = self._variant(set(hidden), in_play)
            section, tools = variant
        if self._has_output_tools and not holds_offloaded_output(state_messages(state)):
            tools = [t for t in tools if t.name not in OUTPUT_TOOL_NAMES]
        return section, tools

    @property
    def _has_output_tools(self) -> bool:
        return not set(OUTPUT_TOOL_NAMES).isdisjoint(self.names)

    def bound(self, working: WorkingSet, state: Any = None) -> list[BaseTool]:
        """What the model may call: the built-ins the thread of ``state`` gets (all of the
        node's without a state), then the visible tools of ``working``, in that order."""
        builtins = self.tools if state is None else self.for_state(state)[1]
        return [*builtins, *self.catalog.tools(working.names)]

    def _variant(self, hidden: set[str], in_play: tuple[str, ...]) -> tuple[str, list[BaseTool]]:
        shown = [c for c in self.catalog.categories if c not in hidden]
        section = tools_prompt_section(self.catalog, self.names, shown, in_play=in_play)
        request = meta_tool_definitions(shown)[0]
        tools = [request if t.name == REQUEST_MORE_TOOLS else t for t in self.tools]
        return section, tools


@functools.lru_cache(maxsize=32)
def _thread_prompt(catalog: ToolCatalog, config: BudgetConfig) -> ThreadPrompt:
    return ThreadPrompt(catalog, Builtins(catalog, config))


def tools_to_bind(
    catalog: ToolCatalog,
    state: Any,
    *,
    config: BudgetConfig | None = None,
    **options: Unpack[BudgetOptions],
) -> list[BaseTool]:
    """Every tool the model may call this turn, for a model node of your own.

    The enabled built-ins (the meta-tools; the output tools once the conversation holds an
    offloaded output, while offloading is on; the context tools when enabled) and the visible
    tools, in the thread's tool context: what ``CallModel`` binds. Nothing hidden, excluded or
    filtered is in it.

    Args:
        catalog: the tool catalog.
        state: the graph state (``messages``, ``selected_tools`` and the tool context).
        config: the options your other nodes share
            (:class:`~langgraph_toolbudget.config.BudgetConfig`).
        **options: any ``BudgetConfig`` option, over ``config``'s value.

    Returns:
        The tools, built-ins first (in binding order), then the visible tools: what
        ``CallModel`` binds for this state, ready for ``model.bind_tools``.

    Raises:
        TypeError: ``catalog`` is not a ``ToolCatalog``, or ``config`` not a
            ``BudgetConfig``; an unknown option (the message names ``tools_to_bind`` and
            the closest of its own keywords and the ``BudgetConfig`` options); an option
            of the wrong type (``max_tools="3"``).
        ValueError: an option out of range (``max_tools=-1``); an ``enabled_builtins``
            name that is a near miss of a built-in's (``"serch_tools"``: the message names
            the built-in and the corrected value); a catalog tool with the name of an
            enabled built-in; a ``pinned`` name that is not a tool of the catalog in its
            ``runtime_mode``.

    Example:
        ```python
        def agent(state):
            bound = model.bind_tools(tools_to_bind(catalog, state, config=config))
            return {"messages": [bound.invoke(state["messages"])]}
        ```
    """
    config = BudgetConfig.resolve(config, options, owner=tools_to_bind)
    view = require_catalog(catalog, "tools_to_bind").in_runtime_mode(config.runtime_mode)
    free = free_tools(view, config.pinned)
    working = SessionContext.from_state(state).working_set(state, view, free)
    return _thread_prompt(view, config).bound(working, state)
