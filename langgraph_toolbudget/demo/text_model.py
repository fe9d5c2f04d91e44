"""The demo model without native tool calling: it reads its tools from the prompt and
writes Hermes ``<tool_call>`` blocks as text.

Its one reason to change: how the demo rules are served without native tool calling.

Key Components:
    - :class:`HermesDemoChatModel`: the rule-based
      :func:`~langgraph_toolbudget.demo.model.demo_reply` behind a text-only
      interface, as a local model served without a tool-calling template would
      be (no ``bind_tools``). The agent chooses the
      Hermes format for it, writes the tools into the system prompt and parses
      its replies. It is a demo model for the offline demo and the server's
      text-format graph, not a test fake.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langgraph_toolbudget.demo.model import RuleChatModel, demo_reply
from langgraph_toolbudget.formats import get_format

__all__ = ["HermesDemoChatModel", "read_hermes_prompt"]

_TOOLS_START, _TOOLS_END = "<tools>\n", "\n</tools>"
_RESPONSE_START, _RESPONSE_END = "<tool_response>", "</tool_response>"


def _tools(system: str) -> list[dict[str, Any]]:
    start = system.find(_TOOLS_START)
    end = system.find(_TOOLS_END, start)
    if start < 0 or end < 0:
        return []
    lines = system[start + len(_TOOLS_START) : end].splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _responses(text: str) -> list[str]:
    out = []
    for block in text.split(_RESPONSE_START)[1:]:
        body = block.split(_RESPONSE_END, 1)[0].strip()
        try:
            out.append(str(json.loads(body).get("content", body)))
        except (ValueError, AttributeError):
            out.append(body)
    return out


def read_hermes_prompt(
    messages: Sequence[BaseMessage],
) -> tuple[list[BaseMessage], list[dict[str, Any]]]:
    """A Hermes-format prompt read back: (standard messages, the tools' OpenAI schemas).

    ``<tool_call>`` blocks become ``tool_calls`` and ``<tool_response>`` blocks
    ``ToolMessage``s answering them in order, so the rule-based demo logic,
    written for native tool calling, runs unchanged.
    """
    hermes = get_format("hermes")
    tools: list[dict[str, Any]] = []
    out: list[BaseMessage] = []
    pending: list[str] = []
    for message in messages:
        text = message.text if isinstance(message.text, str) else str(message.content)
        if isinstance(message, SystemMessage):
            tools = _tools(text) or tools
        elif isinstance(message, AIMessage):
            parsed = hermes.parse(text)
            calls = [
                {"name": c["name"], "args": c["args"], "id": f"h{len(out)}_{i}"}
                for i, c in enumerate(parsed.calls)
            ]
            pending = [c["id"] for c in calls]
            out.append(AIMessage(parsed.text, tool_calls=calls))
        elif isinstance(message, HumanMessage) and _RESPONSE_START in text:
            for call_id, content in zip(pending, _responses(text), strict=False):
                out.append(ToolMessage(content, tool_call_id=call_id))
        else:
            out.append(message)
    return out, tools


class HermesDemoChatModel(RuleChatModel):
    """The demo model as a text-only model that writes Hermes tool calls.

    It has no ``bind_tools``, so the agent picks a text format for it (Hermes,
    its preset); it reads the ``<tools>`` of its system prompt and answers with
    ``<tool_call>`` blocks.

    Example:
        ```python
        graph = create_toolbudget_agent(HermesDemoChatModel(), build_example_catalog())
        graph.compile().invoke({"messages": [("user", "What's the weather in Paris?")]})
        ```
    """

    model_name: str = "hermes-demo"

    @property
    def _llm_type(self) -> str:
        return "toolbudget-hermes-demo"

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        history, tools = read_hermes_prompt(messages)
        reply = demo_reply(history, tools)
        if reply.tool_calls:
            reply = AIMessage(get_format("hermes").render_calls(reply.tool_calls))
        return reply
