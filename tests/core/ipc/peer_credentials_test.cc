#include "core/ipc/peer_credentials.h"

#include <grp.h>
#include <unistd.h>

#include "core/ipc/unix_socket.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::ipc {
namespace {

using namespace ::gravac::testing;  // NOLINT: IsOk, StatusIs
using ::testing::HasSubstr;

TEST(PeerCredentialsTest, SocketPairReportsThisProcess) {
  UniqueFd a, b;
  ASSERT_THAT(SocketPair(&a, &b), IsOk());
  ASSERT_OK_AND_ASSIGN(PeerCredentials peer, GetPeerCredentials(a.get()));
  EXPECT_EQ(peer.pid, ::getpid());
  EXPECT_EQ(peer.uid, ::geteuid());
  EXPECT_EQ(peer.gid, ::getegid());
}

TEST(PeerCredentialsTest, OwnerAndRootAreAdmitted) {
  const PeerPolicy policy{.uid = 1000, .group = std::nullopt};
  EXPECT_THAT(CheckPeer({.pid = 5, .uid = 1000, .gid = 1000}, policy), IsOk());
  EXPECT_THAT(CheckPeer({.pid = 5, .uid = 0, .gid = 0}, policy), IsOk());
}

TEST(PeerCredentialsTest, OtherUsersAreRefusedNamingThem) {
  const PeerPolicy policy{.uid = 1000, .group = std::nullopt};
  EXPECT_THAT(CheckPeer({.pid = 77, .uid = 1001, .gid = 1001}, policy),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("process 77 (uid 1001, gid 1001) may not use this daemon")));
}

TEST(PeerCredentialsTest, GroupMembersAreAdmittedWhenTheGroupIsShared) {
  const PeerPolicy shared{.uid = 1000, .group = 4242};
  EXPECT_THAT(CheckPeer({.pid = 5, .uid = 1001, .gid = 4242}, shared), IsOk());
  EXPECT_THAT(CheckPeer({.pid = 5, .uid = 1001, .gid = 4243}, shared),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("admits group 4242")));
}

TEST(PeerCredentialsTest, PolicyForThisUser) {
  ASSERT_OK_AND_ASSIGN(PeerPolicy own, PolicyForThisUser(""));
  EXPECT_EQ(own.uid, ::geteuid());
  EXPECT_FALSE(own.group.has_value());
  group* g = ::getgrgid(::getegid());
  ASSERT_NE(g, nullptr);
  ASSERT_OK_AND_ASSIGN(PeerPolicy grouped, PolicyForThisUser(g->gr_name));
  EXPECT_EQ(grouped.group, ::getegid());
  EXPECT_THAT(PolicyForThisUser("no-such-group-gravac"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown socket group")));
}

}  // namespace
}  // namespace gravac::ipc
