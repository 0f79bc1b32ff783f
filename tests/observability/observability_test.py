#!/usr/bin/python3
"""Observability tests of gravac (issue #6), run by CTest with /usr/bin/python3.

  rules   `promtool check rules` passes on dashboards/rules.yml, and fails on a broken copy.
  job     A real job (gravacrun -np 4 --nodes 2, gravac-example-train; --link RATE puts every node
          in an emulated namespace) with a small policy window so θ moves:
          1. every metrics address gravacrun printed is scraped and piped to
             `promtool check metrics` (no output allowed), and the contract's families are there
             with sane values (θ > 1, steps grow, bytes saved > 0, ...);
          2. a real Prometheus server (scrape and evaluation every 1 s, dashboards/rules.yml
             loaded, targets from gravacrun's --metrics_sd_file) scrapes the job until every
             target is up; then EVERY PromQL expression of dashboards/gravac.json (panel targets
             and template queries) and of rules.yml (records; alerts whole and without their
             final comparison) is evaluated through /api/v1/query and must return data, and
             /api/v1/rules must report every group loaded with health ok;
          3. (without --link) a fault job (fault_worker.py on gravac.torch: one mismatched
             allreduce, one stall) gives data to the error expressions and fires GravacStall's
             expression; then a gravacd is SIGKILLed and GravacDaemonDown's expression must
             return data.
          A failure names what failed, e.g. "no data: dashboard panel 'Errors by kind': <expr>".

  dashboard  dashboards/gravac.json has what Grafana and issue #6 need: schemaVersion >= 36, a
          `datasource` and a `node` variable, ${datasource} on every panel, every metric family on
          a panel, ε drawn on the gain panel, a stacked step-time breakdown, per-node panels.

Usage: observability_test.py rules --promtool P --rules FILE
       observability_test.py dashboard --dashboard FILE --rules FILE --work_dir D
       observability_test.py job --gravacrun P --example P --dashboard F --rules F --work_dir D
                                 [--pythonpath D] [--link RATE]
Exit status 0 = passed, 77 = skipped (no promtool/prometheus, or --link without namespaces).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
# A policy that moves θ within seconds (tests/integration/run_job.py uses the same).
POLICY = ["--compressor", "topk", "--theta_min", "10", "--theta_max", "1280", "--window", "2",
          "--eval_steps", "6", "--epsilon", "0.01", "--omega", "0.0001"]

# Families of the metrics contract (docs/METRICS.md), per process kind.
DAEMON_FAMILIES = [
    "gravac_node_info", "gravac_connected_workers", "gravac_expected_workers",
    "gravac_controller_connected", "gravac_peer_nodes", "gravac_applied_theta",
    "gravac_applied_decision_epoch", "gravac_decisions_received_total", "gravac_steps_total",
    "gravac_step_duration_seconds", "gravac_engine_phase_seconds_total",
    "gravac_collective_duration_seconds", "gravac_sent_bytes_total",
    "gravac_dense_equivalent_bytes_total", "gravac_saved_bytes_total",
    "gravac_compressed_tensors_total", "gravac_shm_handoff_duration_seconds",
    "gravac_stalls_total", "gravac_errors_total"]
CONTROLLER_FAMILIES = [
    "gravac_controller_info", "gravac_expected_nodes", "gravac_joined_nodes",
    "gravac_connected_nodes", "gravac_world_size", "gravac_theta", "gravac_theta_candidate",
    "gravac_decision_epoch", "gravac_decisions_total", "gravac_last_decision_timestamp_seconds",
    "gravac_search_phase", "gravac_compression_gain", "gravac_policy_epsilon",
    "gravac_policy_omega", "gravac_policy_theta_min", "gravac_policy_theta_max",
    "gravac_throughput_samples_per_second", "gravac_compression_throughput_samples_per_second",
    "gravac_job_steps_total", "gravac_job_step_duration_seconds", "gravac_job_sent_bytes_total",
    "gravac_job_dense_equivalent_bytes_total", "gravac_stats_rejected_total"]
# Expressions over these only have series once something went wrong: the fault job feeds them.
FAULT_ONLY = ("gravac_errors_total", "gravac:errors:rate1m")


class Failure(Exception):
    pass


def log(message):
    print(message, flush=True)


# ---------------------------------------------------------------------------------------------
# Text format and PromQL helpers


def parse_samples(text):
    """[(name, {label: value}, value)] of a text-format exposition."""
    samples = []
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        if not m:
            continue
        labels = dict(label_re.findall(m.group(3) or ""))
        samples.append((m.group(1), labels, float(m.group(4))))
    return samples


def value(samples, name, **labels):
    """Sum of the samples named `name` whose labels include `labels`; None if there are none."""
    found = [v for n, l, v in samples
             if n == name and all(l.get(k) == x for k, x in labels.items())]
    return sum(found) if found else None


def families(text):
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def split_top_level(expr, words):
    """Splits `expr` at the top-level (outside (), {}, [] and strings) binary operators `words`."""
    parts, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif depth == 0:
            for w in words:
                if expr.startswith(w, i) and (not w[0].isalpha() or (
                        (i == 0 or not (expr[i - 1].isalnum() or expr[i - 1] == "_")) and
                        (i + len(w) >= len(expr) or not (expr[i + len(w)].isalnum() or
                                                          expr[i + len(w)] == "_")))):
                    parts.append((expr[start:i], w))
                    start = i + len(w)
                    i = start - 1
                    break
        i += 1
    parts.append((expr[start:], None))
    return parts


def strip_parens(expr):
    expr = expr.strip()
    while expr.startswith("(") and expr.endswith(")"):
        depth = 0
        for i, c in enumerate(expr):
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i != len(expr) - 1:
                return expr
        expr = expr[1:-1].strip()
    return expr


def without_final_comparison(expr):
    """For an alert `A op B [unless F] [or C op D ...]`: [A, C, ...], each alternative of `or`
    without its trailing `unless`/`and` filter and its last top-level comparison."""
    result = []
    for alternative, _ in split_top_level(expr, [" or "]):
        alternative = strip_parens(split_top_level(strip_parens(alternative),
                                                   [" unless ", " and "])[0][0])
        parts = split_top_level(alternative, ["==", "!=", ">=", "<=", ">", "<"])
        if len(parts) < 2:
            raise Failure("alert expression has no comparison to remove: %s" % alternative)
        result.append("".join(p + (op if i < len(parts) - 2 else "")
                              for i, (p, op) in enumerate(parts[:-1])).strip())
    return result


def substitute(expr):
    """Grafana's variables, as a dashboard showing every node would send them."""
    for var, val in (("$__rate_interval", "10s"), ("${__rate_interval}", "10s"),
                     ("$__interval", "2s"), ("${__interval}", "2s"), ("$__range", "1m"),
                     ("${node}", ".*"), ("$node", ".*")):
        expr = expr.replace(var, val)
    if "$" in re.sub(r'"[^"]*"', "", expr):
        raise Failure("unsubstituted variable in %s" % expr)
    return expr


def dashboard_expressions(path):
    """[(where, expr, kind)] of every PromQL expression in a dashboard: kind 'query' or
    'label_values' (expr is then (metric selector, label))."""
    with open(path) as f:
        dash = json.load(f)
    found = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    found.append(("dashboard panel '%s'" % p.get("title"), t["expr"], "query"))
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    for var in dash.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        q = var.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        m = re.fullmatch(r"\s*label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*", q)
        if m:
            found.append(("dashboard variable '%s'" % var["name"], (m.group(1), m.group(2)),
                          "label_values"))
        elif q.strip():
            found.append(("dashboard variable '%s'" % var["name"], q, "query"))
    return dash, found


# ---------------------------------------------------------------------------------------------
# Processes


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, work_dir, rules, sd_file):
        self.dir = os.path.join(work_dir, "prometheus")
        os.makedirs(self.dir, exist_ok=True)
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write(
                "global:\n"
                "  scrape_interval: 1s\n"
                "  scrape_timeout: 1s\n"
                "  evaluation_interval: 1s\n"
                "rule_files:\n"
                "  - %s\n"
                "scrape_configs:\n"
                "  - job_name: gravac\n"
                "    honor_labels: true\n"
                "    file_sd_configs:\n"
                "      - files: [%s]\n"
                "        refresh_interval: 1s\n" % (json.dumps(os.path.abspath(rules)),
                                                     json.dumps(os.path.abspath(sd_file))))
        self.proc = None
        for attempt in range(5):  # a free port may be taken between the probe and the bind
            self.port = free_port()
            self.url = "http://127.0.0.1:%d" % self.port
            self.log_path = os.path.join(self.dir, "prometheus.log")
            out = open(self.log_path, "w")
            self.proc = subprocess.Popen(
                ["prometheus", "--config.file=" + config,
                 "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
                 "--web.listen-address=127.0.0.1:%d" % self.port,
                 "--log.level=warn"], stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if "Ready" in http_get(self.url + "/-/ready", timeout=1):
                        return
                except (OSError, urllib.error.URLError):
                    pass
                time.sleep(0.2)
            self.stop()
        raise Failure("prometheus did not start:\n" + self.log_tail())

    def log_tail(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-3000:]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def api(self, path, **params):
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            body = http_get("%s/api/v1/%s?%s" % (self.url, path, query), timeout=10)
        except urllib.error.HTTPError as e:
            body = e.read().decode()
        reply = json.loads(body)
        if reply.get("status") != "success":
            raise Failure("prometheus /api/v1/%s %s: %s" % (path, params, reply.get("error")))
        return reply["data"]

    def query(self, expr):
        return self.api("query", query=expr)["result"]

    def targets(self):
        return self.api("targets", state="active")["activeTargets"]


class Job:
    """gravacrun in its own session; its output goes to a file, read for the metrics lines."""

    def __init__(self, work_dir, name, argv, env=None):
        self.out_path = os.path.join(work_dir, name + ".out")
        self.argv = argv
        self.out = open(self.out_path, "w")
        self.out.write("$ " + " ".join(argv) + "\n")
        self.out.flush()
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    def text(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def metrics_urls(self, count, timeout):
        """{who: url} once gravacrun printed `count` "metrics:" lines."""
        deadline = time.monotonic() + timeout
        while True:
            urls = dict(re.findall(r"gravacrun: metrics: (controller|node \d+ \(\w+\)) (http\S+)",
                                   self.text()))
            if len(urls) >= count:
                return urls
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Failure("gravacrun printed %d of %d metrics addresses (exit %s):\n%s" % (
                    len(urls), count, self.proc.poll(), self.text()[-4000:]))
            time.sleep(0.2)

    def stop(self, sig=signal.SIGINT, timeout=30):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


# ---------------------------------------------------------------------------------------------
# Checks


def check_scrape(who, url, promtool):
    """Scrapes `url`, lints it with `promtool check metrics`; returns the text."""
    text = http_get(url)
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                          text=True)
    if lint.returncode != 0 or lint.stdout.strip() or lint.stderr.strip():
        raise Failure("promtool check metrics on %s (%s) failed (exit %d):\n%s%s" % (
            who, url, lint.returncode, lint.stdout, lint.stderr))
    return text


def wait_for_sane_values(urls, promtool, timeout):
    """Scrapes until the values show a job that runs, compresses and moves θ."""
    deadline = time.monotonic() + timeout
    first_steps = {}
    problems = ["no scrape yet"]
    while time.monotonic() < deadline:
        problems = []
        for who, url in urls.items():
            text = check_scrape(who, url, promtool)
            # gravac_errors_total may have no series (hence no TYPE line) before the first error.
            expected = CONTROLLER_FAMILIES if who == "controller" else [
                f for f in DAEMON_FAMILIES if f != "gravac_errors_total"]
            missing = [f for f in expected if f not in families(text)]
            if missing:
                problems.append("%s: metric families missing: %s" % (who, missing))
            s = parse_samples(text)
            if who == "controller":
                theta = value(s, "gravac_theta")
                if not theta or theta <= 1:
                    problems.append("controller: gravac_theta = %s, want > 1" % theta)
                if not value(s, "gravac_decisions_total"):
                    problems.append("controller: no decision published")
                if (value(s, "gravac_expected_nodes") != 2 or
                        value(s, "gravac_connected_nodes") != 2):
                    problems.append("controller: expected/connected nodes %s/%s, want 2/2" % (
                        value(s, "gravac_expected_nodes"), value(s, "gravac_connected_nodes")))
                if value(s, "gravac_world_size") != 4:
                    problems.append("controller: world size %s" % value(s, "gravac_world_size"))
                if sum(v for n, l, v in s if n == "gravac_search_phase") != 1:
                    problems.append("controller: gravac_search_phase is not a state set")
                eps = value(s, "gravac_policy_epsilon")
                if eps is None or abs(eps - 0.01) > 1e-9:
                    problems.append("controller: gravac_policy_epsilon = %s, want 0.01" % eps)
                if not value(s, "gravac_job_steps_total"):
                    problems.append("controller: gravac_job_steps_total = 0")
                evaluated = {l["theta"] for n, l, v in s
                             if n == "gravac_compression_throughput_samples_per_second"}
                if len(evaluated) < 2:  # θ moved: the search evaluated more than one θ
                    problems.append("controller: compression throughput for θ %s only" %
                                    sorted(evaluated))
            else:
                node = re.search(r"\((\w+)\)", who).group(1)
                steps = value(s, "gravac_steps_total", node=node)
                if steps is None:
                    problems.append("%s: no gravac_steps_total{node=%s}" % (who, node))
                    continue
                first_steps.setdefault(who, steps)
                if steps <= first_steps[who]:
                    problems.append("%s: gravac_steps_total did not grow (%s)" % (who, steps))
                if not value(s, "gravac_saved_bytes_total", node=node):
                    problems.append("%s: gravac_saved_bytes_total = 0" % who)
                if not value(s, "gravac_sent_bytes_total", node=node, kind="sparse"):
                    problems.append("%s: no sparse bytes sent" % who)
                if value(s, "gravac_connected_workers", node=node) != 2:
                    problems.append("%s: connected workers %s, want 2" % (
                        who, value(s, "gravac_connected_workers", node=node)))
                if value(s, "gravac_controller_connected", node=node) != 1:
                    problems.append("%s: controller not connected" % who)
                if value(s, "gravac_peer_nodes", node=node) != 2:
                    problems.append("%s: peer nodes %s" % (who, value(s, "gravac_peer_nodes",
                                                                      node=node)))
                applied = value(s, "gravac_applied_theta", node=node)
                if not applied or applied <= 1:
                    problems.append("%s: gravac_applied_theta = %s, want > 1" % (who, applied))
                if not value(s, "gravac_step_duration_seconds_count", node=node):
                    problems.append("%s: no step time observed" % who)
                if not value(s, "gravac_shm_handoff_duration_seconds_count", node=node):
                    problems.append("%s: no shared-memory handoff observed" % who)
        if not problems:
            return
        time.sleep(0.5)
    raise Failure("metric values never looked like a running, compressing job:\n  " +
                  "\n  ".join(problems))


def wait_targets_up(prom, count, timeout):
    deadline = time.monotonic() + timeout
    while True:
        targets = prom.targets()
        up = [t for t in targets if t["health"] == "up"]
        if len(targets) == count and len(up) == count:
            return targets
        if time.monotonic() > deadline:
            raise Failure("prometheus: %d of %d targets up after %d s: %s" % (
                len(up), count, timeout, [(t["labels"], t["health"], t.get("lastError"))
                                          for t in targets]))
        time.sleep(0.5)


def all_expressions(prom, dashboard):
    """[(where, expr, kind)] of the dashboard, then the loaded rules (records, alerts whole and
    without their final comparison)."""
    _, exprs = dashboard_expressions(dashboard)
    for group in prom.api("rules")["groups"]:
        for rule in group["rules"]:
            if rule["type"] == "recording":
                exprs.append(("recording rule %s" % rule["name"], rule["query"], "query"))
            else:
                exprs.append(("alert %s" % rule["name"], rule["query"], "alert"))
                for part in without_final_comparison(rule["query"]):
                    exprs.append(("alert %s without its final comparison" % rule["name"], part,
                                  "query"))
    return exprs


def evaluate(prom, where, expr, kind):
    """True when the expression returned data (an alert's whole expression may be empty)."""
    if kind == "label_values":
        selector, label = expr
        values = prom.api("label/%s/values" % label, **{"match[]": selector})
        return bool(values)
    result = prom.query(substitute(expr))
    return bool(result) or kind == "alert"


def check_rule_health(prom, rules_file):
    groups = prom.api("rules")["groups"]
    with open(rules_file) as f:
        names = re.findall(r"^\s*- name:\s*(\S+)", f.read(), re.M)
    loaded = {g["name"] for g in groups}
    if sorted(loaded) != sorted(names):
        raise Failure("rule groups loaded %s, file has %s" % (sorted(loaded), names))
    bad = [(g["name"], r["name"], r["health"], r.get("lastError"))
           for g in groups for r in g["rules"] if r["health"] != "ok"]
    if bad:
        raise Failure("rules not healthy: %s" % bad)
    return sum(len(g["rules"]) for g in groups)


def check_expressions(prom, exprs, skip, timeout):
    """Evaluates every expression (retrying empty ones until `timeout`: the first rate windows
    fill); returns how many returned data. Raises naming every expression without data."""
    deadline = time.monotonic() + timeout
    pending = [e for e in exprs if not skip(e)]
    while True:
        pending = [e for e in pending if not evaluate(prom, *e)]
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(1)
    if pending:
        raise Failure("no data for %d expression(s):\n  " % len(pending) + "\n  ".join(
            "%s: %s" % (where, expr) for where, expr, _ in pending))
    return len([e for e in exprs if not skip(e)])


def wait_for_data(prom, where, expr, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = prom.query(expr)
        if result:
            return result
        time.sleep(0.5)
    raise Failure("no data within %d s: %s: %s" % (timeout, where, expr))


def fault_only(entry):
    expr = entry[1] if isinstance(entry[1], str) else entry[1][0]
    return any(name in expr for name in FAULT_ONLY)


# ---------------------------------------------------------------------------------------------
# Scenarios


def scenario_rules(args):
    promtool = shutil.which(args.promtool) or args.promtool
    if not os.path.exists(promtool):
        log("SKIP: promtool not found")
        return SKIP
    ok = subprocess.run([promtool, "check", "rules", args.rules], capture_output=True, text=True)
    log(ok.stdout + ok.stderr)
    if ok.returncode != 0 or "SUCCESS" not in ok.stdout:
        raise Failure("promtool check rules %s failed" % args.rules)
    # The check can fail: a copy with a broken expression must be rejected.
    with open(args.rules) as f:
        text = f.read()
    broken = text.replace("increase(gravac_stalls_total[5m]) > 0",
                          "increase(gravac_stalls_total[5m] > 0", 1)
    if broken == text:
        raise Failure("the rules file changed: cannot build the broken copy")
    path = os.path.join(args.work_dir, "broken_rules.yml")
    with open(path, "w") as f:
        f.write(broken)
    bad = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
    if bad.returncode == 0:
        raise Failure("promtool check rules accepted a broken copy:\n" + bad.stdout)
    log("promtool rejects a broken copy as it should: %s" % bad.stderr.strip().splitlines()[-1])
    return 0


def scenario_dashboard(args):
    """The dashboard's structure: what Grafana needs to import it, and what issue #6 asks of it."""
    dash, exprs = dashboard_expressions(args.dashboard)
    problems = []
    if dash.get("schemaVersion", 0) < 36:
        problems.append("schemaVersion %s < 36" % dash.get("schemaVersion"))
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource", {})
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("no Prometheus `datasource` template variable")
    node = variables.get("node", {})
    node_query = node.get("query", {})
    node_query = node_query.get("query") if isinstance(node_query, dict) else node_query
    if node_query != "label_values(gravac_node_info, node)" or not node.get("includeAll"):
        problems.append("no `node` variable over label_values(gravac_node_info, node) with All")
    ids = []

    def walk(panels):
        for p in panels:
            ids.append(p.get("id"))
            if p.get("type") != "row":
                if p.get("datasource", {}).get("uid") != "${datasource}":
                    problems.append("panel '%s' does not use ${datasource}" % p.get("title"))
                for t in p.get("targets", []):
                    if t.get("datasource", {}).get("uid") != "${datasource}":
                        problems.append("a target of '%s' does not use ${datasource}" %
                                        p.get("title"))
                if not p.get("targets"):
                    problems.append("panel '%s' has no query" % p.get("title"))
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    if len(ids) != len(set(ids)):
        problems.append("panel ids are not unique")
    text = " ".join(e if isinstance(e, str) else e[0] for _, e, _ in exprs)
    for family in DAEMON_FAMILIES + CONTROLLER_FAMILIES:
        if family not in text:
            problems.append("metric %s is on no panel" % family)
    titles = " | ".join(p.get("title", "") for p in dash["panels"])
    for needed in ("θ", "gain", "ε", "throughput", "Compression throughput per θ", "saved",
                   "breakdown", "p50", "Collective latency", "handoff", "Errors", "Stalls",
                   "Connected"):
        if needed not in titles:
            problems.append("no panel titled with '%s'" % needed)
    gain = [p for p in dash["panels"] if "gain" in p.get("title", "")]
    if not gain or not any("gravac_policy_epsilon" in t["expr"] for t in gain[0]["targets"]):
        problems.append("ε is not drawn as a series on the gain panel")
    if not any(p.get("repeat") == "node" for p in dash["panels"]):
        problems.append("no per-node (repeat by node) panels")
    breakdown = [p for p in dash["panels"] if "breakdown" in p.get("title", "")]
    if not breakdown or breakdown[0]["fieldConfig"]["defaults"]["custom"]["stacking"][
            "mode"] != "normal":
        problems.append("the step-time breakdown is not stacked")
    if problems:
        raise Failure("dashboard %s:\n  %s" % (args.dashboard, "\n  ".join(problems)))
    log("dashboard: %d panels, %d expressions, every metric family of the contract on a panel"
        % (len(ids), len(exprs)))
    return 0


def netns_usable():
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = "gvcprobe-obs-%d" % os.getpid()
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        return "cannot create network namespaces here"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def scenario_job(args):
    promtool = shutil.which("promtool")
    if not promtool or not shutil.which("prometheus"):
        log("SKIP: promtool or prometheus not installed (Debian package prometheus)")
        return SKIP
    if args.link:
        why = netns_usable()
        if why:
            log("SKIP: %s" % why)
            return SKIP
    start = time.monotonic()
    sd_file = os.path.join(args.work_dir, "targets.json")
    with open(sd_file, "w") as f:
        f.write("[]\n")
    prom = Prometheus(args.work_dir, args.rules, sd_file)
    jobs = []
    try:
        link = ["--link", args.link] if args.link else []
        argv = [args.gravacrun, "-np", "4", "--nodes", "2"] + link + POLICY + [
            "--metrics_sd_file", sd_file, "--", args.example, "--steps", "1000000",
            "--hidden", "256", "--print_every", "1000000"]
        job = Job(args.work_dir, "job", argv)
        jobs.append(job)
        urls = job.metrics_urls(3, timeout=60)
        for who, url in sorted(urls.items()):
            log("metrics: %s %s" % (who, url))
            check_scrape(who, url, promtool)
        log("promtool check metrics: all %d scrapes pass with no output" % len(urls))
        wait_for_sane_values(urls, promtool, timeout=60)
        log("values: every family of the contract present, θ > 1 on the controller and every "
            "node, >= 2 θ evaluated, steps grow, bytes saved > 0; promtool check metrics passed "
            "on every scrape")

        targets = wait_targets_up(prom, 3, timeout=30)
        log("prometheus: %d targets up via file_sd: %s" % (
            len(targets), sorted(t["labels"].get("node", t["labels"]["job"]) for t in targets)))
        exprs = all_expressions(prom, args.dashboard)
        n = check_expressions(prom, exprs, fault_only, timeout=30)
        rules = check_rule_health(prom, args.rules)  # evaluated by now
        log("prometheus: %d of %d expressions return data (the other %d need errors: fault job);"
            " %d rules loaded, all healthy" % (n, len(exprs), len(exprs) - n, rules))
        rc = job.stop()
        log("job stopped (exit %s) after %.1f s" % (rc, time.monotonic() - start))
        if args.link:
            check_cluster_removed(job.proc.pid, urls["controller"])
            return 0

        if not args.pythonpath or subprocess.run(
                [sys.executable, "-c", "import torch"], capture_output=True).returncode != 0:
            # Like tests/python: without torch (or the gravac module) the fault job cannot run.
            log("SKIP: the scrape and expression checks passed, but the fault job needs torch "
                "and gravac.torch (--pythonpath), missing for %s" % sys.executable)
            return SKIP
        go_file = os.path.join(args.work_dir, "go")
        stop_file = os.path.join(args.work_dir, "stop")
        marker = os.path.join(args.work_dir, "faults_done")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (args.pythonpath,
                                                        env.get("PYTHONPATH")) if p)
        env.setdefault("OMP_NUM_THREADS", "1")
        fault = Job(args.work_dir, "fault_job", [
            args.gravacrun, "-np", "4", "--nodes", "2", "--stall_warning_s", "1",
            "--metrics_sd_file", sd_file, "--", sys.executable,
            os.path.join(os.path.dirname(os.path.abspath(__file__)), "fault_worker.py"),
            "--go", go_file, "--stop", stop_file, "--marker", marker, "--stall_s", "3"], env=env)
        jobs.append(fault)
        fault_urls = fault.metrics_urls(3, timeout=60)
        # Faults only once Prometheus holds a sample of every daemon's counters at 0: increase()
        # cannot count what happened before a series' first sample.
        wait_targets_up(prom, 3, timeout=30)
        wait_for_data(prom, "the fault job's daemons scraped before any fault",
                      "count(gravac_stalls_total == 0) == 2", timeout=20)
        open(go_file, "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(marker):
            if fault.proc.poll() is not None or time.monotonic() > deadline:
                raise Failure("the fault job did not get through its mismatch and stall:\n" +
                              fault.text()[-4000:])
            time.sleep(0.2)
        for who, url in sorted(fault_urls.items()):
            samples = parse_samples(check_scrape(who, url, promtool))  # with errors counted now
            if who != "controller" and not value(samples, "gravac_errors_total"):
                raise Failure("%s: gravac_errors_total is 0 after a mismatched allreduce" % who)
            if who != "controller" and not value(samples, "gravac_stalls_total"):
                raise Failure("%s: gravac_stalls_total is 0 after a stall" % who)
        counted = wait_for_data(prom, "errors counted by Prometheus",
                                "sum by (node, kind) (increase(gravac_errors_total[1m])) > 0",
                                timeout=20)
        log("fault job: errors counted: %s" % sorted(
            (r["metric"]["node"], r["metric"]["kind"]) for r in counted))
        wait_targets_up(prom, 3, timeout=30)
        n_fault = check_expressions(prom, exprs, lambda e: not fault_only(e), timeout=20)
        stall = [e for e in exprs if e[0] == "alert GravacStall"]
        if not stall:
            raise Failure("rules.yml has no alert GravacStall")
        result = wait_for_data(prom, *stall[0][:2], timeout=20)
        log("fault job: %d error expressions return data; GravacStall's expression fires for %s"
            % (n_fault, sorted(r["metric"].get("node", "-") for r in result)))

        down = [e for e in exprs if e[0] == "alert GravacDaemonDown"]
        if not down:
            raise Failure("rules.yml has no alert GravacDaemonDown")
        if prom.query(down[0][1]):
            raise Failure("GravacDaemonDown's expression has data while every daemon is up: %s"
                          % prom.query(down[0][1]))
        victim = int(re.search(r":(\d+)/", fault_urls["node 1 (node1)"]).group(1))
        pid = daemon_pid(fault.out_path, victim)
        os.kill(pid, signal.SIGKILL)
        result = wait_for_data(prom, *down[0][:2], timeout=30)
        log("killed gravacd node1 (pid %d): GravacDaemonDown's expression returns %s" % (
            pid, sorted((r["metric"].get("node", "-"), r["metric"].get("__name__", "-")) for r in result)))
        open(stop_file, "w").close()
        fault.stop()
        return 0
    finally:
        for j in jobs:
            j.stop(signal.SIGKILL if j.proc.poll() is None else signal.SIGINT, timeout=10)
        prom.stop()


def check_cluster_removed(gravacrun_pid, controller_url):
    """gravacrun's namespaces (named gravacrun-<pid>-s<subnet>-...) and its host link
    (gvch<subnet>) are gone once it exited."""
    deadline = time.monotonic() + 10
    prefix = "gravacrun-%d-" % gravacrun_pid
    a, b, _ = [int(x) for x in re.search(r"//198\.(\d+)\.(\d+)\.(\d+):", controller_url).groups()]
    device = "gvch%d" % ((a - 18) * 256 + b)
    while True:
        namespaces = [l.split()[0] for l in subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
                      if l.startswith(prefix)]
        host_link = os.path.exists("/sys/class/net/" + device)
        if not namespaces and not host_link:
            log("emulated cluster removed: no %s* namespace, no %s on the host" % (prefix, device))
            return
        if time.monotonic() > deadline:
            raise Failure("left behind: namespaces %s, host link %s present: %s" % (
                namespaces, device, host_link))
        time.sleep(0.2)


def daemon_pid(out_path, metrics_port):
    """The pid of the gravacd serving metrics on `metrics_port` (its --metrics_port_file says)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if not argv or not argv[0].endswith(b"gravacd"):
            continue
        for a in argv:
            if a.startswith(b"--metrics_port_file="):
                try:
                    with open(a.split(b"=", 1)[1]) as f:
                        if int(f.read().strip()) == metrics_port:
                            return int(pid)
                except (OSError, ValueError):
                    pass
    raise Failure("no gravacd serves metrics on port %d (%s)" % (metrics_port, out_path))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("scenario", choices=["rules", "dashboard", "job"])
    p.add_argument("--promtool", default="promtool")
    p.add_argument("--rules", required=True)
    p.add_argument("--dashboard")
    p.add_argument("--gravacrun")
    p.add_argument("--example")
    p.add_argument("--pythonpath", default="")
    p.add_argument("--link", default="")
    p.add_argument("--work_dir", required=True)
    args = p.parse_args()
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    try:
        rc = {"rules": scenario_rules, "dashboard": scenario_dashboard,
              "job": scenario_job}[args.scenario](args)
    except Failure as f:
        log("FAILED %s%s: %s" % (args.scenario, " --link" if args.link else "", f))
        for name in ("job.out", "fault_job.out"):
            path = os.path.join(args.work_dir, name)
            if os.path.exists(path):
                with open(path, errors="replace") as fh:
                    log("---- %s (tail) ----\n%s" % (name, fh.read()[-3000:]))
        return 1
    if rc == 0:
        log("PASSED %s%s" % (args.scenario, " --link" if args.link else ""))
    return rc


if __name__ == "__main__":
    sys.exit(main())
