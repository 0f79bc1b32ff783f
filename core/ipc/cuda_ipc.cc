// CUDA build of cuda_ipc.h (the CPU-only build compiles cuda_ipc_none.cc instead).
#include "core/ipc/cuda_ipc.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/strings/str_format.h"
#include "core/cuda/cuda_status.h"
#include "core/status.h"

namespace gravac::ipc {
namespace {

using AddressRangeFn = CUresult (*)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);
using PointerAttributeFn = CUresult (*)(void* data, CUpointer_attribute attribute, CUdeviceptr ptr);

// A driver function through the runtime's entry point, so that nothing links libcuda directly
// (the library loads on machines without a driver, where every call then fails).
absl::StatusOr<void*> DriverFunction(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found));
  if (fn == nullptr || found != cudaDriverEntryPointSuccess) {
    return absl::FailedPreconditionError(absl::StrFormat("the CUDA driver has no %s", name));
  }
  return fn;
}

// CUDA's process-wide unique id of the allocation holding `ptr`.
absl::StatusOr<uint64_t> BufferId(const void* ptr) {
  ASSIGN_OR_RETURN(void* fn, DriverFunction("cuPointerGetAttribute"));
  unsigned long long id = 0;  // NOLINT(runtime/int): the driver's type
  CUresult r = reinterpret_cast<PointerAttributeFn>(fn)(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                                        reinterpret_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cuPointerGetAttribute(BUFFER_ID, %p) failed with CUresult %d", ptr, r));
  }
  return static_cast<uint64_t>(id);
}

// The allocation (base and size) that holds `ptr`.
absl::Status AllocationRange(const void* ptr, uint64_t* base, uint64_t* size) {
  ASSIGN_OR_RETURN(void* fn, DriverFunction("cuMemGetAddressRange"));
  CUdeviceptr b = 0;
  size_t s = 0;
  CUresult r = reinterpret_cast<AddressRangeFn>(fn)(&b, &s, reinterpret_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cuMemGetAddressRange(%p) failed with CUresult %d", ptr, r));
  }
  *base = b;
  *size = s;
  return absl::OkStatus();
}

}  // namespace

bool BuiltWithCuda() { return true; }

bool CudaIpcAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

absl::StatusOr<bool> IsDevicePointer(const void* ptr, int* device) {
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();  // unregistered host memory on old drivers; clear the sticky-free error
    if (err == cudaErrorInvalidValue) return false;
    GRAVAC_CUDA_RETURN_IF_ERROR(err);
  }
  *device = attr.device;
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

absl::StatusOr<DeviceBufferExport> ExportDeviceBuffer(const void* ptr, size_t bytes, int device) {
  int actual = -1;
  absl::StatusOr<bool> is_device = IsDevicePointer(ptr, &actual);
  if (!is_device.ok()) return is_device.status();
  if (!*is_device) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "field data: %p is host memory but was declared as memory of CUDA device %d", ptr, device));
  }
  if (actual != device) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "field device: %p is memory of CUDA device %d but was declared on device %d", ptr, actual,
        device));
  }
  DeviceBufferExport e;
  e.device = device;
  e.bytes = bytes;
  RETURN_IF_ERROR(AllocationRange(ptr, &e.base_address, &e.allocation_bytes));
  ASSIGN_OR_RETURN(e.buffer_id, BufferId(ptr));
  e.offset = reinterpret_cast<uint64_t>(ptr) - e.base_address;
  if (e.offset + bytes > e.allocation_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("field bytes: %d bytes at offset %d overrun the allocation of %d bytes",
                        bytes, e.offset, e.allocation_bytes));
  }
  int previous = 0;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaIpcMemHandle_t h;
  cudaError_t err = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(e.base_address));
  cudaSetDevice(previous);
  GRAVAC_CUDA_RETURN_IF_ERROR(err);
  static_assert(sizeof(h) == kCudaIpcHandleBytes);
  std::memcpy(e.mem_handle, &h, sizeof(h));
  return e;
}

namespace {

// Runs `copy` with `device` current, then restores the caller's device.
template <typename F>
absl::Status OnDevice(int device, F copy) {
  int previous = 0;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  absl::Status s = copy();
  cudaSetDevice(previous);
  return s;
}

}  // namespace

absl::Status CopyDeviceToHost(void* host, const void* dev, size_t bytes, int device, void* stream) {
  return OnDevice(device, [&]() -> absl::Status {
    auto s = static_cast<cudaStream_t>(stream);
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s));
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return absl::OkStatus();
  });
}

absl::Status CopyHostToDevice(void* dev, const void* host, size_t bytes, int device, void* stream) {
  return OnDevice(device, [&]() -> absl::Status {
    auto s = static_cast<cudaStream_t>(stream);
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
    // From pageable memory the call returns once `host` was read; synchronising keeps that true
    // for pinned memory too.
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return absl::OkStatus();
  });
}

absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes, int device,
                                void* stream) {
  return OnDevice(device, [&]() -> absl::Status {
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                                static_cast<cudaStream_t>(stream)));
    return absl::OkStatus();
  });
}

absl::StatusOr<IpcEvent> IpcEvent::Create(int device) {
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  IpcEvent ev;
  ev.device_ = device;
  cudaEvent_t e = nullptr;
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming));
  ev.event_ = e;
  cudaIpcEventHandle_t h;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaIpcGetEventHandle(&h, e));
  static_assert(sizeof(h) == kCudaIpcHandleBytes);
  std::memcpy(ev.handle_, &h, sizeof(h));
  return ev;
}

absl::StatusOr<IpcEvent> IpcEvent::Open(const uint8_t (&handle)[kCudaIpcHandleBytes], int device) {
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  IpcEvent ev;
  ev.device_ = device;
  cudaIpcEventHandle_t h;
  std::memcpy(&h, handle, sizeof(h));
  cudaEvent_t e = nullptr;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaIpcOpenEventHandle(&e, h));
  ev.event_ = e;
  std::memcpy(ev.handle_, handle, sizeof(h));
  return ev;
}

IpcEvent::IpcEvent(IpcEvent&& other) noexcept { *this = std::move(other); }

IpcEvent& IpcEvent::operator=(IpcEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
    event_ = other.event_;
    device_ = other.device_;
    std::memcpy(handle_, other.handle_, sizeof(handle_));
    other.event_ = nullptr;
  }
  return *this;
}

IpcEvent::~IpcEvent() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

absl::Status IpcEvent::Record(void* stream) {
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)));
  return absl::OkStatus();
}

absl::Status IpcEvent::StreamWait(void* stream) {
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0));
  return absl::OkStatus();
}

absl::Status IpcEvent::Synchronize() {
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
  return absl::OkStatus();
}

absl::StatusOr<void*> CudaIpcOpener::Open(const DeviceBufferExport& e) {
  int previous = 0;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  cudaError_t err = cudaSetDevice(e.device);
  void* base = nullptr;
  if (err == cudaSuccess) {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, e.mem_handle, sizeof(h));
    err = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess);
  }
  cudaSetDevice(previous);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so later calls do not report it
    return gravac::cuda::CudaErrorToStatus(err, "cudaIpcOpenMemHandle", __FILE__, __LINE__);
  }
  return base;
}

void CudaIpcOpener::Close(void* base, int device) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = device;
  cudaSetDevice(device);
  cudaIpcCloseMemHandle(base);
  cudaSetDevice(previous);
  cudaGetLastError();
}

}  // namespace gravac::ipc

namespace gravac::ipc {

bool CudaDeviceAccess::Available() { return CudaIpcAvailable(); }

absl::StatusOr<void*> CudaDeviceAccess::Open(const DeviceBufferExport& e) {
  std::lock_guard<std::mutex> lock(mu_);
  return opener_.Open(e);
}

void CudaDeviceAccess::Close(void* base, int device) {
  std::lock_guard<std::mutex> lock(mu_);
  opener_.Close(base, device);
}

absl::StatusOr<IpcEvent*> CudaDeviceAccess::EventLocked(std::string_view handle, int device) {
  if (handle.size() != kCudaIpcHandleBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "an IPC event handle has %d bytes, not %d", handle.size(), kCudaIpcHandleBytes));
  }
  std::string key(handle);
  key.push_back(static_cast<char>(device));
  auto it = events_.find(key);
  if (it != events_.end()) return &it->second;
  if (events_.size() >= kMaxEvents) events_.clear();
  uint8_t h[kCudaIpcHandleBytes];
  std::memcpy(h, handle.data(), kCudaIpcHandleBytes);
  ASSIGN_OR_RETURN(IpcEvent opened, IpcEvent::Open(h, device));
  return &events_.emplace(std::move(key), std::move(opened)).first->second;
}

absl::Status CudaDeviceAccess::Read(void* dst, const void* src, size_t bytes, int device,
                                    std::string_view ready_event) {
  std::lock_guard<std::mutex> lock(mu_);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  if (!ready_event.empty()) {
    ASSIGN_OR_RETURN(IpcEvent * ready, EventLocked(ready_event, device));
    RETURN_IF_ERROR(ready->StreamWait(nullptr));
  }
  if (bytes == 0) return absl::OkStatus();
  return CopyDeviceToHost(dst, src, bytes, device, nullptr);
}

absl::Status CudaDeviceAccess::WaitReady(int device, std::string_view ready_event) {
  if (ready_event.empty()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ASSIGN_OR_RETURN(IpcEvent * ready, EventLocked(ready_event, device));
  return ready->Synchronize();
}

absl::Status CudaDeviceAccess::Write(void* dst, const void* src, size_t bytes, int device,
                                     std::string_view done_event) {
  std::lock_guard<std::mutex> lock(mu_);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  if (bytes > 0) RETURN_IF_ERROR(CopyHostToDevice(dst, src, bytes, device, nullptr));
  if (done_event.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(IpcEvent * done, EventLocked(done_event, device));
  return done->Record(nullptr);
}

absl::Status CudaDeviceAccess::WriteFromDevice(void* dst, const void* src_device, size_t bytes,
                                               int device, std::string_view done_event) {
  std::lock_guard<std::mutex> lock(mu_);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  if (bytes > 0) RETURN_IF_ERROR(CopyDeviceToDevice(dst, src_device, bytes, device, nullptr));
  if (!done_event.empty()) {
    ASSIGN_OR_RETURN(IpcEvent * done, EventLocked(done_event, device));
    RETURN_IF_ERROR(done->Record(nullptr));
  }
  // The caller reuses src_device once this returns (the engine's pool of results).
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
  return absl::OkStatus();
}

}  // namespace gravac::ipc
