// Fakes of the two CUDA seams of the IPC handoff, so that everything but the CUDA calls runs
// without a GPU: FakeDeviceRuntime (libgravac's side, client/src/device_runtime.h) treats
// registered host arrays as "device memory" of a chosen device, exports them with a handle that
// carries their address, and copies with memcpy; FakeDeviceAccess (gravacd's side,
// core/ipc/device_access.h) opens such a handle by reading that address back (client and server
// share the test's process), or fails as told. Both count what they were asked to do.
//
// Thread-safety: thread-safe (one mutex each).
#ifndef GRAVAC_TESTS_CLIENT_FAKE_DEVICE_H_
#define GRAVAC_TESTS_CLIENT_FAKE_DEVICE_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "client/src/device_runtime.h"
#include "core/ipc/device_access.h"
#include "core/mutex.h"
#include "daemon/collectives/reduce.h"
#include "daemon/local/device_reduce.h"

namespace gravac::testing {

inline constexpr char kFakeMagic[] = "FAKE-IPC";  // 8 bytes + address + buffer id

class FakeDeviceRuntime : public client::DeviceRuntime {
 public:
  // [p, p + bytes) is "device memory" of `device`, an allocation with CUDA buffer id `id`.
  void Register(void* p, size_t bytes, int device, uint64_t id) {
    MutexLock lock(&mu_);
    ranges_[reinterpret_cast<uintptr_t>(p)] = Range{bytes, device, id};
  }

  // Export fails (memory CUDA cannot export by IPC, e.g. from cudaMallocAsync's pools).
  void FailExports() {
    MutexLock lock(&mu_);
    fail_exports_ = true;
  }

  bool Available() override { return true; }
  absl::StatusOr<bool> IsDevicePointer(const void* p, int* device) override {
    MutexLock lock(&mu_);
    const Range* r = Find(p, nullptr);
    if (r == nullptr) return false;
    *device = r->device;
    return true;
  }
  absl::StatusOr<ipc::DeviceBufferExport> Export(const void* p, size_t bytes,
                                                 int device) override {
    MutexLock lock(&mu_);
    ++exports_;
    if (fail_exports_) {
      return absl::InvalidArgumentError(
          "cudaIpcGetMemHandle failed: cudaErrorInvalidValue (fake: a pool allocation)");
    }
    uintptr_t base = 0;
    const Range* r = Find(p, &base);
    if (r == nullptr || r->device != device) {
      return absl::InvalidArgumentError("fake export of memory that is not on the device");
    }
    ipc::DeviceBufferExport e;
    std::memcpy(e.mem_handle, kFakeMagic, 8);
    std::memcpy(e.mem_handle + 8, &base, sizeof(base));
    std::memcpy(e.mem_handle + 16, &r->id, sizeof(r->id));
    e.base_address = base;
    e.allocation_bytes = r->bytes;
    e.offset = reinterpret_cast<uintptr_t>(p) - base;
    e.bytes = bytes;
    e.buffer_id = r->id;
    e.device = device;
    return e;
  }
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes, int,
                                  void*) override {
    MutexLock lock(&mu_);
    ++device_copies_;
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyDeviceToHost(void* host, const void* dev, size_t bytes, int,
                                void*) override {
    MutexLock lock(&mu_);
    ++host_copies_;
    std::memcpy(host, dev, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyHostToDevice(void* dev, const void* host, size_t bytes, int,
                                void*) override {
    MutexLock lock(&mu_);
    ++host_copies_;
    std::memcpy(dev, host, bytes);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<client::DeviceEvent>> CreateEvent(int) override {
    MutexLock lock(&mu_);
    return std::make_unique<Event>(this, absl::StrFormat("EVENT-%d", ++events_));
  }

  int host_copies() { MutexLock lock(&mu_); return host_copies_; }
  int device_copies() { MutexLock lock(&mu_); return device_copies_; }
  int events() { MutexLock lock(&mu_); return events_; }
  int records() { MutexLock lock(&mu_); return records_; }
  int stream_waits() { MutexLock lock(&mu_); return stream_waits_; }

 private:
  struct Range {
    size_t bytes = 0;
    int device = -1;
    uint64_t id = 0;
  };
  class Event : public client::DeviceEvent {
   public:
    Event(FakeDeviceRuntime* rt, std::string name) : rt_(rt), name_(std::move(name)) {
      name_.resize(ipc::kCudaIpcHandleBytes, '\0');
    }
    std::string handle() const override { return name_; }
    absl::Status Record(void*) override {
      MutexLock lock(&rt_->mu_);
      ++rt_->records_;
      return absl::OkStatus();
    }
    absl::Status StreamWait(void*) override {
      MutexLock lock(&rt_->mu_);
      ++rt_->stream_waits_;
      return absl::OkStatus();
    }

   private:
    FakeDeviceRuntime* rt_;
    std::string name_;
  };

  const Range* Find(const void* p, uintptr_t* base) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) return nullptr;
    --it;
    if (a >= it->first + it->second.bytes) return nullptr;
    if (base != nullptr) *base = it->first;
    return &it->second;
  }

  Mutex mu_;
  std::map<uintptr_t, Range> ranges_ ABSL_GUARDED_BY(mu_);
  int exports_ ABSL_GUARDED_BY(mu_) = 0;
  bool fail_exports_ ABSL_GUARDED_BY(mu_) = false;
  int host_copies_ ABSL_GUARDED_BY(mu_) = 0;
  int device_copies_ ABSL_GUARDED_BY(mu_) = 0;
  int events_ ABSL_GUARDED_BY(mu_) = 0;
  int records_ ABSL_GUARDED_BY(mu_) = 0;
  int stream_waits_ ABSL_GUARDED_BY(mu_) = 0;
};

class FakeDeviceAccess : public ipc::DeviceAccess {
 public:
  explicit FakeDeviceAccess(bool available = true) : available_(available) {}

  // Open fails with `status` (a handle gravacd cannot open).
  void FailOpens(absl::Status status) {
    MutexLock lock(&mu_);
    open_error_ = std::move(status);
  }
  // Handles of allocation id `id` fail to open (a freed or foreign handle).
  void RefuseId(uint64_t id) {
    MutexLock lock(&mu_);
    refused_id_ = id;
  }

  bool Available() override { return available_; }
  absl::StatusOr<void*> Open(const ipc::DeviceBufferExport& e) override {
    MutexLock lock(&mu_);
    ++opens_;
    if (!open_error_.ok()) return open_error_;
    uintptr_t base = 0;
    uint64_t id = 0;
    std::memcpy(&base, e.mem_handle + 8, sizeof(base));
    std::memcpy(&id, e.mem_handle + 16, sizeof(id));
    if (std::memcmp(e.mem_handle, kFakeMagic, 8) != 0 || id == refused_id_) {
      return absl::InvalidArgumentError(
          "cudaIpcOpenMemHandle failed: cudaErrorInvalidValue (fake: not a live handle)");
    }
    return reinterpret_cast<void*>(base);
  }
  void Close(void*, int) override {
    MutexLock lock(&mu_);
    ++closes_;
  }
  absl::Status Read(void* dst, const void* src, size_t bytes, int,
                    std::string_view ready_event) override {
    MutexLock lock(&mu_);
    if (!ready_event.empty()) ++ready_waits_;
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status WaitReady(int, std::string_view ready_event) override {
    MutexLock lock(&mu_);
    if (!ready_event.empty()) ++ready_waits_;
    return absl::OkStatus();
  }
  absl::Status Write(void* dst, const void* src, size_t bytes, int,
                     std::string_view done_event) override {
    MutexLock lock(&mu_);
    ++host_writes_;
    if (!done_event.empty()) ++done_records_;
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  // The device-to-device write: a memcpy (the test's "device memory" is host memory), or the
  // error FailDeviceWrites set; counted apart from Write.
  absl::Status WriteFromDevice(void* dst, const void* src_device, size_t bytes, int,
                               std::string_view done_event) override {
    MutexLock lock(&mu_);
    ++device_writes_;
    if (!device_write_error_.ok()) return device_write_error_;
    if (!done_event.empty()) ++done_records_;
    std::memcpy(dst, src_device, bytes);
    return absl::OkStatus();
  }
  // WriteFromDevice fails with `status` from now on (OK: works again).
  void FailDeviceWrites(absl::Status status) {
    MutexLock lock(&mu_);
    device_write_error_ = std::move(status);
  }

  int opens() { MutexLock lock(&mu_); return opens_; }
  int closes() { MutexLock lock(&mu_); return closes_; }
  int ready_waits() { MutexLock lock(&mu_); return ready_waits_; }
  int done_records() { MutexLock lock(&mu_); return done_records_; }
  int host_writes() { MutexLock lock(&mu_); return host_writes_; }
  int device_writes() { MutexLock lock(&mu_); return device_writes_; }

 private:
  const bool available_;
  Mutex mu_;
  absl::Status open_error_ ABSL_GUARDED_BY(mu_);
  uint64_t refused_id_ ABSL_GUARDED_BY(mu_) = ~uint64_t{0};
  int opens_ ABSL_GUARDED_BY(mu_) = 0;
  int closes_ ABSL_GUARDED_BY(mu_) = 0;
  int ready_waits_ ABSL_GUARDED_BY(mu_) = 0;
  int done_records_ ABSL_GUARDED_BY(mu_) = 0;
  int host_writes_ ABSL_GUARDED_BY(mu_) = 0;
  int device_writes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status device_write_error_ ABSL_GUARDED_BY(mu_);
};

// gravacd's local reduce in device memory over FakeDeviceRuntime's "device memory" (host arrays):
// sums with collectives::ReduceSum, as CombineLocal, into a host buffer it hands over as the
// DeviceData; or refuses every device (kFailedPrecondition) as told. Counts its sums.
class FakeDeviceReduce : public daemon::DeviceReduce {
 public:
  explicit FakeDeviceReduce(bool usable = true) : usable_(usable) {}

  absl::Status Prepare(int device) override {
    if (usable_) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrFormat("no local reduce on CUDA device %d: fake: unusable", device));
  }

  absl::StatusOr<std::shared_ptr<const daemon::DeviceData>> SumFloat32(
      int device, absl::Span<const void* const> inputs, size_t bytes) override {
    if (!usable_) {
      return absl::FailedPreconditionError(
          absl::StrFormat("no local reduce on CUDA device %d: fake: unusable", device));
    }
    auto sum = std::make_shared<Sum>(device, bytes);
    const size_t n = bytes / sizeof(float);
    if (inputs.size() == 1) {
      std::memcpy(sum->buffer.data(), inputs[0], bytes);
    } else {
      collectives::ReduceSum(collectives::DataType::kFloat32, sum->buffer.data(), inputs[0],
                             inputs[1], n);
      for (size_t i = 2; i < inputs.size(); ++i) {
        collectives::ReduceSumInto(collectives::DataType::kFloat32, sum->buffer.data(),
                                   inputs[i], n);
      }
    }
    MutexLock lock(&mu_);
    ++sums_;
    return std::shared_ptr<const daemon::DeviceData>(sum);
  }
  int sums() {
    MutexLock lock(&mu_);
    return sums_;
  }

 private:
  struct Sum : daemon::DeviceData {
    Sum(int d, size_t bytes) : device_(d), buffer(bytes) {}
    int device() const override { return device_; }
    const void* data() const override { return buffer.data(); }
    size_t bytes() const override { return buffer.size(); }
    absl::Status CopyToHost(void* host) const override {
      if (!buffer.empty()) std::memcpy(host, buffer.data(), buffer.size());
      return absl::OkStatus();
    }
    int device_;
    std::vector<uint8_t> buffer;
  };
  const bool usable_;
  Mutex mu_;
  int sums_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gravac::testing

#endif  // GRAVAC_TESTS_CLIENT_FAKE_DEVICE_H_
