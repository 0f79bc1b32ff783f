// core/errno_status.h: errno values map to their canonical codes, the message keeps the call's
// text and strerror, and GRAVAC_RETURN_IF_ERRNO returns from the caller only on -1.
#include "core/errno_status.h"

#include <fcntl.h>
#include <unistd.h>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ErrnoStatusTest, CodesFollowTheErrno) {
  EXPECT_EQ(ErrnoCode(EPERM), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoCode(EACCES), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoCode(ENOENT), absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoCode(ESRCH), absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoCode(EEXIST), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrnoCode(EINVAL), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrnoCode(EMFILE), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoCode(EIO), absl::StatusCode::kInternal);
}

TEST(ErrnoStatusTest, MessageNamesWhatFailedAndWhy) {
  EXPECT_THAT(ErrnoStatus(ENOENT, "open '/x'"),
              StatusIs(absl::StatusCode::kNotFound, "open '/x': No such file or directory"));
  EXPECT_THAT(ErrnoStatus(absl::StatusCode::kUnavailable, ECONNRESET, "recv frame"),
              StatusIs(absl::StatusCode::kUnavailable, "recv frame: Connection reset by peer"));
}

// (Moved from netemu's process_test with the conversion.)
TEST(ErrnoStatusTest, CallStatusMapsCodesAndNamesTheCallAndPlace) {
  EXPECT_THAT(ErrnoCallStatus(EPERM, "setns(fd)", "f.cc", 3),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "setns(fd) failed: Operation not permitted (f.cc:3)"));
  EXPECT_THAT(ErrnoCallStatus(ENOENT, "open(x)", "f.cc", 3),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("f.cc:3")));
}

absl::Status OpenMissing(int* calls) {
  ++*calls;
  GRAVAC_RETURN_IF_ERRNO(open("/nonexistent/gravac-errno-test", O_RDONLY | O_CLOEXEC));
  ++*calls;  // not reached
  return absl::OkStatus();
}

absl::Status PipeAndClose(int* calls) {
  int fds[2];
  GRAVAC_RETURN_IF_ERRNO(pipe(fds));
  ++*calls;
  close(fds[0]);
  close(fds[1]);
  return absl::OkStatus();
}

TEST(ErrnoStatusTest, ReturnIfErrnoReturnsTheCallTextAndLocation) {
  int calls = 0;
  EXPECT_THAT(OpenMissing(&calls),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("open(\"/nonexistent/gravac-errno-test\", O_RDONLY | "
                                       "O_CLOEXEC) failed: No such file or directory"),
                             HasSubstr("errno_status_test.cc:"))));
  EXPECT_EQ(calls, 1);
  calls = 0;
  EXPECT_THAT(PipeAndClose(&calls), IsOk());
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace gravac
