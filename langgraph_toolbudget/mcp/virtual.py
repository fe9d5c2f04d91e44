"""MCP prompts and resources as deferred catalog tools ("virtual tools").

Its one reason to change: which server prompts and resources become tools, and how they answer.

For each loaded server that has prompts, the catalog gets ``<server>__list_prompts``
and ``<server>__get_prompt``; for each that has resources (or resource
templates), ``<server>__list_resources`` and ``<server>__read_resource``. They
are regular catalog tools of the server's category with include mode
``manual``: ``search_tools`` finds them and ``add_tool`` loads them, the budget
never picks them. They call over the catalog's persistent sessions; their
results go through the executor like any tool's, so a large or binary resource
is offloaded (see :mod:`langgraph_toolbudget.execution.offload`).

Key Components:
    - :func:`server_features`: which servers have prompts and resources (asked once, at load).
    - :func:`virtual_tools`: one server's virtual tools (the loader gives them their metadata).
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from mcp import ClientSession, McpError, types
from pydantic import AnyUrl, BaseModel, ConfigDict, Field, ValidationError

from langgraph_toolbudget._stacklevel import user_stacklevel
from langgraph_toolbudget.mcp.errors import (
    READ_TIMEOUT_ERROR,
    TIMED_OUT,
    MCPLoadWarning,
    MCPServerError,
    _is_transport_error,
    is_read_timeout,
)
from langgraph_toolbudget.mcp.names import mcp_tool_name
from langgraph_toolbudget.mcp.runtime import MCPRuntime
from langgraph_toolbudget.mcp.session import before_deadline
from langgraph_toolbudget.mcp.uri_templates import match_template

__all__ = ["ServerFeatures", "VirtualTool", "server_features", "virtual_tools"]

REQUEST_ERROR = "MCP server {server!r} rejected {what}: {reason}. {hint}"
SHADOWED_WARNING = (
    "MCP server {server!r} has prompts or resources, but the names of their tools are taken, "
    "so those tools are left out: {names}."
)


@dataclass(frozen=True)
class ServerFeatures:
    """What a server offers besides tools."""

    prompts: bool = False
    resources: bool = False


MAX_PAGES = 1_000
"""Pages of one list request read at most (the adapters read as many of ``tools/list``): a
server whose ``nextCursor`` never ends holds neither the load nor a call."""
TOO_MANY_PAGES = "it answered {pages:,} pages and still gave a nextCursor, so the list has no end"
FEATURE_LISTS = "prompts/list, resources/list or resources/templates/list"


async def _pages(
    lister: Callable[..., Awaitable[Any]], attr: str
) -> AsyncGenerator[list[Any], None]:
    """The items of each page of a paginated MCP list request, at most :data:`MAX_PAGES`."""
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        if cursor is None:
            page = await lister()
        else:
            page = await lister(params=types.PaginatedRequestParams(cursor=cursor))
        yield getattr(page, attr)
        cursor = page.nextCursor
        if not cursor:
            return
    message = TOO_MANY_PAGES.format(pages=MAX_PAGES)
    raise McpError(types.ErrorData(code=types.INTERNAL_ERROR, message=message))


async def _listed(lister: Callable[..., Awaitable[Any]], attr: str) -> list[Any]:
    """Every item of a paginated MCP list request."""
    return [item async for page in _pages(lister, attr) for item in page]


async def _lists_any(lister: Callable[..., Awaitable[Any]], attr: str) -> bool:
    """Does a paginated MCP list request list anything? (Reads up to its first item's page.)"""
    async with aclosing(_pages(lister, attr)) as pages:
        async for page in pages:
            if page:
                return True
    return False


async def _features(runtime: MCPRuntime, server: str, deadline: float) -> ServerFeatures:
    async def ask(session: ClientSession) -> ServerFeatures:
        init = runtime.init_result(server)
        caps = init.capabilities if init is not None else None
        prompts = resources = False
        if caps is not None and caps.prompts is not None:
            prompts = await _lists_any(session.list_prompts, "prompts")
        if caps is not None and caps.resources is not None:
            resources = await _lists_any(session.list_resources, "resources") or (
                await _lists_any(session.list_resource_templates, "resourceTemplates")
            )
        return ServerFeatures(prompts, resources)

    request = runtime.asession_request(server, ask)
    return await before_deadline(request, deadline, FEATURE_LISTS, runtime.connect_timeout_s)


async def server_features(
    runtime: MCPRuntime, servers: Sequence[str], *, deadline: float
) -> dict[str, ServerFeatures]:
    """Which of ``servers`` have prompts and resources, each server asked by ``deadline``.

    A server that rejects these requests has neither. A server that does not answer them
    in time, or whose connection fails, is left out of the answer and of the catalog, as a
    server that does not answer ``tools/list`` is (:meth:`MCPRuntime.aleave_out`).

    Args:
        runtime: the runtime whose sessions to ask.
        servers: the loaded servers.
        deadline: ``time.monotonic()`` by which each server must have answered all its list
            requests (the end of its load's ``connect_timeout_s``).

    Returns:
        server -> its features, for the servers that answered.
    """
    answers = await asyncio.gather(
        *(_features(runtime, s, deadline) for s in servers), return_exceptions=True
    )
    features: dict[str, ServerFeatures] = {}
    for server, answer in zip(servers, answers, strict=True):
        if isinstance(answer, ServerFeatures):
            features[server] = answer
        elif isinstance(answer, McpError) and not _is_transport_error(answer):
            features[server] = ServerFeatures()
        else:
            await runtime.aleave_out(server, answer)
    return features


# --- the tools ----------------------------------------------------------------------------


class _NoArgs(BaseModel):
    pass


class _GetPromptArgs(BaseModel):
    name: str = Field(description="The prompt's name (from list_prompts).")
    arguments: dict[str, str] = Field(
        default_factory=dict, description="The prompt's arguments, name -> value."
    )


class _ReadResourceArgs(BaseModel):
    uri: str = Field(description="The resource's URI (from list_resources).")


def _dump(items: list[Any]) -> str:
    return json.dumps(
        [i.model_dump(mode="json", exclude_none=True) for i in items], ensure_ascii=False, indent=1
    )


def _content_text(content: Any) -> str:
    if isinstance(content, types.TextContent):
        return content.text
    if isinstance(content, types.EmbeddedResource) and isinstance(
        content.resource, types.TextResourceContents
    ):
        return content.resource.text
    return json.dumps(content.model_dump(mode="json", exclude_none=True), ensure_ascii=False)


async def _list_prompts(session: ClientSession, args: dict[str, Any]) -> str:
    return _dump(await _listed(session.list_prompts, "prompts"))


async def _get_prompt(session: ClientSession, args: dict[str, Any]) -> str:
    result = await session.get_prompt(args["name"], args.get("arguments") or {})
    lines = [f"{m.role}: {_content_text(m.content)}" for m in result.messages]
    head = f"{result.description}\n" if result.description else ""
    return head + "\n".join(lines)


async def _list_resources(session: ClientSession, args: dict[str, Any]) -> str:
    resources = await _listed(session.list_resources, "resources")
    templates = await _listed(session.list_resource_templates, "resourceTemplates")
    return json.dumps(
        {"resources": json.loads(_dump(resources)), "templates": json.loads(_dump(templates))},
        ensure_ascii=False,
        indent=1,
    )


UNLISTED_URI_ERROR = (
    "{uri} is not a resource this server lists, nor a URI of one of its resource templates, "
    "so it was not read"
)
INVALID_URI_ERROR = "{uri!r} is not a valid URI ({reason}), so it was not read"
NOT_NORMAL_URI_ERROR = (
    "{uri!r} is not written in normal form (it would be sent as {sent!r}), so it was not read; "
    "write the URI in that form"
)


def _refused(message: str) -> McpError:
    return McpError(types.ErrorData(code=types.INVALID_PARAMS, message=message))


async def _read_resource(session: ClientSession, args: dict[str, Any]) -> str:
    uri = str(args["uri"])
    # The URI is checked as it is sent: AnyUrl normalises it (resolves dot segments, also
    # escaped ones, drops tabs), so "file:///docs/%2e%2e" is sent as "file:///".
    try:
        url = AnyUrl(uri)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"]
        raise _refused(INVALID_URI_ERROR.format(uri=uri, reason=reason)) from None
    sent = str(url)
    listed = {str(r.uri) for r in await _listed(session.list_resources, "resources")}
    if sent not in listed:
        templates = await _listed(session.list_resource_templates, "resourceTemplates")
        match = match_template(sent, [t.uriTemplate for t in templates])
        if match.template is None:
            written = repr(uri) if sent == uri else f"{uri!r} (normalised: {sent!r})"
            raise _refused(UNLISTED_URI_ERROR.format(uri=written) + match.note)
    if sent != uri:  # a URI it names, written in another form: the model learns which
        raise _refused(NOT_NORMAL_URI_ERROR.format(uri=uri, sent=sent))
    result = await session.read_resource(url)
    parts = [
        c.text
        if isinstance(c, types.TextResourceContents)
        else json.dumps(c.model_dump(mode="json", exclude_none=True), ensure_ascii=False)
        for c in result.contents
    ]
    return "\n".join(parts)


_KINDS: dict[str, tuple[str, type[BaseModel], Callable[..., Awaitable[str]], str]] = {
    "list_prompts": ("List the prompts of MCP server {server}", _NoArgs, _list_prompts, ""),
    "get_prompt": (
        "Get a prompt of MCP server {server} by name, filled with its arguments",
        _GetPromptArgs,
        _get_prompt,
        "List the prompts and their arguments with {prefix}list_prompts.",
    ),
    "list_resources": (
        "List the resources (documents, files, data) and resource templates of MCP server {server}",
        _NoArgs,
        _list_resources,
        "",
    ),
    "read_resource": (
        "Read a resource of MCP server {server} by URI",
        _ReadResourceArgs,
        _read_resource,
        "List the resources and their URIs with {prefix}list_resources.",
    ),
}


def _handle_request_error(error: ToolException) -> str:
    """A prompt/resource tool's ``handle_tool_error`` under the loader's
    ``handle_tool_errors=True``: the server's refusal of the request becomes the tool's error
    answer (as an MCP tool's ``isError`` result does); a failure of the server or the
    connection (:class:`MCPServerError`: down, died, timed out, closed) is raised, as an MCP
    tool raises it. Under ``handle_tool_errors=False`` the tools have no handler: the refusal
    is raised as a :class:`ToolException`, as an MCP tool's ``isError`` result is.
    """
    if isinstance(error, MCPServerError):
        raise error
    return str(error)


class VirtualTool(BaseTool):
    """One prompt/resource request of an MCP server, as a tool over the catalog's session.

    Attributes:
        server: the server's name in the catalog.
        kind: ``list_prompts``, ``get_prompt``, ``list_resources`` or ``read_resource``.
        timeout_s: bound on a call, sync or async, wherever it runs (under the executor
            its own timeout, the same, applies too).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    server: str
    kind: str
    timeout_s: float | None = None
    mcp_runtime: MCPRuntime = Field(exclude=True, repr=False)

    def _request(self, args: dict[str, Any]) -> Callable[[ClientSession], Awaitable[str]]:
        do = _KINDS[self.kind][2]

        async def request(session: ClientSession) -> str:
            try:
                return await do(session, args)
            except McpError as exc:
                if _is_transport_error(exc):  # not the server's answer: the runtime names it
                    raise
                if is_read_timeout(exc):  # the session's own read timeout, not a refusal
                    message = READ_TIMEOUT_ERROR.format(
                        tool=self.name, server=self.server, cause=f"McpError: {exc.error.message}"
                    )
                    raise MCPServerError(
                        message, server=self.server, tool=self.name, advice=TIMED_OUT
                    ) from None
                hint = _KINDS[self.kind][3].format(prefix=mcp_tool_name(self.server, ""))
                what = f"{self.kind} {json.dumps(args, ensure_ascii=False)}"
                reason = exc.error.message.rstrip(".")
                message = REQUEST_ERROR.format(
                    server=self.server, what=what, reason=reason, hint=hint
                )
                raise ToolException(message.rstrip()) from None

        return request

    def _run(self, *args: Any, **kwargs: Any) -> str:
        return self.mcp_runtime.session_request(
            self.server, self._request(kwargs), tool=self.name, timeout_s=self.timeout_s
        )

    async def _arun(self, *args: Any, **kwargs: Any) -> str:
        request = self._request(kwargs)
        return await self.mcp_runtime.asession_request(
            self.server, request, tool=self.name, timeout_s=self.timeout_s
        )


def virtual_tools(
    runtime: MCPRuntime,
    server: str,
    features: ServerFeatures,
    *,
    taken: Mapping[str, str],
    handle_tool_errors: bool = True,
) -> list[VirtualTool]:
    """The prompt/resource tools of one server, those whose names ``taken`` does not hold.

    A tool that already has the name keeps it (a tool of the server's own, a local tool):
    the virtual tool is left out, with an :class:`MCPLoadWarning` naming the server (two
    servers of one prefix, ``my.docs`` and ``my_docs``, that both have such tools are refused
    before this). The tools'
    metadata (``manual``, the server's defaults, ``timeout_s``) is the loader's.

    Args:
        runtime: the runtime they call through.
        server: the server's name.
        features: what the server offers besides tools.
        taken: the catalog's names so far -> what has each (for the warning: "a local tool").
        handle_tool_errors: the loader's option: the server's refusal of a request is the
            tool's error answer (True) or raised as a :class:`ToolException` (False), as an
            MCP tool's ``isError`` result is.

    Returns:
        ``<server>__list_prompts`` and ``<server>__get_prompt`` if it has prompts,
        ``<server>__list_resources`` and ``<server>__read_resource`` if it has resources.
    """
    kinds = [
        k
        for k in _KINDS
        if ("prompt" in k and features.prompts) or ("resource" in k and features.resources)
    ]
    tools = [
        VirtualTool(
            name=mcp_tool_name(server, kind),
            description=_KINDS[kind][0].format(server=server) + ".",
            args_schema=_KINDS[kind][1],
            metadata={"server": server, "mcp_virtual": kind},
            server=server,
            kind=kind,
            mcp_runtime=runtime,
            handle_tool_error=_handle_request_error if handle_tool_errors else False,
        )
        for kind in kinds
    ]
    shadowed = [f"{t.name!r} ({taken[t.name]})" for t in tools if t.name in taken]
    if shadowed:
        message = SHADOWED_WARNING.format(server=server, names="; ".join(shadowed))
        warnings.warn(message, MCPLoadWarning, stacklevel=user_stacklevel())
    return [t for t in tools if t.name not in taken]
