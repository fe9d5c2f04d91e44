"""Built-in tools: the ``enabled_builtins`` gate and the family extension point."""

from __future__ import annotations

import json
import operator
import warnings
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition

from langgraph_toolbudget import (
    BudgetConfig,
    CallModel,
    ChooseTools,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
)
from langgraph_toolbudget.core.gating import BuiltinFilter
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.execution.batch import BatchRunner
from langgraph_toolbudget.execution.builtin_family import (
    BuiltinContext,
    BuiltinResult,
    BuiltinTools,
    merge_update,
)
from langgraph_toolbudget.execution.builtins import Builtins
from langgraph_toolbudget.execution.meta_tools import MetaTools
from langgraph_toolbudget.nodes.agent import ToolAgent
from langgraph_toolbudget.nodes.selection import ToolSearch
from langgraph_toolbudget.testing import ScriptedChatModel

META = ["request_more_tools", "search_tools", "add_tool", "show_all_tools"]


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def _catalog(**metadata: Any) -> ToolCatalog:
    return ToolCatalog.from_tools(
        [get_weather, send_email],
        categories={"weather": ["get_weather"], "email": ["send_email"]},
        **metadata,
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, META),
        (["search_tools", "add_tool"], ["search_tools", "add_tool"]),
        # Patterns match every family's names, the opt-in ones too (tool-context tools).
        (
            ["*_tools"],
            ["request_more_tools", "search_tools", "show_all_tools", "list_tools"]
            + ["list_context_tools"],
        ),
        ({"deny": ["show_all_tools"]}, META[:3]),
        ({"allow": ["add_tool", "show_all_tools"], "deny": ["show_all_tools"]}, ["add_tool"]),
        ([], []),
    ],
)
def test_gate_chooses_the_bound_builtins(value: Any, expected: list[str]) -> None:
    config = BudgetConfig(enabled_builtins=value, offload_over_chars=None)  # meta-tools only
    builtins = Builtins(_catalog(), config)
    assert list(builtins.names) == expected


@pytest.mark.parametrize("value", ["search_tools", {"only": ["x"]}, [1], 3, [""]])
def test_bad_gate_names_the_accepted_shapes(value: Any) -> None:
    with pytest.raises(TypeError, match="enabled_builtins must be None, a list"):
        BudgetConfig(enabled_builtins=value)


def test_gate_is_hashable_and_round_trips() -> None:
    config = BudgetConfig(enabled_builtins={"deny": ["show_all_tools"]})
    assert config.builtin_filter == BuiltinFilter(allow=None, deny=("show_all_tools",))
    assert hash(config) == hash(BudgetConfig(enabled_builtins={"deny": ["show_all_tools"]}))


def test_disabled_builtin_is_refused_like_an_unknown_tool() -> None:
    executor = ToolExecutor(
        _catalog(), config=BudgetConfig(enabled_builtins={"deny": ["add_tool"]})
    )
    call = ToolCall(name="add_tool", args={"tool_names": ["send_email"]}, id="c1")
    out = executor.invoke({"messages": [HumanMessage("x"), AIMessage("", tool_calls=[call])]})
    (message,) = out["messages"]
    assert message.status == "error"
    assert "send_email" not in out.get("selected_tools", [])


@pytest.mark.parametrize(
    ("gate", "not_loaded", "unknown"),
    [
        (None, "Load it first with add_tool(tool_names=['send_email'])", "call add_tool("),
        (
            {"deny": ["add_tool"]},
            "Load it first with request_more_tools(categories=['email'], reason='send_email')",
            "To load a tool: request_more_tools(categories=[...]) for a whole category.",
        ),
        (["search_tools"], "cannot load other tools", "cannot load other tools"),
    ],
)
def test_a_refusal_names_only_the_loading_tools_the_model_has(
    gate: Any, not_loaded: str, unknown: str
) -> None:
    """With add_tool (or every way to load) turned off, a refusal does not send the model to
    a tool it does not have."""
    executor = ToolExecutor(_catalog(), config=BudgetConfig(enabled_builtins=gate))
    calls = [ToolCall(name="send_email", args={"to": "a"}, id="c1")]
    calls.append(ToolCall(name="send_mail_now", args={}, id="c2"))
    state = {"messages": [HumanMessage("x"), AIMessage("", tool_calls=calls)]}
    first, second = executor.invoke({**state, "selected_tools": ["get_weather"]})["messages"]
    assert not_loaded in first.content and unknown in second.content
    if gate is not None:
        assert "add_tool" not in first.content + second.content


@pytest.mark.parametrize(
    ("gate", "says", "category"),
    [
        (None, "Use 'add_tool' to load the ones you need", None),
        ({"deny": ["add_tool"]}, "call request_more_tools(categories=[...])", "email"),
        (["search_tools"], "cannot load other tools", None),
    ],
)
def test_a_search_answer_names_only_the_loading_tools_the_model_has(
    gate: Any, says: str, category: str | None
) -> None:
    """search_tools does not tell a model without add_tool to use add_tool: with
    request_more_tools it gives each tool's category to load, else it says none loads."""
    executor = ToolExecutor(_catalog(), config=BudgetConfig(enabled_builtins=gate))
    call = ToolCall(name="search_tools", args={"query": "email"}, id="c1")
    state = {"messages": [HumanMessage("x"), AIMessage("", tool_calls=[call])]}
    (message,) = executor.invoke(state)["messages"]
    answer = json.loads(message.content)
    assert says in answer["message"]
    assert [t["name"] for t in answer["tools"]] == ["send_email"]
    assert answer["tools"][0].get("category") == category
    if gate is not None:
        assert "add_tool" not in answer["message"]


@pytest.mark.parametrize(("gate", "lists"), [(None, True), ({"deny": ["show_all_tools"]}, False)])
def test_a_search_that_finds_nothing_names_show_all_tools_only_when_the_model_has_it(
    gate: Any, lists: bool
) -> None:
    executor = ToolExecutor(_catalog(), config=BudgetConfig(enabled_builtins=gate))
    call = ToolCall(name="search_tools", args={"query": "zzzqqq_nothing"}, id="c1")
    state = {"messages": [HumanMessage("x"), AIMessage("", tool_calls=[call])]}
    (message,) = executor.invoke(state)["messages"]
    answer = json.loads(message.content)
    assert answer["found"] == 0 and answer["message"].startswith("No tools found")
    assert ("show_all_tools" in answer["message"]) is lists


def test_meta_tool_descriptions_name_only_enabled_meta_tools() -> None:
    """The bound descriptions point to no meta-tool the model lacks; with every one on they
    are as before."""
    by_name = {
        t.name: t.description
        for t in MetaTools(_catalog(), BudgetConfig(enabled_builtins=None)).definitions()
    }
    assert by_name["search_tools"].endswith("added with add_tool before you can call them.")
    assert by_name["add_tool"].endswith("Use this after finding tools with search_tools.")
    assert by_name["show_all_tools"].endswith(
        "use search_tools with a name to get its description."
    )
    for gate, leaks in [
        (["search_tools", "request_more_tools"], "add_tool"),
        (["search_tools"], "request_more_tools"),
        (["add_tool", "show_all_tools"], "search_tools"),
    ]:
        family = MetaTools(_catalog(), BudgetConfig(enabled_builtins=gate))
        bound = [t for t in family.definitions() if t.name in gate]
        assert all(leaks not in t.description for t in bound), (gate, bound)


def test_add_tool_and_a_cut_listing_do_not_point_to_a_search_the_model_lacks() -> None:
    handler = MetaTools(_catalog(), BudgetConfig(enabled_builtins=["add_tool"])).handler
    answer = handler.handle("add_tool", {"tool_names": ["send_mail_now"]}, WorkingSet())
    assert "check the spelling" in answer.content and "search_tools" not in answer.content
    many = ToolCatalog.from_tools(
        [
            StructuredTool.from_function(get_weather, name=f"weather_tool_{i:05d}")
            for i in range(1500)
        ]
    )
    handler = MetaTools(many, BudgetConfig(enabled_builtins=["show_all_tools"])).handler
    listing = json.loads(handler.handle("show_all_tools", {}, WorkingSet()).content)
    assert "more tools are not listed here" in listing["message"]
    assert "search_tools" not in listing["message"]


def test_prompt_section_explains_only_enabled_builtins() -> None:
    model = ScriptedChatModel(responses=["ok"])
    agent = ToolAgent(model, _catalog(), config=BudgetConfig(enabled_builtins=["add_tool"]))
    agent.invoke({"messages": [HumanMessage("hi")]})
    assert model.bound_tools == [["add_tool"]]
    section = agent.call_model.caller.section
    assert "add_tool(tool_names=[...])" in section
    assert "search_tools" not in section and "request_more_tools" not in section


def test_no_builtins_no_widening_text() -> None:
    agent = ToolAgent(
        ScriptedChatModel(responses=["ok"]), _catalog(), config=BudgetConfig(enabled_builtins=[])
    )
    assert "If your tools cannot do the task" not in agent.call_model.caller.section


def test_catalog_tool_named_like_a_builtin_needs_the_builtin_off() -> None:
    def search_tools(query: str) -> str:
        """A tool of the app that happens to share a meta-tool's name."""
        return query

    catalog = ToolCatalog.from_tools([search_tools])
    with pytest.raises(ValueError, match="enabled_builtins=\\{'deny'"):
        ToolExecutor(catalog)
    executor = ToolExecutor(
        catalog,
        config=BudgetConfig(enabled_builtins={"deny": ["search_tools"]}),
        enforce_visibility=False,
    )
    call = ToolCall(name="search_tools", args={"query": "abc"}, id="c1")
    out = executor.invoke({"messages": [AIMessage("", tool_calls=[call])]})
    assert out["messages"][0].content == "abc"  # the catalog tool ran, not the meta-tool


def test_auto_tool_search_is_gated() -> None:
    state = {"messages": [HumanMessage("send an email to ada")]}
    assert ToolSearch(_catalog()).invoke(state)["selected_tools"]["add"] == ["send_email"]
    assert ToolSearch(_catalog(), enabled_builtins={"deny": ["tool_search"]}).invoke(state) == {}
    assert ToolSearch(_catalog(), enabled_builtins=["add_tool"]).invoke(state) == {}


def test_auto_tool_search_needs_deferred_tools() -> None:
    always = _catalog(
        tool_metadata={n: {"include": "always"} for n in ("get_weather", "send_email")}
    )
    node = ToolSearch(always)
    assert node.enabled is False
    assert node.invoke({"messages": [HumanMessage("send an email")]}) == {}


class _Notes(BuiltinTools):
    """A family that keeps notes in the state: exercises updates and the async path."""

    default_enabled = False

    def definitions(self) -> list[BaseTool]:
        def note(text: str) -> str:
            """Keep a note for later in this thread."""
            raise AssertionError("built-ins never run as tools")

        return [StructuredTool.from_function(note)]

    def handle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        text = call["args"].get("text")
        if not isinstance(text, str):
            return BuiltinResult("Error: note expects text (a string).", error=True)
        seen = len(ctx.state.get("notes", []))
        return BuiltinResult(f"noted ({seen} before)", update={"notes": [text]}, artifact={"n": 1})


def _runner(enabled: Any) -> BatchRunner:
    catalog = _catalog()
    config = BudgetConfig(enabled_builtins=enabled)
    return BatchRunner(catalog, config, builtins=[MetaTools(catalog, config), _Notes()])


def test_opt_in_family_is_off_by_default() -> None:
    assert "note" not in _runner(None).builtins
    assert "note" in _runner({"allow": [*META, "note"]}).builtins


@pytest.mark.parametrize("use_async", [False, True])
async def test_family_answers_in_call_order_and_merges_updates(use_async: bool) -> None:
    runner = _runner(["note", "get_weather"])
    calls = [
        ToolCall(name="note", args={"text": "a"}, id="1"),
        ToolCall(name="get_weather", args={"city": "Oslo"}, id="2"),
        ToolCall(name="note", args={"text": 5}, id="3"),
        ToolCall(name="note", args={"text": "b"}, id="4"),
    ]
    state = {"messages": [HumanMessage("x")], "notes": ["old"], "selected_tools": ["get_weather"]}
    working = runner.working_set(state)
    if use_async:
        outcome = await runner.arun(calls, state, {}, working)
    else:
        outcome = runner.run(calls, state, {}, working)
    messages = outcome.messages
    assert [m.tool_call_id for m in messages] == ["1", "2", "3", "4"]
    assert messages[0].content == "noted (1 before)" and messages[0].artifact == {"n": 1}
    assert messages[1].content == "Sunny in Oslo"
    assert messages[2].status == "error" and "expects text" in messages[2].content
    assert outcome.update == {"notes": ["a", "b"]}


class _NotesState(ToolBudgetState):
    notes: Annotated[list[str], operator.add]


def test_agent_loop_sees_updates_of_earlier_iterations() -> None:
    catalog = _catalog()
    seen: list[str] = []

    def script(messages: list[Any], tools: list[str]) -> AIMessage:
        done = [m for m in messages if isinstance(m, ToolMessage)]
        seen.extend(m.content for m in done[-1:])
        if len(done) < 2:
            return AIMessage(
                "", tool_calls=[ToolCall(name="note", args={"text": "t"}, id=str(len(done)))]
            )
        return AIMessage("done")

    config = BudgetConfig(enabled_builtins=["note"])
    executor = ToolExecutor(catalog, config=config)
    executor.runner = BatchRunner(catalog, config, builtins=[_Notes()])
    loop = StateGraph(_NotesState)
    loop.add_node("agent", CallModel(ScriptedChatModel(responses=[script] * 3), catalog))
    loop.add_node("tools", executor)
    loop.add_edge(START, "agent")
    loop.add_conditional_edges("agent", tools_condition)
    loop.add_edge("tools", "agent")
    out = loop.compile().invoke({"messages": [HumanMessage("x")], "notes": []})
    assert seen == ["noted (0 before)", "noted (1 before)"]
    assert out["notes"] == ["t", "t"]


def test_merge_update_rules() -> None:
    into: dict[str, Any] = {"a": [1], "b": {"x": 1}, "c": 1}
    merge_update(into, {"a": [2], "b": {"y": 2}, "c": 3, "d": "new"})
    assert into == {"a": [1, 2], "b": {"x": 1, "y": 2}, "c": 3, "d": "new"}


@pytest.mark.parametrize(
    "value", [["serch_tools", "add_tool"], {"deny": ["show_all_tool"]}, ["tool_serch"]]
)
def test_a_misspelt_built_in_name_is_refused(value: Any) -> None:
    """Was a warning (review 50c): the agent built with the built-in meant off."""
    with pytest.raises(ValueError, match="Closest built-ins"):
        ToolExecutor(_catalog(), config=BudgetConfig(enabled_builtins=value))


@pytest.mark.parametrize("node", [ToolSearch, ChooseTools])
def test_a_misspelt_built_in_name_is_refused_by_the_selection_nodes(node: Any) -> None:
    """A graph of the selection nodes alone (the README's first) binds no built-in: "tool_serch"
    turned the automatic search off without a word."""
    with pytest.raises(ValueError, match="'tool_serch' -> 'tool_search'"):
        node(_catalog(), enabled_builtins=["search_tools", "tool_serch"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        node(_catalog(), enabled_builtins={"deny": ["tool_search"]})


@pytest.mark.parametrize("value", [["note"], ["search_*"], {"deny": ["tool_search"]}, None])
def test_names_of_your_own_families_patterns_and_real_names_are_not_warned_of(value: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ToolExecutor(_catalog(), config=BudgetConfig(enabled_builtins=value))
