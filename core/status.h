// Status helpers used across every module boundary.
//
// gravac passes absl::Status / absl::StatusOr<T> across modules, threads and RPCs; no exception
// crosses them. Debian's abseil (20220623) has no status macros, so they are defined here once:
//
//   RETURN_IF_ERROR(expr);             // returns expr's status from the caller when not OK
//   ASSIGN_OR_RETURN(lhs, rexpr);      // lhs = value of rexpr (a StatusOr), or returns its status
//
// Thread-safety: stateless.
#ifndef GRAVAC_CORE_STATUS_H_
#define GRAVAC_CORE_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gravac::internal {

inline const absl::Status& AsStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& AsStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace gravac::internal

#define GRAVAC_STATUS_CONCAT_INNER_(a, b) a##b
#define GRAVAC_STATUS_CONCAT_(a, b) GRAVAC_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                                                  \
  do {                                                                         \
    const auto& gravac_status_ref_ = (expr);                                   \
    if (!gravac_status_ref_.ok()) {                                            \
      return ::gravac::internal::AsStatus(gravac_status_ref_);                 \
    }                                                                          \
  } while (false)

#define GRAVAC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, rexpr) \
  GRAVAC_ASSIGN_OR_RETURN_IMPL_(GRAVAC_STATUS_CONCAT_(gravac_statusor_, __LINE__), lhs, rexpr)

#endif  // GRAVAC_CORE_STATUS_H_
