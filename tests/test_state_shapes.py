"""The nodes in a user's own state schemas: a dataclass or pydantic state holding the budget
fields, fields declared without their reducers, LangGraph's managed values, a state whose
messages live under another key. Real graphs and checkpointers; only the model is scripted."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict, get_type_hints

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.managed import IsLastStep, RemainingSteps
from pydantic import BaseModel, Field

from langgraph_toolbudget import (
    CallModel,
    SelectTools,
    ToolAgent,
    ToolBudgetState,
    ToolCatalog,
    add_toolbudget_nodes,
    create_toolbudget_agent,
)
from langgraph_toolbudget.state import (
    input_schema_of,
    merge_context,
    merge_counts,
    merge_names,
    merge_reasons,
    replace_categories,
    replace_scores,
)
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny in {city}"


CATALOG = ToolCatalog.from_tools([get_weather], categories={"weather": ["get_weather"]})


def weather_model() -> ScriptedChatModel:
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
    return ScriptedChatModel(responses=[AIMessage("", tool_calls=[call]), "done"], cycle=False)


@dataclass
class DataclassState:
    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)
    categories: Annotated[list[str], replace_categories] = field(default_factory=list)
    category_scores: Annotated[dict[str, float], replace_scores] = field(default_factory=dict)
    selected_tools: Annotated[list[str], merge_names] = field(default_factory=list)
    discovered_tools: Annotated[list[str], merge_names] = field(default_factory=list)
    tool_last_used: Annotated[dict[str, int], merge_counts] = field(default_factory=dict)
    tool_reasons: Annotated[dict[str, dict[str, Any]], merge_reasons] = field(default_factory=dict)


class PydanticState(BaseModel):
    messages: Annotated[list[AnyMessage], add_messages] = Field(default_factory=list)
    categories: Annotated[list[str], replace_categories] = Field(default_factory=list)
    category_scores: Annotated[dict[str, float], replace_scores] = Field(default_factory=dict)
    selected_tools: Annotated[list[str], merge_names] = Field(default_factory=list)
    discovered_tools: Annotated[list[str], merge_names] = Field(default_factory=list)
    tool_last_used: Annotated[dict[str, int], merge_counts] = Field(default_factory=dict)
    tool_reasons: Annotated[dict[str, dict[str, Any]], merge_reasons] = Field(default_factory=dict)


def _graph(shape: str, schema: type[Any]) -> Any:
    if shape == "prebuilt":
        return create_toolbudget_agent(weather_model(), CATALOG, state_schema=schema)
    graph = StateGraph(schema, input_schema=input_schema_of(schema))
    add_toolbudget_nodes(graph, weather_model(), CATALOG)
    return graph


@pytest.mark.parametrize("schema", [DataclassState, PydanticState])
@pytest.mark.parametrize("shape", ["prebuilt", "nodes"])
@pytest.mark.parametrize("api", APIS)
async def test_a_dataclass_or_pydantic_state_with_the_budget_fields_runs(shape, schema, api):
    # A dataclass state crashed in choose_tools ("'DataclassState' object is not iterable").
    app = _graph(shape, schema).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    payload = {"messages": [HumanMessage("weather in Paris?")]}
    out = app.invoke(payload, config) if api == "invoke" else await app.ainvoke(payload, config)
    assert out["messages"][-1].content == "done"
    assert out["messages"][-2].content == "sunny in Paris"
    assert out["selected_tools"] == ["get_weather"]


class Unmerged(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    categories: list[str]
    selected_tools: list[str]
    tool_reasons: dict[str, Any]


def test_budget_fields_declared_without_their_reducers_are_refused_at_build() -> None:
    # They were accepted: after one run selected_tools held {'remove': [], 'add': [...]} and
    # the model's calls to tools it was shown were refused as not loaded.
    builds = {
        "add_toolbudget_nodes": lambda: add_toolbudget_nodes(
            StateGraph(Unmerged), weather_model(), CATALOG
        ),
        "create_toolbudget_agent": lambda: create_toolbudget_agent(
            weather_model(), CATALOG, state_schema=Unmerged
        ),
    }
    for how, build in builds.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the open input schema
            with pytest.raises(TypeError) as raised:
                build()
        said = str(raised.value)
        assert "declares selected_tools, tool_reasons with another reducer" in said, how
        assert "selected_tools: Annotated[list[str], merge_names]" in said, how
        assert "(the reducers are in langgraph_toolbudget.state)" in said, how
    fields = {**get_type_hints(ToolBudgetState, include_extras=True), "selected_tools": list[str]}
    schema = TypedDict("OneUnmerged", fields)  # type: ignore[operator]
    with pytest.raises(TypeError, match=r"declares selected_tools with another reducer"):
        ToolAgent(weather_model(), CATALOG, state_schema=schema)


class WithManaged(ToolBudgetState):
    remaining_steps: RemainingSteps
    is_last_step: IsLastStep


@pytest.mark.parametrize("api", APIS)
async def test_a_state_with_managed_values_builds_and_runs(api):
    # input_schema_of copied RemainingSteps/IsLastStep into the input schema, which LangGraph
    # refuses ("Invalid managed channels detected"): create_toolbudget_agent could not build.
    assert "remaining_steps" not in input_schema_of(WithManaged).__annotations__
    assert "messages" in input_schema_of(WithManaged).__annotations__
    app = create_toolbudget_agent(weather_model(), CATALOG, state_schema=WithManaged).compile()
    payload = {"messages": [HumanMessage("weather in Paris?")]}
    out = app.invoke(payload) if api == "invoke" else await app.ainvoke(payload)
    assert out["messages"][-1].content == "done"


class ChatState(TypedDict):
    chat: Annotated[list[AnyMessage], add_messages]
    selected_tools: Annotated[list[str], merge_names]


def test_call_model_in_a_state_without_messages_says_so() -> None:
    # It called the model with no conversation and its reply was dropped: no answer, no error.
    model = weather_model()
    graph = StateGraph(ChatState)
    graph.add_node("agent", CallModel(model, CATALOG))
    graph.add_edge(START, "agent")
    with pytest.raises(ValueError, match=r"'messages' key, which this state does not have"):
        graph.compile().invoke({"chat": [HumanMessage("hi")]})
    assert model.calls == []  # never billed for an empty call


class PlainCategories(ToolBudgetState):
    """Replaced whole by the nodes, these two may have no reducer."""

    categories: list[str]  # type: ignore[misc]
    category_scores: dict[str, float]  # type: ignore[misc]


class EarlierReasons(ToolBudgetState):
    """tool_reasons as states written for 0.1.0 declared it (merge_context)."""

    tool_reasons: Annotated[dict[str, dict[str, Any]], merge_context]  # type: ignore[misc]


@pytest.mark.parametrize("schema", [PlainCategories, EarlierReasons])
def test_declarations_that_merge_as_ours_are_accepted(schema: type[Any]) -> None:
    # Refused by the first reducer check (26a): the nodes replace categories whole, and
    # merge_context merges tool_reasons as merge_reasons does.
    app = create_toolbudget_agent(weather_model(), CATALOG, state_schema=schema)
    out = app.compile().invoke({"messages": [HumanMessage("weather in Paris?")]})
    assert out["messages"][-1].content == "done" and out["categories"] == ["weather"]
    assert out["selected_tools"] == ["get_weather"] and "get_weather" in out["tool_reasons"]


@pytest.mark.parametrize("api", APIS)
async def test_nodes_added_one_by_one_raise_at_their_first_run_on_an_unmerged_field(api):
    # Nodes added with add_node cannot see the schema: selected_tools became
    # {'remove': [], 'add': [...]} and the model's call of a tool it had loaded was refused.
    class Unchecked(ToolBudgetState):
        selected_tools: list[str]  # type: ignore[misc]

    graph = StateGraph(Unchecked)
    graph.add_node("select", SelectTools(CATALOG))
    graph.add_node("again", SelectTools(CATALOG))
    graph.add_edge(START, "select")
    graph.add_edge("select", "again")
    app = graph.compile()
    payload = {"messages": [HumanMessage("weather in Paris?")]}
    with pytest.raises(TypeError, match=r"'selected_tools' holds an update no reducer merged"):
        app.invoke(payload) if api == "invoke" else await app.ainvoke(payload)


def test_a_missing_field_error_gives_the_declarations_of_a_pydantic_state() -> None:
    class Partial(BaseModel):
        messages: Annotated[list[AnyMessage], add_messages] = Field(default_factory=list)
        selected_tools: Annotated[list[str], merge_names] = Field(default_factory=list)

    with pytest.raises(TypeError) as raised:
        ToolAgent(weather_model(), CATALOG, state_schema=Partial)
    said = str(raised.value)
    assert "a pydantic or dataclass state declares them itself" in said
    assert "context_tools: Annotated[dict[str, str], merge_decisions]" in said
    assert "context_tool_modes: Annotated[dict[str, str], merge_modes]" in said
