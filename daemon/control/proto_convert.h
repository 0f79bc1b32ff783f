// Conversions between the daemon's seam types (daemon/engine/types.h) and the gravac.v1
// controller messages (proto/gravac/v1/controller.proto). Used by both ends of the control plane:
// ControllerClient here and the gRPC service of gravac-controller.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_DAEMON_CONTROL_PROTO_CONVERT_H_
#define GRAVAC_DAEMON_CONTROL_PROTO_CONVERT_H_

#include "daemon/engine/types.h"
#include "gravac/v1/controller.pb.h"

namespace gravac::daemon {

void ToProto(const JobDecision& in, gravac::v1::Decision* out);
JobDecision FromProto(const gravac::v1::Decision& in);

void ToProto(const JobConfig& in, gravac::v1::JobConfig* out);
JobConfig FromProto(const gravac::v1::JobConfig& in);

// node_rank is carried by the enclosing StatsBatch, not by each entry.
void ToProto(const NodeStepStats& in, gravac::v1::NodeStepStats* out);
NodeStepStats FromProto(const gravac::v1::NodeStepStats& in, int node_rank);

// The initial decision (epoch 0) every daemon knows without the controller: θ = θ_c = θ_min,
// warm-up, searching.
JobDecision InitialDecision(const JobConfig& job);

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_CONTROL_PROTO_CONVERT_H_
