// ControllerClient against a real gravac.v1.Controller server (ControllerServer on 127.0.0.1:0):
// join, stats in, decisions out; join errors and timeouts; a controller restart mid-run where the
// clients keep their last decision, re-join and follow the new controller's epochs; the stats
// queue's bound while the controller is away; bounded shutdown.
#include "daemon/control/controller_client.h"

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "controller/controller_service.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "core/testing/status_matchers.h"
#include "core/testing/step_stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/metrics_text.h"

namespace gravac::daemon {
namespace {

using ::gravac::controller::ControllerServer;
using ::gravac::controller::ControllerServerOptions;
using ::testing::ElementsAre;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Polls `done` every 5 ms for at most `timeout`.
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

// Both ends log to stderr, so a failing run shows its timeline.
Logger* TestLog() {
  static Logger* log = new Logger("test", LogLevel::kInfo);
  return log;
}

// Plain text, chosen explicitly: these tests are about joining, decisions, statistics and
// reconnects; mutual TLS and node identities have their own test (controller_tls_test).
ControllerServerOptions ServerOptions(int nodes, std::string listen = "127.0.0.1:0") {
  ControllerServerOptions o;
  o.security = proto::GrpcSecurity::Plaintext();
  o.coordinator.log = TestLog();
  o.listen = std::move(listen);
  o.coordinator.nodes = nodes;
  o.coordinator.policy.theta_min = 10;
  o.coordinator.policy.theta_max = 80;
  o.coordinator.policy.window = 2;
  o.coordinator.policy.eval_steps = 4;
  o.coordinator.policy.alpha = 0.0;
  o.coordinator.policy.epsilon = 0.5;
  o.coordinator.policy.omega = 0.001;
  o.coordinator.compressor = "dgc";
  o.coordinator.sparse_values = "bf16";
  o.coordinator.job_seed = 42;
  o.coordinator.join_timeout = absl::Seconds(30);
  o.shutdown_grace = absl::Milliseconds(200);
  return o;
}

std::unique_ptr<ControllerClient> Client(int port, absl::Duration join_timeout = absl::Seconds(20),
                                         size_t queue = 4096, DaemonMetrics* metrics = nullptr,
                                         const Clock* clock = nullptr) {
  ControllerClientOptions o;
  o.security = proto::GrpcSecurity::Plaintext();
  o.address = absl::StrFormat("127.0.0.1:%d", port);
  o.log = TestLog();
  o.join_timeout = join_timeout;
  o.reconnect_initial = absl::Milliseconds(20);
  o.reconnect_max = absl::Milliseconds(200);
  o.stats_queue_capacity = queue;
  o.stats_batch_size = 4;
  o.shutdown_timeout = absl::Seconds(1);
  o.metrics = metrics;
  o.clock = clock;
  auto c = ControllerClient::Create(o);
  EXPECT_THAT(c, IsOk());
  return std::move(c).value();
}

JoinInfo Info(int node, int world_nodes) {
  return {absl::StrFormat("node-%d", node), 2 * node, 2, 2 * world_nodes,
          absl::StrFormat("ucx-address-of-node-%d", node)};
}

// Joins every client from its own thread (Join blocks until all joined).
std::vector<absl::StatusOr<JoinResult>> JoinAll(std::vector<ControllerClient*> clients,
                                                std::vector<JoinInfo> infos) {
  std::vector<absl::StatusOr<JoinResult>> results(clients.size(), absl::UnknownError("not joined"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < clients.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = clients[i]->Join(infos[i]); });
  }
  for (auto& t : threads) t.join();
  return results;
}

// The join results of a fresh 2-node job whose node 0 joins with Info(0, 2) and node 1 with
// `second`, both at once.
std::vector<absl::StatusOr<JoinResult>> JoinPairWith(const JoinInfo& second) {
  auto server = ControllerServer::Start(ServerOptions(2));
  if (!server.ok()) return {server.status(), server.status()};
  auto c0 = Client((*server)->port());
  auto c1 = Client((*server)->port());
  return JoinAll({c0.get(), c1.get()}, {Info(0, 2), second});
}

// One step of node `node` under the decision it holds (gain 0.9 at every θ: above ε).
NodeStepStats Step(int node, int64_t step, const JobDecision& d) {
  return ::gravac::testing::StepUnder(
      d, node, step,
      {.n_g = 1.0, .n_min = 0.9, .n_c = 0.9, .step_seconds = 0.01 + 0.1 / d.theta, .samples = 16,
       .bytes_sent = static_cast<int64_t>(4000 / d.theta), .bytes_dense = 4000});
}

TEST(ControllerClient, CreateNeedsAnAddress) {
  EXPECT_THAT(ControllerClient::Create({}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("address")));
}

TEST(ControllerClient, JoinStatsInDecisionsOut) {
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(ServerOptions(2)));
  auto c0 = Client(server->port());
  auto c1 = Client(server->port());
  EXPECT_EQ(c0->Newest().epoch, 0);
  auto joined = JoinAll({c1.get(), c0.get()}, {Info(1, 2), Info(0, 2)});
  ASSERT_THAT(joined[0], IsOk());
  ASSERT_THAT(joined[1], IsOk());
  const JoinResult& r1 = *joined[0];
  EXPECT_EQ(joined[1]->node_rank, 0);
  EXPECT_EQ(r1.node_rank, 1);
  ASSERT_EQ(r1.layout.size(), 2u);
  EXPECT_EQ(r1.layout[1].first_rank, 2);
  EXPECT_EQ(r1.layout[1].local_count, 2);
  EXPECT_THAT(r1.transport_addresses,
              ElementsAre("ucx-address-of-node-0", "ucx-address-of-node-1"));
  EXPECT_EQ(r1.job.compressor, "dgc");
  EXPECT_EQ(r1.job.sparse_values, "bf16");  // through the Join response
  EXPECT_EQ(r1.job.theta_max, 80);
  EXPECT_EQ(r1.job.job_seed, 42u);
  EXPECT_EQ(c1->Newest().theta, 10);
  EXPECT_EQ(c1->Newest().phase, "warmup");

  c0->Start();
  c1->Start();
  // Each step runs under the decision the nodes agree on, the smaller epoch of the two they hold
  // (invariant 1, as the engines' negotiation does); the controller combines their reports.
  constexpr int kSteps = 40;
  for (int64_t step = 0; step < kSteps; ++step) {
    const JobDecision d0 = c0->Newest(), d1 = c1->Newest();
    const JobDecision& agreed = d0.epoch <= d1.epoch ? d0 : d1;
    c0->Report(Step(0, step, agreed));
    c1->Report(Step(1, step, agreed));
    // A daemon moves on without waiting; give the decisions a moment to come back now and then.
    if (step % 4 == 3) {
      WaitFor([&] {
        return server->coordinator()->Status().last_step == step &&
               c0->Newest().epoch == server->coordinator()->Current().epoch &&
               c1->Newest().epoch == server->coordinator()->Current().epoch;
      });
    }
  }
  ASSERT_TRUE(WaitFor([&] { return server->coordinator()->Status().last_step == kSteps - 1; }));
  const auto status = server->coordinator()->Status();
  EXPECT_EQ(status.steps_observed, kSteps);  // the nodes agree on every step's θ
  EXPECT_GE(status.decision.epoch, 3);
  EXPECT_GT(status.bytes_dense, status.bytes_sent);
  EXPECT_TRUE(WaitFor([&] {
    return c0->Newest().epoch == server->coordinator()->Current().epoch &&
           c1->Newest().epoch == server->coordinator()->Current().epoch;
  }));
  EXPECT_EQ(c0->Newest().theta, server->coordinator()->Current().theta);
  EXPECT_EQ(c0->sent_stats(), kSteps);
  EXPECT_EQ(c0->dropped_stats(), 0);

  const absl::Time t0 = absl::Now();
  c0->Shutdown();
  c1->Shutdown();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3));
}

// gravac_controller_connected follows the decision stream; every decision read counts.
TEST(ControllerClient, MetricsFollowTheDecisionStream) {
  prometheus::Registry registry;
  ASSERT_OK_AND_ASSIGN(auto metrics, DaemonMetrics::Create(registry, "node-0", 2));
  auto value = [&](const char* name) {
    return testing::SeriesValue(SerializeMetrics(registry), name, {{"node", "node-0"}});
  };
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(ServerOptions(1)));
  auto c = Client(server->port(), absl::Seconds(20), 4096, metrics.get());
  ASSERT_THAT(c->Join(Info(0, 1)), IsOk());
  EXPECT_EQ(value("gravac_controller_connected"), 0);  // no stream before Start
  c->Start();
  // The stream opens with the decision in force.
  EXPECT_TRUE(WaitFor([&] { return value("gravac_controller_connected") == 1; }));
  EXPECT_TRUE(WaitFor([&] { return value("gravac_decisions_received_total") >= 1; }));
  for (int64_t step = 0; step < 40 && c->Newest().epoch < 2; ++step) {
    c->Report(Step(0, step, c->Newest()));
    WaitFor([&] { return server->coordinator()->Status().last_step == step; }, absl::Seconds(5));
  }
  ASSERT_TRUE(WaitFor([&] { return c->Newest().epoch >= 2; }));
  EXPECT_GE(value("gravac_decisions_received_total"), 3);  // epochs 0, 1, 2
  server->Shutdown();  // the stream ends: disconnected while the client reconnects
  EXPECT_TRUE(WaitFor([&] { return value("gravac_controller_connected") == 0; }));
  c->Shutdown();
  EXPECT_EQ(value("gravac_controller_connected"), 0);
}

TEST(ControllerClient, InconsistentJoinFailsEveryDaemonWithTheReason) {
  JoinInfo bad = Info(1, 2);
  bad.world_size = 6;
  auto joined = JoinPairWith(bad);
  ASSERT_EQ(joined.size(), 2u);
  for (const auto& r : joined) {
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world_size disagrees")));
  }
}

// A daemon of an older build (no data-plane protocol in its JoinRequest) and one of this build
// never form a job: both joins fail at start-up with both versions named.
TEST(ControllerClient, DaemonsOfDifferentBuildsFailTheJoin) {
  JoinInfo older = Info(1, 2);
  older.data_plane_protocol = 0;
  EXPECT_EQ(Info(0, 2).data_plane_protocol, kDataPlaneProtocol);
  auto joined = JoinPairWith(older);
  ASSERT_EQ(joined.size(), 2u);
  for (const auto& r : joined) {
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition,
                            AllOf(HasSubstr("different gravac builds"),
                                  HasSubstr(absl::StrFormat("protocol %d", kDataPlaneProtocol)),
                                  HasSubstr("protocol 0"))));
  }
}

TEST(ControllerClient, JoinTimesOutAndTheControllerForgetsTheJoiner) {
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(ServerOptions(2)));
  auto c0 = Client(server->port(), absl::Milliseconds(500));
  const absl::Time t0 = absl::Now();
  EXPECT_THAT(c0->Join(Info(0, 2)), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3));
  EXPECT_TRUE(WaitFor([&] { return server->coordinator()->Status().joined_nodes == 0; }));
}

TEST(ControllerClient, ShutdownFromAnotherThreadCancelsABlockingJoin) {
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(ServerOptions(2)));
  auto c0 = Client(server->port());
  absl::StatusOr<JoinResult> result = absl::UnknownError("not joined");
  std::thread joiner([&] { result = c0->Join(Info(0, 2)); });
  ASSERT_TRUE(WaitFor([&] { return server->coordinator()->Status().joined_nodes == 1; }));
  const absl::Time t0 = absl::Now();
  c0->Shutdown();
  joiner.join();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3));
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kCancelled));
  // The controller forgets the cancelled joiner.
  EXPECT_TRUE(WaitFor([&] { return server->coordinator()->Status().joined_nodes == 0; }));
}

TEST(ControllerClient, JoinWaitsForAControllerThatStartsLater) {
  // Pick a free port, release it, and start the controller there after the daemons began joining.
  int port = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto probe, ControllerServer::Start(ServerOptions(1)));
    port = probe->port();
  }
  auto c0 = Client(port);
  absl::StatusOr<JoinResult> result = absl::UnknownError("not joined");
  std::thread joiner([&] { result = c0->Join(Info(0, 1)); });
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(
                                        ServerOptions(1, absl::StrFormat("127.0.0.1:%d", port))));
  joiner.join();
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->node_rank, 0);
}

TEST(ControllerClient, ControllerRestartKeepsDecisionsAndRejoins) {
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(ServerOptions(2)));
  const int port = server->port();
  auto c0 = Client(port, absl::Seconds(20), /*queue=*/16);
  auto c1 = Client(port, absl::Seconds(20), /*queue=*/16);
  auto joined = JoinAll({c0.get(), c1.get()}, {Info(0, 2), Info(1, 2)});
  ASSERT_THAT(joined[0], IsOk());
  ASSERT_THAT(joined[1], IsOk());
  c0->Start();
  c1->Start();
  int64_t step = 0;
  auto report = [&](int64_t steps) {
    for (int64_t end = step + steps; step < end; ++step) {
      c0->Report(Step(0, step, c0->Newest()));
      c1->Report(Step(1, step, c1->Newest()));
    }
  };
  // Run until the first controller has made a few decisions.
  while (server->coordinator()->Current().epoch < 2 && step < 200) {
    report(1);
    WaitFor([&] { return server->coordinator()->Status().last_step == step - 1; },
            absl::Seconds(5));
  }
  ASSERT_TRUE(WaitFor([&] {
    const int64_t e = server->coordinator()->Current().epoch;
    return e >= 2 && c0->Newest().epoch == e && c1->Newest().epoch == e;
  }));
  const JobDecision before = c0->Newest();

  // The controller goes away: the daemons keep their decision and keep training.
  server->Shutdown();
  server.reset();
  report(40);  // more than the queue holds: the oldest entries are dropped
  EXPECT_EQ(c0->Newest().epoch, before.epoch);
  EXPECT_EQ(c0->Newest().theta, before.theta);
  EXPECT_EQ(c1->Newest().epoch, before.epoch);
  EXPECT_GT(c0->dropped_stats(), 0);

  // A new controller on the same port: the daemons re-join and it continues the epochs above the
  // highest one they hold (epoch before + 1 first; the queued steps may move it on at once).
  ASSERT_OK_AND_ASSIGN(
      server, ControllerServer::Start(ServerOptions(2, absl::StrFormat("127.0.0.1:%d", port))));
  ASSERT_TRUE(WaitFor([&] { return server->coordinator()->assembled(); }));
  EXPECT_EQ(server->coordinator()->Status().epoch_base, before.epoch);
  EXPECT_GT(server->coordinator()->Current().epoch, before.epoch);
  ASSERT_TRUE(WaitFor([&] {
    const int64_t e = server->coordinator()->Current().epoch;
    return c0->Newest().epoch == e && c1->Newest().epoch == e;
  })) << "epochs: client0 "
      << c0->Newest().epoch << " client1 " << c1->Newest().epoch << " controller "
      << server->coordinator()->Current().epoch;
  EXPECT_GE(c0->reconnects(), 1);
  EXPECT_GE(c1->reconnects(), 1);

  // Training goes on under the new controller: new steps are observed and decisions follow.
  const int64_t observed = server->coordinator()->Status().steps_observed;
  const int64_t epoch = server->coordinator()->Current().epoch;
  for (int i = 0; i < 40 && server->coordinator()->Current().epoch == epoch; ++i) {
    report(1);
    WaitFor([&] { return server->coordinator()->Status().last_step == step - 1; },
            absl::Seconds(5));
  }
  EXPECT_GT(server->coordinator()->Status().steps_observed, observed);
  EXPECT_GT(server->coordinator()->Current().epoch, epoch);
  EXPECT_TRUE(WaitFor([&] {
    const int64_t e = server->coordinator()->Current().epoch;
    return c0->Newest().epoch == e && c1->Newest().epoch == e;
  }));
  c0->Shutdown();
  c1->Shutdown();
}

// Idle daemons ping the controller; gRPC's server default (pings at most every 5 minutes without
// data, then GOAWAY "too_many_pings" at the third) dropped them after a few pings. The production
// intervals (daemons every 10 s, server minimum 5 s) scaled down 10x: pings every 1 s against a
// 500 ms minimum; without the server's setting the third ping at 3 s would end the connection,
// so nothing may reconnect within 4.5 s.
TEST(ControllerClient, IdleDaemonsSurviveKeepalivePings) {
  ControllerServerOptions server_options = ServerOptions(2);
  server_options.min_ping_interval = absl::Milliseconds(500);
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(server_options));
  std::vector<std::unique_ptr<ControllerClient>> clients;
  for (int i = 0; i < 2; ++i) {
    ControllerClientOptions o;
    o.security = proto::GrpcSecurity::Plaintext();
    o.address = absl::StrFormat("127.0.0.1:%d", server->port());
    o.log = TestLog();
    o.keepalive_time = absl::Seconds(1);
    ASSERT_OK_AND_ASSIGN(auto c, ControllerClient::Create(o));
    clients.push_back(std::move(c));
  }
  auto joined = JoinAll({clients[0].get(), clients[1].get()}, {Info(0, 2), Info(1, 2)});
  ASSERT_THAT(joined[0], IsOk());
  ASSERT_THAT(joined[1], IsOk());
  for (auto& c : clients) c->Start();
  absl::SleepFor(absl::Milliseconds(4500));
  for (auto& c : clients) {
    EXPECT_EQ(c->reconnects(), 0);
    c->Shutdown();
  }
}

TEST(ControllerClient, DelayHookDeliversLaterToOneNode) {
  ControllerServerOptions o = ServerOptions(2);
  o.coordinator.decision_delay = {{1, absl::Milliseconds(400)}};
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(o));
  auto c0 = Client(server->port());
  auto c1 = Client(server->port());
  auto joined = JoinAll({c0.get(), c1.get()}, {Info(0, 2), Info(1, 2)});
  ASSERT_THAT(joined[0], IsOk());
  ASSERT_THAT(joined[1], IsOk());
  c0->Start();
  c1->Start();
  // Warm-up (2 steps) ends after step 1: epoch 1.
  for (int64_t step = 0; step < 2; ++step) {
    c0->Report(Step(0, step, c0->Newest()));
    c1->Report(Step(1, step, c1->Newest()));
  }
  ASSERT_TRUE(WaitFor([&] { return c0->Newest().epoch == 1; }));
  const absl::Time seen0 = absl::Now();
  EXPECT_EQ(c1->Newest().epoch, 0);
  ASSERT_TRUE(WaitFor([&] { return c1->Newest().epoch == 1; }));
  EXPECT_GE(absl::Now() - seen0, absl::Milliseconds(250));
}

// Queued stats that cannot be sent hold Shutdown for shutdown_timeout (1 s) of the client's
// clock, not less, and not longer.
TEST(ControllerClient, ShutdownIsBoundedWhenTheControllerIsGone) {
  ManualClock clock;
  ASSERT_OK_AND_ASSIGN(auto server, ControllerServer::Start(ServerOptions(1)));
  auto c0 = Client(server->port(), absl::Seconds(20), 4096, nullptr, &clock);
  ASSERT_THAT(c0->Join(Info(0, 1)), IsOk());
  c0->Start();
  server->Shutdown();
  for (int64_t step = 0; step < 100; ++step) c0->Report(Step(0, step, c0->Newest()));
  absl::Notification stopped;
  std::thread stopper([&] {
    c0->Shutdown();
    stopped.Notify();
  });
  EXPECT_FALSE(stopped.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  absl::Duration moved;
  while (!stopped.HasBeenNotified() && moved < absl::Seconds(20)) {
    clock.Advance(absl::Milliseconds(50));
    moved += absl::Milliseconds(50);
    stopped.WaitForNotificationWithTimeout(absl::Milliseconds(5));
  }
  stopper.join();
  EXPECT_GE(moved, absl::Seconds(1));
  EXPECT_LT(moved, absl::Seconds(20));
  EXPECT_LT(c0->sent_stats(), 100);
}

}  // namespace
}  // namespace gravac::daemon
