// The control plane's security settings: every gRPC connection of a job (gravac-controller
// serving; gravacd and gravacctl dialling it) is mutual TLS over the certificate, key and CA named
// here, or plain text when --insecure_plaintext is given explicitly. Declared once here and
// appended to each binary's own table; proto/grpc_security.h parses them (GrpcSecurityFromSettings)
// into credentials. The environment variables are the same for every binary, so a worker
// environment that gravacrun fills (GRAVAC_TLS_*) also serves a gravacctl started from it.
//
// Thread-safety: constants.
#ifndef GRAVAC_CORE_TLS_SETTINGS_H_
#define GRAVAC_CORE_TLS_SETTINGS_H_

#include "absl/types/span.h"
#include "core/settings.h"

namespace gravac {

// Every binary that speaks gRPC: its own certificate and key, the CA that signs its peers, and
// the explicit opt-out.
inline constexpr SettingSpec kTlsSettings[] = {
    {"tls_cert", "GRAVAC_TLS_CERT", "",
     "PEM certificate of this process (the controller's server certificate; a daemon's carries its "
     "node name as CN or DNS SAN)",
     SettingType::kString},
    {"tls_key", "GRAVAC_TLS_KEY", "", "PEM private key of --tls_cert (keep it mode 0600)",
     SettingType::kString},
    {"tls_ca", "GRAVAC_TLS_CA", "", "PEM CA certificate(s) that sign the peers' certificates",
     SettingType::kString},
    {"insecure_plaintext", "GRAVAC_INSECURE_PLAINTEXT", "false",
     "serve / dial the control plane without TLS or authentication (anyone who reaches the port "
     "can steer the job; logged as a warning)",
     SettingType::kBool},
};

// The clients' (gravacd, gravacctl) extra setting: the name the controller's certificate must
// carry, when it is not the host part of --controller (e.g. a Kubernetes Service name).
inline constexpr SettingSpec kTlsClientSettings[] = {
    {"tls_server_name", "GRAVAC_TLS_SERVER_NAME", "",
     "name expected in the controller's certificate (default: the host of --controller)",
     SettingType::kString},
};

inline absl::Span<const SettingSpec> TlsSettings() { return kTlsSettings; }
inline absl::Span<const SettingSpec> TlsClientSettings() { return kTlsClientSettings; }

}  // namespace gravac

#endif  // GRAVAC_CORE_TLS_SETTINGS_H_
