"""Meta-tools: how the model widens its own tool set.

Its one reason to change: what the meta-tools are and answer.

Key Components:
    - :func:`meta_tool_definitions`: the four meta-tools as LangChain tools to
      bind (their bodies are never run: the executor intercepts the calls).
    - :class:`MetaToolHandler`: answers a meta-call and changes a
      :class:`~langgraph_toolbudget.core.working_set.WorkingSet`.
    - :func:`closest_tools`: the tools the model is pointed to when it names one it cannot
      use (an ``add_tool`` of it, or a call to it).

The meta-tools:
    - ``request_more_tools(categories, reason="")``: load whole categories
      through the budget; answers "Loaded N tools: ..." or "No new tools added".
    - ``search_tools(query)``: regex over names and descriptions (fuzzy
      fallback); answers ``{"found", "tools", "message"}``; found tools are not
      visible yet.
    - ``add_tool(tool_names)``: make named tools visible; unknown, filtered,
      disabled names and drafts outside debug mode are reported, not added, with the
      closest tools the model may load instead.
    - ``show_all_tools()``: every tool name, ``{"total", "tools"}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field
from rapidfuzz import fuzz, process

from langgraph_toolbudget.core.budget import cut_evenly
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import RAW_ARGUMENTS_KEY
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.limits import (
    MAX_ARG_DEPTH,
    MAX_ECHO_ITEMS,
    MAX_NAME_CHARS,
    TOO_DEEP_ERROR,
    clip,
    clip_names,
    echo,
    loads_bounded,
    safe_repr,
    too_deep,
)
from langgraph_toolbudget.core.search import FUZZY_MESSAGE, NOT_FOUND_MESSAGE, more_matched
from langgraph_toolbudget.core.selection import select_tools
from langgraph_toolbudget.core.working_set import WorkingSet

__all__ = [
    "ADD_TOOL",
    "MAX_REASON_CHARS",
    "MAX_SPELLING_CANDIDATES",
    "META_TOOL_NAMES",
    "MetaOutcome",
    "MetaToolHandler",
    "REQUEST_MORE_TOOLS",
    "SEARCH_TOOLS",
    "SERVER_DOWN_ERROR",
    "SHOW_ALL_TOOLS",
    "closest_tools",
    "definition_only",
    "meta_tool_definitions",
    "server_down_error",
    "servers_down_hint",
]

REQUEST_MORE_TOOLS = "request_more_tools"
SEARCH_TOOLS = "search_tools"
ADD_TOOL = "add_tool"
SHOW_ALL_TOOLS = "show_all_tools"
META_TOOL_NAMES = (REQUEST_MORE_TOOLS, SEARCH_TOOLS, ADD_TOOL, SHOW_ALL_TOOLS)
_EXPECTED = {
    REQUEST_MORE_TOOLS: '{"categories": ["<category>", ...]}',
    SEARCH_TOOLS: '{"query": "<regex>"}',
    ADD_TOOL: '{"tool_names": ["<tool name>", ...]}',
}

BAD_META_ARGS_ERROR = (
    "Error: {tool} expects {expected}; got {args}. Call it again with arguments of that shape."
)
MAX_REASON_CHARS = 1000
"""``request_more_tools`` ranks the categories' tools for the request and the first this many
characters of the model's ``reason`` (a sentence saying what the tools are for), so a model
that writes a whole document as its reason cannot make the ranking's work grow with it."""

BAD_REASON_ERROR = (
    "Error: request_more_tools takes 'reason' as text (why you need more tools); got {got}. "
    'Call it again with a reason in words, e.g. {{"categories": ["<category>"], '
    '"reason": "<what you need them for>"}}, or with no reason.'
)
META_RAW_ARGUMENTS_ERROR = (
    "Error: the arguments of your call to {tool} are not valid JSON, so it was not run: {raw}\n"
    "Call it again with a JSON object: {expected}."
)
MAX_LISTING_CHARS = 20_000
"""A ``show_all_tools`` answer lists names until they fill this many characters; the rest are
counted, and found with ``search_tools``."""
LISTING_CUT_MESSAGE = (
    "{more} more tools are not listed here (the list is cut at {limit:,} characters); find "
    "them with search_tools."
)
LISTING_CUT_NO_SEARCH = (
    "{more} more tools are not listed here (the list is cut at {limit:,} characters)."
)
FOUND_LOAD_BY_CATEGORY = (
    "Found matching tools. To use one, call request_more_tools(categories=[...]) with its "
    "category (given with each tool) and its name in reason (reason='list_tasks')."
)
NOT_FOUND_NO_LISTING = "No tools found matching the pattern. Try a shorter pattern or another word."
FOUND_CANNOT_LOAD = (
    "Found matching tools, but this conversation cannot load other tools: use one of your "
    "tools instead."
)

NOT_ADDED_UNKNOWN = "not tools of this app (check the spelling or call search_tools)"
NOT_ADDED_UNMANAGED = (
    "not tools that add_tool loads (check the spelling or call search_tools; a tool you were "
    "given apart from these, such as another middleware's, needs no add_tool: call it directly)"
)
NOT_ADDED_UNMANAGED_NO_SEARCH = (
    "not tools that add_tool loads (check the spelling; a tool you were given apart from "
    "these, such as another middleware's, needs no add_tool: call it directly)"
)
NOT_ADDED_UNKNOWN_NO_SEARCH = "not tools of this app (check the spelling)"
NOT_ADDED_FILTERED = "filtered out by this app's configuration and cannot be used"
NOT_ADDED_DISABLED = "disabled"
NOT_ADDED_STATUS = (
    "{status} tools, which run only in debug mode (runtime_mode='debug'); use a published tool"
)
NOT_ADDED_CAP = (
    "no room: at most {cap} tools can be visible at once here, and the others are always "
    "visible or added by this same call; add fewer tools at a time"
)
NOT_ADDED_FULL = (
    "no room: at most {cap} tools can be visible at once here and each of them is always "
    "visible, so none can make room; use the tools you have"
)
NO_ROOM = "No tools loaded ({why})."
CLOSEST_TO = "Closest tools to {name!r}: {closest}."
OVER_BUDGET_NOTE = (
    " Nothing was loaded from {categories}: one call loads at most {limit} tools here. Request "
    "them on their own."
)
_NAME_WORD = re.compile(r"[\w.\-]+")
"""A tool name as a ``reason`` may write it (``list_tasks``, ``'github.create_issue'``)."""
LAST_META_CALL = (
    "That was this turn's last meta-tool call (max_meta_calls): calls to the meta-tools are "
    "refused until the user's next message. Use the tools you have, or answer the user."
)
NOT_ADDED_EXCLUDED = (
    "excluded from this conversation's tool context; only the user can include them again "
    "(tell the user if they are needed, or use other tools)"
)


SERVER_DOWN_ERROR = (
    "Error: {tool!r} was not run: it is a tool of MCP server {server!r}, which is unavailable "
    "now (it failed to load). Tell the user that the tools of {server!r} cannot be used right "
    "now."
)
SERVER_DOWN_HINT = (
    "{servers} failed to load and cannot be used now: if {tool!r} comes from there, tell the "
    "user it cannot be used right now. "
)
NOT_ADDED_SERVER_DOWN = (
    "tools of MCP server {server!r}, which is unavailable now (it failed to load): tell the "
    "user they cannot be used right now"
)
SEARCH_SERVERS_DOWN_NOTE = (
    " {servers} failed to load and cannot be used now: if the tool you are looking for comes "
    "from there, tell the user it cannot be used right now."
)
CATEGORIES_DOWN_NOTE = (
    " The tools of {servers} are unavailable now (failed to load): tell the user they cannot "
    "be used right now."
)


def server_down_error(catalog: ToolCatalog, name: str) -> str | None:
    """The error a call of ``name`` gets when it is the tool of a server that failed to load
    (by its ``<server>__`` prefix: :meth:`ToolCatalog.failed_server_of`), else None. It says
    the server is unavailable, never why (the operator's warning and ``load_errors`` do)."""
    server = catalog.failed_server_of(name)
    if server is None:
        return None
    return SERVER_DOWN_ERROR.format(tool=clip(name), server=server)


def servers_down_hint(catalog: ToolCatalog, name: str) -> str:
    """For a name the catalog does not know (of no failed server by its prefix): that some
    servers failed to load, so it may be one of theirs; "" when none failed."""
    failed = sorted(catalog.failed_servers)
    if not failed:
        return ""
    return SERVER_DOWN_HINT.format(servers=_mcp_servers(failed), tool=clip(name))


def _mcp_servers(servers: Sequence[str]) -> str:
    """``MCP server 'notes'``, or ``MCP servers 'notes', 'wiki'`` (the first few)."""
    named = ", ".join(repr(s) for s in servers[:MAX_ECHO_ITEMS])
    more = f" and {len(servers) - MAX_ECHO_ITEMS} more" if len(servers) > MAX_ECHO_ITEMS else ""
    return f"MCP server{'s' if len(servers) > 1 else ''} {named}{more}"


def _category_key(name: str) -> str:
    """A category name with case, ``_``, ``-`` and spacing left out."""
    return " ".join(re.split(r"[\s_\-]+", name.casefold())).strip()


def _closing(outcome: MetaOutcome, note: str) -> MetaOutcome:
    """``outcome`` as the turn's last meta-call answers it: a JSON answer's ``message``
    (its advice to call another meta-tool: load what it found, list every tool) is ``note``;
    a text answer ends with it."""
    try:
        answer = json.loads(outcome.content)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and "error" not in answer:
        answer["message"] = note
        return replace(outcome, content=json.dumps(answer))
    return replace(outcome, content=f"{outcome.content} {note}")


MAX_SPELLING_CANDIDATES = 500
""":func:`closest_tools` scores a name's spelling with rapidfuzz's ``WRatio`` (which also finds
a name inside a longer one) against at most this many tools: in a larger catalog, against the
tools closest by plain edit distance (``fuzz.ratio``, some 20 times cheaper). Matching one
name then takes about 1.5 ms at 10,000 tools and 4 ms at 30,000 (scoring every tool with
``WRatio``: 15 and 50 ms, all of it holding the GIL)."""


def closest_tools(
    catalog: ToolCatalog, name: str, *, hidden: Collection[str] = (), limit: int = 3
) -> list[str]:
    """The tools closest to ``name`` (spelling, then meaning): the one rule for pointing the
    model from a name it cannot use to tools it can.

    Only tools the model may load are named: the catalog's listed tools (never a filtered or
    disabled tool, nor a draft outside debug mode), minus ``hidden``.

    Args:
        catalog: the catalog, in the runtime mode of the agent.
        name: the name the model used.
        hidden: tools never named (those the thread's tool context excludes).
        limit: at most this many names.

    Returns:
        Tool names, closest first; empty only when no tool may be named.
    """
    name = name[:MAX_NAME_CHARS]  # fuzzy matching costs grow with the name's length
    hidden = set(hidden)
    index = catalog.index  # its names are the listed tools, in catalog order
    names = [n for n in index.names if n not in hidden] if hidden else index.names
    nearest = _nearest_spellings(name, names, limit)
    spelled = [n for n, score in nearest if score >= 70]
    # ask for as many more as could be hidden, so that hiding some still leaves `limit`
    ranked = index.rank_names(name.replace("_", " "), limit=limit + len(hidden))
    related = [n for n, _ in ranked if n not in hidden]
    closest = list(dict.fromkeys([*spelled, *related]))[:limit]
    if not closest:  # nothing close: still name the nearest spellings
        closest = [n for n, _ in nearest]
    return closest


def _nearest_spellings(name: str, names: Sequence[str], limit: int) -> list[tuple[str, float]]:
    """The ``limit`` of ``names`` spelled closest to ``name`` by ``WRatio``, with their scores,
    best first (ties in catalog order), among :data:`MAX_SPELLING_CANDIDATES` candidates."""
    if len(names) > MAX_SPELLING_CANDIDATES:
        near = process.extract(name, names, scorer=fuzz.ratio, limit=MAX_SPELLING_CANDIDATES)
        names = [names[i] for i in sorted(i for _, _, i in near)]
    return [(n, s) for n, s, _ in process.extract(name, names, scorer=fuzz.WRatio, limit=limit)]


class _RequestMoreToolsArgs(BaseModel):
    categories: list[str] = Field(description="Category names to load, from the list above.")
    reason: str = Field(default="", description="Why these tools are needed.")


class _SearchToolsArgs(BaseModel):
    query: str = Field(
        description="Regex over tool names and descriptions (e.g. 'weather', 'get_.*')."
    )


class _AddToolArgs(BaseModel):
    tool_names: list[str] = Field(
        description="Exact names of the tools to add (e.g. ['read_file', 'get_weather'])."
    )


class _NoArgs(BaseModel):
    pass


def definition_only(name: str, description: str, args_schema: type[BaseModel]) -> BaseTool:
    """A tool the model is shown but the executor answers itself (meta-tools and every
    built-in family): running it as a tool is a bug, and raises."""

    def never_run(**_: Any) -> str:
        raise RuntimeError(f"{name} is intercepted by the executor and never runs as a tool")

    return StructuredTool.from_function(
        func=never_run, name=name, description=description, args_schema=args_schema
    )


def meta_tool_definitions(
    categories: Sequence[str], *, enabled: Collection[str] = META_TOOL_NAMES
) -> list[BaseTool]:
    """The four meta-tools, in binding order, with the categories listed (sorted).

    Args:
        categories: the catalog's category names.
        enabled: the meta-tools the model is given; a description names no other one.
    """
    listed = ", ".join(sorted(categories)) or "(none)"
    if ADD_TOOL in enabled:
        then = "which must then be added with add_tool before you can call them."
    elif REQUEST_MORE_TOOLS in enabled:
        then = "with their categories; load a category with request_more_tools to use them."
    else:
        then = "which cannot be loaded in this conversation."
    searches = SEARCH_TOOLS in enabled
    after_search = " Use this after finding tools with search_tools." if searches else ""
    describe = "; use search_tools with a name to get its description" if searches else ""
    specs: list[tuple[str, str, type[BaseModel]]] = [
        (
            REQUEST_MORE_TOOLS,
            "Load more tools by category when the tools you have cannot do the task. "
            f"Available categories: {listed}.",
            _RequestMoreToolsArgs,
        ),
        (
            SEARCH_TOOLS,
            f"Search for available tools by name or description. Returns matching tools, {then}",
            _SearchToolsArgs,
        ),
        (
            ADD_TOOL,
            f"Add one or more tools to your available tools.{after_search}",
            _AddToolArgs,
        ),
        (
            SHOW_ALL_TOOLS,
            f"List all available tool names. Returns names only{describe}.",
            _NoArgs,
        ),
    ]
    return [definition_only(name, description, schema) for name, description, schema in specs]


@dataclass
class MetaOutcome:
    """What a meta-call did: the answer for the model and the visible-set change."""

    content: str
    added: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)
    error: bool = False


def _names_arg(args: Any, key: str) -> list[str] | None:
    """Read a list-of-names argument, forgiving a bare string or a JSON string."""
    value = args.get(key) if isinstance(args, dict) else args
    if isinstance(value, str):
        try:
            value = loads_bounded(value)
        except ValueError:
            value = [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def _evicted_note(evicted: list[str]) -> str:
    if not evicted:
        return ""
    return f" To stay within the tool limit these were unloaded: {', '.join(evicted)}."


class MetaToolHandler:
    """Answers meta-calls against a catalog, changing a working set.

    Args:
        catalog: the tool catalog, in the runtime mode of the agent: only its
            listed tools are searched, listed, loaded and added.
        max_tools: the budget ``request_more_tools`` loads a category with.
        min_per_category: floor of each category's share.
        search_limit: at most this many regex matches in a ``search_tools`` answer.
        enabled: the meta-tools the model is given; an answer points to no other one.
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        max_tools: int = 8,
        min_per_category: int = 2,
        search_limit: int = 20,
        enabled: Collection[str] = META_TOOL_NAMES,
    ) -> None:
        self.catalog = catalog
        self.max_tools = max_tools
        self.min_per_category = min_per_category
        self.search_limit = search_limit
        self.enabled = frozenset(enabled)
        self._category_keys: dict[str, str | None] | None = None
        searches = SEARCH_TOOLS in self.enabled
        self._unknown = NOT_ADDED_UNKNOWN if searches else NOT_ADDED_UNKNOWN_NO_SEARCH
        self._unmanaged = NOT_ADDED_UNMANAGED if searches else NOT_ADDED_UNMANAGED_NO_SEARCH

    def handle(
        self,
        name: str,
        args: Any,
        working: WorkingSet,
        query: str = "",
        *,
        context: SessionContext | None = None,
        outside_tools: bool = False,
        closes_loading: bool = False,
    ) -> MetaOutcome:
        """Answer one meta-call. Never raises for bad arguments: the model gets an error.

        ``context``: the thread's tool context; its excluded tools are never listed,
        found, loaded or added. ``outside_tools``: the agent may have tools outside the
        catalog (another middleware's, under ``ToolBudgetMiddleware``): ``add_tool``'s
        answer for a name it does not know says that such a tool is called directly.
        ``closes_loading``: this is the turn's last meta-call (``max_meta_calls``): the
        answer says that the meta-tools are refused after it (:data:`LAST_META_CALL`), in
        place of advice to call one.
        """
        context = context or SessionContext()
        outcome = self._handle(name, args, working, query, context, outside_tools)
        if not closes_loading:
            return outcome
        return _closing(outcome, LAST_META_CALL)

    def _handle(
        self,
        name: str,
        args: Any,
        working: WorkingSet,
        query: str,
        context: SessionContext,
        outside_tools: bool,
    ) -> MetaOutcome:
        if too_deep(args):
            return MetaOutcome(TOO_DEEP_ERROR.format(tool=name, depth=MAX_ARG_DEPTH), error=True)
        if isinstance(args, dict) and RAW_ARGUMENTS_KEY in args:  # see repair_tool_calls
            raw = echo(args[RAW_ARGUMENTS_KEY])
            expected = _EXPECTED.get(name, "{}")
            content = META_RAW_ARGUMENTS_ERROR.format(tool=name, raw=raw, expected=expected)
            return MetaOutcome(content, error=True)
        if name == REQUEST_MORE_TOOLS:
            return self._request_more_tools(args, working, query, context)
        if name == SEARCH_TOOLS:
            return self._search_tools(args, context)
        if name == ADD_TOOL:
            return self._add_tool(args, working, context, outside_tools)
        if name == SHOW_ALL_TOOLS:
            return self._show_all_tools(context)
        raise ValueError(f"{name!r} is not a meta-tool; meta-tools are {META_TOOL_NAMES}")

    def _show_all_tools(self, context: SessionContext) -> MetaOutcome:
        excluded = context.excluded(self.catalog)
        names = sorted(n for n in self.catalog.tool_names if n not in excluded)
        listed, spent = [], 0
        for n in names:
            spent += len(n) + 4  # the quotes, comma and space of the JSON list
            if spent > MAX_LISTING_CHARS:
                break
            listed.append(n)
        answer: dict[str, Any] = {"total": len(names), "tools": listed}
        if len(listed) < len(names):
            more = len(names) - len(listed)
            cut = LISTING_CUT_MESSAGE if SEARCH_TOOLS in self.enabled else LISTING_CUT_NO_SEARCH
            answer["message"] = cut.format(more=more, limit=MAX_LISTING_CHARS)
        return MetaOutcome(json.dumps(answer))

    def _request_more_tools(
        self, args: Any, working: WorkingSet, query: str, context: SessionContext
    ) -> MetaOutcome:
        categories = _names_arg(args, "categories")
        if categories is None:
            return MetaOutcome(
                BAD_META_ARGS_ERROR.format(
                    tool=REQUEST_MORE_TOOLS,
                    expected=_EXPECTED[REQUEST_MORE_TOOLS],
                    args=safe_repr(args),
                ),
                error=True,
            )
        reason = args.get("reason") if isinstance(args, dict) else None
        if reason is not None and not isinstance(reason, str):  # it joins the search query
            got = f"{type(reason).__name__} {safe_repr(reason)}"
            return MetaOutcome(BAD_REASON_ERROR.format(got=got), error=True)
        categories = [self._category_named(c) for c in categories]
        known = set(self.catalog.categories)
        down = self._failed_servers_named([c for c in categories if c not in known])
        unknown = [c for c in categories if c not in known and c not in down]
        asked = [c for c in dict.fromkeys(categories) if c in known]
        category_of: dict[str, str | None] = {}
        for category in asked:
            for name in self.catalog.tools_in(category):
                category_of.setdefault(name, category)
        reason = (reason or "")[:MAX_REASON_CHARS]
        # Each category's share as select_tools gives it, then the budget taken in turn
        # across them: cut in category order, the first category took a small budget whole.
        picks = select_tools(
            self.catalog,
            f"{query} {reason}".strip(),
            categories,
            max_tools=max(self.max_tools, max(self.min_per_category, 1) * len(asked)),
            min_per_category=self.min_per_category,
            exclude=[*working.names, *context.unselectable(self.catalog)],
            also_selectable=context.selectable(self.catalog),
        )
        # A tool the reason names comes first, whatever the ranking: without add_tool, a
        # refused call to a tool that is not loaded is told to name it here.
        named = self._named_in(reason, asked, working, context)[: max(self.max_tools, 1)]
        rest = [n for n in picks if n not in named]
        chosen = [*named, *cut_evenly(rest, category_of, max(self.max_tools - len(named), 0))]
        room = working.room()
        if room is not None and room <= 0 and chosen:
            full = NOT_ADDED_FULL.format(cap=working.cap)
            return MetaOutcome(NO_ROOM.format(why=full), error=True)
        if room is not None and len(chosen) > room:
            # Each category keeps its best: the working set would drop the last categories.
            chosen = cut_evenly(chosen, category_of, room)
        added, evicted = working.add(chosen, reason=REQUEST_MORE_TOOLS, args=args)
        note = ""
        loaded_from = {category_of.get(n) for n in added}
        left = [c for c in asked if c not in loaded_from and c in map(category_of.get, picks)]
        if left and self.max_tools > 0:  # (a budget of 0 loads nothing by design: no advice)
            note += OVER_BUDGET_NOTE.format(limit=len(chosen), categories=", ".join(left))
        if down:
            servers = _mcp_servers(list(dict.fromkeys(down.values())))
            note += CATEGORIES_DOWN_NOTE.format(servers=servers)
        if unknown:
            shown = known.difference(context.hidden_categories(self.catalog))
            note += (
                f" Unknown categories: {clip_names(unknown)}. Available categories: "
                f"{', '.join(sorted(shown))}."
            )
        if not added:
            error = bool(unknown or down) and not asked
            return MetaOutcome(f"No new tools added.{note}", error=error)
        return MetaOutcome(
            f"Loaded {len(added)} tools: {', '.join(added)}.{note}{_evicted_note(evicted)}",
            added=added,
            evicted=evicted,
        )

    def _category_named(self, name: str) -> str:
        """The catalog's category that ``name`` spells with another case, or with ``_``, ``-``
        or spaces in between ("weather data" for "Weather Data") when only one does; else
        ``name``."""
        if name in self.catalog.categories:
            return name
        if self._category_keys is None:
            keys: dict[str, str | None] = {}
            for category in self.catalog.categories:
                key = _category_key(category)
                keys[key] = None if key in keys else category  # two alike: neither
            self._category_keys = keys
        return self._category_keys.get(_category_key(name)) or name

    def _failed_servers_named(self, categories: list[str]) -> dict[str, str]:
        """Requested category -> the server that failed to load whose category it names (a
        server's tools are in the category of its name), spelled as :meth:`_category_named`
        allows."""
        failed = {_category_key(s): s for s in self.catalog.failed_servers}
        return {c: failed[key] for c in categories if (key := _category_key(c)) in failed}

    def _named_in(
        self, reason: str, categories: list[str], working: WorkingSet, context: SessionContext
    ) -> list[str]:
        """The tools of ``categories`` that ``reason`` names exactly and that are neither
        visible nor excluded in the thread: ``add_tool``'s rule (a ``manual`` tool included).
        Within the budget (at least the first: the refusal's advice names one)."""
        words = {word.strip(".-") for word in _NAME_WORD.findall(reason)}  # "... list_tasks."
        named: list[str] = []
        for category in dict.fromkeys(categories):
            for name in self.catalog.tools_in(category):
                fresh = name not in working and name not in named
                if name in words and fresh and not context.excludes(self.catalog, name):
                    named.append(name)
        return named

    def _search_tools(self, args: Any, context: SessionContext) -> MetaOutcome:
        query = args.get("query") if isinstance(args, dict) else args
        if isinstance(args, dict) and query is None and len(args) == 1:
            query = next(iter(args.values()))  # a model that named the argument differently
        if not isinstance(query, str):
            return MetaOutcome(
                BAD_META_ARGS_ERROR.format(
                    tool=SEARCH_TOOLS, expected=_EXPECTED[SEARCH_TOOLS], args=safe_repr(args)
                ),
                error=True,
            )
        result = self.catalog.index.regex_search(
            query, limit=self.search_limit, exclude=context.excluded(self.catalog)
        )
        answer = result.to_dict()
        not_found = result.message == NOT_FOUND_MESSAGE
        if result.tools and ADD_TOOL not in self.enabled:  # its message says to use add_tool
            answer = self._found_without_add_tool(result.tools, result.found)
        elif not_found and SHOW_ALL_TOOLS not in self.enabled:
            answer["message"] = NOT_FOUND_NO_LISTING  # it says to call show_all_tools
        inexact = not_found or result.message == FUZZY_MESSAGE
        if inexact and self.catalog.failed_servers:
            failed = _mcp_servers(sorted(self.catalog.failed_servers))
            answer["message"] = (
                f"{answer['message']}{SEARCH_SERVERS_DOWN_NOTE.format(servers=failed)}"
            )
        return MetaOutcome(
            json.dumps(answer),
            discovered=[t["name"] for t in result.tools],
            error=result.error is not None,
        )

    def _found_without_add_tool(self, found: list[dict[str, str]], count: int) -> dict[str, Any]:
        """A ``search_tools`` answer for a model that has no ``add_tool``: each tool with its
        category when ``request_more_tools`` can load it, else that none can be loaded."""
        more = more_matched(len(found), count)
        if REQUEST_MORE_TOOLS not in self.enabled:
            return {"found": count, "tools": found, "message": FOUND_CANNOT_LOAD + more}
        tools = []
        for t in found:
            spec = self.catalog.get(t["name"])
            categories = spec.categories if spec is not None else ()
            tools.append({**t, "category": categories[0] if categories else ""})
        return {"found": count, "tools": tools, "message": FOUND_LOAD_BY_CATEGORY + more}

    def _add_tool(
        self,
        args: Any,
        working: WorkingSet,
        context: SessionContext,
        outside_tools: bool = False,
    ) -> MetaOutcome:
        names = _names_arg(args, "tool_names")
        if names is None and isinstance(args, dict) and len(args) == 1:
            names = _names_arg(next(iter(args.values())), "tool_names")
        if names is None:
            return MetaOutcome(
                BAD_META_ARGS_ERROR.format(
                    tool=ADD_TOOL,
                    expected=_EXPECTED[ADD_TOOL],
                    args=safe_repr(args),
                ),
                error=True,
            )
        problems: dict[str, list[str]] = {}
        down: set[str] = set()
        valid = []
        unknown = self._unmanaged if outside_tools else self._unknown
        for n in dict.fromkeys(names):
            if context.excludes(self.catalog, n):
                problems.setdefault(NOT_ADDED_EXCLUDED, []).append(n)
            elif n in self.catalog:
                valid.append(n)
            elif self.catalog.is_filtered(n):
                problems.setdefault(NOT_ADDED_FILTERED, []).append(n)
            elif (status := self.catalog.status(n)) == "disabled":
                problems.setdefault(NOT_ADDED_DISABLED, []).append(n)
            elif status is not None:  # not listed in this runtime mode: a draft in production
                problems.setdefault(NOT_ADDED_STATUS.format(status=status), []).append(n)
            elif (server := self.catalog.failed_server_of(n)) is not None:
                why = NOT_ADDED_SERVER_DOWN.format(server=server)
                problems.setdefault(why, []).append(n)
                down.add(why)  # no closest tools: they would be other tools, not its own
            else:
                problems.setdefault(unknown, []).append(n)
        already = [n for n in valid if n in working]
        room = working.room()
        added, evicted = working.add(valid, reason=ADD_TOOL, args=args)
        skipped = [n for n in valid if n not in added and n not in already]
        full = room is not None and room <= 0
        no_room = (NOT_ADDED_FULL if full else NOT_ADDED_CAP).format(cap=working.cap)
        if skipped:
            problems.setdefault(no_room, []).extend(skipped)
        parts = []
        if added:
            noun = "tool" if len(added) == 1 else "tools"
            parts.append(f"Added {len(added)} {noun}: {', '.join(added)}.")
        if already:
            parts.append(f"Already available: {', '.join(already)}.")
        for why, bad in problems.items():
            parts.append(f"Not added ({why}): {clip_names(bad)}.")
        usable = (NOT_ADDED_EXCLUDED, no_room, *down)
        parts.extend(self._closest_hints(problems, context, usable=usable))
        if not parts:
            parts.append("No tools named.")
        content = " ".join(parts) + _evicted_note(evicted)
        return MetaOutcome(
            content, added=added, evicted=evicted, error=bool(problems) and not added
        )

    def _closest_hints(
        self, problems: dict[str, list[str]], context: SessionContext, usable: Collection[str]
    ) -> list[str]:
        """For each name ``add_tool`` could not add because no such tool may be used
        (unknown, filtered, disabled, a draft: any reason but those in ``usable``), the
        closest tools it may add instead, as a direct call to that name is told (the first
        :data:`MAX_ECHO_ITEMS` names)."""
        unusable = [n for why, bad in problems.items() if why not in usable for n in bad]
        unusable = unusable[:MAX_ECHO_ITEMS]
        if not unusable:
            return []
        hidden = context.excluded(self.catalog)
        hints = []
        for n in unusable:
            if closest := closest_tools(self.catalog, n, hidden=hidden):
                hints.append(CLOSEST_TO.format(name=clip(n), closest=", ".join(closest)))
        return hints
