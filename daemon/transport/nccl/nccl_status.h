// NCCL error conversion: the one place where an ncclResult_t becomes an absl::Status.
//
//   GRAVAC_NCCL_RETURN_IF_ERROR(ncclCommInitRankConfig(&comm, 2, id, rank, &config), comm);
//
// returns from the enclosing function (absl::Status or absl::StatusOr<T>) with a Status whose
// message keeps the failing call's text, ncclGetErrorString, NCCL's last error message
// (ncclGetLastError; `comm` may be nullptr) and file:line. Codes: invalid argument / usage ->
// InvalidArgument; remote and system errors (a peer that died or closed, a broken socket) ->
// Unavailable; a CUDA error inside NCCL and internal errors -> Internal. ncclInProgress is not an
// error for a non-blocking communicator; callers that expect it test for it before converting.
//
// Thread-safety: stateless.
#ifndef GRAVAC_DAEMON_TRANSPORT_NCCL_NCCL_STATUS_H_
#define GRAVAC_DAEMON_TRANSPORT_NCCL_NCCL_STATUS_H_

#include <nccl.h>

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace gravac::transport::nccl {

inline absl::StatusCode NcclCode(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return absl::StatusCode::kOk;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::StatusCode::kInvalidArgument;
    case ncclRemoteError:
    case ncclSystemError:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

inline absl::Status NcclResultToStatus(ncclResult_t result, std::string_view call, ncclComm_t comm,
                                       const char* file, int line) {
  if (result == ncclSuccess) return absl::OkStatus();
  const char* last = ncclGetLastError(comm);
  return absl::Status(
      NcclCode(result),
      absl::StrFormat("%s failed: %s%s%s at %s:%d", call, ncclGetErrorString(result),
                      last != nullptr && last[0] != '\0' ? ": " : "", last != nullptr ? last : "",
                      file, line));
}

}  // namespace gravac::transport::nccl

#define GRAVAC_NCCL_RETURN_IF_ERROR(expr, comm)                                                \
  do {                                                                                         \
    const ncclResult_t gravac_nccl_result_ = (expr);                                           \
    if (gravac_nccl_result_ != ncclSuccess) {                                                  \
      return ::gravac::transport::nccl::NcclResultToStatus(gravac_nccl_result_, #expr, (comm), \
                                                           __FILE__, __LINE__);                \
    }                                                                                          \
  } while (false)

#endif  // GRAVAC_DAEMON_TRANSPORT_NCCL_NCCL_STATUS_H_
