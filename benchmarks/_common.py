"""Helpers shared by every benchmark: data, catalogs, the node pipeline, numbers, tables, JSON.

The benchmark data lives outside the project, in ``../shared/bench`` next to the
repository (see that folder's README). It is read at run time and never copied
into the project. Set ``TOOLBUDGET_BENCH_DIR`` or pass ``--bench-dir`` to read it
from elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool, StructuredTool

from langgraph_toolbudget import ClassifyIntent, SelectTools, ToolCatalog, ToolSearch
from langgraph_toolbudget.core.spec import OUTPUT_SCHEMA_KEY
from langgraph_toolbudget.state import merge_names

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BENCH_DIR = REPO_ROOT.parent / "shared" / "bench"
BENCH_DIR_ENV = "TOOLBUDGET_BENCH_DIR"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
SEED = 20240531


def bench_dir(cli_value: str | None = None) -> Path:
    """The data folder: ``--bench-dir``, else ``$TOOLBUDGET_BENCH_DIR``, else the default."""
    if cli_value:
        return Path(cli_value)
    env = os.environ.get(BENCH_DIR_ENV)
    if env:
        return Path(env)
    # A git worktree sits one level deeper (``<root>/wt/<name>``): look one folder further up.
    for candidate in (DEFAULT_BENCH_DIR, REPO_ROOT.parents[1] / "shared" / "bench"):
        if candidate.is_dir():
            return candidate
    return DEFAULT_BENCH_DIR


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# --- catalogs ----------------------------------------------------------------------------------

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def _noop(**kwargs: Any) -> str:
    return "ok"


def make_tool(
    name: str,
    description: str,
    parameters: dict[str, Any] | None,
    responses: dict[str, Any] | None = None,
) -> BaseTool:
    """A real LangChain tool whose argument schema is the given JSON schema.

    ``responses`` (the output fields a data set declares, ``{field: {"description": ...}}``)
    become the tool's output schema, where an MCP tool's ``outputSchema`` goes
    (``metadata["output_schema"]``).
    """
    schema = parameters if isinstance(parameters, dict) and parameters.get("properties") else None
    metadata = None
    if isinstance(responses, dict) and responses:
        metadata = {OUTPUT_SCHEMA_KEY: {"type": "object", "properties": responses}}
    return StructuredTool.from_function(
        func=_noop,
        name=name,
        description=description,
        args_schema=schema or _EMPTY_SCHEMA,
        metadata=metadata,
    )


@dataclass
class Dataset:
    """A catalog and its queries (``query``, ``gold`` tool names)."""

    name: str
    tools: list[BaseTool]
    categories: dict[str, list[str]]
    queries: list[dict[str, Any]]
    source: str
    synthetic: bool = False
    notes: list[str] = field(default_factory=list)

    def catalog(self) -> ToolCatalog:
        return ToolCatalog.from_tools(self.tools, categories=self.categories or None)


def load_dataset(folder: Path, name: str, *, output_fields: bool = True) -> Dataset:
    """Read ``catalog.jsonl`` / ``queries.jsonl`` of one bench folder.

    A tool's ``category`` (when not null) becomes its catalog category; its ``responses``
    (Seal-Tools declares each tool's output fields) its output schema, unless
    ``output_fields`` is False (the tools as a catalog without output schemas sees them).
    """
    rows = read_jsonl(folder / "catalog.jsonl")
    tools = [
        make_tool(
            r["name"],
            r.get("description") or "",
            r.get("parameters"),
            r.get("responses") if output_fields else None,
        )
        for r in rows
    ]
    categories: dict[str, list[str]] = {}
    for r in rows:
        if r.get("category"):
            categories.setdefault(r["category"], []).append(r["name"])
    queries = read_jsonl(folder / "queries.jsonl")
    return Dataset(name, tools, categories, queries, source=str(folder))


# A small generated world for when ../shared/bench is absent: each category has a
# few verbs over a few objects; queries name a verb and an object in everyday words.
_SYN_VERBS = [
    ("get", "Get", "show me"),
    ("list", "List all", "what are the"),
    ("create", "Create a new", "make a new"),
    ("delete", "Delete a", "remove the"),
    ("update", "Update an existing", "change the"),
    ("search", "Search for", "look up"),
    ("send", "Send a", "send my"),
    ("export", "Export", "download the"),
]
_SYN_WORDS_TEXT = """
alpha bravo cedar delta ember falcon garnet harbor iris jasper kelp lumen meadow nectar onyx pylon
quartz raven sierra tundra umber violet willow xenon yarrow zephyr amber basalt cobalt dune fjord
glacier heron indigo juniper kestrel lagoon marble nimbus orchid prairie quill reef saffron thistle
upland vale wharf yew zinnia acorn birch canyon dahlia egret fern grove hazel ivy jade koi lotus
maple nova oak pebble quince rose sage tulip
"""
_SYN_WORDS = tuple(_SYN_WORDS_TEXT.split())


def synthetic_world(
    n_tools: int, n_categories: int, *, seed: int = SEED, n_queries: int = 0
) -> Dataset:
    """A generated catalog of ``n_tools`` tools in ``n_categories`` categories, with queries.

    Each category is a domain word pair (``"amber cobalt"``) owning objects;
    tools are ``<verb>_<object>`` with a one-line description and two arguments.
    Queries paraphrase one or two tools with the verb's everyday phrase.
    """
    rng = random.Random(seed)
    words = list(_SYN_WORDS)
    domains = []
    for c in range(n_categories):
        a, b = words[c % len(words)], words[(c * 7 + 3) % len(words)]
        domains.append(f"{a}_{b}_{c}")
    tools: list[BaseTool] = []
    specs: list[tuple[str, str, str, str]] = []  # name, verb phrase, object words, category
    categories: dict[str, list[str]] = {d: [] for d in domains}
    per_cat = max(1, n_tools // n_categories)
    for i in range(n_tools):
        domain = domains[min(i // per_cat, n_categories - 1)]
        verb, verb_text, verb_phrase = _SYN_VERBS[i % len(_SYN_VERBS)]
        obj_words = [rng.choice(words), rng.choice(words)]
        obj = "_".join(obj_words)
        name = f"{verb}_{obj}_{i}"
        dom_words = " ".join(domain.split("_")[:2])
        description = (
            f"{verb_text} {' '.join(obj_words)} records in the {dom_words} system. "
            f"Returns the {obj_words[1]} details."
        )
        params = {
            "type": "object",
            "properties": {
                f"{obj_words[0]}_id": {"type": "string", "description": f"The {obj_words[0]} id"},
                "limit": {"type": "integer", "description": "How many results"},
            },
            "required": [f"{obj_words[0]}_id"],
        }
        tools.append(make_tool(name, description, params))
        categories[domain].append(name)
        specs.append((name, verb_phrase, " ".join(obj_words), dom_words))
    queries = []
    for q in range(n_queries):
        picks = rng.sample(specs, 2 if rng.random() < 0.3 else 1)
        text = " and then ".join(f"please {phrase} {obj} in {dom}" for _, phrase, obj, dom in picks)
        queries.append({"id": f"syn-{q}", "query": text, "gold": [p[0] for p in picks]})
    return Dataset(
        f"synthetic-{n_tools}",
        tools,
        categories,
        queries,
        source="generated",
        synthetic=True,
    )


# --- the pipeline --------------------------------------------------------------------------------


@dataclass
class Pipeline:
    """The three nodes as a user wires them: classify_intent -> select_tools -> tool_search."""

    classify: ClassifyIntent
    select: SelectTools
    search: ToolSearch

    @classmethod
    def build(
        cls,
        catalog: ToolCatalog,
        *,
        classify_kwargs: dict[str, Any] | None = None,
        select_kwargs: dict[str, Any] | None = None,
        search_kwargs: dict[str, Any] | None = None,
    ) -> Pipeline:
        return cls(
            ClassifyIntent(catalog, **(classify_kwargs or {})),
            SelectTools(catalog, **(select_kwargs or {})),
            ToolSearch(catalog, **(search_kwargs or {})),
        )

    def run(self, query: str) -> dict[str, Any]:
        """One turn, each node through its ``invoke``; the state merged as the graph would.

        ``selected_tools`` follows the state's reducer: existing names first,
        new names appended, no duplicates.
        """
        state: dict[str, Any] = {"messages": [HumanMessage(query)]}
        state.update(self.classify.invoke(state))
        for node in (self.select, self.search):
            update = node.invoke(state).get("selected_tools")
            state["selected_tools"] = merge_names(state.get("selected_tools"), update)
        return state


# --- dev / test splits ---------------------------------------------------------------------------

SPLIT_SALT = "toolbudget dev/test"
"""Salt of the hash that splits a data set without its own dev/test field (MetaTool)."""


def split_of(query: dict[str, Any]) -> str:
    """``"dev"`` or ``"test"``: where a query belongs when constants are tuned and reported.

    A data set's own split when it has one (Seal-Tools: ``dev``; ``test_in_domain`` and
    ``test_out_domain`` are test). Otherwise (MetaTool, the synthetic world) a fixed
    50/50 split by a salted sha1 of the query *text*: the same text is never on both
    sides (MetaTool repeats some texts with different gold tools), and the split does
    not depend on the order, the sample or the seed.
    """
    own = query.get("split")
    if own == "dev":
        return "dev"
    if isinstance(own, str) and own.startswith("test"):
        return "test"
    digest = hashlib.sha1(f"{SPLIT_SALT}:{query['query']}".encode()).digest()
    return "dev" if digest[0] < 128 else "test"


def split_groups(queries: Sequence[dict[str, Any]]) -> dict[str, list[int]]:
    """Positions of the queries in each split: ``dev``, ``test`` and, when the data set
    has several test splits (Seal-Tools' in-domain and out-of-domain), each of them."""
    groups: dict[str, list[int]] = {"dev": [], "test": []}
    parts: dict[str, list[int]] = {}
    for i, q in enumerate(queries):
        side = split_of(q)
        groups[side].append(i)
        own = q.get("split")
        if isinstance(own, str) and own.startswith("test") and own != "test":
            parts.setdefault(own, []).append(i)
    if len(parts) > 1:
        groups.update(sorted(parts.items()))
    return groups


def paired_diff_ci(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = SEED
) -> dict[str, float]:
    """``mean(b) - mean(a)`` over paired per-query values, with its 95% interval.

    A paired bootstrap: the queries are resampled (with replacement) and the mean
    difference recomputed, so the interval is the sampling noise of the query set
    (the lexical pipeline itself is deterministic). ``units`` is the difference in
    queries (``n`` times the mean: recall units of whole queries).
    """
    if len(a) != len(b) or not len(a):
        raise ValueError(f"paired samples needed, got {len(a)} and {len(b)}")
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    n = diff.size
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    means = diff[picks].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {
        "diff": float(diff.mean()),
        "lo": float(lo),
        "hi": float(hi),
        "units": float(diff.sum()),
        "units_lo": float(lo * n),
        "units_hi": float(hi * n),
        "queries": n,
    }


def add_splits(row: dict[str, Any], groups: dict[str, list[int]]) -> list[float]:
    """Replace a row's per-query values by its figures per split; return its recalls."""
    recalls, sizes = row.pop("_recalls"), row.pop("_sizes")
    row["splits"] = {
        name: {
            "queries": len(idx),
            "recall": statistics.fmean(recalls[i] for i in idx) if idx else float("nan"),
            "visible": statistics.fmean(sizes[i] for i in idx) if idx else float("nan"),
        }
        for name, idx in groups.items()
    }
    return recalls


def paired_by_split(
    a: list[float], b: list[float], groups: dict[str, list[int]]
) -> dict[str, dict[str, float]]:
    """``recall(b) - recall(a)`` per split, with its paired-bootstrap 95% interval."""
    return {
        name: paired_diff_ci([a[i] for i in idx], [b[i] for i in idx])
        for name, idx in groups.items()
        if idx
    }


# --- numbers -------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear interpolation."""
    if not values:
        return float("nan")
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def latency_summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000.0 for s in seconds]
    return {
        "mean_ms": statistics.fmean(ms) if ms else float("nan"),
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
    }


def ratio_ci(
    ours: Sequence[float], ref: Sequence[float], *, resamples: int = 2000, seed: int = SEED
) -> tuple[float, float]:
    """95% interval of ``median(ours) / median(ref)`` over paired samples (a paired bootstrap).

    ``ours[i]`` and ``ref[i]`` are from the same round of an interleaved run: rounds
    are resampled whole, so slow stretches of a shared machine weigh on both sides.
    """
    if len(ours) != len(ref) or not ours:
        raise ValueError(f"paired samples needed, got {len(ours)} and {len(ref)}")
    rng = random.Random(seed)
    n = len(ours)
    ratios = []
    for _ in range(resamples):
        picks = [rng.randrange(n) for _ in range(n)]
        ratios.append(
            statistics.median(ours[i] for i in picks) / statistics.median(ref[i] for i in picks)
        )
    return percentile(ratios, 2.5), percentile(ratios, 97.5)


def top_k(
    scores: np.ndarray,
    names: Sequence[str],
    k: int,
    allowed: Any = None,
    *,
    positive_only: bool = False,
) -> list[str]:
    """The ``k`` best names by score (ties in catalog order), among ``allowed`` if given."""
    order = np.lexsort((np.arange(scores.size), -scores))
    picked = [
        names[i]
        for i in order
        if (allowed is None or names[i] in allowed) and (scores[i] > 0 or not positive_only)
    ]
    return picked[:k]


def recall(selected: Iterable[str], gold: Sequence[str]) -> float:
    """Fraction of the gold tools present in ``selected``."""
    chosen = set(selected)
    return sum(g in chosen for g in gold) / len(gold) if gold else 1.0


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def subsample(rows: list[dict[str, Any]], limit: int | None, seed: int = SEED) -> list[dict]:
    """``limit`` rows drawn with a fixed seed (all rows, in order, when ``limit`` is None)."""
    if limit is None or limit >= len(rows):
        return rows
    rng = random.Random(seed)
    return sorted(rng.sample(rows, limit), key=rows.index)


# --- output --------------------------------------------------------------------------------------

# Packages whose versions a result records (the ones whose code the benchmarks time).
RECORDED_PACKAGES = (
    "langgraph",
    "langgraph-prebuilt",
    "langchain-core",
    "langchain-mcp-adapters",
    "mcp",
    "google-re2",
    "rapidfuzz",
)


def git_rev() -> str:
    """The commit measured (short hash), ``+dirty`` when the package or benchmarks held
    uncommitted changes (results JSON aside), ``unknown`` outside a git checkout."""

    def git(*args: str) -> str:
        cmd = ["git", "-C", str(REPO_ROOT), *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()

    try:
        rev = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!*/results/*")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{rev}+dirty" if dirty else rev


def environment() -> dict[str, Any]:
    """Where the numbers were measured: the commit, interpreter, machine, its load, package
    versions."""
    env: dict[str, Any] = {
        "git_rev": git_rev(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    for package in RECORDED_PACKAGES:
        try:
            env[package] = version(package)
        except PackageNotFoundError:
            env[package] = None
    return env


def median_ms(seconds: Sequence[float]) -> float:
    """The median of timings in seconds, in milliseconds."""
    return statistics.median(seconds) * 1000.0


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print an aligned text table; floats with 3 decimals, anything else as ``str``."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in cells:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def write_results(name: str, payload: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/<name>.json`` (name, environment, payload); return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    body = {"benchmark": name, "environment": environment(), **payload}
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return path
