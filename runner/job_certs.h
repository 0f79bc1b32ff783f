// Throwaway certificates for one job's control plane (OpenSSL's libcrypto): gravacrun makes a CA
// and, signed by it, a certificate for the controller (its hosts as subject alternative names),
// one per node (CN and DNS name = the node name, the identity the controller checks) and one for
// gravacctl ("gravac-client"), so that a local job runs over mutual TLS with no set-up. Keys are
// EC P-256. Tests use CertificateAuthority directly to make certificates of their own.
//
// Thread-safety: a CertificateAuthority is immutable after Create; the functions are stateless.
#ifndef GRAVAC_RUNNER_JOB_CERTS_H_
#define GRAVAC_RUNNER_JOB_CERTS_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gravac::runner {

struct PemCertificate {
  std::string cert;  // PEM certificate
  std::string key;   // PEM private key (PKCS#8)
};

class CertificateAuthority {
 public:
  // A self-signed CA named `common_name`, valid from an hour ago for `validity`. Internal naming
  // the failing libcrypto call.
  static absl::StatusOr<CertificateAuthority> Create(std::string_view common_name,
                                                     absl::Duration validity = absl::Hours(24 * 7));
  CertificateAuthority(CertificateAuthority&&) noexcept;
  CertificateAuthority& operator=(CertificateAuthority&&) noexcept;
  ~CertificateAuthority();

  const std::string& cert_pem() const { return ca_.cert; }

  // A certificate for TLS servers and clients, subject CN `common_name`; its subject alternative
  // names are `hosts`: each an IP address (IP SAN) or a DNS name. Signed by this CA, valid as
  // long as it.
  absl::StatusOr<PemCertificate> Issue(std::string_view common_name,
                                       const std::vector<std::string>& hosts) const;

 private:
  struct Keys;
  CertificateAuthority(std::unique_ptr<Keys> keys, PemCertificate ca, absl::Duration validity);

  std::unique_ptr<Keys> keys_;
  PemCertificate ca_;
  absl::Duration validity_;
};

// The files WriteJobCredentials wrote.
struct JobCredentialFiles {
  std::string ca;
  std::string controller_cert, controller_key;
  std::string client_cert, client_key;           // gravacctl's (CN gravac-client)
  std::vector<std::string> node_cert, node_key;  // by node index
};

// The client certificate's name; not a node name gravacrun gives (nodeN).
inline constexpr std::string_view kClientCommonName = "gravac-client";
inline constexpr std::string_view kControllerCommonName = "gravac-controller";

// Makes a CA and writes, into the existing private directory `dir`: ca.crt, controller.crt/.key
// (SANs: `controller_hosts` and gravac-controller), client.crt/.key and node-N.crt/.key for each
// of `node_names`. Keys are mode 0600, certificates 0644. Errors name the file or the call.
absl::StatusOr<JobCredentialFiles> WriteJobCredentials(
    const std::string& dir, const std::vector<std::string>& node_names,
    const std::vector<std::string>& controller_hosts);

// Writes `contents` to `path` created with `mode` (O_EXCL: an existing file is an error).
absl::Status WriteFileWithMode(const std::string& path, std::string_view contents, int mode);

}  // namespace gravac::runner

#endif  // GRAVAC_RUNNER_JOB_CERTS_H_
