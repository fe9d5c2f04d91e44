"""Offloading large tool outputs into a LangGraph store, out of the conversation.

Its one reason to change: where and how large outputs are stored and stubbed.

A tool result over ``offload_over_chars`` (or ``offload_over_tokens``) is
stored whole, and its ``ToolMessage`` gets a stub instead: a handle, the size,
the kind (text or JSON, with its top-level keys or length), a preview and how
to read more with the output tools
(:mod:`langgraph_toolbudget.execution.output_tools`). The same facts go in the
message's ``artifact`` as ``{"offloaded": {"handle", "chars", "kind"}}``.

Storage is a LangGraph ``BaseStore``: the store of the running graph (the one
it was compiled with, or LangGraph server's), else one process-wide
``InMemoryStore``. Outputs are namespaced per thread (and per assistant on
LangGraph server); each thread keeps at most ``offload_thread_cap_chars``
characters, evicting its oldest outputs first; stores that support a TTL get
``offload_ttl_minutes``.

Key Components:
    - :class:`OffloadStore`: one thread's outputs in a store (put, get, the
      index that orders them for eviction), sync and async.
    - :class:`Offloader`: the step after the regular calls of a batch that
      replaces large results with stubs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from langgraph_toolbudget._compat import runtime_of
from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.large_output import (
    OutputInfo,
    describe_output,
    estimate_tokens,
    output_text,
)

__all__ = ["NAMESPACE", "OffloadStore", "Offloader", "fallback_store", "offload_limit"]

NAMESPACE = ("toolbudget", "offload")
"""The first parts of every offload namespace: ``(*NAMESPACE, assistant, thread)``."""
INDEX_KEY = "__index__"
NO_THREAD = "_no_thread"

_FALLBACK = InMemoryStore()

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


def fallback_store() -> BaseStore:
    """The process-wide ``InMemoryStore`` used when the graph has no store."""
    return _FALLBACK


def offload_limit(config: BudgetConfig) -> int | None:
    """The size in characters over which a result is offloaded (None: offloading is off)."""
    limits = []
    if config.offload_over_chars is not None:
        limits.append(config.offload_over_chars)
    if config.offload_over_tokens is not None:
        limits.append(round(config.offload_over_tokens * 4))
    return min(limits) if limits else None


async def _async_or_thread(store: BaseStore, name: str, *args: Any, **kwargs: Any) -> Any:
    """``store.a<name>(...)``; a sync-only store (``SqliteStore``) runs ``<name>`` in a thread."""
    try:
        return await getattr(store, f"a{name}")(*args, **kwargs)
    except NotImplementedError:
        return await asyncio.to_thread(getattr(store, name), *args, **kwargs)


class OffloadStore:
    """The offloaded outputs of one thread in a LangGraph store.

    Args:
        store: the store.
        namespace: the thread's namespace.
        cap_chars: characters kept per thread; older outputs are evicted first.
        ttl_minutes: TTL of each item, where the store supports TTLs.
    """

    def __init__(
        self,
        store: BaseStore,
        namespace: tuple[str, ...],
        *,
        cap_chars: int,
        ttl_minutes: float | None,
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.cap_chars = cap_chars
        self._ttl = ttl_minutes if getattr(store, "supports_ttl", False) else None

    @classmethod
    def of(cls, config: RunnableConfig, budget: BudgetConfig) -> OffloadStore:
        """The store of the running graph (or the fallback), namespaced for this run's thread."""
        runtime = runtime_of(config)
        store = getattr(runtime, "store", None) or fallback_store()
        configurable = config.get("configurable") or {}
        metadata = config.get("metadata") or {}
        assistant = configurable.get("assistant_id") or metadata.get("assistant_id") or "_"
        thread = configurable.get("thread_id") or NO_THREAD
        return cls(
            store,
            (*NAMESPACE, str(assistant), str(thread)),
            cap_chars=budget.offload_thread_cap_chars,
            ttl_minutes=budget.offload_ttl_minutes,
        )

    # --- the pure part: what to write and delete ----------------------------------------------

    def _plan_put(
        self, index: list[list[Any]], chars: int
    ) -> tuple[str, list[list[Any]], list[str]]:
        """A new handle, the index after adding it, and the handles to evict."""
        handle = "out_" + uuid.uuid4().hex[:12]
        index = [*index, [handle, chars]]
        total = sum(int(n) for _, n in index)
        evicted: list[str] = []
        while total > self.cap_chars and len(index) > 1:
            old, n = index.pop(0)
            evicted.append(old)
            total -= int(n)
        return handle, index, evicted

    @staticmethod
    def _index_of(item: Any) -> list[list[Any]]:
        return list(item.value.get("items", [])) if item is not None else []

    def _value(self, text: str, kind: str, tool: str) -> dict[str, Any]:
        return {"text": text, "kind": kind, "chars": len(text), "tool": tool, "at": time.time()}

    # --- sync ---------------------------------------------------------------------------------

    def _writes(
        self, handle: str, value: dict[str, Any], index: list[list[Any]], evicted: list[str]
    ) -> list[PutOp]:
        """One batch: the output, the deletions of evicted ones, the new index."""
        return [
            PutOp(self.namespace, handle, value, ttl=self._ttl),
            *(PutOp(self.namespace, old, None) for old in evicted),
            PutOp(self.namespace, INDEX_KEY, {"items": index}, ttl=self._ttl),
        ]

    def put(self, text: str, kind: str, tool: str = "") -> str:
        """Store an output; returns its handle. Evicts the thread's oldest outputs over the cap."""
        index = self._index_of(self.store.get(self.namespace, INDEX_KEY))
        handle, index, evicted = self._plan_put(index, len(text))
        self.store.batch(self._writes(handle, self._value(text, kind, tool), index, evicted))
        return handle

    def get(self, handle: Any) -> dict[str, Any] | None:
        """The stored output of ``handle`` in this thread (None if absent or evicted)."""
        if not isinstance(handle, str) or not handle or handle == INDEX_KEY:
            return None
        item = self.store.get(self.namespace, handle)
        return None if item is None else dict(item.value)

    def handles(self) -> list[str]:
        """The thread's handles, oldest first."""
        return [h for h, _ in self._index_of(self.store.get(self.namespace, INDEX_KEY))]

    # --- async --------------------------------------------------------------------------------

    async def aput(self, text: str, kind: str, tool: str = "") -> str:
        """Async :meth:`put`."""
        item = await _async_or_thread(self.store, "get", self.namespace, INDEX_KEY)
        handle, index, evicted = self._plan_put(self._index_of(item), len(text))
        writes = self._writes(handle, self._value(text, kind, tool), index, evicted)
        await _async_or_thread(self.store, "batch", writes)
        return handle

    async def ahandles(self) -> list[str]:
        """Async :meth:`handles`."""
        item = await _async_or_thread(self.store, "get", self.namespace, INDEX_KEY)
        return [h for h, _ in self._index_of(item)]

    async def aget(self, handle: Any) -> dict[str, Any] | None:
        """Async :meth:`get`."""
        if not isinstance(handle, str) or not handle or handle == INDEX_KEY:
            return None
        item = await _async_or_thread(self.store, "get", self.namespace, handle)
        return None if item is None else dict(item.value)


def holds_offloaded_output(messages: Sequence[Any]) -> bool:
    """Whether a conversation holds a tool message whose output was offloaded (a stub), so
    the model may need the output tools to read it."""
    return any(
        isinstance(m, ToolMessage) and isinstance(m.artifact, dict) and "offloaded" in m.artifact
        for m in messages
    )


def _size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, default=str))


class Offloader:
    """Replaces large tool results with stubs, after the regular calls of a batch.

    Args:
        config: the shared options (``offload_over_chars``, ``offload_over_tokens``,
            the cap and TTL).
        readers: the enabled output tools, named in the stub's "how to read more".
    """

    def __init__(self, config: BudgetConfig, readers: Sequence[str]) -> None:
        limit = offload_limit(config)
        if limit is None:
            raise ValueError("Offloader needs offload_over_chars or offload_over_tokens")
        self.limit = limit
        self.config = config
        self.readers = [r for r in HOW_TO_READ if r in readers]

    def stub(self, info: OutputInfo, handle: str, dropped: int = 0) -> tuple[str, dict[str, Any]]:
        """The stub content and the ``offloaded`` facts of a stored output."""
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
            dropped=DROPPED_NOTE.format(chars=dropped) if dropped else "",
            label="Structure (first items of each array)" if info.kind == "json" else "Preview",
            preview=info.preview,
            how=f"Read more: {how}." if how else "",
        )
        facts = {"handle": handle, "chars": info.chars, "kind": info.kind, "shape": info.shape}
        return content, facts

    def _large(self, output: Any) -> str | None:
        if not isinstance(output, ToolMessage):
            return None
        text = output_text(output.content)
        return text if len(text) > self.limit else None

    def _replace(self, message: ToolMessage, info: OutputInfo, handle: str) -> ToolMessage:
        artifact_size = _size(message.artifact)
        keep = artifact_size <= self.limit
        content, facts = self.stub(info, handle, dropped=0 if keep else artifact_size)
        artifact: dict[str, Any] = {"offloaded": facts}
        if message.artifact is not None:
            if keep:
                artifact["artifact"] = message.artifact
            else:
                artifact["offloaded"]["artifact_dropped_chars"] = artifact_size
        return message.model_copy(update={"content": content, "artifact": artifact})

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
        store = OffloadStore.of(config, self.config)
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
        store = OffloadStore.of(config, self.config)
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
