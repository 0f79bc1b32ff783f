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
top-k and cleared where sent, the optimizer runs without momentum), --warmup_steps (dense first),
--schedule (the θ sent changes at given steps, e.g. a GraVAC run's decisions replayed).

--gain_thetas lists θs whose compression gain is measured every step as the daemons measure it
(GRAVAC.md "Measured each step"): per node, over the compressed tensors, Σ ‖top-k_θ(g + e)‖ and
Σ ‖g‖ (g: the node's summed gradient, e: the residual before this step's send), summed over the
nodes, each into a window tracker (--window, --alpha); the gain is the ratio of the smoothed
values. Unlike the controller's candidate tracker these never restart, so a θ's gain is what the
candidate tracker would hold had that θ been the candidate for the last W steps while the
schedule's θ was sent. --gain_log writes one line per step; a table per --period steps follows
on stdout (gain at each θ, and its ratio to the first θ's, the accuracy guard's gain_c / gain_min).

  /usr/bin/python3 bench/e2e/topk_sim.py --theta 10 --seed 1 --train_size 3200 --epochs 3
  /usr/bin/python3 bench/e2e/topk_sim.py --theta 10 --min_elements 32768 --train_size 6400 \
      --gain_thetas 10,20,40,80,100,160,320,640,1000 --gain_log /tmp/gains.txt
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
    p.add_argument("--schedule", default="",
                   help="STEP:THETA,...: the θ sent from STEP on (1: dense); before the first "
                        "entry --theta")
    p.add_argument("--gain_thetas", default="", help="comma-separated θs to measure gains at")
    p.add_argument("--window", type=int, default=10, help="W of the gain trackers")
    p.add_argument("--alpha", type=float, default=0.05, help="α of the gain trackers")
    p.add_argument("--period", type=int, default=30, help="steps per row of the gain table")
    p.add_argument("--gain_log", default="", help="file for the per-step gains")
    p.add_argument("--data_dir", default=fashion_mnist.DEFAULT_DIR)
    args = p.parse_args(argv)
    args.schedule = sorted((int(a), float(b)) for a, b in
                           (e.split(":") for e in args.schedule.split(",") if e))
    args.gain_thetas = [float(t) for t in args.gain_thetas.split(",") if t]
    if any(t < 1.0 for t in args.gain_thetas):
        p.error("--gain_thetas: every θ must be >= 1")
    return args


class Tracker:
    """GRAVAC.md's window tracker: 0 until W samples, then the mean of the last W weighted
    (1 - α)^i for the i-th newest, normalised by the weights' sum."""

    def __init__(self, window, alpha):
        self.window, self.alpha, self.samples = window, alpha, []

    def add(self, x):
        self.samples = (self.samples + [x])[-self.window:]

    def value(self):
        if len(self.samples) < self.window:
            return 0.0
        weights = [(1.0 - self.alpha) ** i for i in range(self.window)]
        return sum(w * x for w, x in zip(weights, reversed(self.samples))) / sum(weights)


def theta_at(args, step):
    theta = args.theta
    for first, t in args.schedule:
        if step >= first:
            theta = t
    return theta


def measure_norms(g, p, thetas, norms):
    """Adds one compressed tensor's ‖g‖ and ‖top-k_θ(p)‖ for each θ to norms ("g" and θ keys):
    the top-k of the smallest θ sorted once serves every larger θ."""
    norms["g"] += float(g.norm())
    flat = p.flatten()
    ks = [max(1, int(math.floor(flat.numel() / t))) for t in thetas]
    squares = flat.abs().topk(max(ks)).values.double().pow(2).cumsum(0)
    for t, k in zip(thetas, ks):
        norms[t] += float(squares[k - 1].sqrt())


def exchange(node_grads, residuals, velocities, params, theta, args, norms=None):
    """The averaged gradient of every parameter after the per-node compressed exchange; with
    norms (a dict), the compressed tensors' norms of this step are added to it."""
    total = [torch.zeros_like(q) for q in params]
    for n in range(NODES):
        for j, q in enumerate(params):
            g = node_grads[n][j]
            if args.momentum_correction:
                velocities[n][j].mul_(args.momentum).add_(g)
                g = velocities[n][j]
            p = g + residuals[n][j]
            if norms is not None and q.numel() >= args.min_elements:
                measure_norms(node_grads[n][j], p, args.gain_thetas, norms)
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
    trackers = {key: Tracker(args.window, args.alpha) for key in ["g"] + args.gain_thetas}
    gain_rows, gain_log = [], open(args.gain_log, "w") if args.gain_log else None
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
            theta = 1.0 if step < args.warmup_steps else theta_at(args, step)
            norms = dict.fromkeys(trackers, 0.0) if args.gain_thetas else None
            for q, g in zip(params, exchange(node_grads, residuals, velocities, params, theta,
                                             args, norms)):
                q.grad = g
            optimizer.step()
            if norms is not None:
                gain_rows.append(record_gains(step, theta, norms, trackers, args, gain_log))
            step += 1
        loss, correct, count = fashion_mnist.evaluate_shard(model, x_test, y_test)
        print("theta %g seed %d epoch %d step %d test_acc %.3f test_loss %.4f (%.0f s)"
              % (args.theta, args.seed, epoch, step, correct / count, loss / count,
                 time.monotonic() - start), flush=True)
    if gain_rows:
        print_gain_table(gain_rows, args)
    return 0


def record_gains(step, theta, norms, trackers, args, log):
    """Feeds the step's norms to the trackers; returns (step, θ sent, {θ: gain}) and logs it."""
    for key, value in norms.items():
        trackers[key].add(value)
    smoothed_g = trackers["g"].value()
    gains = {t: trackers[t].value() / smoothed_g if smoothed_g > 0 else 0.0
             for t in args.gain_thetas}
    if log is not None:
        log.write("step %d sent %g n_g %.6g raw %s gain %s\n" % (
            step, theta, norms["g"],
            " ".join("%g:%.4f" % (t, norms[t] / norms["g"]) for t in args.gain_thetas),
            " ".join("%g:%.4f" % (t, gains[t]) for t in args.gain_thetas)))
        log.flush()
    return step, theta, gains


def print_gain_table(rows, args):
    """Gains at the last step of every period, and each over the first θ's (the guard's ratio)."""
    base = args.gain_thetas[0]
    print("\ngain (and gain / gain at θ %g) at the end of each %d-step period, W %d, α %g"
          % (base, args.period, args.window, args.alpha))
    print("| step | θ sent | " + " | ".join("θ %g" % t for t in args.gain_thetas) + " |")
    print("|---" * (len(args.gain_thetas) + 2) + "|")
    for step, theta, gains in rows:
        if (step + 1) % args.period and step != rows[-1][0]:
            continue
        cells = ["%.3f" % gains[base]] + [
            "%.3f (%.2f)" % (gains[t], gains[t] / gains[base] if gains[base] else 0.0)
            for t in args.gain_thetas[1:]]
        print("| %d | %g | %s |" % (step, theta, " | ".join(cells)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
