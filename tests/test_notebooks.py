"""Every notebook in notebooks/ runs top to bottom without an error.

The notebooks run in a fresh ``python3`` kernel of this interpreter, with the
notebooks folder as working directory, the working tree first on
``PYTHONPATH`` (so they exercise this checkout, not another installed copy)
and matplotlib's headless Agg backend. jupyter_client finds the ``python3``
kernel spec from a temporary directory written for the session, so nothing is
installed into the environment and no other ``python3`` kernel is picked up.
"""

import os
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CELL_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def python3_kernel(tmp_path_factory):
    """A ``python3`` kernel spec that runs this interpreter.

    jupyter_client would fall back to ipykernel's built-in spec anyway, but a
    ``python3`` spec in the user's Jupyter directory (pointing at some other
    Python) takes precedence over it; one written to a temporary directory on
    ``JUPYTER_PATH`` takes precedence over both.
    """
    from ipykernel.kernelspec import install
    from jupyter_client.kernelspec import KernelSpecManager

    prefix = tmp_path_factory.mktemp("jupyter")
    install(kernel_name="python3", prefix=str(prefix))
    mp = pytest.MonkeyPatch()
    paths = [str(prefix / "share" / "jupyter"), os.environ.get("JUPYTER_PATH")]
    mp.setenv("JUPYTER_PATH", os.pathsep.join(p for p in paths if p))
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert Path(spec.argv[0]) == Path(sys.executable), spec.argv
    yield "python3"
    mp.undo()


@pytest.fixture
def kernel_env(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    paths = [str(ROOT), os.environ.get("PYTHONPATH")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))


def _notebooks():
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def test_there_are_notebooks():
    assert _notebooks(), f"no notebooks in {NOTEBOOKS}"


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.name)
def test_notebook_runs(path, python3_kernel, kernel_env):
    nb = nbformat.read(path, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        f"{path.name}: commit notebooks with outputs cleared"
    )
    client = nbclient.NotebookClient(
        nb,
        kernel_name=python3_kernel,
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    try:
        client.execute()
    except CellExecutionError as exc:
        pytest.fail(f"{path.name}: a cell failed:\n{exc}", pytrace=False)
