// DeviceAccess: gravacd's CUDA side for the device buffers its workers hand over by CUDA IPC
// (cuda_ipc.h): opening and closing their allocations (MemHandleOpener, through a MappingCache)
// and the copies between a mapped buffer and host memory (or gravacd's own device memory, for a
// result the engine left there), ordered by the workers' IPC events.
// CudaDeviceAccess (cuda_ipc.h) is the real one; tests use fakes, so everything of the device
// data path but the CUDA calls runs without a GPU.
//
// Thread-safety: implementations are thread-safe (gravacd --serve_jobs runs one worker server
// thread per job over one DeviceAccess).
#ifndef GRAVAC_CORE_IPC_DEVICE_ACCESS_H_
#define GRAVAC_CORE_IPC_DEVICE_ACCESS_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "core/ipc/mapping_cache.h"

namespace gravac::ipc {

class DeviceAccess : public MemHandleOpener {
 public:
  // Whether this process can map IPC handles at all (built with CUDA, a usable device). Workers
  // learn it from the Welcome; false: they stage their CUDA tensors through host memory.
  virtual bool Available() = 0;
  // Copies `bytes` of the mapped buffer `src` (on `device`) into host memory `dst` after the
  // work the worker recorded on `ready_event` (a cudaIpcEventHandle_t, kCudaIpcHandleBytes
  // bytes; empty: none). Blocks until `dst` holds the data.
  virtual absl::Status Read(void* dst, const void* src, size_t bytes, int device,
                            std::string_view ready_event) = 0;
  // Blocks until the work the worker recorded on `ready_event` (as for Read; empty: returns at
  // once) is done on `device`, so that the mapped buffers it covers can be read in place (the
  // local reduce in device memory, daemon/local/device_reduce.h).
  virtual absl::Status WaitReady(int device, std::string_view ready_event) = 0;
  // Copies host memory `src` into the mapped buffer `dst` (on `device`), then records
  // `done_event` (empty: none) after the copy. Returns once `src` may be reused.
  virtual absl::Status Write(void* dst, const void* src, size_t bytes, int device,
                             std::string_view done_event) = 0;
  // As Write, but `src_device` is `bytes` of gravacd's own memory of the same CUDA device `device`
  // (a result the engine left there, TensorResult::device_data): a device-to-device copy into the
  // mapped buffer `dst`, then `done_event` recorded after it. `src_device` must be complete (no
  // work pending on it on another stream). Returns once the copy has finished, so that
  // `src_device` may be reused (its pool hands it to the next result).
  virtual absl::Status WriteFromDevice(void* dst, const void* src_device, size_t bytes, int device,
                                       std::string_view done_event) = 0;
};

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_DEVICE_ACCESS_H_
