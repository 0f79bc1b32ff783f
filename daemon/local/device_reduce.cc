#include "daemon/local/device_reduce.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::daemon {

struct BackendDeviceReduce::Device {
  Mutex mu;
  std::unique_ptr<kernels::CompressionBackend> backend ABSL_GUARDED_BY(mu);
  DeviceBufferPool pool ABSL_GUARDED_BY(mu);  // declared after backend: its buffers freed first
};

namespace {

// A sum in a block of the device's memory, taken from the device's pool and returned to it when
// the last reference goes; its copy to the host goes through the device's backend under its
// mutex. Holding the Device keeps its pool and backend alive after the reducer is gone.
class BackendDeviceData : public DeviceData {
 public:
  BackendDeviceData(int device, std::shared_ptr<BackendDeviceReduce::Device> owner,
                    std::unique_ptr<kernels::BackendMemory> block)
      : device_(device), owner_(std::move(owner)), block_(std::move(block)) {}
  ~BackendDeviceData() override {
    MutexLock lock(&owner_->mu);
    owner_->pool.Return(std::move(block_));
  }
  int device() const override { return device_; }
  const void* data() const override { return block_->data(); }
  size_t bytes() const override { return block_->bytes(); }
  absl::Status CopyToHost(void* host) const override {
    MutexLock lock(&owner_->mu);
    return owner_->backend->CopyToHost(host, block_->data(), block_->bytes());
  }

 private:
  int device_;
  std::shared_ptr<BackendDeviceReduce::Device> owner_;
  std::unique_ptr<kernels::BackendMemory> block_;
};

}  // namespace

NodeTensor CombineOnDevice(absl::Span<const LocalInput> inputs, int64_t posted_at_ns,
                           std::shared_ptr<const DeviceData> sum) {
  NodeTensor out;
  out.spec = *inputs[0].spec;
  out.posted_at_ns = posted_at_ns;
  for (const LocalInput& in : inputs) out.samples += in.spec->samples;
  out.spec.samples = out.samples;
  out.device = sum->device();
  out.device_data = std::move(sum);
  return out;
}

BackendDeviceReduce::BackendDeviceReduce(kernels::DeviceBackendFactory make_backend)
    : make_backend_(std::move(make_backend)) {
  if (make_backend_ == nullptr) make_backend_ = kernels::MakeDeviceBackend;
}

BackendDeviceReduce::~BackendDeviceReduce() = default;

absl::StatusOr<std::shared_ptr<BackendDeviceReduce::Device>> BackendDeviceReduce::DeviceFor(
    int device) {
  MutexLock lock(&mu_);
  auto it = devices_.find(device);
  if (it != devices_.end()) return it->second;
  absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> made = make_backend_(device);
  if (!made.ok()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("no local reduce on CUDA device %d: %s", device, made.status().message()));
  }
  auto d = std::make_shared<Device>();
  {
    MutexLock device_lock(&d->mu);
    d->backend = *std::move(made);
  }
  devices_.emplace(device, d);
  return d;
}

DeviceBufferPool::Counts BackendDeviceReduce::PoolCounts(int device) {
  std::shared_ptr<Device> d;
  {
    MutexLock lock(&mu_);
    auto it = devices_.find(device);
    if (it == devices_.end()) return {};
    d = it->second;
  }
  MutexLock lock(&d->mu);
  return d->pool.counts();
}

absl::StatusOr<std::shared_ptr<const DeviceData>> BackendDeviceReduce::SumFloat32(
    int device, absl::Span<const void* const> inputs, size_t bytes) {
  if (inputs.empty() || bytes % sizeof(float) != 0 || device < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "local reduce on the device: needs a device >= 0 and at least one input of whole floats, "
        "got device %d, %d inputs of %d bytes",
        device, inputs.size(), bytes));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Device> d, DeviceFor(device));
  MutexLock lock(&d->mu);
  kernels::CompressionBackend& backend = *d->backend;
  ASSIGN_OR_RETURN(std::unique_ptr<kernels::BackendMemory> sum, d->pool.Take(bytes, backend));
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  auto in = [&inputs](size_t i) { return static_cast<const float*>(inputs[i]); };
  // As CombineLocal: the first two in one pass, then each further input added in order (a single
  // input is copied, bytes exactly).
  absl::Status status = inputs.size() == 1 ? backend.CopyWithin(sum->data(), inputs[0], bytes)
                                           : backend.Compensate(in(0), in(1), sum->floats(), n);
  for (size_t i = 2; status.ok() && i < inputs.size(); ++i) {
    status = backend.Compensate(sum->floats(), in(i), sum->floats(), n);
  }
  if (status.ok()) status = backend.Synchronize();
  if (!status.ok()) {
    // Back to the pool, not to the engine: work still queued on it (a failed launch skips the
    // Synchronize) is on this backend's stream, where every later sum into it queues after.
    d->pool.Return(std::move(sum));
    return absl::Status(status.code(), absl::StrFormat("local reduce on CUDA device %d: %s", device,
                                                       status.message()));
  }
  return std::shared_ptr<const DeviceData>(
      std::make_shared<BackendDeviceData>(device, d, std::move(sum)));
}

}  // namespace gravac::daemon
