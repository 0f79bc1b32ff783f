#include "client/src/device_staging.h"

#include "absl/strings/str_format.h"

namespace gravac::client {

absl::StatusOr<std::unique_ptr<DeviceStaging>> DeviceStaging::Begin(
    DeviceRuntime* runtime, int rank, const std::string& name, const void* in, void* out,
    size_t bytes, int device, void* stream) {
  std::unique_ptr<DeviceStaging> s(new DeviceStaging());
  s->runtime_ = runtime;
  s->out_ = out;
  s->device_ = device;
  s->stream_ = stream;
  s->rank_ = rank;
  s->name_ = name;
  s->host_out_.resize(bytes);
  if (bytes == 0) return s;
  s->host_in_.resize(bytes);
  absl::Status copied = runtime->CopyDeviceToHost(s->host_in_.data(), in, bytes, device, stream);
  if (!copied.ok()) {
    return absl::Status(copied.code(), absl::StrFormat("rank %d, tensor '%s', field in: %s", rank,
                                                       name, copied.message()));
  }
  return s;
}

absl::Status DeviceStaging::End() {
  if (host_out_.empty()) return absl::OkStatus();
  absl::Status copied =
      runtime_->CopyHostToDevice(out_, host_out_.data(), host_out_.size(), device_, stream_);
  if (!copied.ok()) {
    return absl::Status(copied.code(), absl::StrFormat("rank %d, tensor '%s', field out: %s",
                                                       rank_, name_, copied.message()));
  }
  return absl::OkStatus();
}

}  // namespace gravac::client
