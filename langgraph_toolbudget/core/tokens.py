"""Schema-token estimates: what binding a set of tools costs per model call."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool

__all__ = ["CHARS_PER_TOKEN", "schema_tokens"]

CHARS_PER_TOKEN = 4.0
"""Characters per token of JSON tool schemas: the usual estimate for BPE tokenizers
(no tokenizer download needed, so it works offline); ratios between tool sets,
which is what the benchmarks report, do not depend on it."""


def schema_tokens(tools: Iterable[Any]) -> int:
    """Estimated prompt tokens of the tools' JSON schemas as sent to a chat model.

    Args:
        tools: LangChain tools (or anything ``convert_to_openai_tool`` accepts).

    >>> from langchain_core.tools import tool
    >>> @tool
    ... def ping(host: str) -> str:
    ...     '''Ping a host.'''
    ...     return host
    >>> schema_tokens([ping]) > 0
    True
    """
    text = "".join(json.dumps(convert_to_openai_tool(t), separators=(",", ":")) for t in tools)
    return round(len(text) / CHARS_PER_TOKEN)
