#!/usr/bin/python3
"""Data-parallel training of an MLP on scikit-learn's handwritten digits with gravac.torch.

The digits (1797 8x8 images, shipped by python3-sklearn, or its digits.csv.gz next to this
script: nothing is downloaded) are split into a fixed test set and a training set that every epoch is reshuffled (same seed on every rank) and
dealt out to the ranks. The model is an MLP 64 -> 2048 -> 1024 -> 10 (2.2 M parameters, 9 MB of
fp32 gradients per step) so that exchanging gradients matters on a 1 Gbit/s link.

  gravacrun -np 4 --nodes 2 --link 1gbit -- /usr/bin/python3 examples/python/train_digits.py

--mode picks the gradient exchange: dense (no compression), static (top-k at a fixed --theta) or
gravac (the GraVAC policy picks θ). θ is a job-level setting of gravac-controller, so static and
gravac jobs are started with matching gravacrun flags; --print-gravacrun-args prints them:

  MODE="--mode static --theta 100"     # add --sparse-values fp16 for 2-byte values
  gravacrun -np 4 --nodes 2 --link 1gbit \
      $(/usr/bin/python3 examples/python/train_digits.py $MODE --print-gravacrun-args) \
      -- /usr/bin/python3 examples/python/train_digits.py $MODE

Rank 0 prints one line per epoch: loss, accuracy, the θ and collective of the last step, the
controller's compression gains (gain_c at the candidate θ, gain_min at θ_min), the bytes saved
against dense and the time; --log-json FILE also writes them as JSON lines.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import torch

import gravac.torch as hvd


def add_gravac_args(p):
    """The job-level GraVAC flags (the controller's defaults) and --sparse-values."""
    g = p.add_argument_group(
        "GraVAC policy (job-level: gravac-controller's defaults; pass the same values to "
        "gravacrun, see --print-gravacrun-args)")
    g.add_argument("--theta-min", type=float, default=10.0)
    g.add_argument("--theta-max", type=float, default=10000.0)
    g.add_argument("--epsilon", type=float, default=0.75)
    g.add_argument("--omega", type=float, default=0.05)
    g.add_argument("--policy", choices=("geometric", "exponential"), default="geometric")
    g.add_argument("--scale", type=float, default=2.0)
    g.add_argument("--window", type=int, default=25)
    g.add_argument("--eval-steps", type=int, default=500)
    g.add_argument("--min-dwell", type=int, default=None,
                   help="steps a chosen θ is held (0: the paper's per-step choice; default: "
                   "the job's, 25)")
    g.add_argument("--min-relative-gain", type=float, default=None,
                   help="least gain_c / gain_min for θ_c to be sent (0: the paper's ε alone; "
                   "default: the job's, 0.6)")
    g.add_argument("--sparse-values", choices=("fp32", "fp16", "bf16"), default="fp32",
                   help="precision the kept values travel at (static and gravac modes)")
    g.add_argument("--compress-min-elements", type=int, default=0,
                   help="gradients with fewer elements are sent dense (static and gravac modes; "
                   "this worker's setting, not the job's; 0: compress all)")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("dense", "static", "gravac"), default="gravac")
    p.add_argument("--theta", type=float, default=100.0, help="static compression factor")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=16, help="samples per rank per step")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate (SGD, momentum 0.9)")
    p.add_argument("--hidden", type=int, nargs=2, default=(2048, 1024), metavar=("H1", "H2"))
    p.add_argument("--target-accuracy", type=float, default=0.95,
                   help="report the time at which test accuracy first reaches this")
    p.add_argument("--min-accuracy", type=float, default=0.0,
                   help="exit 1 when the final test accuracy is below this (smoke tests)")
    p.add_argument("--log-json", default="", help="rank 0 appends one JSON line per epoch")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--print-digest", action="store_true",
                   help="every rank prints a SHA-256 of its final parameters (replicas must agree)")
    add_gravac_args(p)
    p.add_argument("--print-gravacrun-args", action="store_true",
                   help="print the gravacrun flags for --mode and exit")
    return p.parse_args(argv)


def make_compression(args):
    if args.mode == "dense":
        return hvd.Compression.none
    if args.mode == "static":
        return hvd.Compression.topk(args.theta, values=args.sparse_values,
                                    min_elements=args.compress_min_elements)
    return hvd.Compression.gravac(theta_min=args.theta_min, theta_max=args.theta_max,
                                  epsilon=args.epsilon, omega=args.omega, policy=args.policy,
                                  scale=args.scale, window=args.window,
                                  eval_steps=args.eval_steps, values=args.sparse_values,
                                  min_dwell=args.min_dwell,
                                  min_relative_gain=args.min_relative_gain,
                                  min_elements=args.compress_min_elements)


def load_data(seed):
    """Standardized digits: (x_train, y_train, x_test, y_test); the split is fixed by `seed`.

    The digits come from scikit-learn when it is installed, else from digits.csv.gz next to this
    script: scikit-learn's own file, which deploy/Dockerfile copies there so that the image needs
    neither scikit-learn nor the compilers that its scipy pulls in (python3-pythran -> g++)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        load_digits = None
    if load_digits is not None:
        digits = load_digits()
        data, target = digits.data, digits.target
    else:
        import numpy
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits.csv.gz")
        if not os.path.exists(path):
            sys.exit("train_digits: neither scikit-learn nor %s (the digits) is installed" % path)
        table = numpy.loadtxt(path, delimiter=",")  # what load_digits reads: 64 pixels, label
        data, target = table[:, :-1], table[:, -1].astype(numpy.int64)
    x = torch.tensor(data, dtype=torch.float32)
    y = torch.tensor(target, dtype=torch.int64)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    test, train = perm[:360], perm[360:]
    mean, std = x[train].mean(0), x[train].std(0) + 1e-3
    x = (x - mean) / std
    return x[train], y[train], x[test], y[test]


def make_model(hidden):
    h1, h2 = hidden
    return torch.nn.Sequential(torch.nn.Linear(64, h1), torch.nn.ReLU(),
                               torch.nn.Linear(h1, h2), torch.nn.ReLU(),
                               torch.nn.Linear(h2, 10))


def find_gravacctl():
    """gravacctl from $GRAVACCTL, PATH, or the build tree this gravac package came from."""
    candidates = [os.environ.get("GRAVACCTL", ""), shutil.which("gravacctl") or ""]
    package = os.path.dirname(os.path.abspath(hvd.__file__))  # <build>/client/python/gravac/torch
    build = os.path.normpath(os.path.join(package, "..", "..", "..", ".."))
    candidates.append(os.path.join(build, "controller", "ctl", "gravacctl"))
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    return None


def job_status(gravacctl):
    """The controller's JobStatus as a dict (gravacctl status --json), or None."""
    if gravacctl is None or not os.environ.get("GRAVAC_CONTROLLER"):
        return None
    try:
        out = subprocess.run([gravacctl, "status", "--json", "--timeout_s", "2"],
                             capture_output=True, text=True, timeout=5, check=True).stdout
        return json.loads(out)
    except (subprocess.SubprocessError, OSError, ValueError):
        return None


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y).item()
        acc = (logits.argmax(1) == y).float().mean().item()
    model.train()
    return loss, acc


def warn_if_job_differs(gravacctl, mode, compression):
    """Rank 0 warns when the running job's θ range or sparse values differ from this mode's."""
    status = job_status(gravacctl)
    if status is None or mode == "dense":
        return
    job = status.get("job", {})
    if (float(job.get("theta_min", 0)) != compression.theta_min
            or float(job.get("theta_max", 0)) != compression.theta_max
            or (job.get("sparse_values") or "fp32") != compression.values):
        print("warning: the job runs theta in [%s, %s] with %s sparse values, this mode "
              "expects %s: start it with gravacrun %s"
              % (job.get("theta_min"), job.get("theta_max"), job.get("sparse_values") or "fp32",
                 compression, " ".join(compression.gravacrun_args())), flush=True)


def report_epoch(args, optimizer, gravacctl, epoch, elapsed, train_loss, test_loss, acc, thetas,
                 compute_s, wait_s, steps):
    """Rank 0's line for an epoch (θ and collective of its last step, the controller's gains,
    phase and bytes saved from gravacctl status), also appended as JSON to --log-json. Returns
    the record."""
    info = optimizer.last_step_info or {}
    status = job_status(gravacctl) or {}
    decision = status.get("decision", {})
    dense = float(status.get("bytes_dense", 0) or 0)
    saved = float(status.get("bytes_saved", 0) or 0)
    record = {
        "epoch": epoch, "time_s": round(elapsed, 3), "train_loss": train_loss,
        "test_loss": test_loss, "test_accuracy": acc, "step": optimizer.gravac_step,
        "theta": info.get("theta"), "collective": info.get("collective"),
        "theta_mean": sum(thetas) / len(thetas) if thetas else None,
        "gain_c": decision.get("gain_c"), "gain_min": decision.get("gain_min"),
        "theta_candidate": decision.get("theta_candidate"),
        "phase": decision.get("phase"),
        "bytes_sent": status.get("bytes_sent"), "bytes_dense": status.get("bytes_dense"),
        "step_time_s": elapsed / optimizer.gravac_step,
        "compute_ms_per_step": 1000 * compute_s / steps,
        "wait_ms_per_step": 1000 * wait_s / steps,
    }
    gain = ("gain %.3f (θmin %.3f)" % (decision["gain_c"], decision.get("gain_min", 0))
            if decision.get("gain_c") else "gain -")
    print("epoch %3d  loss %.4f  test loss %.4f  acc %.4f  θ %g (%s)  %s  %s  saved %s  "
          "%.1f s  step: %.0f ms compute + %.0f ms waiting for gradients"
          % (epoch, train_loss, test_loss, acc, info.get("theta", float("nan")),
             info.get("collective", "-"), gain, decision.get("phase", "-"),
             "%.0f%%" % (100 * saved / dense) if dense > 0 else "-", elapsed,
             record["compute_ms_per_step"], record["wait_ms_per_step"]), flush=True)
    if args.log_json:
        with open(args.log_json, "a") as f:
            f.write(json.dumps(record) + "\n")
    return record


def finish(args, rank, acc, start, time_to_target):
    """Prints rank 0's closing line, shuts gravac down and returns the exit status: 1 when the
    final accuracy is below --min-accuracy."""
    if rank == 0:
        print("done: mode %s, final accuracy %.4f, time %.1f s, time to %.2f accuracy: %s"
              % (args.mode, acc, time.monotonic() - start, args.target_accuracy,
                 "%.1f s" % time_to_target if time_to_target is not None else "not reached"),
              flush=True)
    hvd.shutdown()
    if acc < args.min_accuracy:
        print("rank %d: final accuracy %.4f is below --min-accuracy %.4f"
              % (rank, acc, args.min_accuracy), file=sys.stderr)
        return 1
    return 0


def main(argv):
    args = parse_args(argv)
    compression = make_compression(args)
    if args.print_gravacrun_args:
        flags = compression.gravacrun_args() if hasattr(compression, "gravacrun_args") else []
        print(" ".join(flags))
        return 0
    if "GRAVAC_RANK" not in os.environ:
        print("run me under gravacrun, e.g.\n  gravacrun -np 4 --nodes 2 --link 1gbit -- %s %s"
              % (sys.executable, " ".join([sys.argv[0]] + argv)), file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()

    x_train, y_train, x_test, y_test = load_data(args.seed)
    torch.manual_seed(args.seed)
    model = make_model(args.hidden)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression,
                                         samples_per_step=args.batch_size)
    steps_per_epoch = len(x_train) // (size * args.batch_size)
    gravacctl = find_gravacctl() if rank == 0 else None
    if rank == 0:
        n_params = sum(p.numel() for p in model.parameters())
        print("train_digits: %d ranks, mode %s (%r), %d parameters (%.1f MB fp32), %d train / "
              "%d test samples, %d steps per epoch of %d x %d samples"
              % (size, args.mode, compression, n_params, n_params * 4 / 1e6, len(x_train),
                 len(x_test), steps_per_epoch, size, args.batch_size), flush=True)
        warn_if_job_differs(gravacctl, args.mode, compression)

    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.monotonic()
    time_to_target = None
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(
            args.seed * 1000 + epoch))
        mine = perm[rank::size]
        thetas, epoch_loss, compute_s, wait_s = [], 0.0, 0.0, 0.0
        for i in range(steps_per_epoch):
            idx = mine[i * args.batch_size:(i + 1) * args.batch_size]
            t0 = time.monotonic()
            optimizer.zero_grad()
            loss = loss_fn(model(x_train[idx]), y_train[idx])
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
        train_loss = hvd.allreduce(torch.tensor(epoch_loss / steps_per_epoch),
                                   name="epoch_loss").item()
        test_loss, acc = evaluate(model, x_test, y_test)
        elapsed = time.monotonic() - start
        if time_to_target is None and acc >= args.target_accuracy:
            time_to_target = elapsed
        if rank == 0:
            report_epoch(args, optimizer, gravacctl, epoch, elapsed, train_loss, test_loss, acc,
                         thetas, compute_s, wait_s, steps_per_epoch)
    if args.print_digest:
        digest = hashlib.sha256()
        for p in model.parameters():
            digest.update(p.detach().contiguous().numpy().tobytes())
        print("rank %d parameters sha256 %s" % (rank, digest.hexdigest()), flush=True)
    return finish(args, rank, acc, start, time_to_target)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
