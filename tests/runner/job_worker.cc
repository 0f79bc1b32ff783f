// A small worker for gravacrun job tests, using only the C API (gravac/gravac.h): a few steps of
// dense allreduce (sum and average, checked exactly), one compressible allreduce, an allgather
// with a different first dimension per rank, a broadcast and a barrier; then it prints
// "rank R of N ok" and shuts down. With --exit_at_step S --exit_rank R, rank R exits with code 7
// at step S without shutting down (a worker dying mid-job). With --bytes B it first times one
// dense allreduce of B bytes of float32 and prints "dense allreduce of B bytes: T s".
// With --fault F --fault_rank R [--fault_step S (1)], rank R misbehaves (tests/runner/fault_test):
// stray = allreduces a name no other rank posts at step S; nan = its dense input at step S holds
// a NaN; stop = stops itself (SIGSTOP) at step S; extra = one more allreduce than the others
// after the barrier, reported as "rank R: extra allreduce: STATUS: message" (exit 1 on error);
// stop_daemon = sends SIGSTOP to its node's gravacd at step S and goes on (its allreduce there
// must fail within the stall bound); kill_controller = sends SIGKILL to the job's gravac-controller (the process of that name with
// the same parent as this worker, gravacrun) at step S and trains on.
// With --compressed_each_step 1 every step also allreduces a compressible gradient; the rank then
// prints "rank R compressed: checksum C epochs A..B (at the fault step E)" (C: a hash of every
// compressed result, equal on every rank when the replicas are identical; A..B the decision
// epochs the results carried; E the newest one before the fault step). --step_sleep_ms M sleeps M
// ms per step, so a job lasts long enough for a fault to happen in it.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gravac/gravac.h"

namespace {

int Fail(gravac_context* ctx, const char* what, gravac_status s, const gravac_request* req) {
  std::fprintf(
      stderr, "job_worker: %s failed: %s: %s\n", what, gravac_status_string(s),
      req != nullptr ? gravac_request_error(req) : (ctx != nullptr ? gravac_last_error(ctx) : ""));
  return 1;
}

// Posts, waits and frees one request; returns the status of the first failing call.
gravac_status WaitAndFree(gravac_status posted, gravac_request* req, std::string* error) {
  if (posted != GRAVAC_OK) return posted;
  gravac_status s = gravac_wait(req);
  if (s != GRAVAC_OK) *error = gravac_request_error(req);
  gravac_request_free(req);
  return s;
}

// Sends `sig` to every process that shares this process's parent, whose name starts with
// `comm_prefix` and whose command line holds `arg` (when not empty); returns how many.
int SignalSiblings(const std::string& comm_prefix, const std::string& arg, int sig) {
  int killed = 0;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 0;
  while (dirent* e = ::readdir(proc)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::stringstream text;
    text << in.rdbuf();
    const std::string stat = text.str();
    const size_t open = stat.find('(');
    const size_t close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string comm = stat.substr(open + 1, close - open - 1);
    int ppid = -1;
    char state = 0;
    std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid);
    if (ppid != ::getppid() || comm.rfind(comm_prefix, 0) != 0) continue;
    if (!arg.empty()) {
      std::ifstream cmd(std::string("/proc/") + e->d_name + "/cmdline");
      std::stringstream words;
      words << cmd.rdbuf();
      std::string line = words.str();
      std::replace(line.begin(), line.end(), '\0', ' ');
      if (line.find(arg) == std::string::npos) continue;
    }
    if (::kill(pid, sig) == 0) ++killed;
  }
  ::closedir(proc);
  return killed;
}

// FNV-1a over bytes, folded into `hash`.
uint64_t Fnv(uint64_t hash, const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 3;
  int exit_at_step = -1;
  int exit_rank = -1;
  int64_t big_bytes = 0;
  std::string fault;
  int fault_rank = -1;
  int fault_step = 1;
  bool compressed_each_step = false;
  int step_sleep_ms = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--exit_at_step") == 0) exit_at_step = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--exit_rank") == 0) exit_rank = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--bytes") == 0) big_bytes = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--fault") == 0) fault = argv[i + 1];
    if (std::strcmp(argv[i], "--fault_rank") == 0) fault_rank = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--fault_step") == 0) fault_step = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--compressed_each_step") == 0) {
      compressed_each_step = std::atoi(argv[i + 1]) != 0;
    }
    if (std::strcmp(argv[i], "--step_sleep_ms") == 0) step_sleep_ms = std::atoi(argv[i + 1]);
  }
  gravac_context* ctx = nullptr;
  char init_error[512] = {};
  gravac_status s = gravac_init_verbose(&ctx, init_error, sizeof(init_error));
  if (s != GRAVAC_OK) {
    std::fprintf(stderr, "job_worker: gravac_init failed: %s\n", init_error);
    return 1;
  }
  const int rank = gravac_rank(ctx);
  const int size = gravac_size(ctx);
  std::string error;
  if (big_bytes > 0) {
    const int64_t count = big_bytes / 4;
    std::vector<float> big(static_cast<size_t>(count), 1.0f);
    const int64_t bshape[1] = {count};
    gravac_request* rq = nullptr;
    const auto start = std::chrono::steady_clock::now();
    s = gravac_allreduce_async(ctx, "big", big.data(), big.data(), bshape, 1, GRAVAC_FLOAT32,
                               GRAVAC_SUM, nullptr, &rq);
    if ((s = WaitAndFree(s, rq, &error)) != GRAVAC_OK) {
      std::fprintf(stderr, "job_worker: big allreduce failed: %s\n", error.c_str());
      return 1;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (big.front() != static_cast<float>(size) || big.back() != static_cast<float>(size)) {
      std::fprintf(stderr, "job_worker: big allreduce gave %g\n", big.front());
      return 1;
    }
    std::printf("dense allreduce of %ld bytes: %.3f s\n", static_cast<long>(big_bytes), seconds);
  }
  const int64_t n = 1000;
  const int64_t shape[1] = {n};
  uint64_t checksum = 14695981039346656037ull;
  int64_t first_epoch = -1;
  int64_t last_epoch = -1;
  int64_t epoch_at_fault = -1;
  for (int step = 0; step < steps; ++step) {
    if (step_sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_sleep_ms));
    if (rank == fault_rank && step == fault_step && fault == "kill_controller") {
      // The kernel keeps 15 characters of the name: "gravac-controll".
      std::fprintf(stderr, "job_worker: rank %d killed %d controller(s) at step %d\n", rank,
                   SignalSiblings("gravac-control", "", SIGKILL), step);
    }
    if (rank == fault_rank && step == fault_step && fault == "stop_daemon") {
      const char* socket = std::getenv("GRAVAC_DAEMON_SOCKET");
      std::fprintf(stderr, "job_worker: rank %d stopped %d gravacd at step %d\n", rank,
                   SignalSiblings("gravacd", std::string("--socket=") + (socket ? socket : "?"),
                                  SIGSTOP),
                   step);
    }
    if (step == fault_step) epoch_at_fault = last_epoch;
    if (step == exit_at_step && rank == exit_rank) {
      std::fprintf(stderr, "job_worker: rank %d exits at step %d\n", rank, step);
      std::_Exit(7);
    }
    std::vector<float> in(n, static_cast<float>(rank + 1 + step));
    std::vector<float> sum(n), avg(n);
    gravac_tensor_options topts = {step, 1, 0, {nullptr, 0}};
    const bool faulty = rank == fault_rank && step == fault_step;
    if (faulty && fault == "stop") ::raise(SIGSTOP);
    if (faulty && fault == "nan") in[3] = std::nanf("");
    if (faulty && fault == "stray") {
      gravac_request* rs = nullptr;
      s = gravac_allreduce_async(ctx, "stray", in.data(), sum.data(), shape, 1, GRAVAC_FLOAT32,
                                 GRAVAC_SUM, &topts, &rs);
      s = WaitAndFree(s, rs, &error);
      if (s != GRAVAC_OK) {
        std::fprintf(stderr, "job_worker: rank %d step %d allreduce failed: %s: %s\n", rank, step,
                     gravac_status_string(s), error.c_str());
        return 1;
      }
    }
    gravac_request* r1 = nullptr;
    gravac_request* r2 = nullptr;
    gravac_status p1 = gravac_allreduce_async(ctx, "grad.sum", in.data(), sum.data(), shape, 1,
                                              GRAVAC_FLOAT32, GRAVAC_SUM, &topts, &r1);
    gravac_status p2 = gravac_allreduce_async(ctx, "grad.avg", in.data(), avg.data(), shape, 1,
                                              GRAVAC_FLOAT32, GRAVAC_AVERAGE, &topts, &r2);
    if ((s = WaitAndFree(p1, r1, &error)) != GRAVAC_OK ||
        (s = WaitAndFree(p2, r2, &error)) != GRAVAC_OK) {
      std::fprintf(stderr, "job_worker: rank %d step %d allreduce failed: %s: %s\n", rank, step,
                   gravac_status_string(s), error.c_str());
      return 1;
    }
    const float want_sum = static_cast<float>(size * (size + 1) / 2 + size * step);
    for (int64_t i = 0; i < n; ++i) {
      if (sum[i] != want_sum || avg[i] != want_sum / static_cast<float>(size)) {
        std::fprintf(stderr, "job_worker: rank %d step %d: element %ld is %g / %g, want %g / %g\n",
                     rank, step, static_cast<long>(i), sum[i], avg[i], want_sum,
                     want_sum / static_cast<float>(size));
        return 1;
      }
    }
    if (compressed_each_step) {
      // A gradient that changes every step, the same on every rank up to a rank offset.
      std::vector<float> g(4096);
      for (size_t i = 0; i < g.size(); ++i) {
        g[i] = static_cast<float>((i * 7919 + static_cast<size_t>(rank + step * 13)) % 101) - 50;
      }
      gravac_tensor_options gopts = {step, 1, 1, {nullptr, 0}};
      gravac_request* rg = nullptr;
      const int64_t gs[1] = {static_cast<int64_t>(g.size())};
      s = gravac_allreduce_async(ctx, "grad.each", g.data(), g.data(), gs, 1, GRAVAC_FLOAT32,
                                 GRAVAC_AVERAGE, &gopts, &rg);
      if (s != GRAVAC_OK) return Fail(ctx, "compressed allreduce", s, nullptr);
      if ((s = gravac_wait(rg)) != GRAVAC_OK) return Fail(ctx, "compressed allreduce", s, rg);
      gravac_result_info gi;
      if ((s = gravac_result_info_get(rg, &gi)) != GRAVAC_OK) return Fail(ctx, "result info", s, rg);
      gravac_request_free(rg);
      checksum = Fnv(checksum, g.data(), g.size() * sizeof(float));
      if (first_epoch < 0) first_epoch = gi.decision_epoch;
      if (gi.decision_epoch < last_epoch) {
        std::fprintf(stderr, "job_worker: rank %d step %d: decision epoch went back from %ld to %ld\n",
                     rank, step, static_cast<long>(last_epoch), static_cast<long>(gi.decision_epoch));
        return 1;
      }
      last_epoch = gi.decision_epoch;
    }
  }
  if (compressed_each_step) {
    std::printf("rank %d compressed: checksum %016llx epochs %ld..%ld (at the fault step %ld)\n",
                rank, static_cast<unsigned long long>(checksum), static_cast<long>(first_epoch),
                static_cast<long>(last_epoch), static_cast<long>(epoch_at_fault));
    std::fflush(stdout);
  }

  // One compressible gradient: check only that it completes and reports how it was sent.
  std::vector<float> grad(4096);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>((i * 7919 + rank) % 97);
  gravac_tensor_options copts = {steps, 1, 1, {nullptr, 0}};
  gravac_request* rc = nullptr;
  const int64_t gshape[1] = {static_cast<int64_t>(grad.size())};
  s = gravac_allreduce_async(ctx, "grad.compressed", grad.data(), grad.data(), gshape, 1,
                             GRAVAC_FLOAT32, GRAVAC_AVERAGE, &copts, &rc);
  if (s != GRAVAC_OK) return Fail(ctx, "compressed allreduce", s, nullptr);
  if ((s = gravac_wait(rc)) != GRAVAC_OK) return Fail(ctx, "compressed allreduce", s, rc);
  gravac_result_info info;
  if ((s = gravac_result_info_get(rc, &info)) != GRAVAC_OK) return Fail(ctx, "result info", s, rc);
  gravac_request_free(rc);

  // Allgather: rank r contributes r + 1 rows of two int32 equal to r.
  std::vector<int32_t> rows(2 * (rank + 1), rank);
  const int64_t ashape[2] = {rank + 1, 2};
  gravac_request* ra = nullptr;
  s = gravac_allgather_async(ctx, "gather", rows.data(), ashape, 2, GRAVAC_INT32, &ra);
  if (s != GRAVAC_OK) return Fail(ctx, "allgather", s, nullptr);
  if ((s = gravac_wait(ra)) != GRAVAC_OK) return Fail(ctx, "allgather", s, ra);
  int64_t total = 0;
  std::vector<int32_t> gathered(static_cast<size_t>(size * (size + 1)));
  s = gravac_allgather_result(ra, &total, gathered.data(), gathered.size() * sizeof(int32_t));
  if (s != GRAVAC_OK) return Fail(ctx, "allgather result", s, ra);
  gravac_request_free(ra);
  size_t at = 0;
  for (int r = 0; r < size; ++r) {
    for (int k = 0; k < 2 * (r + 1); ++k, ++at) {
      if (gathered[at] != r) {
        std::fprintf(stderr, "job_worker: rank %d: allgather element %zu is %d, want %d\n", rank,
                     at, gathered[at], r);
        return 1;
      }
    }
  }
  if (total != size * (size + 1) / 2) {
    std::fprintf(stderr, "job_worker: allgather first dimension %ld\n", static_cast<long>(total));
    return 1;
  }

  // Broadcast from the last rank.
  std::vector<double> data(16, rank == size - 1 ? 42.5 : -1.0);
  const int64_t bshape[1] = {16};
  gravac_request* rb = nullptr;
  s = gravac_broadcast_async(ctx, "bcast", data.data(), bshape, 1, GRAVAC_FLOAT64, size - 1, &rb);
  if (s != GRAVAC_OK) return Fail(ctx, "broadcast", s, nullptr);
  if ((s = gravac_wait(rb)) != GRAVAC_OK) return Fail(ctx, "broadcast", s, rb);
  gravac_request_free(rb);
  for (double v : data) {
    if (v != 42.5) {
      std::fprintf(stderr, "job_worker: rank %d: broadcast gave %g\n", rank, v);
      return 1;
    }
  }
  if ((s = gravac_barrier(ctx)) != GRAVAC_OK) return Fail(ctx, "barrier", s, nullptr);
  if (fault == "extra" && rank == fault_rank) {
    gravac_request* rx = nullptr;
    s = gravac_allreduce_async(ctx, "extra", data.data(), data.data(), bshape, 1, GRAVAC_FLOAT64,
                               GRAVAC_SUM, nullptr, &rx);
    s = WaitAndFree(s, rx, &error);
    std::printf("rank %d: extra allreduce: %s: %s\n", rank, gravac_status_string(s), error.c_str());
    std::fflush(stdout);
    gravac_shutdown(ctx);
    return s == GRAVAC_OK ? 0 : 1;
  }
  std::printf("rank %d of %d ok (compressed: theta %g, %s, epoch %ld)\n", rank, size, info.theta,
              info.collective, static_cast<long>(info.decision_epoch));
  std::fflush(stdout);
  if ((s = gravac_shutdown(ctx)) != GRAVAC_OK) return Fail(nullptr, "shutdown", s, nullptr);
  return 0;
}
