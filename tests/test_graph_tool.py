"""graph_tool: real child graphs as tools, alone and through ToolExecutor in a parent graph,
under invoke and ainvoke: threads, aliases, schemas, errors, timeouts and interrupts."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from dataclasses import dataclass
from typing import Any, TypedDict

import pytest
from agent_tools import ai_calls, call
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool as make_tool
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt
from pydantic import BaseModel, Field

from langgraph_toolbudget import (
    ToolAgent,
    ToolBudgetInput,
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.coercion import tool_json_schema
from langgraph_toolbudget.nodes.graph_tool import child_thread_id, graph_tool
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]


# --- real child graphs ----------------------------------------------------------------------


class EchoState(MessagesState, total=False):
    topic: str
    seen: dict[str, Any]


def echo_child(checkpointer: Any = None) -> Any:
    """Answers with the text of every human message, the topic, and what it saw of its config."""

    def echo(state: EchoState, config: RunnableConfig) -> dict[str, Any]:
        heard = " | ".join(m.text for m in state["messages"] if isinstance(m, HumanMessage))
        conf = config["configurable"]
        seen = {"thread_id": conf["thread_id"], "user": conf.get("user_id")}
        seen["ns"] = conf.get("checkpoint_ns", "")  # its own node's namespace, not "tools:..."
        answer = AIMessage(f"echo: {heard} (topic={state.get('topic')})")
        return {"messages": [answer], "seen": seen}

    builder = StateGraph(EchoState)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    return builder.compile(checkpointer=checkpointer)


def raising_child() -> Any:
    def fail(state: MessagesState) -> dict[str, Any]:
        raise RuntimeError("the disk is on fire")

    builder = StateGraph(MessagesState)
    builder.add_node("fail", fail)
    builder.add_edge(START, "fail")
    return builder.compile()


def sleeping_child(events: list[str]) -> Any:
    async def slow(state: MessagesState) -> dict[str, Any]:
        events.append("child started")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            events.append("child cancelled")
            raise
        events.append("child finished")
        return {"messages": [AIMessage("late")]}

    builder = StateGraph(MessagesState)
    builder.add_node("slow", slow)
    builder.add_edge(START, "slow")
    return builder.compile()


def asking_child() -> Any:
    def ask(state: MessagesState) -> dict[str, Any]:
        city = interrupt({"question": "which city?"})
        return {"messages": [AIMessage(f"booked {city}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    return builder.compile(checkpointer=MemorySaver())


def looping_child() -> Any:
    def spin(state: MessagesState) -> dict[str, Any]:
        return {}

    builder = StateGraph(MessagesState)
    builder.add_node("spin", spin)
    builder.add_edge(START, "spin")
    builder.add_edge("spin", "spin")
    return builder.compile()


class TripState(TypedDict, total=False):
    city: str
    days: int
    plan: str


class Trip(BaseModel):
    city: str = Field(description="Where to go.")
    days: int = Field(ge=1, description="How many days.")


def trip_child() -> Any:
    def plan(state: TripState) -> dict[str, Any]:
        return {"plan": f"{state['days']} days in {state['city']}"}

    builder = StateGraph(TripState)
    builder.add_node("plan", plan)
    builder.add_edge(START, "plan")
    return builder.compile()


# --- a parent graph: START -> tools (ToolExecutor) -> after -> END ---------------------------


def parent_graph(tool: Any, events: list[str] | None = None, checkpointer: Any = None) -> Any:
    def after(state: ToolBudgetState) -> dict[str, Any]:
        if events is not None:
            events.append("parent done")
        return {}

    builder = StateGraph(ToolBudgetState)
    builder.add_node("tools", ToolExecutor(ToolCatalog.from_tools([tool])))
    builder.add_node("after", after)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", "after")
    builder.add_edge("after", END)
    return builder.compile(checkpointer=checkpointer)


def turn(name: str, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A parent input: a user message and an AI message calling ``name``."""
    ai = ai_calls(*(call(name, call_id, **args) for call_id, args in calls))
    return {"messages": [HumanMessage("go"), ai], "selected_tools": [name]}


async def run(runnable: Any, value: Any, api: str, config: Any = None) -> Any:
    if api == "invoke":
        return await asyncio.to_thread(runnable.invoke, value, config)
    return await runnable.ainvoke(value, config)


def results(state: dict[str, Any]) -> list[tuple[ToolMessage, dict[str, Any]]]:
    messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    return [(m, json.loads(m.content)) for m in messages]


# --- through ToolExecutor: threads and checkpoints ------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_gives_each_call_its_own_child_thread_with_its_checkpoint(api):
    child = echo_child(MemorySaver())
    parent = parent_graph(graph_tool(child, name="echo", description="Echo."), None, MemorySaver())
    config = {"configurable": {"thread_id": "parent-1", "user_id": "ana"}}
    first = turn("echo", ("c1", {"input": "one"}), ("c2", {"input": "two"}))
    state = await run(parent, first, api, config)
    second = {"messages": [ai_calls(call("echo", "c3", input="three"))]}
    state = await run(parent, second, api, config)

    found = results(state)
    # each thread is named by the parent's thread, the tools task's namespace and the call
    first_task, second_task = reversed(
        [s.tasks[0].id for s in parent.get_state_history(config) if s.next == ("tools",)]
    )
    assert [r["thread_id"] for _, r in found] == [
        child_thread_id("parent-1", "echo", c, checkpoint_ns=f"tools:{task}")
        for c, task in (("c1", first_task), ("c2", first_task), ("c3", second_task))
    ]
    assert len({r["thread_id"] for _, r in found}) == 3
    for (message, result), text in zip(found, ("one", "two", "three"), strict=True):
        assert message.status == "success"
        assert result["mode"] == "graph" and result["graph"] == "echo"
        assert result["status"] == "success"
        assert result["output"] == f"echo: {text} (topic=None)"
        # the child saw its own thread, the parent's user key, none of the parent's checkpoint
        seen = result["context"]["seen"]
        assert seen["ns"].startswith("echo:") and "tools" not in seen["ns"]
        assert {k: seen[k] for k in ("thread_id", "user")} == {
            "thread_id": result["thread_id"],
            "user": "ana",
        }
        snapshot = child.get_state({"configurable": {"thread_id": result["thread_id"]}})
        assert [m.text for m in snapshot.values["messages"]] == [text, result["output"]]
    assert parent.get_state(config).next == ()


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_without_a_parent_thread_uses_a_fresh_thread_per_call(api):
    tool = graph_tool(echo_child(MemorySaver()), name="echo", description="Echo.")
    state = await run(parent_graph(tool), turn("echo", ("c1", {"input": "a"})), api)
    again = await run(parent_graph(tool), turn("echo", ("c1", {"input": "a"})), api)
    (_, one), (_, two) = results(state)[0], results(again)[0]
    assert one["thread_id"] != two["thread_id"]
    assert uuid.UUID(one["thread_id"]) and uuid.UUID(one["run_id"])


async def test_graph_tool_child_run_id_is_the_reported_run_id_and_callbacks_flow():
    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.names: dict[str, str] = {}

        def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
            self.names[str(kwargs["run_id"])] = kwargs.get("name") or ""

    handler = Runs()
    tool = graph_tool(echo_child(), name="echo", description="Echo.")
    state = await parent_graph(tool).ainvoke(
        turn("echo", ("c1", {"input": "hi"})), {"callbacks": [handler]}
    )
    (_, result) = results(state)[0]
    assert result["run_id"] in handler.names  # the child graph's root run, seen by the parent's
    assert "echo" in handler.names.values()  # callbacks, down to the child's own node


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_parent_recursion_limit_bounds_the_child(api):
    tool = graph_tool(looping_child(), name="spin", description="Spin.")
    state = await run(
        parent_graph(tool), turn("spin", ("c1", {"input": "go"})), api, {"recursion_limit": 7}
    )
    message, result = results(state)[0]
    assert message.status == "error"
    assert result["status"] == "error"
    assert result["error"]["type"] == "GraphRecursionError"
    assert "7" in result["error"]["message"]


# --- input: the aliases, and what the model sees ----------------------------------------------


def test_graph_tool_default_schema_is_small_input_and_context():
    tool = graph_tool(echo_child(), name="echo", description="Echo.")
    schema = tool_json_schema(tool)
    assert set(schema["properties"]) == {"input", "context"}
    assert schema["required"] == ["input"]
    assert schema["properties"]["context"]["type"] == "object"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "args, output, context",
    [
        ({"input": "hi"}, "echo: hi (topic=None)", None),
        ({"text": "hi"}, "echo: hi (topic=None)", None),
        ({"query": "hi"}, "echo: hi (topic=None)", None),
        (
            {"messages": ["first", {"role": "user", "content": "second"}], "input": "third"},
            "echo: first | second | third (topic=None)",
            None,
        ),
        ({"input": "hi", "context": {"topic": "maps"}}, "echo: hi (topic=maps)", "maps"),
        ({"messages": [{"role": "user", "content": "m"}]}, "echo: m (topic=None)", None),
    ],
)
async def test_graph_tool_accepts_the_caller_aliases(api, args, output, context):
    tool = graph_tool(echo_child(), name="echo", description="Echo.")
    result = json.loads(await run(tool, args, api))
    assert result["status"] == "success"
    assert result["output"] == output
    assert result["context"].get("topic") == context


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_aliases_survive_the_executors_coercion(api):
    tool = graph_tool(echo_child(), name="echo", description="Echo.")
    calls = [("c1", {"text": "via text"}), ("c2", {"input": "x", "context": '{"topic": "t"}'})]
    state = await run(parent_graph(tool), turn("echo", *calls), api)
    assert [r["output"] for _, r in results(state)] == [
        "echo: via text (topic=None)",
        "echo: x (topic=t)",
    ]


@pytest.mark.parametrize(
    "args, problem",
    [
        ({}, "input"),  # nothing at all
        ({"input": "x", "bogus": 1}, "bogus"),  # an unknown key is not dropped silently
        ({"input": ""}, "got nothing to send"),
        ({"messages": [{"role": "nobody", "content": "x"}]}, "`messages` must be"),
    ],
)
def test_graph_tool_bad_default_arguments_raise_a_clear_error(args, problem):
    tool = graph_tool(echo_child(), name="echo", description="Echo.")
    with pytest.raises(ValueError, match=problem):
        tool.invoke(args)


# --- input_schema -------------------------------------------------------------------------------


TRIP_JSON_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city", "days"],
}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("schema", [Trip, TRIP_JSON_SCHEMA], ids=["pydantic", "json-schema"])
async def test_graph_tool_input_schema_validates_and_becomes_the_child_state(api, schema):
    tool = graph_tool(trip_child(), name="plan_trip", description="Plan.", input_schema=schema)
    assert set(tool_json_schema(tool)["properties"]) == {"city", "days"}
    calls = [
        ("good", {"city": "Lima", "days": "3"}),  # "3" -> 3 by the executor's coercion
        ("zero", {"city": "Lima", "days": 0}),
        ("missing", {"days": 2}),
    ]
    state = await run(parent_graph(tool), turn("plan_trip", *calls), api)
    good, zero, missing = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    result = json.loads(good.content)
    assert good.status == "success"
    assert result["output"] == {"city": "Lima", "days": 3, "plan": "3 days in Lima"}
    assert "context" not in result  # no messages: the whole state is the output
    for message, field in ((zero, "days"), (missing, "city")):
        assert message.status == "error"
        assert "plan_trip" in message.content and field in message.content
        assert '"required"' in message.content  # the expected schema, to fix the call


# --- failures the model hears about -------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_child_exception_becomes_status_error(api):
    tool = graph_tool(raising_child(), name="fragile", description="Fails.")
    state = await run(parent_graph(tool), turn("fragile", ("c1", {"input": "go"})), api)
    message, result = results(state)[0]
    assert message.status == "error"
    assert result["status"] == "error"
    assert result["error"] == {"type": "RuntimeError", "message": "the disk is on fire"}
    assert "output" not in result
    # called alone, the tool answers with the same result instead of raising
    direct = json.loads(await run(tool, {"input": "go"}, api))
    assert direct["status"] == "error" and direct["error"]["type"] == "RuntimeError"


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_timeout_cancels_the_child_and_the_parent_finishes(api):
    events: list[str] = []
    tool = graph_tool(sleeping_child(events), name="slow", description="Slow.", timeout_s=0.5)
    assert tool.metadata is not None
    assert tool.metadata["is_pure"] is False and tool.metadata["timeout_s"] > 0.5
    state = await run(parent_graph(tool, events), turn("slow", ("c1", {"input": "go"})), api)
    message, result = results(state)[0]
    assert events == ["child started", "child cancelled", "parent done"]
    assert message.status == "error"
    assert result["status"] == "timeout"
    assert result["error"]["type"] == "TimeoutError"
    assert "0.5 s" in result["error"]["message"]


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_timeout_alone(api):
    events: list[str] = []
    tool = graph_tool(sleeping_child(events), name="slow", description="Slow.", timeout_s=0.5)
    result = json.loads(await run(tool, {"input": "go"}, api))
    events.append("tool returned")
    assert result["status"] == "timeout"
    assert events == ["child started", "child cancelled", "tool returned"]


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_child_interrupt_becomes_status_interrupted(api):
    child = asking_child()
    tool = graph_tool(child, name="booker", description="Books.")
    parent = parent_graph(tool, None, MemorySaver())
    config = {"configurable": {"thread_id": "p"}}
    state = await run(parent, turn("booker", ("c1", {"input": "book a trip"})), api, config)
    message, result = results(state)[0]
    assert message.status == "error"
    assert result["status"] == "interrupted"
    assert result["interrupts"] == [{"question": "which city?"}]
    assert result["error"]["type"] == "GraphInterrupt"
    assert result["thread_id"] in result["error"]["message"]
    assert parent.get_state(config).next == ()  # the parent was not interrupted
    # the child's thread waits at its interrupt and can be resumed by whoever owns it
    child_config = {"configurable": {"thread_id": result["thread_id"]}}
    resumed = await run(child, Command(resume="Lima"), api, child_config)
    assert resumed["messages"][-1].text == "booked Lima"


# --- a model calling the graph tool in the prebuilt agent ---------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_in_the_prebuilt_agent(api):
    tool = graph_tool(echo_child(), name="echo", description="Repeat a request back.")
    model = ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[call("echo", "c1", input="hello")]),
            lambda messages, tools: AIMessage(f"The graph said: {messages[-1].content}"),
        ]
    )
    app = create_toolbudget_agent(model, ToolCatalog.from_tools([tool]), pinned=["echo"]).compile()
    state = await run(app, {"messages": [HumanMessage("please echo hello")]}, api)
    (_, result) = results(state)[0]
    assert result["output"] == "echo: hello (topic=None)"
    assert '"status": "success"' in state["messages"][-1].content
    assert "echo" in model.bound_tools[0]


def talking_child() -> Any:
    """A child whose model streams its answer word by word."""
    model = GenericFakeChatModel(messages=iter([AIMessage("CHILD_WORDS from the child")]))

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=MemorySaver())


@pytest.mark.parametrize("subgraphs", [False, True])
@pytest.mark.parametrize("timeout_s", [None, 30])
@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_child_tokens_stay_out_of_the_parents_messages_stream(
    api, timeout_s, subgraphs
):
    # The child runs on a thread of its own: its tokens and messages came into the parent's
    # `messages` stream as the root graph's own (namespace (), node "agent", the parent's
    # thread), so a client showed the sub-agent's words as the agent's answer.
    tool = graph_tool(talking_child(), name="ask", description="Ask.", timeout_s=timeout_s)
    parent = ScriptedChatModel(
        responses=[ai_calls(call("ask", "c1", input="hi")), AIMessage("PARENT_ANSWER")]
    )
    app = create_toolbudget_agent(parent, ToolCatalog.from_tools([tool]), pinned=["ask"]).compile(
        checkpointer=MemorySaver()
    )
    inputs = {"messages": [HumanMessage("go")]}
    options: dict[str, Any] = {"stream_mode": "messages", "subgraphs": subgraphs}
    config = {"configurable": {"thread_id": "parent"}}
    if api == "invoke":
        chunks = await asyncio.to_thread(lambda: list(app.stream(inputs, config, **options)))
    else:
        chunks = [chunk async for chunk in app.astream(inputs, config, **options)]
    if subgraphs:
        chunks = [chunk for _, chunk in chunks]
    shown = [(m.type, m.text, meta["langgraph_node"]) for m, meta in chunks]
    assert not [m for m in shown if m[0] != "tool" and "CHILD_WORDS" in m[1]], shown
    (answer,) = [m for m in shown if m[0] == "tool"]
    assert "CHILD_WORDS from the child" in answer[1]  # the child's answer, as the tool's
    assert "PARENT_ANSWER" in "".join(text for _, text, node in shown if node == "agent")


@make_tool
def child_lookup(q: str) -> str:
    """The child's own tool."""
    return "from the child's tool"


def tool_calling_child() -> Any:
    """A child agent that calls its own tool (a ToolNode) once, then answers."""

    def agent(state: MessagesState) -> dict[str, Any]:
        if any(isinstance(m, ToolMessage) for m in state["messages"]):
            return {"messages": [AIMessage("child answer")]}
        return {"messages": [ai_calls(call("child_lookup", "child_call", q="x"))]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([child_lookup]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile()


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_child_tool_calls_stay_out_of_the_parents_tools_stream(api):
    # stream_mode="tools" (LangGraph 1.2): the child's own tool calls came as the parent's
    # root graph's, under a call id no message of the parent has.
    pytest.importorskip("langgraph.pregel._tools", reason="a LangGraph without the tools stream")
    tool = graph_tool(tool_calling_child(), name="ask", description="Ask.")
    parent = ScriptedChatModel(responses=[ai_calls(call("ask", "c1", input="hi")), "bye"])
    app = create_toolbudget_agent(parent, ToolCatalog.from_tools([tool]), pinned=["ask"]).compile()
    inputs = {"messages": [HumanMessage("go")]}
    options: dict[str, Any] = {"stream_mode": "tools", "subgraphs": True}
    if api == "invoke":
        chunks = await asyncio.to_thread(lambda: list(app.stream(inputs, **options)))
    else:
        chunks = [chunk async for chunk in app.astream(inputs, **options)]
    ids = {event.get("tool_call_id") for _, event in chunks}
    assert ids == {"c1"}, chunks


@dataclass
class Account:
    user_id: str


def account_child() -> Any:
    """A child reading the run's runtime context (its ``context_schema``)."""

    def answer(state: MessagesState, runtime: Runtime[Account]) -> dict[str, Any]:
        who = runtime.context.user_id if runtime.context else None
        return {"messages": [AIMessage(f"account of {who}")]}

    builder = StateGraph(MessagesState, context_schema=Account)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    return builder.compile()


@pytest.mark.parametrize("timeout_s", [None, 30])
@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_child_gets_the_runs_runtime_context_as_a_subgraph_does(api, timeout_s):
    # It got none: "account of None", reported as a success.
    tool = graph_tool(account_child(), name="account", description="Ask.", timeout_s=timeout_s)
    model = ScriptedChatModel(responses=[ai_calls(call("account", "c1", input="balance")), "ok"])
    app = create_toolbudget_agent(model, ToolCatalog.from_tools([tool]), pinned=["account"])
    graph = app.compile()
    payload = {"messages": [HumanMessage("my balance")]}
    if api == "invoke":
        out = await asyncio.to_thread(graph.invoke, payload, context=Account("ada"))
    else:
        out = await graph.ainvoke(payload, context=Account("ada"))
    (_, result) = results(out)[0]
    assert result["output"] == "account of ada"


# --- time travel: the child thread follows the parent's branch, as a subgraph does ------------


def ask_child_then_answer(messages: list[Any], tools: Any) -> AIMessage:
    """Calls ``ask_child`` (always id ``g1``) with the last user message, then answers."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage("ok")
    return ai_calls(call("ask_child", "g1", input=messages[-1].text))


def agent_app(kind: str, tool: Any) -> Any:
    """The agent calling ``tool`` as each of the package's three ways builds one."""
    model = ScriptedChatModel(responses=[ask_child_then_answer])
    catalog = ToolCatalog.from_tools([tool], default_include="always")
    if kind == "prebuilt":
        return create_toolbudget_agent(model, catalog).compile(checkpointer=MemorySaver())
    if kind == "middleware":  # create_agent: each call its own Send task
        return create_agent(
            model, middleware=[ToolBudgetMiddleware(catalog)], checkpointer=MemorySaver()
        )
    builder = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    builder.add_node("agent", ToolAgent(model, catalog))  # the tools step inside a subgraph
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=MemorySaver())


def ai_node(app: Any) -> str:
    return "agent" if "agent" in app.nodes else "model"


def child_turns(child: Any, thread_id: str) -> list[str]:
    return [
        m.text
        for m in child.get_state({"configurable": {"thread_id": thread_id}}).values["messages"]
    ]


@pytest.mark.parametrize("timeout_s", [None, 30])
@pytest.mark.parametrize("kind", ["prebuilt", "middleware"])
@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_an_edited_call_in_a_fork_runs_a_fresh_child(api, kind, timeout_s):
    # LangGraph's "edit the tool call": fork before the tools step, same message id and call id
    child = echo_child(MemorySaver())
    tool = graph_tool(child, name="ask_child", description="Ask.", timeout_s=timeout_s)
    app = agent_app(kind, tool)
    config = {"configurable": {"thread_id": "p"}}
    ((_, first),) = results(
        await run(app, {"messages": [HumanMessage("branch A secret")]}, api, config)
    )

    before = next(s for s in app.get_state_history(config) if s.next == ("tools",))
    ai = before.values["messages"][-1]
    edited = AIMessage("", id=ai.id, tool_calls=[{**ai.tool_calls[0], "args": {"input": "B"}}])
    fork = app.update_state(before.config, {"messages": [edited]}, as_node=ai_node(app))
    *_, (_, second) = results(await run(app, None, api, fork))

    # was: "echo: branch A secret | B": branch B's child read branch A's child history
    assert second["output"] == "echo: B (topic=None)"
    assert second["thread_id"] != first["thread_id"]
    assert child_turns(child, first["thread_id"]) == ["branch A secret", first["output"]]


@pytest.mark.parametrize("kind", ["prebuilt", "middleware", "tool_agent"])
@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_a_replay_or_a_fork_of_the_parent_runs_a_fresh_child(api, kind):
    # As LangGraph's own subgraphs (checkpointer=None or True): a replay from a checkpoint
    # before the call starts the child from what it had then, which for a per-call child is
    # nothing; the replayed branch's child never reads the first run's child history.
    child = echo_child(MemorySaver())
    app = agent_app(kind, graph_tool(child, name="ask_child", description="Ask."))
    config = {"configurable": {"thread_id": "p"}}
    ((_, first),) = results(await run(app, {"messages": [HumanMessage("hello")]}, api, config))
    step = "agent" if kind == "tool_agent" else "tools"
    before = next(s for s in app.get_state_history(config) if s.next == (step,))

    *_, (_, replayed) = results(await run(app, None, api, before.config))
    assert replayed["output"] == "echo: hello (topic=None)"  # was "echo: hello | hello"
    assert replayed["thread_id"] != first["thread_id"]

    # a fork with the user message edited (the scripted model reuses the call id "g1")
    *_, start = (
        s
        for s in app.get_state_history(config)
        if [m.type for m in s.values.get("messages", [])] == ["human"]
    )
    asked = start.values["messages"][-1]
    fork = app.update_state(start.config, {"messages": [HumanMessage("other", id=asked.id)]})
    *_, (_, forked) = results(await run(app, None, api, fork))
    assert forked["output"] == "echo: other (topic=None)"
    assert len({first["thread_id"], replayed["thread_id"], forked["thread_id"]}) == 3
    assert child_turns(child, first["thread_id"]) == ["hello", first["output"]]


@pytest.mark.parametrize("checkpointer", [MemorySaver, None], ids=["saver", "no_saver"])
@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_a_call_id_used_again_in_a_later_turn_gets_a_fresh_child(
    api, checkpointer
):
    # some models number their calls per reply ("call_0"): a later turn is a new task
    child = echo_child(MemorySaver())
    saver = checkpointer() if checkpointer else None
    parent = parent_graph(graph_tool(child, name="echo", description="Echo."), None, saver)
    config = {"configurable": {"thread_id": "p"}}
    ((_, one),) = results(await run(parent, turn("echo", ("c1", {"input": "one"})), api, config))
    *_, (_, two) = results(await run(parent, turn("echo", ("c1", {"input": "two"})), api, config))
    assert two["output"] == "echo: two (topic=None)"  # was "echo: one | two"
    assert one["thread_id"] != two["thread_id"]


@pytest.mark.parametrize("api", APIS)
async def test_graph_tool_a_resumed_parent_task_runs_its_call_on_the_same_child_thread(api):
    # a reply's calls are one step: when another call interrupts, the resume runs the step
    # again, and the graph tool's call goes back to the child thread it had
    @make_tool
    def ask(question: str) -> str:
        """Ask the user."""
        return str(interrupt(question))

    child = echo_child(MemorySaver())
    tools = [graph_tool(child, name="echo", description="Echo."), ask]
    builder = StateGraph(ToolBudgetState)
    builder.add_node("tools", ToolExecutor(ToolCatalog.from_tools(tools)))
    builder.add_edge(START, "tools")
    parent = builder.compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "p"}}
    ai = ai_calls(call("echo", "c1", input="one"), call("ask", "c2", question="sure?"))
    await run(
        parent,
        {"messages": [HumanMessage("go"), ai], "selected_tools": ["echo", "ask"]},
        api,
        config,
    )
    assert parent.get_state(config).next == ("tools",)  # waiting at the interrupt
    state = await run(parent, Command(resume="yes"), api, config)

    echoed, answer = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    result = json.loads(echoed.content)
    assert answer.content == "yes" and result["status"] == "success"
    ran_on = {c.config["configurable"]["thread_id"] for c in child.checkpointer.list(None)}
    assert ran_on == {result["thread_id"]}


# --- construction errors name the argument ------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, argument",
    [
        ({"graph": StateGraph(MessagesState)}, TypeError, "graph="),
        ({"graph": object()}, TypeError, "graph="),
        ({"name": ""}, ValueError, "name="),
        ({"name": 3}, TypeError, "name="),
        ({"description": None}, TypeError, "description="),
        ({"description": "  "}, ValueError, "description="),
        ({"timeout_s": 0}, ValueError, "timeout_s="),
        ({"timeout_s": -1.5}, ValueError, "timeout_s="),
        ({"timeout_s": math.nan}, ValueError, "timeout_s="),
        ({"timeout_s": math.inf}, ValueError, "timeout_s="),
        ({"timeout_s": True}, TypeError, "timeout_s="),
        ({"timeout_s": "5"}, TypeError, "timeout_s="),
        ({"input_schema": str}, TypeError, "input_schema="),
        ({"input_schema": [("city", str)]}, TypeError, "input_schema="),
        ({"input_schema": {"type": 5}}, ValueError, "input_schema="),
    ],
)
def test_graph_tool_rejects_bad_arguments_naming_them(kwargs, error, argument):
    args: dict[str, Any] = {"graph": echo_child(), "name": "echo", "description": "Echo."}
    with pytest.raises(error, match=argument.replace("(", r"\(")):
        graph_tool(**{**args, **kwargs})
