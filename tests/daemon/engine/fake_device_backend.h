// FakeDeviceBackend: a CompressionBackend (kernels/backend.h) that stands in for the CUDA backend
// of one device in tests without a GPU. It says what the CUDA backend says (memory_type kDevice,
// its device, no CompensateWithNorm: norms only from SumSquares) and runs the CPU reference
// kernels, which the CUDA kernels match bit for bit, on blocks of a FakeDeviceMemory ("device
// memory", shared by the fakes made on it). Every kernel and copy checks that its backend-side
// pointers lie in those blocks, as a GPU would fault on host memory: a caller that hands it host
// memory gets kInternal naming the call. It counts the bytes copied each way, so tests can show
// what crosses to the host, the bytes copied within the device, and the blocks allocated.
//
// Thread-safety: as CompressionBackend (one owner); FakeDeviceCopies is thread-safe.
#ifndef GRAVAC_TESTS_DAEMON_ENGINE_FAKE_DEVICE_BACKEND_H_
#define GRAVAC_TESTS_DAEMON_ENGINE_FAKE_DEVICE_BACKEND_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "daemon/engine/device_data.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/backend.h"

namespace gravac::daemon::testing {

// The "device memory" that FakeDeviceBackends share (as a GPU's memory is valid for every
// backend of that GPU), and the bytes they copied to and from the host. Shared with the test
// that made them (it may outlive the backends' owners); thread-safe: the backends of several
// threads (nodes' executors, the local side) may share one.
struct FakeDeviceMemory {
  std::atomic<int64_t> to_host{0};
  std::atomic<int64_t> from_host{0};
  std::atomic<int64_t> within{0};       // bytes copied within the device (CopyWithin)
  std::atomic<int64_t> allocations{0};  // blocks made by Allocate
  // Failure injection: the next this-many SumSquares (ScatterAdd) calls fail (kInternal) without
  // running, and the Synchronize calls made after such a failure are counted.
  std::atomic<int> fail_sum_squares{0};
  std::atomic<int> fail_scatter_add{0};
  std::atomic<int64_t> synchronized_after_failure{0};
  std::mutex mu;
  std::map<const uint8_t*, size_t> blocks;  // live blocks by base address, guarded by mu

  // Whether [p, p + bytes) lies in one live block (an empty range always does).
  bool Owns(const void* p, size_t bytes) {
    if (bytes == 0) return true;
    const auto* at = static_cast<const uint8_t*>(p);
    std::lock_guard<std::mutex> lock(mu);
    auto it = blocks.upper_bound(at);
    if (it == blocks.begin()) return false;
    --it;
    return at >= it->first && at + bytes <= it->first + it->second;
  }
};

class FakeDeviceBackend : public kernels::CompressionBackend {
 public:
  FakeDeviceBackend(int device, std::shared_ptr<FakeDeviceMemory> memory)
      : device_(device), memory_(std::move(memory)), cpu_(kernels::cpu::MakeCpuBackend(nullptr)) {}

  std::string_view name() const override { return "fake-cuda"; }
  MemoryType memory_type() const override { return MemoryType::kDevice; }
  int device() const override { return device_; }

  absl::StatusOr<std::unique_ptr<kernels::BackendMemory>> Allocate(size_t bytes) override {
    auto block = std::make_unique<Block>(memory_, bytes);
    ++memory_->allocations;
    std::lock_guard<std::mutex> lock(memory_->mu);
    memory_->blocks[block->base()] = bytes;
    return block;
  }
  absl::Status CopyFromHost(void* dst, const void* host, size_t bytes) override {
    if (absl::Status s = Check("CopyFromHost", dst, bytes); !s.ok()) return s;
    memory_->from_host += static_cast<int64_t>(bytes);
    return cpu_->CopyFromHost(dst, host, bytes);
  }
  absl::Status CopyToHost(void* host, const void* src, size_t bytes) override {
    if (absl::Status s = Check("CopyToHost", src, bytes); !s.ok()) return s;
    memory_->to_host += static_cast<int64_t>(bytes);
    return cpu_->CopyToHost(host, src, bytes);
  }
  absl::Status CopyWithin(void* dst, const void* src, size_t bytes) override {
    if (absl::Status s = Check("CopyWithin", dst, bytes); !s.ok()) return s;
    if (absl::Status s = Check("CopyWithin", src, bytes); !s.ok()) return s;
    memory_->within += static_cast<int64_t>(bytes);
    return cpu_->CopyWithin(dst, src, bytes);
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
    // Taken atomically: several nodes' backends may share the memory.
    int left = memory_->fail_scatter_add.load();
    while (left > 0 && !memory_->fail_scatter_add.compare_exchange_weak(left, left - 1)) {
    }
    if (left > 0) {
      failed_ = true;
      return absl::InternalError(
          absl::StrFormat("fake CUDA device %d: ScatterAdd failed (injected)", device_));
    }
    return cpu_->ScatterAdd(indices, values, k, scale, out, n);
  }
  absl::Status DivideAll(float* x, int64_t n, float divisor) override {
    if (absl::Status s = Check("DivideAll", x, Floats(n)); !s.ok()) return s;
    return cpu_->DivideAll(x, n, divisor);
  }
  absl::StatusOr<double> SumSquares(const float* x, int64_t n) override {
    if (absl::Status s = Check("SumSquares", x, Floats(n)); !s.ok()) return s;
    if (memory_->fail_sum_squares > 0) {
      --memory_->fail_sum_squares;
      failed_ = true;
      return absl::InternalError(
          absl::StrFormat("fake CUDA device %d: SumSquares failed (injected)", device_));
    }
    return cpu_->SumSquares(x, n);
  }
  absl::Status Synchronize() override {
    if (failed_) ++memory_->synchronized_after_failure;
    return cpu_->Synchronize();
  }

 private:
  class Block : public kernels::BackendMemory {
   public:
    Block(std::shared_ptr<FakeDeviceMemory> memory, size_t bytes)
        : memory_(std::move(memory)), data_(new uint8_t[bytes > 0 ? bytes : 1]()), bytes_(bytes) {}
    ~Block() override {
      std::lock_guard<std::mutex> lock(memory_->mu);
      memory_->blocks.erase(data_.get());
    }
    void* data() override { return data_.get(); }
    size_t bytes() const override { return bytes_; }
    const uint8_t* base() const { return data_.get(); }

   private:
    std::shared_ptr<FakeDeviceMemory> memory_;
    std::unique_ptr<uint8_t[]> data_;
    size_t bytes_;
  };

  static size_t Floats(int64_t n) { return n > 0 ? static_cast<size_t>(n) * sizeof(float) : 0; }
  absl::Status Check(std::string_view call, const void* p, size_t bytes) const {
    if (memory_->Owns(p, bytes)) return absl::OkStatus();
    return absl::InternalError(absl::StrFormat(
        "fake CUDA device %d: %s got %d bytes at %p, not this device's memory (a GPU would fault)",
        device_, call, bytes, p));
  }

  int device_;
  std::shared_ptr<FakeDeviceMemory> memory_;
  std::unique_ptr<kernels::CompressionBackend> cpu_;
  bool failed_ = false;  // an injected failure happened on this backend
};

// A factory of FakeDeviceBackends for any device, on `memory`.
inline auto FakeDeviceBackends(std::shared_ptr<FakeDeviceMemory> memory) {
  return [memory](int device) -> absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> {
    return std::make_unique<FakeDeviceBackend>(device, memory);
  };
}

// A node's sum in fake device memory (NodeTensor::device_data), as the local side's device reduce
// hands it to the engine. Its copy to the host counts in the memory's to_host.
class FakeDeviceData : public DeviceData {
 public:
  // `values` copied into a new block of `memory` on `device` (counted in from_host).
  static std::shared_ptr<const FakeDeviceData> Make(int device,
                                                    std::shared_ptr<FakeDeviceMemory> memory,
                                                    absl::Span<const float> values) {
    auto d = std::shared_ptr<FakeDeviceData>(
        new FakeDeviceData(std::make_unique<FakeDeviceBackend>(device, std::move(memory))));
    auto block = d->backend_->Allocate(values.size() * sizeof(float));
    EXPECT_TRUE(block.ok());
    d->block_ = *std::move(block);
    EXPECT_TRUE(d->backend_->CopyFromHost(d->block_->data(), values.data(), d->block_->bytes()).ok());
    return d;
  }
  int device() const override { return backend_->device(); }
  const void* data() const override { return block_->data(); }
  size_t bytes() const override { return block_->bytes(); }
  absl::Status CopyToHost(void* host) const override {
    return backend_->CopyToHost(host, block_->data(), block_->bytes());
  }

 private:
  explicit FakeDeviceData(std::unique_ptr<FakeDeviceBackend> backend)
      : backend_(std::move(backend)) {}
  std::unique_ptr<FakeDeviceBackend> backend_;
  std::unique_ptr<kernels::BackendMemory> block_;  // destroyed before backend_ (declared after)
};

}  // namespace gravac::daemon::testing

#endif  // GRAVAC_TESTS_DAEMON_ENGINE_FAKE_DEVICE_BACKEND_H_
