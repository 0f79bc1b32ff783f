#!/usr/bin/python3
"""End-to-end comparison of issue #5 / BENCHMARKS.md item 8: time to accuracy on 1 Gbit/s links.

Trains examples/python/train_digits.py (MLP 64 -> 2048 -> 1024 -> 10, 2.2 M parameters, the
digits of python3-sklearn) or, with --example fashion, examples/python/train_fashion.py (a
VGG-style CNN, 3.25 M parameters, on --train_size images of Fashion-MNIST, scored on --test_size
test images) on 2 emulated nodes x 2 workers, same seed and epochs for every run:

  dense                  gravacrun ... train_digits.py --mode dense
  static10/100/1000      --mode static --theta θ   (job: --theta_min θ --theta_max θ --epsilon 1e-9)
                         (any other staticN, e.g. static20, may be named in --runs)
  gravac_geometric       --mode gravac --policy geometric
  gravac_exponential     --mode gravac --policy exponential
  gravac_*_paper         the same with the paper's ε 0.75 and no accuracy guard (the others take
                         --epsilon and --min_relative_gain, default the controller's 0.75 and 0.6)
  ddp                    bench/e2e/ddp_peer.py: torch DistributedDataParallel, gloo backend
  <run>_staged           any gravac run above with GRAVAC_ZERO_COPY=0: gradients are copied
                         through the staging segments instead of being reduced in place

With --example fashion the compressed runs send gradients under --min_elements (32768) elements
dense, so only the CNN's 3.2 M-element dense layer is compressed (train_fashion.py
--compress-min-elements; bench/e2e/README.md says why).

gravac runs use `gravacrun -np 4 --nodes 2 --link RATE` (the flags of the compressor come from
train_digits.py --print-gravacrun-args). The DDP peer runs in a cluster made with
`gravac-netemu create --nodes 2 --rate RATE`, ranks 0,1 in node 0 and 2,3 in node 1, rendezvous
at node 0's address; its bytes are the eth0 transmit counters of both namespaces (payload plus
TCP/IP headers) while gravac's are the controller's bytes_sent (inter-node payload, as reported
by gravacctl status through train_digits.py --log-json).

Writes to --out_dir: results.md (the table, the settings and the load average), one
<run>.jsonl (per-epoch records), <run>.log (the job's output), gravac step logs,
controller_decisions.log (the GraVAC runs' decisions and each search period's gains), and
accuracy_vs_time.png, bytes_per_step.png, theta_vs_step.png, gain_vs_step.png. Needs root (namespaces), /usr/bin/python3
with torch, sklearn and matplotlib, and a build tree with gravacrun, gravacd, gravac-controller,
gravacctl, the gravac Python package and gravac-netemu (--build_dir, --netemu).

  sudo bench/e2e/compare.py --build_dir build --epochs 10 --out_dir /tmp/e2e
  bench/e2e/compare.py --quick --runs dense,gravac_geometric,ddp     # smoke check
  sudo bench/e2e/compare.py --epochs 10 --repeat 3 --out_dir /tmp/e2e  # 3 interleaved rounds

With --repeat N every configuration runs N times, round by round (so slow drifts of a shared host
hit every configuration alike); each round writes its own table and plots into round<k>/ and
summary.md / summary.json give every round's time to target and the medians. --seeds 0,1,2
runs one round per seed (times --repeat): the seed fixes the train/test split, the initial
weights and the shuffling, so rounds of different seeds sample the accuracy's variation too,
while rounds of one seed differ only in timing (and in GraVAC's timing-dependent decisions).
The summary also gives each round's time to "dense quality" (dense's final accuracy in that
round less --dense_margin points, the issue's accuracy bar) and, for every GraVAC run, in how
many rounds it reached each target before each other run.

Every job runs in its own process group and is killed after --run_timeout_s; the emulated
cluster of the DDP run is destroyed on exit. Exits 0 when every run finished, 1 otherwise, 77
when something it needs is missing (so a CTest smoke test can report a skip).
"""

import argparse
import glob
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
EXAMPLES_DIR = os.path.join(REPO, "examples", "python")
# --example: the training script, and the defaults that differ between the two jobs.
EXAMPLES = {
    "digits": {"script": "train_digits.py", "epochs": 10, "target": 0.96, "window": 10,
               "eval_steps": 22, "theta_max": 40, "min_elements": 0, "score_every": 0},
    "fashion": {"script": "train_fashion.py", "epochs": 3, "target": 0.85, "window": 10,
                "eval_steps": 30, "theta_max": 1000, "min_elements": 32768, "score_every": 10},
}
SKIP = 77

RUNS = {
    "dense": ["--mode", "dense"],
    "static10": ["--mode", "static", "--theta", "10"],
    "static100": ["--mode", "static", "--theta", "100"],
    "static1000": ["--mode", "static", "--theta", "1000"],
    "gravac_geometric": ["--mode", "gravac", "--policy", "geometric"],
    "gravac_exponential": ["--mode", "gravac", "--policy", "exponential"],
    # The paper's rule and setting: ε 0.75, without the accuracy guard (min_relative_gain 0).
    "gravac_geometric_paper": ["--mode", "gravac", "--policy", "geometric",
                               "--min-relative-gain", "0", "--epsilon", "0.75"],
    "gravac_exponential_paper": ["--mode", "gravac", "--policy", "exponential",
                                 "--min-relative-gain", "0", "--epsilon", "0.75"],
    "ddp": None,
}
STATIC_RE = re.compile(r"^static(\d+)$")
STAGED = "_staged"  # run-name suffix: the run with GRAVAC_ZERO_COPY=0


def base_run(name):
    return name[:-len(STAGED)] if name.endswith(STAGED) else name


def known_run(name):
    base = base_run(name)
    if base == "ddp":
        return name == "ddp"
    return base in RUNS or bool(STATIC_RE.match(base))


def run_flags(name):
    """train_digits.py flags of a run (None for ddp); KeyError for an unknown name."""
    name = base_run(name)
    m = STATIC_RE.match(name)
    if name not in RUNS and m and int(m.group(1)) >= 1:
        return ["--mode", "static", "--theta", m.group(1)]
    return RUNS[name]

GAIN = r"(not measured yet|\S+)"  # the controller logs a gain whose trackers are filling so
DECISION_RE = re.compile(
    r"decision epoch (\d+) from step (\d+): theta (\S+) theta_c (\S+) phase (\S+).*?"
    r"gain_min " + GAIN + " gain_c " + GAIN)


def gain_value(text):
    """A logged gain as a float, None when not measured yet."""
    return None if text == "not measured yet" else float(text)
STEP_RE = re.compile(r"^step=(\d+) epoch=(\d+) theta=(\S+) collective=(\S+)")


class Skip(Exception):
    pass


def run_job(cmd, env, log_path, timeout):
    """Runs cmd in its own process group, output to log_path. Returns (rc, wall seconds)."""
    start = time.monotonic()
    with open(log_path, "w") as log:
        log.write("+ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log.write("compare.py: killed after %.0f s\n" % timeout)
            kill_group(proc)
            rc = 124
        except BaseException:
            kill_group(proc)
            raise
    return rc, time.monotonic() - start


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=10)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_run_log(path):
    """(per-epoch records, scores) of a run's JSON lines: the scores are the lines of kind
    'score' that --score-every adds (fashion_mnist.score_record), in step order."""
    lines = read_jsonl(path)
    return ([r for r in lines if r.get("kind") != "score"],
            [r for r in lines if r.get("kind") == "score"])


def example_script(args):
    return os.path.join(EXAMPLES_DIR, EXAMPLES[args.example]["script"])


def training_args(args, name):
    """Training script / ddp_peer.py arguments shared by every run, then the run's own."""
    common = ["--epochs", str(args.epochs), "--seed", str(args.seed),
              "--target-accuracy", str(args.target), "--threads", "1",
              "--batch-size", str(args.batch_size)]
    if args.example == "digits":
        common += ["--hidden"] + [str(h) for h in args.hidden]
    else:
        common += ["--train-size", str(args.train_size), "--test-size", str(args.test_size),
                   "--lr", "%g" % args.lr]
        if args.score_every:
            common += ["--score-every", str(args.score_every)]
    own = list(run_flags(name) or [])
    if own and own[1] != "dense" and args.min_elements:
        own += ["--compress-min-elements", str(args.min_elements)]
    if own and own[1] == "gravac":
        own += ["--window", str(args.window), "--eval-steps", str(args.eval_steps),
                "--theta-max", "%g" % args.theta_max]
        if args.min_dwell is not None:
            own += ["--min-dwell", str(args.min_dwell)]
        if args.min_relative_gain is not None and "--min-relative-gain" not in own:
            own += ["--min-relative-gain", "%g" % args.min_relative_gain]
        if args.epsilon is not None and "--epsilon" not in own:
            own += ["--epsilon", "%g" % args.epsilon]
    return common + own


def job_description(args):
    """The training job in words, for the tables."""
    if args.example == "digits":
        return ("train_digits.py MLP 64-%d-%d-10 (%.1f M parameters) on sklearn's digits"
                % (args.hidden[0], args.hidden[1], mlp_parameters(args.hidden) / 1e6))
    return ("train_fashion.py VGG-style CNN (3.25 M parameters) on Fashion-MNIST, %d training "
            "images (drawn with the seed), the first %d test images, lr %g%s"
            % (args.train_size, args.test_size, args.lr,
               ", gradients under %d elements sent dense" % args.min_elements
               if args.min_elements else ""))


def run_gravac(args, name, env):
    out = args.out_dir
    log_json = os.path.join(out, name + ".jsonl")
    for old in [log_json] + glob.glob(os.path.join(out, name + ".steps.*.log")):
        if os.path.exists(old):
            os.remove(old)
    train = training_args(args, name)
    script = example_script(args)
    flags = subprocess.run([args.python, script] + train + ["--print-gravacrun-args"],
                           env=env, capture_output=True, text=True, check=True).stdout.split()
    cmd = [args.gravacrun, "-np", "4", "--nodes", "2", "--link", args.link,
           "--step_log", os.path.join(out, name + ".steps.{node}.log")] + flags
    cmd += ["--", args.python, script] + train + ["--log-json", log_json]
    if name.endswith(STAGED):
        env = dict(env, GRAVAC_ZERO_COPY="0")
    rc, wall = run_job(cmd, env, os.path.join(out, name + ".log"), args.run_timeout_s)
    return dict(parse_gravac_outputs(out, name), rc=rc, wall_s=wall)


def parse_gravac_outputs(out, name):
    """Records, controller decisions and per-step θ of a gravac run from its files in out."""
    decisions = []
    log_path = os.path.join(out, name + ".log")
    if os.path.exists(log_path):
        with open(log_path) as f:
            for line in f:
                m = DECISION_RE.search(line)
                if m and "[controller]" in line:
                    decisions.append({"decision_epoch": int(m.group(1)),
                                      "step": int(m.group(2)), "theta": float(m.group(3)),
                                      "theta_c": float(m.group(4)), "phase": m.group(5),
                                      "gain_min": gain_value(m.group(6)),
                                      "gain_c": gain_value(m.group(7))})
    theta_by_step = {}
    step_log = os.path.join(out, name + ".steps.0.log")
    if os.path.exists(step_log):
        with open(step_log) as f:
            for line in f:
                m = STEP_RE.match(line)
                if m and int(m.group(1)) >= 0:
                    s = int(m.group(1))
                    theta_by_step[s] = max(theta_by_step.get(s, 0.0), float(m.group(3)))
    records, scores = read_run_log(os.path.join(out, name + ".jsonl"))
    last = records[-1] if records else {}
    return {"records": records, "scores": scores, "decisions": decisions,
            "theta_by_step": sorted(theta_by_step.items()),
            "bytes_sent": float(last.get("bytes_sent") or 0) if last else None,
            "bytes_dense": float(last.get("bytes_dense") or 0) if last else None,
            "bytes_source": "controller bytes_sent"}


def netemu_create(args):
    out = subprocess.run([args.netemu, "create", "--nodes=2", "--rate=%g" % args.rate,
                          "--prefix=gve2e"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError("gravac-netemu create failed (%d): %s" % (out.returncode, out.stderr))
    name = re.search(r"^cluster (\S+)", out.stdout, re.M).group(1)
    nodes = [(m.group(2), m.group(3))
             for m in re.finditer(r"^node (\d+) netns (\S+) address (\S+)", out.stdout, re.M)]
    if len(nodes) != 2:
        subprocess.run([args.netemu, "destroy", name], capture_output=True, timeout=60)
        raise RuntimeError("gravac-netemu create printed %d nodes: %s" % (len(nodes), out.stdout))
    return name, nodes


def tx_bytes(netns, dev="eth0"):
    out = subprocess.run(["ip", "netns", "exec", netns, "cat", "/sys/class/net/%s/statistics/"
                          "tx_bytes" % dev], capture_output=True, text=True, timeout=10)
    return int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


def run_ddp(args, env):
    out = args.out_dir
    log_json = os.path.join(out, "ddp.jsonl")
    if os.path.exists(log_json):
        os.remove(log_json)
    cluster, nodes = netemu_create(args)
    procs, logs = [], []
    try:
        before = [tx_bytes(ns) for ns, _ in nodes]
        port = 20000 + random.Random(os.getpid()).randrange(20000)
        master = "tcp://%s:%d" % (nodes[0][1], port)
        ddp_env = dict(env, GLOO_SOCKET_IFNAME="eth0")
        start = time.monotonic()
        for r in range(4):
            ns = nodes[r // 2][0]
            cmd = ["ip", "netns", "exec", ns, args.python, os.path.join(HERE, "ddp_peer.py"),
                   "--rank", str(r), "--world_size", "4", "--master", master,
                   "--timeout_s", str(int(args.run_timeout_s)),
                   "--example", args.example] + training_args(args, "ddp")
            if r == 0:
                cmd += ["--log-json", log_json]
            log = open(os.path.join(out, "ddp.log" if r == 0 else "ddp.rank%d.log" % r), "w")
            log.write("+ " + " ".join(cmd) + "\n")
            log.flush()
            logs.append(log)
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=ddp_env,
                                          start_new_session=True))
        deadline = time.monotonic() + args.run_timeout_s
        codes = []
        for proc in procs:
            try:
                codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(124)
        wall = time.monotonic() - start
        after = [tx_bytes(ns) for ns, _ in nodes]
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_group(proc)
        for log in logs:
            log.close()
        subprocess.run([args.netemu, "destroy", cluster], capture_output=True, timeout=60)
    rc = next((c for c in codes if c != 0), 0)
    sent = (sum(a - b for a, b in zip(after, before))
            if None not in before and None not in after else None)
    records, scores = read_run_log(log_json)
    return {"rc": rc, "wall_s": wall, "records": records, "scores": scores, "decisions": [],
            "theta_by_step": [], "bytes_sent": sent, "bytes_dense": None,
            "bytes_source": "eth0 tx of both namespaces"}


def curve_of(recs, scores=None):
    """The accuracy curve: [step, training time without scoring, test accuracy] of every score
    when the run was scored every --score_every steps, else [epoch, training time, test
    accuracy] of every per-epoch record (that time includes the epochs' scoring). Its unit
    ("step" or "epoch") is the second item."""
    if scores:
        return [[r["step"], r["train_time_s"], r["test_accuracy"]] for r in scores], "step"
    return [[r["epoch"], r["time_s"], r["test_accuracy"]] for r in recs], "epoch"


def summarize(name, res, target):
    recs, scores = res["records"], res.get("scores") or []
    final = recs[-1] if recs else {}
    curve, unit = curve_of(recs, scores)
    ttt, reached_at = time_to({"curve": curve}, target)
    # With scores, time and step time leave the scoring out (the last score is the last
    # epoch's); without, they are the per-epoch records' (scoring included).
    time_s = scores[-1]["train_time_s"] if scores else final.get("time_s")
    steps = scores[-1]["step"] if scores else final.get("step")
    step_ms = (1000 * time_s / steps if scores and steps
               else 1000 * final["step_time_s"] if final.get("step_time_s") else None)
    return {"run": name, "rc": res["rc"], "epochs": len(recs),
            "final_acc": final.get("test_accuracy"), "time_s": time_s,
            "time_to_target_s": ttt, "reached_at": reached_at, "curve_unit": unit,
            "step_ms": step_ms,
            "bytes_sent": res["bytes_sent"], "bytes_dense": res["bytes_dense"],
            "bytes_source": res["bytes_source"], "wall_s": res["wall_s"],
            "load_before": res["load_before"], "load_after": res["load_after"],
            "theta_mean": (sum(r.get("theta_mean") or 0 for r in recs) / len(recs)
                           if recs and name.startswith("gravac") else None),
            "decision_epochs": len(res["decisions"]) if name.startswith("gravac") else None,
            "epochs_per_100_steps": epochs_per_100_steps(res) if name.startswith("gravac")
                                    else None,
            "curve": curve}


def reached_label(row):
    """Where a row's curve first reached the target: "step 130", "epoch 3", or None."""
    if row.get("reached_at") is None:
        return None
    return "%s %d" % (row.get("curve_unit", "epoch"), row["reached_at"])


def epochs_per_100_steps(res):
    """Decision epochs the controller published per 100 training steps of a run (every epoch
    is a θ, candidate or phase change the daemons must adopt), or None without steps."""
    recs = res["records"]
    steps = recs[-1].get("step") if recs else None
    if not steps:
        return None
    return 100.0 * len(res["decisions"]) / steps


def mlp_parameters(hidden):
    """Weights and biases of train_digits.py's MLP 64 -> h1 -> h2 -> 10."""
    h1, h2 = hidden
    return 64 * h1 + h1 + h1 * h2 + h2 + h2 * 10 + 10


def fmt(v, spec, none="—"):
    return none if v is None else spec % v


def write_table(args, rows, load_start, load_end):
    dense = next((r for r in rows if r["run"] == "dense"), None)
    lines = ["# End-to-end comparison (issue #5, BENCHMARKS.md item 8)", "",
             "2 nodes x 2 workers, links %s (gravacrun --link / gravac-netemu --rate %g), "
             "%s, %d epochs, seed %d, batch %d/rank, GraVAC window %d, eval_steps %d, θ_max %g, "
             "ε %s, min_dwell %s, min_relative_gain %s (*_paper runs: ε 0.75 and 0), target "
             "accuracy %.3f. Host: %d CPUs, load average (1/5/15 min) %s at start, %s at end."
             % (args.link, args.rate, job_description(args), args.epochs, args.seed,
                args.batch_size, args.window, args.eval_steps, args.theta_max,
                "the controller's (0.75)" if args.epsilon is None else "%g" % args.epsilon,
                "the controller's" if args.min_dwell is None else args.min_dwell,
                "the controller's" if args.min_relative_gain is None
                else "%g" % args.min_relative_gain, args.target,
                os.cpu_count(), "/".join("%.2f" % v for v in load_start),
                "/".join("%.2f" % v for v in load_end)), "",
             "| run | rc | final acc | Δ vs dense (pts) | time to %.3f (s) | reached at | "
             "train time (s) | bytes sent (MB) | vs dense | mean step (ms) | mean θ | "
             "decision epochs (per 100 steps) | load avg 1 min (before/after) |" % args.target,
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        delta = (100 * (r["final_acc"] - dense["final_acc"])
                 if dense and dense["final_acc"] is not None and r["final_acc"] is not None
                 else None)
        ratio = (r["bytes_sent"] / dense["bytes_sent"]
                 if dense and dense["bytes_sent"] and r["bytes_sent"] is not None else None)
        epochs = ("%d (%.1f)" % (r["decision_epochs"], r["epochs_per_100_steps"])
                  if r.get("epochs_per_100_steps") is not None else "—")
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f / %.2f |"
                     % (
            r["run"], r["rc"], fmt(r["final_acc"], "%.4f"), fmt(delta, "%+.2f"),
            fmt(r["time_to_target_s"], "%.1f", "not reached"), fmt(reached_label(r), "%s"),
            fmt(r["time_s"], "%.1f"), fmt(r["bytes_sent"] and r["bytes_sent"] / 1e6, "%.1f"),
            fmt(ratio, "%.3f"), fmt(r["step_ms"], "%.0f"), fmt(r["theta_mean"], "%.0f"), epochs,
            r["load_before"][0], r["load_after"][0]))
    lines += ["", "Bytes: gravac runs report the controller's bytes_sent (inter-node payload, "
              "both nodes); ddp reports the eth0 transmit counters of both namespaces (payload "
              "and TCP/IP headers, gloo's ring crosses the node link twice per pass). Mean step "
              "= training time / steps. %s Train time excludes job start-up (controller, "
              "daemons, rendezvous)." % (
                  "The test images are scored every %d steps and at each epoch's end, and "
                  "times (to the target, train time, mean step) leave the scoring out."
                  % args.score_every if args.score_every else
                  "Times include the per-epoch scoring of the test images."), ""]
    path = os.path.join(args.out_dir, "results.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump({"rows": rows, "load_start": load_start, "load_end": load_end,
                   "args": {k: v for k, v in vars(args).items()}}, f, indent=1)
    return path, "\n".join(lines)


def plot(args, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401 (used as matplotlib.ticker)
    paths = []
    fig, ax = plt.subplots(figsize=(9, 5.5))
    accs = []
    for name, res in results.items():
        curve, _ = curve_of(res["records"], res.get("scores"))
        if curve:
            style = "--" if name.startswith("static") else ("-." if name == "ddp" else "-")
            ax.plot([c[1] for c in curve], [c[2] for c in curve], style, marker=".", label=name)
            accs += [c[2] for c in curve]
    ax.axhline(args.target, color="grey", lw=0.8, ls=":", label="target %.3f" % args.target)
    ax.set_xlabel("training time (s)" + (", scoring left out" if args.score_every else ""))
    ax.set_ylabel("test accuracy")
    ax.set_ylim(max(0.0, min(accs + [args.target]) - 0.02), 1.0)
    ax.set_title("accuracy against time, 2 nodes x 2 workers, %s links" % args.link)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    paths.append(os.path.join(args.out_dir, "accuracy_vs_time.png"))
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    # Inter-node bytes per step, epoch by epoch, from the controller's cumulative bytes_sent
    # (gravac runs; the DDP peer's records carry no bytes).
    fig, ax = plt.subplots(figsize=(9, 5))
    for name, res in results.items():
        recs = [r for r in res["records"] if r.get("bytes_sent") is not None and r.get("step")]
        if not recs:
            continue
        steps, rates, last_bytes, last_step = [], [], 0.0, 0
        for r in recs:
            if r["step"] > last_step:
                steps.append(r["step"])
                rates.append((float(r["bytes_sent"]) - last_bytes) / (r["step"] - last_step) / 1e6)
            last_bytes, last_step = float(r["bytes_sent"]), r["step"]
        ax.step(steps, rates, where="pre", marker=".", label=name)
    ax.set_yscale("log")
    ax.set_xlabel("training step (end of epoch)")
    ax.set_ylabel("inter-node MB per step (mean over the epoch)")
    ax.set_title("bytes per step, %s links" % args.link)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    paths.append(os.path.join(args.out_dir, "bytes_per_step.png"))
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    gravac = {n: r for n, r in results.items() if n.startswith("gravac")}
    if not gravac:
        return paths
    fig, ax = plt.subplots(figsize=(9, 5))
    shown = set()  # every θ drawn gets a labelled tick: a log axis labels only powers of ten
    for name, res in gravac.items():
        if res["theta_by_step"]:
            steps, thetas = zip(*res["theta_by_step"])
            ax.step(steps, thetas, where="post", label=name + " θ (applied)")
            shown.update(thetas)
        if res["decisions"]:
            ax.plot([d["step"] for d in res["decisions"]],
                    [d["theta_c"] for d in res["decisions"]], "x", ms=5,
                    label=name + " candidate θc")
            shown.update(d["theta_c"] for d in res["decisions"])
    ax.set_yscale("log")
    if shown:
        ax.set_yticks(sorted(shown))
    ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("training step")
    ax.set_ylabel("compression factor θ (1 = dense)")
    ax.set_title("GraVAC: θ against step")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    paths.append(os.path.join(args.out_dir, "theta_vs_step.png"))
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    # Gains as gravacctl status reported them at the end of every epoch (train_digits.py
    # --log-json): the controller logs a decision only when θ changes, right after resetting the
    # candidate's window, so its log lines show gain_c = 0 for a candidate not yet measured.
    fig, ax = plt.subplots(figsize=(9, 5))
    for name, res in gravac.items():
        recs = [r for r in res["records"] if r.get("gain_c") is not None]
        if recs:
            steps = [r["step"] for r in recs]
            line, = ax.plot(steps, [r["gain_c"] for r in recs], marker="o", ms=4,
                            label=name + " gain at candidate θc")
            ax.plot(steps, [r.get("gain_min") or 0 for r in recs], ls=":", marker=".",
                    color=line.get_color(), label=name + " gain at θmin")
            for r in recs:
                ax.annotate("θc %g" % (r.get("theta_candidate") or 0), (r["step"], r["gain_c"]),
                            textcoords="offset points", xytext=(3, -10), fontsize=6,
                            color=line.get_color())
    epsilon = 0.75 if args.epsilon is None else args.epsilon
    ax.axhline(epsilon, color="grey", lw=0.8, ls="--", label="ε %.2f" % epsilon)
    ax.set_xlabel("training step (end of epoch)")
    ax.set_ylabel("compression gain")
    ax.set_title("GraVAC: compression gain against step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    paths.append(os.path.join(args.out_dir, "gain_vs_step.png"))
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def find_netemu(build_dir):
    for c in [os.path.join(build_dir, "netemu", "gravac-netemu")] + sorted(
            glob.glob(os.path.join(REPO, "build*", "netemu", "gravac-netemu"))):
        if os.access(c, os.X_OK):
            return c
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--example", choices=sorted(EXAMPLES), default="digits",
                   help="digits: train_digits.py's MLP; fashion: train_fashion.py's CNN "
                   "(defaults of --epochs, --target, --window, --eval_steps, --theta_max follow)")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--target", type=float, default=None, help="target test accuracy")
    p.add_argument("--out_dir", default="/tmp/gravac-e2e")
    p.add_argument("--runs", default=",".join(RUNS), help="comma-separated subset of: "
                   + ", ".join(RUNS) + " (or any staticN; a gravac run + _staged: with "
                   "GRAVAC_ZERO_COPY=0)")
    p.add_argument("--quick", action="store_true", help="1 epoch per run (smoke check)")
    p.add_argument("--summarize", nargs="+", metavar="ROUND_DIR", default=None,
                   help="write summary.md into --out_dir from the results.json of earlier "
                        "rounds (their own out_dirs); runs nothing")
    p.add_argument("--plot_only", action="store_true",
                   help="redraw the PNGs from the files of an earlier run in --out_dir")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", default="",
                   help="comma-separated seeds, one round each (overrides --seed)")
    p.add_argument("--dense_margin", type=float, default=0.5,
                   help="points below dense's final accuracy that count as dense quality")
    p.add_argument("--batch_size", type=int, default=16, help="samples per rank per step")
    p.add_argument("--hidden", type=int, nargs=2, default=(2048, 1024), metavar=("H1", "H2"),
                   help="digits: hidden layer widths of the MLP (2048 1024: 2.2 M parameters)")
    p.add_argument("--train_size", type=int, default=6400,
                   help="fashion: training images (of 60,000, drawn with the seed)")
    p.add_argument("--test_size", type=int, default=2000,
                   help="fashion: test images scored each epoch (the first of 10,000)")
    p.add_argument("--lr", type=float, default=0.02, help="fashion: SGD learning rate")
    p.add_argument("--score_every", type=int, default=None,
                   help="fashion: also score the test images every N steps, so a time to "
                   "accuracy is known to N steps rather than an epoch; times then leave the "
                   "scoring out (default 10; 0: once per epoch, as before)")
    p.add_argument("--min_dwell", type=int, default=None,
                   help="GraVAC runs: the controller's min_dwell (default: the controller's)")
    p.add_argument("--min_relative_gain", type=float, default=None,
                   help="GraVAC runs but the *_paper ones (which run 0): the controller's "
                   "min_relative_gain (default: the controller's, 0.6)")
    p.add_argument("--min_elements", type=int, default=None,
                   help="compressed runs: gradients with fewer elements go dense (the example's "
                   "--compress-min-elements). digits: 0; fashion: 32768, so only the 3.2 M-element "
                   "dense layer is compressed and the convolutions (1.1%% of the parameters) are "
                   "not (bench/e2e/README.md says why)")
    p.add_argument("--link", default="1gbit", help="gravacrun --link RATE")
    p.add_argument("--rate", type=float, default=1e9, help="gravac-netemu --rate (bit/s)")
    p.add_argument("--window", type=int, default=None, help="GraVAC window (steps; 10)")
    p.add_argument("--eval_steps", type=int, default=None,
                   help="GraVAC steps per candidate (digits: 22 = one epoch; fashion: 30, a "
                   "third of an epoch of 6400 images)")
    p.add_argument("--theta_max", type=float, default=None,
                   help="GraVAC θ_max (the search's last candidate). digits: 40, the largest θ "
                   "whose gain passed ε = 0.75 on that job (bench/e2e/README.md); fashion: 1000; "
                   "the controller's own default is 10000")
    p.add_argument("--epsilon", type=float, default=None,
                   help="GraVAC runs: ε, the least gain at which θ_c is used (default: the "
                   "controller's, 0.75, the paper's)")
    p.add_argument("--build_dir", default=os.path.join(REPO, "build"))
    p.add_argument("--netemu", default="", help="gravac-netemu (default: in --build_dir)")
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of every run, interleaved; writes summary.md with medians")
    p.add_argument("--run_timeout_s", type=float, default=0,
                   help="limit per run (default 120 + 20 s per epoch)")
    args = p.parse_args()
    for key, value in EXAMPLES[args.example].items():
        if key != "script" and getattr(args, key) is None:
            setattr(args, key, value)
    if args.quick:
        args.epochs = 1
    if args.score_every < 0 or (args.score_every and args.example != "fashion"):
        p.error("--score_every takes a number of steps, 0 or more, for --example fashion")
    names = [n for n in args.runs.split(",") if n]
    bad = [n for n in names if not known_run(n)]
    if bad:
        p.error("unknown runs %s (known: %s)" % (bad, ", ".join(RUNS)))
    args.run_timeout_s = args.run_timeout_s or 120 + 20 * args.epochs
    args.gravacrun = os.path.join(args.build_dir, "runner", "gravacrun")
    args.netemu = args.netemu or find_netemu(args.build_dir)
    pythonpath = os.path.join(args.build_dir, "client", "python")

    if args.summarize:
        rounds = [read_round(d) for d in args.summarize]
        names = [n for n in names if any(r["run"] == n for rnd in rounds for r in rnd["rows"])]
        path, table = write_summary(args, names, rounds)
        print(table)
        print("compare.py: wrote %s" % path)
        return 0

    if args.plot_only:
        results = {}
        for name in names:
            if name == "ddp":
                records, scores = read_run_log(os.path.join(args.out_dir, "ddp.jsonl"))
                results[name] = {"records": records, "scores": scores,
                                 "decisions": [], "theta_by_step": []}
            else:
                results[name] = parse_gravac_outputs(args.out_dir, name)
        for png in plot(args, results):
            print("compare.py: wrote %s" % png)
        return 0

    try:
        if os.geteuid() != 0:
            raise Skip("emulated links need root (network namespaces)")
        probe = subprocess.run([args.python, "-c", "import torch, sklearn, matplotlib"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            raise Skip("%s lacks torch, sklearn or matplotlib: %s"
                       % (args.python, probe.stderr.strip().splitlines()[-1:]))
        if any(n != "ddp" for n in names):
            if not os.access(args.gravacrun, os.X_OK):
                raise Skip("no gravacrun in %s" % args.build_dir)
            if not os.path.isdir(os.path.join(pythonpath, "gravac")):
                raise Skip("no gravac package in %s" % pythonpath)
        if "ddp" in names and (args.netemu is None or shutil.which("ip") is None):
            raise Skip("the ddp run needs gravac-netemu and ip")
    except Skip as e:
        print("compare.py: SKIP: %s" % e, file=sys.stderr)
        return SKIP

    os.makedirs(args.out_dir, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(x for x in (pythonpath, env.get("PYTHONPATH")) if x)
    env.setdefault("GRAVACCTL", os.path.join(args.build_dir, "controller", "ctl", "gravacctl"))

    return run_rounds(args, names, env)


def seed_plan(args):
    """The seed of every round: --seeds (or --seed), each --repeat times, round by round."""
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()] or [args.seed]
    return [seed for _ in range(args.repeat) for seed in seeds]


def run_rounds(args, names, env):
    """Runs the rounds of seed_plan: one round into --out_dir itself, several into round<k>/
    with a summary. Every round, the lone one included, trains with its own seed. Returns the
    exit code (0 when every run finished all its epochs)."""
    plan = seed_plan(args)
    if len(plan) == 1:
        args.seed = plan[0]
        return 0 if run_round(args, names, env) else 1
    base, rounds = args.out_dir, []
    for k, seed in enumerate(plan, 1):
        args.out_dir = os.path.join(base, "round%d" % k)
        args.seed = seed
        os.makedirs(args.out_dir, exist_ok=True)
        print("compare.py: round %d of %d (seed %d) into %s" % (k, len(plan), seed, args.out_dir),
              flush=True)
        ok = run_round(args, names, env)
        rounds.append(read_round(args.out_dir))
        if not ok:
            print("compare.py: round %d had a failed run" % k, file=sys.stderr)
    args.out_dir = base
    path, table = write_summary(args, names, rounds)
    print(table)
    print("compare.py: wrote %s" % path)
    return 0 if all(r["rc"] == 0 and r["epochs"] == args.epochs
                    for rnd in rounds for r in rnd["rows"]) else 1

def read_round(out_dir):
    """{"seed", "dir", "rows"} of one round from its results.json."""
    with open(os.path.join(out_dir, "results.json")) as f:
        data = json.load(f)
    for row in data["rows"]:  # rounds written before rows kept their curve, or scores
        if "curve" not in row:
            row["curve"], row["curve_unit"] = curve_of(
                *read_run_log(os.path.join(out_dir, row["run"] + ".jsonl")))
        if "reached_at" not in row:
            row["reached_at"], row["curve_unit"] = row.get("epoch_to_target"), "epoch"
    return {"seed": data["args"]["seed"], "dir": out_dir, "rows": data["rows"]}


def run_round(args, names, env):
    """Runs every configuration once into args.out_dir; True when all finished."""
    load_start = os.getloadavg()
    results, rows = {}, []
    for name in names:
        print("compare.py: %s (%d epochs) ..." % (name, args.epochs), flush=True)
        before = os.getloadavg()
        try:
            res = run_ddp(args, env) if name == "ddp" else run_gravac(args, name, env)
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            print("compare.py: %s failed: %s" % (name, e), file=sys.stderr)
            res = {"rc": 1, "wall_s": 0.0, "records": [], "decisions": [],
                   "theta_by_step": [], "bytes_sent": None, "bytes_dense": None,
                   "bytes_source": "-"}
        res["load_before"], res["load_after"] = before, os.getloadavg()
        results[name] = res
        rows.append(summarize(name, res, args.target))
        r = rows[-1]
        print("compare.py: %s rc %d, final acc %s, time to %.3f %s, train %s s, wall %.0f s"
              % (name, r["rc"], fmt(r["final_acc"], "%.4f"), args.target,
                 fmt(r["time_to_target_s"], "%.1f s", "not reached"), fmt(r["time_s"], "%.1f"),
                 r["wall_s"]), flush=True)
    load_end = os.getloadavg()
    write_controller_lines(args.out_dir, [n for n in names if n in results and n != "ddp"])
    path, table = write_table(args, rows, load_start, load_end)
    print(table)
    print("compare.py: wrote %s" % path)
    for png in plot(args, results):
        print("compare.py: wrote %s" % png)
    return all(r["rc"] == 0 and r["epochs"] == args.epochs for r in rows)


def write_controller_lines(out_dir, names):
    """controller_decisions.log: each GraVAC run's decision lines and its search periods' gains
    against ε and the guard, from the run's log."""
    with open(os.path.join(out_dir, "controller_decisions.log"), "w") as out:
        for name in names:
            out.write("# %s\n" % name)
            log_path = os.path.join(out_dir, name + ".log")
            if not os.path.exists(log_path):
                continue
            with open(log_path) as f:
                out.writelines(line for line in f if "[controller]" in line and (
                    "decision epoch" in line or "search period" in line or " ended:" in line))


def median(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def time_to(row, target):
    """(training time, step or epoch) of the curve's first point at or above target."""
    for at, t, acc in (row or {}).get("curve") or []:
        if acc is not None and acc >= target - 1e-9:
            return t, at
    return None, None


def dense_quality(rnd, margin):
    """The round's dense-quality accuracy: dense's final accuracy less margin points."""
    dense = next((r for r in rnd["rows"] if r["run"] == "dense"), None)
    if not dense or dense.get("final_acc") is None:
        return None
    return dense["final_acc"] - margin / 100.0


def paired(a, b):
    """Who reached first in one round: 'ahead' (a), 'behind', 'tie' or 'neither'."""
    if a is None and b is None:
        return "neither"
    if b is None or (a is not None and a < b):
        return "ahead"
    if a is None or b < a:
        return "behind"
    return "tie"


def time_ratios(a, b):
    """a's time over b's, round by round, in the rounds where both reached the target: their
    median, min, max and count, or None when no round has both."""
    r = [x / y for x, y in zip(a, b) if x is not None and y is not None and y > 0]
    if not r:
        return None
    return {"median": statistics.median(r), "min": min(r), "max": max(r), "rounds": len(r)}


def sign_test_p(ahead, behind):
    """One-sided sign test: the chance of at least `ahead` wins in ahead + behind fair coin
    tosses (ties and rounds where neither reached the target left out), or None with no toss."""
    n = ahead + behind
    if n == 0:
        return None
    return sum(math.comb(n, k) for k in range(ahead, n + 1)) / 2.0 ** n


def mean_and_error(values):
    """Mean and standard error of the values present, or (None, None) with fewer than two."""
    v = [x for x in values if x is not None]
    if len(v) < 2:
        return None, None
    return statistics.mean(v), statistics.stdev(v) / math.sqrt(len(v))


def fmt_ratios(r):
    if r is None:
        return "—"
    return "%.2f (%.2f-%.2f, %d)" % (r["median"], r["min"], r["max"], r["rounds"])


def write_summary(args, names, rounds):
    """summary.md / summary.json over rounds: per run, every round's time to --target and to
    dense quality and the medians (a run that misses a target in a round counts as not reaching
    it there; the median is over the rounds that reached it, with how many did), then each
    GraVAC run's round-by-round standing against every other run."""
    labels = ["%d (seed %d)" % (k, rnd["seed"]) for k, rnd in enumerate(rounds, 1)]
    quality = [dense_quality(rnd, args.dense_margin) for rnd in rounds]
    lines = ["# End-to-end comparison, %d rounds (issue #5, BENCHMARKS.md item 8)" % len(rounds),
             "", "Each round runs every configuration once, in the order %s. Rounds: %s; each "
             "has its own results.md and plots. %d epochs, target accuracy %.3f, links %s, "
             "host %d CPUs. Dense quality = dense's final accuracy in the round less %.2f "
             "points: %s." % (", ".join(names), ", ".join(labels), args.epochs, args.target,
                              args.link, os.cpu_count(), args.dense_margin,
                              " / ".join(fmt(q, "%.4f") for q in quality)), "",
             "| run | time to %.3f per round (s) | median (s) | rounds reaching it | reached "
             "at (median) | time to dense quality per round (s) | median (s) | rounds "
             "reaching it | final acc Δ vs dense per round (pts) | mean Δ ± s.e. (pts) | rounds "
             "within %.2f pts | mean step per round (ms) | bytes vs dense | decision epochs per "
             "100 steps per round |" % (args.target, args.dense_margin),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    summary, times = [], {}
    for name in names:
        rows = [next((r for r in rnd["rows"] if r["run"] == name), None) for rnd in rounds]
        dense = [next((r for r in rnd["rows"] if r["run"] == "dense"), None) for rnd in rounds]
        ratios = [r["bytes_sent"] / d["bytes_sent"] for r, d in zip(rows, dense)
                  if r and d and d.get("bytes_sent") and r.get("bytes_sent") is not None]
        ttt = [r and r["time_to_target_s"] for r in rows]
        tdq = [time_to(r, q)[0] if q is not None else None for r, q in zip(rows, quality)]
        delta = [100 * (r["final_acc"] - d["final_acc"])
                 if r and d and r.get("final_acc") is not None and d.get("final_acc") is not None
                 else None for r, d in zip(rows, dense)]
        times[name] = (ttt, tdq)
        delta_mean, delta_error = mean_and_error(delta)
        item = {"run": name, "seeds": [rnd["seed"] for rnd in rounds],
                "time_to_target_s": ttt,
                "median_time_to_target_s": median(ttt),
                "reached": sum(t is not None for t in ttt),
                "median_reached_at": median(r and r.get("reached_at") for r in rows),
                "curve_unit": "/".join(sorted({r.get("curve_unit", "epoch") for r in rows if r})),
                "time_to_dense_quality_s": tdq,
                "median_time_to_dense_quality_s": median(tdq),
                "reached_dense_quality": sum(t is not None for t in tdq),
                "final_acc": [r and r["final_acc"] for r in rows],
                "median_final_acc": median(r and r["final_acc"] for r in rows),
                "final_acc_vs_dense_pts": delta,
                "within_dense_margin": sum(x is not None and x >= -args.dense_margin - 1e-6
                                           for x in delta),
                "mean_final_acc_vs_dense_pts": delta_mean,
                "final_acc_vs_dense_stderr_pts": delta_error,
                "step_ms": [r and r["step_ms"] for r in rows],
                "median_step_ms": median(r and r["step_ms"] for r in rows),
                "median_bytes_vs_dense": median(ratios),
                "epochs_per_100_steps": [r and r.get("epochs_per_100_steps") for r in rows]}
        summary.append(item)
        mean_delta = "—" if delta_mean is None else "%+.2f ± %.2f" % (delta_mean, delta_error)
        lines.append("| %s | %s | %s | %d of %d | %s | %s | %s | %d of %d | %s | %s | %d of %d | "
                     "%s | %s | %s |" % (
            name, " / ".join(fmt(t, "%.1f", "—") for t in ttt),
            fmt(item["median_time_to_target_s"], "%.1f"), item["reached"], len(rows),
            fmt(item["median_reached_at"] and "%s %g" % (item["curve_unit"],
                                                         item["median_reached_at"]), "%s"),
            " / ".join(fmt(t, "%.1f", "—") for t in tdq),
            fmt(item["median_time_to_dense_quality_s"], "%.1f"), item["reached_dense_quality"],
            len(rows), " / ".join(fmt(x, "%+.2f", "—") for x in delta), mean_delta,
            item["within_dense_margin"], sum(x is not None for x in delta),
            " / ".join(fmt(t, "%.0f", "—") for t in item["step_ms"]),
            fmt(item["median_bytes_vs_dense"], "%.3f"),
            " / ".join(fmt(e, "%.1f", "—") for e in item["epochs_per_100_steps"])))
    standings = []
    gravac = [n for n in names if n.startswith("gravac")]
    if gravac:
        lines += ["", "Round by round, rounds in which each GraVAC run reached the target "
                  "before / after / at the same time as the other run (— where neither did), "
                  "with p, the one-sided sign test's chance of at least as many rounds ahead "
                  "if either run were as likely to be first (ties and neither left out), "
                  "and the GraVAC run's time over the other's in the rounds where both reached "
                  "it: median (min-max, rounds):",
                  "", "| GraVAC run | against | time to %.3f: ahead / behind / tie / neither (p) | "
                  "time ratio | time to dense quality: ahead / behind / tie / neither (p) | "
                  "time ratio |" % args.target,
                  "|---|---|---|---|---|---|"]
        for g in gravac:
            for other in names:
                if other == g:
                    continue
                counts = []
                for which in (0, 1):
                    c = {"ahead": 0, "behind": 0, "tie": 0, "neither": 0}
                    for a, b in zip(times[g][which], times[other][which]):
                        c[paired(a, b)] += 1
                    counts.append(c)
                ratios = [time_ratios(times[g][which], times[other][which]) for which in (0, 1)]
                p = [sign_test_p(c["ahead"], c["behind"]) for c in counts]
                standings.append({"gravac": g, "against": other, "target": counts[0],
                                  "dense_quality": counts[1], "target_time_ratio": ratios[0],
                                  "dense_quality_time_ratio": ratios[1],
                                  "target_sign_test_p": p[0], "dense_quality_sign_test_p": p[1]})
                cells = []
                for c, r, pv in zip(counts, ratios, p):
                    cells += ["%d / %d / %d / %d (%s)" % (c["ahead"], c["behind"], c["tie"],
                                                          c["neither"], fmt(pv, "%.3f")),
                              fmt_ratios(r)]
                lines.append("| %s | %s | %s | %s | %s | %s |" % (g, other, *cells))
    lines.append("")
    path = os.path.join(args.out_dir, "summary.md")
    os.makedirs(args.out_dir, exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(args.out_dir, "summary.json"), "w") as f:
        json.dump({"runs": summary, "standings": standings, "rounds": rounds,
                   "dense_quality": quality}, f, indent=1)
    return path, "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
