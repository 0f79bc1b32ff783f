#include "kernels/cuda/scatter_add.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/compressed.h"
#include "kernels/cpu/scatter_add.h"
#include "kernels/cuda/device_buffer.h"
#include "tests/kernels/cuda/cuda_test_util.h"

namespace gravac::kernels::cuda {
namespace {

using namespace ::gravac::kernels::cuda::testing;  // NOLINT
using ::testing::HasSubstr;

using CudaScatterAddTest = CudaTest;

// k distinct indices of [0, n), ascending (as in a Compressed).
std::vector<int32_t> DistinctIndices(int64_t n, int64_t k, uint32_t seed) {
  std::vector<int32_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(k);
  std::sort(all.begin(), all.end());
  return all;
}

TEST_F(CudaScatterAddTest, MatchesCpuTwinBitForBit) {
  // n = 0, k = 0: nothing to do.
  EXPECT_THAT(ScatterAdd(nullptr, nullptr, 0, 1.0f, ws_.get(), nullptr, 0, stream_), IsOk());
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1009}, int64_t{65537},
                    (int64_t{1} << 24) + 3}) {
    for (int64_t k : {int64_t{0}, int64_t{1}, KeepCount(n, 10), n}) {
      std::vector<int32_t> idx = DistinctIndices(n, k, static_cast<uint32_t>(n + k));
      for (Dist dist : {Dist::kNormal, Dist::kSubnormal, Dist::kSignedZeros}) {
        std::vector<float> values = MakeInput(dist, k, 21);
        std::vector<float> out = MakeInput(dist, n, 22);
        for (float scale : {1.0f, 0.125f, -1.0f / 3.0f}) {
          SCOPED_TRACE(absl::StrCat(DistName(dist), " n=", n, " k=", k, " scale=", scale));
          std::vector<float> cpu_out = out;
          ASSERT_THAT(cpu::ScatterAdd(idx, values, scale, absl::MakeSpan(cpu_out)), IsOk());
          DeviceBuffer<int32_t> di = ToDevice<int32_t>(idx);
          DeviceBuffer<float> dv = ToDevice<float>(values);
          DeviceBuffer<float> dout = ToDevice<float>(out);
          ASSERT_THAT(
              ScatterAdd(di.data(), dv.data(), k, scale, ws_.get(), dout.data(), n, stream_),
              IsOk());
          ASSERT_THAT(ws_->Synchronize(stream_), IsOk());
          EXPECT_TRUE(Bits(ToHost(dout, n)) == Bits(cpu_out));
        }
      }
    }
  }
}

// Repeated indices all land (atomically); with small integers every order sums exactly, so the
// result still equals the CPU's in-order accumulation.
TEST_F(CudaScatterAddTest, RepeatedIndicesAccumulate) {
  const int64_t n = 37;
  const int64_t k = 100000;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> pick(0, n - 1);
  std::uniform_int_distribution<int> small(-4, 4);
  std::vector<int32_t> idx(k);
  std::vector<float> values(k);
  for (int64_t j = 0; j < k; ++j) {
    idx[j] = pick(rng);
    values[j] = static_cast<float>(small(rng));
  }
  std::vector<float> cpu_out(n, 1.0f);
  ASSERT_THAT(cpu::ScatterAdd(idx, values, 2.0f, absl::MakeSpan(cpu_out)), IsOk());
  DeviceBuffer<int32_t> di = ToDevice<int32_t>(idx);
  DeviceBuffer<float> dv = ToDevice<float>(values);
  DeviceBuffer<float> dout = ToDevice<float>(std::vector<float>(n, 1.0f));
  ASSERT_THAT(ScatterAdd(di.data(), dv.data(), k, 2.0f, ws_.get(), dout.data(), n, stream_),
              IsOk());
  ASSERT_THAT(ws_->Synchronize(stream_), IsOk());
  EXPECT_TRUE(Bits(ToHost(dout, n)) == Bits(cpu_out));
}

TEST_F(CudaScatterAddTest, OutOfRangeIndexIsReportedBySynchronize) {
  const int64_t n = 10;
  std::vector<int32_t> idx = {0, 3, -5, 10, 9};
  std::vector<float> values = {1, 2, 3, 4, 5};
  std::vector<float> cpu_out(n);
  EXPECT_THAT(cpu::ScatterAdd(idx, values, 1.0f, absl::MakeSpan(cpu_out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  DeviceBuffer<int32_t> di = ToDevice<int32_t>(idx);
  DeviceBuffer<float> dv = ToDevice<float>(values);
  DeviceBuffer<float> dout = Zeros<float>(n);
  ASSERT_THAT(ScatterAdd(di.data(), dv.data(), 5, 1.0f, ws_.get(), dout.data(), n, stream_),
              IsOk());
  EXPECT_THAT(ws_->Synchronize(stream_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("indices[2] = -5")));
  EXPECT_THAT(ws_->Synchronize(stream_), IsOk());
  // The valid updates were applied, the invalid ones skipped.
  std::vector<float> out = ToHost(dout, n);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[3], 2.0f);
  EXPECT_EQ(out[9], 5.0f);
}

TEST(CudaScatterAddArgsTest, RejectsBadArgumentsBeforeTouchingTheDevice) {
  int32_t idx[1] = {0};
  float x[1] = {0};
  EXPECT_THAT(ScatterAdd(idx, x, -1, 1.0f, nullptr, x, 1, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ScatterAdd(idx, x, 1, 1.0f, nullptr, x, 1, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null workspace")));
}

}  // namespace
}  // namespace gravac::kernels::cuda
