"""Scale out: three worker processes serve one app on one PostgreSQL, taking turns on its threads.

Three processes (``tests/scale_worker.py``) compile the same prebuilt agent, two with
``PostgresSaver`` + ``PostgresStore`` (sync, ``invoke``), one with ``AsyncPostgresSaver`` +
``AsyncPostgresStore`` (``ainvoke``), on one fresh database of the session's PostgreSQL
(``pg_url``). The test plays LangGraph server's run queue: 50 threads, two turns each, every
turn sent to a random worker, in random order, many at once, never two at once on one thread
(the server runs one run per thread at a time), and each thread's second turn on another
worker than its first. Only the chat model is fake (the demo model).

Checked, with the figures printed at the end (``pytest -s``):

- turns: every thread holds exactly its two user messages, each answered, every tool call
  answered once; every tool ran once per call id (a callback logs each run in every worker);
- the tool context: tools excluded and included in a thread by one worker (``update_state``
  with ``exclude_tools`` / ``include_tools``) hold in the turn another worker runs;
- offloaded outputs: an output offloaded in one worker is read back (``read_large_output``,
  ``query_large_output``) by the thread's next turn in another;
- usage: a record written through ``ToolUsage.record`` in one worker changes what another
  worker's ``choose_tools`` selects once it calls ``refresh()``; 3 x 20 records for one tool,
  written by the three workers at once, are all in the store;
- a worker killed with SIGKILL mid-turn (after the turn's first tool call was checkpointed,
  while the other two serve the second turns): another worker resumes the thread, which ends
  with its answer, the tool having run once.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.postgres import PostgresStore

from langgraph_toolbudget import ToolUsage

TESTS = Path(__file__).parent
WORKER = TESTS / "scale_worker.py"
THREADS = 50
TIMEOUT_S = 90

SQL = "Run the SQL query 'SELECT a.id, b.id, c.id, d.name FROM orders a, orders b, orders c, customers d'"  # noqa: E501
SQL_ROWS = 81  # 3 x 3 x 3 orders x 3 customers
WEATHER = "What's the weather in Tokyo today?"
PLAIN = [
    WEATHER,
    "Read the file README.md",
    "How many orders are in the database?",
    "Open a GitHub issue in acme/app titled 'Crash on start'",
    "Post 'build is green' to #general",
]
RAINCOAT = "Do I need a raincoat in Lima on Saturday?"
RECORDED = "will I need a raincoat this weekend"
STALL_TEXT = "Read the file README.md, then stop"
CONCURRENT_RECORDS = 20


def _env() -> dict[str, str]:
    paths = [str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


class Worker:
    """A worker process and its command channel (one JSON line per command and answer)."""

    def __init__(self, name: str, backend: str, conn: str, tmp: Path, stall: str = "") -> None:
        self.name, self.backend, self.conn, self.tmp, self.stall = name, backend, conn, tmp, stall
        self.futures: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.stalled = asyncio.Event()
        self.next_id = 0

    async def start(self) -> None:
        args = [str(WORKER), self.backend, self.conn, self.name, str(self.tmp / "tool_runs.log")]
        self.stderr = (self.tmp / f"{self.name}.stderr").open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, *args, *([self.stall] if self.stall else []),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=self.stderr, env=_env(), limit=1 << 22,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 120)
        assert json.loads(line or b"{}").get("ready"), self.log()
        self.reader = asyncio.create_task(self._read())

    def log(self) -> str:
        return (self.tmp / f"{self.name}.stderr").read_text()[-3000:]

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            message = json.loads(line)
            if message.get("stalled"):
                self.stalled.set()
            elif message["id"] in self.futures:
                self.futures.pop(message["id"]).set_result(message)
        for future in self.futures.values():  # the process is gone
            future.set_exception(ConnectionError(f"{self.name} exited"))

    async def call(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.next_id += 1
        future = self.futures[self.next_id] = asyncio.get_running_loop().create_future()
        self.proc.stdin.write((json.dumps({"id": self.next_id, "op": op, **args}) + "\n").encode())
        await self.proc.stdin.drain()
        out = await asyncio.wait_for(future, TIMEOUT_S)
        assert out["ok"], f"{self.name} {op} {args}: {out['error']}\n{out['trace']}"
        return out

    async def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert await self.proc.wait() == -signal.SIGKILL

    async def close(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:  # TimeoutError itself from Python 3.11 on
                self.proc.kill()
                await self.proc.wait()
        self.stderr.close()


def _messages(saver: PostgresSaver, thread: str) -> list[Any]:
    checkpoint = saver.get_tuple({"configurable": {"thread_id": thread}})
    assert checkpoint is not None, f"{thread}: no checkpoint"
    return list(checkpoint.checkpoint["channel_values"].get("messages", []))


def _check_thread(messages: list[Any], texts: list[str]) -> list[str]:
    """The thread's tool call ids (built-in calls get a tool run too), after checking that
    each turn is there once, whole."""
    humans = [m.text for m in messages if isinstance(m, HumanMessage)]
    assert humans == texts, f"turns lost or applied twice: {humans} != {texts}"
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    answers = Counter(m.tool_call_id for m in messages if isinstance(m, ToolMessage))
    assert all(answers[c["id"]] == 1 for c in calls), answers
    assert sum(answers.values()) == len(calls)
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    for end in [*starts[1:], len(messages)]:  # each turn ends with the model's answer
        last = messages[end - 1]
        assert isinstance(last, AIMessage) and not last.tool_calls, last
    return [c["id"] for c in calls]


def _tool_runs(path: Path) -> Counter[tuple[str, str]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return Counter((line["thread"], line["call"]) for line in lines)


@pytest.mark.timeout(240)
async def test_three_workers_on_one_postgres_share_threads_context_outputs_and_usage(
    pg_url: str, tmp_path: Path
) -> None:
    with (
        PostgresSaver.from_conn_string(pg_url) as saver,
        PostgresStore.from_conn_string(pg_url) as store,
    ):
        saver.setup()
        store.setup()
    workers = [
        Worker("w0", "postgres", pg_url, tmp_path),
        Worker("w1", "apostgres", pg_url, tmp_path),
        Worker("w2", "postgres", pg_url, tmp_path, stall=STALL_TEXT),
    ]
    try:
        await asyncio.gather(*(w.start() for w in workers))
        figures = await _scenario(workers, random.Random(28))
    finally:
        await asyncio.gather(*(w.close() for w in workers))

    with (
        PostgresSaver.from_conn_string(pg_url) as saver,
        PostgresStore.from_conn_string(pg_url) as store,
    ):
        runs = _tool_runs(tmp_path / "tool_runs.log")
        called = {
            (thread, call)
            for thread, texts in figures.pop("texts").items()
            for call in _check_thread(_messages(saver, thread), texts)
        }
        rows = [r for r in ToolUsage(store=store).export() if r["tool"] == "air_quality"]
    assert called and set(runs) == called  # every tool call ran, and no other tool run
    assert max(runs.values()) == 1, [k for k, n in runs.items() if n > 1]
    concurrent = [r for r in rows if r["query"].startswith("how clean is the air")]
    assert len(concurrent) == 3 * CONCURRENT_RECORDS
    figures.update(tool_runs=sum(runs.values()), max_runs_per_call=max(runs.values()),
                   concurrent_records_stored=len(concurrent))  # fmt: skip
    print("\nscale-out figures:", json.dumps(figures))


async def _scenario(workers: list[Worker], rng: random.Random) -> dict[str, Any]:
    threads = [f"t{i:02d}" for i in range(THREADS)]
    offload, context = threads[:10], threads[10:20]
    first = {t: SQL if t in offload else WEATHER if t in context else PLAIN[i % 5]
             for i, t in enumerate(threads)}  # fmt: skip
    texts = {t: [first[t]] for t in threads}

    # Turn 1 of every thread, on random workers, in random order, all at once.
    order = rng.sample(threads, len(threads))
    by = {t: rng.choice(workers) for t in threads}
    done = await asyncio.gather(*(by[t].call("turn", thread=t, text=first[t]) for t in order))
    turn1 = dict(zip(order, done, strict=True))
    handles = {}
    for t in offload:
        [stub] = [m for m in turn1[t]["tool_messages"] if m["name"] == "run_sql_query"]
        assert stub["handle"] and "Large output offloaded" in stub["text"], stub
        handles[t] = stub["handle"]

    # Between the turns: the tool context of 10 threads set by their first turn's worker;
    # usage recorded by one worker and, at once, by all three; selection before and after.
    before = await workers[1].call("choose", text=RAINCOAT)
    await asyncio.gather(
        *(by[t].call("context", thread=t, exclude=["get_weather"], include=["create_issue"])
          for t in context),
        workers[0].call("record", tool="weather_forecast", queries=[RECORDED]),
        *(w.call("record", tool="air_quality",
                 queries=[f"how clean is the air in zone {w.name}-{i}"
                          for i in range(CONCURRENT_RECORDS)]) for w in workers),
    )  # fmt: skip
    stale = await workers[1].call("choose", text=RAINCOAT)
    refreshed = [await w.call("refresh") for w in workers[1:]]
    after = [await w.call("choose", text=RAINCOAT) for w in workers[1:]]
    assert "weather_forecast" not in before["selected_tools"] and before["categories"] == []
    for chosen in after:  # both the async and a sync worker, after refresh()
        assert chosen["categories"][0] == "weather", chosen
        assert "weather_forecast" in chosen["selected_tools"], chosen

    # Turn 2 of every thread on another worker than its first (w0 or w1) while w2 runs a
    # turn that stalls after its first tool call; w2 is killed there and w0 or w1 resumes it.
    second = {t: f"read back {handles[t]}" if t in offload else
              "What's the weather in Paris?" if t in context else PLAIN[(i + 1) % 5]
              for i, t in enumerate(threads)}  # fmt: skip
    for t in threads:
        texts[t].append(second[t])
    texts["t-killed"] = [STALL_TEXT]
    again = {t: rng.choice([w for w in workers[:2] if w is not by[t]]) for t in threads}
    stalled = asyncio.create_task(workers[2].call("turn", thread="t-killed", text=STALL_TEXT))
    order = rng.sample(threads, len(threads))
    turn2_task = asyncio.gather(*(again[t].call("turn", thread=t, text=second[t]) for t in order))
    await asyncio.wait_for(workers[2].stalled.wait(), TIMEOUT_S)
    await workers[2].kill()
    with pytest.raises(ConnectionError):
        await stalled
    resumed = await rng.choice(workers[:2]).call("resume", thread="t-killed", text=STALL_TEXT)
    turn2 = dict(zip(order, await turn2_task, strict=True))

    assert resumed["how"] == "resumed" and resumed["calls"][0]["name"] == "read_file"
    assert resumed["answer"].startswith("I used read_file")
    for t in context:  # excluded and included by another worker: both hold
        out = turn2[t]
        assert "get_weather" not in out["selected_tools"], out
        assert "get_weather" not in [c["name"] for c in out["calls"]], out
        assert "create_issue" in out["selected_tools"], out
    for t in offload:  # offloaded by one worker, read back by another
        read = json.loads(turn2[t]["answer"])
        head, text = read["read_large_output"].split("\n", 1)
        assert head.startswith(f"[{handles[t]}: characters 0-200 of"), read
        assert text.startswith('[[1, 1, 1, "Ada"]'), read
        assert json.loads(read["query_large_output"]) == SQL_ROWS, read
        assert turn2[t]["worker"] != turn1[t]["worker"]
    return {
        "threads": THREADS,
        "turns": 2 * THREADS + 1,
        "workers_per_thread_2": sum(turn1[t]["worker"] != turn2[t]["worker"] for t in threads),
        "context_threads_held": len(context),
        "offloaded_read_back": len(offload),
        "selection_before": before["categories"],
        "selection_without_refresh": stale["categories"],
        "selection_after_refresh": [a["categories"][:1] for a in after],
        "records_after_refresh": [r["records"] for r in refreshed],
        "killed_thread": resumed["how"],
        "texts": texts,
    }
