"""Tool-call formats: how tools are shown to a model and how its calls are read back.

A model with native tool calling gets its tools through ``bind_tools``
(``"native"``); any other chat model gets them written into the system prompt
and writes its calls as text, in one of these formats:

- ``"hermes"``: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``
  (Hermes 2/3, Qwen 2.5/3);
- ``"mistral"``: ``[TOOL_CALLS] [{"name": ..., "arguments": ...}]`` (Mistral v3);
- ``"pythonic"``: ``[get_weather(city="Paris")]`` (Llama 3.2/4);
- ``"json"``: a JSON object or list ``{"name", "arguments"}``, optionally fenced;
- ``"codemode"``: tools as Python functions; the model runs a program over them
  (``python_execution``, or a reply ending with a ```` ```python ```` block).

Key Components:
    - :class:`~langgraph_toolbudget.formats.base.ToolCallFormat`: the interface.
    - :data:`FORMATS`: the registry, a plain dict of format name -> format;
      :func:`get_format` reads it (an unknown name's error lists the names),
      :func:`format_names` lists it, :func:`register_format` adds a format of
      your own. A new format of the package is one new module and one entry here.
    - :class:`~langgraph_toolbudget.formats.settings.ToolCallFormats`: the
      ``tool_call_formats`` option (enabled formats and the primary one) and
      :func:`~langgraph_toolbudget.formats.settings.choose_format`.

Its one reason to change: which formats exist.

Typical Usage:
    ```python
    from langgraph_toolbudget.formats import get_format
    reply = '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'
    parsed = get_format("hermes").parse(reply)
    parsed.calls  # [{'name': 'add', 'args': {'a': 1}}]
    ```
"""

from __future__ import annotations

import inspect

from langgraph_toolbudget.formats.base import ParsedReply, ToolCallFormat
from langgraph_toolbudget.formats.codemode import CodeModeFormat
from langgraph_toolbudget.formats.hermes import Hermes
from langgraph_toolbudget.formats.mistral import Mistral
from langgraph_toolbudget.formats.native import Native
from langgraph_toolbudget.formats.pure_json import PureJson
from langgraph_toolbudget.formats.pythonic import Pythonic

__all__ = [
    "FORMATS",
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

FORMATS: dict[str, ToolCallFormat] = {
    "native": Native(),
    "hermes": Hermes(),
    "mistral": Mistral(),
    "pythonic": Pythonic(),
    "json": PureJson(),
    "codemode": CodeModeFormat(),
}
"""Format name (as in ``tool_call_formats``) -> the format."""


class UnknownFormatError(ValueError):
    """A format name that is not registered."""


def register_format(cls: type[ToolCallFormat]) -> type[ToolCallFormat]:
    """Make ``cls`` usable by its ``name`` in ``tool_call_formats``; returns ``cls``.

    Sets ``FORMATS[cls.name]`` to an instance of ``cls``.

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
    FORMATS[name] = cls()
    return cls


def format_names() -> list[str]:
    """The registered format names, ``"native"`` first."""
    return sorted(FORMATS, key=lambda n: (n != "native", n))


def get_format(name: str) -> ToolCallFormat:
    """The format registered as ``name``.

    Raises:
        UnknownFormatError: no format has that name (the message lists them).
    """
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        known = ", ".join(repr(n) for n in format_names())
        raise UnknownFormatError(UNKNOWN_FORMAT_ERROR.format(name=name, known=known)) from None
