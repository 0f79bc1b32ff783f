// Bridges std::string_view and absl::string_view.
//
// Debian 12's abseil is built with ABSL_OPTION_USE_STD_STRING_VIEW=0, so absl::string_view is
// its own type and absl::StrCat / SimpleAtoi / AsciiStrToLower do not accept std::string_view.
// gravac's interfaces use std::string_view (C++20); convert at the call into abseil with AsAbsl.
// gravac::StrCat takes them too. (absl::StrFormat accepts std::string_view directly.)
#ifndef GRAVAC_CORE_ABSL_COMPAT_H_
#define GRAVAC_CORE_ABSL_COMPAT_H_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gravac {

inline absl::string_view AsAbsl(std::string_view s) { return {s.data(), s.size()}; }

namespace internal {
inline absl::AlphaNum ToAlphaNum(std::string_view s) { return AsAbsl(s); }
template <typename T>
const T& ToAlphaNum(const T& v) {
  return v;
}
}  // namespace internal

// absl::StrCat that also takes std::string_view pieces.
template <typename... Args>
std::string StrCat(const Args&... args) {
  return absl::StrCat(internal::ToAlphaNum(args)...);
}

}  // namespace gravac

#endif  // GRAVAC_CORE_ABSL_COMPAT_H_
