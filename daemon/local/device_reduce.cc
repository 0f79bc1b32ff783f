#include "daemon/local/device_reduce.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::daemon {

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

absl::StatusOr<std::shared_ptr<DeviceBuffers>> BackendDeviceReduce::DeviceFor(int device) {
  MutexLock lock(&mu_);
  auto it = devices_.find(device);
  if (it != devices_.end()) return it->second;
  absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> made = make_backend_(device);
  if (!made.ok()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("no local reduce on CUDA device %d: %s", device, made.status().message()));
  }
  std::shared_ptr<DeviceBuffers> d = DeviceBuffers::Make(*std::move(made));
  devices_.emplace(device, d);
  return d;
}

DeviceBufferPool::Counts BackendDeviceReduce::PoolCounts(int device) {
  std::shared_ptr<DeviceBuffers> d;
  {
    MutexLock lock(&mu_);
    auto it = devices_.find(device);
    if (it == devices_.end()) return {};
    d = it->second;
  }
  return d->counts();
}

absl::StatusOr<std::shared_ptr<const DeviceData>> BackendDeviceReduce::SumFloat32(
    int device, absl::Span<const void* const> inputs, size_t bytes) {
  if (inputs.empty() || bytes % sizeof(float) != 0 || device < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "local reduce on the device: needs a device >= 0 and at least one input of whole floats, "
        "got device %d, %d inputs of %d bytes",
        device, inputs.size(), bytes));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<DeviceBuffers> d, DeviceFor(device));
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  auto in = [&inputs](size_t i) { return static_cast<const float*>(inputs[i]); };
  absl::StatusOr<std::shared_ptr<const DeviceData>> sum =
      d->Fill(bytes, [&](kernels::CompressionBackend& backend, kernels::BackendMemory& out) {
        // As CombineLocal: the first two in one pass, then each further input added in order (a
        // single input is copied, bytes exactly).
        absl::Status status = inputs.size() == 1
                                  ? backend.CopyWithin(out.data(), inputs[0], bytes)
                                  : backend.Compensate(in(0), in(1), out.floats(), n);
        for (size_t i = 2; status.ok() && i < inputs.size(); ++i) {
          status = backend.Compensate(out.floats(), in(i), out.floats(), n);
        }
        return status.ok() ? backend.Synchronize() : status;
      });
  if (sum.ok()) return sum;
  return absl::Status(sum.status().code(), absl::StrFormat("local reduce on CUDA device %d: %s",
                                                           device, sum.status().message()));
}

}  // namespace gravac::daemon
