"""Which calls may run: the check stage's policy, and the errors a refused call gets.

Its one reason to change: which calls may run and what a refused call is told.

Key Components:
    - :class:`VisibilityPolicy`: a call to a tool that is unknown, filtered,
      disabled, a draft outside debug mode, or (with ``enforce_visibility``) not
      visible is not run; the model gets an error naming the closest real tools
      and what to do instead.
    - :class:`ReplyMatches`: the closest tools the refusals of one reply name, for a
      bounded number of names (:data:`MAX_MATCHED_NAMES`): matching a name against the
      catalog costs time that grows with the catalog.
    - :func:`deprecation_note`, :func:`add_note`: the note a deprecated tool's
      results carry, and how it is added to them.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Collection, Container, Hashable
from functools import partial
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import INVALID_TOOL_NAME_ERROR_TEMPLATE
from langgraph.types import Command

from langgraph_toolbudget._forks import reset_in_forked_children
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import MISSING_NAME
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.limits import clip
from langgraph_toolbudget.core.meta import closest_tools, server_down_error, servers_down_hint
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.execution.prepare import CallCheck

__all__ = [
    "DEPRECATED_NOTE",
    "HOW_TO_LOAD",
    "LOADERS",
    "MAX_MATCHED_NAMES",
    "NOT_MATCHED_HINT",
    "UNAVAILABLE_TOOL_ERROR",
    "ReplyMatches",
    "VisibilityPolicy",
    "add_note",
    "how_to_load",
    "deprecation_note",
]

UNAVAILABLE_TOOL_ERROR = "Error: {tool!r} {problem}. {closest}{how}"
NOT_LOADED = "exists but is not loaded, so it was not run"
LOAD_IT_FIRST = "Load it first with add_tool(tool_names=[{tool!r}]), then call it again."
LOAD_ITS_CATEGORY_FIRST = (
    "Load it first with request_more_tools(categories=[{category!r}], reason={tool!r}), then "
    "call it again."
)
NO_LOADING = "This conversation cannot load other tools: use one of your tools instead."
LOADING_CLOSED = (
    "Calls to the meta-tools are refused for the rest of this turn: they reached their limit "
    "(max_meta_calls). Use the tools you have, or answer the user."
)
INCLUDE_IT_FIRST = (
    "Every place in the visible set is taken by tools that are always visible: include it with "
    "include_tool(tool={tool!r}) (included tools come on top of the cap), then call it again."
)
INCLUDE_ANOTHER = (
    "Every place in the visible set is taken by tools that are always visible: to use another "
    "tool, include it with include_tool(tool=...) (included tools come on top of the cap)."
)
NO_ROOM_TO_LOAD = (
    "No tool can be loaded here: at most {cap} tools can be visible at once and each of them "
    "is always visible. Use the tools you have, or answer the user."
)
LOADERS = ("add_tool", "search_tools", "request_more_tools")
"""The meta-tools through which the model loads tools; the refusals name the enabled ones."""
_HOW = {
    "add_tool": "call add_tool(tool_names=[...]) with its exact name",
    "search_tools": "search_tools(query=...) to find one",
    "request_more_tools": "request_more_tools(categories=[...]) for a whole category",
}


def how_to_load(loaders: Collection[str]) -> str:
    """How the model loads a tool through ``loaders`` (those of :data:`LOADERS` it has):
    the end of a refusal of a name it may not call."""
    finds = "search_tools" in loaders and "add_tool" in loaders  # add_tool loads what it finds
    ways = [_HOW[n] for n in LOADERS if n in loaders and (n != "search_tools" or finds)]
    if not ways:
        return NO_LOADING
    if len(ways) == 1:
        return f"To load a tool: {ways[0]}."
    return f"To load a tool: {', '.join(ways[:-1])}, or {ways[-1]}."


HOW_TO_LOAD = how_to_load(LOADERS)
"""The refusal's end when the model has every loading meta-tool."""
FILTERED = "is filtered out by this app's configuration and cannot be used"
DISABLED = "is disabled and cannot be used"
NOT_IN_MODE = (
    "is a {status} tool, which runs only in debug mode (runtime_mode='debug'); this app runs "
    "in {mode} mode, so it was not run"
)
USE_ANOTHER = (
    "Use a published tool instead (search_tools(query=...) finds one, add_tool loads it). "
    "To run this one, run the app with runtime_mode='debug', or publish the tool "
    "(metadata status='published')."
)
USE_ANOTHER_ONLY = (
    "Use a published tool instead. To run this one, run the app with runtime_mode='debug', "
    "or publish the tool (metadata status='published')."
)
DEPRECATED_NOTE = (
    "Note: tool {tool!r} is deprecated and may be removed; prefer another tool for this task "
    "next time (search_tools(query=...) finds one)."
)


DEPRECATED_NOTE_NO_SEARCH = (
    "Note: tool {tool!r} is deprecated and may be removed; prefer another tool for this task "
    "next time."
)


def deprecation_note(catalog: ToolCatalog, name: str, *, searches: bool = True) -> str | None:
    """The note a result of ``name`` carries if the tool is deprecated, else None.

    ``searches``: the model has ``search_tools`` (the note then says it finds another tool).
    """
    if catalog.status(name) != "deprecated":
        return None
    return (DEPRECATED_NOTE if searches else DEPRECATED_NOTE_NO_SEARCH).format(tool=name)


def add_note(output: Any, tool_call_id: str | None, note: str) -> Any:
    """``output`` with ``note`` after the content of its tool messages answering ``tool_call_id``.

    ``output`` is what one call produced: a ``ToolMessage``, a ``Command`` (its
    update's messages are looked at) or a list of them; other values pass as they are.
    """
    if isinstance(output, list):
        return [add_note(item, tool_call_id, note) for item in output]
    if isinstance(output, ToolMessage) and output.tool_call_id == tool_call_id:
        content = output.content
        if isinstance(content, str):
            noted: Any = f"{content}\n\n{note}" if content else note
        else:
            noted = [*content, {"type": "text", "text": note}]
        return output.model_copy(update={"content": noted})
    if isinstance(output, Command) and isinstance(output.update, dict):
        messages = output.update.get("messages")
        if isinstance(messages, list):
            update = {**output.update, "messages": add_note(messages, tool_call_id, note)}
            return dataclasses.replace(output, update=update)
    return output


NO_NAME_ERROR = (
    "Error: your tool call had no tool name, so it was not run. "
    "Call it again with the exact name of one of your tools."
)
UNKNOWN = "is not a tool of this app, so it was not run"
MAX_MATCHED_NAMES = 5
"""The refusals of one reply name the closest tools for at most this many distinct names it
may not call (unknown, filtered, disabled, drafts): matching a name against the catalog costs
time that grows with the catalog, so a reply of hundreds of such names would make a turn's
work grow with names x catalog. The calls of the other names are told :data:`NOT_MATCHED_HINT`."""
NOT_MATCHED_HINT = (
    "Closest tools are named for at most {limit} such names per reply, not for this one. "
)
REPLIES_REMEMBERED = 1024
""":meth:`VisibilityPolicy.check` keeps the :class:`ReplyMatches` of this many of the latest
replies checked by key (the middleware checks each call of a reply on its own)."""


class ReplyMatches:
    """The closest tools the refusals of one reply's calls name.

    Each name is matched once (every call of it is told the same tools), and at most
    :data:`MAX_MATCHED_NAMES` names are: the first ones refused. Thread-safe: the calls of
    a reply may be refused in several threads at once (``ToolBudgetMiddleware``), which then
    match one at a time, so they cannot hold the GIL (rapidfuzz does) from the event loop
    together.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closest: dict[str, list[str]] = {}

    def closest(self, name: str, match: Callable[[str], list[str]]) -> list[str] | None:
        """``match(name)``, made the first time ``name`` is asked about; None when the reply
        has had :data:`MAX_MATCHED_NAMES` other names matched."""
        with self._lock:
            closest = self._closest.get(name)
            if closest is None and len(self._closest) < MAX_MATCHED_NAMES:
                closest = self._closest[name] = match(name)
            return closest


class VisibilityPolicy:
    """Decides whether a call may run, and words the refusal for the model.

    Args:
        catalog: the tool catalog, in the runtime mode of the calls
            (``catalog.in_runtime_mode(...)``): its listed tools may run.
        enforce_visibility: refuse calls to tools that exist but are not visible.
        toolnode_wording: word the refusal of an unknown name as ``ToolNode`` does
            (every tool named, no meta-tools: the model of a plain ``ToolNode`` graph
            has none).
        loaders: the meta-tools of :data:`LOADERS` the model has; a refusal tells it to
            load a tool through these only (none: to use the tools it has).
        includes: the model has ``include_tool``, whose tools come on top of the cap (a
            refusal sends it there when always-visible tools fill the visible set).
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        enforce_visibility: bool = True,
        toolnode_wording: bool = False,
        loaders: Collection[str] = LOADERS,
        includes: bool = False,
    ) -> None:
        self.catalog = catalog
        self.enforce_visibility = enforce_visibility
        self.toolnode_wording = toolnode_wording
        self.loaders = frozenset(loaders)
        self.includes = includes
        self._how = how_to_load(self.loaders)
        self._closed = LOADING_CLOSED if self.loaders else NO_LOADING
        finds = "search_tools" in self.loaders and "add_tool" in self.loaders
        self._use_another = USE_ANOTHER if finds else USE_ANOTHER_ONLY
        self._replies: dict[Hashable, ReplyMatches] = {}  # oldest first
        self._replies_lock = threading.Lock()
        reset_in_forked_children(self)

    def _after_fork(self) -> None:
        # A lock a thread of the parent held is held for ever in a forked child.
        self._replies, self._replies_lock = {}, threading.Lock()

    def check(
        self,
        visible: WorkingSet,
        shown: set[str],
        context: SessionContext,
        *,
        loading_closed: bool = False,
        reply: Hashable | None = None,
    ) -> CallCheck:
        """A regular call's check: excluded in the thread's ``context``, else fine if the
        model was ``shown`` it (and it is in the catalog), else :meth:`unavailable`
        (``loading_closed``: the turn's meta-calls reached their limit, so a refusal does
        not send the model to a meta-tool that would refuse it too; nor when ``visible``
        has no room for any tool beside those always visible).

        The refusals name the closest tools for at most :data:`MAX_MATCHED_NAMES` names
        (:class:`ReplyMatches`): those of the calls this check is asked about (one reply's
        calls), or, with ``reply`` (a key of the reply, for a caller that checks each of its
        calls with a check of its own), those of every check made with that key.
        """
        catalog = self.catalog
        room = visible.room()
        full = visible.cap if room is not None and room <= 0 else None
        own = ReplyMatches() if reply is None else None

        def check(name: str) -> str | None:
            if (excluded := context.refusal(catalog, name)) is not None:
                return excluded
            if name in shown and name in catalog:
                return None
            matches = own if own is not None else self._matches_of(reply)
            return self.unavailable(
                name,
                visible,
                context,
                loading_closed=loading_closed,
                full_at=full,
                matches=matches,
            )

        return check

    def _matches_of(self, reply: Hashable) -> ReplyMatches:
        """The :class:`ReplyMatches` of the reply keyed ``reply``, made on first use (those
        of the latest :data:`REPLIES_REMEMBERED` replies are kept)."""
        with self._replies_lock:
            matches = self._replies.get(reply)
            if matches is None:
                matches = self._replies[reply] = ReplyMatches()
                if len(self._replies) > REPLIES_REMEMBERED:
                    del self._replies[next(iter(self._replies))]
            return matches

    def _load_first(self, name: str) -> str:
        """How the model loads ``name``, a catalog tool it was not shown."""
        if "add_tool" in self.loaders:
            return LOAD_IT_FIRST.format(tool=name)
        spec = self.catalog.get(name)
        if "request_more_tools" in self.loaders and spec is not None and spec.categories:
            return LOAD_ITS_CATEGORY_FIRST.format(category=spec.categories[0], tool=name)
        return NO_LOADING

    def unavailable(
        self,
        name: str,
        visible: Container[str],
        context: SessionContext | None = None,
        *,
        loading_closed: bool = False,
        full_at: int | None = None,
        matches: ReplyMatches | None = None,
    ) -> str | None:
        """Why a call to ``name`` may not run (an error for the model), or None.

        The tools it names instead are ones the model may load: none that ``context`` (the
        thread's tool context) excludes. ``loading_closed``: the meta-tools are refused for
        the rest of the turn (the meta-call bound), which the refusal says instead of how to
        load;
        ``full_at``: the visible-set cap, when tools that are always visible fill it (no
        tool can be loaded at all); ``matches``: the closest tools named by the other
        refusals of the call's reply (:data:`NOT_MATCHED_HINT` instead once it is full).
        """
        closed = self._closed if loading_closed else None
        # always-visible tools fill the cap: only include_tool (on top of it) brings one in
        include = full_at is not None and self.includes
        if include:
            closed = INCLUDE_ANOTHER
        elif full_at is not None and self.loaders:
            closed = NO_ROOM_TO_LOAD.format(cap=full_at)
        catalog = self.catalog
        context = context or SessionContext()
        if name in catalog:
            if not self.enforce_visibility or name in visible:
                return None
            how = INCLUDE_IT_FIRST.format(tool=name) if include else closed
            how = how or self._load_first(name)
            return UNAVAILABLE_TOOL_ERROR.format(tool=name, problem=NOT_LOADED, closest="", how=how)
        if name == MISSING_NAME:
            return NO_NAME_ERROR
        status = catalog.status(name)
        unheard_of = status is None and not catalog.is_filtered(name)
        if unheard_of and (down := server_down_error(catalog, name)) is not None:
            return down  # a tool of a server that failed to load: no other tool is "closest"
        if self.toolnode_wording and unheard_of:
            hidden = context.excluded(catalog)
            available = [n for n in catalog.tool_names if n not in hidden]
            return INVALID_TOOL_NAME_ERROR_TEMPLATE.format(
                requested_tool=name, available_tools=", ".join(available)
            )
        how = closed or self._how
        if catalog.is_filtered(name):
            problem = FILTERED
        elif status == "disabled":
            problem = DISABLED
        elif status is not None:  # exists, but its status does not run in this mode (a draft)
            problem = NOT_IN_MODE.format(status=status, mode=catalog.runtime_mode)
            how = USE_ANOTHER_ONLY if closed else self._use_another
        else:
            problem = UNKNOWN
        match = partial(_closest, catalog, context)
        closest = match(name) if matches is None else matches.closest(name, match)
        if closest is None:
            hint = NOT_MATCHED_HINT.format(limit=MAX_MATCHED_NAMES)
        else:
            hint = f"Closest tools: {', '.join(closest)}. " if closest else ""
        if problem == UNKNOWN:
            hint += servers_down_hint(catalog, name)
        return UNAVAILABLE_TOOL_ERROR.format(
            tool=clip(name), problem=problem, closest=hint, how=how
        )


def _closest(catalog: ToolCatalog, context: SessionContext, name: str) -> list[str]:
    """The closest tools to ``name`` that ``context`` does not exclude."""
    return closest_tools(catalog, name, hidden=context.excluded(catalog))
