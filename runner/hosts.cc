#include "runner/hosts.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/absl_compat.h"
#include "core/status.h"

namespace gravac::runner {
namespace {

absl::Status ParseSlots(std::string_view text, std::string_view host, std::string_view where,
                        int* slots) {
  if (!absl::SimpleAtoi(AsAbsl(text), slots) || *slots < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: host '%s' has slots '%s', not a positive number", where, host, text));
  }
  return absl::OkStatus();
}

// "host" or "host:slots" (a name with more than one ':' is an IPv6 address without slots).
absl::StatusOr<HostSlots> ParseHostWord(std::string_view word, std::string_view where) {
  HostSlots h;
  const size_t colon = word.rfind(':');
  if (colon != std::string_view::npos && word.find(':') == colon) {
    h.host = std::string(word.substr(0, colon));
    RETURN_IF_ERROR(ParseSlots(word.substr(colon + 1), h.host, where, &h.slots));
  } else {
    h.host = std::string(word);
  }
  if (h.host.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: '%s' names no host", where, word));
  }
  return h;
}

}  // namespace

absl::StatusOr<std::vector<HostSlots>> ParseHostList(std::string_view text) {
  std::vector<HostSlots> hosts;
  for (absl::string_view piece : absl::StrSplit(AsAbsl(text), ',', absl::SkipWhitespace())) {
    piece = absl::StripAsciiWhitespace(piece);
    ASSIGN_OR_RETURN(HostSlots h, ParseHostWord(std::string_view(piece.data(), piece.size()), "-H"));
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("-H: no hosts in '%s'", text));
  }
  return hosts;
}

absl::StatusOr<std::vector<HostSlots>> ParseHostfileText(std::string_view text,
                                                         std::string_view path) {
  const std::string where = absl::StrFormat("--hostfile %s", path);
  std::vector<HostSlots> hosts;
  for (absl::string_view raw : absl::StrSplit(AsAbsl(text), '\n')) {
    std::string_view line(raw.data(), raw.size());
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string_view> words;
    for (absl::string_view w :
         absl::StrSplit(AsAbsl(line), absl::ByAnyChar(" \t\r"), absl::SkipWhitespace())) {
      words.emplace_back(w.data(), w.size());
    }
    if (words.empty()) continue;
    ASSIGN_OR_RETURN(HostSlots h, ParseHostWord(words[0], where));
    for (size_t i = 1; i < words.size(); ++i) {
      std::string_view w = words[i];
      if (w.starts_with("slots=")) {
        RETURN_IF_ERROR(ParseSlots(w.substr(6), h.host, where, &h.slots));
      } else if (w.starts_with("max_slots=") || w.starts_with("max-slots=")) {
        int max_slots = 0;  // Open MPI's oversubscription limit: checked, then not needed
        RETURN_IF_ERROR(ParseSlots(w.substr(10), h.host, where, &max_slots));
      } else {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: '%s' after host '%s' is not slots=N or max_slots=N", where, w, h.host));
      }
    }
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) return absl::InvalidArgumentError(StrCat(where, ": no hosts in it"));
  return hosts;
}

absl::StatusOr<std::vector<HostSlots>> ReadHostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError("--hostfile: cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return ParseHostfileText(text.str(), path);
}

absl::StatusOr<std::vector<int>> FillHosts(std::vector<HostSlots>* hosts, int np) {
  int slots = 0;
  for (const HostSlots& h : *hosts) slots += h.slots;
  if (np == 0) np = slots;
  if (np > slots) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "-np %d is more than the %d slots of the hosts (%d hosts)", np, slots, hosts->size()));
  }
  std::vector<int> ranks;
  int left = np;
  for (const HostSlots& h : *hosts) {
    if (left == 0) break;
    ranks.push_back(std::min(left, h.slots));
    left -= ranks.back();
  }
  hosts->resize(ranks.size());
  return ranks;
}

bool IsThisMachine(std::string_view host, std::string_view hostname) {
  return host == "localhost" || host == "127.0.0.1" || host == "::1" ||
         (!hostname.empty() && host == hostname);
}

std::string LocalHostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace gravac::runner
