"""Argument coercion: repair the usual shapes of a model's malformed tool arguments.

Its one reason to change: which malformed argument shapes are repaired, and how.

Applied against the tool's JSON schema before validation:
    - a JSON string of the whole arguments is parsed, also when it comes
      wrapped in one unknown key (``{"__arg1": "{...}"}``);
    - a scalar (or a non-JSON string) given to a tool with one required field
      is wrapped into that field;
    - keys are matched to fields regardless of case and ``-``/``_``, and
      obvious aliases are mapped (``q``/``search``/``text``/... -> ``query``);
    - ``"5"`` becomes ``5`` where the schema asks for an integer, likewise
      numbers and booleans; a JSON string becomes the list or object the schema
      asks for, and a lone value is wrapped into a list;
    - a string the schema allows only some values for (``enum``, ``const``) that spells
      one of them another way (``"Celsius"`` for ``"celsius"``, ``"in progress"`` for
      ``"in_progress"``) becomes that value, when it is the only one it could be (each
      item of a list of them too);
    - ``null`` for an optional argument whose schema takes no ``null`` (as models trained
      on strict structured outputs send every argument) is dropped: its default applies;
    - a field's schema given by a local reference (``{"$ref": "#/$defs/Unit"}``, as
      pydantic and MCP servers write an enum class) is read through it;
    - a field of a pydantic args schema with an alias (``from_: str =
      Field(alias="from")``) is taken under its name, which the model reads, or its
      alias, and given to the tool under the key its schema validates (see
      :class:`FieldKeys`).

What still fails validation goes back to the model as an error that states the
validation error and the expected schema (see :func:`schema_error_message`).
"""

from __future__ import annotations

import ast
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, InvalidToolCall, ToolCall
from langchain_core.tools import BaseTool
from pydantic import AliasChoices, BaseModel

from langgraph_toolbudget.core.limits import (
    MAX_ARG_DEPTH,
    clip,
    containers,
    loads_bounded,
    safe_repr,
    state_int,
    state_ints,
    too_deep,
)

__all__ = [
    "MISSING_NAME",
    "RAW_ARGUMENTS_KEY",
    "FieldKeys",
    "coerce_args",
    "complete_tool_calls",
    "distinct_call_ids",
    "repaired_id",
    "repair_tool_calls",
    "schema_error_message",
    "spelt_as",
    "tool_json_schema",
    "unrun_calls",
]

MISSING_NAME = "missing_tool_name"
"""The name a tool call without one gets, so the executor can answer it with an error."""
RAW_ARGUMENTS_KEY = "__raw_arguments__"
"""Key under which a call whose arguments could not be parsed carries the raw text."""

ALIASES: dict[str, tuple[str, ...]] = {
    "query": ("q", "search", "search_query", "text", "query_text", "term", "keywords", "input"),
    "path": ("file", "filename", "file_path", "filepath"),
    "url": ("link", "uri", "href"),
    "city": ("location", "place"),
    "location": ("city", "place"),
    "message": ("msg", "text", "body", "content"),
    "text": ("message", "msg", "body", "content"),
    "sql": ("query", "statement", "sql_query"),
}
"""field -> names a model may use for it."""

ECHO_ARGS_CHARS = 1000
"""A schema error quotes at most this many characters of the arguments sent."""
MAX_LITERAL_CHARS = 16_000
"""Invalid raw arguments longer than this are not read as a Python literal (:mod:`ast`
builds an object per value: slow); they get the "not valid JSON" error."""
MAX_RAW_CONTAINERS = 20_000
"""Invalid raw arguments opening more JSON objects and arrays than this are not decoded
(each is an object the garbage collector walks again and again); they get the "not valid
JSON" error."""

MAX_REF_HOPS = 8
"""A field's schema is read through at most this many local references in a row (a chain of
``$defs``; one that loops is read no further)."""


SCHEMA_ERROR = (
    "Error: invalid arguments for tool {tool!r}: {error}\n"
    "You sent: {args}\n"
    "Expected arguments (JSON schema): {schema}\n"
    "Call {tool!r} again with arguments that match the schema."
)


def tool_json_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of the arguments the model sends (injected arguments excluded)."""
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        return schema
    if hasattr(schema, "model_json_schema"):
        return dict(schema.model_json_schema())
    return dict(schema.schema())  # a pydantic.v1 model


@dataclass(frozen=True)
class FieldKeys:
    """The keys a tool's pydantic args schema validates its aliased fields by.

    The schema the model reads (langchain's ``tool_call_schema``) names each field by its
    name (``from_``), while pydantic validates it by its alias (``from``) and by its name
    only with ``validate_by_name``/``populate_by_name``, so a call under the name the
    model reads failed with "Field required". These keys let a call use either spelling
    and give the tool the one it validates, as a direct ``invoke`` with that key would.

    Attributes:
        names: an alias the schema validates -> its field's name (``{"from": "from_"}``).
        validated: a field's name -> the key to give the tool when the schema does not
            validate the name (``{"from_": "from"}``; empty with ``validate_by_name``).
    """

    names: Mapping[str, str] = field(default_factory=dict)
    validated: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, tool: BaseTool) -> FieldKeys:
        """The keys of ``tool``'s args schema: none unless it is a pydantic (v2) model with
        aliased fields (a JSON schema, a pydantic.v1 model: none)."""
        schema = tool.args_schema
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            return cls()
        config = schema.model_config
        by_name = bool(config.get("validate_by_name") or config.get("populate_by_name"))
        if config.get("validate_by_alias") is False:
            return cls()
        names: dict[str, str] = {}
        validated: dict[str, str] = {}
        for name, info in schema.model_fields.items():
            alias = info.validation_alias if info.validation_alias is not None else info.alias
            choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
            keys = [c for c in choices if isinstance(c, str) and c != name]  # no AliasPath
            keys = [k for k in keys if k not in schema.model_fields]  # another field's name
            names.update(dict.fromkeys(keys, name))
            if keys and not by_name:
                validated[name] = keys[0]
        return cls(names, validated)

    def by_name(self, args: Any) -> Any:
        """``args`` with each alias as its field's name, the name the model reads (unless
        that name is given too: validation then sees both)."""
        if not self.names or not isinstance(args, dict):
            return args
        return {
            self.names[k] if k in self.names and self.names[k] not in args else k: v
            for k, v in args.items()
        }

    def for_validation(self, args: Any) -> Any:
        """``args`` with each field's name as the key the schema validates (unless that key
        is given too)."""
        if not self.validated or not isinstance(args, dict):
            return args
        return {
            self.validated[k] if k in self.validated and self.validated[k] not in args else k: v
            for k, v in args.items()
        }


def _norm(key: str) -> str:
    return key.replace("-", "_").replace(" ", "_").lower()


def _type_names(value: Any) -> set[str]:
    """The type names of a schema's ``type`` (a name or a list of them; anything else: none)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return {t for t in value if isinstance(t, str)}
    return set()


def _field_type(prop: Any) -> set[str]:
    """The JSON types a property schema names (its ``type``, its ``anyOf``/``oneOf``
    options'); none for a boolean schema (``true``: anything) or a shape that is no schema."""
    if not isinstance(prop, dict):
        return set()
    types = _type_names(prop.get("type"))
    for key in ("anyOf", "oneOf"):
        options = prop.get(key)
        for option in options if isinstance(options, list) else ():
            if isinstance(option, dict):
                types |= _type_names(option.get("type"))
    return types


def _schema_fields(schema: Any) -> tuple[dict[str, Any], list[str]]:
    """A schema's properties (name -> subschema) and required names, whatever its shape: a
    schema that is no object, ``properties`` that is none, names that are no strings count
    as absent (validation, not coercion, answers them)."""
    if not isinstance(schema, dict):
        return {}, []
    properties, required = schema.get("properties"), schema.get("required")
    props = dict(properties) if isinstance(properties, dict) else {}
    names = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
    return {k: v for k, v in props.items() if isinstance(k, str)}, names


def _named_field(key: Any, props: dict[str, Any], args: dict[str, Any]) -> str | None:
    """The field ``key`` names: itself, written another way (``Max-Results``), or an alias
    of a field ``args`` does not give under its own name."""
    if not isinstance(key, str):
        return None
    if key in props:
        return key
    field = {_norm(k): k for k in props}.get(_norm(key))
    if field is not None:
        return field
    for candidate, aliases in ALIASES.items():
        if candidate in props and candidate not in args and _norm(key) in aliases:
            return candidate
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object ``text`` holds, else None."""
    if not text.strip().startswith("{"):
        return None
    try:
        value = loads_bounded(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}


def _is_one_of(value: Any, types: set[str]) -> bool:
    """Whether ``value`` already has one of the JSON schema ``types`` (a bool is no number)."""
    if isinstance(value, bool):
        return "boolean" in types
    return any(isinstance(value, _PYTHON_TYPES[t]) for t in types if t in _PYTHON_TYPES)


def _resolved(prop: Any, root: Mapping[str, Any]) -> Any:
    """``prop`` with a local reference (``{"$ref": "#/$defs/Unit"}``, as pydantic and MCP
    servers write an enum class) replaced by the schema it names, in itself, its ``items``
    and its ``anyOf``/``oneOf`` options and theirs (one level: a reference inside those
    is left as it is)."""
    prop = _with_items(_dereferenced(prop, root), root)
    if not isinstance(prop, dict):
        return prop
    for key in ("anyOf", "oneOf"):
        options = prop.get(key)
        if isinstance(options, list):
            resolved = [_with_items(_dereferenced(o, root), root) for o in options]
            if any(r is not o for r, o in zip(resolved, options, strict=True)):
                prop = {**prop, key: resolved}
    return prop


def _with_items(prop: Any, root: Mapping[str, Any]) -> Any:
    items = prop.get("items") if isinstance(prop, dict) else None
    resolved = _dereferenced(items, root)
    return prop if resolved is items else {**prop, "items": resolved}


def _dereferenced(prop: Any, root: Mapping[str, Any]) -> Any:
    """``prop`` with its local ``$ref`` (or a lone ``allOf: [{"$ref": ...}]``, as pydantic.v1
    writes an enum field with a description) replaced by the schema it names; ``prop`` itself
    when it has none."""
    for _ in range(MAX_REF_HOPS):
        if not isinstance(prop, dict) or ("$ref" not in prop and "allOf" not in prop):
            return prop
        ref, key = prop.get("$ref"), "$ref"
        all_of = prop.get("allOf")
        if ref is None and isinstance(all_of, list) and len(all_of) == 1:
            ref = all_of[0].get("$ref") if isinstance(all_of[0], dict) else None
            key = "allOf"
        if not (isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/"))):
            return prop
        _, section, name = ref.split("/", 2)
        defs = root.get(section)
        target = defs.get(name) if isinstance(defs, dict) else None
        if not isinstance(target, dict):
            return prop
        prop = {**target, **{k: v for k, v in prop.items() if k != key}}
    return prop


def _enum_members(prop: Any) -> list[str] | None:
    """The strings a property allows, by ``enum`` or ``const`` in itself or in its
    ``anyOf``/``oneOf`` options; None when it takes any string (or names no values)."""
    if not isinstance(prop, dict):
        return None
    options = [prop] + [o for k in ("anyOf", "oneOf") for o in _options(prop, k)]
    members: list[str] = []
    for option in options:
        enum, const = option.get("enum"), option.get("const")
        if enum is None and "const" not in option:
            if option is not prop and "string" in _type_names(option.get("type")):
                return None  # a free string beside the values: any spelling is one
            continue
        members += [v for v in (enum if isinstance(enum, list) else [const]) if isinstance(v, str)]
    return members or None


def _options(prop: dict[str, Any], key: str) -> list[dict[str, Any]]:
    options = prop.get(key)
    return [o for o in options if isinstance(o, dict)] if isinstance(options, list) else []


def _enum_value(value: str, prop: Any) -> str:
    """``value`` as the one allowed string it spells another way; else ``value`` as it is."""
    members = _enum_members(prop)
    if members is None or value in members:
        return value
    return spelt_as(value, members) or value


def _spellings(names: Iterable[Any]) -> dict[str, str | None]:
    """Each name's spelling key (:func:`_norm` of it, unpadded) -> the name, or None when
    several names share the key; names that are no strings are left out."""
    out: dict[str, str | None] = {}
    for name in names:
        if isinstance(name, str):
            key = _norm(name.strip())
            out[key] = name if out.get(key, name) == name else None
    return out


def spelt_as(value: str, names: Iterable[Any]) -> str | None:
    """The one name of ``names`` that ``value`` spells another way (in another case, with
    ``-``, ``_`` or a space for one another, padded): ``"Celsius"`` for ``"celsius"``,
    ``"in progress"`` for ``"in_progress"``; None if none or several are.

    >>> spelt_as("In Progress", ["in_progress", "done"])
    'in_progress'
    """
    return _spellings(names).get(_norm(value.strip()))


def _coerce_value(value: Any, prop: Any) -> Any:
    out = _coerce_one(value, prop)
    if not (isinstance(out, list) and isinstance(prop, dict)):
        return out
    items = [prop.get("items")] + [
        o.get("items") for k in ("anyOf", "oneOf") for o in _options(prop, k)
    ]
    members: set[str] = set()
    for schema in (i for i in items if isinstance(i, dict)):
        named = _enum_members(schema)
        if named is not None:
            members.update(named)
        elif not (types := _field_type(schema)) or "string" in types:
            return out  # a list of free strings beside them
    if not members:
        return out
    spellings = _spellings(members)  # once for the list: each item is one lookup
    # a list of allowed values (list[Unit]): each item spelt another way becomes its value
    return [
        spellings.get(_norm(v.strip())) or v if isinstance(v, str) and v not in members else v
        for v in out
    ]


def _coerce_one(value: Any, prop: Any) -> Any:
    types = _field_type(prop)
    if isinstance(value, str):
        value = _enum_value(value, prop)
    if not types or not isinstance(value, str):
        if "array" in types and value is not None and not _is_one_of(value, types):
            return [value]
        return value
    if "string" in types:
        return value
    text = value.strip()
    if "integer" in types:
        try:
            return int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                return value
            return int(number) if number.is_integer() else value
    if "number" in types:
        try:
            return float(text)
        except ValueError:
            return value
    if "boolean" in types and text.lower() in ("true", "false", "yes", "no", "1", "0"):
        return text.lower() in ("true", "yes", "1")
    if types & {"array", "object"}:
        try:
            parsed = loads_bounded(text)
        except ValueError:
            parsed = None
        if "array" in types:
            if isinstance(parsed, list):
                return parsed
            return [parsed if parsed is not None else value]
        if isinstance(parsed, dict):
            return parsed
    return value


def coerce_args(args: Any, schema: dict[str, Any]) -> Any:
    """Best-effort repair of tool-call arguments against a JSON schema.

    Args:
        args: the arguments the model sent (usually a dict).
        schema: the tool's argument JSON schema. Any shape: a property schema that is no
            object (``true``, valid JSON Schema for "anything", or ``5``) constrains nothing
            here, and nothing in the schema makes coercion raise.

    Returns:
        The repaired arguments; arguments that need no repair come back equal.

    >>> schema = {"properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
    ...           "required": ["query"]}
    >>> coerce_args({"Q": "cats", "limit": "5"}, schema)
    {'query': 'cats', 'limit': 5}
    >>> coerce_args("cats", schema)
    {'query': 'cats'}
    """
    props, required = _schema_fields(schema)
    if isinstance(args, str):
        text = args.strip()
        try:
            parsed = loads_bounded(text) if text else {}
        except ValueError:
            parsed = args
        args = parsed
    target = required[0] if len(required) == 1 else (next(iter(props)) if len(props) == 1 else None)
    if not isinstance(args, dict):
        if target is None or args is None:
            return args if args is not None else {}
        return {target: _coerce_value(args, _resolved(props.get(target, {}), schema))}
    if len(args) == 1:
        ((key, value),) = args.items()
        if _named_field(key, props, args) is None and isinstance(value, str):
            inner = _json_object(value)
            # {"__arg1": "{...}"}: the real arguments as JSON when its keys name the tool's
            # fields; else it is one text value ('{"status": "ok"}' as a message)
            if inner is not None and all(_named_field(k, props, inner) for k in inner):
                args = inner
    out: dict[str, Any] = {}
    # a field's own name before its other spellings ({"Unit": ..., "unit": ...}): it wins,
    # whatever the order the model wrote them in
    for key, value in sorted(args.items(), key=lambda item: item[0] not in props):
        field = _named_field(key, props, args)
        lone = len(args) == 1 and (len(props) == 1 or str(key).startswith("__arg"))
        if field is None and lone and target is not None:
            field = target  # a lone value under an unknown key ({"__arg1": "cats"})
        if field is None or field in out:
            out[key] = value  # unknown: let validation report it
            continue
        prop = _resolved(props[field], schema)
        if value is None and field not in required and _refuses_null(prop):
            continue  # null for an optional argument that takes none: as if not sent
        out[field] = _coerce_value(value, prop)
    return out


def _refuses_null(prop: Any) -> bool:
    """Whether a property's schema names its types and ``null`` is none of them, or names
    only the values it allows (an ``enum`` without ``null``)."""
    types = _field_type(prop)
    if types:
        return "null" not in types
    enum = prop.get("enum") if isinstance(prop, dict) else None
    return isinstance(enum, list) and None not in enum and not _options(prop, "anyOf")


def schema_error_message(tool: BaseTool, error: Exception, args: Any) -> str:
    """The error the model gets when arguments still fail validation."""
    errors: Any
    try:
        errors = error.errors(include_url=False)  # type: ignore[attr-defined]
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())) or '(arguments)'}: {e.get('msg')}"
            for e in errors
        )
    except (AttributeError, TypeError):
        detail = str(error)
    return schema_problem_message(tool.name, detail, args, tool_json_schema(tool))


def schema_problem_message(tool: str, problem: str, args: Any, schema: dict[str, Any]) -> str:
    """The error the model gets for arguments that do not match ``schema``: ``problem``,
    what it sent (bounded) and the schema to follow."""
    return SCHEMA_ERROR.format(
        tool=tool, error=problem, args=_echo(args), schema=json.dumps(schema)
    )


def _echo(args: Any) -> str:
    """The arguments as JSON for an error message: bounded in length and nesting."""
    if too_deep(args):
        return safe_repr(args)
    return clip(json.dumps(args, default=str), ECHO_ARGS_CHARS)


def _json_value(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON holds it: tuples as lists, number and literal keys as their JSON text,
    an integer the state cannot hold (outside
    :data:`~langgraph_toolbudget.core.limits.STATE_INTS`) as its text.

    Raises:
        ValueError: a value JSON has no form for (a set, bytes, a tuple as a key), or nested
            deeper than :data:`~langgraph_toolbudget.core.limits.MAX_ARG_DEPTH`.
    """
    if depth > MAX_ARG_DEPTH:
        raise ValueError("nested too deep")
    if type(value) is int:  # outside 64 bits, its text: the checkpointer stores no such int
        return state_int(value)
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, list | tuple):
        return [_json_value(item, depth + 1) for item in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not (key is None or isinstance(key, str | int | float)):
                raise ValueError(f"a {type(key).__name__} as an object key")
            out[key if isinstance(key, str) else json.dumps(key)] = _json_value(item, depth + 1)
        return out
    raise ValueError(f"a {type(value).__name__} is not a JSON value")


def _parse_arguments(raw: Any) -> dict[str, Any] | None:
    """The arguments as a JSON object, or None when they are not one (then the raw text is
    kept for the error). Never raises, whatever ``raw`` is."""
    if isinstance(raw, str):
        text = raw.strip() or "{}"
        if containers(text) > MAX_RAW_CONTAINERS:
            return None
        try:
            value = loads_bounded(text)
        except ValueError:
            if len(text) > MAX_LITERAL_CHARS:
                return None
            try:  # a Python literal: single quotes, True/None
                raw = ast.literal_eval(text)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
        else:
            raw = value
    if not isinstance(raw, dict):
        return None
    try:
        return _json_value(raw)
    except (ValueError, RecursionError):
        return None


def repair_tool_calls(message: AIMessage) -> AIMessage:
    """A native model's reply as the executor can answer it and the graph's state can hold it.

    Providers put calls whose arguments are not valid JSON into
    ``invalid_tool_calls``, which ``tools_condition`` ignores, so the model never
    hears back. Arguments that parse as a Python literal (single quotes, ``True``)
    into a JSON object are repaired; the rest (a set, a tuple as a key, text over
    :data:`MAX_LITERAL_CHARS`, anything else) become calls carrying the raw text under
    :data:`RAW_ARGUMENTS_KEY`, which the executor answers with an error that shows
    the expected schema. A call without an id gets one, a call without a name
    gets :data:`MISSING_NAME` (the executor answers it with an error). Every call
    then gets exactly one tool message.

    An integer outside :data:`~langgraph_toolbudget.core.limits.STATE_INTS` (valid JSON such
    as ``{"n": 18446744073709551616}``, which the provider parses into a Python int), in a
    call's arguments or in the content (a provider's ``tool_use`` block), becomes its text,
    as the text formats keep it: LangGraph's checkpointer stores no such int, so a
    checkpointed run failed saving the reply. Argument coercion turns the text back into the
    number for a tool's integer field. A reply with nothing to change is returned as it is
    (the same object).
    """
    parts = (message.content, *(c.get("args") for c in message.tool_calls))
    stored = state_ints(parts)  # one walk over the reply; the same tuple when nothing changes
    if (
        stored is parts
        and not message.invalid_tool_calls
        and all(c.get("id") for c in message.tool_calls)
    ):
        return message
    content, *stored_args = stored
    calls = [_stored_call(c, a) for c, a in zip(message.tool_calls, stored_args, strict=True)]
    for bad in message.invalid_tool_calls:
        args = _parse_arguments(bad.get("args"))
        if args is None:
            args = {RAW_ARGUMENTS_KEY: str(bad.get("args"))}
        name = str(bad.get("name") or MISSING_NAME)
        call_id = str(bad.get("id") or _new_call_id())
        calls.append({"name": name, "args": args, "id": call_id, "type": "tool_call"})
    update = {"tool_calls": calls, "invalid_tool_calls": [], "content": content}
    return message.model_copy(update={**update, "id": repaired_id(message)})


REPAIRED_ID_SUFFIX = "-repaired"
"""Added to the id of a reply whose calls were repaired: the repaired reply is a message of
its own, so LangGraph's ``messages`` stream (which sends each message id once, the model's
raw reply first) sends it too, and the calls its tool messages answer are seen by id."""


def repaired_id(message: AIMessage) -> str | None:
    """The id of ``message`` repaired (None when it has none: the graph gives one)."""
    if not message.id or message.id.endswith(REPAIRED_ID_SUFFIX):
        return message.id
    return f"{message.id}{REPAIRED_ID_SUFFIX}"


def _stored_call(call: ToolCall, args: Any) -> ToolCall:
    """The call with ``args`` (its arguments as the state can hold them) and an id; the same
    dict when neither changes it."""
    if args is call.get("args") and call.get("id"):
        return call
    return {**call, "args": args, "id": call.get("id") or _new_call_id()}


def complete_tool_calls(calls: Sequence[ToolCall]) -> list[ToolCall]:
    """The calls, each with an id and a name, so each can be answered with a ``ToolMessage``.

    For calls that did not go through :func:`repair_tool_calls` (another agent node): a
    call without an id (``None``) gets a new one, as :func:`repair_tool_calls` gives it, and
    a call without a name :data:`MISSING_NAME`. An empty id (``""``, which some
    OpenAI-compatible servers send) is the call's id, and calls sharing an id keep it: their
    answers carry it, as ``ToolNode``'s do, so each answer pairs with a call of the reply in
    the state (which a node cannot rewrite whatever the graph's reducer: distinct ids are
    given at the model call, by :func:`distinct_call_ids`).

    Args:
        calls: the calls of one reply, in order.

    Returns:
        The calls in order; the same dict for a call that needs nothing.
    """
    out: list[ToolCall] = []
    for call in calls:
        call_id, name = call.get("id"), call.get("name")
        if call_id is None:
            call_id = _new_call_id()
        elif not isinstance(call_id, str):
            call_id = str(call_id)
        if call_id == call.get("id") and name:
            out.append(call)
        else:
            out.append({**call, "name": name or MISSING_NAME, "id": call_id})
    return out


def unrun_calls(invalid: Sequence[InvalidToolCall]) -> list[ToolCall]:
    """A reply's ``invalid_tool_calls`` as calls the executor answers, never runs: the raw
    arguments go under :data:`RAW_ARGUMENTS_KEY`, which gets the "not valid JSON" error (as
    from :func:`repair_tool_calls` for text it cannot read), names and ids as the model sent
    them (:func:`complete_tool_calls` gives the missing ones).

    For a reply that did not go through :func:`repair_tool_calls` (the user's own model
    node): a provider integration sends such calls back with the next request
    (``langchain-openai`` as ``tool_calls``, ``langchain-anthropic`` as the reply's
    ``tool_use`` blocks), and the provider refuses a call with no answer. Unlike
    :func:`repair_tool_calls`, arguments written as a Python literal are not read either:
    the reply in the state still shows the call as invalid, so it is not run.
    """
    return [
        {
            "name": bad.get("name") or MISSING_NAME,
            "args": {RAW_ARGUMENTS_KEY: str(bad.get("args"))},
            "id": bad.get("id"),
            "type": "tool_call",
        }
        for bad in invalid
    ]


def distinct_call_ids(message: AIMessage) -> AIMessage:
    """The reply with a new id (as :func:`repair_tool_calls` gives a call without one) for
    each call whose id an earlier call of the reply already has; the same object when its
    ids are distinct.

    For an agent that answers calls by id, not by position: ``create_agent`` runs only the
    calls of a reply that no tool message answers yet, so a call sharing its id with one
    answered before it (models and servers that number calls per reply or reuse ids) would
    get no answer. ``ToolExecutor`` answers calls by position, so it runs each call without
    this, under the id it has; a provider may still refuse a reply repeating an id (Anthropic
    does), so a model node of your own should apply it (after :func:`repair_tool_calls`).
    """
    calls = message.tool_calls
    seen: set[str] = set()
    shared = False
    for call in calls:
        shared = shared or call.get("id") in seen
        seen.add(str(call.get("id")))
    if not shared:
        return message
    taken: set[str] = set()
    renamed: list[ToolCall] = []
    for call in calls:
        call_id = call.get("id")
        if call_id in taken:
            call_id = _new_call_id()
            call = {**call, "id": call_id}
        taken.add(str(call_id))
        renamed.append(call)
    return message.model_copy(update={"tool_calls": renamed, "id": repaired_id(message)})


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
