#!/usr/bin/python3
"""Data-parallel training of a convolutional network on Fashion-MNIST with gravac.torch.

Fashion-MNIST comes from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist;
nothing is downloaded; fashion_mnist.py reads its idx files). Every epoch the training images
(all 60,000, or --train-size of them drawn with --seed) are reshuffled with the same seed on
every rank and dealt out: rank r trains on every size-th image. The test images (the first
--test-size of the 10,000) are split the same way; each rank scores its shard and the counts are
summed, so the held-out accuracy printed each epoch is over all of them.

The default model is VGG-style, 3.25 M parameters of which 99% sit in its dense layers: 13 MB of
fp32 gradients per step for ~8 M multiply-adds per image, so the gradient exchange is what a
1 Gbit/s link makes slow (fashion_mnist.py says why; --model resnet18 is the compute-bound
alternative from torchvision).

  gravacrun -np 4 --nodes 2 --link 1gbit -- /usr/bin/python3 examples/python/train_fashion.py

--mode, --theta, the GraVAC flags and --print-gravacrun-args are those of train_digits.py (the
job's θ settings go to gravacrun); rank 0 prints and logs (--log-json) the same per-epoch line.
--score-every N also scores the test images every N steps and logs each score with the training
time so far, the time spent scoring left out (a time to accuracy finer than an epoch).
"""

import argparse
import json
import os
import sys
import time

import torch

import fashion_mnist
import train_digits
from train_digits import hvd


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("dense", "static", "gravac"), default="gravac")
    p.add_argument("--theta", type=float, default=100.0, help="static compression factor")
    p.add_argument("--model", choices=sorted(fashion_mnist.MODELS), default="vgg")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-size", type=int, default=60000,
                   help="training images used (drawn with --seed), at most 60000")
    p.add_argument("--test-size", type=int, default=10000,
                   help="test images scored each epoch (the first ones), at most 10000")
    p.add_argument("--data-dir", default=fashion_mnist.DEFAULT_DIR)
    p.add_argument("--batch-size", type=int, default=16, help="samples per rank per step")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate (SGD, momentum 0.9)")
    p.add_argument("--max-steps", type=int, default=0,
                   help="stop each epoch after this many steps (0: the whole shard; smoke tests)")
    p.add_argument("--target-accuracy", type=float, default=0.88,
                   help="report the time at which test accuracy first reaches this")
    p.add_argument("--min-accuracy", type=float, default=0.0,
                   help="exit 1 when the final test accuracy is below this (smoke tests)")
    p.add_argument("--log-json", default="", help="rank 0 appends one JSON line per epoch")
    p.add_argument("--score-every", type=int, default=0,
                   help="also score the test images every N steps (0: at epoch ends only); "
                   "rank 0 logs each as a JSON line of kind 'score' whose train_time_s leaves "
                   "the scoring out (bench/e2e/compare.py --score_every)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    train_digits.add_gravac_args(p)
    p.add_argument("--print-gravacrun-args", action="store_true",
                   help="print the gravacrun flags for --mode and exit")
    return p.parse_args(argv)


def evaluate(model, x_test, y_test, rank, size):
    """(test loss, test accuracy) over all ranks' shards of the test set."""
    loss, correct, count = fashion_mnist.evaluate_shard(model, x_test[rank::size],
                                                        y_test[rank::size])
    total = hvd.allreduce(torch.tensor([loss, correct, count], dtype=torch.float32),
                          op=hvd.Sum, name="test_counts")
    return total[0].item() / total[2].item(), total[1].item() / total[2].item()


def append_json(path, record):
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def log_score(args, rank, clock, epoch, step, model, x_test, y_test, size):
    """A mid-epoch score (--score-every): every rank scores its shard, rank 0 logs the sum."""
    training_s = clock.training_s()
    _, acc = clock.score(lambda: evaluate(model, x_test, y_test, rank, size))
    if rank == 0:
        print("step %5d  acc %.4f  %.1f s training" % (step, acc, training_s), flush=True)
        append_json(args.log_json, fashion_mnist.score_record(epoch, step, training_s, acc))


def main(argv):
    args = parse_args(argv)
    compression = train_digits.make_compression(args)
    if args.print_gravacrun_args:
        flags = compression.gravacrun_args() if hasattr(compression, "gravacrun_args") else []
        print(" ".join(flags))
        return 0
    if "GRAVAC_RANK" not in os.environ:
        print("run me under gravacrun, e.g.\n  gravacrun -np 4 --nodes 2 --link 1gbit -- %s %s"
              % (sys.executable, " ".join([sys.argv[0]] + argv)), file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    try:
        x_train, y_train, x_test, y_test = fashion_mnist.load_data(
            args.seed, args.train_size, args.test_size, args.data_dir)
    except (OSError, ValueError) as e:
        print("train_fashion: %s" % e, file=sys.stderr)
        return 1
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    torch.manual_seed(args.seed)
    model = fashion_mnist.make_model(args.model)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression,
                                         samples_per_step=args.batch_size)
    steps_per_epoch = len(x_train) // (size * args.batch_size)
    if args.max_steps > 0:
        steps_per_epoch = min(steps_per_epoch, args.max_steps)
    gravacctl = train_digits.find_gravacctl() if rank == 0 else None
    if rank == 0:
        n_params = sum(p.numel() for p in model.parameters())
        print("train_fashion: %d ranks, mode %s (%r), model %s, %d parameters (%.1f MB fp32), "
              "%d train / %d test images, %d steps per epoch of %d x %d images"
              % (size, args.mode, compression, args.model, n_params, n_params * 4 / 1e6,
                 len(x_train), len(x_test), steps_per_epoch, size, args.batch_size), flush=True)
        train_digits.warn_if_job_differs(gravacctl, args.mode, compression)

    if args.score_every < 0:
        print("train_fashion: --score-every must be 0 or more, not %d" % args.score_every,
              file=sys.stderr)
        return 2
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.monotonic()
    clock = fashion_mnist.ScoringClock()
    time_to_target, acc = None, 0.0
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(
            args.seed * 1000 + epoch))
        mine = perm[rank::size]
        thetas, epoch_loss, compute_s, wait_s = [], 0.0, 0.0, 0.0
        for i in range(steps_per_epoch):
            idx = mine[i * args.batch_size:(i + 1) * args.batch_size]
            t0 = time.monotonic()
            optimizer.zero_grad()
            loss = loss_fn(model(fashion_mnist.as_input(x_train[idx])), y_train[idx])
            loss.backward()  # gradients leave for the daemon as they are produced
            t1 = time.monotonic()
            optimizer.synchronize()  # waits for the exchange
            t2 = time.monotonic()
            with optimizer.skip_synchronize():
                optimizer.step()
            compute_s += t1 - t0
            wait_s += t2 - t1
            epoch_loss += loss.item()
            if optimizer.last_step_info is not None:
                thetas.append(optimizer.last_step_info["theta"])
            step = (epoch - 1) * steps_per_epoch + i + 1
            if fashion_mnist.score_due(step, steps_per_epoch, args.score_every):
                log_score(args, rank, clock, epoch, step, model, x_test, y_test, size)
        train_loss = hvd.allreduce(torch.tensor(epoch_loss / steps_per_epoch),
                                   name="epoch_loss").item()
        training_s = clock.training_s()
        test_loss, acc = clock.score(lambda: evaluate(model, x_test, y_test, rank, size))
        elapsed = time.monotonic() - start
        if args.score_every > 0 and rank == 0:
            append_json(args.log_json, fashion_mnist.score_record(
                epoch, epoch * steps_per_epoch, training_s, acc))
        if time_to_target is None and acc >= args.target_accuracy:
            time_to_target = elapsed
        if rank == 0:
            train_digits.report_epoch(args, optimizer, gravacctl, epoch, elapsed, train_loss,
                                      test_loss, acc, thetas, compute_s, wait_s, steps_per_epoch)
    return train_digits.finish(args, rank, acc, start, time_to_target)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
