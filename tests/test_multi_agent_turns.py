"""An agent entered after another in the same user turn has its own turn.

In a multi-agent graph (a supervisor, a swarm: agents as nodes of a parent whose state shares
``messages``), the user turn holds every agent's replies. ``max_iterations`` (model calls per
turn), the middleware's "first model call of the turn" (when it selects) and
``max_meta_calls`` counted them all, so an agent entered after another that made 5 model
calls stopped at once, and ``ToolBudgetMiddleware`` entered after a supervisor's reply bound
the meta-tools only. Each agent now counts its own: the nodes leave out replies another agent
made (named by ``create_agent`` / ``create_react_agent``, or recorded by another of the
package's agents), the middleware counts from its entry. Real parent graphs and checkpointer
(``InMemorySaver``), the package's real agents, LangChain's ``create_agent``;
``ScriptedChatModel`` only.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from langgraph_toolbudget import (
    ToolAgent,
    ToolBudgetInput,
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.meta import META_TOOL_NAMES
from langgraph_toolbudget.execution.batch import META_LIMIT_ERROR
from langgraph_toolbudget.nodes.agent import ITERATION_LIMIT_MESSAGE
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
SHAPES = ["prebuilt", "tool_agent", "middleware"]
CONFIG: Any = {"configurable": {"thread_id": "t"}}
REQUEST = "what is the weather in four cities? then list the emails in my inbox folder"


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny in {city}"


@tool
def weather_forecast(city: str) -> str:
    """Get the weather forecast for the next days in a city."""
    return f"rain tomorrow in {city}"


@tool
def create_invoice(customer: str) -> str:
    """Create an invoice for a customer."""
    return f"invoice for {customer}"


@tool
def refund_payment(payment_id: str) -> str:
    """Refund a payment by id."""
    return f"refunded {payment_id}"


@tool
def list_inbox(folder: str) -> str:
    """List the emails in an inbox folder."""
    return "3 mails"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email message."""
    return f"sent to {to}"


def weather_catalog() -> ToolCatalog:
    return ToolCatalog.from_tools(
        [get_weather, weather_forecast],
        categories={"weather": ["get_weather", "weather_forecast"]},
    )


def office_catalog() -> ToolCatalog:
    return ToolCatalog.from_tools(
        [create_invoice, refund_payment, list_inbox, send_email],
        categories={
            "billing": ["create_invoice", "refund_payment"],
            "mail": ["list_inbox", "send_email"],
        },
    )


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def weather_model(calls: int = 5) -> ScriptedChatModel:
    """The first agent's model: ``calls`` weather lookups, one a reply, then its answer."""
    lookups = [call("get_weather", {"city": f"c{i}"}, f"w{i}") for i in range(calls)]
    return ScriptedChatModel(responses=[*lookups, AIMessage("weather done")], cycle=False)


def inbox_model() -> ScriptedChatModel:
    """The second agent's model: lists the inbox at every call (never answers)."""
    return ScriptedChatModel(responses=[call("list_inbox", {"folder": "in"}, "m")], cycle=True)


def named_weather_agent(model: ScriptedChatModel) -> Any:
    """LangChain's agent, named as a supervisor's agents are: its replies carry its name."""
    return create_agent(model, tools=[get_weather], name="weather")


def office_agent(shape: str, model: ScriptedChatModel, **options: Any) -> Any:
    """The package's agent in ``shape``, to add as the parent's node ``office``."""
    if shape == "prebuilt":
        return create_toolbudget_agent(model, office_catalog(), **options).compile()
    if shape == "tool_agent":
        return ToolAgent(model, office_catalog(), name="office", **options)
    middleware = ToolBudgetMiddleware(office_catalog(), **options)
    return create_agent(model, tools=[], middleware=[middleware], name="office")


def parent(first: Any, second: Any, shape: str) -> Any:
    """A supervisor's order of agents: ``first`` answers, then ``second`` takes over, in one
    user turn (a ``ToolAgent`` reads the visible set from its parent's state)."""
    if shape == "tool_agent":
        graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    else:
        graph = StateGraph(MessagesState)
    graph.add_node("weather", first)
    graph.add_node("office", second)
    graph.add_edge(START, "weather")
    graph.add_edge("weather", "office")
    graph.add_edge("office", END)
    return graph.compile(checkpointer=InMemorySaver())


async def run(app: Any, api: str, text: str = REQUEST) -> dict[str, Any]:
    payload = {"messages": [("user", text)]}
    if api == "invoke":
        return app.invoke(payload, CONFIG)
    return await app.ainvoke(payload, CONFIG)


def pinned_for(shape: str) -> dict[str, Any]:
    """``list_inbox`` pinned for the nodes (a ``ToolAgent`` does not select: its parent
    would); the middleware selects it for the request."""
    return {} if shape == "middleware" else {"pinned": ["list_inbox"]}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("shape", SHAPES)
async def test_an_agent_after_a_named_agent_makes_its_own_model_calls(shape: str, api: str):
    first, second = weather_model(), inbox_model()
    options = {"max_iterations": 3, **pinned_for(shape)}
    app = parent(named_weather_agent(first), office_agent(shape, second, **options), shape)

    out = await run(app, api)

    assert len(first.calls) == 6  # 5 lookups and the answer: more than either limit
    assert len(second.calls) == 3  # its own max_iterations, none spent by the first agent
    assert out["messages"][-1].content == ITERATION_LIMIT_MESSAGE.format(n=3)
    inbox = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "list_inbox"]
    assert [m.content for m in inbox] == ["3 mails"] * 3


@pytest.mark.parametrize("api", APIS)
async def test_the_middleware_after_a_supervisors_reply_selects_for_the_request(api: str):
    first, second = weather_model(calls=2), inbox_model()
    app = parent(named_weather_agent(first), office_agent("middleware", second), "middleware")

    await run(app, api)

    # the first model call of its turn: the selection ran, not the meta-tools alone
    assert "list_inbox" in second.bound_tools[0]
    assert set(second.bound_tools[0]) > set(META_TOOL_NAMES)
    assert len(second.calls) == 5  # its own max_iterations (default 5)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("shape", ["prebuilt", "tool_agent"])
async def test_an_agent_after_another_of_the_packages_agents_makes_its_own_model_calls(
    shape: str, api: str
):
    first, second = weather_model(calls=4), inbox_model()
    if shape == "prebuilt":
        weather = create_toolbudget_agent(first, weather_catalog(), pinned=["get_weather"])
        weather = weather.compile()
    else:
        weather = ToolAgent(first, weather_catalog(), name="weather", pinned=["get_weather"])
    office = office_agent(shape, second, max_iterations=3, pinned=["list_inbox"])

    out = await run(parent(weather, office, shape), api)

    assert len(first.calls) == 5  # its own max_iterations: the 4 lookups and the answer
    assert out["messages"][-1].content == ITERATION_LIMIT_MESSAGE.format(n=3)
    assert len(second.calls) == 3
    # each reply records its agent; the agents' records differ
    agents = {
        m.response_metadata.get("toolbudget_agent") for m in out["messages"] if m.type == "ai"
    }
    assert len(agents) == 2 and None not in agents


def searches(n: int) -> AIMessage:
    calls = [
        {"name": "search_tools", "args": {"query": "weather"}, "id": f"s{i}"} for i in range(n)
    ]
    return AIMessage("", tool_calls=calls)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("shape", ["tool_agent", "middleware"])
async def test_another_agents_meta_calls_leave_max_meta_calls_whole(shape: str, api: str):
    # the first agent spends the turn's 8 meta-calls (the default max_meta_calls) in a reply
    first = ScriptedChatModel(responses=[searches(8), AIMessage("weather done")], cycle=False)
    second = ScriptedChatModel(
        responses=[
            AIMessage(
                "", tool_calls=[{"name": "search_tools", "args": {"query": "inbox"}, "id": "o"}]
            ),
            AIMessage("office done"),
        ],
        cycle=False,
    )
    if shape == "tool_agent":
        weather = ToolAgent(first, weather_catalog(), name="weather")
    else:
        budget = ToolBudgetMiddleware(weather_catalog())
        weather = create_agent(first, tools=[], middleware=[budget], name="weather")
    app = parent(weather, office_agent(shape, second), shape)

    out = await run(app, api)

    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert all(answers[f"s{i}"].status != "error" for i in range(8))
    refusal = META_LIMIT_ERROR.split("(")[0]
    assert not str(answers["o"].content).startswith(refusal)
    assert "list_inbox" in str(answers["o"].content)
    assert out["messages"][-1].content == "office done"


@tool
def confirm_sending(to: str) -> str:
    """Ask a human to confirm an email before it is sent."""
    return f"confirmed={interrupt({'to': to})}"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("where", ["alone", "after_a_named_agent"])
async def test_a_resume_is_no_entry_the_middlewares_turn_goes_on_counting(where: str, api: str):
    # the turn starts at the agent's entry, not at each run: answering an interrupt twice
    # leaves max_iterations=2 spent
    catalog = ToolCatalog.from_tools([confirm_sending], categories={"mail": ["confirm_sending"]})
    model = ScriptedChatModel(responses=[call("confirm_sending", {"to": "ana"}, "c")], cycle=True)
    budget = ToolBudgetMiddleware(catalog, max_iterations=2, pinned=["confirm_sending"])
    if where == "alone":
        saver = InMemorySaver()
        app = create_agent(model, tools=[], middleware=[budget], name="office", checkpointer=saver)
    else:  # a resumed subgraph goes on from its checkpoint: before_agent does not run again
        office = create_agent(model, tools=[], middleware=[budget], name="office")
        app = parent(named_weather_agent(weather_model(calls=2)), office, "middleware")

    async def step(payload: Any) -> dict[str, Any]:
        if api == "invoke":
            return app.invoke(payload, CONFIG)
        return await app.ainvoke(payload, CONFIG)

    await step({"messages": [("user", "send ana the report")]})
    await step(Command(resume="yes"))  # answers the first call; the model's second call
    out = await step(Command(resume="yes"))  # the turn's third call: over max_iterations

    assert len(model.calls) == 2
    assert out["messages"][-1].content == ITERATION_LIMIT_MESSAGE.format(n=2)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("shape", ["prebuilt", "tool_agent"])
async def test_replies_a_model_names_itself_still_count_against_its_agents_limit(
    shape: str, api: str
):
    """A model (or a wrapper) that names its replies: the agent recorded them, so they count
    (a name alone would have let them escape ``max_iterations``)."""
    named = call("list_inbox", {"folder": "in"}, "m").model_copy(update={"name": "assistant"})
    model = ScriptedChatModel(responses=[named], cycle=True)
    agent = office_agent(shape, model, max_iterations=3, pinned=["list_inbox"])
    graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    graph.add_node("office", agent)
    graph.add_edge(START, "office")
    app = graph.compile(checkpointer=InMemorySaver())

    out = await run(app, api)

    assert len(model.calls) == 3
    assert out["messages"][-1].content == ITERATION_LIMIT_MESSAGE.format(n=3)


@pytest.mark.parametrize("api", APIS)
async def test_two_agents_run_from_one_node_of_yours_count_their_own_calls(api: str):
    """Two agents of other tools invoked from one node function (a graph called inside a
    node) share a place in the graph: the agent's tools tell them apart."""
    first, second = weather_model(calls=4), ScriptedChatModel(responses=[AIMessage("mail done")])
    agents = {
        "weather": create_toolbudget_agent(first, weather_catalog()).compile(),
        "office": create_toolbudget_agent(second, office_catalog()).compile(),
    }

    def pick(state: MessagesState) -> Any:
        done = any(m.content == "weather done" for m in state["messages"])
        return agents["office" if done else "weather"]

    def call_agent(state: MessagesState) -> dict[str, Any]:
        out = pick(state).invoke({"messages": state["messages"]})
        return {"messages": out["messages"][len(state["messages"]) :]}

    async def acall_agent(state: MessagesState) -> dict[str, Any]:
        out = await pick(state).ainvoke({"messages": state["messages"]})
        return {"messages": out["messages"][len(state["messages"]) :]}

    def again(state: MessagesState) -> str:
        return "call_agent" if state["messages"][-1].content == "weather done" else END

    graph = StateGraph(MessagesState)
    graph.add_node("call_agent", call_agent if api == "invoke" else acall_agent)
    graph.add_edge(START, "call_agent")
    graph.add_conditional_edges("call_agent", again, ["call_agent", END])
    out = await run(graph.compile(checkpointer=InMemorySaver()), api)

    assert len(first.calls) == 5  # its limit: 4 lookups and the answer
    assert len(second.calls) == 1  # not stopped by the first agent's five replies
    assert out["messages"][-1].content == "mail done"


def test_a_reply_stamped_with_a_place_alone_counts_for_the_agent_at_that_place():
    """Replies recorded with the place only (the middleware's, or before the key was added)
    count for the agent at that place, whatever its key; not for an agent elsewhere."""
    from langgraph_toolbudget.execution.batch import AGENT_KEY, by_author

    def reply(stamp: str) -> AIMessage:
        return AIMessage("", response_metadata={AGENT_KEY: stamp})

    assert by_author(reply("weather|agent"), (None, "weather|agent#1234abcd"))
    assert by_author(reply("weather|agent#1234abcd"), (None, "weather|agent#1234abcd"))
    assert not by_author(reply("weather|agent#99999999"), (None, "weather|agent#1234abcd"))
    assert not by_author(reply("office|agent"), (None, "weather|agent#1234abcd"))
