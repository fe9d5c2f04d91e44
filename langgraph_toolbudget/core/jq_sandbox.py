"""jq in a worker process: a model's jq expression never runs inside the server.

Its one reason to change: how a jq query is isolated and bounded.

A jq expression comes from the model, so it is untrusted code: ``$ENV`` and
``env`` read the process environment (API keys), ``import "./x" as $x`` reads a
JSON file of the working directory, ``last(range(1e12))`` runs for ever while
holding the GIL, and ``[range(1e9)]`` makes jq abort the process when it cannot
allocate. So each query runs in a fresh Python process started just for it
(``python -I -S``: no site, no ``PYTHON*`` variables, nothing of the package
imported) that gets nothing but the expression and the output text on stdin:

- no modules: an expression with ``import`` or ``include`` (outside its
  strings and comments) is refused before any worker starts, since their
  ``search`` metadata would name any directory; and once jq is loaded the
  worker cannot open a file any more (``RLIMIT_NOFILE`` lowered to the
  descriptors it has open), whatever jq is asked to read;
- an empty environment (cleared again inside, so ``$ENV`` is ``{}``), and an
  empty temporary directory as its working directory;
- ``RLIMIT_AS`` of ``memory_mb`` (jq then aborts: reported as out of memory),
  ``RLIMIT_CPU`` just over the timeout, no core files;
- a wall-clock timeout enforced by the parent, which kills the worker;
- stdout for the answer only (at most :data:`MAX_RESULT_CHARS`, or jq's error
  cut at :data:`MAX_ERROR_CHARS`), stderr (``debug``, ``stderr``) discarded.

At most :data:`MAX_JQ_WORKERS` workers run at once. This file is also the
worker's program: ``python -I -S jq_sandbox.py <jq's directory>`` (it imports
only the standard library and ``jq``).

Key Components:
    - :func:`run_jq`: the results of an expression over a JSON text, or a
      :class:`JqStopped` / :class:`JqFailed` saying why not.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

__all__ = [
    "JQ_MEMORY_MB",
    "JQ_TIMEOUT_S",
    "MAX_ERROR_CHARS",
    "MAX_JQ_WORKERS",
    "MAX_RESULT_CHARS",
    "MODULE_ERROR",
    "JqFailed",
    "JqResult",
    "JqStopped",
    "run_jq",
]

JQ_TIMEOUT_S = 5.0
"""Wall-clock seconds one query may take (``BudgetConfig.jq_timeout_s``)."""
JQ_MEMORY_MB = 512
"""Memory (address space) of one query's worker (``BudgetConfig.jq_memory_mb``). jq holds a
JSON value in about 15 times its text's size: 512 MB fits outputs up to about 30 MB."""
MAX_JQ_WORKERS = 4
"""Queries running at once; a further one waits up to its timeout for a free worker."""
MAX_RESULT_CHARS = 10_000_000
"""A query's answer (its results as JSON text) longer than this is refused."""
MAX_ERROR_CHARS = 2_000
"""jq's error message is cut here, in the worker (``error("x" * 1e8)`` is 100 MB of it)."""

MODULE_ERROR = (
    "{directive} is not available: jq here reads only this output, never a module or a file. "
    "Use jq's builtins, define what you need inline ('def name: ...; name'), and quote a key "
    'named import or include (.["import"], {{"import": 1}})'
)
"""Why an expression with ``import`` or ``include`` is refused (:class:`JqFailed`'s message)."""

_ABORTED = -6  # SIGABRT: jq's answer to a failed allocation ("cannot allocate memory")
_CPU_EXCEEDED = -24  # SIGXCPU: RLIMIT_CPU reached


class JqFailed(ValueError):
    """jq rejected the expression or failed on the data (``reason`` is jq's message)."""


class JqStopped(RuntimeError):
    """The query was stopped: past its time, out of its memory, crashed, or no worker free.

    Attributes:
        why: ``"timeout"``, ``"memory"``, ``"too_large"``, ``"busy"`` or ``"crash"``.
        detail: what happened, for the message (e.g. the exit status).
    """

    def __init__(self, why: str, detail: str = "") -> None:
        super().__init__(f"{why}: {detail}" if detail else why)
        self.why = why
        self.detail = detail


@dataclass(frozen=True)
class JqResult:
    """What a query gave.

    Attributes:
        text: one result as JSON text, or several as a JSON array (indented by 1).
        cut: evaluation stopped at ``max_results`` results.
    """

    text: str
    cut: bool


_SLOTS = threading.BoundedSemaphore(MAX_JQ_WORKERS)


def _fresh_slots() -> None:
    # In a forked child the parent's running queries hold places no thread there gives back.
    global _SLOTS
    _SLOTS = threading.BoundedSemaphore(MAX_JQ_WORKERS)


# (os.register_at_fork itself, not the package's _forks: this file also runs as the worker's
# script, which imports nothing of the package)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_slots)

# What may hold a module directive in code (not after "." or "$": a field or a variable),
# and what ends a string or starts an interpolation (code until its closing parenthesis).
_CODE_TOKEN = re.compile(r'"|#[^\n]*|[()]|(?<![.$\w])(?:import|include)(?!\w)', re.ASCII)
_STRING_TOKEN = re.compile(r'\\\(|\\.|"', re.DOTALL)


@cache
def _jq_path() -> str:
    """The directory to put on the worker's ``sys.path`` so that ``import jq`` finds the package."""
    import importlib.util

    spec = importlib.util.find_spec("jq")
    if spec is None or spec.origin is None:
        raise ImportError("No module named 'jq'")
    path = os.path.dirname(spec.origin)
    return os.path.dirname(path) if spec.submodule_search_locations else path


def run_jq(
    text: str,
    expression: str,
    *,
    timeout_s: float = JQ_TIMEOUT_S,
    memory_mb: int = JQ_MEMORY_MB,
    max_results: int = 1000,
) -> JqResult:
    """The results of ``expression`` over the JSON ``text``, computed in a worker process.

    Args:
        text: the JSON input (jq parses it in the worker).
        expression: the jq program.
        timeout_s: wall-clock limit; the worker is killed past it.
        memory_mb: the worker's address-space limit.
        max_results: evaluation stops after this many results.

    Raises:
        JqFailed: the expression does not compile, or fails on the data.
        JqStopped: the limits stopped it, it crashed, or no worker was free in time.
        ImportError: the ``jq`` package is missing.
    """
    jq_path = _jq_path()
    directive = _module_directive(expression)
    if directive:
        raise JqFailed(MODULE_ERROR.format(directive=directive))
    if not sys.executable:  # an embedded interpreter: no Python to start the worker with
        raise JqStopped("crash", "no Python executable to run the jq worker (sys.executable)")
    header = {
        "expression": expression,
        "max_results": max_results,
        "max_chars": MAX_RESULT_CHARS,
        "memory_mb": memory_mb,
        "cpu_s": int(timeout_s) + 2,
    }
    payload = json.dumps(header).encode() + b"\n" + text.encode("utf-8", "surrogatepass")
    if not _SLOTS.acquire(timeout=timeout_s):
        raise JqStopped("busy", f"{MAX_JQ_WORKERS} queries are running")
    try:
        with tempfile.TemporaryDirectory(prefix="toolbudget-jq-") as empty:
            done = subprocess.run(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), jq_path],
                input=payload,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={},
                cwd=empty,
                timeout=timeout_s,
                check=False,
            )
    except subprocess.TimeoutExpired:  # run() has killed the worker
        raise JqStopped("timeout", f"{timeout_s:g} s") from None
    finally:
        _SLOTS.release()
    return _answer(done.returncode, done.stdout, timeout_s)


def _module_directive(expression: str) -> str | None:
    """The first ``import`` or ``include`` keyword of a jq expression, outside strings and comments.

    A word that only may be one counts too (a key ``{import: 1}``): refusing it costs a
    rewrite with quotes, missing a directive would read a file.
    """
    interpolations: list[int] = []  # the open parentheses of each interpolation we are in
    position, in_string = 0, False
    while match := (_STRING_TOKEN if in_string else _CODE_TOKEN).search(expression, position):
        token, position = match.group(), match.end()
        if in_string:  # an escape, the end of the string or an interpolation's start
            if token == "\\(":
                interpolations.append(0)
                in_string = False
            elif token == '"':
                in_string = False
        elif token == '"':
            in_string = True
        elif token == "(" and interpolations:
            interpolations[-1] += 1
        elif token == ")" and interpolations:
            if interpolations[-1]:
                interpolations[-1] -= 1
            else:  # the interpolation's own parenthesis: back in its string
                interpolations.pop()
                in_string = True
        elif token in ("import", "include"):
            return token
    return None


def _answer(returncode: int, stdout: bytes, timeout_s: float) -> JqResult:
    head, _, body = stdout.partition(b"\n")
    try:
        status = json.loads(head) if head else {}
    except ValueError:
        status = {}
    if returncode == 0 and status.get("ok"):
        return JqResult(body.decode("utf-8", "replace"), bool(status.get("cut")))
    if returncode == 0 and "jq_error" in status:
        raise JqFailed(str(status["jq_error"]))
    if status.get("stopped") in ("memory", "too_large"):
        raise JqStopped(str(status["stopped"]), str(status.get("detail", "")))
    if "crash" in status:
        raise JqStopped("crash", str(status["crash"]))
    if returncode == _ABORTED:
        raise JqStopped("memory", "jq could not allocate")
    if returncode == _CPU_EXCEEDED:
        raise JqStopped("timeout", f"{timeout_s:g} s")
    how = f"signal {-returncode}" if returncode < 0 else f"exit status {returncode}"
    raise JqStopped("crash", how)


# --- the worker ------------------------------------------------------------------------------


def _worker() -> int:  # pragma: no cover - runs in the worker process (its tests run it there)
    """Read the header line and the text from stdin, run jq, write the answer to stdout."""
    os.environ.clear()  # the environment jq's $ENV and env read (C-level unsetenv too)
    out = sys.stdout.buffer
    raw = sys.stdin.buffer.read()
    head, _, data = raw.partition(b"\n")
    del raw
    job = json.loads(head)
    try:
        import resource
    except ImportError:  # no resource module (Windows): the parent's timeout still applies
        resource = None  # type: ignore[assignment]
    if resource is not None:
        memory, cpu = int(job["memory_mb"]) << 20, int(job["cpu_s"])
        for limit, value in (
            (resource.RLIMIT_CORE, (0, 0)),
            (resource.RLIMIT_CPU, (cpu, cpu + 1)),
            (resource.RLIMIT_AS, (memory, memory)),
        ):
            with contextlib.suppress(ValueError, OSError):  # a lower hard limit set applies
                resource.setrlimit(limit, value)
    sys.path.insert(0, sys.argv[1])
    try:
        import jq

        if resource is not None:
            # Descriptors are allocated lowest first and all below `free` are in use, so
            # with this limit no file can be opened any more (EMFILE), whatever jq reads.
            free = os.dup(1)
            os.close(free)
            resource.setrlimit(resource.RLIMIT_NOFILE, (free, free))
        text = data.decode("utf-8", "surrogatepass")
        del data
        results: list[Any] = []
        cut = False
        try:
            for value in jq.compile(job["expression"]).input_text(text):
                results.append(value)
                if len(results) >= int(job["max_results"]):
                    cut = True
                    break
        except ValueError as exc:
            reason = " ".join(str(exc)[:MAX_ERROR_CHARS].split())
            out.write(json.dumps({"jq_error": reason}).encode() + b"\n")
            return 0
        answer = json.dumps(
            results[0] if len(results) == 1 else results, ensure_ascii=False, indent=1
        )
        if len(answer) > int(job["max_chars"]):
            out.write(
                json.dumps({"stopped": "too_large", "detail": str(len(answer))}).encode() + b"\n"
            )
            return 0
        out.write(json.dumps({"ok": True, "cut": cut}).encode() + b"\n")
        out.write(answer.encode("utf-8", "surrogatepass"))
    except MemoryError:
        out.write(b'{"stopped": "memory"}\n')
    except Exception as exc:  # noqa: BLE001 - any other failure is reported, not swallowed
        out.write(json.dumps({"crash": f"{type(exc).__name__}: {exc}"[:300]}).encode() + b"\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - the worker process
    sys.exit(_worker())
