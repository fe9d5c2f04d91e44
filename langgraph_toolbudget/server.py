"""Graphs for LangGraph server (``langgraph.json``): the prebuilt agent, served.

Key Components:
    - :func:`example_agent`: graph factory, the prebuilt agent over the built-in
      example catalog (40 offline tools).
    - :func:`chat_model`: the chat model named by a spec: ``"demo"`` (the
      default) is :class:`~langgraph_toolbudget.testing.DemoChatModel`, a
      deterministic rule-based model; ``"provider:model"`` (e.g.
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
import functools
import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from langgraph_toolbudget.agent import create_toolbudget_agent
from langgraph_toolbudget.catalog import ToolCatalog
from langgraph_toolbudget.example_catalog import build_example_catalog
from langgraph_toolbudget.testing import DemoChatModel

__all__ = [
    "DEMO_MODEL",
    "MODEL_ENV",
    "ModelUnavailableError",
    "agent_for",
    "chat_model",
    "example_agent",
    "model_spec",
]

DEMO_MODEL = "demo"
"""The model spec of the built-in rule-based demo model."""
MODEL_ENV = "TOOLBUDGET_MODEL"
"""Environment variable naming the default chat model, e.g. ``openai:gpt-4o-mini``."""

MISSING_LANGCHAIN_ERROR = (
    "model {spec!r} needs `langchain` (for init_chat_model) and the provider's package, "
    "e.g. `pip install langchain langchain-openai` for 'openai:...' or "
    "`pip install langchain langchain-ollama` for 'ollama:...'. "
    "Or use model='demo', the built-in offline model."
)
MISSING_PROVIDER_ERROR = (
    "model {spec!r}: {error}. Install the provider's LangChain package "
    "(e.g. `pip install langchain-openai`), or use model='demo', the built-in offline model."
)
BAD_MODEL_ERROR = (
    "model {spec!r} is not a model init_chat_model knows ({error}). Use 'provider:model', "
    "e.g. 'openai:gpt-4o-mini' or 'ollama:qwen3:8b', or 'demo' for the built-in offline model."
)
BAD_OPTION_ERROR = "configurable[{key!r}] must be {expected}, got {value!r}"


class ModelUnavailableError(ImportError, RuntimeError):
    """The chat model's packages are not installed.

    An ``ImportError``; also a ``RuntimeError`` so that LangGraph server passes its
    message (what to install) on to the client instead of a generic error.
    """


@functools.lru_cache(maxsize=16)
def chat_model(spec: str = DEMO_MODEL) -> BaseChatModel:
    """The chat model for a spec (cached, so a factory called per run stays cheap).

    Args:
        spec: ``"demo"`` for the offline rule-based model, or anything
            ``init_chat_model`` accepts: ``"openai:gpt-4o-mini"``,
            ``"anthropic:claude-3-5-haiku-latest"``, ``"ollama:qwen3:8b"`` ...

    Raises:
        ModelUnavailableError: ``langchain`` or the provider's package is not
            installed (an ``ImportError``); the message says what to install.
        ValueError: ``init_chat_model`` cannot read the spec.
    """
    spec = spec.strip()
    if not spec or spec == DEMO_MODEL:
        return DemoChatModel()
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ModelUnavailableError(MISSING_LANGCHAIN_ERROR.format(spec=spec)) from exc
    try:
        return init_chat_model(spec)
    except ImportError as exc:
        raise ModelUnavailableError(MISSING_PROVIDER_ERROR.format(spec=spec, error=exc)) from exc
    except ValueError as exc:  # unknown provider, or a spec init_chat_model cannot read
        raise ValueError(BAD_MODEL_ERROR.format(spec=spec, error=exc)) from exc


def _configurable(config: RunnableConfig | None) -> dict[str, Any]:
    return dict((config or {}).get("configurable") or {})


def model_spec(config: RunnableConfig | None = None) -> str:
    """The model a run uses: ``configurable.model``, else ``$TOOLBUDGET_MODEL``, else ``demo``."""
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


def agent_for(catalog: ToolCatalog, config: RunnableConfig | None = None) -> CompiledStateGraph:
    """The prebuilt agent over ``catalog`` with the model and options of ``config``.

    Compiled without a checkpointer: LangGraph server supplies its own.

    Args:
        catalog: the tool catalog.
        config: a run config; reads ``configurable.model``, ``max_tools``, ``mode``.
    """
    graph = create_toolbudget_agent(chat_model(model_spec(config)), catalog, **_options(config))
    return graph.compile()


_example: ToolCatalog | None = None


async def example_agent(config: RunnableConfig) -> CompiledStateGraph:
    """Graph factory: the prebuilt agent over the built-in example catalog.

    The catalog (tools over one in-memory workspace, shared by the server's
    threads) is built once per process, in a worker thread: its SQLite setup
    would block the server's event loop.

    Args:
        config: the run's config (``configurable.model``, ``max_tools``, ``mode``).
    """
    global _example
    if _example is None:
        _example = await asyncio.to_thread(_build_example)
    return agent_for(_example, config)


def _build_example() -> ToolCatalog:
    catalog = build_example_catalog()
    _ = catalog.index, catalog.category_index  # build the search indexes here, off the loop
    return catalog
