// Conversions between the control plane's shared types (core/job_types.h) and the gravac.v1
// controller messages (proto/gravac/v1/controller.proto). Used by both ends of the control plane:
// the daemon's ControllerClient (daemon/control/) and the gRPC service of gravac-controller.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_PROTO_JOB_CONVERT_H_
#define GRAVAC_PROTO_JOB_CONVERT_H_

#include "core/job_types.h"
#include "gravac/v1/controller.pb.h"

namespace gravac::proto {

void ToProto(const JobDecision& in, gravac::v1::Decision* out);
JobDecision FromProto(const gravac::v1::Decision& in);

void ToProto(const JobConfig& in, gravac::v1::JobConfig* out);
JobConfig FromProto(const gravac::v1::JobConfig& in);

// node_rank is carried by the enclosing StatsBatch, not by each entry.
void ToProto(const NodeStepStats& in, gravac::v1::NodeStepStats* out);
NodeStepStats FromProto(const gravac::v1::NodeStepStats& in, int node_rank);

}  // namespace gravac::proto

#endif  // GRAVAC_PROTO_JOB_CONVERT_H_
