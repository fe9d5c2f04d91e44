"""A built-in example catalog: 40 working tools (39 in 8 categories, plus ask_human), offline.

Its one reason to change: the example tools and their categories.

The tools act on an in-memory workspace (issues, messages, events, files, a
SQLite database, tasks, mail), so demos, notebooks and the LangGraph server
example show real tool results without any network or account.

Example:
    ```python
    from langgraph_toolbudget.demo.example_catalog import build_example_catalog
    catalog = build_example_catalog()
    catalog.categories  # ['github', 'slack', 'calendar', 'weather', 'files', ...]
    ```
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

from langchain_core.tools import BaseTool, tool

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.demo.workspace import (
    CLIMATE,
    Workspace,
    calculate_expression,
    channel_name,
    next_number,
)

__all__ = ["CATEGORY_DESCRIPTIONS", "Workspace", "build_example_catalog", "example_tools"]

CATEGORY_DESCRIPTIONS = {
    "github": "GitHub repositories: issues, pull requests, files and comments",
    "slack": "Slack messaging: channels, messages, reactions and users",
    "calendar": "Calendar: meetings, events, availability and invitations",
    "weather": "Weather: current conditions, forecasts and air quality for cities",
    "files": "Local files and folders: read, write, list, search and delete",
    "database": "SQL database: tables, schemas and queries",
    "projects": "Project management: projects, tasks, assignees and status",
    "email": "Email: send, search and read messages in the mailbox",
}


def example_tools(ws: Workspace | None = None) -> tuple[list[BaseTool], dict[str, list[str]]]:
    """The example tools bound to a workspace, and the category -> tool names mapping."""
    ws = ws or Workspace()

    # --- github -------------------------------------------------------------------------
    @tool
    def create_issue(repo: str, title: str, body: str = "") -> str:
        """Create a new issue in a GitHub repository."""
        with ws.lock:
            number = next_number(ws.issues)
            ws.add(
                ws.issues,
                {"number": number, "repo": repo, "title": title, "body": body, "state": "open"},
            )
        return f"Created issue #{number} in {repo}: {title}"

    @tool
    def list_issues(repo: str, state: str = "open") -> str:
        """List the issues of a GitHub repository, filtered by state (open or closed)."""
        found = [i for i in ws.issues if i["repo"] == repo and i["state"] == state]
        return json.dumps(found) if found else f"No {state} issues in {repo}."

    @tool
    def close_issue(repo: str, number: int) -> str:
        """Close an issue of a GitHub repository by its number."""
        for issue in ws.issues:
            if issue["repo"] == repo and issue["number"] == number:
                issue["state"] = "closed"
                return f"Closed issue #{number} in {repo}."
        raise ValueError(f"no issue #{number} in {repo}")

    @tool
    def comment_on_issue(repo: str, number: int, comment: str) -> str:
        """Add a comment to a GitHub issue or pull request."""
        return f"Commented on {repo}#{number}: {comment}"

    @tool
    def create_pull_request(repo: str, title: str, head: str, base: str = "main") -> str:
        """Open a pull request in a GitHub repository from a branch."""
        with ws.lock:
            number = next_number(ws.pulls)
            pull = {"number": number, "repo": repo, "title": title, "head": head, "base": base}
            ws.add(ws.pulls, pull)
        return f"Opened PR #{number} {head} -> {base} in {repo}"

    @tool
    def list_pull_requests(repo: str) -> str:
        """List the open pull requests of a GitHub repository."""
        found = [p for p in ws.pulls if p["repo"] == repo]
        return json.dumps(found) if found else f"No open pull requests in {repo}."

    @tool
    def get_file_contents(repo: str, path: str) -> str:
        """Get the contents of a file in a GitHub repository."""
        return f"# {path} in {repo}\nprint('hello')\n"

    # --- slack --------------------------------------------------------------------------
    @tool
    def send_message(channel: str, text: str) -> str:
        """Send (post) a message to a Slack channel such as #general: tell the team something."""
        ws.add(ws.channel(channel), text)
        return f"Sent to #{channel_name(channel)}: {text}"

    @tool
    def list_channels() -> list[str]:
        """List the Slack channels of the workspace."""
        return sorted(ws.messages)

    @tool
    def read_channel_history(channel: str, limit: int = 10) -> str:
        """Read the latest messages of a Slack channel: what people said there."""
        channel = channel_name(channel)
        return "\n".join(ws.messages.get(channel, [])[-limit:]) or f"#{channel} has no messages."

    @tool
    def add_reaction(channel: str, emoji: str) -> str:
        """Add an emoji reaction to the latest message of a Slack channel."""
        return f"Reacted :{emoji}: in #{channel_name(channel)}"

    @tool
    def create_channel(name: str) -> str:
        """Create a new Slack channel."""
        ws.channel(name)
        return f"Created #{channel_name(name)}"

    # --- calendar -----------------------------------------------------------------------
    @tool
    def create_event(
        title: str, day: str, start: str = "09:00", attendees: list[str] | None = None
    ) -> str:  # noqa: E501
        """Create a calendar event or meeting on a day (YYYY-MM-DD) at a start time."""
        event = {"title": title, "day": day, "start": start, "attendees": attendees or []}
        ws.add(ws.events, event)
        return f"Scheduled '{title}' on {day} at {start}"

    @tool
    def list_events(day: str) -> str:
        """List the calendar events and meetings of a day (YYYY-MM-DD)."""
        found = [e for e in ws.events if e["day"] == day]
        return json.dumps(found) if found else f"No events on {day}."

    @tool
    def find_free_slot(day: str, duration_minutes: int = 30) -> str:
        """Find a free time slot in the calendar on a day for a meeting of a given length."""
        busy = {e["start"] for e in ws.events if e["day"] == day}
        for hour in range(9, 18):
            slot = f"{hour:02d}:00"
            if slot not in busy:
                return f"{day} {slot} is free for {duration_minutes} minutes"
        return f"No free slot on {day}"

    @tool
    def cancel_event(title: str) -> str:
        """Cancel a calendar event by its title."""
        before = len(ws.events)
        ws.events[:] = [e for e in ws.events if e["title"] != title]
        return f"Cancelled {before - len(ws.events)} event(s) named '{title}'"

    @tool
    def next_weekday(weekday: str) -> str:
        """Date (YYYY-MM-DD) of the next given weekday, e.g. 'monday', counted from 2026-01-01."""
        names = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
        start = date(2026, 1, 1)
        delta = (names.index(weekday.lower()) - start.weekday()) % 7 or 7
        return (start + timedelta(days=delta)).isoformat()

    # --- weather ------------------------------------------------------------------------
    def _climate(city: str) -> tuple[int, str, int]:
        key = city.lower().strip()
        if key not in CLIMATE:
            raise ValueError(f"no weather data for {city!r}; known cities: {sorted(CLIMATE)}")
        return CLIMATE[key]

    @tool
    def get_weather(city: str) -> dict[str, Any]:
        """Get the current weather in a city: temperature (how warm or cold), sunny or rainy."""
        temp, sky, humidity = _climate(city)
        return {"city": city, "temperature_c": temp, "conditions": sky, "humidity": humidity}

    @tool
    def weather_forecast(city: str, days: int = 3) -> list[dict[str, Any]]:
        """Get the weather forecast of a city for the next days."""
        temp, sky, _ = _climate(city)
        return [
            {"day": d + 1, "temperature_c": temp + d % 3 - 1, "conditions": sky}
            for d in range(days)
        ]  # noqa: E501

    @tool
    def air_quality(city: str) -> str:
        """Get the air quality index (pollution, smog) of a city."""
        _, _, humidity = _climate(city)
        return f"AQI in {city}: {20 + humidity // 2}"

    @tool
    def convert_temperature(value: float, to_unit: str = "fahrenheit") -> float:
        """Convert a temperature between celsius and fahrenheit."""
        return (
            round(value * 9 / 5 + 32, 1)
            if to_unit.lower().startswith("f")
            else round((value - 32) * 5 / 9, 1)
        )  # noqa: E501

    # --- files --------------------------------------------------------------------------
    @tool
    def read_file(path: str) -> str:
        """Read a text file from the local workspace."""
        if path not in ws.files:
            raise FileNotFoundError(f"{path} does not exist; list_files shows what does")
        return ws.files[path]

    @tool
    def write_file(path: str, content: str) -> str:
        """Write (create, save or overwrite) a text file in the local workspace."""
        ws.put(ws.files, path, content)
        return f"Wrote {len(content)} characters to {path}"

    @tool
    def list_files(folder: str = "/") -> list[str]:
        """List the files in a folder of the local workspace."""
        return sorted(p for p in ws.files if p.startswith(folder))

    @tool
    def search_files(text: str) -> list[str]:
        """Search the contents of local files for a piece of text."""
        return sorted(p for p, body in ws.files.items() if text.lower() in body.lower())

    @tool
    def delete_file(path: str) -> str:
        """Delete a file from the local workspace."""
        if ws.files.pop(path, None) is None:
            raise FileNotFoundError(f"{path} does not exist")
        return f"Deleted {path}"

    # --- database -----------------------------------------------------------------------
    @tool
    def run_sql_query(query: str) -> list[list[Any]]:
        """Run a read-only SQL query (SELECT) on the database and return the rows."""
        if not query.lstrip().lower().startswith("select"):
            raise ValueError("only SELECT queries are allowed; use a SELECT statement")
        with ws.lock:
            return [list(row) for row in ws.db.execute(query).fetchall()]

    @tool
    def list_tables() -> list[str]:
        """List the tables of the SQL database."""
        with ws.lock:
            rows = ws.db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        return sorted(r[0] for r in rows)

    @tool
    def describe_table(table: str) -> list[str]:
        """Describe the columns (schema) of a database table."""
        with ws.lock:
            rows = ws.db.execute(f"PRAGMA table_info({table!r})").fetchall()
        if not rows:
            raise ValueError(f"no table {table!r}; list_tables shows the tables")
        return [f"{r[1]} {r[2]}" for r in rows]

    @tool
    def count_rows(table: str) -> int:
        """Count the rows of a database table: how many records (orders, customers...) it holds."""
        describe_table.invoke({"table": table})
        with ws.lock:
            return int(ws.db.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0])

    # --- projects -----------------------------------------------------------------------
    @tool
    def create_project(name: str) -> str:
        """Create a new project."""
        ws.add(ws.projects, name)
        return f"Created project {name}"

    @tool
    def list_projects() -> list[str]:
        """List all projects."""
        return list(ws.projects)

    @tool
    def add_task(project: str, title: str, assignee: str = "") -> str:
        """Add a task to a project, optionally assigned to someone."""
        task = {"project": project, "title": title, "assignee": assignee, "done": False}
        ws.add(ws.tasks, task)
        return f"Added task '{title}' to {project}"

    @tool
    def update_task_status(title: str, done: bool) -> str:
        """Mark a project task as done or not done."""
        for task in ws.tasks:
            if task["title"] == title:
                task["done"] = done
                return f"Task '{title}' is now {'done' if done else 'open'}"
        raise ValueError(f"no task titled {title!r}")

    @tool
    def list_tasks(project: str) -> str:
        """List the tasks of a project with their status and assignee."""
        return json.dumps([t for t in ws.tasks if t["project"] == project])

    # --- email --------------------------------------------------------------------------
    @tool
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email to a recipient."""
        ws.add(ws.outbox, {"to": to, "subject": subject, "body": body})
        return f"Email sent to {to}: {subject}"

    @tool
    def search_email(query: str) -> list[str]:
        """Search the mailbox for emails whose subject or body contains the query."""
        return [
            m["subject"] for m in ws.outbox if query.lower() in (m["subject"] + m["body"]).lower()
        ]  # noqa: E501

    @tool
    def read_email(subject: str) -> str:
        """Read an email by its subject."""
        for m in ws.outbox:
            if m["subject"] == subject:
                return f"To: {m['to']}\nSubject: {m['subject']}\n\n{m['body']}"
        raise ValueError(f"no email with subject {subject!r}")

    @tool
    def calculate(expression: str) -> float:
        """Evaluate an arithmetic expression such as '2 * (3 + 4)' or 'sqrt(16)'."""
        return calculate_expression(expression)

    @tool
    def ask_human(question: str) -> str:
        """Ask the human user a clarifying question (always available)."""
        return f"(question for the user) {question}"

    categories = {
        "github": ["create_issue", "list_issues", "close_issue", "comment_on_issue",
                   "create_pull_request", "list_pull_requests", "get_file_contents"],
        "slack": ["send_message", "list_channels", "read_channel_history", "add_reaction",
                  "create_channel"],
        "calendar": ["create_event", "list_events", "find_free_slot", "cancel_event",
                     "next_weekday"],
        "weather": ["get_weather", "weather_forecast", "air_quality", "convert_temperature"],
        "files": ["read_file", "write_file", "list_files", "search_files", "delete_file"],
        "database": ["run_sql_query", "list_tables", "describe_table", "count_rows", "calculate"],
        "projects": ["create_project", "list_projects", "add_task", "update_task_status",
                     "list_tasks"],
        "email": ["send_email", "search_email", "read_email"],
        "human": ["ask_human"],
    }  # fmt: skip
    tools = [
        create_issue, list_issues, close_issue, comment_on_issue, create_pull_request,
        list_pull_requests, get_file_contents, send_message, list_channels,
        read_channel_history, add_reaction, create_channel, create_event, list_events,
        find_free_slot, cancel_event, next_weekday, get_weather, weather_forecast, air_quality,
        convert_temperature, read_file, write_file, list_files, search_files, delete_file,
        run_sql_query, list_tables, describe_table, count_rows, create_project, list_projects,
        add_task, update_task_status, list_tasks, send_email, search_email, read_email,
        calculate, ask_human,
    ]  # fmt: skip
    return tools, categories


def build_example_catalog(workspace: Workspace | None = None, **options: Any) -> ToolCatalog:
    """The example catalog: 39 tools in 8 categories plus ``ask_human`` (category ``human``).

    Read-only tools are marked ``is_pure`` (in group ``reads``, up to 4 at once),
    so ``parallel_safe`` runs them concurrently.

    Args:
        workspace: the data the tools act on (a fresh one by default).
        **options: passed to :meth:`ToolCatalog.from_tools` (filters, ...).
    """
    tools, categories = example_tools(workspace)
    pure = {"list_issues", "list_pull_requests", "get_file_contents", "list_channels",
            "read_channel_history", "list_events", "get_weather", "weather_forecast",
            "air_quality", "read_file", "list_files", "search_files", "list_tables",
            "describe_table", "list_projects", "list_tasks", "search_email"}  # fmt: skip
    metadata = {
        name: {"is_pure": True, "concurrency_group": "reads", "max_concurrency": 4} for name in pure
    }
    metadata.update(options.pop("tool_metadata", {}) or {})
    return ToolCatalog.from_tools(
        tools,
        categories=categories,
        category_descriptions={**CATEGORY_DESCRIPTIONS, "human": "Ask the user"},
        tool_metadata=metadata,
        **options,
    )
