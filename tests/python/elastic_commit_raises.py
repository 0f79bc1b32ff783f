#!/usr/bin/python3
"""A commit that raises on one rank only, in an elastic job (docs/ELASTIC.md, "Bad input").

Run as a script under gravacrun --min-np 1 (2 nodes x 1 rank): both ranks train under
hvd.elastic.run and commit every step; at step 4 the state of the last rank cannot be copied
(a field whose deepcopy raises), so its commit() raises RuntimeError there, before the commit's
host-update broadcast. That is not a failure of the world: hvd.elastic.run does not catch it, the
rank's process ends with the traceback (exit 1), and gravacrun, seeing a worker fail (not
killed), stops the job with that exit code: a clear error, no hang, whatever the other rank is
doing (it is blocked in the broadcast, or regrouping after HorovodInternalError). CTest matches
the traceback and gravacrun's line, in that order.
"""

import sys

import torch

import gravac.torch as hvd


class Fragile:
    """A state field whose copy fails once `broken` is set."""

    def __init__(self):
        self.broken = False

    def __deepcopy__(self, memo):
        if self.broken:
            raise RuntimeError("rank %d: the state cannot be copied (injected)" % hvd.rank())
        copy = Fragile()
        memo[id(self)] = copy
        return copy


def main():
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, step=0, fragile=Fragile())
    victim = hvd.rank() == hvd.size() - 1

    @hvd.elastic.run
    def train(state):
        while state.step < 40:
            state.step += 1
            optimizer.zero_grad()
            model(torch.randn(4, 16)).sum().backward()
            optimizer.step()
            if state.step == 4 and victim:
                state.fragile.broken = True
            state.commit()

    train(state)
    print("FAIL: rank %d finished training; the job should have ended at step 4" % hvd.rank())
    return 1


if __name__ == "__main__":
    sys.exit(main())
