"""The notebooks run top to bottom, headless, offline; and they are committed without outputs.

Each notebook is executed with nbclient in a real Jupyter kernel, with the
notebooks folder as working directory (so relative paths work) and a
non-interactive matplotlib backend. A cell error fails the test.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EXPECTED = ("quickstart.ipynb", "mcp.ipynb", "budget.ipynb")
BENCH = NOTEBOOKS.parents[1] / "shared" / "bench"
CELL_TIMEOUT_S = 120


def _execute(name: str, monkeypatch: pytest.MonkeyPatch) -> nbformat.NotebookNode:
    monkeypatch.setenv("MPLBACKEND", "Agg")  # the kernel inherits the environment
    # As in a real Jupyter: ipykernel gives sys.stderr a file descriptor unless it sees
    # pytest's variable. Without one, the MCP SDK's stdio client cannot start a server
    # (UnsupportedOperation: fileno), which is also what happens on Colab and Windows.
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    return notebook


def _cell_text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            parts.append(f"{output['ename']}: {output['evalue']}")
        parts.append(output.get("text", ""))
        parts.append(output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def _text(notebook: nbformat.NotebookNode) -> str:
    return "\n".join(_cell_text(cell) for cell in notebook.cells)


def test_notebooks_folder_holds_exactly_the_tested_notebooks() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_is_committed_without_outputs(name: str) -> None:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code, f"{name} has no code"
    dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
    assert not dirty, f"{name}: code cells {dirty} carry outputs; clear them before committing"


def test_quickstart_notebook_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the real-model cell stays offline
    notebook = _execute("quickstart.ipynb", monkeypatch)
    text = _text(notebook)
    assert "categories and scores: {'github'" in text
    assert "saved:" in text
    assert "request_more_tools" in text and "Sent to #general" in text
    assert "Skipped the real model: `pip install langchain langchain-openai`" in text
    assert "after:\ngithub (1 of 7 tools): create_issue" in text  # the thread's tool context
    assert "weather (0 of 4 tools)" in text and "'create_issue': 'included'" in text
    outputs = [_cell_text(cell) for cell in notebook.cells]
    # Section 5, as its text tells it: only ask_human is visible at first; the model's call to
    # get_weather is refused with the error telling it to load the tool; request_more_tools
    # loads it; the next call runs.
    prebuilt = next(out for out in outputs if "tools bound on each model call" in out)
    assert prebuilt.startswith("  visible set: +['ask_human'] -[] (select_tools)\n")
    assert "  call 1: ['ask_human']\n" in prebuilt
    refused = prebuilt.index(" tools: Error: 'get_weather' exists but is not loaded, so it was not")
    loaded = prebuilt.index("'send_message', 'list_channels'] -[] (request_more_tools)")
    ran = prebuilt.index(' tools: {"city": "London", "temperature_c": 11, "conditions": "rain"')
    assert refused < loaded < ran
    # Section 6, as its text tells it: turn 2 lets go of the weather tools turn 1 left unused
    # and keeps get_weather; turn 3 loads add_reaction with add_tool, and the cap
    # (max_visible=5) evicts the least recently used tool, get_weather.
    turns = next(out for out in outputs if "> Then react" in out).split("> ")[1:]
    assert len(turns) == 3
    assert "-['weather_forecast', 'air_quality'] (select_tools)" in turns[1]
    assert "visible now: ['ask_human', 'get_weather', 'send_message'," in turns[1]
    assert "add_reaction" not in turns[1].split("visible now:")[1]
    assert "model calls: ['search_tools', 'add_tool', 'add_reaction']" in turns[2]
    assert "visible set: +['add_reaction'] -['get_weather'] (add_tool)" in turns[2]
    assert len(turns[2].split("visible now: ")[1].strip().split(", ")) == 5


def test_mcp_notebook_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _text(_execute("mcp.ipynb", monkeypatch))
    assert "ToolCatalog(14 tools, 3 categories) | load errors: none" in text
    assert "visible set: +['add_note'] -[]  (add_tool)" in text  # widened by the model
    assert "visible set: +['word_count', 'upper'] -[]  (request_more_tools)" in text
    assert "Your note has 5 words." in text
    assert "load errors: {'broken'" in text


def test_budget_notebook_runs_on_the_bench_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLBUDGET_BENCH_DIR", raising=False)
    text = _text(_execute("budget.ipynb", monkeypatch))
    if (BENCH / "sealtools" / "catalog.jsonl").exists():  # the repository's sibling shared/bench
        assert f"bench data: {BENCH} (found)" in text
        assert "Seal-Tools: 4076 tools" in text and "MetaTool: 199 tools" in text
    else:  # a clone elsewhere: the notebook must say it fell back
        assert "using a synthetic catalog" in text
    assert "visible (+" in text
    default, capped = text.split("max_visible=None", 1)[1].split("max_visible=8", 1)

    def sizes(lines: str) -> list[int]:
        return [int(line.split()[0]) for line in lines.splitlines() if "visible (+" in line]

    # what its text says: used tools stay, so the set grows to 12 by turn 8, under the
    # default cap of 16; max_visible=8 stops it at 8 from turn 3 on
    assert sizes(default)[-1] == 12 and max(sizes(default)) <= 16
    assert sizes(capped) == sizes(default)[:2] + [8] * 6
    fewer = re.search(r"tokens with offloading, .* without \(([\d.]+)% fewer\)", text)
    assert fewer is not None and float(fewer.group(1)) >= 95  # the offloading cell


def test_budget_notebook_falls_back_to_a_synthetic_catalog(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TOOLBUDGET_BENCH_DIR", str(tmp_path / "absent"))
    text = _text(_execute("budget.ipynb", monkeypatch))
    assert "using a synthetic catalog" in text
    assert "synthetic: 300 tools" in text
