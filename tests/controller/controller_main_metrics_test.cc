// The gravac-controller binary's metrics settings, as a process: --metrics_address=127.0.0.1:0
// with --metrics_port_file serves /metrics over HTTP (fetched here with a plain socket) and the
// series follow a daemon's ControllerClient joining, watching and reporting steps; a malformed
// or unbindable metrics_address fails start-up naming the setting; `off`
// (GRAVAC_CONTROLLER_METRICS_ADDRESS) serves nothing and writes no metrics port file.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/testing/http_get.h"
#include "core/testing/read_file.h"
#include "core/testing/status_matchers.h"
#include "daemon/control/controller_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using ::gravac::testing::ReadFile;

// A port number written to `path` (tmp + rename by the controller), 0 until it is there.
int ReadPort(const std::string& path) {
  std::ifstream in(path);
  int port = 0;
  if (!(in >> port)) return 0;
  return port;
}

int WaitForPort(const std::string& path) {
  for (int i = 0; i < 2000; ++i) {
    if (int port = ReadPort(path); port > 0) return port;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return 0;
}

using ::gravac::testing::HttpGet;

// Sample lines of a text-format scrape: series -> value text.
std::map<std::string, std::string> Samples(const std::string& response) {
  std::map<std::string, std::string> out;
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) return out;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(response).substr(body + 4), '\n', absl::SkipEmpty())) {
    if (line.front() == '#') continue;
    const size_t space = line.rfind(' ');
    if (space != absl::string_view::npos) {
      // The job's labels are left out of the key: these controllers serve one job each.
      std::string key(line.substr(0, space));
      key = std::regex_replace(key, std::regex(R"(job_name="[^"]*",?|run_id="[^"]*",?)"), "");
      key = std::regex_replace(key, std::regex(R"(,\})"), "}");
      key = std::regex_replace(key, std::regex(R"(\{\})"), "");
      out[key] = std::string(line.substr(space + 1));
    }
  }
  return out;
}

// The gravac_controller_info series (labels included) whose value is 1; "" when there is none.
std::string InfoSeries(const std::map<std::string, std::string>& samples) {
  for (const auto& [series, value] : samples) {
    if (series.starts_with("gravac_controller_info{") && value == "1") return series;
  }
  return "";
}

class ControllerProcess {
 public:
  // Starts gravac-controller with `args` (stderr to a log file), plus `env` NAME=VALUE entries.
  ControllerProcess(const std::string& dir, std::vector<std::string> args,
                    std::vector<std::pair<std::string, std::string>> env = {})
      : log_file_(dir + "/controller.log") {
    args.push_back("--insecure_plaintext");  // these tests are about metrics and job settings
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(CONTROLLER_PATH));
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(CONTROLLER_PATH, argv.data());
      _exit(127);
    }
  }
  ~ControllerProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Waits (bounded) for the process to exit on its own or after SIGTERM (`terminate`); its exit
  // code, -1 when it had to be killed.
  int Wait(bool terminate) {
    if (terminate) kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 1500; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return -1;
  }
  std::string log() const { return ReadFile(log_file_); }

 private:
  std::string log_file_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

class ControllerMainMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() +
           absl::StrFormat("/controller_main_metrics_%s_%d", info->name(), getpid());
    ASSERT_EQ(system(("rm -rf " + dir_ + " && mkdir -p " + dir_).c_str()), 0);
  }
  void TearDown() override { system(("rm -rf " + dir_).c_str()); }

  std::string dir_;
};

TEST_F(ControllerMainMetricsTest, ServesMetricsThatFollowTheJob) {
  const std::string port_file = dir_ + "/port";
  const std::string metrics_port_file = dir_ + "/metrics_port";
  ControllerProcess controller(
      dir_, {"--listen=127.0.0.1:0", "--port_file=" + port_file, "--metrics_address=127.0.0.1:0",
             "--metrics_port_file=" + metrics_port_file, "--nodes=1", "--window=2",
             "--eval_steps=4", "--theta_max=40", "--epsilon=0.5", "--alpha=0"});
  const int port = WaitForPort(port_file);
  ASSERT_GT(port, 0) << controller.log();
  const int metrics_port = WaitForPort(metrics_port_file);
  ASSERT_GT(metrics_port, 0) << controller.log();
  EXPECT_NE(metrics_port, port);
  EXPECT_THAT(
      controller.log(),
      HasSubstr(absl::StrFormat("metrics: serving on http://127.0.0.1:%d/metrics", metrics_port)));

  const std::string first = HttpGet(metrics_port, "/metrics");
  EXPECT_THAT(first, StartsWith("HTTP/1.1 200"));
  std::map<std::string, std::string> s = Samples(first);
  // A job's series appear when its first daemon joins (one controller serves many jobs).
  EXPECT_EQ(s.count("gravac_expected_nodes"), 0u);
  EXPECT_EQ(s.count("gravac_job_steps_total"), 0u);

  daemon::ControllerClientOptions o;
  o.security = proto::GrpcSecurity::Plaintext();
  o.address = absl::StrFormat("127.0.0.1:%d", port);
  o.join_timeout = absl::Seconds(10);
  ASSERT_OK_AND_ASSIGN(auto client, daemon::ControllerClient::Create(o));
  ASSERT_OK_AND_ASSIGN(daemon::JoinResult joined, client->Join({"node-0", 0, 2, 2, "blob"}));
  EXPECT_EQ(joined.node_rank, 0);
  EXPECT_EQ(joined.job.sparse_values, "fp32");  // the default
  client->Start();
  for (int64_t step = 0; step < 6; ++step) {
    const daemon::JobDecision d = client->Newest();
    client->Report(
        {0, step, d.theta, d.theta_candidate, 1.0, 0.9, 0.9, 0.05, 32, 1000, 10000, d.epoch});
  }
  // Stats travel on a stream: wait (bounded) until the controller observed all six steps and
  // the decision stream is open.
  for (int i = 0; i < 1000; ++i) {
    s = Samples(HttpGet(metrics_port, "/metrics"));
    if (s["gravac_job_steps_total"] == "6" && s["gravac_connected_nodes"] == "1") break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(s["gravac_job_steps_total"], "6");
  EXPECT_EQ(s["gravac_expected_nodes"], "1");
  EXPECT_EQ(s["gravac_policy_theta_max"], "40");
  EXPECT_THAT(InfoSeries(s), StartsWith("gravac_controller_info{compressor=\"topk\",policy="
                                        "\"geometric\",sparse_values=\"fp32\",version=\""));
  EXPECT_EQ(s["gravac_connected_nodes"], "1");
  EXPECT_EQ(s["gravac_joined_nodes"], "1");
  EXPECT_EQ(s["gravac_world_size"], "2");
  EXPECT_EQ(s["gravac_job_step_duration_seconds_count"], "6");
  EXPECT_EQ(s["gravac_job_step_duration_seconds_bucket{le=\"0.064\"}"], "6");
  EXPECT_EQ(s["gravac_job_sent_bytes_total"], "6000");
  EXPECT_EQ(s["gravac_job_dense_equivalent_bytes_total"], "60000");
  EXPECT_EQ(s["gravac_throughput_samples_per_second"], "640");
  // Warm-up ended after 2 steps: at least epoch 1 was published.
  EXPECT_NE(s["gravac_decisions_total"], "0");
  EXPECT_EQ(s["gravac_decisions_total"], s["gravac_decision_epoch"]);
  EXPECT_EQ(s["gravac_search_phase{phase=\"warmup\"}"], "0");
  EXPECT_EQ(s["gravac_stats_rejected_total{reason=\"theta_disagrees\"}"], "0");
  EXPECT_THAT(HttpGet(metrics_port, "/nothing-here"), Not(StartsWith("HTTP/1.1 200")));

  client->Shutdown();
  EXPECT_EQ(controller.Wait(/*terminate=*/true), 0) << controller.log();
}

// GRAVAC_SPARSE_VALUES sets the job's sparse value precision: the start-up line and the info
// series show it and the Join response carries it to the daemons.
TEST_F(ControllerMainMetricsTest, SparseValuesFromTheEnvironmentReachTheJoinAndTheInfoSeries) {
  const std::string port_file = dir_ + "/port";
  const std::string metrics_port_file = dir_ + "/metrics_port";
  ControllerProcess controller(
      dir_,
      {"--listen=127.0.0.1:0", "--port_file=" + port_file, "--metrics_address=127.0.0.1:0",
       "--metrics_port_file=" + metrics_port_file, "--compressor=dgc"},
      {{"GRAVAC_SPARSE_VALUES", "fp16"}});
  const int port = WaitForPort(port_file);
  ASSERT_GT(port, 0) << controller.log();
  const int metrics_port = WaitForPort(metrics_port_file);
  ASSERT_GT(metrics_port, 0) << controller.log();
  EXPECT_THAT(controller.log(), HasSubstr("job: 1 nodes, compressor dgc, sparse values fp16"));

  daemon::ControllerClientOptions o;
  o.security = proto::GrpcSecurity::Plaintext();
  o.address = absl::StrFormat("127.0.0.1:%d", port);
  o.join_timeout = absl::Seconds(10);
  ASSERT_OK_AND_ASSIGN(auto client, daemon::ControllerClient::Create(o));
  ASSERT_OK_AND_ASSIGN(daemon::JoinResult joined, client->Join({"node-0", 0, 1, 1, "blob"}));
  EXPECT_EQ(joined.job.compressor, "dgc");
  EXPECT_EQ(joined.job.sparse_values, "fp16");
  // The job's info series appears once its first daemon has joined.
  const std::map<std::string, std::string> s = Samples(HttpGet(metrics_port, "/metrics"));
  EXPECT_THAT(InfoSeries(s), StartsWith("gravac_controller_info{compressor=\"dgc\",policy="
                                        "\"geometric\",sparse_values=\"fp16\",version=\""));
  client->Shutdown();
  EXPECT_EQ(controller.Wait(/*terminate=*/true), 0) << controller.log();
}

TEST_F(ControllerMainMetricsTest, UnknownSparseValuesFailStartUpNamingTheSettingAndTheChoices) {
  for (const std::string& bad : {std::string("fp8"), std::string("")}) {
    SCOPED_TRACE(bad);
    ControllerProcess controller(
        dir_, {"--listen=127.0.0.1:0", "--metrics_address=off", "--sparse_values=" + bad});
    EXPECT_EQ(controller.Wait(/*terminate=*/false), 1);
    EXPECT_THAT(controller.log(),
                HasSubstr("sparse_values: '" + bad + "' is not one of fp32, fp16, bf16"));
  }
  ControllerProcess from_env(dir_, {"--listen=127.0.0.1:0", "--metrics_address=off"},
                             {{"GRAVAC_SPARSE_VALUES", "half"}});
  EXPECT_EQ(from_env.Wait(/*terminate=*/false), 1);
  EXPECT_THAT(from_env.log(), HasSubstr("sparse_values: 'half' is not one of fp32, fp16, bf16"));
}

TEST_F(ControllerMainMetricsTest, MalformedAddressFailsStartUpNamingTheSetting) {
  ControllerProcess controller(dir_, {"--listen=127.0.0.1:0", "--metrics_address=localhost"});
  EXPECT_EQ(controller.Wait(/*terminate=*/false), 1);
  EXPECT_THAT(controller.log(), HasSubstr("metrics_address: metrics address 'localhost'"));
}

TEST_F(ControllerMainMetricsTest, PortInUseFailsStartUpNamingTheSetting) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int taken = ntohs(addr.sin_port);

  ControllerProcess controller(
      dir_, {"--listen=127.0.0.1:0", absl::StrFormat("--metrics_address=127.0.0.1:%d", taken)});
  EXPECT_EQ(controller.Wait(/*terminate=*/false), 1);
  close(fd);
  const std::string log = controller.log();
  EXPECT_THAT(log, HasSubstr(absl::StrFormat("metrics: cannot serve on 127.0.0.1:%d", taken)));
  EXPECT_THAT(log, HasSubstr("metrics_address"));
}

TEST_F(ControllerMainMetricsTest, OffServesNothing) {
  const std::string port_file = dir_ + "/port";
  const std::string metrics_port_file = dir_ + "/metrics_port";
  ControllerProcess controller(dir_,
                               {"--listen=127.0.0.1:0", "--port_file=" + port_file,
                                "--metrics_port_file=" + metrics_port_file},
                               {{"GRAVAC_CONTROLLER_METRICS_ADDRESS", "off"}});
  ASSERT_GT(WaitForPort(port_file), 0) << controller.log();
  EXPECT_THAT(controller.log(), HasSubstr("metrics: off"));
  EXPECT_THAT(controller.log(), Not(HasSubstr("metrics: serving")));
  EXPECT_EQ(ReadPort(metrics_port_file), 0);  // no metrics port to write
  EXPECT_EQ(controller.Wait(/*terminate=*/true), 0) << controller.log();
  EXPECT_FALSE(std::ifstream(metrics_port_file).good());
}

}  // namespace
}  // namespace gravac::controller
