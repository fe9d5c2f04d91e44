"""The agent side end to end: the prebuilt graph, the ToolAgent node, the model call.

Only the chat model is fake (``ScriptedChatModel``); tools are real ``@tool``
functions that record every execution, and the graphs are real LangGraph graphs.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Annotated, Any

import pytest
from agent_tools import (
    APOLLO_QUERY,
    NotesState,
    Recorder,
    ai_calls,
    call,
    injection_tools,
    recording_catalog,
    recording_fixtures,
    tool_messages,
    wrong_category_script,
)
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.cache.memory import InMemoryCache
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from langgraph_toolbudget import (
    CallModel,
    ToolAgent,
    ToolBudgetInput,
    ToolBudgetState,
    ToolCatalog,
    add_toolbudget_nodes,
    create_toolbudget_agent,
    tools_prompt_section,
)
from langgraph_toolbudget.core.context import merge_context
from langgraph_toolbudget.core.meta import META_TOOL_NAMES
from langgraph_toolbudget.demo.text_model import HermesDemoChatModel
from langgraph_toolbudget.nodes.agent import ITERATION_LIMIT_MESSAGE
from langgraph_toolbudget.state import input_schema_of
from langgraph_toolbudget.testing import ScriptedChatModel

MODES = ["sequential", "parallel_safe"]
APIS = ["invoke", "ainvoke"]
META = list(META_TOOL_NAMES)
BUILTINS = len(META)  # the meta-tools, bound first (output tools: once an output is offloaded)
PROJECT_TOOLS = ["create_project", "list_projects", "add_task"]


rec, catalog = recording_fixtures()


async def run(app: Any, payload: Any, api: str, config: dict | None = None) -> dict[str, Any]:
    if api == "invoke":
        return app.invoke(payload, config)
    return await app.ainvoke(payload, config)


def single_node_app(node: ToolAgent, checkpointer: Any = None, state: type = ToolBudgetState):
    graph = StateGraph(state)
    graph.add_node("agent", node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=checkpointer)


def by_id(messages: list[Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in tool_messages(messages)}


# --- the wrong-first-category scenario -----------------------------------------------------


def check_wrong_category(out: dict[str, Any], model: ScriptedChatModel, rec: Recorder) -> None:
    first, second, third = model.bound_tools
    assert first[:4] == META
    assert "create_issue" not in first  # the classifier's pick lacked the tool
    loaded = by_id(out["messages"])["c1"]
    assert loaded.content.startswith("Loaded ")
    assert "create_issue" in loaded.content
    assert "create_issue" in second
    assert rec.runs == [("create_issue", {"repo": "acme/apollo", "title": "Launch blocker"})]
    assert by_id(out["messages"])["c2"].content == "issue 'Launch blocker' opened in acme/apollo"
    assert out["messages"][-1].content == "Opened the launch blocker issue in acme/apollo."
    assert len(model.calls) == 3
    assert "create_issue" in out["selected_tools"]
    assert third == second


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", APIS)
async def test_wrong_category_scenario_through_the_prebuilt_graph(catalog, rec, mode, api):
    model = ScriptedChatModel(responses=wrong_category_script(), cycle=False)
    graph = create_toolbudget_agent(model, catalog, max_tools=3, mode=mode)
    assert isinstance(graph, StateGraph)  # uncompiled: the caller picks the checkpointer
    out = await run(graph.compile(), {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert out["categories"] == ["projects"]  # the wrong category
    check_wrong_category(out, model, rec)
    assert [type(m).__name__ for m in out["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", APIS)
async def test_wrong_category_scenario_through_a_single_tool_agent_node(catalog, rec, mode, api):
    model = ScriptedChatModel(responses=wrong_category_script(), cycle=False)
    app = single_node_app(ToolAgent(model, catalog, mode=mode, max_iterations=5, max_tools=3))
    payload = {
        "messages": [HumanMessage(APOLLO_QUERY)],
        "categories": ["projects"],
        "selected_tools": PROJECT_TOOLS,
    }
    out = await run(app, payload, api)
    check_wrong_category(out, model, rec)
    assert out["selected_tools"][:3] == PROJECT_TOOLS


# --- meta-calls and enforcement inside the loop ---------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_search_then_add_then_call(catalog, rec, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("search_tools", "s1", query="forecast")),
            ai_calls(call("add_tool", "a1", tool_names=["weather_forecast"])),
            ai_calls(call("weather_forecast", "w1", city="Lima", days=1)),
            AIMessage("Sunny tomorrow in Lima."),
        ],
        cycle=False,
    )
    app = single_node_app(ToolAgent(model, catalog))
    out = await run(app, {"messages": [HumanMessage("forecast?")], "selected_tools": []}, api)
    found = by_id(out["messages"])["s1"].content
    assert '"weather_forecast"' in found and '"found": 1' in found
    assert "weather_forecast" not in model.bound_tools[1]  # found is not visible yet
    assert by_id(out["messages"])["a1"].content.startswith("Added 1 tool: weather_forecast")
    assert "weather_forecast" in model.bound_tools[2]
    assert rec.runs == [("weather_forecast", {"city": "Lima", "days": 1})]
    assert out["discovered_tools"] == [], "found, then loaded: no longer only discovered"
    assert out["messages"][-1].content == "Sunny tomorrow in Lima."


@pytest.mark.parametrize("api", APIS)
async def test_discovered_tools_holds_the_found_tools_only_while_they_are_not_visible(catalog, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("search_tools", "s1", query="forecast|issue")),
            "Found some.",
            "Sunny.",
            ai_calls(call("add_tool", "a1", tool_names=["list_issues"])),
            "Loaded.",
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(model, catalog).compile(checkpointer=MemorySaver())
    thread = {"configurable": {"thread_id": "t"}}

    async def turn(text: str) -> dict[str, Any]:
        return await run(app, {"messages": [HumanMessage(text)]}, api, thread)

    out = await turn("hello there")
    assert out["discovered_tools"] == ["create_issue", "list_issues", "weather_forecast"]
    out = await turn("what is the weather forecast for Lima?")  # select_tools shows it
    assert "weather_forecast" in out["selected_tools"]
    assert out["discovered_tools"] == ["create_issue", "list_issues"]
    out = await turn("thanks, one more thing")  # add_tool loads one
    assert "list_issues" in out["selected_tools"]
    assert out["discovered_tools"] == ["create_issue"]


@pytest.mark.parametrize("api", APIS)
async def test_mixed_meta_and_regular_calls_in_the_prebuilt_graph_keep_call_order(
    catalog, rec, api
):
    model = ScriptedChatModel(
        responses=[
            ai_calls(
                call("list_projects", "r1"),
                call("add_tool", "m1", tool_names=["get_weather"]),
                call("get_weather", "r2", city="Oslo"),
                call("show_all_tools", "m2"),
            ),
            AIMessage("done"),
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(model, catalog, max_tools=3).compile()
    out = await run(app, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert [m.tool_call_id for m in tool_messages(out["messages"])] == ["r1", "m1", "r2", "m2"]
    assert rec.names == ["list_projects", "get_weather"]


@pytest.mark.parametrize("api", APIS)
async def test_hidden_and_unknown_calls_are_refused_and_the_model_sees_why(catalog, rec, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(
                call("merge_pull_request", "h1", repo="r", number=1),
                call("admin_shutdown", "f1", reason="x"),
                call("purge_database", "d1", confirm=True),
                call("crate_project", "u1", name="x"),
            ),
            AIMessage("I could not do that."),
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(model, catalog, max_tools=3).compile()
    out = await run(app, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert rec.runs == []
    answers = by_id(out["messages"])
    assert all(answers[i].status == "error" for i in ("h1", "f1", "d1", "u1"))
    assert "add_tool(tool_names=['merge_pull_request'])" in answers["h1"].content
    assert "Closest tools: create_project" in answers["u1"].content
    seen_by_model = [m for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in seen_by_model] == ["h1", "f1", "d1", "u1"]


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_that_raises_does_not_stop_the_graph(catalog, rec, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("add_tool", "m1", tool_names=["explode"])),
            ai_calls(call("explode", "e1", reason="bad disk")),
            AIMessage("The tool failed: bad disk."),
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(model, catalog, max_tools=3).compile()
    out = await run(app, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    error = by_id(out["messages"])["e1"]
    assert error.status == "error" and "kaboom: bad disk" in error.content
    assert model.calls[2][-1].tool_call_id == "e1"  # the model saw the error
    assert out["messages"][-1].content == "The tool failed: bad disk."


# --- bounds ---------------------------------------------------------------------------------


def always_calling_model() -> ScriptedChatModel:
    return ScriptedChatModel(responses=[ai_calls(call("list_projects", "again"))], cycle=True)


@pytest.mark.parametrize("api", APIS)
async def test_iteration_bound_in_the_prebuilt_graph(catalog, rec, api):
    model = always_calling_model()
    app = create_toolbudget_agent(model, catalog, max_tools=3, max_iterations=3).compile()
    out = await run(app, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert len(model.calls) == 3
    assert rec.names == ["list_projects"] * 3
    assert out["messages"][-1].content == ITERATION_LIMIT_MESSAGE.format(n=3)
    assert not out["messages"][-1].tool_calls


@pytest.mark.parametrize("api", APIS)
async def test_iteration_bound_in_tool_agent(catalog, rec, api):
    model = always_calling_model()
    app = single_node_app(ToolAgent(model, catalog, max_iterations=2))
    payload = {"messages": [HumanMessage("x")], "selected_tools": PROJECT_TOOLS}
    out = await run(app, payload, api)
    assert len(model.calls) == 2
    assert rec.names == ["list_projects"] * 2
    assert out["messages"][-1].content == ITERATION_LIMIT_MESSAGE.format(n=2)


async def test_iteration_bound_counts_per_user_turn(catalog):
    model = always_calling_model()
    app = create_toolbudget_agent(model, catalog, max_iterations=2).compile(
        checkpointer=MemorySaver()
    )
    config = {"configurable": {"thread_id": "bounded"}}
    await app.ainvoke({"messages": [HumanMessage(APOLLO_QUERY)]}, config)
    await app.ainvoke({"messages": [HumanMessage("and again")]}, config)
    assert len(model.calls) == 4  # a fresh budget of 2 on the second turn


def test_iteration_bound_must_be_positive(catalog):
    with pytest.raises(ValueError, match="max_iterations"):
        ToolAgent(always_calling_model(), catalog, max_iterations=0)


@pytest.mark.parametrize("api", APIS)
async def test_meta_call_bound_per_turn_in_tool_agent(catalog, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("search_tools", "s1", query="issue")),
            ai_calls(call("search_tools", "s2", query="weather")),
            ai_calls(call("add_tool", "s3", tool_names=["get_weather"])),
            AIMessage("ok"),
        ],
        cycle=False,
    )
    app = single_node_app(ToolAgent(model, catalog, max_meta_calls=2))
    out = await run(app, {"messages": [HumanMessage("x")], "selected_tools": []}, api)
    answers = by_id(out["messages"])
    assert answers["s1"].status == answers["s2"].status == "success"
    assert answers["s3"].status == "error"
    assert "meta-tool limit reached" in answers["s3"].content
    assert "get_weather" not in out["selected_tools"]


# --- what the model is shown ----------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_binding_order_is_stable_meta_first_new_tools_appended(catalog, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("request_more_tools", "m1", categories=["weather"])),
            ai_calls(call("add_tool", "m2", tool_names=["create_issue"])),
            ai_calls(call("add_tool", "m3", tool_names=["list_projects"])),  # already there
            AIMessage("ok"),
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(model, catalog, max_tools=3).compile()
    await run(app, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    bound = model.bound_tools
    assert len(bound) == 4
    for names in bound:
        assert names[:4] == META
        assert len(names) == len(set(names))
    for before, after in zip(bound, bound[1:], strict=False):
        assert after[: len(before)] == before  # existing tools keep their position
    assert bound[1][len(bound[0]) :] == ["get_weather", "weather_forecast"]
    assert bound[2][len(bound[1]) :] == ["create_issue"]
    assert bound[3] == bound[2]


@pytest.mark.parametrize("api", APIS)
async def test_system_prompt_lists_sorted_categories_and_keeps_the_users_prompt(catalog, api):
    model = ScriptedChatModel(responses=[AIMessage("hi")])
    app = create_toolbudget_agent(model, catalog, system_prompt="You are Ada.").compile()
    payload = {"messages": [SystemMessage("Answer in French."), HumanMessage("hello")]}
    out = await run(app, payload, api)
    sent = model.calls[0]
    assert [type(m).__name__ for m in sent] == ["SystemMessage", "HumanMessage"]
    text = sent[0].content
    assert text.startswith("You are Ada.\n\nAnswer in French.\n\n## Tools")
    listed = [line[2:].split(":")[0] for line in text.splitlines() if line.startswith("- ")]
    categories = [c for c in listed if c in catalog.categories]
    assert categories == sorted(catalog.categories)
    assert "request_more_tools" in text and "search_tools" in text and "add_tool" in text
    # the state keeps the user's own system message untouched
    assert out["messages"][0].content == "Answer in French."


def test_tools_prompt_section_lists_categories_sorted_with_descriptions(catalog):
    section = tools_prompt_section(catalog)
    lines = [line for line in section.splitlines() if line.startswith("- ")]
    categories = [line[2:].split(":")[0] for line in lines][: len(catalog.categories)]
    assert categories == sorted(catalog.categories)
    assert "- github: GitHub repositories: issues and pull requests" in section
    assert "- misc" in section  # a category without a description is listed by name
    assert "admin" not in categories  # only filtered tools: not a category of the app


# --- working-set cap ------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_working_set_cap_end_to_end(catalog, rec, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("list_projects", "p1")),
            ai_calls(call("request_more_tools", "m1", categories=["github"])),
            AIMessage("ok"),
        ],
        cycle=False,
    )
    graph = create_toolbudget_agent(
        model, catalog, max_tools=3, max_visible=6, pinned=["get_weather"], search_limit=0
    )
    out = await run(graph.compile(), {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    first = model.bound_tools[0][BUILTINS:]
    assert set(first) == {"ask_human", "get_weather", *PROJECT_TOOLS}
    loaded = by_id(out["messages"])["m1"].content
    assert "To stay within the tool limit these were unloaded:" in loaded
    unloaded = loaded.split("unloaded: ")[1].rstrip(".").split(", ")
    assert set(unloaded) == {"create_project", "add_task"}  # list_projects was just used
    assert model.bound_tools[1] == model.bound_tools[0]
    visible = model.bound_tools[2][BUILTINS:]
    assert len(visible) == 6
    assert {"ask_human", "get_weather", "list_projects"} <= set(visible)
    assert out["selected_tools"] == visible
    assert not set(unloaded) & set(out["selected_tools"])


# --- threads, checkpoints, streaming --------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_checkpointer_keeps_and_grows_the_visible_set_across_turns(catalog, rec, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("request_more_tools", "m1", categories=["weather"])),
            ai_calls(call("get_weather", "w1", city="Oslo")),
            AIMessage("Cloudy in Oslo."),
            ai_calls(call("create_issue", "i1", repo="acme/app", title="Rain")),
            AIMessage("Issue opened."),
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(model, catalog, max_tools=3).compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    first = await run(app, {"messages": [HumanMessage(APOLLO_QUERY)]}, api, config)
    assert "get_weather" in first["selected_tools"]
    second = await run(
        app, {"messages": [HumanMessage("open a GitHub issue about the rain")]}, api, config
    )
    assert second["categories"] == ["github"]
    # What the thread used (get_weather) or the model loaded last turn (the weather tools)
    # stays, in its order; the first turn's unused choice (the project tools) went.
    kept = [n for n in first["selected_tools"] if n in second["selected_tools"]]
    assert second["selected_tools"][: len(kept)] == kept
    weather = catalog.tools_in("weather")
    assert set(weather) <= set(kept) and not set(PROJECT_TOOLS) & set(kept)
    assert "create_issue" in second["selected_tools"]
    assert rec.names == ["get_weather", "create_issue"]
    assert len(second["messages"]) == len(first["messages"]) + 4
    assert "get_weather" in model.bound_tools[3]  # still visible on the second turn


@pytest.mark.parametrize("api", APIS)
async def test_checkpointer_with_a_tool_agent_node(catalog, rec, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("add_tool", "m1", tool_names=["get_weather"])),
            AIMessage("loaded"),
            ai_calls(call("get_weather", "w1", city="Rome")),
            AIMessage("Rome is cloudy."),
        ],
        cycle=False,
    )
    app = single_node_app(ToolAgent(model, catalog), checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "t2"}}
    await run(
        app, {"messages": [HumanMessage("a")], "selected_tools": ["list_projects"]}, api, config
    )
    out = await run(app, {"messages": [HumanMessage("weather in Rome?")]}, api, config)
    assert out["selected_tools"] == ["list_projects", "ask_human", "get_weather"]
    assert rec.names == ["get_weather"]


@pytest.mark.parametrize("api", APIS)
async def test_tool_agent_checkpoints_each_step_and_resumes_an_interrupt_where_it_stopped(api):
    @tool
    def approve(action: str) -> str:
        """Ask a human to approve an action."""
        return f"{action}: {interrupt({'approve': action})}"

    catalog = ToolCatalog.from_tools([approve], categories={"ops": ["approve"]})
    model = ScriptedChatModel(
        responses=[ai_calls(call("approve", "a1", action="deploy")), AIMessage("deployed")],
        cycle=False,
    )
    saver = MemorySaver()
    app = single_node_app(ToolAgent(model, catalog), checkpointer=saver)
    config = {"configurable": {"thread_id": "hitl"}}
    payload = {"messages": [HumanMessage("deploy?")], "selected_tools": ["approve"]}
    first = await run(app, payload, api, config)
    assert first["__interrupt__"][0].value == {"approve": "deploy"}
    assert len(model.calls) == 1
    inner = {c.config["configurable"]["checkpoint_ns"] for c in saver.list(None)}
    assert any(ns.startswith("agent:") for ns in inner)  # the loop's own steps, checkpointed
    out = await run(app, Command(resume="yes"), api, config)
    assert len(model.calls) == 2  # resumed at the tool step: the first model call is not redone
    assert by_id(out["messages"])["a1"].content == "deploy: yes"
    assert [type(m).__name__ for m in out["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]


def visible_set_events(chunks: list[Any]) -> list[dict[str, Any]]:
    events = [c for c in chunks if isinstance(c, dict) and c.get("event")]
    kinds = {e["event"] for e in events}
    assert kinds <= {"toolbudget.visible_tools", "toolbudget.tool_call_format"}, kinds
    visible = [e for e in events if e["event"] == "toolbudget.visible_tools"]
    for event in visible:
        assert {"added", "removed", "reason"} <= set(event)
    return visible


@pytest.mark.parametrize("api", APIS)
async def test_streaming_emits_an_event_whenever_the_visible_set_changes(catalog, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("request_more_tools", "m1", categories=["weather"], reason="rain?")),
            ai_calls(call("add_tool", "m2", tool_names=["get_weather"])),  # no change
            ai_calls(call("add_tool", "m3", tool_names=["create_issue"])),
            AIMessage("ok"),
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(model, catalog, max_tools=3, max_visible=6).compile()
    payload = {"messages": [HumanMessage(APOLLO_QUERY)]}
    if api == "invoke":
        chunks = list(app.stream(payload, stream_mode="custom"))
    else:
        chunks = [c async for c in app.astream(payload, stream_mode="custom")]
    events = visible_set_events(chunks)
    reasons = [e["reason"] for e in events]
    assert reasons[0] == "select_tools"
    assert reasons[-2:] == ["request_more_tools", "add_tool"]
    weather = events[-2]
    assert weather["added"] == ["get_weather", "weather_forecast"]
    assert weather["removed"] == []
    issue = events[-1]
    assert issue["added"] == ["create_issue"]
    assert issue["removed"] == ["list_projects"]  # over the cap of 6: the event says so


@pytest.mark.parametrize("api", APIS)
async def test_streaming_events_from_a_tool_agent_node(catalog, api):
    model = ScriptedChatModel(
        responses=[ai_calls(call("add_tool", "m1", tool_names=["get_weather"])), AIMessage("ok")],
        cycle=False,
    )
    app = single_node_app(ToolAgent(model, catalog))
    payload = {"messages": [HumanMessage("x")], "selected_tools": []}
    # ToolAgent is a subgraph: its steps stream as any subgraph's do, with subgraphs=True.
    if api == "invoke":
        chunks = list(app.stream(payload, stream_mode="custom", subgraphs=True))
    else:
        chunks = [c async for c in app.astream(payload, stream_mode="custom", subgraphs=True)]
    namespaces = {ns[0].split(":")[0] for ns, _ in chunks}
    assert namespaces == {"agent"}  # streamed from inside the ToolAgent node
    (event,) = visible_set_events([chunk for _, chunk in chunks])
    assert event["added"] == ["get_weather"] and event["reason"] == "add_tool"


# --- LangGraph injection, Commands and async-only tools inside ToolAgent --------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", APIS)
async def test_tool_agent_supports_injection_and_commands(mode, api):
    seen: list[Any] = []
    tools = injection_tools(seen)
    names = [t.name for t in tools]
    catalog = ToolCatalog.from_tools(tools, categories={"notes": names})
    model = ScriptedChatModel(
        responses=[
            ai_calls(
                call("save_note", "k1", note="remember"),
                call("echo_call_id", "k2", text="hi"),
                call("count_messages", "k3"),
                call("runtime_info", "k4", text="rt"),
            ),
            AIMessage("noted"),
        ],
        cycle=False,
    )
    app = single_node_app(
        ToolAgent(model, catalog, mode=mode, state_schema=NotesState), state=NotesState
    )
    payload = {"messages": [HumanMessage("note it")], "selected_tools": names, "note": "old"}
    out = await run(app, payload, api)
    assert out["note"] == "remember"  # the Command's update of a custom key landed
    answers = by_id(out["messages"])
    assert list(answers) == ["k1", "k2", "k3", "k4"]
    assert answers["k1"].content == "saved 'remember'"
    assert answers["k2"].content == "hi from k2"
    assert answers["k3"].content == "2 messages"
    assert answers["k4"].content == "rt: call k4, note='old'"
    assert all(m.status == "success" for m in answers.values())
    assert out["messages"][-1].content == "noted"


@pytest.mark.parametrize("mode", MODES)
def test_async_only_tool_under_sync_invoke_in_both_graph_shapes(catalog, rec, mode):
    def script() -> list[Any]:
        return [
            ai_calls(call("add_tool", "m1", tool_names=["fetch_page"])),
            ai_calls(call("fetch_page", "f1", url="https://example.test")),
            AIMessage("fetched"),
        ]

    prebuilt = create_toolbudget_agent(
        ScriptedChatModel(responses=script(), cycle=False), catalog, mode=mode
    ).compile()
    agent_node = single_node_app(
        ToolAgent(ScriptedChatModel(responses=script(), cycle=False), catalog, mode=mode)
    )
    for app in (prebuilt, agent_node):
        out = app.invoke({"messages": [HumanMessage(APOLLO_QUERY)]})
        assert by_id(out["messages"])["f1"].content == "<html>https://example.test</html>"
    assert rec.names == ["fetch_page", "fetch_page"]


# --- composing into a user's graph ----------------------------------------------------------


class AppState(ToolBudgetState):
    user_id: str


@pytest.mark.parametrize("api", APIS)
async def test_add_toolbudget_nodes_into_a_users_graph(catalog, rec, api):
    model = ScriptedChatModel(
        responses=[ai_calls(call("list_projects", "p1")), AIMessage("two projects")],
        cycle=False,
    )
    graph = StateGraph(AppState)
    graph.add_node("load_user", lambda state: {"user_id": "u-42"})
    graph.add_node("goodbye", lambda state: {"messages": [AIMessage(f"bye {state['user_id']}")]})
    graph.add_edge(START, "load_user")
    first = add_toolbudget_nodes(
        graph, model, catalog, after="load_user", then="goodbye", prefix="tb_", max_tools=3
    )
    graph.add_edge("goodbye", END)
    assert first == "tb_choose_tools"
    out = await run(graph.compile(), {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert rec.names == ["list_projects"]
    assert [m.content for m in out["messages"][-2:]] == ["two projects", "bye u-42"]
    assert out["categories"] == ["projects"]


def test_add_toolbudget_nodes_rejects_a_state_without_the_budget_fields(catalog):
    fix = r"build StateGraph\(MyState, input_schema=langgraph_toolbudget.state.input_schema_of"
    with pytest.raises(TypeError, match=rf"ToolBudgetState.*{fix}"):
        add_toolbudget_nodes(StateGraph(MessagesState), always_calling_model(), catalog)

    class MyState(ToolBudgetState):  # the message's fix, as written: no warning either
        user_id: str

    graph = StateGraph(MyState, input_schema=input_schema_of(MyState))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        add_toolbudget_nodes(graph, always_calling_model(), catalog)


def test_add_toolbudget_nodes_refuses_a_second_pipeline_of_other_tools_in_one_state(catalog):
    """Two pipelines in one state share selected_tools: each would drop the other's loads."""
    graph = _users_graph()
    add_toolbudget_nodes(graph, always_calling_model(), catalog)
    add_toolbudget_nodes(graph, always_calling_model(), catalog, prefix="again_")  # same tools
    graph.add_node("helper", ToolAgent(always_calling_model(), catalog))

    @tool
    def tide_times(port: str) -> str:
        """Tide times of a port."""
        return port

    other = ToolCatalog.from_tools([tide_times])
    with pytest.raises(ValueError, match=r"\['agent', 'again_agent', 'helper'\] of another catal"):
        add_toolbudget_nodes(graph, always_calling_model(), other, prefix="weather_")
    assert "weather_agent" not in graph.nodes  # refused before adding anything
    with pytest.raises(ValueError, match=r"create_toolbudget_agent\(\.\.\.\) \(checkpointer=True"):
        add_toolbudget_nodes(graph, always_calling_model(), other, prefix="weather_")


@pytest.mark.parametrize("taken", ["agent", "tools", "choose_tools"])
def test_add_toolbudget_nodes_refuses_a_taken_name_before_adding_anything(catalog, taken):
    """A graph with a node of one of the names: refused naming it and prefix=, nothing added
    (LangGraph's own error came after choose_tools, and agent, were already in), and the
    fix the message gives works as written."""
    graph = _users_graph()
    graph.add_node(taken, lambda state: {})
    before = set(graph.nodes)
    with pytest.raises(ValueError, match=rf"already has a node named '{taken}'.*prefix='budget_'"):
        add_toolbudget_nodes(graph, always_calling_model(), catalog)
    assert set(graph.nodes) == before
    first = add_toolbudget_nodes(graph, always_calling_model(), catalog, prefix="budget_")
    assert first == "budget_choose_tools"
    assert {"budget_choose_tools", "budget_agent", "budget_tools"} <= set(graph.nodes)


def test_add_toolbudget_nodes_refuses_a_subclass_of_a_node_but_not_a_users_own_node(catalog):
    """A subclass of the package's node reads the budget's fields; a node of your own that
    holds a catalog (to bind its tools itself) does not, and is no reason to refuse."""

    @tool
    def tide_times(port: str) -> str:
        """Tide times of a port."""
        return port

    other = ToolCatalog.from_tools([tide_times])

    class MyNode:
        def __init__(self, catalog: ToolCatalog) -> None:
            self.catalog = catalog

        def __call__(self, state: dict) -> dict:
            return {}

    class TracedAgent(ToolAgent):
        pass

    graph = _users_graph()
    graph.add_node("mine", MyNode(other))
    graph.add_node("mine_too", RunnableLambda(MyNode(other)))
    add_toolbudget_nodes(graph, always_calling_model(), catalog)  # not refused
    graph.add_node("traced", TracedAgent(always_calling_model(), catalog))
    add_toolbudget_nodes(graph, always_calling_model(), catalog, prefix="again_")
    graph.add_node("traced_other", TracedAgent(always_calling_model(), other))
    with pytest.raises(ValueError, match=r"\['traced_other'\] of another catal"):
        add_toolbudget_nodes(graph, always_calling_model(), catalog, prefix="third_")


# create_react_agent's and create_agent's keywords of the compiled graph, and a value of each
COMPILE_KEYWORDS: dict[str, Any] = {
    "checkpointer": MemorySaver(),
    "store": InMemoryStore(),
    "interrupt_before": ["tools"],
    "interrupt_after": ["agent"],
    "name": "weather_agent",
    "debug": False,
    "cache": InMemoryCache(),
}


def _users_graph() -> StateGraph:
    return StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)


@pytest.mark.parametrize("keyword", sorted(COMPILE_KEYWORDS))
def test_a_builder_points_a_compile_keyword_to_compile_where_it_works(catalog, keyword):
    given = {keyword: COMPILE_KEYWORDS[keyword]}
    fix = rf"so pass {keyword} to compile: .*\.compile\({keyword}=\.\.\.\)\.$"
    with pytest.raises(TypeError, match=rf"^create_toolbudget_agent has no option {keyword}: "):
        create_toolbudget_agent(always_calling_model(), catalog, **given)
    with pytest.raises(TypeError, match=rf"returns the graph uncompiled .*{fix}"):
        create_toolbudget_agent(always_calling_model(), catalog, **given)
    with pytest.raises(TypeError, match=rf"^add_toolbudget_nodes has no option {keyword}: .*{fix}"):
        add_toolbudget_nodes(_users_graph(), always_calling_model(), catalog, **given)
    graph = create_toolbudget_agent(always_calling_model(), catalog)
    assert type(graph) is StateGraph  # uncompiled, as the error says
    app = graph.compile(**given)  # where the error points, the keyword works
    attribute = f"{keyword}_nodes" if keyword.startswith("interrupt_") else keyword
    assert getattr(app, attribute) == given[keyword]


def test_a_builder_names_every_compile_keyword_given_and_prompt_its_own_name(catalog):
    with pytest.raises(TypeError, match=r"no options checkpointer, store: .*compile\("):
        create_toolbudget_agent(
            always_calling_model(), catalog, checkpointer=MemorySaver(), store=InMemoryStore()
        )
    for build in (
        lambda: create_toolbudget_agent(always_calling_model(), catalog, prompt="Be terse."),
        lambda: add_toolbudget_nodes(_users_graph(), always_calling_model(), catalog, prompt="x"),
    ):
        with pytest.raises(
            TypeError, match="has no option prompt: the system prompt is system_prompt="
        ):
            build()
    graph = create_toolbudget_agent(always_calling_model(), catalog, system_prompt="Be terse.")
    assert type(graph) is StateGraph


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_invalid_tool_calls_from_the_model_get_an_answer(api):
    rec = Recorder()
    catalog = recording_catalog(rec)
    bad = AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "get_weather", "args": "{'city': 'Oslo'}", "id": "v1", "error": None,
             "type": "invalid_tool_call"},
            {"name": "get_weather", "args": "{city: Oslo", "id": "v2", "error": None,
             "type": "invalid_tool_call"},
        ],
    )  # fmt: skip
    model = ScriptedChatModel(responses=[bad, AIMessage("done")])
    app = create_toolbudget_agent(model, catalog, max_tools=8).compile()
    inputs = {"messages": [HumanMessage("weather in Oslo")], "selected_tools": ["get_weather"]}
    out = await (app.ainvoke(inputs) if api == "ainvoke" else asyncio.to_thread(app.invoke, inputs))
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert set(answers) == {"v1", "v2"}
    assert answers["v1"].status == "success"  # python-literal arguments were repaired
    assert answers["v2"].status == "error" and "not valid JSON" in answers["v2"].content
    assert rec.names == ["get_weather"]


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_a_reply_repeating_a_call_id_streams_with_the_ids_its_answers_get(api):
    # Models that number calls per reply send two calls under one id: the model node gives
    # the second a new id before the reply is streamed or stored (as the middleware does), so
    # a client streaming messages pairs each answer with a call it was shown.
    rec = Recorder()
    catalog = recording_catalog(rec)
    twice = ai_calls(call("get_weather", "0", city="Oslo"), call("get_weather", "0", city="Rome"))
    model = ScriptedChatModel(responses=[twice, AIMessage("done")])
    app = create_toolbudget_agent(model, catalog, max_tools=8).compile()
    inputs = {"messages": [HumanMessage("weather in Oslo and Rome")]}
    streamed: list[Any] = []
    if api == "invoke":
        streamed = [m for m, _ in app.stream(inputs, stream_mode="messages")]
    else:
        streamed = [m async for m, _ in app.astream(inputs, stream_mode="messages")]
    reply = [m for m in streamed if getattr(m, "tool_calls", None)][-1]  # the model's, repaired
    ids = [c["id"] for c in reply.tool_calls]
    assert ids[0] == "0" and ids[1] != "0"
    answers = [m.tool_call_id for m in streamed if isinstance(m, ToolMessage)]
    assert sorted(answers) == sorted(ids)
    assert sorted(rec.names) == ["get_weather", "get_weather"]


BIG = 2**64  # the first int past STATE_INTS: LangGraph's checkpointer stores no such int


def wide_int_reply(shape: str) -> AIMessage:
    """A native model's valid call holding an int outside 64 bits, which the provider parsed
    from ``{"number": 18446744073709551616}`` with ``json.loads``: in ``tool_calls`` only
    (OpenAI's shape), or also in a ``tool_use`` content block (Anthropic's)."""
    args = {"repo": "acme/app", "number": BIG}
    content: Any = ""
    if shape == "tool_use":
        block = {"type": "tool_use", "id": "b1", "name": "merge_pull_request", "input": args}
        content = [{"type": "text", "text": "Merging."}, block]
    return AIMessage(content, tool_calls=[call("merge_pull_request", "b1", **args)])


@pytest.mark.parametrize("shape", ["tool_calls", "tool_use"])
@pytest.mark.parametrize("graph", ["prebuilt", "tool_agent"])
@pytest.mark.parametrize("api", APIS)
async def test_a_native_calls_integer_outside_64_bits_is_kept_as_text_in_a_checkpointed_thread(
    catalog, rec, graph, shape, api
):
    """The run failed saving the reply (TypeError: not msgpack serializable), as under
    LangGraph's ToolNode: the number is now its text in the state, as the text formats keep
    it, and the tool still receives the int (coercion of its integer field)."""
    model = ScriptedChatModel(
        responses=[wide_int_reply(shape), AIMessage("merged"), AIMessage("hi")], cycle=False
    )
    saver, config = MemorySaver(), {"configurable": {"thread_id": f"wide-{graph}-{shape}"}}
    if graph == "prebuilt":
        builder = create_toolbudget_agent(model, catalog, pinned=["merge_pull_request"])
        app = builder.compile(checkpointer=saver)
    else:
        app = single_node_app(ToolAgent(model, catalog, pinned=["merge_pull_request"]), saver)
    out = await run(app, {"messages": [HumanMessage("merge it")]}, api, config)
    assert rec.runs == [("merge_pull_request", {"repo": "acme/app", "number": BIG})]
    assert by_id(out["messages"])["b1"].content == f"merged acme/app#{BIG}"
    (reply,) = [m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert reply.tool_calls[0]["args"] == {"repo": "acme/app", "number": str(BIG)}
    if shape == "tool_use":
        assert reply.content[1]["input"] == {"repo": "acme/app", "number": str(BIG)}
    out = await run(app, {"messages": [HumanMessage("thanks")]}, api, config)
    assert out["messages"][-1].content == "hi" and str(BIG) in str(model.calls[-1])


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_max_visible_caps_the_working_set_across_turns_of_a_thread(api):
    catalog = recording_catalog(Recorder())
    model = ScriptedChatModel(responses=[AIMessage("ok")])
    app = create_toolbudget_agent(model, catalog, max_tools=4, max_visible=6).compile(
        checkpointer=MemorySaver()
    )
    config = {"configurable": {"thread_id": f"cap-{api}"}}
    sizes = []
    for text in ["create a project board", "weather forecast in Lima", "open a github issue"]:
        inputs = {"messages": [HumanMessage(text)]}
        if api == "ainvoke":
            out = await app.ainvoke(inputs, config)
        else:
            out = await asyncio.to_thread(app.invoke, inputs, config)
        sizes.append(len(out["selected_tools"]))
        assert model.bound_tools[-1][BUILTINS:] == out["selected_tools"]
    assert max(sizes) <= 6


# --- return_direct: the tool's answer ends the turn, as under create_agent -----------------


def direct_catalog(calls: list[str]) -> ToolCatalog:
    @tool(return_direct=True)
    def order_status(order: int) -> str:
        """Look up the shipping status of an order."""
        calls.append("order_status")
        if order < 0:
            raise ValueError("no such order")
        return f"order {order}: shipped"

    @tool
    def list_orders() -> str:
        """List the user's orders."""
        calls.append("list_orders")
        return "42, 43"

    @tool(return_direct=True)
    def order_history(order: int) -> str:
        """The full history of an order."""
        calls.append("order_history")
        return "".join(f"event {i} of order {order}\n" for i in range(2000))  # offloaded

    names = ["order_status", "list_orders", "order_history"]
    return ToolCatalog.from_tools(
        [order_status, list_orders, order_history], categories={"orders": names}
    )


def direct_payload() -> dict[str, Any]:
    # A lone ToolAgent node has no selection step before it: its visible tools come in.
    visible = ["order_status", "list_orders", "order_history"]
    return {"messages": [HumanMessage("where is my order 42?")], "selected_tools": visible}


def direct_apps(catalog: ToolCatalog, script: list[Any]) -> dict[str, Any]:
    """The prebuilt agent, a ToolAgent node and add_toolbudget_nodes with a ``then`` node,
    each with its own scripted model."""
    models = {k: ScriptedChatModel(responses=list(script), cycle=False) for k in range(3)}
    graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    graph.add_node("after", lambda state: {"messages": [AIMessage("after")]})
    add_toolbudget_nodes(graph, models[2], catalog, then="after")
    graph.add_edge("after", END)
    return {
        "prebuilt": (create_toolbudget_agent(models[0], catalog).compile(), models[0]),
        "tool_agent": (single_node_app(ToolAgent(models[1], catalog)), models[1]),
        "nodes": (graph.compile(), models[2]),
    }


@pytest.mark.parametrize("api", APIS)
async def test_a_return_direct_tools_answer_ends_the_turn(api):
    calls: list[str] = []
    script = [ai_calls(call("order_status", "o1", order=42)), AIMessage("never said")]
    for shape, (app, model) in direct_apps(direct_catalog(calls), script).items():
        out = await run(app, direct_payload(), api)
        last = out["messages"][-1] if shape != "nodes" else out["messages"][-2]
        assert isinstance(last, ToolMessage) and last.content == "order 42: shipped", shape
        assert len(model.calls) == 1, shape
        if shape == "nodes":
            assert out["messages"][-1].content == "after"  # the turn goes on to `then`
    assert calls == ["order_status"] * 3


@pytest.mark.parametrize(
    "batch",
    [
        [call("order_status", "o1", order=-1)],  # it failed: the model reads the error
        [call("order_status", "o1", order=42), call("list_orders", "o2")],  # not all direct
        [call("order_status", "o1", order=42), call("search_tools", "s1", query="refund")],
        [call("order_history", "h1", order=42)],  # offloaded: the model reads it
        [call("order_status", "o1", order=42), call("order_status", "o1", order=-1)],  # same id
    ],
)
@pytest.mark.parametrize("api", APIS)
async def test_a_return_direct_tool_goes_back_to_the_model_when_failed_offloaded_or_with_others(
    batch, api
):
    calls: list[str] = []
    script = [ai_calls(*batch), AIMessage("the model's answer")]
    for shape, (app, model) in direct_apps(direct_catalog(calls), script).items():
        out = await run(app, direct_payload(), api)
        texts = [m.content for m in out["messages"] if isinstance(m, AIMessage)]
        assert "the model's answer" in texts, shape
        assert len(model.calls) == 2, shape


@pytest.mark.parametrize("api", APIS)
async def test_a_return_direct_answer_cut_because_the_store_failed_goes_back_to_the_model(
    api, tmp_path
):
    # The store cannot keep the large answer: the model gets it cut, with a note addressed
    # to it, which is not the turn's answer for the user.
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(tmp_path / "gone.db")) as gone:
        gone.setup()  # and closed on leaving: every later call raises
    calls: list[str] = []
    script = [ai_calls(call("order_history", "h1", order=42)), AIMessage("the model's answer")]
    model = ScriptedChatModel(responses=script, cycle=False)
    app = create_toolbudget_agent(model, direct_catalog(calls)).compile(store=gone)
    out = await run(app, direct_payload(), api)
    cut = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert "not_offloaded" in cut.artifact
    assert out["messages"][-1].content == "the model's answer" and len(model.calls) == 2


# --- ToolAgent: the parent's state becomes the loop's final state --------------------------


@pytest.mark.parametrize("api", APIS)
async def test_tool_agent_passes_up_a_message_a_tool_replaced_and_keeps_one_it_removed(api):
    """A replacement by id reaches your graph (the redacted card number is gone from its
    checkpoint); a removal stays inside the loop, as with ``create_react_agent`` added as a
    node: a message the loop lacks may be one your graph gained while the loop waited."""

    @tool
    def redact(message_id: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Redact a message of the conversation."""
        update = [HumanMessage("my card is [REDACTED]", id=message_id)]
        update.append(ToolMessage("redacted", tool_call_id=tool_call_id))
        return Command(update={"messages": update})

    @tool
    def forget(message_id: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Forget a message of the conversation."""
        update = [RemoveMessage(id=message_id), ToolMessage("gone", tool_call_id=tool_call_id)]
        return Command(update={"messages": update})

    catalog = ToolCatalog.from_tools([redact, forget], categories={"privacy": ["redact", "forget"]})
    secret = "my card is 4111 1111 1111 1111"
    for name, expected in (("redact", ["my card is [REDACTED]"]), ("forget", [secret])):
        model = ScriptedChatModel(
            responses=[ai_calls(call(name, "r1", message_id="card")), AIMessage("done")],
            cycle=False,
        )
        app = single_node_app(ToolAgent(model, catalog), checkpointer=MemorySaver())
        config = {"configurable": {"thread_id": name}}
        payload = {"messages": [HumanMessage(secret, id="card")], "selected_tools": [name]}
        await run(app, payload, api, config)
        saved = app.get_state(config).values["messages"]
        assert [m.content for m in saved if isinstance(m, HumanMessage)] == expected, name
        assert saved[-1].content == "done"
        if name == "forget":  # inside the loop the model no longer saw it
            assert secret not in str(model.calls[-1])


@pytest.mark.parametrize("api", APIS)
async def test_tool_agent_keeps_a_message_your_graph_gained_while_it_was_interrupted(api):
    @tool
    def refund(order: int) -> str:
        """Refund an order (asks a human first)."""
        return f"refund {order}: {interrupt(f'refund {order}?')}"

    catalog = ToolCatalog.from_tools([refund], categories={"orders": ["refund"]})
    model = ScriptedChatModel(
        responses=[ai_calls(call("refund", "r1", order=7)), AIMessage("done")], cycle=False
    )
    app = single_node_app(ToolAgent(model, catalog), checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    payload = {"messages": [HumanMessage("refund order 7")], "selected_tools": ["refund"]}
    out = await run(app, payload, api, config)
    assert out["__interrupt__"]
    note = HumanMessage("approver: approved, ticket #123", id="note")
    await run(app, Command(resume="approved", update={"messages": [note]}), api, config)
    saved = [m.content for m in app.get_state(config).values["messages"]]
    assert note.content in saved and "refund 7: approved" in saved and saved[-1] == "done"


@pytest.mark.parametrize("api", APIS)
async def test_tool_agent_runs_on_a_checkpoint_holding_a_malformed_context_value(catalog, api):
    """A value the context reducers now refuse, kept in a checkpoint from before: the loop
    ignores it (as the nodes do), and the update removes it from your state."""

    class OldState(ToolBudgetState):  # the context fields with the reducer of old releases
        context_tools: Annotated[dict[str, str], merge_context]

    saver, config = MemorySaver(), {"configurable": {"thread_id": "old"}}
    old = single_node_app(
        ToolAgent(ScriptedChatModel(responses=["hi"]), catalog), saver, state=OldState
    )
    old.invoke({"messages": [HumanMessage("hi")]}, config)
    old.update_state(config, {"context_tools": {"list_projects": "Exclude", "add_task": "exclude"}})
    model = ScriptedChatModel(responses=[ai_calls(call("list_projects", "p1")), "two"])
    app = single_node_app(ToolAgent(model, catalog), saver)
    payload = {"messages": [HumanMessage(APOLLO_QUERY)], "selected_tools": PROJECT_TOOLS}
    out = await run(app, payload, api, config)
    assert out["messages"][-1].content == "two"
    assert by_id(out["messages"])["p1"].status == "success"
    assert out["context_tools"] == {"add_task": "exclude"}


# --- the model as given: wrappers, classes, runnables that answer no message ----------------


def flaky_then(answer: str, seen: list[list[str]]) -> Any:
    """A scripted response that fails once (a provider's blip) and then answers ``answer``."""

    def respond(messages: list[Any], tools: list[str]) -> AIMessage:
        seen.append(tools)
        if len(seen) == 1:
            raise ConnectionError("provider blip")
        return AIMessage(answer)

    return respond


def retrying(model: Any) -> Any:
    return model.with_retry(stop_after_attempt=2, wait_exponential_jitter=False)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "wrap",
    [
        retrying,
        lambda m: retrying(m).with_config(tags=["t"]),
        lambda m: retrying(m).with_fallbacks([ScriptedChatModel(responses=["fb"]).with_retry()]),
    ],
    ids=["with_retry", "with_retry.with_config", "with_retry.with_fallbacks"],
)
async def test_a_with_retry_model_keeps_native_tool_calling_and_its_retry_settings(
    catalog, api, wrap, recwarn
):
    seen: list[list[str]] = []
    model = ScriptedChatModel(responses=[flaky_then("done", seen)])
    graph = create_toolbudget_agent(wrap(model), catalog, max_tools=3)
    out = await run(graph.compile(), {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert out["messages"][-1].content == "done"  # retried: not the fallback's answer
    assert len(seen) == 2 and seen[0] == seen[1]
    assert seen[0][:4] == META and set(out["selected_tools"]) <= set(seen[0])  # bound natively
    assert not [w for w in recwarn if "bind_tools" in str(w.message)]


@pytest.mark.parametrize("api", APIS)
async def test_a_with_retry_model_retries_no_more_than_it_was_told(catalog, api):
    seen: list[list[str]] = []
    model = ScriptedChatModel(responses=[flaky_then("done", seen)]).with_retry(stop_after_attempt=1)
    graph = create_toolbudget_agent(model, catalog, max_tools=3)
    with pytest.raises(ConnectionError, match="provider blip"):
        await run(graph.compile(), {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert len(seen) == 1 and seen[0][:4] == META


def test_a_runnable_hiding_a_tool_calling_model_is_warned_of_at_build(catalog):
    """A step that takes the messages ahead of the model (``prompt | model`` is refused at
    build since review 50c: tests/test_user_errors_types.py)."""
    chain = RunnableLambda(lambda messages: messages) | ScriptedChatModel(responses=["hi"])
    with pytest.warns(UserWarning, match="RunnableSequence around ScriptedChatModel") as caught:
        node = CallModel(chain, catalog)
    message = str(caught[0].message)
    assert "Pass the chat model itself" in message and "model_supports_tools=False" in message
    assert node.caller.choice.name == "hermes"  # it still runs, through a text format
    with pytest.warns(UserWarning, match="RunnableSequence around ScriptedChatModel"):
        create_toolbudget_agent(chain, catalog)


def test_a_text_format_chosen_on_purpose_or_a_plain_runnable_is_not_warned_of(catalog):
    step = RunnableLambda(lambda messages: messages)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ToolAgent(step | ScriptedChatModel(responses=["hi"]), catalog, model_supports_tools=False)
        hermes = {"enabled": ["native", "hermes"], "primary": "hermes"}
        ToolAgent(step | ScriptedChatModel(responses=["hi"]), catalog, tool_call_formats=hermes)
        ToolAgent(RunnableLambda(lambda messages: AIMessage("hi")), catalog)
        ToolAgent(HermesDemoChatModel().with_retry(), catalog)  # no bind_tools inside either
        typed = RunnableLambda(lambda messages: AIMessage("hi")).with_types(output_type=AIMessage)
        ToolAgent(typed, catalog)  # a router typed to answer a message is accepted


class Answer(BaseModel):
    city: str


def json_schema_structured_output() -> Any:
    """``ChatOpenAI(...).with_structured_output(Answer)`` as langchain-openai builds it (its
    default method, ``json_schema``): the model bound a response format, then a lambda typed
    with the schema, not an output parser."""
    chat = ScriptedChatModel(responses=[AIMessage('{"city": "Paris"}')])
    parse = RunnableLambda(lambda m: Answer.model_validate_json(m.content))
    return chat.bind(response_format={"type": "json_schema"}) | parse.with_types(output_type=Answer)


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: ScriptedChatModel, "the class ScriptedChatModel, not a model: pass an instance"),
        (
            lambda: ScriptedChatModel(responses=["x"]).with_structured_output(
                {"title": "Answer", "type": "object", "properties": {"a": {"type": "string"}}}
            ),
            "ending in the output parser JsonOutputKeyToolsParser",
        ),
        (
            lambda: ScriptedChatModel(responses=["x"]) | StrOutputParser(),
            "ending in the output parser StrOutputParser",
        ),
        (lambda: json_schema_structured_output(), "RunnableSequence that answers Answer, not a"),
        (
            lambda: ScriptedChatModel(responses=["x"]).with_structured_output(
                Answer, include_raw=True
            ),
            "RunnableSequence that answers dict, not a message",
        ),
    ],
    ids=["class", "with_structured_output", "model|StrOutputParser", "json_schema", "raw"],
)
def test_a_model_that_cannot_answer_a_message_is_refused_at_build(catalog, make, needle):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # refused before the hidden-caller warning
        with pytest.raises(TypeError, match=needle) as caught:
            create_toolbudget_agent(make(), catalog)
        assert "create_toolbudget_agent: option model" in str(caught.value)
        with pytest.raises(TypeError, match=needle):
            ToolAgent(make(), catalog)


@pytest.mark.parametrize("api", APIS)
async def test_a_reply_that_is_not_a_message_raises_naming_it_at_the_first_call(catalog, api):
    model = RunnableLambda(lambda messages: {"answer": "sunny"})
    graph = create_toolbudget_agent(model, catalog, max_tools=3)
    with pytest.raises(TypeError, match=r"answered dict \{'answer': 'sunny'\}, not a message"):
        await run(graph.compile(), {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
