#!/usr/bin/python3
"""compare.py's Fashion-MNIST job without gravac: the compressed exchange simulated in one process.

Trains train_fashion.py's model on the same data, shards, seed and initial weights as
`compare.py --example fashion` (2 nodes x 2 ranks, 16 images per rank per step, SGD momentum 0.9),
but the four ranks' gradients are computed in turn in this process and exchanged as GRAVAC.md
specifies: per node, the sum of its ranks' gradients plus the tensor's residual, top-k of it with
k = max(1, floor(n / θ)) per tensor, the residual keeps what was not sent, and the nodes' messages
are summed and divided by the 4 ranks. No daemon, no network, no policy: it separates what the
algorithm does to accuracy from what the implementation does (a gravac run that ends far from
this one's accuracy has a bug; one that ends near it loses what top-k loses).

Variants: --min_elements N (tensors with fewer elements go dense, as --compress-min-elements),
--no_error_feedback, --momentum_correction (DGC's: the velocity is accumulated per node before
top-k and cleared where sent, the optimizer runs without momentum), --warmup_steps (dense first).

  /usr/bin/python3 bench/e2e/topk_sim.py --theta 10 --seed 1 --train_size 3200 --epochs 3
"""

import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "python"))
import fashion_mnist  # noqa: E402

RANKS, NODES = 4, 2


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--theta", type=float, default=10.0, help="compression factor (1: dense)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train_size", type=int, default=3200)
    p.add_argument("--test_size", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--batch_size", type=int, default=16, help="images per rank per step")
    p.add_argument("--min_elements", type=int, default=0)
    p.add_argument("--no_error_feedback", action="store_true")
    p.add_argument("--momentum_correction", action="store_true")
    p.add_argument("--warmup_steps", type=int, default=0)
    p.add_argument("--data_dir", default=fashion_mnist.DEFAULT_DIR)
    return p.parse_args(argv)


def exchange(node_grads, residuals, velocities, params, theta, args):
    """The averaged gradient of every parameter after the per-node compressed exchange."""
    total = [torch.zeros_like(q) for q in params]
    for n in range(NODES):
        for j, q in enumerate(params):
            g = node_grads[n][j]
            if args.momentum_correction:
                velocities[n][j].mul_(args.momentum).add_(g)
                g = velocities[n][j]
            p = g + residuals[n][j]
            if theta <= 1.0 or q.numel() < args.min_elements:
                total[j] += p
                residuals[n][j].zero_()
                continue
            flat = p.flatten()
            k = max(1, int(math.floor(flat.numel() / theta)))
            idx = flat.abs().topk(k).indices
            sent = torch.zeros_like(flat)
            sent[idx] = flat[idx]
            if not args.no_error_feedback:
                residuals[n][j] = (flat - sent).view_as(q)
            if args.momentum_correction:
                velocities[n][j].view(-1)[idx] = 0.0
            total[j] += sent.view_as(q)
    return [t / RANKS for t in total]


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)
    x_train, y_train, x_test, y_test = fashion_mnist.load_data(
        args.seed, args.train_size, args.test_size, args.data_dir)
    torch.manual_seed(args.seed)  # train_fashion.py's order: seed, then the model
    model = fashion_mnist.make_model("vgg")
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=args.lr,
                                momentum=0.0 if args.momentum_correction else args.momentum)
    residuals = [[torch.zeros_like(q) for q in params] for _ in range(NODES)]
    velocities = [[torch.zeros_like(q) for q in params] for _ in range(NODES)]
    loss_fn = torch.nn.CrossEntropyLoss()
    steps_per_epoch = len(x_train) // (RANKS * args.batch_size)
    start, step = time.monotonic(), 0
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(
            args.seed * 1000 + epoch))
        for i in range(steps_per_epoch):
            node_grads = [[torch.zeros_like(q) for q in params] for _ in range(NODES)]
            for rank in range(RANKS):  # ranks 0, 1 on node 0; 2, 3 on node 1
                idx = perm[rank::RANKS][i * args.batch_size:(i + 1) * args.batch_size]
                model.zero_grad()
                loss_fn(model(fashion_mnist.as_input(x_train[idx])), y_train[idx]).backward()
                for j, q in enumerate(params):
                    node_grads[rank * NODES // RANKS][j] += q.grad
            theta = 1.0 if step < args.warmup_steps else args.theta
            for q, g in zip(params, exchange(node_grads, residuals, velocities, params, theta,
                                             args)):
                q.grad = g
            optimizer.step()
            step += 1
        loss, correct, count = fashion_mnist.evaluate_shard(model, x_test, y_test)
        print("theta %g seed %d epoch %d step %d test_acc %.3f test_loss %.4f (%.0f s)"
              % (args.theta, args.seed, epoch, step, correct / count, loss / count,
                 time.monotonic() - start), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
