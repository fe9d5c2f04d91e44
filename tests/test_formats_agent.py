"""The agent with a text tool-call format: a model without native tool calling, end to end.

The model is scripted (``ScriptedChatModel``) but its ``bind_tools`` raises
``NotImplementedError``, as LangChain's base chat model does: it can only read
the tools from its prompt and write its calls as text. Everything else is real:
the catalog's tools, the executor, the meta-tools, the checkpointer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from agent_tools import recording_fixtures
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, StateGraph

from langgraph_toolbudget import ToolAgent, ToolBudgetState, ToolCatalog, create_toolbudget_agent
from langgraph_toolbudget.formats import get_format
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
TEXT_FORMATS = ["hermes", "mistral", "pythonic", "json"]
FORMAT_EVENT = "toolbudget.tool_call_format"


class TextOnlyModel(ScriptedChatModel):
    """A scripted chat model without native tool calling."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        raise NotImplementedError("this model has no tool calling")


rec, catalog = recording_fixtures()


def text_call(fmt: str, name: str, **args: Any) -> AIMessage:
    """The reply of a model that writes one call in ``fmt``."""
    return AIMessage(get_format(fmt).render_calls([{"name": name, "args": args, "id": "x"}]))


def system_text(messages: list[BaseMessage]) -> str:
    assert isinstance(messages[0], SystemMessage)
    return str(messages[0].content)


def tool_agent_app(node: ToolAgent, checkpointer: Any = None) -> Any:
    graph = StateGraph(ToolBudgetState)
    graph.add_node("agent", node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=checkpointer)


async def run(app: Any, payload: Any, api: str, config: Any = None) -> Any:
    return app.invoke(payload, config) if api == "invoke" else await app.ainvoke(payload, config)


async def stream(app: Any, payload: Any, api: str, config: Any = None) -> list[Any]:
    """(mode, chunk): every custom event (a ToolAgent node streams them from its subgraph)
    and the graph's own values."""
    modes = ["custom", "values"]
    if api == "invoke":
        chunks = list(app.stream(payload, config, stream_mode=modes, subgraphs=True))
    else:
        chunks = [c async for c in app.astream(payload, config, stream_mode=modes, subgraphs=True)]
    return [(mode, chunk) for ns, mode, chunk in chunks if mode == "custom" or not ns]


def load_and_call_script(fmt: str) -> list[Any]:
    return [
        text_call(fmt, "add_tool", tool_names=["get_weather"]),
        text_call(fmt, "get_weather", city="Paris"),
        AIMessage("It is 18C and cloudy in Paris."),
    ]


def check_state_is_standard(messages: list[BaseMessage]) -> None:
    """Calls are AIMessage.tool_calls with ids, each answered by one ToolMessage."""
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    results = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    assert [c["name"] for c in calls] == ["add_tool", "get_weather"]
    assert all(c["id"] for c in calls) and {c["id"] for c in calls} == results


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("api", APIS)
async def test_a_text_only_model_loads_a_tool_through_a_meta_tool_and_calls_it(
    catalog, rec, fmt, api
):
    model = TextOnlyModel(responses=load_and_call_script(fmt), cycle=False)
    node = ToolAgent(model, catalog, tool_call_formats={"enabled": ["native", fmt]})
    app = tool_agent_app(node)
    payload = {"messages": [HumanMessage("What's the weather in Paris?")], "selected_tools": []}
    chunks = await stream(app, {**payload, "selected_tools": ["list_projects"]}, api)
    out = [c for kind, c in chunks if kind == "values"][-1]
    assert rec.runs == [("get_weather", {"city": "Paris"})]
    assert out["messages"][-1].content == "It is 18C and cloudy in Paris."
    check_state_is_standard(out["messages"])
    assert model.bound_tools == []  # never bound: the tools are in the prompt
    first, second, third = (system_text(call) for call in model.calls)
    weather = "Get current weather conditions for a city."  # get_weather's description
    assert "List all project boards." in first and weather not in first  # only visible tools
    assert '"add_tool"' in first and get_format(fmt).render_tools([])[:15] in first
    assert weather in second  # loaded by the meta-tool, then shown
    history = model.calls[2]
    assert not any(isinstance(m, ToolMessage) for m in history)  # results as the format's text
    assert any("18C, cloudy" in str(m.content) for m in history if isinstance(m, HumanMessage))
    (event, *_) = [c for kind, c in chunks if kind == "custom" and c["event"] == FORMAT_EVENT]
    assert event["format"] == fmt and event["native_available"] is False
    assert (
        "NotImplementedError" in event["reason"]
        and f"{fmt!r} is the first enabled" in event["reason"]
    )


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("api", APIS)
async def test_the_prebuilt_graph_runs_a_text_format_chosen_as_primary(catalog, rec, fmt, api):
    model = ScriptedChatModel(responses=load_and_call_script(fmt), cycle=False)  # can bind
    graph = create_toolbudget_agent(
        model, catalog, tool_call_formats={"enabled": ["native", fmt], "primary": fmt}
    )
    out = await run(graph.compile(), {"messages": [HumanMessage("hello, Paris please")]}, api)
    assert rec.runs == [("get_weather", {"city": "Paris"})]
    check_state_is_standard(out["messages"])
    assert model.bound_tools == []  # the primary text format wins over native


@pytest.mark.parametrize("shape", ["prebuilt", "tool_agent"])
@pytest.mark.parametrize("api", APIS)
async def test_an_unreadable_call_gets_an_error_showing_the_format_and_the_model_retries(
    catalog, rec, shape, api
):
    model = TextOnlyModel(
        responses=[
            AIMessage("<tool_call>\nget_weather for Paris please\n</tool_call>"),
            text_call("hermes", "get_weather", city="Paris"),
            AIMessage("18C in Paris."),
        ],
        cycle=False,
    )
    formats = {"enabled": ["hermes"]}
    payload = {"messages": [HumanMessage("weather in Paris?")], "selected_tools": ["get_weather"]}
    if shape == "prebuilt":
        app = create_toolbudget_agent(
            model, catalog, pinned=["get_weather"], tool_call_formats=formats
        ).compile()
    else:
        app = tool_agent_app(ToolAgent(model, catalog, tool_call_formats=formats))
    chunks = await stream(app, payload, api)
    out = [c for kind, c in chunks if kind == "values"][-1]
    assert rec.names == ["get_weather"]
    retry_prompt = model.calls[1]
    assert isinstance(retry_prompt[-1], HumanMessage)
    assert "could not be read" in retry_prompt[-1].content
    assert '<tool_call>\n{"name": "tool_name"' in retry_prompt[-1].content
    rejected = [m for m in out["messages"] if m.response_metadata.get("toolbudget_parse_error")]
    assert all(isinstance(m, AIMessage) and not m.invalid_tool_calls for m in rejected)
    assert [m.content for m in rejected] == [
        "<tool_call>\nget_weather for Paris please\n</tool_call>"
    ]
    errors = [c for kind, c in chunks if kind == "custom" and c.get("parse_error")]
    assert len(errors) == 1 and errors[0]["attempt"] == 1


@pytest.mark.parametrize("shape", ["prebuilt", "tool_agent"])
def test_retries_of_unreadable_calls_are_bounded_by_max_iterations(catalog, rec, shape):
    model = TextOnlyModel(responses=[AIMessage("[TOOL_CALLS] nope")])
    formats = ["mistral"]
    if shape == "prebuilt":
        graph = create_toolbudget_agent(model, catalog, max_iterations=3, tool_call_formats=formats)
        app = graph.compile()
    else:
        app = tool_agent_app(ToolAgent(model, catalog, max_iterations=3, tool_call_formats=formats))
    out = app.invoke({"messages": [HumanMessage("hi")], "selected_tools": []})
    assert len(model.calls) == 3 and rec.runs == []
    assert out["messages"][-1].content == "[TOOL_CALLS] nope"  # the model's own last words


@pytest.mark.parametrize("api", APIS)
async def test_a_thread_switches_from_a_native_model_to_a_text_model_and_back(catalog, rec, api):
    saver = MemorySaver()
    config = {"configurable": {"thread_id": "switch"}}
    pinned = ["get_weather", "create_issue"]
    native = ScriptedChatModel(
        responses=[
            AIMessage(
                "", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "n1"}]
            ),
            AIMessage("Oslo: cloudy."),
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(native, catalog, pinned=pinned).compile(checkpointer=saver)
    await run(app, {"messages": [HumanMessage("weather in Oslo?")]}, api, config)

    text = TextOnlyModel(
        responses=[
            text_call("pythonic", "create_issue", repo="acme/app", title="Rain in Oslo"),
            AIMessage("Issue opened."),
        ],
        cycle=False,
    )
    app = create_toolbudget_agent(
        text, catalog, pinned=pinned, tool_call_formats=["pythonic"]
    ).compile(checkpointer=saver)
    out = await run(app, {"messages": [HumanMessage("open an issue about it")]}, api, config)
    seen = "\n".join(str(m.content) for m in text.calls[0])
    assert "[get_weather(city='Oslo')]" in seen and "Output of get_weather:\nOslo: 18C" in seen
    assert rec.names == ["get_weather", "create_issue"]
    assert out["messages"][-1].content == "Issue opened."

    back = ScriptedChatModel(responses=[AIMessage("Done.")])
    app = create_toolbudget_agent(back, catalog, pinned=pinned).compile(checkpointer=saver)
    await run(app, {"messages": [HumanMessage("thanks")]}, api, config)
    history = back.calls[0]
    issue_call = [m for m in history if isinstance(m, AIMessage) and m.tool_calls][-1]
    assert issue_call.tool_calls[0]["args"] == {"repo": "acme/app", "title": "Rain in Oslo"}
    answer = next(
        m
        for m in history
        if isinstance(m, ToolMessage) and m.tool_call_id == issue_call.tool_calls[0]["id"]
    )
    assert "Rain in Oslo" in answer.content  # a standard ToolMessage for the native model


def test_model_supports_tools_false_keeps_a_native_model_on_text(catalog, rec):
    model = ScriptedChatModel(
        responses=[text_call("hermes", "get_weather", city="Rome"), AIMessage("ok")]
    )
    node = ToolAgent(model, catalog, model_supports_tools=False, pinned=["get_weather"])
    tool_agent_app(node).invoke({"messages": [HumanMessage("Rome?")], "selected_tools": []})
    assert model.bound_tools == [] and rec.names == ["get_weather"]
    assert node.call_model.caller.choice.reason.startswith(
        "primary format 'native' is not available"
    )
    assert "model_supports_tools=False" in node.call_model.caller.choice.reason


def test_the_model_name_preset_picks_the_text_format(catalog):
    model = TextOnlyModel(responses=[AIMessage("hi")])
    node = ToolAgent(model, catalog, config=None, model_supports_tools=False)
    assert node.call_model.caller.choice.name == "hermes"  # no name: the default text format
    llama = ToolAgent(
        model, catalog, model_supports_tools=False, tool_call_formats=None
    ).config.override(model_size="llama3.2:3b")
    node = ToolAgent(model, catalog, config=llama)
    assert node.call_model.caller.choice.name == "pythonic"
    assert (
        "'pythonic' is the preset for model 'llama3.2:3b'" in node.call_model.caller.choice.reason
    )
    explicit = ToolAgent(model, catalog, config=llama, tool_call_formats=["json"])
    assert explicit.call_model.caller.choice.name == "json"  # the preset is only a default


@pytest.mark.parametrize("mode", ["sequential", "parallel_safe"])
def test_text_calls_go_through_enforcement_and_coercion_like_native_ones(catalog, rec, mode):
    model = TextOnlyModel(
        responses=[
            AIMessage("[get_weather('Paris'), create_issue(repo='acme/app', title='x')]"),
            AIMessage("done"),
        ],
        cycle=False,
    )
    node = ToolAgent(model, catalog, mode=mode, tool_call_formats=["pythonic"])
    out = tool_agent_app(node).invoke(
        {"messages": [HumanMessage("weather?")], "selected_tools": ["get_weather"]}
    )
    assert rec.runs == [("get_weather", {"city": "Paris"})]  # __arg1 coerced to the one field
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in results] == ["success", "error"]
    assert "create_issue" in results[1].content and "add_tool" in results[1].content


# --- calls the model writes (issue 25, part A) ----------------------------------------------

ISSUE = {"repo": "acme/app", "title": "Rain in Oslo, then snow in Bergen"}


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("api", APIS)
async def test_a_call_cut_off_mid_argument_is_not_run_and_the_model_sends_it_again(
    catalog, rec, fmt, api
):
    whole = text_call(fmt, "create_issue", **ISSUE)
    cut = AIMessage(whole.text[: whole.text.index("then")])  # the token limit, mid-title
    model = TextOnlyModel(responses=[cut, whole, AIMessage("Opened.")], cycle=False)
    node = ToolAgent(model, catalog, tool_call_formats=[fmt], pinned=["create_issue"])
    payload = {"messages": [HumanMessage("open an issue")], "selected_tools": ["create_issue"]}
    chunks = await stream(tool_agent_app(node), payload, api)
    assert rec.runs == [("create_issue", ISSUE)]  # only the whole call, never the cut title
    retry = model.calls[1][-1]
    assert isinstance(retry, HumanMessage)
    assert "your call to 'create_issue' was cut off" in retry.content
    assert "Nothing was run" in retry.content and "shorter if needed" in retry.content
    (error,) = [c for kind, c in chunks if kind == "custom" and c.get("parse_error")]
    assert "cut off" in error["parse_error"] and error["attempt"] == 1
    out = [c for kind, c in chunks if kind == "values"][-1]
    assert out["messages"][-1].content == "Opened."


@pytest.mark.parametrize(
    "answer",
    [
        'Here is what I found: {"tool_result": {"name": "get_weather", "content": "sunny"}}',
        'The user record is {"name": "get_weather", "arguments": {"city": "Paris"}}.',
    ],
)
def test_json_quoted_in_a_final_answer_is_never_run(catalog, rec, answer):
    model = TextOnlyModel(responses=[AIMessage(answer)], cycle=False)
    node = ToolAgent(model, catalog, tool_call_formats=["json"], pinned=["get_weather"])
    out = tool_agent_app(node).invoke(
        {"messages": [HumanMessage("weather?")], "selected_tools": ["get_weather"]}
    )
    assert rec.runs == [] and len(model.calls) == 1
    assert out["messages"][-1].content == answer and not out["messages"][-1].tool_calls


@pytest.mark.parametrize("api", APIS)
async def test_a_format_that_raises_is_an_error_for_the_model_not_for_the_graph(
    catalog, rec, api, monkeypatch
):
    hermes = type(get_format("hermes"))
    parse = hermes.parse

    def broken(self: Any, text: str) -> Any:  # a format with a bug some replies reach
        if "<tool_call>" in text:
            raise TypeError("unhashable type: 'list'")
        return parse(self, text)

    model = TextOnlyModel(responses=[AIMessage("<tool_call>{}</tool_call>"), AIMessage("ok")])
    app = tool_agent_app(ToolAgent(model, catalog, tool_call_formats=["hermes"]))
    monkeypatch.setattr(hermes, "parse", broken)
    out = await run(app, {"messages": [HumanMessage("hi")], "selected_tools": []}, api)
    assert rec.runs == [] and out["messages"][-1].content == "ok" and len(model.calls) == 2
    assert "could not be read (TypeError(" in model.calls[1][-1].content


# --- stream_mode="messages" --------------------------------------------------------------
# LangGraph's messages stream sends each message id once. The parsed message of a text reply
# with calls has its own id (the reply's + "-parsed"), so the stream shows the model's text as
# it was written (token by token for a streaming model), then the parsed message with its
# calls at the node's end; the state holds the parsed message only.


class StreamingTextModel(GenericFakeChatModel):
    """A chat model without native tool calling that streams its replies word by word."""


async def stream_messages(app: Any, payload: Any, api: str, config: Any) -> list[BaseMessage]:
    if api == "invoke":
        chunks = list(app.stream(payload, config, stream_mode="messages"))
    else:
        chunks = [c async for c in app.astream(payload, config, stream_mode="messages")]
    return [message for message, _ in chunks]


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("streaming", [True, False], ids=["token-stream", "whole-reply"])
@pytest.mark.parametrize("api", APIS)
async def test_the_messages_stream_shows_the_parsed_calls_the_tool_messages_answer(
    catalog, rec, fmt, streaming, api
):
    reply = text_call(fmt, "get_weather", city="Paris")
    answer = AIMessage("It is 18C and cloudy in Paris.")
    model = (
        StreamingTextModel(messages=iter([reply, answer]))
        if streaming
        else TextOnlyModel(responses=[reply, answer], cycle=False)
    )
    graph = create_toolbudget_agent(model, catalog, tool_call_formats=fmt, pinned=["get_weather"])
    app = graph.compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    payload = {"messages": [HumanMessage("What's the weather in Paris?")]}
    streamed = await stream_messages(app, payload, api, config)
    assert rec.runs == [("get_weather", {"city": "Paris"})]

    raw_id = streamed[0].id
    raw = [m for m in streamed if m.id == raw_id]
    assert all(isinstance(m, AIMessage) and not m.tool_calls for m in raw)
    assert "".join(str(m.content) for m in raw) == reply.content  # the model's text, as written
    assert all(isinstance(m, AIMessageChunk) for m in raw) is streaming  # as the model sends it
    (parsed,) = [m for m in streamed if isinstance(m, AIMessage) and m.tool_calls]
    assert parsed.id == f"{raw_id}-parsed" and not isinstance(parsed, AIMessageChunk)
    (call,) = parsed.tool_calls
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Paris"})
    answered = [m.tool_call_id for m in streamed if isinstance(m, ToolMessage)]
    assert answered == [call["id"]]  # the streamed tool message answers a call it showed

    state = (await app.aget_state(config) if api == "ainvoke" else app.get_state(config)).values
    ai = [m for m in state["messages"] if isinstance(m, AIMessage)]
    assert [m.id for m in ai][0] == parsed.id and raw_id not in {m.id for m in state["messages"]}
    assert ai[0].tool_calls == parsed.tool_calls and len(ai) == 2  # one AI message per model turn
    final = [m for m in streamed if m.id == ai[1].id]
    assert "".join(str(m.content) for m in final) == answer.content  # the answer streams as usual
    assert len(final) > 1 if streaming else len(final) == 1


@pytest.mark.parametrize("api", APIS)
async def test_a_model_tagged_nostream_streams_the_parsed_message_and_no_markup(catalog, rec, api):
    reply = text_call("hermes", "get_weather", city="Paris")
    answer = AIMessage("It is 18C and cloudy in Paris.")
    model = StreamingTextModel(messages=iter([reply, answer])).with_config(tags=["nostream"])
    app = create_toolbudget_agent(model, catalog, pinned=["get_weather"]).compile()
    payload = {"messages": [HumanMessage("What's the weather in Paris?")]}
    streamed = await stream_messages(app, payload, api, None)
    assert rec.runs == [("get_weather", {"city": "Paris"})]
    assert not any("<tool_call>" in str(m.content) for m in streamed)
    first, tool, last = streamed
    assert isinstance(first, AIMessage) and first.id.endswith("-parsed") and first.tool_calls
    assert isinstance(tool, ToolMessage) and tool.tool_call_id == first.tool_calls[0]["id"]
    assert not isinstance(last, AIMessageChunk) and last.content == answer.content


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("api", APIS)
async def test_a_number_the_checkpointer_cannot_store_is_kept_as_written_and_the_thread_goes_on(
    catalog, rec, fmt, api
):
    """LangGraph's checkpointer stores integers of 64 bits only: a text call's bigger number is
    kept as the text the model wrote (the run failed when it saved the reply), coerced back
    for the tool's integer field; a Pythonic hex literal of 5,000 digits, which Python will not
    even write in decimal, is kept as written too, and the history shows both on later turns."""
    saver, config = MemorySaver(), {"configurable": {"thread_id": f"big-{fmt}"}}
    reply = text_call(fmt, "merge_pull_request", repo="acme/app", number=2**64)
    model = TextOnlyModel(responses=[reply, AIMessage("merged"), AIMessage("hi")], cycle=False)
    app = create_toolbudget_agent(
        model, catalog, pinned=["merge_pull_request"], tool_call_formats=[fmt]
    ).compile(checkpointer=saver)
    out = await run(app, {"messages": [HumanMessage("merge it")]}, api, config)
    assert rec.runs == [("merge_pull_request", {"repo": "acme/app", "number": 2**64})]
    (call,) = [c for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert call["args"] == {"repo": "acme/app", "number": str(2**64)}
    out = await run(app, {"messages": [HumanMessage("thanks")]}, api, config)
    assert out["messages"][-1].content == "hi" and str(2**64) in str(model.calls[-1])


@pytest.mark.parametrize("api", APIS)
async def test_a_pythonic_hex_literal_of_any_length_never_stops_the_thread(catalog, rec, api):
    saver, config = MemorySaver(), {"configurable": {"thread_id": "hex"}}
    huge = "0x" + "f" * 5000  # 20,000 bits: over 6,000 decimal digits
    model = TextOnlyModel(
        responses=[AIMessage(f"[get_weather(city={huge})]"), AIMessage("no"), AIMessage("hi")],
        cycle=False,
    )
    app = create_toolbudget_agent(
        model, catalog, pinned=["get_weather"], tool_call_formats=["pythonic"]
    ).compile(checkpointer=saver)
    await run(app, {"messages": [HumanMessage("weather?")]}, api, config)
    assert rec.runs == [("get_weather", {"city": huge})]
    out = await run(app, {"messages": [HumanMessage("thanks")]}, api, config)
    assert out["messages"][-1].content == "hi" and f"get_weather(city='{huge}')" in str(
        model.calls[-1]
    )


SCREENSHOT = "iVBORw0KGgo" + "A" * 60_000  # a PNG's base64


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_an_image_a_tool_returns_is_a_short_note_in_a_text_formats_prompt(fmt):
    # An image block reaches a native model as a block; a text format writes the tool result
    # into the prompt as text, where its base64 filled the prompt (60,000 characters here).
    @tool(response_format="content_and_artifact")
    def screenshot(url: str) -> tuple[list[dict[str, Any]], None]:
        """Take a screenshot of a web page."""
        image = {"type": "image", "base64": SCREENSHOT, "mime_type": "image/png"}
        return [{"type": "text", "text": "screenshot of " + url}, image], None

    form = get_format(fmt)
    call = {"name": "screenshot", "args": {"url": "https://example.com"}, "id": "c1"}
    model = ScriptedChatModel(
        responses=[AIMessage(form.render_calls([call])), AIMessage("A page.")], cycle=False
    )
    catalog = ToolCatalog.from_tools(
        [screenshot], tool_metadata={"screenshot": {"include": "always"}}
    )
    graph = create_toolbudget_agent(
        model, catalog, tool_call_formats={"enabled": [fmt], "primary": fmt}
    ).compile()
    out = graph.invoke({"messages": [HumanMessage("screenshot example.com")]})
    assert isinstance(out["messages"][-2], ToolMessage)  # the state keeps the block itself
    assert out["messages"][-2].content[1]["base64"] == SCREENSHOT
    prompt = "\n".join(str(m.content) for m in model.calls[1])
    assert SCREENSHOT[:40] not in prompt and len(prompt) < 10_000
    assert "screenshot of https://example.com" in prompt
    assert "[image/png image, 60," in prompt and "not shown" in prompt


# --- what the model sends beside its text (review 27c) ---------------------------------------

THOUGHT = 'Maybe first: <tool_call>{"name": "explode", "arguments": {"reason": "x"}}</tool_call>'


@pytest.mark.parametrize(
    "before",
    [
        [{"type": "reasoning", "reasoning": THOUGHT}],  # output_version="v1"
        [{"type": "thinking", "thinking": THOUGHT, "signature": "sig=="}],  # Anthropic
        [],  # additional_kwargs["reasoning_content"] alone (ChatDeepSeek, ChatOllama)
    ],
    ids=["v1-reasoning", "anthropic-thinking", "kwargs-only"],
)
@pytest.mark.parametrize("api", APIS)
async def test_a_text_format_reply_with_calls_keeps_its_reasoning_in_the_state(
    catalog, rec, before, api
):
    call = get_format("hermes").render_calls(
        [{"name": "get_weather", "args": {"city": "Paris"}, "id": "x"}]
    )
    text = {"type": "text", "text": f"Checking.\n{call}"}
    reply = AIMessage(
        [*before, text] if before else text["text"],
        id="run-1",
        additional_kwargs={"reasoning_content": THOUGHT},
        response_metadata={"model_provider": "ollama"},
    )
    model = TextOnlyModel(responses=[reply, AIMessage("18C in Paris.")], cycle=False)
    app = create_toolbudget_agent(
        model, catalog, pinned=["get_weather", "explode"], tool_call_formats="hermes"
    ).compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    await run(app, {"messages": [HumanMessage("weather in Paris?")]}, api, config)
    messages = app.get_state(config).values["messages"]
    stored = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    assert stored.id == "run-1-parsed" and [c["name"] for c in stored.tool_calls] == ["get_weather"]
    assert stored.additional_kwargs == {"reasoning_content": THOUGHT}  # was {}
    assert stored.content == (
        [*before, {"type": "text", "text": "Checking."}] if before else "Checking."
    )
    assert rec.names == ["get_weather"]  # the call drafted in the reasoning never runs
