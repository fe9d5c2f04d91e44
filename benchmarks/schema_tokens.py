"""Schema tokens sent per model call: create_toolbudget_agent vs binding the whole catalog.

Synthetic but realistic catalogs of 50, 500 and 5,000 tools: MCP-like servers
(``github``, ``slack``, ``jira``, ``stripe``, ...; several tenants of each at the
larger sizes) whose tools are ``<verb>_<object>`` with a one-sentence
description and typed, described parameters, one category per server.

For each catalog and each of a set of user requests (one per sampled tool,
phrased in everyday words), the prebuilt graph runs with a scripted chat model
that first asks ``request_more_tools`` for a second category and then answers,
so two model calls are measured per request: the first (meta-tools + the tools
selected for the request) and the second (after the visible set grew). The
tokens are those of the tool schemas the model was bound to
(``ScriptedChatModel.tools_schema``, counted with ``schema_tokens``), against
binding every tool of the catalog.

The same tool sets are also counted as each text tool-call format writes them
into the system prompt (``schema_tokens(tools, fmt)``: Hermes, Mistral,
Pythonic, pure JSON, instructions included), one column per format.

Target: >= 90 % fewer schema tokens per call at 500 tools and more (native and
every text format).

Run: ``python benchmarks/schema_tokens.py [--sizes 50 500 5000] [--requests 20]``.
Writes ``benchmarks/results/schema_tokens.json``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402

from langgraph_toolbudget import ToolCatalog, create_toolbudget_agent  # noqa: E402
from langgraph_toolbudget.core.meta import meta_tool_definitions  # noqa: E402
from langgraph_toolbudget.core.tokens import schema_tokens  # noqa: E402
from langgraph_toolbudget.formats import format_names  # noqa: E402
from langgraph_toolbudget.testing import ScriptedChatModel  # noqa: E402

FORMATS = format_names()

SEED = 7

# server -> (what it is, its objects: name -> (plural words, id parameter))
SERVERS: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "github": (
        "GitHub repositories",
        {
            "issue": ("issues", "issue_number"),
            "pull_request": ("pull requests", "pr_number"),
            "branch": ("branches", "branch_name"),
            "release": ("releases", "tag"),
            "workflow_run": ("workflow runs", "run_id"),
        },
    ),
    "slack": (
        "Slack workspace",
        {
            "message": ("messages", "message_ts"),
            "channel": ("channels", "channel_id"),
            "reminder": ("reminders", "reminder_id"),
            "user_group": ("user groups", "group_id"),
        },
    ),
    "jira": (
        "Jira projects",
        {
            "ticket": ("tickets", "ticket_key"),
            "sprint": ("sprints", "sprint_id"),
            "board": ("boards", "board_id"),
            "epic": ("epics", "epic_key"),
        },
    ),
    "stripe": (
        "Stripe billing",
        {
            "customer": ("customers", "customer_id"),
            "invoice": ("invoices", "invoice_id"),
            "subscription": ("subscriptions", "subscription_id"),
            "refund": ("refunds", "refund_id"),
        },
    ),
    "gdrive": (
        "Google Drive",
        {
            "file": ("files", "file_id"),
            "folder": ("folders", "folder_id"),
            "permission": ("sharing permissions", "permission_id"),
        },
    ),
    "calendar": (
        "the team calendar",
        {
            "event": ("events", "event_id"),
            "meeting_room": ("meeting rooms", "room_id"),
            "availability": ("availability slots", "slot_id"),
        },
    ),
    "postgres": (
        "the analytics Postgres database",
        {
            "table": ("tables", "table_name"),
            "query": ("saved queries", "query_id"),
            "index": ("indexes", "index_name"),
        },
    ),
    "salesforce": (
        "Salesforce CRM",
        {
            "lead": ("leads", "lead_id"),
            "opportunity": ("opportunities", "opportunity_id"),
            "account": ("accounts", "account_id"),
            "contact": ("contacts", "contact_id"),
        },
    ),
    "zendesk": (
        "Zendesk support",
        {
            "support_ticket": ("support tickets", "ticket_id"),
            "macro": ("macros", "macro_id"),
            "article": ("help center articles", "article_id"),
        },
    ),
    "datadog": (
        "Datadog monitoring",
        {
            "monitor": ("monitors", "monitor_id"),
            "dashboard": ("dashboards", "dashboard_id"),
            "incident": ("incidents", "incident_id"),
            "log_query": ("log queries", "query_id"),
        },
    ),
}
VERBS: list[tuple[str, str, str]] = [
    ("get", "Get one {one} from {system} by its id, with all its fields.", "show me the {one}"),
    (
        "list",
        "List {many} in {system}, newest first, with optional filters.",
        "what are the {many}",
    ),
    ("create", "Create a new {one} in {system}.", "make a new {one}"),
    ("update", "Update fields of an existing {one} in {system}.", "change the {one}"),
    ("delete", "Delete a {one} from {system}. This cannot be undone.", "remove the {one}"),
    ("search", "Search {many} in {system} by free text.", "find {many} about"),
    ("archive", "Archive a {one} in {system} so it no longer shows in lists.", "archive the {one}"),
    ("export", "Export {many} from {system} as CSV or JSON.", "download the {many}"),
    ("comment_on", "Add a comment to a {one} in {system}.", "comment on the {one}"),
    ("assign", "Assign a {one} in {system} to a user.", "give the {one} to"),
]


def _params(verb: str, one: str, id_param: str) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    if verb in ("get", "update", "delete", "archive", "comment_on", "assign"):
        props[id_param] = {"type": "string", "description": f"The id of the {one}."}
        required.append(id_param)
    if verb in ("list", "search", "export"):
        props["query"] = {"type": "string", "description": "Free-text filter."}
        props["limit"] = {
            "type": "integer",
            "description": "Maximum number of results (1-100).",
            "default": 20,
        }
        props["sort"] = {"type": "string", "enum": ["newest", "oldest", "relevance"]}
    if verb in ("create", "update"):
        props["title"] = {"type": "string", "description": f"Title of the {one}."}
        props["description"] = {"type": "string", "description": f"Body text of the {one}."}
        props["labels"] = {"type": "array", "items": {"type": "string"}, "description": "Labels."}
        if verb == "create":
            required.append("title")
    if verb == "export":
        props["format"] = {"type": "string", "enum": ["csv", "json"], "default": "csv"}
    if verb == "comment_on":
        props["comment"] = {"type": "string", "description": "The comment text (Markdown)."}
        required.append("comment")
    if verb == "assign":
        props["assignee"] = {"type": "string", "description": "User name or email."}
        required.append("assignee")
    return {"type": "object", "properties": props, "required": required}


def _noop(**kwargs: Any) -> str:
    return "ok"


def build_catalog(size: int) -> tuple[ToolCatalog, list[dict[str, str]]]:
    """A catalog of exactly ``size`` tools, and a request for each tool."""
    tools: list[BaseTool] = []
    categories: dict[str, list[str]] = {}
    descriptions: dict[str, str] = {}
    requests: list[dict[str, str]] = []
    tenant = 0
    while len(tools) < size:
        # verb-major order, so a small catalog still spans every server
        for verb, text, phrase in VERBS:
            for server, (system, objects) in SERVERS.items():
                category = server if tenant == 0 else f"{server}_{tenant}"
                label = system if tenant == 0 else f"{system} (tenant {tenant})"
                descriptions[category] = f"Tools for {label}"
                prefix = server if tenant == 0 else f"{server}{tenant}"
                for obj, (many, id_param) in objects.items():
                    if len(tools) >= size:
                        break
                    one = obj.replace("_", " ")
                    name = f"{prefix}_{verb}_{obj}"
                    tools.append(
                        StructuredTool.from_function(
                            func=_noop,
                            name=name,
                            description=text.format(one=one, many=many, system=label),
                            args_schema=_params(verb, one, id_param),
                        )
                    )
                    categories.setdefault(category, []).append(name)
                    requests.append(
                        {
                            "tool": name,
                            "category": category,
                            "query": f"in {label}, {phrase.format(one=one, many=many)} please",
                        }
                    )
        tenant += 1
    descriptions = {c: d for c, d in descriptions.items() if c in categories}
    catalog = ToolCatalog.from_tools(
        tools, categories=categories, category_descriptions=descriptions
    )
    return catalog, requests


def scripted_model(other_category: str) -> tuple[ScriptedChatModel, list[int], list[list[Any]]]:
    """A model that asks for one more category, then answers; it records the schema
    tokens it was sent on each call (from ``tools_schema``, the schemas bound for that call)
    and the schemas themselves (to count them in each text format)."""
    seen: list[int] = []
    schemas: list[list[Any]] = []
    model = ScriptedChatModel(responses=[], cycle=False)

    def widen(messages: Any, tools: Any) -> AIMessage:
        seen.append(schema_tokens(model.tools_schema))
        schemas.append(list(model.tools_schema))
        call = {"name": "request_more_tools", "args": {"categories": [other_category]}, "id": "m"}
        return AIMessage("", tool_calls=[call])

    def answer(messages: Any, tools: Any) -> AIMessage:
        seen.append(schema_tokens(model.tools_schema))
        schemas.append(list(model.tools_schema))
        return AIMessage("done")

    model.responses = [widen, answer]
    return model, seen, schemas


def measure(size: int, n_requests: int, max_tools: int) -> dict[str, Any]:
    catalog, requests = build_catalog(size)
    full = schema_tokens(catalog.tools(catalog.tool_names))
    rng = random.Random(SEED)
    sample = rng.sample(requests, min(n_requests, len(requests)))
    per_call: list[int] = []
    first_calls: list[int] = []
    second_calls: list[int] = []
    visible_counts: list[int] = []
    hits = 0
    per_format: dict[str, list[int]] = {fmt: [] for fmt in FORMATS}
    for request in sample:
        other = rng.choice([c for c in catalog.categories if c != request["category"]])
        model, seen, schemas = scripted_model(other)
        graph = create_toolbudget_agent(model, catalog, max_tools=max_tools)
        graph.compile().invoke({"messages": [HumanMessage(request["query"])]})
        first_calls.append(seen[0])
        second_calls.append(seen[1])
        per_call.extend(seen)
        visible_counts.extend(len(names) - 4 for names in model.bound_tools)
        hits += request["tool"] in model.bound_tools[0]
        for fmt in FORMATS:
            per_format[fmt].extend(schema_tokens(call, fmt) for call in schemas)
    mean_call = statistics.fmean(per_call)
    all_tools = catalog.tools(catalog.tool_names)
    formats = {}
    for fmt in FORMATS:
        whole = schema_tokens(all_tools, fmt)
        formats[fmt] = {
            "full_catalog_tokens": whole,
            "mean_tokens_per_call": round(statistics.fmean(per_format[fmt]), 1),
            "max_tokens_per_call": max(per_format[fmt]),
            "reduction_worst_call": round(1 - max(per_format[fmt]) / whole, 4),
        }
    return {
        "tools": size,
        "categories": len(catalog.categories),
        "requests": len(sample),
        "max_tools": max_tools,
        "full_catalog_tokens": full,
        "meta_tool_tokens": schema_tokens(meta_tool_definitions(catalog.categories)),
        "mean_tokens_per_call": round(mean_call, 1),
        "max_tokens_per_call": max(per_call),
        "mean_first_call_tokens": round(statistics.fmean(first_calls), 1),
        "mean_second_call_tokens": round(statistics.fmean(second_calls), 1),
        "mean_visible_tools": round(statistics.fmean(visible_counts), 1),
        "reduction_mean": round(1 - mean_call / full, 4),
        "reduction_worst_call": round(1 - max(per_call) / full, 4),
        "requested_tool_visible_on_first_call": round(hits / len(sample), 3),
        "per_format": formats,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 5000])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--max-tools", type=int, default=8)
    args = parser.parse_args()

    results = [measure(size, args.requests, args.max_tools) for size in args.sizes]
    print_table(
        [
            "tools",
            "whole catalog",
            "meta-tools",
            "per call (mean)",
            "per call (max)",
            "visible (mean)",
            "reduction (mean)",
            "reduction (worst)",
            "right tool shown",
        ],
        [
            [
                r["tools"],
                r["full_catalog_tokens"],
                r["meta_tool_tokens"],
                r["mean_tokens_per_call"],
                r["max_tokens_per_call"],
                r["mean_visible_tools"],
                f"{r['reduction_mean']:.1%}",
                f"{r['reduction_worst_call']:.1%}",
                f"{r['requested_tool_visible_on_first_call']:.0%}",
            ]
            for r in results
        ],
    )
    print("\nper tool-call format: tokens per call (mean) / whole catalog, reduction (worst call)")
    print_table(
        ["tools", *FORMATS],
        [
            [
                r["tools"],
                *(
                    f"{f['mean_tokens_per_call']} / {f['full_catalog_tokens']}, "
                    f"{f['reduction_worst_call']:.1%}"
                    for f in (r["per_format"][fmt] for fmt in FORMATS)
                ),
            ]
            for r in results
        ],
    )
    big = [r for r in results if r["tools"] >= 500]
    met = all(r["reduction_worst_call"] >= 0.9 for r in big) and all(
        f["reduction_worst_call"] >= 0.9 for r in big for f in r["per_format"].values()
    )
    print(
        f"\ntarget >= 90% fewer schema tokens per call at 500+ tools: {'met' if met else 'MISSED'}"
    )
    path = write_results(
        "schema_tokens",
        {
            "target": ">= 90% fewer schema tokens per model call at 500+ tools",
            "token_estimate": "schema_tokens: JSON characters / 4 (ratios do not depend on it)",
            "formats": "per_format: the same tool sets as each format writes them into the prompt",
            "target_met": met,
            "results": results,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
