"""The agent deployed on a real ``langgraph dev`` server, driven by a ``langgraph_sdk`` client.

One server (the repository's ``langgraph.json``) is started per module on a free
127.0.0.1 port, in its own process group, and always stopped, even when a test
fails. Only the chat model is fake: the built-in rule-based demo model.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph_sdk import get_client

from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.server import chat_model, mcp_connections, model_spec

REPO = Path(__file__).resolve().parents[1]
MCP = REPO / "langgraph_toolbudget" / "demo" / "mcp_servers"
VISIBLE_SET_EVENT = "toolbudget.visible_tools"
STARTUP_TIMEOUT_S = 45


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _langgraph_cli() -> str:
    beside = Path(sys.executable).with_name("langgraph")
    found = str(beside) if beside.exists() else shutil.which("langgraph")
    assert found, "the `langgraph` CLI is missing: pip install -e '.[dev]' (langgraph-cli[inmem])"
    return found


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc), e.g. the MCP servers it started."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process exited meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _stop(proc: subprocess.Popen[bytes]) -> list[int]:
    """Stop the server's own process group: SIGTERM, then SIGKILL if it lingers.

    Returns:
        Descendants still alive 10 s after the server stopped (then killed):
        processes the server started in their own session, e.g. stdio MCP
        servers, must exit with it.
    """
    spawned = _descendants(proc.pid)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in spawned) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftover = [p for p in spawned if _alive(p)]
    for pid in leftover:
        os.kill(pid, signal.SIGKILL)
    return leftover


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start ``langgraph dev`` with the repository's langgraph.json; yield its URL."""
    workdir = tmp_path_factory.mktemp("langgraph_dev")  # .langgraph_api/ lands here
    log_path = workdir / "server.log"
    port = _free_port()
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "1",
        "LANGSMITH_TRACING": "false",
    }
    env.pop("TOOLBUDGET_MODEL", None)  # the default model: the offline demo model
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
    command = [
        _langgraph_cli(),
        "dev",
        "--config",
        str(REPO / "langgraph.json"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-browser",
        "--no-reload",
    ]
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while True:
                if proc.poll() is not None:
                    pytest.fail(
                        f"langgraph dev exited with {proc.returncode}:\n{log_path.read_text()}"
                    )
                try:
                    if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"langgraph dev not ready in {STARTUP_TIMEOUT_S} s:\n{log_path.read_text()}"
                    )
                time.sleep(0.25)
            yield url
        finally:
            leftover = _stop(proc)
    assert proc.returncode is not None
    assert leftover == [], f"processes started by the server outlived it: {leftover}"


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
    assert {"classify_intent", "select_tools", "agent", "tools"} <= set(updates1)
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
    assert selected2[: len(selected1)] == selected1, "turn 1's visible tools kept, in order"
    assert "send_message" in selected2[len(selected1) :]
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
    assert [c["name"] for c in calls] == ["search_tools", "get_weather"]  # parsed from text
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
    assert [c["name"] for c in calls] == ["search_tools", "multiply"]
    assert values1["messages"][-1]["content"] == "I used multiply: 42.0"

    events2, _, errors2 = await _run_turn(
        client, thread_id, "Save a note: buy milk", graph="toolbudget_mcp"
    )
    assert errors2 == []
    values2 = (await client.threads.get_state(thread_id))["values"]
    assert values2["categories"][0] == "notes"
    assert values2["selected_tools"][: len(values1["selected_tools"])] == values1["selected_tools"]
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


def test_model_spec_from_config_then_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLBUDGET_MODEL", raising=False)
    assert model_spec(None) == "demo"
    monkeypatch.setenv("TOOLBUDGET_MODEL", "openai:gpt-4o-mini")
    assert model_spec({}) == "openai:gpt-4o-mini"
    assert model_spec({"configurable": {"model": "demo"}}) == "demo"
    with pytest.raises(TypeError, match="model"):
        model_spec({"configurable": {"model": 3}})


def test_chat_model_names_what_to_install_or_fix() -> None:
    catalog = build_example_catalog()
    demo = chat_model("demo")
    assert chat_model("demo") is demo  # cached: a factory called per run stays cheap
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
        chat_model("no-such-provider:m")


def test_mcp_connections_from_env_json_or_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TOOLBUDGET_MCP_SERVERS", raising=False)
    defaults = mcp_connections()
    assert sorted(defaults) == ["math", "notes", "text"]
    assert all(Path(c["args"][0]).is_file() for c in defaults.values())

    inline = '{"m": {"transport": "stdio", "command": "python", "args": ["s.py"]}}'
    monkeypatch.setenv("TOOLBUDGET_MCP_SERVERS", inline)
    assert mcp_connections() == {"m": {"transport": "stdio", "command": "python", "args": ["s.py"]}}
    path = tmp_path / "servers.json"
    path.write_text(inline, encoding="utf-8")
    assert mcp_connections(str(path)) == mcp_connections()
    with pytest.raises(ValueError, match="TOOLBUDGET_MCP_SERVERS must be a JSON object"):
        mcp_connections('{"m": 3}')
    with pytest.raises(ValueError, match="TOOLBUDGET_MCP_SERVERS must be a JSON object"):
        mcp_connections("{not json")
    with pytest.raises(FileNotFoundError):
        mcp_connections(str(tmp_path / "missing.json"))
