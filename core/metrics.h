// MetricsEndpoint: one Prometheus registry per process and, unless switched off, an HTTP server
// (prometheus-cpp's Exposer) serving it at /metrics. gravacd and gravac-controller each build one
// in main from their `metrics_address` setting and pass the registry down to the components that
// register their metric families (no global registry).
//
//   ASSIGN_OR_RETURN(auto metrics, MetricsEndpoint::Start("0.0.0.0:0"));
//   prometheus::Family<prometheus::Counter>& steps = prometheus::BuildCounter()
//       .Name("gravac_steps_total").Help("...").Register(metrics->registry());
//   std::printf("%s\n", metrics->url().c_str());  // http://0.0.0.0:41713/metrics
//
// Address forms: "host:port", ":port" (all interfaces), port 0 = any free port; "off" or "" =
// keep the registry (components still update their metrics) but serve nothing.
//
// Health: the same server answers /healthz with 200 (an empty exposition) while the process
// serves, for liveness and readiness probes (gravacd's in Kubernetes).
//
// Naming (docs/METRICS.md): gravac_ prefix, base units in the name (_seconds, _bytes), _total for
// counters, bounded label values (never tensor names).
//
// Thread-safety: registry() and the metrics registered in it are thread-safe (prometheus-cpp);
// the endpoint itself is immutable after Start.
#ifndef GRAVAC_CORE_METRICS_H_
#define GRAVAC_CORE_METRICS_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace gravac {

class MetricsEndpoint {
 public:
  // Parses `address` and starts serving. InvalidArgument for a malformed address (naming it),
  // Unavailable when the port cannot be bound (in use, no such interface).
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(std::string_view address);

  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  prometheus::Registry& registry() { return *registry_; }
  bool serving() const { return port_ > 0; }
  int port() const { return port_; }          // the bound port; 0 when switched off
  const std::string& host() const { return host_; }  // as given; "0.0.0.0" for ":port"
  std::string url() const;                    // "http://host:port/metrics"; "" when off

 private:
  MetricsEndpoint() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Registry> health_;  // nothing in it: /healthz answers 200
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string host_;
  int port_ = 0;
};

// Splits "host:port" / ":port" into its parts (port 0..65535). InvalidArgument otherwise.
absl::Status ParseMetricsAddress(std::string_view address, std::string* host, int* port);

// `count` bucket bounds start, start*factor, ... (Prometheus' exponential buckets).
prometheus::Histogram::BucketBoundaries ExponentialBuckets(double start, double factor, int count);

// A bounded label value for a non-OK status: its code in snake case ("deadline_exceeded",
// "unavailable", "failed_precondition", ...); "ok" for OK.
std::string StatusKindLabel(const absl::Status& status);

// The registry's current contents in the text exposition format (what /metrics serves).
std::string SerializeMetrics(prometheus::Registry& registry);

}  // namespace gravac

#endif  // GRAVAC_CORE_METRICS_H_
