"""The demo model in CodeMode: it reads its tools as Python functions and writes programs.

Its one reason to change: how the demo rules are served in CodeMode.

Key Components:
    - :class:`CodeModeDemoChatModel`: the rule-based
      :func:`~langgraph_toolbudget.demo.model.demo_reply` behind a text-only interface
      that works by writing Python: it reads the functions of the CodeMode prompt and its
      programs' outputs back, and answers each step with one ```` ```python ```` block that
      calls one function and prints its result. A demo model for the offline demo, the
      notebook and the server's CodeMode graph, not a test fake.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langgraph_toolbudget.demo.model import RuleChatModel, demo_reply
from langgraph_toolbudget.formats import get_format

__all__ = ["CodeModeDemoChatModel", "read_codemode_prompt"]

_FUNCTIONS = "Functions:\n```python\n"
_OUTPUT, _FAILED = "Your program's output:\n", "Your program failed:\n"
_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_JSON_TYPES.update({"list": "array", "dict": "object"})


def _schemas(system: str) -> list[dict[str, Any]]:
    """The functions of a CodeMode prompt as OpenAI tool schemas."""
    start = system.find(_FUNCTIONS)
    end = system.find("\n```", start + len(_FUNCTIONS))
    if start < 0 or end < 0:
        return []
    try:
        tree = ast.parse(system[start + len(_FUNCTIONS) : end])
    except SyntaxError:
        return []
    out = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        args = node.args.args
        required = args[: len(args) - len(node.args.defaults)]
        props = {
            a.arg: {"type": _JSON_TYPES.get(ast.unparse(a.annotation).split("[")[0], "string")}
            for a in args
            if a.annotation is not None
        }
        function = {
            "name": node.name,
            "description": (ast.get_docstring(node) or "").split("\nArgs:")[0],
            "parameters": {"type": "object", "properties": props,
                           "required": [a.arg for a in required]},
        }  # fmt: skip
        out.append({"type": "function", "function": function})
    return out


def _call(code: str, call_id: str) -> dict[str, Any] | None:
    """The one call of a demo program: ``result = name(**literal kwargs)``."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("print", "isinstance"):
                continue
            try:
                args = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
            except ValueError:
                return None
            return {"name": node.func.id, "args": args, "id": call_id}
    return None


def read_codemode_prompt(
    messages: Sequence[BaseMessage],
) -> tuple[list[BaseMessage], list[dict[str, Any]]]:
    """A CodeMode prompt read back: (standard messages, the functions' OpenAI schemas).

    Each program becomes the tool call it makes, and its output the ``ToolMessage``
    answering it, so the rule-based demo logic, written for native tool calling, runs
    unchanged.
    """
    codemode = get_format("codemode")
    tools: list[dict[str, Any]] = []
    out: list[BaseMessage] = []
    pending: str | None = None
    for message in messages:
        text = message.text if isinstance(message.text, str) else str(message.content)
        if isinstance(message, SystemMessage):
            tools = _schemas(text) or tools
        elif isinstance(message, AIMessage):
            parsed = codemode.parse(text)
            code = parsed.calls[0]["args"]["code"] if parsed.calls else ""
            call = _call(code, f"c{len(out)}") if code else None
            pending = call["id"] if call else None
            out.append(AIMessage(parsed.text, tool_calls=[call] if call else []))
        elif isinstance(message, HumanMessage) and pending and text.startswith((_OUTPUT, _FAILED)):
            failed = text.startswith(_FAILED)
            body = text[len(_FAILED if failed else _OUTPUT) :]
            status = "error" if failed else "success"
            out.append(ToolMessage(body, tool_call_id=pending, status=status))
            pending = None
        else:
            out.append(message)
    return out, tools


class CodeModeDemoChatModel(RuleChatModel):
    """The demo model as a model that works by writing Python (CodeMode).

    It has no ``bind_tools``: the agent shows it its tools as Python functions in the
    system prompt (the ``codemode`` format, with ``python_execution`` enabled), and it
    answers each step with one ```` ```python ```` block.

    Example:
        ```python
        formats = {"enabled": ["codemode"], "primary": "codemode"}
        builtins = ["python_execution", "search_tools", "add_tool"]
        graph = create_toolbudget_agent(
            CodeModeDemoChatModel(), build_example_catalog(),
            tool_call_formats=formats, enabled_builtins=builtins,
        )
        ```
    """

    model_name: str = "codemode-demo"

    @property
    def _llm_type(self) -> str:
        return "toolbudget-codemode-demo"

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        history, tools = read_codemode_prompt(messages)
        reply = demo_reply(history, tools)
        if reply.tool_calls:
            call = reply.tool_calls[0]
            args = ", ".join(f"{k}={v!r}" for k, v in call["args"].items())
            code = (
                "import json\n"
                f"result = {call['name']}({args})\n"
                "print(result if isinstance(result, str) else json.dumps(result))"
            )
            reply = AIMessage(f"```python\n{code}\n```")
        return reply
