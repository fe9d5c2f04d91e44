"""Three small FastMCP servers to try the MCP catalog on (also the tests' real servers).

They ship with the package: the ``toolbudget_mcp`` server graph serves them by
default, and the README, ``examples/mcp_catalog.py`` and ``notebooks/mcp.ipynb``
load them. Each runs over stdio, streamable HTTP or SSE::

    python -m langgraph_toolbudget.demo.mcp_servers.math_server          # stdio
    python .../mcp_servers/math_server.py                                # the same, by path
    python .../mcp_servers/math_server.py --transport streamable-http --port 8123
                                               # HTTP on 127.0.0.1:8123/mcp (sse: /sse)

Key Components:
    - ``math_server``: ``add``, ``multiply``, ``divide``, ``search``, ``server_pid``.
    - ``notes_server``: ``add_note``, ``list_notes``, ``search``, ``slow``,
      ``slow_status``, ``fail``, ``server_pid`` (a slow and a failing tool, for
      timeouts and errors).
    - ``text_server``: ``upper``, ``word_count`` (no instructions, so its
      category is described by its server name).
    - :func:`stdio` / :func:`example_connections`: connection dicts that start
      them with this Python, by path (quicker than ``-m``, which imports this
      package first). Importing this module does not import the MCP SDK.

Typical Usage:
    ```python
    from langgraph_toolbudget.demo.mcp_servers import example_connections

    catalog = await load_mcp_catalog(example_connections(["math", "notes"]))
    ```
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["EXAMPLE_SERVERS", "SERVERS_DIR", "example_connections", "stdio"]

SERVERS_DIR = Path(__file__).resolve().parent
"""The folder holding the server scripts."""

EXAMPLE_SERVERS = {"math": "math_server.py", "notes": "notes_server.py", "text": "text_server.py"}
"""Server name -> script file name in :data:`SERVERS_DIR`."""


def stdio(script: str) -> dict[str, Any]:
    """A stdio connection dict (``MultiServerMCPClient`` format) for one server script.

    Args:
        script: a file name in this folder, e.g. ``"math_server.py"``.

    Returns:
        The connection: this Python interpreter running the script by path.
    """
    return {"transport": "stdio", "command": sys.executable, "args": [str(SERVERS_DIR / script)]}


def example_connections(names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """Stdio connections to the example servers.

    Args:
        names: which servers (``math``, ``notes``, ``text``); all three by default.

    Returns:
        Server name -> connection dict.

    Raises:
        KeyError: a name that is not one of the example servers.
    """
    chosen = list(EXAMPLE_SERVERS) if names is None else list(names)
    unknown = sorted(set(chosen) - set(EXAMPLE_SERVERS))
    if unknown:
        raise KeyError(f"no example MCP servers {unknown}; choose from {sorted(EXAMPLE_SERVERS)}")
    return {name: stdio(EXAMPLE_SERVERS[name]) for name in chosen}
