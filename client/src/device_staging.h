// Host staging of a CUDA tensor: the fallback of DeviceHandoff when gravacd cannot map it (no
// CUDA in gravacd, a handle it cannot open). The tensor is copied to host memory after the work
// on the caller's stream, reduced as a host tensor, and its result copied back on that stream
// before the request reports done. The caller checked the buffers first (DeviceHandoff).
//
// Thread-safety: one DeviceStaging belongs to one request; End runs once (under the request's
// lock).
#ifndef GRAVAC_CLIENT_SRC_DEVICE_STAGING_H_
#define GRAVAC_CLIENT_SRC_DEVICE_STAGING_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/src/device_runtime.h"

namespace gravac::client {

class DeviceStaging {
 public:
  // The CUDA error naming rank, tensor and field when the copy fails. Blocks until `in` is on
  // the host. `runtime` must outlive the staging.
  static absl::StatusOr<std::unique_ptr<DeviceStaging>> Begin(DeviceRuntime* runtime, int rank,
                                                              const std::string& name,
                                                              const void* in, void* out,
                                                              size_t bytes, int device,
                                                              void* stream);

  const void* host_in() const { return host_in_.data(); }
  void* host_out() { return host_out_.data(); }

  // Copies the host result to `out` on the stream; returns once the host copy may be freed.
  absl::Status End();

 private:
  DeviceStaging() = default;
  DeviceRuntime* runtime_ = nullptr;
  std::vector<char> host_in_;
  std::vector<char> host_out_;
  void* out_ = nullptr;
  int device_ = -1;
  void* stream_ = nullptr;
  int rank_ = 0;
  std::string name_;
};

}  // namespace gravac::client

#endif  // GRAVAC_CLIENT_SRC_DEVICE_STAGING_H_
