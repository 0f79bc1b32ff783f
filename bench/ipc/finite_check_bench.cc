// gravac-finite-check-bench: the cost of gravacd --check_finite. Per size, the time of the
// 2-worker local reduce (CombineLocal of two float32 inputs, what gravacd does once per tensor)
// and of the finite check over its sum, interleaved in the same run; prints the check's median
// time over the reduce's median time.
//
//   gravac-finite-check-bench [--iters 50]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "daemon/local/finite_check.h"
#include "daemon/local/local_reduce.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  }
  using gravac::daemon::LocalInput;
  using Clock = std::chrono::steady_clock;
  std::printf("%12s %14s %14s %8s\n", "bytes", "reduce_us", "check_us", "ratio");
  for (size_t bytes : {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20, size_t{64} << 20}) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = static_cast<float>(i % 1000) * 0.001f;
      b[i] = 1.0f - a[i];
    }
    gravac::daemon::TensorSpec spec;
    spec.name = "g";
    spec.shape = {static_cast<int64_t>(n)};
    const std::vector<LocalInput> inputs = {
        {0, &spec, reinterpret_cast<const uint8_t*>(a.data()), bytes},
        {1, &spec, reinterpret_cast<const uint8_t*>(b.data()), bytes}};
    std::vector<uint8_t> storage;
    std::vector<double> reduce_us, check_us;
    int bad = 0;
    for (int it = 0; it < iters; ++it) {
      const auto t0 = Clock::now();
      gravac::daemon::NodeTensor t = gravac::daemon::CombineLocal(inputs, 0, std::move(storage));
      const auto t1 = Clock::now();
      bad +=
          gravac::daemon::CheckFiniteAllreduce(inputs, t.data.data(), t.data.size()).ok() ? 0 : 1;
      const auto t2 = Clock::now();
      storage = std::move(t.data);
      reduce_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      check_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    if (bad != 0) {
      std::fprintf(stderr, "finite check refused a finite tensor\n");
      return 1;
    }
    const double r = Median(reduce_us), c = Median(check_us);
    std::printf("%12zu %14.1f %14.1f %8.2f\n", bytes, r, c, c / r);
  }
  return 0;
}
