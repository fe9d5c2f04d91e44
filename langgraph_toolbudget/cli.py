"""``toolbudget``: a thread's tool context from the shell, and an offline explain.

Its one reason to change: the ``toolbudget`` command line (its commands, options and output).

Commands (``--json`` on each prints the data instead of text):

- ``toolbudget tools``: every tool grouped by server, with context indicators and counts;
- ``toolbudget tools include --server S`` or ``--tool T`` / ``tools exclude ...``;
- ``toolbudget tools mode (--server S | --tool T) always|manual|agent``;
- ``toolbudget explain "query" --catalog module:attribute``: the categories with
  scores, the tools chosen and why, the schema tokens saved.

The ``tools`` commands act on a thread of a LangGraph server (``--url``,
``--thread``, ``--catalog``) or of a local ``SqliteSaver`` file (``--sqlite``,
``--graph``, ``--thread``). Errors print one line that says what to do, and exit 1.

Needs the ``cli`` extra (click): ``pip install -e '.[cli]'`` from a clone,
``pip install 'langgraph-toolbudget[cli]'`` once published.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

try:
    import click
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise SystemExit(
        "toolbudget needs click: pip install -e '.[cli]' in a clone of langgraph-toolbudget "
        "(or pip install click)"
    ) from exc

__all__ = ["main"]

# The package's modules (LangChain, LangGraph) load in the commands, not here, so
# `toolbudget --help` answers at once.
MODES = ("always", "manual", "agent")
"""The include modes (``core.context.INCLUDE_MODES``, spelled out for the same reason)."""

MARKS = {"excluded": "-", "in": "x", "out": " "}
DONE = {
    "include_tool": "included",
    "include_tool_server": "included",
    "exclude_tool": "excluded",
    "exclude_tool_server": "excluded",
    "set_tool_include_mode": "set the mode of",
    "set_server_include_mode": "set the mode of",
}


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _target_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--url", help="The LangGraph server's URL (e.g. http://127.0.0.1:2024)."),
        click.option("--thread", "thread_id", help="The thread id."),
        click.option("--sqlite", help="A SqliteSaver file holding the thread."),
        click.option("--graph", help="With --sqlite: the app's StateGraph, module:attribute."),
        click.option("--catalog", help="The agent's ToolCatalog, module:attribute."),
        click.option("--json", "as_json", is_flag=True, help="Print JSON."),
        click.option(
            "--graph-id",
            help="With --url: the agent's graph on the server, for a thread that never ran.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _run(opts: dict[str, Any], command: str, args: dict[str, Any]) -> tuple[Any, Any]:
    """Open the thread, run the operation; returns (answer data, thread values after)."""
    from langgraph_toolbudget.core.context_commands import CommandError
    from langgraph_toolbudget.threads import ThreadError, execute, open_thread

    thread = catalog = None
    try:
        thread, catalog = open_thread(
            url=opts["url"],
            thread_id=opts["thread_id"],
            sqlite=opts["sqlite"],
            graph=opts["graph"],
            catalog=opts["catalog"],
            graph_id=opts["graph_id"],
        )
        result = execute(thread, catalog, command, args)
        return result.data, (thread.values(), catalog)
    except (ThreadError, CommandError) as exc:
        _fail(str(exc))
        raise AssertionError("unreachable") from None
    except Exception as exc:  # noqa: BLE001 - a one-line error, never a traceback
        _fail(f"{type(exc).__name__}: {exc}")
        raise AssertionError("unreachable") from None
    finally:
        close = getattr(thread, "close", None)
        if close is not None:
            close()


def _merged(ctx: click.Context, **given: Any) -> dict[str, Any]:
    """The target options: the subcommand's, else the ``tools`` group's."""
    parent = ctx.obj or {}
    return {k: v if v not in (None, False) else parent.get(k) for k, v in given.items()}


def _print_tools(values: Any, catalog: Any) -> None:
    from langgraph_toolbudget.core.context_ops import context_summary, list_tools

    summary = context_summary(catalog, values)
    rows = list_tools(catalog, values)
    click.echo(f"{summary['in_context']} of {summary['total']} tools in context")
    for group in summary["servers"]:
        click.echo(f"{group['name']} {group['summary']}")
        for row in (r for r in rows if r["server"] == group["name"]):
            mark = "excluded" if row["excluded"] else ("in" if row["in_context"] else "out")
            note = f"  {row['context']}" if row["context"] in ("include", "exclude") else ""
            click.echo(f"  [{MARKS[mark]}] {row['name']:<28} {row['mode']}{note}")


@click.group()
def main() -> None:
    """Manage a LangGraph agent's tool context and explain its tool choice."""


@main.group(invoke_without_command=True)
@_target_options
@click.pass_context
def tools(ctx: click.Context, **opts: Any) -> None:
    """List the thread's tools grouped by server ([x] in context, [-] excluded)."""
    ctx.obj = opts
    if ctx.invoked_subcommand is not None:
        return
    data, (values, catalog) = _run(opts, "list_tools", {})
    if opts["as_json"]:
        from langgraph_toolbudget.core.context_ops import context_summary

        click.echo(json.dumps({"tools": data, "context": context_summary(catalog, values)}))
    else:
        _print_tools(values, catalog)


def _change(ctx: click.Context, command: str, args: dict[str, Any], opts: dict[str, Any]) -> None:
    opts = _merged(ctx, **opts)
    data, (values, catalog) = _run(opts, command, args)
    if opts["as_json"]:
        click.echo(json.dumps(data))
        return
    target = f"tool {args['tool']}" if "tool" in args else f"server {args['server']}"
    to = f" to {args['mode']}" if "mode" in args else ""
    server = args.get("server") or data["tool"]["server"]
    group = next(g for g in data["context"]["servers"] if g["name"] == server)
    click.echo(
        f"{DONE[command]} {target}{to} in thread {opts['thread_id']}: "
        f"{group['name']} {group['summary']}"
    )


EMPTY_TOOL_ERROR = (
    "--tool is empty: give one tool's name, or leave --tool out to act on the whole --server"
)
EMPTY_SERVER_ERROR = (
    "--server is empty: give a server's name, or leave --server out and give --tool "
    "(its server is then known)"
)


def _server_or_tool(
    server: str | None, tool: str | None, tool_cmd: str, server_cmd: str
) -> tuple[str, dict[str, str]]:
    # A given but empty name is an error, never "not given": `--tool ""` must not act on
    # the whole server.
    if tool is not None and not tool.strip():
        _fail(EMPTY_TOOL_ERROR)
    if server is not None and not server.strip():
        _fail(EMPTY_SERVER_ERROR)
    if tool is not None:
        return tool_cmd, {"tool": tool, **({"server": server} if server is not None else {})}
    if server is None:
        _fail("name a --server, or a --tool (its server is then known)")
    return server_cmd, {"server": str(server)}


def _decision_command(verb: str, help_text: str) -> None:
    """Add ``tools include`` / ``tools exclude``: one tool, or a whole server."""

    @tools.command(name=verb, help=help_text)
    @click.option("--server", help="The server (not needed with --tool).")
    @click.option("--tool", help="One tool (default: every tool of --server).")
    @_target_options
    @click.pass_context
    def decide(ctx: click.Context, server: str | None, tool: str | None, **opts: Any) -> None:
        command, args = _server_or_tool(server, tool, f"{verb}_tool", f"{verb}_tool_server")
        _change(ctx, command, args, opts)


_decision_command("include", "Include a tool, or a whole server, in the thread's context.")
_decision_command("exclude", "Exclude a tool, or a whole server, from the thread's context.")


@tools.command()
@click.argument("mode_name", metavar="MODE", type=click.Choice(MODES))
@click.option("--server", help="The server (not needed with --tool).")
@click.option("--tool", help="One tool (default: the mode of --server).")
@_target_options
@click.pass_context
def mode(
    ctx: click.Context, mode_name: str, server: str | None, tool: str | None, **opts: Any
) -> None:
    """Set the include mode (always, manual, agent) of a tool or a server in the thread."""
    command, args = _server_or_tool(
        server, tool, "set_tool_include_mode", "set_server_include_mode"
    )
    _change(ctx, command, {**args, "mode": mode_name}, opts)


@main.command()
@click.argument("query")
@click.option("--catalog", help="The ToolCatalog, module:attribute (or $TOOLBUDGET_CATALOG).")
@click.option("--max-tools", type=int, help="The budget in tools.  [default: 8]")
@click.option("--min-per-category", type=int, default=2, show_default=True)
@click.option("--max-categories", type=int, default=3, show_default=True)
@click.option("--search-limit", type=int, default=5, show_default=True)
@click.option("--max-schema-tokens", type=int, help="A budget in schema tokens.")
@click.option("--max-visible", type=int, help="The cap on the visible set.")
@click.option("--runtime-mode", type=click.Choice(["production", "debug"]), default="production")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def explain(query: str, catalog: str | None, as_json: bool, **given: Any) -> None:
    """Explain the first-turn tool choice for QUERY: categories, tools and why, tokens saved."""
    from langgraph_toolbudget.config import BudgetConfig
    from langgraph_toolbudget.core.meta import meta_tool_definitions
    from langgraph_toolbudget.explain import explain as explain_choice
    from langgraph_toolbudget.threads import ThreadError, load_catalog

    # A flag not given is the agent's default: a token budget alone caps no count.
    options = {name: value for name, value in given.items() if value is not None}
    for name, value in options.items():  # BudgetConfig's checks, one flag at a time
        try:
            BudgetConfig(**{name: value})
        except (TypeError, ValueError) as exc:
            _fail(f"--{name.replace('_', '-')}: {exc}")
    try:
        found = load_catalog(catalog)
    except ThreadError as exc:
        _fail(str(exc))
        return
    except Exception as exc:  # noqa: BLE001 - a one-line error, never a traceback
        _fail(f"{type(exc).__name__}: {exc}")
        return
    meta = meta_tool_definitions(found.categories)
    data = explain_choice(found, query, meta_tools=meta, **options)
    if as_json:
        click.echo(json.dumps(data))
        return
    click.echo(f"Query: {query}")
    click.echo("Categories:")
    for cat in data["categories"]:
        click.echo(f"  {cat['name']:<20} {cat['score']:.2f}")
    click.echo(f"Tools ({len(data['tools'])} of {len(found)}):")
    for row in data["tools"]:
        click.echo(f"  {row['name']:<28} {_why(row)}")
    tokens = data["schema_tokens"]
    click.echo(
        f"Schema tokens: {tokens['chosen']} of {tokens['all']} "
        f"(saved {tokens['saved']}, {tokens['saved_ratio']:.0%})"
    )


def _why(row: dict[str, Any]) -> str:
    if row["why"] == "budget":
        return f"budget: {row['category']} (share {row['share']}), score {row['score']:.2f}"
    if "score" in row:
        return f"{row['why']}: score {row['score']:.2f}"
    return str(row["why"])


if __name__ == "__main__":
    main()
