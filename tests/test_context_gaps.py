"""The thread's tool context reaches the prompt, the budget and the CLI's graph lookup."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_toolbudget import (
    SelectTools,
    ToolBudgetMiddleware,
    ToolExecutor,
    ToolSearch,
    create_toolbudget_agent,
    exclude_tools,
    include_tools,
    tools_prompt_section,
)
from langgraph_toolbudget.core.context import merge_context
from langgraph_toolbudget.core.context_ops import set_include_mode
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
    # A thread that never ran takes a management update as its first node (not as input).
    app.update_state(CONFIG, exclude_tools(servers=["slack"]), as_node="choose_tools")
    app.invoke({"messages": [HumanMessage("what's the weather in Paris?")]}, CONFIG)
    system = str(model.calls[-1][0].content)
    assert "slack" not in _listed(system)
    rendered = system.split("If your tools cannot do the task:", 1)[1]
    assert "request_more_tools" in rendered and "Available categories:" in rendered
    listed = rendered.split("Available categories:", 1)[1].split(".")[0]
    assert "slack" not in listed and "weather" in listed
    assert all(name in rendered for name in META_TOOL_NAMES)


# --- the thread's include mode decides what the budget may choose ---------------------------

READ = "read the README file in the docs folder"


def _thread(*updates: dict[str, Any], text: str = READ, **state: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"messages": [HumanMessage(text)], **state}
    for update in updates:
        for key, value in update.items():
            out[key] = merge_context(out.get(key), value)
    return out


def _added(update: dict[str, Any]) -> list[str]:
    value = update.get("selected_tools") or {}
    return list(value.get("add", []) if isinstance(value, dict) else value)


def test_a_manual_tool_set_to_agent_competes_in_the_budget_of_that_thread_only() -> None:
    catalog = build_catalog(server_defaults={"files": {"include": "manual"}})
    node = SelectTools(catalog, max_tools=4)
    plain = _added(node.invoke(_thread(categories=["files"])))
    assert "read_file" not in plain, "manual in the catalog: never chosen by the budget"
    agent_mode = _thread(set_include_mode("agent", tools=["read_file"]), categories=["files"])
    assert "read_file" in _added(node.invoke(agent_mode))
    server_mode = _thread(set_include_mode("agent", servers=["files"]), categories=["files"])
    chosen = _added(node.invoke(server_mode))
    assert "read_file" in chosen and len(set(chosen) - {"ask_human"}) == 4, "the budget holds"
    relevance = SelectTools(catalog, max_tools=3, strategy="relevance")
    assert "read_file" in _added(relevance.invoke(agent_mode))
    assert "read_file" not in _added(relevance.invoke(_thread()))


def test_an_agent_tool_set_to_manual_leaves_the_budget_of_that_thread() -> None:
    catalog = build_catalog()
    node = SelectTools(catalog, max_tools=4)
    assert "read_file" in _added(node.invoke(_thread(categories=["files"])))
    manual = _thread(set_include_mode("manual", tools=["read_file"]), categories=["files"])
    assert "read_file" not in _added(node.invoke(manual))
    search = ToolSearch(catalog, search_limit=3)
    assert "read_file" in _added(search.invoke(_thread()))
    assert "read_file" not in _added(
        search.invoke(_thread(set_include_mode("manual", ["read_file"])))
    )


@pytest.mark.parametrize(
    "mode",
    [
        {"name": "set_tool_include_mode", "args": {"tool": "ask_human", "mode": "manual"}},
        # ask_human's server (its category ``human``): the same as the tool's own mode.
        {"name": "set_server_include_mode", "args": {"server": "human", "mode": "manual"}},
    ],
    ids=["tool", "server"],
)
def test_a_special_category_tool_the_model_sets_to_manual_leaves_the_visible_set(
    mode: dict[str, Any],
) -> None:
    get = {"name": "get_tool", "args": {"tool": "ask_human"}}
    model = ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[{**mode, "id": "m"}]),
            "ok",
            AIMessage("", tool_calls=[{**get, "id": "g"}]),
            "ok again",
        ],
        cycle=False,
    )
    graph = create_toolbudget_agent(model, build_catalog(), enabled_builtins={"allow": ["*"]})
    app = graph.compile(checkpointer=InMemorySaver())
    app.invoke({"messages": [HumanMessage("what's the weather in Paris?")]}, CONFIG)
    out = app.invoke({"messages": [HumanMessage("and in Lima?")]}, CONFIG)
    assert ["ask_human" in bound for bound in model.bound_tools] == [True, False, False, False]
    answer = json.loads(out["messages"][-2].content)
    assert answer["mode"] == "manual" and answer["in_context"] is False
    assert "ask_human" not in out["selected_tools"]


def test_the_tool_search_and_request_more_tools_follow_the_thread_mode() -> None:
    catalog = build_catalog(server_defaults={"files": {"include": "manual"}})
    search = ToolSearch(catalog, search_limit=3)
    assert "read_file" not in _added(search.invoke(_thread()))
    assert "read_file" in _added(search.invoke(_thread(set_include_mode("agent", ["read_file"]))))
    only_manual = build_catalog(default_include="manual")
    deferred_none = ToolSearch(only_manual, search_limit=3)
    assert deferred_none.invoke(_thread()) == {}, "nothing is deferred: no search"
    hits = _added(deferred_none.invoke(_thread(set_include_mode("agent", servers=["files"]))))
    assert "read_file" in hits
    call = {"name": "request_more_tools", "args": {"categories": ["files"]}, "id": "c1"}
    for mode, loaded in (("agent", True), (None, False)):
        updates = [set_include_mode(mode, tools=["read_file"])] if mode else []
        state = _thread(*updates, selected_tools=[])
        state["messages"].append(AIMessage("", tool_calls=[call]))
        (answer,) = ToolExecutor(catalog).invoke(state)["messages"]
        assert ("read_file" in answer.content) == loaded, answer.content


# --- the CLI finds the catalog of a create_agent graph ---------------------------------------


def agent_graph(checkpointer: Any = None) -> Any:
    """A ``create_agent`` + ``ToolBudgetMiddleware`` graph (the CLI's ``--graph`` spec)."""
    middleware = ToolBudgetMiddleware(build_catalog())
    model = ScriptedChatModel(responses=["done"])
    return create_agent(model, middleware=[middleware], checkpointer=checkpointer)


def test_the_cli_reads_the_catalog_of_a_create_agent_graph(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from langgraph_toolbudget.cli import main
    from langgraph_toolbudget.threads import catalog_of

    graph = agent_graph()
    assert catalog_of(graph) is catalog_of(graph.builder) is not None
    path = tmp_path / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        agent_graph(saver).invoke({"messages": [HumanMessage("weather in Paris?")]}, CONFIG)
    target = ["--sqlite", str(path), "--graph", f"{__name__}:agent_graph", "--thread", "t1"]
    runner = CliRunner()
    env = {"TOOLBUDGET_CATALOG": ""}  # no catalog but the graph's
    listed = runner.invoke(main, ["tools", *target, "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    data = json.loads(listed.output)
    assert {row["name"] for row in data["tools"]} == set(build_catalog().tool_names)
    changed = runner.invoke(main, ["tools", "exclude", "--server", "slack", *target], env=env)
    assert changed.exit_code == 0, changed.output
    assert "slack" in changed.output
    with SqliteSaver.from_conn_string(str(path)) as saver:
        app = agent_graph(saver)
        assert app.get_state(CONFIG).values["context_servers"] == {"slack": "exclude"}
        app.invoke({"messages": [HumanMessage("post hello to the slack channel dev")]}, CONFIG)
        assert "selected_tools" in app.get_state(CONFIG).values
        visible = set(app.get_state(CONFIG).values["selected_tools"])
    assert visible and not visible & {"send_message", "list_channels", "read_channel_history"}


def test_request_more_tools_names_only_the_categories_left_in_the_thread() -> None:
    catalog = build_catalog()
    call = {"name": "request_more_tools", "args": {"categories": ["chat"]}, "id": "c1"}
    state = _thread(exclude_tools(servers=["slack"]), selected_tools=[])
    state["messages"].append(AIMessage("", tool_calls=[call]))
    (answer,) = ToolExecutor(catalog).invoke(state)["messages"]
    available = answer.content.split("Available categories:", 1)[1]
    assert "weather" in available and "slack" not in available


def _big_server_catalog() -> Any:
    from langchain_core.tools import StructuredTool

    from langgraph_toolbudget import ToolCatalog

    def tool(name: str, description: str, server: str) -> StructuredTool:
        def run(city: str = "") -> str:
            return f"{name} ran {city}"

        made = StructuredTool.from_function(run, name=name, description=description)
        made.metadata = {"server": server}
        return made

    github = [
        tool(f"gh_op_{i:02d}", f"GitHub repository operation {i}.", "github") for i in range(30)
    ]
    weather = [
        tool("get_weather", "Get the current weather in a city.", "weather"),
        tool("weather_alerts", "Severe weather alerts for a city.", "weather"),
    ]
    return ToolCatalog.from_tools(github + weather)


@pytest.mark.parametrize("shape", ["prebuilt", "middleware"])
@pytest.mark.parametrize("max_visible", [None, 8])
def test_a_thread_including_a_large_server_keeps_the_budgets_room(
    shape: str, max_visible: int | None
) -> None:
    # The 30 included tools filled the cap: the turn's choice was dropped and add_tool was
    # refused as "the working set is full of pinned tools", with nothing pinned.
    from langgraph_toolbudget import update_context

    catalog = _big_server_catalog()
    call = {"name": "add_tool", "args": {"tool_names": ["weather_alerts"]}, "id": "a"}
    weather = {"name": "get_weather", "args": {"city": "Paris"}, "id": "w"}
    model = ScriptedChatModel(
        responses=[AIMessage("", tool_calls=[call]), AIMessage("", tool_calls=[weather]), "done"]
    )
    options: dict[str, Any] = {} if max_visible is None else {"max_visible": max_visible}
    if shape == "prebuilt":
        app: Any = create_toolbudget_agent(model, catalog, **options).compile(
            checkpointer=InMemorySaver()
        )
    else:
        middleware = ToolBudgetMiddleware(catalog, **options)
        app = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    update_context(app, CONFIG, include_tools(servers=["github"]))
    out = app.invoke({"messages": [HumanMessage("What's the weather in Paris?")]}, CONFIG)
    first, second = (set(bound) for bound in model.bound_tools[:2])
    assert {f"gh_op_{i:02d}" for i in range(30)} <= first  # the included server, all of it
    assert "get_weather" in first  # and the turn's own choice beside it
    answers = {m.tool_call_id: m for m in out["messages"] if m.type == "tool"}
    assert answers["a"].status == "success" and "weather_alerts" in second
    assert answers["w"].content == "get_weather ran Paris"


@pytest.mark.parametrize("include", ["agent", "manual"])
def test_without_add_tool_the_refusals_advice_loads_the_refused_tool(include: str) -> None:
    # "Load it first with request_more_tools(categories=['projects'])" loaded the category's
    # best tools for the request, not the refused one: the model called it again, was refused
    # again, and a `manual` tool could not be loaded at all, though every answer said it could.
    import re

    from langgraph_toolbudget.demo.example_catalog import build_example_catalog

    metadata = {"list_tasks": {"include": include, "is_pure": True}}
    catalog = build_example_catalog(tool_metadata=metadata)
    tasks = {"name": "list_tasks", "args": {"project": "Apollo"}}

    def follow_the_advice(messages: list[Any], tools: list[str]) -> AIMessage:
        advice = str(messages[-1].content)
        found = re.search(r"request_more_tools\(categories=\['(\w+)'\], reason='(\w+)'\)", advice)
        assert found is not None, advice
        args = {"categories": [found[1]], "reason": found[2]}
        return AIMessage("", tool_calls=[{"name": "request_more_tools", "args": args, "id": "r"}])

    model = ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[{**tasks, "id": "t1"}]),
            follow_the_advice,
            AIMessage("", tool_calls=[{**tasks, "id": "t2"}]),
            "done",
        ]
    )
    app = create_toolbudget_agent(model, catalog, enabled_builtins={"deny": ["add_tool"]}).compile()
    out = app.invoke({"messages": [HumanMessage("What's the weather in Paris?")]})
    answers = {m.tool_call_id: m for m in out["messages"] if m.type == "tool"}
    assert answers["t1"].status == "error"
    assert "list_tasks" in answers["r"].content and answers["r"].status == "success"
    assert answers["t2"].status == "success", answers["t2"].content
