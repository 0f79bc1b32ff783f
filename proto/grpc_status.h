// The one mapping between gRPC and absl statuses, used at every gRPC edge of the control plane
// (the controller's service, the daemon's ControllerClient, gravacctl). gRPC's and absl's codes
// are the same canonical codes with the same numbers; the message is kept.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_PROTO_GRPC_STATUS_H_
#define GRAVAC_PROTO_GRPC_STATUS_H_

#include <string_view>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace gravac::proto {

// An absl status as a gRPC status (OK stays OK; code and message are kept).
grpc::Status ToGrpcStatus(const absl::Status& status);

// A gRPC status as an absl status with the same code; a non-empty `context` prefixes the message
// ("context: message"). OK stays OK.
absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view context = "");

}  // namespace gravac::proto

#endif  // GRAVAC_PROTO_GRPC_STATUS_H_
