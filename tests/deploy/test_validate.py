"""deploy/kubernetes, checked offline as a cluster would check it (CTest deploy_validate).

Every overlay is rendered with `kubectl kustomize` and each object is checked:
- schema: against Kubernetes' OpenAPI schemas and the Prometheus Operator's and cert-manager's
  CRDs (tools/validate.mjs), unknown fields included, and every object has a name;
- the restricted Pod Security Standard (https://kubernetes.io/docs/concepts/security/
  pod-security-standards/, baseline and restricted lists) on every pod template, plus a read-only
  root filesystem;
- what a platform engineer expects: versioned image tags pulled IfNotPresent, requests and limits,
  probes on named ports, the Job's TTL and failure policy, a PodDisruptionBudget for the controller;
- the objects agree: the Service, PodDisruptionBudget, NetworkPolicies and PodMonitors select the
  pods and ports they mean, the data-plane port range of the NetworkPolicy is gravacd's
  GRAVAC_DATA_PORT_RANGE, and deploy/README.md's Prometheus scrape config keeps every pod under the
  job names the dashboard uses;
- an overlay with namePrefix and namespace keeps the workers pointed at the renamed Service and Job;
- every $(VAR) in a command resolves, and the example the ConfigMap's GRAVAC_EXAMPLE selects is
  one the image installs;
- the control plane is mutual TLS: every gravac process reads its certificate, key and CA from a
  Secret volume it mounts, each such Secret is a cert-manager Certificate of the overlay, issued by
  the job's CA Issuer, the controller's names the server name the clients expect and the workers'
  names every gravacd node name of the Job's indexes.
Each check is run on broken copies too and must report them.
"""

import copy
import os
import re
import shutil

import pytest
import yaml

from manifests import (KUBERNETES, SOURCE_DIR, all_containers, command_line, declared_env, expand,
                       find, overlays, plain_env, pod_spec, render, render_overlay, validate)

WORKLOADS = {"Deployment", "Job", "DaemonSet", "StatefulSet", "ReplicaSet"}
# The restricted level allows these volume types only.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
DASHBOARD_JOBS = {"controller": "gravac-controller", "worker": "gravacd"}


@pytest.fixture(scope="module")
def rendered():
    return {name: render_overlay(name) for name in overlays()}


def label(o):
    return "%s %s" % (o["kind"], o["metadata"].get("name"))


def workloads(objects):
    return [o for o in objects if o["kind"] in WORKLOADS]


def selects(selector, labels):
    return bool(selector) and selector.get("matchLabels", {}).items() <= labels.items() and \
        not selector.get("matchExpressions")


def template_labels(o):
    return o["spec"]["template"]["metadata"].get("labels", {})


def component(objects, name):
    found = [o for o in workloads(objects)
             if template_labels(o).get("app.kubernetes.io/component") == name]
    assert len(found) == 1, "expected one %s workload, found %d" % (name, len(found))
    return found[0]


def named_ports(spec):
    return {p["name"]: p["containerPort"] for c in all_containers(spec)
            for p in c.get("ports", []) if "name" in p}


# ---------------------------------------------------------------------------------------------
# The checks: each returns a list of problems (empty = passes).


def schema_problems(objects):
    problems = []
    for kind, name, errors in validate(objects):
        problems += ["%s %s: %s" % (kind, name, e) for e in errors]
    for o in objects:
        if not (o.get("metadata") or {}).get("name"):
            problems.append("%s without metadata.name" % o.get("kind"))
    return problems


def pss_problems(objects):
    """The baseline and restricted Pod Security Standards, and readOnlyRootFilesystem."""
    problems = []
    for o in workloads(objects):
        spec = pod_spec(o)
        pod = spec.get("securityContext", {})
        where = label(o)
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(field):
                problems.append("%s: %s" % (where, field))
        for v in spec.get("volumes", []):
            kinds = set(v) - {"name"}
            if not kinds <= RESTRICTED_VOLUMES:
                problems.append("%s: volume %s of type %s" % (where, v["name"], sorted(kinds)))
        for s in pod.get("sysctls", []):
            if s["name"] not in SAFE_SYSCTLS:
                problems.append("%s: sysctl %s" % (where, s["name"]))
        for c in all_containers(spec):
            sc = c.get("securityContext", {})
            at = "%s container %s" % (where, c.get("name"))

            def effective(field):
                return sc.get(field, pod.get(field))

            if sc.get("privileged"):
                problems.append("%s: privileged" % at)
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append("%s: allowPrivilegeEscalation is not false" % at)
            if effective("runAsNonRoot") is not True:
                problems.append("%s: runAsNonRoot is not true" % at)
            if effective("runAsUser") == 0:
                problems.append("%s: runAsUser 0" % at)
            seccomp = (sc.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
            if seccomp not in ("RuntimeDefault", "Localhost"):
                problems.append("%s: seccompProfile %s" % (at, seccomp))
            caps = sc.get("capabilities", {})
            if "ALL" not in caps.get("drop", []):
                problems.append("%s: capabilities do not drop ALL" % at)
            if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
                problems.append("%s: adds capabilities %s" % (at, caps["add"]))
            if sc.get("procMount", "Default") != "Default":
                problems.append("%s: procMount %s" % (at, sc["procMount"]))
            if any(p.get("hostPort") for p in c.get("ports", [])):
                problems.append("%s: hostPort" % at)
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append("%s: root filesystem is writable" % at)
    return problems


def operations_problems(objects):
    """Tags, pull policy, requests/limits, probes, the Job's lifecycle, the controller's PDB."""
    problems = []
    for o in workloads(objects):
        spec = pod_spec(o)
        ports = named_ports(spec)
        for c in all_containers(spec):
            at = "%s container %s" % (label(o), c.get("name"))
            image = c.get("image", "")
            tag = image.rpartition("/")[2].partition(":")[2]
            if not tag or tag == "latest":
                problems.append("%s: image %r has no version tag" % (at, image))
            if c.get("imagePullPolicy") != "IfNotPresent":
                problems.append("%s: imagePullPolicy %s" % (at, c.get("imagePullPolicy")))
            resources = c.get("resources", {})
            for kind in ("requests", "limits"):
                missing = {"cpu", "memory"} - set(resources.get(kind, {}))
                if missing:
                    problems.append("%s: no %s for %s" % (at, kind, sorted(missing)))
            numbers = {p.get("containerPort") for x in all_containers(spec)
                       for p in x.get("ports", [])}
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                handler = c.get(probe, {})
                port = next((handler[k].get("port") for k in ("tcpSocket", "httpGet", "grpc")
                             if k in handler), None)
                if port is not None and port not in ports and port not in numbers:
                    problems.append("%s: %s on port %r that no container names or opens"
                                    % (at, probe, port))
        if o["kind"] == "Deployment":
            for c in spec["containers"]:
                if "readinessProbe" not in c or "livenessProbe" not in c:
                    problems.append("%s container %s: no readiness or liveness probe"
                                    % (label(o), c["name"]))
            pdbs = [p for p in objects if p["kind"] == "PodDisruptionBudget"
                    and selects(p["spec"]["selector"], template_labels(o))]
            if len(pdbs) != 1:
                problems.append("%s: %d PodDisruptionBudgets select it" % (label(o), len(pdbs)))
        if o["kind"] == "Job":
            if not o["spec"].get("ttlSecondsAfterFinished"):
                problems.append("%s: no ttlSecondsAfterFinished" % label(o))
            rules = o["spec"].get("podFailurePolicy", {}).get("rules", [])
            names = {c["name"] for c in spec["containers"]}
            if not any(r["action"] == "FailJob" and r.get("onExitCodes", {}).get(
                    "containerName") in names for r in rules):
                problems.append("%s: no podFailurePolicy rule fails the job on a worker's exit"
                                % label(o))
            sidecars = [c for c in spec.get("initContainers", [])
                        if c.get("restartPolicy") == "Always"]
            if not sidecars or any("startupProbe" not in c for c in sidecars):
                problems.append("%s: gravacd is not a sidecar with a startup probe" % label(o))
    return problems


def port_range(value):
    low, _, high = value.partition("-")
    return int(low), int(high or low)


EXAMPLES_DIR = "/usr/local/share/gravac/examples"


def installed_examples():
    """The training scripts the image installs into EXAMPLES_DIR (the top CMakeLists.txt)."""
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        text = f.read()
    files = re.findall(r"install\(FILES ([^)]*?) DESTINATION share/gravac/examples\)", text, re.S)
    return {os.path.basename(f) for group in files for f in group.split()
            if os.path.basename(f).startswith("train_")}


def declared_values(c, objects):
    """What the container's $(VAR) references can expand to: its envFrom ConfigMaps' data (the
    ones that exist) and its env (a fieldRef or other source as an empty value)."""
    env = {}
    for ref in c.get("envFrom", []):
        for m in objects:
            if m["kind"] == "ConfigMap" and m["metadata"]["name"] == ref["configMapRef"]["name"]:
                env.update({k: str(v) for k, v in m.get("data", {}).items()})
    for e in c.get("env", []):
        env[e["name"]] = expand(e["value"], env) if "value" in e else ""
    return env


def consistency_problems(objects):
    """The objects select and reach each other."""
    problems = []
    controller = component(objects, "controller")
    workers = component(objects, "worker")
    c_labels, w_labels = template_labels(controller), template_labels(workers)
    c_ports, w_ports = named_ports(pod_spec(controller)), named_ports(pod_spec(workers))
    service = find(objects, "Service")
    if not selects({"matchLabels": service["spec"]["selector"]}, c_labels):
        problems.append("the Service does not select the controller pods")
    for p in service["spec"]["ports"]:
        if p["targetPort"] not in c_ports:
            problems.append("the Service's port %s targets %r, not a controller port"
                            % (p["name"], p["targetPort"]))
    grpc = [p for p in service["spec"]["ports"] if p["name"] == "grpc"]
    address = "%s:%d" % (service["metadata"]["name"], grpc[0]["port"] if grpc else -1)
    for c in all_containers(pod_spec(workers)):
        if plain_env(c).get("GRAVAC_CONTROLLER") != address:
            problems.append("worker container %s: GRAVAC_CONTROLLER %r is not the Service %s"
                            % (c["name"], plain_env(c).get("GRAVAC_CONTROLLER"), address))
    term = pod_spec(workers)["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0]
    if term["labelSelector"]["matchLabels"].get("batch.kubernetes.io/job-name") != \
            workers["metadata"]["name"]:
        problems.append("the workers' anti-affinity names job %r, not %r" % (
            term["labelSelector"]["matchLabels"].get("batch.kubernetes.io/job-name"),
            workers["metadata"]["name"]))
    config = {o["metadata"]["name"] for o in objects if o["kind"] == "ConfigMap"}
    for o in (controller, workers):
        for c in all_containers(pod_spec(o)):
            for ref in c.get("envFrom", []):
                if ref["configMapRef"]["name"] not in config:
                    problems.append("%s: envFrom names ConfigMap %s that does not exist"
                                    % (label(o), ref["configMapRef"]["name"]))
            # Kubernetes leaves a $(VAR) it cannot resolve as written: the pod would run it.
            declared = declared_values(c, objects)
            for word in c.get("command", []) + c.get("args", []):
                for name in re.findall(r"(?<!\$)\$\((\w+)\)", str(word)):
                    if name not in declared:
                        problems.append("%s: container %s refers to $(%s), which its env and "
                                        "envFrom do not define" % (label(o), c["name"], name))
    examples = installed_examples()
    for c in all_containers(pod_spec(workers)):
        env = declared_values(c, objects)
        for word in (expand(w, env) for w in c.get("command", []) + c.get("args", [])):
            if word.startswith(EXAMPLES_DIR + "/") and \
                    word[len(EXAMPLES_DIR) + 1:] not in examples:
                problems.append("workers run %s, not one of the installed examples %s"
                                % (word, ", ".join(sorted(examples))))

    # NetworkPolicies: gRPC from the workers, the data plane between workers, metrics.
    gravacd = [c for c in pod_spec(workers).get("initContainers", []) if c["name"] == "gravacd"]
    data_plane = port_range(plain_env(gravacd[0]).get("GRAVAC_DATA_PORT_RANGE", "0")) \
        if gravacd else None

    def allowed(pod_labels, from_labels, port, end=None):
        for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
            if not selects(policy["spec"]["podSelector"], pod_labels):
                continue
            for rule in policy["spec"].get("ingress", []):
                peers = [p for p in rule.get("from", [])
                         if from_labels is None and "namespaceSelector" in p
                         or from_labels is not None and "namespaceSelector" not in p
                         and selects(p.get("podSelector"), from_labels)]
                for p in rule.get("ports", []):
                    low, high = p["port"], p.get("endPort", p["port"])
                    if peers and low <= port and (end or port) <= high:
                        return True
        return False

    if not allowed(c_labels, w_labels, c_ports.get("grpc", -1)):
        problems.append("no NetworkPolicy lets the workers reach the controller's gRPC port")
    if data_plane is None or data_plane[0] == 0 or \
            not allowed(w_labels, w_labels, data_plane[0], data_plane[1]):
        problems.append("no NetworkPolicy lets the workers reach gravacd's data plane %s"
                        % (data_plane,))
    for pod_labels, ports, what in ((c_labels, c_ports, "controller"),
                                    (w_labels, w_ports, "workers")):
        if not allowed(pod_labels, None, ports.get("metrics", -1)):
            problems.append("no NetworkPolicy lets Prometheus reach the %s' metrics" % what)

    # PodMonitors, where the overlay has them: select the pods, name their metrics port, and
    # give the job names the dashboard uses.
    for monitor in (o for o in objects if o["kind"] == "PodMonitor"):
        chosen = [o for o in (controller, workers)
                  if selects(monitor["spec"]["selector"], template_labels(o))]
        if len(chosen) != 1:
            problems.append("PodMonitor %s selects %d workloads" % (monitor["metadata"]["name"],
                                                                     len(chosen)))
            continue
        which = template_labels(chosen[0])["app.kubernetes.io/component"]
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            if endpoint.get("port") not in named_ports(pod_spec(chosen[0])):
                problems.append("PodMonitor %s: port %r is no container port of its pods"
                                % (monitor["metadata"]["name"], endpoint.get("port")))
            jobs = [r.get("replacement") for r in endpoint.get("relabelings", [])
                    if r.get("targetLabel") == "job"]
            if jobs != [DASHBOARD_JOBS[which]]:
                problems.append("PodMonitor %s: job %s, the dashboard expects %s"
                                % (monitor["metadata"]["name"], jobs, DASHBOARD_JOBS[which]))
    return problems


COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
TLS_FILES = ("GRAVAC_TLS_CERT", "GRAVAC_TLS_KEY", "GRAVAC_TLS_CA")


def node_names(c, objects, nodes):
    """gravacd's GRAVAC_NODE_NAME in the pod of each Job index below `nodes`."""
    names = []
    for index in range(nodes):
        env = declared_env(c, objects)
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = expand(e["value"], env)
            elif e["valueFrom"].get("fieldRef", {}).get("fieldPath") == COMPLETION_INDEX:
                env[e["name"]] = str(index)
        names.append(env.get("GRAVAC_NODE_NAME", ""))
    return names


def tls_problems(objects):
    """Mutual TLS on the control plane, from Secrets that the overlay's Certificates issue."""
    problems = []
    certificates = {o["spec"]["secretName"]: o for o in objects if o["kind"] == "Certificate"}
    issuers = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Issuer"}
    for cert in certificates.values():
        issuer = issuers.get(cert["spec"]["issuerRef"]["name"])
        if issuer is None:
            problems.append("Certificate %s: issuer %s is not in the overlay"
                            % (cert["metadata"]["name"], cert["spec"]["issuerRef"]["name"]))
        elif not cert["spec"].get("isCA") and not (
                "ca" in issuer["spec"] and certificates.get(
                    issuer["spec"]["ca"]["secretName"], {}).get("spec", {}).get("isCA")):
            problems.append("Certificate %s: not signed by the job's CA Issuer"
                            % cert["metadata"]["name"])
    mounted = {}  # workload component -> the Certificate of its TLS files
    for o in (component(objects, "controller"), component(objects, "worker")):
        which = template_labels(o)["app.kubernetes.io/component"]
        volumes = {v["name"]: v for v in pod_spec(o).get("volumes", [])}
        for c in all_containers(pod_spec(o)):
            at = "%s container %s" % (label(o), c["name"])
            env = declared_env(c, objects)
            if env.get("GRAVAC_INSECURE_PLAINTEXT", "false").lower() in ("1", "true", "yes"):
                problems.append("%s: the control plane is plain text (GRAVAC_INSECURE_PLAINTEXT)"
                                % at)
            for name in TLS_FILES:
                path = env.get(name, "")
                mount = [m for m in c.get("volumeMounts", [])
                         if path.startswith(m["mountPath"].rstrip("/") + "/")]
                secret = volumes.get(mount[0]["name"], {}).get("secret") if mount else None
                if not secret:
                    problems.append("%s: %s %r is not in a mounted Secret" % (at, name, path))
                    continue
                cert = certificates.get(secret["secretName"])
                if cert is None:
                    problems.append("%s: Secret %s is issued by no Certificate of the overlay"
                                    % (at, secret["secretName"]))
                    continue
                mounted[which] = cert
    workers = component(objects, "worker")
    server_names = {declared_env(c, objects).get("GRAVAC_TLS_SERVER_NAME")
                    or plain_env(c).get("GRAVAC_CONTROLLER", "").rpartition(":")[0]
                    for c in all_containers(pod_spec(workers))}
    controller_cert = mounted.get("controller")
    if controller_cert is not None:
        names = set(controller_cert["spec"].get("dnsNames", []))
        for name in sorted(server_names - names):
            problems.append("Certificate %s does not name %r, the server name the workers expect "
                            "(GRAVAC_TLS_SERVER_NAME)" % (controller_cert["metadata"]["name"], name))
        if "server auth" not in controller_cert["spec"].get("usages", []):
            problems.append("Certificate %s: no server auth usage"
                            % controller_cert["metadata"]["name"])
    worker_cert = mounted.get("worker")
    gravacd = [c for c in pod_spec(workers).get("initContainers", []) if c["name"] == "gravacd"]
    if worker_cert is not None and gravacd:
        config = find(objects, "ConfigMap")["data"]
        names = set(worker_cert["spec"].get("dnsNames", []))
        for name in node_names(gravacd[0], objects, int(config["GRAVAC_NODES"])):
            if name not in names:
                problems.append("Certificate %s does not name node %r (gravacd's "
                                "GRAVAC_NODE_NAME)" % (worker_cert["metadata"]["name"], name))
        if "client auth" not in worker_cert["spec"].get("usages", []):
            problems.append("Certificate %s: no client auth usage" % worker_cert["metadata"]["name"])
    return problems


# ---------------------------------------------------------------------------------------------
# deploy/README.md's scrape config, applied to the pods as Prometheus' pod discovery would.


def documented_scrape_config():
    with open(os.path.join(SOURCE_DIR, "deploy", "README.md")) as f:
        text = f.read()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    configs = [c for b in blocks if isinstance(b, dict)
               for c in b.get("scrape_configs", []) if c.get("kubernetes_sd_configs")]
    assert len(configs) == 1, "deploy/README.md shows %d pod scrape configs" % len(configs)
    return configs[0]


def meta_name(kind, key):
    return "__meta_kubernetes_pod_%s_%s" % (kind, re.sub(r"[^a-zA-Z0-9_]", "_", key))


def scrape(config, workload):
    """The target labels Prometheus keeps for one pod of the workload (its first metrics port),
    or None when the relabelling drops it."""
    template = workload["spec"]["template"]
    labels = {"__address__": "10.0.0.1", "job": config["job_name"]}
    for key, value in template["metadata"].get("labels", {}).items():
        labels[meta_name("label", key)] = value
    for key, value in template["metadata"].get("annotations", {}).items():
        labels[meta_name("annotation", key)] = value
    for rule in config.get("relabel_configs", []):
        value = rule.get("separator", ";").join(labels.get(s, "") for s in rule["source_labels"])
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        action = rule.get("action", "replace")
        if action == "keep" and not match:
            return None
        if action == "drop" and match:
            return None
        if action == "replace" and match:
            labels[rule["target_label"]] = match.expand(
                re.sub(r"\$(\d+)", r"\\\1", rule.get("replacement", "$1")))
    return labels


def scrape_problems(objects, config):
    problems = []
    for o in (component(objects, "controller"), component(objects, "worker")):
        which = template_labels(o)["app.kubernetes.io/component"]
        target = scrape(config, o)
        if target is None:
            problems.append("the documented scrape config drops the %s pods" % which)
            continue
        port = int(target["__address__"].rpartition(":")[2] or 0)
        if port != named_ports(pod_spec(o)).get("metrics"):
            problems.append("the documented scrape config scrapes the %s pods on %s, not on "
                            "their metrics port" % (which, target["__address__"]))
        if target["job"] != DASHBOARD_JOBS[which]:
            problems.append("the documented scrape config names the %s pods job=%s, the "
                            "dashboard expects %s" % (which, target["job"], DASHBOARD_JOBS[which]))
    return problems


def all_problems(objects):
    """Every check's problems; a check that cannot find what it checks reports that."""
    problems = []
    for check in (schema_problems, pss_problems, operations_problems, consistency_problems,
                  tls_problems, lambda o: scrape_problems(o, documented_scrape_config())):
        try:
            problems += check(objects)
        except (AssertionError, KeyError) as e:
            problems.append("%s: %s" % (type(e).__name__, e))
    return problems


# ---------------------------------------------------------------------------------------------
# The overlays as shipped


def test_every_overlay_is_rendered(rendered):
    assert {"cpu", "gpu", "monitoring"} <= set(rendered)
    for name, objects in rendered.items():
        kinds = sorted(o["kind"] for o in objects)
        for kind in ("Certificate", "ConfigMap", "Deployment", "Issuer", "Job", "NetworkPolicy",
                     "PodDisruptionBudget", "Service"):
            assert kind in kinds, (name, kinds)
    assert sorted(o["kind"] for o in rendered["monitoring"]).count("PodMonitor") == 2


@pytest.mark.parametrize("check", [schema_problems, pss_problems, operations_problems,
                                   consistency_problems, tls_problems])
def test_every_overlay_passes(rendered, check):
    for name, objects in rendered.items():
        assert check(objects) == [], name


def test_the_documented_scrape_config_keeps_every_pod_under_the_dashboards_job_names(rendered):
    config = documented_scrape_config()
    for name, objects in rendered.items():
        assert scrape_problems(objects, config) == [], name


def test_the_gpu_overlay_gives_each_rank_a_gpu(rendered):
    objects = rendered["gpu"]
    workers = component(objects, "worker")
    local_size = find(objects, "ConfigMap")["data"]["GRAVAC_LOCAL_SIZE"]
    c = [c for c in pod_spec(workers)["containers"] if c["name"] == "workers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == local_size
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in \
        pod_spec(workers)["tolerations"]
    assert all(c["image"].endswith("-cuda") for c in all_containers(pod_spec(workers)))
    assert "nvidia.com/gpu" not in str(component(rendered["cpu"], "worker"))


def prefixed_overlay(tmp_path, kubernetes=KUBERNETES, base="monitoring"):
    overlay = tmp_path / "team-a"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "namePrefix": "team-a-", "namespace": "ml",
        "resources": [os.path.relpath(os.path.join(kubernetes, "overlays", base), overlay)]}))
    return render(str(overlay))


def test_the_config_map_selects_either_example(rendered):
    """GRAVAC_EXAMPLE picks the script the workers run; every installed example passes."""
    examples = installed_examples()
    assert examples == {"train_digits.py", "train_fashion.py"}
    for example in sorted(examples):
        objects = copy.deepcopy(rendered["cpu"])
        find(objects, "ConfigMap")["data"]["GRAVAC_EXAMPLE"] = example
        assert all_problems(objects) == [], example
        argv = command_line(pod_spec(workers_of(objects))["containers"][0], objects)
        assert argv[argv.index("--") + 2] == EXAMPLES_DIR + "/" + example


def test_names_survive_a_name_prefix_and_namespace_overlay(tmp_path):
    objects = prefixed_overlay(tmp_path)
    assert all(o["metadata"]["name"].startswith("team-a-") for o in objects)
    assert all(o["metadata"]["namespace"] == "ml" for o in objects)
    assert all_problems(objects) == []
    workers = component(objects, "worker")
    assert workers["metadata"]["name"] == "team-a-gravac-train-digits"
    assert plain_env(pod_spec(workers)["containers"][0])["GRAVAC_CONTROLLER"] == \
        "team-a-gravac-controller:7460"


# ---------------------------------------------------------------------------------------------
# Broken copies: each check reports each of them.


def workers_of(objects):
    return component(objects, "worker")


def sidecar(objects):
    return pod_spec(workers_of(objects))["initContainers"][0]


def controller_container(objects):
    return pod_spec(component(objects, "controller"))["containers"][0]


def monitor(objects, name):
    return find(objects, "PodMonitor", name)


def set_in(getter, key, value):
    def mutate(objects):
        getter(objects)[key] = value
    return mutate


def delete_in(getter, key):
    def mutate(objects):
        del getter(objects)[key]
    return mutate


BROKEN = {
    # schema
    "unknown container field": (set_in(controller_container, "bogus", 1), "unknown field"),
    "unknown pod field": (set_in(lambda o: pod_spec(workers_of(o)), "hostAliasez", []),
                          "unknown field /spec/template/spec/hostAliasez"),
    "misspelled top-level field": (set_in(lambda o: find(o, "Service"), "specs", {}),
                                   "unknown field /specs"),
    "wrong type": (set_in(lambda o: component(o, "controller")["spec"], "replicas", "one"),
                   "replicas must be integer"),
    "missing container name": (delete_in(controller_container, "name"), "name"),
    "bad enum": (lambda o: workers_of(o)["spec"]["podFailurePolicy"]["rules"][0].update(
        action="Fail"), "podFailurePolicy"),
    "unknown kind": (set_in(lambda o: component(o, "controller"), "kind", "Deploymnt"),
                     "no schema"),
    "missing name": (delete_in(lambda o: find(o, "ConfigMap")["metadata"], "name"),
                     "without metadata.name"),
    "PodMonitor unknown field": (set_in(lambda o: monitor(o, "gravacd")["spec"],
                                        "podMetricEndpoints", []), "unknown field"),
    "PodMonitor wrong type": (lambda o: monitor(o, "gravacd")["spec"]["podMetricsEndpoints"][0]
                              .update(interval=15), "interval must be string"),
    "NetworkPolicy misspelled endPort": (
        lambda o: find(o, "NetworkPolicy", "gravac-workers")["spec"]["ingress"][0]["ports"][0]
        .update(end_port=1), "unknown field"),
    # restricted Pod Security Standard
    "runs as root": (set_in(lambda o: sidecar(o)["securityContext"], "runAsNonRoot", False),
                     "gravacd: runAsNonRoot"),
    "non-root only in the pod": (lambda o: [c["securityContext"].pop("runAsNonRoot") for c in
                                            all_containers(pod_spec(workers_of(o)))] and
                                 pod_spec(workers_of(o))["securityContext"].pop("runAsNonRoot"),
                                 "workers: runAsNonRoot"),
    "user 0": (set_in(lambda o: sidecar(o)["securityContext"], "runAsUser", 0), "runAsUser 0"),
    "seccomp unconfined": (set_in(lambda o: controller_container(o)["securityContext"],
                                  "seccompProfile", {"type": "Unconfined"}), "seccompProfile"),
    "privilege escalation": (set_in(lambda o: sidecar(o)["securityContext"],
                                    "allowPrivilegeEscalation", True), "allowPrivilegeEscalation"),
    "capabilities kept": (delete_in(lambda o: controller_container(o)["securityContext"],
                                    "capabilities"), "drop ALL"),
    "capability added": (lambda o: sidecar(o)["securityContext"]["capabilities"].update(
        add=["NET_RAW"]), "adds capabilities"),
    "privileged": (set_in(lambda o: sidecar(o)["securityContext"], "privileged", True),
                   "privileged"),
    "hostPath volume": (lambda o: pod_spec(workers_of(o))["volumes"][0].update(
        hostPath={"path": "/run/gravac"}) or pod_spec(workers_of(o))["volumes"][0].pop(
        "emptyDir"), "hostPath"),
    "hostNetwork": (set_in(lambda o: pod_spec(workers_of(o)), "hostNetwork", True),
                    "hostNetwork"),
    "hostPort": (lambda o: controller_container(o)["ports"][0].update(hostPort=7460),
                 "hostPort"),
    "writable root filesystem": (set_in(lambda o: sidecar(o)["securityContext"],
                                        "readOnlyRootFilesystem", False), "writable"),
    # operations
    "latest tag": (set_in(controller_container, "image", "gravac:latest"), "no version tag"),
    "no tag": (set_in(sidecar, "image", "registry.example.com:5000/gravac"), "no version tag"),
    "pull Always": (set_in(sidecar, "imagePullPolicy", "Always"), "imagePullPolicy"),
    "no limits": (delete_in(lambda o: pod_spec(workers_of(o))["containers"][0]["resources"],
                            "limits"), "no limits"),
    "probe on a missing port": (lambda o: controller_container(o)["livenessProbe"][
        "httpGet"].update(port=9479), "no container names"),
    "no liveness probe": (delete_in(controller_container, "livenessProbe"), "liveness"),
    "no TTL": (delete_in(lambda o: workers_of(o)["spec"], "ttlSecondsAfterFinished"),
               "ttlSecondsAfterFinished"),
    "no failure policy": (delete_in(lambda o: workers_of(o)["spec"], "podFailurePolicy"),
                          "podFailurePolicy"),
    "gravacd not a sidecar": (delete_in(sidecar, "restartPolicy"), "sidecar"),
    "PDB selects nothing": (lambda o: find(o, "PodDisruptionBudget")["spec"]["selector"][
        "matchLabels"].update({"app.kubernetes.io/component": "ctrl"}), "PodDisruptionBudget"),
    # consistency
    "Service selects nothing": (lambda o: find(o, "Service")["spec"]["selector"].update(
        {"app.kubernetes.io/component": "daemon"}), "does not select"),
    "Service targets a missing port": (lambda o: find(o, "Service")["spec"]["ports"][1].update(
        targetPort="prometheus"), "not a controller port"),
    "workers name another controller": (lambda o: sidecar(o)["env"][0].update(value="ctrl"),
                                        "GRAVAC_CONTROLLER"),
    "anti-affinity names another job": (lambda o: pod_spec(workers_of(o))["affinity"][
        "podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"][
        "matchLabels"].update({"batch.kubernetes.io/job-name": "gravac-train"}), "anti-affinity"),
    "missing ConfigMap": (lambda o: o.remove(find(o, "ConfigMap")), "does not exist"),
    "example not in the ConfigMap": (delete_in(lambda o: find(o, "ConfigMap")["data"],
                                               "GRAVAC_EXAMPLE"), "$(GRAVAC_EXAMPLE)"),
    "example not installed": (lambda o: find(o, "ConfigMap")["data"].update(
        GRAVAC_EXAMPLE="train_mnist.py"), "not one of the installed examples"),
    "data-plane range differs": (lambda o: [e.update(value="31000-31063") for e in sidecar(o)[
        "env"] if e["name"] == "GRAVAC_DATA_PORT_RANGE"], "data plane"),
    "data-plane range unset": (lambda o: sidecar(o).update(env=[
        e for e in sidecar(o)["env"] if e["name"] != "GRAVAC_DATA_PORT_RANGE"]), "data plane"),
    "no policy for gRPC": (lambda o: find(o, "NetworkPolicy", "gravac-controller")["spec"][
        "ingress"][0]["ports"][0].update(port=7461), "gRPC"),
    "no policy for metrics": (lambda o: find(o, "NetworkPolicy", "gravac-workers")["spec"][
        "ingress"].pop(1), "metrics"),
    "PodMonitor on a missing port": (lambda o: monitor(o, "gravacd")["spec"][
        "podMetricsEndpoints"][0].update(port="metric"), "no container port"),
    "PodMonitor job name": (lambda o: monitor(o, "gravac-controller")["spec"][
        "podMetricsEndpoints"][0]["relabelings"][0].update(replacement="controller"),
        "dashboard expects"),
    "PodMonitor selects nothing": (lambda o: monitor(o, "gravacd")["spec"]["selector"][
        "matchLabels"].update({"app.kubernetes.io/component": "daemon"}), "selects 0"),
    # mutual TLS
    "plain text": (lambda o: find(o, "ConfigMap")["data"].update(
        GRAVAC_INSECURE_PLAINTEXT="true"), "plain text"),
    "key outside the Secret": (lambda o: find(o, "ConfigMap")["data"].update(
        GRAVAC_TLS_KEY="/tmp/tls.key"), "GRAVAC_TLS_KEY '/tmp/tls.key' is not in a mounted Secret"),
    "Secret nobody issues": (lambda o: [v["secret"].update(secretName="gravac-tls") for v in
                                        pod_spec(workers_of(o))["volumes"] if "secret" in v],
                             "issued by no Certificate"),
    "controller certificate misnamed": (lambda o: find(o, "Certificate", "gravac-controller-tls")[
        "spec"].update(dnsNames=["gravac-ctl"]), "GRAVAC_TLS_SERVER_NAME"),
    "worker certificate lacks a node": (lambda o: find(o, "Certificate", "gravac-worker-tls")[
        "spec"].update(dnsNames=["gravac-node-0"]), "does not name node 'gravac-node-1'"),
    "certificate from another issuer": (lambda o: find(o, "Certificate", "gravac-worker-tls")[
        "spec"]["issuerRef"].update(name="letsencrypt"), "issuer letsencrypt"),
    "certificate signed by the bootstrap": (lambda o: find(o, "Certificate", "gravac-worker-tls")[
        "spec"]["issuerRef"].update(name="gravac-selfsigned"), "not signed by the job's CA"),
    # the documented scrape config
    "pods without part-of": (lambda o: template_labels(workers_of(o)).pop(
        "app.kubernetes.io/part-of"), "drops the worker pods"),
    "scrape annotation on the wrong port": (lambda o: workers_of(o)["spec"]["template"][
        "metadata"]["annotations"].update({"prometheus.io/port": "9470"}), "metrics port"),
    "component renamed": (lambda o: [x["spec"]["template"]["metadata"]["labels"].update(
        {"app.kubernetes.io/component": "ctl"}) for x in workloads(o)
        if template_labels(x)["app.kubernetes.io/component"] == "controller"] and
        find(o, "Service")["spec"]["selector"].update({"app.kubernetes.io/component": "ctl"}),
        "expected one controller workload"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_check_reports_a_broken_copy(rendered, case):
    mutate, expected = BROKEN[case]
    broken = copy.deepcopy(rendered["monitoring"])
    mutate(broken)
    problems = all_problems(broken)
    assert any(expected in p for p in problems), (expected, problems)


def test_names_break_without_the_name_references(tmp_path):
    """The prefix check fails on a copy of deploy/kubernetes without name-references.yaml."""
    kubernetes = tmp_path / "kubernetes"
    shutil.copytree(KUBERNETES, kubernetes)
    (kubernetes / "base" / "name-references.yaml").write_text("nameReference: []\n")
    objects = prefixed_overlay(tmp_path, str(kubernetes))
    problems = consistency_problems(objects)
    assert any("GRAVAC_CONTROLLER 'gravac-controller:7460' is not the Service "
               "team-a-gravac-controller:7460" in p for p in problems), problems
    assert any("anti-affinity names job 'gravac-train-digits'" in p for p in problems), problems
