"""W9's benchmark code cannot rot: each model of benchmarks/models.py builds in fnx at a tiny size and takes one
eager training step (forward, loss, backward, optimizer step) that changes its parameters. No timing here:
benchmarks report numbers, tests assert behaviour."""
import math

import numpy as np
import pytest

import fnx
from benchmarks.models import PROBES, unsupported
from benchmarks.tasks import MODELS, make_task


@pytest.mark.parametrize("model", MODELS)
def test_w9_model_takes_a_training_step(model):
    task = make_task(fnx, model, "tiny")
    before = {n: p.detach().numpy().copy() for n, p in task.model.named_parameters()}
    loss = task.step(task.model)
    assert math.isfinite(float(loss))
    changed = [n for n, p in task.model.named_parameters() if not np.array_equal(p.detach().numpy(), before[n])]
    assert changed, "the optimizer step changed no parameter"


def test_w9_gpt_ties_the_embedding_to_the_lm_head():
    gpt = make_task(fnx, "gpt", "tiny").model
    assert gpt.lm_head.weight is gpt.transformer.wte.weight
    assert "lm_head.weight" not in dict(gpt.named_parameters())


def test_w9_probes_report_constructs_as_strings():
    found = unsupported(fnx)
    assert {c for c, _, _ in found} <= {c for c, _, _ in PROBES}
    assert all(isinstance(error, str) and error for _, _, error in found)


def test_the_table_takes_a_memory_row_of_zeros():
    """W9m rows can measure 0 bytes at every repetition (a step that allocates nothing new): the table shows no
    spread and no ratio against such a reference instead of dividing by zero."""
    from benchmarks.runner import Result, _fill_ratios, format_table

    rows = [Result("W9m", "case", fw, "cpu", "MiB", "torch", times_s=[0.0, 0.0, 0.0]) for fw in ("torch", "fnx")]
    _fill_ratios(rows)
    assert rows[0].spread is None and rows[1].ratio is None
    assert "0.000 MiB" in format_table(rows)
