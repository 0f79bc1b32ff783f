// Cluster tests create real network namespaces: they need root and iproute2 and skip otherwise.
// All traffic stays inside the namespaces the tests create (198.18.0.0/15, no default route).
#include "netemu/cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/errno_status.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/netns.h"

namespace gravac::netemu {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kPrefix[] = "gvctest";
constexpr int kPort = 7000;

// OK when this machine lets us create network namespaces (root with CAP_SYS_ADMIN and
// CAP_NET_ADMIN, iproute2 present); probed once by adding and deleting a throwaway namespace.
absl::Status NamespacesUsable() {
  if (geteuid() != 0) return absl::PermissionDeniedError("network namespaces need root");
  const std::string probe = absl::StrCat("gvcprobe-", getpid());
  RETURN_IF_ERROR(RunChecked({"ip", "netns", "add", probe}).status());
  return RunChecked({"ip", "netns", "del", probe}).status();
}

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { usable_ = new absl::Status(NamespacesUsable()); }
  static void TearDownTestSuite() {
    delete usable_;
    usable_ = nullptr;
  }
  void SetUp() override {
    if (!usable_->ok()) GTEST_SKIP() << "no network namespaces here: " << *usable_;
  }
  static absl::Status* usable_;
};
absl::Status* ClusterTest::usable_ = nullptr;

bool NamespaceExists(const std::string& netns) {
  absl::StatusOr<std::vector<std::string>> all = ListNamespaces();
  return all.ok() && std::find(all->begin(), all->end(), netns) != all->end();
}

// Waits (bounded) until none of `namespaces` exists; true when they are all gone.
bool AllGoneWithin(const std::vector<std::string>& namespaces, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (true) {
    bool any = std::any_of(namespaces.begin(), namespaces.end(), NamespaceExists);
    if (!any) return true;
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

sockaddr_in Address(const std::string& ip, int port) {
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  return addr;
}

// A listening TCP socket bound to node `node`'s address, inside its namespace.
absl::StatusOr<int> Listen(const Cluster& c, int node, int port) {
  int fd = -1;
  RETURN_IF_ERROR(RunInNetns(c.node_namespace(node), [&]() -> absl::Status {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr = Address(c.node_address(node), port);
    GRAVAC_RETURN_IF_ERRNO(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
    GRAVAC_RETURN_IF_ERRNO(listen(fd, 8));
    return absl::OkStatus();
  }));
  return fd;
}

// Connects from node `from` to `to_ip`:`port` and sends `message`.
absl::Status ConnectAndSend(const Cluster& c, int from, const std::string& to_ip, int port,
                            const std::string& message) {
  return RunInNetns(c.node_namespace(from), [&]() -> absl::Status {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    absl::Cleanup closer = [fd] { close(fd); };
    sockaddr_in addr = Address(to_ip, port);
    GRAVAC_RETURN_IF_ERRNO(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
    GRAVAC_RETURN_IF_ERRNO(send(fd, message.data(), message.size(), MSG_NOSIGNAL));
    return absl::OkStatus();
  });
}

// TCP from `from` to `to` inside cluster `c`: the message arrives.
void ExpectTcpWorks(const Cluster& c, int from, int to) {
  SCOPED_TRACE(absl::StrCat(c.name(), ": node ", from, " -> node ", to));
  ASSERT_OK_AND_ASSIGN(int listener, Listen(c, to, kPort + from));
  absl::Cleanup close_listener = [listener] { close(listener); };
  const std::string message = absl::StrCat("hello from node ", from);
  ASSERT_THAT(ConnectAndSend(c, from, c.node_address(to), kPort + from, message), IsOk());
  int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(conn, 0);
  char buf[64] = {};
  ssize_t got = recv(conn, buf, sizeof(buf), MSG_WAITALL);
  close(conn);
  EXPECT_EQ(std::string(buf, std::max<ssize_t>(got, 0)), message);
}

TEST_F(ClusterTest, TwoNodesTalkTcpAndHaveNoDefaultRoute) {
  ASSERT_OK_AND_ASSIGN(auto c, Cluster::Create(2, {.rate_bits_per_s = 1e9}, kPrefix));
  EXPECT_EQ(c->size(), 2);
  EXPECT_THAT(c->subnet(), ::testing::StartsWith("198.1"));
  ExpectTcpWorks(*c, 0, 1);
  ExpectTcpWorks(*c, 1, 0);
  for (int node = 0; node < 2; ++node) {
    ASSERT_OK_AND_ASSIGN(CommandResult routes, c->Run(node, {"ip", "-4", "route", "show"}));
    EXPECT_EQ(routes.out.find("default"), std::string::npos) << routes.out;
    EXPECT_THAT(routes.out, HasSubstr(c->subnet().substr(0, c->subnet().size() - 3)));
    // A route lookup (no packet is sent) for an outside address fails: nothing leaves the cluster.
    ASSERT_OK_AND_ASSIGN(CommandResult outside, c->Run(node, {"ip", "route", "get", "1.1.1.1"}));
    EXPECT_NE(outside.status.exit_code, 0);
    EXPECT_THAT(outside.err, HasSubstr("unreachable"));
  }
}

TEST_F(ClusterTest, ThreeNodesAllPairsReachable) {
  ASSERT_OK_AND_ASSIGN(auto c, Cluster::Create(3, {.rate_bits_per_s = 1e9}, kPrefix));
  for (int from = 0; from < 3; ++from) {
    for (int to = 0; to < 3; ++to) {
      if (from != to) ExpectTcpWorks(*c, from, to);
    }
  }
}

TEST_F(ClusterTest, SpawnRunsInTheNodeWithItsEnvironment) {
  ASSERT_OK_AND_ASSIGN(auto c, Cluster::Create(2, {.rate_bits_per_s = 1e9}, kPrefix));
  ASSERT_OK_AND_ASSIGN(
      Process p,
      c->Spawn(1,
               {"sh", "-c",
                "ip -4 -o addr show dev eth0 && echo $NODE_TAG && "
                "ls /sys/class/net"},
               {.netns = "", .env = {{"NODE_TAG", "tag-1"}}, .output = OutputMode::kCapture}));
  ASSERT_OK_AND_ASSIGN(CommandResult r, p.Collect(absl::Seconds(10)));
  EXPECT_TRUE(r.status.success()) << r.err;
  EXPECT_THAT(r.out, HasSubstr(c->node_address(1) + "/24"));
  EXPECT_THAT(r.out, HasSubstr("tag-1"));
  // /sys is the node's: exactly eth0 and lo.
  EXPECT_THAT(r.out, ::testing::EndsWith("eth0\nlo\n"));
  EXPECT_THAT(c->Spawn(2, {"true"}), StatusIs(absl::StatusCode::kOutOfRange));
}

TEST_F(ClusterTest, Iperf3MeasuresTheShapedRate) {
  const double rate = 1e9;
  ASSERT_OK_AND_ASSIGN(auto c, Cluster::Create(2, {.rate_bits_per_s = rate}, kPrefix));
  ASSERT_OK_AND_ASSIGN(double bps, c->MeasureRateIperf3(0, 1, absl::Seconds(2)));
  const double ratio = bps / rate;
  std::printf("iperf3 on a %.3g bit/s link: %.4g bit/s, ratio %.3f\n", rate, bps, ratio);
  RecordProperty("iperf3_ratio", absl::StrCat(ratio));
  EXPECT_GT(ratio, 0.6);
  EXPECT_LT(ratio, 1.05);
}

TEST_F(ClusterTest, DelayShowsInTheConnectTime) {
  // One-way 20 ms: a TCP handshake (connect returns after SYN, SYN-ACK) takes one RTT = 40 ms.
  absl::StatusOr<std::unique_ptr<Cluster>> created =
      Cluster::Create(2, {.rate_bits_per_s = 1e9, .delay = absl::Milliseconds(20)}, kPrefix);
  if (created.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << created.status();
  }
  ASSERT_OK_AND_ASSIGN(auto c, std::move(created));
  ASSERT_OK_AND_ASSIGN(int listener, Listen(*c, 1, kPort));
  absl::Cleanup close_listener = [listener] { close(listener); };
  absl::Time start = absl::Now();
  ASSERT_THAT(ConnectAndSend(*c, 0, c->node_address(1), kPort, "x"), IsOk());
  absl::Duration rtt = absl::Now() - start;
  EXPECT_GE(rtt, absl::Milliseconds(38));
  EXPECT_LT(rtt, absl::Seconds(1));
}

TEST_F(ClusterTest, EnterNetnsMovesAForkedChildWithItsOwnSys) {
  ASSERT_OK_AND_ASSIGN(auto c, Cluster::Create(1, {}, kPrefix));
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    absl::Status entered = EnterNetns(c->node_namespace(0));
    std::string report = entered.ok() ? "" : entered.ToString();
    // /sys must be the namespace's: its eth0 is the node's veth end, whatever the host has.
    absl::StatusOr<CommandResult> mac = RunCommand({"cat", "/sys/class/net/eth0/address"});
    if (mac.ok()) report += mac->out;
    ssize_t ignored = write(fds[1], report.data(), report.size());
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  std::string report;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) report.append(buf, n);
  close(fds[0]);
  waitpid(child, nullptr, 0);
  ASSERT_OK_AND_ASSIGN(std::string link, RunChecked({"ip", "-n", c->node_namespace(0), "-o", "link",
                                                     "show", "eth0"}));
  ASSERT_THAT(report, ::testing::MatchesRegex("[0-9a-f:]{17}\n")) << report;
  EXPECT_THAT(link, HasSubstr("link/ether " + report.substr(0, 17)));
  // The test process itself stays where it was.
  ASSERT_OK_AND_ASSIGN(CommandResult host, RunCommand({"cat", "/sys/class/net/eth0/address"}));
  EXPECT_NE(host.out, report);
  EXPECT_THAT(EnterNetns("../etc"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(ClusterTest, DestroyRemovesEveryNamespace) {
  ASSERT_OK_AND_ASSIGN(auto c, Cluster::Create(3, {.rate_bits_per_s = 1e9}, kPrefix));
  std::vector<std::string> namespaces = c->namespaces();
  ASSERT_EQ(namespaces.size(), 4u);
  for (const std::string& ns : namespaces) EXPECT_TRUE(NamespaceExists(ns)) << ns;
  // A process left running inside a node must not keep it alive.
  ASSERT_OK_AND_ASSIGN(Process sleeper, c->Spawn(0, {"sleep", "60"}));
  ASSERT_THAT(c->Destroy(), IsOk());
  for (const std::string& ns : namespaces) EXPECT_FALSE(NamespaceExists(ns)) << ns;
  ASSERT_OK_AND_ASSIGN(ExitStatus status, sleeper.Wait(absl::Seconds(10)));
  EXPECT_EQ(status.term_signal, SIGKILL);
  EXPECT_THAT(c->Destroy(), IsOk());  // idempotent
  c.reset();
  for (const std::string& ns : namespaces) EXPECT_FALSE(NamespaceExists(ns)) << ns;
}

TEST_F(ClusterTest, CreateRejectsBadArguments) {
  EXPECT_THAT(Cluster::Create(0, {}, kPrefix), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Cluster::Create(2, {}, "bad-prefix"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Cluster::Create(2, {.rate_bits_per_s = -1}, kPrefix),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Forks a child that creates a 2-node cluster, reports its name and then waits to be killed.
std::string CreateInChildAndKill(const ClusterOptions& options) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    absl::StatusOr<std::unique_ptr<Cluster>> c = Cluster::Create(2, {}, options);
    std::string name = c.ok() ? (*c)->name() : "";
    name += "\n";
    if (write(fds[1], name.data(), name.size()) < 0) _exit(1);
    while (true) pause();
  }
  close(fds[1]);
  std::string name;
  char ch;
  while (read(fds[0], &ch, 1) == 1 && ch != '\n') name += ch;
  close(fds[0]);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return name;
}

TEST_F(ClusterTest, GuardianRemovesTheClusterOfAKilledOwner) {
  std::string name = CreateInChildAndKill({.name_prefix = kPrefix});
  ASSERT_THAT(name, Not(IsEmpty()));
  std::optional<ClusterName> parsed = ParseClusterName(name);
  ASSERT_TRUE(parsed.has_value()) << name;
  EXPECT_TRUE(
      AllGoneWithin({parsed->NodeNamespace(0), parsed->NodeNamespace(1), parsed->HubNamespace()},
                    absl::Seconds(20)))
      << name << " outlived its owner";
}

TEST_F(ClusterTest, CleanupStaleRemovesOnlyDeadOwnersClusters) {
  ASSERT_OK_AND_ASSIGN(auto live, Cluster::Create(1, {}, kPrefix));
  std::string name = CreateInChildAndKill({.name_prefix = kPrefix, .guardian = false});
  ASSERT_THAT(name, Not(IsEmpty()));
  std::optional<ClusterName> parsed = ParseClusterName(name);
  ASSERT_TRUE(parsed.has_value()) << name;
  // Without a guardian the dead owner's namespaces stay until a cleanup.
  EXPECT_TRUE(NamespaceExists(parsed->HubNamespace()));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> removed, CleanupStale(kPrefix));
  EXPECT_THAT(removed, ::testing::Contains(name));
  EXPECT_THAT(removed, Not(::testing::Contains(live->name())));
  EXPECT_FALSE(NamespaceExists(parsed->HubNamespace()));
  EXPECT_FALSE(NamespaceExists(parsed->NodeNamespace(0)));
  EXPECT_TRUE(NamespaceExists(live->hub_namespace()));
}

TEST_F(ClusterTest, TwoClustersAtOnceDoNotCollide) {
  ASSERT_OK_AND_ASSIGN(auto a, Cluster::Create(2, {.rate_bits_per_s = 1e9}, kPrefix));
  ASSERT_OK_AND_ASSIGN(auto b, Cluster::Create(2, {.rate_bits_per_s = 1e9}, kPrefix));
  EXPECT_NE(a->name(), b->name());
  EXPECT_NE(a->subnet(), b->subnet());
  ExpectTcpWorks(*a, 0, 1);
  ExpectTcpWorks(*b, 0, 1);
  // Clusters are isolated: a node of `a` cannot reach a node of `b` (no route; nothing is sent).
  ASSERT_OK_AND_ASSIGN(CommandResult cross, a->Run(0, {"ip", "route", "get", b->node_address(1)}));
  EXPECT_NE(cross.status.exit_code, 0);
  std::vector<std::string> b_namespaces = b->namespaces();
  b.reset();
  for (const std::string& ns : b_namespaces) EXPECT_FALSE(NamespaceExists(ns)) << ns;
  ExpectTcpWorks(*a, 1, 0);
}

// Connects from this process (the host's namespace) to `ip`:`port` and sends `message`.
absl::Status ConnectFromHost(const std::string& ip, int port, const std::string& message) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  absl::Cleanup closer = [fd] { close(fd); };
  sockaddr_in addr = Address(ip, port);
  GRAVAC_RETURN_IF_ERRNO(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
  GRAVAC_RETURN_IF_ERRNO(send(fd, message.data(), message.size(), MSG_NOSIGNAL));
  return absl::OkStatus();
}

std::string ReadAll(int listener) {
  int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return "";
  char buf[64] = {};
  ssize_t got = recv(conn, buf, sizeof(buf), MSG_WAITALL);
  close(conn);
  return std::string(buf, std::max<ssize_t>(got, 0));
}

bool HostDeviceExists(const std::string& device) {
  return access(absl::StrCat("/sys/class/net/", device).c_str(), F_OK) == 0;
}

TEST_F(ClusterTest, HostLinkReachesEveryNodeUnshapedAndNodesStayIsolated) {
  ASSERT_OK_AND_ASSIGN(auto c,
                       Cluster::Create(2, {.rate_bits_per_s = 1e9},
                                       ClusterOptions{.name_prefix = kPrefix, .host_link = true}));
  ASSERT_TRUE(c->has_host_link());
  EXPECT_EQ(c->host_link_address(), c->subnet().substr(0, c->subnet().size() - 4) + "254");
  const std::string dev = c->host_link_device();
  ASSERT_TRUE(HostDeviceExists(dev)) << dev;
  // Host -> every node.
  for (int node = 0; node < 2; ++node) {
    SCOPED_TRACE(absl::StrCat("host -> node ", node));
    ASSERT_OK_AND_ASSIGN(int listener, Listen(*c, node, kPort + 10 + node));
    absl::Cleanup close_listener = [listener] { close(listener); };
    ASSERT_THAT(ConnectFromHost(c->node_address(node), kPort + 10 + node, "scrape"), IsOk());
    EXPECT_EQ(ReadAll(listener), "scrape");
  }
  // Node -> the host's address (and nothing beyond the /24).
  {
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    absl::Cleanup close_listener = [listener] { close(listener); };
    sockaddr_in addr = Address(c->host_link_address(), kPort + 20);
    ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(listener, 4), 0);
    ASSERT_THAT(ConnectAndSend(*c, 1, c->host_link_address(), kPort + 20, "hello host"), IsOk());
    EXPECT_EQ(ReadAll(listener), "hello host");
  }
  for (int node = 0; node < 2; ++node) {
    ASSERT_OK_AND_ASSIGN(CommandResult routes, c->Run(node, {"ip", "-4", "route", "show"}));
    EXPECT_EQ(routes.out.find("default"), std::string::npos) << routes.out;
    ASSERT_OK_AND_ASSIGN(CommandResult outside, c->Run(node, {"ip", "route", "get", "1.1.1.1"}));
    EXPECT_NE(outside.status.exit_code, 0);
  }
  // Node links keep their shaping; the host link has none.
  ASSERT_OK_AND_ASSIGN(std::string node_qdisc, RunChecked({"tc", "-n", c->node_namespace(0),
                                                           "qdisc", "show", "dev", "eth0"}));
  EXPECT_THAT(node_qdisc, HasSubstr("tbf"));
  ExpectTcpWorks(*c, 0, 1);
  ASSERT_OK_AND_ASSIGN(std::string host_qdisc, RunChecked({"tc", "qdisc", "show", "dev", dev}));
  EXPECT_THAT(host_qdisc, Not(HasSubstr("tbf")));
  ASSERT_OK_AND_ASSIGN(std::string hub_qdisc, RunChecked({"tc", "-n", c->hub_namespace(), "qdisc",
                                                          "show", "dev", "host"}));
  EXPECT_THAT(hub_qdisc, Not(HasSubstr("tbf")));
  ASSERT_OK_AND_ASSIGN(auto attached, Cluster::Attach(c->name()));
  EXPECT_EQ(attached->host_link_address(), c->host_link_address());
  // Destroy removes the host's end at once.
  ASSERT_THAT(c->Destroy(), IsOk());
  EXPECT_FALSE(HostDeviceExists(dev));
}

TEST_F(ClusterTest, HostLinkLimitsTheSizeAndIsOffByDefault) {
  EXPECT_THAT(Cluster::Create(254, {}, ClusterOptions{.name_prefix = kPrefix, .host_link = true}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 253")));
  ASSERT_OK_AND_ASSIGN(auto c, Cluster::Create(1, {}, kPrefix));
  EXPECT_FALSE(c->has_host_link());
  EXPECT_EQ(c->host_link_address(), "");
  EXPECT_FALSE(HostDeviceExists(ParseClusterName(c->name())->HostLinkDevice()));
}

TEST_F(ClusterTest, GuardianRemovesTheHostLinkOfAKilledOwner) {
  std::string name = CreateInChildAndKill({.name_prefix = kPrefix, .host_link = true});
  ASSERT_THAT(name, Not(IsEmpty()));
  std::optional<ClusterName> parsed = ParseClusterName(name);
  ASSERT_TRUE(parsed.has_value()) << name;
  EXPECT_TRUE(AllGoneWithin({parsed->HubNamespace()}, absl::Seconds(20))) << name;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (HostDeviceExists(parsed->HostLinkDevice()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_FALSE(HostDeviceExists(parsed->HostLinkDevice())) << name;
}

TEST_F(ClusterTest, CleanupStaleRemovesTheHostLinkAtOnce) {
  std::string name =
      CreateInChildAndKill({.name_prefix = kPrefix, .guardian = false, .host_link = true});
  ASSERT_THAT(name, Not(IsEmpty()));
  std::optional<ClusterName> parsed = ParseClusterName(name);
  ASSERT_TRUE(parsed.has_value()) << name;
  EXPECT_TRUE(HostDeviceExists(parsed->HostLinkDevice()));  // no guardian: still there
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> removed, CleanupStale(kPrefix));
  EXPECT_THAT(removed, ::testing::Contains(name));
  EXPECT_FALSE(HostDeviceExists(parsed->HostLinkDevice()));
}

TEST_F(ClusterTest, AttachFindsAClusterByName) {
  ASSERT_OK_AND_ASSIGN(auto c, Cluster::Create(3, {}, kPrefix));
  ASSERT_OK_AND_ASSIGN(auto attached, Cluster::Attach(c->name()));
  EXPECT_EQ(attached->size(), 3);
  EXPECT_EQ(attached->node_address(2), c->node_address(2));
  attached.reset();  // not owned: leaves the namespaces
  EXPECT_TRUE(NamespaceExists(c->node_namespace(2)));
  EXPECT_THAT(Cluster::Attach("gvctest-1-s999"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Cluster::Attach("gvctest-1-s1"), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace gravac::netemu
