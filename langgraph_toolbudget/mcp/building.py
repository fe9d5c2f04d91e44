"""Turning the tools listed by MCP servers into a catalog: names, metadata, categories, filters.

Key Components:
    - :func:`mcp_tool_name`: the prefixed catalog name of an MCP tool.
    - :func:`build_catalog`: the catalog tools, their metadata (server defaults, tool
      overrides, read-only hints, the default timeout), categories and filters, and the
      servers' descriptions, from what each server listed.
"""

from __future__ import annotations

import fnmatch
import glob
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool
from mcp import types

from langgraph_toolbudget._compat_mcp import _handle_mcp_tool_error
from langgraph_toolbudget.core.catalog import IncludeMode, ToolCatalog
from langgraph_toolbudget.core.spec import OUTPUT_SCHEMA_KEY
from langgraph_toolbudget.mcp.catalog import MCPToolCatalog
from langgraph_toolbudget.mcp.runtime import MCPRuntime, MCPServerInfo
from langgraph_toolbudget.mcp.tool import MCPCatalogTool

_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def mcp_tool_name(server: str, name: str) -> str:
    """The prefixed catalog name of an MCP tool: ``<server>__<name>``.

    Characters of the server name outside ``[A-Za-z0-9_-]`` become ``_``.

    Args:
        server: the server's name in the catalog.
        name: the tool's MCP name.

    Returns:
        The prefixed name, e.g. ``mcp_tool_name("math", "search") == "math__search"``.
    """
    return f"{_SAFE.sub('_', server)}__{name}"


def _resolve(
    key: str, names: Mapping[tuple[str, str], str], final: set[str]
) -> tuple[str | None, str | None]:
    """Map ``name`` or ``server:mcp_name`` to a catalog name; also return the server named."""
    if key in final:
        return key, None
    server, sep, mcp_name = key.rpartition(":")
    if sep and (server, mcp_name) in names:
        return names[(server, mcp_name)], server
    return None, server if sep else None


def _description(server: str, init: types.InitializeResult | None, given: Mapping[str, str]) -> str:
    if server in given:
        return given[server]
    if init is None:
        return ""
    if init.instructions:
        return init.instructions.strip()
    info = init.serverInfo
    if getattr(info, "title", None):
        return str(info.title)
    if info.name and info.name.lower() != server.lower():
        return info.name
    return ""


def _matches(patterns: Sequence[str], server: str, name: str, mcp_name: str) -> bool:
    for pattern in patterns:
        pat_server, sep, pat_name = pattern.rpartition(":")
        if sep and pat_server != server:
            continue
        if fnmatch.fnmatchcase(name, pat_name) or fnmatch.fnmatchcase(mcp_name, pat_name):
            return True
    return False


def build_catalog(
    runtime: MCPRuntime,
    loaded: Mapping[str, list[types.Tool]],
    *,
    catalog_cls: type[MCPToolCatalog],
    server_descriptions: Mapping[str, str],
    server_defaults: Mapping[str, Mapping[str, Any]],
    tool_metadata: Mapping[str, Mapping[str, Any]],
    categories: Mapping[str, Sequence[str]] | None,
    category_descriptions: Mapping[str, str],
    allowed_servers: Sequence[str] | None,
    allowed_tools: Sequence[str] | None,
    default_include: IncludeMode,
    prefix: bool,
    handle_tool_errors: bool,
    default_timeout_s: float | None = None,
) -> MCPToolCatalog:
    """Turn the listed MCP tools into catalog tools, metadata, categories and filters."""
    counts = Counter(t.name for tools in loaded.values() for t in tools)
    names: dict[tuple[str, str], str] = {}
    for server in runtime.connections:
        for t in loaded.get(server, []):
            collide = prefix or counts[t.name] > 1
            names[(server, t.name)] = mcp_tool_name(server, t.name) if collide else t.name
    final = set(names.values())
    partial = bool(runtime.load_errors)

    def resolve(key: str, what: str) -> str | None:
        name, server = _resolve(key, names, final)
        if name is not None:
            return name
        if server in runtime.load_errors or (server is None and partial):
            return None  # a tool of a server that failed to load: reported in load_errors
        raise ValueError(
            f"{what} names {key!r}, which is not a tool of this catalog. "
            f"Use a catalog name or 'server:mcp_name'. Known tools include {sorted(final)[:10]}."
        )

    overrides: dict[str, dict[str, Any]] = {}
    for key, override in tool_metadata.items():
        name = resolve(key, "tool_metadata")
        if name is None:
            continue
        if "server" in override:
            raise ValueError(
                f"tool_metadata[{key!r}] sets 'server'; an MCP tool's server is the one it "
                "was loaded from."
            )
        overrides.setdefault(name, {}).update(override)

    cats: dict[str, list[str]] | None = None
    if categories is not None:
        cats = {}
        for cat, members in categories.items():
            if isinstance(members, str):
                raise TypeError(
                    f"categories[{cat!r}] must be a list of tool names, got the string {members!r}."
                )
            cats[cat] = [n for m in members if (n := resolve(m, f"categories[{cat!r}]"))]

    tools: list[BaseTool] = []
    metadata: dict[str, dict[str, Any]] = {}
    kept: list[str] = []
    for server in runtime.connections:
        if server not in loaded:
            continue
        init = runtime.init_result(server)
        info_tools: dict[str, str] = {}
        for t in loaded[server]:
            name = names[(server, t.name)]
            info_tools[name] = t.name
            annotations = t.annotations.model_dump() if t.annotations is not None else {}
            meta: dict[str, Any] = {"include": default_include, "concurrency_group": server}
            if default_timeout_s is not None:
                meta["timeout_s"] = default_timeout_s
            if t.annotations is not None and t.annotations.readOnlyHint is not None:
                meta["is_pure"] = t.annotations.readOnlyHint
            meta.update(server_defaults.get(server, {}))
            meta.update(overrides.get(name, {}))
            metadata[name] = meta
            tool_meta: dict[str, Any] = {**annotations, "server": server, "mcp_tool_name": t.name}
            if t.meta is not None:
                tool_meta["_meta"] = t.meta
            if t.outputSchema is not None:  # its fields are searched (ToolSpec.output_fields)
                tool_meta[OUTPUT_SCHEMA_KEY] = t.outputSchema
            timeout = meta.get("timeout_s")
            tools.append(
                MCPCatalogTool(
                    name=name,
                    description=t.description or t.title or "",
                    args_schema=t.inputSchema,
                    metadata=tool_meta,
                    server=server,
                    mcp_name=t.name,
                    timeout_s=timeout if isinstance(timeout, int | float) else None,
                    mcp_runtime=runtime,
                    # Content blocks (TypedDicts), which BaseTool's annotation calls dicts.
                    handle_tool_error=_handle_mcp_tool_error if handle_tool_errors else False,  # type: ignore[arg-type]
                )
            )
            admitted = (allowed_servers is None and allowed_tools is None) or (
                (allowed_servers is not None and server in allowed_servers)
                or (allowed_tools is not None and _matches(allowed_tools, server, name, t.name))
            )
            if admitted:
                kept.append(name)
        runtime.servers[server] = MCPServerInfo(
            name=server,
            description=_description(server, init, server_descriptions),
            instructions=init.instructions if init else None,
            server_name=init.serverInfo.name if init else None,
            server_title=getattr(init.serverInfo, "title", None) if init else None,
            server_version=init.serverInfo.version if init else None,
            transport=str(runtime.connections[server].get("transport", "")),
            tools=info_tools,
        )

    member_cats = {c for c, m in (cats or {}).items() if m}
    in_cats = {n for m in (cats or {}).values() for n in m}
    server_cats = {s for s in loaded if any(names[(s, t.name)] not in in_cats for t in loaded[s])}
    descriptions = {
        s: runtime.servers[s].description for s in server_cats if runtime.servers[s].description
    }
    descriptions.update({c: d for c, d in category_descriptions.items() if c in member_cats})
    unknown_desc = sorted(set(category_descriptions) - member_cats - server_cats)
    if unknown_desc and not partial:
        raise ValueError(
            f"category_descriptions names {unknown_desc}, which are not categories of this "
            f"catalog. Categories: {sorted(member_cats | server_cats)}."
        )
    filtering = allowed_servers is not None or allowed_tools is not None
    # from_tools validates and resolves metadata, categories and filters; the MCP
    # catalog then takes its specs (disabled ones too), descriptions and filtered names.
    plain = ToolCatalog.from_tools(
        tools,
        categories=cats,
        category_descriptions=descriptions,
        tool_metadata=metadata,
        allowed_tools=[glob.escape(n) for n in kept] if filtering else None,
        default_include=default_include,
    )
    return catalog_cls(
        [spec for t in tools if (spec := plain.get(t.name)) is not None],
        runtime=runtime,
        category_descriptions=plain.category_descriptions,
        filtered=[t.name for t in tools if plain.is_filtered(t.name)],
    )
