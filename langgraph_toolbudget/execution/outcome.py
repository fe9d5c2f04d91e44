"""What one batch of tool calls produced, and how a node returns it.

Its one reason to change: what a batch returns to a node.

Key Components:
    - :class:`TurnOutcome`: the results of a batch, one per call in call order,
      with what its built-in calls found and changed.
    - :func:`flatten_outputs`: the results with a tool's list of messages spread out.
    - :func:`node_output`: a node's return value for a batch, shaped as
      ``ToolNode``'s (tool messages, ``Command``s from tools), plus the
      visible-set update.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command, Send

from langgraph_toolbudget.core.context import NO_CONTEXT, SessionContext

__all__ = ["TurnOutcome", "flatten_outputs", "node_output"]


@dataclass
class TurnOutcome:
    """What one batch of tool calls produced.

    Attributes:
        outputs: one entry per call, in call order: a ``ToolMessage``, or a
            ``Command`` (or a list of them) returned by a tool.
        discovered: tools found by ``search_tools`` (``discovered_tools`` holds those not
            visible).
        meta_calls: how many meta-calls this batch answered.
        loading_closed: the turn's meta-calls reached ``max_meta_calls`` with this batch's:
            the meta-tools are refused for the rest of the turn.
        update: state updates of built-in answers (other than the budget fields).
        context: the thread's tool context as the built-in answers left it.
        store_failed: the error of the output store, once it failed to keep a large output
            in this batch (its other large outputs are then cut without asking it again).
    """

    outputs: list[Any] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)
    meta_calls: int = 0
    loading_closed: bool = False
    update: dict[str, Any] = field(default_factory=dict)
    context: SessionContext = NO_CONTEXT
    store_failed: list[Exception] = field(default_factory=list)

    @property
    def messages(self) -> list[ToolMessage]:
        """The tool messages, including those carried inside Commands."""
        out: list[ToolMessage] = []
        for item in flatten_outputs(self.outputs):
            if isinstance(item, ToolMessage):
                out.append(item)
            elif isinstance(item, Command) and isinstance(item.update, dict):
                out.extend(m for m in item.update.get("messages", []) if isinstance(m, ToolMessage))
        return out


def flatten_outputs(outputs: Sequence[Any]) -> list[Any]:
    """Outputs in call order, with a tool's list of messages/Commands spread out."""
    flat: list[Any] = []
    for output in outputs:
        flat.extend(output if isinstance(output, list) else [output])
    return flat


def node_output(
    outputs: Sequence[Any],
    update: dict[str, Any],
    *,
    messages_key: str = "messages",
    as_list: bool = False,
) -> Any:
    """A node return value, shaped as ``ToolNode``'s, plus the budget ``update`` if any.

    Without Commands: ``{messages_key: [ToolMessage, ...], **update}``, or the list
    of tool messages when the input was a list of messages (``as_list``: such an
    input has no state to update, so ``update`` is dropped). With Commands, each
    output becomes its own update, in call order (as ``ToolNode`` does), so the tool
    messages stay in the order of the model's calls; ``Command(graph=PARENT)``s whose
    ``goto`` are all ``Send``s are merged into one, last, as ``ToolNode`` merges them.
    """
    flat = flatten_outputs(outputs)
    if not any(isinstance(o, Command) for o in flat):
        return flat if as_list else {messages_key: flat, **update}
    combined: list[Any] = []
    sends: list[Send] = []
    for out in flat:
        if not isinstance(out, Command):
            combined.append([out] if as_list else {messages_key: [out]})
        elif out.graph is Command.PARENT and _all_sends(out.goto):
            sends.extend(out.goto)  # type: ignore[arg-type]
        else:
            combined.append(out)
    if sends:
        combined.append(Command(graph=Command.PARENT, goto=sends))
    return [*combined, update] if update and not as_list else combined


def _all_sends(goto: Any) -> bool:
    return isinstance(goto, list) and all(isinstance(s, Send) for s in goto)
