#include "base/sha256.h"

#include <openssl/evp.h>

#include "absl/strings/str_cat.h"

namespace kprof::base {

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (const char c : bytes) {
    hex.push_back(kDigits[static_cast<unsigned char>(c) >> 4]);
    hex.push_back(kDigits[static_cast<unsigned char>(c) & 0xF]);
  }
  return hex;
}

absl::StatusOr<std::string> FromHex(std::string_view hex) {
  const auto digit = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hex of odd length ", hex.size(), " (two digits a byte)"));
  }
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = digit(hex[i]), low = digit(hex[i + 1]);
    if (high < 0 || low < 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", std::string(hex.substr(i, 2)),
                                                     "' at offset ", i,
                                                     " is not hex (accepted: 0-9, a-f)"));
    }
    bytes += static_cast<char>(high * 16 + low);
  }
  return bytes;
}

std::string Sha256Hex(std::string_view bytes) {
  Sha256 hash;
  hash.Update(bytes);
  return hash.HexDigest();
}

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(context_, EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(context_); }

void Sha256::Update(std::string_view bytes) {
  EVP_DigestUpdate(context_, bytes.data(), bytes.size());
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_, digest, &length);
  return ToHex(std::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace kprof::base
