#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang, -fsanitize=fuzzer,address,undefined, in
# a build directory of their own, and runs each for a bounded time from the checked-in seed
# corpus (tests/fuzz/corpus/<target>/; new inputs go to the build directory, not the checkout).
#   scripts/fuzz.sh [SECONDS_PER_TARGET (60)] [TARGET...]
#   GRAVAC_FUZZ_BUILD=DIR (default build-fuzz/), GRAVAC_JOBS=N (build parallelism)
#   scripts/fuzz.sh --seeds     rewrites the binary seeds from the real encoders (make_seeds.cc)
# Prints one line per target: "fuzz: TARGET: E execs in S s (R execs/s), corpus C, crashes K".
# A crash, leak, UB report or timeout leaves the input in DIR/artifacts/TARGET/ and fails the
# script (reproduce: DIR/tests/fuzz/TARGET DIR/artifacts/TARGET/crash-...).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GRAVAC_FUZZ_BUILD:-$root/build-fuzz}"
all_targets=(wire_format_fuzz ipc_frames_fuzz job_convert_fuzz settings_fuzz)

export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGRAVAC_WITH_CUDA=OFF -DGRAVAC_BUILD_TESTS=OFF -DGRAVAC_BUILD_BENCH=OFF \
  -DGRAVAC_BUILD_FUZZ=ON >/dev/null
cmake --build "$build" -j "${GRAVAC_JOBS:-$(nproc)}" --target "${all_targets[@]}" gravac-fuzz-seeds

if [ "${1:-}" = "--seeds" ]; then
  "$build/tests/fuzz/gravac-fuzz-seeds" "$root/tests/fuzz/corpus"
  echo "fuzz: seeds written to tests/fuzz/corpus/"
  exit 0
fi
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

failed=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$work" "$artifacts"
  log="$build/$t.log"
  set +e
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" "$root/tests/fuzz/corpus/$t" \
    >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(find "$work" -type f | wc -l)
  crashes=$(find "$artifacts" -type f | wc -l)
  echo "fuzz: $t: ${execs:-?} execs in $seconds s (${rate:-?} execs/s), corpus $corpus," \
    "crashes $crashes"
  if [ $rc -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    echo "fuzz: $t failed (rc $rc); its log: $log" >&2
    grep -E "ERROR|runtime error|SUMMARY|Test unit written" "$log" | head -20 >&2 || true
  fi
done
exit $failed
