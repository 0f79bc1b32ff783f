#!/usr/bin/python3
"""CTest smoke of the end-to-end comparison (bench.e2e_compare_smoke).

Runs compare.py --quick (one epoch per run) for --runs on emulated 1 Gbit/s links and checks what
it produced: exit status 0, a row with rc 0, one epoch, an accuracy in (0, 1], a positive
training time, step time and byte count for every run in results.json, and the same rows in the
markdown table of results.md. Exits 77 (CTest skip) where compare.py skips: not root, no torch /
sklearn / matplotlib, or missing binaries.

  bench/e2e/smoke_test.py --build_dir build --out_dir /tmp/e2e-smoke
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build_dir", required=True)
    p.add_argument("--out_dir", required=True)
    p.add_argument("--runs", default="dense,gravac_geometric,ddp")
    p.add_argument("--python", default="/usr/bin/python3")
    args = p.parse_args()
    runs = [r for r in args.runs.split(",") if r]
    for stale in ("results.json", "results.md"):
        path = os.path.join(args.out_dir, stale)
        if os.path.exists(path):
            os.remove(path)
    cmd = [args.python, os.path.join(HERE, "compare.py"), "--quick", "--runs", ",".join(runs),
           "--build_dir", args.build_dir, "--out_dir", args.out_dir]
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd)
    if proc.returncode == SKIP:
        return SKIP
    errors = []
    if proc.returncode != 0:
        errors.append("compare.py exited %d" % proc.returncode)
    try:
        with open(os.path.join(args.out_dir, "results.json")) as f:
            rows = json.load(f)["rows"]
        with open(os.path.join(args.out_dir, "results.md")) as f:
            table = f.read().splitlines()
    except (OSError, ValueError, KeyError) as e:
        print("smoke_test.py: FAIL: no result table: %s" % e, file=sys.stderr)
        return 1
    if [r.get("run") for r in rows] != runs:
        errors.append("rows %s, expected %s" % ([r.get("run") for r in rows], runs))
    for r in rows:
        name = r.get("run")
        if r.get("rc") != 0:
            errors.append("%s: rc %s" % (name, r.get("rc")))
        if r.get("epochs") != 1:
            errors.append("%s: %s epochs recorded, expected 1" % (name, r.get("epochs")))
        acc = r.get("final_acc")
        if acc is None or not 0.0 < acc <= 1.0:
            errors.append("%s: final accuracy %s" % (name, acc))
        for field in ("time_s", "step_ms", "bytes_sent"):
            if not (r.get(field) or 0) > 0:
                errors.append("%s: %s = %s, expected > 0" % (name, field, r.get(field)))
        if not any(line.startswith("| %s | 0 | " % name) for line in table):
            errors.append("%s: no row with rc 0 in results.md" % name)
    if not any(line.startswith("| run | rc | final acc |") for line in table):
        errors.append("results.md has no table header")
    for e in errors:
        print("smoke_test.py: FAIL: %s" % e, file=sys.stderr)
    if not errors:
        print("smoke_test.py: ok, %d runs: %s" % (len(rows), ", ".join(
            "%s acc %.3f step %.0f ms" % (r["run"], r["final_acc"], r["step_ms"]) for r in rows)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
