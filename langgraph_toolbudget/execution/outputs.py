"""The stage after a tool ran: its output, or its failure, as what the model reads.

Its one reason to change: how a tool's output or failure becomes what the model reads.

Key Components:
    - :class:`OutputNormaliser`: any tool output becomes a ``ToolMessage``, a
      ``Command`` or a list of them, checked as ``ToolNode`` checks them; a
      failure becomes the error message the error policy chooses (by default
      one that explains it: the expected schema for invalid arguments, the
      timeout, the exception); the result of a deprecated tool, success or
      failure, gets a note saying so.
"""

from __future__ import annotations

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
from langgraph_toolbudget.execution.errors import ToolErrorPolicy
from langgraph_toolbudget.execution.lingering import ToolTimeoutError
from langgraph_toolbudget.execution.policy import add_note, deprecation_note

__all__ = ["TIMEOUT_ERROR", "TOOL_ERROR", "OutputNormaliser"]

logger = logging.getLogger(__name__)

TOOL_ERROR = "Error: tool {tool!r} failed: {error}\nFix the arguments or try another tool."
TIMEOUT_ERROR = (
    "Error: tool {tool!r} timed out after {timeout:g} s and was cancelled. "
    "Try a smaller request, or another tool."
)


class OutputNormaliser:
    """Turns a tool's output, or its failure, into the call's result.

    Args:
        catalog: the tool catalog (timeouts and statuses of the tools).
        errors: the error policy (explained messages, or ``handle_tool_errors``).
        messages_key: the state key of the messages (``Command`` updates a tool
            returns are checked for their tool message under this key).
    """

    def __init__(
        self, catalog: ToolCatalog, errors: ToolErrorPolicy, messages_key: str = "messages"
    ) -> None:
        self.catalog = catalog
        self.errors = errors
        self._rules = ToolNode([], messages_key=messages_key)  # ToolNode's output checks

    def normalise(self, call: ToolCall, tool: BaseTool, response: Any, state: Any) -> Any:
        """A tool's result as ``ToolNode`` checks it (``Command``s, lists); other values wrapped.

        Raises (into the error policy) what ``ToolNode`` raises: a ``Command`` without
        the call's tool message, a list without exactly one, a list of other types.
        """
        if isinstance(response, ToolMessage | Command | list):
            input_type = "list" if isinstance(state, list) else "dict"
            return toolnode_output(self._rules, response, call, input_type)
        return ToolMessage(_content(response), name=tool.name, tool_call_id=call["id"])

    def noted(self, call: ToolCall, output: Any) -> Any:
        """``output`` with the deprecation note, if the tool is deprecated."""
        note = deprecation_note(self.catalog, call["name"])
        return output if note is None else add_note(output, call["id"], note)

    def failure(self, call: ToolCall, tool: BaseTool, error: Exception) -> ToolMessage:
        """The message answering a failed call (or the error re-raised, by the policy)."""
        return self.errors.tool_failed(call, tool, error, lambda: self._explain(call, tool, error))

    def _explain(self, call: ToolCall, tool: BaseTool, error: Exception) -> str:
        """The explained error message of a failed call (the default policy, and timeouts)."""
        args = call.get("args", {})
        if isinstance(error, ValidationError):
            content = schema_error_message(tool, error, args)
        elif isinstance(error, ToolTimeoutError):
            spec = self.catalog.get(tool.name)
            content = TIMEOUT_ERROR.format(tool=tool.name, timeout=spec.timeout_s if spec else 0)
        else:
            content = TOOL_ERROR.format(tool=tool.name, error=f"{type(error).__name__}: {error}")
        logger.info("tool %s failed: %r", tool.name, error)
        return content


def _content(output: Any) -> str | list[str | dict[Any, Any]]:
    """Tool output as message content, as ``ToolNode`` converts it."""
    content: str | list[Any] = msg_content_output(output)
    return content
