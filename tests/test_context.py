"""Session tool context: include modes, per-thread include/exclude, enforcement."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_toolbudget import (
    BudgetConfig,
    SelectTools,
    ToolCatalog,
    ToolExecutor,
    create_toolbudget_agent,
    exclude_tools,
    include_tools,
)
from langgraph_toolbudget.core.context import INCLUDE_MODES, SessionContext, merge_context
from langgraph_toolbudget.core.context_commands import CommandError, run_command
from langgraph_toolbudget.core.context_ops import (
    context_summary,
    list_servers,
    list_tools,
    set_include_mode,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.testing import ScriptedChatModel
from tests.conftest import build_catalog


def _values(*updates: dict[str, Any], **state: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict(state)
    for update in updates:
        for key, value in update.items():
            out[key] = merge_context(out.get(key), value)
    return out


# --- include mode resolution ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("default", "server", "own", "override", "thread_server", "thread_tool", "expected"),
    [
        ("agent", None, None, None, None, None, "agent"),
        (
            "always",
            None,
            None,
            None,
            None,
            None,
            "always",
        ),  # the fallback of an always-by-default catalog
        ("agent", "manual", None, None, None, None, "manual"),  # server over default
        ("agent", "manual", "always", None, None, None, "always"),  # tool over server
        ("agent", "manual", "always", "agent", None, None, "agent"),  # tool_metadata last
        ("agent", "always", None, None, "manual", None, "manual"),  # thread server over catalog
        ("agent", "always", "always", None, "manual", None, "manual"),
        ("agent", None, None, None, "manual", "always", "always"),  # thread tool over server
        ("manual", None, None, None, None, "agent", "agent"),
    ],
)
def test_include_mode_resolution_table(
    default: str,
    server: str | None,
    own: str | None,
    override: str | None,
    thread_server: str | None,
    thread_tool: str | None,
    expected: str,
) -> None:
    from tests.conftest import make_tools

    tools = make_tools()
    for t in tools:
        if t.name == "send_message" and own:
            t.metadata = {**(t.metadata or {}), "include": own}
    catalog = build_catalog(
        tools,
        default_include=default,
        server_defaults={"slack": {"include": server}} if server else None,
        tool_metadata={"send_message": {"include": override}} if override else None,
    )
    updates = []
    if thread_server:
        updates.append(set_include_mode(thread_server, servers=["slack"]))
    if thread_tool:
        updates.append(set_include_mode(thread_tool, tools=["send_message"]))
    ctx = SessionContext.from_state(_values(*updates))
    spec = catalog.get("send_message")
    assert spec is not None and ctx.mode(spec) == expected


def test_context_reducer_and_update_shapes() -> None:
    assert exclude_tools(tools=["delete_file"], servers=["slack"]) == {
        "context_tools": {"delete_file": "exclude"},
        "context_servers": {"slack": "exclude"},
    }
    values = _values(exclude_tools(tools=["a"]), include_tools(tools=["a", "b"]))
    assert values["context_tools"] == {"a": "include", "b": "include"}
    reset = _values(set_include_mode("manual", tools=["a"]), set_include_mode(None, tools=["a"]))
    assert reset["context_tool_modes"] == {}
    with pytest.raises(TypeError, match=r"pass \['delete_file'\]"):
        exclude_tools(tools="delete_file")
    with pytest.raises(ValueError, match="nothing was named"):
        include_tools()
    with pytest.raises(ValueError, match="Closest tools"):
        include_tools(tools=["delete_fil"], catalog=build_catalog())
    with pytest.raises(ValueError, match="mode must be one of"):
        set_include_mode("sometimes", tools=["a"])


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("context_tools", {"get_weather": "excluded"}, ValueError),  # a typo
        ("context_tools", {"get_weather": "manual"}, ValueError),  # another field's value
        ("context_tools", {"get_weather": ""}, ValueError),
        ("context_tools", {"get_weather": ["include"]}, TypeError),
        ("context_servers", {"weather": {"include": True}}, TypeError),
        ("context_tool_modes", {"get_weather": "include"}, ValueError),
        ("context_server_modes", {"weather": 3}, TypeError),
    ],
)
def test_a_malformed_context_value_is_refused_and_the_exclusion_stands(field, value, error):
    model = ScriptedChatModel(
        responses=[
            "sunny",
            AIMessage("", tool_calls=[ToolCall(name="get_weather", args={"city": "L"}, id="w")]),
            "done",
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(model, build_catalog()).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [("user", "what's the weather in Paris?")]}, config)
    app.update_state(config, exclude_tools(tools=["get_weather"], servers=["weather"]))
    with pytest.raises(error, match="not one of .* build the update with"):
        app.update_state(config, {field: value})
    values = app.get_state(config).values
    assert SessionContext.from_state(values) == SessionContext(
        tools={"get_weather": "exclude"}, servers={"weather": "exclude"}
    )
    out = app.invoke({"messages": [("user", "what's the weather in Lima?")]}, config)
    assert "get_weather" not in model.bound_tools[-1]
    refusal = [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]
    assert refusal.status == "error" and "excluded" in refusal.content


def test_malformed_values_already_in_a_checkpoint_are_ignored() -> None:
    malformed = {
        "context_tools": {"get_weather": ["exclude"], "read_file": "exclude", "x": "excluded"},
        "context_servers": {"slack": {"exclude": True}},
        "context_tool_modes": {"weather_forecast": ["manual"]},
        "context_server_modes": {"files": 3},
    }
    assert SessionContext.from_state(malformed) == SessionContext(tools={"read_file": "exclude"})


def test_summary_counts_grouped_by_server() -> None:
    catalog = build_catalog(server_defaults={"weather": {"include": "always"}})
    values = _values(
        exclude_tools(servers=["slack"]), include_tools(tools=["read_file"]),
        selected_tools=["create_issue"],
    )  # fmt: skip
    summary = context_summary(catalog, values)
    by_name = {s["name"]: s for s in summary["servers"]}
    assert by_name["weather"]["summary"] == "(all 3 tools)"
    assert by_name["slack"]["summary"] == "(0 of 4 tools)"
    assert by_name["files"]["tool_names"] == ["read_file"]
    assert by_name["github"]["summary"] == "(1 of 10 tools)"
    assert (
        "weather (all 3 tools): get_weather, weather_forecast, get_air_quality" in (summary["text"])
    )
    rows = {r["name"]: r for r in list_tools(catalog, values)}
    assert rows["send_message"]["excluded"] and not rows["send_message"]["in_context"]
    assert rows["get_weather"]["mode"] == "always"
    assert [s["name"] for s in list_servers(catalog, values)][:2] == ["github", "slack"]


# --- what each node sees in a thread ---------------------------------------------------------


def _select(catalog: Any, values: dict[str, Any], text: str, cats: list[str]) -> list[str]:
    node = SelectTools(catalog, max_tools=6)
    state = {"messages": [HumanMessage(text)], "categories": cats, **values}
    update = node.invoke(state)
    return merge_names(values.get("selected_tools", []), update.get("selected_tools"))


def merge_names(left: list[str], right: Any) -> list[str]:
    from langgraph_toolbudget.state import merge_names as reducer

    return reducer(left, right)


def test_always_first_turn_manual_once_included_excluded_never() -> None:
    catalog = build_catalog(
        server_defaults={"weather": {"include": "always"}, "files": {"include": "manual"}}
    )
    first = _select(catalog, {}, "read the README file and the weather", ["files", "weather"])
    assert {"get_weather", "weather_forecast", "get_air_quality"} <= set(first)
    assert "read_file" not in first, "manual tools are never chosen by the budget"

    included = _values(include_tools(tools=["read_file"]), selected_tools=first)
    second = _select(catalog, included, "read the README file", ["files"])
    assert "read_file" in second and "write_file" not in second

    excluded = _values(
        exclude_tools(tools=["get_weather"], servers=["github"]), selected_tools=second
    )
    third = _select(catalog, excluded, "open a github issue about the weather", ["github"])
    assert "get_weather" not in third, "an always tool excluded in the thread is gone"
    assert not {n for n in third if catalog.get(n).server == "github"}


def _exec(catalog: Any, values: dict[str, Any], *calls: ToolCall) -> list[ToolMessage]:
    state = {"messages": [HumanMessage("x"), AIMessage("", tool_calls=list(calls))], **values}
    out = ToolExecutor(catalog).invoke(state)
    return out["messages"]


def test_excluded_tool_is_refused_through_every_meta_tool_and_directly() -> None:
    catalog = build_catalog()
    values = _values(
        exclude_tools(tools=["delete_file"], servers=["slack"]),
        selected_tools=["delete_file", "send_message", "read_file"],
    )
    calls = [
        ToolCall(name="delete_file", args={"path": "README.md"}, id="c1"),
        ToolCall(name="send_message", args={"channel": "dev", "text": "hi"}, id="c2"),
        ToolCall(name="add_tool", args={"tool_names": ["delete_file", "list_channels"]}, id="c3"),
        ToolCall(name="search_tools", args={"query": "delete|file|channel"}, id="c4"),
        ToolCall(name="request_more_tools", args={"categories": ["files", "slack"]}, id="c5"),
        ToolCall(name="show_all_tools", args={}, id="c6"),
        ToolCall(name="read_file", args={"path": "docs/guide.md"}, id="c7"),
    ]
    direct, by_server, add, search, more, show, ok = _exec(catalog, values, *calls)
    assert direct.status == "error" and "was excluded from this conversation" in direct.content
    assert "Only the user can include it again" in direct.content
    assert by_server.status == "error" and "its server 'slack' is excluded" in by_server.content
    assert "Only the user can include it again" in by_server.content
    assert not any("include_tool" in m.content for m in (direct, by_server, add))
    assert add.status == "error" and "excluded" in add.content
    assert "only the user can include them again" in add.content
    assert "delete_file" in add.content and "Added" not in add.content
    found = {t["name"] for t in json.loads(search.content)["tools"]}
    assert found and "delete_file" not in found and not found & {"send_message", "list_channels"}
    assert not {"delete_file", "send_message", "list_channels"} & set(more.content.split())
    listed = json.loads(show.content)["tools"]
    assert "delete_file" not in listed and "send_message" not in listed
    assert ok.status == "success" and ok.content == "guide"


def test_search_tools_says_when_everything_it_matched_is_excluded() -> None:
    catalog = build_catalog()
    values = _values(exclude_tools(servers=["slack"]), selected_tools=["read_file"])
    calls = [
        ToolCall(name="search_tools", args={"query": "channel"}, id="s1"),  # slack only
        ToolCall(name="search_tools", args={"query": "chanel histroy"}, id="s2"),  # fuzzy
        ToolCall(name="search_tools", args={"query": "qqqqzzzz"}, id="s3"),  # nothing at all
    ]
    regex, fuzzy, none = (json.loads(m.content) for m in _exec(catalog, values, *calls))
    for answer in (regex, fuzzy):
        assert answer["found"] == 0 and answer["tools"] == []
        assert "excluded from this conversation" in answer["message"]
        assert "Found matching tools" not in answer["message"]
    assert "list_channels" in regex["message"] and "read_channel_history" in fuzzy["message"]
    assert none["message"].startswith("No tools found matching the pattern")


def test_excluded_tool_never_bound_by_the_agent_and_back_once_included(tmp_path: Path) -> None:
    catalog = build_catalog()
    model = ScriptedChatModel(responses=["done"])
    graph = create_toolbudget_agent(model, catalog, max_tools=4)
    config = {"configurable": {"thread_id": "t1"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "db.sqlite")) as saver:
        app = graph.compile(checkpointer=saver)
        app.invoke({"messages": [("user", "delete the file README.md")]}, config)
        assert "delete_file" in model.bound_tools[-1]
        app.update_state(config, exclude_tools(tools=["delete_file"]))
        assert app.get_state(config).values["context_tools"] == {"delete_file": "exclude"}
        app.invoke({"messages": [("user", "delete the file README.md")]}, config)
        assert "delete_file" not in model.bound_tools[-1]
        assert "delete_file" not in app.get_state(config).values["selected_tools"]
        app.update_state(config, include_tools(tools=["delete_file"]))
        app.invoke({"messages": [("user", "what's the weather in Paris?")]}, config)
        assert "delete_file" in model.bound_tools[-1], "included: visible outside the budget"


# --- the management tools, through the agent -------------------------------------------------


def test_management_tools_through_the_agent_with_a_scripted_model() -> None:
    catalog = build_catalog(server_defaults={"files": {"include": "manual"}})

    def step(n: int, name: str, args: dict[str, Any]) -> AIMessage:
        return AIMessage("", tool_calls=[ToolCall(name=name, args=args, id=f"m{n}")])

    model = ScriptedChatModel(
        responses=[
            step(1, "list_tool_servers", {}),
            step(2, "include_tool", {"server": "files", "tool": "read_file"}),
            step(3, "read_file", {"path": "README.md"}),
            step(4, "exclude_tool_server", {"server": "slack"}),
            step(5, "send_message", {"channel": "dev", "text": "x"}),
            step(6, "include_tool", {"tool": "nope"}),
            "done",
        ]
    )
    config = BudgetConfig(enabled_builtins={"allow": ["*"]}, max_iterations=8, max_tools=4)
    graph = create_toolbudget_agent(model, catalog, config=config).compile()
    out = graph.invoke({"messages": [("user", "post to slack and read a file")]})
    tool_msgs = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    servers = {s["name"]: s for s in json.loads(tool_msgs["m1"].content)}
    assert servers["files"]["summary"] == "(0 of 5 tools)"
    assert json.loads(tool_msgs["m2"].content)["tool"]["in_context"] is True
    assert tool_msgs["m3"].status == "success" and tool_msgs["m3"].content == "# acme"
    assert tool_msgs["m5"].status == "error" and "excluded" in tool_msgs["m5"].content
    assert tool_msgs["m6"].status == "error" and "not tools of this catalog" in (
        tool_msgs["m6"].content
    )
    assert out["context_tools"] == {"read_file": "include"}
    assert out["context_servers"] == {"slack": "exclude"}
    assert "read_file" in model.bound_tools[2], "included tool bound in the next step"
    assert "send_message" not in out["selected_tools"]


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_built_in_calls_see_the_context_changes_made_earlier_in_their_batch(
    api: str,
) -> None:
    slack = {"send_message", "list_channels", "read_channel_history", "add_reaction"}
    batch = [
        ToolCall(name="exclude_tool_server", args={"server": "slack"}, id="x"),
        ToolCall(name="add_tool", args={"tool_names": ["send_message", "list_channels"]}, id="a"),
        ToolCall(name="request_more_tools", args={"categories": ["slack"]}, id="r"),
        ToolCall(name="include_tool", args={"tool": "send_message"}, id="i"),
    ]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=batch), "done"])
    config = BudgetConfig(enabled_builtins={"allow": ["*"]}, max_tools=2, max_visible=2)
    graph = create_toolbudget_agent(model, build_catalog(), config=config).compile()
    question = {"messages": [("user", "what's the weather in Paris?")]}
    out = graph.invoke(question) if api == "invoke" else await graph.ainvoke(question)
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert answers["a"].status == "error" and "excluded" in answers["a"].content
    assert answers["r"].content == "No new tools added."
    assert answers["i"].status == "error", "the exclusion made just before is refused too"
    assert "'send_message' is excluded" in answers["i"].content
    assert "send_message" not in (out.get("context_tools") or {})
    assert model.bound_tools[1] == model.bound_tools[0], "nothing loaded, nothing evicted"
    assert not slack & set(out["selected_tools"])


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("include_tool", {"tool": "x" * 1_000_000}),
        ("get_tool", {"tool": "y" * 100_000}),
        ("set_tool_include_mode", {"tool": "read_file", "mode": "z" * 100_000}),
        ("exclude_tool_server", {"server": "s" * 100_000}),
        ("include_tool", {"tool": ["a"] * 100_000}),
    ],
)
def test_context_tools_echo_a_huge_argument_clipped(name: str, args: dict[str, Any]) -> None:
    calls = [ToolCall(name=name, args=args, id="big")]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), "done"])
    config = BudgetConfig(enabled_builtins={"allow": ["*"]})
    out = (
        create_toolbudget_agent(model, build_catalog(), config=config)
        .compile()
        .invoke({"messages": [("user", "include it")]})
    )
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error" and len(answer.content) < 600
    ours = {**out, "messages": [m for m in out["messages"] if not isinstance(m, AIMessage)]}
    assert len(json.dumps(ours, default=str)) < 20_000  # the model's message aside, nothing kept
    assert not out.get("context_tools") and not out.get("context_tool_modes")


@pytest.mark.parametrize("args", [["read_file"], 5])
def test_context_tools_answer_arguments_that_are_not_an_object_with_an_error(args: Any) -> None:
    executor = ToolExecutor(build_catalog(), enabled_builtins={"allow": ["*"]})
    names = ["get_tool", "list_tools", "include_tool", "list_context_tools"]
    calls = [{"name": n, "args": args, "id": n, "type": "tool_call"} for n in names]
    out = executor.invoke(calls)  # ToolNode's list-of-tool-calls input
    messages = out["messages"] if isinstance(out, dict) else out
    assert [m.tool_call_id for m in messages] == names
    for message in messages:
        assert message.status == "error"
        assert message.content.startswith(f"Error: {message.name} takes its arguments as a JSON")
        assert message.content.endswith(f"Fix the arguments and call {message.name} again.")
    assert '{"tool": "<tool>", "server": "<server>"}' in messages[2].content


def test_the_models_context_calls_take_names_and_modes_spelt_another_way() -> None:
    # Were refused ("no server 'Slack'", "unknown include mode 'ALWAYS'"), where the
    # meta-tools take "Slack"; and text arguments for a context tool with one required
    # argument were refused, where a catalog tool takes them as that argument.
    executor = ToolExecutor(build_catalog(), enabled_builtins={"allow": ["*"]})
    mode = "set_tool_include_mode"
    calls = [
        ToolCall(name="exclude_tool_server", args={"Server": "Slack"}, id="a"),
        ToolCall(name=mode, args={"tool": "Read-File", "mode": "ALWAYS"}, id="b"),
        ToolCall(name=mode, args={"tool": "READ_FILE", "mode": "alway"}, id="c"),
    ]
    out = executor.invoke({"messages": [AIMessage("", tool_calls=calls)]})
    excluded, moded, misspelt = out["messages"]
    assert excluded.status == "success" and moded.status == "success", (excluded, moded)
    assert out["context_servers"] == {"slack": "exclude"}
    assert out["context_tool_modes"] == {"read_file": "always"}
    assert misspelt.status == "error" and "alway" in misspelt.content  # no mode it spells
    text = {"name": "get_tool", "args": "get_weather", "id": "t", "type": "tool_call"}
    (got,) = executor.invoke([text])["messages"]  # ToolNode's list-of-tool-calls input
    assert got.status == "success" and json.loads(got.content)["name"] == "get_weather"


def test_management_tools_are_off_by_default() -> None:
    model = ScriptedChatModel(responses=["done"])
    create_toolbudget_agent(model, build_catalog()).compile().invoke({"messages": [("user", "hi")]})
    assert "include_tool" not in model.bound_tools[-1]
    assert "search_tools" in model.bound_tools[-1]


def test_run_command_errors_name_the_fix() -> None:
    catalog = build_catalog()
    with pytest.raises(CommandError, match="belongs to server 'files', not 'slack'"):
        run_command(catalog, {}, "include_tool", {"tool": "read_file", "server": "slack"})
    with pytest.raises(CommandError, match="needs the argument 'mode'"):
        run_command(catalog, {}, "set_server_include_mode", {"server": "slack"})
    with pytest.raises(CommandError, match="not servers of this catalog"):
        run_command(catalog, {}, "exclude_tool_server", {"server": "slak"})
    with pytest.raises(CommandError, match="not a tool-context operation"):
        run_command(catalog, {}, "drop_tool", {})


# --- an exclusion is the user's: the model's tools never lift it -----------------------------

USER_EXCLUDED = exclude_tools(tools=["delete_file"], servers=["slack"])
"""What the user excluded in the threads below: one tool, and a whole server."""

REFUSED = "only the user can include it again"
# Every way a model's context-tool call could widen past the user's exclusions (each refused),
# then the calls that may go through: narrowing, a server include or mode that leaves its
# excluded tool excluded, reads, and odd arguments (refused as bad arguments).
LIFTING_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("include_tool", {"tool": "delete_file"}),
    ("include_tool", {"tool": "delete_file", "server": "files"}),
    ("include_tool", {"tool": "send_message"}),  # excluded through its server
    ("include_tool", {"tool": "send_message", "server": "slack"}),
    ("include_tool", {"tool": "delete_file", "thread": "other", "values": {"context_tools": {}}}),
    *[("set_tool_include_mode", {"tool": "delete_file", "mode": m}) for m in ("always", "agent")],
    ("set_tool_include_mode", {"tool": "delete_file", "mode": "manual"}),
    ("set_tool_include_mode", {"tool": "list_channels", "mode": "always"}),
    ("include_tool_server", {"server": "slack"}),
    *[("set_server_include_mode", {"server": "slack", "mode": m}) for m in INCLUDE_MODES],
]
SPELT_LIFTING_CALLS: list[tuple[str, dict[str, Any]]] = [
    # the model's face takes a name or mode spelt another way as the one it spells, so these
    # are refused as the calls above (the user's faces take names as they are)
    ("include_tool", {"tool": " delete_file "}),
    ("include_tool", {"tool": "Delete_File"}),
    ("include_tool_server", {"server": "Slack"}),
    ("set_tool_include_mode", {"tool": "delete_file", "mode": "ALWAYS"}),
    ("set_server_include_mode", {"server": "SLACK", "mode": "Agent"}),
]
OTHER_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("include_tool_server", {"server": "files"}),  # delete_file stays excluded
    ("set_server_include_mode", {"server": "files", "mode": "always"}),  # likewise
    ("exclude_tool", {"tool": "delete_file"}),
    ("exclude_tool", {"tool": "read_file"}),
    ("exclude_tool_server", {"server": "slack"}),
    ("exclude_tool_server", {"server": "weather"}),
    ("include_tool", {"tool": ["delete_file"]}),
    ("include_tool", {"tool": "   "}),
    ("set_tool_include_mode", {"tool": "delete_file", "mode": None}),
    ("set_server_include_mode", {"server": "slack", "mode": ""}),
    ("list_tools", {"server": "slack"}),
    ("get_tool", {"tool": "delete_file"}),
    ("list_context_tools", {}),
    ("list_tool_servers", {}),
    ("get_tool_server", {"server": "slack"}),
]


def _applied(values: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``values`` with an executor update's context fields merged in."""
    context = {k: v for k, v in update.items() if k.startswith("context_")}
    return {**values, **{k: merge_context(values.get(k), v) for k, v in context.items()}}


def _user_kept(catalog: Any, values: dict[str, Any], update: dict[str, Any]) -> None:
    """The user's exclusions hold after ``update``: the same entries, no mode set on them,
    every tool excluded before still excluded, none of them visible."""
    after = _applied(values, update)
    assert after["context_tools"]["delete_file"] == "exclude"
    assert after["context_servers"]["slack"] == "exclude"
    assert "delete_file" not in after.get("context_tool_modes", {})
    assert "slack" not in after.get("context_server_modes", {})
    excluded = SessionContext.from_state(values).excluded(catalog)
    assert excluded <= SessionContext.from_state(after).excluded(catalog)
    added = (update.get("selected_tools") or {}).get("add", [])
    assert not excluded & set(added)


@pytest.mark.parametrize(("name", "args"), LIFTING_CALLS + SPELT_LIFTING_CALLS + OTHER_CALLS)
def test_no_context_tool_call_of_the_model_lifts_the_users_exclusion(
    name: str, args: dict[str, Any]
) -> None:
    catalog = build_catalog()
    values = _values(USER_EXCLUDED, selected_tools=["read_file", "get_weather"])
    executor = ToolExecutor(catalog, enabled_builtins={"allow": ["*"]})
    state = {"messages": [AIMessage("", tool_calls=[ToolCall(name=name, args=args, id="m")])]}
    out = executor.invoke({**state, **values})
    (answer,) = out["messages"]
    _user_kept(catalog, values, out)
    if (name, args) in LIFTING_CALLS + SPELT_LIFTING_CALLS:
        assert answer.status == "error" and REFUSED in answer.content
        assert "Tell the user if" in answer.content and "Fix the arguments" not in answer.content
        assert not {k for k in out if k.startswith("context_")}, "refused: nothing written"
    else:
        assert REFUSED not in answer.content


@pytest.mark.parametrize("seed", range(5))
def test_no_sequence_of_model_context_calls_lifts_the_users_exclusion(seed: int) -> None:
    """Random replies of context-tool calls, each applied to the thread before the next: the
    user's exclusions still hold after every one, and a call of an excluded tool is refused."""
    import random

    rng = random.Random(seed)
    catalog = build_catalog()
    values = _values(USER_EXCLUDED, selected_tools=["read_file"])
    executor = ToolExecutor(catalog, enabled_builtins={"allow": ["*"]})
    calls = LIFTING_CALLS + SPELT_LIFTING_CALLS + OTHER_CALLS
    for step in range(12):
        reply = [
            ToolCall(name=n, args=a, id=f"{step}-{i}")
            for i, (n, a) in enumerate(rng.sample(calls, 4))
        ]
        reply.append(ToolCall(name="delete_file", args={"path": "README.md"}, id=f"{step}-d"))
        state = {"messages": [AIMessage("", tool_calls=reply)], **values}
        out = executor.invoke(state)
        _user_kept(catalog, values, out)
        refused = out["messages"][-1]
        assert refused.status == "error" and "was excluded" in refused.content
        values = _applied(values, out)


@pytest.mark.parametrize("face", ["nodes", "middleware"])
@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_the_model_cannot_include_and_run_a_tool_the_user_excluded(
    face: str, api: str
) -> None:
    from langchain.agents import create_agent

    from langgraph_toolbudget import ToolBudgetMiddleware, update_context

    ran: list[str] = []

    @tool
    def delete_file(path: str) -> str:
        """Delete a file from the workspace."""
        ran.append(path)
        return f"deleted {path}"

    @tool
    def read_file(path: str) -> str:
        """Read a file from the workspace."""
        return "content"

    def call(name: str, args: dict[str, Any], i: str) -> AIMessage:
        return AIMessage("", tool_calls=[ToolCall(name=name, args=args, id=i)])

    catalog = ToolCatalog.from_tools(
        [delete_file, read_file], categories={"files": ["delete_file", "read_file"]}
    )
    model = ScriptedChatModel(
        responses=[
            call("delete_file", {"path": "report.txt"}, "1"),
            call("include_tool", {"tool": "delete_file"}, "2"),
            call("include_tool_server", {"server": "files"}, "3"),
            call("set_tool_include_mode", {"tool": "delete_file", "mode": "always"}, "4"),
            call("delete_file", {"path": "report.txt"}, "5"),
            "I cannot delete it: please include delete_file if you want me to.",
        ],
        cycle=False,
    )
    options: dict[str, Any] = {"enabled_builtins": {"allow": ["*"]}, "max_iterations": 8}
    if face == "nodes":
        app = create_toolbudget_agent(model, catalog, **options).compile(
            checkpointer=InMemorySaver()
        )
    else:
        budget = ToolBudgetMiddleware(catalog, **options)
        app = create_agent(model, middleware=[budget], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": f"{face}-{api}"}}
    update_context(app, thread, exclude_tools(tools=["delete_file"]))
    question = {"messages": [("user", "Clean up report.txt")]}
    out = app.invoke(question, thread) if api == "invoke" else await app.ainvoke(question, thread)
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert ran == [], "the tool the user excluded never ran"
    assert answers["1"].status == "error" and "include_tool" not in answers["1"].content
    for refused in ("2", "4"):
        assert answers[refused].status == "error" and REFUSED in answers[refused].content
    assert answers["3"].status == "success", "the rest of the server may be included"
    assert answers["5"].status == "error" and "was excluded" in answers["5"].content
    assert out["context_tools"] == {"delete_file": "exclude"}
    assert not out.get("context_tool_modes")
    assert "delete_file" not in out["selected_tools"]
    assert all("delete_file" not in bound for bound in model.bound_tools)


def test_the_users_faces_still_lift_an_exclusion() -> None:
    catalog = build_catalog()
    values = _values(USER_EXCLUDED)
    for name, args in LIFTING_CALLS:
        with pytest.raises(CommandError, match=REFUSED):
            run_command(catalog, values, name, args)
        result = run_command(catalog, values, name, args, by_user=True)
        assert result.update, (name, args)
    lifted = run_command(catalog, values, "include_tool", {"tool": "delete_file"}, by_user=True)
    assert lifted.data["tool"]["excluded"] is False and lifted.data["tool"]["in_context"]


def test_the_model_is_told_an_exclusion_is_the_users_to_lift() -> None:
    from langgraph_toolbudget.execution.context_tools import ContextTools

    described = {d.name: d.description for d in ContextTools(build_catalog()).definitions()}
    writes = {"include_tool", "exclude_tool", "set_tool_include_mode", "set_server_include_mode",
              "include_tool_server", "exclude_tool_server"}  # fmt: skip
    for name, description in described.items():
        assert ("only the user can include it again" in description) == (name in writes), name


# --- why each tool is visible ------------------------------------------------------------------


def test_visible_reasons_in_the_stream_events_and_the_state() -> None:
    catalog = build_catalog(server_defaults={"weather": {"include": "always"}})
    add = ToolCall(name="add_tool", args={"tool_names": ["list_tables"]}, id="a")
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[add]), "done"])
    graph = create_toolbudget_agent(model, catalog, max_tools=4, pinned=["read_file"]).compile()
    events, out = [], {}
    for mode, part in graph.stream(
        {"messages": [("user", "create a github issue about the crash")]},
        stream_mode=["custom", "values"],
    ):
        if mode == "custom" and part.get("event") == "toolbudget.visible_tools":
            events.append(part)
        elif mode == "values":
            out = part
    reasons = out["tool_reasons"]
    assert reasons["get_weather"] == {"why": "always"}
    assert reasons["read_file"] == {"why": "pinned"}
    issue = reasons["create_issue"]
    assert issue["why"] == "budget" and issue["category"] == "github" and issue["score"] > 0
    assert issue["share"] == 4
    assert reasons["list_tables"] == {"why": "add_tool"}
    assert set(reasons) == set(out["selected_tools"]), "one reason per visible tool"
    by_node = {e["node"]: e for e in events if e["added"]}
    assert by_node["select_tools"]["reasons"]["create_issue"]["why"] == "budget"
    assert any(e["reasons"].get("list_tables") == {"why": "add_tool"} for e in events)


def test_cli_in_process_errors_and_modes() -> None:
    from click.testing import CliRunner

    from langgraph_toolbudget.cli import MODES, main
    from langgraph_toolbudget.core.context import INCLUDE_MODES

    assert MODES == INCLUDE_MODES
    runner = CliRunner()
    for args, expected in [
        (["tools"], "error: say which thread: --url URL --thread ID"),
        (["tools", "--url", "http://127.0.0.1:9", "--thread", "t"], "error: no catalog"),
        (["tools", "--sqlite", "/nonexistent.sqlite", "--thread", "t"], "needs --graph"),
        (["explain", "x", "--catalog", "no_such_module:catalog"], "cannot load"),
        (["explain", "x", "--catalog", "json:dumps"], "not a ToolCatalog"),
    ]:
        result = runner.invoke(main, args, env={"TOOLBUDGET_CATALOG": ""})
        assert result.exit_code == 1, (args, result.output)
        assert expected in result.output and len(result.output.strip().splitlines()) == 1


EXPLAIN_CATALOG = "langgraph_toolbudget.demo.example_catalog:build_example_catalog"


@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    [
        ("--max-categories", "0", "max_categories must be >= 1, got 0"),
        ("--max-categories", "-1", "max_categories must be >= 1, got -1"),
        ("--max-tools", "-3", "max_tools must be >= 0, got -3"),
        ("--min-per-category", "-1", "min_per_category must be >= 0, got -1"),
        ("--search-limit", "-1", "search_limit must be >= 0, got -1"),
    ],
)
def test_cli_explain_answers_an_out_of_range_number_in_one_line(
    flag: str, value: str, rule: str
) -> None:
    from click.testing import CliRunner

    from langgraph_toolbudget.cli import main

    args = ["explain", "weather in Paris", "--catalog", EXPLAIN_CATALOG, flag, value]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [
        f"error: {flag}: BudgetConfig: option {rule} (int)."
    ]


@pytest.mark.parametrize(
    ("options", "error", "rule"),
    [
        ({"max_categories": 0}, ValueError, "option max_categories must be >= 1, got 0"),
        ({"max_tools": -3}, ValueError, "option max_tools must be >= 0, got -3"),
        ({"min_per_category": -1}, ValueError, "option min_per_category must be >= 0, got -1"),
        ({"search_limit": -1}, ValueError, "option search_limit must be >= 0, got -1"),
        ({"max_tools": "3"}, TypeError, "option max_tools must be an integer or None"),
        ({"max_tool": 3}, TypeError, "explain has no option max_tool; did you mean max_tools?"),
    ],
)
def test_explain_checks_its_options_as_budget_config_does(
    options: dict[str, Any], error: type[Exception], rule: str
) -> None:
    from langgraph_toolbudget.explain import explain

    catalog = build_example_catalog()
    with pytest.raises(error, match=re.escape(rule)):
        explain(catalog, "weather in Paris", **options)


def test_explain_takes_the_budget_config_its_nodes_share() -> None:
    from langgraph_toolbudget.explain import explain

    catalog = build_example_catalog()
    small = BudgetConfig(model_size="qwen3:4b", search_limit=0)  # the small preset: 2 tools
    data = explain(catalog, "weather in Paris", config=small)
    assert [row["why"] for row in data["tools"]] == ["always", "budget", "budget"]
    assert explain(catalog, "weather in Paris", config=small, max_tools=1)["tools"][1:] == [
        data["tools"][1]
    ]


APP = """
from langgraph_toolbudget import create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

graph = create_toolbudget_agent(DemoChatModel(), build_example_catalog(), max_tools=5)
"""


def test_cli_imports_from_the_current_directory_and_answers_bad_files_in_one_line(
    tmp_path, monkeypatch
) -> None:
    from click.testing import CliRunner
    from langgraph.checkpoint.sqlite import SqliteSaver

    from langgraph_toolbudget.cli import main

    module = f"cliapp_{tmp_path.name}"
    (tmp_path / f"{module}.py").write_text(APP, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in sys.path if p not in ("", str(tmp_path))])
    db = tmp_path / "threads.sqlite"
    target = ["--sqlite", str(db), "--graph", f"{module}:graph", "--thread", "t1"]
    runner = CliRunner()
    for args, expected in [
        (["tools", "--sqlite", "/etc/passwd", "--graph", f"{module}:graph", "--thread", "t"],
         "cannot read /etc/passwd as a SqliteSaver file"),
        (["explain", "x", "--catalog", "json:loads"], "calling it failed (TypeError"),
        (["tools", "exclude", *target], "name a --server, or a --tool"),
    ]:  # fmt: skip
        result = runner.invoke(main, args, env={"TOOLBUDGET_CATALOG": ""})
        assert result.exit_code == 1, (args, result.output)
        assert expected in result.output and len(result.output.strip().splitlines()) == 1
    app = importlib.import_module(module).graph  # the CLI put the cwd on the path, as python -m
    with SqliteSaver.from_conn_string(str(db)) as saver:
        app.compile(checkpointer=saver).invoke(
            {"messages": [("user", "weather in Paris?")]}, {"configurable": {"thread_id": "t1"}}
        )
    result = runner.invoke(main, ["tools", "exclude", "--tool", "get_weather", *target])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("excluded tool get_weather in thread t1: weather (3 of 4")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["tools", "exclude", "--server", "github", "--tool", ""], "--tool is empty"),
        (["tools", "include", "--server", "github", "--tool", "  "], "--tool is empty"),
        (["tools", "exclude", "--tool", ""], "--tool is empty"),
        (["tools", "exclude", "--server", ""], "--server is empty"),
        (["tools", "include", "--server", " ", "--tool", "create_issue"], "--server is empty"),
        (["tools", "mode", "always", "--server", "github", "--tool", ""], "--tool is empty"),
        (["tools", "mode", "manual", "--server", ""], "--server is empty"),
    ],
)
def test_cli_an_empty_tool_or_server_is_an_error_not_the_whole_server(
    tmp_path, monkeypatch, args: list[str], expected: str
) -> None:
    """``--tool "$TOOL"`` with an empty variable must not act on every tool of ``--server``."""
    from click.testing import CliRunner

    from langgraph_toolbudget.cli import main

    module = f"cliempty_{tmp_path.name}"
    (tmp_path / f"{module}.py").write_text(APP, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "threads.sqlite"
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = importlib.import_module(module).graph
    config: Any = {"configurable": {"thread_id": "t1"}}
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph.compile(checkpointer=saver).invoke({"messages": [("user", "list my issues")]}, config)
        before = graph.compile(checkpointer=saver).get_state(config).values
    target = ["--sqlite", str(db), "--graph", f"{module}:graph", "--thread", "t1"]
    result = CliRunner().invoke(main, [*args, *target])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"error: {expected}")
    assert len(result.output.strip().splitlines()) == 1
    with SqliteSaver.from_conn_string(str(db)) as saver:
        after = graph.compile(checkpointer=saver).get_state(config).values
    assert after == before, "nothing changed"
    assert not after.get("context_servers") and not after.get("context_server_modes")


async def test_excluded_tool_refused_under_ainvoke_and_included_one_runs() -> None:
    catalog = build_catalog(server_defaults={"files": {"include": "manual"}})
    values = _values(exclude_tools(tools=["get_weather"]), include_tools(tools=["read_file"]))
    calls = [
        ToolCall(name="get_weather", args={"city": "Lima"}, id="w"),
        ToolCall(name="read_file", args={"path": "README.md"}, id="r"),
    ]
    state = {"messages": [HumanMessage("x"), AIMessage("", tool_calls=calls)], **values}
    out = await ToolExecutor(catalog).ainvoke(state)
    weather, read = out["messages"]
    assert weather.status == "error" and "was excluded" in weather.content
    assert read.status == "success" and read.content == "# acme", "included manual tool runs"
    assert out["selected_tools"]["add"] == ["ask_human", "read_file"]


def test_tool_agent_loop_sees_an_include_at_its_next_iteration() -> None:
    from langgraph_toolbudget import ToolAgent

    catalog = build_catalog(server_defaults={"files": {"include": "manual"}})
    include = ToolCall(name="include_tool", args={"tool": "read_file"}, id="i")
    read = ToolCall(name="read_file", args={"path": "README.md"}, id="r")
    drop = ToolCall(name="exclude_tool", args={"tool": "read_file"}, id="x")
    again = ToolCall(name="read_file", args={"path": "README.md"}, id="r2")
    model = ScriptedChatModel(
        responses=[AIMessage("", tool_calls=[c]) for c in (include, read, drop, again)] + ["ok"]
    )
    config = BudgetConfig(enabled_builtins={"allow": ["*"]}, max_iterations=6)
    out = ToolAgent(model, catalog, config=config).invoke({"messages": [HumanMessage("read")]})
    results = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert "read_file" not in model.bound_tools[0] and "read_file" in model.bound_tools[1]
    assert results["r"].content == "# acme"
    assert "read_file" not in model.bound_tools[3]
    assert results["r2"].status == "error" and "was excluded" in results["r2"].content
    assert out["context_tools"] == {"read_file": "exclude"}


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
def test_tool_reasons_name_only_the_visible_tools_across_turns_and_catalog_changes(
    saver: str, tmp_path: Path
) -> None:
    """``tool_reasons`` says why each *visible* tool is visible: a tool that leaves, by an
    exclusion or a catalog that no longer lists it (redeployed with the tool disabled),
    takes its reason with it, so the checkpointed state stays small."""
    add = {"name": "add_tool", "args": {"tool_names": ["create_issue", "send_message"]}}
    exclude = {"name": "exclude_tool", "args": {"tool": "send_message"}}
    model = ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[{**add, "id": "a"}]),
            "added",
            AIMessage("", tool_calls=[{**exclude, "id": "x"}]),
            "excluded",
        ],
        cycle=False,
    )
    builtins = {"allow": ["*"]}
    config: Any = {"configurable": {"thread_id": "reasons"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "db.sqlite")) as sqlite:
        checkpointer = sqlite if saver == "sqlite" else InMemorySaver()
        app = create_toolbudget_agent(
            model, build_catalog(), max_tools=3, enabled_builtins=builtins
        ).compile(checkpointer=checkpointer)
        seen = []
        for text in ["what's the weather in Paris?", "and exclude slack"]:
            out = app.invoke({"messages": [HumanMessage(text)]}, config)
            assert set(out["tool_reasons"]) == set(out["selected_tools"])
            seen.append(set(out["selected_tools"]))
        assert "send_message" in seen[0] and "send_message" not in seen[1]
        assert "create_issue" in seen[1]
        # The app is redeployed with `create_issue` disabled: it leaves the visible set
        # without any node removing it, and its reason goes with it.
        disabled = build_catalog(tool_metadata={"create_issue": {"status": "disabled"}})
        later = create_toolbudget_agent(
            ScriptedChatModel(responses=["ok"]), disabled, max_tools=3, enabled_builtins=builtins
        ).compile(checkpointer=checkpointer)
        for text in ["and in Lima?", "and in Rome?"]:
            out = later.invoke({"messages": [HumanMessage(text)]}, config)
            assert "create_issue" not in out["selected_tools"]
            assert set(out["tool_reasons"]) == set(out["selected_tools"])
        stored = later.get_state(config).values
        assert set(stored["tool_reasons"]) == set(stored["selected_tools"])


@pytest.mark.parametrize("face", ["nodes", "middleware"])
def test_tool_reasons_follow_the_users_context_changes(face: str) -> None:
    """A tool the user includes while it is visible is explained as ``included`` from the
    next turn; once the inclusion is removed, a tool still visible says it is ``kept``
    (what it ``was``), never ``included``."""
    from langchain.agents import create_agent

    from langgraph_toolbudget import ToolBudgetMiddleware, update_context
    from langgraph_toolbudget.demo.model import DemoChatModel

    catalog = build_example_catalog()
    if face == "nodes":
        app = create_toolbudget_agent(DemoChatModel(), catalog).compile(
            checkpointer=InMemorySaver()
        )
    else:
        middleware = [ToolBudgetMiddleware(catalog)]
        app = create_agent(DemoChatModel(), middleware=middleware, checkpointer=InMemorySaver())

    def turn(thread: Any, text: str) -> dict[str, Any]:
        out = app.invoke({"messages": [HumanMessage(text)]}, thread)
        assert set(out["tool_reasons"]) == set(out["selected_tools"])
        return out

    a = {"configurable": {"thread_id": f"{face}-a"}}
    assert turn(a, "What's the weather in Paris?")["tool_reasons"]["get_weather"]["why"] == (
        "budget"
    )
    update_context(app, a, include_tools(tools=["get_weather"]))
    out = turn(a, "List my github issues")
    assert "weather" not in out["categories"] and "get_weather" in out["selected_tools"]
    assert out["tool_reasons"]["get_weather"] == {"why": "included"}

    b = {"configurable": {"thread_id": f"{face}-b"}}
    update_context(app, b, include_tools(tools=["create_issue"]))
    assert turn(b, "What's the weather in Paris?")["tool_reasons"]["create_issue"] == {
        "why": "included"
    }
    update_context(app, b, {"context_tools": {"create_issue": None}})
    out = turn(b, "And in Lima?")
    assert "create_issue" in out["selected_tools"], "nothing evicted it"
    assert out["tool_reasons"]["create_issue"] == {"why": "kept", "was": "included"}
    update_context(app, b, include_tools(tools=["create_issue"]))
    assert turn(b, "And in Rome?")["tool_reasons"]["create_issue"] == {"why": "included"}


def test_tool_reasons_follow_the_models_context_tools_in_the_same_turn() -> None:
    """The model includes a tool the budget had made visible, and hands an ``always`` tool
    (``ask_human``, a special category) to the budget: their reasons say so at once."""
    calls = [
        ToolCall(name="include_tool", args={"tool": "get_weather"}, id="i"),
        ToolCall(name="set_tool_include_mode", args={"tool": "ask_human", "mode": "agent"}, id="m"),
    ]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), "done"], cycle=False)
    config = BudgetConfig(enabled_builtins={"allow": ["*"]}, max_tools=4)
    graph = create_toolbudget_agent(model, build_catalog(), config=config).compile()
    question = {"messages": [HumanMessage("what's the weather in Paris?")]}
    states = list(graph.stream(question, stream_mode="values"))
    first = next(s["tool_reasons"] for s in states if s.get("tool_reasons"))
    out = states[-1]
    assert first["get_weather"]["why"] == "budget" and first["ask_human"] == {"why": "always"}
    assert out["tool_reasons"]["get_weather"] == {"why": "included"}
    assert out["tool_reasons"]["ask_human"] == {"why": "kept", "was": "always"}
    assert set(out["tool_reasons"]) == set(out["selected_tools"])


@pytest.mark.parametrize(
    ("allowed", "listers"),
    [
        (["include_tool", "list_tools"], ["list_tools"]),
        (["include_tool", "list_tool_servers"], ["list_tool_servers"]),
        (["include_tool"], []),
    ],
)
def test_a_too_long_name_is_answered_naming_only_the_listing_tools_the_model_has(
    allowed: list[str], listers: list[str]
) -> None:
    # Was: "use list_tools or list_tool_servers for the real names" with either turned off by
    # enabled_builtins; followed, the call was refused as "not a tool of this app".
    calls = [ToolCall(name="include_tool", args={"tool": "x" * 10_000}, id="long")]
    calls += [ToolCall(name=name, args={}, id=name) for name in listers]
    calls += [ToolCall(name="include_tool", args={"tool": "read_file"}, id="real")]
    model = ScriptedChatModel(
        responses=[AIMessage("", tool_calls=[c]) for c in calls] + ["done"], cycle=False
    )
    config = BudgetConfig(enabled_builtins={"allow": ["search_tools", *allowed]})
    out = (
        create_toolbudget_agent(model, build_catalog(), config=config)
        .compile()
        .invoke({"messages": [("user", "include it")]})
    )
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    refused = answers["long"].content
    assert answers["long"].status == "error" and "longer than any name here" in refused
    for name in ("list_tools", "list_tool_servers"):
        assert (name in refused) is (name in listers), refused
    if not listers:
        assert "send the exact name (at most" in refused
    real = {"list_tools": '"read_file"', "list_tool_servers": '"files"'}
    for name in listers:  # the advice works
        assert answers[name].status == "success" and real[name] in answers[name].content
    assert answers["real"].status == "success" and out["context_tools"] == {"read_file": "include"}
