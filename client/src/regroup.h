// Regroup: an elastic job's worker asks its node's daemon for its place in the job's next
// membership (issue 22; daemon/regroup_desk.h answers). One connection: a regroup hello naming the
// job's first run and the membership the worker was in, then one Placement or Error, then the
// daemon closes. The worker then connects as usual (Client::Connect) with the placement's run,
// rank, size, local rank and size and node.
//
// Thread-safety: stateless. Blocking: up to `timeout` (the daemon answers within its controller
// join timeout; a daemon that dies closes the connection, which fails the call at once).
#ifndef GRAVAC_CLIENT_SRC_REGROUP_H_
#define GRAVAC_CLIENT_SRC_REGROUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/src/client.h"
#include "gravac/v1/worker.pb.h"

namespace gravac::client {

struct RegroupRequest {
  int64_t from_version = 0;  // -1: a worker of a new node
  int min_size = 0;          // gravacrun --min-np; 0 = 1
  int max_size = 0;          // gravacrun --max-np; 0 = no limit
  // After a host update: every node the next membership should hold (Hello.expect_nodes).
  std::vector<std::string> expect_nodes;
  absl::Duration timeout = absl::Seconds(300);
};

// `config` gives the daemon socket, the job (name and first run id) and this worker's local rank
// and local size in the membership it was in. Errors: the daemon's or the controller's (below
// --min-np naming the lost nodes: FailedPrecondition), Unavailable when the daemon is gone,
// DeadlineExceeded after `timeout`.
absl::StatusOr<v1::Placement> Regroup(const ClientConfig& config, const RegroupRequest& request);

}  // namespace gravac::client

#endif  // GRAVAC_CLIENT_SRC_REGROUP_H_
