#!/usr/bin/python3
"""Worker of the observability test's fault job (gravac.torch, run on every rank by gravacrun).

Waits for the file --go (the test creates it once Prometheus has scraped every daemon: an
increase() only counts what happens after a series' first sample), then produces, in order, what
the dashboards' error panels and the GravacStall alert need while the daemons stay up: one
mismatched allreduce (the last rank posts another shape, so every rank gets
a GravacError and every daemon counts gravac_errors_total{kind=...}); one stall (the last rank
posts --stall_s late, beyond gravacd's --stall_warning_s); then small allreduces until the file
--stop appears. Rank 0 writes --marker once the mismatch and the stall are behind it.

Usage: fault_worker.py --go FILE --stop FILE --marker FILE [--stall_s S]
"""
import argparse
import os
import sys
import time

import torch

import gravac.torch as hvd


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--go", required=True)
    p.add_argument("--stop", required=True)
    p.add_argument("--marker", required=True)
    p.add_argument("--stall_s", type=float, default=3.0)
    p.add_argument("--limit_s", type=float, default=120.0)
    args = p.parse_args()
    hvd.init()
    rank, last = hvd.rank(), hvd.size() - 1
    deadline = time.monotonic() + args.limit_s
    while not os.path.exists(args.go):
        if time.monotonic() > deadline:
            print("rank %d: no %s within %g s" % (rank, args.go, args.limit_s), file=sys.stderr)
            return 1
        time.sleep(0.05)
    try:
        hvd.allreduce(torch.ones(4 + (rank == last)), name="obs.mismatch")
        print("rank %d: the mismatched allreduce did not fail" % rank, file=sys.stderr)
        return 1
    except hvd.GravacError as e:
        print("rank %d: mismatch error as expected: %s" % (rank, e), flush=True)
    if rank == last:
        time.sleep(args.stall_s)
    hvd.allreduce(torch.ones(1000), name="obs.stall")
    if rank == 0:
        with open(args.marker + ".tmp", "w") as f:
            f.write("faults done\n")
        os.rename(args.marker + ".tmp", args.marker)
    deadline = time.monotonic() + args.limit_s
    while time.monotonic() < deadline:
        # Every rank must run the same collectives: rank 0 decides when to stop.
        stop = torch.tensor([1.0 if rank == 0 and os.path.exists(args.stop) else 0.0])
        if hvd.allreduce(stop, name="obs.stop", op=hvd.Sum).item() > 0:
            break
        hvd.allreduce(torch.randn(10000), name="obs.grad")
        time.sleep(0.05)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
