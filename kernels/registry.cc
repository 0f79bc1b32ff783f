// The compressor registry: the one {name, factory} table that knows every compressor.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/compressor.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/dgc.h"
#include "kernels/cpu/randomk.h"
#include "kernels/cpu/redsync.h"
#include "kernels/cpu/topk.h"

namespace gravac::kernels {
namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Compressor> (*make)(const CompressorOptions&);
};

template <typename T>
std::unique_ptr<Compressor> Make(const CompressorOptions& options) {
  return std::make_unique<T>(options);
}

template <ValueType kType>
std::unique_ptr<Compressor> MakeCast(const CompressorOptions& options) {
  return std::make_unique<cpu::CastCompressor>(kType, options);
}

constexpr Entry kEntries[] = {
    {"topk", &Make<cpu::TopKCompressor>},     {"randomk", &Make<cpu::RandomKCompressor>},
    {"dgc", &Make<cpu::DgcCompressor>},       {"redsync", &Make<cpu::RedSyncCompressor>},
    {"fp16", &MakeCast<ValueType::kFloat16>}, {"bf16", &MakeCast<ValueType::kBFloat16>},
};

}  // namespace

const std::vector<std::string>& CompressorNames() {
  // A function-local constant built once from the table (immutable; not mutable global state).
  static const std::vector<std::string>* const kNames = [] {
    auto* names = new std::vector<std::string>();
    for (const Entry& e : kEntries) names->emplace_back(e.name);
    return names;
  }();
  return *kNames;
}

absl::StatusOr<std::unique_ptr<Compressor>> MakeCompressor(std::string_view name,
                                                           const CompressorOptions& options) {
  for (const Entry& e : kEntries) {
    if (name == e.name) return e.make(options);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown compressor '%s'; known compressors: %s", name,
                      absl::StrJoin(CompressorNames(), ", ")));
}

}  // namespace gravac::kernels
