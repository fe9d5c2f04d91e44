"""The thread's tool context reaches the prompt, the budget and the CLI's graph lookup."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_toolbudget import (
    ToolBudgetMiddleware,
    create_toolbudget_agent,
    exclude_tools,
    include_tools,
    tools_prompt_section,
)
from langgraph_toolbudget.core.meta import META_TOOL_NAMES
from langgraph_toolbudget.testing import ScriptedChatModel
from tests.conftest import build_catalog

CONFIG = {"configurable": {"thread_id": "t1"}}


class TextOnlyModel(ScriptedChatModel):
    """A scripted chat model without native tool calling (a text tool-call format)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        raise NotImplementedError("this model has no tool calling")


def _listed(system: str) -> set[str]:
    """The categories a tools section lists."""
    body = system.split("More tools exist in these categories:", 1)[1]
    body = body.split("If your tools cannot do the task:", 1)[0]
    return {line[2:].split(":")[0] for line in body.splitlines() if line.startswith("- ")}


def _request_more_description(model: ScriptedChatModel) -> str:
    (schema,) = [
        s["function"] for s in model.tools_schema if s["function"]["name"] == "request_more_tools"
    ]
    return str(schema["description"])


def _turns(app: Any, model: ScriptedChatModel) -> list[str]:
    """Two turns, the thread excluding tools in between; the system prompts of each."""
    app.invoke({"messages": [HumanMessage("what's the weather in Paris?")]}, CONFIG)
    first = str(model.calls[-1][0].content)
    first_description = _request_more_description(model)
    # files: the files server's tools, not get_file_contents (github's, also in files)
    app.update_state(CONFIG, exclude_tools(servers=["slack", "files"]))
    app.invoke({"messages": [HumanMessage("what's the weather in Lyon?")]}, CONFIG)
    second = str(model.calls[-1][0].content)
    assert "slack" in first_description
    assert "slack" not in _request_more_description(model)
    assert "files" in _request_more_description(model)
    return [first, second]


def test_excluded_categories_leave_the_prompt_and_request_more_tools() -> None:
    catalog = build_catalog()
    model = ScriptedChatModel(responses=["done"])
    app = create_toolbudget_agent(model, catalog).compile(checkpointer=InMemorySaver())
    first, second = _turns(app, model)
    assert first == tools_prompt_section(catalog), "no context: the shared, stable prefix"
    assert _listed(first) == set(catalog.categories)
    assert _listed(second) == set(catalog.categories) - {"slack"}, (
        "files keeps get_file_contents (github's), so it is still listed"
    )
    app.update_state(CONFIG, include_tools(servers=["slack"]))
    app.invoke({"messages": [HumanMessage("and in Nice?")]}, CONFIG)
    assert str(model.calls[-1][0].content) == first, "back to the shared section"


def test_excluded_categories_leave_the_middleware_prompt() -> None:
    catalog = build_catalog()
    model = ScriptedChatModel(responses=["done"])
    middleware = ToolBudgetMiddleware(catalog)
    app = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    first, second = _turns(app, model)
    assert first == tools_prompt_section(catalog)
    assert _listed(second) == set(catalog.categories) - {"slack"}


def test_excluded_categories_leave_a_text_format_prompt() -> None:
    catalog = build_catalog()
    model = TextOnlyModel(responses=[AIMessage("done")])
    app = create_toolbudget_agent(model, catalog, tool_call_formats="hermes")
    app = app.compile(checkpointer=InMemorySaver())
    app.update_state(CONFIG, exclude_tools(servers=["slack"]))
    app.invoke({"messages": [HumanMessage("what's the weather in Paris?")]}, CONFIG)
    system = str(model.calls[-1][0].content)
    assert "slack" not in _listed(system)
    rendered = system.split("If your tools cannot do the task:", 1)[1]
    assert "request_more_tools" in rendered and "Available categories:" in rendered
    listed = rendered.split("Available categories:", 1)[1].split(".")[0]
    assert "slack" not in listed and "weather" in listed
    assert all(name in rendered for name in META_TOOL_NAMES)
