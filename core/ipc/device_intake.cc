#include "core/ipc/device_intake.h"

#include "core/status.h"

namespace gravac::ipc {

DeviceIntake::DeviceIntake(MemHandleOpener* opener, const Logger* log, size_t max_mappings)
    : cache_(opener, max_mappings), log_(log) {}

absl::StatusOr<DeviceIntake::Taken> DeviceIntake::Take(int worker, const DeviceBufferExport& e) {
  RETURN_IF_ERROR(ValidateExport(worker, e));  // bad input, not a reason to stage
  absl::StatusOr<void*> mapped = cache_.Map(worker, e);
  Taken taken;
  if (mapped.ok()) {
    taken.data = *mapped;
    return taken;
  }
  taken.staged = true;
  taken.reason = std::string(mapped.status().message());
  if (said_.insert(worker).second && log_ != nullptr) {
    GRAVAC_LOG(*log_, kWarning,
               "%s; the tensor is staged through host memory instead (said once per worker: later "
               "buffers of this worker that cannot be mapped are staged without a message)",
               taken.reason);
  }
  return taken;
}

void DeviceIntake::DropWorker(int worker) {
  cache_.DropWorker(worker);
  said_.erase(worker);
}

}  // namespace gravac::ipc
