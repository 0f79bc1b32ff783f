// Timeline: the Chrome trace file's shape (a JSON array, one named track per tensor, complete
// and counter events, JSON-escaped names), restarting and stopping, and a path that cannot be
// opened. The events' content in a real job is checked by tests/python/test_horovod_timeline.py.
#include "daemon/engine/timeline.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::daemon::internal {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

TEST(TimelineTest, WritesAClosedArrayWithOneTrackPerTensor) {
  const std::string path = TempPath("timeline_test_a.json");
  Timeline t;
  EXPECT_FALSE(t.enabled());
  t.Span("ignored", "ALLREDUCE", 1, 2);  // disabled: nothing
  ASSERT_THAT(t.Start(path), IsOk());
  EXPECT_TRUE(t.enabled());
  // Microseconds since Start: events before it would be negative, so take times after it.
  const int64_t base = absl::GetCurrentTimeNanos();
  t.Span("w \"q\"", "NEGOTIATE_ALLREDUCE", base, base + 5000);
  t.Span("w \"q\"", "ALLREDUCE", base + 5000, base + 9000,
         {{"theta", "10"}, {"collective", Timeline::Quote("sparse_allgather")}});
  t.Span("b", "0-1", base + 100, base + 100);
  t.Counter("theta", base + 5000, {{"theta", "10"}});
  t.Stop();
  EXPECT_FALSE(t.enabled());
  t.Span("b", "late", base, base);  // stopped: nothing
  const std::string text = Slurp(path);
  EXPECT_THAT(text, StartsWith("[\n"));
  EXPECT_THAT(text, EndsWith("\n]\n"));
  EXPECT_THAT(text, HasSubstr(R"("pid": 0, "args": {"name": "gravac job", )"));
  EXPECT_THAT(
      text,
      HasSubstr(R"({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "w \"q\""}})"));
  EXPECT_THAT(text,
              HasSubstr(R"({"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "b"}})"));
  EXPECT_THAT(text, HasSubstr(R"("name": "ALLREDUCE", "ph": "X", "pid": 1, "tid": 0, "ts": )"));
  EXPECT_THAT(text,
              HasSubstr(R"(, "dur": 4, "args": {"theta": 10, "collective": "sparse_allgather"}})"));
  EXPECT_THAT(text, HasSubstr(R"("name": "0-1", "ph": "X", "pid": 2, "tid": 0, )"));
  EXPECT_THAT(text, HasSubstr(R"({"name": "theta", "ph": "C", "pid": 0, "ts": )"));
  EXPECT_FALSE(absl::StrContains(text, "late"));
  EXPECT_FALSE(absl::StrContains(text, "ignored"));
  EXPECT_FALSE(absl::StrContains(text, ",\n]"));  // no trailing comma
}

TEST(TimelineTest, StartAgainBeginsANewFileAndBadPathsAreNamed) {
  const std::string first = TempPath("timeline_test_b1.json");
  const std::string second = TempPath("timeline_test_b2.json");
  Timeline t;
  ASSERT_THAT(t.Start(first), IsOk());
  t.Span("x", "ALLREDUCE", absl::GetCurrentTimeNanos(), absl::GetCurrentTimeNanos());
  ASSERT_THAT(t.Start(second), IsOk());  // closes the first
  EXPECT_THAT(Slurp(first), EndsWith("\n]\n"));
  EXPECT_THAT(t.Start("/nonexistent-gravac-dir/t.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("timeline: cannot open '/nonexistent-gravac-dir/t.json'")));
  EXPECT_FALSE(t.enabled());
  EXPECT_THAT(Slurp(second), EndsWith("\n]\n"));
  EXPECT_EQ(Timeline::Quote("a\\b\n"), "\"a\\\\b\\u000a\"");
}

}  // namespace
}  // namespace gravac::daemon::internal
