// StepStatsAccumulator: this node's per-step statistics (GRAVAC.md "Measured each step"), built
// up while a step's groups run and handed to the StatsSink once a later step starts (or at
// Flush), so every step is reported once, in step order.
//
// N_g, N_min, N_c are sums over the step's compressible tensors of ‖g‖, ‖C_θmin(g+e)‖,
// ‖C_θc(g+e)‖ (global_norm: sums of squared norms instead, so nodes can add them); bytes_sent
// counts this node's data-plane payload for the step's allreduces, bytes_dense what a dense ring
// allreduce of the same tensors would send (the runners add both). A step's time runs from the
// first post of its first tensor to the first post of the next step (the last step reported by
// Flush: to its last tensor).
//
// Thread-safety: not thread-safe; owned by the engine thread (through the Executor).
#ifndef GRAVAC_DAEMON_ENGINE_STEP_STATS_H_
#define GRAVAC_DAEMON_ENGINE_STEP_STATS_H_

#include <cstdint>
#include <map>

#include "daemon/engine/types.h"

namespace gravac::daemon::internal {

class StepStatsAccumulator {
 public:
  struct Step {
    NodeStepStats stats;
    int64_t first_ns = 0;
    int64_t last_ns = 0;
  };

  // sink may be null (nothing reported); it must outlive the accumulator.
  StepStatsAccumulator(int node_rank, bool global_norm, StatsSink* sink)
      : node_rank_(node_rank), global_norm_(global_norm), sink_(sink) {}

  // The statistics of `step` for a tensor first posted at `start_ns` with `samples`, after
  // reporting every earlier step; nullptr when the tensor is not part of a step (step < 0) or its
  // step was reported already. The pointer is valid until the next For or Flush.
  Step* For(int64_t step, const JobDecision& decision, int64_t start_ns, int64_t samples);

  // Adds one tensor's norms to `step` (null: nothing).
  void AddNorms(Step* step, double grad_norm, double norm_min, double norm_candidate) const;

  // Reports every step not reported yet (at shutdown).
  void Flush() { ReportBefore(INT64_MAX); }

 private:
  void ReportBefore(int64_t step);

  int node_rank_;
  bool global_norm_;
  StatsSink* sink_;
  std::map<int64_t, Step> steps_;
  int64_t last_reported_step_ = -1;
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_STEP_STATS_H_
