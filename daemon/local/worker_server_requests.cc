// WorkerServerImpl: hellos, requests, local completion, results and failures (server thread).
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/absl_compat.h"
#include "core/ipc/shm_abi.h"
#include "daemon/local/finite_check.h"
#include "daemon/local/worker_server_impl.h"

namespace gravac::daemon::internal {
namespace {

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }

}  // namespace

WorkerServerImpl::Conn* WorkerServerImpl::ByLocalRank(int local_rank) {
  if (local_rank < 0 || local_rank >= static_cast<int>(slots_.size())) return nullptr;
  return slots_[local_rank];
}

absl::Status WorkerServerImpl::CheckJob(const v1::Hello& hello) const {
  if (options_.job.name.empty() || (hello.job_name().empty() && hello.run_id().empty())) {
    return absl::OkStatus();
  }
  const JobId named = JobId{hello.job_name(), hello.run_id()}.Normalized();
  if (named == options_.job) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrFormat("node '%s': rank %d of %s connected to a gravacd serving %s; start the "
                      "worker with its job's GRAVAC_JOB_NAME/GRAVAC_RUN_ID or --serve_jobs",
                      options_.node_name, hello.rank(), named.ToString(),
                      options_.job.ToString()));
}

bool WorkerServerImpl::HandleHello(Conn& conn, const v1::Hello& hello) {
  auto refuse = [&](std::string message) {
    v1::DaemonMessage reply;
    reply.mutable_error()->set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
    reply.mutable_error()->set_message(message);
    Send(conn, reply);
    if (options_.log != nullptr) {
      GRAVAC_LOG(*options_.log, kError, "refused worker (pid %d): %s", hello.pid(), message);
    }
    Drop(conn, absl::InvalidArgumentError(message));
    return false;
  };
  const int rank = hello.rank(), local_rank = hello.local_rank();
  if (conn.local_rank >= 0) return refuse(absl::StrFormat("rank %d said hello twice", rank));
  if (hello.abi_version() != ipc::kShmAbiVersion) {
    return refuse(absl::StrFormat("rank %d speaks shared-memory ABI %d, the daemon %d", rank,
                                  hello.abi_version(), ipc::kShmAbiVersion));
  }
  if (absl::Status job = CheckJob(hello); !job.ok()) {
    if (options_.log != nullptr) {
      GRAVAC_LOG(*options_.log, kError, "refused worker (pid %d): %s", hello.pid(), job.message());
    }
    Refuse(conn, job);
    return false;
  }
  if (hello.local_size() != options_.local_size) {
    return refuse(absl::StrFormat("rank %d says GRAVAC_LOCAL_SIZE=%d but this daemon expects %d",
                                  rank, hello.local_size(), options_.local_size));
  }
  if (hello.size() < 1 || rank < 0 || rank >= hello.size()) {
    return refuse(absl::StrFormat("rank %d is outside world size %d", rank, hello.size()));
  }
  if (local_rank < 0 || local_rank >= options_.local_size) {
    return refuse(absl::StrFormat("rank %d has local rank %d outside [0, %d)", rank, local_rank,
                                  options_.local_size));
  }
  const int first_rank = rank - local_rank;
  if (first_rank < 0 || first_rank + options_.local_size > hello.size()) {
    return refuse(
        absl::StrFormat("rank %d with local rank %d and local size %d does not fit world size %d",
                        rank, local_rank, options_.local_size, hello.size()));
  }
  {
    MutexLock lock(&mu_);
    if (hello_seen_[local_rank]) {
      return refuse(absl::StrFormat("rank %d: local rank %d is already taken by another worker",
                                    rank, local_rank));
    }
    if (group_known_) {
      if (hello.size() != group_.world_size) {
        return refuse(absl::StrFormat("rank %d says world size %d but rank %d said %d", rank,
                                      hello.size(), group_.first_rank, group_.world_size));
      }
      if (first_rank != group_.first_rank) {
        return refuse(absl::StrFormat(
            "rank %d with local rank %d implies first rank %d on this node, but earlier workers "
            "imply %d (ranks must be contiguous per node)",
            rank, local_rank, first_rank, group_.first_rank));
      }
    } else {
      group_known_ = true;
      group_ = {first_rank, options_.local_size, hello.size()};
      first_rank_ = first_rank;
      world_size_ = hello.size();
    }
    hello_seen_[local_rank] = true;
    int seen = 0;
    for (bool b : hello_seen_) seen += b ? 1 : 0;
    if (seen == options_.local_size) group_ready_ = true;
  }
  cv_.SignalAll();
  conn.local_rank = local_rank;
  conn.rank = rank;
  conn.pid = hello.pid();
  slots_[local_rank] = &conn;
  CountWorkers();
  v1::DaemonMessage reply;
  reply.mutable_welcome()->set_daemon_pid(::getpid());
  reply.mutable_welcome()->set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(heartbeat_interval()));
  reply.mutable_welcome()->set_liveness_timeout_ms(
      absl::ToInt64Milliseconds(options_.stall_timeout));
  reply.mutable_welcome()->set_device_intake(intake_ != nullptr);
  reply.mutable_welcome()->set_nccl_built(options_.nccl_built);
  Send(conn, reply);
  return true;
}

void WorkerServerImpl::Respond(int local_rank, uint64_t request_id, const std::string& name,
                               const absl::Status& status) {
  Conn* conn = ByLocalRank(local_rank);
  if (conn == nullptr) return;
  conn->in_flight.erase(name);
  SendStatus(*conn, request_id, status);
}

void WorkerServerImpl::SendStatus(Conn& conn, uint64_t request_id, const absl::Status& status) {
  v1::DaemonMessage msg;
  v1::Response* r = msg.mutable_response();
  r->set_id(request_id);
  r->set_code(static_cast<int>(status.code()));
  r->set_message(std::string(status.message()));
  Send(conn, msg);
}

void WorkerServerImpl::HandleRequest(Conn& conn, const v1::Request& request) {
  const std::string& name = request.name();
  auto reject = [&](const absl::Status& status) {
    if (options_.metrics != nullptr) options_.metrics->OnError(status);
    v1::DaemonMessage msg;
    v1::Response* r = msg.mutable_response();
    r->set_id(request.id());
    r->set_code(static_cast<int>(status.code()));
    r->set_message(std::string(status.message()));
    Send(conn, msg);
  };
  if (absl::Status failure = LockedFailure(); !failure.ok()) return reject(failure);
  if (request.kind() == v1::TIMELINE) return HandleTimeline(conn, request);
  auto spec = SpecFromRequest(request, conn.rank);
  if (!spec.ok()) return reject(spec.status());
  if (absl::Status set = CheckProcessSet(&*spec, conn.rank, group_.world_size); !set.ok()) {
    return reject(set);
  }
  const bool on_device = request.has_device_buffer();
  auto seg = conn.segments.find(request.segment_id());
  if (!on_device && (seg == conn.segments.end() ||
                     request.offset() + request.bytes() > seg->second.data_bytes() ||
                     request.offset() + request.bytes() < request.offset())) {
    return reject(absl::InvalidArgumentError(
        absl::StrFormat("rank %d, tensor '%s': bytes [%d, +%d) are outside staging segment %d",
                        conn.rank, name, request.offset(), request.bytes(), request.segment_id())));
  }
  const bool join = spec->kind == CollectiveKind::kJoin;
  if (joined_[conn.local_rank] && !join) {
    return reject(absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s': posted after this rank joined (hvd.join); a joined rank posts "
        "nothing until every rank has joined",
        conn.rank, name)));
  }
  if (!conn.in_flight.insert(name).second) {
    return reject(absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s': already in flight (a name may be posted once until it completes)",
        conn.rank, name)));
  }
  if (spec->kind == CollectiveKind::kAllreduce) posted_names_[conn.local_rank].insert(name);
  Pending& p = pending_[name];
  if (p.posts.empty()) {
    p.posts.resize(options_.local_size);
    p.first_posted_ns = NowNs();
    for (int lr = 0; lr < options_.local_size; ++lr) {
      p.member.push_back(InProcessSet(*spec, first_rank_ + lr));
    }
  }
  p.member[conn.local_rank] = true;
  if (join) {
    joined_[conn.local_rank] = true;
    last_joined_ = conn.local_rank;
    p.join = true;
  }
  PostedRequest& post = p.posts[conn.local_rank].emplace();
  post.request_id = request.id();
  post.spec = std::move(*spec);
  post.segment_id = request.segment_id();
  post.offset = request.offset();
  post.bytes = request.bytes();
  if (on_device) TakeDevicePost(conn, request, &post);
  ++p.count;
  if (join) {
    CompleteAfterJoin();
  } else if (LocallyComplete(p)) {
    Pending done = std::move(p);
    pending_.erase(name);
    Complete(name, std::move(done));
  }
}

void WorkerServerImpl::HandleTimeline(Conn& conn, const v1::Request& request) {
  if (!serving_) {
    queued_timelines_.push_back({conn.local_rank, request.id(), request.name()});
    return;
  }
  AnswerTimeline(conn.local_rank, request.id(), request.name());
}

void WorkerServerImpl::AnswerTimeline(int local_rank, uint64_t request_id,
                                      const std::string& path) {
  absl::Status status = absl::UnimplementedError("this daemon runs no engine timeline");
  if (timeline_) status = timeline_(path);
  if (!status.ok()) {
    Conn* conn = ByLocalRank(local_rank);
    status = absl::Status(status.code(),
                          absl::StrFormat("rank %d: %s", conn ? conn->rank : -1, status.message()));
  }
  Conn* conn = ByLocalRank(local_rank);
  if (conn == nullptr) return;
  SendStatus(*conn, request_id, status);
}

bool WorkerServerImpl::LocallyComplete(const Pending& p) const {
  for (int lr = 0; lr < options_.local_size; ++lr) {
    if (!p.posts[lr].has_value() && p.member[lr] && (p.join || !joined_[lr])) return false;
  }
  return true;
}

void WorkerServerImpl::CompleteAfterJoin() {
  // The tensors the join completes go to the engine before the node's join itself: once the
  // engine holds the join it answers for the node's missing tensors with zeros.
  std::vector<std::string> complete;
  std::string join;
  for (const auto& [name, p] : pending_) {
    if (!LocallyComplete(p)) continue;
    if (p.join) {
      join = name;
    } else {
      complete.push_back(name);
    }
  }
  if (!join.empty()) complete.push_back(join);
  for (const std::string& name : complete) {
    Pending done = std::move(pending_.at(name));
    pending_.erase(name);
    Complete(name, std::move(done));
  }
}

std::string WorkerServerImpl::JoinedAnswer(const TensorSpec& spec) const {
  std::vector<int> joined, never_posted;
  for (int lr = 0; lr < options_.local_size; ++lr) {
    if (!joined_[lr] || !InProcessSet(spec, first_rank_ + lr)) continue;
    joined.push_back(first_rank_ + lr);
    if (!posted_names_[lr].contains(spec.name)) never_posted.push_back(first_rank_ + lr);
  }
  return JoinedRanksAnswer(spec, joined, never_posted);
}

void WorkerServerImpl::Complete(const std::string& name, Pending pending) {
  const int64_t start_ns = NowNs();
  Ready ready;
  ready.name = name;
  std::vector<LocalInput> inputs;
  for (int lr = 0; lr < options_.local_size; ++lr) {
    if (!pending.posts[lr].has_value()) continue;  // joined: contributes zeros
    struct PostedRequest& post = *pending.posts[lr];
    Conn* conn = ByLocalRank(lr);
    if (conn == nullptr) continue;
    if (post.on_device) {
      inputs.push_back(LocalInput{first_rank_ + lr, &post.spec, nullptr, post.bytes});
      continue;
    }
    auto seg = conn->segments.find(post.segment_id);
    if (seg == conn->segments.end()) continue;
    inputs.push_back(
        LocalInput{first_rank_ + lr, &post.spec, seg->second.data() + post.offset, post.bytes});
  }
  if (static_cast<int>(inputs.size()) != pending.count) {
    const absl::Status status = absl::UnavailableError(
        absl::StrFormat("tensor '%s': a local worker's staging segment is gone", name));
    if (options_.log != nullptr) GRAVAC_LOG(*options_.log, kError, "%s", status.message());
    if (options_.metrics != nullptr) options_.metrics->OnError(status);
    for (int lr = 0; lr < options_.local_size; ++lr) {
      if (pending.posts[lr].has_value()) Respond(lr, pending.posts[lr]->request_id, name, status);
    }
    return;
  }
  // Device posts are summed in device memory (an fp32 allreduce on one device) or read into host
  // memory here (after their ready events); a buffer that cannot be taken or read fails the
  // tensor on every rank, as a disagreement does.
  absl::StatusOr<std::shared_ptr<const DeviceData>> device_sum = ReduceDevicePosts(name, pending);
  absl::Status status = device_sum.status();
  if (status.ok() && *device_sum == nullptr) status = ReadDevicePosts(name, pending);
  if (status.ok() && *device_sum != nullptr) {
    status = CheckLocalAgreement(inputs);
  } else if (status.ok()) {
    for (size_t i = 0, lr = 0; lr < pending.posts.size(); ++lr) {
      if (!pending.posts[lr].has_value() || ByLocalRank(static_cast<int>(lr)) == nullptr) continue;
      if (pending.posts[lr]->on_device) inputs[i].data = pending.posts[lr]->host.data();
      ++i;
    }
    status = CheckLocalAgreement(inputs);
  }
  if (status.ok() && !pending.join) {
    if (std::string joined = JoinedAnswer(*inputs[0].spec); !joined.empty()) {
      status = absl::FailedPreconditionError(std::move(joined));
    }
  }
  if (!status.ok()) {
    // The other nodes' ranks wait for this tensor too: hand it to the engine marked failed, so
    // it fails on every node with this message (and the local workers get it back from there).
    if (options_.log != nullptr) GRAVAC_LOG(*options_.log, kError, "%s", status.message());
    ready.tensor.spec = *inputs[0].spec;
    ready.tensor.posted_at_ns = pending.first_posted_ns;
    ready.tensor.local_status = std::move(status);
    ready.posts = std::move(pending.posts);
    DeliverOrQueue(std::move(ready));
    return;
  }
  if (pending.join) {
    // The node's join: its last joined rank travels as root_rank (and as the data, an int32);
    // join_check answers, from a snapshot, for the tensors other nodes post meanwhile.
    const int32_t last = first_rank_ + last_joined_;
    ready.tensor.spec = *inputs[0].spec;
    ready.tensor.spec.root_rank = last;
    ready.tensor.data.resize(sizeof(last));
    std::memcpy(ready.tensor.data.data(), &last, sizeof(last));
    ready.tensor.posted_at_ns = pending.first_posted_ns;
    auto names =
        std::make_shared<const std::vector<std::unordered_set<std::string>>>(posted_names_);
    ready.tensor.join_check = [names, first = first_rank_](const TensorSpec& spec) {
      std::vector<int> joined, never_posted;
      for (size_t lr = 0; lr < names->size(); ++lr) {
        if (!InProcessSet(spec, first + static_cast<int>(lr))) continue;
        joined.push_back(first + static_cast<int>(lr));
        if (!(*names)[lr].contains(spec.name)) never_posted.push_back(joined.back());
      }
      return JoinedRanksAnswer(spec, joined, never_posted);
    };
    ready.posts = std::move(pending.posts);
    DeliverOrQueue(std::move(ready));
    return;
  }
  uint64_t bytes = 0;
  for (const LocalInput& in : inputs) bytes += in.bytes;
  if (inputs[0].spec->kind != CollectiveKind::kAllgather) bytes = inputs[0].bytes;
  ready.tensor = *device_sum != nullptr
                     ? CombineOnDevice(inputs, pending.first_posted_ns, *std::move(device_sum))
                     : CombineLocal(inputs, pending.first_posted_ns, pool_.Take(bytes));
  for (std::optional<PostedRequest>& post : pending.posts) {
    if (!post.has_value()) continue;
    // The engine compresses a device tensor on the CUDA device of the node's first device post.
    if (post->on_device && ready.tensor.device < 0) ready.tensor.device = post->device;
    std::vector<uint8_t>().swap(post->host);  // combined: not needed
  }
  if (options_.check_finite) {
    // Refused like a local disagreement: the engine fails it on every node with this message.
    absl::Status finite =
        CheckFiniteAllreduce(inputs, ready.tensor.data.data(), ready.tensor.data.size());
    if (!finite.ok()) {
      if (options_.log != nullptr) GRAVAC_LOG(*options_.log, kError, "%s", finite.message());
      ready.tensor.local_status = std::move(finite);
    }
  }
  const int64_t reduced_ns = NowNs();
  ready.posts = std::move(pending.posts);
  const bool handoff = serving_;  // tensors queued before Serve are not handoffs
  DeliverOrQueue(std::move(ready));
  if (handoff && options_.metrics != nullptr) {
    const int64_t end_ns = NowNs();
    options_.metrics->AddPhase(EnginePhase::kLocalReduce, (reduced_ns - start_ns) * 1e-9);
    options_.metrics->AddPhase(EnginePhase::kHandoff, (end_ns - reduced_ns) * 1e-9);
    options_.metrics->ObserveHandoff(HandoffDirection::kIn, (end_ns - start_ns) * 1e-9);
  }
}

void WorkerServerImpl::DeliverOrQueue(Ready ready) {
  if (serving_) {
    Deliver(std::move(ready));
  } else {
    queued_.push_back(std::move(ready));
  }
}

void WorkerServerImpl::Deliver(Ready ready) {
  if (absl::Status failure = LockedFailure(); !failure.ok()) {
    if (options_.metrics != nullptr) options_.metrics->OnError(failure);
    for (size_t lr = 0; lr < ready.posts.size(); ++lr) {
      if (ready.posts[lr].has_value()) {
        Respond(static_cast<int>(lr), ready.posts[lr]->request_id, ready.name, failure);
      }
    }
    return;
  }
  const uint64_t ticket = next_ticket_++;
  NodeTensor tensor = std::move(ready.tensor);
  ready.tensor = NodeTensor{};
  ready.tensor.spec = tensor.spec;
  in_flight_.emplace(ticket, std::move(ready));
  std::weak_ptr<WorkerServerImpl> weak = weak_from_this();
  sink_(std::move(tensor), [weak, ticket](TensorResult result) {
    if (auto self = weak.lock()) {
      auto shared = std::make_shared<TensorResult>(std::move(result));
      self->Post([raw = self.get(), ticket, shared, done_ns = NowNs()] {
        raw->OnDone(ticket, std::move(*shared), done_ns);
      });
    }
  });
}

void WorkerServerImpl::OnDone(uint64_t ticket, TensorResult result, int64_t done_ns) {
  auto it = in_flight_.find(ticket);
  if (it == in_flight_.end()) return;
  Ready ready = std::move(it->second);
  in_flight_.erase(it);
  const CollectiveKind kind = ready.tensor.spec.kind;
  absl::Status status = result.status;
  std::optional<ipc::ShmSegment> gathered;
  if (status.ok() && kind == CollectiveKind::kAllgather) {
    // The device step carries allreduces only; a result in device memory is copied all the same.
    status = ResultHostData(result);
    absl::StatusOr<ipc::ShmSegment> seg =
        status.ok() ? ipc::ShmSegment::Create("gravac-allgather", result.data.size())
                    : absl::StatusOr<ipc::ShmSegment>(status);
    if (seg.ok()) {
      if (!result.data.empty()) std::memcpy(seg->data(), result.data.data(), result.data.size());
      gathered = std::move(*seg);
    } else {
      status = seg.status();
    }
  }
  if (kind == CollectiveKind::kJoin) {
    std::fill(joined_.begin(), joined_.end(), false);
    last_joined_ = -1;
  }
  for (size_t lr = 0; lr < ready.posts.size(); ++lr) {
    if (!ready.posts[lr].has_value()) continue;
    const struct PostedRequest& post = *ready.posts[lr];
    Conn* conn = ByLocalRank(static_cast<int>(lr));
    if (conn == nullptr) continue;
    absl::Status s = status;
    if (s.ok() && kind != CollectiveKind::kAllgather) {
      auto seg = conn->segments.find(post.segment_id);
      if (ResultBytes(result) != post.bytes) {
        s = absl::InternalError(
            absl::StrFormat("tensor '%s': result of %d bytes for an input of %d bytes", ready.name,
                            ResultBytes(result), post.bytes));
      } else if (post.on_device) {
        s = WriteDevicePost(*conn, ready.name, post, result);
      } else if (seg == conn->segments.end()) {
        s = absl::InternalError(
            absl::StrFormat("rank %d, tensor '%s': staging segment gone", conn->rank, ready.name));
      } else if (absl::Status host = ResultHostData(result); !host.ok()) {
        // A result the engine left in device memory, for a worker that staged through host memory.
        s = absl::Status(
            host.code(),
            absl::StrFormat("rank %d, tensor '%s', field data: copying the result "
                            "from CUDA device %d to host memory failed: %s",
                            conn->rank, ready.name, result.device_data->device(), host.message()));
      } else if (post.bytes > 0) {
        std::memcpy(seg->second.data() + post.offset, result.data.data(), post.bytes);
      }
    }
    conn->in_flight.erase(ready.name);
    v1::DaemonMessage msg;
    v1::Response* r = msg.mutable_response();
    r->set_id(post.request_id);
    r->set_code(static_cast<int>(s.code()));
    r->set_message(std::string(s.message()));
    if (s.ok()) {
      r->set_theta(result.theta);
      r->set_collective(result.collective);
      r->set_decision_epoch(result.decision_epoch);
      if (gathered.has_value()) {
        for (int64_t d : result.first_dims) r->add_first_dims(d);
        r->set_result_bytes(result.data.size());
        int fd = gathered->fd();
        Send(*conn, msg, absl::MakeConstSpan(&fd, 1));
        continue;
      }
    }
    Send(*conn, msg);
  }
  if (options_.metrics != nullptr) {
    const double seconds = (NowNs() - done_ns) * 1e-9;
    options_.metrics->ObserveHandoff(HandoffDirection::kOut, seconds);
    options_.metrics->AddPhase(EnginePhase::kHandoff, seconds);
  }
  pool_.Give(std::move(result.data));
}

void WorkerServerImpl::Drop(Conn& conn, const absl::Status& why) {
  const int fd = conn.fd.get();
  const int local_rank = conn.local_rank;
  const bool clean = conn.shutdown;
  const int rank = conn.rank;
  const int64_t pid = conn.pid;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);
  if (local_rank >= 0) slots_[local_rank] = nullptr;
  if (local_rank >= 0 && intake_ != nullptr) intake_->DropWorker(local_rank);
  CountWorkers();
  conns_.erase(fd);  // closes the socket and unmaps its segments
  if (local_rank < 0) return;
  MarkFinished(local_rank);
  if (clean) return;
  FailNode(absl::UnavailableError(absl::StrFormat(
      "worker rank %d (local rank %d, pid %d) disconnected without gravac_shutdown (%s)", rank,
      local_rank, pid, why.message())));
}

void WorkerServerImpl::Refuse(Conn& conn, const absl::Status& why) {
  v1::DaemonMessage msg;
  msg.mutable_error()->set_code(static_cast<int>(why.code()));
  msg.mutable_error()->set_message(std::string(why.message()));
  Send(conn, msg);
  Drop(conn, why);
}

void WorkerServerImpl::FailNode(absl::Status status) {
  {
    MutexLock lock(&mu_);
    if (!failure_.ok()) return;
    failure_ = status;
  }
  FailPending(std::move(status));
}

void WorkerServerImpl::FailPending(absl::Status status) {
  cv_.SignalAll();
  if (options_.log != nullptr) GRAVAC_LOG(*options_.log, kError, "%s", status.message());
  std::map<std::string, Pending> pending = std::move(pending_);
  pending_.clear();
  for (auto& [name, p] : pending) {
    if (options_.metrics != nullptr) options_.metrics->OnError(status);
    for (int lr = 0; lr < options_.local_size; ++lr) {
      if (p.posts[lr].has_value()) Respond(lr, p.posts[lr]->request_id, name, status);
    }
  }
  std::deque<Ready> queued = std::move(queued_);
  queued_.clear();
  for (Ready& r : queued) {
    if (options_.metrics != nullptr) options_.metrics->OnError(status);
    for (size_t lr = 0; lr < r.posts.size(); ++lr) {
      if (r.posts[lr].has_value()) {
        Respond(static_cast<int>(lr), r.posts[lr]->request_id, r.name, status);
      }
    }
  }
  if (serving_) ReportFailure();
}

void WorkerServerImpl::ReportFailure() {
  failure_reported_ = true;
  if (on_failure_) on_failure_(LockedFailure());
}

std::string WorkerServerImpl::OtherStalls(const std::string& except) const {
  std::vector<std::string> others;
  for (const auto& [name, p] : pending_) {
    if (name == except) continue;
    if (others.size() == 4) {
      others.push_back("...");
      break;
    }
    std::vector<int> missing;
    for (int lr = 0; lr < options_.local_size; ++lr) {
      if (!p.posts[lr].has_value() && p.member[lr]) missing.push_back(first_rank_ + lr);
    }
    others.push_back(absl::StrFormat("'%s' from ranks [%s]", name, absl::StrJoin(missing, ", ")));
  }
  if (others.empty()) return "";
  return absl::StrFormat(" (also missing: %s)", absl::StrJoin(others, ", "));
}

void WorkerServerImpl::CheckStalls() {
  if (pending_.empty()) return;
  const absl::Time now = absl::Now();
  std::vector<bool> finished;
  {
    MutexLock lock(&mu_);
    if (!failure_.ok()) return;  // the pending tensors have failed already
    finished = finished_slot_;
  }
  for (auto& [name, p] : pending_) {
    const absl::Duration waited = now - absl::FromUnixNanos(p.first_posted_ns);
    std::vector<int> posted, missing, gone;
    for (int lr = 0; lr < options_.local_size; ++lr) {
      if (!p.posts[lr].has_value() && !p.member[lr]) continue;  // outside its process set
      (p.posts[lr].has_value() ? posted : missing).push_back(first_rank_ + lr);
      if (!p.posts[lr].has_value() && finished[lr]) gone.push_back(first_rank_ + lr);
    }
    if (!gone.empty()) {
      // Those ranks will never post it: an extra collective on some ranks, or a missing one on
      // the others, at the end of the job.
      FailNode(absl::FailedPreconditionError(absl::StrFormat(
          "tensor '%s' posted by ranks [%s] will never complete: ranks [%s] have called "
          "gravac_shutdown without it (the ranks disagree on which collectives they call)",
          name, absl::StrJoin(posted, ", "), absl::StrJoin(gone, ", "))));
      return;
    }
    // Ranks that joined wait for the others' data to run out: no limit (Horovod's join).
    if (waited >= options_.stall_timeout && !p.join) {
      FailNode(absl::DeadlineExceededError(absl::StrFormat(
          "stall: tensor '%s' posted by ranks [%s] %s ago is still missing from ranks [%s]%s; "
          "failing the job after --stall_timeout_s %s",
          name, absl::StrJoin(posted, ", "),
          absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(1))),
          absl::StrJoin(missing, ", "), OtherStalls(name),
          absl::FormatDuration(options_.stall_timeout))));
      return;
    }
    if (waited < options_.stall_warning || now - p.last_warned < options_.stall_warning) continue;
    p.last_warned = now;
    if (options_.metrics != nullptr) options_.metrics->OnStalls(1);
    if (options_.log != nullptr) {
      GRAVAC_LOG(*options_.log, kWarning,
                 "stall: tensor '%s' posted by ranks [%s] %s ago is still missing from ranks [%s]",
                 name, absl::StrJoin(posted, ", "),
                 absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(1))),
                 absl::StrJoin(missing, ", "));
    }
  }
}

void WorkerServerImpl::Teardown() {
  const absl::Status stopped = absl::CancelledError("the daemon stopped");
  for (auto& [name, p] : pending_) {
    for (int lr = 0; lr < options_.local_size; ++lr) {
      if (p.posts[lr].has_value()) Respond(lr, p.posts[lr]->request_id, name, stopped);
    }
  }
  pending_.clear();
  auto fail_all = [&](Ready& r) {
    for (size_t lr = 0; lr < r.posts.size(); ++lr) {
      if (r.posts[lr].has_value()) {
        Respond(static_cast<int>(lr), r.posts[lr]->request_id, r.name, stopped);
      }
    }
  };
  for (Ready& r : queued_) fail_all(r);
  queued_.clear();
  for (auto& [ticket, r] : in_flight_) fail_all(r);
  in_flight_.clear();
  std::fill(slots_.begin(), slots_.end(), nullptr);
  CountWorkers();
  conns_.clear();
  listen_fd_.Reset();
  struct stat st;
  if (::stat(options_.socket_path.c_str(), &st) == 0 && st.st_ino == socket_inode_) {
    ::unlink(options_.socket_path.c_str());
  }
}

void WorkerServerImpl::CountWorkers() {
  if (options_.metrics == nullptr) return;
  int connected = 0;
  for (const Conn* c : slots_) connected += c != nullptr ? 1 : 0;
  options_.metrics->SetConnectedWorkers(connected);
}

}  // namespace gravac::daemon::internal
