"""Schema-token estimates: what showing a set of tools costs per model call, per format.

Its one reason to change: how schema tokens are estimated.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool

__all__ = ["CHARS_PER_TOKEN", "schema_tokens", "token_savings"]

CHARS_PER_TOKEN = 4.0
"""Characters per token of JSON tool schemas: the usual estimate for BPE tokenizers
(no tokenizer download needed, so it works offline); ratios between tool sets,
which is what the benchmarks report, do not depend on it."""


def schema_tokens(tools: Iterable[Any], tool_format: str = "native") -> int:
    """Estimated prompt tokens of showing ``tools`` to a chat model in ``tool_format``.

    ``native``: the tools' JSON schemas as the provider sends them. A text
    format (``hermes``, ``mistral``, ``pythonic``, ``json``): exactly the text
    it writes into the system prompt, instructions included.

    Args:
        tools: LangChain tools (or anything ``convert_to_openai_tool`` accepts).
        tool_format: a registered format name (see :mod:`langgraph_toolbudget.formats`).

    Raises:
        ValueError: an unknown format name.

    >>> from langchain_core.tools import tool
    >>> @tool
    ... def ping(host: str) -> str:
    ...     '''Ping a host.'''
    ...     return host
    >>> schema_tokens([ping]) > 0, schema_tokens([ping], "hermes") > schema_tokens([ping])
    (True, True)
    """
    from langgraph_toolbudget.formats import get_format  # formats/ sits beside core/

    schemas = [convert_to_openai_tool(t) for t in tools]
    return round(len(get_format(tool_format).render_tools(schemas)) / CHARS_PER_TOKEN)


def token_savings(bound: Iterable[Any], every_tool: Iterable[Any]) -> dict[str, Any]:
    """What binding ``bound`` (the built-ins and the visible tools) costs per model call
    against the one baseline every report uses: binding ``every_tool`` of the catalog, which is
    what an app without a tool budget sends (no meta-tools).

    Returns:
        ``{"all", "chosen", "saved", "saved_ratio"}`` in schema tokens.
    """
    every = schema_tokens(every_tool)
    spent = schema_tokens(bound)
    return {
        "all": every,
        "chosen": spent,
        "saved": every - spent,
        "saved_ratio": round(1 - spent / every, 4) if every else 0.0,
    }
