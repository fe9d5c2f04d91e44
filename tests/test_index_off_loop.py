"""warm.py: the first turn builds the catalog's derived data in a worker thread, not the loop.

Built in the event loop, a 10,000-tool catalog's index held the loop about two seconds at the
first turn, freezing every other run of the process. Each async way in (the selection nodes
alone, ``choose_tools``, the prebuilt graph, ``add_toolbudget_nodes``, the middleware) builds
every entry in a thread other than the loop's; runs racing on a new catalog build it once.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph

from langgraph_toolbudget import (
    ChooseTools,
    ClassifyIntent,
    SelectTools,
    ToolBudgetInput,
    ToolBudgetState,
    ToolCatalog,
    ToolSearch,
    add_toolbudget_nodes,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core import warm
from langgraph_toolbudget.core.derived import ENTRY_NAMES, DerivedData
from langgraph_toolbudget.core.warm import WARM_ENTRIES, awarm_catalog, is_warm, warm_catalog
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.testing import ScriptedChatModel

REQUEST = "Create a GitHub issue for the login bug and tell the team in Slack"


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(entry, thread id) of every ``catalog.derived`` entry built from now on."""
    seen: list[tuple[str, int]] = []
    get = DerivedData.get

    def recording_get(self: DerivedData, name: str, build: Callable[[], Any]) -> Any:
        def recorded() -> Any:
            seen.append((name, threading.get_ident()))
            return build()

        return get(self, name, recorded)

    monkeypatch.setattr(DerivedData, "get", recording_get)
    return seen


def _nodes_graph(catalog: ToolCatalog) -> Any:
    graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    add_toolbudget_nodes(graph, ScriptedChatModel(responses=["done"]), catalog)
    return graph.compile(checkpointer=InMemorySaver())


def _middleware_agent(catalog: ToolCatalog) -> Any:
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent

    from langgraph_toolbudget import ToolBudgetMiddleware

    return create_agent(
        ScriptedChatModel(responses=["done"]),
        middleware=[ToolBudgetMiddleware(catalog)],
        checkpointer=InMemorySaver(),
    )


WAYS_IN: dict[str, Callable[[ToolCatalog], Any]] = {
    "classify_intent": ClassifyIntent,
    "select_tools": SelectTools,
    "tool_search": ToolSearch,
    "choose_tools": ChooseTools,
    "prebuilt": lambda catalog: create_toolbudget_agent(
        ScriptedChatModel(responses=["done"]), catalog
    ).compile(checkpointer=InMemorySaver()),
    "add_toolbudget_nodes": _nodes_graph,
    "middleware": _middleware_agent,
}


@pytest.mark.parametrize("way_in", list(WAYS_IN))
async def test_first_turn_builds_the_index_off_the_event_loop(way_in, builds):
    catalog = build_example_catalog()  # a new catalog: nothing derived yet
    runnable = WAYS_IN[way_in](catalog)
    assert builds == []  # building the graph (or node) builds nothing

    await runnable.ainvoke(
        {"messages": [HumanMessage(REQUEST)]}, {"configurable": {"thread_id": "1"}}
    )

    loop_thread = threading.get_ident()
    assert ("index", loop_thread) not in builds
    assert "index" in dict(builds)
    on_loop = [name for name, thread in builds if thread == loop_thread]
    assert on_loop == [], f"built in the event loop's thread: {on_loop}"
    assert [name for name, _ in builds].count("index") == 1


async def test_second_turn_builds_nothing(builds):
    catalog = build_example_catalog()
    node = ChooseTools(catalog)
    await node.ainvoke({"messages": [HumanMessage(REQUEST)]})
    built = len(builds)
    await node.ainvoke({"messages": [HumanMessage("What's the weather in Tokyo?")]})
    assert len(builds) == built


def test_warm_catalog_builds_every_entry_the_selection_reads():
    # every entry but the per-tool token cache: a new entry of ENTRY_NAMES must be added here
    assert set(WARM_ENTRIES) == ENTRY_NAMES - {"tool_tokens"}
    catalog = build_example_catalog()
    assert not is_warm(catalog)
    warm_catalog(catalog)
    assert is_warm(catalog)
    assert all(catalog.derived.built(name) for name in WARM_ENTRIES)
    catalog.derived.clear()
    assert not is_warm(catalog)


async def test_runs_racing_on_a_new_catalog_share_one_build(monkeypatch):
    catalog = build_example_catalog()
    release = threading.Event()
    threads: list[int] = []

    def slow_warm(catalog: ToolCatalog) -> None:
        threads.append(threading.get_ident())
        release.wait()
        warm_catalog(catalog)

    monkeypatch.setattr(warm, "warm_catalog", slow_warm)
    runs = [asyncio.ensure_future(awarm_catalog(catalog)) for _ in range(3)]
    await asyncio.sleep(0)
    cancelled = runs.pop()
    cancelled.cancel()  # a run cancelled while it waits: the others' build goes on
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(*runs)
    assert cancelled.cancelled()
    assert len(threads) == 1 and threads[0] != threading.get_ident()
    assert is_warm(catalog)
    await awarm_catalog(catalog)  # warm: returns without a thread
    assert len(threads) == 1


async def test_a_failed_build_is_raised_and_tried_again(monkeypatch):
    catalog = build_example_catalog()
    calls: list[int] = []

    def failing_once(catalog: ToolCatalog) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("index build failed")
        warm_catalog(catalog)

    monkeypatch.setattr(warm, "warm_catalog", failing_once)
    with pytest.raises(RuntimeError, match="index build failed"):
        await awarm_catalog(catalog)
    await awarm_catalog(catalog)
    assert len(calls) == 2 and is_warm(catalog)


def test_a_turn_after_warming_imports_nothing_more_of_numpy() -> None:
    """Counting a term's categories with ``np.unique`` imported ``numpy.ma`` on its first call:
    about 20 ms of the first turn that ``warm_catalog`` could not pay beforehand."""
    script = """
import sys
from langchain_core.messages import HumanMessage
from langgraph_toolbudget import create_toolbudget_agent
from langgraph_toolbudget.core.warm import warm_catalog
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel
catalog = build_example_catalog()
warm_catalog(catalog)
before = set(sys.modules)
app = create_toolbudget_agent(DemoChatModel(), catalog).compile()
app.invoke({"messages": [HumanMessage(REQUEST)]})
print(sorted(m for m in set(sys.modules) - before if m.startswith("numpy")))
""".replace("REQUEST", repr(REQUEST))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
