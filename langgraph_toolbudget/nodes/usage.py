"""``ToolUsage``: the tools that served past requests, kept in a LangGraph store.

Key Components:
    - :class:`ToolUsage`: record (automatically through ``usage=`` on the
      agent, the executor and the prebuilt graph, or by hand), forget,
      export/import; backed by a LangGraph ``BaseStore`` (the one given, else
      the running graph's, else memory) so the history survives restarts and is
      shared by threads and workers. The ranking nodes (``ClassifyIntent``,
      ``SelectTools``, ``ToolSearch``) read it through ``usage=``.
    - :func:`succeeded_tools`: the regular tools of a batch that ran successfully, which
      ``ToolExecutor`` and ``ToolAgent`` record; :func:`record_call` /
      :func:`arecord_call`: the same for one call, which ``ToolBudgetMiddleware``
      records (the agent's tool node runs each call on its own).

How the ranking nodes rank with it is in :mod:`langgraph_toolbudget.nodes.retrieval`.
Its one reason to change: what is recorded, where it is kept and how it is read back.

The history and its index are pure logic, in :mod:`langgraph_toolbudget.core.usage`.

Typical Usage:
    ```python
    usage = ToolUsage(store=SqliteStore(conn))
    graph = create_toolbudget_agent(model, catalog, usage=usage)
    usage.record("is it going to rain in Oslo?", ["get_forecast"])  # or learned while it runs
    ```
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore, PutOp
from langgraph.types import Command

from langgraph_toolbudget._compat import runtime_of
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.intent import latest_user_text
from langgraph_toolbudget.core.meta import META_TOOL_NAMES
from langgraph_toolbudget.core.usage import (
    DEFAULT_MAX_QUERIES_PER_TOOL,
    DEFAULT_USAGE_WEIGHT,
    UsageIndex,
    UsageRecord,
    check_record_args,
    fuse_usage,
)
from langgraph_toolbudget.core.working_set import state_messages

__all__ = ["OPT_OUT_KEY", "ToolUsage", "arecord_call", "record_call", "succeeded_tools"]

logger = logging.getLogger(__name__)

OPT_OUT_KEY = "toolbudget_record_usage"
"""``config["configurable"][OPT_OUT_KEY] = False`` turns recording off for that run (thread)."""

PAGE = 1000
BAD_STORE_ERROR = (
    "store must be a LangGraph BaseStore (InMemoryStore, SqliteStore, PostgresStore...) or None "
    "(the running graph's store, else memory); got {kind}."
)
BAD_NAMESPACE_ERROR = "namespace must be a non-empty tuple of strings, got {value!r}."
BAD_ROW_ERROR = (
    "import_ row {i} must be a mapping with 'tool' and 'query' strings (as export() gives), "
    "optional 'thread' and 'ts'; got {row!r}."
)


def _key(record: UsageRecord) -> str:
    return hashlib.sha1(f"{record.tool}\n{record.query}".encode()).hexdigest()


def _row(value: Mapping[str, Any], i: int) -> UsageRecord:
    tool, query = value.get("tool"), value.get("query")
    thread, ts = value.get("thread"), value.get("ts", 0.0)
    ok = isinstance(tool, str) and bool(tool) and isinstance(query, str) and bool(query)
    ok = ok and (thread is None or isinstance(thread, str)) and isinstance(ts, int | float)
    if not ok:
        raise ValueError(BAD_ROW_ERROR.format(i=i, row=dict(value)))
    return UsageRecord(str(tool), str(query), thread, float(ts))


class ToolUsage:
    """Which tools served which requests: recorded, bounded, kept in a LangGraph store.

    Record a user's message with the tools that ran successfully for it; the
    ranking nodes given ``usage=`` then rank those tools higher for similar
    messages (the messages expand each tool's searchable text, fused with the
    lexical and embedding scores, see :func:`~langgraph_toolbudget.core.usage.fuse_usage`).
    With ``usage=`` on ``create_toolbudget_agent``, ``ToolAgent`` or
    ``ToolExecutor`` recording is automatic: each regular tool that ran
    successfully is recorded against the latest user message (a tool loaded by
    a meta-tool and then called counts the same); refused and failed calls are
    not. Opt a run (a thread) out with
    ``config["configurable"]["toolbudget_record_usage"] = False``.

    Storage: every (tool, message) pair is one item of ``store`` under
    ``namespace`` (value: tool, message, thread id, time; never arguments or
    results). With ``store=None`` the running graph's store is used (the one
    given to ``compile(store=...)``, or LangGraph server's), attached on the
    first node run that has one; outside a graph the history lives in memory.
    The history is loaded from the store once, when attached; :meth:`refresh`
    reloads it (to see what other workers recorded since).

    Bounds: at most ``max_queries_per_tool`` distinct messages per tool (the
    oldest dropped, in memory and in the store), at most
    ``max_queries_per_thread`` of them from one thread (default a tenth).

    Args:
        store: a LangGraph ``BaseStore``, or None (see above).
        namespace: the store namespace of the items.
        max_queries_per_tool: distinct messages kept per tool.
        max_queries_per_thread: of those, at most this many from one thread.
        weight: the usage share of the fused score (see ``fuse_usage``); 0 ranks as without usage.

    Raises:
        TypeError: ``store`` is not a ``BaseStore``.
        ValueError: a bad namespace or bound.

    Example:
        ```python
        usage = ToolUsage()  # the graph's store when run in one, else memory
        usage.record("will it rain tomorrow?", ["get_forecast"])
        SelectTools(catalog, usage=usage)
        rows = usage.export()  # move the history to another deployment
        ToolUsage(store=other_store).import_(rows)
        ```
    """

    def __init__(
        self,
        store: BaseStore | None = None,
        namespace: tuple[str, ...] = ("toolbudget", "usage"),
        max_queries_per_tool: int = DEFAULT_MAX_QUERIES_PER_TOOL,
        *,
        max_queries_per_thread: int | None = None,
        weight: float = DEFAULT_USAGE_WEIGHT,
    ) -> None:
        if store is not None and not isinstance(store, BaseStore):
            raise TypeError(BAD_STORE_ERROR.format(kind=type(store).__name__))
        if (
            not isinstance(namespace, tuple)
            or not namespace
            or not all(isinstance(p, str) and p for p in namespace)
        ):
            raise ValueError(BAD_NAMESPACE_ERROR.format(value=namespace))
        if not isinstance(weight, int | float) or weight < 0:
            raise ValueError(f"weight must be a number >= 0, got {weight!r}")
        self.store = store
        self.namespace = namespace
        self.weight = float(weight)
        self.history = UsageIndex(max_queries_per_tool, max_queries_per_thread)
        self._attached: BaseStore | None = None
        self._attach_lock = threading.Lock()
        self._last: tuple[Any, np.ndarray | None, np.ndarray | None] | None = None

    def __repr__(self) -> str:
        where = type(self._attached or self.store).__name__ if self._attached or self.store else ""
        return f"ToolUsage({len(self.history)} records, store={where or 'memory'})"

    def __len__(self) -> int:
        return len(self.history)

    # --- the store ----------------------------------------------------------------------------

    def _store_for(self, config: RunnableConfig | None) -> BaseStore | None:
        if self.store is not None:
            return self.store
        runtime = runtime_of(config)
        store = getattr(runtime, "store", None)
        return store if isinstance(store, BaseStore) else self._attached

    def _load_ops(self, stored: list[UsageRecord]) -> list[PutOp]:
        """Merge ``stored`` with what is in memory; the store ops that make them agree."""
        memory = self.history.records()
        known = {_key(r) for r in stored}
        self.history.forget()
        ops = []
        for record in sorted([*stored, *memory], key=lambda r: r.ts):
            added, evicted = self.history.add(
                record.query, [record.tool], thread=record.thread, ts=record.ts
            )
            ops += [PutOp(self.namespace, _key(r), None) for r in evicted]
            ops += [self._put(r) for r in added if _key(r) not in known]
        return ops

    def _put(self, record: UsageRecord) -> PutOp:
        return PutOp(self.namespace, _key(record), record.to_dict(), index=False)

    def _stored(self, store: BaseStore) -> list[UsageRecord]:
        rows: list[UsageRecord] = []
        offset = 0
        while True:
            items = store.search(self.namespace, limit=PAGE, offset=offset)
            rows += [_row(item.value, offset + i) for i, item in enumerate(items)]
            if len(items) < PAGE:
                return rows
            offset += PAGE

    async def _astored(self, store: BaseStore) -> list[UsageRecord]:
        rows: list[UsageRecord] = []
        offset = 0
        while True:
            items = await _acall(store, "asearch", "search", self.namespace, PAGE, offset)
            rows += [_row(item.value, offset + i) for i, item in enumerate(items)]
            if len(items) < PAGE:
                return rows
            offset += PAGE

    def attach(self, config: RunnableConfig | None = None) -> None:
        """Load the history from the store (``store``, else the graph's in ``config``), once.

        The nodes call this; call it yourself to load at start-up.
        """
        store = self._store_for(config)
        if store is not None and store is not self._attached:
            self._attach_store(store)

    def _attach_store(self, store: BaseStore) -> None:
        with self._attach_lock:
            if store is not self._attached:
                ops = self._load_ops(self._stored(store))
                if ops:
                    store.batch(ops)
                self._attached = store

    async def aattach(self, config: RunnableConfig | None = None) -> None:
        """Async :meth:`attach` (``asearch``/``abatch``; a sync-only store runs in a thread)."""
        store = self._store_for(config)
        if store is None or store is self._attached:
            return
        stored = await self._astored(store)
        with self._attach_lock:
            if store is self._attached:
                return
            ops = self._load_ops(stored)
            self._attached = store
        if ops:
            await _acall(store, "abatch", "batch", ops)

    def refresh(self) -> None:
        """Reload the history from the store (what other workers recorded since it was loaded)."""
        store = self._attached or self.store
        if store is not None:
            self._attached = None
            self._attach_store(store)

    # --- recording ----------------------------------------------------------------------------

    def _changes(self, query: str, tool_names: Sequence[str], thread_id: str | None) -> list[PutOp]:
        added, evicted = self.history.add(query, tool_names, thread=thread_id)
        return [
            *(PutOp(self.namespace, _key(r), None) for r in evicted),
            *(self._put(r) for r in added),
        ]

    def record(
        self, query: str, tool_names: Sequence[str], *, thread_id: str | None = None
    ) -> None:
        """Record that ``tool_names`` served the user's message ``query``.

        Args:
            query: the user's message (stored trimmed, at most 2,000 characters).
            tool_names: the tools that ran successfully for it.
            thread_id: the conversation, for the per-thread bound.

        Raises:
            TypeError: ``query`` is not a string or ``tool_names`` not a list of names.
        """
        check_record_args(query, tool_names)
        self.attach()
        ops = self._changes(query, tool_names, thread_id)
        store = self._attached
        if ops and store is not None:
            store.batch(ops)

    async def arecord(
        self, query: str, tool_names: Sequence[str], *, thread_id: str | None = None
    ) -> None:
        """Async :meth:`record`."""
        check_record_args(query, tool_names)
        await self.aattach()
        ops = self._changes(query, tool_names, thread_id)
        store = self._attached
        if ops and store is not None:
            await _acall(store, "abatch", "batch", ops)

    @staticmethod
    def opted_out(config: RunnableConfig | None) -> bool:
        """True when the run's ``configurable`` turns recording off (``OPT_OUT_KEY``: False)."""
        return (config or {}).get("configurable", {}).get(OPT_OUT_KEY, True) is False

    @staticmethod
    def _thread(config: RunnableConfig | None) -> str | None:
        thread = (config or {}).get("configurable", {}).get("thread_id")
        return None if thread is None else str(thread)

    def record_run(self, query: str, tool_names: Sequence[str], config: RunnableConfig) -> None:
        """What the nodes call after a batch: record unless the run opted out."""
        if self.opted_out(config) or not query or not tool_names:
            return
        self.attach(config)
        self.record(query, tool_names, thread_id=self._thread(config))

    async def arecord_run(
        self, query: str, tool_names: Sequence[str], config: RunnableConfig
    ) -> None:
        """Async :meth:`record_run`."""
        if self.opted_out(config) or not query or not tool_names:
            return
        await self.aattach(config)
        await self.arecord(query, tool_names, thread_id=self._thread(config))

    # --- forget, export, import ---------------------------------------------------------------

    def forget(self, tool_names: Iterable[str] | None = None) -> int:
        """Drop the history of ``tool_names`` (``None``: all of it), in memory and in the store.

        Returns:
            How many (tool, message) pairs were dropped from memory.
        """
        names = None if tool_names is None else set(check_record_args("", list(tool_names)))
        dropped = self.history.forget(names)
        store = self._attached or self.store
        if store is not None:
            keys = {_key(r) for r in dropped}
            keys |= {_key(r) for r in self._stored(store) if names is None or r.tool in names}
            if keys:
                store.batch([PutOp(self.namespace, k, None) for k in sorted(keys)])
        return len(dropped)

    def export(self) -> list[dict[str, Any]]:
        """Every record as a JSON-ready row, oldest first (reloaded from the store first)."""
        self.refresh()
        return [r.to_dict() for r in self.history.records()]

    def import_(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Add exported rows (from :meth:`export`), oldest first, under this history's bounds.

        Returns:
            How many rows were read.

        Raises:
            ValueError: a row without a ``tool`` and a ``query`` string (nothing is imported).
        """
        records = [_row(row, i) for i, row in enumerate(rows)]
        self.attach()
        ops: list[PutOp] = []
        for record in sorted(records, key=lambda r: r.ts):
            added, evicted = self.history.add(
                record.query, [record.tool], thread=record.thread, ts=record.ts or None
            )
            ops += [PutOp(self.namespace, _key(r), None) for r in evicted]
            ops += [self._put(r) for r in added]
        if ops and self._attached is not None:
            self._attached.batch(ops)
        return len(records)

    # --- ranking ------------------------------------------------------------------------------

    def scores(
        self, catalog: ToolCatalog, query: str, base: np.ndarray | None = None
    ) -> np.ndarray | None:
        """``base`` (default the lexical scores) fused with the usage scores; see ``fuse_usage``.

        Returns ``base`` unchanged (``None`` stays ``None``) when no recorded
        message shares a term with ``query``, so an empty history changes nothing.
        """
        if not query or self.weight == 0:
            return base
        key = (id(catalog.index), query, self.history.version, self.weight)
        last = self._last
        if last is not None and last[0] == key and last[1] is base:
            return last[2]  # the three nodes of a turn rank the same message
        fused: np.ndarray | None = fuse_usage(
            catalog.index, self.history, query, base, weight=self.weight
        )
        if base is None and fused is catalog.index.scores(query):
            fused = None
        self._last = (key, base, fused)
        return fused

    def popular(self, catalog: ToolCatalog, limit: int) -> list[str]:
        """The selectable tools of ``catalog`` recorded most often (the no-match fallback)."""
        names = [n for n in self.history.popular() if n in catalog and catalog.selectable(n)]
        return names[:limit]


async def _acall(store: BaseStore, amethod: str, method: str, *args: Any) -> Any:
    """A store call through its async method, or in a thread when the store is sync only."""
    call_args: tuple[Any, ...] = args
    kwargs: dict[str, Any] = {}
    if method == "search":
        call_args, kwargs = args[:1], {"limit": args[1], "offset": args[2]}
    try:
        return await getattr(store, amethod)(*call_args, **kwargs)
    except NotImplementedError:  # e.g. SqliteStore: sync only
        return await asyncio.to_thread(getattr(store, method), *call_args, **kwargs)


# --- what the nodes record ----------------------------------------------------------------------


def succeeded_tools(calls: Sequence[ToolCall], outputs: Sequence[Any]) -> list[str]:
    """The regular (not meta) tools of ``calls`` whose output is not an error, in call order.

    A refused call (unknown, not visible...) and a call that raised both get an
    error ``ToolMessage``, so neither counts.
    """
    names = []
    for call, output in zip(calls, outputs, strict=True):
        if call["name"] in META_TOOL_NAMES:
            continue
        items = output if isinstance(output, list) else [output]
        failed = False
        for item in items:
            messages = [item]
            if isinstance(item, Command) and isinstance(item.update, dict):
                messages = list(item.update.get("messages", []))
            failed = failed or any(
                isinstance(m, ToolMessage) and m.status == "error" for m in messages
            )
        if not failed:
            names.append(call["name"])
    return list(dict.fromkeys(names))


def _call_record(state: Any, call: ToolCall, output: Any) -> tuple[str, list[str]]:
    """The latest user message and ``[call's tool]`` when it ran successfully, else ``[]``."""
    names = succeeded_tools([call], [output])
    return (latest_user_text(state_messages(state)) if names else ""), names


def record_call(
    usage: ToolUsage | None, state: Any, call: ToolCall, output: Any, config: RunnableConfig
) -> None:
    """Record one executed call against the state's latest user message, if it succeeded."""
    if usage is not None:
        query, names = _call_record(state, call, output)
        usage.record_run(query, names, config)


async def arecord_call(
    usage: ToolUsage | None, state: Any, call: ToolCall, output: Any, config: RunnableConfig
) -> None:
    """Async :func:`record_call`."""
    if usage is not None:
        query, names = _call_record(state, call, output)
        await usage.arecord_run(query, names, config)
