"""The compact result of a child run, as a model reads it: JSON-safe, bounded values.

Its one reason to change: what a child run's result looks like to the model.

Key Components:
    - :func:`run_result`: a child graph's final state -> the result fields
      (``status``, ``output`` and/or ``context``, ``interrupts``, ``error``).
    - :func:`error_result`, :func:`interrupted_result`: the fields of a run that
      failed, or stopped at an interrupt.
    - :func:`bounded`: any value made JSON-safe, cut to a length.
    - :func:`json_schema_problem`: what is wrong with a JSON schema, or with
      arguments under it, in one line; its regular expressions (``pattern``,
      ``patternProperties``) run on RE2, a linear-time engine, never on Python's
      backtracking ``re``.

Pure data: no LangGraph import (interrupts are read by their ``value``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import re2
from langchain_core.messages import BaseMessage, convert_to_messages
from pydantic import BaseModel

__all__ = [
    "MAX_FIELD_CHARS",
    "MAX_SCHEMA_PATTERN_CHARS",
    "MAX_SCHEMA_TEXT_CHARS",
    "bounded",
    "error_result",
    "interrupted_result",
    "json_schema_problem",
    "last_ai_text",
    "run_result",
]

MAX_FIELD_CHARS = 4000
"""Bound on the JSON text of one result field (``output``, ``context``...)."""
MAX_SCHEMA_PATTERN_CHARS = 1000
"""A schema's regular expression longer than this is not checked here (left to the server)."""
MAX_SCHEMA_TEXT_CHARS = 100_000
"""A string (a value, or a property name) longer than this is not matched against a schema's
regular expressions here (left to the server): RE2 is linear, but holds the GIL meanwhile."""
_SCHEMA_REGEX_MAX_MEM = 2 << 20  # RE2's memory for one compiled pattern (as search_tools')
_ASCII_CLASSES = re.compile(r"\\[wWdDsSbB]")  # the classes RE2 reads as ASCII only
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

    The schema's regular expressions (``pattern``, ``patternProperties``, and the
    ``additionalProperties`` that depend on them) are matched by RE2 in linear time:
    ``jsonschema`` would run them on Python's ``re``, where ``^([a-z]+)+$`` against 40
    characters backtracks for hours holding the GIL. A pattern RE2 refuses (a back-reference,
    a look-around), one over :data:`MAX_SCHEMA_PATTERN_CHARS`, or a string over
    :data:`MAX_SCHEMA_TEXT_CHARS` is not checked: the server checks it. So is
    ``unevaluatedProperties`` in a schema with ``patternProperties`` anywhere (``jsonschema``
    matches those with ``re`` on its own there), and a text that is not ASCII which a pattern
    using ``\\w``, ``\\d``, ``\\s`` or ``\\b`` (ASCII-only in RE2, Unicode on the server) did not
    match.

    >>> json_schema_problem({"type": "object", "required": ["city"]}, {})
    "(arguments): 'city' is a required property"
    >>> json_schema_problem({"type": "string", "pattern": "^([a-z]+)+$"}, "a" * 40 + "!")
    "(arguments): 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!' does not match '^([a-z]+)+$'"
    """
    import jsonschema  # a dependency of the mcp package
    from referencing import Registry

    base = jsonschema.validators.validator_for(schema)
    if arguments is None:
        validator = _linear_validator(base, unevaluated=True)
        errors = validator(base.META_SCHEMA, registry=Registry()).iter_errors(schema)
    else:
        validator = _linear_validator(base, unevaluated="patternProperties" not in _keys(schema))
        errors = validator(schema, registry=Registry()).iter_errors(arguments)
        if keep is not None:
            errors = (e for e in errors if keep(e))
    error = jsonschema.exceptions.best_match(errors)
    if error is None:
        return None
    return f"{'.'.join(str(p) for p in error.absolute_path) or '(arguments)'}: {error.message}"


@functools.lru_cache(maxsize=1024)
def _schema_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2; None if RE2 refuses it or it is too long to check."""
    if len(pattern) > MAX_SCHEMA_PATTERN_CHARS:
        return None
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _SCHEMA_REGEX_MAX_MEM
    try:
        return re2.compile(pattern, options=options)
    except re2.error:
        return None


def _matches(pattern: Any, text: str) -> bool | None:
    """Does ``pattern`` match somewhere in ``text`` (as ECMA-262's ``test``)? None when that
    is not checked here: RE2 refuses the pattern, one of them is too long, or RE2's
    ASCII-only ``\\w``, ``\\d``, ``\\s``, ``\\b`` decided a text that is not ASCII (pydantic and
    Python's ``re`` read them as Unicode: "São Paulo" matches ``^[\\w\\s-]+$`` on the server)."""
    if not isinstance(pattern, str) or len(text) > MAX_SCHEMA_TEXT_CHARS:
        return None
    compiled = _schema_regex(pattern)
    if compiled is None:
        return None
    if compiled.search(text) is not None:
        return True
    return None if not text.isascii() and _ASCII_CLASSES.search(pattern) else False


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and _matches(pattern, instance) is False:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):  # a key whose match is unknown is not checked
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``additionalProperties`` as ``jsonschema``'s, counting as additional only the keys that
    surely match none of the ``patternProperties`` (an unknown match is not additional)."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [
        key
        for key in instance
        if key not in properties and all(_matches(p, key) is False for p in patterns)
    ]
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        extras.sort(key=str)
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(key) for key in extras)
            regexes = ", ".join(repr(p) for p in sorted(patterns))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            listed = ", ".join(repr(key) for key in extras)
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


def _left_to_the_server(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    return iter(())


@functools.lru_cache(maxsize=32)
def _linear_validator(base: Any, *, unevaluated: bool) -> Any:
    """``base`` (a ``jsonschema`` validator class) with the keywords that run a schema's
    regular expressions replaced by RE2 ones; ``unevaluatedProperties`` kept only when
    ``unevaluated`` (its ``jsonschema`` code matches ``patternProperties`` with ``re``)."""
    import attrs  # a dependency of jsonschema
    import jsonschema

    own = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    keywords: dict[str, Any] = {k: v for k, v in own.items() if k in base.VALIDATORS}
    if not unevaluated and "unevaluatedProperties" in base.VALIDATORS:
        keywords["unevaluatedProperties"] = _left_to_the_server
    linear = jsonschema.validators.extend(base, keywords)
    stock_evolve = linear.evolve

    def evolve(self: Any, **changes: Any) -> Any:
        # jsonschema gives a subschema naming its dialect (`$schema`: its own, a `$ref`'d
        # root's, a metaschema's reached by `$dynamicRef`) that dialect's stock class, whose
        # `pattern` runs on Python's `re`: it is made linear too.
        new = stock_evolve(self, **changes)
        stock: Any = type(new)
        if getattr(stock, "_linear", False):
            return new
        kind = _linear_validator(stock, unevaluated=unevaluated)
        fields = attrs.fields(stock)
        return kind(**{f.alias: getattr(new, f.name) for f in fields if f.init})

    linear.evolve = evolve
    linear._linear = True
    return linear


def _keys(schema: Any) -> set[str]:
    """Every key anywhere in ``schema`` (walked without recursion)."""
    keys: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            keys.update(k for k in node if isinstance(k, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return keys
