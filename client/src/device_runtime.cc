#include "client/src/device_runtime.h"

#include <utility>

#include "core/ipc/cuda_ipc.h"
#include "core/status.h"

namespace gravac::client {
namespace {

class CudaEvent : public DeviceEvent {
 public:
  explicit CudaEvent(ipc::IpcEvent event) : event_(std::move(event)) {}
  std::string handle() const override {
    return std::string(reinterpret_cast<const char*>(event_.handle()), ipc::kCudaIpcHandleBytes);
  }
  absl::Status Record(void* stream) override { return event_.Record(stream); }
  absl::Status StreamWait(void* stream) override { return event_.StreamWait(stream); }

 private:
  ipc::IpcEvent event_;
};

}  // namespace

bool CudaDeviceRuntime::Available() {
  if (available_.load() < 0) available_.store(ipc::CudaIpcAvailable() ? 1 : 0);
  return available_.load() == 1;
}

absl::StatusOr<bool> CudaDeviceRuntime::IsDevicePointer(const void* p, int* device) {
  return ipc::IsDevicePointer(p, device);
}

absl::StatusOr<ipc::DeviceBufferExport> CudaDeviceRuntime::Export(const void* p, size_t bytes,
                                                                  int device) {
  return ipc::ExportDeviceBuffer(p, bytes, device);
}

absl::Status CudaDeviceRuntime::CopyDeviceToDevice(void* dst, const void* src, size_t bytes,
                                                   int device, void* stream) {
  return ipc::CopyDeviceToDevice(dst, src, bytes, device, stream);
}

absl::Status CudaDeviceRuntime::CopyDeviceToHost(void* host, const void* dev, size_t bytes,
                                                 int device, void* stream) {
  return ipc::CopyDeviceToHost(host, dev, bytes, device, stream);
}

absl::Status CudaDeviceRuntime::CopyHostToDevice(void* dev, const void* host, size_t bytes,
                                                 int device, void* stream) {
  return ipc::CopyHostToDevice(dev, host, bytes, device, stream);
}

absl::StatusOr<std::unique_ptr<DeviceEvent>> CudaDeviceRuntime::CreateEvent(int device) {
  ASSIGN_OR_RETURN(ipc::IpcEvent event, ipc::IpcEvent::Create(device));
  return std::make_unique<CudaEvent>(std::move(event));
}

}  // namespace gravac::client
