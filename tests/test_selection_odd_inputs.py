"""Selection on odd inputs: its determinism across processes, its work on very long texts,
invisible characters inside words, names that differ only in a stop word, and caps below
the tools that are never evicted."""

from __future__ import annotations

import asyncio
import json
import os
import random
import string
import subprocess
import sys
import textwrap
import unicodedata

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool

from langgraph_toolbudget import ToolAgent, ToolCatalog, ToolExecutor, create_toolbudget_agent
from langgraph_toolbudget.core.hashing import HashingEmbeddings
from langgraph_toolbudget.core.meta import MAX_REASON_CHARS, MetaToolHandler
from langgraph_toolbudget.core.search import MAX_EXPANDED_TERMS, MAX_RANKED_CLAUSES, ToolIndex
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.core.terms import MAX_REQUEST_CHARS, ranked_text, tokenize
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.explain import explain
from langgraph_toolbudget.nodes.selection import SelectTools, ToolSearch
from langgraph_toolbudget.state import merge_names
from langgraph_toolbudget.testing import ScriptedChatModel


def _tool(name: str, description: str) -> StructuredTool:
    def run(x: str) -> str:
        return x

    return StructuredTool.from_function(run, name=name, description=description)


def _words(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct made-up lower-case words of 6 to 10 letters, each its own search term
    (no stem to strip), that no catalog holds."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        word = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(6, 10)))
        if tokenize(word) == [word]:
            out[word] = None
    return list(out)


# --- the same tools in every process --------------------------------------------------------

# "stats" is spelled as no tool spells it: its close spellings "start", "state" and "statu"
# ("status", stemmed) are equally close, and they sit in a description's later sentences,
# whose terms were once added in hash order (so the vocabulary's order, which broke the tie,
# changed with PYTHONHASHSEED).
_SEED_WORKER = textwrap.dedent(
    """
    import json
    from langchain_core.tools import StructuredTool
    from langgraph_toolbudget import ToolCatalog
    from langgraph_toolbudget.core.selection import select_tools

    def tool(name, description):
        def run(x: str) -> str:
            return x
        return StructuredTool.from_function(run, name=name, description=description)

    catalog = ToolCatalog.from_tools(
        [
            tool("server_admin", "Administer the deployment server. Accepts an action such as "
                 "start, state, status, restart or stop."),
            tool("start_job", "Start a job."),
            tool("job_state", "Read the state of a job."),
            tool("build_status", "Report the status of a build."),
        ],
        categories={"ops": ["server_admin", "start_job", "job_state", "build_status"]},
    )
    query = "show me the stats"
    print(json.dumps({
        "ranked": catalog.index.rank_names(query),
        "chosen": select_tools(catalog, query, ["ops"], max_tools=2),
    }))
    """
)


def test_a_misspelled_request_chooses_the_same_tools_under_every_hash_seed():
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _SEED_WORKER],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (0, 1, 4, 6)
    ]
    results = []
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err[-2000:]
        results.append(out.strip().splitlines()[-1])
    assert len(set(results)) == 1, results
    assert json.loads(results[0])["chosen"], "the typo must find tools, or the test proves nothing"


def test_equally_close_spellings_go_to_the_first_in_the_catalogs_text_under_every_seed():
    """Of spellings as close as each other to a word the catalog spells otherwise, the first in
    the catalog's own texts count (the vocabulary's order, never a set's hash order)."""
    docs = [
        ("start_job", "Start a job.", []),
        ("job_state", "Read the state of a job.", []),
        ("build_status", "Report the status of a build.", []),
    ]
    script = (
        "from langgraph_toolbudget.core.search import ToolIndex\n"
        f"docs = {docs!r}\n"
        "print([w for w, _ in ToolIndex(docs)._expand('stat')],"
        " [w for w, _ in ToolIndex(docs[::-1])._expand('stat')])\n"
    )
    seen = set()
    for seed in ("0", "1", "7"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        seen.add(out.stdout.strip())
    assert seen == {"['start', 'state'] ['statu', 'state']"}


# --- bounded work on long texts ---------------------------------------------------------------


_DOCS = [
    ("get_weather", "Get the current weather for a city.", ["city"]),
    ("create_issue", "Open an issue in a GitHub repository.", ["repo", "title"]),
    ("send_message", "Send a message to a Slack channel.", ["channel", "text"]),
]


def _catalog_index() -> ToolIndex:
    return ToolIndex(_DOCS)


def test_a_pasted_text_of_thousands_of_unknown_words_looks_up_a_bounded_number_of_spellings():
    lookups = []
    for n_words in (2_000, 4_000):
        index = _catalog_index()
        unknown = _words(n_words)
        # a typo first, then a long paste in sentences of a few words (hundreds of clauses)
        text = "wether in Paris. " + " ".join(
            f"{' '.join(unknown[i : i + 3])}." for i in range(0, len(unknown), 3)
        )
        scores = index.scores(text)
        lookups.append(index._expand_cached.cache_info().misses)
        assert index.names[int(scores.argmax())] == "get_weather"  # the first terms still expand
    assert lookups == [MAX_EXPANDED_TERMS, MAX_EXPANDED_TERMS]  # the same, whatever the length


def test_a_request_of_thousands_of_clauses_ranks_a_bounded_number_of_them():
    passes: list[int] = []

    class Counting(ToolIndex):
        def _bm25(self, terms, expandable):  # type: ignore[no-untyped-def]
            passes.append(len(terms))
            return super()._bm25(terms, expandable)

    index = Counting(_DOCS)
    text = " ".join(f"Send the message {i}. Then open an issue {i}." for i in range(2000))
    index.scores(text)
    assert len(passes) == 1 + MAX_RANKED_CLAUSES  # the whole text, then its first clauses


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_request_of_thousands_of_clauses_embeds_a_bounded_number_of_them(api):
    embedded: list[str] = []

    class Counting(HashingEmbeddings):
        def embed_query(self, text: str) -> list[float]:
            embedded.append(text)
            return super().embed_query(text)

        async def aembed_query(self, text: str) -> list[float]:
            return self.embed_query(text)

    scorer = HybridScorer(build_example_catalog(), Counting())
    text = " ".join(f"Send the message {i}. Then open an issue {i}." for i in range(2000))
    if api == "sync":
        scorer.scores(text)
    else:
        asyncio.run(scorer.ascores(text))
    # as BM25 ranks them: the text's first and last halves, then its first clauses
    assert embedded[0] == ranked_text(text) and len(embedded) == 1 + MAX_RANKED_CLAUSES


def _filler(chars: int) -> str:
    words = _words(2_000, seed=3)
    out = " ".join(f"{words[i % len(words)]}{i}" for i in range(chars // 8))
    return out[:chars]


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_request_pasted_around_megabytes_is_ranked_on_its_first_and_last_part(where):
    # Reading a text is linear in its length: a client's 8 MB message held the event loop
    # for seconds. The ask comes before or after what is pasted with it.
    ask, paste = "Send a message to the team channel on Slack", _filler(3_000_000)
    text = f"{ask}. {paste}" if where == "before" else f"{paste}. {ask}"
    part = ranked_text(text)
    assert len(part) <= MAX_REQUEST_CHARS + 1 and ask in part
    index = build_example_catalog().index
    assert index.names[int(index.scores(text).argmax())] == "send_message"
    assert ranked_text(ask) == ask  # a request under the cap is ranked whole


@pytest.mark.parametrize("shape", ["prebuilt", "middleware"])
def test_no_turn_reads_more_than_the_ranked_part_of_a_megabytes_long_message(shape, monkeypatch):
    from langchain.agents import create_agent

    from langgraph_toolbudget import ToolBudgetMiddleware
    from langgraph_toolbudget.core import fuzzy, terms

    catalog = build_example_catalog()
    model = ScriptedChatModel(responses=[AIMessage("done")])
    if shape == "prebuilt":
        graph = create_toolbudget_agent(model, catalog).compile()
    else:
        graph = create_agent(model, middleware=[ToolBudgetMiddleware(catalog)])
    read: list[int] = []
    split = terms._split_words

    def counting(text: str) -> tuple[str, ...]:
        read.append(len(text))
        return split(text)

    monkeypatch.setattr(terms, "_split_words", counting)
    monkeypatch.setattr(fuzzy, "_split_words", counting)
    text = f"Why does this fail? {_filler(4_000_000)}"
    asyncio.run(graph.ainvoke({"messages": [HumanMessage(text)]}))
    assert read and max(read) <= MAX_REQUEST_CHARS + 1  # never the whole message


def test_a_turn_splits_its_request_once_and_keeps_only_recent_texts_up_to_the_cap():
    # A turn reads its request several times (intent, selection, search, each clause): after
    # the first, a lookup. Only the last RECENT_TEXTS are kept, none longer than a ranked part.
    from langgraph_toolbudget.core import terms

    cache = terms._split_recent_texts
    cache.cache_clear()
    ask = "Find the weather in Paris, then send it to the team channel on Slack. " * 20
    ToolSearch(build_example_catalog(), search_limit=5).invoke(
        {"messages": [HumanMessage(ask)], "categories": ["weather", "slack"]}
    )
    turn = cache.cache_info()
    assert turn.misses >= 1 and turn.hits >= 1  # the request's second reading was a lookup
    assert tokenize(ask) == tokenize(ask) and cache.cache_info().hits >= turn.hits + 2
    cache.cache_clear()
    tokenize(_filler(MAX_REQUEST_CHARS + 2))
    assert cache.cache_info().currsize == 0  # longer than any ranked part: never kept
    tokenize(ranked_text(_filler(3 * MAX_REQUEST_CHARS)))
    assert cache.cache_info().currsize == 1  # a cut request is
    for n in range(3 * terms.RECENT_TEXTS):
        tokenize(f"request number {n} about the weather")
    assert cache.cache_info().currsize == terms.RECENT_TEXTS


def test_a_request_under_the_caps_expands_every_unknown_term_of_every_clause():
    index = _catalog_index()
    words = _words(40, seed=1)
    text = "What is the wether in Paris? Then sned a mesage to the team. " + " ".join(words)
    index.scores(text)
    unknown = {t for t in tokenize(text) if t not in index._postings and len(t) >= 4}
    assert {"wether", "sned", "mesage", *words} <= unknown
    # each looked up once (the cache serves the clauses' repeats): none left out
    assert index._expand_cached.cache_info().misses == len(unknown)
    assert index.rank_names("sned a mesage")[0][0] == "send_message"


def test_request_more_tools_ranks_a_bounded_part_of_a_long_reason():
    catalog = build_example_catalog()
    handler = MetaToolHandler(catalog, max_tools=2)
    query = "check the weather"
    ranked = []
    for n_words in (10_000, 20_000):  # reasons of ~90,000 and ~180,000 characters
        out = handler.handle(
            "request_more_tools",
            {"categories": ["weather"], "reason": " ".join(_words(n_words))},
            WorkingSet([]),
            query,
        )
        assert out.added and not out.error
        ranked.append(catalog.index._last[0])  # the text the budget ranked last
    assert all(text.startswith(query) for text in ranked)
    assert len(ranked[0]) == len(ranked[1]) == len(query) + 1 + MAX_REASON_CHARS


# --- invisible characters ---------------------------------------------------------------------

_INVISIBLE = {
    "soft hyphen": "\u00ad",
    "zero-width space": "\u200b",
    "word joiner": "\u2060",
    "byte order mark": "\ufeff",
    "left-to-right mark": "\u200e",
}


@pytest.mark.parametrize("char", _INVISIBLE.values(), ids=_INVISIBLE.keys())
def test_an_invisible_format_character_inside_a_word_does_not_split_it(char):
    plain = "What is the weather forecast for Berlin? Wettervorhersage für München"

    def hide(word: str) -> str:
        return word[: len(word) // 2] + char + word[len(word) // 2 :] if len(word) > 5 else word

    text = " ".join(hide(w) for w in plain.split())
    assert text != plain
    assert tokenize(text) == tokenize(plain)
    catalog = build_example_catalog()
    tools = [t["name"] for t in explain(catalog, plain)["tools"]]
    assert [t["name"] for t in explain(catalog, text)["tools"]] == tools
    assert "weather_forecast" in tools


def test_every_format_character_is_dropped_but_the_joiners_scripts_need():
    format_chars = [
        chr(c)
        for c in range(0x110000)
        if unicodedata.category(chr(c)) == "Cf" and c not in (0x200C, 0x200D)
    ]
    kept = [c for c in format_chars if tokenize(f"fore{c}cast") != ["forecast"]]
    assert not kept, [f"U+{ord(c):04X}" for c in kept]
    # the zero-width joiners are no format to drop: Persian writes "mi-khaham" with one
    for joiner in ("\u200c", "\u200d"):
        assert tokenize(f"fore{joiner}cast") != ["forecast"]
    assert tokenize("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645") == [
        "\u0645\u06cc",
        "\u062e\u0648\u0627\u0647\u0645",
    ]


# --- a cap below the tools that are never evicted ---------------------------------------------


def _always_catalog(n_always: int) -> ToolCatalog:
    audit = [_tool(f"audit_{i}", f"Audit log helper {i}.") for i in range(n_always)]
    weather = [_tool(f"weather_{i}", f"Weather report {i}.") for i in range(5)]
    return ToolCatalog.from_tools(
        [*audit, *weather],
        categories={"audit": [t.name for t in audit], "weather": [t.name for t in weather]},
        tool_metadata={t.name: {"include": "always"} for t in audit},
    )


@pytest.mark.parametrize(
    ("request_text", "wanted"),
    [("zoom out", "zoom_out"), ("zoom_out", "zoom_out"), ("Sign out of my account", "sign_out")],
)
def test_a_request_in_a_tools_name_words_binds_it_when_the_names_differ_by_a_stop_word(
    request_text, wanted
):
    """With one tool to bind, "zoom out" bound ``zoom_in``: both indexed as "zoom" (the stop
    list drops "in" and "out"), and catalog order broke the tie."""
    catalog = ToolCatalog.from_tools(
        [
            _tool("zoom_in", "Zoom in on the map."),
            _tool("zoom_out", "Zoom out of the map."),
            _tool("sign_in", "Sign in to the account."),
            _tool("sign_out", "Sign out of the account."),
        ],
        categories={"map": ["zoom_in", "zoom_out"], "account": ["sign_in", "sign_out"]},
    )
    model = ScriptedChatModel(responses=[AIMessage("ok")])
    graph = create_toolbudget_agent(model, catalog, max_tools=1, search_limit=0).compile()
    graph.invoke({"messages": [("user", request_text)]})
    assert [n for n in model.bound_tools[0] if n in catalog] == [wanted]


def test_a_max_visible_below_the_always_tools_is_refused_naming_them_and_the_fix():
    catalog = _always_catalog(10)
    model = ScriptedChatModel(responses=[AIMessage("ok")])
    with pytest.raises(ValueError, match=r"max_visible=4 is less than the 10 tools") as caught:
        create_toolbudget_agent(model, catalog, max_tools=2, max_visible=4)
    message = str(caught.value)
    assert "audit_0" in message and "include='always'" in message
    assert "raise max_visible" in message and "max_visible=None" in message
    for node in (SelectTools, ToolSearch, ToolExecutor):
        with pytest.raises(ValueError, match="max_visible=4 is less than the 10 tools"):
            node(catalog, max_visible=4)


def test_the_executor_and_tool_agent_refuse_a_max_visible_below_the_free_tools_too():
    """They cap the set the meta-tools load into: built, the model's every ``add_tool`` got
    "the working set is full of pinned tools", a loop it could not leave."""
    catalog = _always_catalog(3)
    model = ScriptedChatModel(responses=[AIMessage("ok")])
    message = r"max_visible=4 is less than the 5 tools .*weather_0"
    with pytest.raises(ValueError, match=message):
        ToolExecutor(catalog, max_visible=4, pinned=["weather_0", "weather_1"])
    with pytest.raises(ValueError, match=message):
        ToolAgent(model, catalog, max_visible=4, pinned=["weather_0", "weather_1"])
    # as many as the free tools builds: the cap holds them (and nothing else)
    ToolExecutor(catalog, max_visible=5, pinned=["weather_0", "weather_1"])
    ToolAgent(model, catalog, max_visible=5, pinned=["weather_0", "weather_1"])


def test_a_max_visible_the_free_tools_fill_tells_a_hidden_call_nothing_can_be_loaded():
    # Valid (documented), but the refusal said "Load it first with add_tool(...)", which then
    # answered "no room": advice that could never work in this setup.
    catalog = _always_catalog(3)
    node = ToolExecutor(catalog, max_visible=5, pinned=["weather_0", "weather_1"])
    call = {"name": "weather_3", "args": {}, "id": "w"}
    state = {"messages": [HumanMessage("weather"), AIMessage("", tool_calls=[call])]}
    refusal = node.invoke(state)["messages"][-1]
    assert refusal.status == "error" and "add_tool" not in refusal.content
    assert "No tool can be loaded here: at most 5 tools can be visible at once" in refusal.content
    # with room for one more, the refusal says how to load it
    roomy = ToolExecutor(catalog, max_visible=6, pinned=["weather_0", "weather_1"])
    assert "Load it first with add_tool" in roomy.invoke(state)["messages"][-1].content
    # with include_tool, which loads on top of the cap, it is not "nothing can be loaded"
    gate = {"allow": ["*"]}
    includes = ToolExecutor(
        catalog, max_visible=5, pinned=["weather_0", "weather_1"], enabled_builtins=gate
    )
    refusal = includes.invoke(state)["messages"][-1].content
    assert "No tool can be loaded here" not in refusal and "Load it first" not in refusal
    assert "include it with include_tool(tool='weather_3')" in refusal
    # a name that is not a tool: no add_tool either, include_tool is the way in
    other = {
        "messages": [
            HumanMessage("weather"),
            AIMessage("", tool_calls=[{**call, "name": "wether_3"}]),
        ]
    }
    refusal = includes.invoke(other)["messages"][-1].content
    assert "add_tool" not in refusal and "include it with include_tool(tool=...)" in refusal
    # and following the advice in the same reply works: the included tool comes on top of
    # the cap at once (it was added under the cap and evicted, or refused, as it was)
    both = [
        {"name": "include_tool", "args": {"tool": "weather_3"}, "id": "i"},
        {**call, "args": {"x": "a"}},
    ]
    state_both = {"messages": [HumanMessage("weather"), AIMessage("", tool_calls=both)]}
    ran = includes.invoke(state_both)["messages"][-1]
    assert ran.status == "success" and ran.tool_call_id == "w"


def test_always_and_pinned_tools_together_must_fit_max_visible():
    catalog = _always_catalog(3)
    with pytest.raises(ValueError, match=r"max_visible=4 is less than the 5 tools .*weather_0"):
        SelectTools(catalog, max_visible=4, pinned=["weather_0", "weather_1"])
    SelectTools(catalog, max_visible=5, pinned=["weather_0", "weather_1"])


def test_a_max_visible_that_holds_the_always_tools_keeps_room_for_the_request():
    catalog = _always_catalog(3)
    model = ScriptedChatModel(responses=[AIMessage("ok")])
    graph = create_toolbudget_agent(model, catalog, max_tools=2, max_visible=5).compile()
    graph.invoke({"messages": [("user", "weather report")]})
    bound = [n for n in model.bound_tools[0] if n in catalog]
    assert len(bound) <= 5
    assert {"audit_0", "audit_1", "audit_2"} <= set(bound)
    assert any(n.startswith("weather_") for n in bound)


def test_tools_that_leave_the_context_in_a_reply_give_their_room_back():
    # Each context change raised the batch's cap by the tools it made free and nothing gave
    # the room back: setting tools 'always' then 'manual' in one reply let add_tool load past
    # max_visible, and the tools stayed visible for the next turns.
    catalog = _always_catalog(3)
    node = ToolExecutor(catalog, max_visible=4, enabled_builtins={"allow": ["*"]})
    calls = []
    for i in range(3):
        for mode in ("always", "manual"):
            args = {"tool": f"weather_{i}", "mode": mode}
            calls.append({"name": "set_tool_include_mode", "args": args, "id": f"m{i}{mode}"})
    load = {"tool_names": ["weather_3", "weather_4"]}
    calls.append({"name": "add_tool", "args": load, "id": "a"})
    out = node.invoke({"messages": [HumanMessage("weather"), AIMessage("", tool_calls=calls)]})
    visible = merge_names([], out["selected_tools"])
    assert len(visible) <= 4, visible  # the 3 always tools and one more
    assert "at most 4 tools can be visible at once here" in out["messages"][-1].content


def test_a_pinned_tool_the_model_sets_to_manual_stays_and_keeps_the_cap():
    # It was taken out of the reply's visible set, add_tool filled its place, and the next
    # turn put it back: one over max_visible, stored and kept.
    catalog = _always_catalog(0)
    node = ToolExecutor(
        catalog, max_visible=3, pinned=["weather_0"], enabled_builtins={"allow": ["*"]}
    )
    mode = {"tool": "weather_0", "mode": "manual"}
    calls = [
        {"name": "set_tool_include_mode", "args": mode, "id": "m"},
        {
            "name": "add_tool",
            "args": {"tool_names": ["weather_1", "weather_2", "weather_3"]},
            "id": "a",
        },
    ]
    out = node.invoke({"messages": [HumanMessage("weather"), AIMessage("", tool_calls=calls)]})
    visible = merge_names([], out["selected_tools"])
    assert "weather_0" in visible and len(visible) <= 3, visible
