#include "daemon/local/worker_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/errno_status.h"
#include "core/status.h"
#include "daemon/local/worker_server_impl.h"

namespace gravac::daemon {
namespace internal {

absl::StatusOr<std::shared_ptr<WorkerServerImpl>> WorkerServerImpl::Create(
    WorkerServerOptions options) {
  if (options.local_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("local_size must be at least 1, got %d", options.local_size));
  }
  auto impl = std::shared_ptr<WorkerServerImpl>(new WorkerServerImpl(std::move(options)));
  if (!impl->options_.socket_path.empty()) {
    ASSIGN_OR_RETURN(impl->peer_policy_, ipc::PolicyForThisUser(impl->options_.socket_group));
    ipc::ListenOptions listen;
    listen.path = impl->options_.socket_path;
    listen.group = impl->options_.socket_group;
    listen.nonblocking = true;
    ASSIGN_OR_RETURN(impl->listen_fd_, ipc::ListenUnix(listen));
    struct stat st;
    if (::stat(listen.path.c_str(), &st) == 0) impl->socket_inode_ = st.st_ino;
  }
  impl->epoll_fd_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  impl->wake_fd_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->epoll_fd_.valid() || !impl->wake_fd_.valid()) {
    return ErrnoStatus(absl::StatusCode::kInternal, errno, "epoll/eventfd");
  }
  if (impl->listen_fd_.valid()) impl->Watch(impl->listen_fd_.get());
  impl->Watch(impl->wake_fd_.get());
  if (impl->options_.device != nullptr && impl->options_.device->Available()) {
    impl->intake_ = std::make_unique<ipc::DeviceIntake>(impl->options_.device, impl->options_.log);
  }
  impl->slots_.assign(impl->options_.local_size, nullptr);
  impl->joined_.assign(impl->options_.local_size, false);
  impl->posted_names_.resize(impl->options_.local_size);
  {
    MutexLock lock(&impl->mu_);
    impl->hello_seen_.assign(impl->options_.local_size, false);
    impl->finished_slot_.assign(impl->options_.local_size, false);
  }
  impl->thread_ = std::thread([raw = impl.get()] { raw->Loop(); });
  return impl;
}

WorkerServerImpl::WorkerServerImpl(WorkerServerOptions options) : options_(std::move(options)) {}

WorkerServerImpl::~WorkerServerImpl() { Stop(); }

void WorkerServerImpl::Watch(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev);
}

void WorkerServerImpl::Post(std::function<void()> task) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
  }
  uint64_t one = 1;
  ssize_t unused = ::write(wake_fd_.get(), &one, sizeof(one));
  (void)unused;
}

absl::StatusOr<LocalGroup> WorkerServerImpl::WaitForWorkers(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (!group_ready_ && !stopping_ && failure_.ok() && !cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  if (group_ready_) return group_;
  if (!failure_.ok()) return failure_;
  if (stopping_) return absl::CancelledError("worker server stopped");
  std::vector<int> missing;
  for (int i = 0; i < options_.local_size; ++i) {
    if (!hello_seen_[i]) missing.push_back(i);
  }
  return absl::DeadlineExceededError(absl::StrFormat(
      "%d of %d local workers said hello within %s; missing local ranks [%s] (socket '%s')",
      options_.local_size - static_cast<int>(missing.size()), options_.local_size,
      absl::FormatDuration(timeout), absl::StrJoin(missing, ", "), options_.socket_path));
}

void WorkerServerImpl::Serve(NodeTensorSink sink, FailureSink on_failure,
                             TimelineControl timeline) {
  Post([this, sink = std::move(sink), on_failure = std::move(on_failure),
        timeline = std::move(timeline)]() mutable {
    sink_ = std::move(sink);
    on_failure_ = std::move(on_failure);
    timeline_ = std::move(timeline);
    serving_ = true;
    std::vector<QueuedTimeline> timelines = std::move(queued_timelines_);
    queued_timelines_.clear();
    for (QueuedTimeline& q : timelines) AnswerTimeline(q.local_rank, q.request_id, q.path);
    std::deque<Ready> queued = std::move(queued_);
    queued_.clear();
    for (Ready& r : queued) Deliver(std::move(r));
    if (!failure_reported_ && !LockedFailure().ok()) ReportFailure();
  });
}

absl::Status WorkerServerImpl::LockedFailure() {
  MutexLock lock(&mu_);
  return failure_;
}

absl::Status WorkerServerImpl::WaitForShutdown(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (finished_ != options_.local_size && !stopping_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  if (finished_ == options_.local_size) return failure_;
  if (stopping_) return absl::CancelledError("worker server stopped");
  std::vector<int> running;
  for (int i = 0; i < options_.local_size; ++i) {
    if (!finished_slot_[i]) running.push_back(group_.first_rank + i);
  }
  return absl::DeadlineExceededError(absl::StrFormat("ranks [%s] did not shut down within %s",
                                                     absl::StrJoin(running, ", "),
                                                     absl::FormatDuration(timeout)));
}

void WorkerServerImpl::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  uint64_t one = 1;
  ssize_t unused = ::write(wake_fd_.get(), &one, sizeof(one));
  (void)unused;
  MutexLock join_lock(&join_mu_);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void WorkerServerImpl::Adopt(ipc::UniqueFd fd, ipc::FrameReader reader, std::string hello) {
  // The task owns the connection until the loop runs it; a dropped task closes it.
  auto conn = std::make_shared<Conn>();
  conn->fd = std::move(fd);
  conn->reader = std::move(reader);
  Post([this, conn, hello = std::move(hello)]() mutable {
    v1::WorkerMessage msg;
    const int fd = conn->fd.get();
    if (fd < 0 || !msg.ParseFromString(hello) || !msg.has_hello()) return;
    auto owned = std::make_unique<Conn>(std::move(*conn));
    Conn& c = *owned;
    Watch(fd);
    conns_.emplace(fd, std::move(owned));
    Handle(c, msg, {});
  });
}

void WorkerServerImpl::Fail(absl::Status status) {
  {
    // Set at once, so a request read after Fail returns is refused with it.
    MutexLock lock(&mu_);
    if (!failure_.ok()) return;
    failure_ = status;
  }
  Post([this, status = std::move(status)]() mutable { FailPending(std::move(status)); });
}

void WorkerServerImpl::Loop() {
  epoll_event events[64];
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) break;
    }
    const int timeout_ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(std::min(options_.stall_warning / 4, heartbeat_interval())), 10,
        500));
    int n = ::epoll_wait(epoll_fd_.get(), events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_.get()) {
        AcceptAll();
      } else if (fd == wake_fd_.get()) {
        uint64_t v;
        ssize_t unused = ::read(wake_fd_.get(), &v, sizeof(v));
        (void)unused;
      } else {
        auto it = conns_.find(fd);
        if (it != conns_.end()) ReadFrom(*it->second);
      }
    }
    RunTasks();
    CheckStalls();
    SendHeartbeats();
  }
  Teardown();
}

void WorkerServerImpl::RunTasks() {
  std::deque<std::function<void()>> tasks;
  {
    MutexLock lock(&mu_);
    tasks.swap(tasks_);
  }
  for (auto& t : tasks) t();
}

void WorkerServerImpl::AcceptAll() {
  while (true) {
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    auto conn = std::make_unique<Conn>();
    conn->fd.Reset(fd);
    absl::StatusOr<ipc::PeerCredentials> peer = ipc::GetPeerCredentials(fd);
    absl::Status allowed = peer.ok() ? ipc::CheckPeer(*peer, peer_policy_) : peer.status();
    if (!allowed.ok()) {
      if (options_.log != nullptr) {
        GRAVAC_LOG(*options_.log, kWarning, "refused a connection: %s", allowed.message());
      }
      v1::DaemonMessage refusal;
      refusal.mutable_error()->set_code(static_cast<int>(allowed.code()));
      refusal.mutable_error()->set_message(std::string(allowed.message()));
      (void)ipc::SendFrame(fd, refusal.SerializeAsString(), {}, absl::Seconds(1));
      continue;  // conn closes the socket
    }
    Watch(fd);
    conns_.emplace(fd, std::move(conn));
  }
}

void WorkerServerImpl::ReadFrom(Conn& conn) {
  auto more = conn.reader.ReadSome(conn.fd.get());
  if (!more.ok()) {
    Drop(conn, more.status());
    return;
  }
  while (true) {
    auto frame = conn.reader.Next();
    if (!frame.ok()) {
      Drop(conn, frame.status());
      return;
    }
    if (!frame->has_value()) break;
    v1::WorkerMessage msg;
    if (!msg.ParseFromString((*frame)->payload)) {
      Drop(conn, absl::DataLossError("unparsable message from worker"));
      return;
    }
    if (!Handle(conn, msg, std::move((*frame)->fds))) return;  // conn dropped
  }
  if (!*more) Drop(conn, absl::UnavailableError("connection closed"));
}

bool WorkerServerImpl::Handle(Conn& conn, v1::WorkerMessage& msg, std::vector<ipc::UniqueFd> fds) {
  switch (msg.msg_case()) {
    case v1::WorkerMessage::kHello:
      return HandleHello(conn, msg.hello());
    case v1::WorkerMessage::kRegisterSegment: {
      if (conn.local_rank < 0 || fds.size() != 1) {
        Refuse(conn, absl::InvalidArgumentError("segment registration before hello or without fd"));
        return false;
      }
      auto seg = ipc::ShmSegment::Map(std::move(fds[0]), /*writable=*/true);
      if (!seg.ok()) {
        Refuse(conn,
               absl::InvalidArgumentError(absl::StrFormat("rank %d: staging segment refused: %s",
                                                          conn.rank, seg.status().message())));
        return false;
      }
      conn.segments[msg.register_segment().segment_id()] = std::move(*seg);
      return true;
    }
    case v1::WorkerMessage::kReleaseSegment:
      conn.segments.erase(msg.release_segment().segment_id());
      return true;
    case v1::WorkerMessage::kRequest:
      if (conn.local_rank < 0) {
        Drop(conn, absl::InvalidArgumentError("request before hello"));
        return false;
      }
      HandleRequest(conn, msg.request());
      return true;
    case v1::WorkerMessage::kMapDevice:
      if (conn.local_rank < 0) {
        Drop(conn, absl::InvalidArgumentError("map_device before hello"));
        return false;
      }
      HandleMapDevice(conn, msg.map_device());
      return true;
    case v1::WorkerMessage::kShutdown: {
      conn.shutdown = true;
      v1::DaemonMessage ack;
      ack.mutable_shutdown_ack();
      Send(conn, ack);
      MarkFinished(conn.local_rank);
      return true;
    }
    default:
      Drop(conn, absl::InvalidArgumentError("unknown message from worker"));
      return false;
  }
}

void WorkerServerImpl::Send(Conn& conn, const v1::DaemonMessage& msg, absl::Span<const int> fds) {
  std::string bytes = msg.SerializeAsString();
  absl::Status s = ipc::SendFrame(conn.fd.get(), bytes, fds, absl::Seconds(10));
  if (!s.ok() && options_.log != nullptr) {
    GRAVAC_LOG(*options_.log, kWarning, "rank %d: cannot send to worker: %s", conn.rank,
               s.message());
  }
}

absl::Duration WorkerServerImpl::heartbeat_interval() const {
  // Several per liveness bound, so one late beat is no failure; at most 1 s.
  return std::clamp(options_.stall_timeout / 6, absl::Milliseconds(10), absl::Seconds(1));
}

void WorkerServerImpl::SendHeartbeats() {
  const absl::Time now = absl::Now();
  if (now - last_heartbeat_ < heartbeat_interval()) return;
  last_heartbeat_ = now;
  v1::DaemonMessage beat;
  beat.mutable_heartbeat();
  const std::string bytes = beat.SerializeAsString();
  for (auto& [fd, conn] : conns_) {
    if (conn->local_rank < 0 || conn->shutdown) continue;
    // Never blocks the loop: a worker that does not read (stopped) misses beats it would not
    // read anyway. The frame (10 bytes) goes whole or not at all on the non-blocking Unix stream
    // socket, so a skipped beat never leaves half a frame behind.
    (void)ipc::SendFrame(fd, bytes, {}, absl::ZeroDuration());
  }
}

void WorkerServerImpl::MarkFinished(int local_rank) {
  if (local_rank < 0) return;
  MutexLock lock(&mu_);
  if (!finished_slot_[local_rank]) {
    finished_slot_[local_rank] = true;
    ++finished_;
  }
  cv_.SignalAll();
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Start(WorkerServerOptions options) {
  ASSIGN_OR_RETURN(auto impl, internal::WorkerServerImpl::Create(std::move(options)));
  return std::unique_ptr<WorkerServer>(new WorkerServer(std::move(impl)));
}

WorkerServer::WorkerServer(std::shared_ptr<internal::WorkerServerImpl> impl)
    : impl_(std::move(impl)) {}

WorkerServer::~WorkerServer() { Stop(); }

absl::StatusOr<LocalGroup> WorkerServer::WaitForWorkers(absl::Duration timeout) {
  return impl_->WaitForWorkers(timeout);
}

void WorkerServer::Serve(NodeTensorSink sink, FailureSink on_failure, TimelineControl timeline) {
  impl_->Serve(std::move(sink), std::move(on_failure), std::move(timeline));
}

absl::Status WorkerServer::WaitForShutdown(absl::Duration timeout) {
  return impl_->WaitForShutdown(timeout);
}

void WorkerServer::Stop() { impl_->Stop(); }

void WorkerServer::Adopt(ipc::UniqueFd fd, ipc::FrameReader reader, std::string hello) {
  impl_->Adopt(std::move(fd), std::move(reader), std::move(hello));
}

void WorkerServer::Fail(absl::Status status) { impl_->Fail(std::move(status)); }

}  // namespace gravac::daemon
