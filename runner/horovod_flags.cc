#include "runner/horovod_flags.h"

#include <cmath>
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
constexpr char kNoElastic[] =
    "not part of gravac's elastic training yet (--min-np / --max-np are; docs/ELASTIC.md)";
constexpr HorovodFlag kFlags[] = {
    {"num_proc", true, Kind::kMap, "np"},
    {"start_timeout", true, Kind::kMap, "start_timeout_s"},
    {"network_interface", true, Kind::kMap, "ucx_net_devices"},
    {"network_interfaces", true, Kind::kMap, "ucx_net_devices"},
    {"stall_check_warning_time_seconds", true, Kind::kMap, "stall_warning_s"},
    {"fusion_threshold_mb", true, Kind::kSpecial, ""},
    {"log_level", true, Kind::kSpecial, ""},
    {"no_stall_check", false, Kind::kSpecial, ""},
    {"H", true, Kind::kMap, "hosts"},
    {"p", true, Kind::kMap, "ssh_port"},
    {"i", true, Kind::kMap, "ssh_identity_file"},
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
    {"min_np", true, Kind::kMap, "min_np"},
    {"max_np", true, Kind::kMap, "max_np"},
    {"slots_per_host", true, Kind::kMap, "slots"},
    {"host_discovery_script", true, Kind::kMap, "host_discovery_script"},
    {"reset_limit", true, Kind::kMap, "reset_limit"},
    {"blacklist_cooldown_range", true, Kind::kRefuse, kNoElastic},
    {"elastic_timeout", true, Kind::kMap, "elastic_timeout_s"},
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

absl::StatusOr<HorovodTranslation> TranslateHorovodArgs(absl::Span<const char* const> args) {
  HorovodTranslation out;
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
          out.forward.push_back(var);
        }
        break;
    }
  }
  for (; i < args.size(); ++i) out.args.emplace_back(args[i]);

  return out;
}

}  // namespace gravac::runner
