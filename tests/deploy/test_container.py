"""deploy/Dockerfile's image, built and run here (CTest deploy_container, `ctest -C container`).

Builds the CPU image with Debian's podman from a debian:12 base that mmdebstrap makes from this
machine's apt sources (../shared/CONTAINERS.md), then runs the CPU overlay's pods from it on a
3-node emulated cluster (gravac-netemu): the controller's container in node 0's network
namespace and, in each of nodes 1 and 2, the Job pod's gravacd sidecar and its workers as two
containers that share the node's namespace and a host folder as the emptyDir. Every container
runs as the pod's security context asks (the pod's uid and gid, all capabilities dropped, no new
privileges, a read-only root filesystem) with its own PID namespace, like containers of a pod.
The digits job must train to the end. Prints the image's size and build time.

Slow (the image compiles gravac: about half an hour on 2 cores) and root only: labelled
container;netns;slow and run only in CTest's `container` configuration. Skipped where podman,
buildah's runtime runc or mmdebstrap is missing (GRAVAC_WITH_CONTAINERS=1
scripts/install_deps.sh installs them).

Environment: GRAVAC_BUILD_DIR, GRAVAC_SOURCE_DIR, GRAVAC_CMAKE; GRAVAC_CONTAINER_DIR keeps the
storage (base image, build cache) there between runs instead of a fresh folder removed after;
GRAVAC_CONTAINER_PREBUILT=1 runs the image already in that storage instead of building it.
"""

import os
import re
import subprocess
import sys
import time
import uuid

import pytest

SOURCE_DIR = os.environ["GRAVAC_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "install"))
from installed import install  # noqa: E402
from manifests import expand, find, issue_certificates, render_overlay  # noqa: E402
from containers import (check_runtime_only, ensure_base_image, podman_session,  # noqa: E402
                        run_args)

OBJECTS = render_overlay("cpu")
CONFIG = find(OBJECTS, "ConfigMap")
CONTROLLER = find(OBJECTS, "Deployment")
SERVICE = find(OBJECTS, "Service")
JOB = find(OBJECTS, "Job")
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
BUILD_TIMEOUT_S = 3600
JOB_TIMEOUT_S = 600


def spec_of(workload):
    return workload["spec"]["template"]["spec"]


def image_of(workload):
    images = {c["image"] for c in spec_of(workload).get("initContainers", []) +
              spec_of(workload)["containers"]}
    assert len(images) == 1, images
    return images.pop()


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    yield from podman_session(tmp_path_factory)


@pytest.fixture(scope="module")
def image(podman):
    """The CPU overlay's image, built from deploy/Dockerfile; prints its size and build time."""
    ensure_base_image(podman)
    name = image_of(JOB)
    assert image_of(CONTROLLER) == name
    if os.environ.get("GRAVAC_CONTAINER_PREBUILT") == "1" and podman.has_image(name):
        print("\nimage %s: built before this run (GRAVAC_CONTAINER_PREBUILT=1)" % name)
        return name
    start = time.monotonic()
    done = podman("build", "--pull=never", "--network", "host", "--isolation", "chroot",
                  "-f", os.path.join(SOURCE_DIR, "deploy", "Dockerfile"), "-t", name, SOURCE_DIR,
                  timeout=BUILD_TIMEOUT_S, check=False)
    seconds = time.monotonic() - start
    assert done.returncode == 0, (done.stdout + done.stderr)[-8000:]
    size = int(podman("image", "inspect", "--format", "{{.Size}}", name).stdout)
    print("\nimage %s: %.0f MiB, built in %.0f s" % (name, size / 2**20, seconds))
    return name


def test_the_image_runs_as_a_non_root_user_with_runtime_packages_only(podman, image):
    """No build tools, -dev packages or compilers (containers.check_runtime_only)."""
    packages = check_runtime_only(podman, image)
    # The digits the example reads without scikit-learn (examples/python/train_digits.py).
    assert "python3-sklearn" not in packages
    podman(*(run_args(podman) + [image, "test", "-s",
                                 "/usr/local/share/gravac/examples/digits.csv.gz"]))


@pytest.fixture
def cluster(image):
    netemu = os.path.join(install_prefix(), "bin", "gravac-netemu")
    done = subprocess.run([netemu, "create", "--nodes=3", "--rate=1e9", "--prefix=gvctr"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    name = re.search(r"^cluster (\S+)", done.stdout, re.M).group(1)
    nodes = sorted((int(i), ns, a) for i, ns, a in re.findall(
        r"^node (\d+) netns (\S+) address (\S+)", done.stdout, re.M))
    try:
        yield [(ns, address) for _, ns, address in nodes]
    finally:
        subprocess.run([netemu, "destroy", name], capture_output=True, timeout=60)


_PREFIX = []


def install_prefix():
    if not _PREFIX:
        import tempfile
        _PREFIX.append(install(tempfile.mkdtemp(prefix="gravac-ctr-prefix-")))
    return _PREFIX[0]


def container_env(c, fields, services):
    env = {}
    for ref in c.get("envFrom", []):
        env.update({k: str(v) for k, v in
                    find(OBJECTS, "ConfigMap", ref["configMapRef"]["name"])["data"].items()})
    for e in c.get("env", []):
        if "value" in e:
            value = str(e["value"])
            for name in re.findall(r"\$\((\w+)\)", value):
                value = value.replace("$(%s)" % name, env[name])
        else:
            value = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        host, sep, port = value.rpartition(":")
        if sep and host in services and port.isdigit():  # the Service's DNS name and port
            value = services[host][int(port)]
        env[e["name"]] = value
    return env


def run_container(podman, workload, c, node, pod, fields, services, folders, log):
    spec = spec_of(workload)
    pod_sc, sc = spec.get("securityContext", {}), c.get("securityContext", {})
    user = "%d:%d" % (sc.get("runAsUser", pod_sc["runAsUser"]),
                      sc.get("runAsGroup", pod_sc["runAsGroup"]))
    args = ["run", "--rm", "--runtime", "runc", "--name", "%s-%s" % (pod, c["name"]),
            "--network", "ns:/run/netns/" + node, "--user", user,
            "--cgroup-parent", podman.cgroup_parent,
            "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096"]
    if sc.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]  # no tmpfs the pod lacks
    if "ALL" in sc.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", "ALL"]
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for mount in c.get("volumeMounts", []):
        # An emptyDir is a host folder of the pod; a Secret volume a folder holding the
        # Secret's files (pod_folders), mounted read-only as the kubelet does.
        kind = set(volumes[mount["name"]]) - {"name"}
        assert kind in ({"emptyDir"}, {"secret"}), volumes[mount["name"]]
        args += ["-v", "%s:%s%s" % (folders[mount["name"]], mount["mountPath"],
                                    ":ro" if kind == {"secret"} or mount.get("readOnly") else "")]
    env = container_env(c, fields, services)
    for key, value in env.items():
        args += ["-e", "%s=%s" % (key, value)]
    argv = [expand(a, env) for a in c["command"] + c.get("args", [])]  # Kubernetes' $(VAR)
    args += ["--entrypoint", argv[0], image_of(workload)] + argv[1:]
    return subprocess.Popen(podman.base + args, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def pod_folders(workload, root, pod, secrets):
    """The pod's emptyDirs: host folders owned by its fsGroup/user; its Secret volumes: the
    Secret's data as files of the fsGroup, in the volume's mode."""
    sc = spec_of(workload).get("securityContext", {})
    group = sc.get("fsGroup", sc["runAsGroup"])
    folders = {}
    for v in spec_of(workload).get("volumes", []):
        path = os.path.join(root, pod, v["name"])
        os.makedirs(path, exist_ok=True)
        os.chown(path, sc["runAsUser"], group)
        os.chmod(path, 0o770)
        for key, data in secrets.get(v.get("secret", {}).get("secretName"), {}).items():
            with open(os.path.join(path, key), "wb") as f:
                f.write(data)
            os.chown(os.path.join(path, key), 0, group)
            os.chmod(os.path.join(path, key), v["secret"].get("defaultMode", 0o644))
        folders[v["name"]] = path
    return folders


def wait_tcp(netns, address, port, timeout_s=60):
    code = "import socket; socket.create_connection((%r, %d), timeout=1).close()" % (address,
                                                                                       port)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", code],
                          capture_output=True).returncode == 0:
            return
        time.sleep(1)
    raise AssertionError("nothing listens on %s:%d in %s" % (address, port, netns))


def test_containers_train_the_digits_job_on_emulated_nodes(podman, image, cluster, tmp_path):
    os.chmod(tmp_path, 0o755)
    (controller_ns, controller_ip) = cluster[0]
    issued = tmp_path / "cert-manager"
    issued.mkdir()
    secrets = issue_certificates(OBJECTS, str(issued))  # what cert-manager writes
    ports = {p["name"]: p["containerPort"] for p in spec_of(CONTROLLER)["containers"][0]["ports"]}
    services = {SERVICE["metadata"]["name"]: {
        p["port"]: "%s:%d" % (controller_ip, ports[p["targetPort"]])
        for p in SERVICE["spec"]["ports"]}}
    logs, procs = {}, []

    def start(workload, c, node_index, pod, fields):
        ns = cluster[node_index][0]
        logs[(pod, c["name"])] = open(os.path.join(tmp_path, "%s-%s.log" % (pod, c["name"])),
                                      "w+")
        proc = run_container(podman, workload, c, ns, pod, fields, services,
                             pod_folders(workload, str(tmp_path), pod, secrets), logs[(pod, c["name"])])
        procs.append(proc)
        return proc

    def log(pod, name):
        with open(os.path.join(tmp_path, "%s-%s.log" % (pod, name))) as f:
            return f.read()

    try:
        start(CONTROLLER, spec_of(CONTROLLER)["containers"][0], 0, "controller", {})
        wait_tcp(cluster[1][0], controller_ip, ports["grpc"])
        workers = []
        job_uid = str(uuid.uuid4())  # the Job's uid: gravac's run id
        for index, node in enumerate((1, 2)):
            pod = "worker-%d" % index
            fields = {"spec.nodeName": "k8s-node-%d" % node, COMPLETION_INDEX: str(index),
                      "status.podIP": cluster[node][1], "metadata.name": pod,
                      # the labels the Job controller sets on its pods: the job's identity
                      "metadata.labels['batch.kubernetes.io/job-name']": JOB["metadata"]["name"],
                      "metadata.labels['batch.kubernetes.io/controller-uid']": job_uid}
            sidecar = spec_of(JOB)["initContainers"][0]
            start(JOB, sidecar, node, pod, fields)
            probe = {p["name"]: p["containerPort"] for p in sidecar["ports"]}[
                (sidecar["startupProbe"].get("httpGet") or sidecar["startupProbe"]["tcpSocket"])["port"]]
            wait_tcp(cluster[node][0], cluster[node][1], probe)
            workers.append(start(JOB, spec_of(JOB)["containers"][0], node, pod, fields))
        for index, proc in enumerate(workers):
            rc = proc.wait(timeout=JOB_TIMEOUT_S)
            assert rc == 0, log("worker-%d" % index, "workers") + log("worker-%d" % index,
                                                                    "gravacd")
        first = log("worker-0", "workers")
        final = re.search(r"^\[rank 0\] done: mode gravac, final accuracy ([0-9.]+)", first, re.M)
        assert final and float(final.group(1)) >= 0.9, first
        assert re.search(r"^\[rank 0\] epoch .* θ ", first, re.M), first
    finally:
        podman("rm", "--all", "--force", "--time", "5", check=False)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        for f in logs.values():
            f.close()
