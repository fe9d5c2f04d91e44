"""Where offloaded outputs are kept, and whose they are.

Its one reason to change: how stored outputs are namespaced, bounded and evicted.

Outputs go into a LangGraph ``BaseStore``: the store of the running graph (the
one it was compiled with, or LangGraph server's), else one process-wide
:class:`BoundedMemoryStore` (at most :data:`FALLBACK_MAX_BYTES` of outputs, none
older than :data:`FALLBACK_MAX_AGE_S`, oldest evicted first). An output is
readable only by the run that made it: namespaces are per app (``offload_app_id``,
else LangGraph server's assistant, else a digest of the catalog's tool names) and
per thread, or, for a run without a thread id, per run. Handles are random (96
bits). Each thread keeps at most ``offload_thread_cap_chars`` characters (and at most
:data:`MAX_INDEX_ENTRIES` outputs), evicting its oldest outputs first; stores that support a
TTL get ``offload_ttl_minutes``, and an output the store let expire leaves the thread's index
at its next put (it no longer counts toward the cap).

A thread's outputs are listed, oldest first, in one ``"__index__"`` item of its namespace
(``{"items": [[handle, chars], ...], "at": {handle: time stored}}``). Anything else found
there (another writer's item, a malformed one) is read as far as it is well formed: a bad
entry is dropped, a bad index is an empty one, rewritten at the next put.

Key Components:
    - :class:`OffloadStore`: one thread's (or run's) outputs in a store (put, get,
      the index that orders them for eviction), sync and async.
    - :func:`app_key`: an app's label in the namespaces.
    - :class:`BoundedMemoryStore`: the fallback store, bounded in bytes and age.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import secrets
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, Result
from langgraph.store.memory import InMemoryStore

from langgraph_toolbudget._compat import drop_empty_namespace, memory_store_keys, runtime_of
from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.usage import storable

__all__ = [
    "FALLBACK_MAX_AGE_S",
    "FALLBACK_MAX_BYTES",
    "NAMESPACE",
    "BoundedMemoryStore",
    "OffloadStore",
    "app_key",
    "fallback_store",
]

NAMESPACE = ("toolbudget", "offload")
"""The first parts of every offload namespace: ``(*NAMESPACE, <app kind>, <app>, "thread",
<thread_id>)``, or ``(..., "run", <run token>)`` for a run without a thread id."""
INDEX_KEY = "__index__"
MAX_INDEX_ENTRIES = 10_000
"""Outputs a thread's index lists, at most (the newest; more are evicted oldest first): an
index item is read and rewritten whole at every put."""
LATEST_SHOWN = 5
"""Handles an unknown-handle answer offers, at most (the newest that still exist)."""

FALLBACK_MAX_BYTES = 256 << 20
"""Bytes of output text the process-wide fallback store keeps (``sys.getsizeof`` of the
stored strings), oldest evicted first; the newest output is always kept."""
FALLBACK_MAX_AGE_S = 24 * 60 * 60
"""Seconds an output stays in the fallback store; older ones go at its next call."""
RUN_TOKENS = 4096
"""Runs without a thread id whose token is remembered (the most recent ones): a run evicted
from this memory while it still runs cannot read its earlier outputs again."""


STORABLE_CHUNK = 1 << 20
"""A long output is made storable this many characters a call (:func:`_storable`)."""


def _storable(text: str) -> str:
    """:func:`~langgraph_toolbudget.core.usage.storable` of ``text``, :data:`STORABLE_CHUNK`
    characters a call (one regex call over tens of MB would hold Python's lock, and an event
    loop waiting for it, for a good part of a second); ``text`` itself when nothing changes."""
    starts = range(0, len(text), STORABLE_CHUNK)
    if all(storable(part) is part for part in (text[at : at + STORABLE_CHUNK] for at in starts)):
        return text
    # Each NUL or surrogate is one character, so chunks are made storable on their own.
    return "".join(storable(text[at : at + STORABLE_CHUNK]) for at in starts)


def _now() -> float:
    return time.monotonic()


def _wall() -> float:
    """Wall-clock seconds, as the stores' TTLs count."""
    return time.time()


class BoundedMemoryStore(InMemoryStore):
    """An ``InMemoryStore`` that keeps at most ``max_bytes`` of offloaded outputs, none older
    than ``max_age_s``: the fallback store of graphs that have none.

    Every output (an item of :data:`NAMESPACE` with a ``text``) is counted at its size in
    memory (``sys.getsizeof`` of the text) when stored; when the total passes ``max_bytes``
    the oldest outputs are deleted until it fits (the newest is always kept), and at each
    call of the store, outputs older than ``max_age_s`` are deleted. A deleted output leaves
    its namespace's index too, and a namespace with nothing left is forgotten, so threads
    that are done leave nothing behind.

    Args:
        max_bytes: the bound on stored output bytes.
        max_age_s: the bound on an output's age, in seconds.
    """

    def __init__(
        self, *, max_bytes: int = FALLBACK_MAX_BYTES, max_age_s: float = FALLBACK_MAX_AGE_S
    ) -> None:
        super().__init__()
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._outputs: OrderedDict[tuple[tuple[str, ...], str], tuple[int, float]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.RLock()

    @property
    def stored_bytes(self) -> int:
        """Bytes of the outputs stored now."""
        return self._bytes

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        with self._lock:
            touched = self._expire()
            results = super().batch(ops)
            touched |= self._count(ops)
            touched |= self._evict()
            self._tidy(touched | {op.namespace for op in ops if isinstance(op, GetOp | PutOp)})
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)  # in memory, without an index: nothing to await

    def _count(self, ops: list[Op]) -> set[tuple[str, ...]]:
        touched = set()
        for op in ops:
            if not isinstance(op, PutOp) or op.namespace[: len(NAMESPACE)] != NAMESPACE:
                continue
            key = (op.namespace, op.key)
            old = self._outputs.pop(key, None)
            if old is not None:
                self._bytes -= old[0]
            text = op.value.get("text") if op.value is not None else None
            if isinstance(text, str) and op.key != INDEX_KEY:
                size = sys.getsizeof(text)
                self._outputs[key] = (size, _now())
                self._bytes += size
            touched.add(op.namespace)
        return touched

    def _expire(self) -> set[tuple[str, ...]]:
        touched = set()
        limit = _now() - self.max_age_s
        while self._outputs and next(iter(self._outputs.values()))[1] < limit:
            touched.add(self._drop_oldest())
        return touched

    def _evict(self) -> set[tuple[str, ...]]:
        touched = set()
        while self._bytes > self.max_bytes and len(self._outputs) > 1:
            touched.add(self._drop_oldest())
        return touched

    def _drop_oldest(self) -> tuple[str, ...]:
        (namespace, key), (size, _) = self._outputs.popitem(last=False)
        self._bytes -= size
        super().batch([PutOp(namespace, key, None)])
        return namespace

    def _tidy(self, namespaces: set[tuple[str, ...]]) -> None:
        """Indexes list only outputs that exist; namespaces holding nothing are forgotten."""
        for namespace in namespaces:
            keys = memory_store_keys(self, namespace)
            if INDEX_KEY in keys:
                present = set(keys)
                item = super().batch([GetOp(namespace, INDEX_KEY)])[0]
                index = _index_entries(item if isinstance(item, Item) else None)
                kept = [entry for entry in index if entry[0] in present]
                if not kept:
                    super().batch([PutOp(namespace, INDEX_KEY, None)])
                elif len(kept) < len(index):
                    super().batch([PutOp(namespace, INDEX_KEY, {"items": kept})])
            drop_empty_namespace(self, namespace)


_FALLBACK = BoundedMemoryStore()


def _index_entries(item: Any) -> list[list[Any]]:
    """The well-formed ``[handle, chars]`` entries of an index item, oldest first: at most the
    last :data:`MAX_INDEX_ENTRIES` of its list are read; anything else is no entry."""
    value = getattr(item, "value", None)
    raw = value.get("items") if isinstance(value, dict) else None
    if not isinstance(raw, list):
        return []
    return [
        [entry[0], entry[1]]
        for entry in raw[-MAX_INDEX_ENTRIES:]
        if isinstance(entry, list | tuple)
        and len(entry) == 2
        and isinstance(entry[0], str)
        and entry[0]
        and entry[0] != INDEX_KEY
        and type(entry[1]) is int  # not a bool
        and entry[1] >= 0
    ]


def _stored_times(item: Any, index: list[list[Any]]) -> dict[str, float]:
    """When each output of ``index`` was stored (wall-clock seconds), as far as the index item
    says (its ``"at"``)."""
    value = getattr(item, "value", None)
    raw = value.get("at") if isinstance(value, dict) else None
    if not isinstance(raw, dict):
        return {}
    times = {h: raw.get(h) for h, _ in index}
    return {
        h: float(t)
        for h, t in times.items()
        if isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t)
    }


def fallback_store() -> BoundedMemoryStore:
    """The process-wide store of graphs without one (bounded: :class:`BoundedMemoryStore`)."""
    return _FALLBACK


def app_key(tool_names: Iterable[str]) -> str:
    """An app's label in the offload namespaces: a digest of its catalog's tool names.

    The same tools give the same label in every process (so handles survive a restart
    in a persistent store); two apps with other tools never share a namespace.
    """
    names = "\n".join(sorted(set(tool_names)))
    return hashlib.sha256(names.encode("utf-8")).hexdigest()[:16]


class _RunTokens:
    """A random token per run without a thread id, keyed by the run's ``RunControl``.

    LangGraph (>= 1.2) gives every run one ``RunControl`` object, shared by its nodes
    and subgraphs; it cannot be weakly referenced, so the most recent :data:`RUN_TOKENS`
    are held (which also keeps their ``id`` from being reused while remembered).
    """

    def __init__(self, size: int = RUN_TOKENS) -> None:
        self.size = size
        self._tokens: OrderedDict[int, tuple[Any, str]] = OrderedDict()
        self._lock = threading.Lock()

    def token(self, control: Any) -> str:
        with self._lock:
            held = self._tokens.get(id(control))
            if held is not None and held[0] is control:
                self._tokens.move_to_end(id(control))
                return held[1]
            token = secrets.token_hex(16)
            self._tokens[id(control)] = (control, token)
            while len(self._tokens) > self.size:
                self._tokens.popitem(last=False)
            return token


_RUNS = _RunTokens()


def _label(value: Any) -> str:
    """A namespace label (LangGraph refuses periods): ``%`` and ``.`` percent-encoded."""
    return str(value).replace("%", "%25").replace(".", "%2E") or "%00"


async def _async_or_thread(store: BaseStore, name: str, *args: Any, **kwargs: Any) -> Any:
    """``store.a<name>(...)``; a sync-only store (``SqliteStore``) runs ``<name>`` in a thread."""
    try:
        return await getattr(store, f"a{name}")(*args, **kwargs)
    except NotImplementedError:
        return await asyncio.to_thread(getattr(store, name), *args, **kwargs)


class OffloadStore:
    """The offloaded outputs of one thread (or run) of one app in a LangGraph store.

    Args:
        store: the store.
        namespace: the thread's namespace.
        cap_chars: characters kept per thread; older outputs are evicted first.
        ttl_minutes: TTL of each item, where the store supports TTLs.
    """

    def __init__(
        self,
        store: BaseStore,
        namespace: tuple[str, ...],
        *,
        cap_chars: int,
        ttl_minutes: float | None,
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.cap_chars = cap_chars
        self._ttl = ttl_minutes if getattr(store, "supports_ttl", False) else None

    @classmethod
    def of(cls, config: RunnableConfig, budget: BudgetConfig, app: str) -> OffloadStore:
        """The store of the running graph (or the fallback), namespaced for this run.

        Args:
            config: the run's config (its thread id, LangGraph's runtime).
            budget: the options (``offload_app_id``, the cap and TTL).
            app: the app's label (:func:`app_key` of its tool names), unless
                ``offload_app_id`` is set or LangGraph server names the assistant.
        """
        runtime = runtime_of(config)
        store = getattr(runtime, "store", None) or fallback_store()
        return cls(
            store,
            (*NAMESPACE, *_app(config, runtime, budget, app), *_scope(config, runtime)),
            cap_chars=budget.offload_thread_cap_chars,
            ttl_minutes=budget.offload_ttl_minutes,
        )

    # --- the pure part: what to write and delete ----------------------------------------------

    def _plan_put(
        self, index: list[list[Any]], chars: int
    ) -> tuple[str, list[list[Any]], list[str]]:
        """A new handle, the index after adding it, and the handles to evict."""
        handle = "out_" + secrets.token_hex(12)
        index = [*index, [handle, chars]]
        total = sum(int(n) for _, n in index)
        evicted: list[str] = []
        while (total > self.cap_chars or len(index) > MAX_INDEX_ENTRIES) and len(index) > 1:
            old, n = index.pop(0)
            evicted.append(old)
            total -= int(n)
        return handle, index, evicted

    @staticmethod
    def _index_of(item: Any) -> list[list[Any]]:
        return _index_entries(item)

    def _expired(self, index: list[list[Any]], times: dict[str, float], now: float) -> list[GetOp]:
        """The reads that tell whether the outputs whose TTL has passed since they were stored
        are gone (a read may have renewed it): none for a store without TTLs."""
        if self._ttl is None:
            return []
        limit = now - self._ttl * 60
        return [
            GetOp(self.namespace, h, refresh_ttl=False)
            for h, _ in index
            if times.get(h, now) <= limit
        ]

    @staticmethod
    def _alive(
        index: list[list[Any]],
        times: dict[str, float],
        gets: list[GetOp],
        found: list[Any],
        now: float,
    ) -> tuple[list[list[Any]], dict[str, float]]:
        """The index without the outputs ``gets`` found gone, and the store times (an output
        found alive past its TTL was renewed by a read: it is checked again one TTL from now)."""
        gone = {g.key for g, item in zip(gets, found, strict=True) if item is None}
        renewed = {g.key for g in gets} - gone
        kept = [entry for entry in index if entry[0] not in gone]
        return kept, {h: now if h in renewed else times.get(h, now) for h, _ in kept}

    def _latest_gets(self, item: Any, exclude: Any) -> list[GetOp]:
        """The reads of the newest :data:`LATEST_SHOWN` handles of the index but ``exclude``
        (TTL not renewed: a read to list them is no use of them)."""
        newest = [h for h, _ in reversed(self._index_of(item)) if h != exclude][:LATEST_SHOWN]
        return [GetOp(self.namespace, h, refresh_ttl=False) for h in newest]

    @staticmethod
    def _existing(gets: list[GetOp], found: list[Any]) -> list[str]:
        return [g.key for g, item in zip(gets, found, strict=True) if item is not None][::-1]

    def _value(self, text: str, kind: str, tool: str) -> dict[str, Any]:
        # A tool's text may hold a NUL or a lone surrogate (bytes read as text), which
        # PostgresStore and SqliteStore refuse: each becomes U+FFFD, one character for one.
        text = _storable(text)
        return {"text": text, "kind": kind, "chars": len(text), "tool": tool, "at": time.time()}

    # --- sync ---------------------------------------------------------------------------------

    def _writes(
        self,
        handle: str,
        value: dict[str, Any],
        index: list[list[Any]],
        evicted: list[str],
        times: dict[str, float],
        now: float,
    ) -> list[PutOp]:
        """One batch: the output, the deletions of evicted ones, the new index (with when each
        output was stored, where outputs expire).

        ``index=False``: a store with a semantic index (LangGraph server's ``store.index``)
        would otherwise embed every output, sending a tool's whole answer to the embedding
        model, whose input limit a large output breaks (the put fails, the output is lost).
        """
        listed: dict[str, Any] = {"items": index}
        if self._ttl is not None:
            listed["at"] = {h: times.get(h, now) for h, _ in index}
        return [
            PutOp(self.namespace, handle, value, index=False, ttl=self._ttl),
            *(PutOp(self.namespace, old, None) for old in evicted),
            PutOp(self.namespace, INDEX_KEY, listed, index=False, ttl=self._ttl),
        ]

    def put(self, text: str, kind: str, tool: str = "") -> str:
        """Store an output; returns its handle. Evicts the thread's oldest outputs over the cap,
        after dropping from the index those the store let expire."""
        item, now = self.store.get(self.namespace, INDEX_KEY), _wall()
        index = self._index_of(item)
        times = _stored_times(item, index)
        gets = self._expired(index, times, now)
        if gets:
            index, times = self._alive(index, times, gets, self.store.batch(gets), now)
        handle, index, evicted = self._plan_put(index, len(text))
        value = self._value(text, kind, tool)
        self.store.batch(self._writes(handle, value, index, evicted, times, now))
        return handle

    def get(self, handle: Any) -> dict[str, Any] | None:
        """The stored output of ``handle`` in this thread (None if absent or evicted)."""
        if not isinstance(handle, str) or not handle or handle == INDEX_KEY:
            return None
        item = self.store.get(self.namespace, handle)
        return None if item is None else dict(item.value)

    def handles(self) -> list[str]:
        """The thread's handles, oldest first (as its index lists them)."""
        return [h for h, _ in self._index_of(self.store.get(self.namespace, INDEX_KEY))]

    def latest(self, exclude: Any = None) -> list[str]:
        """The newest :data:`LATEST_SHOWN` handles that still exist, but ``exclude``, oldest
        first (one batch of reads: an output may have expired while the index lists it)."""
        gets = self._latest_gets(self.store.get(self.namespace, INDEX_KEY), exclude)
        return self._existing(gets, self.store.batch(gets)) if gets else []

    # --- async --------------------------------------------------------------------------------

    async def aput(self, text: str, kind: str, tool: str = "") -> str:
        """Async :meth:`put`."""
        item = await _async_or_thread(self.store, "get", self.namespace, INDEX_KEY)
        now = _wall()
        index = self._index_of(item)
        times = _stored_times(item, index)
        gets = self._expired(index, times, now)
        if gets:
            found = await _async_or_thread(self.store, "batch", gets)
            index, times = self._alive(index, times, gets, found, now)
        handle, index, evicted = self._plan_put(index, len(text))
        # In a thread, scanned in chunks (:func:`_storable`): the event loop runs between them.
        value = await asyncio.to_thread(self._value, text, kind, tool)
        writes = self._writes(handle, value, index, evicted, times, now)
        await _async_or_thread(self.store, "batch", writes)
        return handle

    async def ahandles(self) -> list[str]:
        """Async :meth:`handles`."""
        item = await _async_or_thread(self.store, "get", self.namespace, INDEX_KEY)
        return [h for h, _ in self._index_of(item)]

    async def alatest(self, exclude: Any = None) -> list[str]:
        """Async :meth:`latest`."""
        item = await _async_or_thread(self.store, "get", self.namespace, INDEX_KEY)
        gets = self._latest_gets(item, exclude)
        return (
            self._existing(gets, await _async_or_thread(self.store, "batch", gets)) if gets else []
        )

    async def aget(self, handle: Any) -> dict[str, Any] | None:
        """Async :meth:`get`."""
        if not isinstance(handle, str) or not handle or handle == INDEX_KEY:
            return None
        item = await _async_or_thread(self.store, "get", self.namespace, handle)
        return None if item is None else dict(item.value)


def _app(config: RunnableConfig, runtime: Any, budget: BudgetConfig, app: str) -> tuple[str, str]:
    """Whose outputs: ``offload_app_id``, else LangGraph server's assistant, else the tools."""
    if budget.offload_app_id is not None:
        return "app", _label(budget.offload_app_id)
    server = getattr(getattr(runtime, "server_info", None), "assistant_id", None)
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    assistant = server or configurable.get("assistant_id") or metadata.get("assistant_id")
    if assistant:
        return "assistant", _label(assistant)
    return "tools", app


def _scope(config: RunnableConfig, runtime: Any) -> tuple[str, str]:
    """Which conversation: the thread, else this run alone.

    A run without a thread id is known by its ``RunControl`` (langgraph >= 1.2), else by
    the ``run_id`` its config was given; without either, nothing later can find its
    outputs again (a fresh token each time).
    """
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is not None and thread != "":
        return "thread", _label(thread)
    control = getattr(runtime, "control", None)
    if control is not None:
        return "run", _RUNS.token(control)
    run_id = getattr(getattr(runtime, "execution_info", None), "run_id", None)
    return "run", _label(run_id) if run_id else secrets.token_hex(16)
