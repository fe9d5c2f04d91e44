"""CodeMode: ``python_execution``, the built-in that runs the model's Python over its tools.

Its one reason to change: how a program's tool calls are answered and its result given back.

Instead of one model round trip per tool call, the model writes a short program that calls
its tools as functions, loops and filters in code, and prints only what it needs. The
program runs in a real sandbox (:mod:`langgraph_toolbudget.execution.sandbox`); inside it:

- every visible tool is a function of the same name taking its arguments as keywords
  (positional ones in the order of the signature the model reads: required ones first),
  returning the tool's result as Python data (parsed JSON where the tool returns JSON;
  what JSON cannot write is converted by :func:`as_program_data`, from the value the
  tool returned, not from the text of its message);
  ``call_tool("name", **args)`` reaches a tool whose name is not a Python identifier;
- every call goes through the executor's own check, coercion, hooks and timeout: a hidden,
  excluded, filtered, disabled or unknown tool raises ``PermissionError`` with the
  executor's message (and nothing runs); a tool that fails raises ``RuntimeError`` with
  the executor's error message; MCP tools work the same way, over the catalog's sessions;
- the enabled built-ins (``search_tools``, ``add_tool``, ``execute_sql``...) are functions
  too, answered as if the model had called them (a tool ``add_tool`` loads is callable
  in the same program); ``python_execution`` itself is not.

The result is what the program printed plus the value of its last expression; an error
is the traceback's last lines (the model fixes its code); each limit reached
(``codemode_timeout_s``, ``codemode_max_memory_mb``, ``codemode_max_tool_calls``,
``codemode_max_output_chars``) is an error message that names it, and the graph goes on.
A long result is offloaded as a large tool result. What crosses out of the sandbox is
measured before it is written out as text (:func:`written_chars`): a value held many times
in it (``[x] * 20000``, one object there) is text as long as all its copies, so a last value
over ``MAX_CAPTURED_CHARS`` is named instead of shown, and a tool call whose arguments are
longer than ``MAX_ARGS_CHARS`` written out raises ``ValueError`` in the program.
Under ``ainvoke`` a cancelled run stops its program at its next tool call.

The family is registered only while ``"codemode"`` is among the enabled tool-call
formats; ``enabled_builtins`` can still turn ``python_execution`` off.

Key Components:
    - :class:`CodeMode`: the family (definition, answers sync and async).
    - :data:`PYTHON_EXECUTION`: the tool's name.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import inspect
import json
import keyword
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.tools import BaseTool, Tool
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command
from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import FieldKeys, coerce_args, tool_json_schema
from langgraph_toolbudget.core.limits import MAX_OUTPUT_DEPTH, too_deep
from langgraph_toolbudget.core.meta import definition_only
from langgraph_toolbudget.execution.builtin_family import (
    BuiltinContext,
    BuiltinResult,
    BuiltinTools,
    ToolAccess,
    call_arguments,
    merge_update,
)
from langgraph_toolbudget.execution.returned import keep_returned
from langgraph_toolbudget.execution.sandbox import (
    CANCELLED,
    ProgramRun,
    SandboxLimits,
    StopProgram,
    require_sandbox,
    run_program,
)
from langgraph_toolbudget.formats.codemode import call_signature, parameter_order

__all__ = [
    "CALL_TOOL",
    "PYTHON_EXECUTION",
    "CodeMode",
    "as_program_data",
    "as_python_data",
    "codemode_enabled",
    "written_chars",
]

PYTHON_EXECUTION = "python_execution"
"""The CodeMode built-in's name."""
CALL_TOOL = "call_tool"
"""The function that calls a tool by name inside a program (``call_tool("a-b", x=1)``)."""
CODEMODE_FORMAT = "codemode"
MAX_CODE_CHARS = 100_000
"""A longer program is refused (a model that writes this much is not orchestrating)."""
MAX_CAPTURED_CHARS = 1_000_000
"""Printed characters kept while offloading is on (the rest counted, not kept); a program's
last value longer than this written out is named, not shown (:data:`TOO_LONG_VALUE`)."""
HELD_AS_THEY_ARE = (datetime.date, datetime.time, datetime.timedelta, Decimal)
"""What JSON cannot write but the sandbox holds: dates, datetimes, times, durations, Decimals."""
_NOTHING = object()

LIMITS = (
    "Limits per program: {timeout:g} s, {memory} MB, {calls} tool calls, {output:,} characters "
    "of output; no files, network or subprocesses; modules: json, math, re, datetime and a few "
    "more of the standard library."
)
DESCRIPTION = (
    "Run a short Python program in a sandbox. Inside it, each tool you can use is a function "
    "of the same name taking its arguments as keywords, e.g. `r = get_weather(city='Paris')`, "
    "returning the tool's result as Python data (parsed JSON where the tool returns JSON). "
    "Call several tools, loop and filter in code, and print only what you need: you get back "
    "what the program printed and the value of its last expression. A failing tool raises "
    "an exception you may catch. " + LIMITS
)
SHORT_DESCRIPTION = (
    "Run a Python program over your tools (CodeMode: see the system prompt). " + LIMITS
)
"""The description while CodeMode is the primary format: the system prompt explains the rest."""
NO_CODE_ERROR = (
    "Error: python_execution needs 'code': a Python program as a string, e.g. "
    '{"code": "print(get_weather(city=\'Paris\'))"}.'
)
TOO_LONG_ERROR = (
    "Error: the program is {chars:,} characters long; python_execution takes at most "
    f"{MAX_CODE_CHARS:,}. Write a shorter program that calls the tools and prints what you need."
)
RAISED_ERROR = "Error: the program raised an exception (fix the code and run it again):\n{error}"
SYNTAX_ERROR = "Error: the program is not valid Python, so nothing ran:\n{error}"
TIMEOUT_ERROR = (
    "Error: the program was stopped at its time limit of {timeout:g} s "
    "(codemode_timeout_s): {error}\nDo less per program (fewer items, no endless loop), "
    "or run the rest in another program."
)
MEMORY_ERROR = (
    "Error: the program was stopped: it needed more than its memory limit of {memory} MB "
    "(codemode_max_memory_mb).\n{error}\nWork on less data at once (slice, filter or "
    "aggregate as you go)."
)
LARGE_RESULT_NOTE = (
    "\nThe largest tool result it took in was {tool}()'s, {chars:,} characters: a result takes "
    "room in the program too (a list of records about {factor} times its JSON text). Ask the "
    "tool for less (a filter, a limit or a page), or raise codemode_max_memory_mb."
)
RESULT_MEMORY_FACTOR = 20
"""About how many bytes of the sandbox's memory a character of a tool's JSON result takes, for
a list of records (pydantic-monty 1.4: 50,000 five-key records, 5 MB of JSON, need ~105 MB; a
plain string ~1.3 bytes a character). A result taking a tenth of the limit by this count is
named in the memory-limit error."""
CRASHED_ERROR = "Error: the sandbox stopped before the program ended ({error}). Run it again."
CANCELLED_ERROR = "Error: {error}."
CALL_LIMIT_ERROR = (
    "tool-call limit reached: a program may make {limit} tool calls (codemode_max_tool_calls) "
    "and this was call {n}. Handle fewer items per program, or run the rest in another one."
)
NESTED_ERROR = "python_execution cannot be called from inside a program: call the tools directly."
ARGS_TOO_LONG_ERROR = (
    "{tool}() was not called: its arguments would be over {limit:,} characters written out (a "
    "value held several times in them counts each time), the most a call's arguments may be. "
    "Pass less per call: a slice, or one item per call."
)
MAX_ARGS_CHARS = MAX_CAPTURED_CHARS
"""The most a program's tool call's arguments may be, written out: the executor's stages
copy them as text several times."""
SIGNATURE_ERROR = "{tool}() {problem}; its signature is {signature}"
"""A call Python would refuse for the signature the model reads, in Python's words."""
NO_OUTPUT = (
    "(no output: the program printed nothing and did not end with an expression; print the "
    "values you need)"
)
OUTPUT_CUT = "\n[output cut: {dropped:,} more characters not shown; print less, e.g. aggregate]"
PRINTED_BEFORE = "\nPrinted before the error:\n{output}"
TOO_DEEP_VALUE = "({kind} nested too deep to show: return or print a part of it, or a count)"
TOO_LONG_VALUE = (
    "(the program's last value would be over {limit:,} characters written out (a value held "
    "several times in it counts each time), too long to show: return a smaller value, e.g. a "
    "slice, a count or a summary, or print the part you need)"
)
WRITTEN_NAME_CHARS = len("MontyClassProxy(name='', attributes=)")
"""What :func:`written_chars` counts for a sandbox object besides its class name and
attributes (its ``repr``'s wrapping)."""
TOO_LONG_INT_VALUE = (
    "({what} of over {digits:,} digits, too long to show: return or print a part of it, "
    "e.g. n % 10**100 (its last 100 digits) or hex(n))"
)


class _CodeArgs(BaseModel):
    code: str = Field(
        description="A Python program. Tools are functions of the same name (keyword "
        "arguments); print what you need, the last expression's value is returned too."
    )


def codemode_enabled(config: BudgetConfig) -> bool:
    """Whether ``"codemode"`` is among the enabled tool-call formats (CodeMode's gate)."""
    formats = config.tool_call_formats
    return formats is not None and CODEMODE_FORMAT in formats.enabled


def as_python_data(content: Any) -> Any:
    """A tool message's content as the program sees it: parsed JSON where it is JSON,
    a tool's list of strings as that list, text blocks as their (parsed) text."""
    if isinstance(content, str):
        return _json_or_text(content)
    if isinstance(content, list):
        if all(isinstance(part, str) for part in content):
            return list(content)
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if len(texts) == len(content) and all(isinstance(t, str) for t in texts):
            return _json_or_text("\n".join(str(t) for t in texts))
        return [part if isinstance(part, str) else dict(part) for part in content]
    return content


def as_program_data(value: Any) -> Any:
    """A tool's return value that JSON cannot write, as a program gets it.

    JSON data as ``json.loads(json.dumps(value))`` would give it (dicts with text keys, lists
    for tuples); a ``datetime``, ``date``, ``time``, ``timedelta`` or ``Decimal`` as it is (the
    sandbox holds them: ``event["when"].year``, ``order["total"] * 2``); a pydantic model
    (``model_dump()``) or a dataclass as the dict of its fields, an enum member as its value,
    a set as a list, and anything else as pydantic's ``to_jsonable_python`` writes it (a
    ``UUID`` or a path as text), else its ``str()``; nested values alike.

    Raises:
        RecursionError: the value is nested deeper than ``MAX_OUTPUT_DEPTH`` (or contains
            itself); the caller gives the program the message's text instead.
    """
    return _program_data(value, 0)


def _program_data(value: Any, depth: int) -> Any:
    if depth > MAX_OUTPUT_DEPTH:
        raise RecursionError(f"nested deeper than {MAX_OUTPUT_DEPTH} levels")
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, HELD_AS_THEY_ARE):
        return value
    if isinstance(value, Enum):
        return _program_data(value.value, depth + 1)
    if isinstance(value, bool):  # subclasses of the JSON types, as JSON writes them
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, BaseModel):
        value = value.model_dump()
    elif _is_v1_model(value):
        value = value.dict()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {_program_key(k): _program_data(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_program_data(v, depth + 1) for v in value]
    try:
        return to_jsonable_python(value, fallback=str)
    except (TypeError, ValueError):  # pydantic could not write it either
        return str(value)


def _is_v1_model(value: Any) -> bool:
    """A ``pydantic.v1`` model (read from its classes: the package does not import v1)."""
    return any(
        c.__name__ == "BaseModel" and c.__module__.startswith("pydantic.v1")
        for c in type(value).__mro__
    )


def _program_key(key: Any) -> str:
    """A dict key as JSON writes it (``1`` -> ``"1"``, ``True`` -> ``"true"``)."""
    if isinstance(key, Enum):
        key = key.value
    if isinstance(key, str):
        return str.__str__(key)
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    if isinstance(key, datetime.date | datetime.time):
        return key.isoformat()
    return str(key)


def _result_data(content: Any, returned: Any) -> Any:
    """What a program's tool call returns: the message's content as Python data, or where it
    is the text langchain wrote for a value JSON cannot write (its ``str()``, which no hook
    changed), that value (:func:`as_program_data`)."""
    data = as_python_data(content)
    if returned is _NOTHING or isinstance(returned, str | ToolMessage | Command):
        return data
    if not isinstance(data, str) and not isinstance(returned, HELD_AS_THEY_ARE):
        return data  # JSON, parsed (a Decimal alone is text JSON reads as a number)
    try:
        if content != str(returned):
            return data
        return as_program_data(returned)
    except Exception:  # noqa: BLE001 - the value's own str() or dump failed: its text stands
        return data


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def written_chars(value: Any, bound: int) -> int:
    """About how many characters ``json.dumps`` (or ``repr``) writes for ``value``, counted
    no further than just past ``bound`` (compare the result with ``bound``).

    A list, tuple, set or dict counts its brackets and separators, then each item; an item
    held several times (``[x] * 20000`` is one string in the sandbox) counts each time, as
    the text repeats it. A string counts its length, bytes four characters a byte, an int
    its digits, ``None``, a bool or a float its own text (a float as JSON writes it); an
    exception its arguments, a sandbox object (Monty's class proxy) its class name and
    attributes; any other value (a date, a ``Decimal``) the length of its ``repr``, worked
    out once per object.
    Iterative and stopping once past ``bound``, so a value costs at most about ``bound``
    steps whatever its nesting and sharing (each level counts two characters or more).

    >>> x = "a" * 10
    >>> written_chars([x] * 3, 100), written_chars([x] * 1000, 100) > 100
    (44, True)
    """
    chars, todo = 0, [value]
    reprs: dict[int, int] = {}  # by id: the objects are alive, held by ``value``
    while todo and chars <= bound:
        item = todo.pop()
        if isinstance(item, str):
            chars += len(item) + 2
        elif item is None or isinstance(item, bool):
            chars += len(repr(item))
        elif isinstance(item, float):
            chars += len(json.dumps(item))  # inf is "Infinity"
        elif isinstance(item, int):
            chars += item.bit_length() // 3 + 2  # log10(2) < 1/3: never fewer than its digits
        elif isinstance(item, list | tuple | set | frozenset):
            chars += 2 + 2 * len(item)
            if chars <= bound:
                todo.extend(item)
        elif isinstance(item, Mapping):
            chars += 2 + 4 * len(item)
            if chars <= bound:
                todo.extend(item.keys())
                todo.extend(item.values())
        elif isinstance(item, bytes | bytearray):
            chars += 4 * len(item) + 3
        elif isinstance(item, BaseException):
            chars += len(type(item).__name__) + 2
            todo.extend(item.args)
        elif isinstance(attributes := getattr(item, "attributes", None), Mapping):
            chars += len(str(getattr(item, "name", ""))) + WRITTEN_NAME_CHARS
            todo.append(attributes)
        else:
            if (known := reprs.get(id(item))) is None:
                known = reprs[id(item)] = len(repr(item))
            chars += known
    return chars


def _parts(value: Any) -> Iterable[Any] | None:
    """What a sandbox object (a dataclass instance: its attributes) or an exception (its
    arguments) holds, as :func:`written_chars` writes them; None for a value that holds
    nothing."""
    if isinstance(value, BaseException):
        return value.args
    attributes = getattr(value, "attributes", None)
    return attributes.values() if isinstance(attributes, Mapping) else None


def _kind(value: Any) -> str:
    """What ``value`` is, for the model: a sandbox object's class name (``Box``, not the
    proxy's), else its type's."""
    if isinstance(getattr(value, "attributes", None), Mapping):
        name = getattr(value, "name", None)
        if isinstance(name, str) and name:
            return name
    return type(value).__name__


def _render(value: Any) -> str:
    """A program's value as text: JSON where it is JSON data, else its ``repr``; described
    when neither can write it."""
    if isinstance(value, str):
        return value
    if too_deep(value, MAX_OUTPUT_DEPTH, parts=_parts):  # the same on every Python
        return TOO_DEEP_VALUE.format(kind=_kind(value))
    try:
        try:
            return json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            return repr(value)
    except RecursionError:  # nested past Python's recursion limit in another shape
        return TOO_DEEP_VALUE.format(kind=_kind(value))
    except ValueError:  # an int Python will not write in decimal (2**20000), in it somewhere
        kind = type(value).__name__
        what = "an integer" if isinstance(value, int) else f"a {kind} holding an integer"
        return TOO_LONG_INT_VALUE.format(what=what, digits=sys.get_int_max_str_digits())


def _render_last_value(value: Any) -> str:
    """A program's last value as text (:func:`_render`), or named when it would be longer
    than ``MAX_CAPTURED_CHARS``: measured first, as a value held many times in the sandbox
    (one object there) would be written out as often as it appears."""
    if written_chars(value, MAX_CAPTURED_CHARS) > MAX_CAPTURED_CHARS:
        return TOO_LONG_VALUE.format(limit=MAX_CAPTURED_CHARS)
    return _render(value)


def _is_function_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _tool_message(output: Any, call_id: str) -> tuple[ToolMessage | None, dict[str, Any]]:
    """The tool message answering ``call_id`` in a call's output, and the rest of a
    ``Command``'s state update (applied as the built-in's update)."""
    items = output if isinstance(output, list) else [output]
    message: ToolMessage | None = None
    update: dict[str, Any] = {}
    for item in items:
        if isinstance(item, ToolMessage) and message is None:
            message = item
        elif isinstance(item, Command) and isinstance(item.update, dict):
            for key, value in item.update.items():
                if key != "messages":
                    merge_update(update, {key: value})
                    continue
                for m in value if isinstance(value, list) else [value]:
                    if isinstance(m, ToolMessage) and m.tool_call_id == call_id:
                        message = m
    return message, update


@dataclass
class _Program:
    """One program's tool calls: checked, counted and answered through the executor."""

    family: CodeMode
    access: ToolAccess
    parent: str
    run: Callable[[ToolCall], Any]
    calls: int = 0
    update: dict[str, Any] = field(default_factory=dict)
    discovered: list[str] = field(default_factory=list)
    largest: tuple[str, int] = ("", 0)
    """The tool whose result was the largest the program took in, and its length in text."""

    def functions(self, visible: list[str]) -> list[str]:
        """The names the program may call as functions."""
        builtins = [t.name for t in self.access.builtins if t.name != PYTHON_EXECUTION]
        names = [n for n in [*visible, *builtins] if _is_function_name(n)]
        return [*dict.fromkeys(names), CALL_TOOL]

    def __call__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name == CALL_TOOL:
            if not args or not isinstance(args[0], str):
                raise TypeError("call_tool needs the tool's name first: call_tool('name', x=1)")
            name, args = args[0], args[1:]
        if name == PYTHON_EXECUTION:
            raise RuntimeError(NESTED_ERROR)
        self.calls += 1
        limit = self.family.config.codemode_max_tool_calls
        if self.calls > limit:
            raise RuntimeError(CALL_LIMIT_ERROR.format(limit=limit, n=self.calls))
        # before anything copies them as text: the executor's stages would write out each
        # time a value held many times in the sandbox (one object there) appears
        if written_chars((args, kwargs), MAX_ARGS_CHARS) > MAX_ARGS_CHARS:
            raise ValueError(ARGS_TOO_LONG_ERROR.format(tool=name, limit=MAX_ARGS_CHARS))
        builtin = next((t for t in self.access.builtins if t.name == name), None)
        answered = builtin is not None and self.access.answer is not None
        if not answered and (problem := self.access.check(name)) is not None:
            raise PermissionError(problem)
        arguments = self._arguments(name, builtin, args, kwargs)
        call = ToolCall(
            name=name, args=arguments, id=f"{self.parent}.{self.calls}", type="tool_call"
        )
        if answered:
            return self._builtin(call)
        call_id = str(call["id"])
        with keep_returned() as kept:  # the tool's own value, for what JSON cannot write
            output = self.run(call)
        message, update = _tool_message(output, call_id)
        merge_update(self.update, update)
        if message is None:
            return None
        if message.status == "error":
            raise RuntimeError(_render(as_python_data(message.content)))
        self._count(name, message.content)
        return _result_data(message.content, kept.get(call_id, _NOTHING))

    def _count(self, name: str, content: Any) -> None:
        chars = len(content) if isinstance(content, str) else len(str(content))
        if chars > self.largest[1]:
            self.largest = (name, chars)

    def _builtin(self, call: ToolCall) -> Any:
        assert self.access.answer is not None
        result = self.access.answer(call)
        merge_update(self.update, result.update)
        self.discovered.extend(result.discovered)
        if result.error:
            raise RuntimeError(_render(as_python_data(result.content)))
        self._count(call["name"], result.content)
        return as_python_data(result.content)

    def _arguments(
        self, name: str, builtin: BaseTool | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """The call's arguments, bound as Python binds them to the signature the model reads.

        Positional arguments take the parameters in the signature's order; a call Python
        would refuse (too many positional arguments, two values for one argument, a
        keyword that names no argument, a required one missing) raises ``TypeError`` in
        Python's words with the signature. A keyword argument coercion maps to a
        parameter (``Dest``, an alias) is no unknown one; the executor maps it; an alias the
        tool's pydantic schema validates (``**{"from": x}`` for ``from_``) is its field. A keyword
        the schema does not name is refused only when the tool would drop or refuse it
        (:func:`_takes_unknown_keywords`); a tool that takes it gets it.
        """
        tool = builtin
        if tool is None:
            spec = self.family.catalog.get(name)
            tool = spec.tool if spec is not None else None
        if tool is None:  # refused later with the executor's message
            return dict(kwargs)
        schema = tool_json_schema(tool)
        order = parameter_order(schema)
        props = schema.get("properties") or {}
        required = [p for p in order if p in set(schema.get("required") or ())]

        def refuse(problem: str) -> TypeError:
            signature = call_signature(name, schema)
            text = SIGNATURE_ERROR.format(tool=name, problem=problem, signature=signature)
            return TypeError(text)

        if len(args) > len(order):
            raise refuse(_too_many(len(required), len(order), len(args)))
        bound = dict(zip(order, args, strict=False))
        aliases = FieldKeys.of(tool).names  # ``**{"from": x}`` for ``from_``, as invoke takes
        named: dict[str, Any] = {}
        for key, value in kwargs.items():
            param = aliases.get(key, key) if aliases.get(key) in props else key
            if param in bound or param in named:
                raise refuse(f"got multiple values for argument {param!r}")
            named[param] = value
        arguments = {**bound, **named}
        placed = coerce_args(arguments, schema)
        closed = not _takes_unknown_keywords(tool)
        if closed and (unknown := next((k for k in placed if k not in props), None)):
            raise refuse(f"got an unexpected keyword argument {unknown!r}")
        if missing := [p for p in required if p not in placed]:
            raise refuse(_missing(missing))
        return arguments


def _takes_unknown_keywords(tool: BaseTool) -> bool:
    """Whether ``tool`` passes a keyword argument its schema does not name on to its body,
    as a direct ``invoke`` does.

    Read from ``args_schema``, not from the schema the model reads (langchain's
    ``tool_call_schema`` leaves out a pydantic model's ``extra="allow"``): a JSON schema
    (a dict, e.g. an MCP tool's) takes it unless it says ``"additionalProperties": false``
    (a missing key is open in JSON Schema); a pydantic model only with ``extra="allow"``
    (by default pydantic drops it, with ``extra="forbid"`` it refuses it); a tool without
    a schema when its ``_run`` takes ``**kwargs``. A single-input ``Tool`` refuses it.
    """
    schema = tool.args_schema
    if isinstance(schema, dict):
        return schema.get("additionalProperties") is not False
    if schema is None:
        run = inspect.signature(tool._run).parameters.values()
        takes = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in run)
        return takes and not isinstance(tool, Tool)
    config = getattr(schema, "model_config", None)
    if isinstance(config, dict):
        return config.get("extra") == "allow"
    return getattr(getattr(schema, "__config__", None), "extra", None) == "allow"  # pydantic.v1


def _too_many(least: int, most: int, given: int) -> str:
    takes = f"from {least} to {most}" if least < most else str(most)
    plural = "" if most == 1 and least == most else "s"
    were = "was" if given == 1 else "were"
    return f"takes {takes} positional argument{plural} but {given} {were} given"


def _missing(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"
    plural = "" if len(names) == 1 else "s"
    return f"missing {len(names)} required argument{plural}: {listed}"


class CodeMode(BuiltinTools):
    """``python_execution``: the model's Python program over its tools, in a sandbox.

    Registered while ``"codemode"`` is an enabled tool-call format (see
    :func:`codemode_enabled`); on by default then (``enabled_builtins`` can deny it).

    Args:
        catalog: the catalog, in the node's runtime mode.
        config: the shared options (the ``codemode_*`` limits, offloading).

    Raises:
        ImportError: ``pydantic-monty`` is not installed (the message names the extra).
    """

    # Not coerced: a lone text under another name ({"query": "weather in Paris"}) is no
    # program, and must never be run as one; a call without `code` is told so.
    coerces_args = False

    def __init__(self, catalog: ToolCatalog, config: BudgetConfig) -> None:
        require_sandbox()
        self.catalog = catalog
        self.config = config
        self.limits = SandboxLimits(
            timeout_s=config.codemode_timeout_s,
            max_memory_bytes=config.codemode_max_memory_mb * 1024 * 1024,
            max_output_chars=(
                MAX_CAPTURED_CHARS if config.offloading else config.codemode_max_output_chars
            ),
        )

    def definitions(self) -> list[BaseTool]:
        config = self.config
        formats = config.tool_call_formats
        primary = formats is not None and formats.primary == CODEMODE_FORMAT
        description = (SHORT_DESCRIPTION if primary else DESCRIPTION).format(
            timeout=config.codemode_timeout_s,
            memory=config.codemode_max_memory_mb,
            calls=config.codemode_max_tool_calls,
            output=config.codemode_max_output_chars,
        )
        return [definition_only(PYTHON_EXECUTION, description, _CodeArgs)]

    def handle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        access = ctx.tools
        if access is None:
            return BuiltinResult("Error: python_execution cannot call tools here.", error=True)
        return self._execute(call, ctx, access, access.call)

    async def ahandle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        access = ctx.tools
        if access is None:
            return BuiltinResult("Error: python_execution cannot call tools here.", error=True)
        loop = asyncio.get_running_loop()
        cancelled = threading.Event()

        async def start(tool_call: ToolCall) -> Any:
            if cancelled.is_set():  # read on this loop, where the cancellation set it
                raise StopProgram(CANCELLED, kind="cancelled")
            return await access.acall(tool_call)

        def run(tool_call: ToolCall) -> Any:  # from the program's thread, on this loop
            return asyncio.run_coroutine_threadsafe(start(tool_call), loop).result()

        try:
            return await asyncio.to_thread(self._execute, call, ctx, access, run, cancelled)
        except asyncio.CancelledError:
            # the program's thread runs on: no tool call starts after this (one running
            # finishes), and the program is stopped at its next call, lookup or sleep
            cancelled.set()
            raise

    # --- one program --------------------------------------------------------------------------

    def _execute(
        self,
        call: ToolCall,
        ctx: BuiltinContext,
        access: ToolAccess,
        run: Callable[[ToolCall], Any],
        cancelled: threading.Event | None = None,
    ) -> BuiltinResult:
        code = call_arguments(call).get("code")
        if not isinstance(code, str) or not code.strip():
            return BuiltinResult(NO_CODE_ERROR, error=True)
        if len(code) > MAX_CODE_CHARS:
            return BuiltinResult(TOO_LONG_ERROR.format(chars=len(code)), error=True)
        program = _Program(self, access, str(call.get("id") or PYTHON_EXECUTION), run)
        visible = [n for n in ctx.working.names if n in self.catalog]
        outcome = run_program(
            code,
            program.functions(visible),
            program,
            self.limits,
            passthrough=(GraphBubbleUp,),
            cancel=cancelled,
        )
        facts: dict[str, Any] = {"tool_calls": program.calls, "seconds": round(outcome.seconds, 3)}
        if outcome.error is not None:
            facts["stopped"] = outcome.error_kind
            return BuiltinResult(
                self._error(outcome, program),
                error=True,
                artifact={"codemode": facts},
                update=program.update,
                discovered=program.discovered,
            )
        return BuiltinResult(
            self._content(outcome),
            artifact={"codemode": facts},
            update=program.update,
            discovered=program.discovered,
            offload_over=self.config.codemode_max_output_chars,
        )

    def _content(self, outcome: ProgramRun) -> str:
        parts = [outcome.output.rstrip("\n")] if outcome.output.strip() else []
        if outcome.value is not None:
            parts.append(_render_last_value(outcome.value))
        text = "\n".join(parts) if parts else NO_OUTPUT
        limit = self.config.codemode_max_output_chars
        dropped = outcome.dropped_chars
        if not self.config.offloading and len(text) > limit:
            dropped += len(text) - limit
            text = text[:limit]
        return text + OUTPUT_CUT.format(dropped=dropped) if dropped else text

    def _error(self, outcome: ProgramRun, program: _Program) -> str:
        config, error = self.config, str(outcome.error)
        if outcome.error_kind == "timeout":
            text = TIMEOUT_ERROR.format(timeout=config.codemode_timeout_s, error=error)
        elif outcome.error_kind == "memory":
            text = MEMORY_ERROR.format(memory=config.codemode_max_memory_mb, error=error)
            tool, chars = program.largest
            if chars * RESULT_MEMORY_FACTOR * 10 >= self.limits.max_memory_bytes:
                text += LARGE_RESULT_NOTE.format(
                    tool=tool, chars=chars, factor=RESULT_MEMORY_FACTOR
                )
        elif outcome.error_kind == "syntax":
            text = SYNTAX_ERROR.format(error=error)
        elif outcome.error_kind == "crashed":
            text = CRASHED_ERROR.format(error=error)
        elif outcome.error_kind == "cancelled":
            text = CANCELLED_ERROR.format(error=error)
        elif outcome.error_kind == "unavailable":  # no program can run here: say only that
            text = f"Error: {error}"
        else:
            text = RAISED_ERROR.format(error=error)
        printed = outcome.output.strip()
        if printed:
            room = max(0, config.codemode_max_output_chars - len(text))
            text += PRINTED_BEFORE.format(output=printed[-room:] if room else "")
        return text
