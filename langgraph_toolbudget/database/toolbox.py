"""``DatabaseToolbox``: SQL sources the model may search and read, never write.

Its one reason to change: how the toolbox connects to its sources and runs a query.

Read-only twice: a statement runs only after :func:`~langgraph_toolbudget.database.guard.
check_read_only` accepted it (one statement that reads), and the connection enforces it
again: SQLite is opened read-only (``mode=ro``) with an authorizer that allows reads and
nothing else (no ``ATTACH``, no ``PRAGMA``, no write, no denied function) and a progress
handler that stops it at the timeout; PostgreSQL runs each query in a ``READ ONLY``
transaction, each of its statements with the time left as its ``statement_timeout`` (one
deadline: planning, fetching, counting), through the extended protocol (one statement per
message: a second statement hidden from the check cannot run), and rolls it back.

Rows are converted one at a time as they arrive, texts cut as they are decoded
(:mod:`~langgraph_toolbudget.database.values`), and capped (``max_rows``, default 200, and
``MAX_ANSWER_CHARS`` of JSON); the total is counted without fetching them (PostgreSQL moves
its server-side cursor to the end; SQLite steps through them) in the time left, else left
unknown. Schemas are read once per source and cached, refreshed on demand
(:meth:`DatabaseToolbox.refresh`); a read that found them locked by a writer is not cached.

Key Components:
    - :class:`DatabaseToolbox`: the sources, their schemas, ``search`` and ``execute``.
    - :class:`QueryResult`: a query's columns, rows (capped) and total.
    - :class:`SqlError`: a refused or failed query (its message is for the model).
    - :class:`QueryStop`: stops a query running in another thread (a cancelled async run).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph_toolbudget.core.limits import clip, safe_repr
from langgraph_toolbudget.core.option_checks import check_count, check_seconds
from langgraph_toolbudget.database.guard import (
    Dialect,
    ReadOnlyCheck,
    check_read_only,
    denied_function,
)
from langgraph_toolbudget.database.schemas import TableIndex, TableSchema, reflect_tables
from langgraph_toolbudget.database.values import (
    MAX_ANSWER_CHARS,
    AnswerRows,
    cut_text,
    json_document,
    sqlite_text,
)

__all__ = [
    "DATABASE_MISSING_ERROR",
    "DatabaseToolbox",
    "QueryResult",
    "QueryStop",
    "SqlError",
]

logger = logging.getLogger(__name__)

MESSAGE_CHARS = 300
"""The database's own error message is cut at this many characters: it may quote the model's
SQL whole (``no such column: <a name of 60,000 characters>``)."""

DATABASE_MISSING_ERROR = (
    "DatabaseToolbox needs SQLAlchemy and sqlglot: pip install 'langgraph-toolbudget[database]'"
    " (PostgreSQL sources also need psycopg: pip install 'psycopg[binary]')."
)
BAD_SOURCES_ERROR = (
    "DatabaseToolbox(sources) needs a mapping of source name -> SQLAlchemy URL, e.g. "
    "{{'shop': 'sqlite:///shop.db', 'crm': 'postgresql+psycopg://user@host/crm'}}; got {value}."
)
BAD_URL_ERROR = "DatabaseToolbox: source {name!r} has URL {url!r}, which {problem}."
NO_SUCH_SOURCE_ERROR = "DatabaseToolbox has no source {source!r}; its sources are {known}."
UNKNOWN_SOURCE_ERROR = (
    "Error: there is no database source {source}. The sources are: {known}. Call "
    "execute_sql again with one of them{hint}."
)
SOURCES_HINT = " (search_schemas finds the tables of each)"
DOWN_ERROR = (
    "Error: database source {source!r} cannot be reached ({error}). Try another source "
    "({known}), or tell the user the database is unavailable."
)
BUSY_ERROR = (
    "Error: database source {source!r} could not run the query now ({error}): it is busy or "
    "short of resources, not a fault of the SQL. Call execute_sql again in a moment (asking "
    "for less helps: a WHERE, a LIMIT); if it keeps failing, tell the user the database is busy."
)
BUSY_SCHEMAS = "busy: {error}; its schemas are read again at the next search"
BUSY_RECHECK_S = 1.0
"""A source whose schemas were locked by a writer is read again at the first use after this
many seconds (not sooner: each read may wait ``timeout_s`` for the lock)."""
NO_PARAMETERS_HINT = (
    " (execute_sql takes no parameters: write each value into the statement itself)"
)
TIMEOUT_ERROR = (
    "Error: the query ran longer than {timeout:g} s and was stopped (DatabaseToolbox "
    "timeout_s). Make it cheaper: filter with WHERE, aggregate, or add a LIMIT."
)
STOPPED_ERROR = "Error: the query was stopped (its run was cancelled)."
CANCEL_TIMEOUT_S = 5.0
"""Seconds a PostgreSQL cancel request may take to reach the server (psycopg's default: 30)."""
CANCEL_AGAIN_S = 0.25
"""Seconds between a stopped query's cancel requests, sent until the query ends."""
DATABASE_ERROR = (
    "Error: the database ({dialect}) rejected the query: {message}\nFix the SQL and call "
    "execute_sql again{hint}."
)
TABLES_HINT = " (search_schemas shows the tables and columns)"
UNCHECKABLE_ERROR = (
    "Refused: the statement could not be checked as read-only ({reason}), so nothing ran. "
    "Write it as a plain SELECT (or WITH ... SELECT)."
)
UNSENDABLE_ERROR = (
    "Error: the SQL holds {what} at character {position}, which is not text a database "
    "accepts, so nothing ran. Send the statement again without it."
)
SQLITE_TOO_LONG_ERROR = (
    "Error: the query reads or builds {what} longer than SQLite allows in execute_sql "
    "({limit:,}), a bound that keeps one function call within the timeout, so it stopped. "
    "Leave such values out (other columns, a WHERE that skips them) or build shorter ones."
)
SECOND_WALL_ERROR = (
    "Refused: the database itself refused a write or a setting change ({message}); "
    "execute_sql only reads. Send one SELECT that reads the data you need."
)
SQLITE_MAX_LENGTH = 100_000
"""SQLite's longest string or blob in a query, stored or built (``SQLITE_LIMIT_LENGTH``).

The progress handler stops a query between two steps, never inside one function call, and
some calls take time in the square of their arguments' length: ``trim(x, chars)``,
``instr``, ``replace``, ``json_patch``. At 100,000 bytes the slowest found, ``trim`` of
100,000 characters by 8,000 (its longest set at this limit), takes about 3 s; at the
former 10,000,000, ``instr`` alone took hours. A stored value longer than this cannot be
read (nor a text's ``length()``): the query fails with :data:`SQLITE_TOO_LONG_ERROR`."""
SQLITE_MAX_LIKE_PATTERN = 10_000
"""SQLite's longest ``LIKE``/``GLOB`` pattern (``SQLITE_LIMIT_LIKE_PATTERN_LENGTH``, 50,000 by
default): matching takes the text's length times the pattern's, 100,000 x 10,000 about 2 s."""
PROGRESS_STEPS = 1000
"""SQLite virtual-machine steps between two looks at the clock."""


class SqlError(Exception):
    """A query that was refused or failed; ``str(error)`` is the message for the model.

    Attributes:
        refused: the query was refused (not a read), as opposed to failing.
        without_schemas: the message without its advice to call ``search_schemas``, for
            an app that turned that built-in off (None: the message gives no such advice).
    """

    def __init__(
        self, message: str, *, refused: bool = False, without_schemas: str | None = None
    ) -> None:
        super().__init__(message)
        self.refused = refused
        self.without_schemas = without_schemas

    def message(self, *, schemas: bool = True) -> str:
        """The message for the model; with ``schemas`` False, one that does not name
        ``search_schemas`` (the model does not have it)."""
        if schemas or self.without_schemas is None:
            return str(self)
        return self.without_schemas


def _advising_schemas(template: str, hint: str, **values: Any) -> SqlError:
    """An :class:`SqlError` from ``template``, whose ``{hint}`` is ``hint`` (advice naming
    ``search_schemas``) in the message and nothing in its ``without_schemas``."""
    return SqlError(
        template.format(hint=hint, **values), without_schemas=template.format(hint="", **values)
    )


@dataclass(frozen=True)
class QueryResult:
    """One query's answer.

    Attributes:
        source: the source it ran on.
        columns: the column names (a name that repeats suffixed: ``id``, ``id_2``).
        rows: the first rows, as ``{column: value}`` (JSON-safe values): at most
            ``max_rows``, and no more than ``MAX_ANSWER_CHARS`` characters of JSON.
        total_rows: how many rows the query returns in all (None: not counted in time).
        max_rows: the cap in force.
    """

    source: str
    columns: list[str]
    rows: list[dict[str, Any]]
    total_rows: int | None
    max_rows: int

    def as_dict(self) -> dict[str, Any]:
        """The answer as the model reads it."""
        out: dict[str, Any] = {
            "source": self.source,
            "columns": self.columns,
            "rows": self.rows,
            "row_count": len(self.rows),
            "total_rows": self.total_rows,
        }
        if self.total_rows is None or self.total_rows > len(self.rows):
            total = "more" if self.total_rows is None else f"{self.total_rows:,}"
            out["note"] = (
                f"showing the first {len(self.rows):,} of {total} rows (max_rows "
                f"{self.max_rows}, at most {MAX_ANSWER_CHARS:,} characters); aggregate, "
                "filter, select fewer columns or add a LIMIT to see what you need"
            )
        return out


def _require() -> None:
    import importlib.util

    if (
        importlib.util.find_spec("sqlalchemy") is None
        or importlib.util.find_spec("sqlglot") is None
    ):
        raise ImportError(DATABASE_MISSING_ERROR)


_SQLITE_ALLOWED = {sqlite3.SQLITE_READ, sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION}
if hasattr(sqlite3, "SQLITE_RECURSIVE"):
    _SQLITE_ALLOWED.add(sqlite3.SQLITE_RECURSIVE)


def _sqlite_authorizer(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    """Reads only: no write, schema change, ``PRAGMA``, ``ATTACH``, transaction or denied
    function passes, whatever the text looked like."""
    if action == sqlite3.SQLITE_FUNCTION and denied_function(str(arg2 or ""), "sqlite"):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _SQLITE_ALLOWED else sqlite3.SQLITE_DENY


@dataclass
class _Source:
    """One source: its URL, dialect, schema engine and cached tables."""

    name: str
    url: Any  # sqlalchemy URL
    dialect: Dialect
    path: Path | None = None
    engine: Any = None
    checked: bool = False
    error: str | None = None
    busy_until: float | None = None  # its schemas were locked: read again from this time on
    tables: list[TableSchema] = field(default_factory=list)


class DatabaseToolbox:
    """SQL sources for the built-ins ``search_schemas`` and ``execute_sql`` (read-only).

    Pass it as ``database_toolbox=`` (a ``BudgetConfig`` option): the prebuilt agent, the
    nodes and ``ToolBudgetMiddleware`` then offer the two tools while at least one source
    connects (``enabled_builtins`` can still turn either off).

    Args:
        sources: source name -> SQLAlchemy URL. SQLite (``sqlite:///shop.db``, a file,
            opened read-only) and PostgreSQL (``postgresql://`` or
            ``postgresql+psycopg://``, through psycopg 3).
        max_rows: rows a query returns at most (the total is counted and reported).
        timeout_s: seconds a query may run, from its start to its last row counted (on
            PostgreSQL, once connected: each statement's ``statement_timeout`` is the time
            left; SQLite's progress handler).
        connect_timeout_s: seconds to wait for a PostgreSQL server.

    Raises:
        ImportError: SQLAlchemy or sqlglot is missing (the message names the extra).
        TypeError: ``sources`` is not a mapping of names to URL strings; ``max_rows`` not an
            integer, a timeout not a number (each naming the option and the value).
        ValueError: ``sources`` empty or with an empty name; a URL that cannot be read, of
            another database, or an in-memory SQLite database (empty for every connection);
            ``max_rows`` below 1, a timeout not above 0.

    Example:
        ```python
        toolbox = DatabaseToolbox({"shop": "sqlite:///shop.db"})
        agent = create_toolbudget_agent(model, catalog, database_toolbox=toolbox)
        ```
    """

    def __init__(
        self,
        sources: Mapping[str, str],
        *,
        max_rows: int = 200,
        timeout_s: float = 10.0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        _require()
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        if not isinstance(sources, Mapping):
            raise TypeError(BAD_SOURCES_ERROR.format(value=safe_repr(sources, 80)))
        if not sources:  # the right type, no source in it
            raise ValueError(BAD_SOURCES_ERROR.format(value="{}"))
        check_count("DatabaseToolbox", "max_rows", max_rows, minimum=1, unit="rows")
        check_seconds("DatabaseToolbox", "timeout_s", timeout_s)
        check_seconds("DatabaseToolbox", "connect_timeout_s", connect_timeout_s)
        self.max_rows = max_rows
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self._sources: dict[str, _Source] = {}
        for name, raw in sources.items():
            if not isinstance(name, str) or not isinstance(raw, str):
                raise TypeError(BAD_SOURCES_ERROR.format(value=f"{name!r}: {raw!r}"))
            if not name:
                raise ValueError(BAD_SOURCES_ERROR.format(value=f"{name!r}: {raw!r}"))
            try:
                url = make_url(raw)
            except ArgumentError as exc:
                problem = f"is not a SQLAlchemy URL ({exc})"
                raise ValueError(
                    BAD_URL_ERROR.format(name=name, url=raw, problem=problem)
                ) from None
            self._sources[name] = self._source(name, raw, url)
        self._lock = threading.Lock()
        self._index: TableIndex | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> DatabaseToolbox:
        """This same object: a toolbox is shared by design (a deep copy of a
        ``BudgetConfig``, a node or a graph queries the same sources), and its lock cannot be
        copied."""
        return self

    @staticmethod
    def _source(name: str, raw: str, url: Any) -> _Source:
        backend = url.get_backend_name()
        if backend == "sqlite":
            database = url.database or ""
            if database in ("", ":memory:") or database.startswith("file::memory:"):
                problem = (
                    "is an in-memory SQLite database (empty for every connection): give a file"
                )
                raise ValueError(BAD_URL_ERROR.format(name=name, url=raw, problem=problem))
            return _Source(name, url, "sqlite", path=Path(database).expanduser().resolve())
        if backend == "postgresql":
            explicit = url.get_driver_name() if "+" in url.drivername else "psycopg"
            if explicit != "psycopg":
                problem = (
                    "names a PostgreSQL driver other than psycopg 3: use postgresql+psycopg://"
                )
                raise ValueError(BAD_URL_ERROR.format(name=name, url=raw, problem=problem))
            return _Source(name, url.set(drivername="postgresql+psycopg"), "postgres")
        problem = f"is a {backend} database; the toolbox reads SQLite and PostgreSQL sources"
        raise ValueError(BAD_URL_ERROR.format(name=name, url=raw, problem=problem))

    def __repr__(self) -> str:
        return f"DatabaseToolbox({sorted(self._sources)}, max_rows={self.max_rows})"

    # --- sources and schemas ------------------------------------------------------------------

    @property
    def source_names(self) -> list[str]:
        """Every source's name, in the order given."""
        return list(self._sources)

    def quoted_names(self, but: str | None = None) -> str:
        """Every source's name but ``but``, quoted and joined with commas, for messages
        (``'shop', 'hr'``)."""
        return ", ".join(repr(n) for n in self._sources if n != but)

    def dialect(self, source: str) -> Dialect:
        """The SQL dialect of ``source`` (``"sqlite"`` or ``"postgres"``).

        Raises:
            KeyError: an unknown source name (the message lists the sources).
        """
        return self._named(source).dialect

    def _named(self, source: str) -> _Source:
        """The source called ``source``; a ``KeyError`` naming the sources if none is."""
        found = self._sources.get(source) if isinstance(source, str) else None
        if found is None:
            raise KeyError(NO_SUCH_SOURCE_ERROR.format(source=source, known=sorted(self._sources)))
        return found

    def _engine(self, src: _Source) -> Any:
        """The engine that reads ``src``'s schemas (read-only, no authorizer: it sends
        the toolbox's own reflection queries, never the model's)."""
        if src.engine is None:
            from sqlalchemy import create_engine

            if src.dialect == "sqlite":
                from sqlalchemy.pool import NullPool

                path = src.path
                assert path is not None
                src.engine = create_engine(
                    "sqlite://",
                    creator=lambda: _sqlite_connect(path, None, self.timeout_s),
                    poolclass=NullPool,
                )
            else:
                timeout = max(1, math.ceil(self.connect_timeout_s))
                src.engine = create_engine(
                    src.url, connect_args={"connect_timeout": timeout}, pool_pre_ping=True
                )
        return src.engine

    def _check(self, src: _Source) -> None:
        """Read ``src``'s schemas (once); a failure, whatever it is, marks the source down
        with the reason (an unforeseen one is logged): the other sources stay searchable."""
        from sqlalchemy.exc import SQLAlchemyError

        src.checked, src.busy_until = True, None
        try:
            src.tables = reflect_tables(self._engine(src), src.name)
            src.error = None
        except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
            src.tables, src.error = [], _short_error(exc)
            if _schema_fault(exc) == "busy":  # a writer's lock, not a fault: not cached
                src.error = BUSY_SCHEMAS.format(error=src.error)
                src.busy_until = time.monotonic() + BUSY_RECHECK_S
        except Exception as exc:  # noqa: BLE001 - a schema SQLAlchemy cannot read: only this source is down
            logger.exception("reading the schemas of database source %r raised", src.name)
            src.tables, src.error = [], f"{type(exc).__name__}: {_short_error(exc)}"

    def _ready(self) -> list[_Source]:
        with self._lock:
            now = time.monotonic()
            unchecked = [
                s
                for s in self._sources.values()
                if not s.checked or (s.busy_until is not None and now >= s.busy_until)
            ]
            for src in unchecked:
                self._check(src)
            if unchecked or self._index is None:
                tables = [t for s in self._sources.values() for t in s.tables]
                self._index = TableIndex(tables)
            return [s for s in self._sources.values() if s.error is None]

    def available_sources(self) -> list[str]:
        """The sources that connected and whose schemas were read (checked once each, on
        first use; :meth:`refresh` checks again)."""
        return [s.name for s in self._ready()]

    def reachable_sources(self) -> list[str]:
        """The sources that are available, and those that connect but whose schemas were
        locked by a writer when last read (read again at next use, after a second): the
        sources the tools name."""
        up = {s.name for s in self._ready()}
        return [s.name for s in self._sources.values() if s.name in up or s.busy_until is not None]

    def down_sources(self) -> dict[str, str]:
        """Source name -> why it could not be read, for the sources that are down (or whose
        schemas were locked when last read)."""
        self._ready()
        return {s.name: str(s.error) for s in self._sources.values() if s.error is not None}

    def refresh(self, source: str | None = None) -> None:
        """Read the schemas again (of ``source``, or of every source) on next use; a
        source that was down is tried again.

        Raises:
            KeyError: an unknown source name (the message lists the sources).
        """
        with self._lock:
            targets = [self._named(source)] if source is not None else self._sources.values()
            for src in targets:
                src.checked = False
            self._index = None

    def tables(self, source: str | None = None) -> list[TableSchema]:
        """The tables and views of ``source`` (or of every source that is up).

        Raises:
            KeyError: an unknown source name (the message lists the sources).
        """
        if source is not None:
            self._named(source)
        return [t for s in self._ready() for t in s.tables if source in (None, s.name)]

    def search(
        self,
        query: str,
        *,
        limit: int = 5,
        source: str | None = None,
        embeddings: Any = None,
    ) -> list[TableSchema]:
        """The tables most relevant to ``query`` across the sources, best first.

        Args:
            query: a question in words ("money spent by customers").
            limit: at most this many tables.
            source: only this source's tables.
            embeddings: a LangChain ``Embeddings``, fused with the lexical ranking.

        Returns:
            The tables, best first.

        Raises:
            KeyError: an unknown ``source`` (the message lists the sources).
        """
        if source is not None:
            self._named(source)
        self._ready()
        index = self._index
        assert index is not None
        return index.rank(query, limit=limit, source=source, embeddings=embeddings)

    def close(self) -> None:
        """Close the sources' connection pools."""
        with self._lock:
            for src in self._sources.values():
                if src.engine is not None:
                    src.engine.dispose()
                    src.engine = None

    # --- queries ------------------------------------------------------------------------------

    def execute(self, source: str, sql: str, *, stop: QueryStop | None = None) -> QueryResult:
        """Run one read-only statement on ``source``.

        Args:
            source: the source's name.
            sql: one statement that only reads.
            stop: set from another thread, it stops the query at once (the database
                cancels it); the async ``execute_sql`` sets it when its run is cancelled,
                so the query does not run on in its thread until the timeout.

        Raises:
            SqlError: an unknown source, a statement that does not only read (``refused``),
                the timeout, a source that is down, one that is busy (a lock, too many
                connections: call again), or the database's own error on the SQL; told
                apart by SQLSTATE (PostgreSQL) or error code (SQLite), not by the driver's
                exception class; the message says which, for the model.
        """
        src = self._sources.get(source) if isinstance(source, str) else None
        if src is None:
            shown = safe_repr(source)  # what the model sent: any size or type
            known = self.quoted_names()
            raise _advising_schemas(UNKNOWN_SOURCE_ERROR, SOURCES_HINT, source=shown, known=known)
        unsendable = _unsendable(sql) if isinstance(sql, str) else None
        if unsendable is not None:
            raise SqlError(unsendable)
        check = check_read_only(sql, src.dialect)
        if not check.ok and not check.ask_database:
            raise SqlError(check.reason, refused=True)
        try:
            if src.dialect == "sqlite":
                return self._sqlite(src, sql, check, stop)
            return self._postgres(src, sql, check, stop)
        except SqlError:
            if stop is not None and stop.is_set():  # not the timeout, nor the SQL's fault
                raise SqlError(STOPPED_ERROR) from None
            raise

    def _down(self, src: _Source, exc: BaseException) -> SqlError:
        others = self.quoted_names(but=src.name) or "none"
        return SqlError(DOWN_ERROR.format(source=src.name, error=_short_error(exc), known=others))

    def _timeout(self) -> SqlError:
        return SqlError(TIMEOUT_ERROR.format(timeout=self.timeout_s))

    def _sqlite(
        self, src: _Source, sql: str, check: ReadOnlyCheck, stop: QueryStop | None = None
    ) -> QueryResult:
        assert src.path is not None
        progress = _SqliteProgress(time.monotonic() + self.timeout_s, stop)
        try:
            conn = _sqlite_connect(src.path, progress, self.timeout_s)
        except sqlite3.Error as exc:
            raise self._down(src, exc) from None
        with contextlib.closing(conn):
            if check.ask_database:  # compile it only (EXPLAIN runs nothing): the database's error
                try:
                    conn.execute("EXPLAIN " + sql)
                except sqlite3.Error as exc:
                    progress.raise_caught()
                    raise self._sqlite_error(src, exc) from None
                raise SqlError(UNCHECKABLE_ERROR.format(reason=check.reason), refused=True)
            try:
                cursor = conn.execute(sql)
                answer = AnswerRows([d[0] for d in cursor.description or ()], self.max_rows)
                for row in cursor:
                    answer.add(row)
                    if answer.full:
                        break
                total: int | None = answer.seen
                if answer.full:
                    try:
                        for _ in cursor:
                            total = (total or 0) + 1
                    except sqlite3.OperationalError:  # out of time while counting
                        progress.raise_caught()
                        total = None
            except sqlite3.Error as exc:
                progress.raise_caught()
                raise self._sqlite_error(src, exc) from None
            return QueryResult(src.name, answer.columns, answer.rows, total, self.max_rows)

    def _busy(self, src: _Source, exc: BaseException) -> SqlError:
        return SqlError(BUSY_ERROR.format(source=src.name, error=_short_error(exc)))

    def _sqlite_error(self, src: _Source, exc: sqlite3.Error) -> SqlError:
        message = str(exc)
        if message == "interrupted":
            return self._timeout()
        fault = _sqlite_fault(exc)
        if fault == "busy":  # a writer holds the lock past timeout_s: the SQL is fine
            return self._busy(src, exc)
        if fault == "down":  # the file went away, is damaged, or is no database
            return self._down(src, exc)
        if "not authorized" in message or "readonly" in message or "read-only" in message:
            shown = clip(message, MESSAGE_CHARS)
            return SqlError(SECOND_WALL_ERROR.format(message=shown), refused=True)
        if message == "string or blob too big":
            what, limit = "a string or blob (bytes)", SQLITE_MAX_LENGTH
            return SqlError(SQLITE_TOO_LONG_ERROR.format(what=what, limit=limit))
        if message == "LIKE or GLOB pattern too complex":
            what, limit = "a LIKE or GLOB pattern (characters)", SQLITE_MAX_LIKE_PATTERN
            return SqlError(SQLITE_TOO_LONG_ERROR.format(what=what, limit=limit))
        shown = clip(message, MESSAGE_CHARS)
        return _advising_schemas(DATABASE_ERROR, TABLES_HINT, dialect="SQLite", message=shown)

    def _postgres(
        self, src: _Source, sql: str, check: ReadOnlyCheck, stop: QueryStop | None = None
    ) -> QueryResult:
        import psycopg
        from sqlalchemy.exc import SQLAlchemyError

        try:
            raw = self._engine(src).raw_connection()
        except (SQLAlchemyError, psycopg.Error, OSError) as exc:
            raise self._down(src, exc) from None
        deadline = time.monotonic() + self.timeout_s  # one for every statement of the query
        try:
            conn: Any = raw.driver_connection
            cancel = functools.partial(conn.cancel_safe, timeout=CANCEL_TIMEOUT_S)
            with _cancelled_by(stop, cancel):
                result = self._postgres_query(src, conn, sql, check, deadline)
            if stop is not None and stop.is_set():
                # A statement its cancel request stopped may read as an answer: a count out
                # of time (MOVE) is left out, psycopg's stream drops an error after rows.
                raise SqlError(STOPPED_ERROR)
            return result
        except psycopg.errors.QueryCanceled:
            raise self._timeout() from None
        except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege) as exc:
            message = clip(_pg_message(exc), MESSAGE_CHARS)
            raise SqlError(SECOND_WALL_ERROR.format(message=message), refused=True) from None
        except psycopg.Error as exc:
            raise self._postgres_error(src, exc, raw.driver_connection) from None
        finally:
            try:
                raw.driver_connection.rollback()
            except Exception:  # noqa: BLE001 - a broken connection: the pool drops it
                raw.invalidate()
            raw.close()

    def _postgres_query(
        self, src: _Source, conn: Any, sql: str, check: ReadOnlyCheck, deadline: float
    ) -> QueryResult:
        """Run ``sql`` on ``conn`` in a read-only transaction (rolled back by the caller),
        every statement within ``deadline``."""
        from psycopg import sql as pgsql

        conn.rollback()
        with conn.cursor() as cursor:
            cursor.execute("SET TRANSACTION READ ONLY")
            if not _postgres_time_left(cursor, deadline):  # a timeout_s under 1 ms
                raise self._timeout()
        if check.ask_database:
            self._postgres_parse(conn, sql, check)
        if check.explain:
            if not sql.lstrip()[:7].upper() == "EXPLAIN":  # the plan of one statement only
                raise SqlError(UNCHECKABLE_ERROR.format(reason="not an EXPLAIN"), refused=True)
            with conn.cursor() as cursor:
                _load_cut(cursor)
                cursor.execute(sql, prepare=True)  # extended protocol: one statement
                answer = AnswerRows([d.name for d in cursor.description or ()], self.max_rows)
                for row in cursor:  # a plan: a few rows
                    answer.add(row)
            total: int | None = answer.seen
            return QueryResult(src.name, answer.columns, answer.rows, total, self.max_rows)
        name = "toolbudget_" + uuid.uuid4().hex[:12]
        fetch = pgsql.SQL("FETCH FORWARD {} FROM {}").format(
            self.max_rows + 1, pgsql.Identifier(name)
        )
        with conn.cursor(name=name) as cursor, conn.cursor() as fetcher:
            cursor.execute(sql)  # DECLARE ... CURSOR FOR, extended protocol (planned here)
            answer = AnswerRows([d.name for d in cursor.description or ()], self.max_rows)
            _load_cut(fetcher)
            if not _postgres_time_left(fetcher, deadline):
                raise self._timeout()
            rows = fetcher.stream(fetch)  # one row in memory at a time, one round trip
            with contextlib.closing(rows):  # the stream holds the connection's lock
                for row in rows:
                    answer.add(row)
                    if time.monotonic() > deadline:
                        # A FETCH's rows are gathered, then sent whatever statement_timeout
                        # says (201 rows of 10 MB: 13 s at timeout_s=5); only closing the
                        # connection stops the server.
                        conn.close()
                        break
            total = answer.seen
            if conn.closed and not answer.full:
                raise self._timeout()
            if answer.full:
                rest = None if conn.closed else self._postgres_count_rest(conn, name, deadline)
                total = None if rest is None else total + rest
        return QueryResult(src.name, answer.columns, answer.rows, total, self.max_rows)

    def _postgres_error(self, src: _Source, exc: Any, conn: Any) -> SqlError:
        """The model's message for a psycopg error: what happened, by its SQLSTATE and the
        connection (not by its class: psycopg's ``OperationalError`` holds the model's own
        ``$1`` and too many columns as well as a lost connection)."""
        broken = bool(getattr(conn, "broken", False) or getattr(conn, "closed", False))
        fault = _pg_fault(exc, broken=broken)
        if fault == "down":
            return self._down(src, exc)
        if fault == "busy":
            return self._busy(src, exc)
        message = clip(_pg_message(exc), MESSAGE_CHARS)
        if getattr(exc, "sqlstate", None) == "08P01" and "parameter" in message:
            message += NO_PARAMETERS_HINT
        return _advising_schemas(DATABASE_ERROR, TABLES_HINT, dialect="PostgreSQL", message=message)

    @staticmethod
    def _postgres_count_rest(conn: Any, cursor_name: str, deadline: float) -> int | None:
        """The rows left in the server-side cursor, counted (``MOVE FORWARD ALL``) in the time
        left before ``deadline``; None when it runs out, the transaction rolled back to
        before the count (the rows already fetched stay the answer)."""
        import psycopg
        from psycopg import sql as pgsql

        if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            # The fetch's time ran out as its last row came: psycopg's stream() drops an
            # error that follows the rows, so the rows are whole, the transaction over.
            return None
        with conn.cursor() as cursor:
            cursor.execute("SAVEPOINT toolbudget_count")
            if not _postgres_time_left(cursor, deadline):
                return None
            try:
                cursor.execute(
                    pgsql.SQL("MOVE FORWARD ALL IN {}").format(pgsql.Identifier(cursor_name))
                )
            except psycopg.errors.QueryCanceled:
                cursor.execute("ROLLBACK TO SAVEPOINT toolbudget_count")
                return None
            return max(0, cursor.rowcount)

    @staticmethod
    def _postgres_parse(conn: Any, sql: str, check: ReadOnlyCheck) -> None:
        """Parse ``sql`` on the server without running it (the protocol's Parse step):
        the server's syntax error, else a refusal (the check could not read it)."""
        import psycopg
        from psycopg import pq

        result = conn.pgconn.prepare(b"", sql.encode(conn.info.encoding or "utf-8"))
        if conn.pgconn.status != pq.ConnStatus.OK:  # the connection was lost: not the SQL's fault
            message = (conn.pgconn.error_message or b"").decode("utf-8", "replace").strip()
            raise psycopg.OperationalError(message or "the connection was lost")
        if result.status == pq.ExecStatus.FATAL_ERROR:
            message = (result.error_message or b"").decode("utf-8", "replace").strip()
            message = clip(message.removeprefix("ERROR:").strip(), MESSAGE_CHARS)
            raise _advising_schemas(
                DATABASE_ERROR, TABLES_HINT, dialect="PostgreSQL", message=message
            )
        raise SqlError(UNCHECKABLE_ERROR.format(reason=check.reason), refused=True)


class QueryStop:
    """Stops the queries that run in other threads with it, at once (SQLite stops them at
    their next steps; PostgreSQL is sent cancel requests).

    The async ``execute_sql`` runs its query in a worker thread, which a cancelled run does
    not stop: it sets its ``QueryStop`` so the query ends now, not at ``timeout_s``. Like a
    ``threading.Event``, one stop may be passed to several queries at once; :meth:`set`
    stops them all.

    Example:
        >>> stop = QueryStop()
        >>> stop.set()  # before or while DatabaseToolbox.execute(..., stop=stop) runs
        >>> stop.is_set()
        True
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._running: set[_RunningQuery] = set()

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Stop the queries now, or as soon as they start.

        Returns at once, also on an event loop: each cancel request (a new connection to
        the server, which a slow network makes slow) is sent from a thread of its own.
        """
        with self._lock:
            if self._set:
                return
            self._set = True
            running = list(self._running)
        for query in running:
            threading.Thread(
                target=query.cancel_until_ended, name="toolbudget-query-stop", daemon=True
            ).start()

    @contextlib.contextmanager
    def _cancels(self, cancel: Callable[[], object]) -> Iterator[None]:
        with self._lock:
            if self._set:  # a cancel before the query starts would cancel nothing
                raise SqlError(STOPPED_ERROR)
            query = _RunningQuery(cancel)
            self._running.add(query)
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(query)
            query.end()


class _RunningQuery:
    """One query a :class:`QueryStop` may cancel, with ``cancel`` (a PostgreSQL cancel
    request for its connection)."""

    def __init__(self, cancel: Callable[[], object]) -> None:
        self._cancel = cancel
        self._sending = threading.Lock()
        self._ended = threading.Event()

    def cancel_until_ended(self) -> None:
        """Send cancel requests until the query ends: one that reaches the server between
        two statements of the query is ignored (the session is idle), so the next statement
        would run on; the next request cancels it."""
        while True:
            with self._sending:
                if self._ended.is_set():
                    return
                _cancel_query(self._cancel)
            if self._ended.wait(CANCEL_AGAIN_S):
                return

    def end(self) -> None:
        """The query ended: no request is sent after this returns (the connection goes back
        to the pool, a later request would cancel another query)."""
        with self._sending:  # waits for a request under way
            self._ended.set()


def _cancelled_by(stop: QueryStop | None, cancel: Callable[[], object]) -> Any:
    """A context in which ``stop`` cancels the query with ``cancel`` (nothing without one)."""
    return contextlib.nullcontext() if stop is None else stop._cancels(cancel)


def _cancel_query(cancel: Callable[[], object]) -> None:
    try:
        cancel()
    except Exception:  # noqa: BLE001 - a connection closed (its query ended), a slow network
        logger.debug("cancelling a query raised", exc_info=True)


class _SqliteProgress:
    """SQLite's progress handler for one query (:attr:`check`): it stops the query at
    ``deadline``, or at once when a signal handler raised in it (Ctrl-C's
    ``KeyboardInterrupt``), whose exception :meth:`raise_caught` raises once the query stopped.

    sqlite3 discards an exception raised in its progress handler and fails the query with
    ``OperationalError('interrupted')``, which would read as the timeout: the model was told
    the query ran too long and the run went on. A function cannot catch it either, as a
    signal handler runs as the function starts, before its ``try``; a generator resumed at a
    ``yield`` inside its ``try`` can, so the handler is a generator's ``__next__``.

    Args:
        deadline: when the query is stopped, a ``time.monotonic()``.
        stop: stops the query once set.
    """

    def __init__(self, deadline: float, stop: QueryStop | None = None) -> None:
        self.caught: BaseException | None = None
        checks = self._checks(deadline, stop or QueryStop())
        next(checks)  # up to the first yield, inside the try
        self.check = checks.__next__

    def _checks(self, deadline: float, stop: QueryStop) -> Iterator[int]:
        try:
            while True:
                yield int(time.monotonic() > deadline or stop.is_set())
        except GeneratorExit:
            raise
        except BaseException as exc:  # noqa: BLE001 - raised again by raise_caught
            self.caught = exc
        while True:  # a second signal ends the generator: its StopIteration stops SQLite too
            yield 1

    def raise_caught(self) -> None:
        """Raise the exception the handler caught, if any (the query it stopped failed)."""
        if self.caught is not None:
            raise self.caught from None  # not "during handling of OperationalError"


def _sqlite_connect(
    path: Path, progress: _SqliteProgress | None, timeout_s: float
) -> sqlite3.Connection:
    """A read-only connection to ``path`` (``mode=ro``); with a ``progress`` handler, the
    model's connection: the read-only authorizer, texts cut as they are read, length limits
    and the progress handler."""
    if not path.is_file():
        raise sqlite3.OperationalError(f"unable to open database file {str(path)!r} (no such file)")
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=timeout_s)
    if progress is None:
        return conn
    conn.set_authorizer(_sqlite_authorizer)
    conn.text_factory = sqlite_text
    for limit, value in (
        (sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_LENGTH),
        (sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, SQLITE_MAX_LIKE_PATTERN),
        (sqlite3.SQLITE_LIMIT_ATTACHED, 0),
    ):
        conn.setlimit(limit, value)
    conn.set_progress_handler(progress.check, PROGRESS_STEPS)
    return conn


def _postgres_time_left(cursor: Any, deadline: float) -> bool:
    """Give the statements ``cursor`` sends next the time left before ``deadline`` (their
    ``statement_timeout``, local to the transaction); False when none is left."""
    from psycopg import sql as pgsql

    left_ms = int((deadline - time.monotonic()) * 1000)
    if left_ms < 1:  # statement_timeout = 0 would mean no timeout at all
        return False
    cursor.execute(pgsql.SQL("SET LOCAL statement_timeout = {}").format(pgsql.Literal(left_ms)))
    return True


def _load_cut(cursor: Any) -> None:
    """Have ``cursor`` load texts cut as they are decoded (one long value at a time in
    memory, never a row's worth), JSON documents bounded (:func:`json_document`) and dates
    and times Python cannot hold as PostgreSQL writes them (:func:`_beyond_python_loaders`)."""
    from psycopg.types.json import set_json_loads

    set_json_loads(json_document, cursor)
    for text_type in ("text", "varchar", "bpchar", "name", 0):  # 0: types psycopg reads as text
        cursor.adapters.register_loader(text_type, _cut_text_loader())
    for type_name, loader in _beyond_python_loaders().items():
        cursor.adapters.register_loader(type_name, loader)


@functools.cache
def _cut_text_loader() -> type:
    """psycopg's text loader, cutting what it decodes (:func:`cut_text`)."""
    from psycopg.types.string import TextLoader

    class CutTextLoader(TextLoader):
        def load(self, data: Any) -> Any:
            text = super().load(data)
            return cut_text(text) if isinstance(text, str) else text  # bytes: SQL_ASCII

    return CutTextLoader


@functools.cache
def _beyond_python_loaders() -> dict[str, type]:
    """psycopg's date and time loaders, answering a value Python's types cannot hold with
    PostgreSQL's own text: ``infinity``, ``-infinity``, a year after 9999 or before 1
    (``0044-03-15 BC``), ``24:00:00``, an interval over 999,999,999 days (they raised
    ``DataError``, which read as the database rejecting the query); and a value in a style
    psycopg does not read (they raised ``NotImplementedError``): any interval when the
    server's ``IntervalStyle`` is not ``postgres`` (``P1DT2H`` in ``iso_8601``), a
    ``timestamptz`` when its ``DateStyle`` is not ISO."""
    from psycopg import DataError
    from psycopg.types import datetime as pg_datetime

    def as_text_beyond_python(base: type) -> type:
        class Loader(base):
            def load(self, data: Any) -> Any:
                try:
                    return super().load(data)
                except (DataError, NotImplementedError):
                    return bytes(data).decode("utf-8", "replace")

        Loader.__name__ = Loader.__qualname__ = base.__name__.replace("Loader", "TextBeyondLoader")
        return Loader

    return {
        "date": as_text_beyond_python(pg_datetime.DateLoader),
        "timestamp": as_text_beyond_python(pg_datetime.TimestampLoader),
        "timestamptz": as_text_beyond_python(pg_datetime.TimestamptzLoader),
        "time": as_text_beyond_python(pg_datetime.TimeLoader),
        "timetz": as_text_beyond_python(pg_datetime.TimetzLoader),
        "interval": as_text_beyond_python(pg_datetime.IntervalLoader),
    }


def _unsendable(sql: str) -> str | None:
    """Why ``sql`` cannot be sent as it is (a lone surrogate is no UTF-8; PostgreSQL would
    read the text only up to a NUL), or None."""
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:
        what = f"{sql[exc.start]!r} (a lone surrogate)"
        return UNSENDABLE_ERROR.format(what=what, position=exc.start)
    if "\x00" in sql:
        return UNSENDABLE_ERROR.format(what="a NUL character", position=sql.index("\x00"))
    return None


PG_DOWN_STATES = ("08000", "08001", "08003", "08004", "08006", "57P01", "57P02", "57P04", "58030")
"""SQLSTATEs of a source that cannot serve: the connection failed or was lost (class 08 but
``08P01``, a protocol violation a statement causes, e.g. ``$1`` without parameters), the
server shut down or crashed, the database was dropped, an I/O error."""
PG_BUSY_STATES = ("55P03", "55006", "57P03", "40001", "40P01")
"""SQLSTATEs of a source that is busy (with class 53, insufficient resources): a lock not
available, an object in use, the server starting up, a serialization failure, a deadlock."""


def _pg_fault(exc: Any, *, broken: bool) -> str:
    """``"down"``, ``"busy"`` or ``"sql"``: what a psycopg error says happened.

    ``broken``: the connection is broken or closed. An ``OperationalError`` without a
    SQLSTATE is psycopg's own (the server went away mid-query).
    """
    import psycopg

    state = getattr(exc, "sqlstate", None) or ""
    if state in PG_DOWN_STATES or (broken and state != "08P01"):
        return "down"
    if not state and isinstance(exc, psycopg.OperationalError):
        return "down"
    if state.startswith("53") or state in PG_BUSY_STATES:
        return "busy"
    return "sql"


SQLITE_BUSY_CODES = ("SQLITE_BUSY", "SQLITE_LOCKED")
SQLITE_DOWN_CODES = ("SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_CORRUPT", "SQLITE_NOTADB")
SQLITE_BUSY_MESSAGES = (
    "database is locked",
    "database table is locked",
    "database schema is locked",
)
SQLITE_DOWN_MESSAGES = (
    "unable to open database file",
    "disk I/O error",
    "database disk image is malformed",
    "file is not a database",
)


def _sqlite_fault(exc: sqlite3.Error) -> str:
    """``"down"``, ``"busy"`` or ``"sql"``: what a SQLite error says happened (by its error
    code on Python 3.11+, else its message)."""
    code = str(getattr(exc, "sqlite_errorname", "") or "")
    message = str(exc)
    if code.startswith(SQLITE_BUSY_CODES) or message.startswith(SQLITE_BUSY_MESSAGES):
        return "busy"
    if code.startswith(SQLITE_DOWN_CODES) or message.startswith(SQLITE_DOWN_MESSAGES):
        return "down"
    return "sql"


def _schema_fault(exc: BaseException) -> str:
    """``"down"``, ``"busy"`` or ``"sql"``: what an error reading a source's schemas says
    happened (SQLAlchemy wraps the driver's error)."""
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, sqlite3.Error):
        return _sqlite_fault(orig)
    if getattr(orig, "sqlstate", None):
        return _pg_fault(orig, broken=False)
    return "down"


def _pg_message(exc: Any) -> str:
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None)
    return str(primary or exc).strip().splitlines()[0]


def _short_error(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:300]
