"""A user's common mistakes get a message that names the problem and its fix (review 50c):
no repr noise, the owner they called, and advice that fits the case."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_toolbudget import (
    BudgetConfig,
    ClassifyIntent,
    SelectTools,
    ToolBudgetMiddleware,
    ToolCatalog,
    create_toolbudget_agent,
    exclude_tools,
    update_context,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog, example_tools
from langgraph_toolbudget.testing import ScriptedChatModel


def test_a_model_and_catalog_swapped_are_named_as_swapped_without_the_models_repr():
    model = ScriptedChatModel(responses=["hi"])
    with pytest.raises(TypeError) as caught:
        create_toolbudget_agent(build_example_catalog(), model)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "got a ScriptedChatModel." in message
    assert "arguments swapped? The model comes first" in message
    assert "responses" not in message  # no repr of the model's fields
    with pytest.raises(TypeError, match="got a list of 40 tools"):
        SelectTools(example_tools()[0])  # type: ignore[arg-type]


def test_a_dict_of_tools_is_told_to_pass_its_values_and_that_works():
    tools, categories = example_tools()
    by_name = {t.name: t for t in tools}
    with pytest.raises(TypeError, match=r"got a dict of 40 items\. .*list\(tools\.values\(\)\)"):
        ToolCatalog.from_tools(by_name)  # type: ignore[arg-type]
    assert len(ToolCatalog.from_tools(list(by_name.values())).tool_names) == 40


def test_an_option_out_of_range_names_the_node_it_was_given_to():
    catalog = build_example_catalog()
    with pytest.raises(ValueError, match=r"^ClassifyIntent: option max_categories must be >= 1"):
        ClassifyIntent(catalog, max_categories=0)
    with pytest.raises(TypeError, match=r"^ClassifyIntent: option max_categories must be an int"):
        ClassifyIntent(catalog, config=BudgetConfig(max_tools=3), max_categories="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^BudgetConfig: option max_categories must be >= 1"):
        BudgetConfig(max_tools=3).override(max_categories=0)
    kept = BudgetConfig(max_tools=3).override(mode="parallel_safe")
    assert kept.model_fields_set == {"max_tools", "mode"}  # still what was chosen


def test_an_empty_string_option_is_said_in_the_packages_words():
    with pytest.raises(ValueError, match=r"offload_app_id must be a non-empty string or None"):
        BudgetConfig(offload_app_id="")


def test_a_checkpoint_ns_on_a_graph_without_subgraphs_says_to_leave_it_out():
    app = create_toolbudget_agent(ScriptedChatModel(responses=["hi"]), build_example_catalog())
    app = app.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "asistant"}}
    with pytest.raises(ValueError, match=r"has no subgraphs: leave 'checkpoint_ns' out") as caught:
        update_context(app, config, exclude_tools(tools=["get_weather"]))
    assert "pass one of these" not in str(caught.value)


@pytest.mark.parametrize("name", ["system_prompt", "prompt"])
def test_a_system_prompt_given_to_the_middleware_points_to_create_agent(name):
    with pytest.raises(TypeError, match=r"system prompt is create_agent's.*system_prompt=\.\.\."):
        ToolBudgetMiddleware(build_example_catalog(), **{name: "Be brief."})  # type: ignore[arg-type]
