#include "core/logging.h"

#include <string.h>

#include <optional>

#include "absl/strings/ascii.h"
#include "core/absl_compat.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/enum_names.h"

namespace gravac {
namespace {

constexpr EnumName<LogLevel> kLevels[] = {{LogLevel::kDebug, "debug"}, {LogLevel::kInfo, "info"},
                                           {LogLevel::kWarning, "warning"},
                                           {LogLevel::kError, "error"}};

// A line's level letter: D, I, W or E.
char LevelLetter(LogLevel level) { return absl::ascii_toupper(NameOf(kLevels, level, "?")[0]); }

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view text) {
  std::string lower = absl::AsciiStrToLower(AsAbsl(text));
  if (lower == "warn") return LogLevel::kWarning;
  if (std::optional<LogLevel> level = ValueOf(kLevels, lower)) return *level;
  return absl::InvalidArgumentError(
      StrCat("unknown log level '", text, "' (", NameList(kLevels), ")"));
}

Logger::Logger(std::string prefix, LogLevel min_level, std::FILE* sink)
    : prefix_(std::move(prefix)), min_level_(min_level), sink_(sink) {}

void Logger::Log(LogLevel level, const char* file, int line, std::string_view message) const {
  if (!Enabled(level)) return;
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  std::string text = StrCat(
      std::string(1, LevelLetter(level)),
      absl::FormatTime(" %H:%M:%E6S ", absl::Now(), absl::LocalTimeZone()), prefix_, " ", base,
      ":", line, "] ", message, "\n");
  fwrite(text.data(), 1, text.size(), sink_);
  fflush(sink_);
}

}  // namespace gravac
