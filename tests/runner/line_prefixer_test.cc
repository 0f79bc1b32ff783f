// LinePrefixer: whole lines, each with the child's label.
#include "runner/line_prefixer.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::runner {
namespace {

TEST(LinePrefixerTest, PrefixesEveryCompleteLine) {
  LinePrefixer p("[rank 3] ");
  std::string out;
  p.Feed("a\nbb\n", &out);
  EXPECT_EQ(out, "[rank 3] a\n[rank 3] bb\n");
}

TEST(LinePrefixerTest, HoldsPartialLinesAcrossFeeds) {
  LinePrefixer p("[gravacd 1] ");
  std::string out;
  p.Feed("hel", &out);
  EXPECT_EQ(out, "");
  p.Feed("lo\nwor", &out);
  EXPECT_EQ(out, "[gravacd 1] hello\n");
  p.Feed("ld\n\n", &out);
  EXPECT_EQ(out, "[gravacd 1] hello\n[gravacd 1] world\n[gravacd 1] \n");
}

TEST(LinePrefixerTest, FinishTerminatesTheLastLine) {
  LinePrefixer p("[controller] ");
  std::string out;
  p.Feed("done", &out);
  p.Finish(&out);
  EXPECT_EQ(out, "[controller] done\n");
  p.Finish(&out);  // nothing pending: nothing added
  EXPECT_EQ(out, "[controller] done\n");
}

TEST(LinePrefixerTest, FlushesOverlongLinesEarly) {
  LinePrefixer p("[rank 0] ");
  std::string out;
  p.Feed(std::string(LinePrefixer::kMaxPending + 10, 'x'), &out);
  EXPECT_EQ(out.size(), 9 + LinePrefixer::kMaxPending + 10 + 1);
  EXPECT_EQ(out.back(), '\n');
  std::string more;
  p.Feed("y\n", &more);
  EXPECT_EQ(more, "[rank 0] y\n");
}

}  // namespace
}  // namespace gravac::runner
