"""An MCP tool's catalog name depends on the other servers loaded (the ``<server>__`` prefix
comes with a collision and goes with it); the thread's exclusions and the loader's
``tool_metadata`` / ``categories`` keys follow the tool through both names (its aliases). The
user's include lifts a tool's exclusions under its aliases, failing closed for an alias that
also fits another tool; the model's refused include names the alias; and ``allowed_tools`` /
``allowed_servers`` entries naming nothing are refused at load (warned of while a server failed
to load).

Real FastMCP servers over stdio (``examples/mcp_servers``): ``math`` and ``notes`` both list
``search``, so with both loaded notes' tool is ``notes__search``; with ``math`` down (a server
that cannot start) it is plain ``search``. Only the chat model is scripted.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from mcp_servers import stdio

from langgraph_toolbudget import (
    ToolBudgetMiddleware,
    ToolCatalog,
    create_toolbudget_agent,
    exclude_tools,
    include_tools,
    set_include_mode,
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
from langgraph_toolbudget.core.spec import ToolSpec
from langgraph_toolbudget.mcp import MCPLoadWarning, MCPToolCatalog, load_mcp_catalog_sync
from langgraph_toolbudget.mcp.names import assign_names
from langgraph_toolbudget.testing import ScriptedChatModel

MATH, NOTES = stdio("math_server.py"), stdio("notes_server.py")
DOWN = stdio("no_such_server.py")  # python starts, cannot open the file, exits


@contextmanager
def load(connections: dict[str, Any], **options: Any) -> Iterator[tuple[MCPToolCatalog, list[str]]]:
    """The catalog of ``connections`` and the texts of its load's MCPLoadWarnings; closed after."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        catalog = load_mcp_catalog_sync(connections, **options)
    try:
        yield catalog, [str(w.message) for w in caught if issubclass(w.category, MCPLoadWarning)]
    finally:
        catalog.close()


@pytest.fixture(scope="module")
def both() -> Iterator[MCPToolCatalog]:
    """notes and math: notes' tool is ``notes__search``."""
    with load({"notes": NOTES, "math": MATH}) as (catalog, _):
        yield catalog


@pytest.fixture(scope="module")
def math_down() -> Iterator[MCPToolCatalog]:
    """notes, and math failing to start: notes' tool is plain ``search``."""
    with load({"notes": NOTES, "math": DOWN}) as (catalog, _):
        yield catalog


def tool_messages(messages: list[Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def search_script(name: str) -> list[Any]:
    return [
        AIMessage("", tool_calls=[{"name": "add_tool", "args": {"tool_names": [name]}, "id": "a"}]),
        AIMessage("", tool_calls=[{"name": name, "args": {"query": "milk"}, "id": "s"}]),
        "done",
    ]


def run_after_restart(
    before: MCPToolCatalog, excluded: str, after: MCPToolCatalog, name: str, api: str
) -> tuple[dict[str, Any], ScriptedChatModel]:
    """Exclude ``excluded`` in a thread run on ``before``; run the thread's next turn on
    ``after`` (a restart with other servers up), the model loading and calling ``name``."""
    saver, cfg = InMemorySaver(), {"configurable": {"thread_id": "t"}}
    model = ScriptedChatModel(responses=search_script(name))

    def app(catalog: MCPToolCatalog, chat: ScriptedChatModel) -> Any:
        if api == "nodes":
            return create_toolbudget_agent(chat, catalog).compile(checkpointer=saver)
        return create_agent(chat, middleware=[ToolBudgetMiddleware(catalog)], checkpointer=saver)

    first = app(before, ScriptedChatModel(responses=["ok"]))
    update_context(first, cfg, exclude_tools(tools=[excluded]))
    first.invoke({"messages": [HumanMessage("hello")]}, cfg)
    out = app(after, model).invoke({"messages": [HumanMessage("search notes for milk")]}, cfg)
    return out, model


@pytest.mark.parametrize("api", ["nodes", "middleware"])
def test_an_exclusion_follows_the_tool_when_its_prefix_goes_with_a_server_that_is_down(
    both: MCPToolCatalog, math_down: MCPToolCatalog, api: str
) -> None:
    assert "notes__search" in both and "search" in math_down
    out, model = run_after_restart(both, "notes__search", math_down, "search", api)
    answer = tool_messages(out["messages"])["s"]
    assert answer.status == "error"
    assert "'search' was excluded from this conversation's tool context" in answer.text
    assert "under its other name 'notes__search'" in answer.text
    assert all("search" not in bound for bound in model.bound_tools)
    assert "search" not in out["selected_tools"]


def test_an_exclusion_of_a_bare_name_excludes_every_tool_that_now_carries_it(
    math_down: MCPToolCatalog, both: MCPToolCatalog
) -> None:
    out, model = run_after_restart(math_down, "search", both, "notes__search", "nodes")
    answer = tool_messages(out["messages"])["s"]
    assert answer.status == "error" and "under its other name 'search'" in answer.text
    # fail closed: 'search' now fits notes' and math's tool, and excludes both
    ctx = SessionContext(tools={"search": "exclude"})
    assert {"notes__search", "math__search"} <= ctx.excluded(both)
    assert ctx.refusal(both, "math__search") is not None
    assert all({"notes__search", "math__search"}.isdisjoint(b) for b in model.bound_tools)


def test_an_inclusion_and_a_mode_apply_to_the_exact_name_only(
    both: MCPToolCatalog, math_down: MCPToolCatalog
) -> None:
    ctx = SessionContext.from_state(
        {
            **include_tools(tools=["notes__search"]),
            "context_tool_modes": {"notes__search": "always"},
        }
    )
    assert ctx.decision(both.get("notes__search")) == "include"
    spec = math_down.get("search")
    assert spec is not None and spec.aliases == ("notes__search",)
    assert ctx.decision(spec) is None and ctx.mode(spec) == "agent"
    assert "search" not in ctx.free(math_down, math_down.always_visible)


def test_aliases_are_the_name_with_and_without_the_servers_prefix(
    both: MCPToolCatalog, math_down: MCPToolCatalog
) -> None:
    assert both.get("notes__search").aliases == ("search",)
    assert both.get("math__search").aliases == ("search",)
    assert both.get("add_note").aliases == ("notes__add_note",)
    assert math_down.get("search").aliases == ("notes__search",)
    assert (
        math_down.get("notes__read_resource") is None
        or not math_down.get("notes__read_resource").aliases
    )


def test_tool_metadata_keyed_by_the_prefixed_name_applies_while_the_other_server_is_down() -> None:
    meta = {"notes__search": {"enabled": False}, "list_notes": {"timeout_s": 3}}
    for connections in ({"notes": NOTES, "math": MATH}, {"notes": NOTES, "math": DOWN}):
        with load(connections, tool_metadata=meta, categories={"find": ["notes__search"]}) as (
            catalog,
            _,
        ):
            assert "notes__search" not in catalog and "search" not in catalog
            assert catalog.is_disabled(
                "notes__search" if "math" in catalog.categories else "search"
            )
            assert catalog.get("list_notes").timeout_s == 3


def test_tool_metadata_keys_follow_the_tool_with_or_without_its_prefix() -> None:
    meta = {"add_note": {"timeout_s": 2}}
    with load({"notes": NOTES}, tool_metadata=meta, tool_name_prefix=True) as (catalog, _):
        assert catalog.get("notes__add_note").timeout_s == 2
    meta = {"notes__add_note": {"timeout_s": 4}}
    with load({"notes": NOTES}, tool_metadata=meta, categories={"w": ["notes__add_note"]}) as (
        catalog,
        _,
    ):
        assert catalog.get("add_note").timeout_s == 4
        assert catalog.tools_in("w") == ["add_note"]


def test_a_key_that_fits_two_tools_is_refused_naming_both() -> None:
    both_search = {"notes": NOTES, "math": MATH}
    with (
        pytest.raises(ValueError, match=r"'search'.*\['math__search', 'notes__search'\]"),
        load(both_search, tool_metadata={"search": {"enabled": False}}),
    ):
        pass


def test_an_unknown_key_is_warned_of_on_a_partial_load_unless_it_names_the_failed_server() -> None:
    meta = {"nothing_here": {"enabled": False}, "math__search": {"timeout_s": 1}}
    with load({"notes": NOTES, "math": DOWN}, tool_metadata=meta) as (_, caught):
        about_keys = [w for w in caught if "ignored" in w]
        assert len(about_keys) == 1
        assert "'nothing_here'" in about_keys[0] and "['math']" in about_keys[0]
        assert "math__search" not in about_keys[0]  # may be math's: it failed to load
    with (
        pytest.raises(ValueError, match="'nothing_here', which is not a tool"),
        load({"notes": NOTES}, tool_metadata={"nothing_here": {"enabled": False}}),
    ):
        pass


# --- review 21a: an imitating name, a re-cut name, a restrictive mode -------------------------

HOSTILE = Path(__file__).resolve().parent / "mcp_servers" / "hostile_server.py"


def hostile(scenario: str) -> dict[str, Any]:
    """A stdio connection to ``hostile_server.py <scenario>``."""
    return {"transport": "stdio", "command": sys.executable, "args": [str(HOSTILE), scenario]}


def test_an_exclusion_of_an_imitating_name_follows_it_once_the_imitated_server_is_added() -> None:
    """``evil`` lists ``good__get_weather``: plain while no ``good`` server is configured, then
    ``evil__good__get_weather`` once the operator adds ``good``. The thread's exclusion of
    ``good__get_weather`` still refuses evil's tool (it was lost, and the call was sent), and
    excludes good's own ``get_weather`` (alias ``good__get_weather``) too: it fails closed."""
    evil, good = hostile("impersonate"), hostile("good")
    saver, cfg = InMemorySaver(), {"configurable": {"thread_id": "t"}}
    with load({"evil": evil}) as (before, _):
        assert "good__get_weather" in before
        app = create_toolbudget_agent(ScriptedChatModel(responses=["ok"]), before)
        app = app.compile(checkpointer=saver)
        update_context(app, cfg, exclude_tools(tools=["good__get_weather"]))
        app.invoke({"messages": [HumanMessage("hello")]}, cfg)
    with load({"evil": evil, "good": good}) as (after, _):
        name = "evil__good__get_weather"
        assert after.get(name).aliases == ("good__get_weather",)
        model = ScriptedChatModel(responses=search_script(name))
        app = create_toolbudget_agent(model, after).compile(checkpointer=saver)
        out = app.invoke({"messages": [HumanMessage("the weather?")]}, cfg)
        answer = tool_messages(out["messages"])["s"]
        assert answer.status == "error" and "evil: sunny" not in answer.text
        assert "under its other name 'good__get_weather'" in answer.text
        assert {name, "get_weather"} <= SessionContext.from_state(out).excluded(after)


def test_a_key_never_follows_an_imitating_names_bare_alias() -> None:
    """The operator's ``good__get_weather`` key is good's tool's alias; evil's imitating tool
    answers to it for exclusions only, so the key is neither ambiguous nor captured."""
    meta = {"good__get_weather": {"timeout_s": 7}}
    with load({"evil": hostile("impersonate"), "good": hostile("good")}, tool_metadata=meta) as (
        catalog,
        _,
    ):
        assert catalog.get("get_weather").timeout_s == 7
        assert catalog.get("evil__good__get_weather").timeout_s != 7


def test_a_recut_name_depends_on_its_own_servers_list_only() -> None:
    """``a_b`` and ``a.b`` of one server both map to ``a_b``; the second's name carries a hash
    of its server and MCP name, never of how many names the other servers took before it."""
    lists = {"other": ["p", "q", "r"], "notes": ["a_b", "a.b"]}
    names = set()
    for listed in (lists, {"notes": lists["notes"]}, {"zzz": ["s"] * 1, **lists}):
        for prefix in (False, True):
            choice = assign_names(listed, servers=["other", "notes", "zzz"], prefix=prefix)
            names.add(choice.names[("notes", "a.b")])
            assert choice.names[("notes", "a_b")] == "notes__a_b"
            hashed = choice.names[("notes", "a.b")][-9:]
            alias = choice.aliases[("notes", "a.b")]
            # its hashed forms, and (for exclusions only) its plain ones: without ``a_b``
            # listed, ``a.b`` was plain ``a_b`` (or ``notes__a_b``)
            assert {a for a in alias if not a.endswith(hashed)} == {"a_b", "notes__a_b"}
            assert set(choice.imitations[("notes", "a.b")]) == {"a_b", "notes__a_b"}
    assert len(names) == 1 and names.pop().startswith("notes__a_b_")


def _stub(name: str) -> BaseTool:
    return StructuredTool.from_function(lambda: name, name=name, description=f"tool {name}")


def test_an_exclusion_follows_a_tool_recut_when_a_sibling_with_its_safe_form_is_listed() -> None:
    """Deployment 1 lists only ``a_b`` (plain ``a_b``), which the thread excludes; deployment 2
    lists ``a.b`` ahead of it, so ``a.b`` takes ``notes__a_b`` and ``a_b`` is recut with a
    hash. The exclusion still covers ``a_b`` (and ``a.b`` too: fail closed), and the
    operator's key ``a_b`` never resolves through the recut tool's plain forms."""
    first = assign_names({"notes": ["a_b"]}, servers=["notes"])
    assert first.names[("notes", "a_b")] == "a_b"
    second = assign_names({"notes": ["a.b", "a_b"]}, servers=["notes"])
    recut = second.names[("notes", "a_b")]
    assert recut.startswith("notes__a_b_") and second.names[("notes", "a.b")] == "notes__a_b"
    assert "a_b" in second.aliases[("notes", "a_b")]
    assert "a_b" in second.imitations[("notes", "a_b")]  # exclusions only, never a key
    specs = [
        ToolSpec(name=name, tool=_stub(name), server="notes", aliases=second.aliases[pair])
        for pair, name in second.names.items()
    ]
    catalog = ToolCatalog(specs)
    context = SessionContext(tools={"a_b": "exclude"})
    assert context.excluded(catalog) == {recut, "notes__a_b"}


def test_a_manual_mode_follows_the_tool_through_its_alias(
    both: MCPToolCatalog, math_down: MCPToolCatalog
) -> None:
    """A thread that set notes' tool to ``manual`` as ``notes__search`` keeps it out of the
    budget's choices once it is plain ``search`` (math down): a restrictive mode follows the
    tool, as an exclusion does; ``always`` / ``agent`` stay with the exact name."""
    saver, cfg = InMemorySaver(), {"configurable": {"thread_id": "t"}}
    app = create_toolbudget_agent(ScriptedChatModel(responses=["ok"]), both)
    app = app.compile(checkpointer=saver)
    update_context(app, cfg, set_include_mode("manual", tools=["notes__search"]))
    app.invoke({"messages": [HumanMessage("hello")]}, cfg)
    model = ScriptedChatModel(responses=["done"])
    app = create_toolbudget_agent(model, math_down, max_tools=5).compile(checkpointer=saver)
    out = app.invoke({"messages": [HumanMessage("search my notes for milk")]}, cfg)
    assert "search" not in out["selected_tools"]
    assert all("search" not in bound for bound in model.bound_tools)
    ctx = SessionContext(tool_modes={"notes__search": "manual"})
    assert ctx.mode(math_down.get("search")) == "manual"
    assert "search" in ctx.unselectable(math_down)
    exact = SessionContext(tool_modes={"notes__search": "manual", "search": "agent"})
    assert exact.mode(math_down.get("search")) == "agent"  # the exact name's mode wins


# --- the user's include, and the filters at load (allowed_tools / allowed_servers) ---------


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
