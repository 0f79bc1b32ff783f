#include "core/ipc/unix_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::ipc {
namespace {

ListenOptions Opts(std::string path, std::string group = "", bool nonblocking = true) {
  ListenOptions o;
  o.path = std::move(path);
  o.group = std::move(group);
  o.nonblocking = nonblocking;
  return o;
}

class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gravac_sock_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/d.sock";
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::unlink((dir_ + "/file").c_str());
    ::rmdir(dir_.c_str());
  }
  std::string dir_, path_;
};

TEST_F(UnixSocketTest, ListensWithMode0600AndAcceptsConnections) {
  auto listener = ListenUnix(Opts(path_, "", false));
  ASSERT_THAT(listener, IsOk());
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto client = ConnectUnix(path_, absl::Seconds(2));
  ASSERT_THAT(client, IsOk());
  UniqueFd accepted(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_TRUE(accepted.valid());
}

TEST_F(UnixSocketTest, RefusesSecondServerOnTheSamePath) {
  auto first = ListenUnix(Opts(path_));
  ASSERT_THAT(first, IsOk());
  EXPECT_THAT(ListenUnix(Opts(path_)), StatusIs(absl::StatusCode::kAlreadyExists));
  // The first server still works.
  EXPECT_THAT(ConnectUnix(path_, absl::Seconds(2)), IsOk());
}

TEST_F(UnixSocketTest, ReplacesStaleSocketFile) {
  {
    // A socket bound and closed leaves a file nobody listens on.
    UniqueFd s(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_.c_str());
    ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  auto listener = ListenUnix(Opts(path_));
  ASSERT_THAT(listener, IsOk());
  EXPECT_THAT(ConnectUnix(path_, absl::Seconds(2)), IsOk());
}

TEST_F(UnixSocketTest, RefusesToReplaceARegularFile) {
  std::ofstream(dir_ + "/file") << "data";
  EXPECT_THAT(ListenUnix(Opts(dir_ + "/file")), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(UnixSocketTest, RejectsLongPathAndUnknownGroup) {
  EXPECT_THAT(ListenUnix(Opts("/tmp/" + std::string(200, 'x'))),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ListenUnix(Opts(path_, "no-such-group-gravac")),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(UnixSocketTest, GroupModeIs0660) {
  auto listener = ListenUnix(Opts(path_, "root"));
  if (!listener.ok()) GTEST_SKIP() << "cannot chgrp to root here: " << listener.status();
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, 0u);
}

TEST_F(UnixSocketTest, ConnectTimesOutWithoutServer) {
  const absl::Time start = absl::Now();
  EXPECT_THAT(ConnectUnix(path_, absl::Milliseconds(200)),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

}  // namespace
}  // namespace gravac::ipc
