"""The model call: the prompt (your system prompt plus the tools section) and the bound tools.

Key Components:
    - :func:`tools_prompt_section`: the system-prompt section that lists the
      categories and how to widen the tool set.
    - :data:`SystemPrompt`: what ``system_prompt=`` accepts: a string, a
      ``SystemMessage``, or a callable ``(state) -> messages`` /
      ``(state, config) -> messages``, like ``create_react_agent``'s ``prompt``.
    - :class:`ModelCaller`: binds the meta-tools and the visible tools, builds
      the prompt and calls the model; shared by ``CallModel`` and ``ToolAgent``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import repair_tool_calls
from langgraph_toolbudget.core.meta import (
    ADD_TOOL,
    META_TOOL_NAMES,
    REQUEST_MORE_TOOLS,
    SEARCH_TOOLS,
    SHOW_ALL_TOOLS,
)
from langgraph_toolbudget.core.working_set import WorkingSet, state_messages
from langgraph_toolbudget.execution.builtins import Builtins
from langgraph_toolbudget.nodes.models import require_tool_calling, resolve_chat_model

__all__ = ["ModelCaller", "SystemPrompt", "ai_calls_this_turn", "tools_prompt_section"]

SystemPrompt = str | SystemMessage | Callable[..., Any] | Runnable | None
"""A system prompt: text, a ``SystemMessage``, or a callable/runnable of the state."""

BAD_PROMPT_ERROR = (
    "system_prompt must be a string, a SystemMessage, or a callable (state) -> messages or "
    "(state, config) -> messages; got {kind}."
)
BAD_PROMPT_RESULT_ERROR = (
    "system_prompt callable must return a string, a SystemMessage or a list of messages; "
    "got {kind}."
)


def tools_prompt_section(catalog: ToolCatalog, builtins: Collection[str] = META_TOOL_NAMES) -> str:
    """The system-prompt section: categories (sorted) and how to widen the tool set.

    Args:
        catalog: the tool catalog.
        builtins: the built-in tools the model is given (default: the four
            meta-tools); only those are explained.
    """
    descriptions = catalog.category_descriptions
    lines = [
        "## Tools",
        "You see a small set of tools chosen for this request. Only the tools you see can be "
        "called. More tools exist in these categories:",
    ]
    for cat in sorted(catalog.categories):
        lines.append(f"- {cat}: {descriptions[cat]}" if descriptions.get(cat) else f"- {cat}")
    how = []
    if REQUEST_MORE_TOOLS in builtins:
        how.append("- request_more_tools(categories=[...]) loads the tools of whole categories;")
    if SEARCH_TOOLS in builtins and ADD_TOOL in builtins:
        how.append(
            '- search_tools(query="regex") finds tools by name or description, then '
            "add_tool(tool_names=[...]) loads the ones you need;"
        )
    elif SEARCH_TOOLS in builtins:
        how.append('- search_tools(query="regex") finds tools by name or description;')
    elif ADD_TOOL in builtins:
        how.append("- add_tool(tool_names=[...]) loads tools by name;")
    if SHOW_ALL_TOOLS in builtins:
        how.append("- show_all_tools() lists every tool name.")
    if how:
        lines += ["If your tools cannot do the task:", *how]
    return "\n".join(lines)


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.text, str) else str(message.content)


def _check_prompt(prompt: Any) -> SystemPrompt:
    if prompt is None or isinstance(prompt, str | SystemMessage | Runnable) or callable(prompt):
        return prompt
    raise TypeError(BAD_PROMPT_ERROR.format(kind=type(prompt).__name__))


def _takes_config(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


class ModelCaller:
    """Binds meta-tools + visible tools, builds the prompt, calls the model.

    Args:
        model: a chat model with native tool calling, or a ``"provider:model"`` string.
        catalog: the tool catalog.
        system_prompt: see :data:`SystemPrompt`.
        builtins: the node's enabled built-in tools, bound ahead of the visible tools.

    Raises:
        TypeError: ``model`` is not a chat model or a model string;
            ``system_prompt`` of an unsupported type.
        ValueError: the model cannot call tools natively; a catalog tool is
            named like a meta-tool.
    """

    def __init__(
        self, model: Any, catalog: ToolCatalog, system_prompt: SystemPrompt, builtins: Builtins
    ) -> None:
        self.model: BaseChatModel = resolve_chat_model(model)
        require_tool_calling(self.model)
        self.catalog = catalog
        self.system_prompt = _check_prompt(system_prompt)
        self._prompt_takes_config = callable(system_prompt) and _takes_config(system_prompt)
        self.builtin_tools = builtins.tools
        self.section = tools_prompt_section(catalog, builtins.names)

    def _own_messages(self, state: Any, config: RunnableConfig) -> list[BaseMessage]:
        """The messages to send before our section is merged in."""
        prompt = self.system_prompt
        messages = list(state_messages(state))
        if prompt is None:
            return messages
        if isinstance(prompt, str):
            return [SystemMessage(prompt), *messages]
        if isinstance(prompt, SystemMessage):
            return [prompt, *messages]
        if isinstance(prompt, Runnable):
            result = prompt.invoke(state, config)
        elif self._prompt_takes_config:
            result = prompt(state, config)
        else:
            result = prompt(state)
        if isinstance(result, str):
            return [SystemMessage(result), *messages]
        if isinstance(result, SystemMessage):
            return [result, *messages]
        if hasattr(result, "to_messages"):  # a ChatPromptValue
            result = result.to_messages()
        if isinstance(result, list) and all(isinstance(m, BaseMessage) for m in result):
            return list(result)
        raise TypeError(BAD_PROMPT_RESULT_ERROR.format(kind=type(result).__name__))

    def prompt(self, state: Any, config: RunnableConfig) -> list[BaseMessage]:
        """Messages with one system message first: the leading system messages, then our section."""
        messages = self._own_messages(state, config)
        own: list[str] = []
        while messages and isinstance(messages[0], SystemMessage):
            own.append(_text(messages.pop(0)))
        return [SystemMessage("\n\n".join([*own, self.section])), *messages]

    def bound(self, working: WorkingSet) -> Any:
        tools = [*self.builtin_tools, *self.catalog.tools(working.names)]
        return self.model.bind_tools(tools)

    def invoke(self, state: Any, working: WorkingSet, config: RunnableConfig) -> AIMessage:
        return repair_tool_calls(self.bound(working).invoke(self.prompt(state, config), config))

    async def ainvoke(self, state: Any, working: WorkingSet, config: RunnableConfig) -> AIMessage:
        reply = await self.bound(working).ainvoke(self.prompt(state, config), config)
        return repair_tool_calls(reply)


def ai_calls_this_turn(messages: Sequence[BaseMessage]) -> int:
    """AI messages since the latest human message."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage):
            count += 1
    return count
