// FakeDeviceBackend: a CompressionBackend (kernels/backend.h) that stands in for the CUDA backend
// of one device in tests without a GPU. It says what the CUDA backend says (memory_type kDevice,
// its device, no CompensateWithNorm: norms only from SumSquares) and runs the CPU reference
// kernels, which the CUDA kernels match bit for bit, on blocks it allocates itself ("device
// memory"). Every kernel and copy checks that its backend-side pointers lie in those blocks, as a
// GPU would fault on host memory: a caller that hands it host memory gets kInternal naming the
// call. It counts the bytes copied each way, so tests can show what crosses to the host.
//
// Thread-safety: as CompressionBackend (one owner); FakeDeviceCopies is thread-safe.
#ifndef GRAVAC_TESTS_DAEMON_ENGINE_FAKE_DEVICE_BACKEND_H_
#define GRAVAC_TESTS_DAEMON_ENGINE_FAKE_DEVICE_BACKEND_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "kernels/backend.h"
#include "kernels/cpu/backend.h"

namespace gravac::daemon::testing {

// Bytes FakeDeviceBackends copied, shared with the test that made them (it may outlive the
// backends' owner; atomic: the backends of several nodes' executors may share one).
struct FakeDeviceCopies {
  std::atomic<int64_t> to_host{0};
  std::atomic<int64_t> from_host{0};
};

class FakeDeviceBackend : public kernels::CompressionBackend {
 public:
  FakeDeviceBackend(int device, std::shared_ptr<FakeDeviceCopies> copies)
      : device_(device), copies_(std::move(copies)), cpu_(kernels::cpu::MakeCpuBackend(nullptr)) {}

  std::string_view name() const override { return "fake-cuda"; }
  MemoryType memory_type() const override { return MemoryType::kDevice; }
  int device() const override { return device_; }

  absl::StatusOr<std::unique_ptr<kernels::BackendMemory>> Allocate(size_t bytes) override {
    auto block = std::make_unique<Block>(this, bytes);
    blocks_[block->base()] = bytes;
    return block;
  }
  absl::Status CopyFromHost(void* dst, const void* host, size_t bytes) override {
    if (absl::Status s = Check("CopyFromHost", dst, bytes); !s.ok()) return s;
    copies_->from_host += static_cast<int64_t>(bytes);
    return cpu_->CopyFromHost(dst, host, bytes);
  }
  absl::Status CopyToHost(void* host, const void* src, size_t bytes) override {
    if (absl::Status s = Check("CopyToHost", src, bytes); !s.ok()) return s;
    copies_->to_host += static_cast<int64_t>(bytes);
    return cpu_->CopyToHost(host, src, bytes);
  }
  absl::Status Zero(void* dst, size_t bytes) override {
    if (absl::Status s = Check("Zero", dst, bytes); !s.ok()) return s;
    return cpu_->Zero(dst, bytes);
  }
  absl::Status Compensate(const float* grad, const float* residual, float* p,
                          int64_t n) override {
    for (const void* x : {static_cast<const void*>(grad), static_cast<const void*>(residual),
                          static_cast<const void*>(p)}) {
      if (absl::Status s = Check("Compensate", x, Floats(n)); !s.ok()) return s;
    }
    return cpu_->Compensate(grad, residual, p, n);
  }
  absl::Status TopK(const float* p, int64_t n, int64_t k, int32_t* indices,
                    float* values) override {
    if (absl::Status s = Check("TopK", p, Floats(n)); !s.ok()) return s;
    const size_t kept = Floats(std::min(k, n));
    if (absl::Status s = Check("TopK", indices, kept); !s.ok()) return s;
    if (absl::Status s = Check("TopK", values, kept); !s.ok()) return s;
    return cpu_->TopK(p, n, k, indices, values);
  }
  absl::Status UpdateResidual(const float* p, int64_t n, const int32_t* indices,
                              const float* values, int64_t k, float* residual) override {
    for (const void* x : {static_cast<const void*>(p), static_cast<const void*>(residual)}) {
      if (absl::Status s = Check("UpdateResidual", x, Floats(n)); !s.ok()) return s;
    }
    if (absl::Status s = Check("UpdateResidual", indices, Floats(k)); !s.ok()) return s;
    if (absl::Status s = Check("UpdateResidual", values, Floats(k)); !s.ok()) return s;
    return cpu_->UpdateResidual(p, n, indices, values, k, residual);
  }
  absl::Status ScatterAdd(const int32_t* indices, const float* values, int64_t k, float scale,
                          float* out, int64_t n) override {
    if (absl::Status s = Check("ScatterAdd", indices, Floats(k)); !s.ok()) return s;
    if (absl::Status s = Check("ScatterAdd", values, Floats(k)); !s.ok()) return s;
    if (absl::Status s = Check("ScatterAdd", out, Floats(n)); !s.ok()) return s;
    return cpu_->ScatterAdd(indices, values, k, scale, out, n);
  }
  absl::StatusOr<double> SumSquares(const float* x, int64_t n) override {
    if (absl::Status s = Check("SumSquares", x, Floats(n)); !s.ok()) return s;
    return cpu_->SumSquares(x, n);
  }
  absl::Status Synchronize() override { return cpu_->Synchronize(); }

  // Whether [p, p + bytes) lies in one of this backend's live blocks (an empty range always does).
  bool Owns(const void* p, size_t bytes) const {
    if (bytes == 0) return true;
    const auto* at = static_cast<const uint8_t*>(p);
    auto it = blocks_.upper_bound(at);
    if (it == blocks_.begin()) return false;
    --it;
    return at + bytes <= it->first + it->second;
  }

 private:
  class Block : public kernels::BackendMemory {
   public:
    Block(FakeDeviceBackend* owner, size_t bytes)
        : owner_(owner), data_(new uint8_t[bytes > 0 ? bytes : 1]()), bytes_(bytes) {}
    ~Block() override { owner_->blocks_.erase(data_.get()); }
    void* data() override { return data_.get(); }
    size_t bytes() const override { return bytes_; }
    const uint8_t* base() const { return data_.get(); }

   private:
    FakeDeviceBackend* owner_;
    std::unique_ptr<uint8_t[]> data_;
    size_t bytes_;
  };

  static size_t Floats(int64_t n) { return n > 0 ? static_cast<size_t>(n) * sizeof(float) : 0; }
  absl::Status Check(std::string_view call, const void* p, size_t bytes) const {
    if (Owns(p, bytes)) return absl::OkStatus();
    return absl::InternalError(absl::StrFormat(
        "fake CUDA device %d: %s got %d bytes at %p, not this device's memory (a GPU would fault)",
        device_, call, bytes, p));
  }

  int device_;
  std::shared_ptr<FakeDeviceCopies> copies_;
  std::unique_ptr<kernels::CompressionBackend> cpu_;
  std::map<const uint8_t*, size_t> blocks_;  // live blocks by base address
};

// A factory of FakeDeviceBackends for any device, counting into `copies`.
inline auto FakeDeviceBackends(std::shared_ptr<FakeDeviceCopies> copies) {
  return [copies](int device) -> absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> {
    return std::make_unique<FakeDeviceBackend>(device, copies);
  };
}

}  // namespace gravac::daemon::testing

#endif  // GRAVAC_TESTS_DAEMON_ENGINE_FAKE_DEVICE_BACKEND_H_
