// The job settings: every setting of a job's compression and GraVAC policy, declared once with its
// flag name, environment variable, default and help. gravac-controller parses them (its own table
// is its server settings followed by these), gravacrun forwards every one of them that is given
// on its command line to gravac-controller, and the typed defaults below are the defaults of
// policy::PolicyConfig and of JobConfig / JobDecision (core/job_types.h). A new job setting is
// one row here (plus its typed default, and its parsing in controller/controller_settings.cc);
// core_job_settings_test checks that each row's default text is its typed default.
//
// Thread-safety: constants.
#ifndef GRAVAC_CORE_JOB_SETTINGS_H_
#define GRAVAC_CORE_JOB_SETTINGS_H_

#include <cstdint>
#include <string_view>

#include "absl/types/span.h"
#include "core/settings.h"

namespace gravac {

// The typed defaults of the job settings (GRAVAC.md "Parameters", the reference's values).
namespace job_defaults {
inline constexpr std::string_view kCompressor = "topk";
inline constexpr std::string_view kSparseValues = "fp32";
inline constexpr double kThetaMin = 10.0;
inline constexpr double kThetaMax = 10000.0;
inline constexpr double kEpsilon = 0.75;
inline constexpr double kOmega = 0.05;
inline constexpr std::string_view kPolicy = "geometric";
inline constexpr double kScale = 2.0;
inline constexpr int kWindow = 25;
inline constexpr double kAlpha = 0.05;
inline constexpr int64_t kEvalSteps = 500;
inline constexpr int kMinDwell = 25;  // not the reference's: it has no dwell (0)
// Not the reference's either (it has ε alone, 0): θ_c is used only while gain_c >= this share of
// gain_min, which error feedback cannot inflate the way it inflates gain_c against ε.
inline constexpr double kMinRelativeGain = 0.6;
inline constexpr std::string_view kNormMode = "sum_layer_l2";
inline constexpr uint64_t kJobSeed = 0;
}  // namespace job_defaults

// The job settings table, in help order.
inline constexpr SettingSpec kJobSettings[] = {
    {"compressor", "GRAVAC_COMPRESSOR", "topk", "topk | dgc | redsync | randomk | none",
     SettingType::kString},
    {"sparse_values", "GRAVAC_SPARSE_VALUES", "fp32",
     "wire precision of sparse values: fp32 | fp16 | bf16 (2-byte values; compressor none ignores "
     "it)",
     SettingType::kString},
    {"theta_min", "GRAVAC_THETA_MIN", "10", "least compression factor", SettingType::kDouble},
    {"theta_max", "GRAVAC_THETA_MAX", "10000", "most compression factor", SettingType::kDouble},
    {"epsilon", "GRAVAC_EPSILON", "0.75", "least acceptable compression gain",
     SettingType::kDouble},
    {"omega", "GRAVAC_OMEGA", "0.05", "search stops when the two best CT means differ less",
     SettingType::kDouble},
    {"policy", "GRAVAC_POLICY", "geometric", "candidate scaling: geometric | exponential",
     SettingType::kString},
    {"scale", "GRAVAC_SCALE", "2", "geometric scaling factor s", SettingType::kDouble},
    {"window", "GRAVAC_WINDOW", "25", "tracker window and warm-up, in steps", SettingType::kInt},
    {"alpha", "GRAVAC_ALPHA", "0.05", "tracker smoothing", SettingType::kDouble},
    {"eval_steps", "GRAVAC_EVAL_STEPS", "500", "steps per candidate", SettingType::kInt},
    {"min_dwell", "GRAVAC_MIN_DWELL", "25",
     "steps a theta the gains chose is held before they may change it (0: the paper's per-step "
     "choice)",
     SettingType::kInt},
    {"min_relative_gain", "GRAVAC_MIN_RELATIVE_GAIN", "0.6",
     "least gain_c / gain_min for theta_c to be used: the candidate keeps at least this share of "
     "what theta_min keeps (0: the paper's epsilon alone)",
     SettingType::kDouble},
    {"norm_mode", "GRAVAC_NORM_MODE", "sum_layer_l2", "sum_layer_l2 | global_squared_l2",
     SettingType::kString},
    {"job_seed", "GRAVAC_JOB_SEED", "0", "seed of randomised compressors", SettingType::kInt},
    {"decision_delay", "GRAVAC_DECISION_DELAY", "",
     "test hook: node:ms[,node:ms] delays decisions pushed to those nodes", SettingType::kString},
};

inline absl::Span<const SettingSpec> JobSettings() { return kJobSettings; }

}  // namespace gravac

#endif  // GRAVAC_CORE_JOB_SETTINGS_H_
