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
  process-wide bounded ``InMemoryStore``), and a ``SqliteStore`` on disk.
- **jq**: one ``query_large_output`` query over that output, per query, as the
  package runs it (a fresh worker process: no environment, no files, time and
  memory limits; :func:`~langgraph_toolbudget.core.large_output.query_json`)
  against jq run in-process (``jq.compile(...).input_text(...)``, what the
  package did before), interleaved rounds; two expressions.
- **search worst case**: ``search_large_output`` with ``a{1000}b`` over 5 MB of
  ``a`` (one line) and over 5 MB of 3,000-character lines, as bounded (the scan
  stops after 5 s), and with ``--unbounded-search`` also without the deadline
  (what the package did before: about a minute).

Run: ``python benchmarks/offloading.py [--rounds 200] [--turns 10] [--unbounded-search]``.
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
from langgraph_toolbudget.core.large_output import query_json, search_output  # noqa: E402
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


def _jq_in_process(expression: str) -> str:
    """jq inside this process, as the package ran it before the worker process."""
    import jq

    results = jq.compile(expression).input_text(REPORT).all()
    return json.dumps(results[0] if len(results) == 1 else results, ensure_ascii=False, indent=1)


def jq_latency(rounds: int) -> dict[str, dict[str, float]]:
    """Median ms per query, worker process vs in-process jq, interleaved, per expression."""
    out = {}
    for expression in (".count", "[.rows[] | select(.price > 900)] | length"):
        runs = {
            "worker": lambda e=expression: query_json(REPORT, "h", e),
            "in_process": lambda e=expression: _jq_in_process(e),
        }
        assert runs["worker"]()[0] == runs["in_process"]()
        times: dict[str, list[float]] = {k: [] for k in runs}
        for i in range(rounds + 3):
            for name in runs if i % 2 == 0 else reversed(list(runs)):
                start = time.perf_counter()
                runs[name]()
                if i >= 3:
                    times[name].append(time.perf_counter() - start)
        worker, inline = median_ms(times["worker"]), median_ms(times["in_process"])
        out[expression] = {
            "worker_ms": worker,
            "in_process_ms": inline,
            "added_ms": worker - inline,
        }
    return out


def search_worst_case(unbounded: bool) -> dict[str, dict[str, float]]:
    """Seconds of ``search_output`` with ``a{1000}b`` over 5 MB, bounded (and unbounded)."""
    texts = {
        "5 MB, one line": "a" * 5_000_000,
        "5 MB, 3,000-char lines": "\n".join(["a" * 3000] * 1666),
    }
    out = {}
    for label, text in texts.items():
        row = {}
        for name, seconds in [("bounded_s", 5.0)] + (
            [("unbounded_s", float("inf"))] if unbounded else []
        ):
            start = time.perf_counter()
            search_output(text, "a{1000}b", seconds=seconds)
            row[name] = time.perf_counter() - start
        out[label] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--unbounded-search", action="store_true")
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

    latency = {"default (no store: the bounded fallback)": call_latency(args.rounds, None)}
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
    jq_ms = jq_latency(max(args.rounds // 4, 10))
    print()
    print_table(
        ["jq expression", "worker ms/query", "in-process ms/query", "added ms"],
        [[k, v["worker_ms"], v["in_process_ms"], v["added_ms"]] for k, v in jq_ms.items()],
    )
    worst = search_worst_case(args.unbounded_search)
    print()
    print_table(
        ["search a{1000}b over", "bounded s", "unbounded s"],
        [[k, v["bounded_s"], v.get("unbounded_s", "-")] for k, v in worst.items()],
    )
    path = write_results(
        "offloading",
        {
            "tool_output_chars": len(REPORT),
            "turns": args.turns,
            "rounds": args.rounds,
            "tokens": {"offloaded": on, "inline": off, "fewer": saved, "target": 0.95},
            "latency_per_call": latency,
            "jq_per_query": jq_ms,
            "search_worst_case": worst,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
