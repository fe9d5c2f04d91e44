"""The budget in tokens: max_schema_tokens on SelectTools and the prebuilt agent."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool

from langgraph_toolbudget import BudgetConfig, SelectTools, ToolCatalog, create_toolbudget_agent
from langgraph_toolbudget.core.token_budget import MIN_TOOL_TOKENS, allocate_tokens, tool_tokens
from langgraph_toolbudget.core.tokens import schema_tokens
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

SIZES = {"a": 50, "b": 200, "c": 60, "d": 40, "e": 30}


def test_allocate_tokens_gives_each_category_a_share_of_tokens():
    ranked = [("x", [("a", 3.0), ("b", 2.0)]), ("y", [("c", 1.0), ("d", 0.5), ("e", 0.4)])]
    # 85 tokens a category: x takes a (50; b does not fit), y takes c (60; d, e do not fit);
    # the 60 tokens left go to the most relevant tool that fits: d (b is too large).
    assert allocate_tokens(ranked, SIZES.__getitem__, max_tokens=170) == ["a", "c", "d"]
    # 100 a category: y takes c and d; the 50 left fit e.
    assert allocate_tokens(ranked, SIZES.__getitem__, max_tokens=200) == ["a", "c", "d", "e"]
    assert allocate_tokens(ranked, SIZES.__getitem__, max_tokens=240, max_tools=2) == ["a", "c"]
    assert allocate_tokens(ranked, SIZES.__getitem__, max_tokens=10) == []
    assert allocate_tokens(ranked, SIZES.__getitem__, max_tokens=200, exclude=["a"]) == [
        "c",
        "d",
        "e",
    ]


@pytest.mark.parametrize("tokens", [150, 400, 900])
def test_select_tools_never_exceeds_the_token_budget(tokens):
    catalog = build_example_catalog()
    cost = tool_tokens(catalog)
    node = SelectTools(catalog, max_schema_tokens=tokens)
    for query in ("open an issue and tell the team in slack", "weather in Tokyo, then email Ada"):
        state = {"messages": [HumanMessage(query)], "categories": ["github", "slack", "email"]}
        chosen = [n for n in node.choose(query, state["categories"]) if n not in node.free_tools]
        assert chosen
        assert sum(cost(n) for n in chosen) <= tokens
        assert cost(chosen[0]) == schema_tokens(catalog.tools([chosen[0]]))


def test_tokens_alone_are_not_capped_by_the_default_tool_count():
    catalog = build_example_catalog()
    cats = ["github", "slack", "files"]
    many = SelectTools(catalog, max_schema_tokens=1500).choose("list things", cats)
    assert len(many) > 8 + 1  # more than the default 8 (plus ask_human)
    both = SelectTools(catalog, max_schema_tokens=1500, max_tools=4).choose("list things", cats)
    assert len(both) == 4 + 1
    assert BudgetConfig(max_schema_tokens=10).tool_cap is None
    assert BudgetConfig(max_schema_tokens=10, model_size="qwen3:8b").tool_cap == 5


def _small_tools_catalog(per_category: int = 15) -> ToolCatalog:
    """Three categories of one-argument tools (44 schema tokens each)."""

    def make(name: str) -> StructuredTool:
        def run(x: str) -> str:
            return x

        return StructuredTool.from_function(run, name=name, description=f"Run the {name} step.")

    categories = {f"srv{c}": [f"srv{c}_op{i}" for i in range(per_category)] for c in range(3)}
    tools = [make(n) for names in categories.values() for n in names]
    return ToolCatalog.from_tools(tools, categories=categories)


def test_a_token_budget_alone_makes_its_whole_choice_visible():
    # The 3000 tokens buy all 45 tools (1980 tokens); the default visible cap, derived from
    # the tool budget of 8 the user never set, made only 21 visible: 15, 6 and 0 a category.
    catalog = _small_tools_catalog()
    categories = list(catalog.categories)
    node = SelectTools(catalog, max_schema_tokens=3000)
    query = "run the srv0 srv1 srv2 op steps"
    chosen = node.choose(query, categories)
    assert len(chosen) == 45
    update = node.invoke({"messages": [HumanMessage(query)], "categories": categories})
    assert update["selected_tools"]["add"] == chosen


def test_the_default_visible_cap_under_a_token_budget_alone_counts_what_tokens_buy():
    assert BudgetConfig(max_schema_tokens=3000).visible_cap(1) == 2 * (3000 // 20) + 5 + 1
    assert BudgetConfig(max_schema_tokens=60).visible_cap(0) == 12  # 2 * 3 + 5, under the floor
    # with a tool budget too, or max_visible, the cap is theirs
    assert BudgetConfig(max_schema_tokens=3000, max_tools=8).visible_cap(1) == 2 * 8 + 5 + 1
    assert BudgetConfig(max_schema_tokens=3000, max_visible=7).visible_cap(1) == 7
    # the floor is below what any tool's schema costs: the cap can never cut the choice
    catalog = _small_tools_catalog(1)
    spec_cost = tool_tokens(catalog)
    assert all(spec_cost(n) > MIN_TOOL_TOKENS for n in catalog.tool_names)


def test_a_max_visible_below_the_token_budgets_choice_keeps_each_categorys_best():
    catalog = _small_tools_catalog()
    categories = list(catalog.categories)
    node = SelectTools(catalog, max_schema_tokens=3000, max_visible=21)
    query = "run the srv0 srv1 srv2 op steps"
    chosen = node.choose(query, categories)
    update = node.invoke({"messages": [HumanMessage(query)], "categories": categories})
    visible = update["selected_tools"]["add"]
    for category in categories:
        best = [n for n in chosen if n in catalog.tools_in(category)][:7]
        assert [n for n in visible if n in catalog.tools_in(category)] == best


def test_prebuilt_agent_takes_max_schema_tokens():
    catalog = build_example_catalog()
    app = create_toolbudget_agent(DemoChatModel(), catalog, max_schema_tokens=200).compile()
    inputs = {"messages": [HumanMessage("Create a GitHub issue in acme/app and post it to Slack")]}
    # what the select_tools step added (its stream event: the prebuilt graph runs the three
    # selection steps as one node, whose update also holds tool_search's hits)
    events = list(app.stream(inputs, stream_mode="custom"))
    chosen = [n for e in events if e.get("node") == "select_tools" for n in e["added"]]
    chosen = [n for n in chosen if n != "ask_human"]
    cost = tool_tokens(catalog)
    assert "create_issue" in chosen
    assert sum(cost(n) for n in chosen) <= 200


def test_bad_token_budget_is_named():
    with pytest.raises(ValueError, match="max_schema_tokens"):
        BudgetConfig(max_schema_tokens=0)
