"""Where the package's warnings point: the user's line, not the package's own frames."""

from __future__ import annotations

import asyncio
import sys
from functools import lru_cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_ASYNCIO_DIR = Path(asyncio.__file__).resolve().parent


def user_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning of the function calling this one to the
    first frame outside this package and asyncio: the user's line, however deep the package's
    own calls (a node, the prebuilt agent, the middleware, the MCP loader), and whether the
    user awaited the call or called a sync wrapper that runs it with ``asyncio.run``."""
    level, frame = 2, sys._getframe(2)  # the warning function's caller is stacklevel 2
    while frame.f_back is not None and _not_the_users(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


@lru_cache(maxsize=256)
def _not_the_users(filename: str) -> bool:
    path = Path(filename).resolve()
    return path.is_relative_to(_PACKAGE_DIR) or path.is_relative_to(_ASYNCIO_DIR)
