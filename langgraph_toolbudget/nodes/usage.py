"""``ToolUsage``: the tools that served past requests, kept in a LangGraph store.

Key Components:
    - :class:`ToolUsage`: record (automatically through ``usage=`` on the
      agent, the executor and the prebuilt graph, or by hand), forget,
      export/import; backed by a LangGraph ``BaseStore`` (the one given, else
      the running graph's, else memory) so the history survives restarts and is
      shared by threads and workers. The ranking nodes (``ClassifyIntent``,
      ``SelectTools``, ``ToolSearch``) read it through ``usage=``.
    - :func:`succeeded_tools`: the regular tools of a batch that ran successfully, which
      ``ToolExecutor`` and ``ToolAgent`` record; :func:`record_call` /
      :func:`arecord_call`: the same for one call, which ``ToolBudgetMiddleware``
      records (the agent's tool node runs each call on its own).
    - :func:`usage_scores` / :func:`ausage_scores`: the run's history loaded and fused into
      a ranking node's scores (a store that cannot be read: logged, no usage this turn).

How the ranking nodes rank with it is in :mod:`langgraph_toolbudget.nodes.retrieval`.
Its one reason to change: what is recorded, where it is kept and how it is read back.

The history and its index are pure logic, in :mod:`langgraph_toolbudget.core.usage`.

Typical Usage:
    ```python
    usage = ToolUsage(store=SqliteStore(conn), catalog=catalog)
    graph = create_toolbudget_agent(model, catalog, usage=usage)
    usage.record("is it going to rain in Oslo?", ["weather_forecast"])  # or learned as it runs
    ```
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import inspect
import logging
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

import numpy as np
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore, GetOp, Op, PutOp
from langgraph.types import Command

from langgraph_toolbudget._compat import runtime_of
from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.core.intent import latest_user_text
from langgraph_toolbudget.core.limits import clip_names, safe_repr
from langgraph_toolbudget.core.meta import META_TOOL_NAMES
from langgraph_toolbudget.core.option_checks import check_count, check_number
from langgraph_toolbudget.core.usage import (
    DEFAULT_MAX_QUERIES_PER_TOOL,
    DEFAULT_MAX_RECORDS,
    DEFAULT_MIN_SOURCES,
    DEFAULT_USAGE_WEIGHT,
    MAX_SOURCES_KEPT,
    MOVED_SOURCE,
    UsageIndex,
    UsageRecord,
    bounded_id,
    check_record_args,
    fuse_usage,
    hashed_id,
    is_tool_name,
    kept_id,
    normalize_query,
    promotable,
)
from langgraph_toolbudget.core.working_set import (
    is_reason,
    state_get,
    state_messages,
    state_names,
)
from langgraph_toolbudget.nodes.store_options import check_namespace, check_store

__all__ = [
    "OPT_OUT_KEY",
    "Scope",
    "ToolUsage",
    "arecord_call",
    "arecord_batch",
    "ausage_scores",
    "check_usage_catalog",
    "record_batch",
    "record_call",
    "records_usage",
    "scope_key",
    "self_loaded",
    "succeeded_tools",
    "usage_scores",
]

logger = logging.getLogger(__name__)

OPT_OUT_KEY = "toolbudget_record_usage"
"""``config["configurable"][OPT_OUT_KEY] = False`` turns recording off for that run (thread)."""
BAD_OPT_OUT_ERROR = (
    "configurable['toolbudget_record_usage'] takes True (record this run's tool usage, the "
    "default when unset) or False (record nothing), a bool; got {value} ({kind}). A privacy "
    "switch is never guessed from text or numbers: turn the value into a bool first (a JSON "
    "false from a LangGraph server client is one already)."
)

_P = ParamSpec("_P")
_R = TypeVar("_R")

Scope = Literal["assistant", "user", "global"]
"""Whose observed history a run records into and ranks with (see :class:`ToolUsage`)."""
SCOPES: tuple[str, ...] = ("assistant", "user", "global")
SHARED_LABEL = "shared"
"""The store namespace label (under ``namespace``) of the operator's records."""
SCOPE_LABEL = "scope"
"""The store namespace label (under ``namespace``) above each scope's records."""
LEGACY_MOVED_KEY = "legacy_rows_moved"
"""The key of the item among the shared rows (no record) that says the rows stored before
scopes existed (directly under ``namespace``) were moved: read with the shared rows, so a
first load that finds it asks the store nothing more."""
MOVED_KEY = "moved"
"""The key of an export row that says it is a shared row moved from the layout before
scopes and not vouched for yet (:data:`~langgraph_toolbudget.core.usage.MOVED_SOURCE` among
its sources)."""
LEGACY_MOVED_WARNING = (
    "moved %d tool usage rows stored before scopes existed (directly under %s) into the "
    "shared history as observed rows: they rank only once corroborated. To vouch for them as "
    "before (trusted, ranking at once), re-import them: usage.import_([{k: r[k] for k in "
    "('tool', 'query', 'thread', 'ts')} for r in usage.export() if r.get('moved')]) (with "
    "a catalog, leave out the rows naming tools it lacks: import_ refuses them)"
)
APP_REASONS = frozenset({"budget", "relevance", "search", "always", "pinned"})
"""Why a visible tool is visible, when the app chose it (see ``core/reasons.py``); any other
reason (``add_tool``, ``request_more_tools``, ``included``...) is the model's or the
user's own choice."""
_PLAIN_LABEL = re.compile(r"[A-Za-z0-9_-]{1,64}")

PAGE = 1000
WRITE_CHUNK = 100
"""Store ops per ``store.batch`` call, at most: a history of 20,000 rows is written in chunks,
since a store makes one statement of a batch (``PostgresStore``: 4 parameters a row, 65,535
at most; ``SqliteStore``: 5 a row, 999 at most before SQLite 3.32)."""
MAX_SCOPES_HELD = 1000
"""Scope histories (``scope="user"``/``"assistant"``) held in memory, at most: the least
recently used one leaves memory (never the store), and is read again at its next use. A client
may send a new ``user_id`` with every request."""
ROWS_TYPE_ERROR = (
    "import_ takes a list of rows (as export() gives), each a mapping with 'tool' and 'query'; "
    "got {got}. For one row, pass [row]."
)
BAD_ROW_ERROR = (
    "import_ row {i} must be a mapping with 'tool' and 'query' strings (as export() gives), "
    "optional 'thread', 'user' and 'scope' (strings or None), 'ts' (a number), 'trusted' "
    "and 'loaded' (booleans), 'sources' (a list of strings); got {row}."
)
BAD_SCOPE_ERROR = (
    "ToolUsage: option scope must be 'assistant' (a history per LangGraph assistant or graph, "
    "the default), 'user' (per user: langgraph_auth_user_id or user_id in the run's "
    "configurable) or 'global' (one history for every run); got {value} ({kind})."
)
ASYNC_STORE_ERROR = (
    "ToolUsage.{method}() cannot use the {store} from inside the event loop it runs on: an "
    "async store refuses sync calls there. In async code call `await usage.{amethod}(...)` "
    "(and run graphs with `ainvoke`); from sync code, call {method}() outside that loop (in "
    "another thread)."
)
IMPORT_STORE_ERROR = (
    "import_ could not write its rows to the {store}: {error}. The {count} rows it added are "
    "in this ToolUsage's memory, but the store holds only those written before the failure "
    "(which is what other workers, and this one after its next refresh(), rank with). Call "
    "import_(rows) again once the store works: it writes every row again, none twice."
)
UNKNOWN_TOOLS_ERROR = (
    "tool_names holds {names}, which are not tools of this ToolUsage's catalog; record only "
    "the catalog's tools (or build ToolUsage without catalog=)."
)
OTHER_CATALOG_ERROR = (
    "{owner}: usage= is a ToolUsage built with catalog= a catalog that lacks this one's tools "
    "{names}: it would hold tools its catalog refuses (record() refuses them). Build the "
    "ToolUsage with this catalog (ToolUsage(catalog=catalog, ...)), or without catalog=."
)


_Change = (
    tuple[Literal["add"], str | None, list[UsageRecord]] | tuple[Literal["forget"], set[str] | None]
)
"""A change to the histories in memory: records added to a scope's (None: the shared one), or
tools forgotten in all of them (None: every tool)."""


def _key(record: UsageRecord) -> str:
    return hashlib.sha1(f"{record.tool}\n{record.query}".encode()).hexdigest()


def _row(value: Mapping[str, Any], i: int, trusted: bool, *, observed: bool = False) -> UsageRecord:
    """A stored or imported row as a record; ``trusted``: when the row does not say.
    ``observed``: a row of a scope's (or the legacy) namespace, which anyone who can write the
    store may have written: observed whatever its ``trusted`` says."""
    tool, query = value.get("tool"), value.get("query")
    thread, ts = value.get("thread"), value.get("ts", 0.0)
    user, loaded = value.get("user"), value.get("loaded", False)
    trusted = False if observed else value.get("trusted", trusted)
    sources = value.get("sources", [])
    ok = isinstance(tool, str) and isinstance(query, str) and bool(query)  # the name: UsageRecord
    ok = ok and (thread is None or isinstance(thread, str)) and isinstance(ts, int | float)
    ok = ok and (user is None or isinstance(user, str))
    ok = ok and isinstance(trusted, bool) and isinstance(loaded, bool)
    ok = ok and isinstance(sources, list) and all(isinstance(x, str) for x in sources)
    if not ok:
        raise ValueError(BAD_ROW_ERROR.format(i=i, row=safe_repr(dict(value))))
    if not trusted and not sources:
        sources = [user or thread or ""]
    kept = () if trusted else tuple(dict.fromkeys(sources))[-MAX_SOURCES_KEPT:]
    return UsageRecord(str(tool), str(query), thread, float(ts), trusted, user, loaded, kept)


def _is_moved(record: UsageRecord) -> bool:
    """Whether a shared record is a row moved from the layout before scopes and not vouched
    for: observed, with :data:`MOVED_SOURCE` among its sources (a trusted one has none)."""
    return not record.trusted and MOVED_SOURCE in record.sources


def _label(scope: str) -> str:
    """A scope key as a store namespace label (no periods; long or odd keys hashed, and keys
    that look hashed hashed again, so no key can name another's namespace)."""
    if _PLAIN_LABEL.fullmatch(scope) and bounded_id(scope) == scope:
        return scope
    return hashed_id(scope)


def records_usage(config: RunnableConfig | None) -> bool:
    """Whether a run records its tool usage: its ``configurable``'s ``toolbudget_record_usage``
    (:data:`OPT_OUT_KEY`), True when unset.

    Raises:
        TypeError: the value is set but is not a bool ("false", 0, "no", None...): the run
            stops before anything is recorded, rather than record against the caller's wish.
    """
    configurable = (config or {}).get("configurable") or {}
    value = configurable.get(OPT_OUT_KEY, True)
    if not isinstance(value, bool):
        raise TypeError(BAD_OPT_OUT_ERROR.format(value=safe_repr(value), kind=type(value).__name__))
    return value


def scope_key(scope: Scope, config: RunnableConfig | None) -> str | None:
    """The history a run reads and records into, from its ``configurable``.

    ``assistant``: the LangGraph server's ``assistant_id`` (else ``graph_id``, else
    ``"default"``); ``user``: ``langgraph_auth_user_id`` (set by LangGraph server from
    the authenticated user; a client cannot set it), else ``user_id`` (which a client can
    set when the server has no auth), else None: no history of its own; ``global``:
    ``"global"``.
    """
    configurable = (config or {}).get("configurable") or {}
    if scope == "global":
        return "global"
    if scope == "assistant":
        key = configurable.get("assistant_id") or configurable.get("graph_id") or "default"
        return bounded_id(str(key))
    user = configurable.get("langgraph_auth_user_id") or configurable.get("user_id")
    return None if user in (None, "") else bounded_id(str(user))


def _sync_store_call(
    amethod: str,
) -> Callable[[Callable[Concatenate[ToolUsage, _P], _R]], Callable[Concatenate[ToolUsage, _P], _R]]:
    """Mark a sync method of :class:`ToolUsage` whose async form is ``amethod``: called in
    the event loop an async store runs on (``AsyncSqliteStore``, ``AsyncPostgresStore``),
    which refuses sync calls there with advice about the store's own methods, it raises an
    ``asyncio.InvalidStateError`` that names ``amethod`` instead, before it changes anything
    in memory (the store is asked first, see :meth:`ToolUsage._probe`)."""

    def decorate(
        method: Callable[Concatenate[ToolUsage, _P], _R],
    ) -> Callable[Concatenate[ToolUsage, _P], _R]:
        signature = inspect.signature(method)

        @functools.wraps(method)
        def wrapper(self: ToolUsage, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                self._probe()
                return method(self, *args, **kwargs)
            except asyncio.InvalidStateError as error:
                # The store that refused: the run's (the graph's store) for a method given
                # a config, else this ToolUsage's own.
                config = signature.bind(self, *args, **kwargs).arguments.get("config")
                store = self._store_for(config)
                message = ASYNC_STORE_ERROR.format(
                    method=method.__name__,
                    amethod=amethod,
                    store="async store" if store is None else type(store).__name__,
                )
                raise asyncio.InvalidStateError(message) from error

        return wrapper

    return decorate


def _check_options(
    *,
    store: Any,
    namespace: Any,
    max_queries_per_tool: Any,
    max_queries_per_thread: Any,
    weight: Any,
    scope: Any,
    min_threads: Any,
    max_records: Any,
) -> None:
    """:class:`ToolUsage`'s options: ``TypeError`` for a wrong type, ``ValueError`` for a value
    out of range, each naming the option and the value."""
    check_store("ToolUsage", store, none="the running graph's store, else memory")
    check_namespace("ToolUsage", namespace, example=("toolbudget", "usage"))
    check_count(
        "ToolUsage", "max_queries_per_tool", max_queries_per_tool, minimum=1, unit="queries"
    )
    check_count(
        "ToolUsage",
        "max_queries_per_thread",
        max_queries_per_thread,
        minimum=1,
        unit="queries",
        none="a tenth of max_queries_per_tool",
    )
    check_count("ToolUsage", "min_threads", min_threads, minimum=1, unit="threads")
    check_count("ToolUsage", "max_records", max_records, minimum=1, unit="records")
    check_number("ToolUsage", "weight", weight, minimum=0)
    if not isinstance(scope, str):
        raise TypeError(
            BAD_SCOPE_ERROR.format(value=safe_repr(scope, 80), kind=type(scope).__name__)
        )
    if scope not in SCOPES:
        raise ValueError(BAD_SCOPE_ERROR.format(value=safe_repr(scope, 80), kind="str"))


class ToolUsage:
    """Which tools served which requests: recorded, bounded, kept in a LangGraph store.

    Record a user's message with the tools that ran successfully for it; the
    ranking nodes given ``usage=`` then rank those tools higher for similar
    messages (the messages expand each tool's searchable text, fused with the
    lexical and embedding scores, see :func:`~langgraph_toolbudget.core.usage.fuse_usage`).
    With ``usage=`` on ``create_toolbudget_agent``, ``ToolAgent`` or
    ``ToolExecutor`` recording is automatic: each catalog tool that ran
    successfully is recorded against the latest user message; refused and failed
    calls, and built-in tools, are not. Opt a run (a thread) out with
    ``config["configurable"]["toolbudget_record_usage"] = False`` (a bool: any other value
    raises ``TypeError`` before anything is recorded, see :func:`records_usage`).

    Trust (one user's usage must not steer another's tools):

    - **Scope.** What a run records, and the history it ranks with, belong to its
      scope: ``assistant`` (the default: per LangGraph server assistant, or graph),
      ``user`` (per user: ``langgraph_auth_user_id``, else ``user_id``, from the run's
      ``configurable``; a run without one records nothing and reads only the
      operator's records) or ``global`` (one history for every run).
    - **Trusted and observed.** Your records (:meth:`record`, :meth:`import_`) are
      trusted: they rank in every scope at once. Records observed while
      conversations run rank only once their tool was recorded from ``min_threads``
      distinct threads of the scope (distinct users, when the runs carry one; in
      ``user`` scope, threads); a tool the model loaded itself (``add_tool``,
      ``request_more_tools``) outside the categories chosen for the request is
      recorded but never ranked. A message's credit is bounded however many terms it
      stuffs.
    - **Never promoted:** manual tools, drafts, tools marked ``destructiveHint``
      (MCP annotation, or in the tool's ``metadata``): usage never raises their score
      nor picks them when nothing matches.

    Storage: every (tool, message) pair is one item of ``store`` (value: tool, message,
    thread id, user id, time, trust; never arguments or results): your records under
    ``(*namespace, "shared")``, a scope's under ``(*namespace, "scope", <scope key>)``.
    With ``store=None`` the running graph's store is used (the one given to
    ``compile(store=...)``, or LangGraph server's), attached on the first node run
    that has one; outside a graph the history lives in memory. A history is loaded
    from the store once, when first used; :meth:`refresh` reloads them. A store that cannot
    be read or written never ends a run (logged): the ranking nodes rank without usage, and a
    record that could not be written stays in this worker's memory until its next refresh
    (see :func:`record_batch`, :func:`usage_scores`); your own calls raise the store's error.

    Bounds: at most ``max_queries_per_tool`` distinct messages per tool (the
    oldest dropped, in memory and in the store), at most
    ``max_queries_per_thread`` of them from one thread (default a tenth), at most
    ``max_records`` per history, and ``max_records`` across the scopes held in memory, at
    most :data:`MAX_SCOPES_HELD` of them (the least recently used scope is dropped from
    memory, never from the store). A NUL or lone surrogate, which some store refuses, is
    recorded as U+FFFD (in an id: its hash; see :func:`~langgraph_toolbudget.core.usage.storable`).
    Tool names are checked: 1 to 128 printable characters, and with ``catalog=`` a tool of
    that catalog (pass it: then a name nobody's catalog has is refused).

    Args:
        store: a LangGraph ``BaseStore``, or None (see above).
        namespace: the store namespace of the items.
        max_queries_per_tool: distinct messages kept per tool.
        max_queries_per_thread: of those, at most this many from one thread.
        weight: the usage share of the fused score (see ``fuse_usage``); 0 ranks as without usage.
        scope: ``assistant``, ``user`` or ``global`` (see above).
        min_threads: distinct threads (or users) an observed tool needs before it ranks.
        max_records: records kept per history (see above).
        catalog: when given, :meth:`record` and :meth:`import_` accept only its tools.

    Raises:
        TypeError: an option of the wrong type (``store`` not a ``BaseStore`` instance,
            ``namespace`` not a tuple, a bound or ``weight`` not a number, ``scope`` not a
            string, ``catalog`` not a ``ToolCatalog``), naming the option and the value.
        ValueError: an option out of range (an empty namespace, a bound below 1, a negative
            or infinite weight, an unknown scope).

    Example:
        ```python
        usage = ToolUsage(catalog=catalog)  # the graph's store in a graph, else memory
        usage.record("will it rain tomorrow?", ["weather_forecast"])
        SelectTools(catalog, usage=usage)
        rows = usage.export()  # move the history to another deployment
        ToolUsage(store=other_store).import_(rows)
        ```
    """

    def __init__(
        self,
        store: BaseStore | None = None,
        namespace: tuple[str, ...] = ("toolbudget", "usage"),
        max_queries_per_tool: int = DEFAULT_MAX_QUERIES_PER_TOOL,
        *,
        max_queries_per_thread: int | None = None,
        weight: float = DEFAULT_USAGE_WEIGHT,
        scope: Scope = "assistant",
        min_threads: int = DEFAULT_MIN_SOURCES,
        max_records: int = DEFAULT_MAX_RECORDS,
        catalog: ToolCatalog | None = None,
    ) -> None:
        _check_options(
            store=store,
            namespace=namespace,
            max_queries_per_tool=max_queries_per_tool,
            max_queries_per_thread=max_queries_per_thread,
            weight=weight,
            scope=scope,
            min_threads=min_threads,
            max_records=max_records,
        )
        if catalog is not None:
            require_catalog(catalog, "ToolUsage")
        self.store = store
        self.namespace = namespace
        self.weight = float(weight)
        self.scope: Scope = scope
        self.catalog = catalog
        self._bounds = (max_queries_per_tool, max_queries_per_thread, min_threads, max_records)
        self.history = self._new_history()  # the operator's records (trusted), shared
        self._scopes: OrderedDict[str, UsageIndex] = OrderedDict()  # in memory, by recent use
        self._held = 0  # the records of the histories in _scopes (kept as they change)
        # What every scope that holds no record holds (never changed: _history replaces it),
        # so a scope loaded empty (a new user) costs a few hundred bytes, not a history's 2 KB.
        self._empty = self._new_history()
        self._loaded: dict[str, BaseStore] = {}  # scope key -> the store it was loaded from
        self._attached: BaseStore | None = None
        self._attach_lock = threading.RLock()
        self._journal: list[_Change] | None = None  # this process's changes during a refresh
        self._last: tuple[Any, np.ndarray | None, np.ndarray | None] | None = None
        # Forgets by number, kept while a write of records added before them is under way
        # (see _end_write), those writes by the number of forgets before them, and meanwhile
        # the last store op of each row written after one of those forgets began.
        self._forgets: dict[int, set[str] | None] = {}
        self._forgot = 0
        self._writing: Counter[int] = Counter()
        self._rewritten: dict[tuple[tuple[str, ...], str], tuple[int, PutOp]] = {}

    def _new_history(self) -> UsageIndex:
        per_tool, per_thread, min_sources, max_records = self._bounds
        return UsageIndex(per_tool, per_thread, min_sources=min_sources, max_records=max_records)

    def __deepcopy__(self, memo: dict[int, Any]) -> ToolUsage:
        """This same object: a usage history is shared by design (a deep copy of a
        ``BudgetConfig``, a node or a graph records into the same history), and its locks
        and store cannot be copied."""
        return self

    def __repr__(self) -> str:
        where = type(self._attached or self.store).__name__ if self._attached or self.store else ""
        return f"ToolUsage({len(self)} records, scope={self.scope!r}, store={where or 'memory'})"

    def __len__(self) -> int:
        return sum(len(h) for _, h in self._histories())

    # --- the store ----------------------------------------------------------------------------

    def _namespace(self, scope: str | None) -> tuple[str, ...]:
        if scope is None:
            return (*self.namespace, SHARED_LABEL)
        return (*self.namespace, SCOPE_LABEL, _label(scope))

    def _store_for(self, config: RunnableConfig | None) -> BaseStore | None:
        if self.store is not None:
            return self.store
        runtime = runtime_of(config)
        store = getattr(runtime, "store", None)
        return store if isinstance(store, BaseStore) else self._attached

    def _probe(self) -> None:
        """In a thread that runs an event loop, make one small sync read of the store, so a
        store that refuses sync calls there (an async store, in its own loop) raises before a
        sync method changes the histories in memory; elsewhere nothing is read."""
        store = self._attached or self.store
        if store is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: every store takes sync calls
            return
        store.search(self.namespace, limit=1)

    def _put(self, scope: str | None, record: UsageRecord) -> PutOp:
        value = record.to_dict() if scope is None else {**record.to_dict(), "scope": scope}
        return PutOp(self._namespace(scope), _key(record), value, index=False)

    def _delete(self, scope: str | None, record: UsageRecord) -> PutOp:
        return PutOp(self._namespace(scope), _key(record), None)

    def _merged(
        self, memory: Iterable[UsageRecord], scope: str | None, stored: list[UsageRecord]
    ) -> tuple[UsageIndex, list[PutOp]]:
        """A new history of ``stored`` and ``memory`` (records made before the store was
        known), and the store ops that make the store agree with it. Built aside, so a run
        ranking meanwhile uses the history it had."""
        known = {_key(r) for r in stored}
        history = self._new_history()
        added, evicted = history.insert(sorted([*stored, *memory], key=lambda r: r.ts))
        ops = [self._delete(scope, r) for r in evicted if _key(r) in known]
        ops += [self._put(scope, r) for r in added if _key(r) not in known]
        return history, ops

    @staticmethod
    def _items(store: BaseStore, namespace: tuple[str, ...]) -> list[Any]:
        items: list[Any] = []
        while True:
            page = store.search(namespace, limit=PAGE, offset=len(items))
            items += page
            if len(page) < PAGE:
                return items

    @staticmethod
    async def _aitems(store: BaseStore, namespace: tuple[str, ...]) -> list[Any]:
        items: list[Any] = []
        while True:
            page = await _acall(
                store, "asearch", "search", namespace, limit=PAGE, offset=len(items)
            )
            items += page
            if len(page) < PAGE:
                return items

    def _records(
        self,
        items: list[Any],
        namespace: tuple[str, ...],
        trusted: bool,
        scope: str | None = None,
    ) -> list[UsageRecord]:
        """The records stored exactly under ``namespace`` (a search also returns the ones
        below); with ``trusted`` False (a scope's rows, the legacy ones) every record is
        observed, whatever its row says. A row that is no record (another writer's, a tool
        name no tool has) or, under ``scope``, says it belongs to another scope is skipped and
        logged: one bad row must not fail every run that loads the history."""
        records, skipped = [], 0
        for i, item in enumerate(items):
            if tuple(item.namespace) != namespace or self._is_marker(item):
                continue
            value = item.value
            try:
                if scope is not None and value.get("scope", scope) != scope:
                    raise ValueError("a row of another scope")
                record = _row(value, i, trusted, observed=not trusted)
            except (ValueError, TypeError, AttributeError):
                skipped += 1
                continue
            records.append(record)
        if skipped:
            logger.warning("skipped %d stored usage rows under %s: not records", skipped, namespace)
        return records

    def _legacy(self, items: list[Any]) -> list[Any]:
        """The rows of ``items`` stored directly under ``namespace`` (before scopes existed)."""
        return [i for i in items if tuple(i.namespace) == self.namespace]

    def _legacy_check(self) -> dict[str, Any]:
        """The ``list_namespaces`` arguments that find ``namespace`` itself when rows are stored
        directly under it, without reading any scope's rows (only namespaces that both begin
        and end with it match: itself, or an odd one another writer made)."""
        return {"prefix": self.namespace, "suffix": self.namespace, "limit": PAGE}

    def _is_marker(self, item: Any) -> bool:
        """Whether a stored item is the one that says the legacy rows were moved."""
        return item.key == LEGACY_MOVED_KEY and tuple(item.namespace) == self._namespace(None)

    def _moved(self) -> PutOp:
        """The op that writes the item saying the legacy rows were moved."""
        value = {"moved_at": time.time()}
        return PutOp(self._namespace(None), LEGACY_MOVED_KEY, value, index=False)

    def _legacy_items(self, store: BaseStore, shared: list[Any]) -> list[Any] | None:
        """The rows stored directly under ``namespace``: read (with every row below it, as a
        search reads) only when the ``shared`` rows hold no item saying they were moved and
        the store lists that namespace; None when nothing was read. ``InMemoryStore`` keeps
        listing a namespace whose rows were deleted (or merely read), so that item, written
        when they move, is what ends the reads."""
        if any(self._is_marker(item) for item in shared):
            return None
        if self.namespace not in store.list_namespaces(**self._legacy_check()):
            return None
        return self._legacy(self._items(store, self.namespace))

    async def _alegacy_items(self, store: BaseStore, shared: list[Any]) -> list[Any] | None:
        """Async :meth:`_legacy_items`."""
        if any(self._is_marker(item) for item in shared):
            return None
        found = await _acall(store, "alist_namespaces", "list_namespaces", **self._legacy_check())
        if self.namespace not in found:
            return None
        return self._legacy(await self._aitems(store, self.namespace))

    def _attach_shared(
        self, store: BaseStore, shared: list[Any], legacy: list[Any] | None
    ) -> list[PutOp]:
        """Make ``store`` the attached one and its shared rows the shared history; the store
        ops. Records made before any store was known join it, and rows stored before scopes
        existed (directly under ``namespace``, all observed: they rank once corroborated) move
        among them, then the marker that says so is written (``legacy``: None when they were
        not looked for). After another store, the histories start afresh: theirs are that
        store's."""
        with self._attach_lock:
            if store is self._attached:
                return []
            switched = self._attached is not None
            rows = self._records(shared, self._namespace(None), True)
            # keyed as the history keys them (an import normalises a message the same way),
            # and labelled moved among their sources (MOVED_SOURCE) until vouched for
            old = [
                replace(r, query=normalize_query(r.query), sources=(*r.sources, MOVED_SOURCE))
                for r in self._records(legacy or [], self.namespace, False)
            ]
            memory = [] if switched else self.history.records()
            history, ops = self._merged(memory, None, rows + old)
            # each moved row as the history holds it: one you recorded before the store was
            # known, with the same tool and message, stays yours (trusted, no mark)
            merged = {_key(r): r for r in history.records()}
            moves = [merged[key] for r in old if (key := _key(r)) in merged]
            ops += [self._put(None, r) for r in moves]
            ops += [PutOp(self.namespace, item.key, None) for item in legacy or []]
            if legacy is not None:  # after the moves: a failed write leaves no marker
                ops.append(self._moved())
            if observed := sum(not r.trusted for r in moves):
                logger.warning(LEGACY_MOVED_WARNING, observed, self.namespace)
            self.history = history
            if switched:
                self._scopes.clear()
                self._held = 0
            self._attached = store
            self._loaded.clear()
            return ops

    def _attach_scope(self, store: BaseStore, scope: str, items: list[Any]) -> list[PutOp]:
        """Load ``scope``'s rows from ``store`` into its history (with what it recorded before
        the store was known); the store ops."""
        stored = self._records(items, self._namespace(scope), False, scope)
        with self._attach_lock:
            if self._attached is not store or self._loaded.get(scope) is store:
                return []
            memory = self._scopes[scope].records() if scope in self._scopes else []
            history, ops = self._merged(memory, scope, stored)
            self._set_scope(scope, history)
            self._loaded[scope] = store
            self._evict()
            return ops

    def _unloaded(self, store: BaseStore, config: RunnableConfig | None) -> str | None:
        """The run's scope, when its history is not yet loaded from ``store``."""
        scope = scope_key(self.scope, config) if config is not None else None
        return scope if scope is not None and self._loaded.get(scope) is not store else None

    @_sync_store_call("aattach")
    def attach(self, config: RunnableConfig | None = None) -> None:
        """Load the histories from the store (``store``, else the graph's in ``config``): the
        shared one once, the run's scope once. The nodes call this; call it yourself to load
        at start-up. The store is read and written outside any lock: other runs rank with
        what they have meanwhile."""
        store = self._store_for(config)
        if store is None:
            return
        if store is not self._attached:
            shared = self._items(store, self._namespace(None))
            legacy = self._legacy_items(store, shared)
            ops = self._attach_shared(store, shared, legacy)
            self._bound(store, ops, [*shared, *(legacy or [])])
        scope = self._unloaded(store, config)
        if scope is not None:
            items = self._items(store, self._namespace(scope))
            self._bound(store, self._attach_scope(store, scope, items), items)

    async def aattach(self, config: RunnableConfig | None = None) -> None:
        """Async :meth:`attach` (``asearch``/``abatch``; a sync-only store runs in a thread)."""
        store = self._store_for(config)
        if store is None:
            return
        if store is not self._attached:
            shared = await self._aitems(store, self._namespace(None))
            legacy = await self._alegacy_items(store, shared)
            ops = self._attach_shared(store, shared, legacy)
            await self._abound(store, ops, [*shared, *(legacy or [])])
        scope = self._unloaded(store, config)
        if scope is not None:
            items = await self._aitems(store, self._namespace(scope))
            await self._abound(store, self._attach_scope(store, scope, items), items)

    @staticmethod
    def _read_back(ops: list[PutOp], items: list[Any]) -> list[GetOp]:
        """The reads of the rows ``ops`` delete that were read in ``items`` (whose value is
        known), to see whether they are still as read."""
        read = {(tuple(i.namespace), i.key) for i in items}
        return [
            GetOp(op.namespace, op.key)
            for op in ops
            if op.value is None and (op.namespace, op.key) in read
        ]

    @staticmethod
    def _kept(
        ops: list[PutOp], gets: list[GetOp], items: list[Any], now: Sequence[Any]
    ) -> list[PutOp]:
        """``ops`` without the deletes of the rows read back (``gets``, answered ``now``)
        that are no longer as ``items`` read them."""
        read = {(tuple(i.namespace), i.key): i.value for i in items}
        changed = {
            (get.namespace, get.key)
            for get, item in zip(gets, now, strict=True)
            if item is None or item.value != read[(get.namespace, get.key)]
        }
        return [op for op in ops if op.value is not None or (op.namespace, op.key) not in changed]

    @classmethod
    def _bound(cls, store: BaseStore, ops: list[PutOp], items: list[Any]) -> None:
        """Write ``ops`` (a loaded history's, to bound the rows ``items`` read), but delete a
        row read in ``items`` only if it is still as it was read: another worker may have
        recorded it again since (then it is the newest, not the oldest). Read back just
        before the delete: the bounds catch up at the next refresh."""
        gets = cls._read_back(ops, items)
        now = _batch(store, gets)
        _batch(store, cls._kept(ops, gets, items, now))

    @classmethod
    async def _abound(cls, store: BaseStore, ops: list[PutOp], items: list[Any]) -> None:
        """Async :meth:`_bound`."""
        gets = cls._read_back(ops, items)
        now = await _abatch(store, gets)
        await _abatch(store, cls._kept(ops, gets, items, now))

    @_sync_store_call("arefresh")
    def refresh(self) -> None:
        """Reload the histories from the store (what other workers recorded, or forgot, since):
        the shared one and each scope held in memory. Call it now and then (on a timer, or
        every N runs) in a deployment of several workers; :meth:`arefresh` in async code.

        Once attached, the store is the truth: the histories in memory are replaced by what it
        holds, so a record another worker forgot is not written back. The new histories are
        built aside and then swapped in, so a run ranking meanwhile ranks with the old ones or
        the new, never with an empty one; what this process records or forgets while the store
        is read is applied to the new ones too. A refresh while another is under way does
        nothing. Before a store is known (``store=``, or the graph's, after the first run that
        had one) there is nothing to reload.
        """
        if self._attached is None:
            self.attach()  # the first load (with ``store=``): nothing held to reload yet
            return
        started = self._reload_from()
        if started is None:
            return
        store, journal = started
        try:
            shared = self._items(store, self._namespace(None))
            stored = {s: self._items(store, self._namespace(s)) for s in self._scopes_of(store)}
            ops, read = self._reload(store, journal, shared, stored)
        finally:
            self._end_journal(journal)
        self._bound(store, ops, read)

    async def arefresh(self) -> None:
        """Async :meth:`refresh` (``asearch``/``abatch``; a sync-only store runs in a thread).

        Example:
            ```python
            async def refresh_usage_every_minute(usage: ToolUsage) -> None:
                while True:
                    await asyncio.sleep(60)
                    await usage.arefresh()
            ```
        """
        if self._attached is None:
            await self.aattach()
            return
        started = self._reload_from()
        if started is None:
            return
        store, journal = started
        try:
            shared = await self._aitems(store, self._namespace(None))
            stored = {
                s: await self._aitems(store, self._namespace(s)) for s in self._scopes_of(store)
            }
            ops, read = self._reload(store, journal, shared, stored)
        finally:
            self._end_journal(journal)
        await self._abound(store, ops, read)

    def _reload_from(self) -> tuple[BaseStore, list[_Change]] | None:
        """The attached store and a journal of this process's changes, started; None when
        nothing is attached or a refresh is under way."""
        with self._attach_lock:
            if self._attached is None or self._journal is not None:
                return None
            self._journal = []
            return self._attached, self._journal

    def _end_journal(self, journal: list[_Change]) -> None:
        with self._attach_lock:
            if self._journal is journal:
                self._journal = None

    def _scopes_of(self, store: BaseStore) -> list[str]:
        """The scopes held in memory that were loaded from ``store``."""
        with self._attach_lock:
            return [scope for scope, where in self._loaded.items() if where is store]

    def _reload(
        self,
        store: BaseStore,
        journal: list[_Change],
        shared: list[Any],
        stored: dict[str, list[Any]],
    ) -> tuple[list[PutOp], list[Any]]:
        """Swap in histories built from the store's rows, with the journal's changes replayed;
        the store ops that bound them, and every row read (for :meth:`_bound`)."""
        read = [*shared, *(item for items in stored.values() for item in items)]
        history, ops = self._merged((), None, self._records(shared, self._namespace(None), True))
        fresh: dict[str, UsageIndex] = {}
        for scope, items in stored.items():
            rows = self._records(items, self._namespace(scope), False, scope)
            fresh[scope], scope_ops = self._merged((), scope, rows)
            ops += scope_ops
        with self._attach_lock:
            self._end_journal(journal)
            if self._attached is not store:  # another store meanwhile: this read is stale
                return [], read
            for change in journal:
                if change[0] == "forget":
                    for target in (history, *fresh.values()):
                        target.forget(change[1])
                elif change[1] is None:
                    history.insert(change[2])
                elif change[1] in fresh:
                    fresh[change[1]].insert(change[2])
            self.history = history
            for scope, scoped in fresh.items():
                if scope in self._scopes:  # in place: the least recently used order is kept
                    self._set_scope(scope, scoped, used=False)
            self._evict()
        return ops, read

    def _note(self, change: _Change) -> None:
        """Journal a change made while a refresh reads the store (call under the lock)."""
        if self._journal is not None:
            self._journal.append(change)

    def _history(self, scope: str) -> UsageIndex:
        """The in-memory history of ``scope`` (made if new; the most recently used one)."""
        with self._attach_lock:
            history = self._scopes.get(scope)
            if history is None or history is self._empty:
                history = self._scopes[scope] = self._new_history()
            self._scopes.move_to_end(scope)
            self._evict()
            return history

    def _set_scope(self, scope: str, history: UsageIndex, *, used: bool = True) -> None:
        """Hold ``history`` as ``scope``'s (the most recently used one, if ``used``). Under
        the lock."""
        old = self._scopes.get(scope)
        self._held += len(history) - (0 if old is None else len(old))
        self._scopes[scope] = history if len(history) else self._empty
        if used:
            self._scopes.move_to_end(scope)

    def _changed(self, scope: str | None, history: UsageIndex, before: int) -> None:
        """Count a change of ``scope``'s history that held ``before`` records. Under the lock."""
        if scope is not None and self._scopes.get(scope) is history:
            self._held += len(history) - before

    def _evict(self) -> None:
        """Drop the least recently used scopes from memory (never from the store) while more
        than :data:`MAX_SCOPES_HELD` are held, or they hold more than ``max_records``; the
        most recent one stays. Under the lock. O(1) a scope dropped: the records held are
        counted as they change (:meth:`_set_scope`, :meth:`_changed`)."""
        while len(self._scopes) > 1 and (
            len(self._scopes) > MAX_SCOPES_HELD or self._held > self._bounds[3]
        ):
            dropped, old = self._scopes.popitem(last=False)
            self._held -= len(old)
            self._loaded.pop(dropped, None)

    # --- recording ----------------------------------------------------------------------------

    def _checked(self, tool_names: Iterable[str]) -> None:
        if self.catalog is None:
            return
        unknown = [n for n in tool_names if n not in self.catalog]
        if unknown:
            raise ValueError(UNKNOWN_TOOLS_ERROR.format(names=clip_names(unknown)))

    def _changes(
        self, scope: str | None, query: str, tool_names: Sequence[str], **record: Any
    ) -> tuple[list[PutOp], int]:
        """Add a record to ``scope``'s history (None: the shared one); the store ops, and the
        write's number for :meth:`_write`."""
        with self._attach_lock:
            history = self.history if scope is None else self._history(scope)
            before = len(history)
            added, evicted = history.add(query, tool_names, **record)
            self._changed(scope, history, before)
            self._note(("add", scope, added))
            ops = [self._delete(scope, r) for r in evicted] + [self._put(scope, r) for r in added]
            since = self._begin_write(ops)
        return ops, since

    def _begin_write(self, ops: list[PutOp], since: int | None = None) -> int:
        """The store ops of records just added in memory, to be written by a new write (or by
        write ``since``: an import's next scope). Under the lock. Returns the write's number:
        the forgets made before it began."""
        if self._forgets:  # a write under way began before a forget: see _end_write
            for op in ops:
                self._rewritten[(op.namespace, op.key)] = (self._forgot, op)
        if since is None:
            since = self._forgot
            self._writing[since] += 1
        return since

    def _end_write(self, since: int, ops: list[PutOp]) -> list[PutOp]:
        """A write ends: the store ops that take back its rows a forget made since ``since``
        covers. That forget dropped the records from memory after they were added, and read
        the store before they were in it: without a delete the row would stay in the store,
        and come back at the next refresh. But a row written again after that forget (the
        same tool and message recorded anew, or an import's later scope) keeps what that last
        write wrote: its op is applied again, whichever write the store applied last."""
        late: list[PutOp] = []
        with self._attach_lock:
            self._writing[since] -= 1
            if not self._writing[since]:
                del self._writing[since]
            for op in ops:
                if op.value is None:
                    continue
                tool = op.value.get("tool")
                covering = [
                    n
                    for n, names in self._forgets.items()
                    if n > since and (names is None or tool in names)
                ]
                if not covering:
                    continue
                newer = self._rewritten.get((op.namespace, op.key))
                if newer is None or newer[0] < max(covering):
                    late.append(PutOp(op.namespace, op.key, None))
                elif newer[1] is not op:
                    late.append(newer[1])
            oldest = min(self._writing, default=self._forgot)
            self._forgets = {n: v for n, v in self._forgets.items() if n > oldest}
            self._rewritten = {k: v for k, v in self._rewritten.items() if v[0] > oldest}
        return late

    def _write(self, store: BaseStore | None, ops: list[PutOp], since: int) -> None:
        """Write the ops of records added in memory (write number ``since``), then the late
        ops of the forgets made meanwhile (see :meth:`_end_write`)."""
        try:
            _batch(store, ops)
        finally:
            late = self._end_write(since, ops)
        _batch(store, late)

    async def _awrite(self, store: BaseStore | None, ops: list[PutOp], since: int) -> None:
        """Async :meth:`_write`."""
        try:
            await _abatch(store, ops)
        finally:
            late = self._end_write(since, ops)
        await _abatch(store, late)

    @_sync_store_call("arecord")
    def record(
        self, query: str, tool_names: Sequence[str], *, thread_id: str | None = None
    ) -> None:
        """Record, as the operator, that ``tool_names`` served the user's message ``query``:
        a trusted record, shared by every scope.

        Args:
            query: the user's message (stored trimmed, at most 2,000 characters).
            tool_names: the tools that ran successfully for it.
            thread_id: the conversation, for the per-thread bound.

        Raises:
            TypeError: ``query`` is not a string or ``tool_names`` not a list of names.
            ValueError: a name that is no tool name, or (with ``catalog=``) not a tool of it.
        """
        names = check_record_args(query, tool_names)
        self._checked(names)
        self.attach()
        thread = None if thread_id is None else bounded_id(str(thread_id))
        self._write(self._attached, *self._changes(None, query, names, thread=thread))

    async def arecord(
        self, query: str, tool_names: Sequence[str], *, thread_id: str | None = None
    ) -> None:
        """Async :meth:`record`."""
        names = check_record_args(query, tool_names)
        self._checked(names)
        await self.aattach()
        thread = None if thread_id is None else bounded_id(str(thread_id))
        await self._awrite(self._attached, *self._changes(None, query, names, thread=thread))

    @staticmethod
    def opted_out(config: RunnableConfig | None) -> bool:
        """True when the run's ``configurable`` turns recording off (``OPT_OUT_KEY``: False);
        a value that is not a bool raises ``TypeError`` (see :func:`records_usage`)."""
        return not records_usage(config)

    def _observed(
        self,
        query: str,
        tool_names: Sequence[str],
        config: RunnableConfig,
        loaded: Collection[str],
    ) -> tuple[list[PutOp], int] | None:
        """The store ops and the write's number of an observed record (see :meth:`_changes`),
        or None when nothing is kept."""
        scope = scope_key(self.scope, config)
        names = [n for n in dict.fromkeys(tool_names) if isinstance(n, str) and is_tool_name(n)]
        if scope is None or not query or not names:
            return None
        configurable = config.get("configurable") or {}
        thread = configurable.get("thread_id")
        user = None
        if self.scope != "user":  # a user corroborates, not each of their threads
            user = configurable.get("langgraph_auth_user_id") or configurable.get("user_id")
        record = {
            "thread": None if thread is None else bounded_id(str(thread)),
            "trusted": False,
            "user": None if user in (None, "") else bounded_id(str(user)),
            "loaded": loaded,
        }
        return self._changes(scope, query, names, **record)

    @_sync_store_call("arecord_run")
    def record_run(
        self,
        query: str,
        tool_names: Sequence[str],
        config: RunnableConfig,
        *,
        loaded: Collection[str] = (),
    ) -> None:
        """What the nodes call after a batch: record unless the run opted out. An observed
        record, in the run's scope; ``loaded``: the tools the model loaded itself outside the
        categories chosen for the request (kept, never ranked)."""
        if self.opted_out(config) or not query or not tool_names:
            return
        self.attach(config)
        observed = self._observed(query, tool_names, config, loaded)
        if observed is not None:
            self._write(self._attached, *observed)

    async def arecord_run(
        self,
        query: str,
        tool_names: Sequence[str],
        config: RunnableConfig,
        *,
        loaded: Collection[str] = (),
    ) -> None:
        """Async :meth:`record_run`."""
        if self.opted_out(config) or not query or not tool_names:
            return
        await self.aattach(config)
        observed = self._observed(query, tool_names, config, loaded)
        if observed is not None:
            await self._awrite(self._attached, *observed)

    # --- forget, export, import ---------------------------------------------------------------

    def _histories(self) -> list[tuple[str | None, UsageIndex]]:
        with self._attach_lock:
            return [(None, self.history), *self._scopes.items()]

    def _forget_in_memory(self, tool_names: Iterable[str] | None) -> tuple[set[str] | None, int]:
        """Drop ``tool_names``' records (None: all) from every history in memory; the names
        (checked) and how many pairs were dropped. A write under way learns of the forget."""
        names = None if tool_names is None else set(check_record_args("", tool_names))
        with self._attach_lock:
            dropped = 0
            for scope, history in self._histories():
                before = len(history)
                dropped += len(history.forget(names))
                self._changed(scope, history, before)
            self._note(("forget", names))
            self._forgot += 1
            if self._writing:  # a write of records added before now checks against it
                self._forgets[self._forgot] = names
        return names, dropped

    @_sync_store_call("aforget")
    def forget(self, tool_names: Iterable[str] | None = None) -> int:
        """Drop the history of ``tool_names`` (``None``: all of it), in memory and in the
        store, in every scope; :meth:`aforget` in async code.

        Every row of those tools that is in the store when it returns is deleted, whatever
        other workers write meanwhile; a record this worker added in memory before the forget
        and was still writing to the store is taken out of the store again once written, unless
        this worker recorded it anew after the forget (then the newer record stays).

        Returns:
            How many (tool, message) pairs were dropped from memory.

        Raises:
            TypeError: ``tool_names`` is a string or holds non-strings (a list is expected).
            asyncio.InvalidStateError: called in the event loop of an async store
                (``AsyncSqliteStore``, ``AsyncPostgresStore``): use :meth:`aforget` there.
        """
        names, dropped = self._forget_in_memory(tool_names)
        store = self._attached or self.store
        if store is not None:
            for where in _tool_filters(names):
                # Each page read is deleted before the next is read, from the first: paging
                # by offset skipped rows that other workers' deletes moved up meanwhile.
                while True:
                    page = store.search(self.namespace, filter=where, limit=PAGE)
                    _batch(store, [op for op in _deletes(page) if not self._is_marker(op)])
                    if len(page) < PAGE:
                        break
        return dropped

    async def aforget(self, tool_names: Iterable[str] | None = None) -> int:
        """Async :meth:`forget` (``asearch``/``abatch``; a sync-only store runs in a thread).

        Example:
            ```python
            await usage.aforget(["send_email"])  # e.g. in a FastAPI handler
            ```
        """
        names, dropped = self._forget_in_memory(tool_names)
        store = self._attached or self.store
        if store is not None:
            for where in _tool_filters(names):
                while True:  # as in forget: each page deleted before the next is read
                    page = await _acall(
                        store, "asearch", "search", self.namespace, filter=where, limit=PAGE
                    )
                    await _abatch(store, [op for op in _deletes(page) if not self._is_marker(op)])
                    if len(page) < PAGE:
                        break
        return dropped

    def _export_rows(self, items: list[Any] | None) -> list[dict[str, Any]]:
        """The export of the store's ``items`` under ``namespace`` (None: of the histories in
        memory, when there is no store), oldest first."""
        rows: list[tuple[str | None, UsageRecord]] = []
        if items is None:
            rows = [(scope, r) for scope, h in self._histories() for r in h.records()]
        for i, item in enumerate(items or ()):
            ns = tuple(item.namespace)
            if self._is_marker(item):
                continue
            if ns == self._namespace(None):
                rows.append((None, _row(item.value, i, True)))
            elif ns[: len(self.namespace) + 1] == (*self.namespace, SCOPE_LABEL):
                scope = item.value.get("scope")
                record = _row(item.value, i, False, observed=True)
                rows.append((scope if isinstance(scope, str) else ns[-1], record))
        rows.sort(key=lambda sr: (sr[1].ts, sr[1].tool, sr[1].query))
        return [
            {
                **r.to_dict(),
                "scope": scope,
                **({MOVED_KEY: True} if scope is None and _is_moved(r) else {}),
            }
            for scope, r in rows
        ]

    @_sync_store_call("aexport")
    def export(self) -> list[dict[str, Any]]:
        """Every record of every scope as a JSON-ready row, oldest first (from the store when
        there is one): ``tool``, ``query``, ``thread``, ``ts``, ``trusted``, and ``scope``
        (None for yours), ``user`` and ``loaded`` when set, ``moved`` (True) on a row moved
        from the layout before scopes and not vouched for yet (:meth:`import_` keeps it);
        :meth:`aexport` in async code.

        Raises:
            asyncio.InvalidStateError: called in the event loop of an async store
                (``AsyncSqliteStore``, ``AsyncPostgresStore``): use :meth:`aexport` there.
        """
        store = self._attached or self.store
        if store is None:
            return self._export_rows(None)
        self.refresh()
        return self._export_rows(self._items(store, self.namespace))

    async def aexport(self) -> list[dict[str, Any]]:
        """Async :meth:`export` (``asearch``/``abatch``; a sync-only store runs in a thread).

        Example:
            ```python
            rows = await usage.aexport()
            await ToolUsage(store=other_store).aimport_(rows)
            ```
        """
        store = self._attached or self.store
        if store is None:
            return self._export_rows(None)
        await self.arefresh()
        return self._export_rows(await self._aitems(store, self.namespace))

    def _import_records(
        self, rows: Iterable[Mapping[str, Any]]
    ) -> tuple[dict[str | None, list[UsageRecord]], int]:
        """``rows`` checked, as records by scope (None: shared), each scope's the newest its
        history keeps, oldest first, and how many rows were read; raises before anything is
        imported."""
        if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
            raise TypeError(
                ROWS_TYPE_ERROR.format(got=f"{safe_repr(rows, 80)} ({type(rows).__name__})")
            )
        by_scope: dict[str | None, list[UsageRecord]] = {}
        checked: set[str] = set()
        for i, row in enumerate(rows):
            scope = row.get("scope") if isinstance(row, Mapping) else None
            if not isinstance(row, Mapping) or not (scope is None or isinstance(scope, str)):
                raise ValueError(BAD_ROW_ERROR.format(i=i, row=safe_repr(row)))
            # a scope's history holds observed records only (its store rows are read so)
            record = _row(row, i, True, observed=scope is not None)
            by_scope.setdefault(None if scope is None else kept_id(scope), []).append(record)
            checked.add(record.tool)
        self._checked(checked)
        # the older ones would be dropped anyway
        kept = {s: sorted(b, key=lambda r: r.ts)[-self._bounds[3] :] for s, b in by_scope.items()}
        return kept, sum(len(b) for b in by_scope.values())

    def _scope_unloaded(self, scope: str | None, store: BaseStore | None) -> RunnableConfig | None:
        """The config that loads ``scope``'s history from ``store`` before an import adds to
        it; None when it is loaded (or shared, or there is no store)."""
        if scope is None or store is None or self._loaded.get(scope) is store:
            return None
        return {"configurable": {**_scope_config(self.scope, scope)}}

    def _import_batch(
        self, scope: str | None, batch: list[UsageRecord], since: int | None
    ) -> tuple[list[PutOp], int]:
        """Add an import's records to ``scope``'s history in memory; the store ops, and the
        write's number (``since``: the import's, from its first scope). Every record of the
        import that the history keeps is written, changed or not: an import run again after a
        failed write stores what the first one could not."""
        now = time.time()
        batch = [replace(r, query=normalize_query(r.query), ts=r.ts or now) for r in batch]
        imported = {_key(r) for r in batch}
        with self._attach_lock:
            history = self.history if scope is None else self._history(scope)
            before = {_key(r): r for r in history.records()}
            history.insert(batch)
            self._changed(scope, history, len(before))
            after = {_key(r): r for r in history.records()}
            changed = [r for k, r in after.items() if before.get(k) != r]
            self._note(("add", scope, changed))
            added = [self._delete(scope, r) for k, r in before.items() if k not in after]
            written = [r for k, r in after.items() if k in imported or before.get(k) != r]
            added += [self._put(scope, r) for r in written]
            # each scope's rows with the forgets made before they were added
            since = self._begin_write(added, since)
            if scope is not None:
                self._evict()
        return added, since

    @_sync_store_call("aimport_")
    def import_(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Add exported rows (from :meth:`export`), oldest first, under this history's bounds;
        :meth:`aimport_` in async code.

        A row's ``scope`` says which history it joins. A row without one (None) joins the
        shared history as yours: trusted, unless it says ``"trusted": false``. A row with a
        scope joins that scope's history as observed, whatever its ``trusted`` says (a scope
        holds observed records only): import it without its ``scope`` to vouch for it.

        Returns:
            How many rows were read.

        Raises:
            TypeError: ``rows`` is not a list (or other iterable) of rows: one row, a string;
                nothing is imported.
            ValueError: a row without a ``tool`` and a ``query`` string, a bad field, or a
                tool name that is no tool name (or not of ``catalog``): nothing is imported.
            RuntimeError: the store did not take every row (written :data:`WRITE_CHUNK` a
                batch, the first ones may be stored): the rows are in memory; calling
                ``import_(rows)`` again once the store works writes every row again.
            asyncio.InvalidStateError: called in the event loop of an async store
                (``AsyncSqliteStore``, ``AsyncPostgresStore``): use :meth:`aimport_` there.
        """
        by_scope, read = self._import_records(rows)
        self.attach()
        store = self._attached
        ops: list[PutOp] = []
        since: int | None = None  # the write's number, from the first records added
        try:
            for scope, batch in by_scope.items():
                if (scope_config := self._scope_unloaded(scope, store)) is not None:
                    self.attach(scope_config)
                added, since = self._import_batch(scope, batch, since)
                ops += added
        except BaseException:
            if since is not None:  # nothing written: no forget to take back
                self._end_write(since, [])
            raise
        if since is not None:
            try:
                self._write(store, ops, since)
            except Exception as error:
                raise _import_failed(store, ops, error) from error
        return read

    async def aimport_(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Async :meth:`import_` (``asearch``/``abatch``; a sync-only store runs in a thread)."""
        by_scope, read = self._import_records(rows)
        await self.aattach()
        store = self._attached
        ops: list[PutOp] = []
        since: int | None = None
        try:
            for scope, batch in by_scope.items():
                if (scope_config := self._scope_unloaded(scope, store)) is not None:
                    await self.aattach(scope_config)
                added, since = self._import_batch(scope, batch, since)
                ops += added
        except BaseException:
            if since is not None:
                self._end_write(since, [])
            raise
        if since is not None:
            try:
                await self._awrite(store, ops, since)
            except Exception as error:
                raise _import_failed(store, ops, error) from error
        return read

    # --- ranking ------------------------------------------------------------------------------

    def _layers(self, config: RunnableConfig | None) -> list[UsageIndex]:
        """The histories a run ranks with: yours, and its scope's."""
        scope = scope_key(self.scope, config) if config is not None else None
        if scope is None:
            return [self.history]
        with self._attach_lock:
            history = self._scopes.get(scope)
            if history is not None:
                self._scopes.move_to_end(scope)
        return [self.history] if history is None else [self.history, history]

    def scores(
        self,
        catalog: ToolCatalog,
        query: str,
        base: np.ndarray | None = None,
        *,
        config: RunnableConfig | None = None,
    ) -> np.ndarray | None:
        """``base`` (default the lexical scores) fused with the usage scores; see ``fuse_usage``.

        Args:
            catalog: the catalog whose tools are scored.
            query: the user's message.
            base: the scores to fuse with, one per tool of ``catalog.index`` (None: the
                lexical scores).
            config: the run's config, for its scope (``user`` and ``assistant`` scopes).

        Returns:
            The fused scores, one per tool; ``base`` unchanged (``None`` stays ``None``) when
            no ranked message shares a term with ``query``, so an empty history changes
            nothing. Tools usage never promotes keep their ``base`` score.
        """
        if not query or self.weight == 0:
            return base
        layers = self._layers(config)
        versions = tuple(h.version for h in layers)  # one counter: a version names one state
        key = (id(catalog.index), query, versions, self.weight)
        last = self._last
        if last is not None and last[0] == key and last[1] is base:
            return last[2]  # the three nodes of a turn rank the same message
        fused: np.ndarray | None = fuse_usage(
            catalog.index,
            layers,
            query,
            base,
            weight=self.weight,
            allowed=promotable(catalog),
        )
        if base is None and fused is catalog.index.scores(query):
            fused = None
        self._last = (key, base, fused)
        return fused

    def popular(
        self, catalog: ToolCatalog, limit: int, config: RunnableConfig | None = None
    ) -> list[str]:
        """The selectable tools of ``catalog`` ranked most often (trusted or corroborated
        records of yours and of the run's scope; never a tool usage never promotes): the
        fallback for a request that matches nothing.

        Args:
            catalog: the catalog whose tools may be named.
            limit: how many names, at most.
            config: the run's config, for its scope.

        Returns:
            Tool names, the most used first.
        """
        allowed = promotable(catalog)
        count: dict[str, int] = {}
        for history in self._layers(config):
            for rank, name in enumerate(history.popular()):
                count[name] = min(count.get(name, rank), rank)
        names = [
            n
            for n in sorted(count, key=lambda n: (count[n], n))
            if n in catalog and catalog.selectable(n) and allowed[catalog.index.position(n)]
        ]
        return names[:limit]


def _scope_config(scope: Scope, key: str) -> dict[str, str]:
    """A ``configurable`` whose scope key (:func:`scope_key`) is ``key``."""
    if scope == "assistant":
        return {"assistant_id": key}
    if scope == "user":
        return {"langgraph_auth_user_id": key}
    return {}


def _import_failed(store: BaseStore | None, ops: Sequence[PutOp], error: Exception) -> RuntimeError:
    """The error of an import whose rows the store did not all take."""
    count = sum(op.value is not None for op in ops)
    where = "store" if store is None else type(store).__name__
    return RuntimeError(IMPORT_STORE_ERROR.format(store=where, error=safe_repr(error), count=count))


def _chunks(ops: Sequence[Op]) -> list[Sequence[Op]]:
    """``ops`` in order, at most :data:`WRITE_CHUNK` a piece: of two ops on one row, the
    later one still wins, as in one batch."""
    return [ops[i : i + WRITE_CHUNK] for i in range(0, len(ops), WRITE_CHUNK)]


def _batch(store: BaseStore | None, ops: Sequence[Op]) -> list[Any]:
    """``store.batch(ops)``, :data:`WRITE_CHUNK` ops a call; nothing to do without ops or a
    store."""
    if not ops or store is None:
        return []
    return [result for chunk in _chunks(ops) for result in store.batch(chunk)]


async def _abatch(store: BaseStore | None, ops: Sequence[Op]) -> list[Any]:
    """Async :func:`_batch` (``abatch``; a sync-only store runs in a thread)."""
    if not ops or store is None:
        return []
    results: list[Any] = []
    for chunk in _chunks(ops):
        results += await _acall(store, "abatch", "batch", chunk)
    return results


def _tool_filters(names: set[str] | None) -> list[dict[str, str] | None]:
    """The store search filters that find the rows of ``names`` (None: every row)."""
    return [None] if names is None else [{"tool": n} for n in sorted(names)]


def _deletes(items: Sequence[Any]) -> list[PutOp]:
    """The store ops that delete ``items``."""
    return [PutOp(tuple(i.namespace), i.key, None) for i in items]


async def _acall(store: BaseStore, amethod: str, method: str, *args: Any, **kwargs: Any) -> Any:
    """A store call through its async method, or in a thread when the store is sync only."""
    try:
        return await getattr(store, amethod)(*args, **kwargs)
    except NotImplementedError:  # e.g. SqliteStore: sync only
        return await asyncio.to_thread(getattr(store, method), *args, **kwargs)


# --- what the nodes record ----------------------------------------------------------------------


def check_usage_catalog(usage: Any, catalog: ToolCatalog, owner: str) -> None:
    """Refuse a ``usage`` bound to another catalog (``ToolUsage(catalog=...)``) for a node over
    ``catalog``: one whose catalog lacks a tool of ``catalog`` by name. The same catalog in
    another runtime mode, a ``with_metadata`` copy or a catalog of more tools has them all.

    Args:
        usage: the node's ``usage`` option (None, or a ``ToolUsage``).
        catalog: the node's catalog (in its runtime mode: the tools it may record).
        owner: who took the option, named in the error.

    Raises:
        ValueError: ``usage.catalog`` lacks some of ``catalog``'s tools (the message names
            them and the fix).
    """
    own = getattr(usage, "catalog", None)
    if not isinstance(own, ToolCatalog) or own is catalog:
        return
    missing = [n for n in catalog.tool_names if own.get(n) is None]
    if missing:
        raise ValueError(OTHER_CATALOG_ERROR.format(owner=owner, names=clip_names(missing)))


def succeeded_tools(
    calls: Sequence[ToolCall], outputs: Sequence[Any], catalog: ToolCatalog | None = None
) -> list[str]:
    """The regular tools of ``calls`` whose output is not an error, in call order.

    A refused call (unknown, not visible...) and a call that raised both get an
    error ``ToolMessage``, so neither counts. Meta-tools never count; with ``catalog``,
    only its tools do (no built-in: ``read_large_output`` is no catalog tool).
    """
    names = []
    for call, output in zip(calls, outputs, strict=True):
        if call["name"] in META_TOOL_NAMES or (catalog is not None and call["name"] not in catalog):
            continue
        items = output if isinstance(output, list) else [output]
        failed = False
        for item in items:
            messages = [item]
            if isinstance(item, Command) and isinstance(item.update, dict):
                messages = list(item.update.get("messages", []))
            failed = failed or any(
                isinstance(m, ToolMessage) and m.status == "error" for m in messages
            )
        if not failed:
            names.append(call["name"])
    return list(dict.fromkeys(names))


def self_loaded(state: Any, catalog: ToolCatalog, names: Iterable[str]) -> list[str]:
    """Of ``names``, the tools the model (or the user) loaded itself outside the categories
    chosen for the request: not in a category of the state's ``categories``, and visible for
    a reason other than the app's choice (:data:`APP_REASONS`: the budget, the automatic
    search, ``always``, pinned). Their usage is recorded, never promoted."""
    chosen = set(state_names(state, "categories"))
    reasons = state_get(state, "tool_reasons", None) or {}
    out = []
    for name in names:
        spec = catalog.get(name)
        if spec is not None and chosen.intersection(spec.categories):
            continue
        why = reasons.get(name) if isinstance(reasons, Mapping) else None
        if is_reason(why) and why["why"] in APP_REASONS:
            continue
        out.append(name)
    return out


def _batch_record(
    state: Any, names: Sequence[str], catalog: ToolCatalog | None, messages_key: str
) -> tuple[str, list[str]]:
    """The latest user message, and those of ``names`` the model loaded itself."""
    loaded = self_loaded(state, catalog, names) if catalog is not None else []
    return latest_user_text(state_messages(state, messages_key)), loaded


RECORD_FAILED_LOG = (
    "usage history: recording %s failed (%s); the turn goes on without it: the store could "
    "not be read or written (a record made in memory before the write failed ranks in this "
    "worker until its next refresh(), and is not written again)"
)
LOAD_FAILED_LOG = (
    "usage history: the store could not be read (%s); ranking without usage this turn (it is "
    "read again at the next run)"
)


@contextlib.contextmanager
def _record_failure_logged(names: Sequence[str]) -> Iterator[None]:
    """A store that fails while a batch's record is made or written is logged, not raised:
    the batch's tools already ran (a sync call inside an async store's loop is a misuse,
    raised). The record is made from the state inside it too, so a value the state's readers
    did not foresee costs the record, never the tools' results."""
    try:
        yield
    except asyncio.InvalidStateError:
        raise
    except Exception as error:  # noqa: BLE001 - a ranking hint must not end the turn
        logger.warning(RECORD_FAILED_LOG, clip_names(names), safe_repr(error))


def record_batch(
    usage: ToolUsage | None,
    state: Any,
    calls: Sequence[ToolCall],
    outputs: Sequence[Any],
    config: RunnableConfig,
    catalog: ToolCatalog | None = None,
    messages_key: str = "messages",
) -> None:
    """Record a batch's successful catalog tools against the state's latest user message.

    Called after the batch's tools ran, so a store that cannot be read or written is logged
    and the run goes on (:data:`RECORD_FAILED_LOG`): the history only reorders candidates,
    and a raise here would lose the tools' results and run them again on resume.
    """
    if usage is None:
        return
    names = succeeded_tools(calls, outputs, catalog)
    if not records_usage(config) or not names:  # a bad opt-out value raises
        return
    with _record_failure_logged(names):  # the state is read in it too: a client may write it
        query, loaded = _batch_record(state, names, catalog, messages_key)
        if query:
            usage.record_run(query, names, config, loaded=loaded)


async def arecord_batch(
    usage: ToolUsage | None,
    state: Any,
    calls: Sequence[ToolCall],
    outputs: Sequence[Any],
    config: RunnableConfig,
    catalog: ToolCatalog | None = None,
    messages_key: str = "messages",
) -> None:
    """Async :func:`record_batch`."""
    if usage is None:
        return
    names = succeeded_tools(calls, outputs, catalog)
    if not records_usage(config) or not names:  # a bad opt-out value raises
        return
    with _record_failure_logged(names):  # the state is read in it too: a client may write it
        query, loaded = _batch_record(state, names, catalog, messages_key)
        if query:
            await usage.arecord_run(query, names, config, loaded=loaded)


def usage_scores(
    usage: ToolUsage,
    catalog: ToolCatalog,
    query: str,
    base: np.ndarray | None,
    config: RunnableConfig | None,
) -> np.ndarray | None:
    """What a ranking node ranks by: the run's histories loaded (:meth:`ToolUsage.attach`),
    then ``base`` fused with them (:meth:`ToolUsage.scores`). A store that cannot be read is
    logged (:data:`LOAD_FAILED_LOG`) and ``base`` returned: the turn ranks without usage."""
    try:
        usage.attach(config)
    except asyncio.InvalidStateError:  # a sync call in an async store's loop: a misuse
        raise
    except Exception as error:  # noqa: BLE001 - a ranking hint must not end the turn
        logger.warning(LOAD_FAILED_LOG, safe_repr(error))
        return base
    return usage.scores(catalog, query, base, config=config)


async def ausage_scores(
    usage: ToolUsage,
    catalog: ToolCatalog,
    query: str,
    base: np.ndarray | None,
    config: RunnableConfig | None,
) -> np.ndarray | None:
    """Async :func:`usage_scores` (the histories loaded through the store's async API)."""
    try:
        await usage.aattach(config)
    except asyncio.InvalidStateError:  # a sync call in an async store's loop: a misuse
        raise
    except Exception as error:  # noqa: BLE001 - a ranking hint must not end the turn
        logger.warning(LOAD_FAILED_LOG, safe_repr(error))
        return base
    return usage.scores(catalog, query, base, config=config)


def record_call(
    usage: ToolUsage | None,
    state: Any,
    call: ToolCall,
    output: Any,
    config: RunnableConfig,
    catalog: ToolCatalog | None = None,
) -> None:
    """Record one executed call against the state's latest user message, if it succeeded."""
    record_batch(usage, state, [call], [output], config, catalog)


async def arecord_call(
    usage: ToolUsage | None,
    state: Any,
    call: ToolCall,
    output: Any,
    config: RunnableConfig,
    catalog: ToolCatalog | None = None,
) -> None:
    """Async :func:`record_call`."""
    await arecord_batch(usage, state, [call], [output], config, catalog)
