"""Podman on this machine for the container tests (test_container.py, test_container_cuda.py):
the recipe of ../shared/CONTAINERS.md. Storage in a folder of the test's (GRAVAC_CONTAINER_DIR
keeps it between runs), containers under the caller's memory cgroup and the host's rlimits, a
debian:12 base image made by mmdebstrap from this machine's apt sources."""

import os
import re
import shutil
import subprocess

import pytest


class Podman:
    """podman with its storage, run root and temporary files (buildah's build cache mounts)
    under `folder`, on the storage `driver` (vfs: copies every layer; overlay: shares them)."""

    def __init__(self, folder, driver="vfs"):
        self.folder = folder
        self.base = ["podman", "--root", os.path.join(folder, "storage"), "--runroot",
                     os.path.join(folder, "runroot"), "--storage-driver", driver,
                     "--cgroup-manager", "cgroupfs", "--events-backend", "file"]
        self.env = dict(os.environ, TMPDIR=os.path.join(folder, "tmp"))
        os.makedirs(self.env["TMPDIR"], exist_ok=True)
        memory = [line.split(":", 2)[2] for line in open("/proc/self/cgroup").read().splitlines()
                  if line.split(":", 2)[1] == "memory"]
        self.cgroup_parent = (memory[0] if memory else "") + "/gravac-container-test"

    def __call__(self, *args, timeout=600, check=True, **kwargs):
        kwargs.setdefault("env", self.env)
        done = subprocess.run(self.base + list(args), capture_output=True, text=True,
                              timeout=timeout, **kwargs)
        if check:
            assert done.returncode == 0, "podman %s: %s%s" % (args[0], done.stdout, done.stderr)
        return done

    def has_image(self, name):
        return self("image", "exists", name, check=False).returncode == 0


def apt_sources():
    """This machine's apt sources for bookworm as one-line `deb` entries."""
    lines = []
    for path in ["/etc/apt/sources.list"] + sorted(
            os.path.join("/etc/apt/sources.list.d", f) for f in os.listdir("/etc/apt/sources.list.d")):
        if not os.path.isfile(path):
            continue
        text = open(path).read()
        if path.endswith(".sources"):
            for block in text.strip().split("\n\n"):
                fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
                if "deb" not in fields.get("Types", "").split():
                    continue
                for uri in fields["URIs"].split():
                    for suite in fields["Suites"].split():
                        lines.append("deb %s %s %s" % (uri, suite, fields["Components"]))
        elif path.endswith(".list"):
            lines += [line for line in text.splitlines() if line.startswith("deb ")]
    lines = [line for line in lines if re.search(r"\sbookworm(-updates|-security)?\s", line)]
    assert lines, "no bookworm apt sources on this machine"
    return "\n".join(lines) + "\n"


def podman_session(tmp_path_factory, driver="vfs"):
    """A Podman in its own storage (the test module's fixture yields from this); skips where
    root, podman, runc or mmdebstrap is missing; removes what it made unless kept."""
    if os.geteuid() != 0:
        pytest.skip("podman with network namespaces needs root")
    for tool in ("podman", "runc", "mmdebstrap"):
        if shutil.which(tool) is None:
            pytest.skip("%s is missing (GRAVAC_WITH_CONTAINERS=1 scripts/install_deps.sh)" % tool)
    keep = os.environ.get("GRAVAC_CONTAINER_DIR")
    folder = keep or str(tmp_path_factory.mktemp("containers"))
    os.makedirs(folder, exist_ok=True)
    p = Podman(folder, driver)
    try:
        yield p
    finally:
        if not keep:
            p("rm", "--all", "--force", check=False)
            p("rmi", "--all", "--force", check=False, timeout=600)
            subprocess.run(["rm", "-rf", folder], timeout=600)
        cgroup = "/sys/fs/cgroup/memory" + p.cgroup_parent
        if os.path.isdir(cgroup):
            for sub in sorted((os.path.join(d) for d, _, _ in os.walk(cgroup)), reverse=True):
                try:
                    os.rmdir(sub)
                except OSError:
                    pass


def ensure_base_image(podman):
    """debian:12 in the storage, made from this machine's apt sources when missing."""
    if podman.has_image("debian:12"):
        return
    sources = os.path.join(podman.folder, "sources.list")
    with open(sources, "w") as f:
        f.write(apt_sources())
    rootfs = os.path.join(podman.folder, "rootfs.tar")
    done = subprocess.run(["mmdebstrap", "--variant=minbase", "bookworm", rootfs, sources],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    podman("import", rootfs, "debian:12")
    os.unlink(rootfs)


def run_args(podman):
    """`podman run` options every test container gets: runc, no network, our cgroup, rlimits."""
    return ["run", "--rm", "--runtime", "runc", "--network", "none",
            "--cgroup-parent", podman.cgroup_parent, "--ulimit", "nofile=20000:20000",
            "--ulimit", "nproc=4096:4096"]


COMPILERS = ("gcc", "cc", "g++", "c++", "cpp", "clang", "clang++", "gfortran", "as", "ld",
             "nvcc", "ptxas", "fatbinary", "nvlink", "cicc")
COMPILER_PACKAGE = re.compile(r"^(gcc|g\+\+|cpp|clang|llvm|binutils|gfortran)(-\d+)?$|"
                              r"^(libgcc|libstdc\+\+)-\d+-dev$|^python3-pythran$|^cuda-nvcc")


def check_runtime_only(podman, image):
    """The image runs as uid 10001 and holds no build tools, -dev packages or compilers: neither
    a compiler's package nor a compiler command (gcc, cc, g++, nvcc, ...) on its PATH, in
    /usr/bin or in /usr/local/cuda/bin. Returns its packages."""
    script = ("id -u; echo compilers:; for c in %s; do command -v $c; ls /usr/bin/$c "
              "/usr/local/cuda/bin/$c 2>/dev/null; done; echo packages:; "
              "dpkg-query -W -f='${Package}\\n'" % " ".join(COMPILERS))
    done = podman(*(run_args(podman) + [image, "sh", "-c", script]))
    uid, rest = done.stdout.split("\ncompilers:\n", 1)
    compilers, packages = rest.split("packages:\n", 1)
    packages = packages.split()
    assert uid == "10001"
    assert compilers.split() == [], compilers
    assert not [p for p in packages if p.endswith("-dev") or COMPILER_PACKAGE.match(p) or p in (
        "build-essential", "cmake", "ninja-build", "ccache")], packages
    return packages
