#include "controller/controller_service.h"

#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "core/absl_compat.h"
#include "proto/grpc_status.h"
#include "proto/job_convert.h"

namespace gravac::controller {
namespace {

namespace v1 = ::gravac::v1;

void ToProto(const NodeEntry& in, v1::NodeInfo* out) {
  out->set_node_rank(in.node_rank);
  out->set_node_name(in.node_name);
  out->set_first_rank(in.first_rank);
  out->set_local_count(in.local_count);
  out->set_transport_address(in.transport_address);
}

// Join: finishes when the Coordinator answers; a joiner that goes away is removed.
JobId FromProto(const v1::JobId& id) { return JobId{id.name(), id.run_id()}.Normalized(); }

void ToProto(const JobId& in, v1::JobId* out) {
  out->set_name(in.name);
  out->set_run_id(in.run_id);
}

// "node 'NAME': " + the status's message, for errors a daemon's join gets.
grpc::Status NodeError(const std::string& node, const absl::Status& status) {
  return proto::ToGrpcStatus(
      absl::Status(status.code(), absl::StrFormat("node '%s': %s", node, status.message())));
}

// A unary call answered later through a ticket (a Join, a Regroup). The answer may come inline
// or on another thread, and gRPC may cancel the call before the ticket is known: the state shared
// with the answer callback applies such a cancel as soon as the ticket is set. After Finish the
// reactor may be gone, so the answer callback touches only that shared state.
class TicketedReactor : public grpc::ServerUnaryReactor {
 public:
  void OnCancel() override {
    int64_t ticket = 0;
    {
      absl::MutexLock lock(&state_->mu);
      state_->cancelled = true;
      if (state_->finished) return;
      ticket = state_->ticket;
    }
    if (ticket != 0) cancel_(ticket);
  }
  void OnDone() override { delete this; }

 protected:
  struct State {
    absl::Mutex mu;
    int64_t ticket = 0;
    bool cancelled = false;
    bool finished = false;

    // The answer callback calls this first.
    void MarkFinished() {
      absl::MutexLock lock(&mu);
      finished = true;
    }
  };

  // `cancel(ticket)` withdraws a pending request.
  explicit TicketedReactor(std::function<void(int64_t)> cancel)
      : cancel_(std::move(cancel)), state_(std::make_shared<State>()) {}

  const std::shared_ptr<State>& state() const { return state_; }

  // Called with the ticket the request returned: a cancel that came before it is applied now.
  void SetTicket(int64_t ticket) {
    bool cancel = false;
    {
      absl::MutexLock lock(&state_->mu);
      state_->ticket = ticket;
      cancel = state_->cancelled && !state_->finished;
    }
    if (cancel && ticket != 0) cancel_(ticket);
  }

 private:
  std::function<void(int64_t)> cancel_;
  std::shared_ptr<State> state_;
};

class JoinReactor final : public TicketedReactor {
 public:
  JoinReactor(std::shared_ptr<Coordinator> coordinator, const v1::JoinRequest& request,
              v1::JoinResponse* response)
      : TicketedReactor([coordinator](int64_t ticket) { coordinator->CancelJoin(ticket); }) {
    JoinRequestInfo info;
    info.node_name = request.node_name();
    info.first_rank = request.first_rank();
    info.local_count = request.local_count();
    info.world_size = request.world_size();
    info.transport_address = request.transport_address();
    info.rejoin = request.rejoin();
    info.node_rank = request.node_rank();
    info.newest_epoch = request.newest_epoch();
    info.last_step = request.last_step();
    info.data_plane_protocol = request.data_plane_protocol();
    std::shared_ptr<State> state = this->state();
    SetTicket(coordinator->Join(info, [this, response, state](absl::StatusOr<JoinReply> reply) {
      state->MarkFinished();
      if (!reply.ok()) {
        Finish(proto::ToGrpcStatus(reply.status()));
        return;
      }
      response->set_node_rank(reply->node_rank);
      response->set_world_size(reply->world_size);
      for (const NodeEntry& n : reply->nodes) ToProto(n, response->add_nodes());
      proto::ToProto(reply->job, response->mutable_job());
      proto::ToProto(reply->decision, response->mutable_decision());
      Finish(grpc::Status::OK);
    }));
  }
};

// Regroup: finishes when the MembershipBook answers; an asker that goes away is removed.
class RegroupReactor final : public TicketedReactor {
 public:
  RegroupReactor(MembershipBook* book, const RegroupInfo& info, v1::Membership* response)
      : TicketedReactor([book](int64_t ticket) { book->Cancel(ticket); }) {
    std::shared_ptr<State> state = this->state();
    SetTicket(book->Regroup(info, [this, response, state](absl::StatusOr<MembershipInfo> m) {
      state->MarkFinished();
      if (!m.ok()) {
        Finish(proto::ToGrpcStatus(m.status()));
        return;
      }
      response->set_version(m->version);
      response->set_run_id(m->run_id);
      response->set_node_rank(m->node_rank);
      response->set_world_size(m->world_size);
      response->set_epoch_base(m->epoch_base);
      for (const NodeEntry& n : m->nodes) ToProto(n, response->add_nodes());
      for (const std::string& n : m->lost_nodes) response->add_lost_nodes(n);
      for (const std::string& n : m->added_nodes) response->add_added_nodes(n);
      Finish(grpc::Status::OK);
    }));
  }
};

// ReportStats: the job of the first batch is the stream's; a batch naming another job ends it.
class StatsReactor final : public grpc::ServerReadReactor<v1::StatsBatch> {
 public:
  // `authorize(job, coordinator, node_rank)` says whether the peer may report for that node of
  // the job (`coordinator` null: the job is unknown).
  StatsReactor(JobRegistry* jobs, Logger* log, v1::ReportStatsResponse* response,
               std::function<absl::Status(const JobId&, const Coordinator*, int)> authorize)
      : jobs_(jobs), log_(log), response_(response), authorize_(std::move(authorize)) {
    StartRead(&batch_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the daemon closed the stream, or the call was cancelled
      response_->set_accepted(accepted_);
      Finish(grpc::Status::OK);
      return;
    }
    const JobId id = FromProto(batch_.job_id());
    if (coordinator_ == nullptr) {
      absl::StatusOr<std::shared_ptr<Coordinator>> found = jobs_->Find(id);
      if (!found.ok()) {
        absl::Status allowed = authorize_(id, nullptr, batch_.node_rank());
        Finish(proto::ToGrpcStatus(allowed.ok() ? found.status() : allowed));
        return;
      }
      coordinator_ = *std::move(found);
      job_ = id;
    } else if (id != job_) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrFormat("stats of %s on the stream of %s", id.ToString(),
                                          job_.ToString())));
      return;
    }
    if (absl::Status allowed = authorize_(job_, coordinator_.get(), batch_.node_rank());
        !allowed.ok()) {
      if (log_ != nullptr) GRAVAC_LOG(*log_, kWarning, "%s", allowed.message());
      Finish(proto::ToGrpcStatus(allowed));
      return;
    }
    for (int i = 0; i < batch_.stats_size(); ++i) {
      absl::Status s = coordinator_->ReportStats(
          proto::FromProto(batch_.stats(i), batch_.node_rank()), i == 0 ? batch_.dropped() : 0);
      if (s.code() == absl::StatusCode::kFailedPrecondition) {
        Finish(proto::ToGrpcStatus(
            absl::FailedPreconditionError(StrCat(job_.ToString(), ": ", s.message()))));
        return;
      }
      if (!s.ok()) {
        if (log_ != nullptr) GRAVAC_LOG(*log_, kWarning, "%s: %s", job_.ToString(), s.ToString());
        continue;
      }
      ++accepted_;
    }
    StartRead(&batch_);
  }
  void OnDone() override { delete this; }

 private:
  JobRegistry* jobs_;
  Logger* log_;
  v1::ReportStatsResponse* response_;
  std::function<absl::Status(const JobId&, const Coordinator*, int)> authorize_;
  std::shared_ptr<Coordinator> coordinator_;  // the stream's job, from its first batch
  JobId job_;
  v1::StatsBatch batch_;
  int64_t accepted_ = 0;
};

class WatchReactor final : public grpc::ServerWriteReactor<v1::Decision>,
                           public DecisionSubscriber {
 public:
  WatchReactor(JobRegistry* jobs, const JobId& job, int node_rank) {
    absl::StatusOr<std::shared_ptr<Coordinator>> found = jobs->Find(job);
    absl::StatusOr<int64_t> id = absl::UnknownError("unset");
    if (!found.ok()) {
      id = found.status();
    } else {
      coordinator_ = *std::move(found);
      id = coordinator_->Subscribe(node_rank, this);
      if (!id.ok()) {
        id = absl::Status(id.status().code(), StrCat(job.ToString(), ": ", id.status().message()));
      }
    }
    absl::MutexLock lock(&mu_);
    if (!id.ok()) {
      FinishLocked(proto::ToGrpcStatus(id.status()));
      return;
    }
    id_ = *id;
  }

  void OnDecision(const JobDecision& decision) override {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    if (!queue_.empty() && decision.epoch <= queue_.back().epoch) return;
    // A daemon only needs the newest decision: a slow reader gets the backlog coalesced.
    if (queue_.size() >= kMaxQueued) queue_.pop_front();
    queue_.push_back(decision);
    if (!writing_) WriteNextLocked();
  }
  void OnEnd(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    FinishLocked(proto::ToGrpcStatus(status));
  }
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      queue_.clear();
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch: write failed"));
    }
    if (finishing_) {
      if (!finish_called_) {
        finish_called_ = true;
        Finish(final_);
      }
      return;
    }
    if (!queue_.empty()) WriteNextLocked();
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch: cancelled"));
  }
  void OnDone() override {
    int64_t id = 0;
    {
      absl::MutexLock lock(&mu_);
      id = id_;
    }
    if (id != 0) coordinator_->Unsubscribe(id);
    delete this;
  }

 private:
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    proto::ToProto(queue_.front(), &out_);
    queue_.pop_front();
    writing_ = true;
    StartWrite(&out_);
  }
  // Finishes now, or once the write in flight completes.
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    final_ = status;
    if (!writing_) {
      finish_called_ = true;
      Finish(final_);
    }
  }

  static constexpr size_t kMaxQueued = 64;

  std::shared_ptr<Coordinator> coordinator_;  // null when the job was not found
  absl::Mutex mu_;
  int64_t id_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<JobDecision> queue_ ABSL_GUARDED_BY(mu_);
  v1::Decision out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_ ABSL_GUARDED_BY(mu_);
};

// A decision stream refused before it subscribed.
class RefusedWatch final : public grpc::ServerWriteReactor<v1::Decision> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

void ToProto(const JobSummaryInfo& in, v1::JobSummary* out) {
  ToProto(in.id, out->mutable_job_id());
  out->set_state(JobStateName(in.state));
  out->set_failure(in.failure);
  out->set_expected_nodes(in.status.expected_nodes);
  out->set_joined_nodes(in.status.joined_nodes);
  out->set_world_size(in.status.world_size);
  proto::ToProto(in.status.decision, out->mutable_decision());
  out->set_steps_observed(in.status.steps_observed);
  out->set_last_step(in.status.last_step);
  out->set_started_unix_s(absl::ToDoubleSeconds(in.started - absl::UnixEpoch()));
  if (in.ended.has_value()) {
    out->set_ended_unix_s(absl::ToDoubleSeconds(*in.ended - absl::UnixEpoch()));
  }
}

void ToProto(const JobStatusInfo& in, v1::JobStatus* out) {
  out->set_assembled(in.assembled);
  out->set_expected_nodes(in.expected_nodes);
  out->set_joined_nodes(in.joined_nodes);
  out->set_world_size(in.world_size);
  for (const NodeStatusInfo& n : in.nodes) {
    v1::NodeStatus* node = out->add_nodes();
    ToProto(n.entry, node->mutable_info());
    node->set_watching(n.watching);
    node->set_last_step(n.last_step);
    node->set_stats_dropped(n.stats_dropped);
  }
  proto::ToProto(in.job, out->mutable_job());
  proto::ToProto(in.decision, out->mutable_decision());
  out->set_steps_observed(in.steps_observed);
  out->set_last_step(in.last_step);
  out->set_throughput(in.throughput);
  out->set_mean_throughput(in.mean_throughput);
  out->set_last_step_seconds(in.last_step_seconds);
  out->set_bytes_sent(in.bytes_sent);
  out->set_bytes_dense(in.bytes_dense);
  out->set_bytes_saved(in.bytes_dense - in.bytes_sent);
  for (const auto& [theta, entry] : in.throughput_table) {
    v1::ThroughputEntry* e = out->add_throughput_table();
    e->set_theta(theta);
    e->set_mean(entry.mean());
    e->set_samples(entry.samples);
    e->set_period_complete(entry.period_complete);
  }
  out->set_steps_incomplete(in.steps_incomplete);
  out->set_steps_rejected(in.steps_rejected);
  out->set_epoch_base(in.epoch_base);
}

ControllerService::ControllerService(JobRegistry* jobs, MembershipBook* memberships, Logger* log,
                                     proto::GrpcSecurity security, bool status_without_cert)
    : jobs_(jobs),
      memberships_(memberships),
      log_(log),
      security_(std::move(security)),
      status_without_cert_(status_without_cert) {}

absl::Status ControllerService::CheckNodeRank(const grpc::CallbackServerContext& context,
                                              const JobId& job, const Coordinator* coordinator,
                                              int node_rank, std::string_view what) const {
  if (security_.plaintext) return absl::OkStatus();
  std::optional<std::string> name;
  if (coordinator != nullptr) name = coordinator->NodeName(node_rank);
  // Not a node of the job (or no such job): only a client with a certificate reaches the
  // registry's or the Coordinator's refusal.
  if (!name.has_value()) {
    if (!proto::PeerNames(*context.auth_context()).empty()) return absl::OkStatus();
    return absl::UnauthenticatedError(
        absl::StrFormat("%s for node %d of %s refused: the client presented no certificate", what,
                        node_rank, job.ToString()));
  }
  return proto::CheckPeerIsNamed(
      security_, *context.auth_context(), *name,
      absl::StrFormat("%s for node %d ('%s') of %s", what, node_rank, *name, job.ToString()));
}

bool ControllerService::StatusAllowed(const grpc::CallbackServerContext& context) const {
  return security_.plaintext || status_without_cert_ ||
         !proto::PeerNames(*context.auth_context()).empty();
}

grpc::ServerUnaryReactor* ControllerService::Join(grpc::CallbackServerContext* context,
                                                  const v1::JoinRequest* request,
                                                  v1::JoinResponse* response) {
  const JobId job = FromProto(request->job_id());
  absl::Status allowed = proto::CheckPeerIsNamed(
      security_, *context->auth_context(), request->node_name(),
      absl::StrFormat("Join%s as node '%s' of %s", request->rejoin() ? " (rejoin)" : "",
                      request->node_name(), job.ToString()));
  if (!allowed.ok()) {
    if (log_ != nullptr) GRAVAC_LOG(*log_, kWarning, "%s", allowed.message());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(proto::ToGrpcStatus(allowed));
    return reactor;
  }
  absl::StatusOr<std::shared_ptr<Coordinator>> coordinator =
      jobs_->ForJoin(job, request->nodes());
  if (!coordinator.ok()) {
    if (log_ != nullptr) {
      GRAVAC_LOG(*log_, kWarning, "join refused: node '%s': %s", request->node_name(),
                 coordinator.status().message());
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(NodeError(request->node_name(), coordinator.status()));
    return reactor;
  }
  return new JoinReactor(*std::move(coordinator), *request, response);
}

grpc::ServerReadReactor<v1::StatsBatch>* ControllerService::ReportStats(
    grpc::CallbackServerContext* context, v1::ReportStatsResponse* response) {
  return new StatsReactor(
      jobs_, log_, response,
      [this, context](const JobId& job, const Coordinator* coordinator, int node_rank) {
        return CheckNodeRank(*context, job, coordinator, node_rank, "ReportStats");
      });
}

grpc::ServerWriteReactor<v1::Decision>* ControllerService::WatchDecisions(
    grpc::CallbackServerContext* context, const v1::WatchDecisionsRequest* request) {
  const JobId job = FromProto(request->job_id());
  absl::StatusOr<std::shared_ptr<Coordinator>> found = jobs_->Find(job);
  absl::Status allowed = CheckNodeRank(*context, job, found.ok() ? found->get() : nullptr,
                                       request->node_rank(), "WatchDecisions");
  if (!allowed.ok()) {
    if (log_ != nullptr) GRAVAC_LOG(*log_, kWarning, "%s", allowed.message());
    return new RefusedWatch(proto::ToGrpcStatus(allowed));
  }
  return new WatchReactor(jobs_, job, request->node_rank());
}

grpc::ServerUnaryReactor* ControllerService::GetJobStatus(
    grpc::CallbackServerContext* context, const v1::GetJobStatusRequest* request,
    v1::JobStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!StatusAllowed(*context)) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                 "GetJobStatus refused: the client presented no certificate"));
    return reactor;
  }
  absl::StatusOr<JobSummaryInfo> job = jobs_->Status(request->job_name(), request->run_id());
  if (!job.ok()) {
    reactor->Finish(proto::ToGrpcStatus(job.status()));
    return reactor;
  }
  ToProto(job->status, response);
  ToProto(job->id, response->mutable_job_id());
  response->set_state(JobStateName(job->state));
  response->set_failure(job->failure);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ControllerService::ListJobs(grpc::CallbackServerContext* context,
                                                      const v1::ListJobsRequest* /*request*/,
                                                      v1::JobList* response) {
  if (!StatusAllowed(*context)) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                 "ListJobs refused: the client presented no certificate"));
    return reactor;
  }
  for (const JobSummaryInfo& job : jobs_->List()) ToProto(job, response->add_jobs());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ControllerService::Leave(grpc::CallbackServerContext* context,
                                                   const v1::LeaveRequest* request,
                                                   v1::LeaveResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const JobId job = FromProto(request->job_id());
  absl::StatusOr<std::shared_ptr<Coordinator>> found = jobs_->Find(job);
  absl::Status allowed = CheckNodeRank(*context, job, found.ok() ? found->get() : nullptr,
                                       request->node_rank(), "Leave");
  if (!allowed.ok()) {
    if (log_ != nullptr) GRAVAC_LOG(*log_, kWarning, "%s", allowed.message());
    reactor->Finish(proto::ToGrpcStatus(allowed));
    return reactor;
  }
  absl::StatusOr<bool> ended = jobs_->Leave(job, request->node_rank());
  if (!ended.ok()) {
    reactor->Finish(proto::ToGrpcStatus(ended.status()));
    return reactor;
  }
  response->set_job_ended(*ended);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ControllerService::Regroup(grpc::CallbackServerContext* context,
                                                     const v1::RegroupRequest* request,
                                                     v1::Membership* response) {
  const JobId job = FromProto(request->job_id());
  absl::Status allowed = proto::CheckPeerIsNamed(
      security_, *context->auth_context(), request->node_name(),
      absl::StrFormat("Regroup as node '%s' of %s", request->node_name(), job.ToString()));
  if (!allowed.ok()) {
    if (log_ != nullptr) GRAVAC_LOG(*log_, kWarning, "%s", allowed.message());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(proto::ToGrpcStatus(allowed));
    return reactor;
  }
  return new RegroupReactor(memberships_,
                            {.job = job,
                             .node_name = request->node_name(),
                             .local_count = request->local_count(),
                             .from_version = request->from_version(),
                             .min_size = request->min_size(),
                             .max_size = request->max_size(),
                             .expect_nodes = {request->expect_nodes().begin(),
                                              request->expect_nodes().end()}},
                            response);
}

grpc::ServerUnaryReactor* ControllerService::FailJob(grpc::CallbackServerContext* context,
                                                     const v1::FailJobRequest* request,
                                                     v1::FailJobResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const JobId job = FromProto(request->job_id());
  // The node need not have joined (it may have failed before), so the check is the Join's.
  absl::Status allowed = proto::CheckPeerIsNamed(
      security_, *context->auth_context(), request->node_name(),
      absl::StrFormat("FailJob as node '%s' of %s", request->node_name(), job.ToString()));
  if (!allowed.ok()) {
    if (log_ != nullptr) GRAVAC_LOG(*log_, kWarning, "%s", allowed.message());
    reactor->Finish(proto::ToGrpcStatus(allowed));
    return reactor;
  }
  absl::StatusOr<bool> failed =
      jobs_->Fail(job, request->node_name(), request->node_rank(), request->reason());
  if (!failed.ok()) {
    reactor->Finish(NodeError(request->node_name(), failed.status()));
    return reactor;
  }
  response->set_failed(*failed);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

std::shared_ptr<Coordinator> ControllerServer::coordinator(const JobId& id) {
  absl::StatusOr<std::shared_ptr<Coordinator>> c = jobs_->ForJoin(id, 0);
  return c.ok() ? *std::move(c) : nullptr;
}

absl::StatusOr<std::unique_ptr<ControllerServer>> ControllerServer::Start(
    ControllerServerOptions options) {
  std::unique_ptr<ControllerServer> server(new ControllerServer());
  Logger* log = options.coordinator.log;
  const proto::GrpcSecurity& security = options.security;
  if (!security.plaintext && (security.cert_pem.empty() || security.key_pem.empty() ||
                              security.ca_pem.empty())) {
    return absl::InvalidArgumentError(
        "controller: no TLS certificate, key and CA, and plain text was not chosen "
        "(--insecure_plaintext)");
  }
  auto jobs = JobRegistry::Create({.coordinator = options.coordinator,
                                   .retention = options.job_retention,
                                   .observers = options.observers});
  if (!jobs.ok()) return jobs.status();
  server->jobs_ = *std::move(jobs);
  server->memberships_ =
      std::make_unique<MembershipBook>(server->jobs_.get(), options.regroup_timeout, log,
                                       options.new_node_wait);
  server->service_ = std::make_unique<ControllerService>(
      server->jobs_.get(), server->memberships_.get(), log, security, options.status_without_cert);
  // grpc.health.v1.Health for probes (Kubernetes' grpc probe): SERVING from the start; the
  // server's Shutdown turns it to NOT_SERVING.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen,
                           proto::ServerCredentials(security, options.status_without_cert),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  // Daemons ping every 10 s, also while idle (ControllerClient), to notice a dead controller.
  // gRPC's server default refuses pings more often than every 5 minutes without data and answers
  // GOAWAY "too_many_pings", which dropped every idle daemon after about 40 s.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.min_ping_interval)));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrFormat("controller: cannot listen on '%s'", options.listen));
  }
  server->options_ = std::move(options);
  server->ticker_ = std::thread([s = server.get()] { s->Tick(); });
  if (log != nullptr) {
    GRAVAC_LOG(*log, kInfo,
               "listening on %s (port %d) over %s, %d nodes per job unless a job says",
               server->options_.listen, server->port_, server->options_.security.origin,
               server->options_.coordinator.nodes);
    if (server->options_.security.plaintext) {
      GRAVAC_LOG(*log, kWarning,
                 "INSECURE: the control plane is plain text without authentication "
                 "(--insecure_plaintext); anyone who reaches port %d can join, report statistics "
                 "that steer the job and read its status",
                 server->port_);
    } else if (server->options_.status_without_cert) {
      GRAVAC_LOG(*log, kInfo,
                 "status is open: GetJobStatus and ListJobs answer clients without a certificate");
    }
  }
  return server;
}

void ControllerServer::Tick() {
  while (!stop_.WaitForNotificationWithTimeout(options_.tick)) {
    const absl::Time now = absl::Now();
    jobs_->Tick(now);
    memberships_->Tick(now);
  }
}

void ControllerServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
      health != nullptr) {
    health->Shutdown();
  }
  jobs_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(options_.shutdown_grace));
  server_->Wait();
  stop_.Notify();
  if (ticker_.joinable()) ticker_.join();
}

ControllerServer::~ControllerServer() {
  if (server_ != nullptr) Shutdown();
}

}  // namespace gravac::controller
