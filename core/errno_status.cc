#include "core/errno_status.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/absl_compat.h"

namespace gravac {

absl::StatusCode ErrnoCode(int err) {
  switch (err) {
    case EPERM:
    case EACCES:
      return absl::StatusCode::kPermissionDenied;
    case ENOENT:
    case ESRCH:
      return absl::StatusCode::kNotFound;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case EINVAL:
      return absl::StatusCode::kInvalidArgument;
    case EAGAIN:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
      return absl::StatusCode::kResourceExhausted;
    default:
      return absl::StatusCode::kInternal;
  }
}

std::string ErrnoText(int err) {
  char buf[256];
  // GNU strerror_r returns the message, in buf or a static string.
  return std::string(strerror_r(err, buf, sizeof(buf)));
}

absl::Status ErrnoStatus(absl::StatusCode code, int err, std::string_view what) {
  return absl::Status(code, absl::StrCat(AsAbsl(what), ": ", ErrnoText(err)));
}

absl::Status ErrnoStatus(int err, std::string_view what) {
  return ErrnoStatus(ErrnoCode(err), err, what);
}

absl::Status ErrnoCallStatus(int err, std::string_view call, const char* file, int line) {
  return absl::Status(ErrnoCode(err), absl::StrCat(AsAbsl(call), " failed: ", ErrnoText(err), " (",
                                                   file, ":", line, ")"));
}

}  // namespace gravac
