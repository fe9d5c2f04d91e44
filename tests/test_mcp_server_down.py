"""An MCP server that is down when the app starts: its tools are missing from the catalog, and
neither the app nor the model mistakes that for a configuration error or a tool that never was.

A pinned tool of the failed server is left out with an ``MCPLoadWarning`` naming the server
(every entry point that takes ``pinned`` builds: the prebuilt agent, ``BudgetConfig``, the nodes,
``ToolAgent``, ``ToolExecutor``, ``tools_to_bind``, the middleware); a pinned name the catalog
knows to be filtered, disabled or a draft is refused as before, the error naming the failed
server. The model's call of a failed server's tool (by its ``<server>__`` prefix), its
``add_tool`` of one and its ``request_more_tools`` of the server's category are answered with
the server being unavailable, without the load error's details; a ``search_tools`` without an
exact match adds that the server is down.

Real FastMCP servers over stdio (``examples/mcp_servers``); the server that is down is a Python
process that cannot open its script and exits. Only the chat model is scripted.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from mcp_servers import stdio

from langgraph_toolbudget import (
    BudgetConfig,
    ToolAgent,
    ToolBudgetInput,
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    add_toolbudget_nodes,
    create_toolbudget_agent,
    tools_to_bind,
)
from langgraph_toolbudget.mcp import MCPLoadWarning, MCPToolCatalog, load_mcp_catalog_sync
from langgraph_toolbudget.testing import ScriptedChatModel

MATH, NOTES = stdio("math_server.py"), stdio("notes_server.py")
DOWN = stdio("no_such_server.py")  # python starts, cannot open the file, exits
DETAIL = "no_such_server.py"  # in the load error (catalog.load_errors): never told the model


def load(connections: dict[str, Any], **options: Any) -> MCPToolCatalog:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPLoadWarning)  # the load's own warning of the server
        return load_mcp_catalog_sync(connections, connect_timeout_s=20, **options)


@pytest.fixture(scope="module")
def notes_down() -> Iterator[MCPToolCatalog]:
    """math up (its ``server_pid`` filtered out), notes down; no prefixes."""
    allowed = ["math:add", "math:multiply", "math:divide", "math:search"]
    catalog = load({"math": MATH, "notes": DOWN}, allowed_tools=allowed)
    assert list(catalog.load_errors) == ["notes"] and catalog.is_filtered("server_pid")
    try:
        yield catalog
    finally:
        catalog.close()


@pytest.fixture(scope="module")
def notes_down_prefixed() -> Iterator[MCPToolCatalog]:
    """math up, notes down, ``tool_name_prefix=True`` (``math__add``)."""
    catalog = load({"math": MATH, "notes": DOWN}, tool_name_prefix=True)
    try:
        yield catalog
    finally:
        catalog.close()


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


def answers(messages: list[Any]) -> dict[str, str]:
    return {m.tool_call_id: m.text for m in messages if isinstance(m, ToolMessage)}


def load_and_add(add: str = "add") -> ScriptedChatModel:
    """A model that loads ``add``, calls it, then answers."""
    return ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[call("add_tool", {"tool_names": [add]}, "load")]),
            AIMessage("", tool_calls=[call(add, {"a": 1, "b": 2}, "sum")]),
            "done",
        ],
        cycle=False,
    )


def nodes_graph(model: ScriptedChatModel, catalog: ToolCatalog, pinned: list[str]) -> Any:
    graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    add_toolbudget_nodes(graph, model, catalog, pinned=pinned)
    return graph.compile()


def tool_agent_graph(model: ScriptedChatModel, catalog: ToolCatalog, pinned: list[str]) -> Any:
    graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    graph.add_node("agent", ToolAgent(model, catalog, pinned=pinned))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile()


APPS: dict[str, Callable[[ScriptedChatModel, ToolCatalog, list[str]], Any]] = {
    "prebuilt": lambda m, c, p: create_toolbudget_agent(m, c, pinned=p).compile(),
    "config": lambda m, c, p: create_toolbudget_agent(
        m, c, config=BudgetConfig(pinned=p)
    ).compile(),
    "nodes": nodes_graph,
    "tool_agent": tool_agent_graph,
    "middleware": lambda m, c, p: create_agent(m, middleware=[ToolBudgetMiddleware(c, pinned=p)]),
}


# --- a pinned tool of a server that failed to load ---------------------------------------


@pytest.mark.parametrize("api", list(APPS))
def test_a_pinned_tool_of_a_server_that_failed_to_load_is_left_out_and_the_app_runs(
    notes_down: MCPToolCatalog, api: str
) -> None:
    model = load_and_add()
    with pytest.warns(MCPLoadWarning, match=r"pinned tools \['list_notes'\].*'notes'") as record:
        app = APPS[api](model, notes_down, ["list_notes", "multiply"])
    text = str(record[0].message)
    assert "failed to load" in text and "catalog.load_errors" in text
    out = app.invoke({"messages": [HumanMessage("add 1 and 2")]})
    assert answers(out["messages"])["sum"] == "3.0"
    assert all("multiply" in names and "list_notes" not in names for names in model.bound_tools)


def test_the_executor_and_tools_to_bind_leave_out_a_failed_servers_pinned_tool(
    notes_down: MCPToolCatalog,
) -> None:
    with pytest.warns(MCPLoadWarning, match="'notes'"):
        ToolExecutor(notes_down, pinned=["list_notes"])
    state = {"messages": [HumanMessage("hi")]}
    with pytest.warns(MCPLoadWarning, match="'notes'"):
        bound = tools_to_bind(notes_down, state, pinned=["list_notes", "multiply"])
    assert "multiply" in [t.name for t in bound]


def test_a_pinned_name_whose_prefix_came_from_a_server_that_is_down_names_its_new_name() -> None:
    """notes' ``search`` is ``notes__search`` only beside math's ``search``: with math down it
    is plain ``search``, and the app that pinned ``notes__search`` is told so."""
    catalog = load({"math": DOWN, "notes": NOTES})
    try:
        assert "search" in catalog and "notes__search" not in catalog
        with pytest.warns(MCPLoadWarning, match=r"'notes__search'.*'math'") as record:
            create_toolbudget_agent(
                ScriptedChatModel(responses=["ok"]), catalog, pinned=["notes__search"]
            )
        assert "listed as 'search'" in str(record[0].message)
    finally:
        catalog.close()


def test_a_pinned_filtered_tool_is_still_refused_and_the_error_names_the_failed_server(
    notes_down: MCPToolCatalog,
) -> None:
    with pytest.raises(ValueError, match=r"pinned tools \['server_pid'\]") as info:
        create_toolbudget_agent(
            ScriptedChatModel(responses=["ok"]), notes_down, pinned=["server_pid"]
        )
    assert "MCP server(s) 'notes' failed to load" in str(info.value)


def test_a_pinned_unknown_name_is_refused_when_every_server_loaded() -> None:
    catalog = load({"math": MATH})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # and no warning instead
            with pytest.raises(ValueError, match=r"pinned tools \['list_notes'\]") as info:
                ToolBudgetMiddleware(catalog, pinned=["list_notes"])
        assert "failed to load" not in str(info.value)
    finally:
        catalog.close()


def test_a_catalog_of_local_tools_has_no_failed_server() -> None:
    @tool
    def notes__add(text: str) -> str:
        """Add a note."""
        return text

    catalog = ToolCatalog.from_tools([notes__add])
    assert catalog.failed_servers == ()
    assert catalog.failed_server_of("notes__list") is None


def test_the_mcp_catalog_names_the_failed_server_of_a_prefixed_name(
    notes_down_prefixed: MCPToolCatalog,
) -> None:
    catalog = notes_down_prefixed
    assert catalog.failed_servers == ("notes",)
    assert catalog.failed_server_of("notes__list_notes") == "notes"
    assert catalog.failed_server_of("math__add") is None
    assert catalog.failed_server_of("list_notes") is None
    assert catalog.in_runtime_mode("debug").failed_server_of("notes__x") == "notes"


# --- what the model is told --------------------------------------------------------------


def down_script() -> ScriptedChatModel:
    """The model calls a tool of notes, adds one and requests its category, in one reply."""
    calls = [
        call("notes__list_notes", {}, "run"),
        call("add_tool", {"tool_names": ["notes__add_note", "math__add"]}, "add"),
        call("request_more_tools", {"categories": ["Notes"], "reason": "notes"}, "more"),
    ]
    return ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), "done"], cycle=False)


@pytest.mark.parametrize("api", ["prebuilt", "middleware"])
def test_the_model_is_told_that_a_failed_servers_tools_and_category_are_unavailable(
    notes_down_prefixed: MCPToolCatalog, api: str
) -> None:
    app = APPS[api](down_script(), notes_down_prefixed, [])
    got = answers(app.invoke({"messages": [HumanMessage("list my notes")]})["messages"])
    for text in got.values():
        assert "MCP server 'notes'" in text and "unavailable now" in text, text
        assert DETAIL not in text and "Unknown" not in text, text
    assert "Tell the user" in got["run"] and "Closest tools" not in got["run"]
    assert got["add"].startswith("Added 1 tool: math__add.")
    assert "Not added (tools of MCP server 'notes'" in got["add"]
    assert "Closest tools" not in got["add"]
    assert got["more"].startswith("No new tools added.")


@pytest.mark.parametrize("api", ["prebuilt", "middleware"])
def test_a_search_without_an_exact_match_says_which_servers_are_down(
    notes_down_prefixed: MCPToolCatalog, api: str
) -> None:
    # Was "No tools found matching the pattern. ...": nothing said the notes were unavailable.
    calls = [
        call("search_tools", {"query": "notebook"}, "none"),
        call("search_tools", {"query": "multply"}, "fuzzy"),
        call("search_tools", {"query": "divide"}, "hit"),
    ]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), "done"], cycle=False)
    app = APPS[api](model, notes_down_prefixed, [])
    got = answers(app.invoke({"messages": [HumanMessage("find my notebook")]})["messages"])
    note = (
        " MCP server 'notes' failed to load and cannot be used now: if the tool you are looking "
        "for comes from there, tell the user it cannot be used right now."
    )
    none, fuzzy, hit = (json.loads(got[k]) for k in ("none", "fuzzy", "hit"))
    assert none["found"] == 0 and none["message"].startswith("No tools found"), none
    assert none["message"].endswith(note) and DETAIL not in got["none"]
    assert fuzzy["tools"][0]["name"] == "math__multiply" and fuzzy["message"].endswith(note)
    assert hit["tools"][0]["name"] == "math__divide" and "notes" not in hit["message"], hit


def test_a_search_that_finds_nothing_names_no_server_when_all_loaded() -> None:
    @tool
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        return city

    catalog = ToolCatalog.from_tools([get_weather])
    model = ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[call("search_tools", {"query": "notebook"}, "s")]),
            "ok",
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(model, catalog).compile()
    text = answers(app.invoke({"messages": [HumanMessage("find my notebook")]})["messages"])["s"]
    assert json.loads(text)["message"].startswith("No tools found") and "failed" not in text


def test_an_unknown_unprefixed_name_is_told_a_server_is_down_too(
    notes_down: MCPToolCatalog,
) -> None:
    model = ScriptedChatModel(
        responses=[AIMessage("", tool_calls=[call("list_notes", {}, "run")]), "done"],
        cycle=False,
    )
    app = create_toolbudget_agent(model, notes_down).compile()
    text = answers(app.invoke({"messages": [HumanMessage("list my notes")]})["messages"])["run"]
    assert "is not a tool of this app" in text and "Closest tools" in text
    assert "MCP server 'notes' failed to load and cannot be used now" in text
    assert DETAIL not in text


# --- the user's tool context while a server is down -----------------------------------------


def test_an_exclusion_of_a_failed_server_or_its_tool_is_written_for_when_it_is_back(
    notes_down: MCPToolCatalog, notes_down_prefixed: MCPToolCatalog
) -> None:
    """``update_context`` refuses names the catalog lacks (a typo would change nothing), but
    not a server that failed to load nor a tool of it by its prefix: the catalog names them,
    and excluding a server that is down is the exclusion to keep for when it returns. A typo
    is still refused, and a name ``allowed_tools`` removed is said to be removed."""
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_toolbudget import exclude_tools, update_context

    config: Any = {"configurable": {"thread_id": "down"}}
    app = create_toolbudget_agent(ScriptedChatModel(responses=["ok"]), notes_down_prefixed)
    app = app.compile(checkpointer=InMemorySaver())
    update_context(app, config, exclude_tools(servers=["notes"], tools=["notes__list_notes"]))
    values = app.get_state(config).values
    assert values["context_servers"] == {"notes": "exclude"}
    assert values["context_tools"] == {"notes__list_notes": "exclude"}
    with pytest.raises(ValueError, match=r"has no tool 'mat__add'.*'math__add'.*'notes' failed"):
        update_context(app, config, exclude_tools(tools=["mat__add"]))
    with pytest.raises(ValueError, match=r"has no tool 'notes__'"):  # a prefix, no tool
        update_context(app, config, exclude_tools(tools=["notes__"]))
    other = create_toolbudget_agent(ScriptedChatModel(responses=["ok"]), notes_down)
    other = other.compile(checkpointer=InMemorySaver())
    removed = r"'server_pid' was removed by the catalog's allowed_servers/allowed_tools"
    with pytest.raises(ValueError, match=removed):
        update_context(other, config, exclude_tools(tools=["server_pid"]))


@pytest.mark.parametrize("by_user", [False, True], ids=["model", "cli-or-mcp-server"])
def test_the_faces_name_only_the_tools_and_servers_listed_now(
    notes_down_prefixed: MCPToolCatalog, notes_down: MCPToolCatalog, by_user: bool
) -> None:
    """The CLI, the MCP context server and the model's context tools (one ``run_command``)
    refuse a server that failed to load, a tool of it and a tool's plain form, which the
    operations take from Python; a tool ``allowed_tools`` removed is said to be removed (was:
    pointed at unrelated tools)."""
    from langgraph_toolbudget.core.context_commands import CommandError, run_command

    refused = [
        ("include_tool_server", {"server": "notes"}, r"\['notes'\] are not servers"),
        ("exclude_tool_server", {"server": "notes"}, r"\['notes'\] are not servers"),
        ("set_server_include_mode", {"server": "notes", "mode": "always"}, "are not servers"),
        ("exclude_tool", {"tool": "notes__list_notes"}, "are not tools of this catalog"),
        ("include_tool", {"tool": "add"}, r"\['add'\] are not tools"),
        ("set_tool_include_mode", {"tool": "add", "mode": "manual"}, "are not tools"),
    ]
    for command, args, match in refused:
        with pytest.raises(CommandError, match=match):
            run_command(notes_down_prefixed, {}, command, args, by_user=by_user)
    removed = r"'server_pid' was removed by the catalog's allowed_servers/allowed_tools"
    with pytest.raises(CommandError, match=removed):
        run_command(notes_down, {}, "include_tool", {"tool": "server_pid"}, by_user=by_user)
    done = run_command(notes_down_prefixed, {}, "exclude_tool", {"tool": "math__add"})
    assert done.update == {"context_tools": {"math__add": "exclude"}}


def test_an_operation_given_the_catalog_takes_the_names_update_context_takes(
    notes_down_prefixed: MCPToolCatalog, notes_down: MCPToolCatalog
) -> None:
    """``exclude_tools(..., catalog=catalog)`` checks names as ``update_context`` does (was:
    a failed server and its tools were "not servers of this catalog", so the exclusion to keep
    for when it is back could be written only without ``catalog=``; a tool's plain form was
    refused; a removed tool was given unrelated closest names); a typo is still refused."""
    from langgraph_toolbudget import exclude_tools, set_include_mode

    update = exclude_tools(
        servers=["notes"], tools=["notes__list_notes"], catalog=notes_down_prefixed
    )
    assert update == {
        "context_tools": {"notes__list_notes": "exclude"},
        "context_servers": {"notes": "exclude"},
    }
    assert set_include_mode("manual", servers=["notes"], catalog=notes_down_prefixed)
    # `add` is math__add's plain form, an exclusion's alias (update_context takes it too)
    assert exclude_tools(tools=["add"], catalog=notes_down_prefixed) == {
        "context_tools": {"add": "exclude"}
    }
    with pytest.raises(ValueError, match=r"'mat__add'\] are not tools.*'mat__add' -> 'math__add'"):
        exclude_tools(tools=["mat__add"], catalog=notes_down_prefixed)
    with pytest.raises(ValueError, match=r"'notes__'\] are not tools"):  # a prefix, no tool
        exclude_tools(tools=["notes__"], catalog=notes_down_prefixed)
    with pytest.raises(ValueError, match=r"\['nots'\] are not servers"):
        exclude_tools(servers=["nots"], catalog=notes_down_prefixed)
    removed = r"'server_pid' was removed by the catalog's allowed_servers/allowed_tools"
    with pytest.raises(ValueError, match=removed):
        exclude_tools(tools=["server_pid"], catalog=notes_down)
