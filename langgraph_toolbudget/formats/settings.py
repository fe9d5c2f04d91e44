"""The ``tool_call_formats`` option and the choice of a format: native, else a text format.

Its one reason to change: how the ``tool_call_formats`` option is read and a format chosen.

Key Components:
    - :class:`ToolCallFormats`: the enabled formats and the primary one,
      validated (``{"enabled": ["native", "hermes"], "primary": "hermes"}``).
    - :func:`choose_format`: the primary format when it is available, else the
      first enabled format that is; native is available only when the model
      really calls tools, text formats always are.
    - :class:`FormatChoice`: the chosen format and why, for the stream events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_toolbudget.formats import get_format
from langgraph_toolbudget.formats.base import ToolCallFormat

__all__ = [
    "DEFAULT_TEXT_FORMAT",
    "NoFormatAvailableError",
    "FormatChoice",
    "ToolCallFormats",
    "ToolCallFormatsSpec",
    "choose_format",
]

DEFAULT_TEXT_FORMAT = "hermes"
"""The text format a model without native tool calling falls back to when
``tool_call_formats`` is not set and its name suggests no other (see
:func:`langgraph_toolbudget.core.budget.format_for_model`)."""

ToolCallFormatsSpec = Mapping[str, Any] | Sequence[str] | str | None
"""What ``tool_call_formats=`` accepts: ``{"enabled": [...], "primary": ...}``, a list
of names (the first is primary), one name, or ``None`` (native, else a text format)."""

BAD_SPEC_ERROR = (
    "tool_call_formats must be {{'enabled': [format names], 'primary': name}}, a list of "
    "names or one name, e.g. {{'enabled': ['native', 'hermes'], 'primary': 'hermes'}}; "
    "got {value!r} ({kind})."
)
UNKNOWN_KEY_ERROR = (
    "tool_call_formats has no key {keys}; its keys are 'enabled' (a list of format names) "
    "and 'primary' (one of them)."
)
EMPTY_ERROR = (
    "tool_call_formats['enabled'] is empty: enable at least one format, e.g. ['native', 'hermes']."
)
PRIMARY_ERROR = (
    "tool_call_formats['primary'] is {primary!r}, which is not enabled ({enabled}): "
    "add it to 'enabled' or choose one of those."
)
NO_FORMAT_ERROR = (
    "{model} cannot call tools natively ({why}) and tool_call_formats enables no text format. "
    "Enable one, e.g. tool_call_formats={{'enabled': ['native', 'hermes'], 'primary': "
    "'native'}}, or pass model_supports_tools=True if the model does support tool calling."
)

UNAVAILABLE_ERROR = (
    "No enabled tool-call format is available for {model}: {others}; native needs a model "
    "that calls tools ({why}). Enable what the format needs, or enable another format, "
    "e.g. 'hermes'."
)


class NoFormatAvailableError(ValueError):
    """No enabled format is available for the model (native only, and it cannot call tools)."""


@dataclass(frozen=True)
class ToolCallFormats:
    """The enabled tool-call formats and the primary one.

    Attributes:
        enabled: format names, in fallback order.
        primary: the format used when available (one of ``enabled``).

    Raises:
        TypeError: not a mapping, list or name; a name that is not a string.
        ValueError: an unknown format or key, nothing enabled, or a primary
            that is not enabled.
    """

    enabled: tuple[str, ...]
    primary: str

    def __post_init__(self) -> None:
        if not self.enabled:
            raise ValueError(EMPTY_ERROR)
        for name in (*self.enabled, self.primary):
            if not isinstance(name, str):
                raise TypeError(BAD_SPEC_ERROR.format(value=name, kind=type(name).__name__))
            get_format(name)  # raises naming the known formats
        if self.primary not in self.enabled:
            raise ValueError(PRIMARY_ERROR.format(primary=self.primary, enabled=list(self.enabled)))

    @classmethod
    def of(cls, value: ToolCallFormatsSpec | ToolCallFormats) -> ToolCallFormats | None:
        """Validate what the user passed; ``None`` stays ``None`` (the model's defaults)."""
        if value is None or isinstance(value, ToolCallFormats):
            return value
        if isinstance(value, str):
            return cls((value,), value)
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - {"enabled", "primary"})
            if unknown:
                raise ValueError(UNKNOWN_KEY_ERROR.format(keys=", ".join(map(repr, unknown))))
            primary = value.get("primary")
            enabled = value.get("enabled", [primary] if primary is not None else [])
            if isinstance(enabled, str) or not isinstance(enabled, Sequence):
                raise TypeError(BAD_SPEC_ERROR.format(value=value, kind=type(enabled).__name__))
            names = tuple(dict.fromkeys(enabled))
            return cls(names, primary if primary is not None else (names[0] if names else ""))
        if isinstance(value, Sequence):
            names = tuple(dict.fromkeys(value))
            return cls(names, names[0] if names else "")
        raise TypeError(BAD_SPEC_ERROR.format(value=value, kind=type(value).__name__))

    @classmethod
    def default(cls, text_format: str | None) -> ToolCallFormats:
        """Native when the model supports it, else ``text_format`` (default Hermes)."""
        return cls(("native", text_format or DEFAULT_TEXT_FORMAT), "native")


@dataclass(frozen=True)
class FormatChoice:
    """The format a model call uses, and why.

    Attributes:
        name: the format's name.
        format: the format.
        reason: one sentence for the stream events and logs.
        native_available: whether the model can call tools natively.
    """

    name: str
    format: ToolCallFormat
    reason: str
    native_available: bool

    def event(self) -> dict[str, Any]:
        """The payload of the ``toolbudget.tool_call_format`` stream event."""
        return {
            "format": self.name,
            "reason": self.reason,
            "native_available": self.native_available,
        }


def choose_format(
    formats: ToolCallFormats,
    *,
    native_available: bool,
    native_why: str,
    model: str = "the model",
    preset_note: str = "",
    unavailable: Mapping[str, str] | None = None,
) -> FormatChoice:
    """The primary format when available, else the first enabled format that is.

    Args:
        formats: the enabled formats and the primary one.
        native_available: the model really supports tool calling.
        native_why: why native is (not) available, for the reason.
        model: the model's name, for the reason and the error.
        preset_note: appended to the reason (where a default came from).
        unavailable: formats not available here, and why (e.g. ``codemode`` while
            ``python_execution`` is not enabled).

    Raises:
        NoFormatAvailableError: no enabled format is available (only native is enabled
            and the model cannot call tools, or the others are unavailable).
    """
    unavailable = unavailable or {}

    def available(name: str) -> bool:
        if name in unavailable:
            return False
        return native_available or not get_format(name).native

    if available(formats.primary):
        why = f"primary format {formats.primary!r} is available"
        if get_format(formats.primary).native:
            why += f" ({native_why})"
        return FormatChoice(
            formats.primary, get_format(formats.primary), why + preset_note, native_available
        )
    fallback = next((n for n in formats.enabled if available(n)), None)
    if fallback is None:
        others = [f"{n!r}: {unavailable[n]}" for n in formats.enabled if n in unavailable]
        if others:
            raise NoFormatAvailableError(
                UNAVAILABLE_ERROR.format(model=model, why=native_why, others="; ".join(others))
            )
        raise NoFormatAvailableError(NO_FORMAT_ERROR.format(model=model, why=native_why))
    why_not = unavailable.get(formats.primary, native_why)
    why = (
        f"primary format {formats.primary!r} is not available ({why_not}); "
        f"{fallback!r} is the first enabled format that is"
    )
    return FormatChoice(fallback, get_format(fallback), why + preset_note, native_available)
