#!/usr/bin/env python3
"""torch.topk on a CUDA device, the peer of gravac-cuda-kernels-bench (scripts/gpu_check.sh).

Measures with CUDA events, median over --reps after warm-up, on n fp32 N(0, 1) values on the
device:
    idx = torch.topk(x.abs(), k, sorted=False).indices; vals = x.index_select(0, idx)
(the same selection gravac's CUDA top-k makes: the k largest |x_i| with their signed values) and
dst.copy_(x) (a device-to-device copy of the same bytes). k = max(1, n * density).
Prints one JSON object; exit 77 when torch or a CUDA device is missing, 1 on a wrong result
(count != k or a dropped element larger than the smallest kept one).
"""

import argparse
import json
import statistics
import sys

try:
    import torch
except ImportError:
    print("torch_topk_cuda: skipped, no torch in this python", file=sys.stderr)
    sys.exit(77)


def timed(fn, reps):
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 26)
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_topk_cuda: skipped, torch %s has no usable CUDA device" % torch.__version__,
              file=sys.stderr)
        sys.exit(77)
    torch.manual_seed(1)
    x = torch.randn(args.n, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(x)
    k = max(1, int(args.n * args.density))

    def topk():
        idx = torch.topk(x.abs(), k, sorted=False).indices
        return idx, x.index_select(0, idx)

    for _ in range(3):
        topk()
        dst.copy_(x)
    topk_ms = timed(topk, args.reps)
    copy_ms = timed(lambda: dst.copy_(x), args.reps)
    idx, vals = topk()
    kept = vals.abs()
    mask = torch.ones(args.n, dtype=torch.bool, device="cuda")
    mask[idx] = False
    dropped_max = x.abs()[mask].max().item() if k < args.n else 0.0
    ok = idx.numel() == k and idx.unique().numel() == k and dropped_max <= kept.min().item()
    print(json.dumps({"torch_version": torch.__version__, "device": torch.cuda.get_device_name(),
                      "n": args.n, "density": args.density, "k": k, "reps": args.reps,
                      "topk_ms": topk_ms, "memcpy_d2d_ms": copy_ms,
                      "topk_throughput_over_memcpy": copy_ms / topk_ms, "wrong": 0 if ok else 1}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
