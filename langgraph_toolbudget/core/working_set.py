"""The visible tool set of a thread: ordered, capped, least-recently-used eviction.

Its one reason to change: how a thread's visible set is ordered, capped and evicted.

Key Components:
    - :class:`WorkingSet`: the names the model sees, in a stable order (new
      names are appended, so the prompt prefix stays cacheable), with an
      optional hard cap that evicts the least recently used unpinned tools.
      Every node that changes the visible set loads one from the state, changes
      it, and returns :meth:`WorkingSet.update`: the one update shape.
    - :class:`VisibleChange`: one recorded change (what was added or evicted, by
      which node, why), for the custom stream events.
    - :func:`state_get`, :func:`state_messages`: read a state given as a dict,
      an object or a list of messages; :func:`state_names`, a list-of-names field read
      defensively (a checkpoint or a client's ``update_state`` may hold anything).

Pure data: no LangGraph import.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

__all__ = [
    "LOADED",
    "VisibleChange",
    "WorkingSet",
    "is_reason",
    "state_fields",
    "state_get",
    "state_messages",
    "state_names",
    "tools_in_use",
]


def state_messages(state: Any, key: str = "messages") -> list[Any]:
    """The message list (under ``key``) of a state given as a dict, a pydantic model or a list."""
    if isinstance(state, list):
        return state
    if type(state) is dict or isinstance(state, Mapping):
        return list(state.get(key, None) or [])
    return list(getattr(state, key, None) or [])


LOADED = "loaded"
"""The artifact key of a meta-call's tool message: the tools that call made visible."""


def tools_in_use(messages: Sequence[Any]) -> set[str]:
    """The tools a conversation is using: those it called and got an answer from that is not
    an error, and those the model loaded itself (``add_tool``, ``request_more_tools``) in
    its previous turn or this one, so a tool loaded for a task the model has not done yet
    (it asked the user first) survives to the next turn.
    """
    humans = [i for i, m in enumerate(messages) if getattr(m, "type", None) == "human"]
    recent = humans[-2] if len(humans) >= 2 else 0
    answered: set[str] = set()
    loaded: set[str] = set()
    for i, m in enumerate(messages):
        if getattr(m, "type", None) != "tool" or getattr(m, "status", "success") == "error":
            continue
        answered.add(m.tool_call_id)
        artifact = getattr(m, "artifact", None)
        if i >= recent and isinstance(artifact, Mapping):
            loaded.update(n for n in artifact.get(LOADED) or () if isinstance(n, str))
    called = {
        call["name"]
        for m in messages
        if getattr(m, "type", None) == "ai"
        for call in getattr(m, "tool_calls", None) or ()
        if call.get("id") in answered
    }
    return called | loaded


def state_get(state: Any, key: str, default: Any = None) -> Any:
    """A field of a state given as a dict or an object."""
    # A plain dict first: most states are, and an ABC check costs more than the lookup.
    if type(state) is dict or isinstance(state, Mapping):
        return state.get(key, default)
    return getattr(state, key, default)


def state_fields(state: Any) -> dict[str, Any]:
    """A state given as a dict, a pydantic model or a dataclass, as a dict of its fields
    (shallow: the values are the state's own)."""
    if isinstance(state, Mapping):
        return dict(state)
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    return dict(vars(state)) if hasattr(state, "__dict__") else dict(state)


UNMERGED_ERROR = (
    "the state field {key!r} holds an update no reducer merged ({value}): the graph's state "
    "declares it without its reducer, so the nodes' writes replace it. Declare it as "
    "ToolBudgetState does: `{key}: Annotated[list[str], merge_names]` (from "
    "langgraph_toolbudget.state), with an empty default in a pydantic or dataclass state."
)
_NAME_UPDATE_KEYS = frozenset({"replace", "remove", "add"})


def state_names(state: Any, key: str) -> list[str]:
    """The strings of a list field of ``state`` (``categories``, ``selected_tools``...), in
    order: ``[]`` for a value that is no list, and an item that is no string left out.

    The field's reducer refuses such a value in an update; this is for what got past it (an
    ``Overwrite``, a checkpoint written before the reducer checked). An update no reducer
    merged (``{"add": [...]}``: the state declares the field without ``merge_names``) raises
    ``TypeError`` saying so: the graph is built wrong, and every turn would drop the tools it
    loads.

    >>> state_names({"categories": ["slack", ["x"], 5]}, "categories")
    ['slack']
    >>> state_names({"categories": 5}, "categories")
    []
    """
    value = state_get(state, key, None)
    if isinstance(value, Mapping) and value and set(value) <= _NAME_UPDATE_KEYS:
        raise TypeError(UNMERGED_ERROR.format(key=key, value=repr(value)[:200]))
    if not isinstance(value, list | tuple):
        return []
    return [n for n in value if isinstance(n, str)]


def is_reason(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """Whether ``value`` is a visible tool's reason: a mapping whose ``"why"`` is a string."""
    return isinstance(value, Mapping) and isinstance(value.get("why"), str)


STEP_LIMIT = 2**31
"""Stored steps above this (or below 0) are renumbered 1, 2... in their order on load, so
:meth:`WorkingSet.touch` never counts past what a checkpointer stores."""


def _steps(raw: Any) -> tuple[dict[str, int], dict[str, int]]:
    """``tool_last_used`` as stored (its str -> int entries) and as the working set uses it:
    renumbered 1, 2... in their order when a step is out of range (a checkpoint may hold
    what a client wrote before the reducer checked it)."""
    if not isinstance(raw, Mapping):
        return {}, {}
    stored = {
        k: v
        for k, v in raw.items()
        if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
    }
    if not stored or 0 <= min(stored.values()) <= max(stored.values()) <= STEP_LIMIT:
        return stored, dict(stored)
    rank = {step: i for i, step in enumerate(sorted(set(stored.values())), start=1)}
    return stored, {k: rank[v] for k, v in stored.items()}


@dataclass(frozen=True)
class VisibleChange:
    """One change of the visible set: tools added and evicted, by whom and why."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    reason: str
    args: Any = None
    details: Mapping[str, Any] | None = None


@dataclass
class WorkingSet:
    """The visible tools of a thread while a node runs.

    Attributes:
        names: visible tool names, in the order the model sees them.
        pinned: names never evicted (``always`` tools, pinned tools).
        cap: at most this many visible tools (``None``: no cap). Pinned tools
            count toward the cap but are never evicted.
        last_used: name -> step of its last add or call.
        step: a counter that grows with every add or call.
        changes: what :meth:`add` changed, in order (for stream events).
        reasons: visible tool -> why it is visible (see
            :mod:`langgraph_toolbudget.core.reasons`), stored in ``tool_reasons``.
        discovered: tools a search found (:meth:`discover`), stored in
            ``discovered_tools`` while they are not visible.
        node_limits: the node's free tools and cap before a thread's context (its included
            tools come on top of the cap): what :meth:`follow_free` counts from.
    """

    names: list[str] = field(default_factory=list)
    pinned: frozenset[str] = frozenset()
    cap: int | None = None
    last_used: dict[str, int] = field(default_factory=dict)
    step: int = 0
    changes: list[VisibleChange] = field(default_factory=list)
    reasons: dict[str, Any] = field(default_factory=dict)
    discovered: list[str] = field(default_factory=list)
    node_limits: tuple[frozenset[str], int | None] | None = None
    _reason_changes: dict[str, Any] = field(default_factory=dict, repr=False)
    _stored_names: tuple[str, ...] = field(default=(), repr=False)
    _stored_last_used: dict[str, int] = field(default_factory=dict, repr=False)
    _stored_discovered: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def from_state(
        cls,
        state: Any,
        *,
        base: Iterable[str] = (),
        pinned: Iterable[str] = (),
        cap: int | None = None,
        catalog: Any = None,
    ) -> WorkingSet:
        """Load from a state's ``selected_tools``, ``tool_last_used`` and ``discovered_tools``.

        ``state`` may be a dict or an object with those attributes. ``base``
        names (tools visible whatever the state says: ``always`` and pinned
        tools) come after the stored names when the state lacks them.

        With ``catalog`` (a :class:`~langgraph_toolbudget.core.catalog.ToolCatalog`),
        stored names are checked, since a graph's caller can write any
        ``selected_tools``: names the catalog does not list are dropped, and so
        are ``manual`` tools never added by a node (no ``tool_last_used`` entry).
        The next update removes them from the state. A ``tool_last_used`` step out of range
        (see :data:`STEP_LIMIT`) renumbers them all, in their order, and the next update
        stores the new steps.
        """
        stored = state_names(state, "selected_tools")
        stored_steps, last_used = _steps(state_get(state, "tool_last_used", None))
        kept = stored if catalog is None else catalog.may_stay_visible(stored, last_used)
        names = list(dict.fromkeys([*kept, *base]))
        step = max(last_used.values()) if last_used else 0
        raw_reasons = state_get(state, "tool_reasons", None)
        reasons = dict(raw_reasons) if isinstance(raw_reasons, Mapping) else {}
        # What the reducer now refuses, a checkpoint may hold: dropped, and (under a name)
        # removed from the state by the next update.
        malformed = {k: None for k, v in reasons.items() if isinstance(k, str) and not is_reason(v)}
        reasons = {k: v for k, v in reasons.items() if isinstance(k, str) and is_reason(v)}
        found = list(dict.fromkeys(state_names(state, "discovered_tools")))
        return cls(
            names,
            frozenset(pinned),
            cap,
            last_used,
            step,
            reasons=reasons,
            discovered=found,
            _reason_changes=malformed,
            _stored_names=tuple(dict.fromkeys(stored)),
            _stored_last_used=stored_steps,
            _stored_discovered=tuple(found),
        )

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def touch(self, name: str) -> None:
        """Mark a tool as used now."""
        self.step += 1
        self.last_used[name] = self.step

    def discover(self, names: Iterable[str]) -> None:
        """Record tools a search found; :meth:`update` stores those that are not visible."""
        self.discovered = list(dict.fromkeys([*self.discovered, *names]))

    def _set_reason(self, name: str, why: Any) -> None:
        if why is None:
            self.reasons.pop(name, None)
        else:
            self.reasons[name] = why
        self._reason_changes[name] = why

    def set_reasons(self, reasons: Mapping[str, Any]) -> None:
        """Say anew why visible tools are visible (name -> reason); other names are ignored."""
        for name, why in reasons.items():
            if name in self.names:
                self._set_reason(name, why)

    def add(
        self,
        new: Iterable[str],
        *,
        reason: str = "",
        args: Any = None,
        details: Mapping[str, Any] | None = None,
        keep: Iterable[str] = (),
    ) -> tuple[list[str], list[str]]:
        """Append names not yet visible; evict under the cap; record the change.

        ``details``: name -> why it is visible (default ``{"why": reason}``).
        ``keep``: visible names this change must not evict either (besides the pinned
        ones): the new names then only take the room the others leave.

        Returns:
            ``(added, evicted)``. A name evicted to make room is never one of
            the names being added. If the cap cannot be met without evicting
            pinned tools, ``keep`` or the new names themselves, the excess new
            names (the last ones) are not added.
        """
        added: list[str] = []
        evicted: list[str] = []
        incoming = [n for n in dict.fromkeys(new) if n not in self.names]
        protect = {*incoming, *keep}
        for name in incoming:
            # `while`: a set that starts above the cap is brought down to it.
            while self.cap is not None and len(self.names) >= self.cap:
                victim = self._lru_victim(protect=protect)
                if victim is None:
                    break
                self.names.remove(victim)
                evicted.append(victim)
            if self.cap is not None and len(self.names) >= self.cap:
                break
            self.names.append(name)
            added.append(name)
            self.touch(name)
        for name in evicted:
            self._set_reason(name, None)
        why = {n: (details or {}).get(n) or {"why": reason} for n in added}
        for name in added:
            self._set_reason(name, why[name])
        if added or evicted:
            self.changes.append(VisibleChange(tuple(added), tuple(evicted), reason, args, why))
        return added, evicted

    def remove(self, names: Iterable[str], *, reason: str = "") -> list[str]:
        """Drop ``names`` from the visible set (pinned or not); record the change.

        Returns:
            The names that were visible and are now gone.
        """
        gone = [n for n in dict.fromkeys(names) if n in self.names]
        for name in gone:
            self.names.remove(name)
            self._set_reason(name, None)
        if gone:
            self.changes.append(VisibleChange((), tuple(gone), reason))
        return gone

    def refresh(
        self,
        names: Iterable[str],
        *,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
    ) -> tuple[list[str], list[str]]:
        """Make ``names`` visible, marking the ones already visible as just used.

        What a node does each turn with the tools it chose: chosen again means
        recently relevant, so those are evicted last, and a tool chosen again is
        visible for this choice's reason (its ``details`` entry), whatever first
        brought it.
        """
        names = list(dict.fromkeys(names))
        for name in names:
            if name in self.names:
                self.touch(name)
                why = (details or {}).get(name)
                if why is not None and self.reasons.get(name) != why:
                    self._set_reason(name, why)
        return self.add(names, reason=reason, details=details)

    def follow_free(self, free: Collection[str]) -> list[str]:
        """The thread's free tools are now ``free`` (its context changed in this batch): they
        are the pinned tools, and the cap is the node's (:attr:`node_limits`) plus those of them
        beyond the node's own free tools, as the thread's next working set will have it; the
        unpinned tools over it are evicted, least recently used first. Without a
        `node_limits` (a set not made for a thread's context) nothing changes.

        Returns:
            The evicted names.
        """
        if self.node_limits is None:
            return []
        node_free, node_cap = self.node_limits
        self.pinned = frozenset(free)
        if node_cap is None:
            return []
        self.cap = node_cap + len(self.pinned - node_free)
        over: list[str] = []
        while len(self.names) - len(over) > self.cap:
            victim = self._lru_victim(protect=set(over))
            if victim is None:
                break
            over.append(victim)
        return self.remove(over, reason="evicted")

    def room(self, fixed: Iterable[str] = ()) -> int | None:
        """How many names the cap leaves beside the visible pinned tools and ``fixed`` (names
        that will be visible whatever comes): what new names may take by evicting the others.
        ``None``: no cap."""
        if self.cap is None:
            return None
        return self.cap - len({*fixed, *(n for n in self.names if n in self.pinned)})

    def _lru_victim(self, protect: set[str]) -> str | None:
        candidates = [n for n in self.names if n not in self.pinned and n not in protect]
        if not candidates:
            return None
        return min(candidates, key=lambda n: (self.last_used.get(n, 0), self.names.index(n)))

    def diff(self, before: Iterable[str]) -> dict[str, list[str]]:
        """A ``selected_tools`` update turning ``before`` into the current names."""
        return _list_update(list(before), self.names)

    def update(self) -> dict[str, Any]:
        """The state update for everything changed since :meth:`from_state`.

        ``{"selected_tools": {"add": [...], "remove": [...]}}`` when the visible
        set changed, ``{"tool_last_used": {...}}`` with the changed steps of visible tools
        and ``None`` removing those of tools that left the visible set here (and of tools not
        visible whose stored step was out of range),
        ``{"discovered_tools": {"add": [...], "remove": [...]}}`` when the tools found and
        not visible changed (a found tool made visible leaves it);
        ``{"tool_reasons": {...}}`` with the reasons that changed, ``None`` removing those of
        tools no longer visible (however they left); ``{}`` when nothing did. The state's
        reducers merge them.
        """
        out: dict[str, Any] = {}
        if tuple(self.names) != self._stored_names:
            diff = self.diff(self._stored_names)
            if diff["add"] or diff["remove"]:
                out["selected_tools"] = diff
        found = [n for n in self.discovered if n not in self.names]
        if tuple(found) != self._stored_discovered:
            out["discovered_tools"] = _list_update(list(self._stored_discovered), found)
        # Only visible tools need a step (the LRU order, a `manual` tool's "added by a node"):
        # the step of a tool that left the visible set here is removed, or a long thread's
        # field grows with every tool it ever loaded. Only of one that left here: a step of a
        # tool not visible when this node read the state may be another branch's, written in
        # the same step for the tool it just loaded.
        left = set(self._stored_names) - set(self.names)
        used: dict[str, int | None] = {
            k: v
            for k, v in self.last_used.items()
            if k in self.names and self._stored_last_used.get(k) != v
        }
        # ...and of a tool not visible whose stored step is out of range: left as it is, it
        # would be read out of range (and everything renumbered) again at every turn.
        out_of_range = {k for k, v in self._stored_last_used.items() if not 0 <= v <= STEP_LIMIT}
        gone = [
            k for k in self._stored_last_used if k in left or k in out_of_range - set(self.names)
        ]
        used.update(dict.fromkeys(gone))
        if used:
            out["tool_last_used"] = used
        for name in [n for n in self.reasons if n not in self.names]:
            self._set_reason(name, None)  # left without a node's remove (its tool is gone)
        if self._reason_changes:
            out["tool_reasons"] = dict(self._reason_changes)
        return out


def _list_update(old: list[str], new: list[str]) -> dict[str, list[str]]:
    """The ``{"remove", "add"}`` update of a list field that turns ``old`` into ``new``."""
    return {"remove": [n for n in old if n not in new], "add": [n for n in new if n not in old]}
