#!/usr/bin/env bash
# Installs the Debian 12 packages gravac builds and tests with (list: docs/ARCHITECTURE.md,
# ../shared/DESIGN.md). Idempotent: runs `apt-get update` at most once and installs only the
# packages that are missing. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libabsl-dev
  libxxhash-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libucx-dev ucx-utils
  prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-dev python3-pytest python3-torch python3-sklearn python3-matplotlib python3-yaml
  # examples/python/train_fashion.py and examples/python/horovod/: Fashion-MNIST's idx files and
  # torchvision's models
  dataset-fashion-mnist python3-torchvision
  # Debian torch falls back to the reference BLAS without it (a 128x2048x1024 matmul: 0.9 s vs 0.05 s)
  libopenblas0-pthread
  iproute2 iperf3
  prometheus
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
