"""Per-process state that a forked child starts afresh (gunicorn ``--preload``,
multiprocessing's fork start method, Celery's prefork).

The parent's threads are not in the child: a lock one of them held stays held for ever, and a
pool waits for workers that are gone. Objects that keep such state register here and are
reset at the fork itself (``os.register_at_fork``), while the child still has a single
thread: a reset on the child's first use, after comparing process ids, could run twice when
two of its threads came first at once.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["reset_in_forked_children"]


class Forkable(Protocol):
    def _after_fork(self) -> None:
        """Forget what belonged to the parent process (called in the child)."""


_REGISTERED: weakref.WeakSet[Forkable] = weakref.WeakSet()


def reset_in_forked_children(obj: Forkable) -> None:
    """Call ``obj._after_fork()`` in every child forked from this process from now on, for
    as long as ``obj`` lives."""
    _REGISTERED.add(obj)


def _reset_all() -> None:
    for obj in list(_REGISTERED):
        obj._after_fork()


if hasattr(os, "register_at_fork"):  # Windows has no fork
    os.register_at_fork(after_in_child=_reset_all)
