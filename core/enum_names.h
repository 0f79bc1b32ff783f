// EnumName: an enum's names written once, as a table both directions read, instead of a
// value -> name switch beside a name -> value if-chain and a list of the names in an error:
//
//   constexpr EnumName<ScalingKind> kScalingKinds[] = {{ScalingKind::kGeometric, "geometric"},
//                                                      {ScalingKind::kExponential, "exponential"}};
//   NameOf(kScalingKinds, kind)          "geometric"; `unknown` for a value not in the table
//   ValueOf(kScalingKinds, "geometric")  ScalingKind::kGeometric; nullopt for another name
//   NameList(kScalingKinds)              "geometric, exponential", for error messages
//   ParseEnum(kScalingKinds, text, "scaling policy")
//                                        ValueOf, or InvalidArgument
//                                        'scaling policy "x" is not one of: geometric, exponential'
//
// Thread-safety: stateless.
#ifndef GRAVAC_CORE_ENUM_NAMES_H_
#define GRAVAC_CORE_ENUM_NAMES_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace gravac {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E, size_t N>
constexpr std::string_view NameOf(const EnumName<E> (&table)[N], E value,
                                  std::string_view unknown = "unknown") {
  for (const EnumName<E>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return unknown;
}

template <typename E, size_t N>
constexpr std::optional<E> ValueOf(const EnumName<E> (&table)[N], std::string_view name) {
  for (const EnumName<E>& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

template <typename E, size_t N>
std::string NameList(const EnumName<E> (&table)[N]) {
  std::string list;
  for (const EnumName<E>& entry : table) {
    if (!list.empty()) list += ", ";
    list += entry.name;
  }
  return list;
}

template <typename E, size_t N>
absl::StatusOr<E> ParseEnum(const EnumName<E> (&table)[N], std::string_view text,
                            std::string_view what) {
  if (std::optional<E> value = ValueOf(table, text)) return *value;
  return absl::InvalidArgumentError(absl::StrCat(std::string(what), " \"", std::string(text),
                                                 "\" is not one of: ", NameList(table)));
}

}  // namespace gravac

#endif  // GRAVAC_CORE_ENUM_NAMES_H_
