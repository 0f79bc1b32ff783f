// gravac-cuda-kernels-bench: time of each CUDA kernel of kernels/cuda/ on one tensor (64M fp32
// normal values by default) at k/n = 0.1%, 1%, 10%, and its effective bandwidth (the bytes the
// kernel must move at least / time) as a fraction of the device's peak memory bandwidth
// (2 x memory clock x bus width, from cudaDeviceGetAttribute). Times are cudaEvent medians over
// --reps runs after warm-up. A device-to-device memcpy of the tensor is measured in the same run
// as the practical ceiling.
//
//   gravac-cuda-kernels-bench [--n N] [--reps R] [--json FILE]
//
// Every result is checked on the host (top-k: exactly k, ascending, nothing dropped above the
// cut and ties by lower index; filter: the exact count; scatter-add and residual: every
// element); the #wrong column counts failures and the exit status is 1 if any. TopK, the filter
// and the count synchronise inside (to read their status), so their time includes one
// device-to-host round trip. Exit status 77 (skipped) when no CUDA device is usable.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "core/cuda/cuda_status.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/error_feedback.h"
#include "kernels/cuda/scatter_add.h"
#include "kernels/cuda/select.h"
#include "kernels/cuda/workspace.h"

namespace gravac::kernels::cuda {
namespace {

constexpr int kSkipped = 77;
constexpr int kWarmup = 3;

struct Options {
  int64_t n = int64_t{1} << 26;
  int reps = 20;
  std::string json;
};

struct Row {
  std::string kernel;
  double ratio = 0;  // k / n; 0 for kernels that do not depend on k
  int64_t k = 0;
  double median_ms = 0;
  double min_ms = 0;
  double bytes = 0;
  int64_t wrong = 0;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return false;
    if (a == "--n") {
      o->n = std::strtoll(argv[++i], nullptr, 10);
    } else if (a == "--reps") {
      o->reps = std::atoi(argv[++i]);
    } else if (a == "--json") {
      o->json = argv[++i];
    } else {
      return false;
    }
  }
  return o->n >= 1000 && o->n <= kMaxElements && o->reps >= 1;
}

// Deterministic N(0, 1) values (xorshift64* + Box-Muller), the same on every run.
std::vector<float> NormalData(int64_t n) {
  std::vector<float> x(n);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  auto next = [&s]() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return (s * 0x2545f4914f6cdd1dull >> 11) * (1.0 / 9007199254740992.0);
  };
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = std::max(next(), 1e-300), u2 = next();
    double r = std::sqrt(-2.0 * std::log(u1));
    x[i] = static_cast<float>(r * std::cos(6.283185307179586 * u2));
    if (i + 1 < n) x[i + 1] = static_cast<float>(r * std::sin(6.283185307179586 * u2));
  }
  return x;
}

// Median and minimum of `reps` timed runs of `body` on `stream`, after warm-up.
absl::Status Time(cudaStream_t stream, int reps, const std::function<absl::Status()>& body,
                  double* median_ms, double* min_ms) {
  cudaEvent_t start, stop;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  std::vector<double> ms;
  absl::Status status;
  for (int r = 0; r < kWarmup + reps && status.ok(); ++r) {
    cudaEventRecord(start, stream);
    status.Update(body());
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float elapsed = 0;
    cudaEventElapsedTime(&elapsed, start, stop);
    if (r >= kWarmup) ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!status.ok()) return status;
  std::sort(ms.begin(), ms.end());
  *median_ms = ms[ms.size() / 2];
  *min_ms = ms.front();
  return absl::OkStatus();
}

// Exact top-k property on the host: k ascending indices, values copied, every dropped |x| <=
// every kept |x|, and a dropped element equal to the cut only after every kept one at the cut.
int64_t CheckTopK(const std::vector<float>& x, int64_t k, const std::vector<int32_t>& idx,
                  const std::vector<float>& val) {
  int64_t wrong = 0;
  std::vector<uint8_t> kept(x.size(), 0);
  float cut = INFINITY;
  for (int64_t j = 0; j < k; ++j) {
    const bool in_order =
        idx[j] >= 0 && idx[j] < static_cast<int64_t>(x.size()) && (j == 0 || idx[j] > idx[j - 1]);
    if (!in_order) {
      ++wrong;
      continue;
    }
    if (std::memcmp(&x[idx[j]], &val[j], sizeof(float)) != 0) ++wrong;
    kept[idx[j]] = 1;
    cut = std::min(cut, std::fabs(val[j]));
  }
  int64_t last_kept_at_cut = -1;
  for (int64_t j = 0; j < k; ++j) {
    if (std::fabs(val[j]) == cut) last_kept_at_cut = std::max<int64_t>(last_kept_at_cut, idx[j]);
  }
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    if (kept[i]) continue;
    float m = std::fabs(x[i]);
    if (m > cut || (m == cut && i < last_kept_at_cut)) ++wrong;
  }
  return wrong;
}

absl::Status Run(const Options& o, std::vector<Row>* rows, double* peak_gbs, std::string* name) {
  int device = 0;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp prop;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  int clock_khz = 0, bus_bits = 0;
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device));
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  *peak_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // DDR: two transfers per clock
  *name = prop.name;

  const int64_t n = o.n;
  std::vector<float> x = NormalData(n);
  cudaStream_t stream;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  std::unique_ptr<cudaStream_t, void (*)(cudaStream_t*)> stream_guard(
      &stream, [](cudaStream_t* s) { cudaStreamDestroy(*s); });
  auto ws_or = Workspace::Create();
  if (!ws_or.ok()) return ws_or.status();
  Workspace* ws = ws_or->get();
  if (absl::Status s = ws->Reserve(n, stream); !s.ok()) return s;
  auto make = [n](auto tag) { return DeviceBuffer<decltype(tag)>::Create(n); };
  auto input = make(float{}), grad = make(float{}), residual = make(float{}), p = make(float{});
  auto values = make(float{}), out = make(float{}), copy = make(float{});
  auto indices = make(int32_t{});
  for (auto* b : {&input, &grad, &residual, &p, &values, &out, &copy}) {
    if (!b->ok()) return b->status();
  }
  if (!indices.ok()) return indices.status();
  if (absl::Status s = input->Upload(x); !s.ok()) return s;
  if (absl::Status s = grad->Upload(x); !s.ok()) return s;
  if (absl::Status s = residual->Upload(x); !s.ok()) return s;
  const double bytes_n = 4.0 * n;

  Row row{"memcpy_d2d", 0, 0};
  RETURN_IF_ERROR(Time(
      stream, o.reps,
      [&]() -> absl::Status {
        GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(copy->data(), input->data(), bytes_n,
                                                    cudaMemcpyDeviceToDevice, stream));
        return absl::OkStatus();
      },
      &row.median_ms, &row.min_ms));
  row.bytes = 2 * bytes_n;
  rows->push_back(row);

  row = Row{"compensate", 0, 0};
  RETURN_IF_ERROR(Time(
      stream, o.reps,
      [&] { return Compensate(grad->data(), residual->data(), p->data(), n, stream); },
      &row.median_ms, &row.min_ms));
  row.bytes = 3 * bytes_n;
  std::vector<float> host_p(n);
  RETURN_IF_ERROR(p->Download(absl::MakeSpan(host_p)));
  for (int64_t i = 0; i < n; ++i) row.wrong += host_p[i] != x[i] + x[i];
  rows->push_back(row);

  for (double ratio : {0.001, 0.01, 0.1}) {
    const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(n * ratio));
    std::vector<int32_t> idx(k);
    std::vector<float> val(k);

    row = Row{"topk", ratio, k};
    RETURN_IF_ERROR(Time(
        stream, o.reps,
        [&] { return TopK(input->data(), n, k, ws, indices->data(), values->data(), stream); },
        &row.median_ms, &row.min_ms));
    row.bytes = bytes_n + 8.0 * k;
    RETURN_IF_ERROR(indices->Download(absl::MakeSpan(idx)));
    RETURN_IF_ERROR(values->Download(absl::MakeSpan(val)));
    row.wrong = CheckTopK(x, k, idx, val);
    rows->push_back(row);

    float threshold = INFINITY;
    for (float v : val) threshold = std::min(threshold, std::fabs(v));
    int64_t expected = 0;
    for (float v : x) expected += std::fabs(v) >= threshold;
    int64_t count = 0;
    row = Row{"threshold_filter", ratio, k};
    RETURN_IF_ERROR(Time(
        stream, o.reps,
        [&] {
          return ThresholdFilter(input->data(), n, threshold, ws, n, indices->data(), out->data(),
                                 &count, stream);
        },
        &row.median_ms, &row.min_ms));
    row.bytes = bytes_n + 8.0 * count;
    row.wrong = std::abs(count - expected);
    rows->push_back(row);

    row = Row{"count_at_least", ratio, k};
    RETURN_IF_ERROR(Time(
        stream, o.reps,
        [&] { return CountAtLeast(input->data(), n, threshold, ws, &count, stream); },
        &row.median_ms, &row.min_ms));
    row.bytes = bytes_n;
    row.wrong = std::abs(count - expected);
    rows->push_back(row);

    // The top-k indices again, for the sparse kernels below.
    RETURN_IF_ERROR(TopK(input->data(), n, k, ws, indices->data(), values->data(), stream));

    row = Row{"update_residual", ratio, k};
    RETURN_IF_ERROR(Time(
        stream, o.reps,
        [&] {
          return UpdateResidual(input->data(), n, indices->data(), values->data(), k, ws,
                                residual->data(), stream);
        },
        &row.median_ms, &row.min_ms));
    RETURN_IF_ERROR(ws->Synchronize(stream));
    row.bytes = 2 * bytes_n + 16.0 * k;  // e = p, then read idx, value and e[idx], write e[idx]
    std::vector<float> host_e(n);
    RETURN_IF_ERROR(residual->Download(absl::MakeSpan(host_e)));
    std::vector<uint8_t> sent(n, 0);
    for (int32_t i : idx) sent[i] = 1;
    for (int64_t i = 0; i < n; ++i) row.wrong += host_e[i] != (sent[i] ? 0.0f : x[i]);
    rows->push_back(row);

    row = Row{"scatter_add", ratio, k};
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out->data(), 0, bytes_n, stream));
    RETURN_IF_ERROR(
        ScatterAdd(indices->data(), values->data(), k, 1.0f, ws, out->data(), n, stream));
    RETURN_IF_ERROR(ws->Synchronize(stream));
    std::vector<float> host_out(n);
    RETURN_IF_ERROR(out->Download(absl::MakeSpan(host_out)));
    for (int64_t i = 0; i < n; ++i) row.wrong += host_out[i] != (sent[i] ? x[i] : 0.0f);
    RETURN_IF_ERROR(Time(
        stream, o.reps,
        [&] {
          return ScatterAdd(indices->data(), values->data(), k, 1.0f, ws, out->data(), n, stream);
        },
        &row.median_ms, &row.min_ms));
    RETURN_IF_ERROR(ws->Synchronize(stream));
    row.bytes = 16.0 * k;  // read idx and value, read and write out[idx]
    rows->push_back(row);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace gravac::kernels::cuda

int main(int argc, char** argv) {
  using namespace gravac::kernels::cuda;  // NOLINT: a main of this namespace
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s [--n N (1000..2^31-1, default 2^26)] [--reps R] [--json FILE]\n",
                 argv[0]);
    return 2;
  }
  absl::StatusOr<int> devices = DeviceCount();
  if (!devices.ok()) {
    std::fprintf(stderr, "%s: skipped, nothing measured: %s\n", argv[0],
                 std::string(devices.status().message()).c_str());
    return kSkipped;
  }
  std::vector<Row> rows;
  double peak = 0;
  std::string device;
  absl::Status status = Run(o, &rows, &peak, &device);
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], status.ToString().c_str());
    return 1;
  }
  std::printf(
      "device %s, peak memory bandwidth %.0f GB/s (clock x bus width), n = %lld, "
      "median of %d reps\n",
      device.c_str(), peak, static_cast<long long>(o.n), o.reps);
  std::printf("%-18s %7s %10s %10s %10s %10s %9s %9s %7s\n", "kernel", "k/n", "k", "median_ms",
              "min_ms", "MB_moved", "GB/s", "of_peak", "#wrong");
  int64_t wrong = 0;
  std::string json = absl::StrFormat(
      "{\"device\": \"%s\", \"peak_gbs\": %.1f, \"n\": %d, \"reps\": %d, \"rows\": [", device, peak,
      o.n, o.reps);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    double gbs = r.bytes / (r.median_ms * 1e-3) / 1e9;
    std::printf("%-18s %6.1f%% %10lld %10.4f %10.4f %10.1f %9.1f %9.3f %7lld\n", r.kernel.c_str(),
                100 * r.ratio, static_cast<long long>(r.k), r.median_ms, r.min_ms, r.bytes / 1e6,
                gbs, gbs / peak, static_cast<long long>(r.wrong));
    json += absl::StrFormat(
        "%s{\"kernel\": \"%s\", \"ratio\": %g, \"k\": %d, \"median_ms\": %.5f, \"min_ms\": %.5f, "
        "\"bytes\": %.0f, \"gbs\": %.2f, \"fraction_of_peak\": %.4f, \"wrong\": %d}",
        i ? ", " : "", r.kernel, r.ratio, r.k, r.median_ms, r.min_ms, r.bytes, gbs, gbs / peak,
        r.wrong);
    wrong += r.wrong;
  }
  json += "]}\n";
  if (!o.json.empty()) {
    std::FILE* f = std::fopen(o.json.c_str(), "w");
    if (f == nullptr || std::fputs(json.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::fprintf(stderr, "%s: cannot write %s\n", argv[0], o.json.c_str());
      return 1;
    }
  }
  if (wrong > 0) {
    std::fprintf(stderr, "%s: %lld wrong results\n", argv[0], static_cast<long long>(wrong));
    return 1;
  }
  return 0;
}
