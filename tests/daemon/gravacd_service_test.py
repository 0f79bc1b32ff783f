#!/usr/bin/env python3
"""gravacd --serve_jobs (daemon/job_service.h): one daemon per node that outlives jobs.

An emulated cluster (gravac-netemu, 3 nodes): the controller on node 0, one gravacd --serve_jobs
on each of nodes 1 and 2, and the workers of every job (gravac-integration-worker --mode
decisions, through the C API) in the namespace of their node, started as Kubernetes or a batch
system would start them: with GRAVAC_JOB_NAME / GRAVAC_RUN_ID / GRAVAC_NODE_RANK / GRAVAC_NODES
and the node's socket, and nothing else started for the job. Scenarios:

  concurrent    two jobs started at once both train to the end, each with its own decisions
                (every rank of a job used the same theta, collective and epoch at every step) and
                identical replicas (the same result digest on every rank); a third job started
                after they end runs on the same daemons, which were never restarted (the socket's
                SO_PEERCRED pid is the same before and after, and the processes are still ours).
                Each daemon's /metrics reports each job apart (labels job_name, run_id: its
                steps, applied theta, saved bytes) and removes an ended job's series after
                --job_metrics_retention_s.
  ended_run_id  a job rerun with the run id the controller already ended fails on its workers
                with an error naming the job, the node and the ended run (GRAVAC_ERR_REFUSED), while a job started
                before it keeps running to the end.
  refusals      daemons serving --jobs alpha,beta with --slots 2 and a data port range of one
                port: a worker of job gamma (not served), a job needing more slots than are free,
                a second group claiming alpha's slots, and a job finding the port range exhausted
                each fail with a clear error naming the job and the node (GRAVAC_ERR_REFUSED), while alpha trains to
                the end; then the daemons are idle and still serving.
  peer_failure  a job whose session fails on one node (its data port range is exhausted) fails
                on its other node at once through the controller (FailJob: the job is marked
                failed naming the job and the node; the waiting Join gets it), not after the
                join timeout, while a job on the same daemons trains to the end; prints the lag
                between the two nodes' worker errors.
  hello_refusal a job whose worker one daemon refuses at hello (its job is not in that daemon's
                --jobs; then another job finding that daemon's --slots full) fails on its other
                node at once through the controller (FailJob sent by the refusing daemon), with
                an error naming the job and the refusing node, not after the join timeout, while
                the job holding the slots trains to the end; prints each job's lag.

Usage: gravacd_service_test.py SCENARIO --netemu BIN --controller BIN --gravacd BIN --worker BIN
       --work_dir DIR (CTest passes them).
Needs root for network namespaces; exits 77 (skipped) otherwise.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

POLICY = ["--compressor", "topk", "--theta_min", "10", "--theta_max", "1280", "--window", "2",
          "--eval_steps", "6", "--epsilon", "0.01", "--omega", "0.0001", "--min_dwell", "3"]
CONTROLLER_PORT = 7070
DATA_PORT = 31000
SKIP = 77


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


class Cluster:
    """The emulated nodes and every process started in them (all stopped by close())."""

    def __init__(self, args):
        self.args = args
        self.netemu = args.netemu
        done = subprocess.run([self.netemu, "create", "--nodes=3", "--rate=1e9",
                               "--prefix=gvsvc"], capture_output=True, text=True, timeout=60)
        check(done.returncode == 0, "gravac-netemu create: " + done.stderr)
        self.name = re.search(r"^cluster (\S+)", done.stdout, re.M).group(1)
        self.addresses = [a for _, a in sorted(
            (int(i), a) for i, a in re.findall(r"^node (\d+) netns \S+ address (\S+)",
                                               done.stdout, re.M))]
        self.procs = []

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        subprocess.run([self.netemu, "destroy", self.name], capture_output=True, timeout=60)

    def start(self, node, log_name, argv, env=None):
        log = open(os.path.join(self.args.work_dir, log_name + ".log"), "w")
        full_env = dict(os.environ)
        full_env.update(env or {})
        proc = subprocess.Popen([self.netemu, "run", self.name, str(node), "--"] + argv,
                                stdout=log, stderr=subprocess.STDOUT, env=full_env)
        proc.log_name = log_name
        self.procs.append(proc)
        return proc

    def log(self, log_name):
        with open(os.path.join(self.args.work_dir, log_name + ".log"), errors="replace") as f:
            return f.read()

    def controller(self):
        return "%s:%d" % (self.addresses[0], CONTROLLER_PORT)

    def start_controller(self):
        return self.start(0, "controller", [
            self.args.controller,
            "--listen=%s" % self.controller(), "--metrics_address=off", "--nodes=2",
            "--insecure_plaintext"] + POLICY)

    def socket(self, node):
        return os.path.join(self.args.work_dir, "node%d.sock" % node)

    def metrics_port_file(self, node):
        return os.path.join(self.args.work_dir, "node%d.metrics_port" % node)

    def start_daemon(self, node, extra=(), metrics=False):
        proc = self.start(node, "gravacd-%d" % node, [
            self.args.gravacd, "--serve_jobs",
            "--controller=%s" % self.controller(), "--socket=%s" % self.socket(node),
            "--node_name=svc-n%d" % node, "--ucx_tls=tcp", "--ucx_net_devices=eth0",
            "--insecure_plaintext", "--join_timeout_s=30",
            "--worker_timeout_s=30", "--stall_timeout_s=60"]
            + (["--metrics_address=127.0.0.1:0",
                "--metrics_port_file=%s" % self.metrics_port_file(node)]
               if metrics else ["--metrics_address=off"]) + list(extra))
        deadline = time.monotonic() + 20
        while daemon_pid(self.socket(node)) is None:
            check(proc.poll() is None, "gravacd on node %d exited: %s"
                  % (node, self.log(proc.log_name)))
            check(time.monotonic() < deadline, "gravacd on node %d never listened" % node)
            time.sleep(0.1)
        return proc


    def scrape(self, node):
        """gravacd's /metrics on `node` (fetched from inside the node's namespace)."""
        with open(self.metrics_port_file(node)) as f:
            port = int(f.read())
        done = subprocess.run(
            [self.netemu, "run", self.name, str(node), "--", sys.executable, "-c",
             "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
             "'http://127.0.0.1:%d/metrics', timeout=5).read().decode())" % port],
            capture_output=True, text=True, timeout=30)
        check(done.returncode == 0, "scraping gravacd on node %d: %s" % (node, done.stderr))
        return done.stdout


def series(text, name, **labels):
    """The value of the series `name` whose labels are exactly `labels`, or None."""
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if got == labels:
            return float(m.group(3))
    return None


def daemon_pid(path):
    """The pid of the process listening on the Unix socket `path` (SO_PEERCRED), or None."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        pid, _, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        return pid
    except OSError:
        return None
    finally:
        s.close()


class Job:
    """The workers of one job: `per_node` ranks on each of nodes 1 and 2 (or `nodes`)."""

    def __init__(self, cluster, name, run_id, per_node, steps, seed, step_ms=20,
                 elements=20000, nodes=(1, 2), size=None, nonzero=1.0, tag=""):
        self.cluster, self.name, self.run_id = cluster, name, run_id
        label = "%s-%s%s" % (name, run_id, tag)  # logs of a second group of a job stay apart
        self.dir = os.path.join(cluster.args.work_dir, label)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.size = size if size is not None else per_node * len(nodes)
        self.steps = steps
        self.procs = []
        worker = cluster.args.worker
        for i, node in enumerate(nodes):
            for local in range(per_node):
                rank = i * per_node + local
                env = {"GRAVAC_RANK": str(rank), "GRAVAC_SIZE": str(self.size),
                       "GRAVAC_LOCAL_RANK": str(local), "GRAVAC_LOCAL_SIZE": str(per_node),
                       "GRAVAC_NODE_RANK": str(i), "GRAVAC_NODES": "2",
                       "GRAVAC_DAEMON_SOCKET": cluster.socket(node),
                       "GRAVAC_JOB_NAME": name, "GRAVAC_RUN_ID": run_id,
                       "GRAVAC_CONNECT_TIMEOUT_S": "10"}
                self.procs.append(cluster.start(
                    node, "%s-rank%d" % (label, rank),
                    [worker, "--mode", "decisions", "--steps", str(steps), "--step_ms",
                     str(step_ms), "--elements", str(elements), "--seed", str(seed),
                     "--nonzero", str(nonzero),
                     "--log_dir", self.dir], env))

    def running(self):
        return any(p.poll() is None for p in self.procs)

    def wait(self, timeout=60):
        deadline = time.monotonic() + timeout
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                raise Failure("%s: %s did not finish within %d s (hang):\n%s"
                              % (self.name, p.log_name, timeout, self.output()[-3000:]))
        return codes

    def output(self):
        return "".join("--- %s\n%s" % (p.log_name, self.cluster.log(p.log_name))
                       for p in self.procs)

    def started_steps(self):
        """Results rank 0 logged so far."""
        path = os.path.join(self.dir, "rank0.log")
        if not os.path.exists(path):
            return 0
        with open(path, errors="replace") as f:
            return sum(1 for line in f if "event=result" in line)

    def check_trained(self):
        """Every rank ran every step with the job's decisions and the same result."""
        codes = self.wait()
        check(codes == [0] * len(codes), "%s: workers exited %s:\n%s"
              % (self.name, codes, self.output()[-4000:]))
        per_rank = {}
        for rank in range(self.size):
            results = {}
            with open(os.path.join(self.dir, "rank%d.log" % rank), errors="replace") as f:
                for line in f:
                    ev = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
                    if ev.get("event") == "result":
                        results[(int(ev["step"]), ev["tensor"])] = (
                            ev["theta"], ev["collective"], ev["epoch"], ev["digest"])
            check(len(results) == 2 * self.steps, "%s: rank %d logged %d results, want %d"
                  % (self.name, rank, len(results), 2 * self.steps))
            per_rank[rank] = results
        for rank in range(1, self.size):
            for key, value in sorted(per_rank[0].items()):
                check(per_rank[rank][key] == value,
                      "%s step %d tensor %s: rank 0 had %s, rank %d %s (theta, collective, "
                      "epoch, digest)" % (self.name, key[0], key[1], value, rank,
                                          per_rank[rank][key]))
        thetas = [per_rank[0][(s, "dec.large")][0] for s in range(self.steps)]
        epochs = sorted({int(per_rank[0][(s, "dec.large")][2]) for s in range(self.steps)})
        check(len(set(thetas)) >= 2, "%s: theta never changed: %s" % (self.name, thetas))
        return thetas, epochs

    def check_refused(self, *words):
        """Every worker failed, and its output names `words` (the job, the node, the reason)."""
        codes = self.wait()
        out = self.output()
        check(all(c != 0 for c in codes), "%s: workers exited %s, want failures:\n%s"
              % (self.name, codes, out[-3000:]))
        for w in words:
            check(w in out, "%s: the workers' errors do not say %r:\n%s"
                  % (self.name, w, out[-3000:]))
        return out


def first_error(out):
    m = re.search(r"(gravac_init: .*|error=.*)", out)
    return m.group(1)[:300] if m else "?"


JOB_METRICS_RETENTION_S = 20


def job_series(text, name, node, job, **extra):
    return series(text, name, node="svc-n%d" % node, job_name=job, run_id="r1", **extra)


def scenario_concurrent(cluster):
    cluster.start_controller()
    daemons = [cluster.start_daemon(
        n, ["--job_metrics_retention_s=%d" % JOB_METRICS_RETENTION_S], metrics=True)
        for n in (1, 2)]
    pids = [daemon_pid(cluster.socket(n)) for n in (1, 2)]
    a = Job(cluster, "train-a", "r1", per_node=2, steps=30, seed=7)
    # Job b's gradients are sparse (2% non-zero), so its policy compresses further than a's.
    b = Job(cluster, "train-b", "r1", per_node=2, steps=24, seed=11, elements=40000,
            nonzero=0.02)
    ta, ea = a.check_trained()
    tb, eb = b.check_trained()
    ab_ended = time.monotonic()
    check(ta != tb[:len(ta)] and max(map(float, tb)) > max(map(float, ta)),
          "the jobs' theta did not follow their own gradients: a %s, b %s" % (ta, tb))
    # gravacd's own series, one set per job (labels job_name, run_id), kept after the jobs ended.
    gains = []
    for n in (1, 2):
        text = cluster.scrape(n)
        for job, steps, thetas in (("train-a", 30, ta), ("train-b", 24, tb)):
            got = job_series(text, "gravac_steps_total", n, job)
            check(got == steps, "node %d: gravac_steps_total of %s is %s, want %d:\n%s"
                  % (n, job, got, steps, text[-3000:]))
            theta = job_series(text, "gravac_applied_theta", n, job)
            check(theta == float(thetas[-1]), "node %d: gravac_applied_theta of %s is %s, its "
                  "workers' last step used %s" % (n, job, theta, thetas[-1]))
            dense = job_series(text, "gravac_dense_equivalent_bytes_total", n, job)
            saved = job_series(text, "gravac_saved_bytes_total", n, job)
            check(dense and saved and 0 < saved < dense,
                  "node %d: %s saved %s of %s dense-equivalent bytes" % (n, job, saved, dense))
            gains.append("%s on svc-n%d: %d steps, saved %.0f%% of %.0f dense bytes, last theta %s"
                         % (job, n, steps, 100 * saved / dense, dense, thetas[-1]))
        check(series(text, "gravac_steps_total", node="svc-n%d" % n) is None,
              "node %d: a gravac_steps_total series without job labels" % n)
    for n in (1, 2):
        log = cluster.log("gravacd-%d" % n)
        check(re.search(r"jobs here: .*train-a.*train-b|jobs here: .*train-b.*train-a", log),
              "gravacd on node %d never served both jobs at once:\n%s" % (n, log[-3000:]))
    c = Job(cluster, "train-c", "r1", per_node=1, steps=20, seed=13)
    tc, ec = c.check_trained()
    c_ended = time.monotonic()
    # The ended jobs' series go JOB_METRICS_RETENTION_S after their sessions ended; c's stay
    # until then.
    deadline = ab_ended + JOB_METRICS_RETENTION_S + 15
    while True:
        texts = [cluster.scrape(n) for n in (1, 2)]
        if not any("train-a" in t or "train-b" in t for t in texts):
            break
        check(time.monotonic() < deadline, "the series of train-a/train-b were still there %d s "
              "after the jobs ended (retention %d s)" % (time.monotonic() - ab_ended,
                                                        JOB_METRICS_RETENTION_S))
        time.sleep(0.5)
    removed_after = time.monotonic() - ab_ended
    check(removed_after >= JOB_METRICS_RETENTION_S - 1,
          "the series of train-a/train-b went %.1f s after the jobs ended, before the %d s "
          "retention" % (removed_after, JOB_METRICS_RETENTION_S))
    if time.monotonic() < c_ended + JOB_METRICS_RETENTION_S - 2:
        for n in (1, 2):
            check(job_series(texts[n - 1], "gravac_steps_total", n, "train-c") == 20,
                  "node %d: train-c's series are missing within its retention" % n)
    after = [daemon_pid(cluster.socket(n)) for n in (1, 2)]
    check(after == pids and all(d.poll() is None for d in daemons),
          "the daemons changed: pids %s before, %s after" % (pids, after))
    for n in (1, 2):
        log = cluster.log("gravacd-%d" % n)
        check(len(re.findall(r"serving jobs \(any\)", log)) == 1,
              "gravacd on node %d started more than once" % n)
        for job in ("train-a", "train-b", "train-c"):
            check("job '%s' run 'r1' is over here" % job in log,
                  "gravacd on node %d did not end %s:\n%s" % (n, job, log[-3000:]))
    print("train-a: theta per step %s, epochs %s" % (" ".join(ta), ea))
    print("train-b: theta per step %s, epochs %s" % (" ".join(tb), eb))
    print("train-c (after, same daemons pids %s): theta per step %s, epochs %s"
          % (pids, " ".join(tc), ec))
    for line in gains:
        print("gravacd metrics: " + line)
    print("the ended jobs' series were removed %.1f s after they ended (retention %d s)"
          % (removed_after, JOB_METRICS_RETENTION_S))


def scenario_ended_run_id(cluster):
    cluster.start_controller()
    for n in (1, 2):
        cluster.start_daemon(n)
    long = Job(cluster, "long", "r1", per_node=1, steps=400, seed=5, step_ms=25)
    short = Job(cluster, "short", "r7", per_node=1, steps=12, seed=3)
    short.check_trained()
    rerun = Job(cluster, "short", "r7", per_node=1, steps=12, seed=3, tag="-rerun")
    out = rerun.check_refused("job 'short' run 'r7'", "node 'svc-n", "ended",
                              "GRAVAC_ERR_REFUSED")
    check(long.running(), "the long job ended before the rerun was refused; lengthen it")
    long_steps = long.started_steps()
    long.check_trained()
    print("rerun refused: %s" % first_error(out))
    print("the long job had logged %d results when the rerun failed, and trained to the end"
          % long_steps)


def scenario_refusals(cluster):
    cluster.start_controller()
    for n in (1, 2):
        cluster.start_daemon(n, ["--jobs=alpha,beta", "--slots=2",
                                 "--data_port_range=%d-%d" % (DATA_PORT, DATA_PORT)])
    alpha = Job(cluster, "alpha", "r1", per_node=1, steps=500, seed=5, step_ms=25)
    deadline = time.monotonic() + 30
    while alpha.started_steps() < 4:
        check(alpha.running() and time.monotonic() < deadline,
              "alpha did not start:\n" + alpha.output()[-3000:])
        time.sleep(0.1)
    seen = []
    gamma = Job(cluster, "gamma", "r1", per_node=1, steps=5, seed=1, nodes=(1,), size=2)
    seen.append(first_error(gamma.check_refused(
        "node 'svc-n1'", "job 'gamma' run 'r1'", "does not serve job 'gamma'",
        "GRAVAC_ERR_REFUSED")))
    wide = Job(cluster, "beta", "r1", per_node=2, steps=5, seed=1, nodes=(1,), size=4)
    seen.append(first_error(wide.check_refused(
        "node 'svc-n1'", "job 'beta' run 'r1'", "needs 2 worker slots", "held by job 'alpha'",
        "GRAVAC_ERR_REFUSED")))
    twin = Job(cluster, "alpha", "r1", per_node=1, steps=5, seed=1, nodes=(1,), size=2,
               tag="-twin")
    seen.append(first_error(twin.check_refused(
        "node 'svc-n1'", "job 'alpha' run 'r1'", "already has its 1 workers",
        "GRAVAC_ERR_REFUSED")))
    ports = Job(cluster, "beta", "r2", per_node=1, steps=5, seed=1)
    seen.append(first_error(ports.check_refused(
        "job 'beta' run 'r2'", "node 'svc-n", "port range %d-%d is exhausted"
        % (DATA_PORT, DATA_PORT), "GRAVAC_ERR_REFUSED")))
    check(alpha.running(), "alpha ended before the refusals were done; lengthen it")
    alpha.check_trained()
    for line in seen:
        print("refused: %s" % line)
    print("alpha trained to the end meanwhile")
    # The daemons serve on: a served job on the freed slots. (Not on the data port: the ended
    # job's connections hold it for TCP's TIME_WAIT, up to a minute, docs/CONFIGURATION.md.)
    for n in (1, 2):
        check(daemon_pid(cluster.socket(n)) is not None, "gravacd on node %d is gone" % n)
    deadline = time.monotonic() + 10
    while not all("jobs here: none" in cluster.log("gravacd-%d" % n) for n in (1, 2)):
        check(time.monotonic() < deadline, "the daemons did not become idle")
        time.sleep(0.1)


def wait_exits(procs, timeout):
    """Polls `procs` until all exited; returns each one's exit time (time.monotonic())."""
    deadline = time.monotonic() + timeout
    ended = [None] * len(procs)
    while None in ended:
        for i, p in enumerate(procs):
            if ended[i] is None and p.poll() is not None:
                ended[i] = time.monotonic()
        check(time.monotonic() < deadline, "%s still running after %d s (hang)"
              % ([p.log_name for i, p in enumerate(procs) if ended[i] is None], timeout))
        time.sleep(0.02)
    return ended


def scenario_peer_failure(cluster):
    cluster.start_controller()
    # Node 1's data plane has one port; node 2's any. A long job holds node 1's port.
    cluster.start_daemon(1, ["--data_port_range=%d-%d" % (DATA_PORT, DATA_PORT)])
    cluster.start_daemon(2)
    alpha = Job(cluster, "alpha", "r1", per_node=1, steps=400, seed=5, step_ms=25)
    deadline = time.monotonic() + 30
    while alpha.started_steps() < 4:
        check(alpha.running() and time.monotonic() < deadline,
              "alpha did not start:\n" + alpha.output()[-3000:])
        time.sleep(0.1)
    # Job victim's session fails on node 1 (the port range is exhausted); its node 2 session is
    # waiting in Join (for up to --join_timeout_s=30) and must learn it through the controller.
    started = time.monotonic()
    victim = Job(cluster, "victim", "r1", per_node=1, steps=5, seed=1)
    ends = wait_exits(victim.procs, 60)
    codes = [p.returncode for p in victim.procs]
    out = victim.output()
    check(all(c != 0 for c in codes), "victim's workers exited %s:\n%s" % (codes, out[-3000:]))
    own = cluster.log(victim.procs[0].log_name) + open(os.path.join(victim.dir, "rank0.log"),
                                                        errors="replace").read()
    peer = cluster.log(victim.procs[1].log_name) + open(os.path.join(victim.dir, "rank1.log"),
                                                         errors="replace").read()
    check("port range %d-%d is exhausted" % (DATA_PORT, DATA_PORT) in own
          and "GRAVAC_ERR_REFUSED" in own, "node 1's worker error:\n" + own[-2000:])
    for words in ("job 'victim' run 'r1' failed on node 'svc-n1'", "is exhausted",
                  "GRAVAC_ERR_UNAVAILABLE"):
        check(words in peer, "node 2's worker error does not say %r:\n%s" % (words, peer[-2000:]))
    lag = ends[1] - ends[0]
    check(ends[1] - started < 15, "node 2's worker failed %.1f s after the job started (the join "
          "timeout is 30 s)" % (ends[1] - started))
    check("job 'victim' run 'r1' failed on node 'svc-n1'" in cluster.log("controller"),
          "the controller did not mark victim failed:\n" + cluster.log("controller")[-2000:])
    check(alpha.running(), "alpha ended before victim failed; lengthen it")
    codes = alpha.wait(120)
    check(codes == [0, 0], "alpha exited %s:\n%s" % (codes, alpha.output()[-3000:]))
    print("victim failed on node 1: %s" % first_error(own))
    print("victim on node 2: %s" % first_error(peer))
    print("node 2's worker failed %.2f s after node 1's (%.2f s after the job started; join "
          "timeout 30 s); alpha trained to the end meanwhile" % (lag, ends[1] - started))


def scenario_hello_refusal(cluster):
    cluster.start_controller()
    # Node 1 serves alpha and beta only, with one worker slot, which alpha holds; node 2 any job.
    cluster.start_daemon(1, ["--jobs=alpha,beta", "--slots=1"])
    cluster.start_daemon(2)
    alpha = Job(cluster, "alpha", "r1", per_node=1, steps=400, seed=5, step_ms=25)
    deadline = time.monotonic() + 30
    while alpha.started_steps() < 4:
        check(alpha.running() and time.monotonic() < deadline,
              "alpha did not start:\n" + alpha.output()[-3000:])
        time.sleep(0.1)
    measured = []
    for name, reason in (("gamma", "this gravacd does not serve job 'gamma'"),
                         ("beta", "the job needs 1 worker slots, but 0 of this node's 1 are free")):
        # Node 1 refuses the worker at hello; node 2's session waits in Join (for up to
        # --join_timeout_s=30) and must learn it through the controller.
        started = time.monotonic()
        job = Job(cluster, name, "r1", per_node=1, steps=5, seed=1)
        ends = wait_exits(job.procs, 60)
        codes = [p.returncode for p in job.procs]
        own, peer = ["".join([cluster.log(job.procs[r].log_name)] + [
            open(path, errors="replace").read() for path in
            [os.path.join(job.dir, "rank%d.log" % r)] if os.path.exists(path)]) for r in (0, 1)]
        check(all(c != 0 for c in codes), "%s's workers exited %s:\n%s"
              % (name, codes, job.output()[-3000:]))
        check(reason in own and "GRAVAC_ERR_REFUSED" in own,
              "node 1's worker of %s:\n%s" % (name, own[-2000:]))
        failed = "job '%s' run 'r1' failed on node 'svc-n1'" % name
        for words in (failed, reason, "GRAVAC_ERR_UNAVAILABLE"):
            check(words in peer, "node 2's worker of %s does not say %r:\n%s"
                  % (name, words, peer[-2000:]))
        check(ends[1] - started < 10, "node 2's worker of %s failed %.1f s after the job started "
              "(the join timeout is 30 s)" % (name, ends[1] - started))
        check(failed in cluster.log("controller"), "the controller did not mark %s failed:\n%s"
              % (name, cluster.log("controller")[-2000:]))
        check(re.search(r"job '%s' run 'r1': reported the failure" % name,
                        cluster.log("gravacd-1")),
              "gravacd on node 1 did not report %s's refusal:\n%s"
              % (name, cluster.log("gravacd-1")[-2000:]))
        measured.append("%s refused on node 1 (%s): node 2's worker failed %.2f s after node 1's, "
                        "%.2f s after the job started" % (name, reason, ends[1] - ends[0],
                                                          ends[1] - started))
        measured.append("  node 2: %s" % first_error(peer))
    check(alpha.running(), "alpha ended before the refusals were done; lengthen it")
    codes = alpha.wait(120)
    check(codes == [0, 0], "alpha exited %s:\n%s" % (codes, alpha.output()[-3000:]))
    for line in measured:
        print(line)
    print("join timeout 30 s; alpha trained to the end meanwhile")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=["concurrent", "ended_run_id", "refusals",
                                        "peer_failure", "hello_refusal"])
    for program in ("netemu", "controller", "gravacd", "worker"):
        p.add_argument("--" + program, required=True)
    p.add_argument("--work_dir", required=True)
    args = p.parse_args()
    if os.geteuid() != 0:
        print("SKIPPED: network namespaces need root")
        return SKIP
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    start = time.monotonic()
    cluster = Cluster(args)
    try:
        globals()["scenario_" + args.scenario](cluster)
    except Failure as f:
        print("FAILED %s: %s" % (args.scenario, f))
        for proc in cluster.procs:
            if proc.log_name.startswith(("gravacd", "controller")):
                print("--- %s (tail)\n%s" % (proc.log_name, cluster.log(proc.log_name)[-2500:]))
        return 1
    finally:
        cluster.close()
    print("PASSED %s in %.1f s" % (args.scenario, time.monotonic() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
