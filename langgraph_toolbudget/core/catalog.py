"""The tool catalog: every tool the app has, with its metadata, filters and index.

Key Components:
    - :class:`ToolSpec`: one tool and the metadata the nodes read (server,
      categories, include mode, enabled, execution metadata).
    - :class:`ToolCatalog`: an immutable set of tools. Filters apply once, at
      construction: a filtered tool is never searched, selected, listed or run.
      The search index is built once per catalog.

Typical Usage:
    >>> from langchain_core.tools import tool
    >>> @tool
    ... def create_issue(title: str) -> str:
    ...     '''Create a GitHub issue.'''
    ...     return title
    >>> catalog = ToolCatalog.from_tools([create_issue], categories={"github": ["create_issue"]})
    >>> catalog.categories
    ['github']
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

from langchain_core.tools import BaseTool, InjectedToolArg

from langgraph_toolbudget.core.search import ToolIndex

__all__ = [
    "IncludeMode",
    "SPECIAL_CATEGORIES",
    "TOOL_METADATA_KEYS",
    "ToolCatalog",
    "ToolSpec",
]

IncludeMode = Literal["always", "manual", "agent"]
"""``always``: visible every turn, outside the budget. ``agent``: chosen by the
budget, searches and the model's meta-tools. ``manual``: only when named
explicitly (``add_tool``, pinned tools); never chosen automatically."""

SPECIAL_CATEGORIES = frozenset({"human", "structured_output"})
"""Tools in these categories are always visible and pass every filter."""

_INCLUDE_MODES = ("always", "manual", "agent")
TOOL_METADATA_KEYS: dict[str, tuple[type, ...]] = {
    "server": (str, type(None)),
    "include": (str,),
    "enabled": (bool,),
    "is_pure": (bool,),
    "concurrency_group": (str,),
    "max_concurrency": (int,),
    "timeout_s": (int, float, type(None)),
}
"""The metadata keys the catalog reads, and the types each accepts."""

DUPLICATE_TOOL_ERROR = (
    "duplicate tool names {names}: every tool in a catalog needs a unique name. "
    "Rename one (e.g. prefix it with its server) before building the catalog."
)
UNKNOWN_CATEGORY_TOOL_ERROR = (
    "category {category!r} lists {names}, which are not tools of this catalog. "
    "Known tools include {known}."
)
UNKNOWN_METADATA_TOOL_ERROR = (
    "tool_metadata names {names}, which are not tools of this catalog. Known tools include {known}."
)
UNKNOWN_METADATA_KEY_ERROR = "tool {tool!r}: unknown metadata key {key!r}. Allowed keys: {allowed}."
METADATA_TYPE_ERROR = "tool {tool!r}: metadata key {key!r} must be {expected}, got {value!r}."
METADATA_VALUE_ERROR = "tool {tool!r}: metadata key {key!r} {problem}, got {value!r}."
UNKNOWN_DESCRIPTION_ERROR = (
    "category_descriptions names {names}, which are not categories of this catalog. "
    "Categories: {known}."
)


@dataclass(frozen=True)
class ToolSpec:
    """One catalog tool and its metadata (execution defaults of seed 004).

    Attributes:
        name: the name the model sees and calls.
        tool: the LangChain tool that runs.
        description: the tool's description.
        server: the MCP server (or any grouping) the tool comes from.
        categories: the categories the tool sits in.
        include: ``always``, ``manual`` or ``agent``.
        enabled: a disabled tool is listed nowhere and never runs.
        is_pure: a pure tool may run concurrently with others of its group.
        concurrency_group: calls of one group share ``max_concurrency``.
        max_concurrency: how many calls of the group may run at once.
        timeout_s: seconds a call may take; ``None`` for no bound.
        arg_names: the argument names of the tool's schema.
        arg_descriptions: the argument descriptions of the tool's schema
            (searched with the tool's description).
    """

    name: str
    tool: BaseTool = field(repr=False, compare=False)
    description: str = ""
    server: str | None = None
    categories: tuple[str, ...] = ()
    include: IncludeMode = "agent"
    enabled: bool = True
    is_pure: bool = False
    concurrency_group: str = "default"
    max_concurrency: int = 1
    timeout_s: float | None = None
    arg_names: tuple[str, ...] = ()
    arg_descriptions: tuple[str, ...] = field(default=(), repr=False)

    @property
    def always_visible(self) -> bool:
        """Visible without spending budget (include ``always`` or a special category)."""
        return self.include == "always" or bool(SPECIAL_CATEGORIES.intersection(self.categories))


def _check_metadata(tool: str, meta: Mapping[str, Any], *, strict: bool) -> dict[str, Any]:
    """Validate the known keys of a metadata mapping; with ``strict``, reject unknown ones."""
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if key not in TOOL_METADATA_KEYS:
            if strict:
                raise ValueError(
                    UNKNOWN_METADATA_KEY_ERROR.format(
                        tool=tool, key=key, allowed=", ".join(TOOL_METADATA_KEYS)
                    )
                )
            continue
        expected = TOOL_METADATA_KEYS[key]
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            names = " or ".join("None" if t is type(None) else t.__name__ for t in expected)
            raise TypeError(
                METADATA_TYPE_ERROR.format(tool=tool, key=key, expected=names, value=value)
            )
        if key == "include" and value not in _INCLUDE_MODES:
            raise ValueError(
                METADATA_VALUE_ERROR.format(
                    tool=tool, key=key, problem=f"must be one of {_INCLUDE_MODES}", value=value
                )
            )
        if key == "max_concurrency" and value < 1:
            raise ValueError(
                METADATA_VALUE_ERROR.format(tool=tool, key=key, problem="must be >= 1", value=value)
            )
        if key == "timeout_s" and value is not None and value <= 0:
            raise ValueError(
                METADATA_VALUE_ERROR.format(tool=tool, key=key, problem="must be > 0", value=value)
            )
        out[key] = value
    return out


def _injected(field: Any) -> bool:
    """Is a pydantic field an argument LangGraph injects (state, store, runtime, call id)?"""
    marks = [field.annotation, *getattr(field, "metadata", ())]
    return any(
        isinstance(m, InjectedToolArg) or (isinstance(m, type) and issubclass(m, InjectedToolArg))
        for m in marks
    ) or (isinstance(field.annotation, type) and "ToolRuntime" in field.annotation.__name__)


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
    descriptions = tuple(
        d
        for v in args.values()
        if isinstance(v, dict) and isinstance(d := v.get("description"), str) and d
    )
    return tuple(args), descriptions


def _allowed(spec: ToolSpec, servers: set[str] | None, patterns: Sequence[str] | None) -> bool:
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


class ToolCatalog:
    """Every tool an app has, with metadata, filters and a search index.

    Build it with :meth:`from_tools` (or ``from_mcp`` for MCP servers). A
    catalog is immutable; the nodes share one.

    Example:
        ```python
        catalog = ToolCatalog.from_tools(
            tools,
            categories={"github": ["create_issue", "list_issues"]},
            category_descriptions={"github": "Issues and pull requests"},
            tool_metadata={"create_issue": {"timeout_s": 10}},
            allowed_tools=["github:*"],
        )
        ```
    """

    def __init__(
        self,
        specs: Sequence[ToolSpec],
        *,
        category_descriptions: Mapping[str, str] | None = None,
        filtered: Iterable[str] = (),
    ) -> None:
        names = [s.name for s in specs]
        dupes = sorted(n for n, k in Counter(names).items() if k > 1)
        if dupes:
            raise ValueError(DUPLICATE_TOOL_ERROR.format(names=dupes))
        self._specs: dict[str, ToolSpec] = {s.name: s for s in specs}
        self._filtered = frozenset(filtered)
        self._active = [s for s in specs if s.enabled]
        members: dict[str, list[str]] = {}
        for spec in self._active:
            for cat in spec.categories:
                members.setdefault(cat, []).append(spec.name)
        self._members = members
        descriptions = dict(category_descriptions or {})
        self._descriptions = {c: descriptions.get(c, "") for c in members}

    @classmethod
    def from_tools(
        cls,
        tools: Sequence[BaseTool],
        categories: Mapping[str, Sequence[str]] | None = None,
        category_descriptions: Mapping[str, str] | None = None,
        tool_metadata: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        server_defaults: Mapping[str, Mapping[str, Any]] | None = None,
        allowed_servers: Sequence[str] | None = None,
        allowed_tools: Sequence[str] | None = None,
        default_include: IncludeMode = "agent",
    ) -> ToolCatalog:
        """Build a catalog from LangChain tools.

        Args:
            tools: the tools; names must be unique.
            categories: category -> tool names; a tool may sit in several.
                A tool in no category falls in its server's category, if it
                has a server.
            category_descriptions: category -> description, used to classify
                queries and listed to the model.
            tool_metadata: tool name -> metadata overriding the tool's own
                ``metadata`` dict. Keys: ``server``, ``include``, ``enabled``,
                ``is_pure``, ``concurrency_group``, ``max_concurrency``,
                ``timeout_s``.
            server_defaults: server -> metadata applied to that server's tools
                before each tool's own metadata.
            allowed_servers: keep only these servers' tools (with
                ``allowed_tools``, a tool passes if either admits it).
            allowed_tools: keep only these tools: ``name``, ``server:name`` or
                ``server:*`` (shell-style wildcards).
            default_include: include mode of a tool that sets none.

        Raises:
            ValueError: duplicate names, category entries or metadata naming
                unknown tools, unknown metadata keys or values.
            TypeError: a metadata value of the wrong type.
        """
        tool_metadata = dict(tool_metadata or {})
        known = {t.name for t in tools}
        unknown = sorted(set(tool_metadata) - known)
        if unknown:
            raise ValueError(
                UNKNOWN_METADATA_TOOL_ERROR.format(names=unknown, known=sorted(known)[:10])
            )
        names = [t.name for t in tools]
        dupes = sorted(n for n, k in Counter(names).items() if k > 1)
        if dupes:
            raise ValueError(DUPLICATE_TOOL_ERROR.format(names=dupes))
        tool_cats: dict[str, list[str]] = {}
        for cat, members in (categories or {}).items():
            if isinstance(members, str):
                raise TypeError(
                    f"categories[{cat!r}] must be a list of tool names, got the string {members!r}."
                )
            missing = [m for m in members if m not in known]
            if missing:
                raise ValueError(
                    UNKNOWN_CATEGORY_TOOL_ERROR.format(
                        category=cat, names=missing, known=sorted(known)[:10]
                    )
                )
            for m in members:
                if cat not in tool_cats.setdefault(m, []):
                    tool_cats[m].append(cat)

        specs: list[ToolSpec] = []
        for t in tools:
            own = _check_metadata(t.name, t.metadata or {}, strict=False)
            override = _check_metadata(t.name, tool_metadata.get(t.name, {}), strict=True)
            server = override.get("server", own.get("server"))
            meta: dict[str, Any] = {"include": default_include}
            if server is not None and server_defaults and server in server_defaults:
                meta.update(_check_metadata(t.name, server_defaults[server], strict=True))
            meta.update(own)
            meta.update(override)
            meta["server"] = server
            cats = tool_cats.get(t.name) or ([server] if server else [])
            arg_names, arg_descriptions = _arg_info(t)
            specs.append(
                ToolSpec(
                    name=t.name,
                    tool=t,
                    description=t.description or "",
                    categories=tuple(cats),
                    arg_names=arg_names,
                    arg_descriptions=arg_descriptions,
                    **meta,
                )
            )
        servers = set(allowed_servers) if allowed_servers is not None else None
        patterns = list(allowed_tools) if allowed_tools is not None else None
        kept = [s for s in specs if _allowed(s, servers, patterns)]
        kept_names = {s.name for s in kept}
        filtered = [s.name for s in specs if s.name not in kept_names]
        catalog = cls(kept, category_descriptions=category_descriptions, filtered=filtered)
        extra = sorted(set(category_descriptions or {}) - {c for s in specs for c in s.categories})
        if extra:
            raise ValueError(
                UNKNOWN_DESCRIPTION_ERROR.format(names=extra, known=sorted(catalog.categories))
            )
        return catalog

    # --- what the catalog holds -------------------------------------------------------------

    @property
    def categories(self) -> list[str]:
        """Category names that hold at least one enabled, unfiltered tool."""
        return list(self._members)

    @property
    def category_descriptions(self) -> dict[str, str]:
        """Category -> description ("" where none was given)."""
        return dict(self._descriptions)

    @property
    def tool_names(self) -> list[str]:
        """Every enabled, unfiltered tool name, in catalog order."""
        return [s.name for s in self._active]

    @property
    def specs(self) -> list[ToolSpec]:
        """Every enabled, unfiltered tool's spec, in catalog order."""
        return list(self._active)

    def __len__(self) -> int:
        return len(self._active)

    def __contains__(self, name: object) -> bool:
        spec = self._specs.get(name) if isinstance(name, str) else None
        return spec is not None and spec.enabled

    def get(self, name: str) -> ToolSpec | None:
        """The spec of an enabled or disabled tool; None if unknown or filtered."""
        return self._specs.get(name)

    def is_filtered(self, name: str) -> bool:
        """True if the catalog's filters removed this tool."""
        return name in self._filtered

    def is_disabled(self, name: str) -> bool:
        """True if the tool exists but is disabled."""
        spec = self._specs.get(name)
        return spec is not None and not spec.enabled

    def tools_in(self, category: str) -> list[str]:
        """Enabled tools of a category, in catalog order ([] if unknown)."""
        return list(self._members.get(category, ()))

    def tools(self, names: Iterable[str]) -> list[BaseTool]:
        """The LangChain tools for these names, skipping unknown and disabled ones."""
        return [self._specs[n].tool for n in names if n in self]

    @cached_property
    def always_visible(self) -> list[str]:
        """Tools visible every turn without budget: include ``always``, special categories."""
        return [s.name for s in self._active if s.always_visible]

    def selectable(self, name: str) -> bool:
        """May the budget, tool_search or request_more_tools choose this tool?"""
        spec = self._specs.get(name)
        return spec is not None and spec.enabled and spec.include == "agent"

    def with_metadata(self, **changes: Mapping[str, Any]) -> ToolCatalog:
        """A copy with some tools' metadata changed: ``with_metadata(tool={"enabled": False})``.

        Raises:
            ValueError: a name that is not a tool of this catalog (unknown or
                filtered), an unknown metadata key or value.
            TypeError: a metadata value of the wrong type.
        """
        unknown = sorted(set(changes) - set(self._specs))
        if unknown:
            raise ValueError(
                UNKNOWN_METADATA_TOOL_ERROR.format(names=unknown, known=sorted(self._specs)[:10])
            )
        specs = []
        for spec in self._specs.values():
            if spec.name in changes:
                spec = replace(spec, **_check_metadata(spec.name, changes[spec.name], strict=True))
            specs.append(spec)
        return self._copy_with(specs)

    # --- search -----------------------------------------------------------------------------

    @cached_property
    def index(self) -> ToolIndex:
        """The search index over enabled tools, built on first use, once."""
        return ToolIndex(
            [(s.name, s.description, s.arg_names, s.arg_descriptions) for s in self._active]
        )

    @cached_property
    def category_index(self) -> ToolIndex:
        """An index with one document per category: its name and description."""
        return ToolIndex(
            [(c, self._descriptions.get(c, ""), ()) for c in self._members], name_weight=3
        )

    def __repr__(self) -> str:
        return f"ToolCatalog({len(self)} tools, {len(self._members)} categories)"

    # --- copies, MCP servers, closing -------------------------------------------------------

    def _copy_with(self, specs: Sequence[ToolSpec]) -> ToolCatalog:
        """A catalog of this class over ``specs``, with these category descriptions and filters.

        :meth:`with_metadata` builds its copies here; a subclass whose constructor
        takes more (an MCP catalog's runtime) overrides it to pass that on.
        """
        return type(self)(specs, category_descriptions=self._descriptions, filtered=self._filtered)

    @classmethod
    async def from_mcp(
        cls,
        connections_or_client: Any,
        *,
        server_descriptions: Mapping[str, str] | None = None,
        server_defaults: Mapping[str, Mapping[str, Any]] | None = None,
        tool_metadata: Mapping[str, Mapping[str, Any]] | None = None,
        categories: Mapping[str, Sequence[str]] | None = None,
        allowed_servers: Sequence[str] | None = None,
        allowed_tools: Sequence[str] | None = None,
        strict: bool = False,
        **options: Any,
    ) -> ToolCatalog:
        """Load MCP servers' tools into a catalog that owns one persistent session per server.

        Each tool is tagged with its server, sits in the server's category (described
        by the server's ``initialize`` instructions) and calls through the session.
        Close with ``await catalog.aclose()`` or ``async with catalog:``. The MCP
        layer (:mod:`langgraph_toolbudget.mcp`) is imported here, on first use.

        Args:
            connections_or_client: server -> connection dict, as for
                ``MultiServerMCPClient``, or a ``MultiServerMCPClient``.
            server_descriptions: server -> category description override.
            server_defaults: server -> metadata for all its tools.
            tool_metadata: tool (catalog name or ``server:mcp_name``) -> overrides.
            categories: category -> tools; unlisted tools sit in their server's category.
            allowed_servers: keep only these servers' tools.
            allowed_tools: keep only these tools (``name``, ``server:name``, ``server:*``).
            strict: raise if any server fails to load, instead of warning and
                listing it in ``load_errors``.
            **options: the other options of
                :func:`langgraph_toolbudget.mcp.load_mcp_catalog`.

        Returns:
            A :class:`~langgraph_toolbudget.mcp.MCPToolCatalog` (of ``cls`` when
            ``cls`` is one): a catalog that also has ``mcp`` (its
            :class:`~langgraph_toolbudget.mcp.MCPRuntime`) and ``load_errors``.
        """
        from langgraph_toolbudget.mcp.catalog import MCPToolCatalog
        from langgraph_toolbudget.mcp.loader import load_mcp_catalog

        return await load_mcp_catalog(
            connections_or_client,
            server_descriptions=server_descriptions,
            server_defaults=server_defaults,
            tool_metadata=tool_metadata,
            categories=categories,
            allowed_servers=allowed_servers,
            allowed_tools=allowed_tools,
            strict=strict,
            catalog_cls=cls if issubclass(cls, MCPToolCatalog) else MCPToolCatalog,
            **options,
        )

    async def aclose(self) -> None:
        """Release what the catalog holds: nothing here; an MCP catalog closes its sessions.

        Every catalog has ``aclose()``, ``close()`` and ``async with``, so code can
        close whatever catalog it was given.
        """

    def close(self) -> None:
        """Sync :meth:`aclose`, for code without an event loop."""

    async def __aenter__(self) -> ToolCatalog:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
