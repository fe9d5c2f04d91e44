"""LangGraph's own features over the package's nodes, as over its prebuilt agent.

``ToolAgent`` is a subgraph LangGraph can see (``get_state(subgraphs=True)``, ``update_state``
on the loop's namespace, ``get_graph(xray=True)``), as ``create_react_agent`` added as a node
is; a run's low ``recursion_limit`` ends the turn with a final message and every tool call
answered, never a ``GraphRecursionError`` mid-loop, as ``create_react_agent``'s
``remaining_steps`` does. Real tools and graphs; only the chat model is scripted.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from langgraph_toolbudget import (
    ToolAgent,
    ToolBudgetInput,
    ToolBudgetState,
    ToolCatalog,
    add_toolbudget_nodes,
    create_toolbudget_agent,
    exclude_tools,
)
from langgraph_toolbudget.nodes.agent import ITERATION_LIMIT_MESSAGE, RECURSION_LIMIT_MESSAGE
from langgraph_toolbudget.testing import ScriptedChatModel
from langgraph_toolbudget.threads import catalog_of, update_context

APIS = ["invoke", "ainvoke"]


async def run(app: Any, payload: Any, api: str, config: dict[str, Any]) -> dict[str, Any]:
    if api == "invoke":
        return app.invoke(payload, config)
    return await app.ainvoke(payload, config)


def in_graph(node: Any) -> StateGraph:
    graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    graph.add_node("agent", node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph


def unanswered(messages: list[BaseMessage]) -> list[str]:
    """The ids of the tool calls no ``ToolMessage`` answers (a provider refuses them)."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    return [c["id"] for c in calls if c["id"] not in answered]


# --- ToolAgent is a subgraph LangGraph sees -------------------------------------------------


deployed: list[str] = []


@tool
def deploy(target: str) -> str:
    """Deploy to a target, once a human approves."""
    approval = interrupt({"deploy": target})
    deployed.append(target)
    return f"deployed to {target}: {approval}"


def deploy_call(target: str) -> AIMessage:
    call = {"name": "deploy", "args": {"target": target}, "id": "d1"}
    return AIMessage("", id="ai-deploy", tool_calls=[call])


def paused_deploy_app() -> tuple[Any, dict[str, Any]]:
    """A graph whose ``ToolAgent`` is paused at the ``deploy`` call's review interrupt."""
    deployed.clear()
    model = ScriptedChatModel(responses=[deploy_call("prod"), AIMessage("done")])
    catalog = ToolCatalog.from_tools([deploy], default_include="always")
    app = in_graph(ToolAgent(model, catalog)).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "review"}}
    app.invoke({"messages": [HumanMessage("deploy")]}, config)
    return app, config


def test_tool_agent_pending_call_shows_in_get_state_with_subgraphs():
    app, config = paused_deploy_app()
    (task,) = app.get_state(config, subgraphs=True).tasks
    assert task.name == "agent" and task.interrupts
    assert task.state is not None, "LangGraph does not see the ToolAgent's loop"
    assert task.state.next == ("tools",)
    assert task.state.values["messages"][-1].tool_calls[0]["args"] == {"target": "prod"}


@pytest.mark.parametrize("api", APIS)
async def test_tool_agent_pending_call_edited_through_update_state_runs_edited(api):
    app, config = paused_deploy_app()
    edit = {"messages": [deploy_call("staging")]}
    if api == "invoke":
        (task,) = app.get_state(config, subgraphs=True).tasks
        assert task.state is not None, "LangGraph does not see the ToolAgent's loop"
        app.update_state(task.state.config, edit)
    else:
        (task,) = (await app.aget_state(config, subgraphs=True)).tasks
        assert task.state is not None, "LangGraph does not see the ToolAgent's loop"
        await app.aupdate_state(task.state.config, edit)
    # The edited call asks for review again: resume it.
    await run(app, Command(resume="approved"), api, config)
    assert not app.get_state(config).next
    messages = app.get_state(config).values["messages"]
    assert deployed == ["staging"]
    assert [m.content for m in messages[-2:]] == ["deployed to staging: approved", "done"]


def test_tool_agent_loop_namespace_is_found_by_update_state():
    """The loop's namespace as a client names it (``checkpoint_ns`` = the node's name) is
    found, as for ``create_react_agent`` added as a node (was: ``Subgraph agent not found``).
    As there, the paused task's own namespace (``task.state.config``) is the one to edit."""
    app, _ = paused_deploy_app()
    loop = {"configurable": {"thread_id": "review", "checkpoint_ns": "agent"}}
    written = app.update_state(loop, {"messages": [deploy_call("staging")]})
    assert written["configurable"]["checkpoint_ns"] == "agent"


def test_tool_agent_inner_nodes_show_in_get_graph_xray():
    catalog = ToolCatalog.from_tools([deploy], default_include="always")
    app = in_graph(ToolAgent(ScriptedChatModel(responses=["hi"]), catalog)).compile()
    assert {"agent:agent", "agent:tools"} <= set(app.get_graph(xray=True).nodes)


def test_tool_agent_deep_copy_exposes_its_own_loop():
    """The copy's node functions close over the copy's loop, not the original's."""
    catalog = ToolCatalog.from_tools([deploy], default_include="always")
    node = ToolAgent(ScriptedChatModel(responses=["hi"]), catalog)
    copied = copy.deepcopy(node)
    assert dict(in_graph(node).compile().get_subgraphs()) == {"agent": node.graph}
    assert dict(in_graph(copied).compile().get_subgraphs()) == {"agent": copied.graph}
    assert copied.graph is not node.graph


# --- a low recursion_limit ends the turn with every call answered --------------------------


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def always_calling_model() -> ScriptedChatModel:
    ids = itertools.count()

    def keep_calling(messages: list[BaseMessage], tools: Any) -> AIMessage:
        call = {"name": "get_weather", "args": {"city": "Paris"}, "id": f"w{next(ids)}"}
        return AIMessage("", tool_calls=[call])

    return ScriptedChatModel(responses=[keep_calling])


def weather_catalog() -> ToolCatalog:
    return ToolCatalog.from_tools([get_weather], default_include="always")


def prebuilt_graph(model: ScriptedChatModel) -> StateGraph:
    return create_toolbudget_agent(model, weather_catalog())


def added_nodes_graph(model: ScriptedChatModel) -> StateGraph:
    """The nodes after a node of the user's own, so the steps a run has taken are not the
    agent's alone."""
    graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    graph.add_node("prepare", lambda state: {})
    graph.add_edge(START, "prepare")
    add_toolbudget_nodes(graph, model, weather_catalog(), after="prepare")
    return graph


BUILDERS = {"create_toolbudget_agent": prebuilt_graph, "add_toolbudget_nodes": added_nodes_graph}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("limit", [4, 5, 8, 9])
@pytest.mark.parametrize("builder", list(BUILDERS))
async def test_low_recursion_limit_ends_the_turn_with_every_call_answered(builder, limit, api):
    """An even and an odd limit each: LangGraph raises after a step taken with none left, even
    when the graph is done, so the margin differs by one with the parity of the steps."""
    model = always_calling_model()
    app = BUILDERS[builder](model).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "low"}, "recursion_limit": limit}
    out = await run(app, {"messages": [HumanMessage("weather in Paris?")]}, api, config)
    assert out["messages"][-1].content == RECURSION_LIMIT_MESSAGE.format(limit=limit)
    assert not out["messages"][-1].tool_calls and not unanswered(out["messages"])
    assert not app.get_state(config).next
    # The next turn, under the same limit: the model is sent no unanswered call.
    model.responses, model.i = [AIMessage("you're welcome")], 0
    out = await run(app, {"messages": [HumanMessage("thanks")]}, api, config)
    assert out["messages"][-1].content == "you're welcome"
    assert not unanswered(model.calls[-1])


async def test_recursion_limit_counts_this_runs_steps_not_the_threads():
    """On a thread's later turns ``langgraph_step`` is past ``recursion_limit``, yet each turn
    has its whole limit: the model is called as on the first turn."""

    def weather(cid: str) -> AIMessage:
        call = {"name": "get_weather", "args": {"city": "Rome"}, "id": cid}
        return AIMessage("", tool_calls=[call])

    answers = ["first", "second", "third"]
    script = [weather("r1"), AIMessage(answers[0]), weather("r2"), AIMessage(answers[1])]
    model = ScriptedChatModel(responses=[*script, AIMessage(answers[2])])
    app = prebuilt_graph(model).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "turns"}, "recursion_limit": 6}
    for answer in answers:
        out = await app.ainvoke({"messages": [HumanMessage("weather in Rome?")]}, config)
        assert out["messages"][-1].content == answer
    assert len(model.calls) == 5


@pytest.mark.parametrize("api", APIS)
async def test_tool_agent_under_a_low_recursion_limit_ends_at_max_iterations(api):
    """``ToolAgent`` runs its loop as one step of your graph, with its own recursion limit
    raised to fit ``max_iterations``: a low limit of the run does not cut the loop."""
    model = always_calling_model()
    node = ToolAgent(model, weather_catalog(), max_iterations=6)
    app = in_graph(node).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "low"}, "recursion_limit": 3}
    out = await run(app, {"messages": [HumanMessage("weather in Paris?")]}, api, config)
    assert out["messages"][-1].content == ITERATION_LIMIT_MESSAGE.format(n=6)
    assert not unanswered(out["messages"]) and len(model.calls) == 6
    model.responses, model.i = [AIMessage("you're welcome")], 0
    out = await run(app, {"messages": [HumanMessage("thanks")]}, api, config)
    assert out["messages"][-1].content == "you're welcome"
    assert not unanswered(model.calls[-1])


def test_the_stand_in_keeps_the_replys_id_text_and_usage():
    """The reply a client already streamed is replaced under its id (a client merging by id
    keeps no call hanging), with what the model wrote and its usage; its calls, the provider's
    raw ones included, are dropped."""
    raw = [{"id": "w1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]
    reply = AIMessage(
        "Paris is sunny. Let me also check Rome.",
        id="run-1",
        tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}, "id": "w1"}],
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        additional_kwargs={"tool_calls": raw, "refusal": None},
    )
    app = prebuilt_graph(ScriptedChatModel(responses=[reply])).compile()
    out = app.invoke({"messages": [HumanMessage("weather?")]}, {"recursion_limit": 4})
    final = out["messages"][-1]
    assert final.id == "run-1"
    assert (
        final.content
        == f"Paris is sunny. Let me also check Rome.\n\n{RECURSION_LIMIT_MESSAGE.format(limit=4)}"
    )
    assert final.usage_metadata == reply.usage_metadata
    assert not final.tool_calls and final.additional_kwargs == {"refusal": None}
    assert [m.id for m in out["messages"] if isinstance(m, AIMessage)] == ["run-1"]


@pytest.mark.parametrize("limit", [5, 6, 7, 8])
def test_a_node_of_yours_after_the_agent_gets_its_step(limit):
    """``add_toolbudget_nodes(then=...)``: the step of your node after the agent is kept free
    too, so the run ends in it, not on ``GraphRecursionError`` after the turn finished."""
    summaries = []
    graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    graph.add_node("prepare", lambda state: {})
    graph.add_node("summarize", lambda state: summaries.append(len(state["messages"])) or {})
    graph.add_edge(START, "prepare")
    graph.add_edge("summarize", END)
    catalog = weather_catalog()
    add_toolbudget_nodes(graph, always_calling_model(), catalog, after="prepare", then="summarize")
    app = graph.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "then"}, "recursion_limit": limit}
    out = app.invoke({"messages": [HumanMessage("weather in Paris?")]}, config)
    assert summaries and not unanswered(out["messages"]) and not app.get_state(config).next


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_agent_subclass_runs_its_own_run_and_stays_a_subgraph(api):
    seen = []

    class Logged(ToolAgent):
        def run(self, state: Any, config: Any) -> dict[str, Any]:
            seen.append("run")
            return super().run(state, config)

        async def arun(self, state: Any, config: Any) -> dict[str, Any]:
            seen.append("arun")
            return await super().arun(state, config)

    deployed.clear()
    model = ScriptedChatModel(responses=[deploy_call("prod"), AIMessage("done")])
    catalog = ToolCatalog.from_tools([deploy], default_include="always")
    app = in_graph(Logged(model, catalog)).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "sub"}}
    await run(app, {"messages": [HumanMessage("deploy")]}, api, config)
    assert seen == ["run" if api == "invoke" else "arun"]
    (task,) = app.get_state(config, subgraphs=True).tasks
    assert task.state is not None and task.state.next == ("tools",)


def test_update_context_on_a_tool_agent_in_a_plain_state_names_the_fix_that_works():
    """With the loop now visible, the error advised compiling it with `checkpointer=True`,
    which no ToolAgent option does: it names the state fields to add, as before."""
    agent = ToolAgent(ScriptedChatModel(responses=[AIMessage("hi")]), weather_catalog())
    app = plain_graph("agent", agent).compile(checkpointer=InMemorySaver())
    assert_context_advice_names_the_state_fields(app)
    assert catalog_of(app) is agent.catalog  # the threads CLI finds the ToolAgent's catalog


def plain_graph(name: str, node: Any) -> StateGraph:
    """``node`` alone in a ``MessagesState`` graph: a state without the tool-context fields."""
    graph = StateGraph(MessagesState)
    graph.add_node(name, node)
    graph.add_edge(START, name)
    graph.add_edge(name, END)
    return graph


def assert_context_advice_names_the_state_fields(app: Any) -> None:
    config = {"configurable": {"thread_id": "ctx"}}
    app.invoke({"messages": [HumanMessage("x")]}, config)
    with pytest.raises(ValueError, match="give the graph's state the tool-context fields") as err:
        update_context(app, config, exclude_tools(tools=["get_weather"]))
    assert "checkpointer=True" not in str(err.value)


def test_a_messages_stream_client_gets_the_stand_in_under_the_replys_id():
    """The messages stream sends an id once: the stand-in under the streamed reply's id was
    dropped, and the client kept the reply's call, never answered."""
    reply = AIMessage(
        "Checking Rome.",
        id="run-7",
        tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}, "id": "w7"}],
    )
    app = prebuilt_graph(ScriptedChatModel(responses=[reply])).compile()
    seen: dict[str, Any] = {}
    for message, _ in app.stream(
        {"messages": [HumanMessage("weather?")]}, {"recursion_limit": 4}, stream_mode="messages"
    ):
        if message.id:
            seen[message.id] = message  # a client merging by id keeps the last one
    assert not seen["run-7"].tool_calls
    assert seen["run-7"].content.endswith(RECURSION_LIMIT_MESSAGE.format(limit=4))


def test_update_context_on_a_tool_agent_in_a_subgraph_names_the_fix_that_works():
    agent = ToolAgent(ScriptedChatModel(responses=[AIMessage("hi")]), weather_catalog())
    team = plain_graph("agent", agent).compile()
    assert_context_advice_names_the_state_fields(
        plain_graph("team", team).compile(checkpointer=InMemorySaver())
    )


def test_a_tool_agents_catalog_is_the_one_it_runs_in_its_runtime_mode():
    def beta(city: str) -> str:
        """A weather tool still in draft."""
        return city

    catalog = ToolCatalog.from_tools(
        [get_weather, beta], tool_metadata={"beta": {"status": "draft"}}
    )
    agent = ToolAgent(ScriptedChatModel(responses=[AIMessage("hi")]), catalog, runtime_mode="debug")
    assert sorted(catalog_of(in_graph(agent).compile()).tool_names) == ["beta", "get_weather"]
