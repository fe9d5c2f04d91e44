"""What a thread's context says of a whole catalog (excluded, unselectable, selectable, free,
hidden categories) is worked out from the tools its entries name, never by a scan of the
catalog, and says exactly what asking each tool would (review 21a: a turn of a thread with one
exclusion scanned a 10,000-tool catalog about ten times, 100x the turn without one)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from langchain_core.tools import StructuredTool

from langgraph_toolbudget import ToolCatalog
from langgraph_toolbudget.core.context import INCLUDE_MODES, SessionContext
from langgraph_toolbudget.core.spec import ToolSpec


class NoScanCatalog(ToolCatalog):
    """A catalog whose every-tool list may not be read: the context must not scan it."""

    @property
    def specs(self) -> list[ToolSpec]:
        raise AssertionError("the context scanned the whole catalog")


def _tool(name: str) -> StructuredTool:
    return StructuredTool.from_function(lambda query="": name, name=name, description=name)


def _specs() -> list[ToolSpec]:
    """40 tools over 4 servers (a few without one, grouped by category), some ``always`` or
    ``manual`` or in a special category, drafts among them; each MCP-like tool has its
    prefixed alias, and ``s0``'s and ``s1``'s ``t1`` share the bare alias ``t1``."""
    metadata: dict[str, dict[str, Any]] = {}
    categories: dict[str, list[str]] = {}
    names = []
    for i in range(40):
        server = f"s{i % 4}" if i % 10 else None
        name = f"{server}__t{i // 4}" if server else f"local{i}"
        names.append(name)
        meta: dict[str, Any] = {"server": server} if server else {}
        if i % 7 == 3:
            meta["include"] = "always"
        if i % 9 == 4:
            meta["include"] = "manual"
        if i % 13 == 5:
            meta["status"] = "draft"
        metadata[name] = meta
        category = "human" if i % 17 == 8 else "misc" if server is None else f"c{i % 3}"
        categories.setdefault(category, []).append(name)
    catalog = ToolCatalog.from_tools(
        [_tool(n) for n in names], categories=categories, tool_metadata=metadata
    )
    specs = []
    for spec in catalog.in_runtime_mode("debug").specs:
        if spec.server:
            bare = spec.name.split("__", 1)[1]
            spec = dataclasses.replace(spec, aliases=(bare,))
        specs.append(spec)
    return specs


def _contexts(names: list[str], seed: int) -> list[SessionContext]:
    """Random thread contexts naming tools (by name and alias), servers and categories."""
    rng = random.Random(seed)
    keys = [*names, "t1", "t2", "t7", "s0", "s1", "s2", "s3", "misc", "human", "c1", "nothing"]
    out = []
    for _ in range(60):
        pick = lambda k: {rng.choice(keys): rng.choice(k) for _ in range(rng.randint(0, 4))}  # noqa: E731
        out.append(
            SessionContext(
                tools=pick(("include", "exclude")),
                servers=pick(("include", "exclude")),
                tool_modes=pick(INCLUDE_MODES),
                server_modes=pick(INCLUDE_MODES),
            )
        )
    return out


@pytest.mark.parametrize("mode", ["production", "debug"])
def test_the_whole_catalog_answers_are_those_of_each_tool_without_a_scan(mode: str) -> None:
    specs = _specs()
    plain = ToolCatalog(specs, runtime_mode=mode)  # type: ignore[arg-type]
    noscan = NoScanCatalog(specs, runtime_mode=mode)  # type: ignore[arg-type]
    every = plain.specs
    seen: list[int] = []
    for ctx in _contexts([s.name for s in specs], seed=21):
        excluded = {s.name for s in every if ctx.decision(s) == "exclude"}
        seen.append(bool(excluded) + 2 * bool(ctx.selectable(noscan)))
        assert ctx.excluded(noscan) == excluded
        assert ctx.unselectable(noscan) == [
            s.name
            for s in every
            if ctx.decision(s) == "exclude" or ctx.sets_mode(s) and ctx.mode(s) != "agent"
        ]
        assert ctx.selectable(noscan) == [
            s.name
            for s in every
            if s.include != "agent" and ctx.mode(s) == "agent" and ctx.decision(s) is None
        ]
        base = noscan.always_visible
        kept = [n for n in base if ctx.decision(plain.get(n)) != "exclude"]
        kept = [n for n in kept if not plain.get(n).always_visible or ctx.in_context(plain.get(n))]
        extra = [s.name for s in every if ctx.in_context(s)]
        expected_free = list(dict.fromkeys([*kept, *extra])) if ctx else list(base)
        assert ctx.free(noscan, base) == expected_free
        assert ctx.hidden_categories(noscan) == sorted(
            c for c in plain.categories if excluded.issuperset(plain.tools_in(c))
        )
        # asked again: the same answers, which a caller may change without changing them
        ctx.excluded(noscan).add("x")
        assert ctx.excluded(noscan) == excluded
    assert {1, 2}.issubset(seen) or 3 in seen  # the contexts exclude and select something


def test_the_answers_are_kept_per_catalog() -> None:
    specs = _specs()
    production, debug = ToolCatalog(specs), ToolCatalog(specs, runtime_mode="debug")
    draft = next(s.name for s in specs if s.status == "draft")
    ctx = SessionContext(tools={draft: "exclude"})
    assert ctx.excluded(production) == set()  # a draft is not listed in production
    assert ctx.excluded(debug) == {draft}
    assert ctx.excluded(production) == set()
