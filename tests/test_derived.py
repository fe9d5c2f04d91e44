"""derived.py: a catalog's derived data, built lazily, once, bounded and freed with it."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import pytest

from langgraph_toolbudget.core.derived import ENTRY_NAMES, MAX_EMBEDDINGS_ENTRIES, DerivedData


class _Embeddings:
    """Stands for an embeddings object: the derived data only compares identities."""


def test_derived_entry_is_built_once_and_shared():
    data = DerivedData()
    builds: list[int] = []

    def build() -> list[int]:
        builds.append(1)
        return [1, 2, 3]

    first = data.get("index", build)
    assert data.get("index", build) is first
    assert builds == [1]
    assert data.built("index") and not data.built("category_index")


def test_derived_entry_is_built_once_under_concurrent_first_use():
    data = DerivedData()
    builds: list[int] = []
    barrier = threading.Barrier(8)

    def build() -> object:
        builds.append(1)
        time.sleep(0.05)  # every thread arrives while the first one builds
        return object()

    results: list[object] = []

    def use() -> None:
        barrier.wait()
        results.append(data.get("selectable_members", build))

    threads = [threading.Thread(target=use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert builds == [1]
    assert len({id(r) for r in results}) == 1


def test_derived_entry_names_are_declared():
    with pytest.raises(KeyError) as err:
        DerivedData().get("my_cache", dict)
    assert "my_cache" in str(err.value)
    assert "ENTRY_NAMES" in str(err.value)
    assert {
        "index",
        "category_index",
        "selectable_members",
        "category_scorer",
        "tool_categories",
        "tool_tokens",
        "usage_promotable",
    } == ENTRY_NAMES


def test_derived_clear_drops_every_entry_and_they_are_rebuilt():
    data = DerivedData()
    emb = _Embeddings()
    first = data.get("index", object)
    vectors = data.for_embeddings(emb, object)
    data.clear()
    assert not data.built("index")
    assert data.embeddings_entries == 0
    assert data.get("index", object) is not first
    assert data.for_embeddings(emb, object) is not vectors


def test_derived_embeddings_entries_are_shared_per_object():
    data = DerivedData()
    a, b = _Embeddings(), _Embeddings()
    assert data.for_embeddings(a, object) is data.for_embeddings(a, object)
    assert data.for_embeddings(a, object) is not data.for_embeddings(b, object)


def test_derived_embeddings_entries_are_bounded_least_recently_used_first():
    data = DerivedData()
    objects = [_Embeddings() for _ in range(MAX_EMBEDDINGS_ENTRIES + 3)]
    entries = [data.for_embeddings(e, object) for e in objects]
    assert data.embeddings_entries == MAX_EMBEDDINGS_ENTRIES
    # The most recent ones are kept; the first ones were dropped and are built anew.
    assert data.for_embeddings(objects[-1], object) is entries[-1]
    assert data.for_embeddings(objects[0], object) is not entries[0]
    assert data.embeddings_entries == MAX_EMBEDDINGS_ENTRIES


def test_derived_data_does_not_keep_an_embeddings_object_alive():
    data = DerivedData()
    emb = _Embeddings()
    entry = weakref.ref(data.for_embeddings(emb, _Embeddings))
    ref = weakref.ref(emb)
    del emb
    gc.collect()
    assert ref() is None
    assert entry() is None  # its vectors went with it
    assert data.embeddings_entries == 0


def test_derived_data_holds_an_object_without_weak_references_until_evicted():
    data = DerivedData(max_embeddings=1)
    first, second = [1], [2]  # lists take no weak references
    entry = data.for_embeddings(first, object)
    assert data.for_embeddings(first, object) is entry
    data.for_embeddings(second, object)
    assert data.embeddings_entries == 1
    assert data.for_embeddings(first, object) is not entry


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (True, TypeError), ("4", TypeError)])
def test_derived_data_rejects_a_bad_bound(value, error):
    with pytest.raises(error, match="max_embeddings"):
        DerivedData(max_embeddings=value)


def test_derived_entry_whose_build_fails_is_built_again_on_next_use():
    data = DerivedData()
    attempts: list[int] = []

    def build() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("embedding server down")
        return "built"

    with pytest.raises(RuntimeError):
        data.get("index", build)
    assert not data.built("index")
    assert data.get("index", build) == "built"
    assert len(attempts) == 2
