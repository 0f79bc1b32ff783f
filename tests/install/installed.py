"""An installed copy of the build, for the tests that run gravac from its install prefix alone
(tests/install, tests/deploy). The environment names the build: GRAVAC_BUILD_DIR and GRAVAC_CMAKE
(set by those folders' CMakeLists.txt)."""

import os
import subprocess
import sys

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# Where `cmake --install` puts the Python package (client/python/CMakeLists.txt).
PYTHON_DIR = os.path.join("lib", "python%d.%d" % sys.version_info[:2], "dist-packages")


def install(root):
    """Installs the build into the folder `root`; returns it as a string."""
    cmake = os.environ.get("GRAVAC_CMAKE", "cmake")
    done = subprocess.run([cmake, "--install", os.environ["GRAVAC_BUILD_DIR"], "--prefix",
                           str(root)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(root)


def environment(prefix, with_programs=True):
    """An environment that finds only the system's programs, the prefix's programs (unless
    with_programs is False) and the prefix's Python package."""
    path = SYSTEM_PATH
    if with_programs:
        path = os.path.join(prefix, "bin") + ":" + path
    return {"PATH": path, "PYTHONPATH": os.path.join(prefix, PYTHON_DIR),
            "HOME": os.environ.get("HOME", "/root"), "OMP_NUM_THREADS": "1"}
