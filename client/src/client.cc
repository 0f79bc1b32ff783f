#include "client/src/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/ipc/shm_abi.h"
#include "core/ipc/unix_socket.h"
#include "core/status.h"

namespace gravac::client {
namespace {

constexpr SettingSpec kClientSettings[] = {
    {"rank", "GRAVAC_RANK", "-1", "global rank of this worker", SettingType::kInt},
    {"size", "GRAVAC_SIZE", "0", "world size", SettingType::kInt},
    {"local_rank", "GRAVAC_LOCAL_RANK", "-1", "rank of this worker on its node", SettingType::kInt},
    {"local_size", "GRAVAC_LOCAL_SIZE", "0", "workers on this node", SettingType::kInt},
    {"daemon_socket", "GRAVAC_DAEMON_SOCKET", "", "Unix socket of the node's gravacd",
     SettingType::kString},
    {"connect_timeout_s", "GRAVAC_CONNECT_TIMEOUT_S", "30",
     "how long to retry connecting to the daemon", SettingType::kDouble},
    {"staging_bytes", "GRAVAC_STAGING_BYTES", "16777216",
     "size of the first shared-memory staging segment", SettingType::kInt},
    {"job_name", "GRAVAC_JOB_NAME", "", "the job this worker belongs to (sent to gravacd)",
     SettingType::kString},
    {"run_id", "GRAVAC_RUN_ID", "", "the job's run id (sent to gravacd)", SettingType::kString},
    {"node_rank", "GRAVAC_NODE_RANK", "-1", "this worker's node within the job", SettingType::kInt},
    {"nodes", "GRAVAC_NODES", "0", "nodes of the job (0 = unknown)", SettingType::kInt},
    {"zero_copy", "GRAVAC_ZERO_COPY", "true",
     "requests on shared buffers (gravac_buffer_alloc) skip the staging copies",
     SettingType::kBool},
};

}  // namespace

absl::StatusOr<ClientConfig> ConfigFromEnvironment(const EnvLookup& env) {
  ASSIGN_OR_RETURN(Settings s, Settings::Parse(kClientSettings, {}, env));
  ClientConfig c;
  ASSIGN_OR_RETURN(int64_t rank, s.GetInt("rank"));
  ASSIGN_OR_RETURN(int64_t size, s.GetInt("size"));
  ASSIGN_OR_RETURN(int64_t local_rank, s.GetInt("local_rank"));
  ASSIGN_OR_RETURN(int64_t local_size, s.GetInt("local_size"));
  ASSIGN_OR_RETURN(c.daemon_socket, s.GetString("daemon_socket"));
  ASSIGN_OR_RETURN(double timeout_s, s.GetDouble("connect_timeout_s"));
  ASSIGN_OR_RETURN(int64_t staging, s.GetInt("staging_bytes"));
  ASSIGN_OR_RETURN(c.zero_copy, s.GetBool("zero_copy"));
  ASSIGN_OR_RETURN(c.job_name, s.GetString("job_name"));
  ASSIGN_OR_RETURN(c.run_id, s.GetString("run_id"));
  ASSIGN_OR_RETURN(int64_t node_rank, s.GetInt("node_rank"));
  ASSIGN_OR_RETURN(int64_t nodes, s.GetInt("nodes"));
  c.node_rank = static_cast<int>(std::clamp<int64_t>(node_rank, -1, 1 << 20));
  c.nodes = static_cast<int>(std::clamp<int64_t>(nodes, 0, 1 << 20));
  c.rank = static_cast<int>(rank);
  c.size = static_cast<int>(size);
  c.local_rank = static_cast<int>(local_rank);
  c.local_size = static_cast<int>(local_size);
  c.connect_timeout = absl::Seconds(timeout_s);
  c.staging_bytes = staging > 0 ? static_cast<uint64_t>(staging) : 0;
  return c;
}

absl::Status RequestState::Wait() {
  MutexLock lock(&mu);
  while (!done) cv.Wait(&mu);
  return status;
}

Client::Client(ClientConfig config) : config_(std::move(config)) {}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientConfig& config) {
  auto bad = [](std::string m) { return absl::InvalidArgumentError(m); };
  if (config.size < 1) return bad("GRAVAC_SIZE is not set or < 1");
  if (config.rank < 0 || config.rank >= config.size) {
    return bad(absl::StrFormat("GRAVAC_RANK=%d is not in [0, %d)", config.rank, config.size));
  }
  if (config.local_size < 1) return bad("GRAVAC_LOCAL_SIZE is not set or < 1");
  if (config.local_rank < 0 || config.local_rank >= config.local_size) {
    return bad(absl::StrFormat("GRAVAC_LOCAL_RANK=%d is not in [0, %d)", config.local_rank,
                               config.local_size));
  }
  if (config.daemon_socket.empty()) return bad("GRAVAC_DAEMON_SOCKET is not set");
  auto client = std::unique_ptr<Client>(new Client(config));
  ASSIGN_OR_RETURN(client->sock_, ipc::ConnectUnix(config.daemon_socket, config.connect_timeout));
  RETURN_IF_ERROR(client->Hello());
  Client* raw = client.get();
  auto on_register = [raw](uint64_t id, const ipc::ShmSegment& segment) {
    return raw->RegisterSegment(id, segment);
  };
  auto on_release = [raw](uint64_t id) { raw->ReleaseSegment(id); };
  client->arena_ = std::make_unique<StagingArena>(config.staging_bytes, on_register, on_release);
  client->shared_ = std::make_shared<SharedBuffers>(config.staging_bytes, on_register, on_release);
  client->reader_thread_ = std::thread([raw] { raw->ReaderLoop(); });
  return client;
}

absl::Status Client::Hello() {
  v1::WorkerMessage msg;
  v1::Hello* h = msg.mutable_hello();
  h->set_rank(config_.rank);
  h->set_size(config_.size);
  h->set_local_rank(config_.local_rank);
  h->set_local_size(config_.local_size);
  h->set_pid(::getpid());
  h->set_abi_version(ipc::kShmAbiVersion);
  h->set_job_name(config_.job_name);
  h->set_run_id(config_.run_id);
  if (config_.nodes > 0 && config_.node_rank >= 0) {
    h->set_node_rank(config_.node_rank);
    h->set_nodes(config_.nodes);
  }
  RETURN_IF_ERROR(SendLocked(msg));
  const absl::Time deadline = absl::Now() + config_.connect_timeout;
  while (true) {
    ASSIGN_OR_RETURN(auto frame, reader_.Next());
    if (frame.has_value()) {
      v1::DaemonMessage reply;
      if (!reply.ParseFromString(frame->payload)) {
        return absl::DataLossError("unparsable reply to hello");
      }
      if (reply.has_welcome()) {
        liveness_timeout_ = absl::Milliseconds(reply.welcome().liveness_timeout_ms());
        heartbeat_interval_ = absl::Milliseconds(reply.welcome().heartbeat_interval_ms());
        daemon_pid_ = reply.welcome().daemon_pid();
        device_intake_ = reply.welcome().device_intake();
        nccl_built_ = reply.welcome().nccl_built();
        return absl::OkStatus();
      }
      if (reply.has_error()) {
        return absl::Status(
            static_cast<absl::StatusCode>(reply.error().code()),
            absl::StrFormat("daemon refused rank %d: %s", config_.rank, reply.error().message()));
      }
      return absl::DataLossError("unexpected reply to hello");
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrFormat("rank %d: no answer to hello from the daemon at '%s'", config_.rank,
                          config_.daemon_socket));
    }
    pollfd p{sock_.get(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (p.revents == 0) continue;
    ASSIGN_OR_RETURN(bool more, reader_.ReadSome(sock_.get()));
    if (!more) {
      return absl::UnavailableError(
          absl::StrFormat("rank %d: the daemon closed the connection during hello", config_.rank));
    }
  }
}

Client::~Client() {
  if (shared_ != nullptr) shared_->Close();
  if (sock_.valid()) ::shutdown(sock_.get(), SHUT_RDWR);
  if (reader_thread_.joinable()) reader_thread_.join();
}

absl::Status Client::SendLocked(const v1::WorkerMessage& msg, absl::Span<const int> fds) {
  std::string bytes = msg.SerializeAsString();
  MutexLock lock(&send_mu_);
  return ipc::SendFrame(sock_.get(), bytes, fds, absl::Seconds(30));
}

absl::Status Client::RegisterSegment(uint64_t id, const ipc::ShmSegment& segment) {
  v1::WorkerMessage msg;
  msg.mutable_register_segment()->set_segment_id(id);
  msg.mutable_register_segment()->set_bytes(segment.segment_bytes());
  int fd = segment.fd();
  return SendLocked(msg, absl::MakeConstSpan(&fd, 1));
}

void Client::ReleaseSegment(uint64_t id) {
  v1::WorkerMessage msg;
  msg.mutable_release_segment()->set_segment_id(id);
  SendLocked(msg).IgnoreError();
}

void Client::FreeBlockLocked(const RequestState& state) {
  if (state.borrowed) {
    shared_->Return(state.block.data);
  } else {
    arena_->Free(state.block);
  }
}

int Client::staging_segments() {
  MutexLock lock(&mu_);
  return arena_->segment_count();
}

absl::StatusOr<std::shared_ptr<RequestState>> Client::Submit(v1::Request request, const void* in,
                                                             void* out, uint64_t bytes,
                                                             uint64_t row_bytes) {
  auto state = std::make_shared<RequestState>();
  state->kind = request.kind();
  state->out = out;
  state->row_bytes = row_bytes;
  const bool in_place = request.kind() == v1::ALLGATHER || out == in;
  uint64_t id;
  {
    MutexLock lock(&mu_);
    if (!dead_.ok()) return dead_;
    state->borrowed =
        config_.zero_copy && in_place && bytes > 0 && shared_->Borrow(in, bytes, &state->block);
    if (!state->borrowed) {
      ASSIGN_OR_RETURN(state->block, arena_->Allocate(bytes));
    }
    id = next_id_++;
    pending_.emplace(id, state);
  }
  if (bytes > 0 && !state->borrowed) std::memcpy(state->block.data, in, bytes);
  request.set_id(id);
  request.set_segment_id(state->block.segment_id);
  request.set_offset(state->block.offset);
  request.set_bytes(bytes);
  v1::WorkerMessage msg;
  *msg.mutable_request() = std::move(request);
  absl::Status sent = SendLocked(msg);
  if (!sent.ok()) {
    MutexLock lock(&mu_);
    if (pending_.erase(id) > 0) FreeBlockLocked(*state);
    return sent;
  }
  return state;
}

absl::StatusOr<std::shared_ptr<RequestState>> Client::SubmitDevice(v1::Request request) {
  auto state = std::make_shared<RequestState>();
  state->kind = request.kind();
  state->device = true;
  uint64_t id;
  {
    MutexLock lock(&mu_);
    if (!dead_.ok()) return dead_;
    id = next_id_++;
    pending_.emplace(id, state);
  }
  request.set_id(id);
  v1::WorkerMessage msg;
  *msg.mutable_request() = std::move(request);
  absl::Status sent = SendLocked(msg);
  if (!sent.ok()) {
    MutexLock lock(&mu_);
    pending_.erase(id);
    return sent;
  }
  return state;
}

absl::StatusOr<bool> Client::MapDevice(const v1::DeviceBuffer& buffer, std::string* reason) {
  auto state = std::make_shared<RequestState>();
  state->device = true;
  uint64_t id;
  {
    MutexLock lock(&mu_);
    if (!dead_.ok()) return dead_;
    id = next_id_++;
    pending_.emplace(id, state);
  }
  v1::WorkerMessage msg;
  msg.mutable_map_device()->set_id(id);
  *msg.mutable_map_device()->mutable_buffer() = buffer;
  if (absl::Status sent = SendLocked(msg); !sent.ok()) {
    MutexLock lock(&mu_);
    pending_.erase(id);
    return sent;
  }
  absl::Status status = state->Wait();
  MutexLock lock(&state->mu);
  if (state->stage) {
    *reason = std::string(status.message());
    return false;
  }
  RETURN_IF_ERROR(status);
  return true;
}

absl::Status Client::Barrier() {
  v1::Request r;
  {
    MutexLock lock(&mu_);
    r.set_name(absl::StrFormat("gravac.barrier.%d", barrier_count_++));
  }
  r.set_kind(v1::ALLREDUCE);
  r.set_dtype(v1::FLOAT32);
  r.set_reduce_op(v1::SUM);
  r.set_step(-1);
  float one = 1.0f, out = 0.0f;
  ASSIGN_OR_RETURN(auto state, Submit(std::move(r), &one, &out, sizeof(one), 0));
  return state->Wait();
}

absl::StatusOr<int> Client::Join() {
  v1::Request r;
  r.set_name("gravac.join");
  r.set_kind(v1::JOIN);
  r.set_dtype(v1::INT32);
  r.set_step(-1);
  const int32_t me = config_.rank;
  int32_t last = -1;
  ASSIGN_OR_RETURN(auto state, Submit(std::move(r), &me, &last, sizeof(me), 0));
  RETURN_IF_ERROR(state->Wait());
  return last;
}

absl::Status Client::Timeline(const std::string& path) {
  v1::Request r;
  r.set_name(path);
  r.set_kind(v1::TIMELINE);
  r.set_step(-1);
  uint8_t none = 0;
  ASSIGN_OR_RETURN(auto state, Submit(std::move(r), &none, &none, 0, 0));
  return state->Wait();
}

void Client::ReaderLoop() {
  absl::Time last_heard = absl::Now();
  while (true) {
    auto frame = reader_.Next();
    if (!frame.ok()) {
      FailAll(frame.status());
      return;
    }
    if (frame->has_value()) {
      v1::DaemonMessage msg;
      if (!msg.ParseFromString((*frame)->payload)) {
        FailAll(absl::DataLossError("unparsable message from the daemon"));
        return;
      }
      if (msg.has_response()) {
        OnResponse(*msg.mutable_response(), std::move((*frame)->fds));
      } else if (msg.has_error()) {
        FailAll(absl::Status(static_cast<absl::StatusCode>(msg.error().code()),
                             absl::StrFormat("rank %d: the daemon refused this worker: %s",
                                             config_.rank, msg.error().message())));
        return;
      } else if (msg.has_shutdown_ack()) {
        MutexLock lock(&mu_);
        shutdown_acked_ = true;
        cv_.SignalAll();
      }
      continue;
    }
    if (liveness_timeout_ > absl::ZeroDuration()) {
      // Wait for the next bytes, at most until the daemon has been silent for the bound.
      const absl::Duration left = liveness_timeout_ - (absl::Now() - last_heard);
      pollfd p{sock_.get(), POLLIN, 0};
      const int ms =
          left > absl::ZeroDuration() ? static_cast<int>(absl::ToInt64Milliseconds(left)) + 1 : 0;
      if (::poll(&p, 1, ms) == 0) {
        if (absl::Now() - last_heard < liveness_timeout_) continue;
        FailAll(absl::DeadlineExceededError(absl::StrFormat(
            "rank %d: this node's gravacd (pid %d, socket '%s') sent nothing for %s although it "
            "sends a heartbeat every %s: it is hung or stopped; failing after its "
            "--stall_timeout_s %s",
            config_.rank, daemon_pid_, config_.daemon_socket,
            absl::FormatDuration(absl::Trunc(absl::Now() - last_heard, absl::Milliseconds(1))),
            absl::FormatDuration(heartbeat_interval_), absl::FormatDuration(liveness_timeout_))));
        return;
      }
    }
    auto more = reader_.ReadSome(sock_.get());
    last_heard = absl::Now();
    if (!more.ok() || !*more) {
      FailAll(absl::UnavailableError(absl::StrFormat(
          "rank %d: the daemon closed the connection (daemon stopped or failed)%s", config_.rank,
          more.ok() ? "" : absl::StrFormat(": %s", more.status().message()))));
      return;
    }
  }
}

void Client::OnResponse(v1::Response& response, std::vector<ipc::UniqueFd> fds) {
  std::shared_ptr<RequestState> state;
  {
    MutexLock lock(&mu_);
    auto it = pending_.find(response.id());
    if (it == pending_.end()) return;
    state = std::move(it->second);
    pending_.erase(it);
  }
  absl::Status status(static_cast<absl::StatusCode>(response.code()), response.message());
  std::optional<ipc::ShmSegment> gathered;
  if (status.ok() && state->kind == v1::ALLGATHER) {
    if (fds.size() != 1) {
      status = absl::DataLossError("allgather result arrived without its segment");
    } else {
      auto seg = ipc::ShmSegment::Map(std::move(fds[0]), /*writable=*/false);
      if (!seg.ok()) {
        status = seg.status();
      } else if (seg->data_bytes() < response.result_bytes()) {
        status = absl::DataLossError("allgather result segment is smaller than announced");
      } else {
        gathered = std::move(*seg);
      }
    }
  }
  {
    MutexLock lock(&state->mu);
    if (status.ok() && state->kind != v1::ALLGATHER && !state->abandoned && !state->borrowed &&
        state->block.bytes > 0 && state->out != nullptr) {
      std::memcpy(state->out, state->block.data, state->block.bytes);
    }
    state->status = status;
    state->theta = response.theta();
    state->collective = response.collective();
    state->decision_epoch = response.decision_epoch();
    state->first_dims.assign(response.first_dims().begin(), response.first_dims().end());
    state->result_bytes = response.result_bytes();
    state->gathered = std::move(gathered);
    state->stage = response.stage();
    state->done = true;
  }
  if (!state->device) {
    MutexLock lock(&mu_);
    FreeBlockLocked(*state);
  }
  state->cv.SignalAll();
}

void Client::FailAll(const absl::Status& status) {
  std::map<uint64_t, std::shared_ptr<RequestState>> pending;
  {
    MutexLock lock(&mu_);
    if (dead_.ok()) dead_ = status;
    pending.swap(pending_);
    cv_.SignalAll();
  }
  for (auto& [id, state] : pending) {
    if (state->borrowed) shared_->Return(state->block.data);  // staging blocks die with the client
    {
      MutexLock lock(&state->mu);
      state->status = status;
      state->done = true;
    }
    state->cv.SignalAll();
  }
}

absl::Status Client::Shutdown() {
  v1::WorkerMessage msg;
  msg.mutable_shutdown();
  absl::Status result;
  bool alive;
  {
    MutexLock lock(&mu_);
    alive = dead_.ok();
  }
  if (alive) {
    result = SendLocked(msg);
    if (result.ok()) {
      const absl::Time deadline = absl::Now() + absl::Seconds(5);
      MutexLock lock(&mu_);
      while (!shutdown_acked_ && dead_.ok() && !cv_.WaitWithDeadline(&mu_, deadline)) {
      }
      if (!shutdown_acked_ && dead_.ok()) {
        result = absl::DeadlineExceededError("the daemon did not acknowledge shutdown in 5 s");
      } else if (!shutdown_acked_) {
        result = dead_;
      }
    }
  }
  FailAll(absl::CancelledError(absl::StrFormat(
      "rank %d: gravac_shutdown was called while the request was pending", config_.rank)));
  ::shutdown(sock_.get(), SHUT_RDWR);
  if (reader_thread_.joinable()) reader_thread_.join();
  return result;
}

}  // namespace gravac::client
