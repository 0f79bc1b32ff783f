#include "daemon/job_service.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/absl_compat.h"
#include "core/errno_status.h"
#include "core/ipc/unix_socket.h"
#include "core/status.h"
#include "daemon/collectives/device_collectives_backends.h"
#include "gravac/v1/worker.pb.h"

namespace gravac::daemon {
namespace {

constexpr int kPollMs = 200;

// The job's own copy of a per-node file setting: PATH.NAME.RUN_ID.
std::string JobPath(const std::string& path, const JobId& job) {
  if (path.empty()) return path;
  return job.run_id.empty() ? StrCat(path, ".", job.name)
                            : StrCat(path, ".", job.name, ".", job.run_id);
}

}  // namespace

JobService::JobService(GravacdOptions options, Logger* log, prometheus::Registry* registry)
    : options_(std::move(options)),
      log_(log),
      registry_(registry),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      regroups_(options_, log),
      failures_({.controller = options_.controller,
                 .security = options_.security,
                 .node_name = options_.node_name,
                 .log = log}) {}

JobService::~JobService() {
  RequestStop();
  for (auto& [id, s] : sessions_) {
    s->session->RequestStop();
    if (s->thread.joinable()) s->thread.join();
  }
}

std::string JobService::Where() const { return StrCat("node '", options_.node_name, "'"); }

void JobService::RequestStop() {
  stop_ = true;
  Wake();
}

void JobService::Wake() {
  if (wake_fd_.valid()) {
    const uint64_t one = 1;
    ssize_t unused = ::write(wake_fd_.get(), &one, sizeof(one));
    (void)unused;
  }
}

absl::Status JobService::Run() {
  ASSIGN_OR_RETURN(peer_policy_, ipc::PolicyForThisUser(options_.socket_group));
  if (!wake_fd_.valid()) return ErrnoStatus(absl::StatusCode::kInternal, errno, "eventfd");
  ASSIGN_OR_RETURN(listen_fd_, ipc::ListenUnix({.path = options_.socket_path,
                                                .group = options_.socket_group,
                                                .nonblocking = true}));
  struct stat st;
  if (::stat(options_.socket_path.c_str(), &st) == 0) socket_inode_ = st.st_ino;
  GRAVAC_LOG(*log_, kInfo, "serving jobs (%s) on %s; %s worker slots",
             options_.jobs.empty() ? "any" : absl::StrJoin(options_.jobs, ", "),
             options_.socket_path, options_.slots > 0 ? StrCat(options_.slots) : "unlimited");
  while (!stop_) {
    std::vector<pollfd> fds = {{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    for (const auto& [fd, g] : greetings_) fds.push_back({fd, POLLIN, 0});
    const int n = ::poll(fds.data(), fds.size(), kPollMs);
    if (n < 0 && errno != EINTR) {
      return ErrnoStatus(absl::StatusCode::kInternal, errno, "poll on the worker socket");
    }
    if (fds[1].revents != 0) {
      uint64_t v;
      ssize_t unused = ::read(wake_fd_.get(), &v, sizeof(v));
      (void)unused;
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents != 0) ReadHello(fds[i].fd);
    }
    if (fds[0].revents != 0) AcceptAll();
    const absl::Time now = absl::Now();
    for (auto it = greetings_.begin(); it != greetings_.end();) {
      if (it->second.deadline < now) {
        GRAVAC_LOG(*log_, kWarning, "%s: dropped a connection that sent no hello within %s",
                   Where(), absl::FormatDuration(kHelloTimeout));
        it = greetings_.erase(it);
      } else {
        ++it;
      }
    }
    Reap();
    regroups_.Tick(now);
  }
  greetings_.clear();
  for (auto& [id, s] : sessions_) s->session->RequestStop();
  for (auto& [id, s] : sessions_) {
    if (s->thread.joinable()) s->thread.join();
  }
  sessions_.clear();
  listen_fd_.Reset();
  if (::stat(options_.socket_path.c_str(), &st) == 0 && st.st_ino == socket_inode_) {
    ::unlink(options_.socket_path.c_str());
  }
  return absl::OkStatus();
}

void JobService::AcceptAll() {
  while (true) {
    ipc::UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) return;
    absl::StatusOr<ipc::PeerCredentials> peer = ipc::GetPeerCredentials(fd.get());
    absl::Status allowed = peer.ok() ? ipc::CheckPeer(*peer, peer_policy_) : peer.status();
    if (!allowed.ok()) {
      Refuse(fd.get(), allowed, 0);
      continue;
    }
    const int key = fd.get();
    greetings_[key] = Greeting{std::move(fd), ipc::FrameReader(), absl::Now() + kHelloTimeout};
  }
}

void JobService::ReadHello(int fd) {
  auto it = greetings_.find(fd);
  if (it == greetings_.end()) return;
  Greeting& g = it->second;
  absl::StatusOr<bool> more = g.reader.ReadSome(fd);
  absl::StatusOr<std::optional<ipc::Frame>> frame =
      more.ok() ? g.reader.Next() : absl::StatusOr<std::optional<ipc::Frame>>(more.status());
  if (!frame.ok() || (!frame->has_value() && !*more)) {
    greetings_.erase(it);  // closed or malformed before its hello
    return;
  }
  if (!frame->has_value()) return;  // the rest of the hello comes later
  Greeting taken = std::move(g);
  greetings_.erase(it);
  Route(std::move(taken.fd), std::move(taken.reader), std::move((*frame)->payload));
}

void JobService::Refuse(int fd, const absl::Status& why, int64_t pid) {
  GRAVAC_LOG(*log_, kWarning, "refused a worker (pid %d): %s", pid, why.message());
  v1::DaemonMessage refusal;
  refusal.mutable_error()->set_code(static_cast<int>(why.code()));
  refusal.mutable_error()->set_message(std::string(why.message()));
  (void)ipc::SendFrame(fd, refusal.SerializeAsString(), {}, absl::Seconds(1));
}

void JobService::RefuseJob(int fd, const absl::Status& why, const JobId& job,
                           const v1::Hello& hello) {
  Refuse(fd, why, hello.pid());
  if (hello.regroup()) return;  // an elastic job's membership change: its RegroupDesk's matter
  const int node_rank = hello.nodes() > 0 ? hello.node_rank() : -1;
  failures_.Report(job, node_rank,
                   absl::Status(why.code(), StrCat("refused its worker: ", why.message())));
}

std::string JobService::Holders() const {
  std::vector<std::string> held;
  for (const auto& [id, s] : sessions_) {
    if (!s->done) held.push_back(absl::StrFormat("%s (%d)", id.ToString(), s->slots));
  }
  return held.empty() ? "none" : absl::StrJoin(held, ", ");
}

void JobService::Route(ipc::UniqueFd fd, ipc::FrameReader reader, std::string payload) {
  v1::WorkerMessage msg;
  if (!msg.ParseFromString(payload) || !msg.has_hello()) {
    Refuse(fd.get(),
           absl::InvalidArgumentError(StrCat(Where(), ": the first message must be a hello")), 0);
    return;
  }
  const v1::Hello& hello = msg.hello();
  const JobId job = JobId{hello.job_name(), hello.run_id()}.Normalized();
  const std::string who =
      absl::StrFormat("%s: rank %d of %s", Where(), hello.rank(), job.ToString());
  if (absl::Status bad = CheckJobId(job); !bad.ok()) {
    Refuse(fd.get(), absl::InvalidArgumentError(StrCat(who, ": ", bad.message())), hello.pid());
    return;
  }
  if (!options_.jobs.empty() &&
      std::find(options_.jobs.begin(), options_.jobs.end(), job.name) == options_.jobs.end()) {
    RefuseJob(fd.get(),
              absl::PermissionDeniedError(
                  absl::StrFormat("%s: this gravacd does not serve job '%s' (--jobs %s)", who,
                                  job.name, absl::StrJoin(options_.jobs, ","))),
              job, hello);
    return;
  }
  if (hello.regroup()) {
    regroups_.Take(std::move(fd), hello);
    return;
  }
  Reap();
  if (auto found = sessions_.find(job); found != sessions_.end() && !found->second->done) {
    Session& s = *found->second;
    if (s.session->server().WaitForWorkers(absl::ZeroDuration()).ok()) {
      Refuse(fd.get(),
             absl::AlreadyExistsError(absl::StrFormat(
                 "%s: the job already has its %d workers on this node (a second group claiming "
                 "its slots, or a rerun that reused the run id: give it a new GRAVAC_RUN_ID)",
                 who, s.slots)),
             hello.pid());
      return;
    }
    s.session->server().Adopt(std::move(fd), std::move(reader), std::move(payload));
    return;
  }
  const int want = hello.local_size();
  if (want < 1 || want > 65536) {
    RefuseJob(fd.get(),
              absl::InvalidArgumentError(
                  absl::StrFormat("%s: GRAVAC_LOCAL_SIZE=%d is not 1..65536", who, want)),
              job, hello);
    return;
  }
  if (options_.slots > 0) {
    int used = 0;
    for (const auto& [id, s] : sessions_) used += s->done ? 0 : s->slots;
    if (used + want > options_.slots) {
      RefuseJob(fd.get(),
                absl::ResourceExhaustedError(absl::StrFormat(
                    "%s: the job needs %d worker slots, but %d of this node's %d are free (held "
                    "by %s)",
                    who, want, options_.slots - used, options_.slots, Holders())),
                job, hello);
      return;
    }
  }

  if (auto old = sessions_.find(job); old != sessions_.end()) {  // ended since Reap
    if (old->second->thread.joinable()) old->second->thread.join();
    sessions_.erase(old);  // with its series, which the new session's would share
  }
  std::unique_ptr<DaemonMetrics> metrics;
  if (registry_ != nullptr) {
    retired_.erase(job);  // a retried start of the job: its old series go now
    absl::StatusOr<std::unique_ptr<DaemonMetrics>> made =
        DaemonMetrics::CreateForJob(*registry_, options_.node_name, job, want);
    if (!made.ok()) {
      RefuseJob(fd.get(),
                absl::Status(made.status().code(), StrCat(who, ": ", made.status().message())),
                job, hello);
      return;
    }
    metrics = *std::move(made);
  }
  GravacdOptions o = options_;
  o.job = job;
  o.local_size = want;
  o.node_rank = hello.nodes() > 0 ? hello.node_rank() : -1;
  o.nodes = hello.nodes() > 0 ? hello.nodes() : 0;
  o.step_log = JobPath(options_.step_log, job);
  o.timeline_filename = JobPath(options_.timeline_filename, job);
  absl::StatusOr<std::unique_ptr<WorkerServer>> server =
      WorkerServer::Start({.socket_path = "",
                           .socket_group = "",
                           .job = job,
                           .node_name = options_.node_name,
                           .local_size = want,
                           .stall_warning = options_.stall_warning,
                           .stall_timeout = options_.stall_timeout,
                           .check_finite = options_.check_finite,
                           .log = log_,
                           .metrics = metrics.get(),
                           .device = &device_,
                           .nccl_built = collectives::NcclDeviceCollectivesBuilt(),
                           .device_reduce = &device_reduce_});
  if (!server.ok()) {
    RefuseJob(fd.get(),
              absl::Status(server.status().code(), StrCat(who, ": ", server.status().message())),
              job, hello);
    return;
  }
  auto s = std::make_unique<Session>();
  s->slots = want;
  s->metrics = std::move(metrics);
  s->session = std::make_unique<JobSession>(std::move(o), *std::move(server), log_,
                                            s->metrics.get(), /*fail_workers=*/true,
                                            /*device_intake=*/device_.Available());
  s->session->server().Adopt(std::move(fd), std::move(reader), std::move(payload));
  GRAVAC_LOG(*log_, kInfo, "%s: serving %s (%d workers); jobs here: %s", Where(), job.ToString(),
             want, Holders() == "none" ? job.ToString() : StrCat(Holders(), ", ", job.ToString()));
  Session* raw = s.get();
  s->thread = std::thread([this, raw] {
    absl::Status status = raw->session->Run();
    if (status.ok()) {
      GRAVAC_LOG(*log_, kInfo, "%s: %s is over here", Where(), raw->session->job().ToString());
    } else {
      GRAVAC_LOG(*log_, kError, "%s", status.message());
    }
    raw->done = true;
    Wake();  // the loop reaps it
  });
  sessions_[job] = std::move(s);
}

void JobService::Reap() {
  const absl::Time now = absl::Now();
  for (auto it = retired_.begin(); it != retired_.end();) {
    it = it->second.until <= now ? retired_.erase(it) : std::next(it);
  }
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (!it->second->done) {
      ++it;
      continue;
    }
    Session& ended = *it->second;
    if (ended.thread.joinable()) ended.thread.join();
    ended.session.reset();  // its components report to its metrics until they go
    if (ended.metrics != nullptr && options_.job_metrics_retention > absl::ZeroDuration()) {
      retired_[it->first] = {std::move(ended.metrics), now + options_.job_metrics_retention};
    }
    it = sessions_.erase(it);
    GRAVAC_LOG(*log_, kInfo, "%s: jobs here: %s", Where(), Holders());
  }
}

}  // namespace gravac::daemon
