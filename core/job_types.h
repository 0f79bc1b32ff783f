// The control plane's shared types: what gravac-controller and every gravacd of a job exchange
// (the job's compression settings, the policy's decisions, per-node step statistics). Both sides
// include this header; proto/job_convert.h converts them to and from the gravac.v1 messages.
//
// Thread-safety: plain values.
#ifndef GRAVAC_CORE_JOB_TYPES_H_
#define GRAVAC_CORE_JOB_TYPES_H_

#include <cstdint>
#include <string>

#include "core/job_settings.h"

namespace gravac {

// A decision of the controller (policy::Decision as the daemons see it).
struct JobDecision {
  int64_t epoch = 0;
  int64_t first_step = 0;
  double theta = job_defaults::kThetaMin;            // 1 = dense
  double theta_candidate = job_defaults::kThetaMin;  // the daemons compute N_c at it
  bool searching = true;
  std::string phase = "warmup";   // "warmup" | "searching" | "done"
  double gain_min = 0.0;
  double gain_c = 0.0;
};

// Job-wide compression settings, from the controller at join (identical on every daemon); the
// defaults are the job settings' (core/job_settings.h).
struct JobConfig {
  std::string compressor{job_defaults::kCompressor};  // kernels::MakeCompressor name, or "none"
  // Wire precision of the sparse compressors' values: "fp32", "fp16" or "bf16" (the engine maps
  // it to kernels::CompressorOptions::value_type; compressor "none" ignores it).
  std::string sparse_values{job_defaults::kSparseValues};
  double theta_min = job_defaults::kThetaMin;
  double theta_max = job_defaults::kThetaMax;
  uint64_t job_seed = job_defaults::kJobSeed;
  // N as the global squared norm instead of the sum of layer norms
  bool global_norm = job_defaults::kNormMode == "global_squared_l2";
};

// Per-node statistics of one step (GRAVAC.md "Measured each step"), before combination.
struct NodeStepStats {
  int node_rank = 0;
  int64_t step = 0;
  double theta_used = 10.0;
  double theta_candidate = 10.0;
  double n_g = 0.0;
  double n_min = 0.0;
  double n_c = 0.0;
  double step_seconds = 0.0;  // this node's time for the step
  int64_t samples = 0;        // this node's samples in the step
  int64_t bytes_sent = 0;     // data-plane bytes this node sent for the step's tensors
  int64_t bytes_dense = 0;    // what a dense ring allreduce would have sent
  int64_t decision_epoch = 0;
};

// The initial decision (epoch 0) every daemon knows without the controller: θ = θ_c = θ_min,
// warm-up, searching.
inline JobDecision InitialDecision(const JobConfig& job) {
  JobDecision d;
  d.epoch = 0;
  d.first_step = 0;
  d.theta = job.theta_min;
  d.theta_candidate = job.theta_min;
  d.searching = true;
  d.phase = "warmup";
  return d;
}

}  // namespace gravac

#endif  // GRAVAC_CORE_JOB_TYPES_H_
