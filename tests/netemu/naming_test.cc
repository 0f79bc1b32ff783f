#include "netemu/naming.h"

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::netemu {
namespace {

TEST(NamingTest, AddressesFollowTheBenchmarkingRange) {
  ClusterName low{"gravac", 42, 7};
  EXPECT_EQ(low.ToString(), "gravac-42-s7");
  EXPECT_EQ(low.HubNamespace(), "gravac-42-s7-hub");
  EXPECT_EQ(low.NodeNamespace(3), "gravac-42-s7-n3");
  EXPECT_EQ(low.NodeAddress(0), "198.18.7.1");
  EXPECT_EQ(low.SubnetCidr(), "198.18.7.0/24");
  ClusterName high{"t", 1, 511};
  EXPECT_EQ(high.NodeAddress(253), "198.19.255.254");
  EXPECT_EQ(high.SubnetCidr(), "198.19.255.0/24");
}

TEST(NamingTest, HostLinkTakesTheLastHostByteAndAShortDeviceName) {
  EXPECT_EQ((ClusterName{"gravac", 42, 7}).HostLinkAddress(), "198.18.7.254");
  EXPECT_EQ((ClusterName{"gravac", 42, 7}).HostLinkDevice(), "gvch7");
  ClusterName high{"a_long_prefix_of_thirty_two_char", 4194304, 511};
  EXPECT_EQ(high.HostLinkAddress(), "198.19.255.254");
  EXPECT_EQ(high.HostLinkAddress(), high.NodeAddress(kHostLinkByte - 1));  // so <= 253 nodes
  EXPECT_LE(high.HostLinkDevice().size(), 15u);                            // IFNAMSIZ - 1
}

TEST(NamingTest, ParseRoundTrips) {
  std::optional<ClusterName> name = ParseClusterName("bench_1.x-12345-s300");
  ASSERT_TRUE(name.has_value());
  EXPECT_EQ(name->prefix, "bench_1.x");
  EXPECT_EQ(name->pid, 12345);
  EXPECT_EQ(name->subnet, 300);
  EXPECT_EQ(name->ToString(), "bench_1.x-12345-s300");
}

TEST(NamingTest, ParseRejectsOtherNames) {
  for (const char* bad :
       {"", "gravac", "gravac-12", "gravac-12-s", "gravac-12-s512", "-12-s3", "gravac-0-s3",
        "gravac-x-s3", "gravac-12-s03", "gra-vac-12-s3", "gravac-12-s3-hub"}) {
    EXPECT_FALSE(ParseClusterName(bad).has_value()) << bad;
  }
}

TEST(NamingTest, ParseNamespaceNames) {
  std::optional<NamespaceRef> hub = ParseNamespaceName("gravac-9-s1-hub");
  ASSERT_TRUE(hub.has_value());
  EXPECT_EQ(hub->node, -1);
  EXPECT_EQ(hub->cluster.pid, 9);
  std::optional<NamespaceRef> node = ParseNamespaceName("gravac-9-s1-n12");
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->node, 12);
  EXPECT_EQ(node->cluster.subnet, 1);
  for (const char* bad : {"gravac-9-s1", "gravac-9-s1-n", "gravac-9-s1-n01", "gravac-9-s1-x",
                          "gravac-9-s1-n254", "other", "cni-1234"}) {
    EXPECT_FALSE(ParseNamespaceName(bad).has_value()) << bad;
  }
}

TEST(NamingTest, ValidatePrefix) {
  EXPECT_THAT(ValidatePrefix("gravac"), IsOk());
  EXPECT_THAT(ValidatePrefix(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidatePrefix("a-b"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidatePrefix("a/b"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidatePrefix(std::string(33, 'a')), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace gravac::netemu
