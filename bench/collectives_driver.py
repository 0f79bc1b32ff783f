#!/usr/bin/python3
"""Driver of the dense allreduce comparison (BENCHMARKS.md, ratio 1; bench/README.md).

For every link rate and every p it builds one emulated cluster (gravac-netemu create: p network
namespaces, links shaped with tc), measures the effective rate B_eff with iperf3 (node 0 -> 1)
on those links, then runs on the same links, one after the other:
  gravac  gravac-collectives-bench --cluster (the Communicator's ring allreduce over UCX tcp),
  mpi     gravac-mpi-allreduce-peer under Debian OpenMPI's mpirun (MPI_Allreduce, MPI_FLOAT,
          MPI_SUM; btl tcp on the node interface; mpirun runs in node 0 and starts its daemons
          in the other nodes through bench/netns_rsh_agent.sh),
  gloo    bench/gloo_allreduce_peer.py, one process per node (torch.distributed, gloo backend,
          init through tcp:// on node 0's address),
each over the same size sweep with exact-sum inputs and every element checked, and removes the
cluster. It prints one table (busbw / B_eff per implementation side by side, #wrong) and writes
the same as JSON.

CPU limit. The machine has 2 cores; at 10 Gbit/s they, not the link, may be the limit. A
(rate, p) block is marked `cpu` when B_eff < 0.9 x the configured rate: iperf3, one TCP stream
that does nothing but move bytes, cannot fill the link, so no collective (p processes that also
copy and add) will; the link is then not what the ratio measures. "CPU busy during the run" is no
test: gravac (UCX) and OpenMPI poll, so they hold every core they get whatever the link does. What
is recorded instead, per implementation, is how busy the machine was in the second before its
sweep (`others`, all cores, /proc/stat): other users' load, which makes ratios noisy.

`--network loopback` runs the same programs without namespaces (every rank on lo, no B_eff), for
smoke tests without root.

Exit status: 0 when every run finished with every element right; 1 on a wrong element or a failed
run; 77 when a requested implementation cannot run here (no mpirun, no torch, not root for
namespaces), so CTest can report a skip.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


class Skip(Exception):
    """A requested implementation cannot run on this machine."""


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 1048576, 64M)")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def cpu_times():
    """(busy, total) jiffies of all cores from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def run(cmd, timeout, env=None, label=""):
    """Runs cmd in its own process group; kills the group on timeout. Returns (rc, out, err)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return 124, out, err + f"\n{label}: killed after {timeout:.0f} s"
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return proc.returncode, out, err


class Cluster:
    """An emulated cluster made with gravac-netemu create and destroyed on exit."""

    def __init__(self, netemu, nodes, rate, prefix):
        self.netemu = netemu
        rc, out, err = run([netemu, "create", f"--nodes={nodes}", f"--rate={rate:g}",
                            f"--prefix={prefix}"], 60, label="gravac-netemu create")
        if rc != 0:
            raise RuntimeError(f"gravac-netemu create failed ({rc}): {err.strip()}")
        self.name = re.search(r"^cluster (\S+)", out, re.M).group(1)
        self.netns = []
        self.address = []
        for m in re.finditer(r"^node (\d+) netns (\S+) address (\S+)", out, re.M):
            self.netns.append(m.group(2))
            self.address.append(m.group(3))
        if len(self.netns) != nodes:
            self.destroy()
            raise RuntimeError(f"gravac-netemu create printed {len(self.netns)} nodes: {out}")

    def iperf(self, seconds, rate):
        rc, out, err = run([self.netemu, "iperf", self.name, "0", "1", f"--seconds={seconds}",
                            f"--rate={rate:g}"], seconds + 60, label="iperf3")
        m = re.search(r"node 0 -> node 1: ([0-9.e+]+) bit/s", out)
        if rc != 0 or not m:
            raise RuntimeError(f"iperf3 failed ({rc}): {out} {err}")
        return float(m.group(1))

    def destroy(self):
        run([self.netemu, "destroy", self.name], 60, label="gravac-netemu destroy")


def sweep_sizes(args):
    sizes = []
    s = args.min_bytes
    while s <= args.max_bytes:
        sizes.append(s)
        s *= 2
    return sizes


def expected_seconds(args, p, b_eff):
    """A generous bound for one implementation's sweep: 20x the ring bound at B_eff + 120 s."""
    rate = b_eff or 1e9
    bound = sum(2 * (p - 1) / p * s * 8 / rate for s in sweep_sizes(args))
    return 120 + 20 * bound * (args.iters + args.warmup)


def parse_peer_lines(tag, out):
    rows = {}
    for m in re.finditer(rf"^{tag} (\d+) (\d+) ([0-9.e+]+) (\d+)$", out, re.M):
        rows[int(m.group(1))] = {"time_us": float(m.group(3)), "wrong": int(m.group(4))}
    return rows


def run_gravac(args, p, rate, b_eff, cluster, timeout):
    with tempfile.TemporaryDirectory(prefix="gvdrv-") as tmp:
        out_json = os.path.join(tmp, "gravac.json")
        cmd = [args.bench, f"--np={p}", f"--min_bytes={args.min_bytes}",
               f"--max_bytes={args.max_bytes}", f"--iters={args.iters}",
               f"--warmup={args.warmup}", f"--json={out_json}",
               f"--op_timeout_s={args.op_timeout_s}"]
        if cluster is not None:
            cmd += [f"--cluster={cluster.name}", f"--rate={rate:g}", f"--b_eff={b_eff:g}"]
        cmd += args.bench_arg
        rc, out, err = run(cmd, timeout, label="gravac")
        rows = {}
        if os.path.exists(out_json):
            with open(out_json) as f:
                for r in json.load(f)["rows"]:
                    rows[int(r["bytes"])] = {"time_us": r["time_us"], "wrong": r["wrong"]}
        return rc, rows, out + err


def run_mpi(args, p, cluster, timeout):
    if shutil.which(args.mpirun) is None:
        raise Skip(f"no {args.mpirun}")
    if not os.path.exists(args.mpi_peer):
        raise Skip(f"no MPI peer binary {args.mpi_peer} (needs libopenmpi-dev at build time)")
    peer = [args.mpi_peer, f"--min_bytes={args.min_bytes}", f"--max_bytes={args.max_bytes}",
            f"--iters={args.iters}", f"--warmup={args.warmup}"]
    common = [args.mpirun, "--allow-run-as-root", "-np", str(p), "--mca", "btl", "tcp,self",
              "--mca", "btl_tcp_if_include", "eth0" if cluster else "lo",
              "--mca", "oob_tcp_if_include", "eth0" if cluster else "lo"]
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="gvdrv-mpi-") as tmp:
        if cluster is None:
            cmd = common + ["--oversubscribe"] + peer
        else:
            hostfile = os.path.join(tmp, "hosts")
            with open(hostfile, "w") as f:
                for a in cluster.address[:p]:
                    f.write(f"{a} slots=1\n")
            env["GRAVAC_NETNS_HOSTS"] = " ".join(
                f"{a}={n}" for a, n in zip(cluster.address[:p], cluster.netns[:p]))
            # Daemons talk to mpirun directly (the default tree routes through other nodes'
            # daemons); PMIx keeps its data in the daemons' memory, not in shared-memory files
            # under /tmp, where nodes with the same hostname would meet.
            env["PMIX_MCA_gds"] = "hash"
            env["TMPDIR"] = tmp
            cmd = (["ip", "netns", "exec", cluster.netns[0]] + common +
                   ["--hostfile", hostfile, "--map-by", "node", "--mca", "routed", "direct",
                    "--mca", "plm_rsh_no_tree_spawn", "1",
                    "--mca", "plm_rsh_agent", os.path.join(HERE, "netns_rsh_agent.sh")] + peer)
        rc, out, err = run(cmd, timeout, env=env, label="mpi")
        if cluster is not None:
            # mpirun may not hand TMPDIR on to the agent, which then uses /tmp/<netns>.
            for netns in cluster.netns[:p]:
                shutil.rmtree(os.path.join("/tmp", netns), ignore_errors=True)
    return rc, parse_peer_lines("mpi", out), out + err


def run_gloo(args, p, cluster, timeout):
    if shutil.which(args.python) is None:
        raise Skip(f"no {args.python}")
    probe = subprocess.run([args.python, "-c", "import torch.distributed as d; "
                            "assert d.is_available() and d.is_gloo_available()"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        raise Skip(f"{args.python} has no torch.distributed with gloo")
    port = 20000 + (os.getpid() * 7 + p) % 20000
    master = f"tcp://{cluster.address[0] if cluster else '127.0.0.1'}:{port}"
    procs = []
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0" if cluster else "lo")
    files = []
    try:
        for r in range(p):
            cmd = [args.python, os.path.join(HERE, "gloo_allreduce_peer.py"), f"--rank={r}",
                   f"--world_size={p}", f"--master={master}", f"--min_bytes={args.min_bytes}",
                   f"--max_bytes={args.max_bytes}", f"--iters={args.iters}",
                   f"--warmup={args.warmup}", f"--timeout_s={int(timeout)}"]
            if cluster is not None:
                cmd = ["ip", "netns", "exec", cluster.netns[r]] + cmd
            out_f = tempfile.TemporaryFile(mode="w+")
            files.append(out_f)
            procs.append(subprocess.Popen(cmd, stdout=out_f, stderr=subprocess.STDOUT, env=env,
                                          text=True, start_new_session=True))
        deadline = time.monotonic() + timeout
        codes = []
        for proc in procs:
            try:
                codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(124)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    texts = []
    for f in files:
        f.seek(0)
        texts.append(f.read())
        f.close()
    rc = 0 if all(c == 0 for c in codes) else next(c for c in codes if c != 0)
    if rc == SKIP:
        raise Skip("the gloo peer reports torch missing")
    return rc, parse_peer_lines("gloo", texts[0]), "\n".join(texts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    build = os.environ.get("GRAVAC_BUILD_DIR", os.path.join(os.path.dirname(HERE), "build"))
    parser.add_argument("--build_dir", default=build,
                        help="build tree holding bench/ and netemu/ binaries (default: %(default)s)")
    parser.add_argument("--bench", help="gravac-collectives-bench (default: in --build_dir)")
    parser.add_argument("--netemu", help="gravac-netemu (default: in --build_dir)")
    parser.add_argument("--mpi_peer", help="gravac-mpi-allreduce-peer (default: in --build_dir)")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--python", default="/usr/bin/python3", help="python with torch")
    parser.add_argument("--network", choices=["netns", "loopback"], default="netns")
    parser.add_argument("--rates", default="1e9,1e10", help="bit/s per link, comma-separated")
    parser.add_argument("--nps", default="2,4", help="ranks per run, comma-separated")
    parser.add_argument("--impls", default="gravac,mpi,gloo")
    parser.add_argument("--min_bytes", type=parse_size, default=1 << 20)
    parser.add_argument("--max_bytes", type=parse_size, help="default 256M (16M with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="a short run: --max_bytes 16M unless given, --iters 3")
    parser.add_argument("--iters", type=int)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--iperf_seconds", type=int, default=3)
    parser.add_argument("--op_timeout_s", type=int, default=120)
    parser.add_argument("--bench_arg", action="append", default=[],
                        help="extra flag for gravac-collectives-bench (repeatable)")
    parser.add_argument("--json", help="write the table and the environment here")
    args = parser.parse_args()
    if args.max_bytes is None:
        args.max_bytes = (16 << 20) if args.quick else (256 << 20)
    if args.iters is None:
        args.iters = 3 if args.quick else 5
    args.bench = args.bench or os.path.join(args.build_dir, "bench", "gravac-collectives-bench")
    args.netemu = args.netemu or os.path.join(args.build_dir, "netemu", "gravac-netemu")
    args.mpi_peer = args.mpi_peer or os.path.join(args.build_dir, "bench",
                                                  "gravac-mpi-allreduce-peer")
    rates = [float(r) for r in args.rates.split(",")] if args.network == "netns" else [0.0]
    nps = [int(p) for p in args.nps.split(",")]
    impls = [i for i in args.impls.split(",") if i]
    if any(i not in ("gravac", "mpi", "gloo") for i in impls) or not impls:
        parser.error("--impls: gravac, mpi, gloo")
    if args.min_bytes < 4 or args.max_bytes < args.min_bytes or any(p < 2 for p in nps):
        parser.error("need 4 <= --min_bytes <= --max_bytes and every p >= 2")
    if args.network == "netns":
        if os.geteuid() != 0:
            print("collectives_driver: SKIP: namespaces need root", file=sys.stderr)
            return SKIP
        for tool in (args.netemu, "iperf3", "ip"):
            if shutil.which(tool) is None and not os.path.exists(tool):
                print(f"collectives_driver: SKIP: {tool} is missing", file=sys.stderr)
                return SKIP
    if "gravac" in impls and not os.path.exists(args.bench):
        print(f"collectives_driver: no {args.bench}", file=sys.stderr)
        return 1

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)

    blocks = []
    failed = False
    for rate in rates:
        for p in nps:
            cluster = None
            block = {"rate": rate or None, "np": p, "b_eff": None, "cpu_busy": {},
                     "others_busy": {},
                     "results": {}, "errors": {}}
            try:
                if args.network == "netns":
                    cluster = Cluster(args.netemu, p, rate, "gvdrv")
                    block["cluster"] = cluster.name
                    block["b_eff"] = cluster.iperf(args.iperf_seconds, rate)
                timeout = expected_seconds(args, p, block["b_eff"])
                for impl in impls:
                    busy0, total0 = cpu_times()
                    time.sleep(1.0)
                    busy1, total1 = cpu_times()
                    block["others_busy"][impl] = (busy1 - busy0) / max(1, total1 - total0)
                    busy0, total0 = busy1, total1
                    if impl == "gravac":
                        rc, rows, log = run_gravac(args, p, rate, block["b_eff"], cluster,
                                                   timeout)
                    elif impl == "mpi":
                        rc, rows, log = run_mpi(args, p, cluster, timeout)
                    else:
                        rc, rows, log = run_gloo(args, p, cluster, timeout)
                    busy1, total1 = cpu_times()
                    block["cpu_busy"][impl] = (busy1 - busy0) / max(1, total1 - total0)
                    block["results"][impl] = rows
                    missing = [s for s in sweep_sizes(args) if s not in rows]
                    if rc != 0 or missing:
                        failed = True
                        block["errors"][impl] = (f"exit {rc}, {len(missing)} sizes missing: "
                                                 + log.strip()[-2000:])
                        print(f"# {impl} np {p} rate {rate:g}: exit {rc}\n{log.strip()[-2000:]}",
                              file=sys.stderr)
            except Skip as e:
                print(f"collectives_driver: SKIP: {e}", file=sys.stderr)
                return SKIP
            finally:
                if cluster is not None:
                    cluster.destroy()
            blocks.append(block)
            print_block(block, args, impls)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": {"network": args.network, "iters": args.iters,
                               "warmup": args.warmup, "impls": impls,
                               "nproc": os.cpu_count(), "bench_args": args.bench_arg},
                       "blocks": [table_block(b, args, impls) for b in blocks]}, f, indent=1)
    wrong = sum(r["wrong"] for b in blocks for rows in b["results"].values()
                for r in rows.values())
    if wrong:
        print(f"collectives_driver: {wrong} wrong elements", file=sys.stderr)
    return 1 if failed or wrong else 0


def cpu_limit(block):
    """The reasons a block counts as CPU-bound (empty: the link is the limit)."""
    reasons = []
    if block["rate"] and block["b_eff"] is not None and block["b_eff"] < 0.9 * block["rate"]:
        reasons.append(f"B_eff {block['b_eff'] / 1e9:.2f} Gbit/s < 0.9 x {block['rate'] / 1e9:g}")
    return reasons


def table_block(block, args, impls):
    p = block["np"]
    factor = 2 * (p - 1) / p
    rows = []
    for size in sweep_sizes(args):
        row = {"bytes": size}
        for impl in impls:
            r = block["results"].get(impl, {}).get(size)
            busbw = size * 8 / (r["time_us"] * 1e-6) * factor if r and r["time_us"] > 0 else None
            row[impl] = {"time_us": r["time_us"] if r else None,
                         "busbw_bits": busbw,
                         "busbw_over_b_eff": busbw / block["b_eff"]
                         if busbw and block["b_eff"] else None,
                         "wrong": r["wrong"] if r else None}
        rows.append(row)
    out = {k: block[k] for k in ("rate", "np", "b_eff", "cpu_busy", "others_busy", "errors")}
    out["cluster"] = block.get("cluster")
    out["cpu_limit"] = cpu_limit(block)
    out["rows"] = rows
    return out


def print_block(block, args, impls):
    t = table_block(block, args, impls)
    metric = "busbw/B_eff" if block["b_eff"] else "busbw Gbit/s"
    rate = f"{block['rate'] / 1e9:g} Gbit/s" if block["rate"] else "loopback"
    beff = f", B_eff {block['b_eff'] / 1e9:.3f} Gbit/s (iperf3)" if block["b_eff"] else ""
    print(f"\n# {rate}, p = {block['np']}{beff}; {metric}; CPU busy before each run (others) "
          + ", ".join(f"{i} {100 * v:.0f}%" for i, v in block["others_busy"].items()))
    header = f"{'rate':>8} {'p':>2} {'size':>10}" + "".join(f" {i:>8}" for i in impls)
    header += f" {'#wrong':>12} limit"
    print(header)
    limit = "cpu" if t["cpu_limit"] else "link"
    for row in t["rows"]:
        line = f"{rate.split()[0]:>8} {block['np']:>2} {row['bytes']:>10}"
        wrongs = []
        for impl in impls:
            r = row[impl]
            v = r["busbw_over_b_eff"] if block["b_eff"] else (
                r["busbw_bits"] / 1e9 if r["busbw_bits"] else None)
            line += f" {v:8.3f}" if v is not None else f" {'-':>8}"
            wrongs.append("-" if r["wrong"] is None else str(r["wrong"]))
        line += f" {'/'.join(wrongs):>12} {limit if block['rate'] else ''}"
        print(line)
    if t["cpu_limit"]:
        print("# cpu-bound: " + "; ".join(t["cpu_limit"]))
    print("# CPU busy during each run: "
          + ", ".join(f"{i} {100 * v:.0f}%" for i, v in block["cpu_busy"].items()))
    for impl, err in block["errors"].items():
        print(f"# {impl} FAILED: {err.splitlines()[0] if err else ''}")
    sys.stdout.flush()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as e:
        print(f"collectives_driver: interrupted ({e})", file=sys.stderr)
        sys.exit(130)
