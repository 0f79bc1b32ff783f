// ControllerService: the thin gRPC layer of gravac-controller (gravac.v1.Controller, callback
// API in the style of gRPC's route_guide) over a Coordinator, and ControllerServer, which owns a
// Coordinator, the service, the grpc::Server and a ticker thread (join timeouts, delayed
// decision deliveries). main.cc and the end-to-end tests build a ControllerServer.
//
//   Join            a unary reactor that finishes when the Coordinator answers; a client that
//                   gives up (deadline, cancel) is removed from the waiting round.
//   ReportStats     a read reactor feeding every entry to Coordinator::ReportStats; it ends with
//                   FAILED_PRECONDITION when the node is not part of the job (the daemon re-joins).
//   WatchDecisions  a write reactor subscribed to the Coordinator: one write in flight, newer
//                   decisions queued behind it; ended with UNAVAILABLE at shutdown.
//   GetJobStatus    a snapshot of Coordinator::Status().
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
#include "core/logging.h"
#include "gravac/v1/controller.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gravac::controller {

// Fills a gravac.v1.JobStatus from a Coordinator snapshot.
void ToProto(const JobStatusInfo& in, gravac::v1::JobStatus* out);

class ControllerService final : public gravac::v1::Controller::CallbackService {
 public:
  // `coordinator` and `log` (may be null) must outlive the service.
  ControllerService(Coordinator* coordinator, Logger* log);

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

 private:
  Coordinator* coordinator_;
  Logger* log_;
};

struct ControllerServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free port
  CoordinatorOptions coordinator;
  absl::Duration tick = absl::Milliseconds(5);       // join timeouts, delayed deliveries
  absl::Duration shutdown_grace = absl::Seconds(1);  // open streams get this long to end
  // The shortest interval between a daemon's keepalive pings that the server accepts while no
  // data flows (daemons ping every 10 s); pings more often count as abuse and three of them end
  // the connection (GOAWAY "too_many_pings"). Tests scale it down with the daemons' pings.
  absl::Duration min_ping_interval = absl::Seconds(5);
};

class ControllerServer {
 public:
  // Builds the Coordinator, binds `listen` and starts serving. InvalidArgument for bad options,
  // Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ControllerServer>> Start(ControllerServerOptions options);
  ~ControllerServer();  // Shutdown()

  int port() const { return port_; }
  Coordinator* coordinator() { return coordinator_.get(); }

  // Ends every decision stream (UNAVAILABLE), fails waiting joins, gives open calls
  // shutdown_grace to finish, then cancels them and stops the ticker. Idempotent.
  void Shutdown();

 private:
  ControllerServer() = default;
  void Tick();

  ControllerServerOptions options_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<ControllerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Notification stop_;
  std::thread ticker_;
  bool shut_down_ = false;
};

}  // namespace gravac::controller

#endif  // GRAVAC_CONTROLLER_CONTROLLER_SERVICE_H_
