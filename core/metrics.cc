#include "core/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <thread>
#include <charconv>
#include <exception>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/absl_compat.h"
#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"

namespace gravac {

absl::Status ParseMetricsAddress(std::string_view address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(StrCat(
        "metrics address '", address, "' is not host:port, :port or off"));
  }
  std::string_view host_part = address.substr(0, colon);
  std::string_view port_part = address.substr(colon + 1);
  int value = -1;
  auto [end, ec] = std::from_chars(port_part.data(), port_part.data() + port_part.size(), value);
  if (port_part.empty() || ec != std::errc() || end != port_part.data() + port_part.size() ||
      value < 0 || value > 65535) {
    return absl::InvalidArgumentError(StrCat("metrics address '", address,
                                                   "': port '", port_part,
                                                   "' is not a number in 0..65535"));
  }
  if (host_part.size() >= 2 && host_part.front() == '[' && host_part.back() == ']') {
    host_part = host_part.substr(1, host_part.size() - 2);
  }
  *host = host_part.empty() ? "0.0.0.0" : std::string(host_part);
  *port = value;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(std::string_view address) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->registry_ = std::make_shared<prometheus::Registry>();
  const std::string trimmed(absl::StripAsciiWhitespace(AsAbsl(address)));
  if (trimmed.empty() || absl::AsciiStrToLower(trimmed) == "off") return endpoint;

  std::string host;
  int port = 0;
  if (absl::Status s = ParseMetricsAddress(trimmed, &host, &port); !s.ok()) return s;
  const bool v6 = host.find(':') != std::string::npos;
  const std::string bind = v6 ? StrCat("[", host, "]:", port) : StrCat(host, ":", port);
  try {
    // civetweb: one listening thread plus 2 workers is plenty for a scrape every few seconds.
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(bind, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(StrCat(
        "metrics: cannot serve on ", bind, " (", e.what(),
        "); pick another address with metrics_address (port 0 = any free port) or switch "
        "metrics off with metrics_address=off"));
  }
  endpoint->exposer_->RegisterCollectable(endpoint->registry_);
  endpoint->health_ = std::make_shared<prometheus::Registry>();
  endpoint->exposer_->RegisterCollectable(endpoint->health_, "/healthz");
  const std::vector<int> ports = endpoint->exposer_->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) {
    return absl::UnavailableError(StrCat("metrics: no listening port on ", bind));
  }
  endpoint->host_ = host;
  endpoint->port_ = ports.front();
  return endpoint;
}

namespace {

// Connects to host:port and closes at once (a best-effort wake-up of the server's accept poll).
void Knock(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const std::string target = (host == "0.0.0.0" || host.empty()) ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, target.c_str(), &addr.sin_addr) != 1) return;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  close(fd);
}

}  // namespace

MetricsEndpoint::~MetricsEndpoint() {
  if (exposer_ == nullptr) return;
  // civetweb's stop waits for its listening thread, which only looks at the stop flag when its
  // poll (2 s quantum) returns; without help every gravacd/controller exit took ~2 s more. A
  // knocker connects to the port until the exposer is gone, so the poll returns at once.
  std::atomic<bool> stopped{false};
  std::thread knocker([&] {
    while (!stopped.load()) {
      Knock(host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer_.reset();
  stopped.store(true);
  knocker.join();
}

std::string MetricsEndpoint::url() const {
  if (!serving()) return "";
  const bool v6 = host_.find(':') != std::string::npos;
  return v6 ? StrCat("http://[", host_, "]:", port_, "/metrics")
            : StrCat("http://", host_, ":", port_, "/metrics");
}

prometheus::Histogram::BucketBoundaries ExponentialBuckets(double start, double factor,
                                                           int count) {
  prometheus::Histogram::BucketBoundaries bounds;
  bounds.reserve(count > 0 ? count : 0);
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

std::string StatusKindLabel(const absl::Status& status) {
  return absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
}

std::string SerializeMetrics(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

}  // namespace gravac
