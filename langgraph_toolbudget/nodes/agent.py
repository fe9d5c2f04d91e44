"""The model side: call the model with meta-tools + visible tools, loop, and the prebuilt graph.

Key Components:
    - :func:`tools_prompt_section`: the system-prompt section that lists the
      categories and how to widen the tool set.
    - :class:`CallModel`: node that calls the model once (graph-level loop
      with :class:`~langgraph_toolbudget.nodes.executor.ToolExecutor`).
    - :class:`ToolAgent`: one node that loops model -> tools inside itself.
    - :func:`create_toolbudget_agent`: the whole graph, uncompiled:
      classify_intent -> select_tools -> tool_search -> agent <-> tools.
    - :func:`add_toolbudget_nodes`: the same nodes added to a user's graph.

Typical Usage:
    ```python
    graph = create_toolbudget_agent(model, catalog, max_tools=8, mode="parallel_safe")
    app = graph.compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "1"}}
    out = app.invoke({"messages": [HumanMessage("open an issue")]}, config)
    ```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import repair_tool_calls
from langgraph_toolbudget.core.meta import check_meta_name_clash, meta_tool_definitions
from langgraph_toolbudget.core.selection import _resolve_budget, free_tools
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.nodes._node import BudgetNode
from langgraph_toolbudget.nodes.executor import (
    ExecutionMode,
    ToolExecution,
    ToolExecutor,
    TurnOutcome,
    outcome_update,
)
from langgraph_toolbudget.nodes.intent import ClassifyIntent
from langgraph_toolbudget.nodes.selection import SelectTools, ToolSearch
from langgraph_toolbudget.state import ToolBudgetState, state_get, state_messages

__all__ = [
    "CallModel",
    "ToolAgent",
    "add_toolbudget_nodes",
    "create_toolbudget_agent",
    "tools_prompt_section",
]

ITERATION_LIMIT_MESSAGE = (
    "I stopped after {n} model calls in this turn (max_iterations={n}) without finishing. "
    "Here is where things stand; ask me to continue if you want me to go on."
)
STATE_SCHEMA_ERROR = (
    "the graph's state schema has no {missing} field(s). Extend ToolBudgetState: "
    "`class MyState(ToolBudgetState): ...` and build StateGraph(MyState)."
)


def tools_prompt_section(catalog: ToolCatalog) -> str:
    """The system-prompt section: categories (sorted) and how to widen the tool set."""
    descriptions = catalog.category_descriptions
    lines = [
        "## Tools",
        "You see a small set of tools chosen for this request. Only the tools you see can be "
        "called. More tools exist in these categories:",
    ]
    for cat in sorted(catalog.categories):
        lines.append(f"- {cat}: {descriptions[cat]}" if descriptions.get(cat) else f"- {cat}")
    lines += [
        "If your tools cannot do the task:",
        "- request_more_tools(categories=[...]) loads the tools of whole categories;",
        '- search_tools(query="regex") finds tools by name or description, then '
        "add_tool(tool_names=[...]) loads the ones you need;",
        "- show_all_tools() lists every tool name.",
    ]
    return "\n".join(lines)


def _ai_calls_this_turn(messages: Sequence[BaseMessage]) -> int:
    count = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage):
            count += 1
    return count


class _ModelCaller:
    """Binds meta-tools + visible tools and builds the prompt; shared by both agent nodes."""

    def __init__(
        self, model: BaseChatModel, catalog: ToolCatalog, system_prompt: str | None
    ) -> None:
        check_meta_name_clash(catalog)
        self.model = model
        self.catalog = catalog
        self.system_prompt = system_prompt
        self.meta_tools = meta_tool_definitions(catalog.categories)
        self.section = tools_prompt_section(catalog)

    def prompt(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Messages with one system message first: the user's own (kept) plus our section."""
        messages = list(messages)
        own = [self.system_prompt] if self.system_prompt else []
        if messages and isinstance(messages[0], SystemMessage):
            first = messages.pop(0)
            own.append(first.text if hasattr(first, "text") else str(first.content))
        return [SystemMessage("\n\n".join([*own, self.section])), *messages]

    def bound(self, working: WorkingSet) -> Any:
        tools = [*self.meta_tools, *self.catalog.tools(working.names)]
        return self.model.bind_tools(tools)

    def invoke(
        self, messages: Sequence[BaseMessage], working: WorkingSet, config: RunnableConfig
    ) -> AIMessage:
        return repair_tool_calls(self.bound(working).invoke(self.prompt(messages), config))

    async def ainvoke(
        self, messages: Sequence[BaseMessage], working: WorkingSet, config: RunnableConfig
    ) -> AIMessage:
        return repair_tool_calls(await self.bound(working).ainvoke(self.prompt(messages), config))


class CallModel(BudgetNode):
    """Node: call the model once with the meta-tools first, then the visible tools.

    The visible tools keep their order across calls (new ones are appended), so
    the prompt prefix stays cacheable. A system-prompt section lists the
    categories and how to widen the tool set; a system message already at the
    start of ``messages`` (or ``system_prompt``) is kept, ahead of it.

    After ``max_iterations`` model calls in one user turn the node answers with
    a final message instead of calling the model again.

    Args:
        model: any chat model that supports ``bind_tools``.
        catalog: the tool catalog.
        system_prompt: your own system prompt.
        pinned: tools always visible.
        max_iterations: model calls allowed per user turn.
        name: node name.
    """

    def __init__(
        self,
        model: BaseChatModel,
        catalog: ToolCatalog,
        *,
        system_prompt: str | None = None,
        pinned: Sequence[str] = (),
        max_iterations: int = 5,
        name: str = "agent",
    ) -> None:
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
        super().__init__(name)
        self.caller = _ModelCaller(model, catalog, system_prompt)
        self.pinned = free_tools(catalog, pinned)
        self.max_iterations = max_iterations

    def _limit_hit(self, messages: Sequence[BaseMessage]) -> dict[str, Any] | None:
        if _ai_calls_this_turn(messages) >= self.max_iterations:
            final = ITERATION_LIMIT_MESSAGE.format(n=self.max_iterations)
            return {"messages": [AIMessage(final)]}
        return None

    def run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = state_messages(state)
        if (stop := self._limit_hit(messages)) is not None:
            return stop
        working = WorkingSet.from_state(state, base=self.pinned)
        return {"messages": [self.caller.invoke(messages, working, config)]}

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = state_messages(state)
        if (stop := self._limit_hit(messages)) is not None:
            return stop
        working = WorkingSet.from_state(state, base=self.pinned)
        return {"messages": [await self.caller.ainvoke(messages, working, config)]}


class ToolAgent(BudgetNode):
    """One node that loops model -> tools until the model answers (seed 003 style).

    Each iteration binds the meta-tools and the visible tools, calls the model,
    and runs its tool calls through the same core as
    :class:`~langgraph_toolbudget.nodes.executor.ToolExecutor` (meta-calls first,
    enforcement, coercion, ``sequential``/``parallel_safe``). Meta-calls
    widen the visible set for the next iteration.

    Input: ``messages``, ``selected_tools`` (from the selection nodes).
    Output: the new messages (AI and tool messages, and a final message if
    ``max_iterations`` is hit), the visible-set diff, ``discovered_tools``,
    ``tool_last_used``; plus any ``Command`` a tool returned.

    Args:
        model: any chat model that supports ``bind_tools``.
        catalog: the tool catalog.
        mode: ``sequential`` or ``parallel_safe``.
        max_iterations: model calls per turn (default 5).
        max_tools: budget for ``request_more_tools``.
        min_per_category: floor of each category's share.
        pinned: tools always visible.
        max_visible: hard cap on visible tools (LRU eviction), or None.
        max_meta_calls: meta-calls allowed per user turn.
        system_prompt: your own system prompt.
        name: node name.

    Example:
        ```python
        graph.add_node("agent", ToolAgent(model, catalog, mode="sequential", max_iterations=5))
        ```
    """

    def __init__(
        self,
        model: BaseChatModel,
        catalog: ToolCatalog,
        *,
        mode: ExecutionMode = "parallel_safe",
        max_iterations: int = 5,
        max_tools: int = 8,
        min_per_category: int = 2,
        pinned: Sequence[str] = (),
        max_visible: int | None = None,
        max_meta_calls: int = 8,
        system_prompt: str | None = None,
        name: str = "agent",
    ) -> None:
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
        super().__init__(name)
        self.caller = _ModelCaller(model, catalog, system_prompt)
        self.execution = ToolExecution(
            catalog,
            mode=mode,
            max_tools=max_tools,
            min_per_category=min_per_category,
            pinned=pinned,
            max_visible=max_visible,
            max_meta_calls=max_meta_calls,
        )
        self.max_iterations = max_iterations

    def _begin(self, state: Any) -> tuple[list[BaseMessage], WorkingSet, list[str]]:
        return (
            state_messages(state),
            self.execution.working_set(state),
            list(state_get(state, "selected_tools", None) or []),
        )

    def _loop_state(self, state: Any, messages: list[BaseMessage], working: WorkingSet) -> Any:
        base = dict(state) if isinstance(state, dict) else {}
        return {**base, "messages": messages, "selected_tools": list(working.names)}

    @staticmethod
    def _absorb(outcome: TurnOutcome, new: list[BaseMessage], commands: list[Command]) -> None:
        for output in outcome.outputs:
            if isinstance(output, ToolMessage):
                new.append(output)
                continue
            update = output.update if isinstance(output.update, dict) else {}
            new.extend(m for m in update.get("messages", []) if isinstance(m, BaseMessage))
            rest = {k: v for k, v in update.items() if k != "messages"}
            if rest or output.goto or output.graph or output.resume is not None:
                commands.append(dataclasses.replace(output, update=rest or None))

    def _finish(
        self,
        new: list[BaseMessage],
        commands: list[Command],
        working: WorkingSet,
        before: list[str],
        discovered: list[str],
        finished: bool,
    ) -> Any:
        if not finished:
            new.append(AIMessage(ITERATION_LIMIT_MESSAGE.format(n=self.max_iterations)))
        totals = TurnOutcome(discovered=discovered)
        update = {"messages": new, **outcome_update(totals, working, before)}
        return [*commands, update] if commands else update

    def run(self, state: Any, config: RunnableConfig) -> Any:
        messages, working, before = self._begin(state)
        new: list[BaseMessage] = []
        commands: list[Command] = []
        discovered: list[str] = []
        for _ in range(self.max_iterations):
            ai = self.caller.invoke([*messages, *new], working, config)
            new.append(ai)
            if not ai.tool_calls:
                return self._finish(new, commands, working, before, discovered, True)
            loop_state = self._loop_state(state, [*messages, *new], working)
            outcome = self.execution.run(
                ai.tool_calls, loop_state, config, working, source=self.name
            )
            discovered.extend(outcome.discovered)
            self._absorb(outcome, new, commands)
        return self._finish(new, commands, working, before, discovered, False)

    async def arun(self, state: Any, config: RunnableConfig) -> Any:
        messages, working, before = self._begin(state)
        new: list[BaseMessage] = []
        commands: list[Command] = []
        discovered: list[str] = []
        for _ in range(self.max_iterations):
            ai = await self.caller.ainvoke([*messages, *new], working, config)
            new.append(ai)
            if not ai.tool_calls:
                return self._finish(new, commands, working, before, discovered, True)
            loop_state = self._loop_state(state, [*messages, *new], working)
            outcome = await self.execution.arun(
                ai.tool_calls, loop_state, config, working, source=self.name
            )
            discovered.extend(outcome.discovered)
            self._absorb(outcome, new, commands)
        return self._finish(new, commands, working, before, discovered, False)


def add_toolbudget_nodes(
    graph: StateGraph,
    model: BaseChatModel,
    catalog: ToolCatalog,
    *,
    after: str = START,
    then: str = END,
    prefix: str = "",
    max_tools: int | None = None,
    model_size: str | float | None = None,
    min_per_category: int = 2,
    max_categories: int = 3,
    classifier_model: BaseChatModel | None = None,
    search_limit: int = 5,
    embeddings: Embeddings | HybridScorer | None = None,
    mode: ExecutionMode = "parallel_safe",
    pinned: Sequence[str] = (),
    max_visible: int | None = None,
    max_iterations: int = 5,
    max_meta_calls: int = 8,
    system_prompt: str | None = None,
) -> str:
    """Add classify_intent -> select_tools -> tool_search -> agent <-> tools to ``graph``.

    Args:
        graph: a ``StateGraph`` whose state extends :class:`ToolBudgetState`.
        model: the chat model of the agent.
        catalog: the tool catalog.
        after: the node the pipeline starts after (``START`` by default).
        then: where the agent goes when it answers (``END`` by default).
        prefix: prepended to every node name, to add the nodes twice.
        max_tools: the budget (default 8, or the preset of ``model_size``).
        model_size: model name or size for the budget presets.
        min_per_category: floor of each category's share.
        max_categories: categories classify_intent returns at most.
        classifier_model: optional chat model for classify_intent.
        search_limit: tools the automatic tool search adds.
        embeddings: optional LangChain ``Embeddings`` (or a ``HybridScorer``) for
            classify_intent, select_tools and tool_search: tools are then
            ranked by BM25 fused with embedding similarity (see
            :mod:`langgraph_toolbudget.core.semantic`).
        mode: ``sequential`` or ``parallel_safe``.
        pinned: tools always visible.
        max_visible: hard cap on visible tools, or None.
        max_iterations: model calls per user turn.
        max_meta_calls: meta-calls per user turn.
        system_prompt: your own system prompt.

    Returns:
        The name of the first added node (to route to it yourself if needed).

    Raises:
        TypeError: the graph's state lacks the tool-budget fields.
    """
    missing = [k for k in ("selected_tools", "categories", "messages") if k not in graph.channels]
    if missing:
        raise TypeError(STATE_SCHEMA_ERROR.format(missing=", ".join(missing)))
    budget = _resolve_budget(max_tools, model_size)
    names = {k: f"{prefix}{k}" for k in ("classify_intent", "select_tools", "tool_search")}
    agent, tools = f"{prefix}agent", f"{prefix}tools"
    graph.add_node(
        names["classify_intent"],
        ClassifyIntent(
            catalog,
            model=classifier_model,
            max_categories=max_categories,
            embeddings=embeddings,
            name=names["classify_intent"],
        ),
    )
    graph.add_node(
        names["select_tools"],
        SelectTools(
            catalog,
            max_tools=budget,
            min_per_category=min_per_category,
            pinned=pinned,
            embeddings=embeddings,
            max_visible=max_visible,
            name=names["select_tools"],
        ),
    )
    graph.add_node(
        names["tool_search"],
        ToolSearch(
            catalog,
            limit=search_limit,
            embeddings=embeddings,
            max_visible=max_visible,
            pinned=pinned,
            name=names["tool_search"],
        ),
    )
    graph.add_node(
        agent,
        CallModel(
            model,
            catalog,
            system_prompt=system_prompt,
            pinned=pinned,
            max_iterations=max_iterations,
            name=agent,
        ),
    )
    graph.add_node(
        tools,
        ToolExecutor(
            catalog,
            mode=mode,
            max_tools=budget,
            min_per_category=min_per_category,
            pinned=pinned,
            max_visible=max_visible,
            max_meta_calls=max_meta_calls,
            name=tools,
        ),
    )
    graph.add_edge(after, names["classify_intent"])
    graph.add_edge(names["classify_intent"], names["select_tools"])
    graph.add_edge(names["select_tools"], names["tool_search"])
    graph.add_edge(names["tool_search"], agent)
    graph.add_conditional_edges(agent, tools_condition, {"tools": tools, END: then})
    graph.add_edge(tools, agent)
    return names["classify_intent"]


def create_toolbudget_agent(
    model: BaseChatModel,
    catalog: ToolCatalog,
    *,
    state_schema: type[Any] = ToolBudgetState,
    context_schema: type[Any] | None = None,
    **options: Any,
) -> StateGraph:
    """Build the whole agent graph, uncompiled, so you choose checkpointer and store.

    ``classify_intent -> select_tools -> tool_search -> agent <-> tools``: the
    agent node calls the model with the meta-tools and the visible tools; the
    tools node runs its calls (a ``ToolNode`` replacement that intercepts
    meta-tools). Options are those of :func:`add_toolbudget_nodes`
    (``max_tools=8``, ``mode="parallel_safe"``, ``max_iterations=5``, ...).

    Example:
        ```python
        graph = create_toolbudget_agent(model, catalog, max_tools=8, mode="parallel_safe")
        out = graph.compile().invoke({"messages": [HumanMessage("...")]})
        out["messages"], out["selected_tools"], out["categories"]
        ```
    """
    graph = StateGraph(state_schema, context_schema=context_schema)
    add_toolbudget_nodes(graph, model, catalog, **options)
    return graph
