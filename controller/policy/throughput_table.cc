#include "controller/policy/throughput_table.h"

#include <algorithm>

namespace gravac::policy {

void ThroughputTable::Add(double theta, double value) {
  Entry& e = entries_[theta];
  e.sum += value;
  ++e.samples;
}

void ThroughputTable::MarkPeriodComplete(double theta) { entries_[theta].period_complete = true; }

std::vector<ThroughputTable::Ranked> ThroughputTable::Best(int n) const {
  std::vector<Ranked> ranked;
  for (const auto& [theta, e] : entries_) {
    if (theta <= kDense || !e.period_complete || e.samples == 0) continue;
    ranked.push_back({theta, e.mean(), e.samples});
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.mean != b.mean) return a.mean > b.mean;
    return a.theta > b.theta;
  });
  if (n >= 0 && static_cast<int>(ranked.size()) > n) ranked.resize(n);
  return ranked;
}

const ThroughputTable::Entry* ThroughputTable::Find(double theta) const {
  auto it = entries_.find(theta);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace gravac::policy
