"""The database toolbox as a built-in family: ``search_schemas`` and ``execute_sql``.

Its one reason to change: how the executor answers the two database tools.

``search_schemas(query, source=None, limit=5)`` ranks the tables of every source that is up
for a question (the catalog's BM25 over names, columns, types, keys and comments, fused
with embeddings when ``embeddings=`` is configured) and returns the best ones with their
columns, and the sources whose schemas could not be read with the reason; a failure of the
search itself is an error tool message (logged). ``execute_sql(source, sql)`` runs one
read-only statement (:class:`~langgraph_toolbudget.database.toolbox.DatabaseToolbox`): a
refusal, the timeout, an unknown or unreachable source, and the database's own error are
error tool messages that say what to do; so is anything else that fails (logged), never an
exception out of the graph. A large result is offloaded as a large tool result. An answer
(and ``execute_sql``'s description) names the other tool only while it is on.

Registered while ``database_toolbox`` is set and one of its sources connects; on by
default then (``enabled_builtins`` can turn either tool off).

Key Components:
    - :class:`DatabaseTools`: the family.
    - :data:`DATABASE_TOOL_NAMES`: its tool names.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.limits import clip, safe_repr
from langgraph_toolbudget.core.meta import definition_only
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.database.toolbox import DatabaseToolbox, QueryStop, SqlError
from langgraph_toolbudget.execution.builtin_family import (
    BuiltinContext,
    BuiltinResult,
    BuiltinTools,
    call_arguments,
)
from langgraph_toolbudget.execution.offload import offload_limit

__all__ = ["DATABASE_TOOL_NAMES", "EXECUTE_SQL", "SEARCH_SCHEMAS", "DatabaseTools"]

logger = logging.getLogger(__name__)

SEARCH_SCHEMAS, EXECUTE_SQL = "search_schemas", "execute_sql"
DATABASE_TOOL_NAMES = (SEARCH_SCHEMAS, EXECUTE_SQL)
MAX_TABLES = 20
"""``search_schemas`` returns at most this many tables, whatever ``limit`` asks."""

NOTHING_FOUND = (
    "No table matched {query}{where}. Try other words (what the data is about), or "
    "search_schemas with a table or column name.{down}"
)
SOURCES_DOWN = " These sources could not be read, so their tables were not searched: {down}."
BAD_QUERY = "Error: search_schemas needs 'query': what the data you look for is about, in words."
UNKNOWN_SOURCE = "Error: there is no database source {source}; the sources are: {known}."
BAD_SQL = "Error: execute_sql needs 'source' (one of {known}) and 'sql' (one SELECT statement)."
FAILED_SQL = (
    "Error: execute_sql failed on source {source} ({error}); nothing was changed. Try a "
    "simpler query (fewer rows or columns, unusual values cast to text), or tell the user."
)
FAILED_SEARCH = "Error: search_schemas failed ({error}). {how}"
FAILED_SEARCH_HOW = (
    "Query a table you know with execute_sql (sources: {known}), or tell the user the schemas "
    "cannot be searched."
)
FAILED_SEARCH_TELL = "Tell the user the schemas cannot be searched."
""":data:`FAILED_SEARCH`'s advice when ``execute_sql`` is off."""
NEXT_STEP = "query them with execute_sql(source=..., sql='SELECT ...')"
SCHEMAS_FIRST = " Find tables and columns with search_schemas first."


class _SearchArgs(BaseModel):
    query: str = Field(description="What the data is about, in words (e.g. 'money spent by "
                       "customers').")  # fmt: skip
    source: str | None = Field(None, description="Only this database source (optional).")
    limit: int = Field(5, description=f"Tables to return (at most {MAX_TABLES}).")


class _SqlArgs(BaseModel):
    source: str = Field(description="The database source to query.")
    sql: str = Field(description="One read-only statement: SELECT, WITH ... SELECT or EXPLAIN.")


class DatabaseTools(BuiltinTools):
    """``search_schemas`` and ``execute_sql`` over a :class:`DatabaseToolbox`.

    Args:
        toolbox: the sources.
        config: the shared options (``embeddings``, the offload limit).
    """

    def __init__(self, toolbox: DatabaseToolbox, config: BudgetConfig) -> None:
        self.toolbox = toolbox
        self.config = config
        embeddings = config.embeddings
        self.embeddings = (
            embeddings.embeddings if isinstance(embeddings, HybridScorer) else embeddings
        )

    def _sources(self) -> str:
        up = self.toolbox.reachable_sources()
        parts = [f"{name} ({self.toolbox.dialect(name)})" for name in up]
        return ", ".join(parts) or "none"

    def _enabled(self, name: str, ctx: BuiltinContext | None = None) -> bool:
        """Whether the family's tool ``name`` is on, so an answer or description may name it:
        by the node's enabled built-ins when ``ctx`` knows them, else by ``enabled_builtins``."""
        names = None if ctx is None else ctx.builtin_names
        if names is not None:
            return name in names
        return self.config.builtin_filter.allows(name, default=self.default_enabled)

    def definitions(self) -> list[BaseTool]:
        sources = self._sources()
        first = SCHEMAS_FIRST if self._enabled(SEARCH_SCHEMAS) else ""
        return [
            definition_only(
                SEARCH_SCHEMAS,
                (
                    "Find the database tables that hold some data: ranks the tables of every "
                    "database source by relevance to a question and returns the best ones "
                    f"with their columns, types and keys. Sources: {sources}."
                ),
                args_schema=_SearchArgs,
            ),
            definition_only(
                EXECUTE_SQL,
                (
                    "Run one read-only SQL statement (SELECT, WITH ... SELECT or EXPLAIN) on a "
                    f"database source and get the rows as JSON (at most {self.toolbox.max_rows}"
                    ", with the total count). Writes, schema changes, PRAGMA and ATTACH are "
                    f"refused.{first} Sources: {sources}."
                ),
                args_schema=_SqlArgs,
            ),
        ]

    def handle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        args = call_arguments(call)
        if call["name"] == SEARCH_SCHEMAS:
            return self._search(args, self._enabled(EXECUTE_SQL, ctx))
        return self._execute(args, schemas=self._enabled(SEARCH_SCHEMAS, ctx))

    async def ahandle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        if call["name"] == SEARCH_SCHEMAS:
            return await super().ahandle(call, ctx)
        stop = QueryStop()  # a cancelled run's query would run on in its thread to timeout_s
        try:
            schemas = self._enabled(SEARCH_SCHEMAS, ctx)
            return await asyncio.to_thread(self._execute, call_arguments(call), stop, schemas)
        except asyncio.CancelledError:
            stop.set()  # at once: its cancel requests go from a thread, not the event loop's
            raise

    def _search(self, args: dict[str, Any], queries: bool = True) -> BuiltinResult:
        """``search_schemas``'s answer (advising ``execute_sql`` only if ``queries``: it is
        on)."""
        query, source = args.get("query"), args.get("source")
        if not isinstance(query, str) or not query.strip():
            return BuiltinResult(BAD_QUERY, error=True)
        known = self.toolbox.source_names
        if source is not None and (not isinstance(source, str) or source not in known):
            names = self.toolbox.quoted_names()
            return BuiltinResult(UNKNOWN_SOURCE.format(source=safe_repr(source), known=names), True)
        limit = args.get("limit", 5)
        limit = max(1, min(MAX_TABLES, limit if isinstance(limit, int) else 5))
        try:
            tables = self.toolbox.search(
                query, limit=limit, source=source, embeddings=self.embeddings
            )
            down = self.toolbox.down_sources()
        except Exception as exc:  # noqa: BLE001 - as execute_sql: the run goes on
            logger.exception("search_schemas raised")
            error = clip(f"{type(exc).__name__}: {exc}")
            names = self.toolbox.quoted_names()
            how = FAILED_SEARCH_HOW.format(known=names) if queries else FAILED_SEARCH_TELL
            return BuiltinResult(FAILED_SEARCH.format(error=error, how=how), error=True)
        if not tables:
            where = f" in source {source!r}" if source else ""
            unread = {n: e for n, e in down.items() if source in (None, n)}
            reasons = "; ".join(f"{n!r} ({clip(e)})" for n, e in unread.items())
            more = SOURCES_DOWN.format(down=reasons) if unread else ""
            shown = safe_repr(query)
            return BuiltinResult(NOTHING_FOUND.format(query=shown, where=where, down=more))
        answer: dict[str, Any] = {"tables": [t.as_dict() for t in tables]}
        if down:
            answer["unavailable_sources"] = down
        if queries:
            answer["next"] = NEXT_STEP
        return BuiltinResult(json.dumps(answer, ensure_ascii=False), artifact=answer)

    def _execute(
        self, args: dict[str, Any], stop: QueryStop | None = None, schemas: bool = True
    ) -> BuiltinResult:
        """``execute_sql``'s answer (advising ``search_schemas`` only if ``schemas``: it is on)."""
        source, sql = args.get("source"), args.get("sql")
        if not isinstance(source, str) or not isinstance(sql, str):
            return BuiltinResult(BAD_SQL.format(known=self.toolbox.quoted_names()), error=True)
        try:
            result = self.toolbox.execute(source, sql, stop=stop)
            content = json.dumps(result.as_dict(), ensure_ascii=False)
        except SqlError as exc:
            content = exc.message(schemas=schemas)
            return BuiltinResult(content, error=True, artifact={"refused": exc.refused})
        except Exception as exc:  # noqa: BLE001 - a value nobody foresaw must not end the run
            logger.exception("execute_sql on source %s raised", clip(repr(source)))
            error = clip(f"{type(exc).__name__}: {exc}")
            return BuiltinResult(
                FAILED_SQL.format(source=clip(repr(source)), error=error), error=True
            )
        return BuiltinResult(content, offload_over=offload_limit(self.config))
