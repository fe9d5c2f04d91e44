"""Chat models given to the nodes: a model object or a ``"provider:model"`` string, checked early.

Its one reason to change: how a chat model is given to a node.

Key Components:
    - :func:`resolve_chat_model`: a chat model from what the user passed (a
      ``BaseChatModel``, or a ``"provider:model"`` string through LangChain's
      ``init_chat_model``, imported only then), or an error naming the fix (a
      class, a runnable that answers no message). A ``with_retry()`` wrapper
      of a tool-calling model is given ``bind_tools``.
    - :func:`supports_tool_calling`: does the model implement native tool
      calling (``bind_tools``)?
    - :func:`native_tool_calling`: the same with the ``model_supports_tools``
      override, and why, for the choice of a tool-call format (warning of a
      wrapper that hides a tool-calling model, at the user's line).
    - :func:`not_a_message_error`: the error for a model whose reply is not a message.
    - :func:`model_name`: the model's name (for the format presets).
"""

from __future__ import annotations

import reprlib
import warnings
from collections.abc import Sequence
from typing import Annotated, Any, get_args, get_origin

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.output_parsers import BaseLLMOutputParser
from langchain_core.prompts import (
    BasePromptTemplate,
    ChatPromptTemplate,
    MessagesPlaceholder,
    SystemMessagePromptTemplate,
)
from langchain_core.runnables import (
    Runnable,
    RunnableBinding,
    RunnableParallel,
    RunnableSequence,
    RunnableWithFallbacks,
)
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.configurable import DynamicRunnable
from langchain_core.runnables.passthrough import RunnableAssign
from langchain_core.runnables.retry import RunnableRetry

from langgraph_toolbudget._stacklevel import user_stacklevel

__all__ = [
    "ChatModelSpec",
    "ModelUnavailableError",
    "model_name",
    "native_tool_calling",
    "not_a_message_error",
    "require_tool_calling",
    "resolve_chat_model",
    "supports_tool_calling",
]

ChatModelSpec = BaseChatModel | Runnable[LanguageModelInput, BaseMessage] | str
"""What a ``model=`` option takes: a chat model, one wrapped for its calls (``.bind()``,
``.with_config()``, ``.with_retry()``, ``.with_fallbacks()``), or a ``"provider:model"`` name
(see :func:`resolve_chat_model`)."""

NOT_A_MODEL_ERROR = (
    "{what} must be a LangChain chat model (e.g. ChatOpenAI(...), ChatOllama(...)) or a "
    "'provider:model' string such as 'openai:gpt-4o-mini' or 'ollama:qwen3:8b'; "
    "got {kind}: {value!r}."
)
MISSING_LANGCHAIN_ERROR = (
    "{what} {spec!r} needs `langchain` (for init_chat_model) and the provider's package, "
    "e.g. `pip install langchain langchain-openai` for 'openai:...' or "
    "`pip install langchain langchain-ollama` for 'ollama:...'; or pass a chat model object "
    "(on the example server: model='demo', the built-in offline model)."
)
MISSING_PROVIDER_ERROR = (
    "{what} {spec!r}: {error}. Install the provider's LangChain package "
    "(e.g. `pip install langchain-openai`), or pass a chat model object."
)
BAD_MODEL_ERROR = (
    "{what} {spec!r} is not a model init_chat_model knows ({error}). Use 'provider:model', "
    "e.g. 'openai:gpt-4o-mini' or 'ollama:qwen3:8b', or pass a chat model object."
)
MODEL_CLASS_ERROR = (
    "{what} is the class {name}, not a model: pass an instance, e.g. {name}(...), or a "
    "'provider:model' string."
)
NOT_A_MESSAGE_MODEL_ERROR = (
    "{what} is a {kind} ending in the output parser {parser}, so it answers parsed output, "
    "not a message; the agent binds its tools to the chat model and reads the AIMessage it "
    "answers (its tool calls). Pass the chat model itself, not "
    "model.with_structured_output(...) or model | parser; for a structured final answer, "
    "parse the agent's last message in a node of your own."
)
NOT_A_MESSAGE_OUTPUT_ERROR = (
    "{what} is a {kind} that answers {output}, not a message (as "
    "model.with_structured_output(...) does: its last step parses the reply); the agent binds "
    "its tools to the chat model and reads the AIMessage it answers (its tool calls). Pass "
    "the chat model itself; for a structured final answer, parse the agent's last message in "
    "a node of your own."
)
NOT_A_MESSAGE_REPLY_ERROR = (
    "the model ({kind}) answered {reply}, not a message: the agent binds its tools to a chat "
    "model and reads the AIMessage it answers (its tool calls). Pass the chat model itself, "
    "not model.with_structured_output(...) or a runnable ending in an output parser."
)
PROMPT_MODEL_ERROR = (
    "{what} is a {kind} that starts with the prompt template {prompt} (prompt | model): the "
    "agent sends the model a list of messages, and this {prompt} takes a mapping of its "
    "variables (only a template whose one required variable is a MessagesPlaceholder's takes "
    "a message list). Pass the chat model itself and give the template as system_prompt=, e.g. "
    "create_toolbudget_agent(model, catalog, system_prompt=prompt): it is invoked with the "
    "graph state (its variables are state keys, {{messages}} the conversation) and the "
    "messages it makes are sent, the tools section joined to its system message.{fill} A "
    "classifier_model takes the chat model itself (the package writes its prompt)."
)
FILL_VARIABLES_HINT = (
    " Fill its system message's own variables first: system_prompt=prompt.partial({fill})."
)
CONVERSATION_VARIABLES_HINT = (
    " Its {names} stand for the conversation: take them out, with MessagesPlaceholder("
    "'messages') in their place (the conversation is the state's messages)."
)
STRING_TEMPLATE_HINT = (
    " A string template makes one message: give system_prompt= a chat template instead, "
    "ChatPromptTemplate.from_messages([('system', '...'), ('placeholder', '{{messages}}')])."
)
HIDDEN_TOOL_CALLER_WARNING = (
    "The model is a {wrapper} around {inner}, which calls tools natively, but a {wrapper} "
    "cannot bind tools (it has no bind_tools): the agent will write the tools into the system "
    "prompt and read the calls from the model's text (a text tool-call format) instead of "
    "binding them. Pass the chat model itself (wrappers made by .bind(), .with_config(), "
    ".with_retry() and .with_fallbacks() keep native tool calling), or pass "
    "model_supports_tools=False (or a text format as tool_call_formats' primary) to use a "
    "text tool-call format on purpose (docs/formats.md)."
)
NO_TOOL_CALLING_ERROR = (
    "{what} {name} does not implement native tool calling (its bind_tools is missing or raises "
    "NotImplementedError), and the agent binds tools to the model every turn. Use a chat model "
    "class with tool calling (ChatOpenAI, ChatAnthropic, ChatOllama, ...), or subclass yours "
    "with a bind_tools method."
)


class ModelUnavailableError(ImportError, RuntimeError):
    """The chat model's packages are not installed.

    An ``ImportError``; also a ``RuntimeError`` so that LangGraph server passes its
    message (what to install) on to the client instead of a generic error.
    """


def resolve_chat_model(model: Any, *, what: str = "model") -> Any:
    """The chat model for ``model``: a chat model object as is, or a ``"provider:model"`` string.

    A ``model.with_retry()`` over a model with native tool calling (also inside
    ``.bind()``, ``.with_config()`` or ``.with_fallbacks()``) comes back as a
    ``RunnableRetry`` with the same settings that also has ``bind_tools``: the
    tools are bound to the model it retries.

    Args:
        model: a ``BaseChatModel`` (or any runnable with ``invoke``), or a string
            for LangChain's ``init_chat_model``.
        what: the argument's name, for error messages.

    Raises:
        TypeError: ``model`` is neither (``None``, a number, any other object), is a
            class rather than an instance, or is a runnable that answers no message: one
            ending in an output parser (``model | StrOutputParser()``), or whose
            ``OutputType`` is a class other than a message
            (``model.with_structured_output(Schema)``, whatever its method), or a
            ``prompt | model`` sequence (its prompt template takes no message list: the
            prompt goes in ``system_prompt=``).
        ModelUnavailableError: a string model whose packages are not installed.
        ValueError: a string that ``init_chat_model`` does not know.
    """
    if isinstance(model, str):
        return _init_chat_model(model, what)
    if isinstance(model, type):
        raise TypeError(MODEL_CLASS_ERROR.format(what=what, name=model.__name__))
    if isinstance(model, BaseChatModel) or (
        model is not None and callable(getattr(model, "invoke", None))
    ):
        kind = type(model).__name__
        parser = _output_parser(model)
        if parser is not None:
            raise TypeError(
                NOT_A_MESSAGE_MODEL_ERROR.format(what=what, kind=kind, parser=type(parser).__name__)
            )
        output = _declared_output(model)
        if output is not None and not issubclass(output, BaseMessage):
            raise TypeError(
                NOT_A_MESSAGE_OUTPUT_ERROR.format(what=what, kind=kind, output=output.__name__)
            )
        prompt = _leading_prompt(model)
        if prompt is not None and not _takes_messages(prompt):
            shown = type(prompt).__name__
            raise TypeError(
                PROMPT_MODEL_ERROR.format(
                    what=what, kind=kind, prompt=shown, fill=_template_hint(prompt)
                )
            )
        return _bindable_retries(model)
    raise TypeError(NOT_A_MODEL_ERROR.format(what=what, kind=type(model).__name__, value=model))


def _init_chat_model(spec: str, what: str) -> Any:
    if not spec.strip():
        raise ValueError(BAD_MODEL_ERROR.format(what=what, spec=spec, error="empty model name"))
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ModelUnavailableError(MISSING_LANGCHAIN_ERROR.format(what=what, spec=spec)) from exc
    try:
        return init_chat_model(spec)
    except ImportError as exc:
        raise ModelUnavailableError(
            MISSING_PROVIDER_ERROR.format(what=what, spec=spec, error=exc)
        ) from exc
    except ValueError as exc:
        raise ValueError(BAD_MODEL_ERROR.format(what=what, spec=spec, error=exc)) from exc


def supports_tool_calling(model: Any) -> bool:
    """True when the model implements ``bind_tools`` (native tool calling)."""
    bind = getattr(type(model), "bind_tools", None)
    if bind is None:
        return callable(getattr(model, "bind_tools", None))  # e.g. a RunnableBinding's proxy
    return bind is not BaseChatModel.bind_tools


def require_tool_calling(model: Any, *, what: str = "model") -> None:
    """Raise ``ValueError`` naming the fix when ``model`` cannot call tools natively."""
    if not supports_tool_calling(model):
        name = f"{type(model).__name__}"
        raise ValueError(NO_TOOL_CALLING_ERROR.format(what=what, name=name))


def native_tool_calling(
    model: Any, override: bool | None = None, *, text_on_purpose: bool = False
) -> tuple[bool, str]:
    """Whether the model calls tools natively, and why (for the format choice's reason).

    ``override`` (``model_supports_tools``) wins; otherwise a model whose
    ``bind_tools`` is missing (or is ``BaseChatModel``'s, which raises
    ``NotImplementedError``) does not. A ``bind_tools`` that raises
    ``NotImplementedError`` when called is found at the first model call.

    Warns (``UserWarning``, attributed to the caller's line outside this package) when,
    without ``override``, the model is a wrapper that cannot bind tools around one that
    can (``RunnableLambda(f) | model``): the tools would silently go through a text format.
    ``text_on_purpose`` (the user chose a text format as the primary one) silences it.
    """
    name = type(model).__name__
    if override is not None:
        return override, f"model_supports_tools={override}"
    if isinstance(model, _ToolBindingRetry):
        return True, f"RunnableRetry over {_describe(model.bound)}, which implements bind_tools"
    if supports_tool_calling(model):
        return True, f"{name} implements bind_tools"
    inner = _hidden_tool_caller(model)
    if inner is not None:
        shown = _describe(inner)
        if not text_on_purpose:
            warnings.warn(
                HIDDEN_TOOL_CALLER_WARNING.format(wrapper=name, inner=shown),
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        return False, f"{name} has no bind_tools of its own (it wraps {shown}, which has)"
    return False, f"{name} has no bind_tools of its own"


def not_a_message_error(model: Any, reply: Any) -> TypeError:
    """The error for a model call that answered ``reply``, which is not a message."""
    shown = f"{type(reply).__name__} {reprlib.repr(reply)}"
    return TypeError(NOT_A_MESSAGE_REPLY_ERROR.format(kind=type(model).__name__, reply=shown))


def model_name(model: Any) -> str | None:
    """The model's name as its provider knows it (``model_name``, ``model``...), else None.

    Read through the wrappers that delegate to one model (``.with_retry()``,
    ``.with_fallbacks()``: its first model, a ``RunnableSequence``: its steps).
    """
    for attr in ("model_name", "model", "model_id", "repo_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    for inner in _wrapped(model):
        found = model_name(inner)
        if found is not None:
            return found
    return None


class _ToolBindingRetry(RunnableRetry):
    """A ``model.with_retry()`` that binds tools: to the model it retries, keeping its settings.

    ``RunnableRetry`` has no ``bind_tools``, so the agent would drive the model
    through a text format; ``create_react_agent`` raises on it instead.
    """

    @classmethod
    def lc_id(cls) -> list[str]:
        """Serialized as the ``RunnableRetry`` it is."""
        return RunnableRetry.lc_id()

    def __repr_name__(self) -> str:
        return "RunnableRetry"

    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        """This retry over ``self.bound.bind_tools(tools, **kwargs)``, with the same settings."""
        model: Any = self.bound  # a tool-calling model: see _bindable_retries
        return self.model_copy(update={"bound": model.bind_tools(tools, **kwargs)})


def _bindable_retries(model: Any) -> Any:
    """``model`` with each ``with_retry()`` over a tool-calling model made a
    :class:`_ToolBindingRetry`, through ``.bind()``/``.with_config()`` bindings and
    ``.with_fallbacks()`` (whose own proxies then reach its ``bind_tools``)."""
    if type(model) is RunnableRetry:
        bound = _bindable_retries(model.bound)
        if not supports_tool_calling(bound):
            return model
        fields = {field: getattr(model, field) for field in type(model).model_fields}
        return _ToolBindingRetry(**{**fields, "bound": bound})
    if isinstance(model, RunnableBinding):
        bound = _bindable_retries(model.bound)
        return model if bound is model.bound else model.model_copy(update={"bound": bound})
    if isinstance(model, RunnableWithFallbacks):
        runnable = _bindable_retries(model.runnable)
        fallbacks = [_bindable_retries(f) for f in model.fallbacks]
        if runnable is model.runnable and all(
            new is old for new, old in zip(fallbacks, model.fallbacks, strict=True)
        ):
            return model
        return model.model_copy(update={"runnable": runnable, "fallbacks": fallbacks})
    return model


def _wrapped(model: Any) -> list[Any]:
    """The runnables a LangChain wrapper delegates to ([] for anything else)."""
    if isinstance(model, RunnableBindingBase):  # .bind(), .with_config(), .with_retry()
        return [model.bound]
    if isinstance(model, RunnableWithFallbacks):
        return [model.runnable, *model.fallbacks]
    if isinstance(model, RunnableSequence):  # prompt | model
        return list(model.steps)
    if isinstance(model, DynamicRunnable):  # configurable_fields / configurable_alternatives
        return [model.default]
    return []


def _leading_prompt(model: Any, first: bool = False) -> BasePromptTemplate | None:
    """The prompt template a sequence in ``model`` starts with (``prompt | model``, also
    inside a binding, a fallback or a configurable runnable, and as a branch of a leading
    ``RunnableParallel`` or ``.assign(...)``, which pass it the sequence's input), or None.
    ``first``: ``model`` is a sequence's first step."""
    if first and isinstance(model, BasePromptTemplate):
        return model
    if first and isinstance(model, RunnableAssign):
        return _leading_prompt(model.mapper, first=True)
    if first and isinstance(model, RunnableParallel):  # each branch gets the sequence's input
        for step in model.steps__.values():
            found = _leading_prompt(step, first=True)
            if found is not None and not _takes_messages(found):
                return found
        return None
    if isinstance(model, RunnableSequence):
        return _leading_prompt(model.first, first=True)
    for inner in _wrapped(model):
        found = _leading_prompt(inner, first)
        if found is not None:
            return found
    return None


def _template_hint(prompt: BasePromptTemplate) -> str:
    """What to do to ``prompt`` before it serves as ``system_prompt=``: fill its system
    message's variables (``.partial``), take out those that stand for the conversation (a
    human turn's, another placeholder's); a string template is no chat template."""
    if not isinstance(prompt, ChatPromptTemplate):
        return STRING_TEMPLATE_HINT
    required = set(prompt.input_variables)
    fill: list[str] = []
    conversation: list[str] = []
    for part in prompt.messages:
        if isinstance(part, MessagesPlaceholder):
            names = [part.variable_name] if part.variable_name != "messages" else []
            conversation += [v for v in names if v in required]
        elif isinstance(part, SystemMessagePromptTemplate):
            fill += [v for v in part.input_variables if v in required]
        else:
            conversation += [v for v in getattr(part, "input_variables", ()) if v in required]
    hint = ""
    if fill := list(dict.fromkeys(fill)):
        values = ", ".join(f'{v}="<your {v}>"' for v in fill)
        hint += FILL_VARIABLES_HINT.format(fill=values)
    if conversation := [v for v in dict.fromkeys(conversation) if v not in fill]:
        hint += CONVERSATION_VARIABLES_HINT.format(
            names=", ".join(f"{{{v}}}" for v in conversation)
        )
    return hint


def _takes_messages(prompt: BasePromptTemplate) -> bool:
    """Does ``prompt`` take the message list the agent sends? A template whose one required
    variable is a ``MessagesPlaceholder``'s: LangChain fills it with a non-mapping input."""
    if len(prompt.input_variables) != 1:
        return False
    name = prompt.input_variables[0]
    parts = getattr(prompt, "messages", ())
    return any(isinstance(m, MessagesPlaceholder) and m.variable_name == name for m in parts)


def _hidden_tool_caller(model: Any) -> Any | None:
    """A runnable inside the wrapper ``model`` that can bind tools, or None."""
    for inner in _wrapped(model):
        if supports_tool_calling(inner):
            return inner
        found = _hidden_tool_caller(inner)
        if found is not None:
            return found
    return None


def _describe(model: Any) -> str:
    """A chat model in a few words: its class and name (through bindings)."""
    while isinstance(model, RunnableBindingBase):
        model = model.bound
    name = model_name(model)
    return type(model).__name__ + (f" ({name})" if name else "")


def _output_parser(model: Any) -> Any | None:
    """The output parser a runnable's output ends in, when it makes no message, else None
    (``model.with_structured_output(...)``, ``model | StrOutputParser()``)."""
    end = model
    while True:
        if isinstance(end, RunnableBindingBase):
            end = end.bound
        elif isinstance(end, RunnableWithFallbacks):
            end = end.runnable
        elif isinstance(end, RunnableSequence):
            end = end.last
        else:
            break
    if not isinstance(end, BaseLLMOutputParser):
        return None
    try:  # a parser made to answer messages may stay
        output = end.OutputType if isinstance(end, Runnable) else None
    except (TypeError, ValueError, NotImplementedError):
        return end
    return None if isinstance(output, type) and issubclass(output, BaseMessage) else end


def _declared_output(model: Any) -> type | None:
    """The class a runnable says it answers (its ``OutputType``), or None when it says none.

    Chat models answer a union of messages (not a class); an untyped ``RunnableLambda``
    answers ``Any`` and a ``Runnable`` subclass may not say: neither is refused. A generic
    type counts as its class (``dict[str, Any]``: ``with_structured_output(...,
    include_raw=True)``). ``langchain-openai``'s ``with_structured_output`` (method
    ``json_schema``) ends in a lambda typed with the schema, not an output parser: this is
    what shows it.
    """
    try:
        output = getattr(model, "OutputType", None)
    except (TypeError, ValueError, NotImplementedError):  # a Runnable that cannot infer it
        return None
    if get_origin(output) is Annotated:  # a chat model's AnyMessage: Annotated[Union[...]]
        output = get_args(output)[0]
    output = get_origin(output) or output
    if not isinstance(output, type) or output is Any or output is object:
        return None
    return output
