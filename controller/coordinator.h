// Coordinator: the logic of gravac-controller, with no gRPC inside (controller_service.h is the
// thin gRPC layer over it; tests call it directly).
//
// Membership. Daemons Join with {node name, first_rank, local_count, world_size, address}. Once
// `nodes` daemons joined and their ranks tile [0, world_size), nodes are numbered by first_rank
// (node order = rank order) and every waiting joiner gets its JoinReply. An inconsistent join
// (duplicate node name, overlapping ranks, a world size that disagrees, a rank range outside the
// world, ranks missing once every node is there) fails the round: every waiting joiner gets the
// same InvalidArgument naming the nodes and fields, and the membership starts over. A round that
// is not complete `join_timeout` after its first joiner fails with DeadlineExceeded naming the
// missing ranks (ExpireJoins, driven by the service's ticker). A re-join (rejoin = true) to an
// assembled job that matches its node answers at once; a restarted controller assembles the job
// from re-joins and continues the epochs above the highest one the daemons reported
// (DESIGN.md invariant 4): it publishes its policy's decision as epoch max + 1 so every daemon
// follows the new policy from then on.
//
// Statistics. ReportStats takes one node's NodeStepStats. A step is observed once every node
// reported it: norms and samples and bytes are summed, the step time is the slowest node's; the
// combined step goes to policy::GravacPolicy. Steps older than the newest observed one can no
// longer be observed and are dropped, and at most `max_pending_steps` incomplete steps are kept
// (the oldest goes first), so memory stays bounded when a node never reports a step. Steps whose
// nodes disagree on θ are refused (logged), and so are, after a restart, steps executed under
// the previous controller's decisions (epoch <= the highest epoch the daemons re-joined with). When
// the combined samples are 0 (workers gave none) the step counts one sample per rank, so
// throughputs stay comparable across θ.
//
// Decisions. Whenever the policy's decision changes, the coordinator publishes a JobDecision with
// the next epoch to every subscriber, and logs it at info level. Subscribe() delivers the
// current decision at once. `decision_delay` (a test hook) holds deliveries to some nodes back;
// they go out from DeliverDue(now), which the service's ticker calls.
//
// Metrics. An optional CoordinatorObserver (coordinator_observer.h) hears of membership, decision
// streams, decisions, steps and refused statistics as they happen.
//
// Thread-safety: every method is thread-safe (one mutex). Callbacks (JoinCallback, Subscriber,
// CoordinatorObserver) run while that mutex is held, in publication order: they must not block
// and must not call back into the Coordinator. JoinCallback may run inline from Join() or later
// from another caller.
#ifndef GRAVAC_CONTROLLER_COORDINATOR_H_
#define GRAVAC_CONTROLLER_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/coordinator_observer.h"
#include "controller/policy/gravac_policy.h"
#include "controller/policy/policy_config.h"
#include "core/logging.h"
#include "core/job_settings.h"
#include "core/job_types.h"

namespace gravac::controller {

struct CoordinatorOptions {
  int nodes = 1;  // daemons expected
  policy::PolicyConfig policy;
  std::string compressor{job_defaults::kCompressor};  // kernels::MakeCompressor name or "none"
  // wire precision of sparse values: fp32 | fp16 | bf16
  std::string sparse_values{job_defaults::kSparseValues};
  uint64_t job_seed = job_defaults::kJobSeed;
  absl::Duration join_timeout = absl::Seconds(120);
  std::map<int, absl::Duration> decision_delay;  // by node rank (test hook)
  size_t max_pending_steps = 256;                // incomplete steps kept at most
  Logger* log = nullptr;                         // not owned; nullptr = silent
  CoordinatorObserver* observer = nullptr;       // not owned, outlives it; nullptr = none
};

// OK when `value` is a sparse value precision the daemons know ("fp32", "fp16", "bf16"), else
// InvalidArgument naming the sparse_values setting and the accepted values.
absl::Status CheckSparseValues(std::string_view value);

struct JoinRequestInfo {
  std::string node_name;
  int first_rank = 0;
  int local_count = 0;
  int world_size = 0;
  std::string transport_address;
  bool rejoin = false;
  int node_rank = 0;         // rejoin only
  int64_t newest_epoch = 0;  // rejoin only
  int64_t last_step = -1;    // rejoin only
  uint32_t data_plane_protocol = 0;  // daemon/engine/protocol.h; the same on every node
};

struct NodeEntry {
  int node_rank = 0;
  std::string node_name;
  int first_rank = 0;
  int local_count = 0;
  std::string transport_address;
};

struct JoinReply {
  int node_rank = 0;
  std::vector<NodeEntry> nodes;  // by node rank
  int world_size = 0;
  JobConfig job;
  JobDecision decision;  // in force at the moment of the reply
};

using JoinCallback = std::function<void(absl::StatusOr<JoinReply>)>;

// A decision stream's receiving end (the gRPC WatchDecisions reactor, or a test fake).
class DecisionSubscriber {
 public:
  virtual ~DecisionSubscriber() = default;
  virtual void OnDecision(const JobDecision& decision) = 0;
  // The coordinator ends the stream (shutdown). No call follows.
  virtual void OnEnd(const absl::Status& status) = 0;
};

struct NodeStatusInfo {
  NodeEntry entry;
  bool watching = false;
  int64_t last_step = -1;
  int64_t stats_dropped = 0;
};

struct JobStatusInfo {
  bool assembled = false;
  int expected_nodes = 0;
  int joined_nodes = 0;
  int world_size = 0;
  std::vector<NodeStatusInfo> nodes;
  JobConfig job;
  JobDecision decision;
  int64_t steps_observed = 0;
  int64_t last_step = -1;
  double throughput = 0.0;
  double mean_throughput = 0.0;
  double last_step_seconds = 0.0;
  int64_t bytes_sent = 0;
  int64_t bytes_dense = 0;
  std::vector<std::pair<double, policy::ThroughputTable::Entry>> throughput_table;
  int64_t steps_incomplete = 0;
  int64_t steps_rejected = 0;
  int64_t epoch_base = 0;
};

class Coordinator {
 public:
  // InvalidArgument for nodes < 1, a bad policy config or a delay for a node >= nodes.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(CoordinatorOptions options);

  // Registers a joiner; `done` runs exactly once (see the file comment). Returns a ticket for
  // CancelJoin.
  int64_t Join(const JoinRequestInfo& request, JoinCallback done);
  // The joiner went away before the job assembled: forget it (its callback runs with Cancelled).
  void CancelJoin(int64_t ticket);
  // Fails the waiting round with DeadlineExceeded when its first joiner came before
  // now - join_timeout.
  void ExpireJoins(absl::Time now);

  // One node's statistics of one step. FailedPrecondition for a node the assembled job does not
  // have (the daemon must re-join); InvalidArgument for a malformed entry. `dropped`: entries the
  // node dropped before this one.
  absl::Status ReportStats(const NodeStepStats& stats, int64_t dropped = 0);

  // Starts a decision stream for node `node_rank`: the current decision at once (or after the
  // node's delay), then every newer one. FailedPrecondition when the job has no such node.
  // Returns an id for Unsubscribe. `subscriber` must outlive its subscription.
  absl::StatusOr<int64_t> Subscribe(int node_rank, DecisionSubscriber* subscriber);
  // After it returns no callback of that subscriber runs.
  void Unsubscribe(int64_t id);

  // Hands out delayed decisions whose time has come.
  void DeliverDue(absl::Time now);
  // The earliest pending delayed delivery, if any.
  std::optional<absl::Time> NextDelivery() const;

  // Fails pending joins and ends every stream with Unavailable; later joins and subscriptions
  // fail with Unavailable.
  void Shutdown();
  // As Shutdown, but pending joins and streams end with `reason` (the job failed on one of its
  // nodes: JobRegistry::Fail). No-op after Shutdown or Fail.
  void Fail(const absl::Status& reason);

  // An elastic job's next membership runs as a new Coordinator whose decisions continue above
  // the previous membership's newest epoch (MembershipBook): the current decision is republished
  // as epoch `epoch` + 1 and statistics of steps run under epochs <= `epoch` are refused, as for
  // a restarted controller. Call before the job assembles.
  void ContinueEpochsAbove(int64_t epoch);

  JobDecision Current() const;
  JobStatusInfo Status() const;
  bool assembled() const;
  // The name of node `node_rank` of the assembled job; nullopt when it has no such node. The
  // service checks it against the certificate of whoever speaks for that node.
  std::optional<std::string> NodeName(int node_rank) const;

 private:
  struct Joiner {
    int64_t ticket = 0;
    JoinRequestInfo request;
    JoinCallback done;
  };
  struct PendingStep {
    std::vector<bool> reported;
    int count = 0;
    NodeStepStats sum;  // norms, samples, bytes summed; step_seconds max
    bool theta_mismatch = false;
  };
  struct Subscription {
    int node_rank = 0;
    DecisionSubscriber* subscriber = nullptr;
  };
  struct DelayedDelivery {
    absl::Time due;
    int64_t subscription = 0;
    JobDecision decision;
  };

  Coordinator(CoordinatorOptions options, policy::GravacPolicy policy);

  JobConfig MakeJobConfig() const;
  JoinReply MakeReply(int node_rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckJoiner(const JoinRequestInfo& r) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<int> MatchAssembled(const JoinRequestInfo& r) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailRound(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Shutdown and Fail: pending joins fail with `joins`, streams end with `streams`.
  void End(const absl::Status& joins, const absl::Status& streams);
  void CompleteRound() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ObserveStep(int64_t step, const PendingStep& pending) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Publish(const JobDecision& decision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(int64_t id, const Subscription& sub, const JobDecision& decision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobDecision FromPolicy(const policy::Decision& d, int64_t epoch) const;
  // Observer notifications of the membership and of the nodes with a decision stream.
  void NotifyMembership() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotifyConnected() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotifyRejected(StatsRejection reason, int64_t count) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorOptions options_;
  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  // The round being assembled.
  std::vector<Joiner> joiners_ ABSL_GUARDED_BY(mu_);
  absl::Time round_started_ ABSL_GUARDED_BY(mu_);
  // The assembled job (empty before).
  std::vector<NodeEntry> nodes_ ABSL_GUARDED_BY(mu_);
  int world_size_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t data_plane_protocol_ ABSL_GUARDED_BY(mu_) = 0;  // of the assembled job
  std::vector<NodeStatusInfo> node_status_ ABSL_GUARDED_BY(mu_);
  // Policy and decisions.
  policy::GravacPolicy policy_ ABSL_GUARDED_BY(mu_);
  int64_t policy_epoch_ ABSL_GUARDED_BY(mu_) = 0;  // policy epoch of current_
  int64_t epoch_base_ ABSL_GUARDED_BY(mu_) = 0;
  JobDecision current_ ABSL_GUARDED_BY(mu_);
  // Statistics.
  std::map<int64_t, PendingStep> pending_ ABSL_GUARDED_BY(mu_);
  int64_t last_observed_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t steps_incomplete_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_rejected_ ABSL_GUARDED_BY(mu_) = 0;
  double sum_samples_ ABSL_GUARDED_BY(mu_) = 0.0;
  double sum_seconds_ ABSL_GUARDED_BY(mu_) = 0.0;
  double last_throughput_ ABSL_GUARDED_BY(mu_) = 0.0;
  double last_step_seconds_ ABSL_GUARDED_BY(mu_) = 0.0;
  int64_t bytes_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_dense_ ABSL_GUARDED_BY(mu_) = 0;
  // Subscribers.
  int64_t next_subscription_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, Subscription> subscriptions_ ABSL_GUARDED_BY(mu_);
  std::vector<DelayedDelivery> delayed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gravac::controller

#endif  // GRAVAC_CONTROLLER_COORDINATOR_H_
