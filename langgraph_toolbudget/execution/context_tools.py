"""The tool-context management tools as a built-in family, off by default.

Its one reason to change: how the executor answers the tool-context tools.

``list_tools``, ``get_tool``, ``list_context_tools``, ``include_tool``,
``exclude_tool``, ``set_tool_include_mode``, ``list_tool_servers``,
``get_tool_server``, ``set_server_include_mode``, ``include_tool_server``,
``exclude_tool_server``: the executor answers them (they never run as plain
tools) through :func:`~langgraph_toolbudget.core.context_commands.run_command`,
and their state updates change the thread's context; the visible set follows at
once (an included tool is callable in the next step, an excluded one is gone).
An answer is cut at :data:`~langgraph_toolbudget.core.meta.MAX_LISTING_CHARS` characters
(with the totals, and how to narrow it), as ``show_all_tools``' is.

The model may narrow the context (exclude a tool or a server) but never lift an
exclusion: an ``include_tool``, ``include_tool_server`` or ``set_*_include_mode`` call on
an excluded tool or server is refused (only the user can include it again, through
``update_context``, the CLI or the MCP context server).

Turn them on with ``enabled_builtins``, e.g.
``BudgetConfig(enabled_builtins={"allow": ["*"]})`` (every built-in) or a list
naming the meta-tools and the ones wanted.

Key Components:
    - :class:`ContextTools`: the family.
    - :data:`CONTEXT_TOOL_NAMES`: its tool names.
"""

from __future__ import annotations

import functools
import json
from typing import Any, ClassVar, TypeGuard

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field, create_model

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.coercion import spelt_as
from langgraph_toolbudget.core.context import INCLUDE_MODES, SessionContext
from langgraph_toolbudget.core.context_commands import (
    COMMANDS,
    EXCLUSION_RULE,
    WRITE_COMMANDS,
    CommandError,
    ExcludedError,
    arguments,
    run_command,
)
from langgraph_toolbudget.core.context_ops import servers
from langgraph_toolbudget.core.limits import MAX_NAME_CHARS
from langgraph_toolbudget.core.meta import MAX_LISTING_CHARS, definition_only
from langgraph_toolbudget.core.spec import IncludeMode
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.execution.builtin_family import (
    BuiltinContext,
    BuiltinResult,
    BuiltinTools,
)

__all__ = ["CONTEXT_TOOL_NAMES", "ContextTools"]

CONTEXT_TOOL_NAMES: tuple[str, ...] = tuple(COMMANDS)
"""The family's tool names, in binding order."""

COMMAND_ERROR = "Error: {problem} Fix the arguments and call {tool} again."
EXCLUDED_ERROR = "Error: {problem}"

_ARG_FIELDS: dict[str, tuple[Any, Any]] = {
    "tool": (str, Field(description="The tool's exact name.")),
    "mode": (
        IncludeMode,
        Field(description=f"The include mode: one of {', '.join(INCLUDE_MODES)}."),
    ),
}


@functools.cache  # one class per command name (eleven): building one costs ~2 ms
def _schema(name: str) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for arg, required in arguments(name).items():
        if arg in _ARG_FIELDS:
            fields[arg] = _ARG_FIELDS[arg]
        elif required:
            fields[arg] = (str, Field(description="The server's name."))
        else:
            fields[arg] = (str | None, Field(default=None, description="The server (optional)."))
    model: type[BaseModel] = create_model(f"_{name}_args", **fields)
    return model


def _as_listed(catalog: ToolCatalog, args: Any) -> Any:
    """``args`` with a ``tool`` or ``server`` the catalog does not list under that name, but
    under one it spells another way (``Slack`` for ``slack``), named as listed: the model's
    face is lenient as the meta-tools are (the user's faces take names as they are)."""
    if not isinstance(args, dict):
        return args
    tool, server = args.get("tool"), args.get("server")
    if _a_name(tool) and catalog.get(tool) is None and not catalog.aliased(tool):
        args = {**args, "tool": spelt_as(tool, catalog.tool_names) or tool}
    if _a_name(server) and server not in (listed := servers(catalog)):
        args = {**args, "server": spelt_as(server, listed) or server}
    return args


def _a_name(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and len(value) <= MAX_NAME_CHARS


def _description(name: str, description: str) -> str:
    """The operation's description for the model: the write operations add the rule that
    an exclusion is the user's to lift."""
    return f"{description} {EXCLUSION_RULE}" if name in WRITE_COMMANDS else description


def _sync_working(
    catalog: ToolCatalog, working: WorkingSet, before: SessionContext, after: SessionContext
) -> None:
    """Make the visible set follow a context change: included tools in, excluded ones
    (and tools just set to ``manual``) out, and the visible tools' reasons true again."""
    if after == before:
        return
    limits = working.node_limits
    # the thread's free tools now: a tool the node pins stays, whatever mode the thread sets
    free = set(after.free(catalog, limits[0])) if limits is not None else set()
    removed: list[str] = []
    added: dict[str, dict[str, str]] = {}
    for spec in catalog.specs:
        if after.decision(spec) == "exclude":
            removed.append(spec.name)
        elif after.in_context(spec):
            added[spec.name] = {"why": "included" if after.decision(spec) else "always"}
        elif after.mode(spec) == "manual" != before.mode(spec) and spec.name not in free:
            removed.append(spec.name)
    working.remove(removed, reason="tool_context")
    if limits is not None:  # free tools on top of the cap, as the next turn has them
        working.follow_free(free)
    working.add(added, reason="tool_context", details=added)
    after.follow_reasons(catalog, working)


class ContextTools(BuiltinTools):
    """The tool-context management tools: off unless ``enabled_builtins`` names them.

    Args:
        catalog: the catalog, in the node's runtime mode.
    """

    default_enabled: ClassVar[bool] = False

    def __init__(self, catalog: ToolCatalog) -> None:
        self.catalog = catalog

    def definitions(self) -> list[BaseTool]:
        return [
            definition_only(name, _description(name, description), _schema(name))
            for name, (description, _) in COMMANDS.items()
        ]

    def handle(self, call: ToolCall, ctx: BuiltinContext) -> BuiltinResult:
        # The fields the operations read: the context as the batch's earlier answers left it.
        values: dict[str, Any] = {
            **ctx.context.state_values(),
            "selected_tools": list(ctx.working.names),
        }
        try:
            # An answer stays in the thread for every later model call: it is cut as
            # show_all_tools' is (the user's faces get the whole answer).
            result = run_command(
                self.catalog,
                values,
                call["name"],
                _as_listed(self.catalog, call.get("args")),
                tools=ctx.builtin_names,
                max_chars=MAX_LISTING_CHARS,
            )
        except ExcludedError as exc:
            return BuiltinResult(EXCLUDED_ERROR.format(problem=exc), error=True)
        except CommandError as exc:
            return BuiltinResult(COMMAND_ERROR.format(problem=exc, tool=call["name"]), error=True)
        update = result.update or {}
        if update:
            _sync_working(self.catalog, ctx.working, ctx.context, ctx.context.merged(update))
        return BuiltinResult(json.dumps(result.data), artifact=result.data, update=update)
