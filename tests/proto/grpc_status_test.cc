// proto/grpc_status.h: every canonical code survives absl -> gRPC -> absl with its message, OK
// stays OK, and the context prefixes the message.
#include "proto/grpc_status.h"

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::proto {
namespace {

TEST(GrpcStatusTest, OkStaysOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_THAT(FromGrpcStatus(grpc::Status::OK, "join"), IsOk());
}

TEST(GrpcStatusTest, EveryCodeRoundTripsWithItsMessage) {
  const struct {
    absl::StatusCode absl_code;
    grpc::StatusCode grpc_code;
  } kCodes[] = {
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& c : kCodes) {
    const grpc::Status g = ToGrpcStatus(absl::Status(c.absl_code, "node 'a': rank 3"));
    EXPECT_EQ(g.error_code(), c.grpc_code);
    EXPECT_EQ(g.error_message(), "node 'a': rank 3");
    EXPECT_THAT(FromGrpcStatus(g), StatusIs(c.absl_code, "node 'a': rank 3"));
  }
}

TEST(GrpcStatusTest, ContextPrefixesTheMessage) {
  EXPECT_THAT(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"),
                             "join"),
              StatusIs(absl::StatusCode::kUnavailable, "join: connection refused"));
}

}  // namespace
}  // namespace gravac::proto
