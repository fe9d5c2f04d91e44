"""The example catalog's eval set: realistic requests and the tools they need
(``tests/data/example_eval.json``), run through the real selection nodes at the default budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from langgraph_toolbudget import (
    ClassifyIntent,
    SelectTools,
    ToolSearch,
    ToolUsage,
    tools_prompt_section,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.state import merge_names

EVAL = json.loads((Path(__file__).parent / "data" / "example_eval.json").read_text("utf-8"))
ENGLISH = [r for r in EVAL["requests"] if not r.get("lang")]
OTHER_LANGUAGES = [r for r in EVAL["requests"] if r.get("lang")]


@pytest.fixture(scope="module")
def catalog():
    return build_example_catalog()


def select(catalog, query, usage=None, **options):
    """classify_intent -> select_tools -> tool_search, merged as the graph's reducers do."""
    state = {"messages": [HumanMessage(query)]}
    state.update(ClassifyIntent(catalog, usage=usage).invoke(state))
    for node in (SelectTools(catalog, usage=usage, **options), ToolSearch(catalog, usage=usage)):
        update = node.invoke(state).get("selected_tools")
        state["selected_tools"] = merge_names(state.get("selected_tools"), update)
    return state


def recall(catalog, rows, **options):
    scores = []
    for row in rows:
        visible = select(catalog, row["query"], **options)["selected_tools"]
        scores.append(sum(t in visible for t in row["tools"]) / len(row["tools"]))
    return sum(scores) / len(scores)


def test_eval_set_is_large_and_names_real_tools(catalog):
    assert len(ENGLISH) >= 60
    unknown = {t for r in EVAL["requests"] for t in r["tools"] if t not in catalog}
    assert not unknown


def test_eval_recall_at_the_default_budget(catalog):
    assert recall(catalog, ENGLISH) >= 0.95


def test_eval_recall_with_the_medium_model_preset(catalog):
    assert recall(catalog, ENGLISH, model_size="qwen3:8b") >= 0.95


def test_weather_question_does_not_pull_github_through_the_apostrophe_s(catalog):
    state = select(catalog, "What's the weather in Tokyo?")
    assert state["categories"] == ["weather"]
    assert "get_file_contents" not in state["selected_tools"]
    assert "get_weather" in state["selected_tools"]


def test_tell_the_team_in_slack_ranks_send_message_first(catalog):
    state = select(catalog, "Ask Ada about the deadline and tell the team in Slack")
    ranked = [n for n, _ in catalog.index.rank_names("tell the team in Slack")]
    assert ranked[0] == "send_message"
    assert "send_message" in state["selected_tools"]


def test_post_to_a_channel_lands_in_slack_not_projects(catalog):
    state = select(catalog, "Post 'umbrella not needed' to #general")
    assert state["categories"][0] == "slack"
    assert "projects" not in state["categories"]


def test_how_many_orders_selects_count_rows(catalog):
    state = select(catalog, "How many orders are there?")
    assert "database" in state["categories"]
    assert "count_rows" in state["selected_tools"]


@pytest.mark.parametrize("row", OTHER_LANGUAGES, ids=[r["lang"] for r in OTHER_LANGUAGES])
def test_other_languages_log_the_miss_and_keep_the_category_list(catalog, row, caplog):
    with caplog.at_level("INFO"):
        state = select(catalog, row["query"])
    assert state["categories"] == []
    assert "no category matches" in caplog.text
    section = tools_prompt_section(catalog)
    assert all(f"- {c}" in section for c in catalog.categories)  # request_more_tools stays usable


def test_other_languages_work_once_learned(catalog):
    usage = ToolUsage()
    usage.record("Wie ist das Wetter in Berlin?", ["get_weather"])
    usage.record("¿Qué tiempo hace en Madrid?", ["get_weather"])
    usage.record("東京の天気は？", ["get_weather"])
    usage.record("Envía un correo a Bob", ["send_email"])
    usage.record("Quel temps fait-il à Paris ?", ["get_weather"])
    for row in OTHER_LANGUAGES:
        visible = select(catalog, row["query"], usage=usage)["selected_tools"]
        assert set(row["tools"]) <= set(visible), row["query"]


def test_unlearned_language_falls_back_to_the_most_used_tools(catalog):
    usage = ToolUsage()
    for text in ("weather in Oslo", "weather in Rome", "count the orders"):
        usage.record(text, ["get_weather"] if "weather" in text else ["count_rows"])
    state = select(catalog, "Wie ist das Wetter in Tokio?", usage=usage)
    assert state["categories"] == []
    assert state["selected_tools"][-2:] == ["get_weather", "count_rows"]


def test_the_demo_and_explain_count_savings_against_the_same_baseline(capsys):
    from langgraph_toolbudget.core.meta import meta_tool_definitions
    from langgraph_toolbudget.core.tokens import schema_tokens
    from langgraph_toolbudget.demo.__main__ import AGENT_REQUEST, main
    from langgraph_toolbudget.explain import explain

    catalog = build_example_catalog()
    every_tool = schema_tokens(catalog.tools(catalog.tool_names))  # no meta-tools in it
    meta = meta_tool_definitions(catalog.categories)
    data = explain(catalog, "What's the weather in Tokyo?", meta_tools=meta)
    assert data["schema_tokens"]["all"] == every_tool
    main([])
    out = capsys.readouterr().out
    assert f"vs {every_tool} for every tool" in out and "meta-tools included" in out
    assert f"> {AGENT_REQUEST}" in out  # the agent turn shows the user's request
    first_call = next(line for line in out.splitlines() if "first model call" in line)
    loaded = next(line for line in out.splitlines() if "request_more_tools loaded" in line)
    assert "no Slack tool" in first_call  # it really was missing them
    assert "send_message" in loaded
