#!/usr/bin/python3
"""The Gloo peer of gravac-collectives-bench (BENCHMARKS.md, ratio 1).

One process per rank: torch.distributed with the gloo backend, initialised through
tcp://<master>:<port>, runs dist.all_reduce (fp32 sum) over the same size sweep as the bench, with
the same small-integer inputs (every sum exact in any order): --warmup untimed and --iters timed
calls per size, each after a barrier and timed alone; every element of the last result is
checked. Rank 0 prints one line per size with the slowest rank's median time (microseconds) and
the wrong count summed over ranks:

    gloo <bytes> <count> <time_us> <wrong>

Every rank exits 1 when any element was wrong, 2 on bad arguments, 77 when torch (or its gloo
backend) is missing. It knows nothing of namespaces: bench/collectives_driver.py starts rank r
inside node r of an emulated cluster, with GLOO_SOCKET_IFNAME naming the node's interface.
Blocks in torch.distributed calls; --timeout_s bounds each one.
"""

import argparse
import datetime
import os
import statistics
import sys
import time


def input_values(torch, rank, count):
    """InputValue of the bench: ((i * 7 + rank * 3) % 11) - 5 as fp32."""
    i = torch.arange(count, dtype=torch.int64)
    return ((i * 7 + rank * 3) % 11 - 5).to(torch.float32)


def expected_sum(torch, world, count):
    i = torch.arange(count, dtype=torch.int64)
    total = torch.zeros(count, dtype=torch.float32)
    for r in range(world):
        total += ((i * 7 + r * 3) % 11 - 5).to(torch.float32)
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world_size", type=int, required=True)
    parser.add_argument("--master", required=True, help="tcp://ADDRESS:PORT of rank 0")
    parser.add_argument("--min_bytes", type=int, default=1 << 20)
    parser.add_argument("--max_bytes", type=int, default=256 << 20)
    parser.add_argument("--step_factor", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--timeout_s", type=int, default=300)
    args = parser.parse_args()
    if not (0 <= args.rank < args.world_size and 4 <= args.min_bytes <= args.max_bytes
            and args.step_factor >= 2 and args.iters >= 1 and args.warmup >= 0):
        print("gloo peer: bad arguments", file=sys.stderr)
        return 2
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"gloo peer: SKIP: torch is missing ({e})", file=sys.stderr)
        return 77
    if not dist.is_available() or not dist.is_gloo_available():
        print("gloo peer: SKIP: torch.distributed has no gloo backend", file=sys.stderr)
        return 77
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=args.master, rank=args.rank,
                            world_size=args.world_size,
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    if args.rank == 0:
        print(f"# gloo np {args.world_size} torch {torch.__version__} "
              f"ifname {os.environ.get('GLOO_SOCKET_IFNAME', '')}", flush=True)
    total_wrong = 0
    size = args.min_bytes
    while size <= args.max_bytes:
        count = max(1, size // 4)
        x = input_values(torch, args.rank, count)
        out = torch.empty_like(x)
        times = []
        for it in range(args.warmup + args.iters):
            out.copy_(x)  # all_reduce is in place: each call starts from the input
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(out, op=dist.ReduceOp.SUM)
            elapsed_us = (time.perf_counter() - start) * 1e6
            if it >= args.warmup:
                times.append(elapsed_us)
        wrong = int((out != expected_sum(torch, args.world_size, count)).sum().item())
        stats = torch.tensor([statistics.median(times)], dtype=torch.float64)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        wrong_t = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(wrong_t, op=dist.ReduceOp.SUM)
        if args.rank == 0:
            print(f"gloo {count * 4} {count} {stats.item():.3f} {wrong_t.item()}", flush=True)
        total_wrong += int(wrong_t.item())
        size *= args.step_factor
    dist.destroy_process_group()
    if total_wrong > 0:
        if args.rank == 0:
            print(f"gloo peer: {total_wrong} wrong elements", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
