"""The tool-context operations, one implementation for every face.

Its one reason to change: what each tool-context operation does to a thread.

The write operations return **state updates** (use them from a node, with
``update_context(graph, config, ...)`` on any checkpointer (``graph.update_state`` loses
them on a thread that has never run), or with ``client.threads.update_state(thread_id, ...,
as_node=...)`` on a LangGraph server); the read
operations take the catalog and a thread's state values and return plain data.
The model's tools (:mod:`langgraph_toolbudget.execution.context_tools`), the MCP
server (:mod:`langgraph_toolbudget.context_server`) and the CLI
(:mod:`langgraph_toolbudget.cli`) are thin layers over these functions.

Key Components:
    - :func:`include_tools`, :func:`exclude_tools`: include or exclude tools and
      whole servers in a thread.
    - :func:`set_include_mode`: a tool's or a server's include mode in a thread.
    - :func:`list_tools`, :func:`get_tool`, :func:`list_servers`,
      :func:`get_server`, :func:`context_summary`: what a thread's context holds.

Typical Usage:
    ```python
    from langgraph_toolbudget import exclude_tools, include_tools, update_context
    update_context(graph, config, exclude_tools(tools=["delete_file"], servers=["slack"]))
    update_context(graph, config, include_tools(servers=["slack"]))
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.core.catalog_checks import closest_names
from langgraph_toolbudget.core.context import (
    INCLUDE_MODES,
    SERVER_MODES_FIELD,
    SERVERS_FIELD,
    TOOL_MODES_FIELD,
    TOOLS_FIELD,
    SessionContext,
    server_of,
)
from langgraph_toolbudget.core.spec import IncludeMode, ToolSpec
from langgraph_toolbudget.core.working_set import state_get

__all__ = [
    "context_summary",
    "exclude_tools",
    "get_server",
    "get_tool",
    "include_tools",
    "list_servers",
    "list_tools",
    "servers",
    "set_include_mode",
]

NAMES_TYPE_ERROR = "{argument} must be a list of {what}, got {value!r}; pass [{hint}]."
NOTHING_NAMED_ERROR = "{op} needs tools=[...] and/or servers=[...]; nothing was named."
UNKNOWN_TOOLS_ERROR = "{names} are not tools of this catalog. Closest tools: {closest}."
UNKNOWN_SERVERS_ERROR = "{names} are not servers of this catalog. Servers: {known}."
BAD_MODE_ERROR = "mode must be one of {modes} (or None to reset), got {mode!r}."
SHARED_ALIAS_ERROR = (
    "{tool!r} is excluded in this thread under {alias!r}, its other name, which also fits "
    "{others} (an exclusion under a name that fits several tools excludes them all), so "
    "including {tool!r} would include {others} too; nothing was changed. First exclude "
    "{others} under {their} own name{s} (exclude_tools(tools={other_list})), then include "
    "{tool!r}; or include them together (include_tools(tools={together}))."
)
NAME_ALIAS_ERROR = (
    "{tool!r} is excluded in this thread under {alias!r}, which is both the name of another "
    "tool and this tool's other name (its name where no other tool had it). A thread's "
    "exclusions are names only, so this one cannot tell the two apart and excludes both; including "
    "{tool!r} would include {others} too, so nothing was changed. To use {tool!r}, include "
    "both (include_tools(tools={together})); while {alias!r} is another tool's name, {tool!r} "
    "cannot be included alone in a thread that excluded {alias!r}."
)


def _names(argument: str, value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise TypeError(
            NAMES_TYPE_ERROR.format(argument=argument, what=what, value=value, hint=repr(value))
        )
    bad = [v for v in value if not isinstance(v, str) or not v]
    if bad:
        raise TypeError(
            NAMES_TYPE_ERROR.format(argument=argument, what=what, value=bad[0], hint="'name'")
        )
    return list(dict.fromkeys(value))


def servers(catalog: ToolCatalog) -> dict[str, list[ToolSpec]]:
    """Server -> its tools, in catalog order (a tool without a server: its first category)."""
    out: dict[str, list[ToolSpec]] = {}
    for spec in require_catalog(catalog, "servers").specs:
        out.setdefault(server_of(spec), []).append(spec)
    return out


def check_names(
    catalog: ToolCatalog, tools: Sequence[str] = (), server_names: Sequence[str] = ()
) -> None:
    """Raise ValueError naming the unknown tools or servers (with the closest real names)."""
    unknown = [t for t in tools if t not in catalog]
    if unknown:
        filtered = [t for t in unknown if catalog.is_filtered(t)]
        closest = closest_names(unknown, catalog.tool_names, filtered=filtered)
        raise ValueError(UNKNOWN_TOOLS_ERROR.format(names=unknown, closest=closest))
    known = servers(catalog)
    missing = [s for s in server_names if s not in known]
    if missing:
        raise ValueError(UNKNOWN_SERVERS_ERROR.format(names=missing, known=sorted(known)))


def knows(catalogs: Sequence[ToolCatalog], name: str, *, server: bool = False) -> bool:
    """Does one of ``catalogs`` have the tool ``name`` (by its name or another name of it,
    :attr:`ToolSpec.aliases`), or with ``server`` the server ``name``, in any runtime mode
    (a ``draft`` tool too): a name a thread's tool context may hold."""
    listed = [catalog.in_runtime_mode("debug") for catalog in catalogs]
    if server:
        return any(c.tools_of(name) for c in listed)
    return any(c.get(name) is not None or c.aliased(name) for c in listed)


def of_failed_server(catalogs: Sequence[ToolCatalog], name: str, *, server: bool = False) -> bool:
    """Is ``name`` a server of ``catalogs`` that failed to load, or a tool of one by its
    prefix? Its tools are not listed now, and an exclusion written for when it is back is no
    typo."""
    if server:
        return any(name in c.failed_servers for c in catalogs)
    # `notes__` alone is a prefix, no tool
    return not name.endswith("__") and any(c.failed_server_of(name) is not None for c in catalogs)


def closest_context_names(
    catalogs: Sequence[ToolCatalog], tools: Sequence[str] = (), server_names: Sequence[str] = ()
) -> str:
    """For each tool and server name no catalog of ``catalogs`` has, the closest real names
    (a tool the catalog's filters removed is said so), as one phrase."""
    listed = [catalog.in_runtime_mode("debug") for catalog in catalogs]
    known_tools = [n for c in listed for n in c.tool_names]
    known_servers = [s for c in listed for s in servers(c)]
    filtered = [n for n in tools if any(c.is_filtered(n) for c in listed)]
    parts = (
        closest_names(dict.fromkeys(tools), known_tools, filtered=filtered) if tools else "",
        closest_names(dict.fromkeys(server_names), known_servers) if server_names else "",
    )
    return "; ".join(part for part in parts if part)


def check_context_names(
    catalog: ToolCatalog, tools: Sequence[str] = (), server_names: Sequence[str] = ()
) -> None:
    """Raise ValueError naming the tools or servers of a context update that ``catalog``
    lacks, with the closest real names; as ``update_context`` checks an update without
    ``catalog=``: a draft tool, a tool's other name and a name of a server that failed to
    load are taken."""
    catalogs = [catalog]
    unknown = [t for t in tools if not knows(catalogs, t) and not of_failed_server(catalogs, t)]
    if unknown:
        closest = closest_context_names(catalogs, unknown)
        raise ValueError(UNKNOWN_TOOLS_ERROR.format(names=unknown, closest=closest))
    missing = [
        s
        for s in server_names
        if not knows(catalogs, s, server=True) and not of_failed_server(catalogs, s, server=True)
    ]
    if missing:
        known = sorted(servers(catalog.in_runtime_mode("debug")))
        raise ValueError(UNKNOWN_SERVERS_ERROR.format(names=missing, known=known))


def _lifted_aliases(
    catalog: ToolCatalog, names: Sequence[str], state: Any = None
) -> dict[str, None]:
    """The aliases whose exclusion including ``names`` lifts (each mapped to None, which
    removes it from the thread's ``context_tools``).

    An exclusion under a tool's alias (:attr:`ToolSpec.aliases`) excludes the tool, so its
    inclusion lifts it: with ``state``, each alias the thread excluded it under; without,
    each alias that fits no other tool (an entry there can only be this tool's). An alias
    that also fits a tool not in ``names`` (its name or one of its aliases) is never lifted
    silently: with ``state``, its exclusion raises if lifting it would include that tool
    (excluded by this alias alone); without, it stays.

    Raises:
        ValueError: with ``state``, a tool excluded under an alias that also fits another
            tool (the message names both, and how to include one or both).
    """
    ctx = SessionContext.from_state(state) if state is not None else None
    everyone = catalog.in_runtime_mode("debug").specs  # drafts too: an exclusion covers them
    lifted: dict[str, None] = {}
    for name in names:
        spec = catalog.get(name)
        for alias in spec.aliases if spec is not None else ():
            if ctx is not None and ctx.tools.get(alias) != "exclude":
                continue
            fits = [s for s in everyone if s.name not in names and alias in (s.name, *s.aliases)]
            if ctx is not None:  # those that lifting it would include: excluded by it alone
                after = ctx.merged({TOOLS_FIELD: {alias: None}})
                fits = [s for s in fits if after.decision(s) != "exclude"]
            others = [s.name for s in fits]
            if not others:
                lifted[alias] = None
            elif ctx is not None and alias in others:  # another tool's own name: no way apart
                raise ValueError(
                    NAME_ALIAS_ERROR.format(
                        tool=name,
                        alias=alias,
                        others=", ".join(map(repr, others)),
                        together=[*names, *others],
                    )
                )
            elif ctx is not None:
                raise ValueError(
                    SHARED_ALIAS_ERROR.format(
                        tool=name,
                        alias=alias,
                        others=", ".join(map(repr, others)),
                        together=[*names, *others],
                        their="their" if len(others) > 1 else "its",
                        s="s" if len(others) > 1 else "",
                        other_list=others,
                    )
                )
    return lifted


def _decide(
    op: str,
    decision: str,
    tools: Sequence[str] | None,
    servers_: Sequence[str] | None,
    catalog: ToolCatalog | None,
    state: Any = None,
) -> dict[str, Any]:
    names = _names("tools", tools, "tool names")
    groups = _names("servers", servers_, "server names")
    if not names and not groups:
        raise ValueError(NOTHING_NAMED_ERROR.format(op=op))
    lifted: dict[str, None] = {}
    if catalog is not None:
        check_context_names(require_catalog(catalog, op), names, groups)
        if decision == "include":
            lifted = _lifted_aliases(catalog, names, state)
    update: dict[str, Any] = {}
    if names:
        update[TOOLS_FIELD] = {**dict.fromkeys(names, decision)}
        for alias in lifted:  # a name given wins over an alias of another one
            update[TOOLS_FIELD].setdefault(alias, None)
    if groups:
        update[SERVERS_FIELD] = dict.fromkeys(groups, decision)
    return update


def include_tools(
    tools: Sequence[str] | None = None,
    servers: Sequence[str] | None = None,
    *,
    catalog: ToolCatalog | None = None,
    state: Any = None,
) -> dict[str, Any]:
    """A state update that includes tools and whole servers in the thread's context.

    Included tools are visible from the next model call on, outside the budget
    (a ``manual`` tool becomes usable this way). Including a tool the thread
    excluded undoes the exclusion; a tool of an excluded server stays excluded
    until the server is included. This is the user's power: the model's
    ``include_tool`` / ``include_tool_server`` refuse an excluded tool or server.

    With ``catalog``, it also lifts the tool's exclusion under its aliases (an MCP tool's
    name with or without its server's prefix: ``notes__search`` excluded, then included
    as ``search``), but never one that would include another tool as well: an alias that
    also fits another tool (``search`` once two servers list one) is lifted only with
    ``state``, which says whether the thread excluded under it, and then refused with the
    way out (include both, or exclude the other by its own name first). Without ``state``
    such an exclusion stays: the tool stays excluded (``list_tools`` shows it).

    Args:
        tools: tool names.
        servers: server names (a tool without a server is grouped under its first category).
        catalog: when given, the names are checked against it.
        state: the thread's state values (``graph.get_state(config).values``), with
            ``catalog``: its exclusions under the tools' aliases are checked and lifted.

    Returns:
        The update: ``{"context_tools": {...}}`` for the tools named, ``{"context_servers":
        {...}}`` for the servers (only the fields named), to apply with
        :func:`~langgraph_toolbudget.update_context` (``graph.update_state`` loses it on a
        thread that has never run), or to return from a node.

    Raises:
        TypeError: a name list that is a string or holds non-strings.
        ValueError: nothing named; with ``catalog``, an unknown tool or server; with
            ``catalog`` and ``state``, a tool excluded under an alias that also fits a
            tool not included with it (the message names both).

    Example:
        ```python
        update_context(graph, config, include_tools(tools=["read_file"], servers=["github"]))
        ```
    """
    return _decide("include_tools", "include", tools, servers, catalog, state)


def exclude_tools(
    tools: Sequence[str] | None = None,
    servers: Sequence[str] | None = None,
    *,
    catalog: ToolCatalog | None = None,
) -> dict[str, Any]:
    """A state update that excludes tools and whole servers from the thread's context.

    An excluded tool is never visible, searched, selected or run in the
    thread, whatever the budget or the model asks; a call to it gets an error
    saying it was excluded and that only the user can include it again
    (:func:`include_tools`, the CLI, the MCP context server: never the model's tools).

    Args, Returns, Raises: as :func:`include_tools` (without ``state``: an exclusion is
    written under the names given).

    Example:
        ```python
        update_context(graph, config, exclude_tools(tools=["delete_file"], servers=["slack"]))
        ```
    """
    return _decide("exclude_tools", "exclude", tools, servers, catalog)


def set_include_mode(
    mode: IncludeMode | None,
    tools: Sequence[str] | None = None,
    servers: Sequence[str] | None = None,
    *,
    catalog: ToolCatalog | None = None,
) -> dict[str, Any]:
    """A state update that sets the include mode of tools or servers in this thread.

    A thread's mode wins over the catalog's: thread tool mode -> thread server
    mode -> the catalog's (tool -> server -> catalog default). ``None`` removes
    the thread's setting.

    Args:
        mode: ``"always"``, ``"manual"``, ``"agent"`` or None.
        tools: tool names.
        servers: server names.
        catalog: when given, the names are checked against it.

    Returns:
        The update: ``{"context_tool_modes": {...}}`` for the tools named,
        ``{"context_server_modes": {...}}`` for the servers (only the fields named), to
        apply with :func:`~langgraph_toolbudget.update_context`.

    Raises:
        TypeError: a mode that is not a string (nor None); a name list that is a string or
            holds non-strings.
        ValueError: an unknown mode; nothing named; with ``catalog``, unknown names.
    """
    if mode is not None and not isinstance(mode, str):
        raise TypeError(BAD_MODE_ERROR.format(modes=INCLUDE_MODES, mode=mode))
    if mode is not None and mode not in INCLUDE_MODES:
        raise ValueError(BAD_MODE_ERROR.format(modes=INCLUDE_MODES, mode=mode))
    names = _names("tools", tools, "tool names")
    groups = _names("servers", servers, "server names")
    if not names and not groups:
        raise ValueError(NOTHING_NAMED_ERROR.format(op="set_include_mode"))
    if catalog is not None:
        check_context_names(require_catalog(catalog, "set_include_mode"), names, groups)
    update: dict[str, Any] = {}
    if names:
        update[TOOL_MODES_FIELD] = dict.fromkeys(names, mode)
    if groups:
        update[SERVER_MODES_FIELD] = dict.fromkeys(groups, mode)
    return update


# --- reading a thread's context ------------------------------------------------------------


def _visible(state: Any) -> set[str]:
    return {n for n in state_get(state, "selected_tools", None) or [] if isinstance(n, str)}


def _tool_row(spec: ToolSpec, ctx: SessionContext, visible: set[str]) -> dict[str, Any]:
    decision = ctx.decision(spec)
    excluded = decision == "exclude"
    shown = not excluded and (ctx.in_context(spec) or spec.name in visible)
    return {
        "name": spec.name,
        "server": server_of(spec),
        "mode": ctx.mode(spec),
        "catalog_mode": spec.include,
        "context": decision or ("always" if ctx.mode(spec) == "always" else None),
        "in_context": shown,
        "excluded": excluded,
    }


def list_tools(
    catalog: ToolCatalog, state: Any = None, *, server: str | None = None
) -> list[dict[str, Any]]:
    """Every tool with its context indicators in a thread, in catalog order.

    Args:
        catalog: the catalog.
        state: the thread's state values (None: a new thread).
        server: only this server's tools.

    Returns:
        ``{"name", "server", "mode", "catalog_mode", "context", "in_context",
        "excluded"}`` per tool: ``mode`` is the effective include mode in the
        thread, ``context`` the thread's decision (``include``/``exclude``,
        ``always``, or None), ``in_context`` whether the model sees it now (or
        from the first turn, for ``always`` and included tools).

    Raises:
        ValueError: an unknown ``server``.
    """
    catalog = require_catalog(catalog, "list_tools")
    if server is not None:
        check_names(catalog, (), [server])
    ctx = SessionContext.from_state(state or {})
    visible = _visible(state or {})
    rows = [_tool_row(s, ctx, visible) for s in catalog.specs]
    return [r for r in rows if server is None or r["server"] == server]


def get_tool(catalog: ToolCatalog, state: Any, name: str) -> dict[str, Any]:
    """One tool's row (see :func:`list_tools`) with its description and categories.

    Raises:
        ValueError: not a tool of the catalog (the closest names are suggested).
    """
    catalog = require_catalog(catalog, "get_tool")
    check_names(catalog, [name])
    spec = catalog.get(name)
    assert spec is not None
    ctx = SessionContext.from_state(state or {})
    row = _tool_row(spec, ctx, _visible(state or {}))
    return {**row, "description": spec.description, "categories": list(spec.categories)}


def _count_text(in_context: int, total: int) -> str:
    return f"(all {total} tools)" if in_context == total else f"({in_context} of {total} tools)"


def _server_row(name: str, rows: list[dict[str, Any]], ctx: SessionContext) -> dict[str, Any]:
    count = sum(r["in_context"] for r in rows)
    return {
        "name": name,
        "tools": len(rows),
        "in_context": count,
        "summary": _count_text(count, len(rows)),
        "context": ctx.servers.get(name),
        "mode": ctx.server_modes.get(name),
    }


def list_servers(catalog: ToolCatalog, state: Any = None) -> list[dict[str, Any]]:
    """Every server with its counts in a thread: ``{"name", "tools", "in_context",
    "summary", "context", "mode"}`` (``summary``: "(x of y tools)" or "(all x tools)";
    ``context`` / ``mode``: the thread's decision and mode for the server, or None)."""
    catalog = require_catalog(catalog, "list_servers")
    ctx = SessionContext.from_state(state or {})
    rows = list_tools(catalog, state)
    return [
        _server_row(name, [r for r in rows if r["server"] == name], ctx)
        for name in servers(catalog)
    ]


def get_server(catalog: ToolCatalog, state: Any, name: str) -> dict[str, Any]:
    """One server's row (see :func:`list_servers`) with its tools' rows.

    Raises:
        ValueError: not a server of the catalog.
    """
    catalog = require_catalog(catalog, "get_server")
    check_names(catalog, (), [name])
    ctx = SessionContext.from_state(state or {})
    rows = list_tools(catalog, state, server=name)
    return {**_server_row(name, rows, ctx), "tool_rows": rows}


def context_summary(catalog: ToolCatalog, state: Any = None) -> dict[str, Any]:
    """A thread's tool context grouped by server, as data and as text.

    Args:
        catalog: the app's catalog.
        state: the thread's state values (``graph.get_state(config).values``); None: the
            catalog's own modes, no thread context.

    Returns:
        ``{"servers": [{"name", "summary", "in_context", "tools", "tool_names"}],
        "in_context", "total", "text"}``; ``text`` has one line per server, e.g.
        ``github (3 of 10 tools): create_issue, list_issues, get_issue``.
    """
    catalog = require_catalog(catalog, "context_summary")
    rows = list_tools(catalog, state)
    ctx = SessionContext.from_state(state or {})
    groups = []
    lines = []
    for name in servers(catalog):
        mine = [r for r in rows if r["server"] == name]
        row = _server_row(name, mine, ctx)
        shown = [r["name"] for r in mine if r["in_context"]]
        groups.append({**row, "tool_names": shown})
        lines.append(f"{name} {row['summary']}" + (f": {', '.join(shown)}" if shown else ""))
    in_context = sum(r["in_context"] for r in rows)
    return {
        "servers": groups,
        "in_context": in_context,
        "total": len(rows),
        "text": "\n".join(lines),
    }
