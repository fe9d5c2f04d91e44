"""The stages before a tool runs: check the call, coerce its arguments, build the tool's input.

Its one reason to change: how a call is checked and its arguments coerced before it runs.

Key Components:
    - :class:`CallPreparer`: given a call and its tool, either the error the call is
      answered with (refused by the caller's check, not a tool, arguments nested
      too deep or not JSON) or the call with its arguments repaired against the
      tool's JSON schema; and the injector that fills LangGraph's injected
      arguments (``InjectedState``, ``InjectedStore``, ``ToolRuntime``...) into
      the tool's input. Schemas and injectors are read once per catalog tool, on
      its first call (reading every schema up front would cost ~0.4 ms a tool).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from pydantic import PydanticUserError

from langgraph_toolbudget._compat import has_injected_args, injector_for
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import (
    RAW_ARGUMENTS_KEY,
    coerce_args,
    needs_coercion,
    property_types,
    tool_json_schema,
)
from langgraph_toolbudget.core.limits import MAX_ARG_DEPTH, TOO_DEEP_ERROR, clip, too_deep

__all__ = ["NOT_A_TOOL_ERROR", "RAW_ARGUMENTS_ERROR", "CallCheck", "CallPreparer", "error_message"]

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


@dataclass(frozen=True)
class _Schema:
    schema: dict[str, Any] | None
    types: dict[str, frozenset[str]] | None  # for the no-repair-needed shortcut


class CallPreparer:
    """Checks a call and repairs its arguments; fills the injected ones at invoke time.

    Args:
        catalog: the tool catalog; its tools' schemas and injectors are cached.
        messages_key: the state key of the messages (for ``InjectedState`` tools).
    """

    def __init__(self, catalog: ToolCatalog, messages_key: str = "messages") -> None:
        self.catalog = catalog
        self.messages_key = messages_key
        self._schemas: dict[str, _Schema] = {}
        self._injectors: dict[str, tuple[BaseTool, Injector | None]] = {}

    def known(self, tool: BaseTool) -> bool:
        """Is ``tool`` the catalog's tool of its name (not one a hook supplied)?"""
        spec = self.catalog.get(tool.name)
        return spec is not None and spec.tool is tool

    def prepare(
        self, call: ToolCall, tool: BaseTool | None, check: CallCheck
    ) -> tuple[BaseTool, ToolCall] | ToolMessage:
        """Check and coerce: the tool and the call to invoke, or the error to answer with.

        A tool a hook put in the request (``request.override(tool=...)``) is the
        application's choice: it runs unchecked, as under ``ToolNode``.
        """
        known = tool is not None and self.known(tool)
        problem = check(call["name"]) if tool is None or known else None
        if problem is not None:
            return error_message(call, problem)
        if tool is None:
            return error_message(call, NOT_A_TOOL_ERROR.format(tool=call["name"]))
        args = call.get("args", {})
        if not _flat(args) and too_deep(args):  # json.dumps, repr, validation would recurse
            return error_message(call, TOO_DEEP_ERROR.format(tool=tool.name, depth=MAX_ARG_DEPTH))
        read = self._schema(tool, known)
        if isinstance(args, dict) and RAW_ARGUMENTS_KEY in args:
            raw = RAW_ARGUMENTS_ERROR.format(
                tool=tool.name,
                raw=clip(str(args[RAW_ARGUMENTS_KEY])),
                schema=json.dumps(read.schema),
            )
            return error_message(call, raw)
        if read.schema is not None:
            if read.types is None or needs_coercion(args, read.types):
                args = coerce_args(args, read.schema)
            else:
                args = dict(args)  # as coerce_args would give them back
        return tool, {**call, "args": args}

    def schema(self, tool: BaseTool) -> dict[str, Any] | None:
        """The tool's argument JSON schema, computed once per catalog tool (None if it has none)."""
        return self._schema(tool, self.known(tool)).schema

    def _schema(self, tool: BaseTool, known: bool) -> _Schema:
        if known and (cached := self._schemas.get(tool.name)) is not None:
            return cached
        try:
            schema: dict[str, Any] | None = tool_json_schema(tool)
        except (TypeError, ValueError, PydanticUserError):
            schema = None
        read = _Schema(schema, property_types(schema) if schema is not None else None)
        if known:  # cache only the catalog's tools: the cache stays bounded
            self._schemas[tool.name] = read
        return read

    def injector(self, tool: BaseTool) -> Injector | None:
        """The function filling ``tool``'s injected arguments; None if it has none."""
        cached = self._injectors.get(tool.name)
        if cached is not None and cached[0] is tool:  # the catalog's tool, seen before
            return cached[1]
        inject = injector_for(tool, self.messages_key) if has_injected_args(tool) else None
        if self.known(tool):
            self._injectors[tool.name] = (tool, inject)
        return inject


def _flat(args: Any) -> bool:
    """A dict of plain values: nothing nested, so never too deep."""
    if not isinstance(args, dict):
        return False
    return not any(map(_is_nested, args.values()))


def _is_nested(value: Any) -> bool:
    return isinstance(value, dict | list | tuple)
