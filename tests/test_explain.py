"""``explain``: the offline first-turn choice is the prebuilt agent's own, option for option."""

from __future__ import annotations

import json
from typing import Any

import pytest

from langgraph_toolbudget import ToolCatalog, create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.explain import explain
from langgraph_toolbudget.testing import ScriptedChatModel

REQUESTS = [
    "What's the weather in Paris?",
    "weather forecast for the weekend",
    "send the weekly report",
    "send an email to bob about the forecast",
    "list my github issues and post to slack",
    "Create a GitHub issue for the login bug and tell the team in Slack",
    "Read Ana's email. Then schedule a meeting with her next Tuesday.",
    "list the files in /notes and count rows of orders",
    "thanks!",
]

OPTIONS: list[dict[str, Any]] = [
    {},
    {"max_visible": 3},
    {"max_tools": 4, "max_visible": 6},
    {"max_schema_tokens": 150},
    {"max_schema_tokens": 400, "max_tools": 3},
    {"runtime_mode": "debug"},
    {"runtime_mode": "debug", "max_visible": 4},
    {"model_size": "qwen3:4b", "search_limit": 2},
    {"pinned": ["run_sql_query"], "max_visible": 2},
    {"enabled_builtins": {"deny": ["tool_search"]}},
]


@pytest.fixture(scope="module")
def catalog() -> ToolCatalog:
    """The example catalog with a draft, so ``runtime_mode`` changes what is chosen."""
    return build_example_catalog().with_metadata(weather_forecast={"status": "draft"})


def _first_turn(catalog: ToolCatalog, query: str, options: dict[str, Any]) -> dict[str, Any]:
    """The real prebuilt agent's first turn: the catalog tools its model was bound, in order,
    and the state it ended with."""
    model = ScriptedChatModel(responses=["ok"])
    app = create_toolbudget_agent(model, catalog, **options).compile()
    out = app.invoke({"messages": [("user", query)]})
    listed = catalog.in_runtime_mode(options.get("runtime_mode", "production"))
    return {"bound": [n for n in model.bound_tools[0] if n in listed], "state": out}


@pytest.mark.parametrize(
    "options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items())
)
@pytest.mark.parametrize("query", REQUESTS)
def test_explain_lists_the_tools_the_prebuilt_agent_binds_on_its_first_turn(
    catalog: ToolCatalog, query: str, options: dict[str, Any]
) -> None:
    agent = _first_turn(catalog, query, options)
    data = explain(catalog, query, **options)
    assert [row["name"] for row in data["tools"]] == agent["bound"]
    assert [c["name"] for c in data["categories"]] == agent["state"]["categories"]
    reasons = agent["state"]["tool_reasons"]
    for row in data["tools"]:
        if row["name"] in reasons:
            assert {k: v for k, v in row.items() if k != "name"} == reasons[row["name"]]


def test_explain_differs_where_the_agent_does_so_the_comparison_can_fail(
    catalog: ToolCatalog,
) -> None:
    # The options above change the first turn: a comparison blind to them would pass anyway.
    query = "Read Ana's email. Then schedule a meeting with her next Tuesday."
    plain = [row["name"] for row in explain(catalog, query)["tools"]]
    assert [row["name"] for row in explain(catalog, query, max_visible=3)["tools"]] != plain
    weather = [row["name"] for row in explain(catalog, "weather forecast")["tools"]]
    tokens = explain(catalog, "weather forecast", max_schema_tokens=150)
    assert [row["name"] for row in tokens["tools"]] != weather
    debug = explain(catalog, "weather forecast", runtime_mode="debug")
    assert "weather_forecast" not in weather
    assert "weather_forecast" in [row["name"] for row in debug["tools"]]


def test_explain_leaves_out_search_hits_the_agents_off_topic_rule_drops(
    catalog: ToolCatalog,
) -> None:
    query = "Read Ana's email. Then schedule a meeting with her next Tuesday."
    data = explain(catalog, query)
    assert {row["name"] for row in data["tools"]}.isdisjoint(
        {"read_file", "read_channel_history", "run_sql_query"}
    )
    assert {row["category"] for row in data["tools"] if row["why"] == "budget"} <= {
        "email",
        "calendar",
    }


@pytest.mark.parametrize(
    ("flags", "options"),
    [
        ([], {}),
        (["--max-visible", "3"], {"max_visible": 3}),
        (["--max-schema-tokens", "150"], {"max_schema_tokens": 150}),
        (["--max-tools", "4", "--max-visible", "6"], {"max_tools": 4, "max_visible": 6}),
        (["--runtime-mode", "debug", "--search-limit", "1"], {"search_limit": 1}),
    ],
)
def test_the_explain_command_prints_the_prebuilt_agents_first_turn(
    flags: list[str], options: dict[str, Any]
) -> None:
    from click.testing import CliRunner

    from langgraph_toolbudget.cli import main

    spec = "langgraph_toolbudget.demo.example_catalog:build_example_catalog"
    query = "Create a GitHub issue for the login bug and tell the team in Slack"
    result = CliRunner().invoke(main, ["explain", query, "--catalog", spec, "--json", *flags])
    assert result.exit_code == 0, result.output
    printed = [row["name"] for row in json.loads(result.output)["tools"]]
    assert printed == _first_turn(build_example_catalog(), query, options)["bound"]
