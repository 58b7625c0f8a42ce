// TLS files checked before gRPC sees them: certificates and keys made here with OpenSSL, then
// given the way people get them wrong.
#include "base/tls_files.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace kprof::base {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::HasSubstr;

// A self-signed certificate for a fresh key, valid from `from` to `to` seconds from now; its
// PEM and its key's PEM (encrypted with `passphrase` when one is given).
struct Made {
  std::string cert, key;
};
Made MakeCertificate(long from, long to, const char* passphrase = nullptr) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), from);
  X509_gmtime_adj(X509_getm_notAfter(cert), to);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("kprof-test"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  Made made;
  const auto text = [](BIO* out) {
    char* data = nullptr;
    const long size = BIO_get_mem_data(out, &data);
    std::string pem(data, static_cast<size_t>(size));
    BIO_free(out);
    return pem;
  };
  BIO* out = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(out, cert);
  made.cert = text(out);
  out = BIO_new(BIO_s_mem());
  if (passphrase != nullptr) {
    PEM_write_bio_PKCS8PrivateKey(out, key, EVP_aes_256_cbc(), passphrase,
                                  static_cast<int>(std::string(passphrase).size()), nullptr,
                                  nullptr);
  } else {
    PEM_write_bio_PrivateKey(out, key, nullptr, nullptr, 0, nullptr, nullptr);
  }
  made.key = text(out);
  X509_free(cert);
  EVP_PKEY_free(key);
  return made;
}

class TlsFilesTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(TlsFilesTest, APairThatIsOneIsRead) {
  const Made made = MakeCertificate(-60, 3600);
  const auto pair = ReadTlsPair(Write("c.pem", made.cert), Write("c.key", made.key));
  ASSERT_THAT(pair, IsOk());
  EXPECT_EQ(pair->cert_pem, made.cert);
  EXPECT_EQ(pair->key_pem, made.key);
  EXPECT_THAT(ReadCertificates(Write("ca.pem", made.cert), "--tls-ca"), IsOk());
}

TEST_F(TlsFilesTest, EachMistakeIsNamedWithItsFiles) {
  const Made one = MakeCertificate(-60, 3600), other = MakeCertificate(-60, 3600);
  const std::string cert = Write("one.pem", one.cert), key = Write("one.key", one.key);
  const std::string other_key = Write("other.key", other.key);
  EXPECT_THAT(ReadTlsPair(cert, other_key),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "the key in --tls-key '" + other_key +
                           "' is not the key of the certificate in --tls-cert '" + cert +
                           "' (give the key the certificate was made for)"));
  EXPECT_THAT(ReadTlsPair(key, cert),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("swapped?")));
  EXPECT_THAT(
      ReadTlsPair(key, key),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--tls-cert '" + key + "' holds no certificate: it holds a private key")));
  EXPECT_THAT(
      ReadTlsPair(cert, cert),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--tls-key '" + cert + "' holds no private key: it holds a certificate")));
  const std::string text = Write("notes.txt", "not PEM at all\n");
  EXPECT_THAT(ReadTlsPair(text, key),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("it holds no PEM block (not a PEM file)")));
  EXPECT_THAT(ReadTlsPair(dir_.path() + "/missing.pem", key),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing.pem")));
  EXPECT_THAT(ReadCertificates(key, "--tls-client-ca"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls-client-ca '" + key +
                                 "' holds no certificate: it holds a private key")));
  // The options are named as the caller's.
  EXPECT_THAT(ReadTlsPair(cert, other_key, "KPROF_TLS_CERT", "KPROF_TLS_KEY"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("KPROF_TLS_KEY '")));
}

TEST_F(TlsFilesTest, AnEncryptedKeyOrAnExpiredCertificateIsRefused) {
  const Made locked = MakeCertificate(-60, 3600, "passphrase");
  ASSERT_THAT(locked.key, HasSubstr("ENCRYPTED PRIVATE KEY"));
  EXPECT_THAT(ReadTlsPair(Write("l.pem", locked.cert), Write("l.key", locked.key)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is an encrypted private key, which gRPC cannot use")));
  const Made old = MakeCertificate(-7200, -3600);
  EXPECT_THAT(ReadTlsPair(Write("old.pem", old.cert), Write("old.key", old.key)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("' expired on ")));
}

}  // namespace
}  // namespace kprof::base
