#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root): installs the Debian packages,
# builds with CUDA when nvcc is present (GPU tests skip without a GPU), runs every test with
# CTest, then configures and builds once more with CUDA switched off so both builds stay green,
# then builds the libFuzzer targets and runs each for 20 s (scripts/fuzz.sh). Idempotent.
# The sanitizer runs (scripts/sanitize.sh) are separate: docs/OPERATIONS.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/install_deps.sh"

bash "$root/scripts/build.sh" "$root/build"
ctest --test-dir "$root/build" --output-on-failure --timeout 600 -j "${GRAVAC_TEST_JOBS:-2}"

# The CPU-only build (as on machines without CUDA): build it and run the tests that do not need
# namespaces or long runs (those ran above on the same CPU code).
GRAVAC_WITH_CUDA=OFF bash "$root/scripts/build.sh" "$root/build-nocuda"
ctest --test-dir "$root/build-nocuda" --output-on-failure --timeout 600 \
  -j "${GRAVAC_TEST_JOBS:-2}" -LE 'netns|bench|gpu|slow'

# Fuzzing (tests/fuzz/, clang + ASan/UBSan in build-fuzz/): every target for a short bounded time
# from the checked-in corpus; a crash fails CI. GRAVAC_FUZZ_SECONDS=0 skips it.
if [ "${GRAVAC_FUZZ_SECONDS:-20}" != 0 ]; then
  bash "$root/scripts/fuzz.sh" "${GRAVAC_FUZZ_SECONDS:-20}"
fi
