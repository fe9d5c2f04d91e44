"""Parsing model replies per text tool-call format: correctness and throughput.

The replies are the test fixtures (``tests/data/format_replies.json``: 13-18
per format, written from the public chat-template documentation of Qwen 2.5/3,
Hermes 2/3, Mistral v3 and Llama 3.2, malformed ones included), parsed with the
user defaults (``get_format(name).parse``).

Reported per format:
    - the share of well-formed replies parsed into exactly the expected calls
      (target 100 %), and of malformed ones answered with an error (target
      100 %); replies that raise (target: none);
    - throughput in replies per second, and as a ratio against the time
      ``json.loads`` takes to decode the same replies' JSON-like payloads
      (the floor any parser pays);
    - the worst time over stress replies (1 MB of prose, a 1 MB argument,
      arguments nested 50,000 deep, 5,000 calls in one reply, 33 calls of
      16 KB that each need repair, 1 MB of numbers or of empty lists in 33
      calls, 8 KB of punctuation that json-repair, used before, took ~20 s
      on): target <= 100 ms each, none raising (bounded work, never a stall).

Run: ``python benchmarks/parse_formats.py [--repeats 200]``.
Writes ``benchmarks/results/parse_formats.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO_ROOT, print_table, write_results  # noqa: E402

from langgraph_toolbudget.formats import get_format  # noqa: E402
from langgraph_toolbudget.formats.base import (  # noqa: E402
    MAX_CALLS,
    MAX_REPAIR_CHARS,
    MAX_REPLY_CHARS,
)

FIXTURES = REPO_ROOT / "tests" / "data" / "format_replies.json"
FORMATS = ["hermes", "mistral", "pythonic", "json"]
STRESS_LIMIT_S = 0.1


def _outcome(fmt: str, case: dict[str, Any]) -> str:
    """``ok``, ``wrong`` or ``raised`` for one fixture."""
    try:
        parsed = get_format(fmt).parse(case["reply"])
    except Exception:  # counted, not hidden: the target is that none raise
        return "raised"
    if case.get("error"):
        return "ok" if parsed.error and not parsed.calls else "wrong"
    calls = [[c["name"], c["args"]] for c in parsed.calls]
    text_ok = "text" not in case or parsed.text == case["text"]
    return "ok" if parsed.error is None and calls == case["calls"] and text_ok else "wrong"


def _stress_replies(fmt: str) -> dict[str, str]:
    f = get_format(fmt)
    deep = "[" * 50_000 + "]" * 50_000
    one = f.render_calls([{"name": "x", "args": {}, "id": "1"}])
    return {
        "1 MB of prose": "word " * 200_000,
        "1 MB argument": f.render_calls([{"name": "x", "args": {"a": "y" * 1_000_000}, "id": "1"}]),
        "nested 50,000 deep": one.replace("{}", deep).replace("()", f"(a={deep})"),
        "5,000 calls": f.example * 5_000,
        "10,000 half calls": f.example[: len(f.example) // 2] * 10_000,
        "33 calls of 16 KB to repair": _repair_heavy(fmt),
        "1 MB of numbers in 33 calls": _values(fmt, "1,"),
        "1 MB of empty lists in 33 calls": _values(fmt, "[],"),
        "8 KB of punctuation": _wrap(fmt, "{" + "*{1}" * 2_000 + "}"),
    }


_WRAP = {
    "hermes": "<tool_call>{}</tool_call>\n",
    "mistral": "[TOOL_CALLS] [{}]\n",
    "json": "{}\n",  # calls one after another: a reply of calls only
}


def _wrap(fmt: str, call: str) -> str:
    return f"[f(a={call})]" if fmt == "pythonic" else _WRAP[fmt].format(call)


def _repair_heavy(fmt: str) -> str:
    """One more call than a reply may hold, each just under the repair bound, not valid JSON
    (single quotes) and dense (a token every two characters): the most repair work a reply
    could ask for. Pythonic has no repair: its calls are 16 KB of code each."""
    numbers = "1," * (MAX_REPAIR_CHARS // 2 - 30)
    if fmt == "pythonic":
        return f"[f(a=[{numbers}1])]\n" * (MAX_CALLS + 1)
    call = "{'name': 'x', 'arguments': {'a': [" + numbers + "1]}}"
    return _WRAP[fmt].format(call) * (MAX_CALLS + 1)


def _values(fmt: str, value: str) -> str:
    """1 MB of calls whose arguments are lists of ``value``: the most values per character."""
    count = MAX_REPLY_CHARS // (MAX_CALLS + 1) // len(value) - 40
    items = value * count + value.rstrip(",")
    if fmt == "pythonic":
        return f"[f(a=[{items}])]\n" * (MAX_CALLS + 1)
    call = '{"name": "x", "arguments": {"a": [' + items + "]}}"
    return _WRAP[fmt].format(call) * (MAX_CALLS + 1)


def _per_second(fn: Any, items: list[str], repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        for item in items:
            fn(item)
    return repeats * len(items) / (time.perf_counter() - start)


def _json_floor(reply: str) -> None:
    """What decoding the reply's JSON-ish payload costs at least (baseline)."""
    start = reply.find("{")
    with contextlib.suppress(ValueError):
        json.loads(reply[start:] if start >= 0 else reply)


def measure(fmt: str, repeats: int) -> dict[str, Any]:
    cases = json.loads(FIXTURES.read_text())[fmt]
    outcomes = [_outcome(fmt, c) for c in cases]
    good = [o for c, o in zip(cases, outcomes, strict=True) if not c.get("error")]
    bad = [o for c, o in zip(cases, outcomes, strict=True) if c.get("error")]
    replies = [c["reply"] for c in cases]
    parse = get_format(fmt).parse
    rate = _per_second(parse, replies, repeats)
    floor = _per_second(_json_floor, replies, repeats)
    stress: dict[str, float] = {}
    raised = outcomes.count("raised")
    for name, reply in _stress_replies(fmt).items():
        start = time.perf_counter()
        try:
            parse(reply)
        except Exception:
            raised += 1
        stress[name] = round((time.perf_counter() - start) * 1000, 2)
    return {
        "format": fmt,
        "fixtures": len(cases),
        "well_formed_parsed": round(good.count("ok") / len(good), 4),
        "malformed_with_error": round(bad.count("ok") / len(bad), 4),
        "raised": raised,
        "replies_per_second": round(rate),
        "json_loads_replies_per_second": round(floor),
        "slowdown_vs_json_loads": round(floor / rate, 2),
        "stress_ms": stress,
        "worst_stress_ms": max(stress.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    results = [measure(fmt, args.repeats) for fmt in FORMATS]
    print_table(
        [
            "format",
            "fixtures",
            "well-formed parsed",
            "malformed -> error",
            "raised",
            "replies/s",
            "x json.loads",
            "worst stress ms",
        ],
        [
            [
                r["format"],
                r["fixtures"],
                f"{r['well_formed_parsed']:.0%}",
                f"{r['malformed_with_error']:.0%}",
                r["raised"],
                r["replies_per_second"],
                r["slowdown_vs_json_loads"],
                r["worst_stress_ms"],
            ]
            for r in results
        ],
    )
    met = all(
        r["well_formed_parsed"] == 1
        and r["malformed_with_error"] == 1
        and r["raised"] == 0
        and r["worst_stress_ms"] <= STRESS_LIMIT_S * 1000
        for r in results
    )
    print(f"\ntargets (100% / 100% / none raise / stress <= 100 ms): {'met' if met else 'MISSED'}")
    path = write_results(
        "parse_formats",
        {
            "target": "100% of well-formed fixtures parsed, every malformed one an error, none "
            "raise; each stress reply (1 MB, deep nesting, thousands of calls) <= 100 ms",
            "target_met": met,
            "repeats": args.repeats,
            "results": results,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
