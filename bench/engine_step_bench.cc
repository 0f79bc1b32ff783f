// gravac-engine-step-bench: the cost of gravacd's compressed step on the host path, the two ways
// the engine can run topk with fp32 values side by side in one run: on kernels' compression
// backend (the CPU backend's TopKStep, what gravacd uses) and on the CPU compressor path
// (cpu::TopKCompressor + cpu::ErrorFeedback, ExecutorOptions::compression_backend = false). Each
// path is a job of --nodes Executors (one per thread) over a loopback fabric; every timed step
// runs one fp32 tensor of --elements as one group on every node, the two paths alternating which
// goes first. It prints the median step time of each path and their ratio per θ. It fails only on
// a wrong result: the two paths must give the same results and residuals bit for bit.
// bench/README.md explains the columns.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_data.h"
#include "core/settings.h"
#include "core/status.h"
#include "daemon/collectives/communicator.h"
#include "daemon/engine/executor.h"
#include "daemon/transport/loopback/fabric.h"
#include "daemon/transport/transport_registry.h"
#include "kernels/compressor.h"

namespace gravac::bench {
namespace {

using daemon::internal::Executor;

constexpr SettingSpec kSettings[] = {
    {"elements", "", "4194304", "fp32 elements of the tensor", SettingType::kInt},
    {"nodes", "", "2", "nodes of the job (one Executor per thread)", SettingType::kInt},
    {"thetas", "", "10,40", "comma-separated θ of the compressed steps"},
    {"theta_c", "", "40", "the decision's candidate θ_c (θ_min is 10)", SettingType::kDouble},
    {"steps", "", "20", "timed steps per path and θ (the median is reported)", SettingType::kInt},
    {"warmup", "", "2", "untimed steps per path and θ before the timed ones", SettingType::kInt},
    {"seed", "", "1", "seed of the gradients", SettingType::kInt},
};

struct Options {
  int64_t n = 0;
  int nodes = 0;
  std::vector<double> thetas;
  double theta_c = 0;
  int steps = 0;
  int warmup = 0;
  uint64_t seed = 0;
};

absl::StatusOr<Options> ReadOptions(const Settings& settings) {
  Options o;
  ASSIGN_OR_RETURN(o.n, settings.GetInt("elements"));
  ASSIGN_OR_RETURN(int64_t nodes, settings.GetInt("nodes"));
  ASSIGN_OR_RETURN(std::string thetas, settings.GetString("thetas"));
  ASSIGN_OR_RETURN(o.theta_c, settings.GetDouble("theta_c"));
  ASSIGN_OR_RETURN(int64_t steps, settings.GetInt("steps"));
  ASSIGN_OR_RETURN(int64_t warmup, settings.GetInt("warmup"));
  ASSIGN_OR_RETURN(int64_t seed, settings.GetInt("seed"));
  if (o.n < 1 || o.n > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--elements %d must be in [1, 2^31 - 1]", o.n));
  }
  if (nodes < 1 || nodes > 16) {
    return absl::InvalidArgumentError(absl::StrFormat("--nodes %d must be in [1, 16]", nodes));
  }
  if (steps < 1 || warmup < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--steps %d must be >= 1 and --warmup %d >= 0", steps, warmup));
  }
  for (absl::string_view t : absl::StrSplit(thetas, ',', absl::SkipEmpty())) {
    double theta = 0;
    if (!absl::SimpleAtod(t, &theta) || !(theta > 1)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--thetas: '%s' is not a θ > 1 (a compressed step)", t));
    }
    o.thetas.push_back(theta);
  }
  if (o.thetas.empty()) return absl::InvalidArgumentError("--thetas is empty");
  if (!(o.theta_c >= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("--theta_c %g must be >= 1", o.theta_c));
  }
  o.nodes = static_cast<int>(nodes);
  o.steps = static_cast<int>(steps);
  o.warmup = static_cast<int>(warmup);
  o.seed = static_cast<uint64_t>(seed);
  return o;
}

class DiscardStats : public daemon::StatsSink {
 public:
  void Report(const daemon::NodeStepStats&) override {}
};

// A job of `nodes` Executors over a loopback fabric, topk at θ_min 10 (seed 7), on the
// compression backend or on the CPU compressor path.
class Job {
 public:
  static absl::StatusOr<std::unique_ptr<Job>> Make(int nodes, bool compression_backend) {
    auto job = std::unique_ptr<Job>(new Job(nodes));
    std::vector<daemon::NodeLayout> layout;
    for (int n = 0; n < nodes; ++n) layout.push_back({n, 1});
    std::vector<std::string> addresses;
    for (int r = 0; r < nodes; ++r) {
      transport::TransportOptions o;
      o.rank = r;
      o.world_size = nodes;
      o.context = &job->fabric_;
      ASSIGN_OR_RETURN(std::unique_ptr<transport::Transport> t,
                       transport::MakeTransport("loopback", o));
      addresses.push_back(t->LocalAddress());
      job->transports_.push_back(std::move(t));
    }
    collectives::CommunicatorOptions co;
    co.op_timeout = absl::Seconds(60);
    for (int r = 0; r < nodes; ++r) {
      ASSIGN_OR_RETURN(std::unique_ptr<collectives::Communicator> comm,
                       collectives::Communicator::Connect(*job->transports_[r], addresses, co));
      job->comms_.push_back(std::move(comm));
      daemon::internal::ExecutorOptions e;
      e.node_rank = r;
      e.layout = layout;
      e.job.compressor = "topk";
      e.job.theta_min = 10;
      e.job.theta_max = 1000;
      e.job.job_seed = 7;
      e.compression_backend = compression_backend;
      ASSIGN_OR_RETURN(std::unique_ptr<kernels::Compressor> compressor,
                       kernels::MakeCompressor("topk", {}));
      ASSIGN_OR_RETURN(std::unique_ptr<Executor> x,
                       Executor::Create(std::move(e), job->comms_.back().get(),
                                        std::move(compressor), &job->stats_));
      job->executors_.push_back(std::move(x));
    }
    return job;
  }

  Executor& executor(int node) { return *executors_[node]; }

  // One step of tensor "t" (grads[node] on each node) at θ with decision {step + 1, θ, θ_c} as
  // one group on every node; each node's result into results[node]. Returns the wall time of the
  // whole step (the slowest node) in ms.
  absl::StatusOr<double> Step(int64_t step, double theta, double theta_c,
                              const std::vector<std::vector<float>>& grads,
                              std::vector<daemon::TensorResult>* results) {
    const int nodes = static_cast<int>(executors_.size());
    std::vector<daemon::NodeTensor> tensors(nodes);
    std::vector<std::vector<daemon::internal::WorkItem>> items(nodes);
    daemon::internal::Group group;
    group.mode = daemon::internal::GroupMode::kSparseAllreduce;
    group.theta = theta;
    group.members = {0};
    for (int n = 0; n < nodes; ++n) {
      daemon::NodeTensor& t = tensors[n];
      t.spec.name = "t";
      t.spec.shape = {static_cast<int64_t>(grads[n].size())};
      t.spec.compress = true;
      t.spec.step = step;
      t.data.resize(grads[n].size() * sizeof(float));
      std::memcpy(t.data.data(), grads[n].data(), t.data.size());
      t.samples = 8;
      daemon::internal::WorkItem w;
      w.ready.spec = t.spec;
      w.ready.decision.epoch = step + 1;
      w.ready.decision.theta = theta;
      w.ready.decision.theta_candidate = theta_c;
      w.tensor = &t;
      items[n].push_back(std::move(w));
    }
    results->assign(nodes, {});
    std::vector<std::vector<daemon::TensorResult>> out(nodes, std::vector<daemon::TensorResult>(1));
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::future<absl::Status>> runs;
    for (int n = 0; n < nodes; ++n) {
      runs.push_back(std::async(std::launch::async, [this, n, &group, &items, &out] {
        return executors_[n]->Run(group, items[n], &out[n]);
      }));
    }
    absl::Status status;
    for (auto& r : runs) status.Update(r.get());
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    RETURN_IF_ERROR(status);
    for (int n = 0; n < nodes; ++n) {
      RETURN_IF_ERROR(out[n][0].status);
      (*results)[n] = std::move(out[n][0]);
    }
    return ms;
  }

 private:
  explicit Job(int nodes) : fabric_(nodes) {}

  transport::loopback::Fabric fabric_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;
  std::vector<std::unique_ptr<collectives::Communicator>> comms_;
  DiscardStats stats_;
  std::vector<std::unique_ptr<Executor>> executors_;  // last: joined first
};

absl::Status SameResults(const std::vector<daemon::TensorResult>& backend,
                         const std::vector<daemon::TensorResult>& compressor, Job& a, Job& b,
                         int64_t step) {
  for (size_t n = 0; n < backend.size(); ++n) {
    if (backend[n].data != compressor[n].data) {
      return absl::InternalError(absl::StrFormat(
          "step %d node %d: the backend path's result differs from the compressor path's", step,
          n));
    }
    if (a.executor(static_cast<int>(n)).Residual("t") !=
        b.executor(static_cast<int>(n)).Residual("t")) {
      return absl::InternalError(absl::StrFormat(
          "step %d node %d: the backend path's residual differs from the compressor path's", step,
          n));
    }
  }
  return absl::OkStatus();
}

absl::Status Run(int argc, char** argv) {
  std::vector<const char*> args(argv + 1, argv + argc);
  ASSIGN_OR_RETURN(Settings settings, Settings::Parse(kSettings, args, ProcessEnvironment()));
  if (settings.help_requested()) {
    std::printf("%s", Settings::Help(kSettings, "gravac-engine-step-bench").c_str());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const Options o, ReadOptions(settings));
  absl::PrintF(
      "# gravac-engine-step-bench: %d fp32 elements, %d nodes (threads, loopback), "
      "θ_min 10, θ_c %g, %d timed steps (+%d warm-up) per path and θ\n",
      o.n, o.nodes, o.theta_c, o.steps, o.warmup);
  std::printf("%8s %14s %17s %18s\n", "theta", "backend_ms", "compressor_ms", "backend/compressor");
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> grads(o.nodes, std::vector<float>(o.n));
  int64_t step = 0;
  for (const double theta : o.thetas) {
    ASSIGN_OR_RETURN(std::unique_ptr<Job> backend, Job::Make(o.nodes, true));
    ASSIGN_OR_RETURN(std::unique_ptr<Job> compressor, Job::Make(o.nodes, false));
    std::vector<double> backend_ms, compressor_ms;
    for (int s = 0; s < o.warmup + o.steps; ++s, ++step) {
      for (auto& g : grads) {
        for (float& x : g) x = normal(rng);
      }
      std::vector<daemon::TensorResult> rb, rc;
      double tb = 0, tc = 0;
      if (s % 2 == 0) {
        ASSIGN_OR_RETURN(tb, backend->Step(step, theta, o.theta_c, grads, &rb));
        ASSIGN_OR_RETURN(tc, compressor->Step(step, theta, o.theta_c, grads, &rc));
      } else {
        ASSIGN_OR_RETURN(tc, compressor->Step(step, theta, o.theta_c, grads, &rc));
        ASSIGN_OR_RETURN(tb, backend->Step(step, theta, o.theta_c, grads, &rb));
      }
      RETURN_IF_ERROR(SameResults(rb, rc, *backend, *compressor, step));
      if (s < o.warmup) continue;
      backend_ms.push_back(tb);
      compressor_ms.push_back(tc);
    }
    const double b = Median(backend_ms), c = Median(compressor_ms);
    std::printf("%8g %14.3f %17.3f %18.3f\n", theta, b, c, b / c);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace gravac::bench

int main(int argc, char** argv) {
  absl::Status status = gravac::bench::Run(argc, argv);
  if (!status.ok()) {
    std::fprintf(stderr, "gravac-engine-step-bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
