#include "daemon/local/device_posts.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::daemon {
namespace {

std::string Who(int rank, const std::string& tensor) {
  if (tensor.empty()) return absl::StrFormat("rank %d", rank);
  return absl::StrFormat("rank %d, tensor '%s'", rank, tensor);
}

absl::Status CheckHandle(const std::string& bytes, bool may_be_empty, int rank,
                         const std::string& tensor, const char* field) {
  if (bytes.size() == ipc::kCudaIpcHandleBytes || (may_be_empty && bytes.empty())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s, field device_buffer.%s: %d bytes, a CUDA IPC handle has %d",
                      Who(rank, tensor), field, bytes.size(), ipc::kCudaIpcHandleBytes));
}

}  // namespace

absl::StatusOr<ipc::DeviceBufferExport> ExportFromProto(const v1::DeviceBuffer& buffer, int rank,
                                                        const std::string& tensor) {
  RETURN_IF_ERROR(CheckHandle(buffer.mem_handle(), false, rank, tensor, "mem_handle"));
  RETURN_IF_ERROR(CheckHandle(buffer.ready_event(), true, rank, tensor, "ready_event"));
  RETURN_IF_ERROR(CheckHandle(buffer.done_event(), true, rank, tensor, "done_event"));
  ipc::DeviceBufferExport e;
  std::memcpy(e.mem_handle, buffer.mem_handle().data(), ipc::kCudaIpcHandleBytes);
  e.base_address = buffer.base_address();
  e.allocation_bytes = buffer.allocation_bytes();
  e.offset = buffer.offset();
  e.bytes = buffer.bytes();
  e.buffer_id = buffer.buffer_id();
  e.device = buffer.device();
  absl::Status valid = ipc::ValidateExport(rank, e);
  if (!valid.ok()) {
    return absl::Status(valid.code(), absl::StrFormat("%s: %s", Who(rank, tensor),
                                                      valid.message()));
  }
  return e;
}

absl::Status CheckDeviceRequest(const v1::Request& request, int rank, int worker_device) {
  const std::string who = Who(rank, request.name());
  if (request.memory() != v1::DEVICE_MEMORY) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s, field memory: host memory, but the request carries a CUDA device buffer", who));
  }
  if (request.kind() != v1::ALLREDUCE) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s, field device_buffer: only allreduces take device buffers", who));
  }
  const v1::DeviceBuffer& b = request.device_buffer();
  if (b.bytes() != request.bytes()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s, field device_buffer.bytes: %d, but the request has %d bytes", who,
                        b.bytes(), request.bytes()));
  }
  if (b.done_event().empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s, field device_buffer.done_event: missing (the worker's stream waits on it)", who));
  }
  if (worker_device >= 0 && b.device() != worker_device) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s, field device: CUDA device %d, but this worker's earlier tensors are on device %d "
        "(a worker uses one device: torch.cuda.set_device(hvd.local_rank()))",
        who, b.device(), worker_device));
  }
  return absl::OkStatus();
}

}  // namespace gravac::daemon
