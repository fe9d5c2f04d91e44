"""Tool-call formats: how tools are shown to a model and how its calls are read back.

A model with native tool calling gets its tools through ``bind_tools``
(``"native"``); any other chat model gets them written into the system prompt
and writes its calls as text, in one of these formats:

- ``"hermes"``: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``
  (Hermes 2/3, Qwen 2.5/3);
- ``"mistral"``: ``[TOOL_CALLS] [{"name": ..., "arguments": ...}]`` (Mistral v3);
- ``"pythonic"``: ``[get_weather(city="Paris")]`` (Llama 3.2/4);
- ``"json"``: a JSON object or list ``{"name", "arguments"}``, optionally fenced.

Key Components:
    - :class:`~langgraph_toolbudget.formats.base.ToolCallFormat`: the interface.
    - :func:`get_format`, :func:`format_names`, :func:`register_format`: the
      registry. Every module of this package that defines a format registers
      it here, so a new format is one new file.
    - :class:`~langgraph_toolbudget.formats.settings.ToolCallFormats`: the
      ``tool_call_formats`` option (enabled formats and the primary one) and
      :func:`~langgraph_toolbudget.formats.settings.choose_format`.

Typical Usage:
    ```python
    from langgraph_toolbudget.formats import get_format
    reply = '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'
    parsed = get_format("hermes").parse(reply)
    parsed.calls  # [{'name': 'add', 'args': {'a': 1}}]
    ```
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from langgraph_toolbudget.formats.base import ParsedReply, ToolCallFormat

__all__ = [
    "ParsedReply",
    "ToolCallFormat",
    "UnknownFormatError",
    "format_names",
    "get_format",
    "register_format",
]

UNKNOWN_FORMAT_ERROR = (
    "unknown tool-call format {name!r}; the formats are: {known} "
    "(or register your own with langgraph_toolbudget.formats.register_format)."
)

_REGISTRY: dict[str, ToolCallFormat] = {}


class UnknownFormatError(ValueError):
    """A format name that is not registered."""


def register_format(cls: type[ToolCallFormat]) -> type[ToolCallFormat]:
    """Make ``cls`` usable by its ``name`` in ``tool_call_formats``; returns ``cls``.

    Raises:
        TypeError: ``cls`` is not a concrete :class:`ToolCallFormat` with a name.
    """
    if not (
        isinstance(cls, type) and issubclass(cls, ToolCallFormat) and not inspect.isabstract(cls)
    ):
        raise TypeError(f"register_format needs a concrete ToolCallFormat subclass, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} needs a class attribute name = '<format name>'")
    _REGISTRY[name] = cls()
    return cls


def format_names() -> list[str]:
    """The registered format names, ``"native"`` first."""
    return sorted(_REGISTRY, key=lambda n: (n != "native", n))


def get_format(name: str) -> ToolCallFormat:
    """The format registered as ``name``.

    Raises:
        UnknownFormatError: no format has that name (the message lists them).
    """
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        known = ", ".join(repr(n) for n in format_names())
        raise UnknownFormatError(UNKNOWN_FORMAT_ERROR.format(name=name, known=known)) from None


def _discover() -> None:
    """Register every format class defined by a public module of this package."""
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_") or module.name in ("base", "settings"):
            continue
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        for value in vars(loaded).values():
            if (
                isinstance(value, type)
                and issubclass(value, ToolCallFormat)
                and value.__module__ == loaded.__name__
                and not inspect.isabstract(value)
            ):
                register_format(value)


_discover()
