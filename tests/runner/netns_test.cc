// gravacrun --link (rate only: netem is missing on some kernels): every node in its own shaped
// namespace (controller in node 0, each daemon and its workers in their node), and no namespace
// left afterwards — after a normal end, after SIGINT and after gravacrun itself is killed (netemu's
// guardian). Needs root; skips otherwise.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/cluster.h"
#include "netemu/process.h"
#include "tests/runner/cli_helpers.h"
#include "tests/runner/fake_job.h"

namespace gravac::runner {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

class GravacrunNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    const std::string probe = absl::StrCat("gvcprobe-run-", getpid());
    if (!netemu::RunChecked({"ip", "netns", "add", probe}).ok()) {
      GTEST_SKIP() << "no network namespaces here";
    }
    ASSERT_TRUE(netemu::RunChecked({"ip", "netns", "del", probe}).ok());
    ASSERT_OK_AND_ASSIGN(job_, FakeJob::Create());
  }

  std::vector<std::string> LinkArgs(int np, int nodes, const std::vector<std::string>& command) {
    std::vector<std::string> args = FakeJobArgs(job_, np, nodes, command);
    args.insert(args.begin() + 1, {"--link", "1gbit", "--kill_grace_s", "1"});
    return args;
  }

  // Namespaces made by the gravacrun process `pid` (cluster names carry the creator's pid).
  static std::vector<std::string> NamespacesOf(pid_t pid) {
    std::vector<std::string> mine;
    absl::StatusOr<std::vector<std::string>> all = netemu::ListNamespaces();
    if (!all.ok()) return {"<ip netns list failed>"};
    for (const std::string& ns : *all) {
      if (absl::StartsWith(ns, absl::StrCat("gravacrun-", pid, "-"))) mine.push_back(ns);
    }
    return mine;
  }

  static bool NoNamespacesWithin(pid_t pid, absl::Duration limit) {
    const absl::Time deadline = absl::Now() + limit;
    while (!NamespacesOf(pid).empty()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return true;
  }

  FakeJob job_;
};

TEST_F(GravacrunNetnsTest, NodesRunInTheirOwnNamespaces) {
  ASSERT_OK_AND_ASSIGN(
      netemu::Process run,
      netemu::Process::Spawn(LinkArgs(3, 2, {"sh", "-c", "ip -4 -o addr show dev eth0"}),
                             {.netns = "", .env = {}, .output = netemu::OutputMode::kCapture}));
  const pid_t pid = run.pid();
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, run.Collect(absl::Seconds(60)));
  ASSERT_EQ(r.status.exit_code, 0) << r.err;
  // Node 0 holds ranks 0-1 and the controller, node 1 rank 2; host byte = node + 1.
  EXPECT_THAT(r.out, MatchesRegex(".*\\[rank 0\\] [^\n]*eth0 +inet 198\\.1[89]\\.[0-9]+\\.1/24.*"));
  EXPECT_THAT(r.out, MatchesRegex(".*\\[rank 1\\] [^\n]*eth0 +inet 198\\.1[89]\\.[0-9]+\\.1/24.*"));
  EXPECT_THAT(r.out, MatchesRegex(".*\\[rank 2\\] [^\n]*eth0 +inet 198\\.1[89]\\.[0-9]+\\.2/24.*"));
  EXPECT_THAT(r.out, MatchesRegex(".*\\[controller\\] controller --listen=198\\.1[89]\\.[0-9]+"
                                  "\\.1:0 .*"));
  EXPECT_THAT(r.out, HasSubstr("--ucx_tls=tcp --ucx_net_devices=eth0"));
  EXPECT_THAT(r.err, HasSubstr("ip netns exec gravacrun-"));
  EXPECT_TRUE(NoNamespacesWithin(pid, absl::Seconds(10)));
}

// A stand-in metrics server: serves "<name>_up 1" on $metrics_address's host, port 0, and writes
// the bound port to $metrics_port_file (tmp + rename) as the real binaries do.
std::string ServeMetrics(const std::string& name) {
  return absl::StrCat(
      "exec /usr/bin/python3 -c '\n"
      "import http.server, os, sys\n"
      "class H(http.server.BaseHTTPRequestHandler):\n"
      "  def do_GET(self):\n"
      "    self.send_response(200); self.end_headers(); self.wfile.write(b\"",
      name,
      "_up 1\\n\")\n"
      "  def log_message(self, *args): pass\n"
      "srv = http.server.HTTPServer((sys.argv[1], 0), H)\n"
      "open(sys.argv[2] + \".tmp\", \"w\").write(str(srv.server_port))\n"
      "os.rename(sys.argv[2] + \".tmp\", sys.argv[2])\n"
      "srv.serve_forever()' \"${metrics_address%:0}\" \"$metrics_port_file\"");
}

// "http://HOST:PORT/metrics" fetched from this (the host's) namespace.
absl::StatusOr<std::string> FetchFromHost(const std::string& url) {
  ASSIGN_OR_RETURN(netemu::CommandResult r,
                   netemu::RunCommand({"/usr/bin/python3", "-c",
                                       "import sys, urllib.request\n"
                                       "sys.stdout.write(urllib.request.urlopen(sys.argv[1], "
                                       "timeout=5).read().decode())",
                                       url},
                                      {.netns = "", .env = {}, .timeout = absl::Seconds(20)}));
  if (!r.status.success()) return absl::UnavailableError(absl::StrCat(url, ": ", r.err));
  return r.out;
}

TEST_F(GravacrunNetnsTest, MetricsInsideTheNamespacesAreReachableFromTheHost) {
  ASSERT_THAT(job_.WriteController(absl::StrCat("echo ", FakeJob::kPort, " > \"$port_file\"\n",
                                                ServeMetrics("controller"))),
              IsOk());
  ASSERT_THAT(job_.WriteDaemon(ServeMetrics("daemon"), /*write_metrics_port=*/false), IsOk());
  const std::string sd = job_.Path("targets.json");
  const std::string done = job_.Path("done");
  std::vector<std::string> args =
      LinkArgs(3, 2, {"sh", "-c", absl::StrCat("while [ ! -e ", done, " ]; do sleep 0.1; done")});
  args.insert(args.begin() + 1, {"--metrics_sd_file", sd});
  ASSERT_OK_AND_ASSIGN(netemu::Process run,
                       netemu::Process::Spawn(
                           args, {.netns = "", .env = {}, .output = netemu::OutputMode::kCapture}));
  const pid_t pid = run.pid();
  // The file_sd file names the three targets once they are all known.
  std::vector<std::string> targets;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    std::ifstream in(sd);
    std::stringstream text;
    text << in.rdbuf();
    const std::string json = text.str();
    targets.clear();
    for (size_t at = json.find("\"targets\": [\""); at != std::string::npos;
         at = json.find("\"targets\": [\"", at + 1)) {
      const size_t start = at + 13;
      targets.push_back(json.substr(start, json.find('"', start) - start));
    }
    if (targets.size() == 3) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(targets.size(), 3u) << "file_sd file never listed 3 targets";
  for (size_t i = 0; i < targets.size(); ++i) {
    SCOPED_TRACE(targets[i]);
    // Controller on node 0 (host byte 1), daemons on nodes 0 and 1 (host bytes 1, 2).
    EXPECT_THAT(targets[i],
                MatchesRegex(absl::StrCat("198\\.1[89]\\.[0-9]+\\.", i == 2 ? 2 : 1, ":[0-9]+")));
    absl::StatusOr<std::string> body =
        FetchFromHost(absl::StrCat("http://", targets[i], "/metrics"));
    ASSERT_THAT(body.status(), IsOk());
    EXPECT_EQ(*body, i == 0 ? "controller_up 1\n" : "daemon_up 1\n");
  }
  std::ofstream(done) << "";
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, run.Collect(absl::Seconds(30)));
  ASSERT_EQ(r.status.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("gravacrun: metrics: controller http://", targets[0],
                                            "/metrics\n")));
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("gravacrun: metrics: node 0 (node0) http://",
                                            targets[1], "/metrics\n")));
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("gravacrun: metrics: node 1 (node1) http://",
                                            targets[2], "/metrics\n")));
  EXPECT_TRUE(NoNamespacesWithin(pid, absl::Seconds(10)));
  // The host link went with the cluster.
  ASSERT_OK_AND_ASSIGN(std::string links, netemu::RunChecked({"ip", "-o", "link", "show"}));
  const std::string subnet = targets[0].substr(0, targets[0].rfind('.'));
  const int third = std::stoi(subnet.substr(subnet.rfind('.') + 1));
  const int subnet_index = (std::stoi(subnet.substr(4, 2)) - 18) * 256 + third;
  EXPECT_THAT(links, Not(HasSubstr(absl::StrCat(" gvch", subnet_index, "@"))));
}

TEST_F(GravacrunNetnsTest, SigintRemovesProcessesAndNamespaces) {
  const std::string pids = job_.Path("pids");
  ASSERT_OK_AND_ASSIGN(
      netemu::Process run,
      netemu::Process::Spawn(
          LinkArgs(2, 2, {"sh", "-c", absl::StrCat("echo $$ >> ", pids, "; exec sleep 100")}),
          {.netns = "", .env = {}, .output = netemu::OutputMode::kCapture}));
  const pid_t pid = run.pid();
  std::vector<pid_t> workers;
  ASSERT_TRUE(WaitForLines(pids, 2, absl::Seconds(30), &workers));
  EXPECT_FALSE(NamespacesOf(pid).empty());
  ASSERT_THAT(run.Signal(SIGINT), IsOk());
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, run.Collect(absl::Seconds(30)));
  EXPECT_EQ(r.status.exit_code, 128 + SIGINT) << r.err;
  for (pid_t w : workers) EXPECT_TRUE(GoneWithin(w, absl::Seconds(5))) << w;
  EXPECT_TRUE(NoNamespacesWithin(pid, absl::Seconds(10)));
}

TEST_F(GravacrunNetnsTest, GuardianRemovesNamespacesWhenGravacrunIsKilled) {
  const std::string pids = job_.Path("pids");
  ASSERT_OK_AND_ASSIGN(
      netemu::Process run,
      netemu::Process::Spawn(
          LinkArgs(2, 2, {"sh", "-c", absl::StrCat("echo $$ >> ", pids, "; exec sleep 100")}),
          {.netns = "", .env = {}, .output = netemu::OutputMode::kNull}));
  const pid_t pid = run.pid();
  std::vector<pid_t> workers;
  ASSERT_TRUE(WaitForLines(pids, 2, absl::Seconds(30), &workers));
  ASSERT_THAT(run.Kill().status(), IsOk());
  for (pid_t w : workers) EXPECT_TRUE(GoneWithin(w, absl::Seconds(10))) << w;
  EXPECT_TRUE(NoNamespacesWithin(pid, absl::Seconds(15)));
}

}  // namespace
}  // namespace gravac::runner
