"""A thread survives a process restart with a SQLite checkpointer.

Each turn runs in its own Python process over the same SQLite file: the second
process first reads the thread back (visible set, categories, messages intact),
then runs the next turn on it. Sync (``SqliteSaver``) and async
(``AsyncSqliteSaver``) alike. Only the chat model is fake (``DemoChatModel``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TURN_SCRIPT = r"""
import asyncio, json, sys
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph_toolbudget import create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

db, thread, text, mode = sys.argv[1:5]
graph = create_toolbudget_agent(DemoChatModel(), build_example_catalog(), max_tools=5)
config = {"configurable": {"thread_id": thread}}

def summary(values):
    return {
        "categories": values.get("categories"),
        "selected_tools": values.get("selected_tools"),
        "messages": [m.content for m in values.get("messages", [])],
    }

if mode == "sync":
    with SqliteSaver.from_conn_string(db) as saver:
        app = graph.compile(checkpointer=saver)
        before = summary(app.get_state(config).values)
        after = summary(app.invoke({"messages": [("user", text)]}, config))
else:
    async def main():
        async with AsyncSqliteSaver.from_conn_string(db) as saver:
            app = graph.compile(checkpointer=saver)
            before = summary((await app.aget_state(config)).values)
            after = summary(await app.ainvoke({"messages": [("user", text)]}, config))
            return before, after
    before, after = asyncio.run(main())
print(json.dumps({"before": before, "after": after}))
"""


def _turn(db: Path, text: str, mode: str) -> dict[str, Any]:
    """One user turn in a fresh Python process; returns the thread before and after it."""
    done = subprocess.run(
        [sys.executable, "-c", TURN_SCRIPT, str(db), "thread-1", text, mode],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_thread_survives_a_process_restart_with_sqlite(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "threads.sqlite"

    first = _turn(db, "What's the weather in Tokyo?", mode)
    assert first["before"]["messages"] == [], "a new thread starts empty"
    turn1 = first["after"]
    assert turn1["categories"] == ["weather"]
    assert "get_weather" in turn1["selected_tools"]
    assert "Tokyo" in turn1["messages"][-1]
    assert db.stat().st_size > 0

    second = _turn(db, "Post 'umbrella not needed' to the #general Slack channel", mode)
    assert second["before"] == turn1, "the restarted process reads the thread back intact"
    turn2 = second["after"]
    assert turn2["categories"][0] == "slack"
    kept = [n for n in turn1["selected_tools"] if n in turn2["selected_tools"]]
    assert "get_weather" in kept  # used in turn 1, in the other process: still visible
    assert turn2["selected_tools"][: len(kept)] == kept
    assert "send_message" in turn2["selected_tools"]
    assert turn2["messages"][: len(turn1["messages"])] == turn1["messages"]
    assert turn2["messages"][-1] == "I used send_message: Sent to #general: umbrella not needed"
