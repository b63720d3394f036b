"""A small PyTorch training script, written for PyTorch and run unmodified by `python -m fnx run`.

It trains a classifier on a synthetic dataset with the pieces real scripts use: a Dataset and a DataLoader with
worker processes, AdamW with parameter groups, a learning-rate scheduler, gradient clipping, evaluation under
no_grad, a checkpoint of model and optimizer saved and loaded back, seeding and backend flags.
Usage: torch_train.py CHECKPOINT_PATH [--epochs N]
"""
import argparse
import math
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class Blobs(Dataset):
    """`n` points in 8 dimensions around one of 3 fixed centres; the label is the centre."""

    def __init__(self, n: int, seed: int):
        centres = np.random.default_rng(0).normal(0.0, 1.0, size=(3, 8))
        rng = np.random.default_rng(seed)
        self.labels = rng.integers(0, 3, size=n)
        self.points = (centres[self.labels] + rng.normal(size=(n, 8))).astype(np.float32)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return torch.from_numpy(self.points[i]), int(self.labels[i])


class Classifier(nn.Module):
    def __init__(self, hidden: int = 32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Dropout(0.1))
        self.head = nn.Linear(hidden, 3)

    def forward(self, x):
        return self.head(self.body(x))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False


def evaluate(model, loader, device):
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(dim=-1) == y).sum().item()
            total += y.numel()
    return loss_sum / total, correct / total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint")
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()

    seed_everything(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train = DataLoader(Blobs(512, seed=1), batch_size=32, shuffle=True, num_workers=2, drop_last=True)
    valid = DataLoader(Blobs(256, seed=2), batch_size=64, num_workers=0)

    model = Classifier().to(device)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=3e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * len(train))

    print(f"epoch 0 valid loss {evaluate(model, valid, device)[0]:.4f}")
    for epoch in range(1, args.epochs + 1):
        model.train()
        for x, y in train:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            assert math.isfinite(float(norm))
            optimizer.step()
            scheduler.step()
        valid_loss, accuracy = evaluate(model, valid, device)
        print(f"epoch {epoch} valid loss {valid_loss:.4f} accuracy {accuracy:.3f} lr {scheduler.get_last_lr()[0]:.5f}")

    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": args.epochs},
               args.checkpoint)
    checkpoint = torch.load(args.checkpoint, map_location="cpu")
    restored = Classifier().to(device)
    restored.load_state_dict(checkpoint["model"])
    restored_optimizer = torch.optim.AdamW([{"params": [p for p in restored.parameters() if p.ndim >= 2]},
                                            {"params": [p for p in restored.parameters() if p.ndim < 2]}], lr=3e-3)
    restored_optimizer.load_state_dict(checkpoint["optimizer"])
    model.eval()
    restored.eval()
    x = torch.randn(16, 8, device=device)
    with torch.no_grad():
        same = torch.equal(model(x), restored(x))
    groups = [g["weight_decay"] for g in restored_optimizer.param_groups]
    print(f"reloaded epoch {checkpoint['epoch']} same outputs {same} weight decays {groups}")


if __name__ == "__main__":
    main()
