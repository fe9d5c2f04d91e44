"""Table schemas: read from a database once, and ranked for a question (``search_schemas``).

Its one reason to change: what a table's schema holds and how tables are ranked.

A table is indexed the way the catalog indexes a tool
(:class:`~langgraph_toolbudget.core.search.ToolIndex`, the catalog's own BM25 engine): its
name, its comment, its columns' names, types, comments and the tables its foreign keys
point to, plus the usual meaning of some names and types (a ``total_eur`` or ``NUMERIC``
column is an amount of money, a ``created_at`` or ``TIMESTAMP`` one a time), so "money
spent by customers" finds ``orders(total_eur, customer_id)``. With embeddings configured
the tables' texts are embedded once and fused with the lexical scores, as tools are.

Key Components:
    - :class:`TableSchema`: one table or view of one source.
    - :func:`reflect_tables`: every table and view of a SQLAlchemy engine (system schemas
      left out), with columns, keys and comments.
    - :class:`TableIndex`: the tables of every source, ranked for a question.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from langgraph_toolbudget.core.search import ToolIndex, rank_scores

__all__ = ["TableIndex", "TableSchema", "reflect_tables"]

logger = logging.getLogger(__name__)

MAX_TABLES_PER_SOURCE = 2000
"""Tables (and views) read per source at most, in name order."""
SEMANTIC_WEIGHT = 0.7
"""The share of the embedding similarity in the fused score (as for tools)."""
SYSTEM_SCHEMAS = re.compile(r"^(pg_catalog|information_schema|pg_toast.*|pg_temp.*)$")

_MONEY_WORDS = "money amount spent paid price cost"
_TIME_WORDS = "date time when"
_NAME_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"(^|_)(eur|usd|gbp|jpy|chf|cad|aud|cny|inr|cents?|price|cost|amount|total|revenue|"
            r"paid|fee|salary|balance|spent|spend)(_|$)"
        ),
        _MONEY_WORDS,
    ),
    (re.compile(r"(^|_)(at|on|date|time|timestamp|created|updated|day)(_|$)"), _TIME_WORDS),
    (re.compile(r"(^|_)(email|phone|address)(_|$)"), "contact"),
    (re.compile(r"(^|_)(qty|quantity|count)(_|$)"), "how many number"),
)
"""Column-name patterns and the words they mean (added to the table's indexed text)."""
_TYPE_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"NUMERIC|DECIMAL|MONEY", re.IGNORECASE), _MONEY_WORDS),
    (re.compile(r"DATE|TIME", re.IGNORECASE), _TIME_WORDS),
)
_TABLE_HINTS: dict[str, str] = {
    "orders": "purchases sales bought",
    "order": "purchase sale bought",
    "customers": "clients buyers",
    "customer": "client buyer",
    "products": "items goods articles",
    "product": "item goods article",
    "invoices": "bills",
    "invoice": "bill",
    "employees": "staff workers people",
    "users": "people accounts",
    "payments": "money paid transactions",
}
"""Common table names and what a question may call them."""


@dataclass(frozen=True)
class TableSchema:
    """One table or view of a source.

    Attributes:
        source: the source's name in the toolbox.
        name: the table's name (``schema.table`` outside the default schema).
        columns: ``{"name", "type", "nullable", "comment"?}`` per column, in order.
        primary_key: the primary key's columns.
        foreign_keys: ``{"columns": [...], "references": "table(col, ...)"}`` per key.
        comment: the table's comment, if the database has one.
        kind: ``"table"`` or ``"view"``.
    """

    source: str
    name: str
    columns: tuple[dict[str, Any], ...]
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[dict[str, Any], ...] = ()
    comment: str | None = None
    kind: str = "table"

    @property
    def key(self) -> str:
        """``source.table``: the table's name across sources."""
        return f"{self.source}.{self.name}"

    def as_dict(self) -> dict[str, Any]:
        """The schema as the model reads it (JSON-safe)."""
        out: dict[str, Any] = {"source": self.source, "table": self.name}
        if self.kind != "table":
            out["kind"] = self.kind
        if self.comment:
            out["comment"] = self.comment
        out["columns"] = [dict(c) for c in self.columns]
        if self.primary_key:
            out["primary_key"] = list(self.primary_key)
        if self.foreign_keys:
            out["foreign_keys"] = [dict(k) for k in self.foreign_keys]
        return out

    def text(self) -> str:
        """The table as one text (for embeddings)."""
        columns = ", ".join(f"{c['name']} {c['type']}" for c in self.columns)
        parts = [f"{self.name}: {self.comment or ''}", columns]
        parts += [
            f"{', '.join(k['columns'])} references {k['references']}" for k in self.foreign_keys
        ]
        return "\n".join(parts)

    def index_doc(self) -> tuple[str, str, list[str], list[str]]:
        """The table as a ``ToolIndex`` document: (key, description, columns, more words)."""
        words: list[str] = []
        base = self.name.rsplit(".", 1)[-1].lower()
        if base in _TABLE_HINTS:
            words.append(_TABLE_HINTS[base])
        for column in self.columns:
            name, kind = str(column["name"]).lower(), str(column["type"])
            words.append(kind)
            if column.get("comment"):
                words.append(str(column["comment"]))
            words += [hint for pattern, hint in _NAME_HINTS if pattern.search(name)]
            words += [hint for pattern, hint in _TYPE_HINTS if pattern.search(kind)]
        for key in self.foreign_keys:
            words.append(f"references {key['references']}")
        description = " ".join(p for p in (self.comment or "", self.kind) if p)
        return self.key, description, [str(c["name"]) for c in self.columns], words


def _type_name(value: Any, dialect: Any) -> str:
    try:
        return str(value.compile(dialect=dialect))
    except Exception:  # noqa: BLE001 - an exotic type: its class name is enough
        return type(value).__name__


def reflect_tables(engine: Any, source: str) -> list[TableSchema]:
    """Every table and view of ``engine`` (system schemas left out), at most
    :data:`MAX_TABLES_PER_SOURCE` per source.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database cannot be read.
    """
    from sqlalchemy import inspect
    from sqlalchemy.engine.reflection import ObjectKind

    inspector = inspect(engine)
    default = inspector.default_schema_name
    schemas = [s for s in inspector.get_schema_names() if not SYSTEM_SCHEMAS.match(s)]
    out: list[TableSchema] = []
    for schema in sorted(schemas, key=lambda s: (s != default, s)):
        where = None if schema == default else schema
        views = set(inspector.get_view_names(schema=where))
        columns = inspector.get_multi_columns(schema=where, kind=ObjectKind.ANY)
        keys = inspector.get_multi_pk_constraint(schema=where, kind=ObjectKind.ANY)
        foreign = inspector.get_multi_foreign_keys(schema=where, kind=ObjectKind.ANY)
        try:
            comments = inspector.get_multi_table_comment(schema=where, kind=ObjectKind.ANY)
        except NotImplementedError:  # SQLite has no comments
            comments = {}
        for (_, table), cols in sorted(columns.items(), key=lambda kv: kv[0][1]):
            if len(out) >= MAX_TABLES_PER_SOURCE:
                return out
            name = table if where is None else f"{schema}.{table}"
            key = (where, table)
            out.append(
                TableSchema(
                    source=source,
                    name=name,
                    columns=tuple(_column(c, engine.dialect) for c in cols),
                    primary_key=tuple((keys.get(key) or {}).get("constrained_columns") or ()),
                    foreign_keys=tuple(_foreign(k, default) for k in foreign.get(key, [])),
                    comment=(comments.get(key) or {}).get("text"),
                    kind="view" if table in views else "table",
                )
            )
    return out


def _column(column: dict[str, Any], dialect: Any) -> dict[str, Any]:
    out = {
        "name": column["name"],
        "type": _type_name(column["type"], dialect),
        "nullable": bool(column.get("nullable", True)),
    }
    if column.get("comment"):
        out["comment"] = column["comment"]
    return out


def _foreign(key: dict[str, Any], default: str | None) -> dict[str, Any]:
    schema = key.get("referred_schema")
    table = (
        key["referred_table"] if schema in (None, default) else f"{schema}.{key['referred_table']}"
    )
    return {
        "columns": list(key.get("constrained_columns") or ()),
        "references": f"{table}({', '.join(key.get('referred_columns') or ())})",
    }


@dataclass
class TableIndex:
    """The tables of every source, ranked for a question.

    Args:
        tables: the tables, in source order.

    Lexical ranking is the catalog's BM25 (:class:`ToolIndex`); with embeddings, the
    tables' texts are embedded on first use and fused with it.
    """

    tables: Sequence[TableSchema]
    _index: ToolIndex = field(init=False, repr=False)
    _vectors: dict[int, np.ndarray] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._index = ToolIndex([t.index_doc() for t in self.tables], split_clauses=False)

    def rank(
        self, query: str, *, limit: int, source: str | None = None, embeddings: Any = None
    ) -> list[TableSchema]:
        """The best tables for ``query``, best first (only tables that score > 0).

        Args:
            query: the question, in words.
            limit: at most this many tables.
            source: only this source's tables.
            embeddings: a LangChain ``Embeddings`` to fuse with the lexical scores; when
                it fails (a server down, vectors of another length), the lexical ranking
                alone, logged, as for tools.
        """
        if not self.tables:
            return []
        scores = np.array(self._index.scores(query), dtype=np.float64)
        if embeddings is not None:
            try:
                scores = self._fused(query, scores, embeddings)
            except Exception as exc:  # noqa: BLE001 - any embedding failure falls back, logged
                logger.warning(
                    "search_schemas: embedding with %s failed (%r); using lexical scores",
                    type(embeddings).__name__,
                    exc,
                )
        among = None
        if source is not None:
            among = [i for i, t in enumerate(self.tables) if t.source == source]
        return [self.tables[i] for i, _ in rank_scores(scores, limit=limit, among=among)]

    def _fused(self, query: str, lexical: np.ndarray, embeddings: Any) -> np.ndarray:
        tables = self._vectors.get(id(embeddings))
        if tables is None:
            tables = _unit(np.asarray(embeddings.embed_documents([t.text() for t in self.tables])))
            self._vectors = {id(embeddings): tables}  # one embeddings object at a time
        query_vector = _unit(np.asarray([embeddings.embed_query(query)]))[0]
        semantic = _min_max(tables @ query_vector)
        return (1 - SEMANTIC_WEIGHT) * _min_max(lexical) + SEMANTIC_WEIGHT * semantic


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.asarray(rows / np.where(norms == 0, 1.0, norms), dtype=np.float64)


def _min_max(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    if high <= low:
        return np.ones_like(values) if high > 0 else np.zeros_like(values)
    return (values - low) / (high - low)
