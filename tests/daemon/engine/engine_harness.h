// Test harness: P engines (one per "node") in one process over a loopback fabric, with fake
// DecisionSources and StatsSinks, and helpers to post one tensor per node and wait (bounded) for
// every node's result.
#ifndef GRAVAC_TESTS_DAEMON_ENGINE_ENGINE_HARNESS_H_
#define GRAVAC_TESTS_DAEMON_ENGINE_ENGINE_HARNESS_H_

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/mutex.h"
#include "core/testing/status_matchers.h"
#include "daemon/collectives/communicator.h"
#include "daemon/engine/engine.h"
#include "daemon/transport/loopback/fabric.h"
#include "daemon/transport/transport_registry.h"
#include "gtest/gtest.h"

namespace gravac::daemon::testing {

class FakeDecisions : public DecisionSource {
 public:
  explicit FakeDecisions(JobDecision d) : d_(std::move(d)) {}
  JobDecision Newest() const override {
    MutexLock lock(&mu_);
    return d_;
  }
  void Set(JobDecision d) {
    MutexLock lock(&mu_);
    d_ = std::move(d);
  }

 private:
  mutable Mutex mu_;
  JobDecision d_ ABSL_GUARDED_BY(mu_);
};

class FakeStats : public StatsSink {
 public:
  void Report(const NodeStepStats& s) override {
    MutexLock lock(&mu_);
    reports_.push_back(s);
  }
  std::vector<NodeStepStats> reports() const {
    MutexLock lock(&mu_);
    return reports_;
  }

 private:
  mutable Mutex mu_;
  std::vector<NodeStepStats> reports_ ABSL_GUARDED_BY(mu_);
};

inline JobDecision Decision(int64_t epoch, double theta, double theta_c) {
  JobDecision d;
  d.epoch = epoch;
  d.theta = theta;
  d.theta_candidate = theta_c;
  return d;
}

// P nodes; node n holds ranks_per_node[n] ranks. metrics[n], when given, is node n's
// EngineOptions::metrics.
struct Cluster {
  Cluster(std::vector<int> ranks_per_node, EngineOptions base,
          std::vector<DaemonMetrics*> metrics = {})
      : fabric(static_cast<int>(ranks_per_node.size())) {
    const int p = static_cast<int>(ranks_per_node.size());
    int first = 0;
    for (int c : ranks_per_node) {
      layout.push_back({first, c});
      first += c;
    }
    world = first;
    std::vector<std::string> addresses;
    for (int r = 0; r < p; ++r) {
      transport::TransportOptions o;
      o.rank = r;
      o.world_size = p;
      o.context = &fabric;
      auto t = transport::MakeTransport("loopback", o);
      EXPECT_THAT(t, gravac::testing::IsOk());
      addresses.push_back((*t)->LocalAddress());
      transports.push_back(*std::move(t));
    }
    collectives::CommunicatorOptions co;
    co.op_timeout = absl::Seconds(5);
    for (int r = 0; r < p; ++r) {
      decisions.push_back(
          std::make_unique<FakeDecisions>(Decision(0, base.job.theta_min, base.job.theta_min)));
      stats.push_back(std::make_unique<FakeStats>());
      auto comm = collectives::Communicator::Connect(*transports[r], addresses, co);
      EXPECT_THAT(comm, gravac::testing::IsOk());
      EngineOptions o = base;
      o.node_rank = r;
      o.layout = layout;
      if (!base.step_log_path.empty()) o.step_log_path = base.step_log_path + std::to_string(r);
      if (r < static_cast<int>(metrics.size())) o.metrics = metrics[r];
      auto e = Engine::Start(o, *std::move(comm), decisions[r].get(), stats[r].get());
      EXPECT_THAT(e, gravac::testing::IsOk());
      engines.push_back(*std::move(e));
    }
  }
  ~Cluster() { ShutdownAll(); }

  void ShutdownAll() {
    std::vector<std::future<absl::Status>> done;
    for (auto& e : engines) {
      if (e == nullptr) continue;
      Engine* raw = e.get();
      done.push_back(
          std::async(std::launch::async, [raw] { return raw->Shutdown(absl::Seconds(5)); }));
    }
    for (auto& f : done) f.wait();
    engines.clear();
  }

  int nodes() const { return static_cast<int>(layout.size()); }

  transport::loopback::Fabric fabric;
  std::vector<NodeLayout> layout;
  int world = 0;
  std::vector<std::unique_ptr<transport::Transport>> transports;
  std::vector<std::unique_ptr<FakeDecisions>> decisions;
  std::vector<std::unique_ptr<FakeStats>> stats;
  std::vector<std::unique_ptr<Engine>> engines;
};

// A pending result.
struct Pending {
  std::shared_ptr<std::promise<TensorResult>> promise =
      std::make_shared<std::promise<TensorResult>>();
  std::future<TensorResult> future = promise->get_future();
  DoneCallback callback() {
    auto p = promise;
    return [p](TensorResult r) { p->set_value(std::move(r)); };
  }
  // Whether the result arrived (waiting at most `wait`).
  bool Ready(absl::Duration wait = absl::ZeroDuration()) const {
    return future.wait_for(absl::ToChronoNanoseconds(wait)) == std::future_status::ready;
  }
  // Fails the test (and returns an Unavailable result) when nothing arrives within `timeout`.
  TensorResult Get(absl::Duration timeout = absl::Seconds(10)) {
    if (future.wait_for(absl::ToChronoNanoseconds(timeout)) != std::future_status::ready) {
      ADD_FAILURE() << "no result within " << absl::FormatDuration(timeout);
      TensorResult r;
      r.status = absl::DeadlineExceededError("test: no result");
      return r;
    }
    return future.get();
  }
};

// Moves `clock` on by `step` at a time, letting the engines run a few cycles (a millisecond of
// real time) after each, until done() or `limit` of clock time passed. Returns the clock time it
// moved.
inline absl::Duration AdvanceUntil(ManualClock& clock, absl::Duration step,
                                   const std::function<bool()>& done,
                                   absl::Duration limit = absl::Seconds(60)) {
  absl::Duration moved;
  while (!done() && moved < limit) {
    clock.Advance(step);
    moved += step;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return moved;
}

// a x b fresh Pendings (each with its own promise).
inline std::vector<std::vector<Pending>> PendingGrid(size_t a, size_t b) {
  std::vector<std::vector<Pending>> g(a);
  for (auto& row : g) row.resize(b);
  return g;
}

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <typename T>
std::vector<T> Values(const std::vector<uint8_t>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!b.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

inline NodeTensor Allreduce(std::string name, std::vector<float> data, bool compress, int64_t step,
                            collectives::ReduceOp op = collectives::ReduceOp::kSum) {
  NodeTensor t;
  t.spec.name = std::move(name);
  t.spec.shape = {static_cast<int64_t>(data.size())};
  t.spec.compress = compress;
  t.spec.step = step;
  t.spec.reduce_op = op;
  t.data = Bytes(data);
  return t;
}

// Posts make(node) on every node at once and returns every node's result.
inline std::vector<TensorResult> RunOnAll(Cluster& c, const std::function<NodeTensor(int)>& make) {
  std::vector<Pending> pending(c.nodes());
  for (int n = 0; n < c.nodes(); ++n) c.engines[n]->Enqueue(make(n), pending[n].callback());
  std::vector<TensorResult> results;
  for (auto& p : pending) results.push_back(p.Get());
  return results;
}

// A job compressing with topk at θ_min 10 (θ_max 1000, seed 7).
inline EngineOptions TopK() {
  EngineOptions o;
  o.job.compressor = "topk";
  o.job.theta_min = 10;
  o.job.theta_max = 1000;
  o.job.job_seed = 7;
  return o;
}

// n normal gradient values.
inline std::vector<float> Gradient(std::mt19937& rng, int n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& x : g) x = dist(rng);
  return g;
}

// The step log's lines without their timing fields (" prepare_ms=... start_s=...", this node's
// own measurements), which every line must carry; the rest is the same on every node.
inline std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    const size_t timing = line.find(" prepare_ms=");
    EXPECT_NE(timing, std::string::npos) << line;
    EXPECT_NE(line.find(" exchange_ms="), std::string::npos) << line;
    EXPECT_NE(line.find(" finish_ms="), std::string::npos) << line;
    EXPECT_NE(line.find(" start_s="), std::string::npos) << line;
    lines.push_back(line.substr(0, timing));
  }
  return lines;
}

}  // namespace gravac::daemon::testing

#endif  // GRAVAC_TESTS_DAEMON_ENGINE_ENGINE_HARNESS_H_
