"""The per-call pipeline: check -> coerce -> invoke -> normalise, and the hooks around it.

Tools are real ``@tool`` functions; the nodes run inside real LangGraph graphs
where LangGraph's runtime matters (injection).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Annotated, Any

import pytest
from agent_tools import (
    ai_calls,
    call,
    injection_tools,
    recording_fixtures,
)
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool, tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import InjectedState
from langgraph.types import Command

from langgraph_toolbudget import ToolBudgetState, ToolCatalog, ToolExecutor
from langgraph_toolbudget.execution.pipeline import ToolCallPipeline

APIS = ["invoke", "ainvoke"]


rec, catalog = recording_fixtures()


async def run(node: Any, state: Any, api: str) -> Any:
    return node.invoke(state) if api == "invoke" else await node.ainvoke(state)


def state_for(calls: list[dict[str, Any]], visible: list[str]) -> dict[str, Any]:
    return {"messages": [HumanMessage("go"), ai_calls(*calls)], "selected_tools": visible}


@pytest.mark.parametrize("api", APIS)
async def test_a_hook_sees_every_request_and_may_call_execute_again(catalog, rec, api):
    seen: list[tuple[str, Any]] = []

    def retry_on_error(request, execute):
        seen.append((request.tool_call["name"], request.tool.name if request.tool else None))
        result = execute(request)
        if result.status == "error":  # fix the arguments and run the stages again
            fixed = {**request.tool_call, "args": {"repo": "acme/app", "title": "retried"}}
            result = execute(request.override(tool_call=fixed))
        return result

    node = ToolExecutor(catalog, wrap_tool_call=retry_on_error)
    calls = [call("create_issue", "c1", repo="acme/app"), call("list_issues", "c2", repo="r")]
    out = await run(node, state_for(calls, ["create_issue", "list_issues"]), api)
    assert [m.tool_call_id for m in out["messages"]] == ["c1", "c2"]
    assert [m.status for m in out["messages"]] == ["success", "success"]
    assert seen == [("create_issue", "create_issue"), ("list_issues", "list_issues")]
    assert rec.names == ["create_issue", "list_issues"]  # the bad first attempt never ran
    assert "retried" in out["messages"][0].content


@pytest.mark.parametrize("api", APIS)
async def test_hooks_compose_outermost_first_and_async_hooks_serve_ainvoke(catalog, api):
    order: list[str] = []

    def outer(request, execute):
        order.append("outer")
        return execute(request)

    def inner(request, execute):
        order.append("inner")
        return execute(request)

    async def aouter(request, execute):
        order.append("aouter")
        return await execute(request)

    node = ToolExecutor(catalog, wrap_tool_call=[outer, inner], awrap_tool_call=aouter)
    out = await run(node, state_for([call("list_projects", "c1")], ["list_projects"]), api)
    assert out["messages"][0].status == "success"
    assert order == (["outer", "inner"] if api == "invoke" else ["aouter"])


@pytest.mark.parametrize("api", APIS)
async def test_a_hidden_tool_never_runs_even_when_a_hook_calls_execute(catalog, rec, api):
    def passthrough(request, execute):
        return execute(request)

    node = ToolExecutor(catalog, wrap_tool_call=passthrough)
    calls = [call("create_project", "c1", name="x"), call("ghost_tool", "c2")]
    out = await run(node, state_for(calls, []), api)
    assert [m.status for m in out["messages"]] == ["error", "error"]
    assert "exists but is not loaded" in out["messages"][0].content
    assert "is not a tool of this app" in out["messages"][1].content
    assert rec.names == []


@pytest.mark.parametrize("api", APIS)
async def test_a_hook_may_answer_a_call_itself(catalog, rec, api):
    def deny_writes(request, execute):
        if request.tool_call["name"].startswith("create_"):
            return ToolMessage(
                "writes are paused", tool_call_id=request.tool_call["id"], status="error"
            )
        return execute(request)

    node = ToolExecutor(catalog, wrap_tool_call=deny_writes)
    calls = [call("create_project", "c1", name="x"), call("list_projects", "c2")]
    out = await run(node, state_for(calls, ["create_project", "list_projects"]), api)
    assert [m.content for m in out["messages"]][0] == "writes are paused"
    assert rec.names == ["list_projects"]


def test_hooks_must_be_callables(catalog):
    with pytest.raises(TypeError, match="wrap_tool_call must be a callable"):
        ToolCallPipeline(catalog, wrap_tool_call=["not a hook"])  # type: ignore[list-item]


def injected_graph(seen: list[Any]) -> Any:
    catalog = ToolCatalog.from_tools(injection_tools(seen))
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog, enforce_visibility=False))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


@pytest.mark.parametrize("api", APIS)
async def test_an_injected_tool_with_a_bad_argument_gets_the_schema(api):
    """The injected path used to answer `tool '(tool)' failed` without the schema."""
    app = injected_graph([])
    payload = {"messages": [HumanMessage("go"), ai_calls(call("echo_call_id", "c1", txt=5))]}
    out = await run(app, payload, api)
    message = out["messages"][-1]
    assert message.status == "error" and message.name == "echo_call_id"
    assert "invalid arguments for tool 'echo_call_id'" in message.content
    assert '"text"' in message.content and "tool_call_id" not in message.content


@pytest.mark.parametrize("api", APIS)
async def test_injected_arguments_cannot_be_forged_by_the_model(api):
    seen: list[Any] = []
    app = injected_graph(seen)
    forged = call("count_messages", "c1", state={"messages": ["forged"] * 99})
    out = await run(app, {"messages": [HumanMessage("go"), ai_calls(forged)]}, api)
    assert out["messages"][-1].content == "2 messages"  # the real state, not the forged one


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_returning_a_list_of_messages_and_commands(api):
    @tool
    def fan_out(n: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> list[Any]:
        """Answer with a message and a command."""
        return [
            ToolMessage(f"n={n}", tool_call_id=tool_call_id),
            Command(update={"categories": ["x"]}),
        ]

    @tool
    def read_state(state: Annotated[dict, InjectedState]) -> str:
        """Read the state."""
        return str(len(state["messages"]))

    catalog = ToolCatalog.from_tools([fan_out, read_state])
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog, enforce_visibility=False))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    calls = [call("fan_out", "c1", n=3), call("read_state", "c2")]
    out = await run(app, {"messages": [HumanMessage("go"), ai_calls(*calls)]}, api)
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in answers] == [("c1", "n=3"), ("c2", "2")]
    assert out["categories"] == ["x"]


# --- where a call runs: timeouts with hooks, async-only tools, context, odd exceptions ---------


def _tool(name: str, **kind: Any) -> StructuredTool:
    return StructuredTool.from_function(name=name, description=f"Tool {name}.", **kind)


def _passthrough(request: Any, execute: Any) -> Any:
    return execute(request)


@pytest.mark.parametrize("api", APIS)
async def test_a_timeout_bounds_a_call_under_sync_hooks_too(api):
    release, ended = threading.Event(), threading.Event()

    def stuck(x: int = 0) -> str:
        release.wait(10)
        ended.set()
        return "late"

    catalog = ToolCatalog.from_tools(
        [_tool("stuck", func=stuck)], tool_metadata={"stuck": {"timeout_s": 1.0}}
    )
    node = ToolExecutor(catalog, wrap_tool_call=_passthrough, enforce_visibility=False)
    try:  # 1 s: on a loaded machine the call's thread may start after a shorter batch deadline
        out = await run(node, state_for([call("stuck", "c1")], []), api)
        (message,) = out["messages"]
        assert not ended.is_set()  # answered while the tool still runs
        assert message.status == "error" and "timed out after 1 s" in message.content
    finally:
        release.set()


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("timeout_s", [None, 30.0], ids=["untimed", "timed"])
async def test_a_tools_own_cancelled_error_is_raised_under_both_apis(api, timeout_s):
    """An async tool raising its own ``CancelledError`` (a library's inner task cancelled)
    under sync ``invoke`` ended the call's task on the background loop as cancelled, which
    never woke the waiting thread: ``invoke`` hung. Both APIs raise it, with its message."""

    async def flaky(x: int = 0) -> str:
        raise asyncio.CancelledError("the client's task was cancelled")

    catalog = ToolCatalog.from_tools(
        [_tool("flaky", coroutine=flaky)], tool_metadata={"flaky": {"timeout_s": timeout_s}}
    )
    node = ToolExecutor(catalog, enforce_visibility=False)
    state = state_for([call("flaky", "c1")], [])
    outcome: list[BaseException] = []

    def invoke() -> None:
        try:
            node.invoke(state)
        except asyncio.CancelledError as exc:
            outcome.append(exc)

    if api == "invoke":
        thread = threading.Thread(target=invoke, daemon=True)  # a hang leaves it behind
        thread.start()
        thread.join(10)
        assert outcome, "invoke still running after 10 s"
    else:
        with pytest.raises(asyncio.CancelledError) as raised:
            await node.ainvoke(state)
        outcome.append(raised.value)
    assert "the client's task was cancelled" in str(outcome[0])


@pytest.mark.parametrize("hooks", [None, _passthrough], ids=["no-hook", "sync-hook"])
def test_an_async_only_tool_runs_under_invoke(hooks):
    async def fetch(x: int = 0) -> str:
        await asyncio.sleep(0)
        return f"fetched {x}"

    catalog = ToolCatalog.from_tools([_tool("fetch", coroutine=fetch)])
    node = ToolExecutor(catalog, wrap_tool_call=hooks, enforce_visibility=False)
    calls = [call("fetch", "c1", x=1), call("fetch", "c2", x=2)]
    out = node.invoke(state_for(calls, []))
    assert [m.content for m in out["messages"]] == ["fetched 1", "fetched 2"]


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="unset")


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("timeout", [None, 5.0], ids=["untimed", "timed"])
@pytest.mark.parametrize("pure", [False, True], ids=["impure", "pure"])
async def test_sync_tools_see_the_callers_context_variables(api, timeout, pure):
    def whose(x: int = 0) -> str:
        return f"{REQUEST_ID.get()} {x}"

    meta = {"is_pure": pure, **({"timeout_s": timeout} if timeout else {})}
    catalog = ToolCatalog.from_tools([_tool("whose", func=whose)], tool_metadata={"whose": meta})
    node = ToolExecutor(catalog, enforce_visibility=False)
    token = REQUEST_ID.set("request-7")
    try:
        calls = [call("whose", "c1", x=1), call("whose", "c2", x=2)]
        out = await run(node, state_for(calls, []), api)
    finally:
        REQUEST_ID.reset(token)
    assert [m.content for m in out["messages"]] == ["request-7 1", "request-7 2"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", ["sequential", "parallel_safe"])
async def test_a_sync_tool_raising_stop_iteration_is_answered(api, mode):
    def exhausted(x: int = 0) -> str:
        raise StopIteration

    def fine(x: int = 0) -> str:
        return "fine"

    pure = {"is_pure": True}
    catalog = ToolCatalog.from_tools(
        [_tool("exhausted", func=exhausted), _tool("fine", func=fine)],
        tool_metadata={"exhausted": pure, "fine": pure},
    )
    node = ToolExecutor(catalog, mode=mode, enforce_visibility=False)
    calls = [call("exhausted", "c1"), call("fine", "c2")]
    out = await asyncio.wait_for(run(node, state_for(calls, []), api), 10)
    first, second = out["messages"]
    assert first.status == "error" and "exhausted" in first.content
    assert second.content == "fine"
