#!/usr/bin/env bash
# Installs the Debian 12 packages gravac builds and tests with (list: docs/ARCHITECTURE.md,
# ../shared/DESIGN.md). Idempotent: runs `apt-get update` at most once and installs only the
# packages that are missing, then the npm tools of tests/deploy (tests/deploy/tools/install.sh).
# Needs root (or sudo). GRAVAC_DEPS=build: only what compiling needs (deploy/Dockerfile).
set -euo pipefail

# What compiling the programs, libgravac and the Python package needs (tests and benchmarks off):
# GRAVAC_DEPS=build installs only these (deploy/Dockerfile's build stage).
build_packages=(
  build-essential cmake ninja-build pkg-config ccache
  libabsl-dev
  libxxhash-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libucx-dev
  prometheus-cpp-dev
  pybind11-dev python3-dev
)
packages=(
  "${build_packages[@]}" git ucx-utils
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-pytest python3-torch python3-sklearn python3-matplotlib python3-yaml
  # examples/python/train_fashion.py and examples/python/horovod/: Fashion-MNIST's idx files and
  # torchvision's models
  dataset-fashion-mnist python3-torchvision
  # Debian torch falls back to the reference BLAS without it (a 128x2048x1024 matmul: 0.9 s vs 0.05 s)
  libopenblas0-pthread
  iproute2 iperf3
  # runner_ssh_netns_test: an sshd per emulated node, reached by gravacrun -H over ssh
  openssh-server openssh-client
  prometheus
  libopenmpi-dev openmpi-bin
  # scripts/fuzz.sh and scripts/sanitize.sh: clang with its sanitizer and libFuzzer runtimes
  clang libclang-rt-14-dev libfuzzer-14-dev
)
deploy_tools="${GRAVAC_DEPLOY_TOOLS:-1}"
if [ "${GRAVAC_DEPS:-all}" = build ]; then
  packages=("${build_packages[@]}")
  deploy_tools=0
fi
# tests/deploy: node and npm run the offline Kubernetes schema validators (tools/install.sh, run
# at the end). GRAVAC_DEPLOY_TOOLS=0 skips them.
if [ "$deploy_tools" = 1 ] && ! command -v npm >/dev/null; then packages+=(nodejs npm); fi
# tests/deploy/test_container.py (ctest -C container): builds and runs the real image. Opt in with
# GRAVAC_WITH_CONTAINERS=1 (../shared/CONTAINERS.md has the recipe these serve).
if [ "${GRAVAC_WITH_CONTAINERS:-0}" = 1 ]; then
  packages+=(podman buildah mmdebstrap runc uidmap containernetworking-plugins
             golang-github-containers-common fuse-overlayfs)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  if [ "$deploy_tools" = 1 ]; then bash "$root/tests/deploy/tools/install.sh"; fi
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [ "$deploy_tools" = 1 ]; then bash "$root/tests/deploy/tools/install.sh"; fi
