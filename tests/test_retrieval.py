"""A pluggable retrieval function (``retriever=``) in the ranking nodes.

The retrieval function under test is a real search: a LangChain
``InMemoryVectorStore`` over the package's offline ``HashingEmbeddings``, holding
German and Spanish descriptions of some example tools (requests the English tool
texts do not match). Checked: its hits reach the visible set (sync and async
functions, ranked names and scored mappings, under ``invoke`` and ``ainvoke``,
also through the prebuilt agent's ``config=``); an empty answer changes nothing;
a failing function is logged and skipped; a malformed answer or option is named.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.vectorstores import InMemoryVectorStore

from langgraph_toolbudget import (
    BudgetConfig,
    ClassifyIntent,
    SelectTools,
    ToolBudgetMiddleware,
    ToolCatalog,
    ToolSearch,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.hashing import HashingEmbeddings
from langgraph_toolbudget.core.retrieval import fuse_retrieved, retrieved_scores
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.testing import ScriptedChatModel

GERMAN = "Wie ist das Wetter morgen in Tokio?"
QUERIES = ["What's the weather in Tokyo?", "how many orders are there", GERMAN]
DESCRIPTIONS = {
    "weather_forecast": ["Wettervorhersage für morgen in einer Stadt", "pronóstico del tiempo"],
    "get_weather": ["das Wetter jetzt in einer Stadt", "qué tiempo hace ahora"],
    "send_email": ["eine E-Mail an jemanden senden", "enviar un correo a alguien"],
}


@pytest.fixture(scope="module")
def catalog() -> ToolCatalog:
    return build_example_catalog()


@pytest.fixture(scope="module")
def store() -> InMemoryVectorStore:
    vectors = InMemoryVectorStore(HashingEmbeddings())
    docs = [Document(t, metadata={"tool": n}) for n, ts in DESCRIPTIONS.items() for t in ts]
    vectors.add_documents(docs)
    return vectors


def names_search(store: InMemoryVectorStore) -> Any:
    def search(query: str, catalog: ToolCatalog) -> list[str]:
        return [d.metadata["tool"] for d in store.similarity_search(query, k=2)]

    return search


def scored_search(store: InMemoryVectorStore) -> Any:
    async def search(query: str, catalog: ToolCatalog) -> dict[str, float]:
        hits = await store.asimilarity_search_with_score(query, k=2)
        return {d.metadata["tool"]: max(0.0, s) for d, s in hits}

    return search


def visible(catalog: ToolCatalog, query: str, **options: Any) -> tuple[list[str], list[str]]:
    state: dict[str, Any] = {"messages": [HumanMessage(query)]}
    cats = ClassifyIntent(catalog, **options).invoke(state)["categories"]
    out = SelectTools(catalog, max_tools=3, **options).invoke({**state, "categories": cats})
    return cats, out.get("selected_tools", {}).get("add", [])


def test_the_retrieved_tools_reach_the_visible_set(catalog, store):
    cats, tools = visible(catalog, GERMAN)
    assert cats == [] and tools == ["ask_human"]  # the English tool texts match nothing
    cats, tools = visible(catalog, GERMAN, retriever=names_search(store))
    assert cats[0] == "weather"
    assert {"get_weather", "weather_forecast"} <= set(tools)


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
def test_sync_and_async_functions_rank_alike_under_both_apis(catalog, store, api):
    calls: list[str] = []

    def threaded(query: str, catalog: ToolCatalog) -> list[str]:
        calls.append(threading.current_thread().name)
        return names_search(store)(query, catalog)

    state = {"messages": [HumanMessage(GERMAN)], "categories": ["weather", "email"]}
    results = []
    for retriever in (threaded, scored_search(store)):
        node = SelectTools(catalog, max_tools=3, retriever=retriever)
        run = node.invoke(state) if api == "invoke" else asyncio.run(node.ainvoke(state))
        results.append(run["selected_tools"]["add"])
    assert results[0] == results[1]
    assert {"get_weather", "weather_forecast"} <= set(results[0])
    if api == "ainvoke":  # a sync function does not block the event loop
        assert calls and calls[0] != threading.main_thread().name


def test_an_empty_answer_changes_nothing(catalog):
    def nothing(query: str, catalog: ToolCatalog) -> list[str]:
        return ["not_in_the_catalog"]

    for query in QUERIES:
        state = {"messages": [HumanMessage(query)]}
        plain = ClassifyIntent(catalog).invoke(state)
        assert ClassifyIntent(catalog, retriever=nothing).invoke(state) == plain
        state = {**state, "categories": plain["categories"]}
        assert SelectTools(catalog, retriever=nothing).invoke(state) == SelectTools(catalog).invoke(
            state
        )
        assert ToolSearch(catalog, retriever=nothing).invoke(state) == ToolSearch(catalog).invoke(
            state
        )


def test_a_failing_function_is_logged_and_the_turn_ranks_without_it(catalog, caplog):
    def broken(query: str, catalog: ToolCatalog) -> list[str]:
        raise ConnectionError("search service down")

    state = {"messages": [HumanMessage(QUERIES[0])], "categories": ["weather"]}
    with caplog.at_level("WARNING"):
        out = SelectTools(catalog, retriever=broken).invoke(state)
    assert out == SelectTools(catalog).invoke(state)
    assert "retriever broken failed" in caplog.text and "search service down" in caplog.text


def test_scores_and_fusion(catalog):
    names = catalog.index.names
    scores = retrieved_scores({"get_weather": 2.0, "air_quality": 1.0, "nope": 9.0}, catalog)
    assert scores is None or scores.max() <= 1.0  # "nope" is the best but not in the catalog
    scores = retrieved_scores({"get_weather": 2.0, "air_quality": 1.0}, catalog)
    assert scores is not None
    assert scores[names.index("get_weather")] == 1.0
    assert scores[names.index("air_quality")] == 0.5
    ranked = retrieved_scores(["air_quality", "get_weather"], catalog)
    assert ranked is not None and ranked[names.index("get_weather")] == 0.5
    base = catalog.index.scores("weather")
    fused = fuse_retrieved(base, ranked, 0.5)
    # get_weather and weather_forecast score about alike lexically (weather_forecast, a
    # shorter document, a little higher); the retrieved one wins
    weather = float(base[names.index("get_weather")])
    assert 0.9 * float(base.max()) < weather < float(base.max())
    assert np.argmax(fused) == names.index("get_weather")
    assert fused[names.index("weather_forecast")] == fused[names.index("air_quality")] > 0
    # in the base's units: 0.5 * its share of the best lexical score + 0.5 * 0.5
    assert float(fused.max()) == pytest.approx(0.5 * weather + 0.25 * float(base.max()))


def test_malformed_answers_and_options_are_named(catalog):
    for answer in ("get_weather", {"get_weather": "high"}, [1, 2], {"get_weather": -1.0}):
        with pytest.raises(TypeError, match="tool names, best first"):
            retrieved_scores(answer, catalog)
    node = SelectTools(catalog, retriever=lambda query, catalog: "get_weather")
    with pytest.raises(TypeError, match="mapping of tool names to scores"):
        node.invoke({"messages": [HumanMessage("weather")], "categories": ["weather"]})
    with pytest.raises(TypeError, match="retriever must be a function"):
        BudgetConfig(retriever="my_search")
    with pytest.raises(ValueError, match="retriever_weight must be in"):
        BudgetConfig(retriever_weight=1.5)


def test_the_prebuilt_agent_binds_the_retrieved_tools(catalog, store):
    model = ScriptedChatModel(responses=[AIMessage("Sunny.")], cycle=False)
    config = BudgetConfig(retriever=scored_search(store), max_tools=3)
    app = create_toolbudget_agent(model, catalog, config=config).compile()
    asyncio.run(app.ainvoke({"messages": [HumanMessage(GERMAN)]}))
    assert "weather_forecast" in model.bound_tools[0]


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
def test_the_middleware_ranks_with_the_retriever_as_the_nodes_do(catalog, store, api):
    def script() -> list[AIMessage]:
        return [AIMessage("Sunny.")]

    model = ScriptedChatModel(responses=script(), cycle=False)
    node_model = ScriptedChatModel(responses=script(), cycle=False)
    config = BudgetConfig(retriever=names_search(store), max_tools=3, offload_over_chars=None)
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, config=config)])
    nodes = create_toolbudget_agent(node_model, catalog, config=config).compile()
    payload = {"messages": [HumanMessage(GERMAN)]}
    for app in (agent, nodes):
        app.invoke(payload) if api == "invoke" else asyncio.run(app.ainvoke(payload))
    assert {"get_weather", "weather_forecast"} <= set(model.bound_tools[0])
    assert model.bound_tools == node_model.bound_tools
