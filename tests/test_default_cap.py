"""The default working set is bounded: no default configuration ever sends more schema tokens
per model call than binding the whole catalog, however long the conversation."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langgraph_toolbudget import (
    BudgetConfig,
    CallModel,
    ClassifyIntent,
    SelectTools,
    ToolSearch,
    ToolUsage,
    create_toolbudget_agent,
)
from langgraph_toolbudget.core.hashing import HashingEmbeddings
from langgraph_toolbudget.core.meta import meta_tool_definitions
from langgraph_toolbudget.core.tokens import schema_tokens
from langgraph_toolbudget.core.working_set import tools_in_use
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel
from langgraph_toolbudget.nodes.tool_index import StoreToolIndex
from langgraph_toolbudget.testing import ScriptedChatModel

# Twenty turns that drift across every category of the example catalog.
TURNS = [
    "What's the weather in Tokyo?",
    "Post 'bring an umbrella' to #general",
    "How many rows does the orders table have?",
    "Schedule a meeting with Ada on 2026-02-03",
    "Create a GitHub issue in acme/app titled 'login bug'",
    "Read the file /notes/todo.md",
    "Add a task 'write docs' to project Apollo",
    "Email ada@example.com the forecast for Berlin",
    "List the open pull requests in acme/app",
    "What is the air quality in Paris?",
    "Find a free slot on Friday for 30 minutes",
    "Search my email for the invoice",
    "Describe the customers table",
    "List all files in /notes",
    "Create a channel called launch",
    "Mark the task 'write docs' as done",
    "Convert 30 degrees to fahrenheit",
    "Comment on issue 1 in acme/app: fixed in main",
    "Cancel the standup event",
    "Read the latest messages in #general",
]

# Every default a user gets: no budget options, and each model-size preset.
DEFAULTS = {
    "defaults": {},
    "small model": {"model_size": "qwen3:4b"},
    "medium model": {"model_size": "qwen3:8b"},
    "large model": {"model_size": "llama3.1:70b"},
}


@pytest.mark.parametrize("options", DEFAULTS.values(), ids=list(DEFAULTS))
def test_default_working_set_never_costs_more_than_binding_everything(options):
    catalog = build_example_catalog()
    bind_all = schema_tokens(catalog.tools(catalog.tool_names))
    meta = meta_tool_definitions(catalog.categories)
    app = create_toolbudget_agent(DemoChatModel(), catalog, **options).compile(
        checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "drift"}}
    cap = BudgetConfig(**options).visible_cap(len(catalog.always_visible))
    seen: set[str] = set()
    peak = 0
    for text in TURNS:
        state = app.invoke({"messages": [HumanMessage(text)]}, config)
        visible = state["selected_tools"]
        seen.update(visible)
        assert len(visible) <= cap
        peak = max(peak, schema_tokens([*meta, *catalog.tools(visible)]))
    assert peak < bind_all, f"{options}: {peak} tokens per call >= {bind_all} binding all"
    assert len(seen) > cap  # the conversation did drift past the cap: eviction happened


def test_explicit_max_visible_still_wins():
    assert BudgetConfig(max_visible=3).visible_cap(1) == 3
    assert BudgetConfig().visible_cap(1) == 2 * 8 + 5 + 1
    assert BudgetConfig(model_size="qwen3:4b").visible_cap(0) == 12  # the floor
    assert BudgetConfig(max_tools=20).visible_cap(2) == 2 * 20 + 5 + 2


SIX_TOPICS = [
    "What's the weather in Paris tomorrow?",
    "Open a GitHub issue for the login crash in acme/app",
    "Send a message to the dev channel on Slack saying the build is green",
    "Schedule a meeting with Ana next Monday at 10",
    "How many rows does the orders table have?",
    "Email Bob the quarterly report",
]


def test_topics_the_conversation_left_leave_the_working_set_unless_used():
    """Six requests on six topics, the prebuilt agent with its defaults: by the sixth turn the
    model is bound at most half of what binding every tool costs, and every tool the thread
    used is still there."""
    catalog = build_example_catalog()
    bind_all = schema_tokens(catalog.tools(catalog.tool_names))
    prompt = CallModel(DemoChatModel(), catalog).caller.thread_prompt  # the built-ins per state
    app = create_toolbudget_agent(DemoChatModel(), catalog).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "six"}}
    shares = []
    for text in SIX_TOPICS:
        state = app.invoke({"messages": [HumanMessage(text)]}, config)
        builtins = prompt.for_state(state)[1]
        bound = schema_tokens([*builtins, *catalog.tools(state["selected_tools"])])
        shares.append(bound / bind_all)
    used = tools_in_use(state["messages"]) & set(catalog.tool_names)  # meta-calls aside
    assert len(used) == 6  # one tool of each topic ran
    assert used <= set(state["selected_tools"])  # none of them was dropped
    assert shares[-1] <= 0.5, [f"{s:.0%}" for s in shares]


def _rankings() -> dict[str, dict]:
    """The rankings a user may choose: similarity scores are rescaled (embeddings: min-max over
    the catalog; a retriever: over its best score), so some tool always scores high."""
    embeddings = HashingEmbeddings(384)
    store = InMemoryStore(index={"embed": embeddings, "dims": 384, "fields": ["text"]})
    return {
        "lexical": {},
        "embeddings": {"embeddings": HashingEmbeddings(384)},
        "retriever": {"retriever": StoreToolIndex(store)},  # a vector search: always k answers
    }


@pytest.mark.parametrize("ranking", ["lexical", "embeddings", "retriever"])
@pytest.mark.parametrize("with_usage", [False, True])
def test_a_follow_up_that_matches_no_tool_keeps_the_topic_before_it(with_usage, ranking):
    """ "And in Lima?" names no tool: it is about the request before it, whose tools stay,
    whether or not the model called one, and a usage history's most used tools (the fallback of
    a first turn that matches nothing) do not replace them. A new topic still replaces them.
    With embeddings or a retriever too: they answered "And in Lima?" with database, Slack or
    email categories and replaced the weather tools with theirs."""
    catalog = build_example_catalog()
    usage = ToolUsage()
    usage.record("how many orders are there", ["count_rows"])
    model = ScriptedChatModel(responses=[AIMessage("Which city?")], cycle=True)
    options = _rankings()[ranking]
    agent = create_toolbudget_agent(model, catalog, usage=usage if with_usage else None, **options)
    app = agent.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "lima"}}
    first = app.invoke({"messages": [HumanMessage("What's the weather like?")]}, config)
    assert "get_weather" in first["selected_tools"]
    for text in ["And in Lima?", "thanks!"]:
        follow_up = app.invoke({"messages": [HumanMessage(text)]}, config)
        assert follow_up["selected_tools"] == first["selected_tools"]  # was: ask_human alone
        assert follow_up["categories"] == []
        assert model.bound_tools[-1][-len(first["selected_tools"]) :] == first["selected_tools"]
    new_topic = app.invoke({"messages": [HumanMessage("Read the file /notes/todo.md")]}, config)
    assert "read_file" in new_topic["selected_tools"]
    assert "get_weather" not in new_topic["selected_tools"]


@pytest.mark.parametrize("ranking", ["embeddings", "retriever"])
def test_the_categories_a_classifier_model_names_still_bring_a_topic(ranking):
    """The words decide only when nothing else names a topic: a chat model classifying
    "Envía un correo a Ada" as email brings the email tools, under similarity ranking too."""
    catalog = build_example_catalog()

    def choice(categories: list[str]) -> AIMessage:
        call = {"name": "CategoryChoice", "args": {"categories": categories}, "id": "c"}
        return AIMessage("", tool_calls=[call])

    classifier = ScriptedChatModel(responses=[choice(["weather"]), choice(["email"])])
    model = ScriptedChatModel(responses=[AIMessage("ok")], cycle=True)
    agent = create_toolbudget_agent(
        model, catalog, classifier_model=classifier, **_rankings()[ranking]
    )
    app = agent.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "correo"}}
    first = app.invoke({"messages": [HumanMessage("What's the weather like?")]}, config)
    assert "get_weather" in first["selected_tools"]
    out = app.invoke({"messages": [HumanMessage("Envía un correo a Ada")]}, config)
    assert out["categories"] == ["email"]
    assert "send_email" in out["selected_tools"]
    assert "get_weather" not in out["selected_tools"]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("ranking", ["embeddings", "retriever"])
async def test_similarity_still_chooses_alone_when_the_thread_holds_no_choice(ranking, mode):
    """Its words decide only whether a request replaces a choice: the first turn of a request
    that matches no word (another language than the tool texts) is still ranked by similarity,
    by every node, and a later turn's search adds nothing for a request without a topic."""
    catalog = build_example_catalog()
    options = _rankings()[ranking]
    state = {"messages": [HumanMessage("And in Lima?")]}
    classify = ClassifyIntent(catalog, **options)
    select, search = SelectTools(catalog, **options), ToolSearch(catalog, **options)
    if mode == "sync":
        first = classify.invoke(state)
        chosen = select.invoke({**state, **first})
        hits = search.invoke(state)
    else:
        first = await classify.ainvoke(state)
        chosen = await select.ainvoke({**state, **first})
        hits = await search.ainvoke(state)
    assert first["categories"]  # nothing to keep: similarity decides, as before
    assert len(chosen["selected_tools"]["add"]) > 1 and hits["selected_tools"]["add"]
    later = {
        "messages": [HumanMessage("weather"), AIMessage("Where?"), HumanMessage("And in Lima?")],
        "selected_tools": ["ask_human", "get_weather"],
    }
    every = ToolSearch(catalog, every_turn=True, **options)
    assert (every.invoke(later) if mode == "sync" else await every.ainvoke(later)) == {}
    again = classify.invoke(later) if mode == "sync" else await classify.ainvoke(later)
    assert again == {"categories": [], "category_scores": {}}
