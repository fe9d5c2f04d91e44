"""A real FastMCP server with a 1 MB JSON tool, a large text resource and prompts.

The agent (a scripted chat model) offloads the tool's output and the resource,
then reads, searches and jq-queries them; the server's prompts and resources
are deferred virtual tools it finds with ``search_tools`` and loads with
``add_tool``; over stdio and streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException
from langgraph.checkpoint.memory import MemorySaver
from langgraph.store.memory import InMemoryStore
from mcp_servers import http_server, stdio

from langgraph_toolbudget import ToolExecutor, create_toolbudget_agent
from langgraph_toolbudget.mcp import MCPToolCatalog, load_mcp_catalog, load_mcp_catalog_sync
from langgraph_toolbudget.testing import ScriptedChatModel

BIG_SERVER = Path(__file__).parent / "mcp_servers" / "bigdata_server.py"
BIG = {"transport": "stdio", "command": sys.executable, "args": [str(BIG_SERVER)]}
VIRTUAL = ["big__list_prompts", "big__get_prompt", "big__list_resources", "big__read_resource"]


@pytest.fixture(scope="module", params=["stdio", "http"])
def connection(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    if request.param == "stdio":
        yield BIG
        return
    with http_server(str(BIG_SERVER)) as server:
        yield server.connection


@pytest.fixture(scope="module")
def catalog(connection: dict[str, Any]) -> Iterator[MCPToolCatalog]:
    """big (over the transport of ``connection``) and math, loaded once per module and transport."""
    cat = load_mcp_catalog_sync({"big": connection, "math": stdio("math_server.py")})
    try:
        yield cat
    finally:
        cat.close()


def _call(name: str, args: dict[str, Any], i: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": i}


def _last_tool(messages: list[Any]) -> ToolMessage:
    return next(m for m in reversed(messages) if isinstance(m, ToolMessage))


def _handle(messages: list[Any]) -> str:
    return str(_last_tool(messages).artifact["offloaded"]["handle"])


def _script() -> ScriptedChatModel:
    """Export, query/search/read it; find and load read_resource; read and search the handbook."""

    def explore(messages: list[Any], tools: list[str]) -> AIMessage:
        h = _handle(messages)
        return AIMessage(
            "",
            tool_calls=[
                _call(
                    "query_large_output",
                    {
                        "handle": h,
                        "jq_expression": '[.orders[] | select(.status == "refunded")] | length',
                    },
                    "q",
                ),
                _call(
                    "search_large_output",
                    {"handle": h, "pattern": '"id": 1234,', "context_lines": 1},
                    "s",
                ),
                _call("read_large_output", {"handle": h, "start": 0, "length": 60}, "r"),
                _call("query_large_output", {"handle": h, "jq_expression": ".orders[0"}, "bad"),
            ],
        )

    def search_handbook(messages: list[Any], tools: list[str]) -> AIMessage:
        h = _handle(messages)
        return AIMessage(
            "",
            tool_calls=[
                _call("search_large_output", {"handle": h, "pattern": "REFUND POLICY"}, "h")
            ],
        )

    return ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[_call("export_orders", {}, "e")]),
            explore,
            AIMessage("", tool_calls=[_call("search_tools", {"query": "resource"}, "st")]),
            AIMessage(
                "", tool_calls=[_call("add_tool", {"tool_names": ["big__read_resource"]}, "at")]
            ),
            AIMessage(
                "", tool_calls=[_call("big__read_resource", {"uri": "docs://handbook"}, "rr")]
            ),
            search_handbook,
            "Refunds are accepted within 30 days.",
        ],
        cycle=False,
    )


def test_virtual_tools_are_deferred_tools_of_servers_that_have_prompts_or_resources(
    catalog: MCPToolCatalog,
) -> None:
    names = catalog.tool_names
    assert [n for n in names if "__" in n] == VIRTUAL  # math has neither: none for it
    for name in VIRTUAL:
        spec = catalog.get(name)
        assert spec is not None and spec.include == "manual" and spec.categories == ("big",)
        assert not catalog.selectable(name)
    found = catalog.index.regex_search("prompt")
    assert {"big__list_prompts", "big__get_prompt"} <= {t["name"] for t in found.tools}


async def test_agent_reads_searches_and_queries_offloaded_mcp_outputs(
    catalog: MCPToolCatalog,
) -> None:
    model = _script()
    graph = create_toolbudget_agent(model, catalog, pinned=["export_orders"], max_iterations=10)
    app = graph.compile(checkpointer=MemorySaver(), store=InMemoryStore())
    out = await app.ainvoke(
        {"messages": [HumanMessage("what is the refund policy and how many refunds?")]},
        {"configurable": {"thread_id": "t"}},
    )
    by_id = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    export = by_id["e"]
    facts = export.artifact["offloaded"]
    assert facts["kind"] == "json" and facts["chars"] > 1_000_000
    assert len(export.content) < 2_500 and '"orders", "count", "currency"' in export.content
    assert json.loads(by_id["q"].content) == 8
    found = json.loads(by_id["s"].content)
    assert found["total"] == 1 and '"id": 1234' in found["matches"][0]["context"]
    assert by_id["r"].content.splitlines()[1].startswith("{")
    assert by_id["bad"].status == "error" and "jq expression" in by_id["bad"].content
    assert "big__read_resource" in by_id["st"].content
    handbook = by_id["rr"]
    assert handbook.artifact["offloaded"]["kind"] == "text" and handbook.status == "success"
    hit = json.loads(by_id["h"].content)["matches"][0]
    assert hit["line"] == 4322 and "refunds within 30 days" in hit["context"]
    assert out["messages"][-1].content == "Refunds are accepted within 30 days."
    # Only the stubs went into the conversation: well under 1% of the outputs' size.
    total = sum(len(str(m.content)) for m in out["messages"])
    assert total < 0.02 * (facts["chars"] + handbook.artifact["offloaded"]["chars"])


async def test_prompts_binary_resources_and_bad_requests(catalog: MCPToolCatalog) -> None:
    prompt = await catalog.get("big__get_prompt").tool.ainvoke(  # type: ignore[union-attr]
        {"name": "review", "arguments": {"topic": "the refund flow"}}
    )
    assert "user: Please review the refund flow carefully" in prompt
    listed = json.loads(catalog.get("big__list_prompts").tool.invoke({}))  # type: ignore[union-attr]
    assert listed[0]["name"] == "review" and listed[0]["arguments"][0]["name"] == "topic"
    model = ScriptedChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    _call("big__read_resource", {"uri": "data://logo.bin"}, "bin"),
                    _call("big__get_prompt", {"name": "nope"}, "np"),
                    _call("big__read_resource", {"uri": "docs://missing"}, "nr"),
                ],
            ),
            "done",
        ],
        cycle=False,
    )
    graph = create_toolbudget_agent(model, catalog, pinned=VIRTUAL)
    out = await graph.compile(store=InMemoryStore()).ainvoke({"messages": [HumanMessage("logo")]})
    by_id = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert by_id["bin"].artifact["offloaded"]["kind"] == "json"  # the blob, as JSON, offloaded
    assert "application/octet-stream" in by_id["bin"].content
    assert by_id["np"].status == "error"
    assert (
        "Unknown prompt: nope" in by_id["np"].content and "big__list_prompts" in by_id["np"].content
    )
    assert by_id["nr"].status == "error" and "big__list_resources" in by_id["nr"].content


async def test_read_resource_reads_only_listed_uris_and_those_of_the_templates(
    catalog: MCPToolCatalog,
) -> None:
    read = catalog.get("big__read_resource").tool  # type: ignore[union-attr]
    assert (await read.ainvoke({"uri": "notes://monday"})) == "note of monday"
    assert (await read.ainvoke({"uri": "docs://handbook"})).startswith("Section 0: general")
    for uri in ("file:///etc/passwd", "notes://monday/../../etc/passwd", "http://127.0.0.1/"):
        answer = await read.ainvoke({"uri": uri})
        assert "is not a resource this server lists" in answer and "not read" in answer
        assert "big__list_resources" in answer


async def test_filters_apply_to_virtual_tools() -> None:
    cat = await load_mcp_catalog({"big": BIG}, allowed_tools=["big:export_orders"])
    async with cat:
        assert cat.tool_names == ["export_orders"]
        assert all(cat.is_filtered(n) for n in VIRTUAL)


async def test_prompt_and_resource_refusals_follow_handle_tool_errors_as_mcp_tools_do(
    connection: dict[str, Any],
) -> None:
    """Under ``handle_tool_errors=False`` a refusal is raised as an ``isError`` result is: a
    ``ToolException`` whose message is what the model would have read (the prompt/resource
    tools answered it whatever the option said)."""
    cat = await load_mcp_catalog(
        {"big": connection, "math": stdio("math_server.py")}, handle_tool_errors=False
    )
    async with cat:
        with pytest.raises(ToolException, match="cannot divide by zero"):
            await cat.get("divide").tool.ainvoke(  # type: ignore[union-attr]
                _call("divide", {"a": 1, "b": 0}, "d") | {"type": "tool_call"}
            )
        prompt = cat.get("big__get_prompt").tool  # type: ignore[union-attr]
        read = cat.get("big__read_resource").tool  # type: ignore[union-attr]
        refused_prompt = (
            'MCP server \'big\' rejected get_prompt {"name": "nope", "arguments": {}}: '
            "Unknown prompt: nope. List the prompts and their arguments with big__list_prompts."
        )
        for invoke in (prompt.ainvoke, partial(asyncio.to_thread, prompt.invoke)):
            with pytest.raises(ToolException) as caught:
                await invoke(
                    _call("big__get_prompt", {"name": "nope"}, "p") | {"type": "tool_call"}
                )
            assert type(caught.value) is ToolException and str(caught.value) == refused_prompt
        with pytest.raises(ToolException, match="is not a resource this server lists"):
            await read.ainvoke({"uri": "docs://missing"})
        # a run of the graph with a raising executor ends with the refusal, as with the tool's
        state = {
            "messages": [
                HumanMessage("go"),
                AIMessage("", tool_calls=[_call("big__get_prompt", {"name": "nope"}, "p")]),
            ],
        }
        with pytest.raises(ToolException, match="Unknown prompt: nope"):
            await ToolExecutor(cat, handle_tool_errors=False, pinned=["big__get_prompt"]).ainvoke(
                state
            )
        assert (await prompt.ainvoke({"name": "review", "arguments": {"topic": "x"}})).startswith(
            "Ask for"
        )
    # the option's default answers the refusal (the model reads it and goes on)
    async with await load_mcp_catalog({"big": connection}) as cat:
        tool = cat.get("big__get_prompt").tool  # type: ignore[union-attr]
        answer = await tool.ainvoke(
            _call("big__get_prompt", {"name": "nope"}, "p") | {"type": "tool_call"}
        )
        assert answer.status == "error" and answer.content == refused_prompt


MEDIA_SERVER = Path(__file__).parent / "mcp_servers" / "media_server.py"


@pytest.fixture(scope="module")
def media() -> Iterator[MCPToolCatalog]:
    """The media server (images, an embedded PDF, audio) over stdio, every tool visible."""
    connection = {"transport": "stdio", "command": sys.executable, "args": [str(MEDIA_SERVER)]}
    cat = load_mcp_catalog_sync({"media": connection}, default_include="always")
    try:
        yield cat
    finally:
        cat.close()


def _blocks(content: Any) -> list[Any]:
    """Content blocks without their ids (the adapters give each conversion new ones)."""
    return [{k: v for k, v in b.items() if k != "id"} for b in content]


async def _both(
    catalog: MCPToolCatalog, name: str, api: str, store: InMemoryStore
) -> tuple[ToolMessage, ToolMessage]:
    """The tool message of one call of ``name`` under LangGraph's ToolNode and the executor
    (its graph compiled with ``store``)."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from langgraph_toolbudget import ToolBudgetState

    state = {"messages": [HumanMessage("go"), AIMessage("", tool_calls=[_call(name, {}, "c")])]}
    upstream = StateGraph(MessagesState)
    upstream.add_node("tools", ToolNode(catalog.tools([name])))
    upstream.add_edge(START, "tools")
    ours = StateGraph(ToolBudgetState)
    ours.add_node("tools", ToolExecutor(catalog))
    ours.add_edge(START, "tools")
    config = {"configurable": {"thread_id": "media"}}
    graphs = [upstream.compile(), ours.compile(store=store)]
    if api == "ainvoke":
        outs = [await g.ainvoke(state, config) for g in graphs]
    else:
        outs = [g.invoke(state, config) for g in graphs]
    tool_node, executor = (_last_tool(out["messages"]) for out in outs)
    return tool_node, executor


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_mcp_images_and_files_reach_the_model_as_blocks_as_under_tool_node(
    media: MCPToolCatalog, api: str
) -> None:
    # Was: the blocks' JSON, base64 counted as text, offloaded as a 58,067-character stub.
    store = InMemoryStore()
    for name, types in [("take_screenshot", ["text", "image"]), ("export_pdf", ["file"])]:
        tool_node, executor = await _both(media, name, api, store)
        assert [b["type"] for b in executor.content] == types
        assert _blocks(executor.content) == _blocks(tool_node.content)
        assert executor.artifact is None and executor.status == "success"
        if name == "take_screenshot":
            image = executor.content[1]
            assert image["mime_type"] == "image/png" and len(image["base64"]) > 50_000
    assert store.search(("toolbudget",)) == []  # nothing offloaded


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_a_large_text_beside_an_image_is_offloaded_and_the_image_kept(
    media: MCPToolCatalog, api: str
) -> None:
    store = InMemoryStore()
    tool_node, executor = await _both(media, "screenshot_with_log", api, store)
    stub, image = executor.content
    log = tool_node.content[0]["text"]
    size = f"{len(log):,} characters (~{round(len(log) / 4):,} tokens) of text"
    assert stub["type"] == "text" and stub["text"].startswith(f"[Large output offloaded: {size}")
    assert _blocks([image]) == _blocks(tool_node.content[1:])
    facts = executor.artifact["offloaded"]
    assert facts["chars"] == len(log) and facts["media_blocks"] == 1
    (item,) = [i for i in store.search(("toolbudget",)) if i.key == facts["handle"]]
    assert item.value["text"] == log  # the text alone is stored, the image stays in the message
