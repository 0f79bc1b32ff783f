#include <map>
#include <string>

#include "client/src/client.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::client {
namespace {

using namespace ::gravac::testing;  // NOLINT: IsOk, StatusIs
using ::testing::HasSubstr;

TEST(ClientConfigTest, ReadsTheGravacEnvironment) {
  auto c = ConfigFromEnvironment(FixedEnvironment({{"GRAVAC_RANK", "3"},
                                                   {"GRAVAC_SIZE", "4"},
                                                   {"GRAVAC_LOCAL_RANK", "1"},
                                                   {"GRAVAC_LOCAL_SIZE", "2"},
                                                   {"GRAVAC_DAEMON_SOCKET", "/tmp/x.sock"},
                                                   {"GRAVAC_STAGING_BYTES", "4096"},
                                                   {"GRAVAC_CONNECT_TIMEOUT_S", "0.5"}}));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->rank, 3);
  EXPECT_EQ(c->size, 4);
  EXPECT_EQ(c->local_rank, 1);
  EXPECT_EQ(c->local_size, 2);
  EXPECT_EQ(c->daemon_socket, "/tmp/x.sock");
  EXPECT_EQ(c->staging_bytes, 4096u);
  EXPECT_EQ(c->connect_timeout, absl::Milliseconds(500));
  EXPECT_TRUE(c->zero_copy);  // the default
  auto off = ConfigFromEnvironment(FixedEnvironment({{"GRAVAC_ZERO_COPY", "0"}}));
  ASSERT_THAT(off, IsOk());
  EXPECT_FALSE(off->zero_copy);
}

TEST(ClientConfigTest, BadValuesNameTheVariable) {
  EXPECT_THAT(ConfigFromEnvironment(FixedEnvironment({{"GRAVAC_RANK", "x"}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("GRAVAC_RANK")));
  EXPECT_THAT(ConfigFromEnvironment(FixedEnvironment({{"GRAVAC_ZERO_COPY", "maybe"}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("GRAVAC_ZERO_COPY")));
}

TEST(ClientConfigTest, MissingEnvironmentIsRefusedBeforeConnecting) {
  auto c = ConfigFromEnvironment(FixedEnvironment({}));
  ASSERT_THAT(c, IsOk());
  EXPECT_THAT(Client::Connect(*c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("GRAVAC_SIZE")));
  c->size = 2;
  c->rank = 0;
  c->local_size = 1;
  c->local_rank = 0;
  EXPECT_THAT(Client::Connect(*c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("GRAVAC_DAEMON_SOCKET")));
}

}  // namespace
}  // namespace gravac::client
