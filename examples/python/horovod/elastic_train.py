#!/usr/bin/python3
"""Horovod's elastic PyTorch example shape (pytorch_mnist_elastic.py), with gravac.torch.

The Horovod original's structure: an ElasticSampler deals the training set out, a TorchState holds
the model, optimizer, sampler, epoch and batch; the training function is decorated with
hvd.elastic.run, commits every --batches-per-commit batches and at the end of each epoch, and a
reset callback rescales the learning rate to hvd.size(). The only gravac line is the import. The
data is synthetic (nothing is downloaded): --train-samples points of --features dimensions drawn
around --classes random centres, and as many held-out points.

  gravacrun -np 2 --nodes 2 -- /usr/bin/python3 examples/python/horovod/elastic_train.py

Started as an elastic job (gravacrun --min-np 2 ...; docs/ELASTIC.md), a lost node's survivors
regroup into a smaller membership, restore the last commit and train on; without --min-np the
membership is fixed and a lost worker ends the job after the restore. --inject-failure-at N
raises HorovodInternalError on every rank once, at global batch N (as every survivor sees a lost
peer), so that the restore / reset / resume path runs in a whole world: the job then resumes from
the last commit and must still finish every epoch. At the end every rank checks that all replicas
are identical; --min-accuracy makes the script fail below that held-out accuracy (for tests).
"""

import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data

import gravac.torch as hvd
from gravac.common.exceptions import HorovodInternalError

parser = argparse.ArgumentParser(description="PyTorch elastic example (synthetic data)")
parser.add_argument("--batch-size", type=int, default=32, metavar="N")
parser.add_argument("--epochs", type=int, default=3, metavar="N")
parser.add_argument("--lr", type=float, default=0.01, metavar="LR")
parser.add_argument("--momentum", type=float, default=0.5, metavar="M")
parser.add_argument("--seed", type=int, default=42, metavar="S")
parser.add_argument("--batches-per-commit", type=int, default=5, metavar="N")
parser.add_argument("--train-samples", type=int, default=2048)
parser.add_argument("--features", type=int, default=32)
parser.add_argument("--classes", type=int, default=4)
parser.add_argument("--inject-failure-at", type=int, default=-1, metavar="N",
                    help="raise HorovodInternalError on every rank once, at global batch N")
parser.add_argument("--min-accuracy", type=float, default=0.0)
parser.add_argument("--hold-after-epoch", default="", metavar="N[,M...]",
                    help="(tests) after epoch N every rank waits, at most 120 s, until "
                         "--hold-file exists (after a later epoch M of the list: "
                         "HOLD_FILE.M), so a test can kill, add or remove a node at a known "
                         "point")
parser.add_argument("--hold-file", default="")


def synthetic(n, features, classes, seed):
    """n points around `classes` fixed centres (the same centres for every seed)."""
    centres = torch.randn(classes, features, generator=torch.Generator().manual_seed(1234)) * 0.6
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    points = centres[labels] + torch.randn(n, features, generator=g)
    return torch.utils.data.TensorDataset(points, labels)


class Net(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc1 = nn.Linear(features, 64)
        self.fc2 = nn.Linear(64, classes)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def main():
    args = parser.parse_args()
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    train_dataset = synthetic(args.train_samples, args.features, args.classes, args.seed)
    test_dataset = synthetic(args.train_samples, args.features, args.classes, args.seed + 1)
    train_sampler = hvd.elastic.ElasticSampler(train_dataset, shuffle=True, seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size,
                                               sampler=train_sampler)

    model = Net(args.features, args.classes)
    lr_scaler = hvd.size()
    optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler, momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    failures = {"injected": 0, "batches": 0}

    def test():
        model.eval()
        with torch.no_grad():
            x, y = test_dataset.tensors
            mine = slice(hvd.rank(), None, hvd.size())
            correct = model(x[mine]).argmax(1).eq(y[mine]).float().sum()
            total = torch.tensor(float(len(y[mine])))
        correct = hvd.allreduce(correct, op=hvd.Sum, name="test.correct")
        total = hvd.allreduce(total, op=hvd.Sum, name="test.total")
        return (correct / total).item()

    @hvd.elastic.run
    def train(state):
        # Resumes at the committed epoch; the sampler resumes after the committed batches.
        for state.epoch in range(state.epoch, args.epochs + 1):
            state.model.train()
            loss = None
            for batch_idx, (data, target) in enumerate(train_loader):
                state.batch = state.batch + 1
                failures["batches"] += 1
                if failures["batches"] == args.inject_failure_at and not failures["injected"]:
                    failures["injected"] += 1
                    raise HorovodInternalError("injected failure at global batch %d"
                                               % args.inject_failure_at)
                state.optimizer.zero_grad()
                loss = F.nll_loss(state.model(data), target)
                loss.backward()
                state.optimizer.step()
                state.train_sampler.record_batch(batch_idx, args.batch_size)
                if state.batch % args.batches_per_commit == 0:
                    state.commit()
            accuracy = test()
            if hvd.rank() == 0:
                print("epoch %d: last loss %s, held-out accuracy %.4f (%d batches run so far)"
                      % (state.epoch, "%.4f" % loss.item() if loss is not None else "-",
                         accuracy, failures["batches"]), flush=True)
            end_epoch(state)
            if state.epoch - 1 in holds:
                hold(state.epoch - 1)

    holds = [int(e) for e in args.hold_after_epoch.split(",") if e]

    def hold(epoch):
        if hvd.rank() == 0:
            print("holding after epoch %d" % epoch, flush=True)
        path = args.hold_file if epoch == holds[0] else "%s.%d" % (args.hold_file, epoch)
        deadline = time.monotonic() + 120
        while args.hold_file and not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)

    def end_epoch(state):
        state.epoch += 1  # committed as the next epoch: a restore does not train this one again
        state.batch = 0
        state.train_sampler.set_epoch(state.epoch)
        state.commit()

    def on_state_reset():
        # After a reset the world may have another size (an elastic job that lost a node).
        for param_group in optimizer.param_groups:
            param_group["lr"] = args.lr * hvd.size()
        # Every rank says where the new membership placed it (its local rank among its node's
        # survivors), so the launcher's log shows the regrouped world.
        print("placement: rank %d of %d, local rank %d of %d"
              % (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()), flush=True)
        if hvd.rank() == 0:
            print("reset: %d ranks, resuming at epoch %d after %d committed samples"
                  % (hvd.size(), state.epoch, state.train_sampler.processed_num), flush=True)

    state = hvd.elastic.TorchState(model, optimizer, train_sampler=train_sampler, epoch=1,
                                   batch=0)
    state.register_reset_callbacks([on_state_reset])
    train(state)

    accuracy = test()
    # Every replica must hold the same model.
    flat = torch.cat([p.detach().reshape(1, -1) for p in model.parameters()], dim=1)
    replicas = hvd.allgather(flat, name="final.replicas")
    identical = all(torch.equal(row, replicas[0]) for row in replicas)
    if hvd.rank() == 0:
        print("final: accuracy %.4f, %d replicas %s, %d injected failure(s)"
              % (accuracy, hvd.size(), "identical" if identical else "DIFFER",
                 failures["injected"]), flush=True)
    if not identical:
        print("FAIL: rank %d: the replicas differ" % hvd.rank())
        return 1
    if args.inject_failure_at > 0 and failures["injected"] != 1:
        print("FAIL: the failure at batch %d was not injected" % args.inject_failure_at)
        return 1
    if accuracy < args.min_accuracy:
        print("FAIL: accuracy %.4f < --min-accuracy %.4f" % (accuracy, args.min_accuracy))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
