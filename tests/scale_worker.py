"""One worker process of ``tests/test_scale_out.py``: the prebuilt agent on PostgreSQL.

``python scale_worker.py <backend> <conn> <name> <log> [<stall text>]`` compiles the
prebuilt agent (the example catalog, the demo model, usage learning, offloading over 1,000
characters) with ``backend``: ``postgres`` (``PostgresSaver`` + ``PostgresStore`` over a
connection pool; commands run in a thread pool, with ``invoke``) or ``apostgres``
(``AsyncPostgresSaver`` + ``AsyncPostgresStore``; commands run as tasks, with ``ainvoke``).
The test set the tables up. Several commands run at once, as a LangGraph server worker runs
several runs; the test never sends two at once for one thread (the server's run queue
does the same).

Commands come as JSON lines on stdin; each answer is one JSON line on stdout with the
command's ``id``, ``"ok": true`` and its values, or ``"ok": false`` and ``error``:

- ``{"op": "turn", "thread", "text"}``: a run with the user's text (``durability="sync"``:
  every step's checkpoint is written before the next step starts). Answers the thread's
  messages of the turn (tool calls, tool messages, offload handles) and the visible set.
- ``{"op": "resume", "thread", "text"}``: a thread whose turn ``text`` was cut off (its
  worker killed): resumed from its checkpoint when the turn's message is in it, else
  the turn is run again; answers as ``turn``.
- ``{"op": "context", "thread", "exclude": [...], "include": [...]}``: the management
  operations ``exclude_tools`` / ``include_tools`` applied with ``update_state``.
- ``{"op": "record", "tool", "queries": [...]}``: each query recorded for ``tool`` through
  ``ToolUsage.record`` (as an operator would), several at once.
- ``{"op": "refresh"}``: ``ToolUsage.refresh()``: what other workers recorded since.
- ``{"op": "choose", "text"}``: the categories and tools the graph's ``choose_tools`` step
  chooses for ``text`` (a fresh thread, stopped before the model, recording off).

Every run of a tool the model called is logged (a callback's ``on_tool_start``) as a JSON
line in ``<log>``: worker, thread, tool call id, tool. With a ``<stall text>``, the turn with
that text stops at its second model call (its first tool call checkpointed): the worker
writes ``{"stalled": true}`` on stdout and sleeps, for the test to kill it with SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from langgraph_toolbudget import (
    ToolUsage,
    create_toolbudget_agent,
    exclude_tools,
    include_tools,
)
from langgraph_toolbudget.core.intent import message_text
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

READ_BACK = "read back "
"""A turn ``read back <handle>`` reads an offloaded output with the output tools."""
JQ = "length"
OFFLOAD_OVER_CHARS = 1000
STALL = {"text": None, "out": None}
_write_lock = threading.Lock()


def answer(payload: dict[str, Any]) -> None:
    with _write_lock:
        sys.stdout.write(json.dumps(payload) + "\n")
        sys.stdout.flush()


class WorkerModel(DemoChatModel):
    """The demo model, plus the read-back turn and the stall point (see the module)."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        text, turn = message_text(messages[start]), messages[start + 1 :]
        done = [m for m in turn if isinstance(m, ToolMessage)]
        if text == STALL["text"] and len(done) == 1:
            answer({"stalled": True, "pid": os.getpid()})
            time.sleep(600)
        if text.startswith(READ_BACK):
            reply = _read_back(text[len(READ_BACK) :].strip(), done)
            return ChatResult(generations=[ChatGeneration(message=reply)])
        return super()._generate(messages, *args, **kwargs)


def _read_back(handle: str, done: list[ToolMessage]) -> AIMessage:
    if not done:
        return AIMessage(
            "",
            tool_calls=[
                {"name": "read_large_output", "id": f"r-{handle}",
                 "args": {"handle": handle, "start": 0, "length": 200}},
                {"name": "query_large_output", "id": f"q-{handle}",
                 "args": {"handle": handle, "jq_expression": JQ}},
            ],
        )  # fmt: skip
    return AIMessage(json.dumps({m.name: m.text for m in done}))


class ToolRunLog(BaseCallbackHandler):
    """Every tool run, one JSON line each in a file shared by the workers (``O_APPEND``)."""

    run_inline = True

    def __init__(self, path: str, worker: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.worker = worker

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kwargs: Any) -> None:
        if kwargs.get("tool_call_id") is None:  # a tool a tool called (count_rows' check)
            return
        metadata = kwargs.get("metadata") or {}
        line = {
            "worker": self.worker,
            "thread": metadata.get("thread_id"),
            "call": kwargs.get("tool_call_id"),
            "tool": serialized.get("name") or kwargs.get("name"),
        }
        os.write(self.fd, (json.dumps(line) + "\n").encode())


def build(usage: ToolUsage) -> Any:
    return create_toolbudget_agent(
        WorkerModel(), build_example_catalog(), usage=usage, offload_over_chars=OFFLOAD_OVER_CHARS
    )


def _turn_summary(values: dict[str, Any], text: str) -> dict[str, Any]:
    messages = values.get("messages", [])
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    mine = [i for i in humans if message_text(messages[i]) == text]
    turn = messages[mine[-1] :] if mine else []
    return {
        "calls": [
            {"name": c["name"], "id": c["id"]}
            for m in turn
            if isinstance(m, AIMessage)
            for c in m.tool_calls
        ],
        "tool_messages": [
            {
                "call": m.tool_call_id,
                "name": m.name,
                "status": m.status,
                "text": m.text[:400],
                "handle": ((m.artifact or {}).get("offloaded") or {}).get("handle")
                if isinstance(m.artifact, dict)
                else None,
            }
            for m in turn
            if isinstance(m, ToolMessage)
        ],
        "answer": turn[-1].text if turn and isinstance(turn[-1], AIMessage) else None,
        "selected_tools": list(values.get("selected_tools") or []),
        "categories": list(values.get("categories") or []),
    }


class Worker:
    """The commands over one compiled graph (sync or async, see the module)."""

    def __init__(self, app: Any, usage: ToolUsage, name: str, log: ToolRunLog) -> None:
        self.app, self.usage, self.name, self.log = app, usage, name, log

    def config(self, thread: str, **configurable: Any) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread, **configurable}, "callbacks": [self.log]}

    def handlers(self) -> dict[str, Callable[..., Any]]:
        return {
            "turn": self.turn,
            "resume": self.resume,
            "context": self.context,
            "record": self.record,
            "refresh": self.refresh,
            "choose": self.choose,
        }

    # --- sync ------------------------------------------------------------------------------

    def turn(self, thread: str, text: str) -> dict[str, Any]:
        config = self.config(thread)
        self.app.invoke({"messages": [HumanMessage(text)]}, config, durability="sync")
        return _turn_summary(self.app.get_state(config).values, text)

    def resume(self, thread: str, text: str) -> dict[str, Any]:
        config = self.config(thread)
        snapshot = self.app.get_state(config)
        if _turn_summary(snapshot.values, text)["calls"] or snapshot.next:
            self.app.invoke(None, config, durability="sync")  # from its checkpoint
            how = "resumed"
        else:  # the turn's message never reached a checkpoint: run the turn
            self.app.invoke({"messages": [HumanMessage(text)]}, config, durability="sync")
            how = "rerun"
        return {**_turn_summary(self.app.get_state(config).values, text), "how": how}

    def context(
        self, thread: str, exclude: list[str] | None = None, include: list[str] | None = None
    ) -> dict[str, Any]:
        config = self.config(thread)
        if exclude:
            self.app.update_state(config, exclude_tools(tools=exclude))
        if include:
            self.app.update_state(config, include_tools(tools=include))
        return {}

    def record(self, tool: str, queries: list[str]) -> dict[str, Any]:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda q: self.usage.record(q, [tool]), queries))
        return {"recorded": len(queries)}

    def refresh(self) -> dict[str, Any]:
        self.usage.refresh()
        return {"records": len(self.usage)}

    def choose(self, text: str) -> dict[str, Any]:
        thread = f"choose-{uuid.uuid4().hex[:8]}"
        config = self.config(thread, toolbudget_record_usage=False)
        self.app.invoke({"messages": [HumanMessage(text)]}, config, interrupt_before=["agent"])
        values = self.app.get_state(config).values
        return {"categories": values.get("categories"), "selected_tools": values["selected_tools"]}

    # --- async ---------------------------------------------------------------------------

    async def aturn(self, thread: str, text: str) -> dict[str, Any]:
        config = self.config(thread)
        await self.app.ainvoke({"messages": [HumanMessage(text)]}, config, durability="sync")
        return _turn_summary((await self.app.aget_state(config)).values, text)

    async def aresume(self, thread: str, text: str) -> dict[str, Any]:
        config = self.config(thread)
        snapshot = await self.app.aget_state(config)
        if _turn_summary(snapshot.values, text)["calls"] or snapshot.next:
            await self.app.ainvoke(None, config, durability="sync")
            how = "resumed"
        else:
            await self.app.ainvoke({"messages": [HumanMessage(text)]}, config, durability="sync")
            how = "rerun"
        values = (await self.app.aget_state(config)).values
        return {**_turn_summary(values, text), "how": how}

    async def acontext(
        self, thread: str, exclude: list[str] | None = None, include: list[str] | None = None
    ) -> dict[str, Any]:
        config = self.config(thread)
        if exclude:
            await self.app.aupdate_state(config, exclude_tools(tools=exclude))
        if include:
            await self.app.aupdate_state(config, include_tools(tools=include))
        return {}

    async def arecord(self, tool: str, queries: list[str]) -> dict[str, Any]:
        await asyncio.gather(*(self.usage.arecord(q, [tool]) for q in queries))
        return {"recorded": len(queries)}

    async def arefresh(self) -> dict[str, Any]:
        await self.usage.arefresh()
        return {"records": len(self.usage)}

    async def achoose(self, text: str) -> dict[str, Any]:
        thread = f"choose-{uuid.uuid4().hex[:8]}"
        config = self.config(thread, toolbudget_record_usage=False)
        await self.app.ainvoke(
            {"messages": [HumanMessage(text)]}, config, interrupt_before=["agent"]
        )
        values = (await self.app.aget_state(config)).values
        return {"categories": values.get("categories"), "selected_tools": values["selected_tools"]}

    def ahandlers(self) -> dict[str, Callable[..., Any]]:
        return {
            "turn": self.aturn,
            "resume": self.aresume,
            "context": self.acontext,
            "record": self.arecord,
            "refresh": self.arefresh,
            "choose": self.achoose,
        }


def _failed(command: dict[str, Any], name: str, exc: Exception) -> dict[str, Any]:
    error = f"{type(exc).__name__}: {exc}"
    trace = traceback.format_exc()[-3000:]
    return {"id": command["id"], "ok": False, "worker": name, "error": error, "trace": trace}


def _result(command: dict[str, Any], name: str, run: Callable[[], Any]) -> dict[str, Any]:
    try:
        return {"id": command["id"], "ok": True, "worker": name, **run()}
    except Exception as exc:  # noqa: BLE001 - every failure goes back to the test, named
        return _failed(command, name, exc)


def _args(command: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in command.items() if k not in ("id", "op")}


def serve_sync(conn: str, name: str, log: ToolRunLog) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(conn, min_size=1, max_size=6, kwargs=kwargs) as pool:
        store = PostgresStore(pool)
        usage = ToolUsage(store=store)
        worker = Worker(build(usage).compile(checkpointer=PostgresSaver(pool), store=store),
                        usage, name, log)  # fmt: skip
        handlers = worker.handlers()
        answer({"ready": True, "pid": os.getpid()})
        with ThreadPoolExecutor(4) as threads:
            for line in sys.stdin:
                command = json.loads(line)
                run = handlers[command["op"]]
                threads.submit(
                    lambda c=command, r=run: answer(_result(c, name, lambda: r(**_args(c))))
                )


async def serve_async(conn: str, name: str, log: ToolRunLog) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(conn, min_size=1, max_size=6, kwargs=kwargs, open=False) as pool:
        store = AsyncPostgresStore(pool)
        usage = ToolUsage(store=store)
        app = build(usage).compile(checkpointer=AsyncPostgresSaver(pool), store=store)
        handlers = Worker(app, usage, name, log).ahandlers()
        answer({"ready": True, "pid": os.getpid()})
        loop = asyncio.get_running_loop()
        tasks = set()

        async def run(command: dict[str, Any]) -> None:
            try:
                out = await handlers[command["op"]](**_args(command))
                answer({"id": command["id"], "ok": True, "worker": name, **out})
            except Exception as exc:  # noqa: BLE001 - every failure goes back to the test
                answer(_failed(command, name, exc))

        while line := await loop.run_in_executor(None, sys.stdin.readline):
            task = asyncio.create_task(run(json.loads(line)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)


def main() -> None:
    backend, conn, name, log = sys.argv[1:5]
    STALL["text"] = sys.argv[5] if len(sys.argv) > 5 else None
    runs = ToolRunLog(log, name)
    if backend == "postgres":
        serve_sync(conn, name, runs)
    else:
        asyncio.run(serve_async(conn, name, runs))


if __name__ == "__main__":
    main()
