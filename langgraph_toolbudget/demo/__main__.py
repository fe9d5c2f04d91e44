"""Demo: what the pipeline chooses for a few queries, and what it saves.

Its one reason to change: what the offline demo prints.

Run it with ``python -m langgraph_toolbudget.demo``. Offline: the built-in
example catalog and a scripted chat model.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.meta import meta_tool_definitions
from langgraph_toolbudget.core.tokens import schema_tokens, token_savings
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.nodes.intent import ClassifyIntent
from langgraph_toolbudget.nodes.prebuilt import create_toolbudget_agent
from langgraph_toolbudget.nodes.selection import SelectTools, ToolSearch
from langgraph_toolbudget.state import ToolBudgetState
from langgraph_toolbudget.testing import ScriptedChatModel

__all__ = ["main", "selection_graph"]

QUERIES = (
    "Create a GitHub issue for the login bug and tell the team in Slack",
    "What's the wether in Tokyo this week?",
    "How many orders are in the database?",
    "Schedule a meeting with Ada next monday and email her the agenda",
)


def selection_graph(catalog: ToolCatalog, max_tools: int = 5, search_limit: int = 2) -> StateGraph:
    """classify_intent -> select_tools -> tool_search, uncompiled."""
    g = StateGraph(ToolBudgetState)
    g.add_node("classify_intent", ClassifyIntent(catalog))
    g.add_node("select_tools", SelectTools(catalog, max_tools=max_tools))
    g.add_node("tool_search", ToolSearch(catalog, search_limit=search_limit))
    g.add_edge(START, "classify_intent")
    g.add_edge("classify_intent", "select_tools")
    g.add_edge("select_tools", "tool_search")
    g.add_edge("tool_search", END)
    return g


AGENT_REQUEST = "Is it raining in London right now? If it is, let everyone know."


def _scripted_model() -> ScriptedChatModel:
    """A model that checks the weather, then finds it has no Slack tool and loads Slack's."""

    def call(name: str, args: dict[str, object], call_id: str) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])

    return ScriptedChatModel(
        responses=[
            call("get_weather", {"city": "London"}, "call_1"),
            call("request_more_tools", {"categories": ["slack"], "reason": "warn the team"},
                 "call_2"),
            call("send_message", {"channel": "general", "text": "Rain in London"}, "call_3"),
            AIMessage("It is raining in London; I warned the team in #general."),
        ]
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    """Print the categories and tools chosen per query, the token savings, and one agent turn."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-tools", type=int, default=5)
    args = parser.parse_args(argv)

    catalog = build_example_catalog()
    app = selection_graph(catalog, max_tools=args.max_tools).compile()
    meta = meta_tool_definitions(catalog.categories)
    every_tool = catalog.tools(catalog.tool_names)
    print(f"Example catalog: {len(catalog)} tools in {len(catalog.categories)} categories; "
          f"binding all of them costs ~{schema_tokens(every_tool)} schema tokens per model "
          "call.\n")  # fmt: skip
    for query in QUERIES:
        out = app.invoke({"messages": [HumanMessage(query)]})
        chosen = out["selected_tools"]
        tokens = token_savings([*meta, *catalog.tools(chosen)], every_tool)
        print(f"> {query}")
        print(f"  categories: {', '.join(out['categories']) or '(none)'}")
        print(f"  tools ({len(chosen)}): {', '.join(chosen)}")
        print(f"  schema tokens: {tokens['chosen']} (meta-tools included) vs {tokens['all']} "
              f"for every tool ({tokens['saved_ratio']:.0%} fewer)\n")  # fmt: skip

    print("One agent turn with a scripted model that widens its own tool set:")
    print(f"> {AGENT_REQUEST}")
    model = _scripted_model()
    agent = create_toolbudget_agent(model, catalog, max_tools=args.max_tools).compile()
    out = agent.invoke({"messages": [HumanMessage(AGENT_REQUEST)]})
    first = set(model.bound_tools[0])
    slack = catalog.tools_in("slack")
    missing = [t for t in slack if t not in first]
    print(f"  first model call: {len(first)} tools bound, "
          + (f"no Slack tool (of {len(slack)})" if len(missing) == len(slack)
             else f"Slack tools visible: {', '.join(t for t in slack if t in first)}"))  # fmt: skip
    for message in out["messages"][1:]:
        calls = [f"{c['name']}({c['args']})" for c in getattr(message, "tool_calls", [])]
        text = str(message.content)[:100]
        print(f"  {type(message).__name__:12} {' '.join(calls) or text}")
    loaded = [t for t in slack if t in out["selected_tools"] and t in missing]
    print(f"  request_more_tools loaded the Slack tools it was missing: {', '.join(loaded)}"
          if loaded else "  (the Slack tools were visible already)")  # fmt: skip
    print(f"  visible tools at the end: {', '.join(out['selected_tools'])}")


if __name__ == "__main__":
    main()
