"""Custom auth for LangGraph server that keeps the package's store items away from clients.

An example beside the package, not part of it: name it in ``langgraph.json``
(``"auth": {"path": "./examples/server_auth.py:auth"}``), or register its store handler on your
own ``Auth`` object (see below: an app with a global ``@auth.on`` handler must chain it).

LangGraph server gives every authenticated client its store API (``/store/items``,
``/store/items/search``, ``/store/namespaces``; ``client.store`` in ``langgraph_sdk``) over the
same store the graphs use, and custom auth lets a request through when no handler covers it.
Without an ``@auth.on.store`` handler any authenticated user can read every thread's offloaded
outputs (``("toolbudget", "offload", ...)``) and write rows into the usage history
(``("toolbudget", "usage", ...)``) or the tool index (``("toolbudget", "tools")``). The graphs'
own store calls do not pass through auth handlers (the server hands a run its store directly),
so denying clients these namespaces changes nothing for the agent.

LangGraph server runs one handler per request, the most specific one: a store handler
(``@auth.on.store``, ``@auth.on.store.put``...) replaces your global ``@auth.on`` handler for
store requests. Registering :func:`deny_toolbudget_namespaces` alone on an ``Auth`` whose global
handler filters by owner (the LangGraph docs' pattern) silently drops that filter from every
store request: register :func:`with_toolbudget_namespaces_denied` of your handler instead.

Key Components:
    - :func:`deny_toolbudget_namespaces`: an ``@auth.on.store`` handler (all five store
      actions) that answers 403 to a request for a namespace under :data:`PRIVATE_LABELS`,
      and to one without a namespace or whose first label is the ``*`` wildcard, which would
      reach them too (a search or a listing of every namespace).
    - :func:`with_toolbudget_namespaces_denied`: your own handler (a global ``@auth.on`` one,
      or a store handler) made into a store handler that also runs that check.
    - :data:`auth`: a ready ``Auth``: bearer tokens from ``$TOOLBUDGET_API_KEYS`` (JSON, token
      -> user id) and that store handler. Replace the authentication with your own.

Typical Usage:
    ```python
    from langgraph_sdk import Auth

    from server_auth import deny_toolbudget_namespaces, with_toolbudget_namespaces_denied

    auth = Auth()  # no global @auth.on handler, no store handler:
    auth.on.store(deny_toolbudget_namespaces)


    @auth.on  # with a global handler: it keeps filtering store requests
    async def add_owner(ctx: Auth.types.AuthContext, value: dict) -> dict:
        ...


    auth.on.store(with_toolbudget_namespaces_denied(add_owner))
    ```
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Sequence
from typing import Any

from langgraph_sdk import Auth

__all__ = [
    "API_KEYS_ENV",
    "PRIVATE_LABELS",
    "auth",
    "deny_toolbudget_namespaces",
    "is_private",
    "with_toolbudget_namespaces_denied",
]

PRIVATE_LABELS = frozenset({"toolbudget"})
"""First namespace labels clients may not reach: the package's (offloaded outputs, usage
history, tool index). Add yours if you gave ``ToolUsage(namespace=...)`` or
``StoreToolIndex(namespace=...)`` another first label."""
API_KEYS_ENV = "TOOLBUDGET_API_KEYS"
NOT_A_HANDLER_ERROR = (
    "with_toolbudget_namespaces_denied(handler) takes your auth handler: an async function "
    "with 'ctx' and 'value' parameters (as @auth.on takes); got {handler!r}."
)
DENIED_DETAIL = (
    "The store namespace {namespace} is the agent's own (offloaded tool outputs, usage history, "
    "tool index): clients cannot read or write it. Use a namespace whose first label is not "
    "one of {labels}, '*', or none."
)


def is_private(namespace: Sequence[str] | None) -> bool:
    """Whether a store request for ``namespace`` (a prefix, for a search or a listing) may
    reach the agent's items: no namespace, the wildcard, or a private first label."""
    labels = tuple(namespace or ())
    return not labels or labels[0] == "*" or labels[0] in PRIVATE_LABELS


async def deny_toolbudget_namespaces(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    """``@auth.on.store`` handler: 403 for a request that may reach the agent's namespaces.

    ``value["namespace"]`` is the item's namespace (put, get, delete) or the prefix (search,
    list_namespaces; None there lists every namespace).

    Raises:
        Auth.exceptions.HTTPException: 403, naming the namespace and the allowed ones.
    """
    namespace = value.get("namespace")
    if is_private(namespace):
        detail = DENIED_DETAIL.format(
            namespace=tuple(namespace or ()), labels=sorted(PRIVATE_LABELS)
        )
        raise Auth.exceptions.HTTPException(status_code=403, detail=detail)


def with_toolbudget_namespaces_denied(handler: Auth.types.Handler) -> Auth.types.Handler:
    """``handler`` (your app's own: a global ``@auth.on`` handler, or a store handler) as an
    ``@auth.on.store`` handler that also refuses what may reach the agent's namespaces.

    The store handler runs ``handler`` and returns what it returns (its filter, such as the
    owner filter the LangGraph docs' global handler returns), then runs
    :func:`deny_toolbudget_namespaces` on the namespace the request reaches the store with
    (``handler`` may have rewritten it, e.g. prefixed the user's id). Register it for every
    store action (``auth.on.store(...)``), or for one in place of your handler of that action
    (``auth.on.store.put(with_toolbudget_namespaces_denied(my_put))``).

    Example:
        ```python
        @auth.on
        async def add_owner(ctx: Auth.types.AuthContext, value: dict) -> dict:
            value.setdefault("metadata", {})["owner"] = ctx.user.identity
            return {"owner": ctx.user.identity}


        auth.on.store(with_toolbudget_namespaces_denied(add_owner))
        ```

    Raises:
        TypeError: ``handler`` is not an async function with ``ctx`` and ``value``.
    """
    if not inspect.iscoroutinefunction(handler) or not {"ctx", "value"} <= set(
        inspect.signature(handler).parameters
    ):
        raise TypeError(NOT_A_HANDLER_ERROR.format(handler=handler))

    async def store_handler(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> Any:
        result = await handler(ctx=ctx, value=value)
        await deny_toolbudget_namespaces(ctx, value)
        return result

    store_handler.__name__ = f"{getattr(handler, '__name__', 'handler')}_toolbudget_denied"
    return store_handler


auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """A bearer token of ``$TOOLBUDGET_API_KEYS`` (``{"token": "user id", ...}``); replace
    with your identity provider.

    Raises:
        Auth.exceptions.HTTPException: 401 without a known token.
    """
    keys = json.loads(os.environ.get(API_KEYS_ENV) or "{}")
    scheme, _, token = (authorization or "").partition(" ")
    user = keys.get(token) if scheme.lower() == "bearer" and isinstance(keys, dict) else None
    if not isinstance(user, str) or not user:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Unknown or missing API key")
    return {"identity": user}


auth.on.store(deny_toolbudget_namespaces)
