"""The CodeMode format: the model writes a Python program that calls its tools as functions.

Its one reason to change: how CodeMode shows the tools and reads a program back.

The tools are written into the system prompt as Python function signatures with their
descriptions (shorter than JSON schemas), under instructions saying how a program runs
and what comes back. A model with native tool calling calls the one bound tool,
``python_execution`` with ``{"code": ...}`` (:attr:`CodeModeFormat.binds`); a text-only
model ends its reply with one fenced ```` ```python ```` block, read as the same call. A
reply that ends otherwise is an answer (a code block shown to the user and followed by
prose stays prose); a ```` ```python ```` block left open at the end of the reply was cut
off, and is never run.

The format is available only while ``python_execution`` is enabled (the model call checks
it, see :func:`~langgraph_toolbudget.formats.settings.choose_format`).
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage

from langgraph_toolbudget.formats._json import ParseBudget
from langgraph_toolbudget.formats._text import Reply, join_text, parse_reply
from langgraph_toolbudget.formats.base import (
    MAX_CALL_CHARS,
    ParsedReply,
    ToolCallFormat,
    result_text,
    tool_name,
)

__all__ = [
    "PYTHON_EXECUTION",
    "CodeModeFormat",
    "call_signature",
    "parameter_order",
    "python_signature",
]

PYTHON_EXECUTION = "python_execution"
FENCE = "```"
LIMITS_UNKNOWN = "A program has limits of time, memory, tool calls and output; no files or network."
LANGUAGES = ("python", "py", "python3")
_PYTHON_BLOCK = re.compile(r"```[ \t]*(?:python3|python|py)[ \t]*\n", re.IGNORECASE)

INSTRUCTIONS = """## CodeMode: work by writing Python
Use your tools from a short Python program: call python_execution with {{"code": "..."}}, \
or end your reply with one ```python block. In the program each function below calls the tool \
of that name (keyword arguments) and returns its result as Python data (parsed JSON where the \
tool returns JSON); a tool that fails or that you cannot use raises an exception saying why. \
Loop, filter and combine in code and print only what you need: you get back what the program \
printed and the value of its last expression.
{limits}
Answer in plain text, without a ```python block.

Functions:
```python
{functions}
```"""

_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


def _type(prop: Any) -> str:
    if not isinstance(prop, dict):
        return "Any"
    options = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(options, list) and options:
        return " | ".join(dict.fromkeys(_type(o) for o in options))
    kind = prop.get("type")
    if isinstance(kind, list):
        return " | ".join(_TYPES.get(str(k), "Any") for k in kind)
    if kind == "array" and isinstance(prop.get("items"), dict):
        return f"list[{_type(prop['items'])}]"
    return _TYPES.get(str(kind), "Any")


def _default(prop: dict[str, Any]) -> str:
    return repr(prop["default"])[:80] if "default" in prop else "None"


def _identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def parameter_order(parameters: dict[str, Any]) -> list[str]:
    """A tool's parameters in the order of its Python signature: required ones first.

    A program's positional arguments take the parameters in this order, the one the
    model reads in :func:`python_signature`.

    Args:
        parameters: the JSON schema of the tool's arguments (``properties``, ``required``).

    Returns:
        The required parameters, then the others, each in the schema's order.
    """
    props = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    return [*[p for p in props if p in required], *[p for p in props if p not in required]]


def _parameters(parameters: dict[str, Any]) -> list[str]:
    """The parameters of a signature, written as the model reads them."""
    props: dict[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    params: list[str] = []
    for pname in parameter_order(parameters):
        prop = props[pname] if isinstance(props[pname], dict) else {}
        shown = pname if _identifier(pname) else f"**{{{json.dumps(pname)}: ...}}"
        text = f"{shown}: {_type(prop)}"
        if pname not in required:
            text += f" = {_default(prop)}"
        params.append(text)
    return params


def call_signature(name: str, parameters: dict[str, Any]) -> str:
    """How a program calls a tool, as its signature: ``copy_file(src: str, dest: str = ...)``.

    Args:
        name: the tool's name (one that is no Python identifier is called through
            ``call_tool``).
        parameters: the JSON schema of the tool's arguments.

    Returns:
        The call's signature, in the words of :func:`python_signature`.
    """
    params = ", ".join(_parameters(parameters))
    if _identifier(name):
        return f"{name}({params})"
    return f"call_tool({', '.join(p for p in (json.dumps(name), params) if p)})"


def python_signature(schema: dict[str, Any]) -> str:
    """One tool (an OpenAI tool schema) as a Python signature with its description."""
    function = schema.get("function", schema)
    name = str(function.get("name", "tool"))
    parameters = function.get("parameters") or {}
    props: dict[str, Any] = parameters.get("properties") or {}
    notes = [
        f"    {pname}: {' '.join(str(props[pname]['description']).split())}"
        for pname in parameter_order(parameters)
        if isinstance(props[pname], dict) and props[pname].get("description")
    ]
    description = " ".join(str(function.get("description", "")).split())
    head = (
        f"def {call_signature(name, parameters)} -> Any:"
        if _identifier(name)
        else f"# {call_signature(name, parameters)} -> Any:"
    )
    lines = ([description] if description else []) + (["Args:", *notes] if notes else [])
    if not lines:
        return head + " ..."
    doc = "\n    ".join(lines)
    return f'{head}\n    """{doc}"""'


def _limits(schemas: Sequence[dict[str, Any]]) -> str:
    for schema in schemas:
        function = schema.get("function", schema)
        if function.get("name") == PYTHON_EXECUTION:
            description = str(function.get("description", ""))
            cut = description.find("Limits per program")
            if cut >= 0:
                return description[cut:]
    return LIMITS_UNKNOWN


class CodeModeFormat(ToolCallFormat):
    """CodeMode: tools as Python functions; calls are programs run by ``python_execution``."""

    name = "codemode"
    binds = (PYTHON_EXECUTION,)

    def render_tools(self, tools: Sequence[dict[str, Any]]) -> str:
        others = [t for t in tools if t.get("function", t).get("name") != PYTHON_EXECUTION]
        functions = "\n\n".join(python_signature(t) for t in others) or "# (no tools yet)"
        return INSTRUCTIONS.format(limits=_limits(tools), functions=functions)

    def render_calls(self, calls: Sequence[ToolCall], text: str = "") -> str:
        blocks = []
        for call in calls:
            args = call.get("args")
            args = args if isinstance(args, dict) else {}  # another shape was answered an error
            if call["name"] == PYTHON_EXECUTION and isinstance(args.get("code"), str):
                code = args["code"]
            else:  # a direct call (a native model's): the same call written as code
                written = ", ".join(f"{k}={v!r}" for k, v in args.items())
                code = f"print({call['name']}({written}))"
            blocks.append(f"{FENCE}python\n{code.rstrip()}\n{FENCE}")
        return "\n\n".join(p for p in (text.strip(), *blocks) if p)

    def render_result(self, message: ToolMessage, call: ToolCall | None) -> str:
        name = tool_name(message, call)
        failed = message.status == "error"
        if name == PYTHON_EXECUTION:
            head = "Your program failed:" if failed else "Your program's output:"
        else:
            head = f"{name} failed:" if failed else f"Result of {name}:"
        return f"{head}\n{result_text(message)}"

    def parse(self, text: str) -> ParsedReply:
        return parse_reply(text, _next_call, _parse_body)

    @property
    def example(self) -> str:
        return f"{FENCE}python\nprint(tool_name(param='value'))\n{FENCE}"


def _parse_body(reply: Reply) -> ParsedReply:
    text, reasoning, body, _open = reply
    stripped = body.rstrip()
    if not stripped.endswith(FENCE):
        if _open_python_block(stripped):
            return ParsedReply(
                text=text,
                error="the ```python block is not closed (was the reply cut off?); nothing ran",
            )
        return ParsedReply(text=join_text(reasoning, body))
    close = len(stripped) - len(FENCE)
    start = stripped.rfind(FENCE, 0, close)
    if start < 0:
        return ParsedReply(text=join_text(reasoning, body))
    header_end = stripped.find("\n", start)
    if header_end < 0 or header_end > close:
        return ParsedReply(text=join_text(reasoning, body))
    language = stripped[start + len(FENCE) : header_end].strip().lower()
    if language not in LANGUAGES:
        return ParsedReply(text=join_text(reasoning, body))
    code = stripped[header_end + 1 : close]
    if not code.strip():
        return ParsedReply(text=text, error="the ```python block is empty")
    if len(code) > MAX_CALL_CHARS:
        return ParsedReply(
            text=text, error=f"the program is longer than {MAX_CALL_CHARS:,} characters"
        )
    calls = [{"name": PYTHON_EXECUTION, "args": {"code": code}}]
    return ParsedReply(calls=calls, text=join_text(reasoning, stripped[:start]))


def _next_call(text: str, pos: int, budget: ParseBudget) -> tuple[int, int] | None:
    """The first ```python block from ``pos``, to its closing fence (or the end)."""
    match = _PYTHON_BLOCK.search(text, pos)
    if match is None:
        return None
    close = text.find(FENCE, match.end())
    return match.start(), len(text) if close < 0 else close + len(FENCE)


def _open_python_block(text: str) -> bool:
    """Whether ``text`` ends inside a ```python block (its last fence opens one)."""
    count = text.count(FENCE)
    if count % 2 == 0:
        return False
    last = text.rfind(FENCE)
    line_end = text.find("\n", last)
    language = text[last + len(FENCE) : line_end if line_end >= 0 else len(text)]
    return language.strip().lower() in LANGUAGES
