// ThroughputTable: GraVAC's CT, the compression throughput measured at each θ.
//
// For every θ the table keeps the sum and count of the per-step values (throughput × gain) it was
// given, so its figure is a mean over many steps, never one noisy step. θ = 1 is dense: it is
// recorded (for status and metrics) but is never a search candidate — dense is the fallback, and
// a "winning" dense θ would be sent through the sparse allgather at several times the dense bytes.
//
// A θ becomes rankable once the search marks its evaluation period complete
// (MarkPeriodComplete) and it holds at least one sample. Best(n) ranks the rankable compressed θ
// by mean, largest first; equal means put the larger (more compressed) θ first, so the order is
// total and deterministic.
//
// θ keys are compared exactly: the engine only ever inserts θ values it produced itself.
//
// Thread-safety: a plain value type; not safe for concurrent mutation.
#ifndef GRAVAC_CONTROLLER_POLICY_THROUGHPUT_TABLE_H_
#define GRAVAC_CONTROLLER_POLICY_THROUGHPUT_TABLE_H_

#include <cstdint>
#include <map>
#include <vector>

namespace gravac::policy {

class ThroughputTable {
 public:
  struct Entry {
    double sum = 0.0;  // Σ throughput × gain over the samples
    int64_t samples = 0;
    bool period_complete = false;
    double mean() const { return samples > 0 ? sum / static_cast<double>(samples) : 0.0; }
  };
  struct Ranked {
    double theta = 0.0;
    double mean = 0.0;
    int64_t samples = 0;
    bool operator==(const Ranked&) const = default;
  };

  static constexpr double kDense = 1.0;

  // Adds one step's throughput × gain at θ. Precondition: theta >= 1, value finite and >= 0.
  void Add(double theta, double value);
  // Marks θ's evaluation period as complete (creates the entry if θ has no samples yet).
  void MarkPeriodComplete(double theta);

  // Up to n (every one when n < 0) rankable compressed θ (θ > 1, period complete, samples > 0),
  // best mean first.
  std::vector<Ranked> Best(int n) const;

  // nullptr when θ has no entry.
  const Entry* Find(double theta) const;
  // Every θ seen, ascending (θ = 1, dense, first when present).
  const std::map<double, Entry>& entries() const { return entries_; }

 private:
  std::map<double, Entry> entries_;
};

}  // namespace gravac::policy

#endif  // GRAVAC_CONTROLLER_POLICY_THROUGHPUT_TABLE_H_
