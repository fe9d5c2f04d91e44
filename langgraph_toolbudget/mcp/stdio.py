"""The stdio transport of the MCP sessions: the SDK's ``stdio_client``, reading in linear time.

Its one reason to change: how a stdio server is started and read.

The SDK's ``mcp.client.stdio.stdio_client`` joins every chunk it reads from the
server to the pending part of the line and splits the whole again
(``(buffer + chunk).split("\\n")``), so one message of n bytes costs about
n² / 64 KiB of copying: a 10 MB tool result took 8 s, 20 MB 38 s, 50 MB more
than the 60 s default timeout, all of it on the loop that owns every session.
:func:`stdio_transport` is the same transport built on the SDK's public parts
(``StdioServerParameters``, ``get_default_environment``, ``SessionMessage``,
``JSONRPCMessage``, the POSIX process-tree termination) with a line splitter
that copies each byte about once: 50 MB arrive in a few seconds, most of it
the JSON parsing.

It keeps the SDK's behaviour otherwise: the server starts in its own process
group with the SDK's default environment plus ``env``; its stderr goes to ours;
a line that is not a JSON-RPC message is handed to the session as an exception,
except an answer the SDK cannot read (nested deeper than its parser allows, of the
wrong shape, a lone surrogate escape, bytes that are not UTF-8), which becomes an error
answer to its request, so the request fails at once with the reason instead of waiting
out its timeout;
on exit stdin is closed, the server gets 2 s to exit, then its process group is
terminated. Messages are UTF-8, as the MCP spec says (a line of invalid
UTF-8 is an error, as above, unless ``encoding_error_handler`` is ``replace`` or ``ignore``);
on Windows, or for another ``encoding``, the SDK's own ``stdio_client`` is used.

:func:`open_session` opens a ``ClientSession`` from a connection dict as the
adapters' ``create_session`` does, over this transport for ``stdio`` connections.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
import sys
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from typing import Any, TextIO, cast

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from langchain_mcp_adapters.sessions import Connection, StdioConnection, create_session
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from langgraph_toolbudget._compat_mcp import (
    _expand_env_vars,
    _MCPCallbacks,
    check_output_in_linear_time,
)
from langgraph_toolbudget.core.limits import JSON_STRING
from langgraph_toolbudget.mcp.errors import UNREADABLE_ANSWER, UNREADABLE_RESULT_CODE

logger = logging.getLogger(__name__)

EXIT_GRACE_S = 2.0
"""Seconds a server gets to exit after its stdin closes (the SDK's value)."""

STRAY_LINE_WARNING = (
    "MCP server %s wrote a line of %d bytes to stdout that is not a JSON-RPC message (%s): a "
    "server writes only MCP messages there, its logs to stderr. The line is not shown here (a "
    "server that prints its settings may print a secret); logger %r shows it at DEBUG level."
)
"""The warning for a stray line on a stdio server's stdout (the session goes on)."""

_READ_BYTES = 1 << 20  # at most per read (the pipe hands over up to 256 KiB at a time)
_STDIO_KEYS = frozenset(StdioConnection.__annotations__)
"""The keys a stdio connection takes: the adapters' own ``StdioConnection``'s (the loader
checks connections against the same TypedDicts)."""


class LineSplitter:
    """Splits a byte stream into lines, copying each byte about once.

    The pending line grows in a ``bytearray`` (amortized appends) and is handed
    out as it is when its newline arrives; lines wholly inside one chunk are
    sliced from it. A line of n bytes read in k chunks costs O(n + k), and the
    pending bytes are never duplicated.
    """

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> list[bytes | bytearray]:
        """Add a chunk; return the lines it completes (without their newlines)."""
        end = chunk.find(b"\n")
        if end == -1:
            self._pending += chunk
            return []
        self._pending += chunk[:end]
        lines: list[bytes | bytearray] = [self._pending]
        self._pending = bytearray()
        start = end + 1
        while (end := chunk.find(b"\n", start)) != -1:
            lines.append(chunk[start:end])
            start = end + 1
        self._pending += chunk[start:]
        return lines


def _parse(line: bytes | bytearray, errors: str, server: str) -> SessionMessage | Exception:
    try:
        data = line if errors == "strict" else bytes(line).decode("utf-8", errors)
        return SessionMessage(types.JSONRPCMessage.model_validate_json(data))
    except Exception as exc:  # noqa: BLE001 - handed to the session, as the SDK does
        logger.warning(STRAY_LINE_WARNING, server, len(line), _reason(exc), logger.name)
        logger.debug("The line MCP server %s wrote: %r", server, bytes(line[:_SHOWN_BYTES]))
        return _unreadable(line, exc)


_SHOWN_BYTES = 500  # of a stray line, at DEBUG level


_BRANCHES = (
    ("JSONRPCResponse", "result"),
    ("JSONRPCError", "error"),
    ("JSONRPCRequest", "method"),
    ("JSONRPCNotification", "method"),
)
"""The kinds of JSON-RPC message pydantic tries a line as, and the member each one needs."""


def _reason(exc: BaseException) -> str:
    """What is wrong with an answer, from pydantic's errors: of the kind of message it is (a
    ``result`` is read as a response, an ``error`` as an error answer, not as a request that
    lacks its ``method``), with where (``error.code: Input should be a valid integer``)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)[:500]
    try:
        found = errors()
        missing = {e["loc"] for e in found if e["type"] == "missing" and len(e["loc"]) == 2}
        kinds = [kind for kind, member in _BRANCHES if (kind, member) not in missing]
        ordered = sorted(found, key=lambda e: _rank(e["loc"], kinds))
        first = ordered[0]
        loc = [str(part) for part in first["loc"]]
        if loc and loc[0] in dict(_BRANCHES):
            loc = loc[1:]  # the kind of message: said by the members it has
        return f"{'.'.join(loc)}: {first['msg']}" if loc else str(first["msg"])
    except (TypeError, KeyError, IndexError):  # not pydantic's shape: the exception's own text
        return str(exc)[:500]


def _rank(loc: tuple[Any, ...], kinds: list[str]) -> int:
    """Errors of the first kind of message the answer has the member of come first."""
    return kinds.index(loc[0]) if loc and loc[0] in kinds else len(kinds)


_STRING_OR_BRACKET = re.compile(JSON_STRING.pattern + r"|[\[\]{}]", re.DOTALL)
_KEY_END = re.compile(r"\s*:\s*")


def _top_level_members(text: str, keys: Collection[str]) -> dict[str, Any]:
    """The members ``keys`` of the JSON object ``text``, read from its top level only.

    ``json.loads`` reads every nested value and raises ``RecursionError`` past Python's
    recursion limit; this skips them (counting brackets outside strings), so the ``id`` of an
    answer nested too deep is still found. A member whose value cannot be read is None.
    """
    members: dict[str, Any] = {}
    if not text.lstrip().startswith("{"):
        return members
    depth = 0
    decoder = json.JSONDecoder()
    for token in _STRING_OR_BRACKET.finditer(text):
        lexeme = token.group()
        if lexeme in ("{", "["):
            depth += 1
        elif lexeme in ("}", "]"):
            depth -= 1
        elif depth == 1 and (key_end := _KEY_END.match(text, token.end())):
            try:
                key = json.loads(lexeme)
            except ValueError:
                continue
            if key in keys:
                try:
                    members[key] = decoder.raw_decode(text, key_end.end())[0]
                except (ValueError, RecursionError):
                    members[key] = None  # there, but not readable either
    return members


def _unreadable(line: bytes | bytearray, exc: Exception) -> SessionMessage | Exception:
    """An answer the SDK cannot read (nested past its parser's limit, a result of the wrong
    shape, a lone surrogate escape, bytes that are not UTF-8) as an error answer to the
    request it answers, so that request fails at once with the reason instead of waiting out
    its timeout; anything else as the exception. A result (the request ran) gets the code
    :data:`UNREADABLE_RESULT_CODE`, so the caller is told so."""
    # Invalid UTF-8 is read as U+FFFD here only to find the id: the SDK refused the line.
    text = bytes(line).decode("utf-8", "replace")
    try:
        value = json.loads(text)
    except RecursionError:
        value = _top_level_members(text, ("id", "method", "result"))
    except ValueError:
        return exc
    if not isinstance(value, dict) or "method" in value:
        return exc  # a request or notification of the server's: no request of ours waits
    request_id = value.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return exc
    code = UNREADABLE_RESULT_CODE if "result" in value else types.INTERNAL_ERROR
    error = types.ErrorData(code=code, message=unreadable_reason(exc))
    answer = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    return SessionMessage(types.JSONRPCMessage(answer))


@asynccontextmanager
async def stdio_transport(
    server: StdioServerParameters, errlog: TextIO = sys.stderr, *, name: str | None = None
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[Any]]
]:
    """Start a stdio MCP server; yield the (read, write) streams a ``ClientSession`` takes.

    Args:
        server: the command, arguments, environment, working directory and
            encoding, as for the SDK's ``stdio_client``.
        errlog: where the server's stderr goes.
        name: the server's name, for the log (else its command).

    Yields:
        The stream of the server's messages and the stream to send it messages.
    """
    if sys.platform == "win32" or codecs.lookup(server.encoding).name != "utf-8":
        # Windows: the SDK manages the process through a job object; other encodings
        # than the spec's UTF-8 may not split on the newline byte.
        async with stdio_client(server, errlog) as streams:
            yield streams
        return
    label = repr(name if name is not None else server.command)
    reader_send, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, writer_receive = anyio.create_memory_object_stream[SessionMessage](0)
    env = get_default_environment()
    env.update(server.env or {})
    try:
        process = await anyio.open_process(
            [server.command, *server.args],
            env=env,
            stderr=errlog,
            cwd=server.cwd,
            start_new_session=True,
        )
    except OSError:
        for stream in (read_stream, write_stream, reader_send, writer_receive):
            await stream.aclose()
        raise

    async def read_server() -> None:
        assert process.stdout is not None
        lines = LineSplitter()
        try:
            async with reader_send:
                while True:
                    try:
                        data = await process.stdout.receive(_READ_BYTES)
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        return
                    for line in lines.feed(data):
                        await reader_send.send(_parse(line, server.encoding_error_handler, label))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await anyio.lowlevel.checkpoint()  # closed by us, or the session is gone

    async def write_server() -> None:
        assert process.stdin is not None
        try:
            async with writer_receive:
                async for message in writer_receive:
                    text = message.message.model_dump_json(by_alias=True, exclude_none=True)
                    data = (text + "\n").encode(server.encoding, server.encoding_error_handler)
                    await process.stdin.send(data)
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg, process:
        tg.start_soon(read_server)
        tg.start_soon(write_server)
        try:
            yield read_stream, write_stream
        finally:
            await _stop(process)
            for stream in (read_stream, write_stream, reader_send, writer_receive):
                await stream.aclose()


async def _stop(process: anyio.abc.Process) -> None:
    """The MCP stdio shutdown: close stdin, let the server exit, else end its process group."""
    if process.stdin is not None:
        try:
            await process.stdin.aclose()
        except Exception as exc:  # noqa: BLE001 - already closed is fine
            logger.debug("closing the MCP server's stdin: %s", exc)
    try:
        with anyio.fail_after(EXIT_GRACE_S):
            await process.wait()
    except TimeoutError:
        await terminate_posix_process_tree(process)
    except ProcessLookupError:
        pass


def _session_kwargs(connection: Mapping[str, Any], callbacks: _MCPCallbacks) -> dict[str, Any]:
    """``ClientSession`` keyword arguments: the connection's and the callbacks'."""
    kwargs = dict(connection.get("session_kwargs") or {})
    if callbacks.logging_callback is not None:
        kwargs["logging_callback"] = callbacks.logging_callback
    if callbacks.elicitation_callback is not None:
        kwargs["elicitation_callback"] = callbacks.elicitation_callback
    return kwargs


def _reporting_unreadable(
    connection: Connection, on_unreadable: Callable[[Exception], None]
) -> Connection:
    """The connection, its session's ``message_handler`` also reporting exceptions."""
    kwargs = dict(connection.get("session_kwargs") or {})
    theirs = kwargs.get("message_handler")

    async def handler(message: Any) -> None:
        if isinstance(message, Exception):
            on_unreadable(message)
        if theirs is not None:
            await theirs(message)

    kwargs["message_handler"] = handler
    return cast(Connection, {**connection, "session_kwargs": kwargs})


def unreadable_reason(exc: BaseException) -> str:
    """The error text of an answer that could not be read (:data:`UNREADABLE_ANSWER`)."""
    return UNREADABLE_ANSWER.format(reason=_reason(exc))


def stdio_parameters(connection: Mapping[str, Any]) -> StdioServerParameters:
    """The ``StdioServerParameters`` of a stdio connection dict (``${VAR}`` expanded in ``env``).

    Raises:
        ValueError: the connection has no ``command`` or no ``args``, or keys a
            stdio connection does not take (the adapters refuse them too).
    """
    for key in ("command", "args"):
        if key not in connection:
            raise ValueError(f"{key!r} parameter is required for stdio connection")
    unknown = sorted(set(connection) - _STDIO_KEYS)
    if unknown:
        raise ValueError(
            f"stdio connection has unknown keys {unknown}; it takes {sorted(_STDIO_KEYS)}"
        )
    env = connection.get("env")
    keys = ("cwd", "encoding", "encoding_error_handler")
    options = {k: connection[k] for k in keys if k in connection}
    return StdioServerParameters(
        command=connection["command"],
        args=list(connection["args"]),
        env=None if env is None else {k: _expand_env_vars(v) for k, v in env.items()},
        **options,
    )


@asynccontextmanager
async def open_session(
    connection: Connection,
    callbacks: _MCPCallbacks,
    on_unreadable: Callable[[Exception], None] | None = None,
    *,
    name: str | None = None,
) -> AsyncIterator[ClientSession]:
    """A ``ClientSession`` (not yet initialized) to the server of a connection dict.

    ``stdio`` connections go through :func:`stdio_transport`; the other transports
    through the adapters' ``create_session``.

    Args:
        connection: the connection dict (``MultiServerMCPClient`` format).
        callbacks: the MCP callbacks (logging, elicitation) of the session.
        on_unreadable: called with what the HTTP transports hand the session instead of an
            answer (an answer the SDK cannot read, a failed request). The SDK gives it to no
            request, which then waits out its timeout; :func:`stdio_transport` answers the
            request with the reason itself.
        name: the server's name, for the logs.

    Its ``call_tool`` checks a result against the tool's output schema in linear time
    (:func:`~langgraph_toolbudget._compat_mcp.check_output_in_linear_time`): the SDK's own
    check runs the schema's patterns on Python's ``re``.

    Yields:
        The session, open until the context exits.
    """
    if connection.get("transport") != "stdio":
        if on_unreadable is not None:
            connection = _reporting_unreadable(connection, on_unreadable)
        async with create_session(connection, mcp_callbacks=callbacks) as session:
            check_output_in_linear_time(session)
            yield session
        return
    kwargs = _session_kwargs(connection, callbacks)
    async with (
        stdio_transport(stdio_parameters(connection), name=name) as (read, write),
        ClientSession(read, write, **kwargs) as session,
    ):
        check_output_in_linear_time(session)
        yield session
