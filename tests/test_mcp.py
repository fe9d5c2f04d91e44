"""MCP servers as a tool catalog, against real FastMCP server processes.

The servers (``examples/mcp_servers``) run over stdio (spawned by the
catalog) or over streamable HTTP / SSE on 127.0.0.1 (spawned here, always
stopped). Only the chat model is scripted.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from mcp import types
from mcp.shared.exceptions import McpError
from mcp.types import ErrorData
from mcp_servers import SERVERS_DIR, free_port, http_server, pid_alive, stdio

from langgraph_toolbudget import ToolCatalog, create_toolbudget_agent
from langgraph_toolbudget.core.selection import search_hits
from langgraph_toolbudget.mcp import (
    MCPCatalogTool,
    MCPLoadError,
    MCPLoadWarning,
    MCPServerError,
    MCPToolCatalog,
    load_mcp_catalog,
    load_mcp_catalog_sync,
    mcp_tool_name,
)
from langgraph_toolbudget.mcp.errors import CONNECTION_CLOSED
from langgraph_toolbudget.mcp.loader import _server_text
from langgraph_toolbudget.testing import ScriptedChatModel

MATH, NOTES, TEXT = stdio("math_server.py"), stdio("notes_server.py"), stdio("text_server.py")
BROKEN = stdio("no_such_server.py")  # python starts, cannot open the file, exits
# tests/mcp_servers/resource_server.py: a prompt, resources, a template, a resource never read
RESOURCE_SERVER = Path(__file__).parent / "mcp_servers" / "resource_server.py"
RESOURCES = {
    "transport": "stdio",
    "command": sys.executable,
    "args": [str(RESOURCE_SERVER), "resources"],
}


def text_of(result: Any) -> str:
    """The text of a tool result: a ToolMessage, content blocks or a string."""
    content = result.content if isinstance(result, ToolMessage) else result
    if isinstance(content, str):
        return content
    return "".join(block["text"] for block in content if block.get("type") == "text")


def call(name: str, args: dict[str, Any] | None = None, call_id: str | None = None) -> dict:
    """A model tool call."""
    return {"name": name, "args": args or {}, "id": call_id or uuid.uuid4().hex[:8]}


def tool_messages(out: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


WAIT_S = 20  # how long a test waits for a server-side condition before it fails


def slow_status(catalog: ToolCatalog, tag: str) -> str:
    """What the notes server says became of the ``slow`` call tagged ``tag`` (sync)."""
    return text_of(catalog.get("slow_status").tool.invoke({"tag": tag}))


async def aslow_status(catalog: ToolCatalog, tag: str) -> str:
    """What the notes server says became of the ``slow`` call tagged ``tag``."""
    return text_of(await catalog.get("slow_status").tool.ainvoke({"tag": tag}))


async def until_status(catalog: ToolCatalog, tag: str, wanted: str) -> str:
    """Poll the notes server until the ``slow`` call tagged ``tag`` is ``wanted``.

    Returns the last status seen: ``wanted``, or what it was when WAIT_S ran out.
    """
    deadline = time.monotonic() + WAIT_S
    while (status := await aslow_status(catalog, tag)) != wanted and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return status


def until_status_sync(catalog: ToolCatalog, tag: str, wanted: str) -> str:
    """:func:`until_status` from sync code."""
    deadline = time.monotonic() + WAIT_S
    while (status := slow_status(catalog, tag)) != wanted and time.monotonic() < deadline:
        time.sleep(0.02)
    return status


@pytest.fixture(scope="module")
def catalog() -> Iterator[ToolCatalog]:
    """math + notes over stdio, loaded once in its own event loop (asyncio.run).

    The tests then use it from other loops and from sync code.
    """
    cat = load_mcp_catalog_sync({"math": MATH, "notes": NOTES})
    try:
        yield cat
    finally:
        cat.close()


# --- loading: tags, categories, descriptions, names -------------------------------------


def test_load_mcp_catalog_tags_each_tool_with_its_server_and_category(catalog: ToolCatalog) -> None:
    assert catalog.categories == ["math", "notes"]
    assert catalog.load_errors == {}
    assert catalog.tools_in("math") == [
        "add",
        "multiply",
        "divide",
        "math__search",
        "math__server_pid",
    ]
    for name in catalog.tools_in("notes"):
        spec = catalog.get(name)
        assert spec is not None and spec.server == "notes" and spec.categories == ("notes",)
        assert isinstance(spec.tool, MCPCatalogTool) and spec.tool.server == "notes"
        assert spec.tool.metadata["server"] == "notes"


def test_category_description_comes_from_the_server_initialize_instructions(
    catalog: ToolCatalog,
) -> None:
    assert catalog.category_descriptions == {
        "math": "Arithmetic on numbers: add, multiply and divide, and look up math formulas.",
        "notes": "Keep short text notes: add, list and search notes.",
    }
    info = catalog.mcp.servers["notes"]
    assert info.server_name == "notes-server"
    assert info.transport == "stdio"
    assert info.tools["notes__search"] == "search"


def test_colliding_names_get_the_server_prefix_and_call_the_servers_own_name(
    catalog: ToolCatalog,
) -> None:
    for server in ("math", "notes"):
        for mcp_name in ("search", "server_pid"):
            name = mcp_tool_name(server, mcp_name)
            assert name == f"{server}__{mcp_name}"
            tool = catalog.get(name).tool
            assert tool.mcp_name == mcp_name and tool.metadata["mcp_tool_name"] == mcp_name
    assert "search" not in catalog and "add" in catalog  # unique names stay as they are
    marker = uuid.uuid4().hex
    catalog.get("add_note").tool.invoke({"text": f"buy milk {marker}"})
    found = catalog.get("notes__search").tool.invoke({"query": marker})
    assert marker in text_of(found)
    formulas = catalog.get("math__search").tool.invoke({"query": "circle"})
    assert "pi * r**2" in text_of(formulas)


def test_mcp_tool_name_replaces_unsafe_server_characters() -> None:
    assert mcp_tool_name("my server.v2", "run") == "my_server_v2__run"


def test_tool_schema_and_annotations_come_from_the_server(catalog: ToolCatalog) -> None:
    tool = catalog.get("divide").tool
    assert tool.args_schema["required"] == ["a", "b"]
    assert set(tool.args) == {"a", "b"}
    assert tool.description == "Divide a by b. Fails when b is zero."
    assert tool.metadata["readOnlyHint"] is True and tool.metadata["idempotentHint"] is True
    assert catalog.get("divide").arg_names == ("a", "b")
    # The server's outputSchema reaches the tool; a plain float wrapped as {"result": ...}
    # declares no field worth searching.
    assert tool.metadata["output_schema"]["properties"] == {
        "result": {"title": "Result", "type": "number"}
    }
    assert catalog.get("divide").output_fields == ()


def test_read_only_hint_sets_is_pure_and_server_is_the_concurrency_group(
    catalog: ToolCatalog,
) -> None:
    assert catalog.get("add").is_pure is True  # readOnlyHint=True
    assert catalog.get("add_note").is_pure is False  # readOnlyHint=False
    assert catalog.get("fail").is_pure is False  # no annotation
    assert catalog.get("add").concurrency_group == "math"
    assert catalog.get("slow").concurrency_group == "notes"


async def test_server_defaults_and_per_tool_overrides() -> None:
    catalog = await load_mcp_catalog(
        {"math": MATH},
        server_defaults={"math": {"include": "manual", "timeout_s": 5, "is_pure": False}},
        tool_metadata={
            "add": {"include": "always", "is_pure": True},
            "math:server_pid": {"enabled": False},  # server:mcp_name works too
        },
        server_descriptions={"math": "Calculator"},
    )
    async with catalog:
        add, mul = catalog.get("add"), catalog.get("multiply")
        assert (add.include, add.is_pure, add.timeout_s) == ("always", True, 5)
        assert (mul.include, mul.is_pure, mul.timeout_s) == ("manual", False, 5)
        assert mul.tool.timeout_s == 5  # the sync path knows the bound too
        assert catalog.is_disabled("server_pid") and "server_pid" not in catalog
        assert catalog.always_visible == ["add"]
        assert catalog.category_descriptions == {"math": "Calculator"}
        # a single server: no collision, no prefix
        assert catalog.tool_names == ["add", "multiply", "divide", "search"]


async def test_a_described_mcp_category_without_tools_is_said_to_have_none() -> None:
    with pytest.raises(ValueError, match=r"describes \['later'\], to which categories gives no"):
        await load_mcp_catalog(
            {"math": MATH}, categories={"later": []}, category_descriptions={"later": "soon"}
        )


async def test_bad_options_raise_clear_errors_and_close_the_sessions() -> None:
    with pytest.raises(ValueError, match=r"server_defaults names \['nope'\]"):
        await load_mcp_catalog({"math": MATH}, server_defaults={"nope": {}})
    with pytest.raises(ValueError, match=r"unknown keys \['colour'\]"):
        await load_mcp_catalog({"math": MATH}, server_defaults={"math": {"colour": "red"}})
    with pytest.raises(ValueError, match="tool_metadata names 'subtract'.*Known tools include"):
        await load_mcp_catalog({"math": MATH}, tool_metadata={"subtract": {"enabled": False}})
    with pytest.raises(TypeError, match="'timeout_s' must be"):
        await load_mcp_catalog({"math": MATH}, tool_metadata={"add": {"timeout_s": "1"}})
    with pytest.raises(ValueError, match="sets 'server'"):
        await load_mcp_catalog({"math": MATH}, tool_metadata={"add": {"server": "x"}})


async def test_an_unknown_option_names_the_closest_one_before_any_server_starts() -> None:
    closest = r"unknown option 'allowed_tool'; did you mean 'allowed_tools'"
    with pytest.raises(TypeError, match=closest):
        await load_mcp_catalog({"math": BROKEN}, allowed_tool=["add"])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"load_mcp_catalog_sync\(\) got an unknown option 'stric'"):
        load_mcp_catalog_sync({"math": BROKEN}, stric=True)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("shape", "needle"),
    [
        (lambda c: [c], r"got a list of 1 connections\. Give each connection a server name"),
        (lambda c: (c, c), r"got a tuple of 2 connections\. Give each connection a server name"),
        (lambda c: None, r"server name -> connection mapping .*got None\. For example: \{'math'"),
        (lambda c: c, r"looks like one connection.*Give it a server name: \{'my_server'"),
        (lambda c: {"math": "x.py"}, r"connection of server 'math' must be a mapping, got a str"),
        (lambda c: {1: c}, r"server names must be strings.*got 1 \(int\)"),
    ],
    ids=["list", "tuple", "none", "one-connection", "connection-str", "name-int"],
)
def test_connections_of_the_wrong_shape_raise_showing_the_mapping_before_any_start(
    shape: Callable[[dict[str, Any]], Any], needle: str
) -> None:
    connections = shape({**MATH, "env": {"API_KEY": "sk-secret-value"}})
    with pytest.raises(TypeError, match=needle) as caught:
        asyncio.run(load_mcp_catalog(connections))
    assert "sk-secret" not in str(caught.value)  # a connection's values are never shown
    with pytest.raises(TypeError, match=needle):
        load_mcp_catalog_sync(connections)


def test_the_top_level_package_exports_the_loader_lazily() -> None:
    import langgraph_toolbudget

    assert langgraph_toolbudget.load_mcp_catalog is load_mcp_catalog
    assert "load_mcp_catalog" in langgraph_toolbudget.__all__


async def test_filters_allowed_servers_and_tool_patterns() -> None:
    catalog = await load_mcp_catalog(
        {"math": MATH, "notes": NOTES},
        allowed_servers=["math"],
        allowed_tools=["notes:list_*", "notes:search", "slow"],
    )
    async with catalog:
        assert catalog.tools_in("math") == [
            "add",
            "multiply",
            "divide",
            "math__search",
            "math__server_pid",
        ]
        # "notes:search" matched the MCP name of notes__search
        assert catalog.tools_in("notes") == ["list_notes", "notes__search", "slow"]
        assert catalog.is_filtered("fail") and catalog.is_filtered("add_note")
        assert "fail" not in catalog and catalog.get("fail") is None
        assert "fail" not in search_hits(catalog, "a tool that always fails", limit=20)


async def test_categories_mapping_and_tool_name_prefix() -> None:
    catalog = await load_mcp_catalog(
        {"math": MATH, "text": TEXT},
        tool_name_prefix=True,
        categories={"writing": ["text:upper", "text__word_count"]},
        category_descriptions={"writing": "Change and measure text"},
    )
    async with catalog:
        assert catalog.tools_in("writing") == ["text__upper", "text__word_count"]
        assert "text" not in catalog.categories  # every text tool sits in "writing"
        assert catalog.category_descriptions["writing"] == "Change and measure text"
        assert all(n.startswith("math__") for n in catalog.tools_in("math"))
        # no instructions: the description falls back to serverInfo.name
        assert catalog.mcp.servers["text"].description == "text-server"
        assert text_of(await catalog.get("text__upper").tool.ainvoke({"text": "abc"})) == "ABC"


UNNAMED_FASTMCP = """
from mcp.server.fastmcp import FastMCP
server = FastMCP()
@server.tool()
def ping() -> str:
    \"\"\"Answer pong.\"\"\"
    return "pong"
server.run()
"""


async def test_a_fastmcp_server_without_a_name_gets_no_description_from_the_sdks_default():
    # Was the category description 'FastMCP' (its serverInfo.name), shown to the model.
    unnamed = {"transport": "stdio", "command": sys.executable, "args": ["-c", UNNAMED_FASTMCP]}
    catalog = await load_mcp_catalog({"pinger": unnamed, "text": TEXT})
    async with catalog:
        assert catalog.mcp.servers["pinger"].server_name == "FastMCP"
        assert catalog.mcp.servers["pinger"].description == ""
        assert catalog.mcp.servers["text"].description == "text-server"
        assert "FastMCP" not in catalog.category_descriptions.get("pinger", "")


ENUM_SERVER = """
from enum import Enum
from typing import Literal
from mcp.server.fastmcp import FastMCP
server = FastMCP("weather")
class Unit(str, Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"
@server.tool()
def temperature(city: str, unit: Unit, detail: Literal["short", "full"] = "short") -> str:
    \"\"\"The temperature in a city.\"\"\"
    return f"{city}: 21 degrees {unit.value} ({detail})"
server.run()
"""


@pytest.mark.parametrize("use_async", [True, False])
async def test_an_mcp_tools_allowed_value_spelt_another_way_or_null_reaches_the_server_as_valid(
    use_async: bool,
) -> None:
    # An enum class (a $ref in the tool's inputSchema: the server refused "Celsius") and a
    # Literal (inline: the local schema check refused "FULL"), as small models send them.
    server = {"transport": "stdio", "command": sys.executable, "args": ["-c", ENUM_SERVER]}
    catalog = await load_mcp_catalog({"weather": server})
    spelt = call("temperature", {"city": "Oslo", "unit": "Celsius", "detail": "FULL"}, "t1")
    # null for an optional argument (as strict structured outputs send it): its default
    null = call("temperature", {"city": "Rome", "unit": "FAHRENHEIT", "detail": None}, "t2")
    model = ScriptedChatModel(
        responses=[AIMessage("", tool_calls=[spelt, null]), AIMessage("ok")], cycle=False
    )
    async with catalog:
        graph = create_toolbudget_agent(model, catalog, pinned=["temperature"]).compile()
        start = {"messages": [HumanMessage("how warm is Oslo?")]}
        run = graph.ainvoke(start) if use_async else asyncio.to_thread(graph.invoke, start)
        out = await run
    answers = tool_messages(out)
    assert [a.status for a in answers] == ["success", "success"], [text_of(a) for a in answers]
    assert text_of(answers[0]) == "Oslo: 21 degrees celsius (full)"
    assert text_of(answers[1]) == "Rome: 21 degrees fahrenheit (short)"


@pytest.mark.parametrize(
    ("name", "described"),
    [("FastMCP", ""), ("FastMCP-3a7f", ""), ("FastMCP Weather", "FastMCP Weather"), ("w", "")],
)
def test_a_default_server_name_of_either_fastmcp_is_no_description(name: str, described: str):
    # The standalone fastmcp package names an unnamed server FastMCP-<4 hex>.
    init = types.InitializeResult(
        protocolVersion="2025-06-18",
        capabilities=types.ServerCapabilities(),
        serverInfo=types.Implementation(name=name, version="1"),
    )
    assert _server_text(init, "w") == described


async def test_a_multi_server_client_is_accepted_with_its_interceptors() -> None:
    seen: list[tuple[str, str]] = []

    async def double_a(request: Any, handler: Any) -> Any:
        seen.append((request.server_name, request.name))
        return await handler(request.override(args={**request.args, "a": request.args["a"] * 2}))

    client = MultiServerMCPClient(
        {"math": MATH, "text": TEXT}, tool_name_prefix=True, tool_interceptors=[double_a]
    )
    catalog = await load_mcp_catalog(client)
    async with catalog:
        assert catalog.categories == ["math", "text"]
        assert "math__add" in catalog  # the client's tool_name_prefix is honoured
        result = await catalog.get("math__add").tool.ainvoke({"a": 2, "b": 3})
        assert text_of(result) == "7.0"  # the interceptor ran, on the MCP name
        assert seen == [("math", "add")]


# --- calling tools ------------------------------------------------------------------------


def test_sync_invoke_without_an_event_loop(catalog: ToolCatalog) -> None:
    assert text_of(catalog.get("multiply").tool.invoke({"a": 6, "b": 7})) == "42.0"


async def test_async_ainvoke_with_a_tool_call_returns_content_and_artifact(
    catalog: ToolCatalog,
) -> None:
    msg = await catalog.get("add").tool.ainvoke(
        call("add", {"a": 1, "b": 2}) | {"type": "tool_call"}
    )
    assert isinstance(msg, ToolMessage) and msg.status == "success"
    assert text_of(msg) == "3.0"
    assert msg.artifact == {"structured_content": {"result": 3.0}}


async def test_calls_from_other_threads_and_loops_share_one_session_per_server(
    catalog: ToolCatalog,
) -> None:
    pid_tool = catalog.get("math__server_pid").tool
    pid = text_of(await pid_tool.ainvoke({}))
    opened = catalog.mcp.sessions_opened("math")
    results: list[str] = []

    def worker() -> None:
        results.append(text_of(pid_tool.invoke({})))
        results.append(asyncio.run(pid_tool.ainvoke({})).__getitem__(0)["text"])

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    many = await asyncio.gather(*(pid_tool.ainvoke({}) for _ in range(10)))
    assert results == [pid] * 6
    assert [text_of(m) for m in many] == [pid] * 10
    assert catalog.mcp.sessions_opened("math") == opened  # no new session, no new process


async def test_async_calls_never_block_the_event_loop(catalog: ToolCatalog) -> None:
    from blockbuster import blockbuster_ctx

    with blockbuster_ctx():
        result = await catalog.get("add").tool.ainvoke({"a": 1, "b": 1})
        await asyncio.wait_for(catalog.get("slow").tool.ainvoke({"seconds": 0.05}), 5)
    assert text_of(result) == "2.0"


async def test_a_tool_error_result_becomes_an_error_tool_message(catalog: ToolCatalog) -> None:
    msg = await catalog.get("fail").tool.ainvoke(
        call("fail", {"message": "disk on fire"}) | {"type": "tool_call"}
    )
    assert msg.status == "error" and "disk on fire" in text_of(msg)
    sync_msg = catalog.get("divide").tool.invoke(
        call("divide", {"a": 1, "b": 0}) | {"type": "tool_call"}
    )
    assert sync_msg.status == "error" and "cannot divide by zero" in text_of(sync_msg)


async def test_cancelling_an_async_call_cancels_the_tool_on_the_server(
    catalog: ToolCatalog,
) -> None:
    tag = uuid.uuid4().hex
    slow = asyncio.create_task(catalog.get("slow").tool.ainvoke({"seconds": 60, "tag": tag}))
    try:
        assert await until_status(catalog, tag, "started") == "started"  # the server runs it
    finally:
        slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    # the cancellation notification reaches the server, which stops the tool
    assert await until_status(catalog, tag, "cancelled") == "cancelled"
    # the session survives a cancelled call
    assert text_of(await catalog.get("add").tool.ainvoke({"a": 2, "b": 2})) == "4.0"


def test_a_sync_call_is_bounded_by_timeout_s_and_cancelled(catalog: ToolCatalog) -> None:
    tag = uuid.uuid4().hex
    bounded = catalog.get("slow").tool.model_copy(update={"timeout_s": 1.0})
    with pytest.raises(MCPServerError, match=r"'slow' of MCP server 'notes' did not answer"):
        bounded.invoke({"seconds": 60, "tag": tag})
    # The call gave up while the tool still ran on the server (it never finishes before
    # 60 s), and the server was told to stop it.
    assert slow_status(catalog, tag) in ("started", "cancelled")
    assert until_status_sync(catalog, tag, "cancelled") == "cancelled"


# --- failures at load -------------------------------------------------------------------


async def test_a_server_that_cannot_start_is_reported_and_the_others_load() -> None:
    with pytest.warns(MCPLoadWarning, match="1 of 2 MCP server.*'broken'") as record:
        catalog = await load_mcp_catalog({"math": MATH, "broken": BROKEN}, connect_timeout_s=10)
    async with catalog:
        assert "no_such_server.py" in str(record[0].message)
        assert catalog.categories == ["math"]
        assert list(catalog.load_errors) == ["broken"]
        assert "no_such_server.py" in catalog.load_errors["broken"]
        assert text_of(await catalog.get("add").tool.ainvoke({"a": 1, "b": 1})) == "2.0"


def test_the_sync_loads_warning_points_at_the_users_line() -> None:
    # Was: asyncio/events.py, the frame that ran the async loader under asyncio.run.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        catalog = load_mcp_catalog_sync({"broken": BROKEN}, connect_timeout_s=10)
    catalog.close()
    (warning,) = [w for w in caught if issubclass(w.category, MCPLoadWarning)]
    assert "'broken'" in str(warning.message) and Path(warning.filename) == Path(__file__)


async def test_the_async_loads_warning_points_at_the_users_line() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        catalog = await load_mcp_catalog({"broken": BROKEN}, connect_timeout_s=10)
    await catalog.aclose()
    (warning,) = [w for w in caught if issubclass(w.category, MCPLoadWarning)]
    assert "'broken'" in str(warning.message) and Path(warning.filename) == Path(__file__)


async def test_strict_raises_naming_the_server() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(MCPLoadError, match="'down'.*ConnectError") as info:
        await load_mcp_catalog(
            {
                "math": MATH,
                "down": {"transport": "streamable_http", "url": f"http://127.0.0.1:{port}/mcp"},
            },
            strict=True,
        )
    assert list(info.value.errors) == ["down"]
    assert f"127.0.0.1:{port}" in info.value.errors["down"]


async def test_metadata_for_a_server_that_failed_does_not_block_the_others() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPLoadWarning)
        catalog = await load_mcp_catalog(
            {"math": MATH, "broken": BROKEN},
            tool_metadata={"broken:anything": {"enabled": False}, "add": {"timeout_s": 3}},
            server_defaults={"broken": {"include": "manual"}},
        )
    async with catalog:
        assert catalog.get("add").timeout_s == 3
        assert catalog.load_errors.keys() == {"broken"}


# --- sessions: persistence, death, reconnect, close -------------------------------------


def saw_the_server_go(catalog: ToolCatalog, server: str) -> bool:
    """True once the catalog's session to ``server`` has seen the server process go away.

    Reads the runtime's private session state, as the package has no public probe for it.
    Until then a dead server is not yet "between calls" for the client: a call sent
    before the client has read the end of the server's output fails ("Connection
    closed") instead of opening a new session first.
    """
    session = catalog.mcp._sessions[server]
    return not session._alive(session._gen)


async def until(condition: Callable[[], bool]) -> bool:
    """Poll ``condition`` until it holds or WAIT_S runs out; return its last value."""
    deadline = time.monotonic() + WAIT_S
    while not (held := condition()) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return held


async def test_killed_stdio_server_mid_call_errors_naming_the_server_then_reconnects() -> None:
    catalog = await load_mcp_catalog({"notes": NOTES})
    async with catalog:
        pid = int(text_of(await catalog.get("server_pid").tool.ainvoke({})))
        tag = uuid.uuid4().hex
        slow = asyncio.create_task(catalog.get("slow").tool.ainvoke({"seconds": 60, "tag": tag}))
        assert await until_status(catalog, tag, "started") == "started"  # mid-call, for sure
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(MCPServerError, match="MCP server 'notes' failed during the call to"):
            await asyncio.wait_for(slow, WAIT_S)
        new_pid = int(text_of(await catalog.get("server_pid").tool.ainvoke({})))
        assert new_pid != pid and catalog.mcp.sessions_opened("notes") == 2
        # a server that died between calls is re-opened before the call: no error at all
        os.kill(new_pid, signal.SIGKILL)
        assert await until(lambda: saw_the_server_go(catalog, "notes"))
        assert text_of(await catalog.get("list_notes").tool.ainvoke({})) == ""
        assert catalog.mcp.sessions_opened("notes") == 3
    assert not pid_alive(pid) and not pid_alive(new_pid)


CHANGING_SERVER = """
import os, sys
from mcp.server.fastmcp import FastMCP

spec, calls = open(sys.argv[1]).read().split(","), sys.argv[2]
mcp = FastMCP("notes")


def search(query: str) -> str:
    \"\"\"Search the notes.\"\"\"
    open(calls, "a").write("search\\n")
    return "found " + query


def search_limit(query: str, limit: int) -> str:
    \"\"\"Search the notes, at most limit hits.\"\"\"
    open(calls, "a").write("search\\n")
    return "found " + query


def add_note(text: str) -> str:
    \"\"\"Add a note.\"\"\"
    return "added"


def server_pid() -> int:
    \"\"\"This server's process id.\"\"\"
    return os.getpid()


TOOLS = {"search": search, "search_limit": search_limit, "add_note": add_note}
for item in spec:
    fn = TOOLS.get(item, server_pid)
    mcp.add_tool(fn, name="search" if item.startswith("search") else item)
mcp.run()
"""
"""A stdio server whose tools are read at its start from a file (argv[1]): ``search``,
``search_limit`` (``search`` with a required ``limit``), ``add_note``, ``server_pid``; a call
of ``search`` is written to argv[2]."""


class ChangingServer:
    """A :data:`CHANGING_SERVER` loaded as ``notes``; :meth:`restart` kills it after choosing
    the tools the next process lists (the catalog re-opens it at the next call)."""

    def __init__(self, tmp_path: Path, tools: str) -> None:
        self.spec, self.calls = tmp_path / "spec", tmp_path / "calls"
        script = tmp_path / "changing_server.py"
        script.write_text(CHANGING_SERVER)
        self.spec.write_text(tools)
        args = [str(script), str(self.spec), str(self.calls)]
        self.connection = {"transport": "stdio", "command": sys.executable, "args": args}

    async def restart(self, catalog: ToolCatalog, tools: str) -> None:
        self.spec.write_text(tools)
        os.kill(int(text_of(await catalog.get("server_pid").tool.ainvoke({}))), signal.SIGKILL)
        assert await until(lambda: saw_the_server_go(catalog, "notes"))


def load_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, MCPLoadWarning)]


async def test_a_tool_a_restarted_server_no_longer_lists_is_refused_naming_the_server(
    tmp_path: Path,
) -> None:
    server = ChangingServer(tmp_path, "search,add_note,server_pid")
    async with await load_mcp_catalog({"notes": server.connection}) as catalog:
        await server.restart(catalog, "add_note,server_pid")  # the new version drops search
        model = ScriptedChatModel(
            responses=[AIMessage("", tool_calls=[call("search", {"query": "milk"})]), "done"]
        )
        app = create_toolbudget_agent(model, catalog, max_tools=4).compile()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = await app.ainvoke({"messages": [HumanMessage("search my notes for milk")]})
        (answer,) = tool_messages(out)
        assert answer.status == "error"
        assert "MCP server 'notes' no longer lists tool 'search'" in text_of(answer)
        assert "reload its MCP catalog (or be redeployed)" in text_of(answer)
        assert "Fix the arguments" not in text_of(answer)
        assert not server.calls.exists()  # never sent to the server
        (warned,) = load_warnings(caught)  # one warning, for the operator
        assert "MCP server 'notes' was re-opened" in warned
        assert "no longer lists 'search'" in warned and "reload it (load_mcp_catalog)" in warned
        # its other tools run; another restart with the same tools warns no more
        assert text_of(await catalog.get("add_note").tool.ainvoke({"text": "x"})) == "added"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            await server.restart(catalog, "add_note,server_pid")
            assert text_of(await catalog.get("add_note").tool.ainvoke({"text": "y"})) == "added"
        assert load_warnings(caught) == []
        assert catalog.mcp.sessions_opened("notes") == 3
        # the server lists it again: it runs again
        await server.restart(catalog, "search,add_note,server_pid")
        assert text_of(await catalog.get("search").tool.ainvoke({"query": "milk"})) == "found milk"


async def test_a_tool_whose_schema_changed_on_a_restarted_server_is_warned_of(
    tmp_path: Path,
) -> None:
    server = ChangingServer(tmp_path, "search,server_pid")
    async with await load_mcp_catalog({"notes": server.connection}) as catalog:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            await server.restart(catalog, "search_limit,server_pid")
            await catalog.get("server_pid").tool.ainvoke({})  # re-opens the session
        (warned,) = load_warnings(caught)
        assert "'search' now take another input schema" in warned and "'notes'" in warned


async def test_a_connection_closed_under_a_request_is_the_connection_lost_however_noticed():
    # A server that dies mid-call is noticed by the session's watch ("the connection was
    # lost") or, first, by the SDK failing the request with McpError "Connection closed":
    # the same event gave two messages, whichever won the race (a flaky comparison).
    async def closed(session: Any) -> Any:
        raise McpError(ErrorData(code=CONNECTION_CLOSED, message="Connection closed"))

    catalog = await load_mcp_catalog({"notes": NOTES})
    async with catalog:
        with pytest.raises(MCPServerError) as caught:
            await catalog.mcp.asession_request("notes", closed, tool="notes__read_resource")
        assert "failed during the call to tool 'notes__read_resource': the connection was lost" in (
            str(caught.value)
        )
        assert "McpError" not in str(caught.value)
        assert text_of(await catalog.get("list_notes").tool.ainvoke({})) == ""  # re-opened


async def test_streamable_http_server_killed_mid_call_then_restarted() -> None:
    port = free_port()
    with http_server("notes_server.py", port=port) as server:
        catalog = await load_mcp_catalog({"notes": server.connection}, heartbeat_s=0.2)
        async with catalog:
            assert catalog.mcp.servers["notes"].transport == "streamable_http"
            assert text_of(await catalog.get("add_note").tool.ainvoke({"text": "x"})) == (
                "note 1 saved"
            )
            tag = uuid.uuid4().hex
            slow = asyncio.create_task(
                catalog.get("slow").tool.ainvoke({"seconds": 60, "tag": tag})
            )
            assert await until_status(catalog, tag, "started") == "started"  # mid-call
            server.kill()
            with pytest.raises(MCPServerError, match="MCP server 'notes'.*connection was lost"):
                await asyncio.wait_for(slow, WAIT_S)
            with pytest.raises(MCPServerError, match="cannot connect to MCP server 'notes'"):
                await catalog.get("list_notes").tool.ainvoke({})
            with http_server("notes_server.py", port=port):
                # the restarted server is a new process: its notes are empty
                assert text_of(await catalog.get("list_notes").tool.ainvoke({})) == ""
            assert catalog.mcp.sessions_opened("notes") == 2


async def test_streamable_http_server_restarted_between_calls_gets_a_new_session() -> None:
    port = free_port()
    with http_server("notes_server.py", port=port) as server:
        catalog = await load_mcp_catalog({"notes": server.connection})
        first_pid = text_of(await catalog.get("server_pid").tool.ainvoke({}))
        server.kill()
    async with catalog:
        with http_server("notes_server.py", port=port):
            # the new server answers 404 to the old session id: the request never ran,
            # so it is sent again on a new session instead of failing
            pid = text_of(await catalog.get("server_pid").tool.ainvoke({}))
            assert pid != first_pid and catalog.mcp.sessions_opened("notes") == 2
            assert text_of(await catalog.get("list_notes").tool.ainvoke({})) == ""


async def test_sse_transport_loads_and_calls() -> None:
    with http_server("math_server.py", transport="sse") as server:
        async with await load_mcp_catalog({"math": server.connection}) as catalog:
            assert catalog.mcp.servers["math"].transport == "sse"
            assert text_of(await catalog.get("multiply").tool.ainvoke({"a": 3, "b": 4})) == "12.0"


async def test_aclose_stops_the_server_processes_and_later_calls_fail_clearly() -> None:
    catalog = await load_mcp_catalog({"math": MATH, "notes": NOTES})
    pids = [
        int(text_of(await catalog.get(f"{s}__server_pid").tool.ainvoke({})))
        for s in ("math", "notes")
    ]
    assert all(pid_alive(p) for p in pids)
    await catalog.aclose()
    await catalog.aclose()  # idempotent
    assert not any(pid_alive(p) for p in pids)
    with pytest.raises(MCPServerError, match="sessions of this catalog were closed"):
        await catalog.get("add").tool.ainvoke({"a": 1, "b": 1})
    with pytest.raises(MCPServerError, match="closed"):
        catalog.get("add").tool.invoke({"a": 1, "b": 1})


async def test_aclose_while_a_call_reopens_a_session_stops_the_new_server_too(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"  # each start of the server writes its process id there
    server = SERVERS_DIR / "math_server.py"
    script = f'echo $$ >> {pids}; sleep 1; exec "{sys.executable}" "{server}"'
    catalog = await load_mcp_catalog(
        {"math": {"transport": "stdio", "command": "sh", "args": ["-c", script]}}
    )

    def started() -> list[int]:
        return [int(pid) for pid in pids.read_text().split()]

    try:
        os.kill(started()[0], signal.SIGKILL)
        assert await until(lambda: saw_the_server_go(catalog, "math"))
        adding = asyncio.create_task(catalog.get("add").tool.ainvoke({"a": 1, "b": 2}))
        assert await until(lambda: len(started()) == 2)  # the call is re-opening the session
        await catalog.aclose()
        assert not pid_alive(started()[1])  # was left running: opened after aclose() returned
        with pytest.raises(MCPServerError, match="sessions of this catalog were closed"):
            await asyncio.wait_for(adding, WAIT_S)
    finally:
        for pid in started():
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_sync_close_and_with_metadata_copies_share_the_sessions() -> None:
    catalog = load_mcp_catalog_sync({"math": MATH})
    copy = catalog.with_metadata(add={"timeout_s": 2})
    assert isinstance(copy, MCPToolCatalog) and isinstance(copy, ToolCatalog)
    assert copy.mcp is catalog.mcp and copy.get("add").timeout_s == 2
    pid = int(text_of(copy.get("server_pid").tool.invoke({})))
    copy.close()
    assert catalog.mcp.closed and not pid_alive(pid)


async def test_load_mcp_catalog_sync_refuses_a_running_loop() -> None:
    with pytest.raises(RuntimeError, match=r"await load_mcp_catalog\(\.\.\.\)"):
        load_mcp_catalog_sync({"math": MATH})


# --- prompt and resource tools -----------------------------------------------------------


async def test_prompt_and_resource_tools_take_the_timeouts_metadata_and_categories_given() -> None:
    catalog = await load_mcp_catalog(
        {"docs": RESOURCES},
        server_defaults={"docs": {"timeout_s": 1, "include": "agent"}},
        tool_metadata={"docs__list_prompts": {"timeout_s": 3}},
        categories={"reading": ["docs__read_resource"]},
    )  # naming a prompt/resource tool in tool_metadata or categories raised ValueError
    async with catalog:
        read = catalog.get("docs__read_resource")
        assert read is not None and read.timeout_s == 1 and read.include == "manual"
        assert read.categories == ("reading",) and catalog.get("echo").include == "agent"
        assert catalog.get("docs__list_prompts").timeout_s == 3
        assert catalog.get("docs__get_prompt").timeout_s == 1
        model = ScriptedChatModel(
            responses=[
                AIMessage("", tool_calls=[call("docs__read_resource", {"uri": "slow://forever"})]),
                "done",
            ],
            cycle=False,
        )
        graph = create_toolbudget_agent(model, catalog, pinned=["docs__read_resource"]).compile()
        start = time.monotonic()
        out = await asyncio.wait_for(graph.ainvoke({"messages": [HumanMessage("go")]}), WAIT_S)
        (message,) = tool_messages(out)  # was pending forever: no timeout_s
        assert message.status == "error" and "timed out after 1 s" in message.content
        # a sync call is bounded too, and fails as an MCP tool's (was SyncTimeoutError)
        with pytest.raises(MCPServerError) as caught:
            await asyncio.to_thread(read.tool.invoke, {"uri": "slow://forever"})
        assert str(caught.value) == (
            "tool 'docs__read_resource' of MCP server 'docs' did not answer within 1 s; "
            "the call was cancelled."
        )
        assert time.monotonic() - start < 10


async def test_prompt_and_resource_tools_of_a_closed_catalog_fail_clearly() -> None:
    catalog = await load_mcp_catalog({"docs": RESOURCES})
    await catalog.aclose()
    read = catalog.get("docs__read_resource").tool
    # as an MCP tool's call fails (was RuntimeError)
    with pytest.raises(MCPServerError, match="sessions of this catalog were closed"):
        await read.ainvoke({"uri": "docs://a"})
    with pytest.raises(MCPServerError, match="sessions of this catalog were closed"):
        read.invoke({"uri": "docs://a"})


# --- the agent over MCP tools -----------------------------------------------------------


def _discover_then_call_script() -> list[Any]:
    return [
        AIMessage("", tool_calls=[call("search_tools", {"query": "multiply numbers"}, "c1")]),
        AIMessage("", tool_calls=[call("add_tool", {"tool_names": ["multiply"]}, "c2")]),
        AIMessage("", tool_calls=[call("multiply", {"a": 6, "b": 7}, "c3")]),
        AIMessage("6 times 7 is 42."),
    ]


def _check_discover_then_call(out: dict[str, Any], model: ScriptedChatModel) -> None:
    msgs = tool_messages(out)
    assert [m.tool_call_id for m in msgs] == ["c1", "c2", "c3"]
    assert '"multiply"' in msgs[0].content
    assert msgs[2].status == "success" and text_of(msgs[2]) == "42.0"
    assert out["messages"][-1].content == "6 times 7 is 42."
    assert "multiply" in out["selected_tools"]
    assert "multiply" not in model.bound_tools[0] and "multiply" in model.bound_tools[-1]


async def test_agent_ainvoke_discovers_and_calls_an_mcp_tool(catalog: ToolCatalog) -> None:
    model = ScriptedChatModel(responses=_discover_then_call_script(), cycle=False)
    graph = create_toolbudget_agent(model, catalog, max_tools=2).compile()
    out = await graph.ainvoke({"messages": [HumanMessage("keep a note for me")]})
    _check_discover_then_call(out, model)


@pytest.mark.parametrize("mode", ["parallel_safe", "sequential"])
def test_agent_invoke_discovers_and_calls_an_mcp_tool(catalog: ToolCatalog, mode: str) -> None:
    model = ScriptedChatModel(responses=_discover_then_call_script(), cycle=False)
    graph = create_toolbudget_agent(model, catalog, max_tools=2, mode=mode).compile()
    out = graph.invoke({"messages": [HumanMessage("keep a note for me")]})
    _check_discover_then_call(out, model)


@pytest.mark.parametrize("use_async", [True, False])
async def test_agent_slow_mcp_tool_hits_its_timeout_and_is_cancelled(
    catalog: ToolCatalog, use_async: bool
) -> None:
    tag = uuid.uuid4().hex
    bounded = catalog.with_metadata(slow={"timeout_s": 1.0})
    model = ScriptedChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    call("slow", {"seconds": 60, "tag": tag}, "s1"),
                    call("add", {"a": 1, "b": 2}, "a1"),
                ],
            ),
            AIMessage("", tool_calls=[call("slow_status", {"tag": tag}, "s2")]),
            AIMessage("The slow tool timed out."),
        ],
        cycle=False,
    )
    graph = create_toolbudget_agent(
        model, bounded, pinned=["slow", "slow_status", "add"], mode="parallel_safe"
    ).compile()
    state = {"messages": [HumanMessage("wait a bit")]}
    out = await graph.ainvoke(state) if use_async else await asyncio.to_thread(graph.invoke, state)
    slow, add, status = tool_messages(out)
    assert slow.status == "error" and "timed out after 1 s" in slow.content
    assert add.status == "success" and text_of(add) == "3.0"  # the other call went on
    # the server really stopped the tool (the run did not wait out its 60 s: not "finished")
    assert text_of(status) == "cancelled"
    assert out["messages"][-1].content == "The slow tool timed out."


@pytest.mark.parametrize("use_async", [True, False])
async def test_agent_survives_the_server_being_killed_mid_run(use_async: bool) -> None:
    catalog = await load_mcp_catalog({"notes": NOTES, "math": MATH})
    async with catalog:
        pid = int(text_of(await catalog.get("notes__server_pid").tool.ainvoke({})))
        tag = uuid.uuid4().hex
        model = ScriptedChatModel(
            responses=[
                AIMessage("", tool_calls=[call("slow", {"seconds": 60, "tag": tag}, "k1")]),
                AIMessage("", tool_calls=[call("notes__server_pid", {}, "k2")]),
                AIMessage("The notes server restarted."),
            ],
            cycle=False,
        )
        graph = create_toolbudget_agent(
            model, catalog, pinned=["slow", "notes__server_pid"], mode="sequential"
        ).compile()

        def kill_mid_call() -> None:  # once the server runs the slow call, not before
            if until_status_sync(catalog, tag, "started") == "started":
                os.kill(pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_mid_call, daemon=True)
        killer.start()
        state = {"messages": [HumanMessage("wait, then tell me the notes pid")]}
        out = (
            await graph.ainvoke(state)
            if use_async
            else await asyncio.to_thread(graph.invoke, state)
        )
        killer.join(WAIT_S)
        died, again = tool_messages(out)
        assert died.status == "error"
        assert "MCP server 'notes' failed during the call to tool 'slow'" in died.content
        assert "re-opened on the next call" in died.content
        assert again.status == "success" and int(text_of(again)) != pid
        assert out["messages"][-1].content == "The notes server restarted."


def test_the_example_loads_two_servers_and_runs_one_turn() -> None:
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo)}  # this checkout's package, not an installed one
    done = subprocess.run(
        [sys.executable, str(repo / "examples" / "mcp_catalog.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    assert "Loaded 11 tools from 2 MCP servers" in done.stdout
    assert re.search(r"^math: [1-5] of 5 tools visible", done.stdout, re.M)
    assert re.search(r"^notes: [0-6] of 6 tools visible", done.stdout, re.M)
    assert 'multiply({"a": 6, "b": 7}) -> 42.0 [success]' in done.stdout
    assert done.stdout.rstrip().endswith("Assistant: 6 times 7 is 42.0.")


# --- the core without MCP ---------------------------------------------------------------


def test_importing_the_package_does_not_load_the_mcp_sdk() -> None:
    code = (
        "import sys, langgraph_toolbudget, langgraph_toolbudget._compat, "
        "langgraph_toolbudget._runner\n"
        "import importlib.util\n"
        "spec = importlib.util.spec_from_file_location('server', 'examples/server.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))  # the server graphs\n"
        "mcp = lambda: sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('mcp', 'langchain_mcp_adapters'))\n"
        "assert mcp() == [], mcp()\n"
        "langgraph_toolbudget.MCPServerError  # the lazy export loads it\n"
        "assert 'mcp' in sys.modules and 'langchain_mcp_adapters' in sys.modules\n"
    )
    repo = Path(__file__).resolve().parents[1]  # this checkout first on sys.path
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


async def test_any_catalog_can_be_closed_and_only_mcp_catalogs_have_mcp_state() -> None:
    from langchain_core.tools import tool

    @tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    plain = ToolCatalog.from_tools([echo])
    async with plain as same:
        assert same is plain
    plain.close()
    await plain.aclose()
    assert not hasattr(plain, "mcp") and not hasattr(plain, "load_errors")
    assert type(plain.with_metadata(echo={"timeout_s": 1})) is ToolCatalog


async def test_the_example_servers_run_by_path_from_examples_not_from_the_package() -> None:
    repo = Path(__file__).resolve().parents[1]
    assert repo / "examples" / "mcp_servers" == SERVERS_DIR
    assert not (repo / "langgraph_toolbudget" / "demo" / "mcp_servers").exists()
    async with await load_mcp_catalog({"text": TEXT}, strict=True) as catalog:
        assert catalog.tools_in("text") == ["upper", "word_count"]
        assert text_of(await catalog.get("upper").tool.ainvoke({"text": "ok"})) == "OK"


async def test_mcp_arguments_that_do_not_match_the_input_schema_are_refused_before_the_server(
    catalog: ToolCatalog,
) -> None:
    """langchain does not validate a JSON-schema tool (an MCP tool) as it does a pydantic one:
    the executor checks the arguments against the server's ``inputSchema`` after coercion and
    answers with the schema, as for a local tool; what coercion repairs still runs."""
    script = [
        AIMessage(
            "",
            tool_calls=[
                call("add_tool", {"tool_names": ["multiply"]}, "c0"),
                call("multiply", {"a": "six", "b": 7}, "c1"),  # not a number
                call("multiply", {"a": 6}, "c2"),  # b is required
                call("multiply", {"a": "6", "b": "7"}, "c3"),  # coerced: runs
            ],
        ),
        AIMessage("done"),
    ]
    model = ScriptedChatModel(responses=script, cycle=False)
    graph = create_toolbudget_agent(model, catalog, max_tools=2).compile()
    out = await graph.ainvoke({"messages": [HumanMessage("multiply")]})
    answers = {m.tool_call_id: m for m in tool_messages(out)}
    for call_id, problem in (
        ("c1", "a: 'six' is not of type 'number'"),
        ("c2", "(arguments): 'b' is a required"),
    ):
        assert answers[call_id].status == "error"
        content = text_of(answers[call_id])
        assert content.startswith("Error: invalid arguments for tool 'multiply': " + problem)
        assert "Expected arguments (JSON schema): {" in content
    assert answers["c3"].status == "success" and text_of(answers["c3"]) == "42.0"
