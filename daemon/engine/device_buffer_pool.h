// DeviceBufferPool: the buffers of one device's backend that the local reduce in device memory
// (daemon/local/device_reduce.h) sums into, kept for reuse instead of freed, because a device
// allocation and free (cudaMalloc / cudaFree) synchronise the device and cost far more than the
// sum. Take hands out a free buffer of exactly the size asked for, newest returned first, or a
// new one from the backend; Return takes a buffer back once nobody reads it any more.
//
// Bound: the free bytes plus the held bytes (taken, not yet returned) never exceed the most bytes
// ever held at once (high_water_bytes), so the pool adds no memory beyond the peak its users
// needed. When sizes change and a new buffer would break that, the oldest returned buffers are
// freed first (through their own destructors: the backend's free), before the new one is made.
//
// Contents: a reused buffer holds whatever its last user left (not zeroed, unlike Allocate's);
// the caller overwrites every byte.
//
// Thread-safety: none; the owner serialises every call with the calls of the backend it passes
// (BackendDeviceReduce: the device's mutex). Free buffers are freed by the pool's destructor, which
// must run while their backend may still free memory (the owner destroys the pool first).
#ifndef GRAVAC_DAEMON_ENGINE_DEVICE_BUFFER_POOL_H_
#define GRAVAC_DAEMON_ENGINE_DEVICE_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "core/mutex.h"
#include "daemon/engine/device_data.h"
#include "kernels/backend.h"

namespace gravac::daemon {

class DeviceBufferPool {
 public:
  struct Counts {
    size_t held_bytes = 0;        // taken and not yet returned
    size_t free_bytes = 0;        // returned, kept for reuse
    size_t high_water_bytes = 0;  // the most held_bytes ever
    int64_t allocations = 0;      // buffers made by the backend
    int64_t reuses = 0;           // Takes served by a free buffer
  };

  DeviceBufferPool() = default;
  DeviceBufferPool(const DeviceBufferPool&) = delete;
  DeviceBufferPool& operator=(const DeviceBufferPool&) = delete;

  // A buffer of exactly `bytes` bytes of `backend`'s memory: a free one of that size (the most
  // recently returned), else a new one from backend.Allocate after freeing the oldest free buffers
  // the bound needs gone. Its contents are unspecified. The backend's error if it cannot
  // allocate (the free buffers freed for it stay freed).
  absl::StatusOr<std::unique_ptr<kernels::BackendMemory>> Take(
      size_t bytes, kernels::CompressionBackend& backend);
  // Gives back `block`, taken from this pool and no longer read or written by anyone (every
  // queued device work on it finished): it is kept for a later Take of its size.
  void Return(std::unique_ptr<kernels::BackendMemory> block);

  Counts counts() const { return counts_; }

 private:
  using ByAge = std::list<std::unique_ptr<kernels::BackendMemory>>;

  // Frees the oldest free buffers until free_bytes <= `limit`.
  void TrimTo(size_t limit);

  ByAge by_age_;                                            // oldest first
  std::map<size_t, std::vector<ByAge::iterator>> by_size_;  // per size, oldest first
  Counts counts_;
};

// DeviceBuffers: one device's compression backend and its DeviceBufferPool behind one mutex, and
// the DeviceData it fills in the pool's buffers: the local reduce's sums (device_reduce.h) and the
// engine's device results (daemon/engine/device_results.h). Each DeviceData holds the
// DeviceBuffers, so its buffer goes back to the pool when the last reference goes, and the pool
// and the backend that frees it live as long as that, whoever made them.
//
// Thread-safety: thread-safe (the mutex serialises the pool, the backend and the DeviceData's
// copies to the host); the DeviceData may be read and released on any thread.
class DeviceBuffers : public std::enable_shared_from_this<DeviceBuffers> {
 public:
  // `backend`: of the device whose memory the buffers are (not null).
  static std::shared_ptr<DeviceBuffers> Make(std::unique_ptr<kernels::CompressionBackend> backend);

  int device() const { return device_; }

  // Takes a buffer of exactly `bytes` bytes from the pool (contents unspecified), runs
  // `fill(backend, buffer)` on it under the mutex, and hands it over as a DeviceData. When
  // `fill` fails the buffer goes back to the pool and fill's error is returned; so does the
  // backend's when no buffer can be had. What `fill` queued must be complete when it returns OK
  // (the DeviceData contract), or be ordered before every later reader by the caller.
  absl::StatusOr<std::shared_ptr<const DeviceData>> Fill(
      size_t bytes,
      absl::FunctionRef<absl::Status(kernels::CompressionBackend&, kernels::BackendMemory&)> fill);

  DeviceBufferPool::Counts counts() const;

 private:
  class Buffer;  // the DeviceData

  explicit DeviceBuffers(int device) : device_(device) {}

  const int device_;
  mutable Mutex mu_;
  std::unique_ptr<kernels::CompressionBackend> backend_ ABSL_GUARDED_BY(mu_);
  DeviceBufferPool pool_ ABSL_GUARDED_BY(mu_);  // declared after backend_: its buffers freed first
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_ENGINE_DEVICE_BUFFER_POOL_H_
