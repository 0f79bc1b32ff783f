#include "controller/policy/gravac_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/enum_names.h"

namespace gravac::policy {
namespace {

// Ratio of smoothed norms; undefined until both trackers are full and T(N_g) > 0.
std::optional<double> Gain(const WindowTracker& compressed, const WindowTracker& raw) {
  if (!compressed.full() || !raw.full()) return std::nullopt;
  const double denominator = raw.Value();
  if (!(denominator > 0.0)) return std::nullopt;
  return compressed.Value() / denominator;
}

// (v1 − v2)/v2 for v1 >= v2 >= 0; two zero means count as equal.
double RelativeGap(double v1, double v2) {
  if (v2 > 0.0) return (v1 - v2) / v2;
  return v1 == v2 ? 0.0 : std::numeric_limits<double>::infinity();
}

absl::Status CheckNonNegative(const char* field, double value, int64_t step) {
  if (std::isfinite(value) && value >= 0.0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "step stats for step %d: %s = %g, must be finite and >= 0", step, field, value));
}

}  // namespace

std::string_view PhaseName(Phase phase) {
  constexpr EnumName<Phase> kPhases[] = {
      {Phase::kWarmup, "warmup"}, {Phase::kSearching, "searching"}, {Phase::kDone, "done"}};
  return NameOf(kPhases, phase);
}

bool Decision::SameChoice(const Decision& o) const {
  return theta == o.theta && theta_candidate == o.theta_candidate && searching == o.searching &&
         phase == o.phase;
}

std::string Decision::DebugString() const {
  return absl::StrFormat(
      "epoch=%d first_step=%d theta=%g theta_c=%g searching=%d phase=%s gain_min=%.6f "
      "gain_c=%.6f",
      epoch, first_step, theta, theta_candidate, searching, std::string(PhaseName(phase)), gain_min,
      gain_c);
}

std::string PeriodReport::DebugString(double epsilon, double min_relative_gain) const {
  std::string gains =
      measured == 0
          ? std::string("gain_c never measured (its tracker did not fill)")
          : absl::StrFormat(
                "gain_c %.3f-%.3f, last %.3f with gain_min %.3f (gain_c/gain_min %.2f); "
                "measured on %d of %d steps: >= epsilon %g on %d, guard (>= %g gain_min) on %d",
                gain_c_min, gain_c_max, gain_c_last, gain_min_last,
                gain_min_last > 0.0 ? gain_c_last / gain_min_last : 0.0, measured, steps, epsilon,
                passed_epsilon, min_relative_gain, passed_guard);
  return absl::StrFormat("search period of theta_c %g ended at step %d: %s; sent at theta_c on %d "
                         "steps, CT mean %s; %s theta_c %g",
                         theta_c, last_step, gains, sent_at_c,
                         ct_mean > 0.0 ? absl::StrFormat("%.3f", ct_mean) : std::string("none"),
                         search_ended ? "search ended on" : "next", next_theta_c);
}

absl::StatusOr<GravacPolicy> GravacPolicy::Create(PolicyConfig config) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  return GravacPolicy(std::move(config));
}

GravacPolicy::GravacPolicy(PolicyConfig config)
    : config_(std::move(config)),
      norm_g_(config_.window, config_.alpha),
      norm_min_(config_.window, config_.alpha),
      norm_c_(config_.window, config_.alpha),
      theta_c_(config_.theta_min),
      theta_since_(-config_.min_dwell) {
  current_.theta = config_.theta_min;
  current_.theta_candidate = config_.theta_min;
}

absl::Status GravacPolicy::CheckStats(const StepStats& s) const {
  if (s.step < 0 || s.step <= last_step_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("step stats for step %d: duplicate or out of order (last observed step %d)",
                        s.step, last_step_));
  }
  const bool used_ok = s.theta_used == ThroughputTable::kDense || InRange(s.theta_used);
  if (!used_ok) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "step stats for step %d: theta_used = %g, must be 1 (dense) or within [theta_min, "
        "theta_max] = [%g, %g]",
        s.step, s.theta_used, config_.theta_min, config_.theta_max));
  }
  if (!InRange(s.theta_candidate)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "step stats for step %d: theta_candidate = %g, must be within [theta_min, theta_max] = "
        "[%g, %g]",
        s.step, s.theta_candidate, config_.theta_min, config_.theta_max));
  }
  for (auto [field, value] :
       {std::pair{"n_g", s.n_g}, std::pair{"n_min", s.n_min}, std::pair{"n_c", s.n_c}}) {
    if (absl::Status st = CheckNonNegative(field, value, s.step); !st.ok()) return st;
  }
  if (!std::isfinite(s.step_seconds) || s.step_seconds <= 0.0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("step stats for step %d: step_seconds = %g, must be finite and > 0", s.step,
                        s.step_seconds));
  }
  if (s.samples <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("step stats for step %d: samples = %d, must be > 0", s.step, s.samples));
  }
  return absl::OkStatus();
}

bool GravacPolicy::InRange(double theta) const {
  return theta >= config_.theta_min && theta <= config_.theta_max;
}

void GravacPolicy::RecordThroughput(const StepStats& s, std::optional<double> gain_min,
                                    std::optional<double> gain_c) {
  const double throughput = static_cast<double>(s.samples) / s.step_seconds;
  if (s.theta_used == ThroughputTable::kDense) {
    table_.Add(ThroughputTable::kDense, throughput);
  } else if (s.theta_used == config_.theta_min) {
    if (gain_min) table_.Add(s.theta_used, throughput * *gain_min);
  } else if (s.theta_used == theta_c_) {
    if (gain_c) table_.Add(s.theta_used, throughput * *gain_c);
  }
}

void GravacPolicy::CountPeriod(const StepStats& s, std::optional<double> gain_min,
                               std::optional<double> gain_c) {
  PeriodReport& p = period_;
  p.theta_c = theta_c_;
  p.last_step = s.step;
  ++p.steps;
  if (s.theta_used == theta_c_ && theta_c_ != config_.theta_min) ++p.sent_at_c;
  if (!gain_c || !Measured()) return;
  p.gain_c_min = p.measured == 0 ? *gain_c : std::min(p.gain_c_min, *gain_c);
  p.gain_c_max = p.measured == 0 ? *gain_c : std::max(p.gain_c_max, *gain_c);
  ++p.measured;
  if (*gain_c >= config_.epsilon) ++p.passed_epsilon;
  if (KeepsEnough(gain_min, gain_c)) ++p.passed_guard;
}

void GravacPolicy::EndPeriod(int64_t next_step) {
  table_.MarkPeriodComplete(theta_c_);
  PeriodReport report = period_;
  period_ = PeriodReport();
  const std::optional<double> gain_min = Gain(norm_min_, norm_g_);
  const std::optional<double> gain_c = Gain(norm_c_, norm_g_);
  report.gain_c_last = gain_c.value_or(0.0);
  report.gain_min_last = gain_min.value_or(0.0);
  if (const ThroughputTable::Entry* e = table_.Find(theta_c_)) report.ct_mean = e->mean();
  const std::vector<ThroughputTable::Ranked> best = table_.Best(2);
  double next = theta_c_;
  if (best.size() == 2 && RelativeGap(best[0].mean, best[1].mean) < config_.omega) {
    searching_ = false;
    next = std::max(best[0].theta, best[1].theta);
  } else if (theta_c_ >= config_.theta_max) {
    searching_ = false;
    next = best.empty() ? config_.theta_min : best[0].theta;
  } else {
    next = NextCandidate(config_.scaling_params(), theta_c_);
  }
  if (next != theta_c_) {
    theta_c_ = next;
    norm_c_.Reset();
    guard_verdict_.reset();
    history_.push_back({next_step, theta_c_});
  }
  report.next_theta_c = theta_c_;
  report.search_ended = !searching_;
  ended_period_ = report;
}

bool GravacPolicy::Measured() const {
  return observed_ >= config_.window && norm_g_.full() && norm_min_.full() && norm_c_.full();
}

double GravacPolicy::Choose(std::optional<double> gain_min, std::optional<double> gain_c) const {
  if (!Measured()) return config_.theta_min;
  if (gain_c.value_or(0.0) >= config_.epsilon && KeepsEnough(gain_min, gain_c)) return theta_c_;
  if (gain_min.value_or(0.0) >= config_.epsilon) return config_.theta_min;
  return ThroughputTable::kDense;
}

bool GravacPolicy::KeepsEnough(std::optional<double>, std::optional<double>) const {
  if (theta_c_ == config_.theta_min) return true;  // θ_c is θ_min: nothing more is withheld
  if (config_.min_relative_gain <= 0.0) return true;  // the paper's rule: ε alone
  return guard_verdict_.value_or(false);
}

void GravacPolicy::JudgeGuard(std::optional<double> gain_min, std::optional<double> gain_c) {
  // Only a window whose steps all left θ_min's residual (or none: dense) measures the ratio free
  // of the candidate's own residual; the verdict reached there holds while θ_c is sent.
  if (clean_steps_ < config_.window || !gain_min || !gain_c) return;
  guard_verdict_ = *gain_c >= config_.min_relative_gain * *gain_min;
}

double GravacPolicy::Dwell(double chosen) const {
  const double held = current_.theta;
  if (chosen == held || observed_ - theta_since_ >= config_.min_dwell) return chosen;
  const bool still_valid =
      held == ThroughputTable::kDense || held == config_.theta_min || held == theta_c_;
  return still_valid ? held : chosen;
}

absl::StatusOr<Decision> GravacPolicy::Observe(const StepStats& s) {
  if (absl::Status st = CheckStats(s); !st.ok()) return st;
  if (history_.empty()) history_.push_back({s.step, theta_c_});
  ended_period_.reset();
  last_step_ = s.step;
  ++observed_;

  norm_g_.Add(s.n_g);
  norm_min_.Add(s.n_min);
  if (s.theta_candidate == theta_c_) norm_c_.Add(s.n_c);
  const bool clean = s.theta_used == config_.theta_min || s.theta_used == ThroughputTable::kDense;
  clean_steps_ = clean ? clean_steps_ + 1 : 0;
  const std::optional<double> gain_min = Gain(norm_min_, norm_g_);
  std::optional<double> gain_c = Gain(norm_c_, norm_g_);
  JudgeGuard(gain_min, gain_c);
  RecordThroughput(s, gain_min, gain_c);
  if (searching_) CountPeriod(s, gain_min, gain_c);

  if (searching_ && observed_ % config_.eval_steps == 0) {
    EndPeriod(s.step + 1);
    gain_c = Gain(norm_c_, norm_g_);
    JudgeGuard(gain_min, gain_c);
  }

  Decision next = current_;
  next.theta = Dwell(Choose(gain_min, gain_c));
  if (next.theta != current_.theta) {
    // Only a θ the gains picked starts a dwell; a fallback while a tracker fills does not, so a
    // new candidate is taken up as soon as it is measured.
    theta_since_ = Measured() ? observed_ : observed_ - config_.min_dwell;
  }
  next.theta_candidate = theta_c_;
  next.searching = searching_;
  next.phase = !searching_                  ? Phase::kDone
               : observed_ < config_.window ? Phase::kWarmup
                                            : Phase::kSearching;
  next.gain_min = gain_min.value_or(0.0);
  next.gain_c = gain_c.value_or(0.0);
  if (!next.SameChoice(current_)) {
    ++next.epoch;
    next.first_step = s.step + 1;
  }
  current_ = next;
  return current_;
}

}  // namespace gravac::policy
