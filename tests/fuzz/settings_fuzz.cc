// libFuzzer target: the settings parser (core/settings.h) that reads every program's command
// line and GRAVAC_* environment. The input is lines: "ENV NAME=VALUE" lines form the
// environment, every other line is one argv word. The table is the job settings
// (core/job_settings.h) plus one setting of each type with an environment variable. Checks:
// nothing crashes; when Parse succeeds every setting reads back with its own type, a wrong-type
// read fails, Source names a known origin, and Help renders.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/job_settings.h"
#include "core/settings.h"

namespace {

using gravac::SettingSpec;
using gravac::SettingType;

std::vector<SettingSpec> Table() {
  std::vector<SettingSpec> t(gravac::JobSettings().begin(), gravac::JobSettings().end());
  t.push_back({"count", "FUZZ_COUNT", "3", "an int", SettingType::kInt});
  t.push_back({"ratio", "FUZZ_RATIO", "0.5", "a double", SettingType::kDouble});
  t.push_back({"flag", "FUZZ_FLAG", "false", "a bool", SettingType::kBool});
  t.push_back({"path", "FUZZ_PATH", "", "a string", SettingType::kString});
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<SettingSpec> table = Table();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> words;
  std::map<std::string, std::string, std::less<>> env;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.substr(0, 4) == "ENV ") {
      line.remove_prefix(4);
      const size_t eq = line.find('=');
      env[std::string(line.substr(0, eq))] =
          eq == std::string_view::npos ? "" : std::string(line.substr(eq + 1));
    } else {
      words.emplace_back(line);
    }
  }
  std::vector<const char*> args;
  for (const std::string& w : words) args.push_back(w.c_str());
  absl::StatusOr<gravac::Settings> s =
      gravac::Settings::Parse(table, args, gravac::FixedEnvironment(env));
  if (!s.ok() || s->help_requested()) return 0;
  for (const SettingSpec& spec : table) {
    bool ok = false;
    switch (spec.type) {
      case SettingType::kInt:
        ok = s->GetInt(spec.name).ok() && !s->GetBool(spec.name).ok();
        break;
      case SettingType::kDouble:
        ok = s->GetDouble(spec.name).ok() && !s->GetString(spec.name).ok();
        break;
      case SettingType::kBool:
        ok = s->GetBool(spec.name).ok() && !s->GetInt(spec.name).ok();
        break;
      case SettingType::kString:
        ok = s->GetString(spec.name).ok() && !s->GetDouble(spec.name).ok();
        break;
    }
    if (!ok) std::abort();
    absl::StatusOr<std::string> source = s->Source(spec.name);
    if (!source.ok() || source->empty()) std::abort();
  }
  if (s->GetInt("no_such_setting").ok()) std::abort();
  if (gravac::Settings::Help(table, "fuzz").empty()) std::abort();
  return 0;
}
