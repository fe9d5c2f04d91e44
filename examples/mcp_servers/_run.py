"""The command line the example MCP servers share, and the tests' servers too.

``--transport`` (stdio, streamable-http, sse) and ``--port``; imported by path (each server
runs as a script, so this folder is on its ``sys.path``).
"""

from __future__ import annotations

import argparse
import logging

from mcp.server.fastmcp import FastMCP


def run(server: FastMCP) -> None:
    """Run ``server`` over the transport named on the command line.

    ``python server.py`` serves stdio; ``python server.py --transport
    streamable-http --port 8123`` serves streamable HTTP on 127.0.0.1:8123 at
    ``/mcp`` (``sse`` serves SSE at ``/sse``).

    Args:
        server: the FastMCP server to run.
    """
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", default="stdio", choices=["stdio", "streamable-http", "sse"])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    server.settings.host = "127.0.0.1"
    server.settings.port = args.port
    server.settings.log_level = "WARNING"
    logging.getLogger("mcp").setLevel(logging.WARNING)
    server.run(transport=args.transport)
