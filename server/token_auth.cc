#include "server/token_auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kprof::server {
namespace {

std::string Digest(std::string_view token) {
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(),
         reinterpret_cast<unsigned char*>(digest.data()));
  return digest;
}

}  // namespace

absl::StatusOr<TokenAuth> TokenAuth::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the token file '", path, "'"));
  TokenAuth auth;
  std::string line;
  while (std::getline(in, line)) {
    const std::string token(absl::StripAsciiWhitespace(line));
    if (token.empty() || token[0] == '#') continue;
    auth.digests_.push_back(Digest(token));
  }
  if (auth.digests_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token file '", path, "' holds no token (one per line)"));
  }
  return auth;
}

absl::Status TokenAuth::Check(const std::string_view* authorization) const {
  if (authorization == nullptr) {
    return absl::UnauthenticatedError(
        "no credentials: this kprofd wants 'authorization: Bearer <token>' (kprof --token-file)");
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization->substr(0, kBearer.size()) != kBearer) {
    return absl::UnauthenticatedError("the authorization header is not 'Bearer <token>'");
  }
  const std::string digest = Digest(authorization->substr(kBearer.size()));
  bool known = false;
  for (const std::string& expected : digests_) {  // no early exit: time does not tell which
    known |= CRYPTO_memcmp(expected.data(), digest.data(), digest.size()) == 0;
  }
  if (!known) return absl::UnauthenticatedError("wrong bearer token");
  return absl::OkStatus();
}

}  // namespace kprof::server
