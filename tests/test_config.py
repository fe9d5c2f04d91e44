"""BudgetConfig: validated once, shared by every node, overridable per node."""

from __future__ import annotations

import inspect
import math
import re
from typing import Any

import pydantic
import pytest
from agent_tools import Recorder, call, recording_catalog
from langchain_core.messages import AIMessage, HumanMessage

from langgraph_toolbudget import (
    BudgetConfig,
    BudgetOptions,
    CallModel,
    ChooseTools,
    ClassifyIntent,
    SelectTools,
    ToolAgent,
    ToolExecutor,
    ToolSearch,
    create_toolbudget_agent,
)
from langgraph_toolbudget.testing import ScriptedChatModel


@pytest.fixture
def catalog():
    return recording_catalog(Recorder())


def test_budget_config_defaults_and_budget_resolution():
    config = BudgetConfig()
    assert config.budget == 8 and config.mode == "parallel_safe" and config.max_visible is None
    assert BudgetConfig(model_size="qwen3:8b").budget == 5
    assert BudgetConfig(model_size="llama-3.1-70b").budget == 10
    assert BudgetConfig(model_size=3).budget == 2
    assert BudgetConfig(max_tools=3, model_size="qwen3:70b").budget == 3  # explicit wins


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"max_tools": -1}, ValueError, "max_tools must be >= 0"),
        ({"max_tools": "8"}, TypeError, "max_tools must be an integer"),
        ({"max_tools": True}, TypeError, "max_tools"),
        ({"min_per_category": -5}, ValueError, "min_per_category must be >= 0"),
        ({"max_categories": 0}, ValueError, "max_categories"),
        ({"search_limit": 2.5}, TypeError, "search_limit"),
        ({"max_visible": 0}, ValueError, "max_visible must be >= 1"),
        ({"mode": "turbo"}, ValueError, "'sequential' or 'parallel_safe'"),
        ({"max_iterations": 0}, ValueError, "max_iterations"),
        ({"max_meta_calls": -1}, ValueError, "max_meta_calls"),
        ({"enforce_visibility": "yes"}, TypeError, "enforce_visibility"),
        ({"pinned": "ab"}, TypeError, r"pinned must be a list of tool names \(e.g. \['ab'\]\)"),
        ({"pinned": [1]}, TypeError, "pinned must be a list of strings"),
        ({"model_size": "gpt-4o"}, ValueError, "cannot tell the size"),
        ({"runtime_mode": "staging"}, ValueError, "runtime_mode must be 'production' or 'debug'"),
        ({"retriever_weight": 1.5}, ValueError, r"retriever_weight must be in \[0, 1\]"),
        ({"usage": "yes"}, TypeError, "usage must be a ToolUsage"),
        ({"model_size": math.nan}, ValueError, "model_size"),
        ({"model_size": -5}, ValueError, "model_size must be a size above 0"),  # was: budget 2
        ({"model_size": 0}, ValueError, "model_size must be a size above 0"),
        ({"model_size": ["8b"]}, TypeError, "model_size"),
        ({"embeddings": "minilm"}, TypeError, "embeddings must be a LangChain Embeddings"),
        ({"max_parallel": 0}, ValueError, "max_parallel must be >= 1"),
        ({"group_limits": [("github", 4)]}, TypeError, "group_limits must be a mapping"),
        ({"group_limits": {"github": 0}}, ValueError, r"group_limits\['github'\] must be >= 1"),
        ({"group_limits": {1: 2}}, TypeError, "group_limits keys"),
    ],
)
def test_budget_config_rejects_bad_options_naming_them(options, error, match):
    with pytest.raises(error, match=match):
        BudgetConfig(**options)


def test_an_option_whose_repr_fails_is_still_named_in_the_error():
    """An int too long to write in decimal made the message itself raise Python's "Exceeds the
    limit (4300 digits)" instead of naming the option (the check shared with load_mcp_catalog,
    ToolUsage and DatabaseToolbox shows such a value bounded)."""
    with pytest.raises(ValueError, match=r"BudgetConfig: option max_visible must be >= 1, got -0x"):
        BudgetConfig(max_visible=-(10**5000))
    with pytest.raises(
        TypeError, match=r"max_tools must be an integer or None, got 'x{60}.*characters"
    ):
        BudgetConfig(max_tools="x" * 500)


@pytest.mark.parametrize(("cpus", "expected"), [(None, 16), (2, 16), (12, 16), (20, 24), (64, 32)])
def test_max_parallel_defaults_to_at_least_toolnodes_pool(monkeypatch, cpus, expected):
    """ToolNode runs sync tools in the interpreter's default pool, min(32, CPUs + 4) threads:
    the executor's default pool is never smaller, so a large batch is never slower."""
    monkeypatch.setattr("os.cpu_count", lambda: cpus)
    assert BudgetConfig().max_parallel == expected
    assert BudgetConfig(max_parallel=3).max_parallel == 3


def test_budget_config_is_frozen_and_override_validates():
    config = BudgetConfig(max_tools=6, max_visible=9, pinned=["get_weather", "get_weather"])
    assert config.pinned == ("get_weather",)  # de-duplicated, a tuple
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        config.max_tools = 3  # type: ignore[misc]
    smaller = config.override(max_tools=3, max_visible=None)  # None is a value: the default cap
    assert (smaller.max_tools, smaller.pinned, config.max_tools) == (3, ("get_weather",), 6)
    assert (smaller.max_visible, config.max_visible) == (None, 9)
    assert config.override() is config
    with pytest.raises(ValueError, match="max_tools"):
        config.override(max_tools=-2)
    with pytest.raises(TypeError, match="no option max_tool; did you mean max_tools"):
        config.override(max_tool=3)


def test_budget_config_refuses_more_pinned_tools_than_max_visible_naming_both(catalog):
    match = r"max_visible=1 is less than the 2 tools in pinned \(get_weather, send_email\)"
    with pytest.raises(ValueError, match=match) as caught:
        BudgetConfig(pinned=["get_weather", "send_email"], max_visible=1)
    assert "raise max_visible or pin fewer tools" in str(caught.value)
    with pytest.raises(ValueError, match=match):
        BudgetConfig(max_visible=1).override(pinned=["get_weather", "send_email"])
    pinned = [catalog.tool_names[0], catalog.tool_names[1]]
    model = ScriptedChatModel(responses=[])
    with pytest.raises(ValueError, match="max_visible=1 is less than the 2 tools in pinned"):
        create_toolbudget_agent(model, catalog, pinned=pinned, max_visible=1)
    with pytest.raises(ValueError, match="max_visible=1 is less than the 2 tools in pinned"):
        SelectTools(catalog, config=BudgetConfig(max_visible=1), pinned=pinned)
    # as many pinned tools as the cap, and a duplicate counted once, are fine
    assert BudgetConfig(pinned=["a", "b", "a"], max_visible=2).pinned == ("a", "b")


def test_budget_options_declares_exactly_the_config_options():
    fields = BudgetConfig.model_fields
    assert set(BudgetOptions.__annotations__) == set(fields)
    assert all(field.description for field in fields.values())  # each documented once, there


@pytest.mark.parametrize(
    "build",
    [
        lambda c: SelectTools(c, max_tool=3),
        lambda c: ToolSearch(c, limit=3),
        lambda c: ToolExecutor(c, modes="sequential"),
        lambda c: create_toolbudget_agent(ScriptedChatModel(responses=[]), c, max_tool=3),
    ],
)
def test_an_unknown_option_names_the_closest_one_and_who_took_it(catalog, build):
    with pytest.raises(TypeError, match=r"has no option \w+;( did you mean \w+\?)? the options"):
        build(catalog)
    with pytest.raises(
        TypeError, match="SelectTools has no option max_tool; did you mean max_tools"
    ):
        SelectTools(catalog, max_tool=3)


def _takes_options() -> dict[str, Any]:
    """Every public entry point that takes ``**options``, as (catalog, keywords) -> a call."""
    from langgraph.graph import StateGraph

    from langgraph_toolbudget import (
        CallModel,
        ChooseTools,
        ToolBudgetInput,
        ToolBudgetMiddleware,
        ToolBudgetState,
        add_toolbudget_nodes,
    )
    from langgraph_toolbudget.nodes.thread_prompt import tools_to_bind

    def model() -> ScriptedChatModel:
        return ScriptedChatModel(responses=[AIMessage("done")])

    def graph() -> StateGraph:
        return StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)

    return {
        "SelectTools": lambda c, kw: SelectTools(c, **kw),
        "ToolSearch": lambda c, kw: ToolSearch(c, **kw),
        "ClassifyIntent": lambda c, kw: ClassifyIntent(c, **kw),
        "ChooseTools": lambda c, kw: ChooseTools(c, **kw),
        "CallModel": lambda c, kw: CallModel(model(), c, **kw),
        "ToolAgent": lambda c, kw: ToolAgent(model(), c, **kw),
        "ToolExecutor": lambda c, kw: ToolExecutor(c, **kw),
        "ToolBudgetMiddleware": lambda c, kw: ToolBudgetMiddleware(c, **kw),
        "create_toolbudget_agent": lambda c, kw: create_toolbudget_agent(model(), c, **kw),
        "add_toolbudget_nodes": lambda c, kw: add_toolbudget_nodes(graph(), model(), c, **kw),
        "tools_to_bind": lambda c, kw: tools_to_bind(c, {"messages": []}, **kw),
    }


def _own_keywords(name: str) -> list[str]:
    import langgraph_toolbudget as package
    from langgraph_toolbudget.nodes.thread_prompt import tools_to_bind

    owner = tools_to_bind if name == "tools_to_bind" else getattr(package, name)
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in inspect.signature(owner).parameters.values() if p.kind in named]


def test_every_entry_point_taking_options_is_checked_for_misspelt_keywords():
    taking = {
        name
        for name, sig in public_signatures()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
        and "config" in sig.parameters
        and "." not in name
    }
    assert {"SelectTools", "ToolBudgetMiddleware", "create_toolbudget_agent"} <= taking
    assert taking <= set(_takes_options())


@pytest.mark.parametrize("entry", sorted(_takes_options()))
def test_a_misspelt_own_keyword_names_the_keyword_and_the_list_holds_it(catalog, entry):
    build = _takes_options()[entry]
    own = _own_keywords(entry)
    assert own and "config" in own
    for keyword in own:
        known = {*own, *BudgetConfig.model_fields}
        typo = next(t for t in (keyword[:-1], keyword + "s", keyword + "_") if t not in known)
        with pytest.raises(TypeError) as error:
            build(catalog, {typo: None})
        text = str(error.value)
        assert text.startswith(f"{entry} has no option {typo}; did you mean {keyword}? "), text
        listed = text.split(" the options are: its own ")[1].split("; BudgetConfig's ")[0]
        assert listed.split(", ") == sorted(own)


@pytest.mark.parametrize(
    ("build", "typo", "meant"),
    [  # near misses the BudgetConfig options alone pointed elsewhere, or nowhere
        (
            lambda c: ClassifyIntent(c, min_relative_scor=0.3),
            "min_relative_scor",
            "min_relative_score",
        ),
        (lambda c: SelectTools(c, strategie="relevance"), "strategie", "strategy"),
        (lambda c: ToolSearch(c, every_turns=True), "every_turns", "every_turn"),
        (
            lambda c: ToolExecutor(c, handle_tool_error=True),
            "handle_tool_error",
            "handle_tool_errors",
        ),
        (
            lambda c: ToolExecutor.from_tools([], handle_tool_error=True),
            "handle_tool_error",
            "handle_tool_errors",
        ),
        (
            lambda c: ToolAgent(ScriptedChatModel(responses=[]), c, system_promt="Be brief."),
            "system_promt",
            "system_prompt",
        ),
        # a former name, too far from today's for a close match
        (lambda c: ToolSearch(c, limit=3), "limit", "search_limit"),
        (lambda c: create_toolbudget_agent(_model(), c, limit=3), "limit", "search_limit"),
    ],
)
def test_a_misspelt_node_keyword_is_pointed_to_it(catalog, build, typo, meant):
    with pytest.raises(TypeError, match=rf"has no option {typo}; did you mean {meant}\? "):
        build(catalog)


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(responses=[AIMessage("done")])


BAD_OWN_KEYWORDS: dict[str, Any] = {
    "name": 3,
    "prefix": None,
    "min_relative_score": "0.5",
    "every_turn": "no",
    "strategy": "best",
    "messages_key": "",
    "tags": "x",
    "after": 3,
    "then": None,
    "state_schema": 3,
    "context_schema": "MyContext",
    "wrap_tool_call": 3,
    "awrap_tool_call": [print, 3],
    "handle_tool_errors": 3,
    "system_prompt": 3,
    "classifier_model": 3,
}
"""A wrong value for every keyword a node or factory takes besides the options: each is
refused at construction, naming who took it, the keyword and what it must be."""
NOT_IN_THE_TABLE = {"catalog", "config", "graph", "model"}  # checked by tests of their own


@pytest.mark.parametrize("entry", sorted(set(_takes_options()) - {"tools_to_bind"}))
def test_every_own_keyword_of_a_node_or_factory_is_checked_naming_it(catalog, entry):
    build = _takes_options()[entry]
    keywords = [k for k in _own_keywords(entry) if k not in NOT_IN_THE_TABLE]
    assert set(keywords) <= set(BAD_OWN_KEYWORDS), "a new keyword needs its rule and a bad value"
    for keyword in keywords:
        value = BAD_OWN_KEYWORDS[keyword]
        with pytest.raises((TypeError, ValueError)) as error:
            build(catalog, {keyword: value})
        text = str(error.value)
        assert text.startswith(f"{entry}: option {keyword} must be "), text
        assert type(value).__name__ in text, text


@pytest.mark.parametrize(
    ("build", "error", "rule"),
    [
        (lambda c: ClassifyIntent(c, min_relative_score=2.0), ValueError, "from 0 to 1"),
        (lambda c: ClassifyIntent(c, min_relative_score=math.nan), ValueError, "from 0 to 1"),
        (lambda c: ClassifyIntent(c, min_relative_score=True), TypeError, "a number"),
        (lambda c: ToolSearch(c, min_relative_score=3), ValueError, "from 0 to 1"),
        (lambda c: ToolSearch(c, min_relative_score=-0.1), ValueError, "from 0 to 1"),
        (lambda c: ToolSearch(c, every_turn=1), TypeError, "True or False"),
        (lambda c: SelectTools(c, strategy=3), TypeError, "'auto', 'categories' or 'relevance'"),
        (lambda c: ToolExecutor(c, handle_tool_errors=(ValueError, "x")), TypeError, "a tuple"),
        (lambda c: ToolExecutor(c, handle_tool_errors=[KeyError]), TypeError, "a tuple of"),
        (lambda c: ToolExecutor(c, tags=["a", 1]), TypeError, "a list of strings"),
        (lambda c: ToolAgent(_model(), c, state_schema=dict), TypeError, "Extend ToolBudgetState"),
        (lambda c: ClassifyIntent(c, model=""), ValueError, "empty model name"),
        (lambda c: CallModel(3, c), TypeError, "CallModel: option model must be a LangChain"),
        (lambda c: ToolAgent(None, c), TypeError, "ToolAgent: option model must be a LangChain"),
        (
            lambda c: create_toolbudget_agent(object(), c),
            TypeError,
            "create_toolbudget_agent: option model must be a LangChain",
        ),
    ],
)
def test_a_node_keyword_out_of_its_range_is_refused_at_construction(catalog, build, error, rule):
    with pytest.raises(error, match=re.escape(rule)):
        build(catalog)


def test_node_keywords_in_their_range_are_taken(catalog):
    for score in (0, 0.0, 0.5, 1, 1.0):
        assert ClassifyIntent(catalog, min_relative_score=score).min_relative_score == score
        assert ToolSearch(catalog, min_relative_score=score).min_relative_score == score
    assert ToolSearch(catalog, every_turn=True).every_turn is True
    assert {SelectTools(catalog, strategy=s).strategy for s in ("auto", "relevance")} == {
        "auto",
        "relevance",
    }
    for handle in (None, True, False, "oops", ValueError, (ValueError, KeyError), str):
        ToolExecutor(catalog, handle_tool_errors=handle, tags=("a",), messages_key="history")
    ToolAgent(_model(), catalog, wrap_tool_call=[lambda r, e: e(r)], awrap_tool_call=None)
    ChooseTools(catalog, prefix="", classifier_model=_model())


def public_signatures() -> list[tuple[str, inspect.Signature]]:
    """Every public callable of the package's API and its public methods."""
    import langgraph_toolbudget as package

    out = []
    for name in package.__all__:
        value = getattr(package, name)
        if not callable(value) or name in ("BudgetConfig", "BudgetOptions"):
            continue
        members = [(name, value)]
        if isinstance(value, type):
            members += [(f"{name}.{a}", getattr(value, a)) for a in vars(value) if a[0] != "_"]
        for label, member in members:
            try:
                out.append((label, inspect.signature(member)))
            except (TypeError, ValueError):  # not a function (a TypedDict, a property...)
                continue
    return out


def test_no_public_signature_spells_out_the_options():
    """What takes ``config=`` takes the options as ``**options: Unpack[BudgetOptions]``; a
    name shared with an option elsewhere is one argument of its own (a catalog's
    ``runtime_mode`` view, a scorer's ``embeddings``, an include ``mode``), never a list."""
    options = set(BudgetConfig.model_fields)
    signatures = public_signatures()
    assert len(signatures) > 40
    taking_config = [name for name, sig in signatures if "config" in sig.parameters]
    assert {"create_toolbudget_agent", "ToolExecutor", "ToolBudgetMiddleware"} <= set(taking_config)
    spelled = {
        name: sorted(set(sig.parameters) & options)
        for name, sig in signatures
        if len(set(sig.parameters) & options) > ("config" not in sig.parameters)
    }
    assert spelled == {}, "options are taken as **options: Unpack[BudgetOptions], not spelled out"


@pytest.mark.parametrize(
    "build",
    [
        lambda c: SelectTools(c, config="big"),
        lambda c: ToolExecutor(c, config={"max_tools": 3}),
    ],
)
def test_nodes_reject_a_config_that_is_not_a_budget_config(catalog, build):
    with pytest.raises(TypeError, match="config must be a BudgetConfig"):
        build(catalog)


def test_node_keywords_override_the_shared_config(catalog):
    config = BudgetConfig(max_tools=6, search_limit=2, max_categories=2)
    assert SelectTools(catalog, config=config).max_tools == 6
    assert SelectTools(catalog, config=config, max_tools=4).max_tools == 4
    assert ToolSearch(catalog, config=config).limit == 2
    assert ToolSearch(catalog, config=config, search_limit=1).limit == 1
    assert ToolExecutor(catalog, config=config, offload_over_chars=None).config.offloading is False
    assert ClassifyIntent(catalog, config=config).max_categories == 2
    executor = ToolExecutor(catalog, config=config, mode="sequential")
    assert executor.config.budget == 6 and executor.config.mode == "sequential"
    assert config.mode == "parallel_safe"  # the shared config itself is unchanged


async def test_one_config_gives_select_tools_and_request_more_tools_one_budget(make_catalog):
    """SelectTools(max_tools=6) + ToolExecutor() used to load 8 by the executor's own default."""
    catalog = make_catalog()
    config = BudgetConfig(max_tools=3)
    executor = ToolExecutor(catalog, config=config)
    ask = AIMessage("", tool_calls=[call("request_more_tools", "m1", categories=["github"])])
    state = {"messages": [HumanMessage("work on the repo"), ask], "selected_tools": ["ask_human"]}
    out = await executor.ainvoke(state)
    loaded = out["selected_tools"]["add"]
    assert len(loaded) == 3 and set(loaded) <= set(catalog.tools_in("github"))
    assert len(catalog.tools_in("github")) > 3  # the budget, not the category size, bounds it
    select = SelectTools(catalog, config=config)
    chosen = (await select.ainvoke({**state, "categories": ["github"]}))["selected_tools"]["add"]
    assert len(chosen) == 3


def test_prebuilt_agent_shares_one_config_across_its_nodes(catalog):
    model = ScriptedChatModel(responses=[AIMessage("done")])
    graph = create_toolbudget_agent(model, catalog, max_tools=4, search_limit=1, max_visible=9)
    nodes = {name: spec.runnable for name, spec in graph.nodes.items()}
    configs = {name: node.config for name, node in nodes.items()}
    assert len({id(c) for c in configs.values()}) == 1
    (config,) = set(configs.values())
    assert (config.budget, config.search_limit, config.max_visible) == (4, 1, 9)


def test_tool_agent_takes_enforce_visibility_like_the_executor(catalog):
    model = ScriptedChatModel(responses=[AIMessage("done")])
    agent = ToolAgent(model, catalog, enforce_visibility=False)
    assert agent.config.enforce_visibility is False
