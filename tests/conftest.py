"""Shared fixtures: a realistic catalog of real LangChain tools in several categories.

The tools are real ``@tool`` functions with tiny bodies over in-memory data, one
MCP-like server per category (``github``, ``slack``, ``weather``, ``files``,
``database``, ``projects``) plus ``ask_human`` in the special ``human``
category. ``get_file_contents`` sits in both ``github`` and ``files``.

Fixtures hand out fresh copies of the tools (``make_tools``), so a test may
change a tool's ``metadata`` without leaking into other tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool

# The session's PostgreSQL server and a fresh database per test (tests/pg.py).
from pg import pg_server, pg_url, pgvector_server, pgvector_url  # noqa: F401  (fixtures, registered by being imported here)

from langgraph_toolbudget import ToolCatalog

# --- in-memory "backends" ----------------------------------------------------------------

_ISSUES: dict[str, list[dict[str, Any]]] = {"acme/app": [{"number": 1, "title": "Crash on start"}]}
_CHANNELS = {"general": ["hello"], "dev": ["build is green"]}
_FILES = {"README.md": "# acme", "docs/guide.md": "guide"}
_TABLES = {"orders": ["id", "amount", "customer"], "customers": ["id", "name"]}
_PROJECTS: dict[str, dict[str, Any]] = {"apollo": {"owner": "ana", "tasks": {}}}
_CITIES = {"paris": (18, "cloudy"), "lima": (22, "sunny")}

# --- github ------------------------------------------------------------------------------


@tool
def create_issue(repo: str, title: str, body: str = "") -> str:
    """Create a new issue in a GitHub repository."""
    issues = _ISSUES.setdefault(repo, [])
    issues.append({"number": len(issues) + 1, "title": title, "body": body})
    return f"created {repo}#{len(issues)}"


@tool
def list_issues(repo: str, state: str = "open") -> list[str]:
    """List issues of a GitHub repository, filtered by state (open or closed)."""
    return [i["title"] for i in _ISSUES.get(repo, []) if state in ("open", "all")]


@tool
def get_issue(repo: str, number: int) -> dict:
    """Get one GitHub issue by its number, with its title and body."""
    return next(i for i in _ISSUES.get(repo, []) if i["number"] == number)


@tool
def add_issue_comment(repo: str, number: int, comment: str) -> str:
    """Add a comment to a GitHub issue."""
    return f"commented on {repo}#{number}: {comment[:40]}"


@tool
def list_pull_requests(repo: str) -> list[str]:
    """List open pull requests of a GitHub repository."""
    return [f"{repo}: bump version"]


@tool
def create_pull_request(repo: str, head: str, base: str, title: str) -> str:
    """Open a pull request from a head branch into a base branch of a GitHub repository."""
    return f"opened PR {head} -> {base} in {repo}: {title}"


@tool
def merge_pull_request(repo: str, number: int) -> str:
    """Merge a pull request once its checks pass."""
    return f"merged {repo}#{number}"


@tool
def get_file_contents(repo: str, path: str) -> str:
    """Get the contents of a file in a GitHub repository at a given path."""
    return _FILES.get(path, "")


@tool
def list_commits(repo: str, branch: str = "main") -> list[str]:
    """List recent commits on a branch of a GitHub repository."""
    return [f"{branch}: initial commit"]


@tool
def search_repositories(keyword: str) -> list[str]:
    """Search GitHub repositories by keyword."""
    return [r for r in _ISSUES if keyword.lower() in r]


# --- slack -------------------------------------------------------------------------------


@tool
def send_message(channel: str, text: str) -> str:
    """Send a message to a Slack channel."""
    _CHANNELS.setdefault(channel, []).append(text)
    return f"sent to #{channel}"


@tool
def list_channels() -> list[str]:
    """List the Slack channels the bot can post to."""
    return sorted(_CHANNELS)


@tool
def read_channel_history(channel: str, limit: int = 20) -> list[str]:
    """Read the latest messages posted in a Slack channel."""
    return _CHANNELS.get(channel, [])[-limit:]


@tool
def add_reaction(channel: str, timestamp: str, emoji: str) -> str:
    """Add an emoji reaction to a Slack message."""
    return f":{emoji}: on {channel}@{timestamp}"


# --- weather -----------------------------------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """Get current weather conditions for a city or location."""
    temp, sky = _CITIES.get(city.lower(), (15, "unknown"))
    return f"{city}: {temp}C, {sky}"


@tool
def weather_forecast(city: str, days: int = 7) -> list[str]:
    """Get the weather forecast for a city for the next days."""
    temp, sky = _CITIES.get(city.lower(), (15, "unknown"))
    return [f"day {d + 1}: {temp + d}C {sky}" for d in range(days)]


@tool
def get_air_quality(city: str) -> int:
    """Get the air quality index of a city, as reported by local weather stations."""
    return 42 if city.lower() in _CITIES else 0


# --- files -------------------------------------------------------------------------------


@tool
def read_file(path: str) -> str:
    """Read a text file from the workspace and return its contents."""
    return _FILES[path]


@tool
def write_file(path: str, content: str) -> str:
    """Write text to a file in the workspace, replacing it."""
    _FILES[path] = content
    return f"wrote {len(content)} characters to {path}"


@tool
def list_files(folder: str = ".") -> list[str]:
    """List the files in a workspace folder."""
    prefix = "" if folder in (".", "") else folder.rstrip("/") + "/"
    return sorted(p for p in _FILES if p.startswith(prefix))


@tool
def create_folder(path: str) -> str:
    """Create a new folder in the workspace."""
    return f"created {path.rstrip('/')}/"


@tool
def delete_file(path: str) -> str:
    """Delete a file from the workspace."""
    return "deleted" if _FILES.pop(path, None) is not None else "no such file"


# --- database ----------------------------------------------------------------------------


@tool
def run_database_query(sql: str) -> list[dict]:
    """Run a read-only SQL query against the analytics database and return the rows."""
    table = sql.lower().split("from")[-1].split()[0] if "from" in sql.lower() else ""
    return [{"table": table, "columns": _TABLES.get(table, [])}]


@tool
def list_tables() -> list[str]:
    """List the tables of the analytics database."""
    return sorted(_TABLES)


@tool
def describe_table(table: str) -> list[str]:
    """Describe the columns and types of a database table."""
    return _TABLES.get(table, [])


# --- projects ----------------------------------------------------------------------------


@tool
def create_project(name: str, owner: str) -> str:
    """Create a new project with an owner."""
    _PROJECTS[name] = {"owner": owner, "tasks": {}}
    return f"project {name} created"


@tool
def list_projects() -> list[str]:
    """List all projects and their owners."""
    return [f"{n} ({p['owner']})" for n, p in sorted(_PROJECTS.items())]


@tool
def add_task(project: str, title: str) -> int:
    """Add a task to a project board."""
    tasks = _PROJECTS[project]["tasks"]
    tasks[len(tasks) + 1] = {"title": title, "status": "todo"}
    return len(tasks)


@tool
def update_task(project: str, task_id: int, status: str) -> str:
    """Update the status of a task (todo, doing, done)."""
    _PROJECTS[project]["tasks"][task_id]["status"] = status
    return f"task {task_id} is {status}"


@tool
def list_tasks(project: str) -> list[str]:
    """List the tasks of a project with their status."""
    return [f"{t['title']}: {t['status']}" for t in _PROJECTS[project]["tasks"].values()]


# --- human -------------------------------------------------------------------------------


@tool
def ask_human(question: str) -> str:
    """Ask the human user a clarifying question and wait for the answer."""
    return f"(the user was asked: {question})"


# --- the catalog layout ------------------------------------------------------------------

SERVER_TOOLS: dict[str, list[BaseTool]] = {
    "github": [
        create_issue,
        list_issues,
        get_issue,
        add_issue_comment,
        list_pull_requests,
        create_pull_request,
        merge_pull_request,
        get_file_contents,
        list_commits,
        search_repositories,
    ],
    "slack": [send_message, list_channels, read_channel_history, add_reaction],
    "weather": [get_weather, weather_forecast, get_air_quality],
    "files": [read_file, write_file, list_files, create_folder, delete_file],
    "database": [run_database_query, list_tables, describe_table],
    "projects": [create_project, list_projects, add_task, update_task, list_tasks],
}
"""Server -> its tools, in catalog order."""

HUMAN_TOOLS: list[BaseTool] = [ask_human]

CATEGORIES: dict[str, list[str]] = {
    **{server: [t.name for t in tools] for server, tools in SERVER_TOOLS.items()},
    "human": ["ask_human"],
}
CATEGORIES["files"] = [*CATEGORIES["files"], "get_file_contents"]
"""Category -> tool names. ``get_file_contents`` is in ``github`` and ``files``."""

CATEGORY_DESCRIPTIONS: dict[str, str] = {
    "github": "GitHub repositories: issues, pull requests, commits and file contents",
    "slack": "Slack messaging: channels, messages and reactions",
    "weather": "Weather conditions, forecasts and air quality for cities",
    "files": "Workspace files and folders: read, write, list, delete",
    "database": "The analytics SQL database: tables, columns and queries",
    "projects": "Project management: projects, tasks and their status",
    "human": "Ask the human user for input",
}

META_TOOL_NAMES = frozenset({"search_tools", "add_tool", "show_all_tools", "request_more_tools"})
"""Names the agent's meta-tools use; they never belong in ``selected_tools``."""


def make_tools() -> list[BaseTool]:
    """Fresh copies of every catalog tool, each with ``{"server": ...}`` in its metadata."""
    out: list[BaseTool] = []
    for server, tools in SERVER_TOOLS.items():
        out.extend(t.model_copy(update={"metadata": {"server": server}}) for t in tools)
    out.extend(t.model_copy(update={"metadata": {}}) for t in HUMAN_TOOLS)
    return out


def build_catalog(tools: list[BaseTool] | None = None, **kwargs: Any) -> ToolCatalog:
    """The standard catalog; keyword arguments go to :meth:`ToolCatalog.from_tools`."""
    kwargs.setdefault("categories", CATEGORIES)
    kwargs.setdefault("category_descriptions", CATEGORY_DESCRIPTIONS)
    return ToolCatalog.from_tools(tools if tools is not None else make_tools(), **kwargs)


@pytest.fixture
def tools() -> list[BaseTool]:
    """Fresh copies of the catalog's real tools."""
    return make_tools()


@pytest.fixture
def categories() -> dict[str, list[str]]:
    """Category -> tool names (a copy)."""
    return {c: list(names) for c, names in CATEGORIES.items()}


@pytest.fixture
def category_descriptions() -> dict[str, str]:
    return dict(CATEGORY_DESCRIPTIONS)


@pytest.fixture
def catalog() -> ToolCatalog:
    """The standard catalog: 31 tools, 7 categories (one of them ``human``)."""
    return build_catalog()


@pytest.fixture
def make_catalog() -> Callable[..., ToolCatalog]:
    """A factory: ``make_catalog(tool_metadata=..., allowed_servers=...)``."""
    return build_catalog


# --- the fast loop: `pytest -m "not slow"` ------------------------------------------------

SLOW_MODULES = {
    "test_context_server": "langgraph dev, the CLI and the MCP context server as processes",
    "test_server": "langgraph dev serving the demo graphs",
    "test_notebooks": "the notebooks, executed headless in a Jupyter kernel",
    "test_toolnode_suite": "downloads langgraph-prebuilt's sdist and runs its ToolNode tests",
    "test_multilingual": "a real multilingual embedding model",
    "test_mcp": "real MCP servers over stdio, SSE and HTTP, killed and restarted",
    "test_mcp_aliases": "real MCP servers, one of them down",
    "test_typing": "mypy --strict over a user's snippet",
    "test_mcp_faults": "MCP servers that hang, crash and time out",
    "test_mcp_offload": "real MCP servers",
    "test_codemode_mcp": "real MCP servers called from CodeMode programs",
    "test_mcp_stdio": "real MCP server processes",
    "test_mcp_trust": "hostile MCP server processes",
    "test_persistence": "a graph restarted in a new process",
    "test_jq_sandbox": "jq worker processes run to their time and memory limits",
    "test_fuzz": "property-based runs over hundreds of generated batches and replies",
}
"""Test modules that start servers, processes, kernels or models, or generate hundreds of
cases: slow, marked by module."""
SLOW_FIXTURES = {"pg_server", "pg_url", "pgvector_server", "pgvector_url"}
"""Fixtures that start the test session's PostgreSQL: every test using one is slow."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tests; leave the long fuzz runs out unless `-m` names them."""
    wants_fuzz = "fuzz" in (config.getoption("markexpr") or "")
    kept, dropped = [], []
    for item in items:
        module = item.module.__name__ if isinstance(item, pytest.Function) else ""
        if module in SLOW_MODULES or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("fuzz") and not wants_fuzz:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
