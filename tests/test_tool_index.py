"""StoreToolIndex: the tool embeddings in a LangGraph store's vector index, as ``retriever=``.

A real ``InMemoryStore`` created with an index over the package's offline
``HashingEmbeddings``, wrapped to count what is embedded, and a real file-backed
``SqliteStore`` with its sqlite-vec index. Checked: the store's search ranks as the
in-memory ``HybridScorer`` does (same texts, same embeddings); a second index object over
the same store (another worker) embeds no tool again, a changed description re-embeds that
tool only; a SqliteStore reopened (a restart) embeds nothing; inside a graph the graph's
store is used; misconfiguration is named. ``PostgresStore`` with pgvector:
``tests/test_tool_index_postgres.py``.

``SqliteStore``'s index loads the sqlite-vec extension, which needs a ``sqlite3`` built
with extension loading. Many Python builds (pyenv's by default, this machine's) are not;
there the test uses ``pysqlite3`` (``pysqlite3-binary``, in the dev extra on Linux x86-64:
the same DB-API with its own SQLite), and without either it fails naming what to install.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langgraph_toolbudget import BudgetConfig, ToolCatalog, create_toolbudget_agent
from langgraph_toolbudget.core.hashing import HashingEmbeddings
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.nodes.tool_index import StoreToolIndex
from langgraph_toolbudget.testing import ScriptedChatModel

DIMS = 1024
QUERIES = ["weather forecast for the weekend", "send an email to Ada", "count rows of a table"]


class Counting(Embeddings):
    """HashingEmbeddings that count the documents they embed."""

    def __init__(self) -> None:
        self.inner = HashingEmbeddings(DIMS)
        self.documents = self.queries = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.queries += 1
        return self.inner.embed_query(text)


def embedded(embeddings: Counting) -> int:
    """Texts embedded (SqliteStore and PostgresStore embed queries with ``embed_documents``)."""
    return embeddings.documents + embeddings.queries


class _Ranked(TypedDict):
    out: dict[str, float]


def index_config(embeddings: Embeddings) -> dict[str, Any]:
    return {"embed": embeddings, "dims": DIMS, "fields": ["text"]}


def assert_ranks_as_the_scorer(search: StoreToolIndex, catalog: ToolCatalog) -> None:
    """The store's top 5 for each query are the in-memory ``HybridScorer``'s, in order."""
    scorer = HybridScorer(catalog, HashingEmbeddings(DIMS))
    for query in QUERIES:
        found = search(query, catalog)
        semantic = scorer.semantic_scores(query)
        best = [catalog.index.names[i] for i in np.argsort(-semantic, kind="stable")[:5]]
        assert list(found) == best
        assert all(0.0 < score <= 1.0 for score in found.values())


def test_the_store_ranks_as_the_in_memory_scorer_does() -> None:
    catalog = build_example_catalog()
    embeddings = Counting()
    assert_ranks_as_the_scorer(
        StoreToolIndex(InMemoryStore(index=index_config(embeddings)), limit=5), catalog
    )
    assert embeddings.documents == len(catalog)  # the catalog was embedded once


def test_a_second_worker_embeds_nothing_and_a_changed_tool_only_itself() -> None:
    catalog = build_example_catalog()
    embeddings = Counting()
    store = InMemoryStore(index=index_config(embeddings))
    hits = StoreToolIndex(store)(QUERIES[0], catalog)
    assert embeddings.documents == len(catalog) and "weather_forecast" in hits

    index = StoreToolIndex(store)  # another worker (or a restart, with a persistent store)
    assert index(QUERIES[0], catalog) == hits
    assert embeddings.documents == len(catalog)  # nothing embedded again

    changed = ToolCatalog.from_tools(
        [
            t.model_copy(update={"description": "Forecast for the coming days in a city."})
            if t.name == "weather_forecast"
            else t
            for t in (spec.tool for spec in catalog.specs)
        ]
    )
    assert index.index(changed) == 1 and embeddings.documents == len(catalog) + 1
    assert index.index(changed, prune=True) == 0  # nothing to write, nothing to prune


def test_prune_removes_tools_that_left_the_catalog() -> None:
    catalog = build_example_catalog()
    store = InMemoryStore(index=index_config(HashingEmbeddings(DIMS)))
    index = StoreToolIndex(store)
    index.index(catalog)
    smaller = ToolCatalog.from_tools([s.tool for s in catalog.specs if s.name != "send_email"])
    index.index(smaller, prune=True)
    assert store.get(("toolbudget", "tools"), "send_email") is None
    assert store.get(("toolbudget", "tools"), "read_email") is not None


def test_inside_a_graph_it_uses_the_graph_store_and_embeds_the_query_once() -> None:
    catalog = build_example_catalog()
    embeddings = Counting()
    store = InMemoryStore(index=index_config(embeddings))
    model = ScriptedChatModel(responses=[AIMessage("Here it is.")], cycle=False)
    config = BudgetConfig(retriever=StoreToolIndex(), max_tools=3)
    app = create_toolbudget_agent(model, catalog, config=config).compile(store=store)
    app.invoke({"messages": [HumanMessage("weather forecast for the weekend")]})
    assert len(store.search(("toolbudget", "tools"), limit=100)) == len(catalog)
    assert "weather_forecast" in model.bound_tools[0]
    assert embeddings.queries == 1  # classify, select and search share one store search


def test_misconfiguration_is_named(caplog) -> None:
    with pytest.raises(ValueError, match="no vector index"):
        StoreToolIndex(InMemoryStore())
    with pytest.raises(TypeError, match="BaseStore"):
        StoreToolIndex({})  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="compiled with a store"):
        StoreToolIndex()("weather", build_example_catalog())
    model = ScriptedChatModel(responses=[AIMessage("ok")], cycle=False)
    config = BudgetConfig(retriever=StoreToolIndex())
    app = create_toolbudget_agent(model, build_example_catalog(), config=config).compile()
    with caplog.at_level("WARNING"):
        app.invoke({"messages": [HumanMessage("weather forecast")]})
    assert "retriever StoreToolIndex failed" in caplog.text
    assert "compiled with a store" in caplog.text


SQLITE_HINT = (
    "SqliteStore's vector index needs a sqlite3 that can load extensions (sqlite-vec); this "
    "Python's cannot. Install pysqlite3-binary (`pip install pysqlite3-binary`, in the dev "
    "extra on Linux x86-64), or use a Python built with --enable-loadable-sqlite-extensions."
)


def sqlite_connect(path: Path) -> Any:
    """A connection as ``SqliteStore.from_conn_string`` opens it, from a sqlite3 that loads
    extensions: the standard library's when it can, else ``pysqlite3``'s."""
    module: Any = sqlite3
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        try:
            import pysqlite3.dbapi2 as module  # type: ignore[import-not-found, no-redef]
        except ImportError:
            pytest.fail(SQLITE_HINT)
    return module.connect(str(path), check_same_thread=False, isolation_level=None)


def test_sqlite_store_ranks_as_the_scorer_and_a_reopened_file_embeds_nothing(tmp_path) -> None:
    catalog = build_example_catalog()
    path = tmp_path / "tools.sqlite"
    embeddings = Counting()
    with sqlite_connect(path) as conn:
        store = SqliteStore(conn, index=index_config(embeddings))
        store.setup()
        search = StoreToolIndex(store, limit=5)
        assert_ranks_as_the_scorer(search, catalog)
        first = search(QUERIES[1], catalog)  # kept by the index object: no new search
        assert embedded(embeddings) == len(catalog) + len(QUERIES)  # the tools once, each query

    restarted = Counting()
    with sqlite_connect(path) as conn:
        store = SqliteStore(conn, index=index_config(restarted))
        index = StoreToolIndex(store, limit=5)
        assert list(index(QUERIES[1], catalog)) == list(first)
        assert embedded(restarted) == 1  # the query only: the tools were in the file already
        assert index.index(catalog) == 0


def _server_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, inner: Any) -> Any:
    """``inner`` wrapped as LangGraph server (``langgraph dev``) hands it to a graph: in
    langgraph_runtime_inmem's ``BatchedStore``, which shows no ``index_config``."""
    # The module makes .langgraph_api/ where it is first imported. (Not
    # LANGGRAPH_DISABLE_FILE_PERSISTENCE: langgraph-runtime-inmem 0.14 fails to import with it.)
    monkeypatch.chdir(tmp_path)
    from langgraph_runtime_inmem.store import BatchedStore

    return BatchedStore(inner)


async def test_the_store_langgraph_server_hands_a_graph_is_searched(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The server's store is a wrapper without index_config: the retriever refused it every
    # turn ("no vector index"), though its search ranks by vector.
    catalog = build_example_catalog()
    embeddings = Counting()
    store = _server_store(monkeypatch, tmp_path, InMemoryStore(index=index_config(embeddings)))
    assert not hasattr(store, "index_config")
    model = ScriptedChatModel(responses=[AIMessage("Here it is.")], cycle=False)
    config = BudgetConfig(retriever=StoreToolIndex(), max_tools=3)
    app = create_toolbudget_agent(model, catalog, config=config).compile(store=store)
    with caplog.at_level("WARNING"):
        await app.ainvoke({"messages": [HumanMessage("weather forecast for the weekend")]})
    assert "retriever StoreToolIndex failed" not in caplog.text
    assert len(await store.asearch(("toolbudget", "tools"), limit=100)) == len(catalog)
    assert embeddings.documents == len(catalog)
    search = StoreToolIndex(store, limit=3)  # another worker: a sync retriever runs in a thread
    assert (await asyncio.to_thread(search, "weather forecast", catalog))["weather_forecast"] > 0


async def test_a_wrapped_store_without_an_index_is_named_by_its_answers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = _server_store(monkeypatch, tmp_path, InMemoryStore())  # langgraph.json: no index
    index = StoreToolIndex(store)  # it cannot tell yet
    with pytest.raises(ValueError, match="without similarity scores: it has no vector index"):
        await asyncio.to_thread(index, "weather forecast", build_example_catalog())


class _Down(Embeddings):
    """An embedding service that is down until ``up`` is set; counts its calls."""

    def __init__(self) -> None:
        self.inner, self.up, self.calls = HashingEmbeddings(DIMS), False, 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if not self.up:
            raise ConnectionError("embedding service down")
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def test_a_failed_indexing_is_tried_again_at_the_next_call_then_after_a_growing_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each ranking node of each turn embedded the whole catalog again while it failed.
    from langgraph_toolbudget.nodes import tool_index

    clock = [1000.0]
    monkeypatch.setattr(tool_index.time, "monotonic", lambda: clock[0])
    catalog, embeddings = build_example_catalog(), _Down()
    index = StoreToolIndex(InMemoryStore(index=index_config(embeddings)))

    def calls_of(query: str) -> int:
        before = embeddings.calls
        with pytest.raises((ConnectionError, RuntimeError)):
            index(query, catalog)
        return embeddings.calls - before

    # each try: the write's embedding only (the error is not about dimensions)
    assert [calls_of("weather") for _ in range(2)] == [1, 1]  # a failure, one retry at once
    with pytest.raises(RuntimeError, match=r"2 failed tries.*ConnectionError.*next try in 30 s"):
        index("weather", catalog)
    assert embeddings.calls == 2  # waiting: nothing embedded
    clock[0] += 31
    assert [calls_of("weather"), calls_of("weather")] == [1, 0]  # then 60 s
    clock[0] += 61
    embeddings.up = True  # the service is back: the next try indexes
    assert index("weather forecast", catalog)["weather_forecast"] > 0
    assert index._failures == {}


def test_a_transient_failure_on_a_store_that_never_checks_dims_is_not_a_dims_mismatch() -> None:
    # InMemoryStore never checks its declared dims: one 429 of the embedding service, with a
    # mis-declared dims, was named a DimsMismatchError and the retriever was off for good.
    class Throttled(_Down):  # the catalog's batch is refused once; then it works
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            self.up = self.calls > 0
            return super().embed_documents(texts)

    store = InMemoryStore(index={"embed": Throttled(), "dims": DIMS + 8, "fields": ["text"]})
    index, catalog = StoreToolIndex(store), build_example_catalog()
    with pytest.raises(ConnectionError):
        index("weather forecast", catalog)
    assert index("weather forecast", catalog)["weather_forecast"] > 0  # tried again at once


def test_tool_items_stored_without_vectors_are_written_again_once_deleted() -> None:
    # The unscored error says "delete them: the next call writes them again"; the pair was
    # marked indexed, so the next calls only searched, answering nothing, until a restart.
    from langgraph_toolbudget.core.vectors import tool_text
    from langgraph_toolbudget.nodes.tool_index import _digest

    catalog, embeddings = build_example_catalog(), Counting()
    store = InMemoryStore(index=index_config(embeddings))
    for name, description in zip(catalog.index.names, catalog.index.descriptions, strict=True):
        text = tool_text(name, description)  # written while the store had no index
        store.put(("toolbudget", "tools"), name, {"text": text, "hash": _digest(text)}, index=False)
    index = StoreToolIndex(store)
    with pytest.raises(ValueError, match="stored without vectors .*delete them"):
        index("weather forecast", catalog)
    for name in catalog.index.names:
        store.delete(("toolbudget", "tools"), name)
    assert index("weather forecast", catalog)["weather_forecast"] > 0
    assert embeddings.documents == len(catalog)  # written again, embedded


def test_failed_and_indexed_stores_are_remembered_bounded_and_weakly() -> None:
    # An app that opens a store per request left one failure per store, each holding the store
    # and the exception's traceback (every tool text of the batch), for good.
    import gc

    from langgraph_toolbudget.nodes.tool_index import MAX_PAIRS

    catalog, index = build_example_catalog(), StoreToolIndex()

    def run(store: Any) -> dict[str, float]:
        def rank(state: dict) -> dict:
            return {"out": index("weather forecast", catalog)}

        graph = StateGraph(_Ranked)
        graph.add_node("rank", rank)
        graph.set_entry_point("rank")
        return graph.compile(store=store).invoke({"out": {}})["out"]

    stores = [InMemoryStore(index=index_config(_Down())) for _ in range(MAX_PAIRS + 10)]
    for store in stores:
        with pytest.raises(ConnectionError):
            run(store)
    assert len(index._failures) == MAX_PAIRS
    assert all(isinstance(f.error, str) for f in index._failures.values())
    del stores, store
    gc.collect()
    assert all(f.store() is None for f in index._failures.values())  # the stores are freed

    # A new store may get a dead one's id (CPython reuses the freed address, mostly at once):
    # it was taken as indexed, and answered nothing. Every new store must answer.
    ids: set[int] = set()
    for _ in range(200):
        store = InMemoryStore(index=index_config(HashingEmbeddings(DIMS)))
        reused = id(store) in ids
        ids.add(id(store))
        assert run(store)["weather_forecast"] > 0
        del store
        gc.collect()
        if reused:
            break
    assert len(index._indexed) <= MAX_PAIRS


def test_sqlite_vecs_own_dimension_error_is_told_from_other_failures(tmp_path: Path) -> None:
    # Only a store error about dimensions is checked against the model's dims (one more text
    # embedded); sqlite-vec's real wording, from a search after the model changed size.
    from langgraph_toolbudget.nodes.tool_index import _about_dims

    with sqlite_connect(tmp_path / "dims.sqlite") as conn:
        store = SqliteStore(conn, index=index_config(HashingEmbeddings(DIMS)))
        store.setup()
        store.put(("notes",), "k", {"text": "weather forecast"})
        resized = SqliteStore(conn, index=index_config(HashingEmbeddings(DIMS // 2)))
        with pytest.raises(Exception, match="dimension") as refused:
            resized.search(("notes",), query="weather")
    assert _about_dims(refused.value)
    assert not _about_dims(ConnectionError("429 Too Many Requests"))
    wrapped = RuntimeError("the batch failed")  # a wrapper's error, raised from the store's
    wrapped.__cause__ = refused.value
    assert _about_dims(wrapped)
