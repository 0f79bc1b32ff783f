#include "controller/ctl/status_format.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"

namespace gravac::ctl {
namespace {

// Left-aligned columns, two spaces apart.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string Theta(double theta) {
  return theta == 1.0 ? "1 (dense)" : absl::StrFormat("%g", theta);
}

std::string NormModeName(gravac::v1::NormMode mode) {
  switch (mode) {
    case gravac::v1::NORM_MODE_GLOBAL_SQUARED_L2:
      return "global_squared_l2";
    case gravac::v1::NORM_MODE_SUM_LAYER_L2:
      return "sum_layer_l2";
    default:
      return "unspecified";
  }
}

}  // namespace

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = bytes;
  while (std::abs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f B", v) : absl::StrFormat("%.1f %s", v, units[u]);
}

std::string FormatStatusTable(const gravac::v1::JobStatus& s) {
  std::string out;
  const gravac::v1::JobConfig& job = s.job();
  if (!s.job_id().name().empty()) {
    out += absl::StrFormat("name:       %s, run %s, %s\n", s.job_id().name(),
                           s.job_id().run_id().empty() ? "-" : s.job_id().run_id(), s.state());
  }
  if (!s.failure().empty()) out += absl::StrFormat("failure:    %s\n", s.failure());
  out += absl::StrFormat("job:        %s, %d of %d nodes, world size %d\n",
                         s.assembled() ? "assembled" : "assembling", s.joined_nodes(),
                         s.expected_nodes(), s.world_size());
  // A controller from before sparse_values sent fp32 values and leaves the field empty.
  out += absl::StrFormat(
      "compressor: %s, sparse values %s, theta in [%g, %g], norm %s, seed %d\n", job.compressor(),
      job.sparse_values().empty() ? "fp32" : job.sparse_values(), job.theta_min(), job.theta_max(),
      NormModeName(job.norm_mode()), job.job_seed());
  const gravac::v1::Decision& d = s.decision();
  out += absl::StrFormat("decision:   epoch %d from step %d: theta %s, theta_c %g\n", d.epoch(),
                         d.first_step(), Theta(d.theta()), d.theta_candidate());
  out += absl::StrFormat("search:     phase %s, %s\n", d.phase(),
                         d.searching() ? "searching" : "done (theta_c fixed)");
  out += absl::StrFormat("gains:      gain_min %.4f, gain_c %.4f\n", d.gain_min(), d.gain_c());
  out +=
      absl::StrFormat("steps:      %d observed, last step %d, %d incomplete, %d refused\n",
                      s.steps_observed(), s.last_step(), s.steps_incomplete(), s.steps_rejected());
  out += absl::StrFormat(
      "throughput: %.1f samples/s at the last step (step time %.4f s), "
      "%.1f samples/s mean\n",
      s.throughput(), s.last_step_seconds(), s.mean_throughput());
  const double saved_pct = s.bytes_dense() > 0 ? 100.0 * static_cast<double>(s.bytes_saved()) /
                                                     static_cast<double>(s.bytes_dense())
                                               : 0.0;
  out += absl::StrFormat("bytes:      sent %s of %s dense, saved %s (%.1f%%)\n",
                         HumanBytes(static_cast<double>(s.bytes_sent())),
                         HumanBytes(static_cast<double>(s.bytes_dense())),
                         HumanBytes(static_cast<double>(s.bytes_saved())), saved_pct);
  if (s.epoch_base() > 0) {
    out +=
        absl::StrFormat("restart:    this controller continued after epoch %d\n", s.epoch_base());
  }
  out += "\n";
  std::vector<std::vector<std::string>> nodes = {
      {"NODE", "NAME", "RANKS", "WATCHING", "LAST STEP", "STATS DROPPED"}};
  for (const gravac::v1::NodeStatus& n : s.nodes()) {
    const gravac::v1::NodeInfo& i = n.info();
    nodes.push_back({i.node_rank() < 0 ? "-" : absl::StrFormat("%d", i.node_rank()), i.node_name(),
                     absl::StrFormat("%d-%d", i.first_rank(), i.first_rank() + i.local_count() - 1),
                     n.watching() ? "yes" : "no", absl::StrFormat("%d", n.last_step()),
                     absl::StrFormat("%d", n.stats_dropped())});
  }
  out += Table(nodes);
  if (s.throughput_table_size() > 0) {
    out += "\n";
    std::vector<std::vector<std::string>> ct = {
        {"THETA", "CT MEAN (samples/s x gain)", "STEPS", "PERIOD"}};
    for (const gravac::v1::ThroughputEntry& e : s.throughput_table()) {
      ct.push_back({Theta(e.theta()), absl::StrFormat("%.2f", e.mean()),
                    absl::StrFormat("%d", e.samples()), e.period_complete() ? "complete" : "open"});
    }
    out += Table(ct);
  }
  return out;
}

std::string FormatJobsTable(const gravac::v1::JobList& list) {
  std::vector<std::vector<std::string>> rows = {
      {"JOB", "RUN", "STATE", "NODES", "RANKS", "THETA", "PHASE", "STEPS", "STARTED (UTC)"}};
  for (const gravac::v1::JobSummary& j : list.jobs()) {
    rows.push_back({j.job_id().name(), j.job_id().run_id().empty() ? "-" : j.job_id().run_id(),
                    j.state(), absl::StrFormat("%d/%d", j.joined_nodes(), j.expected_nodes()),
                    absl::StrFormat("%d", j.world_size()), Theta(j.decision().theta()),
                    j.decision().phase(), absl::StrFormat("%d", j.steps_observed()),
                    absl::FormatTime("%Y-%m-%d %H:%M:%S",
                                     absl::FromUnixSeconds(static_cast<int64_t>(j.started_unix_s())),
                                     absl::UTCTimeZone())});
  }
  std::string out = Table(rows);
  for (const gravac::v1::JobSummary& j : list.jobs()) {
    if (!j.failure().empty()) out += absl::StrFormat("\n%s\n", j.failure());
  }
  return out;
}

absl::StatusOr<std::string> FormatJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  auto s = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!s.ok()) return absl::InternalError(std::string("status to JSON: ") + s.ToString());
  return out;
}

absl::StatusOr<std::string> FormatStatusJson(const gravac::v1::JobStatus& status) {
  return FormatJson(status);
}

}  // namespace gravac::ctl
