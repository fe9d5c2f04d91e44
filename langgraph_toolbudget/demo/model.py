"""The demo chat model: a deterministic, rule-based stand-in for a real model.

Its one reason to change: the demo model's rules.

Key Components:
    - :class:`DemoChatModel`: a stateless rule-based model (:func:`demo_reply`):
      it calls the visible tool that fits the user's request, or else searches and
      loads one with the meta-tools, with arguments built from its schema, then answers. The offline
      demo, the notebooks and the LangGraph server graphs run it when no real
      model is configured. It is not a test fake: tests script their models
      with :class:`langgraph_toolbudget.testing.ScriptedChatModel`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool

from langgraph_toolbudget.core.intent import message_text
from langgraph_toolbudget.core.meta import ADD_TOOL, META_TOOL_NAMES, SEARCH_TOOLS

__all__ = ["DemoChatModel", "demo_arguments", "demo_reply"]


_STOP_WORDS_TEXT = """
a an and any are as at be by can could do does for from get give how i in into is it its let me
my of on or our please show some tell than that the their them then there these this to up us
want was we what whats when where which who will with would you your
"""
_STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MAX_ANSWER_CHARS = 400
_SYNONYMS = {
    "post": "send",
    "tell": "send",
    "notify": "send",
    "schedule": "create",
    "book": "create",
    "remove": "delete",
    "find": "search",
    "look": "search",
}


_SCHEMAS_CACHE_SIZE = 1024
_schemas: dict[int, tuple[Any, str, str, dict[str, Any]]] = {}


def _openai_schema(tool: Any) -> dict[str, Any]:
    """``convert_to_openai_tool``, kept per tool object: a served graph binds the same catalog
    tools on every model call, and converting them cost more than the rest of the reply."""
    name, description = getattr(tool, "name", ""), getattr(tool, "description", "")
    hit = _schemas.get(id(tool))
    if hit is not None and hit[0] is tool and hit[1:3] == (name, description):
        return hit[3]
    schema = convert_to_openai_tool(tool)
    if len(_schemas) >= _SCHEMAS_CACHE_SIZE:
        _schemas.clear()
    _schemas[id(tool)] = (tool, name, description, schema)
    return schema


def _keywords(text: str) -> list[str]:
    # Values (email addresses, paths, repo names) are arguments, not words about the task.
    text = re.sub(r"\S+@\S+|\S*/\S*", " ", text.lower().replace("'", ""))
    out = []
    for w in re.findall(r"[a-z][a-z0-9]+", text):
        if w in _STOP_WORDS or len(w) < 3:
            continue
        if len(w) > 4 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]  # "issues" -> "issue": a regex prefix that still matches both
        out.append(w)
        if w in _SYNONYMS:
            out.append(_SYNONYMS[w])
    return list(dict.fromkeys(out))


def _relevance(keywords: Sequence[str], name: str, description: str) -> int:
    name_words = [n for n in re.split(r"[_\W]+", name.lower()) if n]
    # Keywords are [a-z0-9] words: a word of the description starting with one is what
    # \b<kw> would find, without a pattern per query word in re's cache.
    text_words = re.findall(r"\w+", description.lower())
    score = 0
    for kw in keywords:
        if kw in name_words:
            score += 3
        elif any(min(len(n), len(kw)) >= 4 and (n.startswith(kw) or kw.startswith(n))
                 for n in name_words):  # fmt: skip
            score += 2
        elif any(w.startswith(kw) for w in text_words):
            score += 1
    return score


def _string_value(prop: str, query: str) -> str:
    """A plausible value for a string argument, taken from the query where it can be."""
    key = prop.lower()
    patterns = [
        (("path", "file", "folder"), r"(/[\w./-]+)", "/notes/todo.md"),
        (("repo", "repository"), r"\b([\w-]+/[\w.-]+)\b", "demo/app"),
        (("channel",), r"#([\w-]+)", "general"),
        (("to", "email", "recipient"), r"([\w.+-]+@[\w-]+\.[\w.]+)", "ada@example.com"),
        (("day", "date"), r"(\d{4}-\d{2}-\d{2})", "2026-01-05"),
        (("start", "time"), r"\b(\d{1,2}:\d{2})\b", "09:00"),
        (("expression",), r"([\d.]+(?:\s*[-+*/]\s*[\d.()]+)+)", "1 + 1"),
        (("emoji",), r":([\w+-]+):", "thumbsup"),
    ]
    for names, pattern, default in patterns:
        if any(key == n or key.endswith(f"_{n}") for n in names):
            match = re.search(pattern, query)
            return match.group(1) if match else default
    if key == "weekday":
        return next((d for d in _WEEKDAYS if d in query.lower()), "monday")
    if key in ("city", "location", "place", "name", "person", "project", "assignee"):
        capitalised = re.findall(r"(?<!^)(?<![.?!]\s)\b([A-Z][a-z]+)\b", query)
        fallback = {"city": "Paris", "location": "Paris", "place": "Paris"}.get(key, "demo")
        return capitalised[0] if capitalised else fallback
    if key == "table":
        return "orders"
    quoted = re.search(r"[\"']([^\"']+)[\"']", query)
    return quoted.group(1) if quoted else query


def demo_arguments(schema: dict[str, Any], query: str) -> dict[str, Any]:
    """Arguments for a tool call built from the tool's JSON schema and the user's query.

    Only required arguments are filled: strings from the query (a city, a path, a
    ``#channel``, an email address, a date...) or a plausible default, numbers from
    the query's numbers in order (else 1), booleans ``True``, enums their first value.

    Args:
        schema: the tool's JSON schema (``parameters`` of an OpenAI tool).
        query: the user's message.

    Returns:
        The argument dict.
    """
    props = schema.get("properties", {}) or {}
    args: dict[str, Any] = {}
    numbers = iter(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", query))
    for name in schema.get("required", []) or []:
        spec = props.get(name, {}) or {}
        kind = spec.get("type")
        if spec.get("enum"):
            args[name] = spec["enum"][0]
        elif kind in ("integer", "number"):
            number = next(numbers, "1")  # the query's numbers, in order
            args[name] = float(number) if "." in number else int(number)
        elif kind == "boolean":
            args[name] = True
        elif kind == "array":
            args[name] = [_string_value(name.rstrip("s"), query)]
        elif kind == "object":
            args[name] = {}
        else:
            args[name] = _string_value(name, query)
    return args


def _tool_name(schema: dict[str, Any]) -> str:
    return schema.get("function", schema).get("name", "")


def _tool_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    return schema.get("function", schema).get("parameters", {}) or {}


_CLEAR_MATCH = 3
"""The relevance (:func:`_relevance`) a visible tool needs to be called without a search: a
keyword is a word of its name, or a keyword is part of one and another is in its description."""


def _name_coverage(keywords: Sequence[str], name: str) -> float:
    """The share of a tool name's words (stop words aside) that the request's keywords name."""
    words = [n for n in re.split(r"[_\W]+", name.lower()) if n and n not in _STOP_WORDS]
    hit = sum(
        any(kw == n or (min(len(n), len(kw)) >= 4 and (n.startswith(kw) or kw.startswith(n)))
            for kw in keywords)
        for n in words
    )  # fmt: skip
    return hit / len(words) if words else 0.0


def _clear_match(keywords: Sequence[str], bound: dict[str, dict[str, Any]]) -> str | None:
    """The visible regular tool that clearly fits the request, else None (search first).

    Clearly: a relevance of at least :data:`_CLEAR_MATCH`, and more than any other visible
    tool's; between tools equally relevant, the one whose name the request covers most
    ("the weather today": ``get_weather`` over ``weather_forecast``). A tie left after that
    (``create_issue`` and ``list_issues`` for "open an issue") goes to the catalog's search.
    """
    scored = sorted(
        (
            (
                _relevance(keywords, name, t.get("function", t).get("description", "")),
                _name_coverage(keywords, name),
                name,
            )
            for name, t in bound.items()
            if name not in META_TOOL_NAMES
        ),
        reverse=True,
    )
    if not scored or scored[0][0] < _CLEAR_MATCH:
        return None
    if len(scored) > 1 and scored[1][:2] == scored[0][:2]:
        return None
    return scored[0][2]


def demo_reply(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> AIMessage:
    """The next message of a rule-based agent: call the visible tool that fits, else search,
    load, call; then answer.

    Within one user turn: 1. a visible tool that clearly fits the request (by keyword
    overlap, ahead of every other visible tool) is called at once, as a real model would;
    otherwise 2. ``search_tools`` with the request's keywords (skipped when
    ``search_tools`` is not bound: the best bound tool is called at once), 3. ``add_tool``
    for the best match unless it is already visible, 4. call it; each call with arguments
    built from the tool's schema (:func:`demo_arguments`); then 5. answer with the tool's
    result. A request with no keywords, or no matching tool, gets a plain answer.
    Deterministic.

    Args:
        messages: the conversation so far.
        tools: the bound tools as OpenAI tool schemas.

    Returns:
        An AI message, with one tool call or none.
    """
    bound = {_tool_name(t): t for t in tools}
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    query = message_text(messages[start]) if start >= 0 else ""
    turn = list(messages[start + 1 :])
    n_ai = sum(isinstance(m, AIMessage) for m in messages)
    results = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
    calls = [c for m in turn if isinstance(m, AIMessage) for c in m.tool_calls]

    def call(name: str, args: dict[str, Any]) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"demo_{n_ai}"}])

    keywords = _keywords(query)
    if not keywords:
        return AIMessage("Hello! Tell me what to do, e.g. 'what is the weather in Paris?'.")
    done = [c for c in calls if c["name"] not in META_TOOL_NAMES and c.get("id") in results]
    if done:
        last = results[str(done[-1]["id"])]
        text = message_text(last)[:_MAX_ANSWER_CHARS]
        if last.status == "error":
            return AIMessage(f"{done[-1]['name']} failed: {text}")
        return AIMessage(f"I used {done[-1]['name']}: {text}")
    if len(calls) >= 3:
        return AIMessage("I could not find a tool for that request.")
    added = [c for c in calls if c["name"] == ADD_TOOL and c.get("id") in results]
    if added:
        target = added[-1]["args"].get("tool_names", [""])[0]
        if target in bound:
            return call(target, demo_arguments(_tool_parameters(bound[target]), query))
        return AIMessage(
            f"I could not load {target}: {message_text(results[str(added[-1]['id'])])}"
        )
    searched = [c for c in calls if c["name"] == SEARCH_TOOLS and c.get("id") in results]
    found: list[Any] = []
    if searched:
        try:
            found = json.loads(message_text(results[str(searched[-1]["id"])])).get("tools", [])
        except ValueError:
            found = []
    elif SEARCH_TOOLS in bound:
        clear = _clear_match(keywords, bound)
        if clear is not None:  # a visible tool fits: no search
            return call(clear, demo_arguments(_tool_parameters(bound[clear]), query))
        return call(SEARCH_TOOLS, {"query": "|".join(keywords)})
    # else no meta-tools (e.g. every tool bound): choose among the bound tools at once
    candidates = [(t["name"], t.get("description", "")) for t in found if isinstance(t, dict)]
    candidates += [
        (name, t.get("function", t).get("description", ""))
        for name, t in bound.items()
        if name not in META_TOOL_NAMES
    ]
    if not candidates:
        return AIMessage("I could not find a tool for that request.")
    best = max(candidates, key=lambda c: _relevance(keywords, *c))  # first one wins ties
    if _relevance(keywords, *best) == 0:
        return AIMessage("I could not find a tool for that request.")
    if best[0] in bound:
        return call(best[0], demo_arguments(_tool_parameters(bound[best[0]]), query))
    return call(ADD_TOOL, {"tool_names": [best[0]]})


class RuleChatModel(BaseChatModel):
    """Base of the demo's rule-based chat models: :meth:`reply` answers the messages (sync and
    async alike, nothing to wait for)."""

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        """The model's answer to ``messages`` (``kwargs``: what ``bind`` attached)."""
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.reply(messages, **kwargs))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._generate(messages, stop, None, **kwargs)


class DemoChatModel(RuleChatModel):
    """A deterministic, rule-based chat model that drives the meta-tools (see :func:`demo_reply`).

    Stateless: the bound tools travel with each call (``bind_tools`` binds them as
    call arguments), so one instance serves concurrent runs, e.g. on LangGraph
    server. Use it to demo or test a graph end to end without a provider.

    Example:
        ```python
        graph = create_toolbudget_agent(DemoChatModel(), build_example_catalog())
        graph.compile().invoke({"messages": [("user", "What's the weather in Paris?")]})
        ```
    """

    @property
    def _llm_type(self) -> str:
        return "toolbudget-demo"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind the tools' OpenAI schemas; each call reads them back."""
        return self.bind(tools=[_openai_schema(t) for t in tools], **kwargs)

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        return demo_reply(messages, kwargs.get("tools") or [])
