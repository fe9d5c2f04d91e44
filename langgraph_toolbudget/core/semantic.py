"""Semantic (embedding) ranking beside the lexical one: optional, any LangChain ``Embeddings``.

Its one reason to change: how embedding similarity is fused with the lexical ranking.

The lexical ranker (BM25, :class:`~langgraph_toolbudget.core.search.ToolIndex`)
cannot join a query to a tool described in other words ("Can I find any
peer-reviewed papers?" against "helps with academic research"). An embedding
model can. :class:`HybridScorer` fuses the two: the cosine similarity of the
query's embedding to each tool's, and the BM25 scores of
``catalog.index.scores(query)``, into one relevance array that classify_intent,
select_tools and tool_search rank by when given ``embeddings=``.

Key Components:
    - :class:`HybridScorer`: BM25 + cosine fusion for one catalog. Tool texts
      are embedded once per catalog and embeddings object (in batches, cached
      and shared by every node); each query is embedded once per turn (the
      recent queries are cached, so the three nodes of a turn share one call).
      An embedding failure never escapes: the turn falls back to lexical
      scores and a warning is logged.
    - :class:`HashingEmbeddings` (from :mod:`langgraph_toolbudget.core.hashing`):
      a small, deterministic, offline embedding (hashed words and character
      n-grams). A lexical-semantic embedding, not a neural one: it joins word
      forms ("summarization" / "summarize"), not synonyms. Useful for tests and
      as a dependency-free default.

The tool and query vectors live in :mod:`langgraph_toolbudget.core.vectors`.

Typical Usage:
    ```python
    from langchain_ollama import OllamaEmbeddings
    emb = OllamaEmbeddings(model="all-minilm")
    graph.add_node("classify_intent", ClassifyIntent(catalog, embeddings=emb))
    graph.add_node("select_tools", SelectTools(catalog, max_tools=5, embeddings=emb))
    graph.add_node("tool_search", ToolSearch(catalog, embeddings=emb))
    ```
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

import numpy as np
from langchain_core.embeddings import Embeddings

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.hashing import HashingEmbeddings
from langgraph_toolbudget.core.search import FULL_QUERY_WEIGHT, MAX_RANKED_CLAUSES, clauses
from langgraph_toolbudget.core.terms import ranked_text
from langgraph_toolbudget.core.vectors import QUERY_CACHE_SIZE, tool_text, tool_vectors

__all__ = [
    "DEFAULT_SEMANTIC_WEIGHT",
    "QUERY_CACHE_SIZE",
    "HashingEmbeddings",
    "HybridScorer",
    "as_hybrid_scorer",
    "tool_text",
]

logger = logging.getLogger(__name__)

Fusion = Literal["weighted", "rrf"]

DEFAULT_SEMANTIC_WEIGHT = 0.7
"""Share of the semantic score in the fused score (see :class:`HybridScorer`)."""

RRF_K = 60
"""The constant of reciprocal-rank fusion: ``1 / (k + rank)``."""

NOT_EMBEDDINGS_ERROR = (
    "embeddings must be a LangChain Embeddings object (with embed_documents and embed_query), "
    "such as OllamaEmbeddings or HuggingFaceEmbeddings, or a HybridScorer; got {kind}."
)
OTHER_CATALOG_ERROR = (
    "this HybridScorer was built for another catalog ({theirs!r}); build one for {ours!r}."
)


class HybridScorer:
    """Relevance of every tool to a query: BM25 fused with embedding cosine similarity.

    Tool texts (:func:`tool_text`: name words and description) are embedded on
    first use, once per catalog and embeddings object, in batches of
    ``batch_size``; every scorer and node built with the same catalog and
    embeddings object shares them. Query embeddings are cached too (the
    :data:`QUERY_CACHE_SIZE` recent ones), so classify_intent, select_tools
    and tool_search embed a turn's message once. These vectors are kept by the
    catalog (``catalog.derived``, for at most
    :data:`~langgraph_toolbudget.core.derived.MAX_EMBEDDINGS_ENTRIES`
    embeddings objects) and by this scorer, not beyond both. The scorer itself
    keeps only its last fused result.

    The semantic score (:meth:`semantic_scores`) is the cosine similarity,
    min-max normalised over the catalog. With ``split_clauses`` (default), a
    request for several things ("find X. Then do Y") also embeds each clause
    and a tool scores by its best clause, as the BM25 ranking does; a
    one-task message costs one ``embed_query`` call, a request of n clauses
    1 + n calls (concurrent on the async path).

    Fusion (``fusion=``):
        - ``"weighted"`` (default): ``(1 - w) * bm25 / max(bm25) + w * sem``,
          ``w`` being ``semantic_weight``;
        - ``"rrf"``: reciprocal-rank fusion, ``(1 - w) / (k + lexical rank) +
          w / (k + semantic rank)``, tools without a lexical match getting no
          lexical part.

        Either result is scaled to the BM25 range of the query (its maximum,
        or 1 when nothing matches lexically), so it mixes with the category
        scores of classify_intent as the plain BM25 scores do. Measured with
        all-MiniLM-L6-v2 (``benchmarks/README.md``), ``weighted`` at ``w =
        0.7`` beat ``rrf`` on both Seal-Tools and MetaTool.

    Failures: when embedding the tools or the query raises, or returns
    malformed vectors, :meth:`scores` logs a warning and returns the lexical
    scores for that turn; the tools are embedded again on a later turn.

    Args:
        catalog: the tool catalog.
        embeddings: any LangChain ``Embeddings`` (``OllamaEmbeddings``,
            ``HuggingFaceEmbeddings``, :class:`HashingEmbeddings`...).
        semantic_weight: ``w`` above, from 0 (lexical only) to 1 (semantic only).
        fusion: ``"weighted"`` or ``"rrf"``.
        rrf_k: the constant of reciprocal-rank fusion.
        batch_size: tool texts per ``embed_documents`` call.
        split_clauses: also embed each clause of a multi-task request.

    Example:
        >>> from langchain_core.tools import tool
        >>> @tool
        ... def summarize_text(text: str) -> str:
        ...     '''Summarize a long document in a few sentences.'''
        ...     return text[:100]
        >>> @tool
        ... def send_email(to: str, body: str) -> str:
        ...     '''Send an email message.'''
        ...     return "sent"
        >>> catalog = ToolCatalog.from_tools([summarize_text, send_email])
        >>> scorer = HybridScorer(catalog, HashingEmbeddings())
        >>> scores = scorer.scores("a summarization please")
        >>> catalog.index.names[int(scores.argmax())]
        'summarize_text'
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        embeddings: Embeddings,
        *,
        semantic_weight: float = DEFAULT_SEMANTIC_WEIGHT,
        fusion: Fusion = "weighted",
        rrf_k: float = RRF_K,
        batch_size: int = 64,
        split_clauses: bool = True,
    ) -> None:
        if not (hasattr(embeddings, "embed_documents") and hasattr(embeddings, "embed_query")):
            raise TypeError(NOT_EMBEDDINGS_ERROR.format(kind=type(embeddings).__name__))
        if not 0.0 <= semantic_weight <= 1.0:
            raise ValueError(f"semantic_weight must be in [0, 1], got {semantic_weight}")
        if fusion not in ("weighted", "rrf"):
            raise ValueError(f"fusion must be 'weighted' or 'rrf', got {fusion!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if rrf_k <= 0:
            raise ValueError(f"rrf_k must be > 0, got {rrf_k}")
        self.catalog = catalog
        self.embeddings = embeddings
        self.semantic_weight = float(semantic_weight)
        self.fusion: Fusion = fusion
        self.rrf_k = float(rrf_k)
        self.batch_size = batch_size
        self.split_clauses = split_clauses
        self._vectors = tool_vectors(catalog, embeddings)
        self._last: tuple[str, np.ndarray, np.ndarray] | None = None

    def __repr__(self) -> str:
        return (
            f"HybridScorer({type(self.embeddings).__name__}, semantic_weight="
            f"{self.semantic_weight}, fusion={self.fusion!r})"
        )

    # --- the tool vectors ---------------------------------------------------------------------

    @property
    def catalog_embedded(self) -> bool:
        """True once the tool texts have been embedded."""
        return self._vectors.tools is not None

    @property
    def catalog_embed_seconds(self) -> float | None:
        """How long embedding the tool texts took (None until done)."""
        return self._vectors.embed_seconds

    def embed_catalog(self) -> np.ndarray:
        """Embed the tool texts now (once; later calls return the cached matrix).

        Call it at start-up to pay the one-off cost before the first user turn.

        Returns:
            The unit-norm tool vectors, one row per tool of ``catalog.index``.

        Raises:
            Exception: whatever the embeddings object raises, or ``ValueError``
                for malformed vectors. (:meth:`scores` catches these.)
        """
        return self._vectors.embed_tools(self.embeddings, self.batch_size)

    async def aembed_catalog(self) -> np.ndarray:
        """Async :meth:`embed_catalog`: uses ``aembed_documents``, never blocks the loop."""
        return await self._vectors.aembed_tools(self.embeddings, self.batch_size)

    # --- semantic scores and fusion -----------------------------------------------------------

    def query_texts(self, query: str) -> list[str]:
        """The texts embedded for a query: itself, then its clauses if it asks for several things.

        The clauses are those of :func:`~langgraph_toolbudget.core.search.clauses`
        (sentence ends, "then", "also"...), as the BM25 ranking splits them, and at most its
        first :data:`~langgraph_toolbudget.core.search.MAX_RANKED_CLAUSES`, as it ranks them:
        a pasted log of thousands of sentences costs at most that many ``embed_query`` calls.
        A query over :data:`~langgraph_toolbudget.core.terms.MAX_REQUEST_CHARS` characters is
        embedded as its first and last halves
        (:func:`~langgraph_toolbudget.core.terms.ranked_text`).
        """
        query = ranked_text(query)
        parts = clauses(query)[:MAX_RANKED_CLAUSES] if self.split_clauses else []
        return [query, *parts] if len(parts) >= 2 else [query]

    def _combine(self, query: str, tools: np.ndarray, vectors: list[np.ndarray]) -> np.ndarray:
        """Normalised similarities; several clauses are combined as the BM25 clause ranking does."""
        if tools.shape[0] == 0:
            out = np.zeros(0, dtype=np.float64)
        else:
            sims = _min_max(tools @ np.stack(vectors, axis=1))  # (tools, texts), columns in [0, 1]
            out = sims[:, 0]
            if sims.shape[1] > 1:
                out = (sims[:, 1:].max(axis=1) + FULL_QUERY_WEIGHT * out) / (1 + FULL_QUERY_WEIGHT)
            out = np.ascontiguousarray(out, dtype=np.float64)
        out.setflags(write=False)
        self._vectors.semantic = (query, self.split_clauses, out)
        return out

    def _cached_semantic(self, query: str) -> np.ndarray | None:
        last = self._vectors.semantic
        if last is not None and last[0] == query and last[1] == self.split_clauses:
            return last[2]
        return None

    def semantic_scores(self, query: str) -> np.ndarray:
        """Semantic relevance of every tool, in [0, 1], aligned with ``catalog.index.names``.

        The cosine similarity of the query's embedding to each tool's, min-max
        normalised over the catalog. A request for several things (see
        :meth:`query_texts`) also embeds each clause: a tool scores its best
        clause's similarity plus half the whole query's, over 1.5, so each task
        of the request gets its own top tools. Each text is embedded with
        ``embed_query`` once (recent texts are cached).

        Raises whatever the embeddings object raises; :meth:`scores` does not.
        """
        tools = self.embed_catalog()
        cached = self._cached_semantic(query)
        if cached is not None:
            return cached
        vectors = self._vectors.query_vectors(self.embeddings, self.query_texts(query), tools)
        return self._combine(query, tools, vectors)

    async def asemantic_scores(self, query: str) -> np.ndarray:
        """Async :meth:`semantic_scores`: ``aembed_query``, clauses concurrently, no blocking."""
        tools = await self.aembed_catalog()
        cached = self._cached_semantic(query)
        if cached is not None:
            return cached
        texts = self.query_texts(query)
        vectors = await self._vectors.aquery_vectors(self.embeddings, texts, tools)
        return self._combine(query, tools, vectors)

    def fuse(self, lexical: np.ndarray, semantic: np.ndarray) -> np.ndarray:
        """The fused scores of a BM25 array and a semantic array (see the class docstring)."""
        w = self.semantic_weight
        top = float(lexical.max()) if lexical.size else 0.0
        scale = top if top > 0 else 1.0
        if self.fusion == "rrf":
            out = w / (self.rrf_k + _ranks(semantic))
            if top > 0:
                lex_rank = _ranks(lexical)
                out += np.where(lexical > 0, (1.0 - w) / (self.rrf_k + lex_rank), 0.0)
            best = float(out.max()) if out.size else 0.0
            out *= scale / best if best > 0 else 0.0
        else:
            lex = lexical / top if top > 0 else np.zeros_like(lexical)
            out = ((1.0 - w) * lex + w * _min_max(semantic)) * scale
        out = np.asarray(out, dtype=np.float64)
        out.setflags(write=False)
        return out

    def _fused(self, query: str, semantic: np.ndarray) -> np.ndarray:
        last = self._last
        if last is not None and last[0] == query and last[1] is semantic:
            return last[2]
        out = self.fuse(self.catalog.index.scores(query), semantic)
        self._last = (query, semantic, out)
        return out

    def scores(self, query: str) -> np.ndarray:
        """Fused relevance of every tool (read-only, aligned with ``catalog.index.names``).

        Never raises for an embedding failure: logs a warning and returns
        ``catalog.index.scores(query)`` (lexical) for this turn.
        """
        if not query:
            return self.catalog.index.scores(query)
        try:
            semantic = self.semantic_scores(query)
        except Exception as exc:  # noqa: BLE001 - any embedding failure falls back, and is logged
            return self._fallback(exc)(query)
        return self._fused(query, semantic)

    async def ascores(self, query: str) -> np.ndarray:
        """Async :meth:`scores`: embeds through ``aembed_documents`` / ``aembed_query``."""
        if not query:
            return self.catalog.index.scores(query)
        try:
            semantic = await self.asemantic_scores(query)
        except Exception as exc:  # noqa: BLE001 - any embedding failure falls back, and is logged
            return self._fallback(exc)(query)
        return self._fused(query, semantic)

    def _fallback(self, exc: BaseException) -> Callable[[str], np.ndarray]:
        stage = "the query" if self.catalog_embedded else "the tool catalog"
        logger.warning(
            "semantic ranking: embedding %s with %s failed (%r); using lexical scores this turn",
            stage,
            type(self.embeddings).__name__,
            exc,
        )
        return self.catalog.index.scores


def _min_max(values: np.ndarray) -> np.ndarray:
    """Each column (or the vector) scaled to [0, 1]; a constant one becomes zeros."""
    lo = values.min(axis=0, keepdims=True) if values.size else values
    span = (values.max(axis=0, keepdims=True) - lo) if values.size else values
    return np.where(span > 0, (values - lo) / np.where(span > 0, span, 1.0), 0.0)


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based rank of each value, best (largest) first; position breaks ties."""
    order = np.lexsort((np.arange(values.size), -values))
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.arange(1, values.size + 1)
    return ranks


def as_hybrid_scorer(
    catalog: ToolCatalog, embeddings: Embeddings | HybridScorer | None
) -> HybridScorer | None:
    """What the nodes' ``embeddings=`` argument becomes.

    ``None`` stays None (lexical ranking); a :class:`HybridScorer` is used as
    given (it must be built for ``catalog``); an ``Embeddings`` object gets a
    scorer with the default fusion.

    Raises:
        TypeError: not an ``Embeddings`` object.
        ValueError: a scorer built for another catalog.
    """
    if embeddings is None:
        return None
    if isinstance(embeddings, HybridScorer):
        if embeddings.catalog is not catalog:
            raise ValueError(OTHER_CATALOG_ERROR.format(theirs=embeddings.catalog, ours=catalog))
        return embeddings
    return HybridScorer(catalog, embeddings)
