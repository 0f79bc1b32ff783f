// DeviceHandoff: how libgravac posts an allreduce of a CUDA tensor (gravac_allreduce_device_async,
// gravac.torch on CUDA tensors). When gravacd maps CUDA IPC handles (its Welcome says
// device_intake), the tensor is handed over without a host copy: `in` is copied to `out` on the
// caller's stream when they differ, `out`'s allocation is exported (cudaIpcGetMemHandle) and
// mapped by gravacd once (MapDevice, remembered here by device, base address, size and CUDA's
// buffer id, so a block the caching allocator freed and handed out again is asked about again),
// an IPC event recorded on the stream after the tensor orders gravacd's read, and the request's
// completion makes the stream wait on the done event gravacd records after writing the result.
// When gravacd cannot map (no CUDA there, or it cannot open that allocation's handle) or CUDA
// cannot export the buffer (memory of cudaMallocAsync's pools), the tensor is staged through
// host memory (DeviceStaging), which `say` tells once per handoff.
//
// Bad input gets InvalidArgument naming the rank, tensor and field before anything is posted:
// host memory declared as device memory, memory of another device than declared, no CUDA in
// this process; CheckHost refuses device memory posted as host memory (the reverse).
//
// Thread-safety: thread-safe; the client and runtime must outlive it. A DeviceCompletion may
// outlive the handoff.
#ifndef GRAVAC_CLIENT_SRC_DEVICE_HANDOFF_H_
#define GRAVAC_CLIENT_SRC_DEVICE_HANDOFF_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "client/src/client.h"
#include "client/src/device_runtime.h"
#include "core/mutex.h"

namespace gravac::client {

// What a device request does once it completed OK (run once, under the request's lock).
class DeviceCompletion {
 public:
  virtual ~DeviceCompletion() = default;
  // Orders the caller's stream after the result: IPC, it waits on gravacd's done event;
  // staged, the result is copied back on it. The CUDA error naming rank, tensor and field.
  virtual absl::Status End() = 0;
};

struct DevicePost {
  std::shared_ptr<RequestState> state;
  std::unique_ptr<DeviceCompletion> completion;
  bool staged = false;  // through host memory
};

class DeviceHandoff {
 public:
  using Say = std::function<void(const std::string&)>;
  // At most this many allocations are remembered (then forgotten all at once and asked again).
  static constexpr size_t kMaxAllocations = 4096;

  DeviceHandoff(Client* client, DeviceRuntime* runtime, Say say);
  ~DeviceHandoff();

  // Posts `request` (name, dtype, shape, op and options filled in) on `bytes` of device memory
  // `in` -> `out` of CUDA device `device`, after the work queued on `stream` (a cudaStream_t;
  // nullptr: the legacy default stream). Blocks for a MapDevice answer on a new allocation,
  // and for the host copy when staged.
  absl::StatusOr<DevicePost> Allreduce(v1::Request request, const void* in, void* out,
                                       uint64_t bytes, int device, void* stream);

  // InvalidArgument naming the rank, tensor and field when `p` is CUDA device memory (a host
  // call on a CUDA tensor). Checked once this handoff has posted a CUDA tensor (a process that
  // never does gets no CUDA call, so a CPU-only job creates no CUDA context); OK without CUDA.
  absl::Status CheckHost(const std::string& name, const char* field, const void* p);

  int64_t map_requests() const { return map_requests_.load(); }  // MapDevice round trips
  int64_t ipc_posts() const { return ipc_posts_.load(); }
  int64_t staged_posts() const { return staged_posts_.load(); }

  class EventPool;  // reused pairs of IPC events (device_handoff.cc)

 private:
  absl::Status CheckOnDevice(const std::string& name, const char* field, const void* p,
                             int device);
  // Whether gravacd mapped the allocation `e` (asked once per allocation); false: stage.
  absl::StatusOr<bool> Mapped(const ipc::DeviceBufferExport& e);
  absl::StatusOr<DevicePost> Stage(v1::Request request, const void* in, void* out,
                                   uint64_t bytes, int device, void* stream);
  void SayOnce(const std::string& why);

  Client* const client_;
  DeviceRuntime* const runtime_;
  const Say say_;
  std::shared_ptr<EventPool> events_;
  Mutex mu_;
  // (device, base address, allocation bytes, buffer id) -> mapped by gravacd.
  std::map<std::tuple<int, uint64_t, uint64_t, uint64_t>, bool> allocations_ ABSL_GUARDED_BY(mu_);
  bool said_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> device_used_{false};  // Allreduce was called (CUDA is in use here)
  std::atomic<int64_t> map_requests_{0}, ipc_posts_{0}, staged_posts_{0};
};

}  // namespace gravac::client

#endif  // GRAVAC_CLIENT_SRC_DEVICE_HANDOFF_H_
