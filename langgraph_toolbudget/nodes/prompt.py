"""The model call: the prompt (your system prompt plus the tools section) and the bound tools.

Its one reason to change: what the model call sends and how it reads the reply.

Key Components:
    - :func:`tools_prompt_section`: the system-prompt section that lists the
      categories and how to widen the tool set.
    - :data:`SystemPrompt`: what ``system_prompt=`` accepts: a string, a
      ``SystemMessage``, or a callable ``(state) -> messages`` /
      ``(state, config) -> messages``, like ``create_react_agent``'s ``prompt``.
    - :class:`ModelCaller`: shows the built-ins and the visible tools to the
      model in the chosen tool-call format (bound natively, or written into the
      prompt and parsed back), builds the prompt and calls the model; shared by
      ``CallModel`` and ``ToolAgent``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.budget import format_for_model
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import distinct_call_ids, repair_tool_calls
from langgraph_toolbudget.core.intent import starts_turn
from langgraph_toolbudget.core.working_set import WorkingSet, state_messages
from langgraph_toolbudget.execution.batch import (
    Author,
    agent_key,
    agent_path,
    by_author,
    stamped,
)
from langgraph_toolbudget.execution.builtins import Builtins
from langgraph_toolbudget.formats import format_names, get_format
from langgraph_toolbudget.formats.base import ParsedReply, ToolCallFormat, reply_message
from langgraph_toolbudget.formats.history import parse_error_of, render_history
from langgraph_toolbudget.formats.settings import FormatChoice, ToolCallFormats, choose_format
from langgraph_toolbudget.nodes._node import emit_event
from langgraph_toolbudget.nodes.models import (
    model_name,
    native_tool_calling,
    not_a_message_error,
    resolve_chat_model,
)
from langgraph_toolbudget.nodes.thread_prompt import (
    ThreadPrompt,
    tools_prompt_section,
)

__all__ = [
    "FORMAT_EVENT",
    "UNANSWERED_CALL_ERROR",
    "ModelCaller",
    "SystemPrompt",
    "ai_calls_this_turn",
    "answer_unanswered_calls",
    "check_system_prompt",
    "read_text_reply",
    "tools_prompt_section",
    "with_section",
]

logger = logging.getLogger(__name__)

FORMAT_EVENT = "toolbudget.tool_call_format"
"""Custom stream event of each model call: the tool-call format used and why
(``format``, ``reason``, ``native_available``; ``parse_error`` and ``attempt``
when a text reply could not be read)."""

UNANSWERED_CALL_ERROR = (
    "Error: tool '{name}' got no answer: the run that called it was stopped (interrupted by "
    "a new message, cancelled, or failed) before it answered. It may or may not have taken "
    "effect: check before calling it again."
)
"""What the model is sent in place of a call's missing answer (:func:`answer_unanswered_calls`)."""

SystemPrompt = str | SystemMessage | Callable[..., Any] | Runnable[Any, Any] | None
"""A system prompt: text, a ``SystemMessage``, or a callable/runnable of the state."""

BAD_PROMPT_ERROR = (
    "{owner}: option system_prompt must be a string, a SystemMessage, or a callable "
    "(state) -> messages or (state, config) -> messages; got {kind}."
)
BAD_PROMPT_RESULT_ERROR = (
    "system_prompt callable must return a string, a SystemMessage or a list of messages; "
    "got {kind}."
)


def with_section(system: Sequence[SystemMessage], section: str) -> SystemMessage:
    """One system message: the content of the ``system`` messages, then ``section``.

    Text is joined with blank lines (empty parts left out). When one of them has content
    blocks, the blocks are kept as they are (an Anthropic ``cache_control`` on a block keeps
    prompt caching on), a text content becomes one text block beside them, and ``section``
    is one more text block after them all. For one message (or none) it is what
    ``ToolBudgetMiddleware`` sends: ``create_agent``'s system message, then its section.

    >>> with_section([SystemMessage("Be brief.")], "Tools: ...").content
    'Be brief.\\n\\nTools: ...'
    >>> cached = {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    >>> with_section([SystemMessage([cached])], "Tools: ...").content[1]
    {'type': 'text', 'text': 'Tools: ...'}
    """
    texts = [m.content for m in system if isinstance(m.content, str)]
    if len(texts) == len(system):
        return SystemMessage("\n\n".join(p for p in (*texts, section) if p))
    blocks: list[Any] = []
    for message in system:
        if isinstance(message.content, str):
            blocks += [{"type": "text", "text": message.content}] if message.content else []
        else:
            blocks += message.content
    return SystemMessage([*blocks, {"type": "text", "text": section}])


def check_system_prompt(prompt: Any, owner: str) -> SystemPrompt:
    """``prompt`` if it is a system prompt (:data:`SystemPrompt`), else a ``TypeError`` naming
    ``owner`` (the node or factory that took it) and what it must be."""
    if prompt is None or isinstance(prompt, str | SystemMessage | Runnable) or callable(prompt):
        return prompt
    raise TypeError(BAD_PROMPT_ERROR.format(owner=owner, kind=type(prompt).__name__))


def _takes_config(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


class ModelCaller:
    """Builds the prompt, shows the tools in the chosen format, calls the model.

    The format comes from ``config.tool_call_formats`` and the model's
    capabilities (:func:`~langgraph_toolbudget.formats.settings.choose_format`):
    native binds the built-ins and the visible tools with ``bind_tools``; a text
    format writes them into the system prompt, rewrites the tool calls and
    results of the history in its own way, and parses the reply into standard
    ``AIMessage.tool_calls``. A reply that looks like a call but cannot be
    parsed is kept (with its error) and the model is asked again, while the
    turn has model calls left (``max_iterations``).

    Args:
        model: a chat model, or a ``"provider:model"`` string.
        catalog: the tool catalog.
        system_prompt: see :data:`SystemPrompt`.
        builtins: the node's enabled built-in tools, shown ahead of the visible tools.
        config: the shared options (``tool_call_formats``, ``model_supports_tools``,
            ``model_size``, ``max_iterations``).
        node: the node's name, for the stream events.

    Raises:
        TypeError: ``model`` is not a chat model or a model string;
            ``system_prompt`` of an unsupported type.
        ValueError: no enabled format is available for the model (native
            only, and the model cannot call tools).
    """

    def __init__(
        self,
        model: Any,
        catalog: ToolCatalog,
        system_prompt: SystemPrompt,
        builtins: Builtins,
        config: BudgetConfig | None = None,
        node: str = "agent",
    ) -> None:
        self.model: BaseChatModel = resolve_chat_model(model)
        self.config = config or BudgetConfig()
        self.node = node
        self.catalog = catalog
        self.agent_key = agent_key(catalog)
        """Which agent this is, beside its place in the graph (:func:`agent_path`)."""
        self.system_prompt = check_system_prompt(system_prompt, "CallModel")
        self._prompt_takes_config = callable(system_prompt) and _takes_config(system_prompt)
        self.thread_prompt = ThreadPrompt(catalog, builtins)
        self.builtin_tools = self.thread_prompt.tools
        self.section = self.thread_prompt.section
        formats = self.config.tool_call_formats
        on_purpose = isinstance(formats, ToolCallFormats) and formats.primary != "native"
        self.choice = self._choose(
            *native_tool_calling(
                self.model, self.config.model_supports_tools, text_on_purpose=on_purpose
            )
        )

    def _choose(self, native: bool, why: str) -> FormatChoice:
        name = model_name(self.model)
        hint = self.config.model_size if isinstance(self.config.model_size, str) else name
        formats = self.config.tool_call_formats
        note = ""
        if not isinstance(formats, ToolCallFormats):
            preset = format_for_model(hint)
            formats = ToolCallFormats.default(preset)
            if preset is not None and not native:
                note = f"; {preset!r} is the preset for model {hint!r}"
        model = f"{type(self.model).__name__}" + (f" ({name})" if name else "")
        return choose_format(
            formats,
            native_available=native,
            native_why=why,
            model=model,
            preset_note=note,
            unavailable=self._unavailable_formats(),
        )

    def _unavailable_formats(self) -> dict[str, str]:
        """Formats that need a built-in this node does not give (CodeMode needs
        ``python_execution``), and why."""
        out: dict[str, str] = {}
        for name in format_names():
            missing = [t for t in get_format(name).binds if t not in self.thread_prompt.names]
            if missing:
                out[name] = (
                    f"it needs the built-in {', '.join(missing)}, which enabled_builtins does "
                    "not enable"
                )
        return out

    @property
    def format(self) -> ToolCallFormat:
        """The tool-call format in use."""
        return self.choice.format

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

    def tools(self, working: WorkingSet, state: Any = None) -> list[BaseTool]:
        """What the model is shown: the enabled built-ins (as the thread of ``state``
        sees them, see :class:`ThreadPrompt`), then the visible tools."""
        return self.thread_prompt.bound(working, state)

    def tool_schemas(self, working: WorkingSet, state: Any = None) -> list[dict[str, Any]]:
        """The OpenAI schemas of :meth:`tools` (cached per tool name and description, in a
        bounded cache)."""
        return [self.thread_prompt.schema(tool) for tool in self.tools(working, state)]

    def prompt(
        self, state: Any, config: RunnableConfig, working: WorkingSet | None = None
    ) -> list[BaseMessage]:
        """Messages with one system message first: the leading system messages, then our
        section (and, for a text format, the tools written in it; the history rewritten), as
        :func:`with_section` joins them (content blocks kept)."""
        messages = answer_unanswered_calls(self._own_messages(state, config))
        own: list[SystemMessage] = []
        while messages and isinstance(first := messages[0], SystemMessage):
            own.append(first)
            messages.pop(0)
        sections = [self.thread_prompt.for_state(state)[0]]
        if not self.format.native:
            schemas = self.tool_schemas(working or WorkingSet(), state)
            sections.append(self.format.render_tools(schemas))
            messages = render_history(messages, self.format)
        return [with_section(own, "\n\n".join(sections)), *messages]

    def bound(self, working: WorkingSet, state: Any = None) -> Any:
        """The runnable to call: the model with the tools bound (native), or the model."""
        if not self.format.native:
            binds = self.format.binds
            if not binds or not self.choice.native_available:
                return self.model
            tools = [t for t in self.tools(working, state) if t.name in binds]
            try:  # CodeMode: python_execution bound, every tool written into the prompt
                return self.model.bind_tools(tools)
            except NotImplementedError:
                return self.model
        try:
            return self.model.bind_tools(self.tools(working, state))
        except NotImplementedError:  # bind_tools exists but does not work: fall back
            self.choice = self._choose(
                False, f"{type(self.model).__name__}.bind_tools raised NotImplementedError"
            )
            return self.model

    def _attempts(self, state: Any, agent: str | None) -> int:
        made = ai_calls_this_turn(state_messages(state), (None, agent))
        return max(1, self.config.max_iterations - made)

    def _read(self, reply: BaseMessage, attempt: int) -> AIMessage:
        if not isinstance(reply, AIMessage):
            if not isinstance(reply, BaseMessage):  # with_structured_output, a parser...
                raise not_a_message_error(self.model, reply)
            reply = AIMessage(content=reply.content)
        if self.format.native or (self.format.binds and reply.tool_calls):
            # a native call (CodeMode's python_execution too); ids made distinct here, so the
            # streamed reply already has the ids its answers get (as under the middleware)
            return distinct_call_ids(repair_tool_calls(reply))
        read = read_text_reply(reply, self.format)
        if (error := parse_error_of(read)) is not None:
            emit_event(
                {"event": FORMAT_EVENT, "node": self.node, **self.choice.event(),
                 "parse_error": error, "attempt": attempt}
            )  # fmt: skip
        return read

    def _emit(self) -> None:
        emit_event({"event": FORMAT_EVENT, "node": self.node, **self.choice.event()})

    def invoke(self, state: Any, working: WorkingSet, config: RunnableConfig) -> list[AIMessage]:
        """Call the model; the replies of this call (the last one is the answer to act on),
        each recording the agent that made it (``stamped``)."""
        replies: list[AIMessage] = []
        agent = agent_path(config, self.agent_key)
        for attempt in range(1, self._attempts(state, agent) + 1):
            runnable = self.bound(working, state)
            self._emit()
            current = _with_messages(state, replies)
            reply = runnable.invoke(self.prompt(current, config, working), config)
            replies.append(stamped(self._read(reply, attempt), agent))
            if parse_error_of(replies[-1]) is None:
                break
        return replies

    async def ainvoke(
        self, state: Any, working: WorkingSet, config: RunnableConfig
    ) -> list[AIMessage]:
        """Async :meth:`invoke`."""
        replies: list[AIMessage] = []
        agent = agent_path(config, self.agent_key)
        for attempt in range(1, self._attempts(state, agent) + 1):
            runnable = self.bound(working, state)
            self._emit()
            current = _with_messages(state, replies)
            reply = await runnable.ainvoke(self.prompt(current, config, working), config)
            replies.append(stamped(self._read(reply, attempt), agent))
            if parse_error_of(replies[-1]) is None:
                break
        return replies


def read_text_reply(reply: AIMessage, fmt: ToolCallFormat) -> AIMessage:
    """``reply`` read as text in ``fmt``: the calls written in its text as ``tool_calls``
    (each with a fresh id), as :func:`~langgraph_toolbudget.formats.base.reply_message`
    builds it; a reply that cannot be read keeps no calls and its error
    (:func:`~langgraph_toolbudget.formats.history.parse_error_of`).

    Shared by :class:`ModelCaller` and ``ToolBudgetMiddleware`` (a CodeMode reply that ends
    with a ```` ```python ```` block).
    """
    text = reply.text if isinstance(reply.text, str) else str(reply.content)
    try:
        parsed = fmt.parse(text)
    except Exception as exc:  # a format must not raise; if one does, the model hears why
        logger.exception("tool-call format %r raised on a reply", fmt.name)
        parsed = ParsedReply(text=text, error=f"the reply could not be read ({exc!r:.200})")
    return reply_message(reply, parsed, fmt)


def _with_messages(state: Any, extra: list[AIMessage]) -> Any:
    """``state`` with ``extra`` appended to its messages (the rejected replies of this call)."""
    if not extra:
        return state
    messages = [*state_messages(state), *extra]
    return {**state, "messages": messages} if isinstance(state, dict) else {"messages": messages}


def ai_calls_this_turn(
    messages: Sequence[BaseMessage], author: Author | None = None, *, entry: str | None = None
) -> int:
    """The model calls of this agent's turn: its AI messages since the latest human message
    that starts a turn (:func:`starts_turn`), or since the message of id ``entry`` when that
    one comes later.

    In a multi-agent graph (a supervisor, a swarm: agents as nodes of a parent whose state
    shares ``messages``) the turn holds other agents' replies too, which must not spend this
    agent's ``max_iterations``: with ``author`` (the nodes: ``(None, agent_path(config, key))``),
    only the replies :func:`~langgraph_toolbudget.execution.batch.by_author` gives it count.
    Another framework's named agent names its replies; the package's nodes never name theirs
    (the iteration-limit message and a text format's rejected replies included) and record
    the agent that made them (:func:`~langgraph_toolbudget.execution.batch.stamped`). An
    unnamed reply that records no agent (a node of yours, a reply from before the package
    recorded it) counts for every agent.

    Args:
        messages: the thread's messages.
        author: whose replies count; None: every AI message.
        entry: the id of the last message when the agent was entered
            (``ToolBudgetMiddleware`` records it): the replies up to it are earlier agents'.
    """
    count = 0
    for message in reversed(messages):
        if starts_turn(message) or (entry is not None and getattr(message, "id", None) == entry):
            break
        if isinstance(message, AIMessage) and by_author(message, author):
            count += 1
    return count


def answer_unanswered_calls(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with an error answer (:data:`UNANSWERED_CALL_ERROR`) after each tool call
    that the tool messages right after its AI message do not answer, placed after them.

    A run stopped while its tools ran (LangGraph server's ``multitask_strategy="interrupt"``
    when the user sends another message, a cancelled run, a crash) leaves its reply's calls
    unanswered in the thread, and providers refuse every later request holding such a call.
    Only what the model is sent changes: the thread keeps its history as it was.
    """
    out: list[BaseMessage] = []
    pending: dict[str, ToolCall] = {}  # the latest AI message's calls not answered after it

    def answer_pending() -> None:
        out.extend(
            ToolMessage(
                UNANSWERED_CALL_ERROR.format(name=call["name"]),
                tool_call_id=call_id,
                name=call["name"],
                status="error",
            )
            for call_id, call in pending.items()
        )
        pending.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            pending.pop(message.tool_call_id, None)
        else:
            answer_pending()
        out.append(message)
        if isinstance(message, AIMessage):
            # Answered by the tool messages right after it, as providers require: an id is
            # not enough (models that number calls per reply reuse them across replies).
            pending = {i: c for c in message.tool_calls if (i := c.get("id"))}
    answer_pending()
    return out
