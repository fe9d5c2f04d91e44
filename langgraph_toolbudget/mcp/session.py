"""One MCP server's persistent session: open, reconnect, heartbeat and cancel notification.

Its one reason to change: how one server's session is kept alive.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from langchain_mcp_adapters.callbacks import CallbackContext, Callbacks
from langchain_mcp_adapters.sessions import Connection
from mcp import ClientSession, types

from langgraph_toolbudget._compat_mcp import _MCPCallbacks, next_request_id, transport_closed
from langgraph_toolbudget.mcp.errors import (
    BAD_OUTPUT_ERROR,
    CALL_FAILED_ERROR,
    CALL_REJECTED_ERROR,
    CLOSED_ERROR,
    LOAD_TIMEOUT_ERROR,
    MAY_HAVE_RUN,
    NO_LONGER_LISTED_ERROR,
    NOT_LISTED_ADVICE,
    OPEN_FAILED_ERROR,
    RAN,
    READ_TIMEOUT_ERROR,
    SESSION_CLOSED_ERROR,
    SINCE_LOAD,
    SINCE_OPEN,
    TOLD_TO_CANCEL,
    UNREADABLE_RESULT_ERROR,
    MCPServerError,
    _describe_error,
    _is_connection_closed,
    _is_session_terminated,
    _is_transport_error,
    _leaf,
    _where,
    is_read_timeout,
    is_unreadable_output,
    is_unreadable_result,
    is_wrong_shape_result,
)
from langgraph_toolbudget.mcp.stdio import open_session, unreadable_reason

logger = logging.getLogger(__name__)
T = TypeVar("T")
CONNECTION_LOST = "the connection was lost"
"""The cause a call gets when its server goes away under it, however the session notices."""


async def before_deadline(
    awaitable: Awaitable[T],
    deadline: float,
    what: str,
    timeout_s: float,
    since: str = SINCE_LOAD,
) -> T:
    """``await awaitable``, cancelled at ``deadline`` (a ``time.monotonic()``).

    Args:
        awaitable: a step of a server's load or opening.
        deadline: when it is cancelled.
        what: the step, for the message (``"tools/list"``).
        timeout_s: the ``connect_timeout_s`` the deadline comes from.
        since: what the deadline is counted from (:data:`SINCE_LOAD`, :data:`SINCE_OPEN`).

    Raises:
        TimeoutError: the deadline passed; names the step and ``connect_timeout_s``.
    """
    with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
        return await awaitable
    raise TimeoutError(LOAD_TIMEOUT_ERROR.format(what=what, timeout=timeout_s, since=since))


PROBE_TIMEOUT_S = 5.0
"""Seconds a server has to answer a ping after one of its calls was abandoned (timed out)."""
PROBE_GRACE_S = 0.5
"""Seconds a call waits for that ping before it fails instead (a healthy server answers a ping
in milliseconds; a stuck one is re-opened, and the calls queued behind it should not each
wait for that)."""

BEING_CHECKED_ERROR = (
    "MCP server {server!r} did not answer an earlier call in time and is being checked (a "
    "ping, within {probe:g} s; if it does not answer, its session is re-opened), so tool "
    "{tool!r} was not sent to it. Call it again in a moment."
)


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """Mark a future's exception as retrieved (no "never retrieved" log)."""
    if not fut.cancelled():
        fut.exception()


def _background_task(
    coro: Coroutine[Any, Any, T],
    *,
    name: str | None = None,
    on_done: tuple[Callable[[asyncio.Task[T]], object], ...] = (),
) -> asyncio.Task[T]:
    """A task on the running loop that may outlive the call starting it, in an empty context.

    A task runs in a copy of the context it is created in, and a done callback in a copy of
    the one it is added in, which the task keeps (the callback's until it is done). Made in
    a graph run, that copy holds LangGraph's run config, so the run's graph and every tool
    and catalog it reaches: a session's owner task runs as long as its server, and kept a
    catalog dropped after the run (a notebook cell run again) from being collected and its
    servers from being stopped.

    Args:
        coro: the task's coroutine.
        name: the task's name.
        on_done: callbacks called with the task once it is done.
    """
    task = asyncio.get_running_loop().create_task(coro, name=name, context=contextvars.Context())
    for callback in on_done:
        task.add_done_callback(callback, context=contextvars.Context())
    return task


@dataclass(eq=False)
class _Generation:
    """One opened session of a server: the session, its owner task and its events."""

    session: ClientSession
    init: types.InitializeResult
    owner: asyncio.Task[None]
    closing: asyncio.Event
    dead: asyncio.Event
    unreadable: asyncio.Future[Exception]
    """Set to the first exception the transport handed the session instead of an answer."""
    inflight: int = 0
    heartbeat: asyncio.Task[None] | None = None
    probe: asyncio.Task[None] | None = None
    pid: int = field(default_factory=os.getpid)
    """The process that opened it: a forked copy has neither its tasks nor its transport."""

    def forget(self, task: asyncio.Task[None]) -> None:
        """Drop a finished heartbeat or probe task: the generation keeps no finished task."""
        if self.heartbeat is task:
            self.heartbeat = None
        if self.probe is task:
            self.probe = None

    async def answer(self, request: Coroutine[Any, Any, T]) -> T:
        """``request``'s result, or at once an error if the transport handed the session an
        exception instead of an answer first (the HTTP transports give it to no request)."""
        task = asyncio.ensure_future(request)
        try:
            waiting: set[asyncio.Future[Any]] = {task, self.unreadable}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return task.result()
            raise ConnectionError(unreadable_reason(self.unreadable.result()))
        finally:
            task.cancel()


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
        self.on_reopen: Callable[[_Generation], Awaitable[None]] | None = None
        """Run on every session opened after the first (a restarted server), before any call
        uses it: the runtime lists the tools again there (:attr:`gone`)."""
        self.gone: frozenset[str] = frozenset()
        """The MCP names of loaded tools the server's latest session no longer lists: their
        calls are refused before they are sent."""
        self._gen: _Generation | None = None
        self._lock: asyncio.Lock | None = None
        self._closed = False
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
        if gen is None or gen.pid != os.getpid() or gen.owner.done() or gen.dead.is_set():
            return False
        return not transport_closed(gen.session)

    async def ensure_open(
        self, tool: str | None = None, *, deadline: float | None = None
    ) -> _Generation:
        """The live session, opening (or re-opening) it if needed.

        The opening (the server's start and ``initialize``) has until ``deadline``, a
        ``time.monotonic()`` (the load's), or else ``connect_timeout_s``.

        A session being probed after an abandoned call (:meth:`_probe`) is waited
        for :data:`PROBE_GRACE_S` at most: a healthy server answers by then; a stuck
        one fails the call at once (naming ``tool``, the call's tool) rather than
        queueing it behind the stuck call, the ping and the re-opening.

        Raises:
            MCPServerError: the session cannot be opened, is being checked after a
                timed-out call, or was closed for good (:meth:`shutdown`); names the server.
        """
        if self._closed:
            raise self._closed_error(tool)
        if self._gen is not None and self._gen.pid != os.getpid():
            # a fork's copy of the parent's session (gunicorn --preload): open our own
            self._gen, self._lock = None, None
        gen = self._gen
        if gen is not None and gen.probe is not None and not gen.probe.done():
            done, _ = await asyncio.wait({gen.probe}, timeout=PROBE_GRACE_S)  # never cancels it
            if not done and tool is not None:
                raise MCPServerError(
                    BEING_CHECKED_ERROR.format(server=self.name, probe=PROBE_TIMEOUT_S, tool=tool),
                    server=self.name,
                    tool=tool,
                )
            if not done:
                await asyncio.wait({gen.probe})  # bounded by PROBE_TIMEOUT_S
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
                gen = await self._open(deadline)
            except Exception as exc:
                raise MCPServerError(
                    OPEN_FAILED_ERROR.format(
                        server=self.name,
                        where=_where(self.connection),
                        cause=_describe_error(exc, self.connection),
                    ),
                    server=self.name,
                ) from exc
            if self.opened and self.on_reopen is not None:  # before any call may use it
                try:
                    await self.on_reopen(gen)
                except BaseException:  # cancelled: the next call opens (and checks) a new one
                    self._spawn(self._close_generation(gen))
                    raise
            if self._closed:  # shut down while it opened: nothing may outlive the shutdown
                await self._close_generation(gen)
                raise self._closed_error(tool)
            self._gen, self.init_result = gen, gen.init
            self.opened += 1
            return gen

    def _closed_error(self, tool: str | None) -> MCPServerError:
        if tool is None:
            message = SESSION_CLOSED_ERROR.format(server=self.name)
        else:
            message = CLOSED_ERROR.format(tool=tool, server=self.name)
        return MCPServerError(message, server=self.name, tool=tool)

    async def _open(self, deadline: float | None) -> _Generation:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[ClientSession, types.InitializeResult]] = loop.create_future()
        ready.add_done_callback(_retrieve)
        unreadable: asyncio.Future[Exception] = loop.create_future()

        def report(exc: Exception) -> None:
            if not unreadable.done():
                unreadable.set_result(exc)
            if not ready.done():  # initialize's answer: fail the opening at once
                ready.set_exception(ConnectionError(unreadable_reason(exc)))

        closing, dead = asyncio.Event(), asyncio.Event()
        owner = _background_task(
            self._own(ready, closing, dead, report), name=f"mcp-session-{self.name}"
        )
        since = SINCE_LOAD if deadline is not None else SINCE_OPEN
        if deadline is None:
            deadline = time.monotonic() + self.connect_timeout_s
        try:
            session, init = await before_deadline(
                asyncio.shield(ready), deadline, "initialize", self.connect_timeout_s, since
            )
        except BaseException:
            owner.cancel()
            await asyncio.wait({owner}, timeout=5)
            raise
        return _Generation(session, init, owner, closing, dead, unreadable)

    async def _own(
        self,
        ready: asyncio.Future[tuple[ClientSession, types.InitializeResult]],
        closing: asyncio.Event,
        dead: asyncio.Event,
        report: Callable[[Exception], None],
    ) -> None:
        """Owner task: enter the session's context, wait until closing, exit it."""
        error: BaseException | None = None
        try:
            async with open_session(
                self.connection, self._mcp_callbacks(), report, name=self.name
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
        """Close the current session, if any (the next call opens a new one)."""
        gen, self._gen = self._gen, None
        if gen is not None:
            await self._close_generation(gen)

    async def shutdown(self) -> None:
        """Close the session for good: no call opens a new one after this.

        Returns once a session a call was opening meanwhile is closed too (it closes it
        itself, in :meth:`ensure_open`): then no server process is left running.
        """
        self._closed = True
        await self.close()
        if self._lock is not None:
            async with self._lock:
                pass

    @staticmethod
    async def _close_generation(gen: _Generation) -> None:
        """Close one session and wait, boundedly, for its owner task to exit."""
        if gen.pid != os.getpid():  # the parent's, copied by a fork: its tasks do not run here
            return
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
        task = _background_task(coro, on_done=(self._background.discard, _retrieve))
        self._background.add(task)

    # -- calls --

    async def call_tool(
        self, tool: str, mcp_name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        """Call one tool over the persistent session (see :meth:`request`).

        Raises:
            MCPServerError: the session could not be opened, died during the
                call, or the server rejected the request.
        """

        async def send(session: ClientSession) -> types.CallToolResult:
            if mcp_name in self.gone:
                message = NO_LONGER_LISTED_ERROR.format(server=self.name, tool=tool)
                raise MCPServerError(message, server=self.name, tool=tool, advice=NOT_LISTED_ADVICE)
            return await session.call_tool(
                mcp_name,
                arguments,
                progress_callback=self._mcp_callbacks(mcp_name).progress_callback,
            )

        try:
            return await self.request(tool, send, notify_cancel=True)
        except MCPServerError:
            raise
        except Exception as exc:
            cause = _describe_error(exc, self.connection)
            template, advice = CALL_REJECTED_ERROR, None
            if is_read_timeout(exc):
                template, advice = READ_TIMEOUT_ERROR + TOLD_TO_CANCEL, MAY_HAVE_RUN
            elif is_unreadable_output(exc):
                template, advice = BAD_OUTPUT_ERROR, RAN
            elif is_unreadable_result(exc):
                template, advice = UNREADABLE_RESULT_ERROR, RAN
                cause = cause.removeprefix("McpError: ")
            elif is_wrong_shape_result(exc):
                template, advice = UNREADABLE_RESULT_ERROR, RAN
                cause = unreadable_reason(_leaf(exc))
            message = template.format(server=self.name, tool=tool, cause=cause)
            raise MCPServerError(message, server=self.name, tool=tool, advice=advice) from exc

    async def request(
        self,
        tool: str,
        send: Callable[[ClientSession], Awaitable[T]],
        *,
        notify_cancel: bool = False,
    ) -> T:
        """``send(session)`` over the persistent session, as a call of ``tool`` (an MCP tool's,
        or a prompt/resource tool's requests).

        While it is pending the server is pinged every ``heartbeat_s``, so a connection that
        died is noticed; if the call is cancelled (its timeout), the server is pinged and its
        session dropped unless it answers (:meth:`_probe`), and with ``notify_cancel`` the
        server is told to stop the request (``send``'s first request: a tool call's only one).
        A server that no longer knows the session (an HTTP server restarted between calls
        answers 404) never ran the request, so it is sent once more on a new session, as the
        MCP spec asks.

        Raises:
            MCPServerError: the session could not be opened, or died during the call (the
                message names the server and ``tool``).
            Exception: what ``send`` raised that is not a transport failure (the server's
                answer, e.g. an ``McpError`` rejecting the request), as it is.
        """
        try:
            return await self._request_once(tool, send, notify_cancel)
        except MCPServerError as exc:
            if exc.__cause__ is None or not _is_session_terminated(exc.__cause__):
                raise
        logger.info("MCP server %r forgot the session; calling %r on a new one", self.name, tool)
        return await self._request_once(tool, send, notify_cancel)

    async def _request_once(
        self, tool: str, send: Callable[[ClientSession], Awaitable[T]], notify_cancel: bool
    ) -> T:
        gen = await self.ensure_open(tool)
        session = gen.session
        request_id: list[int | None] = []

        async def sending() -> T:
            # send_request takes this id synchronously before its first await.
            request_id.append(next_request_id(session))
            return await send(session)

        loop = asyncio.get_running_loop()
        call = loop.create_task(sending())
        watch = loop.create_task(gen.dead.wait())
        gen.inflight += 1
        if self.heartbeat_s and (gen.heartbeat is None or gen.heartbeat.done()):
            beat = self._beat(gen, self.heartbeat_s)
            gen.heartbeat = _background_task(beat, on_done=(gen.forget,))
        try:
            await asyncio.wait({call, watch}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            sent = request_id[0] if request_id else None
            if notify_cancel and sent is not None and not gen.dead.is_set():
                self._spawn(self._notify_cancelled(session, sent))
            if not gen.dead.is_set() and (gen.probe is None or gen.probe.done()):
                gen.probe = _background_task(self._probe(gen), on_done=(_retrieve, gen.forget))
            raise
        finally:
            watch.cancel()
            gen.inflight -= 1
        if not call.done():
            call.cancel()
            call.add_done_callback(_retrieve)
            self._mark_dead(gen)
            raise self._failed(tool, CONNECTION_LOST)
        try:
            return call.result()
        except Exception as exc:
            sent = request_id[0] if request_id else None
            if is_read_timeout(exc) and notify_cancel and sent is not None:
                self._spawn(self._notify_cancelled(session, sent))  # the server may run on
            if _is_transport_error(exc):
                self._mark_dead(gen)
                lost = _is_connection_closed(exc)
                cause = CONNECTION_LOST if lost else _describe_error(exc, self.connection)
                raise self._failed(tool, cause) from exc
            raise

    def _failed(self, tool: str, cause: str) -> MCPServerError:
        message = CALL_FAILED_ERROR.format(
            server=self.name, tool=tool, cause=cause, where=_where(self.connection)
        )
        return MCPServerError(message, server=self.name, tool=tool, advice=MAY_HAVE_RUN)

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

    async def _probe(self, gen: _Generation) -> None:
        """After a call was abandoned, drop the session unless the server answers a ping.

        A server that timed out may be stuck (blocked in a tool, or still writing a
        huge answer every later message must wait behind); rather than queue the
        next calls behind it, the session is closed (a stdio server is stopped) and
        the next call opens a new one.
        """
        try:
            with anyio.fail_after(PROBE_TIMEOUT_S):
                await gen.session.send_ping()
        except Exception as exc:  # noqa: BLE001 - classified below
            stuck = isinstance(exc, TimeoutError) or _is_transport_error(exc)
            if stuck and not gen.dead.is_set():
                logger.info(
                    "MCP server %r did not answer a ping within %s s after a call was"
                    " abandoned; its session is closed and re-opened on the next call",
                    self.name,
                    PROBE_TIMEOUT_S,
                )
                self._mark_dead(gen)

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
