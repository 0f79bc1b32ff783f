// Multi-host gravacrun over real ssh. Three emulated nodes (netemu namespaces with a host link);
// nodes 0 and 1 each run Debian's sshd on their own address with a host key and an authorized
// key this test makes; node 2 runs none. gravacrun runs in the test's own namespace and reaches the
// nodes by ssh only (-H NODE0:2,NODE1:2): a 2-node x 2-worker digits training job finishes with
// identical replicas over mutual TLS, each remote daemon and worker holding the job's certificates
// that came through its ssh channel (0600 files in a private 0700 folder under the remote
// $TMPDIR, removed at the end, also after SIGINT); an unreachable host, a host that refuses ssh and a host without gravacd fail
// within seconds naming the host; SIGINT to gravacrun leaves no process of the job in the
// namespaces. Needs root, sshd and ssh-keygen; skips otherwise.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/cluster.h"
#include "netemu/process.h"

namespace gravac::runner {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kSshPort = 2222;

bool CanConnect(const std::string& address, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  close(fd);
  return ok;
}

// Every path under `dir`.
std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    paths.push_back(e.path().string());
  }
  return paths;
}

class SshNetnsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      skip_ = "network namespaces and sshd need root";
      return;
    }
    if (access("/usr/sbin/sshd", X_OK) != 0 || access("/usr/bin/ssh-keygen", X_OK) != 0) {
      skip_ = "openssh-server is not installed (scripts/install_deps.sh)";
      return;
    }
    char tmpl[] = "/tmp/gravac_ssh_netns_XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    absl::StatusOr<std::unique_ptr<netemu::Cluster>> cluster = netemu::Cluster::Create(
        3, {.rate_bits_per_s = 1e9},
        netemu::ClusterOptions{.name_prefix = "gvcssh", .host_link = true});
    if (!cluster.ok()) {
      skip_ = absl::StrCat("no emulated cluster here: ", cluster.status().message());
      return;
    }
    cluster_ = cluster->release();
    const std::string& d = *dir_;
    for (std::string key : {"host_key", "client_key"}) {
      ASSERT_THAT(netemu::RunChecked(
                      {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d + "/" + key})
                      .status(),
                  IsOk());
    }
    std::filesystem::copy_file(d + "/client_key.pub", d + "/authorized_keys");
    std::filesystem::create_directories("/run/sshd");  // sshd's privilege-separation folder
    sshd_ = new std::vector<netemu::Process>();
    for (int node = 0; node < 2; ++node) {
      const std::string config = absl::StrCat(d, "/sshd_config.", node);
      const std::string text = absl::StrCat(
          "ListenAddress ", cluster_->node_address(node), ":", kSshPort, "\nHostKey ", d,
          "/host_key\nAuthorizedKeysFile ", d,
          "/authorized_keys\nPidFile none\nUsePAM no\nStrictModes no\n"
          "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
          "KbdInteractiveAuthentication no\nLogLevel ERROR\n");
      FILE* f = fopen(config.c_str(), "w");
      ASSERT_NE(f, nullptr);
      fputs(text.c_str(), f);
      fclose(f);
      ASSERT_OK_AND_ASSIGN(netemu::Process sshd,
                           cluster_->Spawn(node, {"/usr/sbin/sshd", "-D", "-e", "-f", config}));
      sshd_->push_back(std::move(sshd));
    }
    for (int node = 0; node < 2; ++node) {
      const absl::Time deadline = absl::Now() + absl::Seconds(10);
      while (!CanConnect(cluster_->node_address(node), kSshPort) && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(50));
      }
      ASSERT_TRUE(CanConnect(cluster_->node_address(node), kSshPort)) << "sshd on node " << node;
    }
  }

  static void TearDownTestSuite() {
    delete sshd_;  // kills them
    sshd_ = nullptr;
    delete cluster_;
    cluster_ = nullptr;
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_NE(cluster_, nullptr);
  }

  static std::string Node(int node) { return cluster_->node_address(node); }

  // gravacrun with the ssh settings of this cluster, then `flags`, then "--" and `command`.
  static std::vector<std::string> Gravacrun(const std::vector<std::string>& flags,
                                            const std::vector<std::string>& command) {
    std::vector<std::string> argv = {
        GRAVACRUN_BIN, "--ssh_port", absl::StrCat(kSshPort), "--ssh_identity_file",
        *dir_ + "/client_key", "--ssh_options",
        "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
        "--ssh_connect_timeout_s", "3", "--gravacd_path", GRAVACD_BIN, "--ucx_tls", "tcp",
        "--ucx_net_devices", "eth0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }

  // Pids in the node namespaces other than the sshd listeners (and their short-lived children).
  static std::vector<std::string> JobProcesses() {
    std::vector<std::string> found;
    for (int node = 0; node < 3; ++node) {
      absl::StatusOr<std::string> pids =
          netemu::RunChecked({"ip", "netns", "pids", cluster_->node_namespace(node)});
      if (!pids.ok()) continue;
      for (absl::string_view pid : absl::StrSplit(*pids, '\n', absl::SkipWhitespace())) {
        std::string cmdline;
        FILE* f = fopen(absl::StrCat("/proc/", pid, "/cmdline").c_str(), "r");
        if (f == nullptr) continue;
        char buf[512];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        for (size_t i = 0; i < n; ++i) cmdline.push_back(buf[i] == '\0' ? ' ' : buf[i]);
        if (cmdline.find("sshd") != std::string::npos || cmdline.empty()) continue;
        found.push_back(absl::StrCat("node ", node, " pid ", pid, ": ", cmdline));
      }
    }
    return found;
  }

  static std::string* dir_;
  static netemu::Cluster* cluster_;
  static std::vector<netemu::Process>* sshd_;
  static std::string skip_;
};

std::string* SshNetnsTest::dir_ = nullptr;
netemu::Cluster* SshNetnsTest::cluster_ = nullptr;
std::vector<netemu::Process>* SshNetnsTest::sshd_ = nullptr;
std::string SshNetnsTest::skip_;

TEST_F(SshNetnsTest, TwoHostsTrainDigitsWithIdenticalReplicas) {
  if (!netemu::RunCommand({PYTHON_BIN, "-c", "import sklearn, torch"}, {}).value().status.success()) {
    GTEST_SKIP() << "python3-sklearn or python3-torch missing";
  }
  // The hosts' temporary folder (their $TMPDIR): the shipped certificates go there.
  const std::string remote_tmp = *dir_ + "/remote-tmp-digits";
  std::filesystem::create_directories(remote_tmp);
  std::vector<std::string> argv = Gravacrun(
      {"-H", absl::StrCat(Node(0), ":2,", Node(1), ":2"), "-x",
       absl::StrCat("PYTHONPATH=", PYTHONPATH_DIR), "-x", "OMP_NUM_THREADS=1", "-x",
       absl::StrCat("TMPDIR=", remote_tmp), "--compressor",
       "topk", "--theta_min", "10", "--theta_max", "100", "--window", "5", "--eval_steps", "15"},
      {PYTHON_BIN, TRAIN_DIGITS, "--mode", "gravac", "--theta-max", "100", "--window", "5",
       "--eval-steps", "15", "--epochs", "2", "--hidden", "128", "64", "--lr", "0.05",
       "--min-accuracy", "0.8", "--print-digest"});
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r,
                       netemu::RunCommand(argv, {.netns = "", .env = {}, .timeout = absl::Seconds(240)}));
  ASSERT_EQ(r.status.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("reaching 2 host(s) over ssh: ", Node(0), ", ",
                                            Node(1))));
  EXPECT_THAT(r.out, HasSubstr("[rank 0] done: mode gravac"));
  std::set<std::string> digests;
  const std::regex line(R"(\[rank (\d)\] rank \d parameters sha256 ([0-9a-f]{64}))");
  int ranks = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it) {
    digests.insert((*it)[2]);
    ++ranks;
  }
  EXPECT_EQ(ranks, 4) << r.out;
  EXPECT_EQ(digests.size(), 1u) << "replicas differ:\n" << r.out;
  // Mutual TLS across hosts: each daemon joined with the node certificate its ssh channel
  // brought (a file under the host's $TMPDIR, not gravacrun's), and the folder is gone.
  for (int node = 0; node < 2; ++node) {
    EXPECT_THAT(r.err, ::testing::ContainsRegex(absl::StrCat(
                           "\\[gravacd ", node, "\\] [^\n]*joined controller [^\n]* as node ",
                           node, " of 2 over mutual TLS \\(certificate ", remote_tmp,
                           "/gravacrun-tls-[A-Za-z0-9]+/tls\\.crt")))
        << r.err;
  }
  EXPECT_THAT(r.err + r.out, Not(HasSubstr("INSECURE")));
  EXPECT_THAT(Listing(remote_tmp), ::testing::IsEmpty());
  const size_t done = r.out.find("[rank 0] done:");
  std::printf("%s; %d ranks on 2 hosts, parameters sha256 %s on every rank\n",
              done == std::string::npos ? "" : r.out.substr(done, r.out.find('\n', done) - done).c_str(),
              ranks, digests.empty() ? "" : digests.begin()->c_str());
  EXPECT_THAT(JobProcesses(), ::testing::IsEmpty());
}

TEST_F(SshNetnsTest, BadHostsFailFastNamingTheHost) {
  struct Case {
    std::string what;
    std::vector<std::string> flags;
    std::string host;
    std::string message;
  };
  const std::vector<Case> cases = {
      // TEST-NET-1 (RFC 5737): routed nowhere; ssh gives up after --ssh_connect_timeout_s.
      {"unreachable", {"-H", absl::StrCat(Node(0), ":1,192.0.2.1:1")}, "192.0.2.1", "ssh failed"},
      {"refuses ssh", {"-H", absl::StrCat(Node(0), ":1,", Node(2), ":1")}, Node(2),
       "Connection refused"},
      {"no gravacd",
       {"-H", absl::StrCat(Node(0), ":1,", Node(1), ":1"), "--gravacd_path",
        "/nonexistent/gravacd"},
       Node(0), "gravacd not found"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const absl::Time start = absl::Now();
    ASSERT_OK_AND_ASSIGN(netemu::CommandResult r,
                         netemu::RunCommand(Gravacrun(c.flags, {"/bin/true"}),
                                            {.netns = "", .env = {}, .timeout = absl::Seconds(60)}));
    const absl::Duration took = absl::Now() - start;
    EXPECT_NE(r.status.exit_code, 0);
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("host '", c.host, "'"))) << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << r.err;
    EXPECT_LT(took, absl::Seconds(15)) << r.err;
    std::printf("%s: failed in %.1f s: %s", c.what.c_str(), absl::ToDoubleSeconds(took),
                r.err.c_str());
  }
  EXPECT_THAT(JobProcesses(), ::testing::IsEmpty());
}

TEST_F(SshNetnsTest, SigintTearsDownEveryHost) {
  const std::string marks = *dir_ + "/started";
  const std::string remote_tmp = *dir_ + "/remote-tmp-sigint";
  std::filesystem::create_directories(marks);
  std::filesystem::create_directories(remote_tmp);
  // Each worker records the modes of its certificate folder and key, then waits.
  std::vector<std::string> argv = Gravacrun(
      {"-H", absl::StrCat(Node(0), ":2,", Node(1), ":2"), "--kill_grace_s", "1", "-x",
       absl::StrCat("TMPDIR=", remote_tmp)},
      {"/bin/sh", "-c",
       absl::StrCat("stat -c %a \"$(dirname \"$GRAVAC_TLS_KEY\")\" \"$GRAVAC_TLS_KEY\" > ", marks,
                    "/$GRAVAC_RANK.tmp; mv ", marks, "/$GRAVAC_RANK.tmp ", marks,
                    "/$GRAVAC_RANK; sleep 300 & wait")});
  ASSERT_OK_AND_ASSIGN(netemu::Process job,
                       netemu::Process::Spawn(argv, {.netns = "", .env = {},
                                                     .output = netemu::OutputMode::kCapture}));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  auto started = [&] {
    int n = 0;
    for (int rank = 0; rank < 4; ++rank) n += std::filesystem::exists(absl::StrCat(marks, "/", rank));
    return n;
  };
  while (started() < 4 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(100));
  ASSERT_EQ(started(), 4);
  ASSERT_FALSE(JobProcesses().empty());  // gravacd and the workers run in the namespaces
  for (int rank = 0; rank < 4; ++rank) {
    std::ifstream in(absl::StrCat(marks, "/", rank));
    std::stringstream modes;
    modes << in.rdbuf();
    EXPECT_EQ(modes.str(), "700\n600\n") << "rank " << rank;
  }
  // Two daemons' and four workers' private folders while the job runs.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(remote_tmp),
                          std::filesystem::directory_iterator()),
            6);
  const absl::Time sent = absl::Now();
  ASSERT_THAT(job.Signal(SIGINT), IsOk());
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, job.Collect(absl::Seconds(30)));
  EXPECT_EQ(r.status.exit_code, 128 + SIGINT) << r.err;
  EXPECT_THAT(r.err, HasSubstr("got Interrupt"));
  std::vector<std::string> left = JobProcesses();
  while (!left.empty() && absl::Now() - sent < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(100));
    left = JobProcesses();
  }
  EXPECT_THAT(left, ::testing::IsEmpty()) << absl::StrJoin(left, "\n");
  EXPECT_THAT(Listing(remote_tmp), ::testing::IsEmpty());
  std::printf("SIGINT to nothing left on any host: %.1f s\n",
              absl::ToDoubleSeconds(absl::Now() - sent));
}

}  // namespace
}  // namespace gravac::runner
