#!/usr/bin/env bash
# Quick start, from a fresh Debian 12 machine (as root): installs the Debian packages, builds
# gravac, and runs the main demonstration. Idempotent.
#
# Until the daemon/controller land (the running-system issue), the demonstration is the
# compressor benchmark: every compressor at k/n = 0.1%, 1%, 10% on 16M floats, in memcpy units,
# against torch.topk on the same machine in the same run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/install_deps.sh"
bash "$root/scripts/build.sh" "$root/build"
"$root/build/bench/gravac-compressor-bench" --elements "${GRAVAC_DEMO_ELEMENTS:-16777216}" \
  --reps 3 --json "$root/build/compressor_bench.json"
