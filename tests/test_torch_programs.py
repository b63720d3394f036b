"""Well-known kinds of public PyTorch programs, written as their authors write them (tests/programs/*.py),
run unmodified through `python -m fnx run`: each must train (its loss falls) and finish its own checks.

nanoGPT (GPT training script), makemore (character models: bigram, GRU and Transformer here; its MLP, RNN
and BoW models run the same way, left out to keep the tests short),
pytorch/examples' word_language_model (LSTM and Transformer), mnist (a CNN) and vae, vit-pytorch's ViT with
einops, time_sequence_prediction (LSTMCells with LBFGS), llama2.c's Llama-2 model.py, PyTorch's seq2seq
translation tutorial (a GRU decoder with attention, stepped one token at a time), pytorch/examples' DCGAN
(transposed convolutions, batch norm, in-place LeakyReLU) and neuraloperator's 2-d Fourier neural operator
(torch.fft, complex parameters trained by Adam) and PyTorch's DDP tutorial (torch.multiprocessing.spawn, "gloo"),
PyTorch's spatial transformer tutorial (affine_grid and grid_sample), pytorch/examples' actor_critic (Categorical
sampling on a small cart-pole), super_resolution (PixelShuffle) and fast_neural_style (InstanceNorm2d, ReflectionPad2d,
Gram matrices) and gat (graph attention on a dense adjacency), and PyTorch's text classification (EmbeddingBag with
offsets) and char-RNN name tutorials."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fnx

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "programs"


def _run(program: str, *args: str, cwd: Path) -> list[str]:
    """The stdout lines of `python -m fnx run tests/programs/PROGRAM ARGS`, which must succeed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "fnx", "run", str(PROGRAMS / program), *args],
                            capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _numbers(lines: list[str], pattern: str) -> list[float]:
    return [float(m.group(1)) for line in lines if (m := re.search(pattern, line))]


def test_nanogpt(tmp_path):
    lines = _run("nanogpt_train.py", "--max_iters", "30", "--out_dir", str(tmp_path / "out"), cwd=tmp_path)
    val = _numbers(lines, r"val loss ([\d.]+)")
    assert len(val) == 2 and val[-1] < 0.7 * val[0], lines
    assert (tmp_path / "out" / "ckpt.pt").exists()
    sample = [line for line in lines if line.startswith("sample:")]
    assert len(sample) == 1 and len(eval(sample[0][len("sample:"):])) == 9
    assert lines[-1] == "cropped block size 8 (8, 32)"


@pytest.mark.parametrize("model_type", ["bigram", "gru", "transformer"])
def test_makemore(model_type, tmp_path):
    """makemore's InfiniteDataLoader draws from RandomSampler(replacement=True, num_samples=int(1e10))."""
    lines = _run("makemore.py", "--type", model_type, "--max-steps", "50", "-o", str(tmp_path), cwd=tmp_path)
    losses = _numbers(lines, r"^step \d+ \| loss ([\d.]+)")
    test_losses = _numbers(lines, r"test loss: ([\d.]+)$")
    assert len(losses) == 3 and losses[-1] < losses[0] and test_losses[-1] < losses[0], lines
    samples = [line for line in lines if line.startswith("sample:")]
    assert len(samples) == 4 and all(set(s[len("sample: "):]) <= set("aeijklmnorst") for s in samples), samples


@pytest.mark.parametrize("model", ["LSTM", "Transformer"])
def test_word_language_model(model, tmp_path):
    """Saves the whole model with `torch.save(model, f)` and reloads it with `torch.load(f, weights_only=False)`."""
    lines = _run("word_language_model.py", "--model", model, "--nlayers", "1", "--lr", "10", "--bptt", "7",
                 "--epochs", "2", "--save", str(tmp_path / "model.pt"), cwd=tmp_path)
    start, = _numbers(lines, r"\| start \| valid loss\s+([\d.]+)")
    test, = _numbers(lines, r"End of training \| test loss\s+([\d.]+)")
    assert test < 0.5 * start, lines


def test_mnist(tmp_path):
    lines = _run("mnist.py", "--epochs", "1", "--save-model", cwd=tmp_path)
    accuracy = _numbers(lines, r"Accuracy: \d+/397 \((\d+)%\)")
    assert len(accuracy) == 2 and accuracy[0] < 30 and accuracy[1] > 60, lines
    assert (tmp_path / "mnist_cnn.pt").exists()


def test_vae(tmp_path):
    lines = _run("vae.py", "--epochs", "2", cwd=tmp_path)
    train = _numbers(lines, r"Epoch: \d+ Average loss: ([\d.]+)")
    test = _numbers(lines, r"Test set loss: ([\d.]+)")
    assert len(train) == 2 and train[1] < train[0] and test[1] < test[0] < 40, lines


def test_vit_with_einops(tmp_path):
    lines = _run("vit.py", "--epochs", "2", cwd=tmp_path)
    loss = _numbers(lines, r"- loss : ([\d.]+)")
    val_acc = _numbers(lines, r"val_acc: ([\d.]+)")
    assert len(loss) == 2 and loss[1] < loss[0] and val_acc[-1] > 0.3, lines


def test_time_sequence_prediction_with_lbfgs(tmp_path):
    lines = _run("time_sequence_prediction.py", "--steps", "2", cwd=tmp_path)
    losses = _numbers(lines, r"^loss: ([\d.e-]+)")
    test = _numbers(lines, r"^test loss: ([\d.e-]+)")
    assert len(test) == 2 and test[1] < test[0] < 0.01 and losses[-1] < 0.01 * losses[0], lines


def test_llama2(tmp_path):
    lines = _run("llama2.py", "--max_iters", "40", cwd=tmp_path)
    losses = _numbers(lines, r"^\d+ \| loss ([\d.]+)")
    assert len(losses) == 3 and losses[-1] < 0.1 * losses[0], lines
    assert lines[-1] == "greedy: [3, 4, 5, 6, 7, 8, 9]"


def test_seq2seq_translation(tmp_path):
    """The decoder steps nn.GRU one token at a time (teacher forcing in training, topk in evaluation)."""
    lines = _run("seq2seq_translation.py", "--epochs", "8", "--data", str(tmp_path / "eng-mdu.txt"), cwd=tmp_path)
    losses = _numbers(lines, r"\(\d+ \d+%\) ([\d.]+)$")
    assert len(losses) == 8 and losses[-1] < 0.15 * losses[0], lines
    assert lines[-1].startswith("exact translations: ") and sum(line.startswith("< ") for line in lines) == 10


def test_dcgan(tmp_path):
    """The discriminator learns to tell the random 'real' images from the generator's; checkpoints every epoch."""
    lines = _run("dcgan.py", "--niter", "3", "--ngf", "8", "--ndf", "8", "--batchSize", "16", "--images", "64",
                 "--outf", str(tmp_path / "out"), cwd=tmp_path)
    d_x = _numbers(lines, r"D\(x\): ([\d.]+)")
    losses = _numbers(lines, r"Loss_D: ([\d.]+)") + _numbers(lines, r"Loss_G: ([\d.]+)")
    assert len(d_x) == 12 and d_x[-1] > d_x[0] + 0.05 and all(0 < v < 10 for v in losses), lines
    assert lines.count("fake samples: [16, 3, 64, 64]") == 3
    state = fnx.load(tmp_path / "out" / "netG_epoch_2.pth")
    assert tuple(state["main.0.weight"].shape) == (100, 64, 4, 4) and "main.1.running_var" in state


def test_fourier_neural_operator(tmp_path):
    """Complex weights on the lowest modes of rfft2, trained by Adam as two real parameters each."""
    lines = _run("fno2d.py", "--epochs", "6", cwd=tmp_path)
    test = _numbers(lines, r"test l2 ([\d.]+)$")
    assert lines[0] == "complex parameters: 6" and len(test) == 6 and test[-1] < 0.5 * test[0], lines


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_ddp_spawned_over_gloo(tmp_path):
    """torch.multiprocessing.spawn starts two ranks that meet through MASTER_ADDR / MASTER_PORT (TCP); a rank that
    raises reaches the parent as ProcessRaisedException with its traceback."""
    lines = _run("ddp_spawn.py", "--port", str(_free_port()), cwd=tmp_path)
    assert lines == ["ddp matches one process: True", "all_reduce 3.0 all_gather [0.0, 1.0] broadcast 10.0"]
    assert _run("ddp_spawn.py", "--port", str(_free_port()), "--fail", cwd=tmp_path) == ["process 1 failed: True"]


def test_spatial_transformer(tmp_path):
    """F.affine_grid / F.grid_sample warp the input; nn.MaxPool2d feeds nn.ReLU(True), which rectifies the pooled
    values in place before backward; the test loss sums with the legacy size_average=False. With the tutorial's
    SGD(lr=0.01), 23 steps barely move the loss (real PyTorch too): the test checks the loop and the warp run."""
    lines = _run("spatial_transformer.py", "--epochs", "1", cwd=tmp_path)
    losses = _numbers(lines, r"Loss: ([\d.]+)$")
    test, = _numbers(lines, r"Test set: Average loss: ([\d.]+)")
    change, = _numbers(lines, r"^warped batch: \[64, 1, 28, 28\] mean change ([\d.]+)$")
    assert len(losses) == 3 and abs(test - 2.30) < 0.1 and change > 0.01, lines


def test_actor_critic(tmp_path):
    """Categorical sampling and log_prob one step at a time, returns normalised by their std, smooth L1 critic loss."""
    lines = _run("actor_critic.py", "--max-episodes", "40", "--max-steps", "50", cwd=tmp_path)
    average = _numbers(lines, r"Average reward: ([\d.]+)$")
    assert len(average) == 4 and average[-1] > 1.3 * average[0], lines


def test_super_resolution(tmp_path):
    """nn.PixelShuffle after orthogonally initialised convolutions; `torch.save(model, path)` each epoch."""
    lines = _run("super_resolution.py", "--upscale_factor", "3", "--nEpochs", "3", "--batchSize", "16", cwd=tmp_path)
    psnr = _numbers(lines, r"Avg. PSNR: ([\d.]+) dB")
    assert len(psnr) == 4 and psnr[-1] > psnr[0] + 5, lines
    assert [line for line in lines if line.startswith("Checkpoint")][-1] == "Checkpoint saved to model_epoch_3.pth"
    assert (tmp_path / "model_epoch_3.pth").exists()


def test_fast_neural_style(tmp_path):
    """InstanceNorm2d(affine=True), ReflectionPad2d and nearest Upsample in the transformer net, Gram matrices of a
    frozen network's namedtuple features, an in-place div_ of the net's output; the state_dict saved and reloaded."""
    lines = _run("fast_neural_style.py", "--epochs", "2", "--batches", "2", "--save-model-dir", str(tmp_path),
                 cwd=tmp_path)
    totals = _numbers(lines, r"total: ([\d.]+)$")
    assert len(totals) == 2 and totals[1] < 0.97 * totals[0], lines
    assert (tmp_path / "epoch_2_100000.0_10000000000.0.model").exists()
    assert lines[-1] == "stylized image: (32, 32, 3) uint8"


def test_char_rnn_names(tmp_path):
    """A hand-written RNN cell stepped letter by letter, SGD as `p.data.add_(p.grad.data, alpha=-lr)`, topk; the
    generator sums its loss onto `torch.Tensor([0])` and unsqueeze_s its targets in place."""
    lines = _run("char_rnn_names.py", "--n-iters", "400", "--gen-iters", "100", cwd=tmp_path)
    losses = _numbers(lines, r"^\d+ \d+% ([\d.]+) ")
    gen_losses = _numbers(lines, r"^gen \d+ \(\d+%\) ([\d.]+)$")
    confusion, = _numbers(lines, r"^confusion diagonal: ([\d.]+)$")
    assert len(losses) == 4 and losses[-1] < 0.95 * losses[0] and confusion > 0.5, lines
    assert len(gen_losses) == 4 and gen_losses[-1] < gen_losses[0], lines
    assert sum(line.startswith("sample: Japanese ") for line in lines) == 3


def test_graph_attention_network(tmp_path):
    """Parameters made with torch.empty(size=...), scores broadcast through .mT, non-edges masked by torch.where,
    index-tensor node splits; Adam with weight decay."""
    lines = _run("gat.py", "--epochs", "30", "--val-every", "10", cwd=tmp_path)
    train = _numbers(lines, r"loss_train: ([\d.]+)")
    test, = _numbers(lines, r"Test set results: loss ([\d.]+)")
    assert len(train) == 3 and train[-1] < train[0] - 0.01 and test < 1.1, lines
