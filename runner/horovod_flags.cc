#include "runner/horovod_flags.h"

#include <cmath>
#include <fstream>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/absl_compat.h"
#include "core/status.h"
#include "runner/options.h"

namespace gravac::runner {
namespace {

enum class Kind {
  kMap,     // --<text>=<value>: the same setting under gravacrun's name
  kNote,    // accepted; text says why gravac needs nothing for it
  kRefuse,  // refused; text says why and what to use instead
  kSpecial  // handled in code (values that change unit or form)
};

struct HorovodFlag {
  std::string_view name;  // without dashes, '-' written '_'
  bool takes_value;
  Kind kind;
  std::string_view text;
};

constexpr char kNoCycleMarks[] =
    "gravac's timeline traces each tensor's negotiation, not the negotiation cycles; use "
    "--timeline-filename alone (per-group records of every node: --step_log FILE)";
constexpr char kNoAutotune[] =
    "gravac has no autotuner (GraVAC chooses the compression factor itself); set "
    "--fusion_threshold_bytes and --cycle_time_ms directly";
constexpr char kNoElastic[] = "elastic training is not part of gravac; run a fixed -np";
constexpr char kNoSsh[] =
    "gravacrun starts jobs on this machine only; on other hosts start gravacd there and run "
    "`gravacrun --node I --daemon_socket PATH` (docs/OPERATIONS.md)";

constexpr HorovodFlag kFlags[] = {
    {"num_proc", true, Kind::kMap, "np"},
    {"start_timeout", true, Kind::kMap, "start_timeout_s"},
    {"network_interface", true, Kind::kMap, "ucx_net_devices"},
    {"network_interfaces", true, Kind::kMap, "ucx_net_devices"},
    {"stall_check_warning_time_seconds", true, Kind::kMap, "stall_warning_s"},
    {"fusion_threshold_mb", true, Kind::kSpecial, ""},
    {"log_level", true, Kind::kSpecial, ""},
    {"no_stall_check", false, Kind::kSpecial, ""},
    {"H", true, Kind::kSpecial, ""},
    {"hosts", true, Kind::kSpecial, ""},
    {"hostfile", true, Kind::kSpecial, ""},
    {"x", true, Kind::kSpecial, ""},
    {"gloo", false, Kind::kNote, "gravac moves tensors with its own daemons (UCX), not Gloo"},
    {"mpi", false, Kind::kNote, "gravacrun starts the processes itself, without MPI"},
    {"tcp", false, Kind::kNote, "the data plane is UCX; --ucx_tls tcp forces TCP"},
    {"hierarchical_allreduce", false, Kind::kNote,
     "gravac always reduces within a node before reducing across nodes"},
    {"hierarchical_allgather", false, Kind::kNote,
     "gravac always gathers within a node before gathering across nodes"},
    {"disable_cache", false, Kind::kNote, "gravac keeps no response cache"},
    {"cache_capacity", true, Kind::kNote, "gravac keeps no response cache"},
    {"log_hide_timestamp", false, Kind::kNote, "gravac's log lines always carry their time"},
    {"log_without_timestamp", false, Kind::kNote, "gravac's log lines always carry their time"},
    {"timeline_filename", true, Kind::kMap, "timeline_filename"},
    {"timeline_mark_cycles", false, Kind::kRefuse, kNoCycleMarks},
    {"autotune", false, Kind::kRefuse, kNoAutotune},
    {"autotune_log_file", true, Kind::kRefuse, kNoAutotune},
    {"autotune_warmup_samples", true, Kind::kRefuse, kNoAutotune},
    {"autotune_steps_per_sample", true, Kind::kRefuse, kNoAutotune},
    {"autotune_bayes_opt_max_samples", true, Kind::kRefuse, kNoAutotune},
    {"autotune_gaussian_process_noise", true, Kind::kRefuse, kNoAutotune},
    {"min_np", true, Kind::kRefuse, kNoElastic},
    {"max_np", true, Kind::kRefuse, kNoElastic},
    {"slots_per_host", true, Kind::kRefuse, kNoElastic},
    {"host_discovery_script", true, Kind::kRefuse, kNoElastic},
    {"reset_limit", true, Kind::kRefuse, kNoElastic},
    {"blacklist_cooldown_range", true, Kind::kRefuse, kNoElastic},
    {"elastic_timeout", true, Kind::kRefuse, kNoElastic},
    {"p", true, Kind::kRefuse, kNoSsh},
    {"ssh_port", true, Kind::kRefuse, kNoSsh},
    {"i", true, Kind::kRefuse, kNoSsh},
    {"ssh_identity_file", true, Kind::kRefuse, kNoSsh},
    {"output_filename", true, Kind::kRefuse,
     "gravacrun prints every rank's output with a [rank r] prefix; redirect gravacrun's output"},
    {"config_file", true, Kind::kRefuse, "write the settings as gravacrun flags"},
    {"mpi_args", true, Kind::kRefuse, "gravacrun does not run mpirun"},
    {"binding_args", true, Kind::kRefuse, "gravacrun does not run mpirun; bind with taskset"},
    {"jsrun", false, Kind::kRefuse, "gravacrun does not run jsrun"},
    {"stall_check_shutdown_time_seconds", true, Kind::kRefuse,
     "gravac fails a stalled collective after --op_timeout_s of data-plane silence instead"},
    {"num_nccl_streams", true, Kind::kRefuse, "gravac's GPU path has its own stream"},
    {"thread_affinity", true, Kind::kRefuse, "pin the workers with taskset instead"},
    {"gloo_timeout_seconds", true, Kind::kRefuse, "use --start_timeout_s"},
    {"cb", false, Kind::kRefuse, "gravac has no build-check mode; gravacrun --help lists it all"},
    {"check_build", false, Kind::kRefuse,
     "gravac has no build-check mode; gravacrun --help lists it all"},
};

const HorovodFlag* FindHorovodFlag(std::string_view name) {
  for (const HorovodFlag& f : kFlags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const SettingSpec* FindRunnerSetting(std::string_view name) {
  for (const SettingSpec& s : RunnerSettings()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool IsThisMachine(std::string_view host, std::string_view hostname) {
  return host == "localhost" || host == "127.0.0.1" || host == "::1" ||
         (!hostname.empty() && host == hostname);
}

struct HostSlots {
  std::string host;
  int slots = 1;
};

absl::Status ParseSlots(std::string_view text, std::string_view host, std::string_view where,
                        int* slots) {
  if (!absl::SimpleAtoi(AsAbsl(text), slots) || *slots < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: host '%s' has slots '%s', not a positive number", where, host, text));
  }
  return absl::OkStatus();
}

// "h1:4,h2:4" (Horovod's -H; slots default 1).
absl::StatusOr<std::vector<HostSlots>> ParseHostList(std::string_view text) {
  std::vector<HostSlots> hosts;
  for (absl::string_view piece : absl::StrSplit(AsAbsl(text), ',', absl::SkipWhitespace())) {
    std::string_view entry(piece.data(), piece.size());
    HostSlots h;
    size_t colon = entry.rfind(':');
    if (colon != std::string_view::npos && entry.find(':') == colon) {
      h.host = std::string(entry.substr(0, colon));
      RETURN_IF_ERROR(ParseSlots(entry.substr(colon + 1), h.host, "-H", &h.slots));
    } else {
      h.host = std::string(entry);
    }
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) return absl::InvalidArgumentError("-H: no hosts in '" + std::string(text) +
                                                       "'");
  return hosts;
}

// Horovod's "host:slots" or Open MPI's "host slots=N" lines; '#' comments.
absl::StatusOr<std::vector<HostSlots>> ParseHostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError("--hostfile: cannot read '" + path + "'");
  std::vector<HostSlots> hosts;
  std::string line;
  while (std::getline(in, line)) {
    std::string_view text = line;
    size_t hash = text.find('#');
    if (hash != std::string_view::npos) text = text.substr(0, hash);
    std::vector<std::string_view> words;
    for (absl::string_view w :
         absl::StrSplit(AsAbsl(text), absl::ByAnyChar(" \t"), absl::SkipWhitespace())) {
      words.emplace_back(w.data(), w.size());
    }
    if (words.empty()) continue;
    HostSlots h;
    std::string_view first = words[0];
    size_t colon = first.rfind(':');
    if (colon != std::string_view::npos && first.find(':') == colon) {
      h.host = std::string(first.substr(0, colon));
      RETURN_IF_ERROR(ParseSlots(first.substr(colon + 1), h.host, "--hostfile", &h.slots));
    } else {
      h.host = std::string(first);
    }
    for (size_t i = 1; i < words.size(); ++i) {
      std::string_view w = words[i];
      if (w.starts_with("slots=")) {
        RETURN_IF_ERROR(ParseSlots(w.substr(6), h.host, "--hostfile", &h.slots));
      } else if (!w.starts_with("max_slots=")) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--hostfile %s: '%s' after host '%s' is not slots=N", path, words[i], h.host));
      }
    }
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) return absl::InvalidArgumentError("--hostfile: no hosts in '" + path + "'");
  return hosts;
}

absl::StatusOr<std::string> LogLevel(std::string_view value) {
  std::string level = absl::AsciiStrToLower(AsAbsl(value));
  if (level == "trace") level = "debug";
  if (level == "fatal" || level == "critical") level = "error";
  if (level != "debug" && level != "info" && level != "warning" && level != "error") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--log-level: '%s' is not TRACE, DEBUG, INFO, WARNING, ERROR or FATAL", value));
  }
  return level;
}

}  // namespace

absl::StatusOr<HorovodTranslation> TranslateHorovodArgs(absl::Span<const char* const> args,
                                                        std::string_view hostname) {
  HorovodTranslation out;
  std::optional<std::vector<HostSlots>> hosts;
  std::string hosts_flag;
  std::optional<int> np;
  bool nodes_given = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--") break;
    if (arg.empty() || arg[0] != '-' || arg == "-") {  // horovodrun's command, without "--"
      out.args.push_back("--");
      break;
    }
    std::string_view body = arg.substr(arg.starts_with("--") ? 2 : 1);
    std::optional<std::string> inline_value;
    if (size_t eq = body.find('='); eq != std::string_view::npos) {
      inline_value = std::string(body.substr(eq + 1));
      body = body.substr(0, eq);
    }
    std::string name(body);
    for (char& c : name) {
      if (c == '-') c = '_';
    }
    const HorovodFlag* hf = FindHorovodFlag(name);
    const SettingSpec* own = FindRunnerSetting(name);
    if (hf == nullptr && own == nullptr && name != "help" && name != "h") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown flag '%s': neither a gravacrun flag nor a horovodrun flag gravacrun maps; "
          "see gravacrun --help and docs/API.md (horovodrun flags)",
          arg));
    }
    if (hf == nullptr) {  // gravacrun's own flag: verbatim, with its value
      if (name == "np") {
        std::string value = inline_value ? *inline_value : (i + 1 < args.size() ? args[i + 1] : "");
        int n = 0;
        if (absl::SimpleAtoi(AsAbsl(value), &n)) np = n;
      }
      nodes_given |= name == "nodes";
      out.args.emplace_back(arg);
      if (own != nullptr && own->type != SettingType::kBool && !inline_value &&
          i + 1 < args.size()) {
        out.args.emplace_back(args[++i]);
      }
      continue;
    }
    std::string value;
    if (hf->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrFormat("%s needs a value", arg));
      }
    }
    switch (hf->kind) {
      case Kind::kMap:
        if (hf->text == "np") {
          int n = 0;
          if (absl::SimpleAtoi(AsAbsl(value), &n)) np = n;
        }
        out.args.push_back(absl::StrFormat("--%s=%s", hf->text, value));
        break;
      case Kind::kNote:
        out.notes.push_back(absl::StrFormat("%s: accepted, nothing to do (%s)", arg, hf->text));
        break;
      case Kind::kRefuse:
        return absl::InvalidArgumentError(
            absl::StrFormat("horovodrun flag %s is not supported: %s", arg, hf->text));
      case Kind::kSpecial:
        if (name == "fusion_threshold_mb") {
          double mb = 0;
          if (!absl::SimpleAtod(AsAbsl(value), &mb) || !(mb >= 0) || !std::isfinite(mb)) {
            return absl::InvalidArgumentError(absl::StrFormat(
                "%s: '%s' is not a size in MiB (a number >= 0)", arg, value));
          }
          out.args.push_back(absl::StrFormat("--fusion_threshold_bytes=%d",
                                             static_cast<int64_t>(std::llround(mb * 1048576.0))));
        } else if (name == "log_level") {
          ASSIGN_OR_RETURN(std::string level, LogLevel(value));
          out.args.push_back("--log_level=" + level);
        } else if (name == "no_stall_check") {
          out.args.push_back("--stall_warning_s=1e9");
        } else if (name == "x") {
          size_t eq = value.find('=');
          std::string var = value.substr(0, eq);
          if (var.empty()) {
            return absl::InvalidArgumentError(
                absl::StrFormat("-x '%s': expected NAME or NAME=VALUE", value));
          }
          if (eq != std::string::npos) out.env.emplace_back(var, value.substr(eq + 1));
        } else {  // H, hosts, hostfile
          if (hosts.has_value()) {
            return absl::InvalidArgumentError(absl::StrFormat(
                "%s: hosts were already given by %s; give -H or --hostfile once", arg,
                hosts_flag));
          }
          if (name == "hostfile") {
            ASSIGN_OR_RETURN(hosts, ParseHostfile(value));
          } else {
            ASSIGN_OR_RETURN(hosts, ParseHostList(value));
          }
          hosts_flag = std::string(arg);
        }
        break;
    }
  }
  for (; i < args.size(); ++i) out.args.emplace_back(args[i]);

  if (hosts.has_value()) {
    int slots = 0;
    for (const HostSlots& h : *hosts) {
      if (!IsThisMachine(h.host, hostname)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: host '%s' is not this machine (%s); %s", hosts_flag, h.host, hostname, kNoSsh));
      }
      slots += h.slots;
    }
    if (nodes_given) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s and --nodes both say how many nodes there are; give one of them", hosts_flag));
    }
    const int ranks = np.value_or(slots);
    if (ranks > slots) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "-np %d is more than the %d slots of %s", ranks, slots, hosts_flag));
    }
    // Horovod fills the hosts in order; gravacrun spreads ranks evenly over its nodes, so the
    // two layouts must agree.
    std::vector<int> filled;
    int left = ranks;
    for (const HostSlots& h : *hosts) {
      if (left == 0) break;
      filled.push_back(std::min(left, h.slots));
      left -= filled.back();
    }
    std::vector<NodeRanks> layout = RankLayout(ranks, static_cast<int>(filled.size()));
    for (size_t n = 0; n < filled.size(); ++n) {
      if (layout[n].local_size != filled[n]) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s puts %d ranks on host %d but gravacrun spreads %d ranks evenly over %d nodes "
            "(%d on the first); list hosts with equal slots",
            hosts_flag, filled[n], n, ranks, filled.size(), layout[0].local_size));
      }
    }
    std::vector<std::string> extra;
    if (!np.has_value()) extra.push_back(absl::StrFormat("--np=%d", ranks));
    extra.push_back(absl::StrFormat("--nodes=%d", static_cast<int>(filled.size())));
    out.args.insert(out.args.begin(), extra.begin(), extra.end());
  }
  return out;
}

}  // namespace gravac::runner
