"""Which built-in tools the model gets: the ``enabled_builtins`` filter.

Its one reason to change: how ``enabled_builtins`` is read.

Built-in tools are the tools the executor answers itself (the meta-tools, and
the families later features add). Each family says whether it is on by default;
``enabled_builtins`` changes that:

- ``None``: every built-in that is on by default;
- a list of names or ``fnmatch`` patterns: exactly those built-ins;
- ``{"allow": [...], "deny": [...]}``: ``allow`` as a list (left out: the
  defaults), minus anything ``deny`` matches.

``"tool_search"`` names the automatic tool search before the first model turn;
it is on by default.

Key Components:
    - :class:`BuiltinFilter`: the validated filter, with :meth:`BuiltinFilter.allows`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["AUTO_TOOL_SEARCH", "BuiltinFilter", "EnabledBuiltins"]

AUTO_TOOL_SEARCH = "tool_search"
"""The name that gates the automatic tool search in ``enabled_builtins``."""

EnabledBuiltins = Sequence[str] | Mapping[str, Sequence[str]] | None
"""What ``enabled_builtins`` accepts: None, a list of names/patterns, or allow/deny."""

BAD_BUILTINS_ERROR = (
    "enabled_builtins must be None, a list of built-in tool names (fnmatch patterns "
    "allowed, e.g. ['search_tools', 'add_tool']) or a mapping "
    "{{'allow': [...], 'deny': [...]}}; got {value!r}."
)


def _patterns(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(BAD_BUILTINS_ERROR.format(value=value))
    if not all(isinstance(v, str) and v for v in value):
        raise TypeError(BAD_BUILTINS_ERROR.format(value=value))
    return tuple(value)


@dataclass(frozen=True)
class BuiltinFilter:
    """The ``enabled_builtins`` filter, validated.

    Attributes:
        allow: names or patterns of the enabled built-ins; ``None``: the defaults.
        deny: names or patterns never enabled, whatever ``allow`` says.

    Example:
        ```python
        gate = BuiltinFilter.of({"deny": ["show_all_tools"]})
        gate.allows("search_tools", default=True), gate.allows("show_all_tools", default=True)
        # (True, False)
        ```
    """

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    @classmethod
    def of(cls, value: EnabledBuiltins | BuiltinFilter) -> BuiltinFilter:
        """The filter of an ``enabled_builtins`` value.

        Raises:
            TypeError: a value of another shape (the message shows the accepted ones).
        """
        if isinstance(value, BuiltinFilter):
            return value
        if value is None:
            return cls()
        if isinstance(value, Mapping):
            unknown = set(value) - {"allow", "deny"}
            if unknown:
                raise TypeError(BAD_BUILTINS_ERROR.format(value=dict(value)))
            allow = value.get("allow")
            return cls(
                allow=None if allow is None else _patterns(allow),
                deny=_patterns(value.get("deny", ())),
            )
        return cls(allow=_patterns(value))

    def allows(self, name: str, *, default: bool) -> bool:
        """Whether built-in ``name`` is enabled; ``default``: its family's default."""
        if any(fnmatch.fnmatchcase(name, p) for p in self.deny):
            return False
        if self.allow is None:
            return default
        return any(fnmatch.fnmatchcase(name, p) for p in self.allow)
