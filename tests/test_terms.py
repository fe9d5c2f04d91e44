"""Search terms in any script (core/terms.py), and what they buy the selection nodes: requests in
other languages are matched again once learned through ``ToolUsage``."""

from __future__ import annotations

import logging

import pytest
from langchain_core.messages import HumanMessage

from langgraph_toolbudget import ClassifyIntent, SelectTools, ToolSearch, ToolUsage
from langgraph_toolbudget.core import terms
from langgraph_toolbudget.core.terms import tokenize
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.state import merge_names


@pytest.fixture(scope="module")
def catalog():
    return build_example_catalog()


def select(catalog, query, usage):
    state = {"messages": [HumanMessage(query)]}
    state.update(ClassifyIntent(catalog, usage=usage).invoke(state))
    for node in (SelectTools(catalog, usage=usage), ToolSearch(catalog, usage=usage)):
        update = node.invoke(state).get("selected_tools")
        state["selected_tools"] = merge_names(state.get("selected_tools"), update)
    return state


def test_tokenize_keeps_letters_of_any_script_case_folded_and_without_accents():
    assert tokenize("¿Qué tiempo hace en Tokio?") == ["que", "tiempo", "hace", "en", "tokio"]
    assert tokenize("Wie ist das Wetter in MÜNCHEN?") == ["wie", "ist", "das", "wetter", "munchen"]
    assert tokenize("Straße") == ["strasse"]
    assert tokenize("Москва погода") == ["москва", "погода"]
    assert tokenize("ＴＯＫＹＯ") == ["tokyo"]  # full-width forms


def test_tokenize_splits_scripts_without_spaces_into_character_pairs():
    assert tokenize("東京の天気は？") == ["東京", "京の", "の天", "天気", "気は"]
    assert tokenize("天") == ["天"]
    assert "天気" in tokenize("大阪の天気を教えて")


def test_tokenize_keeps_the_vowel_signs_of_indic_scripts():
    assert tokenize("नमस्ते कैसे हो") == ["नमस्ते", "कैसे", "हो"]


def test_tokenize_of_english_is_unchanged():
    assert tokenize("getWeather") == tokenize("get_weather") == ["weather"]
    assert tokenize("What's the weather in Tokyo?") == ["weather", "tokyo"]
    assert tokenize("Send the messages") == ["send", "message"]


def test_a_word_ending_in_ie_and_its_plural_are_one_term():
    for one, many in (("movie", "movies"), ("cookie", "cookies"), ("query", "queries")):
        assert tokenize(one) == tokenize(many), (one, many)
    assert tokenize("tie lie pie") == ["tie", "lie", "pie"]  # too short to stem


def test_a_request_in_the_plural_finds_a_tool_named_in_the_singular():
    from langgraph_toolbudget.core.search import ToolIndex

    index = ToolIndex(
        [
            ("recommend_movie", "Recommend a movie like another one", ["title"]),
            ("play_song", "Play a song", ["title"]),
        ]
    )
    assert index.rank_names("any good movies like Inception?", limit=1)[0][0] == "recommend_movie"


def test_messages_are_not_kept_by_the_word_cache():
    terms._split_short_words.cache_clear()
    for i in range(100):
        tokenize(f"weather in city {i}")
        tokenize(f"東京{i}の天気")
    assert terms._split_short_words.cache_info().currsize == 0
    tokenize("get_weather")  # identifiers (tool and argument names) are cached
    assert terms._split_short_words.cache_info().currsize == 1


LEARNED = [  # recorded request, a new request in the same language, the tool that served it
    ("東京の天気は？", "大阪の天気はどうですか", "get_weather"),
    ("Wie ist das Wetter in München?", "Wie wird das Wetter morgen in Köln?", "get_weather"),
    ("¿Qué tiempo hace en Madrid?", "¿Qué tiempo hará en Sevilla?", "get_weather"),
    ("Quel temps fait-il à Paris ?", "Quel temps fera-t-il à Lyon ?", "get_weather"),
    ("Envía un correo a Bob", "Envía un correo a Ada", "send_email"),
]


@pytest.mark.parametrize("recorded,asked,tool", LEARNED, ids=[r[1] for r in LEARNED])
def test_a_request_in_another_language_is_matched_once_learned(
    catalog, recorded, asked, tool, caplog
):
    usage = ToolUsage()
    for _ in range(3):  # the most used tools are others: the no-match fallback would not help
        usage.record("count the orders in the database", ["count_rows"])
        usage.record("list my repositories", ["gh_list_repos"])
    usage.record(recorded, [tool])
    assert usage.history.rank(asked)[0][0] == tool
    with caplog.at_level(logging.INFO):
        state = select(catalog, asked, usage)
    assert "no category matches" not in caplog.text
    assert state["categories"] == list(catalog.get(tool).categories[:1])
    assert tool in state["selected_tools"]


def test_an_unlearned_request_in_another_language_still_logs_and_falls_back(catalog, caplog):
    usage = ToolUsage()
    usage.record("東京の天気は？", ["get_weather"])
    with caplog.at_level(logging.INFO):
        state = select(catalog, "メールを送って", usage)  # "send an e-mail": nothing learned
    assert state["categories"] == []
    assert "no category matches" in caplog.text
    assert "get_weather" in state["selected_tools"]  # the most used tool
