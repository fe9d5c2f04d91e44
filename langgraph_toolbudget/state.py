"""Graph state: tool *names* only, so it serialises through every checkpointer.

Its one reason to change: the graph state's fields and how their updates merge.

Key Components:
    - :class:`ToolBudgetState`: LangGraph's messages state plus the categories
      and the visible tool set.
    - :func:`merge_names`: the reducer of ``selected_tools``: existing names
      first, new ones appended, no duplicates. A node can also send
      ``{"remove": [...]}`` / ``{"replace": [...]}`` to shrink the set.
    - :func:`merge_counts`, :func:`replace_categories`, :func:`replace_scores`,
      :func:`merge_reasons`: the reducers of ``tool_last_used``, ``categories``,
      ``category_scores`` and ``tool_reasons``; like the tool context's,
      they refuse a value of the wrong shape (:class:`StateFieldError`), since
      ``graph.update_state`` (client input on LangGraph server, a fork) writes them too.
    - :func:`apply_update`, :func:`state_delta`: a node's update merged the way the graph's
      reducers merge it, and the one update that turns one state into another (for
      several nodes run as one step: ``ChooseTools``, the middleware's ``before_model``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from numbers import Real
from typing import Annotated, Any, cast, get_args, get_type_hints

from langchain_core.messages import AnyMessage, BaseMessage, MessageLikeRepresentation
from langgraph.graph import MessagesState
from langgraph.graph.message import add_messages
from langgraph.managed.base import is_managed_value
from typing_extensions import TypedDict

from langgraph_toolbudget.core.context import (
    CONTEXT_REDUCERS,
    merge_context,
    merge_decisions,
    merge_modes,
)
from langgraph_toolbudget.core.working_set import (
    WorkingSet,
    is_reason,
    state_get,
    state_messages,
    state_names,
)

__all__ = [
    "BUDGET_FIELDS",
    "MAX_STEP",
    "StateFieldError",
    "ToolBudgetInput",
    "ToolBudgetState",
    "apply_update",
    "clean_budget_fields",
    "input_schema_of",
    "budget_declarations",
    "check_budget_reducers",
    "merge_counts",
    "merge_decisions",
    "merge_modes",
    "merge_names",
    "merge_reasons",
    "replace_categories",
    "replace_scores",
    "state_delta",
    "state_update",
    "state_get",
    "state_messages",
]

NameUpdate = Sequence[str] | Mapping[str, Sequence[str]] | None


def _dedupe(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))


def merge_names(left: Sequence[str] | None, right: NameUpdate) -> list[str]:
    """Reducer for lists of tool names (``selected_tools``, ``discovered_tools``).

    An update of another shape raises :class:`StateFieldError` naming the fields.

    Args:
        left: the current names.
        right: a list of names to append (existing names keep their
            position, so a model's prompt prefix stays stable), or a mapping
            with ``"replace"`` (the new list), ``"remove"`` and/or ``"add"``.

    >>> merge_names(["a", "b"], ["b", "c", "c"])
    ['a', 'b', 'c']
    >>> merge_names(["a", "b", "c"], {"remove": ["b"], "add": ["d"]})
    ['a', 'c', 'd']
    """
    current = _dedupe(left or [])
    if right is None:
        return current
    if isinstance(right, Mapping):
        unknown = set(right) - {"replace", "remove", "add"}
        if unknown:
            shown = _shown(sorted(unknown, key=repr))
            raise StateFieldError(
                NAMES_ERROR.format(where="the mapping", value=f"has the unknown keys {shown}")
            )
        if "replace" in right:
            current = _dedupe(_names(right["replace"], "the update's 'replace'"))
        removed = set(_names(right.get("remove", ()), "the update's 'remove'"))
        current = [n for n in current if n not in removed]
        return _dedupe([*current, *_names(right.get("add", ()), "the update's 'add'")])
    return _dedupe([*current, *_names(right, "the update")])


NAMES_ERROR = (
    "the state field 'selected_tools' or 'discovered_tools' (a tool-name field) must be a list "
    "of tool names or a mapping of 'replace'/'remove'/'add' to lists of tool names; {where} "
    "{value}. Our nodes write these fields: leave them out of graph.update_state(...), or write "
    "['get_weather'] or {{'remove': ['get_weather']}}"
)


def _names(value: object, where: str) -> list[str]:
    """``value`` (a list or set) as a list of tool names; :class:`StateFieldError` naming
    the problem otherwise."""

    def refuse(problem: str) -> StateFieldError:
        return StateFieldError(NAMES_ERROR.format(where=where, value=problem))

    return _strings(value, refuse, Sequence | set | frozenset)


def _strings(
    value: object, refuse: Callable[[str], StateFieldError], kinds: Any = Sequence
) -> list[str]:
    """``value`` as a list of strings, if it is one of ``kinds`` (never a string itself) and
    holds only strings; else ``refuse(problem)`` is raised."""
    if isinstance(value, str) or not isinstance(value, kinds):
        raise refuse(f"is {_shown(value)}")
    items = list(cast("Iterable[object]", value))
    bad = [v for v in items if not isinstance(v, str)]
    if bad:
        raise refuse(f"holds non-names {_shown(bad[:3])}")
    return cast("list[str]", items)


class StateFieldError(TypeError, ValueError):
    """An update of a budget field (``selected_tools``, ``discovered_tools``,
    ``tool_last_used``, ``categories``, ``category_scores``, ``tool_reasons``) of the wrong
    shape: a ``TypeError``, and a ``ValueError`` too, so LangGraph server
    answers a client's ``update_state`` with 400 and this message (it turns only
    ``ValueError`` into a client error)."""


FIELD_ERROR = (
    "the state field {field!r} must be {shape}; the update {problem}. Our nodes write this "
    "field: leave it out of graph.update_state(...), or write {example}"
)
MAX_STEP = 2**53
"""The largest ``tool_last_used`` step (an integer every JSON reader reads exactly)."""


def _refuse(field: str, shape: str, problem: str, example: str) -> StateFieldError:
    return StateFieldError(
        FIELD_ERROR.format(field=field, shape=shape, problem=problem, example=example)
    )


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"a {type(value).__name__}"


def merge_counts(
    left: Mapping[str, int] | None, right: Mapping[str, int | None] | None
) -> dict[str, int]:
    """Reducer for name -> counter maps (``tool_last_used``): the right side wins per key, and
    ``None`` removes the key (a tool no longer visible).

    ``right`` must map tool names to integers from 0 to :data:`MAX_STEP` (a ``bool`` is no
    integer here) or ``None``; anything else raises :class:`StateFieldError` naming the
    field, so a ``graph.update_state`` cannot store a step the next node would push past what
    a checkpointer stores.

    >>> merge_counts({"a": 1, "b": 2}, {"b": 3, "a": None})
    {'b': 3}
    """
    if right is None:
        return dict(left or {})
    shape = "a mapping of tool name -> integer step from 0 to 2**53 (None removes it)"
    example = "{'get_weather': 3}"
    if not isinstance(right, Mapping):
        raise _refuse("tool_last_used", shape, f"is {_shown(right)}", example)
    for key, value in right.items():
        if not isinstance(key, str):
            raise _refuse("tool_last_used", shape, f"has the key {_shown(key)}", example)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_STEP:
            problem = f"maps {key!r} to {_shown(value)}"
            raise _refuse("tool_last_used", shape, problem, example)
    merged = {**(left or {}), **right}
    return {k: v for k, v in merged.items() if v is not None}


def replace_categories(left: Sequence[str] | None, right: Sequence[str] | None) -> list[str]:
    """Reducer of ``categories``: the update replaces the list (``None``: no categories).

    A value that is not a list of category names raises :class:`StateFieldError`.

    >>> replace_categories(["slack"], ["weather", "github"])
    ['weather', 'github']
    """
    if right is None:
        return []
    shape, example = "a list of category names", "['weather']"
    return _strings(right, lambda problem: _refuse("categories", shape, problem, example))


def replace_scores(
    left: Mapping[str, float] | None, right: Mapping[str, float] | None
) -> dict[str, float]:
    """Reducer of ``category_scores``: the update replaces the mapping (``None``: empty).

    A value that is not a mapping of category name -> number raises :class:`StateFieldError`.

    >>> replace_scores({"slack": 1.0}, {"weather": 0.5})
    {'weather': 0.5}
    """
    if right is None:
        return {}
    shape, example = "a mapping of category name -> score (a number)", "{'weather': 1.0}"
    if not isinstance(right, Mapping):
        raise _refuse("category_scores", shape, f"is {_shown(right)}", example)
    for key, value in right.items():
        if not isinstance(key, str):
            raise _refuse("category_scores", shape, f"has the key {_shown(key)}", example)
        if isinstance(value, bool) or not isinstance(value, Real):
            problem = f"maps {key!r} to {_shown(value)}"
            raise _refuse("category_scores", shape, problem, example)
    return dict(right)


def merge_reasons(
    left: Mapping[str, Any] | None, right: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Reducer of ``tool_reasons``: :func:`~langgraph_toolbudget.core.context.merge_context`
    (the right side wins per key, ``None`` removes one), and an entry that is not a reason
    (a mapping whose ``"why"`` is a string, see :mod:`langgraph_toolbudget.core.reasons`)
    raises :class:`StateFieldError`.

    >>> merge_reasons({"a": {"why": "budget"}}, {"a": None, "b": {"why": "search"}})
    {'b': {'why': 'search'}}
    """
    shape = "a mapping of tool name -> reason ({'why': <str>, ...}) or None"
    example = "{'get_weather': {'why': 'pinned'}}"
    if right is not None and not isinstance(right, Mapping):
        raise _refuse("tool_reasons", shape, f"is {_shown(right)}", example)
    for key, value in (right or {}).items():
        if value is None:  # a removal, of any key: how a malformed entry is cleaned away
            continue
        if not isinstance(key, str):
            raise _refuse("tool_reasons", shape, f"has the key {_shown(key)}", example)
        if not is_reason(value):
            raise _refuse("tool_reasons", shape, f"maps {key!r} to {_shown(value)}", example)
    return merge_context(left, right)


class ToolBudgetState(MessagesState):
    """Messages state plus the tool budget's fields (all JSON-friendly).

    Attributes:
        categories: the categories chosen for the latest user message, best first (an
            update replaces it; :func:`replace_categories` refuses one that is not a list
            of names).
        category_scores: category -> relevance score of that choice (replaced likewise,
            :func:`replace_scores`).
        selected_tools: the visible tool set (meta-tools excluded), in the
            order the model sees it.
        discovered_tools: tools that ``search_tools`` found but that are not
            visible yet.
        tool_last_used: tool -> step when it was last added or called; drives
            eviction under a working-set cap (:func:`merge_counts` refuses a step that is
            not an integer from 0 to :data:`MAX_STEP`).
        context_tools: tool -> ``"include"`` / ``"exclude"`` in this thread
            (see :mod:`langgraph_toolbudget.core.context`).
        context_servers: server -> ``"include"`` / ``"exclude"`` in this thread.
        context_tool_modes: tool -> include mode in this thread.
        context_server_modes: server -> include mode in this thread.
        tool_reasons: visible tool -> why it is visible (``{"why": ...}``, see
            :mod:`langgraph_toolbudget.core.reasons`; :func:`merge_reasons` refuses another
            shape).
    """

    categories: Annotated[list[str], replace_categories]
    category_scores: Annotated[dict[str, float], replace_scores]
    selected_tools: Annotated[list[str], merge_names]
    discovered_tools: Annotated[list[str], merge_names]
    tool_last_used: Annotated[dict[str, int], merge_counts]
    context_tools: Annotated[dict[str, str], merge_decisions]
    context_servers: Annotated[dict[str, str], merge_decisions]
    context_tool_modes: Annotated[dict[str, str], merge_modes]
    context_server_modes: Annotated[dict[str, str], merge_modes]
    tool_reasons: Annotated[dict[str, dict[str, Any]], merge_reasons]


def clean_budget_fields(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` with its visible-set and category fields as the nodes read them: what their
    reducers refuse is left out, and out-of-range steps are renumbered (see
    :meth:`WorkingSet.from_state`). A checkpoint may hold such values from before the
    reducers checked (or an ``Overwrite`` put them past the reducer); cleaned, the state is
    accepted as the input of a graph over the same schema (the tool context has
    :meth:`~langgraph_toolbudget.core.context.SessionContext.state_values`). Only the
    fields ``state`` has are set.

    >>> clean_budget_fields({"categories": ["slack", 5], "tool_last_used": {"a": 2**64}})
    {'categories': ['slack'], 'tool_last_used': {'a': 1}}
    """
    working = WorkingSet.from_state(state)
    scores = state.get("category_scores")
    clean = {
        "categories": state_names(state, "categories"),
        "category_scores": {
            k: v
            for k, v in (scores.items() if isinstance(scores, Mapping) else ())
            if isinstance(k, str) and isinstance(v, Real) and not isinstance(v, bool)
        },
        "selected_tools": working.names,
        "discovered_tools": working.discovered,
        "tool_last_used": working.last_used,
        "tool_reasons": working.reasons,
    }
    return {**state, **{k: v for k, v in clean.items() if k in state}}


BUDGET_FIELDS = frozenset(ToolBudgetState.__annotations__) - {"messages"}
"""The state fields only our nodes and the management operations write: never a run's input."""


REDUCER_ERROR = (
    "the graph's state declares {fields} with another reducer than our nodes write through, "
    "or none (their updates would be stored as they are: unmerged and unchecked). Declare "
    "them as ToolBudgetState does (a subclass of it has them; a pydantic or dataclass state "
    "declares them itself, with empty defaults): {declarations}"
)


def budget_declarations(fields: Iterable[str]) -> str:
    """How a state declares the budget ``fields``, as ``ToolBudgetState`` does (for error
    messages): ``selected_tools: Annotated[list[str], merge_names]; ...``."""
    hints = get_type_hints(ToolBudgetState, include_extras=True)
    lines = []
    for key in fields:
        kind, reducer = get_args(hints[key])[:2]
        lines.append(f"{key}: Annotated[{repr(kind).replace('typing.', '')}, {reducer.__name__}]")
    return "; ".join(lines) + " (the reducers are in langgraph_toolbudget.state)"


def _accepted(key: str) -> tuple[Any, ...]:
    """The reducers a state may give budget field ``key``: ours; for the fields our nodes
    replace whole, none as well; for the context fields and ``tool_reasons``, the one they
    shared before (a state written for an earlier release)."""
    if key in ("categories", "category_scores"):
        return (_REDUCERS[key], None)
    if key in CONTEXT_REDUCERS or key == "tool_reasons":
        return (_REDUCERS[key], merge_context)
    return (_REDUCERS[key],)


def unmerged_budget_fields(channels: Mapping[str, Any]) -> list[str]:
    """The budget fields a graph's channels (``StateGraph(...).channels``) hold with another
    reducer than ours (or none, where the field needs one: ``selected_tools: list[str]``).

    >>> from langgraph.graph import StateGraph
    >>> unmerged_budget_fields(StateGraph(ToolBudgetState).channels)
    []
    """
    return [
        key
        for key in _REDUCERS
        if (channel := channels.get(key)) is not None
        and getattr(channel, "operator", None) not in _accepted(key)
    ]


def check_budget_reducers(channels: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` naming each budget field of ``channels`` declared with another
    reducer than ours (:func:`unmerged_budget_fields`) and the declaration it needs."""
    wrong = unmerged_budget_fields(channels)
    if wrong:
        raise TypeError(
            REDUCER_ERROR.format(fields=", ".join(wrong), declarations=budget_declarations(wrong))
        )


InputMessages = Annotated[list[AnyMessage | MessageLikeRepresentation], add_messages]
"""The messages of a run's input: messages, or what LangChain reads as one (``("user",
"hi")``, ``{"role": "user", "content": "hi"}``, a string), as ``add_messages`` takes them."""


def input_schema_of(state_schema: type[Any]) -> type[Any]:
    """``state_schema`` without :data:`BUDGET_FIELDS`: the input schema of a graph over it.

    ``StateGraph(MyState, input_schema=input_schema_of(MyState))`` drops those keys from a
    run's input, so a client cannot make a tool visible or change the tool context. Managed
    values (``RemainingSteps``, ``IsLastStep``) are left out too: LangGraph computes them,
    and refuses them in an input schema. A field reduced by ``add_messages`` takes the message
    forms it reads (:data:`InputMessages`).
    """
    hints = get_type_hints(state_schema, include_extras=True)
    fields = {
        k: InputMessages if _adds_messages(v) else v
        for k, v in hints.items()
        if k not in BUDGET_FIELDS and not _is_managed(v)
    }
    return TypedDict(f"{state_schema.__name__}Input", fields)  # type: ignore[operator]


def _adds_messages(annotation: Any) -> bool:
    """Whether a field is a list reduced by ``add_messages`` (a state's ``messages``)."""
    return add_messages in getattr(annotation, "__metadata__", ())


def _is_managed(annotation: Any) -> bool:
    """Whether a field's annotation is a LangGraph managed value (``RemainingSteps``...)."""
    return any(is_managed_value(m) for m in getattr(annotation, "__metadata__", ()))


class ToolBudgetInput(TypedDict):
    """The input of a graph over :class:`ToolBudgetState`: the messages only.

    What ``input_schema_of(ToolBudgetState)`` builds, declared so that a type checker takes
    it as a type (``tests/test_state.py`` keeps the two in step).

    Example:
        ```python
        graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
        ```
    """

    messages: InputMessages


# --- several nodes as one step ------------------------------------------------------------------

_REDUCERS: dict[str, Callable[[Any, Any], Any]] = {
    "categories": replace_categories,
    "category_scores": replace_scores,
    "selected_tools": merge_names,
    "discovered_tools": merge_names,
    "tool_last_used": merge_counts,
    **CONTEXT_REDUCERS,
    "tool_reasons": merge_reasons,
}
_MISSING = object()
_MAPPING_REDUCERS = (merge_counts, merge_context, merge_decisions, merge_modes, merge_reasons)
_REPLACING_REDUCERS = (replace_categories, replace_scores)


def apply_update(state: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` with a node's ``update`` merged in through the budget fields' reducers
    (any other key is replaced, as a field without a reducer is)."""
    merged = dict(state)
    for key, value in update.items():
        reducer = _REDUCERS.get(key)
        merged[key] = reducer(state.get(key), value) if reducer else value
    return merged


def state_update(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    reducers: Mapping[str, Callable[..., Any] | None],
    keys: Iterable[str] | None = None,
) -> dict[str, Any]:
    """The update that turns state ``before`` into ``after`` through the fields' reducers.

    Args:
        before: the state before.
        after: the state after (the keys it lacks are not touched).
        reducers: field -> its reducer (``None`` or missing: a field without one).
        keys: the fields to consider (default: every field of ``after``).

    Per reducer: messages (``add_messages``), those ``before`` lacks by id or holds changed
    (``add_messages`` replaces them by id; one ``after`` lacks stays); tool names
    (:func:`merge_names`), ``{"remove", "add"}``, or ``{"replace": ...}`` when only that
    gives ``after``'s order; counters (:func:`merge_counts`) and the tool context
    (:func:`~langgraph_toolbudget.core.context.merge_context` and the context fields' own
    reducers), the changed entries (``None`` removes a key); a list under another
    reducer, the items it gained at its end, else its final value; a field without a reducer,
    or one that replaces it (``categories``, ``category_scores``), its value.
    """
    out: dict[str, Any] = {}
    for key in after if keys is None else keys:
        if key not in after:
            continue
        old, new = before.get(key, _MISSING), after[key]
        if old is new or old == new:
            continue
        delta = _delta(reducers.get(key), None if old is _MISSING else old, new)
        if delta is not _MISSING:
            out[key] = delta
    return out


def state_delta(
    before: Mapping[str, Any], after: Mapping[str, Any], keys: Sequence[str]
) -> dict[str, Any]:
    """:func:`state_update` of ``keys`` plus the visible set (``selected_tools``,
    ``discovered_tools``, ``tool_last_used``, ``tool_reasons``), through the budget fields'
    reducers."""
    visible = ("selected_tools", "discovered_tools", "tool_last_used", "tool_reasons")
    return state_update(before, after, _REDUCERS, [*keys, *visible])


def _delta(reducer: Callable[..., Any] | None, old: Any, new: Any) -> Any:
    if reducer is None or reducer in _REPLACING_REDUCERS:
        return new
    if reducer is add_messages:
        # New messages, and those a step replaced by id (``add_messages`` replaces them), as
        # a loop's final state added as a node does. A message ``after`` lacks is not taken
        # as removed: the state may have gained it while the loop was interrupted.
        known = {m.id: m for m in old or [] if isinstance(m, BaseMessage) and m.id}
        fresh = [
            m for m in new if not (isinstance(m, BaseMessage) and m.id and known.get(m.id) == m)
        ]
        return fresh or _MISSING
    if reducer is merge_names:
        names, old_names = list(new or []), list(old or [])
        if not all(isinstance(n, str) for n in old_names):  # a removal of a non-name is refused
            return {"replace": names}
        diff = WorkingSet(names).diff(old_names)
        if merge_names(old_names, diff) != names:
            return {"replace": names}
        return diff if diff["add"] or diff["remove"] else _MISSING
    if reducer in _MAPPING_REDUCERS:
        old = old or {}
        changed = {k: v for k, v in new.items() if old.get(k, _MISSING) != v}
        # A key the reducer refuses (not a string) cannot be removed: a checkpoint may hold
        # one from before the reducers checked, and the nodes read past it.
        gone = [
            k for k in old if k not in new and (reducer is not merge_counts or isinstance(k, str))
        ]
        changed.update((k, None) for k in gone)
        return changed or _MISSING
    if isinstance(old, list) and isinstance(new, list) and new[: len(old)] == old:
        return new[len(old) :] or _MISSING
    return new
