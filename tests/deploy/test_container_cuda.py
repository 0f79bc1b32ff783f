"""deploy/Dockerfile.cuda's image, built and checked here (CTest deploy_container_cuda,
`ctest -C container`).

Builds the GPU overlay's image (the tag deploy/kubernetes/overlays/gpu names) with Debian's
podman from a debian:12 base that mmdebstrap makes from this machine's apt sources, the CUDA
toolkit with NCCL given as the build context `cuda` (GRAVAC_CUDA_TOOLKIT, default the folder
/usr/local/cuda points to), then checks the image:
  - it runs as uid 10001 and holds no compiler (no gcc, nvcc, ptxas, ... nor their packages) and
    of the toolkit only the CUDA libraries gravac's programs and libraries link;
  - every program and library under /usr/local resolves all its shared libraries inside the
    image (ldd), gravacd and libgravac.so the CUDA runtime and NCCL from /usr/local/cuda/lib64;
  - gravacd reports the CUDA kernels and the nccl transport built (`gravacd --help`);
  - a short job runs from the image on the CPU (no GPU here): gravacrun in one container
    (--network none) starts the controller, gravacd and 2 workers training the digits example
    with the CUDA-built libgravac and gravacd, their tensors in host memory.
Prints the image's size and build time.

Slow (the image compiles gravac with nvcc: see deploy/README.md for the time measured here) and
root only: labelled container;slow and run only in CTest's `container` configuration. Skipped
where podman, runc, mmdebstrap or the CUDA toolkit with NCCL is missing.

Environment: GRAVAC_SOURCE_DIR; GRAVAC_CUDA_TOOLKIT; GRAVAC_CONTAINER_DIR keeps the storage
(overlay driver: base image, layers, ccache's build cache) there between runs instead of a fresh
folder removed after; GRAVAC_CONTAINER_PREBUILT=1 checks the image already in that storage
instead of building it.
"""

import glob
import os
import re
import sys
import time

import pytest

SOURCE_DIR = os.environ["GRAVAC_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "deploy"))
from containers import check_runtime_only, ensure_base_image, podman_session, run_args  # noqa: E402
from manifests import find, render_overlay  # noqa: E402

OBJECTS = render_overlay("gpu")
TOOLKIT = os.path.realpath(os.environ.get("GRAVAC_CUDA_TOOLKIT", "/usr/local/cuda"))
BUILD_TIMEOUT_S = 5400
JOB_TIMEOUT_S = 600


def overlay_image():
    """The one image every container of the GPU overlay runs."""
    images = set()
    for kind in ("Deployment", "Job"):
        spec = find(OBJECTS, kind)["spec"]["template"]["spec"]
        images |= {c["image"] for c in spec.get("initContainers", []) + spec["containers"]}
    assert len(images) == 1, images
    return images.pop()


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    if not os.access(os.path.join(TOOLKIT, "bin", "nvcc"), os.X_OK) or not glob.glob(
            os.path.join(TOOLKIT, "lib*", "libnccl.so*")):
        pytest.skip("no CUDA toolkit with NCCL at %s (GRAVAC_CUDA_TOOLKIT)" % TOOLKIT)
    yield from podman_session(tmp_path_factory, driver="overlay")


@pytest.fixture(scope="module")
def image(podman):
    name = overlay_image()
    assert name.endswith("-cuda"), name
    if os.environ.get("GRAVAC_CONTAINER_PREBUILT") == "1" and podman.has_image(name):
        print("\nimage %s: built before this run (GRAVAC_CONTAINER_PREBUILT=1), %.0f MiB"
              % (name, int(podman("image", "inspect", "--format", "{{.Size}}", name).stdout)
                 / 2**20))
        return name
    ensure_base_image(podman)
    start = time.monotonic()
    done = podman("build", "--pull=never", "--network", "host", "--isolation", "chroot",
                  "--build-context", "cuda=" + TOOLKIT,
                  "-f", os.path.join(SOURCE_DIR, "deploy", "Dockerfile.cuda"), "-t", name,
                  SOURCE_DIR, timeout=BUILD_TIMEOUT_S, check=False)
    seconds = time.monotonic() - start
    assert done.returncode == 0, (done.stdout + done.stderr)[-8000:]
    size = int(podman("image", "inspect", "--format", "{{.Size}}", name).stdout)
    print("\nimage %s: %.0f MiB, built in %.0f s" % (name, size / 2**20, seconds))
    return name


def run(podman, image, script, timeout=600):
    return podman(*(run_args(podman) + [image, "sh", "-c", script]), timeout=timeout)


def test_the_image_holds_no_compiler_and_only_the_cuda_libraries_gravac_links(podman, image):
    packages = check_runtime_only(podman, image)
    assert not [p for p in packages if p.startswith(("cuda-", "libnccl"))], packages
    listing = run(podman, image, "find /usr/local/cuda | sort").stdout.split()
    libs = sorted(os.path.basename(p) for p in listing if p.startswith("/usr/local/cuda/lib64/"))
    assert sorted(listing) == sorted(["/usr/local/cuda", "/usr/local/cuda/lib64"] + [
        "/usr/local/cuda/lib64/" + lib for lib in libs]), listing
    assert [lib for lib in libs if lib.startswith("libcudart.so.")], libs
    assert [lib for lib in libs if lib.startswith("libnccl.so.")], libs


def ldd_all(podman, image):
    """{file: ldd's output} for every ELF program and shared library under /usr/local."""
    script = ("for f in /usr/local/bin/* $(find /usr/local/lib -name '*.so*' -type f); do "
              "head -c 4 \"$f\" | grep -q ELF || continue; echo \"== $f\"; ldd \"$f\" 2>&1; done")
    out = run(podman, image, script).stdout
    files = {}
    for chunk in out.split("== ")[1:]:
        name, _, text = chunk.partition("\n")
        files[name] = text
    return files


def test_every_binary_resolves_its_libraries_inside_the_image(podman, image):
    files = ldd_all(podman, image)
    for program in ("gravacd", "gravac-controller", "gravacctl", "gravacrun"):
        assert "/usr/local/bin/" + program in files, sorted(files)
    assert "/usr/local/lib/libgravac.so" in files, sorted(files)
    assert [f for f in files if "/gravac/_gravac" in f], sorted(files)  # the Python extension
    missing = {f: [line for line in text.splitlines() if "not found" in line]
               for f, text in files.items() if "not found" in text}
    assert not missing, missing
    for f in ("/usr/local/bin/gravacd", "/usr/local/lib/libgravac.so"):
        assert re.search(r"libcudart\.so\.\d+ => /usr/local/cuda/lib64/", files[f]), files[f]
    assert re.search(r"libnccl\.so\.\d+ => /usr/local/cuda/lib64/",
                     files["/usr/local/bin/gravacd"]), files["/usr/local/bin/gravacd"]
    # Nothing of the toolkit beyond what they link.
    used = set(re.findall(r"=> /usr/local/cuda/lib64/(\S+)", "".join(files.values())))
    shipped = set(run(podman, image, "ls /usr/local/cuda/lib64").stdout.split())
    assert used == shipped, (used, shipped)


def test_gravacd_reports_the_cuda_kernels_and_nccl_built(podman, image):
    out = run(podman, image, "gravacd --help").stdout
    built = out.strip().splitlines()[-1]
    assert "CUDA kernels built" in built and re.search(r"transports: .*\bnccl\b", built), built
    print("\ngravacd --help: %s" % built)


def test_a_job_runs_from_the_image_on_the_cpu(podman, image):
    """No GPU here: the CUDA-built gravacd and libgravac run a job whose tensors are in host
    memory (the CPU kernels, the local data plane)."""
    start = time.monotonic()
    done = podman(*(run_args(podman) + [
        "--entrypoint", "/usr/local/bin/gravacrun", image, "--np=2", "--nodes=1", "--",
        "/usr/bin/python3", "/usr/local/share/gravac/examples/train_digits.py",
        "--mode", "gravac", "--epochs", "2", "--window", "5", "--eval-steps", "20"]),
        timeout=JOB_TIMEOUT_S, check=False)
    seconds = time.monotonic() - start
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    final = re.search(r"^\[rank 0\] done: mode gravac, final accuracy ([0-9.]+)", out, re.M)
    assert final and float(final.group(1)) >= 0.8, out[-6000:]
    assert re.search(r"^\[rank 0\] epoch .* θ ", out, re.M), out[-6000:]
    print("\ndigits job from %s on the CPU: 2 ranks, 2 epochs, final accuracy %s, %.0f s"
          % (image, final.group(1), seconds))
