"""The catalog's stdio transport (``langgraph_toolbudget.mcp.stdio``): lines split in linear
time, and the SDK's behaviour kept (environment, working directory, stray output).

Real FastMCP server (``tests/mcp_servers/fault_server.py``) over stdio; the 50 MB answer
is in ``tests/test_mcp_faults.py``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import sys
import time
import weakref
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from mcp_servers.faults import SERVER

from langgraph_toolbudget import create_toolbudget_agent, load_mcp_catalog
from langgraph_toolbudget.mcp import MCPLoadWarning, load_mcp_catalog_sync
from langgraph_toolbudget.mcp.stdio import LineSplitter, _unreadable, stdio_parameters
from langgraph_toolbudget.testing import ScriptedChatModel

HOSTILE = Path(__file__).resolve().parent / "mcp_servers" / "hostile_server.py"

pytestmark = pytest.mark.timeout(120)


def _text(content: object) -> str:
    """The text of a tool's content (MCP results come as content blocks)."""
    if isinstance(content, str):
        return content
    assert isinstance(content, list)
    return "".join(block["text"] for block in content)


@settings(max_examples=300, deadline=None, derandomize=True)  # CI never fails by the draw
@given(
    lines=st.lists(st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=6000), max_size=30),
    tail=st.binary(max_size=50).map(lambda b: b.replace(b"\n", b"")),
)
def test_line_splitter_gives_the_same_lines_whatever_the_chunking(lines, cuts, tail):
    stream = b"".join(line + b"\n" for line in lines) + tail
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    splitter = LineSplitter()
    got = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        got += [bytes(line) for line in splitter.feed(stream[start:end])]
    assert got == lines  # the unterminated tail is not a line yet


def test_line_splitter_hands_out_a_long_line_once_without_its_newline():
    splitter = LineSplitter()
    assert all(splitter.feed(b"x" * 65536) == [] for _ in range(100))
    (line, second) = splitter.feed(b"x\n{}\n")
    assert len(line) == 100 * 65536 + 1 and set(bytes(line)) == {ord("x")} and second == b"{}"


def test_stdio_parameters_expand_env_references_and_name_missing_keys(monkeypatch):
    monkeypatch.setenv("TB_STDIO_SECRET", "s3cret")
    params = stdio_parameters(
        {"transport": "stdio", "command": "python", "args": ["x.py"],
         "env": {"TOKEN": "${TB_STDIO_SECRET}", "PLAIN": "$NOT_BRACED"}, "cwd": "/tmp"}
    )  # fmt: skip
    assert params.env == {"TOKEN": "s3cret", "PLAIN": "$NOT_BRACED"} and str(params.cwd) == "/tmp"
    with pytest.raises(ValueError, match="'args' parameter is required"):
        stdio_parameters({"transport": "stdio", "command": "python"})
    with pytest.raises(ValueError, match=r"unknown keys \['cmd_args'\]; it takes \["):
        stdio_parameters({"transport": "stdio", "command": "python", "args": [], "cmd_args": []})


async def test_a_stdio_server_gets_the_env_and_cwd_of_its_connection(tmp_path, monkeypatch):
    monkeypatch.setenv("TB_STDIO_SECRET", "s3cret")
    env = {"TB_VALUE": "${TB_STDIO_SECRET}-1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    connection = {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)],
                  "env": env, "cwd": str(tmp_path)}  # fmt: skip
    async with await load_mcp_catalog({"faults": connection}, strict=True) as catalog:
        (tool,) = catalog.tools(["process_info"])
        info = json.loads(_text(await tool.ainvoke({"variable": "TB_VALUE"})))
    assert info == {"cwd": str(tmp_path), "value": "s3cret-1"}


async def test_a_stray_line_on_stdout_does_not_break_the_session(caplog):
    connection = {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)]}
    caplog.set_level(logging.DEBUG, logger="langgraph_toolbudget.mcp.stdio")
    async with await load_mcp_catalog({"faults": connection}, strict=True) as catalog:
        noise, echo = catalog.tools(["noise", "echo"])
        first = _text(await noise.ainvoke({"text": "still here"}))
        second = _text(await echo.ainvoke({"text": "and here"}))
        assert catalog.mcp.sessions_opened("faults") == 1
    assert (first, second) == ("still here", "and here")
    # The warning names the server, not what it printed (a server may print its settings,
    # a key among them); the line is there at DEBUG level only.
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    text = warning.getMessage()
    assert "MCP server 'faults' wrote a line of 32 bytes" in text
    assert "not a JSON-RPC message" in text and "not-json-rpc-1234" not in text
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("Using API key: not-json-rpc-1234" in m for m in debug)


def _running(pid: int) -> bool:
    """Is ``pid`` a live process (not a zombie waiting to be reaped)?"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_catalog_dropped_after_graph_runs_is_collected_and_its_server_stopped():
    # A run's heartbeat task (kept on the session's generation, which the server's owner task
    # holds) kept a copy of the run's context: LangGraph's config, so the graph and the
    # catalog. A notebook cell run again piled up servers (docs/mcp.md promises otherwise).
    connection = {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)]}
    catalog = load_mcp_catalog_sync(
        {"faults": connection}, server_defaults={"faults": {"include": "always"}}
    )
    call = AIMessage("", tool_calls=[{"name": "server_pid", "args": {}, "id": "c1"}])
    model = ScriptedChatModel(responses=[call, AIMessage("done")] * 2, cycle=False)
    graph = create_toolbudget_agent(model, catalog).compile()
    ran = graph.invoke({"messages": [HumanMessage("pid?")]})
    ran_async = asyncio.run(graph.ainvoke({"messages": [HumanMessage("pid?")]}))
    pids = {int(_text(out["messages"][2].content)) for out in (ran, ran_async)}
    assert len(pids) == 1, pids  # one server, called under invoke and ainvoke
    (pid,) = pids
    collected = weakref.ref(catalog)
    del catalog, model, graph, ran, ran_async
    deadline = time.monotonic() + 10  # its finalizer closes the session: the server exits
    while (collected() is not None or _running(pid)) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert collected() is None
    assert not _running(pid)


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


# Deep enough that json.loads raises RecursionError on every supported Python: 3.11 does at
# 1,000 levels, 3.13 parses 5,000 (its C recursion limit is higher) and stops before 20,000.
TOO_DEEP = 100_000


def test_the_id_of_an_answer_nested_too_deep_is_read_from_its_top_level():
    unreadable = ValueError("Invalid JSON: recursion limit exceeded")
    # json.loads raises RecursionError on these lines; neither a nested "id" nor the
    # brackets and escaped quote in a string may pass for the answer's own
    nested = '{"id":99,"s":"}]\\"{","v":' + _deep(TOO_DEEP) + "}"
    answer = _unreadable(f'{{"jsonrpc":"2.0","result":{nested},"id":"r-1"}}'.encode(), unreadable)
    assert not isinstance(answer, Exception)
    error = answer.message.root
    assert error.id == "r-1" and error.error.message.endswith("recursion limit exceeded")
    request = '{"jsonrpc":"2.0","id":3,"method":"roots/list","params":' + _deep(TOO_DEEP) + "}"
    assert _unreadable(request.encode(), unreadable) is unreadable  # no request of ours waits
    # A string never closed, full of escaped quotes, after a deep value: read in one pass (the
    # scan for the id was quadratic there, minutes on the loop every server shares)
    start = time.monotonic()
    endless = '{"id":"r-2","v":' + _deep(TOO_DEEP) + ',"s":"' + '\\"' * 100_000
    assert _unreadable(endless.encode(), unreadable).message.root.id == "r-2"
    assert time.monotonic() - start < 5


async def test_an_answer_nested_past_pythons_recursion_limit_fails_at_once_with_the_reason():
    args = [str(HOSTILE), "nested", "600"]
    nested = {"transport": "stdio", "command": sys.executable, "args": args}
    with pytest.warns(MCPLoadWarning, match="'evil'"):
        catalog = await load_mcp_catalog({"evil": nested}, connect_timeout_s=3)
    async with catalog:
        reason = catalog.load_errors["evil"]  # was "TimeoutError", after the 3 s
    assert "could not be read" in reason and "recursion limit exceeded" in reason
