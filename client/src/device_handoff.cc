#include "client/src/device_handoff.h"

#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "client/src/device_staging.h"
#include "core/status.h"

namespace gravac::client {

// Pairs of IPC events (ready, done) per device, reused by later requests: a request's pair goes
// back once its completion ran (or was dropped), when gravacd has recorded `done` for it.
class DeviceHandoff::EventPool {
 public:
  struct Pair {
    std::unique_ptr<DeviceEvent> ready, done;
    int device = -1;
  };
  explicit EventPool(DeviceRuntime* runtime) : runtime_(runtime) {}

  absl::StatusOr<Pair> Take(int device) {
    {
      MutexLock lock(&mu_);
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->device != device) continue;
        Pair p = std::move(*it);
        free_.erase(it);
        return p;
      }
    }
    Pair p;
    p.device = device;
    ASSIGN_OR_RETURN(p.ready, runtime_->CreateEvent(device));
    ASSIGN_OR_RETURN(p.done, runtime_->CreateEvent(device));
    return p;
  }
  void Give(Pair p) {
    MutexLock lock(&mu_);
    if (free_.size() < kMaxFree) free_.push_back(std::move(p));
  }

 private:
  static constexpr size_t kMaxFree = 256;
  DeviceRuntime* const runtime_;
  Mutex mu_;
  std::vector<Pair> free_ ABSL_GUARDED_BY(mu_);
};

namespace {

class IpcCompletion : public DeviceCompletion {
 public:
  IpcCompletion(std::shared_ptr<DeviceHandoff::EventPool> pool, DeviceHandoff::EventPool::Pair p,
                void* stream, int rank, std::string name)
      : pool_(std::move(pool)), pair_(std::move(p)), stream_(stream), rank_(rank),
        name_(std::move(name)) {}
  ~IpcCompletion() override { pool_->Give(std::move(pair_)); }

  absl::Status End() override {
    absl::Status s = pair_.done->StreamWait(stream_);
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrFormat("rank %d, tensor '%s', field stream: waiting "
                                                  "for gravacd's done event: %s",
                                                  rank_, name_, s.message()));
  }

 private:
  std::shared_ptr<DeviceHandoff::EventPool> pool_;
  DeviceHandoff::EventPool::Pair pair_;
  void* stream_;
  int rank_;
  std::string name_;
};

class StagedCompletion : public DeviceCompletion {
 public:
  explicit StagedCompletion(std::unique_ptr<DeviceStaging> staging)
      : staging_(std::move(staging)) {}
  absl::Status End() override { return staging_->End(); }

 private:
  std::unique_ptr<DeviceStaging> staging_;
};

v1::DeviceBuffer ToProto(const ipc::DeviceBufferExport& e) {
  v1::DeviceBuffer b;
  b.set_mem_handle(std::string(reinterpret_cast<const char*>(e.mem_handle),
                               ipc::kCudaIpcHandleBytes));
  b.set_base_address(e.base_address);
  b.set_allocation_bytes(e.allocation_bytes);
  b.set_offset(e.offset);
  b.set_bytes(e.bytes);
  b.set_buffer_id(e.buffer_id);
  b.set_device(e.device);
  return b;
}

}  // namespace

DeviceHandoff::DeviceHandoff(Client* client, DeviceRuntime* runtime, Say say)
    : client_(client), runtime_(runtime), say_(std::move(say)),
      events_(std::make_shared<EventPool>(runtime)) {}

DeviceHandoff::~DeviceHandoff() = default;

absl::Status DeviceHandoff::CheckOnDevice(const std::string& name, const char* field,
                                          const void* p, int device) {
  const int rank = client_->config().rank;
  int actual = -1;
  absl::StatusOr<bool> is_device = runtime_->IsDevicePointer(p, &actual);
  if (!is_device.ok()) {
    return absl::Status(is_device.status().code(),
                        absl::StrFormat("rank %d, tensor '%s', field %s: %s", rank, name, field,
                                        is_device.status().message()));
  }
  if (!*is_device) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s', field %s: %p is host memory but was declared as memory of CUDA "
        "device %d",
        rank, name, field, p, device));
  }
  if (actual != device) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s', field %s: %p is memory of CUDA device %d, not of the declared "
        "device %d",
        rank, name, field, p, actual, device));
  }
  return absl::OkStatus();
}

absl::Status DeviceHandoff::CheckHost(const std::string& name, const char* field,
                                      const void* p) {
  if (p == nullptr || !device_used_.load() || !runtime_->Available()) return absl::OkStatus();
  int device = -1;
  absl::StatusOr<bool> is_device = runtime_->IsDevicePointer(p, &device);
  if (!is_device.ok() || !*is_device) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "rank %d, tensor '%s', field %s: %p is memory of CUDA device %d but was posted as host "
      "memory (use gravac_allreduce_device_async)",
      client_->config().rank, name, field, p, device));
}

void DeviceHandoff::SayOnce(const std::string& why) {
  {
    MutexLock lock(&mu_);
    if (said_) return;
    said_ = true;
  }
  if (say_) {
    say_(absl::StrFormat("rank %d: %s; CUDA tensors are staged through host memory instead "
                         "(said once)",
                         client_->config().rank, why));
  }
}

absl::StatusOr<bool> DeviceHandoff::Mapped(const ipc::DeviceBufferExport& e) {
  const auto key = std::make_tuple(e.device, e.base_address, e.allocation_bytes, e.buffer_id);
  {
    MutexLock lock(&mu_);
    auto it = allocations_.find(key);
    if (it != allocations_.end()) return it->second;
  }
  map_requests_.fetch_add(1);
  std::string reason;
  ASSIGN_OR_RETURN(bool mapped, client_->MapDevice(ToProto(e), &reason));
  if (!mapped) SayOnce(reason);
  MutexLock lock(&mu_);
  if (allocations_.size() >= kMaxAllocations) allocations_.clear();
  allocations_[key] = mapped;
  return mapped;
}

absl::StatusOr<DevicePost> DeviceHandoff::Stage(v1::Request request, const void* in, void* out,
                                                uint64_t bytes, int device, void* stream) {
  const int rank = client_->config().rank;
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceStaging> staging,
                   DeviceStaging::Begin(runtime_, rank, request.name(), in, out, bytes, device,
                                        stream));
  DevicePost post;
  ASSIGN_OR_RETURN(post.state,
                   client_->Submit(std::move(request), staging->host_in(), staging->host_out(),
                                   bytes, 0));
  post.completion = std::make_unique<StagedCompletion>(std::move(staging));
  post.staged = true;
  staged_posts_.fetch_add(1);
  return post;
}

absl::StatusOr<DevicePost> DeviceHandoff::Allreduce(v1::Request request, const void* in,
                                                    void* out, uint64_t bytes, int device,
                                                    void* stream) {
  const int rank = client_->config().rank;
  const std::string name = request.name();
  if (!runtime_->Available()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s', field device: CUDA tensors need libgravac built with CUDA and a "
        "usable device; this process has none",
        rank, name));
  }
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s', field device: %d is not a CUDA device", rank, name, device));
  }
  device_used_.store(true);
  request.set_memory(v1::DEVICE_MEMORY);
  if (bytes > 0) {
    RETURN_IF_ERROR(CheckOnDevice(name, "in", in, device));
    RETURN_IF_ERROR(CheckOnDevice(name, "out", out, device));
  }
  if (bytes == 0) return Stage(std::move(request), in, out, bytes, device, stream);
  if (!client_->device_intake()) {
    SayOnce("this node's gravacd maps no CUDA IPC handles (its Welcome said so: built without "
            "CUDA or no usable device)");
    return Stage(std::move(request), in, out, bytes, device, stream);
  }
  absl::StatusOr<ipc::DeviceBufferExport> e = runtime_->Export(out, bytes, device);
  if (!e.ok()) {
    // Checked above to be memory of `device`: memory CUDA cannot export by IPC (e.g. from
    // cudaMallocAsync's pools) is staged.
    SayOnce(absl::StrFormat("tensor '%s', field out: cannot be exported by CUDA IPC: %s", name,
                            e.status().message()));
    return Stage(std::move(request), in, out, bytes, device, stream);
  }
  ASSIGN_OR_RETURN(bool mapped, Mapped(*e));
  if (!mapped) return Stage(std::move(request), in, out, bytes, device, stream);
  if (in != out) {
    absl::Status copied = runtime_->CopyDeviceToDevice(out, in, bytes, device, stream);
    if (!copied.ok()) {
      return absl::Status(copied.code(), absl::StrFormat("rank %d, tensor '%s', field in: %s",
                                                         rank, name, copied.message()));
    }
  }
  ASSIGN_OR_RETURN(EventPool::Pair events, events_->Take(device));
  if (absl::Status recorded = events.ready->Record(stream); !recorded.ok()) {
    return absl::Status(recorded.code(),
                        absl::StrFormat("rank %d, tensor '%s', field stream: %s", rank, name,
                                        recorded.message()));
  }
  v1::DeviceBuffer* b = request.mutable_device_buffer();
  *b = ToProto(*e);
  b->set_ready_event(events.ready->handle());
  b->set_done_event(events.done->handle());
  request.set_bytes(bytes);
  DevicePost post;
  post.completion = std::make_unique<IpcCompletion>(events_, std::move(events), stream, rank, name);
  ASSIGN_OR_RETURN(post.state, client_->SubmitDevice(std::move(request)));
  ipc_posts_.fetch_add(1);
  return post;
}

}  // namespace gravac::client
