"""CodeMode: what a program's tool call returns when JSON cannot write the tool's value.

A tool returning a dict that holds a ``datetime`` or a ``Decimal`` (a database row, a calendar
event), or a pydantic model, gets a tool message whose content is the text of its repr; the
program gets the value itself as Python data. Only the chat model is scripted; the tools, the
graphs (the prebuilt agent, ``create_agent`` with the middleware) and the sandbox are real.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from decimal import Decimal
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel
from pydantic import v1 as pydantic_v1

from langgraph_toolbudget import (
    BudgetConfig,
    CallModel,
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    create_toolbudget_agent,
)
from langgraph_toolbudget.execution.codemode import PYTHON_EXECUTION, as_program_data
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
WHEN = datetime.datetime(2024, 1, 2, 9, 30, tzinfo=datetime.UTC)
OPTIONS: dict[str, Any] = {
    "enabled_builtins": ["python_execution"],
    "tool_call_formats": {"enabled": ["native", "codemode"], "primary": "codemode"},
    "max_tools": 0,
    "search_limit": 0,
}


class Status(enum.Enum):
    OPEN = "open"


class Line(BaseModel):
    sku: str
    price: Decimal


class Invoice(BaseModel):
    id: int
    due: datetime.date
    lines: list[Line]
    ref: uuid.UUID
    status: Status


@dataclasses.dataclass
class Slot:
    start: datetime.time
    length: datetime.timedelta


@tool
def get_event(event_id: int) -> dict:
    """A calendar event by id."""
    return {"id": event_id, "title": "Standup", "when": WHEN, "tags": {"daily"}}


@tool
async def get_order(order_id: int) -> dict:
    """An order by id (an async-only tool)."""
    return {"id": order_id, "total": Decimal("19.90"), "items": (1, 2), 7: "seven"}


@tool
def get_invoice(invoice_id: int) -> Invoice:
    """An invoice by id."""
    ref = uuid.UUID(int=invoice_id)
    line = Line(sku="A-1", price=Decimal("4.50"))
    return Invoice(
        id=invoice_id, due=datetime.date(2024, 2, 1), lines=[line], ref=ref, status="open"
    )


@tool
def get_total(order_id: int) -> Decimal:
    """An order's total."""
    return Decimal("19.90")


@tool
def get_slot(day: str) -> Slot:
    """The free slot of a day."""
    return Slot(datetime.time(9, 30), datetime.timedelta(minutes=45))


@tool(response_format="content_and_artifact")
def get_row(row_id: int) -> tuple[dict, dict]:
    """A database row, with the query as an artifact."""
    return {"id": row_id, "at": WHEN}, {"sql": "select ..."}


def _slow_event(event_id: int) -> dict:
    return {"id": event_id, "when": WHEN}


slow_event = StructuredTool.from_function(_slow_event, name="slow_event", description="An event.")
TOOLS = [get_event, get_order, get_invoice, get_total, get_slot, get_row, slow_event]
PROGRAM = """
e = get_event(event_id=7)
o = get_order(order_id=8)
i = get_invoice(invoice_id=9)
s = get_slot(day='mon')
r = get_row(row_id=10)
w = slow_event(event_id=11)
print(e['id'], e['when'].year, e['when'].isoformat(), e['tags'])
print(o['id'], o['total'] * 2, o['items'], o['7'])
print(i['id'], i['due'].month, i['lines'][0]['price'] + 1, i['ref'], i['status'])
print(s['start'].hour, s['length'].total_seconds())
print(r['id'], r['at'].day, w['id'], w['when'] == e['when'], get_total(order_id=1) * 2)
type(e).__name__, type(i).__name__, type(s).__name__
"""
EXPECTED = (
    "7 2024 2024-01-02T09:30:00+00:00 ['daily']\n"
    "8 39.80 [1, 2] seven\n"
    "9 2 5.50 00000000-0000-0000-0000-000000000009 open\n"
    "9 2700.0\n"
    "10 2 11 True 39.80\n"
    '["dict", "dict", "dict"]'
)


def program(code: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": PYTHON_EXECUTION, "args": {"code": code}, "id": "p1"}]
    )


def catalog() -> ToolCatalog:
    return ToolCatalog.from_tools(TOOLS, tool_metadata={"slow_event": {"timeout_s": 5}})


async def run(app: Any, api: str) -> dict[str, Any]:
    payload = {"messages": [HumanMessage("go")]}
    return app.invoke(payload) if api == "invoke" else await app.ainvoke(payload)


def answer_of(out: dict[str, Any]) -> ToolMessage:
    return next(m for m in out["messages"] if isinstance(m, ToolMessage))


@pytest.mark.parametrize("api", APIS)
async def test_a_value_json_cannot_write_reaches_the_program_as_python_data(api):
    model = ScriptedChatModel(responses=[program(PROGRAM), AIMessage("done")], cycle=False)
    names = [t.name for t in TOOLS]
    graph = create_toolbudget_agent(model, catalog(), pinned=names, **OPTIONS).compile()
    answer = answer_of(await run(graph, api))
    assert answer.status == "success", answer.content
    assert answer.content == EXPECTED


@pytest.mark.parametrize("api", APIS)
async def test_the_middleware_gives_the_program_the_same_data(api):
    model = ScriptedChatModel(responses=[program(PROGRAM), AIMessage("done")], cycle=False)
    middleware = ToolBudgetMiddleware(catalog(), pinned=[t.name for t in TOOLS], **OPTIONS)
    answer = answer_of(await run(create_agent(model, middleware=[middleware]), api))
    assert answer.content == EXPECTED


@pytest.mark.parametrize("api", APIS)
async def test_the_tool_messages_the_graph_stores_are_toolnodes_text_as_before(api):
    calls = [
        {"name": "get_event", "args": {"event_id": 7}, "id": "c1"},
        {"name": "get_invoice", "args": {"invoice_id": 9}, "id": "c2"},
        {"name": "get_row", "args": {"row_id": 10}, "id": "c3"},
    ]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), AIMessage("done")])
    names = [t.name for t in TOOLS]
    options = {**OPTIONS, "tool_call_formats": None}
    out = await run(
        create_toolbudget_agent(model, catalog(), pinned=names, **options).compile(), api
    )
    ours = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    toolnode = StateGraph(MessagesState)
    toolnode.add_node("tools", ToolNode(TOOLS))
    toolnode.add_edge(START, "tools")
    reply = {"messages": [AIMessage("", tool_calls=calls)]}
    theirs = toolnode.compile().invoke(reply)["messages"][1:]
    assert [(m.content, m.artifact) for m in ours] == [(m.content, m.artifact) for m in theirs]
    assert ours[0].content.startswith("{'id': 7, 'title': 'Standup', 'when': datetime.datetime(")


@pytest.mark.parametrize("api", APIS)
async def test_a_hook_that_changes_the_result_is_what_the_program_gets(api):
    def redact(request: Any, execute: Any) -> Any:
        result = execute(request)
        if request.tool_call["name"] == "get_row":
            return result.model_copy(update={"content": "redacted"})
        return result

    code = "print(get_row(row_id=1), get_event(event_id=2)['when'].year)"
    model = ScriptedChatModel(responses=[program(code), AIMessage("done")], cycle=False)
    config = BudgetConfig(pinned=["get_row", "get_event"], **OPTIONS)
    graph = StateGraph(ToolBudgetState)
    graph.add_node("agent", CallModel(model, catalog(), config=config))
    graph.add_node("tools", ToolExecutor(catalog(), config=config, wrap_tool_call=redact))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    assert answer_of(await run(graph.compile(), api)).content == "redacted 2024"


def test_as_program_data_writes_what_the_sandbox_cannot_hold_as_json_would():
    class Sub(int):
        pass

    class Old(pydantic_v1.BaseModel):
        due: datetime.date

    value = {1: Sub(3), None: frozenset(), Status.OPEN: [WHEN.date()], WHEN: Old(due=WHEN)}
    data = as_program_data(value)
    assert data == {
        "1": 3,
        "null": [],
        "open": [WHEN.date()],
        WHEN.isoformat(): {"due": WHEN.date()},
    }
    assert type(data["1"]) is int
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(RecursionError):
        as_program_data({"a": loop})


async def test_a_value_that_contains_itself_reaches_the_program_as_its_text():
    @tool
    def cyclic() -> dict:
        """A value that contains itself."""
        value: dict[str, Any] = {"when": WHEN}
        value["self"] = value
        return value

    model = ScriptedChatModel(
        responses=[program("c = cyclic()\nprint(type(c).__name__, c[:8])"), AIMessage("done")],
        cycle=False,
    )
    catalog = ToolCatalog.from_tools([cyclic])
    graph = create_toolbudget_agent(model, catalog, pinned=["cyclic"], **OPTIONS).compile()
    assert answer_of(await run(graph, "ainvoke")).content == "str {'when':"


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_that_keeps_state_on_itself_keeps_it_when_a_program_calls_it(api):
    class Counter(BaseTool):
        name: str = "next_ticket"
        description: str = "The next ticket number, with when it was issued."
        issued: int = 0

        def _run(self) -> dict:
            self.issued += 1
            return {"n": self.issued, "at": WHEN}

    counter = Counter()
    code = "a = next_ticket()\nb = next_ticket()\nprint(a['n'], b['n'], b['at'].year)"
    model = ScriptedChatModel(responses=[program(code), AIMessage("done")], cycle=False)
    graph = create_toolbudget_agent(
        model, ToolCatalog.from_tools([counter]), pinned=["next_ticket"], **OPTIONS
    ).compile()
    assert answer_of(await run(graph, api)).content == "1 2 2024"
    assert counter.issued == 2
