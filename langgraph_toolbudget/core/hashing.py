"""A small, deterministic, offline embedding: hashed words and character n-grams.

Its one reason to change: the offline embedding's features.

Key Components:
    - :class:`HashingEmbeddings`: a LangChain ``Embeddings`` in pure numpy, no
      model file, no network. Useful in tests and as a dependency-free
      default for :class:`~langgraph_toolbudget.core.semantic.HybridScorer`.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from functools import lru_cache, partial

import numpy as np
from langchain_core.embeddings import Embeddings

from langgraph_toolbudget.core.search import tokenize

__all__ = ["HashingEmbeddings", "WORD_CACHE_SIZE"]

WORD_CACHE_SIZE = 8192
"""Words whose hashed features each :class:`HashingEmbeddings` caches (least
recently used dropped first). Only words up to :data:`MAX_CACHED_WORD`
characters are cached, so with the default n-gram range an entry takes under
2 KiB: at most ~16 MiB, typically a few MiB."""

MAX_CACHED_WORD = 32
"""Longer words (rare: identifiers, hashes, pasted data) are hashed uncached."""


def _hash(feature: str) -> int:
    return zlib.crc32(feature.encode("utf-8"))


def _word_features(
    dim: int, ngram_range: tuple[int, int], ngram_weight: float, word: str
) -> tuple[np.ndarray, np.ndarray]:
    """Bucket indices and signed weights of one word and its character n-grams."""
    feats = [f"w:{word}"]
    weights = [1.0]
    marked = f"<{word}>"
    lo, hi = ngram_range
    grams = [marked[i : i + n] for n in range(lo, hi + 1) for i in range(len(marked) - n + 1)]
    if grams and ngram_weight > 0:
        each = ngram_weight / math.sqrt(len(grams))
        feats.extend(f"c:{g}" for g in grams)
        weights.extend([each] * len(grams))
    hashes = [_hash(f) for f in feats]
    idx = np.array([h % dim for h in hashes], dtype=np.int64)
    sign = np.array([1.0 if (h >> 31) & 1 else -1.0 for h in hashes])
    return idx, sign * np.asarray(weights)


class HashingEmbeddings(Embeddings):
    """A deterministic, offline embedding: hashed words and character n-grams.

    Each text becomes a bag of its search terms (lower-case, stop words
    dropped, lightly stemmed, as the lexical index tokenises) and of their
    character n-grams (``<summ``, ``umma``... with word-boundary marks),
    hashed with signs into ``dim`` buckets (the "hashing trick"), term counts
    damped with ``1 + log(tf)``, and L2-normalised. Pure numpy, no model file,
    same vectors on every machine and run.

    This is a *lexical-semantic* embedding, not a neural one: character
    n-grams join word forms and near-spellings that the BM25 index keeps apart
    ("summarization" and "summarize", "geolocate" and "geolocation"), but it
    knows no synonyms ("car" and "automobile" stay unrelated). For paraphrases
    use a neural model (``OllamaEmbeddings``, ``HuggingFaceEmbeddings``...).

    Args:
        dim: vector length.
        ngram_range: smallest and largest character n-gram.
        ngram_weight: weight of a word's n-grams together, against 1 for the word.

    Example:
        >>> emb = HashingEmbeddings(dim=256)
        >>> a, b, c = (emb.embed_query(t) for t in ("summarization", "summarize it", "send mail"))
        >>> dot = lambda x, y: sum(p * q for p, q in zip(x, y))
        >>> dot(a, b) > 0.3 > dot(a, c)
        True
    """

    def __init__(
        self, dim: int = 1024, *, ngram_range: tuple[int, int] = (3, 5), ngram_weight: float = 2.0
    ) -> None:
        lo, hi = ngram_range
        if dim < 2:
            raise ValueError(f"dim must be >= 2, got {dim}")
        if not 1 <= lo <= hi:
            raise ValueError(f"ngram_range must be (lo, hi) with 1 <= lo <= hi, got {ngram_range}")
        if ngram_weight < 0:
            raise ValueError(f"ngram_weight must be >= 0, got {ngram_weight}")
        self.dim = dim
        self.ngram_range = (lo, hi)
        self.ngram_weight = float(ngram_weight)
        # Per instance, and over the settings rather than `self` (no reference cycle).
        self._cached_word = lru_cache(maxsize=WORD_CACHE_SIZE)(
            partial(_word_features, dim, self.ngram_range, self.ngram_weight)
        )

    def __repr__(self) -> str:
        return (
            f"HashingEmbeddings(dim={self.dim}, ngram_range={self.ngram_range}, "
            f"ngram_weight={self.ngram_weight})"
        )

    def _word(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        """Bucket indices and signed weights of a word and its n-grams (cached if short)."""
        if len(word) <= MAX_CACHED_WORD:
            return self._cached_word(word)
        return _word_features(self.dim, self.ngram_range, self.ngram_weight, word)

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float64)
        counts: dict[str, int] = {}
        for term in tokenize(text):
            counts[term] = counts.get(term, 0) + 1
        for term, tf in counts.items():
            idx, weights = self._word(term)
            np.add.at(vec, idx, weights * (1.0 + math.log(tf)))
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm > 0 else vec

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts (pure CPU, no I/O)."""
        return [self._vector(t).tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed one text; queries and documents share one space."""
        return self._vector(text).tolist()

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """As :meth:`embed_documents`, computed in place: no I/O, no thread hop."""
        return [self._vector(t).tolist() for t in texts]

    async def aembed_query(self, text: str) -> list[float]:
        """As :meth:`embed_query`, computed in place: no I/O, no thread hop."""
        return self._vector(text).tolist()
