// The engine's error-feedback top-k on kernels' CompressionBackend + TopKStep
// (daemon/engine/backend_compression.h) against the CPU compressor path it replaced for topk: two
// nodes run the same steps (θ_min, θ_c, a θ that is neither, a candidate below θ_min, dense) on
// both paths, with messages large enough for the overlapped exchange; every result, every
// residual (carried from step to step) and the statistics' norms are equal bit for bit. Host
// tensors run on the CPU backend; device tensors on it too where there is no CUDA device
// (executor_backend_gpu_test.cc runs them on the CUDA backend, label gpu). Compressors the
// backends do not implement keep the CPU compressor path.
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/logging.h"
#include "core/testing/status_matchers.h"
#include "daemon/engine/backend_compression.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/compressed.h"
#include "kernels/wire_format.h"
#include "tests/daemon/engine/executor_pair.h"

namespace gravac::daemon {
namespace {

using namespace ::gravac::daemon::testing;  // NOLINT

TEST(ExecutorBackendTest, HostTensorsOnTheCpuBackendMatchTheCpuCompressorPathBitForBit) {
  ExpectSameAsTheCpuCompressorPath(MemoryType::kHost, "cpu");
}

// Without a usable CUDA device (or in a build without CUDA) a device tensor is compressed on the
// CPU backend, with the same results.
TEST(ExecutorBackendTest, DeviceTensorsWithoutACudaDeviceUseTheCpuBackend) {
  if (kernels::MakeCompressionBackend(MemoryType::kDevice, 0).ok()) {
    GTEST_SKIP() << "a CUDA device is usable here: executor_backend_gpu_test covers it";
  }
  ExpectSameAsTheCpuCompressorPath(MemoryType::kDevice, "cpu");
}

// The fallback is said once per device in the log (and once for device tensors without a known
// device), however many steps and tensors use it.
TEST(ExecutorBackendTest, TheFallbackToTheCpuBackendIsSaidOnce) {
  if (kernels::MakeCompressionBackend(MemoryType::kDevice, 0).ok()) {
    GTEST_SKIP() << "a CUDA device is usable here: nothing falls back";
  }
  char* text = nullptr;
  size_t size = 0;
  std::FILE* sink = open_memstream(&text, &size);
  ASSERT_NE(sink, nullptr);
  {
    Logger log("gravacd[test]", LogLevel::kInfo, sink);
    ExecutorJob job(1, "topk", true, kernels::ValueType::kFloat32, &log);
    std::mt19937 rng(8);
    for (int64_t step = 0; step < 3; ++step) {
      std::vector<StepTensor> t = Tensors(rng, 1, MemoryType::kDevice);
      t[1].device = -1;  // "fc": staged by its workers, no device known
      const auto r = job.Run(step, 10, 40, t);
      for (const TensorResult& x : r[0]) EXPECT_THAT(x.status, IsOk());
    }
    EXPECT_EQ(job.executor(0).ResidualBackend("conv"), "cpu");
    EXPECT_EQ(job.executor(0).ResidualBackend("fc"), "cpu");
  }
  std::fclose(sink);
  const std::string lines(text, size);
  std::free(text);
  auto count = [&lines](std::string_view what) {
    int n = 0;
    for (size_t at = lines.find(what); at != std::string::npos; at = lines.find(what, at + 1)) ++n;
    return n;
  };
  // One line per device (the reason may name the device again: "... CUDA device 0: gravac was
  // built without CUDA ...").
  EXPECT_EQ(count("its tensors are compressed with the CPU kernels"), 1) << lines;
  EXPECT_THAT(lines, ::testing::HasSubstr("CUDA device 0: "));
  EXPECT_EQ(count("without a known CUDA device"), 1) << lines;
}

// A non-finite gradient fails the tensor on every node with the message the CPU compressor path
// gives (naming the tensor and the first bad index), keeps the residual, and the next step works.
TEST(ExecutorBackendTest, NonFiniteGradientFailsAsOnTheCpuCompressorPath) {
  ExecutorJob on_backend(2, "topk", true);
  ExecutorJob reference(2, "topk", false);
  std::mt19937 rng(4);
  std::vector<StepTensor> first = Tensors(rng, 2, MemoryType::kHost);
  on_backend.Run(0, 10, 40, first);
  reference.Run(0, 10, 40, first);
  const std::vector<float> kept = on_backend.executor(1).Residual("fc");
  std::vector<StepTensor> bad = Tensors(rng, 2, MemoryType::kHost);
  bad[1].grads[1][17] = std::numeric_limits<float>::infinity();
  for (double theta : {10.0, 1.0}) {
    const auto got = on_backend.Run(1, theta, 40, bad);
    const auto want = reference.Run(1, theta, 40, bad);
    for (int n = 0; n < 2; ++n) {
      EXPECT_THAT(got[n][0].status, IsOk());
      if (theta > 1) {
        EXPECT_THAT(got[n][1].status, StatusIs(absl::StatusCode::kInvalidArgument,
                                               ::testing::AllOf(::testing::HasSubstr("'fc'"),
                                                                ::testing::HasSubstr("index 17"))));
      }
      EXPECT_EQ(got[n][1].status, want[n][1].status) << "theta " << theta;
      EXPECT_EQ(Values<float>(got[n][1].data), Values<float>(want[n][1].data));
    }
    EXPECT_EQ(on_backend.executor(1).Residual("fc"), kept) << "theta " << theta;
  }
  const auto next = on_backend.Run(2, 10, 40, Tensors(rng, 2, MemoryType::kHost));
  for (int n = 0; n < 2; ++n) EXPECT_THAT(next[n][1].status, IsOk());
}

// The backends implement exact top-k with fp32 values only: the other compressors, and topk with
// 2-byte values, keep the CPU compressor path.
TEST(ExecutorBackendTest, OtherCompressorsKeepTheCpuCompressorPath) {
  struct Case {
    const char* compressor;
    kernels::ValueType values;
  };
  for (const Case& c :
       {Case{"randomk", kernels::ValueType::kFloat32}, Case{"dgc", kernels::ValueType::kFloat32},
        Case{"topk", kernels::ValueType::kFloat16}}) {
    SCOPED_TRACE(c.compressor);
    ExecutorJob job(2, c.compressor, true, c.values);
    std::mt19937 rng(9);
    const auto r = job.Run(0, 10, 40, Tensors(rng, 2, MemoryType::kHost));
    ASSERT_THAT(r[0][1].status, IsOk());
    EXPECT_EQ(job.executor(0).ResidualBackend("fc"), "");
    EXPECT_EQ(job.executor(0).Residual("fc").size(), 57u);
  }
  ExecutorJob topk(2, "topk", true);
  std::mt19937 rng(9);
  topk.Run(0, 10, 40, Tensors(rng, 2, MemoryType::kHost));
  EXPECT_EQ(topk.executor(0).ResidualBackend("fc"), "cpu");
}

// On the CPU backend the engine reads the messages where they lie: HostMessage is a view of the
// backend's own buffers (no copy), with the topk compressor's header, and the candidate selected
// from θ_min's level there is the topk compressor's CompressFrom of a copy of it, bit for bit,
// leaving the backend's candidate level as it was.
TEST(ExecutorBackendTest, TheCpuBackendsMessagesAreReadWhereTheyLie) {
  internal::BackendCompression compression(nullptr);
  TensorSpec spec;
  spec.name = "fc";
  spec.shape = {30011};
  spec.compress = true;
  std::mt19937 rng(21);
  const std::vector<float> g = Gradient(rng, 30011);
  double norm = 0.0;
  ASSERT_THAT(compression.Compensate(spec, -1, g, &norm), IsOk());
  using Level = internal::BackendCompression::Level;
  ASSERT_THAT(compression.Select("fc", Level::kMin, 10.0, nullptr), IsOk());
  ASSERT_THAT(compression.Select("fc", Level::kCandidate, 500.0, nullptr), IsOk());
  ASSERT_OK_AND_ASSIGN(const kernels::TopKStep::Message at_min,
                       compression.Message("fc", Level::kMin));
  ASSERT_OK_AND_ASSIGN(const kernels::CompressedView view,
                       compression.HostMessage("fc", Level::kMin));
  EXPECT_EQ(view.indices.data(), at_min.indices);
  EXPECT_EQ(view.values.data(), at_min.values);
  EXPECT_EQ(view.count(), 3001);
  EXPECT_EQ(view.indices.size(), view.values.size());
  kernels::Compressed copy;
  ASSERT_THAT(compression.CopyMessage("fc", Level::kMin, &copy), IsOk());
  EXPECT_EQ(view.dense_size, copy.dense_size);
  EXPECT_EQ(view.value_type, copy.value_type);
  EXPECT_FALSE(view.dense || view.implicit_indices);
  std::vector<uint8_t> from_view, from_copy;
  ASSERT_THAT(kernels::Encode(view, &from_view), IsOk());
  ASSERT_THAT(kernels::Encode(copy, &from_copy), IsOk());
  EXPECT_EQ(from_view, from_copy);

  ASSERT_OK_AND_ASSIGN(auto topk, kernels::MakeCompressor("topk", {}));
  kernels::Compressed want, got;
  ASSERT_THAT(topk->CompressFrom(copy, 40.0, {"fc"}, &want), IsOk());
  ASSERT_THAT(compression.CandidateFromMin("fc", 40.0, &got), IsOk());
  EXPECT_EQ(got.dense_size, want.dense_size);
  EXPECT_EQ(got.indices, want.indices);
  EXPECT_EQ(Bytes(got.values), Bytes(want.values));  // bit for bit
  ASSERT_OK_AND_ASSIGN(const kernels::TopKStep::Message at_candidate,
                       compression.Message("fc", Level::kCandidate));
  EXPECT_EQ(at_candidate.count, 60);  // θ 500's selection, not θ 40's
  EXPECT_THAT(compression.HostMessage("gone", Level::kMin),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("gone")));
}

}  // namespace
}  // namespace gravac::daemon
