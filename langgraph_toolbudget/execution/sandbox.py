"""Running a model's Python program in a real sandbox (``pydantic-monty``), under limits.

Its one reason to change: how a program runs in the sandbox and what comes back.

The program runs in Monty, Pydantic's Python interpreter for untrusted code, in a worker
subprocess of a pool made for the run (a few milliseconds) and closed after it: the
program has no file system, no network, no subprocesses and no environment (``open``,
``os.listdir`` and the like raise ``PermissionError``; ``socket``, ``subprocess`` do not
exist), and its time and memory are bounded by the worker. The host functions it
may call are names answered here, one call at a time: the caller's function gets the
name and arguments, and what it returns (or raises) is what the call returns (or raises)
inside the program; so is its ``time.sleep`` / ``asyncio.sleep`` (slept here, within the
time left). Nothing falls back to ``exec``/``eval`` in this process.

Key Components:
    - :func:`run_program`: run one program; its printed output, the value of its last
      expression, or the error (its traceback's last lines) and which limit stopped it.
    - :class:`SandboxLimits`, :class:`ProgramRun`.
    - :func:`require_sandbox`: the ``ImportError`` naming the extra when Monty is missing.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "SANDBOX_MISSING_ERROR",
    "HostCall",
    "ProgramRun",
    "SandboxLimits",
    "StopProgram",
    "require_sandbox",
    "run_program",
    "sandbox_available",
]

logger = logging.getLogger(__name__)

SANDBOX_MISSING_ERROR = (
    "python_execution runs code in the pydantic-monty sandbox, which is not installed: "
    "pip install 'langgraph-toolbudget[codemode]' (or pip install pydantic-monty), or turn "
    "CodeMode off (leave 'codemode' out of tool_call_formats)."
)
LONG_OPERATION = (
    "it was still inside one long operation (e.g. arithmetic on huge numbers) after {seconds:g} "
    "s, so its worker was stopped"
)
SLEEP_PAST_LIMIT = (
    "time limit reached: the program asked to sleep {asked:g} s with {left:.2f} s of its "
    "{timeout:g} s left"
)
CANCELLED = "the run was cancelled, so the program was stopped"
FORKED_ERROR = (
    "python_execution cannot run in this process: it was forked from one that had already run "
    "a program, and the sandbox (pydantic-monty) does not survive a fork (it would wait for "
    "ever). Start the worker processes before the first program runs (e.g. gunicorn without "
    "--preload), or use the spawn or forkserver start method. Go on without it."
)
_RAN_IN: list[int] = []
"""The process that ran this module's first program (a forked copy of it cannot run one)."""
SLEEPS = frozenset({"time.sleep", "system.sleep", "asyncio.sleep", "system.async_sleep"})
"""The OS calls Monty hands a ``feed_start`` caller for ``time.sleep`` and ``asyncio.sleep``."""
MAX_SUSPENSIONS = 1_000_000
"""Host round trips (calls, name lookups, sleeps) a program may make: Monty's default of
1,000 ended a program sleeping 1,000 times in a bare error. The wall-clock deadline, checked
at each round trip (Monty's own clock stops during them), bounds their time."""
TRACEBACK_LINES = 12
"""The last lines of a traceback given back to the model."""
MAX_LINE_CHARS = 500
"""A traceback line is cut at this many characters (a huge literal in the source)."""

ErrorKind = Literal["error", "syntax", "timeout", "memory", "crashed", "cancelled", "unavailable"]

HostCall = Callable[[str, tuple[Any, ...], dict[str, Any]], Any]
"""``(name, positional args, keyword args) -> value``: answers a host function's call.
Raising an exception raises it inside the program (its type when Monty knows it, its
message always); raising :class:`StopProgram` stops the program."""


class StopProgram(Exception):  # noqa: N818 - a signal, not an error of the program
    """Raised by a host function to stop the program at once (a limit was reached)."""

    def __init__(self, message: str, kind: ErrorKind = "timeout") -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind


@dataclass(frozen=True)
class SandboxLimits:
    """What one program may use.

    Attributes:
        timeout_s: seconds the program may compute (the sandbox's own clock, which stops
            while a host function runs or it sleeps), may sleep in total, and may take from
            start to end (wall clock, checked at each host call and before each sleep).
        max_memory_bytes: the sandbox's heap.
        max_output_chars: printed characters kept; the rest is counted, not kept.
    """

    timeout_s: float
    max_memory_bytes: int
    max_output_chars: int


@dataclass
class ProgramRun:
    """What a program did.

    Attributes:
        output: what it printed (stdout and stderr, in order), up to the limit.
        dropped_chars: printed characters past the limit (not kept).
        value: the value of its last expression (None when it has none).
        error: the traceback's last lines, or why it was stopped; None when it finished.
        error_kind: ``error`` (it raised), ``syntax``, ``timeout``, ``memory``, ``crashed``,
            ``cancelled`` (the caller set ``cancel``).
        seconds: wall-clock time of the run.
    """

    output: str = ""
    dropped_chars: int = 0
    value: Any = None
    error: str | None = None
    error_kind: ErrorKind | None = None
    seconds: float = 0.0


def sandbox_available() -> bool:
    """Whether ``pydantic-monty`` can be imported."""
    return importlib.util.find_spec("pydantic_monty") is not None


def require_sandbox() -> None:
    """Raise ``ImportError`` naming the ``codemode`` extra when Monty is missing."""
    if not sandbox_available():
        raise ImportError(SANDBOX_MISSING_ERROR)


class _Printed:
    """The program's printed output, kept up to a limit (the rest counted)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def __call__(self, stream: str, text: str) -> None:
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(len(text), room)
        self.dropped += max(0, len(text) - max(room, 0))

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _last_lines(traceback: str) -> str:
    lines = traceback.replace('"<python-input-0>"', '"<code>"').splitlines()
    kept = lines[-TRACEBACK_LINES:]
    if len(lines) > len(kept):
        kept.insert(0, "Traceback (last lines):")
    return "\n".join(line[:MAX_LINE_CHARS] for line in kept)


_MEMORY_LIMIT_MESSAGES = ("memory limit exceeded", "the worker exceeded its memory limit")


def _kind(exc: BaseException) -> ErrorKind:
    """Which limit stopped a program, from the exception Monty raised in it.

    Monty reports its memory limit as a ``MemoryError`` (through ``MontyRuntimeError``, with
    no traceback) in two ways: its heap's count, "memory limit exceeded: N bytes > M bytes",
    and its worker's allocator, "the worker exceeded its memory limit and was terminated"
    (the worker dies; e.g. while it takes in a large host-function result, where the
    heap's count never ran). Either is the memory limit; a ``MemoryError`` the program
    raises itself is its error.
    """
    message = str(exc)
    if isinstance(exc, TimeoutError) and message.startswith(("feed time limit", "sleep limit")):
        return "timeout"
    if isinstance(exc, TimeoutError) and "limit exceeded" in message:
        return "timeout"
    if isinstance(exc, MemoryError) and message.startswith(_MEMORY_LIMIT_MESSAGES):
        return "memory"
    return "error"


def run_program(
    code: str,
    functions: Collection[str],
    call: HostCall,
    limits: SandboxLimits,
    *,
    passthrough: tuple[type[BaseException], ...] = (),
    cancel: threading.Event | None = None,
) -> ProgramRun:
    """Run ``code`` in a fresh sandbox worker; ``functions`` are the host functions it sees.

    A call to a name in ``functions``, or to any name the program leaves undefined, is
    answered by ``call`` (so an unknown name gets the caller's refusal, not a bare
    ``NameError``); reading an undefined name that is not in ``functions`` raises
    ``NameError`` as in Python. A ``time.sleep`` or ``asyncio.sleep`` sleeps here, when it
    ends within the time left (else the program is stopped at once: it would pass its
    limit asleep); gathered sleeps run one after another. Blocks until the program ends
    (run it in a worker thread from async code); once ``cancel`` is set, the program is
    stopped at its next host call, name lookup or sleep, and a sleep under way is cut short
    (Monty cannot be interrupted between them: it ends at its time limit at the latest).

    Raises:
        ImportError: ``pydantic-monty`` is not installed (the message names the extra).
        BaseException: what ``call`` raises of the ``passthrough`` types (the program is
            stopped and the exception goes on, e.g. LangGraph's interrupts).
    """
    require_sandbox()
    import pydantic_monty as monty

    printed = _Printed(limits.max_output_chars)
    run = ProgramRun()
    started = time.monotonic()
    deadline = started + limits.timeout_s
    lookup = dict.fromkeys(functions, _never_called)
    sandbox_limits: Any = {
        "max_feed_duration_secs": limits.timeout_s,
        "max_memory": limits.max_memory_bytes,
        "max_suspensions": MAX_SUSPENSIONS,
    }
    # sleeps come here as asked (Monty would cut the length at its cap, or raise past its
    # total): each one is bounded by the time left (_sleep)
    policy: Any = {"sleep_system_max": math.inf}
    if _RAN_IN and _RAN_IN[0] != os.getpid():
        logger.warning(FORKED_ERROR)
        run.error, run.error_kind = FORKED_ERROR, "unavailable"
        return run
    _RAN_IN[:] = [os.getpid()]
    try:
        with (
            monty.Monty(
                min_processes=1, max_processes=1, request_timeout=limits.timeout_s + 30
            ) as pool,
            pool.checkout(
                script_name="code.py", limits=sandbox_limits, os_policy=policy
            ) as session,
        ):
            snapshot = session.feed_start(code, external_lookup=lookup, print_callback=printed)
            while not isinstance(snapshot, monty.MontyComplete):
                if cancel is not None and cancel.is_set():
                    raise StopProgram(CANCELLED, kind="cancelled")
                if time.monotonic() > deadline:  # Monty's clock stops at each round trip
                    raise StopProgram(_past_deadline(snapshot, limits))
                if isinstance(snapshot, monty.NameLookupSnapshot):
                    snapshot = snapshot.resume_auto()  # a known function, else NameError
                elif isinstance(snapshot, monty.FunctionSnapshot) and snapshot.is_os_function:
                    if snapshot.function_name in SLEEPS and _sleep(
                        snapshot, deadline, limits, cancel
                    ):
                        snapshot = snapshot.resume({"return_value": None})
                    else:
                        snapshot = snapshot.resume_not_handled()  # PermissionError in it
                elif isinstance(snapshot, monty.FunctionSnapshot):
                    snapshot = snapshot.resume(_answer(call, snapshot, passthrough))
                else:  # a future: the program awaited something no host function returns
                    snapshot = snapshot.resume(
                        dict.fromkeys(snapshot.pending_call_ids, _await_refused())
                    )
            run.value = snapshot.output
    except StopProgram as stop:
        run.error, run.error_kind = str(stop), stop.kind
    except monty.MontySyntaxError as exc:
        run.error, run.error_kind = _last_lines(exc.display("traceback")), "syntax"
    except monty.MontyRuntimeError as exc:
        run.error, run.error_kind = _last_lines(exc.display("traceback")), _kind(exc.exception())
    except monty.MontyCrashedError as exc:
        if _killed_on_time(exc, started, limits):
            run.error, run.error_kind = LONG_OPERATION.format(seconds=limits.timeout_s), "timeout"
        else:
            run.error, run.error_kind = f"the sandbox worker stopped: {exc}", "crashed"
    except monty.MontyError as exc:  # conversion and other sandbox errors
        run.error, run.error_kind = f"{type(exc).__name__}: {exc}", "error"
    run.output, run.dropped_chars = printed.text, printed.dropped
    run.seconds = time.monotonic() - started
    return run


def _past_deadline(snapshot: Any, limits: SandboxLimits) -> str:
    """The time-limit message of a program still running at its deadline."""
    ran = f"time limit reached: the program ran {limits.timeout_s:g} s (its calls included)"
    name = getattr(snapshot, "function_name", None)
    if getattr(snapshot, "is_os_function", True) or not isinstance(name, str):
        return ran
    return f"{ran} before calling {name}()"


def _killed_on_time(exc: Exception, started: float, limits: SandboxLimits) -> bool:
    """Whether the pool killed the worker for time: the sandbox raises ``TimeoutError``
    between two steps of the program, so a program inside one long step (a multiplication
    of huge numbers) is killed by the pool a grace second later, which says so
    (``timed_out``; a pydantic-monty without it: the time it ran)."""
    timed_out = getattr(exc, "timed_out", None)
    if isinstance(timed_out, bool):
        return timed_out
    return time.monotonic() - started >= limits.timeout_s


def _sleep(
    snapshot: Any, deadline: float, limits: SandboxLimits, cancel: threading.Event | None
) -> bool:
    """Sleep as the program asked, within the time left; False when the request is no
    length (Monty checks it first: a number, not negative, not NaN), left to Monty.

    Raises:
        StopProgram: the sleep would end past the program's time limit, or ``cancel`` was
            set (before or during it).
    """
    asked = snapshot.args[0] if len(snapshot.args) == 1 else None
    if not isinstance(asked, int | float) or not asked >= 0:
        return False
    left = deadline - time.monotonic()
    if asked > left:
        left = max(math.floor(left * 100) / 100, 0)  # 0.499 is "0.49 s left", not 0.50
        text = SLEEP_PAST_LIMIT.format(asked=asked, left=left, timeout=limits.timeout_s)
        raise StopProgram(text)
    if cancel is None:
        time.sleep(asked)
    elif cancel.wait(asked):
        raise StopProgram(CANCELLED, kind="cancelled")
    return True


def _never_called(*_: Any, **__: Any) -> Any:
    raise RuntimeError("host functions are answered by run_program, never called directly")


def _await_refused() -> Any:
    return {"exception": TypeError("the tool functions are not async: call them without await")}


def _answer(call: HostCall, snapshot: Any, passthrough: tuple[type[BaseException], ...]) -> Any:
    """The answer to one host-function call: its value, or the exception it raised."""
    try:
        return {"return_value": call(snapshot.function_name, snapshot.args, snapshot.kwargs)}
    except StopProgram:
        raise
    except Exception as exc:  # noqa: BLE001 - raised inside the program, where it belongs
        if passthrough and isinstance(exc, passthrough):
            raise
        return {"exception": exc}
