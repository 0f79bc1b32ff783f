#include "daemon/control/controller_client.h"

#include <algorithm>
#include <deque>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "gravac/v1/controller.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "proto/grpc_status.h"
#include "proto/job_convert.h"

namespace gravac::daemon {

namespace v1 = ::gravac::v1;

namespace {

// The JoinRequest naming this node; a re-join adds what it holds.
v1::JoinRequest JoinRequestOf(const JoinInfo& info) {
  v1::JoinRequest request;
  request.mutable_job_id()->set_name(info.job.name);
  request.mutable_job_id()->set_run_id(info.job.run_id);
  request.set_nodes(info.nodes);
  request.set_node_name(info.node_name);
  request.set_first_rank(info.first_rank);
  request.set_local_count(info.local_count);
  request.set_world_size(info.world_size);
  request.set_transport_address(info.transport_address);
  request.set_data_plane_protocol(info.data_plane_protocol);
  return request;
}

}  // namespace

#define GRAVAC_CLIENT_LOG(level, ...)                                           \
  do {                                                                          \
    if (options_.log != nullptr) GRAVAC_LOG(*options_.log, level, __VA_ARGS__); \
  } while (false)

class ControllerClient::Impl {
 public:
  explicit Impl(ControllerClientOptions options)
      : options_(std::move(options)), clock_(ClockOr(options_.clock)) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options_.keepalive_time)));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    proto::AddChannelArguments(options_.security, &args);
    channel_ = grpc::CreateCustomChannel(options_.address,
                                         proto::ChannelCredentials(options_.security), args);
    stub_ = v1::Controller::NewStub(channel_);
    newest_ = InitialDecision(JobConfig{});
  }

  absl::StatusOr<JoinResult> Join(const JoinInfo& info);
  void Start();
  JobDecision Newest() const {
    absl::MutexLock lock(&mu_);
    return newest_;
  }
  void Report(const NodeStepStats& stats);
  void Shutdown();
  absl::StatusOr<bool> Leave();
  absl::StatusOr<MembershipResult> Regroup(const RegroupAsk& ask);
  absl::StatusOr<bool> FailJob(const v1::FailJobRequest& request, absl::Duration timeout);

  int64_t dropped() const {
    absl::MutexLock lock(&mu_);
    return dropped_total_;
  }
  int64_t sent() const {
    absl::MutexLock lock(&mu_);
    return sent_;
  }
  int64_t reconnects() const {
    absl::MutexLock lock(&mu_);
    return reconnects_;
  }

 private:
  // One Join call, cancellable by Shutdown; wait_for_ready so an absent controller is waited for.
  absl::StatusOr<v1::JoinResponse> CallJoin(const v1::JoinRequest& request, absl::Duration timeout);
  bool Rejoin();
  void WatchLoop();
  void StatsLoop();
  void Adopt(const JobDecision& decision, std::string_view from);
  // Sleeps up to `d`; false when the client stops meanwhile.
  bool Sleep(absl::Duration d);
  bool Register(grpc::ClientContext* ctx, grpc::ClientContext** slot);
  void Unregister(grpc::ClientContext** slot);

  const ControllerClientOptions options_;
  const Clock& clock_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Controller::Stub> stub_;

  mutable absl::Mutex mu_;
  JobDecision newest_ ABSL_GUARDED_BY(mu_);
  JoinInfo info_ ABSL_GUARDED_BY(mu_);
  JoinResult joined_ ABSL_GUARDED_BY(mu_);
  bool has_joined_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<NodeStepStats> queue_ ABSL_GUARDED_BY(mu_);
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // queue_'s first entries being written
  int64_t last_step_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t dropped_unreported_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_total_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reconnects_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;  // Shutdown began: send what is queued, then end
  bool stop_ ABSL_GUARDED_BY(mu_) = false;      // everything ends now
  bool sender_done_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* join_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::ClientContext* watch_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::ClientContext* stats_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread watcher_;
  std::thread sender_;
};

bool ControllerClient::Impl::Register(grpc::ClientContext* ctx, grpc::ClientContext** slot) {
  absl::MutexLock lock(&mu_);
  if (stop_) return false;
  *slot = ctx;
  return true;
}

void ControllerClient::Impl::Unregister(grpc::ClientContext** slot) {
  absl::MutexLock lock(&mu_);
  *slot = nullptr;
}

bool ControllerClient::Impl::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  return !AwaitUntil(clock_, mu_, absl::Condition(&stop_), clock_.Now() + d);
}

void ControllerClient::Impl::Adopt(const JobDecision& decision, std::string_view from) {
  absl::MutexLock lock(&mu_);
  if (decision.epoch <= newest_.epoch) return;
  newest_ = decision;
  GRAVAC_CLIENT_LOG(kInfo, "decision epoch %d (%s): theta %g theta_c %g phase %s from step %d",
                    decision.epoch, from, decision.theta, decision.theta_candidate, decision.phase,
                    decision.first_step);
}

absl::StatusOr<v1::JoinResponse> ControllerClient::Impl::CallJoin(const v1::JoinRequest& request,
                                                                  absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!Register(&ctx, &join_ctx_)) return absl::CancelledError("join: the client is stopping");
  v1::JoinResponse response;
  grpc::Status status = stub_->Join(&ctx, request, &response);
  Unregister(&join_ctx_);
  if (!status.ok()) {
    // A TLS / plain-text mismatch or a refused certificate never gets the channel ready.
    const bool never_ready = channel_->GetState(false) != GRPC_CHANNEL_READY &&
                             (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                              status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
    return proto::FromGrpcStatus(
        status, absl::StrFormat("join %s at controller %s%s", request.node_name(),
                                options_.address,
                                never_ready ? proto::ConnectHint(options_.security) : ""));
  }
  return response;
}

namespace {
void SetJobId(const JobId& id, v1::JobId* out) {
  out->set_name(id.name);
  out->set_run_id(id.run_id);
}
}  // namespace

absl::StatusOr<JoinResult> ControllerClient::Impl::Join(const JoinInfo& info) {
  const v1::JoinRequest request = JoinRequestOf(info);
  const absl::Time deadline = clock_.Now() + options_.join_timeout;
  absl::Duration backoff = options_.reconnect_initial;
  absl::StatusOr<v1::JoinResponse> response;
  while (true) {
    const absl::Duration left = deadline - clock_.Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "join %s at controller %s: the job did not assemble within %s (last: %s)", info.node_name,
          options_.address, absl::FormatDuration(options_.join_timeout),
          response.ok() ? "none" : response.status().ToString()));
    }
    response = CallJoin(request, left);
    // UNAVAILABLE: the controller went away or is shutting down; try again until the deadline.
    if (response.ok() || response.status().code() != absl::StatusCode::kUnavailable) break;
    if (!Sleep(std::min(backoff, deadline - clock_.Now()))) {
      return absl::CancelledError("join: the client is stopping");
    }
    backoff = std::min(backoff * 2, options_.reconnect_max);
  }
  if (!response.ok()) return response.status();
  JoinResult result;
  result.node_rank = response->node_rank();
  for (const v1::NodeInfo& n : response->nodes()) {
    result.layout.push_back({n.first_rank(), n.local_count()});
    result.transport_addresses.push_back(n.transport_address());
  }
  result.job = proto::FromProto(response->job());
  {
    absl::MutexLock lock(&mu_);
    info_ = info;
    joined_ = result;
    has_joined_ = true;
    newest_ = InitialDecision(result.job);
  }
  Adopt(proto::FromProto(response->decision()), "join");
  GRAVAC_CLIENT_LOG(kInfo, "joined controller %s as node %d of %d over %s", options_.address,
                    result.node_rank, static_cast<int>(result.layout.size()),
                    options_.security.origin);
  return result;
}

bool ControllerClient::Impl::Rejoin() {
  v1::JoinRequest request;
  int node_rank = 0;
  {
    absl::MutexLock lock(&mu_);
    request = JoinRequestOf(info_);
    request.set_rejoin(true);
    request.set_node_rank(joined_.node_rank);
    request.set_newest_epoch(newest_.epoch);
    request.set_last_step(last_step_);
    node_rank = joined_.node_rank;
  }
  absl::StatusOr<v1::JoinResponse> response = CallJoin(request, options_.join_timeout);
  if (!response.ok()) {
    GRAVAC_CLIENT_LOG(kWarning, "re-join failed (keeping the last decision): %s",
                      response.status().ToString());
    return false;
  }
  if (response->node_rank() != node_rank) {
    GRAVAC_CLIENT_LOG(kError, "re-join: the controller made this node rank %d, it was %d",
                      response->node_rank(), node_rank);
    return false;
  }
  {
    absl::MutexLock lock(&mu_);
    ++reconnects_;
  }
  Adopt(proto::FromProto(response->decision()), "re-join");
  return true;
}

void ControllerClient::Impl::Start() {
  absl::MutexLock lock(&mu_);
  if (started_ || !has_joined_ || shut_down_) return;
  started_ = true;
  watcher_ = std::thread([this] { WatchLoop(); });
  sender_ = std::thread([this] { StatsLoop(); });
}

void ControllerClient::Impl::WatchLoop() {
  bool need_rejoin = false;
  absl::Duration backoff = options_.reconnect_initial;
  while (true) {
    if (need_rejoin) {
      if (!Rejoin()) {
        if (!Sleep(backoff)) return;
        backoff = std::min(backoff * 2, options_.reconnect_max);
        continue;
      }
      need_rejoin = false;
    }
    grpc::ClientContext ctx;
    if (!Register(&ctx, &watch_ctx_)) return;
    v1::WatchDecisionsRequest request;
    {
      absl::MutexLock lock(&mu_);
      request.set_node_rank(joined_.node_rank);
      SetJobId(info_.job, request.mutable_job_id());
    }
    std::unique_ptr<grpc::ClientReader<v1::Decision>> reader = stub_->WatchDecisions(&ctx, request);
    v1::Decision decision;
    bool got_any = false;
    while (reader->Read(&decision)) {
      if (!got_any) {
        got_any = true;
        backoff = options_.reconnect_initial;
        if (options_.metrics != nullptr) options_.metrics->SetControllerConnected(true);
      }
      if (options_.metrics != nullptr) options_.metrics->OnDecisionReceived();
      Adopt(proto::FromProto(decision), "pushed");
    }
    grpc::Status status = reader->Finish();
    Unregister(&watch_ctx_);
    if (options_.metrics != nullptr) options_.metrics->SetControllerConnected(false);
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      GRAVAC_CLIENT_LOG(kWarning,
                        "decision stream from %s ended (%s); keeping decision epoch %d, "
                        "reconnecting",
                        options_.address, proto::FromGrpcStatus(status, "watch").ToString(),
                        newest_.epoch);
    }
    need_rejoin = true;
    if (!got_any) {
      if (!Sleep(backoff)) return;
      backoff = std::min(backoff * 2, options_.reconnect_max);
    }
  }
}

void ControllerClient::Impl::Report(const NodeStepStats& stats) {
  absl::MutexLock lock(&mu_);
  if (stop_) return;
  last_step_ = std::max(last_step_, stats.step);
  if (queue_.size() >= options_.stats_queue_capacity) {
    // Drop the oldest entry that is not being written right now.
    ++dropped_unreported_;
    ++dropped_total_;
    if (in_flight_ >= queue_.size()) return;
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(in_flight_));
  }
  queue_.push_back(stats);
}

void ControllerClient::Impl::StatsLoop() {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientWriter<v1::StatsBatch>> writer;
  v1::ReportStatsResponse response;
  absl::Duration backoff = options_.reconnect_initial;
  bool failing = false;
  auto close = [&](bool graceful) {
    if (writer == nullptr) return grpc::Status::OK;
    if (graceful) writer->WritesDone();
    grpc::Status status = writer->Finish();
    Unregister(&stats_ctx_);
    writer.reset();
    ctx.reset();
    return status;
  };
  while (true) {
    v1::StatsBatch batch;
    size_t n = 0;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || draining_ || !queue_.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(200));
      if (stop_ || (draining_ && queue_.empty())) break;
      if (queue_.empty()) continue;
      n = std::min(queue_.size(), options_.stats_batch_size);
      batch.set_node_rank(joined_.node_rank);
      SetJobId(info_.job, batch.mutable_job_id());
      batch.set_dropped(dropped_unreported_);
      for (size_t i = 0; i < n; ++i) proto::ToProto(queue_[i], batch.add_stats());
      in_flight_ = n;
    }
    if (writer == nullptr) {
      ctx = std::make_unique<grpc::ClientContext>();
      if (!Register(ctx.get(), &stats_ctx_)) break;
      writer = stub_->ReportStats(ctx.get(), &response);
    }
    const bool written = writer->Write(batch);
    {
      absl::MutexLock lock(&mu_);
      in_flight_ = 0;
      if (written) {
        for (size_t i = 0; i < n; ++i) queue_.pop_front();
        dropped_unreported_ -= batch.dropped();
        sent_ += static_cast<int64_t>(n);
      }
    }
    if (written) {
      if (failing) GRAVAC_CLIENT_LOG(kInfo, "stats stream to %s is back", options_.address);
      failing = false;
      backoff = options_.reconnect_initial;
      continue;
    }
    grpc::Status status = close(false);
    {
      absl::MutexLock lock(&mu_);
      if (stop_) break;
    }
    if (!failing) {  // once per outage
      GRAVAC_CLIENT_LOG(kWarning,
                        "stats stream to %s broke (%s); queueing (oldest dropped beyond %d) and "
                        "retrying",
                        options_.address, proto::FromGrpcStatus(status, "stats").ToString(),
                        static_cast<int>(options_.stats_queue_capacity));
    }
    failing = true;
    if (!Sleep(backoff)) break;
    backoff = std::min(backoff * 2, options_.reconnect_max);
  }
  close(true);
  absl::MutexLock lock(&mu_);
  sender_done_ = true;
}

void ControllerClient::Impl::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    draining_ = true;
    if (started_) {
      AwaitUntil(clock_, mu_, absl::Condition(&sender_done_),
                 clock_.Now() + options_.shutdown_timeout);
    }
    stop_ = true;
    for (grpc::ClientContext* ctx : {join_ctx_, watch_ctx_, stats_ctx_}) {
      if (ctx != nullptr) ctx->TryCancel();
    }
  }
  if (watcher_.joinable()) watcher_.join();
  if (sender_.joinable()) sender_.join();
  absl::MutexLock lock(&mu_);
  GRAVAC_CLIENT_LOG(kInfo, "controller client stopped: %d stats sent, %d dropped, %d reconnects",
                    static_cast<int>(sent_), static_cast<int>(dropped_total_),
                    static_cast<int>(reconnects_));
}

absl::StatusOr<bool> ControllerClient::Impl::Leave() {
  v1::LeaveRequest request;
  {
    absl::MutexLock lock(&mu_);
    if (!has_joined_) return absl::FailedPreconditionError("leave: the node never joined");
    SetJobId(info_.job, request.mutable_job_id());
    request.set_node_rank(joined_.node_rank);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.shutdown_timeout));
  v1::LeaveResponse response;
  grpc::Status status = stub_->Leave(&ctx, request, &response);
  if (!status.ok()) {
    return proto::FromGrpcStatus(status, absl::StrFormat("leave %s at controller %s",
                                                         request.job_id().name(),
                                                         options_.address));
  }
  return response.job_ended();
}

absl::StatusOr<MembershipResult> ControllerClient::Impl::Regroup(const RegroupAsk& ask) {
  v1::RegroupRequest request;
  SetJobId(ask.job, request.mutable_job_id());
  request.set_node_name(ask.node_name);
  request.set_local_count(ask.local_count);
  request.set_from_version(ask.from_version);
  request.set_min_size(ask.min_size);
  request.set_max_size(ask.max_size);
  for (const std::string& n : ask.expect_nodes) request.add_expect_nodes(n);
  const absl::Time deadline = absl::Now() + options_.join_timeout;
  absl::Duration backoff = options_.reconnect_initial;
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(absl::ToChronoTime(deadline));
    if (!Register(&ctx, &join_ctx_)) return absl::CancelledError("regroup: the client is stopping");
    v1::Membership response;
    grpc::Status status = stub_->Regroup(&ctx, request, &response);
    Unregister(&join_ctx_);
    if (status.ok()) {
      MembershipResult m;
      m.version = response.version();
      m.run_id = response.run_id();
      m.node_rank = response.node_rank();
      m.nodes = response.nodes_size();
      m.world_size = response.world_size();
      if (m.node_rank < 0 || m.node_rank >= m.nodes) {
        return absl::DataLossError(absl::StrFormat(
            "regroup: the controller placed node '%s' at node rank %d of %d", ask.node_name,
            m.node_rank, m.nodes));
      }
      m.first_rank = response.nodes(m.node_rank).first_rank();
      m.lost_nodes.assign(response.lost_nodes().begin(), response.lost_nodes().end());
      m.added_nodes.assign(response.added_nodes().begin(), response.added_nodes().end());
      return m;
    }
    absl::Status s = proto::FromGrpcStatus(
        status, absl::StrFormat("regroup node '%s' of %s at controller %s", ask.node_name,
                                ask.job.ToString(), options_.address));
    if (s.code() != absl::StatusCode::kUnavailable || absl::Now() + backoff >= deadline) return s;
    if (!Sleep(backoff)) return absl::CancelledError("regroup: the client is stopping");
    backoff = std::min(backoff * 2, options_.reconnect_max);
  }
}

absl::StatusOr<bool> ControllerClient::Impl::FailJob(const v1::FailJobRequest& request,
                                                     absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(false);  // an unreachable controller fails at once, not after timeout
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::FailJobResponse response;
  grpc::Status status = stub_->FailJob(&ctx, request, &response);
  if (!status.ok()) {
    return proto::FromGrpcStatus(status, absl::StrFormat("report the failure of job '%s' to "
                                                         "controller %s",
                                                         request.job_id().name(),
                                                         options_.address));
  }
  return response.failed();
}

absl::StatusOr<std::unique_ptr<ControllerClient>> ControllerClient::Create(
    ControllerClientOptions options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("controller client: address is empty (--controller)");
  }
  const proto::GrpcSecurity& security = options.security;
  if (!security.plaintext && (security.cert_pem.empty() || security.key_pem.empty() ||
                              security.ca_pem.empty())) {
    return absl::InvalidArgumentError(
        "controller client: no TLS certificate, key and CA, and plain text was not chosen "
        "(--insecure_plaintext)");
  }
  if (options.stats_batch_size < 1 || options.stats_queue_capacity < options.stats_batch_size) {
    return absl::InvalidArgumentError(
        "controller client: need 1 <= stats_batch_size <= stats_queue_capacity");
  }
  return std::unique_ptr<ControllerClient>(
      new ControllerClient(std::make_unique<Impl>(std::move(options))));
}

ControllerClient::ControllerClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ControllerClient::~ControllerClient() { impl_->Shutdown(); }

absl::StatusOr<JoinResult> ControllerClient::Join(const JoinInfo& info) {
  return impl_->Join(info);
}
void ControllerClient::Start() { impl_->Start(); }
JobDecision ControllerClient::Newest() const { return impl_->Newest(); }
void ControllerClient::Report(const NodeStepStats& stats) { impl_->Report(stats); }
void ControllerClient::Shutdown() { impl_->Shutdown(); }
absl::StatusOr<bool> ControllerClient::Leave() { return impl_->Leave(); }
absl::StatusOr<MembershipResult> ControllerClient::Regroup(const RegroupAsk& ask) {
  return impl_->Regroup(ask);
}

absl::StatusOr<bool> ControllerClient::FailJob(const JobId& job, const std::string& node_name,
                                               int node_rank, const absl::Status& reason,
                                               absl::Duration timeout) {
  v1::FailJobRequest request;
  SetJobId(job, request.mutable_job_id());
  request.set_node_name(node_name);
  request.set_node_rank(node_rank);
  request.set_reason(std::string(reason.message()));
  return impl_->FailJob(request, timeout);
}
int64_t ControllerClient::dropped_stats() const { return impl_->dropped(); }
int64_t ControllerClient::sent_stats() const { return impl_->sent(); }
int64_t ControllerClient::reconnects() const { return impl_->reconnects(); }

}  // namespace gravac::daemon
