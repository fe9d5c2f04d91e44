"""Prebuilt graphs: the whole agent in one call, or its nodes added to your graph.

Its one reason to change: how the prebuilt graphs are wired.

Key Components:
    - :func:`create_toolbudget_agent`: the whole graph, uncompiled:
      choose_tools -> agent <-> tools, where ``choose_tools``
      (:class:`~langgraph_toolbudget.nodes.choose.ChooseTools`) runs classify_intent,
      select_tools and tool_search as one graph step.
    - :func:`add_toolbudget_nodes`: the same nodes added to a user's graph.

Both build one :class:`~langgraph_toolbudget.config.BudgetConfig` and hand it to
every node, so the selection and the executor's ``request_more_tools`` share
one budget.

Typical Usage:
    ```python
    graph = create_toolbudget_agent(model, catalog, max_tools=8, mode="parallel_safe")
    debug = create_toolbudget_agent(model, catalog, runtime_mode="debug")  # drafts run too
    app = graph.compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "1"}}
    out = app.invoke({"messages": [HumanMessage("open an issue")]}, config)
    ```
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Mapping
from typing import Any, get_type_hints, overload

from langgraph.graph import END, START, StateGraph
from langgraph.typing import ContextT, StateT
from typing_extensions import Unpack

from langgraph_toolbudget.config import BudgetConfig, BudgetOptions, check_node_options
from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.nodes._node import node_catalogs, route_after_tools, route_tools
from langgraph_toolbudget.nodes.agent import CallModel
from langgraph_toolbudget.nodes.choose import ChooseTools
from langgraph_toolbudget.nodes.executor import ToolExecutor
from langgraph_toolbudget.nodes.models import ChatModelSpec, resolve_chat_model
from langgraph_toolbudget.nodes.prompt import SystemPrompt, check_system_prompt
from langgraph_toolbudget.nodes.usage import check_usage_catalog
from langgraph_toolbudget.state import (
    BUDGET_FIELDS,
    ToolBudgetInput,
    ToolBudgetState,
    budget_declarations,
    check_budget_reducers,
    input_schema_of,
)

__all__ = ["add_toolbudget_nodes", "create_toolbudget_agent"]

STATE_SCHEMA_ERROR = (
    "the graph's state schema has no {missing} field(s). Extend ToolBudgetState: "
    "`class MyState(ToolBudgetState): ...` and build StateGraph(MyState, "
    "input_schema=langgraph_toolbudget.state.input_schema_of(MyState)) (a run's input then "
    "cannot make tools visible); a pydantic or "
    "dataclass state declares the budget fields itself, with empty defaults: {declarations}"
)
NODE_NAMES_TAKEN_ERROR = (
    "the graph already has a node named {taken}: add the budget's nodes under other names "
    "with a prefix, e.g. add_toolbudget_nodes(graph, model, catalog, prefix='budget_') (its "
    "nodes are then 'budget_choose_tools', 'budget_agent' and 'budget_tools'); prefix is "
    "{prefix!r} now. Nothing was added to the graph."
)
OPEN_INPUT_WARNING = (
    "the graph's input schema takes {fields}: a client's run input could make tools visible "
    "or change the thread's tool context. Build the graph with an input schema without them: "
    "StateGraph(ToolBudgetState, input_schema=ToolBudgetInput), or for your own state "
    "StateGraph(MyState, input_schema=langgraph_toolbudget.state.input_schema_of(MyState))."
)
NOT_A_GRAPH_ERROR = (
    "graph must be an uncompiled langgraph StateGraph (StateGraph(ToolBudgetState)); got {kind}."
)
SHARED_STATE_ERROR = (
    "the graph already holds the budget nodes {nodes} of another catalog: two pipelines with "
    "other tools in one state share its selected_tools, tool_reasons and tool_last_used, so "
    "each would drop the tools the other loaded and show the other's tools. Give each agent "
    "its own state: build it with create_toolbudget_agent(...) (checkpointer=True keeps its "
    "tools across turns) and add the compiled agent as a node of a graph whose state holds "
    "the messages only (docs/agent.md, 'Several agents in one graph'). Adding the nodes "
    "twice with the same catalog (prefix=...) is fine."
)
COMPILE_OPTION_ERROR = "{owner} has no {option} {names}: {why}, so pass {names} to compile: {fix}."
"""A keyword of LangGraph's ``StateGraph.compile`` given to a builder (as ``create_react_agent``
and ``create_agent`` take them; they return a compiled graph, the builders here do not)."""
PROMPT_OPTION_ERROR = (
    "{owner} has no option prompt: the system prompt is system_prompt= (a string, a "
    "SystemMessage, or a callable of the state), as in LangChain's create_agent."
)
"""``prompt=``: ``create_react_agent``'s name of the system prompt."""
_UNCOMPILED = {
    "create_toolbudget_agent": (
        "it returns the graph uncompiled (a StateGraph, not a compiled graph as "
        "create_react_agent and create_agent do)",
        "create_toolbudget_agent(model, catalog, ...).compile({call})",
    ),
    "add_toolbudget_nodes": (
        "it adds nodes to your graph, which you compile",
        "graph.compile({call})",
    ),
}


@functools.cache
def _compile_keywords() -> tuple[str, ...]:
    """The keywords of LangGraph's ``StateGraph.compile`` (checkpointer, store, interrupt_before,
    interrupt_after, name, debug, cache... in the installed version)."""
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(StateGraph.compile).parameters.values()
    return tuple(p.name for p in parameters if p.kind in named and p.name != "self")


def _check_graph_keywords(owner: str, options: Mapping[str, Any]) -> None:
    """Refuse, saying where they go, the keywords of a compiled-graph factory
    (``create_react_agent``, ``create_agent``) that a builder of an uncompiled graph does not
    take: ``compile``'s, and ``prompt``."""
    misplaced = [name for name in _compile_keywords() if name in options]
    if misplaced:
        why, fix = _UNCOMPILED[owner]
        call = fix.format(call=", ".join(f"{name}=..." for name in misplaced))
        names = ", ".join(misplaced)
        option = "option" if len(misplaced) == 1 else "options"
        raise TypeError(
            COMPILE_OPTION_ERROR.format(owner=owner, option=option, names=names, why=why, fix=call)
        )
    if "prompt" in options:
        raise TypeError(PROMPT_OPTION_ERROR.format(owner=owner))


def _models(owner: str, model: Any, classifier_model: Any) -> tuple[Any, Any]:
    """The agent's and the classifier's chat models, an error naming ``owner`` and the option
    if either is not one."""
    model = resolve_chat_model(model, what=f"{owner}: option model")
    if classifier_model is not None:
        what = f"{owner}: option classifier_model"
        classifier_model = resolve_chat_model(classifier_model, what=what)
    return model, classifier_model


def add_toolbudget_nodes(
    graph: StateGraph[Any, Any, Any, Any],
    model: ChatModelSpec,
    catalog: ToolCatalog,
    *,
    config: BudgetConfig | None = None,
    after: str = START,
    then: str = END,
    prefix: str = "",
    classifier_model: ChatModelSpec | None = None,
    system_prompt: SystemPrompt = None,
    **options: Unpack[BudgetOptions],
) -> str:
    """Add choose_tools -> agent <-> tools to ``graph``.

    ``choose_tools`` (:class:`~langgraph_toolbudget.nodes.choose.ChooseTools`) runs
    classify_intent, select_tools and tool_search, the nodes' own code, as one graph step
    (one checkpoint instead of three); wire :class:`ClassifyIntent`, :class:`SelectTools`
    and :class:`ToolSearch` yourself to have them as three nodes.

    Args:
        graph: a ``StateGraph`` whose state extends :class:`ToolBudgetState`.
        model: the chat model of the agent (native tool calling or not, see the
            ``tool_call_formats`` option), also wrapped by ``.bind()``, ``.with_config()``,
            ``.with_retry()`` or ``.with_fallbacks()``, or a ``"provider:model"`` string for
            LangChain's ``init_chat_model``.
        catalog: the tool catalog.
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`).
        after: the node the pipeline starts after (``START`` by default).
        then: where the agent goes when it answers (``END`` by default).
        prefix: prepended to every node name, to add the nodes twice.
        classifier_model: optional chat model for classify_intent, asked for structured
            output (``with_structured_output``): a chat model itself, or a model string.
        system_prompt: a string, a ``SystemMessage``, or a callable of the state.
        **options: any :class:`~langgraph_toolbudget.config.BudgetConfig` option
            (``max_tools=8``, ``mode="sequential"``, ``offload_over_chars=None``...),
            over ``config``'s value. Every node gets the one resulting config.

    Returns:
        The name of the first added node (to route to it yourself if needed).

    Raises:
        TypeError: ``graph`` is not an uncompiled ``StateGraph``; the graph's state lacks
            the tool-budget fields, or declares one with another reducer; ``catalog`` is
            not a ``ToolCatalog``, or ``config`` not a ``BudgetConfig``; an unknown option
            (the message names the closest one, of this function's keywords and the
            ``BudgetConfig`` options), a keyword of ``compile`` (``checkpointer=``: the
            message says to pass it to ``graph.compile``) or ``prompt=`` (the option is
            ``system_prompt``); an option of the wrong type, named with this function
            (``max_tools="3"``, ``after=1``, ``prefix=1``); a ``model`` or
            ``classifier_model`` that is not a chat model or a model string; a
            ``system_prompt`` of another type.
        ValueError: an option out of range, named with this function (``max_tools=-1``,
            ``mode="x"``); an ``enabled_builtins`` name that is a near miss of a
            built-in's (``"serch_tools"``: the message names the built-in and the
            corrected value); a catalog tool with the name of an enabled built-in; a
            ``pinned`` name that is not a tool of the catalog in its ``runtime_mode``;
            ``max_visible`` below the number of tools visible without budget; a ``usage``
            built with ``catalog=`` a catalog that lacks this one's tools; a model without
            native tool calling when no text format is enabled; a model string
            ``init_chat_model`` does not know; the graph already holds the nodes of
            another catalog (two pipelines would share the state's budget fields), or a
            node of one of the names the nodes would take (``prefix=`` gives them others).
        ModelUnavailableError: a model string whose provider package is not installed.

    Whatever it raises, nothing has been added to the graph.
    """
    catalog = require_catalog(catalog, "add_toolbudget_nodes")
    _check_graph_keywords("add_toolbudget_nodes", options)
    if not isinstance(graph, StateGraph):
        raise TypeError(NOT_A_GRAPH_ERROR.format(kind=type(graph).__name__))
    check_node_options(add_toolbudget_nodes, after=after, then=then, prefix=prefix)
    model, classifier_model = _models("add_toolbudget_nodes", model, classifier_model)
    check_system_prompt(system_prompt, "add_toolbudget_nodes")
    missing = [k for k in ("selected_tools", "categories", "messages") if k not in graph.channels]
    if missing:
        fields = [
            k for k in get_type_hints(ToolBudgetState) if k in BUDGET_FIELDS - graph.channels.keys()
        ]
        raise TypeError(
            STATE_SCHEMA_ERROR.format(
                missing=", ".join(missing), declarations=budget_declarations(fields)
            )
        )
    check_budget_reducers(graph.channels)
    exposed = sorted(BUDGET_FIELDS & set(get_type_hints(graph.input_schema)))
    if exposed:
        warnings.warn(
            OPEN_INPUT_WARNING.format(fields=", ".join(exposed)), UserWarning, stacklevel=2
        )
    shared = BudgetConfig.resolve(config, options, owner=add_toolbudget_nodes)
    listed = catalog.in_runtime_mode(shared.runtime_mode)
    check_usage_catalog(shared.usage, listed, "add_toolbudget_nodes")
    _refuse_other_catalogs(graph, listed)
    names = {k: f"{prefix}{k}" for k in ("choose_tools", "agent", "tools")}
    if taken := [n for n in names.values() if n in graph.nodes]:
        raise ValueError(
            NODE_NAMES_TAKEN_ERROR.format(taken=", ".join(map(repr, taken)), prefix=prefix)
        )
    agent = CallModel(
        model, catalog, config=shared, system_prompt=system_prompt, name=names["agent"]
    )
    agent.steps_after = 0 if then == END else 1  # your node after the agent answers
    nodes = {
        "choose_tools": ChooseTools(
            catalog,
            config=shared,
            classifier_model=classifier_model,
            name=names["choose_tools"],
            prefix=prefix,
        ),
        "agent": agent,
        "tools": ToolExecutor(catalog, config=shared, name=names["tools"]),
    }
    for key, node in nodes.items():
        graph.add_node(names[key], node)
    graph.add_edge(after, names["choose_tools"])
    graph.add_edge(names["choose_tools"], names["agent"])
    graph.add_conditional_edges(names["agent"], route_tools, {"tools": names["tools"], END: then})
    graph.add_conditional_edges(
        names["tools"],
        route_after_tools(catalog, back=names["agent"]),
        {names["agent"]: names["agent"], END: then},
    )
    return names["choose_tools"]


def _refuse_other_catalogs(graph: StateGraph[Any, Any, Any, Any], listed: ToolCatalog) -> None:
    """Refuse a second pipeline whose catalog differs from one already in ``graph``: both
    would read and write the same budget fields (:data:`SHARED_STATE_ERROR`)."""
    mine = sorted(listed.specs, key=lambda s: s.name)
    others = [
        name
        for name, spec in graph.nodes.items()
        if any(sorted(c.specs, key=lambda s: s.name) != mine for c in node_catalogs(spec))
    ]
    if others:
        raise ValueError(SHARED_STATE_ERROR.format(nodes=others))


# The graph's types, as StateGraph(state_schema, context_schema=..., input_schema=...) gives them,
# so a run's input and context are checked: ToolBudgetInput over the default state.


@overload
def create_toolbudget_agent(
    model: ChatModelSpec,
    catalog: ToolCatalog,
    *,
    config: BudgetConfig | None = None,
    context_schema: None = None,
    classifier_model: ChatModelSpec | None = None,
    system_prompt: SystemPrompt = None,
    **options: Unpack[BudgetOptions],
) -> StateGraph[ToolBudgetState, None, ToolBudgetInput, ToolBudgetState]: ...


@overload
def create_toolbudget_agent(
    model: ChatModelSpec,
    catalog: ToolCatalog,
    *,
    config: BudgetConfig | None = None,
    context_schema: type[ContextT],
    classifier_model: ChatModelSpec | None = None,
    system_prompt: SystemPrompt = None,
    **options: Unpack[BudgetOptions],
) -> StateGraph[ToolBudgetState, ContextT, ToolBudgetInput, ToolBudgetState]: ...


@overload
def create_toolbudget_agent(
    model: ChatModelSpec,
    catalog: ToolCatalog,
    *,
    config: BudgetConfig | None = None,
    state_schema: type[StateT],
    context_schema: None = None,
    classifier_model: ChatModelSpec | None = None,
    system_prompt: SystemPrompt = None,
    **options: Unpack[BudgetOptions],
) -> StateGraph[StateT, None, Any, StateT]: ...


@overload
def create_toolbudget_agent(
    model: ChatModelSpec,
    catalog: ToolCatalog,
    *,
    config: BudgetConfig | None = None,
    state_schema: type[StateT],
    context_schema: type[ContextT],
    classifier_model: ChatModelSpec | None = None,
    system_prompt: SystemPrompt = None,
    **options: Unpack[BudgetOptions],
) -> StateGraph[StateT, ContextT, Any, StateT]: ...


def create_toolbudget_agent(
    model: ChatModelSpec,
    catalog: ToolCatalog,
    *,
    config: BudgetConfig | None = None,
    state_schema: type[Any] = ToolBudgetState,
    context_schema: type[Any] | None = None,
    classifier_model: ChatModelSpec | None = None,
    system_prompt: SystemPrompt = None,
    **options: Unpack[BudgetOptions],
) -> StateGraph[Any, Any, Any, Any]:
    """Build the whole agent graph, uncompiled, so you choose checkpointer and store.

    ``choose_tools -> agent <-> tools`` (``choose_tools``: classify_intent,
    select_tools and tool_search as one step, see :func:`add_toolbudget_nodes`): the
    agent node calls the model with the meta-tools and the visible tools; the
    tools node runs its calls (a ``ToolNode`` replacement that intercepts
    meta-tools). The graph's input schema is ``state_schema`` without the budget's fields
    (``selected_tools``, the tool context...), so a run's input cannot make a tool visible
    or change the tool context; only the nodes and the management operations
    (``graph.update_state`` with ``include_tools``... , the CLI, the MCP context server,
    the opt-in context tools) do.

    Args:
        model: the chat model of the agent (native tool calling or not, see the
            ``tool_call_formats`` option), also wrapped by ``.bind()``, ``.with_config()``,
            ``.with_retry()`` or ``.with_fallbacks()``, or a ``"provider:model"`` string for
            LangChain's ``init_chat_model``.
        catalog: the tool catalog.
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`).
        state_schema: the graph's state, a class extending :class:`ToolBudgetState`
            (default: ``ToolBudgetState``); a pydantic or dataclass state declares the
            budget fields itself.
        context_schema: LangGraph's run-context schema of the graph
            (``StateGraph(..., context_schema=...)``: what a run's ``context=`` holds, which
            nodes and tools read through ``Runtime``); default: none.
        classifier_model: optional chat model for classify_intent, asked for structured
            output (``with_structured_output``): a chat model itself, or a model string.
        system_prompt: a string, a ``SystemMessage``, or a callable of the state.
        **options: any :class:`~langgraph_toolbudget.config.BudgetConfig` option
            (``max_tools=8``, ``mode="sequential"``, ``offload_over_chars=None``...),
            over ``config``'s value. Every node gets the one resulting config.

    Returns:
        The ``StateGraph``, uncompiled, with the nodes ``choose_tools``, ``agent`` and
        ``tools``: compile it with your checkpointer and store
        (``graph.compile(checkpointer=...)``).

    Raises:
        TypeError: ``state_schema`` is not a class, lacks the budget fields of
            :class:`ToolBudgetState` (the message lists them) or declares one with
            another reducer; ``context_schema`` is not a class or ``None``; ``catalog`` is
            not a ``ToolCatalog``, or ``config`` not a ``BudgetConfig``; an unknown option
            (the message names the closest one, of this function's keywords and the
            ``BudgetConfig`` options), a keyword of ``compile`` (``checkpointer=``: the
            message says to pass it to ``compile``) or ``prompt=`` (the option is
            ``system_prompt``); an option of the wrong type, named with this function
            (``max_tools="3"``); a ``model`` or ``classifier_model`` that is not a chat
            model or a model string; a ``system_prompt`` of another type.
        ValueError: an option out of range, named with this function (``max_tools=-1``,
            ``mode="x"``); an ``enabled_builtins`` name that is a near miss of a
            built-in's (``"serch_tools"``: the message names the built-in and the
            corrected value); a catalog tool with the name of an enabled built-in; a
            ``pinned`` name that is not a tool of the catalog in its ``runtime_mode``;
            ``max_visible`` below the number of tools visible without budget; a ``usage``
            built with ``catalog=`` a catalog that lacks this one's tools; a model without
            native tool calling when no text format is enabled; a model string
            ``init_chat_model`` does not know.
        ModelUnavailableError: a model string whose provider package is not installed.

    Example:
        ```python
        graph = create_toolbudget_agent(model, catalog, max_tools=8, mode="parallel_safe")
        out = graph.compile().invoke({"messages": [HumanMessage("...")]})
        out["messages"], out["selected_tools"], out["categories"]
        ```
    """
    catalog = require_catalog(catalog, "create_toolbudget_agent")
    _check_graph_keywords("create_toolbudget_agent", options)
    check_node_options(
        create_toolbudget_agent, state_schema=state_schema, context_schema=context_schema
    )
    model, classifier_model = _models("create_toolbudget_agent", model, classifier_model)
    check_system_prompt(system_prompt, "create_toolbudget_agent")
    shared = BudgetConfig.resolve(config, options, owner=create_toolbudget_agent)
    listed = catalog.in_runtime_mode(shared.runtime_mode)
    check_usage_catalog(shared.usage, listed, "create_toolbudget_agent")
    graph = StateGraph(
        state_schema, input_schema=input_schema_of(state_schema), context_schema=context_schema
    )
    add_toolbudget_nodes(
        graph,
        model,
        catalog,
        config=shared,
        classifier_model=classifier_model,
        system_prompt=system_prompt,
    )
    return graph
