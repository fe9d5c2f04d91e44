"""Benchmark: the prebuilt graph on PostgreSQL, its selection as one step or three, and bind-all.

In process, no server: each graph (``toolbudget``: ``create_toolbudget_agent``, its selection
one ``choose_tools`` step, ``benchmarks/_prebuilt.py``; ``toolbudget_3steps``: the same
nodes as three steps, ``benchmarks/_three_steps.py``; ``bind_all``: ``create_agent`` with
the 40 example tools bound, ``benchmarks/_bind_all.py``; all with the demo model) is
compiled with ``AsyncPostgresSaver`` + ``AsyncPostgresStore`` over one connection pool and
runs 20 threads x 5 turns at once (the requests of ``server_load.py``), in rotated rounds.
Per graph and round: CPU per run of this process and runs per second; per round, the ratios
one step / three steps and ``toolbudget`` / ``bind_all``. Every LangGraph step writes a
checkpoint (with ``--durability sync``, before the next step starts), so the steps a turn
takes cost more here than on ``langgraph dev``'s in-memory storage.

The PostgreSQL server is started like the tests' (``tests/pg.py``: the machine's ``initdb``
and ``pg_ctl`` in a temporary directory, removed after).

Run: ``python benchmarks/postgres_steps.py [--durability sync|async --rounds 5 --threads 20]``
(writes ``benchmarks/results/postgres_steps_<durability>.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import _bind_all  # noqa: E402
import _prebuilt  # noqa: E402
import _three_steps  # noqa: E402
import pg  # noqa: E402
from _common import print_table, write_results  # noqa: E402
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: E402
from langgraph.store.postgres import AsyncPostgresStore  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402
from psycopg_pool import AsyncConnectionPool  # noqa: E402
from server_load import EXAMPLE_QUERIES, rotated  # noqa: E402

GRAPHS = {
    "toolbudget": _prebuilt.graph,
    "toolbudget_3steps": _three_steps.graph,
    "bind_all": _bind_all.graph,
}


async def measure(url: str, args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    """Every graph, ``args.rounds`` rotated rounds: CPU ms per run and runs per second."""
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(url, max_size=10, kwargs=kwargs, open=False) as pool:
        saver, store = AsyncPostgresSaver(pool), AsyncPostgresStore(pool)
        await saver.setup()
        await store.setup()
        apps = {
            name: graph.copy(update={"checkpointer": saver, "store": store})
            for name, graph in GRAPHS.items()
        }
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in apps}
        names = list(apps)
        for r in range(args.rounds + 1):  # round 0 warms up, not counted
            for name in names[r % len(names) :] + names[: r % len(names)]:
                row = await _one_graph(apps[name], f"{name}-{r}", args)
                if r:
                    rows[name].append(row)
        return rows


async def _one_graph(app: Any, tag: str, args: argparse.Namespace) -> dict[str, float]:
    """``args.threads`` threads of ``args.turns`` turns at once on ``app``: CPU and rate."""
    queries = rotated(EXAMPLE_QUERIES, args.threads)

    async def thread(i: int) -> None:
        config = {"configurable": {"thread_id": f"{tag}-{i}"}}
        for text in queries[i][: args.turns]:
            await app.ainvoke({"messages": [("user", text)]}, config, durability=args.durability)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(thread(i) for i in range(args.threads)))
    runs = args.threads * args.turns
    return {
        "cpu_ms_per_run": (time.process_time() - cpu) * 1000 / runs,
        "runs_per_s": runs / (time.perf_counter() - wall),
    }


def ratios(rows: dict[str, list[dict[str, float]]], a: str, b: str) -> list[dict[str, float]]:
    return [
        {k: x[k] / y[k] for k in ("cpu_ms_per_run", "runs_per_s")}
        for x, y in zip(rows[a], rows[b], strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durability", choices=["sync", "async"], default="sync")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    bindir = pg._find_bindir()
    if bindir is None:
        raise SystemExit(pg.INSTALL_HINT)
    with pg._server(bindir, pg._root()) as server, pg._database(server) as url:
        rows = asyncio.run(measure(url, args))
    print(
        f"{args.threads} threads x {args.turns} turns at once, durability={args.durability}, "
        f"{args.rounds} rounds (medians)\n"
    )
    print_table(
        ["graph", "CPU ms/run", "runs/s"],
        [
            [name, statistics.median(r["cpu_ms_per_run"] for r in rs),
             statistics.median(r["runs_per_s"] for r in rs)]
            for name, rs in rows.items()
        ],
    )  # fmt: skip
    pairs = {
        "one_step_vs_three": ratios(rows, "toolbudget", "toolbudget_3steps"),
        "toolbudget_vs_bind_all": ratios(rows, "toolbudget", "bind_all"),
    }
    for label, per_round in pairs.items():
        print(
            f"\n{label}, per round: CPU/run "
            + ", ".join(f"{r['cpu_ms_per_run']:.2f}" for r in per_round)
            + "; runs/s "
            + ", ".join(f"{r['runs_per_s']:.2f}" for r in per_round)
        )
    path = write_results(
        f"postgres_steps_{args.durability}",
        {**vars(args), "graphs": rows, "ratios": pairs},
    )
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
