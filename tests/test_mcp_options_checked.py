"""load_mcp_catalog's numbers, flags and connections are checked before any server starts.

A wrong type raises ``TypeError``, a wrong value ``ValueError``; each message names the option
(or the server and key), what was given and what is allowed, and the fix it gives works.
"""

from __future__ import annotations

import ast
import asyncio
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_servers import stdio

from langgraph_toolbudget import load_mcp_catalog
from langgraph_toolbudget.mcp import MCPRuntime, load_mcp_catalog_sync

MATH: Any = stdio("math_server.py")


def marking(marker: Path) -> Any:
    """A stdio connection whose process, if it ever starts, leaves ``marker`` behind."""
    code = f"open({str(marker)!r}, 'w').close()"
    return {"transport": "stdio", "command": sys.executable, "args": ["-c", code]}


def refused(
    connections: Any, error: type[Exception], needles: tuple[str, ...], **options: Any
) -> str:
    """The message of ``load_mcp_catalog(connections, **options)``, which must raise ``error``
    holding every needle."""
    with pytest.raises(error) as caught:
        asyncio.run(load_mcp_catalog(connections, **options))
    message = str(caught.value)
    for needle in needles:
        assert needle in message, (needle, message)
    return message


@pytest.mark.parametrize(
    ("option", "value", "error", "needles"),
    [
        ("connect_timeout_s", "10", TypeError, ("got '10' (str)", "connect_timeout_s=10.")),
        ("connect_timeout_s", -1, ValueError, ("seconds > 0", "got -1")),
        ("connect_timeout_s", 0, ValueError, ("seconds > 0", "got 0")),
        ("connect_timeout_s", math.nan, ValueError, ("finite", "got nan")),
        ("connect_timeout_s", None, TypeError, ("seconds > 0", "got None")),
        ("connect_timeout_s", True, TypeError, ("got True (bool)",)),
        ("heartbeat_s", "3", TypeError, ("or None (no ping)", "heartbeat_s=3.")),
        ("heartbeat_s", 0, ValueError, ("or None (no ping)", "got 0")),
        ("default_timeout_s", "3", TypeError, ("or None (no bound)", "default_timeout_s=3.")),
        ("default_timeout_s", math.inf, ValueError, ("finite", "got inf")),
        ("max_artifact_chars", -5, ValueError, ("integer >= 0 (characters)", "got -5")),
        ("max_artifact_chars", 1.5, TypeError, ("integer >= 0", "got 1.5 (float)")),
        ("max_description_chars", 0, ValueError, ("integer >= 1 (characters)", "got 0")),
        ("max_description_chars", 2000.0, TypeError, ("max_description_chars=2000.",)),
        ("max_instructions_chars", -1, ValueError, ("integer >= 1 (characters)",)),
        ("max_tool_schema_tokens", 0, ValueError, ("integer >= 1 (tokens), or None (no cap)",)),
        ("max_tool_schema_tokens", "4k", TypeError, ("got '4k' (str)",)),
        ("strict", "yes", TypeError, ("must be True or False, got 'yes'",)),
        ("tool_name_prefix", 1, TypeError, ("True or False, or None", "got 1 (int)")),
        ("handle_tool_errors", "no", TypeError, ("True or False, or None",)),
    ],
)
def test_a_bad_number_or_flag_option_raises_naming_it_before_any_server_starts(
    tmp_path: Path, option: str, value: Any, error: type[Exception], needles: tuple[str, ...]
) -> None:
    marker = tmp_path / "started"
    named = (f"load_mcp_catalog: option {option} must be", *needles)
    refused({"probe": marking(marker)}, error, named, **{option: value})
    with pytest.raises(error, match=f"load_mcp_catalog_sync: option {option} must be"):
        load_mcp_catalog_sync({"probe": marking(marker)}, **{option: value})
    assert not marker.exists()  # the server never started


def test_mcp_runtime_checks_the_options_it_takes() -> None:
    with pytest.raises(TypeError, match=r"MCPRuntime: option heartbeat_s must be .*got '1'"):
        MCPRuntime({}, heartbeat_s="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"MCPRuntime: option connect_timeout_s .*got -1"):
        MCPRuntime({}, connect_timeout_s=-1)
    with pytest.raises(ValueError, match=r"MCPRuntime: option max_artifact_chars .*got -5"):
        MCPRuntime({}, max_artifact_chars=-5)


async def test_the_fixes_the_option_messages_give_load_the_catalog() -> None:
    catalog = await load_mcp_catalog(
        {"math": MATH},
        connect_timeout_s=10,
        heartbeat_s=3,
        default_timeout_s=3,
        max_artifact_chars=0,
        max_tool_schema_tokens=None,
        max_description_chars=2000,
        strict=True,
        tool_name_prefix=None,
    )
    async with catalog:
        assert "add" in catalog.tools_in("math")
        assert catalog.get("add").timeout_s == 3  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("change", "error", "needles"),
    [
        (
            {"transport": "stdi0"},
            ValueError,
            ("'transport': 'stdi0' (str)", "did you mean 'stdio'?", "'streamable_http'"),
        ),
        ({"transport": None}, ValueError, ("has no 'transport': add 'transport': 'stdio'",)),
        ({"transport": 3}, TypeError, ("'transport': 3 (int)", "did you mean 'stdio'?")),
        (
            {"args": "server.py --port 8000"},
            TypeError,
            ("'args' as a list of strings", "'args': ['server.py', '--port', '8000']"),
        ),
        ({"args": None}, ValueError, ("has no 'args': add 'args': ['server.py']",)),
        ({"args": ["server.py", 8000]}, TypeError, ("its item [1] is an int",)),
        ({"command": ["python", "server.py"]}, TypeError, ("'command' as a string", "a list")),
        ({"environment": {}}, ValueError, ("the key 'environment'", "did you mean 'env'?")),
    ],
    ids=[
        "transport-typo",
        "no-transport",
        "transport-int",
        "args-string",
        "no-args",
        "args-int",
        "command-list",
        "unknown-key",
    ],
)
def test_a_bad_connection_raises_naming_the_server_and_key_before_it_starts(
    tmp_path: Path, change: dict[str, Any], error: type[Exception], needles: tuple[str, ...]
) -> None:
    marker = tmp_path / "started"
    connection = {**marking(marker), **change}
    connection = {k: v for k, v in connection.items() if v is not None}  # None: key left out
    refused({"probe": connection}, error, ("the connection of server 'probe'", *needles))
    assert not marker.exists()


def test_an_http_connection_needs_a_url_string() -> None:
    http = {"transport": "streamable_http"}
    refused(
        {"docs": http}, ValueError, ("server 'docs' (transport 'streamable_http') has no 'url'",)
    )
    refused({"docs": {**http, "url": 8000}}, TypeError, ("'url' as a string", "got an int"))
    refused(
        {"docs": {"url": "ws://localhost:8000/mcp"}},
        ValueError,
        ("has no 'transport': add 'transport': 'websocket'",),
    )


def test_the_args_a_message_gives_start_the_server() -> None:
    script = MATH["args"][0]
    message = refused({"math": {**MATH, "args": script}}, TypeError, ("'math'",))
    shown = re.search(r"e\.g\. 'args': (\[.*?\]): got", message)
    assert shown is not None, message
    fixed: Any = {**MATH, "args": ast.literal_eval(shown.group(1))}
    catalog = load_mcp_catalog_sync({"math": fixed}, strict=True)
    try:
        assert "add" in catalog.tools_in("math")
    finally:
        catalog.close()


def test_an_args_string_is_shown_without_its_credentials() -> None:
    args = "server.py --api-key sk-abc123secretvalue --port 8000"
    message = refused({"math": {**MATH, "args": args}}, TypeError, ("'--api-key', '***'",))
    assert "sk-abc123" not in message


def test_one_connection_without_a_server_name_is_told_to_name_it() -> None:
    message = refused(
        MATH,
        TypeError,
        ("looks like one connection", "{'my_server': {'transport': ..., 'command': ..."),
    )
    assert "server 'transport'" not in message
    assert MATH["command"] not in message  # a connection's values are never shown
    catalog = load_mcp_catalog_sync({"my_server": MATH}, strict=True)  # the fix, literally
    try:
        assert "add" in catalog.tools_in("my_server")
    finally:
        catalog.close()


def test_the_sync_loader_names_itself_and_a_catalog_class_is_checked() -> None:
    """Review 51b's follow-ups: the sync loader's connection errors named the async one, and
    ``catalog_cls=dict`` started the servers, then failed with an unrelated TypeError."""
    from langgraph_toolbudget.mcp import load_mcp_catalog_sync

    bad = {"math": {"transport": "stdi0", "command": "python", "args": []}}
    with pytest.raises(ValueError, match=r"^load_mcp_catalog_sync: the connection of server"):
        load_mcp_catalog_sync(bad)
    from langchain_mcp_adapters.client import MultiServerMCPClient

    with pytest.raises(ValueError, match=r"^load_mcp_catalog_sync: the connection of server"):
        load_mcp_catalog_sync(MultiServerMCPClient(bad))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^load_mcp_catalog_sync: option catalog_cls must be"):
        load_mcp_catalog_sync({}, catalog_cls=dict)  # type: ignore[typeddict-item]
