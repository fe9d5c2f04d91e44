"""The Pythonic format (Llama 3.2 / Llama 4 chat templates): ``[f(a=1), g(b="x")]``.

Its one reason to change: the Pythonic syntax.

Tools go into the system prompt as a JSON list; the model answers with a
Python-style list of calls. The reply is read with :mod:`ast` (never
``eval``): only names, keyword arguments and literal JSON values are accepted
(``true``/``false``/``null`` too, as models mix JSON in). A call the end of
the reply cuts off (a string or a bracket never closed) is an error, and so is
a reply whose calls hold more code than a reply may
(:data:`~langgraph_toolbudget.formats.base.MAX_CODE_CHARS_PER_REPLY`).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from langchain_core.messages import ToolCall, ToolMessage

from langgraph_toolbudget.core.limits import STATE_INTS
from langgraph_toolbudget.formats._json import ParseBudget, ParseFailure, cut_off
from langgraph_toolbudget.formats._text import (
    LLAMA_LEADING,
    Reply,
    join_text,
    parse_reply,
    parse_segments,
    untagged,
)
from langgraph_toolbudget.formats.base import (
    MAX_CALL_CHARS,
    MAX_CALLS,
    MAX_DEPTH,
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

_START = re.compile(r"\[\s*([A-Za-z_][\w.]*)\s*\(")
# What follows a call's parenthesis when it looks like arguments (a keyword, a literal, or
# none), so that prose such as "Paris (France) is..." is not read as a call.
_ARGUMENTS = r"""(?=\s*(?:\)|[A-Za-z_]\w*\s*=(?!=)|["'\[{(\d.+-]))"""
_LOOKS_LIKE_ARGUMENTS = re.compile(_ARGUMENTS)
# A lone call without the list brackets, at the start of the reply: its parenthesis must
# open arguments.
_BARE = re.compile(r"\s*([A-Za-z_][\w.]*)\s*\(" + _ARGUMENTS)
# What the scan of a call stops at: a string literal (to its closing quote, or to the end
# of the text: then it is unclosed), a comment, a bracket. Everything between is code.
_TOKEN = re.compile(
    r"""
    (?P<prefix>[rRbBuUfF]{0,2})
    (?:'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?P<e1>'''|\\?\Z)
      |\"\"\"[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?P<e2>\"\"\"|\\?\Z)
      |'[^'\\\n]*(?:\\.[^'\\\n]*)*(?P<e3>'|\n|\\?\Z)
      |"[^"\\\n]*(?:\\.[^"\\\n]*)*(?P<e4>"|\n|\\?\Z))
    |(?P<comment>\#[^\n]*)
    |(?P<open>[\[({])
    |(?P<close>[\])}])
    """,
    re.VERBOSE | re.DOTALL,
)
_STRING_ENDS = ("'''", '"""', "'", '"', "\n")
_NAMED = {"true": True, "false": False, "null": None, "none": None}
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_TOO_LONG = f"the tool call is over {MAX_CALL_CHARS} characters or never closed"


class _Segment(NamedTuple):
    """A call's text, and its calls or the problem that keeps them from being read."""

    text: str
    problem: str = ""
    calls: tuple[dict[str, Any], ...] = ()


def _scan(text: str, start: int, budget: ParseBudget) -> tuple[int, str]:
    """From the bracket at ``text[start]``: the index after the bracket closing it and "",
    or -1 and what the text ends inside. Code outside strings is charged to ``budget``,
    each token at least one character, so the loop is bounded by the budget as well.

    Raises:
        ParseFailure: the reply's code budget is spent, or brackets nest too deep.
    """
    stop = min(len(text), start + MAX_CALL_CHARS)
    stack: list[str] = []
    pos = start
    for match in _TOKEN.finditer(text, start, stop):
        budget.spend_code(match.start() - pos + 1)
        pos = match.end()
        kind = match.lastgroup
        if kind == "open":
            stack.append(_CLOSERS[match.group()])
            if len(stack) > MAX_DEPTH:
                raise ParseFailure(f"the arguments nest deeper than {MAX_DEPTH} levels")
        elif kind == "close":
            if stack and match.group() == stack[-1]:
                stack.pop()
                if not stack:
                    return match.end(), ""
        elif kind != "comment":
            if "f" in match.group("prefix").lower():
                budget.spend_code(len(match.group()))  # an f-string's fields are code
            end = match.group("e1") or match.group("e2") or match.group("e3") or match.group("e4")
            if end not in _STRING_ENDS and stop == len(text):
                return -1, "inside a string"
    budget.spend_code(stop - pos)
    return -1, "too long" if stop < len(text) else "before the call is closed"


def _problem(where: str, name: str) -> str:
    return _TOO_LONG if where == "too long" else str(cut_off(name, where))


def _code_untagged(code: str) -> str:
    """A call's code without Llama's special tokens, save inside its strings: there they
    are the argument's own text (``note='<|eot_id|>'``)."""
    if "<|" not in code:
        return code
    out: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(code):
        if match.lastgroup in ("open", "close", "comment"):
            continue
        out += [untagged(code[pos : match.start()]), match.group()]
        pos = match.end()
    out.append(untagged(code[pos:]))
    return "".join(out)


def _find(body: str, budget: ParseBudget) -> tuple[list[_Segment], list[str]]:
    # Llama's special tokens stand around the calls (``<|python_tag|>[...]<|eom_id|>``):
    # they are left out of the prose and of the calls' code, never out of a call's strings.
    lead = LLAMA_LEADING.match(body).end()  # type: ignore[union-attr]  # matches the empty text
    bare = None if body.startswith("[", lead) else _BARE.match(body, lead)
    if bare is not None:
        end, where = _scan(body, bare.end() - 1, budget)
        if end < 0:
            return [_Segment(untagged(body).strip(), _problem(where, bare.group(1)))], []
        if not untagged(body[end:]).strip():
            # a lone call without the list brackets
            return [_parsed(_code_untagged(body[lead:end]).strip())], []
    segments: list[_Segment] = []
    prose: list[str] = []
    pos = search = 0  # where the prose since the last call starts, where to search on
    read = 0
    while read <= MAX_CALLS and (match := _START.search(body, search)) is not None:
        end, where = _scan(body, match.start(), budget)
        if end < 0:  # unclosed: the call is cut off, or too long
            prose.append(untagged(body[pos : match.start()]))
            text = untagged(body[match.start() : match.start() + MAX_CALL_CHARS])
            segments.append(_Segment(text, _problem(where, match.group(1))))
            return segments, prose
        search = end
        if body.startswith("(", end):  # a Markdown link, [Apollo (11)](https://...): prose
            continue
        segment = _parsed(_code_untagged(body[match.start() : end]))
        read += 1
        before = untagged(body[pos : match.start()])
        if (
            segment.problem
            and not _LOOKS_LIKE_ARGUMENTS.match(body, match.end())
            and _in_prose(before, untagged(body[end:]))
        ):
            continue  # "see [Mercury (planet)] below": brackets in prose, not a call
        prose.append(before)
        segments.append(segment)
        pos = end
    prose.append(untagged(body[pos:]))
    return segments, prose


def _next_call(text: str, pos: int, budget: ParseBudget) -> tuple[int, int] | None:
    """The first call from ``pos``: a lone call at ``pos`` or a bracketed list, to its
    closing bracket (the end of ``text`` when it is never closed or too long to read)."""
    lead = LLAMA_LEADING.match(text, pos).end()  # type: ignore[union-attr]  # matches the empty text
    bare = None if text.startswith("[", lead) else _BARE.match(text, lead)
    match = bare or _START.search(text, pos)
    if match is None:
        return None
    end, _where = _scan(text, match.end() - 1 if bare else match.start(), budget)
    return match.start(), len(text) if end < 0 else end


def _in_prose(before: str, after: str) -> bool:
    """Whether brackets stand in prose: words before them (since the last call), or words
    after them rather than another call."""
    rest = after.lstrip()
    return bool(before.strip()) or (bool(rest) and not rest.startswith("["))


def _source(source: str, node: ast.AST) -> str:
    """The text of ``node`` in ``source``, clipped (not :func:`ast.unparse`: it recurses)."""
    text = ast.get_source_segment(source, node) or type(node).__name__
    return text if len(text) <= 80 else f"{text[:80]}..."


def _literal(node: ast.expr, source: str) -> Any:
    """The JSON value a literal writes: a string, a number, true/false/null, a list, a dict."""
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, str | int | float):
            return _number(node.value, node, source)  # bool is an int
        raise ParseFailure(f"argument {_source(source, node)!r} is not a JSON value")
    if isinstance(node, ast.Name) and node.id.lower() in _NAMED:
        return _NAMED[node.id.lower()]
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        number: int | float = node.operand.value  # type: ignore[assignment]
        return _number(-number if isinstance(node.op, ast.USub) else number, node, source)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_literal(e, source) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:
                raise ParseFailure("'**' in a dict argument is not a literal")
            out[_key(key, source)] = _literal(item, source)
        return out
    raise ParseFailure(f"argument {_source(source, node)!r} is not a literal value")


def _number(value: Any, node: ast.expr, source: str) -> Any:
    """A literal's value; an integer the state cannot hold (outside
    :data:`~langgraph_toolbudget.core.limits.STATE_INTS`, e.g. ``0xfff...`` of any length) as
    the text the model wrote, as the JSON formats keep such a number."""
    if type(value) is not int or value in STATE_INTS:
        return value
    return ast.get_source_segment(source, node) or hex(value)


def _key(node: ast.expr, source: str) -> str:
    """A dict key as JSON has it: a string (a number, true/false/null as its JSON text)."""
    key = _literal(node, source)
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, int | float):
        return json.dumps(key)
    raise ParseFailure(f"dict key {_source(source, node)!r} is not a string or a number")


def _name(func: ast.expr, source: str) -> str:
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        raise ParseFailure(f"{_source(source, func)!r} is not a function name")
    return ".".join([func.id, *reversed(parts)])


def _call(node: ast.expr, source: str) -> dict[str, Any]:
    if not isinstance(node, ast.Call):
        raise ParseFailure(f"{_source(source, node)!r} is not a function call")
    args: dict[str, Any] = {}
    for number, positional in enumerate(node.args, 1):
        args[f"__arg{number}"] = _literal(positional, source)  # coercion maps it to the field
    for keyword in node.keywords:
        if keyword.arg is None:
            raise ParseFailure("'**kwargs' is not allowed in a call; name each argument")
        args[keyword.arg] = _literal(keyword.value, source)
    return {"name": _name(node.func, source), "args": args}


def _parsed(text: str) -> _Segment:
    """A segment with its calls read, or with the reason they cannot be."""
    try:
        return _Segment(text, calls=tuple(_calls(text)))
    except ParseFailure as exc:
        return _Segment(text, str(exc))


def _read(segment: _Segment, budget: ParseBudget) -> list[dict[str, Any]]:
    if segment.problem:
        raise ParseFailure(segment.problem)
    return list(segment.calls)


def _calls(text: str) -> list[dict[str, Any]]:
    """The calls of a list of calls (or of one call) written in Python.

    Raises:
        ParseFailure: not a list of calls, or an argument that is not a literal value.
    """
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        reason = getattr(exc, "msg", None) or type(exc).__name__
        raise ParseFailure(f"not a Python list of calls ({reason})") from None
    body = tree.body
    nodes = body.elts if isinstance(body, ast.List | ast.Tuple) else [body]
    if not nodes:
        raise ParseFailure("the list of calls is empty")
    return [_call(n, source) for n in nodes]


def _value(value: Any) -> str:
    return repr(value)


def _parse_body(reply: Reply) -> ParsedReply:
    return parse_segments(reply, _find, _read)


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
        return parse_reply(text, _next_call, _parse_body)

    @property
    def example(self) -> str:
        return '[tool_name(param="value", other_param=2)]'
