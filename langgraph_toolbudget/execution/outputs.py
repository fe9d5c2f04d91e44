"""The stage after a tool ran: its output, or its failure, as what the model reads.

Its one reason to change: how a tool's output or failure becomes what the model reads.

Key Components:
    - :class:`OutputNormaliser`: any tool output becomes a ``ToolMessage``, a
      ``Command`` or a list of them, checked as ``ToolNode`` checks them; a
      failure becomes the error message the error policy chooses (by default
      one that explains it: the expected schema for invalid arguments, the
      timeout, the exception); the result of a deprecated tool, success or
      failure, gets a note saying so; a tool message nested too deep for the
      checkpointer is cut (:func:`bounded`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import msg_content_output
from langgraph.types import Command
from pydantic import ValidationError

from langgraph_toolbudget._compat import toolnode_output
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import schema_error_message
from langgraph_toolbudget.core.limits import MAX_OUTPUT_DEPTH, cut_deep, too_deep
from langgraph_toolbudget.execution.errors import ToolErrorPolicy
from langgraph_toolbudget.execution.lingering import ToolTimeoutError
from langgraph_toolbudget.execution.policy import add_note, deprecation_note
from langgraph_toolbudget.execution.prepare import ArgumentsError

__all__ = [
    "DEEP_ARTIFACT",
    "TIMEOUT_ERROR",
    "THREAD_TIMEOUT_ERROR",
    "TOOL_ERROR",
    "OutputNormaliser",
    "bounded",
    "rebuilt",
    "tool_messages",
]

logger = logging.getLogger(__name__)

TOOL_ERROR = "Error: tool {tool!r} failed: {error}\n{advice}"
TOOL_ERROR_ADVICE = "Fix the arguments or try another tool."
"""What a failed call's message asks of the model, unless the error carries its own
``advice`` (an MCP server that may have run the tool)."""
TIMEOUT_ERROR = (
    "Error: tool {tool!r} timed out after {timeout:g} s and was cancelled. "
    "Try a smaller request, or another tool."
)
THREAD_TIMEOUT_ERROR = (
    "Error: tool {tool!r} timed out after {timeout:g} s. It had started in a thread, which "
    "cannot be stopped: it may have taken effect, or may still, so check before calling it "
    "again. Try a smaller request, or another tool."
)
"""The timeout of a sync tool's call that had started: its thread runs on (an async call is
cancelled)."""
DEEP_ARTIFACT = {"artifact_dropped": f"nested deeper than {MAX_OUTPUT_DEPTH} levels"}
"""What stands in for a tool message's artifact nested too deep (see :func:`bounded`)."""


class OutputNormaliser:
    """Turns a tool's output, or its failure, into the call's result.

    Args:
        catalog: the tool catalog (timeouts and statuses of the tools).
        errors: the error policy (explained messages, or ``handle_tool_errors``).
        messages_key: the state key of the messages (``Command`` updates a tool
            returns are checked for their tool message under this key).
        searches: the model has ``search_tools`` (a deprecation note points to it).
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        errors: ToolErrorPolicy,
        messages_key: str = "messages",
        *,
        searches: bool = True,
    ) -> None:
        self.catalog = catalog
        self.errors = errors
        self.searches = searches
        self._rules = ToolNode([], messages_key=messages_key)  # ToolNode's output checks

    def normalise(self, call: ToolCall, tool: BaseTool, response: Any, state: Any) -> Any:
        """A tool's result as ``ToolNode`` checks it (``Command``s, lists); other values wrapped.

        Raises (into the error policy) what ``ToolNode`` raises: a ``Command`` without
        the call's tool message, a list without exactly one, a list of other types.
        """
        if isinstance(response, ToolMessage | Command | list):
            input_type = "list" if isinstance(state, list) else "dict"
            return bounded(toolnode_output(self._rules, response, call, input_type))
        return bounded(ToolMessage(_content(response), name=tool.name, tool_call_id=call["id"]))

    def noted(self, call: ToolCall, output: Any) -> Any:
        """``output`` with the deprecation note, if the tool is deprecated."""
        note = deprecation_note(self.catalog, call["name"], searches=self.searches)
        return output if note is None else add_note(output, call["id"], note)

    def failure(self, call: ToolCall, tool: BaseTool, error: Exception) -> ToolMessage:
        """The message answering a failed call (or the error re-raised, by the policy)."""
        return self.errors.tool_failed(call, tool, error, lambda: self._explain(call, tool, error))

    def _explain(self, call: ToolCall, tool: BaseTool, error: Exception) -> str:
        """The explained error message of a failed call (the default policy, and timeouts)."""
        args = call.get("args", {})
        if isinstance(error, ValidationError):
            content = schema_error_message(tool, error, args)
        elif isinstance(error, ArgumentsError):
            content = error.explained(tool.name)
        elif isinstance(error, ToolTimeoutError):
            spec = self.catalog.get(tool.name)
            template = THREAD_TIMEOUT_ERROR if error.thread_started else TIMEOUT_ERROR
            content = template.format(tool=tool.name, timeout=spec.timeout_s if spec else 0)
        else:
            advice = getattr(error, "advice", None)  # an MCP server may have run the tool
            content = TOOL_ERROR.format(
                tool=tool.name,
                error=f"{type(error).__name__}: {error}",
                advice=advice if isinstance(advice, str) and advice else TOOL_ERROR_ADVICE,
            )
        logger.info("tool %s failed: %r", tool.name, error)
        return content


def _content(output: Any) -> str | list[str | dict[Any, Any]]:
    """Tool output as message content, as ``ToolNode`` converts it."""
    content: str | list[Any] = msg_content_output(output)
    return content


def bounded(output: Any) -> Any:
    """``output`` with its tool messages nested no deeper than
    :data:`~langgraph_toolbudget.core.limits.MAX_OUTPUT_DEPTH`, so that any checkpointer
    can save them (``ormsgpack`` refuses 255 levels) and JSON can write them.

    In each tool message (alone, in a list, in a ``Command``'s update) content blocks,
    ``additional_kwargs`` and ``response_metadata`` are cut at that depth, each cut
    marked; an artifact nested deeper is dropped: :data:`DEEP_ARTIFACT` stands in for
    it. String content is never walked; the walk visits only lists and dicts and stops at
    the first path too deep.
    """
    changed = {}
    for message in tool_messages(output):
        update: dict[str, Any] = {}
        if not isinstance(message.content, str) and too_deep(message.content, MAX_OUTPUT_DEPTH):
            update["content"] = cut_deep(message.content)
        if too_deep(message.artifact, MAX_OUTPUT_DEPTH):
            update["artifact"] = dict(DEEP_ARTIFACT)
        for field in ("additional_kwargs", "response_metadata"):
            if too_deep(getattr(message, field), MAX_OUTPUT_DEPTH):
                update[field] = cut_deep(getattr(message, field))
        if update:
            changed[id(message)] = message.model_copy(update=update)
    return rebuilt(output, changed) if changed else output


def tool_messages(output: Any) -> list[ToolMessage]:
    """The tool messages of one call's output: itself, a list's, a ``Command``'s update's."""
    if isinstance(output, ToolMessage):
        return [output]
    if isinstance(output, list):
        return [m for item in output for m in tool_messages(item)]
    if isinstance(output, Command) and isinstance(output.update, dict):
        return [m for m in output.update.get("messages", []) if isinstance(m, ToolMessage)]
    return []


def rebuilt(output: Any, new: dict[int, ToolMessage]) -> Any:
    """``output`` with the messages in ``new`` (by ``id``) replaced."""
    if isinstance(output, ToolMessage):
        return new.get(id(output), output)
    if isinstance(output, list):
        return [rebuilt(item, new) for item in output]
    if isinstance(output, Command) and isinstance(output.update, dict):
        messages = output.update.get("messages")
        if isinstance(messages, list) and any(id(m) in new for m in messages):
            update = {**output.update, "messages": [new.get(id(m), m) for m in messages]}
            return dataclasses.replace(output, update=update)
    return output
