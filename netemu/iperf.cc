#include "netemu/iperf.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/absl_compat.h"

namespace gravac::netemu {
namespace {

// The string value of `"key": "..."` at or after `from`, or "" when absent.
std::string StringValue(std::string_view json, std::string_view key) {
  size_t k = json.find(gravac::StrCat("\"", key, "\""));
  if (k == std::string_view::npos) return "";
  size_t open = json.find('"', json.find(':', k) + 1);
  size_t close = json.find('"', open + 1);
  if (open == std::string_view::npos || close == std::string_view::npos) return "";
  return std::string(json.substr(open + 1, close - open - 1));
}

}  // namespace

absl::StatusOr<double> ParseIperf3ReceivedBitsPerSecond(std::string_view json) {
  std::string error = StringValue(json, "error");
  if (!error.empty()) return absl::UnavailableError(absl::StrCat("iperf3: ", error));
  size_t section = json.find("\"sum_received\"");
  if (section == std::string_view::npos) {
    return absl::InvalidArgumentError("iperf3 JSON has no end.sum_received section");
  }
  size_t key = json.find("\"bits_per_second\"", section);
  size_t close = json.find('}', section);
  if (key == std::string_view::npos || key > close) {
    return absl::InvalidArgumentError("iperf3 JSON sum_received has no bits_per_second");
  }
  size_t colon = json.find(':', key);
  std::string number(json.substr(colon + 1, close - colon - 1));
  char* end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (end == number.c_str() || !(value > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "iperf3 JSON sum_received.bits_per_second is not a positive number: '", number, "'"));
  }
  return value;
}

}  // namespace gravac::netemu
