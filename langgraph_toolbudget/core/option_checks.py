"""Checks of a constructor's or function's options that are numbers: type and range.

Its one reason to change: how an option's number is checked and its mistake said.

``BudgetConfig`` checks its options through pydantic; the other entry points that take
numbers (``load_mcp_catalog``, ``MCPRuntime``, ``ToolUsage``, ``DatabaseToolbox``) check
them here, so a mistake reads the same everywhere: ``Owner: option name must be ..., got
value (kind).``, with the fix when the number was given as text (``"10"``).

Key Components:
    - :func:`check_seconds`: a finite number of seconds above 0 (or an allowed ``None``).
    - :func:`check_count`: an integer of at least a minimum (or an allowed ``None``).
    - :func:`check_number`: a finite number of at least a minimum.
    - :func:`option_error`: the message, for checks of other kinds.
    - :func:`option_message`: the message with a problem of its own words (``BudgetConfig``'s).
"""

from __future__ import annotations

import math

from langgraph_toolbudget.core.limits import safe_repr

__all__ = [
    "OPTION_ERROR",
    "check_count",
    "check_number",
    "check_seconds",
    "option_error",
    "option_message",
]

OPTION_ERROR = "{owner}: option {name} {problem}, got {value} ({kind}).{hint}"
AS_NUMBER_HINT = " Pass the number itself: {name}={number}."
SECONDS = "a finite number of seconds > 0"


def check_seconds(owner: str, name: str, value: object, *, none: str | None = None) -> None:
    """Refuse an option of seconds that is not a finite number above 0.

    Args:
        owner: the function or class the option is of, for the message.
        name: the option's name.
        value: what was given.
        none: what ``None`` means, if the option takes it (``"no bound"``).

    Raises:
        TypeError: not a number (``True`` and ``"10"`` are not), nor an allowed ``None``.
        ValueError: 0 or less, NaN or infinite.
    """
    if value is None and none is not None:
        return
    expected = SECONDS + (f", or None ({none})" if none is not None else "")
    if isinstance(value, bool) or not isinstance(value, int | float):
        hint = _as_number_hint(name, value, integer=False, minimum=0.0)
        raise TypeError(option_error(owner, name, expected, value, hint))
    if not (math.isfinite(value) and value > 0):
        raise ValueError(option_error(owner, name, expected, value))


def check_count(
    owner: str, name: str, value: object, *, minimum: int, unit: str, none: str | None = None
) -> None:
    """Refuse an option counting ``unit`` that is not an integer of at least ``minimum``.

    Args:
        owner: the function or class the option is of, for the message.
        name: the option's name.
        value: what was given.
        minimum: the least value allowed.
        unit: what it counts (``"characters"``), for the message.
        none: what ``None`` means, if the option takes it (``"no bound"``).

    Raises:
        TypeError: not an integer (``True``, ``2000.0`` and ``"2000"`` are not), nor an
            allowed ``None``.
        ValueError: below ``minimum``.
    """
    if value is None and none is not None:
        return
    expected = f"an integer >= {minimum} ({unit})" + (f", or None ({none})" if none else "")
    if isinstance(value, bool) or not isinstance(value, int):
        hint = _as_number_hint(name, value, integer=True, minimum=minimum)
        raise TypeError(option_error(owner, name, expected, value, hint))
    if value < minimum:
        raise ValueError(option_error(owner, name, expected, value))


def check_number(owner: str, name: str, value: object, *, minimum: float) -> None:
    """Refuse an option that is not a finite number of at least ``minimum`` (a weight).

    Raises:
        TypeError: not a number (``True`` and ``"1"`` are not).
        ValueError: below ``minimum``, NaN or infinite.
    """
    expected = f"a finite number >= {minimum:g}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        hint = _as_number_hint(name, value, integer=False, minimum=minimum)
        raise TypeError(option_error(owner, name, expected, value, hint))
    if not (math.isfinite(value) and value >= minimum):
        raise ValueError(option_error(owner, name, expected, value))


def option_error(owner: str, name: str, expected: str, value: object, hint: str = "") -> str:
    """The message for option ``name`` of ``owner`` given ``value``: what it must be, what it
    got (bounded), and ``hint``, a sentence with the fix."""
    return option_message(owner, name, f"must be {expected}", value, hint)


def option_message(owner: str, name: str, problem: str, value: object, hint: str = "") -> str:
    """The message for option ``name`` of ``owner`` given ``value``, ``problem`` saying what
    is wrong (``"must be an integer"``); the value is shown bounded and never raises (a
    deeply nested list, an int of 5,000 digits)."""
    shown = safe_repr(value, 80)
    kind = type(value).__name__
    return OPTION_ERROR.format(
        owner=owner, name=name, problem=problem, value=shown, kind=kind, hint=hint
    )


def _as_number_hint(name: str, value: object, *, integer: bool, minimum: float) -> str:
    """The fix of a number given as text (``"10"``) or a count given as a whole float
    (``2000.0``), when the number it stands for is allowed; else ``""``."""
    number: float | None = None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return ""
    elif isinstance(value, float) and not isinstance(value, bool):
        number = value
    if number is None or not math.isfinite(number) or not number >= minimum:
        return ""
    if integer:
        if not number.is_integer():
            return ""
        return AS_NUMBER_HINT.format(name=name, number=int(number))
    if number <= 0:
        return ""
    return AS_NUMBER_HINT.format(name=name, number=int(number) if number.is_integer() else number)
