"""fnx standing in for torch: `python -m fnx run SCRIPT` and `fnx.install_torch_alias()`.

Each check runs in a fresh interpreter, since the alias changes the process's imports for good; none needs
PyTorch installed."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "programs"


def _python(args: list, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def _run_code(code: str, tmp_path) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return _python(["-m", "fnx", "run", str(script), "first", "--second"], cwd=tmp_path)


def test_torch_paths_resolve_to_fnx_modules(tmp_path):
    result = _run_code("""
        import sys
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        import torch.optim.lr_scheduler
        import torch.backends.cudnn
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torch.nn.modules.batchnorm import _BatchNorm
        from torch.optim.adamw import AdamW
        import fnx

        assert nn.Linear is fnx.nn.Linear and F.relu is fnx.nn.functional.relu and torch.Tensor is fnx.Tensor
        assert DataLoader is fnx.data.DataLoader and _BatchNorm is fnx.nn.modules.batchnorm._BatchNorm
        assert AdamW is fnx.optim.AdamW and dist.init_process_group is fnx.distributed.init_process_group
        assert torch.optim.lr_scheduler.StepLR is fnx.optim.lr_scheduler.StepLR
        assert torch.nn is nn and sys.modules["torch.nn.functional"] is F
        torch.backends.cudnn.benchmark = True  # writes reach fnx's flag, and reads see fnx's changes
        assert fnx.backends.cudnn.benchmark is True and torch.backends.cudnn.benchmark is True
        fnx.backends.cudnn.benchmark = False
        assert torch.backends.cudnn.benchmark is False
        assert "Linear" in dir(nn) and "Linear" in torch.nn.__all__
        print(__name__, sys.argv[1:], torch.ones(2).tolist())
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["__main__ ['first', '--second'] [1.0, 1.0]"]


def test_fnx_itself_is_unchanged_without_the_alias():
    result = _python(["-c", "import sys, fnx; assert 'torch' not in sys.modules\n"
                            "try: fnx.no_such_name\n"
                            "except AttributeError as e: print(e)"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "module 'fnx' has no attribute 'no_such_name'"


def test_names_fnx_lacks_say_that_fnx_stands_in(tmp_path):
    result = _run_code("""
        import torch
        import torch.nn as nn

        assert not hasattr(torch, "_C") and getattr(nn, "NoSuchLayer", None) is None
        try:
            nn.NoSuchLayer
        except AttributeError as e:
            print(e)
        try:
            import torch._dynamo
        except ModuleNotFoundError as e:
            print(e.name, e)
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    missing_name, missing_module = result.stdout.splitlines()
    assert missing_name.startswith("fnx stands in for torch in this program, and fnx.nn has no 'NoSuchLayer', so "
                                   "torch.nn.NoSuchLayer does not exist") and "Porting from PyTorch" in missing_name
    assert missing_module.startswith("torch._dynamo fnx stands in for torch in this program and has no module "
                                     "fnx._dynamo") and "Porting from PyTorch" in missing_module


def test_refuses_when_pytorch_was_imported_first():
    fake = "import sys, types; sys.modules['torch'] = types.ModuleType('torch'); sys.modules['torch'].__file__ = 'T'\n"
    result = _python(["-c", fake + "import fnx\ntry: fnx.install_torch_alias()\nexcept RuntimeError as e: print(e)"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("install_torch_alias: PyTorch is already imported in this process (torch from T)")
    # installed first, then someone puts real PyTorch in place by hand: later torch imports refuse to mix
    result = _python(["-c", "import sys, types, fnx\nfnx.install_torch_alias()\nimport torch\n"
                            "sys.modules['torch'] = types.ModuleType('torch'); sys.modules['torch'].__path__ = []\n"
                            "try: import torch.utils.data\nexcept ImportError as e: print(e)"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("`import torch.utils`: real PyTorch is already imported in this process")


def test_install_is_idempotent_and_keeps_fnx_attributes():
    result = _python(["-c", "import fnx\nfnx.install_torch_alias()\nfnx.install_torch_alias()\nimport sys, torch\n"
                            "print(sys.meta_path.count(sys.meta_path[0]), torch.float32 is fnx.float32)"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "True"]


def test_run_reports_a_missing_script(tmp_path):
    result = _python(["-m", "fnx", "run", str(tmp_path / "missing.py")])
    assert result.returncode != 0 and "no such file" in result.stderr


def test_an_unmodified_pytorch_training_script_runs(tmp_path):
    """tests/programs/torch_train.py is written for PyTorch (it runs under `python` with torch installed):
    workers, AdamW with parameter groups, a scheduler, clipping, no_grad evaluation, a checkpoint round trip."""
    checkpoint = tmp_path / "checkpoint.pt"
    result = _python(["-m", "fnx", "run", str(PROGRAMS / "torch_train.py"), str(checkpoint), "--epochs", "3"],
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    losses = [float(line.split()[4]) for line in lines if line.startswith("epoch")]
    assert len(losses) == 4 and losses[-1] < 0.8 * losses[0], lines
    assert lines[-2].endswith("lr 0.00000")  # cosine annealing reached zero after the last step
    assert lines[-1] == "reloaded epoch 3 same outputs True weight decays [0.01, 0.0]"
    assert checkpoint.exists()


def test_spawned_workers_get_the_alias_too(tmp_path):
    """A spawned worker re-imports the script in a fresh interpreter: its `import torch` must give fnx too."""
    result = _run_code("""
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Named(Dataset):
            def __len__(self):
                return 2

            def __getitem__(self, i):
                return repr(torch)

        if __name__ == "__main__":
            print(list(DataLoader(Named(), batch_size=None, num_workers=1, multiprocessing_context="spawn")))
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == repr(["<module 'torch': fnx stands in, as fnx>"] * 2)


def test_torch_jit_runs_a_model_file_s_torchscript_in_passing_as_python(tmp_path):
    """Model files use torch.jit in passing (a scripted helper, timm's `torch.jit.is_scripting()`, ignore and
    Final): under the alias it is fnx.torchscript, whose script and trace give back what they get and run it as
    Python; a TorchScript archive is refused with a pointer to fnx.export. fnx.jit stays JAX's jit."""
    result = _run_code("""
        from typing import List
        import torch
        import torch.jit
        import torch.nn as nn
        import fnx

        @torch.jit.script
        def gelu_tanh(x):
            return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))

        class Block(nn.Module):
            flag: torch.jit.Final[bool]

            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.flag = True
                self.steps = torch.jit.Attribute(0, int)

            @torch.jit.ignore
            def note(self) -> str:
                return "ignored"

            @torch.jit.ignore(drop=True)
            def dropped(self):
                return 1

            @torch.jit.export
            def double(self, x):
                return 2 * x

            def forward(self, x):
                if torch.jit.is_scripting() or torch.jit.is_tracing():
                    raise AssertionError("nothing is scripted or traced under fnx")
                y = self.fc(x)
                return gelu_tanh(y) if y.sum() > 0 else -y   # data-dependent: a trace would freeze one branch

        block = Block()
        x = torch.randn(3, 4)
        scripted, traced = torch.jit.script(block), torch.jit.trace(block, (x,))
        assert scripted is block and traced is block and torch.jit.freeze(scripted) is block
        assert not isinstance(block, torch.jit.ScriptModule) and torch.jit.script(gelu_tanh) is gelu_tanh
        future = torch.jit.fork(block.double, x)
        assert torch.equal(torch.jit.wait(future), 2 * x)
        assert torch.jit.annotate(List[int], []) == [] and block.steps == 0 and block.note() == "ignored"
        assert torch.allclose(traced(x), block(x)) and torch.allclose(traced(-x), block(-x))
        for call in (lambda: torch.jit.save(scripted, "m.pt"), lambda: torch.jit.load("m.pt")):
            try:
                call()
            except NotImplementedError as e:
                assert "fnx.export" in str(e)
            else:
                raise AssertionError("a TorchScript archive must be refused")
        assert torch.jit is not fnx.jit and fnx.jit is fnx.compile
        print("ok")
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok"]


def test_run_starts_ranks_as_torchrun_does(tmp_path):
    """`python -m fnx run --nproc-per-node N` sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for each rank of
    a torchrun-style script (init_process_group("gloo") with no arguments); a failing rank's status is the run's."""
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo")
        t = torch.tensor([float(dist.get_rank())])
        dist.all_reduce(t)
        if dist.get_rank() == 0:
            print("world", dist.get_world_size(), "sum", t.item())
        if len(sys.argv) > 1 and dist.get_rank() == 1:
            sys.exit(3)
        dist.destroy_process_group()
    """))
    result = _python(["-m", "fnx", "run", "--nproc-per-node", "2", str(script)], cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.split() == ["world", "2", "sum", "1.0"], result.stderr
    result = _python(["-m", "fnx", "run", "--nproc_per_node", "2", str(script), "fail"], cwd=tmp_path)
    assert result.returncode == 3
