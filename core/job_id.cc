#include "core/job_id.h"

#include <random>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gravac {
namespace {

constexpr size_t kMaxPart = 128;

bool Allowed(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

absl::Status CheckPart(const char* what, const std::string& value) {
  if (value.size() > kMaxPart) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job %s '%s...' is %d characters, at most %d", what, value.substr(0, 32), value.size(),
        kMaxPart));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    if (!Allowed(value[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "job %s '%s': character %d is not one of [A-Za-z0-9._-]", what, value, i));
    }
  }
  return absl::OkStatus();
}

}  // namespace

JobId JobId::Normalized() const {
  JobId id = *this;
  if (id.name.empty()) id.name = kDefaultJobName;
  return id;
}

std::string JobId::ToString() const {
  if (run_id.empty()) return absl::StrFormat("job '%s'", name);
  return absl::StrFormat("job '%s' run '%s'", name, run_id);
}

absl::Status CheckJobId(const JobId& id) {
  if (absl::Status s = CheckPart("name", id.name); !s.ok()) return s;
  return CheckPart("run id", id.run_id);
}

std::string GenerateRunId() {
  std::random_device device;
  const uint32_t random = static_cast<uint32_t>(device());
  return absl::StrFormat("%s-%08x",
                         absl::FormatTime("%Y%m%dT%H%M%S", absl::Now(), absl::UTCTimeZone()),
                         random);
}

}  // namespace gravac
