#include "core/settings.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "core/absl_compat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/enum_names.h"
#include "core/status.h"

namespace gravac {
namespace {

std::string_view TypeName(SettingType type) {
  constexpr EnumName<SettingType> kNames[] = {
      {SettingType::kString, "string"}, {SettingType::kInt, "integer"},
      {SettingType::kDouble, "number"}, {SettingType::kBool, "boolean"}};
  return NameOf(kNames, type, "?");
}

absl::StatusOr<bool> ParseBool(std::string_view text) {
  std::string lower = absl::AsciiStrToLower(AsAbsl(text));
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
  return absl::InvalidArgumentError("not a boolean");
}

absl::Status CheckType(const SettingSpec& spec, std::string_view text, std::string_view source) {
  bool ok = true;
  switch (spec.type) {
    case SettingType::kString:
      break;
    case SettingType::kInt: {
      int64_t v;
      ok = absl::SimpleAtoi(AsAbsl(text), &v);
      break;
    }
    case SettingType::kDouble: {
      double v;
      ok = absl::SimpleAtod(AsAbsl(text), &v);
      break;
    }
    case SettingType::kBool:
      ok = ParseBool(text).ok();
      break;
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat("setting '%s' (from %s) = '%s' is not a %s",
                                                    spec.name, source, text,
                                                    TypeName(spec.type)));
}

const SettingSpec* FindSpec(absl::Span<const SettingSpec> table, std::string_view name) {
  for (const SettingSpec& spec : table) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

EnvLookup FixedEnvironment(std::map<std::string, std::string, std::less<>> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

absl::StatusOr<Settings> Settings::Parse(absl::Span<const SettingSpec> table,
                                         absl::Span<const char* const> args,
                                         const EnvLookup& env) {
  Settings settings;
  for (const SettingSpec& spec : table) {
    Value value{spec.type, std::string(spec.default_value), "default"};
    if (!spec.env.empty()) {
      if (std::optional<std::string> e = env(spec.env)) {
        value.text = *e;
        value.source = StrCat("env ", spec.env);
      }
    }
    RETURN_IF_ERROR(CheckType(spec, value.text, value.source));
    if (!settings.values_.emplace(std::string(spec.name), std::move(value)).second) {
      return absl::InternalError(StrCat("setting '", spec.name, "' declared twice"));
    }
  }

  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--") {
      for (size_t j = i + 1; j < args.size(); ++j) settings.positional_.emplace_back(args[j]);
      break;
    }
    if (arg == "--help" || arg == "-h") {
      settings.help_requested_ = true;
      continue;
    }
    if (arg.substr(0, 2) != "--") {
      settings.positional_.emplace_back(arg);
      continue;
    }
    std::string_view body = arg.substr(2);
    std::string_view name = body;
    std::optional<std::string_view> text;
    if (size_t eq = body.find('='); eq != std::string_view::npos) {
      name = body.substr(0, eq);
      text = body.substr(eq + 1);
    }
    const SettingSpec* spec = FindSpec(table, name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(StrCat("unknown flag --", name, "; see --help"));
    }
    if (!text) {
      if (spec->type == SettingType::kBool &&
          (i + 1 >= args.size() || !ParseBool(args[i + 1]).ok())) {
        text = "true";  // a bare boolean flag
      } else if (i + 1 < args.size()) {
        text = args[++i];
      } else {
        return absl::InvalidArgumentError(StrCat("flag --", name, " needs a value"));
      }
    }
    RETURN_IF_ERROR(CheckType(*spec, *text, StrCat("flag --", name)));
    Value& value = settings.values_.find(name)->second;
    value.text = std::string(*text);
    value.source = "flag";
  }
  return settings;
}

std::string Settings::Help(absl::Span<const SettingSpec> table, std::string_view program) {
  std::string out = StrCat("usage: ", program, " [--flag=value ...]\n\n");
  for (const SettingSpec& spec : table) {
    absl::StrAppendFormat(&out, "  --%s (%s, default \"%s\"%s%s)\n      %s\n", spec.name,
                          TypeName(spec.type), spec.default_value, spec.env.empty() ? "" : ", env ",
                          spec.env, spec.help);
  }
  return out;
}

absl::StatusOr<const Settings::Value*> Settings::Find(std::string_view name,
                                                      SettingType type) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    return absl::NotFoundError(StrCat("no setting named '", name, "'"));
  }
  if (it->second.type != type) {
    return absl::InvalidArgumentError(StrCat("setting '", name, "' is a ",
                                                   TypeName(it->second.type), ", not a ",
                                                   TypeName(type)));
  }
  return &it->second;
}

absl::StatusOr<std::string> Settings::GetString(std::string_view name) const {
  ASSIGN_OR_RETURN(const Value* v, Find(name, SettingType::kString));
  return v->text;
}

absl::StatusOr<int64_t> Settings::GetInt(std::string_view name) const {
  ASSIGN_OR_RETURN(const Value* v, Find(name, SettingType::kInt));
  int64_t out = 0;
  absl::SimpleAtoi(v->text, &out);  // checked in Parse
  return out;
}

absl::StatusOr<double> Settings::GetDouble(std::string_view name) const {
  ASSIGN_OR_RETURN(const Value* v, Find(name, SettingType::kDouble));
  double out = 0;
  absl::SimpleAtod(v->text, &out);  // checked in Parse
  return out;
}

absl::StatusOr<bool> Settings::GetBool(std::string_view name) const {
  ASSIGN_OR_RETURN(const Value* v, Find(name, SettingType::kBool));
  return ParseBool(v->text);
}

absl::StatusOr<std::string> Settings::Source(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    return absl::NotFoundError(StrCat("no setting named '", name, "'"));
  }
  return it->second.source;
}

}  // namespace gravac
