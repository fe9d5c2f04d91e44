"""Hooks around a tool call, in the shape of LangGraph's ``wrap_tool_call``: types and composition.

Its one reason to change: the shape of a hook and how hooks compose.

Key Components:
    - :data:`ToolCallWrapper`, :data:`AsyncToolCallWrapper`: a hook ``(request,
      execute) -> output`` and its async form.
    - :func:`as_hooks`, :func:`chain`, :func:`achain`: check the hooks a user
      passed, and wrap them around ``execute``, the first outermost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.prebuilt.tool_node import ToolCallRequest

__all__ = ["AsyncToolCallWrapper", "ToolCallWrapper", "achain", "as_hooks", "chain"]

ToolCallWrapper = Callable[[ToolCallRequest, Callable[[ToolCallRequest], Any]], Any]
"""A hook ``(request, execute) -> output`` around the stages (LangGraph's ``wrap_tool_call``)."""
AsyncToolCallWrapper = Callable[
    [ToolCallRequest, Callable[[ToolCallRequest], Awaitable[Any]]], Awaitable[Any]
]
"""The async form of :data:`ToolCallWrapper` (LangGraph's ``awrap_tool_call``)."""


def as_hooks(hooks: Any, name: str) -> list[Any]:
    """``hooks`` as a list (one hook or several); ``TypeError`` naming ``name`` if not callables."""
    if hooks is None:
        return []
    items = [hooks] if callable(hooks) else list(hooks)
    for hook in items:
        if not callable(hook):
            raise TypeError(
                f"{name} must be a callable (request, execute) -> result, or a list of them; "
                f"got {type(hook).__name__}."
            )
    return items


def chain(hooks: list[ToolCallWrapper], execute: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``hooks[0]`` outermost, around ``hooks[1]``..., around ``execute``."""
    handler = execute
    for hook in reversed(hooks):
        handler = _bind(hook, handler)
    return handler


def _bind(hook: ToolCallWrapper, inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda request: hook(request, inner)


def achain(
    hooks: list[AsyncToolCallWrapper], execute: Callable[[Any], Awaitable[Any]]
) -> Callable[[Any], Awaitable[Any]]:
    """The async :func:`chain`."""
    handler = execute
    for hook in reversed(hooks):
        handler = _abind(hook, handler)
    return handler


def _abind(
    hook: AsyncToolCallWrapper, inner: Callable[[Any], Awaitable[Any]]
) -> Callable[[Any], Awaitable[Any]]:
    async def run(request: Any) -> Any:
        return await hook(request, inner)

    return run
