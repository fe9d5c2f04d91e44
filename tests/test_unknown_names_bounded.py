"""A reply naming many tools the model may not call: the closest tools are matched for a few.

Matching a name against the catalog (``closest_tools``) costs time that grows with the
catalog, so the refusals of one reply name the closest tools for at most
``MAX_MATCHED_NAMES`` distinct names, each matched once; the other calls get the plain
refusal. The bound holds per reply under the nodes (one check per batch) and under
``ToolBudgetMiddleware`` (whose tool node refuses each call in a thread of its own). Each
matched name scores ``WRatio`` against at most ``MAX_SPELLING_CANDIDATES`` tools, so the
suggestions of a catalog of up to that many tools are those of scoring every tool.

Real tools, real agents; only the chat model is scripted. A patched ``closest_tools``
counts the names matched.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from agent_tools import Recorder, ai_calls, call, recording_catalog
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from rapidfuzz import fuzz, process

from langgraph_toolbudget import ToolBudgetMiddleware, ToolCatalog, ToolExecutor
from langgraph_toolbudget.core import meta as meta_module
from langgraph_toolbudget.core.meta import MAX_SPELLING_CANDIDATES, closest_tools
from langgraph_toolbudget.execution import policy as policy_module
from langgraph_toolbudget.execution.policy import MAX_MATCHED_NAMES, NOT_MATCHED_HINT
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
CLOSEST = "Closest tools: "
NOT_MATCHED = NOT_MATCHED_HINT.format(limit=MAX_MATCHED_NAMES)
UNKNOWN = [f"get_wether_{i}" for i in range(12)]  # each close to get_weather


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def catalog(rec: Recorder) -> ToolCatalog:
    return recording_catalog(rec)


@pytest.fixture
def matched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names ``closest_tools`` is asked to match (from any thread), in order."""
    names: list[str] = []
    lock = threading.Lock()
    real = policy_module.closest_tools

    def counting(catalog: ToolCatalog, name: str, **kwargs: Any) -> list[str]:
        with lock:
            names.append(name)
        return real(catalog, name, **kwargs)

    monkeypatch.setattr(policy_module, "closest_tools", counting)
    return names


async def run_node(node: Any, calls: list[dict[str, Any]], api: str) -> dict[str, ToolMessage]:
    state = {"messages": [HumanMessage("weather please"), ai_calls(*calls)], "selected_tools": []}
    out = await (asyncio.to_thread(node.invoke, state) if api == "invoke" else node.ainvoke(state))
    return {m.tool_call_id: m for m in out["messages"]}


async def run_middleware(
    catalog: ToolCatalog, calls: list[dict[str, Any]], api: str
) -> dict[str, ToolMessage]:
    model = ScriptedChatModel(responses=[ai_calls(*calls), AIMessage("done")], cycle=False)
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog)])
    payload = {"messages": [HumanMessage("weather please")]}
    out = await (
        asyncio.to_thread(agent.invoke, payload) if api == "invoke" else agent.ainvoke(payload)
    )
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


def assert_bounded(answers: dict[str, ToolMessage], calls: list[dict[str, Any]]) -> None:
    """Every call refused; the closest tools named in as many answers as names matched."""
    assert set(answers) == {c["id"] for c in calls}
    assert all(m.status == "error" for m in answers.values())
    named = [i for i, m in answers.items() if CLOSEST in m.content]
    plain = [i for i, m in answers.items() if NOT_MATCHED in m.content]
    assert len(named) == MAX_MATCHED_NAMES and len(plain) == len(calls) - MAX_MATCHED_NAMES
    for i in plain:  # still says what to do instead
        assert "search_tools" in answers[i].content and CLOSEST not in answers[i].content


@pytest.mark.parametrize("api", APIS)
async def test_a_reply_of_many_unknown_names_matches_only_the_first_few_under_the_nodes(
    catalog, rec, matched, api
):
    calls = [call(name, f"u{i}", city="Lima") for i, name in enumerate(UNKNOWN)]
    answers = await run_node(ToolExecutor(catalog), calls, api)
    assert matched == UNKNOWN[:MAX_MATCHED_NAMES]  # in call order
    assert_bounded(answers, calls)
    for i in range(MAX_MATCHED_NAMES):
        assert f"{CLOSEST}get_weather" in answers[f"u{i}"].content
    assert rec.runs == []


@pytest.mark.parametrize("api", APIS)
async def test_an_unknown_name_called_many_times_in_a_reply_is_matched_once(catalog, matched, api):
    calls = [call("get_wether", f"u{i}", city=f"city {i}") for i in range(10)]
    answers = await run_node(ToolExecutor(catalog), calls, api)
    assert matched == ["get_wether"]
    contents = {m.content for m in answers.values()}
    assert len(contents) == 1 and f"{CLOSEST}get_weather" in contents.pop()


@pytest.mark.parametrize("api", APIS)
async def test_the_bound_holds_with_hooks_that_see_each_refused_call(catalog, matched, api):
    """A hook sees each refused call, which the pipeline checks again: matched once still."""
    seen: list[str] = []

    def hook(request: Any, handler: Any) -> Any:
        seen.append(request.tool_call["name"])
        return handler(request)

    calls = [call(name, f"u{i}") for i, name in enumerate(UNKNOWN)]
    answers = await run_node(ToolExecutor(catalog, wrap_tool_call=hook), calls, api)
    assert sorted(seen) == sorted(UNKNOWN)
    assert matched == UNKNOWN[:MAX_MATCHED_NAMES]
    assert_bounded(answers, calls)


@pytest.mark.parametrize("api", APIS)
async def test_under_the_middleware_the_bound_holds_across_the_reply_s_threads(
    catalog, rec, matched, api
):
    """The tool node refuses each call in a task (a thread of the pool) of its own: unknown
    names, and filtered or disabled tools (the middleware's own refusals), share one bound."""
    names = ["admin_shutdown", *UNKNOWN, "purge_database", "get_wether_0"]
    calls = [call(name, f"u{i}") for i, name in enumerate(names)]
    answers = await run_middleware(catalog, calls, api)
    assert len(matched) == MAX_MATCHED_NAMES and len(set(matched)) == MAX_MATCHED_NAMES
    assert set(matched) <= set(names)
    for c in calls:
        hint = CLOSEST if c["name"] in matched else NOT_MATCHED
        assert hint in answers[c["id"]].content
    assert all(m.status == "error" for m in answers.values()) and len(answers) == len(calls)
    assert rec.runs == []


@pytest.mark.parametrize("api", APIS)
async def test_a_few_unknown_names_under_the_middleware_each_name_the_closest_tools(
    catalog, matched, api
):
    calls = [call("get_wether", "u1", city="Lima"), call("crate_project", "u2", name="x")]
    answers = await run_middleware(catalog, calls, api)
    assert sorted(matched) == ["crate_project", "get_wether"]
    assert f"{CLOSEST}get_weather" in answers["u1"].content
    assert f"{CLOSEST}create_project" in answers["u2"].content


def test_a_small_catalog_s_closest_tools_are_those_of_scoring_every_tool(catalog):
    """Up to MAX_SPELLING_CANDIDATES tools, every tool's spelling is scored (WRatio), as
    before the candidates were cut: the suggestions are those scoring every tool gives."""
    names = catalog.tool_names
    assert len(names) <= MAX_SPELLING_CANDIDATES
    for typo in ["get_wether", "crate_project", "list_isues", "Get_Weather", "sendmessage"]:
        scored = process.extract(typo, names, scorer=fuzz.WRatio, limit=3)
        spelled = [n for n, score, _ in scored if score >= 70]
        related = [n for n, _ in catalog.index.rank_names(typo.replace("_", " "), limit=3)]
        expected = list(dict.fromkeys([*spelled, *related]))[:3] or [n for n, _, _ in scored]
        assert closest_tools(catalog, typo) == expected


NOUNS = ["invoice", "ticket", "order", "report", "user", "channel", "folder", "record"]
VERBS = ["create", "list", "get", "update", "delete", "archive", "export", "share"]


def big_catalog(size: int) -> ToolCatalog:
    schema = {"type": "object", "properties": {"id": {"type": "string"}}}
    tools = [
        StructuredTool(
            name=f"{VERBS[i % 8]}_{NOUNS[i // 8 % 8]}_{i}",
            description=f"{VERBS[i % 8].capitalize()} a {NOUNS[i // 8 % 8]} of account {i}.",
            args_schema=schema,
            func=lambda **kwargs: "ok",
        )
        for i in range(size)
    ]
    return ToolCatalog.from_tools(tools)


def test_in_a_big_catalog_wratio_scores_a_few_candidates_and_finds_the_misspelled_tool(
    monkeypatch,
):
    catalog = big_catalog(4 * MAX_SPELLING_CANDIDATES)
    scored: list[tuple[Any, int]] = []

    class Recording:
        @staticmethod
        def extract(query: str, choices: Any, **kwargs: Any) -> Any:
            scored.append((kwargs["scorer"], len(choices)))
            return process.extract(query, choices, **kwargs)

    monkeypatch.setattr(meta_module, "process", Recording)
    name = catalog.tool_names[1709]
    typo = name.replace("_", "", 1)  # archivechannel_1709
    assert closest_tools(catalog, typo)[0] == name
    hidden = closest_tools(catalog, typo, hidden={name})
    assert hidden and name not in hidden
    wratio = [n for scorer, n in scored if scorer is fuzz.WRatio]
    assert wratio and max(wratio) <= MAX_SPELLING_CANDIDATES
