"""CodeMode: what crosses out of the sandbox is bounded, a cancelled run's program stops, and
a program may sleep within its time limit.

A value held many times in the sandbox (``[x] * 20000``: one string there) would be written
out once per reference on the host; a run cancelled under ``ainvoke`` must not leave its
program calling tools; ``time.sleep`` is documented as bounded by ``codemode_timeout_s``.
Only the chat model is scripted; the tools, the prebuilt agent and the sandbox are real.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from decimal import Decimal
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from langgraph_toolbudget import ToolCatalog, create_toolbudget_agent
from langgraph_toolbudget.execution.codemode import PYTHON_EXECUTION, written_chars
from langgraph_toolbudget.execution.sandbox import SandboxLimits, run_program
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
OPTIONS: dict[str, Any] = {
    "enabled_builtins": ["python_execution"],
    "tool_call_formats": {"enabled": ["native", "codemode"], "primary": "codemode"},
    "max_tools": 0,
    "search_limit": 0,
}
RUNS: list[Any] = []


@tool
def save_note(text: Any) -> str:
    """Save a note."""
    RUNS.append(text)
    return "saved"


@pytest.fixture(autouse=True)
def _fresh_runs() -> None:
    RUNS.clear()


def program(code: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": PYTHON_EXECUTION, "args": {"code": code}, "id": "p1"}]
    )


async def run_code(code: str, api: str = "invoke", **options: Any) -> ToolMessage:
    """The tool message answering one program, run by the prebuilt agent."""
    model = ScriptedChatModel(responses=[program(code), AIMessage("done")], cycle=False)
    graph = create_toolbudget_agent(
        model,
        ToolCatalog.from_tools([save_note]),
        **{**OPTIONS, "pinned": ["save_note"], **options},
    ).compile()
    payload = {"messages": [HumanMessage("go")]}
    out = graph.invoke(payload) if api == "invoke" else await graph.ainvoke(payload)
    assert out["messages"][-1].content == "done"  # the graph went on
    return next(m for m in out["messages"] if isinstance(m, ToolMessage))


def test_written_chars_counts_each_reference_and_stops_past_its_bound():
    x = "a" * 10_000
    assert written_chars([x] * 3, 10**6) == 2 + 6 + 3 * 10_002
    assert 10**5 < written_chars([x] * 1_000, 10**5) < 10**5 + 20_000  # stopped early
    deep: Any = [x]
    for _ in range(5_000):
        deep = [deep, deep]  # 2**5000 references to x: counted until past the bound
    assert written_chars(deep, 10**5) > 10**5
    assert written_chars({"n": 10**50, "b": b"ab", "f": 1.5}, 10**6) < 200
    # other values count their own text: repr for a Decimal, a float, None, True
    d = Decimal("1" * 4000)
    assert written_chars([d] * 300, 10**6) > 10**6  # each one written out in full
    inf = float("inf")  # JSON writes "Infinity", repr "inf"
    assert written_chars([inf] * 1000, 10**6) >= len(json.dumps([inf] * 1000))
    record = {"id": 1, "price": 1.5, "qty": None, "ok": True}
    assert written_chars([record] * 8000, 10**6) < len(json.dumps([record] * 8000)) * 1.5


@pytest.mark.parametrize("api", APIS)
async def test_a_last_value_holding_one_string_many_times_is_named_not_written_out(api):
    answer = await run_code("x = 'a' * 10000\nprint(len(x))\n[x] * 200", api)  # 2 MB written out
    assert answer.status == "success"
    assert answer.content == (
        "10000\n(the program's last value would be over 1,000,000 characters written out (a value "
        "held several times in it counts each time), too long to show: return a smaller value, "
        "e.g. a slice, a count or a summary, or print the part you need)"
    )
    shown = await run_code("x = 'a' * 10\n[x] * 3", api)
    assert shown.content == '["aaaaaaaaaa", "aaaaaaaaaa", "aaaaaaaaaa"]'


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_call_whose_arguments_are_too_long_written_out_raises_in_the_program(api):
    code = (
        "x = 'a' * 10000\n"
        "try:\n    save_note(text=[x] * 200)\nexcept ValueError as e:\n    print(e)\n"
        "save_note(text=[x] * 50)"
    )
    answer = await run_code(code, api)
    assert answer.status == "success", answer.content
    assert answer.content == (
        "save_note() was not called: its arguments would be over 1,000,000 characters written "
        "out (a value held several times in them counts each time), the most a call's arguments "
        "may be. Pass less per call: a slice, or one item per call.\nsaved"
    )
    assert [len(text) for text in RUNS] == [50]  # only the call within the limit ran


async def test_a_cancelled_runs_program_starts_no_tool_call_after_the_cancellation():
    """The tool cancels the run while it runs (so no timing decides it); that call finishes,
    and the program, whose thread outlives the cancelled task, starts no other call."""
    started: list[int] = []
    cancelled_after: list[int] = []
    task: asyncio.Task[Any] | None = None

    @tool
    async def send_reminder(i: int) -> str:
        """Send reminder number i (a side effect)."""
        started.append(i)
        if i == 2:
            assert task is not None
            task.cancel()
            while not task.done():
                await asyncio.sleep(0.01)
            cancelled_after.append(len(started))
        return "sent"

    code = "for i in range(30):\n    send_reminder(i=i)\n'all sent'"
    model = ScriptedChatModel(responses=[program(code), AIMessage("done")], cycle=False)
    graph = create_toolbudget_agent(
        model, ToolCatalog.from_tools([send_reminder]), **{**OPTIONS, "pinned": ["send_reminder"]}
    ).compile()
    task = asyncio.create_task(graph.ainvoke({"messages": [HumanMessage("remind them")]}))
    with pytest.raises(asyncio.CancelledError):
        await task
    # the program's thread ends: the loop's default executor waits for it, answering its
    # calls meanwhile, as a server's loop would
    await asyncio.get_running_loop().shutdown_default_executor()
    assert cancelled_after == [3]
    assert started == [0, 1, 2]


def test_the_sandbox_stops_a_cancelled_program_at_its_next_call_and_cuts_its_sleep():
    limits = SandboxLimits(timeout_s=5, max_memory_bytes=50 * 2**20, max_output_chars=1000)
    cancel = threading.Event()
    calls: list[str] = []

    def answer(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        calls.append(name)
        cancel.set()
        return 1

    code = "f()\nf()\n1"
    stopped = run_program(code, ["f"], answer, limits, cancel=cancel)
    assert (stopped.error_kind, calls) == ("cancelled", ["f"])
    cancel.clear()
    threading.Timer(0.2, cancel.set).start()  # while it sleeps
    began = time.monotonic()
    asleep = run_program("import time\ntime.sleep(4)\n1", [], answer, limits, cancel=cancel)
    assert asleep.error_kind == "cancelled" and time.monotonic() - began < 3.5


@pytest.mark.parametrize("api", APIS)
async def test_a_program_sleeps_within_its_time_limit(api):
    code = (
        "import time, asyncio\n"
        "time.sleep(0.1)\n"
        "async def later():\n    await asyncio.sleep(0.05)\n    return 'awake'\n"
        "async def both():\n"
        "    return await asyncio.gather(asyncio.sleep(0.01, 'a'), asyncio.sleep(0.01, 'b'))\n"
        "[asyncio.run(later()), asyncio.run(both())]"
    )
    answer = await run_code(code, api, codemode_timeout_s=5)
    assert answer.status == "success", answer.content
    assert answer.content == '["awake", ["a", "b"]]'


async def test_a_program_may_sleep_more_times_than_monty_allows_host_calls_by_default():
    answer = await run_code("import time\nfor i in range(1200):\n    time.sleep(0)\n'awake'")
    assert answer.status == "success" and answer.content == "awake", answer.content


def test_a_program_making_host_round_trips_is_stopped_at_its_time_limit():
    """Monty's clock stops at each round trip (a name lookup, a refused OS call): the wall
    clock, checked at each, ends the program."""
    limits = SandboxLimits(timeout_s=1, max_memory_bytes=20 * 2**20, max_output_chars=99)
    code = (
        "n = 0\nfor i in range(10**7):\n    try:\n        undefined_name\n"
        "    except NameError:\n        n += 1\nn"
    )
    began = time.monotonic()
    run = run_program(code, [], lambda *_: None, limits)
    assert run.error_kind == "timeout" and "time limit reached" in (run.error or "")
    assert time.monotonic() - began < 4  # not the ~200 s of 10**7 round trips


@pytest.mark.parametrize("api", APIS)
async def test_a_sleep_past_the_time_limit_stops_the_program_at_once(api):
    answer = await run_code(
        "import time\ntime.sleep(100)\nprint('woke')", api, codemode_timeout_s=5
    )
    assert answer.status == "error"
    assert answer.content.startswith(
        "Error: the program was stopped at its time limit of 5 s (codemode_timeout_s): time limit "
        "reached: the program asked to sleep 100 s with "
    )
    assert answer.content.endswith(
        " s of its 5 s left\nDo less per program (fewer items, no "
        "endless loop), or run the rest in another program."
    )
    assert answer.artifact["codemode"]["stopped"] == "timeout"
    assert answer.artifact["codemode"]["seconds"] < 4.5  # it never slept: stopped at once
