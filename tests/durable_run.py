"""A run of the prebuilt agent that a test kills with SIGKILL between two tool calls.

``python durable_run.py <backend> <conn> <thread> <log> <mode>`` runs one thread:
the (scripted) model calls ``record_step(n=1)``, then ``record_step(n=2)``, then
answers. ``record_step`` appends ``ran <n>`` to ``<log>`` and puts an item in the
store. With ``mode=kill``, the model's second call writes ``waiting`` to the log
and sleeps, so the test can kill the process after step 1 was checkpointed and
before step 2 ran; ``mode=resume`` continues the thread from its checkpoint and
prints its final state as JSON. Runs use ``durability="sync"``: each step's checkpoint
is written before the next step starts (under LangGraph's default ``"async"``, a kill
right after a step can lose its checkpoint, and the step runs again on resume).

Backends: ``postgres`` (``PostgresSaver`` + ``PostgresStore``), ``apostgres``
(``AsyncPostgresSaver`` + ``AsyncPostgresStore``) and ``sqlite`` (``SqliteSaver``,
in-memory store).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_store

from langgraph_toolbudget import ToolCatalog, create_toolbudget_agent
from langgraph_toolbudget.testing import ScriptedChatModel

SETTINGS = {"log": os.devnull, "mode": "resume"}


def _log(line: str) -> None:
    with open(SETTINGS["log"], "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@tool
def record_step(n: int) -> str:
    """Record that step n ran (in the log file and the store)."""
    _log(f"ran {n}")
    store = get_store()
    if store is not None:
        store.put(("steps",), f"step-{n}-{time.time_ns()}", {"n": n})
    return f"step {n} done"


@tool
def unrelated_tool(x: int) -> str:
    """An unrelated tool the agent never needs."""
    return str(x)


def respond(messages: list[Any], _bound: list[str]) -> AIMessage:
    done = sum(isinstance(m, ToolMessage) for m in messages)
    if done == 0:
        return AIMessage("", tool_calls=[{"name": "record_step", "args": {"n": 1}, "id": "s1"}])
    if done == 1:
        if SETTINGS["mode"] == "kill":
            _log("waiting")
            time.sleep(600)
        return AIMessage("", tool_calls=[{"name": "record_step", "args": {"n": 2}, "id": "s2"}])
    return AIMessage("both steps done")


def build() -> Any:
    catalog = ToolCatalog.from_tools(
        [record_step, unrelated_tool],
        categories={"steps": ["record_step"], "other": ["unrelated_tool"]},
    )
    model = ScriptedChatModel(responses=[respond])
    return create_toolbudget_agent(model, catalog, max_tools=2)


def summary(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "messages": [[type(m).__name__, m.content] for m in values.get("messages", [])],
        "selected_tools": values.get("selected_tools"),
        "tool_last_used": values.get("tool_last_used"),
        "categories": values.get("categories"),
    }


def run_sync(app: Any, config: dict[str, Any]) -> dict[str, Any]:
    if SETTINGS["mode"] == "kill":
        app.invoke({"messages": [HumanMessage("record the steps")]}, config, durability="sync")
    app.invoke(None, config, durability="sync")  # resume from the checkpoint
    return summary(app.get_state(config).values)


async def run_async(app: Any, config: dict[str, Any]) -> dict[str, Any]:
    if SETTINGS["mode"] == "kill":
        await app.ainvoke(
            {"messages": [HumanMessage("record the steps")]}, config, durability="sync"
        )
    await app.ainvoke(None, config, durability="sync")
    return summary((await app.aget_state(config)).values)


def main() -> None:
    backend, conn, thread, log, mode = sys.argv[1:6]
    print(json.dumps(run(backend, conn, thread, log, mode)))


def run(backend: str, conn: str, thread: str, log: str, mode: str) -> dict[str, Any]:
    """Run (``mode="kill"``: start, and stop at the second model call) or resume a thread."""
    SETTINGS.update(log=log, mode=mode)
    config = {"configurable": {"thread_id": thread}}
    graph = build()
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(conn) as saver:
            out = run_sync(graph.compile(checkpointer=saver), config)
    elif backend == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore

        with (
            PostgresSaver.from_conn_string(conn) as saver,
            PostgresStore.from_conn_string(conn) as store,
        ):
            saver.setup()
            store.setup()
            out = run_sync(graph.compile(checkpointer=saver, store=store), config)
            out["store_steps"] = sorted(i.value["n"] for i in store.search(("steps",)))
    else:
        out = asyncio.run(_main_async(graph, conn, config))
    return out


async def _main_async(graph: Any, conn: str, config: dict[str, Any]) -> dict[str, Any]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore

    async with (
        AsyncPostgresSaver.from_conn_string(conn) as saver,
        AsyncPostgresStore.from_conn_string(conn) as store,
    ):
        await saver.setup()
        await store.setup()
        out = await run_async(graph.compile(checkpointer=saver, store=store), config)
        out["store_steps"] = sorted(i.value["n"] for i in await store.asearch(("steps",)))
        return out


if __name__ == "__main__":
    main()
