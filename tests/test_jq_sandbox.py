"""jq from the model runs in a worker process: no environment, no files, bounded in time and memory.

The queries go through the real output tool (``query_large_output``) of a ``ToolExecutor``
in a compiled graph, or through :func:`run_jq` itself. The cases that hang or abort the
process when jq runs inside it (issue 25, items 5 and 6) run in a child Python process, so
that such a failure fails the test instead of stopping pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph
from langgraph.store.memory import InMemoryStore

from langgraph_toolbudget import BudgetConfig, ToolBudgetState, ToolCatalog, ToolExecutor
from langgraph_toolbudget.core import jq_sandbox
from langgraph_toolbudget.core.jq_sandbox import MAX_ERROR_CHARS, JqFailed, JqStopped, run_jq
from langgraph_toolbudget.core.large_output import OutputError, query_json

ORDERS = json.dumps({"orders": [{"id": i, "total": i * 1.5} for i in range(3000)], "count": 3000})
SECRET = "sk-test-0123456789-not-for-models"


def list_orders() -> str:
    """List every order as JSON."""
    return ORDERS


def _app(config: BudgetConfig | None = None) -> Any:
    catalog = ToolCatalog.from_tools(
        [list_orders], tool_metadata={"list_orders": {"include": "always"}}
    )
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog, config=config))
    graph.add_edge(START, "tools")
    return graph.compile(store=InMemoryStore())


def _calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    tool_calls = [{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(calls)]
    return {"messages": [HumanMessage("go"), AIMessage("", tool_calls=tool_calls)]}


def _queries(app: Any, *expressions: str) -> list[ToolMessage]:
    """The answers of ``query_large_output`` to each expression, over a fresh stored output."""
    thread = {"configurable": {"thread_id": "jq"}}
    stub = app.invoke(_calls(("list_orders", {})), thread)["messages"][-1]
    handle = stub.artifact["offloaded"]["handle"]
    calls = [("query_large_output", {"handle": handle, "jq_expression": e}) for e in expressions]
    out = app.invoke(_calls(*calls), thread)
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


# --- item 5: no environment, no files ----------------------------------------------------


def test_jq_sees_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    expressions = ["$ENV.OPENAI_API_KEY", "$ENV | keys", "env", "env.OPENAI_API_KEY", "[env[]]"]
    answers = _queries(_app(), *expressions)
    assert [m.status for m in answers] == ["success"] * 5
    assert [json.loads(m.content) for m in answers] == [None, [], {}, None, []]
    assert not any(SECRET in str(m.content) for m in answers)


def test_jq_reads_no_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secrets.json").write_text('{"password": "hunter2"}')
    (tmp_path / "lib.jq").write_text('def leak: "read from a file";')
    (tmp_path / "lib.json").write_text('{"password": "hunter2"}')
    monkeypatch.chdir(tmp_path)  # jq resolves relative module paths against the working dir
    imports = [
        'import "./secrets" as $s; $s',
        'import "lib" as $l; $l',
        'include "lib"; leak',
        'import "./lib" as l; l::leak',
        f'import "{tmp_path}/secrets" as $s; $s',
        # the search metadata overrides jq's empty search list
        f'import "secrets" as $s {{search: "{tmp_path}"}}; $s',
        f'include "lib" {{search: "{tmp_path}"}}; leak',
        f'# a comment\ninclude "lib" {{"search": ["{tmp_path}"]}}; leak',
    ]
    answers = _queries(_app(), *imports, "input_filename", "[inputs]", "$__loc__")
    *refused, filename, inputs, loc = answers
    for message in refused:
        assert message.status == "error" and "is not available" in message.content
        assert "Use jq's builtins" in message.content  # what the model may do instead
        assert "hunter2" not in message.content and "read from a file" not in message.content
    assert json.loads(filename.content) is None  # the input is the output text, not a file
    assert json.loads(inputs.content) == []  # nothing to read after the one input
    assert json.loads(loc.content) == {"file": "<top-level>", "line": 1}


def test_only_import_and_include_written_as_code_are_refused() -> None:
    data = '{"import": 1, "include": "x"}'
    assert run_jq(data, ".import").text == "1"
    assert run_jq(data, ". as $include | $include.include").text == '"x"'
    assert run_jq(data, '"import \\("include") \\((1 + 2))" # include "lib"').text == (
        '"import include 3"'
    )
    for expression in ('"\\(.include)" | include "lib"; .', "{import: 1}"):
        with pytest.raises(JqFailed, match="is not available"):
            run_jq(data, expression)


def test_the_jq_worker_opens_no_file_once_jq_is_loaded(tmp_path: Path) -> None:
    # The worker's own defence, for an import that got past run_jq's refusal: fed the job
    # directly, as run_jq feeds it.
    (tmp_path / "secrets.json").write_text('{"password": "hunter2"}')
    header = {
        "expression": f'import "secrets" as $s {{search: "{tmp_path}"}}; $s',
        "max_results": 10,
        "max_chars": 1000,
        "memory_mb": 512,
        "cpu_s": 10,
    }
    done = subprocess.run(
        [sys.executable, "-I", "-S", jq_sandbox.__file__, jq_sandbox._jq_path()],
        input=json.dumps(header).encode() + b"\n{}",
        capture_output=True,
        env={},
        cwd=tmp_path,
        timeout=30,
        check=True,
    )
    assert b"hunter2" not in done.stdout
    assert "Too many open files" in json.loads(done.stdout)["jq_error"]


# --- item 6: time and memory limits -------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import resource, sys
    if int(sys.argv[2]):  # stands in for the machine's memory, before anything is loaded
        size = int(sys.argv[2]) << 20
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    import asyncio, json, time
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import START, StateGraph
    from langgraph.store.memory import InMemoryStore
    from langgraph_toolbudget import ToolBudgetState, ToolCatalog, ToolExecutor

    def list_orders() -> str:
        '''List every order as JSON.'''
        return json.dumps({"orders": [{"id": i} for i in range(3000)]})

    catalog = ToolCatalog.from_tools(
        [list_orders], tool_metadata={"list_orders": {"include": "always"}}
    )
    graph = StateGraph(ToolBudgetState)
    graph.add_node("tools", ToolExecutor(catalog))  # the default limits
    graph.add_edge(START, "tools")
    app = graph.compile(store=InMemoryStore())
    thread = {"configurable": {"thread_id": "t"}}

    def calls(name, args):
        call = {"name": name, "args": args, "id": "c"}
        return {"messages": [HumanMessage("go"), AIMessage("", tool_calls=[call])]}

    async def main():
        out = await app.ainvoke(calls("list_orders", {}), thread)
        handle = out["messages"][-1].artifact["offloaded"]["handle"]
        query = calls("query_large_output", {"handle": handle, "jq_expression": sys.argv[1]})
        done, ticks = False, 0

        async def ticker():
            nonlocal ticks
            while not done:
                await asyncio.sleep(0.01)
                ticks += 1

        async def run():
            nonlocal done
            try:
                return await app.ainvoke(query, thread)
            finally:
                done = True

        started = time.monotonic()
        out, _ = await asyncio.gather(run(), ticker())
        answer = out["messages"][-1]
        print(json.dumps({"status": answer.status, "content": answer.content,
                          "seconds": time.monotonic() - started, "ticks": ticks}))

    asyncio.run(main())
    """
)


def _in_child(expression: str, limit_memory_mb: int = 0) -> dict[str, Any]:
    """Run one query of the default configuration under ``ainvoke`` in a child process.

    ``limit_memory_mb`` caps the child's address space (``RLIMIT_AS``), standing in for a
    machine's memory: jq inside the child would abort the child when it cannot allocate.
    """
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, expression, str(limit_memory_mb)],
            capture_output=True,
            text=True,
            timeout=90,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"query_large_output({expression!r}) never returned (killed at 90 s)")
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("expression", ["last(range(1e12))", "def f: f; f"])
def test_a_query_that_never_ends_is_stopped_at_its_timeout_without_blocking(
    expression: str,
) -> None:
    answer = _in_child(expression)
    assert answer["status"] == "error"
    assert "jq stopped after 5 s" in answer["content"]
    assert 4.5 < answer["seconds"] < 30
    # the event loop ran on meanwhile: ~500 ticks of 10 ms in 5 s (the GIL was free)
    assert answer["ticks"] >= 100, answer


def test_a_query_that_exhausts_memory_is_answered_and_the_process_lives() -> None:
    # 1.5 GB for the whole process: in-process jq aborts it (SIGABRT); the worker stops at
    # its own 512 MB (or at its 5 s first) and the model gets an error.
    answer = _in_child("[range(1e9)] | length", limit_memory_mb=1536)
    assert answer["status"] == "error"
    assert "ran out of its 512 MB" in answer["content"] or "stopped after 5 s" in answer["content"]


def test_limits_are_options_and_their_errors_say_what_to_do() -> None:
    app = _app(BudgetConfig(jq_timeout_s=1.0, jq_memory_mb=64))
    started = time.monotonic()
    slow, big, fine = _queries(app, "last(range(1e12))", '"x" * 1000000000 | length', ".count")
    assert time.monotonic() - started < 20
    assert slow.status == "error" and "jq stopped after 1 s" in slow.content
    assert "limit(n; ...)" in slow.content  # what to do instead
    assert big.status == "error" and "jq ran out of its 64 MB of memory" in big.content
    assert "'length' instead of collecting arrays" in big.content
    assert fine.status == "success" and fine.content == "3000"


def test_a_sync_query_leaves_other_threads_running() -> None:
    ticks = 0
    stop = threading.Event()

    def tick() -> None:
        nonlocal ticks
        while not stop.is_set():
            time.sleep(0.01)
            ticks += 1

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        with pytest.raises(OutputError, match="jq stopped after 1 s"):
            query_json(ORDERS, "h", "last(range(1e12))", timeout_s=1.0)
    finally:
        stop.set()
        ticker.join()
    assert ticks >= 20  # ~100 in 1 s; in-process jq holds the GIL and stops this thread


def test_run_jq_reports_each_way_a_query_ends() -> None:
    assert run_jq(ORDERS, ".count").text == "3000"
    result = run_jq(ORDERS, "range(5)", max_results=3)
    assert json.loads(result.text) == [0, 1, 2] and result.cut
    with pytest.raises(JqFailed, match="Cannot index number"):
        run_jq(ORDERS, ".count.x")
    with pytest.raises(JqStopped) as stopped:
        run_jq(ORDERS, "def f: [f]; f", memory_mb=64)
    assert stopped.value.why == "memory"
    with pytest.raises(JqStopped) as stopped:
        run_jq(ORDERS, "last(range(1e12))", timeout_s=0.5)
    assert stopped.value.why == "timeout"
    with pytest.raises(JqStopped) as stopped:  # 10 million characters at most come back
        run_jq(ORDERS, '"x" * 10500000')  # one string: 0.2 s (2 million strings took 3.5-5 s)
    assert stopped.value.why == "too_large"


def test_a_huge_jq_error_is_cut_in_the_worker() -> None:
    with pytest.raises(JqFailed) as failed:
        run_jq(ORDERS, 'error("x" * 1000000)')
    assert str(failed.value).startswith("xxx") and len(str(failed.value)) <= MAX_ERROR_CHARS


def test_a_too_long_expression_is_echoed_clipped() -> None:
    expression = ".orders | " + " | ".join(["."] * 2000)
    with pytest.raises(OutputError) as error:
        query_json(ORDERS, "h", expression + " | .x.y.z(")
    assert "syntax error" in str(error.value) and len(str(error.value)) < 1500
