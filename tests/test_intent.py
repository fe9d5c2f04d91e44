"""intent.py: classify_intent, lexical by default, optionally with a chat model that may fail."""

from __future__ import annotations

import logging

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph

from langgraph_toolbudget import ClassifyIntent, SelectTools, ToolBudgetState
from langgraph_toolbudget.core.intent import classify_lexical, latest_user_text
from langgraph_toolbudget.nodes.intent import CategoryChoice
from langgraph_toolbudget.testing import ScriptedChatModel

INTENT_LOGGER = "langgraph_toolbudget.nodes.intent"
MODES = ["sync", "async"]


async def run(node, state, mode):
    """Run a node through its sync or its async path."""
    if mode == "sync":
        return node.invoke(state)
    return await node.ainvoke(state)


def ask(text: str) -> dict:
    return {"messages": [HumanMessage(text)]}


def choice(categories) -> AIMessage:
    """What a provider returns for with_structured_output(CategoryChoice): a tool call."""
    return AIMessage(
        "",
        tool_calls=[{"name": "CategoryChoice", "args": {"categories": categories}, "id": "c1"}],
    )


def _raise_timeout(messages, tools):
    raise TimeoutError("model server did not answer in 30 s")


# --- lexical -----------------------------------------------------------------------------


def test_classify_lexical_weather_query_puts_weather_first(catalog):
    ranked = classify_lexical(catalog, "What is the weather in Paris tomorrow?")
    assert ranked[0][0] == "weather"


def test_classify_lexical_returns_ordered_categories_with_scores(catalog):
    ranked = classify_lexical(
        catalog, "Create an issue in GitHub for project apollo", min_relative_score=0
    )
    names = [c for c, _ in ranked]
    scores = [s for _, s in ranked]
    assert {"github", "projects"} <= set(names)
    assert scores == sorted(scores, reverse=True)
    assert all(s > 0 for s in scores)
    assert set(names) <= set(catalog.categories)
    assert len(names) == len(set(names))


def test_classify_lexical_max_categories_bounds_the_answer(catalog):
    query = (
        "send a slack message, read the README file, query the database tables "
        "and add a task to the project"
    )
    wide = classify_lexical(catalog, query, max_categories=10, min_relative_score=0)
    assert len(wide) >= 4
    for bound in (1, 2, 3):
        ranked = classify_lexical(catalog, query, max_categories=bound, min_relative_score=0)
        assert len(ranked) == bound
        assert ranked == wide[:bound]


def test_classify_lexical_min_relative_score_drops_weak_categories(catalog):
    query = "Create an issue in GitHub for project apollo"
    loose = classify_lexical(catalog, query, max_categories=6, min_relative_score=0)
    strict = classify_lexical(catalog, query, max_categories=6, min_relative_score=0.99)
    assert len(strict) < len(loose)
    assert strict[0] == loose[0]


@pytest.mark.parametrize("query", ["", "zqxjvk", "hello there"])
def test_classify_lexical_unrelated_or_empty_query_returns_nothing(catalog, query):
    assert classify_lexical(catalog, query) == []


def test_classify_lexical_is_deterministic(catalog, make_catalog):
    query = "list the open pull requests and post them to slack"
    first = classify_lexical(catalog, query)
    assert classify_lexical(catalog, query) == first
    assert classify_lexical(make_catalog(), query) == first


def test_classify_lexical_never_returns_filtered_categories(make_catalog):
    catalog = make_catalog(allowed_servers=["github", "projects"])
    ranked = classify_lexical(catalog, "send a slack message about the weather")
    assert all(c in {"github", "projects", "human"} for c, _ in ranked)


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_node_lexical_writes_categories_and_scores(catalog, mode):
    out = await run(ClassifyIntent(catalog), ask("Will it rain in Lima? weather forecast"), mode)
    assert out["categories"][0] == "weather"
    assert list(out["category_scores"]) == out["categories"]


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_node_bounds_categories(catalog, mode):
    state = ask("send a slack message, read a file, query the database and add a project task")
    out = await run(ClassifyIntent(catalog, max_categories=2, min_relative_score=0), state, mode)
    assert len(out["categories"]) == 2


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_node_uses_latest_human_message(catalog, mode):
    state = {
        "messages": [
            HumanMessage("what is the weather in Paris"),
            AIMessage("18C and cloudy."),
            HumanMessage("now list the tables of the analytics database"),
        ]
    }
    out = await run(ClassifyIntent(catalog), state, mode)
    assert out["categories"][0] == "database"
    assert "weather" not in out["categories"]


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_node_without_user_message_returns_no_categories(catalog, mode):
    out = await run(ClassifyIntent(catalog), {"messages": [SystemMessage("be brief")]}, mode)
    assert out["categories"] == []


def test_classify_intent_rejects_max_categories_below_one(catalog):
    with pytest.raises(ValueError, match="max_categories"):
        ClassifyIntent(catalog, max_categories=0)


def test_latest_user_text_reads_messages_dicts_and_content_blocks():
    assert latest_user_text([{"role": "user", "content": "hi"}]) == "hi"
    blocks = HumanMessage(content=[{"type": "text", "text": "weather"}, {"type": "image_url"}])
    assert latest_user_text([blocks, AIMessage("ok")]) == "weather"
    assert latest_user_text([]) == ""


# --- with a chat model -------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_model_good_answer_is_used(catalog, mode, caplog):
    model = ScriptedChatModel(responses=[choice(["slack", "github"])])
    node = ClassifyIntent(catalog, model=model)
    with caplog.at_level(logging.WARNING, logger=INTENT_LOGGER):
        out = await run(node, ask("post the weather to the team"), mode)
    assert out["categories"] == ["slack", "github"]
    scores = out["category_scores"]
    assert scores["slack"] > scores["github"]
    assert not caplog.records
    # The model was asked for structured output, and shown the real categories.
    assert model.bound_tools == [["CategoryChoice"]]
    system, user = model.calls[0]
    assert all(c in system.content for c in catalog.categories)
    assert user.content == "post the weather to the team"


@pytest.mark.parametrize("wrap", ["with_retry", "with_fallbacks"])
@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_takes_a_model_wrapped_with_retries_or_fallbacks(
    catalog, mode, wrap, caplog
):
    """Review 35c: ``model.with_fallbacks([...])`` as the classifier crashed at construction
    (``NameError`` inside langchain-core looking ``with_structured_output`` up) and
    ``model.with_retry()`` silently fell back to the lexical classifier. Both now ask the
    chat model for structured output, with the retries or fallbacks around it."""
    model = ScriptedChatModel(responses=[_raise_timeout, choice(["slack"])])
    backup = ScriptedChatModel(responses=[choice(["github"])])
    if wrap == "with_retry":
        wrapped = model.with_retry(stop_after_attempt=2, wait_exponential_jitter=False)
        expected = ["slack"]  # the second attempt answers
    else:
        wrapped = model.with_fallbacks([backup])
        expected = ["github"]  # the first model raises: the fallback answers
    with caplog.at_level(logging.WARNING, logger=INTENT_LOGGER):
        out = await run(ClassifyIntent(catalog, model=wrapped), ask("post to the team"), mode)
    assert out["categories"] == expected
    assert not caplog.records
    assert model.bound_tools[0] == ["CategoryChoice"]


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_model_unknown_category_is_dropped_and_logged(catalog, mode, caplog):
    model = ScriptedChatModel(responses=[choice(["astrology", "weather", "weather"])])
    with caplog.at_level(logging.WARNING, logger=INTENT_LOGGER):
        out = await run(ClassifyIntent(catalog, model=model), ask("forecast please"), mode)
    assert out["categories"] == ["weather"]
    assert "astrology" in caplog.text


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_model_all_unknown_falls_back_to_lexical(catalog, mode, caplog):
    query = "what is the weather in Paris"
    model = ScriptedChatModel(responses=[choice(["astrology", "cooking"])])
    with caplog.at_level(logging.WARNING, logger=INTENT_LOGGER):
        out = await run(ClassifyIntent(catalog, model=model), ask(query), mode)
    assert out["categories"] == [c for c, _ in classify_lexical(catalog, query)]
    assert out["categories"][0] == "weather"
    assert "lexical" in caplog.text
    assert "astrology" in caplog.text


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_model_exception_falls_back_to_lexical_and_logs(
    catalog, mode, caplog
):
    model = ScriptedChatModel(responses=[_raise_timeout])
    with caplog.at_level(logging.WARNING, logger=INTENT_LOGGER):
        out = await run(ClassifyIntent(catalog, model=model), ask("weather in Lima"), mode)
    assert out["categories"][0] == "weather"
    assert "did not answer" in caplog.text
    assert "lexical" in caplog.text


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(choice("weather"), id="string-not-list"),
        pytest.param(choice([1, 2]), id="list-of-numbers"),
        pytest.param(choice({"weather": 1}), id="mapping"),
        pytest.param(
            AIMessage(
                "",
                tool_calls=[{"name": "CategoryChoice", "args": {"cats": ["weather"]}, "id": "c"}],
            ),
            id="wrong-field",
        ),
        pytest.param(AIMessage("weather"), id="plain-text-no-tool-call"),
        pytest.param(choice([]), id="empty-list"),
    ],
)
async def test_classify_intent_model_malformed_answer_falls_back_to_lexical_and_logs(
    catalog, mode, answer, caplog
):
    query = "send a message to the dev channel on slack"
    model = ScriptedChatModel(responses=[answer])
    with caplog.at_level(logging.WARNING, logger=INTENT_LOGGER):
        out = await run(ClassifyIntent(catalog, model=model), ask(query), mode)
    assert out["categories"] == [c for c, _ in classify_lexical(catalog, query)]
    assert out["categories"][0] == "slack"
    assert any("lexical" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_model_answer_is_capped_at_max_categories(catalog, mode):
    model = ScriptedChatModel(responses=[choice(["files", "github", "slack", "weather"])])
    out = await run(ClassifyIntent(catalog, model=model, max_categories=2), ask("x y z"), mode)
    assert out["categories"] == ["files", "github"]


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_model_not_called_without_user_text(catalog, mode):
    model = ScriptedChatModel(responses=[choice(["github"])])
    out = await run(ClassifyIntent(catalog, model=model), {"messages": []}, mode)
    assert out["categories"] == []
    assert model.calls == []


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_model_recovers_on_the_next_call(catalog, mode):
    model = ScriptedChatModel(responses=[_raise_timeout, choice(["database"])], cycle=False)
    node = ClassifyIntent(catalog, model=model)
    first = await run(node, ask("list the slack channels"), mode)
    second = await run(node, ask("list the slack channels"), mode)
    assert first["categories"][0] == "slack"
    assert second["categories"] == ["database"]


def test_category_choice_schema_is_a_list_of_names():
    assert CategoryChoice(categories=["a", "b"]).categories == ["a", "b"]
    assert CategoryChoice.model_json_schema()["properties"]["categories"]["type"] == "array"


@pytest.mark.parametrize("mode", MODES)
async def test_classify_intent_with_model_drives_select_tools_in_a_graph(catalog, mode):
    # The model picks database although the words say slack; select_tools follows the model.
    model = ScriptedChatModel(responses=[choice(["database"])])
    g = StateGraph(ToolBudgetState)
    g.add_node("classify_intent", ClassifyIntent(catalog, model=model))
    g.add_node("select_tools", SelectTools(catalog, max_tools=8))
    g.add_edge(START, "classify_intent")
    g.add_edge("classify_intent", "select_tools")
    g.add_edge("select_tools", END)
    graph = g.compile()
    state = ask("post the sales numbers to slack")
    out = graph.invoke(state) if mode == "sync" else await graph.ainvoke(state)
    assert out["categories"] == ["database"]
    assert set(catalog.tools_in("database")) <= set(out["selected_tools"])
    assert not set(catalog.tools_in("slack")) & set(out["selected_tools"])
