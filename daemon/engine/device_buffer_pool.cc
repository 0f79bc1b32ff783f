#include "daemon/engine/device_buffer_pool.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "core/mutex.h"
#include "core/status.h"

namespace gravac::daemon {

absl::StatusOr<std::unique_ptr<kernels::BackendMemory>> DeviceBufferPool::Take(
    size_t bytes, kernels::CompressionBackend& backend) {
  if (auto it = by_size_.find(bytes); it != by_size_.end()) {
    const ByAge::iterator newest = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) by_size_.erase(it);
    std::unique_ptr<kernels::BackendMemory> block = std::move(*newest);
    by_age_.erase(newest);
    counts_.free_bytes -= bytes;
    counts_.held_bytes += bytes;
    ++counts_.reuses;
    return block;
  }
  // held + new + free <= the high-water mark after this Take.
  const size_t held = counts_.held_bytes + bytes;
  const size_t high_water = std::max(counts_.high_water_bytes, held);
  TrimTo(high_water - held);
  ASSIGN_OR_RETURN(std::unique_ptr<kernels::BackendMemory> block, backend.Allocate(bytes));
  counts_.held_bytes = held;
  counts_.high_water_bytes = high_water;
  ++counts_.allocations;
  return block;
}

void DeviceBufferPool::Return(std::unique_ptr<kernels::BackendMemory> block) {
  if (block == nullptr) return;
  const size_t bytes = block->bytes();
  counts_.held_bytes -= std::min(counts_.held_bytes, bytes);
  by_age_.push_back(std::move(block));
  by_size_[bytes].push_back(std::prev(by_age_.end()));
  counts_.free_bytes += bytes;
  // A no-op for blocks this pool handed out (held + free is unchanged); keeps the bound for any
  // other.
  TrimTo(counts_.high_water_bytes - std::min(counts_.high_water_bytes, counts_.held_bytes));
}

void DeviceBufferPool::TrimTo(size_t limit) {
  while (counts_.free_bytes > limit && !by_age_.empty()) {
    const size_t bytes = by_age_.front()->bytes();
    auto it = by_size_.find(bytes);
    it->second.erase(it->second.begin());  // the oldest of its size
    if (it->second.empty()) by_size_.erase(it);
    by_age_.pop_front();  // freed by the backend's memory
    counts_.free_bytes -= bytes;
  }
}

class DeviceBuffers::Buffer : public DeviceData {
 public:
  Buffer(std::shared_ptr<DeviceBuffers> owner, std::unique_ptr<kernels::BackendMemory> block)
      : owner_(std::move(owner)), block_(std::move(block)) {}
  ~Buffer() override {
    MutexLock lock(&owner_->mu_);
    owner_->pool_.Return(std::move(block_));
  }
  int device() const override { return owner_->device_; }
  const void* data() const override { return block_->data(); }
  size_t bytes() const override { return block_->bytes(); }
  absl::Status CopyToHost(void* host) const override {
    if (block_->bytes() == 0) return absl::OkStatus();
    MutexLock lock(&owner_->mu_);
    return owner_->backend_->CopyToHost(host, block_->data(), block_->bytes());
  }

 private:
  std::shared_ptr<DeviceBuffers> owner_;
  std::unique_ptr<kernels::BackendMemory> block_;
};

std::shared_ptr<DeviceBuffers> DeviceBuffers::Make(
    std::unique_ptr<kernels::CompressionBackend> backend) {
  std::shared_ptr<DeviceBuffers> d(new DeviceBuffers(backend->device()));
  MutexLock lock(&d->mu_);
  d->backend_ = std::move(backend);
  return d;
}

absl::StatusOr<std::shared_ptr<const DeviceData>> DeviceBuffers::Fill(
    size_t bytes,
    absl::FunctionRef<absl::Status(kernels::CompressionBackend&, kernels::BackendMemory&)> fill) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::unique_ptr<kernels::BackendMemory> block, pool_.Take(bytes, *backend_));
  if (absl::Status s = fill(*backend_, *block); !s.ok()) {
    // Back to the pool: work still queued on it (a failed launch) is on the backend's stream,
    // where every later use of the buffer queues after.
    pool_.Return(std::move(block));
    return s;
  }
  return std::shared_ptr<const DeviceData>(
      std::make_shared<Buffer>(shared_from_this(), std::move(block)));
}

DeviceBufferPool::Counts DeviceBuffers::counts() const {
  MutexLock lock(&mu_);
  return pool_.counts();
}

}  // namespace gravac::daemon
