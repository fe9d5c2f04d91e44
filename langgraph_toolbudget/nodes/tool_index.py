"""``StoreToolIndex``: the tool embeddings kept in a LangGraph store's vector index.

Its one reason to change: how tool embeddings are kept in a LangGraph store.

``embeddings=`` embeds the catalog in memory, once per process. With many tools
or many workers it is cheaper to embed once and keep the vectors where every
worker finds them, as langgraph-bigtool does: in a LangGraph ``BaseStore``
created with an index (``InMemoryStore(index=...)``, ``SqliteStore(conn,
index=...)``, ``PostgresStore`` with pgvector, LangGraph server's store).
:class:`StoreToolIndex` is a retrieval function for ``retriever=`` over such a
store: it writes each tool's text once (re-embedding only tools whose text
changed, so a restart embeds nothing) and answers a query with the store's
vector search.

An indexing that fails (the embedding service down, a store that refuses the vectors) is
not tried again on every turn: the next call tries once more, then the retriever waits
:data:`RETRY_AFTER_S` (30 s, growing to 10 minutes) between tries, raising the last error
meanwhile (the ranking nodes log it and rank without the retriever). A store that refuses the
vectors for their dimensions (pgvector) while its ``index_config["dims"]`` differs from what
its embedding model returns is named as such and not tried again. What the retriever knows of
each (store, catalog) pair is bounded (:data:`MAX_PAIRS`) and holds them weakly.

Typical Usage:
    ```python
    store = SqliteStore(conn, index={"embed": embeddings, "dims": 384, "fields": ["text"]})
    graph = create_toolbudget_agent(model, catalog, retriever=StoreToolIndex(store))
    ```
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import BaseStore, Item, PutOp

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.limits import clip
from langgraph_toolbudget.core.option_checks import check_count
from langgraph_toolbudget.core.vectors import tool_text
from langgraph_toolbudget.nodes.store_options import check_namespace, check_store

__all__ = ["DimsMismatchError", "StoreToolIndex"]

PAGE = 1000
CACHED_QUERIES = 64
"""Recent answers kept: the three ranking nodes of a turn ask the same query once."""
MAX_PAIRS = 64
"""(store, catalog) pairs known to be indexed, and pairs whose indexing failed, kept at most
(each; the least recently used forgotten first): an app that opens a store per request meets a
new one every run. A forgotten indexed pair reads its stored hashes again (writing nothing); a
forgotten failure is tried again at the next call."""
MAX_ERROR_CHARS = 1000
"""Of a failed indexing's error, the message kept (to raise while waiting) is cut to this."""
_DIMS_WORDING = re.compile(r"expected \d+ dimensions|dimension mis\w*match", re.IGNORECASE)
"""A store's own error about vector dimensions: pgvector's "expected 8 dimensions, not 4",
sqlite-vec's "Dimension mismatch for inserted vector ..." and "Vector dimension mistmatch"."""
NO_STORE_ERROR = (
    "StoreToolIndex has no store: pass StoreToolIndex(store) or run it inside a graph compiled "
    "with a store (graph.compile(store=...), or LangGraph server's)."
)
NO_INDEX_ERROR = (
    "{kind} has no vector index, so it cannot rank tools by a query: create it with one, e.g. "
    "InMemoryStore(index={{'embed': embeddings, 'dims': 384, 'fields': ['text']}}) (under "
    "LangGraph server: 'store': {{'index': {{...}}}} in langgraph.json)."
)
UNSCORED_ERROR = (
    "{kind} answered a search of {namespace} without similarity scores: it has no vector index "
    "(create it with one, e.g. InMemoryStore(index={{'embed': embeddings, 'dims': 384, "
    "'fields': ['text']}}); under LangGraph server: 'store': {{'index': {{...}}}} in "
    "langgraph.json), or the tool items there were stored without vectors (e.g. written before "
    "the store had its index: delete them, and the next call writes them again, embedded)."
)
DIMS_ERROR = (
    "{kind}'s vector index is declared with 'dims': {dims} but its embedding model returns "
    "vectors of {got} dimensions, so the store refuses the tool vectors; create the store with "
    "'dims': {got} (or give it the {dims}-dimension model it was made for). Not tried again "
    "with this store."
)
RETRYING_ERROR = (
    "StoreToolIndex could not index the catalog in {kind} ({failures} failed tries, the last: "
    "{error}); next try in {wait:.0f} s."
)
RETRY_AFTER_S = (0.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""Seconds to wait before trying again after the 1st, 2nd... failed indexing (the last one
for every later failure): a one-off failure is tried again at the next call."""


class DimsMismatchError(ValueError):
    """The store's ``index_config["dims"]`` is not what its embedding model returns."""


def _check_index(store: BaseStore) -> BaseStore:
    """``store``, unless it shows an index config that is empty.

    A store that shows none (a wrapper, such as LangGraph server's ``BatchedStore``) passes:
    its search answers tell (see :meth:`StoreToolIndex.__call__`).
    """
    if hasattr(store, "index_config") and not store.index_config:
        raise ValueError(NO_INDEX_ERROR.format(kind=type(store).__name__))
    return store


def _about_dims(error: BaseException) -> bool:
    """Whether the store's error (or one it was raised from) is about vector dimensions."""
    seen: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None and len(seen) < 5 and all(cause is not e for e in seen):
        if _DIMS_WORDING.search(str(cause)):
            return True
        seen.append(cause)
        cause = cause.__cause__ or cause.__context__
    return False


def _dims_mismatch(store: BaseStore, text: str) -> tuple[int, int] | None:
    """(declared, returned) dims when the store's embedding model does not give the vectors
    its ``index_config`` declares; None when they agree or it cannot be told. Embeds ``text``:
    asked only when the store's error is about dimensions (:func:`_about_dims`)."""
    config, embeddings = getattr(store, "index_config", None), getattr(store, "embeddings", None)
    dims = config.get("dims") if isinstance(config, Mapping) else None
    if not isinstance(dims, int) or embeddings is None:
        return None
    try:
        vectors = embeddings.embed_documents([text])
        got = len(vectors[0])
    except Exception:  # noqa: BLE001 - the model fails too: the store's own error is the one raised
        return None
    return None if got == dims else (dims, got)


_Ref = Callable[[], object]


def _ref(obj: object) -> _Ref:
    """A weak reference to ``obj``; a strong one when it takes none (bounded by MAX_PAIRS)."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


@dataclass
class _Pair:
    """A (store, catalog index) pair, held weakly: an entry keyed by their ids is theirs only
    while both live (a new object may get a dead one's id)."""

    store: _Ref
    catalog: _Ref

    def of(self, store: BaseStore, catalog: Any) -> bool:
        return self.store() is store and self.catalog() is catalog


@dataclass
class _Failure(_Pair):
    """Consecutive failed indexings of one pair: the last error's type and message only (the
    exception's traceback would keep its frames, and every tool text of the batch)."""

    count: int
    retry_at: float
    error: str
    dims: bool


def _unscored(items: Sequence[Item]) -> bool:
    """Whether a query search answered without any score: a store with no vector index (the
    check :func:`_check_index` cannot make through a wrapper), or items stored unembedded."""
    return bool(items) and all(getattr(item, "score", None) is None for item in items)


def _retry_after(count: int) -> float:
    return RETRY_AFTER_S[min(count, len(RETRY_AFTER_S)) - 1]


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


class StoreToolIndex:
    """A retrieval function over a LangGraph store's vector index (pass it as ``retriever=``).

    Each tool of the catalog is one item under ``namespace`` (key: the tool's
    name; value: its text, as ``embeddings=`` embeds it, and a hash of that
    text). The first call for a catalog writes the tools that are missing or
    whose text changed, and only those are embedded by the store; later calls
    (and other processes sharing the store) search at once. Entries of tools
    no longer in the catalog stay (and are skipped) unless :meth:`index` is
    called with ``prune=True``; use one namespace per catalog.

    Args:
        store: a ``BaseStore`` created with an ``index``; ``None``: the running
            graph's store.
        namespace: the store namespace of the tool items.
        limit: tools a query returns at most.

    Raises:
        TypeError: ``store`` is not a ``BaseStore``; ``namespace`` not a tuple of strings,
            ``limit`` not an integer.
        ValueError: a store without a vector index; an empty ``namespace``, a ``limit``
            below 1.

    Used as ``retriever=`` with ``store=None`` outside a graph with a store, or
    with a graph store that has no index, each turn ranks without it and logs why. A store
    that does not show its index config (LangGraph server's ``BatchedStore`` wraps the real
    one) is told by its answers: a search without similarity scores means no index, or tool
    items stored without vectors (the next call checks the items again: deleted ones are
    written again, embedded). A failed indexing is tried again at the next call, then after
    :data:`RETRY_AFTER_S`; meanwhile each call raises the last error at once (nothing
    embedded).

    Example:
        ```python
        store = InMemoryStore(index={"embed": embeddings, "dims": 384, "fields": ["text"]})
        SelectTools(catalog, retriever=StoreToolIndex(store, limit=10))
        ```
    """

    def __init__(
        self,
        store: BaseStore | None = None,
        namespace: tuple[str, ...] = ("toolbudget", "tools"),
        limit: int = 10,
    ) -> None:
        check_store("StoreToolIndex", store, none="the running graph's store")
        if store is not None:
            _check_index(store)
        check_namespace("StoreToolIndex", namespace, example=("toolbudget", "tools"))
        check_count("StoreToolIndex", "limit", limit, minimum=1, unit="tools")
        self.store, self.namespace, self.limit = store, namespace, limit
        self.__name__ = "StoreToolIndex"  # for the nodes' log lines
        self._indexed: OrderedDict[tuple[int, int], _Pair] = OrderedDict()
        self._failures: OrderedDict[tuple[int, int], _Failure] = OrderedDict()
        self._lock = threading.Lock()
        self._answers: OrderedDict[tuple[int, int, str], dict[str, float]] = OrderedDict()

    def _store(self) -> BaseStore:
        if self.store is not None:
            return self.store
        from langgraph.config import get_store

        try:
            store = get_store()
        except RuntimeError as exc:  # outside a graph run
            raise RuntimeError(NO_STORE_ERROR) from exc
        if store is None:  # a graph compiled without a store
            raise RuntimeError(NO_STORE_ERROR)
        return store

    def _stored_hashes(self, store: BaseStore) -> dict[str, str]:
        hashes: dict[str, str] = {}
        offset = 0
        while True:
            items = store.search(self.namespace, limit=PAGE, offset=offset)
            hashes.update({i.key: str(i.value.get("hash")) for i in items})
            if len(items) < PAGE:
                return hashes
            offset += PAGE

    def index(self, catalog: ToolCatalog, *, prune: bool = False) -> int:
        """Write the tools of ``catalog`` that are missing or changed; returns how many.

        Args:
            catalog: the catalog whose tools to index.
            prune: also delete the entries of tools that are not in ``catalog``.

        Raises:
            ValueError: the store has no vector index.
            DimsMismatchError: the store refused to write for the vectors' dimensions, and its
                embedding model does not return the ``dims`` its ``index_config`` declares (a
                ``ValueError``). Any other error of the store is raised as it is.
            RuntimeError: no store (none given, and not inside a graph run with one).
        """
        store = _check_index(self._store())
        stored = self._stored_hashes(store)
        index = catalog.index
        texts = {n: tool_text(n, d) for n, d in zip(index.names, index.descriptions, strict=True)}
        ops = [
            PutOp(self.namespace, name, {"text": text, "hash": _digest(text)}, index=["text"])
            for name, text in texts.items()
            if stored.get(name) != _digest(text)
        ]
        if prune:
            ops += [PutOp(self.namespace, key, None) for key in stored if key not in texts]
        if ops:
            try:
                store.batch(ops)
            except Exception as exc:
                # pgvector says "expected 8 dimensions, not 4" for every write, for ever; any
                # other failure (a 429 of the embedding service...) may pass.
                texts_written = [op.value["text"] for op in ops if op.value is not None]
                if not texts_written or not _about_dims(exc):
                    raise
                mismatch = _dims_mismatch(store, texts_written[0])
                if mismatch is None:
                    raise
                kind = type(store).__name__
                raise DimsMismatchError(
                    DIMS_ERROR.format(kind=kind, dims=mismatch[0], got=mismatch[1])
                ) from exc
            self._answers.clear()
        return sum(op.value is not None for op in ops)

    def _is_indexed(self, store: BaseStore, catalog: ToolCatalog, key: tuple[int, int]) -> bool:
        pair = self._indexed.get(key)
        return pair is not None and pair.of(store, catalog.index)

    def _index_once(self, store: BaseStore, catalog: ToolCatalog, key: tuple[int, int]) -> None:
        """Index ``catalog`` unless it was, or a failure asks to wait; under the lock."""
        if self._is_indexed(store, catalog, key):
            return
        self._forget(key)  # a dead pair's answers, whose ids these objects now have
        failure = self._failures.get(key)
        if failure is not None and not failure.of(store, catalog.index):
            del self._failures[key]  # a dead pair's, whose ids these objects now have
            failure = None
        now = time.monotonic()
        if failure is not None and now < failure.retry_at:
            self._failures.move_to_end(key)
            if failure.dims:
                raise DimsMismatchError(failure.error)
            raise RuntimeError(
                RETRYING_ERROR.format(
                    kind=type(store).__name__,
                    failures=failure.count,
                    error=failure.error,
                    wait=failure.retry_at - now,
                )
            )
        try:
            self.index(catalog)
        except Exception as exc:
            count = 1 if failure is None else failure.count + 1
            dims = isinstance(exc, DimsMismatchError)
            retry_at = math.inf if dims else now + _retry_after(count)
            error = clip(str(exc) if dims else f"{type(exc).__name__}: {exc}", MAX_ERROR_CHARS)
            pair = _ref(store), _ref(catalog.index)
            self._failures[key] = _Failure(*pair, count, retry_at, error, dims)
            self._failures.move_to_end(key)
            while len(self._failures) > MAX_PAIRS:
                self._failures.popitem(last=False)
            raise
        self._failures.pop(key, None)
        self._indexed[key] = _Pair(_ref(store), _ref(catalog.index))
        while len(self._indexed) > MAX_PAIRS:
            self._indexed.popitem(last=False)

    def _forget(self, key: tuple[int, int]) -> None:
        """Forget that the pair ``key`` is indexed, and its answers kept. Under the lock."""
        self._indexed.pop(key, None)
        for cached in [k for k in self._answers if k[:2] == key]:
            del self._answers[cached]

    def __call__(self, query: str, catalog: ToolCatalog) -> dict[str, float]:
        """The tools nearest to ``query`` and their similarity (indexes ``catalog`` once).

        Recent answers are kept per store and catalog, so the three ranking nodes
        of a turn embed and search the query once.

        Raises:
            ValueError: the store has no vector index (its search answers without scores),
                or its ``dims`` do not fit its embedding model.
            RuntimeError: no store; or indexing failed and waits before its next try.
        """
        store = self._store()
        catalog_key = (id(store), id(catalog.index))
        if not self._is_indexed(store, catalog, catalog_key):
            with self._lock:
                self._index_once(store, catalog, catalog_key)
        key = (id(store), id(catalog.index), query)
        with self._lock:
            if catalog_key in self._indexed:
                self._indexed.move_to_end(catalog_key)
            cached = self._answers.get(key)
            if cached is not None:
                self._answers.move_to_end(key)
                return dict(cached)
        items = store.search(self.namespace, query=query, limit=self.limit)
        if _unscored(items):
            with self._lock:  # the next call checks the items again, and writes the missing
                self._forget(catalog_key)
            raise ValueError(
                UNSCORED_ERROR.format(kind=type(store).__name__, namespace=self.namespace)
            )
        answer = {item.key: max(0.0, float(item.score or 0.0)) for item in items}
        with self._lock:
            self._answers[key] = answer
            while len(self._answers) > CACHED_QUERIES:
                self._answers.popitem(last=False)
        return dict(answer)

    def __repr__(self) -> str:
        where = type(self.store).__name__ if self.store is not None else "the graph's store"
        return f"StoreToolIndex({where}, namespace={self.namespace!r}, limit={self.limit})"
