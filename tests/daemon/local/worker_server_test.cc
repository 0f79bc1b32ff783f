#include "daemon/local/worker_server.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/ipc/framing.h"
#include "core/ipc/shm_abi.h"
#include "core/ipc/unix_socket.h"
#include "core/logging.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gravac/gravac.h"
#include "gravac/v1/worker.pb.h"
#include "gtest/gtest.h"
#include "tests/daemon/local/fake_engine.h"
#include "tests/daemon/local/raw_worker.h"
#include "tests/daemon/local/test_workers.h"

namespace gravac::daemon {
namespace {

using namespace ::gravac::daemon::testing;  // NOLINT
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<WorkerServer> StartServer(const TempDir& dir, int local_size,
                                          absl::Duration stall = absl::Seconds(60),
                                          Logger* log = nullptr) {
  WorkerServerOptions o;
  o.socket_path = dir.socket();
  o.local_size = local_size;
  o.stall_warning = stall;
  o.log = log;
  auto server = WorkerServer::Start(o);
  EXPECT_THAT(server, IsOk());
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(WorkerServerTest, SocketHasMode0600AndIsRemovedOnStop) {
  TempDir dir;
  auto server = StartServer(dir, 1);
  ASSERT_NE(server, nullptr);
  struct stat st;
  ASSERT_EQ(::stat(dir.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  server->Stop();
  EXPECT_NE(::stat(dir.socket().c_str(), &st), 0);
}

// The socket's mode keeps other users out; if it is widened by hand (or the socket handed on), the
// daemon still refuses a peer of another user by its SO_PEERCRED. Needs root to become another
// user; skipped otherwise.
TEST(WorkerServerTest, PeerOfAnotherUserIsRefusedEvenThroughAWidenedSocket) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a peer as another user";
  TempDir dir;
  auto server = StartServer(dir, 1);
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(dir.socket().c_str(), 0666), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    RawWorker w;
    if (!w.Connect(dir.socket()).ok()) ::_exit(11);
    (void)w.Hello(0, 1, 0, 1);
    auto reply = w.Read();
    if (!reply.ok()) ::_exit(12);
    if (reply->error().code() != static_cast<int>(absl::StatusCode::kPermissionDenied)) ::_exit(13);
    if (reply->error().message().find("uid 65534") == std::string::npos) ::_exit(14);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 setuid, 11 connect, 12 no reply, 13 code, 14 message";
  // The refused peer did not take the slot: our own worker still gets in.
  RunWorkers(dir.socket(), 1, 0, 1, [](int, gravac_context*) {});
}

TEST(WorkerServerTest, SecondDaemonOnSamePathIsRefusedAndStaleSocketReplaced) {
  TempDir dir;
  auto first = StartServer(dir, 1);
  ASSERT_NE(first, nullptr);
  WorkerServerOptions o;
  o.socket_path = dir.socket();
  EXPECT_THAT(WorkerServer::Start(o),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr(dir.socket())));
  // Stale: a listener that went away without unlinking (closed fd, file left behind).
  first.reset();
  {
    ipc::ListenOptions lo;
    lo.path = dir.socket();
    auto fd = ipc::ListenUnix(lo);
    ASSERT_THAT(fd, IsOk());
  }  // closed; the file stays
  struct stat st;
  ASSERT_EQ(::stat(dir.socket().c_str(), &st), 0);
  auto second = WorkerServer::Start(o);
  ASSERT_THAT(second, IsOk());
  RunWorkers(dir.socket(), 1, 0, 1,
             [](int, gravac_context* ctx) { EXPECT_EQ(gravac_rank(ctx), 0); });
}

TEST(WorkerServerTest, WaitForWorkersReturnsTheNodesRanks) {
  TempDir dir;
  auto server = StartServer(dir, 2);
  ASSERT_NE(server, nullptr);
  std::thread workers([&] {
    RunWorkers(dir.socket(), 2, /*first_rank=*/2, /*size=*/6, [](int, gravac_context*) {});
  });
  auto group = server->WaitForWorkers(absl::Seconds(10));
  ASSERT_THAT(group, IsOk());
  EXPECT_EQ(group->first_rank, 2);
  EXPECT_EQ(group->local_size, 2);
  EXPECT_EQ(group->world_size, 6);
  workers.join();
  EXPECT_THAT(server->WaitForShutdown(absl::Seconds(10)), IsOk());
}

TEST(WorkerServerTest, WaitForWorkersTimesOutNamingMissingLocalRanks) {
  TempDir dir;
  auto server = StartServer(dir, 3);
  ASSERT_NE(server, nullptr);
  RawWorker w;
  ASSERT_THAT(w.Connect(dir.socket()), IsOk());
  ASSERT_THAT(w.Hello(1, 3, 1, 3), IsOk());
  auto welcome = w.Read();
  ASSERT_THAT(welcome, IsOk());
  EXPECT_TRUE(welcome->has_welcome());
  EXPECT_THAT(server->WaitForWorkers(absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("[0, 2]")));
}

struct BadHello {
  const char* what;
  int rank, size, local_rank, local_size;
  const char* message;
};

TEST(WorkerServerTest, InconsistentHellosAreRefused) {
  TempDir dir;
  auto server = StartServer(dir, 2);
  ASSERT_NE(server, nullptr);
  RawWorker good;
  ASSERT_THAT(good.Connect(dir.socket()), IsOk());
  ASSERT_THAT(good.Hello(4, 8, 0, 2), IsOk());  // node holds ranks 4, 5 of 8
  ASSERT_THAT(good.Read(), IsOk());
  const BadHello cases[] = {
      {"local size", 5, 8, 1, 3, "GRAVAC_LOCAL_SIZE=3 but this daemon expects 2"},
      {"duplicate local rank", 4, 8, 0, 2, "local rank 0 is already taken"},
      {"first rank", 7, 8, 1, 2, "implies first rank 6"},
      {"world size", 5, 10, 1, 2, "world size 10 but rank 4 said 8"},
      {"rank range", 9, 8, 1, 2, "outside world size 8"},
  };
  for (const BadHello& c : cases) {
    SCOPED_TRACE(c.what);
    RawWorker w;
    ASSERT_THAT(w.Connect(dir.socket()), IsOk());
    ASSERT_THAT(w.Hello(c.rank, c.size, c.local_rank, c.local_size), IsOk());
    auto reply = w.Read();
    ASSERT_THAT(reply, IsOk());
    ASSERT_TRUE(reply->has_error());
    EXPECT_THAT(reply->error().message(), HasSubstr(c.message));
    EXPECT_THAT(w.Read(), StatusIs(absl::StatusCode::kUnavailable));  // then closed
  }
  // The refused workers did not break the node: the right rank 5 still joins.
  RawWorker five;
  ASSERT_THAT(five.Connect(dir.socket()), IsOk());
  ASSERT_THAT(five.Hello(5, 8, 1, 2), IsOk());
  auto w5 = five.Read();
  ASSERT_THAT(w5, IsOk());
  EXPECT_TRUE(w5->has_welcome());
  auto group = server->WaitForWorkers(absl::Seconds(5));
  ASSERT_THAT(group, IsOk());
  EXPECT_EQ(group->first_rank, 4);
}

TEST(WorkerServerTest, ClientSeesTheDaemonsRefusal) {
  TempDir dir;
  auto server = StartServer(dir, 2);
  ASSERT_NE(server, nullptr);
  gravac_config c = MakeConfig(dir.socket(), 0, 2, 0, 1);  // local_size 1 != 2
  gravac_context* ctx = nullptr;
  char error[512];
  EXPECT_EQ(gravac_init_with_config(&c, &ctx, error, sizeof(error)), GRAVAC_ERR_INVALID);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_THAT(std::string(error), HasSubstr("GRAVAC_LOCAL_SIZE=1 but this daemon expects 2"));
}

TEST(WorkerServerTest, HelloNamingAnotherJobIsRefusedNamingBothJobsAndTheNode) {
  TempDir dir;
  WorkerServerOptions o;
  o.socket_path = dir.socket();
  o.local_size = 2;
  o.job = {"resnet", "r1"};
  o.node_name = "n7";
  auto server = WorkerServer::Start(o);
  ASSERT_THAT(server, IsOk());
  RawWorker stranger;
  stranger.job_name = "bert";
  stranger.run_id = "r1";
  ASSERT_THAT(stranger.Join(dir.socket(), 0, 2, 0, 2), IsOk());
  auto refused = stranger.Read();
  ASSERT_THAT(refused, IsOk());
  ASSERT_TRUE(refused->has_error());
  EXPECT_EQ(refused->error().code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(refused->error().message(),
              AllOf(HasSubstr("node 'n7'"), HasSubstr("rank 0 of job 'bert' run 'r1'"),
                    HasSubstr("serving job 'resnet' run 'r1'")));
  RawWorker rerun;  // the same name with another run id is another job too
  rerun.job_name = "resnet";
  rerun.run_id = "r2";
  ASSERT_THAT(rerun.Join(dir.socket(), 0, 2, 0, 2), IsOk());
  auto again = rerun.Read();
  ASSERT_THAT(again, IsOk());
  EXPECT_TRUE(again->has_error());
  // The job's own workers, and one naming no job (a client from before job ids), are welcome.
  RawWorker own, unnamed;
  own.job_name = "resnet";
  own.run_id = "r1";
  ASSERT_THAT(own.Join(dir.socket(), 0, 2, 0, 2), IsOk());
  ASSERT_THAT(unnamed.Join(dir.socket(), 1, 2, 1, 2), IsOk());
  for (RawWorker* w : {&own, &unnamed}) {
    auto reply = w->Read();
    ASSERT_THAT(reply, IsOk());
    EXPECT_TRUE(reply->has_welcome());
  }
  EXPECT_THAT((*server)->WaitForWorkers(absl::Seconds(5)), IsOk());
}

TEST(WorkerServerTest, ServesAdoptedConnectionsWithoutASocketAndFailsThemOnRequest) {
  WorkerServerOptions o;  // no socket_path: only Adopt brings workers
  o.local_size = 1;
  o.job = {"j", "r"};
  auto server = WorkerServer::Start(o);
  ASSERT_THAT(server, IsOk());
  ipc::UniqueFd worker_end, daemon_end;
  ASSERT_THAT(ipc::SocketPair(&worker_end, &daemon_end), IsOk());
  RawWorker w;
  w.sock = std::move(worker_end);
  w.job_name = "j";
  w.run_id = "r";
  ASSERT_THAT(w.Hello(3, 4, 0, 1), IsOk());
  // What a --serve_jobs gravacd does: read the hello, then hand the connection over.
  ipc::FrameReader reader;
  absl::StatusOr<std::optional<ipc::Frame>> hello;
  do {
    ASSERT_THAT(reader.ReadSome(daemon_end.get()), IsOk());
    hello = reader.Next();
    ASSERT_THAT(hello, IsOk());
  } while (!hello->has_value());
  (*server)->Adopt(std::move(daemon_end), std::move(reader), (*hello)->payload);
  auto welcome = w.Read();
  ASSERT_THAT(welcome, IsOk());
  EXPECT_TRUE(welcome->has_welcome());
  auto group = (*server)->WaitForWorkers(absl::Seconds(5));
  ASSERT_THAT(group, IsOk());
  EXPECT_EQ(group->first_rank, 3);
  // A session that cannot start fails the job's requests with its reason.
  (*server)->Fail(absl::FailedPreconditionError("node 'n': job 'j' run 'r': ended"));
  ::gravac::v1::WorkerMessage request;
  request.mutable_request()->set_id(1);
  request.mutable_request()->set_name("t");
  ASSERT_THAT(ipc::SendFrame(w.sock.get(), request.SerializeAsString()), IsOk());
  absl::StatusOr<::gravac::v1::DaemonMessage> reply;
  do {
    reply = w.Read();
    ASSERT_THAT(reply, IsOk());
  } while (reply->has_heartbeat());
  ASSERT_TRUE(reply->has_response());
  EXPECT_EQ(reply->response().code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(reply->response().message(), HasSubstr("job 'j' run 'r': ended"));
}

TEST(WorkerServerTest, ReducesLocalWorkersIntoOneNodeTensor) {
  TempDir dir;
  auto server = StartServer(dir, 3);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(3);
  server->Serve(engine.Sink(), engine.OnFailure());
  RunWorkers(dir.socket(), 3, 0, 3, [](int lr, gravac_context* ctx) {
    std::vector<float> in(1000), out(1000, -1);
    for (int i = 0; i < 1000; ++i) in[i] = static_cast<float>(i * (lr + 1));
    const int64_t shape[] = {10, 100};
    gravac_tensor_options opts{5, 10 + lr, 0};
    gravac_request* req = nullptr;
    ASSERT_EQ(gravac_allreduce_async(ctx, "grad", in.data(), out.data(), shape, 2, GRAVAC_FLOAT32,
                                     GRAVAC_SUM, &opts, &req),
              GRAVAC_OK);
    ASSERT_EQ(gravac_wait(req), GRAVAC_OK) << gravac_request_error(req);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(out[i], static_cast<float>(i * 6)) << i;
    gravac_result_info info;
    ASSERT_EQ(gravac_result_info_get(req, &info), GRAVAC_OK);
    EXPECT_EQ(info.decision_epoch, 7);
    EXPECT_STREQ(info.collective, "dense_allreduce");
    gravac_request_free(req);
  });
  ASSERT_EQ(engine.specs().size(), 1u);
  const TensorSpec spec = engine.specs()[0];
  EXPECT_EQ(spec.name, "grad");
  EXPECT_EQ(spec.step, 5);
  EXPECT_EQ(spec.samples, 33);  // summed over the local workers
  EXPECT_THAT(spec.shape, ElementsAre(10, 100));
  EXPECT_THAT(server->WaitForShutdown(absl::Seconds(5)), IsOk());
}

TEST(WorkerServerTest, LocalMismatchFailsEveryLocalWorkerNamingRanksAndField) {
  TempDir dir;
  auto server = StartServer(dir, 2);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(2);
  server->Serve(engine.Sink(), engine.OnFailure());
  RunWorkers(dir.socket(), 2, 0, 2, [](int lr, gravac_context* ctx) {
    std::vector<float> buf(6, 1.0f);
    const int64_t shape[] = {lr == 0 ? 4 : 6};
    gravac_request* req = nullptr;
    ASSERT_EQ(gravac_allreduce_async(ctx, "w", buf.data(), buf.data(), shape, 1, GRAVAC_FLOAT32,
                                     GRAVAC_SUM, nullptr, &req),
              GRAVAC_OK);
    EXPECT_EQ(gravac_wait(req), GRAVAC_ERR_MISMATCH);
    EXPECT_THAT(std::string(gravac_request_error(req)),
                HasSubstr("tensor 'w': shape [6] on ranks 1 differs from [4] on ranks 0"));
    gravac_request_free(req);
    // dtype differs next.
    gravac_request* r2 = nullptr;
    const int64_t s2[] = {2};
    ASSERT_EQ(
        gravac_allreduce_async(ctx, "d", buf.data(), buf.data(), s2, 1,
                               lr == 0 ? GRAVAC_FLOAT32 : GRAVAC_INT32, GRAVAC_SUM, nullptr, &r2),
        GRAVAC_OK);
    EXPECT_EQ(gravac_wait(r2), GRAVAC_ERR_MISMATCH);
    EXPECT_THAT(std::string(gravac_request_error(r2)), HasSubstr("dtype"));
    gravac_request_free(r2);
  });
  // Both went to the engine marked failed (so other nodes learn of them), none to be run.
  EXPECT_TRUE(engine.names().empty());
  EXPECT_THAT(engine.local_failed(), ::testing::UnorderedElementsAre("w", "d"));
}

// Issue 19, finding 4: a tensor some local ranks never post fails the node after stall_timeout,
// naming it and the missing ranks.
TEST(WorkerServerTest, StallTimeoutFailsTheNodeNamingTensorAndMissingRanks) {
  TempDir dir;
  WorkerServerOptions o;
  o.socket_path = dir.socket();
  o.local_size = 2;
  o.stall_warning = absl::Milliseconds(100);
  o.stall_timeout = absl::Milliseconds(400);
  ASSERT_OK_AND_ASSIGN(auto server, WorkerServer::Start(o));
  FakeEngine engine(4);
  server->Serve(engine.Sink(), engine.OnFailure());
  std::atomic<bool> failed{false};
  const absl::Time start = absl::Now();
  RunWorkers(dir.socket(), 2, /*first_rank=*/2, /*size=*/4, [&](int lr, gravac_context* ctx) {
    if (lr == 1) {  // never posts; stays connected until rank 2 has its error
      for (int i = 0; i < 200 && !failed; ++i) absl::SleepFor(absl::Milliseconds(20));
      return;
    }
    float v = 1.0f;
    gravac_request* req = nullptr;
    ASSERT_EQ(gravac_allreduce_async(ctx, "lonely", &v, &v, nullptr, 0, GRAVAC_FLOAT32, GRAVAC_SUM,
                                     nullptr, &req),
              GRAVAC_OK);
    EXPECT_EQ(gravac_wait(req), GRAVAC_ERR_TIMEOUT);
    EXPECT_THAT(gravac_request_error(req),
                AllOf(HasSubstr("stall: tensor 'lonely' posted by ranks [2]"),
                      HasSubstr("missing from ranks [3]"), HasSubstr("--stall_timeout_s")));
    gravac_request_free(req);
    failed = true;
  });
  EXPECT_TRUE(failed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

// An extra collective on one rank after the other local rank shut down fails at once as a
// mismatch (no stall bound to wait for).
TEST(WorkerServerTest, TensorMissingARankThatShutDownFailsAsAMismatch) {
  TempDir dir;
  auto server = StartServer(dir, 2);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(2);
  server->Serve(engine.Sink(), engine.OnFailure());
  std::atomic<bool> shut{false};
  const absl::Time start = absl::Now();
  RunWorkers(
      dir.socket(), 2, 0, 2,
      [&](int lr, gravac_context* ctx) {
        if (lr == 1) {
          EXPECT_EQ(gravac_shutdown(ctx), GRAVAC_OK);
          shut = true;
          return;
        }
        for (int i = 0; i < 200 && !shut; ++i) absl::SleepFor(absl::Milliseconds(10));
        float v = 1.0f;
        gravac_request* req = nullptr;
        ASSERT_EQ(gravac_allreduce_async(ctx, "extra", &v, &v, nullptr, 0, GRAVAC_FLOAT32,
                                         GRAVAC_SUM, nullptr, &req),
                  GRAVAC_OK);
        EXPECT_EQ(gravac_wait(req), GRAVAC_ERR_MISMATCH);
        EXPECT_THAT(gravac_request_error(req),
                    HasSubstr("tensor 'extra' posted by ranks [0] will never complete: ranks [1] "
                              "have called gravac_shutdown"));
        gravac_request_free(req);
        gravac_shutdown(ctx);
      },
      0, /*shutdown=*/false);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(WorkerServerTest, StallWarningNamesMissingRanks) {
  TempDir dir;
  const std::string log_path = dir.file("log");
  std::FILE* sink = std::fopen(log_path.c_str(), "w");
  ASSERT_NE(sink, nullptr);
  Logger log("gravacd[test]", LogLevel::kInfo, sink);
  auto server = StartServer(dir, 2, absl::Milliseconds(200), &log);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(4);
  server->Serve(engine.Sink(), engine.OnFailure());
  std::atomic<bool> warned{false};
  RunWorkers(dir.socket(), 2, /*first_rank=*/2, /*size=*/4, [&](int lr, gravac_context* ctx) {
    float v = 1.0f;
    if (lr == 1) {
      // Rank 3 posts late: wait (bounded) until the warning is written.
      for (int i = 0; i < 100 && !warned; ++i) {
        std::fflush(sink);
        if (ReadFile(log_path).find("stall") != std::string::npos) warned = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    gravac_request* req = nullptr;
    ASSERT_EQ(gravac_allreduce_async(ctx, "late", &v, &v, nullptr, 0, GRAVAC_FLOAT32, GRAVAC_SUM,
                                     nullptr, &req),
              GRAVAC_OK);
    EXPECT_EQ(gravac_wait(req), GRAVAC_OK);
    EXPECT_EQ(v, 2.0f);
    gravac_request_free(req);
  });
  std::fflush(sink);
  const std::string text = ReadFile(log_path);
  EXPECT_TRUE(warned);
  EXPECT_THAT(text, AllOf(HasSubstr("stall: tensor 'late' posted by ranks [2]"),
                          HasSubstr("missing from ranks [3]")));
  server->Stop();
  std::fclose(sink);
}

TEST(WorkerServerTest, DeadWorkerFailsTheOthersAndReportsItsRank) {
  TempDir dir;
  auto server = StartServer(dir, 2);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(2);
  server->Serve(engine.Sink(), engine.OnFailure());
  auto raw = std::make_unique<RawWorker>();
  ASSERT_THAT(raw->Connect(dir.socket()), IsOk());
  ASSERT_THAT(raw->Hello(1, 2, 1, 2), IsOk());
  ASSERT_THAT(raw->Read(), IsOk());
  gravac_config c = MakeConfig(dir.socket(), 0, 2, 0, 2);
  gravac_context* ctx = nullptr;
  ASSERT_EQ(gravac_init_with_config(&c, &ctx, nullptr, 0), GRAVAC_OK);
  float v = 1.0f;
  gravac_request* req = nullptr;
  ASSERT_EQ(gravac_allreduce_async(ctx, "t", &v, &v, nullptr, 0, GRAVAC_FLOAT32, GRAVAC_SUM,
                                   nullptr, &req),
            GRAVAC_OK);
  raw.reset();  // rank 1 dies: socket closed without Shutdown
  EXPECT_EQ(gravac_wait(req), GRAVAC_ERR_UNAVAILABLE);
  EXPECT_THAT(std::string(gravac_request_error(req)), HasSubstr("worker rank 1 (local rank 1"));
  gravac_request_free(req);
  // Later requests fail at once with the same message.
  ASSERT_EQ(gravac_allreduce_async(ctx, "u", &v, &v, nullptr, 0, GRAVAC_FLOAT32, GRAVAC_SUM,
                                   nullptr, &req),
            GRAVAC_OK);
  EXPECT_EQ(gravac_wait(req), GRAVAC_ERR_UNAVAILABLE);
  EXPECT_THAT(std::string(gravac_request_error(req)), HasSubstr("worker rank 1"));
  gravac_request_free(req);
  EXPECT_EQ(gravac_shutdown(ctx), GRAVAC_OK);
  ASSERT_EQ(engine.failures().size(), 1u);
  EXPECT_THAT(engine.failures()[0],
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker rank 1")));
  EXPECT_THAT(server->WaitForShutdown(absl::Seconds(5)), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(WorkerServerTest, RequestsBeforeServeAreDeliveredOnServe) {
  TempDir dir;
  auto server = StartServer(dir, 1);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(1);
  gravac_config c = MakeConfig(dir.socket(), 0, 1, 0, 1);
  gravac_context* ctx = nullptr;
  ASSERT_EQ(gravac_init_with_config(&c, &ctx, nullptr, 0), GRAVAC_OK);
  double v = 2.5;
  gravac_request* req = nullptr;
  ASSERT_EQ(gravac_allreduce_async(ctx, "early", &v, &v, nullptr, 0, GRAVAC_FLOAT64, GRAVAC_SUM,
                                   nullptr, &req),
            GRAVAC_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int done = 1;
  ASSERT_EQ(gravac_poll(req, &done), GRAVAC_OK);
  EXPECT_EQ(done, 0);
  EXPECT_TRUE(engine.names().empty());
  server->Serve(engine.Sink(), engine.OnFailure());
  EXPECT_EQ(gravac_wait(req), GRAVAC_OK);
  EXPECT_EQ(v, 2.5);
  EXPECT_THAT(engine.names(), ElementsAre("early"));
  gravac_request_free(req);
  EXPECT_EQ(gravac_shutdown(ctx), GRAVAC_OK);
}

TEST(WorkerServerTest, StopFailsPendingRequests) {
  TempDir dir;
  auto server = StartServer(dir, 2);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(2);
  server->Serve(engine.Sink(), engine.OnFailure());
  gravac_config c = MakeConfig(dir.socket(), 0, 2, 0, 2);
  gravac_context* ctx = nullptr;
  ASSERT_EQ(gravac_init_with_config(&c, &ctx, nullptr, 0), GRAVAC_OK);
  float v = 1;
  gravac_request* req = nullptr;
  ASSERT_EQ(gravac_allreduce_async(ctx, "x", &v, &v, nullptr, 0, GRAVAC_FLOAT32, GRAVAC_SUM,
                                   nullptr, &req),
            GRAVAC_OK);
  server->Stop();
  const gravac_status s = gravac_wait(req);
  EXPECT_TRUE(s == GRAVAC_ERR_SHUTDOWN || s == GRAVAC_ERR_UNAVAILABLE) << gravac_status_string(s);
  gravac_request_free(req);
  gravac_shutdown(ctx);  // the daemon is gone: an error, but ctx is freed
}

}  // namespace
}  // namespace gravac::daemon
