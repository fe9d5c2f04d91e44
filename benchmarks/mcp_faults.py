"""Benchmark: the MCP fault matrix, with what the model sees and how long recovery takes.

Real FastMCP servers (``tests/mcp_servers/fault_server.py``) over stdio and streamable
HTTP on 127.0.0.1, loaded with ``load_mcp_catalog`` (user defaults, plus
``timeout_s=1`` on the hanging tool) and called through a ``ToolExecutor`` under
``ainvoke``. Faults: killed mid-call, killed between calls, hanging past ``timeout_s``,
stuck past ``timeout_s`` (a sync tool blocks the whole server 12 s), frozen by SIGSTOP
with only the MCP default timeout (set to 1 s here), never starting, returning errors,
returning 50 MB (under the default 60 s timeout), 100 calls then killed and restarted.
Recovery: the seconds from the fault to the first successful next call (for HTTP this
includes starting the server again, which someone must do); "sessions": how many
sessions the catalog opened to the server in the scenarios that count them.

The machine's load average is printed before and after (the figures move with it).

``tests/test_mcp_faults.py`` asserts the same outcomes without timings.

Run: ``python benchmarks/mcp_faults.py`` (writes ``benchmarks/results/mcp_faults.json``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from _common import print_table, write_results  # noqa: E402
from mcp_servers.faults import SCENARIOS, TRANSPORTS, FaultRow  # noqa: E402


async def run_all() -> list[FaultRow]:
    rows = []
    for name, scenario in SCENARIOS.items():
        for transport in TRANSPORTS:
            print(f"running: {name} ({transport})", file=sys.stderr)
            try:
                rows.append(await scenario(transport))
            except Exception as exc:  # noqa: BLE001 - a scenario that breaks is a row, not the end
                rows.append(
                    FaultRow(name, transport, "", f"scenario failed: {exc!r}"[:200], 0, False)
                )
    return rows


def main() -> None:
    load_before = os.getloadavg()
    rows = asyncio.run(run_all())
    load_after = os.getloadavg()
    print_table(
        ["fault", "transport", "status", "the model sees", "chars", "next call ok", "recovery s",
         "sessions"],
        [
            [r.scenario, r.transport, r.status, r.model_sees[:70].replace("\n", " "), r.length,
             "yes" if r.recovered else "no",
             "-" if r.recovery_s is None else f"{r.recovery_s:.2f}",
             "-" if r.sessions_opened is None else r.sessions_opened]
            for r in rows
        ],
    )  # fmt: skip
    print(f"\nload average (1, 5, 15 min): before {load_before}, after {load_after}")
    payload = {"load_average_before": load_before, "load_average_after": load_after}
    payload["rows"] = [dataclasses.asdict(r) for r in rows]
    path = write_results("mcp_faults", payload)
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
