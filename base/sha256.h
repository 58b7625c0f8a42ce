// SHA-256 in lowercase hex, through OpenSSL: module ids and argument checksums.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace kprof::base {

// `bytes` in lowercase hex, two digits each.
std::string ToHex(std::string_view bytes);

// The bytes that lowercase `hex` spells (ToHex's inverse); INVALID_ARGUMENT for an odd length
// or a character that is not a lowercase hex digit.
absl::StatusOr<std::string> FromHex(std::string_view hex);

// Lowercase hex SHA-256 of `bytes`.
std::string Sha256Hex(std::string_view bytes);

// The same over bytes that arrive in pieces.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  // The digest of everything given so far; call once.
  std::string HexDigest();

 private:
  EVP_MD_CTX* context_;
};

}  // namespace kprof::base
