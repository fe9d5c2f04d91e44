"""A real ``langgraph dev`` server for tests and benchmarks, and a load driver for it.

Key Components:
    - :func:`langgraph_dev`: start ``langgraph dev`` with the repository's
      ``langgraph.json`` on a 127.0.0.1 port, in its own process group; always stopped.
    - :func:`served_config`: a checkout's ``langgraph.json`` with its paths made absolute,
      for a server whose working directory is elsewhere.
    - :func:`example_server`: ``examples/server.py`` (the graphs it serves), imported by path.
    - :func:`drive`: many threads x turns through ``langgraph_sdk`` at once: errors,
      per-run latencies, and each thread's final state (for isolation checks).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
from langgraph_sdk import get_client

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 45


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def langgraph_cli() -> str:
    beside = Path(sys.executable).with_name("langgraph")
    found = str(beside) if beside.exists() else shutil.which("langgraph")
    assert found, "the `langgraph` CLI is missing: pip install -e '.[dev]' (langgraph-cli[inmem])"
    return found


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc), e.g. the MCP servers it started."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process exited meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop(proc: subprocess.Popen[bytes]) -> list[int]:
    """Stop the server's own process group: SIGTERM, then SIGKILL if it lingers.

    Returns:
        Descendants still alive 10 s after the server stopped (then killed):
        processes the server started in their own session, e.g. stdio MCP
        servers, must exit with it.
    """
    spawned = _descendants(proc.pid)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in spawned) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftover = [p for p in spawned if _alive(p)]
    for pid in leftover:
        os.kill(pid, signal.SIGKILL)
    return leftover


class ServerProcess(subprocess.Popen):  # type: ignore[type-arg]
    """The server process, plus the descendants that outlived it (see :func:`stop`)."""

    leftover: list[int]


def example_server() -> ModuleType:
    """``examples/server.py``, the graph factories ``langgraph.json`` names, imported by path
    as the server imports it (once per process)."""
    name = "toolbudget_example_server"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, REPO / "examples" / "server.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def served_config(
    workdir: Path,
    source: Path = REPO,
    extra_graphs: Mapping[str, str] | None = None,
    auth: str | None = None,
) -> Path:
    """``source``'s ``langgraph.json`` (plus ``extra_graphs``, and ``auth``: the ``path`` of
    an ``Auth`` object, ``"./file.py:auth"``), written in ``workdir``.

    ``langgraph dev`` reads a graph's file path (``./examples/server.py:example_agent``) and
    the ``dependencies`` from its working directory, the checkout's root when run by hand;
    the server here runs in ``workdir``, so those paths are made absolute against ``source``.
    """
    config = json.loads((source / "langgraph.json").read_text())
    config["dependencies"] = [str((source / dep).resolve()) for dep in config["dependencies"]]
    for graph in config["graphs"].values():
        where, variable = graph["path"].rsplit(":", 1)
        if "/" in where:  # a file path, not a module
            graph["path"] = f"{(source / where).resolve()}:{variable}"
    config["graphs"].update(extra_graphs or {})
    if auth is not None:
        config["auth"] = {"path": auth}
    path = workdir / "langgraph.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@contextmanager
def langgraph_dev(
    workdir: Path, env: dict[str, str], port: int, config: Path | None = None
) -> Iterator[tuple[str, Any]]:
    """Run ``langgraph dev`` in ``workdir`` for the ``with`` block; yield (url, process).

    ``config``: the ``langgraph.json`` to serve (default: the repository's, through
    :func:`served_config`).

    Raises:
        RuntimeError: the server exited or was not ready in ``STARTUP_TIMEOUT_S`` (with its log).
    """
    command = [
        langgraph_cli(), "dev", "--config", str(config or served_config(workdir)),
        "--host", "127.0.0.1",
        "--port", str(port), "--no-browser", "--no-reload",
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        proc = ServerProcess(
            command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        proc.leftover = []
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"langgraph dev exited with {proc.returncode}:\n{log_path.read_text()}"
                    )
                try:
                    if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"langgraph dev not ready in {STARTUP_TIMEOUT_S} s:\n{log_path.read_text()}"
                    )
                time.sleep(0.25)
            yield url, proc
        finally:
            proc.leftover = stop(proc)


def server_env() -> dict[str, str]:
    """The environment ``langgraph dev`` runs in: no analytics, no tracing, the demo model."""
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "1",
        "LANGSMITH_TRACING": "false",
    }
    env.pop("TOOLBUDGET_MODEL", None)  # the default model: the offline demo model
    return env


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants, in MB (from /proc)."""
    total = 0
    for p in [pid, *_descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


@dataclass
class LoadResult:
    """What :func:`drive` measured."""

    runs: int = 0
    errors: list[str] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    states: dict[str, dict[str, Any]] = field(default_factory=dict)  # thread -> final values
    texts: dict[str, list[str]] = field(default_factory=dict)  # thread -> the texts it sent

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "errors": len(self.errors),
            "p50_s": self.percentile(0.5),
            "p95_s": self.percentile(0.95),
            "mean_s": statistics.fmean(self.latencies_s) if self.latencies_s else 0.0,
            "runs_per_s": self.runs / self.wall_s if self.wall_s else 0.0,
            "wall_s": self.wall_s,
        }


async def drive(
    url: str, graph: str, threads: int, turns: int, queries: Sequence[Sequence[str]]
) -> LoadResult:
    """``threads`` threads, each running ``turns`` turns in order, all threads at once.

    Thread ``i`` sends ``queries[i % len(queries)][t]`` at turn ``t``.
    """
    client = get_client(url=url)
    result = LoadResult()

    async def one_thread(i: int) -> None:
        thread_id = (await client.threads.create())["thread_id"]
        texts = list(queries[i % len(queries)][:turns])
        result.texts[thread_id] = texts
        for text in texts:
            start = time.perf_counter()
            try:
                run = await client.runs.wait(
                    thread_id, graph, input={"messages": [{"role": "user", "content": text}]}
                )
                if isinstance(run, dict) and run.get("__error__"):
                    result.errors.append(str(run["__error__"])[:300])
            except Exception as exc:  # noqa: BLE001 - a failed run is counted, not raised
                result.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            result.latencies_s.append(time.perf_counter() - start)
            result.runs += 1
        result.states[thread_id] = (await client.threads.get_state(thread_id))["values"]

    start = time.perf_counter()
    await asyncio.gather(*(one_thread(i) for i in range(threads)))
    result.wall_s = time.perf_counter() - start
    return result
