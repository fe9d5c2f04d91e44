"""semantic.py: HybridScorer (BM25 fused with embeddings), HashingEmbeddings, ``embeddings=``.

The embedding is the package's own :class:`HashingEmbeddings`, a real
deterministic embedding (hashed words and character n-grams); the subclasses
below only record its calls, or raise like an embedding server that went away.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import threading
import weakref

import numpy as np
import pytest
from blockbuster import blockbuster_ctx
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph

from langgraph_toolbudget import (
    ClassifyIntent,
    SelectTools,
    ToolBudgetState,
    ToolCatalog,
    ToolSearch,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.derived import MAX_EMBEDDINGS_ENTRIES
from langgraph_toolbudget.core.hashing import MAX_CACHED_WORD, WORD_CACHE_SIZE
from langgraph_toolbudget.core.selection import search_hits, select_tools
from langgraph_toolbudget.core.semantic import (
    HashingEmbeddings,
    HybridScorer,
    as_hybrid_scorer,
    tool_text,
)
from langgraph_toolbudget.testing import ScriptedChatModel

MODES = ["sync", "async"]


# --- a small catalog of real tools --------------------------------------------------------


@tool
def summarize_document(text: str) -> str:
    """Summarize a long document in a few sentences."""
    return text[:200]


@tool
def translate_text(text: str, language: str) -> str:
    """Translate text into another language."""
    return f"[{language}] {text}"


@tool
def visualize_data(values: list[float], kind: str = "bar") -> str:
    """Plot numbers as a bar or line chart."""
    return f"{kind} chart of {len(values)} values"


@tool
def get_sales_report(quarter: str) -> dict:
    """Get the sales report of a quarter, with revenue per region."""
    return {"quarter": quarter, "revenue": {"emea": 10, "amer": 12}}


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email message to a recipient."""
    return f"sent to {to}"


@tool
def search_web(query: str) -> list[str]:
    """Search the web for pages about a topic."""
    return [f"https://example.org/?q={query}"]


TOOLS: list[BaseTool] = [
    summarize_document,
    translate_text,
    visualize_data,
    get_sales_report,
    send_email,
    search_web,
]
CATEGORIES = {
    "documents": ["summarize_document", "translate_text"],
    "analytics": ["visualize_data", "get_sales_report"],
    "communication": ["send_email"],
    "web": ["search_web"],
}


@pytest.fixture
def docs_catalog() -> ToolCatalog:
    return ToolCatalog.from_tools(TOOLS, categories=CATEGORIES)


class RecordingEmbeddings(HashingEmbeddings):
    """HashingEmbeddings that records each call: (method, number of texts)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.calls: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def _record(self, method: str, n: int) -> None:
        with self.lock:
            self.calls.append((method, n))

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.calls if m == method)

    def texts(self, method: str) -> int:
        return sum(n for m, n in self.calls if m == method)

    def embed_documents(self, texts):
        self._record("embed_documents", len(texts))
        return super().embed_documents(texts)

    def embed_query(self, text):
        self._record("embed_query", 1)
        return super().embed_query(text)

    async def aembed_documents(self, texts):
        self._record("aembed_documents", len(texts))
        return await super().aembed_documents(texts)

    async def aembed_query(self, text):
        self._record("aembed_query", 1)
        return await super().aembed_query(text)


class FlakyEmbeddings(RecordingEmbeddings):
    """Raises like an unreachable embedding server while ``queries_down`` / ``documents_down``."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.queries_down = False
        self.documents_down = False

    def embed_documents(self, texts):
        if self.documents_down:
            raise ConnectionError("embedding server unreachable")
        return super().embed_documents(texts)

    def embed_query(self, text):
        if self.queries_down:
            raise ConnectionError("embedding server unreachable")
        return super().embed_query(text)

    async def aembed_documents(self, texts):
        if self.documents_down:
            raise ConnectionError("embedding server unreachable")
        return await super().aembed_documents(texts)

    async def aembed_query(self, text):
        if self.queries_down:
            raise ConnectionError("embedding server unreachable")
        return await super().aembed_query(text)


class ShortQueryEmbeddings(HashingEmbeddings):
    """Query vectors of another length than the document vectors (a misconfigured model)."""

    def embed_query(self, text):
        return super().embed_query(text)[:10]

    async def aembed_query(self, text):
        return (await super().aembed_query(text))[:10]


def ask(text: str, **state) -> dict:
    return {"messages": [HumanMessage(text)], **state}


async def run(node, state, mode):
    if mode == "sync":
        return node.invoke(state)
    return await node.ainvoke(state)


async def scores(scorer: HybridScorer, query: str, mode: str) -> np.ndarray:
    if mode == "sync":
        return scorer.scores(query)
    return await scorer.ascores(query)


def top(catalog: ToolCatalog, values: np.ndarray, k: int = 1) -> list[str]:
    order = np.lexsort((np.arange(values.size), -values))[:k]
    return [catalog.index.names[i] for i in order if values[i] > 0]


def build_graph(catalog: ToolCatalog, embeddings, **select_kwargs) -> StateGraph:
    g = StateGraph(ToolBudgetState)
    g.add_node("classify_intent", ClassifyIntent(catalog, embeddings=embeddings))
    g.add_node("select_tools", SelectTools(catalog, embeddings=embeddings, **select_kwargs))
    g.add_node("tool_search", ToolSearch(catalog, search_limit=2, embeddings=embeddings))
    g.add_edge(START, "classify_intent")
    g.add_edge("classify_intent", "select_tools")
    g.add_edge("select_tools", "tool_search")
    g.add_edge("tool_search", END)
    return g


async def run_graph(graph, state, mode):
    compiled = graph.compile()
    if mode == "sync":
        return compiled.invoke(state)
    return await compiled.ainvoke(state)


# --- HashingEmbeddings ----------------------------------------------------------------------


def test_hashing_embeddings_are_deterministic_unit_vectors():
    a, b = HashingEmbeddings(dim=256), HashingEmbeddings(dim=256)
    texts = ["Summarize a long document", "Send an email", "Plot numbers as a chart"]
    va, vb = np.array(a.embed_documents(texts)), np.array(b.embed_documents(texts))
    assert va.shape == (3, 256)
    np.testing.assert_array_equal(va, vb)  # no per-process hash salt, no randomness
    np.testing.assert_allclose(np.linalg.norm(va, axis=1), 1.0)
    np.testing.assert_array_equal(va[0], a.embed_query(texts[0]))  # one space for both
    assert not np.any(a.embed_query("the of and"))  # only stop words: the zero vector


def test_hashing_embeddings_join_word_forms_not_unrelated_words():
    emb = HashingEmbeddings()
    q, same_stem, other = (
        np.array(emb.embed_query(t)) for t in ("summarization", "summarize", "translate")
    )
    assert q @ same_stem > 0.3
    assert abs(q @ other) < 0.1


def test_hashing_embeddings_validates_arguments():
    with pytest.raises(ValueError, match="dim"):
        HashingEmbeddings(dim=1)
    with pytest.raises(ValueError, match="ngram_range"):
        HashingEmbeddings(ngram_range=(4, 2))
    with pytest.raises(ValueError, match="ngram_weight"):
        HashingEmbeddings(ngram_weight=-1)


# --- fusion ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_fusion_finds_a_paraphrase_bm25_misses(docs_catalog, mode):
    query = "I'd like a summarization, please"
    # BM25 alone: "summarization" is no indexed word, nor a close spelling of one.
    assert docs_catalog.index.rank_names(query) == []
    scorer = HybridScorer(docs_catalog, HashingEmbeddings())
    assert top(docs_catalog, await scores(scorer, query, mode)) == ["summarize_document"]

    lexical = await run(ToolSearch(docs_catalog, search_limit=1), ask(query), mode)
    hybrid = await run(
        ToolSearch(docs_catalog, search_limit=1, embeddings=scorer), ask(query), mode
    )
    assert lexical == {}
    assert hybrid["selected_tools"] == {"add": ["summarize_document"], "remove": []}


@pytest.mark.parametrize("mode", MODES)
async def test_fusion_adds_a_paraphrased_tool_beside_the_lexical_match(docs_catalog, mode):
    # The request is a chart of revenue: BM25 sees only the revenue half of it.
    query = "a visualization of the revenue"
    bm25 = docs_catalog.index.scores(query)
    assert top(docs_catalog, bm25, 6) == ["get_sales_report"]  # the chart tool scores 0
    scorer = HybridScorer(docs_catalog, HashingEmbeddings())
    fused = await scores(scorer, query, mode)
    assert top(docs_catalog, fused, 2) == ["get_sales_report", "visualize_data"]
    lexical = await run(ToolSearch(docs_catalog, search_limit=2), ask(query), mode)
    hybrid = await run(
        ToolSearch(docs_catalog, search_limit=2, embeddings=scorer), ask(query), mode
    )
    assert lexical["selected_tools"] == {"add": ["get_sales_report"], "remove": []}
    assert hybrid["selected_tools"] == {"add": ["get_sales_report", "visualize_data"], "remove": []}


@pytest.mark.parametrize("mode", MODES)
async def test_classify_and_select_use_fused_scores(docs_catalog, mode):
    emb = HashingEmbeddings()
    query = "I'd like a summarization, please"
    lexical = await run(ClassifyIntent(docs_catalog), ask(query), mode)
    hybrid = await run(ClassifyIntent(docs_catalog, embeddings=emb), ask(query), mode)
    assert lexical["categories"] == []
    assert hybrid["categories"][0] == "documents"
    out = await run(
        SelectTools(docs_catalog, max_tools=1, embeddings=emb),
        ask(query, categories=["documents"]),
        mode,
    )
    assert out["selected_tools"] == {"add": ["summarize_document"], "remove": []}
    # Without categories the relevance strategy ranks by the fused scores too.
    out = await run(SelectTools(docs_catalog, max_tools=1, embeddings=emb), ask(query), mode)
    assert out["selected_tools"] == {"add": ["summarize_document"], "remove": []}


def test_semantic_weight_bounds_the_mix(docs_catalog):
    query = "a visualization of the revenue"
    emb = HashingEmbeddings()
    bm25 = docs_catalog.index.scores(query)
    lexical_only = HybridScorer(docs_catalog, emb, semantic_weight=0.0).scores(query)
    np.testing.assert_allclose(lexical_only, bm25)
    semantic_only = HybridScorer(docs_catalog, emb, semantic_weight=1.0)
    cos = semantic_only.semantic_scores(query)
    fused = semantic_only.scores(query)
    assert list(np.argsort(-fused, kind="stable")) == list(np.argsort(-cos, kind="stable"))
    # Scaled to the query's BM25 range, so category scores keep their balance.
    assert fused.max() == pytest.approx(bm25.max())
    with pytest.raises(ValueError, match="semantic_weight"):
        HybridScorer(docs_catalog, emb, semantic_weight=1.5)


def test_rrf_fusion(docs_catalog):
    scorer = HybridScorer(docs_catalog, HashingEmbeddings(), fusion="rrf")
    fused = scorer.scores("a visualization of the revenue")
    assert top(docs_catalog, fused, 2) == ["get_sales_report", "visualize_data"]
    assert np.all(fused > 0)
    with pytest.raises(ValueError, match="fusion"):
        HybridScorer(docs_catalog, HashingEmbeddings(), fusion="max")


def test_scores_are_read_only_and_aligned(docs_catalog):
    scorer = HybridScorer(docs_catalog, HashingEmbeddings())
    fused = scorer.scores("send the chart by email")
    assert fused.shape == (len(docs_catalog.index),)
    with pytest.raises(ValueError):
        fused[0] = 1.0
    assert top(docs_catalog, fused) == ["send_email"]


@pytest.mark.parametrize("mode", MODES)
async def test_multi_task_request_embeds_each_clause_once(docs_catalog, mode):
    emb = RecordingEmbeddings()
    scorer = HybridScorer(docs_catalog, emb)
    query = "I'd like a summarization of the memo. Then send an email to Ana"
    texts = scorer.query_texts(query)
    assert texts == [query, "I'd like a summarization of the memo", "send an email to Ana"]
    for _ in range(3):  # three nodes of one turn
        fused = await scores(scorer, query, mode)
    method = "embed_query" if mode == "sync" else "aembed_query"
    assert emb.count(method) == len(texts)
    # Each task gets its own top tool; BM25 alone finds only the email one.
    assert set(top(docs_catalog, fused, 2)) == {"summarize_document", "send_email"}
    assert top(docs_catalog, docs_catalog.index.scores(query), 6) == ["send_email"]
    whole = HybridScorer(docs_catalog, emb, split_clauses=False)
    assert whole.query_texts(query) == [query]


def test_tool_text_is_name_words_and_description():
    assert tool_text("get_salesReport", "Get a report.") == "get sales report: Get a report."


# --- caching --------------------------------------------------------------------------------


async def test_catalog_embedded_once_across_many_queries_and_nodes(docs_catalog):
    emb = RecordingEmbeddings()
    graph = build_graph(docs_catalog, emb).compile()
    queries = [
        "summarize this report",
        "send an email to ana",
        "plot the revenue",
        "translate the text to French",
        "search the web for langgraph",
    ]
    for q in queries:
        graph.invoke(ask(q))
    # Every tool text once, in one batch (6 tools < batch_size), whatever the turns and nodes.
    assert emb.count("embed_documents") == 1
    assert emb.texts("embed_documents") == len(docs_catalog)
    # One query embedding per turn: the three nodes share it.
    assert emb.count("embed_query") == len(queries)
    # Another graph over the same catalog and embeddings object reuses the tool vectors.
    for q in queries:
        await build_graph(docs_catalog, emb).compile().ainvoke(ask(q))
    assert emb.texts("embed_documents") + emb.texts("aembed_documents") == len(docs_catalog)
    assert emb.count("aembed_query") == 0  # those queries were still cached
    # Another embeddings object embeds the catalog for itself.
    other = RecordingEmbeddings(dim=128)
    build_graph(docs_catalog, other).compile().invoke(ask(queries[0]))
    assert other.texts("embed_documents") == len(docs_catalog)


def test_catalog_keeps_vectors_of_a_bounded_number_of_embeddings_objects(docs_catalog):
    kept = [RecordingEmbeddings(dim=64) for _ in range(MAX_EMBEDDINGS_ENTRIES + 2)]
    for emb in kept:
        HybridScorer(docs_catalog, emb).embed_catalog()
    assert docs_catalog.derived.embeddings_entries == MAX_EMBEDDINGS_ENTRIES
    # The most recent ones are still shared; the first was dropped and embeds again.
    HybridScorer(docs_catalog, kept[-1]).embed_catalog()
    assert kept[-1].count("embed_documents") == 1
    HybridScorer(docs_catalog, kept[0]).embed_catalog()
    assert kept[0].count("embed_documents") == 2


def test_catalog_does_not_keep_a_discarded_embeddings_object_alive(docs_catalog):
    emb = RecordingEmbeddings()
    scorer = HybridScorer(docs_catalog, emb)
    scorer.scores("summarize this report")
    ref = weakref.ref(emb)
    del emb, scorer
    gc.collect()
    assert ref() is None
    assert docs_catalog.derived.embeddings_entries == 0


def test_hashing_embeddings_cache_only_short_words():
    emb = HashingEmbeddings(dim=64)
    long_word = "x" * (MAX_CACHED_WORD + 1)
    emb.embed_query(f"summarize {long_word}")
    info = emb._cached_word.cache_info()
    assert (info.currsize, info.maxsize) == (1, WORD_CACHE_SIZE)  # "summarize" only
    assert emb.embed_query(long_word) == emb.embed_query(long_word)


def test_catalog_embedded_in_batches(docs_catalog):
    emb = RecordingEmbeddings()
    scorer = HybridScorer(docs_catalog, emb, batch_size=4)
    assert not scorer.catalog_embedded
    scorer.embed_catalog()
    assert [n for m, n in emb.calls] == [4, 2]
    assert scorer.catalog_embedded and scorer.catalog_embed_seconds is not None
    scorer.embed_catalog()
    assert len(emb.calls) == 2


def test_concurrent_first_turns_embed_the_catalog_once(docs_catalog):
    emb = RecordingEmbeddings()
    scorer = HybridScorer(docs_catalog, emb, batch_size=2)
    barrier = threading.Barrier(8)
    results = []

    def worker(i: int) -> None:
        barrier.wait()
        results.append(top(docs_catalog, scorer.scores(f"send email number {i}")))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert emb.texts("embed_documents") == len(docs_catalog)
    assert results == [["send_email"]] * 8


async def test_concurrent_async_first_turns_embed_the_catalog_once(docs_catalog):
    emb = RecordingEmbeddings()
    scorer = HybridScorer(docs_catalog, emb, batch_size=2)
    out = await asyncio.gather(*(scorer.ascores(f"send email number {i}") for i in range(8)))
    assert emb.texts("aembed_documents") == len(docs_catalog)
    assert [top(docs_catalog, s) for s in out] == [["send_email"]] * 8


# --- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_query_embedding_failure_falls_back_to_lexical(docs_catalog, mode, caplog):
    emb = FlakyEmbeddings()
    scorer = HybridScorer(docs_catalog, emb)
    await scores(scorer, "warm up", mode)  # tool vectors in place
    emb.queries_down = True
    query = "send the quarterly revenue by email"
    with caplog.at_level(logging.WARNING, logger="langgraph_toolbudget.core.semantic"):
        fallback = await scores(scorer, query, mode)
        out = await run(ToolSearch(docs_catalog, embeddings=scorer), ask(query), mode)
    np.testing.assert_array_equal(fallback, docs_catalog.index.scores(query))
    assert out == await run(ToolSearch(docs_catalog), ask(query), mode)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and "embedding the query" in warnings[0].getMessage()
    assert "ConnectionError" in warnings[0].getMessage()
    # Back up: the next turn is hybrid again.
    emb.queries_down = False
    again = await scores(scorer, query, mode)
    assert not np.array_equal(again, docs_catalog.index.scores(query))


@pytest.mark.parametrize("mode", MODES)
async def test_catalog_embedding_failure_falls_back_then_retries(docs_catalog, mode, caplog):
    emb = FlakyEmbeddings()
    emb.documents_down = True
    graph = build_graph(docs_catalog, emb)
    query = "I'd like a summarization, please"
    with caplog.at_level(logging.WARNING, logger="langgraph_toolbudget.core.semantic"):
        out = await run_graph(graph, ask(query), mode)
    assert out["categories"] == [] and "summarize_document" not in out["selected_tools"]
    assert any("tool catalog" in r.getMessage() for r in caplog.records)
    emb.documents_down = False
    out = await run_graph(graph, ask(query), mode)
    assert out["categories"][0] == "documents"
    assert "summarize_document" in out["selected_tools"]


@pytest.mark.parametrize("mode", MODES)
async def test_malformed_query_vector_falls_back(docs_catalog, mode, caplog):
    scorer = HybridScorer(docs_catalog, ShortQueryEmbeddings())
    query = "send an email"
    with caplog.at_level(logging.WARNING, logger="langgraph_toolbudget.core.semantic"):
        got = await scores(scorer, query, mode)
    np.testing.assert_array_equal(got, docs_catalog.index.scores(query))
    assert any("dimensions" in r.getMessage() for r in caplog.records)


def test_bad_embeddings_arguments(docs_catalog, catalog):
    with pytest.raises(TypeError, match="Embeddings"):
        SelectTools(docs_catalog, embeddings=object())
    with pytest.raises(ValueError, match="another catalog"):
        ToolSearch(catalog, embeddings=HybridScorer(docs_catalog, HashingEmbeddings()))
    assert as_hybrid_scorer(docs_catalog, None) is None


# --- async uses the async API, without blocking the loop ------------------------------------


async def test_async_path_uses_aembed_methods(docs_catalog):
    emb = RecordingEmbeddings()
    out = await build_graph(docs_catalog, emb).compile().ainvoke(ask("I'd like a summarization"))
    assert "summarize_document" in out["selected_tools"]
    assert emb.count("aembed_query") == 1
    assert emb.count("aembed_documents") == 1
    assert emb.count("embed_query") == emb.count("embed_documents") == 0


async def test_async_graph_makes_no_blocking_call(docs_catalog):
    emb = HashingEmbeddings()
    graph = build_graph(docs_catalog, emb).compile()
    with blockbuster_ctx():
        out = await graph.ainvoke(ask("I'd like a summarization, please"))
    assert out["categories"][0] == "documents"


# --- the graph, and embeddings=None ---------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_graph_with_embeddings(catalog, mode):
    emb = HashingEmbeddings()
    out = await run_graph(build_graph(catalog, emb, max_tools=4), ask("forecast for Lima"), mode)
    assert out["categories"][0] == "weather"
    assert "weather_forecast" in out["selected_tools"]
    assert not {"search_tools", "add_tool", "show_all_tools"} & set(out["selected_tools"])
    # A second user turn after the model used the forecast: tool_search stays quiet, the rest
    # re-ranks, and the tool the thread used stays visible.
    used = [
        AIMessage("", tool_calls=[{"name": "weather_forecast", "args": {}, "id": "f1"}]),
        ToolMessage("18C", name="weather_forecast", tool_call_id="f1"),
        AIMessage("18C"),
    ]
    state = {**out, "messages": [*out["messages"], *used, HumanMessage("and Paris?")]}
    again = await run_graph(build_graph(catalog, emb, max_tools=4), state, mode)
    assert "weather_forecast" in again["selected_tools"]
    assert not {"search_tools", "add_tool"} & set(again["selected_tools"])


@pytest.mark.parametrize("mode", MODES)
async def test_embeddings_none_is_the_lexical_pipeline(catalog, mode):
    for node in (ClassifyIntent(catalog), SelectTools(catalog), ToolSearch(catalog)):
        assert node.scorer is None
    query = "Create an issue in GitHub for project apollo and post it to Slack"
    out = await run_graph(build_graph(catalog, None), ask(query), mode)
    cats = out["categories"]
    assert cats
    selected = select_tools(catalog, query, cats, max_tools=8)
    skip = [*catalog.always_visible, *selected]
    hits = search_hits(catalog, query, limit=2, exclude=skip, focus=cats)
    assert out["selected_tools"] == [*catalog.always_visible, *selected, *hits]


def test_scores_argument_must_match_the_catalog(catalog):
    with pytest.raises(ValueError, match="one value per tool"):
        select_tools(catalog, "x", ["github"], scores=np.zeros(3))
    with pytest.raises(ValueError, match="one value per tool"):
        search_hits(catalog, "x", scores=np.zeros(3))


@pytest.mark.parametrize("mode", MODES)
async def test_prebuilt_agent_passes_embeddings_through(docs_catalog, mode):
    emb = RecordingEmbeddings()
    model = ScriptedChatModel(responses=[AIMessage("Here is the summary.")])
    graph = create_toolbudget_agent(model, docs_catalog, max_tools=1, embeddings=emb).compile()
    state = ask("I'd like a summarization, please")
    out = graph.invoke(state) if mode == "sync" else await graph.ainvoke(state)
    assert out["categories"][0] == "documents"
    assert "summarize_document" in out["selected_tools"]
    assert "summarize_document" in model.bound_tools[0]
    queries = emb.count("embed_query") + emb.count("aembed_query")
    assert queries == 1
    assert math.isclose(emb.texts("embed_documents") + emb.texts("aembed_documents"), 6)
