"""CodeMode: ``python_execution`` runs the model's Python over its tools in a real sandbox.

Only the chat model is scripted (``ScriptedChatModel``); the tools are real ``@tool``
functions that record each run, the graphs real (the prebuilt agent, the nodes, the
middleware under ``create_agent``), the sandbox real (``pydantic-monty`` worker processes).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import pytest
from agent_tools import ConcurrencyProbe, ai_calls, call, fetch_tool, needs_aliased_fields
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.store.memory import InMemoryStore
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic import v1 as pydantic_v1

from langgraph_toolbudget import (
    BudgetConfig,
    CallModel,
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    create_toolbudget_agent,
    exclude_tools,
    update_context,
)
from langgraph_toolbudget.execution import sandbox
from langgraph_toolbudget.execution.builtins import Builtins
from langgraph_toolbudget.execution.codemode import PYTHON_EXECUTION, as_python_data
from langgraph_toolbudget.formats import get_format
from langgraph_toolbudget.testing import ScriptedChatModel

APIS = ["invoke", "ainvoke"]
CODEMODE = {"enabled": ["native", "codemode"], "primary": "codemode"}
TEMPS = {
    "Paris": 24, "Rome": 29, "Oslo": 12, "Lima": 26, "Cairo": 35,
    "Tokyo": 22, "Delhi": 38, "Quito": 19, "Perth": 27, "Dublin": 15,
}  # fmt: skip
RUNS: list[tuple[str, dict[str, Any]]] = []


@tool
def get_forecast(city: str) -> dict:
    """Tomorrow's weather forecast for a city: temperature in degrees C and the sky."""
    RUNS.append(("get_forecast", {"city": city}))
    return {"city": city, "temp_c": TEMPS[city], "sky": "sunny"}


@tool
def list_cities(region: str = "world") -> list[str]:
    """List the cities the forecast service covers."""
    RUNS.append(("list_cities", {"region": region}))
    return list(TEMPS)


@tool
def flaky(x: int) -> int:
    """Double a number, when the service is up."""
    RUNS.append(("flaky", {"x": x}))
    raise ValueError(f"the service broke on x={x}")


@tool
async def exchange_rate(currency: str) -> float:
    """The exchange rate of a currency to the euro (an async-only tool)."""
    RUNS.append(("exchange_rate", {"currency": currency}))
    return {"USD": 0.9, "GBP": 1.2}[currency]


@tool
def send_email(to: str, body: str) -> str:
    """Send an email to someone."""
    RUNS.append(("send_email", {"to": to}))
    return "sent"


@tool
def purge_records(confirm: bool) -> str:
    """Delete every record (disabled in this app)."""
    RUNS.append(("purge_records", {}))
    return "purged"


@tool
def admin_shutdown(reason: str) -> str:
    """Shut the service down (filtered out of this app)."""
    RUNS.append(("admin_shutdown", {}))
    return "down"


VISIBLE = ["get_forecast", "list_cities", "flaky", "exchange_rate"]


def make_catalog() -> ToolCatalog:
    return ToolCatalog.from_tools(
        [
            get_forecast,
            list_cities,
            flaky,
            exchange_rate,
            send_email,
            purge_records,
            admin_shutdown,
        ],
        categories={
            "weather": ["get_forecast", "list_cities"],
            "money": ["exchange_rate"],
            "misc": ["flaky", "send_email", "purge_records", "admin_shutdown"],
        },
        tool_metadata={"purge_records": {"status": "disabled"}},
        allowed_tools=[n for n in [*VISIBLE, "send_email", "purge_records"]],
    )


OPTIONS: dict[str, Any] = {
    "enabled_builtins": ["python_execution"],
    "tool_call_formats": CODEMODE,
    "pinned": VISIBLE,
    "max_tools": 0,
    "search_limit": 0,
}


@pytest.fixture(autouse=True)
def _fresh_runs() -> None:
    RUNS.clear()


def program(code: str, call_id: str = "p1") -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": PYTHON_EXECUTION, "args": {"code": code}, "id": call_id}]
    )


async def run(app: Any, payload: Any, api: str, config: dict | None = None) -> dict[str, Any]:
    if api == "invoke":
        return app.invoke(payload, config)
    return await app.ainvoke(payload, config)


async def run_code(
    code: str, api: str = "invoke", *, query: str = "forecast please", **options: Any
) -> tuple[ToolMessage, dict[str, Any], ScriptedChatModel]:
    """One turn of the prebuilt agent whose model runs ``code``, then answers."""
    model = ScriptedChatModel(responses=[program(code), AIMessage("done")], cycle=False)
    graph = create_toolbudget_agent(model, make_catalog(), **{**OPTIONS, **options}).compile()
    out = await run(graph, {"messages": [HumanMessage(query)]}, api)
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert out["messages"][-1].content == "done"  # the graph went on to the next model call
    return answer, out, model


# --- what a program can do ------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_a_chain_over_two_tools_prints_what_the_model_needs(api):
    code = (
        "cities = list_cities(region='world')\n"
        "hot = [c for c in cities if get_forecast(city=c)['temp_c'] > 25]\n"
        "print('hot:', hot)\n"
        "len(hot)"
    )
    answer, _, model = await run_code(code, api)
    assert answer.status == "success"
    assert answer.content == "hot: ['Rome', 'Lima', 'Cairo', 'Delhi', 'Perth']\n5"
    assert [n for n, _ in RUNS] == ["list_cities"] + ["get_forecast"] * 10
    assert answer.artifact == {"codemode": {"tool_calls": 11, "seconds": pytest.approx(0, abs=30)}}
    assert model.bound_tools[0] == [PYTHON_EXECUTION]  # codemode primary: only it is bound


@pytest.mark.parametrize(
    "args",
    [{"query": "get_forecast(city='Rome')"}, {"Tool": "get_forecast"}, {"CODE": "1 + 1"}, 5, ["x"]],
)
async def test_a_lone_argument_under_another_name_is_never_run_as_a_program(args):
    # Built-in calls are coerced as catalog tools' are, but not this one: a lone text under
    # another name went to `code` and ran (a tool call included), or failed as "NameError".
    call = {"name": PYTHON_EXECUTION, "args": {}, "id": "p1"}
    reply = AIMessage("", tool_calls=[call])
    reply.tool_calls[0]["args"] = args  # arguments that are no object: as a model node may
    model = ScriptedChatModel(responses=[reply, AIMessage("done")], cycle=False)
    graph = create_toolbudget_agent(model, make_catalog(), **OPTIONS).compile()
    out = await run(graph, {"messages": [HumanMessage("forecast please")]}, "invoke")
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert answer.status == "error"
    assert answer.content.startswith("Error: python_execution needs 'code'"), answer.content
    assert RUNS == []


@pytest.mark.parametrize("code", ["", "   ", None, 42])
async def test_a_call_without_code_is_answered_with_a_call_that_works(code):
    answer, _, _ = await run_code(code)
    assert answer.status == "error"
    assert answer.content.startswith("Error: python_execution needs 'code'")
    assert "{{" not in answer.content
    example = answer.content.split("e.g. ", 1)[1].rstrip(".")
    assert list(json.loads(example)) == ["code"]


@pytest.mark.parametrize("api", APIS)
async def test_a_loop_of_twenty_calls_and_an_async_only_tool(api):
    code = (
        "total = 0\n"
        "for i in range(20):\n"
        f"    total += get_forecast(city={list(TEMPS)!r}[i % 10])['temp_c']\n"
        "rates = [exchange_rate(currency=c) for c in ('USD', 'GBP')]\n"
        "print(total, rates)"
    )
    answer, _, _ = await run_code(code, api)
    assert answer.status == "success", answer.content
    assert answer.content == f"{2 * sum(TEMPS.values())} [0.9, 1.2]"
    assert [n for n, _ in RUNS].count("get_forecast") == 20
    assert answer.artifact["codemode"]["tool_calls"] == 22


async def test_a_positional_argument_fills_the_parameter_and_results_are_python_data():
    code = (
        "f = get_forecast('Oslo')\n"
        "print(type(f).__name__, f['temp_c'], type(list_cities()).__name__)"
    )
    answer, _, _ = await run_code(code)
    assert answer.content == "dict 12 list"
    assert as_python_data('{"a": [1, 2]}') == {"a": [1, 2]}
    assert as_python_data("Oslo: 12C") == "Oslo: 12C"
    assert as_python_data([{"type": "text", "text": '{"x": 1}'}]) == {"x": 1}  # MCP text blocks


class CopyArgs(BaseModel):
    dest: str = Field("/backup", description="Where to copy to.")  # optional, listed first
    src: str = Field(description="The file to copy.")


def _copy(src: str, dest: str = "/backup") -> str:
    RUNS.append(("copy_file", {"src": src, "dest": dest}))
    return f"copied {src} -> {dest}"


copy_file = StructuredTool.from_function(
    _copy, name="copy_file", description="Copy a file.", args_schema=CopyArgs
)


def test_positional_arguments_take_the_order_of_the_signature_the_model_reads():
    model = ScriptedChatModel(
        responses=[program("copy_file('/etc/app.conf', '/tmp/out.conf')"), AIMessage("done")],
        cycle=False,
    )
    catalog = ToolCatalog.from_tools([copy_file])
    graph = create_toolbudget_agent(model, catalog, **{**OPTIONS, "pinned": ["copy_file"]})
    graph.compile().invoke({"messages": [HumanMessage("copy the config")]})
    assert "def copy_file(src: str, dest: str = '/backup')" in model.calls[0][0].content
    assert RUNS == [("copy_file", {"src": "/etc/app.conf", "dest": "/tmp/out.conf"})]


SIGNATURE = "its signature is copy_file(src: str, dest: str = '/backup')"


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("copy_file('/x', src='/y')", "got multiple values for argument 'src'"),
        ("call_tool('copy_file', '/x', src='/y')", "got multiple values for argument 'src'"),
        ("copy_file('/x', '/y', '/z')", "takes from 1 to 2 positional arguments but 3 were given"),
        ("copy_file(dest='/a')", "missing 1 required argument: 'src'"),
        ("copy_file('/a', destination='/b')", "got an unexpected keyword argument 'destination'"),
    ],
)
def test_a_call_python_would_refuse_for_its_signature_raises_in_pythons_words(code, problem):
    model = ScriptedChatModel(responses=[program(code), AIMessage("done")], cycle=False)
    catalog = ToolCatalog.from_tools([copy_file])
    graph = create_toolbudget_agent(model, catalog, **{**OPTIONS, "pinned": ["copy_file"]})
    out = graph.compile().invoke({"messages": [HumanMessage("copy the config")]})
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert answer.status == "error"
    assert f"TypeError: copy_file() {problem}; {SIGNATURE}" in answer.content
    assert RUNS == []  # nothing ran: not with dest='/x', not with the default '/backup'


async def test_keywords_coercion_maps_are_no_unknown_ones():
    code = "print(get_forecast(town='Lima')['temp_c'], get_forecast(City='Oslo')['temp_c'])"
    answer, _, _ = await run_code(code)
    assert answer.content == "26 12"
    answer, _, _ = await run_code("get_forecast(city='Oslo', days=3)")
    assert "get_forecast() got an unexpected keyword argument 'days'" in answer.content
    assert "its signature is get_forecast(city: str)" in answer.content


class RouteArgs(BaseModel):
    from_: str = Field(alias="from", description="Where the trip starts.")  # a Python keyword
    to: str


class RouteByNameArgs(RouteArgs):
    model_config = ConfigDict(populate_by_name=True)


def _route(from_: str, to: str) -> str:
    RUNS.append(("plan_route", {"from_": from_, "to": to}))
    return f"{from_} -> {to}"


def _route_tool(args_schema: type[BaseModel]) -> BaseTool:
    return StructuredTool.from_function(
        _route, name="plan_route", description="Plan a trip.", args_schema=args_schema
    )


ROUTE_SIGNATURE = "its signature is plan_route(from_: str, to: str)"


@needs_aliased_fields
@pytest.mark.parametrize("args_schema", [RouteArgs, RouteByNameArgs])
@pytest.mark.parametrize(
    "code",
    [
        "plan_route(from_='Oslo', to='Rome')",  # the name the signature shows
        "plan_route(**{'from': 'Oslo'}, to='Rome')",  # the alias the tool validates
        "plan_route('Oslo', 'Rome')",
        "call_tool('plan_route', **{'from': 'Oslo', 'to': 'Rome'})",
    ],
)
def test_a_pydantic_field_with_an_alias_is_called_by_its_name_or_its_alias(args_schema, code):
    # Was "from: Field required" for every spelling (the alias: "unexpected keyword argument").
    route = _route_tool(args_schema)
    model = ScriptedChatModel(responses=[program(f"print({code})"), AIMessage("done")], cycle=False)
    graph = create_toolbudget_agent(
        model, ToolCatalog.from_tools([route]), **{**OPTIONS, "pinned": ["plan_route"]}
    )
    out = graph.compile().invoke({"messages": [HumanMessage("plan the trip")]})
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert answer.status == "success", answer.content
    assert answer.content == "Oslo -> Rome" == route.invoke({"from": "Oslo", "to": "Rome"})
    assert RUNS == [("plan_route", {"from_": "Oslo", "to": "Rome"})] * 2  # the program's, invoke's
    # the signature the model reads names the field as the program can write it
    assert "def plan_route(from_: str, to: str) -> Any:" in model.calls[0][0].content


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("plan_route(to='Rome')", "missing 1 required argument: 'from_'"),
        (
            "plan_route('Oslo', **{'from': 'Bergen'}, to='Rome')",
            "got multiple values for argument 'from_'",
        ),
        (
            "plan_route(from_='Oslo', to='Rome', **{'from': 'Bergen'})",
            "got multiple values for argument 'from_'",
        ),
        (
            "plan_route(**{'from_x': 'Oslo'}, to='Rome')",
            "got an unexpected keyword argument 'from_x'",
        ),
    ],
)
def test_an_aliased_field_missing_or_given_twice_is_a_type_error_in_pythons_words(code, problem):
    model = ScriptedChatModel(responses=[program(code), AIMessage("done")], cycle=False)
    catalog = ToolCatalog.from_tools([_route_tool(RouteArgs)])
    graph = create_toolbudget_agent(model, catalog, **{**OPTIONS, "pinned": ["plan_route"]})
    out = graph.compile().invoke({"messages": [HumanMessage("plan the trip")]})
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert answer.status == "error"
    assert f"TypeError: plan_route() {problem}; {ROUTE_SIGNATURE}" in answer.content
    assert RUNS == []


class _OpenArgs(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


class _PlainArgs(BaseModel):
    a: int


class _ClosedArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int


class _OpenV1Args(pydantic_v1.BaseModel):
    a: int

    class Config:
        extra = pydantic_v1.Extra.allow


def _record(**kwargs: Any) -> str:
    RUNS.append(("shape", kwargs))
    return f"got {sorted(kwargs)}"


class _KwargsTool(BaseTool):
    name: str = "shape"
    description: str = "A tool without a schema whose body takes **kwargs."

    def _run(self, a: int, **kwargs: Any) -> str:
        return _record(a=a, **kwargs)


def _shape(args_schema: Any) -> BaseTool:
    return StructuredTool(
        name="shape", description="A tool.", func=_record, args_schema=args_schema
    )


@tool("shape")
def _dropping_kwargs(a: int, **kwargs: Any) -> str:
    """A function tool taking **kwargs: langchain's schema drops a keyword it does not name."""
    return _record(a=a, **kwargs)


JSON_A = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize(
    ("shape", "takes_b"),
    [
        pytest.param(_shape(_OpenArgs), True, id="pydantic-extra-allow"),
        pytest.param(_shape(_OpenV1Args), True, id="pydantic-v1-extra-allow"),
        pytest.param(_shape(JSON_A), True, id="json-no-additionalProperties"),
        pytest.param(_shape({**JSON_A, "additionalProperties": True}), True, id="json-open"),
        pytest.param(_shape({"type": "object"}), True, id="json-no-properties"),
        pytest.param(_KwargsTool(), True, id="no-schema-run-takes-kwargs"),
        pytest.param(_shape(_PlainArgs), False, id="pydantic-drops"),
        pytest.param(_shape(_ClosedArgs), False, id="pydantic-extra-forbid"),
        pytest.param(_shape({**JSON_A, "additionalProperties": False}), False, id="json-closed"),
        pytest.param(_dropping_kwargs, False, id="function-kwargs-dropped"),
    ],
)
@pytest.mark.parametrize("api", APIS)
async def test_an_unknown_keyword_is_refused_exactly_when_the_tool_would_drop_or_refuse_it(
    api, shape, takes_b
):
    """A keyword the model-read signature does not name reaches the tool when the tool takes
    it (a direct ``invoke`` passes it to the body), and raises ``TypeError`` when the tool
    would drop or refuse it: CodeMode neither loses an argument nor refuses a good call."""
    if not isinstance(shape.args_schema, dict):
        # langchain validates a pydantic schema, not a JSON one (the server behind it does,
        # as "additionalProperties": false declares): the tool's own way, called directly
        try:
            direct = shape.invoke({"a": 1, "b": "x"})
        except ValidationError as error:  # extra="forbid"
            direct = error
        assert (RUNS[-1:] == [("shape", {"a": 1, "b": "x"})]) is takes_b, direct
        RUNS.clear()
    model = ScriptedChatModel(responses=[program("shape(a=1, b='x')"), AIMessage("done")])
    catalog = ToolCatalog.from_tools([shape])
    graph = create_toolbudget_agent(model, catalog, **{**OPTIONS, "pinned": ["shape"]})
    out = await run(graph.compile(), {"messages": [HumanMessage("go")]}, api)
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    if takes_b:
        assert answer.status == "success", answer.content
        assert answer.content == "got ['a', 'b']"
        assert RUNS == [("shape", {"a": 1, "b": "x"})]
    else:
        assert answer.status == "error"
        assert "TypeError: shape() got an unexpected keyword argument 'b'" in answer.content
        assert RUNS == []


# --- refusals: the executor's own checks, inside the program --------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_hidden_disabled_filtered_and_unknown_tools_raise_the_executors_message(api):
    names = ["send_email", "purge_records", "admin_shutdown", "get_forcast"]
    args = {"to": "a", "body": "b"}
    code = "\n".join(
        f"try:\n    {n}(**{args!r})\nexcept PermissionError as e:\n    print('{n}:', e)"
        for n in names
    )
    answer, _, _ = await run_code(code, api)
    assert RUNS == []  # nothing ran
    # The same calls made directly: the executor's refusals, word for word.
    direct = ScriptedChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[{"name": n, "args": args, "id": f"d{i}"} for i, n in enumerate(names)],
            ),
            AIMessage("done"),
        ],
        cycle=False,
    )
    graph = create_toolbudget_agent(direct, make_catalog(), **OPTIONS).compile()
    out = await run(graph, {"messages": [HumanMessage("forecast please")]}, api)
    refusals = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answer.content == "\n".join(f"{n}: {r}" for n, r in zip(names, refusals, strict=True))
    assert "not loaded" in refusals[0] and "disabled" in refusals[1]
    assert "filtered out" in refusals[2] and "Closest tools: get_forecast" in refusals[3]


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_excluded_from_the_thread_raises_inside_the_program(api):
    model = ScriptedChatModel(
        responses=[AIMessage("ok"), program("get_forecast(city='Rome')"), AIMessage("done")],
        cycle=False,
    )
    graph = create_toolbudget_agent(model, make_catalog(), **OPTIONS).compile(
        checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "t"}}
    await run(graph, {"messages": [HumanMessage("hi")]}, api, thread)
    graph.update_state(thread, exclude_tools(tools=["get_forecast"]))
    out = await run(graph, {"messages": [HumanMessage("forecast please")]}, api, thread)
    answer = next(m for m in reversed(out["messages"]) if isinstance(m, ToolMessage))
    assert answer.status == "error" and RUNS == []
    assert "PermissionError" in answer.content and "excluded from this conversation" in (
        answer.content
    )


@pytest.mark.parametrize("api", APIS)
async def test_a_program_cannot_include_again_a_tool_the_user_excluded(api):
    """The context tools a program calls are the model's: ``include_tool`` of a tool the
    user excluded raises inside the program, and the tool still cannot run."""
    code = (
        "try:\n    include_tool(tool='get_forecast')\nexcept RuntimeError as e:\n"
        "    print(e)\nget_forecast(city='Rome')"
    )
    model = ScriptedChatModel(responses=[program(code), AIMessage("done")], cycle=False)
    options = {**OPTIONS, "enabled_builtins": [PYTHON_EXECUTION, "include_tool"]}
    graph = create_toolbudget_agent(model, make_catalog(), **options).compile(
        checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "t"}}
    update_context(graph, thread, exclude_tools(tools=["get_forecast"]))
    out = await run(graph, {"messages": [HumanMessage("forecast please")]}, api, thread)
    answer = next(m for m in out["messages"] if m.type == "tool" and m.tool_call_id == "p1")
    assert answer.status == "error" and RUNS == []
    assert "only the user can include it again" in answer.content
    assert "PermissionError" in answer.content
    assert out["context_tools"] == {"get_forecast": "exclude"}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("where", ["before the program", "in the program"])
async def test_a_tool_excluded_earlier_in_the_batch_raises_inside_the_program(api, where):
    exclude = {"name": "exclude_tool", "args": {"tool": "get_forecast"}, "id": "x"}
    if where == "in the program":
        reply = program("exclude_tool(tool='get_forecast')\nget_forecast(city='Rome')")
    else:
        reply = AIMessage(
            "", tool_calls=[exclude, *program("get_forecast(city='Rome')").tool_calls]
        )
    model = ScriptedChatModel(responses=[reply, AIMessage("done")], cycle=False)
    options = {**OPTIONS, "enabled_builtins": [PYTHON_EXECUTION, "exclude_tool"]}
    graph = create_toolbudget_agent(model, make_catalog(), **options).compile()
    out = await run(graph, {"messages": [HumanMessage("forecast please")]}, api)
    answer = next(m for m in out["messages"] if m.type == "tool" and m.tool_call_id == "p1")
    assert answer.status == "error" and RUNS == []
    assert "PermissionError" in answer.content and "excluded from this conversation" in (
        answer.content
    )
    assert out["context_tools"] == {"get_forecast": "exclude"}


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_that_raises_is_an_exception_the_program_may_catch(api):
    code = "try:\n    flaky(x=2)\nexcept RuntimeError as e:\n    print('caught:', e)\nflaky(x=3)\n"
    answer, _, _ = await run_code(code, api)
    assert answer.status == "error"
    assert "caught: Error" in answer.content and "x=2" in answer.content
    assert answer.content.startswith("Error: the program raised an exception")
    assert 'File "<code>", line 5' in answer.content and "x=3" in answer.content
    assert [n for n, _ in RUNS] == ["flaky", "flaky"]


async def test_python_execution_cannot_call_itself_and_call_tool_reaches_any_name():
    code = (
        "print(call_tool('get_forecast', city='Rome')['temp_c'])\n"
        "try:\n    python_execution(code='1')\nexcept RuntimeError as e:\n    print(e)"
    )
    answer, _, _ = await run_code(code)
    assert answer.content == (
        "29\npython_execution cannot be called from inside a program: call the tools directly."
    )


async def test_the_builtins_are_functions_too_and_a_tool_loaded_in_the_program_is_callable():
    code = (
        "found = search_tools(query='email')\n"
        "print([t['name'] for t in found['tools']])\n"
        "print(add_tool(tool_names=['send_email']))\n"
        "print(send_email(to='ana', body='hot cities'))"
    )
    answer, out, _ = await run_code(
        code, enabled_builtins=["python_execution", "search_tools", "add_tool"]
    )
    assert answer.status == "success", answer.content
    assert "['send_email']" in answer.content and answer.content.endswith("sent")
    assert "send_email" in out["selected_tools"]  # the load stays for the next turns
    assert RUNS == [("send_email", {"to": "ana"})]


# --- the sandbox: no files, network or processes; limits ------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("open('/etc/passwd').read()", "PermissionError"),
        ("open('/tmp/toolbudget-escape.txt', 'w').write('x')", "PermissionError"),
        ("import os\nos.listdir('/')", "PermissionError"),
        ("import os\nos.environ['HOME']", "Error"),
        ("import subprocess", "ModuleNotFoundError"),
        ("import socket", "ModuleNotFoundError"),
        ("import urllib.request", "ModuleNotFoundError"),
        ("__import__('os').system('id')", "'__import__' is not a tool of this app"),
        ("import sys\nsys.exit(1)", "AttributeError"),
    ],
)
async def test_files_network_and_subprocesses_are_out_of_reach(code, expected, tmp_path):
    answer, _, _ = await run_code(code)
    assert answer.status == "error" and expected in answer.content, answer.content
    assert not (tmp_path.parent / "toolbudget-escape.txt").exists()


async def test_an_endless_loop_is_stopped_at_the_time_limit_and_the_graph_goes_on():
    started = time.monotonic()
    answer, _, _ = await run_code("while True:\n    pass", codemode_timeout_s=1)
    assert time.monotonic() - started < 10
    assert answer.status == "error"
    assert answer.content.startswith("Error: the program was stopped at its time limit of 1 s")
    assert "codemode_timeout_s" in answer.content


async def test_a_program_stopped_inside_one_long_operation_is_told_the_time_limit():
    """The sandbox raises its TimeoutError between two steps; inside one long step (a
    multiplication of huge numbers) the pool kills the worker a grace second later. The
    model was told the sandbox stopped and to run the program again, which did the same."""
    started = time.monotonic()
    code = "x = 7**(3 * 10**7)\ny = x * x  # about 25 s in one operation\n1"
    answer, _, _ = await run_code(code, codemode_timeout_s=0.5)
    assert time.monotonic() - started < 10
    assert answer.status == "error" and answer.content == (
        "Error: the program was stopped at its time limit of 0.5 s (codemode_timeout_s): it was "
        "still inside one long operation (e.g. arithmetic on huge numbers) after 0.5 s, so its "
        "worker was stopped\nDo less per program (fewer items, no endless loop), or run the rest "
        "in another program."
    )
    assert answer.artifact["codemode"]["stopped"] == "timeout"


async def test_the_time_limit_counts_the_tool_calls_too():
    code = "for i in range(1000):\n    get_forecast(city='Rome')\n    slow()"

    @tool
    def slow() -> str:
        """A slow call."""
        time.sleep(0.2)
        return "ok"

    catalog = ToolCatalog.from_tools([get_forecast, slow])
    model = ScriptedChatModel(responses=[program(code), AIMessage("done")], cycle=False)
    options = {**OPTIONS, "pinned": ["get_forecast", "slow"], "codemode_timeout_s": 0.5}
    out = (
        create_toolbudget_agent(model, catalog, **options)
        .compile()
        .invoke({"messages": [HumanMessage("go")]})
    )
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert "time limit reached" in answer.content and len(RUNS) <= 4


async def test_a_memory_bomb_is_stopped_at_the_memory_limit():
    answer, _, _ = await run_code("x = [0] * 10**10", codemode_max_memory_mb=20)
    assert answer.status == "error"
    assert "more than its memory limit of 20 MB (codemode_max_memory_mb)" in answer.content


def _records(n: int) -> str:
    return json.dumps(
        [
            {"id": i, "customer": f"customer {i}", "total": i * 1.5, "city": "Paris"}
            for i in range(n)
        ]
    )


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_result_too_large_for_the_memory_limit_names_the_limit_and_the_tool(api):
    @tool
    def list_orders() -> str:
        """All orders, as JSON records."""
        return _records(25_000)  # 2.2 MB of JSON: ~50 MB in the sandbox, its worker killed

    model = ScriptedChatModel(
        responses=[program("orders = list_orders()\nprint(len(orders))"), AIMessage("done")],
        cycle=False,
    )
    options = {**OPTIONS, "pinned": ["list_orders"], "codemode_max_memory_mb": 20}
    graph = create_toolbudget_agent(model, ToolCatalog.from_tools([list_orders]), **options)
    answer = next(
        m
        for m in (await run(graph.compile(), {"messages": [HumanMessage("go")]}, api))["messages"]
        if isinstance(m, ToolMessage)
    )
    assert answer.status == "error"
    assert answer.artifact["codemode"]["stopped"] == "memory"
    assert answer.content.startswith(
        "Error: the program was stopped: it needed more than its memory limit of 20 MB "
        "(codemode_max_memory_mb).\nMemoryError: "
    )
    assert answer.content.endswith(
        f"The largest tool result it took in was list_orders()'s, {len(_records(25_000)):,} "
        "characters: a result takes room in the program too (a list of records about 20 times "
        "its JSON text). Ask the tool for less (a filter, a limit or a page), or raise "
        "codemode_max_memory_mb."
    )
    assert "fix the code" not in answer.content


def test_both_ways_monty_reports_its_memory_limit_are_the_memory_limit():
    limits = sandbox.SandboxLimits(timeout_s=10, max_memory_bytes=20 * 2**20, max_output_chars=99)
    big = json.loads(_records(25_000))
    taking_in = sandbox.run_program("x = f()", ["f"], lambda *_: big, limits)
    growing = sandbox.run_program("x = [0] * 10**10", [], lambda *_: None, limits)
    raising = [
        sandbox.run_program(f"raise MemoryError({text!r})", [], lambda *_: 0, limits)
        for text in ("out of paper", "the export service is over its memory limit, retry later")
    ]
    assert "terminated" in str(taking_in.error) and "exceeded: " in str(growing.error)
    assert [taking_in.error_kind, growing.error_kind] == ["memory", "memory"]
    assert [run.error_kind for run in raising] == ["error", "error"]  # the program's own


async def test_the_tool_call_limit_raises_inside_the_program():
    code = (
        "n = 0\ntry:\n    for i in range(100):\n        get_forecast(city='Rome')\n        n += 1\n"
        "except RuntimeError as e:\n    print(n, e)"
    )
    answer, _, _ = await run_code(code, codemode_max_tool_calls=5)
    assert answer.content.startswith("5 tool-call limit reached: a program may make 5 tool calls")
    assert len(RUNS) == 5


async def test_a_syntax_error_is_told_with_nothing_run():
    answer, _, _ = await run_code("get_forecast(city='Rome'\nprint(1)")
    assert answer.status == "error" and answer.content.startswith(
        "Error: the program is not valid Python, so nothing ran"
    )
    assert RUNS == []


async def test_a_large_result_is_offloaded_and_read_back():
    code = "for i in range(3000):\n    print(i, 'x' * 20)"
    model = ScriptedChatModel(
        responses=[
            program(code),
            lambda messages, _: AIMessage(
                "",
                tool_calls=[
                    {
                        "name": "read_large_output",
                        "args": {
                            "handle": messages[-1].artifact["offloaded"]["handle"],
                            "start": 0,
                            "length": 30,
                        },
                        "id": "r1",
                    }
                ],
            ),
            AIMessage("done"),
        ],
        cycle=False,
    )
    options = {
        **OPTIONS,
        "enabled_builtins": ["python_execution", "read_large_output"],
        "tool_call_formats": ["native", "codemode"],  # the native history: the stub's artifact
    }
    graph = create_toolbudget_agent(model, make_catalog(), **options).compile(store=InMemoryStore())
    out = graph.invoke(
        {"messages": [HumanMessage("print a lot")]}, {"configurable": {"thread_id": "big"}}
    )
    stub, read = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert stub.artifact["offloaded"]["chars"] > 20_000
    assert "[Large output offloaded" in stub.content and len(stub.content) < 5_000
    assert read.content.endswith("0 xxxxxxxxxxxxxxxxxxxx\n1 xxxxx")


async def test_without_offloading_a_large_result_is_cut_at_the_output_limit():
    answer, _, _ = await run_code(
        "print('y' * 50_000)", offload_over_chars=None, codemode_max_output_chars=1_000
    )
    assert answer.content.startswith("y" * 1_000)
    assert answer.content.endswith(
        "[output cut: 49,001 more characters not shown; print less, e.g. aggregate]"
    )


@pytest.mark.parametrize("api", APIS)
async def test_a_deeply_nested_value_is_described_and_the_graph_goes_on(api):
    code = "x = [1]\nfor i in range(2000):\n    x = [x]\nx"
    answer, _, _ = await run_code(code, api)
    assert answer.status == "success"
    assert answer.content == (
        "(list nested too deep to show: return or print a part of it, or a count)"
    )
    deep, _, _ = await run_code("x = [1]\nfor i in range(40):\n    x = [x]\nx", api)
    assert deep.content == "[" * 41 + "1" + "]" * 41  # a tree of 40 levels is shown whole
    # Past 100 levels it is named on every Python: 3.12+ wrote 2,000 levels (the sandbox's
    # own cut at 1,000) where 3.11 raised RecursionError.
    for levels in (101, 2000):
        code = f"x = {{'a': 1}}\nfor i in range({levels}):\n    x = {{'a': x}}\nx"
        named, _, _ = await run_code(code, api)
        assert named.content.startswith("(dict nested too deep to show"), named.content[:80]
    # ... held in an object too (its attributes count, as written out): it was written out.
    box = "from dataclasses import dataclass\n@dataclass\nclass Box:\n    content: object\n"
    code = box + "x = [1]\nfor i in range(150):\n    x = [x]\nBox(x)"
    named, _, _ = await run_code(code, api)
    assert named.content.startswith("(Box nested too deep to show"), named.content[:80]
    code = box + "x = [1]\nfor i in range(90):\n    x = [x]\nBox(x)"
    shown, _, _ = await run_code(code, api)
    assert "[" * 91 + "1" + "]" * 91 in shown.content  # within 100 levels: written out


@pytest.mark.parametrize("api", APIS)
async def test_an_integer_too_long_to_show_is_described_and_the_graph_goes_on(api):
    """Python will not write an int of over 4,300 digits in decimal (repr, str and json.dumps
    raise ValueError): a program's value holding one is described, never raised out."""
    digits = f"{sys.get_int_max_str_digits():,}"
    advice = "return or print a part of it, e.g. n % 10**100 (its last 100 digits) or hex(n))"
    for code, what in [
        ("2**20000", "an integer"),
        ("[1, 2**20000]", "a list holding an integer"),
        ("{'n': 2**20000}", "a dict holding an integer"),
    ]:
        answer, _, _ = await run_code(code, api)
        assert answer.status == "success"
        assert answer.content == f"({what} of over {digits} digits, too long to show: {advice}"
    part, _, _ = await run_code("n = 2**20000\nprint(n % 10**6, hex(n)[:6])", api)
    assert part.content == f"{2**20000 % 10**6} 0x1000"  # the advice runs in the sandbox


# --- gating: enabled_builtins, the codemode format ------------------------------------------


def test_python_execution_is_offered_only_with_codemode_enabled_and_allowed():
    catalog = make_catalog()
    on = BudgetConfig(tool_call_formats=CODEMODE, offload_over_chars=None)
    assert PYTHON_EXECUTION in Builtins(catalog, on).names
    assert PYTHON_EXECUTION not in Builtins(catalog, BudgetConfig()).names  # no codemode format
    named = on.override(enabled_builtins=["python_execution"])
    assert Builtins(catalog, named).names == (PYTHON_EXECUTION,)
    denied = on.override(enabled_builtins={"deny": ["python_execution"]})
    assert PYTHON_EXECUTION not in Builtins(catalog, denied).names
    others = on.override(enabled_builtins=["search_tools"])
    assert PYTHON_EXECUTION not in Builtins(catalog, others).names


@pytest.mark.parametrize("api", APIS)
async def test_gated_off_python_execution_is_neither_bound_nor_run(api):
    model = ScriptedChatModel(
        responses=[program("get_forecast(city='Rome')"), AIMessage("done")], cycle=False
    )
    options = {**OPTIONS, "tool_call_formats": None, "enabled_builtins": None}
    graph = create_toolbudget_agent(model, make_catalog(), **options).compile()
    out = await run(graph, {"messages": [HumanMessage("forecast")]}, api)
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert PYTHON_EXECUTION not in model.bound_tools[0]
    assert answer.status == "error" and "'python_execution' is not a tool of this app" in (
        answer.content
    )
    assert RUNS == []


def test_the_codemode_format_falls_back_when_python_execution_is_off():
    model = ScriptedChatModel(responses=[AIMessage("done")])
    node = CallModel(
        model,
        make_catalog(),
        enabled_builtins=["search_tools"],
        tool_call_formats={"enabled": ["codemode", "native"], "primary": "codemode"},
    )
    assert node.caller.choice.name == "native"
    assert "python_execution, which enabled_builtins does not enable" in node.caller.choice.reason


def test_codemode_enabled_but_not_primary_binds_python_execution_beside_the_tools():
    model = ScriptedChatModel(responses=[AIMessage("done")])
    options = {**OPTIONS, "tool_call_formats": ["native", "codemode"]}
    create_toolbudget_agent(model, make_catalog(), **options).compile().invoke(
        {"messages": [HumanMessage("forecast")]}
    )
    assert model.bound_tools[0] == [PYTHON_EXECUTION, *VISIBLE]
    assert "CodeMode" not in model.calls[0][0].content


def test_the_system_prompt_carries_the_codemode_instructions_and_signatures():
    model = ScriptedChatModel(responses=[AIMessage("done")])
    create_toolbudget_agent(model, make_catalog(), **OPTIONS).compile().invoke(
        {"messages": [HumanMessage("forecast")]}
    )
    system = model.calls[0][0].content
    assert "## CodeMode: work by writing Python" in system
    assert "Limits per program: 10 s, 100 MB, 50 tool calls, 20,000 characters" in system
    assert "def get_forecast(city: str) -> Any:" in system
    assert "def list_cities(region: str = 'world') -> Any:" in system
    assert "def send_email" not in system  # hidden tools are not shown


def test_a_missing_sandbox_is_an_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setattr(sandbox, "sandbox_available", lambda: False)
    with pytest.raises(ImportError, match=r"pip install 'langgraph-toolbudget\[codemode\]'"):
        create_toolbudget_agent(ScriptedChatModel(responses=[]), make_catalog(), **OPTIONS)


# --- a text-only model: one fenced ```python block is the call ------------------------------


class _TextOnly(ScriptedChatModel):
    def bind_tools(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@pytest.mark.parametrize("api", APIS)
async def test_a_text_only_model_runs_a_python_block_and_reads_the_output(api):
    reply = "I'll check the forecasts.\n```python\nprint(get_forecast(city='Lima')['temp_c'])\n```"
    model = _TextOnly(responses=[AIMessage(reply), AIMessage("Lima: 26 C.")], cycle=False)
    graph = create_toolbudget_agent(model, make_catalog(), **OPTIONS).compile()
    out = await run(graph, {"messages": [HumanMessage("forecast for Lima")]}, api)
    call = out["messages"][1]
    assert call.tool_calls[0]["name"] == PYTHON_EXECUTION and call.content == (
        "I'll check the forecasts."
    )
    assert out["messages"][2].content == "26"
    second_prompt = model.calls[1]
    assert "Your program's output:\n26" in second_prompt[-1].content
    assert "```python\nprint(get_forecast(city='Lima')['temp_c'])\n```" in second_prompt[-2].content


async def test_a_cut_off_python_block_is_never_run():
    model = _TextOnly(
        responses=[AIMessage("```python\nprint(get_forecast(city='Lima'"), AIMessage("sorry")],
        cycle=False,
    )
    graph = create_toolbudget_agent(model, make_catalog(), **OPTIONS).compile()
    graph.invoke({"messages": [HumanMessage("forecast for Lima")]})
    assert RUNS == []
    assert "not closed" in model.calls[1][-1].content


def test_code_shown_to_the_user_then_prose_is_an_answer():
    parsed = get_format("codemode").parse("Use this:\n```python\nprint(1)\n```\nThen run it.")
    assert parsed.calls == [] and parsed.error is None


# --- the same through the nodes and the middleware ------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_the_graph_level_nodes_run_programs(api):
    config = BudgetConfig(**OPTIONS)
    catalog = make_catalog()
    model = ScriptedChatModel(
        responses=[program("print(get_forecast(city='Cairo')['temp_c'])"), AIMessage("done")],
        cycle=False,
    )
    graph = StateGraph(ToolBudgetState)
    graph.add_node("agent", CallModel(model, catalog, config=config))
    graph.add_node("tools", ToolExecutor(catalog, config=config))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    out = await run(graph.compile(), {"messages": [HumanMessage("forecast")]}, api)
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["35"]


@pytest.mark.parametrize("api", APIS)
async def test_the_middleware_answers_programs_after_the_model(api):
    code = (
        "hot = [c for c in list_cities() if get_forecast(city=c)['temp_c'] > 30]\nprint(hot)\n"
        "try:\n    send_email(to='a', body='b')\nexcept PermissionError as e:\n    print(e)"
    )
    model = ScriptedChatModel(responses=[program(code), AIMessage("done")], cycle=False)
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(make_catalog(), **OPTIONS)])
    out = await run(agent, {"messages": [HumanMessage("forecast")]}, api)
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert answer.content.startswith("['Cairo', 'Delhi']\nError: 'send_email' exists but is not")
    assert model.bound_tools[0] == [PYTHON_EXECUTION]
    system = model.calls[0][0].content
    assert "def get_forecast(city: str) -> Any:" in system
    assert ("send_email", {"to": "a"}) not in RUNS
    assert json.loads(json.dumps(answer.artifact))["codemode"]["tool_calls"] == 12


# --- group limits: a program's calls count toward their group's, across runs ----------------


def limited_fetch(probe: ConcurrencyProbe, limit: int) -> ToolExecutor:
    """An executor whose ``fetch`` (group ``api``, at most ``limit`` at once) takes 0.3 s."""
    tool = fetch_tool(probe)
    meta = {"fetch": {"concurrency_group": "api", "is_pure": True, "max_concurrency": limit}}
    config = BudgetConfig(enabled_builtins=["python_execution"], tool_call_formats=CODEMODE)
    return ToolExecutor(ToolCatalog.from_tools([tool], tool_metadata=meta), config=config)


async def run_calls(node: ToolExecutor, calls: list[dict[str, Any]], api: str) -> list[str]:
    """One run of ``node`` answering ``calls``; the answers' contents."""
    state = {"messages": [HumanMessage("go"), ai_calls(*calls)], "selected_tools": ["fetch"]}
    if api == "invoke":
        out = await asyncio.to_thread(node.invoke, state)
    else:
        out = await node.ainvoke(state)
    return [m.content for m in out["messages"]]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("limit", [1, 2])
async def test_a_programs_calls_count_toward_their_groups_limit_across_runs(api, limit):
    """A program's tool calls take places in their group as the model's own calls do: runs
    sharing the executor (one calling ``fetch`` directly, others from programs) never have
    more than the group's ``max_concurrency`` calls at once."""
    probe = ConcurrencyProbe()
    node = limited_fetch(probe, limit)
    direct = [call("fetch", "d0", x=0), call("fetch", "d1", x=1)]
    code = "print(fetch(x=2), fetch(x=3))"
    runs = [direct, *([call(PYTHON_EXECUTION, f"p{i}", code=code)] for i in range(2))]
    outs = await asyncio.wait_for(asyncio.gather(*(run_calls(node, r, api) for r in runs)), 60)
    assert outs == [["fetched 0", "fetched 1"], ["fetched 2 fetched 3"], ["fetched 2 fetched 3"]]
    assert probe.max_by_group["api"] == limit


@pytest.mark.parametrize("api", APIS)
async def test_a_program_never_waits_on_its_own_place(api):
    """``python_execution`` is answered by the executor, before the reply's other calls, and
    takes no place of any group: its calls to a group limited to one call at once run one
    after another, never waiting on the program itself or on a call after it in the reply."""
    probe = ConcurrencyProbe()
    node = limited_fetch(probe, 1)
    code = "[fetch(x=fetch(x=i)[-1:]) for i in range(3)]"
    calls = [call(PYTHON_EXECUTION, "p0", code=code), call("fetch", "d0", x=9)]
    outs = await asyncio.wait_for(run_calls(node, calls, api), 60)
    assert outs == ['["fetched 0", "fetched 1", "fetched 2"]', "fetched 9"]
    assert probe.max_by_group["api"] == 1


# --- a reply that ends with a ```python block, under the middleware as under the nodes -------


def _both(
    script: list[Any], **options: Any
) -> tuple[Any, ScriptedChatModel, Any, ScriptedChatModel]:
    """The middleware's agent and the prebuilt agent, each with its own scripted model."""
    options = {**OPTIONS, **options}
    model = ScriptedChatModel(responses=list(script), cycle=False)
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(make_catalog(), **options)])
    node_model = ScriptedChatModel(responses=list(script), cycle=False)
    graph = create_toolbudget_agent(node_model, make_catalog(), **options).compile()
    return agent, model, graph, node_model


def _shape(messages: list[Any]) -> list[tuple[Any, ...]]:
    """What a run stored, without the ids: each message's kind, content and calls."""
    return [
        (m.type, m.content, [(c["name"], c["args"]) for c in getattr(m, "tool_calls", [])])
        for m in messages
    ]


@pytest.mark.parametrize("api", APIS)
async def test_the_middleware_runs_a_trailing_python_block_as_the_nodes_do(api):
    """The CodeMode instructions offer "end your reply with one ```python block": under the
    middleware the block becomes a ``python_execution`` call (a fresh id, the prose kept as
    the reply's text) that runs, as ``CallModel`` reads it."""
    code = "print(get_forecast(city='Cairo')['temp_c'])"
    fenced = AIMessage(f"Let me check.\n```python\n{code}\n```", id="r1")
    agent, model, graph, _ = _both([fenced, AIMessage("done")])
    payload = {"messages": [HumanMessage("forecast for Cairo")]}
    out, node_out = await run(agent, payload, api), await run(graph, payload, api)
    reply = out["messages"][1]
    (made,) = reply.tool_calls
    assert made["name"] == PYTHON_EXECUTION and made["args"] == {"code": code + "\n"}
    assert made["id"].startswith("call_") and reply.id != "r1"
    assert reply.response_metadata["toolbudget_raw"] == fenced.content
    assert by_call(out["messages"])[made["id"]] == "35"
    assert out["messages"][-1].content == "done" and len(model.calls) == 2
    assert _shape(out["messages"]) == _shape(node_out["messages"])


def by_call(messages: list[Any]) -> dict[str, Any]:
    return {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}


@pytest.mark.parametrize("api", APIS)
async def test_the_middleware_asks_again_after_a_cut_off_python_block(api):
    """A ```python block left open (cut off) is not run: the model is told why and asked
    again within the turn, and the state keeps the rejected reply, as under the nodes."""
    cut = AIMessage("```python\nprint(get_forecast(city='Cairo')")
    good = AIMessage("```python\nprint(get_forecast(city='Cairo')['temp_c'])\n```")
    agent, model, graph, _ = _both([cut, good, AIMessage("done")])
    payload = {"messages": [HumanMessage("forecast for Cairo")]}
    out, node_out = await run(agent, payload, api), await run(graph, payload, api)
    assert "35" in by_call(out["messages"]).values() and out["messages"][-1].content == "done"
    retry = model.calls[1]
    assert retry[-2].content == cut.content and isinstance(retry[-1], HumanMessage)
    assert "could not be read (the ```python block is not closed" in retry[-1].content
    assert _shape(out["messages"]) == _shape(node_out["messages"])


@pytest.mark.parametrize("api", APIS)
async def test_the_middleware_asks_again_no_more_than_max_iterations(api):
    cut = AIMessage("```python\nprint(1")
    agent, model, graph, node_model = _both([cut] * 5, max_iterations=3)
    payload = {"messages": [HumanMessage("forecast for Cairo")]}
    out, node_out = await run(agent, payload, api), await run(graph, payload, api)
    assert len(model.calls) == len(node_model.calls) == 3
    assert _shape(out["messages"]) == _shape(node_out["messages"])
    assert out["messages"][-1].content == cut.content and not out["messages"][-1].tool_calls
