#include "daemon/engine/negotiation.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/absl_compat.h"
#include "core/status.h"
#include "daemon/engine/bytes.h"
#include "daemon/engine/spec_agreement.h"

namespace gravac::daemon::internal {
namespace {

constexpr uint32_t kMagic = 0x474e4547;  // "GENG"
constexpr uint8_t kVersion = 2;
constexpr size_t kMaxStepDecisions = 4096;

enum EntryFlags : uint8_t { kCached = 1, kHasError = 2, kMismatch = 4 };
enum MessageFlags : uint8_t { kFailed = 1, kShutdown = 2, kGiveUp = 4, kGiveUpMovedOn = 8 };

void PutSpec(ByteWriter& w, const TensorSpec& s) {
  w.PutString(s.name);
  w.Put<uint8_t>(static_cast<uint8_t>(s.kind));
  w.Put<uint8_t>(static_cast<uint8_t>(s.dtype));
  w.Put<uint8_t>(static_cast<uint8_t>(s.reduce_op));
  w.Put<uint8_t>(s.compress ? 1 : 0);
  w.Put<int32_t>(s.root_rank);
  w.Put<uint32_t>(static_cast<uint32_t>(s.shape.size()));
  for (int64_t d : s.shape) w.Put<int64_t>(d);
  w.Put<uint32_t>(static_cast<uint32_t>(s.process_set.size()));
  for (int r : s.process_set) w.Put<int32_t>(r);
  w.Put<uint8_t>(s.memory == MemoryType::kDevice ? 1 : 0);
}

absl::Status GetSpec(ByteReader& r, TensorSpec* s) {
  s->name = r.GetString();
  const uint8_t kind = r.Get<uint8_t>(), dtype = r.Get<uint8_t>(), op = r.Get<uint8_t>();
  s->compress = r.Get<uint8_t>() != 0;
  s->root_rank = r.Get<int32_t>();
  const uint32_t ndim = r.Get<uint32_t>();
  if (!r.ok() || ndim > 64 || kind < 1 || kind > static_cast<uint8_t>(CollectiveKind::kJoin) ||
      dtype > static_cast<uint8_t>(collectives::DataType::kUInt8) || op > 1) {
    return absl::DataLossError(
        absl::StrFormat("engine: malformed tensor spec in a negotiation message ('%s')", s->name));
  }
  s->kind = static_cast<CollectiveKind>(kind);
  s->dtype = static_cast<collectives::DataType>(dtype);
  s->reduce_op = static_cast<collectives::ReduceOp>(op);
  s->shape.resize(ndim);
  for (auto& d : s->shape) d = r.Get<int64_t>();
  const uint32_t set_size = r.Get<uint32_t>();
  if (!r.ok() || set_size > (1u << 20)) {
    return absl::DataLossError(absl::StrFormat(
        "engine: malformed process set in a negotiation message ('%s')", s->name));
  }
  s->process_set.resize(set_size);
  for (int& rank : s->process_set) rank = r.Get<int32_t>();
  const uint8_t memory = r.Get<uint8_t>();
  if (!r.ok() || memory > 1) {
    return absl::DataLossError(absl::StrFormat(
        "engine: malformed memory type in a negotiation message ('%s')", s->name));
  }
  s->memory = memory == 1 ? MemoryType::kDevice : MemoryType::kHost;
  return absl::OkStatus();
}

// The global ranks of a node (at least its first, as the messages name it).
std::vector<int> NodeRanks(const NodeLayout& l) {
  std::vector<int> ranks;
  for (int i = 0; i < std::max(1, l.local_count); ++i) ranks.push_back(l.first_rank + i);
  return ranks;
}

}  // namespace

std::vector<uint8_t> EncodeMessage(const NodeMessage& m) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.Put<uint32_t>(kMagic);
  w.Put<uint8_t>(kVersion);
  const JobDecision& d = m.decision;
  w.Put<int64_t>(d.epoch);
  w.Put<int64_t>(d.first_step);
  w.Put<double>(d.theta);
  w.Put<double>(d.theta_candidate);
  w.Put<uint8_t>(d.searching ? 1 : 0);
  w.PutString(d.phase);
  w.Put<double>(d.gain_min);
  w.Put<double>(d.gain_c);
  w.Put<uint8_t>((m.failed ? kFailed : 0) | (m.shutdown ? kShutdown : 0) |
                 (m.give_up ? kGiveUp : 0) | (m.give_up_moved_on ? kGiveUpMovedOn : 0));
  if (m.failed) {
    w.Put<uint32_t>(static_cast<uint32_t>(m.failure_code));
    w.PutString(m.failure_message);
  }
  w.Put<uint32_t>(static_cast<uint32_t>(m.ready.size()));
  for (const ReadyEntry& e : m.ready) {
    w.Put<uint8_t>((e.cached ? kCached : 0) | (e.error.empty() ? 0 : kHasError) |
                   (e.mismatch ? kMismatch : 0));
    if (e.cached) {
      w.Put<uint32_t>(e.cache_id);
    } else {
      PutSpec(w, e.spec);
    }
    w.Put<int64_t>(e.spec.step);
    w.Put<int64_t>(e.spec.samples);
    if (!e.error.empty()) w.PutString(e.error);
  }
  return out;
}

absl::StatusOr<NodeMessage> DecodeMessage(absl::Span<const uint8_t> bytes) {
  ByteReader r(bytes);
  NodeMessage m;
  if (r.Get<uint32_t>() != kMagic || r.Get<uint8_t>() != kVersion) {
    return absl::DataLossError("engine: negotiation message with a bad magic or version");
  }
  JobDecision& d = m.decision;
  d.epoch = r.Get<int64_t>();
  d.first_step = r.Get<int64_t>();
  d.theta = r.Get<double>();
  d.theta_candidate = r.Get<double>();
  d.searching = r.Get<uint8_t>() != 0;
  d.phase = r.GetString();
  d.gain_min = r.Get<double>();
  d.gain_c = r.Get<double>();
  const uint8_t flags = r.Get<uint8_t>();
  m.failed = flags & kFailed;
  m.shutdown = flags & kShutdown;
  m.give_up = flags & kGiveUp;
  m.give_up_moved_on = flags & kGiveUpMovedOn;
  if (m.failed) {
    m.failure_code = static_cast<absl::StatusCode>(r.Get<uint32_t>());
    m.failure_message = r.GetString();
    if (m.failure_code == absl::StatusCode::kOk) m.failure_code = absl::StatusCode::kUnknown;
  }
  const uint32_t n = r.Get<uint32_t>();
  if (!r.ok()) return absl::DataLossError("engine: truncated negotiation message");
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    ReadyEntry e;
    const uint8_t f = r.Get<uint8_t>();
    e.cached = f & kCached;
    if (e.cached) {
      e.cache_id = r.Get<uint32_t>();
    } else {
      RETURN_IF_ERROR(GetSpec(r, &e.spec));
    }
    e.spec.step = r.Get<int64_t>();
    e.spec.samples = r.Get<int64_t>();
    if (f & kHasError) e.error = r.GetString();
    e.mismatch = (f & kMismatch) != 0;
    m.ready.push_back(std::move(e));
  }
  if (!r.ok() || !r.done()) return absl::DataLossError("engine: malformed negotiation message");
  return m;
}

std::string FormatRanks(absl::Span<const NodeLayout> layout, absl::Span<const int> nodes) {
  std::vector<int> ranks;
  for (int n : nodes) {
    if (n < 0 || n >= static_cast<int>(layout.size())) continue;
    const std::vector<int> node_ranks = NodeRanks(layout[n]);
    ranks.insert(ranks.end(), node_ranks.begin(), node_ranks.end());
  }
  return FormatRankList(std::move(ranks));
}

std::string FormatNode(absl::Span<const NodeLayout> layout, int node) {
  const int nodes[] = {node};
  return absl::StrFormat("node %d (ranks %s)", node, FormatRanks(layout, nodes));
}

Negotiator::Negotiator(int node_rank, std::vector<NodeLayout> layout, size_t cache_capacity)
    : node_rank_(node_rank),
      layout_(std::move(layout)),
      cache_capacity_(std::max<size_t>(cache_capacity, 1)),
      max_step_listed_(layout_.size(), -1) {}

void Negotiator::RememberSpec(std::string key, const TensorSpec& spec) {
  if (auto it = cache_ids_.find(key); it != cache_ids_.end()) {
    CacheEntry& entry = cache_.at(it->second);
    recency_.splice(recency_.end(), recency_, entry.recency);
    return;
  }
  // Ids only grow; after 2^32 of them the counter wraps and skips the ids still in use.
  while (cache_.contains(next_cache_id_)) ++next_cache_id_;
  const uint32_t id = next_cache_id_++;
  TensorSpec stored = spec;
  stored.step = 0;
  stored.samples = 0;
  recency_.push_back(id);
  cache_ids_.emplace(key, id);
  cache_.emplace(id, CacheEntry{std::move(stored), std::move(key), std::prev(recency_.end())});
}

void Negotiator::TrimCache() {
  while (cache_.size() > cache_capacity_) {
    const uint32_t id = recency_.front();
    recency_.pop_front();
    auto it = cache_.find(id);
    cache_ids_.erase(it->second.key);
    cache_.erase(it);
  }
}

std::string Negotiator::CacheKey(const TensorSpec& s) {
  std::vector<uint8_t> bytes;
  ByteWriter w(&bytes);
  TensorSpec key = s;
  if (key.kind == CollectiveKind::kAllgather && !key.shape.empty()) key.shape[0] = 0;
  PutSpec(w, key);
  return std::string(bytes.begin(), bytes.end());
}

ReadyEntry Negotiator::MakeEntry(const TensorSpec& spec, std::string error,
                                 bool mismatch) const {
  ReadyEntry e;
  e.spec = spec;
  e.error = std::move(error);
  e.mismatch = mismatch && !e.error.empty();
  auto it = cache_ids_.find(CacheKey(spec));
  if (it != cache_ids_.end()) {
    e.cached = true;
    e.cache_id = it->second;
  }
  return e;
}

JobDecision Negotiator::DecisionForStep(int64_t step, const JobDecision& agreed) {
  if (step < 0) return agreed;
  auto [it, inserted] = step_decisions_.emplace(step, agreed);
  while (step_decisions_.size() > kMaxStepDecisions) step_decisions_.erase(step_decisions_.begin());
  return it->second;
}

std::string Negotiator::CheckAgreement(const std::string& name, const Pending& p) const {
  std::vector<const TensorSpec*> specs;
  std::vector<int> nodes;
  for (int n = 0; n < static_cast<int>(p.per_node.size()); ++n) {
    if (!p.per_node[n].has_value()) continue;
    specs.push_back(&p.per_node[n]->spec);
    nodes.push_back(n);
  }
  return FindDisagreement(name, specs,
                          [&](int i) { return NodeRanks(layout_[nodes[i]]); });
}

std::string Negotiator::MissingMessage(const std::string& name, const Pending& p,
                                       std::string_view why) const {
  std::vector<int> listed, missing;
  int64_t step = -1;
  for (int n = 0; n < static_cast<int>(p.per_node.size()); ++n) {
    if (p.per_node[n].has_value()) {
      listed.push_back(n);
      step = p.per_node[n]->spec.step;
    } else if (p.expected[n]) {
      missing.push_back(n);
    }
  }
  return absl::StrFormat("tensor '%s' (step %d): name missing on ranks %s (%s); posted on ranks %s",
                         name, step, FormatRanks(layout_, missing), why,
                         FormatRanks(layout_, listed));
}

absl::StatusOr<CycleOutcome> Negotiator::Process(absl::Span<const NodeMessage> messages,
                                                 absl::Time now) {
  const int P = static_cast<int>(layout_.size());
  if (static_cast<int>(messages.size()) != P) {
    return absl::InternalError(
        absl::StrFormat("engine: %d negotiation messages for %d nodes", messages.size(), P));
  }
  CycleOutcome out;
  out.agreed = messages[0].decision;
  bool shutdown = true, give_up = false, moved_on = false;
  for (int n = 0; n < P; ++n) {
    const NodeMessage& m = messages[n];
    if (m.decision.epoch < out.agreed.epoch) out.agreed = m.decision;
    shutdown = shutdown && m.shutdown;
    give_up = give_up || m.give_up;
    moved_on = moved_on || m.give_up_moved_on;
    if (m.failed && out.job_failure.ok()) {
      out.job_failure = absl::Status(m.failure_code, m.failure_message);
    }
  }
  out.shutdown = shutdown;
  if (!out.job_failure.ok()) {
    pending_.clear();
    return out;
  }

  bool progress = false;
  for (int n = 0; n < P; ++n) {
    for (const ReadyEntry& entry : messages[n].ready) {
      ReadyEntry e = entry;
      if (e.cached) {
        auto cached = cache_.find(e.cache_id);
        if (cached == cache_.end()) {
          return absl::DataLossError(
              absl::StrFormat("engine: %s listed unknown response-cache id %d",
                              FormatNode(layout_, n), e.cache_id));
        }
        recency_.splice(recency_.end(), recency_, cached->second.recency);
        const int64_t step = e.spec.step, samples = e.spec.samples;
        e.spec = cached->second.spec;
        e.spec.step = step;
        e.spec.samples = samples;
      } else {
        RememberSpec(CacheKey(e.spec), e.spec);
      }
      auto [it, inserted] = pending_.try_emplace(e.spec.name);
      Pending& p = it->second;
      if (inserted) {
        p.order = next_order_++;
        p.first_seen = p.last_report = now;
        p.per_node.resize(P);
        p.listed_at.resize(P);
        p.listed_ns.resize(P);
        p.expected.assign(P, false);
        for (int node : ProcessSetNodes(e.spec, layout_)) p.expected[node] = true;
        p.expected_count = static_cast<int>(std::count(p.expected.begin(), p.expected.end(), true));
      }
      if (p.per_node[n].has_value()) {
        return absl::DataLossError(absl::StrFormat("engine: %s listed tensor '%s' twice",
                                                   FormatNode(layout_, n), e.spec.name));
      }
      if (!p.expected[n]) {
        // A node that holds none of the set's ranks (as the first listing gave it) listed the
        // tensor: the ranks disagree on the process set. It completes with the error once every
        // node of either set listed it.
        p.expected[n] = true;
        ++p.expected_count;
      }
      max_step_listed_[n] = std::max(max_step_listed_[n], e.spec.step);
      p.per_node[n] = std::move(e);
      p.listed_at[n] = next_listing_++;
      p.listed_ns[n] = absl::ToUnixNanos(now);
      ++p.listed;
      progress = true;
    }
  }

  std::vector<std::pair<uint64_t, std::string>> complete;
  for (const auto& [name, p] : pending_) {
    if (p.listed == p.expected_count) complete.emplace_back(p.order, name);
  }
  std::sort(complete.begin(), complete.end());
  for (const auto& [order, name] : complete) {
    Pending& p = pending_.at(name);
    std::string error;
    bool node_mismatch = false;
    for (int n = 0; n < P && error.empty(); ++n) {
      if (p.per_node[n].has_value() && !p.per_node[n]->error.empty()) {
        node_mismatch = p.per_node[n]->mismatch;
        const int nodes[] = {n};
        const std::string& e = p.per_node[n]->error;
        // A local disagreement already names the tensor and its ranks.
        error = absl::StartsWith(e, absl::StrFormat("tensor '%s'", name))
                    ? e
                    : absl::StrFormat("tensor '%s': ranks %s: %s", name,
                                      FormatRanks(layout_, nodes), e);
      }
    }
    // A node's own bad input (e.g. a non-finite gradient) is InvalidArgument; ranks that
    // disagree on the tensor are FailedPrecondition, which clients report as a mismatch.
    if (!error.empty()) {
      out.failed.push_back({name, node_mismatch ? absl::FailedPreconditionError(error)
                                                : absl::InvalidArgumentError(error)});
    } else if (error = CheckAgreement(name, p); !error.empty()) {
      out.failed.push_back({name, absl::FailedPreconditionError(error)});
    } else {
      ReadyTensor t;
      int own = node_rank_;
      while (!p.per_node[own].has_value()) own = (own + 1) % P;  // outside the set: any listing
      t.spec = p.per_node[own]->spec;
      if (t.spec.kind == CollectiveKind::kJoin) {
        const auto last = std::max_element(p.listed_at.begin(), p.listed_at.end());
        t.spec.root_rank = p.per_node[last - p.listed_at.begin()]->spec.root_rank;
      }
      t.decision = DecisionForStep(t.spec.step, out.agreed);
      t.listed_ns = p.listed_ns;
      out.ready.push_back(std::move(t));
    }
    pending_.erase(name);
    progress = true;
  }

  // Names some nodes will never post: they moved on to a later step, or every node waits for
  // the others (a node asked to give up).
  for (auto it = pending_.begin(); it != pending_.end();) {
    const Pending& p = it->second;
    const int64_t later = MovedOnTo(p);
    std::string why;
    if (moved_on && later >= 0) {
      why = absl::StrFormat("they posted step %d already", later);
    } else if (give_up) {
      why = "no progress while every node waits for a tensor the others lack";
    }
    if (why.empty()) {
      ++it;
      continue;
    }
    out.failed.push_back(
        {it->first, absl::FailedPreconditionError(MissingMessage(it->first, p, why))});
    it = pending_.erase(it);
    progress = true;
  }
  TrimCache();
  if (progress) last_progress_ = now;
  return out;
}

std::vector<std::string> Negotiator::StallReports(absl::Time now, absl::Duration after) {
  std::vector<std::string> lines;
  for (auto& [name, p] : pending_) {
    if (now - p.last_report < after) continue;
    p.last_report = now;
    std::vector<int> listed, missing;
    for (int n = 0; n < static_cast<int>(p.per_node.size()); ++n) {
      if (p.per_node[n].has_value()) {
        listed.push_back(n);
      } else if (p.expected[n]) {
        missing.push_back(n);
      }
    }
    lines.push_back(absl::StrFormat(
        "stall: tensor '%s' posted on ranks %s has waited %s for ranks %s", name,
        FormatRanks(layout_, listed),
        absl::FormatDuration(absl::Trunc(now - p.first_seen, absl::Milliseconds(1))),
        FormatRanks(layout_, missing)));
  }
  return lines;
}

std::vector<TensorSpec> Negotiator::MissingHere() const {
  std::vector<std::pair<uint64_t, TensorSpec>> missing;
  for (const auto& [name, p] : pending_) {
    if (p.per_node[node_rank_].has_value() || !p.expected[node_rank_]) continue;
    for (const auto& entry : p.per_node) {
      if (!entry.has_value()) continue;
      TensorSpec spec = entry->spec;
      spec.samples = 0;
      missing.emplace_back(p.order, std::move(spec));
      break;
    }
  }
  std::sort(missing.begin(), missing.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<TensorSpec> out;
  for (auto& [order, spec] : missing) out.push_back(std::move(spec));
  return out;
}

int64_t Negotiator::MovedOnTo(const Pending& p) const {
  int64_t step = -1, min_missing_step = INT64_MAX;
  for (size_t n = 0; n < p.per_node.size(); ++n) {
    if (p.per_node[n].has_value()) {
      step = p.per_node[n]->spec.step;
    } else if (p.expected[n]) {
      min_missing_step = std::min(min_missing_step, max_step_listed_[n]);
    }
  }
  return step >= 0 && min_missing_step != INT64_MAX && min_missing_step > step ? min_missing_step
                                                                               : -1;
}

bool Negotiator::MovedOn(absl::Time now, absl::Duration grace) const {
  for (const auto& [name, p] : pending_) {
    if (now - p.first_seen >= grace && MovedOnTo(p) >= 0) return true;
  }
  return false;
}

bool Negotiator::Deadlocked(absl::Time now, absl::Duration timeout) const {
  if (pending_.empty() || now - last_progress_ < timeout) return false;
  // Deadlocked when every node some pending tensor lacks is itself waiting for one (with the whole
  // job as every tensor's set, when every node waits).
  std::vector<bool> waiting(layout_.size(), false), lacking(layout_.size(), false);
  for (const auto& [name, p] : pending_) {
    for (size_t n = 0; n < p.per_node.size(); ++n) {
      if (p.per_node[n].has_value()) {
        waiting[n] = true;
      } else if (p.expected[n]) {
        lacking[n] = true;
      }
    }
  }
  for (size_t n = 0; n < layout_.size(); ++n) {
    if (lacking[n] && !waiting[n]) return false;
  }
  return true;
}

}  // namespace gravac::daemon::internal
