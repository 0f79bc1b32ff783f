#include "daemon/job_session.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "core/absl_compat.h"
#include "core/memory_type.h"
#include "core/status.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/device_collectives_backends.h"
#include "daemon/control/controller_client.h"
#include "daemon/control/failure_reporter.h"
#include "daemon/device_collectives_choice.h"
#include "daemon/engine/engine.h"
#include "daemon/transport/transport_registry.h"

namespace gravac::daemon {
namespace {

constexpr absl::Duration kSlice = absl::Milliseconds(200);
constexpr absl::Duration kStopTimeout = absl::Seconds(2);  // shutdown steps after a stop

absl::Status Context(const absl::Status& s, std::string_view what) {
  return absl::Status(s.code(), StrCat(what, ": ", s.message()));
}

}  // namespace

std::string JobSession::Where() const {
  return StrCat("node '", options_.node_name, "': ", options_.job.ToString());
}

bool JobSession::stop_requested() const {
  absl::MutexLock lock(&mu_);
  return stop_;
}

void JobSession::RequestStop() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
  if (joining_ != nullptr) joining_->Shutdown();  // cancels the Join in progress
}

absl::Status JobSession::WaitInSlices(absl::Duration limit,
                                      const std::function<absl::Status(absl::Duration)>& wait) {
  const absl::Time deadline = absl::Now() + limit;
  while (true) {
    if (stop_requested()) return absl::CancelledError("stop requested");
    const absl::Duration left = deadline - absl::Now();
    absl::Status s = wait(std::clamp(left, absl::ZeroDuration(), kSlice));
    if (!absl::IsDeadlineExceeded(s) || left <= kSlice) return s;
  }
}

void JobSession::ReportFailure(const absl::Status& why) {
  // The controller refused the job itself (an ended or a failed run id): nothing to tell it.
  if (absl::IsAlreadyExists(why) || absl::IsAborted(why)) return;
  absl::StatusOr<bool> failed = FailureReporter::ReportNow(
      {.controller = options_.controller,
       .security = options_.security,
       .node_name = options_.node_name,
       .log = log_,
       .timeout = kReportTimeout},
      options_.job, node_rank_, why);
  if (!failed.ok()) {
    GRAVAC_LOG(*log_, kWarning, "%s: could not report the failure to the controller: %s",
               Where(), failed.status().message());
  } else if (*failed) {
    GRAVAC_LOG(*log_, kInfo, "%s: reported the failure; the controller failed the job", Where());
  }
}

absl::Status JobSession::Run() {
  bool serving = false;
  absl::Status status = RunSteps(&serving);
  if (!status.ok() && !stop_requested()) ReportFailure(status);
  if (!status.ok() && fail_workers_ && !serving && !stop_requested()) {
    // The workers that said hello learn why from their next request; give them a moment to.
    server_->Fail(status);
    (void)WaitInSlices(kFailLinger, [&](absl::Duration d) { return server_->WaitForShutdown(d); });
  }
  server_->Stop();
  return status;
}

absl::Status JobSession::RunSteps(bool* serving) {
  // Declared so that the engine (which reads the client and owns the communicator over the
  // transport) goes first, then the client and the transport. The server, which calls into the
  // engine, is stopped before the engine goes (stop_server below).
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<ControllerClient> client;
  // The job's collectives for the engine's device step (executor.h), made over the communicator
  // the engine owns (which the host ones borrow; the nccl ones use it only to bootstrap). The
  // engine borrows nccl ones, so it goes first (declared after them); the host ones it is not
  // given (its groups then run over the Communicator itself, as before), and their destructor
  // does not touch the communicator.
  std::unique_ptr<collectives::DeviceCollectives> device_collectives;
  std::unique_ptr<Engine> engine;
  WorkerServer* const server = server_.get();
  GRAVAC_LOG(*log_, kInfo, "%s: waiting for the local workers", Where());

  absl::StatusOr<LocalGroup> group;
  absl::Status waited_workers = WaitInSlices(options_.worker_timeout, [&](absl::Duration d) {
    group = server->WaitForWorkers(d);
    return group.status();
  });
  if (stop_requested()) return absl::OkStatus();
  if (!waited_workers.ok()) {
    return Context(waited_workers, StrCat(Where(), ": waiting for the local workers"));
  }
  const LocalGroup local = *group;

  absl::StatusOr<std::pair<int, int>> placement = NodePlacement(
      local.first_rank, local.local_size, local.world_size, options_.node_rank, options_.nodes);
  if (!placement.ok()) return Context(placement.status(), Where());
  const auto [node_rank, nodes] = *placement;
  node_rank_ = node_rank;
  transport::TransportOptions topts;
  topts.rank = node_rank;
  topts.world_size = nodes;
  topts.op_timeout = options_.op_timeout;
  if (!options_.ucx_tls.empty()) topts.params.emplace_back("UCX_TLS", options_.ucx_tls);
  if (!options_.ucx_net_devices.empty()) {
    topts.params.emplace_back("UCX_NET_DEVICES", options_.ucx_net_devices);
  }
  if (!options_.data_ports.any()) {
    topts.params.emplace_back("UCX_TCP_PORT_RANGE", options_.data_ports.ToString());
    if (absl::Status free = CheckFreePort(options_.data_ports); !free.ok()) {
      return Context(free, Where());
    }
  }
  absl::StatusOr<std::unique_ptr<transport::Transport>> made =
      transport::MakeTransport(options_.transport, topts);
  if (!made.ok()) {
    return Context(made.status(),
                   StrCat(Where(), ": making the '", options_.transport, "' transport (data ports ",
                          options_.data_ports.ToString(), ")"));
  }
  transport = *std::move(made);

  ControllerClientOptions copts;
  copts.address = options_.controller;
  copts.join_timeout = options_.join_timeout;
  copts.log = log_;
  copts.metrics = metrics_;
  copts.security = options_.security;
  if (options_.security.plaintext) {
    GRAVAC_LOG(*log_, kWarning,
               "INSECURE: the link to controller %s is plain text without authentication "
               "(--insecure_plaintext)",
               options_.controller);
  }
  absl::StatusOr<std::unique_ptr<ControllerClient>> created =
      ControllerClient::Create(std::move(copts));
  if (!created.ok()) {
    return Context(created.status(), StrCat(Where(), ": creating the controller client"));
  }
  client = *std::move(created);
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return absl::OkStatus();
    joining_ = client.get();
  }
  absl::StatusOr<JoinResult> joined = client->Join({.node_name = options_.node_name,
                                                    .first_rank = local.first_rank,
                                                    .local_count = local.local_size,
                                                    .world_size = local.world_size,
                                                    .transport_address = transport->LocalAddress(),
                                                    .job = options_.job,
                                                    .nodes = nodes});
  {
    absl::MutexLock lock(&mu_);
    joining_ = nullptr;
  }
  if (stop_requested()) return absl::OkStatus();
  if (!joined.ok()) {
    return Context(joined.status(),
                   StrCat(Where(), ": joining the controller at ", options_.controller));
  }
  if (joined->node_rank != node_rank || static_cast<int>(joined->layout.size()) != nodes ||
      joined->transport_addresses.size() != joined->layout.size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: the controller made this node rank %d of %d nodes (%d addresses), but its transport "
        "was made as rank %d of %d; pass --node_rank and --nodes (GRAVAC_NODE_RANK and "
        "GRAVAC_NODES to the workers of a --serve_jobs daemon)",
        Where(), joined->node_rank, joined->layout.size(), joined->transport_addresses.size(),
        node_rank, nodes));
  }
  if (metrics_ != nullptr) metrics_->SetJoined(node_rank, nodes);
  GRAVAC_LOG(*log_, kInfo, "%s: node %d of %d: ranks [%d, %d) of %d; %s transport; controller %s",
             options_.job.ToString(), node_rank, nodes, local.first_rank,
             local.first_rank + local.local_size, local.world_size, options_.transport,
             options_.controller);

  absl::StatusOr<std::unique_ptr<collectives::Communicator>> comm =
      collectives::Communicator::Connect(*transport, joined->transport_addresses,
                                         {.op_timeout = options_.op_timeout});
  if (!comm.ok())
    return Context(comm.status(), StrCat(Where(), ": connecting to the other daemons"));
  DeviceCollectivesChoice chosen;
  absl::StatusOr<std::unique_ptr<collectives::DeviceCollectives>> device = MakeJobDeviceCollectives(
      **comm,
      {.setting = options_.device_collectives,
       .nccl_built = collectives::NcclDeviceCollectivesBuilt(),
       .device_buffers = device_intake_},
      {.device = options_.nccl_device, .op_timeout = options_.op_timeout}, &chosen);
  if (!device.ok()) {
    return Context(device.status(), StrCat(Where(), ": choosing the device collectives"));
  }
  device_collectives = *std::move(device);
  GRAVAC_LOG(*log_, kInfo, "%s: device collectives: %s (%s)", options_.job.ToString(),
             device_collectives->name(), chosen.reason);
  client->Start();
  absl::StatusOr<std::unique_ptr<Engine>> engine_or =
      Engine::Start({.node_rank = node_rank,
                     .layout = joined->layout,
                     .job = joined->job,
                     .fusion_threshold_bytes = options_.fusion_threshold_bytes,
                     .cycle_time = options_.cycle_time,
                     .stall_warning = options_.stall_warning,
                     .step_log_path = options_.step_log,
                     .timeline_path = options_.timeline_filename,
                     .log = log_,
                     .metrics = metrics_,
                     // Device memory only (nccl): the host choice keeps the Communicator path.
                     .device_collectives = device_collectives->memory_type() == MemoryType::kDevice
                                               ? device_collectives.get()
                                               : nullptr,
                     .device_timeout = options_.op_timeout},
                    *std::move(comm), client.get(), client.get());
  if (!engine_or.ok()) return Context(engine_or.status(), StrCat(Where(), ": starting the engine"));
  engine = *std::move(engine_or);
  absl::Cleanup stop_server = [server] { server->Stop(); };
  Engine* e = engine.get();
  *serving = true;
  server->Serve([e](NodeTensor t, DoneCallback done) { e->Enqueue(std::move(t), std::move(done)); },
                [e](absl::Status s) { e->FailLocal(std::move(s)); },
                [e](const std::string& path) {
                  if (path.empty()) {
                    e->StopTimeline();
                    return absl::OkStatus();
                  }
                  return e->StartTimeline(path);
                });

  absl::Status waited = WaitInSlices(absl::InfiniteDuration(),
                                     [&](absl::Duration d) { return server->WaitForShutdown(d); });
  const bool stopping = stop_requested();
  if (!stopping && !waited.ok()) {
    GRAVAC_LOG(*log_, kWarning, "%s: waiting for the workers to shut down: %s", Where(),
               waited.ToString());
  }
  GRAVAC_LOG(*log_, kInfo, "%s: %s; shutting down", options_.job.ToString(),
             stopping ? "stop requested" : "all local workers shut down");
  absl::Status shutdown = engine->Shutdown(stopping ? kStopTimeout : options_.shutdown_timeout);
  client->Shutdown();
  if (absl::StatusOr<bool> left = client->Leave(); !left.ok()) {
    GRAVAC_LOG(*log_, kWarning, "%s: leaving: %s", options_.job.ToString(),
               left.status().ToString());
  } else if (*left) {
    GRAVAC_LOG(*log_, kInfo, "%s ended (this was its last node)", options_.job.ToString());
  }
  server->Stop();
  if (!shutdown.ok() && !stopping) {
    return Context(shutdown, StrCat(Where(), ": shutting the engine down"));
  }
  return absl::OkStatus();
}

}  // namespace gravac::daemon
