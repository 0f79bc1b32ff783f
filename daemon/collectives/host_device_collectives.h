// HostDeviceCollectives: DeviceCollectives (device_collectives.h) over host memory, on the job's
// host data plane (a Communicator over the ucx or loopback transport). What the engine uses when
// a job's buffers are in host memory, and the reference the CPU conformance tests run.
//
// Every operation runs to its end inside its call (the Communicator's collectives block), so
// Wait only reports the outcome: OK, or the first error. AllreduceSum is the Communicator's ring
// (reduce-scatter then allgather: every rank ends with the same bits; the order of the additions
// per element depends on its segment, see communicator.h); AgreeSizes is an Allgatherv of one
// 64-bit size per rank; Allgatherv the Communicator's. Errors are the Communicator's (they name
// this rank, the collective and the silent or failed peer), prefixed with "host collectives";
// the Communicator aborts on the first one, and so do these collectives.
//
// Thread-safety: as device_collectives.h. The Communicator is borrowed: it must outlive this
// object, and its other users (the engine) must not run collectives on it at the same time.
#ifndef GRAVAC_DAEMON_COLLECTIVES_HOST_DEVICE_COLLECTIVES_H_
#define GRAVAC_DAEMON_COLLECTIVES_HOST_DEVICE_COLLECTIVES_H_

#include <cstddef>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/device_collectives.h"

namespace gravac::collectives {

class HostDeviceCollectives : public DeviceCollectives {
 public:
  // `comm`: not owned (see header comment).
  explicit HostDeviceCollectives(Communicator& comm) : comm_(comm) {}

  std::string_view name() const override { return "host"; }
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  MemoryType memory_type() const override { return MemoryType::kHost; }
  int device() const override { return -1; }
  void* stream() const override { return nullptr; }

  absl::Status AllreduceSum(float* data, size_t count) override;
  absl::StatusOr<std::vector<size_t>> AgreeSizes(size_t bytes, absl::Duration timeout) override;
  absl::Status Allgatherv(const void* send, void* recv,
                          absl::Span<const size_t> bytes_per_rank) override;
  absl::Status Wait(absl::Duration timeout) override;
  absl::Status abort_status() const override { return abort_status_; }

 private:
  // Records the first error (prefixed) and returns it.
  absl::Status Record(absl::Status status);

  Communicator& comm_;
  absl::Status abort_status_;
};

}  // namespace gravac::collectives

#endif  // GRAVAC_DAEMON_COLLECTIVES_HOST_DEVICE_COLLECTIVES_H_
