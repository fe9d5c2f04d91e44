"""MCP servers as a tool catalog, over persistent sessions on one background loop.

Key Components:
    - :func:`load_mcp_catalog` (also ``await ToolCatalog.from_mcp(...)``): load
      the tools of several MCP servers into one :class:`ToolCatalog`. Each tool
      is tagged with its server; its category is the server name; the server's
      ``initialize`` instructions become the category description.
    - :class:`MCPRuntime`: owns one persistent MCP session per server, all on
      one background event-loop thread. Tools call through it from any thread
      or event loop: sync ``invoke`` blocks on the background loop, async
      ``ainvoke`` awaits it without blocking. A dead session is re-opened on the
      next call.
    - :class:`MCPCatalogTool`: the LangChain tool of one MCP tool. Its args
      schema is the MCP input JSON schema; its metadata holds the server, the
      MCP name and the MCP annotations.
    - :class:`MCPServerError`: a call failed because of the server or the
      connection (down, crashed, timed out); the message names the server.
    - :class:`MCPLoadError`: ``strict=True`` and a server failed to load.

Naming rule:
    A tool keeps its MCP name unless another loaded server has a tool of the
    same name; then *every* tool of that name becomes ``<server>__<name>``
    (server name with characters outside ``[A-Za-z0-9_-]`` replaced by ``_``).
    ``tool_name_prefix=True`` applies the prefix to every tool. The call always
    uses the server's own name (``tool.mcp_name``).

Typical Usage:
    ```python
    catalog = await ToolCatalog.from_mcp(
        {"math": {"transport": "stdio", "command": "python", "args": ["math_server.py"]}}
    )
    async with catalog:
        graph = create_toolbudget_agent(model, catalog).compile()
        await graph.ainvoke({"messages": [("user", "add 2 and 3")]})
    ```
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fnmatch
import glob
import logging
import re
import sys
import threading
import warnings
import weakref
from collections import Counter
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio
import httpx
from langchain_core.tools import BaseTool, ToolException
from langchain_mcp_adapters.callbacks import CallbackContext, Callbacks, _MCPCallbacks
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.interceptors import MCPToolCallRequest, ToolCallInterceptor
from langchain_mcp_adapters.sessions import Connection, create_session
from langchain_mcp_adapters.tools import (
    _build_interceptor_chain,
    _convert_call_tool_result,
    _handle_mcp_tool_error,
    _list_all_tools,
)
from mcp import ClientSession, types
from mcp.shared.exceptions import McpError
from pydantic import ConfigDict, Field

from langgraph_toolbudget.catalog import TOOL_METADATA_KEYS, IncludeMode, ToolCatalog

if sys.version_info < (3, 11):  # pragma: no cover - anyio depends on the backport there
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "MCPCatalogTool",
    "MCPLoadError",
    "MCPLoadWarning",
    "MCPRuntime",
    "MCPServerError",
    "MCPServerInfo",
    "load_mcp_catalog",
    "load_mcp_catalog_sync",
    "mcp_tool_name",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

CONNECTION_CLOSED = types.CONNECTION_CLOSED if hasattr(types, "CONNECTION_CLOSED") else -32000
"""JSON-RPC error code the MCP SDK gives pending requests when the transport closes."""

SERVER_DEFAULT_KEYS = tuple(k for k in TOOL_METADATA_KEYS if k != "server")

CALL_FAILED_ERROR = (
    "MCP server {server!r} failed during the call to tool {tool!r}: {cause}. "
    "The session was closed and will be re-opened on the next call; if this keeps "
    "happening, check that the server is running ({where})."
)
CALL_REJECTED_ERROR = "MCP server {server!r} could not run tool {tool!r}: {cause}"
OPEN_FAILED_ERROR = (
    "cannot connect to MCP server {server!r} ({where}): {cause}. "
    "Check that the server starts and speaks MCP on this connection; "
    "the next call will try again."
)
TIMEOUT_ERROR = (
    "tool {tool!r} of MCP server {server!r} did not answer within {timeout} s; "
    "the call was cancelled."
)
CLOSED_ERROR = (
    "the MCP sessions of this catalog were closed (aclose()/close()); tool {tool!r} of "
    "server {server!r} cannot run. Load the catalog again with ToolCatalog.from_mcp()."
)
HEADERS_ERROR = (
    "a tool interceptor set HTTP headers for tool {tool!r} of MCP server {server!r}; "
    "per-call headers are not supported over the catalog's persistent sessions. "
    "Put the headers in the server's connection instead."
)


# --- errors --------------------------------------------------------------------------------


class MCPServerError(ToolException):
    """A tool call failed because of its MCP server or the connection to it.

    The executor turns it into an error tool message; the message names the
    server and what to do.

    Attributes:
        server: the server's name in the catalog.
        tool: the catalog name of the tool that was called, if any.
    """

    def __init__(self, message: str, *, server: str, tool: str | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


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
    """Some MCP servers failed to load; the catalog holds the others' tools."""


# --- server info ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MCPServerInfo:
    """What the catalog learned about one loaded MCP server.

    Attributes:
        name: the server's name in the catalog (the connection key).
        description: the category description used for this server.
        instructions: ``instructions`` from the server's ``initialize`` result.
        server_name: ``serverInfo.name`` from the ``initialize`` result.
        server_title: ``serverInfo.title``, if the server sent one.
        server_version: ``serverInfo.version``.
        transport: the connection's transport (``stdio``, ``streamable_http``, ...).
        tools: catalog name -> MCP name of every tool the server listed
            (filtered and disabled ones included).
    """

    name: str
    description: str
    instructions: str | None
    server_name: str | None
    server_title: str | None
    server_version: str | None
    transport: str
    tools: dict[str, str] = field(default_factory=dict)


# --- helpers -------------------------------------------------------------------------------


def _leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe_error(exc: BaseException) -> str:
    leaf = _leaf(exc)
    if isinstance(leaf, McpError):
        return f"McpError: {leaf.error.message}"
    text = str(leaf).strip()
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


def _where(connection: Mapping[str, Any]) -> str:
    """A short description of where a connection points, for error messages."""
    transport = connection.get("transport", "?")
    if transport == "stdio":
        command = " ".join(
            [str(connection.get("command", "")), *map(str, connection.get("args", []))]
        )
        return f"stdio: {command.strip()}"
    return f"{transport}: {connection.get('url', '?')}"


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


class _SyncTimeout(TimeoutError):
    """``MCPRuntime.run_sync`` gave up waiting (and cancelled the coroutine)."""


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """Mark a future's exception as retrieved (no "never retrieved" log)."""
    if not fut.cancelled():
        fut.exception()


# --- one server's session ------------------------------------------------------------------


@dataclass(eq=False)
class _Generation:
    """One opened session of a server: the session, its owner task and its events."""

    session: ClientSession
    init: types.InitializeResult
    owner: asyncio.Task[None]
    closing: asyncio.Event
    dead: asyncio.Event
    inflight: int = 0
    heartbeat: asyncio.Task[None] | None = None


class _ServerSession:
    """One server's persistent session. Lives on, and is used only from, the runtime loop.

    The session's async context is entered and exited by one owner task (anyio
    cancel scopes must exit in the task that entered them); calls use the
    session from other tasks of the same loop. Each (re)opened session is a
    :class:`_Generation`; closing one never touches a newer one.
    """

    def __init__(
        self,
        name: str,
        connection: Connection,
        *,
        callbacks: Callbacks | None,
        connect_timeout_s: float,
        heartbeat_s: float | None,
    ) -> None:
        self.name = name
        self.connection = connection
        self.callbacks = callbacks
        self.connect_timeout_s = connect_timeout_s
        self.heartbeat_s = heartbeat_s
        self.init_result: types.InitializeResult | None = None
        self.opened = 0
        self._gen: _Generation | None = None
        self._lock: asyncio.Lock | None = None
        self._background: set[asyncio.Task[Any]] = set()

    # -- lifecycle --

    def _mcp_callbacks(self, tool: str | None = None) -> _MCPCallbacks:
        if self.callbacks is None:
            return _MCPCallbacks()
        return self.callbacks.to_mcp_format(
            context=CallbackContext(server_name=self.name, tool_name=tool)
        )

    @staticmethod
    def _alive(gen: _Generation | None) -> bool:
        """Is this session usable (owner running, transport open)?"""
        if gen is None or gen.owner.done() or gen.dead.is_set():
            return False
        stream = getattr(gen.session, "_read_stream", None)
        stats = getattr(stream, "statistics", None)
        # The transport closes its end of the read stream when the server goes away
        # (stdio: the process exited); a call on it would fail at once.
        return not (callable(stats) and stats().open_send_streams == 0)

    async def ensure_open(self) -> _Generation:
        """The live session, opening (or re-opening) it if needed.

        Raises:
            MCPServerError: the session cannot be opened; names the server.
        """
        gen = self._gen
        if self._alive(gen):
            assert gen is not None
            return gen
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            gen = self._gen
            if self._alive(gen):
                assert gen is not None
                return gen
            await self.close()
            try:
                gen = await self._open()
            except Exception as exc:
                raise MCPServerError(
                    OPEN_FAILED_ERROR.format(
                        server=self.name, where=_where(self.connection), cause=_describe_error(exc)
                    ),
                    server=self.name,
                ) from exc
            self._gen, self.init_result = gen, gen.init
            self.opened += 1
            return gen

    async def _open(self) -> _Generation:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[ClientSession, types.InitializeResult]] = loop.create_future()
        ready.add_done_callback(_retrieve)
        closing, dead = asyncio.Event(), asyncio.Event()
        owner = loop.create_task(self._own(ready, closing, dead), name=f"mcp-session-{self.name}")
        try:
            session, init = await asyncio.wait_for(
                asyncio.shield(ready), timeout=self.connect_timeout_s
            )
        except BaseException as exc:
            owner.cancel()
            await asyncio.wait({owner}, timeout=5)
            if isinstance(exc, asyncio.TimeoutError):
                raise TimeoutError(
                    f"no answer to initialize within {self.connect_timeout_s} s"
                ) from None
            raise
        return _Generation(session, init, owner, closing, dead)

    async def _own(
        self,
        ready: asyncio.Future[tuple[ClientSession, types.InitializeResult]],
        closing: asyncio.Event,
        dead: asyncio.Event,
    ) -> None:
        """Owner task: enter the session's context, wait until closing, exit it."""
        error: BaseException | None = None
        try:
            async with create_session(
                self.connection, mcp_callbacks=self._mcp_callbacks()
            ) as session:
                init = await session.initialize()
                if not ready.done():
                    ready.set_result((session, init))
                await closing.wait()
        except BaseException as exc:  # noqa: BLE001 - recorded, handed to the opener or logged
            error = exc
        finally:
            dead.set()
            if not ready.done():
                ready.set_exception(
                    error
                    if isinstance(error, Exception)
                    else ConnectionError("the session closed before initialize answered")
                )
            elif error is not None and not closing.is_set():
                logger.info("MCP session to %r ended: %s", self.name, _describe_error(error))
        if isinstance(error, asyncio.CancelledError):
            raise error

    async def close(self) -> None:
        """Close the current session, if any."""
        gen, self._gen = self._gen, None
        if gen is not None:
            await self._close_generation(gen)

    @staticmethod
    async def _close_generation(gen: _Generation) -> None:
        """Close one session and wait, boundedly, for its owner task to exit."""
        if gen.heartbeat is not None:
            gen.heartbeat.cancel()
        gen.closing.set()
        done, _ = await asyncio.wait({gen.owner}, timeout=5)
        if not done:
            gen.owner.cancel()
            await asyncio.wait({gen.owner}, timeout=2)

    def _mark_dead(self, gen: _Generation) -> None:
        """A session is unusable: fail its pending calls and close it in the background."""
        gen.dead.set()
        if self._gen is gen:
            self._gen = None
        self._spawn(self._close_generation(gen))

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_retrieve)

    # -- calls --

    async def call_tool(
        self, tool: str, mcp_name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        """Call one tool over the persistent session.

        A server that no longer knows the session (an HTTP server restarted
        between calls answers 404) never ran the request, so the call is sent
        once more on a new session, as the MCP spec asks.

        Raises:
            MCPServerError: the session could not be opened, died during the
                call, or the server rejected the request.
        """
        try:
            return await self._call_once(tool, mcp_name, arguments)
        except MCPServerError as exc:
            if exc.__cause__ is None or not _is_session_terminated(exc.__cause__):
                raise
        logger.info("MCP server %r forgot the session; calling %r on a new one", self.name, tool)
        return await self._call_once(tool, mcp_name, arguments)

    async def _call_once(
        self, tool: str, mcp_name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        gen = await self.ensure_open()
        session = gen.session
        request_id: list[int] = []

        async def send() -> types.CallToolResult:
            # send_request takes this id synchronously before its first await.
            request_id.append(getattr(session, "_request_id", -1))
            return await session.call_tool(
                mcp_name,
                arguments,
                progress_callback=self._mcp_callbacks(mcp_name).progress_callback,
            )

        loop = asyncio.get_running_loop()
        call = loop.create_task(send())
        watch = loop.create_task(gen.dead.wait())
        gen.inflight += 1
        if self.heartbeat_s and (gen.heartbeat is None or gen.heartbeat.done()):
            gen.heartbeat = loop.create_task(self._beat(gen, self.heartbeat_s))
        try:
            await asyncio.wait({call, watch}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            if request_id and request_id[0] >= 0 and not gen.dead.is_set():
                self._spawn(self._notify_cancelled(session, request_id[0]))
            raise
        finally:
            watch.cancel()
            gen.inflight -= 1
        if not call.done():
            call.cancel()
            call.add_done_callback(_retrieve)
            self._mark_dead(gen)
            raise MCPServerError(
                CALL_FAILED_ERROR.format(
                    server=self.name,
                    tool=tool,
                    cause="the connection was lost",
                    where=_where(self.connection),
                ),
                server=self.name,
                tool=tool,
            )
        try:
            return call.result()
        except Exception as exc:
            if _is_transport_error(exc):
                self._mark_dead(gen)
                raise MCPServerError(
                    CALL_FAILED_ERROR.format(
                        server=self.name,
                        tool=tool,
                        cause=_describe_error(exc),
                        where=_where(self.connection),
                    ),
                    server=self.name,
                    tool=tool,
                ) from exc
            raise MCPServerError(
                CALL_REJECTED_ERROR.format(server=self.name, tool=tool, cause=_describe_error(exc)),
                server=self.name,
                tool=tool,
            ) from exc

    async def _notify_cancelled(self, session: ClientSession, request_id: int) -> None:
        """Tell the server a request was cancelled, so it stops the tool."""
        notification = types.ClientNotification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(
                    requestId=request_id, reason="cancelled by the client (timeout)"
                )
            )
        )
        try:
            with anyio.fail_after(2):
                await session.send_notification(notification)
        except Exception as exc:  # noqa: BLE001 - best effort; the session may be gone
            logger.debug("could not send cancellation to %r: %s", self.name, exc)

    async def _beat(self, gen: _Generation, interval: float) -> None:
        """While calls are pending, ping the server so a dead connection is noticed.

        Over HTTP the SDK leaves a request pending forever when the server dies
        mid-call; a failed ping marks the session dead, which fails pending calls.
        """
        while gen.inflight > 0 and not gen.dead.is_set():
            await asyncio.sleep(interval)
            if gen.inflight == 0 or gen.dead.is_set():
                return
            try:
                with anyio.fail_after(max(interval * 5, 5)):
                    await gen.session.send_ping()
            except TimeoutError:
                continue  # busy or slow, not necessarily dead; the owner task tells
            except Exception as exc:  # noqa: BLE001 - classified below
                if _is_transport_error(exc):
                    logger.info("MCP server %r stopped answering: %s", self.name, exc)
                    self._mark_dead(gen)
                    return


# --- the runtime ---------------------------------------------------------------------------


def _run_loop(loop: asyncio.AbstractEventLoop, stopped: concurrent.futures.Future[None]) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
            stopped.set_result(None)


async def _close_all(servers: Mapping[str, _ServerSession]) -> None:
    await asyncio.gather(*(s.close() for s in servers.values()), return_exceptions=True)


def _shutdown(
    loop: asyncio.AbstractEventLoop,
    thread: threading.Thread,
    servers: Mapping[str, _ServerSession],
    stopped: concurrent.futures.Future[None],
) -> None:
    """Close every session and stop the loop thread (sync; also the finalizer)."""
    if loop.is_closed() or stopped.done():
        return
    if threading.current_thread() is thread:
        loop.create_task(_close_all(servers)).add_done_callback(lambda _: loop.stop())
        return
    try:
        asyncio.run_coroutine_threadsafe(_close_all(servers), loop).result(timeout=15)
    except concurrent.futures.TimeoutError:
        logger.warning("MCP sessions did not close within 15 s; stopping their loop anyway")
    finally:
        if not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
    try:
        stopped.result(timeout=5)
    except concurrent.futures.TimeoutError:
        logger.warning("the MCP runtime's loop thread did not stop within 5 s")


class MCPRuntime:
    """Persistent MCP sessions, one per server, on one background event-loop thread.

    MCP sessions are bound to the event loop that opened them, while a graph
    may run under a sync ``invoke``, an ``ainvoke`` in any loop, Jupyter or
    ``langgraph dev``. The runtime therefore runs every session on its own
    daemon thread and loop; :meth:`call` (sync) and :meth:`acall` (async,
    never blocking) hand calls to it. Cancelling an ``acall`` cancels the call
    on the background loop and tells the server to stop the tool.

    A catalog built by :func:`load_mcp_catalog` owns its runtime: close it with
    ``await catalog.aclose()``, ``catalog.close()`` or ``async with catalog``.
    Sessions left open are closed at interpreter exit.

    Attributes:
        servers: server name -> :class:`MCPServerInfo` of each loaded server.
        load_errors: server name -> why it failed to load.
    """

    def __init__(
        self,
        connections: Mapping[str, Connection],
        *,
        callbacks: Callbacks | None = None,
        tool_interceptors: Sequence[ToolCallInterceptor] | None = None,
        connect_timeout_s: float = 30.0,
        heartbeat_s: float | None = 1.0,
    ) -> None:
        """Start the background loop; sessions open on :meth:`aload` or the first call.

        Args:
            connections: server name -> connection dict, as for
                ``MultiServerMCPClient`` (stdio, streamable_http, sse, websocket).
            callbacks: the adapters' ``Callbacks`` (logging, progress,
                elicitation); they run on the background loop.
            tool_interceptors: the adapters' tool-call interceptors; they run on
                the background loop.
            connect_timeout_s: seconds to wait for a server to start and answer
                ``initialize``.
            heartbeat_s: while calls are pending, ping each busy server this
                often so a server that died mid-call is noticed (HTTP transports
                otherwise wait forever); ``None`` disables it.
        """
        self.connections: dict[str, Connection] = dict(connections)
        self.tool_interceptors = list(tool_interceptors or [])
        self.servers: dict[str, MCPServerInfo] = {}
        self.load_errors: dict[str, str] = {}
        self._sessions: dict[str, _ServerSession] = {
            name: _ServerSession(
                name,
                conn,
                callbacks=callbacks,
                connect_timeout_s=connect_timeout_s,
                heartbeat_s=heartbeat_s,
            )
            for name, conn in self.connections.items()
        }
        self._loop = asyncio.new_event_loop()
        self._stopped: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=_run_loop, args=(self._loop, self._stopped), name="toolbudget-mcp", daemon=True
        )
        self._thread.start()
        self._closed = False
        self._finalizer = weakref.finalize(
            self, _shutdown, self._loop, self._thread, self._sessions, self._stopped
        )

    # -- plumbing --

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` or :meth:`close` ran."""
        return self._closed

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The background event loop every session lives on."""
        return self._loop

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._closed:
            coro.close()
            raise RuntimeError("this MCP runtime is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the background loop and block for its result.

        Args:
            coro: the coroutine.
            timeout: seconds to wait; on expiry the coroutine is cancelled.

        Returns:
            The coroutine's result.

        Raises:
            RuntimeError: called from the background loop's own thread (it
                would deadlock).
            TimeoutError: ``timeout`` expired (the coroutine was cancelled).
        """
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "a sync MCP call from the runtime's own loop would deadlock; use the async API"
            )
        fut = self._submit(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            if fut.done():
                raise
            fut.cancel()
            raise _SyncTimeout(f"no result within {timeout} s") from None
        except BaseException:
            fut.cancel()
            raise

    async def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the background loop and await it from any loop.

        Cancelling the awaiting task cancels the coroutine on the background loop.

        Args:
            coro: the coroutine.

        Returns:
            The coroutine's result.
        """
        return await asyncio.wrap_future(self._submit(coro))

    # -- loading --

    async def aload(self) -> dict[str, list[types.Tool]]:
        """Open every server's session and list its tools, concurrently.

        Failures are recorded in :attr:`load_errors` (and the failed server's
        session closed), never raised.

        Returns:
            server name -> its MCP tools, for the servers that loaded.
        """
        return await self.run_async(self._load_all())

    async def _load_all(self) -> dict[str, list[types.Tool]]:
        names = list(self._sessions)
        results = await asyncio.gather(*(self._load_one(n) for n in names), return_exceptions=True)
        loaded: dict[str, list[types.Tool]] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):
                cause = result.__cause__ if isinstance(result, MCPServerError) else None
                where = _where(self.connections[name])
                self.load_errors[name] = f"{_describe_error(cause or result)} ({where})"
                await self._sessions[name].close()
            else:
                loaded[name] = result
        return loaded

    async def _load_one(self, name: str) -> list[types.Tool]:
        server = self._sessions[name]
        gen = await server.ensure_open()
        try:
            with anyio.fail_after(server.connect_timeout_s):
                return await _list_all_tools(gen.session)
        except Exception as exc:
            raise MCPServerError(
                f"MCP server {name!r} failed to list its tools", server=name
            ) from exc

    def init_result(self, server: str) -> types.InitializeResult | None:
        """The ``initialize`` result of a server's latest session (None if never opened)."""
        return self._sessions[server].init_result

    def sessions_opened(self, server: str) -> int:
        """How many sessions to this server have been opened so far (reconnects + 1)."""
        return self._sessions[server].opened

    # -- calls --

    async def _call(
        self, server: str, tool: str, mcp_name: str, arguments: dict[str, Any]
    ) -> tuple[Any, Any]:
        srv = self._sessions[server]

        async def execute(request: MCPToolCallRequest) -> Any:
            if request.headers:
                raise MCPServerError(
                    HEADERS_ERROR.format(tool=tool, server=server), server=server, tool=tool
                )
            return await srv.call_tool(tool, request.name, request.args)

        handler = _build_interceptor_chain(execute, self.tool_interceptors)
        result = await handler(
            MCPToolCallRequest(name=mcp_name, args=arguments, server_name=server)
        )
        return _convert_call_tool_result(result)

    def call(
        self,
        server: str,
        tool: str,
        mcp_name: str,
        arguments: dict[str, Any],
        *,
        timeout_s: float | None = None,
    ) -> tuple[Any, Any]:
        """Call an MCP tool and block until it answers (sync callers, any thread).

        Args:
            server: the server's name.
            tool: the tool's catalog name (for messages).
            mcp_name: the tool's name on the server.
            arguments: the call's arguments.
            timeout_s: cancel the call after this many seconds.

        Returns:
            ``(content, artifact)`` as the adapters convert a ``CallToolResult``.

        Raises:
            MCPServerError: the server is down, died, timed out or rejected the call.
            ToolException: the tool itself reported an error (``isError``).
        """
        if self._closed:
            raise MCPServerError(CLOSED_ERROR.format(tool=tool, server=server), server=server)
        try:
            return self.run_sync(self._call(server, tool, mcp_name, arguments), timeout_s)
        except _SyncTimeout:
            raise MCPServerError(
                TIMEOUT_ERROR.format(tool=tool, server=server, timeout=timeout_s),
                server=server,
                tool=tool,
            ) from None

    async def acall(
        self, server: str, tool: str, mcp_name: str, arguments: dict[str, Any]
    ) -> tuple[Any, Any]:
        """Call an MCP tool from any event loop without blocking it.

        Cancelling the awaiting task (e.g. ``asyncio.wait_for``) cancels the
        call on the background loop and sends the server a cancellation.

        Args:
            server: the server's name.
            tool: the tool's catalog name (for messages).
            mcp_name: the tool's name on the server.
            arguments: the call's arguments.

        Returns:
            ``(content, artifact)`` as the adapters convert a ``CallToolResult``.

        Raises:
            MCPServerError: the server is down, died or rejected the call.
            ToolException: the tool itself reported an error (``isError``).
        """
        if self._closed:
            raise MCPServerError(CLOSED_ERROR.format(tool=tool, server=server), server=server)
        return await self.run_async(self._call(server, tool, mcp_name, arguments))

    # -- closing --

    async def aclose(self) -> None:
        """Close every session and stop the background loop. Idempotent."""
        if self._closed:
            return
        if threading.current_thread() is self._thread:
            raise RuntimeError("aclose() cannot run on the MCP runtime's own loop")
        self._closed = True
        await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(_close_all(self._sessions), self._loop)
        )
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.wrap_future(self._stopped)
        self._finalizer.detach()

    def close(self) -> None:
        """Sync :meth:`aclose`, for scripts without an event loop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._finalizer()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"MCPRuntime({sorted(self.servers)}, {state})"


# --- the tool ------------------------------------------------------------------------------


class MCPCatalogTool(BaseTool):
    """A LangChain tool that calls one MCP tool through the catalog's :class:`MCPRuntime`.

    Works under ``invoke`` (blocks on the runtime's loop) and ``ainvoke``
    (awaits it without blocking), from any thread or event loop. The args
    schema is the MCP input JSON schema; results are converted like the
    adapters' tools (``content_and_artifact``); an MCP ``isError`` result
    becomes an error tool message, a server or connection failure raises
    :class:`MCPServerError`.

    Attributes:
        server: the MCP server's name in the catalog.
        mcp_name: the tool's name on the server (what the call uses).
        timeout_s: bound on a sync call (the sync path cannot be cancelled from
            outside); async calls are bounded by the executor's timeout.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    server: str
    mcp_name: str
    timeout_s: float | None = None
    mcp_runtime: MCPRuntime = Field(exclude=True, repr=False)
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    # No run_manager/config parameters: BaseTool then passes only the tool's own
    # arguments, whatever their names.
    def _run(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return self.mcp_runtime.call(
            self.server, self.name, self.mcp_name, kwargs, timeout_s=self.timeout_s
        )

    async def _arun(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return await self.mcp_runtime.acall(self.server, self.name, self.mcp_name, kwargs)


# --- loading a catalog ---------------------------------------------------------------------


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


async def load_mcp_catalog(
    connections_or_client: Mapping[str, Connection] | MultiServerMCPClient,
    *,
    server_descriptions: Mapping[str, str] | None = None,
    server_defaults: Mapping[str, Mapping[str, Any]] | None = None,
    tool_metadata: Mapping[str, Mapping[str, Any]] | None = None,
    categories: Mapping[str, Sequence[str]] | None = None,
    category_descriptions: Mapping[str, str] | None = None,
    allowed_servers: Sequence[str] | None = None,
    allowed_tools: Sequence[str] | None = None,
    default_include: IncludeMode = "agent",
    tool_name_prefix: bool | None = None,
    handle_tool_errors: bool | None = None,
    strict: bool = False,
    connect_timeout_s: float = 30.0,
    heartbeat_s: float | None = 1.0,
    catalog_cls: type[ToolCatalog] = ToolCatalog,
) -> ToolCatalog:
    """Load the tools of MCP servers into a catalog that owns persistent sessions.

    Each server's session is opened here (concurrently) and kept open; every
    tool call goes through it. Close the sessions with ``await
    catalog.aclose()``, ``catalog.close()`` or ``async with catalog:``.

    Metadata precedence for a tool (lowest first): ``include=default_include``,
    ``concurrency_group=<server>`` and ``is_pure`` from the MCP
    ``readOnlyHint`` annotation; then ``server_defaults[server]``; then
    ``tool_metadata[tool]``.

    Args:
        connections_or_client: server name -> connection dict, as for
            ``MultiServerMCPClient`` (``transport`` ``stdio``,
            ``streamable_http``, ``sse`` or ``websocket``), or a
            ``MultiServerMCPClient`` (its connections, callbacks, interceptors,
            ``tool_name_prefix`` and ``handle_tool_errors`` are used).
        server_descriptions: server -> category description, overriding the
            server's ``initialize`` instructions (or ``serverInfo`` title).
        server_defaults: server -> metadata for all its tools (``include``,
            ``enabled``, ``is_pure``, ``concurrency_group``,
            ``max_concurrency``, ``timeout_s``).
        tool_metadata: tool -> metadata overrides. A key is a catalog name or
            ``server:mcp_name``.
        categories: category -> tools (catalog names or ``server:mcp_name``);
            a tool in none of them falls in its server's category.
        category_descriptions: descriptions of the extra categories of
            ``categories`` (server categories use ``server_descriptions``).
        allowed_servers: keep only these servers' tools (with
            ``allowed_tools``, a tool passes if either admits it).
        allowed_tools: keep only these tools: ``name``, ``server:name`` or
            ``server:*``; a name pattern matches the catalog or the MCP name.
        default_include: include mode of a tool that sets none.
        tool_name_prefix: prefix every tool name with its server
            (``server__name``); by default only colliding names are prefixed.
            ``None`` takes the client's setting (False for connection dicts).
        handle_tool_errors: return MCP ``isError`` results as error tool
            messages (True) or raise them; ``None`` takes the client's setting
            (True for connection dicts).
        strict: raise :class:`MCPLoadError` if any server fails to load
            (closing the others). Otherwise the failure is recorded in
            ``catalog.load_errors``, a :class:`MCPLoadWarning` is emitted and
            the other servers load.
        connect_timeout_s: seconds a server may take to start and answer
            ``initialize`` / ``tools/list``.
        heartbeat_s: ping interval for busy servers, to notice a server that
            died mid-call; ``None`` disables it.
        catalog_cls: the catalog class to build (a ``ToolCatalog`` subclass).

    Returns:
        The catalog; ``catalog.mcp`` is its :class:`MCPRuntime`.

    Raises:
        MCPLoadError: ``strict`` and a server failed; names the servers.
        ValueError: unknown servers in ``server_defaults`` /
            ``server_descriptions``, unknown tools in ``tool_metadata`` /
            ``categories`` (while every server loaded), or an invalid metadata
            value (as :meth:`ToolCatalog.from_tools`).
    """
    if isinstance(connections_or_client, MultiServerMCPClient):
        client = connections_or_client
        connections: Mapping[str, Connection] = client.connections
        callbacks: Callbacks | None = client.callbacks
        interceptors = client.tool_interceptors
        prefix = client.tool_name_prefix if tool_name_prefix is None else tool_name_prefix
        handle = client.handle_tool_errors if handle_tool_errors is None else handle_tool_errors
    else:
        connections, callbacks, interceptors = dict(connections_or_client), None, []
        prefix = bool(tool_name_prefix)
        handle = True if handle_tool_errors is None else handle_tool_errors
    for label, mapping in (
        ("server_defaults", server_defaults),
        ("server_descriptions", server_descriptions),
    ):
        unknown = sorted(set(mapping or {}) - set(connections))
        if unknown:
            raise ValueError(
                f"{label} names {unknown}, which are not servers of this catalog. "
                f"Servers: {sorted(connections)}."
            )
    for server, defaults in (server_defaults or {}).items():
        bad = sorted(set(defaults) - set(SERVER_DEFAULT_KEYS))
        if bad:
            raise ValueError(
                f"server_defaults[{server!r}]: unknown keys {bad}. "
                f"Allowed keys: {', '.join(SERVER_DEFAULT_KEYS)}."
            )

    runtime = MCPRuntime(
        connections,
        callbacks=callbacks,
        tool_interceptors=interceptors,
        connect_timeout_s=connect_timeout_s,
        heartbeat_s=heartbeat_s,
    )
    try:
        loaded = await runtime.aload()
        if runtime.load_errors and strict:
            raise MCPLoadError(runtime.load_errors)
        catalog = _build_catalog(
            runtime,
            loaded,
            catalog_cls=catalog_cls,
            server_descriptions=server_descriptions or {},
            server_defaults=server_defaults or {},
            tool_metadata=tool_metadata or {},
            categories=categories,
            category_descriptions=category_descriptions or {},
            allowed_servers=allowed_servers,
            allowed_tools=allowed_tools,
            default_include=default_include,
            prefix=prefix,
            handle_tool_errors=handle,
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
            stacklevel=3,
        )
    return catalog


def load_mcp_catalog_sync(
    connections_or_client: Mapping[str, Connection] | MultiServerMCPClient, **kwargs: Any
) -> ToolCatalog:
    """:func:`load_mcp_catalog` for code without an event loop (scripts, graph modules).

    Args:
        connections_or_client: as for :func:`load_mcp_catalog`.
        **kwargs: the keyword arguments of :func:`load_mcp_catalog`.

    Returns:
        The catalog.

    Raises:
        RuntimeError: called from a running event loop (use ``await
            ToolCatalog.from_mcp(...)`` there).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(load_mcp_catalog(connections_or_client, **kwargs))
    raise RuntimeError(
        "load_mcp_catalog_sync() was called from a running event loop; "
        "use `await ToolCatalog.from_mcp(...)` instead"
    )


def _build_catalog(
    runtime: MCPRuntime,
    loaded: Mapping[str, list[types.Tool]],
    *,
    catalog_cls: type[ToolCatalog],
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
) -> ToolCatalog:
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
    for key, meta in tool_metadata.items():
        name = resolve(key, "tool_metadata")
        if name is None:
            continue
        if "server" in meta:
            raise ValueError(
                f"tool_metadata[{key!r}] sets 'server'; an MCP tool's server is the one it "
                "was loaded from."
            )
        overrides.setdefault(name, {}).update(meta)

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
            if t.annotations is not None and t.annotations.readOnlyHint is not None:
                meta["is_pure"] = t.annotations.readOnlyHint
            meta.update(server_defaults.get(server, {}))
            meta.update(overrides.get(name, {}))
            metadata[name] = meta
            tool_meta: dict[str, Any] = {**annotations, "server": server, "mcp_tool_name": t.name}
            if t.meta is not None:
                tool_meta["_meta"] = t.meta
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
                    handle_tool_error=_handle_mcp_tool_error if handle_tool_errors else False,
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
    catalog = catalog_cls.from_tools(
        tools,
        categories=cats,
        category_descriptions=descriptions,
        tool_metadata=metadata,
        allowed_tools=[glob.escape(n) for n in kept] if filtering else None,
        default_include=default_include,
    )
    catalog._mcp_runtime = runtime
    return catalog
