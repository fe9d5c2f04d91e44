"""ToolBudgetMiddleware per model call against create_agent's alternatives, same run.

Three agents built with ``langchain.agents.create_agent`` over one synthetic catalog
(the MCP-like catalogs of ``schema_tokens.py``: 50, 500 and 5,000 tools), each with
a scripted main model that answers at once (one model call per user turn):

- ``all tools``: ``create_agent(model, tools=<every tool>)``, every tool bound;
- ``LLMToolSelectorMiddleware``: LangChain's selector, ``max_tools=8``, with a
  scripted selector model (its extra LLM call costs nothing here: only the
  middleware's own work is timed: the selection schema over every tool, the
  structured-output call and the filtering);
- ``ToolBudgetMiddleware``: ours, with the defaults a user gets.

Repetitions are interleaved (each round runs every agent once, in a rotated order),
under ``invoke``. Reported per size: the median time of one user turn (= one model
call), the ratio of ours to each alternative, and the schema tokens of the tools
bound to the main model call (``schema_tokens``); for the selector, also the tokens
of its extra call's schema (every tool's name and description). Targets: ours
<= the selector's time per call, and >= 90 % fewer schema tokens than all tools
at 500 tools and more.

Run: ``python benchmarks/middleware_overhead.py [--sizes 50 500 5000] [--rounds 20]``.
Writes ``benchmarks/results/middleware_overhead.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import median_ms, print_table, write_results  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import LLMToolSelectorMiddleware  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage  # noqa: E402
from schema_tokens import build_catalog  # noqa: E402

from langgraph_toolbudget import ToolBudgetMiddleware, ToolCatalog  # noqa: E402
from langgraph_toolbudget.core.tokens import CHARS_PER_TOKEN, schema_tokens  # noqa: E402
from langgraph_toolbudget.testing import ScriptedChatModel  # noqa: E402

SELECTOR_MAX_TOOLS = 8


def selector_model(catalog: ToolCatalog, requests: list[dict[str, str]]) -> ScriptedChatModel:
    """A scripted selector that answers with the request's own tool plus the next seven."""
    names = catalog.tool_names
    tool_of = {r["query"]: r["tool"] for r in requests}

    def select(messages: list[BaseMessage], _tools: list[str]) -> AIMessage:
        wanted = tool_of[messages[-1].text]
        start = names.index(wanted)
        picks = [names[(start + k) % len(names)] for k in range(SELECTOR_MAX_TOOLS)]
        call = {"name": "ToolSelectionResponse", "args": {"tools": picks}, "id": "select"}
        return AIMessage("", tool_calls=[call])

    return ScriptedChatModel(responses=[select], cycle=True)


def agents(
    catalog: ToolCatalog, requests: list[dict[str, str]]
) -> dict[str, tuple[Any, ScriptedChatModel, ScriptedChatModel | None]]:
    """name -> (agent, main model, selector model)."""
    tools = [spec.tool for spec in catalog.specs]
    out: dict[str, tuple[Any, ScriptedChatModel, ScriptedChatModel | None]] = {}
    main = ScriptedChatModel(responses=[AIMessage("done")], cycle=True)
    out["all tools"] = (create_agent(main, tools=tools), main, None)
    main, selector = (
        ScriptedChatModel(responses=[AIMessage("done")]),
        selector_model(catalog, requests),
    )
    middleware = LLMToolSelectorMiddleware(model=selector, max_tools=SELECTOR_MAX_TOOLS)
    out["LLMToolSelectorMiddleware"] = (
        create_agent(main, tools=tools, middleware=[middleware]),
        main,
        selector,
    )
    main = ScriptedChatModel(responses=[AIMessage("done")], cycle=True)
    out["ToolBudgetMiddleware"] = (
        create_agent(main, middleware=[ToolBudgetMiddleware(catalog)]),
        main,
        None,
    )
    return out


def _selector_tokens(selector: ScriptedChatModel) -> int:
    """Schema tokens of the selector's extra call (the structured-output schema it was bound to)."""
    text = json.dumps(selector.tools_schema, separators=(",", ":"))
    return round(len(text) / CHARS_PER_TOKEN)


def measure(size: int, rounds: int) -> dict[str, Any]:
    catalog, requests = build_catalog(size)
    built = agents(catalog, requests)
    names = list(built)
    times: dict[str, list[float]] = {name: [] for name in names}
    tokens: dict[str, int] = {}
    for name, (agent, main, selector) in built.items():  # warm up; check each really ran
        out = agent.invoke({"messages": [HumanMessage(requests[0]["query"])]})
        if out["messages"][-1].content != "done":
            raise RuntimeError(f"{name}: unexpected answer {out['messages'][-1]!r}")
        bound = [t["function"]["name"] for t in main.tools_schema]
        tokens[name] = schema_tokens(main.tools_schema)
        if name == "ToolBudgetMiddleware" and len(bound) >= len(catalog):
            raise RuntimeError("ToolBudgetMiddleware bound every tool")
        if selector is not None:
            tokens["LLMToolSelectorMiddleware (selector call)"] = _selector_tokens(selector)
    for r in range(rounds):
        payload = {"messages": [HumanMessage(requests[r % len(requests)]["query"])]}
        for name in names[r % len(names) :] + names[: r % len(names)]:
            agent = built[name][0]
            gc.collect()
            start = time.perf_counter()
            agent.invoke(payload)
            times[name].append(time.perf_counter() - start)
    medians = {name: median_ms(t) for name, t in times.items()}
    ours = medians["ToolBudgetMiddleware"]
    return {
        "tools": size,
        "rounds": rounds,
        "median_ms_per_model_call": medians,
        "ratio_ours_to_all_tools": ours / medians["all tools"],
        "ratio_ours_to_llm_selector": ours / medians["LLMToolSelectorMiddleware"],
        "schema_tokens_per_call": tokens,
        "token_reduction_vs_all_tools": 1 - tokens["ToolBudgetMiddleware"] / tokens["all tools"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 5000])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    results = []
    for size in args.sizes:
        rounds = max(6, args.rounds * 50 // size) if size > 500 else args.rounds
        result = measure(size, rounds)
        results.append(result)
        m, t = result["median_ms_per_model_call"], result["schema_tokens_per_call"]
        print(f"\n{size} tools ({rounds} rounds)")
        print_table(
            ["agent", "ms / model call", "schema tokens / call"],
            [[name, m[name], t[name]] for name in m]
            + [["  + selector's own call", "", t["LLMToolSelectorMiddleware (selector call)"]]],
        )
        print(
            f"ours / all tools: {result['ratio_ours_to_all_tools']:.3f}   "
            f"ours / LLMToolSelector: {result['ratio_ours_to_llm_selector']:.3f}   "
            f"token reduction vs all tools: {result['token_reduction_vs_all_tools']:.1%}"
        )
    path = write_results(
        "middleware_overhead",
        {
            "langchain": version("langchain"),
            "selector_max_tools": SELECTOR_MAX_TOOLS,
            "defaults": "ToolBudgetMiddleware(catalog): max_tools=8, search_limit=5",
            "results": results,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
