#include "daemon/engine/device_results.h"

#include <utility>

#include "core/mutex.h"
#include "core/status.h"

namespace gravac::daemon::internal {

struct DeviceResults::Shared {
  Mutex mu;
  std::unique_ptr<kernels::CompressionBackend> backend ABSL_GUARDED_BY(mu);
  DeviceBufferPool pool ABSL_GUARDED_BY(mu);  // declared after backend: its buffers freed first
};

namespace {

// A result in a buffer of the pool, given back to it when the last reference goes; its copy to
// the host goes through the owned backend under the mutex.
class PooledResult : public DeviceData {
 public:
  PooledResult(int device, std::shared_ptr<DeviceResults::Shared> owner,
               std::unique_ptr<kernels::BackendMemory> block)
      : device_(device), owner_(std::move(owner)), block_(std::move(block)) {}
  ~PooledResult() override {
    MutexLock lock(&owner_->mu);
    owner_->pool.Return(std::move(block_));
  }
  int device() const override { return device_; }
  const void* data() const override { return block_->data(); }
  size_t bytes() const override { return block_->bytes(); }
  absl::Status CopyToHost(void* host) const override {
    if (block_->bytes() == 0) return absl::OkStatus();
    MutexLock lock(&owner_->mu);
    return owner_->backend->CopyToHost(host, block_->data(), block_->bytes());
  }

 private:
  int device_;
  std::shared_ptr<DeviceResults::Shared> owner_;
  std::unique_ptr<kernels::BackendMemory> block_;
};

}  // namespace

DeviceResults::DeviceResults(std::unique_ptr<kernels::CompressionBackend> backend)
    : device_(backend->device()), shared_(std::make_shared<Shared>()) {
  MutexLock lock(&shared_->mu);
  shared_->backend = std::move(backend);
}

absl::StatusOr<std::shared_ptr<const DeviceData>> DeviceResults::Copy(
    kernels::CompressionBackend& dev, const void* src, size_t bytes) {
  std::unique_ptr<kernels::BackendMemory> block;
  {
    MutexLock lock(&shared_->mu);
    ASSIGN_OR_RETURN(block, shared_->pool.Take(bytes, *shared_->backend));
  }
  // A buffer of the pool is reused only after its last reader finished (the DeviceData contract),
  // and this copy is queued on dev's stream, where the step's later copies into it queue after.
  auto result = std::make_shared<PooledResult>(device_, shared_, std::move(block));
  if (bytes > 0) RETURN_IF_ERROR(dev.CopyWithin(const_cast<void*>(result->data()), src, bytes));
  return std::shared_ptr<const DeviceData>(std::move(result));
}

DeviceBufferPool::Counts DeviceResults::counts() const {
  MutexLock lock(&shared_->mu);
  return shared_->pool.counts();
}

}  // namespace gravac::daemon::internal
