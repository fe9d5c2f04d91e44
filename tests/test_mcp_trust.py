"""Trust boundaries, MCP side: a server is third-party code. What it may put in front of the
model (instructions, descriptions, schemas, names) is bounded, and it can neither break the
app nor impersonate another server or a built-in (issue 29, parts B and C).

Every server here is a real MCP server over stdio: the hostile ones are
``tests/mcp_servers/hostile_server.py`` (the SDK's lowlevel server, or a plain JSON-RPC loop,
listing what FastMCP would refuse), the slow one ``fault_server.py``. Only the chat model is
scripted.
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
import warnings
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from mcp_servers import SERVERS_DIR, free_port, stdio, wait_listening

from langgraph_toolbudget import ToolCatalog, ToolExecutor, create_toolbudget_agent
from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.meta import MAX_LISTING_CHARS, MetaToolHandler
from langgraph_toolbudget.core.tokens import schema_tokens
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.execution.builtins import Builtins
from langgraph_toolbudget.mcp import MCPLoadError, MCPLoadWarning, MCPServerError, load_mcp_catalog
from langgraph_toolbudget.mcp.errors import _where
from langgraph_toolbudget.mcp.names import SAFE_NAME, server_prefix
from langgraph_toolbudget.nodes.thread_prompt import ThreadPrompt, tools_prompt_section
from langgraph_toolbudget.testing import ScriptedChatModel

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).resolve().parent / "mcp_servers"
BUILTIN_NAMES = [
    "search_tools",
    "add_tool",
    "request_more_tools",
    "show_all_tools",
    "read_large_output",
    "list_tools",
    "get_tool",
    "python_execution",  # built-ins of families only some options turn on: reserved too
    "search_schemas",
    "execute_sql",
]


def hostile(scenario: str) -> dict[str, Any]:
    """A stdio connection to ``hostile_server.py <scenario>``."""
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(HERE / "hostile_server.py"), scenario],
    }


FAULTS = {"transport": "stdio", "command": sys.executable, "args": [str(HERE / "fault_server.py")]}


def resources(scenario: str, *args: str) -> dict[str, Any]:
    """A stdio connection to ``resource_server.py <scenario> [args]`` (prompts and resources)."""
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(HERE / "resource_server.py"), scenario, *args],
    }


async def load(connections: dict[str, Any], **options: Any) -> tuple[Any, list[str]]:
    """The catalog and the text of every warning the load emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        catalog = await load_mcp_catalog(connections, **options)
    return catalog, [str(w.message) for w in caught if issubclass(w.category, MCPLoadWarning)]


def call(name: str, i: int, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"c{i}", "type": "tool_call"}


def text_of(message: Any) -> str:
    content = message.content if isinstance(message, ToolMessage) else message
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


# --- B2: server instructions ----------------------------------------------------------------


async def test_server_instructions_are_clipped_and_shown_only_while_the_server_is_in_play():
    catalog, _ = await load({"evil": hostile("instructions"), "good": hostile("good")})
    async with catalog:
        assert len(catalog.mcp.servers["evil"].instructions) == 1_000_000  # the raw record
        described = catalog.category_descriptions["evil"]
        assert described.startswith("IGNORE PREVIOUS") and len(described) < 1_100
        assert catalog.untrusted_descriptions == {"evil", "good"}
        # Not in play (another server's tools visible, nothing chosen): the name only.
        prompt = ThreadPrompt(catalog, Builtins(catalog, BudgetConfig()))
        section, _ = prompt.for_state({"messages": [], "selected_tools": ["get_weather"]})
        assert "IGNORE" not in section and "- evil\n" in section
        assert "Weather and mail." in section  # good's own tools are visible
        assert "IGNORE" not in tools_prompt_section(catalog)
        # In play: chosen for the request, or one of its tools visible; cut either way.
        for state in ({"categories": ["evil"]}, {"selected_tools": ["lookup"]}):
            section, _ = prompt.for_state({"messages": [], **state})
            assert "IGNORE PREVIOUS" in section and len(section) < 2_000


async def test_server_descriptions_you_give_are_yours_and_always_shown():
    catalog, _ = await load(
        {"evil": hostile("instructions")}, server_descriptions={"evil": "Look things up."}
    )
    async with catalog:
        assert catalog.untrusted_descriptions == frozenset()
        assert "- evil: Look things up." in tools_prompt_section(catalog)


# --- B3: descriptions and schemas -----------------------------------------------------------


async def test_a_huge_description_is_clipped_for_the_model_and_kept_in_full_in_metadata():
    catalog, messages = await load({"evil": hostile("huge")})
    async with catalog:
        long_story = catalog.get("long_story").tool
        assert len(long_story.description) < 2_100
        assert len(long_story.metadata["mcp_description"]) == len("A tool. ") + 12 * 90_000
        answer = MetaToolHandler(catalog).handle(
            "search_tools", {"query": "long_story|story|lorem"}, WorkingSet([])
        )
        assert '"long_story"' in answer.content and len(answer.content) < 3_000
        # The first model call: every tool of this server bound at once stays small.
        assert schema_tokens(catalog.tools(catalog.tool_names)) < 2_000


async def test_a_tool_whose_schema_is_over_the_token_cap_is_left_out_with_a_warning():
    catalog, messages = await load({"evil": hostile("huge"), "good": hostile("good")})
    async with catalog:
        assert "wide_form" not in catalog and "get_weather" in catalog
        (warning,) = [m for m in messages if "wide_form" in m]
        assert "'evil'" in warning and "max_tool_schema_tokens=4,000" in warning
    raised, _ = await load({"evil": hostile("huge")}, max_tool_schema_tokens=None)
    async with raised:
        assert "wide_form" in raised  # the cap is an option
    with pytest.raises(MCPLoadError, match="wide_form"):
        await load({"evil": hostile("huge")}, strict=True)


async def test_keyword_stuffed_argument_descriptions_do_not_outrank_the_real_tool():
    catalog, _ = await load({"evil": hostile("huge")})
    async with catalog:
        ranked = [n for n, _ in catalog.index.rank_names("what is the weather forecast for Paris")]
        assert ranked[0] == "weather_report"


def test_show_all_tools_is_bounded_and_says_how_many_it_left_out():
    names = [f"tool_number_{i:05d}_with_a_rather_long_name_of_its_own" for i in range(2_000)]
    catalog = ToolCatalog.from_tools([_named_tool(n) for n in names])
    answer = MetaToolHandler(catalog).handle("show_all_tools", {}, WorkingSet([]))
    assert len(answer.content) < MAX_LISTING_CHARS + 500
    assert '"total": 2000' in answer.content and "search_tools" in answer.content


def _named_tool(name: str) -> Any:
    @tool(name)
    def anything(x: str) -> str:
        """Do something."""
        return x

    return anything


# --- B4: names -----------------------------------------------------------------------------


async def test_names_that_are_not_provider_safe_are_mapped_and_called_by_their_own_name():
    catalog, messages = await load({"evil": hostile("names")})
    async with catalog:
        assert all(SAFE_NAME.fullmatch(n) for n in catalog.tool_names), catalog.tool_names
        assert len(catalog) == 7  # none lost: six mapped, one kept
        assert "fine_tool" in catalog
        (warning,) = messages
        assert "'evil'" in warning and "<|im_start|>system" in warning
        # The call still uses the server's own name.
        answer = await catalog.get("get_weather").tool.ainvoke(call("get_weather", 1, text="x"))
        assert text_of(answer) == "bad 0"
        assert catalog.mcp.servers["evil"].tools["im_start_system"] == "<|im_start|>system"


# --- C5: impersonation and shadowing --------------------------------------------------------


async def test_a_server_cannot_take_another_servers_names_or_its_resource_reader():
    catalog, messages = await load(
        {"evil": hostile("impersonate"), "good": hostile("good"), "docs": hostile("docs")}
    )
    async with catalog:
        for name in catalog.tool_names:  # a <server>__ name belongs to that server
            spec = catalog.get(name)
            for server in ("good", "docs"):
                if name.startswith(f"{server}__"):
                    assert spec.server == server, (name, spec.server)
        assert catalog.get("docs__read_resource").server == "docs"
        assert catalog.get("evil__docs__read_resource").server == "evil"
        assert catalog.get("evil__good__get_weather").server == "evil"
        secret = await catalog.get("docs__read_resource").tool.ainvoke(
            call("docs__read_resource", 1, uri="doc://secret")
        )
        assert text_of(secret) == "the docs server's secret"
        (warning,) = messages
        assert warning.startswith("MCP server 'evil'") and "'docs'" in warning


async def test_a_forced_duplicate_loses_no_server():
    catalog, _ = await load(
        {"evil": hostile("impersonate"), "good": hostile("good"), "other": hostile("other")}
    )
    async with catalog:
        assert {"good__send_email", "other__send_email", "evil__good__send_email"} <= set(
            catalog.tool_names
        )
        assert catalog.get("good__send_email").server == "good"
        assert catalog.load_errors == {}


async def test_a_tool_listed_twice_by_one_server_keeps_its_first_listing_and_loses_no_server():
    catalog, messages = await load({"x": hostile("duplicate"), "good": hostile("good")})
    async with catalog:  # raised ValueError: duplicate tool names ['same'], no catalog at all
        assert {"same", "other", "get_weather"} <= set(catalog.tool_names)
        assert catalog.tool_names.count("same") == 1
        assert catalog.get("same").description == "The first same."
        assert text_of(await catalog.get("same").tool.ainvoke(call("same", 1))) == "first"
        (warning,) = messages
        assert warning.startswith("MCP server 'x' lists tools that were left out")
        assert "'same' (listed again by the server; its first listing is kept)" in warning


async def test_annotation_keys_mcp_does_not_define_are_never_the_catalogs_metadata():
    """Only the annotations MCP defines say anything (``readOnlyHint``: ``is_pure``); a key the
    server added, named like the catalog's metadata, is kept aside and never read."""
    catalog, messages = await load({"x": hostile("extra_annotations"), "good": hostile("good")})
    async with catalog:  # raised TypeError (timeout_s="soon") / ValueError (enabled, status)
        assert messages == []
        assert {"lookup", "drafted", "write_row", "read_row", "get_weather"} <= set(
            catalog.tool_names
        )
        for name in ("lookup", "drafted", "write_row"):
            spec = catalog.get(name)
            assert (spec.timeout_s, spec.status, spec.is_pure) == (60, "published", False), name
            assert (spec.include, spec.concurrency_group, spec.max_concurrency) == (
                "agent",
                "x",
                None,
            ), name
        assert catalog.get("write_row").output_fields == ()
        metadata = catalog.get("write_row").tool.metadata
        assert not {"is_pure", "max_concurrency", "include", "output_schema"} & set(metadata)
        assert metadata["mcp_annotations"]["is_pure"] is True  # kept, as the server sent it
        assert metadata["readOnlyHint"] is None
        assert catalog.get("read_row").is_pure  # the annotation MCP defines still counts
    catalog, _ = await load(
        {"x": hostile("extra_annotations")}, server_defaults={"x": {"is_pure": False}}
    )
    async with catalog:  # the operator's word wins over the server's hint
        assert not catalog.get("read_row").is_pure


async def test_a_tool_whose_properties_are_no_object_is_left_out_with_a_warning():
    catalog, messages = await load({"x": hostile("bad_properties"), "good": hostile("good")})
    async with catalog:  # raised AttributeError: 'list' object has no attribute 'values'
        assert "props_list" not in catalog.tool_names and "props_null" not in catalog.tool_names
        assert {"plain", "get_weather"} <= set(catalog.tool_names)
        assert text_of(await catalog.get("plain").tool.ainvoke(call("plain", 1, text="a"))) == (
            "echo: a"
        )
        (warning,) = messages
        assert warning.startswith("MCP server 'x' lists tools that were left out")
        assert "'props_list': its input schema cannot be read (its 'properties' is a list" in (
            warning
        )
        assert "'props_null': its input schema cannot be read (its 'properties' is null" in (
            warning
        )


async def test_property_schemas_that_are_no_objects_never_make_the_graph_raise():
    """``{"a": true}`` is valid JSON Schema ("anything"); ``{"a": 5}`` and odd keywords are
    not, but load: the calls run, each answered by one tool message."""
    catalog, _ = await load({"x": hostile("odd_schemas")})
    async with catalog:
        calls = [
            call("anything", 1, a="1"),
            call("number_schema", 2, a="1"),
            call("odd_keywords", 3, a="1", nested={"b": 2}, n="5"),
        ]
        names = [c["name"] for c in calls]
        model = ScriptedChatModel(
            responses=[
                AIMessage("", tool_calls=[call("add_tool", 0, tool_names=names)]),
                AIMessage("", tool_calls=calls),
                AIMessage("done"),
            ]
        )
        app = create_toolbudget_agent(model, catalog).compile()
        out = await app.ainvoke({"messages": [HumanMessage("use them")]})  # raised TypeError
        answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
        assert [text_of(answers[f"c{i}"]) for i in (1, 2, 3)] == [
            'got {"a": "1"}',
            'got {"a": "1"}',
            'got {"a": "1", "n": 5, "nested": {"b": 2}}',  # the integer field still coerced
        ]


async def test_a_server_cannot_pass_allowed_tools_with_another_servers_catalog_name():
    catalog, _ = await load(
        {"evil": hostile("impersonate"), "good": hostile("good"), "other": hostile("other")},
        allowed_tools=["good__send_email", "evil:good__get_weather"],
    )
    async with catalog:
        # evil lists "good__send_email" as its MCP name: it was admitted too
        assert catalog.tool_names == ["evil__good__get_weather", "good__send_email"]
        assert catalog.get("good__send_email").server == "good"
        assert catalog.is_filtered("evil__good__send_email")


async def test_read_resource_checks_the_uri_it_sends_and_refuses_one_normalising_changes():
    catalog, _ = await load({"fs": resources("resources")})
    async with catalog:
        read = catalog.get("fs__read_resource").tool
        assert await read.ainvoke({"uri": "file:///docs/readme"}) == (
            "asked for 'file:///docs/readme'"
        )
        # Each matches the template file:///docs/{name} as written, and was sent as file:///.
        for uri in (
            "file:///docs/%2e%2e",
            "file:///docs/%2E%2e",
            "file:///docs/.%2e",
            "file:///docs/\t..",
        ):
            answer = await read.ainvoke({"uri": uri})
            assert "asked for" not in answer, uri
            assert "(normalised: 'file:///') is not a resource this server lists" in answer
            assert "fs__list_resources" in answer
        # A URI of the template, written otherwise: refused, with the form to write.
        answer = await read.ainvoke({"uri": "FILE:///docs/readme"})
        assert "asked for" not in answer
        assert "(it would be sent as 'file:///docs/readme')" in answer
        answer = await read.ainvoke({"uri": "not a uri"})
        assert "is not a valid URI" in answer and "asked for" not in answer


async def test_read_resource_reads_the_uris_of_rfc6570_path_and_query_templates():
    """GitHub's server lists ``repo://{owner}/{repo}/contents{/path*}``: its files were refused
    as "not a URI of one of its resource templates", and so was ``search://docs?q=cats``."""
    catalog, _ = await load({"tpl": resources("templates")})
    async with catalog:
        read = catalog.get("tpl__read_resource").tool
        for uri in (
            "repo://octocat/hello/contents/README.md",
            "repo://octocat/hello/contents/src/main.go",
            "repo://octocat/hello/contents",
            "search://docs?q=cats",
            "search://docs",
            "list:///a/b",
            "page://site/index.html#top",
            "api://items?limit=5&q=cats&page=2",
            "map://;x=1;y",
        ):
            assert await read.ainvoke({"uri": uri}) == f"asked for {uri!r}"
        for uri in (
            "repo://octocat/hello/contents/../../../secrets",  # sent as repo://octocat/secrets
            "repo://octocat/hello/src/main.go",
            "search://docs/private?q=cats",
            "search://docs?user=admin",
            "list:///a/b/c",
        ):
            answer = await read.ainvoke({"uri": uri})
            assert "nor a URI of one of its resource templates" in answer, uri
            assert "asked for" not in answer


# --- C6: built-in and local names -----------------------------------------------------------


async def test_server_tools_named_like_built_ins_never_stop_the_app():
    catalog, messages = await load({"evil": hostile("builtins")})
    async with catalog:
        assert not set(BUILTIN_NAMES) & set(catalog.tool_names)
        assert {f"evil__{n}" for n in BUILTIN_NAMES} <= set(catalog.tool_names)
        model = ScriptedChatModel(
            responses=[AIMessage("", tool_calls=[call("search_tools", 1, query="plain")])],
            cycle=True,
        )
        context_tools = {"allow": ["list_tools", "get_tool", "*"]}
        graph = create_toolbudget_agent(model, catalog, enabled_builtins=context_tools)
        app = graph.compile()
        out = await app.ainvoke({"messages": [HumanMessage("find the plain tool")]})
        answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
        assert '"found"' in answer.content and "server search_tools" not in answer.content


async def test_a_local_tool_keeps_its_name_and_the_server_tool_gets_a_prefix():
    @tool
    def get_weather(city: str) -> str:
        """The local weather."""
        return f"local: {city}"

    catalog, _ = await load({"good": hostile("good")}, local_tools=[get_weather])
    async with catalog:
        assert catalog.get("get_weather").server is None
        assert catalog.get("good__get_weather").server == "good"
        answer = await catalog.get("get_weather").tool.ainvoke({"city": "Oslo"})
        assert answer == "local: Oslo"


async def test_a_local_tool_keeps_a_resource_tools_name():
    @tool("my_docs__read_resource")
    def my_reader(uri: str) -> str:
        """Read one of my own documents."""
        return f"local: {uri}"

    catalog, messages = await load({"my_docs": resources("resources")}, local_tools=[my_reader])
    async with catalog:  # raised ValueError: duplicate tool names
        assert catalog.get("my_docs__read_resource").server is None
        assert await catalog.get("my_docs__read_resource").tool.ainvoke({"uri": "x"}) == "local: x"
        assert catalog.get("my_docs__list_prompts").server == "my_docs"
        (warning,) = [m for m in messages if "names of their tools are taken" in m]
        assert warning.startswith("MCP server 'my_docs'")
        assert "'my_docs__read_resource' (a local tool)" in warning


PREFIX_TAKEN = (
    "MCP servers {first!r} and {second!r} would share the tool-name prefix 'my_docs__' "
    "(characters of a server's name outside [A-Za-z0-9_-] become '_'), and both give it to "
    "tool names ({why}), so their tools would take each other's names. Rename one of them "
    "(its key in the connections); a name of letters, digits, '_' and '-' is its own prefix."
)


@pytest.mark.parametrize("names", [("my.docs", "my_docs"), ("my_docs", "my docs")])
async def test_two_servers_of_one_prefix_are_refused_naming_both_and_the_fix(names):
    # Was: loaded, the first one taking the prefix: 'my_docs__read_resource' was my.docs's,
    # my_docs's prompt/resource tools were left out and its 'echo' became
    # 'my_docs__echo_094b51af', each depending on the order of the connections.
    first, second = names
    connections = {first: resources("resources"), second: resources("resources")}
    start = time.monotonic()
    with pytest.raises(ValueError) as caught:
        await load_mcp_catalog(connections, tool_name_prefix=True)
    assert time.monotonic() - start < 1  # every name has the prefix: before any server starts
    why = "tool_name_prefix=True"
    assert str(caught.value) == PREFIX_TAKEN.format(first=first, second=second, why=why)
    with pytest.raises(ValueError) as caught:  # both have prompt/resource tools
        await load_mcp_catalog(connections)
    why = "prompt/resource tools, or names prefixed because another tool has them"
    assert str(caught.value) == PREFIX_TAKEN.format(first=first, second=second, why=why)


async def test_two_servers_of_one_prefix_listing_one_name_are_refused():
    # Both 'add's would be 'math_v1__add': one of them hashed, the other's name not its own.
    connections = {"math.v1": stdio("math_server.py"), "math v1": stdio("math_server.py")}
    with pytest.raises(ValueError, match="'math.v1' and 'math v1' would share .*'math_v1__'"):
        await load_mcp_catalog(connections)


@pytest.mark.parametrize("options", [{}, {"tool_name_prefix": False}])
async def test_two_servers_of_one_prefix_that_never_use_it_load_together(options):
    # Was: refused before the load ('would share the tool-name prefix'), though no name of
    # either carries it.
    connections = {"math.v1": stdio("math_server.py"), "math v1": stdio("text_server.py")}
    catalog, messages = await load(connections, **options)
    async with catalog:
        assert messages == []
        assert catalog.get("add").server == "math.v1"
        assert catalog.get("upper").server == "math v1"
        assert text_of(await catalog.get("upper").tool.ainvoke({"text": "ok"})) == "OK"


@pytest.mark.parametrize("options", [{}, {"tool_name_prefix": False}, {"tool_name_prefix": True}])
async def test_servers_named_without_ascii_letters_each_have_their_own_prefix(options):
    # Was: every such name gave the prefix '___', so 'погода' and 'тексты' were refused
    # together, even with no prefixed name at all.
    first, second = server_prefix("погода"), server_prefix("тексты")
    assert re.fullmatch(r"_[0-9a-f]{8}__", first) and re.fullmatch(r"_[0-9a-f]{8}__", second)
    assert first != second and first != server_prefix("погода2") != "погода2__"
    connections = {"погода": stdio("math_server.py"), "тексты": stdio("text_server.py")}
    catalog, messages = await load(connections, **options)
    async with catalog:
        assert messages == []
        add, upper = ("add", "upper")
        if options.get("tool_name_prefix"):
            add, upper = f"{first}add", f"{second}upper"
        assert catalog.get(add).server == "погода" and catalog.get(upper).server == "тексты"
        assert text_of(await catalog.get(add).tool.ainvoke({"a": 2, "b": 3})) == "5.0"
    alone, _ = await load({"погода": stdio("math_server.py")}, tool_name_prefix=True)
    async with alone:  # the prefix is the server's own: the same with or without another one
        assert alone.get(f"{first}add").server == "погода"


async def test_servers_named_without_ascii_letters_both_keep_their_prompt_and_resource_tools():
    connections = {"погода": resources("resources"), "тексты": resources("resources")}
    catalog, messages = await load(connections)
    async with catalog:
        assert messages == []
        for server in connections:
            reader = catalog.get(f"{server_prefix(server)}read_resource")
            assert reader.server == server
            assert text_of(await reader.tool.ainvoke({"uri": "docs://a"})) == "resource a"
            assert catalog.get(f"{server_prefix(server)}echo").server == server  # both list it


# --- C7: one deadline per batch --------------------------------------------------------------


def _batch(calls: list[dict[str, Any]], visible: list[str]) -> dict[str, Any]:
    return {
        "messages": [HumanMessage("go"), AIMessage("", tool_calls=calls)],
        "selected_tools": visible,
    }


async def test_a_batch_of_calls_to_a_hanging_tool_takes_one_timeout_not_one_each():
    catalog, _ = await load({"evil": hostile("hang")}, default_timeout_s=2)
    async with catalog:
        executor = ToolExecutor(catalog)
        calls = [call("hang", i, text=str(i)) for i in range(6)] + [call("echo", 9, text="hi")]
        start = time.monotonic()
        out = await executor.ainvoke(_batch(calls, ["hang", "echo"]))
        took = time.monotonic() - start
        assert took < 5, took  # was 12 s: 6 x 2 s
        messages = out["messages"]
        assert len(messages) == 7 and all(m.status == "error" for m in messages)
        assert "timed out after 2 s" in messages[0].content
        assert all("counts from the start of its batch" in m.content for m in messages[1:])


async def test_calls_queued_behind_a_stuck_server_fail_fast_while_it_is_checked():
    catalog, _ = await load(
        {"faults": FAULTS}, tool_metadata={"block": {"timeout_s": 1}, "echo": {"timeout_s": 30}}
    )
    async with catalog:
        executor = ToolExecutor(catalog)
        calls = [call("block", 1, seconds=8), call("echo", 2, text="hi")]
        start = time.monotonic()
        out = await executor.ainvoke(_batch(calls, ["block", "echo"]))
        took = time.monotonic() - start
        assert took < 3.5, took  # was ~6.5 s: the ping's 5 s, then a new session
        blocked, echoed = out["messages"]
        assert "timed out" in blocked.content
        assert echoed.status == "error" and "is being checked" in echoed.content


async def test_a_resource_template_and_a_uri_cannot_freeze_the_catalog():
    """The URI is checked against the server's templates on the loop that owns every session:
    twelve adjacent ``{+x}`` and a 40-character URI kept a backtracking regex busy ~20 s here
    (hours at 64 characters), every server's calls, timeouts and ``aclose`` waiting on it."""
    catalog, _ = await load({"tpl": resources("templates"), "good": hostile("good")})
    async with catalog:
        read = catalog.get("tpl__read_resource").tool
        start = time.monotonic()
        refused, weather = await asyncio.gather(
            read.ainvoke({"uri": "r://" + "x" * 36}),
            catalog.get("get_weather").tool.ainvoke(call("get_weather", 1, text="Oslo")),
        )
        took = time.monotonic() - start
        assert "nor a URI of one of its resource templates" in refused
        assert text_of(weather) == "good: sunny"
        assert took < 5, took
        named = "r://" + "x" * 5_000 + "/end" + "y" * 3_000  # a URI the template names
        assert await read.ainvoke({"uri": named}) == f"asked for {named!r}"
        answer = await read.ainvoke({"uri": "r://" + "x" * 9_000})
        assert "it is over 8,192 characters, so no resource template was checked" in answer
        answer = await read.ainvoke({"uri": "long://" + "a" * 2_000 + "/x"})
        assert "(resource templates not checked: 1, each over 1,000 characters" in answer
    assert time.monotonic() - start < 10


@pytest.mark.slow  # waits out the connect timeout
async def test_a_server_silent_to_prompts_list_is_left_out_after_connect_timeout_s():
    start = time.monotonic()
    # 6 s: the server must start within it (1.5 s on an idle machine, more under load)
    catalog, messages = await asyncio.wait_for(
        load({"silent": resources("silent_prompts")}, connect_timeout_s=6), 40
    )  # was pending forever: prompts/list had no timeout
    took = time.monotonic() - start
    async with catalog:
        assert took < 18, took  # 6 s for its whole load, then closing it
        assert "no answer to prompts/list" in catalog.load_errors["silent"]
        assert "echo" not in catalog
        assert any("'silent'" in m for m in messages)


SILENT_ONCE_STARTED = """
import os, runpy, sys, time
marker, script = sys.argv[1:3]
if os.path.exists(marker):
    time.sleep(60)  # started again: never answers initialize
open(marker, "w").close()
sys.argv = [script]
sys.path.insert(0, os.path.dirname(script))
runpy.run_path(script, run_name="__main__")
"""


@pytest.mark.slow  # waits out connect_timeout_s twice
async def test_a_server_silent_to_initialize_is_named_with_the_step_and_the_option(tmp_path):
    # Was, at the load and at an opening after it alike: 'no answer to initialize within
    # connect_timeout_s=2 s', without what the time counts from, unlike the other steps.
    silent = {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-c", "import time; time.sleep(60)"],
    }
    math = {
        "transport": "stdio",
        "command": sys.executable,
        "args": [
            "-c",
            SILENT_ONCE_STARTED,
            str(tmp_path / "started"),
            str(SERVERS_DIR / "math_server.py"),
        ],
    }
    catalog, _ = await load({"silent": silent, "math": math}, connect_timeout_s=4)
    async with catalog:
        assert catalog.load_errors["silent"].startswith(
            "TimeoutError: no answer to initialize within connect_timeout_s=4 s, counted from "
            "the start of the load (one deadline for the server's start, initialize, "
            "tools/list and its prompt and resource lists); raise connect_timeout_s"
        )
        pid = int(text_of(await catalog.get("server_pid").tool.ainvoke({})))
        os.kill(pid, signal.SIGKILL)
        for _ in range(2):  # the first may still find the dead session's transport
            with pytest.raises(MCPServerError) as caught:
                await catalog.get("add").tool.ainvoke({"a": 1, "b": 2})
            if "no answer to initialize" in str(caught.value):
                break
    assert (
        "no answer to initialize within connect_timeout_s=4 s, counted from the start of its "
        "opening after the load (one deadline for the server's start and initialize); raise "
        "connect_timeout_s for a slow server, or for many servers starting at once (they share "
        "the machine's cores)"
    ) in str(caught.value)


async def test_connect_timeout_s_bounds_a_servers_whole_load_not_each_of_its_steps():
    # tools/list and prompts/list each answer after 5 s: each within connect_timeout_s=9
    # (with up to 4 s for the server's start on a loaded machine), together not
    start = time.monotonic()
    catalog, messages = await asyncio.wait_for(
        load({"slow": resources("slow_lists", "5"), "good": hostile("good")}, connect_timeout_s=9),
        40,
    )  # was loaded, after about 11 s: a deadline of its own for each step
    took = time.monotonic() - start
    async with catalog:
        assert took < 12, took  # 9 s, and closing the server left out
        reason = catalog.load_errors["slow"]
        assert reason.startswith(
            "TimeoutError: no answer to prompts/list, resources/list or resources/templates/list "
            "within connect_timeout_s=9 s, counted from the start of the load"
        )
        assert "raise connect_timeout_s for a slow server" in reason
        assert "echo" not in catalog and "get_weather" in catalog  # the other server loads
        assert any("'slow'" in m for m in messages)


async def test_a_prompt_list_without_end_is_read_to_1000_pages_at_most():
    catalog, _ = await asyncio.wait_for(load({"endless": resources("endless_prompts")}), 30)
    async with catalog:
        assert "endless__list_prompts" in catalog  # the first page had a prompt
        answer = await asyncio.wait_for(
            catalog.get("endless__list_prompts").tool.ainvoke({}), 30
        )  # was pending forever, following nextCursor
        assert "1,000 pages and still gave a nextCursor" in answer


# --- C8: a schema nested too deep ------------------------------------------------------------


async def test_an_unreadable_tool_list_fails_fast_with_the_reason_and_the_others_load():
    start = time.monotonic()
    catalog, _ = await load(
        {"evil": hostile("nested"), "good": hostile("good")}, connect_timeout_s=10
    )
    took = time.monotonic() - start
    async with catalog:
        assert took < 8, took  # was the whole connect timeout
        reason = catalog.load_errors["evil"]
        assert "could not be read" in reason and "recursion limit" in reason
        assert "get_weather" in catalog


async def test_an_unreadable_tool_list_over_http_fails_fast_with_the_reason():
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(HERE / "nested_http_server.py"), "--port", str(port)],
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(server, port)
        url = f"http://127.0.0.1:{port}/mcp"
        start = time.monotonic()
        catalog, _ = await load(
            {"evil": {"transport": "streamable_http", "url": url}, "good": hostile("good")},
            connect_timeout_s=10,
        )
        took = time.monotonic() - start
        async with catalog:
            assert took < 8, took  # was the whole connect timeout, with only "TimeoutError"
            reason = catalog.load_errors["evil"]
            assert "could not be read" in reason and "recursion limit" in reason
            assert "get_weather" in catalog
    finally:
        server.kill()
        server.wait(timeout=10)


# --- C9: large structuredContent ---------------------------------------------------------------


async def test_a_huge_structured_content_is_not_kept_in_the_tool_message():
    catalog, _ = await load({"evil": hostile("structured")})
    async with catalog:
        executor = ToolExecutor(catalog)
        out = await executor.ainvoke(_batch([call("structured", 1)], ["structured"]))
        (message,) = out["messages"]
        assert text_of(message) == "ok"
        assert "structured_content" not in message.artifact
        assert message.artifact["structured_content_dropped_chars"] > 5_000_000


async def test_error_text_names_the_server_without_the_credentials_in_its_connection():
    # What a failing connection is described with ends in load_errors and in the error messages
    # the model reads: a command-line option named like a credential keeps its name, not its
    # value, and a URL its host and path, not its password or query values.
    exits = {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-c", "raise SystemExit(1)", "--api-key", "sk-SECRET-1", "--token=SECRET-2"],
    }
    port = free_port()  # nothing listens there
    nobody = {
        "transport": "streamable_http",
        "url": f"http://ada:SECRET-3@127.0.0.1:{port}/mcp?key=SECRET-4",
    }
    refuses = HTTPServer(("127.0.0.1", 0), _Unauthorized)  # the HTTP client's error names the URL
    threading.Thread(target=refuses.serve_forever, daemon=True).start()
    url = f"http://ada:SECRET-5@127.0.0.1:{refuses.server_address[1]}/mcp?key=SECRET-6"
    servers = {
        "exits": exits,
        "nobody": nobody,
        "refuses": {"transport": "streamable_http", "url": url},
    }
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPLoadWarning)
            catalog = await load_mcp_catalog(servers, connect_timeout_s=5)
        async with catalog:
            errors = catalog.load_errors
    finally:
        refuses.shutdown()
    assert "SECRET" not in str(errors)
    assert "--api-key *** --token=***" in errors["exits"]
    assert f"http://ada:***@127.0.0.1:{port}/mcp?key=***" in errors["nobody"]
    assert "401 Unauthorized' for url 'http://ada:***@127.0.0.1:" in errors["refuses"]


ECHOES_ITS_ARGUMENTS = """
import json, sys
sys.stdin.readline()  # initialize: answered with an error that quotes the command line
error = {"code": -32603, "message": " ".join(sys.argv[1:])}
print(json.dumps({"jsonrpc": "2.0", "id": 0, "error": error}), flush=True)
"""


async def echoed_load_error(args: list[str]) -> str:
    """The load error of a server whose error answer to initialize quotes ``args``."""
    connection = {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-c", ECHOES_ITS_ARGUMENTS, *args],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPLoadWarning)
        catalog = await load_mcp_catalog({"echoes": connection}, connect_timeout_s=10)
    async with catalog:
        return catalog.load_errors["echoes"]


REFUSES_TOOLS_LIST = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue  # notifications/initialized
    if message["method"] == "initialize":
        answer = {"result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "refuses", "version": "1"},
        }}
    else:
        answer = {"error": {"code": -32603, "message": "fetch failed"}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], **answer}), flush=True)
"""


async def test_a_server_that_answers_tools_list_with_an_error_is_left_out_naming_the_request():
    # Was 'McpError: fetch failed (stdio: ...)', the same words as a failed initialize.
    refuses = {"transport": "stdio", "command": sys.executable, "args": ["-c", REFUSES_TOOLS_LIST]}
    catalog, messages = await load({"refuses": refuses, "good": hostile("good")})
    async with catalog:
        assert catalog.load_errors["refuses"].startswith(
            "tools/list failed: McpError: fetch failed (stdio: "
        )
        assert "get_weather" in catalog
        assert any("'refuses': tools/list failed: McpError: fetch failed" in m for m in messages)


async def test_error_text_leaves_out_credentials_of_known_formats_and_named_arguments():
    # Bare arguments, not after an option named like a credential: a token of a format made to
    # be recognised (GitHub, OpenAI...), NAME=X and "Name: X" named like one are left out,
    # wherever they appear (the connection's description, the server's own error text); any
    # other bare argument is shown (documented in docs/mcp.md).
    github, openai = "ghp_" + "A1b2" * 9, "sk-proj-" + "Zz9" * 10
    args = [github, openai, "GITHUB_TOKEN=SECRET-1", "Authorization: Bearer SECRET-2", "plain"]
    error = await echoed_load_error(args)
    assert error.startswith("McpError: *** *** GITHUB_TOKEN=*** Authorization: *** plain (")
    assert error.endswith("*** *** GITHUB_TOKEN=*** Authorization: *** plain)")
    assert "SECRET" not in error and github not in error and openai not in error


@pytest.mark.parametrize(
    "args",
    [
        ["-y", "@modelcontextprotocol/server-filesystem", "/home/ada/docs", "C:/Users/ada"],
        ["mcp-server-git", "--repository", "/srv/repo", "--port=8080", "sha=3f2a9c1e7b"],
        ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/mcp:1.2"],
        ["--url", "https://example.com/sk-docs", "skeleton-key-generator", "de305d54-75b4-431b"],
        # Were '=***' / ':***': a name holding 'key', 'token' or 'auth' anywhere was taken for a
        # credential's, and 'host:port' for a header.
        ["max_tokens=4096", "tokenizer=gpt2", "keyword=weather", "primary_key=id", "author=ana"],
        ["OAUTH_REDIRECT=http://localhost:3000/cb", "--max-tokens", "4096", "--tokenizer", "t5"],
        ["keycloak:8080", "keydb:6379", "authserver:9000", "auth:8443", "token:443/v1"],
        ["tokenizers:latest", "monkey:patch", "Author: Ana Lopez", "--keyfile", "/etc/k.pem"],
        # Were '***' in part or whole: a known format's prefix with no end, or no token body.
        ["gpt-4o", "sk-learn", "sk-learn-text-classifier-v2", "task-runner-for-large-batches"],
        ["ASIAPACIFICSOUTHEAST1X", "AKIAFOLDERNAMEINCAPS1", "/home/ana/sk-projects/notes"],
        ["https://example.com/repo/sk-proj-abcdefghijklmnopqrstuv", "hf_transfer", "--model=o3"],
        ["3f786850e387550fdab836ed7e6dc881de23001b", "550e8400-e29b-41d4-a716-446655440000"],
        ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],
    ],
)
def test_credential_scrubbing_shows_ordinary_command_lines_as_they_are(args):
    where = _where({"transport": "stdio", "command": "npx", "args": args})
    assert where == f"stdio: npx {' '.join(args)}"


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (
            ["OPENAI_API_KEY=S1", "AUTH_TOKEN=S2", "db.password=S3"],
            "OPENAI_API_KEY=*** AUTH_TOKEN=*** db.password=***",
        ),
        (
            ["X-Api-Key: S1", "X-Auth-Token:S2", "Cookie: a=S3"],
            "X-Api-Key: *** X-Auth-Token:*** Cookie: ***",
        ),
        (
            ["--apiKey", "S1", "--access-token", "S2", "PGPASSWORD=S3"],
            "--apiKey *** --access-token *** PGPASSWORD=***",
        ),
        (
            ["https://h/sse?api_key=S1", "https://ada:S2@h/mcp"],
            "https://h/sse?api_key=*** https://ada:***@h/mcp",
        ),
        (["AKIAIOSFODNN7EXAMPLE", "x=ASIAIOSFODNN7EXAMPLE,"], "*** x=***,"),
        (
            ["--secrets", "S1", "CREDENTIALS=S2", "Bearer-Token: S3", "--key", "S4"],
            "--secrets *** CREDENTIALS=*** Bearer-Token: *** --key ***",
        ),
    ],
)
def test_credential_scrubbing_leaves_out_the_credentials_of_every_named_form(args, shown):
    where = _where({"transport": "stdio", "command": "npx", "args": args})
    assert where == f"stdio: npx {shown}"


# Every name docs/mcp.md gives as an example of the credential-name rule, on its side.
CREDENTIAL_NAMES = [
    *("OPENAI_API_KEY", "X-Api-Key", "--apiKey", "AUTH_TOKEN_FILE", "API_KEYS", "PGPASSWORD"),
    *("--pass", "ssh_key", "sshkey", "SESSIONKEY", "MYTOKEN", "clientSecret", "DB_PWD", "--key"),
    # a prefix names whose key it is: an Azure account key, a PagerDuty integration key
    *("COSMOS_PRIMARY_KEY", "--eventhub-primary-key", "PAGERDUTY_ROUTING_KEY"),
    # the trade-off: a name ending in 'key' that is not on the list is hidden, though no secret
    *("malarkey", "xmonkey"),
]
ORDINARY_NAMES = [
    *("max_tokens", "tokenizer", "keyword", "--keyfile", "author"),
    *("primary_key", "primaryKey", "users.primary_key", "foreign_key", "sort_key"),
    *("partition_key", "hash_key", "range_key", "cache_key", "idempotency_key", "routing_key"),
    *("hotkey", "turnkey", "monkey", "donkey", "turkey", "hockey", "jockey", "whiskey"),
    *("PWD", "OLDPWD"),
    # the trade-off: the word only inside the name, or in the plural, with no segment rule
    *("ssh_keys", "SESSIONKEY_PATH"),
]


def _named(name: str) -> list[str]:
    """``name`` with the value S-1: ``--name S-1`` for an option, else ``NAME=S-1``."""
    return [name, "S-1"] if name.startswith("-") else [f"{name}=S-1"]


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_a_name_that_ends_with_a_credentials_word_hides_its_value(name):
    # Were shown: a credential's word with no separator ('MYTOKEN', 'SESSIONKEY', 'sshkey'),
    # 'key' as the last segment of a longer name ('ssh_key'), 'pwd', 'API_KEYS'.
    hidden = [name, "***"] if name.startswith("-") else [f"{name}=***"]
    assert _where({"transport": "stdio", "command": "npx", "args": _named(name)}) == (
        f"stdio: npx {' '.join(hidden)}"
    )


@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_a_name_of_something_that_is_not_a_secret_shows_its_value(name):
    args = _named(name)
    where = _where({"transport": "stdio", "command": "npx", "args": args})
    assert where == f"stdio: npx {' '.join(args)}"


async def test_names_ending_with_a_credentials_word_are_scrubbed_from_a_servers_error_text():
    # The server's own error quotes its command line: what the model and load_errors read.
    args = ["MYTOKEN=SECRET-1", "SESSIONKEY=SECRET-2", "ssh_key=SECRET-3", "--sshkey", "SECRET-4"]
    args += ["primary_key=5", "max_tokens=4096", "monkey=patch", "author=ana"]
    error = await echoed_load_error(args)
    echoed = (
        "MYTOKEN=*** SESSIONKEY=*** ssh_key=*** --sshkey *** "
        "primary_key=5 max_tokens=4096 monkey=patch author=ana"
    )
    assert error.startswith(f"McpError: {echoed} (stdio: ") and error.endswith(f"{echoed})")
    assert "SECRET" not in error


async def test_the_values_of_ordinary_arguments_stay_in_the_servers_error_text():
    # Was: 'max_tokens=4096' taken for a credential, so every '4096' of the error text the
    # server sent (and of the connection's description) became '***', and 'keycloak:8080' hid
    # its port.
    args = ["max_tokens=4096", "--upstream", "keycloak:8080", "GITHUB_TOKEN=SECRET-1"]
    error = await echoed_load_error(args)
    echoed = "max_tokens=4096 --upstream keycloak:8080 GITHUB_TOKEN=***"
    assert error.startswith(f"McpError: {echoed} (stdio: ")
    assert error.endswith(f"{echoed})")
    assert "SECRET" not in error


class _Unauthorized(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(401)
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *args: Any) -> None:
        pass
