#include "daemon/transport/ucx/worker.h"

#include <poll.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/errno_status.h"
#include "ucs/config/parser.h"
#include "uct/api/uct.h"

namespace gravac::transport::ucx {

absl::StatusCode UcsCode(ucs_status_t status) {
  switch (status) {
    case UCS_OK:
      return absl::StatusCode::kOk;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_REJECTED:
    case UCS_ERR_CANCELED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_NOT_CONNECTED:
      return absl::StatusCode::kUnavailable;
    case UCS_ERR_TIMED_OUT:
      return absl::StatusCode::kDeadlineExceeded;
    case UCS_ERR_MESSAGE_TRUNCATED:
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return absl::StatusCode::kInvalidArgument;
    case UCS_ERR_NO_ELEM:
    case UCS_ERR_NO_DEVICE:
    case UCS_ERR_NO_RESOURCE:
      return absl::StatusCode::kNotFound;
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::StatusCode::kResourceExhausted;
    case UCS_ERR_UNSUPPORTED:
      return absl::StatusCode::kUnimplemented;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status UcsStatus(ucs_status_t status, const char* call, const char* file, int line) {
  return absl::Status(UcsCode(status), absl::StrCat(call, " failed: ", ucs_status_string(status),
                                                    " (", file, ":", line, ")"));
}

namespace {

// Every UCX_* variable name UCX knows at this point (as `ucx_info -c` lists them).
std::set<std::string> KnownVariables() {
  char* text = nullptr;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return {};
  ucs_config_parser_print_all_opts(
      stream, "UCX_",
      static_cast<ucs_config_print_flags_t>(UCS_CONFIG_PRINT_CONFIG | UCS_CONFIG_PRINT_HIDDEN),
      &ucs_config_global_list);
  std::fclose(stream);
  std::set<std::string> names;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text, length), '\n')) {
    size_t eq = line.find('=');
    if (absl::StartsWith(line, "UCX_") && eq != absl::string_view::npos) {
      names.emplace(line.substr(0, eq));
    }
  }
  std::free(text);
  return names;
}

// The name ucp_config_modify takes for the UCX variable `variable` ("UCX_..."). UCP's own options
// are named without "UCX_"; a transport's or memory domain's option is kept by UCP and applied to
// that component's table when its interfaces open, by the name within the table, so the
// component's prefix comes off too: UCX_TCP_PORT_RANGE is "PORT_RANGE" (given as
// "TCP_PORT_RANGE", UCX 1.13 warns "invalid configuration" and ignores it). The longest prefix of
// a registered component wins (TCP_CM_ before TCP_); UCM's MEM_ options are read by UCM from the
// environment only and are left as they are.
std::string ConfigName(absl::string_view variable) {
  absl::string_view name = variable.substr(4);
  size_t strip = 0;
  ucs_config_global_list_entry_t* entry = nullptr;
  ucs_list_for_each(entry, &ucs_config_global_list, list) {
    if (entry->prefix == nullptr) continue;
    const absl::string_view prefix(entry->prefix);
    if (prefix.empty() || prefix == "MEM_" || prefix.size() >= name.size()) continue;
    if (absl::StartsWith(name, prefix) && prefix.size() > strip) strip = prefix.size();
  }
  return std::string(name.substr(strip));
}

// Whether a UCX_TLS value (null: unset, UCX's choice) allows tcp and nothing else but self.
bool TcpOnly(const char* tls) {
  if (tls == nullptr) return false;
  bool tcp = false;
  for (absl::string_view name : absl::StrSplit(tls, ',')) {
    if (name == "tcp") {
      tcp = true;
    } else if (name != "self") {
      return false;
    }
  }
  return tcp;
}

// Whether a UCX variable is set in params (`given`) or in the environment.
bool IsSet(const std::set<std::string>& given, const char* key) {
  return given.contains(key) || std::getenv(key) != nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(
    const std::vector<std::pair<std::string, std::string>>& params, absl::Duration liveness) {
  ucp_config_t* config = nullptr;
  GRAVAC_RETURN_IF_UCS(ucp_config_read(nullptr, nullptr, &config));  // reads UCX_* variables
  absl::Cleanup release_config = [config] { ucp_config_release(config); };

  // Registers the tables of UCT's loadable components (ib, cma, ...) with UCS, so that
  // ConfigName knows their prefixes before ucp_init loads them.
  uct_component_h* components = nullptr;
  unsigned component_count = 0;
  if (uct_query_components(&components, &component_count) == UCS_OK) {
    uct_release_component_list(components);
  }
  std::set<std::string> given;
  std::string tls_param;
  for (const auto& [key, value] : params) {
    if (!absl::StartsWith(key, "UCX_") || key.size() == 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("ucx transport: parameter '", key, "' is not a UCX_* variable"));
    }
    ucs_status_t s = ucp_config_modify(config, ConfigName(key).c_str(), value.c_str());
    if (s != UCS_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat("ucx transport: parameter ", key, "=", value, ": ", ucs_status_string(s)));
    }
    given.insert(key);
    if (key == "UCX_TLS") tls_param = value;
  }
  // Defaults that the environment and params may override (see worker.h). UCX has already read
  // the environment into `config`; only std::getenv tells whether a variable was set there.
  const auto set_default = [&](const char* key, const std::string& value) {
    if (given.contains(key) || std::getenv(key) != nullptr) return;
    (void)ucp_config_modify(config, key + 4, value.c_str());
  };
  set_default("UCX_KEEPALIVE_INTERVAL",
              absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(liveness / 4)), "ms"));
  const char* tls = given.contains("UCX_TLS") ? tls_param.c_str() : std::getenv("UCX_TLS");
  if (TcpOnly(tls) && !IsSet(given, "UCX_RNDV_THRESH")) {
    // Up to kEagerMessageLimit eager (worker.h).
    GRAVAC_RETURN_IF_UCS(
        ucp_config_modify(config, "RNDV_THRESH", absl::StrCat(kEagerMessageLimit + 1).c_str()));
  }

  std::unique_ptr<Worker> w(new Worker());
  ucp_params_t ucp_params = {};
  ucp_params.field_mask = UCP_PARAM_FIELD_FEATURES;
  ucp_params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  GRAVAC_RETURN_IF_UCS(ucp_init(&ucp_params, config, &w->context_));
  // ucp_config_modify accepts any name; check the keys against every option UCX registered (its
  // transports' tables are loaded by ucp_init).
  const std::set<std::string> known = KnownVariables();
  for (const std::string& key : given) {
    if (!known.contains(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ucx transport: parameter '", key, "' is not a UCX variable"));
    }
  }

  ucp_worker_params_t worker_params = {};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // SERIALIZED: the engine hands its collectives to a helper thread (one thread at a time).
  worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  GRAVAC_RETURN_IF_UCS(ucp_worker_create(w->context_, &worker_params, &w->worker_));
  GRAVAC_RETURN_IF_UCS(ucp_worker_get_efd(w->worker_, &w->event_fd_));

  ucp_address_t* address = nullptr;
  size_t length = 0;
  GRAVAC_RETURN_IF_UCS(ucp_worker_get_address(w->worker_, &address, &length));
  w->address_.assign(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(w->worker_, address);
  return w;
}

absl::Status Worker::WaitForEvent(absl::Duration timeout) {
  // UCS_ERR_BUSY: events arrived since the last progress; the caller progresses and re-tests.
  const ucs_status_t armed = ucp_worker_arm(worker_);
  if (armed == UCS_ERR_BUSY) return absl::OkStatus();
  if (armed != UCS_OK) return UcsStatus(armed, "ucp_worker_arm", __FILE__, __LINE__);
  if (timeout <= absl::ZeroDuration()) return absl::OkStatus();
  const timespec limit = absl::ToTimespec(timeout);
  pollfd fd = {event_fd_, POLLIN, 0};
  if (ppoll(&fd, 1, &limit, nullptr) < 0 && errno != EINTR) {
    return ErrnoCallStatus(errno, "ppoll on the ucx worker event fd", __FILE__, __LINE__);
  }
  return absl::OkStatus();
}

Worker::~Worker() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

}  // namespace gravac::transport::ucx
