#include "runner/job_certs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/absl_compat.h"
#include "core/errno_status.h"
#include "core/status.h"

namespace gravac::runner {
namespace {

// libcrypto's error queue as a Status naming the failing call (the one conversion of its errors).
absl::Status OpenSslError(std::string_view call) {
  std::string detail;
  while (unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof(text));
    if (!detail.empty()) detail += "; ";
    detail += text;
  }
  return absl::InternalError(
      absl::StrFormat("%s failed: %s", call, detail.empty() ? "no OpenSSL error" : detail));
}

#define GRAVAC_SSL_CHECK(call)               \
  do {                                       \
    if (!(call)) return OpenSslError(#call); \
  } while (false)

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Bio = std::unique_ptr<BIO, BioFree>;

absl::StatusOr<Pkey> NewKey() {
  Pkey key(EVP_EC_gen("P-256"));
  if (key == nullptr) return OpenSslError("EVP_EC_gen(P-256)");
  return key;
}

absl::StatusOr<std::string> BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  if (n <= 0 || data == nullptr) return OpenSslError("BIO_get_mem_data");
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<std::string> CertPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  GRAVAC_SSL_CHECK(bio != nullptr && PEM_write_bio_X509(bio.get(), cert) == 1);
  return BioText(bio.get());
}

absl::StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  GRAVAC_SSL_CHECK(bio != nullptr && PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0,
                                                              nullptr, nullptr) == 1);
  return BioText(bio.get());
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, ExtFree> ext(
      X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (ext == nullptr) return OpenSslError(absl::StrFormat("X509V3_EXT_conf_nid(%s)", value));
  GRAVAC_SSL_CHECK(X509_add_ext(cert, ext.get(), -1) == 1);
  return absl::OkStatus();
}

// A certificate for `key` named `common_name`, valid from an hour ago for `validity`, with a
// random serial; signed later.
absl::StatusOr<Cert> NewCert(EVP_PKEY* key, std::string_view common_name, absl::Duration validity) {
  Cert cert(X509_new());
  GRAVAC_SSL_CHECK(cert != nullptr);
  GRAVAC_SSL_CHECK(X509_set_version(cert.get(), 2) == 1);  // v3
  unsigned char serial[16];
  GRAVAC_SSL_CHECK(RAND_bytes(serial, sizeof(serial)) == 1);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  GRAVAC_SSL_CHECK(bn != nullptr);
  ASN1_INTEGER* sn = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  GRAVAC_SSL_CHECK(sn != nullptr);
  GRAVAC_SSL_CHECK(X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr);
  GRAVAC_SSL_CHECK(
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), absl::ToInt64Seconds(validity)) != nullptr);
  X509_NAME* name = X509_get_subject_name(cert.get());
  const std::string cn(common_name);
  GRAVAC_SSL_CHECK(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                              reinterpret_cast<const unsigned char*>(cn.c_str()),
                                              -1, -1, 0) == 1);
  GRAVAC_SSL_CHECK(X509_set_pubkey(cert.get(), key) == 1);
  return cert;
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

struct CertificateAuthority::Keys {
  Pkey key;
  Cert cert;
};

CertificateAuthority::CertificateAuthority(std::unique_ptr<Keys> keys, PemCertificate ca,
                                           absl::Duration validity)
    : keys_(std::move(keys)), ca_(std::move(ca)), validity_(validity) {}
CertificateAuthority::CertificateAuthority(CertificateAuthority&&) noexcept = default;
CertificateAuthority& CertificateAuthority::operator=(CertificateAuthority&&) noexcept = default;
CertificateAuthority::~CertificateAuthority() = default;

absl::StatusOr<CertificateAuthority> CertificateAuthority::Create(std::string_view common_name,
                                                                  absl::Duration validity) {
  auto keys = std::make_unique<Keys>();
  ASSIGN_OR_RETURN(keys->key, NewKey());
  ASSIGN_OR_RETURN(keys->cert, NewCert(keys->key.get(), common_name, validity));
  X509* cert = keys->cert.get();
  GRAVAC_SSL_CHECK(X509_set_issuer_name(cert, X509_get_subject_name(cert)) == 1);
  RETURN_IF_ERROR(AddExtension(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  RETURN_IF_ERROR(AddExtension(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign"));
  RETURN_IF_ERROR(AddExtension(cert, cert, NID_subject_key_identifier, "hash"));
  GRAVAC_SSL_CHECK(X509_sign(cert, keys->key.get(), EVP_sha256()) > 0);
  PemCertificate pem;
  ASSIGN_OR_RETURN(pem.cert, CertPem(cert));
  ASSIGN_OR_RETURN(pem.key, KeyPem(keys->key.get()));
  return CertificateAuthority(std::move(keys), std::move(pem), validity);
}

absl::StatusOr<PemCertificate> CertificateAuthority::Issue(
    std::string_view common_name, const std::vector<std::string>& hosts) const {
  ASSIGN_OR_RETURN(Pkey key, NewKey());
  ASSIGN_OR_RETURN(Cert cert, NewCert(key.get(), common_name, validity_));
  X509* ca = keys_->cert.get();
  GRAVAC_SSL_CHECK(X509_set_issuer_name(cert.get(), X509_get_subject_name(ca)) == 1);
  RETURN_IF_ERROR(AddExtension(cert.get(), ca, NID_basic_constraints, "critical,CA:FALSE"));
  RETURN_IF_ERROR(
      AddExtension(cert.get(), ca, NID_key_usage, "critical,digitalSignature,keyEncipherment"));
  RETURN_IF_ERROR(AddExtension(cert.get(), ca, NID_ext_key_usage, "serverAuth,clientAuth"));
  RETURN_IF_ERROR(AddExtension(cert.get(), ca, NID_authority_key_identifier, "keyid:always"));
  if (!hosts.empty()) {
    std::vector<std::string> sans;
    for (const std::string& h : hosts) sans.push_back(StrCat(IsIpAddress(h) ? "IP:" : "DNS:", h));
    RETURN_IF_ERROR(AddExtension(cert.get(), ca, NID_subject_alt_name, absl::StrJoin(sans, ",")));
  }
  GRAVAC_SSL_CHECK(X509_sign(cert.get(), keys_->key.get(), EVP_sha256()) > 0);
  PemCertificate pem;
  ASSIGN_OR_RETURN(pem.cert, CertPem(cert.get()));
  ASSIGN_OR_RETURN(pem.key, KeyPem(key.get()));
  return pem;
}

absl::Status WriteFileWithMode(const std::string& path, std::string_view contents, int mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(errno, StrCat("creating ", path));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return ErrnoStatus(err, StrCat("writing ", path));
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return ErrnoStatus(errno, StrCat("closing ", path));
  return absl::OkStatus();
}

absl::StatusOr<JobCredentialFiles> WriteJobCredentials(
    const std::string& dir, const std::vector<std::string>& node_names,
    const std::vector<std::string>& controller_hosts) {
  ASSIGN_OR_RETURN(CertificateAuthority ca, CertificateAuthority::Create("gravac job CA"));
  JobCredentialFiles files;
  files.ca = StrCat(dir, "/ca.crt");
  RETURN_IF_ERROR(WriteFileWithMode(files.ca, ca.cert_pem(), 0644));
  // Writes name.crt (0644) and name.key (0600) and returns their paths.
  auto write =
      [&](const std::string& name, std::string_view cn,
          std::vector<std::string> hosts) -> absl::StatusOr<std::pair<std::string, std::string>> {
    ASSIGN_OR_RETURN(PemCertificate pem, ca.Issue(cn, hosts));
    std::pair<std::string, std::string> paths = {StrCat(dir, "/", name, ".crt"),
                                                 StrCat(dir, "/", name, ".key")};
    RETURN_IF_ERROR(WriteFileWithMode(paths.second, pem.key, 0600));
    RETURN_IF_ERROR(WriteFileWithMode(paths.first, pem.cert, 0644));
    return paths;
  };
  std::vector<std::string> hosts = controller_hosts;
  hosts.emplace_back(kControllerCommonName);
  ASSIGN_OR_RETURN(auto controller, write("controller", kControllerCommonName, hosts));
  files.controller_cert = controller.first;
  files.controller_key = controller.second;
  ASSIGN_OR_RETURN(auto client, write("client", kClientCommonName, {}));
  files.client_cert = client.first;
  files.client_key = client.second;
  for (size_t n = 0; n < node_names.size(); ++n) {
    ASSIGN_OR_RETURN(auto node, write(StrCat("node-", n), node_names[n], {node_names[n]}));
    files.node_cert.push_back(node.first);
    files.node_key.push_back(node.second);
  }
  return files;
}

}  // namespace gravac::runner
