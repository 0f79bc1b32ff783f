// JobId: the identity every control-plane call carries (DESIGN.md: "every control-plane call
// names its job"). A job is a name plus a run id: a rerun of the same name with a new run id is a
// new job, never a rejoin of the old one. gravacrun generates the run id (GenerateRunId); under
// Kubernetes it is the Job's uid.
//
// Both parts appear in metric labels, log lines and socket messages, so they are restricted to
// [A-Za-z0-9._-] and at most 128 characters (CheckJobId). An empty name means the job "default"
// (Normalized), which is what a daemon or client from before job identities joins.
//
// Thread-safety: plain values and stateless functions.
#ifndef GRAVAC_CORE_JOB_ID_H_
#define GRAVAC_CORE_JOB_ID_H_

#include <string>
#include <tuple>

#include "absl/status/status.h"

namespace gravac {

inline constexpr char kDefaultJobName[] = "default";

struct JobId {
  std::string name;
  std::string run_id;

  // The same id with an empty name replaced by kDefaultJobName.
  JobId Normalized() const;
  // "job 'NAME' run 'RUN'" (or "job 'NAME'" when the run id is empty), for error messages.
  std::string ToString() const;

  friend bool operator==(const JobId& a, const JobId& b) {
    return a.name == b.name && a.run_id == b.run_id;
  }
  friend bool operator!=(const JobId& a, const JobId& b) { return !(a == b); }
  friend bool operator<(const JobId& a, const JobId& b) {
    return std::tie(a.name, a.run_id) < std::tie(b.name, b.run_id);
  }
};

// OK when both parts are at most 128 characters of [A-Za-z0-9._-]; else InvalidArgument naming
// the part and the first bad character.
absl::Status CheckJobId(const JobId& id);

// A fresh run id: UTC time and 32 random bits, e.g. "20261204T143502-5f3a9c01".
std::string GenerateRunId();

}  // namespace gravac

#endif  // GRAVAC_CORE_JOB_ID_H_
