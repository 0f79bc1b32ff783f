// Tests of the compressor benchmark's helpers (bench_data.h, peer.h): the output checks must
// reject each kind of wrong output, the data must not depend on the lane count, and the peer's
// JSON lines and exit status must be read correctly.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "bench/bench_data.h"
#include "bench/peer.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::bench {
namespace {

using ::testing::HasSubstr;

// The exact top-k of |input| by a stable sort (lower index wins ties), indices ascending.
kernels::Compressed SortTopK(const std::vector<float>& input, int64_t k) {
  std::vector<int32_t> order(input.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return std::fabs(input[a]) > std::fabs(input[b]); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  kernels::Compressed out;
  out.dense_size = static_cast<int64_t>(input.size());
  for (int32_t i : order) {
    out.indices.push_back(i);
    out.values.push_back(input[i]);
  }
  return out;
}

TEST(GenerateDataTest, SameSeedSameDataWhateverTheLanes) {
  ThreadPool two(2), three(3);
  const int64_t n = 300001;
  std::vector<float> alone = GenerateData(n, Distribution::kNormal, 7, nullptr);
  EXPECT_EQ(alone, GenerateData(n, Distribution::kNormal, 7, &two));
  EXPECT_EQ(alone, GenerateData(n, Distribution::kNormal, 7, &three));
  EXPECT_NE(alone, GenerateData(n, Distribution::kNormal, 8, &two));
}

TEST(GenerateDataTest, MomentsMatchTheDistribution) {
  ThreadPool pool(2);
  const int64_t n = 1 << 20;
  for (Distribution d : {Distribution::kNormal, Distribution::kLaplace}) {
    std::vector<float> x = GenerateData(n, d, 3, &pool);
    double sum = 0, sum_sq = 0, sum_abs = 0;
    for (float v : x) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sum_sq += static_cast<double>(v) * v;
      sum_abs += std::fabs(v);
    }
    // N(0,1): var 1, E|x| = sqrt(2/pi). Laplace(0,1): var 2, E|x| = 1.
    const bool normal = d == Distribution::kNormal;
    EXPECT_NEAR(sum / n, 0.0, 0.01);
    EXPECT_NEAR(sum_sq / n, normal ? 1.0 : 2.0, 0.02);
    EXPECT_NEAR(sum_abs / n, normal ? std::sqrt(2.0 / M_PI) : 1.0, 0.01);
  }
}

TEST(ParseDistributionTest, KnowsNormalAndLaplaceOnly) {
  EXPECT_THAT(ParseDistribution("laplace"), IsOk());
  EXPECT_THAT(ParseDistribution("cauchy"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ParallelCopyTest, CopiesEveryByte) {
  ThreadPool pool(2);
  std::vector<char> src(3 * (1 << 20) + 7), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 31 + 1);
  ParallelCopy(dst.data(), src.data(), static_cast<int64_t>(src.size()), &pool);
  EXPECT_EQ(src, dst);
}

TEST(MedianTest, OddEvenEmpty) {
  EXPECT_EQ(Median({5, 1, 3}), 3);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({}), 0);
}

class ValidateOutputTest : public ::testing::Test {
 protected:
  ValidateOutputTest() : input_(GenerateData(10000, Distribution::kNormal, 1, nullptr)) {}
  OutputRules Rules(std::string_view name) { return RulesFor(name).value(); }
  std::vector<float> input_;
  ThreadPool pool_{2};
};

TEST_F(ValidateOutputTest, AcceptsExactTopKUnderTopKDgcAndRedsyncRules) {
  kernels::Compressed out = SortTopK(input_, 100);
  for (std::string_view name : {"topk", "dgc", "redsync"}) {
    EXPECT_THAT(ValidateOutput(input_, out, Rules(name), 100, &pool_), IsOk()) << name;
  }
  // dgc and redsync keep about k: 130 of the largest are fine for them, not for topk.
  kernels::Compressed more = SortTopK(input_, 130);
  EXPECT_THAT(ValidateOutput(input_, more, Rules("dgc"), 100, &pool_), IsOk());
  EXPECT_THAT(ValidateOutput(input_, more, Rules("topk"), 100, &pool_),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("exactly k")));
}

TEST_F(ValidateOutputTest, RejectsASelectionThatDropsALargerElement) {
  kernels::Compressed out = SortTopK(input_, 101);
  // Drop the largest kept element: now k = 100 elements, but not the 100 largest.
  auto largest = std::max_element(out.values.begin(), out.values.end(),
                                  [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  size_t j = largest - out.values.begin();
  out.values.erase(out.values.begin() + j);
  out.indices.erase(out.indices.begin() + j);
  EXPECT_THAT(ValidateOutput(input_, out, Rules("topk"), 100, &pool_),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("smallest kept magnitude")));
  EXPECT_THAT(ValidateOutput(input_, out, Rules("randomk"), 100, nullptr), IsOk());
}

TEST_F(ValidateOutputTest, RejectsBadIndicesAndValues) {
  kernels::Compressed out = SortTopK(input_, 50);
  kernels::Compressed unsorted = out;
  std::swap(unsorted.indices[3], unsorted.indices[4]);
  std::swap(unsorted.values[3], unsorted.values[4]);
  EXPECT_THAT(ValidateOutput(input_, unsorted, Rules("topk"), 50, &pool_),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("ascending")));
  kernels::Compressed wrong_value = out;
  wrong_value.values[7] *= 1.0001f;
  EXPECT_THAT(ValidateOutput(input_, wrong_value, Rules("randomk"), 50, &pool_),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("differs from input")));
  kernels::Compressed out_of_range = out;
  out_of_range.indices.back() = 10000;
  EXPECT_THAT(ValidateOutput(input_, out_of_range, Rules("randomk"), 50, &pool_),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("out of range")));
  kernels::Compressed wrong_size = out;
  wrong_size.dense_size = 9999;
  EXPECT_THAT(ValidateOutput(input_, wrong_size, Rules("randomk"), 50, &pool_),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("dense_size")));
  kernels::Compressed empty;
  empty.dense_size = 10000;
  EXPECT_THAT(ValidateOutput(input_, empty, Rules("dgc"), 50, &pool_),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("kept 0")));
}

TEST_F(ValidateOutputTest, DenseCastsWithinOneUlp) {
  kernels::Compressed cast;
  cast.dense = true;
  cast.dense_size = static_cast<int64_t>(input_.size());
  for (float x : input_) {  // round to 11 significant bits, as fp16 does for normal numbers
    int e = 0;
    double m = std::frexp(x, &e);
    cast.values.push_back(static_cast<float>(std::ldexp(std::round(m * 2048) / 2048, e)));
  }
  EXPECT_THAT(ValidateOutput(input_, cast, Rules("fp16"), cast.dense_size, &pool_), IsOk());
  kernels::Compressed coarse = cast;
  coarse.values[9000] = input_[9000] * 1.01f;
  EXPECT_THAT(ValidateOutput(input_, coarse, Rules("fp16"), cast.dense_size, &pool_),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("index 9000")));
  EXPECT_THAT(ValidateOutput(input_, coarse, Rules("bf16"), cast.dense_size, &pool_),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("index 9000")));
  EXPECT_THAT(ValidateOutput(input_, cast, Rules("topk"), 10, &pool_),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("dense")));
  EXPECT_THAT(RulesFor("zip"), StatusIs(absl::StatusCode::kNotFound));
}

TEST(OutputHashTest, ChangesWithAnyIndexOrValueBit) {
  std::vector<float> x = GenerateData(1000, Distribution::kLaplace, 2, nullptr);
  kernels::Compressed out = SortTopK(x, 10);
  const uint64_t h = OutputHash(out);
  EXPECT_EQ(h, OutputHash(SortTopK(x, 10)));
  kernels::Compressed flipped = out;
  uint32_t bits;
  std::memcpy(&bits, &flipped.values[2], 4);
  bits ^= 1;
  std::memcpy(&flipped.values[2], &bits, 4);
  EXPECT_NE(h, OutputHash(flipped));
  kernels::Compressed moved = out;
  moved.indices[5] += 1;
  EXPECT_NE(h, OutputHash(moved));
}

TEST(FlatJsonTest, ParsesScalarsAndEscapes) {
  ASSERT_OK_AND_ASSIGN(
      FlatJson o, ParseFlatJson(R"( {"kind": "topk", "ms": 1.5e-3, "k": 67108, "s": "a\"b\\c\u00e9",
                                     "t": true, "z": null} )"));
  EXPECT_EQ(GetString(o, "kind").value_or(""), "topk");
  EXPECT_EQ(GetNumber(o, "ms").value_or(0), 1.5e-3);
  EXPECT_EQ(GetNumber(o, "k").value_or(0), 67108);
  EXPECT_EQ(GetString(o, "s").value_or(""), "a\"b\\c\xc3\xa9");
  EXPECT_EQ(o.at("t").kind, JsonScalar::Kind::kBool);
  EXPECT_EQ(o.at("z").kind, JsonScalar::Kind::kNull);
  EXPECT_THAT(GetNumber(o, "kind"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(GetString(o, "missing"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(FlatJsonTest, RejectsMalformedLines) {
  for (const char* bad :
       {R"({"a": 1)", R"({"a": {"b": 1}})", R"({"a": 1} x)", R"({"a": "x)", R"({"a": 1,})",
        R"({a: 1})", R"({"a": "\q"})", R"({"a": "\ud83d"})", ""}) {
    EXPECT_THAT(ParseFlatJson(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
}

TEST(FlatJsonTest, QuoteRoundTrips) {
  const std::string text = "torch \"1.13\"\\\n\t";
  ASSERT_OK_AND_ASSIGN(FlatJson o, ParseFlatJson("{\"v\": " + JsonQuote(text) + "}"));
  EXPECT_EQ(GetString(o, "v").value_or(""), text);
}

TEST(ParsePeerOutputTest, ReadsEnvMemcpyAndTopKLines) {
  ASSERT_OK_AND_ASSIGN(
      PeerResult peer,
      ParsePeerOutput("warning: not json\n"
                      "{\"kind\": \"env\", \"torch_version\": \"1.13\", \"threads\": 2, \"n\": 9}\n"
                      "{\"kind\": \"memcpy\", \"ms\": 2.5, \"clone_ms\": 4}\n"
                      "{\"kind\": \"topk\", \"density\": 0.1, \"k\": 1, \"ms\": 7, "
                      "\"memcpy_ms\": 2, \"ratio_memcpy\": 3.5}\n"));
  EXPECT_EQ(peer.torch_version, "1.13");
  EXPECT_EQ(peer.n, 9);
  EXPECT_EQ(peer.memcpy_ms, 2.5);
  ASSERT_EQ(peer.topk.size(), 1u);
  EXPECT_EQ(peer.topk[0].k, 1);
  EXPECT_EQ(peer.topk[0].topk_ms, 7);
  EXPECT_THAT(ParsePeerOutput("{\"kind\": \"memcpy\", \"ms\": 2.5, \"clone_ms\": 4}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("env")));
  EXPECT_THAT(ParsePeerOutput("{\"kind\": \"other\"}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("other")));
}

TEST(RunAndCaptureTest, ReturnsStdoutAndReportsFailures) {
  EXPECT_EQ(RunAndCapture({"/bin/sh", "-c", "echo out; echo err >&2"}).value_or(""), "out\n");
  EXPECT_THAT(RunAndCapture({"/bin/sh", "-c", "exit 3"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("status 3")));
  EXPECT_THAT(RunAndCapture({"/bin/sh", "-c", "kill -9 $$"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("signal 9")));
  EXPECT_THAT(RunAndCapture({"/nonexistent/program"}), StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(RunAndCapture({}), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace gravac::bench
