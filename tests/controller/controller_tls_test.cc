// The authenticated control plane: a real ControllerServer over mutual TLS, daemons' real
// ControllerClients, and raw gRPC stubs playing the attacker, with certificates made in the test
// (runner/job_certs.h). A client without a valid certificate is refused at every RPC, a daemon's
// certificate is refused for another node's name (Join, rejoin, statistics, decisions), a
// certificate of another CA is refused, and a plain-text client fails with a clear message.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "controller/controller_service.h"
#include "core/logging.h"
#include "core/testing/status_matchers.h"
#include "daemon/control/controller_client.h"
#include "daemon/control/failure_reporter.h"
#include "gmock/gmock.h"
#include "gravac/v1/controller.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc_security.h"
#include "runner/job_certs.h"

namespace gravac::controller {
namespace {

namespace v1 = ::gravac::v1;
using ::gravac::daemon::ControllerClient;
using ::gravac::daemon::ControllerClientOptions;
using ::gravac::daemon::JoinInfo;
using ::gravac::daemon::JoinResult;
using ::gravac::runner::CertificateAuthority;
using ::gravac::runner::PemCertificate;
using ::testing::HasSubstr;

// One job's certificates, and a stranger CA's.
struct Pki {
  std::string ca;
  PemCertificate controller, node0, node1, client, stranger_node0;
};

Pki MakePki() {
  Pki p;
  absl::StatusOr<CertificateAuthority> ca = CertificateAuthority::Create("test job CA");
  absl::StatusOr<CertificateAuthority> other = CertificateAuthority::Create("stranger CA");
  EXPECT_THAT(ca, IsOk());
  EXPECT_THAT(other, IsOk());
  p.ca = ca->cert_pem();
  p.controller = *ca->Issue("gravac-controller", {"127.0.0.1", "gravac-controller"});
  p.node0 = *ca->Issue("node0", {"node0"});
  p.node1 = *ca->Issue("node1", {"node1"});
  p.client = *ca->Issue("gravac-client", {});
  p.stranger_node0 = *other->Issue("node0", {"node0"});  // the right name, the wrong CA
  return p;
}

const Pki& TestPki() {
  static const Pki* pki = new Pki(MakePki());
  return *pki;
}

proto::GrpcSecurity Security(const PemCertificate& own) {
  proto::GrpcSecurity s;
  s.ca_pem = TestPki().ca;
  s.cert_pem = own.cert;
  s.key_pem = own.key;
  s.origin = "mutual TLS (test)";
  return s;
}

Logger* TestLog() {
  static Logger* log = new Logger("tls-test", LogLevel::kWarning);
  return log;
}

std::unique_ptr<ControllerServer> StartServer(bool status_without_cert) {
  ControllerServerOptions o;
  o.listen = "127.0.0.1:0";
  o.security = Security(TestPki().controller);
  o.status_without_cert = status_without_cert;
  o.coordinator.log = TestLog();
  o.coordinator.nodes = 2;
  o.coordinator.policy.theta_min = 10;
  o.coordinator.policy.theta_max = 80;
  o.coordinator.policy.window = 2;
  o.coordinator.policy.eval_steps = 4;
  o.coordinator.join_timeout = absl::Seconds(20);
  o.shutdown_grace = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<ControllerServer>> server = ControllerServer::Start(o);
  EXPECT_THAT(server, IsOk());
  return server.ok() ? *std::move(server) : nullptr;
}

std::unique_ptr<ControllerClient> Daemon(int port, const PemCertificate& cert,
                                         absl::Duration join_timeout = absl::Seconds(20)) {
  ControllerClientOptions o;
  o.address = absl::StrFormat("127.0.0.1:%d", port);
  o.security = Security(cert);
  o.log = TestLog();
  o.join_timeout = join_timeout;
  o.reconnect_initial = absl::Milliseconds(20);
  o.reconnect_max = absl::Milliseconds(200);
  o.shutdown_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<ControllerClient>> c = ControllerClient::Create(o);
  EXPECT_THAT(c, IsOk());
  return c.ok() ? *std::move(c) : nullptr;
}

JoinInfo Info(int node) {
  return {absl::StrFormat("node%d", node), node, 1, 2, absl::StrFormat("address-of-node-%d", node)};
}

// Assembles the job from two daemons, each with its own certificate.
std::vector<std::unique_ptr<ControllerClient>> AssembleJob(int port) {
  std::vector<std::unique_ptr<ControllerClient>> daemons;
  daemons.push_back(Daemon(port, TestPki().node0));
  daemons.push_back(Daemon(port, TestPki().node1));
  std::vector<absl::StatusOr<JoinResult>> joined(2, absl::UnknownError("not joined"));
  std::thread t0([&] { joined[0] = daemons[0]->Join(Info(0)); });
  std::thread t1([&] { joined[1] = daemons[1]->Join(Info(1)); });
  t0.join();
  t1.join();
  EXPECT_THAT(joined[0], IsOk());
  EXPECT_THAT(joined[1], IsOk());
  return daemons;
}

// A raw stub: `cert` null = TLS without a client certificate; `plaintext` = no TLS at all.
std::unique_ptr<v1::Controller::Stub> Stub(int port, const PemCertificate* cert,
                                           bool plaintext = false, const std::string* ca = nullptr) {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (plaintext) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ca != nullptr ? *ca : TestPki().ca;
    if (cert != nullptr) {
      o.pem_cert_chain = cert->cert;
      o.pem_private_key = cert->key;
    }
    creds = grpc::SslCredentials(o);
  }
  return v1::Controller::NewStub(
      grpc::CreateChannel(absl::StrFormat("127.0.0.1:%d", port), creds));
}

void Deadline(grpc::ClientContext* ctx, absl::Duration d = absl::Seconds(5)) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + d));
}

grpc::Status CallJoin(v1::Controller::Stub* stub, const std::string& name, bool rejoin,
                      int node_rank, const std::string& address = "attacker-address") {
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::JoinRequest request;
  request.set_node_name(name);
  request.set_first_rank(node_rank);
  request.set_local_count(1);
  request.set_world_size(2);
  request.set_transport_address(address);
  request.set_data_plane_protocol(daemon::kDataPlaneProtocol);
  request.set_rejoin(rejoin);
  request.set_node_rank(node_rank);
  v1::JoinResponse response;
  return stub->Join(&ctx, request, &response);
}

// Made-up statistics for node `node_rank` (θ = 10000, a huge gain), as the fault matrix sent.
// `job`: the job's name ("" = the default job).
grpc::Status CallReportStats(v1::Controller::Stub* stub, int node_rank, int64_t* accepted,
                             const std::string& job = "") {
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::ReportStatsResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::StatsBatch>> writer = stub->ReportStats(&ctx, &response);
  v1::StatsBatch batch;
  batch.set_node_rank(node_rank);
  batch.mutable_job_id()->set_name(job);
  for (int64_t step = 0; step < 4; ++step) {
    v1::NodeStepStats* s = batch.add_stats();
    s->set_step(step);
    s->set_theta_used(10000);
    s->set_theta_candidate(10000);
    s->set_n_g(1.0);
    s->set_n_min(1.0);
    s->set_n_c(1.0);
    s->set_step_seconds(0.001);
    s->set_samples(1000000);
  }
  writer->Write(batch);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (accepted != nullptr) *accepted = response.accepted();
  return status;
}

grpc::Status CallWatch(v1::Controller::Stub* stub, int node_rank, const std::string& job = "") {
  grpc::ClientContext ctx;
  Deadline(&ctx, absl::Seconds(2));
  v1::WatchDecisionsRequest request;
  request.set_node_rank(node_rank);
  request.mutable_job_id()->set_name(job);
  std::unique_ptr<grpc::ClientReader<v1::Decision>> reader = stub->WatchDecisions(&ctx, request);
  v1::Decision decision;
  if (reader->Read(&decision)) {
    ctx.TryCancel();  // a decision came: the stream was accepted
    reader->Finish().ok();
    return grpc::Status::OK;
  }
  return reader->Finish();
}

grpc::Status CallStatus(v1::Controller::Stub* stub) {
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::JobStatus status;
  return stub->GetJobStatus(&ctx, v1::GetJobStatusRequest(), &status);
}

TEST(ControllerTls, ClientWithoutCertificateIsRefusedAtEveryRpc) {
  for (bool open_status : {false, true}) {
    SCOPED_TRACE(open_status ? "status_without_cert" : "certificate required");
    std::unique_ptr<ControllerServer> server = StartServer(open_status);
    ASSERT_NE(server, nullptr);
    auto daemons = AssembleJob(server->port());
    std::unique_ptr<v1::Controller::Stub> anonymous = Stub(server->port(), nullptr);
    // Required: the handshake fails (UNAVAILABLE). Requested only: the calls are refused.
    const grpc::StatusCode refused =
        open_status ? grpc::StatusCode::UNAUTHENTICATED : grpc::StatusCode::UNAVAILABLE;
    EXPECT_EQ(CallJoin(anonymous.get(), "node0", /*rejoin=*/true, 0).error_code(), refused);
    EXPECT_EQ(CallJoin(anonymous.get(), "node9", /*rejoin=*/false, 0).error_code(), refused);
    EXPECT_EQ(CallReportStats(anonymous.get(), 0, nullptr).error_code(), refused);
    EXPECT_EQ(CallReportStats(anonymous.get(), 7, nullptr).error_code(), refused);
    EXPECT_EQ(CallWatch(anonymous.get(), 1).error_code(), refused);
    EXPECT_EQ(CallStatus(anonymous.get()).error_code(),
              open_status ? grpc::StatusCode::OK : refused);
    EXPECT_EQ(server->coordinator()->Status().steps_observed, 0);
    for (auto& d : daemons) d->Shutdown();
  }
}

TEST(ControllerTls, CertificateOfAnotherCaIsRefused) {
  for (bool open_status : {false, true}) {
    SCOPED_TRACE(open_status ? "status_without_cert" : "certificate required");
    std::unique_ptr<ControllerServer> server = StartServer(open_status);
    ASSERT_NE(server, nullptr);
    auto daemons = AssembleJob(server->port());
    std::unique_ptr<v1::Controller::Stub> stranger =
        Stub(server->port(), &TestPki().stranger_node0);
    // A certificate that does not verify fails the handshake, also when one is only requested.
    EXPECT_EQ(CallJoin(stranger.get(), "node0", true, 0).error_code(),
              grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(CallReportStats(stranger.get(), 0, nullptr).error_code(),
              grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(CallWatch(stranger.get(), 0).error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(CallStatus(stranger.get()).error_code(), grpc::StatusCode::UNAVAILABLE);
    // And a daemon holding it does not get in either.
    std::unique_ptr<ControllerClient> d =
        Daemon(server->port(), TestPki().stranger_node0, absl::Seconds(2));
    EXPECT_THAT(d->Join(Info(0)),
                StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("this end uses TLS")));
    for (auto& daemon : daemons) daemon->Shutdown();
  }
}

TEST(ControllerTls, NodeCertificateIsRefusedForAnotherNodesName) {
  std::unique_ptr<ControllerServer> server = StartServer(false);
  ASSERT_NE(server, nullptr);
  auto daemons = AssembleJob(server->port());
  std::unique_ptr<v1::Controller::Stub> as_node1 = Stub(server->port(), &TestPki().node1);
  std::unique_ptr<v1::Controller::Stub> as_client = Stub(server->port(), &TestPki().client);

  // node1's certificate cannot rejoin as node0 (which would hand it every node's address), nor
  // report node0's statistics, nor read node0's decisions; neither can gravacctl's certificate.
  for (v1::Controller::Stub* stub : {as_node1.get(), as_client.get()}) {
    grpc::Status rejoin = CallJoin(stub, "node0", /*rejoin=*/true, 0);
    EXPECT_EQ(rejoin.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(rejoin.error_message(), HasSubstr("not 'node0'"));
    EXPECT_EQ(CallReportStats(stub, 0, nullptr).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(CallWatch(stub, 0).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(CallReportStats(as_client.get(), 1, nullptr).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(server->coordinator()->Status().steps_observed, 0);
  EXPECT_EQ(server->coordinator()->Current().epoch, 0);

  // Its own node's calls go through: a rejoin as node1 (rank 1), statistics and decisions.
  grpc::Status rejoin = CallJoin(as_node1.get(), "node1", /*rejoin=*/true, 1, "address-of-node-1");
  EXPECT_TRUE(rejoin.ok()) << rejoin.error_message();
  int64_t accepted = 0;
  grpc::Status own = CallReportStats(as_node1.get(), 1, &accepted);
  EXPECT_TRUE(own.ok()) << own.error_message();
  EXPECT_EQ(accepted, 4);
  EXPECT_TRUE(CallWatch(as_node1.get(), 1).ok());
  EXPECT_TRUE(CallStatus(as_client.get()).ok());

  // A daemon whose certificate names another node is refused at once, not retried.
  std::unique_ptr<ControllerClient> impostor = Daemon(server->port(), TestPki().node1);
  const absl::Time start = absl::Now();
  EXPECT_THAT(impostor->Join(Info(0)),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("names node1")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  for (auto& d : daemons) d->Shutdown();
}

// Node identity holds within the job a call names: node1 is node rank 0 of a second job, where
// node0's certificate cannot speak for rank 0, and node1's still cannot for rank 0 of the first.
TEST(ControllerTls, NodeIdentityHoldsWithinTheJobTheCallNames) {
  std::unique_ptr<ControllerServer> server = StartServer(false);
  ASSERT_NE(server, nullptr);
  auto daemons = AssembleJob(server->port());  // the default job: node0 rank 0, node1 rank 1
  std::unique_ptr<v1::Controller::Stub> as_node0 = Stub(server->port(), &TestPki().node0);
  std::unique_ptr<v1::Controller::Stub> as_node1 = Stub(server->port(), &TestPki().node1);

  {  // job "other" of one node: node1, its node rank 0
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::JoinRequest request;
    request.mutable_job_id()->set_name("other");
    request.set_nodes(1);
    request.set_node_name("node1");
    request.set_local_count(1);
    request.set_world_size(1);
    request.set_transport_address("address-of-node-1");
    request.set_data_plane_protocol(daemon::kDataPlaneProtocol);
    v1::JoinResponse response;
    grpc::Status joined = as_node1->Join(&ctx, request, &response);
    ASSERT_TRUE(joined.ok()) << joined.error_message();
    EXPECT_EQ(response.node_rank(), 0);
  }
  // Rank 0 of "other" is node1's: node0's certificate neither reports nor watches for it, nor
  // makes it leave.
  grpc::Status stats = CallReportStats(as_node0.get(), 0, nullptr, "other");
  EXPECT_EQ(stats.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(stats.error_message(), HasSubstr("other"));
  EXPECT_EQ(CallWatch(as_node0.get(), 0, "other").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    v1::LeaveRequest request;
    request.mutable_job_id()->set_name("other");
    request.set_node_rank(0);
    v1::LeaveResponse response;
    EXPECT_EQ(as_node0->Leave(&ctx, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  int64_t accepted = 0;
  grpc::Status own = CallReportStats(as_node1.get(), 0, &accepted, "other");
  EXPECT_TRUE(own.ok()) << own.error_message();
  EXPECT_EQ(accepted, 4);
  EXPECT_TRUE(CallWatch(as_node1.get(), 0, "other").ok());
  // In the default job rank 0 is still node0's, and only node0's.
  EXPECT_EQ(CallReportStats(as_node1.get(), 0, nullptr).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(CallWatch(as_node1.get(), 0).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(CallWatch(as_node0.get(), 0).ok());
  EXPECT_EQ(server->coordinator()->Status().steps_observed, 0);
  for (auto& d : daemons) d->Shutdown();
}

grpc::Status CallFailJob(v1::Controller::Stub* stub, const std::string& job,
                         const std::string& node_name, bool* failed = nullptr) {
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::FailJobRequest request;
  request.mutable_job_id()->set_name(job);
  request.mutable_job_id()->set_run_id("r1");
  request.set_node_name(node_name);
  request.set_node_rank(1);
  request.set_reason("forged failure");
  v1::FailJobResponse response;
  grpc::Status status = stub->FailJob(&ctx, request, &response);
  if (failed != nullptr) *failed = response.failed();
  return status;
}

// FailJob over mutual TLS: only the node a certificate names may fail a job as that node. No
// certificate, another CA's, another node's or gravacctl's cannot fail a job (which would end it
// on every node); the named node's daemon (FailureReporter, as gravacd reports a refused or
// failed session) can, and the job's waiting Join ends at once with the failure.
TEST(ControllerTls, FailJobIsAcceptedOnlyFromTheNodeItNames) {
  std::unique_ptr<ControllerServer> server = StartServer(false);
  ASSERT_NE(server, nullptr);
  // Job "victim": node0 joined and waits for node1.
  std::unique_ptr<ControllerClient> node0 = Daemon(server->port(), TestPki().node0);
  JoinInfo info = Info(0);
  info.job = {"victim", "r1"};
  absl::Status joined = absl::UnknownError("not returned");
  absl::Time join_returned;
  std::thread join([&] {
    joined = node0->Join(info).status();
    join_returned = absl::Now();
  });
  std::unique_ptr<v1::Controller::Stub> anonymous = Stub(server->port(), nullptr);
  std::unique_ptr<v1::Controller::Stub> stranger = Stub(server->port(), &TestPki().stranger_node0);
  std::unique_ptr<v1::Controller::Stub> as_node0 = Stub(server->port(), &TestPki().node0);
  std::unique_ptr<v1::Controller::Stub> as_client = Stub(server->port(), &TestPki().client);
  EXPECT_EQ(CallFailJob(anonymous.get(), "victim", "node1").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(CallFailJob(stranger.get(), "victim", "node0").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  for (v1::Controller::Stub* stub : {as_node0.get(), as_client.get()}) {
    grpc::Status forged = CallFailJob(stub, "victim", "node1");
    EXPECT_EQ(forged.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(forged.error_message(), HasSubstr("FailJob as node 'node1' of job 'victim'"));
  }
  // A daemon's reporter with node1's certificate, reporting as node0, is refused too.
  daemon::FailureReporterOptions impostor{.controller = absl::StrFormat("127.0.0.1:%d",
                                                                        server->port()),
                                          .security = Security(TestPki().node1),
                                          .node_name = "node0",
                                          .log = TestLog()};
  EXPECT_THAT(daemon::FailureReporter::ReportNow(impostor, {"victim", "r1"}, 0,
                                                 absl::InternalError("forged")),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("names node1")));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(joined.code(), absl::StatusCode::kUnknown) << "the job failed on a refused report";

  // node1's own daemon reports: the job fails, node0's Join ends with the failure at once.
  daemon::FailureReporterOptions own = impostor;
  own.node_name = "node1";
  const absl::Time reported = absl::Now();
  absl::StatusOr<bool> reported_now = daemon::FailureReporter::ReportNow(
      own, {"victim", "r1"}, -1,
      absl::PermissionDeniedError("this gravacd does not serve job 'victim'"));
  EXPECT_THAT(reported_now, IsOk());
  EXPECT_TRUE(reported_now.value_or(false));
  join.join();
  EXPECT_EQ(joined.code(), absl::StatusCode::kAborted) << joined;
  EXPECT_THAT(joined.message(),
              HasSubstr("job 'victim' run 'r1' failed on node 'node1': this gravacd does not "
                        "serve job 'victim'"));
  EXPECT_LT(join_returned - reported, absl::Seconds(5));
  bool failed = true;
  EXPECT_TRUE(CallFailJob(as_node0.get(), "victim", "node0", &failed).ok());
  EXPECT_FALSE(failed);  // already failed: the first failure stays
  // The default job of the other tests is untouched.
  auto daemons = AssembleJob(server->port());
  for (auto& d : daemons) d->Shutdown();
}

TEST(ControllerTls, PlaintextClientAgainstTlsServerFailsClearly) {
  std::unique_ptr<ControllerServer> server = StartServer(false);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(CallStatus(Stub(server->port(), nullptr, /*plaintext=*/true).get()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  ControllerClientOptions o;
  o.address = absl::StrFormat("127.0.0.1:%d", server->port());
  o.security = proto::GrpcSecurity::Plaintext();
  o.join_timeout = absl::Seconds(2);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ControllerClient> plain, ControllerClient::Create(o));
  const absl::Time start = absl::Now();
  EXPECT_THAT(plain->Join(Info(0)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("this end uses plain text; a controller using the other mode")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(server->coordinator()->assembled());
}

TEST(ControllerTls, NoCredentialsAndNoPlaintextChoiceIsRefused) {
  ControllerServerOptions o;  // neither certificates nor plain text
  o.coordinator.nodes = 1;
  EXPECT_THAT(ControllerServer::Start(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--insecure_plaintext")));
  ControllerClientOptions c;
  c.address = "127.0.0.1:1";
  EXPECT_THAT(ControllerClient::Create(c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--insecure_plaintext")));
}

}  // namespace
}  // namespace gravac::controller
