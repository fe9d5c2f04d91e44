"""The Pythonic format (Llama 3.2 / Llama 4 chat templates): ``[f(a=1), g(b="x")]``.

Its one reason to change: the Pythonic syntax.

Tools go into the system prompt as a JSON list; the model answers with a
Python-style list of calls. The reply is read with :mod:`ast` (never
``eval``): only names, keyword arguments and literal values are accepted
(``true``/``false``/``null`` too, as models mix JSON in).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage

from langgraph_toolbudget.formats._json import ParseFailure, code_chars, too_deep
from langgraph_toolbudget.formats._text import join_text, parse_segments
from langgraph_toolbudget.formats.base import (
    MAX_CALL_CHARS,
    MAX_CALLS,
    ParsedReply,
    ToolCallFormat,
    tool_name,
)
from langgraph_toolbudget.formats.base import result_text as _result_text

__all__ = ["Pythonic"]

INSTRUCTIONS = """You can call functions. To call one or more of them, reply with only a \
list of calls in this format:
[func_name1(param_name1=value1, param_name2=value2), func_name2(param=value)]
Do not add other text to a reply with calls. When you have the answer, reply in plain text.

Here are the functions you can invoke, one JSON schema per line:
{tools}"""

_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_BARE = re.compile(r"^\s*[A-Za-z_][\w.]*\s*\(.*\)\s*$", re.DOTALL)
_SPECIAL_TOKENS = (
    "<|python_tag|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_start|>",
    "<|python_end|>",
)
_NAMED = {"true": True, "false": False, "null": None, "none": None}
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


def _matching_end(text: str, start: int) -> int:
    """Index after the bracket closing ``text[start]``, string-aware; -1 if unclosed."""
    stack: list[str] = []
    for i, char in code_chars(text, start, start + MAX_CALL_CHARS):
        if char in _CLOSERS:
            stack.append(_CLOSERS[char])
        elif stack and char == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
    return -1


def _find(body: str) -> tuple[list[str], list[str]]:
    for token in _SPECIAL_TOKENS:
        body = body.replace(token, "")
    if _BARE.match(body) and not body.lstrip().startswith("["):
        return [body.strip()], []  # a lone call without the list brackets
    segments: list[str] = []
    prose: list[str] = []
    pos = 0
    while len(segments) <= MAX_CALLS and (match := _START.search(body, pos)) is not None:
        end = _matching_end(body, match.start())
        prose.append(body[pos : match.start()])
        if end < 0:  # unclosed: the call is truncated or broken, let the parser say how
            segments.append(body[match.start() : match.start() + MAX_CALL_CHARS])
            return segments, prose
        segments.append(body[match.start() : end])
        pos = end
    prose.append(body[pos:])
    return segments, prose


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Name) and node.id.lower() in _NAMED:
        return _NAMED[node.id.lower()]
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ParseFailure("'**' in a dict argument is not a literal")
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError) as exc:
        raise ParseFailure(f"argument {ast.unparse(node)!r} is not a literal value") from exc


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return f"{_name(func.value)}.{func.attr}"
    raise ParseFailure(f"{ast.unparse(func)!r} is not a function name")


def _call(node: ast.expr) -> dict[str, Any]:
    if not isinstance(node, ast.Call):
        raise ParseFailure(f"{ast.unparse(node)!r} is not a function call")
    args: dict[str, Any] = {}
    for number, positional in enumerate(node.args, 1):
        args[f"__arg{number}"] = _literal(positional)  # coercion maps it to the tool's field
    for keyword in node.keywords:
        if keyword.arg is None:
            raise ParseFailure("'**kwargs' is not allowed in a call; name each argument")
        args[keyword.arg] = _literal(keyword.value)
    return {"name": _name(node.func), "args": args}


def _read(segment: str) -> list[dict[str, Any]]:
    if len(segment) >= MAX_CALL_CHARS:
        raise ParseFailure(f"the tool call is over {MAX_CALL_CHARS} characters or never closed")
    if too_deep(segment):
        raise ParseFailure("the arguments nest too deep")
    try:
        tree = ast.parse(segment.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        reason = getattr(exc, "msg", None) or type(exc).__name__
        raise ParseFailure(f"not a Python list of calls ({reason})") from None
    body = tree.body
    nodes = body.elts if isinstance(body, ast.List | ast.Tuple) else [body]
    if not nodes:
        raise ParseFailure("the list of calls is empty")
    return [_call(n) for n in nodes]


def _value(value: Any) -> str:
    return repr(value)


class Pythonic(ToolCallFormat):
    """Llama 3.2 style tool calling in text: ``[get_weather(city="Paris")]``."""

    name = "pythonic"

    def render_tools(self, tools: Sequence[dict[str, Any]]) -> str:
        return INSTRUCTIONS.format(tools="\n".join(json.dumps(t.get("function", t)) for t in tools))

    def render_calls(self, calls: Sequence[ToolCall], text: str = "") -> str:
        rendered = [
            f"{c['name']}({', '.join(f'{k}={_value(v)}' for k, v in c['args'].items())})"
            for c in calls
        ]
        return join_text(text, f"[{', '.join(rendered)}]")

    def render_result(self, message: ToolMessage, call: ToolCall | None) -> str:
        name = tool_name(message, call)
        return f"Output of {name}:\n{_result_text(message)}"

    def parse(self, text: str) -> ParsedReply:
        return parse_segments(text, _find, _read)

    @property
    def example(self) -> str:
        return '[tool_name(param="value", other_param=2)]'
