"""A process forked after it used the package (gunicorn --preload, multiprocessing's fork
start method, Celery's prefork), and a catalog dropped without ``close()``. Each scenario runs
in a child Python process of its own, which forks with ``os.fork`` (never the test process);
a real MCP server over stdio, the real CodeMode sandbox, a scripted chat model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from mcp_servers import SERVERS_DIR

MATH = str(SERVERS_DIR / "math_server.py")

FORKING = """
import json, os, sys, time

def in_child(work, limit=30.0):
    '''work() in a forked child: (its answer, seconds) or (None, None) if it hung.'''
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            answer = work()
        except Exception as exc:
            answer = f"{type(exc).__name__}: {exc}"
        os.write(w, json.dumps(answer).encode())
        os.close(w)
        sys.exit(0)  # finalizers run, as in a gunicorn worker
    os.close(w)
    began = time.monotonic()
    while time.monotonic() - began < limit:
        if os.waitpid(pid, os.WNOHANG)[0]:
            took = time.monotonic() - began
            answer = os.read(r, 100000).decode()
            return (json.loads(answer) if answer else None), took
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None, None
"""


def with_this_checkout() -> dict[str, str]:
    """The environment with this checkout first on the path: the child imports the package
    under test, whatever is installed."""
    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


def run_script(body: str) -> dict:
    code = FORKING + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent,
        env=with_this_checkout(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_codemode_in_a_child_forked_after_a_program_ran_answers_at_once() -> None:
    # The sandbox does not survive a fork: the child's program waited for ever, past
    # codemode_timeout_s. It is answered at once with what to do.
    result = run_script(
        """
        from langchain_core.messages import AIMessage
        from langchain_core.tools import tool
        from langgraph_toolbudget import ToolCatalog, create_toolbudget_agent
        from langgraph_toolbudget.testing import ScriptedChatModel

        @tool
        def add(a: int, b: int) -> int:
            '''Add two numbers.'''
            return a + b

        def run():
            code = {"code": "print(add(a=1, b=2))"}
            program = {"name": "python_execution", "args": code, "id": "p"}
            script = [AIMessage("", tool_calls=[program]), "ok"]
            model = ScriptedChatModel(responses=script, cycle=False)
            graph = create_toolbudget_agent(
                model, ToolCatalog.from_tools([add]), enabled_builtins=["python_execution"],
                codemode_timeout_s=3, tool_call_formats=["native", "codemode"],
            ).compile()
            out = graph.invoke({"messages": [("user", "add")]})
            return [m.content for m in out["messages"] if m.type == "tool"][0]

        parent = run()
        child, took = in_child(run)
        print(json.dumps({"parent": parent, "child": child, "took": took}))
        """
    )
    assert result["parent"].strip() == "3"
    assert result["took"] is not None and result["took"] < 10, "the child's program hung"
    assert result["child"].startswith("Error: python_execution cannot run in this process")
    assert "forked" in result["child"] and "spawn or forkserver" in result["child"]


def test_an_mcp_catalog_loaded_before_a_fork_works_in_the_child_and_lets_it_exit() -> None:
    # The child found the parent's session: its first call failed as "the connection was
    # lost ... may have run" (never sent), and a child that never called exited after 7 s.
    result = run_script(
        f"""
        import sys
        from langgraph_toolbudget.mcp import load_mcp_catalog_sync
        catalog = load_mcp_catalog_sync(
            {{"math": {{"transport": "stdio", "command": sys.executable, "args": [{MATH!r}]}}}}
        )
        multiply = catalog.tools(["multiply"])[0]
        parent = multiply.invoke({{"a": 6, "b": 7}})[0]["text"]
        child, _ = in_child(lambda: multiply.invoke({{"a": 2, "b": 3}})[0]["text"])
        _, exit_took = in_child(lambda: "idle")
        catalog.close()
        print(json.dumps({{"parent": parent, "child": child, "exit_took": exit_took}}))
        """
    )
    assert result["parent"] == "42.0" and result["child"] == "6.0"
    assert result["exit_took"] is not None and result["exit_took"] < 3


def test_a_call_abandoned_before_a_fork_does_not_block_its_group_in_the_child() -> None:
    # The parent's abandoned call has no thread in the child: it kept its group refused there.
    result = run_script(
        """
        import time
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_core.tools import tool
        from langgraph_toolbudget import ToolCatalog, ToolExecutor

        @tool
        def slow() -> str:
            '''Slow.'''
            time.sleep(1.5)
            return "late"

        @tool
        def add(a: int, b: int) -> int:
            '''Add.'''
            return a + b

        always = {"include": "always", "timeout_s": 0.5}
        catalog = ToolCatalog.from_tools([slow, add], tool_metadata={"slow": always, "add": always})
        executor = ToolExecutor(catalog)

        def call(name, **args):
            message = AIMessage("", tool_calls=[{"name": name, "args": args, "id": "c"}])
            state = {"messages": [HumanMessage("go"), message], "selected_tools": ["slow", "add"]}
            return executor.invoke(state)["messages"][0].content

        call("slow")  # times out; its thread runs on 1 s more
        def later():
            time.sleep(2)
            return call("add", a=1, b=2)
        child, _ = in_child(later)
        print(json.dumps({"child": child}))
        """
    )
    assert result["child"] == "3"


def test_an_mcp_catalog_dropped_without_close_has_its_server_reaped() -> None:
    # Each session's owner task held the runtime, so its finalizer never ran before exit:
    # a notebook re-running `catalog = load_mcp_catalog_sync(...)` piled up servers.
    result = run_script(
        f"""
        import gc, sys, time
        from pathlib import Path
        from langgraph_toolbudget.mcp import load_mcp_catalog_sync

        def servers():
            me = str(os.getpid())
            return [p for p in Path("/proc").iterdir() if p.name.isdigit()
                    and (p / "stat").exists()
                    and (p / "stat").read_text().split(") ")[-1].split()[1] == me]

        for _ in range(3):
            catalog = load_mcp_catalog_sync(
                {{"math": {{"transport": "stdio", "command": sys.executable, "args": [{MATH!r}]}}}}
            )
            catalog.tools(["multiply"])[0].invoke({{"a": 6, "b": 7}})
            del catalog
        gc.collect()
        deadline = time.monotonic() + 10
        while servers() and time.monotonic() < deadline:
            time.sleep(0.1)
        print(json.dumps({{"alive": len(servers())}}))
        """
    )
    assert result["alive"] == 0


def test_a_child_forgets_the_parents_pool_and_abandoned_calls_at_the_fork() -> None:
    # They were forgotten on the child's first use, which two of its threads could race:
    # each saw the parent's pid and reset, and two pools ran `max_parallel` calls each.
    result = run_script(
        """
        import threading
        from langgraph_toolbudget.execution.lingering import LingeringCalls
        from langgraph_toolbudget.execution.pipeline import ToolThreads

        threads, lingering = ToolThreads(1, "t"), LingeringCalls()
        parent_pool = threads._made()[0]
        parent_lock = lingering._lock
        def at_fork():
            return {
                "pool_forgotten": threads._pool is None,
                "lock_new": lingering._lock is not parent_lock,
            }
        child, _ = in_child(at_fork)

        def first_calls():
            made = []
            start = threading.Barrier(8)
            def first():
                start.wait()
                made.append(id(threads._made()[0]))
            workers = [threading.Thread(target=first) for _ in range(8)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            return {"pools": len(set(made)), "new": id(parent_pool) not in made}
        racing, _ = in_child(first_calls)
        print(json.dumps({"child": child, "racing": racing}))
        """
    )
    assert result["child"] == {"pool_forgotten": True, "lock_new": True}
    assert result["racing"] == {"pools": 1, "new": True}


def test_a_child_forked_during_a_limited_groups_call_runs_that_groups_calls() -> None:
    # The child inherited the count of the parent's running call, which no thread of the
    # child gives back: its calls of the group waited for ever.
    result = run_script(
        """
        import threading
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_core.tools import StructuredTool
        from langgraph_toolbudget import ToolCatalog, ToolExecutor

        started, release = threading.Event(), threading.Event()

        def slow(x: str = "") -> str:
            '''Slow lookup.'''
            started.set()
            release.wait(30)
            return "slow done"

        def quick(x: str = "") -> str:
            '''Quick lookup.'''
            return "quick done"

        tools = [StructuredTool.from_function(f) for f in (slow, quick)]
        meta = {n: {"concurrency_group": "g", "is_pure": False} for n in ("slow", "quick")}
        executor = ToolExecutor(
            ToolCatalog.from_tools(tools, tool_metadata=meta), group_limits={"g": 1}
        )

        def call(name):
            message = AIMessage("", tool_calls=[{"name": name, "args": {}, "id": name}])
            state = {"messages": [HumanMessage("go"), message], "selected_tools": ["slow", "quick"]}
            return executor.invoke(state)["messages"][-1].content

        running = threading.Thread(target=call, args=("slow",), daemon=True)
        running.start()
        started.wait(10)
        child, _ = in_child(lambda: call("quick"), limit=10)
        release.set()
        running.join(10)
        print(json.dumps({"child": child}))
        """
    )
    assert result["child"] == "quick done"


def test_a_child_forked_during_a_middleware_batchs_impure_call_runs_that_batchs_calls() -> None:
    # The middleware's per-batch gate kept the parent's running impure call: the same batch's
    # next call in the child (a checkpointed run resumed there) waited for ever.
    result = run_script(
        """
        import threading
        from langchain_core.tools import StructuredTool
        from langgraph_toolbudget import ToolBudgetMiddleware, ToolCatalog

        def lookup(x: str = "") -> str:
            '''Lookup.'''
            return x

        meta = {"lookup": {"concurrency_group": "g", "is_pure": False}}
        catalog = ToolCatalog.from_tools([StructuredTool.from_function(lookup)], tool_metadata=meta)
        gates = ToolBudgetMiddleware(catalog, mode="parallel_safe")._gates
        batch, entered, release = ("thread", "reply"), threading.Event(), threading.Event()

        def parent_call():
            with gates.held(batch, "g", False):
                entered.set()
                release.wait(20)

        threading.Thread(target=parent_call, daemon=True).start()
        entered.wait(10)

        def child_call():
            done = threading.Event()
            def run():
                with gates.held(batch, "g", False):
                    done.set()
            threading.Thread(target=run, daemon=True).start()
            return done.wait(5)

        child, _ = in_child(child_call, limit=10)
        release.set()
        print(json.dumps({"child": child}))
        """
    )
    assert result["child"] is True
