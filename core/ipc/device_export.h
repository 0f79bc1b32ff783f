// DeviceBufferExport: one device buffer as a worker exports it for gravacd (CUDA IPC handoff,
// cuda_ipc.h), plain bytes that need no CUDA to hold or check; ValidateExport is the check both
// builds make before any driver call.
//
// Thread-safety: plain data and a stateless check.
#ifndef GRAVAC_CORE_IPC_DEVICE_EXPORT_H_
#define GRAVAC_CORE_IPC_DEVICE_EXPORT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace gravac::ipc {

// Size of cudaIpcMemHandle_t and cudaIpcEventHandle_t (CUDA_IPC_HANDLE_SIZE).
inline constexpr size_t kCudaIpcHandleBytes = 64;

struct DeviceBufferExport {
  uint8_t mem_handle[kCudaIpcHandleBytes] = {};  // cudaIpcMemHandle_t of the allocation
  uint64_t base_address = 0;                     // allocation base in the exporter's address space
  uint64_t allocation_bytes = 0;                 // size of that allocation
  uint64_t offset = 0;                           // buffer start - base_address
  uint64_t bytes = 0;                            // buffer size
  // CUDA's process-wide unique id of the allocation (CU_POINTER_ATTRIBUTE_BUFFER_ID): a block
  // freed and allocated again at the same address gets a new one. 0 when unknown.
  uint64_t buffer_id = 0;
  int32_t device = -1;  // CUDA ordinal in the exporter
};

// kInvalidArgument naming `worker` and the field when [offset, offset + bytes) does not fit in the
// exported allocation, the allocation is empty or wraps the address space, or the device is not
// an ordinal.
absl::Status ValidateExport(int worker, const DeviceBufferExport& e);

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_DEVICE_EXPORT_H_
