"""budget.py: the per-category share, the allocation with leftovers, and model-size presets."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from langgraph_toolbudget import SelectTools
from langgraph_toolbudget.core.budget import (
    MODEL_SIZE_PRESETS,
    allocate,
    cut_evenly,
    max_tools_for_model,
    model_size_billions,
    per_category_budget,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog

# --- per_cat = max(min_per_category, max_tools // n) -------------------------------------


@pytest.mark.parametrize(
    ("max_tools", "n", "expected"),
    [(8, 2, 4), (8, 1, 8), (8, 5, 2), (8, 8, 2), (10, 3, 3), (8, 0, 0)],
)
def test_per_category_budget_is_max_of_floor_and_even_split(max_tools, n, expected):
    assert per_category_budget(max_tools, n) == expected


def test_per_category_budget_min_per_category_is_configurable():
    assert per_category_budget(8, 5, min_per_category=1) == 1
    assert per_category_budget(8, 5, min_per_category=3) == 3


def test_per_category_budget_rejects_negative_budget():
    with pytest.raises(ValueError, match="max_tools"):
        per_category_budget(-1, 2)


# --- allocate ----------------------------------------------------------------------------


def _ranked(prefix: str, n: int, top: float = 10.0) -> list[tuple[str, float]]:
    return [(f"{prefix}{i}", top - i) for i in range(n)]


def test_allocate_two_categories_split_budget_evenly():
    out = allocate([("projects", _ranked("p", 10)), ("github", _ranked("g", 10))], max_tools=8)
    assert out == ["p0", "p1", "p2", "p3", "g0", "g1", "g2", "g3"]


def test_allocate_first_category_does_not_starve_the_second():
    # A production bug: a big first category used all 8 slots.
    out = allocate([("projects", _ranked("p", 10)), ("github", _ranked("g", 3))], max_tools=8)
    assert {"g0", "g1", "g2"} <= set(out)
    assert len(out) == 8


def test_allocate_one_category_gets_the_whole_budget():
    assert allocate([("github", _ranked("g", 10))], max_tools=8) == [f"g{i}" for i in range(8)]


def test_allocate_five_categories_two_each_capped_at_max_tools():
    ranked = [(c, _ranked(c, 4)) for c in "abcde"]
    out = allocate(ranked, max_tools=8)
    assert out == ["a0", "a1", "b0", "b1", "c0", "c1", "d0", "d1"]


def test_allocate_leftover_slots_go_to_most_relevant_remaining_tools():
    ranked = [
        ("small", [("s0", 9.0)]),
        ("low", [("l0", 5.0), ("l1", 4.0), ("l2", 1.0), ("l3", 0.5)]),
        ("high", [("h0", 8.0), ("h1", 7.0), ("h2", 6.0), ("h3", 3.0)]),
    ]
    # share = 6 // 3 = 2: s0, l0, l1, h0, h1 and one leftover slot. h2 (6.0) beats l2 (1.0)
    # although "low" comes first in priority order.
    out = allocate(ranked, max_tools=6)
    assert len(out) == 6
    assert "h2" in out
    assert "l2" not in out


def test_allocate_tool_in_two_categories_counted_once():
    ranked = [("a", [("shared", 5.0), ("a1", 4.0)]), ("b", [("shared", 5.0), ("b1", 4.0)])]
    out = allocate(ranked, max_tools=4, min_per_category=1)
    assert out.count("shared") == 1
    assert sorted(out) == ["a1", "b1", "shared"]


def test_allocate_excluded_tools_are_not_chosen_and_spend_no_budget():
    out = allocate([("a", _ranked("a", 5))], max_tools=3, exclude=["a0"])
    assert out == ["a1", "a2", "a3"]


def test_allocate_zero_budget_or_no_categories_gives_nothing():
    assert allocate([("a", _ranked("a", 5))], max_tools=0) == []
    assert allocate([], max_tools=8) == []


def test_allocate_is_deterministic_with_tied_scores():
    ranked = [("a", [("a0", 1.0), ("a1", 1.0), ("a2", 1.0)]), ("b", [("b0", 1.0), ("b1", 1.0)])]
    first = allocate(ranked, max_tools=4, min_per_category=1)
    assert first == allocate(ranked, max_tools=4, min_per_category=1)
    assert len(first) == len(set(first)) == 4


# --- a cap below the budget's choice -----------------------------------------------------


def test_cut_evenly_keeps_each_categorys_best_in_the_picks_order():
    picks = ["a0", "a1", "a2", "a3", "b0", "b1", "c0", "x"]
    category_of = {n: n[0] for n in picks if n != "x"}  # x: chosen without a category
    assert cut_evenly(picks, category_of, 5) == ["a0", "a1", "b0", "c0", "x"]
    assert cut_evenly(picks, category_of, 3) == ["a0", "b0", "c0"]
    assert cut_evenly(picks, category_of, 0) == []
    assert cut_evenly(picks, category_of, 8) == picks
    assert cut_evenly(["a0", "a0", "b0"], category_of, 2) == ["a0", "b0"]  # at most limit


def test_a_max_visible_below_the_budget_keeps_each_categorys_best_tools():
    # max_visible=5 below the budget's 8 picks (and ask_human): cutting the picks' list at the
    # cap showed only GitHub tools. Each category keeps its best instead.
    catalog = build_example_catalog()
    node = SelectTools(catalog, max_tools=8, max_visible=5)
    query = "Create a GitHub issue for the login bug and tell the team in Slack"
    categories = ["github", "slack"]
    chosen = node.choose(query, categories)
    github = [n for n in chosen if n in catalog.tools_in("github")]
    slack = [n for n in chosen if n in catalog.tools_in("slack")]
    assert len(github) == len(slack) == 4
    update = node.invoke({"messages": [HumanMessage(query)], "categories": categories})
    assert update["selected_tools"]["add"] == ["ask_human", *github[:2], *slack[:2]]


# --- model-size presets ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("qwen3:8b", 5),
        ("llama3.2:3b", 2),
        ("llama-3.1-70b", 10),
        ("Llama-3.1-70B-Instruct", 10),
        ("qwen2.5:0.5b", 2),
        ("smollm2:360m", 2),
        ("mistral-small:24b", 5),
        ("qwen3:235b-a22b", 10),
    ],
)
def test_max_tools_for_model_reads_size_from_model_name(model, expected):
    assert max_tools_for_model(model) == expected


@pytest.mark.parametrize(
    ("size", "expected"),
    [(3, 2), (6.9, 2), (7, 5), (8, 5), (30, 5), (32, 10), (70, 10), (8e9, 5), (3_000_000_000, 2)],
)
def test_max_tools_for_model_from_number_of_billions_or_parameters(size, expected):
    assert max_tools_for_model(size) == expected


def test_model_size_presets_are_small_2_medium_5_large_10():
    assert MODEL_SIZE_PRESETS == {"small": 2, "medium": 5, "large": 10}


def test_model_size_billions_reads_names():
    assert model_size_billions("qwen3:8b") == 8.0
    assert model_size_billions("llama3.2:3b") == 3.0
    assert model_size_billions("gpt-4o") is None


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet", "qwen3", ""])
def test_max_tools_for_model_unknown_size_raises_value_error_naming_the_fix(model):
    with pytest.raises(ValueError) as err:
        max_tools_for_model(model)
    message = str(err.value)
    assert repr(model) in message
    assert "max_tools=" in message
    assert "qwen3:8b" in message


def test_max_tools_for_model_counts_all_experts_of_a_mixture():
    # mixtral:8x7b has 8 experts of 7B: about 56B parameters in all, a large model.
    assert model_size_billions("mixtral:8x7b") == 56.0
    assert max_tools_for_model("mixtral:8x7b") == 10
