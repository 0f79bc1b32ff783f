#!/usr/bin/env bash
# The prepared GPU check (issue 18, item 5). On a machine with one NVIDIA GPU it builds the GPU
# targets with CUDA, runs the gpu-labelled tests (the CUDA kernels and the device compression
# backend against their CPU twins, gravacd's engine compressing device tensors on that backend
# against its CPU path, the CUDA IPC mapping cache across processes, the C API on
# device tensors), the CUDA kernels benchmark (64M fp32; CUDA
# top-k throughput over the device's own device-to-device memcpy throughput at k/n = 1%), the
# same selection with torch.topk on that GPU when a python3 with CUDA torch is on PATH, and the
# CUDA IPC handoff round trip (4-64 MB) against a device-to-device copy, and a real 1-node job of 2
# workers on CUDA tensors (gravacrun, gravacd, gravac-controller, tests/integration/
# cuda_job_worker.cc: C API device tensors handed to gravacd by CUDA IPC, compressed steps,
# replicas compared; the summary says whether gravacd mapped the tensors by IPC, from its log
# lines "CUDA IPC handoff: mapped", or libgravac fell back to host staging), the same job with
# gravacd's engine on NCCL device collectives (--device_collectives=nccl: the local reduce and the
# compression on the device, the step over a 1-rank NCCL communicator, results written into the
# workers' buffers device to device; the summary says whether gravacd's log has "device step: nccl
# collectives on CUDA device N"; skipped, saying why, without a gravacd built with NCCL or a
# libnccl.so.2 for it on the machine), and the same job
# through gravac.torch (tests/python/cuda_torch_job.py: a CUDA model, DistributedOptimizer;
# built mode only, when python3 has a CUDA torch), then writes one JSON summary, gpu_check.json, to $OUT (or --out DIR, default out/gpu_check/). Budget: 8 minutes on 16
# cores (only the needed targets are built; ccache when present).
#
#   scripts/gpu_check.sh [--out DIR]            # on the GPU machine
#   scripts/gpu_check.sh --bundle [DIR]         # on a build machine (no GPU needed)
#
# A GPU machine without gravac's build dependencies (Abseil, ...) cannot build it. For that case
# --bundle builds the same targets here (with CUDA) and packs the executables with the shared
# libraries they need that are not the C/C++ runtime into DIR (default build-gpu-bundle/, an
# ignored path that the device tool can carry); the check then runs the bundle, and the summary
# says "mode": "bundle" (built elsewhere) instead of "build". The NCCL transport test needs two
# GPUs and libnccl, so it is listed as skipped on a one-GPU machine.
#
# NCCL: every target above is built without it (a bundle cannot carry libnccl, 218 MB). The job on
# NCCL device collectives gets a gravacd of its own, built with GRAVAC_WITH_NCCL=ON in a second
# tree (build dir + "-nccl"; gravacd only) as gravacd-nccl, when CMake finds NCCL. A bundle holds
# it without libnccl: on the GPU machine it uses the system's libnccl.so.2, else the one python3's
# packages hold (torch's nvidia NCCL wheel), else that job is skipped, saying so.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

gpu_tests=(kernels_cuda_status_test kernels_cuda_select_test kernels_cuda_error_feedback_test
           kernels_cuda_scatter_add_test kernels_backend_twin_test
           engine_executor_backend_gpu_test core_cuda_ipc_test core_cuda_ipc_map_test
           client_device_test)
benches=(gravac-cuda-kernels-bench gravac-cuda-handoff-bench)
job=(gravacrun gravacd gravac-controller gravac-cuda-job-worker)
targets=("${gpu_tests[@]}" "${benches[@]}" "${job[@]}")
nccl_target=gravacd  # built with NCCL in "<build dir>-nccl", used as gravacd-nccl

export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

configure_and_build() {  # build_dir jobs
  # No nccl transport: its tests need two GPUs, and a carried bundle could not hold libnccl.
  mkdir -p "$1"
  cmake -S "$root" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRAVAC_WITH_CUDA=ON \
    -DGRAVAC_WITH_NCCL=OFF -DGRAVAC_BUILD_BENCH=ON -DGRAVAC_BUILD_TESTS=ON \
    >"$1/gravac-configure.log" 2>&1 || return 1
  cmake --build "$1" -j "$2" --target "${targets[@]}"
}

# gravacd with NCCL in a tree of its own (build_dir-nccl): prints its path when CMake found NCCL
# (the executable needs libnccl), else prints nothing; the configure log says why.
build_nccl_gravacd() {  # build_dir jobs
  local dir="$1-nccl" exe
  mkdir -p "$dir"
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRAVAC_WITH_CUDA=ON \
    -DGRAVAC_WITH_NCCL=ON -DGRAVAC_BUILD_BENCH=ON -DGRAVAC_BUILD_TESTS=ON \
    >"$dir/gravac-configure.log" 2>&1 || return 1
  cmake --build "$dir" -j "$2" --target "$nccl_target" >&2 || return 1
  exe="$(exe_path "$dir" "$nccl_target")"
  if [[ -n "$exe" ]] && ldd "$exe" | grep -q 'libnccl'; then echo "$exe"; fi
}

# Where each target's executable lands in a build tree.
exe_path() {  # build_dir target
  find "$1" -type f -name "$2" -perm -u+x -not -path '*/CMakeFiles/*' | head -1
}

# Copies the shared libraries `exe` needs into `dest`, but the C/C++ runtime, the CUDA driver
# (which the machine has) and libnccl (218 MB: the machine's is used, see the header).
bundle_libs() {  # exe dest
  ldd "$1" | awk '$3 ~ /^\// {print $3}' |
    grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libcuda|libnccl|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -Lu "$lib" "$2/"; done
}

if [[ "${1:-}" == "--bundle" ]]; then
  bundle="${2:-$root/build-gpu-bundle}"
  build="$root/build-gpu-check"
  mkdir -p "$build"
  configure_and_build "$build" "${GRAVAC_JOBS:-2}" || { cat "$build/gravac-configure.log"; exit 1; }
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  for t in "${targets[@]}"; do
    exe="$(exe_path "$build" "$t")"
    [[ -n "$exe" ]] || { echo "gpu_check: target $t was not built" >&2; exit 1; }
    strip --strip-debug -o "$bundle/bin/$t" "$exe"
    # Shared libraries other than the C/C++ runtime and the CUDA driver (which the machine has).
    bundle_libs "$exe" "$bundle/lib"
  done
  # gravacd with NCCL, without libnccl (bundle_libs leaves it out; the GPU machine provides it).
  nccl_exe="$(build_nccl_gravacd "$build" "${GRAVAC_JOBS:-2}")" || {
    cat "$build-nccl/gravac-configure.log"; exit 1; }
  if [[ -n "$nccl_exe" ]]; then
    strip --strip-debug -o "$bundle/bin/gravacd-nccl" "$nccl_exe"
    bundle_libs "$nccl_exe" "$bundle/lib"
  else
    echo "gravac was built without NCCL here (no libnccl or nccl.h found)" >"$bundle/no-nccl"
    echo "gpu_check: no NCCL here: the bundle has no gravacd-nccl" >&2
  fi
  git -C "$root" rev-parse HEAD >"$bundle/commit"
  echo "gpu_check: bundle in $bundle ($(du -sh "$bundle" | cut -f1)), commit $(cat "$bundle/commit")"
  exit 0
fi

dest="${OUT:-$root/out/gpu_check}"
if [[ "${1:-}" == "--out" ]]; then dest="$2"; fi
mkdir -p "$dest"
# Raw outputs go to a work folder; $dest gets gpu_check.json, gpu_check.log and raw.tar.gz.
out="$(mktemp -d /tmp/gravac-gpu-check.XXXXXX)"
log="$dest/gpu_check.log"
: >"$log"
say() { echo "gpu_check: $*" | tee -a "$log"; }
start=$(date +%s)

if ! nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader \
    >"$out/device.txt" 2>>"$log"; then
  say "no NVIDIA GPU here (nvidia-smi failed); nothing to check"
  exit 77
fi
say "device: $(cat "$out/device.txt")"

# Build here when the dependencies are installed, else run the carried bundle.
mode=build
bin_dir="$root/build-gpu-check"
if configure_and_build "$bin_dir" "$(nproc)" >>"$log" 2>&1; then
  for t in "${targets[@]}"; do ln -sf "$(exe_path "$bin_dir" "$t")" "$bin_dir/$t"; done
  rm -f "$bin_dir/gravacd-nccl"
  if nccl_exe="$(build_nccl_gravacd "$bin_dir" "$(nproc)" 2>>"$log")" && [[ -n "$nccl_exe" ]]; then
    ln -sf "$nccl_exe" "$bin_dir/gravacd-nccl"
  else
    echo "gravacd with NCCL did not build here or CMake found no NCCL (see" \
      "$bin_dir-nccl/gravac-configure.log)" >"$out/nccl_job.skip"
  fi
else
  say "cannot build here ($(grep -m1 -E 'Could not find|not found|Error' "$bin_dir/gravac-configure.log" \
    2>/dev/null || echo 'build failed'; true)); using the bundle"
  mode=bundle
  bin_dir="$root/build-gpu-bundle/bin"
  [[ -d "$bin_dir" ]] || { say "no bundle at $bin_dir (make one with --bundle)"; exit 1; }
  export LD_LIBRARY_PATH="$root/build-gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "bundle built at commit $(cat "$root/build-gpu-bundle/commit")"
  if [[ ! -x "$bin_dir/gravacd-nccl" ]]; then
    echo "the bundle has no gravacd-nccl: $(cat "$root/build-gpu-bundle/no-nccl" 2>/dev/null ||
      echo 'made by a script without it')" >"$out/nccl_job.skip"
  fi
fi
build_s=$(( $(date +%s) - start ))
say "$mode ready after ${build_s}s"

# gpu-labelled tests: every gtest binary, with a JSON report each.
for t in "${gpu_tests[@]}"; do
  if timeout 300 "$bin_dir/$t" --gtest_output="json:$out/test_$t.json" >"$out/test_$t.log" 2>&1
  then say "test $t: passed"; else say "test $t: FAILED (exit $?)"; tail -n 30 "$out/test_$t.log" >>"$log"; fi
done

run_json() {  # name timeout command...
  local name=$1 limit=$2
  shift 2
  set +e
  timeout "$limit" "$@" >"$out/$name.out" 2>"$out/$name.err"
  local rc=$?
  set -e
  echo "$rc" >"$out/$name.rc"
  say "$name: exit $rc"
}
run_json kernels_bench 240 "$bin_dir/gravac-cuda-kernels-bench" --json "$out/kernels_bench.json"
run_json handoff_bench 120 "$bin_dir/gravac-cuda-handoff-bench" --sizes_mb 4,16,64 --iters 50 \
  --json "$out/handoff_bench.json"
if command -v python3 >/dev/null; then
  run_json torch_topk 120 python3 "$root/bench/torch_topk_cuda.py" --n $((1 << 26)) --density 0.01
else
  echo 77 >"$out/torch_topk.rc"
  say "torch_topk: skipped, no python3"
fi

# A real job: gravacrun starts the controller, gravacd and 2 workers on this GPU.
set +e
(cd "$out" && timeout 240 "$bin_dir/gravacrun" -np 2 -- "$bin_dir/gravac-cuda-job-worker" \
  --steps 20 --count 4194304 >"$out/job.out" 2>"$out/job.err")
echo $? >"$out/job.rc"
set -e
say "job (gravacrun -np 2, CUDA tensors): exit $(cat "$out/job.rc")"
[[ "$(cat "$out/job.rc")" == 0 ]] || tail -n 20 "$out/job.err" "$out/job.out" >>"$log"
# The same as 2 nodes of 1 worker (two gravacd over UCX tcp on this machine): compressed steps.
set +e
(cd "$out" && timeout 240 "$bin_dir/gravacrun" -np 2 --nodes 2 --ucx_tls=tcp -- \
  "$bin_dir/gravac-cuda-job-worker" --steps 20 --count 4194304 >"$out/job2.out" 2>"$out/job2.err")
echo $? >"$out/job2.rc"
set -e
say "job (gravacrun -np 2 --nodes 2, CUDA tensors): exit $(cat "$out/job2.rc")"
[[ "$(cat "$out/job2.rc")" == 0 ]] || tail -n 20 "$out/job2.err" "$out/job2.out" >>"$log"

# The same 1-node job with gravacd's engine on NCCL device collectives (a 1-rank communicator on
# this GPU): the IPC handoff, the local reduce and the compression on the device, the device step
# over NCCL, results written into the workers' buffers device to device. gravacd-nccl needs a
# libnccl.so.2: the system's, else one from python3's packages (appended to LD_LIBRARY_PATH).
nccl_ld="${LD_LIBRARY_PATH:-}"
if [[ ! -f "$out/nccl_job.skip" ]] && ldd "$bin_dir/gravacd-nccl" | grep -q 'libnccl.* not found'; then
  nccl_dir="$(python3 - 2>/dev/null <<'EOF' || true
import glob, os, site, sys
for r in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
    for p in sorted(glob.glob(os.path.join(r, "nvidia", "**", "libnccl.so.2"), recursive=True)):
        print(os.path.dirname(p))
        sys.exit(0)
EOF
)"
  if [[ -n "$nccl_dir" ]]; then
    nccl_ld="${nccl_ld:+$nccl_ld:}$nccl_dir"
    say "nccl job: libnccl.so.2 from $nccl_dir"
  else
    echo "no libnccl.so.2 on this machine for gravacd-nccl (not on the loader's path nor in" \
      "python3's nvidia packages)" >"$out/nccl_job.skip"
  fi
fi
if [[ -f "$out/nccl_job.skip" ]]; then
  echo 77 >"$out/nccl_job.rc"
  say "nccl job: skipped: $(cat "$out/nccl_job.skip")"
else
  set +e
  (cd "$out" && LD_LIBRARY_PATH="$nccl_ld" NCCL_DEBUG="${NCCL_DEBUG:-WARN}" timeout 240 \
    "$bin_dir/gravacrun" -np 2 --gravacd_path "$bin_dir/gravacd-nccl" \
    --daemon_args=--device_collectives=nccl -- "$bin_dir/gravac-cuda-job-worker" --steps 20 \
    --count 4194304 >"$out/nccl_job.out" 2>"$out/nccl_job.err")
  echo $? >"$out/nccl_job.rc"
  set -e
  say "nccl job (gravacrun -np 2, --device_collectives=nccl, CUDA tensors): exit" \
    "$(cat "$out/nccl_job.rc")"
  [[ "$(cat "$out/nccl_job.rc")" == 0 ]] || tail -n 30 "$out/nccl_job.err" "$out/nccl_job.out" >>"$log"
fi

# The same through gravac.torch (build mode only: the bundle carries no Python package).
torch_cuda=0
if [[ "$mode" == build ]] && python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
    >/dev/null 2>&1; then
  if cmake --build "$bin_dir" -j "$(nproc)" --target gravac_python >>"$log" 2>&1; then torch_cuda=1; fi
fi
if [[ "$torch_cuda" == 1 ]]; then
  set +e
  (cd "$out" && PYTHONPATH="$bin_dir/client/python" timeout 240 "$bin_dir/gravacrun" -np 2 -- \
    python3 "$root/tests/python/cuda_torch_job.py" >"$out/torch_job.out" 2>"$out/torch_job.err")
  echo $? >"$out/torch_job.rc"
  set -e
  say "torch job (gravacrun -np 2, gravac.torch on CUDA tensors): exit $(cat "$out/torch_job.rc")"
  [[ "$(cat "$out/torch_job.rc")" == 0 ]] || tail -n 20 "$out/torch_job.err" "$out/torch_job.out" >>"$log"
else
  echo 77 >"$out/torch_job.rc"
  say "torch job: skipped (bundle mode, no CUDA torch for python3, or gravac_python did not build)"
fi

total_s=$(( $(date +%s) - start ))
set +e
python3 - "$out" "$mode" "$build_s" "$total_s" "${gpu_tests[*]}" <<'EOF' | tee -a "$log"
import datetime, json, os, re, sys
out, mode, build_s, total_s, tests = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split()
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def rc(name):
    try:
        return int(open(os.path.join(out, name + ".rc")).read())
    except (OSError, ValueError):
        return None
s = {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
     "device": open(os.path.join(out, "device.txt")).read().strip(), "mode": mode,
     "build_s": build_s, "total_s": total_s, "tests": {}}
for t in tests:
    r = load("test_%s.json" % t)
    if r is None:
        s["tests"][t] = {"status": "did not run or crashed (see test_%s.log)" % t}
        continue
    cases = [c for suite in r.get("testsuites", []) for c in suite.get("testsuite", [])]
    skipped = [c["name"] for c in cases if c.get("result") == "SKIPPED"]
    failed = [c["name"] for c in cases if c.get("failures")]
    messages = [f["failure"][:400] for c in cases for f in c.get("failures", [])][:5]
    s["tests"][t] = {"cases": len(cases), "passed": len(cases) - len(failed) - len(skipped),
                     "failed": failed, "skipped": len(skipped), "skipped_names": skipped[:20],
                     "failure_messages": messages}
s["tests"]["transport_nccl_test"] = {"status": "skipped: needs two GPUs (this machine has one)"}
k = load("kernels_bench.json")
s["kernels_bench"] = {"exit": rc("kernels_bench"), "result": k}
if k:
    rows = k["rows"]
    memcpy = next(r for r in rows if r["kernel"] == "memcpy_d2d")
    topk = next((r for r in rows if r["kernel"] == "topk" and abs(r["ratio"] - 0.01) < 1e-9), None)
    if topk:
        s["cuda_topk_1pct_over_memcpy"] = round(memcpy["median_ms"] / topk["median_ms"], 4)
        s["cuda_topk_1pct_ms"] = topk["median_ms"]
        s["memcpy_d2d_ms"] = memcpy["median_ms"]
t = None
if rc("torch_topk") == 0:
    t = json.loads(open(os.path.join(out, "torch_topk.out")).read())
s["torch_topk"] = t if t else {"status": "skipped or failed (exit %s): %s" % (rc("torch_topk"),
    open(os.path.join(out, "torch_topk.err")).read().strip()[-300:] if os.path.exists(os.path.join(out, "torch_topk.err")) else "")}
if t and "cuda_topk_1pct_ms" in s:
    s["torch_topk_ms_over_gravac_topk_ms"] = round(t["topk_ms"] / s["cuda_topk_1pct_ms"], 4)
s["handoff_bench"] = {"exit": rc("handoff_bench"), "result": load("handoff_bench.json")}
def job(name):
    path = os.path.join(out, name + ".out")
    lines = [l for l in open(path, errors="replace").read().splitlines()
             if "cuda_job rank" in l] if os.path.exists(path) else []
    sums = {l.split("checksum ")[-1] for l in lines if ": ok " in l}
    logs = []
    for suffix in (".out", ".err"):
        p = os.path.join(out, name + suffix)
        if os.path.exists(p):
            logs += open(p, errors="replace").read().splitlines()
    mapped = [l for l in logs if "CUDA IPC handoff: mapped" in l]
    staged = [l for l in logs if "staged through host memory" in l]
    gpu_compression = [l for l in logs if "GPU compression: CUDA device" in l]
    # gravacd's engine: the collectives chosen at the job's start, and "device step: ..." once
    # when its first group ran over device collectives (executor_device.cc, SayDeviceStep).
    chosen = [l for l in logs if re.search(r"device collectives: \w+ \(", l)]
    device_step = [l for l in logs if "device step: " in l]
    err = os.path.join(out, name + ".err")
    final = [l for l in open(err, errors="replace").read().splitlines()
             if "final:" in l] if os.path.exists(err) else []
    return {"exit": rc(name), "ranks_ok": sum(": ok " in l for l in lines), "lines": lines,
            "controller_final": final,
            "replicas_identical": len(sums) == 1 and len(lines) == 2,
            "ipc_mappings": len(mapped), "ipc_mapping_lines": mapped[:4],
            "staged_lines": staged[:4],
            "ipc_handoff": len(mapped) >= 2 and not staged,
            "gpu_compression_lines": gpu_compression[:4],
            "device_collectives_lines": chosen[:4],
            "device_step_lines": device_step[:4],
            "path": ("CUDA IPC handoff (gravacd maps the workers' device buffers; an fp32 "
                     "allreduce of one device's buffers is summed on that device)"
                     if mapped and not staged
                     else "host staging by libgravac (see staged_lines)")
                    + ("; gravacd compresses them on the GPU (CUDA backend, residuals in device "
                       "memory)" if gpu_compression else "; gravacd compresses with its CPU kernels")}
s["job_2_workers_gpu"] = job("job")
s["job_2_nodes_gpu"] = job("job2")
if rc("nccl_job") == 77 and os.path.exists(os.path.join(out, "nccl_job.skip")):
    s["job_2_workers_gpu_nccl"] = {"exit": 77, "status": "skipped: " +
                                   open(os.path.join(out, "nccl_job.skip")).read().strip()}
else:
    s["job_2_workers_gpu_nccl"] = job("nccl_job")
    ran = any("device step: nccl" in l for l in s["job_2_workers_gpu_nccl"]["device_step_lines"])
    s["job_2_workers_gpu_nccl"]["device_step_ran"] = ran
    if ran:
        s["job_2_workers_gpu_nccl"]["path"] += (
            "; gravacd's engine ran its step over NCCL device collectives (results handed back "
            "in device memory)")
nccl_job = s["job_2_workers_gpu_nccl"]
nccl_job["note"] = ("gravacd --device_collectives=nccl (1 node: a 1-rank NCCL communicator); "
                    "decides ok when it ran: exit 0, replicas identical, the device step in "
                    "gravacd's log")
torch_lines = []
if os.path.exists(os.path.join(out, "torch_job.out")):
    torch_lines = [l for l in open(os.path.join(out, "torch_job.out"), errors="replace").read().splitlines()
                   if "torch_cuda_job rank" in l]
s["torch_job_2_workers_gpu"] = {"exit": rc("torch_job"), "lines": torch_lines,
                                "replicas_identical": sum(": ok " in l for l in torch_lines) == 2,
                                "note": "77 = skipped (see gpu_check.log); does not decide ok"}
ok = (all(not v.get("failed") and "status" not in v for n, v in s["tests"].items() if n != "transport_nccl_test")
      and rc("kernels_bench") == 0 and rc("handoff_bench") == 0 and rc("job") == 0
      and s["job_2_workers_gpu"]["replicas_identical"]
      and s["job_2_workers_gpu"]["ipc_handoff"]
      and ("status" in nccl_job or (nccl_job["exit"] == 0 and nccl_job["replicas_identical"]
                                    and nccl_job["device_step_ran"])))
s["ok"] = ok
with open(os.path.join(out, "gpu_check.json"), "w") as f:
    json.dump(s, f, indent=1)
brief = {k: v for k, v in s.items() if k not in ("kernels_bench", "handoff_bench")}
brief["tests"] = {n: {k: v for k, v in t.items() if k not in ("skipped_names", "failure_messages") or t.get("failed")} for n, t in s["tests"].items()}
brief["handoff_rows"] = (s["handoff_bench"]["result"] or {}).get("rows")
print(json.dumps(brief, indent=1))
# The 2-node job is reported but does not decide "ok" (it depends on UCX on the machine).
sys.exit(0 if ok else 1)
EOF
rc=${PIPESTATUS[0]}
cp "$out/gpu_check.json" "$dest/" 2>/dev/null
tar -czf "$dest/raw.tar.gz" -C "$out" . 2>/dev/null
rm -rf "$out"
exit "$rc"
