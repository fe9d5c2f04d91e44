"""The stages before a tool runs: check the call, coerce its arguments, build the tool's input.

Its one reason to change: how a call is checked and its arguments coerced before it runs.

Key Components:
    - :class:`CallPreparer`: given a call and its tool, either the error the call is
      answered with (refused by the caller's check, not a tool, arguments nested
      too deep or not JSON) or the call with its arguments repaired against the
      tool's JSON schema; and the injector that fills LangGraph's injected
      arguments (``InjectedState``, ``InjectedStore``, ``ToolRuntime``...) into
      the tool's input. Schemas and injectors are read once per catalog tool, on
      its first call (not for every tool when the catalog is built).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import jsonschema
import referencing.exceptions
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.tools import BaseTool, ToolException
from pydantic import PydanticUserError

from langgraph_toolbudget._compat import has_injected_args, injector_for
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import (
    RAW_ARGUMENTS_KEY,
    FieldKeys,
    coerce_args,
    schema_problem_message,
    tool_json_schema,
)
from langgraph_toolbudget.core.compact import json_schema_problem
from langgraph_toolbudget.core.limits import (
    LONG_INT_ERROR,
    MAX_ARG_DEPTH,
    TOO_DEEP_ERROR,
    echo,
    holds_long_int,
    too_deep,
)
from langgraph_toolbudget.core.meta import server_down_error

__all__ = [
    "NOT_A_TOOL_ERROR",
    "RAW_ARGUMENTS_ERROR",
    "ArgumentsError",
    "CallCheck",
    "CallPreparer",
    "Refused",
    "error_message",
]

CallCheck = Callable[[str], str | None]
"""Policy of the check stage: tool name -> why the call may not run (for the model), or None."""
Injector = Callable[[Any, Any], Any]
"""``(tool call, tool runtime) -> tool call`` with LangGraph's injected arguments filled in."""

RAW_ARGUMENTS_ERROR = (
    "Error: the arguments of your call to {tool!r} are not valid JSON, so it was not run: "
    "{raw}\nExpected arguments (JSON schema): {schema}\nCall it again with a JSON object."
)
NOT_A_TOOL_ERROR = "Error: {tool!r} is not a tool of this app, so it was not run."


def error_message(call: ToolCall, content: str) -> ToolMessage:
    """The error tool message answering ``call``."""
    return ToolMessage(content, name=call["name"], tool_call_id=call["id"], status="error")


class ArgumentsError(ToolException):
    """A call's arguments break its tool's JSON schema (a tool langchain does not validate,
    as an MCP tool): raised to the error policy as a pydantic tool's ``ValidationError`` is,
    so ``handle_tool_errors`` decides as it does for one.

    Attributes:
        problem: what is wrong, and where.
        arguments: the arguments, after coercion.
        schema: the tool's JSON schema.
    """

    def __init__(self, problem: str, arguments: Any, schema: dict[str, Any]) -> None:
        super().__init__(f"invalid arguments: {problem}")
        self.problem = problem
        self.arguments = arguments
        self.schema = schema

    def explained(self, tool: str) -> str:
        """The message the model gets under the explained policy (as for a local tool)."""
        return schema_problem_message(tool, self.problem, self.arguments, self.schema)


@dataclass(frozen=True)
class Refused:
    """A call the tool's schema refused before it ran: answered by the error policy."""

    call: ToolCall
    tool: BaseTool
    error: ArgumentsError


@dataclass(frozen=True)
class _ToolRead:
    """What the stages need of a tool, read once per catalog tool."""

    schema: dict[str, Any] | None
    inject: Injector | None
    keys: FieldKeys
    checks_json: bool = False
    """The tool takes a JSON schema (an MCP tool's ``inputSchema``), which langchain does not
    validate: its arguments are checked against it here, as a pydantic schema checks them."""


class CallPreparer:
    """Checks a call and repairs its arguments; fills the injected ones at invoke time.

    Args:
        catalog: the tool catalog; its tools' schemas and injectors are read once.
        messages_key: the state key of the messages (for ``InjectedState`` tools).
    """

    def __init__(self, catalog: ToolCatalog, messages_key: str = "messages") -> None:
        self.catalog = catalog
        self.messages_key = messages_key
        self._read: dict[str, _ToolRead] = {}

    def known(self, tool: BaseTool) -> bool:
        """Is ``tool`` the catalog's tool of its name (not one a hook supplied)?"""
        spec = self.catalog.get(tool.name)
        return spec is not None and spec.tool is tool

    def prepare(
        self, call: ToolCall, tool: BaseTool | None, check: CallCheck
    ) -> tuple[BaseTool, ToolCall] | ToolMessage | Refused:
        """Check and coerce: the tool and the call to invoke, the error to answer with, or
        the arguments' refusal for the error policy to answer (:class:`Refused`).

        A tool a hook put in the request (``request.override(tool=...)``) is the
        application's choice: it runs unchecked, as under ``ToolNode``.
        """
        known = tool is not None and self.known(tool)
        problem = check(call["name"]) if tool is None or known else None
        if problem is not None:
            return error_message(call, problem)
        if tool is None:
            down = server_down_error(self.catalog, call["name"])
            return error_message(call, down or NOT_A_TOOL_ERROR.format(tool=call["name"]))
        args = call.get("args", {})
        if too_deep(args):  # json.dumps, repr and validation would recurse
            return error_message(call, TOO_DEEP_ERROR.format(tool=tool.name, depth=MAX_ARG_DEPTH))
        if holds_long_int(args):
            digits = sys.get_int_max_str_digits()
            long_int = LONG_INT_ERROR.format(tool=tool.name, digits=digits, sent=echo(args))
            return error_message(call, long_int)
        schema = self._tool_read(tool).schema
        if isinstance(args, dict) and RAW_ARGUMENTS_KEY in args:
            raw = RAW_ARGUMENTS_ERROR.format(
                tool=tool.name, raw=echo(args[RAW_ARGUMENTS_KEY]), schema=json.dumps(schema)
            )
            return error_message(call, raw)
        read = self._tool_read(tool)
        keys = read.keys
        if schema is not None:
            args = coerce_args(keys.by_name(args), schema)
            if read.checks_json and (problem := _json_problem(schema, args)) is not None:
                return Refused(call, tool, ArgumentsError(problem, args, schema))
        return tool, {**call, "args": keys.for_validation(args)}

    def injector(self, tool: BaseTool) -> Injector | None:
        """The function filling ``tool``'s injected arguments; None if it has none."""
        return self._tool_read(tool).inject

    def _tool_read(self, tool: BaseTool) -> _ToolRead:
        """The tool's schema and injector; kept for the catalog's tools only, so the
        cache stays bounded (a tool a hook supplied is read on each call)."""
        if (read := self._read.get(tool.name)) is not None and self.known(tool):
            return read
        try:
            schema: dict[str, Any] | None = tool_json_schema(tool)
        except (TypeError, ValueError, PydanticUserError):
            schema = None
        inject = injector_for(tool, self.messages_key) if has_injected_args(tool) else None
        checks_json = (
            isinstance(tool.args_schema, dict)
            and schema is not None
            and _json_problem(schema) is None
        )
        read = _ToolRead(schema, inject, FieldKeys.of(tool), checks_json)
        if self.known(tool):
            self._read[tool.name] = read
        return read


def _json_problem(schema: dict[str, Any], arguments: Any = None) -> str | None:
    """:func:`json_schema_problem` of a call's coerced arguments, or of the schema (no
    ``arguments``); None when the schema cannot be read (a ``$ref`` that does not resolve:
    nothing is fetched; one that loops on itself), and the server checks the arguments itself.

    Only what is wrong at the top level of the call counts (a missing or unexpected
    argument, an argument that breaks a schema of its own, without ``$ref`` or ``anyOf``):
    there coercion has had its say. Deeper values ("3" in a list of integers, a field of a
    nested model) are left to the server, which reads them as leniently as a pydantic tool
    does (FastMCP coerces them)."""
    try:
        if arguments is None:
            return json_schema_problem(schema)
        return json_schema_problem(schema, arguments, keep=partial(_at_top_level, schema))
    except (jsonschema.exceptions.SchemaError, referencing.exceptions.Unresolvable):
        return None
    except RecursionError:  # a `$ref` that loops on itself: the server checks its own
        return None


_INDIRECT = frozenset({"$ref", "$dynamicRef", "anyOf", "oneOf", "allOf", "not", "if"})


def _at_top_level(schema: dict[str, Any], error: Any) -> bool:
    path = list(error.absolute_path)
    if not path:
        return True
    if len(path) > 1:
        return False
    properties = schema.get("properties")
    own = properties.get(path[0]) if isinstance(properties, dict) else None
    return isinstance(own, dict) and not (_INDIRECT & own.keys())
