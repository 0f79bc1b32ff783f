#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/testing/status_matchers.h"
#include "core/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/compressor.h"

namespace gravac::kernels {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RegistryTest, NamesInFixedOrder) {
  EXPECT_THAT(CompressorNames(), ElementsAre("topk", "randomk", "dgc", "redsync", "fp16", "bf16"));
}

TEST(RegistryTest, UnknownNameListsTheKnownOnes) {
  auto c = MakeCompressor("top-k", CompressorOptions{});
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument,
                          AllOf(HasSubstr("'top-k'"), HasSubstr("topk, randomk, dgc, redsync, "
                                                                "fp16, bf16"))));
  EXPECT_THAT(MakeCompressor("", CompressorOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

class RegistryEachTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RegistryEachTest, BuildsAWorkingCompressorOfThatName) {
  const std::string& name = GetParam();
  ThreadPool pool(2);
  CompressorOptions options;
  options.pool = &pool;
  options.value_type = ValueType::kBFloat16;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Compressor> c, MakeCompressor(name, options));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name(), name);
  const bool cast = name == "fp16" || name == "bf16";
  EXPECT_EQ(c->is_dense(), cast);

  const int64_t n = 20000;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.013 * i) * (1.0f + (i % 101));
  Compressed out;
  ASSERT_THAT(c->Compress(x, 100.0, CompressContext{"reg.w", 1, 2}, &out), IsOk());
  EXPECT_EQ(out.dense_size, n);
  EXPECT_EQ(out.dense, cast);
  const int64_t k = KeepCount(n, 100.0);
  if (cast) {
    EXPECT_EQ(out.count(), n);
    EXPECT_EQ(out.value_type, name == "fp16" ? ValueType::kFloat16 : ValueType::kBFloat16);
  } else {
    // The options reach the compressor: values travel as bf16.
    EXPECT_EQ(out.value_type, ValueType::kBFloat16);
    if (name == "topk" || name == "randomk") {
      EXPECT_EQ(out.count(), k);
    }
    EXPECT_GE(out.count(), (8 * k + 9) / 10);  // dgc keeps >= 0.8k
    EXPECT_LT(out.count(), 2 * k);             // redsync keeps < 2k
    EXPECT_LE(out.count(), c->MaxCount(n, 100.0));
    EXPECT_EQ(c->MaxCount(n, 100.0), name == "redsync" ? 2 * k - 1 : k);
    EXPECT_EQ(out.indices.size(), out.values.size());
    EXPECT_EQ(out.implicit_indices, name == "randomk");
  }
}

INSTANTIATE_TEST_SUITE_P(AllNames, RegistryEachTest, ::testing::ValuesIn(CompressorNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gravac::kernels
