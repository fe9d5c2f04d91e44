"""Offloading large tool outputs into a LangGraph store, out of the conversation.

Its one reason to change: when a result is offloaded and what stands in for it.

A tool result over ``offload_over_chars`` (or ``offload_over_tokens``) is
stored whole, and its ``ToolMessage`` gets a stub instead: a handle, the size,
the kind (text or JSON, with its top-level keys or length), a preview and how
to read more with the output tools
(:mod:`langgraph_toolbudget.execution.output_tools`). The same facts go in the
message's ``artifact`` as ``{"offloaded": {"handle", "chars", "kind"}}``.

Where the outputs are kept, and who may read them back, is
:mod:`langgraph_toolbudget.execution.output_store`.

Key Components:
    - :class:`Offloader`: the step after the regular calls of a batch that
      replaces large results with stubs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.large_output import (
    OutputInfo,
    describe_output,
    estimate_tokens,
    output_text,
)
from langgraph_toolbudget.execution.output_store import OffloadStore
from langgraph_toolbudget.execution.policy import add_note, deprecation_note

__all__ = ["Offloader", "offload_limit"]

STUB_TEMPLATE = (
    "[Large output offloaded: {chars:,} characters (~{tokens:,} tokens) of {kind_name}, "
    "{shape}. It is stored under handle {handle!r}, not shown here.]{dropped}\n"
    "{label}:\n{preview}\n{how}"
)
HOW_TO_READ = {
    "read_large_output": "read_large_output(handle={handle!r}, start=0, length={limit}) reads "
    "characters",
    "search_large_output": "search_large_output(handle={handle!r}, pattern='...') finds lines",
    "query_large_output": "query_large_output(handle={handle!r}, jq_expression='...') runs jq"
    "{examples}",
}
DROPPED_NOTE = " (Its artifact of {chars:,} characters was dropped.)"
DEEP_DROPPED_NOTE = (
    " (Its artifact was dropped: it is nested deeper than JSON can be written ({depth}+ levels).)"
)
MAX_JSON_DEPTH = 100
"""Tool content nested deeper than Python's JSON encoder can write (it recurses: past about
900 levels it raises ``RecursionError``) is offloaded whatever its size, as its JSON cut at
this depth."""
CUT_MARK = "[nested deeper than {depth} levels: cut]"


def offload_limit(config: BudgetConfig) -> int | None:
    """The size in characters over which a result is offloaded (None: offloading is off)."""
    limits = []
    if config.offload_over_chars is not None:
        limits.append(config.offload_over_chars)
    if config.offload_over_tokens is not None:
        limits.append(round(config.offload_over_tokens * 4))
    return min(limits) if limits else None


def holds_offloaded_output(messages: Sequence[Any]) -> bool:
    """Whether a conversation holds a tool message whose output was offloaded (a stub), so
    the model may need the output tools to read it."""
    return any(
        isinstance(m, ToolMessage) and isinstance(m.artifact, dict) and "offloaded" in m.artifact
        for m in messages
    )


def _size(value: Any) -> int | None:
    """The characters of ``value`` as JSON; None when it is nested too deep to write."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str))
    except RecursionError:
        return None


def _cut(value: Any, depth: int = 0) -> Any:
    """``value`` with the lists and dicts below :data:`MAX_JSON_DEPTH` levels replaced by
    :data:`CUT_MARK` (recursion at most that deep)."""
    if isinstance(value, dict | list | tuple) and depth >= MAX_JSON_DEPTH:
        return CUT_MARK.format(depth=MAX_JSON_DEPTH)
    if isinstance(value, dict):
        return {k: _cut(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cut(v, depth + 1) for v in value]
    return value


class Offloader:
    """Replaces large tool results with stubs, after the regular calls of a batch.

    Args:
        config: the shared options (``offload_over_chars``, ``offload_over_tokens``,
            the cap and TTL).
        readers: the enabled output tools, named in the stub's "how to read more".
        app: the app's label in the namespaces (:func:`app_key` of its tool names).
        catalog: the tools whose results are offloaded: the stub of a deprecated
            tool's result ends with the deprecation note, as the result did (None:
            no notes).
    """

    def __init__(
        self,
        config: BudgetConfig,
        readers: Sequence[str],
        *,
        app: str,
        catalog: ToolCatalog | None = None,
    ) -> None:
        limit = offload_limit(config)
        if limit is None:
            raise ValueError("Offloader needs offload_over_chars or offload_over_tokens")
        self.limit = limit
        self.config = config
        self.app = app
        self.readers = [r for r in HOW_TO_READ if r in readers]
        self.catalog = catalog

    def stub(self, info: OutputInfo, handle: str, dropped: str = "") -> tuple[str, dict[str, Any]]:
        """The stub content and the ``offloaded`` facts of a stored output (``dropped``: the
        note that the tool's artifact was dropped, if it was)."""
        kind_name = "JSON" if info.kind == "json" else "text"
        examples = ", ".join(repr(e) for e in info.jq_examples)
        how = "; ".join(
            HOW_TO_READ[r].format(
                handle=handle,
                limit=min(self.limit, 4000),
                examples=f" (e.g. {examples})" if examples else "",
            )
            for r in self.readers
            if r != "query_large_output" or info.kind == "json"  # jq reads JSON only
        )
        content = STUB_TEMPLATE.format(
            chars=info.chars,
            tokens=estimate_tokens(info.chars),
            kind_name=kind_name,
            shape=info.shape,
            handle=handle,
            dropped=dropped,
            label="Structure (first items of each array)" if info.kind == "json" else "Preview",
            preview=info.preview,
            how=f"Read more: {how}." if how else "",
        )
        facts = {"handle": handle, "chars": info.chars, "kind": info.kind, "shape": info.shape}
        return content, facts

    def _large(self, output: Any) -> str | None:
        if not isinstance(output, ToolMessage):
            return None
        try:
            text = output_text(output.content)
        except RecursionError:  # too deep to write as JSON, for any model too: offloaded, cut
            return json.dumps(_cut(output.content), ensure_ascii=False, default=str)
        return text if len(text) > self.limit else None

    def _replace(self, message: ToolMessage, info: OutputInfo, handle: str) -> ToolMessage:
        size = _size(message.artifact)
        if size is None:
            dropped = DEEP_DROPPED_NOTE.format(depth=MAX_JSON_DEPTH)
        else:
            dropped = DROPPED_NOTE.format(chars=size) if size > self.limit else ""
        content, facts = self.stub(info, handle, dropped=dropped)
        artifact: dict[str, Any] = {"offloaded": facts}
        if message.artifact is not None:
            if not dropped:
                artifact["artifact"] = message.artifact
            elif size is None:
                artifact["offloaded"]["artifact_dropped"] = "nested too deep to write as JSON"
            else:
                artifact["offloaded"]["artifact_dropped_chars"] = size
        stub = message.model_copy(update={"content": content, "artifact": artifact})
        note = deprecation_note(self.catalog, message.name or "") if self.catalog else None
        return stub if note is None else add_note(stub, stub.tool_call_id, note)

    def _found(self, results: dict[int, Any]) -> list[tuple[ToolMessage, str]]:
        """Every tool message over the limit (with its text), in call order."""
        found = []
        for output in results.values():
            for message in _tool_messages(output):
                text = self._large(message)
                if text is not None:
                    found.append((message, text))
        return found

    def apply(self, results: dict[int, Any], config: RunnableConfig) -> dict[int, Any]:
        """``results`` (call index -> output) with large tool messages offloaded (sync)."""
        large = self._found(results)
        if not large:
            return results
        store = OffloadStore.of(config, self.config, self.app)
        new: dict[int, ToolMessage] = {}
        for message, text in large:
            info = describe_output(text)
            handle = store.put(text, info.kind, message.name or "")
            new[id(message)] = self._replace(message, info, handle)
        return {i: _rebuilt(output, new) for i, output in results.items()}

    async def aapply(self, results: dict[int, Any], config: RunnableConfig) -> dict[int, Any]:
        """Async :meth:`apply`."""
        large = self._found(results)
        if not large:
            return results
        store = OffloadStore.of(config, self.config, self.app)
        new: dict[int, ToolMessage] = {}
        for message, text in large:
            info = describe_output(text)
            handle = await store.aput(text, info.kind, message.name or "")
            new[id(message)] = self._replace(message, info, handle)
        return {i: _rebuilt(output, new) for i, output in results.items()}


def _tool_messages(output: Any) -> list[ToolMessage]:
    """The tool messages of one call's output: itself, a list's, a ``Command``'s update's."""
    if isinstance(output, ToolMessage):
        return [output]
    if isinstance(output, list):
        return [m for item in output for m in _tool_messages(item)]
    if isinstance(output, Command) and isinstance(output.update, dict):
        return [m for m in output.update.get("messages", []) if isinstance(m, ToolMessage)]
    return []


def _rebuilt(output: Any, new: dict[int, ToolMessage]) -> Any:
    """``output`` with the messages in ``new`` (by ``id``) replaced."""
    if isinstance(output, ToolMessage):
        return new.get(id(output), output)
    if isinstance(output, list):
        return [_rebuilt(item, new) for item in output]
    if isinstance(output, Command) and isinstance(output.update, dict):
        messages = output.update.get("messages")
        if isinstance(messages, list) and any(id(m) in new for m in messages):
            update = {**output.update, "messages": [new.get(id(m), m) for m in messages]}
            return dataclasses.replace(output, update=update)
    return output
