"""The package's options, declared, documented and validated once: :class:`BudgetConfig`.

Its one reason to change: an option is added, removed or changes meaning.

Key Components:
    - :class:`BudgetConfig`: the options the nodes, the prebuilt agent, the executor and
      the middleware share (budget, search limit, working-set cap, execution mode, loop
      bounds, formats, offloading, learning), a frozen pydantic model. Build one and hand
      it to every node, so ``select_tools`` and the executor's ``request_more_tools`` load
      tools under the same budget.
    - :class:`BudgetOptions`: the same options as keyword arguments (``**options:
      Unpack[BudgetOptions]``), so every node, factory and the middleware takes
      ``config=`` plus any option by name, with editor completion and type checks.
    - :meth:`BudgetConfig.override`: a validated copy with some options changed.
    - :func:`check_node_options`: the rules of the nodes' and factories' own keywords
      (``min_relative_score``, ``every_turn``, ``strategy``, ``name``...), checked the same way
      and named the same way in errors.

Typical Usage:
    ```python
    config = BudgetConfig(max_tools=6, max_visible=12)
    graph.add_node("select_tools", SelectTools(catalog, config=config))
    graph.add_node("tools", ToolExecutor(catalog, config=config, mode="sequential"))
    small = config.override(model_size="qwen3:4b", max_tools=None)  # the preset's budget
    ```
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from difflib import get_close_matches
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from langchain_core.embeddings import Embeddings
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict, Unpack

from langgraph_toolbudget.core.budget import max_tools_for_model
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.gating import BuiltinFilter, EnabledBuiltins
from langgraph_toolbudget.core.limits import clip_names
from langgraph_toolbudget.core.option_checks import option_message
from langgraph_toolbudget.core.retrieval import DEFAULT_RETRIEVER_WEIGHT
from langgraph_toolbudget.core.selection import free_tools
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.core.spec import RuntimeMode
from langgraph_toolbudget.core.token_budget import MIN_TOOL_TOKENS
from langgraph_toolbudget.formats.settings import ToolCallFormats, ToolCallFormatsSpec

if TYPE_CHECKING:
    from langgraph_toolbudget.database import DatabaseToolbox
    from langgraph_toolbudget.nodes.usage import ToolUsage
else:
    # The two classes are imported for type checkers only, so that importing the options
    # loads neither LangGraph (nodes.usage) nor the SQL toolbox. At run time the names stand
    # for any value, so typing.get_type_hints(BudgetOptions) still resolves; BudgetConfig's
    # validators check what is passed.
    DatabaseToolbox = ToolUsage = Any

__all__ = [
    "DEFAULT_MAX_TOOLS",
    "BudgetConfig",
    "BudgetOptions",
    "ExecutionMode",
    "NodeOptions",
    "RetrievalFunction",
    "RuntimeMode",
    "SelectionStrategy",
    "check_node_options",
    "default_max_parallel",
]

ExecutionMode = Literal["sequential", "parallel_safe"]
"""``sequential``: one call after another. ``parallel_safe``: concurrently where metadata allows."""

SelectionStrategy = Literal["auto", "categories", "relevance"]
"""``SelectTools``' ``strategy``: ``auto`` (categories when the state has some, else
relevance), ``categories`` (per-category budget) or ``relevance`` (the most relevant tools)."""

RetrievalFunction = Callable[
    [str, ToolCatalog],
    Sequence[str] | Mapping[str, float] | Awaitable[Sequence[str] | Mapping[str, float]],
]
"""``retriever=``: a function ``(query, catalog)``, sync or async, returning the tool names it
finds, best first, or ``{tool name: score}`` (``docs/selection.md``)."""

DEFAULT_MAX_TOOLS = 8
"""The budget when neither ``max_tools`` nor ``model_size`` is given."""

MIN_DEFAULT_VISIBLE = 12
"""The floor of the default visible-set cap (:meth:`BudgetConfig.visible_cap`), before the
tools visible for free: this turn's few tools plus what the meta-tools load still fit."""

UNKNOWN_OPTION_ERROR = "{owner} has no option {name};{hint} the options are: {known}."
OWN_AND_SHARED_OPTIONS = "its own {own}; BudgetConfig's {shared}"
RENAMED_OPTIONS = {"limit": "search_limit"}
"""Former option names -> today's: an unknown keyword of a former name is pointed to its new
one even where the spelling is too far for a close match (``ToolSearch(limit=3)``)."""
"""The options an owner with keywords of its own lists (``known`` above)."""
PINNED_OVER_CAP_ERROR = (
    "max_visible={cap} is less than the {n} tools in pinned ({pinned}): pinned tools are "
    "always visible and never evicted, so max_visible must be at least {n}; raise max_visible "
    "or pin fewer tools (or leave max_visible=None: the default cap counts the pinned tools)"
)
FREE_OVER_CAP_ERROR = (
    "max_visible={cap} is less than the {n} tools this catalog makes visible without budget "
    "({names}): tools with include='always', in the categories 'human' or "
    "'structured_output', or pinned are never evicted, so max_visible must be at least {n}; "
    "raise max_visible, give fewer tools include='always' (tool_metadata={{name: "
    "{{'include': 'agent'}}}}), or leave max_visible=None (the default cap counts them)"
)
NOT_A_CONFIG_ERROR = (
    "config must be a BudgetConfig, got {kind}: build one with BudgetConfig(max_tools=..., ...) "
    "or pass the options as keywords."
)

_Count = Annotated[int, Field(ge=0, strict=True)]
_Positive = Annotated[int, Field(ge=1, strict=True)]


def default_max_parallel() -> int:
    """16, or the size of the thread pool ``ToolNode`` runs sync tools in when larger (the
    interpreter's default, ``min(32, CPUs + 4)``): never fewer sync calls at once than
    ``ToolNode`` runs on the same machine."""
    return max(16, min(32, (os.cpu_count() or 1) + 4))


_Name = Annotated[str, Field(min_length=1, max_length=200, strict=True)]


class BudgetConfig(BaseModel):
    """The options every node of the tool budget shares, validated once.

    A frozen pydantic model: a wrong type or value raises at construction
    (``TypeError`` / ``ValueError``, naming the option and what it must be), but a
    misspelt built-in name in ``enabled_builtins``, refused when a node is built (the
    node knows the built-in families it binds, yours among them); change it
    with :meth:`override`, which validates again. Every node, factory and the middleware
    takes ``config=`` plus any of these options as keywords (:class:`BudgetOptions`),
    which override the config's values.

    Raises:
        TypeError: an option of the wrong type, or an unknown option (the message names
            the closest one).
        ValueError: an option out of range, or a ``model_size`` whose size cannot be read.

    Example:
        ```python
        config = BudgetConfig(model_size="qwen3:8b")  # budget 5
        config.budget, config.override(max_tools=3).budget  # (5, 3)
        ```
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        arbitrary_types_allowed=True,
        use_attribute_docstrings=True,
        hide_input_in_errors=True,
    )

    max_tools: _Count | None = None
    """Tools ``select_tools`` and ``request_more_tools`` choose per turn (the budget); ``0``:
    none, only the tools visible without budget. ``None``: the preset of ``model_size``, else
    :data:`DEFAULT_MAX_TOOLS` (see :attr:`budget`)."""
    model_size: str | float | None = None
    """A model name (``"qwen3:8b"``) or size in billions for the budget presets, used when
    ``max_tools`` is None: small (<7B) 2, medium (7-30B) 5, large (>30B) 10."""
    min_per_category: _Count = 2
    """Floor of each category's share of the budget:
    ``per_cat = max(min_per_category, max_tools // n_categories)``."""
    max_categories: _Positive = 3
    """Categories ``classify_intent`` returns at most."""
    search_limit: _Count = 5
    """Tools the automatic tool search (``tool_search``) adds at most."""
    pinned: tuple[str, ...] = ()
    """Tools always visible ("pre-discovered"), outside the budget, never evicted."""
    max_visible: _Positive | None = None
    """Hard cap on the visible set across turns; adding beyond it evicts the least recently
    used unpinned tools. ``None``: ``2 * budget + search_limit`` (at least
    :data:`MIN_DEFAULT_VISIBLE`) plus the tools visible for free (:meth:`visible_cap`; under
    ``max_schema_tokens`` alone, ``budget`` there is ``max_schema_tokens // MIN_TOOL_TOKENS``)."""
    mode: ExecutionMode = "parallel_safe"
    """``sequential`` or ``parallel_safe`` execution of tool calls (see ``docs/execution.md``)."""
    max_iterations: _Positive = 5
    """Model calls per user turn; past it the agent answers with a final message."""
    max_meta_calls: _Count = 8
    """Meta-tool calls per user turn."""
    enforce_visibility: Annotated[bool, Field(strict=True)] = True
    """Refuse calls to tools that exist but are not visible."""
    embeddings: Any = Field(default=None, repr=False)
    """Optional LangChain ``Embeddings`` (or a
    :class:`~langgraph_toolbudget.core.semantic.HybridScorer`) that ``classify_intent``,
    ``select_tools`` and ``tool_search`` fuse with BM25."""
    # Not `_Positive = Field(default_factory=...)`: pydantic 2.11 refuses to merge the two.
    max_parallel: int = Field(default_factory=lambda: default_max_parallel(), ge=1, strict=True)
    """Size of the executor's own thread pool for sync tools: sync calls at once, at most
    (async calls all start, as under ``ToolNode``; bound them per group with ``group_limits``).
    Default: :func:`default_max_parallel`."""
    group_limits: dict[str, _Positive] = Field(default_factory=dict)
    """Concurrency group -> calls of the group at once (e.g. ``{"github": 4}``), over the
    tools' ``max_concurrency``."""
    runtime_mode: RuntimeMode = "production"
    """``production`` (published and deprecated tools are listed, chosen and run, deprecated
    ones with a note) or ``debug`` (drafts too). Disabled tools never run."""
    enabled_builtins: BuiltinFilter = Field(default_factory=BuiltinFilter)
    """Which built-in tools the model gets and whether the automatic tool search runs:
    ``None`` for the defaults, a list of names or ``fnmatch`` patterns, or
    ``{"allow": [...], "deny": [...]}`` (see :mod:`langgraph_toolbudget.core.gating`)."""
    tool_call_formats: ToolCallFormats | None = None
    """How the agent shows tools to the model and reads its calls: ``{"enabled": [...],
    "primary": ...}`` with ``native``, ``hermes``, ``mistral``, ``pythonic``, ``json`` (a
    list or one name also works). ``None``: native, else the text format the model's name
    suggests (Hermes by default). See ``docs/formats.md``."""
    model_supports_tools: Annotated[bool, Field(strict=True)] | None = None
    """Overrides the check of the model's native tool calling (``None``: ask the model;
    ``bind_tools`` missing or raising ``NotImplementedError`` means no)."""
    offload_over_chars: _Positive | None = 20_000
    """A tool result longer than this (in characters) is stored out of the conversation and
    replaced by a handle, its size, kind and a preview; the model reads it back with the
    output tools (``docs/offloading.md``). ``None`` turns this limit off."""
    offload_over_tokens: _Positive | None = None
    """The same limit in estimated tokens (4 characters each); with both set the smaller
    applies. With both ``None`` offloading is off."""
    offload_thread_cap_chars: _Positive = 20_000_000
    """Characters of offloaded outputs kept per thread; over it the oldest go first."""
    offload_ttl_minutes: float | None = 7 * 24 * 60
    """Time to live of offloaded outputs in stores that support TTLs (``SqliteStore``,
    ``PostgresStore``, LangGraph server); ``None``: kept until evicted."""
    offload_app_id: _Name | None = None
    """This app's name in the offload store's namespaces, so that only its runs read its
    outputs. ``None``: the assistant on LangGraph server, else a digest of the catalog's tool
    names. Set it when two apps with the same tools share a store and thread ids, or to keep
    handles readable across a change of the tool set."""
    jq_timeout_s: float = 5.0
    """Seconds one ``query_large_output`` may run; jq runs in a worker process, killed past it."""
    jq_memory_mb: _Positive = 512
    """Memory of the worker process of one ``query_large_output``, in MB. jq holds a JSON
    output in about 15 times its size: 512 fits outputs up to about 30 MB."""
    usage: Any = Field(default=None, repr=False)
    """A :class:`~langgraph_toolbudget.nodes.usage.ToolUsage`: the ranking nodes rank by the
    recorded history too, and the executor records the tools that ran successfully
    (``docs/usage.md``). ``None``: no learning."""
    max_schema_tokens: _Positive | None = None
    """A budget in schema tokens for ``select_tools`` (as ``schema_tokens`` counts them): each
    category's share is a share of tokens. ``max_tools`` (or ``model_size``), when set, caps
    the number of tools too; otherwise tokens alone bound it."""
    retriever: Any = Field(default=None, repr=False)
    """Your own tool search for the ranking nodes: a function ``(query, catalog)`` (sync or
    async) returning tool names, best first, or ``{tool name: score}``; fused with the
    lexical (and embedding) scores (``docs/selection.md``). A failure ranks the turn
    without it (logged). ``None``: not used."""
    retriever_weight: float = DEFAULT_RETRIEVER_WEIGHT
    """The share of the retrieval function's score in the fused score, from 0 to 1."""
    codemode_timeout_s: float = 10.0
    """CodeMode (``python_execution``, ``docs/codemode.md``): seconds a program may compute,
    may sleep in total, and may take from start to end with its tool calls (checked at each
    call); past it the program is stopped and the model is told why."""
    codemode_max_memory_mb: _Positive = 100
    """CodeMode: the sandbox's heap, in MB; a program that needs more is stopped."""
    codemode_max_tool_calls: _Positive = 50
    """CodeMode: tool calls one program may make; the next one raises inside the program."""
    codemode_max_output_chars: _Positive = 20_000
    """CodeMode: a result (printed output and last value) longer than this is offloaded as a
    large tool result (while offloading is on), else cut here with a note."""
    database_toolbox: Any = Field(default=None, repr=False)
    """A :class:`~langgraph_toolbudget.database.DatabaseToolbox`: the built-ins
    ``search_schemas`` and ``execute_sql`` (read-only SQL) over its sources, offered while
    one of them connects (``docs/database.md``). ``None``: no database tools."""

    def __init__(self, **options: Unpack[BudgetOptions]) -> None:
        self._validated(options, "BudgetConfig")

    def _validated(self, options: Mapping[str, Any], owner: str) -> None:
        """Set the options, validated; a problem raised naming ``owner`` (who took them)."""
        try:
            super().__init__(**options)
        except ValidationError as exc:
            raise _option_error(exc, owner, options) from None

    # --- checks pydantic's types cannot say -----------------------------------------------

    @field_validator("model_size", mode="before")
    @classmethod
    def _model_size(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _type("a model name (e.g. 'qwen3:8b') or a size in billions")
        if isinstance(value, int | float) and not (math.isfinite(value) and value > 0):
            raise _value("a size above 0, in billions (8) or parameters (8e9)")
        max_tools_for_model(value)  # raises if the size cannot be read
        return value

    @field_validator("mode", "runtime_mode", mode="before")
    @classmethod
    def _name(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            choices = get_args(cls.model_fields[str(info.field_name)].annotation)
            raise _type(" or ".join(repr(c) for c in choices))
        return value

    @field_validator("pinned", mode="before")
    @classmethod
    def _pinned(cls, value: Any) -> Any:
        if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
            example = f" (e.g. [{value!r}])" if isinstance(value, str) else ""
            raise _type(f"a list of tool names{example}")
        if not all(isinstance(v, str) for v in value):
            raise _type("a list of strings (tool names)")
        return tuple(dict.fromkeys(value))

    @field_validator("group_limits", mode="before")
    @classmethod
    def _group_limits(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _type("a mapping of concurrency group -> calls at once (e.g. {'github': 4})")
        return dict(value)

    @field_validator("embeddings")
    @classmethod
    def _embeddings(cls, value: Any) -> Any:
        methods = ("embed_documents", "embed_query")
        if value is None or isinstance(value, HybridScorer):
            return value
        if all(callable(getattr(value, m, None)) for m in methods):
            return value
        raise _type(
            "a LangChain Embeddings object (embed_documents, embed_query) or a HybridScorer"
        )

    @field_validator("enabled_builtins", mode="before")
    @classmethod
    def _enabled_builtins(cls, value: EnabledBuiltins | BuiltinFilter) -> BuiltinFilter:
        return BuiltinFilter.of(value)  # raises TypeError naming the accepted shapes

    @field_validator("tool_call_formats", mode="before")
    @classmethod
    def _tool_call_formats(cls, value: ToolCallFormatsSpec | ToolCallFormats) -> Any:
        return ToolCallFormats.of(value)  # a TypeError names the accepted shapes

    @field_validator(
        "offload_ttl_minutes",
        "retriever_weight",
        "jq_timeout_s",
        "codemode_timeout_s",
        mode="before",
    )
    @classmethod
    def _number(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise _type("a number")
        return value

    @field_validator("offload_ttl_minutes")
    @classmethod
    def _ttl(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value > 0):
            raise _value("> 0 minutes, or None (kept until evicted)")
        return value

    @field_validator("jq_timeout_s")
    @classmethod
    def _jq_timeout(cls, value: float) -> float:
        if not (math.isfinite(value) and value > 0):
            raise _value("> 0 seconds")
        return value

    @field_validator("retriever_weight")
    @classmethod
    def _weight(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise _value("in [0, 1]")
        return value

    @field_validator("codemode_timeout_s")
    @classmethod
    def _seconds(cls, value: float) -> float:
        if not (math.isfinite(value) and value > 0):
            raise _value("> 0 seconds")
        return value

    @field_validator("database_toolbox")
    @classmethod
    def _database_toolbox(cls, value: Any) -> Any:
        methods = ("reachable_sources", "search", "execute")
        if value is None or all(callable(getattr(value, m, None)) for m in methods):
            return value
        raise _type("a DatabaseToolbox (langgraph_toolbudget.DatabaseToolbox({...})) or None")

    @field_validator("usage")
    @classmethod
    def _usage(cls, value: Any) -> Any:
        methods = ("record_run", "scores", "attach")
        if value is None or all(callable(getattr(value, m, None)) for m in methods):
            return value
        raise _type("a ToolUsage (langgraph_toolbudget.ToolUsage()) or None")

    @field_validator("retriever")
    @classmethod
    def _retriever(cls, value: Any) -> Any:
        if value is None or callable(value):
            return value
        raise _type("a function (query, catalog) -> tool names or {name: score}, or None")

    @model_validator(mode="after")
    def _pinned_fit(self) -> BudgetConfig:
        # Pinned tools are always visible, never evicted: a cap below them cannot hold.
        if self.max_visible is not None and len(self.pinned) > self.max_visible:
            raise PydanticCustomError(
                "option_conflict",
                PINNED_OVER_CAP_ERROR.format(
                    n=len(self.pinned), pinned=", ".join(self.pinned), cap=self.max_visible
                ),
            )
        return self

    # --- what the options add up to ---------------------------------------------------------

    def __hash__(self) -> int:
        return hash((self.max_tools, self.model_size, self.mode, self.pinned, self.runtime_mode))

    @property
    def offloading(self) -> bool:
        """Whether large tool results are offloaded (either offload limit is set)."""
        return self.offload_over_chars is not None or self.offload_over_tokens is not None

    @property
    def builtin_filter(self) -> BuiltinFilter:
        """``enabled_builtins``: which built-in tools are on."""
        return self.enabled_builtins

    @property
    def budget(self) -> int:
        """The budget in force: ``max_tools``, else the ``model_size`` preset, else 8."""
        if self.max_tools is not None:
            return self.max_tools
        if self.model_size is not None:
            return max_tools_for_model(self.model_size)
        return DEFAULT_MAX_TOOLS

    @property
    def tool_cap(self) -> int | None:
        """The count cap of ``select_tools``: the budget, or None under a token budget alone."""
        tokens_only = self.max_schema_tokens is not None
        if tokens_only and self.max_tools is None and self.model_size is None:
            return None
        return self.budget

    def visible_cap(self, free: int = 0) -> int:
        """The cap on the visible set: ``max_visible``, else ``2 * budget + search_limit + free``.

        The derived cap is at least :data:`MIN_DEFAULT_VISIBLE` (before ``free``), so a tiny
        budget still leaves room for what the meta-tools load. Under a token budget alone
        (:attr:`tool_cap` is None) ``budget`` there is the most tools ``max_schema_tokens``
        can buy, ``max_schema_tokens // MIN_TOOL_TOKENS``: the cap never cuts what the
        token budget chose.

        Args:
            free: how many tools are visible without budget (``always``, pinned,
                ``human``); they count toward the cap but are never evicted.
        """
        if self.max_visible is not None:
            return self.max_visible
        budget = self.budget
        if self.tool_cap is None and self.max_schema_tokens is not None:
            budget = self.max_schema_tokens // MIN_TOOL_TOKENS
        return max(MIN_DEFAULT_VISIBLE, 2 * budget + self.search_limit) + free

    def free_tools_within_cap(self, catalog: ToolCatalog) -> list[str]:
        """The tools ``catalog`` makes visible without budget (``always``, the ``human`` and
        ``structured_output`` categories, ``pinned``), refused when ``max_visible`` is below
        their number: they are never evicted, so such a cap could not hold, and the model
        could load no tool. Every node that caps the visible set checks it when built.

        Args:
            catalog: the catalog, in the runtime mode the node uses.

        Returns:
            Those tools (:func:`~langgraph_toolbudget.core.selection.free_tools`).

        Raises:
            ValueError: ``max_visible`` is below their number (:data:`FREE_OVER_CAP_ERROR`).
        """
        free = free_tools(catalog, self.pinned)
        cap = self.max_visible
        if cap is not None and len(free) > cap:
            raise ValueError(
                FREE_OVER_CAP_ERROR.format(cap=cap, n=len(free), names=clip_names(free))
            )
        return free

    # --- changing options -------------------------------------------------------------------

    def override(self, **changes: Unpack[BudgetOptions]) -> BudgetConfig:
        """A validated copy with ``changes`` applied (``None`` sets an option to ``None``).

        Raises:
            TypeError: an unknown option name (the message names the closest), or a value
                of the wrong type.
            ValueError: a value out of range.
        """
        return self._changed(changes, "BudgetConfig")

    def _changed(self, changes: Mapping[str, Any], owner: str) -> BudgetConfig:
        """:meth:`override`, its errors naming ``owner`` (who took the options)."""
        if not changes:
            return self
        # The options set so far and the changes, not every field: the copy's
        # ``model_fields_set`` still tells what was chosen from what was left at its default.
        chosen = {name: getattr(self, name) for name in self.model_fields_set}
        changed = type(self).__new__(type(self))
        changed._validated({**chosen, **changes}, owner)
        return changed

    @classmethod
    def resolve(
        cls,
        config: BudgetConfig | None,
        options: Mapping[str, Any],
        *,
        owner: str | Callable[..., Any] = "BudgetConfig",
    ) -> BudgetConfig:
        """``config`` (or the defaults) with ``options`` applied, validated: what a node that
        takes ``config=`` and ``**options`` works with.

        Args:
            config: the shared config, or None for the defaults.
            options: option name -> value; each replaces the config's value.
            owner: who took the options, named in the errors: the class or function itself
                (``SelectTools``), so that a misspelt keyword of its own
                (``strategie=``) is pointed to it too and listed with the options, or a name.

        Raises:
            TypeError: ``config`` is not a ``BudgetConfig``; an unknown option (the message
                names the closest one, of the owner's own keywords and the options, and
                ``owner``); a value of the wrong type.
            ValueError: a value out of range.
        """
        if config is None:
            config = cls()
        elif not isinstance(config, BudgetConfig):
            raise TypeError(NOT_A_CONFIG_ERROR.format(kind=type(config).__name__))
        unknown = sorted(set(options) - set(cls.model_fields))
        if unknown:
            raise unknown_option_error(owner, unknown[0], cls.model_fields)
        title = owner if isinstance(owner, str) else getattr(owner, "__name__", repr(owner))
        return config._changed(options, title)


class BudgetOptions(TypedDict, total=False):
    """:class:`BudgetConfig`'s options as keyword arguments: ``**options: Unpack[BudgetOptions]``.

    Each key is documented once, on the :class:`BudgetConfig` field of the same name
    (``tests/test_config.py`` keeps the two in step).
    """

    max_tools: int | None
    model_size: str | float | None
    min_per_category: int
    max_categories: int
    search_limit: int
    pinned: Sequence[str]
    max_visible: int | None
    mode: ExecutionMode
    max_iterations: int
    max_meta_calls: int
    enforce_visibility: bool
    embeddings: Embeddings | HybridScorer | None
    max_parallel: int
    group_limits: Mapping[str, int]
    runtime_mode: RuntimeMode
    enabled_builtins: EnabledBuiltins | BuiltinFilter
    tool_call_formats: ToolCallFormatsSpec | ToolCallFormats
    model_supports_tools: bool | None
    offload_over_chars: int | None
    offload_over_tokens: int | None
    offload_thread_cap_chars: int
    offload_ttl_minutes: float | None
    offload_app_id: str | None
    jq_timeout_s: float
    jq_memory_mb: int
    usage: ToolUsage | None
    max_schema_tokens: int | None
    retriever: RetrievalFunction | None
    retriever_weight: float
    codemode_timeout_s: float
    codemode_max_memory_mb: int
    codemode_max_tool_calls: int
    codemode_max_output_chars: int
    database_toolbox: DatabaseToolbox | None


def _node_text(what: str, *, empty: bool = False) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, str):
            raise _type(what)
        if not value and not empty:
            raise _value(what)
        return value

    return check


def _fraction(value: Any) -> Any:
    expected = "a number from 0 to 1 (a share of the best score)"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _type(expected)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise _value(expected)
    return float(value)


def _flag(value: Any) -> Any:
    if not isinstance(value, bool):
        raise _type("True or False")
    return value


def _strategy(value: Any) -> Any:
    allowed = get_args(SelectionStrategy)
    *first, last = (repr(c) for c in allowed)
    expected = f"{', '.join(first)} or {last}"
    if not isinstance(value, str):
        raise _type(expected)
    if value not in allowed:
        raise _value(expected)
    return value


def _tags(value: Any) -> Any:
    if value is None:
        return value
    if isinstance(value, str) or not isinstance(value, Sequence):
        example = f" (e.g. [{value!r}])" if isinstance(value, str) else ""
        raise _type(f"a list of strings{example} or None")
    if not all(isinstance(v, str) for v in value):
        raise _type("a list of strings or None")
    return list(value)


def _schema(*, optional: bool) -> Callable[[Any], Any]:
    what = (
        "a class or None"
        if optional
        else ("a class extending ToolBudgetState (class MyState(ToolBudgetState): ...)")
    )

    def check(value: Any) -> Any:
        if (value is None and optional) or isinstance(value, type):
            return value
        raise _type(what)

    return check


def _hooks(value: Any) -> Any:
    expected = "a callable (request, execute) -> result, a list of them, or None"
    if value is None or callable(value):
        return value
    if not isinstance(value, list | tuple) or not all(callable(hook) for hook in value):
        raise _type(expected)
    return value


def _error_type(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, Exception)


def _handle_tool_errors(value: Any) -> Any:
    if value is None or isinstance(value, bool | str) or callable(value):
        return value  # a callable: an exception type, or (exception) -> str, as ToolNode reads it
    if isinstance(value, tuple) and all(_error_type(v) for v in value):
        return value
    raise _type(
        "None (explained errors), True or False, a message, a callable (exception) -> str, "
        "an exception type or a tuple of them"
    )


class NodeOptions(TypedDict, total=False):
    """The keywords of the nodes and factories besides :class:`BudgetConfig`'s options, each
    with its rule: :func:`check_node_options` checks them as ``BudgetConfig`` checks its own.

    Each is documented on the node that takes it (``docs/configuration.md``, "Nodes").
    """

    name: Annotated[str, BeforeValidator(_node_text("a non-empty string (the node's name)"))]
    prefix: Annotated[str, BeforeValidator(_node_text("a string", empty=True))]
    min_relative_score: Annotated[float, BeforeValidator(_fraction)]
    every_turn: Annotated[bool, BeforeValidator(_flag)]
    strategy: Annotated[SelectionStrategy, BeforeValidator(_strategy)]
    messages_key: Annotated[str, BeforeValidator(_node_text("a non-empty string (a state key)"))]
    tags: Annotated[list[str] | None, BeforeValidator(_tags)]
    after: Annotated[str, BeforeValidator(_node_text("a node name (START by default)"))]
    then: Annotated[str, BeforeValidator(_node_text("a node name (END by default)"))]
    state_schema: Annotated[type, BeforeValidator(_schema(optional=False))]
    context_schema: Annotated[type | None, BeforeValidator(_schema(optional=True))]
    wrap_tool_call: Annotated[Any, BeforeValidator(_hooks)]
    awrap_tool_call: Annotated[Any, BeforeValidator(_hooks)]
    handle_tool_errors: Annotated[Any, BeforeValidator(_handle_tool_errors)]


_NODE_OPTIONS = TypeAdapter(NodeOptions)


def check_node_options(owner: str | Callable[..., Any], **given: Any) -> None:
    """Check a node's or factory's own keywords by the rules of :class:`NodeOptions`.

    Args:
        owner: who took them (the class or function, or its name), named in the error.
        **given: keyword -> value, for keywords :class:`NodeOptions` declares.

    Raises:
        TypeError: a value of the wrong type, naming ``owner``, the option, the value and what
            it must be (``ToolSearch: option every_turn must be True or False, got 'no' (str).``).
        ValueError: a value out of range (``min_relative_score=2.0``, ``strategy="best"``).
    """
    try:
        _NODE_OPTIONS.validate_python(given)
    except ValidationError as exc:
        title = owner if isinstance(owner, str) else getattr(owner, "__name__", repr(owner))
        raise _option_error(exc, title, given) from None


def unknown_option_error(
    owner: str | Callable[..., Any], name: str, known: Mapping[str, Any] | Sequence[str]
) -> TypeError:
    """The error for an option ``owner`` does not have: the closest name, then all of them.

    ``owner``: a name, or the class or function that took the options, whose own keywords
    (:func:`_own_keywords`) are candidates for the closest name and listed too.
    """
    own = _own_keywords(owner)
    shared = sorted(set(known) - set(own))
    renamed = RENAMED_OPTIONS.get(name)
    if renamed in (*own, *shared):
        close = [renamed]
    else:
        close = get_close_matches(name, [*own, *shared], n=1, cutoff=0.6)
    hint = f" did you mean {close[0]}?" if close else ""
    listed = ", ".join(shared)
    if own:
        listed = OWN_AND_SHARED_OPTIONS.format(own=", ".join(own), shared=listed)
    title = owner if isinstance(owner, str) else getattr(owner, "__name__", repr(owner))
    return TypeError(UNKNOWN_OPTION_ERROR.format(owner=title, name=name, hint=hint, known=listed))


@functools.cache
def _own_keywords(owner: str | Callable[..., Any]) -> tuple[str, ...]:
    """The keywords a class (its constructor) or function takes besides ``**options``, sorted:
    what a caller may pass by name beside the ``BudgetConfig`` options; none for a name."""
    if isinstance(owner, str):
        return ()
    try:
        parameters = inspect.signature(owner).parameters.values()
    except (TypeError, ValueError):  # no readable signature (a builtin)
        return ()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(sorted(p.name for p in parameters if p.kind in named))


def _type(expected: str) -> PydanticCustomError:
    return PydanticCustomError("option_type", "must be {expected}", {"expected": expected})


def _value(expected: str) -> PydanticCustomError:
    return PydanticCustomError("option_value", "must be {expected}", {"expected": expected})


def _option_error(exc: ValidationError, owner: str, given: Mapping[str, Any]) -> Exception:
    """The first problem pydantic found, as a ``TypeError`` (a wrong type, an unknown name)
    or a ``ValueError`` (out of range), naming the option and what it must be."""
    error = exc.errors()[0]
    loc = error["loc"]
    if not loc:  # options in conflict: a sentence of our own naming them
        return ValueError(f"{owner}: {error['msg']}.")
    name = str(loc[0])
    if error["type"] == "extra_forbidden":
        return unknown_option_error(owner, name, BudgetConfig.model_fields)
    value = given.get(name)
    if len(loc) > 1 and isinstance(value, Mapping):  # one entry of a mapping option
        if loc[-1] == "[key]":
            name, value = f"{name} keys", loc[1]
        else:
            name, value = f"{name}[{loc[1]!r}]", value.get(loc[1])
    kind = error["type"]
    problem = _EXPECTED.get(kind) or str(error["msg"]).removeprefix("Value error, ")
    field = BudgetConfig.model_fields.get(name)
    if kind in _EXPECTED and field is not None and field.default is None:
        problem += " or None"
    for words, sign in (("greater than or equal to", ">="), ("less than or equal to", "<=")):
        problem = problem.replace(words, sign)
    problem = re.sub(r"^Input should be ", "must be ", problem)
    if not problem.startswith("must"):  # a sentence of our own checks
        name, problem = f"{name}:", problem.rstrip(".")
    message = option_message(owner, name, problem, value)
    is_type = kind.endswith("_type") or kind == "option_type"
    return TypeError(message) if is_type else ValueError(message)


_EXPECTED = {
    "int_type": "must be an integer",
    "bool_type": "must be True or False",
    "string_type": "must be a string",
    "float_type": "must be a number",
    "string_too_short": "must be a non-empty string",
}
"""Pydantic's error types, in the words of this package's messages."""
