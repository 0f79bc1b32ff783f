#!/usr/bin/env python3
"""Functional check of gravac-compressor-bench at a small size (CTest, label `bench`).

Runs the benchmark on 100k elements and checks that it exits 0, that its JSON holds the expected
rows (every compressor at every k/n, dense casts once, torch.topk rows when the peer runs), that
the numbers in each row are consistent, that a second run with the same seed gives bit-identical
outputs (hashes) and another seed other ones, and that bad flags exit non-zero. It asserts no
timing. Exit status 77 (CTest's skip) when --torch names a python without torch.
"""

import argparse
import json
import math
import os
import subprocess
import sys

COMPRESSORS = ["topk", "randomk", "dgc", "redsync", "fp16", "bf16"]
DENSE = {"fp16", "bf16"}
TOPK_LIKE = {"topk", "dgc", "redsync"}
DENSITIES = [0.001, 0.01, 0.1]
N = 100000


def keep_count(n, density):
    theta = 1.0 / density
    return n if not theta > 1.0 else min(n, max(1, int(n / theta)))


def fail(message):
    sys.exit(f"smoke_test.py: FAIL: {message}")


def run_bench(args, extra):
    cmd = [args.bench, "--elements", str(N), "--reps", "2", "--warmup", "1",
           "--densities", ",".join(map(str, DENSITIES)), "--torch", args.torch] + extra
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    return proc


def load_rows(args, seed, name):
    path = os.path.join(args.workdir, name)
    proc = run_bench(args, ["--seed", str(seed), "--json", path])
    if proc.returncode != 0:
        fail(f"benchmark exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    if "x_memcpy" not in proc.stdout or "# lanes 2" not in proc.stdout:
        fail(f"table header missing from stdout:\n{proc.stdout}")
    with open(path) as f:
        return proc.stdout, json.load(f)


def check_report(report, with_torch):
    env = report["env"]
    if env["n"] != N or env["threads"] != 2 or env["reps"] != 2:
        fail(f"env does not echo the run's settings: {env}")
    if not env["memcpy_ms"] > 0:
        fail(f"memcpy_ms not positive: {env}")
    if with_torch != (env["torch_version"] is not None):
        fail(f"torch_version {env['torch_version']!r} with torch={with_torch}")
    rows = report["rows"]
    ours = [r for r in rows if r["source"] == "gravac"]
    expected = [(c, None) for c in COMPRESSORS if c in DENSE]
    expected += [(c, d) for c in COMPRESSORS if c not in DENSE for d in DENSITIES]
    got = [(r["compressor"], r["density"]) for r in ours]
    if sorted(got, key=str) != sorted(expected, key=str):
        fail(f"rows {got} != expected {expected}")
    for r in ours:
        name, density = r["compressor"], r["density"]
        k = N if density is None else keep_count(N, density)
        if r["k"] != k:
            fail(f"{name} at {density}: k {r['k']} != {k}")
        if name in ("topk", "randomk", "fp16", "bf16") and r["kept"] != k:
            fail(f"{name} at {density}: kept {r['kept']} != k {k}")
        if not 1 <= r["kept"] <= N:
            fail(f"{name} at {density}: kept {r['kept']} out of range")
        if not (r["median_ms"] > 0 and r["memcpy_ms"] > 0):
            fail(f"{name} at {density}: non-positive time {r}")
        if not math.isclose(r["ratio_memcpy"], r["median_ms"] / r["memcpy_ms"], rel_tol=1e-6):
            fail(f"{name} at {density}: ratio_memcpy inconsistent {r}")
        if not math.isclose(r["gelem_per_s"], N / r["median_ms"] / 1e6, rel_tol=1e-6):
            fail(f"{name} at {density}: gelem_per_s inconsistent {r}")
        for key in ("ratio_torch_topk", "ratio_torch_topk_memcpy_units"):
            if (r[key] is not None) != (with_torch and name in TOPK_LIKE):
                fail(f"{name} at {density}: {key} {r[key]} unexpected")
    peers = [r for r in rows if r["source"] == "torch"]
    if with_torch:
        if sorted(r["density"] for r in peers) != DENSITIES:
            fail(f"torch rows {peers} do not cover {DENSITIES}")
        for r in peers:
            if r["k"] != keep_count(N, r["density"]) or not r["median_ms"] > 0:
                fail(f"torch row inconsistent: {r}")
            for o in ours:
                if o["density"] != r["density"] or o["compressor"] not in TOPK_LIKE:
                    continue
                if not math.isclose(o["ratio_torch_topk"], o["median_ms"] / r["median_ms"],
                                    rel_tol=1e-6):
                    fail(f"ratio_torch_topk of {o} does not match torch row {r}")
                if not math.isclose(o["ratio_torch_topk_memcpy_units"],
                                    o["ratio_memcpy"] / r["ratio_memcpy"], rel_tol=1e-6):
                    fail(f"ratio_torch_topk_memcpy_units of {o} does not match torch row {r}")
    elif peers:
        fail(f"torch rows present with --torch none: {peers}")
    return {(r["compressor"], r["density"]): r["hash"] for r in ours}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--torch", required=True, help="python for the peer, or 'none'")
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    with_torch = args.torch != "none"
    if with_torch and subprocess.run([args.torch, "-c", "import torch"]).returncode != 0:
        print(f"SKIP: {args.torch} cannot import torch")
        sys.exit(77)

    stdout, report = load_rows(args, 1, "seed1.json")
    print(stdout)
    hashes = check_report(report, with_torch)
    if not with_torch:  # determinism: same seed, same outputs; another seed, other outputs
        _, again = load_rows(args, 1, "seed1_again.json")
        if check_report(again, False) != hashes:
            fail("two runs with the same seed produced different outputs")
        _, other = load_rows(args, 2, "seed2.json")
        other_hashes = check_report(other, False)
        if other_hashes[("topk", 0.01)] == hashes[("topk", 0.01)]:
            fail("topk output did not change with the data seed")

        help_proc = subprocess.run([args.bench, "--help"], capture_output=True, text=True)
        if help_proc.returncode != 0 or "--elements" not in help_proc.stdout:
            fail(f"--help: exit {help_proc.returncode}, output {help_proc.stdout!r}")
        for bad in (["--distribution", "cauchy"], ["--compressors", "nosuch"],
                    ["--densities", "0"], ["--elements", "-5"], ["--nosuchflag", "1"], ["stray"]):
            proc = run_bench(args, bad)
            if proc.returncode == 0:
                fail(f"{bad} was accepted")
    print("smoke_test.py: OK")


if __name__ == "__main__":
    main()
