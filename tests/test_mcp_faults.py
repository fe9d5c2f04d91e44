"""The MCP fault matrix, asserted: what the model sees for each fault, and that the next
call recovers (stdio and streamable HTTP on 127.0.0.1; real FastMCP servers).

No timings here: ``benchmarks/mcp_faults.py`` prints the same matrix with recovery times.
"""

from __future__ import annotations

import asyncio

import pytest
from mcp_servers.faults import SCENARIOS, TRANSPORTS, FaultRow, returning_big, stuck_past_timeout


def run(scenario: str, transport: str) -> FaultRow:
    return asyncio.run(SCENARIOS[scenario](transport))


pytestmark = [pytest.mark.timeout(120), pytest.mark.parametrize("transport", TRANSPORTS)]


def test_a_server_killed_mid_call_gives_an_error_naming_it_then_recovers(transport):
    row = run("killed mid-call", transport)
    assert row.status == "error" and "faults" in row.model_sees
    assert row.recovered


def test_a_server_killed_between_calls_recovers(transport):
    row = run("killed between calls", transport)
    assert row.recovered
    if transport == "stdio":  # re-opened before the call: the model never sees an error
        assert row.status == "success" and row.model_sees == "after"


def test_a_call_hanging_past_timeout_s_is_answered_with_a_timeout_then_recovers(transport):
    row = run("hanging past timeout_s", transport)
    assert row.status == "error" and "timed out" in row.model_sees
    assert row.recovered


def test_a_server_stuck_past_timeout_s_gets_a_new_session_instead_of_a_wait(transport):
    # "block" stops the whole server; after the timeout the session does not answer a
    # ping, so it is dropped and the next call opens a new one (a new process over stdio)
    row = asyncio.run(stuck_past_timeout(transport, block_s=9))  # > 1 s timeout + 5 s probe
    assert row.status == "error" and "timed out" in row.model_sees
    assert row.recovered and row.sessions_opened == 2


def test_a_frozen_server_is_bounded_by_the_default_mcp_timeout(transport):
    row = run("frozen (SIGSTOP)", transport)
    assert row.status == "error" and "timed out" in row.model_sees
    assert row.recovered


def test_a_server_that_never_starts_is_reported_and_its_tools_refused(transport):
    row = run("never starting", transport)
    assert row.model_sees.startswith("load_errors: ") and len(row.model_sees) > 20
    assert row.status == "error" and "not a tool of this app" in row.model_sees


def test_a_tool_error_reaches_the_model_as_an_error_then_recovers(transport):
    row = run("returning errors", transport)
    assert row.status == "error" and "disk full" in row.model_sees
    assert row.recovered


def test_a_big_answer_arrives_whole_within_the_default_timeout_and_the_session_goes_on(
    transport,
):
    # 50 MB over stdio, under the default 60 s timeout (the SDK's stdio client took
    # minutes); 5 MB over HTTP, whose slower path is the SDK's (benchmarks/mcp_faults.py)
    megabytes = 50 if transport == "stdio" else 5
    row = asyncio.run(returning_big(transport, megabytes=megabytes))
    assert row.status == "success" and row.length == megabytes * 1_000_000
    assert row.model_sees.startswith("[Large output offloaded")  # by default, not 5 MB of context
    assert row.recovered


def test_a_big_answer_past_its_timeout_s_is_a_timeout_and_the_next_call_recovers(transport):
    # the answer is still being written or read when the call times out; the next call
    # must not queue behind it (the session is probed, and dropped if it does not answer)
    row = asyncio.run(returning_big(transport, megabytes=30, timeout_s=0.2))
    assert row.status == "error" and "timed out" in row.model_sees
    assert row.recovered


def test_100_calls_then_a_kill_and_restart_recovers(transport):
    row = run("100 calls then restart", transport)
    assert row.model_sees == "100/100 calls answered before the kill"
    assert row.recovered
