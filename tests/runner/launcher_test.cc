// RunJob with stand-in controller and daemon scripts (they write the port file / create the socket
// path and wait) and shell commands as workers: environment per rank, output prefixes, exit-code
// propagation, quick teardown after a failure, start-up failures.
#include "runner/launcher.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runner/fake_job.h"

namespace gravac::runner {
namespace {

// `text` as a literal in a POSIX extended regular expression.
std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view(".[]()*+?{}|^$\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(job_, FakeJob::Create());
    out_fd_ = open(job_.Path("out.txt").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0600);
    err_fd_ = open(job_.Path("err.txt").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0600);
    ASSERT_GE(out_fd_, 0);
    ASSERT_GE(err_fd_, 0);
  }
  void TearDown() override {
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }

  RunnerOptions Options(int np, int nodes, std::vector<std::string> command) {
    RunnerOptions o = job_.Options();
    o.np = np;
    o.nodes = nodes;
    o.command = std::move(command);
    return o;
  }
  absl::StatusOr<int> Run(const RunnerOptions& o) { return RunJob(o, {out_fd_, err_fd_}); }
  std::string Out() { return job_.Read("out.txt"); }
  std::string Err() { return job_.Read("err.txt"); }

  FakeJob job_;
  int out_fd_ = -1;
  int err_fd_ = -1;
};

TEST_F(LauncherTest, EveryRankGetsItsEnvironmentAndPrefix) {
  RunnerOptions o =
      Options(5, 2,
              {"sh", "-c",
               "echo env $GRAVAC_RANK $GRAVAC_SIZE $GRAVAC_LOCAL_RANK $GRAVAC_LOCAL_SIZE "
               "$GRAVAC_NODE_RANK $GRAVAC_DAEMON_SOCKET $GRAVAC_CONTROLLER; echo oops >&2"});
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 0) << Err();
  const std::string out = Out();
  const std::string sock0 = job_.RunDirPath("gravacd-0.sock");
  const std::string sock1 = job_.RunDirPath("gravacd-1.sock");
  const std::string ctl = absl::StrCat("127.0.0.1:", FakeJob::kPort);
  EXPECT_THAT(out, HasSubstr(absl::StrCat("[rank 0] env 0 5 0 3 0 ", sock0, " ", ctl, "\n")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("[rank 1] env 1 5 1 3 0 ", sock0, " ", ctl, "\n")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("[rank 2] env 2 5 2 3 0 ", sock0, " ", ctl, "\n")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("[rank 3] env 3 5 0 2 1 ", sock1, " ", ctl, "\n")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("[rank 4] env 4 5 1 2 1 ", sock1, " ", ctl, "\n")));
  const std::string err = Err();
  for (int r = 0; r < 5; ++r) EXPECT_THAT(err, HasSubstr(absl::StrCat("[rank ", r, "] oops\n")));
  EXPECT_THAT(err, HasSubstr("controller listening on " + ctl));
}

TEST_F(LauncherTest, NodeModeStartsOnlyThatNodesWorkersWithTheGivenSocket) {
  // 5 ranks on 2 nodes: node 1 holds ranks 3 and 4. Neither controller nor daemon is started
  // (their paths are cleared: RunJob must not need them).
  RunnerOptions o =
      Options(5, 2,
              {"sh", "-c",
               "echo env $GRAVAC_RANK $GRAVAC_SIZE $GRAVAC_LOCAL_RANK $GRAVAC_LOCAL_SIZE "
               "$GRAVAC_NODE_RANK $GRAVAC_DAEMON_SOCKET ${GRAVAC_CONTROLLER-unset}"});
  o.node = 1;
  o.daemon_socket = "/run/gravac/gravacd.sock";
  o.gravacd_path.clear();
  o.controller_path.clear();
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 0) << Err();
  const std::string out = Out();
  EXPECT_THAT(out, HasSubstr("[rank 3] env 3 5 0 2 1 /run/gravac/gravacd.sock unset\n"));
  EXPECT_THAT(out, HasSubstr("[rank 4] env 4 5 1 2 1 /run/gravac/gravacd.sock unset\n"));
  EXPECT_THAT(out, Not(HasSubstr("[rank 0]")));
  EXPECT_THAT(Err(), Not(HasSubstr("controller listening")));

  o.controller = "gravac-controller:7460";
  o.command = {"sh", "-c",
               "echo ctl $GRAVAC_CONTROLLER; if [ $GRAVAC_RANK = 4 ]; then sleep 0.5; exit 6; fi; "
               "exec sleep 100"};
  ASSERT_OK_AND_ASSIGN(rc, Run(o));
  EXPECT_EQ(rc, 6);  // the first failure stops the node's other worker
  EXPECT_THAT(Out(), HasSubstr("[rank 3] ctl gravac-controller:7460\n"));
}

TEST_F(LauncherTest, DaemonsAndControllerGetTheirFlagsAndPrefixes) {
  RunnerOptions o = Options(3, 2, {"true"});
  o.controller_args = {"--window=5"};
  o.daemon_args = {"--step_log=" + job_.Path("steps"), "--tag={node}"};
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 0) << Err();
  const std::string out = Out();
  // The job's certificates: one private directory, the controller's, each node's own.
  const std::string tls = "/tmp/gravacrun-tls-[A-Za-z0-9]+/";
  EXPECT_THAT(
      out, ContainsRegex(absl::StrCat(
               "\\[controller\\] controller --listen=127\\.0\\.0\\.1:0 --port_file=",
               Escape(job_.RunDirPath("controller.port")), " --nodes=2 --tls_cert=", tls,
               "controller\\.crt --tls_key=", tls, "controller\\.key --tls_ca=", tls,
               "ca\\.crt --metrics_address=127\\.0\\.0\\.1:0 --metrics_port_file=",
               Escape(job_.RunDirPath("controller.metrics.port")), " --window=5\n")));
  EXPECT_THAT(out,
              ContainsRegex(absl::StrCat(
                  "\\[gravacd 0\\] daemon --controller=127\\.0\\.0\\.1:", FakeJob::kPort,
                  " --socket=", Escape(job_.RunDirPath("gravacd-0.sock")),
                  " --local_size=2 --node_name=node0 --node_rank=0 --nodes=2 --tls_cert=", tls,
                  "node-0\\.crt --tls_key=", tls, "node-0\\.key --tls_ca=", tls,
                  "ca\\.crt --metrics_address=127\\.0\\.0\\.1:0 --metrics_port_file=",
                  Escape(job_.RunDirPath("gravacd-0.metrics.port")),
                  " --step_log=", Escape(job_.Path("steps")), "\\.0 --tag=0\n")));
  EXPECT_THAT(out, ContainsRegex(absl::StrCat(
                       "--local_size=1 --node_name=node1 --node_rank=1 --nodes=2 --tls_cert=", tls,
                       "node-1\\.crt --tls_key=", tls, "node-1\\.key --tls_ca=", tls,
                       "ca\\.crt --metrics_address=127\\.0\\.0\\.1:0 --metrics_port_file=",
                       Escape(job_.RunDirPath("gravacd-1.metrics.port")),
                       " --step_log=", Escape(job_.Path("steps")), "\\.1 --tag=1\n")));
}

// The keys are mode 0600 in a private directory (0700) that is gone after the job; the workers
// hold gravacctl's client certificate.
TEST_F(LauncherTest, JobCertificatesArePrivateAndRemovedAtTheEnd) {
  RunnerOptions o = Options(
      2, 2,
      {"sh", "-c",
       "d=$(dirname $GRAVAC_TLS_KEY); echo tls $GRAVAC_RANK $d $(stat -c %a $d) "
       "$(stat -c %a $GRAVAC_TLS_KEY $d/controller.key $d/node-0.key $d/node-1.key) "
       "$(basename $GRAVAC_TLS_CERT) $(basename $GRAVAC_TLS_CA) "
       "$(openssl x509 -noout -subject -in $d/node-1.crt | tr -d ' ')"});
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 0) << Err();
  const std::string out = Out();
  EXPECT_THAT(out, ContainsRegex("\\[rank 1\\] tls 1 /tmp/gravacrun-tls-[A-Za-z0-9]+ 700 600 600 "
                                 "600 600 client\\.crt ca\\.crt subject=CN=node1\n"));
  const size_t at = out.find("/tmp/gravacrun-tls-");
  ASSERT_NE(at, std::string::npos);
  const std::string dir = out.substr(at, out.find(' ', at) - at);
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

TEST_F(LauncherTest, PrintsWhereEveryProcessServesMetrics) {
  ASSERT_OK_AND_ASSIGN(int rc, Run(Options(3, 2, {"true"})));
  EXPECT_EQ(rc, 0) << Err();
  const std::string err = Err();
  EXPECT_THAT(err, HasSubstr(absl::StrCat("gravacrun: metrics: controller http://127.0.0.1:",
                                          FakeJob::kMetricsPort, "/metrics\n")));
  EXPECT_THAT(err, HasSubstr(absl::StrCat("gravacrun: metrics: node 0 (node0) http://127.0.0.1:",
                                          FakeJob::kDaemonMetricsPort, "/metrics\n")));
  EXPECT_THAT(err, HasSubstr(absl::StrCat("gravacrun: metrics: node 1 (node1) http://127.0.0.1:",
                                          FakeJob::kDaemonMetricsPort + 1, "/metrics\n")));
}

TEST_F(LauncherTest, MetricsOffPassesOffToEveryProcessAndPrintsNoAddress) {
  RunnerOptions o = Options(2, 2, {"true"});
  o.metrics = false;
  o.metrics_sd_file = job_.Path("targets.json");
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 0) << Err();
  const std::string out = Out();
  EXPECT_THAT(out, ContainsRegex(" --nodes=2 --tls_cert=[^ ]+controller.crt --tls_key=[^ ]+ "
                                 "--tls_ca=[^ ]+ --metrics_address=off\n"));
  EXPECT_THAT(out, ContainsRegex("--node_rank=0 --nodes=2 --tls_cert=[^ ]+node-0.crt "
                                 "--tls_key=[^ ]+ --tls_ca=[^ ]+ --metrics_address=off\n"));
  EXPECT_THAT(out, ContainsRegex("--node_rank=1 --nodes=2 --tls_cert=[^ ]+node-1.crt "
                                 "--tls_key=[^ ]+ --tls_ca=[^ ]+ --metrics_address=off\n"));
  EXPECT_THAT(out, Not(HasSubstr("--metrics_port_file")));
  EXPECT_THAT(Err(), Not(HasSubstr("metrics: ")));
  EXPECT_FALSE(std::filesystem::exists(job_.Path("targets.json")));
}

TEST_F(LauncherTest, SdFileListsTheTargetsWhileTheJobRunsAndIsEmptiedAfterSuccess) {
  RunnerOptions o = Options(2, 2, {});
  o.metrics_sd_file = job_.Path("targets.json");
  o.command = {"sh", "-c",
               absl::StrCat("cp ", o.metrics_sd_file, " ", job_.Path("during.$GRAVAC_RANK"))};
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 0) << Err();
  const std::string during = job_.Read("during.0");
  EXPECT_EQ(during, absl::StrCat("[\n"
                                 "  {\"targets\": [\"127.0.0.1:",
                                 FakeJob::kMetricsPort,
                                 "\"], \"labels\": {\"job\": \"gravac-controller\"}},\n"
                                 "  {\"targets\": [\"127.0.0.1:",
                                 FakeJob::kDaemonMetricsPort,
                                 "\"], \"labels\": {\"job\": \"gravacd\", \"node\": \"node0\"}},\n"
                                 "  {\"targets\": [\"127.0.0.1:",
                                 FakeJob::kDaemonMetricsPort + 1,
                                 "\"], \"labels\": {\"job\": \"gravacd\", \"node\": \"node1\"}}\n"
                                 "]\n"));
  EXPECT_EQ(job_.Read("during.1"), during);
  EXPECT_EQ(job_.Read("targets.json"), "[]\n");  // the job is over: nothing to scrape
  EXPECT_FALSE(std::filesystem::exists(job_.Path("targets.json.tmp")));
}

TEST_F(LauncherTest, FailedJobLeavesItsTargetsSoPrometheusSeesThemDown) {
  RunnerOptions o = Options(2, 2, {"sh", "-c", "exit 3"});
  o.metrics_sd_file = job_.Path("targets.json");
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 3);
  const std::string sd = job_.Read("targets.json");
  EXPECT_THAT(sd, HasSubstr("\"job\": \"gravac-controller\""));
  EXPECT_THAT(sd, HasSubstr("\"node\": \"node1\""));
}

TEST_F(LauncherTest, ControllerThatNeverServesMetricsTimesOutNamingTheFile) {
  ASSERT_THAT(job_.WriteController(
                  absl::StrCat("echo ", FakeJob::kPort, " > \"$port_file\"; exec sleep 100")),
              IsOk());
  RunnerOptions o = Options(1, 1, {"true"});
  o.start_timeout = absl::Milliseconds(500);
  EXPECT_THAT(Run(o), StatusIs(absl::StatusCode::kDeadlineExceeded,
                               AllOf(HasSubstr("did not write its metrics port"),
                                     HasSubstr("controller.metrics.port"))));
}

TEST_F(LauncherTest, DaemonThatNeverServesMetricsTimesOutNamingTheFile) {
  // daemon_args come last, so the stand-in writes its port to this later --metrics_port_file
  // (which cannot be written) and gravacrun's file never appears.
  ASSERT_THAT(job_.WriteDaemon("exec sleep 100"), IsOk());
  RunnerOptions o = Options(1, 1, {"true"});
  o.daemon_args = {"--metrics_port_file=/nonexistent/dir/port"};
  o.start_timeout = absl::Seconds(1);
  EXPECT_THAT(Run(o), StatusIs(absl::StatusCode::kDeadlineExceeded,
                               AllOf(HasSubstr("metrics ports"),
                                     HasSubstr(job_.RunDirPath("gravacd-0.metrics.port")))));
}

TEST_F(LauncherTest, FailingWorkerStopsTheOthersQuicklyAndGivesItsCode) {
  RunnerOptions o = Options(4, 2,
                            {"sh", "-c",
                             "if [ $GRAVAC_RANK = 2 ]; then sleep 0.2; exit 3; fi; "
                             "exec sleep 100"});
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 3);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_THAT(Err(), HasSubstr("rank 2 exited with code 3; stopping the job"));
}

TEST_F(LauncherTest, WorkerKilledBySignalGives128PlusSignal) {
  RunnerOptions o =
      Options(2, 1, {"sh", "-c", "if [ $GRAVAC_RANK = 1 ]; then kill -9 $$; fi; exec sleep 100"});
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 128 + 9);
  EXPECT_THAT(Err(), HasSubstr("rank 1 was killed by signal 9"));
}

TEST_F(LauncherTest, WaitingForWorkersTakesNoCpu) {
  // While the workers run gravacrun blocks in poll(): a 1.5 s job costs it milliseconds of CPU,
  // not a busy loop's second or more (the infinite deadline once overflowed to a 0 ms timeout).
  auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  const double before = cpu_seconds();
  ASSERT_OK_AND_ASSIGN(int rc, Run(Options(2, 1, {"sleep", "1.5"})));
  EXPECT_EQ(rc, 0);
  EXPECT_LT(cpu_seconds() - before, 0.3);
}

TEST_F(LauncherTest, FirstFailureWins) {
  RunnerOptions o =
      Options(2, 1, {"sh", "-c", "if [ $GRAVAC_RANK = 0 ]; then exit 5; fi; sleep 1; exit 6"});
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 5);
}

TEST_F(LauncherTest, FailingDaemonStopsTheJob) {
  ASSERT_THAT(job_.WriteDaemon("sleep 0.3; exit 4"), IsOk());
  RunnerOptions o = Options(2, 2, {"sleep", "100"});
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 4);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_THAT(Err(), HasSubstr("gravacd "));
}

TEST_F(LauncherTest, DaemonsThatExitOnTheirOwnAreNotKilled) {
  // Like gravacd once its workers have shut down: the daemons exit 0 by themselves.
  ASSERT_THAT(job_.WriteDaemon("sleep 0.5; echo bye; exit 0"), IsOk());
  RunnerOptions o = Options(2, 2, {"true"});
  o.exit_grace = absl::Seconds(20);
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 0);
  EXPECT_THAT(Out(), AllOf(HasSubstr("[gravacd 0] bye"), HasSubstr("[gravacd 1] bye")));
  EXPECT_THAT(Err(), Not(HasSubstr("did not exit")));
}

TEST_F(LauncherTest, ControllerThatNeverListensTimesOut) {
  ASSERT_THAT(job_.WriteController("exec sleep 100"), IsOk());
  RunnerOptions o = Options(1, 1, {"true"});
  o.start_timeout = absl::Milliseconds(500);
  EXPECT_THAT(Run(o),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("did not write its port")));
}

TEST_F(LauncherTest, ControllerThatDiesAtStartFailsTheJob) {
  ASSERT_THAT(job_.WriteController("echo no config >&2; exit 7"), IsOk());
  RunnerOptions o = Options(1, 1, {"true"});
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 7);
  EXPECT_THAT(Err(), AllOf(HasSubstr("[controller] no config"),
                           HasSubstr("controller exited with code 7")));
}

TEST_F(LauncherTest, MissingWorkerProgramExits127) {
  RunnerOptions o = Options(1, 1, {"/nonexistent/gravac-worker"});
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 127);
  EXPECT_THAT(Err(), HasSubstr("[rank 0] gravacrun: exec failed: /nonexistent/gravac-worker"));
}

TEST_F(LauncherTest, OwnRunDirIsRemoved) {
  RunnerOptions o = Options(1, 1, {"sh", "-c", "echo dir=$(dirname $GRAVAC_DAEMON_SOCKET)"});
  o.run_dir = "";
  ASSERT_OK_AND_ASSIGN(int rc, Run(o));
  EXPECT_EQ(rc, 0);
  const std::string out = Out();
  const size_t at = out.find("dir=");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string dir = out.substr(at + 4, out.find('\n', at) - at - 4);
  EXPECT_THAT(dir, HasSubstr("/tmp/gravacrun-"));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(FindToolTest, GivenPathThenSiblingThenBuildTreeThenPath) {
  ASSERT_OK_AND_ASSIGN(FakeJob job, FakeJob::Create());
  const std::string root = job.Path("tree");
  std::filesystem::create_directories(root + "/runner");
  std::filesystem::create_directories(root + "/daemon");
  std::filesystem::create_directories(root + "/bin");
  auto make_exe = [](const std::string& path) {
    std::ofstream(path) << "#!/bin/sh\n";
    chmod(path.c_str(), 0755);
  };
  const std::string self = root + "/runner/gravacrun";
  const EnvLookup env = FixedEnvironment({{"PATH", root + "/bin"}});
  EXPECT_THAT(FindTool("", "gravacd", "daemon", self, env),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("gravacd not found")));
  make_exe(root + "/bin/gravacd");
  EXPECT_EQ(*FindTool("", "gravacd", "daemon", self, env), root + "/bin/gravacd");
  make_exe(root + "/daemon/gravacd");
  EXPECT_EQ(*FindTool("", "gravacd", "daemon", self, env), root + "/daemon/gravacd");
  make_exe(root + "/runner/gravacd");
  EXPECT_EQ(*FindTool("", "gravacd", "daemon", self, env), root + "/runner/gravacd");
  EXPECT_EQ(*FindTool(root + "/bin/gravacd", "gravacd", "daemon", self, env),
            root + "/bin/gravacd");
  EXPECT_THAT(FindTool(root + "/nothing", "gravacd", "daemon", self, env),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("not an executable")));
}

}  // namespace
}  // namespace gravac::runner
