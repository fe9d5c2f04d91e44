"""choose_tools: classify_intent, select_tools and tool_search run as one graph step.

Its one reason to change: how the three selection nodes run together in one step.

Key Components:
    - :class:`ChooseTools`: the three nodes' own objects run in order, each on the state
      the previous one left (merged through the state's reducers), returning the one
      update that turns the state into their result.

Each LangGraph superstep costs a checkpoint write, task scheduling and stream bookkeeping,
however little its node does; the three selection nodes together take well under a
millisecond, so as three steps they cost more in LangGraph than in their own work. The
prebuilt graph and the middleware run them as this one node; the three nodes stay public
for graphs that wire them one by one (see ``docs/selection.md``).

Typical Usage:
    ```python
    graph.add_node("choose_tools", ChooseTools(catalog, max_tools=8))
    graph.add_edge(START, "choose_tools")
    graph.add_edge("choose_tools", "agent")
    ```
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from typing_extensions import Unpack

from langgraph_toolbudget.config import BudgetConfig, BudgetOptions, check_node_options
from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.core.working_set import state_fields
from langgraph_toolbudget.nodes._node import BudgetNode
from langgraph_toolbudget.nodes.intent import ClassifyIntent
from langgraph_toolbudget.nodes.models import ChatModelSpec, resolve_chat_model
from langgraph_toolbudget.nodes.selection import SelectTools, ToolSearch
from langgraph_toolbudget.state import apply_update, state_delta

__all__ = ["ChooseTools"]

CATEGORY_FIELDS = ("categories", "category_scores")


class ChooseTools(BudgetNode):
    """Node: :class:`ClassifyIntent`, :class:`SelectTools` and :class:`ToolSearch` in one step.

    Runs the three nodes (``steps``) in order, each on the state the one before it
    left, and returns the update that turns the input state into the last one's:
    the same categories, visible set, ``tool_reasons`` and stream events (each step
    emits its own, named after it) as the three nodes wired one after the other, in
    one LangGraph superstep instead of three.

    Input: ``messages`` and the budget fields. Output: ``categories``,
    ``category_scores`` when they changed, and the visible-set update (see
    :class:`SelectTools`); ``{}`` when nothing changed.

    Args:
        catalog: the tool catalog.
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`).
        classifier_model: optional chat model for the classification (see
            :class:`ClassifyIntent`).
        name: node name; the steps are named ``classify_intent``, ``select_tools`` and
            ``tool_search`` after ``prefix``.
        prefix: prepended to the steps' names (the names their stream events carry).
        **options: any ``BudgetConfig`` option, over ``config``'s value.

    Raises:
        TypeError: ``catalog`` is not a ``ToolCatalog``, or ``config`` not a
            ``BudgetConfig``; an unknown option (the message names the node and the
            closest of its own keywords and the ``BudgetConfig`` options); an option of
            the wrong type, named with the node (``prefix=1``, ``max_tools="3"``); a
            ``classifier_model`` that is not a chat model or a model string
            (``object()``).
        ValueError: an option out of range, named with the node (``max_tools=-1``,
            ``name=""``); an ``enabled_builtins`` name that is a near miss of a
            built-in's (``"tool_serch"``: the message names the built-in and the
            corrected value); what :class:`SelectTools` and :class:`ToolSearch` refuse
            (an unknown ``pinned`` name, ``max_visible`` below the tools visible without
            budget, a ``usage`` of another catalog), named with the step; a
            ``classifier_model`` string ``init_chat_model`` does not know.
        ModelUnavailableError: a ``classifier_model`` string whose provider package is
            not installed (:class:`~langgraph_toolbudget.nodes.models.ModelUnavailableError`).

    Example:
        ```python
        graph.add_node("choose_tools", ChooseTools(catalog, max_tools=8))
        ```
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        classifier_model: ChatModelSpec | None = None,
        name: str = "choose_tools",
        prefix: str = "",
        **options: Unpack[BudgetOptions],
    ) -> None:
        super().__init__(name)
        check_node_options(ChooseTools, prefix=prefix)
        catalog = require_catalog(catalog, "ChooseTools")
        self.config = shared = BudgetConfig.resolve(config, options, owner=ChooseTools)
        if classifier_model is not None:
            what = "ChooseTools: option classifier_model"
            classifier_model = resolve_chat_model(classifier_model, what=what)
        self.steps: tuple[ClassifyIntent, SelectTools, ToolSearch] = (
            ClassifyIntent(
                catalog, config=shared, model=classifier_model, name=f"{prefix}classify_intent"
            ),
            SelectTools(catalog, config=shared, name=f"{prefix}select_tools"),
            ToolSearch(catalog, config=shared, name=f"{prefix}tool_search"),
        )

    def run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        start = state_fields(state)
        chosen = start
        for step in self.steps:
            chosen = apply_update(chosen, step.run(chosen, config))
        return state_delta(start, chosen, CATEGORY_FIELDS)

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        start = state_fields(state)
        chosen = start
        for step in self.steps:
            chosen = apply_update(chosen, await step.arun(chosen, config))
        return state_delta(start, chosen, CATEGORY_FIELDS)
