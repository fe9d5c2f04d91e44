"""Is a model's SQL one statement that only reads? The check before a query runs (sqlglot).

Its one reason to change: which statements ``execute_sql`` accepts.

The statement is parsed with ``sqlglot`` in the source's dialect and accepted only when it
is one statement that reads: ``SELECT`` (also with ``WITH``, set operations such as
``UNION``, or ``VALUES``) or ``EXPLAIN`` of one. Anything else is refused with the reason:
writes (``INSERT``, ``UPDATE``, ``DELETE``, ``MERGE``, a data-modifying ``WITH``), schema
changes (``CREATE``, ``DROP``, ``ALTER``, ``TRUNCATE``), ``PRAGMA``, ``ATTACH``,
transactions, settings, ``COPY``, ``SELECT ... INTO``, row locks (``FOR UPDATE``), several
statements, and the functions that reach files, other servers or the server's state
(``pg_read_file``, ``lo_export``, ``dblink``, ``set_config``, ``load_extension``...). The
connection enforces read-only again (:mod:`langgraph_toolbudget.database.toolbox`): this
check is the first of two walls, and the one that explains a refusal.

Key Components:
    - :func:`check_read_only`: the verdict for one SQL text.
    - :class:`ReadOnlyCheck`: accepted or not, why, and whether only the database can say
      (the text does not parse here: the database's own message is the answer).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Dialect", "ReadOnlyCheck", "check_read_only", "denied_function"]

Dialect = Literal["sqlite", "postgres"]

REFUSED = (
    "Refused: execute_sql only reads, and {reason}, so nothing ran. Send one SELECT (or "
    "WITH ... SELECT, or EXPLAIN SELECT ...) that reads the data you need."
)

_WRITES = {
    "Insert": "INSERT writes rows",
    "Update": "UPDATE writes rows",
    "Delete": "DELETE writes rows",
    "Merge": "MERGE writes rows",
    "Create": "CREATE changes the schema",
    "Drop": "DROP changes the schema",
    "Alter": "ALTER changes the schema",
    "TruncateTable": "TRUNCATE deletes rows",
    "Pragma": "PRAGMA reads or changes the database's settings",
    "Attach": "ATTACH opens another database file",
    "Detach": "DETACH changes the attached databases",
    "Transaction": "it controls the transaction",
    "Commit": "it controls the transaction",
    "Rollback": "it controls the transaction",
    "Set": "SET changes the session's settings",
    "Use": "USE changes the session",
    "Copy": "COPY reads or writes files",
    "LoadData": "it loads files",
    "Grant": "GRANT changes permissions",
    "Revoke": "REVOKE changes permissions",
    "Analyze": "ANALYZE writes statistics",
    "Command": "it is not a query the check can read ({keyword})",
    "Lock": "it locks rows (FOR UPDATE/SHARE)",
    "Into": "SELECT ... INTO creates a table",
    "Kill": "it stops other sessions",
    "Declare": "it declares a cursor or variable",
    "Cache": "it changes the session",
    "Uncache": "it changes the session",
    "Refresh": "it changes the session",
    "Export": "it writes files",
}
"""Expression kinds refused anywhere in a statement, and why (sqlglot class names)."""

DENIED_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "postgres": (
        "pg_read_file", "pg_read_binary_file", "pg_ls_*", "pg_stat_file", "pg_file_*",
        "lo_*", "dblink*", "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf",
        "pg_rotate_logfile", "pg_promote", "pg_switch_wal", "pg_create_*", "pg_drop_*",
        "pg_replication_*", "pg_logical_*", "set_config", "pg_advisory*", "pg_try_advisory*",
        "pg_notify", "query_to_xml*", "query_to_json*", "cursor_to_xml*", "table_to_xml*",
        "ts_stat", "ts_rewrite",
        "schema_to_xml*", "database_to_xml*", "pg_backup_*", "pg_start_backup",
        "pg_stop_backup", "pg_log_*", "pg_import_system_collations",
        "txid_current", "pg_current_xact_id", "nextval", "setval", "setseed",
        "loread", "lowrite", "pg_logdir_ls", "pg_copy_*", "pg_wal_replay_*",
        "pg_stat_reset*", "pg_stat_statements_reset",
        # Index maintenance: writes index pages that a rollback does not undo.
        "brin_summarize_*", "brin_desummarize_range", "gin_clean_pending_list",
    ),
    "sqlite": ("load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"),
}  # fmt: skip
"""Functions refused per dialect (``fnmatch`` patterns, lower case): they read or write
files, reach other servers, change the server's state or run SQL given as a string.

A denylist, not an allowlist: PostgreSQL has some 3,000 functions, extensions and the
database's own add theirs, and an allowlist of names would refuse what ordinary analysis
uses while still not seeing the calls made inside views and functions. The wall the text
cannot give is the database role's rights (``docs/database.md``)."""

_STATEMENTS = {
    "INSERT": "INSERT writes rows",
    "UPDATE": "UPDATE writes rows",
    "DELETE": "DELETE writes rows",
    "REPLACE": "REPLACE writes rows",
    "UPSERT": "UPSERT writes rows",
    "MERGE": "MERGE writes rows",
    "CREATE": "CREATE changes the schema",
    "DROP": "DROP changes the schema",
    "ALTER": "ALTER changes the schema",
    "TRUNCATE": "TRUNCATE deletes rows",
    "COMMENT": "COMMENT changes the schema",
    "PRAGMA": "PRAGMA reads or changes the database's settings",
    "ATTACH": "ATTACH opens another database file",
    "DETACH": "DETACH changes the attached databases",
    "VACUUM": "VACUUM rewrites the database",
    "REINDEX": "REINDEX rewrites indexes",
    "CLUSTER": "CLUSTER rewrites a table",
    "ANALYZE": "ANALYZE writes statistics",
    "REFRESH": "REFRESH rewrites a materialized view",
    "BEGIN": "it controls the transaction",
    "START": "it controls the transaction",
    "COMMIT": "it controls the transaction",
    "END": "it controls the transaction",
    "ROLLBACK": "it controls the transaction",
    "ABORT": "it controls the transaction",
    "SAVEPOINT": "it controls the transaction",
    "RELEASE": "it controls the transaction",
    "SET": "SET changes the session's settings",
    "RESET": "RESET changes the session's settings",
    "DISCARD": "DISCARD changes the session",
    "COPY": "COPY reads or writes files",
    "GRANT": "GRANT changes permissions",
    "REVOKE": "REVOKE changes permissions",
    "LOCK": "LOCK locks tables",
    "DO": "DO runs a procedural block",
    "CALL": "CALL runs a procedure",
    "PREPARE": "PREPARE defines a statement to run later",
    "EXECUTE": "EXECUTE runs a prepared statement",
    "DEALLOCATE": "DEALLOCATE changes the session",
    "LISTEN": "LISTEN changes the session",
    "UNLISTEN": "UNLISTEN changes the session",
    "NOTIFY": "NOTIFY sends a notification",
    "LOAD": "LOAD loads a library",
    "SECURITY": "it changes the security labels",
    "IMPORT": "IMPORT changes the schema",
    "DECLARE": "DECLARE opens a cursor",
    "FETCH": "FETCH reads a cursor of the session",
    "MOVE": "MOVE moves a cursor of the session",
    "CLOSE": "CLOSE closes a cursor of the session",
    "CHECKPOINT": "CHECKPOINT writes the database",
    "REASSIGN": "REASSIGN changes ownership",
}
"""A statement's first keyword and why it is refused, whatever the parser's version reads."""
_UNICODE_ESCAPE = re.compile(r"u&['\"]", re.IGNORECASE)
"""PostgreSQL's ``U&"..."`` and ``U&'...'``: sqlglot keeps the escapes, so ``U&"pg\\005fls_dir"``
would pass for another name. Anywhere in the text, strings and comments included: a false
alarm costs a refusal, a miss would let a denied function run."""
_LEADING = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_]+")

_EXPLAIN = {
    "sqlite": re.compile(r"\A\s*EXPLAIN\s+(?:QUERY\s+PLAN\s+)?", re.IGNORECASE),
    "postgres": re.compile(
        r"\A\s*EXPLAIN\s+(?:\([^()'\";]*\)\s*|(?:ANALYZE|ANALYSE|VERBOSE)\s+)*", re.IGNORECASE
    ),
}
"""The ``EXPLAIN`` prefix of each dialect (with its options); the rest must be a read."""


@dataclass(frozen=True)
class ReadOnlyCheck:
    """The verdict on one SQL text.

    Attributes:
        ok: one statement that only reads.
        reason: why it is refused (a message for the model), when not ``ok``.
        ask_database: the text does not parse here; the database's own parser gives the
            error the model should see (``reason`` holds this parser's message).
        explain: the statement is an ``EXPLAIN`` (its plan is the result).
    """

    ok: bool
    reason: str = ""
    ask_database: bool = False
    explain: bool = False


def denied_function(name: str, dialect: Dialect) -> bool:
    """Whether a function of this name is refused in ``dialect``."""
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, p) for p in DENIED_FUNCTIONS.get(dialect, ()))


def _refused(reason: str) -> ReadOnlyCheck:
    return ReadOnlyCheck(False, REFUSED.format(reason=reason))


def _problem(statement: Any, dialect: Dialect) -> str | None:
    """Why ``statement`` (one parsed statement) is not a read, or None."""
    from sqlglot import exp

    reads = tuple(
        getattr(exp, n) for n in ("Select", "SetOperation", "Union", "Values") if hasattr(exp, n)
    )
    for node in statement.walk():
        reason = _WRITES.get(type(node).__name__)
        if reason is not None:
            keyword = _first_word(node.this) if isinstance(node.this, str) else "?"
            return reason.format(keyword=keyword)
        if isinstance(node, exp.Func):
            name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
            if denied_function(str(name), dialect):
                return f"it calls {str(name).lower()}(), which execute_sql does not allow"
    if not isinstance(statement, reads):
        return f"it is not a query ({_first_word(statement.sql(dialect=dialect))})"
    return None


def _first_word(sql: str) -> str:
    words = sql.split(None, 1)
    return words[0].upper()[:40] if words else "?"


def check_read_only(sql: str, dialect: Dialect) -> ReadOnlyCheck:
    """Whether ``sql`` is one statement that only reads, in ``dialect``.

    Args:
        sql: the model's SQL.
        dialect: ``"sqlite"`` or ``"postgres"``.

    Returns:
        The verdict; a text that does not parse here has ``ask_database`` set.
    """
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    if not isinstance(sql, str) or not sql.strip():
        return _refused("the statement is empty")
    explain = _EXPLAIN[dialect].match(sql)
    body = sql[explain.end() :] if explain else sql
    start = _LEADING.match(body)
    first = _WORD.match(body, start.end() if start else 0)
    keyword = first.group(0).upper() if first else ""
    if keyword in _STATEMENTS:
        return _refused(_STATEMENTS[keyword])
    if dialect == "postgres" and _UNICODE_ESCAPE.search(sql):
        return _refused(
            "it writes a name or a string with Unicode escapes (U&\"...\" or U&'...'), which the "
            "check cannot read; write it in plain characters"
        )
    try:
        statements = [s for s in sqlglot.parse(body, read=dialect) if s is not None]
    except (ParseError, TokenError) as exc:
        return ReadOnlyCheck(False, str(exc).splitlines()[0], ask_database=True)
    except RecursionError:
        return _refused("the statement is nested too deeply to check")
    statements = [s for s in statements if type(s).__name__ != "Semicolon"]
    if not statements:
        return _refused("the statement is empty")
    if len(statements) > 1:
        return _refused(f"it holds {len(statements)} statements (send one at a time)")
    problem = _problem(statements[0], dialect)
    if problem is not None:
        return _refused(problem)
    return ReadOnlyCheck(True, explain=explain is not None)
