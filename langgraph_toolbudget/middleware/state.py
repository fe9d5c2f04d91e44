"""The agent state of ``ToolBudgetMiddleware``.

Key Components:
    - :class:`ToolBudgetAgentState`: ``create_agent``'s state plus the budget's fields.
    - :data:`STILL_CALLABLE`: the private field through which ``after_model`` tells
      ``wrap_tool_call`` about the latest reply: the tools that stay callable in the rest of
      it, and its batch.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentState
from langchain.agents.middleware.types import OmitFromInput, OmitFromSchema

from langgraph_toolbudget.core.context import merge_decisions, merge_modes
from langgraph_toolbudget.state import (
    merge_counts,
    merge_names,
    merge_reasons,
    replace_categories,
    replace_scores,
)

__all__ = ["STILL_CALLABLE", "TURN", "ToolBudgetAgentState"]

STILL_CALLABLE = "toolbudget_still_callable"
"""``{"reply": <AI message id>, "tools": [...], "batch": <key>}``, written by ``after_model``
for each reply that calls tools (ignored once a later reply is the latest). ``tools``: those
the model was shown with that reply which the reply's own built-in calls took out of the
visible set; they stay callable in the rest of that reply, as under ``ToolExecutor``.
``batch``: a key made for the reply in its run, under which its calls take their turns
(two runs' replies may share an id; a resumed run reads the same key from its checkpoint)."""


TURN = "toolbudget_turn"
"""``{"user": <id of the message that started the turn>, "model_calls": <n>, "entry": <id of
the last message when the agent was entered>}``, written by ``before_agent`` each time the
agent is entered (``model_calls`` 0) and by ``after_model`` after each model call.

The agent's turn starts at the later of its user message and its entry: in a multi-agent graph
(a supervisor, a swarm) the turn's messages before the entry are other agents', whose model
calls neither spend this agent's ``max_iterations`` and ``max_meta_calls`` nor make its first
model call a later one (which would skip the selection). ``model_calls`` is kept beside the
messages because LangChain's ``SummarizationMiddleware`` may replace a turn's messages (its
user message and the entry included) with a summary mid-turn, and ``max_iterations`` must
still end the turn."""


class ToolBudgetAgentState(AgentState[Any]):
    """``create_agent``'s state plus the tool budget's fields (names only, JSON-friendly).

    The fields and their reducers are those of
    :class:`~langgraph_toolbudget.state.ToolBudgetState`; they are left out of the agent's
    input schema (``OmitFromInput``), so a run's input cannot make a tool visible or change
    the tool context.
    """

    # Written by the middleware and the management operations, never by a run's input (the
    # reducer comes last in Annotated: LangGraph reads the last item as the reducer).
    categories: NotRequired[Annotated[list[str], OmitFromInput, replace_categories]]
    category_scores: NotRequired[Annotated[dict[str, float], OmitFromInput, replace_scores]]
    selected_tools: NotRequired[Annotated[list[str], OmitFromInput, merge_names]]
    discovered_tools: NotRequired[Annotated[list[str], OmitFromInput, merge_names]]
    tool_last_used: NotRequired[Annotated[dict[str, int], OmitFromInput, merge_counts]]
    context_tools: NotRequired[Annotated[dict[str, str], OmitFromInput, merge_decisions]]
    context_servers: NotRequired[Annotated[dict[str, str], OmitFromInput, merge_decisions]]
    context_tool_modes: NotRequired[Annotated[dict[str, str], OmitFromInput, merge_modes]]
    context_server_modes: NotRequired[Annotated[dict[str, str], OmitFromInput, merge_modes]]
    tool_reasons: NotRequired[Annotated[dict[str, dict[str, Any]], OmitFromInput, merge_reasons]]
    # private (not in the graph's input or output): see STILL_CALLABLE and TURN
    toolbudget_still_callable: NotRequired[
        Annotated[dict[str, Any], OmitFromSchema(input=True, output=True)]
    ]
    toolbudget_turn: NotRequired[Annotated[dict[str, Any], OmitFromSchema(input=True, output=True)]]
