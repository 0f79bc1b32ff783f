// gravac-shm-handoff-bench (BENCHMARKS.md 7): the shared-memory handoff worker -> daemon ->
// worker. A WorkerServer whose sink completes every tensor at once (no engine, no network) serves
// 1 and 2 local workers (threads using the C API); each worker allreduces a float32 tensor of
// 4 KB .. 64 MB in place and waits, alternating private memory (staged: copied into the staging
// segment and back) and a shared buffer (gravac_buffer_alloc: the server reads and writes it
// directly). Reported per size: the staged round trip p50 / p99, the shared one's p50 / p99 and
// its ratio to the staged p50 (interleaved in the same run), and the staging copy
// GB/s (user buffer -> memfd staging segment, what gravac_*_async does) against a single-core
// memcpy GB/s between private buffers, measured interleaved in the same run. Every element of
// every result is checked (inputs are small integers; #wrong must be 0, else exit 1).
//
//   gravac-shm-handoff-bench [--min_bytes 4096] [--max_bytes 67108864] [--workers 1,2]
//                            [--iters 200] [--warmup 5] [--json FILE]
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/absl_compat.h"
#include "core/ipc/segment.h"
#include "core/settings.h"
#include "daemon/local/worker_server.h"
#include "gravac/gravac.h"

namespace gravac::bench {
namespace {

constexpr SettingSpec kSettings[] = {
    {"min_bytes", "", "4096", "smallest tensor", SettingType::kInt},
    {"max_bytes", "", "67108864", "largest tensor (sizes grow by 4x)", SettingType::kInt},
    {"workers", "", "1,2", "local worker counts to run", SettingType::kString},
    {"iters", "", "200", "round trips per size at most (fewer for large sizes)", SettingType::kInt},
    {"warmup", "", "5", "untimed round trips per size", SettingType::kInt},
    {"json", "", "", "write the rows as JSON to this file", SettingType::kString},
};

struct Row {
  int workers;
  int64_t bytes;
  int iters;
  double p50_us, p99_us, rt_gbps;
  double shared_p50_us, shared_p99_us;
  double staging_gbps, memcpy_gbps;
  int64_t wrong;
};

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

// Staging copy vs memcpy, interleaved: returns {staging GB/s, memcpy GB/s} (medians). Each sample
// repeats the copy until about 64 KiB.. moved so that small sizes are not timer-bound.
std::pair<double, double> CopyRates(int64_t bytes, int reps) {
  // Both destinations page aligned (the staging data starts on a page), so both copies see the
  // same source/destination alignment (no 4K-aliasing advantage for either side).
  std::vector<uint8_t> src(bytes, 1);
  auto seg = ipc::ShmSegment::Create("gravac-bench-staging", bytes);
  if (!seg.ok()) return {0, 0};
  void* dst_mem =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (dst_mem == MAP_FAILED) return {0, 0};
  absl::Cleanup unmap = [&] { ::munmap(dst_mem, bytes); };
  uint8_t* dst = static_cast<uint8_t*>(dst_mem);
  std::memset(dst, 0, bytes);          // first touch outside the timing
  std::memset(seg->data(), 0, bytes);  // as in a warm client
  const int inner = static_cast<int>(std::max<int64_t>(1, (int64_t{1} << 20) / bytes));
  std::vector<double> shm_t, mem_t;
  auto time_copy = [&](uint8_t* to) {
    const absl::Time t0 = absl::Now();
    for (int k = 0; k < inner; ++k) {
      std::memcpy(to, src.data(), bytes);
      asm volatile("" : : "r"(to) : "memory");
    }
    return absl::ToDoubleSeconds(absl::Now() - t0) / inner;
  };
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0) {
      shm_t.push_back(time_copy(seg->data()));
      mem_t.push_back(time_copy(dst));
    } else {
      mem_t.push_back(time_copy(dst));
      shm_t.push_back(time_copy(seg->data()));
    }
  }
  return {bytes / Median(shm_t) / 1e9, bytes / Median(mem_t) / 1e9};
}

struct WorkerTimes {
  // Per size: round trips of an in-place allreduce on private memory (staged: copied into the
  // staging segment and back) and on a shared buffer (gravac_buffer_alloc: no copies).
  std::vector<std::vector<double>> staged, shared;
  std::vector<int64_t> wrong;  // per size, both kinds
  std::string error;
};

int Iters(int64_t bytes, int max_iters) {
  // Fewer round trips for large sizes (about 2 GB moved per size at most).
  return static_cast<int>(
      std::max<int64_t>(5, std::min<int64_t>(max_iters, (int64_t{2} << 30) / bytes)));
}

// Runs `workers` worker threads over every size against the server on `socket`. Each iteration
// does one staged and one shared round trip, alternating which goes first; the input is written
// before the clock starts.
std::vector<WorkerTimes> RunWorkers(const std::string& socket, int workers,
                                    const std::vector<int64_t>& sizes, int max_iters, int warmup) {
  std::vector<WorkerTimes> result(workers);
  std::vector<std::thread> threads;
  for (int lr = 0; lr < workers; ++lr) {
    threads.emplace_back([&, lr] {
      WorkerTimes& mine = result[lr];
      gravac_config c{};
      c.rank = lr;
      c.size = workers;
      c.local_rank = lr;
      c.local_size = workers;
      c.daemon_socket = socket.c_str();
      c.connect_timeout_s = 10;
      c.staging_bytes = sizes.back() + 4096;
      gravac_context* ctx = nullptr;
      char err[512] = {0};
      if (gravac_init_with_config(&c, &ctx, err, sizeof(err)) != GRAVAC_OK) {
        mine.error = err;
        return;
      }
      for (int64_t bytes : sizes) {
        const int64_t count = bytes / 4;
        std::vector<float> input(count), priv(count);
        for (int64_t i = 0; i < count; ++i) input[i] = static_cast<float>((i + lr) % 64);
        gravac_buffer* buf = nullptr;
        if (gravac_buffer_alloc(ctx, bytes, &buf) != GRAVAC_OK) {
          mine.error = gravac_last_error(ctx);
          break;
        }
        absl::Cleanup free_buf = [buf] { gravac_buffer_free(buf); };
        float* shared = static_cast<float*>(gravac_buffer_data(buf));
        const int64_t shape[] = {count};
        const std::string name = absl::StrFormat("handoff.%d", bytes);
        const int iters = Iters(bytes, max_iters);
        std::vector<double> staged_t, shared_t;
        int64_t wrong = 0;
        auto check = [&](const float* out) {
          for (int64_t i = 0; i < count; ++i) {
            float expect = 0;
            for (int w = 0; w < workers; ++w) expect += static_cast<float>((i + w) % 64);
            if (out[i] != expect) ++wrong;
          }
        };
        auto round_trip = [&](float* data, std::vector<double>* times, bool timed) {
          std::memcpy(data, input.data(), bytes);
          gravac_request* req = nullptr;
          const absl::Time t0 = absl::Now();
          gravac_status s = gravac_allreduce_async(ctx, name.c_str(), data, data, shape, 1,
                                                   GRAVAC_FLOAT32, GRAVAC_SUM, nullptr, &req);
          if (s == GRAVAC_OK) s = gravac_wait(req);
          const absl::Time t1 = absl::Now();
          if (s != GRAVAC_OK) {
            mine.error = req ? gravac_request_error(req) : gravac_last_error(ctx);
          } else if (timed) {
            times->push_back(absl::ToDoubleMicroseconds(t1 - t0));
          }
          gravac_request_free(req);
        };
        for (int it = 0; it < warmup + iters && mine.error.empty(); ++it) {
          const bool timed = it >= warmup;
          if (it % 2 == 0) {
            round_trip(priv.data(), &staged_t, timed);
            round_trip(shared, &shared_t, timed);
          } else {
            round_trip(shared, &shared_t, timed);
            round_trip(priv.data(), &staged_t, timed);
          }
        }
        check(priv.data());
        check(shared);
        mine.staged.push_back(std::move(staged_t));
        mine.shared.push_back(std::move(shared_t));
        mine.wrong.push_back(wrong);
      }
      gravac_shutdown(ctx);
    });
  }
  for (auto& t : threads) t.join();
  return result;
}

int Main(int argc, char** argv) {
  auto settings =
      Settings::Parse(kSettings, absl::MakeConstSpan(argv + 1, argc - 1), FixedEnvironment({}));
  if (!settings.ok()) {
    std::fprintf(stderr, "%s\n", std::string(settings.status().message()).c_str());
    return 2;
  }
  if (settings->help_requested()) {
    std::printf("%s", Settings::Help(kSettings, "gravac-shm-handoff-bench").c_str());
    return 0;
  }
  const int64_t min_bytes = *settings->GetInt("min_bytes");
  const int64_t max_bytes = *settings->GetInt("max_bytes");
  const int max_iters = static_cast<int>(*settings->GetInt("iters"));
  const int warmup = static_cast<int>(*settings->GetInt("warmup"));
  const std::string json = *settings->GetString("json");
  std::vector<int> worker_counts;
  for (absl::string_view w : absl::StrSplit(AsAbsl(*settings->GetString("workers")), ',')) {
    int v;
    if (!absl::SimpleAtoi(w, &v) || v < 1) {
      std::fprintf(stderr, "bad --workers entry '%s'\n", std::string(w).c_str());
      return 2;
    }
    worker_counts.push_back(v);
  }
  if (min_bytes < 4 || max_bytes < min_bytes || max_iters < 1) {
    std::fprintf(stderr, "need 4 <= min_bytes <= max_bytes and iters >= 1\n");
    return 2;
  }
  char dir[] = "/tmp/gravac_handoff_XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 1;
  const std::string socket = std::string(dir) + "/bench.sock";

  std::vector<Row> rows;
  std::printf("%7s %10s %6s %10s %10s %9s %10s %10s %8s %12s %11s %7s %6s\n", "workers", "bytes",
              "iters", "p50_us", "p99_us", "rt_GB/s", "shared_p50", "shared_p99", "sh/stg",
              "staging_GB/s", "memcpy_GB/s", "ratio", "#wrong");
  for (int workers : worker_counts) {
    daemon::WorkerServerOptions o;
    o.socket_path = socket;
    o.local_size = workers;
    auto server = daemon::WorkerServer::Start(o);
    if (!server.ok()) {
      std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
      return 1;
    }
    // The sink completes at once: the node tensor (the local sum) is the result.
    (*server)->Serve(
        [](daemon::NodeTensor t, daemon::DoneCallback done) {
          daemon::TensorResult r;
          r.data = std::move(t.data);
          r.collective = "dense_allreduce";
          done(std::move(r));
        },
        [](absl::Status) {});
    std::vector<int64_t> sizes;
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) sizes.push_back(bytes);
    std::vector<WorkerTimes> times = RunWorkers(socket, workers, sizes, max_iters, warmup);
    for (const WorkerTimes& t : times) {
      if (!t.error.empty()) {
        std::fprintf(stderr, "workers %d: %s\n", workers, t.error.c_str());
        return 1;
      }
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      Row row{};
      row.workers = workers;
      row.bytes = sizes[i];
      row.iters = Iters(sizes[i], max_iters);
      row.p50_us = Percentile(times[0].staged[i], 0.5);
      row.p99_us = Percentile(times[0].staged[i], 0.99);
      row.rt_gbps = row.bytes / (row.p50_us * 1e-6) / 1e9;
      row.shared_p50_us = Percentile(times[0].shared[i], 0.5);
      row.shared_p99_us = Percentile(times[0].shared[i], 0.99);
      for (const WorkerTimes& t : times) row.wrong += t.wrong[i];
      std::tie(row.staging_gbps, row.memcpy_gbps) = CopyRates(row.bytes, 21);
      std::printf(
          "%7d %10ld %6d %10.1f %10.1f %9.2f %10.1f %10.1f %8.3f %12.2f %11.2f %7.3f %6ld\n",
          row.workers, static_cast<long>(row.bytes), row.iters, row.p50_us, row.p99_us, row.rt_gbps,
          row.shared_p50_us, row.shared_p99_us, row.shared_p50_us / row.p50_us, row.staging_gbps,
          row.memcpy_gbps, row.staging_gbps / row.memcpy_gbps, static_cast<long>(row.wrong));
      std::fflush(stdout);
      rows.push_back(row);
    }
    (*server)->Stop();
  }
  ::rmdir(dir);
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"env\": {\"min_bytes\": " << min_bytes << ", \"max_bytes\": " << max_bytes
        << ", \"iters\": " << max_iters << ", \"warmup\": " << warmup
        << ", \"cpus\": " << std::thread::hardware_concurrency() << "},\n \"rows\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << absl::StrFormat(
          "  {\"workers\": %d, \"bytes\": %d, \"iters\": %d, \"p50_us\": %.3f, \"p99_us\": %.3f, "
          "\"rt_gbps\": %.4f, \"shared_p50_us\": %.3f, \"shared_p99_us\": %.3f, "
          "\"shared_over_staged\": %.4f, \"staging_gbps\": %.4f, \"memcpy_gbps\": %.4f, "
          "\"staging_over_memcpy\": %.4f, \"wrong\": %d}%s\n",
          r.workers, r.bytes, r.iters, r.p50_us, r.p99_us, r.rt_gbps, r.shared_p50_us,
          r.shared_p99_us, r.shared_p50_us / r.p50_us, r.staging_gbps, r.memcpy_gbps,
          r.staging_gbps / r.memcpy_gbps, r.wrong, i + 1 < rows.size() ? "," : "");
    }
    out << " ]}\n";
  }
  for (const Row& r : rows) {
    if (r.wrong != 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gravac::bench

int main(int argc, char** argv) { return gravac::bench::Main(argc, argv); }
