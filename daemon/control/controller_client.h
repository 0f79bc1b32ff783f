// ControllerClient: the daemon's link to gravac-controller (proto/gravac/v1/controller.proto).
//
// It joins the job (Join: blocks until every daemon of the job joined, bounded by join_timeout),
// then, after Start(), runs two background threads:
//   - a decision watcher: a WatchDecisions server stream; every newer decision replaces the one
//     Newest() returns (epochs only grow);
//   - a stats sender: a ReportStats client stream fed from a bounded queue. Report() never blocks;
//     when the queue is full (the controller is away) the oldest entry is dropped and counted.
// When the controller is unreachable both threads reconnect with exponential backoff (re-joining
// with this node's rank and newest epoch, so a restarted controller rebuilds its state); the last
// decision stays in force meanwhile, so training continues (DESIGN.md invariant 4).
// Before any decision arrived Newest() is epoch 0 built from the JobConfig received at Join
// (θ = θ_c = θ_min, warm-up, searching).
//
// Thread-safety: Newest() and Report() are safe from any thread and never block on the network.
// Join and Start are called once each, in that order, from one thread. Shutdown may be called
// from any thread at any time, also while Join blocks (Join then returns Cancelled); it flushes
// queued stats (bounded by shutdown_timeout), stops the threads and is idempotent; the destructor
// calls it. Node names must be unique within a job (the controller refuses duplicates).
#ifndef GRAVAC_DAEMON_CONTROL_CONTROLLER_CLIENT_H_
#define GRAVAC_DAEMON_CONTROL_CONTROLLER_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/job_id.h"
#include "core/logging.h"
#include "daemon/daemon_metrics.h"
#include "daemon/engine/protocol.h"
#include "daemon/engine/types.h"
#include "proto/grpc_security.h"

namespace gravac::daemon {

struct ControllerClientOptions {
  std::string address;  // host:port of gravac-controller
  // Mutual TLS with this node's certificate (its name must be JoinInfo::node_name, or the
  // controller refuses the join) or explicit plain text; the default (neither) fails Create.
  proto::GrpcSecurity security;
  absl::Duration join_timeout = absl::Seconds(60);
  Logger* log = nullptr;  // not owned; nullptr = no logging
  // Reconnect backoff: starts at the first value, doubles up to the second.
  absl::Duration reconnect_initial = absl::Milliseconds(100);
  absl::Duration reconnect_max = absl::Seconds(2);
  // Stats not yet sent; the oldest is dropped when full.
  size_t stats_queue_capacity = 4096;
  // Stats are sent in batches of at most this many entries.
  size_t stats_batch_size = 64;
  // Shutdown waits at most this long for queued stats to be sent.
  absl::Duration shutdown_timeout = absl::Seconds(2);
  // HTTP/2 keepalive pings, also while idle, so a dead controller is noticed (the controller
  // accepts pings every 5 s or more).
  absl::Duration keepalive_time = absl::Seconds(10);
  // gravac_controller_connected (1 from the first decision of a WatchDecisions stream until it
  // ends) and gravac_decisions_received_total; nullptr = no metrics. Must outlive the client.
  DaemonMetrics* metrics = nullptr;
  // The time join_timeout, the reconnect backoff and shutdown_timeout are measured on
  // (core/clock.h); nullptr = the real clock. gRPC's own deadlines and pings run on real time.
  // Must outlive the client.
  const Clock* clock = nullptr;
};

// What this daemon tells the controller when it joins.
struct JoinInfo {
  std::string node_name;          // e.g. the host name; for status and error messages
  int first_rank = 0;             // first global rank of this node's workers
  int local_count = 0;            // workers on this node
  int world_size = 0;             // workers in the job
  std::string transport_address;  // opaque data-plane address blob of this daemon
  uint32_t data_plane_protocol = kDataPlaneProtocol;  // must be the same on every node
  JobId job = {};  // the job this daemon serves (every call names it)
  int nodes = 0;   // nodes of the job; 0 = the controller's default
};

// What the controller answers once every daemon joined.
struct JoinResult {
  int node_rank = 0;
  std::vector<NodeLayout> layout;                // by node rank (= rank order)
  std::vector<std::string> transport_addresses;  // by node rank
  JobConfig job;
};

// Elastic jobs: this node asks for the job's next membership (Regroup).
struct RegroupAsk {
  JobId job;  // the job's first run
  std::string node_name;
  int local_count = 0;       // workers on this node in the next membership
  int64_t from_version = 0;  // -1: a new node
  int min_size = 0;
  int max_size = 0;
  std::vector<std::string> expect_nodes;  // after a host update: the next membership's nodes
};

// This node's place in the new membership.
struct MembershipResult {
  int64_t version = 0;
  std::string run_id;  // the run of the new membership
  int node_rank = 0;
  int nodes = 0;
  int first_rank = 0;  // of this node
  int world_size = 0;
  std::vector<std::string> lost_nodes;
  std::vector<std::string> added_nodes;
};

class ControllerClient : public DecisionSource, public StatsSink {
 public:
  // InvalidArgument for an empty address. Does not connect yet.
  static absl::StatusOr<std::unique_ptr<ControllerClient>> Create(ControllerClientOptions options);

  ~ControllerClient() override;
  ControllerClient(const ControllerClient&) = delete;
  ControllerClient& operator=(const ControllerClient&) = delete;

  // Registers this node and blocks until all daemons of the job joined (at most join_timeout;
  // retries while the controller is not reachable yet). Errors: DeadlineExceeded when the job did
  // not assemble in time; the controller's error (InvalidArgument / AlreadyExists ...) naming the
  // field when the membership is inconsistent (duplicate node, overlapping ranks, world size).
  absl::StatusOr<JoinResult> Join(const JoinInfo& info);

  // Asks for the job's next membership and blocks until the controller published it (at most
  // join_timeout; retries while the controller is not reachable). The controller's error
  // (FailedPrecondition: below --min-np naming the lost nodes, a stale version) otherwise.
  // Independent of Join: a client may only regroup.
  absl::StatusOr<MembershipResult> Regroup(const RegroupAsk& ask);

  // Starts the decision watcher and the stats sender. Precondition: Join succeeded.
  void Start();

  // The newest decision this node holds. Non-blocking.
  JobDecision Newest() const override;

  // Queues one step's statistics for the controller. Non-blocking; drops the oldest queued entry
  // when the queue is full.
  void Report(const NodeStepStats& stats) override;

  // Flushes queued stats (bounded by shutdown_timeout), stops the threads. Idempotent.
  void Shutdown();

  // Tells the controller this node's part of the job is over (after Shutdown; the job ends when
  // its last node left). Blocks at most shutdown_timeout. Precondition: Join succeeded. Returns
  // whether the job ended, or the controller's error.
  absl::StatusOr<bool> Leave();

  // Tells the controller that this node's part of `job` failed with `reason` (its session was
  // refused or crashed), so that the controller fails the job and its other nodes learn it at
  // once (rpc FailJob). Needs no Join (node_rank -1 = not known yet). Blocks at most `timeout`.
  // Returns whether the job failed now (false: it had ended or failed before).
  absl::StatusOr<bool> FailJob(const JobId& job, const std::string& node_name, int node_rank,
                               const absl::Status& reason, absl::Duration timeout);

  // Stats entries dropped because the queue was full (the controller was away).
  int64_t dropped_stats() const;
  // Stats entries the controller acknowledged.
  int64_t sent_stats() const;
  // Successful re-joins after the decision stream ended (the controller was away or restarted).
  int64_t reconnects() const;

  class Impl;

 private:
  explicit ControllerClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_CONTROL_CONTROLLER_CLIENT_H_
