"""A thread's tool context from outside: the SDK, the MCP context server and the CLI.

Everything runs against one real ``langgraph dev`` (the ``server`` fixture of
test_server.py, started once for this module) and a real ``SqliteSaver`` file; the
MCP server is driven by the ``mcp`` client over stdio and streamable HTTP, the
CLI runs as subprocesses. Only the chat model is fake (the demo model).
"""

from __future__ import annotations

import http.server
import importlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph_sdk import get_client
from mcp import ClientSession, StdioServerParameters
from mcp.client import streamable_http
from mcp.client.stdio import stdio_client

from langgraph_toolbudget import exclude_tools, include_tools
from langgraph_toolbudget.core.context_ops import list_tools
from langgraph_toolbudget.threads import ServerThread, ThreadError
from tests.test_server import server  # noqa: F401 - the shared langgraph dev fixture

REPO = Path(__file__).resolve().parents[1]
CATALOG = "langgraph_toolbudget.demo.example_catalog:build_example_catalog"
APP = """
from langgraph_toolbudget import create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

graph = create_toolbudget_agent(DemoChatModel(), build_example_catalog(), max_tools=5)
"""


def _env(extra: Path | None = None) -> dict[str, str]:
    paths = [str(REPO), *([str(extra)] if extra else []), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _cli(
    *args: str, cwd: Path | None = None, app: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "langgraph_toolbudget.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(app),
    )


async def _turn(client: Any, thread_id: str, text: str) -> dict[str, Any]:
    await client.runs.wait(
        thread_id, "toolbudget", input={"messages": [{"role": "user", "content": text}]}
    )
    return (await client.threads.get_state(thread_id))["values"]


async def test_sdk_update_state_then_next_turn_sees_the_context(server: str) -> None:  # noqa: F811
    client = get_client(url=server)
    thread_id = (await client.threads.create())["thread_id"]
    first = await _turn(client, thread_id, "What's the weather in Tokyo?")
    assert "get_weather" in first["selected_tools"]
    assert first["tool_reasons"]["get_weather"]["why"] in ("budget", "search")

    await client.threads.update_state(
        thread_id, exclude_tools(tools=["get_weather"], servers=["slack"])
    )
    await client.threads.update_state(thread_id, include_tools(tools=["create_issue"]))
    second = await _turn(client, thread_id, "What's the weather in Paris? Also post it to slack")
    assert second["context_tools"] == {"get_weather": "exclude", "create_issue": "include"}
    visible = set(second["selected_tools"])
    assert "get_weather" not in visible
    assert not visible & {"send_message", "list_channels", "read_channel_history"}
    assert "create_issue" in visible and second["tool_reasons"]["create_issue"] == {
        "why": "included"
    }
    assert set(second["tool_reasons"]) == visible


async def test_sdk_misspelt_context_update_is_a_400_and_the_exclusion_stands(
    server: str,  # noqa: F811
) -> None:
    client = get_client(url=server)
    thread_id = (await client.threads.create())["thread_id"]
    await _turn(client, thread_id, "What's the weather in Tokyo?")
    await client.threads.update_state(thread_id, exclude_tools(tools=["get_weather"]))
    for value, said in (("Exclude", "'Exclude', not one of"), (["exclude"], "['exclude'], not")):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await get_client(url=server).threads.update_state(
                thread_id, {"context_tools": {"get_weather": value}}
            )
        assert refused.value.response.status_code == 400, value
        assert said in refused.value.response.text
    after = await _turn(get_client(url=server), thread_id, "What's the weather in Paris?")
    assert after["context_tools"] == {"get_weather": "exclude"}
    assert "get_weather" not in after["selected_tools"]


def _call(result: Any) -> Any:
    assert len(result.content) == 1
    return json.loads(result.content[0].text)


async def test_mcp_context_server_over_stdio_and_http(server: str) -> None:  # noqa: F811
    client = get_client(url=server)
    thread_id = (await client.threads.create())["thread_id"]
    await _turn(client, thread_id, "What's the weather in Tokyo?")
    args = ["-m", "langgraph_toolbudget.context_server", "--url", server]
    args += ["--thread", thread_id, "--catalog", CATALOG]
    params = StdioServerParameters(command=sys.executable, args=args, env=_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = [t.name for t in (await session.list_tools()).tools]
        assert names == [
            "list_tools", "get_tool", "list_context_tools", "include_tool", "exclude_tool",
            "set_tool_include_mode", "list_tool_servers", "get_tool_server",
            "set_server_include_mode", "include_tool_server", "exclude_tool_server",
        ]  # fmt: skip
        servers = {s["name"]: s for s in _call(await session.call_tool("list_tool_servers", {}))}
        assert servers["weather"]["in_context"] >= 1 and servers["slack"]["in_context"] == 0
        out = _call(await session.call_tool("exclude_tool_server", {"server": "weather"}))
        weather = next(s for s in out["context"]["servers"] if s["name"] == "weather")
        assert weather["summary"] == "(0 of 4 tools)"
        out = _call(
            await session.call_tool(
                "set_tool_include_mode", {"tool": "send_message", "mode": "always"}
            )
        )  # noqa: E501
        assert out["tool"]["mode"] == "always" and out["tool"]["in_context"]
        bad = await session.call_tool("include_tool", {"tool": "get_wether"})
        assert bad.isError and "Closest tools" in bad.content[0].text
        tool = _call(await session.call_tool("get_tool", {"tool": "get_weather"}))
        assert tool["excluded"] and tool["server"] == "weather"
    values = (await client.threads.get_state(thread_id))["values"]
    assert values["context_servers"] == {"weather": "exclude"}
    assert values["context_tool_modes"] == {"send_message": "always"}
    nxt = await _turn(client, thread_id, "What's the weather in Lima?")
    assert "send_message" in nxt["selected_tools"] and "get_weather" not in nxt["selected_tools"]

    port = _free_port()
    http = subprocess.Popen(
        [sys.executable, *args, "--transport", "streamable-http", "--port", str(port)],
        env={**_env(), "TOOLBUDGET_CONTEXT_TOKEN": "t0ken"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        _wait_listening(port, http)
        headers = {"Authorization": "Bearer t0ken"}
        # streamable_http_client is the newer name; the lowest supported mcp has the older one.
        if hasattr(streamable_http, "streamable_http_client"):
            client_cm = httpx.AsyncClient(headers=headers)
            connect = streamable_http.streamable_http_client(url, http_client=client_cm)
        else:
            connect = streamable_http.streamablehttp_client(url, headers=headers)
        async with connect as (read, write, _), ClientSession(read, write) as session:
            await session.initialize()
            in_context = _call(await session.call_tool("list_context_tools", {}))
            assert "send_message" in {t["name"] for t in in_context}
            assert "get_weather" not in {t["name"] for t in in_context}
    finally:
        http.terminate()
        http.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the MCP context server exited"
        try:
            httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    pytest.fail("the MCP context server did not listen in 30 s")


async def test_cli_against_langgraph_dev(server: str) -> None:  # noqa: F811
    client = get_client(url=server)
    thread_id = (await client.threads.create())["thread_id"]
    await _turn(client, thread_id, "What's the weather in Tokyo?")
    target = ["--url", server, "--thread", thread_id, "--catalog", CATALOG]

    listed = _cli("tools", *target)
    assert listed.returncode == 0, listed.stderr
    assert "weather (" in listed.stdout and "[x] get_weather" in listed.stdout
    assert "github (0 of 7 tools)" in listed.stdout

    done = _cli("tools", "exclude", "--server", "github", *target)
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip()
        == f"excluded server github in thread {thread_id}: github (0 of 7 tools)"
    )  # noqa: E501
    done = _cli("tools", "include", "--server", "slack", "--tool", "send_message", *target)
    assert "slack (1 of 5 tools)" in done.stdout
    done = _cli("tools", "mode", "always", "--server", "files", *target, "--json")
    files = next(s for s in json.loads(done.stdout)["context"]["servers"] if s["name"] == "files")
    assert files["mode"] == "always" and files["summary"].startswith("(all")

    data = json.loads(_cli("tools", *target, "--json").stdout)
    rows = {r["name"]: r for r in data["tools"]}
    assert rows["create_issue"]["excluded"] and rows["send_message"]["context"] == "include"
    values = (await client.threads.get_state(thread_id))["values"]
    assert values["context_servers"] == {"github": "exclude"}
    assert values["context_server_modes"] == {"files": "always"}

    missing = str(uuid.uuid4())
    errors = [
        (["tools", "--url", server, "--thread", missing, "--catalog", CATALOG],
         f"thread '{missing}' not found"),
        (["tools", "--url", f"http://127.0.0.1:{_free_port()}", "--thread", thread_id,
          "--catalog", CATALOG], "cannot reach the LangGraph server"),
        (["tools", "exclude", "--server", "files", "--tool", "nope", *target],
         "not tools of this catalog"),
    ]  # fmt: skip
    # Independent commands: started together, so the suite waits for one start-up, not three.
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "langgraph_toolbudget.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )  # fmt: skip
        for args, _ in errors
    ]
    for proc, (_, expected) in zip(procs, errors, strict=True):
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 1
        assert expected in stderr and len(stderr.strip().splitlines()) == 1


async def test_cli_and_mcp_server_change_a_thread_that_never_ran(server: str) -> None:  # noqa: F811
    client = get_client(url=server)
    fresh, other = [(await client.threads.create())["thread_id"] for _ in range(2)]
    target = ["--url", server, "--thread", fresh, "--catalog", CATALOG]
    refused = _cli("tools", "exclude", "--server", "slack", *target)
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert f"thread '{fresh}' has never run" in refused.stderr
    assert "pass --graph-id" in refused.stderr and "toolbudget_middleware" in refused.stderr
    done = _cli("tools", "exclude", "--server", "slack", *target, "--graph-id", "toolbudget")
    assert done.returncode == 0, done.stderr
    assert "slack (0 of 5 tools)" in done.stdout
    assert (await client.threads.get(fresh))["metadata"]["graph_id"] == "toolbudget"
    # A second update before the first run lands too (the first one leaves state behind).
    again = _cli("tools", "exclude", "--tool", "get_weather", *target)
    assert again.returncode == 0, again.stderr
    assert (await client.threads.get_state(fresh))["next"] == ["choose_tools"]
    values = await _turn(client, fresh, "Post the weather in Paris to slack")
    assert values["context_servers"] == {"slack": "exclude"}
    assert values["context_tools"] == {"get_weather": "exclude"}
    assert not set(values["selected_tools"]) & {"send_message", "list_channels", "get_weather"}

    args = ["-m", "langgraph_toolbudget.context_server", "--url", server, "--thread", other]
    args += ["--catalog", CATALOG, "--graph-id", "toolbudget"]
    params = StdioServerParameters(command=sys.executable, args=args, env=_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        out = await session.call_tool("exclude_tool", {"tool": "get_weather"})
        assert not out.isError, out.content
    assert (await client.threads.get_state(other))["values"]["context_tools"] == {
        "get_weather": "exclude"
    }


async def test_cli_and_mcp_server_name_a_misspelt_graph_id_not_the_thread(server: str) -> None:  # noqa: F811
    # The server answers 404 for the unknown graph: that is not an unknown thread.
    client = get_client(url=server)
    fresh = (await client.threads.create())["thread_id"]  # exists, never ran
    graphs = ", ".join(sorted({a["graph_id"] for a in await client.assistants.search(limit=100)}))
    expected = (
        f"graph 'toolbudgte' not found on the LangGraph server at {server} (its graphs: "
        f"{graphs}); check --graph-id"
    )
    target = ["--url", server, "--thread", fresh, "--catalog", CATALOG, "--graph-id", "toolbudgte"]
    refused = _cli("tools", "exclude", "--tool", "get_weather", *target)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [f"error: {expected}"]
    assert "graph_id" not in (await client.threads.get(fresh))["metadata"]  # nothing assigned

    args = ["-m", "langgraph_toolbudget.context_server", *target]
    params = StdioServerParameters(command=sys.executable, args=args, env=_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        out = await session.call_tool("exclude_tool", {"tool": "get_weather"})
        assert out.isError and out.content[0].text.endswith(f"exclude_tool: {expected}")

    # A thread whose own graph the server does not serve (it ran on another server).
    moved = (await client.threads.create(metadata={"graph_id": "gone"}))["thread_id"]
    gone = _cli("tools", "exclude", "--tool", "get_weather", "--url", server, "--thread", moved,
                "--catalog", CATALOG)  # fmt: skip
    assert gone.returncode == 1
    assert gone.stderr.strip().splitlines() == [
        f"error: thread '{moved}' belongs to graph 'gone', which the LangGraph server at {server} "
        f"does not serve (its graphs: {graphs}); check --url (the server that ran the thread) "
        "and --thread"
    ]


async def test_cli_changes_a_thread_whose_run_stopped_before_its_first_node(server: str) -> None:  # noqa: F811
    # Only START ran there, so the server would write a plain update as the graph's input,
    # dropping the context fields; the thread must still wait at its first node after it.
    client = get_client(url=server)
    thread = (await client.threads.create())["thread_id"]
    request = {"messages": [{"role": "user", "content": "Open an issue about the login bug"}]}
    await client.runs.wait(thread, "toolbudget", input=request, interrupt_before=["choose_tools"])
    assert (await client.threads.get_state(thread))["next"] == ["choose_tools"]
    target = ["--url", server, "--thread", thread, "--catalog", CATALOG]
    done = _cli("tools", "exclude", "--tool", "create_issue", *target)
    assert done.returncode == 0, done.stderr
    state = await client.threads.get_state(thread)
    assert state["values"]["context_tools"] == {"create_issue": "exclude"}
    assert state["next"] == ["choose_tools"]
    await client.runs.wait(thread, "toolbudget", input=None)
    values = (await client.threads.get_state(thread))["values"]
    assert values["selected_tools"] and "create_issue" not in values["selected_tools"]
    assert len([m for m in values["messages"] if m["type"] == "human"]) == 1, "nothing lost"


PARENT_APP = """
from langgraph.graph import START, MessagesState, StateGraph
from langgraph_toolbudget import create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

agent = create_toolbudget_agent(DemoChatModel(), build_example_catalog())
graph = StateGraph(MessagesState)
graph.add_node("assistant", agent.compile(checkpointer=True))
graph.add_edge(START, "assistant")
"""


async def _mcp_exclude(args: list[str], env: dict[str, str]) -> Any:
    """``exclude_tool get_weather`` through the MCP context server over stdio."""
    server_args = ["-m", "langgraph_toolbudget.context_server", *args]
    params = StdioServerParameters(command=sys.executable, args=server_args, env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await session.call_tool("exclude_tool", {"tool": "get_weather"})


async def test_cli_and_mcp_server_refuse_a_thread_whose_state_has_no_context_fields(
    server: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    # The agent as a subgraph node of a MessagesState parent: the parent's state drops the
    # context fields, so a reported success would be a lost exclusion.
    client = get_client(url=server)
    ran, fresh = [(await client.threads.create())["thread_id"] for _ in range(2)]
    request = {"messages": [{"role": "user", "content": "What's the weather in Tokyo?"}]}
    await client.runs.wait(ran, "toolbudget_in_parent", input=request)
    before = (await client.threads.get_state(ran))["checkpoint"]
    on_server = [
        ["--thread", ran],
        ["--thread", fresh, "--graph-id", "toolbudget_in_parent"],
    ]
    for thread in on_server:
        args = ["--url", server, *thread, "--catalog", CATALOG]
        refused = _cli("tools", "exclude", "--tool", "get_weather", *args)
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
        assert "'toolbudget_in_parent'" in refused.stderr
        assert "has no context_tools field" in refused.stderr
        out = await _mcp_exclude(args, _env())
        assert out.isError and "has no context_tools field" in out.content[0].text
    assert (await client.threads.get_state(ran))["checkpoint"] == before, "nothing written"
    assert "graph_id" not in (await client.threads.get(fresh))["metadata"], "not assigned"

    local = _sqlite_thread(tmp_path, "parentapp", PARENT_APP, request)
    local += ["--catalog", CATALOG]
    refused = _cli("tools", "exclude", "--tool", "get_weather", *local, app=tmp_path)
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert "no context_tools channel" in refused.stderr and "--graph" in refused.stderr
    out = await _mcp_exclude(local, _env(tmp_path))
    assert out.isError and "no context_tools channel" in out.content[0].text


async def test_the_cli_and_the_mcp_server_lift_exclusions_the_models_tools_may_not(
    tmp_path: Path,
) -> None:
    """The user's faces may include again what was excluded (the model's own context tools
    may not, see tests/test_context.py), and their descriptions carry no model rule."""
    target = _sqlite_thread(tmp_path, module=f"liftapp_{tmp_path.name}")
    for args in (["--tool", "get_weather"], ["--server", "slack"]):
        done = _cli("tools", "exclude", *args, *target, app=tmp_path)
        assert done.returncode == 0, done.stderr
    server_args = ["-m", "langgraph_toolbudget.context_server", *target]
    params = StdioServerParameters(command=sys.executable, args=server_args, env=_env(tmp_path))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        described = {t.name: t.description for t in (await session.list_tools()).tools}
        assert not any("only the user" in (d or "") for d in described.values())
        tool = _call(await session.call_tool("include_tool", {"tool": "get_weather"}))["tool"]
        assert tool["excluded"] is False and tool["in_context"] is True
        slack = {"server": "slack", "mode": "agent"}
        mode = await session.call_tool("set_server_include_mode", slack)
        assert not mode.isError, "the user may set the mode of an excluded server"
    done = _cli("tools", "include", "--server", "slack", *target, app=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("included server slack"), done.stderr
    listed = json.loads(_cli("tools", *target, "--json", app=tmp_path).stdout)["tools"]
    assert not [row["name"] for row in listed if row["excluded"]], "every exclusion lifted"


def test_cli_against_a_sqlite_thread_and_explain(tmp_path: Path) -> None:
    (tmp_path / "myapp.py").write_text(APP, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        from myapp import graph  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    db = tmp_path / "threads.sqlite"
    config = {"configurable": {"thread_id": "t1"}}
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph.compile(checkpointer=saver).invoke(
            {"messages": [("user", "weather in Paris?")]}, config
        )
    target = ["--sqlite", str(db), "--graph", "myapp:graph", "--thread", "t1"]
    done = _cli(
        "tools", "exclude", "--server", "weather", "--tool", "get_weather", *target, app=tmp_path
    )  # noqa: E501
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("excluded tool get_weather in thread t1: weather (")
    with SqliteSaver.from_conn_string(str(db)) as saver:
        app = graph.compile(checkpointer=saver)
        assert app.get_state(config).values["context_tools"] == {"get_weather": "exclude"}
        out = app.invoke({"messages": [("user", "and the weather in Lima?")]}, config)
        assert "get_weather" not in out["selected_tools"]
        assert len([m for m in out["messages"] if m.type == "human"]) == 2, "nothing lost"
    listed = _cli("tools", *target, app=tmp_path)
    assert "[-] get_weather" in listed.stdout

    explained = _cli("explain", "What's the weather in Paris?", "--catalog", CATALOG)
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.splitlines()[2].split()[0] == "weather"
    assert "get_weather" in explained.stdout and "budget: weather (share" in explained.stdout
    assert "Schema tokens:" in explained.stdout
    data = json.loads(_cli("explain", "weather in Paris", "--catalog", CATALOG, "--json").stdout)
    assert data["categories"][0]["name"] == "weather"
    assert 0 < data["schema_tokens"]["chosen"] < data["schema_tokens"]["all"]
    assert _cli("--help").returncode == 0


def _sqlite_thread(
    tmp_path: Path,
    module: str = "myapp",
    source: str = APP,
    request: dict[str, Any] | None = None,
) -> list[str]:
    """A SqliteSaver thread (t1) of the app ``source``, written as ``module``, that ran one
    turn: the CLI's and the server's target options."""
    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        graph = importlib.import_module(module).graph
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(module, None)
    db = tmp_path / "threads.sqlite"
    request = request or {"messages": [("user", "weather in Paris?")]}
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph.compile(checkpointer=saver).invoke(request, {"configurable": {"thread_id": "t1"}})
    return ["--sqlite", str(db), "--graph", f"{module}:graph", "--thread", "t1"]


def _context_server(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "langgraph_toolbudget.context_server", *args],
        env={**_env(tmp_path), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_the_http_context_server_needs_the_token_and_an_allowed_host(tmp_path: Path) -> None:
    target = _sqlite_thread(tmp_path)
    port = _free_port()
    token = "s3cret-token"
    http = _context_server(
        tmp_path,
        *target,
        "--transport", "streamable-http", "--port", str(port),
        env={"TOOLBUDGET_CONTEXT_TOKEN": token},
    )  # fmt: skip
    try:
        _wait_listening(port, http)
        url = f"http://127.0.0.1:{port}/mcp"
        bearer = {"Authorization": f"Bearer {token}"}
        assert httpx.post(url, json=INIT, headers=ACCEPT).status_code == 401
        wrong = {**ACCEPT, "Authorization": "Bearer guess"}
        assert httpx.post(url, json=INIT, headers=wrong).status_code == 401
        evil_host = {**ACCEPT, **bearer, "Host": "evil.example:80"}
        assert httpx.post(url, json=INIT, headers=evil_host).status_code in (403, 421)
        evil_origin = {**ACCEPT, **bearer, "Origin": "http://evil.example"}
        assert httpx.post(url, json=INIT, headers=evil_origin).status_code in (403, 421)
        assert httpx.post(url, json=INIT, headers={**ACCEPT, **bearer}).status_code == 200
    finally:
        http.terminate()
        http.wait(timeout=10)


def test_the_http_context_server_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    target = _sqlite_thread(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "TOOLBUDGET_CONTEXT_TOKEN"}
    args = [*target, "--transport", "streamable-http", "--host", "0.0.0.0", "--port", "1"]
    http = _context_server(tmp_path, *args, env={**env, "TOOLBUDGET_CONTEXT_TOKEN": ""})
    _, err = http.communicate(timeout=60)
    assert http.returncode == 2
    assert "refusing to listen on 0.0.0.0 over HTTP without a token" in err
    assert "TOOLBUDGET_CONTEXT_TOKEN" in err and len(err.strip().splitlines()) == 1


def test_the_http_context_server_starts_with_an_allowed_host_of_any_port(tmp_path: Path) -> None:
    target = _sqlite_thread(tmp_path)
    port = _free_port()
    token = "s3cret-token"
    http = _context_server(
        tmp_path,
        *target,
        "--transport", "streamable-http", "--port", str(port), "--allow-host", "10.0.0.5:*",
        env={"TOOLBUDGET_CONTEXT_TOKEN": token},
    )  # fmt: skip
    try:
        _wait_listening(port, http)  # exited at start: its issuer URL was "http://10.0.0.5:*"
        url = f"http://127.0.0.1:{port}/mcp"
        lan = {**ACCEPT, "Authorization": f"Bearer {token}", "Host": "10.0.0.5:4321"}
        assert httpx.post(url, json=INIT, headers=lan).status_code == 200
        refused = httpx.post(url, json=INIT, headers=ACCEPT)
        assert refused.status_code == 401
        assert f"http://127.0.0.1:{port}/" in refused.headers["www-authenticate"]
    finally:
        http.terminate()
        http.wait(timeout=10)


def test_the_context_servers_options_parse_without_docstrings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `python -OO` strips docstrings; the parser took its description from the module's.
    from langgraph_toolbudget import context_server

    monkeypatch.setattr(context_server, "__doc__", None)
    parser = context_server._parser()
    assert "tool context of one thread" in parser.format_help()
    assert parser.parse_args(["--thread", "t1"]).thread == "t1"


@pytest.mark.parametrize("port", ["99999", "-5", "0", "65536"])
def test_the_context_server_answers_a_port_out_of_range_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], port: str
) -> None:
    from langgraph_toolbudget.context_server import main

    target = _sqlite_thread(tmp_path, module=f"portapp_{tmp_path.name}")
    monkeypatch.chdir(tmp_path)  # the --graph spec imports from the current directory
    monkeypatch.setenv("TOOLBUDGET_CONTEXT_TOKEN", "s3cret-token")
    with pytest.raises(SystemExit) as exited:  # before: pydantic's URL traceback, from FastMCP
        main([*target, "--transport", "streamable-http", "--port", port])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"error: --port must be a TCP port, 1 to 65535, got {port}"]


def test_build_server_refuses_a_port_out_of_range_and_builds_without_a_warning(
    tmp_path: Path,
) -> None:
    from langgraph_toolbudget.context_server import build_server
    from langgraph_toolbudget.threads import open_thread

    target = _sqlite_thread(tmp_path, module=f"portapp_{tmp_path.name}")
    sys.path.insert(0, str(tmp_path))
    try:
        thread, catalog = open_thread(url=None, sqlite=target[1], graph=target[3], thread_id="t1")
        try:
            for port in (70000, 0, -5):
                with pytest.raises(
                    ValueError, match=f"port must be a TCP port, 1 to 65535, got {port}"
                ):
                    build_server(thread, catalog, port=port, token="s3cret-token")
            # mcp 1.30 warned (DeprecationWarning) at our call while the token's resource check
            # was unset: an app whose tests turn warnings into errors could not start the server.
            # Warnings the SDK's own code raises (older ones raise some) are not ours to mend.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert build_server(thread, catalog, port=65535, token="s3cret-token") is not None
            ours = [w for w in caught if "langgraph_toolbudget" in Path(w.filename).parts]
            assert not ours, [f"{w.category.__name__}: {w.message}" for w in ours]
        finally:
            thread.close()
    finally:
        sys.path.remove(str(tmp_path))


async def test_the_mcp_context_servers_answers_are_cut_as_the_models_are(tmp_path: Path) -> None:
    # An MCP client's model keeps each answer in its context: list_tools of a 5,000-tool agent
    # was 800,000 characters over MCP. Cut as the model's own context tools are, by default.
    from langgraph_toolbudget.context_server import MIN_ANSWER_CHARS, build_server
    from langgraph_toolbudget.threads import open_thread

    def text(result: Any) -> str:
        blocks = result[0] if isinstance(result, tuple) else result  # (content, structured)
        return str(blocks[0].text)

    target = _sqlite_thread(tmp_path, module=f"cutapp_{tmp_path.name}")
    sys.path.insert(0, str(tmp_path))
    try:
        thread, catalog = open_thread(url=None, sqlite=target[1], graph=target[3], thread_id="t1")
        try:
            total = len(list_tools(catalog, {}))
            cut = build_server(thread, catalog, max_answer_chars=MIN_ANSWER_CHARS)
            answer = text(await cut.call_tool("list_tools", {}))
            data = json.loads(answer)
            assert len(answer) <= MIN_ANSWER_CHARS and data["total"] == total
            assert 0 < len(data["tools"]) < total
            assert "list_tools(server=...)" in data["message"]
            assert "search_tools" not in data["message"]  # not an operation of this server
            for whole in (
                build_server(thread, catalog),
                build_server(thread, catalog, max_answer_chars=None),
            ):
                assert len(json.loads(text(await whole.call_tool("list_tools", {})))) == total
            for bad in (0, -1, True, MIN_ANSWER_CHARS - 1):
                with pytest.raises(ValueError, match="must be a number of characters, at least"):
                    build_server(thread, catalog, max_answer_chars=bad)
        finally:
            thread.close()
    finally:
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize("bound", ["-1", "999"])
def test_the_context_server_answers_a_bound_too_small_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bound: str
) -> None:
    from langgraph_toolbudget.context_server import main

    target = _sqlite_thread(tmp_path, module=f"boundapp_{tmp_path.name}")
    with pytest.raises(SystemExit) as exited:
        main([*target, "--max-answer-chars", bound])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --max-answer-chars must be a number of characters, at least 1,000, got {bound} "
        "(0 on the command line, None in Python: every answer whole)"
    ]


def test_a_server_without_an_assistants_endpoint_is_an_error_not_a_recursion():
    # A 404 about the thread asks the server which graphs it serves; a server (a proxy, not
    # LangGraph) that knows the thread but answers the assistants search 404 made that
    # question ask itself again, until RecursionError.
    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            found = self.command == "GET" and self.path == "/threads/t1"
            body = json.dumps({"thread_id": "t1", "metadata": {"graph_id": "g"}} if found else {})
            self.send_response(200 if found else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        with pytest.raises(ThreadError, match="no assistants endpoint"):
            ServerThread(url, "t1").values()
    finally:
        httpd.shutdown()
