#!/usr/bin/env bash
# Quick start, from a fresh Debian 12 machine (as root): installs the Debian packages, builds
# gravac, and runs the main job: a data-parallel training job of 2 nodes x 2 workers under
# gravacrun (examples/cpp/train_linear.cc on the C API), each node in its own network namespace
# behind an emulated 1 Gbit/s link. The controller prints every GraVAC decision (θ in force, the
# candidate, the search phase, the compression gains); rank 0 prints loss, accuracy and the θ
# each step used; the job ends with a summary (θ chosen, bytes saved, step time). Idempotent.
#
#   GRAVAC_DEMO_STEPS   training steps (default 200)
#   GRAVAC_DEMO_LINK    emulated link rate (default 1gbit; empty = no namespaces, loopback)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/install_deps.sh"
bash "$root/scripts/build.sh" "$root/build"

link="${GRAVAC_DEMO_LINK-1gbit}"
link_args=()
if [ -n "$link" ]; then
  # Namespaces need root and a kernel that allows them; fall back to the loopback otherwise.
  probe="gravac-probe-$$"
  if ip netns add "$probe" 2>/dev/null; then
    ip netns del "$probe"
    link_args=(--link "$link")
  else
    echo "quickstart: network namespaces unavailable; running on the loopback" >&2
  fi
fi
# Short policy windows so the θ search moves within a couple of hundred steps (the defaults,
# W = 25 and 500 steps per candidate, suit real epochs).
exec "$root/build/runner/gravacrun" -np 4 --nodes 2 "${link_args[@]}" \
  --window 10 --eval_steps 25 -- \
  "$root/build/examples/cpp/gravac-example-train" --steps "${GRAVAC_DEMO_STEPS:-200}"
