"""The MCP fault matrix: each fault on a real server, what the model sees, and the recovery.

Shared by ``tests/test_mcp_faults.py`` (asserts the outcomes, never timings) and
``benchmarks/mcp_faults.py`` (prints the table with recovery times). Each scenario
runs the ``fault_server.py`` FastMCP server over ``stdio`` or ``streamable_http``
(127.0.0.1), loads it with ``load_mcp_catalog`` and calls its tools through a
``ToolExecutor`` under ``ainvoke``, as an agent would.

A scenario returns a :class:`FaultRow`: the answer the model got for the faulty
call (status and a short excerpt), whether the next call succeeded, and the
seconds from the fault to that first success (a restart included for HTTP, where
the killed server must be started again by someone).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_toolbudget import MCPServerError, ToolExecutor, load_mcp_catalog

from . import free_port, http_server

SERVER = Path(__file__).with_name("fault_server.py")
TRANSPORTS = ("stdio", "streamable_http")
TIMEOUT_S = 1.0  # timeout_s of the tools in these scenarios
WAIT_S = 30.0
BLOCK_S = 12.0  # how long "block" stops the whole server (longer than the probe after a timeout)
READER = "faults__read_resource"  # the server's resources (hang://N, block://N) as a tool


@dataclass
class FaultRow:
    """One cell of the matrix."""

    scenario: str
    transport: str
    status: str  # of the faulty call's ToolMessage ("" when there was none)
    model_sees: str  # an excerpt of what the model got
    length: int  # characters of the answer (stored whole when it was offloaded)
    recovered: bool  # the next call succeeded
    recovery_s: float | None = None
    sessions_opened: int | None = None  # sessions to the server by the end (1: never reconnected)


class Rig:
    """A server (stdio or HTTP) and a catalog plus executor over it."""

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.port = free_port()
        self._http: Any = None
        self.catalog: Any = None
        self.node: Any = None

    def connection(self) -> dict[str, Any]:
        if self.transport == "stdio":
            return {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)]}
        return {"transport": "streamable_http", "url": f"http://127.0.0.1:{self.port}/mcp"}

    def start_http(self) -> None:
        self._http = http_server(str(SERVER), port=self.port)
        self.server = self._http.__enter__()

    def stop_http(self) -> None:
        if self._http is not None:
            self._http.__exit__(None, None, None)
            self._http = None

    async def load(
        self,
        hang_timeout_s: float = TIMEOUT_S,
        big_timeout_s: float | None = None,
        reader_timeout_s: float = TIMEOUT_S,
        **options: Any,
    ) -> None:
        metadata: dict[str, dict[str, Any]] = {
            "hang": {"timeout_s": hang_timeout_s},
            "block": {"timeout_s": TIMEOUT_S},
            # the prompt/resource tool, visible without add_tool
            READER: {"timeout_s": reader_timeout_s, "include": "always"},
        }
        if big_timeout_s is not None:  # else the MCP default (60 s)
            metadata["big"] = {"timeout_s": big_timeout_s}
        self.catalog = await load_mcp_catalog(
            {"faults": self.connection()}, tool_metadata=metadata, heartbeat_s=0.2, **options
        )
        self.node = ToolExecutor(self.catalog, mode="parallel_safe")

    async def call(self, name: str, **args: Any) -> ToolMessage:
        call_id = uuid.uuid4().hex[:8]
        state = {
            "messages": [HumanMessage("go"), AIMessage("", tool_calls=[
                {"name": name, "args": args, "id": call_id, "type": "tool_call"}])],
            "selected_tools": list(self.catalog.tool_names),
        }  # fmt: skip
        (message,) = (await self.node.ainvoke(state))["messages"]
        assert message.tool_call_id == call_id
        return message

    async def pid(self) -> int:
        return int(text_of(await self.call("server_pid")))

    async def kill(self) -> None:
        if self.transport == "stdio":
            os.kill(await self.pid(), signal.SIGKILL)
        else:
            self.server.kill()

    async def recover(self, since: float) -> tuple[bool, float | None]:
        """Restart a killed HTTP server; then call ``echo`` until it answers, within WAIT_S."""
        if self.transport == "streamable_http" and self.server.process.poll() is not None:
            self.stop_http()
            self.start_http()
        deadline = time.monotonic() + WAIT_S
        while (left := deadline - time.monotonic()) > 0:
            try:  # a call queued behind a stuck one must not count as recovered late
                answer = await asyncio.wait_for(self.call("echo", text="back"), left)
            except TimeoutError:
                break
            if answer.status != "error" and text_of(answer) == "back":
                return True, time.monotonic() - since
            await asyncio.sleep(0.05)
        return False, None


@asynccontextmanager
async def rig(transport: str, **options: Any) -> AsyncIterator[Rig]:
    r = Rig(transport)
    if transport == "streamable_http":
        r.start_http()
    try:
        await r.load(**options)
        async with r.catalog:
            yield r
    finally:
        r.stop_http()


def text_of(message: ToolMessage) -> str:
    """A tool message's text (MCP results come as content blocks)."""
    if isinstance(message.content, str):
        return message.content
    return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in message.content)


def _row(scenario: str, transport: str, message: ToolMessage | None, **kw: Any) -> FaultRow:
    content = "" if message is None else text_of(message)
    status = "" if message is None else str(message.status)
    artifact = getattr(message, "artifact", None)
    offloaded = artifact.get("offloaded") if isinstance(artifact, dict) else None
    # an offloaded answer (the default over 20,000 characters) is whole in the store
    length = offloaded["chars"] if offloaded else len(content)
    return FaultRow(scenario, transport, status, content[:120], length, **kw)


async def killed_mid_call(transport: str) -> FaultRow:
    async with rig(transport, hang_timeout_s=WAIT_S) as r:
        marker = Path(tempfile.mkdtemp()) / "started"
        slow = asyncio.create_task(r.call("hang", seconds=60, marker=str(marker)))
        deadline = time.monotonic() + WAIT_S
        while not marker.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        start = time.monotonic()
        await r.kill()
        message = await slow
        recovered, seconds = await r.recover(start)
        return _row("killed mid-call", transport, message, recovered=recovered, recovery_s=seconds)


async def killed_between_calls(transport: str) -> FaultRow:
    async with rig(transport) as r:
        await r.call("echo", text="first")
        start = time.monotonic()
        await r.kill()
        await asyncio.sleep(0.3)  # the client notices the server went away
        message = await r.call("echo", text="after")
        if message.status != "error":
            return _row("killed between calls", transport, message, recovered=True,
                        recovery_s=time.monotonic() - start)  # fmt: skip
        recovered, seconds = await r.recover(start)
        return _row("killed between calls", transport, message, recovered=recovered,
                    recovery_s=seconds)  # fmt: skip


async def hanging_past_timeout(transport: str) -> FaultRow:
    async with rig(transport) as r:
        message = await r.call("hang", seconds=60)
        recovered, seconds = await r.recover(time.monotonic())
        return _row("hanging past timeout_s", transport, message, recovered=recovered,
                    recovery_s=seconds)  # fmt: skip


async def stuck_past_timeout(transport: str, block_s: float = BLOCK_S) -> FaultRow:
    """A tool blocks the whole server past its timeout_s: the session that no longer
    answers is dropped. Stdio recovers before the block ends (a new server process);
    an HTTP server can only answer again once it is unblocked."""
    async with rig(transport) as r:
        message = await r.call("block", seconds=block_s)
        recovered, seconds = await r.recover(time.monotonic())
        opened = r.catalog.mcp.sessions_opened("faults")
        return _row("stuck past timeout_s", transport, message, recovered=recovered,
                    recovery_s=seconds, sessions_opened=opened)  # fmt: skip


async def frozen_server(transport: str) -> FaultRow:
    """SIGSTOP: no timeout_s set on ``echo``, only the MCP default (here 1 s)."""
    async with rig(transport, default_timeout_s=TIMEOUT_S) as r:
        pid = await r.pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            message = await r.call("echo", text="frozen?")
        finally:
            os.kill(pid, signal.SIGCONT)
        start = time.monotonic()
        recovered, seconds = await r.recover(start)
        return _row("frozen (SIGSTOP), default timeout", transport, message,
                    recovered=recovered, recovery_s=seconds)  # fmt: skip


async def never_starting(transport: str) -> FaultRow:
    r = Rig(transport)  # HTTP: nothing listens on the port; stdio: the command exits at once
    if transport == "stdio":
        r.connection = lambda: {  # type: ignore[method-assign]
            "transport": "stdio", "command": sys.executable, "args": ["-c", "raise SystemExit(1)"]
        }  # fmt: skip
    catalog = await load_mcp_catalog({"faults": r.connection()}, connect_timeout_s=5)
    async with catalog:
        r.catalog, r.node = catalog, ToolExecutor(catalog)
        reason = str(catalog.load_errors.get("faults", ""))
        state = {"messages": [HumanMessage("go"), AIMessage("", tool_calls=[
            {"name": "echo", "args": {"text": "x"}, "id": "n1", "type": "tool_call"}])],
            "selected_tools": []}  # fmt: skip
        (message,) = (await r.node.ainvoke(state))["messages"]
        row = _row("never starting", transport, message, recovered=False)
        row.model_sees = f"load_errors: {reason[:60]} | {row.model_sees[:60]}"
        return row


async def returning_errors(transport: str) -> FaultRow:
    async with rig(transport) as r:
        message = await r.call("fail", message="disk full")
        recovered, seconds = await r.recover(time.monotonic())
        return _row("returning errors", transport, message, recovered=recovered,
                    recovery_s=seconds)  # fmt: skip


async def returning_big(
    transport: str, megabytes: int = 50, timeout_s: float | None = None
) -> FaultRow:
    """A big answer, under the MCP default timeout unless ``timeout_s`` is given."""
    async with rig(transport, big_timeout_s=timeout_s) as r:
        start = time.monotonic()
        message = await r.call("big", megabytes=megabytes)
        answered = time.monotonic() - start
        recovered, seconds = await r.recover(time.monotonic())
        row = _row(f"returning {megabytes} MB", transport, message, recovered=recovered,
                   recovery_s=seconds)  # fmt: skip
        row.model_sees = f"{row.model_sees[:40]} (answered in {answered:.1f} s)"
        return row


async def hundred_calls_then_restart(transport: str) -> FaultRow:
    async with rig(transport) as r:
        answers = [await r.call("echo", text=str(i)) for i in range(100)]
        ok = sum(str(i) in str(a.content) for i, a in enumerate(answers))
        start = time.monotonic()
        await r.kill()
        await asyncio.sleep(0.3)
        recovered, seconds = await r.recover(start)
        row = _row("100 calls, killed, restarted", transport, answers[-1], recovered=recovered,
                   recovery_s=seconds)  # fmt: skip
        row.model_sees = f"{ok}/100 calls answered before the kill"
        return row


async def resource_stuck_past_timeout(
    transport: str, block_s: float = BLOCK_S, *, sync: bool = False
) -> FaultRow:
    """A prompt/resource tool's read blocks the whole server past its timeout_s, read through
    the executor (or a sync ``invoke``, whose MCPServerError is the answer): the session that
    no longer answers is dropped, as for a tool call."""
    async with rig(transport) as r:
        uri = f"block://{block_s}"
        message: ToolMessage
        if sync:
            reader = r.catalog.get(READER).tool
            try:
                await asyncio.to_thread(reader.invoke, {"uri": uri})
                raise AssertionError("a read blocked past its timeout_s answered")
            except MCPServerError as exc:
                message = ToolMessage(str(exc), tool_call_id="sync", status="error")
        else:
            message = await r.call(READER, uri=uri)
        recovered, seconds = await r.recover(time.monotonic())
        opened = r.catalog.mcp.sessions_opened("faults")
        return _row("prompt/resource tool stuck past timeout_s", transport, message,
                    recovered=recovered, recovery_s=seconds, sessions_opened=opened)  # fmt: skip


SCENARIOS: dict[str, Callable[[str], Awaitable[FaultRow]]] = {
    "killed mid-call": killed_mid_call,
    "killed between calls": killed_between_calls,
    "hanging past timeout_s": hanging_past_timeout,
    "stuck past timeout_s": stuck_past_timeout,
    "frozen (SIGSTOP)": frozen_server,
    "never starting": never_starting,
    "returning errors": returning_errors,
    "returning 50 MB": returning_big,
    "100 calls then restart": hundred_calls_then_restart,
}
