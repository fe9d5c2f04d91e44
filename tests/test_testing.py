"""The scripted chat model the tests and users' own tests rely on (langgraph_toolbudget.testing)."""

from __future__ import annotations

import asyncio
import re
import sys
import textwrap
import threading

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from langgraph_toolbudget.testing import ScriptedChatModel


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return city


@tool
def send_message(text: str) -> str:
    """Send a message."""
    return text


def echo_tools(messages, tools) -> AIMessage:
    return AIMessage(",".join(tools))


def test_a_callable_sees_the_tools_of_the_model_it_was_called_through():
    model = ScriptedChatModel(responses=[echo_tools], cycle=True)
    weather = model.bind_tools([get_weather])
    messages = model.bind_tools([send_message])
    assert weather.invoke([HumanMessage("hi")]).content == "get_weather"
    assert messages.invoke([HumanMessage("hi")]).content == "send_message"
    assert model.invoke([HumanMessage("hi")]).content == ""  # unbound: shown no tools
    assert model.bound_tools == [["get_weather"], ["send_message"]]


async def test_concurrent_runs_each_see_their_own_tools():
    model = ScriptedChatModel(responses=[echo_tools], cycle=True)
    bound = [model.bind_tools([get_weather]), model.bind_tools([send_message])] * 10
    answers = await asyncio.gather(*(m.ainvoke([HumanMessage("hi")]) for m in bound))
    assert [a.content for a in answers] == ["get_weather", "send_message"] * 10


def test_a_script_without_cycle_names_the_call_that_has_no_response():
    model = ScriptedChatModel(responses=["one"], cycle=False)
    assert model.invoke("hi").content == "one"
    with pytest.raises(IndexError, match="call 2 has none"):
        model.invoke("hi")


@pytest.mark.parametrize(
    ("responses", "said"),
    [
        ([42], "responses[0] is int 42"),
        ("hi", "str 'hi'"),
        ([{"content": "x"}], "responses[0] is dict"),
        ([10**5000], "responses[0] is int 0x"),  # too long to print: shown bounded
    ],
)
def test_a_response_that_is_no_message_string_or_callable_is_refused_when_built(responses, said):
    """It failed only at its call, with "'int' object has no attribute 'model_copy'"."""
    with pytest.raises(
        TypeError, match=r"responses must be a list of messages .*; " + re.escape(said)
    ):
        ScriptedChatModel(responses=responses)
    assert ScriptedChatModel(responses=("a", AIMessage("b"))).invoke("hi").content == "a"


def test_runs_in_os_threads_sharing_a_model_each_take_their_own_response():
    """A sync server's threads share one model: no response is given twice or skipped."""
    threads, each = 16, 150
    model = ScriptedChatModel(
        responses=[AIMessage(str(k)) for k in range(threads * each)], cycle=False
    )
    got: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        for _ in range(each):
            try:
                got.append(str(model.invoke([HumanMessage("hi")]).content))
            except IndexError as exc:
                errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, as a busy server does
    try:
        workers = [threading.Thread(target=work) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert sorted(got, key=int) == [str(k) for k in range(threads * each)]
    assert len(model.calls) == threads * each


def test_the_module_docstring_example_runs_as_written(capsys):
    import langgraph_toolbudget.testing

    doc = langgraph_toolbudget.testing.__doc__ or ""
    block = textwrap.dedent(re.search(r"```python\n(.*?)```", doc, re.S).group(1))
    exec(compile(block, "<testing docstring>", "exec"), {})
    assert capsys.readouterr().out.splitlines() == ["It is sunny.", "True"]  # as its comments say
