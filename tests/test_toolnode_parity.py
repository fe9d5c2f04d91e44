"""ToolExecutor as ToolNode: its constructor arguments, input and output shapes, what it raises,
the Commands it validates, and the agents that accept only a ToolNode; each case is compared
with LangGraph's ToolNode over the same tools in the same run, under invoke and ainvoke."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import (
    InjectedState,
    InjectedStore,
    ToolNode,
    ToolRuntime,
    create_react_agent,
    tools_condition,
)
from langgraph.prebuilt.tool_node import ToolInvocationError
from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from langgraph_toolbudget import ToolCatalog, ToolExecutor
from langgraph_toolbudget.execution.errors import TOOLNODE_DEFAULT
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]


@tool
def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    if text == "boom":
        raise TypeError("cannot shout boom")
    return text.upper()


@tool
def tool_names(runtime: ToolRuntime) -> str:
    """The names of the tools the node runs."""
    return ",".join(sorted(t.name for t in runtime.tools))


@tool
def remember(key: str, store: Annotated[Any, InjectedStore()]) -> str:
    """Save a key."""
    store.put(("notes",), key, {"v": 1})
    return "saved"


@tool
def read_topic(topic: Annotated[str, InjectedState("topic")]) -> str:
    """Read the topic from the state."""
    return topic


@tool
def bad_command(x: int) -> Command:
    """Return a Command that lacks this call's tool message."""
    return Command(update={"messages": []})


TOOLS = [divide, shout, tool_names, remember, read_topic, bad_command]


def call(name: str, args: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def ai(*calls: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=list(calls))


def executor(**kwargs: Any) -> ToolExecutor:
    """A budget ToolExecutor over a catalog (every tool visible: it is in selected_tools)."""
    return ToolExecutor(ToolCatalog.from_tools(TOOLS), **kwargs)


def outside_a_graph() -> dict[str, Any]:
    """The config a graph gives its nodes (ToolNode needs LangGraph's Runtime in it)."""
    return {"configurable": {"__pregel_runtime": Runtime(stream_writer=lambda _: None)}}


async def run(node: Any, value: Any, api: str) -> Any:
    if api == "invoke":
        return await asyncio.to_thread(node.invoke, value, outside_a_graph())
    return await node.ainvoke(value, outside_a_graph())


def state(*calls: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "messages": [HumanMessage("hi"), ai(*calls)],
        "selected_tools": [t.name for t in TOOLS],
        **extra,
    }


def messages(output: Any) -> list[ToolMessage]:
    return output["messages"] if isinstance(output, dict) else output


def test_toolexecutor_is_a_toolnode_with_its_tools():
    node = executor()
    assert isinstance(node, ToolNode)
    assert list(node.tools_by_name) == list(ToolNode(TOOLS).tools_by_name)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "flag",
    [True, "try again", (ZeroDivisionError,), ZeroDivisionError],
    ids=["true", "str", "tuple", "type"],
)
async def test_handle_tool_errors_forms_answer_as_toolnode(api, flag):
    calls = [call("divide", {"a": 1, "b": 0}, "c1"), call("divide", {"a": "x", "b": 1}, "c2")]
    toolnode = ToolNode(TOOLS, handle_tool_errors=flag)
    try:
        theirs: Any = await run(toolnode, {"messages": [ai(*calls)]}, api)
    except ToolInvocationError as error:
        theirs = error
    node = executor(handle_tool_errors=flag)
    if isinstance(flag, bool | str):  # every error handled: same messages
        ours = await run(node, state(*calls), api)
        assert [m.content for m in ours["messages"]] == [m.content for m in theirs["messages"]]
        assert {m.status for m in ours["messages"]} == {"error"}
    else:  # only ZeroDivisionError handled: the invalid argument is raised, as by ToolNode
        with pytest.raises(ToolInvocationError) as raised:
            await run(node, state(*calls), api)
        assert str(raised.value) == str(theirs)


@pytest.mark.parametrize("api", APIS)
async def test_handle_tool_errors_callable_handles_its_annotated_type_only(api):
    def handler(error: ZeroDivisionError) -> str:
        return f"handled {type(error).__name__}"

    node = executor(handle_tool_errors=handler)
    out = await run(node, state(call("divide", {"a": 1, "b": 0})), api)
    assert out["messages"][0].content == "handled ZeroDivisionError"
    with pytest.raises(TypeError, match="cannot shout boom"):
        await run(node, state(call("shout", {"text": "boom"})), api)


@pytest.mark.parametrize("api", APIS)
async def test_default_errors_are_explained_and_false_raises(api):
    out = await run(executor(), state(call("divide", {"a": "x", "b": 1})), api)
    assert out["messages"][0].status == "error"
    assert '"b"' in out["messages"][0].content and "schema" in out["messages"][0].content.lower()
    with pytest.raises(ZeroDivisionError):
        await run(executor(handle_tool_errors=False), state(call("divide", {"a": 1, "b": 0})), api)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("build", ["from_tools", "catalog"])
async def test_toolnode_default_raises_tool_errors_and_answers_bad_arguments(api, build):
    if build == "from_tools":
        node = ToolExecutor.from_tools(TOOLS)
    else:
        node = executor(handle_tool_errors=TOOLNODE_DEFAULT, enforce_visibility=False)
    with pytest.raises(ZeroDivisionError):
        await run(node, {"messages": [ai(call("divide", {"a": 1, "b": 0}))]}, api)
    value = {"messages": [ai(call("divide", {"a": "x", "b": 1}))]}
    ours = await run(node, value, api)
    theirs = await run(ToolNode(TOOLS), value, api)
    assert ours["messages"] == theirs["messages"]


@pytest.mark.parametrize("api", APIS)
async def test_input_shapes_and_output_shapes_match_toolnode(api):
    calls = [call("shout", {"text": "a"}, "c1"), call("divide", {"a": 4, "b": 2}, "c2")]
    send = {"__type": "tool_call_with_context", "tool_call": calls[0], "state": {"messages": []}}
    for value in ([ai(*calls)], {"messages": [ai(*calls)]}, calls, send):
        ours = await run(ToolExecutor.from_tools(TOOLS), value, api)
        theirs = await run(ToolNode(TOOLS), value, api)
        assert ours == theirs, value
    assert isinstance(await run(executor(), [ai(*calls)], api), list)


@pytest.mark.parametrize("api", APIS)
async def test_messages_key(api):
    node = executor(messages_key="history")
    out = await run(
        node, {"history": [ai(call("shout", {"text": "a"}))], "selected_tools": ["shout"]}, api
    )
    assert [m.content for m in out["history"]] == ["A"]


@pytest.mark.parametrize("api", APIS)
async def test_missing_store_and_missing_state_key_are_raised(api):
    with pytest.raises(ValueError, match="compile your graph with a store"):
        await run(executor(), state(call("remember", {"key": "k"})), api)
    with pytest.raises(KeyError, match="topic"):
        await run(executor(), state(call("read_topic", {})), api)
    out = await run(executor(), state(call("read_topic", {}), topic="cats"), api)
    assert out["messages"][0].content == "cats"


@pytest.mark.parametrize("api", APIS)
async def test_a_command_without_its_tool_message_is_refused_as_toolnode_refuses_it(api):
    value = {"messages": [ai(call("bad_command", {"x": 1}))]}
    with pytest.raises(ValueError) as theirs:
        await run(ToolNode(TOOLS), value, api)
    with pytest.raises(ValueError) as ours:
        await run(ToolExecutor.from_tools(TOOLS), value, api)
    assert str(ours.value) == str(theirs.value)
    explained = await run(executor(), state(call("bad_command", {"x": 1})), api)  # default: told
    assert "matching ToolMessage" in explained["messages"][0].content


@pytest.mark.parametrize("api", APIS)
async def test_tool_runtime_lists_every_tool_as_toolnode_does(api):
    value = {"messages": [ai(call("tool_names", {}))]}
    theirs = await run(ToolNode(TOOLS), value, api)
    ours = await run(executor(), state(call("tool_names", {})), api)
    assert ours["messages"][0].content == theirs["messages"][0].content


@pytest.mark.parametrize("api", APIS)
async def test_hook_errors_follow_handle_tool_errors(api):
    def failing_hook(request, execute):
        raise RuntimeError("hook broke")

    out = await run(executor(wrap_tool_call=failing_hook, handle_tool_errors=True),
                    state(call("shout", {"text": "a"})), api)  # fmt: skip
    assert "hook broke" in out["messages"][0].content
    with pytest.raises(RuntimeError, match="hook broke"):
        await run(executor(wrap_tool_call=failing_hook), state(call("shout", {"text": "a"})), api)


@pytest.mark.parametrize("api", APIS)
async def test_parent_sends_are_merged_into_one_command_as_toolnode(api):
    @tool
    def fan_out(n: int) -> Command:
        """Send n tasks to the parent graph."""
        return Command(graph=Command.PARENT, goto=[Send("worker", {"i": i}) for i in range(n)])

    value = {"messages": [ai(call("fan_out", {"n": 2}, "c1"), call("fan_out", {"n": 1}, "c2"))]}
    ours = await run(ToolExecutor.from_tools([fan_out]), value, api)
    theirs = await run(ToolNode([fan_out]), value, api)
    assert ours == theirs and len(ours) == 1 and len(ours[0].goto) == 3


def plain_add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize("api", APIS)
async def test_from_tools_on_a_plain_messages_state_graph(api):
    model = ScriptedChatModel(
        responses=[ai(call("plain_add", {"a": 2, "b": 3})), AIMessage("5")], cycle=False
    )
    graph = StateGraph(MessagesState)
    graph.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    graph.add_node("tools", ToolExecutor.from_tools([plain_add]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    value = {"messages": [HumanMessage("2+3?")]}
    if api == "invoke":
        out = await asyncio.to_thread(app.invoke, value, cfg)
    else:
        out = await app.ainvoke(value, cfg)
    tool_message = out["messages"][2]
    assert (tool_message.content, tool_message.status) == ("5", "success")
    assert out["messages"][-1].content == "5"
    direct = ToolExecutor.from_tools([plain_add]).invoke({"messages": [out["messages"][1]]})
    assert set(direct) == {"messages"}  # no budget fields for a plain graph


@pytest.mark.parametrize("api", APIS)
async def test_create_react_agent_accepts_a_toolexecutor(api):
    model = ScriptedChatModel(
        responses=[ai(call("shout", {"text": "hey"})), AIMessage("done")], cycle=False
    )
    agent = create_react_agent(model, ToolExecutor.from_tools([shout]))
    value = {"messages": [HumanMessage("shout hey")]}
    out = await (
        asyncio.to_thread(agent.invoke, value) if api == "invoke" else agent.ainvoke(value)
    )
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["HEY"]
    assert model.bound_tools[0] == ["shout"]


SHOUTED: list[str] = []


@tool
def shout_logged(text: str) -> str:
    """Upper-case a text (and log the call)."""
    SHOUTED.append(text)
    return text.upper()


async def _react(node: ToolExecutor, api: str, *calls: dict[str, Any]) -> tuple[Any, Any]:
    SHOUTED.clear()
    model = ScriptedChatModel(responses=[ai(*calls), AIMessage("done")], cycle=False)
    agent = create_react_agent(model, node)
    value = {"messages": [HumanMessage("shout hey")]}
    out = await (
        asyncio.to_thread(agent.invoke, value) if api == "invoke" else agent.ainvoke(value)
    )
    return out, model


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("build", ["from_tools", "enforce_visibility=False"])
async def test_create_react_agent_runs_the_tools_it_binds_with_the_documented_executors(
    api: str, build: str
) -> None:
    node = (
        ToolExecutor.from_tools([shout_logged])
        if build == "from_tools"
        else ToolExecutor(ToolCatalog.from_tools([shout_logged]), enforce_visibility=False)
    )
    out, model = await _react(node, api, call("shout_logged", {"text": "hey"}))
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["HEY"]
    assert model.bound_tools[0] == ["shout_logged"] and SHOUTED == ["hey"]


@pytest.mark.parametrize("api", APIS)
async def test_an_enforcing_executor_in_a_state_without_selected_tools_raises_the_fix(
    api: str,
) -> None:
    # create_react_agent binds every tool but its state has no visible set: answering the
    # model "load it first with add_tool" (a tool it was never given) would loop.
    node = ToolExecutor(ToolCatalog.from_tools([shout_logged]))
    with pytest.raises(ValueError) as raised:
        await _react(node, api, call("shout_logged", {"text": "hey"}))
    message = str(raised.value)
    assert "call to shout_logged" in message and "no 'selected_tools' channel" in message
    for fix in ("ToolBudgetState", "ToolExecutor.from_tools(tools)", "enforce_visibility=False"):
        assert fix in message
    assert SHOUTED == []


@pytest.mark.parametrize("api", APIS)
async def test_without_selected_tools_a_call_that_needs_add_tool_raises_even_beside_add_tool(
    api: str,
) -> None:
    node = ToolExecutor(ToolCatalog.from_tools([shout_logged, divide]))
    load = call("add_tool", {"tool_names": ["shout_logged"]}, "m1")
    with pytest.raises(ValueError, match="no 'selected_tools' channel"):
        await _react(node, api, load, call("shout_logged", {"text": "hey"}, "c2"))
    assert SHOUTED == []


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("visible", ["pinned", "always"])
async def test_without_selected_tools_pinned_and_always_tools_still_run(
    api: str, visible: str
) -> None:
    if visible == "pinned":
        node = ToolExecutor(ToolCatalog.from_tools([shout_logged]), pinned=["shout_logged"])
    else:
        metadata = {"shout_logged": {"include": "always"}}
        node = ToolExecutor(ToolCatalog.from_tools([shout_logged], tool_metadata=metadata))
    out, _ = await _react(node, api, call("shout_logged", {"text": "hey"}))
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["HEY"]
    assert SHOUTED == ["hey"]


@pytest.mark.parametrize("api", APIS)
async def test_without_selected_tools_a_pinned_whitelist_refuses_other_calls_to_the_model(
    api: str,
) -> None:
    # MessagesState + tools_to_bind(..., pinned=...) + ToolExecutor(catalog, pinned=...): the
    # executor has a visible set of its own, so a call outside it (a model's guess) is refused
    # to the model, and the run goes on, as in any graph.
    catalog = ToolCatalog.from_tools([shout_logged, divide])
    node = ToolExecutor(catalog, pinned=["shout_logged"])
    out, _ = await _react(node, api, call("divide", {"a": 1, "b": 2}))
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "divide" in str(answer.content)
    assert out["messages"][-1].content == "done"


class TopicState(MessagesState):
    topic: str


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("payload", ["tool_calls", "with_context"])
async def test_send_payloads_in_a_graph_read_the_state_as_toolnode(api, payload):
    calls = [call("read_topic", {}, "c1"), call("shout", {"text": "x"}, "c2")]

    def route(s: dict[str, Any]) -> list[Send]:
        if payload == "tool_calls":  # the state is read from the graph's channels
            return [Send("tools", [c]) for c in calls]
        return [
            Send("tools", {"__type": "tool_call_with_context", "tool_call": c, "state": s})
            for c in calls
        ]

    def build(node: Any) -> Any:
        graph = StateGraph(TopicState)
        graph.add_node("agent", lambda s: {"messages": [ai(*calls)]})
        graph.add_node("tools", node)
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", route, ["tools"])
        return graph.compile()

    value = {"messages": [HumanMessage("hi")], "topic": "cats"}
    outs = []
    for node in (ToolExecutor.from_tools(TOOLS), ToolNode(TOOLS)):
        app = build(node)
        invoked = asyncio.to_thread(app.invoke, value) if api == "invoke" else app.ainvoke(value)
        outs.append(await invoked)
    ours, theirs = outs
    assert sorted(m.content for m in ours["messages"][2:]) == ["X", "cats"]

    def shown(out: dict[str, Any]) -> list[tuple[Any, ...]]:  # ids are the reducer's
        return [(m.tool_call_id, m.name, m.content, m.status) for m in out["messages"][2:]]

    assert shown(ours) == shown(theirs)


@pytest.mark.parametrize("api", APIS)
async def test_a_call_whose_injection_fails_raises_in_its_turn(api):
    # Under ainvoke each call is prepared on the event loop before the worker thread runs the
    # batch; a failing preparation must still raise after the calls before it ran, not before.
    ran: list[str] = []

    @tool
    def log(text: str) -> str:
        """Log a text."""
        ran.append(text)
        return "ok"

    node = ToolExecutor(ToolCatalog.from_tools([*TOOLS, log]), mode="sequential")
    calls = [call("log", {"text": "1"}, "c1"), call("read_topic", {}, "c2")]
    value = {
        "messages": [HumanMessage("hi"), ai(*calls, call("log", {"text": "3"}, "c3"))],
        "selected_tools": ["log", "read_topic"],
    }
    with pytest.raises(KeyError, match="topic"):
        await run(node, value, api)
    assert ran == ["1"]
