"""MCP errors: the error classes, their message templates, and error classification.

Its one reason to change: how MCP failures are named and classified.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import anyio
import httpx
from langchain_core.tools import ToolException
from mcp import types
from mcp.shared.exceptions import McpError
from pydantic import ValidationError

CONNECTION_CLOSED = types.CONNECTION_CLOSED if hasattr(types, "CONNECTION_CLOSED") else -32000
"""JSON-RPC error code the MCP SDK gives pending requests when the transport closes."""

CALL_FAILED_ERROR = (
    "MCP server {server!r} failed during the call to tool {tool!r}: {cause}. "
    "The session was closed and will be re-opened on the next call; if this keeps "
    "happening, check that the server is running ({where})."
)
CALL_REJECTED_ERROR = "MCP server {server!r} could not run tool {tool!r}: {cause}"
NO_LONGER_LISTED_ERROR = (
    "MCP server {server!r} no longer lists tool {tool!r} (it restarted without it), so the call "
    "was not sent. Use the other tools you have, or tell the user: the app must reload its MCP "
    "catalog (or be redeployed) to follow the server's new tools."
)
NOT_LISTED_ADVICE = "Do not call it again in this conversation."
"""The advice of :data:`NO_LONGER_LISTED_ERROR` (not "fix the arguments": nothing would run)."""
RELISTED_WARNING = (
    "MCP server {server!r} was re-opened (it restarted) and its tools changed since the catalog "
    "was loaded: {changes}. The catalog still has the tools as loaded; reload it "
    "(load_mcp_catalog) or redeploy the app to follow the server."
)
READ_TIMEOUT_ERROR = (
    "tool {tool!r} of MCP server {server!r} did not answer within the session's read timeout "
    "({cause})"
)
TOLD_TO_CANCEL = "; the server was told to cancel the call"
BAD_OUTPUT_ERROR = (
    "MCP server {server!r} ran tool {tool!r}, but its answer does not match the tool's "
    "declared output schema, so it could not be read: {cause}"
)
UNREADABLE_ANSWER = "the server's answer could not be read: {reason}"
"""The error message of a request whose answer the SDK cannot read (made over stdio)."""
UNREADABLE_RESULT_CODE = -32099
"""JSON-RPC error code of the error answer the stdio transport puts in place of a result it
cannot read (:func:`is_unreadable_result`): the request was answered, so a tool call ran."""
UNREADABLE_RESULT_ERROR = "MCP server {server!r} ran tool {tool!r}, but {cause}"
MAY_HAVE_RUN = (
    "The call may have taken effect on the server: if the tool changes anything, check "
    "before calling it again."
)
"""What the model is told to do when the server may have run the tool (instead of fixing
the arguments): a call repeated to retry would run a side effect twice."""
TIMED_OUT = "Try a smaller request, or another tool."
"""What the model is told after a call cancelled at its timeout (as the executor's own)."""
RAN = (
    "The tool ran on the server: if it changes anything, do not call it again just to "
    "retry; tell the user what happened."
)
OPEN_FAILED_ERROR = (
    "cannot connect to MCP server {server!r} ({where}): {cause}. "
    "Check that the server starts and speaks MCP on this connection; "
    "the next call will try again."
)
TIMEOUT_ERROR = (
    "tool {tool!r} of MCP server {server!r} did not answer within {timeout} s; "
    "the call was cancelled."
)
LOAD_TIMEOUT_ERROR = (
    "no answer to {what} within connect_timeout_s={timeout:g} s, counted from {since}; "
    "raise connect_timeout_s for a slow server, or for many servers starting at once (they "
    "share the machine's cores)"
)
SINCE_LOAD = (
    "the start of the load (one deadline for the server's start, initialize, tools/list and "
    "its prompt and resource lists)"
)
SINCE_OPEN = (
    "the start of its opening after the load (one deadline for the server's start and initialize)"
)
CLOSED_ERROR = (
    "the MCP sessions of this catalog were closed (aclose()/close()); tool {tool!r} of "
    "server {server!r} cannot run. Load the catalog again with load_mcp_catalog()."
)
SESSION_CLOSED_ERROR = (
    "the MCP sessions of this catalog were closed (aclose()/close()); server {server!r} "
    "cannot be reached. Load the catalog again with load_mcp_catalog()."
)
NESTED_SYNC_ERROR = (
    "a sync MCP call from the MCP sessions' own loop (in a tool interceptor or callback) "
    "would wait on the loop it blocks; call the tool with `await tool.ainvoke(...)` there."
)
HEADERS_ERROR = (
    "a tool interceptor set HTTP headers for tool {tool!r} of MCP server {server!r}; "
    "per-call headers are not supported over the catalog's persistent sessions. "
    "Put the headers in the server's connection instead."
)


class MCPServerError(ToolException):
    """A tool call failed because of its MCP server or the connection to it.

    The executor turns it into an error tool message; the message names the
    server and what to do.

    Attributes:
        server: the server's name in the catalog.
        tool: the catalog name of the tool that was called, if any.
        advice: what the model should do next, when not "fix the arguments or try another
            tool" (the server may have run the tool: see :data:`MAY_HAVE_RUN`).
    """

    def __init__(
        self, message: str, *, server: str, tool: str | None = None, advice: str | None = None
    ) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.advice = advice


class MCPLoadError(RuntimeError):
    """One or more MCP servers could not be loaded and ``strict=True`` was given.

    Attributes:
        errors: server name -> why it failed.
    """

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        detail = "; ".join(f"{name!r}: {why}" for name, why in self.errors.items())
        super().__init__(
            f"{len(self.errors)} MCP server(s) failed to load: {detail}. "
            "Fix or remove these servers, or pass strict=False to load the others."
        )


class MCPLoadWarning(UserWarning):
    """Some MCP servers failed to load, or a server's tools are not the ones loaded (renamed,
    left out, or changed by a server that restarted); the catalog holds the others' tools."""


def _leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe_error(exc: BaseException, connection: Mapping[str, Any] | None = None) -> str:
    """The error as one line; with ``connection``, without its credentials (an HTTP client's
    error names the URL it failed on, password and query included)."""
    leaf = _leaf(exc)
    if isinstance(leaf, McpError):
        text = f"McpError: {leaf.error.message}"
    else:
        text = str(leaf).strip()
        text = f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
    return text if connection is None else _scrubbed(text, connection)


def _scrubbed(text: str, connection: Mapping[str, Any]) -> str:
    """``text`` with the credentials of ``connection`` (as :func:`_where` leaves them out)
    replaced by ``***``."""
    url = str(connection.get("url", ""))
    if url:
        text = text.replace(url, _url_without_secrets(url))
    words = [url, *map(str, connection.get("args", []))]
    secrets = {
        secret
        for word, kept in zip(
            words, [_url_without_secrets(url), *without_secrets(words[1:])], strict=True
        )
        for secret in _removed(word, kept)
    }
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return _without_known_tokens(text)


def _removed(word: str, kept: str) -> list[str]:
    """The parts of ``word`` that ``kept`` (its form without secrets) shows as ``***``."""
    if word == kept:
        return []
    parts = re.split(re.escape("***"), kept)
    pattern = "(.+?)".join(re.escape(p) for p in parts)
    match = re.fullmatch(pattern, word, re.DOTALL)
    return [g for g in match.groups() if len(g) >= 4] if match else []


_SECRET_NAME = re.compile(
    r"(?:^|[_.-])(?:"
    r"(?:api|access|private|secret)[_-]?keys?|apikeys?|token|secrets?|[a-z]*pass(?:word|wd)"
    r"|auth|authorization|cookies?|credentials?|bearer"
    r")(?:$|[_.-])|^pass$",
    re.I,
)
"""A credential's name by a whole segment (segments split at ``_``, ``-``, ``.`` and camelCase):
``GITHUB_TOKEN``, ``OPENAI_API_KEY``, ``API_KEYS``, ``X-Api-Key``, ``--apiKey``,
``PGPASSWORD``, ``AUTH_TOKEN_FILE``, ``--pass``; not ``max_tokens``, ``tokenizer``, ``author``."""
_SECRET_END = re.compile(r"(?:token|key|secret|password|passwd|pwd)$")
"""A credential's name by its end: the name's last segment (lowercase) ends with one of these
words, whole or after other letters: ``ssh_key``, ``sshkey``, ``SESSIONKEY``, ``MYTOKEN``,
``clientSecret``, ``DB_PWD``, ``--key``; not ``max_tokens``, ``keyword``, ``--keyfile``."""
_NOT_SECRET_ENDS = frozenset(
    (
        *("primarykey", "foreignkey", "sortkey", "partitionkey", "hashkey", "rangekey"),
        *("cachekey", "idempotencykey", "routingkey"),
        *("monkey", "donkey", "turkey", "hockey", "jockey", "whiskey", "hotkey", "turnkey"),
    )
)
"""Names that end like a credential's (:data:`_SECRET_END`) but name something else: a
record's id (``primary_key``, ``sort_key``), a lookup (``cache_key``), an English word
(``monkey``). They match the whole name past its dotted path, separators dropped
(``primary_key``, ``primaryKey``, ``PRIMARY-KEY``, ``users.primary_key``): with a prefix, the
name is that service's key (``COSMOS_PRIMARY_KEY``, ``PAGERDUTY_ROUTING_KEY``), and never part
of a segment (``sshkey`` is not ``hotkey``)."""
_NOT_SECRET_NAMES = frozenset(("pwd", "oldpwd"))
"""Whole names that end like a credential's but are not: ``PWD=/srv/app`` is a working
directory (``DB_PWD`` is a password)."""
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_HEADER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
_PORT = re.compile(r"\d{1,5}(?:/.*)?", re.DOTALL)
_KNOWN_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    # OpenAI (sk-proj-...), Anthropic (sk-ant-...): random, so upper and lower case and digits
    r"sk-(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}"
    r"|[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|xox[abeoprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|npm_[A-Za-z0-9]{36,}"  # npm
    r"|A[KS]IA[0-9A-Z]{16}"  # AWS access key ids
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # JWTs
    r")(?![A-Za-z0-9])"
)
"""Credentials in a format made to be recognised (the prefixes secret scanners look for), each
a whole word: they are left out wherever they stand, a bare argument or inside another one."""


def _named_like_a_secret(name: str) -> bool:
    """Is ``name`` (``--api-key``, ``GITHUB_TOKEN``, ``X-Api-Key``, ``ssh_key``) a credential's
    name? One of its segments is a credential's word (:data:`_SECRET_NAME`), or it ends with one
    (:data:`_SECRET_END`) and is none of :data:`_NOT_SECRET_ENDS` / :data:`_NOT_SECRET_NAMES`."""
    plain = _CAMEL.sub("_", name.lstrip("-"))
    if _SECRET_NAME.search(plain) is not None:
        return True
    segments = [s for s in re.split(r"[_.-]+", plain.lower()) if s]
    if not segments or _SECRET_END.search(segments[-1]) is None:
        return False
    if "".join(segments) in _NOT_SECRET_NAMES:
        return False
    # The whole name past its dotted path: a prefix names whose key it is (COSMOS_PRIMARY_KEY
    # is an Azure account key, PAGERDUTY_ROUTING_KEY an integration key).
    field = [s for s in re.split(r"[_-]+", plain.rsplit(".", 1)[-1].lower()) if s]
    return "".join(field) not in _NOT_SECRET_ENDS


def _without_known_tokens(text: str) -> str:
    """``text`` with every credential of a known format (:data:`_KNOWN_TOKEN`) as ``***``."""
    return _KNOWN_TOKEN.sub("***", text)


def _where(connection: Mapping[str, Any]) -> str:
    """A short description of where a connection points, for error messages, which the model
    reads too: the value of a command-line option named like a credential (``--api-key X``,
    ``--token=X``), of an argument ``NAME=X`` or ``Name: X`` named like one
    (``GITHUB_TOKEN=X``, ``Authorization: Bearer X``; not ``max_tokens=X`` or
    ``keycloak:8080``), a credential in a known format anywhere (``sk-...``, ``ghp_...``:
    :data:`_KNOWN_TOKEN`) and a URL's password and query values (the connection's URL or an
    argument) are left out. Any other bare argument is shown as it is."""
    transport = connection.get("transport", "?")
    if transport == "stdio":
        words = [str(connection.get("command", "")), *map(str, connection.get("args", []))]
        return f"stdio: {' '.join(without_secrets(words)).strip()}"
    url = _url_without_secrets(str(connection.get("url", "?")))
    return f"{transport}: {_without_known_tokens(url)}"


def without_secrets(words: list[str]) -> list[str]:
    """A command line's words with the secrets in them hidden: a URL's password and query
    values, ``--token=X`` and ``NAME_TOKEN=X`` values, credential headers, and the value
    after a flag named like a secret (for load errors and warnings, and connection checks)."""
    out: list[str] = []
    for before, word in zip(["", *words], words, strict=False):
        name, equals, _ = word.partition("=")
        header, colon, value = word.partition(":")
        if "://" in word and _url_has_secrets(word):
            out.append(_without_known_tokens(_url_without_secrets(word)))
        elif equals and " " not in name and _named_like_a_secret(name):
            out.append(f"{name}=***")  # ``--token=X``, ``GITHUB_TOKEN=X``
        elif (
            colon
            and _HEADER_NAME.fullmatch(header)
            and _named_like_a_secret(header)
            and value.strip()
            and not _PORT.fullmatch(value)  # ``auth:8443``: a host and its port
        ):
            space = value[: len(value) - len(value.lstrip())]
            out.append(f"{header}:{space}***")  # ``--header "Authorization: Bearer X"``
        elif before.startswith("-") and "=" not in before and _named_like_a_secret(before):
            out.append("***")  # the value of ``--api-key X``
        else:
            out.append(_without_known_tokens(word))
    return out


def _url_has_secrets(url: str) -> bool:
    """Does ``url`` hold a password or query values (what :func:`_url_without_secrets` hides)?"""
    try:
        parts = urlsplit(url)
        return parts.password is not None or bool(parts.query)
    except ValueError:
        return False


def _url_without_secrets(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "?"
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    query = "&".join(f"{k}=***" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _is_session_terminated(exc: BaseException) -> bool:
    """The server answered 404 to the session id: it does not know the session (any more).

    The SDK reports it as ``McpError(code=32600, "Session terminated")``.
    """
    leaf = _leaf(exc)
    return (
        isinstance(leaf, McpError)
        and leaf.error.code in (32600, -32600)
        and "session terminated" in leaf.error.message.lower()
    )


def _is_connection_closed(exc: BaseException) -> bool:
    """True when the SDK reports the connection closing under a request
    (``McpError(CONNECTION_CLOSED, "Connection closed")``): the same event as the session's
    watch seeing the server go, whichever of the two notices it first."""
    leaf = _leaf(exc)
    return isinstance(leaf, McpError) and leaf.error.code == CONNECTION_CLOSED


def is_read_timeout(exc: BaseException) -> bool:
    """The MCP session's own read timeout (``read_timeout_seconds``) ran out waiting for the
    answer: the request went out and the server may be running it still."""
    leaf = _leaf(exc)
    return isinstance(leaf, McpError) and leaf.error.code == httpx.codes.REQUEST_TIMEOUT


def is_unreadable_result(exc: BaseException) -> bool:
    """The stdio transport could not read a result the server sent (a lone surrogate escape,
    bytes that are not UTF-8, the wrong shape): the request was answered, so the tool ran."""
    leaf = _leaf(exc)
    return (
        isinstance(leaf, McpError)
        and leaf.error.code == UNREADABLE_RESULT_CODE
        and leaf.error.message.startswith(UNREADABLE_ANSWER.partition("{")[0])
    )


def is_wrong_shape_result(exc: BaseException) -> bool:
    """The server's result is JSON but no ``CallToolResult`` (``{"content": "not a list"}``):
    the SDK's ``call_tool`` raises pydantic's ``ValidationError`` after the server answered,
    so the tool ran."""
    leaf = _leaf(exc)
    return isinstance(leaf, ValidationError) and leaf.title == types.CallToolResult.__name__


def is_unreadable_output(exc: BaseException) -> bool:
    """The SDK refused the server's answer after the tool ran (``structuredContent`` that does
    not match the tool's ``outputSchema``, or none although it declares one)."""
    leaf = _leaf(exc)
    if not isinstance(leaf, RuntimeError):
        return False
    text = str(leaf)
    return text.startswith(
        ("Invalid structured content returned by tool", "Invalid schema for tool")
    ) or text.endswith("has an output schema but did not return structured content")


def _is_transport_error(exc: BaseException) -> bool:
    """True when an error means the session is unusable (not a tool-level error)."""
    leaf = _leaf(exc)
    if isinstance(leaf, McpError):
        return leaf.error.code == CONNECTION_CLOSED or _is_session_terminated(leaf)
    return isinstance(
        leaf,
        anyio.ClosedResourceError
        | anyio.BrokenResourceError
        | anyio.EndOfStream
        | OSError
        | EOFError
        | httpx.HTTPError,
    ) or isinstance(exc, BaseExceptionGroup)
