"""Offloading large tool outputs into a LangGraph store, out of the conversation.

Its one reason to change: when a result is offloaded and what stands in for it.

A tool result over ``offload_over_chars`` (or ``offload_over_tokens``) is
stored whole, and its ``ToolMessage`` gets a stub instead: a handle, the size,
the kind (text or JSON, with its top-level keys or length), a preview and how
to read more with the output tools
(:mod:`langgraph_toolbudget.execution.output_tools`). The same facts go in the
message's ``artifact`` as ``{"offloaded": {"handle", "chars", "kind"}}``. Only text
counts: image, audio, video and file blocks go to the model as they are (as under
LangGraph's ``ToolNode``), kept after the stub when the text beside them is offloaded.

Where the outputs are kept, and who may read them back, is
:mod:`langgraph_toolbudget.execution.output_store`.

Key Components:
    - :class:`Offloader`: the step after the regular calls of a batch that
      replaces large results with stubs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.large_output import (
    OutputInfo,
    describe_output,
    estimate_tokens,
    media_blocks,
    output_text,
    read_limit,
)
from langgraph_toolbudget.core.limits import cut_deep
from langgraph_toolbudget.execution.output_store import OffloadStore
from langgraph_toolbudget.execution.outputs import DEEP_ARTIFACT, rebuilt, tool_messages
from langgraph_toolbudget.execution.policy import add_note, deprecation_note

__all__ = ["Offloader", "offload_limit"]

logger = logging.getLogger(__name__)

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
STORE_FAILED_TEMPLATE = (
    "{cut}\n[Output cut: the first {shown:,} of {chars:,} characters are shown. It was too "
    "large to show whole, and the output store could not keep it ({error}), so the rest is "
    "not kept. If you need more of it, call the tool again asking for less.]"
)
"""The answer in place of an output the store refused to keep (the store down, or full)."""
DEEP_DROPPED_NOTE = " (Its artifact was dropped: it is {reason}.)"


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
    return _holds(messages, {"offloaded"})


def holds_shortened_output(messages: Sequence[Any]) -> bool:
    """Whether a tool message of ``messages`` stands in for an output too large to show: an
    offloaded one's stub, or an output cut because the store could not keep it."""
    return _holds(messages, {"offloaded", "not_offloaded"})


def _holds(messages: Sequence[Any], marks: set[str]) -> bool:
    """Whether a tool message of ``messages`` has an artifact with one of ``marks``."""
    return any(
        isinstance(m, ToolMessage)
        and isinstance(m.artifact, dict)
        and not marks.isdisjoint(m.artifact)
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


class Offloader:
    """Replaces large tool results with stubs, after the regular calls of a batch.

    Args:
        config: the shared options (``offload_over_chars``, ``offload_over_tokens``,
            the cap and TTL).
        readers: the enabled built-in tools: the output tools among them are named in the
            stub's "how to read more"; a deprecation note points to ``search_tools`` if given.
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
        self.searches = "search_tools" in readers
        self.catalog = catalog

    def stub(self, info: OutputInfo, handle: str, dropped: str = "") -> tuple[str, dict[str, Any]]:
        """The stub content and the ``offloaded`` facts of a stored output (``dropped``: the
        note that the tool's artifact was dropped, if it was)."""
        kind_name = "JSON" if info.kind == "json" else "text"
        examples = ", ".join(repr(e) for e in info.jq_examples)
        how = "; ".join(
            HOW_TO_READ[r].format(
                handle=handle,
                limit=min(read_limit(self.limit), 4000),  # what one read returns
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
        except RecursionError:  # a hook's own message too deep to write: offloaded, cut
            return json.dumps(cut_deep(output.content), ensure_ascii=False, default=str)
        return text if len(text) > self.limit else None

    def _replace(self, message: ToolMessage, info: OutputInfo, handle: str) -> ToolMessage:
        """The message with its stored output's stub for content."""
        size, dropped = self._artifact_size(message)
        content, facts = self.stub(info, handle, dropped=dropped)
        return self._stand_in(message, content, {"offloaded": facts}, size, dropped)

    def _cut(self, message: ToolMessage, text: str, error: BaseException) -> ToolMessage:
        """The message with its output cut to the limit, when the store refused to keep it
        (the model reads what fits, and that the rest is gone). The model and the checkpoint
        get the error's type only: its text may hold the store's queries or its address,
        which the operator reads in the log (:meth:`_all_cut`)."""
        size, dropped = self._artifact_size(message)
        reason = type(error).__name__
        content = STORE_FAILED_TEMPLATE.format(
            cut=text[: self.limit], shown=self.limit, chars=len(text), error=reason
        )
        facts = {"chars": len(text), "shown": self.limit, "error": reason}
        return self._stand_in(message, content + dropped, {"not_offloaded": facts}, size, dropped)

    def _all_cut(
        self, large: list[tuple[ToolMessage, str]], error: Exception, failed: list[Exception]
    ) -> dict[int, ToolMessage]:
        """The batch's large outputs left when the store failed, each cut (:meth:`_cut`),
        by ``id`` of their message. The store is not asked again in the batch (``failed``
        keeps its error for the batch's other offloads): one that is down costs one of its
        timeouts, and one logged warning, not one an output."""
        if not failed:
            failed.append(error)
            names = ", ".join(dict.fromkeys(m.name or "?" for m, _ in large))
            logger.warning(
                "the output store could not keep a large output: large outputs of this batch "
                "(of %s) are cut to %d characters instead",
                names,
                self.limit,
                exc_info=error,
            )
        return {id(message): self._cut(message, text, error) for message, text in large}

    def _artifact_size(self, message: ToolMessage) -> tuple[int | None, str]:
        """The artifact's size as JSON (None: too deep to write) and the note to add if it
        is dropped with the output."""
        # The normalise stage dropped an artifact nested too deep (DEEP_ARTIFACT stands in
        # for it); one a hook made may still be too deep to write (size None).
        size = None if message.artifact == DEEP_ARTIFACT else _size(message.artifact)
        if size is None:
            return None, DEEP_DROPPED_NOTE.format(reason=DEEP_ARTIFACT["artifact_dropped"])
        return size, DROPPED_NOTE.format(chars=size) if size > self.limit else ""

    def _stand_in(
        self,
        message: ToolMessage,
        text: str,
        artifact: dict[str, Any],
        size: int | None,
        dropped: str,
    ) -> ToolMessage:
        """``message`` with ``text`` (and its media blocks) for content, and ``artifact``
        with the tool's own artifact kept unless it is dropped (too deep, or too large)."""
        facts = next(iter(artifact.values()))
        content: str | list[Any] = text
        media = media_blocks(message.content)
        if media:  # images and files go to the model as blocks; only the text was offloaded
            content = [{"type": "text", "text": content}, *media]
            facts["media_blocks"] = len(media)
        if message.artifact is not None:
            if not dropped:
                artifact["artifact"] = message.artifact
            elif size is None:
                facts["artifact_dropped"] = DEEP_ARTIFACT["artifact_dropped"]
            else:
                facts["artifact_dropped_chars"] = size
        stub = message.model_copy(update={"content": content, "artifact": artifact})
        note = (
            deprecation_note(self.catalog, message.name or "", searches=self.searches)
            if self.catalog
            else None
        )
        return stub if note is None else add_note(stub, stub.tool_call_id, note)

    def _found(self, results: dict[int, Any]) -> list[tuple[ToolMessage, str]]:
        """Every tool message over the limit (with its text), in call order."""
        found = []
        for output in results.values():
            for message in tool_messages(output):
                text = self._large(message)
                if text is not None:
                    found.append((message, text))
        return found

    def apply(
        self,
        results: dict[int, Any],
        config: RunnableConfig,
        failed: list[Exception] | None = None,
    ) -> dict[int, Any]:
        """``results`` (call index -> output) with large tool messages offloaded (sync).

        ``failed``: the batch's memo of a store failure, shared by its offloads (a new one
        when not given): once the store failed, the rest is cut without asking it again.
        """
        large = self._found(results)
        if not large:
            return results
        failed = [] if failed is None else failed
        store = OffloadStore.of(config, self.config, self.app)
        new: dict[int, ToolMessage] = {}
        for n, (message, text) in enumerate(large):
            info = describe_output(text)
            error = failed[0] if failed else None
            if error is None:
                try:
                    handle = store.put(text, info.kind, message.name or "")
                except Exception as exc:  # noqa: BLE001 - the store down: the turn goes on
                    error = exc
            if error is not None:
                new.update(self._all_cut(large[n:], error, failed))
                break
            new[id(message)] = self._replace(message, info, handle)
        return {i: rebuilt(output, new) for i, output in results.items()}

    async def aapply(
        self,
        results: dict[int, Any],
        config: RunnableConfig,
        failed: list[Exception] | None = None,
    ) -> dict[int, Any]:
        """Async :meth:`apply`."""
        large = self._found(results)
        if not large:
            return results
        failed = [] if failed is None else failed
        store = OffloadStore.of(config, self.config, self.app)
        new: dict[int, ToolMessage] = {}
        for n, (message, text) in enumerate(large):
            # In a thread: a long output's description takes its lines' count and a parse of
            # up to DESCRIBE_CHARS, in calls short enough for the event loop to run between.
            info = await asyncio.to_thread(describe_output, text)
            error = failed[0] if failed else None
            if error is None:
                try:
                    handle = await store.aput(text, info.kind, message.name or "")
                except Exception as exc:  # noqa: BLE001 - the store down: the turn goes on
                    error = exc
            if error is not None:
                new.update(self._all_cut(large[n:], error, failed))
                break
            new[id(message)] = self._replace(message, info, handle)
        return {i: rebuilt(output, new) for i, output in results.items()}
