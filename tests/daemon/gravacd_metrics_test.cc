// The real gravacd binary's /metrics: started with --metrics_address=127.0.0.1:0 and
// --metrics_port_file it writes the bound port, serves gravacd's families over HTTP while it waits
// for its workers (promtool check metrics passes when installed), logs where, and stops on SIGTERM;
// `off` serves nothing; a bad address or a port in use fails start-up naming metrics_address.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/testing/http_get.h"
#include "core/testing/read_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/metrics_text.h"

#ifndef GRAVACD_BIN
#error "GRAVACD_BIN must name the gravacd binary"
#endif

namespace gravac::daemon {
namespace {

using ::testing::HasSubstr;
using testing::SeriesValue;

using ::gravac::testing::ReadFile;

class GravacdProcess {
 public:
  // Starts gravacd with `extra` flags (stdout and stderr to a log file in `dir`).
  GravacdProcess(const std::string& dir, const std::vector<std::string>& extra) : dir_(dir) {
    log_ = dir + "/gravacd.log";
    std::vector<std::string> args = {
        GRAVACD_BIN,      "--controller=127.0.0.1:1", "--socket=" + dir + "/gravacd.sock",
        "--local_size=1", "--node_name=n7",           "--worker_timeout_s=60",
        "--insecure_plaintext"};  // these tests are about /metrics
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~GravacdProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Exit code once it exits within `timeout` (-1 otherwise, or when killed by a signal).
  int Wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  void Terminate() { kill(pid_, SIGTERM); }
  std::string log() const { return ReadFile(log_); }

 private:
  std::string dir_, log_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

class GravacdMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gravacd_metrics_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    const int rc = std::system(("rm -rf '" + dir_ + "'").c_str());
    (void)rc;
  }
  std::string dir_;
};

using ::gravac::testing::HttpGet;

TEST_F(GravacdMetricsTest, ServesMetricsOverHttpAndWritesItsPort) {
  const std::string port_file = dir_ + "/metrics.port";
  GravacdProcess d(dir_, {"--metrics_address=127.0.0.1:0", "--metrics_port_file=" + port_file});
  int port = 0;
  for (int i = 0; i < 1000 && port == 0; ++i) {
    port = std::atoi(ReadFile(port_file).c_str());
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(port, 0) << d.log();
  // The port file is written once the endpoint serves, before gravacd has made its series (its
  // Run starts after): a scrape in between sees the exporter's own series only. Scrape until the
  // node's series are there (bounded), as Prometheus would at its next interval.
  std::string response, body;
  for (int i = 0; i < 500; ++i) {
    response = HttpGet(port, "/metrics");
    ASSERT_THAT(response, HasSubstr(" 200 ")) << response;
    body = response.substr(response.find("\r\n\r\n") + 4);
    if (body.find("gravac_node_info") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(SeriesValue(body, "gravac_expected_workers", {{"node", "n7"}}), 1) << body;
  EXPECT_EQ(SeriesValue(body, "gravac_connected_workers", {{"node", "n7"}}), 0);
  EXPECT_EQ(SeriesValue(body, "gravac_steps_total", {{"node", "n7"}}), 0);
  EXPECT_THAT(body, HasSubstr("gravac_node_info{node=\"n7\",node_rank=\"\",version=\""));
  if (access("/usr/bin/promtool", X_OK) == 0) {
    const std::string scrape = dir_ + "/scrape.txt";
    std::ofstream(scrape) << body;
    const std::string out = dir_ + "/promtool.txt";
    const int rc = std::system(
        ("/usr/bin/promtool check metrics < " + scrape + " > " + out + " 2>&1").c_str());
    EXPECT_EQ(rc, 0) << ReadFile(out);
    EXPECT_EQ(ReadFile(out), "");
  }
  d.Terminate();
  EXPECT_EQ(d.Wait(std::chrono::seconds(15)), 0) << d.log();
  EXPECT_THAT(d.log(), HasSubstr("metrics: serving on http://127.0.0.1:" + std::to_string(port) +
                                 "/metrics"));
}

TEST_F(GravacdMetricsTest, OffServesNothing) {
  const std::string port_file = dir_ + "/metrics.port";
  GravacdProcess d(dir_, {"--metrics_address=off", "--metrics_port_file=" + port_file});
  for (int i = 0; i < 500 && d.log().find("waiting for 1 local workers") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT(d.log(), HasSubstr("metrics: off"));
  EXPECT_NE(access(port_file.c_str(), F_OK), 0);
  d.Terminate();
  EXPECT_EQ(d.Wait(std::chrono::seconds(15)), 0) << d.log();
}

TEST_F(GravacdMetricsTest, BadAddressOrPortInUseFailsStartUp) {
  {
    GravacdProcess d(dir_, {"--metrics_address=nonsense"});
    EXPECT_EQ(d.Wait(std::chrono::seconds(15)), 2);
    EXPECT_THAT(d.log(), HasSubstr("--metrics_address"));
  }
  // A port some other socket listens on.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  {
    GravacdProcess d(dir_, {"--metrics_address=127.0.0.1:" + std::to_string(port)});
    EXPECT_EQ(d.Wait(std::chrono::seconds(15)), 1);
    EXPECT_THAT(d.log(), HasSubstr("metrics_address"));
    EXPECT_THAT(d.log(), HasSubstr(std::to_string(port)));
  }
  close(fd);
}

}  // namespace
}  // namespace gravac::daemon
