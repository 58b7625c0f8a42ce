// Authentication and TLS end to end: bearer tokens, TLS, mutual TLS with certificates made
// here with openssl, and the refusal to listen beyond loopback without them.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "emulation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::IsOkAndHolds;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "s3cret-token-for-the-test";
constexpr char kOtherToken[] = "another-accepted-token";

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    const std::string d = certs_->path();
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::ofstream(d + "/san.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    const std::string script =
        "cd " + d +
        " && set -e && exec 2>openssl.log\n"
        "openssl req -x509 " +
        ec +
        " -keyout ca.key -out ca.pem -days 2 -subj /CN=kprof-test-ca\n"
        "openssl req -x509 " +
        ec +
        " -keyout other.key -out other.pem -days 2 -subj /CN=other\n"
        "openssl req " +
        ec +
        " -keyout server.key -out server.csr -subj /CN=localhost\n"
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out server.pem -days 2 -extfile san.ext\n"
        "openssl req " +
        ec +
        " -keyout client.key -out client.csr -subj /CN=client\n"
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out client.pem -days 2\n"
        "openssl req " +
        ec +
        " -keyout client2.key -out client2.csr -subj /CN=client2\n"
        "openssl x509 -req -in client2.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out client2.pem -days 2\n";
    ASSERT_EQ(std::system(("bash -c '" + script + "'").c_str()), 0)
        << ReadFileBytes(d + "/openssl.log");
    std::ofstream(d + "/tokens") << "# accepted tokens\n"
                                 << kToken << "\n\n"
                                 << kOtherToken << "\n";
  }
  static void TearDownTestSuite() { delete certs_; }

  static std::string Cert(const std::string& name) { return certs_->path() + "/" + name; }

  void StartDaemon(const std::vector<std::string>& extra) {
    daemon_.set_stderr(dir_.path() + "/kprofd.log");
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache", extra)) << Log();
  }

  std::unique_ptr<client::Client> Connect(client::ClientOptions options) {
    options.timeout = absl::Seconds(10);
    return *client::Client::Connect(daemon_.target(), options);
  }

  std::string Log() const { return ReadFileBytes(dir_.path() + "/kprofd.log"); }

  static TempDir* certs_;
  TempDir dir_;
  Daemon daemon_;
};

TempDir* SecurityTest::certs_ = nullptr;

TEST_F(SecurityTest, TokensAreRequiredCheckedAndNeverLogged) {
  StartDaemon({"--token-file", Cert("tokens")});
  EXPECT_THAT(Connect({})->Info(),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("no credentials")));
  client::ClientOptions wrong;
  wrong.bearer_token = "not-the-token";
  EXPECT_THAT(Connect(wrong)->Info(),
              StatusIs(absl::StatusCode::kUnauthenticated, "wrong bearer token"));
  EXPECT_THAT(Connect(wrong)->LoadModuleFile(testing::TestModulePath("vector_add")),
              StatusIs(absl::StatusCode::kUnauthenticated));
  v1::BatchJob job;
  job.set_id("j");
  job.mutable_time_evaluate()->mutable_call()->set_module_id("builtin");
  job.mutable_time_evaluate()->mutable_call()->set_function("spin_us");
  int updates = 0;
  EXPECT_THAT(Connect(wrong)->MeasureBatch({job}, [&](const v1::BatchUpdate&) { ++updates; }),
              StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_EQ(updates, 0);
  for (const char* token : {kToken, kOtherToken}) {
    client::ClientOptions right;
    right.bearer_token = token;
    auto client = Connect(right);
    EXPECT_THAT(client->Info(), IsOk());
    EXPECT_THAT(client->LoadModuleFile(testing::TestModulePath("vector_add")), IsOk());
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id("builtin");
    request.mutable_call()->set_function("spin_us");
    request.mutable_call()->add_args("float64:10");
    EXPECT_THAT(client->TimeEvaluate(request), IsOk());
  }
  daemon_.Stop();
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr("bearer token"));
  EXPECT_THAT(log, Not(HasSubstr(kToken)));
  EXPECT_THAT(log, Not(HasSubstr(kOtherToken)));
  EXPECT_THAT(log, Not(HasSubstr("not-the-token")));
}

TEST_F(SecurityTest, TlsEndToEnd) {
  StartDaemon({"--tls-cert", Cert("server.pem"), "--tls-key", Cert("server.key")});
  client::ClientOptions trusted;
  trusted.tls_root_certs_pem = ReadFileBytes(Cert("ca.pem"));
  EXPECT_THAT(Connect(trusted)->Info(), IsOk());
  client::ClientOptions wrong_ca;
  wrong_ca.tls_root_certs_pem = ReadFileBytes(Cert("other.pem"));
  EXPECT_THAT(Connect(wrong_ca)->Info(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(Connect({})->Info(), StatusIs(absl::StatusCode::kUnavailable));  // plain text
}

// With client certificates, a client is its certificate's subject: two certificates are two
// clients, each with the modules it uploaded.
TEST_F(SecurityTest, EachClientCertificateIsAClientOfItsOwn) {
  StartDaemon({"--tls-cert", Cert("server.pem"), "--tls-key", Cert("server.key"), "--tls-client-ca",
               Cert("ca.pem")});
  std::vector<std::unique_ptr<client::Client>> clients;
  for (const char* name : {"client", "client2"}) {
    client::ClientOptions options;
    options.tls_root_certs_pem = ReadFileBytes(Cert("ca.pem"));
    options.tls_cert_chain_pem = ReadFileBytes(Cert(std::string(name) + ".pem"));
    options.tls_private_key_pem = ReadFileBytes(Cert(std::string(name) + ".key"));
    clients.push_back(Connect(options));
  }
  auto mine = clients[0]->LoadModuleFile(testing::TestModulePath("vector_add"));
  ASSERT_THAT(mine, IsOk());
  EXPECT_THAT(clients[0]->HasModule(mine->id()), IsOkAndHolds(true));
  EXPECT_THAT(clients[1]->HasModule(mine->id()), IsOkAndHolds(false));
  EXPECT_THAT(clients[1]->UnloadModule(mine->id()), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_THAT(clients[1]->Info(), IsOk());
  EXPECT_EQ(clients[1]->Info()->devices(0).workers(), 0);
}

TEST_F(SecurityTest, MutualTlsRefusesClientsWithoutACertificate) {
  StartDaemon({"--tls-cert", Cert("server.pem"), "--tls-key", Cert("server.key"), "--tls-client-ca",
               Cert("ca.pem")});
  client::ClientOptions with_cert;
  with_cert.tls_root_certs_pem = ReadFileBytes(Cert("ca.pem"));
  with_cert.tls_cert_chain_pem = ReadFileBytes(Cert("client.pem"));
  with_cert.tls_private_key_pem = ReadFileBytes(Cert("client.key"));
  EXPECT_THAT(Connect(with_cert)->Info(), IsOk());
  client::ClientOptions without_cert;
  without_cert.tls_root_certs_pem = ReadFileBytes(Cert("ca.pem"));
  EXPECT_THAT(Connect(without_cert)->Info(), Not(IsOk()));
  client::ClientOptions foreign_cert = with_cert;  // signed by a CA the daemon does not trust
  foreign_cert.tls_cert_chain_pem = ReadFileBytes(Cert("other.pem"));
  foreign_cert.tls_private_key_pem = ReadFileBytes(Cert("other.key"));
  EXPECT_THAT(Connect(foreign_cert)->Info(), Not(IsOk()));
}

TEST_F(SecurityTest, BeyondLoopbackNeedsTlsAndAuthentication) {
  daemon_.set_listen("0.0.0.0:0");
  daemon_.set_stderr(dir_.path() + "/kprofd.log");
  EXPECT_FALSE(daemon_.Start(dir_.path() + "/cache"));
  EXPECT_THAT(
      Log(),
      HasSubstr("refusing to listen on 0.0.0.0:0 (--listen): beyond loopback kprofd needs TLS"));
  EXPECT_FALSE(daemon_.Start(dir_.path() + "/cache", {"--token-file", Cert("tokens")}));
  EXPECT_THAT(Log(), HasSubstr("or its tokens would travel in clear"));
  EXPECT_FALSE(daemon_.Start(dir_.path() + "/cache",
                             {"--tls-cert", Cert("server.pem"), "--tls-key", Cert("server.key")}));
  // A name that merely starts like a loopback address is not one.
  daemon_.set_listen("127.example.com:0");
  EXPECT_FALSE(daemon_.Start(dir_.path() + "/cache"));
  EXPECT_THAT(Log(), HasSubstr("refusing to listen on 127.example.com:0"));
  daemon_.set_listen("0.0.0.0:0");
  // TLS with a token: allowed.
  ASSERT_TRUE(
      daemon_.Start(dir_.path() + "/cache", {"--tls-cert", Cert("server.pem"), "--tls-key",
                                             Cert("server.key"), "--token-file", Cert("tokens")}))
      << Log();
  client::ClientOptions options;
  options.tls_root_certs_pem = ReadFileBytes(Cert("ca.pem"));
  options.bearer_token = kToken;
  EXPECT_THAT(Connect(options)->Info(), IsOk());
  daemon_.Stop();
  // Explicitly waived: starts, and says so loudly.
  ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache", {"--insecure-allow-unauthenticated"}));
  daemon_.Stop();
  EXPECT_THAT(Log(), HasSubstr("WITHOUT TLS and authentication"));
}

}  // namespace
}  // namespace kprof

namespace kprof {
namespace {

TEST_F(SecurityTest, WorkersCannotReadSecretsOrWriteTheCache) {
  KPROF_SKIP_UNDER_EMULATION("does not pass the Landlock system calls through");
  setenv("KPROF_TEST_TOKEN_FILE", Cert("tokens").c_str(), 1);
  setenv("KPROF_TEST_CACHE_DIR", (dir_.path() + "/cache").c_str(), 1);
  StartDaemon({"--token-file", Cert("tokens")});
  unsetenv("KPROF_TEST_TOKEN_FILE");
  unsetenv("KPROF_TEST_CACHE_DIR");
  client::ClientOptions options;
  options.bearer_token = kToken;
  auto client = Connect(options);
  auto faults = client->LoadModuleFile(testing::TestModulePath("faults"));
  ASSERT_THAT(faults, IsOk());
  v1::TimeEvaluateRequest request;
  request.mutable_call()->set_module_id(faults->id());
  request.mutable_call()->set_function("probes_sandbox");
  // 10: it read the token file; 11: it wrote into the cache; 12: /dev/null was refused.
  EXPECT_THAT(client->TimeEvaluate(request), IsOk());
  EXPECT_FALSE(std::ifstream(dir_.path() + "/cache/modules/planted").good());
}

TEST(ClientSecurity, NoBearerTokenInClearBeyondLoopback) {
  client::ClientOptions options;
  options.bearer_token = "secret";
  EXPECT_THAT(client::Client::Connect("10.1.2.3:9177", options),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("in clear")));
  EXPECT_THAT(client::Client::Connect("127.example.com:9177", options),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(client::Client::Connect("127.0.0.1:9177", options), IsOk());
  options.tls = true;
  EXPECT_THAT(client::Client::Connect("10.1.2.3:9177", options), IsOk());
}

// The kprof CLI takes its token from --token-file or $KPROF_TOKEN_FILE.
TEST_F(SecurityTest, CliSendsTheTokenFromItsFile) {
  StartDaemon({"--token-file", Cert("tokens")});
  const std::string kprof = std::string(KPROF_CLI_PATH) + " --target " + daemon_.target();
  const std::string out = dir_.path() + "/out";
  EXPECT_EQ(std::system((kprof + " info >" + out + " 2>&1").c_str()) >> 8, 1);
  EXPECT_THAT(ReadFileBytes(out), HasSubstr("kprof: UNAUTHENTICATED: no credentials"));
  EXPECT_EQ(std::system((kprof + " --token-file " + Cert("tokens") + " info >" + out).c_str()), 0);
  EXPECT_THAT(ReadFileBytes(out), HasSubstr("cpu:0"));
  EXPECT_EQ(std::system(
                ("KPROF_TOKEN_FILE=" + Cert("tokens") + " " + kprof + " modules >" + out).c_str()),
            0);
}

TEST_F(SecurityTest, TheCliSaysWhatToDoWhenTheConnectionIsWrong) {
  StartDaemon({"--tls-cert", Cert("server.pem"), "--tls-key", Cert("server.key")});
  chmod(dir_.path().c_str(), 0755);
  // Plaintext to a daemon that speaks TLS.
  auto plain = ::kprof::testing::RunKprof(daemon_.target(), "--timeout 10s info", dir_.path());
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_THAT(plain.err, HasSubstr("it may speak TLS; pass --tls-ca")) << plain.err;
  // TLS, trusting the wrong CA.
  auto wrong_ca = ::kprof::testing::RunKprof(
      daemon_.target(), "--timeout 10s --tls-ca " + Cert("other.pem") + " info", dir_.path());
  EXPECT_EQ(wrong_ca.exit_code, 1);
  EXPECT_THAT(wrong_ca.err, HasSubstr("the TLS handshake failed: is --tls-ca the CA"))
      << wrong_ca.err;
  // The right CA: no advice, an answer.
  auto right = ::kprof::testing::RunKprof(
      daemon_.target(), "--timeout 10s --tls-ca " + Cert("ca.pem") + " info", dir_.path());
  EXPECT_EQ(right.exit_code, 0) << right.err;
  // Nothing listening.
  const std::string target = daemon_.target();
  daemon_.Stop();
  auto nobody = ::kprof::testing::RunKprof(target, "--timeout 10s info", dir_.path());
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_THAT(nobody.err, HasSubstr("is kprofd running at " + target +
                                    "? (--target, or $KPROF_TARGET, names the daemon)"))
      << nobody.err;
}

// A TLS pair that is not one is named before any connection: the daemon's start and
// --check-config, and the CLI, say which file holds what.
TEST_F(SecurityTest, MistakenTlsFilesAreNamedBeforeAnyConnection) {
  chmod(dir_.path().c_str(), 0755);
  daemon_.set_stderr(dir_.path() + "/kprofd.log");
  // A key that is not the certificate's.
  EXPECT_FALSE(daemon_.Start(dir_.path() + "/cache",
                             {"--tls-cert", Cert("server.pem"), "--tls-key", Cert("other.key")}));
  EXPECT_THAT(Log(), HasSubstr("the key in --tls-key '" + Cert("other.key") +
                               "' is not the key of the certificate in --tls-cert '" +
                               Cert("server.pem") + "'"));
  EXPECT_THAT(Log(), Not(HasSubstr("cannot listen")));
  const std::string check = std::string(testing::KprofdPath()) + " --check-config --tls-cert ";
  int exit_code = 0;
  const std::string mismatched = testing::CommandOutput(
      check + Cert("server.pem") + " --tls-key " + Cert("other.key") + " 2>&1", &exit_code);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(mismatched, HasSubstr("is not the key of the certificate")) << mismatched;
  // Swapped, and a key given as the certificate.
  const std::string swapped = testing::CommandOutput(
      check + Cert("server.key") + " --tls-key " + Cert("server.pem") + " 2>&1", &exit_code);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(swapped, HasSubstr("holds a private key and --tls-key '" + Cert("server.pem") +
                                 "' a certificate: swapped?"))
      << swapped;
  const std::string key_twice = testing::CommandOutput(
      check + Cert("server.key") + " --tls-key " + Cert("server.key") + " 2>&1", &exit_code);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(key_twice, HasSubstr("--tls-cert '" + Cert("server.key") +
                                   "' holds no certificate: it holds a private key"))
      << key_twice;
  const std::string no_ca = testing::CommandOutput(
      check + Cert("server.pem") + " --tls-key " + Cert("server.key") + " --token-file " +
          Cert("tokens") + " --tls-client-ca " + Cert("tokens") + " 2>&1",
      &exit_code);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(no_ca, HasSubstr("--tls-client-ca '" + Cert("tokens") +
                               "' holds no certificate: it holds no PEM block"))
      << no_ca;
  // The CLI, before it connects: no daemon is needed to be told.
  auto client = ::kprof::testing::RunKprof("127.0.0.1:1",
                                           "--tls-ca " + Cert("ca.pem") + " --tls-cert " +
                                               Cert("client.pem") + " --tls-key " +
                                               Cert("client2.key") + " info",
                                           dir_.path());
  EXPECT_EQ(client.exit_code, 1);
  EXPECT_THAT(client.err, HasSubstr("the key in --tls-key '" + Cert("client2.key") +
                                    "' is not the key of the certificate in --tls-cert '" +
                                    Cert("client.pem") + "'"))
      << client.err;
  EXPECT_THAT(client.err, Not(HasSubstr("address list")));
  // Files from the environment are named by their variables.
  const std::string from_env = testing::CommandOutput(
      "KPROF_TLS_CA=" + Cert("ca.pem") + " KPROF_TLS_CERT=" + Cert("client.pem") +
          " KPROF_TLS_KEY=" + Cert("client2.key") + " " + testing::KprofPath() +
          " --target 127.0.0.1:1 info 2>&1",
      &exit_code);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(from_env, HasSubstr("the key in $KPROF_TLS_KEY '" + Cert("client2.key") +
                                  "' is not the key of the certificate in $KPROF_TLS_CERT"))
      << from_env;
  auto ca_key = ::kprof::testing::RunKprof("127.0.0.1:1", "--tls-ca " + Cert("ca.key") + " info",
                                           dir_.path());
  EXPECT_EQ(ca_key.exit_code, 1);
  EXPECT_THAT(ca_key.err, HasSubstr("--tls-ca '" + Cert("ca.key") +
                                    "' holds no certificate: it holds a private key"))
      << ca_key.err;
}

}  // namespace
}  // namespace kprof
