"""The tool context of one thread: include modes and per-thread include/exclude.

Its one reason to change: what a thread's tool context holds and how it resolves include modes.

A tool's **include mode** is resolved tool -> server -> catalog default when the
catalog is built (:func:`~langgraph_toolbudget.core.spec.build_spec`); a thread
may override it for one tool or a whole server, and may **include** or
**exclude** tools and servers:

- ``always`` tools (and included ones) are in the context from the first turn,
  outside the budget;
- ``agent`` tools come and go through the budget, the tool search and the meta-tools;
- ``manual`` tools are visible only once included;
- an **excluded** tool (or a tool of an excluded server) is never visible,
  searched, selected or run in the thread, whatever the budget or the model
  asks. Exclusion wins over inclusion, and over pinned tools; only the user
  lifts it (the model's context tools refuse to: see
  :mod:`~langgraph_toolbudget.core.context_commands`). A tool is excluded under its
  name or any of its aliases (:attr:`ToolSpec.aliases`: an MCP tool's name with and
  without its server's prefix, which comes and goes with the other servers), so an
  exclusion follows the tool across deployments; an alias that now fits two tools
  excludes both. A ``manual`` mode follows the tool through its aliases too (one set
  under its exact name wins); an inclusion, an ``always`` or ``agent`` mode applies to the
  exact name only, so a rename never makes a tool visible or selectable.

The thread's choices live in four state fields (names only, merged by
:data:`CONTEXT_REDUCERS`): :data:`CONTEXT_FIELDS`.

Key Components:
    - :class:`SessionContext`: a thread's choices, read from the state, with the
      questions the nodes ask (excluded? effective mode? free tools?).
    - :func:`merge_context`: the reducer of context mappings (right wins, ``None`` removes);
      :func:`merge_decisions` and :func:`merge_modes`, the four fields' own, also refuse a
      value out of the field's choices.
    - :func:`server_of`: the server a tool is grouped under.
    - :func:`excluded_error`: the refusal a call to an excluded tool gets.

Pure logic: no LangGraph import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.spec import (
    NO_SERVER,
    SPECIAL_CATEGORIES,
    IncludeMode,
    ToolSpec,
    server_of,
)
from langgraph_toolbudget.core.working_set import WorkingSet, state_get

__all__ = [
    "CONTEXT_FIELDS",
    "CONTEXT_REDUCERS",
    "ContextTypeError",
    "DECISIONS",
    "INCLUDE_MODES",
    "NO_CONTEXT",
    "NO_SERVER",
    "Decision",
    "SessionContext",
    "excluded_error",
    "merge_context",
    "merge_decisions",
    "merge_modes",
    "server_of",
]

Decision = Literal["include", "exclude"]
DECISIONS: tuple[str, ...] = ("include", "exclude")
INCLUDE_MODES: tuple[str, ...] = ("always", "manual", "agent")
BUILD_IT_WITH = (
    "build the update with include_tools(...), exclude_tools(...) or set_include_mode(...), "
    "or apply it with update_context(...)."
)

TOOLS_FIELD = "context_tools"
SERVERS_FIELD = "context_servers"
TOOL_MODES_FIELD = "context_tool_modes"
SERVER_MODES_FIELD = "context_server_modes"
CONTEXT_FIELDS = (TOOLS_FIELD, SERVERS_FIELD, TOOL_MODES_FIELD, SERVER_MODES_FIELD)
"""The state fields of a thread's tool context: tool -> include/exclude, server ->
include/exclude, tool -> include mode, server -> include mode."""

EXCLUDED_ERROR = (
    "Error: {tool!r} was excluded from this conversation's tool context{by}, so it was not "
    "run. Only the user can include it again: tell the user if it is needed, or use another "
    "tool."
)
REASON_EXCLUDED = "excluded"
INCLUDED, ALWAYS, PINNED, KEPT = "included", "always", "pinned", "kept"
"""The ``why`` of a visible tool's reason that the thread's context gives or takes back
(the whole vocabulary: :mod:`langgraph_toolbudget.core.reasons`)."""


class ContextTypeError(TypeError, ValueError):
    """A tool-context update of the wrong type: a ``TypeError``, and a ``ValueError`` too, so
    LangGraph server answers a client's ``update_state`` with 400 and this message (it turns
    only ``ValueError`` into a client error; a plain ``TypeError`` is a 500)."""


def merge_context(
    left: Mapping[str, Any] | None, right: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Reducer of the context fields: the right side wins per key; ``None`` removes a key.

    >>> merge_context({"a": "include"}, {"a": "exclude", "b": "include"})
    {'a': 'exclude', 'b': 'include'}
    >>> merge_context({"a": "include", "b": "manual"}, {"a": None})
    {'b': 'manual'}
    """
    if right is not None and not isinstance(right, Mapping):
        raise ContextTypeError(
            f"a tool-context update must be a mapping of name -> value, got {right!r}; "
            f"{BUILD_IT_WITH}"
        )
    out = dict(left or {})
    for key, value in (right or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _checked(right: Mapping[str, Any] | None, allowed: tuple[str, ...], what: str) -> None:
    for key, value in (right or {}).items():
        if value is None or (isinstance(value, str) and value in allowed):
            continue
        choices = ", ".join(repr(a) for a in allowed)
        problem = f"{what} {key!r} is {value!r}, not one of {choices} (or None to remove it)"
        if not isinstance(value, str):
            raise ContextTypeError(f"{problem}; {BUILD_IT_WITH}")
        raise ValueError(f"{problem}; {BUILD_IT_WITH}")


def merge_decisions(
    left: Mapping[str, Any] | None, right: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Reducer of ``context_tools`` and ``context_servers``: :func:`merge_context`, and a
    value other than ``"include"``, ``"exclude"`` or ``None`` is refused (``ValueError``, or
    ``TypeError`` for a value that is not a string), so a misspelt update cannot silently
    replace an exclusion.

    >>> merge_decisions({"a": "exclude"}, {"b": "include"})
    {'a': 'exclude', 'b': 'include'}
    """
    if isinstance(right, Mapping):
        _checked(right, DECISIONS, "the tool-context decision for")
    return merge_context(left, right)


def merge_modes(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> dict[str, Any]:
    """Reducer of ``context_tool_modes`` and ``context_server_modes``: :func:`merge_context`,
    and a value other than an include mode (:data:`INCLUDE_MODES`) or ``None`` is refused
    (``ValueError``, or ``TypeError`` for a value that is not a string).

    >>> merge_modes({"a": "manual"}, {"a": "always"})
    {'a': 'always'}
    """
    if isinstance(right, Mapping):
        _checked(right, INCLUDE_MODES, "the include mode of")
    return merge_context(left, right)


CONTEXT_REDUCERS: Mapping[str, Callable[[Any, Any], dict[str, Any]]] = {
    TOOLS_FIELD: merge_decisions,
    SERVERS_FIELD: merge_decisions,
    TOOL_MODES_FIELD: merge_modes,
    SERVER_MODES_FIELD: merge_modes,
}
"""Each of :data:`CONTEXT_FIELDS` -> its reducer."""


def _clean(value: Any, allowed: Iterable[str]) -> dict[str, str]:
    allowed = set(allowed)
    if not isinstance(value, Mapping):
        return {}
    return {
        k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str) and v in allowed
    }


def excluded_error(tool: str, server: str, *, by_server: bool, alias: str | None = None) -> str:
    """The error a call to an excluded tool gets: what happened, and that only the user can
    include it again (never a tool to call: the model may not lift an exclusion).

    Args:
        tool: the tool called.
        server: its server (or group).
        by_server: excluded because its server is.
        alias: the other name of the tool the thread excluded (see :attr:`ToolSpec.aliases`).
    """
    if by_server:
        by = f" (its server {server!r} is excluded)"
    elif alias is not None:
        by = f" (under its other name {alias!r})"
    else:
        by = ""
    return EXCLUDED_ERROR.format(tool=tool, by=by)


@dataclass(frozen=True)
class SessionContext:
    """A thread's tool context: what it included, excluded, and the modes it set.

    Attributes:
        tools: tool -> ``"include"`` / ``"exclude"``.
        servers: server -> ``"include"`` / ``"exclude"``.
        tool_modes: tool -> include mode for this thread.
        server_modes: server -> include mode for this thread.

    An empty context changes nothing: the catalog's include modes decide. A context is
    never changed in place, so what it says of a whole catalog (:meth:`excluded`,
    :meth:`unselectable`, :meth:`selectable`, :meth:`free`) is worked out once per catalog,
    from the tools its entries name (never a scan of the catalog), and kept with it.
    """

    tools: Mapping[str, str] = field(default_factory=dict)
    servers: Mapping[str, str] = field(default_factory=dict)
    tool_modes: Mapping[str, str] = field(default_factory=dict)
    server_modes: Mapping[str, str] = field(default_factory=dict)
    _known: dict[tuple[int, str], tuple[ToolCatalog, Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def from_state(cls, state: Any) -> SessionContext:
        """The context stored in a state (a dict or an object); unknown values are ignored."""
        return cls(
            _clean(state_get(state, TOOLS_FIELD, None), DECISIONS),
            _clean(state_get(state, SERVERS_FIELD, None), DECISIONS),
            _clean(state_get(state, TOOL_MODES_FIELD, None), INCLUDE_MODES),
            _clean(state_get(state, SERVER_MODES_FIELD, None), INCLUDE_MODES),
        )

    def state_values(self) -> dict[str, dict[str, str]]:
        """The context as the values of its state fields (:data:`CONTEXT_FIELDS`)."""
        own = (self.tools, self.servers, self.tool_modes, self.server_modes)
        return {name: dict(current) for name, current in zip(CONTEXT_FIELDS, own, strict=True)}

    def merged(self, update: Mapping[str, Any]) -> SessionContext:
        """This context with a state update's context fields applied (as the reducers would)."""
        values = {
            name: CONTEXT_REDUCERS[name](current, update.get(name))
            for name, current in self.state_values().items()
        }
        return SessionContext.from_state(values)

    def __bool__(self) -> bool:
        return bool(self.tools or self.servers or self.tool_modes or self.server_modes)

    # --- one tool --------------------------------------------------------------------------

    def mode(self, spec: ToolSpec) -> IncludeMode:
        """The tool's include mode in this thread: thread tool -> thread server -> catalog.

        The thread's mode for the tool is the one set under its name, else ``manual`` if one
        of its aliases (:attr:`ToolSpec.aliases`) was set to ``manual``: a restrictive mode
        follows a renamed MCP tool, as an exclusion does; ``always`` and ``agent`` apply to
        the exact name only, so a rename never makes a tool visible or selectable.
        """
        mode = self._tool_mode(spec) or self.server_modes.get(server_of(spec))
        return cast(IncludeMode, mode or spec.include)

    def _tool_mode(self, spec: ToolSpec) -> str | None:
        """The mode the thread set for the tool itself (see :meth:`mode`), or None."""
        mode = self.tool_modes.get(spec.name)
        if mode is None and any(self.tool_modes.get(a) == "manual" for a in spec.aliases):
            return "manual"
        return mode

    def excluded_as(self, spec: ToolSpec) -> str | None:
        """The name under which the thread excluded the tool itself: its name, else one of
        its aliases (:attr:`ToolSpec.aliases`); None if neither (its server may be)."""
        if self.tools.get(spec.name) == "exclude":
            return spec.name
        if not (self.tools and spec.aliases):
            return None
        return next((a for a in spec.aliases if self.tools.get(a) == "exclude"), None)

    def decision(self, spec: ToolSpec) -> Decision | None:
        """``exclude`` if the tool (by name or alias) or its server is excluded, else
        ``include`` if the tool (by name only) or its server is included, else None."""
        own, group = self.tools.get(spec.name), self.servers.get(server_of(spec))
        if group == "exclude" or self.excluded_as(spec) is not None:
            return "exclude"
        if "include" in (own, group):
            return "include"
        return None

    def excludes(self, catalog: ToolCatalog, name: str) -> bool:
        """Is ``name`` excluded in this thread (a tool of the catalog, by name, alias or
        server)?"""
        if not self:
            return False
        spec = catalog.get(name)
        return spec is not None and self.decision(spec) == "exclude"

    def refusal(self, catalog: ToolCatalog, name: str) -> str | None:
        """The error for a call to ``name`` if it is excluded, else None."""
        if not self.excludes(catalog, name):
            return None
        spec = catalog.get(name)
        assert spec is not None
        key = self.excluded_as(spec)
        alias = key if key is not None and key != name else None
        return excluded_error(name, server_of(spec), by_server=key is None, alias=alias)

    def in_context(self, spec: ToolSpec) -> bool:
        """In the context without the budget: included, or ``always`` (special categories
        too, until the thread sets a mode for the tool or its server), and not excluded."""
        decision = self.decision(spec)
        if decision == "exclude":
            return False
        if decision == "include":
            return True
        mode = self.mode(spec)
        if mode == "always":
            return True
        special = bool(SPECIAL_CATEGORIES.intersection(spec.categories))
        return special and not self.sets_mode(spec)

    def reason(self, spec: ToolSpec) -> str | None:
        """Why the thread's context makes the tool visible without the budget: ``included``
        or ``always`` (see :meth:`in_context`), else None."""
        if not self.in_context(spec):
            return None
        return INCLUDED if self.decision(spec) == "include" else ALWAYS

    def follow_reasons(self, catalog: ToolCatalog, working: WorkingSet) -> None:
        """Make the reasons of the visible tools (``tool_reasons``) say what this context says.

        A visible tool the context includes (or makes ``always``) is explained so, whatever
        brought it in; one whose ``included`` / ``always`` reason the context no longer gives
        (its inclusion was removed, its mode changed) becomes ``{"why": "kept", "was": ...}``:
        visible from before, until something evicts it. A ``pinned`` tool, and a tool without
        a reason, are left as they are.
        """
        changed: dict[str, dict[str, str]] = {}
        for name in working.names:
            current = working.reasons.get(name)
            why = current.get("why") if isinstance(current, Mapping) else None
            spec = catalog.get(name)
            if why is None or why == PINNED or spec is None:
                continue
            own = self.reason(spec)
            if own is not None and why != own:
                changed[name] = {"why": own}
            elif own is None and why in (INCLUDED, ALWAYS):
                changed[name] = {"why": KEPT, "was": why}
        working.set_reasons(changed)

    def sets_mode(self, spec: ToolSpec) -> bool:
        """Whether the thread set an include mode for the tool (see :meth:`mode`) or for its
        server."""
        return self._tool_mode(spec) is not None or server_of(spec) in self.server_modes

    # --- the whole catalog -----------------------------------------------------------------

    def _once(self, catalog: ToolCatalog, what: str, work: Callable[[ToolCatalog], Any]) -> Any:
        """``work(catalog)``, worked out once per catalog (the context never changes)."""
        key = (id(catalog), what)
        known = self._known.get(key)
        if known is not None and known[0] is catalog:
            return known[1]
        value = work(catalog)
        self._known[key] = (catalog, value)
        return value

    @staticmethod
    def _named(catalog: ToolCatalog, keys: Iterable[str]) -> set[str]:
        """The listed tools ``keys`` name: by name, or as one of their aliases."""
        named: set[str] = set()
        for key in keys:
            if key in catalog:
                named.add(key)
            named.update(catalog.aliased(key))
        return named

    @staticmethod
    def _grouped(catalog: ToolCatalog, servers: Iterable[str]) -> set[str]:
        """The listed tools of ``servers``."""
        return {name for server in servers for name in catalog.tools_of(server)}

    def _with_modes(self, catalog: ToolCatalog) -> list[ToolSpec]:
        """The listed tools the thread may have set a mode for (a superset: see
        :meth:`sets_mode`)."""
        return _specs(
            catalog,
            self._named(catalog, self.tool_modes) | self._grouped(catalog, self.server_modes),
        )

    def excluded(self, catalog: ToolCatalog) -> set[str]:
        """The catalog's tools excluded in this thread."""
        if not (self.tools or self.servers):
            return set()
        return set(self._once(catalog, "excluded", self._excluded))

    def _excluded(self, catalog: ToolCatalog) -> frozenset[str]:
        by_name = self._named(catalog, [k for k, v in self.tools.items() if v == "exclude"])
        by_server = self._grouped(catalog, [k for k, v in self.servers.items() if v == "exclude"])
        return frozenset(by_name | by_server)

    def hidden_categories(self, catalog: ToolCatalog) -> list[str]:
        """The catalog's categories whose every tool is excluded in this thread (sorted).

        The model is not told about them: nothing of theirs could be loaded.
        """
        gone = self.excluded(catalog)
        if not gone:
            return []
        touched = {cat for name in gone if (spec := catalog.get(name)) for cat in spec.categories}
        return sorted(
            cat
            for cat in touched
            if (members := catalog.tools_in(cat)) and gone.issuperset(members)
        )

    def unselectable(self, catalog: ToolCatalog) -> list[str]:
        """Tools the budget and the searches must not choose in this thread: excluded
        ones, and those whose thread mode is not ``agent``."""
        if not self:
            return []
        return list(self._once(catalog, "unselectable", self._unselectable))

    def _unselectable(self, catalog: ToolCatalog) -> list[str]:
        moded = [
            s.name
            for s in self._with_modes(catalog)
            if self.sets_mode(s) and self.mode(s) != "agent"
        ]
        return catalog.in_catalog_order([*self.excluded(catalog), *moded])

    def selectable(self, catalog: ToolCatalog) -> list[str]:
        """Tools the budget and the searches may choose in this thread although the catalog
        would not: listed tools of another catalog mode the thread set to ``agent``."""
        if not (self.tool_modes or self.server_modes):
            return []
        return list(self._once(catalog, "selectable", self._selectable))

    def _selectable(self, catalog: ToolCatalog) -> list[str]:
        return catalog.in_catalog_order(
            s.name
            for s in self._with_modes(catalog)
            if s.include != "agent" and self.mode(s) == "agent" and self.decision(s) is None
        )

    def free(self, catalog: ToolCatalog, base: Iterable[str]) -> list[str]:
        """The tools visible without budget in this thread.

        Args:
            catalog: the catalog.
            base: the node's free tools without a context (``always`` tools,
                special categories, pinned tools).

        Returns:
            ``base`` minus excluded tools and ``always`` (or special-category) tools
            the thread set to another mode, plus the tools the thread included or set
            to ``always``.
        """
        base = list(base)
        if not self:
            return base
        kept = []
        for name in base:
            spec = catalog.get(name)
            if spec is None:
                continue
            if self.decision(spec) == "exclude":
                continue
            if spec.always_visible and not self.in_context(spec):
                continue  # an always (or special-category) tool the thread set to manual/agent
            kept.append(name)
        extra = self._once(catalog, "in_context", self._in_context)
        return list(dict.fromkeys([*kept, *extra]))

    def _in_context(self, catalog: ToolCatalog) -> list[str]:
        """The listed tools :meth:`in_context`, in catalog order: among the ``always`` ones,
        those the thread included and those it set a mode for."""
        maybe = [
            *_specs(catalog, catalog.always_visible),
            *_specs(catalog, [k for k, v in self.tools.items() if v == "include"]),
            *_specs(
                catalog,
                self._grouped(catalog, [k for k, v in self.servers.items() if v == "include"]),
            ),
            *self._with_modes(catalog),
        ]
        return catalog.in_catalog_order(s.name for s in maybe if self.in_context(s))

    def working_set(
        self,
        state: Any,
        catalog: ToolCatalog,
        free: Iterable[str],
        *,
        cap: int | None = None,
        add_free: bool = True,
    ) -> WorkingSet:
        """The thread's visible set: the state's, with the thread's free tools and without
        its excluded tools (their removal is recorded as a change with reason ``excluded``),
        its tools' reasons following the context (:meth:`follow_reasons`).

        Args:
            state: the graph state.
            catalog: the catalog.
            free: the node's free tools without a context (see :meth:`free`).
            cap: the working-set cap, counting ``free``. The tools this thread makes
                visible for free beyond ``free`` (those it included or set to ``always``)
                come on top of it: a thread that includes a large server keeps the room the
                budget and the model's own loads have.
            add_free: add the free tools to the set (else they are only protected
                from eviction).
        """
        free = list(free)
        thread_free = self.free(catalog, free)
        working = WorkingSet.from_state(
            state,
            base=thread_free if add_free else (),
            pinned=thread_free,
            cap=None if cap is None else cap + len(set(thread_free).difference(free)),
            catalog=catalog,
        )
        working.node_limits = (frozenset(free), cap)
        gone = self.excluded(catalog)
        if gone:
            working.remove([n for n in working.names if n in gone], reason=REASON_EXCLUDED)
        self.follow_reasons(catalog, working)
        return working


def _specs(catalog: ToolCatalog, names: Iterable[str]) -> list[ToolSpec]:
    """The specs of the listed ones of ``names``."""
    return [spec for n in names if n in catalog and (spec := catalog.get(n)) is not None]


NO_CONTEXT = SessionContext()
"""The empty context (a thread that set none), shared: a context is never changed in place."""
