"""ToolBudgetMiddleware under LangChain's ``create_agent``, against the node pipeline.

Only the chat model is fake (``ScriptedChatModel``); the tools are real ``@tool``
functions that record each execution, the agents are real ``create_agent`` graphs,
and the checkpointers real (in memory and SQLite). Each scenario also runs through
``create_toolbudget_agent`` and must show the model the same tools at every call.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Any

import pytest
from agent_tools import (
    APOLLO_QUERY,
    ConcurrencyProbe,
    ai_calls,
    call,
    probe_tool,
    recording_catalog,
    recording_fixtures,
    tool_messages,
    wrong_category_script,
)
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    SummarizationMiddleware,
)
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command
from pydantic import BaseModel

from langgraph_toolbudget import (
    BudgetConfig,
    ToolBudgetMiddleware,
    ToolCatalog,
    create_toolbudget_agent,
    exclude_tools,
    include_tools,
    tools_prompt_section,
)
from langgraph_toolbudget.core.meta import META_TOOL_NAMES, NOT_ADDED_UNKNOWN, NOT_ADDED_UNMANAGED
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.nodes.agent import ITERATION_LIMIT_MESSAGE
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
META = list(META_TOOL_NAMES)


rec, catalog = recording_fixtures()


async def run(app: Any, payload: Any, api: str, config: dict | None = None) -> dict[str, Any]:
    if api == "invoke":
        return app.invoke(payload, config)
    return await app.ainvoke(payload, config)


def by_id(messages: list[Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in tool_messages(messages)}


def both_ways(
    catalog, script, *, checkpointed: bool = False, **options: Any
) -> tuple[Any, Any, ScriptedChatModel, Any]:
    """The same app built with the middleware and with the nodes, each with its own model
    (and, if ``checkpointed``, its own in-memory checkpointer)."""
    model = ScriptedChatModel(responses=script(), cycle=False)
    node_model = ScriptedChatModel(responses=script(), cycle=False)
    saver = InMemorySaver if checkpointed else lambda: None
    agent = create_agent(
        model, middleware=[ToolBudgetMiddleware(catalog, **options)], checkpointer=saver()
    )
    # The middleware does not offload (the agent's tool node runs the calls): compare with
    # nodes that do not either, so both bind the same built-ins.
    nodes = create_toolbudget_agent(
        node_model, catalog, **{"offload_over_chars": None, **options}
    ).compile(checkpointer=saver())
    return agent, nodes, model, node_model


# --- selection, meta-calls, enforcement: the same as the nodes ------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_middleware_selects_on_the_first_turn_like_the_nodes(catalog, api):
    script = lambda: [AIMessage("Which board?")]  # noqa: E731
    agent, nodes, model, node_model = both_ways(catalog, script, max_tools=3)
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    expected = await run(nodes, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert model.bound_tools == node_model.bound_tools
    first = model.bound_tools[0]
    assert first[:4] == META and {"create_project", "list_projects", "add_task"} <= set(first)
    assert len(first) < len(catalog) + 4  # not everything is bound
    assert out["categories"] == expected["categories"] == ["projects"]
    assert out["selected_tools"] == expected["selected_tools"]
    assert model.calls[0][0].content == tools_prompt_section(catalog)


@pytest.mark.parametrize("api", APIS)
async def test_request_more_tools_then_the_loaded_tool_runs(catalog, rec, api):
    agent, nodes, model, node_model = both_ways(catalog, wrong_category_script, max_tools=3)
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    first, second, third = model.bound_tools
    assert "create_issue" not in first and "create_issue" in second and third == second
    assert by_id(out["messages"])["c1"].content.startswith("Loaded 3 tools: create_issue")
    assert by_id(out["messages"])["c2"].content == "issue 'Launch blocker' opened in acme/apollo"
    assert rec.runs == [("create_issue", {"repo": "acme/apollo", "title": "Launch blocker"})]
    assert out["messages"][-1].content == "Opened the launch blocker issue in acme/apollo."
    expected = await run(nodes, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert model.bound_tools == node_model.bound_tools
    assert out["selected_tools"] == expected["selected_tools"]


@pytest.mark.parametrize("api", APIS)
async def test_hidden_filtered_disabled_and_unknown_calls_are_refused_as_by_the_nodes(
    catalog, rec, api
):
    def script() -> list[Any]:
        return [
            ai_calls(
                call("merge_pull_request", "h1", repo="r", number=1),
                call("admin_shutdown", "f1", reason="x"),
                call("purge_database", "d1", confirm=True),
                call("crate_project", "u1", name="x"),
            ),
            AIMessage("I could not do that."),
        ]

    agent, nodes, model, _ = both_ways(catalog, script, max_tools=3)
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert rec.runs == []
    answers = by_id(out["messages"])
    assert all(answers[i].status == "error" for i in ("h1", "f1", "d1", "u1"))
    assert "add_tool(tool_names=['merge_pull_request'])" in answers["h1"].content
    assert "filtered out" in answers["f1"].content and "disabled" in answers["d1"].content
    assert "Closest tools: create_project" in answers["u1"].content
    node_out = await run(nodes, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    expected = by_id(node_out["messages"])
    assert {i: m.content for i, m in answers.items()} == {i: m.content for i, m in expected.items()}


@pytest.mark.parametrize("api", APIS)
async def test_parallel_calls_with_meta_calls_in_one_batch_match_the_nodes(catalog, rec, api):
    def script() -> list[Any]:
        return [
            ai_calls(
                call("list_projects", "r1"),
                call("request_more_tools", "m1", categories=["weather"]),
                call("get_weather", "r2", city="Oslo"),  # loaded by m1, in the same batch
                call("add_tool", "m2", tool_names=["search_docs"]),
                call("add_task", "r3", project="apollo", title="Blocker"),
            ),
            ai_calls(call("search_docs", "r4", query="setup")),
            AIMessage("done"),
        ]

    agent, nodes, model, node_model = both_ways(catalog, script, max_tools=3)
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    # after_model answers the built-in calls, the tool node the others: stored in that order
    assert [m.tool_call_id for m in tool_messages(out["messages"])] == [
        "m1",
        "m2",
        "r1",
        "r2",
        "r3",
        "r4",
    ]
    assert sorted(rec.names) == ["add_task", "get_weather", "list_projects", "search_docs"]
    assert all(m.status == "success" for m in tool_messages(out["messages"]))
    expected = await run(nodes, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert model.bound_tools == node_model.bound_tools
    # ... and shown to the model in call order, as the nodes store and show them
    shown = [m.tool_call_id for m in tool_messages(model.calls[1])]
    assert shown == [m.tool_call_id for m in tool_messages(node_model.calls[1])]
    assert shown == ["r1", "m1", "r2", "m2", "r3"]
    assert out["selected_tools"] == expected["selected_tools"]
    assert {"get_weather", "search_docs"} <= set(out["selected_tools"])


async def stream(app: Any, payload: Any, api: str) -> tuple[dict[str, Any], list[dict]]:
    """The final state of a run and its custom stream events."""
    modes = ["custom", "values"]
    chunks = (
        list(app.stream(payload, stream_mode=modes))
        if api == "invoke"
        else [chunk async for chunk in app.astream(payload, stream_mode=modes)]
    )
    values = [c for mode, c in chunks if mode == "values"]
    return values[-1], [c for mode, c in chunks if mode == "custom"]


@pytest.mark.parametrize("api", APIS)
async def test_each_builtin_call_of_a_reply_is_answered_once(catalog, rec, api, monkeypatch):
    def script() -> list[Any]:
        return [
            ai_calls(
                call("search_tools", "s1", query="forecast"),
                call("list_projects", "r1"),
                call("add_tool", "m1", tool_names=["search_docs"]),
                call("add_task", "r2", project="apollo", title="Blocker"),
                call("request_more_tools", "m2", categories=["weather"]),
                call("get_weather", "r3", city="Oslo"),  # loaded by m2
                call("search_docs", "r4", query="setup"),  # loaded by m1
            ),
            AIMessage("done"),
        ]

    _, nodes, _, node_model = both_ways(catalog, script, max_tools=3)
    model = ScriptedChatModel(responses=script(), cycle=False)
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    agent = create_agent(model, middleware=[budget])
    meta = budget.runner.builtins.family("search_tools")  # the meta-tools' real family
    answered: list[str] = []
    handle = meta.handle

    def counted(tool_call: Any, ctx: Any) -> Any:
        answered.append(tool_call["id"])
        return handle(tool_call, ctx)

    monkeypatch.setattr(meta, "handle", counted)  # ahandle runs handle in a thread
    out, events = await stream(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    # each built-in call answered once, in call order; the regular calls answered none again
    assert answered == ["s1", "m1", "m2"]
    ids = [m.tool_call_id for m in tool_messages(out["messages"])]
    assert sorted(ids) == ["m1", "m2", "r1", "r2", "r3", "r4", "s1"]
    assert all(m.status == "success" for m in tool_messages(out["messages"]))
    assert sorted(rec.names) == ["add_task", "get_weather", "list_projects", "search_docs"]
    # one stream event per visible-set change, as the nodes emit them
    reasons = [e["reason"] for e in events if e["reason"] != "select_tools"]
    assert reasons == ["add_tool", "request_more_tools"]
    expected = await run(nodes, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert model.bound_tools == node_model.bound_tools
    for key in ("selected_tools", "discovered_tools", "tool_reasons"):
        assert out.get(key) == expected.get(key), key
    assert {i: m.content for i, m in by_id(out["messages"]).items()} == {
        i: m.content for i, m in by_id(expected["messages"]).items()
    }


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_shown_with_a_reply_stays_callable_in_it_after_a_builtin_evicts_it(
    catalog, rec, api
):
    def script() -> list[Any]:
        return [
            ai_calls(
                call("list_projects", "r1"),
                call("create_project", "r2", name="zeus"),
                call("add_task", "r3", project="apollo", title="Blocker"),
                call("add_tool", "m1", tool_names=["create_issue"]),  # evicts list_projects
            ),
            ai_calls(call("list_projects", "r4")),  # a later reply: no longer loaded
            AIMessage("done"),
        ]

    agent, nodes, model, node_model = both_ways(catalog, script, max_tools=3, max_visible=4)
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    first, second, _ = model.bound_tools
    assert "list_projects" in first and "list_projects" not in second
    answers = by_id(out["messages"])
    assert answers["r1"].content == '["apollo", "gemini"]'  # shown with its reply: it ran
    assert answers["r4"].status == "error" and "exists but is not loaded" in answers["r4"].content
    assert rec.names.count("list_projects") == 1
    assert "toolbudget_still_callable" not in out  # private to the middleware
    expected = await run(nodes, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert_same_as_the_nodes(out, expected, model, node_model)


@pytest.mark.parametrize("api", APIS)
async def test_a_builtin_call_added_after_the_reply_was_answered_is_still_answered(
    catalog, rec, api
):
    class AddsACall(AgentMiddleware):
        """Adds an ``add_tool`` call to the model's first reply, after the budget's hook."""

        def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            reply = next(m for m in reversed(state["messages"]) if isinstance(m, AIMessage))
            if reply.tool_calls and not any(c["id"] == "late" for c in reply.tool_calls):
                late = call("add_tool", "late", tool_names=["create_issue"])
                return {
                    "messages": [reply.model_copy(update={"tool_calls": [*reply.tool_calls, late]})]
                }
            return None

    model = ScriptedChatModel(
        responses=[
            ai_calls(call("search_tools", "s1", query="issue"), call("list_projects", "r1")),
            AIMessage("done"),
        ],
        cycle=False,
    )
    # listed first, so its after_model runs after the budget's
    middleware = [AddsACall(), ToolBudgetMiddleware(catalog, max_tools=3)]
    out = await run(create_agent(model, middleware=middleware), {"messages": [APOLLO_QUERY]}, api)
    answers = by_id(out["messages"])
    assert sorted(answers) == ["late", "r1", "s1"]
    assert answers["late"].status == "success"
    assert answers["late"].content == "Added 1 tool: create_issue."
    assert "create_issue" in out["selected_tools"] and "create_issue" in model.bound_tools[1]
    assert rec.names == ["list_projects"]


@pytest.mark.parametrize("api", APIS)
async def test_a_builtin_call_the_reviewer_rejected_is_not_answered_again(catalog, rec, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(
                call("add_tool", "m1", tool_names=["create_issue"]), call("list_projects", "r1")
            ),
            AIMessage("done"),
        ],
        cycle=False,
    )
    review = HumanInTheLoopMiddleware(interrupt_on={"add_tool": True})
    middleware = [ToolBudgetMiddleware(catalog, max_tools=3), review]
    agent = create_agent(model, middleware=middleware, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "reject"}}
    paused = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api, config)
    assert paused["__interrupt__"][0].value["action_requests"][0]["name"] == "add_tool"
    assert tool_messages(paused["messages"]) == []  # reviewed before it is answered
    decision = {"type": "reject", "message": "No new tools."}
    out = await run(agent, Command(resume={"decisions": [decision]}), api, config)
    (rejected,) = [m for m in tool_messages(out["messages"]) if m.tool_call_id == "m1"]
    assert rejected.content.endswith("No new tools.") and rejected.status == "error"
    assert "create_issue" not in out["selected_tools"]
    assert rec.names == ["list_projects"]


@pytest.mark.parametrize("api", APIS)
async def test_structured_output_and_return_direct_end_a_reply_with_builtin_calls(api):
    class Answer(BaseModel):
        text: str

    @tool
    def look_up(query: str) -> str:
        """Look a thing up."""
        return f"found {query}"

    @tool(return_direct=True)
    def finish(query: str) -> str:
        """Finish the task and answer the user directly."""
        return f"finished {query}"

    catalog = ToolCatalog.from_tools([look_up, finish], categories={"misc": ["look_up", "finish"]})
    search = call("search_tools", "s1", query="look")
    model = ScriptedChatModel(
        responses=[ai_calls(search, call("Answer", "a1", text="hi")), "again"], cycle=False
    )
    agent = create_agent(
        model, middleware=[ToolBudgetMiddleware(catalog)], response_format=ToolStrategy(Answer)
    )
    out = await run(agent, {"messages": [HumanMessage("look it up")]}, api)
    assert out["structured_response"] == Answer(text="hi") and len(model.calls) == 1
    assert sorted(by_id(out["messages"])) == ["a1", "s1"]
    assert '"look_up"' in by_id(out["messages"])["s1"].content

    # a return_direct call ends the turn only when every call of its reply is return_direct
    replies = [[call("finish", "f1", query="x")], [search, call("finish", "f2", query="y")]]
    for calls, ends in zip(replies, [True, False], strict=True):
        model = ScriptedChatModel(responses=[ai_calls(*calls), "after"], cycle=False)
        agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, pinned=["finish"])])
        out = await run(agent, {"messages": [HumanMessage("finish it")]}, api)
        assert sorted(by_id(out["messages"])) == sorted(c["id"] for c in calls)
        assert len(model.calls) == (1 if ends else 2)
        assert out["messages"][-1].content == ("finished x" if ends else "after")


@pytest.mark.parametrize("api", APIS)
async def test_search_then_add_records_discovered_tools(catalog, rec, api):
    def script() -> list[Any]:
        return [
            ai_calls(call("search_tools", "s1", query="forecast")),
            ai_calls(call("add_tool", "a1", tool_names=["weather_forecast"])),
            ai_calls(call("weather_forecast", "w1", city="Lima", days="1")),  # "1" -> 1
            AIMessage("Sunny tomorrow in Lima."),
        ]

    agent, nodes, model, node_model = both_ways(catalog, script, max_tools=3)
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert '"weather_forecast"' in by_id(out["messages"])["s1"].content
    assert "weather_forecast" not in model.bound_tools[1]  # found is not visible yet
    assert "weather_forecast" in model.bound_tools[2]
    assert rec.runs == [("weather_forecast", {"city": "Lima", "days": 1})]  # coerced
    assert out["discovered_tools"] == [], "found, then loaded: no longer only discovered"
    await run(nodes, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert model.bound_tools == node_model.bound_tools


@pytest.mark.parametrize("api", APIS)
async def test_a_raising_tool_becomes_an_error_message_and_other_agent_tools_pass(
    catalog, rec, api
):
    @tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    model = ScriptedChatModel(
        responses=[
            ai_calls(call("add_tool", "m1", tool_names=["explode"]), call("echo", "e0", text="hi")),
            ai_calls(call("explode", "e1", reason="bad disk")),
            AIMessage("The tool failed."),
        ],
        cycle=False,
    )
    agent = create_agent(model, tools=[echo], middleware=[ToolBudgetMiddleware(catalog)])
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert "echo" in model.bound_tools[0]  # the agent's own tool stays bound
    assert by_id(out["messages"])["e0"].content == "echo: hi"
    error = by_id(out["messages"])["e1"]
    assert error.status == "error" and "kaboom: bad disk" in error.content
    assert out["messages"][-1].content == "The tool failed."


@pytest.mark.parametrize("api", APIS)
async def test_max_iterations_ends_the_turn_with_a_message(catalog, api):
    model = ScriptedChatModel(responses=[ai_calls(call("list_projects", "again"))], cycle=True)
    budget = ToolBudgetMiddleware(catalog, config=BudgetConfig(max_iterations=3))
    out = await run(create_agent(model, middleware=[budget]), {"messages": [APOLLO_QUERY]}, api)
    assert len(model.calls) == 3
    assert out["messages"][-1].content == ITERATION_LIMIT_MESSAGE.format(n=3)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", ["sequential", "parallel_safe"])
async def test_mode_sequential_runs_one_call_at_a_time(api, mode):
    probe = ConcurrencyProbe()
    sync = api == "invoke"
    tools = [probe_tool(f"probe_{i}", probe, pure=True, seconds=0.2, sync=sync) for i in range(3)]
    names = [t.name for t in tools]
    catalog = ToolCatalog.from_tools(
        tools, categories={"probes": names}, tool_metadata={n: {"is_pure": True} for n in names}
    )
    model = ScriptedChatModel(
        responses=[ai_calls(*(call(t.name, f"p{i}", x=i) for i, t in enumerate(tools))), "ok"],
        cycle=False,
    )
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, mode=mode)])
    out = await run(agent, {"messages": [HumanMessage("run the probes")]}, api)
    assert [m.content for m in tool_messages(out["messages"])] == [
        "probe_0 0",
        "probe_1 1",
        "probe_2 2",
    ]
    if mode == "sequential":
        assert probe.max_live == 1
    else:  # the agent's tool node runs the batch's pure calls concurrently
        assert probe.max_live >= 2


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("threads", [("a", "b"), ("a", "a")])
async def test_sequential_serialises_within_a_thread_not_across_threads(api, threads):
    probe = ConcurrencyProbe()
    slow = probe_tool("slow", probe, pure=False, seconds=0.3, sync=api == "invoke")
    catalog = ToolCatalog.from_tools([slow], categories={"probes": ["slow"]})
    # Both runs' first model calls come before either's second (the tool takes 0.3 s).
    model = ScriptedChatModel(
        responses=[ai_calls(call("slow", "s1")), ai_calls(call("slow", "s1")), "ok", "ok"],
        cycle=False,
    )
    # One compiled graph, one middleware instance, serving two runs at once.
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, mode="sequential")])

    async def one(thread_id: str) -> dict[str, Any]:
        config = {"configurable": {"thread_id": thread_id}}
        payload = {"messages": [HumanMessage("run slow")]}
        if api == "invoke":
            return await asyncio.to_thread(agent.invoke, payload, config)
        return await agent.ainvoke(payload, config)

    outs = await asyncio.gather(*(one(t) for t in threads))
    assert [tool_messages(o["messages"])[0].content for o in outs] == ["slow 0", "slow 0"]
    assert probe.max_live == (2 if threads[0] != threads[1] else 1)


async def test_a_tool_over_its_timeout_is_cancelled_under_ainvoke():
    probe = ConcurrencyProbe()
    slow = probe_tool("slow", probe, pure=True, seconds=2.0)
    slow.metadata = {"timeout_s": 0.1}
    catalog = ToolCatalog.from_tools([slow], categories={"probes": ["slow"]})
    model = ScriptedChatModel(responses=[ai_calls(call("slow", "s1")), "gave up"], cycle=False)
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog)])
    out = await agent.ainvoke({"messages": [HumanMessage("run slow")]})
    (answer,) = tool_messages(out["messages"])
    assert answer.status == "error" and "timed out after 0.1 s" in answer.content
    ((_, start, end),) = probe.intervals
    assert end - start < 1.0  # cancelled at the timeout, not run to its 2 s end


# --- the session tool context: the same as the nodes ----------------------------------------

THREAD = {"configurable": {"thread_id": "context"}}
CONTEXT_FIELDS = ["context_tools", "context_servers", "context_tool_modes", "context_server_modes"]


async def context_turns(
    catalog, script, update: dict[str, Any], api: str, **options: Any
) -> tuple[dict, dict, ScriptedChatModel, ScriptedChatModel]:
    """Two turns of one thread, the tool-context ``update`` between them, both ways:
    the middleware's second-turn state, the nodes', and the two models."""
    agent, nodes, model, node_model = both_ways(catalog, script, checkpointed=True, **options)
    outs = []
    for app in (agent, nodes):
        await run(app, {"messages": [HumanMessage(APOLLO_QUERY)]}, api, THREAD)
        app.update_state(THREAD, update)
        outs.append(await run(app, {"messages": [HumanMessage(APOLLO_QUERY)]}, api, THREAD))
    return outs[0], outs[1], model, node_model


def assert_same_as_the_nodes(out: dict, expected: dict, model: Any, node_model: Any) -> None:
    assert model.bound_tools == node_model.bound_tools
    answers, node_answers = by_id(out["messages"]), by_id(expected["messages"])
    # One wording differs by design: under the middleware, add_tool's answer for a name it
    # does not know adds that a tool given apart from the budget is called directly.
    assert {
        i: m.content.replace(NOT_ADDED_UNMANAGED, NOT_ADDED_UNKNOWN) for i, m in answers.items()
    } == {i: m.content for i, m in node_answers.items()}
    for key in ["selected_tools", "tool_reasons", *CONTEXT_FIELDS]:
        assert out.get(key) == expected.get(key), key


@pytest.mark.parametrize("api", APIS)
async def test_an_excluded_tool_is_not_bound_and_is_refused_like_the_nodes(catalog, rec, api):
    def script() -> list[Any]:
        return [
            AIMessage("Which board?"),
            ai_calls(
                call("add_task", "x1", project="apollo", title="Blocker"),
                call("add_tool", "x2", tool_names=["add_task"]),
                call("list_projects", "x3"),
            ),
            AIMessage("I cannot add tasks here."),
        ]

    out, expected, model, node_model = await context_turns(
        catalog, script, exclude_tools(tools=["add_task"]), api, max_tools=3
    )
    first, second, third = model.bound_tools
    assert "add_task" in first and "add_task" not in second and "add_task" not in third
    assert out["context_tools"] == {"add_task": "exclude"}
    answers = by_id(out["messages"])
    assert answers["x1"].status == "error" and "was excluded from this conversation" in (
        answers["x1"].content
    )
    assert "Only the user can include it again" in answers["x1"].content
    assert "include_tool" not in answers["x1"].content  # off by default: never suggested
    assert answers["x2"].status == "error" and "excluded" in answers["x2"].content
    assert answers["x3"].status == "success"
    assert rec.names == ["list_projects", "list_projects"]  # add_task never ran, either way
    assert "add_task" not in out["selected_tools"] and "add_task" not in out["tool_reasons"]
    assert_same_as_the_nodes(out, expected, model, node_model)


def test_a_misspelt_context_value_is_refused_like_the_nodes(catalog):
    script = lambda: [AIMessage("Which board?"), AIMessage("Still no.")]  # noqa: E731
    agent, nodes, _, _ = both_ways(catalog, script, checkpointed=True, max_tools=3)
    for app in (agent, nodes):
        app.invoke({"messages": [HumanMessage(APOLLO_QUERY)]}, THREAD)
        app.update_state(THREAD, exclude_tools(tools=["add_task"]))
        with pytest.raises(ValueError, match="'excluded', not one of 'include', 'exclude'"):
            app.update_state(THREAD, {"context_tools": {"add_task": "excluded"}})
        assert app.get_state(THREAD).values["context_tools"] == {"add_task": "exclude"}


def closest_named(answer: ToolMessage, marker: str = "Closest tools: ") -> list[str]:
    """The tools a refusal names as closest (after ``marker``, up to the full stop)."""
    return answer.content.split(marker)[1].split(".")[0].split(", ")


@pytest.mark.parametrize("api", APIS)
async def test_add_tool_of_a_misspelled_name_names_the_closest_tools_like_a_direct_call(
    catalog, rec, api
):
    def script() -> list[Any]:
        return [
            ai_calls(
                call("get_wether", "d1", city="Paris"),
                call("add_tool", "a1", tool_names=["get_wether"]),
                call("add_tool", "a2", tool_names=["Get_Weather"]),
            ),
            AIMessage("I will load it."),
        ]

    agent, nodes, model, node_model = both_ways(catalog, script, max_tools=3)
    out = await run(agent, {"messages": [HumanMessage("weather in Paris?")]}, api)
    answers = by_id(out["messages"])
    direct = closest_named(answers["d1"])
    assert direct[0] == "get_weather"
    assert answers["a1"].status == "error" and "not tools that add_tool" in answers["a1"].content
    assert closest_named(answers["a1"], "Closest tools to 'get_wether': ") == direct
    assert closest_named(answers["a2"], "Closest tools to 'Get_Weather': ")[0] == "get_weather"
    assert rec.runs == []
    expected = await run(nodes, {"messages": [HumanMessage("weather in Paris?")]}, api)
    assert_same_as_the_nodes(out, expected, model, node_model)


@pytest.mark.parametrize("api", APIS)
async def test_closest_tools_never_name_a_tool_the_thread_excluded_like_the_nodes(
    catalog, rec, api
):
    def script() -> list[Any]:
        return [
            AIMessage("Which city?"),
            ai_calls(
                call("get_wether", "d1", city="Paris"),
                call("add_tool", "a1", tool_names=["get_wether"]),
            ),
            AIMessage("I cannot check the weather here."),
        ]

    out, expected, model, node_model = await context_turns(
        catalog, script, exclude_tools(tools=["get_weather"]), api, max_tools=3
    )
    answers = by_id(out["messages"])
    for hint in (closest_named(answers["d1"]), closest_named(answers["a1"], "'get_wether': ")):
        assert "weather_forecast" in hint and "get_weather" not in hint
    assert rec.runs == []
    assert_same_as_the_nodes(out, expected, model, node_model)


@pytest.mark.parametrize("api", APIS)
async def test_closest_tools_follow_an_exclusion_made_earlier_in_the_same_reply(catalog, api):
    def script() -> list[Any]:
        return [
            ai_calls(
                call("exclude_tool", "e1", tool="get_weather"),
                call("get_wether", "d1", city="Paris"),
                call("add_tool", "a1", tool_names=["get_wether"]),
            ),
            AIMessage("Done."),
        ]

    agent, nodes, model, node_model = both_ways(
        catalog, script, max_tools=3, enabled_builtins={"allow": ["*"]}
    )
    out = await run(agent, {"messages": [HumanMessage("weather in Paris?")]}, api)
    answers = by_id(out["messages"])
    assert out["context_tools"] == {"get_weather": "exclude"}
    for hint in (closest_named(answers["d1"]), closest_named(answers["a1"], "'get_wether': ")):
        assert hint and "get_weather" not in hint
    expected = await run(nodes, {"messages": [HumanMessage("weather in Paris?")]}, api)
    assert_same_as_the_nodes(out, expected, model, node_model)


@pytest.mark.parametrize("api", APIS)
async def test_a_manual_tool_is_visible_once_included_like_the_nodes(rec, api):
    catalog = recording_catalog(rec, tool_metadata={"add_task": {"include": "manual"}})

    def script() -> list[Any]:
        return [
            AIMessage("Which board?"),
            ai_calls(call("add_task", "t1", project="apollo", title="Blocker")),
            AIMessage("Added."),
        ]

    out, expected, model, node_model = await context_turns(
        catalog, script, include_tools(tools=["add_task"]), api, max_tools=3
    )
    first, second, _ = model.bound_tools
    assert "add_task" not in first, "manual: never chosen by the budget"
    assert "add_task" in second, "included: visible outside the budget"
    assert by_id(out["messages"])["t1"].content == "task 'Blocker' added to apollo"
    assert out["tool_reasons"]["add_task"] == {"why": "included"}
    assert_same_as_the_nodes(out, expected, model, node_model)


@pytest.mark.parametrize("api", APIS)
async def test_the_management_tools_work_through_the_middleware_like_the_nodes(rec, api):
    catalog = recording_catalog(rec, tool_metadata={"add_task": {"include": "manual"}})

    def script() -> list[Any]:
        return [
            ai_calls(
                call("include_tool", "i1", tool="add_task"),
                call("exclude_tool", "e1", tool="list_projects"),
                call("add_task", "t1", project="apollo", title="Blocker"),  # included just now
                call("list_projects", "l1"),  # excluded just now, though the model saw it
            ),
            ai_calls(call("set_tool_include_mode", "s1", tool="create_project", mode="manual")),
            ai_calls(call("list_context_tools", "c1")),
            AIMessage("Done."),
        ]

    agent, nodes, model, node_model = both_ways(
        catalog, script, max_tools=3, enabled_builtins={"allow": ["*"]}
    )
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    first, second, third, _ = model.bound_tools
    assert "include_tool" in first and "add_task" not in first and "list_projects" in first
    assert "add_task" in second and "list_projects" not in second
    assert "create_project" in second and "create_project" not in third
    answers = by_id(out["messages"])
    assert answers["t1"].content == "task 'Blocker' added to apollo"
    assert answers["l1"].status == "error" and "was excluded" in answers["l1"].content
    assert rec.names == ["add_task"]
    assert out["context_tools"] == {"add_task": "include", "list_projects": "exclude"}
    assert out["context_tool_modes"] == {"create_project": "manual"}
    in_context = {row["name"] for row in json.loads(answers["c1"].content)}
    assert "add_task" in in_context and "list_projects" not in in_context
    expected = await run(nodes, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert_same_as_the_nodes(out, expected, model, node_model)


def test_the_agent_state_has_every_field_of_the_node_state_with_its_reducer():
    from langgraph.graph import StateGraph

    from langgraph_toolbudget import ToolBudgetState
    from langgraph_toolbudget.middleware.state import ToolBudgetAgentState
    from langgraph_toolbudget.state import _REDUCERS

    def channels(schema: Any) -> dict[str, Any]:
        graph = StateGraph(schema)
        return {k: (type(c), getattr(c, "operator", None)) for k, c in graph.channels.items()}

    nodes, agent = channels(ToolBudgetState), channels(ToolBudgetAgentState)
    assert {k: agent.get(k) for k in nodes if k != "messages"} == {
        k: v for k, v in nodes.items() if k != "messages"
    }
    # the before_model hook merges the selection nodes' updates with the same reducers
    assert {k: op for k, (_, op) in nodes.items() if op and k != "messages"} == _REDUCERS


# --- threads, composition, streaming ---------------------------------------------------------


def two_turn_script() -> list[Any]:
    return [
        ai_calls(call("request_more_tools", "c1", categories=["github"])),
        AIMessage("Loaded."),
        ai_calls(call("create_issue", "c2", repo="acme/app", title="Crash")),
        AIMessage("Opened."),
    ]


async def two_turns(agent: Any, api: str, thread: str) -> tuple[dict, dict]:
    config = {"configurable": {"thread_id": thread}}
    first = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api, config)
    second = await run(
        agent, {"messages": [HumanMessage("What is the weather in Lima?")]}, api, config
    )
    return first, second


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("saver", ["memory", "sqlite"])
async def test_a_checkpointed_two_turn_thread_keeps_the_visible_set(
    catalog, rec, api, saver, tmp_path
):
    model = ScriptedChatModel(responses=two_turn_script(), cycle=False)
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    path = str(tmp_path / "threads.sqlite")
    if saver == "memory":
        first, second = await two_turns(
            create_agent(model, middleware=[budget], checkpointer=InMemorySaver()), api, "t"
        )
    elif api == "invoke":
        with sqlite3.connect(path, check_same_thread=False) as conn:
            agent = create_agent(model, middleware=[budget], checkpointer=SqliteSaver(conn))
            first, second = await two_turns(agent, api, "t")
    else:
        async with AsyncSqliteSaver.from_conn_string(path) as checkpointer:
            agent = create_agent(model, middleware=[budget], checkpointer=checkpointer)
            first, second = await two_turns(agent, api, "t")
    assert "create_issue" in first["selected_tools"]
    assert first["categories"] == ["projects"] and second["categories"] == ["weather"]
    assert "create_issue" in model.bound_tools[2]  # loaded in turn 1, still visible in turn 2
    assert "get_weather" in model.bound_tools[2]  # turn 2's own selection
    # turn 1's unused choice went; what the thread used or loaded stays
    assert set(second["selected_tools"]) >= {"create_issue", "get_weather"}
    assert not {"create_project", "add_task"} & set(second["selected_tools"])
    assert rec.runs == [("create_issue", {"repo": "acme/app", "title": "Crash"})]
    # the node pipeline over the same thread shows the model the same tools
    node_model = ScriptedChatModel(responses=two_turn_script(), cycle=False)
    nodes = create_toolbudget_agent(node_model, catalog, max_tools=3, offload_over_chars=None)
    await two_turns(nodes.compile(checkpointer=InMemorySaver()), api, "n")
    assert model.bound_tools == node_model.bound_tools


@pytest.mark.parametrize("api", APIS)
async def test_composes_with_summarization_and_human_in_the_loop(catalog, rec, api):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("request_more_tools", "c1", categories=["github"])),
            ai_calls(call("create_issue", "c2", repo="acme/app", title="Crash")),
            AIMessage("Opened."),
        ],
        cycle=False,
    )
    summarizer = ScriptedChatModel(responses=[AIMessage("The user wants an issue.")])
    middleware = [
        SummarizationMiddleware(summarizer, trigger=("messages", 4), keep=("messages", 3)),
        ToolBudgetMiddleware(catalog, max_tools=3),
        HumanInTheLoopMiddleware(interrupt_on={"create_issue": True}),
    ]
    agent = create_agent(model, middleware=middleware, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "hitl"}}
    history = [HumanMessage("hello"), AIMessage("Hi!"), HumanMessage(APOLLO_QUERY)]
    paused = await run(agent, {"messages": history}, api, config)
    (interrupt,) = paused["__interrupt__"]
    assert interrupt.value["action_requests"][0]["name"] == "create_issue"
    assert rec.runs == []  # nothing ran before the human said so
    assert "create_issue" in model.bound_tools[1]
    out = await run(agent, Command(resume={"decisions": [{"type": "approve"}]}), api, config)
    assert rec.runs == [("create_issue", {"repo": "acme/app", "title": "Crash"})]
    assert out["messages"][-1].content == "Opened."
    assert summarizer.calls, "the summarization middleware ran"
    assert "create_issue" in out["selected_tools"]


async def test_visible_set_changes_stream_as_custom_events(catalog):
    model = ScriptedChatModel(responses=wrong_category_script(), cycle=False)
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, max_tools=3)])
    events = [
        chunk
        async for mode, chunk in agent.astream(
            {"messages": [HumanMessage(APOLLO_QUERY)]}, stream_mode=["custom", "updates"]
        )
        if mode == "custom"
    ]
    reasons = [e["reason"] for e in events]
    assert "select_tools" in reasons and "request_more_tools" in reasons
    loaded = next(e for e in events if e["reason"] == "request_more_tools")
    assert "create_issue" in loaded["added"]


@pytest.mark.parametrize("api", APIS)
async def test_enabled_builtins_choose_what_is_bound_and_answered_like_the_nodes(catalog, api):
    def script() -> list[Any]:
        calls = [call("show_all_tools", "x"), call("search_tools", "s", query="issue")]
        return [ai_calls(*calls), "ok"]

    gate = {"deny": ["show_all_tools"]}
    agent, nodes, model, node_model = both_ways(catalog, script, enabled_builtins=gate)
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert "show_all_tools" not in model.bound_tools[0] and "search_tools" in model.bound_tools[0]
    answers = by_id(out["messages"])
    assert answers["x"].status == "error" and answers["s"].status == "success"
    node_out = await run(nodes, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    assert model.bound_tools == node_model.bound_tools
    expected = by_id(node_out["messages"])
    assert {i: m.content for i, m in answers.items()} == {i: m.content for i, m in expected.items()}


def test_bad_options_and_meta_name_clashes_are_named(catalog):
    with pytest.raises(TypeError, match="max_tools"):
        ToolBudgetMiddleware(catalog, max_tools="3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode"):
        ToolBudgetMiddleware(catalog, mode="fast")  # type: ignore[arg-type]
    budget = ToolBudgetMiddleware(catalog, config=BudgetConfig(max_tools=4), search_limit=2)
    assert (budget.config.budget, budget.config.search_limit) == (4, 2)
    assert [t.name for t in budget.tools][:4] == META
    assert {t.name for t in budget.tools[4:]} == set(catalog.tool_names)


# --- a native call's integer outside 64 bits -------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_a_native_calls_integer_outside_64_bits_is_kept_as_text_with_a_checkpointer(
    catalog, rec, api
):
    """create_agent alone fails saving such a reply (TypeError: not msgpack serializable);
    with the middleware the number is its text in the state, as the text formats keep it, and
    the tool still receives the int (coercion of its integer field)."""
    big = 2**64
    reply = ai_calls(call("merge_pull_request", "b1", repo="acme/app", number=big))
    model = ScriptedChatModel(responses=[reply, AIMessage("merged"), AIMessage("hi")], cycle=False)
    budget = ToolBudgetMiddleware(catalog, pinned=["merge_pull_request"])
    agent = create_agent(model, middleware=[budget], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "wide"}}
    out = await run(agent, {"messages": [HumanMessage("merge it")]}, api, config)
    assert rec.runs == [("merge_pull_request", {"repo": "acme/app", "number": big})]
    assert by_id(out["messages"])["b1"].content == f"merged acme/app#{big}"
    (stored,) = [m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert stored.tool_calls[0]["args"] == {"repo": "acme/app", "number": str(big)}
    out = await run(agent, {"messages": [HumanMessage("thanks")]}, api, config)
    assert out["messages"][-1].content == "hi" and str(big) in str(model.calls[-1])


def test_a_hidden_tool_is_not_sent_to_add_tool_once_the_turns_meta_calls_are_spent() -> None:
    catalog = build_example_catalog()
    searches = [
        {"name": "search_tools", "args": {"query": f"nothing{i}"}, "id": f"s{i}"} for i in range(2)
    ]
    hidden = {"name": "send_message", "args": {"channel": "#general", "text": "hi"}, "id": "h"}
    model = ScriptedChatModel(
        responses=[AIMessage("", tool_calls=searches), AIMessage("", tool_calls=[hidden]), "done"]
    )
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, max_meta_calls=2)])
    out = agent.invoke({"messages": [HumanMessage("weather in Paris")]})
    (refusal,) = [m for m in out["messages"] if m.type == "tool" and m.tool_call_id == "h"]
    assert refusal.status == "error" and "is not loaded" in refusal.content
    assert "add_tool" not in refusal.content
    assert "Calls to the meta-tools are refused for the rest of this turn" in refusal.content


# --- the options of a text tool-call format: refused, create_agent binds natively ------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"model_supports_tools": False}, "model_supports_tools=False"),
        ({"tool_call_formats": "hermes"}, "tool_call_formats={'primary': 'hermes', ...}"),
        (
            {"tool_call_formats": {"enabled": ["native", "pythonic"], "primary": "pythonic"}},
            "tool_call_formats={'primary': 'pythonic', ...}",
        ),
    ],
)
@pytest.mark.parametrize("given", ["keyword", "config"])
def test_the_options_of_a_text_tool_call_format_are_refused_with_what_to_use(options, named, given):
    """The nodes show a model without tool calling its tools in a text format; create_agent
    binds them natively and the middleware reads no text format: refused, not ignored."""
    kwargs = {"config": BudgetConfig(**options)} if given == "config" else options
    with pytest.raises(ValueError, match="create_toolbudget_agent") as refused:
        ToolBudgetMiddleware(build_example_catalog(), **kwargs)
    assert f"does not take {named}" in str(refused.value)
    assert "bind_tools" in str(refused.value)


@pytest.mark.parametrize(
    "options",
    [
        {"model_supports_tools": True},
        {"model_supports_tools": None},
        {"tool_call_formats": {"enabled": ["native", "hermes"], "primary": "native"}},
        {"tool_call_formats": {"enabled": ["native", "codemode"], "primary": "codemode"}},
    ],
)
def test_native_and_codemode_tool_call_options_are_taken(options):
    budget = ToolBudgetMiddleware(build_example_catalog(), **options)
    model = ScriptedChatModel(responses=["hi"], cycle=False)
    out = create_agent(model, middleware=[budget]).invoke({"messages": [HumanMessage("hello")]})
    assert out["messages"][-1].content == "hi" and model.bound_tools


def test_codemode_off_with_a_text_format_to_fall_back_to_is_refused():
    # The nodes fall back to hermes (nothing bound); the middleware bound natively and the
    # calls the model wrote in hermes never ran.
    formats = {"enabled": ["codemode", "hermes"], "primary": "codemode"}
    off = {"deny": ["python_execution"]}
    with pytest.raises(ValueError, match="fall back to 'hermes'.*Enable python_execution"):
        ToolBudgetMiddleware(
            build_example_catalog(), tool_call_formats=formats, enabled_builtins=off
        )
    # a native fallback is what the middleware does anyway
    native = {"enabled": ["codemode", "native", "hermes"], "primary": "codemode"}
    ToolBudgetMiddleware(build_example_catalog(), tool_call_formats=native, enabled_builtins=off)
