"""Data derived from a catalog: built lazily, once, owned by the catalog, each entry bounded.

Its one reason to change: how a catalog's derived data is kept (built once, bounded, freed).

A :class:`~langgraph_toolbudget.core.catalog.ToolCatalog` is immutable, so
everything computed from it (its search indexes, the arrays the budget and the
intent classifier read, the tool vectors of an embedding model) can be built
once and shared by every node. This module is where that data lives: one
:class:`DerivedData` per catalog, reachable as ``catalog.derived``. No other
object keeps catalog-derived data, so dropping the catalog (or calling
:meth:`DerivedData.clear`) frees all of it.

Key Components:
    - :class:`DerivedData`: the named entries (:data:`ENTRY_NAMES`, each built
      on first use, once, thread-safely) and the per-embeddings entries (at
      most :data:`MAX_EMBEDDINGS_ENTRIES`, least recently used dropped first,
      keyed without keeping the embeddings object alive).

Typical Usage:
    ```python
    index = catalog.derived.get("index", build_index)  # built once, then shared
    vectors = catalog.derived.for_embeddings(embeddings, make_vectors)
    catalog.derived.clear()  # frees everything; rebuilt on next use
    ```
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ENTRY_NAMES", "MAX_EMBEDDINGS_ENTRIES", "DerivedData"]

T = TypeVar("T")

ENTRY_NAMES = frozenset(
    {
        "index",
        "category_index",
        "selectable_members",
        "category_scorer",
        "tool_categories",
        "tool_tokens",
        "usage_promotable",
    }
)
"""The named entries a catalog derives: ``index`` (the tool search index),
``category_index`` (one document per category), ``selectable_members``
(category -> index positions the budget may choose) and ``category_scorer``
(the intent classifier's membership arrays), ``tool_categories`` (each tool's categories as
flat arrays, for the search's distinctive terms, and how many categories each index term read
so far spans: one int per term at most), ``tool_tokens`` (the schema tokens of the
tools counted so far, one int per tool at most) and ``usage_promotable`` (one boolean per
tool: may usage promote it). One value each."""

MAX_EMBEDDINGS_ENTRIES = 4
"""Embeddings objects whose tool vectors a catalog keeps at once. An app uses
one, a benchmark a few; the least recently used entry is dropped beyond this."""

UNKNOWN_ENTRY_ERROR = (
    "{name!r} is not an entry of a catalog's derived data. Entries: {known}. "
    "A new kind of derived data needs its name added to ENTRY_NAMES, so its lifetime stays known."
)


class DerivedData:
    """The data derived from one catalog: named entries and per-embeddings entries.

    Named entries (:data:`ENTRY_NAMES`) are built by the ``build`` callable
    passed on first use, once even when several threads ask at the same time
    (each name has its own lock, so building the category index does not wait
    for the tool index), then shared.

    Per-embeddings entries (the tool vectors of one embeddings object) are
    bounded: at most ``max_embeddings`` are kept, the least recently used
    dropped first. The entry is keyed by the object's identity through a weak
    reference, so the catalog does not keep a discarded embeddings object
    alive, and the entry is dropped when the object is collected. (An object
    that does not support weak references is held strongly until its entry is
    evicted or :meth:`clear` runs.)

    Nothing here refers back to the catalog, so a catalog and its derived data
    are freed together as soon as the catalog is no longer referenced.

    Args:
        max_embeddings: how many embeddings objects' entries are kept at once.
    """

    def __init__(self, max_embeddings: int = MAX_EMBEDDINGS_ENTRIES) -> None:
        if isinstance(max_embeddings, bool) or not isinstance(max_embeddings, int):
            raise TypeError(f"max_embeddings must be an int, got {type(max_embeddings).__name__}")
        if max_embeddings < 1:
            raise ValueError(f"max_embeddings must be >= 1, got {max_embeddings}")
        self.max_embeddings = max_embeddings
        self._lock = threading.Lock()
        self._build_locks = {name: threading.RLock() for name in ENTRY_NAMES}
        self._values: dict[str, Any] = {}
        self._generation = 0
        self._embeddings_lock = threading.RLock()
        self._by_embeddings: OrderedDict[int, tuple[Callable[[], object], Any]] = OrderedDict()

    def __deepcopy__(self, memo: dict[int, Any]) -> DerivedData:
        """This same object: derived data is shared by design (a deep copy of a catalog, of a
        node or a graph holding one shares it), and its locks cannot be copied."""
        return self

    def get(self, name: str, build: Callable[[], T]) -> T:
        """The entry ``name``, built by ``build()`` on first use, once.

        Args:
            name: one of :data:`ENTRY_NAMES`.
            build: makes the value; called at most once per :meth:`clear`,
                even under concurrent calls.

        Raises:
            KeyError: ``name`` is not one of :data:`ENTRY_NAMES`.
        """
        try:
            return self._values[name]
        except KeyError:
            pass
        lock = self._build_locks.get(name)
        if lock is None:
            raise KeyError(UNKNOWN_ENTRY_ERROR.format(name=name, known=sorted(ENTRY_NAMES)))
        with lock:
            if name in self._values:
                return self._values[name]
            generation = self._generation
            value = build()
            with self._lock:
                if generation == self._generation:  # not cleared meanwhile
                    self._values[name] = value
            return value

    def built(self, name: str) -> bool:
        """True if the entry ``name`` is built (and not cleared since)."""
        return name in self._values

    def for_embeddings(self, embeddings: object, build: Callable[[], T]) -> T:
        """The entry of one embeddings object, built by ``build()`` on first use.

        ``build`` runs under a lock, once per embeddings object while its entry
        is kept; keep it cheap (the expensive embedding belongs in the entry,
        done on demand under the entry's own lock).

        Args:
            embeddings: the embeddings object the entry belongs to (compared
                by identity).
            build: makes the entry.
        """
        key = id(embeddings)
        with self._embeddings_lock:
            found = self._by_embeddings.get(key)
            if found is not None and found[0]() is embeddings:
                self._by_embeddings.move_to_end(key)
                return found[1]
            value = build()
            self._by_embeddings[key] = (self._reference(embeddings, key), value)
            self._by_embeddings.move_to_end(key)
            while len(self._by_embeddings) > self.max_embeddings:
                self._by_embeddings.popitem(last=False)
            return value

    def _reference(self, embeddings: object, key: int) -> Callable[[], object]:
        """A weak reference that drops the entry when ``embeddings`` is collected."""
        owner = weakref.ref(self)

        def forget(ref: object) -> None:
            data = owner()
            if data is None:
                return
            found = data._by_embeddings.get(key)
            if found is not None and found[0] is ref:
                data._by_embeddings.pop(key, None)

        try:
            return weakref.ref(embeddings, forget)
        except TypeError:  # no weak references to this type: hold it until evicted
            return lambda: embeddings

    @property
    def embeddings_entries(self) -> int:
        """How many embeddings objects have an entry now."""
        return len(self._by_embeddings)

    def clear(self) -> None:
        """Drop every entry; each is rebuilt on its next use.

        A build running while this is called completes for its caller but is
        not kept.
        """
        with self._lock:
            self._generation += 1
            self._values.clear()
        with self._embeddings_lock:
            self._by_embeddings.clear()

    def __repr__(self) -> str:
        return (
            f"DerivedData(built={sorted(self._values)}, "
            f"embeddings_entries={len(self._by_embeddings)}/{self.max_embeddings})"
        )
