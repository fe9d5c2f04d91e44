"""Loading MCP servers into a catalog: the loader's options, connecting and listing, and
turning what each server listed into catalog tools (names, metadata, categories, filters).

Its one reason to change: how MCP servers become an :class:`MCPToolCatalog`. Sessions and
calls are :mod:`~langgraph_toolbudget.mcp.runtime`'s; prompts and resources as tools are
:mod:`~langgraph_toolbudget.mcp.virtual`'s.

Key Components:
    - :class:`MCPLoadOptions`: every option of the loader, declared and documented once.
    - :func:`load_mcp_catalog`: load the tools of MCP servers into a catalog (async).
    - :func:`load_mcp_catalog_sync`: the same from code without an event loop.
"""

from __future__ import annotations

import asyncio
import fnmatch
import glob
import re
import reprlib
import shlex
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.callbacks import Callbacks
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.sessions import (
    Connection,
    SSEConnection,
    StdioConnection,
    StreamableHttpConnection,
    WebsocketConnection,
)
from mcp import types
from rapidfuzz import process
from typing_extensions import TypedDict, Unpack

from langgraph_toolbudget._compat_mcp import _handle_mcp_tool_error
from langgraph_toolbudget._stacklevel import user_stacklevel
from langgraph_toolbudget.core.catalog import (
    FILTER_WILDCARDS,
    TOOL_METADATA_KEYS,
    UNKNOWN_ALLOWED_TOOLS_ERROR,
    UNMATCHED_PATTERNS_WARNING,
    IncludeMode,
    ToolCatalog,
)
from langgraph_toolbudget.core.catalog_checks import (
    as_tools,
    check_name_list,
    closest_names,
    describe_kind,
    described_category_error,
)
from langgraph_toolbudget.core.limits import clip, safe_repr
from langgraph_toolbudget.core.option_checks import check_count, check_seconds, option_error
from langgraph_toolbudget.core.spec import OUTPUT_SCHEMA_KEY
from langgraph_toolbudget.core.tokens import schema_tokens
from langgraph_toolbudget.execution.builtins import reserved_tool_names
from langgraph_toolbudget.mcp.catalog import MCPToolCatalog
from langgraph_toolbudget.mcp.errors import MCPLoadError, MCPLoadWarning, without_secrets
from langgraph_toolbudget.mcp.names import (
    assign_names,
    check_prefixes,
    mcp_tool_name,
    server_prefix,
)
from langgraph_toolbudget.mcp.runtime import (
    DEFAULT_MAX_ARTIFACT_CHARS,
    HEARTBEAT_OFF,
    NO_BOUND,
    MCPRuntime,
    MCPServerInfo,
)
from langgraph_toolbudget.mcp.tool import MCPCatalogTool
from langgraph_toolbudget.mcp.virtual import (
    ServerFeatures,
    VirtualTool,
    server_features,
    virtual_tools,
)

__all__ = [
    "DEFAULT_MCP_TIMEOUT_S",
    "MAX_DESCRIPTION_CHARS",
    "MAX_INSTRUCTIONS_CHARS",
    "MAX_TOOL_SCHEMA_TOKENS",
    "MCPLoadOptions",
    "UNKNOWN_OPTION_ERROR",
    "load_mcp_catalog",
    "load_mcp_catalog_sync",
]

DEFAULT_MCP_TIMEOUT_S = 60.0
"""``timeout_s`` of an MCP tool that sets none: a call to a frozen server is answered
with a timeout error after this long instead of staying pending forever."""
SERVER_DEFAULT_KEYS = tuple(k for k in TOOL_METADATA_KEYS if k != "server")
MCP_ANNOTATIONS = tuple(
    k for k in types.ToolAnnotations.model_fields if k not in TOOL_METADATA_KEYS
)
"""The annotations MCP defines (``title``, ``readOnlyHint``, ``destructiveHint``,
``idempotentHint``, ``openWorldHint``): copied into a tool's ``metadata`` under their names."""
ANNOTATIONS_KEY = "mcp_annotations"
"""``tool.metadata`` key of a tool's annotations as the server sent them, keys MCP does not
define included: kept there, never read as the catalog's metadata."""

MAX_INSTRUCTIONS_CHARS = 1_000
"""A server's ``initialize`` instructions (or title) are cut to this many characters before
they describe its category: text a third party wrote, shown to the model."""
MAX_DESCRIPTION_CHARS = 2_000
"""A server tool's description is cut to this many characters for the model (bound schemas,
search results); the full text stays in ``tool.metadata["mcp_description"]``."""
MAX_TOOL_SCHEMA_TOKENS = 4_000
"""A server tool whose schema (name, description as cut, input schema) would cost more prompt
tokens than this is left out of the catalog, with a warning naming it."""

RENAMED_WARNING = (
    "MCP server {server!r} lists tools whose names cannot be used as they are, so they were "
    "renamed (calls still use the server's own names): {changes}."
)
LEFT_OUT_WARNING = "MCP server {server!r} lists tools that were left out of the catalog: {tools}."
TOO_LARGE = (
    "{name!r}: its schema costs {tokens:,} prompt tokens, over max_tool_schema_tokens={cap:,} "
    "(raise it to load the tool)"
)
UNREADABLE_SCHEMA = "{name!r}: its input schema cannot be read ({reason})"

UNKNOWN_KEY = (
    "{what} names {key!r}, which is not a tool of this catalog. "
    "Use a catalog name or 'server:mcp_name'. Known tools include {known}."
)
AMBIGUOUS_KEY = (
    "{what} names {key!r}, which is no tool's catalog name here but the name, with or without "
    "its server's prefix, of each of {tools}: name one of them as 'server:mcp_name'."
)
IGNORED_KEYS_WARNING = (
    "MCP servers {failed} failed to load, so these keys were ignored, not refused: {problems} "
    "(a key naming a tool of a server that failed, as 'server:mcp_name' or "
    "'<server>__<name>', is not reported)."
)

CONNECTIONS_EXAMPLE = (
    "{'math': {'transport': 'stdio', 'command': 'python', 'args': ['math_server.py']}, "
    "'docs': {'transport': 'streamable_http', 'url': 'http://localhost:8000/mcp'}}"
)
CONNECTIONS_TYPE_ERROR = (
    "{function} takes a mapping of server name -> connection mapping (or a "
    "MultiServerMCPClient), got {got}.{hint} For example: {example}."
)
CONNECTION_TYPE_ERROR = (
    "{function}: the connection of server {server!r} must be a mapping, got {got}. "
    "For example: {example}."
)
SERVER_NAME_TYPE_ERROR = (
    "{function}: server names must be strings (each names the server's tools' server and "
    "category), got {got}. For example: {example}."
)
NAME_EACH_HINT = (
    " Give each connection a server name: {'server_a': connections[0], ...} (the name is the "
    "server of its tools and their category)."
)
ONE_CONNECTION_ERROR = (
    "{function} takes a mapping of server name -> connection, got what looks like one "
    "connection (its keys: {keys}). Give it a server name: {{'my_server': {{{shape}}}}} (the "
    "name is the server of its tools and their category)."
)
TRANSPORT_NEEDS = {
    "stdio": ("command", "args"),
    "streamable_http": ("url",),
    "streamable-http": ("url",),
    "http": ("url",),
    "sse": ("url",),
    "websocket": ("url",),
}
"""The transports langchain-mcp-adapters opens (``create_session``), and the keys each needs."""
CONNECTION_KEYS = {
    transport: tuple(shape.__annotations__)
    for transport, shape in (
        ("stdio", StdioConnection),
        ("streamable_http", StreamableHttpConnection),
        ("streamable-http", StreamableHttpConnection),
        ("http", StreamableHttpConnection),
        ("sse", SSEConnection),
        ("websocket", WebsocketConnection),
    )
}
"""The keys a connection of each transport takes (the adapters' connection TypedDicts)."""
CONNECTION_ERROR = "{function}: the connection of server {server!r} {problem}."
NO_TRANSPORT = "has no 'transport': add 'transport': {guess!r} (one of {transports})"
UNKNOWN_TRANSPORT = (
    "has 'transport': {value}, which langchain-mcp-adapters does not open; did you mean "
    "{closest!r}? The transports are {transports}"
)
MISSING_KEY = "(transport {transport!r}) has no {key!r}: add {example}"
KEY_TYPE = "(transport {transport!r}) must have {key!r} as {expected}, e.g. {example}: got {got}"
ARGS_STRING = (
    "(transport 'stdio') must have 'args' as a list of strings, e.g. 'args': {fix}: got the "
    "string {got}"
)
ARGS_TYPE = "(transport 'stdio') must have 'args' as a list of strings: got {got}"
ARGS_ITEM = (
    "(transport 'stdio') must have 'args' as a list of strings: its item [{position}] is "
    "{kind}; write it as a string"
)
UNKNOWN_CONNECTION_KEY = (
    "(transport {transport!r}) has the key {key!r}, which that transport does not take; did "
    "you mean {closest!r}? Its keys are {known}"
)
KEY_EXAMPLES = {
    "command": "'command': 'python'",
    "args": "'args': ['server.py'] (a list of strings; [] for none)",
    "url": "'url': 'http://localhost:8000/mcp'",
}
UNKNOWN_OPTION_ERROR = (
    "{function}() got an unknown option {name!r}; did you mean {closest!r}? "
    "Its options are: {known} (see MCPLoadOptions)."
)
CATALOG_CLS_ERROR = (
    "{function}: option catalog_cls must be MCPToolCatalog or a subclass of it (the class, "
    "not an instance), got {got}."
)
SECONDS_OPTIONS: dict[str, str | None] = {
    "connect_timeout_s": None,
    "heartbeat_s": HEARTBEAT_OFF,
    "default_timeout_s": NO_BOUND,
}
"""The options of seconds -> what their ``None`` means (``None``: they take no ``None``)."""
COUNT_OPTIONS: dict[str, tuple[int, str, str | None]] = {
    "max_instructions_chars": (1, "characters", None),
    "max_description_chars": (1, "characters", None),
    "max_tool_schema_tokens": (1, "tokens", "no cap"),
    "max_artifact_chars": (0, "characters", NO_BOUND),
}
"""The options that count -> their least value, unit and what their ``None`` means. 0 would
leave every tool out (``max_tool_schema_tokens``) or every description a bare length; 0
``max_artifact_chars`` keeps no ``structuredContent`` in artifacts, which is a choice."""
FLAG_OPTIONS: dict[str, str | None] = {
    "strict": None,
    "tool_name_prefix": "the client's setting; False for connection dicts",
    "handle_tool_errors": "the client's setting; True for connection dicts",
}
"""The True/False options -> what their ``None`` means (``None``: they take no ``None``)."""


class MCPLoadOptions(TypedDict, total=False):
    """The options of :func:`load_mcp_catalog` and :func:`load_mcp_catalog_sync`, all optional.

    Metadata precedence for a tool (lowest first): ``include=default_include``,
    ``concurrency_group=<server>``, ``is_pure`` from the MCP ``readOnlyHint``
    annotation and ``timeout_s=default_timeout_s``; then ``server_defaults[server]``;
    then ``tool_metadata[tool]``.

    Attributes:
        server_descriptions: server -> category description, overriding the
            server's ``initialize`` instructions (or ``serverInfo`` title).
        server_defaults: server -> metadata for all its tools (``include``,
            ``status``, ``enabled``, ``is_pure``, ``concurrency_group``,
            ``max_concurrency``, ``timeout_s``, ``output_schema``); its prompt/resource
            tools take all but ``include`` (they stay ``manual``).
        tool_metadata: tool -> metadata overrides. A key is a catalog name (a
            prompt/resource tool's included), ``server:mcp_name``, or an MCP tool's name
            with or without its server's prefix (``notes__search`` reaches notes' tool
            also where it is plain ``search``), if exactly one tool has it. A key naming
            no tool raises ``ValueError``; while a server failed to load, a warning
            instead (none for a key naming that server: ``server:...`` or its prefix).
        categories: category -> tools (keys as for ``tool_metadata``);
            a tool in none of them falls in its server's category.
        category_descriptions: descriptions of the extra categories of
            ``categories`` (server categories use ``server_descriptions``).
        allowed_servers: keep only these servers' tools (with
            ``allowed_tools``, a tool passes if either admits it). Default: no filter.
            A name that is not a server of the connections raises ``ValueError``.
        allowed_tools: keep only these tools: ``name``, ``server:name`` or
            ``server:*``; ``server:pattern`` matches the catalog or the MCP name of that
            server's tools, a bare pattern the catalog name only. An entry without
            wildcards that names no tool raises ``ValueError`` (while a server failed to
            load, an :class:`MCPLoadWarning` instead, and nothing for ``server:...`` of the
            failed server or a tool left out at load); a pattern matching none is warned of.
        default_include: include mode of a tool that sets none (default ``"agent"``).
        tool_name_prefix: prefix every tool name with its server
            (``server__name``); by default only colliding names are prefixed.
            ``None`` takes the client's setting (False for connection dicts).
        handle_tool_errors: return MCP ``isError`` results, and a server's refusal of a
            prompt/resource tool's request, as error tool messages (True) or raise them as a
            ``ToolException`` (False); ``None`` takes the client's setting (True for
            connection dicts).
        strict: raise :class:`MCPLoadError` if any server fails to load
            (closing the others). By default (False) the failure is recorded in
            ``catalog.load_errors``, a :class:`MCPLoadWarning` is emitted and
            the other servers load.
        connect_timeout_s: seconds a server has to load: start, answer ``initialize``,
            ``tools/list`` and its prompt and resource lists, one deadline for all of it
            (servers load concurrently, so the load takes about this long at most; default
            30); a server that does not is left out. A session re-opened after the load has
            this long to start and answer ``initialize``, and this long again to list its
            tools (compared with the load's: see :class:`MCPRuntime`).
        heartbeat_s: ping interval for busy servers, to notice a server that
            died mid-call; ``None`` disables it (default 1).
        default_timeout_s: ``timeout_s`` of every tool that sets none (in
            ``server_defaults`` or ``tool_metadata``), so a frozen server never
            leaves a call pending; ``None`` for no bound (default 60).
        catalog_cls: the catalog class to build, an :class:`MCPToolCatalog`
            subclass (default :class:`MCPToolCatalog`).
        max_instructions_chars: a server's ``initialize`` instructions (or title) are cut
            to this many characters before they describe its category (default 1,000;
            ``server_descriptions`` are yours and never cut).
        max_description_chars: a tool's description is cut to this many characters for
            the model (default 2,000); the full text stays in
            ``tool.metadata["mcp_description"]``.
        max_tool_schema_tokens: a tool whose schema would cost more prompt tokens than
            this is left out, with an :class:`MCPLoadWarning` naming it (default 4,000;
            ``None``: no cap).
        max_artifact_chars: a call's ``structuredContent`` longer than this (as JSON) is
            dropped from the tool message's artifact, which stays in the state and every
            checkpoint (default 20,000; ``None``: no bound); an answer with no other
            content gets it as its text instead, offloaded like any large text.
        local_tools: your own LangChain tools (or functions), in the same catalog. They
            keep their names: a server tool of the same name gets its server's prefix.
            ``categories``, ``tool_metadata`` and ``allowed_tools`` name them by name.
    """

    server_descriptions: Mapping[str, str] | None
    server_defaults: Mapping[str, Mapping[str, Any]] | None
    tool_metadata: Mapping[str, Mapping[str, Any]] | None
    categories: Mapping[str, Sequence[str]] | None
    category_descriptions: Mapping[str, str] | None
    allowed_servers: Sequence[str] | None
    allowed_tools: Sequence[str] | None
    default_include: IncludeMode
    tool_name_prefix: bool | None
    handle_tool_errors: bool | None
    strict: bool
    connect_timeout_s: float
    heartbeat_s: float | None
    default_timeout_s: float | None
    catalog_cls: type[MCPToolCatalog]
    max_instructions_chars: int
    max_description_chars: int
    max_tool_schema_tokens: int | None
    max_artifact_chars: int | None
    local_tools: Sequence[BaseTool | Callable[..., Any]] | None


DEFAULTS: MCPLoadOptions = {
    "default_include": "agent",
    "strict": False,
    "connect_timeout_s": 30.0,
    "heartbeat_s": 1.0,
    "default_timeout_s": DEFAULT_MCP_TIMEOUT_S,
    "catalog_cls": MCPToolCatalog,
    "max_instructions_chars": MAX_INSTRUCTIONS_CHARS,
    "max_description_chars": MAX_DESCRIPTION_CHARS,
    "max_tool_schema_tokens": MAX_TOOL_SCHEMA_TOKENS,
    "max_artifact_chars": DEFAULT_MAX_ARTIFACT_CHARS,
}
"""The options whose default is not "none given"."""

OPTION_NAMES = tuple(MCPLoadOptions.__annotations__)


def _check_connections(
    connections: object, function: str = "load_mcp_catalog"
) -> dict[str, Connection]:
    """The connections as a dict of server name -> connection mapping, checked; the errors
    name ``function``, the loader the user called.

    Raises:
        TypeError: not a mapping (a list of connections: each needs a server name), one
            connection without its server name, a server name that is not a string, a
            connection that is not a mapping, or a connection's key of the wrong type
            (``args`` given as one string); the message shows the expected shape.
        ValueError: a connection without ``transport`` or with one the adapters do not
            open (the message names the closest), without a key its transport needs
            (``command``, ``args``, ``url``), or with a key its transport does not take.
    """
    if not isinstance(connections, Mapping):
        listed = isinstance(connections, list | tuple) and all(
            isinstance(c, Mapping) for c in connections
        )
        got = describe_kind(connections, "connections", lambda c: isinstance(c, Mapping))
        raise TypeError(
            CONNECTIONS_TYPE_ERROR.format(
                function=function,
                got=got,
                hint=NAME_EACH_HINT if listed and connections else "",
                example=CONNECTIONS_EXAMPLE,
            )
        )
    if any(
        key in connections and not isinstance(connections[key], Mapping)
        for key in ("transport", "command", "url")
    ):
        keys = [k for k in connections if isinstance(k, str)][:8]
        raise TypeError(
            ONE_CONNECTION_ERROR.format(
                function=function,
                keys=", ".join(map(repr, keys)),
                shape=", ".join(f"{k!r}: ..." for k in keys),
            )
        )
    for server, connection in connections.items():
        if not isinstance(server, str):
            got = f"{reprlib.repr(server)} ({type(server).__name__})"
            raise TypeError(
                SERVER_NAME_TYPE_ERROR.format(
                    function=function, got=got, example=CONNECTIONS_EXAMPLE
                )
            )
        if not isinstance(connection, Mapping):
            got = f"a {type(connection).__name__}"
            raise TypeError(
                CONNECTION_TYPE_ERROR.format(
                    function=function, server=server, got=got, example=CONNECTIONS_EXAMPLE
                )
            )
        _check_connection(server, connection, function)
    return dict(connections)


def _check_connection(server: str, connection: Mapping[str, Any], function: str) -> None:
    """Refuse a connection the adapters cannot open, before any server starts: its
    ``transport``, the keys that transport needs and their types, keys it does not take.
    Messages show no value of the connection but its ``transport`` and, scrubbed of
    credentials as load errors are, an ``args`` string."""
    transports = ", ".join(map(repr, CONNECTION_KEYS))

    def error(problem: str) -> str:
        return CONNECTION_ERROR.format(function=function, server=server, problem=problem)

    if "transport" not in connection:
        raise ValueError(
            error(NO_TRANSPORT.format(guess=_guess_transport(connection), transports=transports))
        )
    transport = connection["transport"]
    if not isinstance(transport, str) or transport not in CONNECTION_KEYS:
        text = transport if isinstance(transport, str) else ""
        closest = process.extractOne(text, list(CONNECTION_KEYS))
        problem = UNKNOWN_TRANSPORT.format(
            value=f"{safe_repr(transport, 40)} ({type(transport).__name__})",
            closest=closest[0] if closest and text else _guess_transport(connection),
            transports=transports,
        )
        raise (ValueError if isinstance(transport, str) else TypeError)(error(problem))
    for key in TRANSPORT_NEEDS[transport]:
        if key not in connection:
            raise ValueError(
                error(MISSING_KEY.format(transport=transport, key=key, example=KEY_EXAMPLES[key]))
            )
    for key in ("command", "url"):
        value = connection.get(key)
        if key in TRANSPORT_NEEDS[transport] and not isinstance(value, str):
            got = _a(type(value).__name__) if value is not None else "None"
            raise TypeError(
                error(
                    KEY_TYPE.format(
                        transport=transport,
                        key=key,
                        expected="a string",
                        got=got,
                        example=KEY_EXAMPLES[key],
                    )
                )
            )
    if transport == "stdio":
        _check_args(error, connection["args"])
    unknown = [k for k in connection if k not in CONNECTION_KEYS[transport]]
    if unknown:
        key = unknown[0]
        closest = process.extractOne(str(key), CONNECTION_KEYS[transport])
        raise ValueError(
            error(
                UNKNOWN_CONNECTION_KEY.format(
                    transport=transport,
                    key=key,
                    closest=closest[0] if closest else "transport",
                    known=", ".join(map(repr, CONNECTION_KEYS[transport])),
                )
            )
        )


def _check_args(error: Callable[[str], str], args: object) -> None:
    """Refuse a stdio connection's ``args`` that is not a list of strings."""
    if isinstance(args, str):
        try:
            words = shlex.split(args)
        except ValueError:
            words = args.split()
        scrubbed = without_secrets(words)
        raise TypeError(
            error(
                ARGS_STRING.format(
                    got=safe_repr(" ".join(scrubbed), 200), fix=safe_repr(scrubbed, 200)
                )
            )
        )
    if not isinstance(args, list | tuple):
        raise TypeError(error(ARGS_TYPE.format(got=describe_kind(args, "arguments", _is_str))))
    for position, word in enumerate(args):
        if not isinstance(word, str):
            raise TypeError(
                error(ARGS_ITEM.format(position=position, kind=_a(type(word).__name__)))
            )


def _a(kind: str) -> str:
    """``kind`` with its article: ``a list``, ``an int``."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _guess_transport(connection: Mapping[str, Any]) -> str:
    """The transport a connection without one (or with a misspelt one) most likely means."""
    if "command" in connection or "args" in connection:
        return "stdio"
    url = str(connection.get("url", ""))
    if url.startswith(("ws://", "wss://")):
        return "websocket"
    if url.rstrip("/").endswith("/sse"):
        return "sse"
    return "streamable_http" if url else "stdio"


def _check_options(options: Mapping[str, Any], function: str = "load_mcp_catalog") -> None:
    """Refuse option names :class:`MCPLoadOptions` does not declare, and numbers and flags
    of the wrong type or out of range (:data:`SECONDS_OPTIONS`, :data:`COUNT_OPTIONS`,
    :data:`FLAG_OPTIONS`), before any server starts.

    Raises:
        TypeError: an unknown option (the message names the closest real one); a number or
            flag of the wrong type (``True`` is no number, ``"10"`` none either).
        ValueError: a number out of its range (0 or less, NaN or infinite seconds; a count
            below its least value).
    """
    for name in options:
        if name not in OPTION_NAMES:
            match = process.extractOne(name, OPTION_NAMES)
            closest = match[0] if match else OPTION_NAMES[0]
            raise TypeError(
                UNKNOWN_OPTION_ERROR.format(
                    function=function, name=name, closest=closest, known=", ".join(OPTION_NAMES)
                )
            )
    cls = options.get("catalog_cls", MCPToolCatalog)
    if not (isinstance(cls, type) and issubclass(cls, MCPToolCatalog)):
        got = f"{safe_repr(cls, 80)} ({type(cls).__name__})"
        raise TypeError(CATALOG_CLS_ERROR.format(function=function, got=got))
    for name, value in options.items():
        if name in SECONDS_OPTIONS:
            check_seconds(function, name, value, none=SECONDS_OPTIONS[name])
        elif name in COUNT_OPTIONS:
            minimum, unit, none = COUNT_OPTIONS[name]
            check_count(function, name, value, minimum=minimum, unit=unit, none=none)
        elif name in FLAG_OPTIONS and not isinstance(value, bool):
            none = FLAG_OPTIONS[name]
            if value is None and none is not None:
                continue
            expected = "True or False" + (f", or None ({none})" if none else "")
            raise TypeError(option_error(function, name, expected, value))


async def load_mcp_catalog(
    connections_or_client: Mapping[str, Connection] | MultiServerMCPClient,
    **options: Unpack[MCPLoadOptions],
) -> MCPToolCatalog:
    """Load the tools of MCP servers into a catalog that owns persistent sessions.

    Each server's session is opened here (concurrently) and kept open; every
    tool call goes through it. Each tool is tagged with its server, sits in the
    server's category (described by the server's ``initialize`` instructions)
    and calls through the session. Close the sessions with ``await
    catalog.aclose()``, ``catalog.close()`` or ``async with catalog:``.

    Args:
        connections_or_client: server name -> connection dict, as for
            ``MultiServerMCPClient`` (``transport`` ``stdio``,
            ``streamable_http``, ``sse`` or ``websocket``), or a
            ``MultiServerMCPClient`` (its connections, callbacks, interceptors,
            ``tool_name_prefix`` and ``handle_tool_errors`` are used).
        **options: the options of :class:`MCPLoadOptions` (filters, metadata,
            categories, timeouts, ``strict``...).

    Returns:
        The catalog; ``catalog.mcp`` is its :class:`MCPRuntime`, ``catalog.load_errors``
        the servers that failed to load.

    Raises:
        TypeError: before any server starts: an option :class:`MCPLoadOptions` does not
            declare (the message names the closest one); an option of the wrong type: a
            number given as text (``connect_timeout_s="10"``: the message gives the fix) or
            as ``True``, a count given as a float (``max_description_chars=100.0``), a flag
            that is not ``True``/``False`` (``strict="yes"``), ``allowed_servers`` /
            ``allowed_tools`` given as one string or with an item that is not one;
            connections that are not a mapping of server name -> connection mapping (a list
            of connections, a single connection, a server name that is not a string, a
            connection that is not a mapping); a connection key of the wrong type
            (``transport``, ``command`` or ``url`` not a string; ``args`` given as one
            string, which the message shows as the list it means, or not a list of
            strings). After the load: a ``categories`` entry given as one string.
        MCPLoadError: ``strict`` and a server failed; names the servers.
        ValueError: before any server starts: an option out of range (seconds of 0 or less,
            NaN or infinite, as ``connect_timeout_s=0``; a count below its least value, as
            ``max_description_chars=0``); a connection without ``transport`` (the message
            suggests one) or with one langchain-mcp-adapters does not open (the message
            names the closest), without a key its transport needs (``command`` and
            ``args`` for ``stdio``, ``url`` for the others), or with a key its transport
            does not take (the message names the closest); unknown servers in
            ``server_defaults`` / ``server_descriptions`` / ``allowed_servers``, or an
            unknown key in ``server_defaults[server]``. Two servers whose names give one
            tool-name prefix (``my.docs`` and ``my_docs``: rename one) when both give it to
            tool names (with ``tool_name_prefix``, before any server starts; else, after
            the load, a prompt/resource tool or a prefixed name of each). After the load:
            unknown (or, as an alias, ambiguous) tools in ``tool_metadata`` /
            ``categories``, an ``allowed_tools`` entry without wildcards naming no tool
            (while every server loaded; else an :class:`MCPLoadWarning` names them), or an
            invalid metadata value (as :meth:`ToolCatalog.from_tools`).
    """
    _check_options(options)
    local = as_tools(options.get("local_tools") or [])
    tool_name_prefix = options.get("tool_name_prefix")
    handle_tool_errors = options.get("handle_tool_errors")
    if isinstance(connections_or_client, MultiServerMCPClient):
        client = connections_or_client
        connections: Mapping[str, Connection] = _check_connections(client.connections)
        callbacks: Callbacks | None = client.callbacks
        interceptors = client.tool_interceptors
        prefix = client.tool_name_prefix if tool_name_prefix is None else tool_name_prefix
        handle = client.handle_tool_errors if handle_tool_errors is None else handle_tool_errors
    else:
        connections, callbacks, interceptors = _check_connections(connections_or_client), None, []
        prefix = bool(tool_name_prefix)
        handle = True if handle_tool_errors is None else handle_tool_errors
    if prefix:
        check_prefixes(connections)  # every tool name carries its prefix: before any start
    server_defaults = options.get("server_defaults") or {}
    allowed_servers = check_name_list(
        "allowed_servers", options.get("allowed_servers"), "server names"
    )
    check_name_list("allowed_tools", options.get("allowed_tools"), "tool names or patterns")
    for label, mapping in (
        ("server_defaults", server_defaults),
        ("server_descriptions", options.get("server_descriptions") or {}),
        ("allowed_servers", dict.fromkeys(allowed_servers or ())),
    ):
        unknown = sorted(set(mapping) - set(connections))
        if unknown:
            raise ValueError(
                f"{label} names {unknown}, which are not servers of this catalog. "
                f"Servers: {sorted(connections)}."
            )
    for server, defaults in server_defaults.items():
        bad = sorted(set(defaults) - set(SERVER_DEFAULT_KEYS))
        if bad:
            raise ValueError(
                f"server_defaults[{server!r}]: unknown keys {bad}. "
                f"Allowed keys: {', '.join(SERVER_DEFAULT_KEYS)}."
            )

    connect_timeout_s = options.get("connect_timeout_s", DEFAULTS["connect_timeout_s"])
    runtime = MCPRuntime(
        connections,
        callbacks=callbacks,
        tool_interceptors=interceptors,
        connect_timeout_s=connect_timeout_s,
        heartbeat_s=options.get("heartbeat_s", DEFAULTS["heartbeat_s"]),
        max_artifact_chars=options.get("max_artifact_chars", DEFAULTS["max_artifact_chars"]),
    )
    try:
        loaded, features = await _load_servers(runtime, connect_timeout_s)
        if runtime.load_errors and options.get("strict", DEFAULTS["strict"]):
            raise MCPLoadError(runtime.load_errors)
        catalog = _build_catalog(
            runtime,
            loaded,
            features,
            options,
            prefix=prefix,
            handle_tool_errors=handle,
            reserved=reserved_tool_names() | {t.name for t in local},
            local=local,
        )
    except BaseException:
        await runtime.aclose()
        raise
    if runtime.load_errors:
        detail = "; ".join(f"{n!r}: {why}" for n, why in runtime.load_errors.items())
        warnings.warn(
            f"{len(runtime.load_errors)} of {len(connections)} MCP server(s) failed to load "
            f"and are left out of the catalog: {detail}. See catalog.load_errors; "
            "pass strict=True to make this an error.",
            MCPLoadWarning,
            stacklevel=user_stacklevel(),
        )
    return catalog


async def _load_servers(
    runtime: MCPRuntime, timeout_s: float
) -> tuple[dict[str, list[types.Tool]], dict[str, ServerFeatures]]:
    """Open each server, list its tools, then its prompts and resources, concurrently; each
    server within one ``timeout_s`` for all of it (a server that fails is in ``load_errors``).

    Returns:
        server -> its MCP tools, and server -> its features, for the servers that loaded.
    """

    async def load(server: str) -> tuple[list[types.Tool], ServerFeatures] | None:
        deadline = time.monotonic() + timeout_s
        tools = await runtime.aload([server], deadline=deadline)
        if server not in tools:
            return None
        features = await server_features(runtime, [server], deadline=deadline)
        return (tools[server], features[server]) if server in features else None

    servers = list(runtime.connections)
    results = await asyncio.gather(*(load(s) for s in servers))
    loaded = {s: r[0] for s, r in zip(servers, results, strict=True) if r is not None}
    features = {s: r[1] for s, r in zip(servers, results, strict=True) if r is not None}
    return loaded, features


def load_mcp_catalog_sync(
    connections_or_client: Mapping[str, Connection] | MultiServerMCPClient,
    **options: Unpack[MCPLoadOptions],
) -> MCPToolCatalog:
    """:func:`load_mcp_catalog` for code without an event loop (scripts, graph modules).

    Args:
        connections_or_client: as for :func:`load_mcp_catalog`.
        **options: the options of :class:`MCPLoadOptions`.

    Returns:
        The catalog; close it with ``catalog.close()``.

    Raises:
        TypeError: as for :func:`load_mcp_catalog`: an unknown option (the message names
            the closest one) or an option of the wrong type (``connect_timeout_s="10"``,
            ``strict="yes"``), connections of the wrong shape or a connection key of the
            wrong type (``args`` given as one string), before any server starts.
        ValueError: as for :func:`load_mcp_catalog`: an option out of range
            (``connect_timeout_s=0``); a connection without ``transport``, with an unknown
            one, without a key its transport needs (``command``, ``args``, ``url``) or with
            a key it does not take, before any server starts; unknown servers or tools in
            the options, or an invalid metadata value.
        MCPLoadError: ``strict`` and a server failed; names the servers.
        RuntimeError: called from a running event loop (use ``await
            load_mcp_catalog(...)`` there).
    """
    _check_options(options, "load_mcp_catalog_sync")
    if isinstance(connections_or_client, MultiServerMCPClient):
        _check_connections(connections_or_client.connections, "load_mcp_catalog_sync")
    else:
        _check_connections(connections_or_client, "load_mcp_catalog_sync")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(load_mcp_catalog(connections_or_client, **options))
    raise RuntimeError(
        "load_mcp_catalog_sync() was called from a running event loop; "
        "use `await load_mcp_catalog(...)` instead"
    )


# --- the catalog from what the servers listed ---------------------------------------------------


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


SDK_DEFAULT_SERVER_NAME = re.compile(r"FastMCP(-[0-9a-f]{4})?", re.IGNORECASE)
"""The ``serverInfo.name`` of a ``FastMCP`` server built without a name (the mcp SDK's
``FastMCP``, the standalone fastmcp package's ``FastMCP-3a7f``): it says nothing about the
server, so it is no category description."""


def _server_text(init: types.InitializeResult | None, server: str) -> str:
    """What the server says about itself: its instructions, else its title or name."""
    if init is None:
        return ""
    if init.instructions:
        return init.instructions.strip()
    info = init.serverInfo
    if getattr(info, "title", None):
        return str(info.title)
    default = SDK_DEFAULT_SERVER_NAME.fullmatch(info.name or "")
    if info.name and info.name.lower() != server.lower() and not default:
        return info.name
    return ""


def _matches(patterns: Sequence[str], server: str, name: str, mcp_name: str) -> bool:
    """Does an ``allowed_tools`` pattern admit this tool?

    ``server:pattern`` matches the catalog name or the MCP name of that server's tools; a
    bare pattern the catalog name only: a server may list another's catalog name as its
    MCP name (``evil`` lists ``good__send_email``, renamed ``evil__good__send_email``).
    """
    for pattern in patterns:
        pat_server, sep, pat_name = pattern.rpartition(":")
        if not sep:
            if fnmatch.fnmatchcase(name, pattern):
                return True
        elif pat_server == server and (
            fnmatch.fnmatchcase(name, pat_name) or fnmatch.fnmatchcase(mcp_name, pat_name)
        ):
            return True
    return False


def _build_catalog(
    runtime: MCPRuntime,
    loaded: Mapping[str, list[types.Tool]],
    features: Mapping[str, ServerFeatures],
    options: MCPLoadOptions,
    *,
    prefix: bool,
    handle_tool_errors: bool,
    reserved: frozenset[str] = frozenset(),
    local: Sequence[BaseTool] = (),
) -> MCPToolCatalog:
    """Turn the listed MCP tools, and the prompt/resource tools of the servers with
    ``features``, into catalog tools, metadata, categories and filters."""
    server_descriptions = options.get("server_descriptions") or {}
    server_defaults = options.get("server_defaults") or {}
    tool_metadata = options.get("tool_metadata") or {}
    categories = options.get("categories")
    category_descriptions = options.get("category_descriptions") or {}
    allowed_servers = options.get("allowed_servers")
    allowed_tools = options.get("allowed_tools")
    default_include = options.get("default_include", DEFAULTS["default_include"])
    default_timeout_s = options.get("default_timeout_s", DEFAULTS["default_timeout_s"])
    catalog_cls = options.get("catalog_cls", DEFAULTS["catalog_cls"])
    strict = options.get("strict", DEFAULTS["strict"])

    max_description = options.get("max_description_chars", DEFAULTS["max_description_chars"])
    token_cap = options.get("max_tool_schema_tokens", DEFAULTS["max_tool_schema_tokens"])
    choice = assign_names(
        {s: [t.name for t in loaded[s]] for s in runtime.connections if s in loaded},
        servers=runtime.connections,
        reserved=reserved,
        prefix=prefix,
    )
    prefixed = {s for (s, _), name in choice.names.items() if name.startswith(server_prefix(s))}
    check_prefixes(
        [
            s
            for s in runtime.connections
            if s in loaded and (s in prefixed or features[s].prompts or features[s].resources)
        ],
        "prompt/resource tools, or names prefixed because another tool has them",
    )
    left_out = {s: list(lines) for s, lines in choice.left_out.items()}
    listed: dict[str, list[tuple[types.Tool, str, str]]] = {}
    for server in runtime.connections:
        seen: set[str] = set()
        for t in loaded.get(server, []):
            name = choice.names.get((server, t.name))
            if name is None or t.name in seen:  # listed twice: the first listing stands
                continue
            seen.add(t.name)
            description = clip(t.description or t.title or "", max_description)
            problem = _schema_problem(name, description, t.inputSchema, token_cap)
            if problem is not None:
                left_out.setdefault(server, []).append(problem)
                continue
            listed.setdefault(server, []).append((t, name, description))
    names = {(s, t.name): name for s, tools in listed.items() for t, name, _ in tools}
    _warn_names(choice.changes, left_out, strict)
    refused = {(s, t.name) for s in loaded for t in loaded[s]} - set(names)
    local_names = {t.name for t in local}
    taken = {name: f"a tool of server {s!r}" for (s, _), name in names.items()}
    taken.update({name: "a local tool" for name in local_names})
    virtual: list[VirtualTool] = []
    for server in runtime.connections:
        if server in loaded:
            tools_of = virtual_tools(
                runtime,
                server,
                features[server],
                taken=taken,
                handle_tool_errors=handle_tool_errors,
            )
            taken.update({t.name: f"a prompt/resource tool of server {server!r}" for t in tools_of})
            virtual += tools_of
    final = set(names.values()) | local_names | {t.name for t in virtual}
    partial = bool(runtime.load_errors)
    aliases = {name: choice.aliases.get(key, ()) for key, name in names.items()}
    by_alias: dict[str, list[str]] = {}  # the keys' aliases: never an exclusion-only one
    for pair, name in names.items():
        for form in aliases[name]:
            if form not in choice.imitations.get(pair, ()):
                by_alias.setdefault(form, []).append(name)
    failed_prefixes = tuple(server_prefix(s) for s in runtime.load_errors)
    ignored: list[str] = []

    def resolve(key: str, what: str) -> str | None:
        name, server = _resolve(key, names, final)
        if name is not None:
            return name
        fits = by_alias.get(key, []) if server is None else []
        if len(fits) == 1:  # the tool's name with (or without) its prefix, in another load
            return fits[0]
        if server in runtime.load_errors or (server is None and key.startswith(failed_prefixes)):
            return None  # a tool of a server that failed to load: reported in load_errors
        if any(key in (n, f"{s}:{n}", mcp_tool_name(s, n)) for s, n in refused):
            return None  # a tool left out at load: reported in its server's warning
        if fits:
            problem = AMBIGUOUS_KEY.format(what=what, key=key, tools=sorted(fits))
        else:
            problem = UNKNOWN_KEY.format(what=what, key=key, known=sorted(final)[:10])
        if not partial:
            raise ValueError(problem)
        ignored.append(problem)  # it may be a failed server's tool: warned, not raised
        return None

    overrides: dict[str, dict[str, Any]] = {}
    for key, override in tool_metadata.items():
        name = resolve(key, "tool_metadata")
        if name is None:
            continue
        if "server" in override and name not in local_names:
            raise ValueError(
                f"tool_metadata[{key!r}] sets 'server'; an MCP tool's server is the one it "
                "was loaded from."
            )
        overrides.setdefault(name, {}).update(override)

    _check_filters(
        allowed_tools,
        [(s, name, t.name) for s, tools_of in listed.items() for t, name, _ in tools_of]
        + [("", t.name, t.name) for t in local]
        + [(t.server, t.name, t.name) for t in virtual],
        runtime,
        refused,
        ignored,
    )
    cats: dict[str, list[str]] | None = None
    if categories is not None:
        cats = {}
        for cat, members in categories.items():
            if isinstance(members, str):
                raise TypeError(
                    f"categories[{cat!r}] must be a list of tool names, got the string {members!r}."
                )
            cats[cat] = [n for m in members if (n := resolve(m, f"categories[{cat!r}]"))]
    if ignored:
        warnings.warn(
            IGNORED_KEYS_WARNING.format(
                problems=" ".join(ignored), failed=sorted(runtime.load_errors)
            ),
            MCPLoadWarning,
            stacklevel=user_stacklevel(),
        )

    def admits(server: str, name: str, mcp_name: str) -> bool:
        return (allowed_servers is None and allowed_tools is None) or (
            (allowed_servers is not None and server in allowed_servers)
            or (allowed_tools is not None and _matches(allowed_tools, server, name, mcp_name))
        )

    tools: list[BaseTool] = []
    metadata: dict[str, dict[str, Any]] = {}
    kept: list[str] = []
    third_party: set[str] = set()
    max_instructions = options.get("max_instructions_chars", DEFAULTS["max_instructions_chars"])

    def spec_meta(
        server: str, name: str, base: dict[str, Any], *, server_include: bool = True
    ) -> dict[str, Any]:
        """A tool's metadata: ``base``, the load's default timeout, its server's defaults
        (their include mode only with ``server_include``), then the tool's own overrides."""
        meta = dict(base)
        if default_timeout_s is not None:
            meta["timeout_s"] = default_timeout_s
        defaults = server_defaults.get(server, {})
        meta.update({k: v for k, v in defaults.items() if server_include or k != "include"})
        meta.update(overrides.get(name, {}))
        return meta

    for server in runtime.connections:
        if server not in loaded:
            continue
        init = runtime.init_result(server)
        info_tools: dict[str, str] = {}
        for t, name, description in listed.get(server, []):
            info_tools[name] = t.name
            annotations = _annotations(t.annotations)
            base: dict[str, Any] = {"include": default_include, "concurrency_group": server}
            if t.annotations is not None and t.annotations.readOnlyHint is not None:
                base["is_pure"] = t.annotations.readOnlyHint
            meta = metadata[name] = spec_meta(server, name, base)
            tool_meta: dict[str, Any] = {**annotations, "server": server, "mcp_tool_name": t.name}
            if t.annotations is not None:
                tool_meta[ANNOTATIONS_KEY] = t.annotations.model_dump()
            if description != (t.description or t.title or ""):
                tool_meta["mcp_description"] = t.description or t.title or ""
            if t.meta is not None:
                tool_meta["_meta"] = t.meta
            if t.outputSchema is not None:  # its fields are searched (ToolSpec.output_fields)
                tool_meta[OUTPUT_SCHEMA_KEY] = t.outputSchema
            tools.append(
                MCPCatalogTool(
                    name=name,
                    description=description,
                    args_schema=t.inputSchema,
                    metadata=tool_meta,
                    server=server,
                    mcp_name=t.name,
                    timeout_s=_timeout_s(meta),
                    mcp_runtime=runtime,
                    # Content blocks (TypedDicts), which BaseTool's annotation calls dicts.
                    handle_tool_error=_handle_mcp_tool_error if handle_tool_errors else False,  # type: ignore[arg-type]
                )
            )
            if admits(server, name, t.name):
                kept.append(name)
        own = _server_text(init, server)
        if server not in server_descriptions and own:
            third_party.add(server)
        runtime.servers[server] = MCPServerInfo(
            name=server,
            description=server_descriptions.get(server, clip(own, max_instructions)),
            instructions=init.instructions if init else None,
            server_name=init.serverInfo.name if init else None,
            server_title=getattr(init.serverInfo, "title", None) if init else None,
            server_version=init.serverInfo.version if init else None,
            transport=str(runtime.connections[server].get("transport", "")),
            tools=info_tools,
        )

    for tool in local:
        tools.append(tool)
        if tool.name in overrides:
            metadata[tool.name] = overrides[tool.name]
        if allowed_tools is None or _matches(allowed_tools, "", tool.name, tool.name):
            kept.append(tool.name)

    for tool in virtual:  # a prompt/resource tool stays manual, whatever its server's mode
        base = {"include": "manual", "is_pure": True, "concurrency_group": tool.server}
        meta = metadata[tool.name] = spec_meta(tool.server, tool.name, base, server_include=False)
        tool.timeout_s = _timeout_s(meta)
        tools.append(tool)
        if admits(tool.server, tool.name, tool.name):
            kept.append(tool.name)

    member_cats = {c for c, m in (cats or {}).items() if m}
    in_cats = {n for m in (cats or {}).values() for n in m}
    by_server: dict[str, list[str]] = {s: [name for _, name, _ in listed[s]] for s in listed}
    for tool in virtual:
        by_server.setdefault(tool.server, []).append(tool.name)
    server_cats = {s for s, members in by_server.items() if any(n not in in_cats for n in members)}
    descriptions = {
        s: runtime.servers[s].description for s in server_cats if runtime.servers[s].description
    }
    descriptions.update({c: d for c, d in category_descriptions.items() if c in member_cats})
    unknown_desc = sorted(set(category_descriptions) - member_cats - server_cats)
    if unknown_desc and not partial:
        raise described_category_error(unknown_desc, cats or {}, member_cats | server_cats)
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
        [
            replace(spec, aliases=aliases.get(spec.name, ()))
            for t in tools
            if (spec := plain.get(t.name)) is not None
        ],
        runtime=runtime,
        category_descriptions=plain.category_descriptions,
        filtered=[t.name for t in tools if plain.is_filtered(t.name)],
        untrusted_descriptions=third_party & set(descriptions),
    )


def _check_filters(
    allowed_tools: Sequence[str] | None,
    candidates: Sequence[tuple[str, str, str]],
    runtime: MCPRuntime,
    refused: set[tuple[str, str]],
    ignored: list[str],
) -> None:
    """Refuse an ``allowed_tools`` entry that admits nothing, as ``from_tools`` does
    (:func:`~langgraph_toolbudget.core.catalog.check_filters`), against the tools the servers
    listed (``candidates``: server, catalog name, MCP name; a local tool's server is ``""``).

    An entry naming a tool of a server that failed to load, or one left out at load (each
    warned of already), passes; while a server failed, a bare entry admitting nothing may be
    its tool: it joins ``ignored`` (warned of, not refused). Otherwise an entry without
    wildcards admitting nothing raises ``ValueError``, a pattern is warned of.
    """
    failed_prefixes = tuple(server_prefix(s) for s in runtime.load_errors)
    partial = bool(runtime.load_errors)
    unmatched: list[str] = []
    for entry in dict.fromkeys(allowed_tools or ()):
        if any(_matches([entry], server, name, mcp) for server, name, mcp in candidates):
            continue
        server, sep, _ = entry.rpartition(":")
        if (sep and server in runtime.load_errors) or (
            not sep and entry.startswith(failed_prefixes)
        ):
            continue  # a tool of a server that failed to load: reported in load_errors
        if any(
            fnmatch.fnmatchcase(form, entry)
            for s, n in refused
            for form in (n, f"{s}:{n}", mcp_tool_name(s, n))
        ):
            continue  # a tool left out at load: reported in its server's warning
        if FILTER_WILDCARDS.intersection(entry):
            unmatched.append(entry)
            continue
        forms = [n for _, n, _ in candidates] + [f"{s}:{m}" for s, _, m in candidates if s]
        problem = UNKNOWN_ALLOWED_TOOLS_ERROR.format(
            names=[entry], closest=closest_names([entry], forms)
        )
        if not partial:
            raise ValueError(problem)
        ignored.append(problem)  # it may be a failed server's tool: warned, not raised
    if unmatched:
        shown = reprlib.repr(sorted(n for _, n, _ in candidates))
        warnings.warn(
            UNMATCHED_PATTERNS_WARNING.format(patterns=unmatched, known=shown),
            MCPLoadWarning,
            stacklevel=user_stacklevel(),
        )


def _annotations(annotations: types.ToolAnnotations | None) -> dict[str, Any]:
    """The MCP annotations a tool's ``metadata`` holds: the fields MCP defines
    (:data:`MCP_ANNOTATIONS`), never a key the server added (``is_pure``, ``timeout_s``,
    ``status``...), which the catalog would read as its own metadata."""
    if annotations is None:
        return {}
    return {key: getattr(annotations, key) for key in MCP_ANNOTATIONS}


def _timeout_s(meta: Mapping[str, Any]) -> float | None:
    """The ``timeout_s`` of a tool's metadata, for its sync calls (None if it sets none)."""
    timeout = meta.get("timeout_s")
    return timeout if isinstance(timeout, int | float) else None


def _schema_problem(name: str, description: str, schema: Any, cap: int | None) -> str | None:
    """Why a tool is left out: its schema cannot be read (a root that is no object schema,
    ``{"type": "string"}``: arguments are a JSON object, and providers refuse such function
    parameters for the whole request; ``properties`` that is no JSON object: a list,
    ``null``), or costs over ``cap`` tokens."""
    root = schema.get("type", "object") if isinstance(schema, Mapping) else None
    if root != "object" and not (isinstance(root, list) and "object" in root):
        shown = safe_repr(root, 80)
        reason = f"its root 'type' is {shown}, not 'object': tool arguments are a JSON object"
        return UNREADABLE_SCHEMA.format(name=name, reason=reason)
    assert isinstance(schema, Mapping)
    if (why := _refuses_objects(schema)) is not None:
        reason = f"its root accepts no JSON object ({why}): tool arguments are a JSON object"
        return UNREADABLE_SCHEMA.format(name=name, reason=reason)
    properties = schema.get("properties", {}) if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        shown = "null" if properties is None else f"a {type(properties).__name__}"
        reason = f"its 'properties' is {shown}, not an object"
        return UNREADABLE_SCHEMA.format(name=name, reason=reason)
    try:
        tokens = schema_tokens([{"name": name, "description": description, "parameters": schema}])
    except (ValueError, TypeError, RecursionError) as exc:
        return UNREADABLE_SCHEMA.format(name=name, reason=clip(str(exc)))
    if cap is not None and tokens > cap:
        return TOO_LARGE.format(name=name, tokens=tokens, cap=cap)
    return None


_MAX_DEPTH = 16
"""Schemas (``$ref``s followed, branches entered) read below a root, at most, before it is taken
as one that may accept an object."""
_MAX_VISITS = 1000
"""Schemas read for one root, at most (``allOf`` branches that each ``$ref`` the root again
would otherwise cost their number to the power of the depth)."""
_ANNOTATIONS = frozenset({"title", "description", "$comment", "examples", "default"})


def _refuses_objects(root: Mapping[str, Any]) -> str | None:
    """Why the schema ``root`` surely accepts no JSON object, or None if it may accept one: a
    ``type`` without ``object``, a local ``$ref`` to such a schema, ``anyOf`` or ``oneOf`` whose
    every branch is one, ``allOf`` with one, ``not`` of a schema every object passes, a
    ``const`` or ``enum`` holding no object, ``false``. Anything else (a remote ``$ref``, a
    keyword not read here, a schema past :data:`_MAX_DEPTH` or :data:`_MAX_VISITS`) may."""
    visits = 0

    def refuses(schema: Any, depth: int) -> str | None:
        nonlocal visits
        visits += 1
        if schema is False:
            return "it is false"
        if not isinstance(schema, Mapping) or depth > _MAX_DEPTH or visits > _MAX_VISITS:
            return None
        kind = schema.get("type", "object")
        if kind != "object" and not (isinstance(kind, list) and "object" in kind):
            return f"'type' {safe_repr(kind, 40)}"
        ref = schema.get("$ref")
        if isinstance(ref, str) and (why := refuses(_local(ref, root), depth + 1)):
            return f"'$ref' {safe_repr(ref, 60)}: {why}"
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and all(refuses(b, depth + 1) for b in branches):
                return f"no branch of its {key!r} accepts one"
        branches = schema.get("allOf")
        if isinstance(branches, list) and any(refuses(b, depth + 1) for b in branches):
            return "a branch of its 'allOf' accepts none"
        if _passes_every_object(schema.get("not", False)):
            return "its 'not' refuses every object"
        if "const" in schema and not isinstance(schema["const"], Mapping):
            return "its 'const' is no object"
        enum = schema.get("enum")
        if isinstance(enum, list) and not any(isinstance(v, Mapping) for v in enum):
            return "its 'enum' holds no object"
        return None

    return refuses(root, 0)


def _passes_every_object(schema: Any) -> bool:
    """Does every JSON object pass ``schema`` (``true``, ``{}``, ``{"type": "object"}``)?"""
    if schema is True:
        return True
    if not isinstance(schema, Mapping) or not set(schema) <= _ANNOTATIONS | {"type"}:
        return False
    kind = schema.get("type", "object")
    return kind == "object" or (isinstance(kind, list) and "object" in kind)


def _local(ref: str, root: Mapping[str, Any]) -> Any:
    """The schema the local ``$ref`` (``#``, ``#/$defs/S``) points to in ``root``; None if it
    is not local or points nowhere."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        key = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            node = node.get(key)
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


def _warn_names(
    changes: Mapping[str, Sequence[str]], left_out: Mapping[str, Sequence[str]], strict: bool
) -> None:
    """One warning per server naming its renamed tools, one for those left out (or, with
    ``strict``, :class:`MCPLoadError` naming the servers whose tools were left out)."""
    if strict and left_out:
        raise MCPLoadError(
            {s: f"tools left out: {'; '.join(lines)}" for s, lines in left_out.items()}
        )
    for server, lines in changes.items():
        warnings.warn(
            RENAMED_WARNING.format(server=server, changes="; ".join(lines)),
            MCPLoadWarning,
            stacklevel=user_stacklevel(),
        )
    for server, lines in left_out.items():
        warnings.warn(
            LEFT_OUT_WARNING.format(server=server, tools="; ".join(lines)),
            MCPLoadWarning,
            stacklevel=user_stacklevel(),
        )
