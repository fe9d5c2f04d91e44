"""The model's tool-context answers are bounded, as ``show_all_tools``' is.

A built-in's answer is never offloaded and stays in the thread for every later model call:
``list_tools`` answered the whole catalog (800 KB at 5,000 tools; review 47c), and
``get_tool_server`` every tool of a server (425 KB at 3,000), ``list_context_tools`` and
``list_tool_servers`` every row, a write operation a context summary naming every tool in
context. Each answer is now cut at ``MAX_LISTING_CHARS`` with the totals and how to narrow it;
the CLI still gets the whole answer (the MCP context server cuts its own by default:
``tests/test_context_server.py``).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from langgraph_toolbudget import ToolCatalog, ToolExecutor, create_toolbudget_agent
from langgraph_toolbudget.core.context_commands import apply_update, run_command
from langgraph_toolbudget.core.context_ops import list_tools
from langgraph_toolbudget.core.meta import MAX_LISTING_CHARS
from langgraph_toolbudget.testing import ScriptedChatModel

SERVERS = {"big": 400, "small": 20}


def _tools() -> list[BaseTool]:
    def run(**kwargs: Any) -> str:
        return "ok"

    return [
        StructuredTool.from_function(
            run,
            name=f"{server}_action_number_{i}",
            description=f"Action {i} of the {server} server.",
            metadata={"server": server},
        )
        for server, count in SERVERS.items()
        for i in range(count)
    ]


CATALOG = ToolCatalog.from_tools(_tools())
TOTAL = sum(SERVERS.values())


def _answer(args: dict[str, Any]) -> ToolMessage:
    executor = ToolExecutor(CATALOG, enabled_builtins={"allow": ["*"]})
    call = {"name": "list_tools", "args": args, "id": "c1", "type": "tool_call"}
    out = executor.invoke([call])
    (message,) = out["messages"] if isinstance(out, dict) else out
    assert message.status != "error", message.content
    return message


def _names(rows: list[dict[str, Any]]) -> list[str]:
    return [r["name"] for r in rows]


def test_list_tools_is_cut_at_the_listing_bound_with_the_total_and_how_to_narrow() -> None:
    message = _answer({})
    assert len(message.content) <= MAX_LISTING_CHARS
    data = json.loads(message.content)
    assert message.artifact == data  # the artifact is the answer, cut too
    shown = len(data["tools"])
    whole = list_tools(CATALOG, {})
    assert data["total"] == TOTAL and 0 < shown < TOTAL
    assert _names(data["tools"]) == _names(whole)[:shown]  # the first rows, in catalog order
    one_more = {**data, "tools": [*data["tools"], whole[shown]]}
    assert len(json.dumps(one_more)) > MAX_LISTING_CHARS  # as many as fit
    message_text = data["message"]
    assert message_text.startswith(f"{TOTAL - shown:,} more tools are not listed here")
    assert f"cut at {MAX_LISTING_CHARS:,} characters" in message_text
    assert "list_tools(server=...)" in message_text and "list_tool_servers" in message_text


def test_a_list_that_fits_is_answered_as_before() -> None:
    message = _answer({"server": "small"})
    rows = json.loads(message.content)
    assert isinstance(rows, list) and message.artifact == rows
    assert _names(rows) == _names(list_tools(CATALOG, {}, server="small"))
    assert len(rows) == SERVERS["small"]


def test_a_servers_cut_list_names_the_server_and_no_server_filter() -> None:
    data = json.loads(_answer({"server": "big"}).content)
    shown = len(data["tools"])
    assert data["total"] == SERVERS["big"] and {r["server"] for r in data["tools"]} == {"big"}
    assert data["message"].startswith(
        f"{SERVERS['big'] - shown:,} more tools of server 'big' are not listed here"
    )
    assert "get_tool(tool=...)" in data["message"]
    assert "list_tools(server=" not in data["message"]
    assert "list_tool_servers" not in data["message"]


def test_the_cut_list_advises_only_the_tools_the_caller_has() -> None:
    only = run_command(CATALOG, {}, "list_tools", {}, tools={"list_tools"}, max_chars=5_000)
    assert len(json.dumps(only.data)) <= 5_000
    assert only.data["message"].endswith(
        "To narrow it: list_tools(server=...) lists one server's tools."
    )
    bare = run_command(CATALOG, {}, "list_tools", {}, tools=set(), max_chars=5_000)
    assert bare.data["message"].endswith(f"(the list is cut at {5_000:,} characters).")
    # a bound too small for one row: the total and the note, no rows
    tiny = run_command(CATALOG, {}, "list_tools", {}, tools=set(), max_chars=10)
    assert tiny.data["tools"] == [] and tiny.data["total"] == TOTAL


def test_the_users_faces_get_the_whole_list() -> None:
    result = run_command(CATALOG, {}, "list_tools", {}, by_user=True)
    assert _names(result.data) == _names(list_tools(CATALOG, {}))
    assert len(result.data) == TOTAL


def test_later_model_calls_carry_the_cut_answer_not_the_catalog() -> None:
    def reply(messages: list[Any], bound: Any) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("done")
        return AIMessage("", tool_calls=[{"name": "list_tools", "args": {}, "id": "c1"}])

    model = ScriptedChatModel(responses=[reply])
    graph = create_toolbudget_agent(model, CATALOG, enabled_builtins={"allow": ["*"]}).compile()
    out = graph.invoke({"messages": [HumanMessage("list the tools")]})
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert json.loads(answer.content)["total"] == TOTAL
    carried = sum(len(str(m.content)) for m in model.calls[-1])
    assert carried < MAX_LISTING_CHARS + 10_000  # the whole list is 70,000 characters
    assert len(json.dumps(list_tools(CATALOG, {}))) > 3 * MAX_LISTING_CHARS


def _big_always() -> dict[str, Any]:
    """A thread's values after the user set every tool of server ``big`` to ``always``."""
    args = {"server": "big", "mode": "always"}
    result = run_command(CATALOG, {}, "set_server_include_mode", args, by_user=True)
    return dict(apply_update({}, result.update or {}))


def test_get_tool_server_is_cut_with_the_servers_row_and_how_to_narrow() -> None:
    executor = ToolExecutor(CATALOG, enabled_builtins={"allow": ["*"]})
    call = {"name": "get_tool_server", "args": {"server": "big"}, "id": "c1", "type": "tool_call"}
    out = executor.invoke([call])
    (message,) = out["messages"] if isinstance(out, dict) else out
    assert len(message.content) <= MAX_LISTING_CHARS  # was 68,000 characters
    data = json.loads(message.content)
    assert data["name"] == "big" and data["tools"] == SERVERS["big"]
    shown = len(data["tool_rows"])
    assert 0 < shown < SERVERS["big"]
    assert _names(data["tool_rows"]) == _names(list_tools(CATALOG, {}, server="big"))[:shown]
    assert data["message"].startswith(
        f"{SERVERS['big'] - shown:,} more tools of server 'big' are not listed here"
    )
    assert "get_tool(tool=...)" in data["message"]
    whole = run_command(CATALOG, {}, "get_tool_server", {"server": "big"}, by_user=True)
    assert len(whole.data["tool_rows"]) == SERVERS["big"]  # the user's faces: every tool


def test_list_context_tools_is_cut_when_a_server_is_always_in_context() -> None:
    values = _big_always()
    result = run_command(CATALOG, values, "list_context_tools", {}, max_chars=5_000)
    assert len(json.dumps(result.data)) <= 5_000
    shown = len(result.data["tools"])
    assert result.data["total"] == SERVERS["big"] and 0 < shown < SERVERS["big"]
    assert all(r["in_context"] for r in result.data["tools"])
    assert "list_tool_servers" in result.data["message"]
    fits = run_command(CATALOG, {}, "list_context_tools", {}, max_chars=5_000)
    assert isinstance(fits.data, list)  # nothing in context yet: as before


def test_a_write_operations_summary_leaves_out_the_names_when_too_long() -> None:
    args = {"server": "big", "mode": "always"}
    result = run_command(CATALOG, {}, "set_server_include_mode", args, max_chars=5_000)
    assert len(json.dumps(result.data)) <= 5_000
    context = result.data["context"]
    assert context["in_context"] >= SERVERS["big"] and context["total"] == TOTAL
    big = next(row for row in context["servers"] if row["name"] == "big")
    assert big["mode"] == "always" and big["summary"] == f"(all {SERVERS['big']} tools)"
    assert "tool_names" not in big and "text" not in context
    assert context["message"] == (
        "The names of the tools in context are left out (the answer is cut at 5,000 "
        "characters). To see them: list_context_tools lists the tools in context; "
        "get_tool_server(server=...) lists one server's tools."
    )
    assert result.update  # the change itself is made
    whole = run_command(CATALOG, {}, "set_server_include_mode", args, by_user=True)
    assert len(whole.data["context"]["servers"][0]["tool_names"]) == SERVERS["big"]


MANY = ToolCatalog.from_tools(
    [
        StructuredTool.from_function(
            lambda: "ok", name=f"tool_{i}", description=f"Tool {i}.", metadata={"server": f"s{i}"}
        )
        for i in range(300)
    ]
)


def test_list_tool_servers_and_a_summary_of_many_servers_are_cut() -> None:
    listed = run_command(MANY, {}, "list_tool_servers", {}, max_chars=5_000)
    assert len(json.dumps(listed.data)) <= 5_000
    shown = len(listed.data["servers"])
    assert listed.data["total"] == 300 and 0 < shown < 300
    assert listed.data["message"].startswith(f"{300 - shown:,} more servers are not listed")
    # the server it changed first, though last in the catalog; no tool is in context, so
    # no names are left out: the note says only what is
    args = {"server": "s299"}
    written = run_command(MANY, {}, "exclude_tool_server", args, max_chars=5_000)
    assert len(json.dumps(written.data)) <= 5_000
    rows = written.data["context"]["servers"]
    assert 0 < len(rows) < 300 and rows[0]["name"] == "s299" and rows[0]["context"] == "exclude"
    assert written.data["context"]["message"] == (
        f"{300 - len(rows):,} more servers are not listed (the answer is cut at 5,000 "
        "characters). To see them: list_tool_servers names the servers and counts their tools."
    )


def test_one_tool_left_out_is_said_in_the_singular() -> None:
    args = {"server": "small"}
    whole = json.dumps(run_command(CATALOG, {}, "list_tools", args).data)
    for bound in range(len(whole) - 1, 0, -1):
        data = run_command(CATALOG, {}, "list_tools", args, tools=set(), max_chars=bound).data
        if data["total"] - len(data["tools"]) == 1:
            break
    assert data["message"].startswith("1 more tool of server 'small' is not listed here")


def test_a_bound_below_the_note_gets_the_whole_answer_when_it_is_shorter() -> None:
    one = ToolCatalog.from_tools(_tools()[:1])
    whole = run_command(one, {}, "list_tool_servers", {}).data
    for bound in (1, 50, 100):
        answer = run_command(one, {}, "list_tool_servers", {}, max_chars=bound).data
        assert len(json.dumps(answer)) <= len(json.dumps(whole)), (bound, answer)
