"""A tool's own return value, kept for a caller that wants data rather than the message's text.

Its one reason to change: how the value a tool's body returned is seen beside its message.

Invoked with a tool call, a tool answers with a ``ToolMessage`` whose content langchain
writes as text when the value is not message content (``json.dumps``, else ``str()``): a
dict holding a ``datetime``, or a pydantic model, becomes the text of its repr. CodeMode
gives a program each tool's result as Python data, so it needs the value itself. Inside
:func:`keep_returned`, the pipeline invokes :func:`keeping`'s copy of the tool, whose body's
return value is kept by tool call id. Nothing else changes: the tool runs once, as it would,
and its message (what hooks and the graph see) is the same. The copy only carries the call
through langchain's machinery: its body is the tool's own, run on the tool itself, so a
field the body sets (``self.count += 1``) is the tool's.

Key Components:
    - :func:`keep_returned`: the block whose calls keep their return values.
    - :func:`keeping`: the tool to invoke for one call (the tool itself outside the block).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.tools import BaseTool

__all__ = ["keep_returned", "keeping"]

_KEPT: ContextVar[dict[str, Any] | None] = ContextVar("toolbudget_returned", default=None)


@contextmanager
def keep_returned() -> Iterator[dict[str, Any]]:
    """Keep, by tool call id, the value each tool's body returns for the calls run in the
    block (the content part of a ``content_and_artifact`` tool's pair).

    The block's dict is read where the pipeline prepares a call (:func:`keeping`, in the
    block's context); the copy holds the dict from then on, so whichever thread or task
    then runs the tool's body, its value is kept.
    """
    kept: dict[str, Any] = {}
    token = _KEPT.set(kept)
    try:
        yield kept
    finally:
        _KEPT.reset(token)


def keeping(tool: BaseTool, call_id: str | None) -> BaseTool:
    """``tool``, or inside :func:`keep_returned` a shallow copy of it whose ``_run`` and
    ``_arun`` run the tool's own on the tool and keep what they return under ``call_id``
    (their signatures unchanged, so langchain passes them what it passes the tool's own)."""
    kept = _KEPT.get()
    if kept is None or call_id is None:
        return tool
    pair = tool.response_format == "content_and_artifact"

    def keep(value: Any) -> Any:
        kept[call_id] = value[0] if pair and isinstance(value, tuple) and len(value) == 2 else value
        return value

    twin = copy.copy(tool)
    run, arun = tool._run, tool._arun  # bound to the tool: its body's state is the tool's

    @functools.wraps(run)
    def _run(*args: Any, **kwargs: Any) -> Any:
        return keep(run(*args, **kwargs))

    @functools.wraps(arun)
    async def _arun(*args: Any, **kwargs: Any) -> Any:
        return keep(await arun(*args, **kwargs))

    object.__setattr__(twin, "_run", _run)  # the instance's, over the class's methods
    object.__setattr__(twin, "_arun", _arun)
    return twin
