// The DeviceCollectives conformance cases (device_collectives_conformance.h) against
// NcclDeviceCollectives: one thread per rank, rank r on CUDA device r, bootstrapped over a
// loopback Communicator (as gravacd does over its host data plane). Needs one device per rank:
// NCCL refuses two ranks of one communicator on the same device, so with fewer than two devices
// the multi-rank cases skip with a message and only p = 1 runs. Label gpu.
#include "daemon/collectives/nccl_device_collectives.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cuda/cuda_status.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "daemon/collectives/communicator.h"
#include "daemon/transport/loopback/fabric.h"
#include "daemon/transport/transport_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/collectives/device_collectives_conformance.h"

namespace gravac::collectives {
namespace {

using conformance::BufferOps;
using conformance::CaseEnv;
using conformance::ConformanceCase;
using conformance::ConformanceCases;
using conformance::SumOrder;

// Device memory of one device; copies are synchronous.
class CudaBufferOps : public BufferOps {
 public:
  explicit CudaBufferOps(int device) : device_(device) {}
  absl::StatusOr<void*> Alloc(size_t bytes) override {
    if (bytes == 0) return nullptr;
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    void* p = nullptr;
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    return p;
  }
  void Free(void* buffer) override {
    (void)cudaSetDevice(device_);
    (void)cudaFree(buffer);
  }
  absl::Status CopyIn(void* dst, const void* host_src, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }
  absl::Status CopyOut(void* host_dst, const void* src, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
    return absl::OkStatus();
  }

 private:
  const int device_;
};

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

absl::Duration Bound(const ConformanceCase& c) {
  return c.missing_peer ? absl::Seconds(10) : absl::Seconds(60);
}

using Param = std::tuple<int, int>;  // world size, case index
class NcclConformanceTest : public ::testing::TestWithParam<Param> {};

TEST_P(NcclConformanceTest, Conforms) {
  const auto [p, index] = GetParam();
  const ConformanceCase c = ConformanceCases()[index];
  const int devices = DeviceCount();
  if (devices < 1) GTEST_SKIP() << "no CUDA device";
  if (devices < p) {
    GTEST_SKIP() << p << " ranks need " << p << " CUDA devices (NCCL refuses two ranks of one "
                 << "communicator on one device); this machine has " << devices;
  }
  if (c.missing_peer && p < 2) GTEST_SKIP() << "a missing peer needs two ranks";
  transport::loopback::Fabric fabric(p);
  std::vector<std::unique_ptr<transport::Transport>> transports;
  std::vector<std::string> addresses;
  for (int r = 0; r < p; ++r) {
    transport::TransportOptions o;
    o.rank = r;
    o.world_size = p;
    o.context = &fabric;
    auto t = transport::MakeTransport("loopback", o);
    ASSERT_THAT(t, IsOk());
    addresses.push_back((*t)->LocalAddress());
    transports.push_back(*std::move(t));
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < p; ++r) {
    auto comm = Communicator::Connect(*transports[r], addresses, {.op_timeout = Bound(c)});
    ASSERT_THAT(comm, IsOk());
    comms.push_back(*std::move(comm));
  }
  // The absent rank bootstraps (so the others' init completes) and then never calls. The enqueue
  // bound is the case's too: NCCL may connect the peers lazily, when the first collective is
  // enqueued.
  std::vector<absl::Status> results(p);
  std::vector<std::unique_ptr<NcclDeviceCollectives>> made(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      auto dc = NcclDeviceCollectives::Create(*comms[r], {.device = r, .op_timeout = Bound(c)});
      if (!dc.ok()) {
        results[r] = dc.status();
        return;
      }
      made[r] = *std::move(dc);
      if (c.missing_peer && r == p - 1) return;
      CudaBufferOps mem(r);
      CaseEnv env{*made[r], mem, SumOrder::kUnspecified, Bound(c)};
      results[r] = c.body(env);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < p; ++r) EXPECT_THAT(results[r], IsOk()) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, NcclConformanceTest,
    ::testing::Combine(::testing::Values(1, 2, 4),
                       ::testing::Range(0, static_cast<int>(ConformanceCases().size()))),
    [](const ::testing::TestParamInfo<Param>& info) {
      return absl::StrCat(ConformanceCases()[std::get<1>(info.param)].name, "_p",
                          std::get<0>(info.param));
    });

TEST(NcclDeviceCollectivesTest, ABadDeviceIsRefusedNamingIt) {
  transport::loopback::Fabric fabric(1);
  transport::TransportOptions o;
  o.context = &fabric;
  auto t = transport::MakeTransport("loopback", o);
  ASSERT_THAT(t, IsOk());
  auto comm = Communicator::Connect(**t, {(*t)->LocalAddress()}, {});
  ASSERT_THAT(comm, IsOk());
  const int device = DeviceCount() + 3;
  EXPECT_THAT(NcclDeviceCollectives::Create(**comm, {.device = device}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::HasSubstr(absl::StrCat("device ", device))));
}

}  // namespace
}  // namespace gravac::collectives
