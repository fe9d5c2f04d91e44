"""A thread's tool context from outside the graph: a LangGraph server thread or a SQLite file.

Its one reason to change: how a thread's state is reached from outside its graph.

The CLI (:mod:`langgraph_toolbudget.cli`) and the MCP context server
(:mod:`langgraph_toolbudget.context_server`) read a thread's state values and
apply the state updates of
:func:`~langgraph_toolbudget.core.context_commands.run_command` through one of
these, so both manage a deployed agent and a local one the same way.

Key Components:
    - :class:`ServerThread`: a thread of a LangGraph server, through ``langgraph_sdk``.
    - :class:`SqliteThread`: a thread in a ``SqliteSaver`` file, through the app's own
      graph (its reducers apply the update; no state field is lost).
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from langgraph.constants import START

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.context_commands import CommandResult, run_command

__all__ = [
    "CATALOG_ENV",
    "ServerThread",
    "SqliteThread",
    "Thread",
    "ThreadError",
    "catalog_of",
    "execute",
    "load_catalog",
    "load_graph",
    "load_spec",
    "open_thread",
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
SERVER_ERROR = "the LangGraph server at {url} refused the request: {error}"
NO_SQLITE_ERROR = "no SQLite file at {path}; check --sqlite"
NO_GRAPH_ID_ERROR = (
    "thread {thread!r} has never run, so the server does not know its graph: pass --graph-id "
    "with the agent's graph (one of: {graphs}), or run one turn on the thread first"
)


class ThreadError(RuntimeError):
    """A thread that cannot be read or updated; the message is one actionable line."""


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
        for runnable in (getattr(node, "runnable", None), getattr(node, "bound", None)):
            for owner in _owners(runnable):
                catalog = getattr(owner, "catalog", None)
                if isinstance(catalog, ToolCatalog):
                    return catalog
    return None


def _owners(runnable: Any) -> list[Any]:
    """A node's runnable and the objects whose bound methods it runs (a middleware's hook)."""
    if runnable is None:
        return []
    hooks = (getattr(runnable, "func", None), getattr(runnable, "afunc", None))
    return [runnable, *(getattr(fn, "__self__", None) for fn in hooks if fn is not None)]


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

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        import httpx

        try:
            return fn(*args, **kwargs)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 404:
                where = f"the LangGraph server at {self.url}"
                raise ThreadError(
                    UNKNOWN_THREAD_ERROR.format(thread=self.thread_id, where=where)
                ) from None
            hint = "; check --thread" if exc.response.status_code == 422 else ""
            detail = _detail(exc)
            raise ThreadError(SERVER_ERROR.format(url=self.url, error=detail) + hint) from None
        except httpx.TransportError as exc:
            raise ThreadError(SERVER_DOWN_ERROR.format(url=self.url, error=exc)) from None

    def values(self) -> dict[str, Any]:
        state = self._call(self.client.threads.get_state, self.thread_id)
        values = state.get("values") if isinstance(state, Mapping) else None
        return dict(values) if isinstance(values, Mapping) else {}

    def update(self, update: Mapping[str, Any]) -> None:
        # A thread that has never run has no graph_id in its metadata; the server then
        # refuses update_state (in words that vary by server version): assign it first.
        # Its update is written as the graph's first node: as the graph's input (LangGraph's
        # choice for a thread that never ran), the input schema would drop the budget fields.
        thread = self._call(self.client.threads.get, self.thread_id)
        metadata = thread.get("metadata") if isinstance(thread, Mapping) else None
        as_node = None
        if not (isinstance(metadata, Mapping) and metadata.get("graph_id")):
            as_node = self._entry_node(self._assign_graph())
        elif not self.values():
            as_node = self._entry_node(str(metadata["graph_id"]))
        self._call(self.client.threads.update_state, self.thread_id, dict(update), as_node=as_node)

    def _entry_node(self, graph_id: str) -> str | None:
        """The node right after the start of the thread's graph (None if it has several)."""
        assistants = self._call(self.client.assistants.search, graph_id=graph_id, limit=1)
        if not assistants:
            return None
        graph = self._call(self.client.assistants.get_graph, assistants[0]["assistant_id"])
        first = [e["target"] for e in graph.get("edges", []) if e.get("source") == START]
        return first[0] if len(first) == 1 else None

    def _assign_graph(self) -> str:
        """Give a thread that has never run its graph, so the server accepts updates."""
        graph_id = self.graph_id
        if graph_id is None:
            assistants = self._call(self.client.assistants.search, limit=1000)
            graphs = sorted({a["graph_id"] for a in assistants})
            if len(graphs) != 1:
                raise ThreadError(
                    NO_GRAPH_ID_ERROR.format(thread=self.thread_id, graphs=", ".join(graphs))
                )
            graph_id = graphs[0]
        self._call(self.client.threads.update, self.thread_id, metadata={"graph_id": graph_id})
        return graph_id


def entry_node(graph: Any) -> str | None:
    """The node right after ``START`` in an uncompiled ``StateGraph`` (None if several)."""
    first = [target for source, target in graph.edges if source == START]
    return first[0] if len(first) == 1 else None


class SqliteThread:
    """A thread in a ``SqliteSaver`` file, updated through the app's own graph.

    The graph compiles with the file's saver, so ``update_state`` runs the
    graph's reducers and keeps every field of its state schema.

    Args:
        path: the SQLite file.
        thread_id: the thread.
        graph: the app's ``StateGraph`` (uncompiled).

    Raises:
        ThreadError: no such file.
    """

    def __init__(self, path: str | Path, thread_id: str, graph: Any) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = Path(path)
        if not path.is_file():
            raise ThreadError(NO_SQLITE_ERROR.format(path=path))
        self._saver_cm = SqliteSaver.from_conn_string(str(path))
        saver = self._saver_cm.__enter__()
        self.graph = graph
        self.app = graph.compile(checkpointer=saver)
        self.path = path
        self.thread_id = thread_id
        self.config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}

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
        # A thread that never ran takes the update as the graph's first node: as the graph's
        # input (LangGraph's choice then), the input schema would drop the budget fields.
        fresh = self._state().created_at is None
        as_node = entry_node(self.graph) if fresh else None
        try:
            self.app.update_state(self.config, dict(update), as_node=as_node)
        except sqlite3.Error as exc:
            raise ThreadError(NOT_SQLITE_ERROR.format(path=self.path, error=exc)) from None


def execute(
    thread: Thread, catalog: ToolCatalog, command: str, args: Mapping[str, Any]
) -> CommandResult:
    """Run one tool-context operation on a thread: read its values, answer, apply the update.

    Raises:
        ThreadError: the thread cannot be read or updated.
        CommandError: a bad operation or argument (see
            :func:`~langgraph_toolbudget.core.context_commands.run_command`).
    """
    values = thread.values()
    result = run_command(catalog, values, command, args)
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
