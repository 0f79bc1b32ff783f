// The engine's negotiation: the message every node contributes to a cycle, its byte encoding,
// and the Negotiator, a replicated state machine that every node runs on the same gathered
// messages and that therefore reaches the same conclusions on every node: which tensors are
// ready everywhere and in which order, which fail (metadata that differs across nodes, a name
// that some nodes never post, a failure of another node), the decision each step uses
// (invariant 1 of DESIGN.md) and when shutdown is agreed.
//
// Response cache: the first time a node lists a tensor it sends its full TensorSpec; processing
// assigns the spec (without step and samples) the next cache id, in node order and then list
// order, so every node assigns the same ids; later listings of the same spec send the id only.
// The cache holds at most `cache_capacity` specs (as Horovod's response cache): at the end of a
// cycle that leaves more, the least recently listed ones are dropped. Every node processes the
// same messages in the same order, so every node drops the same ids, and a node builds its next
// message only after processing, so it never sends a dropped id; listing a dropped spec again
// sends it in full and gives it a new id. Unnamed collectives (a new name per call) therefore
// cost no memory beyond the capacity.
//
// Process sets (Horovod's): a tensor lists the global ranks of its set; only the nodes holding
// them list it, and it is ready once they all have (its first listing fixes which nodes those
// are). Missing-name, stall and deadlock checks count only those nodes. A node outside the set
// that lists it anyway (the ranks disagree on the set) completes it with a process_set mismatch.
// Process(...).ready holds every ready tensor; a node runs those of sets it holds ranks of.
//
// Join (Horovod's hvd.join): a node lists the tensor of kind kJoin once all its ranks joined,
// with spec.root_rank = its last joined rank. The join completes when every node listed it; its
// agreed root_rank is that of the node that listed it last (processing order: cycle, then node),
// the job's last joined rank.
//
// Decisions: the agreed decision of a cycle is the smallest-epoch decision among the nodes'
// messages (each node's newest epoch never decreases, so neither does the agreed one). The first
// cycle that makes a tensor of step s ready fixes step s's decision; later cycles reuse it.
//
// Thread-safety: plain values and a Negotiator owned by the engine thread (not thread-safe).
#ifndef GRAVAC_DAEMON_ENGINE_NEGOTIATION_H_
#define GRAVAC_DAEMON_ENGINE_NEGOTIATION_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/engine/types.h"

namespace gravac::daemon::internal {

// One tensor a node lists as ready in a cycle.
struct ReadyEntry {
  bool cached = false;  // spec travels as cache_id; spec.step/samples always travel
  uint32_t cache_id = 0;
  TensorSpec spec;
  std::string error;  // non-empty: this node cannot run the tensor (fails it everywhere)
  bool mismatch = false;  // the error is a disagreement between ranks (FailedPrecondition)
};

struct NodeMessage {
  JobDecision decision;  // the node's newest
  std::vector<ReadyEntry> ready;
  bool failed = false;  // FailLocal was called on the node
  absl::StatusCode failure_code = absl::StatusCode::kOk;
  std::string failure_message;
  bool shutdown = false;  // the node wants to shut down
  bool give_up = false;   // the node saw no progress while every node waits (see Negotiator)
  bool give_up_moved_on = false;  // a partial tensor's missing nodes moved on (see Negotiator)
};

std::vector<uint8_t> EncodeMessage(const NodeMessage& message);
absl::StatusOr<NodeMessage> DecodeMessage(absl::Span<const uint8_t> bytes);

// A tensor ready on every node with agreeing metadata.
struct ReadyTensor {
  TensorSpec spec;       // as agreed (allgather: this node's first dimension)
  JobDecision decision;  // of the tensor's step (or of the cycle for step -1)
  // Per node: when the cycle that processed its listing ran (Unix ns), for the timeline.
  std::vector<int64_t> listed_ns;
};

struct FailedTensor {
  std::string name;
  absl::Status status;
};

struct CycleOutcome {
  std::vector<ReadyTensor> ready;    // execution order, identical on every node
  std::vector<FailedTensor> failed;  // identical on every node
  absl::Status job_failure;          // not OK: a node failed; every pending tensor fails
  bool shutdown = false;             // every node asked to shut down
  JobDecision agreed;
};

// "2-3", "0-1,4-5", "3": the global ranks of the given nodes.
std::string FormatRanks(absl::Span<const NodeLayout> layout, absl::Span<const int> nodes);
// "node 1 (ranks 2-3)".
std::string FormatNode(absl::Span<const NodeLayout> layout, int node);

class Negotiator {
 public:
  static constexpr size_t kDefaultCacheCapacity = 1024;

  // cache_capacity >= 1 (0 is taken as 1); it must be the same on every node.
  Negotiator(int node_rank, std::vector<NodeLayout> layout,
             size_t cache_capacity = kDefaultCacheCapacity);

  // This node's entry for a tensor it lists now: the cache id when the spec is known.
  ReadyEntry MakeEntry(const TensorSpec& spec, std::string error, bool mismatch = false) const;

  // Applies one cycle's messages (index = node rank). Fails only on messages that break the
  // protocol (unknown cache id, a name listed twice by one node); the engine treats that as fatal.
  absl::StatusOr<CycleOutcome> Process(absl::Span<const NodeMessage> messages, absl::Time now);

  // Log lines for tensors listed by some nodes but not all for longer than `after` (once per
  // tensor per `after`), naming the missing nodes' ranks.
  std::vector<std::string> StallReports(absl::Time now, absl::Duration after);

  // True when every node lists at least one tensor that some node lacks and nothing was listed
  // or made ready for `timeout`: the nodes wait for each other (e.g. different names). The node
  // then sets give_up in its message, and the cycle fails the partial tensors on every node.
  bool Deadlocked(absl::Time now, absl::Duration timeout) const;

  // True when a tensor of step s, listed by some nodes for at least `grace`, is missing on nodes
  // that all listed a later step already (steps must not decrease on a rank). The node then sets
  // give_up_moved_on, and the cycle fails those tensors on every node.
  bool MovedOn(absl::Time now, absl::Duration grace) const;

  // The tensors other nodes listed and this node has not, as the first listing node gave them
  // (step included, samples 0), in listing order. A node whose ranks have all joined answers
  // each of them in its next message (a zero contribution or an error).
  std::vector<TensorSpec> MissingHere() const;

  bool HasPending() const { return !pending_.empty(); }
  size_t cache_size() const { return cache_.size(); }

 private:
  struct Pending {
    uint64_t order = 0;
    absl::Time first_seen;
    absl::Time last_report;
    std::vector<std::optional<ReadyEntry>> per_node;  // resolved specs
    std::vector<uint64_t> listed_at;                  // per node: listing sequence number
    std::vector<int64_t> listed_ns;                   // per node: when (Unix ns)
    int listed = 0;
    // Per node: whether it holds ranks of the tensor's process set (and so lists it).
    std::vector<bool> expected;
    int expected_count = 0;
  };

  struct CacheEntry {
    TensorSpec spec;
    std::string key;
    std::list<uint32_t>::iterator recency;  // into recency_
  };

  static std::string CacheKey(const TensorSpec& spec);
  // Marks the spec the most recently listed, inserting it under a new id when it is new.
  void RememberSpec(std::string key, const TensorSpec& spec);
  // Drops the least recently listed specs beyond the capacity.
  void TrimCache();
  // Empty when the nodes agree, else the error message.
  std::string CheckAgreement(const std::string& name, const Pending& p) const;
  // The latest step the nodes missing from `p` listed, when they all moved past p's step;
  // -1 otherwise.
  int64_t MovedOnTo(const Pending& p) const;
  std::string MissingMessage(const std::string& name, const Pending& p, std::string_view why) const;
  JobDecision DecisionForStep(int64_t step, const JobDecision& agreed);

  const int node_rank_;
  const std::vector<NodeLayout> layout_;
  const size_t cache_capacity_;
  std::unordered_map<std::string, uint32_t> cache_ids_;  // by CacheKey
  std::unordered_map<uint32_t, CacheEntry> cache_;       // by id
  std::list<uint32_t> recency_;                          // ids, least recently listed first
  uint32_t next_cache_id_ = 0;
  std::map<std::string, Pending> pending_;
  uint64_t next_order_ = 0;
  uint64_t next_listing_ = 0;  // every listing, in processing order (the same on every node)
  std::vector<int64_t> max_step_listed_;  // per node
  std::map<int64_t, JobDecision> step_decisions_;
  absl::Time last_progress_ = absl::InfinitePast();
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_NEGOTIATION_H_
