"""The checks of a LangGraph store and a namespace given to the package's store users.

Its one reason to change: how a ``store=`` and a ``namespace=`` option are checked and their
mistakes said (``ToolUsage``, ``StoreToolIndex``).
"""

from __future__ import annotations

import inspect
from typing import Any

from langgraph.store.base import BaseStore

from langgraph_toolbudget.core.limits import safe_repr
from langgraph_toolbudget.core.option_checks import option_error

__all__ = ["check_namespace", "check_store"]

BAD_STORE_ERROR = (
    "{owner}: option store must be a LangGraph BaseStore (InMemoryStore(), SqliteStore(...), "
    "PostgresStore(...)) or None ({none}); got {got}."
)
STORE_CLASS = "the class {name}: pass {name}({args})"
NAMESPACE_FIX = " Write it as a tuple: namespace={fixed!r}."


def check_store(owner: str, store: Any, *, none: str) -> None:
    """Refuse a ``store`` that is not a ``BaseStore`` instance (or ``None``, which means
    ``none``): a store class is answered with the instance to pass.

    Raises:
        TypeError: anything else, naming ``owner`` and what was given.
    """
    if store is None or isinstance(store, BaseStore):
        return
    if isinstance(store, type):
        args = "..." if _needs_arguments(store) else ""
        got = STORE_CLASS.format(name=store.__name__, args=args)
    else:
        got = f"{safe_repr(store, 80)} ({type(store).__name__})"
    raise TypeError(BAD_STORE_ERROR.format(owner=owner, none=none, got=got))


def check_namespace(owner: str, namespace: Any, *, example: tuple[str, ...]) -> None:
    """Refuse a ``namespace`` that is not a non-empty tuple of non-empty strings (a list of
    strings is answered with the tuple to write).

    Raises:
        TypeError: not a tuple of strings.
        ValueError: empty, or with an empty string.
    """
    expected = f"a non-empty tuple of non-empty strings, e.g. {example!r}"
    if not isinstance(namespace, tuple) or not all(isinstance(p, str) for p in namespace):
        fixable = isinstance(namespace, list) and all(isinstance(p, str) for p in namespace)
        fix = NAMESPACE_FIX.format(fixed=tuple(namespace)) if fixable else ""
        raise TypeError(option_error(owner, "namespace", expected, namespace, fix))
    if not namespace or not all(namespace):
        raise ValueError(option_error(owner, "namespace", expected, namespace))


def _needs_arguments(cls: type) -> bool:
    """Whether ``cls()`` lacks a required argument (``SqliteStore`` needs its connection)."""
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(
        p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters
    )
