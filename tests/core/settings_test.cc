#include "core/settings.h"

#include <vector>

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace gravac {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr SettingSpec kTable[] = {
    {"theta_min", "GRAVAC_THETA_MIN", "10", "least compression", SettingType::kDouble},
    {"window", "GRAVAC_WINDOW", "25", "tracker window", SettingType::kInt},
    {"compressor", "GRAVAC_COMPRESSOR", "topk", "compressor name", SettingType::kString},
    {"verbose", "", "false", "log more", SettingType::kBool},
};

absl::StatusOr<Settings> Parse(std::vector<const char*> args,
                               std::map<std::string, std::string, std::less<>> env = {}) {
  return Settings::Parse(kTable, args, FixedEnvironment(std::move(env)));
}

TEST(Settings, DefaultsWhenNothingIsGiven) {
  ASSERT_OK_AND_ASSIGN(Settings s, Parse({}));
  EXPECT_EQ(*s.GetDouble("theta_min"), 10.0);
  EXPECT_EQ(*s.GetInt("window"), 25);
  EXPECT_EQ(*s.GetString("compressor"), "topk");
  EXPECT_FALSE(*s.GetBool("verbose"));
  EXPECT_EQ(*s.Source("window"), "default");
  EXPECT_FALSE(s.help_requested());
}

TEST(Settings, FlagBeatsEnvBeatsDefault) {
  ASSERT_OK_AND_ASSIGN(Settings s, Parse({"--window=50"}, {{"GRAVAC_WINDOW", "40"},
                                                             {"GRAVAC_THETA_MIN", "20"}}));
  EXPECT_EQ(*s.GetInt("window"), 50);
  EXPECT_EQ(*s.Source("window"), "flag");
  EXPECT_EQ(*s.GetDouble("theta_min"), 20.0);
  EXPECT_EQ(*s.Source("theta_min"), "env GRAVAC_THETA_MIN");
}

TEST(Settings, SeparateValueAndBareBoolean) {
  ASSERT_OK_AND_ASSIGN(Settings s, Parse({"--compressor", "dgc", "--verbose"}));
  EXPECT_EQ(*s.GetString("compressor"), "dgc");
  EXPECT_TRUE(*s.GetBool("verbose"));
  ASSERT_OK_AND_ASSIGN(Settings t, Parse({"--verbose", "no"}));
  EXPECT_FALSE(*t.GetBool("verbose"));
}

TEST(Settings, PositionalAfterDoubleDash) {
  ASSERT_OK_AND_ASSIGN(Settings s, Parse({"--window", "3", "--", "python3", "--window=9"}));
  EXPECT_EQ(*s.GetInt("window"), 3);
  EXPECT_THAT(s.positional(), ElementsAre("python3", "--window=9"));
}

TEST(Settings, HelpIsReportedAndListsEverySetting) {
  ASSERT_OK_AND_ASSIGN(Settings s, Parse({"--help"}));
  EXPECT_TRUE(s.help_requested());
  std::string help = Settings::Help(kTable, "gravacd");
  EXPECT_THAT(help, HasSubstr("--theta_min"));
  EXPECT_THAT(help, HasSubstr("GRAVAC_WINDOW"));
  EXPECT_THAT(help, HasSubstr("compressor name"));
}

TEST(Settings, BadInputGetsClearErrors) {
  EXPECT_THAT(Parse({"--nope=1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown flag --nope")));
  EXPECT_THAT(Parse({"--window"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--window needs a value")));
  EXPECT_THAT(Parse({"--window=abc"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("setting 'window' (from flag --window) = 'abc' is not a integer")));
  EXPECT_THAT(Parse({}, {{"GRAVAC_THETA_MIN", "ten"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("env GRAVAC_THETA_MIN")));
  EXPECT_THAT(Parse({"--verbose=maybe"}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Settings, TypedAccessChecksNameAndType) {
  ASSERT_OK_AND_ASSIGN(Settings s, Parse({}));
  EXPECT_THAT(s.GetInt("missing"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(s.GetInt("compressor"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.GetString("window"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Settings, DuplicateDeclarationIsAnError) {
  constexpr SettingSpec dup[] = {{"a", "", "1", "", SettingType::kInt},
                                 {"a", "", "2", "", SettingType::kInt}};
  EXPECT_THAT(Settings::Parse(dup, {}, FixedEnvironment({})),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("declared twice")));
}

TEST(Settings, ProcessEnvironmentReadsRealVariables) {
  setenv("GRAVAC_SETTINGS_TEST_VAR", "42", 1);
  EnvLookup env = ProcessEnvironment();
  EXPECT_EQ(env("GRAVAC_SETTINGS_TEST_VAR"), "42");
  EXPECT_EQ(env("GRAVAC_SETTINGS_TEST_UNSET_VAR"), std::nullopt);
}

}  // namespace
}  // namespace gravac
