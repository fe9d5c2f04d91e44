"""Media content blocks (images, audio, video, files) in a tool's result.

Its one reason to change: which content blocks a model takes as media, and how one reads
where a tool result reaches the model as text.
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

from langgraph_toolbudget.core.limits import clip

__all__ = ["MEDIA_BLOCK_TYPES", "is_media", "media_placeholder"]

MEDIA_BLOCK_TYPES = frozenset(
    {"image", "audio", "video", "file", "image_url", "input_audio", "media"}
)
"""Content blocks a model takes as media, not as text to read: LangChain's standard image,
audio, video and file blocks (an MCP tool's image, or embedded binary resource, as
langchain-mcp-adapters converts it), and the provider forms (``image_url``, ``input_audio``,
``media``). They go to the model as they are, as under LangGraph's ``ToolNode``; offloading
counts only the text beside them."""


def is_media(block: Any) -> TypeGuard[dict[str, Any]]:
    """Is ``block`` a media content block (:data:`MEDIA_BLOCK_TYPES`)?"""
    return isinstance(block, dict) and block.get("type") in MEDIA_BLOCK_TYPES


def media_placeholder(block: dict[str, Any]) -> str:
    """A short text standing for a media block where a tool result reaches the model as text
    (a text tool-call format): its kind, type and size, and its URL when it is not data;
    never its base64."""
    kind = str(block.get("type"))
    mime = block.get("mime_type") or block.get("mimeType")
    url = block.get("url")
    if kind == "image_url" and isinstance(block.get("image_url"), dict):
        url = block["image_url"].get("url")
    size = len(json.dumps(block, ensure_ascii=False, default=str))
    what = f"{mime} {kind}" if mime else kind
    where = f" at {clip(url, 300)}" if isinstance(url, str) and not url.startswith("data:") else ""
    return (
        f"[{what}{where}, {size:,} characters as data: not shown, as tool results reach "
        "this model as text]"
    )
