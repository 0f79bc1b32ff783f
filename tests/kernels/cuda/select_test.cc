#include "kernels/cuda/select.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "core/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/compressed.h"
#include "kernels/cpu/select.h"
#include "kernels/cuda/device_buffer.h"
#include "tests/kernels/cuda/cuda_test_util.h"

namespace gravac::kernels::cuda {
namespace {

using namespace ::gravac::kernels::cuda::testing;  // NOLINT
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct Selected {
  std::vector<int32_t> indices;
  std::vector<float> values;
};

// Stable sort by |x| descending (index ascending among ties), first k, re-sorted by index.
Selected SortOracle(const std::vector<float>& x, int64_t k) {
  std::vector<int32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  order.resize(std::min<int64_t>(k, x.size()));
  std::sort(order.begin(), order.end());
  Selected s;
  for (int32_t i : order) {
    s.indices.push_back(i);
    s.values.push_back(x[i]);
  }
  return s;
}

class CudaSelectTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    pool_ = std::make_unique<ThreadPool>(0);
  }

  // GPU top-k of a host input; *status receives the launcher's status.
  Selected GpuTopK(const std::vector<float>& x, int64_t k, absl::Status* status) {
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t kept = std::max<int64_t>(0, std::min(k, n));
    DeviceBuffer<float> input = ToDevice<float>(x);
    DeviceBuffer<int32_t> indices = Zeros<int32_t>(kept);
    DeviceBuffer<float> values = Zeros<float>(kept);
    *status = TopK(input.data(), n, k, ws_.get(), indices.data(), values.data(), stream_);
    return {ToHost(indices, kept), ToHost(values, kept)};
  }

  Selected GpuFilter(const std::vector<float>& x, float threshold, int64_t capacity, int64_t* count,
                     absl::Status* status) {
    const int64_t n = static_cast<int64_t>(x.size());
    DeviceBuffer<float> input = ToDevice<float>(x);
    DeviceBuffer<int32_t> indices = Zeros<int32_t>(capacity);
    DeviceBuffer<float> values = Zeros<float>(capacity);
    *status = ThresholdFilter(input.data(), n, threshold, ws_.get(), capacity, indices.data(),
                              values.data(), count, stream_);
    int64_t written = std::min(capacity, std::max<int64_t>(*count, 0));  // -1: never set
    return {ToHost(indices, written), ToHost(values, written)};
  }

  void ExpectTopKMatchesCpu(const std::vector<float>& x, int64_t k, const std::string& what) {
    SCOPED_TRACE(absl::StrCat(what, " n=", x.size(), " k=", k));
    Selected cpu;
    ASSERT_THAT(cpu::TopK(x, k, pool_.get(), &cpu.indices, &cpu.values), IsOk());
    absl::Status status;
    Selected gpu = GpuTopK(x, k, &status);
    ASSERT_THAT(status, IsOk());
    ASSERT_EQ(gpu.indices.size(), cpu.indices.size());
    EXPECT_TRUE(gpu.indices == cpu.indices) << "indices differ from the CPU twin";
    EXPECT_TRUE(Bits(gpu.values) == Bits(cpu.values)) << "values differ from the CPU twin";
    EXPECT_TRUE(std::is_sorted(gpu.indices.begin(), gpu.indices.end()));
    EXPECT_TRUE(std::adjacent_find(gpu.indices.begin(), gpu.indices.end()) == gpu.indices.end())
        << "indices not strictly ascending";
    if (x.size() <= 70000) {  // the independent oracle, where sorting is cheap
      Selected oracle = SortOracle(x, k);
      EXPECT_TRUE(gpu.indices == oracle.indices) << "indices differ from the sort oracle";
      EXPECT_TRUE(Bits(gpu.values) == Bits(oracle.values));
    }
  }

  std::unique_ptr<ThreadPool> pool_;
};

using SizeDist = std::tuple<int64_t, Dist>;

class CudaTopKSweepTest : public CudaSelectTest, public ::testing::WithParamInterface<SizeDist> {};

TEST_P(CudaTopKSweepTest, MatchesCpuTwinBitForBit) {
  const auto [n, dist] = GetParam();
  std::vector<float> x = MakeInput(dist, n, static_cast<uint32_t>(n * 31 + 7));
  std::vector<int64_t> ks = {
      0, 1, 2, 5, KeepCount(n, 10), KeepCount(n, 100), KeepCount(n, 1000), n - 1, n, n + 3};
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  for (int64_t k : ks) {
    if (k < 0) continue;
    ExpectTopKMatchesCpu(x, k, DistName(dist));
  }
}

INSTANTIATE_TEST_SUITE_P(
    SizesAndDistributions, CudaTopKSweepTest,
    ::testing::Combine(::testing::Values<int64_t>(0, 1, 2, 7, 1009, 4096, 4097, 65537,
                                                  (int64_t{1} << 24) + 3),
                       ::testing::Values(Dist::kNormal, Dist::kTies, Dist::kZeros, Dist::kNegative,
                                         Dist::kSubnormal, Dist::kSignedZeros)),
    [](const ::testing::TestParamInfo<SizeDist>& info) {
      return absl::StrCat("n", std::get<0>(info.param), "_", DistName(std::get<1>(info.param)));
    });

TEST_F(CudaSelectTest, TiesAtTheThresholdTakeLowerIndices) {
  // 10 equal magnitudes of both signs at the cut; k = 5 must take the single larger element
  // and the first 4 of them.
  std::vector<float> x(100, 0.25f);
  for (int i = 3; i < 100; i += 10) x[i] = ((i / 10) % 2 == 1) ? -2.0f : 2.0f;
  x[50] = 9.0f;
  absl::Status status;
  Selected gpu = GpuTopK(x, 5, &status);
  ASSERT_THAT(status, IsOk());
  EXPECT_THAT(gpu.indices, ElementsAreArray({3, 13, 23, 33, 50}));
  EXPECT_THAT(gpu.values, ElementsAreArray({2.0f, -2.0f, 2.0f, -2.0f, 9.0f}));
}

TEST_F(CudaSelectTest, RejectsNonFiniteAnywhere) {
  const int64_t n = 65537;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
      std::vector<float> x = MakeInput(Dist::kNormal, n, 3);
      x[at] = bad;
      if (at < n - 1) x[n - 1] = bad;  // a later bad value: the lowest index is reported
      SCOPED_TRACE(absl::StrCat("bad=", bad, " at=", at));
      std::vector<int32_t> ci;
      std::vector<float> cv;
      EXPECT_THAT(cpu::TopK(x, 100, pool_.get(), &ci, &cv),
                  StatusIs(absl::StatusCode::kInvalidArgument));
      absl::Status status;
      GpuTopK(x, 100, &status);
      EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr(absl::StrCat("at index ", at, " "))));
      GpuTopK(x, 0, &status);  // k = 0 still reads the input
      EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument));
      int64_t count = -1;
      GpuFilter(x, 0.5f, n, &count, &status);
      EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr(absl::StrCat("at index ", at, " "))));
    }
  }
  // The error was cleared: the workspace works again.
  ExpectTopKMatchesCpu(MakeInput(Dist::kNormal, n, 4), 10, "after error");
}

TEST_F(CudaSelectTest, WorkspaceReuseAcrossSizes) {
  std::vector<float> big = MakeInput(Dist::kNormal, 1 << 20, 11);
  std::vector<float> small = MakeInput(Dist::kTies, 1009, 12);
  ExpectTopKMatchesCpu(small, 17, "small first");
  ExpectTopKMatchesCpu(big, 1000, "grows");
  ExpectTopKMatchesCpu(small, 17, "small again");
  ExpectTopKMatchesCpu(big, 1000, "big again");
}

TEST_F(CudaSelectTest, NegativeKIsInvalid) {
  absl::Status status;
  GpuTopK({1.0f, 2.0f}, -1, &status);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument));
}

class CudaFilterSweepTest : public CudaSelectTest,
                            public ::testing::WithParamInterface<SizeDist> {};

TEST_P(CudaFilterSweepTest, MatchesCpuTwinBitForBit) {
  const auto [n, dist] = GetParam();
  std::vector<float> x = MakeInput(dist, n, static_cast<uint32_t>(n * 17 + 1));
  std::vector<float> magnitudes(x.size());
  for (size_t i = 0; i < x.size(); ++i) magnitudes[i] = std::fabs(x[i]);
  std::sort(magnitudes.begin(), magnitudes.end());
  std::vector<float> thresholds = {0.0f, -0.0f,  -1.0f,
                                   0.5f, 1e-40f, std::numeric_limits<float>::denorm_min()};
  if (n > 0) {  // exact element magnitudes: ties at the threshold are kept
    thresholds.push_back(magnitudes[n / 2]);
    thresholds.push_back(magnitudes[n - 1]);
    thresholds.push_back(magnitudes[(n * 99) / 100]);
  }
  for (float t : thresholds) {
    SCOPED_TRACE(absl::StrCat(DistName(dist), " n=", n, " threshold=", t));
    Selected cpu;
    ASSERT_THAT(cpu::ThresholdFilter(x, t, pool_.get(), &cpu.indices, &cpu.values), IsOk());
    int64_t count = -1;
    absl::Status status;
    Selected gpu = GpuFilter(x, t, n, &count, &status);
    ASSERT_THAT(status, IsOk());
    EXPECT_EQ(count, static_cast<int64_t>(cpu.indices.size()));
    EXPECT_TRUE(gpu.indices == cpu.indices);
    EXPECT_TRUE(Bits(gpu.values) == Bits(cpu.values));

    DeviceBuffer<float> input = ToDevice<float>(x);
    int64_t counted = -1;
    ASSERT_THAT(CountAtLeast(input.data(), n, t, ws_.get(), &counted, stream_), IsOk());
    EXPECT_EQ(counted, cpu::CountAtLeast(x, t, pool_.get()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    SizesAndDistributions, CudaFilterSweepTest,
    ::testing::Combine(::testing::Values<int64_t>(0, 1, 2, 7, 1009, 65537, (int64_t{1} << 24) + 3),
                       ::testing::Values(Dist::kNormal, Dist::kTies, Dist::kZeros, Dist::kSubnormal,
                                         Dist::kSignedZeros)),
    [](const ::testing::TestParamInfo<SizeDist>& info) {
      return absl::StrCat("n", std::get<0>(info.param), "_", DistName(std::get<1>(info.param)));
    });

TEST_F(CudaSelectTest, FilterTruncatesToCapacityWithOutOfRange) {
  std::vector<float> x = MakeInput(Dist::kNormal, 100003, 5);
  Selected cpu;
  ASSERT_THAT(cpu::ThresholdFilter(x, 1.0f, pool_.get(), &cpu.indices, &cpu.values), IsOk());
  ASSERT_GT(cpu.indices.size(), 1000u);
  int64_t count = -1;
  absl::Status status;
  Selected gpu = GpuFilter(x, 1.0f, 1000, &count, &status);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(count, static_cast<int64_t>(cpu.indices.size()));
  ASSERT_EQ(gpu.indices.size(), 1000u);
  EXPECT_TRUE(std::equal(gpu.indices.begin(), gpu.indices.end(), cpu.indices.begin()));
  EXPECT_TRUE(std::equal(gpu.values.begin(), gpu.values.end(), cpu.values.begin()));
}

TEST_F(CudaSelectTest, FilterRejectsNonFiniteThresholdLikeCpu) {
  std::vector<float> x = {1.0f, -2.0f, 3.0f};
  for (float t : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity()}) {
    Selected cpu;
    EXPECT_THAT(cpu::ThresholdFilter(x, t, pool_.get(), &cpu.indices, &cpu.values),
                StatusIs(absl::StatusCode::kInvalidArgument));
    int64_t count = -1;
    absl::Status status;
    GpuFilter(x, t, 3, &count, &status);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("finite")));
  }
}

// Host-side argument checks need no device: they fail before any CUDA call.
TEST(CudaSelectArgsTest, RejectsBadArgumentsBeforeTouchingTheDevice) {
  int32_t idx[1] = {0};
  float val[1] = {0.0f};
  int64_t count = 0;
  EXPECT_THAT(TopK(val, 1, 1, nullptr, idx, val, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null workspace")));
  EXPECT_THAT(ThresholdFilter(val, 1, 0.0f, nullptr, 1, idx, val, &count, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null workspace")));
  EXPECT_THAT(CountAtLeast(val, 1, 0.0f, nullptr, &count, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null workspace")));
}

}  // namespace
}  // namespace gravac::kernels::cuda
