"""A FastMCP server whose tools answer with images, files and audio (for the offloading tests).

- ``take_screenshot``: a caption and a PNG of about 43 KB (58,000 characters of base64);
- ``screenshot_with_log``: a PNG beside a 30,000-character log;
- ``export_pdf``: an embedded binary resource (``application/pdf``);
- ``record_audio``: an audio clip (langchain-mcp-adapters 0.3 does not convert audio).

Run: ``python media_server.py`` (stdio) or
``python media_server.py --transport streamable-http --port 8126``.
"""

from __future__ import annotations

import base64
import random
import struct
import sys
import zlib
from pathlib import Path

from mcp import types
from mcp.server.fastmcp import FastMCP, Image

# The example servers' shared command line (examples/mcp_servers/_run.py), by path.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "mcp_servers"))
from _run import run  # noqa: E402

mcp = FastMCP("media-server", instructions="Screenshots, documents and recordings.")

LOG = "\n".join(f"request {i}: GET /login 200 " + "x" * 40 for i in range(450))


def png(width: int = 120, height: int = 120) -> bytes:
    """A deterministic PNG of random pixels, stored uncompressed (about 43 KB at 120 x 120)."""
    rnd = random.Random(1)
    raw = b"".join(
        b"\x00" + bytes(rnd.getrandbits(8) for _ in range(width * 3)) for _ in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 0))
        + chunk(b"IEND", b"")
    )


@mcp.tool()
def take_screenshot() -> list:
    """Take a screenshot of the current page."""
    return ["Screenshot of the login page", Image(data=png(), format="png")]


@mcp.tool()
def screenshot_with_log() -> list:
    """Take a screenshot of the current page with the server's request log."""
    return [LOG, Image(data=png(), format="png")]


@mcp.tool()
def export_pdf() -> list:
    """Export the report as a PDF document."""
    blob = base64.b64encode(b"%PDF-1.4 " + bytes(range(256)) * 120).decode()
    resource = types.BlobResourceContents(
        uri="file:///report.pdf", mimeType="application/pdf", blob=blob
    )
    return [types.EmbeddedResource(type="resource", resource=resource)]


@mcp.tool()
def record_audio() -> list:
    """Record a short audio clip."""
    data = base64.b64encode(b"RIFF" + bytes(4000)).decode()
    return [types.AudioContent(type="audio", data=data, mimeType="audio/wav")]


if __name__ == "__main__":
    run(mcp)
