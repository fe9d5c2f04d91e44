"""Warming a catalog: build the data the selection derives from it, off the event loop.

Its one reason to change: which of a catalog's derived data the selection needs built before
it ranks, and where that build runs.

A catalog builds its derived data (``catalog.derived``: the search indexes, the arrays of the
budget and of the intent classifier) on first use, once. The first use is the first turn's
selection: at 10,000 tools the tool index alone takes about two seconds of pure Python, which
an async node would spend in the event loop, freezing every other run of the process (on a
LangGraph server, every other thread). So the async selection nodes first await
:func:`awarm_catalog`, which builds it all in a worker thread; later turns find it built and
go straight on.

Key Components:
    - :func:`warm_catalog`: build every entry the selection reads, in the calling thread (at
      app start, to take the cost before the first request). Thread-safe: each entry is
      built once, however many threads ask at once (``DerivedData``'s per-entry locks).
    - :func:`awarm_catalog`: the same from async code, in a worker thread; concurrent
      callers of one event loop share that thread's build instead of each holding a thread
      of the pool. Returns at once when it is built.
    - :func:`is_warm`: is everything built (a few dictionary lookups)?

Typical Usage:
    ```python
    warm_catalog(catalog)  # at app start: the first turn then builds nothing
    await awarm_catalog(catalog)  # in an async node: built in a worker thread
    ```
"""

from __future__ import annotations

import asyncio
import functools
import threading
import weakref

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.derived import DerivedData
from langgraph_toolbudget.core.intent import _scorer
from langgraph_toolbudget.core.selection import _selectable_members, distinctive_terms
from langgraph_toolbudget.core.usage import promotable

__all__ = ["WARM_ENTRIES", "awarm_catalog", "is_warm", "warm_catalog"]

WARM_ENTRIES = (
    "index",
    "category_index",
    "selectable_members",
    "category_scorer",
    "tool_categories",
    "usage_promotable",
)
"""The ``catalog.derived`` entries :func:`warm_catalog` builds: every one the selection reads
but ``tool_tokens``, a cache filled one tool at a time (under ``max_schema_tokens``), whose
counting all tools at once would cost more than the turns ever read."""

_builds: weakref.WeakKeyDictionary[DerivedData, asyncio.Task[None]] = weakref.WeakKeyDictionary()
"""The build under way per catalog's derived data (a view in another runtime mode listing the
same tools shares it), so the runs that take their first turn at once wait for one build."""
_builds_lock = threading.Lock()  # the server's loop and the package's background loop both ask


def warm_catalog(catalog: ToolCatalog) -> None:
    """Build every entry of ``catalog.derived`` that the selection reads (:data:`WARM_ENTRIES`)
    in the calling thread, each once: a thread that asks while another builds it waits for
    that build. Built entries stay until ``catalog.derived.clear()``.

    A catalog made by ``with_metadata`` (or ``in_runtime_mode`` when the mode lists other
    tools) has derived data of its own, to warm again.
    """
    catalog.index  # noqa: B018 - built on first access
    catalog.category_index  # noqa: B018
    _selectable_members(catalog)
    _scorer(catalog)
    distinctive_terms(catalog, "")  # builds the entry "tool_categories"
    promotable(catalog)


def is_warm(catalog: ToolCatalog) -> bool:
    """True if every entry of :data:`WARM_ENTRIES` is built (and not cleared since)."""
    derived = catalog.derived
    return all(derived.built(name) for name in WARM_ENTRIES)


async def awarm_catalog(catalog: ToolCatalog) -> None:
    """:func:`warm_catalog` in a worker thread (``asyncio.to_thread``), unless already warm.

    The event loop runs on while the thread builds (pure Python, it hands the loop the GIL
    at every switch interval). The runs of one event loop that ask while a build is under
    way await that build, not a thread each. A caller cancelled while it waits does not
    cancel the build, which the others still await and which is kept.

    Raises:
        Exception: whatever building raised (the next call builds again).
    """
    if is_warm(catalog):
        return
    loop = asyncio.get_running_loop()
    derived = catalog.derived
    with _builds_lock:
        task = _builds.get(derived)
        if task is None or task.done() or task.get_loop() is not loop:
            task = loop.create_task(asyncio.to_thread(warm_catalog, catalog))
            task.add_done_callback(functools.partial(_forget, derived))
            _builds[derived] = task
    await asyncio.shield(task)


def _forget(derived: DerivedData, task: asyncio.Task[None]) -> None:
    """Drop a finished build from :data:`_builds` (a failed one is tried again by the next
    call), and mark its outcome read: its callers got it through their shield."""
    with _builds_lock:
        if _builds.get(derived) is task:
            del _builds[derived]
    if not task.cancelled():
        task.exception()
