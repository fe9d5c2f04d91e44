"""What a failed tool call answers: the package's explained errors, or ``ToolNode``'s rules.

Its one reason to change: what a failed call answers.

Key Components:
    - :class:`ToolErrorPolicy`: built from a ``handle_tool_errors`` value. ``None``
      (``ToolExecutor``'s default) answers every failure with an explained error
      message (the expected schema for invalid arguments, the timeout, the
      exception). Any of ``ToolNode``'s forms (``True``/``False``, a string, a
      callable taking the exception, an exception type or a tuple of them,
      ``ToolNode``'s default) answers or raises exactly as ``ToolNode`` does,
      with its wording.

Whatever the policy, LangGraph's control flow is raised: interrupts
(``GraphBubbleUp``) and an invalid answer to an interrupt (a human's answer that
fails the interrupt's schema must be asked again, never turned into a message).
The executor's own timeout (:class:`~langgraph_toolbudget.execution.lingering.ToolTimeoutError`),
which ``ToolNode`` has not, always gets the explained message; a ``TimeoutError`` the
tool raised itself is an ordinary failure.
"""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from pydantic import ValidationError

from langgraph_toolbudget._compat import (
    DEFAULT_HANDLE_TOOL_ERRORS,
    ToolInvocationError,
    handled_error_types,
    invocation_error,
    is_invalid_resume,
    toolnode_error_content,
)
from langgraph_toolbudget.execution.lingering import ToolTimeoutError
from langgraph_toolbudget.execution.prepare import ArgumentsError

__all__ = ["TOOLNODE_DEFAULT", "HandleToolErrors", "ToolErrorPolicy"]

HandleToolErrors = (
    bool | str | Callable[..., str] | type[Exception] | tuple[type[Exception], ...] | None
)
"""``ToolNode``'s ``handle_tool_errors`` forms, or ``None`` for the explained errors."""

TOOLNODE_DEFAULT: Callable[..., str] = DEFAULT_HANDLE_TOOL_ERRORS
"""``ToolNode``'s default ``handle_tool_errors``: invalid arguments answered, other errors raised
(``ToolExecutor.from_tools``' default; pass it to ``ToolExecutor(catalog, ...)`` for the same)."""


def _error(call: ToolCall, content: str) -> ToolMessage:
    return ToolMessage(content, name=call["name"], tool_call_id=call["id"], status="error")


class ToolErrorPolicy:
    """Turns a failed call into an error ``ToolMessage``, or raises it.

    Args:
        handle_tool_errors: ``None`` for the package's explained errors, or any
            value ``ToolNode(handle_tool_errors=...)`` accepts, with its meaning.

    Raises:
        ValueError: ``handle_tool_errors`` is a callable whose exception
            annotation is not an exception type (as ``ToolNode`` raises).
    """

    def __init__(self, handle_tool_errors: HandleToolErrors = None) -> None:
        self.flag = handle_tool_errors
        self.explained = handle_tool_errors is None
        self.types = () if self.explained else handled_error_types(handle_tool_errors)

    def tool_failed(
        self, call: ToolCall, tool: BaseTool, error: Exception, explain: Callable[[], str]
    ) -> ToolMessage:
        """The answer to ``error`` raised by ``tool`` (or by its result's validation).

        ``explain`` gives the explained message; it is used under the explained
        policy and for timeouts. Raises ``error`` when the policy does not handle it.
        """
        if is_invalid_resume(error):
            raise error  # a human's answer to an interrupt failed its schema: never swallow it
        if self.explained or isinstance(error, ToolTimeoutError):
            return _error(call, explain())
        if isinstance(error, ValidationError):
            error = invocation_error(tool, error, call.get("args", {}))
        elif isinstance(error, ArgumentsError):  # a JSON-schema tool's: as a pydantic tool's
            problem = [{"loc": (), "msg": error.problem}]
            error = ToolInvocationError(tool.name, error, error.arguments, problem)  # type: ignore[arg-type]
        if not self.flag or not isinstance(error, self.types):
            raise error
        return _error(call, toolnode_error_content(error, self.flag))

    def hook_failed(self, call: ToolCall, error: Exception) -> ToolMessage:
        """The answer to ``error`` raised by a ``wrap_tool_call`` hook itself.

        As ``ToolNode``: any truthy ``handle_tool_errors`` answers it (a callable
        decides, and may raise); ``False`` raises it. Under the explained policy
        a hook's error is the application's bug, not the model's: it is raised.
        """
        if self.explained or not self.flag or is_invalid_resume(error):
            raise error
        return _error(call, toolnode_error_content(error, self.flag))
