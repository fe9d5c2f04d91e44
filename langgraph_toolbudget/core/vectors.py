"""Embedding vectors of a catalog's tools and of recent queries, for one embeddings object.

Its one reason to change: how tool and query vectors are computed and kept.

Key Components:
    - :func:`tool_text`: the text embedded for a tool.
    - :class:`ToolVectors`: the tool matrix (embedded once, in batches, on
      first use) and the recent query vectors of one catalog and embeddings
      object. It is an entry of ``catalog.derived``, so every scorer and node
      built with that catalog and embeddings object shares one.
    - :func:`tool_vectors`: that entry.

:class:`~langgraph_toolbudget.core.semantic.HybridScorer` ranks with these.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from langgraph_toolbudget.core.terms import _split_words

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from langgraph_toolbudget.core.catalog import ToolCatalog

__all__ = ["QUERY_CACHE_SIZE", "ToolVectors", "tool_text", "tool_vectors"]

QUERY_CACHE_SIZE = 256
"""Recent query (and clause) embeddings kept per catalog and embeddings object:
each entry is the text and one vector (1.5 KiB for 384 dimensions)."""


def tool_text(name: str, description: str) -> str:
    """The text embedded for a tool: its name split into words, a colon, its description.

    >>> tool_text("get_weatherForecast", "Forecast for a city.")
    'get weather forecast: Forecast for a city.'
    """
    return f"{' '.join(_split_words(name))}: {description}"


def as_unit_rows(vectors: Any, rows: int) -> np.ndarray:
    """Embeddings as a read-only float32 matrix with unit-norm rows.

    Raises:
        ValueError: not ``rows`` vectors of one non-zero length, or NaN/infinite values.
    """
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != rows or matrix.shape[1] == 0:
        raise ValueError(
            f"expected {rows} embedding vectors of one length, got an array of shape {matrix.shape}"
        )
    if not np.isfinite(matrix).all():
        raise ValueError("the embedding vectors contain NaN or infinite values")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix /= np.where(norms > 0, norms, 1.0)
    matrix.setflags(write=False)
    return matrix


def _tool_matrix(vectors: list[Any], rows: int) -> np.ndarray:
    return as_unit_rows(vectors, rows) if rows else np.zeros((0, 1), dtype=np.float32)


def _check_dim(vector: np.ndarray, tools: np.ndarray) -> np.ndarray:
    if tools.shape[0] and vector.shape[0] != tools.shape[1]:
        raise ValueError(
            f"the query embedding has {vector.shape[0]} dimensions, the tool embeddings "
            f"{tools.shape[1]}"
        )
    return vector


async def _aembed_documents(embeddings: Any, texts: list[str]) -> Any:
    method = getattr(embeddings, "aembed_documents", None)
    if method is not None:
        return await method(texts)
    return await asyncio.to_thread(embeddings.embed_documents, texts)


async def _aembed_query(embeddings: Any, text: str) -> Any:
    method = getattr(embeddings, "aembed_query", None)
    if method is not None:
        return await method(text)
    return await asyncio.to_thread(embeddings.embed_query, text)


class ToolVectors:
    """Tool vectors and recent query vectors of one catalog and embeddings object.

    Kept by the catalog (``catalog.derived.for_embeddings``). It never refers
    to the embeddings object (each method takes it), so the catalog does not
    keep that object alive. Bounds: one tool matrix, :data:`QUERY_CACHE_SIZE`
    query vectors, the last query's semantic scores, and one asyncio lock per
    running event loop (weakly keyed: gone with the loop).

    Args:
        texts: the tool texts (:func:`tool_text`), in ``catalog.index`` order.
    """

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.tools: np.ndarray | None = None
        self.embed_seconds: float | None = None
        self.semantic: tuple[str, bool, np.ndarray] | None = None
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._alocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def _batches(self, batch_size: int) -> list[list[int]]:
        """Positions of the tool texts in batches of similar length, shortest first.

        An encoder pads every text of a batch to its longest, so batches in
        catalog order pay for their longest text many times over; sorted by
        length each batch pads little (a 527-tool catalog through MiniLM:
        see ``benchmarks/embedding_batching.py``).
        """
        order = sorted(range(len(self.texts)), key=lambda i: (len(self.texts[i]), i))
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]

    def _in_order(self, batches: list[list[int]], vectors: list[Any]) -> list[Any]:
        """The vectors of sorted batches put back in catalog order."""
        positions = [p for batch in batches for p in batch]
        if len(vectors) != len(positions):
            return vectors  # malformed: as_unit_rows says how
        out: list[Any] = [None] * len(self.texts)
        for position, vector in zip(positions, vectors, strict=True):
            out[position] = vector
        return out

    def embed_tools(self, embeddings: Embeddings, batch_size: int) -> np.ndarray:
        """The unit-norm tool matrix, embedded on the first call (once, even across threads).

        Raises:
            Exception: whatever ``embeddings`` raises, or ``ValueError`` for
                malformed vectors; the next call tries again.
        """
        if self.tools is not None:
            return self.tools
        with self._lock:
            if self.tools is None:
                start = time.perf_counter()
                vectors: list[Any] = []
                batches = self._batches(batch_size)
                for batch in batches:
                    vectors.extend(embeddings.embed_documents([self.texts[i] for i in batch]))
                tools = _tool_matrix(self._in_order(batches, vectors), len(self.texts))
                self.tools, self.embed_seconds = tools, time.perf_counter() - start
            return self.tools

    async def aembed_tools(self, embeddings: Embeddings, batch_size: int) -> np.ndarray:
        """Async :meth:`embed_tools`: ``aembed_documents``, once per event loop's callers."""
        if self.tools is not None:
            return self.tools
        loop = asyncio.get_running_loop()
        lock = self._alocks.get(loop)
        if lock is None:
            lock = self._alocks.setdefault(loop, asyncio.Lock())
        async with lock:
            if self.tools is None:
                start = time.perf_counter()
                vectors: list[Any] = []
                batches = self._batches(batch_size)
                for batch in batches:
                    texts = [self.texts[i] for i in batch]
                    vectors.extend(await _aembed_documents(embeddings, texts))
                tools = _tool_matrix(self._in_order(batches, vectors), len(self.texts))
                self.tools, self.embed_seconds = tools, time.perf_counter() - start
            return self.tools

    def query_vectors(
        self, embeddings: Embeddings, texts: list[str], tools: np.ndarray
    ) -> list[np.ndarray]:
        """One unit vector per text, from ``embed_query`` or the recent-query cache."""
        out = []
        for text in texts:
            vector = self._cached(text)
            if vector is None:
                vector = _check_dim(as_unit_rows([embeddings.embed_query(text)], 1)[0], tools)
                self._remember(text, vector)
            out.append(vector)
        return out

    async def aquery_vectors(
        self, embeddings: Embeddings, texts: list[str], tools: np.ndarray
    ) -> list[np.ndarray]:
        """Async :meth:`query_vectors`: the missing texts are embedded concurrently."""
        found: dict[str, np.ndarray] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):
            vector = self._cached(text)
            if vector is None:
                missing.append(text)
            else:
                found[text] = vector
        if missing:
            raw = await asyncio.gather(*(_aembed_query(embeddings, t) for t in missing))
            for text, vec in zip(missing, raw, strict=True):
                found[text] = _check_dim(as_unit_rows([vec], 1)[0], tools)
                self._remember(text, found[text])
        return [found[t] for t in texts]

    def _remember(self, query: str, vector: np.ndarray) -> None:
        self._queries[query] = vector
        while len(self._queries) > QUERY_CACHE_SIZE:
            try:
                self._queries.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break

    def _cached(self, query: str) -> np.ndarray | None:
        vector = self._queries.get(query)
        if vector is not None:
            with contextlib.suppress(KeyError):  # evicted by another thread meanwhile
                self._queries.move_to_end(query)
        return vector


def tool_vectors(catalog: ToolCatalog, embeddings: Embeddings) -> ToolVectors:
    """The :class:`ToolVectors` of this catalog and embeddings object, kept by the catalog.

    An entry of ``catalog.derived``: at most
    :data:`~langgraph_toolbudget.core.derived.MAX_EMBEDDINGS_ENTRIES`
    embeddings objects per catalog, the least recently used dropped first.
    """
    index = catalog.index
    return catalog.derived.for_embeddings(
        embeddings,
        lambda: ToolVectors(
            [tool_text(n, d) for n, d in zip(index.names, index.descriptions, strict=True)]
        ),
    )
