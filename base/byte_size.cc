#include "base/byte_size.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kprof::base {

std::optional<uint64_t> ParseByteSize(std::string_view given) {
  const absl::string_view text =
      absl::StripAsciiWhitespace(absl::string_view(given.data(), given.size()));
  size_t digits = 0;
  while (digits < text.size() && (absl::ascii_isdigit(text[digits]) || text[digits] == '.')) {
    ++digits;
  }
  const absl::string_view number = text.substr(0, digits);
  const std::string unit =
      absl::AsciiStrToLower(absl::StripLeadingAsciiWhitespace(text.substr(digits)));
  if (number.empty()) return std::nullopt;
  double multiplier = 0;
  struct Unit {
    const char* name;
    double multiplier;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},       {"b", 1},        {"k", 0x1p10},   {"kib", 0x1p10}, {"kb", 1e3},
      {"m", 0x1p20}, {"mib", 0x1p20}, {"mb", 1e6},     {"g", 0x1p30},   {"gib", 0x1p30},
      {"gb", 1e9},   {"t", 0x1p40},   {"tib", 0x1p40}, {"tb", 1e12}};
  for (const Unit& u : kUnits) {
    if (unit == u.name) multiplier = u.multiplier;
  }
  if (multiplier == 0) return std::nullopt;
  if (number.find('.') == absl::string_view::npos) {
    uint64_t whole = 0;
    if (!absl::SimpleAtoi(number, &whole)) return std::nullopt;
    const auto factor = static_cast<uint64_t>(multiplier);
    if (whole != 0 && factor > UINT64_MAX / whole) return std::nullopt;
    return whole * factor;
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !std::isfinite(value) || value < 0) return std::nullopt;
  const double bytes = std::floor(value * multiplier);
  if (bytes >= 0x1p64) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::string FormatByteSize(uint64_t bytes) {
  // Up to TiB, as ParseByteSize reads: a petabyte is "1024 TiB".
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit + 1 < 5 && bytes >= (uint64_t{1} << (10 * (unit + 1)))) ++unit;
  const uint64_t size = uint64_t{1} << (10 * unit);
  if (bytes % size == 0) return absl::StrCat(bytes / size, " ", kUnits[unit]);
  double value = static_cast<double>(bytes) / static_cast<double>(size);
  // Three significant digits; what rounds up to 1024 of a unit is 1.00 of the next.
  if (unit + 1 < 5 && value >= 1023.5) {
    ++unit;
    value /= 1024;
  }
  const int decimals = value < 9.995 ? 2 : value < 99.95 ? 1 : 0;
  return absl::StrFormat("%.*f %s", decimals, value, kUnits[unit]);
}

}  // namespace kprof::base
