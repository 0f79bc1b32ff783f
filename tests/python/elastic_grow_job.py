#!/usr/bin/python3
"""Issue 22's acceptance test for growing: an elastic job grows onto a host that appears in its
discovery script, then lets a host that disappears go, without a rollback.

Runs examples/python/horovod/elastic_train.py under gravacrun --host-discovery-script (each host
an emulated node in its own network namespace with --link, the default; --link none: all in this
namespace), 2 hosts x 2 workers at the start (--min-np 2):

  1. uninterrupted (the script keeps printing the 2 hosts): the reference accuracy;
  2. after epoch 1 (every rank holds there) a third host (2 slots) is added to what the script
     prints; once gravacrun started its gravacd and workers and published the update, the ranks
     go on and, at their next commit, raise HostsUpdatedInterrupt, regroup with the new node's
     workers into 6 ranks (rank 0 broadcasts the state) and train on. After epoch 2 the second
     host is taken out of the script: at the next commit its workers leave and the 4 others
     regroup without a rollback. Every rank must finish every epoch with identical replicas
     (the script checks them with an allgather) and an accuracy within --max-accuracy-drop of
     run 1; gravacrun must exit 0.

Prints the time from the host's appearance in the script to rank 0 training on the bigger world
(its reset callback, once the membership is formed and the state synced) and from the removal to
training on the smaller one, as "ELASTIC_GROW_OK ... add to training X s ... remove to training
Y s". With --link it needs root (network namespaces) and exits 77 (skip) otherwise.
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic_shrink_job import SKIP, Job, can_netns  # noqa: E402


def write_hosts(path, hosts):
    with open(path + ".tmp", "w") as f:
        f.write("".join("%s:2\n" % h for h in hosts))
    os.replace(path + ".tmp", path)


def bad_discovery(job, hosts_file):
    """Garbage, a failing run and a hanging run, each warned about with the last good hosts
    kept; False (after printing FAIL) when gravacrun does not say so or changes the job."""
    cases = [
        ("duplicate host", lambda: open(hosts_file, "w").write("host-a:2\nhost-b:2\nhost-a:2\n"),
         r"host discovery: .*host 'host-a' is listed twice; keeping the last good hosts"),
        ("bad slots", lambda: open(hosts_file, "w").write("host-a:2\nhost-b:lots\n"),
         r"host discovery: .*slots 'lots' of host 'host-b' are not a positive integer"),
        ("bad name", lambda: open(hosts_file, "w").write("host-a:2\nhost b\n"),
         r"host discovery: .*'host b' is not a host name"),
        ("exit 3", lambda: open(hosts_file + ".fail", "w").close(),
         r"host discovery: .*exited with code 3: inventory service down; keeping"),
        ("hang", lambda: (os.unlink(hosts_file + ".fail"), open(hosts_file + ".hang", "w").close()),
         r"host discovery: .*did not finish within 2s \(killed\); keeping"),
    ]
    for what, make, pattern in cases:
        mark = len(job.lines)
        make()
        if job.wait_for(pattern, 20, after=mark) is None:
            print("FAIL: gravacrun did not warn about a discovery script's %s" % what)
            return False
    os.unlink(hosts_file + ".hang")
    write_hosts(hosts_file, ["host-a", "host-b"])
    if job.wait_for(r"host discovery: the script's output is good again", 20) is None:
        print("FAIL: gravacrun did not take the script's good output again")
        return False
    if "hosts updated (" in job.text() or "appeared; starting" in job.text():
        print("FAIL: bad discovery output changed the job's hosts")
        return False
    print("bad discovery output: each warned about, the 2 hosts kept", flush=True)
    return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gravacrun", required=True)
    parser.add_argument("--pythonpath", required=True)
    parser.add_argument("--script", required=True)
    parser.add_argument("--link", default="1gbit",
                        help="emulated link rate; 'none': all nodes in this namespace (no root)")
    parser.add_argument("--max-accuracy-drop", type=float, default=0.005)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--bad-discovery", action="store_true",
                        help="while held after epoch 1, make the script print garbage, fail and "
                             "hang: gravacrun must warn and keep the 2 hosts")
    parser.add_argument("script_args", nargs="*")
    args = parser.parse_args()
    linked = args.link != "none"
    if linked and not can_netns():
        print("SKIP: network namespaces need root and iproute2")
        return SKIP

    work = tempfile.mkdtemp(prefix="gravac-elastic-grow-")
    hosts_file = os.path.join(work, "hosts")
    discover = os.path.join(work, "discover.sh")
    with open(discover, "w") as f:
        f.write("#!/bin/sh\n"
                "[ -e %s.fail ] && { echo 'inventory service down' >&2; exit 3; }\n"
                "[ -e %s.hang ] && exec sleep 60\n"
                "exec cat %s\n" % (hosts_file, hosts_file, hosts_file))
    os.chmod(discover, 0o755)

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (args.pythonpath, env.get("PYTHONPATH", ""))
                                        if p)
    env["OMP_NUM_THREADS"] = "1"
    base = [args.gravacrun, "-np", "4", "--min-np", "2", "--max-np", "6", "--verbose",
            "--host-discovery-script", discover, "--regroup_timeout_s", "3",
            "--host_discovery_timeout_s", "2",
            # Horovod's spelling, through to the controller's wait for the added host's workers.
            "--elastic-timeout", "45"]
    base += (["--link", args.link] if linked else []) + ["--"]
    worker = [sys.executable, os.path.abspath(args.script)] + args.script_args

    write_hosts(hosts_file, ["host-a", "host-b"])
    ref = Job(base + worker, env)
    code = ref.finish(args.timeout)
    final = ref.wait_for(r"\[rank 0\] final: accuracy ([0-9.]+), 4 replicas identical", 1)
    if code != 0 or final is None:
        print("FAIL: the uninterrupted run failed (exit %s)" % code)
        return 1
    reference = float(final[1].group(1))

    hold = os.path.join(work, "hold")
    job = Job(base + worker + ["--hold-after-epoch", "1,2", "--hold-file", hold], env)
    if job.wait_for(r"\[rank 0\] holding after epoch 1", args.timeout) is None:
        job.finish(5)
        print("FAIL: no end of epoch 1 in the output")
        return 1
    if args.bad_discovery and not bad_discovery(job, hosts_file):
        job.finish(5)
        return 1
    mark = len(job.lines)
    write_hosts(hosts_file, ["host-a", "host-b", "host-c"])
    added = time.monotonic()
    published = job.wait_for(r"gravacrun: hosts updated \(1\): nodes node0, node1, node2",
                             60, after=mark)
    with open(hold, "w"):
        pass  # the ranks go on; their next commit raises HostsUpdatedInterrupt
    grown = job.wait_for(r"\[rank 0\] reset: 6 ranks, resuming", args.timeout, after=mark)
    if published is None or grown is None:
        job.finish(5)
        print("FAIL: the job did not grow onto host-c (update published: %s)"
              % (published is not None))
        return 1
    print("grown: host-c added, update published after %.2f s, training on 6 ranks after %.2f s"
          % (published[0] - added, grown[0] - added), flush=True)

    if job.wait_for(r"\[rank 0\] holding after epoch 2", args.timeout, after=mark) is None:
        job.finish(5)
        print("FAIL: no end of epoch 2 in the output")
        return 1
    mark = len(job.lines)
    write_hosts(hosts_file, ["host-a", "host-c"])
    removed = time.monotonic()
    published = job.wait_for(r"gravacrun: hosts updated \(2\): nodes node0, node2", 60,
                             after=mark)
    with open(hold + ".2", "w"):
        pass
    shrunk = job.wait_for(r"\[rank 0\] reset: 4 ranks, resuming", args.timeout, after=mark)
    code = job.finish(args.timeout)
    final = job.wait_for(r"\[rank 0\] final: accuracy ([0-9.]+), 4 replicas identical", 1,
                         after=mark)
    text = job.text()
    left = text.count("was removed from the job by a host update")
    if published is None or shrunk is None or final is None or code != 0:
        print("FAIL: the job did not finish on 4 ranks with identical replicas after host-b left "
              "(exit %s, update published %s, shrunk %s)"
              % (code, published is not None, shrunk is not None))
        return 1
    if left != 2:
        print("FAIL: want host-b's 2 workers to leave at the commit, %d said so" % left)
        return 1
    accuracy = float(final[1].group(1))
    if abs(accuracy - reference) > args.max_accuracy_drop:
        print("FAIL: accuracy %.4f after growing and shrinking vs %.4f uninterrupted (> %.3f "
              "apart)" % (accuracy, reference, args.max_accuracy_drop))
        return 1
    print("ELASTIC_GROW_OK: host-c added after epoch 1: add to training on 6 ranks %.2f s; "
          "host-b removed after epoch 2: remove to training on 4 ranks %.2f s (no rollback); "
          "every rank finished with identical replicas, accuracy %.4f vs %.4f uninterrupted"
          % (grown[0] - added, shrunk[0] - removed, accuracy, reference), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
