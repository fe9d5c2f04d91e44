"""``update_context`` on a graph of several agents: an update lands where an agent reads it.

Each agent compiled as a subgraph node keeps its tool context in its own state. A parent on
``ToolBudgetState`` holds the fields too, but when no node of it reads them (the agents'
input schemas leave them out) an update written there was accepted and then ignored: the
excluded tool ran. Its refusal, and a ``MessagesState`` parent's, name every agent, the one
whose catalog has the update's tools first; an update written into an agent whose catalog
lacks tools another agent has is refused, naming that agent. Real checkpointers, the
package's real agents (``create_toolbudget_agent``, ``create_agent`` with
``ToolBudgetMiddleware``, ``ToolAgent``), ``ScriptedChatModel``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_toolbudget import (
    ToolAgent,
    ToolBudgetInput,
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    add_toolbudget_nodes,
    aupdate_context,
    create_toolbudget_agent,
    exclude_tools,
    include_tools,
    set_include_mode,
    update_context,
)
from langgraph_toolbudget.testing import ScriptedChatModel
from langgraph_toolbudget.threads import SqliteThread, ThreadError

RAN: list[str] = []
CONFIG: Any = {"configurable": {"thread_id": "t"}}


def in_agent(ns: str) -> Any:
    return {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    RAN.append("get_weather")
    return f"sunny in {city}"


@tool
def weather_forecast(city: str) -> str:
    """Get the weather forecast for the next days in a city."""
    RAN.append("weather_forecast")
    return f"rain tomorrow in {city}"


@tool
def create_invoice(customer: str) -> str:
    """Create an invoice for a customer."""
    RAN.append("create_invoice")
    return f"invoice for {customer}"


@tool
def refund_payment(payment_id: str) -> str:
    """Refund a payment by id."""
    RAN.append("refund_payment")
    return f"refunded {payment_id}"


def weather_catalog() -> ToolCatalog:
    """Visible from the first turn (a ``ToolAgent`` selects no tools): an exclusion shows."""
    tools = [get_weather, weather_forecast]
    categories = {"weather": [t.name for t in tools]}
    return ToolCatalog.from_tools(tools, categories=categories, default_include="always")


def billing_catalog() -> ToolCatalog:
    tools = [create_invoice, refund_payment]
    categories = {"billing": [t.name for t in tools]}
    return ToolCatalog.from_tools(tools, categories=categories, default_include="always")


def script(name: str, args: dict[str, Any]) -> ScriptedChatModel:
    """A model that calls ``name`` once, then answers."""
    call = {"name": name, "args": args, "id": f"{name}-1", "type": "tool_call"}
    return ScriptedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("done")])


def weather_agent() -> Any:
    """The prebuilt agent, keeping its state per thread."""
    model = script("get_weather", {"city": "Oslo"})
    return create_toolbudget_agent(model, weather_catalog()).compile(checkpointer=True)


def billing_agent(persistent: bool = True) -> Any:
    """``create_agent`` with ``ToolBudgetMiddleware``."""
    model = script("create_invoice", {"customer": "ACME"})
    middleware = [ToolBudgetMiddleware(billing_catalog())]
    return create_agent(model, middleware=middleware, checkpointer=True if persistent else None)


def team(
    parent: StateGraph, saver: BaseCheckpointSaver, first: Any = None, persistent: bool = True
) -> Any:
    """``first`` (the weather agent by default) then the billing agent, as nodes of ``parent``."""
    parent.add_node("weather", weather_agent() if first is None else first)
    parent.add_node("billing", billing_agent(persistent))
    parent.add_edge(START, "weather")
    parent.add_edge("weather", "billing")
    parent.add_edge("billing", END)
    return parent.compile(checkpointer=saver)


def budget_parent() -> StateGraph:
    """A supervisor graph on the package's own state: it holds the tool-context fields."""
    return StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)


def messages_parent() -> StateGraph:
    return StateGraph(MessagesState)


PARENTS = pytest.mark.parametrize(
    "parent", [budget_parent, messages_parent], ids=["ToolBudgetState", "MessagesState"]
)


@contextlib.contextmanager
def saver_of(kind: str, tmp_path: Path) -> Iterator[BaseCheckpointSaver]:
    if kind == "memory":
        yield InMemorySaver()
    else:
        with SqliteSaver.from_conn_string(str(tmp_path / "threads.sqlite")) as saver:
            yield saver


SAVERS = pytest.mark.parametrize("saver_kind", ["memory", "sqlite"])


def answers(out: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.name: m for m in out["messages"] if isinstance(m, ToolMessage) and m.name}


def assert_refused_as_excluded(out: dict[str, Any], *names: str) -> None:
    for name in names:
        answer = answers(out)[name]
        assert answer.status == "error" and "excluded" in str(answer.content)
    assert not set(names) & set(RAN)


# --- a ToolBudgetState parent whose agents are subgraphs: the update was accepted, then lost


@SAVERS
@pytest.mark.parametrize("ran", [False, True], ids=["never-ran", "ran"])
def test_a_budget_state_parent_whose_agents_are_subgraphs_refuses_the_update_naming_each(
    saver_kind: str, ran: bool, tmp_path: Path
) -> None:
    with saver_of(saver_kind, tmp_path) as saver:
        app = team(budget_parent(), saver)
        if ran:
            app.invoke({"messages": [HumanMessage("hi")]}, CONFIG)
        before = app.get_state(CONFIG).config
        with pytest.raises(ValueError) as raised:
            update_context(app, CONFIG, exclude_tools(tools=["get_weather", "create_invoice"]))
        assert app.get_state(CONFIG).config == before, "nothing written"
    message = str(raised.value)
    assert "no node of this graph reads its context_tools channel" in message
    assert "dropped" in message and "\n" not in message
    assert re.findall(r"'(weather|billing)' \(its catalog has", message) == ["weather", "billing"]
    assert "'checkpoint_ns': 'weather'" in message


async def test_a_budget_state_parent_whose_agents_are_subgraphs_refuses_the_update_async() -> None:
    app = team(budget_parent(), InMemorySaver())
    with pytest.raises(ValueError, match=r"no node of this graph reads .*'billing'"):
        await aupdate_context(app, CONFIG, exclude_tools(tools=["create_invoice"]))
    assert (await app.aget_state(CONFIG)).created_at is None


@PARENTS
def test_following_the_error_each_agent_takes_the_exclusion_of_its_own_tools(
    parent: Any,
) -> None:
    app = team(parent(), InMemorySaver())
    update_context(app, in_agent("weather"), exclude_tools(tools=["get_weather"]))
    update_context(app, in_agent("billing"), exclude_tools(tools=["create_invoice"]))
    out = app.invoke({"messages": [HumanMessage("weather in Oslo, then invoice ACME")]}, CONFIG)
    assert_refused_as_excluded(out, "get_weather", "create_invoice")


def test_a_parent_whose_tool_agent_reads_its_state_takes_the_update() -> None:
    """A ``ToolAgent`` node reads the parent's tool context: the update stays accepted there."""
    agent = ToolAgent(script("get_weather", {"city": "Oslo"}), weather_catalog())
    app = team(budget_parent(), InMemorySaver(), first=agent)
    update_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
    out = app.invoke({"messages": [HumanMessage("weather in Oslo, then invoice ACME")]}, CONFIG)
    assert_refused_as_excluded(out, "get_weather")
    assert RAN == ["create_invoice"]


def test_a_parent_whose_agent_subgraph_takes_its_context_as_input_takes_the_update() -> None:
    """An agent whose input schema keeps the context fields reads the parent's: accepted."""
    inner = StateGraph(ToolBudgetState)  # its input takes the fields (a warning says so)
    with pytest.warns(UserWarning, match="context_tools"):
        add_toolbudget_nodes(inner, script("get_weather", {"city": "Oslo"}), weather_catalog())
    inner.add_edge(START, "choose_tools")
    app = team(budget_parent(), InMemorySaver(), first=inner.compile(checkpointer=True))
    update_context(app, CONFIG, exclude_tools(tools=["get_weather"]))
    out = app.invoke({"messages": [HumanMessage("weather in Oslo, then invoice ACME")]}, CONFIG)
    assert_refused_as_excluded(out, "get_weather")


def test_a_sqlite_thread_of_a_budget_state_parent_of_agents_refuses_the_cli(
    tmp_path: Path,
) -> None:
    db = tmp_path / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        saver.setup()
    parent = budget_parent()
    parent.add_node("weather", weather_agent())
    parent.add_edge(START, "weather")
    with SqliteThread(db, "t", parent) as thread:
        with pytest.raises(ThreadError) as raised:
            thread.update(exclude_tools(tools=["get_weather"]))
        assert thread.app.get_state(thread.config).created_at is None
    message = str(raised.value)
    assert "no node of this graph reads" in message and "'weather'" in message
    assert "--graph" in message and "\n" not in message


# --- several agents: the error names each, first the one that has the tools --------------


@PARENTS
@pytest.mark.parametrize(
    ("update", "first", "then"),
    [
        (exclude_tools(tools=["create_invoice"]), "billing", "weather"),
        (exclude_tools(tools=["get_weather"]), "weather", "billing"),
        (set_include_mode("manual", servers=["billing"]), "billing", "weather"),
    ],
    ids=["billing-tool", "weather-tool", "billing-server"],
)
def test_the_error_names_every_agent_first_the_one_whose_catalog_has_the_names(
    parent: Any, update: dict[str, Any], first: str, then: str
) -> None:
    app = team(parent(), InMemorySaver())
    with pytest.raises(ValueError) as raised:
        update_context(app, CONFIG, update)
    message = str(raised.value)
    assert message.index(f"{first!r} (its catalog has") < message.index(f"{then!r}")
    assert f"{then!r} (its catalog has" not in message
    assert re.findall(r"'checkpoint_ns': '([^']+)'", message) == [first]


def test_the_error_says_how_to_make_a_per_run_agent_keep_its_tool_context() -> None:
    app = team(messages_parent(), InMemorySaver(), persistent=False)
    with pytest.raises(ValueError) as raised:
        update_context(app, CONFIG, exclude_tools(tools=["create_invoice"]))
    message = str(raised.value)
    assert (
        "'billing' (its catalog has create_invoice; compiled without checkpointer=True" in message
    )
    assert "'checkpoint_ns': 'billing'" in message


# --- an update written into the agent that lacks its tools, while another has them --------


@PARENTS
@pytest.mark.parametrize(
    ("update", "named"),
    [
        (exclude_tools(tools=["create_invoice"]), "create_invoice"),
        (exclude_tools(tools=["get_weather", "create_invoice"]), "create_invoice"),
        (exclude_tools(servers=["billing"]), "billing"),
        (set_include_mode("manual", tools=["refund_payment"]), "refund_payment"),
        (include_tools(tools=["refund_payment"]), "refund_payment"),
    ],
    ids=["tool", "one-of-two", "server", "mode", "include"],
)
def test_an_update_of_another_agents_tools_is_refused_naming_that_agent(
    parent: Any, update: dict[str, Any], named: str
) -> None:
    app = team(parent(), InMemorySaver())
    with pytest.raises(ValueError) as raised:
        update_context(app, in_agent("weather"), update)
    message = str(raised.value)
    assert f"{named!r}" in message and "the subgraph 'weather'" in message
    assert "'checkpoint_ns': 'billing'" in message and "\n" not in message
    assert app.get_state(in_agent("weather")).created_at is None, "nothing written"


def test_an_update_of_the_agents_tools_through_the_parent_is_refused_naming_the_agent() -> None:
    """A parent whose ``ToolAgent`` reads its context holds the weather tools, not billing's."""
    agent = ToolAgent(script("get_weather", {"city": "Oslo"}), weather_catalog())
    app = team(budget_parent(), InMemorySaver(), first=agent)
    with pytest.raises(ValueError) as raised:
        update_context(app, CONFIG, exclude_tools(tools=["create_invoice"]))
    message = str(raised.value)
    assert "'create_invoice'" in message and "this graph" in message
    assert "'checkpoint_ns': 'billing'" in message
    refused = r"the subgraph 'billing' has no tool 'get_weather'.* while this graph \(get_weather\)"
    with pytest.raises(ValueError, match=refused):
        update_context(app, in_agent("billing"), exclude_tools(tools=["get_weather"]))


def test_names_no_agent_has_are_refused_unless_allowed() -> None:
    """A name no agent's catalog has is refused with the closest names (a misspelt exclusion
    would change nothing); ``allow_unknown=True`` writes it as given (an MCP tool that is not
    listed yet); taking a name out is never refused."""
    app = team(messages_parent(), InMemorySaver())
    with pytest.raises(ValueError, match=r"'weather' has no tool 'get_wether'.*'get_weather'"):
        update_context(app, in_agent("weather"), exclude_tools(tools=["get_wether"]))
    assert app.get_state(in_agent("weather")).values.get("context_tools", {}) == {}
    update = exclude_tools(tools=["not_listed_yet"])
    update_context(app, in_agent("weather"), update, allow_unknown=True)
    values = app.get_state(in_agent("weather")).values
    assert values["context_tools"] == {"not_listed_yet": "exclude"}
    update_context(app, in_agent("weather"), {"context_tools": {"not_listed_yet": None}})
    assert app.get_state(in_agent("weather")).values["context_tools"] == {}
