#!/usr/bin/python3
"""Issue 22's acceptance test: an elastic job that loses a node trains on.

Runs examples/python/horovod/elastic_train.py twice under gravacrun on emulated links (2 nodes x 2
workers, each node in its own network namespace, --min-np 2):

  1. uninterrupted: the reference accuracy;
  2. after epoch 1 (every rank holds there until the test lets it go), every process of node 1
     (all processes in its network namespace: its gravacd and its two workers) is killed with
     SIGKILL. The two survivors must regroup into a membership of 2 ranks, restore their last
     commit, finish every epoch with identical replicas (the script checks them with an
     allgather) and reach an accuracy within --max-accuracy-drop of run 1; gravacrun must exit 0.

With --kill worker, step 2 kills only node 1's local rank 0 (a worker, not its gravacd, which
lives on): the 3 survivors must regroup into a membership of 3 ranks in which node 1's remaining
worker is rank 2, local rank 0 of 1 (dense local ranks), and its gravacd must still be running.

Prints the time from the kill to the survivors training again (rank 0's reset callback, which
runs once the new membership is formed and the state synced) as
"ELASTIC_SHRINK_OK ... fault to training again X s" (ELASTIC_WORKER_LOST_OK with --kill worker). With --min-np 3 instead (--expect-end), the
job must end with an error naming the lost node. With --link (the default) it needs root
(network namespaces) and exits 77 (skip) otherwise; --link none runs the nodes in this namespace
and finds node 1's processes by their command line and environment instead.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

SKIP = 77


def local_rank_of(pid):
    """GRAVAC_LOCAL_RANK of a worker process (None for another process or a gone one)."""
    try:
        with open("/proc/%s/environ" % pid, "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    for entry in env:
        if entry.startswith(b"GRAVAC_LOCAL_RANK="):
            return int(entry.split(b"=", 1)[1])
    return None


def alive(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def node_processes(run_id, node):
    """Every process of node `node` of run `run_id` without namespaces: its gravacd (by its
    command line) and its workers (by the environment gravacrun gave them)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%s/environ" % entry, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        run = ("--run_id=%s" % run_id).encode()
        daemon = any(a.endswith(b"gravacd") for a in argv[:1]) and run in argv and \
            ("--node_rank=%d" % node).encode() in argv
        worker = ("GRAVAC_RUN_ID=%s" % run_id).encode() in env and \
            ("GRAVAC_NODE_RANK=%d" % node).encode() in env and b"GRAVAC_ELASTIC=1" in env
        if daemon or worker:
            pids.append(entry)
    return pids


def can_netns():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = "gvcprobe-elastic-%d" % os.getpid()
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        return False
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return True


class Job:
    """A gravacrun job whose output lines are kept with their arrival times."""

    def __init__(self, command, env):
        print("+ " + " ".join(command), flush=True)
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.lines = []
        self.cv = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            sys.stdout.write(line)
            with self.cv:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cv.notify_all()
        with self.cv:
            self.cv.notify_all()

    def wait_for(self, pattern, timeout, after=0):
        """(time, match) of the first line matching `pattern` from index `after`, or None."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        with self.cv:
            while True:
                for t, line in self.lines[after:]:
                    m = regex.search(line)
                    if m:
                        return t, m
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    return None
                self.cv.wait(min(left, 0.5))

    def finish(self, timeout):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGINT)
            self.proc.wait(timeout=20)
            code = None
        self.reader.join(timeout=10)
        return code

    def text(self):
        with self.cv:
            return "\n".join(line for _, line in self.lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gravacrun", required=True)
    parser.add_argument("--pythonpath", required=True)
    parser.add_argument("--script", required=True)
    parser.add_argument("--link", default="1gbit",
                        help="emulated link rate; 'none': all nodes in this namespace (no root)")
    parser.add_argument("--min-np", type=int, default=2)
    parser.add_argument("--kill", choices=("node", "worker"), default="node",
                        help="node: every process of node 1; worker: only its local rank 0")
    parser.add_argument("--expect-end", action="store_true",
                        help="the loss leaves fewer than --min-np ranks: the job must end")
    parser.add_argument("--max-accuracy-drop", type=float, default=0.005)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("script_args", nargs="*")
    args = parser.parse_args()
    linked = args.link != "none"
    if linked and not can_netns():
        print("SKIP: network namespaces need root and iproute2")
        return SKIP

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (args.pythonpath, env.get("PYTHONPATH", ""))
                                        if p)
    env["OMP_NUM_THREADS"] = "1"
    base = [args.gravacrun, "-np", "4", "--nodes", "2", "--verbose", "--min-np",
            str(args.min_np), "--regroup_timeout_s", "3"]
    base += (["--link", args.link] if linked else []) + ["--"]
    worker = [sys.executable, os.path.abspath(args.script)] + args.script_args

    reference = None
    if not args.expect_end:
        ref = Job(base + worker, env)
        code = ref.finish(args.timeout)
        final = ref.wait_for(r"\[rank 0\] final: accuracy ([0-9.]+), 4 replicas identical", 1)
        if code != 0 or final is None:
            print("FAIL: the uninterrupted run failed (exit %s)" % code)
            return 1
        reference = float(final[1].group(1))

    hold_file = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                             "gravac-elastic-hold-%d" % os.getpid())
    if os.path.exists(hold_file):
        os.unlink(hold_file)
    job = Job(base + worker + ["--hold-after-epoch", "1", "--hold-file", hold_file], env)
    if linked:
        started = job.wait_for(r"starting gravacd 1 in netns (\S+):", 60)
    else:
        started = job.wait_for(r"starting gravacd 1: .*--run_id=(\S+)", 60)
    epoch1 = job.wait_for(r"\[rank 0\] holding after epoch 1", args.timeout)
    if started is None or epoch1 is None:
        job.finish(5)
        print("FAIL: no node 1 start line or no end of epoch 1 in the output")
        return 1
    if linked:
        where = "netns %s" % started[1].group(1)
        pids = subprocess.run(["ip", "netns", "pids", started[1].group(1)], capture_output=True,
                              text=True).stdout.split()
    else:
        where = "run %s" % started[1].group(1)
        pids = node_processes(started[1].group(1), 1)
    workers = [p for p in pids if local_rank_of(p) is not None]
    others = [p for p in pids if p not in workers]  # the gravacd (and any helper of the node)
    if args.kill == "worker":
        if len(workers) != 2 or not others:
            job.finish(5)
            print("FAIL: node 1 had workers %s and other processes %s, want 2 workers and its "
                  "gravacd" % (workers, others))
            return 1
        pids = [p for p in workers if local_rank_of(p) == 0]
    mark = len(job.lines)
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    fault = time.monotonic()
    with open(hold_file, "w"):
        pass  # the survivors go on into epoch 2 and find node 1 gone
    print("killed %d processes of node 1 (%s): %s" % (len(pids), where, " ".join(pids)),
          flush=True)
    if args.kill == "node" and len(pids) < 3:
        job.finish(5)
        print("FAIL: node 1 had %d processes, want its gravacd and 2 workers" % len(pids))
        return 1

    if args.expect_end:
        code = job.finish(args.timeout)
        os.unlink(hold_file)
        text = job.text()
        if code == 0 or "below the minimum of %d" % args.min_np not in text or \
                "lost nodes: node1" not in text.replace("'", ""):
            print("FAIL: want the job to end naming the lost node (exit %s)" % code)
            return 1
        print("ELASTIC_BELOW_MIN_OK: the job ended %.2f s after the kill (exit %d) naming the "
              "lost node" % (time.monotonic() - fault, code))
        return 0

    size = 2 if args.kill == "node" else 3
    resumed = job.wait_for(r"\[rank 0\] reset: %d ranks, resuming" % size, args.timeout,
                           after=mark)
    daemon_alive = all(alive(p) for p in others)  # node 1's gravacd, once training again
    code = job.finish(args.timeout)
    os.unlink(hold_file)
    final = job.wait_for(r"\[rank 0\] final: accuracy ([0-9.]+), %d replicas identical" % size,
                         1, after=mark)
    if resumed is None or final is None or code != 0:
        print("FAIL: the survivors did not finish as %d ranks with identical replicas (exit %s, "
              "resumed %s)" % (size, code, resumed is not None))
        return 1
    if args.kill == "worker":
        # Node 0 keeps its 2 ranks; node 1's survivor (launched as its local rank 1) is rank 2,
        # local rank 0 of 1; its gravacd lived on; gravacrun counted the worker as lost.
        want = ["placement: rank 0 of 3, local rank 0 of 2",
                "placement: rank 1 of 3, local rank 1 of 2",
                "placement: rank 2 of 3, local rank 0 of 1",
                "was killed by signal 9"]
        missing = [w for w in want if job.wait_for(re.escape(w), 1, after=mark) is None]
        if missing or not daemon_alive:
            print("FAIL: after the loss of node 1's local rank 0: missing %s; node 1's gravacd "
                  "%s" % (missing, "alive" if daemon_alive else "DEAD"))
            return 1
    accuracy = float(final[1].group(1))
    if abs(accuracy - reference) > args.max_accuracy_drop:
        print("FAIL: accuracy %.4f after the loss vs %.4f uninterrupted (> %.3f apart)"
              % (accuracy, reference, args.max_accuracy_drop))
        return 1
    if args.kill == "worker":
        print("ELASTIC_WORKER_LOST_OK: node 1's local rank 0 killed after epoch 1 (its gravacd "
              "lived on); the 3 survivors regrouped (node 1's survivor: rank 2, local rank 0 of "
              "1) and finished with identical replicas, accuracy %.4f vs %.4f uninterrupted; "
              "fault to training again %.2f s" % (accuracy, reference, resumed[0] - fault),
              flush=True)
        return 0
    print("ELASTIC_SHRINK_OK: node 1 killed after epoch 1; the 2 survivors finished with "
          "identical replicas, accuracy %.4f vs %.4f uninterrupted; fault to training again "
          "%.2f s" % (accuracy, reference, resumed[0] - fault), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
