"""catalog.py: metadata, defaults, validation errors, filters, include modes and the index."""

from __future__ import annotations

import gc
import inspect
import re
import textwrap
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.tools import tool

from langgraph_toolbudget import ToolCatalog
from langgraph_toolbudget.core.derived import ENTRY_NAMES
from langgraph_toolbudget.core.intent import classify_lexical
from langgraph_toolbudget.core.search import ToolIndex
from langgraph_toolbudget.core.selection import search_hits, select_tools
from langgraph_toolbudget.core.semantic import HashingEmbeddings, HybridScorer
from langgraph_toolbudget.core.usage import promotable
from langgraph_toolbudget.testing import ScriptedChatModel


def _by_name(tools, name):
    return next(t for t in tools if t.name == name)


# --- shape -------------------------------------------------------------------------------


def test_catalog_lists_categories_tools_and_descriptions(
    catalog, categories, category_descriptions
):
    assert set(catalog.categories) == set(categories)
    assert len(catalog) == 31
    assert catalog.tools_in("weather") == ["get_weather", "weather_forecast", "get_air_quality"]
    assert catalog.category_descriptions == category_descriptions
    assert catalog.tools_in("no_such_category") == []


def test_catalog_tool_may_sit_in_several_categories(catalog):
    assert set(catalog.get("get_file_contents").categories) == {"github", "files"}
    assert "get_file_contents" in catalog.tools_in("github")
    assert "get_file_contents" in catalog.tools_in("files")
    assert catalog.tool_names.count("get_file_contents") == 1


def test_catalog_without_category_mapping_uses_server_as_category(tools):
    catalog = ToolCatalog.from_tools(tools)
    assert set(catalog.categories) == {
        "github",
        "slack",
        "weather",
        "files",
        "database",
        "projects",
    }
    assert catalog.get("send_message").categories == ("slack",)
    # ask_human has no server and no category.
    assert catalog.get("ask_human").categories == ()
    assert "ask_human" in catalog


def test_catalog_tools_returns_the_real_runnable_tools(catalog):
    (weather,) = catalog.tools(["get_weather", "not_a_tool"])
    assert weather.invoke({"city": "Lima"}) == "Lima: 22C, sunny"


def test_catalog_spec_records_argument_names(catalog):
    assert catalog.get("create_issue").arg_names == ("repo", "title", "body")
    assert catalog.get("list_tables").arg_names == ()


# --- metadata ----------------------------------------------------------------------------


def test_catalog_metadata_defaults(catalog):
    spec = catalog.get("create_issue")
    assert spec.is_pure is False
    assert spec.concurrency_group == "default"
    assert spec.max_concurrency is None  # not set: max_parallel bounds pure calls
    assert spec.timeout_s is None
    assert spec.enabled is True
    assert spec.include == "agent"
    assert spec.server == "github"


def test_catalog_reads_metadata_from_the_tools_own_metadata_dict(tools, categories):
    weather = _by_name(tools, "get_weather")
    weather.metadata = {
        "server": "weather",
        "is_pure": True,
        "concurrency_group": "weather-api",
        "max_concurrency": 4,
        "timeout_s": 2.5,
    }
    spec = ToolCatalog.from_tools(tools, categories=categories).get("get_weather")
    assert spec.is_pure is True
    assert spec.concurrency_group == "weather-api"
    assert spec.max_concurrency == 4
    assert spec.timeout_s == 2.5


def test_catalog_tool_metadata_overrides_the_tools_own_metadata(tools, categories):
    _by_name(tools, "create_issue").metadata = {"server": "github", "timeout_s": 5, "is_pure": True}
    catalog = ToolCatalog.from_tools(
        tools, categories=categories, tool_metadata={"create_issue": {"timeout_s": 10}}
    )
    spec = catalog.get("create_issue")
    assert spec.timeout_s == 10
    assert spec.is_pure is True  # not overridden: kept from the tool's own metadata
    assert spec.server == "github"


def test_catalog_leaves_other_keys_of_a_tools_own_metadata_alone(tools, categories):
    mcp_metadata = {
        "server": "github",
        "title": "Create issue",
        "readOnlyHint": False,
        "destructiveHint": False,
        "_meta": {"vendor": {"x": 1}},
    }
    _by_name(tools, "create_issue").metadata = dict(mcp_metadata)
    catalog = ToolCatalog.from_tools(tools, categories=categories)
    spec = catalog.get("create_issue")
    assert spec.server == "github"
    assert spec.tool.metadata == mcp_metadata


@pytest.mark.parametrize("key", ["timeout", "serverName", "readOnlyHint"])
def test_catalog_tool_metadata_unknown_key_raises_naming_tool_and_key(tools, categories, key):
    with pytest.raises(ValueError) as err:
        ToolCatalog.from_tools(
            tools, categories=categories, tool_metadata={"create_issue": {key: 1}}
        )
    assert "create_issue" in str(err.value)
    assert repr(key) in str(err.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_concurrency", "3"),
        ("max_concurrency", True),
        ("is_pure", "yes"),
        ("timeout_s", "10"),
        ("timeout_s", True),
        ("enabled", 1),
        ("concurrency_group", 7),
        ("server", ["github"]),
    ],
)
def test_catalog_tool_metadata_wrong_type_raises_naming_tool_and_key(tools, categories, key, value):
    with pytest.raises(TypeError) as err:
        ToolCatalog.from_tools(
            tools, categories=categories, tool_metadata={"get_weather": {key: value}}
        )
    assert "get_weather" in str(err.value)
    assert repr(key) in str(err.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [("include", "sometimes"), ("max_concurrency", 0), ("timeout_s", 0), ("timeout_s", -1.5)],
)
def test_catalog_tool_metadata_bad_value_raises_naming_tool_and_key(tools, categories, key, value):
    with pytest.raises(ValueError) as err:
        ToolCatalog.from_tools(
            tools, categories=categories, tool_metadata={"get_weather": {key: value}}
        )
    assert "get_weather" in str(err.value)
    assert repr(key) in str(err.value)


def test_catalog_tool_metadata_for_unknown_tool_raises_naming_it(tools, categories):
    with pytest.raises(ValueError, match="create_isue"):
        ToolCatalog.from_tools(
            tools, categories=categories, tool_metadata={"create_isue": {"timeout_s": 1}}
        )


def test_catalog_accepts_integer_timeout(tools, categories):
    catalog = ToolCatalog.from_tools(
        tools, categories=categories, tool_metadata={"get_weather": {"timeout_s": 3}}
    )
    assert catalog.get("get_weather").timeout_s == 3


# --- validation of names -----------------------------------------------------------------


def test_catalog_duplicate_tool_names_raise_naming_them(tools):
    @tool("get_weather")
    def other_weather(city: str) -> str:
        """Another weather tool with the same name."""
        return city

    with pytest.raises(ValueError) as err:
        ToolCatalog.from_tools([*tools, other_weather])
    assert "get_weather" in str(err.value)
    assert "duplicate" in str(err.value)


def test_catalog_category_naming_unknown_tools_raises_naming_them(tools, categories):
    categories["github"] = [*categories["github"], "close_issue", "reopen_issue"]
    with pytest.raises(ValueError) as err:
        ToolCatalog.from_tools(tools, categories=categories)
    message = str(err.value)
    assert "close_issue" in message
    assert "reopen_issue" in message
    assert "github" in message


def test_catalog_category_given_as_string_raises(tools):
    with pytest.raises(TypeError, match="weather"):
        ToolCatalog.from_tools(tools, categories={"weather": "get_weather"})


def test_catalog_description_of_unknown_category_raises(tools, categories):
    with pytest.raises(ValueError, match="astrology"):
        ToolCatalog.from_tools(
            tools, categories=categories, category_descriptions={"astrology": "stars"}
        )


def test_a_described_category_without_tools_is_said_to_have_none(tools, categories):
    given = {**categories, "later": []}
    assert "later" not in ToolCatalog.from_tools(tools, categories=given).categories
    with pytest.raises(ValueError) as error:
        ToolCatalog.from_tools(
            tools,
            categories=given,
            category_descriptions={"later": "coming soon", "astrology": "stars"},
        )
    message = str(error.value)
    assert message.startswith(
        "category_descriptions describes ['later'], to which categories gives no tools"
    )
    assert "categories={'later': ['some_tool', ...]}" in message
    assert "names ['astrology'], which are not categories of this catalog" in message
    assert "['later'], which are not" not in message


# --- plain functions, as LangGraph's ToolNode takes them ------------------------------


def convert_celsius(celsius: float) -> float:
    """Convert a temperature from degrees Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


async def fetch_headlines(topic: str) -> list[str]:
    """Fetch today's news headlines about a topic."""
    return [f"{topic}: all quiet"]


def no_docstring(x: int) -> int:
    return x


async def test_catalog_from_tools_accepts_plain_functions_beside_tools(tools, categories):
    catalog = ToolCatalog.from_tools(
        [*tools, convert_celsius, fetch_headlines],
        categories={**categories, "units": ["convert_celsius"], "news": ["fetch_headlines"]},
        tool_metadata={"convert_celsius": {"is_pure": True}},
    )
    spec = catalog.get("convert_celsius")
    assert spec.is_pure is True
    assert spec.description.startswith("Convert a temperature")
    assert spec.arg_names == ("celsius",)
    assert catalog.tools(["convert_celsius"])[0].invoke({"celsius": 100}) == 212
    assert await catalog.tools(["fetch_headlines"])[0].ainvoke({"topic": "rain"}) == [
        "rain: all quiet"
    ]
    assert catalog.index.rank_names("fahrenheit", limit=1)[0][0] == "convert_celsius"
    assert ToolCatalog.from_tools([convert_celsius]).tool_names == ["convert_celsius"]


@pytest.mark.parametrize(
    ("item", "kind"),
    [(5, "(int)"), ("get_weather", "(str)"), ({"name": "x"}, "(dict)"), (ToolIndex, "class")],
)
def test_catalog_item_neither_tool_nor_function_raises_naming_position_and_type(tools, item, kind):
    with pytest.raises(TypeError) as err:
        ToolCatalog.from_tools([tools[0], tools[1], item])
    assert "tools[2]" in str(err.value)
    assert kind in str(err.value)


def test_catalog_function_without_docstring_raises_naming_it(tools):
    with pytest.raises(ValueError) as err:
        ToolCatalog.from_tools([tools[0], no_docstring])
    message = str(err.value)
    assert "tools[1] (no_docstring)" in message
    assert "docstring" in message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "None (NoneType)"),
        (5, "5 (int)"),
        ("get_weather", "'get_weather' (str)"),
        ({"get_weather": 1}, "a dict of 1 item. For a dict of name -> tool"),
        (convert_celsius, "Pass [tool] for one tool."),
    ],
)
def test_catalog_tools_not_a_list_raises_type_error(value, expected):
    with pytest.raises(TypeError) as err:
        ToolCatalog.from_tools(value)
    assert str(err.value).startswith("tools must be a list of LangChain tools")
    assert expected in str(err.value)


def test_catalog_single_tool_instead_of_a_list_raises_saying_wrap_it(tools):
    with pytest.raises(TypeError, match=re.escape("Pass [tool] for one tool.")):
        ToolCatalog.from_tools(tools[0])


# --- unknown names: the closest real ones are suggested --------------------------------


def test_catalog_category_naming_a_missing_tool_suggests_the_closest_names(tools, categories):
    categories["github"] = [*categories["github"], "create_isue"]
    with pytest.raises(ValueError) as err:
        ToolCatalog.from_tools(tools, categories=categories)
    message = str(err.value)
    assert "Closest tools: 'create_isue' -> 'create_issue'," in message
    assert "add_issue_comment" not in message  # not the first names alphabetically


def test_catalog_tool_metadata_naming_a_missing_tool_suggests_the_closest_names(tools):
    with pytest.raises(ValueError) as err:
        ToolCatalog.from_tools(tools, tool_metadata={"send_mesage": {"timeout_s": 1}})
    assert "tool_metadata names ['send_mesage']" in str(err.value)
    assert "'send_mesage' -> 'send_message'," in str(err.value)


def test_catalog_server_defaults_naming_a_missing_server_suggests_the_closest_names(tools):
    with pytest.raises(ValueError) as err:
        ToolCatalog.from_tools(tools, server_defaults={"slak": {"include": "manual"}})
    assert "server_defaults names ['slak']" in str(err.value)
    assert "'slak' -> 'slack'," in str(err.value)
    filtered = ToolCatalog.from_tools(
        tools, server_defaults={"slack": {"include": "manual"}}, allowed_servers=["weather"]
    )
    assert "send_message" not in filtered, "a server filtered out is still a server"
    serverless = [t.model_copy(update={"metadata": {}}) for t in tools]
    with pytest.raises(ValueError, match="no tool has a server"):
        ToolCatalog.from_tools(serverless, server_defaults={"slack": {"include": "manual"}})


def test_catalog_with_metadata_naming_a_missing_tool_suggests_the_closest_names(make_catalog):
    catalog = make_catalog(allowed_servers=["weather"])
    with pytest.raises(ValueError) as err:
        catalog.with_metadata(weather_forcast={"enabled": False}, send_message={"enabled": False})
    message = str(err.value)
    assert "'weather_forcast' -> 'weather_forecast'," in message
    assert "'send_message' was removed by the catalog's allowed_servers/allowed_tools" in message


# --- argument types: checked up front, the argument named -----------------------------


_RAW_ERRORS = ("object is not iterable", "not supported between", "bytes-like", "has no attribute")


@pytest.mark.parametrize(
    ("kwargs", "error", "expected"),
    [
        (
            {"categories": {1: ["get_weather"]}},
            TypeError,
            "categories keys must be category names (strings), got 1 (int)",
        ),
        ({"categories": [("weather", ["get_weather"])]}, TypeError, "categories must be a mapping"),
        (
            {"categories": {"weather": 5}},
            TypeError,
            "categories['weather'] must be a list of tool names, got 5 (int)",
        ),
        (
            {"categories": {"weather": "get_weather"}},
            TypeError,
            "Pass ['get_weather'] for one.",
        ),
        (
            {"categories": {"weather": ["get_weather", 7]}},
            TypeError,
            "categories['weather'] holds 7 (int): tool names are strings",
        ),
        (
            {"category_descriptions": {"weather": 5}},
            TypeError,
            "category_descriptions['weather'] must be a string, got 5 (int)",
        ),
        (
            {"category_descriptions": {3: "Weather"}},
            TypeError,
            "category_descriptions keys must be category names (strings), got 3 (int)",
        ),
        (
            {"category_descriptions": "Weather"},
            TypeError,
            "category_descriptions must be a mapping of category name -> description",
        ),
        (
            {"default_include": "bogus"},
            ValueError,
            "default_include must be one of ('always', 'manual', 'agent'), got 'bogus' (str)",
        ),
        (
            {"allowed_servers": "ab"},
            TypeError,
            "allowed_servers must be a list of server names, got 'ab' (str). Pass ['ab'] for one.",
        ),
        (
            {"allowed_tools": "ab"},
            TypeError,
            "allowed_tools must be a list of tool names or patterns, got 'ab' (str). "
            "Pass ['ab'] for one.",
        ),
        ({"allowed_servers": 5}, TypeError, "allowed_servers must be a list of server names"),
        (
            {"allowed_tools": ["get_weather", 5]},
            TypeError,
            "allowed_tools[1] must be a string (tool names or patterns), got 5 (int)",
        ),
        ({"tool_metadata": ["get_weather"]}, TypeError, "tool_metadata must be a mapping"),
        (
            {"tool_metadata": {"get_weather": 5}},
            TypeError,
            "tool_metadata['get_weather'] must be a mapping of metadata key -> value, got 5",
        ),
        (
            {"tool_metadata": {5: {"enabled": False}}},
            TypeError,
            "tool_metadata keys must be tool names (strings), got 5 (int)",
        ),
        (
            {"server_defaults": {"github": "manual"}},
            TypeError,
            "server_defaults['github'] must be a mapping of metadata key -> value",
        ),
        (
            {"server_defaults": {"github": {"max_concurrency": True}}},
            TypeError,
            "metadata key 'max_concurrency' must be int, got True",
        ),
    ],
)
def test_catalog_argument_of_the_wrong_type_raises_naming_it(tools, kwargs, error, expected):
    with pytest.raises(error) as err:
        ToolCatalog.from_tools(tools, **kwargs)
    message = str(err.value)
    assert expected in message
    assert not any(raw in message for raw in _RAW_ERRORS)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_catalog_timeout_must_be_finite(tools, catalog, value):
    with pytest.raises(ValueError) as err:
        ToolCatalog.from_tools(tools, tool_metadata={"get_weather": {"timeout_s": value}})
    assert "'timeout_s' must be a finite number of seconds" in str(err.value)
    with pytest.raises(ValueError, match="finite"):
        catalog.with_metadata(get_weather={"timeout_s": value})


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"max_concurrency": True}, "metadata key 'max_concurrency' must be int, got True"),
        ({"timeout_s": False}, "metadata key 'timeout_s' must be int or float or None"),
    ],
)
def test_catalog_bool_is_not_a_number_in_metadata(catalog, changes, expected):
    with pytest.raises(TypeError, match=re.escape(expected)):
        catalog.with_metadata(get_weather=changes)


def test_catalog_with_metadata_changes_not_a_mapping_raise_naming_the_tool(catalog):
    with pytest.raises(TypeError) as err:
        catalog.with_metadata(get_weather=False)
    assert "with_metadata(get_weather=...) must be a mapping of metadata key -> value" in str(
        err.value
    )


# --- include modes and server defaults ---------------------------------------------------


def test_catalog_include_modes_always_manual_agent(make_catalog):
    catalog = make_catalog(
        tool_metadata={
            "get_weather": {"include": "always"},
            "weather_forecast": {"include": "manual"},
        }
    )
    assert "get_weather" in catalog.always_visible
    assert catalog.selectable("get_air_quality") is True
    assert catalog.selectable("get_weather") is False  # visible anyway, not chosen by budget
    assert catalog.selectable("weather_forecast") is False
    # manual: never chosen automatically, whatever the query says
    query = "weather forecast for the next days"
    assert "weather_forecast" not in select_tools(catalog, query, ["weather"], max_tools=8)
    assert "weather_forecast" not in search_hits(catalog, query, limit=10)
    # ...but still in the catalog, for add_tool
    assert "weather_forecast" in catalog


def test_catalog_special_category_tools_are_always_visible(catalog):
    assert catalog.always_visible == ["ask_human"]
    assert catalog.get("ask_human").always_visible is True


def test_catalog_server_default_include_is_overridden_by_tool_level(make_catalog):
    catalog = make_catalog(
        server_defaults={"github": {"include": "manual"}},
        tool_metadata={"create_issue": {"include": "agent"}},
    )
    assert catalog.get("create_issue").include == "agent"
    assert catalog.get("list_issues").include == "manual"
    assert catalog.get("send_message").include == "agent"


def test_catalog_tools_own_metadata_overrides_server_default(tools, categories):
    _by_name(tools, "list_issues").metadata = {"server": "github", "include": "always"}
    catalog = ToolCatalog.from_tools(
        tools, categories=categories, server_defaults={"github": {"include": "manual"}}
    )
    assert catalog.get("list_issues").include == "always"
    assert catalog.get("create_issue").include == "manual"


def test_catalog_default_include_applies_when_nothing_sets_one(make_catalog):
    catalog = make_catalog(default_include="manual")
    assert all(catalog.get(n).include == "manual" for n in catalog.tool_names)


# --- disabled tools ----------------------------------------------------------------------


def test_catalog_disabled_tool_is_listed_nowhere(make_catalog):
    catalog = make_catalog(tool_metadata={"get_weather": {"enabled": False}})
    assert "get_weather" not in catalog
    assert "get_weather" not in catalog.tool_names
    assert "get_weather" not in catalog.tools_in("weather")
    assert catalog.is_disabled("get_weather")
    assert catalog.get("get_weather") is not None
    assert catalog.tools(["get_weather"]) == []
    names = [t["name"] for t in catalog.index.regex_search("weather").tools]
    assert "get_weather" not in names
    assert "get_weather" not in select_tools(catalog, "weather in Paris", ["weather"])


def test_catalog_with_metadata_returns_a_changed_copy(catalog):
    changed = catalog.with_metadata(get_weather={"enabled": False}, send_message={"timeout_s": 3})
    assert "get_weather" not in changed
    assert changed.get("send_message").timeout_s == 3
    assert "get_weather" in catalog  # the original is unchanged
    assert catalog.get("send_message").timeout_s is None
    assert changed.index is not catalog.index


def test_catalog_with_metadata_unknown_or_filtered_tool_raises_naming_it(make_catalog):
    catalog = make_catalog(allowed_servers=["weather", "github"])
    with pytest.raises(ValueError, match="get_wether"):
        catalog.with_metadata(get_wether={"enabled": False})
    with pytest.raises(ValueError, match="send_message"):  # filtered out: not in this catalog
        catalog.with_metadata(send_message={"timeout_s": 3})


def test_catalog_with_metadata_validates_keys_and_types(catalog):
    with pytest.raises(ValueError, match="timeout"):
        catalog.with_metadata(get_weather={"timeout": 3})
    with pytest.raises(TypeError, match="max_concurrency"):
        catalog.with_metadata(get_weather={"max_concurrency": "2"})


# --- filters -----------------------------------------------------------------------------


def _assert_absent_everywhere(catalog: ToolCatalog, name: str, query: str) -> None:
    assert name not in catalog
    assert name not in catalog.tool_names
    assert name not in [s.name for s in catalog.specs]
    assert catalog.get(name) is None
    assert catalog.is_filtered(name)
    assert catalog.tools([name]) == []
    assert all(name not in catalog.tools_in(c) for c in catalog.categories)
    assert name not in [t["name"] for t in catalog.index.regex_search(name).tools]
    assert name not in [t["name"] for t in catalog.index.regex_search(query).tools]
    assert name not in [n for n, _ in catalog.index.rank_names(query)]
    assert name not in search_hits(catalog, query, limit=50)
    assert name not in select_tools(catalog, query, catalog.categories, max_tools=50)


def test_catalog_allowed_servers_filters_other_servers_everywhere(make_catalog):
    catalog = make_catalog(allowed_servers=["github", "weather"])
    assert "slack" not in catalog.categories
    assert set(catalog.categories) >= {"github", "weather"}
    _assert_absent_everywhere(catalog, "send_message", "send a slack message")
    _assert_absent_everywhere(catalog, "run_database_query", "database query")
    assert "get_weather" in catalog
    assert "create_issue" in catalog


def test_catalog_allowed_tools_keeps_only_named_tools(make_catalog):
    catalog = make_catalog(allowed_tools=["get_weather", "send_message"])
    assert set(catalog.tool_names) == {"get_weather", "send_message", "ask_human"}
    _assert_absent_everywhere(catalog, "weather_forecast", "weather forecast")


def test_catalog_server_star_pattern_keeps_that_servers_tools(make_catalog, categories):
    catalog = make_catalog(allowed_tools=["slack:*", "files:read_*"])
    assert set(catalog.tool_names) == {*categories["slack"], "read_file", "ask_human"}
    _assert_absent_everywhere(catalog, "write_file", "write a file")


def test_catalog_server_pattern_does_not_admit_another_servers_tool(make_catalog):
    # get_file_contents is github's; "files:*" must not admit it.
    catalog = make_catalog(allowed_tools=["files:*"])
    _assert_absent_everywhere(catalog, "get_file_contents", "file contents")
    assert "read_file" in catalog


def test_catalog_allowed_servers_and_tools_admit_a_tool_if_either_does(make_catalog, categories):
    catalog = make_catalog(allowed_servers=["weather"], allowed_tools=["files:read_file"])
    assert set(catalog.tool_names) == {*categories["weather"], "read_file", "ask_human"}


def test_catalog_special_categories_pass_every_filter(tools, categories):
    @tool
    def final_answer(answer: str) -> str:
        """Return the final structured answer."""
        return answer

    catalog = ToolCatalog.from_tools(
        [*tools, final_answer],
        categories={**categories, "structured_output": ["final_answer"]},
        allowed_servers=["weather"],
    )
    assert "ask_human" in catalog
    assert "final_answer" in catalog
    assert set(catalog.always_visible) == {"ask_human", "final_answer"}


def test_catalog_empty_allowed_servers_keeps_only_special_tools(make_catalog):
    catalog = make_catalog(allowed_servers=[])
    assert catalog.tool_names == ["ask_human"]


# --- the index is built once per catalog -------------------------------------------------


def test_catalog_index_is_built_once_and_not_rebuilt_by_queries(monkeypatch, make_catalog):
    builds: list[int] = []
    original_init = ToolIndex.__init__

    def counting_init(self, *args, **kwargs):
        builds.append(1)
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(ToolIndex, "__init__", counting_init)
    catalog = make_catalog()
    index = catalog.index
    category_index = catalog.category_index
    built = len(builds)
    assert built == 2  # one tool index, one category index

    for query in ["weather in Paris", "create a github issue", "wether", "send msg"]:
        catalog.index.regex_search(query)
        catalog.index.rank(query)
        search_hits(catalog, query)
        select_tools(catalog, query, ["github", "weather"])
        classify_lexical(catalog, query)

    assert len(builds) == built
    assert catalog.index is index
    assert catalog.category_index is category_index


def test_catalog_index_covers_only_enabled_unfiltered_tools(make_catalog):
    catalog = make_catalog(
        allowed_servers=["weather", "slack"], tool_metadata={"add_reaction": {"enabled": False}}
    )
    assert sorted(catalog.index.names) == sorted(catalog.tool_names)
    assert len(catalog.index) == len(catalog)
    assert "add_reaction" not in catalog.index.names


# --- derived data: owned by the catalog, in one object, freed with it ------------------


def _use_everything(catalog: ToolCatalog) -> HashingEmbeddings:
    """Build every kind of derived data: indexes, budget arrays, scorers, tokens, vectors."""
    query = "create a github issue, then send a slack message about the wether"
    catalog.index.regex_search("zzz sendd mesage")
    search_hits(catalog, query)
    search_hits(catalog, query, focus=["github"])  # the distinctive terms' category counts
    select_tools(catalog, query, ["github", "slack"])
    select_tools(catalog, query, ["github"], max_schema_tokens=300)  # counts schema tokens
    classify_lexical(catalog, query)
    promotable(catalog)  # the tools usage may promote
    embeddings = HashingEmbeddings(dim=64)
    HybridScorer(catalog, embeddings).scores(query)
    return embeddings


def test_catalog_derived_data_lives_in_catalog_derived_not_in_its_dict(make_catalog):
    catalog = make_catalog()
    attributes = dict(vars(catalog))
    embeddings = _use_everything(catalog)
    assert vars(catalog) == attributes  # nothing was written into the catalog by other modules
    assert all(catalog.derived.built(name) for name in ENTRY_NAMES)
    assert catalog.derived.embeddings_entries == 1
    del embeddings  # the catalog does not keep the embeddings object, or its vectors
    gc.collect()
    assert catalog.derived.embeddings_entries == 0


def test_catalog_discarded_with_all_its_derived_data_is_garbage_collected(make_catalog):
    refs = []
    for _ in range(5):
        catalog = make_catalog()
        _use_everything(catalog)
        refs.append((weakref.ref(catalog), weakref.ref(catalog.index)))
        del catalog
    gc.collect()
    assert [(c(), i()) for c, i in refs] == [(None, None)] * 5


def test_catalog_index_is_built_once_under_concurrent_first_use(monkeypatch, make_catalog):
    builds: list[int] = []
    original_init = ToolIndex.__init__

    def slow_init(self, *args, **kwargs):
        builds.append(1)
        time.sleep(0.05)
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(ToolIndex, "__init__", slow_init)
    catalog = make_catalog()
    barrier = threading.Barrier(6)
    indexes = []

    def use() -> None:
        barrier.wait()
        indexes.append(catalog.index)

    threads = [threading.Thread(target=use) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1
    assert all(index is indexes[0] for index in indexes)


def test_catalog_derived_clear_frees_and_rebuilds_on_next_use(make_catalog):
    catalog = make_catalog()
    embeddings = _use_everything(catalog)
    index = catalog.index
    catalog.derived.clear()
    assert not any(catalog.derived.built(name) for name in ENTRY_NAMES)
    assert catalog.derived.embeddings_entries == 0
    assert catalog.index is not index
    assert select_tools(catalog, "weather in Lima", ["weather"])[0] == "get_weather"
    assert HybridScorer(catalog, embeddings).catalog_embedded is False  # embedded anew


# --- a list of tools where a catalog belongs ------------------------------------------------


def _entry_points(model: Any) -> dict[str, Callable[[Any], Any]]:
    """Every public entry point taking a catalog, called with ``catalog`` in its place."""
    from langgraph.graph import StateGraph

    from langgraph_toolbudget import (
        CallModel,
        ChooseTools,
        ClassifyIntent,
        SelectTools,
        ToolAgent,
        ToolBudgetInput,
        ToolBudgetMiddleware,
        ToolBudgetState,
        ToolExecutor,
        ToolSearch,
        ToolUsage,
        add_toolbudget_nodes,
        context_summary,
        create_toolbudget_agent,
        exclude_tools,
        include_tools,
        set_include_mode,
        tools_prompt_section,
        tools_to_bind,
    )
    from langgraph_toolbudget.core import context_ops
    from langgraph_toolbudget.explain import explain

    return {
        "ClassifyIntent": lambda c: ClassifyIntent(c),
        "SelectTools": lambda c: SelectTools(c),
        "ToolSearch": lambda c: ToolSearch(c),
        "ChooseTools": lambda c: ChooseTools(c),
        "CallModel": lambda c: CallModel(model, c),
        "ToolExecutor": lambda c: ToolExecutor(c),
        "ToolAgent": lambda c: ToolAgent(model, c),
        "ToolBudgetMiddleware": lambda c: ToolBudgetMiddleware(c),
        "ToolUsage": lambda c: ToolUsage(catalog=c),
        "add_toolbudget_nodes": lambda c: add_toolbudget_nodes(
            StateGraph(ToolBudgetState, input_schema=ToolBudgetInput), model, c
        ),
        "create_toolbudget_agent": lambda c: create_toolbudget_agent(model, c),
        "tools_to_bind": lambda c: tools_to_bind(c, {"messages": []}),
        "tools_prompt_section": lambda c: tools_prompt_section(c),
        "context_summary": lambda c: context_summary(c),
        "include_tools": lambda c: include_tools(tools=["get_weather"], catalog=c),
        "exclude_tools": lambda c: exclude_tools(tools=["get_weather"], catalog=c),
        "set_include_mode": lambda c: set_include_mode("manual", tools=["get_weather"], catalog=c),
        "list_tools": lambda c: context_ops.list_tools(c),
        "get_tool": lambda c: context_ops.get_tool(c, {}, "get_weather"),
        "list_servers": lambda c: context_ops.list_servers(c),
        "servers": lambda c: context_ops.servers(c),
        "get_server": lambda c: context_ops.get_server(c, {}, "weather"),
        "explain": lambda c: explain(c, "weather in Paris"),
    }


ENTRY_POINTS = list(_entry_points(None))


@pytest.mark.parametrize("where", ENTRY_POINTS)
def test_every_entry_point_refuses_a_list_of_tools_showing_how_to_build_a_catalog(tools, where):
    model = ScriptedChatModel(responses=["x"])
    with pytest.raises(TypeError) as caught:
        _entry_points(model)[where](tools)
    message = str(caught.value)
    assert message.startswith(
        f"{where} takes a ToolCatalog as its catalog, got a list of 31 tools."
    )
    assert "catalog = ToolCatalog.from_tools(tools)" in message
    assert "load_mcp_catalog" in message


@pytest.mark.parametrize("where", ENTRY_POINTS)
def test_every_entry_point_still_takes_a_catalog(catalog, where):
    _entry_points(ScriptedChatModel(responses=["x"]))[where](catalog)


def test_the_catalog_check_names_what_was_passed(tools):
    from langgraph_toolbudget import SelectTools

    for value, got in [
        (tuple(tools[:2]), "got a tuple of 2 tools."),
        ({"get_weather": tools[0]}, "got a dict of 1 item."),
        (None, "got None."),
        ("weather", "got a str ('weather')."),
        ([1, 2], "got a list of 2 items."),
    ]:
        with pytest.raises(TypeError, match=re.escape(got)):
            SelectTools(value)


def test_a_tool_executor_given_tools_points_to_its_toolnode_swap(tools):
    from langgraph_toolbudget import ToolExecutor

    with pytest.raises(TypeError, match=re.escape("ToolExecutor.from_tools(tools)")):
        ToolExecutor(tools)
    assert ToolExecutor.from_tools(tools).runner.catalog.tool_names == [t.name for t in tools]


async def test_an_unawaited_mcp_catalog_is_named_as_such():
    from langgraph_toolbudget import SelectTools, load_mcp_catalog

    pending = load_mcp_catalog({})
    try:
        with pytest.raises(TypeError, match="did you forget to await load_mcp_catalog"):
            SelectTools(pending)
    finally:
        pending.close()


def test_every_public_callable_with_a_catalog_parameter_is_checked():
    """A new entry point taking a catalog must join ``_entry_points`` (and call
    ``require_catalog``)."""
    import langgraph_toolbudget
    from langgraph_toolbudget.core import context_ops

    public = {n: getattr(langgraph_toolbudget, n) for n in langgraph_toolbudget.__all__}
    public.update({n: getattr(context_ops, n) for n in context_ops.__all__})
    taking = sorted(
        name
        for name, value in public.items()
        if inspect.isfunction(value) or inspect.isclass(value) and not issubclass(value, dict)
        if "catalog" in inspect.signature(value).parameters
    )
    assert taking and set(taking) <= set(ENTRY_POINTS), set(taking) - set(ENTRY_POINTS)


@pytest.mark.parametrize("properties", [["a", "b"], None], ids=["list", "null"])
def test_a_local_tool_whose_schema_properties_are_no_object_is_named(properties: Any):
    """Was: AttributeError ('list' object has no attribute 'values') from deep in the spec."""
    from langchain_core.tools import StructuredTool

    odd = StructuredTool(
        name="odd",
        description="Odd tool.",
        args_schema={"type": "object", "properties": properties},
        func=lambda **kw: "ok",
    )
    kind = "list" if properties else "null"
    with pytest.raises(
        ValueError,
        match=rf"Tool 'odd' has an args schema whose 'properties' is a {kind}, not an object",
    ):
        ToolCatalog.from_tools([odd])


# --- misuse of the constructor and of the methods taking names ------------------------------


@tool
def ping(host: str) -> str:
    """Ping a host."""
    return host


@pytest.mark.parametrize(
    "specs", [[ping], ping, None, ["ping"]], ids=["tools", "tool", "none", "names"]
)
def test_the_constructor_given_tools_names_from_tools(specs):
    with pytest.raises(TypeError, match=r"ToolCatalog\.from_tools\(tools\)") as caught:
        ToolCatalog(specs)
    assert "ToolSpec" in str(caught.value)


def test_the_constructor_takes_specs_from_any_iterable():
    specs = ToolCatalog.from_tools([ping]).specs
    assert ToolCatalog(iter(specs)).tool_names == ["ping"]


def test_methods_taking_names_refuse_a_string_naming_the_list(catalog):
    with pytest.raises(TypeError, match=r"pass \['get_weather'\]"):
        catalog.tools("get_weather")
    with pytest.raises(TypeError, match=r"in_catalog_order\(\) takes a list of tool names"):
        catalog.in_catalog_order("get_weather")
    with pytest.raises(TypeError, match=r"may_stay_visible\(\) takes a list of tool names"):
        catalog.may_stay_visible("get_weather", {})
    assert [t.name for t in catalog.tools(["get_weather"])] == ["get_weather"]


def test_the_class_docstring_example_runs_as_shown(capsys):
    doc = inspect.getdoc(ToolCatalog) or ""
    block = textwrap.dedent(re.search(r"```python\n(.*?)```", doc, re.S).group(1))
    namespace: dict[str, Any] = {}
    exec(compile(block, "<ToolCatalog docstring>", "exec"), namespace)
    shown = re.findall(r"print\(.*\)  # (.*)", block)
    assert capsys.readouterr().out.splitlines() == shown == ["['create_issue', 'list_issues']"]
    assert namespace["catalog"].is_filtered("delete_repo")
