"""The example notebooks (examples/*.ipynb) run top to bottom without an error, and are committed executed.

Each notebook runs in a fresh IPython kernel of this interpreter (a kernelspec written for the test, so the
kernel is this virtual environment's Python whatever kernelspecs are installed), from examples/, with
FNX_EXAMPLE_FAST=1 (the notebooks shrink sizes and epochs), the Agg matplotlib backend and one BLAS/OpenMP
thread (two test workers share two cores). The repository root goes on PYTHONPATH so that the kernel imports
this checkout's fnx even when it is not installed.
"""
import json
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
for _module in ("matplotlib", "tqdm", "sklearn"):
    pytest.importorskip(_module)

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402  (after the skips: a dependency of nbclient)
from jupyter_client.manager import KernelManager  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
CELL_TIMEOUT = 300


def _kernel_manager(tmp_path: Path) -> KernelManager:
    """A KernelManager whose kernel is `sys.executable -m ipykernel_launcher`; its connection file in `tmp_path`
    (nbclient does not remove the file of a manager it was given: each run left one in the system's temp folder)."""
    spec = tmp_path / "kernels" / "fnx-test-python"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "fnx tests", "language": "python"}))
    specs = KernelSpecManager(kernel_dirs=[str(spec.parent)])
    return KernelManager(kernel_name=spec.name, kernel_spec_manager=specs,
                         connection_file=str(tmp_path / "kernel-connection.json"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 4, f"expected the example notebooks in {EXAMPLES}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_with_outputs(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is not None for c in code), f"{path.name}: execute it before committing"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name} was committed with an error output: {errors[0].get('evalue')}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    for name, value in {"FNX_EXAMPLE_FAST": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
                        "OPENBLAS_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}.items():   # the notebooks' temp folders
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, km=_kernel_manager(tmp_path), timeout=CELL_TIMEOUT,
                                     resources={"metadata": {"path": str(EXAMPLES)}})
    client.execute()   # raises CellExecutionError, naming the cell and the traceback, on any error
