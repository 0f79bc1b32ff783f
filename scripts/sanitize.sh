#!/usr/bin/env bash
# Runs unit tests under sanitizers, each kind in a build directory of its own (clang):
#   build-asan/  ASan + UBSan (UB fatal): the units that parse untrusted input or move memory
#   build-tsan/  TSan: the concurrent parts (engine, local reduce / worker server, the device
#                reduce's buffer pool, transports, thread pool)
#   scripts/sanitize.sh [asan|tsan|all (default)]
#   GRAVAC_ASAN_TESTS / GRAVAC_TSAN_TESTS: space-separated test targets instead of the defaults;
#   GRAVAC_JOBS=N: build parallelism.
# The UCX transport's own tests are left out: UCX is not instrumented (its memory hooks and
# threads make ASan and TSan report inside the library); the loopback transport stands in.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-all}"
jobs="${GRAVAC_JOBS:-$(nproc)}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

asan_tests=(${GRAVAC_ASAN_TESTS:-core_ipc_test core_settings_test core_thread_pool_test
  core_background_call_test kernels_wire_format_test kernels_cpu_scatter_add_test
  kernels_cpu_topk_test kernels_cpu_randomk_test kernels_multilevel_test
  kernels_ef_conservation_test daemon_local_test daemon_device_reduce_test engine_test
  engine_negotiation_test engine_compress_test collectives_reduce_test transport_loopback_test
  client_test controller_coordinator_test})
tsan_tests=(${GRAVAC_TSAN_TESTS:-core_mutex_test core_thread_pool_test core_background_call_test
  daemon_local_test daemon_device_reduce_test engine_test transport_loopback_test
  collectives_reduce_test})

# run_kind DIR SANITIZE TESTS...: configure, build the test targets, run them with CTest.
run_kind() {
  local dir="$1" sanitize="$2"
  shift 2
  CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGRAVAC_WITH_CUDA=OFF -DGRAVAC_BUILD_BENCH=OFF -DGRAVAC_SANITIZE="$sanitize" >/dev/null
  cmake --build "$dir" -j "$jobs" --target "$@"
  local regex
  regex="^($(IFS='|'; echo "$*"))\\."
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions="$root/scripts/tsan.supp" \
    ctest --test-dir "$dir" -R "$regex" -LE 'netns|gpu|slow|bench' --output-on-failure \
      --timeout 600 -j "$jobs"
}

status=0
if [ "$what" = asan ] || [ "$what" = all ]; then
  run_kind "$root/build-asan" "address,undefined" "${asan_tests[@]}" || status=1
fi
if [ "$what" = tsan ] || [ "$what" = all ]; then
  run_kind "$root/build-tsan" "thread" "${tsan_tests[@]}" || status=1
fi
exit $status
