"""W12's programs: whole training programs in the form of their public code, a file each, written for PyTorch.

A file imports `torch` as the public code does and defines its model the same way, then:

  SIZES           {"small": {...}, "tiny": {...}}: "small" is what W12 times, "tiny" what the smoke test
                  (tests/test_benchmarks_programs.py) steps
  training(size)  (model, optimizer, step): `step(net)` runs one iteration of the program's training loop
                  (forward, loss, backward, optimizer step) through `net`, the model or its compiled form, on
                  a fixed random batch made once, and returns the loss

`load(torch, name)` executes a file as a module of its own whose `import torch` is `torch`: real PyTorch, or
fnx through the torch alias (which takes over `import torch` for the whole process: a W12 worker, never the
runner). The image classifiers share their training loop (`image_classifier_training`); the other files stand
alone, as the user's program would (dcgan.py repeats the models of tests/programs/dcgan.py, a whole script of
the same example that runs when imported). Nothing here times anything.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

__all__ = ["PROGRAMS", "load", "image_classifier_training"]

# name -> the table's label for its "small" size
PROGRAMS = {
    "resnet18": "pytorch-cifar ResNet-18, width 16, SGD, batch 32 x 3x32x32",
    "mobilenetv2": "pytorch-cifar MobileNetV2, SGD, batch 8 x 3x32x32",
    "efficientnet": "torchvision-style EfficientNet-B0, SGD, batch 16 x 3x64x64",
    "dcgan": "pytorch/examples DCGAN, ngf = ndf = 16, Adam, batch 16 x 3x64x64",
    "convnext": "ConvNeXt blocks, dims 32-256, AdamW, batch 32 x 3x32x32",
    "unet": "milesial U-Net, base 16, RMSprop, batch 4 x 3x64x64",
    "tcn": "locuslab TCN with weight_norm, Adam, batch 16 x 784 steps",
    "textcnn": "Kim's text CNN, Adam, batch 64 x 50 tokens",
    "transformer_encoder": "nn.TransformerEncoder classifier with a padding mask, AdamW, batch 16 x 64 tokens",
    "packed_lstm": "packed bidirectional 2-layer LSTM classifier, Adam, batch 32",
    "embeddingbag": "PyTorch's EmbeddingBag text classifier, SGD, batch 64",
}
_FOLDER = Path(__file__).resolve().parent


def load(torch, name: str) -> ModuleType:
    """The program `name` as a fresh module, its `import torch` giving the framework module `torch`."""
    if name not in PROGRAMS:
        raise ValueError(f"unknown W12 program {name!r}; known: {', '.join(PROGRAMS)}")
    if torch.__name__ == "fnx":
        torch.install_torch_alias()
    spec = importlib.util.spec_from_file_location(f"w12_{name}", _FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def image_classifier_training(torch, net, optimizer, size: dict):
    """(net, optimizer, step) of pytorch-cifar's main.py loop (zero_grad, forward, nn.CrossEntropyLoss, backward,
    optimizer step) on one fixed random batch of size["batch"] RGB images of size["image"] pixels a side and
    size["classes"] classes, drawn after the caller's seed and model."""
    inputs = torch.randn(size["batch"], 3, size["image"], size["image"])
    targets = torch.randint(0, size["classes"], (size["batch"],))
    net.train()
    criterion = torch.nn.CrossEntropyLoss()

    def step(model):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        return loss

    return net, optimizer, step
