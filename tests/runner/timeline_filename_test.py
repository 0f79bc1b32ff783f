"""gravacrun --timeline-filename (horovodrun's flag, issue 21): a real job (controller, gravacd per
node, C API workers) started with the flag leaves a Chrome trace behind: a closed JSON array in
Horovod's shape (process_name metadata naming each tensor, complete "X" events with ts/dur) with
the negotiation and operation of every tensor the workers ran, written from the job's start.

usage: timeline_filename_test.py GRAVACRUN JOB_WORKER
"""

import json
import os
import subprocess
import sys
import tempfile


def main():
    gravacrun, worker = sys.argv[1], sys.argv[2]
    folder = tempfile.mkdtemp(prefix="gravac-timeline-flag-")
    path = os.path.join(folder, "trace.json")
    steps = 3
    run = subprocess.run([gravacrun, "-np", "2", "--nodes", "2", "--timeline-filename", path,
                          worker, "--steps", str(steps)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    with open(path) as f:
        trace = json.load(f)  # fails unless the daemon closed the array at the job's end
    assert isinstance(trace, list) and trace, trace
    names = {e["pid"]: e["args"]["name"] for e in trace
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    by = {}
    for e in trace:
        assert "ph" in e and "pid" in e, e
        if e["ph"] == "X":
            assert e["ts"] >= 0 and e["dur"] >= 0, e
            by.setdefault(names[e["pid"]], []).append(e)
    # job_worker allreduces grad.sum and grad.avg once per step, then allgathers "gather".
    for tensor in ("grad.sum", "grad.avg"):
        events = by.get(tensor, [])
        kinds = [e["name"] for e in events]
        assert kinds.count("ALLREDUCE") == steps, (tensor, kinds)
        assert kinds.count("NEGOTIATE_ALLREDUCE") == steps, (tensor, kinds)
        assert kinds.count("LOCAL_REDUCE") == steps, (tensor, kinds)
        for op in (e for e in events if e["name"] == "ALLREDUCE"):
            assert {"collective", "theta", "decision_epoch", "step"} <= set(op["args"]), op
        assert sorted(op["args"]["step"] for op in events if op["name"] == "ALLREDUCE") == \
            list(range(steps)), (tensor, events)
    gather = [e["name"] for e in by.get("gather", [])]
    assert gather.count("ALLGATHER") == 1 and gather.count("NEGOTIATE_ALLGATHER") == 1, gather
    assert {e["name"] for e in trace if e.get("ph") == "C"} == {"theta", "decision_epoch"}
    os.remove(path)
    os.rmdir(folder)
    print("ok: %d events, tensors %s" % (len(trace), sorted(by)))


if __name__ == "__main__":
    main()
