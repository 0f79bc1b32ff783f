// The command line of gravac-controller: its settings table (the server's own settings, the TLS
// settings of core/tls_settings.h, the job settings of core/job_settings.h, then log_level) and
// their parsing into the options of the server and its Coordinator.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_CONTROLLER_CONTROLLER_SETTINGS_H_
#define GRAVAC_CONTROLLER_CONTROLLER_SETTINGS_H_

#include <map>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/controller_service.h"
#include "core/logging.h"
#include "core/settings.h"

namespace gravac::controller {

// Every setting of gravac-controller, in help order. The entries point into static tables.
std::vector<SettingSpec> ControllerSettings();

// The server and Coordinator options of parsed settings; `log` (not owned) becomes the
// Coordinator's logger. InvalidArgument naming the setting for a value outside its range (an
// unknown compressor, sparse_values, policy or norm mode, a policy config PolicyConfig::Validate
// rejects, a malformed decision_delay).
absl::StatusOr<ControllerServerOptions> OptionsFromSettings(const Settings& s, Logger* log);

// Parses the --decision_delay hook: "node:ms[,node:ms]" ("" = none). InvalidArgument naming the
// bad entry.
absl::StatusOr<std::map<int, absl::Duration>> ParseDecisionDelay(std::string_view text);

}  // namespace gravac::controller

#endif  // GRAVAC_CONTROLLER_CONTROLLER_SETTINGS_H_
