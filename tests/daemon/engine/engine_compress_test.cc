// The engine's compressed path: invariant 1 (one θ per step across nodes whose decisions change
// at different moments), invariant 2 (results equal the error-feedback bookkeeping; nothing is
// lost; dense steps clear the residual) and the per-step statistics.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/absl_compat.h"
#include "core/testing/status_matchers.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/compressor.h"
#include "kernels/cpu/error_feedback.h"
#include "kernels/cpu/scatter_add.h"
#include "kernels/multilevel.h"
#include "kernels/wire_format.h"
#include "tests/daemon/engine/engine_harness.h"

namespace gravac::daemon {
namespace {

using collectives::ReduceOp;
using namespace ::gravac::daemon::testing;  // NOLINT

// The test's own model of one node's error feedback for one tensor.
struct Model {
  std::unique_ptr<kernels::Compressor> compressor;
  std::map<std::pair<int, std::string>, std::vector<float>> residual;  // (node, name)

  explicit Model(const std::string& name = "topk",
                 kernels::ValueType values = kernels::ValueType::kFloat32) {
    auto c = kernels::MakeCompressor(name, {.value_type = values});
    EXPECT_THAT(c, IsOk());
    compressor = *std::move(c);
  }
  // Returns what node `n` sends for `name` at `theta` (1 = dense: p itself) and updates e.
  kernels::Compressed Send(int n, const std::string& name, const std::vector<float>& g,
                           double theta, int64_t step) {
    auto& e = residual[{n, name}];
    e.resize(g.size(), 0.0f);
    std::vector<float> p(g.size());
    for (size_t i = 0; i < g.size(); ++i) p[i] = g[i] + e[i];
    kernels::Compressed m;
    if (theta <= 1.0) {
      m.dense_size = static_cast<int64_t>(p.size());
      for (size_t i = 0; i < p.size(); ++i) {
        m.indices.push_back(static_cast<int32_t>(i));
        m.values.push_back(p[i]);
      }
      std::fill(e.begin(), e.end(), 0.0f);
      return m;
    }
    EXPECT_THAT(compressor->Compress(p, theta, {name, step, 7}, &m), IsOk());
    e = p;  // e = p - decompress(m); with 2-byte values m holds the rounded values
    EXPECT_THAT(kernels::cpu::DecompressAdd(m, -1.0f, absl::MakeSpan(e)), IsOk());
    return m;
  }
};

// Invariant 2: over many steps with θ switching between θ_min, the candidate, a θ that is
// neither, and dense, every node's result equals the model's Σ_nodes decompress(sent) (bit for
// bit), and Σ_t results + Σ_nodes e = Σ_t Σ_nodes g; a final dense step makes them equal and
// clears the residual.
// Payloads of at least this many bytes run their allgather on the executor's helper thread
// while the engine thread finishes (Executor::kOverlapMinBytes).
constexpr size_t kOverlapBytes = 64 << 10;

void CheckBookkeeping(const std::vector<std::pair<std::string, int>>& tensors,
                      size_t min_overlapped_bytes) {
  Cluster c({2, 1, 1}, TopK());
  Model model;
  std::mt19937 rng(3);
  const std::vector<double> thetas = {10, 40, 25, 10, 1, 40, 40, 10, 25, 10, 40, 10};
  std::map<std::string, std::vector<double>> sum_results, sum_grads;
  for (const auto& [name, n] : tensors) {
    sum_results[name].assign(n, 0.0);
    sum_grads[name].assign(n, 0.0);
  }
  for (size_t step = 0; step <= thetas.size(); ++step) {
    const bool last = step == thetas.size();  // a final dense step
    const double theta = last ? 1.0 : thetas[step];
    for (int node = 0; node < c.nodes(); ++node) {
      c.decisions[node]->Set(Decision(static_cast<int64_t>(step) + 1, theta, 40));
    }
    auto pending = PendingGrid(c.nodes(), tensors.size());
    std::vector<std::vector<float>> expected(tensors.size());
    for (size_t t = 0; t < tensors.size(); ++t) {
      const auto& [name, n] = tensors[t];
      expected[t].assign(n, 0.0f);
      for (int node = 0; node < c.nodes(); ++node) {
        std::vector<float> g = Gradient(rng, n);
        if (last && name == "fc") std::fill(g.begin(), g.end(), 0.0f);
        for (int i = 0; i < n; ++i) sum_grads[name][i] += g[i];
        kernels::Compressed m = model.Send(node, name, g, theta, static_cast<int64_t>(step));
        if (t == 0 && theta > 1) EXPECT_GE(kernels::EncodedSize(m), min_overlapped_bytes);
        ASSERT_THAT(kernels::cpu::DecompressAdd(m, 1.0f, absl::MakeSpan(expected[t])), IsOk());
        c.engines[node]->Enqueue(Allreduce(name, g, true, static_cast<int64_t>(step)),
                                 pending[node][t].callback());
      }
    }
    for (size_t t = 0; t < tensors.size(); ++t) {
      const std::string& name = tensors[t].first;
      for (int node = 0; node < c.nodes(); ++node) {
        TensorResult r = pending[node][t].Get();
        ASSERT_THAT(r.status, IsOk());
        EXPECT_EQ(r.decision_epoch, static_cast<int64_t>(step) + 1);
        EXPECT_EQ(r.theta, theta > 1 ? theta : 1.0) << name << " step " << step;
        EXPECT_EQ(r.collective, theta > 1 ? "sparse_allgather" : "dense_allreduce");
        if (theta > 1) {
          EXPECT_EQ(Values<float>(r.data), expected[t]) << name << " step " << step;
        } else {
          // The dense ring sums in ring order: equal up to rounding.
          const auto got = Values<float>(r.data);
          for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[t][i], 1e-5);
        }
        if (node == 0) {
          const auto got = Values<float>(r.data);
          for (size_t i = 0; i < got.size(); ++i) sum_results[name][i] += got[i];
        }
      }
    }
    if (!last) continue;
    // Everything sent: Σ results = Σ gradients, and the residuals are zero.
    for (const auto& [name, n] : tensors) {
      for (int i = 0; i < n; ++i) EXPECT_NEAR(sum_results[name][i], sum_grads[name][i], 1e-4);
    }
  }
  // Residuals were cleared by the dense step: a zero gradient now gives exactly zero.
  auto zeros =
      RunOnAll(c, [](int) { return Allreduce("fc", std::vector<float>(57, 0.0f), true, 99); });
  for (const TensorResult& r : zeros) {
    ASSERT_THAT(r.status, IsOk());
    EXPECT_EQ(Values<float>(r.data), std::vector<float>(57, 0.0f));
  }
}

TEST(EngineCompressTest, ResultsFollowTheErrorFeedbackBookkeeping) {
  CheckBookkeeping({{"conv", 200}, {"fc", 57}}, 0);
}

// The same with a tensor whose messages are large enough that the allgather overlaps the
// residual commit, the other level, the norms and (on nodes 0 and 1) the node's own block: the
// three nodes' sums must still be bit-identical to the model's node-order sums, at θ_min (the
// candidate selected after the send), θ_c (θ_min's level computed after the send) and neither.
TEST(EngineCompressTest, OverlappedExchangeFollowsTheBookkeeping) {
  CheckBookkeeping({{"conv", 600000}, {"fc", 57}}, kOverlapBytes);
}

// Every compressor: the results equal Σ_nodes decompress(C(g + e)) bit for bit, step after step,
// and Σ results + Σ residuals = Σ gradients.
TEST(EngineCompressTest, EveryCompressorFollowsTheBookkeeping) {
  for (const std::string& name : kernels::CompressorNames()) {
    SCOPED_TRACE(name);
    EngineOptions o = TopK();
    o.job.compressor = name;
    Cluster c({1, 1}, o);
    Model model(name);
    std::mt19937 rng(5);
    const int n = 300;
    std::vector<double> sum_results(n, 0.0), sum_grads(n, 0.0);
    for (int step = 0; step < 8; ++step) {
      std::vector<float> expected(n, 0.0f);
      std::vector<Pending> p(2);
      for (int node = 0; node < 2; ++node) {
        std::vector<float> g = Gradient(rng, n);
        for (int i = 0; i < n; ++i) sum_grads[i] += g[i];
        kernels::Compressed m = model.Send(node, "w", g, 10, step);
        ASSERT_THAT(kernels::cpu::DecompressAdd(m, 1.0f, absl::MakeSpan(expected)), IsOk());
        c.engines[node]->Enqueue(Allreduce("w", g, true, step), p[node].callback());
      }
      for (int node = 0; node < 2; ++node) {
        TensorResult r = p[node].Get();
        ASSERT_THAT(r.status, IsOk());
        EXPECT_EQ(r.collective, "sparse_allgather");
        EXPECT_EQ(Values<float>(r.data), expected) << "step " << step;
        if (node == 0) {
          for (int i = 0; i < n; ++i) sum_results[i] += Values<float>(r.data)[i];
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      double residuals = 0.0;
      for (int node = 0; node < 2; ++node) residuals += model.residual[{node, "w"}][i];
      EXPECT_NEAR(sum_results[i] + residuals, sum_grads[i], 1e-4) << "element " << i;
    }
  }
}

// The job's sparse_values (fp16, bf16): the engine sends values rounded to 2 bytes. Results equal
// the error-feedback model with rounded sent values bit for bit; each node's bytes_sent is its
// encoded blocks, 2 bytes per value less than the same selection in fp32; the residual keeps
// the rounding error (a dense step of zero gradients then returns Σ_nodes e exactly).
TEST(EngineCompressTest, TwoByteSparseValuesFollowTheBookkeepingWithRoundedValues) {
  const std::vector<std::pair<std::string, kernels::ValueType>> types = {
      {"fp16", kernels::ValueType::kFloat16}, {"bf16", kernels::ValueType::kBFloat16}};
  for (const auto& [values, type] : types) {
    SCOPED_TRACE(values);
    EngineOptions o = TopK();
    o.job.sparse_values = values;
    Cluster c({1, 1}, o);
    for (auto& d : c.decisions) d->Set(Decision(1, 10, 40));
    Model model("topk", type);
    std::mt19937 rng(17);
    const int n = 500;
    const int steps = 4;
    std::vector<std::vector<int64_t>> want_bytes(2, std::vector<int64_t>(steps, 0));
    for (int step = 0; step < steps; ++step) {
      std::vector<float> expected(n, 0.0f);
      std::vector<Pending> p(2);
      for (int node = 0; node < 2; ++node) {
        std::vector<float> g = Gradient(rng, n);
        std::vector<float> e = model.residual[{node, "w"}];
        e.resize(n, 0.0f);
        kernels::Compressed m = model.Send(node, "w", g, 10, step);
        const std::vector<float>& e_after = model.residual[{node, "w"}];
        ASSERT_EQ(m.value_type, type);
        // The sent values are rounded: some differ from p = g + e, and the residual keeps exactly
        // the difference at the sent elements.
        int rounded = 0;
        for (int64_t j = 0; j < m.count(); ++j) {
          const int32_t i = m.indices[j];
          const float pi = g[i] + e[i];
          rounded += m.values[j] != pi;
          EXPECT_EQ(e_after[i], pi - m.values[j]) << "element " << i;
        }
        EXPECT_GT(rounded, 0) << "node " << node << " step " << step;
        kernels::Compressed as_fp32 = m;
        as_fp32.value_type = kernels::ValueType::kFloat32;
        EXPECT_EQ(kernels::EncodedSize(as_fp32) - kernels::EncodedSize(m),
                  2 * static_cast<size_t>(m.count()));
        // Ring allgather over 2 nodes: each node sends its own block (ok byte, size, encoding).
        want_bytes[node][step] = 1 + 8 + static_cast<int64_t>(kernels::EncodedSize(m));
        ASSERT_THAT(kernels::cpu::DecompressAdd(m, 1.0f, absl::MakeSpan(expected)), IsOk());
        c.engines[node]->Enqueue(Allreduce("w", g, true, step), p[node].callback());
      }
      for (int node = 0; node < 2; ++node) {
        TensorResult r = p[node].Get();
        ASSERT_THAT(r.status, IsOk());
        EXPECT_EQ(r.collective, "sparse_allgather");
        EXPECT_EQ(Values<float>(r.data), expected) << "step " << step;
      }
    }
    // A dense step of zero gradients sends p = e: the sum of the residuals, rounding errors
    // included (two nodes: one addition per element, exact).
    for (auto& d : c.decisions) d->Set(Decision(2, 1, 40));
    auto dense =
        RunOnAll(c, [&](int) { return Allreduce("w", std::vector<float>(n, 0.0f), true, steps); });
    std::vector<float> residuals(n);
    for (int i = 0; i < n; ++i) {
      residuals[i] = model.residual[{0, "w"}][i] + model.residual[{1, "w"}][i];
    }
    for (const TensorResult& r : dense) {
      ASSERT_THAT(r.status, IsOk());
      EXPECT_EQ(r.collective, "dense_allreduce");
      EXPECT_EQ(Values<float>(r.data), residuals);
    }
    c.ShutdownAll();
    for (int node = 0; node < 2; ++node) {
      const auto reports = c.stats[node]->reports();
      ASSERT_EQ(reports.size(), static_cast<size_t>(steps + 1)) << "node " << node;
      for (int step = 0; step < steps; ++step) {
        EXPECT_EQ(reports[step].bytes_sent, want_bytes[node][step])
            << "node " << node << " step " << step;
      }
    }
  }
}

TEST(EngineCompressTest, AverageDividesByTheWorldSizeInRanks) {
  Cluster c({3, 1}, TopK());  // world of 4 ranks
  std::vector<float> g0(100), g1(100);
  for (int i = 0; i < 100; ++i) {
    g0[i] = static_cast<float>(i);
    g1[i] = static_cast<float>(2 * i);
  }
  auto r = RunOnAll(
      c, [&](int n) { return Allreduce("w", n == 0 ? g0 : g1, true, 0, ReduceOp::kAverage); });
  // θ = 10 keeps the 10 largest of each node: indices 90..99.
  std::vector<float> want(100, 0.0f);
  for (int i = 90; i < 100; ++i) want[i] = (g0[i] + g1[i]) / 4.0f;
  for (const TensorResult& x : r) {
    ASSERT_THAT(x.status, IsOk());
    EXPECT_EQ(x.collective, "sparse_allgather");
    EXPECT_EQ(Values<float>(x.data), want);
  }
}

// A non-finite gradient on one node cannot be compressed: every node fails that tensor with a
// message naming the node's ranks, and the next tensors still work.
TEST(EngineCompressTest, NonFiniteGradientOnOneNodeFailsEveryNode) {
  Cluster c({2, 2}, TopK());
  auto r = RunOnAll(c, [](int n) {
    std::vector<float> g(100, 1.0f);
    if (n == 1) g[17] = std::nanf("");
    return Allreduce("bad", g, true, 0);
  });
  for (const TensorResult& x : r) {
    EXPECT_THAT(x.status, ::gravac::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                                      ::testing::HasSubstr("ranks 2-3")));
    EXPECT_THAT(std::string(x.status.message()), ::testing::HasSubstr("'bad'"));
  }
  auto ok =
      RunOnAll(c, [](int n) { return Allreduce("good", std::vector<float>(100, 1.0f), true, 1); });
  for (const TensorResult& x : ok) EXPECT_THAT(x.status, IsOk());
}

TEST(EngineCompressTest, ThetaThatCannotSaveBytesGoesDense) {
  Cluster c({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, TopK());  // 12 nodes: θ = 10 cannot win
  auto r = RunOnAll(c, [](int n) { return Allreduce("w", std::vector<float>(50, 1.0f), true, 0); });
  for (const TensorResult& x : r) {
    ASSERT_THAT(x.status, IsOk());
    EXPECT_EQ(x.collective, "dense_allreduce");
    EXPECT_EQ(x.theta, 1.0);
    EXPECT_EQ(Values<float>(x.data), std::vector<float>(50, 12.0f));
  }
}

// The sparse-or-dense choice prices the real wire format (varint-coded indices), not 8 bytes per
// kept element: at 12 nodes and θ = 10 a 4,000-element tensor costs at most 2,238 bytes sparse
// against 2,667 per rank for the dense ring (3,200 at 8 bytes a value, which sent it dense), while
// a 50-element one stays dense (above). The pure rule, for fp32 and fp16 values, randomk and
// redsync (whose count can reach 2k − 1).
TEST(EngineCompressTest, SparseIsPricedByTheWireFormat) {
  Cluster c({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, TopK());
  std::vector<float> data(4000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  auto r = RunOnAll(c, [&](int n) { return Allreduce("w", data, true, 0); });
  std::vector<float> want(data.size(), 0.0f);
  for (size_t i = 3600; i < data.size(); ++i) want[i] = 12.0f * data[i];  // each node's top 400
  for (const TensorResult& x : r) {
    ASSERT_THAT(x.status, IsOk());
    EXPECT_EQ(x.collective, "sparse_allgather");
    EXPECT_EQ(x.theta, 10.0);
    EXPECT_EQ(Values<float>(x.data), want);
  }

  ASSERT_OK_AND_ASSIGN(auto topk, kernels::MakeCompressor("topk", {}));
  ASSERT_OK_AND_ASSIGN(auto randomk, kernels::MakeCompressor("randomk", {}));
  TensorSpec spec;
  spec.shape = {4000};
  spec.compress = true;
  internal::PlanOptions plan{.world_nodes = 12, .compressor = topk.get()};
  EXPECT_TRUE(internal::SendsCompressed(spec, 10.0, plan));
  plan.world_nodes = 15;  // 14·2238 > 2·14/15·16000
  EXPECT_FALSE(internal::SendsCompressed(spec, 10.0, plan));
  plan.value_type = kernels::ValueType::kFloat16;  // 2-byte values: 1,438 bytes at most
  EXPECT_TRUE(internal::SendsCompressed(spec, 10.0, plan));
  plan.value_type = kernels::ValueType::kFloat32;
  plan.world_nodes = 18;
  EXPECT_FALSE(internal::SendsCompressed(spec, 10.0, plan));
  plan.compressor = randomk.get();  // implicit indices: 1,640 bytes
  EXPECT_TRUE(internal::SendsCompressed(spec, 10.0, plan));
  plan.world_nodes = 20;
  EXPECT_FALSE(internal::SendsCompressed(spec, 10.0, plan));
  spec.shape = {50};
  plan.world_nodes = 12;
  plan.compressor = topk.get();
  EXPECT_FALSE(internal::SendsCompressed(spec, 10.0, plan));
  // redsync may keep up to 2k − 1 values: 4,309 bytes at most, dense at 12 nodes.
  ASSERT_OK_AND_ASSIGN(auto redsync, kernels::MakeCompressor("redsync", {}));
  EXPECT_EQ(redsync->MaxCount(4000, 10.0), 799);
  EXPECT_EQ(redsync->MaxCount(4000, 1.0), 4000);
  spec.shape = {4000};
  plan.compressor = redsync.get();
  EXPECT_FALSE(internal::SendsCompressed(spec, 10.0, plan));
  plan.world_nodes = 6;
  EXPECT_TRUE(internal::SendsCompressed(spec, 10.0, plan));
}

// Invariant 1: each node's decision source moves to newer epochs at its own moments, while the
// nodes run steps; every tensor of a step reports the same θ, collective and epoch on every
// node, the step logs agree, and the epoch never decreases.
TEST(EngineCompressTest, OneThetaPerStepWhenDecisionsArriveAtDifferentTimes) {
  EngineOptions o = TopK();
  o.step_log_path = absl::StrCat(::testing::TempDir(), "/engine_inv1_", getpid(), "_");
  const int steps = 60;
  std::vector<std::vector<std::vector<TensorResult>>> results;  // [node][step][tensor]
  {
    Cluster c({1, 2, 1}, o);
    results.resize(c.nodes());
    auto theta_of = [](int64_t e) { return e % 3 == 0 ? 10.0 : (e % 3 == 1 ? 40.0 : 1.0); };
    std::atomic<bool> stop{false};
    std::vector<std::thread> switchers;
    for (int node = 0; node < c.nodes(); ++node) {
      switchers.emplace_back([&, node] {
        std::mt19937 rng(node);
        for (int64_t e = 1; !stop.load(); ++e) {
          absl::SleepFor(absl::Microseconds(std::uniform_int_distribution<int>(500, 4000)(rng)));
          c.decisions[node]->Set(Decision(e, theta_of(e), 40));
        }
      });
    }
    std::vector<std::thread> workers;
    for (int node = 0; node < c.nodes(); ++node) {
      workers.emplace_back([&, node] {
        std::mt19937 rng(100 + node);
        for (int s = 0; s < steps; ++s) {
          std::vector<Pending> p(3);
          for (int t = 0; t < 3; ++t) {
            c.engines[node]->Enqueue(
                Allreduce(absl::StrCat("layer", t), Gradient(rng, 64 + 16 * t), true, s),
                p[t].callback());
          }
          results[node].emplace_back();
          for (auto& x : p) results[node].back().push_back(x.Get());
        }
      });
    }
    for (auto& w : workers) w.join();
    stop = true;
    for (auto& s : switchers) s.join();
  }
  int64_t last_epoch = -1;
  std::set<int64_t> epochs;
  for (int s = 0; s < steps; ++s) {
    const TensorResult& ref = results[0][s][0];
    ASSERT_THAT(ref.status, IsOk());
    EXPECT_GE(ref.decision_epoch, last_epoch) << "step " << s;
    last_epoch = ref.decision_epoch;
    epochs.insert(ref.decision_epoch);
    for (size_t node = 0; node < results.size(); ++node) {
      for (const TensorResult& r : results[node][s]) {
        ASSERT_THAT(r.status, IsOk());
        EXPECT_EQ(r.decision_epoch, ref.decision_epoch) << "node " << node << " step " << s;
        EXPECT_EQ(r.theta, ref.theta) << "node " << node << " step " << s;
        EXPECT_EQ(r.collective, ref.collective) << "node " << node << " step " << s;
        EXPECT_EQ(r.data, results[0][s][&r - &results[node][s][0]].data);
      }
    }
  }
  EXPECT_GT(epochs.size(), 3u);  // decisions did change during the run
  const auto log0 = ReadLines(o.step_log_path + "0");
  EXPECT_FALSE(log0.empty());
  for (int node = 1; node < 3; ++node) {
    EXPECT_EQ(ReadLines(o.step_log_path + std::to_string(node)), log0);
  }
  for (int node = 0; node < 3; ++node)
    std::remove((o.step_log_path + std::to_string(node)).c_str());
}

// The statistics reported per step match the norms and bytes computed here.
// Statistics of 3 steps on 2 nodes at `theta` (θ_min = 10, θ_c = 40) for two tensors of
// `elements` and `elements` + `elements` / 3 elements.
void CheckStepStatistics(int elements, double theta, size_t min_overlapped_bytes) {
  EngineOptions o = TopK();
  Cluster c({1, 1}, o);
  for (auto& d : c.decisions) d->Set(Decision(1, theta, 40));
  Model model;
  std::mt19937 rng(11);
  const int steps = 3;
  struct Want {
    double n_g = 0, n_min = 0, n_c = 0;
    int64_t bytes_sent = 0, bytes_dense = 0;
  };
  std::vector<std::vector<Want>> want(2, std::vector<Want>(steps));
  std::vector<std::vector<int64_t>> block(2, std::vector<int64_t>(steps, 0));
  for (int s = 0; s < steps; ++s) {
    auto p = PendingGrid(2, 2);
    for (int node = 0; node < 2; ++node) {
      for (int t = 0; t < 2; ++t) {
        const std::string name = absl::StrCat("t", t);
        std::vector<float> g = Gradient(rng, elements + (elements / 3) * t);
        // N_min and N_c are measured on p = g + e before this step's update.
        std::vector<float> e = model.residual[{node, name}];
        e.resize(g.size(), 0.0f);
        std::vector<float> pv(g.size());
        for (size_t i = 0; i < g.size(); ++i) pv[i] = g[i] + e[i];
        kernels::MultiLevelResult ml;
        ASSERT_THAT(kernels::CompressMultiLevel(*model.compressor, pv, 10, 40, {name, s, 7}, &ml),
                    IsOk());
        Want& w = want[node][s];
        w.n_g += kernels::L2Norm(g);
        w.n_min += ml.norm_min;
        w.n_c += ml.norm_candidate;
        w.bytes_dense += static_cast<int64_t>(g.size() * 4);  // 2(P-1)/P·n·4 with P = 2
        kernels::Compressed m = model.Send(node, name, g, theta, s);
        EXPECT_GE(kernels::EncodedSize(m), min_overlapped_bytes);
        block[node][s] += 1 + 8 + static_cast<int64_t>(kernels::EncodedSize(m));
        NodeTensor nt = Allreduce(name, g, true, s);
        nt.samples = 32;
        c.engines[node]->Enqueue(std::move(nt), p[node][t].callback());
      }
    }
    for (auto& row : p) {
      for (auto& x : row) ASSERT_THAT(x.Get().status, IsOk());
    }
    // Ring allgather over 2 nodes: each node sends its own block once.
    for (int node = 0; node < 2; ++node) want[node][s].bytes_sent = block[node][s];
  }
  c.ShutdownAll();  // reports the last step
  for (int node = 0; node < 2; ++node) {
    const auto reports = c.stats[node]->reports();
    ASSERT_EQ(reports.size(), static_cast<size_t>(steps)) << "node " << node;
    for (int s = 0; s < steps; ++s) {
      const NodeStepStats& r = reports[s];
      const Want& w = want[node][s];
      EXPECT_EQ(r.step, s);
      EXPECT_EQ(r.node_rank, node);
      EXPECT_EQ(r.decision_epoch, 1);
      EXPECT_EQ(r.theta_used, theta);
      EXPECT_EQ(r.theta_candidate, 40.0);
      EXPECT_NEAR(r.n_g, w.n_g, 1e-9 * w.n_g);
      EXPECT_NEAR(r.n_min, w.n_min, 1e-9 * w.n_min);
      EXPECT_NEAR(r.n_c, w.n_c, 1e-9 * w.n_c);
      EXPECT_LT(r.n_c, r.n_min);
      EXPECT_EQ(r.bytes_sent, w.bytes_sent);
      EXPECT_EQ(r.bytes_dense, w.bytes_dense);
      EXPECT_EQ(r.samples, 32);
      EXPECT_GE(r.step_seconds, 0.0);
    }
  }
}

TEST(EngineCompressTest, StepStatisticsMatchTheModel) { CheckStepStatistics(300, 10, 0); }

// Large messages: the norms are computed while the allgather runs (the candidate's level after a
// θ_min send, θ_min's level after a θ_c send) and must still be this step's.
TEST(EngineCompressTest, StepStatisticsOfOverlappedSendsMatchTheModel) {
  CheckStepStatistics(600000, 10, kOverlapBytes);
  CheckStepStatistics(600000, 40, kOverlapBytes);
}

}  // namespace
}  // namespace gravac::daemon
