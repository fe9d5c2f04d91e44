"""ToolBudgetMiddleware composed with LangChain's own middleware, in both orders.

Only the chat models are fake (``ScriptedChatModel``); the tools are real ``@tool``
functions that record each execution, the agents real ``create_agent`` graphs, and every
other middleware LangChain's own (or written as LangChain documents it).
"""

from __future__ import annotations

from typing import Any

import pytest
from agent_tools import APOLLO_QUERY, ai_calls, call, recording_fixtures, tool_messages
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, LLMToolSelectorMiddleware
from langchain_core.messages import AIMessage, HumanMessage

from langgraph_toolbudget import ToolBudgetMiddleware
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
