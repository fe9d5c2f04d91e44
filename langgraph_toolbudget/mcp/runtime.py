"""The background event loop that owns every MCP session, and :class:`MCPRuntime` over it.

Its one reason to change: how the background loop owns and serves the sessions.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import warnings
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from langchain_mcp_adapters.callbacks import Callbacks
from langchain_mcp_adapters.interceptors import MCPToolCallRequest, ToolCallInterceptor
from langchain_mcp_adapters.sessions import Connection
from mcp import ClientSession, types

from langgraph_toolbudget._compat_mcp import (
    _build_interceptor_chain,
    _convert_call_tool_result,
    _list_all_tools,
)
from langgraph_toolbudget._runner import BackgroundLoop, SyncTimeoutError, background_loop
from langgraph_toolbudget.core.option_checks import check_count, check_seconds
from langgraph_toolbudget.mcp.errors import (
    CLOSED_ERROR,
    HEADERS_ERROR,
    NESTED_SYNC_ERROR,
    RAN,
    RELISTED_WARNING,
    TIMED_OUT,
    TIMEOUT_ERROR,
    UNREADABLE_RESULT_ERROR,
    MCPLoadWarning,
    MCPServerError,
    _describe_error,
    _where,
)
from langgraph_toolbudget.mcp.session import _Generation, _ServerSession, before_deadline

logger = logging.getLogger(__name__)

T = TypeVar("T")


DEFAULT_MAX_ARTIFACT_CHARS = 20_000
"""A call's ``structuredContent`` longer than this (as JSON) is not kept in the tool message's
artifact: the same bound as ``offload_over_chars``' default for text."""
DROPPED_KEY = "structured_content_dropped_chars"

HEARTBEAT_OFF = "no ping"
NO_BOUND = "no bound"


AUDIO_NOTE = "[audio answer, {mime}, not shown]"
"""What stands for an audio item of a call's answer, in its place among the other blocks."""


def converted_result(result: Any) -> tuple[Any, Any]:
    """A call result as the adapters convert it (content blocks, artifact), audio included.

    langchain-mcp-adapters (0.3) raise ``NotImplementedError`` on ``AudioContent``, after
    the tool ran. LangChain's ``audio`` block is no tool message content LangGraph keeps
    (``ToolNode``'s ``msg_content_output`` would turn the whole answer into JSON text,
    base64 included), so an audio item becomes the note :data:`AUDIO_NOTE` instead, and the
    other blocks stay as they are.

    Raises:
        ToolException: an ``isError`` answer, as the adapters raise it.
    """
    items = getattr(result, "content", None)
    if not isinstance(result, types.CallToolResult) or not any(
        isinstance(item, types.AudioContent) for item in items or ()
    ):
        return _convert_call_tool_result(result)
    noted = [
        types.TextContent(type="text", text=AUDIO_NOTE.format(mime=item.mimeType))
        if isinstance(item, types.AudioContent)
        else item
        for item in result.content
    ]
    return _convert_call_tool_result(result.model_copy(update={"content": noted}))


def bounded_result(
    content: Any, artifact: Any, limit: int | None, server: str, tool: str
) -> tuple[Any, Any]:
    """A converted call result whose artifact holds no ``structuredContent`` over ``limit``.

    The artifact is not shown to the model but stays in the tool message, so in the state and
    every checkpoint: a server answering "ok" with 5 MB of ``structuredContent`` would store
    5 MB per call. Over ``limit`` it is dropped (the artifact says how long it was, under
    ``structured_content_dropped_chars``); if the answer has no content besides it, its JSON
    becomes the text content, so the model still gets it (and a large one is offloaded like
    any large text).
    """
    structured = artifact.get("structured_content") if isinstance(artifact, dict) else None
    if limit is None or structured is None:
        return content, artifact
    text = json.dumps(structured, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return content, artifact
    logger.warning(
        "tool %r of MCP server %r answered %d characters of structuredContent, over the %d "
        "kept in a tool message's artifact: dropped",
        tool,
        server,
        len(text),
        limit,
    )
    rest = {k: v for k, v in artifact.items() if k != "structured_content"}
    if not content:
        content = [{"type": "text", "text": text}]
    return content, {**rest, DROPPED_KEY: len(text)}


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


async def _close_all(servers: Mapping[str, _ServerSession]) -> None:
    await asyncio.gather(*(s.shutdown() for s in servers.values()), return_exceptions=True)


async def _relist_weakly(relist: weakref.WeakMethod[Any], server: str, gen: Any) -> None:
    """``relist(server, gen)``, unless its runtime is gone."""
    method = relist()
    if method is not None:
        await method(server, gen)


def _close_sessions(runner: BackgroundLoop, servers: Mapping[str, _ServerSession]) -> None:
    """Close every session (sync; also the finalizer at interpreter exit)."""
    if runner.in_loop_thread():
        runner.submit(_close_all(servers))  # cannot wait on our own loop: closes in the background
        return
    try:
        runner.run_sync(_close_all(servers), timeout=15)
    except SyncTimeoutError:
        logger.warning("MCP sessions did not close within 15 s; left to exit with the process")


class MCPRuntime:
    """Persistent MCP sessions, one per server, on the process's MCP background loop.

    MCP sessions are bound to the event loop that opened them, while a graph
    may run under a sync ``invoke``, an ``ainvoke`` in any loop, Jupyter or
    ``langgraph dev``. Every session therefore lives on one long-lived loop on
    a daemon thread (``langgraph_toolbudget._runner.background_loop("mcp")``,
    shared by all runtimes); :meth:`call` (sync) and :meth:`acall` (async,
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
        max_artifact_chars: int | None = DEFAULT_MAX_ARTIFACT_CHARS,
    ) -> None:
        """Set up the sessions; they open on :meth:`aload` or the first call.

        Args:
            connections: server name -> connection dict, as for
                ``MultiServerMCPClient`` (stdio, streamable_http, sse, websocket).
            callbacks: the adapters' ``Callbacks`` (logging, progress,
                elicitation); they run on the background loop.
            tool_interceptors: the adapters' tool-call interceptors; they run on
                the background loop.
            connect_timeout_s: at load (:meth:`aload`), seconds a server has to start, answer
                ``initialize`` and list its tools (one deadline); when a session is re-opened
                later, seconds to start and answer ``initialize``, then as many to list its
                tools again (a loaded tool it no longer lists is refused before its calls are
                sent, and an :class:`MCPLoadWarning` names it: see :meth:`_relist`).
            heartbeat_s: while calls are pending, ping each busy server this
                often so a server that died mid-call is noticed (HTTP transports
                otherwise wait forever); ``None`` disables it.
            max_artifact_chars: a call's ``structuredContent`` longer than this (as
                JSON) is dropped from the tool message's artifact (see
                :func:`bounded_result`); ``None``: kept whatever its size.

        Raises:
            TypeError: ``connect_timeout_s`` or ``heartbeat_s`` that is not a number,
                ``max_artifact_chars`` that is not an integer (``True`` is neither).
            ValueError: a number of seconds that is not above 0 and finite,
                ``max_artifact_chars`` below 0.
        """
        check_seconds("MCPRuntime", "connect_timeout_s", connect_timeout_s)
        check_seconds("MCPRuntime", "heartbeat_s", heartbeat_s, none=HEARTBEAT_OFF)
        check_count(
            "MCPRuntime",
            "max_artifact_chars",
            max_artifact_chars,
            minimum=0,
            unit="characters",
            none=NO_BOUND,
        )
        self.connections: dict[str, Connection] = dict(connections)
        self.max_artifact_chars = max_artifact_chars
        self.connect_timeout_s = connect_timeout_s
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
        self._loaded_tools: dict[str, dict[str, types.Tool]] = {}
        self._reported: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {}
        # Weakly: the session's owner task (on the background loop) holds its callback, and
        # a strong one would keep a catalog dropped without close() and its servers alive.
        relist = weakref.WeakMethod(self._relist)
        for name, session in self._sessions.items():
            session.on_reopen = partial(_relist_weakly, relist, name)
        self._runner = background_loop("mcp")
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_sessions, self._runner, self._sessions)

    # -- plumbing --

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` or :meth:`close` ran."""
        return self._closed

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The background event loop every session lives on."""
        return self._runner.loop

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the background loop and block for its result.

        Args:
            coro: the coroutine.
            timeout: seconds to wait; on expiry the coroutine is cancelled.

        Returns:
            The coroutine's result.

        Raises:
            RuntimeError: the runtime is closed, or this is the background loop's
                own thread (an interceptor or callback): waiting there would stop
                the sessions the coroutine needs.
            SyncTimeoutError: ``timeout`` expired (the coroutine was cancelled).
        """
        if self._runner.in_loop_thread():
            coro.close()
            raise RuntimeError(NESTED_SYNC_ERROR)
        if self._closed:
            coro.close()
            raise RuntimeError("this MCP runtime is closed")
        return self._runner.run_sync(coro, timeout)

    async def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the background loop and await it from any loop.

        Cancelling the awaiting task cancels the coroutine on the background loop.

        Args:
            coro: the coroutine.

        Returns:
            The coroutine's result.

        Raises:
            RuntimeError: the runtime is closed.
        """
        if self._closed:
            coro.close()
            raise RuntimeError("this MCP runtime is closed")
        return await self._runner.run_async(coro)

    # -- loading --

    async def aload(
        self, servers: Sequence[str] | None = None, *, deadline: float | None = None
    ) -> dict[str, list[types.Tool]]:
        """Open the servers' sessions and list their tools, concurrently.

        Failures are recorded in :attr:`load_errors` (and the failed server's
        session closed), never raised.

        Args:
            servers: the servers to load (default: every server).
            deadline: ``time.monotonic()`` by which each must have listed its tools
                (default: ``connect_timeout_s`` from now).

        Returns:
            server name -> its MCP tools, for the servers that loaded.
        """
        names = list(self._sessions if servers is None else servers)
        if deadline is None:
            deadline = time.monotonic() + self.connect_timeout_s
        return await self.run_async(self._load_all(names, deadline))

    async def _load_all(self, names: list[str], deadline: float) -> dict[str, list[types.Tool]]:
        results = await asyncio.gather(
            *(self._load_one(n, deadline) for n in names), return_exceptions=True
        )
        loaded: dict[str, list[types.Tool]] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):
                cause = result.__cause__ if isinstance(result, MCPServerError) else None
                await self._leave_out(name, cause or result)
            elif result is not None:
                loaded[name] = result
        return loaded

    async def _load_one(self, name: str, deadline: float) -> list[types.Tool] | None:
        """The server's tools; None if it failed to list them (then it is left out)."""
        server = self._sessions[name]
        gen = await server.ensure_open(deadline=deadline)  # the first step
        try:
            listing = gen.answer(_list_all_tools(gen.session))
            tools = await before_deadline(listing, deadline, "tools/list", self.connect_timeout_s)
        except TimeoutError as exc:  # its message names tools/list
            await self._leave_out(name, exc)
            return None
        except Exception as exc:
            await self._leave_out(name, exc, request="tools/list")
            return None
        self._loaded_tools[name] = {}
        for tool in tools:  # a name listed twice: its first listing stands, as in the catalog
            self._loaded_tools[name].setdefault(tool.name, tool)
        return tools

    async def _relist(self, server: str, gen: _Generation) -> None:
        """List the tools of a server whose session was re-opened (it restarted) and compare
        them with the load's: a loaded tool it no longer lists is refused before its calls are
        sent (:attr:`_ServerSession.gone`), and one :class:`MCPLoadWarning` names the tools
        gone or whose input schema changed, each time that set changes. Bounded by
        ``connect_timeout_s``; a listing that fails is logged and changes nothing."""
        loaded = self._loaded_tools.get(server)
        if loaded is None:
            return
        deadline = time.monotonic() + self.connect_timeout_s
        try:
            listing = gen.answer(_list_all_tools(gen.session))
            since = "the server's re-opening"
            tools = await before_deadline(
                listing, deadline, "tools/list", self.connect_timeout_s, since
            )
        except Exception as exc:  # noqa: BLE001 - the calls go on with the tools as loaded
            logger.warning(
                "MCP server %r was re-opened but did not list its tools again (%s); its tools "
                "are called as loaded",
                server,
                _describe_error(exc, self.connections[server]),
            )
            return
        now: dict[str, types.Tool] = {}
        for tool in tools:
            now.setdefault(tool.name, tool)
        gone = frozenset(n for n in loaded if n not in now)
        changed = tuple(
            n for n, t in loaded.items() if n in now and now[n].inputSchema != t.inputSchema
        )
        self._sessions[server].gone = gone
        if self._reported.get(server, (frozenset(), ())) == (gone, changed):
            return
        self._reported[server] = (gone, changed)
        if not (gone or changed):
            logger.info("MCP server %r lists its loaded tools again", server)
            return
        named = self._catalog_names(server)
        changes = []
        if gone:
            tools_gone = ", ".join(named(n) for n in loaded if n in gone)
            changes.append(
                f"it no longer lists {tools_gone} (their calls are refused before they are "
                "sent, with an error naming the server)"
            )
        if changed:
            changes.append(
                f"{', '.join(named(n) for n in changed)} now take another input schema (they "
                "are still offered to the model with the one loaded)"
            )
        warnings.warn(
            RELISTED_WARNING.format(server=server, changes="; ".join(changes)),
            MCPLoadWarning,
            stacklevel=2,
        )

    def _catalog_names(self, server: str) -> Callable[[str], str]:
        """MCP name -> how a warning names the tool: its catalog name, and its MCP name if
        that differs."""
        info = self.servers.get(server)
        catalog = {mcp: name for name, mcp in (info.tools if info else {}).items()}

        def named(mcp_name: str) -> str:
            name = catalog.get(mcp_name, mcp_name)
            return repr(name) if name == mcp_name else f"{name!r} (MCP name {mcp_name!r})"

        return named

    async def aleave_out(self, server: str, error: BaseException) -> None:
        """Leave a server out of the load: record ``error`` in :attr:`load_errors` and close
        its session.

        Args:
            server: the server's name.
            error: why it failed to load.
        """
        await self.run_async(self._leave_out(server, error))

    async def _leave_out(
        self, server: str, error: BaseException, *, request: str | None = None
    ) -> None:
        connection = self.connections[server]
        why = _describe_error(error, connection)
        if request is not None:  # the server answered, or failed, after it was opened
            why = f"{request} failed: {why}"
        self.load_errors[server] = f"{why} ({_where(connection)})"
        await self._sessions[server].close()

    def init_result(self, server: str) -> types.InitializeResult | None:
        """The ``initialize`` result of a server's latest session (None if never opened)."""
        return self._sessions[server].init_result

    def sessions_opened(self, server: str) -> int:
        """How many sessions to this server have been opened so far (reconnects + 1)."""
        return self._sessions[server].opened

    # -- calls --

    async def _with_session(
        self, server: str, request: Callable[[ClientSession], Awaitable[T]]
    ) -> T:
        gen = await self._sessions[server].ensure_open()
        return await request(gen.session)

    def session_request(
        self,
        server: str,
        request: Callable[[ClientSession], Awaitable[T]],
        *,
        tool: str,
        timeout_s: float | None = None,
    ) -> T:
        """Run ``request(session)`` with the server's live session, blocking (sync callers),
        for the prompt/resource tool ``tool``, as an MCP tool's call is run (:meth:`call`):
        refused once the runtime is closed; an :class:`MCPServerError` past ``timeout_s``
        (then the server is checked, and its session re-opened if it does not answer), when
        the session cannot open or when it dies during the request; the request's own errors
        (the server's answer) as they are.
        """
        work = partial(self._sessions[server].request, tool, request)
        return self._run_tool(server, tool, work, timeout_s)

    async def asession_request(
        self,
        server: str,
        request: Callable[[ClientSession], Awaitable[T]],
        *,
        tool: str | None = None,
        timeout_s: float | None = None,
    ) -> T:
        """Async :meth:`session_request`: awaits the request on the background loop. With
        ``tool`` (a prompt/resource tool's call) it is run as :meth:`acall` runs a tool call,
        bounded by ``timeout_s``; without (the loader's requests), it is only sent over the
        live session."""
        if tool is None:
            return await self.run_async(self._with_session(server, request))
        self._check_open(server, tool)
        return await self._arun_tool(
            server, tool, self._sessions[server].request(tool, request), timeout_s
        )

    def _check_open(self, server: str, tool: str) -> None:
        if self._closed:
            raise MCPServerError(CLOSED_ERROR.format(tool=tool, server=server), server=server)

    def _run_tool(
        self,
        server: str,
        tool: str,
        work: Callable[[], Coroutine[Any, Any, T]],
        timeout_s: float | None,
    ) -> T:
        """``work()`` on the background loop for a sync caller of ``tool``."""
        self._check_open(server, tool)
        try:
            return self.run_sync(work(), timeout_s)
        except SyncTimeoutError:
            raise _timed_out(server, tool, timeout_s) from None

    async def _arun_tool(
        self, server: str, tool: str, work: Coroutine[Any, Any, T], timeout_s: float | None
    ) -> T:
        """``work`` on the background loop for an async caller of ``tool``, bounded by
        ``timeout_s`` (:meth:`_run_tool`'s async twin)."""
        try:
            return await asyncio.wait_for(self.run_async(work), timeout_s)
        except TimeoutError:
            raise _timed_out(server, tool, timeout_s) from None

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
        try:
            content, artifact = converted_result(result)
        except (NotImplementedError, ValueError) as exc:  # content the adapters cannot convert
            cause = _describe_error(exc)
            message = UNREADABLE_RESULT_ERROR.format(server=server, tool=tool, cause=cause)
            raise MCPServerError(message, server=server, tool=tool, advice=RAN) from exc
        return bounded_result(content, artifact, self.max_artifact_chars, server, tool)

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
        work = partial(self._call, server, tool, mcp_name, arguments)
        return self._run_tool(server, tool, work, timeout_s)

    async def acall(
        self,
        server: str,
        tool: str,
        mcp_name: str,
        arguments: dict[str, Any],
        *,
        timeout_s: float | None = None,
    ) -> tuple[Any, Any]:
        """Call an MCP tool from any event loop without blocking it.

        Cancelling the awaiting task (e.g. ``asyncio.wait_for``) cancels the
        call on the background loop and sends the server a cancellation.

        Args:
            server: the server's name.
            tool: the tool's catalog name (for messages).
            mcp_name: the tool's name on the server.
            arguments: the call's arguments.
            timeout_s: cancel the call after this many seconds (as :meth:`call`).

        Returns:
            ``(content, artifact)`` as the adapters convert a ``CallToolResult``.

        Raises:
            MCPServerError: the server is down, died, timed out or rejected the call.
            ToolException: the tool itself reported an error (``isError``).
        """
        self._check_open(server, tool)
        return await self._arun_tool(
            server, tool, self._call(server, tool, mcp_name, arguments), timeout_s
        )

    # -- closing --

    async def aclose(self) -> None:
        """Close every session (stopping stdio server processes). Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._runner.run_async(_close_all(self._sessions))
        self._finalizer.detach()

    def close(self) -> None:
        """Sync :meth:`aclose`, for scripts without an event loop. Idempotent.

        From the background loop's own thread the sessions close in the background.
        """
        if self._closed:
            return
        self._closed = True
        self._finalizer()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"MCPRuntime({sorted(self.servers)}, {state})"


def _timed_out(server: str, tool: str, timeout_s: float | None) -> MCPServerError:
    """The error of a call cancelled at its ``timeout_s``."""
    message = TIMEOUT_ERROR.format(tool=tool, server=server, timeout=timeout_s)
    return MCPServerError(message, server=server, tool=tool, advice=TIMED_OUT)
