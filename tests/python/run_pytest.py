#!/usr/bin/python3
"""Runs one pytest file on every rank of a gravacrun job (the CTest driver of tests/python).

  run_pytest.py --gravacrun PATH --pythonpath DIR --np N [--nodes M] [--timeout S]
                [--gravacrun_arg ARG ...] [--require MODULE ...] [--script --script_arg ARG ...]
                [--no_launcher] FILE

Runs `python3 -m pytest FILE` on every rank, or with --script `python3 FILE ARGS...`. With
--no_launcher the command runs once, without gravacrun and with no GRAVAC_* environment (a
Horovod script started as `python train.py`).
Exits 77 (CTest SKIP_RETURN_CODE) when torch, pytest or a --require'd module is missing for this
interpreter, else with gravacrun's exit code (the first failing rank's); the job is killed after
--timeout seconds.
"""

import argparse
import importlib.util
import os
import signal
import subprocess
import sys

SKIP = 77


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gravacrun", required=True)
    parser.add_argument("--pythonpath", required=True)
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--gravacrun_arg", action="append", default=[])
    parser.add_argument("--require", action="append", default=[])
    parser.add_argument("--script", action="store_true")
    parser.add_argument("--script_arg", action="append", default=[])
    parser.add_argument("--no_launcher", action="store_true")
    parser.add_argument("test_file")
    args = parser.parse_args()

    for module in ["torch", "pytest"] + args.require:
        if importlib.util.find_spec(module) is None:
            print("SKIP: %s is not installed for %s" % (module, sys.executable))
            return SKIP

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (args.pythonpath, env.get("PYTHONPATH", "")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    command = [args.gravacrun, "-np", str(args.np), "--nodes", str(args.nodes)]
    command += args.gravacrun_arg + ["--"]
    if args.no_launcher:
        command = []
        env = {k: v for k, v in env.items() if not k.startswith("GRAVAC_")}
    if args.script:
        command += [sys.executable, os.path.abspath(args.test_file)] + args.script_arg
    else:
        command += [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "--rootdir", os.path.dirname(os.path.abspath(args.test_file)),
                    os.path.abspath(args.test_file)]
    print("+ " + " ".join(command), flush=True)
    proc = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print("FAIL: the job ran past %g s; killing it" % args.timeout, flush=True)
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return 1


if __name__ == "__main__":
    sys.exit(main())
