"""The visible tool set during one turn: ordered, capped, least-recently-used eviction.

Key Components:
    - :class:`WorkingSet`: the names the model sees, in a stable order (new
      names are appended, so the prompt prefix stays cacheable), with an
      optional hard cap that evicts the least recently used unpinned tools.

Pure data: the nodes load it from state, change it, and write back a diff.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from langgraph_toolbudget.state import state_get

__all__ = ["WorkingSet"]


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
    """

    names: list[str] = field(default_factory=list)
    pinned: frozenset[str] = frozenset()
    cap: int | None = None
    last_used: dict[str, int] = field(default_factory=dict)
    step: int = 0

    @classmethod
    def from_state(
        cls,
        state: Any,
        *,
        base: Iterable[str] = (),
        pinned: Iterable[str] = (),
        cap: int | None = None,
    ) -> WorkingSet:
        """Load from a state's ``selected_tools`` and ``tool_last_used``.

        ``state`` may be a dict or an object with those attributes. ``base``
        names (tools visible whatever the state says) come first when the state
        has none of them yet.
        """
        selected = state_get(state, "selected_tools", None) or []
        names = list(dict.fromkeys([*selected, *base]))
        last_used = dict(state_get(state, "tool_last_used", None) or {})
        step = max(last_used.values(), default=0)
        return cls(names, frozenset(pinned), cap, last_used, step)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def touch(self, name: str) -> None:
        """Mark a tool as used now."""
        self.step += 1
        self.last_used[name] = self.step

    def add(self, new: Iterable[str]) -> tuple[list[str], list[str]]:
        """Append names not yet visible; evict under the cap.

        Returns:
            ``(added, evicted)``. A name evicted to make room is never one of
            the names being added. If the cap cannot be met without evicting
            pinned tools or the new names themselves, the excess new names are
            not added.
        """
        added: list[str] = []
        evicted: list[str] = []
        incoming = [n for n in dict.fromkeys(new) if n not in self.names]
        protect = set(incoming)
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
        return added, evicted

    def _lru_victim(self, protect: set[str]) -> str | None:
        candidates = [n for n in self.names if n not in self.pinned and n not in protect]
        if not candidates:
            return None
        return min(candidates, key=lambda n: (self.last_used.get(n, 0), self.names.index(n)))

    def diff(self, before: Iterable[str]) -> dict[str, list[str]]:
        """A ``selected_tools`` update turning ``before`` into the current names."""
        old = list(before)
        return {
            "remove": [n for n in old if n not in self.names],
            "add": [n for n in self.names if n not in old],
        }
