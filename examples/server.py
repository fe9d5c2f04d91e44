"""Graphs for LangGraph server (``langgraph.json``): the prebuilt agent, served.

An example beside the package, not part of it: ``langgraph.json`` names this file
(``./examples/server.py:example_agent``), and the server loads it by path.

Key Components:
    - :func:`example_agent`: graph factory, the prebuilt agent over the built-in
      example catalog (40 offline tools).
    - :func:`mcp_agent`: async graph factory, the prebuilt agent over MCP
      servers: those of ``$TOOLBUDGET_MCP_SERVERS`` (a JSON file, or inline
      JSON: server name -> ``MultiServerMCPClient`` connection dict), by
      default the three example FastMCP servers of ``examples/mcp_servers/``
      (beside this file).
      The catalog (one persistent session per server) is loaded once per
      process and shared by every run.
    - :func:`text_format_agent`: graph factory, the prebuilt agent over the
      example catalog with the Hermes text tool-call format as primary
      (``tool_call_formats={"enabled": ["native", "hermes"], "primary":
      "hermes"}``); its default model is ``"demo-hermes"``.
    - :func:`codemode_agent`: graph factory, the prebuilt agent over the example catalog in
      CodeMode (``tool_call_formats={"enabled": ["native", "codemode"], "primary":
      "codemode"}``, ``python_execution`` enabled): the model works by writing Python over
      its tools, run in the sandbox; its default model is ``"demo-codemode"``.
    - :func:`middleware_agent`: graph factory, the same app built the LangChain v1
      way: ``create_agent`` with :class:`~langgraph_toolbudget.ToolBudgetMiddleware`
      over the example catalog.
    - :func:`chat_model`: the chat model named by a spec: ``"demo"`` (the
      default) is :class:`~langgraph_toolbudget.demo.model.DemoChatModel`, a
      deterministic rule-based model; ``"demo-hermes"`` the same rules as a
      text-only model writing Hermes tool calls (``HermesDemoChatModel``);
      ``"demo-codemode"`` the same rules writing Python programs (``CodeModeDemoChatModel``);
      ``"provider:model"`` (e.g.
      ``"openai:gpt-4o-mini"``, ``"ollama:qwen3:8b"``) goes through
      ``langchain.chat_models.init_chat_model``, imported only then, so the
      package depends on no provider.
    - :func:`model_spec`: which model a run uses: ``configurable.model`` of the
      run or assistant config, else ``$TOOLBUDGET_MODEL``, else ``"demo"``.

Each factory reads these ``configurable`` keys (all optional):
``model`` (see above), ``max_tools`` (budget, default 8) and ``mode``
(``"parallel_safe"`` or ``"sequential"``).

Typical Usage:
    ```bash
    langgraph dev --no-browser                                 # the demo model
    TOOLBUDGET_MODEL=openai:gpt-4o-mini langgraph dev           # a real model
    ```
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.demo.codemode_model import CodeModeDemoChatModel
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel
from langgraph_toolbudget.demo.text_model import HermesDemoChatModel
from langgraph_toolbudget.nodes.models import ModelUnavailableError, resolve_chat_model
from langgraph_toolbudget.nodes.prebuilt import create_toolbudget_agent

if TYPE_CHECKING:
    from langgraph_toolbudget.mcp import MCPToolCatalog

__all__ = [
    "CODEMODE_DEMO_MODEL",
    "DEMO_MODEL",
    "EXAMPLE_MCP_SERVERS",
    "HERMES_DEMO_MODEL",
    "MODEL_ENV",
    "ModelUnavailableError",
    "MCP_SERVERS_ENV",
    "agent_for",
    "chat_model",
    "codemode_agent",
    "default_mcp_connections",
    "example_mcp_connections",
    "example_agent",
    "mcp_agent",
    "mcp_connections",
    "middleware_agent",
    "model_spec",
    "text_format_agent",
]

DEMO_MODEL = "demo"
"""The model spec of the built-in rule-based demo model."""
HERMES_DEMO_MODEL = "demo-hermes"
"""The model spec of the demo model without native tool calling (Hermes calls as text)."""
CODEMODE_DEMO_MODEL = "demo-codemode"
"""The model spec of the demo model that works by writing Python (CodeMode)."""
MODEL_ENV = "TOOLBUDGET_MODEL"
"""Environment variable naming the default chat model, e.g. ``openai:gpt-4o-mini``."""

MCP_SERVERS_ENV = "TOOLBUDGET_MCP_SERVERS"
"""Environment variable: :func:`mcp_agent`'s MCP connections, as JSON or a JSON file's path."""

MCP_SERVERS_DIR = Path(__file__).resolve().parent / "mcp_servers"
"""The example FastMCP servers' folder, beside this file."""
EXAMPLE_MCP_SERVERS = {
    "math": "math_server.py",
    "notes": "notes_server.py",
    "text": "text_server.py",
}
"""Example server name -> its script in :data:`MCP_SERVERS_DIR`."""

BAD_MCP_SERVERS_ERROR = (
    "{env} must be a JSON object (server name -> MultiServerMCPClient connection dict, e.g. "
    '{{"math": {{"transport": "stdio", "command": "python", "args": ["server.py"]}}}}) '
    "or the path of a file holding one; {problem}"
)
NO_MCP_TOOLS_ERROR = "no MCP server could be loaded, so there are no tools to serve: {errors}"

BAD_OPTION_ERROR = "configurable[{key!r}] must be {expected}, got {value!r}"


@functools.lru_cache(maxsize=16)
def chat_model(spec: str = DEMO_MODEL) -> BaseChatModel:
    """The chat model for a spec (cached, so a factory called per run stays cheap).

    Args:
        spec: ``"demo"`` for the offline rule-based model, or anything
            ``init_chat_model`` accepts: ``"openai:gpt-4o-mini"``,
            ``"anthropic:claude-3-5-haiku-latest"``, ``"ollama:qwen3:8b"`` ...

    Returns:
        The chat model (the same object for the same spec).

    Raises:
        ModelUnavailableError: ``langchain`` or the provider's package is not
            installed (an ``ImportError``); the message says what to install.
        ValueError: ``init_chat_model`` cannot read the spec.
    """
    spec = spec.strip()
    if not spec or spec == DEMO_MODEL:
        return DemoChatModel()
    if spec == HERMES_DEMO_MODEL:
        return HermesDemoChatModel()
    if spec == CODEMODE_DEMO_MODEL:
        return CodeModeDemoChatModel()
    model: BaseChatModel = resolve_chat_model(spec, what="model")
    return model


def _configurable(config: RunnableConfig | None) -> dict[str, Any]:
    return dict((config or {}).get("configurable") or {})


def model_spec(config: RunnableConfig | None = None) -> str:
    """The model a run uses: ``configurable.model``, else ``$TOOLBUDGET_MODEL``, else ``demo``.

    Args:
        config: a run (or assistant) config.

    Returns:
        A model spec for :func:`chat_model`.

    Raises:
        TypeError: ``configurable.model`` is not a string.
    """
    value = _configurable(config).get("model") or os.environ.get(MODEL_ENV) or DEMO_MODEL
    if not isinstance(value, str):
        raise TypeError(BAD_OPTION_ERROR.format(key="model", expected="a string", value=value))
    return value


def _options(config: RunnableConfig | None) -> dict[str, Any]:
    conf = _configurable(config)
    options: dict[str, Any] = {}
    if conf.get("max_tools") is not None:
        value = conf["max_tools"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                BAD_OPTION_ERROR.format(key="max_tools", expected="an integer", value=value)
            )
        options["max_tools"] = value
    if conf.get("mode") is not None:
        options["mode"] = conf["mode"]
    return options


def agent_for(
    catalog: ToolCatalog, config: RunnableConfig | None = None, **options: Any
) -> CompiledStateGraph:
    """The prebuilt agent over ``catalog`` with the model and options of ``config``.

    Compiled without a checkpointer: LangGraph server supplies its own.

    Args:
        catalog: the tool catalog.
        config: a run config; reads ``configurable.model``, ``max_tools``, ``mode``.
        options: more keyword arguments of :func:`create_toolbudget_agent`.

    Returns:
        The compiled graph.

    Raises:
        TypeError: ``configurable.max_tools`` or ``model`` has the wrong type.
    """
    spec, options = model_spec(config), {**_options(config), **options}

    def build() -> CompiledStateGraph:
        return create_toolbudget_agent(chat_model(spec), catalog, **options).compile()

    return _cached((catalog, "prebuilt", spec), options, build)


_GRAPHS_CACHE_SIZE = 32
_graphs: dict[tuple[Any, ...], CompiledStateGraph] = {}


def _cached(
    key: tuple[Any, ...], options: dict[str, Any], build: Callable[[], CompiledStateGraph]
) -> CompiledStateGraph:
    """The graph ``build`` makes, built once per key (catalog, graph kind, model) and options.

    LangGraph server calls a factory for every run and state read, and copies the graph it
    returns (with its checkpointer and store), so one compiled graph serves them all; building
    it per run cost more than the run. At most 32 are kept; options that are not JSON are not
    cached.
    """
    try:
        full = (*key, json.dumps(options, sort_keys=True))
    except TypeError:
        return build()
    graph = _graphs.get(full)
    if graph is None:
        if len(_graphs) >= _GRAPHS_CACHE_SIZE:
            del _graphs[next(iter(_graphs))]
        graph = _graphs[full] = build()
    return graph


_example: concurrent.futures.Future[ToolCatalog] | None = None


async def example_agent(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory: the prebuilt agent over the built-in example catalog.

    The catalog (tools over one in-memory workspace, shared by the server's
    threads) is built once per process, in a worker thread: its SQLite setup
    would block the server's event loop.

    Args:
        config: the run's config (``configurable.model``, ``max_tools``, ``mode``).

    Returns:
        The compiled graph.
    """
    return agent_for(await _example_catalog(), config)


async def middleware_agent(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory: ``create_agent`` + ``ToolBudgetMiddleware`` over the example catalog.

    The same app as :func:`example_agent`, built with LangChain's agent and the
    middleware instead of the prebuilt graph (needs ``langchain``, in the
    ``middleware`` extra).

    Args:
        config: the run's config (``configurable.model``, ``max_tools``, ``mode``).

    Returns:
        The compiled agent.
    """
    from langchain.agents import create_agent

    from langgraph_toolbudget.middleware import ToolBudgetMiddleware

    catalog, spec, options = await _example_catalog(), model_spec(config), _options(config)

    def build() -> CompiledStateGraph:
        # One instance serves every thread: its sequential mode locks per thread_id.
        budget = ToolBudgetMiddleware(catalog, **options)
        agent: CompiledStateGraph = create_agent(chat_model(spec), middleware=[budget])
        return agent

    return _cached((catalog, "middleware", spec), options, build)


async def _example_catalog() -> ToolCatalog:
    """The example catalog, built once per process: concurrent first runs share one build
    (a loop-independent future), else each would build (and serve) its own catalog."""
    global _example
    if _example is None:
        _example = concurrent.futures.Future()
        try:
            _example.set_result(await asyncio.to_thread(_build_example))
        except BaseException as exc:
            future, _example = _example, None
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning
            raise
    return await asyncio.wrap_future(_example)


async def text_format_agent(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory: the example agent with the Hermes text tool-call format as primary.

    The model is ``configurable.model`` (default ``"demo-hermes"``, a model
    without native tool calling): the tools are written into its system prompt
    and its ``<tool_call>`` replies parsed; a native model given here is also
    driven through Hermes, the primary format.

    Args:
        config: the run's config (``configurable.model``, ``max_tools``, ``mode``).

    Returns:
        The compiled graph.
    """
    formats = {"enabled": ["native", "hermes"], "primary": "hermes"}
    config = _default_model(config, HERMES_DEMO_MODEL)
    return agent_for(await _example_catalog(), config, tool_call_formats=formats)


async def codemode_agent(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory: the example agent in CodeMode.

    The model (``configurable.model``, default ``"demo-codemode"``) sees its tools as
    Python functions and runs programs over them with ``python_execution``, in the
    ``pydantic-monty`` sandbox (the ``codemode`` extra); the meta-tools are functions too.

    Args:
        config: the run's config (``configurable.model``, ``max_tools``, ``mode``).

    Returns:
        The compiled graph.
    """
    formats = {"enabled": ["native", "codemode"], "primary": "codemode"}
    builtins = ["python_execution", "search_tools", "add_tool", "request_more_tools"]
    config = _default_model(config, CODEMODE_DEMO_MODEL)
    catalog = await _example_catalog()
    return agent_for(catalog, config, tool_call_formats=formats, enabled_builtins=builtins)


def _default_model(config: RunnableConfig | None, spec: str) -> RunnableConfig:
    """``config`` with ``configurable.model`` set to ``spec`` unless the run names one."""
    conf = _configurable(config)
    if conf.get("model"):
        return config or {}
    return {**(config or {}), "configurable": {**conf, "model": spec}}


def _build_example() -> ToolCatalog:
    catalog = build_example_catalog()
    _ = catalog.index, catalog.category_index  # build the search indexes here, off the loop
    return catalog


# --- MCP ---------------------------------------------------------------------------------------


def example_mcp_connections(names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """Stdio connections to the example FastMCP servers of ``examples/mcp_servers/``.

    Args:
        names: which servers (``math``, ``notes``, ``text``); all three by default.

    Returns:
        Server name -> connection dict (``MultiServerMCPClient`` format): this Python
        interpreter running the server's script by path.

    Raises:
        KeyError: a name that is not one of the example servers.
    """
    chosen = list(EXAMPLE_MCP_SERVERS) if names is None else list(names)
    unknown = sorted(set(chosen) - set(EXAMPLE_MCP_SERVERS))
    if unknown:
        known = sorted(EXAMPLE_MCP_SERVERS)
        raise KeyError(f"no example MCP servers {unknown}; choose from {known}")
    script = {name: MCP_SERVERS_DIR / EXAMPLE_MCP_SERVERS[name] for name in chosen}
    return {
        name: {"transport": "stdio", "command": sys.executable, "args": [str(path)]}
        for name, path in script.items()
    }


def default_mcp_connections() -> dict[str, dict[str, Any]]:
    """The connections :func:`mcp_agent` serves without ``$TOOLBUDGET_MCP_SERVERS``.

    Returns:
        ``math``, ``notes`` and ``text`` (:func:`example_mcp_connections`).
    """
    return example_mcp_connections()


def mcp_connections(value: str | None = None) -> dict[str, dict[str, Any]]:
    """The MCP connections to serve: ``value`` or ``$TOOLBUDGET_MCP_SERVERS``, else the defaults.

    Args:
        value: inline JSON (starting with ``{``) or the path of a JSON file, holding
            server name -> ``MultiServerMCPClient`` connection dict.

    Returns:
        Server name -> connection dict.

    Raises:
        ValueError: the JSON is invalid or not a mapping of mappings.
        FileNotFoundError: the file does not exist.
    """
    value = value if value is not None else os.environ.get(MCP_SERVERS_ENV)
    if not value or not value.strip():
        return default_mcp_connections()
    text = value if value.lstrip().startswith("{") else Path(value).read_text(encoding="utf-8")
    try:
        connections = json.loads(text)
    except ValueError as exc:
        raise ValueError(BAD_MCP_SERVERS_ERROR.format(env=MCP_SERVERS_ENV, problem=exc)) from exc
    if not isinstance(connections, Mapping) or not all(
        isinstance(c, Mapping) for c in connections.values()
    ):
        raise ValueError(
            BAD_MCP_SERVERS_ERROR.format(env=MCP_SERVERS_ENV, problem=f"got {connections!r}")
        )
    return {str(k): dict(v) for k, v in connections.items()}


_mcp_loads: dict[str, concurrent.futures.Future[MCPToolCatalog]] = {}


async def _mcp_catalog() -> MCPToolCatalog:
    """The MCP catalog of the configured servers, loaded once per process.

    Concurrent first runs share one load (a loop-independent future); a failed
    load is forgotten, so the next run tries again.
    """
    connections = await asyncio.to_thread(mcp_connections)  # may read a file
    key = json.dumps(connections, sort_keys=True)
    future = _mcp_loads.get(key)
    if future is None:
        future = _mcp_loads[key] = concurrent.futures.Future()
        try:
            # The MCP SDK reads files while it imports: import it off the event loop
            # (LangGraph server flags blocking calls in async graph factories).
            mcp = await asyncio.to_thread(importlib.import_module, "langgraph_toolbudget.mcp")
            catalog = await mcp.load_mcp_catalog(connections)
            if len(catalog) == 0:
                await catalog.aclose()
                raise RuntimeError(NO_MCP_TOOLS_ERROR.format(errors=catalog.load_errors))
        except BaseException as exc:
            del _mcp_loads[key]
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning
            raise
        future.set_result(catalog)
    return await asyncio.wrap_future(future)


async def mcp_agent(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory: the prebuilt agent over the configured MCP servers.

    The servers come from ``$TOOLBUDGET_MCP_SERVERS`` (see :func:`mcp_connections`),
    by default the local example servers ``math``, ``notes`` and ``text``. Each
    server is one category. Servers that fail to load are left out (logged); if
    none loads, the run fails with an error naming why.

    Args:
        config: the run's config (``configurable.model``, ``max_tools``, ``mode``).

    Returns:
        The compiled graph.

    Raises:
        RuntimeError: no configured MCP server could be loaded.
    """
    return agent_for(await _mcp_catalog(), config)
