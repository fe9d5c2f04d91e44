"""Chat models given to the nodes: a model object or a ``"provider:model"`` string, checked early.

Its one reason to change: how a chat model is given to a node.

Key Components:
    - :func:`resolve_chat_model`: a chat model from what the user passed (a
      ``BaseChatModel``, or a ``"provider:model"`` string through LangChain's
      ``init_chat_model``, imported only then), or an error naming the fix.
    - :func:`supports_tool_calling`: does the model implement native tool
      calling (``bind_tools``)?
    - :func:`native_tool_calling`: the same with the ``model_supports_tools``
      override, and why, for the choice of a tool-call format.
    - :func:`model_name`: the model's name (for the format presets).
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

__all__ = [
    "ModelUnavailableError",
    "model_name",
    "native_tool_calling",
    "require_tool_calling",
    "resolve_chat_model",
    "supports_tool_calling",
]

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

    Args:
        model: a ``BaseChatModel`` (or any runnable with ``invoke``), or a string
            for LangChain's ``init_chat_model``.
        what: the argument's name, for error messages.

    Raises:
        TypeError: ``model`` is neither (``None``, a number, any other object).
        ModelUnavailableError: a string model whose packages are not installed.
        ValueError: a string that ``init_chat_model`` does not know.
    """
    if isinstance(model, str):
        return _init_chat_model(model, what)
    if isinstance(model, BaseChatModel) or (
        model is not None and callable(getattr(model, "invoke", None))
    ):
        return model
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


def native_tool_calling(model: Any, override: bool | None = None) -> tuple[bool, str]:
    """Whether the model calls tools natively, and why (for the format choice's reason).

    ``override`` (``model_supports_tools``) wins; otherwise a model whose
    ``bind_tools`` is missing (or is ``BaseChatModel``'s, which raises
    ``NotImplementedError``) does not. A ``bind_tools`` that raises
    ``NotImplementedError`` when called is found at the first model call.
    """
    name = type(model).__name__
    if override is not None:
        return override, f"model_supports_tools={override}"
    if supports_tool_calling(model):
        return True, f"{name} implements bind_tools"
    return False, f"{name} has no bind_tools of its own"


def model_name(model: Any) -> str | None:
    """The model's name as its provider knows it (``model_name``, ``model``...), else None."""
    for attr in ("model_name", "model", "model_id", "repo_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None
