#include "client/src/device_staging.h"

#include "absl/strings/str_format.h"
#include "core/ipc/cuda_ipc.h"
#include "core/status.h"

namespace gravac::client {
namespace {

absl::Status CheckOnDevice(int rank, const std::string& name, const char* field, const void* p,
                           int device) {
  int actual = -1;
  absl::StatusOr<bool> is_device = ipc::IsDevicePointer(p, &actual);
  if (!is_device.ok()) {
    return absl::Status(is_device.status().code(),
                        absl::StrFormat("rank %d, tensor '%s', field %s: %s", rank, name, field,
                                        is_device.status().message()));
  }
  if (!*is_device) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s', field %s: %p is host memory but was declared as memory of CUDA "
        "device %d",
        rank, name, field, p, device));
  }
  if (actual != device) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s', field %s: %p is memory of CUDA device %d, not of the declared "
        "device %d",
        rank, name, field, p, actual, device));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceStaging>> DeviceStaging::Begin(int rank,
                                                                    const std::string& name,
                                                                    const void* in, void* out,
                                                                    size_t bytes, int device,
                                                                    void* stream) {
  if (!ipc::CudaIpcAvailable()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s', field device: CUDA tensors need libgravac built with CUDA and a "
        "usable device; this process has none",
        rank, name));
  }
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s', field device: %d is not a CUDA device", rank, name, device));
  }
  std::unique_ptr<DeviceStaging> s(new DeviceStaging());
  s->out_ = out;
  s->device_ = device;
  s->stream_ = stream;
  s->rank_ = rank;
  s->name_ = name;
  s->host_out_.resize(bytes);
  if (bytes == 0) return s;
  RETURN_IF_ERROR(CheckOnDevice(rank, name, "in", in, device));
  RETURN_IF_ERROR(CheckOnDevice(rank, name, "out", out, device));
  s->host_in_.resize(bytes);
  absl::Status copied = ipc::CopyDeviceToHost(s->host_in_.data(), in, bytes, device, stream);
  if (!copied.ok()) {
    return absl::Status(copied.code(), absl::StrFormat("rank %d, tensor '%s', field in: %s", rank,
                                                       name, copied.message()));
  }
  return s;
}

absl::Status DeviceStaging::End() {
  if (host_out_.empty()) return absl::OkStatus();
  absl::Status copied =
      ipc::CopyHostToDevice(out_, host_out_.data(), host_out_.size(), device_, stream_);
  if (!copied.ok()) {
    return absl::Status(copied.code(), absl::StrFormat("rank %d, tensor '%s', field out: %s",
                                                       rank_, name_, copied.message()));
  }
  return absl::OkStatus();
}

}  // namespace gravac::client
