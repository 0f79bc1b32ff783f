// proto/grpc_security.h: the TLS settings are required unless plain text is chosen explicitly,
// the two contradict each other, files that are missing or not PEM are refused naming the
// setting, and each role needs what it uses.
#include "proto/grpc_security.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "core/tls_settings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::proto {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<GrpcSecurity> Parse(std::vector<const char*> args, GrpcRole role,
                                   std::map<std::string, std::string, std::less<>> env = {}) {
  std::vector<SettingSpec> table(std::begin(kTlsSettings), std::end(kTlsSettings));
  table.insert(table.end(), std::begin(kTlsClientSettings), std::end(kTlsClientSettings));
  ASSIGN_OR_RETURN(Settings s, Settings::Parse(table, args, FixedEnvironment(std::move(env))));
  return GrpcSecurityFromSettings(s, role);
}

class GrpcSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/grpc_security_" + std::to_string(getpid());
    mkdir(dir_.c_str(), 0700);
    for (const char* name : {"a.crt", "a.key", "ca.crt"}) {
      std::ofstream(dir_ + "/" + name) << "-----BEGIN X-----\nAAAA\n-----END X-----\n";
    }
    std::ofstream(dir_ + "/junk") << "not a certificate\n";
    cert_ = "--tls_cert=" + dir_ + "/a.crt";
    key_ = "--tls_key=" + dir_ + "/a.key";
    ca_ = "--tls_ca=" + dir_ + "/ca.crt";
  }
  void TearDown() override {
    for (const char* name : {"a.crt", "a.key", "ca.crt", "junk"}) {
      unlink((dir_ + "/" + name).c_str());
    }
    rmdir(dir_.c_str());
  }
  std::string dir_, cert_, key_, ca_;
};

TEST_F(GrpcSecurityTest, NothingGivenIsRefusedPointingAtBothChoices) {
  for (GrpcRole role : {GrpcRole::kServer, GrpcRole::kNodeClient, GrpcRole::kClient}) {
    EXPECT_THAT(Parse({}, role), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("--insecure_plaintext")));
  }
}

TEST_F(GrpcSecurityTest, ExplicitPlaintext) {
  ASSERT_OK_AND_ASSIGN(GrpcSecurity s, Parse({"--insecure_plaintext"}, GrpcRole::kServer));
  EXPECT_TRUE(s.plaintext);
  ASSERT_OK_AND_ASSIGN(GrpcSecurity e, Parse({}, GrpcRole::kNodeClient,
                                             {{"GRAVAC_INSECURE_PLAINTEXT", "true"}}));
  EXPECT_TRUE(e.plaintext);
  EXPECT_THAT(Parse({"--insecure_plaintext", ca_.c_str()}, GrpcRole::kClient),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("contradict")));
}

TEST_F(GrpcSecurityTest, FilesAreLoadedAndTheServerNameKept) {
  ASSERT_OK_AND_ASSIGN(
      GrpcSecurity s,
      Parse({cert_.c_str(), key_.c_str(), ca_.c_str(), "--tls_server_name=ctl.svc"},
            GrpcRole::kNodeClient));
  EXPECT_FALSE(s.plaintext);
  EXPECT_THAT(s.cert_pem, HasSubstr("-----BEGIN X-----"));
  EXPECT_THAT(s.key_pem, HasSubstr("AAAA"));
  EXPECT_THAT(s.ca_pem, HasSubstr("-----END X-----"));
  EXPECT_EQ(s.server_name, "ctl.svc");
  EXPECT_THAT(s.origin, HasSubstr("a.crt"));
}

TEST_F(GrpcSecurityTest, EachRoleNeedsWhatItUses) {
  // The server and a daemon need their certificate and key; gravacctl only the CA.
  EXPECT_THAT(Parse({ca_.c_str()}, GrpcRole::kServer),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_cert")));
  EXPECT_THAT(Parse({ca_.c_str()}, GrpcRole::kNodeClient),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_cert")));
  ASSERT_OK_AND_ASSIGN(GrpcSecurity c, Parse({ca_.c_str()}, GrpcRole::kClient));
  EXPECT_TRUE(c.cert_pem.empty());
  EXPECT_THAT(Parse({ca_.c_str(), cert_.c_str()}, GrpcRole::kClient),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("go together")));
}

TEST_F(GrpcSecurityTest, MissingOrNonPemFilesNameTheSetting) {
  const std::string missing = "--tls_ca=" + dir_ + "/nope.crt";
  EXPECT_THAT(Parse({cert_.c_str(), key_.c_str(), missing.c_str()}, GrpcRole::kServer),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("--tls_ca: cannot read")));
  const std::string junk = "--tls_key=" + dir_ + "/junk";
  EXPECT_THAT(Parse({cert_.c_str(), junk.c_str(), ca_.c_str()}, GrpcRole::kServer),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_key: '")));
}

}  // namespace
}  // namespace gravac::proto
