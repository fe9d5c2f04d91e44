"""Offloading large tool outputs: tokens kept out of the conversation, and what a call costs.

Two measurements, each against the same run without offloading:

- **tokens**: the prebuilt agent (``create_toolbudget_agent``, defaults, a
  checkpointer) over 10 user turns of one thread; each turn the scripted model
  calls a tool returning 200 KB of JSON, then answers. Reported: the estimated
  tokens of the whole conversation after the 10 turns (every message's content,
  4 characters a token, the package's estimate) with the default offloading
  (``offload_over_chars=20000``) and with ``offload_over_chars=None``.
  Target: >= 95% fewer.
- **latency**: one graph ``START -> tools`` (a ``ToolExecutor``) answering one
  call of that tool, per call, interleaved rounds, with offloading (the store
  write) and without. Store: none given (the defaults a user gets: the
  process-wide ``InMemoryStore``), and a ``SqliteStore`` on disk.

Run: ``python benchmarks/offloading.py [--rounds 200] [--turns 10]``.
Writes ``benchmarks/results/offloading.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import median_ms, print_table, write_results  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import MemorySaver  # noqa: E402
from langgraph.graph import START, StateGraph  # noqa: E402
from langgraph.store.sqlite import SqliteStore  # noqa: E402

from langgraph_toolbudget import (  # noqa: E402
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.tokens import CHARS_PER_TOKEN  # noqa: E402
from langgraph_toolbudget.testing import ScriptedChatModel  # noqa: E402

ROWS = [
    {"id": i, "sku": f"SKU-{i:05d}", "name": f"item {i}", "price": i * 0.37} for i in range(2600)
]
REPORT = json.dumps({"rows": ROWS, "count": len(ROWS)})  # about 200 KB


def inventory_report() -> str:
    """The full inventory as JSON (large)."""
    return REPORT


def _catalog() -> ToolCatalog:
    return ToolCatalog.from_tools(
        [inventory_report], tool_metadata={"inventory_report": {"include": "always"}}
    )


def conversation_tokens(turns: int, offload: int | None) -> dict[str, Any]:
    """Estimated tokens of the conversation after ``turns`` turns, and its message count."""
    call = {"name": "inventory_report", "args": {}, "id": "x", "type": "tool_call"}
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[call]), "Here it is."] * turns)
    graph = create_toolbudget_agent(model, _catalog(), offload_over_chars=offload)
    app = graph.compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "bench"}}
    for turn in range(turns):
        out = app.invoke({"messages": [HumanMessage(f"inventory please ({turn})")]}, config)
    chars = sum(len(str(m.content)) for m in out["messages"])
    return {"tokens": round(chars / CHARS_PER_TOKEN), "messages": len(out["messages"])}


def _tools_graph(offload: int | None, store: Any) -> Any:
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(_catalog(), offload_over_chars=offload))
    graph.add_edge(START, "tools")
    return graph.compile(store=store)


def call_latency(rounds: int, store: Any) -> dict[str, float]:
    """Median ms per call of the tools node with and without offloading, interleaved."""
    call = {"name": "inventory_report", "args": {}, "id": "x", "type": "tool_call"}
    state = {"messages": [HumanMessage("go"), AIMessage("", tool_calls=[call])]}
    apps = {"offloaded": _tools_graph(20_000, store), "inline": _tools_graph(None, store)}
    times: dict[str, list[float]] = {k: [] for k in apps}
    config = {"configurable": {"thread_id": "latency"}}
    for i in range(rounds + 5):
        order = list(apps) if i % 2 == 0 else list(reversed(apps))
        for name in order:
            start = time.perf_counter()
            apps[name].invoke(state, config)
            if i >= 5:  # warm-up rounds are not counted
                times[name].append(time.perf_counter() - start)
    with_ms, without_ms = median_ms(times["offloaded"]), median_ms(times["inline"])
    return {
        "offloaded_ms": with_ms,
        "inline_ms": without_ms,
        "added_ms": with_ms - without_ms,
        "ratio": with_ms / without_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()

    on = conversation_tokens(args.turns, 20_000)
    off = conversation_tokens(args.turns, None)
    saved = 1 - on["tokens"] / off["tokens"]
    print(f"tool output: {len(REPORT):,} characters; {args.turns} turns\n")
    print_table(
        ["conversation", "tokens", "messages"],
        [
            ["offloading (default)", on["tokens"], on["messages"]],
            ["no offloading", off["tokens"], off["messages"]],
        ],
    )
    print(f"\n{saved:.1%} fewer tokens (target >= 95%: {'met' if saved >= 0.95 else 'NOT met'})\n")

    latency = {"default (no store: InMemoryStore)": call_latency(args.rounds, None)}
    with (
        tempfile.TemporaryDirectory() as tmp,
        SqliteStore.from_conn_string(str(Path(tmp) / "store.db")) as sqlite_store,
    ):
        sqlite_store.setup()
        latency["SqliteStore"] = call_latency(args.rounds, sqlite_store)
    print_table(
        ["store", "offloaded ms/call", "inline ms/call", "added ms", "ratio"],
        [
            [k, v["offloaded_ms"], v["inline_ms"], v["added_ms"], v["ratio"]]
            for k, v in latency.items()
        ],
    )
    path = write_results(
        "offloading",
        {
            "tool_output_chars": len(REPORT),
            "turns": args.turns,
            "rounds": args.rounds,
            "tokens": {"offloaded": on, "inline": off, "fewer": saved, "target": 0.95},
            "latency_per_call": latency,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
