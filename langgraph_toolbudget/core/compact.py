"""The compact result of a child run, as a model reads it: JSON-safe, bounded values.

Its one reason to change: what a child run's result looks like to the model.

Key Components:
    - :func:`run_result`: a child graph's final state -> the result fields
      (``status``, ``output`` and/or ``context``, ``interrupts``, ``error``).
    - :func:`error_result`, :func:`interrupted_result`: the fields of a run that
      failed, or stopped at an interrupt.
    - :func:`bounded`: any value made JSON-safe, cut to a length.
    - :func:`json_schema_problem`: what is wrong with a JSON schema, or with
      arguments under it, in one line.

Pure data: no LangGraph import (interrupts are read by their ``value``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from pydantic import BaseModel

__all__ = [
    "MAX_FIELD_CHARS",
    "bounded",
    "error_result",
    "interrupted_result",
    "json_schema_problem",
    "last_ai_text",
    "run_result",
]

MAX_FIELD_CHARS = 4000
"""Bound on the JSON text of one result field (``output``, ``context``...)."""
INTERRUPTED = (
    "the graph stopped at an interrupt and waits for input this tool cannot give; "
    "its questions are in `interrupts`, its thread is {thread_id!r}"
)


def run_result(header: Mapping[str, Any], final: Any) -> dict[str, Any]:
    """The result of a finished run: ``header`` plus ``status`` and what the run produced.

    A state with messages gives ``output`` (the last AI message's text) and ``context``
    (the other keys, if any); any other state or value is the ``output``. A state that
    carries ``__interrupt__`` (how LangGraph returns a paused run) is ``interrupted``.

    >>> run_result({"graph": "g"}, {"messages": [], "topic": "x"})
    {'graph': 'g', 'status': 'success', 'context': {'topic': 'x'}}
    """
    result: dict[str, Any] = {**header, "status": "success"}
    if not isinstance(final, Mapping):
        return {**result, "output": bounded(final)}
    state = dict(final)
    interrupts = state.pop("__interrupt__", None)
    messages = state.pop("messages", None)
    if isinstance(messages, list):
        text = last_ai_text(messages)
        if text is not None:
            result["output"] = bounded(text)
        if state:
            result["context"] = bounded(state)
    else:
        result["output"] = bounded(state)
    return interrupted_result(result, interrupts) if interrupts else result


def interrupted_result(header: Mapping[str, Any], interrupts: Sequence[Any]) -> dict[str, Any]:
    """``status: "interrupted"``, the interrupts' values, and an ``error`` that says so."""
    message = INTERRUPTED.format(thread_id=header.get("thread_id"))
    return {
        **header,
        "status": "interrupted",
        "interrupts": bounded([getattr(i, "value", i) for i in interrupts]),
        "error": {"type": "GraphInterrupt", "message": message},
    }


def error_result(header: Mapping[str, Any], error: BaseException, status: str = "error") -> dict:
    """``status`` and an ``error`` with the exception's type and message."""
    detail = {"type": type(error).__name__, "message": str(error)[:MAX_FIELD_CHARS]}
    return {**header, "status": status, "error": detail}


def last_ai_text(messages: Sequence[Any]) -> str | None:
    """The text of the last AI message (a message or a message dict), or None."""
    for message in reversed(messages):
        if isinstance(message, Mapping):  # a RemoteGraph answers with message dicts
            try:
                message = convert_to_messages([dict(message)])[0]
            except (ValueError, TypeError, NotImplementedError):
                continue
        if isinstance(message, BaseMessage) and message.type in ("ai", "AIMessageChunk"):
            return message.text
    return None


def _json_safe(value: Any, depth: int = 0) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if depth > 20:
        return repr(value)
    if isinstance(value, BaseMessage):
        return {"type": value.type, "content": value.text}
    if isinstance(value, BaseModel):
        return _json_safe(value.model_dump(mode="json"), depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _json_safe(dataclasses.asdict(value), depth + 1)
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_safe(v, depth + 1) for v in value]
    return repr(value)


def bounded(value: Any, limit: int = MAX_FIELD_CHARS) -> Any:
    """``value`` made JSON-safe; when its JSON text is over ``limit``, that text, cut.

    >>> bounded({"n": (1, 2)})
    {'n': [1, 2]}
    >>> bounded("x" * 10, limit=4)
    'xxxx... [truncated, 10 characters in all]'
    """
    safe = _json_safe(value)
    text = safe if isinstance(safe, str) else json.dumps(safe, ensure_ascii=False)
    if len(text) <= limit:
        return safe
    return f"{text[:limit]}... [truncated, {len(text)} characters in all]"


def json_schema_problem(
    schema: Mapping[str, Any],
    arguments: Any = None,
    *,
    keep: Callable[[Any], bool] | None = None,
) -> str | None:
    """What is wrong with ``schema`` (no ``arguments``) or with ``arguments`` under it.

    ``$ref``s resolve within the schema and the bundled metaschemas only: nothing is fetched
    (a remote or ``file://`` reference is unresolvable, as in the MCP SDK's own checks).
    ``keep``: which of the arguments' errors count (a ``jsonschema`` ``ValidationError`` ->
    bool); all of them by default.

    >>> json_schema_problem({"type": "object", "required": ["city"]}, {})
    "(arguments): 'city' is a required property"
    """
    import jsonschema  # a dependency of the mcp package
    from referencing import Registry

    validator = jsonschema.validators.validator_for(schema)
    if arguments is None:
        errors = validator(validator.META_SCHEMA, registry=Registry()).iter_errors(schema)
    else:
        errors = validator(schema, registry=Registry()).iter_errors(arguments)
        if keep is not None:
            errors = (e for e in errors if keep(e))
    error = jsonschema.exceptions.best_match(errors)
    if error is None:
        return None
    return f"{'.'.join(str(p) for p in error.absolute_path) or '(arguments)'}: {error.message}"
