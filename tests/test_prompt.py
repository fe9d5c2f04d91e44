"""The model side: which models are accepted at construction, and the system prompt."""

from __future__ import annotations

import itertools
import logging
import sys
import types
from typing import Any

import pytest
from agent_tools import Recorder, recording_catalog
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langgraph_toolbudget import (
    CallModel,
    ClassifyIntent,
    ToolAgent,
    ToolBudgetState,
    ToolCatalog,
    create_toolbudget_agent,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.nodes.models import ModelUnavailableError
from langgraph_toolbudget.nodes.prompt import with_section
from langgraph_toolbudget.nodes.thread_prompt import MAX_VARIANTS
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]


@pytest.fixture
def catalog() -> ToolCatalog:
    return recording_catalog(Recorder())


async def run(app: Any, payload: Any, api: str, config: Any = None) -> Any:
    return app.invoke(payload, config) if api == "invoke" else await app.ainvoke(payload, config)


@pytest.mark.parametrize("model", [None, 42, object(), ["gpt"]])
def test_a_model_that_is_no_chat_model_is_refused_at_construction(catalog, model):
    with pytest.raises(TypeError, match="must be a LangChain chat model .* or a 'provider:model'"):
        create_toolbudget_agent(model, catalog)


@pytest.mark.parametrize("build", [CallModel, ToolAgent, create_toolbudget_agent])
def test_a_model_without_tool_calling_is_refused_when_only_native_is_enabled(catalog, build):
    model = GenericFakeChatModel(messages=iter([AIMessage("hi")]))
    with pytest.raises(ValueError, match="cannot call tools natively .* Enable one, e.g."):
        build(model, catalog, tool_call_formats=["native"])
    build(model, catalog)  # by default it falls back to a text format (see test_formats_agent)


def test_a_model_string_without_langchain_installed_names_what_to_install(catalog, monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain.chat_models", None)  # import fails
    with pytest.raises(ModelUnavailableError, match="pip install langchain langchain-openai"):
        create_toolbudget_agent("openai:gpt-4o-mini", catalog)


@pytest.mark.parametrize("api", APIS)
async def test_a_model_string_goes_through_init_chat_model(catalog, monkeypatch, api):
    asked: list[str] = []
    model = ScriptedChatModel(responses=[AIMessage("hello from the provider")])

    def init_chat_model(spec: str) -> Any:
        asked.append(spec)
        if spec.startswith("nope:"):
            raise ValueError("Unsupported model_provider='nope'")
        return model

    fake = types.ModuleType("langchain.chat_models")
    fake.init_chat_model = init_chat_model  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain.chat_models", fake)
    app = create_toolbudget_agent("ollama:qwen3:8b", catalog).compile()
    out = await run(app, {"messages": [HumanMessage("hi")]}, api)
    assert asked == ["ollama:qwen3:8b"] and out["messages"][-1].content == "hello from the provider"
    with pytest.raises(ValueError, match="'nope:x' is not a model init_chat_model knows"):
        create_toolbudget_agent("nope:x", catalog)


@pytest.mark.parametrize("api", APIS)
async def test_classifier_without_structured_output_falls_back_to_lexical(catalog, caplog, api):
    model = GenericFakeChatModel(messages=iter([AIMessage("github")]))
    with caplog.at_level(logging.WARNING, logger="langgraph_toolbudget.nodes.intent"):
        node = ClassifyIntent(catalog, model=model)
    assert "has no structured output" in caplog.text
    out = await run(node, {"messages": [HumanMessage("open a GitHub issue")]}, api)
    assert out["categories"][0] == "github"


def reply_with_prompt(messages: list[Any], tools: list[str]) -> AIMessage:
    return AIMessage(messages[0].content)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        # a plain string is sent as is, like create_agent's system_prompt
        ("You help user {user_id}.", "You help user {user_id}."),
        (SystemMessage("You help user {user_id}."), "You help user {user_id}."),
        (
            lambda state: [
                SystemMessage(f"{len(state['messages'])} messages so far."),
                *state["messages"],
            ],
            "1 messages so far.",
        ),
        (
            lambda state, config: f"You help user {config['configurable']['user_id']}.",
            "You help user ada.",
        ),
        (RunnableLambda(lambda state: "You help a runnable user."), "You help a runnable user."),
    ],
    ids=["str", "system-message", "callable-state", "callable-state-config", "runnable"],
)
async def test_system_prompt_forms(catalog, prompt, expected, api):
    model = ScriptedChatModel(responses=[reply_with_prompt])
    app = create_toolbudget_agent(model, catalog, system_prompt=prompt).compile()
    config: RunnableConfig = {"configurable": {"user_id": "ada"}}
    out = await run(app, {"messages": [HumanMessage("hi")]}, api, config)
    system = out["messages"][-1].content
    assert system.startswith(expected + "\n\n## Tools")  # our section follows the user's prompt
    sent = model.calls[-1]
    assert [type(m).__name__ for m in sent] == ["SystemMessage", "HumanMessage"]


CACHED = {
    "type": "text",
    "text": "You are a weather assistant.",
    "cache_control": {"type": "ephemeral"},
}


class TextOnly(ScriptedChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@pytest.mark.parametrize("shape", ["prebuilt", "tool_agent", "text_format", "state_system"])
@pytest.mark.parametrize("api", APIS)
async def test_a_system_prompt_of_content_blocks_keeps_them_and_adds_the_section_as_a_block(
    catalog, shape, api
):
    # Anthropic prompt caching rides on cache_control of a system block: flattened into one
    # string, caching was silently off.
    model = (TextOnly if shape == "text_format" else ScriptedChatModel)(responses=["ok"])
    prompt = SystemMessage([CACHED])
    payload: dict[str, Any] = {"messages": [HumanMessage("hi")]}
    if shape == "tool_agent":
        node = ToolAgent(model, catalog, system_prompt=prompt)
        graph = StateGraph(ToolBudgetState)
        graph.add_node("agent", node)
        graph.add_edge(START, "agent")
        app = graph.compile()
    else:
        options = {"tool_call_formats": "hermes"} if shape == "text_format" else {}
        if shape == "state_system":  # a system message first in the state, a string prompt
            payload["messages"].insert(0, prompt)
            options["system_prompt"] = "Answer in French."
        else:
            options["system_prompt"] = prompt
        app = create_toolbudget_agent(model, catalog, **options).compile()
    await run(app, payload, api)
    system, *rest = model.calls[-1]
    assert isinstance(system, SystemMessage) and [type(m) for m in rest] == [HumanMessage]
    blocks = system.content
    assert isinstance(blocks, list)  # was one string: cache_control lost
    if shape == "state_system":  # the prompt first, then the state's system message
        assert blocks[:2] == [{"type": "text", "text": "Answer in French."}, CACHED]
    else:
        assert blocks[0] == CACHED
    assert blocks[-1]["type"] == "text" and "## Tools" in blocks[-1]["text"]
    assert ("<tool_call>" in blocks[-1]["text"]) == (shape == "text_format")


@pytest.mark.parametrize(
    ("system", "content"),
    [
        ([], "## Tools ..."),
        ([SystemMessage("Be brief.")], "Be brief.\n\n## Tools ..."),
        ([SystemMessage("")], "## Tools ..."),
        ([SystemMessage("A."), SystemMessage("B.")], "A.\n\nB.\n\n## Tools ..."),
        ([SystemMessage([CACHED])], [CACHED, {"type": "text", "text": "## Tools ..."}]),
        ([SystemMessage([])], [{"type": "text", "text": "## Tools ..."}]),
        (
            [SystemMessage("A."), SystemMessage([CACHED])],
            [{"type": "text", "text": "A."}, CACHED, {"type": "text", "text": "## Tools ..."}],
        ),
    ],
    ids=["none", "text", "empty", "two-texts", "blocks", "no-blocks", "text-and-blocks"],
)
def test_the_section_follows_the_system_prompt_as_text_or_as_one_more_block(system, content):
    # One helper for the agent nodes and ToolBudgetMiddleware (which passes create_agent's one
    # system message, or none).
    assert with_section(system, "## Tools ...").content == content


def test_system_prompt_of_a_bad_type_is_refused(catalog):
    model = ScriptedChatModel(responses=[AIMessage("x")])
    with pytest.raises(TypeError, match="system_prompt must be a string"):
        CallModel(model, catalog, system_prompt=42)  # type: ignore[arg-type]


async def test_system_prompt_callable_returning_garbage_is_a_clear_error(catalog):
    model = ScriptedChatModel(responses=[AIMessage("x")])
    node = CallModel(model, catalog, system_prompt=lambda state: 42)
    with pytest.raises(TypeError, match="must return a string, a SystemMessage or a list"):
        await node.ainvoke({"messages": [HumanMessage("hi")]})


class TextOnlyModel(ScriptedChatModel):
    """A scripted chat model without native tool calling (a text tool-call format)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this model has no tool calling")


def test_the_tool_schemas_of_a_text_format_are_cached_within_a_bound():
    servers = [f"server_{n}" for n in range(12)]
    tools = [
        StructuredTool.from_function(lambda: "ok", name=f"tool_{n}", description=f"Tool {n}.")
        for n in range(12)
    ]
    catalog = ToolCatalog.from_tools(
        tools, tool_metadata={f"tool_{n}": {"server": s} for n, s in enumerate(servers)}
    )
    model = TextOnlyModel(responses=["ok"])
    node = CallModel(
        model,
        catalog,
        tool_call_formats="hermes",
        pinned=[t.name for t in tools],
        offload_over_chars=None,
    )
    bound = len(catalog) + len(node.caller.builtin_tools) * (MAX_VARIANTS + 1)
    # Each set of excluded servers changes request_more_tools' list of categories.
    excluded = [c for k in (1, 2, 3, 4) for c in itertools.combinations(servers, k)]
    assert len(excluded) > bound
    for names in excluded[: bound + 20]:
        node.invoke(
            {"messages": [HumanMessage("hi")], "context_servers": dict.fromkeys(names, "exclude")}
        )
        assert len(node.caller.thread_prompt._schemas) <= bound
    node.invoke({"messages": [HumanMessage("hi")]})
    system = str(model.calls[-1][0].content)
    assert all(f'"name": "tool_{n}"' in system for n in range(12))


def _strict_reply(messages: list[Any], _tools: list[str]) -> AIMessage:
    """Refuse, as OpenAI and Anthropic do, a history with a tool call not answered right
    after its message; else say hello."""
    for i, message in enumerate(messages):
        calls = [c["id"] for c in getattr(message, "tool_calls", None) or []]
        after = list(itertools.takewhile(lambda m: m.type == "tool", messages[i + 1 :]))
        if sorted(calls) != sorted(m.tool_call_id for m in after) and calls:
            raise ValueError(f"400: tool_call_ids {calls} have no response messages")
    return AIMessage("Hello!")


@pytest.mark.parametrize("answered", [0, 1])
def test_a_call_a_stopped_run_left_unanswered_gets_an_error_answer_in_the_prompt(answered):
    """A run interrupted while its tools ran (a second message with LangGraph server's
    multitask_strategy="interrupt") left its reply's calls unanswered in the thread, and
    every later model call was refused by the provider."""
    calls = [
        {"name": "send_message", "args": {"channel": "ops", "text": "hi"}, "id": "c1"},
        {"name": "get_weather", "args": {"city": "Lima"}, "id": "c2"},
    ]
    history = [
        HumanMessage("tell ops hi, and the weather in Lima"),
        AIMessage("", tool_calls=calls),
    ]
    history += [ToolMessage("sent", tool_call_id="c1", name="send_message")][:answered]
    history.append(HumanMessage("hello?"))
    model = ScriptedChatModel(responses=[_strict_reply])
    catalog = build_example_catalog()
    graph = create_toolbudget_agent(model, catalog).compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"messages": history}, thread)
    assert out["messages"][-1].content == "Hello!"
    sent = model.calls[0]
    at = next(i for i, m in enumerate(sent) if getattr(m, "tool_calls", None))
    answers = sent[at + 1 : at + 3]
    assert [(m.type, m.tool_call_id) for m in answers] == [("tool", "c1"), ("tool", "c2")]
    stopped = answers[answered:]
    assert all(
        m.status == "error" and "may or may not have taken effect" in m.text for m in stopped
    )
    assert "'get_weather' got no answer" in answers[1].text
    # The thread keeps its history as it was: nothing was answered there.
    kept = graph.get_state(thread).values["messages"]
    assert [m.type for m in kept[: len(history)]] == [m.type for m in history]


def test_an_unanswered_call_is_found_by_its_place_not_its_id():
    """Models that number calls per reply reuse ids: a stopped run's ``call_0`` counted as
    answered because an earlier reply's ``call_0`` was, and the provider refused the turn."""
    weather = {"name": "get_weather", "args": {"city": "Lima"}, "id": "call_0"}
    send = {"name": "send_message", "args": {"channel": "ops", "text": "hi"}, "id": "call_0"}
    history = [
        HumanMessage("weather in Lima?"),
        AIMessage("", tool_calls=[weather]),
        ToolMessage("sunny", tool_call_id="call_0", name="get_weather"),
        AIMessage("Sunny."),
        HumanMessage("tell ops hi"),
        AIMessage("", tool_calls=[send]),
        HumanMessage("hello?"),
    ]
    model = ScriptedChatModel(responses=[_strict_reply])
    graph = create_toolbudget_agent(model, build_example_catalog()).compile()
    assert graph.invoke({"messages": history})["messages"][-1].content == "Hello!"
    sent = model.calls[0]
    at = max(i for i, m in enumerate(sent) if getattr(m, "tool_calls", None))
    assert sent[at + 1].type == "tool" and "'send_message' got no answer" in sent[at + 1].text


def test_the_middlewares_schema_cache_is_bounded_when_descriptions_change_every_call():
    """Review 38b: ``ToolBudgetMiddleware`` rendered CodeMode's tool list from a cache keyed
    by each tool's name and description that never dropped an entry: a middleware before it
    that rewrites descriptions (dated, per user) grew it with every model call, for the life
    of a server. The middleware and ``CallModel`` now share ``ThreadPrompt``'s bounded
    cache, emptied when full as its variants are."""
    from langgraph_toolbudget import ToolBudgetMiddleware

    catalog = build_example_catalog()
    budget = ToolBudgetMiddleware(catalog, tool_call_formats={"primary": "codemode"})
    prompt = budget.thread_prompt
    room = len(catalog) + len(prompt.tools) * (MAX_VARIANTS + 1)
    tool = catalog.get("get_weather").tool
    for day in range(room + 50):
        dated = tool.model_copy(update={"description": f"Weather, as of day {day}."})
        schema = prompt.schema(dated)
        assert schema["function"]["description"] == f"Weather, as of day {day}."
        assert len(prompt._schemas) <= room
