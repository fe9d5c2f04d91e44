"""Budget arithmetic: how many tools each category may show. Pure functions.

Its one reason to change: the budget's arithmetic (shares, redistribution, presets).

Key Components:
    - :func:`per_category_budget`: ``max(min_per_category, max_tools // n)``.
    - :func:`allocate`: proportional selection over ranked categories, with
      leftover slots redistributed by relevance.
    - :func:`cut_evenly`: a budget's picks cut to fewer, each category keeping its best.
    - :func:`max_tools_for_model`: budget presets from a model's size.
    - :func:`format_for_model`: the text tool-call format a model's name makes
      clear (Qwen/Hermes: Hermes; Mistral: Mistral; Llama 3.2+: Pythonic).

Typical Usage:
    >>> allocate([("projects", [("a", 3.0), ("b", 2.0), ("c", 1.0)]),
    ...           ("github", [("d", 5.0)])], max_tools=4, min_per_category=1)
    ['a', 'b', 'd', 'c']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

__all__ = [
    "FORMAT_PRESETS",
    "MODEL_SIZE_PRESETS",
    "allocate",
    "cut_evenly",
    "format_for_model",
    "max_tools_for_model",
    "model_size_billions",
    "per_category_budget",
]

MODEL_SIZE_PRESETS = {"small": 2, "medium": 5, "large": 10}
"""Tools shown per turn by model size: small < 7B, medium 7-30B, large > 30B."""

UNKNOWN_MODEL_SIZE_ERROR = (
    "cannot tell the size of model {model!r}: name it with its parameter count "
    "(e.g. 'qwen3:8b', 'llama-3.1-70b'), pass a number of billions, or pass max_tools= directly."
)

FORMAT_PRESETS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"qwen|hermes|nous", re.IGNORECASE), "hermes"),
    (re.compile(r"mi[sx]tral|ministral|codestral|devstral|magistral", re.IGNORECASE), "mistral"),
    (re.compile(r"llama[-_ ]?(?:3\.[23]|4)", re.IGNORECASE), "pythonic"),
    (re.compile(r"llama[-_ ]?3\.1", re.IGNORECASE), "json"),
)
"""Model name pattern -> the text tool-call format its chat template uses (first match wins)."""

_SIZE = re.compile(r"(?<![a-z0-9.])(?:(\d+)x)?(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", re.IGNORECASE)


def per_category_budget(max_tools: int, n_categories: int, min_per_category: int = 2) -> int:
    """Slots each category gets before leftovers are redistributed.

    >>> per_category_budget(8, 2), per_category_budget(8, 1), per_category_budget(8, 5)
    (4, 8, 2)
    """
    if max_tools < 0 or min_per_category < 0:
        raise ValueError("max_tools and min_per_category must be >= 0")
    if n_categories <= 0:
        return 0
    return max(min_per_category, max_tools // n_categories)


def allocate(
    ranked: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    *,
    max_tools: int,
    min_per_category: int = 2,
    exclude: Sequence[str] = (),
) -> list[str]:
    """Pick tools from ranked categories under a proportional budget.

    Args:
        ranked: ``(category, [(tool, relevance), ...])`` with categories in
            priority order and tools best first.
        max_tools: hard cap on the result's length.
        min_per_category: floor of each category's share.
        exclude: tools that are visible already and must not be chosen again
            (they do not spend budget).

    Returns:
        Tool names, de-duplicated, at most ``max_tools``, deterministic: first
        each category's share in category order, then leftover slots (a small
        category leaves some) to the most relevant tools not yet chosen.
    """
    share = per_category_budget(max_tools, len(ranked), min_per_category)
    chosen: list[str] = []
    seen = set(exclude)
    leftovers: list[tuple[float, int, int, str]] = []
    for cat_pos, (_, tools) in enumerate(ranked):
        taken = 0
        for tool_pos, (name, score) in enumerate(tools):
            if name in seen:
                continue
            if taken < share and len(chosen) < max_tools:
                chosen.append(name)
                seen.add(name)
                taken += 1
            else:
                leftovers.append((-score, cat_pos, tool_pos, name))
    leftovers.sort()
    for _, _, _, name in leftovers:
        if len(chosen) >= max_tools:
            break
        if name not in seen:
            chosen.append(name)
            seen.add(name)
    return chosen


def cut_evenly(
    picks: Sequence[str], category_of: Mapping[str, str | None], limit: int
) -> list[str]:
    """At most ``limit`` of a budget's ``picks``, each category keeping its best, in their order.

    What a cap on the visible set smaller than the budget's choice keeps: the picks are taken
    round-robin across their categories (each category's first, then each one's second...),
    so every category keeps its best tools rather than the last categories losing all of
    theirs. Picks without a category (``None``) form one group of their own.

    Args:
        picks: the chosen tools, each category's best first (as :func:`allocate` and
            ``allocate_tokens`` return them).
        category_of: tool -> the category it was chosen for (missing: ``None``).
        limit: how many to keep.

    Returns:
        The kept picks, in the order of ``picks`` (a name listed twice kept once).

    >>> cut_evenly(["a1", "a2", "a3", "b1", "b2", "c1"], {"a1": "a", "a2": "a", "a3": "a",
    ...            "b1": "b", "b2": "b", "c1": "c"}, 4)
    ['a1', 'a2', 'b1', 'c1']
    """
    picks = list(dict.fromkeys(picks))
    if len(picks) <= limit:
        return picks
    rank: dict[str | None, int] = {}
    order: list[tuple[int, int, str]] = []
    groups: dict[str | None, int] = {}
    for name in picks:
        group = category_of.get(name)
        groups.setdefault(group, len(groups))
        rank[group] = rank.get(group, -1) + 1
        order.append((rank[group], groups[group], name))
    kept = {name for _, _, name in sorted(order)[: max(limit, 0)]}
    return [n for n in picks if n in kept]


def model_size_billions(model: str | float | int) -> float | None:
    """Parameter count in billions from a number or a model name, else None.

    >>> model_size_billions("qwen3:8b"), model_size_billions("llama-3.1-70B-instruct")
    (8.0, 70.0)
    """
    if isinstance(model, bool):
        return None
    if isinstance(model, (int, float)):
        return float(model) / 1e9 if model > 1e5 else float(model)
    sizes = []
    for experts, number, unit in _SIZE.findall(model):
        value = float(number) * (int(experts) if experts else 1)  # mixtral:8x7b: 8 x 7B total
        sizes.append(value / 1000 if unit.lower() == "m" else value)
    return max(sizes) if sizes else None


def max_tools_for_model(model: str | float | int) -> int:
    """Budget preset for a model: small (<7B) 2, medium (7-30B) 5, large (>30B) 10.

    Args:
        model: a model name with its size (``"qwen3:8b"``), a number of
            billions (``8``) or of parameters (``8e9``).

    Raises:
        ValueError: the size cannot be read from ``model``.
    """
    size = model_size_billions(model)
    if size is None:
        raise ValueError(UNKNOWN_MODEL_SIZE_ERROR.format(model=model))
    if size < 7:
        return MODEL_SIZE_PRESETS["small"]
    if size <= 30:
        return MODEL_SIZE_PRESETS["medium"]
    return MODEL_SIZE_PRESETS["large"]


def format_for_model(model: str | float | int | None) -> str | None:
    """The text tool-call format a model's name makes clear, else None.

    Used when the model has no native tool calling and ``tool_call_formats`` is
    not set (see :data:`FORMAT_PRESETS`).

    >>> format_for_model("qwen2.5:7b"), format_for_model("mistral-7b-instruct-v0.3")
    ('hermes', 'mistral')
    >>> format_for_model("llama3.2:3b"), format_for_model("gpt-4o"), format_for_model(8)
    ('pythonic', None, None)
    """
    if not isinstance(model, str):
        return None
    return next((fmt for pattern, fmt in FORMAT_PRESETS if pattern.search(model)), None)
