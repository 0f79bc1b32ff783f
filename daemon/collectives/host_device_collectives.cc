#include "daemon/collectives/host_device_collectives.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::collectives {

absl::Status HostDeviceCollectives::Record(absl::Status status) {
  if (status.ok()) return status;
  if (!abort_status_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host collectives were aborted: ", abort_status_.message()));
  }
  abort_status_ = absl::Status(status.code(), absl::StrCat("host collectives: ", status.message()));
  return abort_status_;
}

absl::Status HostDeviceCollectives::AllreduceSum(float* data, size_t count) {
  if (!abort_status_.ok()) return Record(abort_status_);
  return Record(comm_.Allreduce(data, data, count, DataType::kFloat32, ReduceOp::kSum));
}

absl::StatusOr<std::vector<size_t>> HostDeviceCollectives::AgreeSizes(size_t bytes,
                                                                      absl::Duration timeout) {
  (void)timeout;  // the Communicator's op_timeout bounds it (see device_collectives.h)
  if (!abort_status_.ok()) return Record(abort_status_);
  const int p = size();
  std::vector<uint64_t> sizes(p, 0);
  sizes[rank()] = bytes;
  const std::vector<size_t> block(p, sizeof(uint64_t));
  RETURN_IF_ERROR(Record(comm_.Allgatherv(&sizes[rank()], sizes.data(), block)));
  return std::vector<size_t>(sizes.begin(), sizes.end());
}

absl::Status HostDeviceCollectives::Allgatherv(const void* send, void* recv,
                                               absl::Span<const size_t> bytes_per_rank) {
  if (!abort_status_.ok()) return Record(abort_status_);
  return Record(comm_.Allgatherv(send, recv, bytes_per_rank));
}

absl::Status HostDeviceCollectives::Wait(absl::Duration timeout) {
  (void)timeout;  // every operation already ran to its end
  if (!abort_status_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host collectives were aborted: ", abort_status_.message()));
  }
  return absl::OkStatus();
}

}  // namespace gravac::collectives
