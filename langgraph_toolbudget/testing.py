"""A fake chat model for tests: :class:`ScriptedChatModel`.

Its one reason to change: what tests need from a fake chat model.

langchain-core's fake chat models raise on ``bind_tools``; this one records the
tools it was bound to and replays a script of answers, so a graph that binds
tools runs end to end without a provider.

Example:
    ```python
    from langchain_core.messages import AIMessage

    from langgraph_toolbudget import create_toolbudget_agent
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog
    from langgraph_toolbudget.testing import ScriptedChatModel

    model = ScriptedChatModel(responses=[
        AIMessage("", tool_calls=[
            {"name": "search_tools", "args": {"query": "weather"}, "id": "1"},
        ]),
        AIMessage("It is sunny."),
    ])
    graph = create_toolbudget_agent(model, build_example_catalog()).compile()
    out = graph.invoke({"messages": [("user", "What's the weather in Paris?")]})
    print(out["messages"][-1].content)  # It is sunny.
    print("search_tools" in model.bound_tools[0])  # True: the tools it was bound to
    ```
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, field_validator

from langgraph_toolbudget.core.limits import safe_repr

__all__ = ["ScriptedChatModel"]

_SCRIPT_LOCK = threading.Lock()
"""Held while a model takes its next response or records a call: a model shared by runs in
OS threads (a sync server's) gives each call its own response. One for every model, not one
per model: a lock in the model would make it impossible to deep-copy."""


BAD_RESPONSES_ERROR = (
    "ScriptedChatModel: responses must be a list of messages (AIMessage(...)), strings "
    "(answered as an AIMessage) or callables (messages, bound_tool_names) -> message; {what}."
)


class ScriptedChatModel(FakeMessagesListChatModel):
    """A fake chat model that replays ``responses`` and records ``bind_tools``.

    Each call returns the next response. A response may be a message or a
    callable ``(messages, bound_tool_names) -> message``, to answer from what
    the model was shown in that call (the tools of the bound model it was called through;
    none when it was called unbound). After the last response the script repeats it when
    ``cycle`` is true (the default), else raises ``IndexError`` naming the call. Runs may share
    one model, in asyncio tasks or in OS threads: each call takes its own response.

    Attributes:
        responses: the script: messages, strings (answered as an ``AIMessage``) or
            callables ``(messages, bound_tool_names) -> message``.
        cycle: repeat the last response once the script is used up (default True); else
            a further call raises ``IndexError``.
        bound_tools: the tool names of every ``bind_tools`` call, in order.
        calls: the message lists the model was called with.
        tools_schema: the OpenAI tool schemas of the latest ``bind_tools`` call (of any
            run sharing the model; a callable response gets its own call's tool names).
        sleep: inherited from ``FakeMessagesListChatModel`` and ignored: a call never
            sleeps (for a slow model, give a callable response that sleeps).
        i: the position of the next response in the script (inherited).
    """

    responses: list[Any]
    cycle: bool = True
    bound_tools: list[list[str]] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    tools_schema: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("responses", mode="before")
    @classmethod
    def _check_responses(cls, responses: Any) -> Any:
        """Refuse a response that is no message, string or callable at construction (it
        failed at its call, with ``AttributeError: 'int' object has no attribute
        'model_copy'``)."""
        if isinstance(responses, str | bytes | Mapping) or not isinstance(responses, Iterable):
            raise TypeError(
                BAD_RESPONSES_ERROR.format(
                    what=f"{type(responses).__name__} {safe_repr(responses, 60)}"
                )
            )
        responses = list(responses)  # a generator, as pydantic's list took it
        for i, response in enumerate(responses):
            if not isinstance(response, BaseMessage | str) and not callable(response):
                what = f"responses[{i}] is {type(response).__name__} {safe_repr(response, 60)}"
                raise TypeError(BAD_RESPONSES_ERROR.format(what=what))
        return responses

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Record the tools (by name) and return a model that carries them."""
        schemas = [convert_to_openai_tool(t) for t in tools]
        with _SCRIPT_LOCK:
            self.bound_tools.append([s["function"]["name"] for s in schemas])
            self.tools_schema = schemas
        return self.bind(tools=schemas, **kwargs)

    def _next(self, messages: list[BaseMessage], tools: Any = None) -> BaseMessage:
        with _SCRIPT_LOCK:
            self.calls.append(list(messages))
            if self.i >= len(self.responses):
                if not self.cycle or not self.responses:
                    raise IndexError(
                        f"ScriptedChatModel has {len(self.responses)} responses; call "
                        f"{self.i + 1} has none. Add responses or set cycle=True."
                    )
                self.i = len(self.responses) - 1
            response = self.responses[self.i]
            self.i += 1
        if callable(response) and not isinstance(response, BaseMessage):
            # The tools of this call (each bound model carries its own), not the latest
            # bind_tools of any run: concurrent runs bind different sets.
            shown = [t["function"]["name"] for t in tools] if tools is not None else []
            response = response(list(messages), shown)
        if isinstance(response, str):
            response = AIMessage(response)
        return response.model_copy(deep=True)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._next(messages, kwargs.get("tools"))
        return ChatResult(generations=[ChatGeneration(message=message)])
