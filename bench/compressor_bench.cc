// gravac-compressor-bench: the selection cost of every gravac compressor in memcpy units
// (BENCHMARKS.md, ratio 3), side by side with torch.topk measured in the same run by the peer
// bench/torch_topk.py. A benchmark prints numbers; it fails only on a wrong result, never on a
// timing. bench/README.md explains the columns.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_data.h"
#include "bench/peer.h"
#include "core/logging.h"
#include "core/settings.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/compressor.h"

#ifndef GRAVAC_BENCH_TORCH_SCRIPT
#define GRAVAC_BENCH_TORCH_SCRIPT "bench/torch_topk.py"
#endif

namespace gravac::bench {
namespace {

constexpr SettingSpec kSettings[] = {
    {"elements", "", "67108864", "fp32 elements per tensor (64M = 256 MB)", SettingType::kInt},
    {"densities", "", "0.001,0.01,0.1", "comma-separated k/n for the sparse compressors"},
    {"compressors", "", "all", "comma-separated compressor names, or 'all'"},
    {"threads", "", "2", "lanes of the ThreadPool shared by compressors and memcpy",
     SettingType::kInt},
    {"reps", "", "5", "timed repetitions per row (the median is reported)", SettingType::kInt},
    {"warmup", "", "1", "untimed repetitions before the timed ones", SettingType::kInt},
    {"distribution", "", "normal",
     "data distribution: normal, laplace, or rows (normal in rows of 1024, row r scaled by "
     "2^(15 - r mod 16), like a weight gradient; needs --torch none)"},
    {"seed", "", "1", "seed of the data (and of randomk's job seed)", SettingType::kInt},
    {"json", "", "", "write every row and the environment as JSON to this file"},
    {"torch", "", "/usr/bin/python3", "python running the torch.topk peer; 'none' to skip it"},
    {"torch_script", "", GRAVAC_BENCH_TORCH_SCRIPT, "path of bench/torch_topk.py"},
};

constexpr int64_t kRowLength = 1024;  // --distribution rows

struct Options {
  int64_t n = 0;
  std::vector<double> densities;
  std::vector<std::string> compressors;
  int threads = 0;
  int reps = 0;
  int warmup = 0;
  std::string distribution_name;
  Distribution distribution = Distribution::kNormal;
  bool row_scaled = false;  // --distribution rows
  uint64_t seed = 0;
  std::string json;
  std::string torch;
  std::string torch_script;
};

struct Row {
  std::string source = "gravac";  // "gravac" or "torch"
  std::string compressor;
  std::optional<double> density;  // unset for dense casts
  int64_t k = 0;
  int64_t kept = 0;
  double ms = 0.0;         // median compress (or torch.topk + gather) time
  double memcpy_ms = 0.0;  // median memcpy of the same bytes, interleaved with it
  uint64_t hash = 0;
  std::optional<double> torch_ms;            // torch.topk at the same density, for topk-like rows
  std::optional<double> torch_ratio_memcpy;  // torch.topk time / torch copy time, same rows
};

bool TopKLike(std::string_view name) {
  return name == "topk" || name == "dgc" || name == "redsync";
}

absl::StatusOr<Options> ReadOptions(const Settings& settings) {
  Options o;
  ASSIGN_OR_RETURN(o.n, settings.GetInt("elements"));
  if (o.n < 1 || o.n > 2147483647) return absl::InvalidArgumentError("--elements: 1 .. 2^31-1");
  ASSIGN_OR_RETURN(std::string densities, settings.GetString("densities"));
  for (absl::string_view d : absl::StrSplit(densities, ',', absl::SkipWhitespace())) {
    double density = 0;
    if (!absl::SimpleAtod(d, &density) || !(density > 0.0 && density <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrFormat("--densities: '%s' is not in (0, 1]", d));
    }
    o.densities.push_back(density);
  }
  ASSIGN_OR_RETURN(std::string compressors, settings.GetString("compressors"));
  if (compressors == "all") {
    o.compressors = kernels::CompressorNames();
  } else {
    o.compressors = absl::StrSplit(compressors, ',', absl::SkipWhitespace());
  }
  ASSIGN_OR_RETURN(int64_t threads, settings.GetInt("threads"));
  ASSIGN_OR_RETURN(int64_t reps, settings.GetInt("reps"));
  ASSIGN_OR_RETURN(int64_t warmup, settings.GetInt("warmup"));
  if (threads < 1 || threads > 1024 || reps < 1 || warmup < 0) {
    return absl::InvalidArgumentError("--threads and --reps must be >= 1, --warmup >= 0");
  }
  o.threads = static_cast<int>(threads);
  o.reps = static_cast<int>(reps);
  o.warmup = static_cast<int>(warmup);
  ASSIGN_OR_RETURN(o.distribution_name, settings.GetString("distribution"));
  o.row_scaled = o.distribution_name == "rows";
  ASSIGN_OR_RETURN(o.distribution,
                   o.row_scaled ? Distribution::kNormal : ParseDistribution(o.distribution_name));
  ASSIGN_OR_RETURN(int64_t seed, settings.GetInt("seed"));
  o.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(o.json, settings.GetString("json"));
  ASSIGN_OR_RETURN(o.torch, settings.GetString("torch"));
  if (o.row_scaled && o.torch != "none") {
    return absl::InvalidArgumentError("--distribution rows has no torch peer: add --torch none");
  }
  ASSIGN_OR_RETURN(o.torch_script, settings.GetString("torch_script"));
  return o;
}

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Times one compressor at one θ: warm-up, then `reps` rounds of (memcpy, compress). The first
// output is validated in full; every later one must hash the same (compressors are
// deterministic).
absl::Status Measure(const Options& o, kernels::Compressor& compressor, double theta,
                     absl::Span<const float> input, std::vector<float>& copy, ThreadPool& pool,
                     Row* row) {
  ASSIGN_OR_RETURN(OutputRules rules, RulesFor(compressor.name()));
  const kernels::CompressContext ctx{"bench", 0, o.seed};
  kernels::Compressed out;
  std::vector<double> compress_ms, memcpy_ms;
  for (int i = 0; i < o.warmup + o.reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    ParallelCopy(copy.data(), input.data(), o.n * sizeof(float), &pool);
    double copy_ms = MillisSince(start);
    start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(compressor.Compress(input, theta, ctx, &out));
    double ms = MillisSince(start);
    if (i >= o.warmup) {
      memcpy_ms.push_back(copy_ms);
      compress_ms.push_back(ms);
    }
    uint64_t hash = OutputHash(out);
    if (i == 0) {
      if (absl::Status s = ValidateOutput(input, out, rules, row->k, &pool); !s.ok()) {
        return absl::InternalError(absl::StrFormat("%s at k = %d: wrong output: %s",
                                                   compressor.name(), row->k, s.message()));
      }
      row->hash = hash;
      row->kept = out.count();
    } else if (hash != row->hash || out.count() != row->kept) {
      return absl::InternalError(absl::StrFormat(
          "%s at k = %d: repetition %d gave another output (hash %016x, %d kept) than the first "
          "(hash %016x, %d kept)",
          compressor.name(), row->k, i, hash, out.count(), row->hash, row->kept));
    }
  }
  row->ms = Median(compress_ms);
  row->memcpy_ms = Median(memcpy_ms);
  return absl::OkStatus();
}

absl::StatusOr<PeerResult> RunPeer(const Options& o) {
  std::vector<std::string> densities;
  for (double d : o.densities) densities.push_back(absl::StrFormat("%.17g", d));
  ASSIGN_OR_RETURN(
      std::string output,
      RunAndCapture({o.torch, o.torch_script, "--elements", absl::StrCat(o.n), "--densities",
                     absl::StrJoin(densities, ","), "--threads", absl::StrCat(o.threads), "--reps",
                     absl::StrCat(o.reps), "--warmup", absl::StrCat(o.warmup), "--distribution",
                     o.distribution_name, "--seed", absl::StrCat(o.seed)}));
  ASSIGN_OR_RETURN(PeerResult peer, ParsePeerOutput(output));
  if (peer.n != o.n || peer.topk.size() != o.densities.size()) {
    return absl::InternalError(
        absl::StrFormat("torch peer measured n = %d at %d densities, expected n = %d at %d", peer.n,
                        peer.topk.size(), o.n, o.densities.size()));
  }
  for (size_t i = 0; i < o.densities.size(); ++i) {
    int64_t k = kernels::KeepCount(o.n, 1.0 / o.densities[i]);
    if (peer.topk[i].density != o.densities[i] || peer.topk[i].k != k) {
      return absl::InternalError(
          absl::StrFormat("torch peer row %d has density %g, k = %d; "
                          "expected %g, k = %d",
                          i, peer.topk[i].density, peer.topk[i].k, o.densities[i], k));
    }
  }
  return peer;
}

std::string Num(std::optional<double> v) {
  return v.has_value() ? absl::StrFormat("%.9g", *v) : "null";
}

absl::Status WriteJson(const Options& o, const std::vector<Row>& rows, double memcpy_ms,
                       const std::optional<PeerResult>& peer) {
  std::string out = "{\n  \"env\": {";
  const double bytes = static_cast<double>(o.n) * sizeof(float);
  absl::StrAppendFormat(
      &out,
      "\"n\": %d, \"threads\": %d, \"hardware_threads\": %d, \"reps\": %d, \"warmup\": %d, "
      "\"distribution\": %s, \"seed\": %d, \"memcpy_ms\": %s, \"memcpy_gbps\": %s, "
      "\"torch_version\": %s, \"torch_memcpy_ms\": %s, \"torch_clone_ms\": %s},\n  \"rows\": [",
      o.n, o.threads, std::thread::hardware_concurrency(), o.reps, o.warmup,
      JsonQuote(o.distribution_name), o.seed, Num(memcpy_ms), Num(bytes / memcpy_ms / 1e6),
      peer ? JsonQuote(peer->torch_version) : "null",
      Num(peer ? std::optional(peer->memcpy_ms) : std::nullopt),
      Num(peer ? std::optional(peer->clone_ms) : std::nullopt));
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    absl::StrAppendFormat(
        &out,
        "%s\n    {\"source\": %s, \"compressor\": %s, \"density\": %s, \"k\": %d, \"kept\": %d, "
        "\"kept_over_k\": %s, \"median_ms\": %s, \"memcpy_ms\": %s, \"ratio_memcpy\": %s, "
        "\"gelem_per_s\": %s, \"ratio_torch_topk\": %s, \"ratio_torch_topk_memcpy_units\": %s, "
        "\"hash\": %s}",
        i == 0 ? "" : ",", JsonQuote(r.source), JsonQuote(r.compressor), Num(r.density), r.k,
        r.kept, Num(static_cast<double>(r.kept) / r.k), Num(r.ms), Num(r.memcpy_ms),
        Num(r.ms / r.memcpy_ms), Num(o.n / r.ms / 1e6),
        Num(r.torch_ms ? std::optional(r.ms / *r.torch_ms) : std::nullopt),
        Num(r.torch_ratio_memcpy ? std::optional(r.ms / r.memcpy_ms / *r.torch_ratio_memcpy)
                                 : std::nullopt),
        r.source == "gravac" ? absl::StrFormat("\"%016x\"", r.hash) : "null");
  }
  out += "\n  ]\n}\n";
  std::FILE* f = std::fopen(o.json.c_str(), "w");
  if (f == nullptr) return absl::InternalError(absl::StrFormat("cannot write '%s'", o.json));
  bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return absl::InternalError(absl::StrFormat("error writing '%s'", o.json));
  return absl::OkStatus();
}

void PrintTable(const Options& o, const std::vector<Row>& rows, double memcpy_ms,
                const std::optional<PeerResult>& peer) {
  const double bytes = static_cast<double>(o.n) * sizeof(float);
  absl::PrintF(
      "# lanes %d (hardware threads %d), n = %d (%.1f MiB fp32, %s), reps %d, "
      "memcpy %.3f ms = %.2f GB/s",
      o.threads, std::thread::hardware_concurrency(), o.n, bytes / (1 << 20), o.distribution_name,
      o.reps, memcpy_ms, bytes / memcpy_ms / 1e6);
  if (peer) {
    absl::PrintF(", torch %s copy_ %.3f ms, clone %.3f ms", peer->torch_version, peer->memcpy_ms,
                 peer->clone_ms);
  }
  absl::PrintF("\n%-11s %8s %10s %7s %10s %8s %9s %13s\n", "compressor", "k/n", "k", "kept/k",
               "median_ms", "Gelem/s", "x_memcpy", "x_torch.topk");
  for (const Row& r : rows) {
    std::string density = r.density ? absl::StrFormat("%g", *r.density) : "n/a";
    std::string vs_torch = r.torch_ms ? absl::StrFormat("%.2f", r.ms / *r.torch_ms) : "";
    absl::PrintF("%-11s %8s %10d %7.3f %10.3f %8.3f %9.2f %13s\n", r.compressor, density, r.k,
                 static_cast<double>(r.kept) / r.k, r.ms, o.n / r.ms / 1e6, r.ms / r.memcpy_ms,
                 vs_torch);
  }
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(
      Settings settings,
      Settings::Parse(kSettings, absl::MakeConstSpan(argv + 1, argc - 1), ProcessEnvironment()));
  if (settings.help_requested()) {
    absl::PrintF("%s", Settings::Help(kSettings, "gravac-compressor-bench"));
    return absl::OkStatus();
  }
  if (!settings.positional().empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unexpected argument '%s' (flags start with --; see --help)", settings.positional()[0]));
  }
  ASSIGN_OR_RETURN(Options o, ReadOptions(settings));
  Logger log("compressor_bench");
  ThreadPool pool(o.threads);
  std::vector<float> input = GenerateData(o.n, o.distribution, o.seed, &pool);
  if (o.row_scaled) {
    for (int64_t i = 0; i < o.n; ++i) input[i] = std::ldexp(input[i], 15 - (i / kRowLength) % 16);
  }
  std::vector<float> copy(o.n);
  ParallelCopy(copy.data(), input.data(), o.n * sizeof(float), &pool);  // touch its pages

  std::vector<Row> rows;
  for (const std::string& name : o.compressors) {
    ASSIGN_OR_RETURN(std::unique_ptr<kernels::Compressor> compressor,
                     kernels::MakeCompressor(name, {kernels::ValueType::kFloat32, &pool}));
    std::vector<std::optional<double>> densities(o.densities.begin(), o.densities.end());
    if (compressor->is_dense()) densities = {std::nullopt};
    for (std::optional<double> density : densities) {
      Row row;
      row.compressor = name;
      row.density = density;
      double theta = density ? 1.0 / *density : 2.0;
      row.k = density ? kernels::KeepCount(o.n, theta) : o.n;
      GRAVAC_LOG(log, kInfo, "%s at k/n = %s (k = %d)", name,
                 density ? absl::StrFormat("%g", *density) : "n/a", row.k);
      RETURN_IF_ERROR(Measure(o, *compressor, theta, input, copy, pool, &row));
      rows.push_back(row);
    }
  }
  std::vector<double> all_copies;
  for (const Row& r : rows) all_copies.push_back(r.memcpy_ms);
  const double memcpy_ms = Median(all_copies);

  std::optional<PeerResult> peer;
  if (o.torch != "none") {
    GRAVAC_LOG(log, kInfo, "running the torch.topk peer: %s %s", o.torch, o.torch_script);
    ASSIGN_OR_RETURN(peer, RunPeer(o));
    for (Row& r : rows) {
      for (const PeerTopK& t : peer->topk) {
        if (TopKLike(r.compressor) && r.density == t.density) {
          r.torch_ms = t.topk_ms;
          r.torch_ratio_memcpy = t.topk_ms / t.memcpy_ms;
        }
      }
    }
    for (const PeerTopK& t : peer->topk) {
      Row row;
      row.source = "torch";
      row.compressor = "torch.topk";
      row.density = t.density;
      row.k = row.kept = t.k;
      row.ms = t.topk_ms;
      row.memcpy_ms = t.memcpy_ms;
      rows.push_back(row);
    }
  }
  PrintTable(o, rows, memcpy_ms, peer);
  if (!o.json.empty()) RETURN_IF_ERROR(WriteJson(o, rows, memcpy_ms, peer));
  return absl::OkStatus();
}

}  // namespace
}  // namespace gravac::bench

int main(int argc, char** argv) {
  absl::Status status = gravac::bench::Run(argc, argv);
  if (!status.ok()) {
    std::fprintf(stderr, "gravac-compressor-bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
