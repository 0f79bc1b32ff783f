// The dense path's optional finite check (gravacd --check_finite): a float allreduce whose
// local sum holds a NaN or an infinity is refused before it reaches the other nodes, so one
// rank's bad gradient becomes an error on every rank instead of a NaN on every replica.
//
// One pass over the node's sum per tensor (the local ranks' inputs are read only to name the
// culprits once the sum is found not finite); integer tensors and other collectives pass.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_DAEMON_LOCAL_FINITE_CHECK_H_
#define GRAVAC_DAEMON_LOCAL_FINITE_CHECK_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "daemon/collectives/reduce.h"
#include "daemon/local/local_reduce.h"

namespace gravac::daemon {

// Index of the first element of `count` elements of `type` at `data` that is NaN or infinite;
// -1 when all are finite or `type` is not a float type.
int64_t FirstNonFinite(collectives::DataType type, const uint8_t* data, size_t count);

// OK unless `sum` (the node's combined allreduce input of `inputs`' spec) is a float tensor
// holding a non-finite value; then InvalidArgument "tensor 'w': non-finite value at element 7
// in the input of ranks [1] (gravacd --check_finite)".
absl::Status CheckFiniteAllreduce(absl::Span<const LocalInput> inputs, const uint8_t* sum,
                                  size_t sum_bytes);

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_LOCAL_FINITE_CHECK_H_
