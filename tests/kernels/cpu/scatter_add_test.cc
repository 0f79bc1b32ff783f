#include "kernels/cpu/scatter_add.h"

#include <cstdint>
#include <random>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::kernels::cpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ScatterAddTest, AddsScaledValuesAtIndices) {
  std::vector<float> out = {1, 1, 1, 1, 1};
  std::vector<int32_t> idx = {0, 3, 4};
  std::vector<float> val = {2, -4, 8};
  ASSERT_THAT(ScatterAdd(idx, val, 0.5f, absl::MakeSpan(out)), IsOk());
  EXPECT_THAT(out, ElementsAre(2, 1, 1, -1, 5));
}

TEST(ScatterAddTest, DuplicatesAccumulateAndEmptyIsANoOp) {
  std::vector<float> out = {0, 0, 0};
  std::vector<int32_t> idx = {2, 2, 1, 2};
  std::vector<float> val = {1, 2, 3, 4};
  ASSERT_THAT(ScatterAdd(idx, val, 1.0f, absl::MakeSpan(out)), IsOk());
  EXPECT_THAT(out, ElementsAre(0, 3, 7));
  ASSERT_THAT(ScatterAdd({}, {}, 1.0f, absl::MakeSpan(out)), IsOk());
  EXPECT_THAT(out, ElementsAre(0, 3, 7));
  std::vector<float> empty;
  EXPECT_THAT(ScatterAdd({}, {}, 1.0f, absl::MakeSpan(empty)), IsOk());
}

TEST(ScatterAddTest, RejectsBadInputWithoutWriting) {
  std::vector<float> out = {5, 5, 5};
  std::vector<int32_t> idx = {0, 3};
  std::vector<float> val = {1, 1};
  EXPECT_THAT(ScatterAdd(idx, val, 1.0f, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index 3 at position 1")));
  idx = {0, -1};
  EXPECT_THAT(ScatterAdd(idx, val, 1.0f, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index -1")));
  idx = {0};
  EXPECT_THAT(ScatterAdd(idx, val, 1.0f, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 indices but 2 values")));
  EXPECT_THAT(out, ElementsAre(5, 5, 5));  // untouched by the failed calls
}

TEST(DecompressAddTest, SparseAndDense) {
  Compressed sparse;
  sparse.dense_size = 4;
  sparse.indices = {1, 3};
  sparse.values = {10, 20};
  std::vector<float> out = {1, 1, 1, 1};
  ASSERT_THAT(DecompressAdd(sparse, 0.25f, absl::MakeSpan(out)), IsOk());
  EXPECT_THAT(out, ElementsAre(1, 3.5, 1, 6));

  Compressed dense;
  dense.dense = true;
  dense.dense_size = 4;
  dense.value_type = ValueType::kFloat16;
  dense.values = {1, 2, 3, 4};
  ASSERT_THAT(DecompressAdd(dense, 2.0f, absl::MakeSpan(out)), IsOk());
  EXPECT_THAT(out, ElementsAre(3, 7.5, 7, 14));

  std::vector<float> wrong(3);
  EXPECT_THAT(DecompressAdd(dense, 1.0f, absl::MakeSpan(wrong)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dense_size 4")));
  dense.values.pop_back();
  EXPECT_THAT(DecompressAdd(dense, 1.0f, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("3 values")));
  sparse.indices = {1, 4};
  EXPECT_THAT(DecompressAdd(sparse, 1.0f, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index 4")));
}

TEST(DecompressAddTest, AveragesRanksLikeTheAllgatherPath) {
  // Two ranks' sparse messages averaged into one buffer: out = (m0 + m1) / 2.
  Compressed m0, m1;
  m0.dense_size = m1.dense_size = 6;
  m0.indices = {0, 2, 5};
  m0.values = {2, 4, 6};
  m1.indices = {2, 3};
  m1.values = {8, 10};
  std::vector<float> out(6, 0.0f);
  ASSERT_THAT(DecompressAdd(m0, 0.5f, absl::MakeSpan(out)), IsOk());
  ASSERT_THAT(DecompressAdd(m1, 0.5f, absl::MakeSpan(out)), IsOk());
  EXPECT_THAT(out, ElementsAre(1, 0, 6, 5, 0, 3));
}

TEST(DivideAllTest, EqualsElementByElementDivisionBitForBit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> value(0.0f, 3.0f);
  for (int64_t n : {0, 1, 7, 1001}) {
    for (float divisor : {3.0f, 4.0f, 7.0f}) {
      std::vector<float> out(n);
      for (float& v : out) v = value(rng);
      if (n > 1) out[1] = 0.0f;
      std::vector<float> want = out;
      for (volatile float& v : want) v = v / divisor;  // volatile: one scalar division each
      DivideAll(absl::MakeSpan(out), divisor);
      EXPECT_EQ(out, want) << n << " elements / " << divisor;
    }
  }
}

}  // namespace
}  // namespace gravac::kernels::cpu
