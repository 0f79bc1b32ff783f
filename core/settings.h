// Settings: every configurable value of a binary is declared once in a table of SettingSpec
// (name, environment variable, default, help, type) and parsed in main.
//
// Precedence: command-line flag (--name=value or --name value) > environment variable > default.
// Every value is checked against its type while parsing, so a bad value fails at start-up with a
// message naming the setting and where the value came from. Arguments after "--" are kept as
// positional arguments (gravacrun's command line). The environment is read through an EnvLookup
// passed in by main (ProcessEnvironment()), so tests supply their own and nothing else calls
// getenv.
//
// Thread-safety: a parsed Settings is immutable and safe to read from any thread.
#ifndef GRAVAC_CORE_SETTINGS_H_
#define GRAVAC_CORE_SETTINGS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace gravac {

enum class SettingType { kString, kInt, kDouble, kBool };

struct SettingSpec {
  std::string_view name;           // flag name without dashes, e.g. "theta_min"
  std::string_view env;            // environment variable, e.g. "GRAVAC_THETA_MIN"; "" for none
  std::string_view default_value;  // text form; "" is allowed for strings
  std::string_view help;
  SettingType type = SettingType::kString;
};

// Returns the value of an environment variable, or nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;

// The process environment (the only place gravac calls getenv).
EnvLookup ProcessEnvironment();
// A fixed environment, for tests.
EnvLookup FixedEnvironment(std::map<std::string, std::string, std::less<>> vars);

class Settings {
 public:
  // Parses `args` (argv without the program name). Fails with InvalidArgument on an unknown
  // flag, a flag without its value, or a value that does not parse as the setting's type.
  static absl::StatusOr<Settings> Parse(absl::Span<const SettingSpec> table,
                                        absl::Span<const char* const> args, const EnvLookup& env);

  // Help text listing every setting with its flag, environment variable, default and help.
  static std::string Help(absl::Span<const SettingSpec> table, std::string_view program);

  bool help_requested() const { return help_requested_; }
  const std::vector<std::string>& positional() const { return positional_; }

  // Typed access. Fails with NotFound for a name that is not in the table and with
  // InvalidArgument when the setting has another type.
  absl::StatusOr<std::string> GetString(std::string_view name) const;
  absl::StatusOr<int64_t> GetInt(std::string_view name) const;
  absl::StatusOr<double> GetDouble(std::string_view name) const;
  absl::StatusOr<bool> GetBool(std::string_view name) const;

  // Where a value came from: "flag", "env GRAVAC_X" or "default".
  absl::StatusOr<std::string> Source(std::string_view name) const;

 private:
  struct Value {
    SettingType type;
    std::string text;
    std::string source;
  };
  absl::StatusOr<const Value*> Find(std::string_view name, SettingType type) const;

  std::map<std::string, Value, std::less<>> values_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
};

}  // namespace gravac

#endif  // GRAVAC_CORE_SETTINGS_H_
