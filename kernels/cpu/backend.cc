#include "kernels/cpu/backend.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/cpu/error_feedback.h"
#include "kernels/cpu/scatter_add.h"
#include "kernels/cpu/select.h"
#include "kernels/cpu/sum_squares.h"

namespace gravac::kernels::cpu {
namespace {

constexpr int64_t kMaxElements = 2147483647;

class HostMemory : public BackendMemory {
 public:
  explicit HostMemory(size_t bytes) : bytes_(bytes), data_(bytes) {}
  void* data() override { return data_.empty() ? nullptr : data_.data(); }
  size_t bytes() const override { return bytes_; }

 private:
  size_t bytes_;
  std::vector<char> data_;  // zeroed
};

absl::Status CheckCount(const char* call, const char* what, int64_t count) {
  if (count < 0 || count > kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s = %d outside [0, %d]", call, what, count, kMaxElements));
  }
  return absl::OkStatus();
}

class CpuBackend : public CompressionBackend {
 public:
  explicit CpuBackend(ThreadPool* pool) : selector_(pool) {}

  std::string_view name() const override { return "cpu"; }
  MemoryType memory_type() const override { return MemoryType::kHost; }

  absl::StatusOr<std::unique_ptr<BackendMemory>> Allocate(size_t bytes) override {
    return std::make_unique<HostMemory>(bytes);
  }
  absl::Status CopyFromHost(void* dst, const void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, host, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* host, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, src, bytes);
    return absl::OkStatus();
  }

  absl::Status CopyWithin(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }

  absl::Status Zero(void* dst, size_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
    return absl::OkStatus();
  }

  absl::Status Compensate(const float* grad, const float* residual, float* p, int64_t n) override {
    if (absl::Status s = CheckCount("Compensate", "n", n); !s.ok()) return s;
    CompensateKernel(absl::MakeConstSpan(grad, n), absl::MakeConstSpan(residual, n),
                     absl::MakeSpan(p, n));
    return absl::OkStatus();
  }

  absl::StatusOr<double> CompensateWithNorm(const float* grad, const float* residual, float* p,
                                            int64_t n) override {
    if (absl::Status s = CheckCount("CompensateWithNorm", "n", n); !s.ok()) return s;
    return CompensateAndNormKernel(absl::MakeConstSpan(grad, n), absl::MakeConstSpan(residual, n),
                                   absl::MakeSpan(p, n));
  }

  absl::Status TopK(const float* p, int64_t n, int64_t k, int32_t* indices,
                    float* values) override {
    if (absl::Status s = CheckCount("TopK", "n", n); !s.ok()) return s;
    // cpu::TopK's selection straight into the message buffers, with the Selector's scratch kept
    // between calls (a step of the daemon's engine allocates nothing once its buffers exist).
    return selector_.TopK(absl::MakeConstSpan(p, n), k, "(unnamed)", indices, values);
  }

  absl::Status UpdateResidual(const float* p, int64_t n, const int32_t* indices,
                              const float* values, int64_t k, float* residual) override {
    if (absl::Status s = CheckCount("UpdateResidual", "n", n); !s.ok()) return s;
    if (absl::Status s = CheckCount("UpdateResidual", "k", k); !s.ok()) return s;
    return UpdateResidualKernel(absl::MakeConstSpan(p, n), absl::MakeConstSpan(indices, k),
                                absl::MakeConstSpan(values, k), absl::MakeSpan(residual, n));
  }

  absl::Status ScatterAdd(const int32_t* indices, const float* values, int64_t k, float scale,
                          float* out, int64_t n) override {
    if (absl::Status s = CheckCount("ScatterAdd", "n", n); !s.ok()) return s;
    if (absl::Status s = CheckCount("ScatterAdd", "k", k); !s.ok()) return s;
    return cpu::ScatterAdd(absl::MakeConstSpan(indices, k), absl::MakeConstSpan(values, k), scale,
                           absl::MakeSpan(out, n));
  }

  absl::Status DivideAll(float* x, int64_t n, float divisor) override {
    if (absl::Status s = CheckCount("DivideAll", "n", n); !s.ok()) return s;
    cpu::DivideAll(absl::MakeSpan(x, n), divisor);
    return absl::OkStatus();
  }

  absl::StatusOr<double> SumSquares(const float* x, int64_t n) override {
    if (absl::Status s = CheckCount("SumSquares", "n", n); !s.ok()) return s;
    return cpu::SumSquares(absl::MakeConstSpan(x, n));
  }

  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  Selector selector_;
};

}  // namespace

std::unique_ptr<CompressionBackend> MakeCpuBackend(ThreadPool* pool) {
  return std::make_unique<CpuBackend>(pool);
}

}  // namespace gravac::kernels::cpu
