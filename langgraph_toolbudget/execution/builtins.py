"""Built-in tools: the registry of the families the executor answers itself.

The meta-tools are the first family; every feature that gives the model tools
of its own (reading offloaded outputs, managing the thread's tool context)
adds a family here, and the executor, the agent and the model call pick it up:
the model is bound to the enabled built-ins of every family, a call to one is
intercepted and answered before the regular calls of its batch, and
``enabled_builtins`` (see :mod:`langgraph_toolbudget.core.gating`) chooses
which ones are on. A family implements
:class:`~langgraph_toolbudget.execution.builtin_family.BuiltinTools`. Its one reason to
change: which families exist and which of their tools a node enables.

Key Components:
    - :func:`builtin_families`: every family a configuration turns on (the
      one place a new family is registered).
    - :class:`Builtins`: the enabled built-ins of a node, by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from pydantic import PydanticUserError
from rapidfuzz import fuzz

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import RAW_ARGUMENTS_KEY, coerce_args, tool_json_schema
from langgraph_toolbudget.core.gating import AUTO_TOOL_SEARCH, BuiltinFilter
from langgraph_toolbudget.execution.builtin_family import BuiltinTools
from langgraph_toolbudget.execution.codemode import PYTHON_EXECUTION, CodeMode, codemode_enabled
from langgraph_toolbudget.execution.context_tools import ContextTools
from langgraph_toolbudget.execution.database_tools import (
    EXECUTE_SQL,
    SEARCH_SCHEMAS,
    DatabaseTools,
)
from langgraph_toolbudget.execution.meta_tools import MetaTools
from langgraph_toolbudget.execution.output_store import app_key
from langgraph_toolbudget.execution.output_tools import OutputTools

__all__ = [
    "BUILTIN_NAME_ERROR",
    "BUILTIN_TYPO_ERROR",
    "Builtins",
    "builtin_families",
    "reserved_tool_names",
    "check_builtin_names",
]

BUILTIN_TYPO_ERROR = (
    "enabled_builtins names {names}, which no built-in tool has: the name would turn nothing "
    "on (and in an allow list, the built-in you meant would be off), with no error. Closest "
    "built-ins: {closest} (write enabled_builtins={fixed!r}). If {mine} is a built-in of a "
    "family of your own, rename it (a name this close to a built-in's is taken for a typo), "
    "or match it with a pattern, which is taken as it is: {patterns}."
)

BUILTIN_NAME_ERROR = (
    "catalog tools {names} have the names of built-in tools, which the agent binds itself; "
    "rename those tools (e.g. with a server prefix) or turn those built-ins off with "
    "enabled_builtins={{'deny': [...]}}."
)


def builtin_families(catalog: ToolCatalog, config: BudgetConfig) -> list[BuiltinTools]:
    """Every built-in family for ``catalog`` under ``config``, enabled or not.

    New families are registered here, so every node binds and answers the same set.
    """
    families: list[BuiltinTools] = [MetaTools(catalog, config), ContextTools(catalog)]
    if config.offloading:
        families.append(OutputTools(config, app=app_key(catalog.tool_names)))
    if codemode_enabled(config):  # python_execution needs the codemode format enabled
        families.append(CodeMode(catalog, config))
    toolbox = config.database_toolbox
    if toolbox is not None and toolbox.reachable_sources():  # a source that connects
        families.append(DatabaseTools(toolbox, config))
    return families


def reserved_tool_names() -> frozenset[str]:
    """Every name a built-in family can give a tool, whatever the options turn on: a tool of
    an MCP server never takes one of them (it would clash once that family is enabled)."""
    families = builtin_families(ToolCatalog.from_tools([]), BudgetConfig())
    always = {t.name for family in families for t in family.definitions()}
    return frozenset({*always, PYTHON_EXECUTION, SEARCH_SCHEMAS, EXECUTE_SQL})


def check_builtin_names(gate: BuiltinFilter, names: Iterable[str] = ()) -> None:
    """Refuse an ``enabled_builtins`` name that is a misspelt built-in ("serch_tools"): it
    would quietly turn nothing on (in an allow list, the built-in meant would be off). A name
    unlike every built-in's may be a family of your own (registered on a ``BatchRunner``), and
    a pattern (``*``, ``?``, ``[``) is taken as it is: only near misses are refused.

    Args:
        gate: the ``enabled_builtins`` filter.
        names: the built-in names the caller binds, beyond every family's
            (:func:`reserved_tool_names`): its own families' names are no typos.

    Raises:
        ValueError: a near miss, naming the built-in it is close to, the corrected
            ``enabled_builtins``, and the pattern that keeps a name of your own.
    """
    known = {*names, *reserved_tool_names(), AUTO_TOOL_SEARCH}
    typos = {
        name: max(sorted(known), key=lambda k: fuzz.ratio(name, k))
        for name in dict.fromkeys((*(gate.allow or ()), *gate.deny))
        if name not in known and not any(c in name for c in "*?[")
        if any(fuzz.ratio(name, k) >= TYPO_SIMILARITY for k in known)
    }
    if typos:
        raise ValueError(
            BUILTIN_TYPO_ERROR.format(
                names=list(typos),
                closest=", ".join(f"{n!r} -> {near!r}" for n, near in typos.items()),
                fixed=_corrected(gate, typos),
                mine=" or ".join(repr(n) for n in typos),
                patterns=", ".join(f"{n!r} as {_literal_pattern(n)!r}" for n in typos),
            )
        )


def _corrected(gate: BuiltinFilter, typos: dict[str, str]) -> Any:
    """The ``enabled_builtins`` value of ``gate`` with each typo replaced by the name meant."""
    allow = None if gate.allow is None else list(dict.fromkeys(typos.get(n, n) for n in gate.allow))
    deny = list(dict.fromkeys(typos.get(n, n) for n in gate.deny))
    if not deny and allow is not None:
        return allow
    return {"deny": deny} if allow is None else {"allow": allow, "deny": deny}


def _literal_pattern(name: str) -> str:
    """An ``fnmatch`` pattern that matches ``name`` alone (its last character in brackets)."""
    return f"{name[:-1]}[{name[-1]}]"


TYPO_SIMILARITY = 85
"""How alike (rapidfuzz ratio, 0-100) an unknown ``enabled_builtins`` name and a built-in's
must be for the name to be reported as a misspelling."""


class Builtins:
    """The enabled built-in tools of one node, by name.

    Args:
        catalog: the catalog (its tool names must not shadow an enabled built-in).
        config: the shared options; ``config.enabled_builtins`` is the gate.
        families: the families to choose from (default: :func:`builtin_families`).

    Raises:
        ValueError: a catalog tool has the name of an enabled built-in, or
            ``enabled_builtins`` names a misspelt built-in (:func:`check_builtin_names`).
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        config: BudgetConfig,
        families: Sequence[BuiltinTools] | None = None,
    ) -> None:
        if families is None:
            families = builtin_families(catalog, config)
        gate: BuiltinFilter = config.builtin_filter
        self.tools: list[BaseTool] = []
        self._family: dict[str, BuiltinTools] = {}
        self._schemas: dict[str, dict[str, Any]] = {}  # filled at a name's first call
        for family in families:
            for tool in family.definitions():
                if gate.allows(tool.name, default=family.default_enabled):
                    self.tools.append(tool)
                    self._family[tool.name] = family
        clash = sorted(n for n in self._family if catalog.get(n) is not None)
        if clash:
            raise ValueError(BUILTIN_NAME_ERROR.format(names=clash))
        check_builtin_names(gate, (t.name for family in families for t in family.definitions()))

    @property
    def names(self) -> tuple[str, ...]:
        """The enabled built-ins' names, in binding order."""
        return tuple(t.name for t in self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self._family

    def family(self, name: str) -> BuiltinTools:
        """The family that answers ``name`` (an enabled built-in)."""
        return self._family[name]

    def coerced(self, call: ToolCall) -> ToolCall:
        """``call`` (to an enabled built-in) with its arguments repaired against the tool's
        schema as a catalog tool's are (``"100"`` for an integer, ``Mode`` for ``mode``,
        ``"ALWAYS"`` for the allowed ``"always"``), unless its family reads them itself
        (:attr:`~langgraph_toolbudget.execution.builtin_family.BuiltinTools.coerces_args`).
        Arguments that could not be parsed, or that are no object and no text (a list, a
        number), or a definition whose schema cannot be read, leave the call as it is: its
        family answers it (see
        :func:`~langgraph_toolbudget.execution.builtin_family.call_arguments`)."""
        args = call.get("args")
        if not self._family[call["name"]].coerces_args or not isinstance(args, dict | str | None):
            return call
        if isinstance(args, dict) and RAW_ARGUMENTS_KEY in args:
            return call
        schema = self._schemas.get(call["name"])
        if schema is None:
            tool = next(t for t in self.tools if t.name == call["name"])
            try:
                schema = tool_json_schema(tool)
            except (TypeError, ValueError, PydanticUserError):  # a custom definition's
                return call
            self._schemas[call["name"]] = schema
        fixed = coerce_args(args or {}, schema)
        return {**call, "args": fixed} if isinstance(fixed, dict) else call

    def counts_as_meta(self, name: str) -> bool:
        """Whether a call to ``name`` spends the per-turn meta-call allowance."""
        family = self._family.get(name)
        return family is not None and family.counts_as_meta
