// gravac-integration-worker: the worker program of the multi-process integration tests
// (tests/integration/run_job.py starts it under gravacrun, one process per rank). It talks to its
// daemon only through the C API and writes one line per event to <--log_dir>/rank<R>.log (and
// stdout); the driver reads every rank's log and asserts. Modes:
//
//   decisions  (invariant 1) every step allreduces two compressible tensors and logs the θ,
//              collective and decision epoch of each (the driver checks all ranks agree).
//   feedback   (invariant 2) gradients are exact small multiples of 1/64 derived from (rank, step,
//              tensor, index), so every worker can recompute every node's error-feedback
//              bookkeeping: node sum + residual, top-k at the reported θ, residual update. Each
//              compressed result is compared with that prediction, and a compress = 0 tensor
//              with the exact sum.
//   mismatch   (invariant 3a) --bad_ranks post "mm.tensor" with another --case (shape, dtype or
//              op); every rank logs the status, message and time of its error.
//   kill       (invariant 3b) --bad_ranks SIGKILL themselves after posting the first of two
//              tensors of step --at_step; the others log the error they get and its delay. (A
//              bad rank runs as a forked child: its parent, the process gravacrun started, exits
//              with 128 + 9 only --linger_s later, so gravacrun's teardown does not cut the
//              survivors' reports short.)
//   stall      (invariant 3c) --bad_ranks post step --at_step's tensor --delay_s late; every rank
//              logs its (successful) result; the driver looks for the daemons' stall warning.
//
// Single-threaded; every wait is bounded by the daemon (and the driver's timeout).
#include <gravac/gravac.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/absl_compat.h"
#include "core/settings.h"
#include "core/status.h"
#include "kernels/compressor.h"
#include "kernels/cpu/scatter_add.h"

namespace gravac::integration {
namespace {

constexpr SettingSpec kSettings[] = {
    {"mode", "", "decisions", "decisions | feedback | mismatch | kill | stall"},
    {"steps", "", "20", "training steps", SettingType::kInt},
    {"elements", "", "100000", "elements of the large tensor", SettingType::kInt},
    {"step_ms", "", "0", "sleep per step (lets decisions arrive mid-run)", SettingType::kInt},
    {"log_dir", "", ".", "where rank<R>.log is written"},
    {"bad_ranks", "", "", "comma-separated ranks that misbehave (mismatch, kill, stall)"},
    {"case", "", "shape", "mismatch: shape | dtype | op"},
    {"at_step", "", "2", "kill/stall/mismatch: the step that misbehaves", SettingType::kInt},
    {"delay_s", "", "3", "stall: how late the bad ranks post", SettingType::kDouble},
    {"seed", "", "7", "gradient seed", SettingType::kInt},
    {"nonzero", "", "1", "decisions: share of gradient elements that are not zero (a sparser "
     "gradient compresses further, so the policy picks larger theta)", SettingType::kDouble},
    {"linger_s", "", "5", "kill: how long the dead rank's parent waits before exiting",
     SettingType::kDouble},
};

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Gradient element i of `tensor` on `rank` at `step`: an integer in [-512, 512] over 64, so sums,
// residuals and the power-of-two average are exact in fp32 and the prediction has no rounding.
float Grad(uint64_t seed, int rank, int64_t step, int tensor, int64_t i) {
  uint64_t h = Mix(seed ^ Mix(rank * 1000003ull ^ Mix(step * 7919ull ^ Mix(tensor * 31ull + i))));
  return static_cast<float>(static_cast<int64_t>(h % 1025) - 512) / 64.0f;
}

class Worker {
 public:
  Worker(gravac_context* ctx, const Settings& s, std::FILE* log) : ctx_(ctx), s_(s), log_(log) {
    rank_ = gravac_rank(ctx);
    size_ = gravac_size(ctx);
    local_size_ = gravac_local_size(ctx);
  }
  absl::Status Run();

 private:
  struct Posted {
    gravac_request* req = nullptr;
    std::vector<float> out;
  };
  void Log(const std::string& line) {
    std::string full = absl::StrFormat("rank=%d %s\n", rank_, line);
    std::fputs(full.c_str(), log_);
    std::fflush(log_);
    fsync(fileno(log_));
    std::fputs(full.c_str(), stdout);
    std::fflush(stdout);
  }
  bool Bad() const;
  absl::StatusOr<Posted> Post(const std::string& name, std::vector<float> in, gravac_op op,
                              int64_t step, bool compress);
  // Waits; on failure logs the error with the time since `posted` and returns it.
  absl::StatusOr<gravac_result_info> Wait(Posted& p, const std::string& name, int64_t step,
                                          std::chrono::steady_clock::time_point posted);
  std::vector<float> Gradient(int rank, int64_t step, int tensor, int64_t n) const;

  absl::Status Decisions();
  absl::Status Feedback();
  absl::Status Mismatch();
  absl::Status KillOrStall(bool kill);

  gravac_context* ctx_;
  const Settings& s_;
  std::FILE* log_;
  int rank_ = 0, size_ = 0, local_size_ = 1;
};

bool Worker::Bad() const {
  std::string list = s_.GetString("bad_ranks").value_or("");
  for (absl::string_view r : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int v = -1;
    if (absl::SimpleAtoi(r, &v) && v == rank_) return true;
  }
  return false;
}

std::vector<float> Worker::Gradient(int rank, int64_t step, int tensor, int64_t n) const {
  uint64_t seed = static_cast<uint64_t>(s_.GetInt("seed").value_or(7));
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = Grad(seed, rank, step, tensor, i);
  return g;
}

absl::StatusOr<Worker::Posted> Worker::Post(const std::string& name, std::vector<float> in,
                                            gravac_op op, int64_t step, bool compress) {
  Posted p;
  p.out.resize(in.size());
  int64_t shape[1] = {static_cast<int64_t>(in.size())};
  gravac_tensor_options opts{step, 32, compress ? 1 : 0};
  gravac_status st = gravac_allreduce_async(ctx_, name.c_str(), in.data(), p.out.data(), shape, 1,
                                            GRAVAC_FLOAT32, op, &opts, &p.req);
  if (st != GRAVAC_OK) {
    return absl::InternalError(absl::StrFormat("rank %d: posting tensor '%s' failed: %s: %s", rank_,
                                               name, gravac_status_string(st),
                                               gravac_last_error(ctx_)));
  }
  return p;
}

absl::StatusOr<gravac_result_info> Worker::Wait(Posted& p, const std::string& name, int64_t step,
                                                std::chrono::steady_clock::time_point posted) {
  gravac_status st = gravac_wait(p.req);
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - posted).count();
  gravac_result_info info{};
  if (st == GRAVAC_OK) st = gravac_result_info_get(p.req, &info);
  std::string error = st == GRAVAC_OK ? "" : gravac_request_error(p.req);
  gravac_request_free(p.req);
  p.req = nullptr;
  if (st != GRAVAC_OK) {
    std::replace(error.begin(), error.end(), '\n', ' ');
    Log(absl::StrFormat("event=error step=%d tensor=%s status=%s elapsed=%.3f error=%s", step, name,
                        gravac_status_string(st), elapsed, error));
    return absl::UnavailableError(absl::StrFormat("rank %d: tensor '%s' step %d: %s: %s", rank_,
                                                  name, step, gravac_status_string(st), error));
  }
  return info;
}

absl::Status Worker::Decisions() {
  const int64_t steps = *s_.GetInt("steps"), n = *s_.GetInt("elements");
  const char* names[2] = {"dec.large", "dec.small"};
  const int64_t sizes[2] = {n, 4096};
  for (int64_t step = 0; step < steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    Posted p[2];
    for (int t = 0; t < 2; ++t) {
      std::vector<float> g = Gradient(rank_, step, t, sizes[t]);
      const double nonzero = *s_.GetDouble("nonzero");
      for (int64_t i = 0; nonzero < 1 && i < sizes[t]; ++i) {  // the same elements on every rank
        if (static_cast<double>(Mix(i * 131ull + t) % 1000000) >= nonzero * 1e6) g[i] = 0;
      }
      ASSIGN_OR_RETURN(p[t], Post(names[t], std::move(g), GRAVAC_AVERAGE, step, true));
    }
    for (int t = 0; t < 2; ++t) {
      ASSIGN_OR_RETURN(gravac_result_info info, Wait(p[t], names[t], step, t0));
      // digest: FNV-1a of the result's bytes, so a driver can check every replica got the same.
      uint64_t digest = 0xcbf29ce484222325ull;
      const auto* bytes = reinterpret_cast<const unsigned char*>(p[t].out.data());
      for (size_t i = 0; i < p[t].out.size() * sizeof(float); ++i) {
        digest = (digest ^ bytes[i]) * 0x100000001b3ull;
      }
      Log(absl::StrFormat(
          "event=result step=%d tensor=%s theta=%.6g collective=%s epoch=%d digest=%016x", step,
          names[t], info.theta, info.collective, info.decision_epoch, digest));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(*s_.GetInt("step_ms")));
  }
  return absl::OkStatus();
}

absl::Status Worker::Feedback() {
  const int64_t steps = *s_.GetInt("steps"), n = *s_.GetInt("elements");
  if (local_size_ < 1 || size_ % local_size_ != 0) {
    return absl::InvalidArgumentError("feedback mode needs the same local size on every node");
  }
  const int nodes = size_ / local_size_;
  const char* names[3] = {"ef.large", "ef.small", "exact.dense"};
  const int64_t sizes[3] = {n, 1000, 5000};
  ASSIGN_OR_RETURN(std::unique_ptr<kernels::Compressor> topk,
                   kernels::MakeCompressor("topk", kernels::CompressorOptions{}));
  // residual[t][node]: what each node's error feedback holds for compressed tensor t.
  std::vector<std::vector<std::vector<float>>> residual(2);
  for (int t = 0; t < 2; ++t) {
    residual[t].assign(nodes, std::vector<float>(sizes[t], 0.0f));
  }
  for (int64_t step = 0; step < steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    Posted p[3];
    for (int t = 0; t < 3; ++t) {
      ASSIGN_OR_RETURN(p[t], Post(names[t], Gradient(rank_, step, t, sizes[t]),
                                  t < 2 ? GRAVAC_AVERAGE : GRAVAC_SUM, step, t < 2));
    }
    for (int t = 0; t < 3; ++t) {
      ASSIGN_OR_RETURN(gravac_result_info info, Wait(p[t], names[t], step, t0));
      std::vector<float> predicted(sizes[t], 0.0f);
      const bool sparse = std::string(info.collective) == "sparse_allgather";
      for (int node = 0; node < nodes; ++node) {
        std::vector<float> pn(sizes[t], 0.0f);  // node sum (+ residual)
        for (int r = node * local_size_; r < (node + 1) * local_size_; ++r) {
          std::vector<float> g = Gradient(r, step, t, sizes[t]);
          for (int64_t i = 0; i < sizes[t]; ++i) pn[i] += g[i];
        }
        if (t == 2) {
          for (int64_t i = 0; i < sizes[t]; ++i) predicted[i] += pn[i];
          continue;
        }
        std::vector<float>& e = residual[t][node];
        for (int64_t i = 0; i < sizes[t]; ++i) pn[i] += e[i];
        if (sparse) {
          kernels::Compressed m;
          kernels::CompressContext cctx{names[t], step, 0};
          RETURN_IF_ERROR(topk->Compress(pn, info.theta, cctx, &m));
          e = pn;
          for (int64_t j = 0; j < m.count(); ++j) e[m.indices[j]] -= m.values[j];
          RETURN_IF_ERROR(kernels::cpu::DecompressAdd(m, 1.0f, absl::MakeSpan(predicted)));
        } else {  // a dense step sends p and clears the residual
          for (int64_t i = 0; i < sizes[t]; ++i) predicted[i] += pn[i];
          std::fill(e.begin(), e.end(), 0.0f);
        }
      }
      if (t < 2) {
        for (float& v : predicted) v /= static_cast<float>(size_);
      }
      double max_err = 0;
      int64_t bad = 0, first_bad = -1;
      for (int64_t i = 0; i < sizes[t]; ++i) {
        double err = std::fabs(static_cast<double>(p[t].out[i]) - predicted[i]);
        double tol = t == 2 ? 0.0 : 1e-5 * (1.0 + std::fabs(predicted[i]));
        max_err = std::max(max_err, err);
        if (err > tol) {
          if (first_bad < 0) first_bad = i;
          ++bad;
        }
      }
      Log(absl::StrFormat(
          "event=check step=%d tensor=%s theta=%.6g collective=%s epoch=%d max_err=%.3g "
          "mismatches=%d first_mismatch=%d got=%.9g predicted=%.9g",
          step, names[t], info.theta, info.collective, info.decision_epoch, max_err, bad, first_bad,
          first_bad >= 0 ? p[t].out[first_bad] : 0.0f,
          first_bad >= 0 ? predicted[first_bad] : 0.0f));
    }
  }
  return absl::OkStatus();
}

absl::Status Worker::Mismatch() {
  const int64_t n = *s_.GetInt("elements");
  const std::string which = *s_.GetString("case");
  auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(Posted warm,
                   Post("mm.warmup", Gradient(rank_, 0, 0, 1000), GRAVAC_SUM, 0, false));
  RETURN_IF_ERROR(Wait(warm, "mm.warmup", 0, t0).status());
  const bool bad = Bad();
  std::vector<float> in = Gradient(rank_, 1, 0, bad && which == "shape" ? n + 1 : n);
  std::vector<float> out(in.size());
  int64_t shape[1] = {static_cast<int64_t>(in.size())};
  gravac_dtype dtype = bad && which == "dtype" ? GRAVAC_INT32 : GRAVAC_FLOAT32;
  gravac_op op = bad && which == "op" ? GRAVAC_SUM : GRAVAC_AVERAGE;
  gravac_tensor_options opts{1, 32, 0};
  Posted p;
  t0 = std::chrono::steady_clock::now();
  gravac_status st = gravac_allreduce_async(ctx_, "mm.tensor", in.data(), out.data(), shape, 1,
                                            dtype, op, &opts, &p.req);
  if (st != GRAVAC_OK) {
    Log(absl::StrFormat("event=error step=1 tensor=mm.tensor status=%s elapsed=0 error=%s",
                        gravac_status_string(st), gravac_last_error(ctx_)));
    return absl::OkStatus();
  }
  absl::StatusOr<gravac_result_info> r = Wait(p, "mm.tensor", 1, t0);
  if (r.ok()) Log("event=result step=1 tensor=mm.tensor status=GRAVAC_OK");
  return absl::OkStatus();  // the driver judges the logged outcome
}

absl::Status Worker::KillOrStall(bool kill) {
  const int64_t steps = *s_.GetInt("steps"), n = *s_.GetInt("elements");
  const int64_t at = *s_.GetInt("at_step");
  const char* names[2] = {"ks.large", "ks.small"};
  const int64_t sizes[2] = {n, 1000};
  for (int64_t step = 0; step < steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    Posted p[2];
    for (int t = 0; t < 2; ++t) {
      if (step == at && Bad() && !kill && t == 0) {
        Log(absl::StrFormat("event=delay step=%d seconds=%.3f", step, *s_.GetDouble("delay_s")));
        std::this_thread::sleep_for(std::chrono::duration<double>(*s_.GetDouble("delay_s")));
      }
      ASSIGN_OR_RETURN(
          p[t], Post(names[t], Gradient(rank_, step, t, sizes[t]), GRAVAC_AVERAGE, step, true));
      if (step == at && Bad() && kill && t == 0) {
        Log(absl::StrFormat("event=kill step=%d pid=%d", step, getpid()));
        ::kill(getpid(), SIGKILL);
      }
    }
    for (int t = 0; t < 2; ++t) {
      absl::StatusOr<gravac_result_info> info = Wait(p[t], names[t], step, t0);
      if (!info.ok()) {
        for (int u = t + 1; u < 2; ++u) gravac_request_free(p[u].req);
        return kill ? absl::OkStatus() : info.status();  // the error is logged; the driver judges
      }
      Log(absl::StrFormat(
          "event=result step=%d tensor=%s theta=%.6g collective=%s epoch=%d "
          "elapsed=%.3f",
          step, names[t], info->theta, info->collective, info->decision_epoch,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
    }
  }
  return absl::OkStatus();
}

absl::Status Worker::Run() {
  const std::string mode = *s_.GetString("mode");
  Log(absl::StrFormat("event=start mode=%s size=%d local_size=%d pid=%d", mode, size_, local_size_,
                      getpid()));
  absl::Status st;
  if (mode == "decisions")
    st = Decisions();
  else if (mode == "feedback")
    st = Feedback();
  else if (mode == "mismatch")
    st = Mismatch();
  else if (mode == "kill")
    st = KillOrStall(true);
  else if (mode == "stall")
    st = KillOrStall(false);
  else
    st = absl::InvalidArgumentError(StrCat("unknown --mode ", mode));
  Log(absl::StrFormat("event=end status=%s", st.ok() ? "OK" : std::string(st.message())));
  return st;
}

}  // namespace
}  // namespace gravac::integration

int main(int argc, char** argv) {
  using gravac::Settings;
  absl::StatusOr<Settings> s = Settings::Parse(gravac::integration::kSettings,
                                               absl::Span<const char* const>(argv + 1, argc - 1),
                                               gravac::ProcessEnvironment());
  if (!s.ok()) {
    std::fprintf(stderr, "gravac-integration-worker: %s\n",
                 std::string(s.status().message()).c_str());
    return 2;
  }
  if (s->help_requested()) {
    std::printf(
        "%s", Settings::Help(gravac::integration::kSettings, "gravac-integration-worker").c_str());
    return 0;
  }
  if (*s->GetString("mode") == "kill") {
    // The rank that dies runs its gravac side in a child process, which SIGKILLs itself; this
    // process (gravacrun's child) reports the death after --linger_s, so that gravacrun's
    // teardown does not race the survivors' error reports the test is about.
    std::optional<std::string> rank = gravac::ProcessEnvironment()("GRAVAC_RANK");
    std::string bad = *s->GetString("bad_ranks");
    bool dies = false;
    for (absl::string_view r : absl::StrSplit(bad, ',', absl::SkipEmpty())) {
      dies |= rank.has_value() && r == *rank;
    }
    if (dies) {
      pid_t child = fork();
      if (child < 0) return 1;
      if (child > 0) {
        int status = 0;
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(*s->GetDouble("linger_s")));
        return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      }
    }
  }
  char error[1024] = "";
  gravac_context* ctx = nullptr;
  gravac_status st = gravac_init_verbose(&ctx, error, sizeof(error));
  if (st != GRAVAC_OK) {
    std::fprintf(stderr, "gravac-integration-worker: gravac_init: %s: %s\n",
                 gravac_status_string(st), error);
    return 1;
  }
  std::string path = absl::StrFormat("%s/rank%d.log", *s->GetString("log_dir"), gravac_rank(ctx));
  std::FILE* log = std::fopen(path.c_str(), "w");
  if (log == nullptr) {
    std::fprintf(stderr, "gravac-integration-worker: cannot write %s\n", path.c_str());
    gravac_shutdown(ctx);
    return 1;
  }
  absl::Status result = gravac::integration::Worker(ctx, *s, log).Run();
  std::fclose(log);
  st = gravac_shutdown(ctx);
  if (!result.ok()) {
    std::fprintf(stderr, "gravac-integration-worker: %s\n", std::string(result.message()).c_str());
    return 1;
  }
  return st == GRAVAC_OK || st == GRAVAC_ERR_SHUTDOWN ? 0 : 1;
}
