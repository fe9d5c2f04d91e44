"""Extract the tool catalog of MCP-Bench's 28 real MCP servers from the servers themselves.

MCP-Bench (Accenture/mcp-bench) ships the source of 28 real MCP servers under
``mcp_servers/``, with their launch commands in ``mcp_servers/commands.json``. This
script installs each server outside the project's environment, starts it with dummy API
keys, speaks MCP to it (``initialize`` + ``tools/list``, raw JSON-RPC over stdio, or
streamable HTTP for Google Maps) and writes every tool's name, description and schemas
to one JSON file. A server that cannot start offline has its tools read from its source
instead (FastMCP ``@mcp.tool()`` functions, Node ``server.tool(...)`` calls and literal
tool objects), marked ``"provenance": "source"`` with the reason.

Where things go (nothing is written into the source checkout):

- ``--work`` (default ``benchmarks/.cache/mcp_bench/build``): a copy of each server's
  folder (``servers/``), their ``node_modules`` and builds, and ONE Python virtualenv
  (``pyvenv/``) for all the Python servers. That venv holds the ``mcp``/``fastmcp``
  versions the servers were written for; it is never the project's environment (our
  package pins ``mcp<2``, the servers' dependencies must not leak into it).
- ``--out`` (default ``benchmarks/.cache/mcp_bench/catalog.json``): the catalog.

Both are caches outside the package, gitignored, never committed; this script is not
part of the package, its tests or CI.

Run::

    python benchmarks/mcp_bench_servers.py --source /path/to/mcp-bench \\
        --source-commit 09e5233 --python python3.13

``--python`` names the servers' interpreter (3.12+); give its path where a version manager's
shim stands in for it (pyenv's ``python3.13`` when 3.13 is not the active version). No
interpreter is downloaded.

Needs ``node``/``npm`` and ``uv`` (or ``python -m venv`` + pip) reaching the npm
registry and PyPI; the servers' own network calls are not needed (dummy keys, no tool
is called); ``--only NAME`` limits the run to some servers. Output, servers in
commands.json order under its names::

    {"source_commit": "...", "servers": [{"name", "upstream", "description",
     "description_source", "provenance", "why_source"?, "start_seconds", "notes"?,
     "tools": [{"name", "description", "input_schema", "output_schema"?}]}]}

``description`` is the server's ``instructions`` from ``initialize`` when it sends some
(``"instructions"``), else MCP-Bench's own one-line summary from its README's server list
(``"mcp_bench_readme"``; the servers' READMEs in the checkout hold only source/commit
lines), else the server README's first paragraph (``"readme"``) or its package.json /
pyproject description (``"package"``). ``provenance`` is ``"tools/list"`` or ``"source"``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import queue
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORK = REPO_ROOT / "benchmarks" / ".cache" / "mcp_bench" / "build"
DEFAULT_OUT = REPO_ROOT / "benchmarks" / ".cache" / "mcp_bench" / "catalog.json"
DEFAULT_SOURCE = REPO_ROOT.parent / "shared" / "bench" / "mcp-bench"
PROTOCOL_VERSION = "2025-06-18"

# The union of the Python servers' dependencies (their requirements.txt / pyproject.toml).
# mcp and fastmcp as in Wikipedia's uv.lock, the era of the benchmark (BioMCP asks for
# mcp>=1.12.3,<2 and Unit Converter for fastmcp<3); newer ones break some servers.
PY_REQUIREMENTS = [
    "mcp[cli]==1.12.4",
    "fastmcp==2.11.2",
    "requests",
    "requests-cache",
    "retry-requests",
    "beautifulsoup4",
    "lxml",
    "aiohttp",
    "httpx[socks]",
    "huggingface-hub",
    "feedparser",
    "PyPDF2",
    "numpy",
    "scipy",
    "sympy",
    "matplotlib",
    "pydantic>=2.10,<2.12",  # mcp 1.12 imports a pydantic internal that 2.12 removed
    "tzdata",
    "tzlocal",
    "wikipedia-api",
    "python-dotenv",
    "flask",
    "openmeteo-requests",
    "pandas",
    "redditwarp",
    "praw",
    "dnspython",
    "uvicorn",
    "fastapi",
    "certifi",
    "diskcache",
    "platformdirs",
    "psutil",
    "rich",
    "typer",
    # mcp-nixos imports pkg_resources, which setuptools 81 removes.
    "setuptools<81",
]

# Servers whose pins cannot share the venv above get one of their own (by folder name).
# NASA passes FastMCP("nasa-mcp", description=...): mcp's FastMCP took **settings and
# ignored unknown ones up to its uv.lock's mcp 1.6.0; mcp 1.12 (BioMCP's floor) rejects it.
PY_OWN_VENV = {
    "nasa-mcp": ["mcp[cli]==1.6.0", "pydantic>=2.10,<2.12", "httpx>=0.28.1", "python-dotenv"]
}

# Build fixes taken from mcp_servers/install.sh, plus one of ours (metmuseum: its
# telemetry dependency ``mcpscout`` is gone from npm, so it is cut out of the work copy).
NODE_EXTRA_DEV = {
    "hugeicons-mcp-server": ["typescript"],
    "context7-mcp": ["typescript"],
    "math-mcp": ["typescript"],
    "mcp-server-nationalparks": ["typescript"],
    "okx-mcp": ["typescript"],
    "mcp-google-map": ["typescript"],
    "metmuseum-mcp": ["typescript", "zod", "@types/node", "@types/image-to-base64"],
}

START_TIMEOUT = 90.0
REQUEST_TIMEOUT = 60.0


@dataclass
class Server:
    """One entry of commands.json, resolved against the work copy."""

    name: str
    folder: str  # its top folder under mcp_servers/
    cmd: list[str]
    env_keys: list[str]
    source_dir: Path
    work_dir: Path
    transport: str = "stdio"
    port: int | None = None
    endpoint: str = "/mcp"
    upstream: str | None = None
    bench_description: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def is_node(self) -> bool:
        return self.cmd[0] == "node"


class StartError(RuntimeError):
    """The server could not be installed, started or listed."""


# --------------------------------------------------------------------------- setup


def _run(cmd: list[str], cwd: Path, timeout: float = 1200.0) -> subprocess.CompletedProcess[str]:
    print(f"  $ {' '.join(cmd)}  (in {cwd})", flush=True)
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _copy_server(top: Path, dest: Path) -> None:
    if dest.exists():
        return
    shutil.copytree(
        top, dest, ignore=shutil.ignore_patterns("node_modules", ".git", "__pycache__", ".venv")
    )


def _ensure_pyvenv(venv: Path, python: str, requirements: list[str]) -> Path:
    py = venv / "bin" / "python"
    stamp = venv / ".requirements"
    wanted = "\n".join(requirements)
    if py.exists() and stamp.exists() and stamp.read_text() == wanted:
        return py
    if venv.exists():
        shutil.rmtree(venv)  # a fresh venv: upgrading fastmcp in place leaves stale modules
    uv = shutil.which("uv")
    if uv:
        steps = [
            # never a download: interpreters come from GitHub, which only the registries'
            # machines may not reach; a missing one is named in the error below instead
            [uv, "venv", "--no-python-downloads", "--python", python, str(venv)],
            [uv, "pip", "install", "--python", str(py), *requirements],
        ]
    else:
        steps = [
            [python, "-m", "venv", str(venv)],
            [str(py), "-m", "pip", "install", *requirements],
        ]
    for step in steps:
        done = _run(step, venv.parent)
        if done.returncode != 0:
            raise SystemExit(
                f"Creating the venv {venv} failed ({' '.join(step[:3])}...):\n"
                f"{done.stderr[-3000:]}\nFix the install (network to PyPI? --python: a 3.12+ "
                "interpreter on this machine, by its path if a version manager's shim hides "
                "it) and rerun."
            )
    stamp.write_text(wanted)
    return py


def _patch_metmuseum(folder: Path) -> None:
    package = folder / "package.json"
    data = json.loads(package.read_text())
    data.get("dependencies", {}).pop("mcpscout", None)
    package.write_text(json.dumps(data, indent=2))
    index = folder / "src" / "index.ts"
    text = index.read_text()
    text = re.sub(r"^import \{ MCPScout \} from 'mcpscout';\n", "", text, flags=re.M)
    text = re.sub(r"^\s*new MCPScout\([^\n]*\n", "", text, flags=re.M)
    index.write_text(text)


def _setup_node(server: Server) -> None:
    folder = server.work_dir
    dirname = folder.name
    entry = folder / server.cmd[1]
    if dirname == "metmuseum-mcp":
        if "mcpscout" in (folder / "package.json").read_text():
            _patch_metmuseum(folder)
        server.notes.append(
            "work copy without the telemetry package mcpscout (not on npm any more): "
            "its import and its track() call removed"
        )
    if not (folder / "node_modules").exists():
        done = _run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], folder)
        if done.returncode != 0:
            shutil.rmtree(folder / "node_modules", ignore_errors=True)
            raise StartError(f"npm install failed: {_last_line(done.stderr)}")
        extra = NODE_EXTRA_DEV.get(dirname)
        if extra:
            args = ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "-D"]
            done = _run([*args, *extra], folder)
            if done.returncode != 0:
                raise StartError(f"npm install {' '.join(extra)} failed: {_last_line(done.stderr)}")
    if entry.exists():
        return
    scripts = json.loads((folder / "package.json").read_text()).get("scripts") or {}
    # metmuseum has no build script; install.sh runs ``npx tsc`` (type errors still emit).
    build = ["npm", "run", "build"] if "build" in scripts else ["npx", "tsc"]
    done = _run(build, folder)
    if not entry.exists():
        raise StartError(f"{' '.join(build)} did not produce {server.cmd[1]}: {done.stderr[-500:]}")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _python_command(cmd: list[str], venv_python: Path) -> list[str]:
    if cmd[:2] == ["uv", "run"]:
        cmd = cmd[2:]
    if cmd[0] == "python":
        return [str(venv_python), *cmd[1:]]
    # ``uv run biomcp run``: the console script of the project, i.e. its package's __main__.
    return [str(venv_python), "-m", cmd[0], *cmd[1:]]


# --------------------------------------------------------------------------- MCP client


class StdioSession:
    """Line-delimited JSON-RPC over a child's stdin/stdout (the MCP stdio transport)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    def request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.next_id += 1
        rid = self.next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StartError(f"no answer to {method} within {timeout:.0f} s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise StartError(f"the server exited (code {self.proc.poll()}) before {method}")
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a log line on stdout
            if not isinstance(message, dict) or message.get("id") != rid:
                continue
            if "error" in message:
                raise StartError(f"{method} failed: {message['error']}")
            return dict(message["result"])

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise StartError(f"the server closed its stdin ({exc})") from exc


class HttpSession:
    """The MCP streamable HTTP transport: POST each message, JSON or SSE answers."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session_id: str | None = None
        self.next_id = 0

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._post({"jsonrpc": "2.0", "method": method, "params": params or {}}, 30.0)

    def request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        for message in self._post(body, timeout):
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise StartError(f"{method} failed: {message['error']}")
                return dict(message["result"])
        raise StartError(f"no answer to {method}")

    def _post(self, body: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
        }
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            self.session_id = response.headers.get("Mcp-Session-Id") or self.session_id
            text = response.read().decode()
            kind = response.headers.get("Content-Type", "")
        if not text.strip():
            return []
        if "text/event-stream" in kind:
            datas = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            return [json.loads(data) for data in datas if data]
        parsed = json.loads(text)
        return parsed if isinstance(parsed, list) else [parsed]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _list_tools(session: StdioSession | HttpSession) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {"cursor": cursor} if cursor else {}
        result = session.request("tools/list", params, REQUEST_TIMEOUT)
        tools.extend(result.get("tools", []))
        cursor = result.get("nextCursor")
        if not cursor:
            return tools


def _query_server(server: Server, command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Start the server, run initialize + tools/list, stop it."""
    log = server.work_dir.parent.parent / "logs" / f"{server.work_dir.name}.stderr"
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            command,
            cwd=server.work_dir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if server.transport == "stdio" else subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            session: StdioSession | HttpSession
            if server.transport == "stdio":
                session = StdioSession(proc)
            else:
                session = HttpSession(f"http://127.0.0.1:{server.port}{server.endpoint}")
                _wait_for_port(proc, server.port or 0, START_TIMEOUT)
            init = session.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "mcp-bench-catalog", "version": "1"},
                },
                START_TIMEOUT,
            )
            start_seconds = time.monotonic() - started
            session.notify("notifications/initialized")
            tools = _list_tools(session)
        except (StartError, OSError, urllib.error.URLError, ValueError) as exc:
            tail = _last_line(log.read_text(errors="replace")) if log.exists() else ""
            raise StartError(f"{exc}; stderr: {tail}") from exc
        finally:
            _stop(proc)
    return {"init": init, "tools": tools, "start_seconds": start_seconds}


def _wait_for_port(proc: subprocess.Popen[bytes], port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StartError(f"the server exited (code {proc.returncode}) before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise StartError(f"nothing listened on port {port} within {timeout:.0f} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------- descriptions


def _readme_paragraph(folder: Path, top: Path) -> str | None:
    """The first prose paragraph of the nearest README (cwd, then up to the server folder)."""
    here = folder
    while True:
        readme = next((p for p in sorted(here.glob("README*.md")) if p.name == "README.md"), None)
        if readme is not None:
            text = _first_paragraph(readme.read_text(errors="replace"))
            if text:
                return text
        if here == top or here.parent == here:
            return None
        here = here.parent


def _first_paragraph(markdown: str) -> str | None:
    paragraph: list[str] = []
    in_code = False
    for raw in markdown.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            in_code = not in_code
            continue
        skip = (
            in_code
            or line.startswith(("#", "<", "[![", "![", "|", "---", "===", "*", "-", ">"))
            or line.startswith(("Source:", "Commit:", "Version:"))  # added by MCP-Bench
            or re.fullmatch(r"(\[!\[.*|\s*)", line) is not None
        )
        if skip or not line:
            if paragraph:
                break
            continue
        paragraph.append(line)
    text = " ".join(paragraph).strip()
    return text or None


def _package_description(folder: Path) -> str | None:
    package = folder / "package.json"
    if package.exists():
        description = json.loads(package.read_text()).get("description")
        if description:
            return str(description)
    pyproject = folder / "pyproject.toml"
    if pyproject.exists():
        found = re.search(r'^description\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
        if found:
            return found.group(1)
    return None


def _bench_listing(source: Path) -> dict[str, tuple[str, str]]:
    """MCP-Bench's README lists each server as ``- [Name](upstream) - description``."""
    readme = source / "README.md"
    if not readme.exists():
        return {}
    listing = re.findall(r"^- \[(.+?)\]\((.+?)\) - (.+)$", readme.read_text(), re.M)
    return {name: (url, text.strip()) for name, url, text in listing}


def _describe(server: Server, init: dict[str, Any] | None) -> tuple[str, str]:
    instructions = (init or {}).get("instructions")
    if isinstance(instructions, str) and instructions.strip():
        return instructions.strip(), "instructions"
    if server.bench_description:
        return server.bench_description, "mcp_bench_readme"
    top = server.work_dir
    while top.parent.name != "servers":
        top = top.parent
    paragraph = _readme_paragraph(server.work_dir, top)
    if paragraph:
        return paragraph, "readme"
    description = _package_description(server.work_dir)
    if description and description != "Add your description here":
        return description, "package"
    return "", "none"


# --------------------------------------------------------------------------- source fallback

_PY_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}


def _py_annotation_schema(node: ast.expr | None) -> dict[str, Any]:
    if node is None:
        return {}
    if isinstance(node, ast.Name):
        if node.id in _PY_TYPES:
            return {"type": _PY_TYPES[node.id]}
        if node.id in ("list", "List"):
            return {"type": "array"}
        if node.id in ("dict", "Dict"):
            return {"type": "object"}
        return {}
    if isinstance(node, ast.Subscript):
        base = ast.unparse(node.value)
        if base in ("Optional", "typing.Optional"):
            return {"anyOf": [_py_annotation_schema(node.slice), {"type": "null"}]}
        if base in ("list", "List", "Sequence"):
            return {"type": "array", "items": _py_annotation_schema(node.slice)}
        if base in ("dict", "Dict"):
            return {"type": "object"}
        if base in ("Literal", "typing.Literal"):
            values = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return {"enum": [ast.literal_eval(value) for value in values]}
        if base in ("Annotated", "typing.Annotated") and isinstance(node.slice, ast.Tuple):
            return _py_annotation_schema(node.slice.elts[0])
        return {}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return {"anyOf": [_py_annotation_schema(node.left), _py_annotation_schema(node.right)]}
    return {}


def _python_modules(server: Server) -> list[tuple[Path, ast.Module]]:
    """The entry file of the command and the local modules it imports, transitively."""
    roots = [server.work_dir, server.work_dir / "src"]
    args = [a for a in server.cmd if a not in ("uv", "run", "python")]
    if args[0] == "-m":
        entry = _module_path(f"{args[1]}.__main__", roots) or _module_path(args[1], roots)
    else:
        entry = server.work_dir / args[0] if args[0].endswith(".py") else None
        entry = entry or _module_path(f"{args[0]}.__main__", roots)
    todo = [entry] if entry and entry.exists() else []
    seen: dict[Path, ast.Module] = {}
    while todo:
        path = todo.pop(0)
        if path in seen:
            continue
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except SyntaxError:
            continue
        seen[path] = tree
        package = path.parent
        # Importing a module first runs the __init__ of every package around it.
        todo.extend(p / "__init__.py" for p in path.parents if (p / "__init__.py").is_file())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.parent
                    found = _module_path(base, [anchor]) if base else None
                    subs = [
                        _module_path(a.name, [anchor / base.replace(".", "/")]) for a in node.names
                    ]
                    todo.extend(p for p in [found, *subs] if p)
                    continue
                names = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for name in names:
                found = _module_path(name, [*roots, path.parent])
                if found:
                    todo.append(found)
    return list(seen.items())


def _module_path(name: str, roots: list[Path]) -> Path | None:
    for root in roots:
        base = root / name.replace(".", "/")
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _python_tools(server: Server) -> list[dict[str, Any]]:
    """FastMCP-style tools (functions decorated with ``@<server>.tool(...)``) and low-level
    ``Tool(...)`` literals, in the modules the server's command loads."""
    tools: list[dict[str, Any]] = []
    for _path, tree in _python_modules(server):
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for decorator in node.decorator_list:
                call = decorator if isinstance(decorator, ast.Call) else None
                target = call.func if call else decorator
                if not (isinstance(target, ast.Attribute) and target.attr == "tool"):
                    continue
                kwargs = {k.arg: k.value for k in (call.keywords if call else []) if k.arg}
                name = node.name
                if "name" in kwargs and isinstance(kwargs["name"], ast.Constant):
                    name = str(kwargs["name"].value)
                description = ast.get_docstring(node) or ""
                if "description" in kwargs and isinstance(kwargs["description"], ast.Constant):
                    description = str(kwargs["description"].value)
                tools.append(
                    {
                        "name": name,
                        "description": description,
                        "input_schema": _python_params_schema(node),
                    }
                )
        tools.extend(_python_tool_literals(tree))
    unique = {tool["name"]: tool for tool in reversed(tools)}
    return [unique[name] for name in dict.fromkeys(tool["name"] for tool in tools)]


def _python_tool_literals(tree: ast.AST) -> list[dict[str, Any]]:
    """``Tool(name="...", description="...", inputSchema={...})`` of the low-level server."""
    tools = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "Tool"):
            continue
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        name = kwargs.get("name")
        if not isinstance(name, ast.Constant):
            continue
        description = kwargs.get("description")
        schema_node = kwargs.get("inputSchema")
        try:
            schema: Any = ast.literal_eval(schema_node) if schema_node else {"type": "object"}
        except ValueError:
            schema = {"source": ast.unparse(schema_node)} if schema_node else {}
        tools.append(
            {
                "name": str(name.value),
                "description": str(description.value)
                if isinstance(description, ast.Constant)
                else "",
                "input_schema": schema,
            }
        )
    return tools


def _python_params_schema(node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Any]:
    args = [a for a in node.args.args if a.arg not in ("self", "ctx", "context")]
    defaults = [None] * (len(args) - len(node.args.defaults)) + list(node.args.defaults)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for arg, default in zip(args, defaults, strict=True):
        schema = _py_annotation_schema(arg.annotation)
        if default is None:
            required.append(arg.arg)
        else:
            with contextlib.suppress(ValueError):
                schema["default"] = ast.literal_eval(default)
        properties[arg.arg] = schema
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _node_tools(server: Server) -> list[dict[str, Any]]:
    """``server.tool("name", "description", {...})`` calls and ``{name, description,
    inputSchema}`` literals in the TypeScript/JavaScript source (schemas as written)."""
    folder = server.work_dir
    tools: list[dict[str, Any]] = []
    seen: set[str] = set()
    string = r"""(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|`([^`]*)`)"""
    calls = re.compile(r"\.tool\(\s*" + string + r"\s*,\s*" + string, re.S)
    literals = re.compile(r"name:\s*" + string + r"\s*,\s*description:\s*" + string, re.S)
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".ts", ".js") or "node_modules" in path.parts:
            continue
        if any(part in ("dist", "build", "test", "tests") for part in path.parts[-3:-1]):
            continue
        text = path.read_text(errors="replace")
        for pattern in (calls, literals):
            for found in pattern.finditer(text):
                groups = found.groups()
                name = next(g for g in groups[:3] if g is not None)
                description = _js_unescape(next(g for g in groups[3:] if g is not None))
                if name in seen:
                    continue
                seen.add(name)
                literal = _balanced_after(text, found.end())
                tools.append(
                    {
                        "name": name,
                        # ``${...}`` is text the server computes at run time (left out).
                        "description": re.sub(r"\$\{[^}]*\}", "", description).strip(),
                        "input_schema": _js_object(literal) if literal else {},
                    }
                )
    return tools


def _js_unescape(text: str) -> str:
    escapes = {"n": "\n", "t": "\t", "r": "\r"}
    return re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(1)), text)


_JS_TOKEN = re.compile(
    r"""\s+|"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|`([^`$]*)`|([A-Za-z_$][\w$]*)|"""
    r"""(-?\d+(?:\.\d+)?)|([{}\[\]:,+])""",
    re.S,
)


def _js_object(literal: str) -> dict[str, Any]:
    """A JSON-schema object literal written in JS, as JSON; else its text under "source"
    (a zod shape, or anything with code in it)."""
    out: list[str] = []
    position = 0
    while position < len(literal):
        token = _JS_TOKEN.match(literal, position)
        if token is None:
            return {"source": literal}
        position = token.end()
        double, single, template, word, number, punct = token.groups()
        if token.group(0).isspace():
            continue
        if double is not None or single is not None or template is not None:
            value = next(g for g in (double, single, template) if g is not None)
            if out and out[-1] == "+" and len(out) > 1 and out[-2].startswith('"'):
                out.pop()
                previous = json.loads(out.pop())
                out.append(json.dumps(previous + _js_unescape(value)))
            else:
                out.append(json.dumps(_js_unescape(value)))
        elif word is not None:
            if word in ("true", "false", "null"):
                out.append(word)
            elif literal[position:].lstrip().startswith(":"):
                out.append(json.dumps(word))
            else:
                return {"source": literal}
        elif number is not None:
            out.append(number)
        elif punct in "}]" and out and out[-1] == ",":
            out[-1] = punct
        else:
            out.append(punct)
    try:
        parsed = json.loads("".join(out))
    except ValueError:
        return {"source": literal}
    return parsed if isinstance(parsed, dict) else {"source": literal}


def _balanced_after(text: str, start: int) -> str | None:
    """The ``{...}`` literal that follows ``start`` (the zod shape or JSON schema), as text."""
    brace = text.find("{", start)
    if brace < 0 or brace - start > 200:
        return None
    depth = 0
    for index in range(brace, min(len(text), brace + 20000)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[brace : index + 1]
    return None


# --------------------------------------------------------------------------- main


def _load_servers(source: Path, work: Path) -> list[Server]:
    commands_path = source / "mcp_servers" / "commands.json"
    if not commands_path.exists():
        raise SystemExit(
            f"{commands_path} not found: --source must be an MCP-Bench checkout "
            "(the folder holding mcp_servers/commands.json)."
        )
    commands = json.loads(commands_path.read_text())
    listing = _bench_listing(source)
    servers = []
    for name, spec in commands.items():
        # cwd is written relative to a folder inside mcp_servers/ ("../biomcp").
        relative = Path(os.path.normpath(Path("mcp_servers") / "x" / spec["cwd"]))
        parts = relative.parts[1:]
        top_source = source / "mcp_servers" / parts[0]
        top_work = work / "servers" / parts[0]
        cmd = shlex.split(spec["cmd"])
        server = Server(
            name=name,
            folder=parts[0],
            cmd=cmd,
            env_keys=list(spec.get("env", [])),
            source_dir=source / "mcp_servers" / Path(*parts),
            work_dir=top_work / Path(*parts[1:]),
            transport=spec.get("transport", "stdio"),
            port=spec.get("port"),
            endpoint=spec.get("endpoint", "/mcp"),
            upstream=listing.get(name, (None, None))[0],
            bench_description=listing.get(name, (None, None))[1],
        )
        _copy_server(top_source, top_work)
        servers.append(server)
    return servers


def _server_env(server: Server) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update({key: "dummy" for key in server.env_keys})
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    if not server.is_node:
        paths = [server.work_dir, server.work_dir / "src"]
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths if p.exists())
    return env


def _catalog_server(server: Server, work: Path, python: str) -> dict[str, Any]:
    print(f"[{server.name}]", flush=True)
    entry: dict[str, Any] = {"name": server.name, "upstream": server.upstream}
    try:
        if server.is_node:
            _setup_node(server)
            command = ["node", *server.cmd[1:]]
        else:
            if server.folder in PY_OWN_VENV:
                venv = work / f"pyvenv-{server.folder}"
                venv_python = _ensure_pyvenv(venv, python, PY_OWN_VENV[server.folder])
                server.notes.append(f"own venv: {' '.join(PY_OWN_VENV[server.folder])}")
            else:
                venv_python = _ensure_pyvenv(work / "pyvenv", python, PY_REQUIREMENTS)
            command = _python_command(server.cmd, venv_python)
        if server.transport == "http":
            server.port = _free_port()
            command = [arg if arg != "3001" else str(server.port) for arg in command]
        result = _query_server(server, command, _server_env(server))
    except (StartError, subprocess.TimeoutExpired) as exc:
        reason = str(exc)
        print(f"  could not list tools: {reason}; reading the source", flush=True)
        reader = _node_tools if server.is_node else _python_tools
        tools = reader(server)
        description, description_source = _describe(server, None)
        entry.update(
            description=description,
            description_source=description_source,
            provenance="source",
            why_source=reason,
            start_seconds=None,
            tools=tools,
        )
    else:
        description, description_source = _describe(server, result["init"])
        entry.update(
            description=description,
            description_source=description_source,
            provenance="tools/list",
            start_seconds=round(result["start_seconds"], 2),
            server_info=result["init"].get("serverInfo"),
            protocol_version=result["init"].get("protocolVersion"),
            tools=[_tool_entry(tool) for tool in result["tools"]],
        )
    if server.notes:
        entry["notes"] = server.notes
    print(f"  {entry['provenance']}: {len(entry['tools'])} tools", flush=True)
    return entry


def _tool_entry(tool: dict[str, Any]) -> dict[str, Any]:
    entry = {
        "name": tool["name"],
        "description": tool.get("description") or "",
        "input_schema": tool.get("inputSchema") or {"type": "object"},
    }
    if tool.get("outputSchema"):
        entry["output_schema"] = tool["outputSchema"]
    return entry


def _default_source() -> Path:
    if os.environ.get("MCP_BENCH_DIR"):
        return Path(os.environ["MCP_BENCH_DIR"])
    if DEFAULT_SOURCE.exists():
        return DEFAULT_SOURCE
    raise SystemExit(
        "No MCP-Bench checkout: pass --source DIR (a checkout of Accenture/mcp-bench), "
        f"set MCP_BENCH_DIR, or put it at {DEFAULT_SOURCE}."
    )


def _source_commit(source: Path, given: str | None) -> str:
    if given:
        return given
    done = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def main(argv: list[str] | None = None) -> int:
    """Build the catalog; print a table of the servers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="the mcp-bench checkout ($MCP_BENCH_DIR)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="builds and venv")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the catalog JSON")
    parser.add_argument("--source-commit", help="commit of the checkout (else git, else unknown)")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter for the servers' venv (3.12+; medcalc and Hugging Face ask for it)",
    )
    parser.add_argument("--only", action="append", help="only this server (repeatable)")
    args = parser.parse_args(argv)

    source = (args.source or _default_source()).resolve()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    servers = _load_servers(source, work)
    if args.only:
        unknown = set(args.only) - {s.name for s in servers}
        if unknown:
            raise SystemExit(f"--only {sorted(unknown)}: not in commands.json")
        servers = [s for s in servers if s.name in args.only]

    entries = [_catalog_server(server, work, args.python) for server in servers]

    catalog = {"source_commit": _source_commit(source, args.source_commit), "servers": entries}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(catalog, indent=2, ensure_ascii=False) + "\n")

    width = max(len(e["name"]) for e in entries)
    print(f"\n{'server':<{width}}  {'provenance':<10}  {'tools':>5}  {'start s':>7}")
    for e in entries:
        seconds = "-" if e["start_seconds"] is None else f"{e['start_seconds']:.2f}"
        print(f"{e['name']:<{width}}  {e['provenance']:<10}  {len(e['tools']):>5}  {seconds:>7}")
    total = sum(len(e["tools"]) for e in entries)
    print(f"{'total':<{width}}  {'':<10}  {total:>5}")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
