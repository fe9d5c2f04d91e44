"""Real tools that record what they do, for the agent/executor/meta tests.

Every tool here is a real LangChain ``@tool`` (or ``StructuredTool``) with a tiny
body. Tools built by :func:`recording_tools` append each execution to a
:class:`Recorder`, so a test can prove that a refused call never ran. Tools
built by :func:`probe_tool` report to a :class:`ConcurrencyProbe`, which counts
how many calls run at once (overall and per concurrency group) and flags an
impure call that overlaps another call of its group.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, tool
from langgraph.prebuilt import InjectedState, ToolRuntime
from langgraph.types import Command

from langgraph_toolbudget import ToolBudgetState, ToolCatalog

# --- recording tools ------------------------------------------------------------------------


@dataclass
class Recorder:
    """Every tool execution, in the order the bodies ran: ``(tool name, arguments)``."""

    runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def record(self, name: str, **args: Any) -> None:
        self.runs.append((name, args))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.runs]


_ACTIVE: list[Recorder] = [Recorder()]


def _rec() -> Recorder:
    return _ACTIVE[0]


def recording_tools(rec: Recorder) -> list[BaseTool]:
    """A small app: projects, github, weather, docs, misc and admin tools, recording into ``rec``.

    The tools are built once (building tools is slow) and record into the
    recorder of the latest call of this function or :func:`recording_catalog`.
    """
    _ACTIVE[0] = rec
    return list(_build_tools())


@functools.cache
def _build_tools() -> tuple[BaseTool, ...]:
    rec = _RecorderProxy()

    @tool
    def create_project(name: str) -> str:
        """Create a new project board with the given name."""
        rec.record("create_project", name=name)
        return f"project {name} created"

    @tool
    def list_projects() -> list[str]:
        """List all project boards."""
        rec.record("list_projects")
        return ["apollo", "gemini"]

    @tool
    def add_task(project: str, title: str) -> str:
        """Add a task card to a project board."""
        rec.record("add_task", project=project, title=title)
        return f"task {title!r} added to {project}"

    @tool
    def create_issue(repo: str, title: str) -> str:
        """Open a new issue in a GitHub repository."""
        rec.record("create_issue", repo=repo, title=title)
        return f"issue {title!r} opened in {repo}"

    @tool
    def list_issues(repo: str, limit: int = 5) -> list[str]:
        """List open issues of a GitHub repository."""
        rec.record("list_issues", repo=repo, limit=limit)
        return [f"{repo}#{i}" for i in range(1, limit + 1)]

    @tool
    def merge_pull_request(repo: str, number: int) -> str:
        """Merge a pull request of a GitHub repository."""
        rec.record("merge_pull_request", repo=repo, number=number)
        return f"merged {repo}#{number}"

    @tool
    def get_weather(city: str) -> str:
        """Get current weather conditions for a city."""
        rec.record("get_weather", city=city)
        return f"{city}: 18C, cloudy"

    @tool
    def weather_forecast(city: str, days: int = 3) -> dict:
        """Get the weather forecast of a city for the next days."""
        rec.record("weather_forecast", city=city, days=days)
        return {"city": city, "days": [f"day {d + 1}: sunny" for d in range(days)]}

    @tool
    def search_docs(query: str, max_results: int = 3, exact: bool = False) -> list[str]:
        """Search the product documentation for a query."""
        rec.record("search_docs", query=query, max_results=max_results, exact=exact)
        return [f"doc about {query} #{i}" for i in range(max_results)]

    @tool
    def tag_items(items: list[str], label: str) -> str:
        """Attach a label to several items at once."""
        rec.record("tag_items", items=items, label=label)
        return f"tagged {len(items)} items with {label}"

    @tool
    def explode(reason: str) -> str:
        """Always fails, to test error handling."""
        rec.record("explode", reason=reason)
        raise ValueError(f"kaboom: {reason}")

    @tool
    async def fetch_page(url: str) -> str:
        """Fetch a web page (an async-only tool, like MCP tools)."""
        await asyncio.sleep(0)
        rec.record("fetch_page", url=url)
        return f"<html>{url}</html>"

    @tool
    def purge_database(confirm: bool) -> str:
        """Delete every row of the database (disabled in this app)."""
        rec.record("purge_database", confirm=confirm)
        return "purged"

    @tool
    def admin_shutdown(reason: str) -> str:
        """Shut the server down (filtered out of this app)."""
        rec.record("admin_shutdown", reason=reason)
        return "bye"

    @tool
    def ask_human(question: str) -> str:
        """Ask the human user a clarifying question."""
        rec.record("ask_human", question=question)
        return "yes"

    return (
        create_project,
        list_projects,
        add_task,
        create_issue,
        list_issues,
        merge_pull_request,
        get_weather,
        weather_forecast,
        search_docs,
        tag_items,
        explode,
        fetch_page,
        purge_database,
        admin_shutdown,
        ask_human,
    )


class _RecorderProxy:
    """Forwards to the active recorder, so tools built once record into each test's own."""

    def record(self, name: str, **args: Any) -> None:
        _rec().record(name, **args)


CATEGORIES: dict[str, list[str]] = {
    "projects": ["create_project", "list_projects", "add_task"],
    "github": ["create_issue", "list_issues", "merge_pull_request"],
    "weather": ["get_weather", "weather_forecast"],
    "docs": ["search_docs", "tag_items", "fetch_page"],
    "misc": ["explode"],
    "database": ["purge_database"],
    "admin": ["admin_shutdown"],
    "human": ["ask_human"],
}
CATEGORY_DESCRIPTIONS = {
    "projects": "Project boards and their task cards",
    "github": "GitHub repositories: issues and pull requests",
    "weather": "Weather conditions and forecasts for cities",
    "docs": "Product documentation and web pages",
}
SERVERS = {
    "admin_shutdown": "admin",
    **{n: "app" for cat, names in CATEGORIES.items() if cat != "admin" for n in names},
}


def recording_catalog(rec: Recorder, **overrides: Any) -> ToolCatalog:
    """The recording tools in a catalog: ``purge_database`` disabled, ``admin_shutdown`` filtered.

    Keyword arguments override :meth:`ToolCatalog.from_tools` arguments; a
    ``tool_metadata`` override is merged into the default one. Catalogs are
    immutable, so equal requests share one.
    """
    _ACTIVE[0] = rec
    return _build_catalog(json.dumps(overrides, sort_keys=True))


def recording_fixtures() -> tuple[Any, Any]:
    """A test module's ``rec`` (a fresh :class:`Recorder`) and ``catalog`` (its
    :func:`recording_catalog`, in place of conftest's standard one) fixtures.

    Use: ``rec, catalog = recording_fixtures()`` at the module's top level.
    """

    @pytest.fixture(name="rec")
    def rec_fixture() -> Recorder:
        return Recorder()

    @pytest.fixture(name="catalog")
    def catalog_fixture(rec: Recorder) -> ToolCatalog:
        return recording_catalog(rec)

    return rec_fixture, catalog_fixture


@functools.cache
def _build_catalog(key: str) -> ToolCatalog:
    overrides: dict[str, Any] = json.loads(key)
    metadata: dict[str, dict[str, Any]] = {n: {"server": s} for n, s in SERVERS.items()}
    metadata["purge_database"]["enabled"] = False
    for name, extra in overrides.pop("tool_metadata", {}).items():
        metadata.setdefault(name, {}).update(extra)
    options: dict[str, Any] = {
        "categories": CATEGORIES,
        "category_descriptions": CATEGORY_DESCRIPTIONS,
        "tool_metadata": metadata,
        "allowed_servers": ["app"],
        **overrides,
    }
    return ToolCatalog.from_tools(list(_build_tools()), **options)


# --- concurrency probes ---------------------------------------------------------------------


@dataclass
class ConcurrencyProbe:
    """Counts calls running at once; flags an impure call overlapping its group."""

    group_of: dict[str, str] = field(default_factory=dict)
    live: int = 0
    max_live: int = 0
    live_by_group: dict[str, int] = field(default_factory=dict)
    max_by_group: dict[str, int] = field(default_factory=dict)
    impure_running: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    intervals: list[tuple[str, float, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self, name: str, pure: bool) -> float:
        group = self.group_of.get(name, "default")
        with self.lock:
            if self.impure_running.get(group, 0):
                self.violations.append(f"{name} started while an impure call of {group} ran")
            if not pure and self.live_by_group.get(group, 0):
                self.violations.append(f"impure {name} started beside other calls of {group}")
            self.live += 1
            self.max_live = max(self.max_live, self.live)
            self.live_by_group[group] = self.live_by_group.get(group, 0) + 1
            self.max_by_group[group] = max(
                self.max_by_group.get(group, 0), self.live_by_group[group]
            )
            if not pure:
                self.impure_running[group] = self.impure_running.get(group, 0) + 1
        return time.perf_counter()

    def exit(self, name: str, pure: bool, start: float) -> None:
        group = self.group_of.get(name, "default")
        with self.lock:
            self.live -= 1
            self.live_by_group[group] -= 1
            if not pure:
                self.impure_running[group] -= 1
            self.intervals.append((name, start, time.perf_counter()))


def fetch_tool(probe: ConcurrencyProbe, seconds: float = 0.3) -> BaseTool:
    """A sync tool ``fetch`` of group ``api`` that spends ``seconds`` inside ``probe`` and
    answers ``fetched {x}``."""

    def fetch(x: int = 0) -> str:
        start = probe.enter("fetch", True)
        time.sleep(seconds)
        probe.exit("fetch", True, start)
        return f"fetched {x}"

    probe.group_of["fetch"] = "api"
    return StructuredTool.from_function(func=fetch, name="fetch", description="Fetch.")


def probe_tool(
    name: str,
    probe: ConcurrencyProbe,
    *,
    pure: bool,
    seconds: float = 0.05,
    sync: bool = False,
    meet: threading.Barrier | None = None,
) -> BaseTool:
    """A real tool that sleeps ``seconds`` (``time.sleep`` if ``sync``) inside the probe.

    With ``meet`` (sync only), it waits at that barrier instead: until every party is
    inside the probe at once, or the barrier's timeout breaks it (the call then fails).
    """

    def body(x: int = 0) -> str:
        start = probe.enter(name, pure)
        try:
            if meet is not None:
                meet.wait()
            else:
                time.sleep(seconds)
        finally:
            probe.exit(name, pure, start)
        return f"{name} {x}"

    async def abody(x: int = 0) -> str:
        start = probe.enter(name, pure)
        try:
            await asyncio.sleep(seconds)
        finally:
            probe.exit(name, pure, start)
        return f"{name} {x}"

    description = f"Probe tool {name}: sleeps and records overlaps."
    if sync:
        return StructuredTool.from_function(func=body, name=name, description=description)
    return StructuredTool.from_function(coroutine=abody, name=name, description=description)


# --- LangGraph injection ------------------------------------------------------------------


class NotesState(ToolBudgetState):
    note: str


def injection_tools(seen: list[Any]) -> list[Any]:
    @tool
    def count_messages(state: Annotated[dict, InjectedState]) -> str:
        """Count the messages of the conversation."""
        seen.append(("state", sorted(state)))
        return f"{len(state['messages'])} messages"

    @tool
    def echo_call_id(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Echo the call id."""
        return f"{text} from {tool_call_id}"

    @tool
    def runtime_info(text: str, runtime: ToolRuntime) -> str:
        """Read the tool runtime."""
        seen.append(("runtime", runtime.tool_call_id, runtime.state["note"]))
        return f"{text}: call {runtime.tool_call_id}, note={runtime.state['note']!r}"

    @tool
    def save_note(note: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Save a note into the graph state."""
        return Command(
            update={
                "note": note,
                "messages": [ToolMessage(f"saved {note!r}", tool_call_id=tool_call_id)],
            }
        )

    @tool
    def plain(text: str) -> str:
        """No injection."""
        return text.upper()

    return [count_messages, echo_call_id, runtime_info, save_note, plain]


# --- scripted conversations -----------------------------------------------------------------


def call(tool_name: str, call_id: str, /, **args: Any) -> dict[str, Any]:
    """A tool call as a chat model returns it."""
    return {"name": tool_name, "args": args, "id": call_id, "type": "tool_call"}


def ai_calls(*calls: dict[str, Any]) -> AIMessage:
    """An AI message carrying tool calls."""
    return AIMessage("", tool_calls=list(calls))


def tool_messages(messages: Sequence[Any]) -> list[Any]:
    return [m for m in messages if m.type == "tool"]


# --- the wrong-first-category scenario (the agent and the middleware tests) ------------------

APOLLO_QUERY = "Put the apollo launch blocker on the apollo project board"


def wrong_category_script() -> list[Any]:
    """Wrong category chosen -> request_more_tools -> the new tool is called -> answer."""

    def use_the_new_tool(messages: list[Any], tools: list[str]) -> AIMessage:
        if "create_issue" not in tools:  # the model can only call what it was shown
            return AIMessage("I have no tool to open an issue.")
        return ai_calls(call("create_issue", "c2", repo="acme/apollo", title="Launch blocker"))

    return [
        ai_calls(call("request_more_tools", "c1", categories=["github"], reason="open an issue")),
        use_the_new_tool,
        AIMessage("Opened the launch blocker issue in acme/apollo."),
    ]


def weather_and_secret_op(ran: list[str]) -> ToolCatalog:
    """A catalog of ``get_weather`` and a ``manual`` ``secret_op`` (a tool no request selects),
    each appending ``"<tool>:<argument>"`` to ``ran`` when it runs: for the tests that a
    hidden or excluded tool never runs."""

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(f"get_weather:{city}")
        return f"Sunny in {city}"

    @tool
    def secret_op(target: str) -> str:
        """Run the privileged maintenance operation on a target."""
        ran.append(f"secret_op:{target}")
        return f"done {target}"

    return ToolCatalog.from_tools(
        [secret_op, get_weather],
        categories={"ops": ["secret_op"], "weather": ["get_weather"]},
        tool_metadata={"secret_op": {"include": "manual"}},
    )


def _aliases_reach_the_function() -> bool:
    """Whether this langchain-core gives a pydantic field with an alias to the tool's
    function under the field's name (from 1.5.5; before, a direct ``invoke`` with the alias
    failed with "missing 1 required positional argument", whatever the executor does)."""
    from pydantic import BaseModel, Field

    class Probe(BaseModel):
        from_: str = Field(alias="from")

    def probe(from_: str) -> str:
        return from_

    probe_tool = StructuredTool.from_function(probe, args_schema=Probe, description="probe")
    try:
        return probe_tool.invoke({"from": "x"}) == "x"
    except TypeError:
        return False


needs_aliased_fields = pytest.mark.skipif(
    not _aliases_reach_the_function(),
    reason="this langchain-core (< 1.5.5) passes an aliased field to the tool's function "
    "under its alias: such a tool fails on a direct invoke too",
)
