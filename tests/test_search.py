"""search.py: the search_tools regex engine, fuzzy fallback and free-text ranking."""

from __future__ import annotations

import copy
import functools
import gc
import inspect
import json
import re
import threading
import time
import tracemalloc
import weakref

import pytest
from langchain_core.tools import StructuredTool
from pydantic import BaseModel

from langgraph_toolbudget import ToolCatalog
from langgraph_toolbudget.core.fuzzy import WORD_SCORES_CACHE_SIZE
from langgraph_toolbudget.core.search import (
    CLAUSE_STRENGTH_POWER,
    EXPAND_CACHE_SIZE,
    FULL_QUERY_WEIGHT,
    MAX_FUZZY_RESULTS,
    MAX_SENTENCE_SPELLINGS,
    SearchResult,
    ToolIndex,
    clauses,
    lead_sentence,
    tokenize,
)
from langgraph_toolbudget.core.terms import (
    MAX_CACHED_TEXT,
    RECENT_TEXTS,
    SPLIT_CACHE_SIZE,
    _split_recent_texts,
    _split_short_words,
    _split_words,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog


def _text(catalog: ToolCatalog, name: str) -> str:
    spec = catalog.get(name)
    return f"{spec.name}\n{spec.description}\n{' '.join(spec.arg_names)}"


def _names(result: SearchResult) -> list[str]:
    return [t["name"] for t in result.tools]


# --- search_tools examples -------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern", ["weather", "database.*query", "(?i)slack", "get_.*", "file|folder"]
)
def test_regex_search_matches_exactly_the_tools_the_pattern_matches(catalog, pattern):
    result = catalog.index.regex_search(pattern)
    # Oracle: Python's own regex engine over name, description and argument names
    # (the patterns are all lower case, so matching ignores case).
    expected = {
        n for n in catalog.tool_names if re.search(pattern, _text(catalog, n), re.IGNORECASE)
    }
    assert expected, "the fixture catalog must hold tools for every seed pattern"
    assert result.error is None
    assert result.fuzzy is False
    assert set(_names(result)) == expected
    assert result.found == len(expected)


def test_regex_search_weather_finds_weather_tools_name_matches_first(catalog):
    names = _names(catalog.index.regex_search("weather"))
    assert {"get_weather", "weather_forecast", "get_air_quality"} <= set(names)
    assert "send_message" not in names
    # get_air_quality only mentions weather in its description: name matches come first.
    assert names.index("get_air_quality") > names.index("get_weather")
    assert names.index("get_air_quality") > names.index("weather_forecast")


def test_regex_search_database_dot_star_query_finds_the_query_tool(catalog):
    names = _names(catalog.index.regex_search("database.*query"))
    assert "run_database_query" in names
    assert "list_tables" not in names


def test_regex_search_case_insensitive_flag_matches_capitalised_description(catalog):
    # "Slack" is capitalised in every description; the upper-case pattern alone
    # would be case sensitive, (?i) makes it match.
    names = set(_names(catalog.index.regex_search("(?i)SLACK")))
    assert names == set(catalog.tools_in("slack"))
    assert catalog.index.regex_search("SLACK").fuzzy is True


def test_regex_search_get_prefix_finds_all_get_tools(catalog):
    names = set(_names(catalog.index.regex_search("get_.*")))
    assert names == {n for n in catalog.tool_names if n.startswith("get_")}
    assert {"get_weather", "get_issue", "get_file_contents", "get_air_quality"} <= names


def test_regex_search_alternation_finds_file_and_folder_tools(catalog):
    names = set(_names(catalog.index.regex_search("file|folder")))
    assert {"read_file", "write_file", "list_files", "delete_file", "create_folder"} <= names
    assert "get_weather" not in names


def test_regex_search_matches_argument_names(catalog):
    # "sql" appears only as run_database_query's argument name.
    assert _names(catalog.index.regex_search(r"\bsql\b")) == ["run_database_query"]


def test_regex_search_limit_caps_regex_matches(catalog):
    result = catalog.index.regex_search("list", limit=2)
    assert len(result.tools) == 2
    # found counts every match, and the answer says the list is cut (it said found=2, so
    # a model never learned of the others)
    every = catalog.index.regex_search("list")
    assert result.found == every.found == len(every.tools) > 2
    assert f"These are the first 2 of {every.found}: a narrower pattern" in result.message
    assert "first" not in every.message


@pytest.mark.parametrize(
    ("pattern", "names"),
    [
        ("^get_weather$", ["get_weather"]),  # a whole name
        ("_issue$", ["create_issue", "close_issue", "comment_on_issue"]),  # how a name ends
        ("^list_", None),  # how a name starts
    ],
)
def test_regex_search_anchors_match_at_a_name(pattern, names):
    # A tool's text is one string, name, description and argument names on lines of their
    # own: `^` and `$` matched only at its very start and end, so these fell to the fuzzy
    # fallback ("No tool matched the pattern exactly").
    index = build_example_catalog().index
    result = index.regex_search(pattern)
    assert result.error is None and not result.fuzzy
    found = _names(result)
    if names is not None:
        assert found[: len(names)] == names
    assert all(re.search(pattern, name) for name in found[:3])


def test_fuzzy_fallback_finds_get_weather_for_typo_wether(catalog):
    result = catalog.index.regex_search("wether")
    assert result.error is None
    assert result.fuzzy is True
    assert "get_weather" in _names(result)
    assert "weather_forecast" in _names(result)
    assert result.found in range(1, MAX_FUZZY_RESULTS + 1)


def test_fuzzy_fallback_matches_send_msg_to_send_message_by_words(catalog):
    result = catalog.index.regex_search("send msg")
    assert result.fuzzy is True
    assert _names(result)[0] == "send_message"


def test_fuzzy_fallback_returns_at_most_five(catalog):
    # "lst" abbreviates "list" (and "latest"): nine tools match, only five come back.
    assert sum(n.startswith("list_") for n in catalog.tool_names) > MAX_FUZZY_RESULTS
    result = catalog.index.regex_search("lst")
    assert result.fuzzy is True
    assert result.found == len(result.tools) == MAX_FUZZY_RESULTS
    assert len(set(_names(result))) == MAX_FUZZY_RESULTS
    assert set(_names(result)) <= set(catalog.tool_names)


def test_fuzzy_search_at_most_five_by_default_on_a_large_catalog(big_catalog):
    assert len(big_catalog.index.fuzzy_search("sensr readng")) <= MAX_FUZZY_RESULTS


def test_regex_search_no_match_anywhere_returns_empty_result_with_message(catalog):
    result = catalog.index.regex_search("zqxjvk")
    assert result.error is None
    assert result.found == 0
    assert result.tools == []
    assert result.message
    assert result.to_dict() == {"found": 0, "tools": [], "message": result.message}


# --- result shape ------------------------------------------------------------------------


def test_search_result_has_seed_002_shape_found_tools_message(catalog):
    out = catalog.index.regex_search("weather").to_dict()
    assert set(out) == {"found", "tools", "message"}
    assert out["found"] == len(out["tools"]) > 0
    assert "add_tool" in out["message"]
    for entry in out["tools"]:
        assert set(entry) == {"name", "description"}
        assert entry["description"] == catalog.get(entry["name"]).description
    json.dumps(out)  # what the model receives is plain JSON


# --- bad patterns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [("get_(weather", "missing )"), ("[a-", "missing ]"), ("*weather", "repetition")],
)
def test_regex_search_invalid_regex_returns_error_result_not_exception(catalog, pattern, problem):
    result = catalog.index.regex_search(pattern)
    assert result.error is not None
    assert problem in result.error
    assert pattern in result.error
    assert "(?m)" not in result.error  # the multi-line flag is ours, not the model's pattern
    assert result.found == 0
    assert result.tools == []
    assert result.to_dict() == {"error": result.error}


def test_regex_search_lookaround_is_rejected_with_explanation(catalog):
    result = catalog.index.regex_search("get_(?=weather)")
    assert result.error is not None
    assert "look-around" in result.error


@pytest.mark.parametrize("pattern", ["", "   ", None, 42])
def test_regex_search_empty_or_non_string_pattern_returns_error(catalog, pattern):
    result = catalog.index.regex_search(pattern)
    assert result.error is not None
    assert result.tools == []


# --- catastrophic patterns over 1,000 tools ----------------------------------------------


class _SensorArgs(BaseModel):
    sensor: str


def _read_sensor(sensor: str) -> str:
    return f"reading of {sensor}: 0"


# NATO words without a "y" in them.
_WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
]


@pytest.fixture(scope="module")
def big_catalog() -> ToolCatalog:
    """1,000 real tools whose descriptions hold long runs built to trip backtracking engines."""
    tools = []
    for i in range(1000):
        run = "a" * (200 + i % 50) + "b" if i % 2 == 0 else "x" * (200 + i % 50)
        words = " ".join(_WORDS[(i + j) % len(_WORDS)] for j in range(8))
        tools.append(
            StructuredTool(
                name=f"sensor_{i:04d}",
                description=f"Sensor {i} reading of the {words} plant: {run}\n" + "a" * 30 + "b",
                args_schema=_SensorArgs,
                func=_read_sensor,
                metadata={"server": f"plant{i % 10}"},
            )
        )
    return ToolCatalog.from_tools(tools)


# How long these searches take is measured by benchmarks/search_worst_case.py (target:
# 100 ms each on 1,000 tools), not here. Here: RE2 runs them to a correct result with no
# error. A backtracking engine would not finish them at all: the timeout marks catch it.


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("pattern", "found"),
    [
        ("(a+)+$", 0),  # every text ends with the argument name "sensor"
        ("(.*a){20}", 1000),  # every description holds a run of 30 a's
        ("(x|x|x)*y", 0),  # no text holds a "y"
        ("(a|aa)+b$", 1000),  # every description's last line is a run of a's and a "b"
        ("(x+x+)+y", 0),
    ],
)
def test_regex_search_catastrophic_pattern_is_run_by_re2_on_1000_tools(big_catalog, pattern, found):
    result = big_catalog.index.regex_search(pattern)
    assert isinstance(result, SearchResult)
    assert result.error is None
    assert (result.found, result.fuzzy) == (found, False)
    assert (result.tools == []) == (found == 0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param(" ".join(["zulu"] * 300), id="300-repeated-words"),
        pytest.param(" ".join(f"w{i}ord" for i in range(200)), id="200-distinct-words"),
        pytest.param("x" * 5000, id="5000-chars"),
        pytest.param(
            "please find me a tool that converts currencies between euros and dollars "
            "for the quarterly finance report of the whole company",
            id="long-sentence",
        ),
        pytest.param("(?i)" + "(a|b)*" * 50 + "z", id="many-groups"),
    ],
)
def test_regex_search_long_pattern_falling_back_to_fuzzy_answers_on_1000_tools(
    big_catalog, pattern
):
    # No regex match, so the fuzzy fallback runs on a very long query: it answers, boundedly.
    result = big_catalog.index.regex_search(pattern)
    assert result.error is None
    assert result.found <= MAX_FUZZY_RESULTS
    assert len(result.tools) == result.found


def test_regex_search_catastrophic_pattern_still_gives_the_right_matches(big_catalog):
    # Every description holds a run of 30 a's: all 1,000 tools match.
    assert big_catalog.index.regex_search("(.*a){20}").found == 1000
    # No name, description or argument name holds a "y", and every text ends with
    # the argument name "sensor": these two match nothing, quickly.
    for pattern in ("(x|x|x)*y", "(a+)+$"):
        result = big_catalog.index.regex_search(pattern)
        assert (result.found, result.tools, result.error) == (0, [], None)
    names = _names(big_catalog.index.regex_search("sensor_0007"))
    assert names == ["sensor_0007"]


# --- free-text ranking -------------------------------------------------------------------


def test_rank_weather_query_ranks_weather_tool_above_slack_tool(catalog):
    ranked = [n for n, _ in catalog.index.rank_names("what's the weather in Paris today?")]
    assert ranked[0] in {"get_weather", "weather_forecast"}
    assert "send_message" not in ranked or ranked.index("get_weather") < ranked.index(
        "send_message"
    )


def test_rank_tolerates_typos(catalog):
    ranked = [n for n, _ in catalog.index.rank_names("wether forcast for lima")]
    assert ranked and ranked[0] == "weather_forecast"


def test_rank_returns_positive_scores_best_first_and_respects_limit(catalog):
    ranked = catalog.index.rank("send a message to the slack channel", limit=3)
    assert len(ranked) == 3
    scores = [s for _, s in ranked]
    assert all(s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert catalog.index.names[ranked[0][0]] == "send_message"


def test_rank_among_restricts_to_given_positions(catalog):
    index = catalog.index
    among = [index.position(n) for n in catalog.tools_in("slack")]
    ranked = index.rank("weather and slack messages", among=among)
    assert ranked
    assert {i for i, _ in ranked} <= set(among)
    assert index.rank("weather", among=[]) == []


def test_rank_unrelated_query_returns_nothing(catalog):
    assert catalog.index.rank_names("zqxjvk") == []
    assert catalog.index.rank_names("") == []


def test_rank_is_deterministic_and_ties_follow_catalog_order():
    index = ToolIndex([("beta_tool", "same words", ()), ("alpha_tool", "same words", ())])
    assert [n for n, _ in index.rank_names("same words")] == ["beta_tool", "alpha_tool"]
    assert index.rank_names("same words") == index.rank_names("same words")


def test_rank_uses_argument_names(catalog):
    ranked = [n for n, _ in catalog.index.rank_names("sql")]
    assert ranked == ["run_database_query"]


def test_tokenize_splits_snake_and_camel_case_and_drops_stop_words():
    assert tokenize("getWeather") == tokenize("get_weather") == ["weather"]
    assert tokenize("Send the messages") == ["send", "message"]


def test_regex_search_escape_classes_do_not_make_a_pattern_case_sensitive():
    index = ToolIndex([("notify", "Post to Slack", ()), ("other", "Unrelated", ())])
    # \W and \S are escapes, not upper-case letters: the pattern stays smart-case.
    assert [t["name"] for t in index.regex_search(r"to\Wslack").tools] == ["notify"]
    assert index.regex_search(r"to\Wslack").fuzzy is False
    # An upper-case letter still makes the pattern case sensitive: no regex match.
    assert index.regex_search(r"to\WSLACK").fuzzy is True


def test_clauses_split_a_multi_task_request_and_keep_a_one_task_query_whole():
    request = "Find flights to Rome. Then book a hotel near the station, lastly rent a car"
    assert clauses(request) == [
        "Find flights to Rome",
        "book a hotel near the station",
        "rent a car",
    ]
    assert clauses("weather in Paris") == ["weather in Paris"]
    assert clauses("hi") == []


# Seven tools of Seal-Tools (Apache-2.0), the request one of its queries: three tasks.
_SPACE_TOOLS = [
    ("getMartianWeather", "Retrieve current weather information on Mars", ["sol", "unit"]),
    ("getAircraftAltitude", "Retrieve the current altitude of an aircraft", ["aircraft_id"]),
    ("getAltitude", "Retrieve the current altitude information of an aircraft", ["aircraft_id"]),
    ("getSpaceMissions", "Retrieve information about space missions", ["agency", "year"]),
    ("getAircraftPosition", "Retrieve the current position of an aircraft", ["altitude"]),
    ("getMissionDetails", "Retrieve details of a space mission", ["mission_id"]),
    ("checkEthicalConduct", "Check if a specific conduct is ethically acceptable", ["conduct"]),
]


def test_rank_gives_each_task_of_a_multi_task_request_its_best_tool():
    request = (
        "Please retrieve the current weather information on Mars for the 64th sol. After that, "
        "check for any space missions conducted by NASA. Finally, retrieve the current "
        "altitude of aircraft A1234."
    )
    index = ToolIndex(_SPACE_TOOLS)
    best_of_each_task = {index.names[int(index.bm25_scores(c).argmax())] for c in clauses(request)}
    assert best_of_each_task == {"getMartianWeather", "checkEthicalConduct", "getAircraftAltitude"}
    # Each clause counts by its strength (CLAUSE_STRENGTH_POWER): the aircraft task, the
    # weakest match, gets its best tool into the top 4 beside getAltitude.
    assert best_of_each_task <= {name for name, _ in index.rank_names(request, limit=4)}
    # The whole request's BM25 alone puts getAltitude (the weather task's "retrieve the
    # current ... information" plus "altitude") and getSpaceMissions ahead of it.
    whole = ToolIndex(_SPACE_TOOLS, split_clauses=False)
    assert "getAircraftAltitude" not in {name for name, _ in whole.rank_names(request, limit=4)}


def test_a_clause_counts_by_how_well_it_matches():
    tools = [
        ("get_weather_forecast", "Weather forecast for a city for the coming days.", ["city"]),
        ("get_weather_alerts", "Weather alerts for a city.", ["city"]),
        (
            "book_hotel",
            "Book a hotel room in a city for given dates, for a business or holiday trip, "
            "alone or with the family.",
            ["city", "dates"],
        ),
        ("convert_currency", "Convert an amount between currencies.", ["amount"]),
    ]
    request = "Get the weather forecast for Lima. It's for a family trip."
    index = ToolIndex(tools)
    strong, weak = (float(index.bm25_scores(c).max()) for c in clauses(request))
    assert 0 < weak < strong
    full = index.bm25_scores(request)
    top, hotel = float(full.max()), index.names.index("book_hotel")
    # the weak clause's best tool: its clause's share of the strongest clause, to the power,
    # not a full 1 as if the framing of the request were a task of its own
    share = (weak / strong) ** CLAUSE_STRENGTH_POWER
    expected = (share + FULL_QUERY_WEIGHT * float(full[hotel]) / top) * top
    assert index.scores(request)[hotel] == pytest.approx(expected / (1 + FULL_QUERY_WEIGHT))
    assert share < 1.0


def test_a_descriptions_first_sentence_counts_more_than_the_rest():
    # The same words, in the first sentence of one and after it in the other.
    tools = [
        ("a_tool", "Record a thought.\n\nUse it for the weather of a city.", ["x"]),
        ("b_tool", "Weather of a city.\n\nRecord a thought.", ["x"]),
    ]
    assert [name for name, _ in ToolIndex(tools).rank_names("weather")] == ["b_tool", "a_tool"]
    assert lead_sentence("Weather of a city. Use it first.\nIMPORTANT: ...") == (
        "Weather of a city.",
        "Use it first.\nIMPORTANT: ...",
    )
    assert lead_sentence("Forecast\n\nfor the coming days") == ("Forecast", "for the coming days")
    assert lead_sentence("Sales tax of a U.S. address, e.g. a shop. Call it once.") == (
        "Sales tax of a U.S. address, e.g. a shop.",
        "Call it once.",
    )
    assert lead_sentence("Fetch a page, i.e.\n\nits HTML") == ("Fetch a page, i.e.", "its HTML")


def test_the_framing_of_a_request_is_no_search_term():
    assert tokenize("Hey, thanks! I really need help with the weather for the next days") == [
        "weather",
        "day",
    ]


_TOLD_APART_BY_STOP_WORDS = [
    ("browser_zoom_in", "Zoom in on the page.", ()),
    ("browser_zoom_out", "Zoom out of the page.", ()),
    ("sign_in", "Sign in to the account.", ()),
    ("sign_out", "Sign out of the account.", ()),
    ("get_weather", "Current weather for a city.", ["city"]),
    ("fetch_forecast", "The weather forecast for the days ahead.", ["city"]),
]


@pytest.mark.parametrize(
    ("request_text", "wanted"),
    [
        ("zoom out", "browser_zoom_out"),
        ("please zoom in a bit", "browser_zoom_in"),
        ("browser_zoom_out", "browser_zoom_out"),
        ("zoomIn", "browser_zoom_in"),
        ("Sign out of my account", "sign_out"),
        ("I want to sign in to my account", "sign_in"),
        ("please sign me out", "sign_out"),
        ("zoom the page out", "browser_zoom_out"),
    ],
)
def test_tools_whose_names_differ_only_in_a_stop_word_are_told_apart(request_text, wanted):
    """``tokenize`` drops "in", "out", "up"...: ``zoom_in`` and ``zoom_out`` indexed alike,
    so "zoom out" tied them and catalog order picked ``zoom_in``."""
    index = ToolIndex(_TOLD_APART_BY_STOP_WORDS)
    ranked = index.rank_names(request_text)
    assert ranked[0][0] == wanted
    assert ranked[0][1] > ranked[1][1]


def test_stop_words_still_say_nothing_about_names_that_differ_in_more():
    """Only names that differ in nothing but stop words get the pairs: "get weather" credits
    no ``get_*`` tool more than "weather" does."""
    index = ToolIndex(_TOLD_APART_BY_STOP_WORDS)
    assert index.scores("get weather").tolist() == index.scores("weather").tolist()
    plain = ToolIndex([d for d in _TOLD_APART_BY_STOP_WORDS if "_in" not in d[0]])
    assert plain.scores("zoom out now").tolist() == plain.scores("zoom now").tolist()


def test_two_stop_words_make_no_pair():
    """``crm_look_up_user`` and ``crm_get_user`` differ only in stop words, but "look up" is
    framing the stop list leaves out: it must not lift the CRM tool above the weather one."""
    index = ToolIndex(
        [
            ("crm_get_user", "A CRM user record.", ["user_id"]),
            ("crm_look_up_user", "Find a CRM user record.", ["user_id"]),
            ("get_weather", "Current weather forecast for a city.", ["city"]),
        ]
    )
    assert index.rank_names("Can you look up the weather forecast for Paris")[0][0] == (
        "get_weather"
    )
    assert index.scores("look up the weather").tolist() == index.scores("the weather").tolist()


def test_rank_of_a_one_task_query_is_its_plain_bm25():
    index = ToolIndex(_SPACE_TOOLS)
    query = "current altitude of aircraft A1234"
    assert index.scores(query).tolist() == index.bm25_scores(query).tolist()


# --- memory: caches are bounded and owned by the index -----------------------------------


def _used_index(i: int) -> ToolIndex:
    index = ToolIndex(
        [(f"get_weather_{i}", "Current weather for a city", ["city"]), ("send_msg", "Chat", ())]
    )
    index.rank("wether forcast")  # fills the close-spelling cache
    index.regex_search("zzz sendd mesage")  # no regex match: fills the fuzzy fallback's cache
    return index


def test_discarded_indexes_are_garbage_collected():
    refs = [weakref.ref(_used_index(i)) for i in range(300)]
    gc.collect()
    assert sum(ref() is not None for ref in refs) == 0


def test_index_caches_are_per_index_and_bounded():
    first, second = _used_index(1), _used_index(2)
    assert first._expand_cached is not second._expand_cached
    assert first._expand_cached.cache_info().maxsize == EXPAND_CACHE_SIZE
    assert first._fuzzy._word_scores_cached.cache_info().maxsize == WORD_SCORES_CACHE_SIZE
    # A term longer than MAX_CACHED_TEXT is answered, not cached.
    before = first._expand_cached.cache_info().currsize
    assert first.rank_names("w" * (MAX_CACHED_TEXT + 1)) == []
    assert first._expand_cached.cache_info().currsize == before


def test_the_fuzzy_index_is_built_once_when_threads_ask_at_once(monkeypatch):
    """A sync server's threads reach a cold index together: one build, every thread served
    by it (``functools.cached_property`` has no lock on Python 3.12+)."""
    from langgraph_toolbudget.core import search

    built: list[int] = []

    class SlowMatcher(search.FuzzyMatcher):
        def __init__(self, *args, **kwargs):
            built.append(1)
            time.sleep(0.05)  # a large catalog's build: the other threads arrive meanwhile
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(search, "FuzzyMatcher", SlowMatcher)
    index = ToolIndex([(f"get_weather_{i}", "Current weather", ["city"]) for i in range(50)])
    start = threading.Barrier(8)
    found: list[list[int]] = []

    def ask() -> None:
        start.wait()
        found.append(index.fuzzy_search("wether"))

    workers = [threading.Thread(target=ask) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(built) == 1
    assert len(found) == 8 and all(hits == found[0] and hits for hits in found)
    # On Python 3.11 (CI's) a `functools.cached_property` takes a lock and passes the above;
    # from 3.12 it takes none and builds once per thread: the property must not be one.
    assert not isinstance(inspect.getattr_static(ToolIndex, "_fuzzy"), functools.cached_property)
    copy.deepcopy(index)  # and an index with its fuzzy fallback still copies (no lock in it)


def test_long_messages_are_kept_only_while_recent_so_memory_stays_flat():
    cache = _split_short_words
    cache.cache_clear()
    _split_recent_texts.cache_clear()
    pasted = (
        "x" * 19_000
    )  # a 19 KB paste, under the ranked part's cap: cheap to split, costly to keep
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for i in range(250):  # all kept, they would take 5 MB
            assert _split_words(f"message {i}: {pasted}")[:2] == ("message", str(i))
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert cache.cache_info().currsize == 0
    assert _split_recent_texts.cache_info().currsize == RECENT_TEXTS  # only the last ones
    assert grown < 1024 * 1024, f"{grown / 2**20:.1f} MiB kept after 250 messages of 20 KB"
    assert tokenize("Message 7: please show the weather in Lima " * 600)[:3] == [
        "message",
        "7",
        "show",
    ]
    # Short texts (tool names, words) are still cached, up to SPLIT_CACHE_SIZE of them.
    tokenize("get_weather")
    assert cache.cache_info().currsize == 1
    assert cache.cache_info().maxsize == SPLIT_CACHE_SIZE


def _film_tool(name: str, description: str, output_schema: dict | None = None) -> StructuredTool:
    return StructuredTool.from_function(
        func=lambda film: "ok",
        name=name,
        description=description,
        args_schema={
            "type": "object",
            "properties": {"film": {"type": "string", "description": "The film's title"}},
        },
        metadata={"output_schema": output_schema} if output_schema else None,
    )


def test_declared_output_fields_are_ranked_not_regex_matched():
    returns = {
        "type": "object",
        "properties": {
            "release_year": {"type": "integer", "description": "When it came out"},
            "director": {"type": "string"},
            "plot": {"type": "string", "description": "A summary of the story"},
        },
    }
    catalog = ToolCatalog.from_tools(
        [
            _film_tool("get_film_awards", "Awards a film won and the year of each"),
            _film_tool("get_film_info", "Information about a film", returns),
            _film_tool("get_actor", "An actor's films", {"properties": {"result": {}}}),
        ]
    )
    assert catalog.get("get_film_info").output_fields == (
        "release_year When it came out",
        "director",
        "plot A summary of the story",
    )
    assert catalog.get("get_actor").output_fields == ()  # a wrapped plain return value
    ranked = catalog.index.rank_names("the director, release year and plot of Inception")
    assert ranked[0][0] == "get_film_info"
    assert catalog.index.regex_search("director").found == 0  # the regex sees name/description/args


def test_an_output_schema_can_be_declared_from_outside_the_tool():
    returns = {"type": "object", "properties": {"director": {}, "plot": {"description": "Story"}}}
    tools = [_film_tool("get_film_info", "Information about a film"), _film_tool("get_actor", "")]
    declared = {"get_film_info": {"output_schema": returns}}
    catalog = ToolCatalog.from_tools(tools, tool_metadata=declared)
    assert catalog.get("get_film_info").output_fields == ("director", "plot Story")
    assert catalog.index.rank_names("the director and plot of Inception")[0][0] == "get_film_info"
    # with_metadata changes it, and None declares none
    changed = catalog.with_metadata(get_film_info={"output_schema": None})
    assert changed.get("get_film_info").output_fields == ()
    with pytest.raises(TypeError, match="output_schema"):
        ToolCatalog.from_tools(tools, tool_metadata={"get_actor": {"output_schema": "a film"}})


def test_clause_leaders_are_the_best_tools_of_each_clause():
    docs = [
        ("get_weather", "Get the weather forecast for a city", ["city"]),
        ("book_hotel", "Book a hotel room", ["city", "nights"]),
        ("send_email", "Send an email", ["to", "body"]),
    ]
    index = ToolIndex(docs)
    two = "Get the weather forecast for Rome. Then book a hotel room for two nights"
    assert {index.names[p] for p in index.clause_leaders(two)} == {"get_weather", "book_hotel"}
    assert index.clause_leaders("what's the weather in Rome") is None  # one clause
    assert ToolIndex(docs, split_clauses=False).clause_leaders(two) is None
    assert ToolIndex([]).clause_leaders(two) is None


@pytest.mark.parametrize(
    ("sentence", "wanted"),
    [
        ("can you create an issue in the github repository", "create_issue"),
        ("I need a tool that tells me the weather forecast for tomorrow", "weather_forecast"),
        ("please send a message to the team channel", "send_message"),
    ],
)
def test_a_search_written_as_a_sentence_is_ranked_as_a_request(sentence, wanted):
    # Small models search in sentences: the fuzzy match averaged over every word, filler
    # included, and found nothing or long descriptions' tools.
    result = build_example_catalog().index.regex_search(sentence)
    assert result.fuzzy and result.error is None
    assert _names(result)[0] == wanted and len(result.tools) <= 5


def test_a_short_search_that_matches_nothing_keeps_the_fuzzy_match():
    result = build_example_catalog().index.regex_search("send msg")
    assert result.fuzzy and _names(result)[0] == "send_message"


def test_a_sentence_search_ranks_only_the_tools_the_thread_may_load():
    # The ranking's top 5 were cut before the excluded tools were left out: excluded GitHub
    # tools filling them made the answer "every tool matching is excluded", with loadable
    # tools matching too.
    index = build_example_catalog().index
    github = {n for n in index.names if "issue" in n or "pull_request" in n}
    sentence = "I need to comment on the issue and close the pull request and create a task"
    result = index.regex_search(sentence, exclude=github)
    assert result.tools and not set(_names(result)) & github
    assert "excluded" not in result.message


def test_a_long_invented_search_looks_up_a_few_close_spellings():
    # The sentence ranking looked up close spellings of every unknown word (~1 ms each on a
    # large vocabulary): a 2,000-character invented pattern took a tenth of a second.
    index = build_example_catalog().index
    words = " ".join(f"zq{i}xv{i * 7}wk" for i in range(300))
    for pattern in (words, words[:400]):
        index._expand_cached.cache_clear()
        index.regex_search(pattern)
        assert index._expand_cached.cache_info().misses == MAX_SENTENCE_SPELLINGS


def test_a_sentence_search_tolerates_typos():
    # Ranked on its words as written only, "isues" and "repositry" counted for nothing: one
    # well-spelled generic word ("list") chose the tools.
    index = build_example_catalog().index
    assert _names(index.regex_search("list all the isues in the repositry"))[0] == "list_issues"
    assert "search_email" in _names(index.regex_search("I want to serch my emial inbox"))


def test_the_fuzzy_match_is_cut_after_the_excluded_tools_are_left_out():
    # Six excluded CRM tools filled the fuzzy top 5: the answer said every match was
    # excluded, with a loadable tool matching just below.
    def tool(name: str, description: str) -> StructuredTool:
        return StructuredTool.from_function(lambda x="": name, name=name, description=description)

    crm = [tool(f"crm_invoice_{k}", f"Invoice tool {k} of the CRM.") for k in "abcdef"]
    books = [tool("books_invoice_export", "Export an invoice from the books.")]
    index = ToolCatalog.from_tools([*crm, *books]).index
    result = index.regex_search("invoise", exclude={t.name for t in crm})
    assert _names(result) == ["books_invoice_export"] and "excluded" not in result.message
