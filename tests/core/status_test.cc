#include "core/status.h"

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace gravac {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::Status FailIf(bool fail) {
  if (fail) return absl::InvalidArgumentError("asked to fail");
  return absl::OkStatus();
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status Chain(bool fail, int* calls) {
  RETURN_IF_ERROR(FailIf(fail));
  ++*calls;
  return absl::OkStatus();
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status StatusOrThroughReturnIfError() {
  RETURN_IF_ERROR(Half(3));
  return absl::OkStatus();
}

TEST(StatusMacros, ReturnIfErrorPropagatesAndContinues) {
  int calls = 0;
  EXPECT_THAT(Chain(false, &calls), IsOk());
  EXPECT_EQ(calls, 1);
  EXPECT_THAT(Chain(true, &calls), StatusIs(absl::StatusCode::kInvalidArgument, "asked to fail"));
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacros, ReturnIfErrorAcceptsStatusOr) {
  EXPECT_THAT(StatusOrThroughReturnIfError(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(StatusMacros, AssignOrReturnTwiceInOneFunction) {
  EXPECT_THAT(Quarter(8), IsOk());
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_THAT(Quarter(6), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("odd")));
  EXPECT_THAT(Quarter(7), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(StatusMatchers, MatchersCanFail) {
  EXPECT_THAT(absl::InternalError("x"), Not(IsOk()));
  EXPECT_THAT(absl::OkStatus(), Not(StatusIs(absl::StatusCode::kInternal)));
  EXPECT_THAT(absl::InternalError("abc"),
              Not(StatusIs(absl::StatusCode::kInternal, HasSubstr("zzz"))));
  EXPECT_THAT(absl::StatusOr<int>(absl::NotFoundError("gone")),
              StatusIs(absl::StatusCode::kNotFound, "gone"));
}

TEST(StatusMatchers, AssertOkAndAssign) {
  ASSERT_OK_AND_ASSIGN(int q, Quarter(16));
  EXPECT_EQ(q, 4);
}

}  // namespace
}  // namespace gravac
