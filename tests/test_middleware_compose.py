"""ToolBudgetMiddleware composed with LangChain's own middleware, in both orders.

Only the chat models are fake (``ScriptedChatModel``); the tools are real ``@tool``
functions that record each execution, the agents real ``create_agent`` graphs, and every
other middleware LangChain's own (or written as LangChain documents it).
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest
from agent_tools import APOLLO_QUERY, ai_calls, call, recording_fixtures, tool_messages
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    LLMToolEmulator,
    LLMToolSelectorMiddleware,
    SummarizationMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
)
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_toolbudget import ToolBudgetMiddleware, ToolCatalog, create_toolbudget_agent
from langgraph_toolbudget.execution.errors import TOOLNODE_DEFAULT
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]

rec, catalog = recording_fixtures()


async def run(app: Any, payload: Any, api: str, config: dict | None = None) -> dict[str, Any]:
    if api == "invoke":
        return app.invoke(payload, config)
    return await app.ainvoke(payload, config)


# --- a filter of request.tools listed before the budget: a restriction it keeps -------------


class NoListingOrLoading(AgentMiddleware):
    """A per-role filter as LangChain documents it: narrows ``request.tools``."""

    @staticmethod
    def _narrowed(request: Any) -> Any:
        tools = [t for t in request.tools if t.name not in {"list_projects", "add_tool"}]
        return request.override(tools=tools)

    def wrap_model_call(self, request, handler):
        return handler(self._narrowed(request))

    async def awrap_model_call(self, request, handler):
        return await handler(self._narrowed(request))


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_a_filter_listed_before_the_budget_removed_stays_unbound(catalog, rec, api):
    def script() -> list[Any]:
        return [
            ai_calls(call("add_task", "c1", project="apollo", title="Blocker")),
            AIMessage("done"),
        ]

    alone = ScriptedChatModel(responses=script(), cycle=False)
    query = {"messages": [HumanMessage(APOLLO_QUERY)]}
    await run(
        create_agent(alone, middleware=[ToolBudgetMiddleware(catalog, max_tools=3)]), query, api
    )
    assert {"list_projects", "add_tool", "add_task"} <= set(alone.bound_tools[0])

    for middleware in (
        [NoListingOrLoading(), ToolBudgetMiddleware(catalog, max_tools=3)],  # a restriction
        [ToolBudgetMiddleware(catalog, max_tools=3), NoListingOrLoading()],  # narrows its set
    ):
        model = ScriptedChatModel(responses=script(), cycle=False)
        out = await run(create_agent(model, middleware=middleware), query, api)
        expected = [n for n in alone.bound_tools[0] if n not in {"list_projects", "add_tool"}]
        assert model.bound_tools == [expected, expected]  # both calls of the turn
        assert tool_messages(out["messages"])[0].content == "task 'Blocker' added to apollo"


@pytest.mark.parametrize("api", APIS)
async def test_llm_tool_selector_listed_before_the_budget_keeps_its_choice(catalog, api):
    choice = ai_calls(call("ToolSelectionResponse", "s", tools=["create_project"]))
    selector = LLMToolSelectorMiddleware(
        model=ScriptedChatModel(responses=[choice]), always_include=["search_tools"]
    )
    model = ScriptedChatModel(responses=[AIMessage("done")], cycle=False)
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    await run(create_agent(model, middleware=[selector, budget]), {"messages": [APOLLO_QUERY]}, api)
    assert model.bound_tools == [["search_tools", "create_project"]]


# --- a tool a middleware listed before the budget rewrote: bound as rewritten ---------------

BOUND: list[list[Any]] = []


class ChatAnthropic(ScriptedChatModel):
    """Named as LangChain infers a provider (ProviderToolSearchMiddleware); records the tools
    it is bound, provider tools (dicts) included."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        BOUND.append(list(tools))
        return super().bind_tools([t for t in tools if not isinstance(t, dict)], **kwargs)


class Reworded(AgentMiddleware):
    """Puts its own version of ``add_task`` (another description) in ``request.tools``."""

    @staticmethod
    def _reworded(request: Any) -> Any:
        tools = [
            t.model_copy(update={"description": "Add a task (reworded)."})
            if not isinstance(t, dict) and t.name == "add_task"
            else t
            for t in request.tools
        ]
        return request.override(tools=tools)

    def wrap_model_call(self, request, handler):
        return handler(self._reworded(request))

    async def awrap_model_call(self, request, handler):
        return await handler(self._reworded(request))


def _bound(middleware: list[Any], api: str) -> Any:
    BOUND.clear()
    model = ChatAnthropic(responses=[AIMessage("done")], cycle=False)
    return run(create_agent(model, middleware=middleware), {"messages": [APOLLO_QUERY]}, api)


class DocumentedArguments(AgentMiddleware):
    """Puts a version of ``add_task`` whose arguments have descriptions in the request."""

    @staticmethod
    def _documented(request: Any) -> Any:
        tools = []
        for t in request.tools:
            if not isinstance(t, dict) and t.name == "add_task":
                schema = t.tool_call_schema.model_json_schema()
                for prop in schema["properties"].values():
                    prop["description"] = "documented for the model"
                t = t.model_copy(update={"args_schema": schema})
            tools.append(t)
        return request.override(tools=tools)

    def wrap_model_call(self, request, handler):
        return handler(self._documented(request))

    async def awrap_model_call(self, request, handler):
        return await handler(self._documented(request))


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_a_middleware_listed_before_the_budget_rewrote_is_bound_as_rewritten(
    catalog, api
):
    # The budget bound its own catalog object under the name, dropping the rewrite.
    await _bound([Reworded(), ToolBudgetMiddleware(catalog, max_tools=3)], api)
    (tools,) = BOUND
    (task,) = [t for t in tools if not isinstance(t, dict) and t.name == "add_task"]
    assert task.description == "Add a task (reworded)."
    # ... its arguments' wording too (a version: the same names, types and defaults)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "another tool named ..." warning
        await _bound([DocumentedArguments(), ToolBudgetMiddleware(catalog, max_tools=3)], api)
    (task,) = [t for t in BOUND[0] if not isinstance(t, dict) and t.name == "add_task"]
    assert all(p.get("description") == "documented for the model" for p in task.args.values())


@tool("search_tools")
def app_search(q: str) -> str:
    """Search the app's documents."""
    return "never runs"


@pytest.mark.parametrize("api", APIS)
async def test_another_tool_under_one_of_the_budgets_names_is_not_bound_in_its_place(catalog, api):
    # The app's own `search_tools` (other arguments) was bound, while the budget's meta-tool
    # answered the model's calls of that name.
    BOUND.clear()
    model = ChatAnthropic(responses=[AIMessage("done")], cycle=False)
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    agent = create_agent(model, tools=[app_search], middleware=[budget])
    with pytest.warns(UserWarning, match=r"another tool named 'search_tools' \(other arguments\)"):
        await run(agent, {"messages": [APOLLO_QUERY]}, api)
    (bound,) = [t for t in BOUND[0] if not isinstance(t, dict) and t.name == "search_tools"]
    assert bound is budget.tools[[t.name for t in budget.tools].index("search_tools")]


class SwappedInPlace(AgentMiddleware):
    """Keeps one list and swaps its version of ``add_task`` in it for each call."""

    def __init__(self) -> None:
        super().__init__()
        self.tools_list: list[Any] | None = None
        self.calls = 0

    def _swapped(self, request: Any) -> Any:
        self.calls += 1
        if self.tools_list is None:
            self.tools_list = list(request.tools)
        for i, t in enumerate(self.tools_list):
            if not isinstance(t, dict) and t.name == "add_task":
                text = f"Add a task (version {self.calls})."
                self.tools_list[i] = t.model_copy(update={"description": text})
        return request.override(tools=self.tools_list)

    def wrap_model_call(self, request, handler):
        return handler(self._swapped(request))

    async def awrap_model_call(self, request, handler):
        return await handler(self._swapped(request))


@pytest.mark.parametrize("api", APIS)
async def test_a_version_swapped_in_place_in_the_same_list_is_bound_each_call(catalog, api):
    # The split of request.tools was cached by the list's identity and length: the second
    # call bound the first call's version.
    swapping, budget = SwappedInPlace(), ToolBudgetMiddleware(catalog, max_tools=3)
    for turn in (1, 2):
        BOUND.clear()
        model = ChatAnthropic(responses=[AIMessage("done")], cycle=False)
        await run(
            create_agent(model, middleware=[swapping, budget]), {"messages": [APOLLO_QUERY]}, api
        )
        (task,) = [t for t in BOUND[0] if not isinstance(t, dict) and t.name == "add_task"]
        assert task.description == f"Add a task (version {turn}).", turn


@pytest.mark.parametrize("api", APIS)
async def test_provider_tool_search_listed_before_the_budget_defers_among_the_visible_tools(
    catalog, api
):
    middleware = pytest.importorskip("langchain.agents.middleware")
    if not hasattr(middleware, "ProviderToolSearchMiddleware"):
        pytest.skip("ProviderToolSearchMiddleware is LangChain 1.4's")
    search = middleware.ProviderToolSearchMiddleware(searchable_tools=["add_task"])
    await _bound([search, ToolBudgetMiddleware(catalog, max_tools=3)], api)
    (tools,) = BOUND
    ours = {t.name: t for t in tools if not isinstance(t, dict)}
    assert (ours["add_task"].extras or {}).get("defer_loading") is True  # it was dropped
    assert not (ours["list_projects"].extras or {}).get("defer_loading")
    assert [t for t in tools if isinstance(t, dict)]  # the provider's search tool


# --- a tool registered at runtime by a middleware listed after the budget -------------------


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return "4"


class RuntimeTools(AgentMiddleware):
    """LangChain's pattern for a tool registered at runtime: added to the model request in
    ``wrap_model_call``, supplied in ``wrap_tool_call``. Records the calls it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[str] = []

    def _supplied(self, request: Any) -> Any:
        self.handed.append(request.tool_call["name"])
        if request.tool_call["name"] == "calculator":
            return request.override(tool=calculator)
        return request

    def wrap_model_call(self, request, handler):
        return handler(request.override(tools=[*request.tools, calculator]))

    async def awrap_model_call(self, request, handler):
        return await handler(request.override(tools=[*request.tools, calculator]))

    def wrap_tool_call(self, request, handler):
        return handler(self._supplied(request))

    async def awrap_tool_call(self, request, handler):
        return await handler(self._supplied(request))


class Calculating(AgentMiddleware):
    """A middleware with a tool of its own, registered with the agent (as TodoList's)."""

    tools = [calculator]


@pytest.mark.parametrize("api", APIS)
async def test_add_tool_tells_the_model_another_middlewares_tool_is_called_directly(catalog, api):
    # It answered "not tools of this app" and offered the closest catalog tool instead. The
    # answer does not say which tools the thread has (another thread's may differ): only that
    # a tool given apart from the budget needs no add_tool.
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("add_tool", "a1", tool_names=["calculator", "list_projects"])),
            AIMessage("done"),
        ],
        cycle=False,
    )
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    out = await run(
        create_agent(model, middleware=[Calculating(), budget]), {"messages": [APOLLO_QUERY]}, api
    )
    (answer,) = tool_messages(out["messages"])
    assert "Already available: list_projects." in answer.content
    assert "Not added (not tools that add_tool loads" in answer.content
    assert "apart from these, such as another middleware's, needs no add_tool" in answer.content
    assert "not tools of this app" not in answer.content
    assert "calculator" in model.bound_tools[1]


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_an_inner_middleware_supplies_runs_and_catalog_refusals_never_reach_it(
    catalog, rec, api
):
    model = ScriptedChatModel(
        responses=[
            ai_calls(
                call("calculator", "c1", expression="2+2"),
                call("crate_project", "u1", name="x"),  # nobody supplies it
                call("merge_pull_request", "h1", repo="r", number=1),  # hidden
                call("admin_shutdown", "f1", reason="x"),  # filtered
                call("purge_database", "d1", confirm=True),  # disabled
            ),
            AIMessage("done"),
        ],
        cycle=False,
    )
    runtime = RuntimeTools()
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    agent = create_agent(model, middleware=[budget, runtime])
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    answers = {m.tool_call_id: m for m in tool_messages(out["messages"])}
    assert "calculator" in model.bound_tools[0]
    assert answers["c1"].content == "4" and answers["c1"].status == "success"
    # the package's unknown-tool error (closest names), not the tool node's list of every tool
    assert answers["u1"].status == "error"
    assert "Closest tools: create_project" in answers["u1"].content
    assert "is not a valid tool" not in answers["u1"].content
    assert "add_tool(tool_names=['merge_pull_request'])" in answers["h1"].content
    assert "filtered out" in answers["f1"].content and "disabled" in answers["d1"].content
    assert sorted(runtime.handed) == ["calculator", "crate_project"]  # never a catalog refusal
    assert rec.runs == []


@pytest.mark.parametrize("api", APIS)
async def test_an_emulator_listed_after_the_budget_never_answers_a_refused_or_builtin_call(
    catalog, rec, api
):
    # docs/middleware.md: listed after the budget, a wrap_tool_call middleware sees only the
    # calls the budget lets through; built-in calls are answered before any such hook.
    emulating = ScriptedChatModel(responses=[AIMessage("EMULATED")])
    model = ScriptedChatModel(
        responses=[
            ai_calls(
                call("merge_pull_request", "h1", repo="r", number=1),  # hidden
                call("add_tool", "a1", tool_names=["list_projects"]),
            ),
            AIMessage("done"),
        ],
        cycle=False,
    )
    emulator = LLMToolEmulator(tools=["merge_pull_request", "add_tool"], model=emulating)
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, max_tools=3), emulator])
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api)
    answers = {m.tool_call_id: m.content for m in tool_messages(out["messages"])}
    assert "add_tool(tool_names=['merge_pull_request'])" in answers["h1"]
    assert "list_projects" in answers["a1"] and "EMULATED" not in answers["a1"]
    assert emulating.calls == [] and rec.runs == []


# --- a tool's exception: answered by the budget, or raised to the middleware before it -------


def _flaky_catalog(attempts: list[str]) -> ToolCatalog:
    @tool
    def flaky_weather(city: str) -> str:
        """Get the current weather for a city (the service drops the first two requests)."""
        attempts.append(city)
        if len(attempts) < 3:
            raise ConnectionError("temporary outage")
        return f"sunny in {city}"

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email message to a recipient."""
        return f"sent to {to}"

    return ToolCatalog.from_tools(
        [flaky_weather, send_email], {"weather": ["flaky_weather"], "email": ["send_email"]}
    )


async def _retried(api: str, **options: Any) -> tuple[list[str], list[Any]]:
    """A flaky tool's call under ``[ToolRetryMiddleware, budget]``: its attempts, the answers."""
    attempts: list[str] = []
    budget = ToolBudgetMiddleware(_flaky_catalog(attempts), max_tools=2, **options)
    model = ScriptedChatModel(
        responses=[ai_calls(call("flaky_weather", "c1", city="Paris")), AIMessage("done")],
        cycle=False,
    )
    retry = ToolRetryMiddleware(
        max_retries=3, initial_delay=0.0, jitter=False, retry_on=(ConnectionError,)
    )
    agent = create_agent(model, middleware=[retry, budget])
    out = await run(agent, {"messages": [HumanMessage("weather in Paris")]}, api)
    return attempts, tool_messages(out["messages"])


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("handle", [False, TOOLNODE_DEFAULT, ValueError])
async def test_tool_retry_listed_before_the_budget_retries_when_errors_are_raised(api, handle):
    attempts, answers = await _retried(api, handle_tool_errors=handle)
    assert attempts == ["Paris"] * 3
    assert [m.content for m in answers] == ["sunny in Paris"]


@pytest.mark.parametrize("api", APIS)
async def test_by_default_the_budget_answers_a_tools_exception_with_an_explained_error(api):
    attempts, (answer,) = await _retried(api)
    assert attempts == ["Paris"]  # answered, so the retry listed before it sees no exception
    assert answer.status == "error"
    assert answer.content.startswith(
        "Error: tool 'flaky_weather' failed: ConnectionError: temporary outage"
    )


@pytest.mark.parametrize("api", APIS)
async def test_handle_tool_errors_true_answers_with_toolnodes_wording(api):
    attempts, (answer,) = await _retried(api, handle_tool_errors=True)
    assert attempts == ["Paris"]
    assert answer.status == "error"
    assert (
        answer.content == "Error: ConnectionError('temporary outage')\n Please fix your mistakes."
    )


# --- calls of one reply that share an id ------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_calls_sharing_an_id_with_a_builtin_call_are_all_answered_like_the_nodes(
    catalog, rec, api
):
    def script() -> list[Any]:
        return [
            ai_calls(
                call("add_tool", "call_0", tool_names=["create_issue"]),
                call("list_projects", "call_0"),
                call("add_task", "call_0", project="apollo", title="Blocker"),
            ),
            AIMessage("done"),
        ]

    query = {"messages": [HumanMessage(APOLLO_QUERY)]}
    model = ScriptedChatModel(responses=script(), cycle=False)
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    out = await run(create_agent(model, middleware=[budget]), query, api)
    nodes = create_toolbudget_agent(ScriptedChatModel(responses=script(), cycle=False), catalog)
    expected = await run(nodes.compile(), query, api)
    answers = tool_messages(out["messages"])
    assert sorted(m.name for m in answers) == ["add_task", "add_tool", "list_projects"]
    assert sorted(m.name for m in tool_messages(expected["messages"])) == sorted(
        m.name for m in answers
    )
    # the reply's later calls got their own ids, each answered once
    (reply,) = [m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    ids = [c["id"] for c in reply.tool_calls]
    assert ids[0] == "call_0" and len(set(ids)) == 3
    assert sorted(m.tool_call_id for m in answers) == sorted(ids)
    assert sorted(rec.names) == ["add_task", "add_task", "list_projects", "list_projects"]


# --- a middleware that answers calls in after_model, listed before the budget ----------------


def _adds_a_tool() -> ScriptedChatModel:
    return ScriptedChatModel(
        responses=[
            ai_calls(
                call("add_tool", "a1", tool_names=["create_issue"]),
                call("list_projects", "r1"),
            ),
            AIMessage("done"),
        ],
        cycle=False,
    )


@pytest.mark.parametrize("api", APIS)
async def test_a_reviewer_listed_before_the_budget_that_rejects_a_builtin_call_is_refused(
    catalog, api
):
    review = HumanInTheLoopMiddleware(interrupt_on={"add_tool": True})
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    agent = create_agent(_adds_a_tool(), middleware=[review, budget], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    paused = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api, config)
    assert [m.tool_call_id for m in tool_messages(paused["messages"])] == ["a1"]  # answered
    decision = {"type": "reject", "message": "No new tools."}
    with pytest.raises(RuntimeError, match="List that middleware after the budget") as caught:
        await run(agent, Command(resume={"decisions": [decision]}), api, config)
    assert "'add_tool' (id 'a1') has 2 answers" in str(caught.value)


@pytest.mark.parametrize("api", APIS)
async def test_a_call_limit_listed_before_the_budget_that_ends_the_run_is_refused_next_turn(
    catalog, api
):
    limit = ToolCallLimitMiddleware(run_limit=1, exit_behavior="end")
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    model = _adds_a_tool()
    agent = create_agent(model, middleware=[limit, budget], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api, config)
    answers = [m.tool_call_id for m in tool_messages(out["messages"])].count("a1")
    if answers == 1:  # an older langchain (1.3): the limit does not answer the call it ends on
        return
    assert answers == 2
    with pytest.raises(RuntimeError, match="'add_tool' \\(id 'a1'\\) has 2 answers"):
        await run(agent, {"messages": [HumanMessage("and now?")]}, api, config)
    # reported once: the turn after goes on (it holds no reply answered twice)
    out = await run(agent, {"messages": [HumanMessage("go on")]}, api, config)
    assert out["messages"][-1].content == "done"


@pytest.mark.parametrize("api", APIS)
async def test_listed_after_the_budget_the_same_middleware_gives_one_answer_per_call(catalog, api):
    review = HumanInTheLoopMiddleware(interrupt_on={"add_tool": True})
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    agent = create_agent(_adds_a_tool(), middleware=[budget, review], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api, config)
    decision = {"type": "reject", "message": "No new tools."}
    out = await run(agent, Command(resume={"decisions": [decision]}), api, config)
    assert sorted(m.tool_call_id for m in tool_messages(out["messages"])) == ["a1", "r1"]
    assert out["messages"][-1].content == "done"


@pytest.mark.skipif(
    "interrupt_mode" not in inspect.signature(HumanInTheLoopMiddleware).parameters,
    reason="this langchain has no per-call review (interrupt_mode; 1.3 has none)",
)
@pytest.mark.parametrize("api", APIS)
async def test_per_call_review_reviews_regular_calls_and_never_builtin_calls(catalog, rec, api):
    """As docs/middleware.md says: per-call review interrupts in wrap_tool_call, which the
    budget's built-in calls never reach (answered in after_model), in either order."""
    gated = {"add_tool": True, "list_projects": True}
    for order in ("budget first", "review first"):
        rec.runs.clear()
        review = HumanInTheLoopMiddleware(interrupt_on=gated, interrupt_mode="per_call")
        budget = ToolBudgetMiddleware(catalog, max_tools=3)
        middleware = [budget, review] if order == "budget first" else [review, budget]
        agent = create_agent(_adds_a_tool(), middleware=middleware, checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": order}}
        paused = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api, config)
        (interrupt,) = paused["__interrupt__"]
        assert interrupt.value["name"] == "list_projects" and rec.runs == []
        assert [m.tool_call_id for m in tool_messages(paused["messages"])] == ["a1"]
        assert "create_issue" in paused["selected_tools"]  # added without review
        out = await run(agent, Command(resume={interrupt.id: {"type": "approve"}}), api, config)
        assert sorted(m.tool_call_id for m in tool_messages(out["messages"])) == ["a1", "r1"]
        assert rec.names == ["list_projects"]


# --- a batched reviewer listed after the budget: its edits are checked as the model's calls ----

edits_applied = pytest.mark.skipif(
    "interrupt_mode" not in inspect.signature(HumanInTheLoopMiddleware).parameters,
    reason="this langchain (1.3) applies a reviewer's edits to the reply in after_model",
)


def _edit(tool_name: str, /, **args: Any) -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": tool_name, "args": args}}


async def _edited(
    catalog: ToolCatalog,
    api: str,
    gated: str,
    replies: list[Any],
    edit: dict[str, Any],
    *,
    turns: tuple[str, ...] = (APOLLO_QUERY,),
    others: tuple[Any, ...] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A batched reviewer of ``gated`` listed after the budget (and ``others`` between them):
    the user's ``turns``, the model's ``replies`` then "done", the reviewer's ``edit``. The
    state at the pause and the resumed run's output."""
    review = HumanInTheLoopMiddleware(interrupt_on={gated: True})
    model = ScriptedChatModel(responses=[*replies, "done"])
    budget = ToolBudgetMiddleware(catalog, max_tools=3)
    middleware = [budget, *others, review]
    agent = create_agent(model, middleware=middleware, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    paused: dict[str, Any] = {}
    for text in turns:
        paused = await run(agent, {"messages": [HumanMessage(text)]}, api, config)
    return paused, await run(agent, Command(resume={"decisions": [edit]}), api, config)


@edits_applied
@pytest.mark.parametrize("api", APIS)
async def test_a_reviewers_edit_to_a_hidden_tool_is_refused_as_the_models_call_would_be(
    catalog, rec, api
):
    listing = [ai_calls(call("list_projects", "r1"))]
    edit = _edit("merge_pull_request", repo="acme/prod", number=1)
    paused, out = await _edited(catalog, api, "list_projects", listing, edit)
    assert "merge_pull_request" not in paused["selected_tools"]
    (answer,) = tool_messages(out["messages"])
    assert answer.status == "error" and "'merge_pull_request' exists but is not loaded" in (
        answer.content
    )
    assert rec.runs == []
    # an edit to a visible tool runs it, with the budget's note of the edit
    edit = _edit("add_task", project="apollo", title="Launch blocker")
    _, out = await _edited(catalog, api, "list_projects", listing, edit)
    (answer,) = tool_messages(out["messages"])
    assert answer.status == "success" and "replaced this call" in answer.content
    assert rec.names == ["add_task"]


@edits_applied
@pytest.mark.parametrize("api", APIS)
async def test_a_reviewers_edit_of_a_builtin_call_is_what_the_budget_applies(catalog, rec, api):
    adding = [ai_calls(call("add_tool", "a1", tool_names=["merge_pull_request"]))]
    edit = _edit("add_tool", tool_names=["create_issue"])
    _, out = await _edited(catalog, api, "add_tool", adding, edit)
    assert "create_issue" in out["selected_tools"]
    assert "merge_pull_request" not in out["selected_tools"]
    (answer,) = tool_messages(out["messages"])
    assert "Note: a human reviewer replaced this call before it ran" in answer.content
    assert "{'tool_names': ['create_issue']}" in answer.content


@edits_applied
@pytest.mark.parametrize("api", APIS)
async def test_a_reviewers_edit_applies_though_the_call_id_repeats_an_earlier_replys(
    catalog, rec, api
):
    """Models that number calls per reply ("call_0" every turn): the edit is still this
    reply's."""
    replies = [
        ai_calls(call("list_projects", "call_0")),
        "listed",
        ai_calls(call("add_tool", "call_0", tool_names=["merge_pull_request"])),
    ]
    edit = _edit("add_tool", tool_names=["create_issue"])
    turns = (APOLLO_QUERY, "and the weather?")
    _, out = await _edited(catalog, api, "add_tool", replies, edit, turns=turns)
    assert "create_issue" in out["selected_tools"]
    assert "merge_pull_request" not in out["selected_tools"]


@edits_applied
@pytest.mark.parametrize("api", APIS)
async def test_a_reviewers_edited_arguments_get_the_checks_the_models_would(catalog, rec, api):
    deep: Any = "apollo"
    for _ in range(40):
        deep = [deep]
    edit = _edit("add_task", project=deep, title="Launch blocker")
    listing = [ai_calls(call("list_projects", "r1"))]
    _, out = await _edited(catalog, api, "list_projects", listing, edit)
    (answer,) = tool_messages(out["messages"])
    assert "are nested deeper than 32 levels" in answer.content  # the budget's check
    assert "replaced this call" in answer.content and rec.runs == []


@pytest.mark.parametrize("api", APIS)
async def test_max_iterations_ends_the_turn_though_a_summary_replaces_its_messages(catalog, api):
    """SummarizationMiddleware replaces the turn's messages, its user message included, with
    a summary (a human message) mid-turn: the turn's model calls are still counted."""
    model = ScriptedChatModel(
        responses=[lambda messages, tools: ai_calls(call("list_projects", "r"))], cycle=True
    )
    summary = SummarizationMiddleware(
        model=ScriptedChatModel(responses=["SUMMARY"], cycle=True),
        trigger=("messages", 6),
        keep=("messages", 2),
    )
    budget = ToolBudgetMiddleware(catalog, max_tools=3, max_iterations=4)
    agent = create_agent(model, middleware=[summary, budget], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 60}
    out = await run(agent, {"messages": [HumanMessage(APOLLO_QUERY)]}, api, config)
    assert len(model.calls) == 4
    assert "max_iterations=4" in out["messages"][-1].content
    assert any(m.additional_kwargs.get("lc_source") == "summarization" for m in out["messages"])
    # the next user message starts a new turn with a fresh count
    out = await run(agent, {"messages": [HumanMessage("and the apollo board?")]}, api, config)
    assert len(model.calls) == 8


@pytest.mark.parametrize("api", APIS)
async def test_a_reply_with_repaired_call_ids_is_streamed_so_every_answer_pairs_with_a_call(
    catalog, api
):
    model = ScriptedChatModel(
        responses=[
            ai_calls(call("list_projects", "call_0"), call("add_tool", "call_0", tool_names=["x"])),
            "done",
        ]
    )
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, max_tools=3)])
    inputs = {"messages": [HumanMessage(APOLLO_QUERY)]}
    if api == "invoke":
        chunks = list(agent.stream(inputs, stream_mode="messages"))
    else:
        chunks = [c async for c in agent.astream(inputs, stream_mode="messages")]
    calls = {c["id"] for m, _ in chunks if m.type in ("ai", "AIMessageChunk") for c in m.tool_calls}
    answers = [m.tool_call_id for m, _ in chunks if m.type == "tool"]
    assert len(answers) == 2 and set(answers) <= calls and len(set(answers)) == 2


@edits_applied
@pytest.mark.parametrize("api", APIS)
async def test_a_reviewers_edit_with_arguments_as_json_text_is_read_not_dropped(catalog, rec, api):
    forecast = [ai_calls(call("weather_forecast", "w1", city="Madrid"))]
    text = {"name": "weather_forecast", "args": '{"city": "Oslo", "days": 5}'}
    edit = {"type": "edit", "edited_action": text}
    turns = ("weather forecast for Madrid",)
    await _edited(catalog, api, "weather_forecast", forecast, edit, turns=turns)
    assert rec.runs == [("weather_forecast", {"city": "Oslo", "days": 5})]  # never the defaults


@tool
def ping(host: str) -> str:
    """Ping a host."""
    return f"pong from {host}"


class Network(AgentMiddleware):
    """Another middleware's tool (registered with the agent, not in the budget's catalog)."""

    tools = [ping]


@edits_applied
@pytest.mark.parametrize("api", APIS)
async def test_a_reviewers_edit_to_another_middlewares_tool_is_that_middlewares_call(
    catalog, rec, api
):
    # a tool the model never loaded, replaced by the reviewer with another middleware's
    merging = [ai_calls(call("merge_pull_request", "r1", repo="a", number=1))]
    edit = _edit("ping", host="db1")
    _, out = await _edited(catalog, api, "merge_pull_request", merging, edit, others=(Network(),))
    (answer,) = tool_messages(out["messages"])
    assert answer.status == "success" and "pong from db1" in answer.content
    assert rec.runs == []  # the model's call never ran


@edits_applied
@pytest.mark.parametrize("api", APIS)
async def test_a_reviewers_edit_of_a_regular_call_into_a_builtin_call_is_answered_as_one(
    catalog, rec, api
):
    listing = [ai_calls(call("list_projects", "r1"))]
    edit = _edit("add_tool", tool_names=["create_issue"])
    _, out = await _edited(catalog, api, "list_projects", listing, edit)
    (answer,) = tool_messages(out["messages"])
    assert "create_issue" in out["selected_tools"] and rec.runs == []
    assert answer.content.count("a human reviewer replaced this call") == 1
