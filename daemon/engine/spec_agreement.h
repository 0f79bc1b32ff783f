// The cross-rank agreement rule: the fields of a TensorSpec that every rank of a job must agree
// on, checked in one order, with one way to print each, so a mismatch gets the same message
// whether it is caught among the workers of one node (daemon/local/, CheckLocalAgreement) or
// across nodes (daemon/engine/, Negotiator):
//
//   tensor 'w': dtype fp16 on ranks 1 differs from fp32 on ranks 0
//
// The fields, in the order checked (the message names the first that differs):
//   kind       every collective
//   process_set  every collective: the set's global ranks ("all" for the whole job)
//   dtype      every collective
//   memory     every collective: host or device, where the callers' tensors live
//   shape      every collective; allgather: the number of dimensions and shape[1..] (the first
//              dimension is each rank's own, printed as *)
//   op         allreduce only (the others do not reduce)
//   root_rank  broadcast only
//   compress   allreduce only: it selects error feedback and compression (fusion_plan.h,
//              Compressible), which only an allreduce can have; allgather and broadcast ignore it
//   step       every collective (a tensor of another step is another tensor's data)
// A field a collective does not use prints as "-", so it never differs. name is the key the
// ranks are matched by, and samples is each rank's own.
//
// Thread-safety: stateless.
#ifndef GRAVAC_DAEMON_ENGINE_SPEC_AGREEMENT_H_
#define GRAVAC_DAEMON_ENGINE_SPEC_AGREEMENT_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "daemon/engine/types.h"

namespace gravac::daemon {

// "allreduce", "allgather" or "broadcast".
std::string_view CollectiveKindName(CollectiveKind kind);

struct AgreedField {
  const char* name;
  // The field's value as the message prints it; "-" where the collective does not use it.
  std::string (*value)(const TensorSpec& spec);
};

// The table above, in the order checked.
absl::Span<const AgreedField> AgreedFields();

// Global ranks as sorted, merged ranges: {5, 0, 1, 2} -> "0-2,5".
std::string FormatRankList(std::vector<int> ranks);

// Compares specs[1..] with specs[0] (each one party: a local worker or a node) field by field.
// Returns "" when they agree; else the message for the first field that differs, naming the
// value of the first party that differs with the ranks of every party holding it, and specs[0]'s
// value with the ranks of every party holding that. ranks_of(i) gives party i's global ranks.
std::string FindDisagreement(std::string_view name, absl::Span<const TensorSpec* const> specs,
                             const std::function<std::vector<int>(int)>& ranks_of);

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_ENGINE_SPEC_AGREEMENT_H_
