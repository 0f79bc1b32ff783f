// ControllerService: the thin gRPC layer of gravac-controller (gravac.v1.Controller, callback
// API in the style of gRPC's route_guide) over a JobRegistry (one Coordinator per job), and
// ControllerServer, which owns the registry, the service, the grpc::Server (with the standard
// gRPC health service, grpc.health.v1.Health, SERVING while it serves) and a ticker thread (join
// timeouts, delayed decision deliveries, ended jobs). main.cc and the end-to-end tests build a
// ControllerServer.
//
// Every call names its job (JobId); the registry picks the job's Coordinator:
//   Join            a unary reactor that finishes when the job's Coordinator answers; a client
//                   that gives up (deadline, cancel) is removed from the waiting round. An ended
//                   run id fails with ALREADY_EXISTS naming the node and the job, a failed one
//                   with ABORTED giving the failure.
//   ReportStats     a read reactor feeding every entry to the job's Coordinator; it ends with
//                   FAILED_PRECONDITION when the job or node is unknown (the daemon re-joins).
//   WatchDecisions  a write reactor subscribed to the job's Coordinator: one write in flight,
//                   newer decisions queued behind it; ended with UNAVAILABLE at shutdown.
//   GetJobStatus    a snapshot of one job's Coordinator::Status().
//   ListJobs        every job of the registry.
//   Leave           a node of a job is done; the last one ends the job.
//   FailJob         a node's part of a job failed: the job fails (JobRegistry::Fail), its other
//                   nodes' joins and streams end at once with the reason.
//
// Authentication (proto/grpc_security.h): with TLS every call comes over mutual TLS and the
// service accepts a daemon only as the node its certificate names: Join for node_name, and
// ReportStats / WatchDecisions / Leave for the node rank whose joined name it is in the job the
// call names; anything else is PERMISSION_DENIED (a client without a certificate:
// UNAUTHENTICATED). GetJobStatus and ListJobs need a certificate of the job's CA unless
// status_without_cert opens them (still over TLS).
//
// Thread-safety: ControllerServer's methods are called from one thread (main or a test);
// the service runs on gRPC's threads.
#ifndef GRAVAC_CONTROLLER_CONTROLLER_SERVICE_H_
#define GRAVAC_CONTROLLER_CONTROLLER_SERVICE_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "controller/coordinator.h"
#include "controller/job_registry.h"
#include "controller/membership_book.h"
#include "core/logging.h"
#include "gravac/v1/controller.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "proto/grpc_security.h"

namespace gravac::controller {

// Fills a gravac.v1.JobStatus from a Coordinator snapshot.
void ToProto(const JobStatusInfo& in, gravac::v1::JobStatus* out);

class ControllerService final : public gravac::v1::Controller::CallbackService {
 public:
  // `jobs` and `log` (may be null) must outlive the service.
  // `memberships` (elastic jobs' Regroup) must outlive the service too.
  ControllerService(JobRegistry* jobs, MembershipBook* memberships, Logger* log,
                    proto::GrpcSecurity security, bool status_without_cert);

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const gravac::v1::JoinRequest* request,
                                 gravac::v1::JoinResponse* response) override;
  grpc::ServerReadReactor<gravac::v1::StatsBatch>* ReportStats(
      grpc::CallbackServerContext* context, gravac::v1::ReportStatsResponse* response) override;
  grpc::ServerWriteReactor<gravac::v1::Decision>* WatchDecisions(
      grpc::CallbackServerContext* context,
      const gravac::v1::WatchDecisionsRequest* request) override;
  grpc::ServerUnaryReactor* GetJobStatus(grpc::CallbackServerContext* context,
                                         const gravac::v1::GetJobStatusRequest* request,
                                         gravac::v1::JobStatus* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const gravac::v1::ListJobsRequest* request,
                                     gravac::v1::JobList* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* context,
                                  const gravac::v1::LeaveRequest* request,
                                  gravac::v1::LeaveResponse* response) override;
  grpc::ServerUnaryReactor* Regroup(grpc::CallbackServerContext* context,
                                    const gravac::v1::RegroupRequest* request,
                                    gravac::v1::Membership* response) override;
  grpc::ServerUnaryReactor* FailJob(grpc::CallbackServerContext* context,
                                    const gravac::v1::FailJobRequest* request,
                                    gravac::v1::FailJobResponse* response) override;

 private:
  // The peer of `context` may speak for node `node_rank` of `job` (see the file comment); OK when
  // the job (`coordinator` null) or its node is unknown yet to a client with a certificate (the
  // registry or the Coordinator refuses it then).
  absl::Status CheckNodeRank(const grpc::CallbackServerContext& context, const JobId& job,
                             const Coordinator* coordinator, int node_rank,
                             std::string_view what) const;
  // GetJobStatus / ListJobs: a client with a certificate, or any client when status is open.
  bool StatusAllowed(const grpc::CallbackServerContext& context) const;

  JobRegistry* jobs_;
  MembershipBook* memberships_;
  Logger* log_;
  const proto::GrpcSecurity security_;
  const bool status_without_cert_;
};

struct ControllerServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free port
  // Every job's Coordinator settings (nodes: the default node count of a job); `observer` is
  // ignored, jobs get theirs from `observers`.
  CoordinatorOptions coordinator;
  absl::Duration job_retention = absl::Minutes(10);  // an ended job is forgotten after this
  // An elastic job's next membership forms without the nodes that did not ask for it this long
  // after the first one did (MembershipBook).
  absl::Duration regroup_timeout = absl::Seconds(10);
  // After a host update, how long such a change waits for the nodes being added (MembershipBook).
  absl::Duration new_node_wait = absl::Seconds(60);
  ObserverFactory observers;                          // per-job metrics; empty = none
  absl::Duration tick = absl::Milliseconds(5);       // join timeouts, delayed deliveries
  absl::Duration shutdown_grace = absl::Seconds(1);  // open streams get this long to end
  // The shortest interval between a daemon's keepalive pings that the server accepts while no
  // data flows (daemons ping every 10 s); pings more often count as abuse and three of them end
  // the connection (GOAWAY "too_many_pings"). Tests scale it down with the daemons' pings.
  absl::Duration min_ping_interval = absl::Seconds(5);
  // Mutual TLS (certificate, key, CA) or explicit plain text; the default (neither) fails Start.
  proto::GrpcSecurity security;
  // TLS only: GetJobStatus answers clients without a certificate (the handshake then only
  // requests one); every other call still needs the node's certificate.
  bool status_without_cert = false;
};

class ControllerServer {
 public:
  // Builds the Coordinator, binds `listen` and starts serving. InvalidArgument for bad options,
  // Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ControllerServer>> Start(ControllerServerOptions options);
  ~ControllerServer();  // Shutdown()

  int port() const { return port_; }
  JobRegistry* jobs() { return jobs_.get(); }
  // The Coordinator of job `id` (created when new; nullptr when it ended or the server shut
  // down). Tests use it; the default id is the job "default" of daemons without a job identity.
  std::shared_ptr<Coordinator> coordinator(const JobId& id = {});

  // Ends every decision stream (UNAVAILABLE), fails waiting joins, gives open calls
  // shutdown_grace to finish, then cancels them and stops the ticker. Idempotent.
  void Shutdown();

 private:
  ControllerServer() = default;
  void Tick();

  ControllerServerOptions options_;
  std::unique_ptr<JobRegistry> jobs_;
  std::unique_ptr<MembershipBook> memberships_;
  std::unique_ptr<ControllerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Notification stop_;
  std::thread ticker_;
  bool shut_down_ = false;
};

}  // namespace gravac::controller

#endif  // GRAVAC_CONTROLLER_CONTROLLER_SERVICE_H_
