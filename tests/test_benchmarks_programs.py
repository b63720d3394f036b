"""W12's programs cannot rot: each file of benchmarks/programs, run under fnx through the torch alias at its tiny
size, takes two training steps with finite losses that change its parameters. The alias takes over `import
torch` for the whole process, so the programs run in a process of their own, as a W12 worker does (one process
for all of them: each is a module of its own). No timing here: benchmarks report numbers, tests assert
behaviour."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.programs import PROGRAMS

_STEPS = """
import json, math, traceback, fnx, numpy as np
from benchmarks.programs import PROGRAMS, load
for name in PROGRAMS:
    try:
        model, optimizer, step = load(fnx, name).training("tiny")
        before = [p.detach().numpy().copy() for p in model.parameters()]
        losses = [float(step(model)) for _ in range(2)]
        result = {"module": type(model).__module__, "finite": all(math.isfinite(x) for x in losses),
                  "changed": sum(not np.array_equal(p.detach().numpy(), b)
                                 for p, b in zip(model.parameters(), before)),
                  "parameters": len(before)}
    except Exception:
        result = {"error": traceback.format_exc()}
    print(json.dumps({name: result}))
"""


@pytest.fixture(scope="module")
def results():
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", _STEPS], cwd=root, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    found = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            found.update(json.loads(line))
    return found


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_w12_program_trains_under_the_torch_alias(results, name):
    result = results[name]
    assert "error" not in result, result.get("error")
    assert result["module"] == f"w12_{name}"
    assert result["finite"]
    assert result["changed"] >= result["parameters"] // 2 > 0, result


def test_load_names_the_programs_it_knows():
    import fnx

    from benchmarks.programs import load

    with pytest.raises(ValueError, match="unknown W12 program 'resnet'.*resnet18"):
        load(fnx, "resnet")
