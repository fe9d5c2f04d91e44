"""One configuration for every node: :class:`BudgetConfig`, frozen and validated once.

Key Components:
    - :class:`BudgetConfig`: the options the nodes, the prebuilt agent and the
      executor share (budget, search limit, working-set cap, execution mode,
      loop bounds). Build one and hand it to every node, so ``select_tools``
      and the executor's ``request_more_tools`` load tools under the same budget.
    - :meth:`BudgetConfig.override`: a validated copy with some options changed.

Typical Usage:
    ```python
    config = BudgetConfig(max_tools=6, max_visible=12)
    graph.add_node("select_tools", SelectTools(catalog, config=config))
    graph.add_node("tools", ToolExecutor(catalog, config=config))
    small = config.override(model_size="qwen3:4b")  # budget from the model-size preset
    ```
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph_toolbudget.config_checks import (
    UNKNOWN_OPTION_ERROR,
    ExecutionMode,
    check_config,
)
from langgraph_toolbudget.core.budget import max_tools_for_model
from langgraph_toolbudget.core.gating import BuiltinFilter, EnabledBuiltins
from langgraph_toolbudget.core.retrieval import DEFAULT_RETRIEVER_WEIGHT
from langgraph_toolbudget.core.spec import RuntimeMode
from langgraph_toolbudget.formats.settings import ToolCallFormats, ToolCallFormatsSpec

__all__ = ["DEFAULT_MAX_TOOLS", "BudgetConfig", "ExecutionMode", "RuntimeMode"]


DEFAULT_MAX_TOOLS = 8
"""The budget when neither ``max_tools`` nor ``model_size`` is given."""

MIN_DEFAULT_VISIBLE = 12
"""The floor of the default visible-set cap (:meth:`BudgetConfig.visible_cap`), before the
tools visible for free: this turn's few tools plus what the meta-tools load still fit."""


@dataclass(frozen=True)
class BudgetConfig:
    """The options every node of the tool budget shares, validated once.

    A frozen dataclass: change it with :meth:`override`, which validates again.
    Every node takes ``config=`` and explicit keyword arguments that override
    single options; a node's keyword left at ``None`` takes the config's value.

    Attributes:
        max_tools: tools ``select_tools`` and ``request_more_tools`` choose per
            turn (the budget). ``None``: the preset of ``model_size``, else
            :data:`DEFAULT_MAX_TOOLS`. See :attr:`budget`.
        model_size: a model name or size for the budget presets, used when
            ``max_tools`` is None: small (<7B) 2, medium (7-30B) 5, large (>30B) 10.
        min_per_category: floor of each category's share of the budget.
        max_categories: categories ``classify_intent`` returns at most.
        search_limit: tools the automatic tool search adds at most.
        pinned: tools always visible ("pre-discovered"), outside the budget.
        max_visible: hard cap on the visible set across turns; adding beyond it
            evicts the least recently used unpinned tools. ``None`` (default):
            a cap derived from the budget, ``2 * budget + search_limit`` (at
            least :data:`MIN_DEFAULT_VISIBLE`) plus
            the tools visible for free (:meth:`visible_cap`): this turn's
            selection and the previous turn's stay visible, older ones go, so a
            long conversation never binds the whole catalog.
        mode: ``sequential`` or ``parallel_safe`` execution of tool calls.
        max_iterations: model calls per user turn.
        max_meta_calls: meta-tool calls per user turn.
        enforce_visibility: refuse calls to tools that exist but are not visible.
        embeddings: optional LangChain ``Embeddings`` (or a
            :class:`~langgraph_toolbudget.core.semantic.HybridScorer`) that
            classify_intent, select_tools and tool_search fuse with BM25.
        max_parallel: the size of the executor's own thread pool, where sync
            tools run (never the interpreter's default pool): at most this many
            sync calls run at once. Async calls all start, as under ``ToolNode``
            (bound them per group with ``group_limits``).
        group_limits: concurrency group -> calls of the group that may run at
            once (e.g. ``{"github": 4}``), over the tools' ``max_concurrency``.
        runtime_mode: ``production`` (the default: published and deprecated
            tools are listed and run, deprecated ones with a note on their
            results) or ``debug`` (draft tools too). Disabled tools never run.
            The execution mode is ``mode``.
        enabled_builtins: which built-in tools the model gets (the meta-tools
            and the families of later features) and whether the automatic tool
            search runs (``"tool_search"``): ``None`` for the defaults, a list
            of names or ``fnmatch`` patterns, or ``{"allow": [...], "deny": [...]}``
            (see :mod:`langgraph_toolbudget.core.gating`).
        tool_call_formats: how the agent nodes show tools to the model and read
            its calls: ``{"enabled": [...], "primary": ...}`` with the names
            ``native``, ``hermes``, ``mistral``, ``pythonic``, ``json`` (a list
            or one name also works). The primary is used when available, else
            the first enabled one that is; native only when the model really
            calls tools. ``None``: native, else the text format the model's
            name suggests (Hermes by default). See ``docs/formats.md``.
        model_supports_tools: overrides the check of the model's native tool
            calling (``None``: ask the model: ``bind_tools`` missing or raising
            ``NotImplementedError`` means no).
        offload_over_chars: a tool result longer than this (in characters) is
            stored out of the conversation and replaced by a handle, its size,
            kind and a preview; the model reads it back with the output tools
            (see ``docs/offloading.md``). ``None`` turns this limit off.
        offload_over_tokens: the same limit in estimated tokens (4 characters
            each); with both set the smaller applies. ``None`` (the default):
            only ``offload_over_chars``. With both ``None`` offloading is off.
        offload_thread_cap_chars: characters of offloaded outputs kept per
            thread; over it the thread's oldest outputs are evicted first.
        offload_ttl_minutes: time to live of offloaded outputs in stores that
            support TTLs (``SqliteStore``, ``PostgresStore``, LangGraph
            server); ``None``: kept until evicted.
        usage: a :class:`~langgraph_toolbudget.nodes.usage.ToolUsage`: the
            ranking nodes rank by the recorded history too, and the executor
            and agent record the tools that ran successfully (see
            ``docs/usage.md``). ``None``: no learning.
        max_schema_tokens: a budget in schema tokens for ``select_tools``
            (measured as ``schema_tokens`` measures them): each category's share
            is a share of tokens. ``max_tools`` (or ``model_size``), when set,
            caps the number of tools too; otherwise tokens alone bound it.
        retriever: your own tool search, for the ranking nodes: a function
            ``(query, catalog)`` (sync or async) returning tool names, best
            first, or ``{tool name: score}``; fused with the lexical (and
            embedding) scores like embedding scores are (see ``docs/selection.md``).
            A failure ranks the turn without it (logged). ``None``: not used.
        retriever_weight: the share of the retrieval function's score in the
            fused score, from 0 to 1.

    Raises:
        TypeError: an option of the wrong type (the message names it).
        ValueError: an option out of range, or a ``model_size`` whose size
            cannot be read.

    Example:
        ```python
        config = BudgetConfig(model_size="qwen3:8b")  # budget 5
        config.budget, config.override(max_tools=3).budget  # (5, 3)
        ```
    """

    max_tools: int | None = None
    model_size: str | float | None = None
    min_per_category: int = 2
    max_categories: int = 3
    search_limit: int = 5
    pinned: tuple[str, ...] = ()
    max_visible: int | None = None
    mode: ExecutionMode = "parallel_safe"
    max_iterations: int = 5
    max_meta_calls: int = 8
    enforce_visibility: bool = True
    embeddings: Any = field(default=None, compare=False, repr=False)
    max_parallel: int = 16
    group_limits: Mapping[str, int] = field(default_factory=dict, hash=False)
    runtime_mode: RuntimeMode = "production"
    enabled_builtins: EnabledBuiltins | BuiltinFilter = None
    tool_call_formats: ToolCallFormatsSpec | ToolCallFormats = None
    model_supports_tools: bool | None = None
    offload_over_chars: int | None = 20_000
    offload_over_tokens: int | None = None
    offload_thread_cap_chars: int = 20_000_000
    offload_ttl_minutes: float | None = 7 * 24 * 60
    usage: Any = field(default=None, compare=False, repr=False)
    max_schema_tokens: int | None = None
    retriever: Any = field(default=None, compare=False, repr=False)
    retriever_weight: float = DEFAULT_RETRIEVER_WEIGHT

    def __post_init__(self) -> None:
        check_config(self)

    @property
    def offloading(self) -> bool:
        """Whether large tool results are offloaded (either offload limit is set)."""
        return self.offload_over_chars is not None or self.offload_over_tokens is not None

    @property
    def builtin_filter(self) -> BuiltinFilter:
        """``enabled_builtins``, validated: which built-in tools are on."""
        return BuiltinFilter.of(self.enabled_builtins)

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
        budget still leaves room for what the meta-tools load.

        Args:
            free: how many tools are visible without budget (``always``, pinned,
                ``human``); they count toward the cap but are never evicted.
        """
        if self.max_visible is not None:
            return self.max_visible
        return max(MIN_DEFAULT_VISIBLE, 2 * self.budget + self.search_limit) + free

    def override(self, **changes: Any) -> BudgetConfig:
        """A validated copy with ``changes`` applied; ``None`` values are ignored.

        ``None`` means "keep the current value", so a node can pass its keyword
        arguments straight through. To clear an optional option (``max_visible``,
        ``max_tools``, ``model_size``) build a new config.

        Raises:
            TypeError: an unknown option name, or a value of the wrong type.
            ValueError: a value out of range.
        """
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise TypeError(
                UNKNOWN_OPTION_ERROR.format(
                    names=", ".join(unknown), known=", ".join(sorted(known))
                )
            )
        given = {k: v for k, v in changes.items() if v is not None}
        return dataclasses.replace(self, **given) if given else self


def resolve_config(config: BudgetConfig | None, **changes: Any) -> BudgetConfig:
    """``config`` (or the defaults) with the non-None ``changes`` applied, validated.

    Raises:
        TypeError: ``config`` is not a :class:`BudgetConfig`.
    """
    if config is None:
        config = BudgetConfig()
    elif not isinstance(config, BudgetConfig):
        raise TypeError(
            f"config must be a BudgetConfig, got {type(config).__name__}: "
            "build one with BudgetConfig(max_tools=..., ...)."
        )
    return config.override(**changes)


class _Keep(enum.Enum):
    KEEP = "keep"


KEEP = _Keep.KEEP
"""Default of a node's ``offload_over_chars``: take the config's value (``None`` turns it off)."""
Keep = Literal[_Keep.KEEP]


def resolve_offload(config: BudgetConfig, offload_over_chars: int | None | Keep) -> BudgetConfig:
    """``config`` with a node's ``offload_over_chars`` applied, where ``None`` means "off".

    Raises:
        TypeError: a value that is not an integer or None.
        ValueError: a value below 1.
    """
    if offload_over_chars is KEEP:
        return config
    return dataclasses.replace(config, offload_over_chars=offload_over_chars)
