#include "base/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/read_file.h"
#include "base/status_macros.h"

namespace kprof::base {
namespace {

struct FreeBio {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct FreeX509 {
  void operator()(X509* x) const { X509_free(x); }
};
using Certificate = std::unique_ptr<X509, FreeX509>;
struct FreeKey {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, FreeBio> Memory(const std::string& pem) {
  return std::unique_ptr<BIO, FreeBio>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// What a PEM file holds, by its first "-----BEGIN X-----" line: "a certificate", "a private
// key", "an encrypted private key", or "no PEM block".
std::string Holds(const std::string& pem) {
  const size_t begin = pem.find("-----BEGIN ");
  if (begin == std::string::npos) return "no PEM block (not a PEM file)";
  const size_t end = pem.find("-----", begin + 11);
  const absl::string_view label =
      absl::string_view(pem).substr(begin + 11, end == std::string::npos ? 0 : end - begin - 11);
  if (label == "ENCRYPTED PRIVATE KEY" || absl::StrContains(pem, "Proc-Type: 4,ENCRYPTED")) {
    return "an encrypted private key";
  }
  if (absl::EndsWith(label, "PRIVATE KEY")) return "a private key";
  if (label == "CERTIFICATE" || label == "TRUSTED CERTIFICATE") return "a certificate";
  if (label == "CERTIFICATE REQUEST") return "a certificate request, not a certificate";
  return absl::StrCat("a PEM block of ", label);
}

// No passphrase prompt: an encrypted key is refused rather than asked for on the terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

std::string Named(const std::string& option, const std::string& path) {
  return absl::StrCat(option, " '", path, "'");
}

// The first certificate of `pem`, the file `option` names at `path`; INVALID_ARGUMENT saying
// what the file holds instead, and what is `accepted`.
absl::StatusOr<Certificate> FirstCertificate(const std::string& pem, const std::string& option,
                                             const std::string& path, absl::string_view accepted) {
  std::unique_ptr<BIO, FreeBio> bio = Memory(pem);
  Certificate cert(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
  if (cert == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(Named(option, path),
                                                   " holds no certificate: it holds ", Holds(pem),
                                                   " (accepted: ", accepted, ")"));
  }
  return cert;
}

}  // namespace

absl::StatusOr<TlsPair> ReadTlsPair(const std::string& cert_path, const std::string& key_path,
                                    const std::string& cert_option, const std::string& key_option) {
  TlsPair pair;
  KPROF_ASSIGN_OR_RETURN(pair.cert_pem, ReadFile(cert_path, "the TLS certificate"));
  KPROF_ASSIGN_OR_RETURN(pair.key_pem, ReadFile(key_path, "the TLS key"));
  const std::string cert_holds = Holds(pair.cert_pem), key_holds = Holds(pair.key_pem);
  if (cert_holds != "a certificate" && key_holds == "a certificate" &&
      absl::StrContains(cert_holds, "private key")) {
    return absl::InvalidArgumentError(
        absl::StrCat(Named(cert_option, cert_path), " holds a private key and ",
                     Named(key_option, key_path), " a certificate: swapped? (", cert_option,
                     " takes the certificate, ", key_option, " its key)"));
  }
  KPROF_ASSIGN_OR_RETURN(
      const Certificate cert,
      FirstCertificate(pair.cert_pem, cert_option, cert_path, "a PEM certificate chain"));
  if (key_holds == "an encrypted private key") {
    return absl::InvalidArgumentError(absl::StrCat(
        Named(key_option, key_path),
        " is an encrypted private key, which gRPC cannot use: decrypt it (openssl pkey -in KEY "
        "-out PLAIN.key) and keep it readable by its owner alone"));
  }
  std::unique_ptr<BIO, FreeBio> key_bio = Memory(pair.key_pem);
  std::unique_ptr<EVP_PKEY, FreeKey> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr));
  if (key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(Named(key_option, key_path),
                                                   " holds no private key: it holds ", key_holds,
                                                   " (accepted: a PEM private key)"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "the key in ", Named(key_option, key_path), " is not the key of the certificate in ",
        Named(cert_option, cert_path), " (give the key the certificate was made for)"));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0) {
    std::unique_ptr<BIO, FreeBio> out(BIO_new(BIO_s_mem()));
    ASN1_TIME_print(out.get(), X509_get0_notAfter(cert.get()));
    char* text = nullptr;
    const long size = BIO_get_mem_data(out.get(), &text);
    return absl::InvalidArgumentError(absl::StrCat(
        "the certificate in ", Named(cert_option, cert_path), " expired on ",
        absl::string_view(text, static_cast<size_t>(size)), ": no peer would accept it"));
  }
  return pair;
}

absl::StatusOr<std::string> ReadCertificates(const std::string& path, const std::string& option) {
  KPROF_ASSIGN_OR_RETURN(std::string pem, ReadFile(path, "the CA certificate"));
  KPROF_RETURN_IF_ERROR(FirstCertificate(pem, option, path, "PEM CA certificates").status());
  return pem;
}

}  // namespace kprof::base
