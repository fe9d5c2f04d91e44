"""The tool-context operations by name: the one dispatcher behind every face.

Its one reason to change: the set of tool-context operations and their arguments.

The model's context tools, the MCP context server and the CLI all call
:func:`run_command` with an operation name and its arguments; it
reads the thread's state values, and returns the answer (plain, JSON-ready data)
and the state update to apply (``None`` for the read operations).

An exclusion is lifted only by the user: the user's faces (the CLI, the MCP context
server) call it with ``by_user=True``; for the model's tools (the default) an operation
that would include, or set the mode of, an excluded tool or server is refused
(:class:`ExcludedError`), so nothing the model calls can undo or get around an exclusion.

Key Components:
    - :data:`COMMANDS`: operation name -> (description, argument names).
    - :func:`run_command`: answer one operation.
    - :func:`apply_update`: a thread's values with an update applied, as the reducers would.
    - :class:`CommandError`: a bad call (unknown name, bad mode), worded for the caller.
    - :class:`ExcludedError`: the model asked to include (or set the mode of) an excluded
      tool or server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.context import (
    CONTEXT_REDUCERS,
    SERVER_MODES_FIELD,
    SERVERS_FIELD,
    TOOL_MODES_FIELD,
    TOOLS_FIELD,
    SessionContext,
    server_of,
)
from langgraph_toolbudget.core.context_ops import (
    check_names,
    context_summary,
    exclude_tools,
    get_server,
    get_tool,
    include_tools,
    list_servers,
    list_tools,
    set_include_mode,
)
from langgraph_toolbudget.core.limits import MAX_NAME_CHARS, clip, safe_repr

__all__ = [
    "COMMANDS",
    "CommandError",
    "CommandResult",
    "EXCLUSION_RULE",
    "WRITE_COMMANDS",
    "ExcludedError",
    "apply_update",
    "arguments",
    "run_command",
]

COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "list_tools": (
        "List every tool (optionally of one server) with its include mode and whether it is "
        "in this conversation's context.",
        ("server",),
    ),
    "get_tool": ("Get one tool's details and context status.", ("tool",)),
    "list_context_tools": ("List the tools currently in this conversation's context.", ()),
    "include_tool": (
        "Include a tool in this conversation's context (it becomes usable from the next step).",
        ("tool", "server"),
    ),
    "exclude_tool": (
        "Exclude a tool from this conversation's context: it can no longer be used here.",
        ("tool", "server"),
    ),
    "set_tool_include_mode": (
        "Set a tool's include mode in this conversation: always, manual or agent.",
        ("tool", "mode", "server"),
    ),
    "list_tool_servers": ("List the tool servers with how many of their tools are in context.", ()),
    "get_tool_server": ("Get one tool server's details and its tools.", ("server",)),
    "set_server_include_mode": (
        "Set the include mode of every tool of a server in this conversation: always, manual "
        "or agent.",
        ("server", "mode"),
    ),
    "include_tool_server": ("Include every tool of a server in this conversation.", ("server",)),
    "exclude_tool_server": ("Exclude every tool of a server from this conversation.", ("server",)),
}
"""Operation -> (description, argument names). Required: ``tool``, ``mode`` and, for the
server operations, ``server``; ``server`` of the tool operations is optional (checked)."""

EXCLUSION_RULE = (
    "An excluded tool or server stays excluded: you cannot include it or set its mode, only "
    "the user can include it again."
)
"""The rule the model's context tools add to the descriptions of the operations that change
the context (:data:`WRITE_COMMANDS`)."""

WRITE_COMMANDS: tuple[str, ...] = (
    "include_tool",
    "exclude_tool",
    "set_tool_include_mode",
    "set_server_include_mode",
    "include_tool_server",
    "exclude_tool_server",
)
"""The operations that change a thread's context; the others only read it."""

REQUIRED_ARG_ERROR = "{command} needs the argument {arg!r} (a string); got {args}."
TOO_LONG_ARG_ERROR = (
    "{command}: {arg} {value!r} is longer than any name here, so nothing was done; {how}."
)
NAME_LISTERS = ("list_tools", "list_tool_servers")
"""The operations :data:`TOO_LONG_ARG_ERROR` sends to for the real names (those the caller has)."""
NO_LISTER = "send the exact name (at most {limit} characters)"
""":data:`TOO_LONG_ARG_ERROR`'s advice when the caller has neither of :data:`NAME_LISTERS`."""
UNKNOWN_COMMAND_ERROR = "{command!r} is not a tool-context operation; operations: {known}."
ARGS_NOT_AN_OBJECT_ERROR = (
    "{command} takes its arguments as a JSON object such as {expected}; got {args}."
)
WRONG_SERVER_ERROR = "tool {tool!r} belongs to server {actual!r}, not {server!r}."
EXCLUDED_TOOL_ERROR = (
    "{tool!r} is excluded from this conversation{by}, and only the user can include it "
    "again, so {command} changed nothing. Tell the user if it is needed, or use another tool."
)
EXCLUDED_SERVER_ERROR = (
    "server {server!r} is excluded from this conversation, and only the user can "
    "include it again, so {command} changed nothing. Tell the user if its tools are needed, "
    "or use other tools."
)
LIST_CUT_MESSAGE = (
    "{count:,} more {tools}{of} {are} not listed here (the list is cut at {limit:,} "
    "characters).{how}"
)
"""The note of a list of tools cut at ``max_chars`` (:func:`run_command`)."""
SERVERS_CUT_MESSAGE = (
    "{count:,} more {servers} {are} not listed here (the list is cut at {limit:,} characters).{how}"
)
"""The note of a ``list_tool_servers`` answer cut at ``max_chars``."""
NAMES_LEFT_OUT = "The names of the tools in context are left out"
SERVERS_LEFT_OUT = "{count:,} more {servers} {are} not listed"
CONTEXT_CUT_MESSAGE = "{what} (the answer is cut at {limit:,} characters).{how}"
"""The note of a write operation's context summary cut at ``max_chars``: ``what`` is
:data:`NAMES_LEFT_OUT`, :data:`SERVERS_LEFT_OUT` or both."""
NARROWERS = {
    "list_tools": " list_tools(server=...) lists one server's tools",
    "list_tool_servers": " list_tool_servers names the servers and counts their tools",
    "list_context_tools": " list_context_tools lists the tools in context",
    "get_tool_server": " get_tool_server(server=...) lists one server's tools",
    "get_tool": " get_tool(tool=...) gives one tool's status",
    "search_tools": " search_tools finds tools by name or purpose",
}
"""How a cut answer says to narrow it, by the operation (or meta-tool) it names: only those
the caller has (:func:`_how`)."""


def arguments(command: str) -> dict[str, bool]:
    """An operation's argument names -> required? (``server`` is optional where a tool
    names the server, and for ``list_tools``)."""
    names = COMMANDS[command][1]
    optional_server = "tool" in names or command == "list_tools"
    return {a: not (a == "server" and optional_server) for a in names}


class CommandError(ValueError):
    """A tool-context operation that cannot run: the message says what to fix."""


class _TooLongArg(CommandError):
    """An argument longer than any name; :meth:`message` words the advice for the caller."""

    def __init__(self, command: str, arg: str, value: str) -> None:
        self.command, self.arg, self.value = command, arg, clip(value, 40)
        super().__init__(self.message())

    def message(self, tools: Collection[str] | None = None) -> str:
        """The error, naming only the listing operations in ``tools`` (None: both)."""
        listers = [n for n in NAME_LISTERS if tools is None or n in tools]
        how = (
            f"use {' or '.join(listers)} for the real names"
            if listers
            else NO_LISTER.format(limit=MAX_NAME_CHARS)
        )
        return TOO_LONG_ARG_ERROR.format(
            command=self.command, arg=self.arg, value=self.value, how=how
        )


class ExcludedError(CommandError):
    """The model asked to include, or set the mode of, an excluded tool or server: only the
    user may. The message says what to do instead (never "fix the arguments")."""


@dataclass
class CommandResult:
    """An operation's answer and the state update to apply (None: nothing changes)."""

    data: Any
    update: dict[str, Any] | None = None


def apply_update(values: Mapping[str, Any], update: Mapping[str, Any] | None) -> dict[str, Any]:
    """``values`` with a context update applied, as the state's reducers apply it."""
    out = dict(values)
    for key, value in (update or {}).items():
        reduce = CONTEXT_REDUCERS.get(key)
        out[key] = reduce(out.get(key), value) if reduce is not None else value
    return out


def _arg(command: str, args: Mapping[str, Any], name: str, *, required: bool = True) -> Any:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        shown = safe_repr(dict(args))
        raise CommandError(REQUIRED_ARG_ERROR.format(command=command, arg=name, args=shown))
    if len(value) > MAX_NAME_CHARS:  # no tool, server or mode is that long: never echoed whole
        raise _TooLongArg(command, name, value)
    return value


def _tool_arg(catalog: ToolCatalog, command: str, args: Mapping[str, Any]) -> str:
    tool = _arg(command, args, "tool")
    server = _arg(command, args, "server", required=False)
    spec = catalog.get(tool)
    if spec is not None and tool in catalog and server is not None:
        actual = server_of(spec)
        if actual != server:
            raise CommandError(WRONG_SERVER_ERROR.format(tool=tool, actual=actual, server=server))
    return tool


def _write(
    catalog: ToolCatalog, values: Mapping[str, Any], update: dict[str, Any], tool: str | None
) -> CommandResult:
    after = apply_update(values, update)
    if tool is not None:
        data: dict[str, Any] = {"tool": get_tool(catalog, after, tool)}
    else:
        data = {}
    return CommandResult({**data, "context": context_summary(catalog, after)}, update)


def _keep_exclusions(
    catalog: ToolCatalog, values: Mapping[str, Any], command: str, update: Mapping[str, Any]
) -> None:
    """Raise :class:`ExcludedError` if ``update`` writes anything but ``exclude`` for an
    excluded tool or server, or a mode for one: what only the user may do."""
    before = SessionContext.from_state(values)
    for field_name in (TOOLS_FIELD, TOOL_MODES_FIELD):
        for name, value in (update.get(field_name) or {}).items():
            if field_name == TOOLS_FIELD and value == "exclude":
                continue
            spec = catalog.get(name)
            key = before.excluded_as(spec) if spec is not None else None
            if before.tools.get(name) == "exclude":
                by = ""
            elif key is not None:  # under its other name (an MCP tool's alias)
                by = f" (under its other name {key!r})"
            elif spec is not None and before.decision(spec) == "exclude":
                by = f" (its server {server_of(spec)!r} is excluded)"
            else:
                continue
            raise ExcludedError(EXCLUDED_TOOL_ERROR.format(tool=name, by=by, command=command))
    for field_name in (SERVERS_FIELD, SERVER_MODES_FIELD):
        for name, value in (update.get(field_name) or {}).items():
            if field_name == SERVERS_FIELD and value == "exclude":
                continue
            if before.servers.get(name) == "exclude":
                raise ExcludedError(EXCLUDED_SERVER_ERROR.format(server=name, command=command))


def run_command(
    catalog: ToolCatalog,
    values: Mapping[str, Any] | None,
    command: str,
    args: Any,
    *,
    by_user: bool = False,
    tools: Collection[str] | None = None,
    max_chars: int | None = None,
) -> CommandResult:
    """Answer one tool-context operation for a thread.

    Args:
        catalog: the catalog of the thread's agent.
        values: the thread's state values (None or ``{}``: a new thread).
        command: an operation of :data:`COMMANDS`.
        args: its arguments, a mapping (anything else is a :class:`CommandError`).
        by_user: the user asks (the CLI, the MCP context server): an exclusion may be
            lifted. False (the model's tools): an operation that would include, or set
            the mode of, an excluded tool or server is refused.
        tools: the operations the caller has (the model's enabled context tools): an
            error's advice names only these. None: every operation (the user's faces).
        max_chars: the most characters an answer may hold as JSON (None: no bound, the
            user's faces). A longer list of tools (``list_tools``, ``list_context_tools``) is
            cut to the rows that fit, in an object ``{"total", "tools", "message"}`` whose
            message says how many are left out and how to narrow the list
            (:data:`LIST_CUT_MESSAGE`); ``list_tool_servers`` likewise
            (``{"total", "servers", "message"}``), ``get_tool_server`` keeps the server's row
            with the ``tool_rows`` that fit and a ``message``, and a write operation's context
            summary leaves out the tools' names, then the servers that do not fit
            (:data:`CONTEXT_CUT_MESSAGE`). An answer that fits is given as it is.

    Returns:
        The answer and, for the write operations, the state update.

    Raises:
        CommandError: an unknown operation, a missing argument, an unknown tool,
            server or mode (the message names it and the closest real names).
        ExcludedError: without ``by_user``, an operation on an excluded tool or server
            other than excluding it.
    """
    values = values or {}
    if command not in COMMANDS:
        raise CommandError(UNKNOWN_COMMAND_ERROR.format(command=command, known=sorted(COMMANDS)))
    args = args or {}
    if not isinstance(args, Mapping):
        expected = json.dumps({name: f"<{name}>" for name in arguments(command)})
        raise CommandError(
            ARGS_NOT_AN_OBJECT_ERROR.format(
                command=command, expected=expected, args=safe_repr(args)
            )
        )
    try:
        result = _run(catalog, values, command, args, by_user=by_user)
        if max_chars is not None:
            bounded = _bounded(command, args, result.data, max_chars, tools)
            result = CommandResult(bounded, result.update)
        if result.update and not by_user:
            _keep_exclusions(catalog, values, command, result.update)
        return result
    except _TooLongArg as exc:
        raise CommandError(exc.message(tools)) from None
    except CommandError:
        raise
    except (TypeError, ValueError) as exc:
        raise CommandError(str(exc)) from None


def _run(
    catalog: ToolCatalog,
    values: Mapping[str, Any],
    command: str,
    args: Mapping[str, Any],
    *,
    by_user: bool,
) -> CommandResult:
    if command == "list_tools":
        return CommandResult(
            list_tools(catalog, values, server=_arg(command, args, "server", required=False))
        )
    if command == "get_tool":
        return CommandResult(get_tool(catalog, values, _arg(command, args, "tool")))
    if command == "list_context_tools":
        return CommandResult([r for r in list_tools(catalog, values) if r["in_context"]])
    if command == "list_tool_servers":
        return CommandResult(list_servers(catalog, values))
    if command == "get_tool_server":
        return CommandResult(get_server(catalog, values, _arg(command, args, "server")))
    # The faces name the tools and servers listed now (the operations themselves also take a
    # draft, another name of a tool, or a name of a server that failed, as update_context does).
    if command in ("include_tool", "exclude_tool"):
        tool = _tool_arg(catalog, command, args)
        check_names(catalog, [tool])
        if command == "exclude_tool":
            update = exclude_tools(tools=[tool], catalog=catalog)
        else:  # the user's include lifts the tool's exclusions under its aliases, checked
            update = include_tools(tools=[tool], catalog=catalog, state=values if by_user else None)
        return _write(catalog, values, update, tool)
    if command == "set_tool_include_mode":
        tool = _tool_arg(catalog, command, args)
        check_names(catalog, [tool])
        mode = _arg(command, args, "mode")
        return _write(catalog, values, set_include_mode(mode, tools=[tool], catalog=catalog), tool)
    server = _arg(command, args, "server")
    check_names(catalog, (), [server])
    if command == "set_server_include_mode":
        mode = _arg(command, args, "mode")
        update = set_include_mode(mode, servers=[server], catalog=catalog)
    elif command == "include_tool_server":
        update = include_tools(servers=[server], catalog=catalog)
    else:
        update = exclude_tools(servers=[server], catalog=catalog)
    return _write(catalog, values, update, None)


def _bounded(
    command: str,
    args: Mapping[str, Any],
    data: Any,
    max_chars: int,
    tools: Collection[str] | None,
) -> Any:
    """``data``, an answer of ``command``, as it is if its JSON fits ``max_chars``; else cut
    to what fits, with a note of what is left out and how to narrow it."""
    if command in ("list_tools", "list_context_tools"):
        server = args.get("server") if command == "list_tools" else None
        if server is not None:
            narrowers: tuple[str, ...] = ("get_tool", "search_tools")
        elif command == "list_tools":
            narrowers = ("list_tools", "list_tool_servers", "get_tool", "search_tools")
        else:
            narrowers = ("list_tool_servers", "get_tool_server", "get_tool")
        of = f" of server {server!r}" if server is not None else ""
        how = _how(narrowers, tools)
        return _cut_list(
            data,
            "tools",
            max_chars,
            lambda more: LIST_CUT_MESSAGE.format(
                **_counted(more, "tools"), of=of, limit=max_chars, how=how
            ),
        )
    if command == "list_tool_servers":
        return _cut_list(
            data,
            "servers",
            max_chars,
            lambda more: SERVERS_CUT_MESSAGE.format(
                **_counted(more, "servers"), limit=max_chars, how=""
            ),
        )
    if command == "get_tool_server":
        rows = data["tool_rows"]
        of = f" of server {data['name']!r}"
        how = _how(("get_tool", "search_tools"), tools)
        return _fitted(
            data,
            rows,
            max_chars,
            lambda shown, more: {
                **data,
                "tool_rows": rows[:shown],
                "message": LIST_CUT_MESSAGE.format(
                    **_counted(more, "tools"), of=of, limit=max_chars, how=how
                ),
            },
        )
    if command in WRITE_COMMANDS:  # its answer ends with the context summary
        return _bounded_summary(args, data, max_chars, tools)
    return data


def _bounded_summary(
    args: Mapping[str, Any], data: dict[str, Any], max_chars: int, tools: Collection[str] | None
) -> dict[str, Any]:
    """A write operation's answer whose context summary leaves out the tools' names, then the
    servers that do not fit (the server it changed first), if the whole does not fit."""
    context = data["context"]
    changed = args.get("server") or (data.get("tool") or {}).get("server")
    rows = sorted(context["servers"], key=lambda row: row["name"] != changed)  # stable
    named = any(row["tool_names"] for row in rows)
    servers = [{k: v for k, v in row.items() if k != "tool_names"} for row in rows]
    counts = {k: context[k] for k in ("in_context", "total")}

    def summary(shown: int, more: int) -> dict[str, Any]:
        left = [NAMES_LEFT_OUT] if named else []
        if more:
            left.append(SERVERS_LEFT_OUT.format(**_counted(more, "servers")))
        cut = {"servers": servers[:shown], **counts}
        if left:
            operations = ("list_context_tools", "get_tool_server") if named else ()
            how = _how(
                (*operations, *(("list_tool_servers",) if more else ())), tools, "To see them"
            )
            what = ", and ".join(left)
            cut["message"] = CONTEXT_CUT_MESSAGE.format(what=what, limit=max_chars, how=how)
        return {**data, "context": cut}

    answer: dict[str, Any] = _fitted(data, servers, max_chars, summary)
    return answer


def _counted(count: int, noun: str) -> dict[str, Any]:
    """The format fields of ``count`` more ``noun`` (plural): the count, the noun and its verb
    in number ("1 more tool is", "2 more tools are")."""
    return {
        "count": count,
        noun: noun if count != 1 else noun[:-1],
        "are": "are" if count != 1 else "is",
    }


def _how(
    operations: Sequence[str], tools: Collection[str] | None, lead: str = "To narrow it"
) -> str:
    """The advice of a cut answer: the ``operations`` the caller has (:data:`NARROWERS`;
    ``tools`` None: the user's faces, which have every operation and no meta-tool)."""
    named = [NARROWERS[o] for o in operations if o in (COMMANDS if tools is None else tools)]
    return f" {lead}:{';'.join(named)}." if named else ""


def _cut_list(rows: list[Any], key: str, max_chars: int, note: Callable[[int], str]) -> Any:
    """``rows`` if their JSON fits ``max_chars``; else ``{"total", key, "message"}`` with the
    first rows that fit under ``key`` and ``note(how many are left out)``."""
    return _fitted(
        rows,
        rows,
        max_chars,
        lambda shown, more: {"total": len(rows), key: rows[:shown], "message": note(more)},
    )


def _fitted(
    whole: Any, rows: list[Any], max_chars: int, cut: Callable[[int, int], dict[str, Any]]
) -> Any:
    """``whole`` if its JSON fits ``max_chars``; else ``cut(shown, more)`` with as many of the
    first ``rows`` shown as fit (``more`` left out), the whole answer within ``max_chars``; a
    bound too small for the note alone gets the shorter of the two."""
    size = len(json.dumps(whole))
    if size <= max_chars:
        return whole
    every = cut(len(rows), 0)  # a summary without the tools' names may hold every server
    if len(json.dumps(every)) <= max_chars:
        return every
    # The rows fill the room the answer without them leaves (its note counting every row as
    # left out: fewer left out, no more digits), less the "[]" already counted.
    shown = _rows_fitting(rows, max_chars - len(json.dumps(cut(0, len(rows)))) + 2)
    while shown and len(json.dumps(cut(shown, len(rows) - shown))) > max_chars:  # a guard
        shown -= 1
    answer = cut(shown, len(rows) - shown)
    return whole if size <= len(json.dumps(answer)) else answer  # a bound below the note


def _rows_fitting(rows: list[dict[str, Any]], max_chars: int) -> int:
    """How many of the first ``rows`` fit ``max_chars`` characters as a JSON array
    (each row written once, and no more than fit)."""
    size = 2  # []
    for shown, row in enumerate(rows):
        size += len(json.dumps(row)) + (2 if shown else 0)  # ", " between rows
        if size > max_chars:
            return shown
    return len(rows)
