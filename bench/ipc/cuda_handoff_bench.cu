// gravac-cuda-handoff-bench: the device-buffer handoff worker -> gravacd -> worker over CUDA IPC
// (core/ipc/cuda_ipc.h), against a device-to-device copy of the same bytes and against host
// staging (device -> host -> device copies, what a host-only path costs at least).
//
// Two processes (forked before CUDA starts) on one device. Per size, the worker allocates a
// float32 buffer, exports it, and each round trip: records its IPC event on its stream, sends the
// export over a Unix socket; the daemon side maps it through a DeviceMappingCache (opened once
// per allocation), makes its stream wait on the worker's event, adds 1 to every element in place
// (a full read + write of the buffer, as writing a result back), records its own event and
// replies; the worker's stream waits on that event and the worker synchronises. Reported per
// size: round-trip p50 / p99 (host wall clock), a cudaMemcpyAsync device-to-device copy's p50 and
// the ratio, host staging p50 (cudaMemcpy D2H into pageable memory and back), the first mapping's
// time, and cudaIpcOpenMemHandle calls (1 per allocation when the cache works). Every element is
// checked at the end (#wrong must be 0, else exit 1); exit 77 without a usable device.
//
//   gravac-cuda-handoff-bench [--sizes_mb 4,16,64] [--iters 50] [--json FILE]
#include <cuda_runtime_api.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/cuda/cuda_status.h"
#include "core/ipc/cuda_ipc.h"
#include "core/status.h"

namespace gravac::ipc {
namespace {

constexpr int kSkipped = 77;

struct Message {
  int32_t kind = 0;  // 0 exit, 1 handoff
  DeviceBufferExport buffer;
};

struct Reply {
  int32_t ok = 0;
  double map_us = 0;
  int64_t opens = 0;
  char error[256] = {};
};

__global__ void AddOne(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] += 1.0f;
  }
}

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The daemon side: maps, orders, writes in place, replies. Returns the process exit status.
int Daemon(int fd) {
  if (cudaSetDevice(0) != cudaSuccess) return 2;
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return 2;
  absl::StatusOr<IpcEvent> done = IpcEvent::Create(0);
  if (!done.ok() || !WriteAll(fd, done->handle(), kCudaIpcHandleBytes)) return 2;
  uint8_t worker_handle[kCudaIpcHandleBytes];
  if (!ReadAll(fd, worker_handle, sizeof(worker_handle))) return 2;
  absl::StatusOr<IpcEvent> ready = IpcEvent::Open(worker_handle, 0);
  if (!ready.ok()) return 2;
  DeviceMappingCache cache;
  Message m;
  while (ReadAll(fd, &m, sizeof(m)) && m.kind == 1) {
    Reply reply;
    double t0 = NowUs();
    absl::StatusOr<void*> p = cache.Map(/*worker=*/0, m.buffer);
    reply.map_us = NowUs() - t0;
    absl::Status s = [&]() -> absl::Status {
      RETURN_IF_ERROR(p.status());
      RETURN_IF_ERROR(ready->StreamWait(stream));
      int64_t n = static_cast<int64_t>(m.buffer.bytes / sizeof(float));
      AddOne<<<1024, 512, 0, stream>>>(static_cast<float*>(*p), n);
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return done->Record(stream);
    }();
    reply.ok = s.ok();
    reply.opens = cache.opens();
    std::snprintf(reply.error, sizeof(reply.error), "%s", std::string(s.message()).c_str());
    if (!WriteAll(fd, &reply, sizeof(reply))) return 2;
  }
  cudaStreamSynchronize(stream);
  return 0;
}

struct Row {
  uint64_t bytes = 0;
  double p50 = 0, p99 = 0, d2d_p50 = 0, staging_p50 = 0, first_map_us = 0;
  int64_t opens = 0, wrong = 0;
};

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

absl::Status Worker(int fd, const std::vector<uint64_t>& sizes, int iters, std::vector<Row>* rows) {
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  cudaStream_t stream;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ASSIGN_OR_RETURN(IpcEvent ready, IpcEvent::Create(0));
  uint8_t daemon_handle[kCudaIpcHandleBytes];
  if (!ReadAll(fd, daemon_handle, sizeof(daemon_handle)) ||
      !WriteAll(fd, ready.handle(), kCudaIpcHandleBytes)) {
    return absl::UnavailableError("the daemon process went away at start");
  }
  ASSIGN_OR_RETURN(IpcEvent done, IpcEvent::Open(daemon_handle, 0));
  const int warmup = 3;
  for (uint64_t bytes : sizes) {
    Row row;
    row.bytes = bytes;
    float* buf = nullptr;
    float* copy = nullptr;
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(&buf, bytes));
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(&copy, bytes));
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemset(buf, 0, bytes));
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    std::vector<char> host(bytes);
    std::vector<double> ipc_us, d2d_us, staging_us;
    for (int i = 0; i < warmup + iters; ++i) {
      // Handoff round trip.
      double t0 = NowUs();
      Message m;
      m.kind = 1;
      ASSIGN_OR_RETURN(m.buffer, ExportDeviceBuffer(buf, bytes, 0));
      RETURN_IF_ERROR(ready.Record(stream));
      Reply reply;
      if (!WriteAll(fd, &m, sizeof(m)) || !ReadAll(fd, &reply, sizeof(reply))) {
        return absl::UnavailableError("the daemon process went away");
      }
      if (!reply.ok) return absl::InternalError(absl::StrCat("daemon side: ", reply.error));
      RETURN_IF_ERROR(done.StreamWait(stream));
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      double t1 = NowUs();
      if (i == 0) row.first_map_us = reply.map_us;
      row.opens = reply.opens;
      // Device-to-device copy of the same bytes.
      GRAVAC_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(copy, buf, bytes, cudaMemcpyDeviceToDevice, stream));
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      double t2 = NowUs();
      // Host staging: device -> pageable host -> device (into the copy, leaving buf alone).
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpy(host.data(), copy, bytes, cudaMemcpyDeviceToHost));
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpy(copy, host.data(), bytes, cudaMemcpyHostToDevice));
      double t3 = NowUs();
      if (i >= warmup) {
        ipc_us.push_back(t1 - t0);
        d2d_us.push_back(t2 - t1);
        staging_us.push_back(t3 - t2);
      }
    }
    std::vector<float> result(bytes / sizeof(float));
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpy(result.data(), buf, bytes, cudaMemcpyDeviceToHost));
    const float expected = static_cast<float>(warmup + iters);
    for (float v : result) row.wrong += v != expected;
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaFree(buf));
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaFree(copy));
    row.p50 = Percentile(ipc_us, 0.5);
    row.p99 = Percentile(ipc_us, 0.99);
    row.d2d_p50 = Percentile(d2d_us, 0.5);
    row.staging_p50 = Percentile(staging_us, 0.5);
    rows->push_back(row);
  }
  Message bye;
  WriteAll(fd, &bye, sizeof(bye));
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  std::vector<uint64_t> sizes = {4u << 20, 16u << 20, 64u << 20};
  int iters = 50;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: %s [--sizes_mb 4,16,64] [--iters 50] [--json FILE]\n", argv[0]);
      return 2;
    }
    if (a == "--sizes_mb") {
      sizes.clear();
      for (absl::string_view s : absl::StrSplit(argv[++i], ',')) {
        sizes.push_back(std::strtoull(std::string(s).c_str(), nullptr, 10) << 20);
      }
    } else if (a == "--iters") {
      iters = std::atoi(argv[++i]);
    } else if (a == "--json") {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "%s: unknown flag %s\n", argv[0], a.c_str());
      return 2;
    }
  }
  if (iters < 1 || sizes.empty() ||
      std::any_of(sizes.begin(), sizes.end(), [](uint64_t b) { return b == 0; })) {
    std::fprintf(stderr, "%s: --iters must be >= 1 and every size >= 1 MB\n", argv[0]);
    return 2;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
  pid_t pid = fork();  // before any CUDA call: CUDA does not survive fork
  if (pid == 0) {
    close(sv[0]);
    _exit(Daemon(sv[1]));
  }
  close(sv[1]);
  if (!CudaIpcAvailable()) {
    close(sv[0]);
    waitpid(pid, nullptr, 0);
    std::fprintf(stderr, "%s: skipped, no usable CUDA device\n", argv[0]);
    return kSkipped;
  }
  std::vector<Row> rows;
  absl::Status s = Worker(sv[0], sizes, iters, &rows);
  close(sv[0]);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], s.ToString().c_str());
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device %s, %d round trips per size (worker -> daemon -> worker over CUDA IPC)\n",
              prop.name, iters);
  std::printf("%10s %10s %10s %10s %9s %12s %12s %6s %7s\n", "MB", "ipc_p50us", "ipc_p99us",
              "d2d_p50us", "ipc/d2d", "staging_p50", "first_map_us", "opens", "#wrong");
  std::string out = absl::StrFormat("{\"device\": \"%s\", \"iters\": %d, \"rows\": [", prop.name,
                                    iters);
  int64_t wrong = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    wrong += r.wrong;
    std::printf("%10.0f %10.1f %10.1f %10.1f %9.2f %12.1f %12.1f %6lld %7lld\n",
                static_cast<double>(r.bytes) / (1 << 20), r.p50, r.p99, r.d2d_p50,
                r.p50 / r.d2d_p50, r.staging_p50, r.first_map_us,
                static_cast<long long>(r.opens), static_cast<long long>(r.wrong));
    out += absl::StrFormat(
        "%s{\"bytes\": %d, \"ipc_p50_us\": %.2f, \"ipc_p99_us\": %.2f, \"d2d_p50_us\": %.2f, "
        "\"ipc_over_d2d\": %.3f, \"staging_p50_us\": %.2f, \"first_map_us\": %.2f, "
        "\"opens\": %d, \"wrong\": %d}",
        i ? ", " : "", r.bytes, r.p50, r.p99, r.d2d_p50, r.p50 / r.d2d_p50, r.staging_p50,
        r.first_map_us, r.opens, r.wrong);
  }
  out += "]}\n";
  if (!json.empty()) {
    std::FILE* f = std::fopen(json.c_str(), "w");
    if (f == nullptr || std::fputs(out.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::fprintf(stderr, "%s: cannot write %s\n", argv[0], json.c_str());
      return 1;
    }
  }
  if (wrong != 0 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    std::fprintf(stderr, "%s: %lld wrong elements, daemon side exit status %d\n", argv[0],
                 static_cast<long long>(wrong), WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gravac::ipc

int main(int argc, char** argv) { return gravac::ipc::Main(argc, argv); }
