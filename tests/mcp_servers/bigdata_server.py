"""A FastMCP server with large outputs, prompts and resources (for the offloading tests).

- tool ``export_orders``: about 1 MB of JSON (2,000 orders, as FastMCP indents it);
- resource ``docs://handbook``: a large text (about 300 KB), ``data://logo.bin``: binary,
  the template ``notes://{day}``;
- prompt ``review``: fills a topic into a review request.

Run: ``python bigdata_server.py`` (stdio) or
``python bigdata_server.py --transport streamable-http --port 8125``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP

# The example servers' shared command line (examples/mcp_servers/_run.py), by path.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "mcp_servers"))
from _run import run  # noqa: E402

mcp = FastMCP("bigdata-server", instructions="Exports of orders, a handbook and prompts.")

ORDERS = [
    {
        "id": i,
        "customer": f"customer-{i % 97}",
        "status": "refunded" if i % 250 == 0 else "paid",
        "total": round(i * 1.37 % 500, 2),
        "items": [{"sku": f"SKU-{i % 41}-{j}", "qty": j + 1, "note": "x" * 40} for j in range(3)],
    }
    for i in range(2000)
]
HANDBOOK = "\n".join(
    f"Section {i}: {'REFUND POLICY: refunds within 30 days.' if i == 4321 else 'general text.'}"
    + " lorem ipsum" * 4
    for i in range(6000)
)


@mcp.tool()
def export_orders() -> dict:
    """Export every order of the shop as JSON (large)."""
    return {"orders": ORDERS, "count": len(ORDERS), "currency": "EUR"}


@mcp.resource("docs://handbook", mime_type="text/plain")
def handbook() -> str:
    """The staff handbook (large text)."""
    return HANDBOOK


@mcp.resource("data://logo.bin", mime_type="application/octet-stream")
def logo() -> bytes:
    """The shop logo (binary)."""
    return bytes(range(256)) * 200


@mcp.resource("notes://{day}", mime_type="text/plain")
def note(day: str) -> str:
    """The note of one day (a resource template)."""
    return f"note of {day}"


@mcp.prompt()
def review(topic: str) -> str:
    """Ask for a careful review of a topic."""
    return f"Please review {topic} carefully and list three risks."


if __name__ == "__main__":
    run(mcp)
