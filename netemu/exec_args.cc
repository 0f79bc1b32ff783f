#include "netemu/exec_args.h"

#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace gravac::netemu {

std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : overrides) vars[key] = value;
  std::vector<std::string> env;
  env.reserve(vars.size());
  for (const auto& [key, value] : vars) env.push_back(absl::StrCat(key, "=", value));
  return env;
}

std::vector<char*> ExecStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace gravac::netemu
