// Test harness: the Executors of a job of P nodes (one rank each) over a loopback fabric, run
// group by group (each node's Run on its own thread), so that tests can read what the engine
// hides: each node's residuals, which compression backend holds them, and the statistics' norms.
// Used to compare the backend path of the compressed exchange (backend_compression.h) with the
// CPU compressor path bit for bit.
#ifndef GRAVAC_TESTS_DAEMON_ENGINE_EXECUTOR_PAIR_H_
#define GRAVAC_TESTS_DAEMON_ENGINE_EXECUTOR_PAIR_H_

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/logging.h"
#include "core/memory_type.h"
#include "core/testing/status_matchers.h"
#include "daemon/collectives/communicator.h"
#include "daemon/engine/executor.h"
#include "daemon/transport/loopback/fabric.h"
#include "daemon/transport/transport_registry.h"
#include "gtest/gtest.h"
#include "kernels/compressor.h"
#include "kernels/cpu/sum_squares.h"
#include "tests/daemon/engine/engine_harness.h"
#include "tests/daemon/engine/fake_device_backend.h"

namespace gravac::daemon::testing {

// One step's tensor on every node: its name, its gradients (one per node), where the workers'
// buffers live and, for kDevice, their CUDA device (-1: unknown, as for client-staged tensors).
struct StepTensor {
  std::string name;
  std::vector<std::vector<float>> grads;  // per node
  MemoryType memory = MemoryType::kHost;
  int device = 0;
  // kDevice: when set, the node's sum reaches the engine in this fake device memory
  // (NodeTensor::device_data), as after a device reduce; else in host memory.
  std::shared_ptr<FakeDeviceMemory> device_sums = nullptr;
};

class ExecutorJob {
 public:
  // P nodes compressing with `compressor` (θ_min 10, seed 7) at `values` precision;
  // compression_backend as ExecutorOptions says; `log` (may be null) is every node's.
  // `device_backends` (null: the real ones) makes the CUDA devices' compression backends.
  ExecutorJob(int nodes, const std::string& compressor, bool compression_backend,
              kernels::ValueType values = kernels::ValueType::kFloat32, Logger* log = nullptr,
              internal::DeviceBackendFactory device_backends = nullptr)
      : fabric_(nodes) {
    std::vector<NodeLayout> layout;
    for (int n = 0; n < nodes; ++n) layout.push_back({n, 1});
    std::vector<std::string> addresses;
    for (int r = 0; r < nodes; ++r) {
      transport::TransportOptions o;
      o.rank = r;
      o.world_size = nodes;
      o.context = &fabric_;
      auto t = transport::MakeTransport("loopback", o);
      EXPECT_THAT(t, IsOk());
      addresses.push_back((*t)->LocalAddress());
      transports_.push_back(*std::move(t));
    }
    collectives::CommunicatorOptions co;
    co.op_timeout = absl::Seconds(10);
    for (int r = 0; r < nodes; ++r) {
      auto comm = collectives::Communicator::Connect(*transports_[r], addresses, co);
      EXPECT_THAT(comm, IsOk());
      comms_.push_back(*std::move(comm));
      stats_.push_back(std::make_unique<FakeStats>());
      internal::ExecutorOptions e;
      e.node_rank = r;
      e.layout = layout;
      e.job.compressor = compressor;
      e.job.theta_min = 10;
      e.job.theta_max = 1000;
      e.job.job_seed = 7;
      e.value_type = values;
      e.compression_backend = compression_backend;
      e.log = log;
      e.device_backends = device_backends;
      auto c = kernels::MakeCompressor(compressor, {.value_type = values});
      EXPECT_THAT(c, IsOk());
      auto x = internal::Executor::Create(std::move(e), comms_.back().get(), *std::move(c),
                                          stats_.back().get());
      EXPECT_THAT(x, IsOk());
      executors_.push_back(*std::move(x));
    }
  }

  int nodes() const { return static_cast<int>(executors_.size()); }
  internal::Executor& executor(int node) { return *executors_[node]; }
  // Every step's statistics so far (Flush first).
  std::vector<NodeStepStats> Stats(int node) {
    executors_[node]->Flush();
    return stats_[node]->reports();
  }

  // Runs `tensors` of `step` as one group at θ (1 = dense) with decision {epoch step + 1, θ,
  // theta_c} on every node; returns each node's results, in the order of `tensors`.
  std::vector<std::vector<TensorResult>> Run(int64_t step, double theta, double theta_c,
                                             const std::vector<StepTensor>& tensors) {
    std::vector<NodeTensor> data(nodes() * tensors.size());
    std::vector<std::vector<internal::WorkItem>> items(nodes());
    internal::Group group;
    group.mode =
        theta > 1 ? internal::GroupMode::kSparseAllreduce : internal::GroupMode::kDenseAllreduce;
    group.theta = theta > 1 ? theta : 1.0;
    for (size_t t = 0; t < tensors.size(); ++t) group.members.push_back(t);
    for (int n = 0; n < nodes(); ++n) {
      for (size_t t = 0; t < tensors.size(); ++t) {
        NodeTensor& nt = data[n * tensors.size() + t];
        nt = Allreduce(tensors[t].name, tensors[t].grads[n], true, step);
        nt.spec.memory = tensors[t].memory;
        nt.device = tensors[t].memory == MemoryType::kDevice ? tensors[t].device : -1;
        if (tensors[t].memory == MemoryType::kDevice && tensors[t].device_sums != nullptr) {
          nt.device_data =
              FakeDeviceData::Make(tensors[t].device, tensors[t].device_sums, tensors[t].grads[n]);
          nt.data.clear();
        }
        nt.samples = 8;
        internal::WorkItem w;
        w.ready.spec = nt.spec;
        w.ready.decision = Decision(step + 1, group.theta, theta_c);
        w.tensor = &nt;
        items[n].push_back(std::move(w));
      }
    }
    std::vector<std::vector<TensorResult>> results(nodes(),
                                                   std::vector<TensorResult>(tensors.size()));
    std::vector<std::future<absl::Status>> runs;
    for (int n = 0; n < nodes(); ++n) {
      runs.push_back(std::async(std::launch::async, [this, n, &group, &items, &results] {
        return executors_[n]->Run(group, items[n], &results[n]);
      }));
    }
    for (auto& r : runs) EXPECT_THAT(r.get(), IsOk());
    return results;
  }

 private:
  transport::loopback::Fabric fabric_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;
  std::vector<std::unique_ptr<collectives::Communicator>> comms_;
  std::vector<std::unique_ptr<FakeStats>> stats_;
  std::vector<std::unique_ptr<internal::Executor>> executors_;  // last: joined first
};

// The steps and tensors of the comparison of the two paths.
struct PlannedStep {
  double theta;    // the group's θ (1 = dense)
  double theta_c;  // the decision's candidate
};
// θ_min = 10: sent at θ_min (candidate after the send), at θ_c (θ_min's level after the send),
// at a θ that is neither, with a candidate below θ_min (no multi-level), and dense.
inline const std::vector<PlannedStep> kSteps = {{10, 40}, {40, 40}, {25, 40}, {10, 5},
                                                {1, 40},  {40, 40}, {10, 40}, {10, 10}};

inline std::vector<StepTensor> Tensors(std::mt19937& rng, int nodes, MemoryType memory) {
  // 200000 elements at θ = 10: a payload above the executor's overlap threshold (64 KiB).
  std::vector<StepTensor> tensors = {{"conv", {}, memory}, {"fc", {}, memory}};
  const int sizes[] = {200000, 57};
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (int n = 0; n < nodes; ++n) tensors[t].grads.push_back(Gradient(rng, sizes[t]));
  }
  return tensors;
}

// The order of the norms in the statistics: the CPU compressor path's (kernels::L2Norm), or a
// device backend's (its SumSquares, kernels/cpu/sum_squares.h, over g and both levels' values).
enum class NormOrder { kL2Norm, kSumSquares };

// A step's norms (‖g‖, ‖θ_min's message‖, ‖θ_c's message‖) as a device backend takes them,
// derived on the host: p = g + e, its top-k at θ_min and at max(1, θ_c) by the topk compressor,
// cpu::SumSquares of each.
struct Norms {
  double grad = 0.0, at_min = 0.0, at_candidate = 0.0;
};
inline Norms SumSquaresNorms(const std::vector<float>& g, const std::vector<float>& e,
                             double theta_min, double theta_c) {
  std::vector<float> p(g.size());
  for (size_t i = 0; i < g.size(); ++i) p[i] = g[i] + e[i];
  auto topk = kernels::MakeCompressor("topk", {});
  EXPECT_THAT(topk, IsOk());
  kernels::Compressed at_min, at_c;
  EXPECT_THAT((*topk)->Compress(p, theta_min, {"t", 0, 7}, &at_min), IsOk());
  EXPECT_THAT((*topk)->Compress(p, std::max(1.0, theta_c), {"t", 0, 7}, &at_c), IsOk());
  return {std::sqrt(kernels::cpu::SumSquares(g)), std::sqrt(kernels::cpu::SumSquares(at_min.values)),
          std::sqrt(kernels::cpu::SumSquares(at_c.values))};
}

// Runs kSteps on a job with the backend path and one without, and compares them bit for bit:
// results and residuals, and the norms of the statistics in `norms` order (kSumSquares: against
// SumSquaresNorms). `backend` is the backend the residuals must be on ("cpu", "cuda");
// `device_backends` as ExecutorJob's; `device_sums` (kDevice) hands the backend path's job each
// node's sum in that fake device memory (the reference gets it in host memory).
inline void ExpectSameAsTheCpuCompressorPath(
    MemoryType memory, std::string_view backend, NormOrder norms = NormOrder::kL2Norm,
    internal::DeviceBackendFactory device_backends = nullptr,
    std::shared_ptr<FakeDeviceMemory> device_sums = nullptr) {
  ExecutorJob on_backend(2, "topk", true, kernels::ValueType::kFloat32, nullptr, device_backends);
  ExecutorJob reference(2, "topk", false);
  std::mt19937 rng(21);
  // Per step and node, the statistics' norms a device backend gives (kSumSquares).
  std::vector<std::vector<Norms>> expected(kSteps.size(), std::vector<Norms>(2));
  const bool squared = JobConfig{}.global_norm;
  for (size_t s = 0; s < kSteps.size(); ++s) {
    SCOPED_TRACE(::testing::Message() << "step " << s << " at theta " << kSteps[s].theta);
    const std::vector<StepTensor> tensors = Tensors(rng, 2, memory);
    for (int n = 0; n < 2; ++n) {
      for (const StepTensor& t : tensors) {  // summed in member order, as StepStatsAccumulator
        std::vector<float> e = reference.executor(n).Residual(t.name);
        if (e.empty()) e.assign(t.grads[n].size(), 0.0f);
        const Norms x = SumSquaresNorms(t.grads[n], e, 10, kSteps[s].theta_c);
        auto add = [squared](double* sum, double l2) { *sum += squared ? l2 * l2 : l2; };
        add(&expected[s][n].grad, x.grad);
        add(&expected[s][n].at_min, x.at_min);
        add(&expected[s][n].at_candidate, x.at_candidate);
      }
    }
    std::vector<StepTensor> on_device = tensors;
    for (StepTensor& t : on_device) t.device_sums = device_sums;
    const auto got =
        on_backend.Run(static_cast<int64_t>(s), kSteps[s].theta, kSteps[s].theta_c, on_device);
    const auto want =
        reference.Run(static_cast<int64_t>(s), kSteps[s].theta, kSteps[s].theta_c, tensors);
    for (int n = 0; n < 2; ++n) {
      for (size_t t = 0; t < tensors.size(); ++t) {
        const std::string& name = tensors[t].name;
        ASSERT_THAT(got[n][t].status, IsOk()) << name;
        ASSERT_THAT(want[n][t].status, IsOk()) << name;
        EXPECT_EQ(got[n][t].collective, want[n][t].collective);
        EXPECT_EQ(got[n][t].theta, want[n][t].theta);
        EXPECT_EQ(Values<float>(got[n][t].data), Values<float>(want[n][t].data))
            << name << " node " << n;
        const std::vector<float> e = on_backend.executor(n).Residual(name);
        ASSERT_EQ(e.size(), tensors[t].grads[n].size());
        EXPECT_EQ(e, reference.executor(n).Residual(name)) << name << " node " << n;
        EXPECT_EQ(on_backend.executor(n).ResidualBackend(name), backend);
        EXPECT_EQ(reference.executor(n).ResidualBackend(name), "");
      }
    }
  }
  // The residuals were carried: after the dense step (4) they are non-zero again.
  EXPECT_NE(on_backend.executor(0).Residual("conv"), std::vector<float>(200000, 0.0f));
  for (int n = 0; n < 2; ++n) {
    const std::vector<NodeStepStats> got = on_backend.Stats(n), want = reference.Stats(n);
    ASSERT_EQ(got.size(), kSteps.size());
    ASSERT_EQ(got.size(), want.size());
    for (size_t s = 0; s < got.size(); ++s) {
      EXPECT_EQ(got[s].step, want[s].step);
      EXPECT_GT(got[s].n_g, 0.0);
      if (norms == NormOrder::kL2Norm) {
        EXPECT_EQ(got[s].n_g, want[s].n_g) << "step " << s;
        EXPECT_EQ(got[s].n_min, want[s].n_min) << "step " << s;
        EXPECT_EQ(got[s].n_c, want[s].n_c) << "step " << s;
      } else {
        EXPECT_EQ(got[s].n_g, expected[s][n].grad) << "step " << s;
        EXPECT_EQ(got[s].n_min, expected[s][n].at_min) << "step " << s;
        EXPECT_EQ(got[s].n_c, expected[s][n].at_candidate) << "step " << s;
        // The same norms to rounding: only the order of the sums differs.
        EXPECT_NEAR(got[s].n_g, want[s].n_g, 1e-9 * want[s].n_g) << "step " << s;
        EXPECT_NEAR(got[s].n_min, want[s].n_min, 1e-9 * want[s].n_min) << "step " << s;
        EXPECT_NEAR(got[s].n_c, want[s].n_c, 1e-9 * want[s].n_c) << "step " << s;
      }
      EXPECT_EQ(got[s].bytes_sent, want[s].bytes_sent) << "step " << s;
    }
  }
}

}  // namespace gravac::daemon::testing

#endif  // GRAVAC_TESTS_DAEMON_ENGINE_EXECUTOR_PAIR_H_
