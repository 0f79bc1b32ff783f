#include "core/logging.h"

#include <cstdio>
#include <string>

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace gravac {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Capture(LogLevel min, void (*emit)(const Logger&)) {
  std::FILE* f = std::tmpfile();
  {
    Logger log("gravacd[node 1]", min, f);
    emit(log);
  }
  std::rewind(f);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
  std::fclose(f);
  return out;
}

TEST(Logger, WritesLevelPrefixFileLineAndMessage) {
  std::string out = Capture(LogLevel::kInfo, [](const Logger& log) {
    GRAVAC_LOG(log, kWarning, "stall: tensor '%s' waits for ranks %s", "fc1.weight", "2,3");
  });
  EXPECT_EQ(out.front(), 'W');
  EXPECT_THAT(out, HasSubstr("gravacd[node 1] logging_test.cc:"));
  EXPECT_THAT(out, HasSubstr("] stall: tensor 'fc1.weight' waits for ranks 2,3\n"));
}

TEST(Logger, DropsMessagesBelowTheLevel) {
  std::string out = Capture(LogLevel::kWarning, [](const Logger& log) {
    GRAVAC_LOG(log, kInfo, "quiet %d", 1);
    GRAVAC_LOG(log, kError, "loud %d", 2);
  });
  EXPECT_THAT(out, Not(HasSubstr("quiet")));
  EXPECT_THAT(out, HasSubstr("loud 2"));
}

TEST(Logger, ParsesLevels) {
  EXPECT_EQ(*ParseLogLevel("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("warn"), LogLevel::kWarning);
  EXPECT_THAT(ParseLogLevel("loud"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown log level 'loud'")));
}

}  // namespace
}  // namespace gravac
