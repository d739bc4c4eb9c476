"""Every notebook in notebooks/ runs top to bottom on this interpreter, within a time limit.

New notebooks are picked up by the glob. They run on a private kernelspec that points at
sys.executable, so the kernel imports the gfxsim that pytest imports, whatever kernels (or none)
this machine has installed. Notebooks are stored without outputs; this test checks that too.
"""
import json
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from support import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TIMEOUT_S = 120            # the whole notebook; one cell gets the same limit
KERNEL = "gfxsim-test-python"


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory, monkeypatch_module):
    """Install a kernelspec for this interpreter in a private JUPYTER_PATH entry."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({sys.executable})", "language": "python"}))
    monkeypatch_module.setenv("JUPYTER_PATH", str(root))
    monkeypatch_module.setenv("MPLBACKEND", "Agg")       # the kernel inherits it: no display needed
    return KERNEL


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/*.ipynb not found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path, kernel_name):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=TIMEOUT_S, kernel_name=kernel_name,
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.monotonic()
    client.execute()                      # raises CellExecutionError naming the failing cell
    elapsed = time.monotonic() - start
    assert elapsed < TIMEOUT_S, f"{path.name} took {elapsed:.0f} s"
