"""Checks of what a catalog is built from: each bad argument fails early, named, with the fix.

Its one reason to change: what a catalog accepts as input, and the errors that name what is wrong.

:meth:`ToolCatalog.from_tools <langgraph_toolbudget.core.catalog.ToolCatalog.from_tools>`
and :meth:`~langgraph_toolbudget.core.catalog.ToolCatalog.with_metadata` call
these before building anything, so a wrong type or an unknown name is reported
where it was written, not later as ``'int' object is not iterable`` from deep
inside the search index.

Key Components:
    - :func:`as_tools`: LangChain tools and plain functions -> tools.
    - :func:`check_categories`, :func:`check_descriptions`,
      :func:`check_metadata_mapping`, :func:`check_name_list`,
      :func:`check_default_include`: the arguments of ``from_tools``.
    - :func:`check_metadata`: one tool's metadata keys and values (and that
      ``enabled`` and ``status`` agree).
    - :func:`closest_names`: the real names closest to a misspelled one.
    - :func:`described_category_error`: descriptions of categories the catalog lacks.
    - The error templates (``*_ERROR``), one per mistake.
"""

from __future__ import annotations

import math
import reprlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.tools import tool as make_tool
from rapidfuzz import fuzz, process, utils

__all__ = [
    "INCLUDE_MODES",
    "TOOL_METADATA_KEYS",
    "TOOL_STATUSES",
    "as_tools",
    "check_categories",
    "check_default_include",
    "described_category_error",
    "check_descriptions",
    "check_metadata",
    "check_metadata_mapping",
    "check_name_list",
    "check_server_defaults",
    "closest_names",
]

INCLUDE_MODES = ("always", "manual", "agent")
"""The include modes a tool may have (see ``IncludeMode``)."""

TOOL_STATUSES = ("draft", "published", "deprecated", "disabled")
"""The statuses a tool may have (see ``ToolStatus``)."""

TOOL_METADATA_KEYS: dict[str, tuple[type, ...]] = {
    "server": (str, type(None)),
    "include": (str,),
    "enabled": (bool,),
    "status": (str,),
    "is_pure": (bool,),
    "concurrency_group": (str,),
    "max_concurrency": (int,),
    "timeout_s": (int, float, type(None)),
    "output_schema": (Mapping, type(None)),
}
"""The metadata keys the catalog reads, and the types each accepts (``output_schema``: the
JSON schema of the tool's result, whose fields are searched; see ``ToolSpec.output_fields``)."""

DUPLICATE_TOOL_ERROR = (
    "duplicate tool names {names}: every tool in a catalog needs a unique name. "
    "Rename one (e.g. prefix it with its server) before building the catalog."
)

UNKNOWN_CATEGORY_TOOL_ERROR = (
    "category {category!r} lists {names}, which are not tools of this catalog. "
    "Closest tools: {closest}."
)

UNKNOWN_METADATA_TOOL_ERROR = (
    "{argument} names {names}, which are not tools of this catalog. Closest tools: {closest}."
)

UNKNOWN_SERVER_DEFAULTS_ERROR = (
    "server_defaults names {names}, which are not servers of this catalog's tools (a tool's "
    "server is its 'server' metadata). Closest servers: {closest}."
)
NO_SERVERS = "none, no tool has a server (set one with tool_metadata={name: {'server': ...}})"

MAX_SUGGESTIONS = 3
"""How many close names an unknown-name error suggests for each unknown name."""

TOOLS_TYPE_ERROR = "tools must be a list of LangChain tools or plain functions, got {value}.{hint}"
MAPPING_OF_TOOLS_HINT = " For a dict of name -> tool, pass its values: list(tools.values())."
TOOL_ITEM_ERROR = (
    "tools[{position}] is {value}, not a LangChain tool or a function. Pass BaseTool "
    "instances (e.g. functions decorated with @tool) or plain functions with a docstring."
)
FUNCTION_TOOL_ERROR = (
    "tools[{position}] ({name}) could not be made into a tool: {reason} Give the function a "
    "name and a docstring (the model reads it as the tool's description), or build the tool "
    "yourself with StructuredTool.from_function(func, name=..., description=...)."
)
MAPPING_ERROR = "{argument} must be a mapping of {shape}, got {value}."
KEY_TYPE_ERROR = "{argument} keys must be {what} (strings), got {value}."
CATEGORY_MEMBERS_ERROR = "categories[{category!r}] must be a list of tool names, got {value}.{hint}"
CATEGORY_MEMBER_TYPE_ERROR = (
    "categories[{category!r}] holds {value}: tool names are strings, e.g. 'create_issue'."
)
DESCRIPTION_TYPE_ERROR = "category_descriptions[{category!r}] must be a string, got {value}."
UNKNOWN_DESCRIPTION_ERROR = (
    "category_descriptions names {names}, which are not categories of this catalog. "
    "Categories: {known}."
)
EMPTY_DESCRIBED_CATEGORY_ERROR = (
    "category_descriptions describes {names}, to which categories gives no tools: a category "
    "is made of its tools, so one without any is left out. Give it its tools "
    "(categories={{{first!r}: ['some_tool', ...]}}), or describe it once it has some."
)
NAME_LIST_ERROR = "{argument} must be a list of {what}, got {value}.{hint}"
NAME_LIST_ITEM_ERROR = "{argument}[{position}] must be a string ({what}), got {value}."
DEFAULT_INCLUDE_ERROR = (
    "default_include must be one of {modes}, got {value}: 'agent' lets the budget choose "
    "the tool, 'always' shows it every turn, 'manual' only when named."
)
UNKNOWN_METADATA_KEY_ERROR = "tool {tool!r}: unknown metadata key {key!r}. Allowed keys: {allowed}."
METADATA_TYPE_ERROR = "tool {tool!r}: metadata key {key!r} must be {expected}, got {value!r}."
METADATA_VALUE_ERROR = "tool {tool!r}: metadata key {key!r} {problem}, got {value!r}."
STATUS_CONFLICT_ERROR = (
    "tool {tool!r}: {argument} sets enabled={enabled!r} and status={status!r}, which disagree: "
    "enabled=False means status 'disabled'. Set only one of them (status={status!r} alone, "
    "or enabled={enabled!r} alone)."
)


def describe(value: object) -> str:
    """A short description of a value for an error message: ``5 (int)``, ``the class Foo``."""
    if isinstance(value, type):
        return f"the class {value.__qualname__}"
    if isinstance(value, BaseTool):
        return f"the tool {value.name!r} ({type(value).__name__})"
    if callable(value):
        name = getattr(value, "__name__", None)
        return f"the function {name}" if name else f"a callable {type(value).__name__}"
    return f"{reprlib.repr(value)} ({type(value).__name__})"


def describe_kind(value: object, items: str, fits: Callable[[object], bool]) -> str:
    """What was passed, by its type and never its values (they may hold secrets): ``None``,
    ``a dict``, or for a list, tuple or set ``a list of 3 <items>`` when every item
    ``fits``, else ``a list of 3 items``."""
    if value is None:
        return "None"
    kind = f"a {type(value).__name__}"
    if isinstance(value, list | tuple | set | frozenset):
        named = items if value and all(fits(item) for item in value) else "items"
        kind += f" of {len(value)} {named}"
    return kind


def _string_hint(value: object) -> str:
    return f" Pass [{value!r}] for one." if isinstance(value, str) else ""


def as_tools(tools: object) -> list[BaseTool]:
    """The catalog's tools: LangChain tools as given, plain functions made into tools.

    Functions are converted as LangGraph's ``ToolNode`` converts them
    (``langchain_core.tools.tool``): the name is the function's, the
    description its docstring, the arguments its signature.

    Raises:
        TypeError: ``tools`` is not a list, or an item is neither a tool nor a function.
        ValueError: a function could not be made into a tool (no docstring, no name).
    """
    single = isinstance(tools, BaseTool) or (callable(tools) and not isinstance(tools, type))
    if isinstance(tools, Mapping):
        value = f"a {type(tools).__name__} of {len(tools)} item{'' if len(tools) == 1 else 's'}"
        raise TypeError(TOOLS_TYPE_ERROR.format(value=value, hint=MAPPING_OF_TOOLS_HINT))
    if single or isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        hint = " Pass [tool] for one tool." if single else ""
        raise TypeError(TOOLS_TYPE_ERROR.format(value=describe(tools), hint=hint))
    out: list[BaseTool] = []
    for position, item in enumerate(tools):
        if isinstance(item, BaseTool):
            out.append(item)
        elif callable(item) and not isinstance(item, type):
            out.append(_function_tool(position, item))
        else:
            raise TypeError(TOOL_ITEM_ERROR.format(position=position, value=describe(item)))
    return out


def _function_tool(position: int, function: Callable[..., Any]) -> BaseTool:
    try:
        made = make_tool(function)
    except Exception as exc:  # noqa: BLE001 - whatever the conversion says, named and wrapped
        name = getattr(function, "__name__", None) or type(function).__name__
        reason = str(exc).rstrip(".") + "."
        raise ValueError(
            FUNCTION_TOOL_ERROR.format(position=position, name=name, reason=reason)
        ) from exc
    if not isinstance(made, BaseTool):  # `tool` returns a decorator for some inputs
        raise TypeError(TOOL_ITEM_ERROR.format(position=position, value=describe(function)))
    return made


def check_mapping(argument: str, value: object, shape: str) -> Mapping[Any, Any]:
    """``value`` as a mapping (``{}`` for None); TypeError naming ``argument`` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(MAPPING_ERROR.format(argument=argument, shape=shape, value=describe(value)))
    for key in value:
        if not isinstance(key, str):
            what = shape.split(" ->", 1)[0] + "s"
            raise TypeError(
                KEY_TYPE_ERROR.format(argument=argument, what=what, value=describe(key))
            )
    return value


def check_categories(categories: object) -> dict[str, list[str]]:
    """``categories`` as category -> tool names, every name a string.

    Raises:
        TypeError: not a mapping, a category name or a tool name not a string,
            tool names not given as a list.
    """
    mapping = check_mapping("categories", categories, "category name -> list of tool names")
    out: dict[str, list[str]] = {}
    for category, members in mapping.items():
        if isinstance(members, (str, bytes, Mapping)) or not isinstance(members, Iterable):
            raise TypeError(
                CATEGORY_MEMBERS_ERROR.format(
                    category=category, value=describe(members), hint=_string_hint(members)
                )
            )
        names = list(members)
        for name in names:
            if not isinstance(name, str):
                raise TypeError(
                    CATEGORY_MEMBER_TYPE_ERROR.format(category=category, value=describe(name))
                )
        out[category] = names
    return out


def check_descriptions(descriptions: object) -> dict[str, str]:
    """``category_descriptions`` as category -> description, both strings.

    Raises:
        TypeError: not a mapping, or a name or description not a string.
    """
    mapping = check_mapping("category_descriptions", descriptions, "category name -> description")
    for category, text in mapping.items():
        if not isinstance(text, str):
            raise TypeError(DESCRIPTION_TYPE_ERROR.format(category=category, value=describe(text)))
    return dict(mapping)


def described_category_error(
    described: Iterable[str], given: Mapping[str, Iterable[str]], known: Iterable[str]
) -> ValueError:
    """The error for ``described`` categories the catalog does not have: those ``categories``
    (``given``) lists with no tool are said to have none, the others to be unknown (with the
    ``known`` ones)."""
    empty = sorted(c for c in described if c in given and not list(given[c]))
    unknown = sorted(c for c in described if c not in empty)
    parts = []
    if empty:
        parts.append(EMPTY_DESCRIBED_CATEGORY_ERROR.format(names=empty, first=empty[0]))
    if unknown:
        parts.append(UNKNOWN_DESCRIPTION_ERROR.format(names=unknown, known=sorted(known)))
    return ValueError(" ".join(parts))


def check_metadata_mapping(argument: str, value: object, key: str) -> dict[str, Mapping[str, Any]]:
    """``tool_metadata`` or ``server_defaults`` as name -> metadata mapping.

    Raises:
        TypeError: not a mapping of string names to mappings.
    """
    mapping = check_mapping(argument, value, f"{key} -> metadata dict")
    for name, meta in mapping.items():
        check_mapping(f"{argument}[{name!r}]", meta, "metadata key -> value")
    return dict(mapping)


def check_name_list(argument: str, value: object, what: str) -> list[str] | None:
    """``allowed_servers`` / ``allowed_tools`` as a list of strings, or None.

    Raises:
        TypeError: a string (which would be read as its characters), not a
            list, or an item not a string.
    """
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(
            NAME_LIST_ERROR.format(
                argument=argument, what=what, value=describe(value), hint=_string_hint(value)
            )
        )
    names = list(value)
    for position, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(
                NAME_LIST_ITEM_ERROR.format(
                    argument=argument, position=position, what=what, value=describe(name)
                )
            )
    return names


def check_default_include(value: object) -> None:
    """Raises TypeError unless ``value`` is a string, ValueError unless it is one of
    :data:`INCLUDE_MODES`."""
    if not isinstance(value, str):
        raise TypeError(DEFAULT_INCLUDE_ERROR.format(modes=INCLUDE_MODES, value=describe(value)))
    if value not in INCLUDE_MODES:
        raise ValueError(DEFAULT_INCLUDE_ERROR.format(modes=INCLUDE_MODES, value=describe(value)))


def check_metadata(
    tool: str, meta: object, *, strict: bool, argument: str = "metadata"
) -> dict[str, Any]:
    """The known keys of one tool's metadata, checked; with ``strict``, unknown keys rejected.

    Args:
        tool: the tool's name, for messages.
        meta: the metadata mapping.
        strict: reject keys outside :data:`TOOL_METADATA_KEYS` (a tool's own
            ``metadata`` dict may hold other keys, e.g. MCP annotations).
        argument: where ``meta`` came from, for messages.

    Raises:
        TypeError: ``meta`` is not a mapping, or a value has the wrong type
            (``True`` is not an int here).
        ValueError: an unknown key (with ``strict``), a value out of range, or
            ``enabled`` and ``status`` that disagree (``enabled=False`` with a
            status other than ``"disabled"``, ``enabled=True`` with ``"disabled"``).
    """
    checked = check_mapping(argument, meta, "metadata key -> value")
    out: dict[str, Any] = {}
    for key, value in checked.items():
        if key not in TOOL_METADATA_KEYS:
            if strict:
                allowed = ", ".join(TOOL_METADATA_KEYS)
                raise ValueError(
                    UNKNOWN_METADATA_KEY_ERROR.format(tool=tool, key=key, allowed=allowed)
                )
            continue
        expected = TOOL_METADATA_KEYS[key]
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            names = " or ".join("None" if t is type(None) else t.__name__ for t in expected)
            raise TypeError(
                METADATA_TYPE_ERROR.format(tool=tool, key=key, expected=names, value=value)
            )
        problem = _metadata_problem(key, value)
        if problem:
            raise ValueError(
                METADATA_VALUE_ERROR.format(tool=tool, key=key, problem=problem, value=value)
            )
        out[key] = value
    if "enabled" in out and "status" in out and out["enabled"] != (out["status"] != "disabled"):
        raise ValueError(
            STATUS_CONFLICT_ERROR.format(
                tool=tool, argument=argument, enabled=out["enabled"], status=out["status"]
            )
        )
    return out


def _metadata_problem(key: str, value: Any) -> str | None:
    if key == "include" and value not in INCLUDE_MODES:
        return f"must be one of {INCLUDE_MODES}"
    if key == "status" and value not in TOOL_STATUSES:
        return f"must be one of {TOOL_STATUSES}"
    if key == "max_concurrency" and value < 1:
        return "must be >= 1"
    if key == "timeout_s" and value is not None:
        if isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number of seconds (or None for no limit)"
        if value <= 0:
            return "must be > 0"
    return None


def closest_names(
    missing: Iterable[str], known: Iterable[str], *, filtered: Iterable[str] = ()
) -> str:
    """For each unknown name, the real names most like it (rapidfuzz), as one phrase.

    >>> closest_names(["create_isue"], ["list_issues", "create_issue", "send_message"])
    "'create_isue' -> 'create_issue', 'list_issues', 'send_message'"
    """
    choices = sorted(set(known))
    removed = set(filtered)
    parts = []
    for name in missing:
        if name in removed:
            parts.append(f"{name!r} was removed by the catalog's allowed_servers/allowed_tools")
            continue
        hits = process.extract(
            name,
            choices,
            scorer=fuzz.WRatio,
            processor=utils.default_process,
            limit=MAX_SUGGESTIONS,
        )
        close = ", ".join(repr(hit[0]) for hit in hits) or "(the catalog has no tools)"
        parts.append(f"{name!r} -> {close}")
    return "; ".join(parts)


def check_server_defaults(defaults: Mapping[str, object], servers: Iterable[str]) -> None:
    """Check that every server ``server_defaults`` names is the server of one of ``servers``.

    Raises:
        ValueError: an unknown server (a typo would leave its tools' defaults unset); the
            message names the closest real servers.
    """
    known = set(servers)
    unknown = sorted(set(defaults) - known)
    if unknown:
        closest = closest_names(unknown, known) if known else NO_SERVERS
        raise ValueError(UNKNOWN_SERVER_DEFAULTS_ERROR.format(names=unknown, closest=closest))


def categories_by_tool(
    names: list[str], categories: Mapping[str, list[str]], tool_metadata: Mapping[str, object]
) -> dict[str, list[str]]:
    """Tool -> the categories listing it, once names are checked: unique, and all known."""
    dupes = sorted(n for n, k in Counter(names).items() if k > 1)
    if dupes:
        raise ValueError(DUPLICATE_TOOL_ERROR.format(names=dupes))
    known = set(names)
    unknown = [n for n in tool_metadata if n not in known]
    if unknown:
        closest = closest_names(unknown, known)
        raise ValueError(
            UNKNOWN_METADATA_TOOL_ERROR.format(
                argument="tool_metadata", names=unknown, closest=closest
            )
        )
    out: dict[str, list[str]] = {}
    for cat, members in categories.items():
        missing = [m for m in members if m not in known]
        if missing:
            closest = closest_names(missing, known)
            raise ValueError(
                UNKNOWN_CATEGORY_TOOL_ERROR.format(category=cat, names=missing, closest=closest)
            )
        for m in members:
            if cat not in out.setdefault(m, []):
                out[m].append(cat)
    return out
