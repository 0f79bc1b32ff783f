// DeviceRuntime: the CUDA calls libgravac makes for CUDA tensors (classifying a pointer,
// exporting a buffer by CUDA IPC, copies on the caller's stream, interprocess events), behind
// one interface so that DeviceHandoff's rules run without a GPU: CudaDeviceRuntime is the real
// one (core/ipc/cuda_ipc.h; built without CUDA it is never Available), tests use fakes.
//
// Thread-safety: implementations are thread-safe; a DeviceEvent is thread-compatible.
#ifndef GRAVAC_CLIENT_SRC_DEVICE_RUNTIME_H_
#define GRAVAC_CLIENT_SRC_DEVICE_RUNTIME_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/ipc/device_export.h"

namespace gravac::client {

// An interprocess CUDA event of this process; gravacd opens it from handle().
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  virtual std::string handle() const = 0;  // kCudaIpcHandleBytes bytes
  // Records the event on `stream` (a cudaStream_t; nullptr: the legacy default stream).
  virtual absl::Status Record(void* stream) = 0;
  // Makes `stream` wait for the event's most recent record (by either process); non-blocking.
  virtual absl::Status StreamWait(void* stream) = 0;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  // Built with CUDA and a usable device in this process.
  virtual bool Available() = 0;
  // True for device memory (*device: its ordinal), false for host memory.
  virtual absl::StatusOr<bool> IsDevicePointer(const void* p, int* device) = 0;
  virtual absl::StatusOr<ipc::DeviceBufferExport> Export(const void* p, size_t bytes,
                                                         int device) = 0;
  // Queued on `stream` after its work; does not wait.
  virtual absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes, int device,
                                          void* stream) = 0;
  // Return once `host` holds the data / may be reused (core/ipc/cuda_ipc.h).
  virtual absl::Status CopyDeviceToHost(void* host, const void* dev, size_t bytes, int device,
                                        void* stream) = 0;
  virtual absl::Status CopyHostToDevice(void* dev, const void* host, size_t bytes, int device,
                                        void* stream) = 0;
  virtual absl::StatusOr<std::unique_ptr<DeviceEvent>> CreateEvent(int device) = 0;
};

// The CUDA runtime (core/ipc/cuda_ipc.h). Available() asks CUDA once.
class CudaDeviceRuntime : public DeviceRuntime {
 public:
  bool Available() override;
  absl::StatusOr<bool> IsDevicePointer(const void* p, int* device) override;
  absl::StatusOr<ipc::DeviceBufferExport> Export(const void* p, size_t bytes,
                                                 int device) override;
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes, int device,
                                  void* stream) override;
  absl::Status CopyDeviceToHost(void* host, const void* dev, size_t bytes, int device,
                                void* stream) override;
  absl::Status CopyHostToDevice(void* dev, const void* host, size_t bytes, int device,
                                void* stream) override;
  absl::StatusOr<std::unique_ptr<DeviceEvent>> CreateEvent(int device) override;

 private:
  std::atomic<int> available_{-1};  // -1: not asked yet
};

}  // namespace gravac::client

#endif  // GRAVAC_CLIENT_SRC_DEVICE_RUNTIME_H_
