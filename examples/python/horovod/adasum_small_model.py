#!/usr/bin/python3
"""Horovod's Adasum example shape (adasum_small_model.py) on gravac.torch.

A small linear model fits y = X·w* on rank-specific data with DistributedOptimizer(op=Adasum):
each rank steps on its own gradient and the weight changes are combined with Adasum, so the
learning rate is not scaled by the world size. The only gravac line is the import. Exits 1 when
the final loss is not below --max-final-loss.

  gravacrun -np 2 /usr/bin/python3 examples/python/horovod/adasum_small_model.py
"""

import argparse
import sys

import torch

import gravac.torch as hvd

parser = argparse.ArgumentParser(description="Adasum small model")
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--max-final-loss", type=float, default=1e-3)


def main():
    args = parser.parse_args()
    hvd.init()
    torch.manual_seed(1234)
    w_true = torch.randn(10, 1)
    torch.manual_seed(hvd.rank())
    x = torch.randn(64, 10)
    y = x @ w_true

    model = torch.nn.Linear(10, 1, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         op=hvd.Adasum)
    loss = None
    for step in range(args.steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 20 == 0 and hvd.rank() == 0:
            print("step %d loss %.6f" % (step, loss.item()), flush=True)
    final = hvd.allreduce(loss.detach(), name="final_loss").item()
    if hvd.rank() == 0:
        print("final loss (average over ranks) %.6g" % final, flush=True)
    return 0 if final < args.max_final_loss else 1


if __name__ == "__main__":
    sys.exit(main())
