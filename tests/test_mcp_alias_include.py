"""The user's include of an MCP tool lifts its exclusions under its aliases, failing closed
for an alias that also fits another tool; the model's refused include names the alias; and
``allowed_tools`` / ``allowed_servers`` entries naming nothing are refused at load (warned of
while a server failed to load).

Real FastMCP servers over stdio (``examples/mcp_servers``): with ``math`` and ``notes`` both
up, notes' tool is ``notes__search`` and math's ``math__search`` (both alias ``search``); with
``math`` down it is plain ``search`` (alias ``notes__search``). Only the chat model is scripted.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from mcp_servers import stdio

from langgraph_toolbudget import (
    create_toolbudget_agent,
    exclude_tools,
    include_tools,
    update_context,
)
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.context_commands import (
    CommandError,
    ExcludedError,
    apply_update,
    run_command,
)
from langgraph_toolbudget.core.context_ops import list_tools
from langgraph_toolbudget.mcp import MCPToolCatalog, load_mcp_catalog_sync
from langgraph_toolbudget.testing import ScriptedChatModel

MATH, NOTES = stdio("math_server.py"), stdio("notes_server.py")
DOWN = stdio("no_such_server.py")  # python starts, cannot open the file, exits


@contextmanager
def load(connections: dict[str, Any], **options: Any) -> Iterator[tuple[MCPToolCatalog, list[str]]]:
    """The catalog of ``connections`` and the texts of its load's warnings; closed after."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        catalog = load_mcp_catalog_sync(connections, **options)
    try:
        yield catalog, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    finally:
        catalog.close()


@pytest.fixture(scope="module")
def both() -> Iterator[MCPToolCatalog]:
    with load({"notes": NOTES, "math": MATH}) as (catalog, _):
        yield catalog


@pytest.fixture(scope="module")
def math_down() -> Iterator[MCPToolCatalog]:
    with load({"notes": NOTES, "math": DOWN}) as (catalog, _):
        yield catalog


def excluded(catalog: MCPToolCatalog, values: dict[str, Any]) -> set[str]:
    return {r["name"] for r in list_tools(catalog, values) if r["excluded"]}


# --- the model's include: the refusal names the alias -----------------------------------------


def test_the_models_refused_include_says_the_tool_was_excluded_under_its_other_name(
    math_down: MCPToolCatalog,
) -> None:
    values = exclude_tools(tools=["notes__search"])
    with pytest.raises(ExcludedError) as info:
        run_command(math_down, values, "include_tool", {"tool": "search"})
    assert "'search' is excluded from this conversation (under its other name " in str(info.value)
    assert "'notes__search')" in str(info.value)
    assert "server 'notes'" not in str(info.value)  # notes is not excluded


# --- the user's include lifts the exclusion under the alias -----------------------------------


def test_the_users_include_lifts_the_exclusion_made_under_the_other_name(
    math_down: MCPToolCatalog,
) -> None:
    values = exclude_tools(tools=["notes__search"])
    assert "search" in excluded(math_down, values)
    result = run_command(math_down, values, "include_tool", {"tool": "search"}, by_user=True)
    after = apply_update(values, result.update)
    assert "search" not in excluded(math_down, after)
    assert result.data["tool"]["in_context"] is True
    assert after["context_tools"] == {"search": "include"}


def test_include_tools_with_the_catalog_lifts_an_alias_only_this_tool_has(
    math_down: MCPToolCatalog,
) -> None:
    """Through update_context, as docs/context.md shows, with and without the state."""
    saver, cfg = InMemorySaver(), {"configurable": {"thread_id": "t"}}
    app = create_toolbudget_agent(ScriptedChatModel(responses=["ok"]), math_down).compile(
        checkpointer=saver
    )
    for state in (None, "read"):
        update_context(app, cfg, exclude_tools(tools=["notes__search"]))
        assert "search" in excluded(math_down, app.get_state(cfg).values)
        values = app.get_state(cfg).values if state else None
        update_context(app, cfg, include_tools(tools=["search"], catalog=math_down, state=values))
        assert "search" not in excluded(math_down, app.get_state(cfg).values)
    app.invoke({"messages": [HumanMessage("hi")]}, cfg)
    assert app.get_state(cfg).values["context_tools"] == {"search": "include"}


def test_an_alias_exclusion_that_also_excludes_another_tool_is_not_lifted_by_including_one(
    both: MCPToolCatalog,
) -> None:
    values = exclude_tools(tools=["search"])  # made while notes' tool was plain 'search'
    assert {"notes__search", "math__search"} <= excluded(both, values)
    with pytest.raises(CommandError) as info:
        run_command(both, values, "include_tool", {"tool": "notes__search"}, by_user=True)
    message = str(info.value)
    assert "'notes__search' is excluded in this thread under 'search'" in message
    assert "'math__search'" in message and "nothing was changed" in message
    assert "exclude_tools(tools=['math__search'])" in message
    # without the state, include_tools cannot tell: it leaves the exclusion (fail closed)
    update = include_tools(tools=["notes__search"], catalog=both)
    assert {"notes__search", "math__search"} <= excluded(both, apply_update(values, update))
    # the way out the message gives: exclude math's by its own name first
    step = run_command(both, values, "exclude_tool", {"tool": "math__search"}, by_user=True)
    values = apply_update(values, step.update)
    step = run_command(both, values, "include_tool", {"tool": "notes__search"}, by_user=True)
    values = apply_update(values, step.update)
    assert "notes__search" not in excluded(both, values)
    assert "math__search" in excluded(both, values)
    assert SessionContext.from_state(values).tools == {
        "math__search": "exclude",
        "notes__search": "include",
    }


def test_including_every_tool_an_alias_excludes_lifts_it(both: MCPToolCatalog) -> None:
    values = exclude_tools(tools=["search"])
    update = include_tools(tools=["notes__search", "math__search"], catalog=both, state=values)
    after = apply_update(values, update)
    assert excluded(both, after).isdisjoint({"notes__search", "math__search"})


# --- allowed_tools / allowed_servers naming nothing, at load ---------------------------------


def test_a_load_refuses_an_allowed_tools_name_of_no_tool_naming_the_closest() -> None:
    with (
        pytest.raises(ValueError, match=r"allowed_tools names \['notes:serch'\].*'notes:search'"),
        load({"notes": NOTES}, allowed_tools=["notes:serch"]),
    ):
        pass
    with (
        pytest.raises(ValueError, match=r"allowed_servers names \['note'\].*Servers: \['notes'\]"),
        load({"notes": NOTES}, allowed_servers=["note"]),
    ):
        pass


def test_a_load_warns_of_an_allowed_tools_pattern_matching_no_tool() -> None:
    with load({"notes": NOTES}, allowed_tools=["notes:serch*", "list_notes"]) as (catalog, caught):
        assert catalog.tool_names == ["list_notes"]
        assert any("['notes:serch*'] match no tool" in w for w in caught)


def test_a_partial_load_warns_of_an_allowed_tool_it_cannot_find_and_accepts_the_failed_ones() -> (
    None
):
    allowed = ["math:search", "math__add", "add", "list_notes"]
    with load({"notes": NOTES, "math": DOWN}, allowed_tools=allowed) as (catalog, caught):
        assert catalog.tool_names == ["list_notes"]
        about = [w for w in caught if "allowed_tools" in w]
        assert len(about) == 1  # 'add' may be math's: it failed to load
        assert "'add'" in about[0] and "['math']" in about[0]
        assert "math:search" not in about[0] and "math__add" not in about[0]


def test_a_local_tools_exclusion_refuses_the_mcp_tools_include_without_a_circular_way_out() -> None:
    """A local ``search`` makes notes' tool ``notes__search`` (alias ``search``): excluding
    the local tool excludes notes' too (the bare name cannot tell them apart: it may have been
    made while notes' tool was plain ``search``). Including ``notes__search`` is refused
    saying so and how to include it; not "exclude 'search' under its own name first", which
    is the exclusion already there (review 21a)."""

    @tool
    def search(query: str) -> str:
        """Search the web."""
        return "web " + query

    with load({"notes": NOTES}, local_tools=[search]) as (catalog, _):
        assert catalog.get("notes__search").aliases == ("search",)
        values = exclude_tools(tools=["search"])
        assert {"search", "notes__search"} <= excluded(catalog, values)
        with pytest.raises(ValueError) as info:
            include_tools(tools=["notes__search"], catalog=catalog, state=values)
        message = str(info.value)
        assert "First exclude" not in message and "the name of another tool" in message
        assert "include_tools(tools=['notes__search', 'search'])" in message
        both = include_tools(tools=["notes__search", "search"], catalog=catalog, state=values)
        assert excluded(catalog, apply_update(values, both)).isdisjoint({"search", "notes__search"})
