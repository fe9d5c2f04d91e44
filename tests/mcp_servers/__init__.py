"""Helpers to run the example FastMCP servers in tests and benchmarks.

The servers are examples beside the package, in ``examples/mcp_servers/``
(``math_server.py``, ``notes_server.py``, ``text_server.py``); each runs by path
over stdio or HTTP (``--transport streamable-http --port N`` / ``--transport sse``).
:func:`stdio` builds a stdio connection; :func:`http_server` starts a server process
on a free 127.0.0.1 port and always stops it. This folder also holds the tests' own
servers (``fault_server.py``, ``bigdata_server.py``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SERVERS_DIR", "ServerProcess", "free_port", "http_server", "pid_alive", "stdio"]


SERVERS_DIR = Path(__file__).resolve().parents[2] / "examples" / "mcp_servers"
"""The example servers' folder."""


def stdio(script: str) -> dict[str, Any]:
    """A stdio connection dict (``MultiServerMCPClient`` format) for one server script.

    Args:
        script: a file name in :data:`SERVERS_DIR` (e.g. ``"math_server.py"``), or a path.

    Returns:
        The connection: this Python interpreter running the script by path.
    """
    return {"transport": "stdio", "command": sys.executable, "args": [str(SERVERS_DIR / script)]}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    """A server process serving HTTP on 127.0.0.1.

    Attributes:
        process: the process.
        port: its port.
        url: the MCP endpoint.
        connection: the connection dict for it.
    """

    process: subprocess.Popen[bytes]
    port: int
    url: str
    connection: dict[str, Any]

    def kill(self) -> None:
        """Kill the process (SIGKILL) and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


def _start(script: str, transport: str, port: int, log: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(SERVERS_DIR / script), "--transport", transport, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )


def wait_listening(proc: subprocess.Popen[bytes], port: int, log_path: str = os.devnull) -> None:
    """Wait (20 s at most) until ``proc`` listens on ``port``; raise with its log if it exits."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"server exited with {proc.returncode}: {Path(log_path).read_text()[-2000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"server did not listen on 127.0.0.1:{port} within 20 s")


@contextmanager
def http_server(
    script: str, transport: str = "streamable-http", port: int | None = None
) -> Iterator[ServerProcess]:
    """Run a server over HTTP on 127.0.0.1 for the ``with`` block; always stop it.

    Args:
        script: a server's file name in :data:`SERVERS_DIR`.
        transport: ``streamable-http`` or ``sse``.
        port: the port (a free one by default).

    Yields:
        The running server.
    """
    port = port or free_port()
    path = "/sse" if transport == "sse" else "/mcp"
    kind = "sse" if transport == "sse" else "streamable_http"
    with tempfile.NamedTemporaryFile("w+b", suffix=".log") as log:
        proc = _start(script, transport, port, log)
        try:
            wait_listening(proc, port, log.name)
            url = f"http://127.0.0.1:{port}{path}"
            yield ServerProcess(proc, port, url, {"transport": kind, "url": url})
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)


def pid_alive(pid: int) -> bool:
    """True if a process with this id exists (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        state = stat.read_text().rsplit(")", 1)[-1].split()[0]
        return state != "Z"
    return True
