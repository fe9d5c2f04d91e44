"""The checks of :class:`~langgraph_toolbudget.config.BudgetConfig`'s options, with errors
that name the option, what it must be and what it got."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, get_args

from langgraph_toolbudget.core.budget import max_tools_for_model
from langgraph_toolbudget.core.gating import BuiltinFilter
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.core.spec import check_runtime_mode
from langgraph_toolbudget.formats.settings import ToolCallFormats

if TYPE_CHECKING:
    from langgraph_toolbudget.config import BudgetConfig

ExecutionMode = Literal["sequential", "parallel_safe"]
"""``sequential``: one call after another. ``parallel_safe``: concurrently where metadata allows."""

__all__ = [
    "ExecutionMode",
    "OPTION_TYPE_ERROR",
    "OPTION_VALUE_ERROR",
    "UNKNOWN_OPTION_ERROR",
    "check_config",
]

OPTION_TYPE_ERROR = "BudgetConfig: {name} must be {expected}, got {value!r} ({kind})."
OPTION_VALUE_ERROR = "BudgetConfig: {name} must be {expected}, got {value!r}."
UNKNOWN_OPTION_ERROR = "BudgetConfig has no option {names}; options are: {known}."


def _check_int(name: str, value: Any, *, minimum: int, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        expected = "an integer" + (" or None" if optional else "")
        raise TypeError(
            OPTION_TYPE_ERROR.format(
                name=name, expected=expected, value=value, kind=type(value).__name__
            )
        )
    if value < minimum:
        raise ValueError(
            OPTION_VALUE_ERROR.format(name=name, expected=f">= {minimum}", value=value)
        )


def _type_error(name: str, expected: str, value: Any) -> TypeError:
    return TypeError(
        OPTION_TYPE_ERROR.format(
            name=name, expected=expected, value=value, kind=type(value).__name__
        )
    )


def _check_names(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise TypeError(
            OPTION_TYPE_ERROR.format(
                name=name,
                expected=f"a list of tool names (e.g. [{value!r}])"
                if isinstance(value, str)
                else "a list of tool names",
                value=value,
                kind=type(value).__name__,
            )
        )
    bad = [v for v in value if not isinstance(v, str)]
    if bad:
        raise TypeError(
            OPTION_TYPE_ERROR.format(
                name=name, expected="a list of strings", value=bad[0], kind=type(bad[0]).__name__
            )
        )
    return tuple(dict.fromkeys(value))


def _check_group_limits(value: Any) -> Mapping[str, int]:
    if not isinstance(value, Mapping):
        raise TypeError(
            OPTION_TYPE_ERROR.format(
                name="group_limits",
                expected="a mapping of concurrency group -> calls at once (e.g. {'github': 4})",
                value=value,
                kind=type(value).__name__,
            )
        )
    for group, limit in value.items():
        if not isinstance(group, str):
            raise TypeError(
                OPTION_TYPE_ERROR.format(
                    name="group_limits keys",
                    expected="concurrency group names (strings)",
                    value=group,
                    kind=type(group).__name__,
                )
            )
        _check_int(f"group_limits[{group!r}]", limit, minimum=1)
    return MappingProxyType(dict(value))


def check_config(config: BudgetConfig) -> None:
    """Validate (and normalise in place) every option of a new ``BudgetConfig``.

    Raises:
        TypeError: an option of the wrong type (the message names it).
        ValueError: an option out of range.
    """
    _check_int("max_tools", config.max_tools, minimum=0, optional=True)
    if config.model_size is not None:
        if isinstance(config.model_size, bool) or not isinstance(
            config.model_size, str | int | float
        ):
            raise TypeError(
                OPTION_TYPE_ERROR.format(
                    name="model_size",
                    expected="a model name (e.g. 'qwen3:8b') or a size in billions",
                    value=config.model_size,
                    kind=type(config.model_size).__name__,
                )
            )
        if isinstance(config.model_size, float) and not math.isfinite(config.model_size):
            raise ValueError(
                OPTION_VALUE_ERROR.format(
                    name="model_size", expected="a finite size", value=config.model_size
                )
            )
        max_tools_for_model(config.model_size)  # raises if the size cannot be read
    _check_int("min_per_category", config.min_per_category, minimum=0)
    _check_int("max_categories", config.max_categories, minimum=1)
    _check_int("search_limit", config.search_limit, minimum=0)
    object.__setattr__(config, "pinned", _check_names("pinned", config.pinned))
    _check_int("max_visible", config.max_visible, minimum=1, optional=True)
    _check_int("max_schema_tokens", config.max_schema_tokens, minimum=1, optional=True)
    if config.mode not in get_args(ExecutionMode):
        raise ValueError(
            OPTION_VALUE_ERROR.format(
                name="mode", expected="'sequential' or 'parallel_safe'", value=config.mode
            )
        )
    _check_int("max_iterations", config.max_iterations, minimum=1)
    _check_int("max_meta_calls", config.max_meta_calls, minimum=0)
    emb = config.embeddings
    if not (
        emb is None
        or isinstance(emb, HybridScorer)
        or all(callable(getattr(emb, m, None)) for m in ("embed_documents", "embed_query"))
    ):
        raise TypeError(
            OPTION_TYPE_ERROR.format(
                name="embeddings",
                expected="a LangChain Embeddings object (embed_documents, embed_query) "
                "or a HybridScorer",
                value=emb,
                kind=type(emb).__name__,
            )
        )
    _check_int("max_parallel", config.max_parallel, minimum=1)
    object.__setattr__(config, "group_limits", _check_group_limits(config.group_limits))
    if not isinstance(config.enforce_visibility, bool):
        raise TypeError(
            OPTION_TYPE_ERROR.format(
                name="enforce_visibility",
                expected="True or False",
                value=config.enforce_visibility,
                kind=type(config.enforce_visibility).__name__,
            )
        )
    try:
        check_runtime_mode(config.runtime_mode)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"BudgetConfig: {exc}") from None
    object.__setattr__(config, "enabled_builtins", BuiltinFilter.of(config.enabled_builtins))
    try:
        formats = ToolCallFormats.of(config.tool_call_formats)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"BudgetConfig: {exc}") from None
    object.__setattr__(config, "tool_call_formats", formats)
    if config.model_supports_tools is not None and not isinstance(
        config.model_supports_tools, bool
    ):
        raise TypeError(
            OPTION_TYPE_ERROR.format(
                name="model_supports_tools",
                expected="True, False or None (ask the model)",
                value=config.model_supports_tools,
                kind=type(config.model_supports_tools).__name__,
            )
        )
    _check_int("offload_over_chars", config.offload_over_chars, minimum=1, optional=True)
    _check_int("offload_over_tokens", config.offload_over_tokens, minimum=1, optional=True)
    _check_int("offload_thread_cap_chars", config.offload_thread_cap_chars, minimum=1)
    ttl = config.offload_ttl_minutes
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float)):
        raise TypeError(
            OPTION_TYPE_ERROR.format(
                name="offload_ttl_minutes",
                expected="minutes (a number) or None",
                value=ttl,
                kind=type(ttl).__name__,
            )
        )
    if ttl is not None and not (math.isfinite(ttl) and ttl > 0):
        raise ValueError(
            OPTION_VALUE_ERROR.format(name="offload_ttl_minutes", expected="> 0", value=ttl)
        )
    if config.usage is not None and not all(
        callable(getattr(config.usage, m, None)) for m in ("record_run", "scores", "attach")
    ):
        raise TypeError(
            OPTION_TYPE_ERROR.format(
                name="usage",
                expected="a ToolUsage (langgraph_toolbudget.ToolUsage()) or None",
                value=config.usage,
                kind=type(config.usage).__name__,
            )
        )
    _check_retriever(config)


def _check_retriever(config: BudgetConfig) -> None:
    if config.retriever is not None and not callable(config.retriever):
        expected = "a function (query, catalog) -> tool names or {name: score}, or None"
        raise _type_error("retriever", expected, config.retriever)
    weight = config.retriever_weight
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise _type_error("retriever_weight", "a number from 0 to 1", weight)
    if not 0.0 <= weight <= 1.0:
        raise ValueError(
            OPTION_VALUE_ERROR.format(name="retriever_weight", expected="in [0, 1]", value=weight)
        )
