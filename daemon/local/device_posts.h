// The daemon's checks of device buffers that workers hand over by CUDA IPC (worker.proto
// DeviceBuffer, MapDevice): the proto's bytes turned into a DeviceBufferExport, and the rules a
// device request must follow (its memory type, its size, one CUDA device per worker).
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_DAEMON_LOCAL_DEVICE_POSTS_H_
#define GRAVAC_DAEMON_LOCAL_DEVICE_POSTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/ipc/device_export.h"
#include "gravac/v1/worker.pb.h"

namespace gravac::daemon {

// The export a DeviceBuffer names. InvalidArgument naming `rank`, `tensor` ("" for a
// MapDevice) and the field when a handle is not kCudaIpcHandleBytes long (events may be empty)
// or the buffer does not fit its allocation (ipc::ValidateExport).
absl::StatusOr<ipc::DeviceBufferExport> ExportFromProto(const v1::DeviceBuffer& buffer, int rank,
                                                        const std::string& tensor);

// A Request carrying a device buffer from global rank `rank` whose earlier device tensors were
// on CUDA device `worker_device` (-1: none yet). InvalidArgument naming the rank, tensor and
// field when it is declared as host memory, its buffer's size differs from the request's bytes,
// it has no done event, or it lies on another device than the worker's earlier ones (a worker
// uses one device: torch.cuda.set_device(hvd.local_rank())).
absl::Status CheckDeviceRequest(const v1::Request& request, int rank, int worker_device);

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_LOCAL_DEVICE_POSTS_H_
