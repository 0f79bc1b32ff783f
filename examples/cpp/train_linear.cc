// gravac-example-train: data-parallel training of a small MLP through the gravac C API only.
//
// Every rank generates its own shard of a learnable synthetic task from a seed (inputs x ~ N(0, 1),
// label = argmax of a hidden random linear "teacher" T·x), trains a 2-layer MLP (ReLU hidden
// layer, softmax output) with minibatch SGD, and averages its gradients with
// gravac_allreduce_async(compress = 1): the daemons compress them with the GraVAC policy's θ and
// error feedback. Rank 0 prints, every --print_every steps, the loss, the accuracy, and the θ,
// collective and decision epoch the step was sent with (and a line whenever the decision in
// force changes); at the end a summary. The program exits
// non-zero when the replicas' weights differ at the end (checked with an allgather of a weight
// checksum) or when the held-out loss did not fall.
//
//   gravacrun -np 4 --nodes 2 -- build/examples/cpp/gravac-example-train --steps 300
//
// Plain C++ on purpose: it uses nothing of gravac but <gravac/gravac.h>, so it can be copied as
// the template of a framework integration. Single-threaded; every gravac call that blocks
// (gravac_wait, gravac_barrier) is bounded by the daemon's error reporting.
#include <gravac/gravac.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

struct Flags {
  int64_t steps = 300;
  int64_t batch = 32;  // per rank
  int64_t input = 256;
  int64_t hidden = 1024;
  int64_t classes = 10;
  double lr = 0.1;
  uint64_t seed = 1;
  int64_t print_every = 20;
  int64_t eval_samples = 2048;  // held-out set, split across ranks
  bool compress = true;
};

void Usage(const char* program) {
  std::printf(
      "usage: %s [--steps N] [--batch N] [--input N] [--hidden N] [--classes N] [--lr X]\n"
      "          [--seed N] [--print_every N] [--eval_samples N] [--dense]\n"
      "Trains a 2-layer MLP on a synthetic teacher task with gradients averaged by gravac.\n"
      "--batch is per rank; --dense sends uncompressed gradients (compress = 0).\n",
      program);
}

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      Usage(argv[0]);
      std::exit(0);
    }
    if (arg == "--dense") {
      flags->compress = false;
      continue;
    }
    std::string value;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "flag %s needs a value\n", arg.c_str());
      return false;
    }
    char* end = nullptr;
    if (arg == "--lr") {
      flags->lr = std::strtod(value.c_str(), &end);
    } else {
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (arg == "--steps")
        flags->steps = v;
      else if (arg == "--batch")
        flags->batch = v;
      else if (arg == "--input")
        flags->input = v;
      else if (arg == "--hidden")
        flags->hidden = v;
      else if (arg == "--classes")
        flags->classes = v;
      else if (arg == "--seed")
        flags->seed = static_cast<uint64_t>(v);
      else if (arg == "--print_every")
        flags->print_every = v;
      else if (arg == "--eval_samples")
        flags->eval_samples = v;
      else {
        std::fprintf(stderr, "unknown flag %s\n", arg.c_str());
        return false;
      }
    }
    if (end == nullptr || *end != '\0' || value.empty()) {
      std::fprintf(stderr, "flag %s: bad value '%s'\n", arg.c_str(), value.c_str());
      return false;
    }
  }
  if (flags->steps < 1 || flags->batch < 1 || flags->input < 1 || flags->hidden < 1 ||
      flags->classes < 2 || flags->print_every < 1 || flags->eval_samples < 0 || !(flags->lr > 0)) {
    std::fprintf(stderr, "flags out of range (see --help)\n");
    return false;
  }
  return true;
}

// Deterministic random numbers that do not depend on the C++ library: splitmix64 + Box-Muller.
uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
double Uniform(uint64_t* state) {  // (0, 1]
  return (static_cast<double>(SplitMix64(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}
float Normal(uint64_t* state) {
  double u1 = Uniform(state), u2 = Uniform(state);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// The synthetic task: sample i has x = Normal(seed, i) and label argmax(T x).
class Task {
 public:
  Task(const Flags& f) : f_(f), teacher_(f.classes * f.input) {
    uint64_t s = f.seed * 1000003u + 17;
    for (float& t : teacher_) t = Normal(&s);
  }
  // Fills x (input floats) and returns the label of sample `index`.
  int Sample(uint64_t index, float* x) const {
    uint64_t s = (f_.seed << 40) ^ (index * 0x2545F4914F6CDD1Dull);
    for (int64_t j = 0; j < f_.input; ++j) x[j] = Normal(&s);
    int best = 0;
    double best_v = -1e300;
    for (int64_t c = 0; c < f_.classes; ++c) {
      double v = 0;
      for (int64_t j = 0; j < f_.input; ++j) v += teacher_[c * f_.input + j] * x[j];
      if (v > best_v) best_v = v, best = static_cast<int>(c);
    }
    return best;
  }

 private:
  Flags f_;
  std::vector<float> teacher_;
};

// The model's parameters; gradients use the same layout.
struct Params {
  std::vector<float> w1, b1, w2, b2;  // w1: hidden x input, w2: classes x hidden
  explicit Params(const Flags& f)
      : w1(f.hidden * f.input), b1(f.hidden), w2(f.classes * f.hidden), b2(f.classes) {}
  std::vector<float>* tensor(int i) { return i == 0 ? &w1 : i == 1 ? &b1 : i == 2 ? &w2 : &b2; }
};
constexpr int kTensors = 4;
constexpr const char* kNames[kTensors] = {"layer1.weight", "layer1.bias", "layer2.weight",
                                          "layer2.bias"};

struct BatchResult {
  double loss_sum = 0;
  int64_t correct = 0;
};

// Forward (and, when grad != nullptr, backward into grad, averaged over the batch).
BatchResult Run(const Flags& f, const Params& p, const std::vector<float>& xs,
                const std::vector<int>& labels, Params* grad) {
  int64_t n = static_cast<int64_t>(labels.size());
  std::vector<float> h(f.hidden), logits(f.classes), dlog(f.classes), dh(f.hidden);
  if (grad != nullptr) {
    for (int i = 0; i < kTensors; ++i)
      std::fill(grad->tensor(i)->begin(), grad->tensor(i)->end(), 0);
  }
  BatchResult r;
  for (int64_t s = 0; s < n; ++s) {
    const float* x = &xs[s * f.input];
    for (int64_t u = 0; u < f.hidden; ++u) {
      const float* w = &p.w1[u * f.input];
      float a = p.b1[u];
      for (int64_t j = 0; j < f.input; ++j) a += w[j] * x[j];
      h[u] = a > 0 ? a : 0;
    }
    float mx = -1e30f;
    for (int64_t c = 0; c < f.classes; ++c) {
      const float* w = &p.w2[c * f.hidden];
      float a = p.b2[c];
      for (int64_t u = 0; u < f.hidden; ++u) a += w[u] * h[u];
      logits[c] = a;
      mx = std::max(mx, a);
    }
    double z = 0;
    for (int64_t c = 0; c < f.classes; ++c) z += std::exp(static_cast<double>(logits[c] - mx));
    int label = labels[s];
    r.loss_sum += -(logits[label] - mx - std::log(z));
    int64_t arg = std::max_element(logits.begin(), logits.end()) - logits.begin();
    r.correct += (arg == label);
    if (grad == nullptr) continue;
    float inv_n = 1.0f / static_cast<float>(n);
    for (int64_t c = 0; c < f.classes; ++c) {
      dlog[c] = (static_cast<float>(std::exp(logits[c] - mx) / z) - (c == label)) * inv_n;
    }
    std::fill(dh.begin(), dh.end(), 0.0f);
    for (int64_t c = 0; c < f.classes; ++c) {
      float* gw = &grad->w2[c * f.hidden];
      const float* w = &p.w2[c * f.hidden];
      for (int64_t u = 0; u < f.hidden; ++u) {
        gw[u] += dlog[c] * h[u];
        dh[u] += dlog[c] * w[u];
      }
      grad->b2[c] += dlog[c];
    }
    for (int64_t u = 0; u < f.hidden; ++u) {
      if (h[u] <= 0) continue;
      float* gw = &grad->w1[u * f.input];
      for (int64_t j = 0; j < f.input; ++j) gw[j] += dh[u] * x[j];
      grad->b1[u] += dh[u];
    }
  }
  return r;
}

// Every gravac failure ends the program with the library's message (the daemon names the rank,
// tensor and field).
void Check(gravac_status s, const gravac_context* ctx, const char* what) {
  if (s == GRAVAC_OK) return;
  std::fprintf(stderr, "gravac-example-train: %s failed: %s: %s\n", what, gravac_status_string(s),
               ctx != nullptr ? gravac_last_error(ctx) : "");
  std::exit(1);
}
void WaitOrDie(gravac_request* req, const char* what) {
  gravac_status s = gravac_wait(req);
  if (s != GRAVAC_OK) {
    std::fprintf(stderr, "gravac-example-train: %s failed: %s: %s\n", what, gravac_status_string(s),
                 gravac_request_error(req));
    std::exit(1);
  }
}

// Allreduce (SUM, dense) of a few doubles: the metrics every rank contributes.
void SumDoubles(gravac_context* ctx, const char* name, std::vector<double>* v) {
  int64_t shape[1] = {static_cast<int64_t>(v->size())};
  gravac_request* req = nullptr;
  Check(gravac_allreduce_async(ctx, name, v->data(), v->data(), shape, 1, GRAVAC_FLOAT64,
                               GRAVAC_SUM, nullptr, &req),
        ctx, name);
  WaitOrDie(req, name);
  gravac_request_free(req);
}

void MakeBatch(const Task& task, const Flags& f, uint64_t first, int64_t count,
               std::vector<float>* xs, std::vector<int>* labels) {
  xs->resize(count * f.input);
  labels->resize(count);
  for (int64_t s = 0; s < count; ++s) (*labels)[s] = task.Sample(first + s, &(*xs)[s * f.input]);
}

// Loss and accuracy on the held-out set (samples numbered from 2^62), split across ranks.
std::pair<double, double> Evaluate(gravac_context* ctx, const Task& task, const Flags& f,
                                   const Params& p, const char* name) {
  int rank = gravac_rank(ctx), size = gravac_size(ctx);
  int64_t per = (f.eval_samples + size - 1) / size;
  int64_t first = std::min<int64_t>(f.eval_samples, per * rank);
  int64_t count = std::min<int64_t>(f.eval_samples, first + per) - first;
  std::vector<float> xs;
  std::vector<int> labels;
  MakeBatch(task, f, (uint64_t{1} << 62) + first, count, &xs, &labels);
  BatchResult r = Run(f, p, xs, labels, nullptr);
  std::vector<double> m = {r.loss_sum, static_cast<double>(r.correct), static_cast<double>(count)};
  SumDoubles(ctx, name, &m);
  return {m[0] / std::max(1.0, m[2]), m[1] / std::max(1.0, m[2])};
}

// Data-plane bytes one node sends for a tensor of n fp32 elements among `nodes` nodes, by the
// formulas of GRAVAC.md ("Conventions"): sparse allgather (p-1)·k·8, dense ring 2(p-1)/p·n·4.
double SentBytes(int64_t n, int nodes, double theta, bool sparse) {
  if (nodes < 2) return 0;
  if (sparse) {
    double k = std::max<double>(1.0, std::floor(static_cast<double>(n) / theta));
    return (nodes - 1) * k * 8.0;
  }
  return 2.0 * (nodes - 1) / nodes * static_cast<double>(n) * 4.0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) return 2;
  gravac_context* ctx = nullptr;
  Check(gravac_init(&ctx), nullptr, "gravac_init");
  const int rank = gravac_rank(ctx), size = gravac_size(ctx);
  const int local_size = std::max(1, gravac_local_size(ctx));
  const int nodes = std::max(1, size / local_size);  // gravacrun places ranks evenly, node-major
  const bool lead = rank == 0;

  Task task(f);
  Params params(f), grad(f);
  // Rank 0 initialises (He-style scaling) and broadcasts, so every replica starts equal.
  if (lead) {
    uint64_t s = f.seed * 7919u + 3;
    float s1 = std::sqrt(2.0f / static_cast<float>(f.input));
    float s2 = std::sqrt(1.0f / static_cast<float>(f.hidden));
    for (float& w : params.w1) w = s1 * Normal(&s);
    for (float& w : params.w2) w = s2 * Normal(&s);
  }
  for (int i = 0; i < kTensors; ++i) {
    std::vector<float>* t = params.tensor(i);
    int64_t shape[1] = {static_cast<int64_t>(t->size())};
    std::string name = std::string("init.") + kNames[i];
    gravac_request* req = nullptr;
    Check(gravac_broadcast_async(ctx, name.c_str(), t->data(), shape, 1, GRAVAC_FLOAT32, 0, &req),
          ctx, "broadcast");
    WaitOrDie(req, "broadcast");
    gravac_request_free(req);
  }
  auto [loss0, acc0] = Evaluate(ctx, task, f, params, "eval.initial");
  if (lead) {
    int64_t bytes = 0;
    for (int i = 0; i < kTensors; ++i) bytes += params.tensor(i)->size() * sizeof(float);
    std::printf(
        "gravac-example-train: %d ranks on %d nodes, MLP %lld-%lld-%lld (%.2f MB of "
        "gradients), batch %lld per rank, lr %g, %s\n",
        size, nodes, (long long)f.input, (long long)f.hidden, (long long)f.classes, bytes / 1e6,
        (long long)f.batch, f.lr, f.compress ? "GraVAC-compressed allreduce" : "dense allreduce");
    std::printf("initial held-out loss %.4f accuracy %.3f\n", loss0, acc0);
    std::fflush(stdout);
  }

  std::map<double, int64_t> steps_per_theta;
  std::map<std::string, int64_t> steps_per_collective;
  double sent_bytes = 0, dense_bytes = 0, step_seconds = 0;
  double window_loss = 0, window_correct = 0, window_count = 0;
  int64_t last_epoch = -1;
  double last_theta = 0;
  std::vector<float> xs;
  std::vector<int> labels;
  gravac_request* reqs[kTensors] = {};
  for (int64_t step = 0; step < f.steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    uint64_t first = static_cast<uint64_t>((step * size + rank) * f.batch);
    MakeBatch(task, f, first, f.batch, &xs, &labels);
    BatchResult r = Run(f, params, xs, labels, &grad);
    window_loss += r.loss_sum;
    window_correct += r.correct;
    window_count += f.batch;
    gravac_tensor_options opts = {};
    opts.step = step;
    opts.samples = f.batch;
    opts.compress = f.compress ? 1 : 0;
    for (int i = 0; i < kTensors; ++i) {
      std::vector<float>* g = grad.tensor(i);
      int64_t shape[1] = {static_cast<int64_t>(g->size())};
      Check(gravac_allreduce_async(ctx, kNames[i], g->data(), g->data(), shape, 1, GRAVAC_FLOAT32,
                                   GRAVAC_AVERAGE, &opts, &reqs[i]),
            ctx, "allreduce");
    }
    gravac_result_info info{};
    for (int i = kTensors - 1; i >= 0; --i) {  // wait on all; report layer1.weight's info
      WaitOrDie(reqs[i], kNames[i]);
      gravac_result_info ti{};
      Check(gravac_result_info_get(reqs[i], &ti), ctx, "gravac_result_info_get");
      bool sparse = std::strstr(ti.collective, "sparse") != nullptr;
      int64_t n = static_cast<int64_t>(grad.tensor(i)->size());
      sent_bytes += SentBytes(n, nodes, ti.theta, sparse);
      dense_bytes += SentBytes(n, nodes, 1.0, false);
      if (i == 0) info = ti;
      gravac_request_free(reqs[i]);
      reqs[i] = nullptr;
    }
    for (int i = 0; i < kTensors; ++i) {
      std::vector<float>* w = params.tensor(i);
      const std::vector<float>* g = grad.tensor(i);
      float lr = static_cast<float>(f.lr);
      for (size_t j = 0; j < w->size(); ++j) (*w)[j] -= lr * (*g)[j];
    }
    step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (lead && (step == 0 || info.decision_epoch != last_epoch || info.theta != last_theta)) {
      std::printf("step %5lld  decision epoch %lld in force: theta %g, %s\n", (long long)(step + 1),
                  (long long)info.decision_epoch, info.theta, info.collective);
      last_epoch = info.decision_epoch;
      last_theta = info.theta;
    }
    steps_per_theta[info.theta] += 1;
    steps_per_collective[info.collective] += 1;
    if ((step + 1) % f.print_every == 0 || step + 1 == f.steps) {
      std::vector<double> m = {window_loss, window_correct, window_count};
      SumDoubles(ctx, "train.metrics", &m);
      if (lead) {
        std::printf(
            "step %5lld  loss %.4f  accuracy %.3f  theta %8.1f  collective %-16s  "
            "epoch %lld\n",
            (long long)(step + 1), m[0] / m[2], m[1] / m[2], info.theta, info.collective,
            (long long)info.decision_epoch);
        std::fflush(stdout);
      }
      window_loss = window_correct = window_count = 0;
    }
  }

  auto [loss1, acc1] = Evaluate(ctx, task, f, params, "eval.final");
  // Replicas must hold bit-identical weights: allgather one checksum per rank and compare.
  double checksum = 0;
  for (int i = 0; i < kTensors; ++i) {
    const std::vector<float>* w = params.tensor(i);
    for (size_t j = 0; j < w->size(); ++j) checksum += (*w)[j] * (1.0 + (j % 7));
  }
  int64_t one[1] = {1};
  gravac_request* req = nullptr;
  Check(gravac_allgather_async(ctx, "checksum", &checksum, one, 1, GRAVAC_FLOAT64, &req), ctx,
        "allgather");
  WaitOrDie(req, "checksum allgather");
  std::vector<double> all(size);
  int64_t total = 0;
  Check(gravac_allgather_result(req, &total, all.data(), all.size() * sizeof(double)), ctx,
        "gravac_allgather_result");
  gravac_request_free(req);
  int diverged = -1;
  for (int r = 0; r < size && total == size; ++r) {
    if (all[r] != all[0]) diverged = r;
  }
  if (total != size) diverged = 0;

  int rc = 0;
  if (lead) {
    std::printf(
        "summary: %lld steps, held-out loss %.4f -> %.4f, accuracy %.3f -> %.3f, "
        "mean step time %.2f ms\n",
        (long long)f.steps, loss0, loss1, acc0, acc1, 1e3 * step_seconds / f.steps);
    std::printf("summary: theta used (steps):");
    for (const auto& [theta, n] : steps_per_theta) std::printf(" %g (%lld)", theta, (long long)n);
    std::printf("\nsummary: collectives (steps):");
    for (const auto& [c, n] : steps_per_collective)
      std::printf(" %s (%lld)", c.c_str(), (long long)n);
    std::printf(
        "\nsummary: estimated inter-node gradient bytes per node %.1f MB vs %.1f MB dense "
        "(%.1fx less)\n",
        sent_bytes / 1e6, dense_bytes / 1e6, sent_bytes > 0 ? dense_bytes / sent_bytes : 1.0);
  }
  if (diverged >= 0) {
    std::fprintf(stderr,
                 "gravac-example-train: rank %d: replicas diverged: rank %d's weight "
                 "checksum %.17g differs from rank 0's %.17g\n",
                 rank, diverged, diverged < static_cast<int>(all.size()) ? all[diverged] : 0.0,
                 all.empty() ? 0.0 : all[0]);
    rc = 1;
  } else if (lead) {
    std::printf("summary: replicas identical (weight checksum %.17g on all %d ranks)\n", all[0],
                size);
  }
  if (!(loss1 < loss0)) {
    if (lead) std::fprintf(stderr, "gravac-example-train: held-out loss did not fall\n");
    rc = 1;
  }
  std::fflush(stdout);
  Check(gravac_shutdown(ctx), nullptr, "gravac_shutdown");
  return rc;
}
