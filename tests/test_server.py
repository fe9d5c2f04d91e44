"""The agent deployed on a real ``langgraph dev`` server, driven by a ``langgraph_sdk`` client.

One server (the repository's ``langgraph.json``, plus ``EXTRA_GRAPHS`` and ``SERVED_AUTH``: custom
auth with ``examples/server_auth.py``'s store handler) is started per module on a free
127.0.0.1 port, in its own process group, and always stopped, even when a test fails. Only the
chat model is fake: the built-in rule-based demo model.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph_sdk import get_client
from langgraph_sdk.errors import PermissionDeniedError
from langgraph_server import (
    drive,
    example_server,
    free_port,
    langgraph_dev,
    served_config,
    server_env,
)

from langgraph_toolbudget.core.meta import meta_tool_definitions
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from tests.test_readme import SDK_RUN, SERVER_URL, run_example

graphs = example_server()  # examples/server.py, the graph factories langgraph.json names
REPO = Path(__file__).resolve().parents[1]
MCP = REPO / "examples" / "mcp_servers"
VISIBLE_SET_EVENT = "toolbudget.visible_tools"
STARTUP_TIMEOUT_S = 45
EXTRA_GRAPHS = {"toolbudget_in_parent": f"{REPO / 'tests' / 'agent_in_parent.py'}:graph"}
"""Served beside langgraph.json's graphs: the agent as a subgraph node of a MessagesState parent."""
SERVED_AUTH = f"""
import importlib.util

from langgraph_sdk import Auth

path = {str(REPO / "examples" / "server_auth.py")!r}
spec = importlib.util.spec_from_file_location("served_auth", path)
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)

auth = Auth()


@auth.authenticate
async def authenticate(headers: dict) -> str:
    return (headers.get(b"x-user") or b"tester").decode()


auth.on.store(example.deny_toolbudget_namespaces)
"""
"""The served auth: anyone (``x-user``, else ``tester``), with ``examples/server_auth.py``'s store
handler, as an app adds it to its own authentication (the clients of the other tests send
nothing)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start ``langgraph dev`` with the repository's langgraph.json; yield its URL."""
    workdir = tmp_path_factory.mktemp("langgraph_dev")  # .langgraph_api/ lands here
    port = free_port()
    env = server_env()
    # The MCP graph's servers, from a JSON file: two local FastMCP servers over stdio,
    # the math server under another name (so the test can tell the file was read).
    servers = {
        "calculator": {
            "transport": "stdio",
            "command": sys.executable,
            "args": [str(MCP / "math_server.py")],
        },
        "notes": {
            "transport": "stdio",
            "command": sys.executable,
            "args": [str(MCP / "notes_server.py")],
        },
    }
    servers_file = workdir / "mcp_servers.json"
    servers_file.write_text(json.dumps(servers), encoding="utf-8")
    env["TOOLBUDGET_MCP_SERVERS"] = str(servers_file)
    (workdir / "served_auth.py").write_text(SERVED_AUTH, encoding="utf-8")
    try:
        config = served_config(
            workdir, extra_graphs=EXTRA_GRAPHS, auth=f"{workdir / 'served_auth.py'}:auth"
        )
        with langgraph_dev(workdir, env, port, config) as (url, proc):
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))
    assert proc.returncode is not None
    assert proc.leftover == [], f"processes started by the server outlived it: {proc.leftover}"


async def _run_turn(
    client: Any,
    thread_id: str,
    text: str,
    config: dict[str, Any] | None = None,
    graph: str = "toolbudget",
) -> tuple[list[dict[str, Any]], dict[str, Any], list[Any]]:
    """One user turn: (custom events, node updates by node, error events)."""
    events: list[dict[str, Any]] = []
    updates: dict[str, Any] = {}
    errors: list[Any] = []
    async for part in client.runs.stream(
        thread_id,
        graph,
        input={"messages": [{"role": "user", "content": text}]},
        stream_mode=["updates", "custom"],
        config=config,
    ):
        if part.event == "custom":
            events.append(part.data)
        elif part.event == "updates":
            for node, update in part.data.items():
                updates.setdefault(node, []).append(update)
        elif part.event == "error":
            errors.append(part.data)
    return events, updates, errors


async def test_server_thread_keeps_visible_set_and_categories_across_turns(server: str) -> None:
    client = get_client(url=server)
    assistants = await client.assistants.search(graph_id="toolbudget")
    assert assistants, "the toolbudget graph of langgraph.json is not served"
    thread = await client.threads.create()
    thread_id = thread["thread_id"]

    events1, updates1, errors1 = await _run_turn(
        client, thread_id, "What's the weather in Tokyo today?"
    )
    assert errors1 == []
    assert {"choose_tools", "agent", "tools"} <= set(updates1)
    state1 = await client.threads.get_state(thread_id)
    values1 = state1["values"]
    assert values1["categories"][0] == "weather"
    assert "get_weather" in values1["selected_tools"]
    visible_events = [e for e in events1 if e.get("event") == VISIBLE_SET_EVENT]
    assert visible_events, f"no visible-set event in the stream: {events1}"
    assert "get_weather" in {name for e in visible_events for name in e["added"]}
    assert {e["reason"] for e in visible_events} >= {"select_tools"}
    # The demo model searched, called the weather tool and answered with its result.
    answer = values1["messages"][-1]
    assert answer["type"] == "ai" and "Tokyo" in answer["content"] and "sunny" in answer["content"]

    events2, _, errors2 = await _run_turn(
        client, thread_id, "Now post 'umbrella not needed' to the #general Slack channel"
    )
    assert errors2 == []
    values2 = (await client.threads.get_state(thread_id))["values"]
    assert values2["categories"][0] == "slack"
    selected1, selected2 = values1["selected_tools"], values2["selected_tools"]
    kept = [n for n in selected1 if n in selected2]
    assert "get_weather" in kept, "the tool turn 1 used stays visible"
    assert selected2[: len(kept)] == kept, "the kept tools first, in their order"
    assert "send_message" in selected2[len(kept) :]
    added2 = {n for e in events2 if e.get("event") == VISIBLE_SET_EVENT for n in e["added"]}
    assert "send_message" in added2
    assert added2 <= set(selected2)
    texts = [m["content"] for m in values2["messages"] if m["type"] == "human"]
    assert len(texts) == 2 and "Tokyo" in texts[0]
    assert "Sent to #general: umbrella not needed" in values2["messages"][-1]["content"]

    # The checkpoint at the end of turn 1 is still readable, with its categories.
    again = await client.threads.get_state(
        thread_id, checkpoint_id=state1["checkpoint"]["checkpoint_id"]
    )
    assert again["values"]["categories"] == values1["categories"]
    assert again["values"]["selected_tools"] == selected1


async def test_server_model_is_chosen_by_config(server: str) -> None:
    client = get_client(url=server)
    thread = await client.threads.create()
    _, _, errors = await _run_turn(
        client,
        thread["thread_id"],
        "What's the weather in Paris?",
        config={"configurable": {"model": "no-such-provider:some-model"}},
    )
    assert errors, "a model spec that cannot load must fail the run"
    assert "no-such-provider:some-model" in str(errors[0])

    _, _, ok = await _run_turn(
        client,
        (await client.threads.create())["thread_id"],
        "What's the weather in Paris?",
        config={"configurable": {"model": "demo", "max_tools": 2, "mode": "sequential"}},
    )
    assert ok == []


async def test_server_text_format_graph_runs_a_model_without_tool_calling(server: str) -> None:
    client = get_client(url=server)
    assert await client.assistants.search(graph_id="toolbudget_text"), "not served"
    thread_id = (await client.threads.create())["thread_id"]

    events1, _, errors1 = await _run_turn(
        client, thread_id, "What's the weather in Tokyo today?", graph="toolbudget_text"
    )
    assert errors1 == []
    formats = [e for e in events1 if e.get("event") == "toolbudget.tool_call_format"]
    assert formats and {e["format"] for e in formats} == {"hermes"}
    assert "primary format 'hermes' is available" in formats[0]["reason"]
    values1 = (await client.threads.get_state(thread_id))["values"]
    calls = [c for m in values1["messages"] if m["type"] == "ai" for c in m.get("tool_calls", [])]
    assert [c["name"] for c in calls] == ["get_weather"]  # parsed from text
    raw = [m["response_metadata"].get("toolbudget_raw", "") for m in values1["messages"]
           if m["type"] == "ai" and m.get("tool_calls")]  # fmt: skip
    assert all(r.startswith("<tool_call>") for r in raw)
    assert "Tokyo" in values1["messages"][-1]["content"]

    _, _, errors2 = await _run_turn(  # the same thread, now with the native demo model
        client,
        thread_id,
        "Now post 'umbrella not needed' to the #general Slack channel",
        config={"configurable": {"model": "demo"}},
    )
    assert errors2 == []
    values2 = (await client.threads.get_state(thread_id))["values"]
    assert "Sent to #general: umbrella not needed" in values2["messages"][-1]["content"]


async def test_server_codemode_graph_runs_programs_in_the_sandbox(server: str) -> None:
    client = get_client(url=server)
    assert await client.assistants.search(graph_id="toolbudget_codemode"), "not served"
    thread_id = (await client.threads.create())["thread_id"]
    events, _, errors = await _run_turn(
        client, thread_id, "What's the weather in Tokyo today?", graph="toolbudget_codemode"
    )
    assert errors == []
    formats = [e for e in events if e.get("event") == "toolbudget.tool_call_format"]
    assert formats and {e["format"] for e in formats} == {"codemode"}
    messages = (await client.threads.get_state(thread_id))["values"]["messages"]
    calls = [c for m in messages if m["type"] == "ai" for c in m.get("tool_calls", [])]
    # get_weather is visible and fits the request: one program calls it, no search first
    assert [c["name"] for c in calls] == ["python_execution"]
    assert "get_weather(city='Tokyo')" in calls[-1]["args"]["code"]
    outputs = [m for m in messages if m["type"] == "tool"]
    assert json.loads(outputs[-1]["content"])["city"] == "Tokyo"
    assert outputs[-1]["artifact"]["codemode"]["tool_calls"] == 1
    assert messages[-1]["content"].startswith("I used get_weather:")


async def test_server_mcp_graph_serves_the_configured_mcp_servers(server: str) -> None:
    client = get_client(url=server)
    thread_id = (await client.threads.create())["thread_id"]

    events1, _, errors1 = await _run_turn(
        client, thread_id, "Multiply 6 by 7", graph="toolbudget_mcp"
    )
    assert errors1 == []
    values1 = (await client.threads.get_state(thread_id))["values"]
    assert values1["categories"][0] == "calculator", "the servers of $TOOLBUDGET_MCP_SERVERS"
    assert "multiply" in values1["selected_tools"]
    assert any(e.get("event") == VISIBLE_SET_EVENT for e in events1)
    calls = [c for m in values1["messages"] if m["type"] == "ai" for c in m.get("tool_calls", [])]
    assert [c["name"] for c in calls] == ["multiply"]  # visible and clearly fitting: no search
    assert values1["messages"][-1]["content"] == "I used multiply: 42.0"

    events2, _, errors2 = await _run_turn(
        client, thread_id, "Save a note: buy milk", graph="toolbudget_mcp"
    )
    assert errors2 == []
    values2 = (await client.threads.get_state(thread_id))["values"]
    assert values2["categories"][0] == "notes"
    kept = [n for n in values1["selected_tools"] if n in values2["selected_tools"]]
    assert "multiply" in kept  # used in turn 1
    assert values2["selected_tools"][: len(kept)] == kept
    assert "add_note" in {
        n for e in events2 if e.get("event") == VISIBLE_SET_EVENT for n in e["added"]
    }
    assert values2["messages"][-1]["content"] == "I used add_note: note 1 saved"


async def test_server_middleware_graph_matches_the_prebuilt_graph(server: str) -> None:
    """create_agent + ToolBudgetMiddleware, served: same selection, same answer, persisted."""
    client = get_client(url=server)
    assert await client.assistants.search(graph_id="toolbudget_middleware")
    results = {}
    for graph in ("toolbudget", "toolbudget_middleware"):
        thread_id = (await client.threads.create())["thread_id"]
        events, updates, errors = await _run_turn(
            client, thread_id, "What's the weather in Tokyo today?", graph=graph
        )
        assert errors == []
        results[graph] = (events, updates, (await client.threads.get_state(thread_id))["values"])
    events, updates, values = results["toolbudget_middleware"]
    assert "ToolBudgetMiddleware.before_model" in updates  # the selection ran as a hook
    expected = results["toolbudget"][2]
    assert values["categories"] == expected["categories"] == ["weather"]
    assert values["selected_tools"] == expected["selected_tools"]
    assert values["messages"][-1]["content"] == expected["messages"][-1]["content"]
    assert "sunny" in values["messages"][-1]["content"]
    added = {n for e in events if e.get("event") == VISIBLE_SET_EVENT for n in e["added"]}
    assert "get_weather" in added


def test_server_page_names_every_graph_of_langgraph_json() -> None:
    served = json.loads((REPO / "langgraph.json").read_text())["graphs"]
    page = (REPO / "docs" / "server.md").read_text()
    words = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
    assert f"`langgraph.json` at the repository root serves {words[len(served)]} graphs" in page
    # The page's first table: graph id, factory.
    rows = [row.split("|") for row in page.splitlines() if row.startswith("| `")][: len(served)]
    assert [row[1].strip(" `") for row in rows] == list(served)
    assert [row[2].split("`")[1] for row in rows] == [
        graph["path"].rsplit(":", 1)[1] for graph in served.values()
    ]


def test_model_spec_from_config_then_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLBUDGET_MODEL", raising=False)
    assert graphs.model_spec(None) == "demo"
    monkeypatch.setenv("TOOLBUDGET_MODEL", "openai:gpt-4o-mini")
    assert graphs.model_spec({}) == "openai:gpt-4o-mini"
    assert graphs.model_spec({"configurable": {"model": "demo"}}) == "demo"
    with pytest.raises(TypeError, match="model"):
        graphs.model_spec({"configurable": {"model": 3}})


def test_chat_model_names_what_to_install_or_fix() -> None:
    catalog = build_example_catalog()
    demo = graphs.chat_model("demo")
    assert graphs.chat_model("demo") is demo  # cached: a factory called per run stays cheap
    # After a search that found nothing, the bound model calls the tool it was bound to,
    # with arguments read from the tool's schema and the request.
    turn = [
        HumanMessage("What's the weather in Paris?"),
        AIMessage("", tool_calls=[{"name": "search_tools", "args": {"query": "x"}, "id": "s1"}]),
        ToolMessage(json.dumps({"found": 0, "tools": []}), tool_call_id="s1"),
    ]
    reply = demo.bind_tools(catalog.tools(["get_weather"])).invoke(turn)
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert demo.invoke(turn).tool_calls == []  # unbound, it has no tool to call
    with pytest.raises((ImportError, ValueError), match="no-such-provider:m"):
        graphs.chat_model("no-such-provider:m")


def test_demo_model_with_every_tool_bound_calls_the_best_one_at_once() -> None:
    # No search_tools bound (a plain create_agent over the whole catalog): no search step.
    tools = [spec.tool for spec in build_example_catalog().specs]
    demo = graphs.chat_model("demo").bind_tools(tools)
    first = demo.invoke([HumanMessage("What's the weather in Tokyo today?")])
    assert [(c["name"], c["args"]) for c in first.tool_calls] == [
        ("get_weather", {"city": "Tokyo"})
    ]
    answered = demo.invoke(
        [
            HumanMessage("What's the weather in Tokyo today?"),
            first,
            ToolMessage("sunny", tool_call_id=first.tool_calls[0]["id"]),
        ]
    )
    assert answered.tool_calls == [] and "sunny" in answered.content


def test_demo_model_calls_a_visible_tool_that_fits_and_searches_for_one_that_is_not() -> None:
    catalog = build_example_catalog()
    meta = [t for t in meta_tool_definitions(catalog.categories) if t.name != "show_all_tools"]
    demo = graphs.chat_model("demo")
    weather = [HumanMessage("What is the air quality in Lima?")]
    visible = demo.bind_tools([*meta, *catalog.tools(["air_quality", "send_message"])])
    # air_quality is visible and fits better than anything else visible: called at once.
    assert [(c["name"], c["args"]) for c in visible.invoke(weather).tool_calls] == [
        ("air_quality", {"city": "Lima"})
    ]
    hidden = demo.bind_tools([*meta, *catalog.tools(["send_message"])])
    assert [c["name"] for c in hidden.invoke(weather).tool_calls] == ["search_tools"]
    # Equally relevant: the tool whose name the request covers most wins.
    both = demo.bind_tools([*meta, *catalog.tools(["weather_forecast", "get_weather"])])
    today = both.invoke([HumanMessage("What's the weather in Tokyo today?")]).tool_calls
    assert [c["name"] for c in today] == ["get_weather"]
    # Two visible tools fit equally well: the catalog's search decides between them.
    tie = demo.bind_tools([*meta, *catalog.tools(["list_issues", "create_issue"])])
    first = tie.invoke([HumanMessage("Open a GitHub issue")]).tool_calls
    assert [c["name"] for c in first] == ["search_tools"]


async def test_server_factories_build_each_graph_once_per_options() -> None:
    server = graphs
    server._example = None  # as in a fresh server process
    first = await asyncio.gather(*(server.example_agent({}) for _ in range(5)))
    assert all(g is first[0] for g in first), "concurrent first runs share one catalog and graph"
    smaller = await server.example_agent({"configurable": {"max_tools": 2, "mode": "sequential"}})
    assert smaller is not first[0]
    assert smaller is await server.example_agent(
        {"configurable": {"mode": "sequential", "max_tools": 2}}
    )
    hermes = await server.text_format_agent({})
    assert hermes is not first[0] and hermes is await server.text_format_agent({})
    via_middleware = await server.middleware_agent({})
    assert via_middleware is not first[0] and via_middleware is await server.middleware_agent({})
    with pytest.raises(TypeError, match="max_tools"):
        await server.example_agent({"configurable": {"max_tools": "8"}})
    catalog = await server._example_catalog()
    prompt = SystemMessage("Be brief.")  # not JSON: built per call, never a stale graph
    assert server.agent_for(catalog, {}, system_prompt=prompt) is not server.agent_for(
        catalog, {}, system_prompt=prompt
    )


def test_mcp_connections_from_env_json_or_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TOOLBUDGET_MCP_SERVERS", raising=False)
    defaults = graphs.mcp_connections()
    assert sorted(defaults) == ["math", "notes", "text"]
    assert all(Path(c["args"][0]).is_file() for c in defaults.values())
    assert {Path(c["args"][0]).parent for c in defaults.values()} == {MCP}
    with pytest.raises(KeyError, match=r"no example MCP servers \['nope'\]"):
        graphs.example_mcp_connections(["nope"])

    inline = '{"m": {"transport": "stdio", "command": "python", "args": ["s.py"]}}'
    monkeypatch.setenv("TOOLBUDGET_MCP_SERVERS", inline)
    expected = {"m": {"transport": "stdio", "command": "python", "args": ["s.py"]}}
    assert graphs.mcp_connections() == expected
    path = tmp_path / "servers.json"
    path.write_text(inline, encoding="utf-8")
    assert graphs.mcp_connections(str(path)) == graphs.mcp_connections()
    with pytest.raises(ValueError, match="TOOLBUDGET_MCP_SERVERS must be a JSON object"):
        graphs.mcp_connections('{"m": 3}')
    with pytest.raises(ValueError, match="TOOLBUDGET_MCP_SERVERS must be a JSON object"):
        graphs.mcp_connections("{not json")
    with pytest.raises(FileNotFoundError):
        graphs.mcp_connections(str(tmp_path / "missing.json"))


def _load_queries(threads: int) -> list[list[str]]:
    """Weather threads (even) and Slack threads (odd), each with texts no other thread sends."""
    out = []
    for i in range(threads):
        if i % 2:
            out.append([f"Post 'note {i}-{t}' to the #general Slack channel" for t in range(2)])
        else:
            out.append([f"What's the weather in Tokyo today? (ask {i}-{t})" for t in range(2)])
    return out


async def test_server_under_load_has_no_errors_and_keeps_threads_apart(server: str) -> None:
    # The small version of benchmarks/server_load.py: 10 threads x 2 turns at once.
    result = await drive(server, "toolbudget", 10, 2, _load_queries(10))
    assert result.errors == []
    assert result.runs == 20 and len(result.states) == 10
    for thread_id, values in result.states.items():
        own = result.texts[thread_id]
        humans = [m["content"] for m in values["messages"] if m["type"] == "human"]
        assert humans == own  # no thread sees another's messages
        answers = " ".join(str(m["content"]) for m in values["messages"] if m["type"] == "ai")
        if "Slack" in own[0]:
            assert "send_message" in values["selected_tools"]
            assert "get_weather" not in values["selected_tools"]  # nor another's tools
            assert all(t.split("'")[1] in answers for t in own)
        else:
            assert "get_weather" in values["selected_tools"]
            assert "send_message" not in values["selected_tools"]
            assert "Tokyo" in answers


async def test_server_store_api_keeps_the_agents_namespaces_from_clients(server: str) -> None:
    # Without an @auth.on.store handler any authenticated user read every thread's offloaded
    # outputs and wrote trusted-looking usage rows through the store API.
    client = get_client(url=server, headers={"x-user": "bob"})
    refused = [
        lambda: client.store.search_items(["toolbudget", "offload"]),
        lambda: client.store.search_items([]),  # every namespace
        lambda: client.store.search_items(["*", "offload"]),
        lambda: client.store.put_item(["toolbudget", "usage", "shared"], "k", {"trusted": True}),
        lambda: client.store.get_item(["toolbudget", "tools"], "get_weather"),
        lambda: client.store.delete_item(["toolbudget", "tools"], "get_weather"),
        lambda: client.store.list_namespaces(),
        lambda: client.store.list_namespaces(prefix=["toolbudget"]),
    ]
    for call in refused:
        with pytest.raises(PermissionDeniedError) as denied:
            await call()
        assert denied.value.response.status_code == 403
        # langgraph-sdk 0.3 keeps the server's detail in the error's body only
        assert "the agent's own" in f"{denied.value} {getattr(denied.value, 'body', '')}"
    await client.store.put_item(["memories", "bob"], "k", {"note": "likes rain"})
    assert (await client.store.get_item(["memories", "bob"], "k"))["value"] == {
        "note": "likes rain"
    }
    # the graphs' own store calls do not pass through auth: a turn still runs
    thread = await client.threads.create()
    run = await client.runs.wait(
        thread["thread_id"],
        "toolbudget",
        input={"messages": [{"role": "user", "content": "Weather in Tokyo?"}]},
    )
    assert "Tokyo" in str(run["messages"][-1]["content"])


def _server_auth() -> Any:
    """``examples/server_auth.py``, loaded by path as the docs show."""
    spec = importlib.util.spec_from_file_location(
        "server_auth", REPO / "examples" / "server_auth.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


class _User:  # an authenticated user, as the server hands a handler
    identity = display_name = "bob"
    is_authenticated, permissions = True, ()


def _store_ctx(action: str) -> Any:
    from langgraph_sdk import Auth

    return Auth.types.AuthContext(permissions=[], user=_User(), resource="store", action=action)


def test_the_store_handler_refuses_only_what_may_reach_the_agents_namespaces() -> None:
    from langgraph_sdk import Auth

    example = _server_auth()

    def verdict(action: str, namespace: Any) -> int:
        ctx = _store_ctx(action)
        try:
            asyncio.run(example.deny_toolbudget_namespaces(ctx, {"namespace": namespace}))
        except Auth.exceptions.HTTPException as error:
            return error.status_code
        return 200

    assert verdict("search", ("toolbudget", "offload")) == 403
    assert verdict("put", ("toolbudget", "usage", "shared")) == 403
    assert verdict("list_namespaces", None) == verdict("search", ()) == 403
    assert verdict("search", ("*",)) == 403
    assert verdict("put", ("memories", "bob")) == verdict("list_namespaces", ("prefs",)) == 200
    assert verdict("get", ("memories", "toolbudget")) == 200  # only the first label counts
    assert example.auth._handlers == {("store", "*"): [example.deny_toolbudget_namespaces]}


def test_an_apps_global_handler_keeps_filtering_the_store_through_the_wrapped_handler() -> None:
    # LangGraph server runs only the most specific handler of a request (langgraph_api's
    # _get_handler: (store, action), (store, *), (*, action), then the global one): the docs'
    # auth.on.store(deny_toolbudget_namespaces) silently dropped an app's global owner filter
    # from every store request, so bob's store search found alice's items.
    from langgraph_sdk import Auth

    example = _server_auth()
    auth = Auth()

    @auth.on
    async def add_owner(ctx: Auth.types.AuthContext, value: dict) -> dict:
        value.setdefault("metadata", {})["owner"] = ctx.user.identity
        return {"owner": ctx.user.identity}

    async def own_namespace(ctx: Auth.types.AuthContext, value: dict) -> None:
        value["namespace"] = (ctx.user.identity, *value["namespace"])  # the app's put handler

    auth.on.store(example.with_toolbudget_namespaces_denied(add_owner))
    per_action = hasattr(auth.on.store, "put")  # langgraph-sdk 0.3 has one store handler only
    if per_action:
        auth.on.store.put(example.with_toolbudget_namespaces_denied(own_namespace))
    (search,) = auth._handlers[("store", "*")]  # what the server runs for a store search

    def run(handler: Any, action: str, value: dict) -> Any:
        try:
            return asyncio.run(handler(ctx=_store_ctx(action), value=value))
        except Auth.exceptions.HTTPException as error:
            return error.status_code

    assert run(search, "search", {"namespace": ("memories",)}) == {"owner": "bob"}
    assert run(search, "search", {"namespace": ("toolbudget", "usage")}) == 403
    assert run(search, "list_namespaces", {"namespace": None}) == 403
    if per_action:
        (put,) = auth._handlers[("store", "put")]  # for a put the action's handler wins
        # the put handler keeps its rewrite, and the namespace checked is the one it rewrote
        value = {"namespace": ("toolbudget", "usage")}
        assert run(put, "put", value) is None
        assert value["namespace"] == ("bob", "toolbudget", "usage")

        class Toolbudget(_User):
            identity = "toolbudget"

        ctx = Auth.types.AuthContext(
            permissions=[], user=Toolbudget(), resource="store", action="put"
        )
        with pytest.raises(Auth.exceptions.HTTPException):
            asyncio.run(put(ctx=ctx, value={"namespace": ("notes",)}))
    with pytest.raises(TypeError, match="an async function with 'ctx' and 'value'"):
        example.with_toolbudget_namespaces_denied(lambda ctx, value: None)


@pytest.mark.parametrize("code, where", SDK_RUN, ids=[w for _, w in SDK_RUN])
def test_the_docs_sdk_examples_run_against_langgraph_dev(
    server: str, code: str, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert SERVER_URL in code
    run_example(code.replace(SERVER_URL, server), where, tmp_path, monkeypatch)
