// gravac-collectives-bench: busbw of the Communicator's allreduce / allgather over the UCX
// transport, in the manner of nccl-tests all_reduce_perf (BENCHMARKS.md, ratio 1). The parent
// forks --np ranks (UCX state is only ever made in the ranks); with --rate > 0 every rank first
// enters its own node of an emulated netemu::Cluster shaped to that rate (or, with --cluster, of
// an existing one, as bench/collectives_driver.py makes to run the OpenMPI and Gloo peers on the
// same links), and B_eff is measured with iperf3 between nodes 0 and 1 before the sweep (or given
// with --b_eff). For each size the ranks run --warmup + --iters collectives (a barrier before
// each, each timed on its own) on small-integer inputs, so every sum is exact; after the last
// iteration every element is checked. Each rank sends its median time
// and its count of wrong elements to the parent over a pipe; the parent reports the slowest
// rank's median. A benchmark fails only on a wrong result (or a failed rank), never on a timing.
// bench/README.md explains the columns.
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/settings.h"
#include "core/status.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/reduce.h"
#include "daemon/transport/rendezvous.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/ucx/transport.h"
#include "netemu/cluster.h"
#include "netemu/netns.h"

namespace gravac::bench {
namespace {

using collectives::Communicator;
using collectives::CommunicatorOptions;
using collectives::DataType;
using collectives::ReduceOp;

constexpr SettingSpec kSettings[] = {
    {"np", "", "2", "number of ranks (forked processes), 2 .. 64", SettingType::kInt},
    {"op", "", "allreduce", "collective: allreduce (fp32 sum) or allgather"},
    {"min_bytes", "", "1048576", "smallest message size in bytes", SettingType::kInt},
    {"max_bytes", "", "268435456", "largest message size in bytes", SettingType::kInt},
    {"step_factor", "", "2", "size multiplier between rows (>= 2)", SettingType::kInt},
    {"iters", "", "5", "timed iterations per size (the median is reported)", SettingType::kInt},
    {"warmup", "", "1", "untimed iterations per size before the timed ones", SettingType::kInt},
    {"json", "", "", "write every row and the environment as JSON to this file"},
    {"ucx_tls", "", "tcp", "UCX_TLS of every rank"},
    {"rate", "", "0",
     "bit/s of each emulated node link; 0 = no emulated network (ranks on loopback)",
     SettingType::kDouble},
    {"op_timeout_s", "", "120", "bound of one collective (and of the rendezvous) in seconds",
     SettingType::kInt},
    {"cluster", "", "",
     "run the ranks in the nodes of this existing netemu cluster (e.g. made by gravac-netemu "
     "create or the driver) instead of making one; --rate then only labels the output"},
    {"b_eff", "", "0",
     "bit/s to divide busbw by; 0 = measure with iperf3 node 0 -> 1 (when on emulated links)",
     SettingType::kDouble},
    {"chunk_bytes", "", "1048576", "message size of the Communicator's pipeline",
     SettingType::kInt},
    {"inflight", "", "4", "messages in flight per direction (CommunicatorOptions)",
     SettingType::kInt},
    {"idle_sleep_us", "", "200",
     "CommunicatorOptions::max_idle_sleep in microseconds (0: always wait in the transport)",
     SettingType::kInt},
};

struct Options {
  int np = 2;
  std::string op;
  int64_t min_bytes = 0;
  int64_t max_bytes = 0;
  int64_t step_factor = 2;
  int iters = 0;
  int warmup = 0;
  std::string json;
  std::string ucx_tls;
  double rate = 0;
  absl::Duration op_timeout;
  int64_t chunk_bytes = 0;
  int inflight = 0;
  int64_t idle_sleep_us = 0;
  std::string cluster;
  double b_eff = 0;
};

absl::StatusOr<Options> ReadOptions(const Settings& settings) {
  Options o;
  ASSIGN_OR_RETURN(int64_t np, settings.GetInt("np"));
  if (np < 2 || np > 64) return absl::InvalidArgumentError("--np: 2 .. 64");
  o.np = static_cast<int>(np);
  ASSIGN_OR_RETURN(o.op, settings.GetString("op"));
  if (o.op != "allreduce" && o.op != "allgather") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--op: '%s' is neither allreduce nor allgather", o.op));
  }
  ASSIGN_OR_RETURN(o.min_bytes, settings.GetInt("min_bytes"));
  ASSIGN_OR_RETURN(o.max_bytes, settings.GetInt("max_bytes"));
  ASSIGN_OR_RETURN(o.step_factor, settings.GetInt("step_factor"));
  if (o.min_bytes < 4 || o.max_bytes < o.min_bytes || o.max_bytes > (int64_t{1} << 34)) {
    return absl::InvalidArgumentError("need 4 <= --min_bytes <= --max_bytes <= 16 GiB");
  }
  if (o.step_factor < 2) return absl::InvalidArgumentError("--step_factor must be >= 2");
  ASSIGN_OR_RETURN(int64_t iters, settings.GetInt("iters"));
  ASSIGN_OR_RETURN(int64_t warmup, settings.GetInt("warmup"));
  if (iters < 1 || iters > 100000 || warmup < 0 || warmup > 100000) {
    return absl::InvalidArgumentError("--iters must be >= 1, --warmup >= 0");
  }
  o.iters = static_cast<int>(iters);
  o.warmup = static_cast<int>(warmup);
  ASSIGN_OR_RETURN(o.json, settings.GetString("json"));
  ASSIGN_OR_RETURN(o.ucx_tls, settings.GetString("ucx_tls"));
  if (o.ucx_tls.empty()) return absl::InvalidArgumentError("--ucx_tls must not be empty");
  ASSIGN_OR_RETURN(o.rate, settings.GetDouble("rate"));
  if (!(o.rate >= 0)) return absl::InvalidArgumentError("--rate must be >= 0");
  ASSIGN_OR_RETURN(int64_t timeout_s, settings.GetInt("op_timeout_s"));
  if (timeout_s < 1) return absl::InvalidArgumentError("--op_timeout_s must be >= 1");
  o.op_timeout = absl::Seconds(timeout_s);
  ASSIGN_OR_RETURN(o.cluster, settings.GetString("cluster"));
  ASSIGN_OR_RETURN(o.b_eff, settings.GetDouble("b_eff"));
  if (!(o.b_eff >= 0)) return absl::InvalidArgumentError("--b_eff must be >= 0");
  ASSIGN_OR_RETURN(o.chunk_bytes, settings.GetInt("chunk_bytes"));
  ASSIGN_OR_RETURN(int64_t inflight, settings.GetInt("inflight"));
  if (o.chunk_bytes < 4 || o.chunk_bytes > (int64_t{1} << 30) || inflight < 1 ||
      inflight > 1024) {
    return absl::InvalidArgumentError("need 4 <= --chunk_bytes <= 1 GiB, 1 <= --inflight <= 1024");
  }
  o.inflight = static_cast<int>(inflight);
  ASSIGN_OR_RETURN(o.idle_sleep_us, settings.GetInt("idle_sleep_us"));
  if (o.idle_sleep_us < 0 || o.idle_sleep_us > 1000000) {
    return absl::InvalidArgumentError("need 0 <= --idle_sleep_us <= 1000000");
  }
  return o;
}

// The element counts of the sweep: fp32 elements per rank for allreduce; for allgather the
// gathered count, a multiple of np (each rank contributes count / np).
std::vector<size_t> Counts(const Options& o) {
  std::vector<size_t> counts;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) {
    size_t count = static_cast<size_t>(bytes) / sizeof(float);
    if (o.op == "allgather") count -= count % static_cast<size_t>(o.np);
    if (count == 0) count = o.op == "allgather" ? static_cast<size_t>(o.np) : 1;
    counts.push_back(count);
  }
  return counts;
}

// Small integers in [-5, 5]: every partial sum over <= 64 ranks is exact in fp32.
float InputValue(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 3) % 11) - 5);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

absl::Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n <= 0) return absl::InternalError("write to the parent's pipe failed");
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// One size on one rank: warm-up + iters, each after a barrier and timed alone; then every element
// of the last result is checked. Returns the median time in microseconds and the wrong count.
absl::Status RunSize(const Options& o, Communicator& comm, size_t count, double* median_us,
                     int64_t* wrong) {
  const int p = o.np;
  const int rank = comm.rank();
  const bool allreduce = o.op == "allreduce";
  const size_t send_count = allreduce ? count : count / static_cast<size_t>(p);
  std::vector<float> in(send_count);
  for (size_t i = 0; i < send_count; ++i) in[i] = InputValue(rank, i);
  std::vector<float> out(count, 0.0f);
  const std::vector<size_t> bytes_per_rank(static_cast<size_t>(p), send_count * sizeof(float));
  std::vector<double> times_us;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    std::fill(out.begin(), out.end(), -1000.0f);  // a collective that writes nothing is caught
    RETURN_IF_ERROR(comm.Barrier());
    const auto start = std::chrono::steady_clock::now();
    if (allreduce) {
      RETURN_IF_ERROR(
          comm.Allreduce(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum));
    } else {
      RETURN_IF_ERROR(comm.Allgatherv(in.data(), out.data(), bytes_per_rank));
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count();
    if (it >= o.warmup) times_us.push_back(us);
  }
  *median_us = Median(times_us);
  int64_t bad = 0;
  if (allreduce) {
    float expected[11];  // the input depends on i only through i % 11
    for (size_t j = 0; j < 11; ++j) {
      float sum = 0;
      for (int r = 0; r < p; ++r) sum += InputValue(r, j);
      expected[j] = sum;
    }
    for (size_t i = 0; i < count; ++i) bad += out[i] != expected[i % 11];
  } else {
    for (int q = 0; q < p; ++q) {
      const float* block = out.data() + static_cast<size_t>(q) * send_count;
      for (size_t i = 0; i < send_count; ++i) bad += block[i] != InputValue(q, i);
    }
  }
  *wrong = bad;
  return absl::OkStatus();
}

// The whole life of one rank in its forked process. Writes "count median_us wrong\n" per size.
absl::Status RankMain(const Options& o, int rank, const std::string& dir,
                      const std::string& netns, int fd) {
  std::vector<std::pair<std::string, std::string>> params;
  if (!netns.empty()) {
    RETURN_IF_ERROR(netemu::EnterNetns(netns));
    setenv("UCX_TLS", o.ucx_tls.c_str(), 1);
    setenv("UCX_NET_DEVICES", "eth0", 1);
  } else {
    params = {{"UCX_TLS", o.ucx_tls}, {"UCX_NET_DEVICES", "lo"}};
  }
  transport::TransportOptions options;
  options.rank = rank;
  options.world_size = o.np;
  options.op_timeout = o.op_timeout;
  options.params = params;
  ASSIGN_OR_RETURN(std::unique_ptr<transport::Transport> transport,
                   transport::ucx::MakeTransport(options));
  transport::FileRendezvous rendezvous(dir + "/addresses", rank, o.np, o.op_timeout);
  ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                   rendezvous.Exchange(transport->LocalAddress()));
  const CommunicatorOptions comm_options = {.chunk_bytes = static_cast<size_t>(o.chunk_bytes),
                                            .max_inflight_chunks = o.inflight,
                                            .op_timeout = o.op_timeout,
                                            .max_idle_sleep = absl::Microseconds(o.idle_sleep_us)};
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   Communicator::Connect(*transport, addresses, comm_options));
  absl::Status status = absl::OkStatus();
  for (size_t count : Counts(o)) {
    double median_us = 0;
    int64_t wrong = 0;
    status = RunSize(o, *comm, count, &median_us, &wrong);
    if (!status.ok()) {
      status = absl::Status(status.code(), absl::StrFormat("rank %d: %s of %d elements: %s", rank,
                                                           o.op, count, status.message()));
      break;
    }
    status = WriteAll(fd, absl::StrFormat("%d %.17g %d\n", count, median_us, wrong));
    if (!status.ok()) break;
  }
  // Exit barrier: no rank closes its endpoints while a peer may still be receiving.
  transport::FileRendezvous done(dir + "/done", rank, o.np, o.op_timeout);
  if (!status.ok()) {
    (void)done.Publish("failed");
  } else {
    absl::Status all_done = done.Exchange("ok").status();
    if (!all_done.ok()) {
      status = absl::Status(all_done.code(), absl::StrCat("exit barrier: ", all_done.message()));
    }
  }
  comm.reset();
  transport.reset();
  return status;
}

struct Row {
  size_t count = 0;
  double bytes = 0;
  double time_us = 0;  // the slowest rank's median
  int64_t wrong = 0;   // summed over ranks
  double algbw = 0;    // GB/s (1e9 bytes)
  double busbw = 0;
};

struct RankOutput {
  std::string text;
  int exit_code = -1;
  int term_signal = 0;
};

// Forks the ranks, collects each one's output and exit status.
absl::StatusOr<std::vector<RankOutput>> RunRanks(const Options& o, const std::string& dir,
                                                 const netemu::Cluster* cluster) {
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int r = 0; r < o.np; ++r) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) break;
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      close(pipe_fds[0]);
      for (int fd : fds) close(fd);
      const std::string netns = cluster != nullptr ? cluster->node_namespace(r) : "";
      absl::Status s = RankMain(o, r, dir, netns, pipe_fds[1]);
      if (!s.ok()) std::fprintf(stderr, "rank %d FAILED: %s\n", r, s.ToString().c_str());
      std::fflush(nullptr);
      _exit(s.ok() ? 0 : 1);
    }
    close(pipe_fds[1]);
    if (pid < 0) {
      close(pipe_fds[0]);
      break;
    }
    pids.push_back(pid);
    fds.push_back(pipe_fds[0]);
  }
  std::vector<RankOutput> outputs(pids.size());
  std::vector<bool> open(pids.size(), true);
  while (std::count(open.begin(), open.end(), true) > 0) {
    std::vector<pollfd> polled;
    std::vector<size_t> who;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (!open[r]) continue;
      polled.push_back({fds[r], POLLIN, 0});
      who.push_back(r);
    }
    if (poll(polled.data(), polled.size(), 1000) <= 0) continue;
    for (size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[who[i]], buf, sizeof(buf));
      if (n > 0) {
        outputs[who[i]].text.append(buf, static_cast<size_t>(n));
      } else {
        open[who[i]] = false;
      }
    }
  }
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    close(fds[r]);
    if (WIFEXITED(status)) outputs[r].exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) outputs[r].term_signal = WTERMSIG(status);
  }
  if (static_cast<int>(pids.size()) != o.np) {
    return absl::InternalError(absl::StrFormat("could fork only %d of %d ranks", pids.size(), o.np));
  }
  return outputs;
}

// Parses every rank's lines into rows: the slowest median and the summed wrong count per size.
absl::StatusOr<std::vector<Row>> MakeRows(const Options& o,
                                          const std::vector<RankOutput>& outputs) {
  const std::vector<size_t> counts = Counts(o);
  std::vector<Row> rows(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) rows[i].count = counts[i];
  for (size_t r = 0; r < outputs.size(); ++r) {
    if (outputs[r].exit_code != 0) {
      return absl::InternalError(absl::StrFormat("rank %d failed (exit code %d, signal %d)", r,
                                                 outputs[r].exit_code, outputs[r].term_signal));
    }
    std::vector<std::string> lines =
        absl::StrSplit(outputs[r].text, '\n', absl::SkipWhitespace());
    if (lines.size() != counts.size()) {
      return absl::InternalError(absl::StrFormat("rank %d reported %d sizes, expected %d", r,
                                                 lines.size(), counts.size()));
    }
    for (size_t i = 0; i < lines.size(); ++i) {
      std::vector<std::string> f = absl::StrSplit(lines[i], ' ');
      uint64_t count = 0;
      double us = 0;
      int64_t wrong = 0;
      if (f.size() != 3 || !absl::SimpleAtoi(f[0], &count) || !absl::SimpleAtod(f[1], &us) ||
          !absl::SimpleAtoi(f[2], &wrong) || count != counts[i]) {
        return absl::InternalError(absl::StrFormat("rank %d: bad line '%s'", r, lines[i]));
      }
      rows[i].time_us = std::max(rows[i].time_us, us);
      rows[i].wrong += wrong;
    }
  }
  const double p = o.np;
  const double factor = o.op == "allreduce" ? 2.0 * (p - 1) / p : (p - 1) / p;
  for (Row& row : rows) {
    row.bytes = static_cast<double>(row.count) * sizeof(float);
    row.algbw = row.time_us > 0 ? row.bytes / row.time_us / 1e3 : 0.0;
    row.busbw = row.algbw * factor;
  }
  return rows;
}

std::string Num(std::optional<double> v) {
  return v.has_value() ? absl::StrFormat("%.9g", *v) : "null";
}

std::optional<double> OverBeff(double busbw_gbps, std::optional<double> b_eff) {
  if (!b_eff.has_value() || *b_eff <= 0) return std::nullopt;
  return busbw_gbps * 1e9 * 8 / *b_eff;
}

void PrintTable(const Options& o, const std::vector<Row>& rows, std::optional<double> b_eff) {
  absl::PrintF("# %s, np %d, ucx_tls %s, %s, iters %d, warmup %d", o.op, o.np, o.ucx_tls,
               !o.cluster.empty() ? absl::StrFormat("cluster %s (%.4g bit/s)", o.cluster, o.rate)
               : o.rate > 0       ? absl::StrFormat("emulated links of %.4g bit/s", o.rate)
                                  : std::string("loopback"),
               o.iters, o.warmup);
  if (b_eff) {
    absl::PrintF(", B_eff %.4g bit/s (%s)", *b_eff,
                 o.b_eff > 0 ? "given" : "iperf3 node 0 -> 1");
  }
  absl::PrintF("\n%12s %12s %12s %10s %10s %8s", "size", "count", "time_us", "algbw", "busbw",
               "#wrong");
  if (b_eff) absl::PrintF(" %12s %12s", "busbw/B_eff", "B_eff");
  absl::PrintF("\n%12s %12s %12s %10s %10s %8s", "(B)", "(elements)", "", "(GB/s)", "(GB/s)", "");
  if (b_eff) absl::PrintF(" %12s %12s", "", "(Gbit/s)");
  absl::PrintF("\n");
  for (const Row& r : rows) {
    absl::PrintF("%12.0f %12d %12.1f %10.4f %10.4f %8d", r.bytes, r.count, r.time_us, r.algbw,
                 r.busbw, r.wrong);
    if (b_eff) absl::PrintF(" %12.4f %12.4f", *OverBeff(r.busbw, b_eff), *b_eff / 1e9);
    absl::PrintF("\n");
  }
  std::fflush(stdout);
}

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

absl::Status WriteJson(const Options& o, const std::vector<Row>& rows,
                       std::optional<double> b_eff) {
  std::string out = "{\n  \"env\": {";
  absl::StrAppendFormat(&out,
                        "\"np\": %d, \"op\": %s, \"tls\": %s, \"rate\": %s, \"b_eff\": %s, "
                        "\"iters\": %d, \"warmup\": %d, \"chunk_bytes\": %d, "
                        "\"inflight\": %d, \"idle_sleep_us\": %d, \"cluster\": %s},\n"
                        "  \"rows\": [",
                        o.np, JsonQuote(o.op), JsonQuote(o.ucx_tls), Num(o.rate), Num(b_eff),
                        o.iters, o.warmup, o.chunk_bytes, o.inflight, o.idle_sleep_us,
                        o.cluster.empty() ? std::string("null") : JsonQuote(o.cluster));
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    absl::StrAppendFormat(&out,
                          "%s\n    {\"bytes\": %.0f, \"count\": %d, \"time_us\": %s, "
                          "\"algbw_gbps\": %s, \"busbw_gbps\": %s, \"wrong\": %d, "
                          "\"busbw_over_b_eff\": %s}",
                          i == 0 ? "" : ",", r.bytes, r.count, Num(r.time_us), Num(r.algbw),
                          Num(r.busbw), r.wrong, Num(OverBeff(r.busbw, b_eff)));
  }
  out += "\n  ]\n}\n";
  std::FILE* f = std::fopen(o.json.c_str(), "w");
  if (f == nullptr) return absl::InternalError(absl::StrFormat("cannot write '%s'", o.json));
  bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return absl::InternalError(absl::StrFormat("error writing '%s'", o.json));
  return absl::OkStatus();
}

// A fresh directory for the rendezvous files, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string path = (std::filesystem::temp_directory_path() / "gravac-cbench-XXXXXX").string();
    if (mkdtemp(path.data()) != nullptr) path_ = path;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// 0: every element right; 1: an error or a wrong element.
absl::StatusOr<int> Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(Settings settings,
                   Settings::Parse(kSettings, absl::Span<const char* const>(argv + 1, argc - 1),
                                   ProcessEnvironment()));
  if (settings.help_requested()) {
    std::fputs(Settings::Help(kSettings, "gravac-collectives-bench").c_str(), stdout);
    return 0;
  }
  ASSIGN_OR_RETURN(Options o, ReadOptions(settings));
  std::unique_ptr<netemu::Cluster> cluster;
  std::optional<double> b_eff;
  if (!o.cluster.empty()) {
    ASSIGN_OR_RETURN(cluster, netemu::Cluster::Attach(o.cluster));  // not owned: left in place
    if (cluster->size() < o.np) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--cluster %s has %d nodes, fewer than --np %d", o.cluster, cluster->size(), o.np));
    }
  } else if (o.rate > 0) {
    ASSIGN_OR_RETURN(cluster, netemu::Cluster::Create(o.np, {.rate_bits_per_s = o.rate},
                                                      std::string("gvcbench")));
  }
  if (o.b_eff > 0) {
    b_eff = o.b_eff;
  } else if (cluster != nullptr) {
    ASSIGN_OR_RETURN(b_eff, cluster->MeasureRateIperf3(0, 1, absl::Seconds(3)));
  }
  TempDir dir;
  if (dir.path().empty()) return absl::InternalError("cannot make a temporary directory");
  ASSIGN_OR_RETURN(std::vector<RankOutput> outputs, RunRanks(o, dir.path(), cluster.get()));
  ASSIGN_OR_RETURN(std::vector<Row> rows, MakeRows(o, outputs));
  PrintTable(o, rows, b_eff);
  if (!o.json.empty()) RETURN_IF_ERROR(WriteJson(o, rows, b_eff));
  int64_t wrong = 0;
  for (const Row& r : rows) wrong += r.wrong;
  if (wrong > 0) {
    std::fprintf(stderr, "gravac-collectives-bench: %lld wrong elements\n",
                 static_cast<long long>(wrong));
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gravac::bench

int main(int argc, char** argv) {
  absl::StatusOr<int> code = gravac::bench::Run(argc, argv);
  if (!code.ok()) {
    std::fprintf(stderr, "gravac-collectives-bench: %s\n", code.status().ToString().c_str());
    return 1;
  }
  return *code;
}
