"""``ToolBudgetMiddleware(usage=...)`` under ``create_agent``, against ``create_toolbudget_agent``.

Only the chat model is fake (``ScriptedChatModel``); the catalog is the built-in
example's real tools, the agents real ``create_agent`` / prebuilt graphs with a real
``InMemoryStore`` and checkpointer. Checked: the same tools are recorded against the
same user message as the nodes record (successful catalog calls, also one loaded by a
meta-tool first; not refused or failed ones), the per-run opt-out, that the
middleware's selection ranks with the history exactly as the nodes do, and that a usage
store that fails ends no turn.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langgraph_toolbudget import ToolBudgetMiddleware, ToolUsage, create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
QUERY = "What is the weather in Paris today?"
UMBRELLA = "Do I need an umbrella in Lima on Saturday?"


def _call(name: str, i: int, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"c{i}", "type": "tool_call"}


def script() -> list[AIMessage]:
    return [
        AIMessage(
            "",
            tool_calls=[
                _call("get_weather", 1, city="Paris"),
                _call("delete_file", 2, path="/nope"),  # not visible: refused
                _call("read_file", 3, path="/missing/file"),  # raises: failed
            ],
        ),
        AIMessage("", tool_calls=[_call("add_tool", 4, tool_names=["count_rows"])]),
        AIMessage("", tool_calls=[_call("count_rows", 5, table="orders")]),
        AIMessage("Sunny, and there are 3 orders."),
    ]


def both_ways(usage: ToolUsage, node_usage: ToolUsage, responses: Any, **options: Any) -> Any:
    """The middleware agent and the prebuilt graph, each with its own model, store and usage."""
    catalog = build_example_catalog()
    model = ScriptedChatModel(responses=responses(), cycle=False)
    node_model = ScriptedChatModel(responses=responses(), cycle=False)
    agent = create_agent(
        model,
        middleware=[ToolBudgetMiddleware(catalog, usage=usage, **options)],
        checkpointer=InMemorySaver(),
        store=InMemoryStore(),
    )
    nodes = create_toolbudget_agent(
        node_model, catalog, usage=node_usage, offload_over_chars=None, **options
    ).compile(checkpointer=InMemorySaver(), store=InMemoryStore())
    return agent, nodes, model, node_model


async def run(app: Any, text: str, api: str, config: dict[str, Any]) -> dict[str, Any]:
    payload = {"messages": [HumanMessage(text)]}
    return app.invoke(payload, config) if api == "invoke" else await app.ainvoke(payload, config)


def rows(usage: ToolUsage) -> list[tuple[str, str, str | None]]:
    return [(r["tool"], r["query"], r["thread"]) for r in usage.export()]


@pytest.mark.parametrize("api", APIS)
async def test_middleware_records_what_the_nodes_record(api: str) -> None:
    usage, node_usage = ToolUsage(), ToolUsage()  # no store of their own: the graph's
    agent, nodes, _, _ = both_ways(usage, node_usage, script, pinned=["read_file"])
    config = {"configurable": {"thread_id": "t1"}}
    out = await run(agent, QUERY, api, config)
    statuses = {m.tool_call_id: m.status for m in out["messages"] if m.type == "tool"}
    assert statuses == {"c1": "success", "c2": "error", "c3": "error", "c4": "success"} | {
        "c5": "success"
    }
    await run(nodes, QUERY, api, config)
    expected = [("get_weather", QUERY, "t1"), ("count_rows", QUERY, "t1")]
    assert rows(usage) == rows(node_usage) == expected
    store = agent.store
    assert sorted(i.value["tool"] for i in store.search(("toolbudget", "usage"))) == [
        "count_rows",
        "get_weather",
    ]  # in the agent's store


@pytest.mark.parametrize("api", APIS)
async def test_middleware_honours_the_per_run_opt_out(api: str) -> None:
    usage, node_usage = ToolUsage(), ToolUsage()
    agent, nodes, _, _ = both_ways(usage, node_usage, script, pinned=["read_file"])
    config = {"configurable": {"thread_id": "q", "toolbudget_record_usage": False}}
    out = await run(agent, QUERY, api, config)
    assert [m.status for m in out["messages"] if m.type == "tool"].count("success") == 3
    await run(nodes, QUERY, api, config)
    assert usage.export() == node_usage.export() == []


@pytest.mark.parametrize("value", ["false", 0, None])
@pytest.mark.parametrize("api", APIS)
async def test_middleware_refuses_an_opt_out_that_is_not_a_bool_before_the_model_runs(
    api: str, value: Any
) -> None:
    usage, node_usage = ToolUsage(), ToolUsage()
    agent, nodes, model, node_model = both_ways(usage, node_usage, script, pinned=["read_file"])
    config = {"configurable": {"thread_id": "q", "toolbudget_record_usage": value}}
    for app in (agent, nodes):
        with pytest.raises(TypeError, match=r"toolbudget_record_usage'\] takes True .* or False"):
            await run(app, QUERY, api, config)
    assert (model.calls, node_model.calls) == ([], [])
    assert usage.export() == node_usage.export() == []


@pytest.mark.parametrize("api", APIS)
async def test_middleware_selection_ranks_with_usage_as_the_nodes_do(api: str) -> None:
    def answer() -> list[AIMessage]:
        return [AIMessage("Take one.")]

    config = {"configurable": {"thread_id": "u"}}
    plain, _, model, _ = both_ways(ToolUsage(), ToolUsage(), answer, max_tools=2)
    await run(plain, UMBRELLA, api, config)
    assert "weather_forecast" not in model.bound_tools[0]  # not without the history

    usage, node_usage = ToolUsage(), ToolUsage()
    for history in (usage, node_usage):
        history.record("do I need an umbrella this weekend", ["weather_forecast"])
    agent, nodes, model, node_model = both_ways(usage, node_usage, answer, max_tools=2)
    out = await run(agent, UMBRELLA, api, config)
    expected = await run(nodes, UMBRELLA, api, config)
    assert "weather_forecast" in model.bound_tools[0]
    assert model.bound_tools == node_model.bound_tools
    assert out["categories"] == expected["categories"]
    assert out["selected_tools"] == expected["selected_tools"]


@pytest.mark.parametrize("api", APIS)
async def test_middleware_goes_on_when_the_usage_store_cannot_be_read_or_written(
    api: str, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A real SqliteStore whose connection is closed: the selection cannot load Ada's history,
    # and the records cannot be written after the tools ran. Was: the turn raised after the
    # tools ran (their results lost, run again when the thread resumed).
    conn = sqlite3.connect(
        str(tmp_path / "usage.db"), check_same_thread=False, isolation_level=None
    )
    store = SqliteStore(conn)
    store.setup()
    usage = ToolUsage(store=store, scope="user")
    usage.attach()  # the shared history, loaded while the store is up
    conn.close()
    agent, _, model, _ = both_ways(usage, ToolUsage(), script, pinned=["read_file"])
    config = {"configurable": {"thread_id": "t1", "user_id": "ada"}}
    out = await run(agent, QUERY, api, config)
    assert out["messages"][-1].content == "Sunny, and there are 3 orders."
    assert len(model.calls) == 4  # each model turn once: no step ran again
    assert "usage history: the store could not be read" in caplog.text
    assert "usage history: recording get_weather failed" in caplog.text
    assert "usage history: recording count_rows failed" in caplog.text
