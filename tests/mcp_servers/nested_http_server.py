"""A raw MCP server over streamable HTTP whose tool list nests 300 levels deep.

The HTTP twin of ``hostile_server.py nested``: the SDK cannot write such an answer, so
this is a plain JSON-RPC endpoint on the standard library's HTTP server, answering each
POST with a JSON body (the streamable HTTP transport's JSON response mode).

Run: python nested_http_server.py --transport streamable-http --port N
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hostile_server import _nested


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if "id" not in message:  # a notification
            self.send_response(202)
            self.end_headers()
            return
        method = message.get("method")
        result: dict[str, Any] = {}
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile-raw-http", "version": "1"},
            }
        elif method == "tools/list":
            deep = {"name": "deep", "description": "A deep schema.", "inputSchema": _nested(300)}
            result = {"tools": [deep]}
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - no stream of server-sent messages here
        self.send_response(405)
        self.end_headers()

    def do_DELETE(self) -> None:  # noqa: N802
        self.send_response(405)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        return


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", default="streamable-http")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()
