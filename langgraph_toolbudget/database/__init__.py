"""SQL sources as built-in tools: ``search_schemas`` and read-only ``execute_sql``.

Key Components:
    - :class:`~langgraph_toolbudget.database.toolbox.DatabaseToolbox`: the sources (SQLite,
      PostgreSQL), their schemas (read once, cached), the search and the read-only queries.
    - :func:`~langgraph_toolbudget.database.guard.check_read_only`: the check before a query.

Needs the ``database`` extra (SQLAlchemy, sqlglot); see ``docs/database.md``.
"""

from langgraph_toolbudget.database.guard import ReadOnlyCheck, check_read_only
from langgraph_toolbudget.database.toolbox import DatabaseToolbox, QueryResult, QueryStop, SqlError

__all__ = [
    "DatabaseToolbox",
    "QueryResult",
    "QueryStop",
    "ReadOnlyCheck",
    "SqlError",
    "check_read_only",
]
