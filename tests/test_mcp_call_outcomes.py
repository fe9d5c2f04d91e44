"""What the model is told when an MCP call fails after the request went out, and what never
reaches a server: real servers on stdio and streamable HTTP (127.0.0.1).

A server that may have run the tool is never answered "fix the arguments": the model would
run a side effect twice. Arguments that break the tool's ``inputSchema`` are refused before
the server, as a local tool's are by its pydantic schema.
"""

from __future__ import annotations

import asyncio
import datetime
import http.server
import sys
import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from mcp_servers import http_server

from langgraph_toolbudget import ToolCatalog, ToolExecutor, load_mcp_catalog

SERVERS = Path(__file__).resolve().parent / "mcp_servers"
FAULTS, RAW = SERVERS / "fault_server.py", SERVERS / "raw_server.py"
FIX_THE_ARGUMENTS = "Fix the arguments"


def stdio(script: Path, **env: str) -> dict[str, Any]:
    return {"transport": "stdio", "command": sys.executable, "args": [str(script)], "env": env}


@asynccontextmanager
async def faults(transport: str, **connection: Any) -> AsyncIterator[ToolCatalog]:
    # the resource tool is `manual` by default: visible from the start here
    metadata = {"hang": {"timeout_s": 10}, "faults__read_resource": {"include": "always"}}
    if transport == "stdio":
        conn = stdio(FAULTS) | connection
        async with await load_mcp_catalog({"faults": conn}, tool_metadata=metadata) as catalog:
            yield catalog
        return
    with http_server(str(FAULTS)) as server:
        conn = server.connection | connection
        async with await load_mcp_catalog({"faults": conn}, tool_metadata=metadata) as catalog:
            yield catalog


async def answer(catalog: ToolCatalog, tool: str, **args: Any) -> ToolMessage:
    call = {"name": tool, "args": args, "id": uuid.uuid4().hex[:8], "type": "tool_call"}
    state = {
        "messages": [HumanMessage("go"), AIMessage("", tool_calls=[call])],
        "selected_tools": list(catalog.tool_names),
    }
    (message,) = (await ToolExecutor(catalog).ainvoke(state))["messages"]
    return message


def text_of(message: ToolMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b["text"] if isinstance(b, dict) else str(b) for b in content)


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_the_sessions_read_timeout_is_a_timeout_that_cancels_the_call_on_the_server(
    transport: str, tmp_path: Path
) -> None:
    # The read timeout bounds the server's start-up requests too (initialize, tools/list):
    # 1 s lost the tools once in a while on a loaded machine ("'hang' is not a tool").
    read_timeout = {"session_kwargs": {"read_timeout_seconds": datetime.timedelta(seconds=3)}}
    marker = str(tmp_path / "hang")
    async with faults(transport, **read_timeout) as catalog:
        assert "hang" in catalog, "the server did not load within its read timeout"
        message = await answer(catalog, "hang", seconds=5, marker=marker)
        text = text_of(message)
        assert message.status == "error"
        assert "did not answer within the session's read timeout" in text
        assert "may have taken effect on the server" in text and FIX_THE_ARGUMENTS not in text
        await asyncio.sleep(3.5)  # past the 5 s the call would have taken
        assert Path(marker).exists() and not Path(marker + ".done").exists(), "not cancelled"
        assert text_of(await answer(catalog, "echo", text="still here")) == "still here"


@pytest.mark.parametrize("tool", ["stats", "tally"])  # wrong structured content, or none
async def test_an_answer_the_sdk_refuses_after_the_tool_ran_is_said_to_have_run(
    tmp_path: Path, tool: str
) -> None:
    marker = tmp_path / tool
    conn = stdio(RAW, RAW_MARKER=str(marker))
    async with await load_mcp_catalog({"raw": conn}) as catalog:
        message = await answer(catalog, tool)
    text = text_of(message)
    assert marker.read_text() == "ran"
    assert message.status == "error" and f"ran tool '{tool}', but its answer does not" in text
    assert "do not call it again just to retry" in text and FIX_THE_ARGUMENTS not in text


async def test_arguments_breaking_the_input_schema_never_reach_a_server_that_checks_nothing(
    tmp_path: Path,
) -> None:
    conn = stdio(RAW, RAW_MARKER=str(tmp_path / "unused"))
    async with await load_mcp_catalog({"raw": conn}) as catalog:
        wrong_type = await answer(catalog, "book", count="two", name="Ada")
        missing = await answer(catalog, "book", count=2)
        extra = await answer(catalog, "book", count=2, name="Ada", vip=True)
        coerced = await answer(catalog, "book", count="2", name="Ada")
    for message, problem in (
        (wrong_type, "count: 'two' is not of type 'integer'"),
        (missing, "(arguments): 'name' is a required property"),
        (extra, "Additional properties are not allowed ('vip' was unexpected)"),
    ):
        text = text_of(message)
        assert message.status == "error" and problem in text, text
        assert "Expected arguments (JSON schema): {" in text and "RAW" not in text
    assert text_of(coerced) == 'RAW {"count": 2, "name": "Ada"}'


async def test_an_mcp_tools_timeout_bounds_ainvoke_outside_the_executor(tmp_path: Path) -> None:
    """Under LangGraph's ``ToolNode``, or a direct ``ainvoke``, ``timeout_s`` bounds the call
    as it does ``invoke``: a frozen server never leaves it pending."""
    from langgraph_toolbudget import MCPServerError

    marker = str(tmp_path / "hang")
    async with faults("stdio") as catalog:
        tool = catalog.get("hang").tool
        tool.timeout_s = 1
        started = asyncio.get_running_loop().time()
        with pytest.raises(MCPServerError, match="did not answer within 1 s; the call was"):
            await tool.ainvoke({"seconds": 3, "marker": marker})
        assert asyncio.get_running_loop().time() - started < 2.5
        await asyncio.sleep(2.5)
        assert Path(marker).exists() and not Path(marker + ".done").exists(), "not cancelled"


async def test_deeper_values_are_left_to_the_server_and_no_reference_is_fetched(
    tmp_path: Path,
) -> None:
    """Only the top level of a call is checked (there coercion has had its say): "3" in a
    nested model or a list of integers reaches the server, which reads it as a pydantic tool
    would; a ``$ref`` to a URL or a file is never followed."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"type": "string", "enum": ["only-this"]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/q.json"
    try:
        conn = stdio(RAW, RAW_MARKER=str(tmp_path / "unused"), RAW_REF_URL=url)
        async with await load_mcp_catalog({"raw": conn}) as catalog:
            nested = await answer(catalog, "order", item={"qty": "3"}, ids=["1", "2"])
            missing = await answer(catalog, "order", ids=[1])
            referred = await answer(catalog, "lookup", q="hello", r="x")
    finally:
        httpd.shutdown()
    assert text_of(nested) == 'RAW {"ids": ["1", "2"], "item": {"qty": "3"}}'
    assert missing.status == "error" and "'item' is a required property" in text_of(missing)
    assert text_of(referred) == 'RAW {"q": "hello", "r": "x"}'
    assert hits == []


async def test_a_resource_tool_is_bounded_and_reports_the_read_timeout_as_an_mcp_tool() -> None:
    from langgraph_toolbudget import MCPServerError

    async with faults("stdio") as catalog:
        reader = catalog.get("faults__read_resource").tool
        reader.timeout_s = 1
        with pytest.raises(MCPServerError, match="did not answer within 1 s"):
            await reader.ainvoke({"uri": "hang://3"})
    read_timeout = {"session_kwargs": {"read_timeout_seconds": datetime.timedelta(seconds=3)}}
    async with faults("stdio", **read_timeout) as catalog:
        text = text_of(await answer(catalog, "faults__read_resource", uri="hang://5"))
    assert "did not answer within the session's read timeout" in text
    assert "List the resources" not in text and FIX_THE_ARGUMENTS not in text
