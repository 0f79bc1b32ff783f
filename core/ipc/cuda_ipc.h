// CUDA IPC handoff of device buffers between a worker (the client library) and gravacd.
//
// The worker exports a device buffer as a DeviceBufferExport: the cudaIpcMemHandle of the
// allocation that holds it, the allocation's base address and size in the worker's address space,
// and the buffer's offset and size inside it. gravacd maps it with a DeviceMappingCache, which
// opens each allocation once and keeps the mapping: PyTorch's caching allocator hands the same
// block to many tensors, so a later export of the same (worker, base address) with the same
// handle is found in the cache; a different handle at a cached base address means the block was
// freed and the address reused by a new allocation, so the old mapping is closed and the new one
// opened. Stream ordering crosses the process boundary with interprocess events (IpcEvent):
// the worker records its event after producing the gradient, gravacd makes its stream wait on
// it, and the reverse for completion.
//
// Built without CUDA (GRAVAC_WITH_CUDA=OFF, cuda_ipc_none.cc) every call fails with
// kFailedPrecondition "built without CUDA", and CudaIpcAvailable() is false: callers fall back to
// host staging.
//
// Thread-safety: the free functions are thread-safe; a DeviceMappingCache and an IpcEvent are
// thread-compatible (one owner thread, e.g. the daemon's local server).
#ifndef GRAVAC_CORE_IPC_CUDA_IPC_H_
#define GRAVAC_CORE_IPC_CUDA_IPC_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/ipc/device_access.h"
#include "core/ipc/device_export.h"
#include "core/ipc/mapping_cache.h"

namespace gravac::ipc {

// True in the build with CUDA (cuda_ipc.cc), false in the CPU-only one.
bool BuiltWithCuda();

// True when gravac was built with CUDA and at least one device is usable in this process.
bool CudaIpcAvailable();

// Memory type of `ptr` as CUDA sees it: true for device (or managed) memory of some device,
// false for host memory CUDA does not know (or pinned host memory). *device gets the ordinal.
absl::StatusOr<bool> IsDevicePointer(const void* ptr, int* device);

// Exports [ptr, ptr + bytes) for another process. `device` is the ordinal the caller declares;
// kInvalidArgument when ptr is host memory ("host pointer declared as device"), lives on another
// device than declared, or the range does not fit in its allocation.
absl::StatusOr<DeviceBufferExport> ExportDeviceBuffer(const void* ptr, size_t bytes, int device);

// Host staging of device memory (the fallback when gravacd cannot map a buffer). Both order the
// copy after the work queued on `stream` (a cudaStream_t; nullptr: the legacy default stream) on
// `device`, and restore the calling thread's current device. CopyDeviceToHost returns once
// `host` holds the data; CopyHostToDevice returns once `host` may be reused (the copy into `dev`
// completes in stream order).
absl::Status CopyDeviceToHost(void* host, const void* dev, size_t bytes, int device, void* stream);
absl::Status CopyHostToDevice(void* dev, const void* host, size_t bytes, int device, void* stream);
// Queues a copy between two buffers of `device` on `stream`; does not wait for it.
absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes, int device,
                                void* stream);

// An interprocess CUDA event (cudaEventInterprocess | cudaEventDisableTiming) owned by one
// process and opened by the other from its handle.
class IpcEvent {
 public:
  // Creates an event on `device` and exports its handle.
  static absl::StatusOr<IpcEvent> Create(int device);
  // Opens the peer's event from its handle (on `device`).
  static absl::StatusOr<IpcEvent> Open(const uint8_t (&handle)[kCudaIpcHandleBytes], int device);

  IpcEvent(IpcEvent&& other) noexcept;
  IpcEvent& operator=(IpcEvent&& other) noexcept;
  IpcEvent(const IpcEvent&) = delete;
  IpcEvent& operator=(const IpcEvent&) = delete;
  ~IpcEvent();

  const uint8_t* handle() const { return handle_; }
  // Records the event on `stream` (a cudaStream_t; nullptr is the legacy default stream).
  absl::Status Record(void* stream);
  // Makes `stream` wait for the most recent Record (by either process). Does not block the host.
  absl::Status StreamWait(void* stream);
  // Blocks the host until the most recent Record completed.
  absl::Status Synchronize();

 private:
  IpcEvent() = default;
  void* event_ = nullptr;  // cudaEvent_t
  int device_ = -1;
  uint8_t handle_[kCudaIpcHandleBytes] = {};
};

// MemHandleOpener over the CUDA runtime: cudaIpcOpenMemHandle (lazy peer access) on the
// export's device and cudaIpcCloseMemHandle; the calling thread's current device is restored.
// Built without CUDA, Open fails with kFailedPrecondition "built without CUDA".
class CudaIpcOpener : public MemHandleOpener {
 public:
  absl::StatusOr<void*> Open(const DeviceBufferExport& e) override;
  void Close(void* base, int device) override;
};

// gravacd's DeviceAccess over the CUDA runtime: CudaIpcOpener's open and close, copies on the
// legacy default stream of the buffer's device after a cudaStreamWaitEvent on the worker's
// ready event, its done event recorded after the copy back (from host memory, or device to device
// for WriteFromDevice, which then waits for the copy on that stream). Opened events are kept by
// handle (a worker reuses its events; at most kMaxEvents, then all are closed and opened again).
// Built without CUDA, Available() is false and every call fails with kFailedPrecondition.
// Thread-safe (one mutex around the calls).
class CudaDeviceAccess : public DeviceAccess {
 public:
  static constexpr size_t kMaxEvents = 1024;

  bool Available() override;
  absl::StatusOr<void*> Open(const DeviceBufferExport& e) override;
  void Close(void* base, int device) override;
  absl::Status Read(void* dst, const void* src, size_t bytes, int device,
                    std::string_view ready_event) override;
  absl::Status Write(void* dst, const void* src, size_t bytes, int device,
                     std::string_view done_event) override;
  absl::Status WriteFromDevice(void* dst, const void* src_device, size_t bytes, int device,
                               std::string_view done_event) override;
  absl::Status WaitReady(int device, std::string_view ready_event) override;

 private:
  // The opened event of `handle` (kCudaIpcHandleBytes bytes) on `device`.
  absl::StatusOr<IpcEvent*> EventLocked(std::string_view handle, int device);

  std::mutex mu_;
  CudaIpcOpener opener_;
  std::map<std::string, IpcEvent> events_;  // by handle bytes
};

// gravacd's mappings of its workers' device allocations: a MappingCache (mapping_cache.h: keys,
// reuse, eviction) over a CudaIpcOpener.
class DeviceMappingCache {
 public:
  explicit DeviceMappingCache(size_t max_mappings = MappingCache::kDefaultMaxMappings)
      : cache_(&opener_, max_mappings) {}

  // MappingCache::Map: kInvalidArgument for a malformed export (before any CUDA call); the CUDA
  // error naming the worker, field device_handle, device and address when the handle cannot be
  // opened (freed, foreign, or gravac built without CUDA).
  absl::StatusOr<void*> Map(int worker, const DeviceBufferExport& e) {
    return cache_.Map(worker, e);
  }
  void DropWorker(int worker) { cache_.DropWorker(worker); }

  int64_t opens() const { return cache_.opens(); }  // cudaIpcOpenMemHandle calls so far
  size_t size() const { return cache_.size(); }

 private:
  CudaIpcOpener opener_;  // before cache_, which closes its mappings through it
  MappingCache cache_;
};

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_CUDA_IPC_H_
