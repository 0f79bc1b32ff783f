// controller_service.h: gravac.v1.Controller over a real in-process gRPC server, called through
// the generated stub as a daemon or gravacctl would: Join, the statistics stream, the decision
// stream, job status, and the Coordinator's errors arriving as gRPC status codes.
#include "controller/controller_service.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gravac/v1/controller.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gravac::controller {
namespace {

namespace v1 = ::gravac::v1;
using ::testing::HasSubstr;

// Plain text, chosen explicitly: these tests are about the service's logic; the TLS and
// authorization paths have their own test with real certificates (controller_tls_test).
ControllerServerOptions Options() {
  ControllerServerOptions o;
  o.security = proto::GrpcSecurity::Plaintext();
  o.listen = "127.0.0.1:0";
  o.coordinator.nodes = 1;
  o.coordinator.policy.theta_min = 10;
  o.coordinator.policy.theta_max = 80;
  o.coordinator.policy.window = 2;
  o.coordinator.policy.eval_steps = 4;
  return o;
}

std::unique_ptr<v1::Controller::Stub> Stub(int port) {
  return v1::Controller::NewStub(grpc::CreateChannel(absl::StrFormat("127.0.0.1:%d", port),
                                                     grpc::InsecureChannelCredentials()));
}

void Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
}

v1::JoinRequest Request(int first_rank, int local_count, int world_size) {
  v1::JoinRequest r;
  r.set_node_name("node-a");
  r.set_first_rank(first_rank);
  r.set_local_count(local_count);
  r.set_world_size(world_size);
  r.set_transport_address("blob-a");
  return r;
}

TEST(ControllerService, JoinReturnsLayoutJobAndDecision) {
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(Options()));
  auto stub = Stub(server->port());
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::JoinResponse reply;
  ASSERT_TRUE(stub->Join(&ctx, Request(0, 2, 2), &reply).ok());
  EXPECT_EQ(reply.node_rank(), 0);
  ASSERT_EQ(reply.nodes_size(), 1);
  EXPECT_EQ(reply.nodes(0).node_name(), "node-a");
  EXPECT_EQ(reply.world_size(), 2);
  EXPECT_EQ(reply.job().compressor(), "topk");
  EXPECT_EQ(reply.job().theta_min(), 10.0);
  EXPECT_EQ(reply.decision().epoch(), 0);
  EXPECT_EQ(reply.decision().theta(), 10.0);
}

// The Coordinator's InvalidArgument reaches the daemon as INVALID_ARGUMENT with its message.
TEST(ControllerService, InconsistentJoinIsInvalidArgument) {
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(Options()));
  auto stub = Stub(server->port());
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::JoinResponse reply;
  const grpc::Status s = stub->Join(&ctx, Request(3, 1, 2), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("node-a"));
}

// Statistics of a node the job does not have are refused with FAILED_PRECONDITION.
TEST(ControllerService, StatsOfAnUnknownNodeAreRefused) {
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(Options()));
  auto stub = Stub(server->port());
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::ReportStatsResponse response;
  auto writer = stub->ReportStats(&ctx, &response);
  v1::StatsBatch batch;
  batch.set_node_rank(3);
  v1::NodeStepStats* s = batch.add_stats();
  s->set_step(0);
  s->set_theta_used(10);
  s->set_theta_candidate(10);
  writer->Write(batch);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// A whole warm-up over the wire: the decision stream starts with epoch 0, the statistics of two
// steps end the warm-up (window 2), the stream delivers epoch 1 and the status counts the steps.
TEST(ControllerService, StatsDriveDecisionsAndStatus) {
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(Options()));
  auto stub = Stub(server->port());
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::JoinResponse reply;
    ASSERT_TRUE(stub->Join(&ctx, Request(0, 1, 1), &reply).ok());
  }
  grpc::ClientContext watch_ctx;
  Deadline(&watch_ctx);
  v1::WatchDecisionsRequest watch;
  watch.set_node_rank(0);
  auto reader = stub->WatchDecisions(&watch_ctx, watch);
  v1::Decision d;
  ASSERT_TRUE(reader->Read(&d));
  EXPECT_EQ(d.epoch(), 0);

  grpc::ClientContext stats_ctx;
  Deadline(&stats_ctx);
  v1::ReportStatsResponse response;
  auto writer = stub->ReportStats(&stats_ctx, &response);
  v1::StatsBatch batch;
  batch.set_node_rank(0);
  for (int step = 0; step < 2; ++step) {
    v1::NodeStepStats* s = batch.add_stats();
    s->set_step(step);
    s->set_theta_used(10);
    s->set_theta_candidate(10);
    s->set_n_g(1.0);
    s->set_n_min(0.9);
    s->set_n_c(0.9);
    s->set_step_seconds(0.1);
    s->set_samples(32);
  }
  ASSERT_TRUE(writer->Write(batch));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(response.accepted(), 2);

  ASSERT_TRUE(reader->Read(&d));
  EXPECT_EQ(d.epoch(), 1);

  grpc::ClientContext status_ctx;
  Deadline(&status_ctx);
  v1::JobStatus status;
  ASSERT_TRUE(stub->GetJobStatus(&status_ctx, v1::GetJobStatusRequest(), &status).ok());
  EXPECT_TRUE(status.assembled());
  EXPECT_EQ(status.steps_observed(), 2);
  EXPECT_EQ(status.last_step(), 1);
  EXPECT_EQ(status.decision().epoch(), 1);

  watch_ctx.TryCancel();
  while (reader->Read(&d)) {
  }
  reader->Finish();
}

}  // namespace
}  // namespace gravac::controller

namespace gravac::controller {
namespace {

// grpc.health.v1.Health/Check with an empty service name, as Kubernetes' grpc probe sends it,
// through a generic stub (Debian ships no health.proto): the HealthCheckResponse bytes.
absl::StatusOr<std::string> HealthCheck(int port) {
  auto channel = grpc::CreateChannel(absl::StrFormat("127.0.0.1:%d", port),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::CompletionQueue cq;
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !ok) return absl::InternalError("health: no completion");
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

TEST(ControllerService, AnswersTheGrpcHealthProtocol) {
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(Options()));
  ASSERT_OK_AND_ASSIGN(std::string serving, HealthCheck(server->port()));
  EXPECT_EQ(serving, std::string("\x08\x01", 2));  // status: SERVING
  server->Shutdown();
  EXPECT_FALSE(HealthCheck(server->port()).ok());
}

}  // namespace
}  // namespace gravac::controller
