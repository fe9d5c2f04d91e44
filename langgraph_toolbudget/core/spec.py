"""One catalog tool and its metadata: :class:`ToolSpec`, and how it is read from a tool.

Its one reason to change: what one tool's metadata is and how its layers combine.

Key Components:
    - :class:`ToolSpec`: one tool and the metadata the nodes read (server,
      categories, include mode, status, execution metadata).
    - :data:`ToolStatus`, :data:`RuntimeMode`, :data:`RUNNABLE_STATUSES`: the
      lifecycle of a tool and which statuses run in which runtime mode.
    - :func:`build_spec`: a tool's spec from its own metadata, its server's
      defaults and the catalog's overrides.
    - :func:`merge_status`: one metadata layer's ``status`` / ``enabled`` over
      the status below it; :func:`changed_spec`: a spec with metadata changed.
    - :func:`passes_filters`: the catalog's ``allowed_servers`` /
      ``allowed_tools`` test.
    - :func:`server_of`: the server (or group) a tool is grouped under.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from langchain_core.tools import BaseTool, InjectedToolArg

from langgraph_toolbudget.core.catalog_checks import check_metadata

__all__ = [
    "RUNNABLE_STATUSES",
    "RUNTIME_MODES",
    "IncludeMode",
    "NO_SERVER",
    "RuntimeMode",
    "SPECIAL_CATEGORIES",
    "ToolSpec",
    "ToolStatus",
    "build_spec",
    "changed_spec",
    "check_runtime_mode",
    "merge_status",
    "passes_filters",
    "server_of",
]

IncludeMode = Literal["always", "manual", "agent"]
"""``always``: visible every turn, outside the budget. ``agent``: chosen by the
budget, searches and the model's meta-tools. ``manual``: only when named
explicitly (``add_tool``, pinned tools); never chosen automatically."""

ToolStatus = Literal["draft", "published", "deprecated", "disabled"]
"""A tool's lifecycle. ``published``: runs everywhere (the default). ``deprecated``:
runs, and its results carry a note saying so. ``draft``: runs only in debug mode.
``disabled`` (also ``enabled=False``): listed nowhere, never runs."""

RuntimeMode = Literal["production", "debug"]
"""``production`` runs published and deprecated tools; ``debug`` drafts too."""

RUNTIME_MODES: tuple[str, ...] = ("production", "debug")
"""The runtime modes, the default first."""

RUNNABLE_STATUSES: dict[str, frozenset[str]] = {
    "production": frozenset({"published", "deprecated"}),
    "debug": frozenset({"draft", "published", "deprecated"}),
}
"""Runtime mode -> the statuses of the tools that are listed, chosen and run in it."""

RUNTIME_MODE_ERROR = (
    "runtime_mode must be 'production' (published and deprecated tools run) or 'debug' "
    "(draft tools run too), got {value!r}."
)

BAD_PROPERTIES_ERROR = (
    "Tool {name!r} has an args schema whose 'properties' is a {kind}, not an object: give it "
    "a JSON Schema object ({{'type': 'object', 'properties': {{'arg': {{'type': 'string'}}}}}}) "
    "or a pydantic model as args_schema."
)
SPECIAL_CATEGORIES = frozenset({"human", "structured_output"})
"""Tools in these categories are always visible and pass every filter."""


@dataclass(frozen=True)
class ToolSpec:
    """One catalog tool and its metadata (and its execution defaults).

    Attributes:
        name: the name the model sees and calls.
        tool: the LangChain tool that runs.
        description: the tool's description.
        server: the MCP server (or any grouping) the tool comes from.
        categories: the categories the tool sits in.
        include: ``always``, ``manual`` or ``agent``.
        status: ``published``, ``deprecated``, ``draft`` or ``disabled``
            (see :data:`ToolStatus`); :attr:`enabled` is False exactly when
            it is ``disabled``.
        is_pure: a pure tool may run concurrently with others of its group.
        concurrency_group: impure calls of one group run one at a time.
        max_concurrency: how many calls of the group may run at once, when
            set; ``None`` (not set): pure calls run side by side (sync ones on
            the executor's ``max_parallel`` threads), impure calls one at a time.
        timeout_s: seconds a call may take; ``None`` for no bound.
        arg_names: the argument names of the tool's schema.
        arg_descriptions: the argument descriptions of the tool's schema
            (searched with the tool's description).
        output_fields: the output fields the tool declares (see
            :data:`OUTPUT_SCHEMA_KEY`), each its name and description; ranked
            like the argument descriptions ("the film's title, director and
            plot" asks for the tool that returns them).
        aliases: the other names a thread's *exclusion* (or ``manual`` mode) of the tool may
            use: an MCP tool's name with and without its server's prefix (``notes__search``,
            ``search``), since which one it gets depends on the other servers loaded. Never an
            inclusion's, nor an ``always`` / ``agent`` mode's.
    """

    name: str
    tool: BaseTool = field(repr=False, compare=False)
    description: str = ""
    server: str | None = None
    categories: tuple[str, ...] = ()
    include: IncludeMode = "agent"
    status: ToolStatus = "published"
    is_pure: bool = False
    concurrency_group: str = "default"
    max_concurrency: int | None = None
    timeout_s: float | None = None
    arg_names: tuple[str, ...] = ()
    arg_descriptions: tuple[str, ...] = field(default=(), repr=False)
    output_fields: tuple[str, ...] = field(default=(), repr=False)
    aliases: tuple[str, ...] = field(default=(), repr=False)

    @property
    def enabled(self) -> bool:
        """False exactly when the status is ``disabled`` (``enabled=False`` is its synonym)."""
        return self.status != "disabled"

    def runs_in(self, runtime_mode: str) -> bool:
        """Is this tool listed, chosen and run in ``runtime_mode``?"""
        return self.status in RUNNABLE_STATUSES[runtime_mode]

    @property
    def always_visible(self) -> bool:
        """Visible without spending budget (include ``always`` or a special category)."""
        return self.include == "always" or bool(SPECIAL_CATEGORIES.intersection(self.categories))


NO_SERVER = "(no server)"
"""The group of a tool that has neither a server nor a category."""


def server_of(spec: ToolSpec) -> str:
    """The server a tool is grouped under: its server, else its first category."""
    if spec.server:
        return spec.server
    return spec.categories[0] if spec.categories else NO_SERVER


def check_runtime_mode(value: object) -> str:
    """``value`` if it is a runtime mode; ValueError (TypeError if not a string) otherwise."""
    if not isinstance(value, str):
        raise TypeError(RUNTIME_MODE_ERROR.format(value=value))
    if value not in RUNTIME_MODES:
        raise ValueError(RUNTIME_MODE_ERROR.format(value=value))
    return value


def merge_status(status: ToolStatus, layer: Mapping[str, Any]) -> ToolStatus:
    """The status after one checked metadata layer (catalog default < server < tool < override).

    ``status`` in the layer wins; else ``enabled=False`` means ``disabled`` and
    ``enabled=True`` undoes a ``disabled`` below (back to ``published``) and keeps
    any other status. A layer giving both keys has them agree (checked by
    :func:`~langgraph_toolbudget.core.catalog_checks.check_metadata`).
    """
    if "status" in layer:
        return cast(ToolStatus, layer["status"])
    if "enabled" in layer:
        if not layer["enabled"]:
            return "disabled"
        return "published" if status == "disabled" else status
    return status


def _spec_fields(layer: Mapping[str, Any]) -> dict[str, Any]:
    """A checked metadata layer as spec fields: ``status``/``enabled`` left to
    :func:`merge_status`, a declared output schema turned into its output fields."""
    fields = {k: v for k, v in layer.items() if k not in ("status", "enabled", OUTPUT_SCHEMA_KEY)}
    if OUTPUT_SCHEMA_KEY in layer:
        fields["output_fields"] = _output_fields(layer[OUTPUT_SCHEMA_KEY])
    return fields


def changed_spec(spec: ToolSpec, changes: Mapping[str, Any]) -> ToolSpec:
    """``spec`` with checked metadata ``changes`` applied (``status``/``enabled`` merged)."""
    return replace(spec, **_spec_fields(changes), status=merge_status(spec.status, changes))


def _injected(field: Any) -> bool:
    """Is a pydantic field an argument LangGraph injects (state, store, runtime, call id)?"""
    marks = [field.annotation, *getattr(field, "metadata", ())]
    return any(
        isinstance(m, InjectedToolArg) or (isinstance(m, type) and issubclass(m, InjectedToolArg))
        for m in marks
    ) or (isinstance(field.annotation, type) and "ToolRuntime" in field.annotation.__name__)


OUTPUT_SCHEMA_KEY = "output_schema"
"""The metadata key holding the JSON schema of a tool's result, in the tool's own ``metadata``
(an MCP tool's ``outputSchema``, which the package's MCP loader puts there) or in
``tool_metadata``: its top-level properties become the tool's :attr:`ToolSpec.output_fields`
(not a lone ``result``: a plain return value, wrapped).
"""


def _output_fields(schema: Mapping[str, Any]) -> tuple[str, ...]:
    """Each top-level property of a declared output schema: its name and description."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping) or list(properties) == ["result"]:
        return ()  # no schema, or a plain return value wrapped as {"result": ...} (FastMCP)
    fields = []
    for name, prop in properties.items():
        about = prop.get("description") if isinstance(prop, Mapping) else None
        fields.append(f"{name} {about}" if isinstance(about, str) and about else str(name))
    return tuple(fields)


def _arg_info(tool: BaseTool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The argument names and the argument descriptions of a tool's schema."""
    schema = tool.args_schema
    fields = getattr(schema, "model_fields", None) if isinstance(schema, type) else None
    if isinstance(fields, dict):
        # Fast path (~100x cheaper than `tool.args`, which builds a JSON schema per tool).
        kept = {name: f for name, f in fields.items() if not _injected(f)}
        return tuple(kept), tuple(f.description for f in kept.values() if f.description)
    try:
        args = tool.args
    except Exception:  # noqa: BLE001 - a tool without a readable schema just has no arg names
        return (), ()
    if not isinstance(args, Mapping):
        kind = "null" if args is None else type(args).__name__
        raise ValueError(BAD_PROPERTIES_ERROR.format(name=tool.name, kind=kind))
    descriptions = tuple(
        d
        for v in args.values()
        if isinstance(v, dict) and isinstance(d := v.get("description"), str) and d
    )
    return tuple(args), descriptions


def passes_filters(
    spec: ToolSpec, servers: set[str] | None, patterns: Sequence[str] | None
) -> bool:
    """Does the catalog's filter admit this tool?

    Args:
        spec: the tool.
        servers: ``allowed_servers`` (None: no server filter).
        patterns: ``allowed_tools``: ``name``, ``server:name`` or ``server:*``
            (shell-style wildcards; None: no tool filter).

    Tools of the special categories always pass; with both filters, a tool
    passes if either admits it.
    """
    if servers is None and patterns is None:
        return True
    if spec.always_visible and SPECIAL_CATEGORIES.intersection(spec.categories):
        return True
    if servers is not None and spec.server in servers:
        return True
    for pattern in patterns or ():
        server, sep, name = pattern.rpartition(":")
        if sep and server != (spec.server or ""):
            continue
        if fnmatch.fnmatchcase(spec.name, name):
            return True
    return False


def build_spec(
    tool: BaseTool,
    categories: list[str] | None,
    override: Mapping[str, Any] | None,
    server_defaults: Mapping[str, Mapping[str, Any]],
    default_include: str,
) -> ToolSpec:
    """A tool's spec: the catalog default, then its server's, its own metadata, the override.

    Args:
        tool: the LangChain tool.
        categories: the categories the catalog's mapping puts it in (None or
            empty: its server's category, if it has a server).
        override: ``tool_metadata`` for this tool.
        server_defaults: server -> metadata for that server's tools.
        default_include: the include mode of a tool that sets none.

    ``status`` and its synonym ``enabled`` are merged layer by layer (see
    :func:`merge_status`): a later layer overrides an earlier one whichever key
    either uses.

    Raises:
        TypeError, ValueError: metadata of the wrong type or out of range, or
            ``enabled`` and ``status`` that disagree within one layer
            (see :func:`~langgraph_toolbudget.core.catalog_checks.check_metadata`).
    """
    own = check_metadata(tool.name, tool.metadata or {}, strict=False)
    argument = f"tool_metadata[{tool.name!r}]"
    changes = check_metadata(tool.name, override or {}, strict=True, argument=argument)
    server = changes.get("server", own.get("server"))
    layers = [own, changes]
    if server is not None and server in server_defaults:
        argument = f"server_defaults[{server!r}]"
        defaults = server_defaults[server]
        layers.insert(0, check_metadata(tool.name, defaults, strict=True, argument=argument))
    meta: dict[str, Any] = {"include": default_include}
    status: ToolStatus = "published"
    for layer in layers:
        meta.update(_spec_fields(layer))
        status = merge_status(status, layer)
    meta["server"] = server
    meta["status"] = status
    arg_names, arg_descriptions = _arg_info(tool)
    return ToolSpec(
        name=tool.name,
        tool=tool,
        description=tool.description or "",
        categories=tuple(categories or ([server] if server else [])),
        arg_names=arg_names,
        arg_descriptions=arg_descriptions,
        **meta,
    )
