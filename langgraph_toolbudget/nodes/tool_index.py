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

Typical Usage:
    ```python
    store = SqliteStore(conn, index={"embed": embeddings, "dims": 384, "fields": ["text"]})
    graph = create_toolbudget_agent(model, catalog, retriever=StoreToolIndex(store))
    ```
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from langgraph.store.base import BaseStore, PutOp

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.vectors import tool_text

__all__ = ["StoreToolIndex"]

PAGE = 1000
CACHED_QUERIES = 64
"""Recent answers kept: the three ranking nodes of a turn ask the same query once."""
NO_STORE_ERROR = (
    "StoreToolIndex has no store: pass StoreToolIndex(store) or run it inside a graph compiled "
    "with a store (graph.compile(store=...), or LangGraph server's)."
)
NO_INDEX_ERROR = (
    "{kind} has no vector index, so it cannot rank tools by a query: create it with one, e.g. "
    "InMemoryStore(index={{'embed': embeddings, 'dims': 384, 'fields': ['text']}})."
)
BAD_STORE_ERROR = "store must be a LangGraph BaseStore or None (the graph's store); got {kind}."


def _check_index(store: BaseStore) -> BaseStore:
    if getattr(store, "index_config", None) is None:
        raise ValueError(NO_INDEX_ERROR.format(kind=type(store).__name__))
    return store


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
        TypeError: ``store`` is not a ``BaseStore``.
        ValueError: a store without a vector index; a bad ``namespace`` or ``limit``.

    Used as ``retriever=`` with ``store=None`` outside a graph with a store, or
    with a graph store that has no index, each turn ranks without it and logs why.

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
        if store is not None and not isinstance(store, BaseStore):
            raise TypeError(BAD_STORE_ERROR.format(kind=type(store).__name__))
        if store is not None:
            _check_index(store)
        if (
            not isinstance(namespace, tuple)
            or not namespace
            or not all(isinstance(p, str) and p for p in namespace)
        ):
            raise ValueError(f"namespace must be a non-empty tuple of strings, got {namespace!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
        self.store, self.namespace, self.limit = store, namespace, limit
        self.__name__ = "StoreToolIndex"  # for the nodes' log lines
        self._indexed: set[tuple[int, int]] = set()
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
            store.batch(ops)
            self._answers.clear()
        return sum(op.value is not None for op in ops)

    def __call__(self, query: str, catalog: ToolCatalog) -> dict[str, float]:
        """The tools nearest to ``query`` and their similarity (indexes ``catalog`` once).

        Recent answers are kept per store and catalog, so the three ranking nodes
        of a turn embed and search the query once.
        """
        store = self._store()
        catalog_key = (id(store), id(catalog.index))
        if catalog_key not in self._indexed:
            with self._lock:
                if catalog_key not in self._indexed:
                    self.index(catalog)
                    self._indexed.add(catalog_key)
        key = (id(store), id(catalog.index), query)
        with self._lock:
            cached = self._answers.get(key)
            if cached is not None:
                self._answers.move_to_end(key)
                return dict(cached)
        items = store.search(self.namespace, query=query, limit=self.limit)
        answer = {item.key: max(0.0, float(item.score or 0.0)) for item in items}
        with self._lock:
            self._answers[key] = answer
            while len(self._answers) > CACHED_QUERIES:
                self._answers.popitem(last=False)
        return dict(answer)

    def __repr__(self) -> str:
        where = type(self.store).__name__ if self.store is not None else "the graph's store"
        return f"StoreToolIndex({where}, namespace={self.namespace!r}, limit={self.limit})"
