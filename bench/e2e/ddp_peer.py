#!/usr/bin/python3
"""The PyTorch DDP (gloo) peer of bench/e2e/compare.py: the training examples without gravac.

One process per rank, torch.distributed with the gloo backend initialised through
tcp://<master>:<port>; the model is wrapped in torch.nn.parallel.DistributedDataParallel. Data,
split, standardisation, model (MLP 64 -> H1 -> H2 -> 10), seed, per-epoch shuffle and dealing,
batch size, optimizer (SGD, momentum 0.9) and evaluation are those of
examples/python/train_digits.py (copied, not imported, so this runs without the gravac
package), so the runs of compare.py differ only in how gradients are exchanged. DDP averages
gradients (gravac's DistributedOptimizer does too). --example fashion trains train_fashion.py's
job instead: its data and model come from examples/python/fashion_mnist.py (which does not import
gravac), its test set is scored in shards summed over the ranks, as train_fashion.py does.

Rank 0 appends one JSON line per epoch to --log-json with the fields compare.py reads from
train_digits.py (epoch, time_s, test_accuracy, step, step_time_s, ...). It knows nothing of
namespaces: compare.py starts it inside the nodes of a gravac-netemu cluster with
GLOO_SOCKET_IFNAME naming the node's interface. Blocks in torch.distributed calls, each bounded
by --timeout_s. Exits 0, 1 on a failure, 77 when torch or gloo is missing.
"""

import argparse
import datetime
import json
import os
import sys
import time

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                            "python")


def load_data(torch, seed):
    """train_digits.load_data: (x_train, y_train, x_test, y_test); the split is fixed by seed."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    test, train = perm[:360], perm[360:]
    mean, std = x[train].mean(0), x[train].std(0) + 1e-3
    x = (x - mean) / std
    return x[train], y[train], x[test], y[test]


def make_model(torch, hidden):
    h1, h2 = hidden
    return torch.nn.Sequential(torch.nn.Linear(64, h1), torch.nn.ReLU(),
                               torch.nn.Linear(h1, h2), torch.nn.ReLU(),
                               torch.nn.Linear(h2, 10))


class DigitsJob:
    """train_digits.py's data, model and evaluation."""

    def __init__(self, torch, args, rank, size):
        self.torch = torch
        self.x_train, self.y_train, self.x_test, self.y_test = load_data(torch, args.seed)
        torch.manual_seed(args.seed)
        self.model = make_model(torch, args.hidden)

    def inputs(self, idx):
        return self.x_train[idx]

    def evaluate(self, model, dist):
        return evaluate(self.torch, model, self.x_test, self.y_test)


class FashionJob:
    """train_fashion.py's data, model (--model) and sharded evaluation."""

    def __init__(self, torch, args, rank, size):
        sys.path.insert(0, os.path.normpath(EXAMPLES_DIR))
        import fashion_mnist
        self.torch, self.fm, self.rank, self.size = torch, fashion_mnist, rank, size
        self.x_train, self.y_train, self.x_test, self.y_test = fashion_mnist.load_data(
            args.seed, args.train_size, args.test_size)
        torch.manual_seed(args.seed)
        self.model = fashion_mnist.make_model(args.model)

    def inputs(self, idx):
        return self.fm.as_input(self.x_train[idx])

    def evaluate(self, model, dist):
        loss, correct, count = self.fm.evaluate_shard(model, self.x_test[self.rank::self.size],
                                                      self.y_test[self.rank::self.size])
        total = self.torch.tensor([loss, correct, count], dtype=self.torch.float32)
        dist.all_reduce(total)
        return total[0].item() / total[2].item(), total[1].item() / total[2].item()


def evaluate(torch, model, x, y):
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y).item()
        acc = (logits.argmax(1) == y).float().mean().item()
    model.train()
    return loss, acc


def append_json(path, record):
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


class ScoringClock:
    """fashion_mnist.ScoringClock and its helpers for the fashion job; for digits (which has no
    --score-every) a clock that counts scoring as training, as before."""

    def __init__(self, job):
        self.fm = getattr(job, "fm", None)
        self.clock = self.fm.ScoringClock() if self.fm else None
        self.start = time.monotonic()

    def training_s(self):
        return self.clock.training_s() if self.clock else time.monotonic() - self.start

    def score(self, fn):
        return self.clock.score(fn) if self.clock else fn()

    def due(self, step, steps_per_epoch, every):
        return bool(self.fm) and self.fm.score_due(step, steps_per_epoch, every)

    def record(self, epoch, step, training_s, accuracy):
        return self.fm.score_record(epoch, step, training_s, accuracy)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world_size", type=int, required=True)
    p.add_argument("--master", required=True, help="tcp://ADDRESS:PORT of rank 0")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--example", choices=("digits", "fashion"), default="digits")
    p.add_argument("--hidden", type=int, nargs=2, default=(2048, 1024), help="digits")
    p.add_argument("--model", default="vgg", help="fashion")
    p.add_argument("--train-size", type=int, default=60000, help="fashion")
    p.add_argument("--test-size", type=int, default=10000, help="fashion")
    p.add_argument("--target-accuracy", type=float, default=0.95)
    p.add_argument("--log-json", default="")
    p.add_argument("--score-every", type=int, default=0,
                   help="fashion: also score every N steps (train_fashion.py's --score-every)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--timeout_s", type=int, default=300)
    args = p.parse_args()
    try:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
    except ImportError as e:
        print("ddp peer: %s" % e, file=sys.stderr)
        return 77
    if not (dist.is_available() and dist.is_gloo_available()):
        print("ddp peer: torch.distributed has no gloo", file=sys.stderr)
        return 77

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=args.master, rank=args.rank,
                            world_size=args.world_size,
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    rank, size = args.rank, args.world_size
    job = (FashionJob if args.example == "fashion" else DigitsJob)(torch, args, rank, size)
    x_train, y_train = job.x_train, job.y_train
    model = DistributedDataParallel(job.model)  # broadcasts rank 0's
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    steps_per_epoch = len(x_train) // (size * args.batch_size)
    loss_fn = torch.nn.CrossEntropyLoss()
    if rank == 0:
        n_params = sum(q.numel() for q in model.parameters())
        print("ddp_peer: %d ranks, gloo, %d parameters, %d steps per epoch"
              % (size, n_params, steps_per_epoch), flush=True)
    start = time.monotonic()
    clock = ScoringClock(job)
    step = 0
    time_to_target = None
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(
            args.seed * 1000 + epoch))
        mine = perm[rank::size]
        epoch_loss, step_s = 0.0, 0.0
        for i in range(steps_per_epoch):
            idx = mine[i * args.batch_size:(i + 1) * args.batch_size]
            t0 = time.monotonic()
            optimizer.zero_grad()
            loss = loss_fn(model(job.inputs(idx)), y_train[idx])
            loss.backward()  # DDP all-reduces the gradient buckets during backward
            optimizer.step()
            step_s += time.monotonic() - t0
            epoch_loss += loss.item()
            step += 1
            if clock.due(step, steps_per_epoch, args.score_every):
                training_s = clock.training_s()
                _, mid_acc = clock.score(lambda: job.evaluate(model.module, dist))
                if rank == 0:
                    append_json(args.log_json, clock.record(epoch, step, training_s, mid_acc))
        train_loss = torch.tensor(epoch_loss / steps_per_epoch)
        dist.all_reduce(train_loss)
        training_s = clock.training_s()
        test_loss, acc = clock.score(lambda: job.evaluate(model.module, dist))
        elapsed = time.monotonic() - start
        if args.score_every > 0 and rank == 0:
            append_json(args.log_json, clock.record(epoch, step, training_s, acc))
        if time_to_target is None and acc >= args.target_accuracy:
            time_to_target = elapsed
        if rank == 0:
            record = {"epoch": epoch, "time_s": round(elapsed, 3),
                      "train_loss": train_loss.item() / size, "test_loss": test_loss,
                      "test_accuracy": acc, "step": step, "theta": 1.0,
                      "collective": "ddp_gloo_allreduce", "step_time_s": elapsed / step,
                      "train_ms_per_step": 1000 * step_s / steps_per_epoch}
            print("epoch %3d  loss %.4f  test loss %.4f  acc %.4f  %.1f s  step %.0f ms"
                  % (epoch, record["train_loss"], test_loss, acc, elapsed,
                     record["train_ms_per_step"]), flush=True)
            append_json(args.log_json, record)
    if rank == 0:
        print("done: ddp, final accuracy %.4f, time %.1f s, time to %.2f accuracy: %s"
              % (acc, time.monotonic() - start, args.target_accuracy,
                 "%.1f s" % time_to_target if time_to_target is not None else "not reached"),
              flush=True)
    # Every rank's records are written; leave together without destroy_process_group, in
    # which rank 0 (the TCPStore's host) hung after the others had exited (the fashion runs
    # waited out --run_timeout_s, rc 124, with complete records).
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
