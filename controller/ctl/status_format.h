// Rendering of gravac.v1.JobStatus and gravac.v1.JobList for gravacctl: readable tables, or JSON.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_CONTROLLER_CTL_STATUS_FORMAT_H_
#define GRAVAC_CONTROLLER_CTL_STATUS_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "gravac/v1/controller.pb.h"

namespace gravac::ctl {

// Job summary (membership, decision in force, search state, gains, throughput, bytes saved),
// one row per node, and the compression-throughput table.
std::string FormatStatusTable(const gravac::v1::JobStatus& status);

// The whole message as JSON (proto3 JSON mapping, every field printed, snake_case names).
absl::StatusOr<std::string> FormatStatusJson(const gravac::v1::JobStatus& status);
absl::StatusOr<std::string> FormatJson(const google::protobuf::Message& message);

// One row per job: name, run id, state, nodes joined/expected, ranks, θ, phase, steps, start.
std::string FormatJobsTable(const gravac::v1::JobList& list);

// "1.5 KiB", "23.0 MiB", ...
std::string HumanBytes(double bytes);

}  // namespace gravac::ctl

#endif  // GRAVAC_CONTROLLER_CTL_STATUS_FORMAT_H_
