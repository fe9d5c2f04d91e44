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
      an object or a list of messages.

Pure data: no LangGraph import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LOADED", "VisibleChange", "WorkingSet", "state_get", "state_messages", "tools_in_use"]


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
    """

    names: list[str] = field(default_factory=list)
    pinned: frozenset[str] = frozenset()
    cap: int | None = None
    last_used: dict[str, int] = field(default_factory=dict)
    step: int = 0
    changes: list[VisibleChange] = field(default_factory=list)
    reasons: dict[str, Any] = field(default_factory=dict)
    discovered: list[str] = field(default_factory=list)
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
        The next update removes them from the state.
        """
        raw_names = state_get(state, "selected_tools", None)
        stored = [n for n in raw_names if isinstance(n, str)] if raw_names else []
        raw = state_get(state, "tool_last_used", None)
        last_used = (
            {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, int)}
            if raw and isinstance(raw, Mapping)
            else {}
        )
        kept = stored if catalog is None else catalog.may_stay_visible(stored, last_used)
        names = list(dict.fromkeys([*kept, *base]))
        step = max(last_used.values()) if last_used else 0
        reasons = state_get(state, "tool_reasons", None)
        raw_found = state_get(state, "discovered_tools", None)
        found = list(dict.fromkeys(n for n in raw_found if isinstance(n, str))) if raw_found else []
        return cls(
            names,
            frozenset(pinned),
            cap,
            last_used,
            step,
            reasons=dict(reasons) if isinstance(reasons, Mapping) else {},
            discovered=found,
            _stored_names=tuple(dict.fromkeys(stored)),
            _stored_last_used=dict(last_used),
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
        set changed, ``{"tool_last_used": {...}}`` with the entries that
        changed, ``{"discovered_tools": {"add": [...], "remove": [...]}}`` when the
        tools found and not visible changed (a found tool made visible leaves it);
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
        used = {k: v for k, v in self.last_used.items() if self._stored_last_used.get(k) != v}
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
