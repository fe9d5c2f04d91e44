"""The tool catalog: every tool the app has, with its metadata, filters and index.

Its one reason to change: what a catalog holds and answers (its tools, their metadata,
filters and runtime modes, the data derived from them, closing what it holds).

Key Components:
    - :class:`ToolSpec` (from :mod:`langgraph_toolbudget.core.spec`): one tool
      and the metadata the nodes read (server, categories, include mode,
      status, execution metadata).
    - :class:`ToolCatalog`: an immutable set of tools. Filters apply once, at
      construction: a filtered tool is never searched, selected, listed or run.
      A catalog lists the tools of one runtime mode (``production``, unless
      made with :meth:`~ToolCatalog.in_runtime_mode`): drafts only in ``debug``,
      disabled tools never.
      Its derived data (search indexes, the arrays of the budget and of the
      intent classifier, embedding vectors) lives in ``catalog.derived``
      (:class:`~langgraph_toolbudget.core.derived.DerivedData`), built on first
      use, once, and freed with the catalog. Every catalog has ``aclose()``,
      ``close()`` and ``async with`` (nothing to release here; an MCP catalog,
      from :func:`langgraph_toolbudget.mcp.load_mcp_catalog`, closes its sessions).
    - :func:`require_catalog`: the check every entry point taking a catalog makes first
      (a list of tools, as ``ToolNode`` takes, gets an error showing how to build one).

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
import inspect
import reprlib
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

from langchain_core.tools import BaseTool

from langgraph_toolbudget.core.catalog_checks import (
    DUPLICATE_TOOL_ERROR,
    NO_SERVERS,
    TOOL_METADATA_KEYS,
    UNKNOWN_METADATA_TOOL_ERROR,
    as_tools,
    categories_by_tool,
    check_categories,
    check_default_include,
    check_descriptions,
    check_metadata,
    check_metadata_mapping,
    check_name_list,
    check_server_defaults,
    closest_names,
    describe_kind,
    described_category_error,
)
from langgraph_toolbudget.core.derived import DerivedData
from langgraph_toolbudget.core.search import ToolIndex
from langgraph_toolbudget.core.spec import (
    SPECIAL_CATEGORIES,
    IncludeMode,
    RuntimeMode,
    ToolSpec,
    ToolStatus,
    build_spec,
    changed_spec,
    check_runtime_mode,
    passes_filters,
    server_of,
)

__all__ = [
    "IncludeMode",
    "RuntimeMode",
    "SPECIAL_CATEGORIES",
    "TOOL_METADATA_KEYS",
    "ToolCatalog",
    "ToolSpec",
    "ToolStatus",
    "require_catalog",
]

NOT_A_CATALOG_ERROR = (
    "{where} takes a ToolCatalog as its catalog, got {got}. Build the catalog once from your "
    "tools and give it to every node: catalog = ToolCatalog.from_tools(tools) (group them "
    "with categories={{'weather': ['get_weather', ...]}}; every option: docs/configuration.md, "
    "'The catalog'), or for MCP servers catalog = await load_mcp_catalog(connections).{extra}"
)
NOT_AWAITED_HINT = " It looks like a coroutine: did you forget to await load_mcp_catalog(...)?"
MODEL_NOT_CATALOG_HINT = (
    " It is a chat model: are the arguments swapped? The model comes first, then the catalog: "
    "create_toolbudget_agent(model, catalog), ToolAgent(model, catalog)."
)
NOT_SPECS_ERROR = (
    "ToolCatalog(specs) takes the catalog's own ToolSpec records, got {got}. Build a catalog "
    "from your tools with ToolCatalog.from_tools(tools) (options: categories=, tool_metadata=, "
    "allowed_tools=...; docs/configuration.md, 'The catalog')."
)
NAMES_NOT_A_STRING_ERROR = (
    "catalog.{method}() takes a list of tool names, got the string {value!r}, which would be "
    "read as its characters: pass [{value!r}]."
)
UNKNOWN_ALLOWED_SERVERS_ERROR = (
    "allowed_servers names {names}, which are not servers of this catalog's tools (a tool's "
    "server is its 'server' metadata): the filter would keep none of their tools, with no "
    "error. Closest servers: {closest}."
)
UNKNOWN_ALLOWED_TOOLS_ERROR = (
    "allowed_tools names {names}, which match no tool of this catalog: the filter would drop "
    "the tool you meant, with no error. Closest tools: {closest} (write 'name', "
    "'server:name' or a pattern such as 'server:*')."
)
UNMATCHED_PATTERNS_WARNING = (
    "allowed_tools patterns {patterns} match no tool of this catalog, so they let no tool "
    "through (a typo?). Tools: {known}."
)
FILTER_WILDCARDS = frozenset("*?[")
"""The characters that make an ``allowed_tools`` entry a pattern (``fnmatch``): an entry
without any names one tool, and naming none is an error, not an empty filter."""


class ToolCatalog:
    """Every tool an app has, with metadata, filters and a search index.

    Build it with :meth:`from_tools` (or
    :func:`~langgraph_toolbudget.mcp.load_mcp_catalog` for MCP servers). A
    catalog is immutable; the nodes share one.

    It lists (searches, selects, runs) the tools of its runtime mode:
    ``production`` runs ``published`` and ``deprecated`` tools, ``debug``
    ``draft`` ones too; ``disabled`` tools are in no mode. ``from_tools`` builds a
    production catalog; :meth:`in_runtime_mode` gives the same catalog in
    another mode (each node takes the view of its ``runtime_mode``).

    Example:
        ```python
        from langchain_core.tools import tool

        from langgraph_toolbudget import ToolCatalog


        @tool
        def create_issue(title: str) -> str:
            '''Open a GitHub issue.'''
            return title


        @tool
        def list_issues() -> str:
            '''List the open GitHub issues.'''
            return "#1 crash on start"


        @tool
        def delete_repo(name: str) -> str:
            '''Delete a GitHub repository.'''
            return name


        catalog = ToolCatalog.from_tools(
            [create_issue, list_issues, delete_repo],
            categories={"github": ["create_issue", "list_issues", "delete_repo"]},
            category_descriptions={"github": "Issues and pull requests"},
            tool_metadata={"create_issue": {"timeout_s": 10}},
            allowed_tools=["create_issue", "list_*"],  # delete_repo is never shown or run
        )
        print(catalog.tool_names)  # ['create_issue', 'list_issues']
        ```
    """

    load_warning: ClassVar[type[Warning]] = UserWarning
    """The category of the warnings about names that may be a failed server's tools (a pinned
    tool left out): an MCP catalog's is ``MCPLoadWarning``, as for the rest of its load."""

    def __init__(
        self,
        specs: Sequence[ToolSpec],
        *,
        category_descriptions: Mapping[str, str] | None = None,
        filtered: Iterable[str] = (),
        runtime_mode: RuntimeMode = "production",
    ) -> None:
        specs = _specs(specs)
        names = [s.name for s in specs]
        dupes = sorted(n for n, k in Counter(names).items() if k > 1)
        if dupes:
            raise ValueError(DUPLICATE_TOOL_ERROR.format(names=dupes))
        self._specs: dict[str, ToolSpec] = {s.name: s for s in specs}
        self._filtered = frozenset(filtered)
        self._runtime_mode: RuntimeMode = check_runtime_mode(runtime_mode)  # type: ignore[assignment]
        self._active = [s for s in specs if s.runs_in(runtime_mode)]
        self._listed = frozenset(s.name for s in self._active)
        self._unmanual = frozenset(s.name for s in self._active if s.include != "manual")
        self._views: dict[str, ToolCatalog] = {}
        members: dict[str, list[str]] = {}
        groups: dict[str, list[str]] = {}
        aliased: dict[str, list[str]] = {}
        for spec in self._active:
            for cat in spec.categories:
                members.setdefault(cat, []).append(spec.name)
            groups.setdefault(server_of(spec), []).append(spec.name)
            for alias in spec.aliases:
                aliased.setdefault(alias, []).append(spec.name)
        self._members = members
        self._groups = groups
        self._aliased = aliased
        self._position = {s.name: i for i, s in enumerate(self._active)}
        self._given_descriptions = dict(category_descriptions or {})  # of every mode's categories
        self._descriptions = {c: self._given_descriptions.get(c, "") for c in members}
        self._always_visible = tuple(s.name for s in self._active if s.always_visible)
        self._derived = DerivedData()

    @property
    def failed_servers(self) -> tuple[str, ...]:
        """The servers whose tools this catalog lacks because they failed to load (none here;
        an MCP catalog's, whose ``load_errors`` says why). While one failed, a name the
        catalog does not know may be one of its tools, not a typo: a pinned one is left out
        with a warning, and the model is told the server is unavailable
        (:meth:`failed_server_of`)."""
        return ()

    def failed_server_of(self, name: str) -> str | None:
        """The server of :attr:`failed_servers` whose tool ``name`` is by its prefix
        (``notes__search`` of a failed ``notes``); None for any other name, and always for a
        catalog without servers."""
        return None

    @property
    def untrusted_descriptions(self) -> frozenset[str]:
        """The categories whose description a third party wrote (an MCP server's
        ``initialize`` instructions): the system prompt's tools section shows such a
        description only while the category is chosen or one of its tools is visible.
        None in a catalog built with :meth:`from_tools` (its descriptions are the app's)."""
        return frozenset()

    @classmethod
    def from_tools(
        cls,
        tools: Sequence[BaseTool | Callable[..., Any]],
        categories: Mapping[str, Sequence[str]] | None = None,
        category_descriptions: Mapping[str, str] | None = None,
        tool_metadata: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        server_defaults: Mapping[str, Mapping[str, Any]] | None = None,
        allowed_servers: Sequence[str] | None = None,
        allowed_tools: Sequence[str] | None = None,
        default_include: IncludeMode = "agent",
    ) -> Self:
        """Build a catalog from LangChain tools (or plain functions).

        Args:
            tools: the tools; names must be unique. Plain functions are made
                into tools as LangGraph's ``ToolNode`` makes them (name,
                docstring and signature), so they need a docstring.
            categories: category -> tool names; a tool may sit in several.
                A tool in no category falls in its server's category, if it
                has a server.
            category_descriptions: category -> description, used to classify
                queries and listed to the model.
            tool_metadata: tool name -> metadata overriding the tool's own
                ``metadata`` dict. Keys: ``server``, ``include``, ``status``
                (``published``, ``deprecated``, ``draft``, ``disabled``),
                ``enabled`` (``False``: ``disabled``), ``is_pure``,
                ``concurrency_group``, ``max_concurrency``, ``timeout_s``.
            server_defaults: server -> metadata applied to that server's tools
                before each tool's own metadata.
            allowed_servers: keep only these servers' tools (with
                ``allowed_tools``, a tool passes if either admits it).
            allowed_tools: keep only these tools: ``name``, ``server:name`` or
                ``server:*`` (shell-style wildcards in the name). A name without
                wildcards must name a tool (else ``ValueError``); a pattern that
                matches none is warned of (``UserWarning``).
            default_include: include mode of a tool that sets none:
                ``"agent"``, ``"always"`` or ``"manual"``.

        Returns:
            The catalog.

        Raises:
            TypeError: an argument of the wrong type (the message names it):
                ``tools`` not a list, an item neither a tool nor a function,
                a mapping that is not one, a name that is not a string, a
                string where a list of names is expected, a metadata value of
                the wrong type, a ``default_include`` that is not a string.
            ValueError: duplicate names; category entries, metadata or
                descriptions naming unknown tools or categories, and
                ``server_defaults`` or ``allowed_servers`` naming a server no tool has,
                an ``allowed_tools`` name without wildcards that names no tool (the
                closest real names are suggested); unknown metadata keys or values;
                ``enabled`` and ``status`` disagreeing in one metadata dict; an
                unknown ``default_include``; a function without a docstring.
        """
        tool_list = as_tools(tools)
        check_default_include(default_include)
        category_map = check_categories(categories)
        descriptions = check_descriptions(category_descriptions)
        overrides = check_metadata_mapping("tool_metadata", tool_metadata, "tool name")
        defaults = check_metadata_mapping("server_defaults", server_defaults, "server name")
        servers = check_name_list("allowed_servers", allowed_servers, "server names")
        patterns = check_name_list("allowed_tools", allowed_tools, "tool names or patterns")

        tool_cats = categories_by_tool([t.name for t in tool_list], category_map, overrides)
        specs = [
            build_spec(
                t, tool_cats.get(t.name), overrides.get(t.name, {}), defaults, default_include
            )
            for t in tool_list
        ]
        check_server_defaults(defaults, {s.server for s in specs if s.server is not None})
        check_filters(specs, servers, patterns)
        allowed = set(servers) if servers is not None else None
        kept = [s for s in specs if passes_filters(s, allowed, patterns)]
        kept_names = {s.name for s in kept}
        filtered = [s.name for s in specs if s.name not in kept_names]
        catalog = cls(kept, category_descriptions=descriptions, filtered=filtered)
        extra = sorted(set(descriptions) - {c for s in specs for c in s.categories})
        if extra:
            raise described_category_error(extra, category_map, catalog.categories)
        return catalog

    # --- what the catalog holds -------------------------------------------------------------

    @property
    def categories(self) -> list[str]:
        """Category names that hold at least one tool listed in this runtime mode."""
        return list(self._members)

    @property
    def category_descriptions(self) -> dict[str, str]:
        """Category -> description ("" where none was given)."""
        return dict(self._descriptions)

    @property
    def tool_names(self) -> list[str]:
        """Every tool listed in this runtime mode (see :meth:`runnable`), in catalog order."""
        return [s.name for s in self._active]

    @property
    def specs(self) -> list[ToolSpec]:
        """The spec of every tool listed in this runtime mode, in catalog order."""
        return list(self._active)

    def __len__(self) -> int:
        return len(self._active)

    def __contains__(self, name: object) -> bool:
        return name in self._listed

    def may_stay_visible(self, names: Iterable[str], last_used: Mapping[str, int]) -> list[str]:
        """The ``names`` (stored as visible) that may stay visible: listed, and not a
        ``manual`` tool that no node added (no ``last_used`` entry).

        Raises:
            TypeError: ``names`` is a string (a list of names is expected).
        """
        _names_not_a_string(names, "may_stay_visible")
        return [n for n in names if n in self._unmanual or (n in self._listed and n in last_used)]

    def get(self, name: str) -> ToolSpec | None:
        """The spec of a tool, whatever its status; None if unknown or filtered."""
        return self._specs.get(name)

    @property
    def runtime_mode(self) -> RuntimeMode:
        """``production`` or ``debug``: which statuses this catalog lists and runs."""
        return self._runtime_mode

    def in_runtime_mode(self, runtime_mode: RuntimeMode) -> ToolCatalog:
        """This catalog in ``runtime_mode``: the same tools, listing those that run there.

        Made once per mode and kept; when the mode lists the same tools (no
        drafts), the view shares this catalog's derived data (indexes, vectors).

        Raises:
            ValueError: not ``"production"`` or ``"debug"``.
        """
        mode = check_runtime_mode(runtime_mode)
        if mode == self._runtime_mode:
            return self
        view = self._views.get(mode)
        if view is None:
            view = self._copy_with(list(self._specs.values()), runtime_mode=runtime_mode)
            if view._listed == self._listed:
                view._derived = self._derived
            view = self._views.setdefault(mode, view)
        return view

    def status(self, name: str) -> ToolStatus | None:
        """A tool's status; None if unknown or filtered."""
        spec = self._specs.get(name)
        return spec.status if spec is not None else None

    def runnable(self, name: str, runtime_mode: RuntimeMode | None = None) -> bool:
        """Does ``name`` run in ``runtime_mode`` (default: this catalog's, which lists those)?"""
        spec = self._specs.get(name)
        mode = check_runtime_mode(runtime_mode or self._runtime_mode)
        return spec is not None and spec.runs_in(mode)

    def is_filtered(self, name: str) -> bool:
        """True if the catalog's filters removed this tool."""
        return name in self._filtered

    def is_disabled(self, name: str) -> bool:
        """True if the tool exists but is disabled."""
        spec = self._specs.get(name)
        return spec is not None and not spec.enabled

    def tools_in(self, category: str) -> list[str]:
        """Listed tools of a category, in catalog order ([] if unknown)."""
        return list(self._members.get(category, ()))

    def tools_of(self, server: str) -> list[str]:
        """Listed tools grouped under a server (its tools; a tool without a server is grouped
        under its first category: :func:`~langgraph_toolbudget.core.spec.server_of`), in
        catalog order ([] if none)."""
        return list(self._groups.get(server, ()))

    def aliased(self, alias: str) -> list[str]:
        """Listed tools that answer to ``alias`` (:attr:`ToolSpec.aliases`: an MCP tool's
        name with or without its server's prefix), in catalog order ([] if none)."""
        return list(self._aliased.get(alias, ()))

    def in_catalog_order(self, names: Iterable[str]) -> list[str]:
        """The listed ones of ``names``, once each, in catalog order.

        Raises:
            TypeError: ``names`` is a string (a list of names is expected).
        """
        _names_not_a_string(names, "in_catalog_order")
        position = self._position
        return sorted({n for n in names if n in position}, key=position.__getitem__)

    def tools(self, names: Iterable[str]) -> list[BaseTool]:
        """The LangChain tools for these names, skipping those not listed (unknown, disabled...).

        Raises:
            TypeError: ``names`` is a string: pass ``["get_weather"]`` for one tool.
        """
        _names_not_a_string(names, "tools")
        return [self._specs[n].tool for n in names if n in self]

    @property
    def always_visible(self) -> list[str]:
        """Tools visible every turn without budget: include ``always``, special categories."""
        return list(self._always_visible)

    def selectable(self, name: str) -> bool:
        """May the budget, tool_search or request_more_tools choose this tool?"""
        spec = self._specs.get(name)
        return spec is not None and name in self._listed and spec.include == "agent"

    def with_metadata(self, **changes: Mapping[str, Any]) -> ToolCatalog:
        """A copy with some tools' metadata changed: ``with_metadata(tool={"status": "draft"})``.

        Args:
            **changes: tool name -> the metadata keys to change (as in
                ``tool_metadata`` of :meth:`from_tools`).

        Returns:
            A new catalog in the same runtime mode (with its own derived data);
            this one is unchanged. ``status`` / ``enabled`` replace the tool's
            status (``enabled=True`` re-enables a disabled tool as published).

        Raises:
            ValueError: a name that is not a tool of this catalog (unknown or
                filtered; the closest real names are suggested), an unknown
                metadata key or value, ``enabled`` and ``status`` that disagree.
            TypeError: changes that are not a mapping, a metadata value of the
                wrong type.
        """
        unknown = [n for n in changes if n not in self._specs]
        if unknown:
            closest = closest_names(unknown, self._specs, filtered=self._filtered)
            raise ValueError(
                UNKNOWN_METADATA_TOOL_ERROR.format(
                    argument="with_metadata", names=unknown, closest=closest
                )
            )
        specs = []
        for spec in self._specs.values():
            if spec.name in changes:
                argument = f"with_metadata({spec.name}=...)"
                meta = check_metadata(spec.name, changes[spec.name], strict=True, argument=argument)
                spec = changed_spec(spec, meta)
            specs.append(spec)
        return self._copy_with(specs, self._runtime_mode)

    # --- search -----------------------------------------------------------------------------

    @property
    def derived(self) -> DerivedData:
        """The data derived from this catalog (indexes, scorers, vectors), built lazily, once.

        Each entry is bounded (see :class:`~langgraph_toolbudget.core.derived.DerivedData`);
        ``catalog.derived.clear()`` frees them all, to be rebuilt on next use.
        """
        return self._derived

    @property
    def index(self) -> ToolIndex:
        """The search index over the listed tools, built on first use, once."""
        return self._derived.get("index", self._build_index)

    def _build_index(self) -> ToolIndex:
        return ToolIndex(
            [
                (s.name, s.description, s.arg_names, s.arg_descriptions + s.output_fields)
                for s in self._active
            ]
        )

    @property
    def category_index(self) -> ToolIndex:
        """An index with one document per category: its name and description."""
        return self._derived.get("category_index", self._build_category_index)

    def _build_category_index(self) -> ToolIndex:
        return ToolIndex(
            [(c, self._descriptions.get(c, ""), ()) for c in self._members], name_weight=3
        )

    def __repr__(self) -> str:
        return f"ToolCatalog({len(self)} tools, {len(self._members)} categories)"

    # --- copies and closing -----------------------------------------------------------------

    def _copy_with(self, specs: Sequence[ToolSpec], runtime_mode: RuntimeMode) -> ToolCatalog:
        """A catalog of this class over ``specs``, with these category descriptions and filters.

        :meth:`with_metadata` and :meth:`in_runtime_mode` build their copies here; a subclass
        whose constructor takes more (an MCP catalog's runtime) overrides it to pass that on.
        """
        return type(self)(
            specs,
            category_descriptions=self._given_descriptions,
            filtered=self._filtered,
            runtime_mode=runtime_mode,
        )

    async def aclose(self) -> None:
        """Release what the catalog holds: nothing here; an MCP catalog closes its sessions.

        Every catalog has ``aclose()``, ``close()`` and ``async with``, so code can
        close whatever catalog it was given.
        """

    def close(self) -> None:
        """Sync :meth:`aclose`, for code without an event loop."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _specs(specs: Any) -> list[ToolSpec]:
    """``specs`` as a list of :class:`ToolSpec`, else a ``TypeError`` naming ``from_tools``
    (``ToolCatalog([tool])`` for ``ToolCatalog.from_tools([tool])``)."""
    if isinstance(specs, Iterable) and not isinstance(specs, str | bytes | Mapping):
        listed = list(specs)
        if all(isinstance(s, ToolSpec) for s in listed):
            return listed
    raise TypeError(NOT_SPECS_ERROR.format(got=_described(specs)))


def _names_not_a_string(names: Any, method: str) -> None:
    """Refuse a string where a list of names is expected (it would be read as characters)."""
    if isinstance(names, str):
        raise TypeError(NAMES_NOT_A_STRING_ERROR.format(method=method, value=names))


def _described(value: Any) -> str:
    """What was passed where a catalog belongs, in a few words."""
    kind = describe_kind(value, "tools", lambda item: isinstance(item, BaseTool) or callable(item))
    if isinstance(value, Mapping):
        return f"{kind} of {len(value)} item{'' if len(value) == 1 else 's'}"
    if value is None or isinstance(value, list | tuple | set | frozenset):
        return kind
    if callable(getattr(value, "invoke", None)):  # a model, a runnable: its repr is noise
        return kind
    return f"{kind} ({reprlib.repr(value)})"


def _admits(spec: ToolSpec, entry: str) -> bool:
    """Does one ``allowed_tools`` entry name this tool (as ``passes_filters`` reads it)?"""
    server, sep, name = entry.rpartition(":")
    if sep and server != (spec.server or ""):
        return False
    return fnmatch.fnmatchcase(spec.name, name)


def check_filters(
    specs: Sequence[ToolSpec], servers: Sequence[str] | None, patterns: Sequence[str] | None
) -> None:
    """Check that each ``allowed_servers`` / ``allowed_tools`` entry admits a tool of ``specs``.

    A typo in a filter would drop the tool it meant, silently: a server no tool has, or an
    ``allowed_tools`` entry without wildcards (:data:`FILTER_WILDCARDS`) naming no tool, is
    refused; a pattern matching no tool is warned of (it may be meant for tools to come).

    Raises:
        ValueError: an unknown server, or a name that is no tool's (the closest suggested).
    """
    known = {s.server for s in specs if s.server is not None}
    unknown = [s for s in dict.fromkeys(servers or ()) if s not in known]
    if unknown:
        closest = closest_names(unknown, known) if known else NO_SERVERS
        raise ValueError(UNKNOWN_ALLOWED_SERVERS_ERROR.format(names=unknown, closest=closest))
    unmatched = [p for p in dict.fromkeys(patterns or ()) if not any(_admits(s, p) for s in specs)]
    names = [p for p in unmatched if not FILTER_WILDCARDS.intersection(p)]
    if names:
        forms = [s.name for s in specs] + [f"{s.server}:{s.name}" for s in specs if s.server]
        closest = closest_names(names, forms)
        raise ValueError(UNKNOWN_ALLOWED_TOOLS_ERROR.format(names=names, closest=closest))
    if unmatched:
        shown = reprlib.repr(sorted(s.name for s in specs))
        warnings.warn(
            UNMATCHED_PATTERNS_WARNING.format(patterns=unmatched, known=shown),
            UserWarning,
            stacklevel=3,
        )


def require_catalog(catalog: Any, where: str, *, extra: str = "") -> ToolCatalog:
    """``catalog`` if it is a :class:`ToolCatalog`, else a ``TypeError`` showing how to build one.

    Every public entry point taking a catalog calls this first, so a list of tools (what
    ``ToolNode`` takes) is answered with the fix, not with an ``AttributeError`` from deep
    inside the package.

    Args:
        catalog: what the caller passed.
        where: the entry point, as the user wrote it (``"SelectTools"``).
        extra: a sentence for this entry point (a one-line alternative it offers).

    Raises:
        TypeError: ``catalog`` is not a ``ToolCatalog``.
    """
    if isinstance(catalog, ToolCatalog):
        return catalog
    if inspect.isawaitable(catalog):
        extra = NOT_AWAITED_HINT + extra
    elif callable(getattr(catalog, "bind_tools", None)):
        extra = MODEL_NOT_CATALOG_HINT + extra
    raise TypeError(NOT_A_CATALOG_ERROR.format(where=where, got=_described(catalog), extra=extra))
