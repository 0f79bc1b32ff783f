#!/usr/bin/env bash
# Configures and builds gravac into a build directory (default: build/). Idempotent: an existing
# build directory is reused and only what changed is rebuilt.
#   scripts/build.sh [BUILD_DIR] [extra cmake args...]
# GRAVAC_WITH_CUDA=AUTO|ON|OFF (environment) selects the CUDA kernels; AUTO finds
# /usr/local/cuda/bin/nvcc when present.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift || true
jobs="${GRAVAC_JOBS:-$(nproc)}"
# ccache (installed by install_deps.sh) shares objects between build trees of this checkout (the
# CUDA and the CPU-only build compile most files identically): paths relative to the checkout,
# build directory not hashed.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" \
  -DGRAVAC_WITH_CUDA="${GRAVAC_WITH_CUDA:-AUTO}" "$@"
cmake --build "$build" -j "$jobs"
