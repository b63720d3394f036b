"""PyTorch's DDP tutorial (getting-started with DistributedDataParallel), as it is written: torch.multiprocessing
spawns the ranks, each joins a "gloo" process group through MASTER_ADDR / MASTER_PORT, wraps a toy model in DDP
and trains it on its own shard of the batch. Rank 0 then checks the result against one process training on the
whole batch, and a few collectives against their closed forms.

Written for PyTorch; the tests run it unmodified with `python -m fnx run`.
Usage: ddp_spawn.py [--port N] [--world-size N] [--fail]
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP


def setup(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()


class ToyModel(nn.Module):
    def __init__(self):
        super(ToyModel, self).__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 10, generator=g, dtype=torch.float64), torch.randn(8, 5, generator=g, dtype=torch.float64)


def train(model, x, y, steps=3):
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()


def demo_basic(rank, world_size, port, fail):
    setup(rank, world_size, port)
    if fail and rank == 1:
        raise ValueError("boom from rank 1")
    torch.manual_seed(0)
    model = ToyModel().double()
    ddp_model = DDP(model)
    x, y = data()
    shard = slice(rank * 8 // world_size, (rank + 1) * 8 // world_size)
    train(ddp_model, x[shard], y[shard])

    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    gathered = [torch.zeros(2) for _ in range(world_size)]
    dist.all_gather(gathered, torch.full((2,), float(rank)))
    b = torch.tensor([rank * 10.0])
    dist.broadcast(b, src=world_size - 1)
    dist.barrier()
    if rank == 0:
        torch.manual_seed(0)
        reference = ToyModel().double()
        train(reference, x, y)
        gap = max((p - q).abs().max().item() for p, q in zip(model.parameters(), reference.parameters()))
        print(f"ddp matches one process: {gap < 1e-12}")
        print(f"all_reduce {t.item()} all_gather {[g[0].item() for g in gathered]} broadcast {b.item()}")
    cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=12355)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--fail", action="store_true")
    args = parser.parse_args()
    try:
        mp.spawn(demo_basic, args=(args.world_size, args.port, args.fail), nprocs=args.world_size, join=True)
    except mp.ProcessRaisedException as e:
        print(f"process {e.error_index} failed: {'ValueError: boom from rank 1' in str(e)}")
