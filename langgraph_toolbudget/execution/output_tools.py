"""The output tools: how the model reads offloaded outputs back, as a built-in family.

Its one reason to change: how the executor answers the output tools.

``read_large_output(handle, start, length)`` reads a character range,
``search_large_output(handle, pattern, context_lines)`` finds lines by regex
(RE2, linear time, bounded matches), ``query_large_output(handle,
jq_expression)`` runs jq over a JSON output. Each answer fits the offload limit and is
never offloaded itself (a stub for a read would only be read again): a read is cut to
:func:`~langgraph_toolbudget.core.large_output.read_limit` characters, its header saying
where the next one starts; a search shows the matches that fit; a jq result over the
limit is an error asking for a part of it. They are built-in tools (see
:mod:`langgraph_toolbudget.execution.builtins`): the executor answers them, they never
count against the budget or the meta-call limit, and they are on while offloading is
(``enabled_builtins`` can turn each off). Every bad request is an error tool message: an
unknown, expired or evicted handle (naming the conversation's newest handles that still
exist), a handle of another thread, run or app (only the caller's own handles are named), a
bad range, a bad or too long regex, bad jq, jq stopped by its time or memory limit. An
answer's advice names only the output tools the node has on (``enabled_builtins``).

Key Components:
    - :class:`OutputTools`: the family (definitions and answers, sync and async).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.large_output import (
    JQ_MISSING_ERROR,
    OutputError,
    jq_available,
    query_json,
    read_limit,
    read_range,
    search_answer,
    search_output,
)
from langgraph_toolbudget.core.limits import safe_repr
from langgraph_toolbudget.core.meta import definition_only
from langgraph_toolbudget.execution.builtin_family import (
    BuiltinContext,
    BuiltinResult,
    BuiltinTools,
    call_arguments,
)
from langgraph_toolbudget.execution.offload import offload_limit
from langgraph_toolbudget.execution.output_store import OffloadStore

__all__ = ["OUTPUT_TOOL_NAMES", "UNKNOWN_HANDLE_ERROR", "OutputTools"]

READ, SEARCH, QUERY = "read_large_output", "search_large_output", "query_large_output"
OUTPUT_TOOL_NAMES = (READ, SEARCH, QUERY)

UNKNOWN_HANDLE_ERROR = (
    "Error: no offloaded output {handle} in this conversation. Use a handle from a "
    "'[Large output offloaded ...]' message of this conversation{known}; an output of "
    "another conversation cannot be read, outputs expire some time after they were stored "
    "(offload_ttl_minutes) and old ones are evicted when the conversation stores too many, "
    "and an app whose tools changed may no longer reach the outputs it stored before. Call "
    "the tool again if you need its output."
)
"""``known``: the conversation's newest handles that still exist (never the one asked for)."""
MISSING_ARGUMENT_ERROR = (
    "Error: {tool} needs the argument {name!r}, {what}; got {args}. Call it again with {name}=..."
)
"""A call without one of its tool's arguments (a model that named it otherwise)."""
_NEEDED = {
    "handle": "a handle from a '[Large output offloaded ...]' message of this conversation",
    "pattern": "a regular expression (RE2 syntax), e.g. 'error|timeout'",
    "jq_expression": "a jq expression, e.g. '.items | length'",
}
READ_HEADER = "[{handle}: characters {start:,}-{end:,} of {chars:,}{rest}{cut}]\n"
READ_CUT_NOTE = " (one read returns at most {max:,} characters)"


class _ReadArgs(BaseModel):
    handle: str = Field(
        description="The handle of the offloaded output, e.g. 'out_1a2b3c4d5e6f7a8b9c0d1e2f'."
    )
    start: int = Field(0, description="The first character to read (0-based).")
    length: int = Field(
        4000, description="How many characters to read (the tool's description gives the most)."
    )


class _SearchArgs(BaseModel):
    handle: str = Field(description="The handle of the offloaded output.")
    pattern: str = Field(description="A regular expression (RE2 syntax), e.g. 'error|timeout'.")
    context_lines: int = Field(2, description="Lines shown before and after each match.")


class _QueryArgs(BaseModel):
    handle: str = Field(description="The handle of an offloaded JSON output.")
    jq_expression: str = Field(description="A jq expression, e.g. '.items | length'.")


_ARGS: dict[str, type[BaseModel]] = {READ: _ReadArgs, SEARCH: _SearchArgs, QUERY: _QueryArgs}


def _absent(name: str, args: dict[str, Any]) -> list[str]:
    """The arguments the tool ``name`` requires (its argument model's) that ``args`` lacks."""
    fields = _ARGS[name].model_fields
    return [arg for arg, info in fields.items() if info.is_required() and arg not in args]


class OutputTools(BuiltinTools):
    """The output tools as a built-in family (registered while offloading is on).

    Args:
        config: the shared options (the offload limits, cap and TTL, the jq limits; the gate).
        app: the app's label in the offload namespaces
            (:func:`~langgraph_toolbudget.execution.offload.app_key` of its tool names).

    Raises:
        ImportError: ``enabled_builtins`` names ``query_large_output`` (by its
            name, not a pattern) but the ``jq`` package is missing; otherwise
            the tool is left out without it.
    """

    def __init__(self, config: BudgetConfig, *, app: str) -> None:
        limit = offload_limit(config)
        if limit is None:
            raise ValueError("OutputTools needs offloading on (offload_over_chars)")
        self.config = config
        self.limit = limit
        self.read_max = read_limit(limit)
        self.jq = jq_available()
        gate = config.builtin_filter
        if not self.jq and QUERY in (gate.allow or ()):  # named, not matched by a pattern
            raise ImportError(JQ_MISSING_ERROR)
        self.app = app

    @property
    def names(self) -> list[str]:
        """The family's tool names (``query_large_output`` only with ``jq`` installed)."""
        return [READ, SEARCH, QUERY] if self.jq else [READ, SEARCH]

    def definitions(self) -> list[BaseTool]:
        specs: list[tuple[str, str, type[BaseModel]]] = [
            (
                READ,
                "Read part of a large tool output that was offloaded (replaced by a handle). "
                f"Returns up to {self.read_max:,} characters from 'start', and where the next "
                "read starts.",
                _ReadArgs,
            ),
            (
                SEARCH,
                "Search a large offloaded tool output by regex; returns the matching lines "
                "with their line numbers, character offsets and context (as many as fit in "
                f"{self.limit:,} characters).",
                _SearchArgs,
            ),
            (
                QUERY,
                "Run a jq expression over a large offloaded JSON output and return the result "
                f"(at most {self.limit:,} characters: ask for a part of a large one).",
                _QueryArgs,
            ),
        ]
        return [definition_only(n, d, s) for n, d, s in specs if n in self.names]

    # --- answers ------------------------------------------------------------------------------

    @staticmethod
    def _missing(call: ToolCall, absent: list[str], known: list[str]) -> BuiltinResult:
        """The answer to a call that lacks the arguments ``absent``, or whose handle names no
        stored output (``known``: the conversation's latest handles)."""
        sent = call.get("args")  # what the model sent, of any shape
        hint = f" (its latest: {', '.join(known)})" if known else ""
        if absent:
            name = absent[0]
            what = _NEEDED[name] + (hint if name == "handle" else "")
            message = MISSING_ARGUMENT_ERROR.format(
                tool=call["name"],
                name=name,
                what=what,
                args=safe_repr({} if sent is None else sent),
            )
            return BuiltinResult(message, error=True)
        shown = safe_repr(call_arguments(call)["handle"])  # any size or shape
        return BuiltinResult(UNKNOWN_HANDLE_ERROR.format(handle=shown, known=hint), error=True)

    def _answer(
        self,
        name: str,
        args: dict[str, Any],
        stored: dict[str, Any],
        tools: Collection[str] | None = None,
    ) -> BuiltinResult:
        """The answer from the stored output, at most the offload limit long (as far as a
        read's :data:`~langgraph_toolbudget.core.large_output.MIN_READ_CHARS` allows); its
        advice names only the built-ins in ``tools`` (the node's enabled ones; None: all)."""
        text, handle = str(stored.get("text", "")), str(args.get("handle"))
        try:
            if name == READ:
                return BuiltinResult(self._read(text, handle, args))
            if name == SEARCH:
                found = search_output(
                    text,
                    args.get("pattern"),
                    args.get("context_lines", 2),
                    max_chars=self.limit,
                    tools=tools,
                )
                return BuiltinResult(search_answer(found))
            answer, _ = query_json(
                text,
                handle,
                args.get("jq_expression"),
                kind=stored.get("kind"),
                timeout_s=self.config.jq_timeout_s,
                memory_mb=self.config.jq_memory_mb,
                max_chars=self.limit,
                tools=tools,
            )
            return BuiltinResult(answer)
        except OutputError as exc:
            return BuiltinResult(str(exc), error=True)

    def _read(self, text: str, handle: str, args: dict[str, Any]) -> str:
        """A read's answer: its header (the range, where the next read starts) and the
        characters, together within the limit."""
        start, length = args.get("start", 0), args.get("length", 4000)
        chunk, end = read_range(text, handle, start, length, self.read_max)
        rest = f"; next: start={end}" if end < len(text) else "; end of output"
        cut = READ_CUT_NOTE.format(max=self.read_max) if length > self.read_max else ""
        header = READ_HEADER.format(
            handle=handle, start=start, end=end, chars=len(text), rest=rest, cut=cut
        )
        return header + chunk

    def handle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        args = call_arguments(call)
        store = OffloadStore.of(ctx.config, self.config, self.app)
        absent = _absent(call["name"], args)
        stored = None if absent else store.get(args.get("handle"))
        if stored is None:
            return self._missing(call, absent, store.latest(exclude=args.get("handle")))
        return self._answer(call["name"], args, stored, ctx.builtin_names)

    async def ahandle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        args = call_arguments(call)
        store = OffloadStore.of(ctx.config, self.config, self.app)
        absent = _absent(call["name"], args)
        stored = None if absent else await store.aget(args.get("handle"))
        if stored is None:
            known = await store.alatest(exclude=args.get("handle"))
            return self._missing(call, absent, known)
        # regex over a large output is CPU work, and jq waits for its worker: off the loop.
        return await asyncio.to_thread(self._answer, call["name"], args, stored, ctx.builtin_names)
