"""deploy/: the Kubernetes manifests agree with each other and with the programs, and their
commands, run as processes on an emulated cluster, train a real job.

The manifests are the CPU overlay as `kubectl kustomize deploy/kubernetes/overlays/cpu` renders
it (manifests.py). No Kubernetes runs here. The emulated run plays the kubelet for the subset of
the Pod spec the manifests use (command, args, env with values, $(VAR) references and fieldRefs,
envFrom of ConfigMaps, emptyDir and Secret volumes, a native sidecar started before the main container and
waited for with its startup probe, the Service's name and ports) and fails on anything else, so a
manifest that grows a field this emulation does not understand fails here instead of being run
wrongly:
- every pod runs in a network namespace of its node (gravac-netemu, 1 Gbit/s links, eth0 as in a
  pod): the controller pod on node 0, one Job pod (gravacd sidecar + workers) on each of nodes 1
  and 2;
- the image's /usr/local is a prefix that `cmake --install` of this build filled;
- an emptyDir volume is a folder per pod, which only that pod's containers see; a Secret volume
  is such a folder holding the Secret's data as files, and the Secrets are what cert-manager
  makes of the overlay's Certificates (manifests.issue_certificates, openssl);
- the Service name resolves to the controller pod's address and its port to the target port.
The security context is not emulated (the processes run as the test's user); the container test
(test_container.py) runs the real image as its non-root user.

Environment (tests/deploy/CMakeLists.txt): GRAVAC_BUILD_DIR, GRAVAC_SOURCE_DIR, GRAVAC_CMAKE.
The prefix comes from tests/install/installed.py.
"""

import copy
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

SOURCE_DIR = os.environ["GRAVAC_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "install"))
from installed import environment, install  # noqa: E402
from manifests import (command_line, expand, find, issue_certificates, plain_env,  # noqa: E402
                       render_overlay)

DEPLOY = os.path.join(SOURCE_DIR, "deploy")
BASE = os.path.join(DEPLOY, "kubernetes", "base")
IMAGE_PREFIX = "/usr/local"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
JOB_TIMEOUT_S = 240

# ---------------------------------------------------------------------------------------------
# The manifests

OBJECTS = render_overlay("cpu")
CONFIG = find(OBJECTS, "ConfigMap")
CONTROLLER = find(OBJECTS, "Deployment")
SERVICE = find(OBJECTS, "Service")
JOB = find(OBJECTS, "Job")


def containers(workload):
    spec = workload["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def container(workload, name=None):
    found = [c for c in containers(workload) if name is None or c["name"] == name]
    assert len(found) == 1, (workload["metadata"]["name"], name)
    return found[0]


def gravacd():
    return container(JOB, "gravacd")


def workers():
    return container(JOB, "workers")


def port_of(c, name):
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    assert name in ports, "container %s has no port %r" % (c["name"], name)
    return ports[name]


def address_port(value):
    host, _, port = value.rpartition(":")
    return host, int(port)


def project_version():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        return re.search(r"project\(gravac VERSION ([0-9.]+)", f.read()).group(1)


# ---------------------------------------------------------------------------------------------
# Static checks


def test_the_base_lists_every_manifest_and_the_overlays_tag_the_projects_version():
    import yaml
    with open(os.path.join(BASE, "kustomization.yaml")) as f:
        kustomization = yaml.safe_load(f)
    files = sorted(f for f in os.listdir(BASE) if f.endswith(".yaml") and f not in (
        "kustomization.yaml", *kustomization["configurations"]))
    assert sorted(kustomization["resources"]) == files
    for workload in (CONTROLLER, JOB):
        for c in containers(workload):
            assert c["image"] == "gravac:" + project_version(), c["image"]
    for c in containers(find(render_overlay("gpu"), "Job")):
        assert c["image"] == "gravac:%s-cuda" % project_version(), c["image"]


def test_the_service_selects_the_controller_and_reaches_its_ports():
    labels = CONTROLLER["spec"]["template"]["metadata"]["labels"]
    assert SERVICE["spec"]["selector"].items() <= labels.items()
    assert CONTROLLER["spec"]["selector"]["matchLabels"].items() <= labels.items()
    c = container(CONTROLLER)
    for port in SERVICE["spec"]["ports"]:
        port_of(c, port["targetPort"])
    env = plain_env(c)
    assert address_port(env["GRAVAC_CONTROLLER_LISTEN"])[1] == port_of(c, "grpc")
    assert address_port(env["GRAVAC_CONTROLLER_METRICS_ADDRESS"])[1] == port_of(c, "metrics")
    # Ready once the gRPC port listens (the kubelet's grpc probe cannot speak mutual TLS).
    assert port_of(c, c["readinessProbe"]["tcpSocket"]["port"]) == port_of(c, "grpc")


def test_prometheus_annotations_name_the_ports_the_processes_serve_metrics_on():
    for workload, c, variable in (
            (CONTROLLER, container(CONTROLLER), "GRAVAC_CONTROLLER_METRICS_ADDRESS"),
            (JOB, gravacd(), "GRAVAC_METRICS_ADDRESS")):
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        served = address_port(plain_env(c)[variable])[1]
        assert annotations["prometheus.io/scrape"] == "true"
        assert int(annotations["prometheus.io/port"]) == served == port_of(c, "metrics")


def service_address():
    grpc = [p for p in SERVICE["spec"]["ports"] if p["name"] == "grpc"]
    assert len(grpc) == 1
    return "%s:%d" % (SERVICE["metadata"]["name"], grpc[0]["port"])


def test_daemons_and_workers_name_the_controller_service():
    assert plain_env(gravacd())["GRAVAC_CONTROLLER"] == service_address()
    assert plain_env(workers())["GRAVAC_CONTROLLER"] == service_address()


def socket_volume(c):
    sock = plain_env(c)["GRAVAC_DAEMON_SOCKET"]
    volumes = {v["name"]: v for v in JOB["spec"]["template"]["spec"]["volumes"]}
    for mount in c["volumeMounts"]:
        if os.path.dirname(sock) == mount["mountPath"].rstrip("/"):
            return volumes[mount["name"]], sock
    raise AssertionError("%s: the socket %s is in no mounted volume" % (c["name"], sock))


def test_workers_find_their_pods_gravacd_socket():
    """gravacd is a native sidecar: an init container that keeps running, started first and
    waited for by its startup probe; the socket is in an emptyDir both containers mount."""
    sidecar = gravacd()
    spec = JOB["spec"]["template"]["spec"]
    assert spec["initContainers"] == [sidecar]
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    volume, sock = socket_volume(sidecar)
    assert (volume, sock) == socket_volume(workers())
    assert set(volume) == {"name", "emptyDir"}
    for c in (sidecar, workers()):
        refs = [r["configMapRef"]["name"] for r in c["envFrom"]]
        assert refs == [CONFIG["metadata"]["name"]], c["name"]
    # Neither container needs the host's IPC or network namespace: memfd segments cross the
    # socket.
    assert not spec.get("hostIPC") and not spec.get("hostNetwork")


def test_the_job_runs_one_pod_per_node_of_the_config():
    nodes = int(CONFIG["data"]["GRAVAC_NODES"])
    spec = JOB["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == nodes
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    term = spec["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {
        "batch.kubernetes.io/job-name": JOB["metadata"]["name"]}
    # gravacrun --node: this node's ranks of --np over --nodes, the node index from the pod's
    # completion index, no controller or daemon of its own.
    command = workers()["command"]
    assert command[0] == IMAGE_PREFIX + "/bin/gravacrun"
    flags = dict(a[2:].split("=", 1) for a in command[1:command.index("--")])
    local_size = int(CONFIG["data"]["GRAVAC_LOCAL_SIZE"])
    assert flags == {"np": str(nodes * local_size), "nodes": str(nodes)}
    node_env = [e for e in workers()["env"] if e["name"] == "GRAVACRUN_NODE"]
    assert node_env[0]["valueFrom"]["fieldRef"]["fieldPath"] == COMPLETION_INDEX


def image_path(path, prefix):
    assert path.startswith(IMAGE_PREFIX + "/"), path
    return os.path.join(prefix, path[len(IMAGE_PREFIX) + 1:])


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    return install(tmp_path_factory.mktemp("image"))


def test_every_program_the_manifests_run_is_in_the_image(prefix):
    for workload in (CONTROLLER, JOB):
        for c in containers(workload):
            for arg in command_line(c, OBJECTS):
                if arg.startswith(IMAGE_PREFIX + "/"):
                    assert os.path.isfile(image_path(arg, prefix)), arg


@pytest.mark.parametrize("example", ["train_digits.py", "train_fashion.py"])
def test_the_controller_runs_the_policy_the_training_script_expects(prefix, example):
    """The ConfigMap's GraVAC settings equal the flags the script asks its job to run with,
    whichever example its GRAVAC_EXAMPLE selects."""
    objects = copy.deepcopy(OBJECTS)
    find(objects, "ConfigMap")["data"]["GRAVAC_EXAMPLE"] = example
    argv = command_line(container(find(objects, "Job"), "workers"), objects)
    script = image_path(argv[argv.index("--") + 2], prefix)
    assert os.path.basename(script) == example
    assert os.path.isfile(script), script
    done = subprocess.run([sys.executable, script] + argv[argv.index("--") + 3:] +
                          ["--print-gravacrun-args"],
                          env=environment(prefix), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    flags = done.stdout.split()
    assert flags and len(flags) % 2 == 0, done.stdout
    for flag, value in zip(flags[0::2], flags[1::2]):
        variable = "GRAVAC_" + flag.lstrip("-").upper()
        assert variable in CONFIG["data"], "the ConfigMap does not set %s (%s)" % (variable, flag)
        configured = CONFIG["data"][variable]
        try:
            assert float(configured) == float(value), (variable, configured, value)
        except ValueError:
            assert configured == value, (variable, configured, value)


def dockerfile(name):
    with open(os.path.join(DEPLOY, name)) as f:
        text = f.read().replace("\\\n", " ")
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    return text, stages


def runtime_packages(stage):
    packages = set()
    for command in re.findall(r"apt-get install ([^&]*)", stage):
        packages |= {w for w in command.split() if not w.startswith("-")}
    return packages


DOCKERFILES = ("Dockerfile", "Dockerfile.cuda")
# In every Debian image (Priority: required), so not named in the Dockerfiles.
ESSENTIAL = {"libc6", "libgcc-s1", "libstdc++6"}


@pytest.mark.parametrize("name", DOCKERFILES)
def test_the_dockerfiles_build_in_one_stage_and_ship_another_as_a_non_root_user(name):
    text, stages = dockerfile(name)
    assert re.search(r"^ARG BASE=debian:12$", text, re.M)
    builds = [s for s in stages if s.split("\n", 1)[0].endswith(" AS build")]
    final = stages[-1]
    assert len(builds) == 1 and builds[0] is not final
    build = builds[0]
    assert "COPY scripts/install_deps.sh /src/gravac/scripts/install_deps.sh" in build
    assert "GRAVAC_DEPS=build bash /src/gravac/scripts/install_deps.sh" in build
    # The sources come after the dependencies' layer, and only into the build stage.
    assert build.index("install_deps.sh /src") < build.index("COPY . /src/gravac")
    assert "COPY . " not in final
    for script in re.findall(r"/src/gravac/(scripts/[\w./-]+)", text):
        assert os.path.isfile(os.path.join(SOURCE_DIR, script)), script
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        options = set(re.findall(r"option\((\w+)", f.read()))
    for option in re.findall(r"-D(GRAVAC_\w+)=", text):
        assert option in options, option
    assert "DESTDIR=/staging cmake --install /src/build --prefix " + IMAGE_PREFIX in build
    assert "COPY --from=build /staging%s %s" % (IMAGE_PREFIX, IMAGE_PREFIX) in final
    packages = runtime_packages(final)
    assert not [p for p in packages if p.endswith("-dev") or p in ("build-essential", "cmake")]
    # The image's user is the one the pods run as.
    uid = CONTROLLER["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    gid = CONTROLLER["spec"]["template"]["spec"]["securityContext"]["runAsGroup"]
    assert re.search(r"useradd --uid %d --gid %d " % (uid, gid), final)
    assert re.search(r"^USER %d:%d$" % (uid, gid), final, re.M)
    with open(os.path.join(SOURCE_DIR, ".dockerignore")) as f:
        ignored = f.read().split()
    assert "build*" in ignored and ".git" in ignored
    assert "tests/deploy/tools/node_modules" in ignored


DIGITS_PROBE = """
import hashlib, importlib.util, sys
if sys.argv[2] == "without":
    sys.modules["sklearn"] = None  # import sklearn raises ImportError, as in the image
spec = importlib.util.spec_from_file_location("train_digits", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
parts = module.load_data(7)
print(hashlib.sha256(b"".join(t.numpy().tobytes() for t in parts)).hexdigest(),
      [tuple(t.shape) for t in parts])
"""


def test_train_digits_reads_the_same_digits_without_scikit_learn(prefix, tmp_path):
    """The image has no scikit-learn: the installed train_digits.py then reads digits.csv.gz next
    to it (deploy/Dockerfile copies scikit-learn's file there) and must get the same data; with
    neither, it says what is missing."""
    script = image_path(IMAGE_PREFIX + "/share/gravac/examples/train_digits.py", prefix)
    copy_dir = tmp_path / "examples"
    copy_dir.mkdir()
    shutil.copy(script, copy_dir / "train_digits.py")
    env = environment(prefix)

    def load(mode):
        return subprocess.run([sys.executable, "-c", DIGITS_PROBE, str(copy_dir / "train_digits.py"),
                               mode], capture_output=True, text=True, timeout=120, env=env)

    with_sklearn = load("with")
    if with_sklearn.returncode != 0 and "No module named 'sklearn'" in with_sklearn.stderr:
        pytest.skip("scikit-learn is not installed here to compare with")
    assert with_sklearn.returncode == 0, with_sklearn.stderr
    missing = load("without")
    assert missing.returncode != 0
    assert "neither scikit-learn nor %s" % (copy_dir / "digits.csv.gz") in missing.stderr, \
        missing.stderr
    import sklearn.datasets
    shutil.copy(os.path.join(os.path.dirname(sklearn.datasets.__file__), "data", "digits.csv.gz"),
                copy_dir / "digits.csv.gz")
    without = load("without")
    assert without.returncode == 0, without.stderr
    assert without.stdout == with_sklearn.stdout
    assert "(1437, 64)" in without.stdout


# What a runtime image must not hold: compilers, assemblers and linkers, and what pulls them in.
COMPILER_PACKAGE = re.compile(r"^(gcc|g\+\+|cpp|c\+\+|clang|llvm|binutils|gfortran)(-\d+)?$|"
                              r"^(libgcc|libstdc\+\+)-\d+-dev$|^python3-pythran$|^build-essential$")


def installed_with(packages, folder):
    """Every package that `apt-get install --no-install-recommends packages` installs on an empty
    Debian system (apt's own resolver, simulated with an empty dpkg status)."""
    status = os.path.join(folder, "status")
    open(status, "w").close()
    done = subprocess.run(["apt-get", "install", "-s", "-qq", "--no-install-recommends",
                           "-o", "Dir::State::status=" + status, *sorted(packages)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return set(re.findall(r"^Inst (\S+)", done.stdout, re.M))


def test_the_runtime_stage_pulls_in_no_compiler(tmp_path):
    """The CPU image's runtime packages, with everything they depend on, hold no compiler (as
    python3-sklearn did: scipy -> python3-pythran -> g++); the CUDA image's are the same plus
    nothing (the CUDA runtime and NCCL come from the toolkit). The test containers check the
    built images too."""
    if shutil.which("apt-get") is None or "Candidate: (none)" in subprocess.run(
            ["apt-cache", "policy", "python3-torch"], capture_output=True, text=True).stdout:
        pytest.skip("no apt package lists here to resolve the runtime stage's dependencies")
    _, stages = dockerfile("Dockerfile")
    packages = runtime_packages(stages[-1])
    closure = installed_with(packages, str(tmp_path))
    assert packages <= closure | ESSENTIAL
    assert not sorted(p for p in closure if COMPILER_PACKAGE.match(p)), closure
    # The check sees a compiler that a package pulls in (the image before this check).
    assert "python3-pythran" in installed_with(packages | {"python3-sklearn"}, str(tmp_path))
    # The CUDA image installs the same packages; its CUDA runtime and NCCL are the toolkit's own
    # libraries that the build stage copied out of the build context `cuda`, no package.
    _, cuda_stages = dockerfile("Dockerfile.cuda")
    assert runtime_packages(cuda_stages[-1]) == packages
    build = [st for st in cuda_stages if st.split("\n", 1)[0].endswith(" AS build")][0]
    assert "--mount=type=bind,from=cuda,target=/usr/local/cuda" in build
    assert "COPY --from=build /staging/cuda/lib64 /usr/local/cuda/lib64" in cuda_stages[-1]
    assert "from=cuda" not in cuda_stages[-1]


def test_the_image_has_the_packages_of_every_library_the_programs_link(prefix):
    """The runtime stage's packages hold every shared library that the installed programs,
    libgravac and the Python extension load (ldd of this build, dpkg -S)."""
    _, stages = dockerfile("Dockerfile")
    packages = runtime_packages(stages[-1]) | ESSENTIAL
    binaries = [os.path.join(prefix, "bin", b) for b in os.listdir(os.path.join(prefix, "bin"))]
    binaries += [os.path.join(d, f) for d, _, files in os.walk(os.path.join(prefix, "lib"))
                 for f in files if ".so" in f]
    libraries = set()
    for binary in binaries:
        done = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:  # a script
            continue
        assert "not found" not in done.stdout, (binary, done.stdout)
        libraries |= set(re.findall(r"=> (/\S+)", done.stdout))
    # The CUDA toolkit's libraries (a build with nvcc) come from the toolkit itself in
    # Dockerfile.cuda; the CPU image is built with GRAVAC_WITH_CUDA=OFF and loads none.
    libraries = {lib for lib in libraries if not lib.startswith(prefix)
                 and not os.path.realpath(lib).startswith("/usr/local/cuda")}
    assert libraries
    missing = {}
    for lib in sorted(libraries):
        done = subprocess.run(["dpkg", "-S", os.path.realpath(lib)], capture_output=True,
                              text=True, timeout=30)
        if done.returncode != 0:
            done = subprocess.run(["dpkg", "-S", lib], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, "no Debian package holds %s" % lib
        package = done.stdout.split(":", 1)[0]
        if package not in packages:
            missing[lib] = package
    assert not missing, missing


# ---------------------------------------------------------------------------------------------
# The emulated run


class Kubelet:
    """Starts the manifests' pods as processes in the emulated nodes' namespaces."""

    def __init__(self, prefix, netemu, cluster, addresses, work, secrets):
        self.prefix, self.netemu, self.cluster = prefix, netemu, cluster
        self.addresses, self.work = addresses, work
        self.secrets = secrets  # Secret name -> {file: bytes}
        self.services = {}  # Service name -> {port: target address}
        self.processes = []
        self.job_uid = str(uuid.uuid4())  # the Job's uid: gravac's run id

    def translate(self, value, mounts):
        for mount_path, folder in mounts.items():
            if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
                return folder + value[len(mount_path.rstrip("/")):]
        if value.startswith(IMAGE_PREFIX + "/"):
            return image_path(value, self.prefix)
        host, sep, port = value.rpartition(":")
        if sep and host in self.services and port.isdigit():
            return self.services[host][int(port)]
        return value

    def start_container(self, c, spec, node, pod, index):
        supported = {"name", "image", "imagePullPolicy", "command", "args", "env", "envFrom",
                     "ports", "volumeMounts", "startupProbe", "readinessProbe", "livenessProbe",
                     "resources", "securityContext", "restartPolicy"}
        assert set(c) <= supported, set(c) - supported
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        mounts = {}
        for mount in c.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            assert set(volume) in ({"name", "emptyDir"}, {"name", "secret"}), volume
            folder = os.path.join(self.work, pod, volume["name"])  # one per pod
            os.makedirs(folder, exist_ok=True)
            if "secret" in volume:
                self.materialise(volume["secret"], folder)
            mounts[mount["mountPath"]] = folder
        fields = {"spec.nodeName": "k8s-node-%d" % node, "status.podIP": self.addresses[node],
                  "metadata.name": pod,
                  # the labels the Job controller sets on its pods
                  "metadata.labels['batch.kubernetes.io/job-name']": JOB["metadata"]["name"],
                  "metadata.labels['batch.kubernetes.io/controller-uid']": self.job_uid}
        env = {}  # the container's environment as the manifest gives it
        if index is not None:  # an Indexed Job's pod
            fields[COMPLETION_INDEX] = str(index)
            env["JOB_COMPLETION_INDEX"] = str(index)
        for ref in c.get("envFrom", []):
            config = find(OBJECTS, "ConfigMap", ref["configMapRef"]["name"])
            env.update({k: str(v) for k, v in config["data"].items()})
        for e in c.get("env", []):
            if "value" in e:
                value = str(e["value"])
                for name in re.findall(r"\$\((\w+)\)", value):  # Kubernetes' $(VAR) expansion
                    value = value.replace("$(%s)" % name, env[name])
                env[e["name"]] = value
            else:
                env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        declared = dict(env)  # what $(VAR) in the command and args expands to
        env = {k: self.translate(v, mounts) for k, v in env.items()}
        env = {**environment(self.prefix), **env}  # the image's own PATH and PYTHONPATH
        argv = [self.translate(expand(a, declared), mounts)
                for a in c["command"] + c.get("args", [])]
        name = "%s-%s" % (pod, c["name"])
        log = open(os.path.join(self.work, name + ".log"), "w")
        proc = subprocess.Popen([self.netemu, "run", self.cluster, str(node), "--"] + argv,
                                env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=self.work)
        self.processes.append((name, proc))
        return proc

    def materialise(self, secret, folder):
        """A Secret volume: each key of the Secret's data a file of the volume's mode."""
        assert set(secret) <= {"secretName", "defaultMode"}, secret
        name = secret["secretName"]
        assert name in self.secrets, "Secret %s does not exist: the pod would not start" % name
        for key, data in self.secrets[name].items():
            path = os.path.join(folder, key)
            with open(path, "wb") as f:
                f.write(data)
            os.chmod(path, secret.get("defaultMode", 0o644))

    def start(self, workload, node, pod, index=None):
        """Starts the pod's sidecars, waits for their startup probes, then its containers;
        returns the processes of its main containers and of its sidecars."""
        spec = workload["spec"]["template"]["spec"]
        supported_spec = {"containers", "initContainers", "volumes", "nodeSelector", "affinity",
                          "restartPolicy", "securityContext", "automountServiceAccountToken",
                          "enableServiceLinks"}
        assert set(spec) <= supported_spec, set(spec) - supported_spec
        sidecars = []
        for c in spec.get("initContainers", []):
            assert c.get("restartPolicy") == "Always", "only native sidecars are emulated"
            sidecars.append(self.start_container(c, spec, node, pod, index))
            probe = c["startupProbe"]["httpGet"]
            wait_ready(self, node, "%s:%d" % (self.addresses[node], port_of(c, probe["port"])),
                       path=probe["path"])
        main = [self.start_container(c, spec, node, pod, index) for c in spec["containers"]]
        return main, sidecars

    def log(self, name):
        with open(os.path.join(self.work, name + ".log")) as f:
            return f.read()

    def run_in(self, node, argv, timeout=30):
        done = subprocess.run([self.netemu, "run", self.cluster, str(node), "--"] + argv,
                              capture_output=True, text=True, timeout=timeout)
        return done.returncode, done.stdout + done.stderr

    def run_python_in(self, node, code, timeout=30):
        return self.run_in(node, [sys.executable, "-c", code], timeout)

    def stop_all(self):
        for _, proc in self.processes:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def wait_ready(kubelet, node, address, timeout_s=30, path=None):
    """A tcpSocket probe (a TCP connect to the address from a node), or with `path` an httpGet
    probe (status 200)."""
    host, port = address_port(address)
    code = ("import socket; socket.create_connection((%r, %d), timeout=1).close()"
            % (host, port))
    if path is not None:
        code = ("import urllib.request; assert urllib.request.urlopen('http://%s:%d%s', "
                "timeout=1).status == 200" % (host, port, path))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if kubelet.run_python_in(node, code)[0] == 0:
            return
        time.sleep(0.5)
    raise AssertionError("nothing listens on %s after %d s" % (address, timeout_s))


def listening_ports(kubelet, node):
    rc, out = kubelet.run_in(node, ["ss", "-ltnH"])
    assert rc == 0, out
    return {int(m) for m in re.findall(r"^\S+\s+\d+\s+\d+\s+\S+:(\d+)\s", out, re.M)}


@pytest.fixture
def cluster(prefix):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    netemu = os.path.join(prefix, "bin", "gravac-netemu")
    done = subprocess.run([netemu, "create", "--nodes=3", "--rate=1e9", "--prefix=gvk8s"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    name = re.search(r"^cluster (\S+)", done.stdout, re.M).group(1)
    addresses = [a for _, a in sorted(
        (int(i), a) for i, a in re.findall(r"^node (\d+) netns \S+ address (\S+)", done.stdout,
                                           re.M))]
    try:
        yield netemu, name, addresses
    finally:
        subprocess.run([netemu, "destroy", name], capture_output=True, timeout=60)


def test_emulated_the_manifests_train_the_digits_job_across_two_nodes(prefix, cluster,
                                                                       tmp_path):
    netemu, name, addresses = cluster
    issued = tmp_path / "cert-manager"
    issued.mkdir()
    kubelet = Kubelet(prefix, netemu, name, addresses, str(tmp_path),
                      issue_certificates(OBJECTS, str(issued)))
    controller_env = plain_env(container(CONTROLLER))
    grpc = address_port(controller_env["GRAVAC_CONTROLLER_LISTEN"])[1]
    service_ports = {}
    for port in SERVICE["spec"]["ports"]:
        target = port_of(container(CONTROLLER), port["targetPort"])
        service_ports[port["port"]] = "%s:%d" % (addresses[0], target)
    kubelet.services[SERVICE["metadata"]["name"]] = service_ports
    low, high = map(int, plain_env(gravacd())["GRAVAC_DATA_PORT_RANGE"].split("-"))
    metrics_port = port_of(gravacd(), "metrics")
    try:
        kubelet.start(CONTROLLER, 0, "controller")
        wait_ready(kubelet, 1, "%s:%d" % (addresses[0], grpc))
        pods = [kubelet.start(JOB, n, "worker-%d" % index, index=index)
                for index, n in enumerate((1, 2))]
        # What gravacd listens on while the job runs: its metrics port and the data plane,
        # within the range the NetworkPolicy opens.
        listening = set()
        while pods[0][0][0].poll() is None:
            listening |= listening_ports(kubelet, 1)
            time.sleep(1)
        for index, (main, _) in enumerate(pods):
            rc = main[0].wait(timeout=JOB_TIMEOUT_S)
            assert rc == 0, kubelet.log("worker-%d-workers" % index) + kubelet.log(
                "worker-%d-gravacd" % index)

        first = kubelet.log("worker-0-workers")
        epochs = re.findall(r"^\[rank 0\] epoch +(\d+) .* acc ([0-9.]+) +θ (\S+) .* gain ([0-9.]+)",
                            first, re.M)
        assert len(epochs) >= 5, first  # θ and gain came from the controller over the Service
        final = re.search(r"^\[rank 0\] done: mode gravac, final accuracy ([0-9.]+)", first, re.M)
        assert final and float(final.group(1)) >= 0.9, first
        data_plane = listening - {metrics_port}
        assert data_plane and all(low <= p <= high for p in data_plane), (listening, low, high)

        # The controller's metrics, through the Service's metrics port, from a node.
        metrics = service_ports[[p["port"] for p in SERVICE["spec"]["ports"]
                                 if p["name"] == "metrics"][0]]
        rc, text = kubelet.run_python_in(
            1, "import urllib.request; print(urllib.request.urlopen("
               "'http://%s/metrics', timeout=5).read().decode())" % metrics)
        assert rc == 0, text
        # Every series of the job carries its identity (job_name, run_id: one controller, many jobs).
        job = r'\{job_name="gravac-train-digits",run_id="[^"]+"\}'
        assert re.search(r"^gravac_world_size%s 4$" % job, text, re.M), text
        steps = re.search(r"^gravac_job_steps_total%s (\d+)" % job, text, re.M)
        assert steps and int(steps.group(1)) > 100, text

        # The workers have exited: Kubernetes stops the sidecars (SIGTERM) if they still run.
        for index, (_, sidecars) in enumerate(pods):
            for proc in sidecars:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
                assert proc.wait(timeout=60) == 0, kubelet.log("worker-%d-gravacd" % index)
        # Job index i ran ranks [2i, 2i + 2) as node gravac-node-i, the name its certificate
        # carries; every link to the controller was mutual TLS.
        for index in range(2):
            log = kubelet.log("worker-%d-gravacd" % index)
            assert re.search(r"gravacd\[gravac-node-%d\] .* node %d of 2: ranks \[%d, %d\) of 4"
                             % (index, index, 2 * index, 2 * index + 2), log), log
        controller_log = kubelet.log("controller-controller")
        assert re.search(r"listening on \S+ \(port %d\) over mutual TLS" % grpc, controller_log), \
            controller_log
        for log in ("controller-controller", "worker-0-gravacd", "worker-1-gravacd",
                    "worker-0-workers", "worker-1-workers"):
            assert "INSECURE" not in kubelet.log(log), kubelet.log(log)
    finally:
        kubelet.stop_all()
