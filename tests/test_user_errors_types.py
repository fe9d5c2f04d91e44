"""Errors a user of the API meets at build: the right class, the option and value named, and
the fix the message gives working when it is followed literally (review 50c)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolCall
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langgraph_toolbudget import (
    BudgetConfig,
    CallModel,
    ChooseTools,
    DatabaseToolbox,
    ToolAgent,
    ToolCatalog,
    ToolExecutor,
    ToolUsage,
    create_toolbudget_agent,
)
from langgraph_toolbudget.demo.example_catalog import example_tools
from langgraph_toolbudget.execution.batch import BatchRunner
from langgraph_toolbudget.execution.builtin_family import (
    BuiltinContext,
    BuiltinResult,
    BuiltinTools,
)
from langgraph_toolbudget.execution.meta_tools import MetaTools
from langgraph_toolbudget.nodes.selection import ToolSearch
from langgraph_toolbudget.testing import ScriptedChatModel

QUESTION = {"messages": [HumanMessage("What's the weather in Paris?")]}


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def _catalog() -> ToolCatalog:
    return ToolCatalog.from_tools(
        [get_weather, send_email],
        categories={"weather": ["get_weather"], "email": ["send_email"]},
    )


# --- 1. a wrong type is a TypeError, a value out of range a ValueError ----------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"max_queries_per_tool": "50"}, TypeError, "option max_queries_per_tool must be an "),
        ({"max_queries_per_tool": 0}, ValueError, "option max_queries_per_tool must be an "),
        ({"max_queries_per_thread": "5"}, TypeError, "option max_queries_per_thread must be an"),
        (
            {"max_records": "100"},
            TypeError,
            "option max_records must be an integer >= 1 (records), got '100",
        ),
        (
            {"max_records": 0},
            ValueError,
            "option max_records must be an integer >= 1 (records), got 0 (int)",
        ),
        (
            {"min_threads": 2.0},
            TypeError,
            "option min_threads must be an integer >= 1 (threads), got 2.0",
        ),
        (
            {"min_threads": 0},
            ValueError,
            "option min_threads must be an integer >= 1 (threads), got 0",
        ),
        ({"weight": "1"}, TypeError, "option weight must be a finite number >= 0, got '1' (str)"),
        ({"weight": True}, TypeError, "option weight must be a finite number >= 0, got True"),
        ({"weight": float("nan")}, ValueError, "option weight must be a finite number >= 0, got"),
        ({"weight": -1}, ValueError, "option weight must be a finite number >= 0, got -1 (int)"),
        ({"namespace": ["a", "b"]}, TypeError, "option namespace must be a non-empty tuple"),
        ({"namespace": ("a", 1)}, TypeError, "option namespace must be a non-empty tuple"),
        ({"namespace": ()}, ValueError, "option namespace must be a non-empty tuple"),
        ({"namespace": ("a", "")}, ValueError, "option namespace must be a non-empty tuple"),
        ({"scope": 3}, TypeError, "option scope must be 'assistant'"),
        ({"scope": "users"}, ValueError, "option scope must be 'assistant'"),
        ({"store": {}}, TypeError, "option store must be a LangGraph BaseStore"),
    ],
)
def test_tool_usage_refuses_a_wrong_type_with_type_error_naming_the_option(kwargs, error, needle):
    """Was: ValueError for a string bound, a string weight or a list namespace."""
    with pytest.raises(error) as caught:
        ToolUsage(**kwargs)
    assert type(caught.value) is error
    message = str(caught.value)
    assert message.startswith("ToolUsage: ") and needle in message, message
    (name,) = kwargs
    assert repr(kwargs[name])[:20] in message  # the value given


def test_a_list_namespace_is_answered_with_the_tuple_to_write():
    with pytest.raises(TypeError) as caught:
        ToolUsage(namespace=["team", "usage"])  # type: ignore[arg-type]
    fix = re.search(r"namespace=(\(.*?\))", str(caught.value))
    assert fix is not None and fix.group(1) == "('team', 'usage')"
    assert ToolUsage(namespace=eval(fix.group(1))).namespace == ("team", "usage")


def test_a_store_class_is_answered_with_the_instance_to_pass():
    """Was: "got ABCMeta"."""
    with pytest.raises(TypeError, match=r"the class InMemoryStore: pass InMemoryStore\(\)\."):
        ToolUsage(InMemoryStore)  # type: ignore[arg-type]
    assert ToolUsage(InMemoryStore()).store is not None  # the fix, literally
    with pytest.raises(TypeError, match=r"the class SqliteStore: pass SqliteStore\(\.\.\.\)"):
        ToolUsage(store=SqliteStore)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        (
            {"max_rows": "10"},
            TypeError,
            "option max_rows must be an integer >= 1 (rows), got '10' (str)",
        ),
        ({"max_rows": 2.5}, TypeError, "option max_rows must be an integer >= 1 (rows), got 2.5"),
        ({"max_rows": True}, TypeError, "option max_rows must be an integer >= 1 (rows), got True"),
        (
            {"max_rows": 0},
            ValueError,
            "option max_rows must be an integer >= 1 (rows), got 0 (int)",
        ),
        (
            {"timeout_s": "10"},
            TypeError,
            "option timeout_s must be a finite number of seconds > 0, got",
        ),
        (
            {"timeout_s": 0},
            ValueError,
            "option timeout_s must be a finite number of seconds > 0, got 0",
        ),
        (
            {"timeout_s": float("nan")},
            ValueError,
            "option timeout_s must be a finite number of seconds",
        ),
        (
            {"connect_timeout_s": None},
            TypeError,
            "option connect_timeout_s must be a finite number",
        ),
        ({"connect_timeout_s": -1}, ValueError, "option connect_timeout_s must be a finite number"),
    ],
)
def test_database_toolbox_refuses_a_wrong_type_with_type_error(tmp_path, kwargs, error, needle):
    """Was: ValueError for max_rows="10" and timeout_s="10"."""
    with pytest.raises(error) as caught:
        DatabaseToolbox({"shop": f"sqlite:///{tmp_path / 'shop.db'}"}, **kwargs)
    assert type(caught.value) is error
    assert str(caught.value).startswith("DatabaseToolbox: ") and needle in str(caught.value)


def test_database_toolbox_sources_a_wrong_type_or_an_empty_value():
    with pytest.raises(TypeError, match="mapping of source name"):
        DatabaseToolbox(["sqlite:///x.db"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="mapping of source name"):
        DatabaseToolbox({"shop": 5})  # type: ignore[dict-item]
    for empty in ({}, {"": "sqlite:///x.db"}):
        with pytest.raises(ValueError, match="mapping of source name"):
            DatabaseToolbox(empty)


# --- 2. a misspelt built-in is refused, with the fix ------------------------------------------


def _corrected(message: str) -> Any:
    found = re.search(r"write enabled_builtins=(.*?)\)\. If ", message)
    assert found is not None, message
    return eval(found.group(1))


@pytest.mark.parametrize(
    ("value", "meant", "fixed"),
    [
        (["search_tools", "add_tol"], "add_tool", ["search_tools", "add_tool"]),
        ({"deny": ["show_all_tool"]}, "show_all_tools", {"deny": ["show_all_tools"]}),
        (["search_tools", "tool_serch"], "tool_search", ["search_tools", "tool_search"]),
    ],
)
def test_a_misspelt_built_in_is_refused_naming_the_one_meant(value, meant, fixed):
    """Was: a UserWarning only (shown once per process), and the agent built with the
    built-in meant off: a model that could search but never load what it found."""
    model = ScriptedChatModel(responses=["done"])
    with pytest.raises(ValueError) as caught:
        create_toolbudget_agent(model, _catalog(), enabled_builtins=value)
    message = str(caught.value)
    assert f"-> {meant!r}" in message
    assert _corrected(message) == fixed
    graph = create_toolbudget_agent(model, _catalog(), enabled_builtins=_corrected(message))
    graph.compile().invoke(QUESTION)
    if meant == "add_tool":
        assert "add_tool" in model.bound_tools[0]


@pytest.mark.parametrize(
    "make",
    [
        lambda gate: ToolSearch(_catalog(), enabled_builtins=gate),
        lambda gate: ChooseTools(_catalog(), enabled_builtins=gate),
        lambda gate: ToolExecutor(_catalog(), enabled_builtins=gate),
        lambda gate: CallModel(
            ScriptedChatModel(responses=["x"]), _catalog(), enabled_builtins=gate
        ),
        lambda gate: ToolAgent(
            ScriptedChatModel(responses=["x"]), _catalog(), enabled_builtins=gate
        ),
    ],
    ids=["ToolSearch", "ChooseTools", "ToolExecutor", "CallModel", "ToolAgent"],
)
def test_every_node_refuses_a_misspelt_built_in(make):
    with pytest.raises(ValueError, match="'add_tol' -> 'add_tool'"):
        make(["search_tools", "add_tol"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make(["search_tools", "add_tool", "note", "search_*"])  # real, unlike any, a pattern


class _AddTools(BuiltinTools):
    """A family of the user's own whose one tool, ``add_tools``, is a near miss of ``add_tool``."""

    default_enabled = False

    def definitions(self) -> list[BaseTool]:
        def add_tools(names: list[str]) -> str:
            """Load several tools at once."""
            raise AssertionError("built-ins never run as tools")

        return [StructuredTool.from_function(add_tools)]

    def handle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        return BuiltinResult("loaded")


def test_a_family_of_your_own_named_like_a_built_in_is_kept_by_the_pattern_the_error_gives():
    """Review 34b: a family of your own whose tool is a near miss of a built-in's. The runner
    that has the family knows the name, but the nodes that bind the package's families alone
    (ToolSearch, CallModel, the executor's own runner) take it for a typo: the message's
    pattern, followed literally, builds every one of them with the family's tool on."""
    catalog = _catalog()
    gate = ["search_tools", "add_tool", "add_tools"]
    config = BudgetConfig(enabled_builtins=gate)
    assert "add_tools" in BatchRunner(catalog, config, builtins=[_AddTools()]).builtins
    with pytest.raises(ValueError) as caught:
        ToolExecutor(catalog, config=config)
    message = str(caught.value)
    assert "'add_tools' -> 'add_tool'" in message
    assert _corrected(message) == ["search_tools", "add_tool"]  # the typo reading
    pattern = re.search(r"'add_tools' as '([^']+)'", message)
    assert pattern is not None and pattern.group(1) == "add_tool[s]"
    config = BudgetConfig(enabled_builtins=["search_tools", "add_tool", pattern.group(1)])
    ToolSearch(catalog, config=config)
    CallModel(ScriptedChatModel(responses=["x"]), catalog, config=config)
    ToolExecutor(catalog, config=config)
    runner = BatchRunner(catalog, config, builtins=[MetaTools(catalog, config), _AddTools()])
    assert {"add_tool", "add_tools"} <= set(runner.builtins.names)


# --- 3. prompt | model is refused at build; the hidden-tool-caller warning --------------------


def _prompt() -> ChatPromptTemplate:
    return ChatPromptTemplate.from_messages(
        [("system", "Be brief."), ("placeholder", "{messages}")]
    )


@pytest.mark.parametrize(
    "wrap",
    [
        lambda chain: chain,
        lambda chain: chain.with_retry(),
        lambda chain: chain.with_config(tags=["x"]),
        lambda chain: chain.with_fallbacks([ScriptedChatModel(responses=["x"])]),
    ],
    ids=["sequence", "with_retry", "with_config", "with_fallbacks"],
)
def test_prompt_pipe_model_is_refused_at_build_naming_system_prompt(wrap):
    """Was: a warning at build whose second fix (model_supports_tools=False) still failed at
    the first run ("Expected mapping type as input to ChatPromptTemplate")."""
    chain = wrap(_prompt() | ScriptedChatModel(responses=["done"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused before any warning
        for options in ({}, {"model_supports_tools": False}):
            with pytest.raises(TypeError, match="starts with the prompt template") as caught:
                create_toolbudget_agent(chain, _catalog(), **options)
            assert "system_prompt=" in str(caught.value)
            assert "create_toolbudget_agent: option model" in str(caught.value)


def test_the_system_prompt_fix_for_prompt_pipe_model_works_literally():
    prompt = _prompt()
    model = ScriptedChatModel(responses=["done"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = create_toolbudget_agent(model, _catalog(), system_prompt=prompt)
    out = graph.compile().invoke(QUESTION)
    assert out["messages"][-1].content == "done"
    sent = model.calls[0]
    assert isinstance(sent[0], SystemMessage) and sent[0].content.startswith("Be brief.")
    assert "## Tools" in sent[0].content  # the tools section joined to the template's system
    assert sent[1].content == "What's the weather in Paris?"
    assert "search_tools" in model.bound_tools[0]  # native tool calling kept


def test_a_prompt_pipe_model_is_refused_for_the_other_model_options():
    chain = _prompt() | ScriptedChatModel(responses=["x"])
    with pytest.raises(TypeError, match="CallModel: option model is a RunnableSequence"):
        CallModel(chain, _catalog())
    with pytest.raises(TypeError, match="option classifier_model is a RunnableSequence"):
        create_toolbudget_agent(
            ScriptedChatModel(responses=["x"]), _catalog(), classifier_model=chain
        )
    question = ChatPromptTemplate.from_messages([("human", "{question}")])  # one text variable
    with pytest.raises(TypeError, match="starts with the prompt template"):
        ToolAgent(question | ScriptedChatModel(responses=["x"]), _catalog())


def test_a_template_that_takes_the_message_list_is_warned_of_and_runs_with_a_text_format():
    """``[system, MessagesPlaceholder("messages")] | model``: LangChain fills the one required
    variable with the message list, so it runs (through a text format: the sequence binds no
    tools); it is warned of as before, and not refused (review 51a)."""
    placeholder = ChatPromptTemplate.from_messages(
        [("system", "You are a pirate."), MessagesPlaceholder("messages")]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ToolAgent(placeholder | ScriptedChatModel(responses=["x"]), _catalog())
    assert any("cannot bind tools" in str(w.message) for w in caught)
    model = ScriptedChatModel(responses=["arr"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a text format on purpose: no warning
        agent = ToolAgent(placeholder | model, _catalog(), model_supports_tools=False)
    out = agent.invoke(QUESTION)
    assert out["messages"][-1].content == "arr"
    assert isinstance(model.calls[-1][0], SystemMessage)
    assert model.calls[-1][0].content.startswith("You are a pirate.")


def _lambda_pipe_model(responses: list[Any]) -> Any:
    """A runnable around a tool-calling model that binds no tools itself, and takes messages."""
    return RunnableLambda(lambda messages: messages) | ScriptedChatModel(responses=responses)


@pytest.mark.parametrize(
    "build",
    [
        lambda model: create_toolbudget_agent(model, _catalog()),
        lambda model: CallModel(model, _catalog()),
        lambda model: ToolAgent(model, _catalog()),
    ],
    ids=["create_toolbudget_agent", "CallModel", "ToolAgent"],
)
def test_the_hidden_tool_caller_warning_points_at_the_users_line(build):
    """Was: attributed to langgraph_toolbudget/nodes/prompt.py."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build(_lambda_pipe_model(["x"]))
    (warning,) = [w for w in caught if "cannot bind tools" in str(w.message)]
    assert Path(warning.filename) == Path(__file__)


def test_each_fix_of_the_hidden_tool_caller_warning_works_literally():
    hermes = {"enabled": ["native", "hermes"], "primary": "hermes"}
    call = '<tool_call>{"name": "search_tools", "arguments": {"query": "weather"}}</tool_call>'
    for options in ({"model_supports_tools": False}, {"tool_call_formats": hermes}):
        chain = _lambda_pipe_model([AIMessage(call), "done"])
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a text format on purpose: no warning
            graph = create_toolbudget_agent(chain, _catalog(), **options)
        out = graph.compile().invoke(QUESTION)
        assert out["messages"][-1].content == "done"
        assert any(getattr(m, "name", None) == "search_tools" for m in out["messages"])
    model = ScriptedChatModel(responses=["done"])  # the chat model itself
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = create_toolbudget_agent(model, _catalog())
    assert graph.compile().invoke(QUESTION)["messages"][-1].content == "done"
    assert "search_tools" in model.bound_tools[0]


def test_a_store_tool_index_says_its_mistakes_as_tool_usage_does():
    """Was: "got ABCMeta", and ValueError for a namespace list or a limit given as text."""
    from langgraph_toolbudget.nodes.tool_index import StoreToolIndex

    cases = [
        (
            {"store": InMemoryStore},
            TypeError,
            r"StoreToolIndex: option store .*pass InMemoryStore\(\)",
        ),
        ({"namespace": ["a", "b"]}, TypeError, r"Write it as a tuple: namespace=\('a', 'b'\)"),
        ({"namespace": ()}, ValueError, r"StoreToolIndex: option namespace must be a non-empty"),
        ({"limit": "10"}, TypeError, r"option limit must be an integer >= 1 .*limit=10\."),
        ({"limit": 0}, ValueError, r"StoreToolIndex: option limit must be an integer >= 1"),
    ]
    for kwargs, error, needle in cases:
        with pytest.raises(error, match=needle):
            StoreToolIndex(**kwargs)
    assert StoreToolIndex(namespace=("a", "b"), limit=10).limit == 10  # the fixes, literally


def test_more_wrong_types_are_type_errors_and_unknown_sources_are_named(tmp_path):
    """Review 51b: one row (or a string) given to ``import_``, a mode or a default include that
    is no string raised ValueError or a bare "'int' object is not iterable"; an unknown
    database source gave ``[]`` or a bare KeyError."""
    from langgraph_toolbudget import set_include_mode

    usage = ToolUsage()
    for rows in ("rows", {"tool": "get_weather", "query": "rain?"}, 5):
        with pytest.raises(TypeError, match=r"import_ takes a list of rows .*pass \[row\]"):
            usage.import_(rows)  # type: ignore[arg-type]
    assert usage.import_([{"tool": "get_weather", "query": "rain?"}]) == 1  # the fix
    with pytest.raises(TypeError, match="mode must be one of"):
        set_include_mode(1, tools=["get_weather"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode must be one of"):
        set_include_mode("sometimes", tools=["get_weather"])  # type: ignore[arg-type]
    tools, _ = example_tools()
    with pytest.raises(TypeError, match="default_include"):
        ToolCatalog.from_tools(tools, default_include=1)  # type: ignore[arg-type]
    box = DatabaseToolbox({"shop": f"sqlite:///{tmp_path / 'shop.db'}"})
    for call in (box.dialect, box.tables, box.refresh, lambda s: box.search("x", source=s)):
        with pytest.raises(KeyError, match=r"no source 'nope'; its sources are \['shop'\]"):
            call("nope")
    assert box.tables("shop") == [] and box.dialect("shop") == "sqlite"


def test_the_prompt_pipe_model_advice_fills_the_templates_own_variables_and_works():
    """Review 52a: a template with a variable of its own ({tone}) was advised as
    ``system_prompt=prompt``, which then failed at the first turn (the state has no
    ``tone``); the message now says to fill it with ``.partial``, and that works."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be {tone}."), MessagesPlaceholder("messages")]
    )
    with pytest.raises(TypeError, match=r"system_prompt=prompt\.partial\(tone=\"<your tone>\"\)"):
        create_toolbudget_agent(prompt | ScriptedChatModel(responses=["x"]), _catalog())
    model = ScriptedChatModel(responses=["done"])
    graph = create_toolbudget_agent(model, _catalog(), system_prompt=prompt.partial(tone="brief"))
    out = graph.compile().invoke(QUESTION)
    assert out["messages"][-1].content == "done"
    assert model.calls[0][0].content.startswith("Be brief.")


def test_a_template_in_a_leading_parallel_is_refused_too():
    """Review 52a: ``RunnableParallel(p=prompt) | pick | model`` passed the build and failed
    at the first turn with LangChain's "Expected mapping type"; each branch of a leading
    parallel (or ``.assign``) gets the sequence's input, as a leading template does."""
    from langchain_core.runnables import RunnableParallel, RunnablePassthrough

    prompt = ChatPromptTemplate.from_messages([("human", "{question}")])
    pick = RunnableLambda(lambda d: d["p"])
    for head in (RunnableParallel(p=prompt), RunnablePassthrough.assign(p=prompt)):
        with pytest.raises(TypeError, match="starts with the prompt template"):
            create_toolbudget_agent(head | pick | ScriptedChatModel(responses=["x"]), _catalog())
    takes = ChatPromptTemplate.from_messages([MessagesPlaceholder("messages")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the hidden-tool-caller warning: not refused
        create_toolbudget_agent(
            RunnableParallel(p=takes) | pick | ScriptedChatModel(responses=["x"]), _catalog()
        )


def test_the_prompt_advice_tells_what_to_fill_and_what_stands_for_the_conversation():
    """Review 53a: the advice listed every variable to fill with ``.partial`` (followed, a
    ``{chat_history}`` or a human ``{question}`` filled with a value lost the user's message)
    and its ``...`` ran as written; a string template got advice that made one message."""
    from langchain_core.prompts import PromptTemplate

    history = ChatPromptTemplate.from_messages(
        [("system", "Be {tone}."), MessagesPlaceholder("chat_history")]
    )
    with pytest.raises(TypeError) as caught:
        create_toolbudget_agent(history | ScriptedChatModel(responses=["x"]), _catalog())
    message = str(caught.value)
    assert 'system_prompt=prompt.partial(tone="<your tone>")' in message
    assert "{chat_history} stand for the conversation" in message
    assert "chat_history=" not in message
    # followed: the placeholder replaced by the conversation's, the system variable filled
    fixed = ChatPromptTemplate.from_messages(
        [("system", "Be {tone}."), MessagesPlaceholder("messages")]
    ).partial(tone="brief")
    model = ScriptedChatModel(responses=["done"])
    create_toolbudget_agent(model, _catalog(), system_prompt=fixed).compile().invoke(QUESTION)
    assert model.calls[0][0].content.startswith("Be brief.")
    assert model.calls[0][-1].content == "What's the weather in Paris?"
    human = ChatPromptTemplate.from_messages([("system", "Be {tone}."), ("human", "{question}")])
    with pytest.raises(TypeError, match=r"\{question\} stand for the conversation"):
        create_toolbudget_agent(human | ScriptedChatModel(responses=["x"]), _catalog())
    text = PromptTemplate.from_template("Be {tone}. {messages}")
    with pytest.raises(TypeError, match=r"A string template makes one message: .*placeholder"):
        create_toolbudget_agent(text | ScriptedChatModel(responses=["x"]), _catalog())
