// The one conversion of errno to absl::Status (STYLE.md: one conversion per foreign error source,
// at the edge, keeping the failing call's text). Every module that calls libc converts its errno
// here:
//   ErrnoStatus(code, err, what)      "what: <strerror>", with a code the caller decides (e.g.
//                                     Unavailable for a peer's socket, whatever errno says)
//   ErrnoStatus(err, what)            the same, the code from ErrnoCode(err)
//   GRAVAC_RETURN_IF_ERRNO(call)      for a call that returns -1 and sets errno: returns
//                                     "<call> failed: <strerror> (file:line)" from the enclosing
//                                     function
//
// Thread-safety: stateless functions (strerror_r).
#ifndef GRAVAC_CORE_ERRNO_STATUS_H_
#define GRAVAC_CORE_ERRNO_STATUS_H_

#include <cerrno>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gravac {

// The canonical code of an errno value: EPERM/EACCES -> PermissionDenied, ENOENT/ESRCH ->
// NotFound, EEXIST -> AlreadyExists, EINVAL -> InvalidArgument, EAGAIN/ENOMEM/EMFILE/ENFILE ->
// ResourceExhausted, anything else Internal.
absl::StatusCode ErrnoCode(int err);

// The text of an errno value (strerror, thread-safe).
std::string ErrnoText(int err);

absl::Status ErrnoStatus(absl::StatusCode code, int err, std::string_view what);
absl::Status ErrnoStatus(int err, std::string_view what);

// "<call> failed: <strerror> (file:line)" with ErrnoCode(err); what GRAVAC_RETURN_IF_ERRNO returns.
absl::Status ErrnoCallStatus(int err, std::string_view call, const char* file, int line);

}  // namespace gravac

#define GRAVAC_RETURN_IF_ERRNO(call)                                      \
  do {                                                                    \
    if ((call) == -1) {                                                   \
      return ::gravac::ErrnoCallStatus(errno, #call, __FILE__, __LINE__); \
    }                                                                     \
  } while (false)

#endif  // GRAVAC_CORE_ERRNO_STATUS_H_
