"""CodeMode against native tool calls: model calls and context tokens of one 10-item task.

The task: "Which of these 10 cities will be above 25 °C tomorrow?", each city needing one
forecast lookup (a forecast answer: the day's summary plus 3-hourly readings, ~1 KB of
JSON; and again with hourly readings, ~2.6 KB, as weather APIs give) and a filter. The same
prebuilt agent over the example catalog (40 tools) plus the forecast tool, the same budget
and meta-tools, runs it three ways with a scripted chat model that makes the calls a capable
model would make:

- ``native, one call per turn``: one forecast call per model call, then the answer;
- ``native, parallel``: the 10 forecast calls in one reply, then the answer;
- ``codemode``: one program (``python_execution``) that loops over the cities, calls the
  forecast function and prints the cities above 25 °C, then the answer.

Measured per run: model calls, and context tokens, the sum over the model calls of what the
model is sent (system prompt, messages and bound tool schemas) plus what it writes, at 4
characters a token as everywhere in the benchmarks (``core/tokens.py``); the answer must be
right in every run. Target: CodeMode >= 60 % fewer context tokens than native, in <= 2 model
calls. Wall time of one run is reported too (the sandbox's worker process included).

The two native ways bracket what a model does: one round trip per call is the pattern
CodeMode replaces; parallel calls take as few model calls as CodeMode, so the difference is
the tool results that never enter the context (it grows with their size).

Run: ``python benchmarks/codemode.py [--repeat 5]``. Writes ``benchmarks/results/codemode.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

from langgraph_toolbudget import ToolCatalog, create_toolbudget_agent  # noqa: E402
from langgraph_toolbudget.core.tokens import CHARS_PER_TOKEN  # noqa: E402
from langgraph_toolbudget.demo.example_catalog import build_example_catalog  # noqa: E402
from langgraph_toolbudget.testing import ScriptedChatModel  # noqa: E402

TOMORROW = {
    "Lisbon": 27, "Oslo": 14, "Cairo": 34, "Dublin": 17, "Athens": 29,
    "Reykjavik": 9, "Seville": 31, "Warsaw": 21, "Naples": 26, "Tallinn": 16,
}  # fmt: skip
CITIES = list(TOMORROW)
HOT = [c for c in CITIES if TOMORROW[c] > 25]
DEFAULT_BUILTINS = [
    "request_more_tools", "search_tools", "add_tool", "show_all_tools", "*_large_output",
]  # fmt: skip
QUESTION = f"Which of these cities will be above 25 °C tomorrow: {', '.join(CITIES)}?"
ANSWER = f"Above 25 °C tomorrow: {', '.join(HOT)}."
CODE = (
    f"cities = {CITIES!r}\n"
    "hot = [c for c in cities if get_forecast(city=c, day='tomorrow')['max_temp_c'] > 25]\n"
    "print(hot)"
)


STEP_HOURS = [3]
"""Hours between two readings of a forecast (3: 8 readings a day; 1: 24)."""


@tool
def get_forecast(city: str, day: str = "today") -> dict:
    """The weather forecast of a city for a day ('today', 'tomorrow'): the day's summary
    (max and min temperature in °C, sky, rain, wind) and the readings of the day."""
    top = TOMORROW[city]
    hours = [
        {
            "time": f"{h:02d}:00",
            "temp_c": top - abs(15 - h) // 2,
            "feels_like_c": top - abs(15 - h) // 2 - 1,
            "rain_mm": 0.0,
            "wind_kmh": 12,
            "humidity_pct": 48,
        }
        for h in range(0, 24, STEP_HOURS[0])
    ]
    return {
        "city": city,
        "day": day,
        "max_temp_c": top,
        "min_temp_c": top - 9,
        "sky": "sunny",
        "rain_probability_pct": 10,
        "wind_kmh": 12,
        "hourly": hours,
    }


def _catalog() -> ToolCatalog:
    example = build_example_catalog()
    tools = [spec.tool for spec in example.specs]
    categories = {c: example.tools_in(c) for c in example.categories}
    categories["weather"] = [*categories.get("weather", []), "get_forecast"]
    return ToolCatalog.from_tools(
        [*tools, get_forecast],
        categories=categories,
        category_descriptions=example.category_descriptions,
    )


def _text(message: BaseMessage) -> str:
    text = message.text if isinstance(message.text, str) else str(message.content)
    calls = getattr(message, "tool_calls", None)
    return text + (json.dumps(calls) if calls else "")


def _forecast(city: str, i: int) -> dict[str, Any]:
    return {"name": "get_forecast", "args": {"city": city, "day": "tomorrow"}, "id": f"f{i}"}


def scripts() -> dict[str, list[AIMessage]]:
    """What a capable model writes, each way."""
    one_by_one = [AIMessage("", tool_calls=[_forecast(c, i)]) for i, c in enumerate(CITIES)]
    program = {"name": "python_execution", "args": {"code": CODE}, "id": "p1"}
    return {
        "native, one call per turn": [*one_by_one, AIMessage(ANSWER)],
        "native, parallel": [
            AIMessage("", tool_calls=[_forecast(c, i) for i, c in enumerate(CITIES)]),
            AIMessage(ANSWER),
        ],
        "codemode": [AIMessage("", tool_calls=[program]), AIMessage(ANSWER)],
    }


def run(way: str, catalog: ToolCatalog) -> dict[str, Any]:
    """One run of the task; model calls, tokens in and out, wall time."""
    replies = scripts()[way]
    sent: list[int] = []
    written: list[int] = []
    model = ScriptedChatModel(responses=[], cycle=False)

    def reply(messages: list[BaseMessage], _: Any) -> AIMessage:
        answer = replies[len(sent)]
        tools = json.dumps(model.tools_schema) if model.tools_schema else ""
        sent.append(sum(len(_text(m)) for m in messages) + len(tools))
        written.append(len(_text(answer)))
        model.tools_schema = []
        return answer

    model.responses = [reply] * len(replies)
    options: dict[str, Any] = {"pinned": ["get_forecast"], "max_iterations": 12}
    if way == "codemode":
        options["tool_call_formats"] = {"enabled": ["native", "codemode"], "primary": "codemode"}
        # the same built-ins as the native runs (the defaults), plus python_execution
        options["enabled_builtins"] = {"allow": ["python_execution", *DEFAULT_BUILTINS]}
    graph = create_toolbudget_agent(model, catalog, **options).compile()
    started = time.perf_counter()
    out = graph.invoke({"messages": [HumanMessage(QUESTION)]})
    seconds = time.perf_counter() - started
    assert out["messages"][-1].content == ANSWER
    if way == "codemode":
        assert out["messages"][-2].content == repr(HOT), out["messages"][-2].content
    tokens_in = round(sum(sent) / CHARS_PER_TOKEN)
    tokens_out = round(sum(written) / CHARS_PER_TOKEN)
    return {
        "model_calls": len(sent),
        "context_tokens": tokens_in + tokens_out,
        "tokens_sent": tokens_in,
        "tokens_written": tokens_out,
        "largest_prompt_tokens": round(max(sent) / CHARS_PER_TOKEN),
        "seconds": seconds,
    }


def measure(catalog: ToolCatalog, repeat: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for way in scripts():
        runs = [run(way, catalog) for _ in range(repeat)]
        first = runs[0]
        assert all(r["context_tokens"] == first["context_tokens"] for r in runs)  # deterministic
        results[way] = {
            **{k: v for k, v in first.items() if k != "seconds"},
            "median_ms": round(statistics.median(r["seconds"] for r in runs) * 1000, 1),
            "min_ms": round(min(r["seconds"] for r in runs) * 1000, 1),
            "max_ms": round(max(r["seconds"] for r in runs) * 1000, 1),
        }
    code = results["codemode"]["context_tokens"]
    for way in ("native, one call per turn", "native, parallel"):
        results[way]["codemode_saves"] = round(1 - code / results[way]["context_tokens"], 3)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    catalog = _catalog()
    sizes: dict[str, Any] = {}
    for step in (3, 1):
        STEP_HOURS[0] = step
        result_chars = len(json.dumps(get_forecast.invoke({"city": "Oslo", "day": "tomorrow"})))
        results = measure(catalog, args.repeat)
        label = f"{24 // step} readings ({result_chars:,} characters per forecast)"
        sizes[label] = {"forecast_chars": result_chars, "results": results}
        print(f"\n{label}")
        print_table(
            ["way", "model calls", "context tokens", "largest prompt", "codemode saves", "ms"],
            [
                [
                    way,
                    r["model_calls"],
                    r["context_tokens"],
                    r["largest_prompt_tokens"],
                    f"{r['codemode_saves']:.0%}" if "codemode_saves" in r else "",
                    f"{r['median_ms']:.0f} ({r['min_ms']:.0f}-{r['max_ms']:.0f})",
                ]
                for way, r in results.items()
            ],
        )
        for way in ("native, one call per turn", "native, parallel"):
            met = results[way]["codemode_saves"] >= 0.60 and results["codemode"]["model_calls"] <= 2
            print(
                f"target against {way!r} (>= 60% fewer, <= 2 calls): {'met' if met else 'MISSED'}"
            )
    path = write_results(
        "codemode",
        {"task": QUESTION, "cities": len(CITIES), "repeat": args.repeat, "sizes": sizes},
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
