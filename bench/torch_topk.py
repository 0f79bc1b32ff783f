#!/usr/bin/env python3
"""torch.topk peer for the gravac compressor benchmark (bench/compressor_bench.cc).

Measures, on CPU with torch.set_num_threads(--threads), the median time of
    idx = torch.topk(x.abs(), k, sorted=False).indices; vals = x.index_select(0, idx)
(the same selection gravac's topk makes: the k largest |x_i| with their signed values) and of a
torch copy of the same bytes into a preallocated tensor (dst.copy_(x)), interleaved with each
repetition so that machine noise hits both. Data: n fp32 samples of N(0, 1) or Laplace(0, 1),
drawn with torch from --seed (the same distribution and size as the C++ side, not the same bits).
k = max(1, floor(n / (1 / density))), as gravac's KeepCount.

Prints JSON lines on stdout (compressor_bench reads them; peer.h describes the format):
    {"kind": "env", "torch_version": ..., "threads": ..., "n": ..., "distribution": ...}
    {"kind": "memcpy", "ms": <median copy_ over the run>, "clone_ms": <median x.clone()>}
    {"kind": "topk", "density": d, "k": k, "ms": ..., "memcpy_ms": ..., "ratio_memcpy": ...}
Exits non-zero if a result is wrong (count != k, repeated indices, or a dropped element larger
than the smallest kept one).
"""

import argparse
import json
import statistics
import sys
import time

import torch


def keep_count(n, density):
    if n <= 0:
        return 0
    theta = 1.0 / density
    if not theta > 1.0:
        return n
    return min(n, max(1, int(n / theta)))


def timed_ms(fn):
    start = time.perf_counter_ns()
    result = fn()
    return (time.perf_counter_ns() - start) / 1e6, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1 << 26)
    parser.add_argument("--densities", default="0.001,0.01,0.1")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--distribution", choices=["normal", "laplace"], default="normal")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.elements < 1 or args.reps < 1 or args.warmup < 0 or args.threads < 1:
        parser.error("--elements, --reps and --threads must be >= 1, --warmup >= 0")
    densities = [float(d) for d in args.densities.split(",") if d]

    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    n = args.elements
    if args.distribution == "normal":
        x = torch.randn(n, generator=gen, dtype=torch.float32)
    else:  # Laplace(0, 1) = random sign * Exp(1)
        x = torch.empty(n, dtype=torch.float32).exponential_(1.0, generator=gen)
        x *= torch.randint(0, 2, (n,), generator=gen).mul_(2).sub_(1).to(torch.float32)
    dst = torch.empty_like(x)
    dst.copy_(x)  # touch the destination pages once

    print(json.dumps({"kind": "env", "torch_version": torch.__version__,
                      "threads": torch.get_num_threads(), "n": n,
                      "distribution": args.distribution}), flush=True)

    def topk(k):
        idx = torch.topk(x.abs(), k, sorted=False).indices
        return idx, x.index_select(0, idx)

    all_copies = []
    rows = []
    for density in densities:
        k = keep_count(n, density)
        idx, vals = topk(k)
        if idx.numel() != k or vals.numel() != k:
            sys.exit(f"torch_topk.py: topk returned {idx.numel()} elements, expected {k}")
        # Every element above the smallest kept magnitude must have been kept.
        smallest = vals.abs().min()
        if int((x.abs() > smallest).sum()) != int((vals.abs() > smallest).sum()):
            sys.exit(f"torch_topk.py: topk at k={k} is not the k largest magnitudes")
        if idx.unique().numel() != k:
            sys.exit(f"torch_topk.py: topk at k={k} returned repeated indices")
        for _ in range(args.warmup):
            topk(k)
        topk_ms, copy_ms = [], []
        for _ in range(args.reps):
            copy_ms.append(timed_ms(lambda: dst.copy_(x))[0])
            topk_ms.append(timed_ms(lambda: topk(k))[0])
        all_copies += copy_ms
        med_topk, med_copy = statistics.median(topk_ms), statistics.median(copy_ms)
        rows.append({"kind": "topk", "density": density, "k": k, "ms": med_topk,
                     "memcpy_ms": med_copy, "ratio_memcpy": med_topk / med_copy})

    clone_ms = [timed_ms(lambda: x.clone())[0] for _ in range(args.reps)]
    if not all_copies:
        all_copies = [timed_ms(lambda: dst.copy_(x))[0] for _ in range(args.reps)]
    print(json.dumps({"kind": "memcpy", "ms": statistics.median(all_copies),
                      "clone_ms": statistics.median(clone_ms)}), flush=True)
    for row in rows:
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
