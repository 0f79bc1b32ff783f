#include "daemon/engine/spec_agreement.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/collectives/reduce.h"

namespace gravac::daemon {
namespace {

std::string ShapeValue(const TensorSpec& s) {
  std::vector<std::string> dims;
  for (size_t i = 0; i < s.shape.size(); ++i) {
    dims.push_back(i == 0 && s.kind == CollectiveKind::kAllgather ? "*" : absl::StrCat(s.shape[i]));
  }
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::string Only(const TensorSpec& s, CollectiveKind kind, std::string value) {
  return s.kind == kind ? std::move(value) : std::string("-");
}

constexpr AgreedField kFields[] = {
    {"kind", [](const TensorSpec& s) { return std::string(CollectiveKindName(s.kind)); }},
    {"process_set",
     [](const TensorSpec& s) {
       return s.process_set.empty() ? std::string("all")
                                    : absl::StrCat("[", FormatRankList(s.process_set), "]");
     }},
    {"dtype", [](const TensorSpec& s) { return std::string(collectives::DataTypeName(s.dtype)); }},
    {"memory", [](const TensorSpec& s) { return std::string(MemoryTypeName(s.memory)); }},
    {"shape", ShapeValue},
    {"op",
     [](const TensorSpec& s) {
       return Only(s, CollectiveKind::kAllreduce,
                   std::string(collectives::ReduceOpName(s.reduce_op)));
     }},
    {"root_rank",
     [](const TensorSpec& s) {
       return Only(s, CollectiveKind::kBroadcast, absl::StrCat(s.root_rank));
     }},
    {"compress",
     [](const TensorSpec& s) {
       return Only(s, CollectiveKind::kAllreduce, s.compress ? "true" : "false");
     }},
    {"step", [](const TensorSpec& s) { return absl::StrCat(s.step); }},
};

}  // namespace

std::vector<int> ProcessSetNodes(const TensorSpec& spec, const std::vector<NodeLayout>& layout) {
  std::vector<int> nodes;
  for (int n = 0; n < static_cast<int>(layout.size()); ++n) {
    const NodeLayout& l = layout[n];
    const bool holds =
        spec.process_set.empty() ||
        std::any_of(spec.process_set.begin(), spec.process_set.end(), [&](int r) {
          return r >= l.first_rank && r < l.first_rank + std::max(1, l.local_count);
        });
    if (holds) nodes.push_back(n);
  }
  return nodes;
}

int ProcessSetSize(const TensorSpec& spec, const std::vector<NodeLayout>& layout) {
  if (!spec.process_set.empty()) return static_cast<int>(spec.process_set.size());
  int size = 0;
  for (const NodeLayout& l : layout) size += l.local_count;
  return size;
}

std::string_view CollectiveKindName(CollectiveKind kind) {
  constexpr std::string_view kNames[] = {"?", "allreduce", "allgather", "broadcast", "join"};
  const auto i = static_cast<size_t>(kind);
  return i < std::size(kNames) ? kNames[i] : kNames[0];
}

absl::Span<const AgreedField> AgreedFields() { return kFields; }

std::string FormatRankList(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(i == j ? absl::StrCat(ranks[i]) : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::string FindDisagreement(std::string_view name, absl::Span<const TensorSpec* const> specs,
                             const std::function<std::vector<int>(int)>& ranks_of) {
  const int parties = static_cast<int>(specs.size());
  for (const AgreedField& field : kFields) {
    const std::string want = field.value(*specs[0]);
    std::string got;
    for (int i = 1; i < parties && got.empty(); ++i) {
      if (std::string v = field.value(*specs[i]); v != want) got = std::move(v);
    }
    if (got.empty()) continue;
    std::vector<int> with_got, with_want;
    for (int i = 0; i < parties; ++i) {
      const std::string v = field.value(*specs[i]);
      std::vector<int>* into = v == got ? &with_got : v == want ? &with_want : nullptr;
      if (into == nullptr) continue;
      const std::vector<int> ranks = ranks_of(i);
      into->insert(into->end(), ranks.begin(), ranks.end());
    }
    return absl::StrFormat("tensor '%s': %s %s on ranks %s differs from %s on ranks %s",
                           std::string(name), field.name, got, FormatRankList(with_got), want,
                           FormatRankList(with_want));
  }
  return "";
}

}  // namespace gravac::daemon
