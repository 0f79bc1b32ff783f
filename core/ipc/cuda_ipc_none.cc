// CPU-only build of cuda_ipc.h (GRAVAC_WITH_CUDA=OFF): no device memory can be exported or
// mapped; every call says so and callers fall back to host staging.
#include <utility>

#include "absl/strings/str_format.h"
#include "core/ipc/cuda_ipc.h"

namespace gravac::ipc {
namespace {

absl::Status NoCuda(const char* what) {
  return absl::FailedPreconditionError(
      absl::StrFormat("%s: gravac was built without CUDA (GRAVAC_WITH_CUDA=OFF)", what));
}

}  // namespace

bool BuiltWithCuda() { return false; }
bool CudaIpcAvailable() { return false; }

absl::StatusOr<bool> IsDevicePointer(const void*, int* device) {
  *device = -1;
  return false;
}

absl::StatusOr<DeviceBufferExport> ExportDeviceBuffer(const void*, size_t, int) {
  return NoCuda("exporting a device buffer");
}

absl::Status CopyDeviceToHost(void*, const void*, size_t, int, void*) {
  return NoCuda("copying device memory to the host");
}
absl::Status CopyHostToDevice(void*, const void*, size_t, int, void*) {
  return NoCuda("copying host memory to a device");
}

absl::Status CopyDeviceToDevice(void*, const void*, size_t, int, void*) {
  return NoCuda("copying device memory");
}

absl::StatusOr<IpcEvent> IpcEvent::Create(int) { return NoCuda("creating an IPC event"); }
absl::StatusOr<IpcEvent> IpcEvent::Open(const uint8_t (&)[kCudaIpcHandleBytes], int) {
  return NoCuda("opening an IPC event");
}
IpcEvent::IpcEvent(IpcEvent&& other) noexcept { *this = std::move(other); }
IpcEvent& IpcEvent::operator=(IpcEvent&&) noexcept { return *this; }
IpcEvent::~IpcEvent() = default;
absl::Status IpcEvent::Record(void*) { return NoCuda("recording an IPC event"); }
absl::Status IpcEvent::StreamWait(void*) { return NoCuda("waiting on an IPC event"); }
absl::Status IpcEvent::Synchronize() { return NoCuda("synchronizing an IPC event"); }

absl::StatusOr<void*> CudaIpcOpener::Open(const DeviceBufferExport&) {
  return NoCuda("gravacd cannot map device memory");
}
void CudaIpcOpener::Close(void*, int) {}

bool CudaDeviceAccess::Available() { return false; }
absl::StatusOr<void*> CudaDeviceAccess::Open(const DeviceBufferExport&) {
  return NoCuda("gravacd cannot map device memory");
}
void CudaDeviceAccess::Close(void*, int) {}
absl::Status CudaDeviceAccess::Read(void*, const void*, size_t, int, std::string_view) {
  return NoCuda("reading mapped device memory");
}
absl::Status CudaDeviceAccess::WaitReady(int, std::string_view) {
  return NoCuda("waiting for a worker's CUDA event");
}
absl::Status CudaDeviceAccess::Write(void*, const void*, size_t, int, std::string_view) {
  return NoCuda("writing mapped device memory");
}
absl::Status CudaDeviceAccess::WriteFromDevice(void*, const void*, size_t, int, std::string_view) {
  return NoCuda("writing mapped device memory from device memory");
}

}  // namespace gravac::ipc
