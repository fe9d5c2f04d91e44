"""A thread's tool context from outside the graph: a compiled graph's thread, a LangGraph
server thread or a SQLite file.

Its one reason to change: how a thread's state is reached from outside its graph.

:func:`update_context` applies a tool-context update to a thread of a compiled graph,
right on a thread that has never run (where ``update_state`` would write it as the
graph's input, whose schema drops the context fields).

The CLI (:mod:`langgraph_toolbudget.cli`) and the MCP context server
(:mod:`langgraph_toolbudget.context_server`) read a thread's state values and
apply the state updates of
:func:`~langgraph_toolbudget.core.context_commands.run_command` through one of
these, so both manage a deployed agent and a local one the same way.

Key Components:
    - :class:`ServerThread`: a thread of a LangGraph server, through ``langgraph_sdk``.
    - :class:`SqliteThread`: a thread in a ``SqliteSaver`` file, through the app's own
      graph (its reducers apply the update; no state field is lost).
    - :func:`update_context` / :func:`aupdate_context`: a tool-context update on a thread of
      a compiled graph, right on a thread that never ran (written as the node after ``START``),
      or in a subgraph's state (``checkpoint_ns``); refused where the state cannot hold it
      or no agent would read it.
    - :func:`execute`: run one tool-context operation on a thread.
    - :func:`open_thread`: the thread (and its catalog) the CLI/MCP options name.
    - :func:`load_spec`, :func:`load_catalog`, :func:`load_graph`: a catalog or a graph
      from a ``module:attribute`` spec, as ``langgraph.json`` names graphs.
    - :class:`ThreadError`: a problem worded as one line that says what to do.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sqlite3
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from langgraph.constants import START

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.context import (
    CONTEXT_FIELDS,
    INCLUDE_MODES,
    SERVER_MODES_FIELD,
    SERVERS_FIELD,
    TOOL_MODES_FIELD,
    TOOLS_FIELD,
)
from langgraph_toolbudget.core.context_commands import CommandResult, run_command
from langgraph_toolbudget.core.context_ops import closest_context_names, knows, of_failed_server
from langgraph_toolbudget.nodes._node import node_catalogs

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.pregel import Pregel

__all__ = [
    "CATALOG_ENV",
    "ServerThread",
    "SqliteThread",
    "Thread",
    "ThreadError",
    "aupdate_context",
    "catalog_of",
    "check_context_update",
    "entry_node",
    "execute",
    "load_catalog",
    "load_graph",
    "load_spec",
    "open_thread",
    "start_target",
    "update_context",
]

CATALOG_ENV = "TOOLBUDGET_CATALOG"
"""Environment variable: the default ``--catalog`` spec (``module:attribute``)."""

BAD_SPEC_ERROR = "{spec!r} is not a 'module:attribute' spec (e.g. 'myapp.tools:catalog')"
SPEC_IMPORT_ERROR = (
    "cannot load {spec!r}: {error}; check the module path (from the current directory or "
    "$PYTHONPATH) and the attribute name"
)
SPEC_CALL_ERROR = (
    "{spec!r} is a function, and calling it failed ({error}); point the option at a "
    "ToolCatalog/StateGraph or a function that builds one without arguments"
)
NOT_SQLITE_ERROR = "cannot read {path} as a SqliteSaver file ({error}); check --sqlite"
NOT_A_CATALOG_ERROR = "{spec!r} gives a {kind}, not a ToolCatalog; point --catalog at one"
NO_CATALOG_ERROR = (
    "no catalog: pass --catalog module:attribute (the ToolCatalog of the agent, or a function "
    "that builds it) or set $" + CATALOG_ENV
)
NOT_A_GRAPH_ERROR = "{spec!r} gives a {kind}, not a LangGraph StateGraph; point --graph at one"
SERVER_DOWN_ERROR = (
    "cannot reach the LangGraph server at {url} ({error}); is it running (langgraph dev)? "
    "check --url"
)
UNKNOWN_THREAD_ERROR = "thread {thread!r} not found on {where}; check --thread"
UNKNOWN_GRAPH_ERROR = (
    "graph {graph!r} not found on the LangGraph server at {url} (its graphs: {graphs}); check "
    "--graph-id"
)
THREAD_GRAPH_GONE_ERROR = (
    "thread {thread!r} belongs to graph {graph!r}, which the LangGraph server at {url} does not "
    "serve (its graphs: {graphs}); check --url (the server that ran the thread) and --thread"
)
SERVER_ERROR = "the LangGraph server at {url} refused the request: {error}"
NO_SQLITE_ERROR = "no SQLite file at {path}; check --sqlite"
NO_SQLITE_SAVER_ERROR = (
    "a SQLite thread needs langgraph-checkpoint-sqlite (the cli extra): pip install -e "
    "'.[cli]' in a clone of langgraph-toolbudget (or pip install langgraph-checkpoint-sqlite)"
)
NO_GRAPH_ID_ERROR = (
    "thread {thread!r} has never run, so the server does not know its graph: pass --graph-id "
    "with the agent's graph (one of: {graphs}), or run one turn on the thread first"
)
SERVER_NO_CONTEXT_FIELDS_ERROR = (
    "the state of graph {graph!r} (thread {thread!r}) has no {missing} field, so the server "
    "would drop the update: point --thread at a thread of a graph whose own state has the "
    "tool-context fields (create_toolbudget_agent, create_agent with ToolBudgetMiddleware, a "
    "ToolBudgetState graph); an agent compiled as a subgraph node keeps them in the subgraph's "
    "state, which this command does not write"
)


class ThreadError(RuntimeError):
    """A thread that cannot be read or updated; the message is one actionable line."""


class _NodeNeededError(ValueError):
    """An update whose node must be named (``as_node=``): the CLI words it for its options."""


class Thread(Protocol):
    """A thread whose state values can be read and updated."""

    def values(self) -> dict[str, Any]:
        """The thread's current state values."""
        ...

    def update(self, update: Mapping[str, Any]) -> None:
        """Apply a state update (through the graph's reducers)."""
        ...


def load_spec(spec: str) -> Any:
    """The object a ``module:attribute`` spec names; a function is called (with an
    empty config if it takes one) and a coroutine awaited.

    Raises:
        ThreadError: a malformed spec, or one that does not import.
    """
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ThreadError(BAD_SPEC_ERROR.format(spec=spec))
    if os.getcwd() not in sys.path and "" not in sys.path:  # as `python -m` and uvicorn do
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # noqa: BLE001 - any import failure is the spec's problem
        error = f"{type(exc).__name__}: {exc}"
        raise ThreadError(SPEC_IMPORT_ERROR.format(spec=spec, error=error)) from None
    try:
        if inspect.isfunction(obj) or inspect.ismethod(obj):
            required = [
                p
                for p in inspect.signature(obj).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
            obj = obj({"configurable": {}}) if required else obj()
        if inspect.isawaitable(obj):
            obj = asyncio.run(_await(obj))
    except Exception as exc:  # noqa: BLE001 - a factory's failure, in one line
        error = f"{type(exc).__name__}: {exc}"
        raise ThreadError(SPEC_CALL_ERROR.format(spec=spec, error=error)) from None
    return obj


async def _await(value: Any) -> Any:
    return await value


def load_catalog(spec: str | None) -> ToolCatalog:
    """The catalog of a spec (default: ``$TOOLBUDGET_CATALOG``).

    Raises:
        ThreadError: no spec, a bad one, or one that is not a catalog.
    """
    spec = spec or os.environ.get(CATALOG_ENV)
    if not spec:
        raise ThreadError(NO_CATALOG_ERROR)
    catalog = load_spec(spec)
    if not isinstance(catalog, ToolCatalog):
        raise ThreadError(NOT_A_CATALOG_ERROR.format(spec=spec, kind=type(catalog).__name__))
    return catalog


def load_graph(spec: str) -> Any:
    """The ``StateGraph`` of a spec (a builder, a compiled graph, or a function of either).

    Raises:
        ThreadError: a bad spec, or one that is not a LangGraph graph.
    """
    from langgraph.graph import StateGraph

    graph = load_spec(spec)
    builder = getattr(graph, "builder", graph)
    if not isinstance(builder, StateGraph):
        raise ThreadError(NOT_A_GRAPH_ERROR.format(spec=spec, kind=type(graph).__name__))
    return builder


def catalog_of(graph: Any) -> ToolCatalog | None:
    """The catalog of the package's nodes in a graph (builder or compiled), or None.

    A node of the package holds it (``SelectTools``, ``ToolAgent``...); under
    LangChain's ``create_agent`` the node ``ToolBudgetMiddleware.before_model``
    runs a bound method of the middleware, which holds it.
    """
    for node in getattr(graph, "nodes", {}).values():
        for catalog in node_catalogs(node):
            return catalog
    return None


def _detail(exc: Any) -> str:
    """The server's own words for a refused request, else the HTTP error."""
    try:
        body = exc.response.json()
    except ValueError:
        return str(exc)
    detail = body.get("detail") if isinstance(body, dict) else None
    return str(detail or exc)


class ServerThread:
    """A thread of a LangGraph server (``langgraph dev``, a deployment), through the SDK.

    A thread that has never run has no graph on the server, which then refuses
    ``update_state``: the thread is assigned ``graph_id`` first (its metadata's
    ``graph_id``, as a run would), or the server's only graph; with several
    graphs and no ``graph_id`` the error names them.

    Args:
        url: the server's URL.
        thread_id: the thread.
        graph_id: the graph (a key of ``langgraph.json``'s ``graphs``) to assign a
            thread that has never run.
    """

    def __init__(self, url: str, thread_id: str, graph_id: str | None = None) -> None:
        from langgraph_sdk import get_sync_client

        self.url = url
        self.thread_id = thread_id
        self.graph_id = graph_id
        self.client = get_sync_client(url=url)

    def _call(
        self, fn: Any, *args: Any, not_found: Callable[[], str] | None = None, **kwargs: Any
    ) -> Any:
        """``fn(*args, **kwargs)``, its failures as a ``ThreadError``. A 404 is read by
        :meth:`_not_found` (a call about the thread), or by ``not_found`` (a call about
        something else, which gives the words)."""
        import httpx

        try:
            return fn(*args, **kwargs)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 404:
                message = not_found() if not_found is not None else self._not_found(exc)
                raise ThreadError(message) from None
            hint = "; check --thread" if exc.response.status_code == 422 else ""
            detail = _detail(exc)
            raise ThreadError(SERVER_ERROR.format(url=self.url, error=detail) + hint) from None
        except httpx.TransportError as exc:
            raise ThreadError(SERVER_DOWN_ERROR.format(url=self.url, error=exc)) from None

    def _not_found(self, exc: Any) -> str:
        """What a 404 to a call about the thread means. The server answers 404 for an unknown
        thread, and for a thread whose graph (its metadata's ``graph_id``) it does not serve."""
        import httpx

        try:
            thread = self.client.threads.get(self.thread_id)
        except httpx.HTTPStatusError as missing:
            if missing.response.status_code == 404:
                where = f"the LangGraph server at {self.url}"
                return UNKNOWN_THREAD_ERROR.format(thread=self.thread_id, where=where)
            return SERVER_ERROR.format(url=self.url, error=_detail(exc))
        except httpx.TransportError as down:
            return SERVER_DOWN_ERROR.format(url=self.url, error=down)
        metadata = thread.get("metadata") if isinstance(thread, Mapping) else None
        graph_id = metadata.get("graph_id") if isinstance(metadata, Mapping) else None
        graphs = self._graphs()
        if graph_id and graph_id not in graphs:
            return THREAD_GRAPH_GONE_ERROR.format(
                thread=self.thread_id, graph=graph_id, url=self.url, graphs=", ".join(graphs)
            )
        return SERVER_ERROR.format(url=self.url, error=_detail(exc))

    def values(self) -> dict[str, Any]:
        state = self._call(self.client.threads.get_state, self.thread_id)
        values = state.get("values") if isinstance(state, Mapping) else None
        return dict(values) if isinstance(values, Mapping) else {}

    def update(self, update: Mapping[str, Any]) -> None:
        # A thread that has never run has no graph_id in its metadata; the server then
        # refuses update_state (in words that vary by server version): assign it first.
        # Its update is written as the graph's first node: as the graph's input (LangGraph's
        # choice for a thread that never ran), the input schema would drop the budget fields.
        # So is one to a thread whose run stopped before its first node (interrupt_before it,
        # or it failed): only START ran there. Never ran, not "no values": an earlier update
        # leaves values, and writing as a node does not count as that node's run. Then, as
        # update_context does, START is marked to run again, so the thread still waits at
        # its first node (written as that node, it would wait at the node after it).
        thread = self._call(self.client.threads.get, self.thread_id)
        metadata = thread.get("metadata") if isinstance(thread, Mapping) else None
        graph_id = metadata.get("graph_id") if isinstance(metadata, Mapping) else None
        assigned = bool(graph_id)
        graph_id = str(graph_id) if assigned else self._graph_to_assign()
        assistant = self._assistant(graph_id, assigned=assigned)
        self._check_fields(assistant, graph_id, update)  # before a graph is assigned too
        if not assigned:
            self._call(self.client.threads.update, self.thread_id, metadata={"graph_id": graph_id})
        first = self._entry_node(assistant)
        entry = first if not assigned or not self._has_run() or self._waits_at(first) else None
        self._call(self.client.threads.update_state, self.thread_id, dict(update), as_node=entry)
        if entry is not None:
            self._call(self.client.threads.update_state, self.thread_id, None, as_node=START)

    def _has_run(self) -> bool:
        """Whether a run has stepped the thread (a checkpoint a run wrote, not an update)."""
        steps = self._call(
            self.client.threads.get_history, self.thread_id, limit=1, metadata={"source": "loop"}
        )
        return bool(steps)

    def _waits_at(self, node: str | None) -> bool:
        """Whether the thread's next step is ``node`` alone (a run stopped before it)."""
        if node is None:
            return False
        state = self._call(self.client.threads.get_state, self.thread_id)
        waiting = state.get("next") if isinstance(state, Mapping) else None
        return list(waiting or ()) == [node]

    def _assistant(self, graph_id: str, *, assigned: bool) -> str | None:
        """An assistant of the graph (the server makes one per graph), or None. A graph the
        server does not serve (it answers 404) is refused naming its graphs: a misspelt
        ``graph_id``, or (``assigned``: read from the thread) a thread of another server; a
        server that answers such a search with no assistants instead is asked for its graphs."""

        def unknown(graphs: list[str] | None = None) -> str:
            error = THREAD_GRAPH_GONE_ERROR if assigned else UNKNOWN_GRAPH_ERROR
            served = ", ".join(self._graphs() if graphs is None else graphs)
            return error.format(graph=graph_id, thread=self.thread_id, url=self.url, graphs=served)

        assistants = self._call(
            self.client.assistants.search, graph_id=graph_id, limit=1, not_found=unknown
        )
        if not assistants and graph_id not in (graphs := self._graphs()):  # older servers: []
            raise ThreadError(unknown(graphs))
        return str(assistants[0]["assistant_id"]) if assistants else None

    def _graphs(self) -> list[str]:
        """The graphs the server serves (the ``graphs`` of its ``langgraph.json``), sorted."""
        assistants = self._call(
            self.client.assistants.search,
            limit=1000,
            not_found=lambda: SERVER_ERROR.format(url=self.url, error="no assistants endpoint"),
        )
        return sorted({str(a["graph_id"]) for a in assistants})

    def _entry_node(self, assistant: str | None) -> str | None:
        """The node right after the start of the assistant's graph (None if it has several,
        or there is no assistant)."""
        if assistant is None:
            return None
        graph = self._call(self.client.assistants.get_graph, assistant)
        return start_target((e.get("source"), e.get("target")) for e in graph.get("edges", []))

    def _check_fields(
        self, assistant: str | None, graph_id: str, update: Mapping[str, Any]
    ) -> None:
        """Refuse an update whose fields the graph's state (of ``assistant``, an assistant of
        ``graph_id``) lacks: the server would drop it (as ``update_state`` does) and answer
        as if it had landed."""
        if assistant is None:
            return
        schemas = self._call(self.client.assistants.get_schemas, assistant)
        state = schemas.get("state_schema") if isinstance(schemas, Mapping) else None
        fields = state.get("properties") if isinstance(state, Mapping) else None
        if not isinstance(fields, Mapping):  # no schema to read: the server decides
            return
        missing = [key for key in update if key not in fields]
        if missing:
            raise ThreadError(
                SERVER_NO_CONTEXT_FIELDS_ERROR.format(
                    graph=graph_id, thread=self.thread_id, missing=" or ".join(missing)
                )
            )

    def _graph_to_assign(self) -> str:
        """The graph to give a thread that has never run, so the server accepts updates:
        ``graph_id``, else the server's one graph."""
        if self.graph_id is not None:
            return self.graph_id
        graphs = self._graphs()
        if len(graphs) != 1:
            raise ThreadError(
                NO_GRAPH_ID_ERROR.format(thread=self.thread_id, graphs=", ".join(graphs))
            )
        return str(graphs[0])


# --- a tool-context update on a thread of a compiled graph -------------------------------


CONTEXT_UPDATE_TYPE_ERROR = (
    "update must be a mapping of tool-context fields, got {value!r}; build it with "
    "include_tools(...), exclude_tools(...) or set_include_mode(...)"
)
CONTEXT_UPDATE_KEYS_ERROR = (
    "update_context writes the tool-context fields only ({fields}), got {keys}; build the "
    "update with include_tools, exclude_tools or set_include_mode, and write other state with "
    "graph.update_state"
)
CONTEXT_UPDATE_EMPTY_ERROR = (
    "the update names no tool or server; build it with include_tools(...), exclude_tools(...) "
    "or set_include_mode(...)"
)
CONTEXT_UPDATE_VALUE_ERROR = (
    "update[{field!r}] must map names to one of {allowed} (or None to remove one), got "
    "{value!r}; build it with {builder}"
)
NO_CHECKPOINTER_ERROR = (
    "update_context needs a graph compiled with a checkpointer (e.g. "
    "graph.compile(checkpointer=InMemorySaver())): a thread's tool context lives in its checkpoints"
)
NO_THREAD_ID_ERROR = (
    "config names no thread: pass {{'configurable': {{'thread_id': ...}}}}, as for graph.invoke"
)
UNKNOWN_SUBGRAPH_ERROR = (
    "config names the checkpoint namespace {ns!r}, but the graph has no subgraph {name!r} "
    "(its subgraphs: {subgraphs}); pass one of these as 'checkpoint_ns', or leave it out for "
    "the graph's own state"
)
NO_SUBGRAPHS_ERROR = (
    "config names the checkpoint namespace {ns!r}, but the graph has no subgraphs: leave "
    "'checkpoint_ns' out of the config to write the graph's own state"
)
STATELESS_SUBGRAPH_ERROR = (
    "the subgraph {ns!r} keeps no state between runs (it was compiled without "
    "checkpointer=True), so an update under its name is never read: compile it with "
    ".compile(checkpointer=True), or, for a run paused inside it, pass the config of its task "
    "(graph.get_state(config, subgraphs=True).tasks[...].state.config)"
)
NO_CONTEXT_FIELDS_ERROR = (
    "the state of {where} has no {missing} channel, so the tool-context update would be "
    "dropped without a trace: {fix}"
)
CONTEXT_IN_SUBGRAPH_FIX = (
    "the tool context lives in the state of the subgraph {ns!r} (the agent compiled as a node "
    "of this graph); write it there by naming its namespace: update_context(graph, "
    "{{'configurable': {{'thread_id': {thread!r}, 'checkpoint_ns': {ns!r}}}}}, update)"
)
STATELESS_SUBGRAPH_FIX = (
    "the tool context lives in the state of the subgraph {ns!r}, which starts afresh on every "
    "run (compiled without checkpointer=True) and so keeps no tool context between turns: "
    "compile it with .compile(checkpointer=True), then write the update there by naming its "
    "namespace: update_context(graph, {{'configurable': {{'thread_id': {thread!r}, "
    "'checkpoint_ns': {ns!r}}}}}, update)"
)
CONTEXT_IN_AGENTS_FIX = (
    "the tool context lives in the state of each agent compiled as a node of this graph, each "
    "its own: {agents}; write the update in the state of the agent whose tools it names, by "
    "naming its namespace: update_context(graph, {{'configurable': {{'thread_id': {thread!r}, "
    "'checkpoint_ns': {ns!r}}}}}, update)"
)
PER_RUN_AGENT_WORDS = (
    "compiled without checkpointer=True, it starts afresh on every run: compile it with "
    ".compile(checkpointer=True) first"
)
CONTEXT_NOT_READ_ERROR = (
    "no node of {where} reads its {fields} channel (its agents are subgraphs that keep their "
    "own tool context, and their input leaves these fields out), so the tool-context update "
    "would be dropped without a trace: {fix}"
)
OTHER_AGENT_NAMES_ERROR = (
    "the catalog of {where} has no {names}, so the update would change nothing there for "
    "{them}, while {owners} {have} {them}: write each name in the state of the agent that has "
    "it, e.g. update_context(graph, {{'configurable': {config}}}, update) with an update naming "
    "{theirs} only"
)
UNKNOWN_CONTEXT_NAMES_ERROR = (
    "the catalog of {where} has no {names}: a misspelt name would be written as given and "
    "change nothing ({closest}). Use the names the catalog lists (list_tools(catalog) or "
    "`toolbudget tools`); to {verb} a tool or server that the app does not load now (an MCP "
    "server that is down{failed}), pass allow_unknown=True."
)
ADD_CONTEXT_FIELDS_FIX = (
    "give the graph's state the tool-context fields: StateGraph(ToolBudgetState, "
    "input_schema=ToolBudgetInput) or a subclass of ToolBudgetState, with the package's nodes "
    "(ToolAgent, add_toolbudget_nodes) in it"
)
NO_ENTRY_NODE_ERROR = (
    "thread {thread!r} has never run, so the update must be written as one of the graph's nodes "
    "(as the graph's input, its input schema would drop the tool-context fields), and the "
    "graph's START leads to {targets}: pass as_node= naming the node to write it as, e.g. "
    "update_context(graph, config, update, as_node={example!r})"
)
AMBIGUOUS_NODE_ERROR = (
    "several nodes of the graph ran last on thread {thread!r}, so the node that writes the update "
    "is ambiguous: pass as_node= naming one of the graph's nodes ({nodes})"
)

_DECISIONS = ("include", "exclude")
_CONTEXT_VALUES: dict[str, tuple[tuple[str, ...], str]] = {
    TOOLS_FIELD: (_DECISIONS, "include_tools(tools=[...]) or exclude_tools(tools=[...])"),
    SERVERS_FIELD: (_DECISIONS, "include_tools(servers=[...]) or exclude_tools(servers=[...])"),
    TOOL_MODES_FIELD: (INCLUDE_MODES, "set_include_mode(mode, tools=[...])"),
    SERVER_MODES_FIELD: (INCLUDE_MODES, "set_include_mode(mode, servers=[...])"),
}


def check_context_update(update: Any) -> dict[str, dict[str, str | None]]:
    """A tool-context update, checked: the context fields only, each name -> an allowed value.

    Raises:
        TypeError: an update that is not a mapping, or a field that is not one.
        ValueError: a key that is not a context field, a value out of its field's choices,
            or an update that names nothing.
    """
    if not isinstance(update, Mapping):
        raise TypeError(CONTEXT_UPDATE_TYPE_ERROR.format(value=update))
    unknown = [key for key in update if key not in CONTEXT_FIELDS]
    if unknown:
        fields = ", ".join(CONTEXT_FIELDS)
        raise ValueError(CONTEXT_UPDATE_KEYS_ERROR.format(fields=fields, keys=unknown))
    checked: dict[str, dict[str, str | None]] = {}
    for field, names in update.items():
        allowed, builder = _CONTEXT_VALUES[field]
        if not isinstance(names, Mapping):
            raise TypeError(
                CONTEXT_UPDATE_VALUE_ERROR.format(
                    field=field, allowed=allowed, value=names, builder=builder
                )
            )
        for name, value in names.items():
            bad_value = value is not None and value not in allowed
            if not isinstance(name, str) or not name or bad_value:
                raise ValueError(
                    CONTEXT_UPDATE_VALUE_ERROR.format(
                        field=field, allowed=allowed, value={name: value}, builder=builder
                    )
                )
        if names:
            checked[field] = dict(names)
    if not checked:
        raise ValueError(CONTEXT_UPDATE_EMPTY_ERROR)
    return checked


def entry_node(graph: Any) -> str | None:
    """The node right after ``START`` of a ``StateGraph`` (uncompiled or compiled).

    None when ``START`` leads to several nodes, through a conditional edge, or the
    graph was not built from a ``StateGraph``. The one place that decides which node
    writes an update on a thread that has never run (:func:`update_context`, the CLI's
    SQLite threads; a server thread reads its drawn graph with :func:`start_target`).
    """
    builder = getattr(graph, "builder", graph)
    edges = getattr(builder, "edges", None)
    if edges is None or getattr(builder, "branches", {}).get(START):
        return None
    return start_target(edges)


def start_target(edges: Any) -> str | None:
    """The one target of the ``(source, target)`` edges leaving ``START``, else None."""
    first = [target for source, target in edges if source == START]
    return first[0] if len(first) == 1 else None


def _start_targets(graph: Any) -> str:
    """What ``START`` leads to, in words for an error."""
    builder = getattr(graph, "builder", graph)
    targets = sorted(target for source, target in getattr(builder, "edges", ()) if source == START)
    branches = getattr(builder, "branches", {}).get(START) or {}
    ends = sorted(
        str(end)
        for spec in branches.values()
        for end in set((getattr(spec, "ends", None) or {}).values())
    )
    words = []
    if targets:
        words.append(f"the nodes {targets}")
    if branches:
        words.append(f"a conditional edge (to {ends})" if ends else "a conditional edge")
    return " and ".join(words) or "no node of a StateGraph"


def _thread_saver(graph: Any, config: Any) -> Any:
    """The checkpointer that holds the thread ``config`` names."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    configurable = (config or {}).get("configurable") or {}
    if not configurable.get("thread_id"):
        raise ValueError(NO_THREAD_ID_ERROR.format())
    saver = getattr(graph, "checkpointer", None)
    if not isinstance(saver, BaseCheckpointSaver):
        raise ValueError(NO_CHECKPOINTER_ERROR)
    return saver


# LangGraph's checkpoint namespaces: "node:task_id|child:task_id" (a number alone marks a
# call a task repeats); a subgraph is named by its nodes, without the task ids.
_NS_SEP, _NS_END = "|", ":"


def _context_graph(
    graph: Any, config: Any, values: Mapping[str, Mapping[str, Any]], allow_unknown: bool
) -> tuple[Any, Any]:
    """The graph whose state a tool-context update writes, and the config of its thread:
    ``graph``, or the subgraph the config's ``checkpoint_ns`` names (a ``checkpointer=True``
    subgraph keeps its state under its namespace without task ids, as LangGraph stores it).

    Raises:
        ValueError: a namespace that names no subgraph, or one that is never read (a subgraph
            that starts afresh on every run); a state without the update's fields, or whose
            fields no node reads (its agents are subgraphs), with where the tool context lives
            instead; names the state's agents lack and another agent of ``graph`` has, or
            (without ``allow_unknown``) that no agent has.
    """
    configurable = config["configurable"]
    ns = str(configurable.get("checkpoint_ns") or "")
    thread = configurable["thread_id"]
    target, name, prefix, where = graph, "", "", "this graph"
    if ns:
        parts = ns.split(_NS_SEP)
        name = _NS_SEP.join(p.split(_NS_END)[0] for p in parts if not p.isdigit())
        found = next(iter(graph.get_subgraphs(namespace=name, recurse=True)), None)
        if found is None:
            subgraphs = [n for n, _ in graph.get_subgraphs(recurse=True)]
            if not subgraphs:
                raise ValueError(NO_SUBGRAPHS_ERROR.format(ns=ns))
            raise ValueError(UNKNOWN_SUBGRAPH_ERROR.format(ns=ns, name=name, subgraphs=subgraphs))
        target = found[1]
        if getattr(target, "checkpointer", None) is True:
            # LangGraph keeps such a subgraph's state under `name` (recast_checkpoint_ns)
            config = {**config, "configurable": {**configurable, "checkpoint_ns": name}}
        elif _NS_END not in parts[-1]:
            raise ValueError(STATELESS_SUBGRAPH_ERROR.format(ns=name))
        prefix, where = name + _NS_SEP, f"the subgraph {name!r}"
    fields = list(values)
    channels = getattr(target, "channels", {})
    missing = [field for field in fields if field not in channels]
    if missing:
        fix = _context_fix(target, prefix, thread, missing, values) or ADD_CONTEXT_FIELDS_FIX
        raise ValueError(
            NO_CONTEXT_FIELDS_ERROR.format(where=where, missing=" or ".join(missing), fix=fix)
        )
    reads, catalogs = _readers(target, fields)
    if not reads and (elsewhere := _context_fix(target, prefix, thread, fields, values)):
        # a ToolBudgetState parent of agent subgraphs: its fields reach none of them
        raise ValueError(
            CONTEXT_NOT_READ_ERROR.format(where=where, fields=" or ".join(fields), fix=elsewhere)
        )
    _check_owner(graph, name, where, catalogs, values, thread, allow_unknown)
    return target, config


class _Agent(NamedTuple):
    """A graph whose state keeps a tool context its nodes read: an agent."""

    ns: str
    """Its namespace from the graph searched ("" for that graph itself)."""
    catalogs: list[ToolCatalog]
    """The catalogs of the nodes that read its context ([] for nodes of your own)."""
    persistent: bool
    """Whether its state outlives a run (the graph itself, or ``checkpointer=True``)."""


def _readers(graph: Any, fields: list[str]) -> tuple[bool, list[ToolCatalog]]:
    """Whether a node of ``graph`` reads the tool-context ``fields`` of its state, and the
    catalogs of those that do: the package's nodes (``ToolAgent``, ``CallModel``...,
    ``ToolBudgetMiddleware``'s hooks), and a subgraph whose input schema takes the fields
    (an agent compiled as a node whose own input leaves them out does not read them)."""
    reads = False
    catalogs: list[ToolCatalog] = []
    for node in getattr(graph, "nodes", {}).values():
        found = node_catalogs(node)
        if not found and _takes_context(node, fields):
            found = _readers(node.bound, fields)[1]
        elif not found:
            continue
        reads = True
        catalogs += [c for c in found if all(c is not known for known in catalogs)]
    return reads, catalogs


def _takes_context(node: Any, fields: list[str]) -> bool:
    """Is ``node`` a compiled ``StateGraph`` given the fields whose input schema takes them?"""
    builder = getattr(getattr(node, "bound", None), "builder", None)
    schemas = getattr(builder, "schemas", None)
    if not isinstance(schemas, Mapping):
        return False
    inputs = schemas.get(getattr(builder, "input_schema", None)) or {}
    given = getattr(node, "channels", None) or ()
    given = (given,) if isinstance(given, str) else given
    return all(field in inputs and field in given for field in fields)


def _agents(graph: Any, fields: list[str]) -> list[_Agent]:
    """The agents of ``graph`` (itself, then its subgraphs): the graphs whose state has the
    ``fields`` and whose nodes read them, or where no subgraph holds them (your own nodes,
    reading them as they like); a ``ToolAgent``'s loop is its node's, in its graph."""
    holders = [
        (ns, subgraph)
        for ns, subgraph in [("", graph), *graph.get_subgraphs(recurse=True)]
        if all(field in getattr(subgraph, "channels", {}) for field in fields)
        and (not ns or not _compiled_inside_a_node(graph, subgraph))
    ]
    agents = []
    for ns, subgraph in holders:
        reads, catalogs = _readers(subgraph, fields)
        inner = ns + _NS_SEP if ns else ""
        if reads or not any(other.startswith(inner) and other != ns for other, _ in holders):
            persistent = not ns or getattr(subgraph, "checkpointer", None) is True
            agents.append(_Agent(ns, catalogs, persistent))
    return agents


def _knows(catalogs: list[ToolCatalog], field: str, name: str) -> bool:
    """Does one of ``catalogs`` have the tool (or server, by ``field``) ``name``?"""
    return knows(catalogs, name, server=_kind(field) == "server")


def _kind(field: str) -> str:
    """What a name of ``field`` names, in words."""
    return "tool" if field in (TOOLS_FIELD, TOOL_MODES_FIELD) else "server"


def _named(values: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The update's ``(field, name)`` pairs."""
    return [(field, name) for field, names in values.items() for name in names]


def _has(agent: _Agent, values: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The names of the update that the agent's catalogs have, once each."""
    found = [name for field, name in _named(values) if _knows(agent.catalogs, field, name)]
    return list(dict.fromkeys(found))


def _context_fix(
    graph: Any, prefix: str, thread: Any, fields: list[str], values: Mapping[str, Any]
) -> str | None:
    """Where the agents of a graph whose own state does not keep the tool context keep it:
    its agent subgraphs, each named (those whose catalog has the update's names first);
    None if it has none."""
    agents = [agent for agent in _agents(graph, fields) if agent.ns]
    if len(agents) == 1:
        fix = CONTEXT_IN_SUBGRAPH_FIX if agents[0].persistent else STATELESS_SUBGRAPH_FIX
        return fix.format(ns=prefix + agents[0].ns, thread=thread)
    if not agents:
        return None
    agents.sort(key=lambda agent: not _has(agent, values))  # stable: graph order otherwise
    words = []
    for agent in agents:
        notes = [f"its catalog has {', '.join(has)}"] if (has := _has(agent, values)) else []
        notes += [] if agent.persistent else [PER_RUN_AGENT_WORDS]
        words.append(f"{prefix + agent.ns!r}" + (f" ({'; '.join(notes)})" if notes else ""))
    ns = prefix + agents[0].ns
    return CONTEXT_IN_AGENTS_FIX.format(agents=", ".join(words), ns=ns, thread=thread)


def _check_owner(
    graph: Any,
    ns: str,
    where: str,
    catalogs: list[ToolCatalog],
    values: Mapping[str, Mapping[str, Any]],
    thread: Any,
    allow_unknown: bool,
) -> None:
    """Refuse an update written in the state of the agent of ``catalogs`` (at ``ns`` of
    ``graph``) that names tools or servers it lacks: another agent of ``graph`` has them (it
    would still run them), or none has (a misspelt name, unless ``allow_unknown``: an MCP
    tool not listed now). Taking a name out (``None``) is never refused: a gone tool's entry
    can always be cleared."""
    if not catalogs:  # nodes of your own: no catalog says what they run
        return
    lacking = [
        (field, name)
        for field, name in _named(values)
        if values[field][name] is not None and not _knows(catalogs, field, name)
    ]
    if not lacking:
        return
    owners = [
        (agent, has)
        for agent in _agents(graph, list(values))
        if agent.ns != ns
        and (has := list(dict.fromkeys(n for f, n in lacking if _knows(agent.catalogs, f, n))))
    ]
    if not owners:
        unheard = [(f, n) for f, n in lacking if not _of_failed_server(catalogs, f, n)]
        if unheard and not allow_unknown:
            _refuse_unknown(where, catalogs, unheard, values)
        return
    kinds = {name: _kind(field) for field, name in lacking}
    names = list(dict.fromkeys(name for _, has in owners for name in has))
    words = []
    for agent, has in owners:
        where_ = f"the subgraph {agent.ns!r}" if agent.ns else "this graph"
        note = "" if agent.persistent else f"; {PER_RUN_AGENT_WORDS}"
        words.append(f"{where_} ({', '.join(has)}{note})")
    first, theirs = owners[0]
    example: dict[str, Any] = {"thread_id": thread}
    if first.ns:
        example["checkpoint_ns"] = first.ns
    raise ValueError(
        OTHER_AGENT_NAMES_ERROR.format(
            where=where,
            names=" or ".join(f"{kinds[name]} {name!r}" for name in names),
            them="them" if len(names) > 1 else "it",
            owners=" and ".join(words),
            have="have" if len(owners) > 1 else "has",
            config=example,
            theirs=", ".join(map(repr, theirs)),
        )
    )


def _of_failed_server(catalogs: list[ToolCatalog], field: str, name: str) -> bool:
    """Is ``name`` a server that failed to load, or a tool of one by its prefix?"""
    return of_failed_server(catalogs, name, server=_kind(field) == "server")


def _refuse_unknown(
    where: str,
    catalogs: list[ToolCatalog],
    lacking: list[tuple[str, str]],
    values: Mapping[str, Mapping[str, Any]],
) -> None:
    """Raise :data:`UNKNOWN_CONTEXT_NAMES_ERROR` for the names no catalog of the agent has,
    with the closest names each kind has."""
    names = list(dict.fromkeys(f"{_kind(field)} {name!r}" for field, name in lacking))
    missing_tools = [n for f, n in lacking if _kind(f) == "tool"]
    missing_servers = [n for f, n in lacking if _kind(f) == "server"]
    closest = closest_context_names(catalogs, missing_tools, missing_servers)
    failed = sorted({s for c in catalogs for s in c.failed_servers})
    verbs = {v if v in ("include", "exclude") else "set the mode of" for f, n in lacking
             if (v := values[f][n])}  # fmt: skip
    verb = " or ".join(sorted(verbs))
    raise ValueError(
        UNKNOWN_CONTEXT_NAMES_ERROR.format(
            where=where,
            names=" or ".join(names),
            closest=f"closest: {closest}",
            verb=verb,
            failed=f": {', '.join(map(repr, failed))} failed to load" if failed else "",
        )
    )


def _compiled_inside_a_node(graph: Any, subgraph: Any) -> bool:
    """Is ``subgraph`` the loop a node of ``graph`` or of one of its subgraphs compiles itself
    (``ToolAgent``'s), which no option compiles with ``checkpointer=True``?"""
    graphs = [graph, *(inner for _, inner in graph.get_subgraphs(recurse=True))]
    return any(
        getattr(getattr(node, "bound", None), "graph", None) is subgraph
        for inner in graphs
        for node in getattr(inner, "nodes", {}).values()
    )


def _first_writer(graph: Any, config: Any, saved: Any, as_node: str | None) -> str | None:
    """The node to write a tool-context update as on a thread where no node has run (where
    LangGraph would write it as the graph's input), else None: the update is written as
    ``update_state`` writes it (``as_node``, or the node that ran last)."""
    from langgraph_toolbudget._compat import inferred_update_node

    seen = saved.checkpoint["versions_seen"] if saved is not None else {}
    node = inferred_update_node(graph, seen)
    thread = config["configurable"]["thread_id"]
    if node is None and as_node is None:
        nodes = ", ".join(n for n in graph.nodes if n != START)
        raise _NodeNeededError(AMBIGUOUS_NODE_ERROR.format(thread=thread, nodes=nodes))
    if node != START:
        return None
    writer = as_node if as_node is not None else entry_node(graph)
    if writer is None or writer == START:
        example = next((n for n in graph.nodes if n != START), "node")
        targets = _start_targets(graph)
        raise _NodeNeededError(
            NO_ENTRY_NODE_ERROR.format(thread=thread, targets=targets, example=example)
        )
    return writer


def _updates(values: dict[str, Any], writer: str | None, as_node: str | None) -> Any:
    """``bulk_update_state``'s supersteps: as ``update_state`` on a thread where a node ran;
    where none did, written as ``writer``, then ``START`` again with nothing, so the thread
    waits where ``update_state`` would leave it (a run resumed with ``None`` starts at the
    graph's first node, not after it)."""
    from langgraph.types import StateUpdate

    if writer is None:
        return [[StateUpdate(values, as_node)]]
    return [[StateUpdate(values, writer)], [StateUpdate(None, START)]]


def update_context(
    graph: Pregel[Any, Any, Any, Any],
    config: RunnableConfig,
    update: Mapping[str, Any],
    *,
    as_node: str | None = None,
    allow_unknown: bool = False,
) -> RunnableConfig:
    """Apply a tool-context update to a thread of a compiled graph, whether it ran or not.

    ``graph.update_state(config, exclude_tools(...))`` loses the update on a thread
    where no node has run yet: LangGraph writes it there as the graph's input, and the
    input schema leaves the tool-context fields out (so that a run's input never
    changes them). This writes it, on such a thread, as the node right after ``START``
    (then marks ``START`` as run again, so the thread's next step stays the graph's
    first node), and on any other thread exactly as ``update_state`` does. It works on
    any graph whose state has the context fields:
    :func:`~langgraph_toolbudget.create_toolbudget_agent`, a graph of your own with
    :func:`~langgraph_toolbudget.add_toolbudget_nodes` or the nodes, and LangChain's
    ``create_agent`` with :class:`~langgraph_toolbudget.ToolBudgetMiddleware`. Where such
    an agent is a node of a parent graph whose state lacks the fields (a ``MessagesState``
    parent), the tool context lives in the subgraph's state: name it with the config's
    ``checkpoint_ns`` (the node's name, for a subgraph compiled with ``checkpointer=True``;
    a paused task's config for one that starts afresh each run). So it is on a
    ``ToolBudgetState`` parent whose agents are all subgraphs: their input leaves the
    fields out, and no node of the parent reads them. With several agents, write each
    update in the agent whose catalog has its tools: one naming a tool or server that the
    target's catalog lacks and another agent's has is refused, naming that agent; one that
    no agent's catalog has is refused with the closest names (a misspelt exclusion would
    change nothing), unless ``allow_unknown``. An update the state cannot hold, or that no
    agent would read, is refused, never dropped.

    Args:
        graph: the compiled graph, compiled with a checkpointer.
        config: the thread's config (``{"configurable": {"thread_id": ...}}``), with
            ``"checkpoint_ns"`` to write a subgraph's state.
        update: a tool-context update: :func:`~langgraph_toolbudget.include_tools`,
            :func:`~langgraph_toolbudget.exclude_tools`,
            :func:`~langgraph_toolbudget.set_include_mode`, or their fields merged.
        as_node: the node to write the update as (``update_state``'s ``as_node``); on a
            thread where no node has run, needed when ``START`` leads to several nodes or
            through a conditional edge (any node but ``START`` keeps the fields).
        allow_unknown: write names the target's catalog does not list (a tool of an MCP
            server that is down or not added yet), as given. Taking a name out (``None``,
            e.g. ``set_include_mode(None, ...)``) is always allowed.

    Returns:
        The config of the thread's new checkpoint, as ``update_state`` returns it.

    Raises:
        TypeError: an update (or one of its fields) that is not a mapping.
        ValueError: a key that is not a tool-context field (write other state with
            ``graph.update_state``), a value out of its field's choices, an empty update;
            a graph without a checkpointer, a config without a thread; no ``as_node`` on a
            thread where no node has run and ``START`` does not lead to one node, or where
            several nodes ran last; a state without the update's fields, or whose fields
            no node reads (the error names each agent subgraph, the one whose catalog has
            the update's names first, or how to add them), a ``checkpoint_ns`` of no
            subgraph, or of a subgraph that keeps no state between runs; names the target's
            catalog lacks and another agent's has (the error names that agent), or that no
            agent's catalog has, without ``allow_unknown`` (the error gives the closest).

    Example:
        ```python
        from langgraph_toolbudget import exclude_tools, update_context
        config = {"configurable": {"thread_id": "t1"}}
        update_context(app, config, exclude_tools(tools=["delete_file"]))
        ```
    """
    values = check_context_update(update)
    saver = _thread_saver(graph, config)
    target, config = _context_graph(graph, config, values, allow_unknown)
    writer = _first_writer(target, config, saver.get_tuple(config), as_node)
    return graph.bulk_update_state(config, _updates(values, writer, as_node))


async def aupdate_context(
    graph: Pregel[Any, Any, Any, Any],
    config: RunnableConfig,
    update: Mapping[str, Any],
    *,
    as_node: str | None = None,
    allow_unknown: bool = False,
) -> RunnableConfig:
    """Async :func:`update_context` (``aget_tuple``, ``abulk_update_state``): same arguments,
    result and errors."""
    values = check_context_update(update)
    saver = _thread_saver(graph, config)
    target, config = _context_graph(graph, config, values, allow_unknown)
    writer = _first_writer(target, config, await saver.aget_tuple(config), as_node)
    return await graph.abulk_update_state(config, _updates(values, writer, as_node))


class SqliteThread:
    """A thread in a ``SqliteSaver`` file, updated through the app's own graph.

    The graph compiles with the file's saver, so ``update_state`` runs the
    graph's reducers and keeps every field of its state schema.

    Args:
        path: the SQLite file.
        thread_id: the thread.
        graph: the app's ``StateGraph`` (uncompiled).

    Raises:
        ThreadError: no such file, or no ``langgraph-checkpoint-sqlite`` installed.
    """

    def __init__(self, path: str | Path, thread_id: str, graph: Any) -> None:
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError as exc:
            raise ThreadError(NO_SQLITE_SAVER_ERROR) from exc
        path = Path(path)
        if not path.is_file():
            raise ThreadError(NO_SQLITE_ERROR.format(path=path))
        self._saver_cm = SqliteSaver.from_conn_string(str(path))
        saver = self._saver_cm.__enter__()
        self.graph = graph
        self.app = graph.compile(checkpointer=saver)
        self.path = path
        self.thread_id = thread_id
        self.config: RunnableConfig = {"configurable": {"thread_id": thread_id}}

    def close(self) -> None:
        """Close the SQLite connection."""
        self._saver_cm.__exit__(None, None, None)

    def __enter__(self) -> SqliteThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _state(self) -> Any:
        try:
            return self.app.get_state(self.config)
        except sqlite3.Error as exc:
            raise ThreadError(NOT_SQLITE_ERROR.format(path=self.path, error=exc)) from None

    def values(self) -> dict[str, Any]:
        snapshot = self._state()
        if snapshot.created_at is None:  # no checkpoint: the thread does not exist
            where = f"the SQLite file {self.path}"
            raise ThreadError(UNKNOWN_THREAD_ERROR.format(thread=self.thread_id, where=where))
        return dict(snapshot.values)

    def update(self, update: Mapping[str, Any]) -> None:
        # update_context writes it as the graph's first node on a thread that never ran: as
        # the graph's input (LangGraph's choice there), the input schema would drop it.
        try:
            update_context(self.app, self.config, update)
        except sqlite3.Error as exc:
            raise ThreadError(NOT_SQLITE_ERROR.format(path=self.path, error=exc)) from None
        except _NodeNeededError as exc:  # a graph whose first node is not one
            raise ThreadError(
                f"{exc} (the CLI takes no as_node: give --graph a graph whose "
                "START leads to one node)"
            ) from None
        except ValueError as exc:  # a state that does not keep the tool context
            raise ThreadError(
                f"{exc} (the CLI writes the state of the graph --graph names, not a subgraph's: "
                "point --graph at the agent's own graph, whose nodes read the tool-context fields "
                "of its state, or call update_context from Python)"
            ) from None


def execute(
    thread: Thread,
    catalog: ToolCatalog,
    command: str,
    args: Mapping[str, Any],
    *,
    max_chars: int | None = None,
) -> CommandResult:
    """Run one tool-context operation on a thread: read its values, answer, apply the update.

    The user's faces (the CLI, the MCP context server) call it: the operation may lift an
    exclusion, which the model's own context tools may not.

    Args:
        thread: the thread.
        catalog: the catalog of the thread's agent.
        command: the operation.
        args: its arguments.
        max_chars: cut a longer answer as the model's own context tools do (None: the whole
            answer; see :func:`~langgraph_toolbudget.core.context_commands.run_command`).

    Raises:
        ThreadError: the thread cannot be read or updated.
        CommandError: a bad operation or argument (see
            :func:`~langgraph_toolbudget.core.context_commands.run_command`).
    """
    values = thread.values()
    result = run_command(catalog, values, command, args, by_user=True, max_chars=max_chars)
    if result.update:
        thread.update(result.update)
    return result


NO_TARGET_ERROR = (
    "say which thread: --url URL --thread ID (a LangGraph server) or --sqlite PATH --graph "
    "module:attribute --thread ID (a local SqliteSaver file and the app's graph)"
)
NO_THREAD_ERROR = "--thread is missing: pass the thread id (e.g. --thread 1ef...)"
NO_GRAPH_ERROR = (
    "--sqlite needs --graph module:attribute: the app's StateGraph, whose reducers apply the update"
)


def open_thread(
    *,
    url: str | None,
    thread_id: str | None,
    sqlite: str | None = None,
    graph: str | None = None,
    catalog: str | None = None,
    graph_id: str | None = None,
) -> tuple[Thread, ToolCatalog]:
    """The thread named by the CLI/MCP server options, and the catalog of its agent.

    A LangGraph server thread needs ``catalog`` (or ``$TOOLBUDGET_CATALOG``), and
    ``graph_id`` when it has never run on a server of several graphs (see
    :class:`ServerThread`); a SQLite thread takes its graph's catalog unless
    ``catalog`` is given.

    Raises:
        ThreadError: options that name no thread, or name it incompletely.
    """
    if not url and not sqlite:
        raise ThreadError(NO_TARGET_ERROR)
    if not thread_id:
        raise ThreadError(NO_THREAD_ERROR)
    if url:
        return ServerThread(url, thread_id, graph_id), load_catalog(catalog)
    if not graph:
        raise ThreadError(NO_GRAPH_ERROR)
    builder = load_graph(graph)
    found = load_catalog(catalog) if catalog else catalog_of(builder)
    if found is None:
        found = load_catalog(None)
    assert sqlite is not None
    return SqliteThread(sqlite, thread_id, builder), found
