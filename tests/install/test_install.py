"""`cmake --install` of the build, then real jobs run only from the installed prefix.

The environment (set by tests/install/CMakeLists.txt): GRAVAC_BUILD_DIR (the build tree),
GRAVAC_CMAKE (its cmake), GRAVAC_SOURCE_DIR. Every job runs with PATH limited to the system's
folders and from a working directory outside the source and build trees, so nothing but the
prefix can supply gravac's programs, library or Python package.
"""

import os
import subprocess
import sys

import pytest

from installed import PYTHON_DIR, SYSTEM_PATH, environment, install

SOURCE_DIR = os.environ["GRAVAC_SOURCE_DIR"]
JOB_TIMEOUT_S = 120

PROGRAMS = ["gravacrun", "gravacd", "gravac-controller", "gravacctl", "gravac-netemu"]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    return install(tmp_path_factory.mktemp("prefix"))


def run_job(prefix, cwd, np, nodes, command, extra_env=None):
    env = environment(prefix, with_programs=False)
    env.update(extra_env or {})
    args = [os.path.join(prefix, "bin", "gravacrun"), "-np", str(np), "--nodes", str(nodes),
            "--metrics", "off", "--"] + command
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=JOB_TIMEOUT_S)
    return done.returncode, done.stdout + done.stderr


def test_the_prefix_holds_programs_library_headers_package_and_data(prefix):
    for program in PROGRAMS:
        path = os.path.join(prefix, "bin", program)
        assert os.access(path, os.X_OK), program
        done = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30,
                              env={"PATH": SYSTEM_PATH})
        assert done.returncode == 0 and "usage" in done.stdout, program + ": " + done.stderr
    for rel in ["lib/libgravac.so", "include/gravac/gravac.h", "include/gravac/gravac.hpp",
                PYTHON_DIR + "/gravac/__init__.py", PYTHON_DIR + "/gravac/torch/optimizer.py",
                "share/gravac/examples/train_digits.py", "share/gravac/examples/train_fashion.py",
                "share/gravac/examples/fashion_mnist.py", "share/gravac/dashboards/gravac.json",
                "share/gravac/dashboards/rules.yml"]:
        assert os.path.isfile(os.path.join(prefix, rel)), rel


def test_the_installed_gravacrun_runs_a_torch_job_on_the_installed_package(prefix, tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "job.py"
    script.write_text(
        "import torch, gravac, gravac.torch as hvd\n"
        "hvd.init()\n"
        "out = hvd.allreduce(torch.full((5,), float(hvd.rank() + 1)), op=hvd.Sum, name='x')\n"
        "print('package', gravac.__file__)\n"
        "print('sum', out.tolist())\n"
        "hvd.shutdown()\n")
    rc, output = run_job(prefix, str(tmp_path), 4, 2, [sys.executable, str(script)])
    assert rc == 0, output
    packages = [line.split("package ", 1)[1] for line in output.splitlines()
                if "] package " in line]
    assert len(packages) == 4, output
    for path in packages:
        assert path.startswith(os.path.join(prefix, PYTHON_DIR)), path
    sums = [line for line in output.splitlines() if "] sum " in line]
    assert len(sums) == 4 and all(line.endswith("sum [10.0, 10.0, 10.0, 10.0, 10.0]")
                                  for line in sums), output


def test_a_c_program_builds_against_the_installed_header_and_library(prefix, tmp_path):
    worker = str(tmp_path / "c_worker")
    compiled = subprocess.run(
        ["cc", "-std=c11", "-Wall", "-Werror", "-I" + os.path.join(prefix, "include"),
         os.path.join(SOURCE_DIR, "tests", "client", "c_worker.c"), "-o", worker,
         "-L" + os.path.join(prefix, "lib"), "-lgravac",
         "-Wl,-rpath," + os.path.join(prefix, "lib")],
        capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr
    libs = subprocess.run(["ldd", worker], capture_output=True, text=True).stdout
    assert os.path.join(prefix, "lib", "libgravac.so") in libs, libs
    rc, output = run_job(prefix, str(tmp_path), 2, 2, [worker, "allreduce"])
    assert rc == 0, output
