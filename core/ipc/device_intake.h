// DeviceIntake: how gravacd takes a device buffer a worker exported (cuda_ipc.h): through its
// MappingCache when the handle opens, else by host staging. A malformed export is bad input (the
// request fails, naming the worker and field); a handle that cannot be opened (gravacd built
// without CUDA or without a usable device, a freed or foreign handle, another machine's driver)
// is not: the worker is told to stage that tensor through host memory, as libgravac does today,
// and gravacd says why once per worker in its log (not once per tensor or step).
//
// Thread-safety: thread-compatible (one owner, the daemon's local server thread). The opener and
// the logger (nullptr: nothing is logged) must outlive the intake.
#ifndef GRAVAC_CORE_IPC_DEVICE_INTAKE_H_
#define GRAVAC_CORE_IPC_DEVICE_INTAKE_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "core/ipc/device_export.h"
#include "core/ipc/mapping_cache.h"
#include "core/logging.h"

namespace gravac::ipc {

class DeviceIntake {
 public:
  struct Taken {
    void* data = nullptr;  // the buffer mapped into gravacd (null when staged)
    bool staged = false;   // the worker must stage this tensor through host memory
    std::string reason;    // why, when staged (names the worker and field)
  };

  DeviceIntake(MemHandleOpener* opener, const Logger* log,
               size_t max_mappings = MappingCache::kDefaultMaxMappings);

  // kInvalidArgument naming the worker and field for a malformed export; else the mapped buffer
  // or a staged answer (see the header comment). Blocks for a driver call on a cache miss.
  absl::StatusOr<Taken> Take(int worker, const DeviceBufferExport& e);

  // A request's buffer, after the worker's MapDevice: the cached mapping (or a new one), else
  // the error naming the worker and field (malformed, or a handle that cannot be opened: freed,
  // foreign). No staging: a worker only sends requests for allocations gravacd mapped. The
  // answer's pin keeps the mapping open (not evicted for the cache's bound) while the request
  // holds it.
  absl::StatusOr<MappingCache::Pinned> Map(int worker, const DeviceBufferExport& e) {
    return cache_.MapPinned(worker, e);
  }

  // The worker disconnected: its mappings are closed and its "said once" forgotten.
  void DropWorker(int worker);

  const MappingCache& cache() const { return cache_; }

 private:
  MappingCache cache_;
  const Logger* log_;
  std::set<int> said_;  // workers told (in the log) that their tensors are staged
};

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_DEVICE_INTAKE_H_
