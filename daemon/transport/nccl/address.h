// NCCL transport address blobs: what LocalAddress() publishes and Connect() parses. Plain C++ (no
// CUDA or NCCL call), so it is built and unit-tested on machines without a GPU.
//
// The NCCL backend (transport.h) runs one two-rank NCCL communicator per direction of every pair
// of ranks: "the channel src -> dst" carries src's messages to dst. Rank r creates the ncclUniqueId
// of each of its outgoing channels r -> q and publishes them all in its blob:
//
//   "nccl1:<rank>:<world size>:<id r->0>,<id r->1>,...,<id r->p-1>"
//
// with each id as 2 * kUniqueIdBytes lowercase hex digits and the entry for r itself empty. Rank q
// takes the id at index q from r's blob to join the channel r -> q.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_DAEMON_TRANSPORT_NCCL_ADDRESS_H_
#define GRAVAC_DAEMON_TRANSPORT_NCCL_ADDRESS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gravac::transport::nccl {

// sizeof(ncclUniqueId) (NCCL_UNIQUE_ID_BYTES); transport.cc checks it against nccl.h.
inline constexpr size_t kUniqueIdBytes = 128;

struct Address {
  int rank = 0;
  int world_size = 1;
  // ids[q]: the raw ncclUniqueId bytes of the channel rank -> q; empty for q == rank.
  std::vector<std::string> ids;
};

// The blob for `address` (ids.size() == world_size; each non-empty id is kUniqueIdBytes long).
std::string EncodeAddress(const Address& address);

// Parses the blob that `self_rank` (of a world of `world_size`) was given for `peer_rank` and
// returns the id of the channel peer_rank -> self_rank. kInvalidArgument, naming both ranks and
// the field, for: another backend's or a malformed blob, a blob of another rank or world size, a
// wrong number of ids, an id of the wrong length or with non-hex digits, and a non-empty entry
// for the peer itself.
absl::StatusOr<std::string> ParsePeerAddress(std::string_view blob, int self_rank, int peer_rank,
                                             int world_size);

}  // namespace gravac::transport::nccl

#endif  // GRAVAC_DAEMON_TRANSPORT_NCCL_ADDRESS_H_
