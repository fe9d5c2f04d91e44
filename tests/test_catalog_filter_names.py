"""``allowed_tools`` / ``allowed_servers`` entries that name nothing: a name (no wildcard)
is a typo that would drop the tool silently, refused with the closest real names; a pattern
matching nothing is warned of."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.tools import tool

from langgraph_toolbudget import ToolCatalog


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


TOOLS = [get_weather, send_email]
META = {"get_weather": {"server": "weather"}, "send_email": {"server": "mail"}}


def build(**kwargs: object) -> ToolCatalog:
    return ToolCatalog.from_tools(TOOLS, tool_metadata=META, **kwargs)  # type: ignore[arg-type]


def test_an_allowed_tools_name_of_no_tool_is_refused_naming_the_closest() -> None:
    with pytest.raises(ValueError, match=r"allowed_tools names \['get_wether'\]") as info:
        build(allowed_tools=["get_wether", "send_email"])
    assert "'get_wether' -> 'get_weather'" in str(info.value)
    with pytest.raises(ValueError, match=r"\['mail:get_weather'\].*'weather:get_weather'"):
        build(allowed_tools=["mail:get_weather"])  # a real tool, of another server


def test_an_allowed_servers_name_of_no_server_is_refused_naming_the_closest() -> None:
    with pytest.raises(ValueError, match=r"allowed_servers names \['wheather'\]") as info:
        build(allowed_servers=["wheather"])
    assert "'wheather' -> 'weather'" in str(info.value)
    with pytest.raises(ValueError, match="no tool has a server"):
        ToolCatalog.from_tools(TOOLS, allowed_servers=["weather"])


def test_a_pattern_matching_no_tool_is_warned_of() -> None:
    with pytest.warns(UserWarning, match=r"\['wheather:\*', 'x\?'\] match no tool"):
        catalog = build(allowed_tools=["wheather:*", "x?", "send_email"])
    assert catalog.tool_names == ["send_email"]


def test_filters_that_name_real_tools_pass_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        catalog = build(allowed_tools=["weather:get_*", "send_email"], allowed_servers=["mail"])
        assert catalog.tool_names == ["get_weather", "send_email"]
        assert build(allowed_servers=[]).tool_names == []  # nothing named: nothing kept
