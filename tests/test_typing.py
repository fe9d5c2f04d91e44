"""The public API under a type checker: ``mypy --strict`` over a user's code.

The options are typed once (``BudgetOptions``), so a misspelt option, a wrong type or a bad
literal is caught by ``mypy`` wherever options are taken, ``BudgetConfig`` included; and
``ToolBudgetInput`` is a type a user can write in annotations. The documented imports and calls
type-check as they run: the top-level ``ToolBudgetMiddleware``, a graph with a
``context_schema``, a wrapped chat model (``.with_retry()``...); a misspelt import and an option
of the wrong type are errors.

Every user program below is checked in one ``mypy`` run (about 15 s cold); a line ending in
``# E: <text>`` must have an error containing that text, every other line none.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

ROOT = Path(__file__).resolve().parents[1]

USER_CODE = """\
from langchain_core.messages import HumanMessage
from langgraph.graph import StateGraph
from langgraph_toolbudget import BudgetConfig, ToolBudgetInput, ToolBudgetState

config = BudgetConfig(max_tools=3, mode="sequential", pinned=["get_weather"])
smaller = config.override(max_visible=None, max_tools=2)
BudgetConfig(max_tool=3)  # line 7
BudgetConfig(mode="bogus")  # line 8
BudgetConfig(max_tools="8")  # line 9
config.override(max_visble=3)  # line 10
config.override(mode="turbo")  # line 11


def first_input(text: str) -> ToolBudgetInput:
    return {"messages": [HumanMessage(text)]}


graph: StateGraph[ToolBudgetState, None, ToolBudgetInput, ToolBudgetState] = StateGraph(
    ToolBudgetState, input_schema=ToolBudgetInput
)
"""

MIDDLEWARE_IMPORT = """\
from langchain.agents import create_agent
from langgraph_toolbudget import ToolBudgetMiddleware
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

budget = ToolBudgetMiddleware(build_example_catalog(), max_tools=6, max_visible=12)
agent = create_agent(DemoChatModel(), middleware=[budget])
"""
"""The documented top-level import: it was "not explicitly exported" (``__all__`` lost it)."""

MIXED_MIDDLEWARE = """\
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langgraph_toolbudget import ToolBudgetMiddleware
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

budget = ToolBudgetMiddleware(build_example_catalog())
review = HumanInTheLoopMiddleware(interrupt_on={"get_weather": True})
create_agent(DemoChatModel(), middleware=[budget, review])
create_agent(DemoChatModel(), middleware=[review, budget])
"""
"""Ours beside LangChain's own middleware, as docs/middleware.md shows: the list's item type
was refused (the middleware's state type parameter is invariant; ours named its own state)."""

MISSPELT_IMPORT = """\
from langgraph_toolbudget import create_toolbudget_agnet  # E: attribute "create_toolbudget_agnet"
from langgraph_toolbudget.demo.example_catalog import build_example_catalog

graph = create_toolbudget_agnet("openai:gpt-4o-mini", build_example_catalog())
"""
"""A misspelt name: it was ``Any`` through the package's ``__getattr__``."""

CONTEXT_SCHEMA = """\
from dataclasses import dataclass

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph_toolbudget import (
    ToolBudgetInput, ToolBudgetState, add_toolbudget_nodes, aupdate_context,
    create_toolbudget_agent, exclude_tools, update_context,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel


@dataclass
class Ctx:
    user_id: str


catalog = build_example_catalog()
app = create_toolbudget_agent(DemoChatModel(), catalog, context_schema=Ctx).compile()
app.invoke({"messages": [HumanMessage("weather in Paris?")]}, context=Ctx("u1"))
graph = StateGraph(ToolBudgetState, context_schema=Ctx, input_schema=ToolBudgetInput)
add_toolbudget_nodes(graph, DemoChatModel(), catalog)
app2 = graph.compile(checkpointer=InMemorySaver())
thread: RunnableConfig = {"configurable": {"thread_id": "t"}}
update_context(app2, thread, exclude_tools(tools=["get_weather"]))


async def later() -> None:
    await aupdate_context(app2, thread, exclude_tools(tools=["get_weather"]))
"""
"""A graph with a runtime context schema: bare ``StateGraph`` / ``Pregel`` pinned it to None."""

WRAPPED_MODEL = """\
from langgraph.graph import StateGraph
from langgraph_toolbudget import (
    CallModel, ToolAgent, ToolBudgetInput, ToolBudgetState, add_toolbudget_nodes,
    create_toolbudget_agent,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

catalog = build_example_catalog()
create_toolbudget_agent(DemoChatModel().with_retry(stop_after_attempt=3), catalog)
CallModel(DemoChatModel().with_config(tags=["agent"]), catalog)
ToolAgent(DemoChatModel().with_fallbacks([DemoChatModel()]), catalog)
graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
add_toolbudget_nodes(graph, DemoChatModel().bind(stop=["Observation:"]), catalog)
create_toolbudget_agent(
    DemoChatModel(), catalog, classifier_model=DemoChatModel().with_fallbacks([DemoChatModel()])
)
CallModel(42, catalog)  # E: Argument 1 to "CallModel" has incompatible type "int"
"""
"""The wrapped chat models the docs promise work: they were refused (``BaseChatModel | str``)."""

OPTION_TYPES = """\
from collections.abc import Sequence

from langgraph_toolbudget import BudgetConfig, DatabaseToolbox, SelectTools, ToolCatalog, ToolUsage
from langgraph_toolbudget.core.hashing import HashingEmbeddings
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.nodes.tool_index import StoreToolIndex

catalog = build_example_catalog()


def names(query: str, catalog: ToolCatalog) -> Sequence[str]:
    return catalog.tool_names[:2]


async def scored(query: str, catalog: ToolCatalog) -> dict[str, float]:
    return {"get_weather": 1.0}


SelectTools(catalog, usage=ToolUsage(), embeddings=HashingEmbeddings(), retriever=names)
SelectTools(catalog, retriever=scored, database_toolbox=DatabaseToolbox({"shop": "sqlite://"}))
BudgetConfig(retriever=StoreToolIndex(), embeddings=HybridScorer(catalog, HashingEmbeddings()))
SelectTools(catalog, usage=None, embeddings=None, retriever=None, database_toolbox=None)
SelectTools(catalog, usage=True)  # E: Argument "usage" to "SelectTools" has incompatible type
SelectTools(catalog, retriever=42)  # E: "retriever" to "SelectTools" has incompatible type "int"
BudgetConfig(database_toolbox="sqlite:///shop.db")  # E: "database_toolbox" to "BudgetConfig"
BudgetConfig().override(embeddings="e5")  # E: Argument "embeddings" to "override" of "BudgetConfig"
"""
"""The options ``usage``, ``retriever``, ``database_toolbox`` and ``embeddings`` were ``Any``."""

SUBCLASSES_AND_MODES = """\
from langchain_core.tools import tool
from langgraph_toolbudget import ToolCatalog, ToolExecutor, set_include_mode


@tool
def get_weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    return "sunny"


class TeamCatalog(ToolCatalog):
    owner = "platform-team"


class AuditedExecutor(ToolExecutor):
    audited = True


print(TeamCatalog.from_tools([get_weather]).owner)
print(AuditedExecutor.from_tools([get_weather]).audited)
set_include_mode("always", tools=["get_weather"])
set_include_mode("allways", tools=["get_weather"])  # E: Argument 1 to "set_include_mode" has
"""
"""``from_tools`` of a subclass builds the subclass (it was typed as the base class, so its own
attributes were errors); an include mode is one of the modes (any string was taken)."""

PREBUILT_TYPES = """\
from dataclasses import dataclass

from langchain_core.messages import HumanMessage
from langgraph.graph import StateGraph
from langgraph_toolbudget import ToolBudgetInput, ToolBudgetState, create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel


@dataclass
class Ctx:
    user_id: str


class MyState(ToolBudgetState):
    mood: str


catalog = build_example_catalog()
app = create_toolbudget_agent(DemoChatModel(), catalog).compile()
app.invoke({"messages": [("user", "weather in Paris?")]})
app.invoke({"messages": [{"role": "user", "content": "weather in Paris?"}]})
app.invoke({"messages": [HumanMessage("weather in Paris?")]})
app.invoke({"mesages": [("user", "weather in Paris?")]})  # E: "invoke" of "Pregel"
with_ctx = create_toolbudget_agent(DemoChatModel(), catalog, context_schema=Ctx).compile()
with_ctx.invoke({"messages": [("user", "hi")]}, context=Ctx("u1"))
with_ctx.invoke({"messages": [("user", "hi")]}, context="u1")  # E: "invoke" of "Pregel"
mine = create_toolbudget_agent(DemoChatModel(), catalog, state_schema=MyState).compile()
mine.invoke({"messages": [("user", "hi")], "mood": "calm"})
both = create_toolbudget_agent(DemoChatModel(), catalog, state_schema=MyState, context_schema=Ctx)
both.compile().invoke({"messages": [("user", "hi")]}, context=Ctx("u1"))
graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
graph.compile().invoke({"messages": [("user", "hi"), {"role": "user", "content": "hi"}]})
"""
"""The prebuilt graph's input and context are checked as a hand-built graph's are (it was
``StateGraph[Any, ...]``: a misspelt input key ran the agent on no messages), and its input
takes the message forms ``add_messages`` reads (``("user", "hi")``, a role/content dict), as
``ToolBudgetInput`` does now (both were type errors on a hand-built graph)."""

PROGRAMS = {
    "user_code": USER_CODE,
    "user_middleware_import": MIDDLEWARE_IMPORT,
    "user_mixed_middleware": MIXED_MIDDLEWARE,
    "user_misspelt_import": MISSPELT_IMPORT,
    "user_context_schema": CONTEXT_SCHEMA,
    "user_wrapped_model": WRAPPED_MODEL,
    "user_option_types": OPTION_TYPES,
    "user_subclasses_and_modes": SUBCLASSES_AND_MODES,
    "user_prebuilt_types": PREBUILT_TYPES,
}


def _mypy_errors(
    tmp_path: Path, cache: Path, programs: dict[str, str]
) -> dict[str, dict[int, str]]:
    """Module -> line -> mypy's errors there, for ``programs`` (module name -> code) checked
    together in one run as a user's modules."""
    paths = []
    for name, code in programs.items():
        path = tmp_path / f"{name}.py"
        path.write_text(code, encoding="utf-8")
        paths.append(str(path))
    command = [sys.executable, "-m", "mypy", "--strict", "--no-error-summary"]
    command += ["--follow-imports=silent", "--cache-dir", str(cache), *paths]
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    out = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    ).stdout
    errors: dict[str, dict[int, str]] = {name: {} for name in programs}
    for line in out.splitlines():
        found = re.match(r"(?:.*[/\\])?(\w+)\.py:(\d+): error: (.*)", line)
        if found and found[1] in errors:
            lines = errors[found[1]]
            lines[int(found[2])] = lines.get(int(found[2]), "") + found[3]
    return errors


def mypy_run(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    label: str,
    programs: dict[str, str],
) -> dict[str, dict[int, str]]:
    """:func:`_mypy_errors` of ``programs`` in a new directory, mypy's cache kept in pytest's
    cache directory (``mypy``, shared by every run: warm, a run takes seconds)."""
    store = getattr(request.config, "cache", None)
    tmp_path = tmp_path_factory.mktemp(label)
    cache = store.mkdir("mypy") if store is not None else tmp_path / "cache"
    return _mypy_errors(tmp_path, cache, programs)


@pytest.fixture(scope="module")
def mypy_errors(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, dict[int, str]]:
    return mypy_run(request, tmp_path_factory, "typing", PROGRAMS)


def _expected(code: str) -> dict[int, str]:
    """Line -> the text its ``# E: <text>`` comment says mypy's error there contains."""
    return {
        number: line.split("# E: ", 1)[1]
        for number, line in enumerate(code.splitlines(), start=1)
        if "# E: " in line
    }


def test_mypy_checks_budget_config_options_and_takes_tool_budget_input_as_a_type(
    mypy_errors: dict[str, dict[int, str]],
) -> None:
    errors = mypy_errors["user_code"]
    assert set(errors) == {7, 8, 9, 10, 11}, errors
    assert 'Unexpected keyword argument "max_tool"' in errors[7]
    assert "Literal['sequential', 'parallel_safe']" in errors[8]
    assert '"max_tools"' in errors[9] and '"str"' in errors[9]
    assert 'Unexpected keyword argument "max_visble"' in errors[10]
    assert '"mode"' in errors[11]


@pytest.mark.parametrize(
    "module",
    [
        "user_middleware_import",
        "user_mixed_middleware",
        "user_misspelt_import",
        "user_context_schema",
        "user_wrapped_model",
        "user_option_types",
        "user_subclasses_and_modes",
        "user_prebuilt_types",
    ],
)
def test_mypy_strict_accepts_the_documented_calls_and_refuses_the_wrong_ones(
    mypy_errors: dict[str, dict[int, str]], module: str
) -> None:
    errors, expected = mypy_errors[module], _expected(PROGRAMS[module])
    assert set(errors) == set(expected), errors
    for number, text in expected.items():
        assert text in errors[number], (number, errors[number])


def test_the_system_prompt_type_names_its_runnables_parameters() -> None:
    """A bare ``Runnable`` in ``SystemPrompt`` (an option of both factories) made pyright's
    strict mode call ``create_toolbudget_agent`` and ``add_toolbudget_nodes`` "partially
    unknown" on a user's import of them."""
    from langchain_core.runnables import Runnable

    from langgraph_toolbudget.nodes.prompt import SystemPrompt

    assert all(arg is not Runnable for arg in get_args(SystemPrompt))
    assert Runnable[Any, Any] in get_args(SystemPrompt)
